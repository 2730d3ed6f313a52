//! Approval from the phone (docs/decisions.md#decision-11-approval-from-the-phone): a remote turn's
//! tool call that needs approval is left pending, the turn's chats (its audience,
//! docs/security.md#who-sees-what) are asked with a short id, and the first answer — the local
//! confirm, a trusted `/approve` or `/deny`, or the deadline — settles it through
//! `Host::resolve_tool_call`. Every side hears who decided, and each request message is
//! edited to its outcome in place, its buttons gone, so a decided request never looks live
//! (a second press on it decides nothing and says so).

use super::delivery::Delivery;
use super::{Bridge, scope};
use crate::core::approvals::{self, AnswerOutcome, Choice, Decider, ID_LEN, Settled};
use crate::core::commands::RemoteCommand;
use crate::core::scope::{AskReason, ask_detail};
use crate::core::state::ConversationTarget;
use crate::core::tool_policy;
use crate::host::Host;
use crate::keys::{ConversationKey, Identity};
use crate::model::{
    ApprovalRequest, Level, OutboundKind, PathAccess, ToolAnswer, ToolCall, ToolDecision,
};

/// One approval's request as the chats got it: what edits it to its outcome (or its
/// details) later.
#[derive(Debug, Clone)]
pub(super) struct Request {
    /// The request text as sent.
    text: String,
    /// What was asked, one line: heads the outcome that replaces the request.
    asked: String,
    /// The request messages that can be edited: one per chat it reached.
    posted: Vec<(ConversationTarget, String)>,
    /// `/approve <id> turn` is offered.
    for_turn: bool,
    /// Why it asks and what it touches, for `/details`.
    why: String,
    paths: Vec<(&'static str, String)>,
}

/// The reply to a chat's answer to an approval.
pub(super) enum ChatAnswer {
    /// It decided the approval (or showed its details): said in the chat, where everyone
    /// asked should see it.
    Said(String),
    /// It changed nothing (already decided, a wrong id, a usage error): only the one who
    /// answered needs to hear why, so a press is answered to the presser alone.
    ToAnswerer(String),
}

/// Random bytes drawn per id attempt round: several candidates, so a collision with a
/// pending id costs no second host call.
const ID_CANDIDATES: usize = 4;

impl Bridge {
    /// Opens a pending approval for `call`, asked because of `reason`: the chats are asked
    /// (with the turn choice when `for_turn`), the host parks the call and asks locally.
    /// Returns what `on_tool_call` answers.
    pub(super) fn ask_for_approval(
        &mut self,
        host: &mut dyn Host,
        call: &ToolCall,
        reason: &AskReason,
        for_turn: bool,
    ) -> ToolAnswer {
        let tool = call.name.as_str();
        let detail = ask_detail(reason);
        let detail = detail.as_deref();
        let now = host.now_ms();
        // Settle what is overdue first, so its id is free and its chats hear of it.
        self.expire_approvals(host);
        let id = self.fresh_approval_id(host);
        let timeout_ms = self.config.remote_approval.timeout_ms;
        self.pending
            .approvals
            .open(&id, tool, now.saturating_add(timeout_ms));
        host.log(
            Level::Info,
            "remote approval requested",
            &[("tool", tool.to_string()), ("id", id.clone())],
        );
        self.pending
            .subjects
            .insert(id.clone(), scope::subject(call));
        let text = approvals::request_text(&id, tool, detail, timeout_ms, for_turn);
        // Buttons where the platform has them; their presses arrive as the same commands
        // the text names, so everything below treats them alike.
        let buttons = approvals::request_buttons(&id, for_turn);
        // Only the turn's own chats: another chat would learn what a private prompt made
        // the agent do, and could answer for it.
        let audience = self.audience();
        let mut posted = Vec::new();
        for target in &audience {
            if let Ok(Delivery::Sent(receipt)) =
                self.deliver_with_buttons(host, target, OutboundKind::Notice, &text, None, &buttons)
                && let Some(key) = receipt.edit_key
            {
                posted.push((target.clone(), key));
            }
        }
        let on = detail.map(|d| format!(" on {d}")).unwrap_or_default();
        self.pending.requests.insert(
            id.clone(),
            Request {
                asked: format!(
                    "Approval {id}: a messenger-started turn asked to run '{tool}'{on}."
                ),
                text,
                posted,
                for_turn,
                why: why_asked(reason, tool),
                paths: call
                    .paths
                    .iter()
                    .map(|p| (access_word(p.access), p.path.clone()))
                    .collect(),
            },
        );
        self.pending.audiences.insert(id.clone(), audience);
        self.request_ticks(host);
        ToolAnswer::Pending(ApprovalRequest {
            id: id.clone(),
            title: tool_policy::approval_title(tool),
            message: format!(
                "{} (approval {id}; the chat that started the turn may answer with /approve {id})",
                tool_policy::approval_question(tool, detail)
            ),
        })
    }

