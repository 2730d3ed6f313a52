//! Turns: one progress card per turn per conversation, edited in place (I20, I23), and
//! the final reply when the turn settles.
//!
//! Updates are throttled per conversation
//! (docs/decisions.md#decision-4-progress-is-throttled-per-conversation-with-a-trailing-edge) with
//! a trailing edge: a throttled update is kept and shown once the interval has passed (through a
//! tick), so a card never ends on `▶ tool` for a tool that already finished.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::Bridge;
use super::delivery::Delivery;
use crate::core::config::schema::UsageFooter;
use crate::core::progress;
use crate::core::scope::Scope;
use crate::core::session_commands;
use crate::core::state::{CardRecord, ConversationTarget, PromptMark};
use crate::host::Host;
use crate::keys::ConversationKey;
use crate::model::{
    AgentEvent, OutboundKind, Reaction, SendError, SessionCommand, SessionReply, TurnOrigin,
};

/// Lines a card keeps: enough to see the recent steps, short enough for a phone.
const CARD_LINES: usize = 8;
/// Characters of an agent's notice a card shows: one line under the steps, not a log.
const NOTICE_CHARS: usize = 120;

/// One conversation's card in the current turn.
#[derive(Debug, Default)]
struct Card {
    /// Handle of the posted card; `None` before the first post or after a refused edit
    /// (the handle is never reused then, I21).
    edit_key: Option<String>,
    /// When the card was last sent.
    sent_at: Option<u64>,
    /// What the card shows now; an identical update is not sent (Telegram refuses an
    /// edit that changes nothing).
    shown: Option<String>,
    /// The platform asked to wait until then (ms); the update stays pending until it.
    not_before: u64,
    /// The draft this chat shows now (`transport.draft`); an identical one is not sent.
    draft_shown: Option<String>,
    /// When the draft was last sent: drafts keep the card's pace.
    draft_sent_at: Option<u64>,
}

/// The turn in progress.
#[derive(Debug)]
pub(super) struct Turn {
    /// Where the turn came from (the remote tool policy applies to remote turns only).
    pub(super) origin: TurnOrigin,
    lines: Vec<String>,
    last_assistant: Option<String>,
    cards: BTreeMap<ConversationKey, (ConversationTarget, Card)>,
    /// Tools blocked by `on_tool_call` whose start and end events, if the host still sends
    /// them, must not turn `⊘ tool (blocked)` into "ran". Matched by name, oldest first:
    /// the contract carries no call id, so two parallel calls of one tool, one blocked and
    /// one allowed, can still be told apart only in order.
    blocked: Vec<String>,
    /// Blocked calls whose start event came; their end event is swallowed too.
    blocked_running: Vec<String>,
    /// The scope this remote turn started with; config changed mid-turn does not reach it
    /// (docs/decisions.md#decision-16-scoped-remote-turns). `None` for local turns until a call
    /// needs one.
    pub(super) scope: Option<Arc<Scope>>,
    /// The chats this turn answers: whose prompt started it and who steered into it
    /// (docs/security.md#who-sees-what; `audience.rs` decides who that is).
    pub(super) audience: Vec<ConversationTarget>,
    /// Those prompts' messages, where the platform gave them ids: what the turn's
    /// reactions and its done message name.
    pub(super) prompts: Vec<PromptMark>,
    /// Tools a trusted answer let run unasked for the rest of this turn
    /// (`/approve <id> turn`); they end with the turn. Only asks that allow it reach here
    /// (never a protected path, never a call outside the working directory).
    pub(super) allowed_for_turn: BTreeSet<String>,
    /// The agent's latest notice (an extension's notify or status), shown under the steps:
    /// one line that the next replaces, so notices never become messages of their own.
    notice: Option<String>,
    /// What may show of the answer being written (`bridge.streamPreview`), already held
    /// back and redacted ([`session_commands::safe_draft`]): the card shows its end, a
    /// platform draft far more.
    draft: Option<String>,
    /// The draft stream's id on platforms that stream drafts: one per turn, never 0.
    draft_id: u64,
}

impl Turn {
    pub(super) fn new(origin: TurnOrigin) -> Self {
        Turn {
            origin,
            lines: Vec::new(),
            last_assistant: None,
            cards: BTreeMap::new(),
            blocked: Vec::new(),
            blocked_running: Vec::new(),
            scope: None,
            audience: Vec::new(),
            prompts: Vec::new(),
            allowed_for_turn: BTreeSet::new(),
            notice: None,
            draft: None,
            draft_id: 1,
        }
    }

