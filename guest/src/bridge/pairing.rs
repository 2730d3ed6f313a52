//! Pairing in the bridge: one message from an unpaired sender, the codes made for it, and the
//! limits that keep a flood of strangers cheap
//! (docs/decisions.md#decision-18-unpaired-senders-are-bounded, docs/security.md#pairing).
//!
//! Where the plain code lives: only in [`Bridge::live_codes`], in memory, for as long as it
//! can be typed, and on the local terminal (I1). The state document keeps a salted hash.
//! That is why `/connect` can show a live code again, and why a restart cannot: at start,
//! each chat whose code was still live on a running transport gets a fresh code, shown
//! locally. The chat is not messaged then (it may be a stranger, and a flood must not turn
//! into a burst of sends at every start); when that person next writes, they are told the
//! code changed, and that message does not count as a wrong attempt.

use std::collections::BTreeSet;

use super::Bridge;
use crate::core::code_hash::SALT_LEN;
use crate::core::explain::Outcome;
use crate::core::notices;
use crate::core::pairing::{
    self, NewChallenge, PairingDecision, PairingOptions, PairingReason, is_live,
};
use crate::core::pairing_budget::{self, FailureOutcome};
use crate::core::state::{ConversationTarget, PendingChallenge};
use crate::core::strangers::{self, Room};
use crate::host::Host;
use crate::keys::{ConversationKey, Identity};
use crate::model::{Envelope, Level};

impl Bridge {
    /// Carries out the pairing decision for one message from an unpaired sender.
    /// A press on the bridge's buttons by an identity that may not answer: nothing is
    /// decided, no pairing code is made, and only the presser hears why (where the
    /// platform allows; see [`Bridge::answer_press`]). Strangers' presses pass the same
    /// flood gate as their messages, so a flood of taps costs no flood of answers.
    pub(super) fn refuse_press(
        &mut self,
        host: &mut dyn Host,
        envelope: &Envelope,
        target: &ConversationTarget,
        now: u64,
    ) -> Outcome {
        let identity = envelope.identity();
        if !self.state.is_trusted(&identity) {
            self.flush_stranger_notices(host, now);
            if !self.trust.stranger_gate.admit(&envelope.transport, now) {
                self.trust.stranger_notices.dropped(now);
                self.request_ticks(host);
                return Outcome::StrangerFlood;
            }
        }
        host.log(
            Level::Warning,
            "button press from an identity that may not answer refused",
            &[
                ("transport", envelope.transport.clone()),
                ("identity", identity.to_string()),
            ],
        );
        self.answer_press(
            host,
            target,
            envelope.press.as_deref(),
            notices::PRESS_REFUSED_NOTICE,
        );
        Outcome::PressRefused
    }

    /// May `identity` decide an approval or answer a question? Trust by pairing or
    /// `allowUsers`, never merely `requirePairing: false` (an approval lets a tool run that
    /// the policy held back, so "anyone may prompt" is not enough).
    pub(super) fn may_decide(&self, identity: &Identity) -> bool {
        self.state.is_trusted(identity) || self.config.allow_users.contains(identity)
    }

