//! Work cut short (docs/decisions.md#decision-20-work-cut-short-is-reported): queued prompts are
//! acknowledged, and when the session stops or restarts in the middle of a turn or with prompts
//! waiting, each chat concerned is told what was not done, instead of a card stuck at "thinking…"
//! and follow-ups that vanish.
//!
//! What the chats saw is kept in the state document (`turn` with its cards and their edit
//! handles, `queued` by chat) from the moment a turn starts or a prompt queues until the turn
//! settles, so a crash loses nothing a restart cannot report. Only chats that can still be
//! reached (remembered, not paused, on a running transport) are told, and a session that
//! starts no transport (`doctor`) neither tells nor saves.

use std::collections::BTreeMap;

use super::Bridge;
use super::cards::Turn;
use super::delivery::Delivery;
use crate::core::notices;
use crate::core::queue::QueuedPrompt;
use crate::core::state::{CardRecord, ConversationTarget, PromptMark, RunningTurn};
use crate::host::Host;
use crate::keys::ConversationKey;
use crate::model::{OutboundKind, Reaction, TurnOrigin};

impl Bridge {
    /// A prompt was forwarded while the agent was busy: as a follow-up it waits its turn,
    /// and the chat learns how many are ahead of it.
    pub(super) fn queued(
        &mut self,
        host: &mut dyn Host,
        target: &ConversationTarget,
        message_id: Option<String>,
    ) {
        // What waits to start (prompts taken but not yet begun) is ahead, and so is the
        // running turn: "1 ahead" for the first follow-up. Busy is why this prompt is a
        // follow-up, so something is always ahead.
        let ahead = (self.queue.len() + usize::from(self.turn.is_some())).max(1);
        self.queue.push(target.clone(), message_id);
        self.save(host);
        self.reply(host, target, &notices::queued_notice(ahead));
    }

    /// A turn started (a remote one has taken the oldest queued prompt in
    /// `take_audience`): the turn, its cards and its audience are recorded so a restart can
    /// tell their chats and keeps answering only them.
    pub(super) fn record_turn_start(&mut self, host: &mut dyn Host, origin: TurnOrigin) {
        self.state.turn = self.turn.as_ref().map(|turn| RunningTurn {
            started_at: host.now_ms(),
            remote: origin == TurnOrigin::Remote,
            cards: turn
                .card_handles()
                .map(|(target, edit_key)| CardRecord {
                    target: target.clone(),
                    edit_key: edit_key.map(String::from),
                })
                .collect(),
            audience: turn.audience.clone(),
            prompts: turn.prompts.clone(),
        });
        self.save(host);
    }

    /// The turn settled: nothing to report for it any more; an idle agent has no follow-up
    /// left either.
    pub(super) fn record_turn_end(&mut self, host: &mut dyn Host) {
        // Checked first: a mutable borrow marks the state changed, and a turn that left
        // nothing recorded must not cost a write.
        if self.state.turn.is_some() {
            self.state.turn = None;
        }
        if host.is_idle() {
            // An idle agent took every prompt it was given: what is still recorded ran as
            // part of the turn that just ended (pi folds follow-ups into its run).
            let ran = self.queue.clear();
            self.react(host, &ran, Reaction::Done, Some(Reaction::Received));
        }
        self.save(host);
    }

    /// At shutdown: the running turn's cards end on "stopped", and each chat with queued
    /// prompts hears how many were not run.
    pub(super) fn tell_what_was_not_done(&mut self, host: &mut dyn Host) {
        if let Some(turn) = self.turn.take() {
            let prompts = turn.prompts.clone();
            self.close_cards(host, turn, notices::TURN_STOPPED_LINE);
            self.react(host, &prompts, Reaction::Failed, Some(Reaction::Received));
            self.state.turn = None;
        }
        // Chats that cannot be reached now keep their record for the next start to report.
        let reachable = self.reachable();
        let mut told = Vec::new();
        for (target, count) in self.queued_by_chat() {
            if reachable.contains(&target) {
                self.reply(host, &target, &notices::queued_not_run_notice(count, false));
                told.push(target.key());
            }
        }
        let not_run: Vec<PromptMark> = self
            .queue
            .entries()
            .filter(|entry| told.contains(&entry.target.key()))
            .filter_map(QueuedPrompt::mark)
            .collect();
        self.react(host, &not_run, Reaction::Failed, Some(Reaction::Received));
        // A shutdown with nothing to tell writes nothing (`doctor` leaves no state behind).
        self.queue.retain(|target| !told.contains(&target.key()));
    }

