//! Unpaired senders, bounded (docs/decisions.md#decision-18-unpaired-senders-are-bounded).
//!
//! Every message from an unpaired sender used to make a pending code, print a terminal line
//! and rewrite the state document: 10,000 strangers left 10,001 codes, 10,000 lines and an
//! 829 KB document rewritten per message, each message slower than the last. Three limits
//! keep the cost of a stranger flat, whatever their number:
//!
//! - a token bucket per transport and one overall admits at most
//!   [`STRANGERS_PER_MINUTE_PER_TRANSPORT`] and [`STRANGERS_PER_MINUTE`] unpaired messages
//!   a minute; the rest are dropped without a reply and counted;
//! - at most [`MAX_PENDING_PER_TRANSPORT`] and [`MAX_PENDING`] live codes exist; a new chat
//!   beyond that is told to try later, and dead codes are pruned before counting;
//! - the terminal shows the first [`CODES_SHOWN_PER_WINDOW`] codes of a minute in full, then
//!   one summary line with counts (`/connect` lists every live code).
//!
//! A person pairing during a flood may have a message dropped; they are told to retry by
//! the next reply they get, and the terminal sees the flood counted. That is the price of a
//! session that stays usable.

use std::collections::BTreeMap;

use crate::core::pairing::{PairingOptions, is_live};
use crate::core::rate_limit::{Bucket, take_token};
use crate::core::state::PendingChallenge;
use crate::keys::ConversationKey;

/// Unpaired messages admitted per transport per minute.
pub const STRANGERS_PER_MINUTE_PER_TRANSPORT: u32 = 30;
/// Unpaired messages admitted per minute over all transports.
pub const STRANGERS_PER_MINUTE: u32 = 60;
/// Live pairing codes per transport.
pub const MAX_PENDING_PER_TRANSPORT: usize = 16;
/// Live pairing codes over all transports.
pub const MAX_PENDING: usize = 32;
/// Length of one notice window.
pub const NOTICE_WINDOW_MS: u64 = 60_000;
/// Codes shown in full per window; later ones are counted in the summary.
pub const CODES_SHOWN_PER_WINDOW: u32 = 3;

/// Token buckets for unpaired messages, per transport and overall.
#[derive(Debug, Clone, Default)]
pub struct StrangerGate {
    per_transport: BTreeMap<String, Bucket>,
    overall: Option<Bucket>,
}

impl StrangerGate {
    /// Charges one unpaired message on `transport` at `now`; false when it must be dropped.
    /// The overall budget is charged only for what the transport's budget let through, so a
    /// flood on one transport cannot by itself starve the others of more than its share.
    pub fn admit(&mut self, transport: &str, now: u64) -> bool {
        let bucket = self.per_transport.get(transport).copied();
        let (bucket, allowed) = take_token(bucket, now, STRANGERS_PER_MINUTE_PER_TRANSPORT);
        // The map holds one entry per transport the host runs: a handful.
        self.per_transport.insert(transport.to_string(), bucket);
        if !allowed {
            return false;
        }
        let (overall, allowed) = take_token(self.overall, now, STRANGERS_PER_MINUTE);
        self.overall = Some(overall);
        allowed
    }
}

/// Whether a new code may be made for a chat on `transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// Yes.
    Free,
    /// The transport already has [`MAX_PENDING_PER_TRANSPORT`] live codes.
    TransportFull,
    /// All transports together have [`MAX_PENDING`] live codes.
    Full,
}

/// Drops codes that can no longer be typed (expired or locked), then says whether one more
/// fits for `transport`. Pruning first keeps the map at most [`MAX_PENDING`] long, so the
/// count and the document stay the same size however many strangers write.
pub fn make_room(
    pending: &mut BTreeMap<ConversationKey, PendingChallenge>,
    transport: &str,
    now: u64,
    opts: &PairingOptions,
) -> Room {
    pending.retain(|_, p| is_live(p, now, opts));
    if pending.len() >= MAX_PENDING {
        return Room::Full;
    }
    let on_transport = pending
        .keys()
        .filter(|k| k.transport() == transport)
        .count();
    if on_transport >= MAX_PENDING_PER_TRANSPORT {
        return Room::TransportFull;
    }
    Room::Free
}

/// What the terminal is told about unpaired senders, one window at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StrangerNotices {
    window_end: Option<u64>,
    shown: u32,
    hidden_codes: u32,
    dropped: u32,
    refused: u32,
}

impl StrangerNotices {
    /// A code was made at `now`: true when it is shown in full, false when it is only
    /// counted for the summary.
    pub fn code_issued(&mut self, now: u64) -> bool {
        self.open(now);
        if self.shown < CODES_SHOWN_PER_WINDOW {
            self.shown += 1;
            true
        } else {
            self.hidden_codes = self.hidden_codes.saturating_add(1);
            false
        }
    }

    /// A message was dropped by the [`StrangerGate`].
    pub fn dropped(&mut self, now: u64) {
        self.open(now);
        self.dropped = self.dropped.saturating_add(1);
    }

    /// A new chat was refused because the codes were full ([`Room`]).
    pub fn refused(&mut self, now: u64) {
        self.open(now);
        self.refused = self.refused.saturating_add(1);
    }

    /// When the open window ends, if a summary may be due then.
    pub fn due(&self) -> Option<u64> {
        self.window_end
            .filter(|_| self.hidden_codes + self.dropped + self.refused > 0)
    }