    /// A turn known only from the state document (after a restart): its cards and their
    /// edit handles, nothing shown yet, and the chats it answers.
    pub(super) fn adopt(
        origin: TurnOrigin,
        cards: &[CardRecord],
        audience: &[ConversationTarget],
        prompts: &[PromptMark],
    ) -> Self {
        let mut turn = Turn::new(origin);
        turn.audience = audience.to_vec();
        turn.prompts = prompts.to_vec();
        for card in cards {
            turn.cards.insert(
                card.target.key(),
                (
                    card.target.clone(),
                    Card {
                        edit_key: card.edit_key.clone(),
                        ..Card::default()
                    },
                ),
            );
        }
        turn
    }

    /// Each card's conversation and edit handle.
    pub(super) fn card_handles(&self) -> impl Iterator<Item = (&ConversationTarget, Option<&str>)> {
        self.cards
            .values()
            .map(|(target, card)| (target, card.edit_key.as_deref()))
    }

    /// Lets the next update of every card through at once (a platform's own wait still
    /// holds): the turn-start card does not count against the throttle.
    fn reopen_throttle(&mut self) {
        for (_, card) in self.cards.values_mut() {
            card.sent_at = None;
        }
    }

    /// Forgets the cards (the turn is over for them).
    pub(super) fn clear_cards(&mut self) {
        self.cards.clear();
    }

    /// The card's last text: what it shows, with `line` under it (alone when nothing but
    /// "thinking…" was shown).
    pub(super) fn final_text(&self, line: &str) -> String {
        if self.lines.is_empty() {
            return line.to_string();
        }
        format!("{}\n{line}", self.text(true))
    }

    /// Shows `name` as blocked; its start and end events, if any, are not shown as a run.
    pub(super) fn block_tool(&mut self, name: &str) {
        self.lines.push(progress::tool_blocked_label(name));
        self.blocked.push(name.to_string());
    }

    /// `name` was allowed: a blocked call of the same tool that never reported is over.
    pub(super) fn allow_tool(&mut self, name: &str) {
        self.blocked.retain(|b| b != name);
    }

    /// Takes the oldest blocked call of `name` out of `list`; true when there was one.
    fn take(list: &mut Vec<String>, name: &str) -> bool {
        match list.iter().position(|b| b == name) {
            Some(i) => {
                list.remove(i);
                true
            }
            None => false,
        }
    }

    /// The card's text; `with_preview` adds the end of the answer being written (not for a
    /// chat that sees it as a platform draft instead).
    fn text(&self, with_preview: bool) -> String {
        let steps = if self.lines.is_empty() {
            progress::thinking_label()
        } else {
            let skip = self.lines.len().saturating_sub(CARD_LINES);
            self.lines[skip..].join("\n")
        };
        let steps = match self.draft.as_deref().filter(|_| with_preview) {
            Some(draft) => format!(
                "{steps}\n✎ {}",
                session_commands::tail(draft, session_commands::PREVIEW_CHARS)
            ),
            None => steps,
        };
        match &self.notice {
            Some(notice) => format!("{steps}\nℹ {notice}"),
            None => steps,
        }
    }

    /// Shows `text` as the card's notice line: its first line, shortened; blank clears it.
    fn set_notice(&mut self, text: &str) {
        let line = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        self.notice = if line.is_empty() {
            None
        } else if line.chars().count() <= NOTICE_CHARS {
            Some(line.to_string())
        } else {
            let mut short: String = line.chars().take(NOTICE_CHARS - 1).collect();
            short.push('…');
            Some(short)
        };
    }

    /// Replaces the running line of `name` with its end label, or appends.
    fn finish_tool(&mut self, name: &str, ok: bool) {
        let running = progress::tool_start_label(name);
        let done = progress::tool_end_label(name, ok);
        match self.lines.iter().rposition(|l| *l == running) {
            Some(i) => self.lines[i] = done,
            None => self.lines.push(done),
        }
    }
}