    pub(super) fn pair(
        &mut self,
        host: &mut dyn Host,
        envelope: &Envelope,
        target: &ConversationTarget,
        pending: Option<PendingChallenge>,
        now: u64,
    ) -> Outcome {
        self.flush_stranger_notices(host, now);
        if !self.trust.stranger_gate.admit(&envelope.transport, now) {
            // No reply, no code, no save: the flood is counted for one line a minute.
            self.trust.stranger_notices.dropped(now);
            self.request_ticks(host);
            return Outcome::StrangerFlood;
        }
        let identity = envelope.identity();
        let conversation = envelope.conversation_key();
        let options = PairingOptions::from_config(&self.config);
        let live = pending.as_ref().is_some_and(|p| is_live(p, now, &options));
        if host.pairing_closed_since().is_some()
            && !(live && self.trust.terminal_codes.contains(&conversation))
        {
            // Not judged at all: comparing would tell a guesser something
            // (docs/security.md#pairing).
            return self.refuse_while_closed(host, target, conversation, now);
        }
        let reissued = self.trust.reissued.remove(&conversation);
        let decision = pairing::decide_pairing(pending.as_ref(), &envelope.text, now, &options);
        let wrong = match &decision {
            PairingDecision::Keep { reason, .. } => *reason == PairingReason::Mismatch,
            // From a live code, a lock is the wrong attempt that used its last try.
            PairingDecision::Issue { reason } => *reason == PairingReason::Locked && live,
            PairingDecision::Trust => false,
        };
        if wrong {
            let per_hour = self.config.pairing_max_failures_per_hour;
            let outcome = host.pairing_record_failure(now, per_hour);
            if outcome == FailureOutcome::JustClosed {
                self.tell_terminal_closed(host, now);
                host.log(
                    Level::Warning,
                    "pairing closed",
                    &[("failures_per_hour", per_hour.to_string())],
                );
            }
            if outcome != FailureOutcome::Counted
                && matches!(decision, PairingDecision::Issue { .. })
            {
                // No new code while closed: it would be one more to guess at.
                self.trust.terminal_codes.remove(&conversation);
                return self.refuse_while_closed(host, target, conversation, now);
            }
        }
        match decision {
            PairingDecision::Trust => {
                self.state.trust(&identity, now);
                self.state.set_pending(&conversation, None);
                self.trust.live_codes.remove(&conversation);
                self.trust.terminal_codes.remove(&conversation);
                self.trust.waiting_while_closed.remove(&conversation);
                self.state.remember_chat(target.clone(), envelope.is_direct);
                self.save(host);
                host.log(
                    Level::Info,
                    "paired remote identity",
                    &[
                        ("transport", envelope.transport.clone()),
                        ("identity", identity.to_string()),
                    ],
                );
                host.notify(Level::Info, &pairing::terminal_paired_notice(&identity));
                self.reply(host, target, &pairing::pairing_success_text(&identity));
                Outcome::Paired
            }
            PairingDecision::Keep { .. } if reissued => {
                // The person may have typed the code from before the restart: not their
                // mistake, so no attempt is counted; they learn the code changed.
                let text = pairing::chat_prompt(
                    PairingReason::Reissued,
                    &options,
                    0,
                    &self.config.local_command,
                );
                self.reply(host, target, &text);
                Outcome::NotPaired(PairingReason::Reissued)
            }
            PairingDecision::Keep {
                pending: kept,
                reason,
            } => {
                let text = pairing::chat_prompt(
                    reason,
                    &options,
                    kept.attempts,
                    &self.config.local_command,
                );
                // "Awaiting" changes nothing: saving it anyway rewrote the whole document
                // for every message of a chatty stranger.
                if pending.as_ref() != Some(&kept) {
                    self.state.set_pending(&conversation, Some(kept));
                    self.save(host);
                }
                self.reply(host, target, &text);
                Outcome::NotPaired(reason)
            }
            PairingDecision::Issue { reason } => {
                if pending.is_none() {
                    let room = strangers::make_room(
                        &mut self.state.pending,
                        &envelope.transport,
                        now,
                        &options,
                    );
                    self.trust
                        .live_codes
                        .retain(|key, _| self.state.pending.contains_key(key));
                    if room != Room::Free {
                        self.trust.stranger_notices.refused(now);
                        self.request_ticks(host);
                        self.reply(host, target, notices::PAIRING_FULL_NOTICE);
                        return Outcome::PairingFull;
                    }
                }
                let created = self.new_challenge(host, now, &options);
                // A code made for a chat is no terminal code: only `/connect pair` makes those.
                self.trust.terminal_codes.remove(&conversation);
                let text = pairing::chat_prompt(reason, &options, 0, &self.config.local_command);
                // The code goes to the local terminal only (I1); past the first few of a
                // minute it is counted instead, and `/connect` lists it.
                if self.trust.stranger_notices.code_issued(now) {
                    host.notify(
                        Level::Info,
                        &pairing::terminal_code_notice(&created.code, self.config.pairing_ttl_ms),
                    );
                } else {
                    self.request_ticks(host);
                }
                self.trust
                    .live_codes
                    .insert(conversation.clone(), created.code);
                self.state.set_pending(&conversation, Some(created.pending));
                self.save(host);
                self.reply(host, target, &text);
                Outcome::NotPaired(reason)
            }
        }
    }

