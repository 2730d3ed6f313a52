//! Who sees what (docs/security.md#who-sees-what). A remote turn's card, answer and approval
//! requests go to the conversations whose prompts it took (the chat that started it, chats that
//! steered into it); local turns and `/connect digest` go to the conversations that follow the
//! terminal: DMs from their first message, groups only after `/follow`. Paused chats and chats on a
//! stopped transport get nothing.
//!
//! Before this, everything went to every remembered chat: after one `/status` in a team
//! group, a DM user's private answers were posted in the group.

use super::Bridge;
use super::cards::Turn;
use crate::core::state::{ConversationTarget, PromptMark};
use crate::model::TurnOrigin;

impl Bridge {
    /// Conversations that can be sent anything now: remembered, not paused (I9), on a
    /// running transport.
    pub(super) fn reachable(&self) -> Vec<ConversationTarget> {
        self.state
            .conversations
            .iter()
            .filter(|t| !self.state.is_paused(&t.key()))
            .filter(|t| self.capabilities(&t.transport).is_some())
            .cloned()
            .collect()
    }

    /// Reachable conversations that follow the terminal: they see local turns and
    /// `/connect digest`.
    pub(super) fn followers(&self) -> Vec<ConversationTarget> {
        self.reachable()
            .into_iter()
            .filter(|t| self.state.is_following(&t.key()))
            .collect()
    }

    /// Where the current turn's card, answer and approval requests go. A remote turn
    /// answers its audience only; one whose audience is unknown (a restart that kept no
    /// record, a host that started it without a prompt from a chat) goes to the followers,
    /// never to every chat. A local turn goes to the followers and to any chat that
    /// steered into it. No turn: the followers.
    pub(super) fn audience(&self) -> Vec<ConversationTarget> {
        match &self.turn {
            Some(turn) => recipients(turn, self.reachable(), self.followers()),
            None => self.followers(),
        }
    }

    /// The audience a turn starting now with `origin` answers: the chat whose queued prompt
    /// it takes (the oldest), else — a retry or continuation the host started without a
    /// prompt — the last remote turn's audience. Chats that steered while no turn was open
    /// join. A local turn resets the inheritance: a remote origin lasts until local input.
    /// With the audience come the messages the turn answers (its prompt's, the steers'):
    /// what its reactions and its done message name.
    pub(super) fn take_audience(
        &mut self,
        origin: TurnOrigin,
    ) -> (Vec<ConversationTarget>, Vec<PromptMark>) {
        let mut audience = Vec::new();
        let mut marks = Vec::new();
        if origin == TurnOrigin::Remote {
            match self.queue.pop_front() {
                Some(oldest) => {
                    marks.extend(oldest.mark());
                    audience.push(oldest.target);
                }
                None => audience.clone_from(&self.last_remote_audience),
            }
        } else {
            self.last_remote_audience.clear();
        }
        for target in std::mem::take(&mut self.pending_steers) {
            join(&mut audience, target);
        }
        marks.append(&mut self.pending_steer_marks);
        if origin == TurnOrigin::Remote && !audience.is_empty() {
            self.last_remote_audience.clone_from(&audience);
        }
        (audience, marks)
    }

    /// A prompt from `target` steered into the running turn (or the next one, when none is
    /// open yet): that chat sees the rest of it and its answer, and its message (`mark`)
    /// is owed that turn's reactions.
    pub(super) fn join_turn(&mut self, target: &ConversationTarget, mark: Option<PromptMark>) {
        let Some(turn) = self.turn.as_mut() else {
            join(&mut self.pending_steers, target.clone());
            self.pending_steer_marks.extend(mark);
            return;
        };
        if let Some(mark) = mark {
            turn.prompts.push(mark.clone());
            if let Some(record) = self.state.turn.as_mut() {
                record.prompts.push(mark);
            }
        }
        join(&mut turn.audience, target.clone());
        if turn.origin == TurnOrigin::Remote {
            join(&mut self.last_remote_audience, target.clone());
        }
        // Only a chat not yet in the record changes it (a mutable borrow marks the state).
        if self
            .state
            .turn
            .as_ref()
            .is_some_and(|record| !record.audience.contains(target))
            && let Some(record) = self.state.turn.as_mut()
        {
            join(&mut record.audience, target.clone());
        }
    }

    /// The turn in progress, or — when an event comes with none open (the bridge was
    /// restarted mid-turn and kept no record) — a remote one adopted with the last remote
    /// audience, so the tool policy fails closed and the answer goes where the last remote
    /// turn's did, never to every chat.
    pub(super) fn turn_or_adopt(&mut self) -> &mut Turn {
        let audience = self.last_remote_audience.clone();
        self.turn.get_or_insert_with(|| {
            let mut turn = Turn::new(TurnOrigin::Remote);
            turn.audience = audience;
            turn
        })
    }
}

/// Who `turn` goes to, given the conversations reachable now and the followers among them
/// (pure, so the rule is tested without a bridge).
pub(super) fn recipients(
    turn: &Turn,
    reachable: Vec<ConversationTarget>,
    followers: Vec<ConversationTarget>,
) -> Vec<ConversationTarget> {
    let joined = reachable.into_iter().filter(|t| turn.audience.contains(t));
    match turn.origin {
        TurnOrigin::Remote if !turn.audience.is_empty() => joined.collect(),
        TurnOrigin::Remote => followers,
        TurnOrigin::Local => {
            let mut all = followers;
            for target in joined {
                join(&mut all, target);
            }
            all
        }
    }
}

/// Adds `target` unless it is already there.
fn join(list: &mut Vec<ConversationTarget>, target: ConversationTarget) {
    if !list.contains(&target) {
        list.push(target);
    }
}