    /// At start: a turn or queue recorded by the session before is reported as lost,
    /// unless the agent is still busy (only this instance was replaced, the turn goes on):
    /// then its cards are adopted and keep being edited.
    pub(super) fn tell_what_was_lost(&mut self, host: &mut dyn Host) {
        if self.state.turn.is_none() && self.queue.is_empty() {
            return;
        }
        let reachable =
            |bridge: &Bridge, target: &ConversationTarget| bridge.reachable().contains(target);
        let any_reachable = self
            .state
            .turn
            .iter()
            .flat_map(|t| t.cards.iter().map(|c| &c.target))
            .chain(self.queue.iter())
            .any(|target| reachable(self, target));
        if !any_reachable {
            // Nothing to tell on the transports that run now; keep the record for a start
            // that can (and write nothing: `doctor` starts none).
            return;
        }
        if !host.is_idle() {
            if let Some(record) = self.state.turn.clone() {
                let origin = if record.remote {
                    TurnOrigin::Remote
                } else {
                    TurnOrigin::Local
                };
                if record.remote {
                    // A retry of the adopted turn answers the same chats.
                    self.last_remote_audience.clone_from(&record.audience);
                }
                self.turn = Some(Turn::adopt(
                    origin,
                    &record.cards,
                    &record.audience,
                    &record.prompts,
                ));
            }
            return;
        }
        if let Some(record) = self.state.turn.take() {
            let origin = if record.remote {
                TurnOrigin::Remote
            } else {
                TurnOrigin::Local
            };
            let cards: Vec<CardRecord> = record
                .cards
                .into_iter()
                .filter(|card| reachable(self, &card.target))
                .collect();
            self.close_cards(
                host,
                Turn::adopt(origin, &cards, &[], &[]),
                notices::TURN_LOST_LINE,
            );
            self.react(
                host,
                &record.prompts,
                Reaction::Failed,
                Some(Reaction::Received),
            );
        }
        for (target, count) in self.queued_by_chat() {
            if reachable(self, &target) {
                self.reply(host, &target, &notices::queued_not_run_notice(count, true));
            }
        }
        let not_run = self.queue.clear();
        self.react(host, &not_run, Reaction::Failed, Some(Reaction::Received));
        self.save(host);
    }

    /// Queued prompts per chat, in the order the chats first queued.
    fn queued_by_chat(&self) -> Vec<(ConversationTarget, usize)> {
        let mut counts: BTreeMap<ConversationKey, (usize, ConversationTarget, usize)> =
            BTreeMap::new();
        for (i, target) in self.queue.iter().enumerate() {
            counts
                .entry(target.key())
                .or_insert_with(|| (i, target.clone(), 0))
                .2 += 1;
        }
        let mut chats: Vec<_> = counts.into_values().collect();
        chats.sort_by_key(|(first, _, _)| *first);
        chats
            .into_iter()
            .map(|(_, target, count)| (target, count))
            .collect()
    }

    /// Brings each card of `turn` to its final text with `line` under it, editing where
    /// the card can be edited and posting otherwise, so no card ends on "thinking…".
    fn close_cards(&mut self, host: &mut dyn Host, mut turn: Turn, line: &str) {
        let text = turn.final_text(line);
        let can_edit = |bridge: &Bridge, target: &ConversationTarget| {
            bridge
                .capabilities(&target.transport)
                .is_some_and(|c| c.edit)
        };
        let cards: Vec<(ConversationTarget, Option<String>)> = turn
            .card_handles()
            .map(|(t, k)| (t.clone(), k.map(String::from)))
            .collect();
        turn.clear_cards();
        for (target, edit_key) in cards {
            let edit_key = edit_key.filter(|_| can_edit(self, &target));
            let sent = self.deliver(
                host,
                &target,
                OutboundKind::Progress,
                &text,
                edit_key.clone(),
            );
            // A refused edit posts the final state as a new message (I21).
            if edit_key.is_some() && !matches!(sent, Ok(Delivery::Sent(_))) {
                let _ = self.deliver(host, &target, OutboundKind::Progress, &text, None);
            }
        }
    }
}