    /// The answer while pairing is closed: the same text whatever was sent, nothing compared,
    /// nothing stored but the chat's place in line for the operator's `/connect pair`.
    fn refuse_while_closed(
        &mut self,
        host: &mut dyn Host,
        target: &ConversationTarget,
        conversation: ConversationKey,
        now: u64,
    ) -> Outcome {
        host.pairing_refused_unjudged();
        if let Some(since) = host.pairing_closed_since() {
            self.tell_terminal_closed(host, since);
        }
        if !self.trust.waiting_while_closed.contains_key(&conversation)
            && self.trust.waiting_while_closed.len() >= strangers::MAX_PENDING
        {
            // Bounded like the pending codes; the chat that wrote least recently gives way,
            // so the real user who just wrote is among those `/connect pair` serves.
            let oldest = self
                .trust
                .waiting_while_closed
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                self.trust.waiting_while_closed.remove(&oldest);
            }
        }
        self.trust.waiting_while_closed.insert(conversation, now);
        let text = pairing_budget::closed_chat_text(&self.config.local_command);
        self.reply(host, target, &text);
        Outcome::PairingClosed
    }

    /// Tells this session's terminal that the host's pairing budget closed at `since`,
    /// once per closing, whichever session's guesser closed it.
    fn tell_terminal_closed(&mut self, host: &mut dyn Host, since: u64) {
        if self.trust.closing_told == Some(since) {
            return;
        }
        self.trust.closing_told = Some(since);
        host.notify(
            Level::Warning,
            &pairing_budget::closed_terminal_notice(
                self.config.pairing_max_failures_per_hour,
                &self.config.local_command,
            ),
        );
    }

    /// `/connect pair` while pairing is closed: the operator asks for fresh codes, so it
    /// opens again and each chat waiting (with a code, or that wrote while closed) gets a new
    /// code. These are terminal codes: judged even if strangers close pairing again before
    /// the real user types theirs. Returns how many codes were made.
    pub(super) fn reopen_pairing(&mut self, host: &mut dyn Host, now: u64) -> usize {
        host.pairing_reopen();
        let options = PairingOptions::from_config(&self.config);
        let recent = |at: &u64| now.saturating_sub(*at) < options.ttl_ms;
        let mut keys: BTreeSet<ConversationKey> = self.state.pending.keys().cloned().collect();
        keys.extend(
            self.trust
                .waiting_while_closed
                .iter()
                .filter(|(_, at)| recent(at))
                .map(|(key, _)| key.clone()),
        );
        self.trust.waiting_while_closed.clear();
        keys.retain(|key| self.capabilities(key.transport()).is_some());
        let mut made = 0;
        for key in keys.into_iter().take(strangers::MAX_PENDING) {
            let created = self.new_challenge(host, now, &options);
            self.trust.live_codes.insert(key.clone(), created.code);
            self.state.set_pending(&key, Some(created.pending));
            self.trust.reissued.remove(&key);
            self.trust.terminal_codes.insert(key);
            made += 1;
        }
        self.save(host);
        host.log(
            Level::Info,
            "pairing reopened",
            &[("codes", made.to_string())],
        );
        made
    }

    /// What `doctor` says about the host's failure budget.
    pub(super) fn pairing_budget_line(&self, host: &mut dyn Host, now: u64) -> String {
        let view = host.pairing_view(now);
        pairing_budget::doctor_line(
            &view,
            self.config.pairing_max_failures_per_hour,
            now,
            &self.config.local_command,
        )
    }

    /// At start: every chat whose code was still live, on a transport that now runs, gets a
    /// new code shown locally (the old one is only a hash). Transports that did not start
    /// are left alone, so a session that starts none (`doctor`) changes nothing.
    pub(super) fn reissue_live_codes(&mut self, host: &mut dyn Host) {
        let now = host.now_ms();
        let options = PairingOptions::from_config(&self.config);
        let due: Vec<ConversationKey> = self
            .state
            .pending
            .iter()
            .filter(|(key, p)| {
                is_live(p, now, &options)
                    && !self.trust.live_codes.contains_key(*key)
                    && self.capabilities(key.transport()).is_some()
            })
            .map(|(key, _)| key.clone())
            .collect();
        if due.is_empty() {
            return;
        }
        for key in due {
            let created = self.new_challenge(host, now, &options);
            if self.trust.stranger_notices.code_issued(now) {
                host.notify(
                    Level::Info,
                    &pairing::terminal_reissued_notice(
                        &key,
                        &created.code,
                        self.config.pairing_ttl_ms,
                    ),
                );
            }
            self.trust.live_codes.insert(key.clone(), created.code);
            self.state.set_pending(&key, Some(created.pending));
            self.trust.reissued.insert(key);
        }
        self.save(host);
        self.request_ticks(host);
    }

    /// Prints the strangers' summary line once its window is over.
    pub(super) fn flush_stranger_notices(&mut self, host: &mut dyn Host, now: u64) {
        if let Some(line) = self
            .trust
            .stranger_notices
            .flush(now, &self.config.local_command)
        {
            host.notify(Level::Warning, &line);
            host.log(Level::Warning, "unpaired senders limited", &[]);
        }
    }

    /// The live codes for `/connect` and `/connect pair`: conversation, the code when this
    /// session made it, and when it expires.
    pub(super) fn live_code_list(&self, now: u64) -> Vec<(ConversationKey, Option<String>, u64)> {
        let options = PairingOptions::from_config(&self.config);
        self.state
            .pending
            .iter()
            .filter(|(_, p)| is_live(p, now, &options))
            .map(|(key, p)| {
                (
                    key.clone(),
                    self.trust.live_codes.get(key).cloned(),
                    p.expires_at,
                )
            })
            .collect()
    }

    fn new_challenge(
        &self,
        host: &mut dyn Host,
        now: u64,
        options: &PairingOptions,
    ) -> NewChallenge {
        let salt = salt(host);
        pairing::create_challenge(
            now,
            options.ttl_ms,
            options.digits,
            &mut || random_u32(host),
            salt,
        )
    }
}

/// A uniformly random u32 from the host's secure source.
pub(super) fn random_u32(host: &mut dyn Host) -> u32 {
    let bytes = host.random_bytes(4);
    let mut word = [0u8; 4];
    for (slot, byte) in word.iter_mut().zip(bytes) {
        *slot = byte;
    }
    u32::from_le_bytes(word)
}

/// A fresh salt from the host's secure source (one `rng` call).
fn salt(host: &mut dyn Host) -> [u8; SALT_LEN] {
    let mut salt = [0u8; SALT_LEN];
    for (slot, byte) in salt.iter_mut().zip(host.random_bytes(SALT_LEN as u32)) {
        *slot = byte;
    }
    salt
}