impl Bridge {
    /// Follows what the agent is doing.
    pub fn on_agent_event(&mut self, host: &mut dyn Host, event: AgentEvent) {
        self.work.observe(&event);
        if let AgentEvent::TurnStarted(origin) = event {
            let mut turn = Turn::new(origin);
            if origin == TurnOrigin::Remote {
                turn.scope = Some(self.current_scope());
            }
            // A new stream per turn: a platform animates drafts of one id as one message.
            turn.draft_id = (host.now_ms() % (1 << 31)).max(1);
            // Before the first card: the "thinking…" card already goes only to the audience.
            (turn.audience, turn.prompts) = self.take_audience(origin);
            self.turn = Some(turn);
            self.refresh_cards(host, true);
            // The "thinking…" card re-opens the throttle (as in the original): the first
            // tool of the turn shows at once instead of an interval later (a minute with
            // `progressMinIntervalMs: 60000`). Later updates are throttled as before.
            if let Some(turn) = self.turn.as_mut() {
                turn.reopen_throttle();
            }
            self.record_turn_start(host, origin);
            return;
        }
        // A notice belongs on a turn's card; with no turn there is no card, and a message
        // of its own per notice would let a chatty extension flood the chats.
        if let AgentEvent::Notice(text) = &event {
            if let Some(turn) = self.turn.as_mut() {
                turn.set_notice(text);
                self.refresh_cards(host, false);
            }
            return;
        }
        // The answer as it is written: on the card, edited with the card's own throttle, so a
        // preview costs no message of its own and the final answer replaces it.
        if let AgentEvent::AssistantDraft(text) = &event {
            if self.config.stream_preview
                && let Some(turn) = self.turn.as_mut()
            {
                let shown = session_commands::safe_draft(text);
                if shown != turn.draft {
                    turn.draft = shown;
                    self.refresh_cards(host, false);
                }
            }
            return;
        }
        // An event with no turn open means the bridge was restarted mid-turn: adopt the
        // turn (as remote, so the tool policy fails closed) rather than lose its reply.
        let turn = self.turn_or_adopt();
        match event {
            AgentEvent::TurnStarted(_) | AgentEvent::Notice(_) | AgentEvent::AssistantDraft(_) => {}
            AgentEvent::ToolStarted(name) => {
                if Turn::take(&mut turn.blocked, &name) {
                    turn.blocked_running.push(name);
                    return;
                }
                turn.lines.push(progress::tool_start_label(&name));
                self.refresh_cards(host, false);
            }
            AgentEvent::ToolFinished { name, ok } => {
                if Turn::take(&mut turn.blocked_running, &name) {
                    return;
                }
                turn.finish_tool(&name, ok);
                self.refresh_cards(host, false);
            }
            AgentEvent::AssistantMessage(text) => {
                // The message is whole: its preview has done its job.
                turn.draft = None;
                if !text.trim().is_empty() {
                    turn.last_assistant = Some(text);
                }
            }
            AgentEvent::TurnSettled => {
                // The final answer replaces the preview: the card ends on its steps.
                turn.draft = None;
                // Bring every card to its final state before the answer lands under it.
                self.refresh_cards(host, true);
                // Decided while the turn is still open: the answer goes where its card went.
                let audience = self.audience();
                let remote = self
                    .turn
                    .as_ref()
                    .is_some_and(|t| t.origin == TurnOrigin::Remote);
                let started_at = self.state.turn.as_ref().map(|t| t.started_at);
                let prompts = self
                    .turn
                    .as_ref()
                    .map(|t| t.prompts.clone())
                    .unwrap_or_default();
                if let Some(reply) = self.turn.take().and_then(|t| t.last_assistant)
                    && self.config.broadcast.replies
                {
                    let reply = match self.usage_footer(host) {
                        Some(footer) => format!("{reply}\n\n{footer}"),
                        None => reply,
                    };
                    self.publish_to(host, &audience, OutboundKind::Reply, &reply, &[]);
                }
                if remote && let Some(started_at) = started_at {
                    self.done_notice(host, &audience, started_at, &prompts);
                }
                self.react(host, &prompts, Reaction::Done, Some(Reaction::Received));
                self.record_turn_end(host);
            }
        }
    }