    fn fresh_approval_id(&mut self, host: &mut dyn Host) -> String {
        for _ in 0..4 {
            let bytes = host.random_bytes(u32::try_from(ID_LEN * ID_CANDIDATES).unwrap_or(16));
            if let Some(id) = self.pending.approvals.new_id(&bytes) {
                return id;
            }
        }
        // Only a host whose randomness repeats gets here; a counter keeps ids unique.
        self.pending.fallback += 1;
        format!("x{}", self.pending.fallback)
    }

    /// The person at the terminal answered approval `id`.
    pub fn on_local_answer(&mut self, host: &mut dyn Host, id: &str, approved: bool) {
        let now = host.now_ms();
        self.expire_approvals(host);
        match self
            .pending
            .approvals
            .answer(id, approved, Decider::Local, now)
        {
            AnswerOutcome::Decided(settled) => self.settle(host, &settled, None),
            AnswerOutcome::AlreadyDecided(settled) => {
                host.notify(Level::Info, &approvals::already_decided_text(&settled));
            }
            AnswerOutcome::Unknown => host.notify(Level::Warning, &approvals::unknown_id_text(id)),
        }
    }

    /// `/approve <id>` or `/deny <id>` from `identity` in `conversation`; returns the
    /// reply for that chat, and whether it concerns the one who answered alone. Only an identity this session trusts decides: trust by
    /// pairing or `allowUsers`, never merely `requirePairing: false` (an approval lets a
    /// tool run that the policy held back, so "anyone may prompt" is not enough).
    pub(super) fn answer_from_chat(
        &mut self,
        host: &mut dyn Host,
        command: RemoteCommand,
        args: &str,
        identity: &Identity,
        conversation: &ConversationKey,
    ) -> ChatAnswer {
        let name = command.name();
        let mut words = args.split_whitespace();
        let (Some(id), option, None) = (words.next(), words.next(), words.next()) else {
            return ChatAnswer::ToAnswerer(format!(
                "Usage: /{name} <id> (the id is in the approval request)."
            ));
        };
        let choice = match (command, option.map(str::to_lowercase).as_deref()) {
            (RemoteCommand::Approve, None) => Choice::Once,
            (RemoteCommand::Approve, Some("turn")) => Choice::Turn,
            (RemoteCommand::Deny, None) => Choice::Deny,
            (RemoteCommand::Details, None) => Choice::Once,
            _ => {
                return ChatAnswer::ToAnswerer(
                    "Usage: /approve <id>, /approve <id> turn, /deny <id> or /details <id> (the id is in the approval request)."
                        .to_owned(),
                );
            }
        };
        if !self.may_decide(identity) {
            host.log(
                Level::Warning,
                "approval answer from an untrusted identity refused",
                &[("identity", identity.to_string())],
            );
            return ChatAnswer::ToAnswerer(
                "Only a paired identity can answer approvals. Pair this chat first.".into(),
            );
        }
        let now = host.now_ms();
        self.expire_approvals(host);
        // Asked elsewhere: this chat was never shown the request, so an id typed here is a
        // guess or a leak, and answering it would let one chat decide another's turn.
        if let Some(audience) = self.pending.audiences.get(id)
            && !audience.iter().any(|t| t.key() == *conversation)
        {
            host.log(
                Level::Warning,
                "approval answer from a chat that was not asked refused",
                &[("identity", identity.to_string()), ("id", id.to_string())],
            );
            return ChatAnswer::ToAnswerer(format!(
                "Approval {id} was not asked in this chat. Only the chat that started the turn, or the terminal, can answer it."
            ));
        }
        if command == RemoteCommand::Details {
            // Said in the chat: the details may be long (a press's private answer is
            // short on some platforms), and they are shown on the request anyway.
            return ChatAnswer::Said(self.show_details(host, id, conversation, now));
        }
        // A turn-wide yes only where the request offered it: a protected path or a path
        // outside the working directory is asked about every time.
        let key = approvals::normalize_id(id);
        let offered = self.pending.requests.get(&key).is_some_and(|r| r.for_turn);
        let (choice, once_only) = match choice {
            Choice::Turn if !offered => (Choice::Once, true),
            other => (other, false),
        };
        match self
            .pending
            .approvals
            .choose(id, choice, Decider::Remote(identity.clone()), now)
        {
            AnswerOutcome::Decided(settled) => {
                self.settle(host, &settled, Some(conversation));
                let text = approvals::settled_text(&settled);
                ChatAnswer::Said(if once_only {
                    format!(
                        "{text} Approved once only: this call is asked about each time (a protected path, or one outside the working directory), so it cannot be allowed for the whole turn."
                    )
                } else {
                    text
                })
            }
            AnswerOutcome::AlreadyDecided(settled) => {
                ChatAnswer::ToAnswerer(approvals::already_decided_text(&settled))
            }
            AnswerOutcome::Unknown => ChatAnswer::ToAnswerer(approvals::unknown_id_text(id)),
        }
    }