    /// Closes the window once it is over; returns its summary line when there is anything
    /// to say. `local_command` names the command that lists the codes.
    pub fn flush(&mut self, now: u64, local_command: &str) -> Option<String> {
        let end = self.window_end?;
        if now < end {
            return None;
        }
        let summary = summary_text(self, local_command);
        *self = StrangerNotices::default();
        summary
    }

    fn open(&mut self, now: u64) {
        if self.window_end.is_none() {
            self.window_end = Some(now.saturating_add(NOTICE_WINDOW_MS));
        }
    }
}

fn summary_text(counts: &StrangerNotices, local_command: &str) -> Option<String> {
    let mut parts = Vec::new();
    if counts.hidden_codes > 0 {
        parts.push(format!(
            "{} more pairing code(s) were made and not shown here (run /{local_command} to see the live ones)",
            counts.hidden_codes
        ));
    }
    if counts.dropped > 0 {
        parts.push(format!(
            "{} message(s) were ignored: more than {STRANGERS_PER_MINUTE_PER_TRANSPORT} a minute on one transport or {STRANGERS_PER_MINUTE} in all",
            counts.dropped
        ));
    }
    if counts.refused > 0 {
        parts.push(format!(
            "{} chat(s) were told to try later: {MAX_PENDING} codes (or {MAX_PENDING_PER_TRANSPORT} on one transport) were already waiting",
            counts.refused
        ));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "Unpaired senders in the last minute: {}. If you expect no one, check who can write to the bot.",
            parts.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::code_hash::CodeHash;

    const OPTS: PairingOptions = PairingOptions {
        ttl_ms: 300_000,
        digits: 6,
        max_attempts: 3,
    };

    fn challenge(expires_at: u64, attempts: u32) -> PendingChallenge {
        PendingChallenge {
            hash: CodeHash::new("123456", [0; 16]),
            digits: 6,
            expires_at,
            attempts,
        }
    }

    #[test]
    fn the_gate_admits_a_burst_per_transport_and_overall() {
        let mut gate = StrangerGate::default();
        let admitted = (0..100).filter(|_| gate.admit("tg", 0)).count();
        assert_eq!(admitted, STRANGERS_PER_MINUTE_PER_TRANSPORT as usize);
        let admitted = (0..100).filter(|_| gate.admit("dc", 0)).count();
        assert_eq!(admitted, STRANGERS_PER_MINUTE_PER_TRANSPORT as usize);
        // Overall budget spent by the two transports: a third gets nothing this instant.
        assert!(!gate.admit("sl", 0));
        // A minute later the budgets are full again.
        assert!(gate.admit("sl", 60_000));
    }

    #[test]
    fn make_room_prunes_dead_codes_and_counts_live_ones() {
        let mut pending = BTreeMap::new();
        for i in 0..MAX_PENDING_PER_TRANSPORT {
            pending.insert(
                ConversationKey::new("tg", &i.to_string()),
                challenge(1_000, 0),
            );
        }
        pending.insert(ConversationKey::new("dc", "dead"), challenge(10, 0));
        pending.insert(ConversationKey::new("dc", "locked"), challenge(1_000, 3));
        assert_eq!(
            make_room(&mut pending, "tg", 100, &OPTS),
            Room::TransportFull
        );
        assert_eq!(
            pending.len(),
            MAX_PENDING_PER_TRANSPORT,
            "dead codes pruned"
        );
        assert_eq!(make_room(&mut pending, "dc", 100, &OPTS), Room::Free);
        for i in 0..MAX_PENDING - MAX_PENDING_PER_TRANSPORT {
            pending.insert(
                ConversationKey::new(&format!("t{i}"), "c"),
                challenge(1_000, 0),
            );
        }
        assert_eq!(make_room(&mut pending, "dc", 100, &OPTS), Room::Full);
        // Once they expire there is room again, and the map is empty.
        assert_eq!(make_room(&mut pending, "tg", 1_000, &OPTS), Room::Free);
        assert!(pending.is_empty());
    }

    #[test]
    fn notices_show_a_few_codes_then_one_summary_a_window() {
        let mut notices = StrangerNotices::default();
        let shown: Vec<bool> = (0..5).map(|i| notices.code_issued(i)).collect();
        assert_eq!(shown, vec![true, true, true, false, false]);
        notices.dropped(10);
        notices.dropped(11);
        notices.refused(12);
        assert_eq!(notices.due(), Some(60_000));
        assert_eq!(notices.flush(59_999, "connect"), None);
        assert_eq!(
            notices.flush(60_000, "connect").as_deref(),
            Some(
                "Unpaired senders in the last minute: 2 more pairing code(s) were made and not \
                 shown here (run /connect to see the live ones); 2 message(s) were ignored: more \
                 than 30 a minute on one transport or 60 in all; 1 chat(s) were told to try \
                 later: 32 codes (or 16 on one transport) were already waiting. If you expect no \
                 one, check who can write to the bot."
            )
        );
        // A new window shows codes in full again; a quiet window says nothing.
        assert!(notices.code_issued(70_000));
        assert_eq!(notices.due(), None);
        assert_eq!(notices.flush(200_000, "connect"), None);
        assert_eq!(notices, StrangerNotices::default());
    }
}