    /// The line under a turn's answer (`bridge.usageFooter`), from the agent's own report
    /// of the turn that just ended. Asked only when the owner switched it on: it costs the
    /// agent a round trip per turn. An agent that cannot say gets no footer, never a guess.
    fn usage_footer(&mut self, host: &mut dyn Host) -> Option<String> {
        if self.config.usage_footer == UsageFooter::Off {
            return None;
        }
        match host.session_command(&SessionCommand::Usage) {
            Ok(SessionReply::Usage(report)) => {
                session_commands::footer(&report, self.config.usage_footer)
            }
            Ok(_) => None,
            Err(why) => {
                host.log(
                    crate::model::Level::Info,
                    "no usage footer",
                    &[("reason", why)],
                );
                None
            }
        }
    }

    /// Ends a long remote turn with one short new message (`bridge.doneNoticeAfterMs`): the
    /// card's edits do not make a phone buzz, so whoever asked from the phone and put it
    /// away would not learn the work is done. Once per turn, to the turn's chats only; in
    /// the chat whose message started the turn it replies to that message, so it points at
    /// what it answers and notifies its sender even in a busy group.
    fn done_notice(
        &mut self,
        host: &mut dyn Host,
        audience: &[ConversationTarget],
        started_at: u64,
        prompts: &[PromptMark],
    ) {
        let after = self.config.done_notice_after_ms;
        let took = host.now_ms().saturating_sub(started_at);
        if after == 0 || took < after || audience.is_empty() {
            return;
        }
        let facts = host.work_snapshot();
        let files = facts
            .numstat
            .as_deref()
            .map(|n| crate::core::work::parse_git_numstat(n, None).len());
        let tests = facts.last_shell.as_ref().and_then(|run| {
            crate::core::work::is_test_command(&run.command).then(|| {
                crate::core::work::extract_test_summary(&run.output)
                    .unwrap_or_else(|| if run.failed { "failed" } else { "ok" }.into())
            })
        });
        let text = session_commands::done_text(took, files, tests.as_deref());
        for target in audience {
            let reply_to = prompts
                .iter()
                .find(|mark| mark.target == *target)
                .map(|mark| mark.message_id.clone());
            // A notice that fails is logged by `deliver`; the answer itself went out.
            let _ = self.deliver_replying(host, target, OutboundKind::Notice, &text, reply_to);
        }
    }

    /// Time has come for throttled card updates.
    pub fn tick(&mut self, host: &mut dyn Host) {
        // Cards first: a card wait that died with its turn is cleared before the outbox
        // asks for the next tick.
        self.refresh_cards(host, false);
        // Approvals nobody answered in time are blocked now (fail closed).
        self.expire_approvals(host);
        // Questions whose time ran out: the agent went on without an answer; say so.
        self.expire_questions(host);
        let now = host.now_ms();
        self.flush_stranger_notices(host, now);
        self.flush_outbox(host);
    }

    /// Brings the card of every chat in the turn's audience up to date. `force` ignores the throttle
    /// (turn start, turn end); otherwise a card updated less than the interval ago waits,
    /// and a tick is requested for when it may be sent.
    pub(super) fn refresh_cards(&mut self, host: &mut dyn Host, force: bool) {
        if !self.config.broadcast.progress || self.turn.is_none() {
            // No turn, no card to bring up to date: a wait left by the last one is void.
            self.delivery.card_tick = None;
            return;
        }
        let now = host.now_ms();
        let interval = self.config.progress_min_interval_ms;
        let mut next_tick: Option<u64> = None;
        for target in self.audience() {
            let drafts = self.config.stream_preview
                && self
                    .capabilities(&target.transport)
                    .is_some_and(|c| c.drafts)
                && !self.delivery.no_drafts.contains(&target.key());
            if drafts && let Some(due) = self.refresh_draft(host, &target, now, force) {
                next_tick = Some(next_tick.map_or(due, |t| t.min(due)));
            }
            let Some(turn) = self.turn.as_mut() else {
                return;
            };
            let text = turn.text(!drafts);
            let key = target.key();
            let (_, card) = turn
                .cards
                .entry(key.clone())
                .or_insert_with(|| (target.clone(), Card::default()));
            if card.shown.as_deref() == Some(text.as_str()) {
                continue;
            }
            let due = card
                .sent_at
                .map_or(0, |at| at.saturating_add(interval))
                .max(card.not_before);
            if !force && now < due {
                next_tick = Some(next_tick.map_or(due, |t| t.min(due)));
                continue;
            }
            let edit_key = card.edit_key.clone();
            host.typing(
                &target.transport,
                &target.conversation_id,
                target.thread_id.as_deref(),
            );
            let sent = self.send_card(host, &target, &text, edit_key);
            if let Some(turn) = self.turn.as_mut()
                && let Some((_, card)) = turn.cards.get_mut(&key)
            {
                match sent {
                    Ok(new_key) => {
                        card.sent_at = Some(now);
                        card.shown = Some(text);
                        card.edit_key = new_key;
                    }
                    Err(wait) => {
                        let at = now.saturating_add(wait);
                        card.not_before = at;
                        next_tick = Some(next_tick.map_or(at, |t| t.min(at)));
                    }
                }
            }
        }
        self.delivery.card_tick = next_tick;
        self.request_ticks(host);
    }