    /// `/details <id>` in `conversation`: the request there is edited to show why it asks
    /// and what the call touches, its deciding buttons kept; where it cannot be edited,
    /// the details are the reply.
    fn show_details(
        &mut self,
        host: &mut dyn Host,
        id: &str,
        conversation: &ConversationKey,
        now: u64,
    ) -> String {
        let key = approvals::normalize_id(id);
        let (Some(request), Some(deadline)) = (
            self.pending.requests.get(&key).cloned(),
            self.pending.approvals.deadline(&key),
        ) else {
            return match self.pending.approvals.settled(&key) {
                Some(settled) => format!(
                    "Approval {} is no longer waiting. {}",
                    settled.id,
                    approvals::settled_text(&settled)
                ),
                None => approvals::unknown_id_text(id),
            };
        };
        let paths: Vec<(&str, &str)> = request
            .paths
            .iter()
            .map(|(access, path)| (*access, path.as_str()))
            .collect();
        let details = approvals::details_text(
            self.pending_tool(&key),
            &request.why,
            &paths,
            deadline.saturating_sub(now),
        );
        let buttons = approvals::decision_buttons(&key, request.for_turn);
        let text = format!("{}\n\n{details}", request.text);
        let mut shown = false;
        for (target, edit_key) in &request.posted {
            if target.key() == *conversation {
                shown |= matches!(
                    self.deliver_with_buttons(
                        host,
                        target,
                        OutboundKind::Notice,
                        &text,
                        Some(edit_key.clone()),
                        &buttons,
                    ),
                    Ok(Delivery::Sent(_) | Delivery::Queued)
                );
            }
        }
        if shown {
            format!("Details of approval {key} are shown on the request above.")
        } else {
            details
        }
    }

    fn pending_tool(&self, id: &str) -> &str {
        self.pending.subjects.get(id).map_or("the tool", |subject| {
            subject.split('`').nth(1).unwrap_or(subject.as_str())
        })
    }

    /// Settles every overdue approval as blocked and says so everywhere.
    pub(super) fn expire_approvals(&mut self, host: &mut dyn Host) {
        let now = host.now_ms();
        for settled in self.pending.approvals.expire(now) {
            self.settle(host, &settled, None);
        }
    }

