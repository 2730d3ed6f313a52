//! The agent's questions answered from the phone (docs/pi.md#questions-pi-asks): a question is asked in the
//! current turn's chats (docs/security.md#who-sees-what) with buttons where they help and at
//! the terminal, and the first fitting answer — a trusted chat's button, `/answer`, or plain
//! reply, the terminal's `/connect answer`, or the deadline — goes back to the agent through
//! `Host::answer_question`, exactly once. Every side hears how it was answered.

use super::Bridge;
use crate::core::approvals::{Decider, ID_LEN};
use crate::core::questions::{self, AnswerOutcome, Closed, DEFAULT_TIMEOUT_MS};
use crate::host::Host;
use crate::keys::{ConversationKey, Identity};
use crate::model::{AgentQuestion, Level, Note, OutboundKind};

/// Random bytes drawn per id attempt: several candidates, so a collision costs no second
/// host call.
const ID_CANDIDATES: usize = 4;

impl Bridge {
    /// The agent asks `question` and waits: the chats of the turn and the terminal are
    /// asked; the answer goes back later (or now, if nobody can be asked).
    pub fn on_question(&mut self, host: &mut dyn Host, question: AgentQuestion) {
        self.expire_questions(host);
        if self.pending.questions.holds_host_id(&question.id) {
            // One host question answered twice would give the agent two answers; the one
            // already open keeps it.
            host.log(
                Level::Warning,
                "agent question asked twice; the open one answers it",
                &[],
            );
            return;
        }
        let now = host.now_ms();
        // pi's own timeout: it goes on without an answer then, so the chat must not be
        // left believing it can still answer. None: pi would wait for ever.
        let timeout_ms = question
            .timeout_ms
            .filter(|ms| *ms > 0)
            .unwrap_or(DEFAULT_TIMEOUT_MS);
        let id = self.fresh_question_id(host);
        let text = questions::question_text(&id, &question, timeout_ms);
        let buttons = questions::question_buttons(&id, &question.kind);
        // The turn's own chats only: another chat would read what a private prompt made
        // the agent ask, and could answer for it.
        let audience = self.audience();
        let asked = self.publish_to(host, &audience, OutboundKind::Notice, &text, &buttons);
        host.log(
            Level::Info,
            "agent question asked",
            &[("id", id.clone()), ("chats", asked.to_string())],
        );
        host.notify(
            Level::Info,
            &format!(
                "{text}\nAnswer here with /{} answer {id} <answer>.",
                self.config.local_command
            ),
        );
        self.pending
            .questions
            .open(&id, question, now.saturating_add(timeout_ms), audience);
        self.request_ticks(host);
    }

    fn fresh_question_id(&mut self, host: &mut dyn Host) -> String {
        for _ in 0..4 {
            let bytes = host.random_bytes(u32::try_from(ID_LEN * ID_CANDIDATES).unwrap_or(16));
            if let Some(id) = self.pending.questions.new_id(&bytes) {
                return id;
            }
        }
        // Only a host whose randomness repeats gets here; a counter keeps ids unique.
        self.pending.fallback += 1;
        format!("q{}", self.pending.fallback)
    }

    /// The person at the agent's own terminal answered first, in the dialog the agent
    /// opened there (pi's TUI): the chats hear so, and the agent gets that answer.
    pub fn on_local_question_answer(
        &mut self,
        host: &mut dyn Host,
        host_id: &str,
        answer: crate::model::QuestionAnswer,
    ) {
        let now = host.now_ms();
        self.expire_questions(host);
        match self
            .pending
            .questions
            .answer_by_host_id(host_id, answer, now)
        {
            AnswerOutcome::Answered(closed) => self.settle_question(host, &closed, None),
            AnswerOutcome::AlreadyClosed(closed) => {
                host.notify(Level::Info, &questions::already_closed_text(&closed));
            }
            // Not one the bridge holds (asked before a restart): nothing to tell anyone.
            AnswerOutcome::Unknown | AnswerOutcome::Unfit(_) => host.log(
                Level::Info,
                "local answer to a question the bridge does not hold",
                &[],
            ),
        }
    }

    /// `/connect answer <id> <answer>` at the terminal.
    pub(super) fn answer_question_locally(&mut self, host: &mut dyn Host, args: &str) -> Note {
        let (id, text) = split_id(args);
        if id.is_empty() {
            return Note::new(
                Level::Warning,
                format!(
                    "Usage: /{} answer <id> <answer> (the id is in the question).",
                    self.config.local_command
                ),
            );
        }
        let now = host.now_ms();
        self.expire_questions(host);
        match self.pending.questions.answer(id, text, Decider::Local, now) {
            AnswerOutcome::Answered(closed) => {
                self.settle_question(host, &closed, None);
                Note::new(Level::Info, questions::closed_text(&closed))
            }
            AnswerOutcome::Unfit(hint) => Note::new(Level::Warning, hint),
            AnswerOutcome::AlreadyClosed(closed) => {
                Note::new(Level::Info, questions::already_closed_text(&closed))
            }
            AnswerOutcome::Unknown => Note::new(Level::Warning, questions::unknown_id_text(id)),
        }
    }