    /// Streams the answer being written to `target` as a platform draft
    /// (`transport.draft`), at the card's pace. Returns when to come back if the draft is
    /// not due yet or the platform asked to wait. A chat where drafts fail (a Telegram
    /// group) is remembered and gets the preview on its card from then on, said once in
    /// the log.
    fn refresh_draft(
        &mut self,
        host: &mut dyn Host,
        target: &ConversationTarget,
        now: u64,
        force: bool,
    ) -> Option<u64> {
        let capabilities = self.capabilities(&target.transport)?;
        let interval = self.config.progress_min_interval_ms;
        let turn = self.turn.as_mut()?;
        let draft = turn.draft.clone()?;
        let draft_id = turn.draft_id;
        let (_, card) = turn
            .cards
            .entry(target.key())
            .or_insert_with(|| (target.clone(), Card::default()));
        if card.draft_shown.as_deref() == Some(draft.as_str()) {
            return None;
        }
        let due = card
            .draft_sent_at
            .map_or(0, |at| at.saturating_add(interval))
            .max(card.not_before);
        if !force && now < due {
            return Some(due);
        }
        // Rendered for the platform like any message, and cut to one: a draft is a preview.
        let shown = session_commands::tail(&draft, session_commands::DRAFT_CHARS);
        let rendered = crate::core::outbound::prepare(&shown, &capabilities, 1);
        let text = rendered.messages.into_iter().next()?;
        let sent = host.draft(
            &target.transport,
            &target.conversation_id,
            target.thread_id.as_deref(),
            draft_id,
            &text,
        );
        let card = self
            .turn
            .as_mut()
            .and_then(|turn| turn.cards.get_mut(&target.key()))
            .map(|(_, card)| card)?;
        match sent {
            Ok(()) => {
                card.draft_sent_at = Some(now);
                card.draft_shown = Some(draft);
                None
            }
            Err(SendError::RateLimited(wait)) => {
                card.not_before = now.saturating_add(wait);
                Some(card.not_before)
            }
            Err(error) => {
                host.log(
                    crate::model::Level::Info,
                    "no drafts in this chat; the card shows the preview",
                    &[
                        ("transport", target.transport.clone()),
                        ("reason", error.to_string()),
                    ],
                );
                self.delivery.no_drafts.insert(target.key());
                None
            }
        }
    }

    /// Edits the card, or posts it. A refused edit posts a new card and the old handle
    /// is dropped (I21). Returns the handle to keep, or how long the platform asked to
    /// wait: a rate limit is not a refusal, so the card is neither duplicated nor
    /// forgotten, and the update is retried then.
    fn send_card(
        &mut self,
        host: &mut dyn Host,
        target: &ConversationTarget,
        text: &str,
        edit_key: Option<String>,
    ) -> Result<Option<String>, u64> {
        let can_edit = self.capabilities(&target.transport).is_some_and(|c| c.edit);
        if let Some(key) = edit_key.filter(|_| can_edit) {
            match self.deliver(
                host,
                target,
                OutboundKind::Progress,
                text,
                Some(key.clone()),
            ) {
                Ok(_) => return Ok(Some(key)),
                Err(SendError::RateLimited(wait)) => return Err(wait),
                Err(_) => {
                    host.log(
                        crate::model::Level::Info,
                        "card edit refused, posting anew",
                        &[("transport", target.transport.clone())],
                    );
                }
            }
        }
        match self.deliver(host, target, OutboundKind::Progress, text, None) {
            Ok(Delivery::Sent(receipt)) => Ok(receipt.edit_key),
            Err(SendError::RateLimited(wait)) => Err(wait),
            Ok(Delivery::Queued | Delivery::Empty) | Err(_) => Ok(None),
        }
    }
}