    /// Gives the verdict to the host (exactly once per id: `Approvals` hands each id out
    /// settled once), shows it on the cards, and tells the terminal and the chats — all
    /// but `answered_in`, whose command reply says it.
    fn settle(
        &mut self,
        host: &mut dyn Host,
        settled: &Settled,
        answered_in: Option<&ConversationKey>,
    ) {
        let narrowing = self.pending.narrowing.remove(&settled.id);
        let decision = match (&settled.by, settled.approved) {
            // A yes lets the call run as it would have without the question: a search
            // still leaves the protected paths out.
            (_, true) => match narrowing {
                Some(arguments) => ToolDecision::Narrowed(arguments),
                None => ToolDecision::Allow,
            },
            (Decider::Timeout, false) => {
                ToolDecision::Block(approvals::timeout_reason(&settled.tool))
            }
            (_, false) => ToolDecision::Block(tool_policy::declined_reason(&settled.tool)),
        };
        host.resolve_tool_call(&settled.id, &decision);
        let request = self.pending.requests.remove(&settled.id);
        if settled.approved && settled.for_turn && request.as_ref().is_some_and(|r| r.for_turn) {
            self.turn_or_adopt()
                .allowed_for_turn
                .insert(settled.tool.clone());
        }
        // Each request message becomes its outcome, buttons gone: a decided request that
        // still showed Approve / Deny would invite presses that decide nothing.
        if let Some(request) = &request {
            let outcome = approvals::outcome_text(settled, &request.asked);
            for (target, key) in &request.posted {
                let _ = self.deliver(
                    host,
                    target,
                    OutboundKind::Notice,
                    &outcome,
                    Some(key.clone()),
                );
            }
        }
        let subject = self
            .pending
            .subjects
            .remove(&settled.id)
            .unwrap_or_else(|| format!("`{}`", settled.tool));
        let verdict = match (&settled.by, settled.approved) {
            (Decider::Timeout, _) => format!("blocked {subject}: no answer in time"),
            (by, true) if settled.for_turn => {
                format!(
                    "approved {subject} {} for the rest of the turn",
                    by.describe()
                )
            }
            (by, true) => format!("approved {subject} {}", by.describe()),
            (by, false) => format!("denied {subject} {}", by.describe()),
        };
        self.work.verdicts.push(verdict);
        let by = match &settled.by {
            Decider::Local => "local".to_string(),
            Decider::Remote(identity) => identity.to_string(),
            Decider::Timeout => "timeout".to_string(),
        };
        host.log(
            Level::Info,
            "remote approval settled",
            &[
                ("id", settled.id.clone()),
                ("tool", settled.tool.clone()),
                ("approved", settled.approved.to_string()),
                ("by", by),
            ],
        );
        self.show_verdict(host, &settled.tool, &decision);
        let text = approvals::settled_text(settled);
        if settled.by != Decider::Local {
            host.notify(
                if settled.approved {
                    Level::Info
                } else {
                    Level::Warning
                },
                &text,
            );
        }
        // The verdict goes where the request went (still reachable), not to every chat.
        let asked = self
            .pending
            .audiences
            .remove(&settled.id)
            .unwrap_or_else(|| self.audience());
        let reachable = self.reachable();
        for target in asked {
            if Some(&target.key()) != answered_in && reachable.contains(&target) {
                self.reply(host, &target, &text);
            }
        }
        self.request_ticks(host);
    }
}

/// Why a call was asked about, for `/details`.
fn why_asked(reason: &AskReason, tool: &str) -> String {
    match reason {
        AskReason::AskTool => format!("'{tool}' is in the scope's askTools"),
        AskReason::EachCall => {
            "remoteToolApproval is each: every tool call of a remote turn is asked about".into()
        }
        other => format!(
            "it touches {}",
            ask_detail(other).unwrap_or_else(|| "something the scope protects".into())
        ),
    }
}

/// How `/details` names a path's access.
fn access_word(access: PathAccess) -> &'static str {
    match access {
        PathAccess::Read => "reads",
        PathAccess::Write => "writes",
        PathAccess::Glob => "filters by",
        PathAccess::Unjudgeable => "names (unreadable)",
    }
}