    /// `/answer <id> <answer>` (typed, or a button's press) from `identity` in
    /// `conversation`; returns the reply for that chat. Only an identity this session trusts
    /// answers (pairing or `allowUsers`, never merely `requirePairing: false`: an answer
    /// steers what the agent does next, as an approval does), and only in a chat the
    /// question was asked in.
    pub(super) fn answer_question_from_chat(
        &mut self,
        host: &mut dyn Host,
        args: &str,
        identity: &Identity,
        conversation: &ConversationKey,
    ) -> String {
        let (id, text) = split_id(args);
        if id.is_empty() {
            return "Usage: /answer <id> <answer> (the id is in the question).".into();
        }
        if !self.may_answer(identity) {
            host.log(
                Level::Warning,
                "question answer from an untrusted identity refused",
                &[("identity", identity.to_string())],
            );
            return "Only a paired identity can answer the agent's questions. Pair this chat first."
                .into();
        }
        self.expire_questions(host);
        if let Some(asked_in) = self.pending.questions.asked_in(id)
            && !asked_in.iter().any(|t| t.key() == *conversation)
        {
            host.log(
                Level::Warning,
                "question answer from a chat that was not asked refused",
                &[("identity", identity.to_string()), ("id", id.to_string())],
            );
            return format!(
                "Question {id} was not asked in this chat. Only the chat of the turn, or the terminal, can answer it."
            );
        }
        self.answer_question(host, id, text, identity, conversation)
    }

    /// A question asked in `conversation` is open and `identity` may answer it: a plain
    /// message from them there is the answer ("reply with your answer"), not a new prompt.
    /// Otherwise the message goes on as it would have.
    pub(super) fn question_waits_for(
        &mut self,
        host: &mut dyn Host,
        identity: &Identity,
        conversation: &ConversationKey,
    ) -> bool {
        self.expire_questions(host);
        self.may_answer(identity) && self.pending.questions.waiting_in(conversation).is_some()
    }

    /// Answers the oldest question open in `conversation` with a plain message (see
    /// [`Self::question_waits_for`]); returns the reply for that chat.
    pub(super) fn reply_as_answer(
        &mut self,
        host: &mut dyn Host,
        text: &str,
        identity: &Identity,
        conversation: &ConversationKey,
    ) -> String {
        match self.pending.questions.waiting_in(conversation) {
            Some(id) => self.answer_question(host, &id, text, identity, conversation),
            None => "No question is waiting here any more.".into(),
        }
    }

    fn may_answer(&self, identity: &Identity) -> bool {
        self.may_decide(identity)
    }

    fn answer_question(
        &mut self,
        host: &mut dyn Host,
        id: &str,
        text: &str,
        identity: &Identity,
        conversation: &ConversationKey,
    ) -> String {
        let now = host.now_ms();
        match self
            .pending
            .questions
            .answer(id, text, Decider::Remote(identity.clone()), now)
        {
            AnswerOutcome::Answered(closed) => {
                self.settle_question(host, &closed, Some(conversation));
                questions::closed_text(&closed)
            }
            AnswerOutcome::Unfit(hint) => format!("{hint} (question {id})"),
            AnswerOutcome::AlreadyClosed(closed) => questions::already_closed_text(&closed),
            AnswerOutcome::Unknown => questions::unknown_id_text(id),
        }
    }

    /// Dismisses every question whose time ran out, and says so where it was asked.
    pub(super) fn expire_questions(&mut self, host: &mut dyn Host) {
        let now = host.now_ms();
        for closed in self.pending.questions.expire(now) {
            self.settle_question(host, &closed, None);
        }
    }

    /// Gives the answer to the host (exactly once per question: `Questions` hands each out
    /// closed once) and tells the terminal and the chats it was asked in — all but
    /// `answered_in`, whose command reply says it.
    fn settle_question(
        &mut self,
        host: &mut dyn Host,
        closed: &Closed,
        answered_in: Option<&ConversationKey>,
    ) {
        host.answer_question(&closed.host_id, &closed.answer);
        let by = match &closed.by {
            Decider::Local => "local".to_string(),
            Decider::Remote(identity) => identity.to_string(),
            Decider::Timeout => "timeout".to_string(),
        };
        // Never the answer itself in the log: typed text may hold anything (I2).
        host.log(
            Level::Info,
            "agent question answered",
            &[("id", closed.id.clone()), ("by", by)],
        );
        let text = questions::closed_text(closed);
        if closed.by != Decider::Local {
            host.notify(Level::Info, &text);
        }
        let reachable = self.reachable();
        for target in &closed.asked_in {
            if Some(&target.key()) != answered_in && reachable.contains(target) {
                self.reply(host, target, &text);
            }
        }
        self.request_ticks(host);
    }
}

/// `<id> <answer…>`: the first word, and the rest as typed (trimmed).
fn split_id(args: &str) -> (&str, &str) {
    let args = args.trim();
    match args.find(char::is_whitespace) {
        Some(at) => (&args[..at], args[at..].trim()),
        None => (args, ""),
    }
}
