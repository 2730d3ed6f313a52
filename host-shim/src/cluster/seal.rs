//! The seal on every envelope between nodes (docs/security.md#cluster-security): HMAC-SHA256, keyed
//! from the cluster key, over the subject, the message id, the time it was sealed and the body, in
//! the `Bot-Connect-Seal` header. It is checked before anything reads the body, so a client of the
//! NATS server without the key (with valid NATS credentials, even) cannot inject a prompt, an
//! `/approve`, a send or a reply.
//!
//! Replays: the message id (`Nats-Msg-Id`) and the time are inside the MAC. On JetStream the
//! stream's duplicate window (10 min) drops a copy published again within it, and a copy
//! published later is refused because its seal is older than [`MAX_SKEW`] against the time
//! the stream stored it. Core NATS requests (sends through the ingress) are checked against
//! the clock and a bounded window of the ids seen within twice [`MAX_SKEW`]. Moving a sealed
//! body to another subject (another session) breaks the MAC.
//!
//! A refused envelope is counted ([`Gate::refused`]), logged with its subject and why (at
//! most one line per [`LOG_EVERY_MS`]; the lines held back are counted in the next), and
//! never acted on.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_nats::HeaderMap;
use ring::hmac;

use super::cluster_key::ClusterKey;
use crate::local::clock::Clock;
use crate::local::logging::LogSink;

/// The header holding the seal: `v1.<sealed at, ms since the epoch>.<64 hex of the MAC>`.
pub const SEAL_HEADER: &str = "Bot-Connect-Seal";

/// How far a seal's time may be from the time it is judged at (the stream's storing time,
/// or this node's clock): nodes' clocks must agree within this (NTP does far better).
pub const MAX_SKEW_MS: u64 = 120_000;

/// The most message ids [`Gate`] remembers against replays of core NATS requests; the
/// oldest are forgotten first (each is remembered for at most twice [`MAX_SKEW_MS`]).
pub const REPLAY_WINDOW_IDS: usize = 65_536;

/// At most one refusal line per this many milliseconds: a flood of forgeries must not
/// flood the log.
pub const LOG_EVERY_MS: u64 = 10_000;

/// Why an envelope was refused. None of these says anything about the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No seal header, or no message id.
    #[error("it carries no seal (sent by something that is not a node of this cluster)")]
    Unsealed,
    /// A seal header that is not one.
    #[error("its seal is malformed")]
    Malformed,
    /// The MAC does not verify: another key, another subject, or a changed body.
    #[error(
        "its seal does not verify (a forgery, or a node with another cluster key: every node \
         needs the same one)"
    )]
    Forged,
    /// The seal is too far from the judging time: a replay, or a clock far off.
    #[error(
        "its seal is {age_ms} ms away from now (more than {MAX_SKEW_MS}): a replay, or this \
         node's clock is off"
    )]
    Stale {
        /// How far off it was.
        age_ms: u64,
    },
    /// Its message id was seen within the window: a replay.
    #[error("its message id was already handled (a replay)")]
    Replayed,
}

/// What a seal said, once verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The message id inside the seal.
    pub message_id: String,
    /// When it was sealed (ms since the epoch).
    pub sealed_at_ms: u64,
}

/// What the MAC covers: a label, then the subject, the message id, the sealing time and the
/// body, each length-prefixed, so no two different envelopes share one input.
fn seal_input(subject: &str, message_id: &str, sealed_at_ms: u64, body: &[u8]) -> Vec<u8> {
    let mut input = Vec::with_capacity(body.len() + subject.len() + message_id.len() + 64);
    input.extend_from_slice(b"bot-connect envelope seal v1");
    for part in [subject.as_bytes(), message_id.as_bytes()] {
        input.extend_from_slice(&(part.len() as u64).to_be_bytes());
        input.extend_from_slice(part);
    }
    input.extend_from_slice(&sealed_at_ms.to_be_bytes());
    input.extend_from_slice(&(body.len() as u64).to_be_bytes());
    input.extend_from_slice(body);
    input
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The seal header's value for an envelope.
pub fn seal_value(
    key: &ClusterKey,
    subject: &str,
    message_id: &str,
    sealed_at_ms: u64,
    body: &[u8],
) -> String {
    let input = seal_input(subject, message_id, sealed_at_ms, body);
    let tag = hmac::sign(key.seal_key(), &input);
    format!("v1.{sealed_at_ms}.{}", hex(tag.as_ref()))
}

/// Checks the seal in `headers` for `subject` and `body`, against `judged_at_ms` (within
/// [`MAX_SKEW_MS`]). The MAC is compared in constant time (ring's `verify`).
pub fn verify(
    key: &ClusterKey,
    subject: &str,
    headers: Option<&HeaderMap>,
    body: &[u8],
    judged_at_ms: u64,
) -> Result<Verified, Refusal> {
    let headers = headers.ok_or(Refusal::Unsealed)?;
    let seal = headers.get(SEAL_HEADER).ok_or(Refusal::Unsealed)?.as_str();
    let message_id = headers
        .get(async_nats::header::NATS_MESSAGE_ID)
        .ok_or(Refusal::Unsealed)?
        .as_str();
    let mut parts = seal.split('.');
    let (Some("v1"), Some(at), Some(tag), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::Malformed);
    };
    let sealed_at_ms: u64 = at.parse().map_err(|_| Refusal::Malformed)?;
    let tag = unhex(tag)
        .filter(|t| t.len() == 32)
        .ok_or(Refusal::Malformed)?;
    let input = seal_input(subject, message_id, sealed_at_ms, body);
    hmac::verify(key.seal_key(), &input, &tag).map_err(|_| Refusal::Forged)?;
    let age_ms = judged_at_ms.abs_diff(sealed_at_ms);
    if age_ms > MAX_SKEW_MS {
        return Err(Refusal::Stale { age_ms });
    }
    Ok(Verified {
        message_id: message_id.to_owned(),
        sealed_at_ms,
    })
}

/// A fresh message id for an envelope the platform gave none: 16 random hex digits from
/// the OS generator (unique, so the stream's duplicate window never drops it).
pub fn random_id() -> String {
    let mut bytes = [0u8; 8];
    // Without OS randomness nothing can be sealed safely; the time keeps ids unique.
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = (nanos as u64).to_le_bytes();
    }
    hex(&bytes)
}

/// The ids seen recently, oldest first, bounded.
#[derive(Debug, Default)]
struct ReplayWindow {
    order: VecDeque<(u64, String)>,
    seen: HashSet<String>,
}

impl ReplayWindow {
    /// Records `id` at `now_ms`; false when it was already there.
    fn admit(&mut self, id: &str, now_ms: u64) -> bool {
        while let Some((at, _)) = self.order.front() {
            if now_ms.saturating_sub(*at) <= 2 * MAX_SKEW_MS && self.order.len() < REPLAY_WINDOW_IDS
            {
                break;
            }
            if let Some((_, old)) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        if !self.seen.insert(id.to_owned()) {
            return false;
        }
        self.order.push_back((now_ms, id.to_owned()));
        true
    }
}

/// One node's sealing and checking: the key, the clock, the replay window of core NATS
/// requests, and the count of what it refused. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Gate {
    inner: Arc<GateState>,
}

struct GateState {
    key: ClusterKey,
    clock: Arc<dyn Clock>,
    log: Arc<dyn LogSink>,
    refused: AtomicU64,
    window: Mutex<ReplayWindow>,
    /// When the last refusal line was written, and how many were held back since.
    logged: Mutex<(Option<u64>, u64)>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("refused", &self.refused())
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// A gate sealing with `key`, judging time by `clock`, logging refusals to `log`.
    pub fn new(key: ClusterKey, clock: Arc<dyn Clock>, log: Arc<dyn LogSink>) -> Gate {
        Gate {
            inner: Arc::new(GateState {
                key,
                clock,
                log,
                refused: AtomicU64::new(0),
                window: Mutex::new(ReplayWindow::default()),
                logged: Mutex::new((None, 0)),
            }),
        }
    }

    /// The cluster key.
    pub fn key(&self) -> &ClusterKey {
        &self.inner.key
    }

    /// Envelopes refused so far.
    pub fn refused(&self) -> u64 {
        self.inner.refused.load(Ordering::SeqCst)
    }

    /// Now, by this gate's clock.
    pub fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// The headers of an envelope for `subject` with `message_id`: the id and the seal.
    pub fn headers(&self, subject: &str, message_id: &str, body: &[u8]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, message_id);
        headers.insert(
            SEAL_HEADER,
            seal_value(&self.inner.key, subject, message_id, self.now_ms(), body).as_str(),
        );
        headers
    }

    /// Checks an envelope a JetStream stream stored at `stored_at_ms` (redeliveries of it
    /// are legitimate, so no replay window: the stream's duplicate window and the skew
    /// against the storing time stand in). A refusal is counted and logged.
    pub fn check_stored(
        &self,
        subject: &str,
        headers: Option<&HeaderMap>,
        body: &[u8],
        stored_at_ms: u64,
    ) -> Result<Verified, Refusal> {
        let result = verify(&self.inner.key, subject, headers, body, stored_at_ms);
        if let Err(refusal) = &result {
            self.refuse(subject, refusal);
        }
        result
    }

    /// Checks a core NATS envelope against this node's clock and the replay window. A
    /// refusal is counted and logged.
    pub fn check_live(
        &self,
        subject: &str,
        headers: Option<&HeaderMap>,
        body: &[u8],
    ) -> Result<Verified, Refusal> {
        let now = self.now_ms();
        let result = verify(&self.inner.key, subject, headers, body, now).and_then(|verified| {
            let fresh = self
                .inner
                .window
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .admit(&verified.message_id, now);
            if fresh {
                Ok(verified)
            } else {
                Err(Refusal::Replayed)
            }
        });
        if let Err(refusal) = &result {
            self.refuse(subject, refusal);
        }
        result
    }

    /// Counts a refusal of what came on `subject` (or from a bucket's key) and logs it, at
    /// most once per [`LOG_EVERY_MS`].
    pub fn refuse(&self, subject: &str, refusal: &dyn std::fmt::Display) {
        self.inner.refused.fetch_add(1, Ordering::SeqCst);
        let now = self.now_ms();
        let held_back = {
            let mut logged = self
                .inner
                .logged
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match logged.0 {
                Some(at) if now.saturating_sub(at) < LOG_EVERY_MS => {
                    logged.1 += 1;
                    return;
                }
                _ => {
                    let held = logged.1;
                    *logged = (Some(now), 0);
                    held
                }
            }
        };
        super::warn(
            self.inner.log.as_ref(),
            "nats_envelope_refused",
            &[
                ("subject", subject.to_owned()),
                ("why", refusal.to_string()),
                ("refused_in_all", self.refused().to_string()),
                ("not_logged_since_last", held_back.to_string()),
            ],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::clock::ManualClock;
    use crate::local::logging::MemoryLog;

    fn key(byte: u8) -> ClusterKey {
        ClusterKey::from_material(&[byte; 32], "test").unwrap()
    }

    fn gate(clock: Arc<ManualClock>, log: Arc<MemoryLog>) -> Gate {
        Gate::new(key(1), clock, log)
    }

    #[test]
    fn a_sealed_envelope_verifies_and_any_change_is_a_forgery() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let log = Arc::new(MemoryLog::default());
        let gate = gate(clock, log);
        let headers = gate.headers("p.in.s1", "telegram:1:2", b"{\"text\":\"hi\"}");
        let verified = gate
            .check_stored("p.in.s1", Some(&headers), b"{\"text\":\"hi\"}", 1_000_000)
            .unwrap();
        assert_eq!(verified.message_id, "telegram:1:2");
        // Another body, another subject (session), another key: all refused.
        assert_eq!(
            gate.check_stored("p.in.s1", Some(&headers), b"{\"text\":\"rm\"}", 1_000_000),
            Err(Refusal::Forged)
        );
        assert_eq!(
            gate.check_stored("p.in.s2", Some(&headers), b"{\"text\":\"hi\"}", 1_000_000),
            Err(Refusal::Forged)
        );
        let other = Gate::new(
            key(2),
            Arc::new(ManualClock::new(1_000_000)),
            Arc::new(MemoryLog::default()),
        );
        assert_eq!(
            other.check_stored("p.in.s1", Some(&headers), b"{\"text\":\"hi\"}", 1_000_000),
            Err(Refusal::Forged)
        );
        // Another message id under the same seal.
        let mut moved = headers.clone();
        moved.insert(async_nats::header::NATS_MESSAGE_ID, "telegram:1:3");
        assert_eq!(
            gate.check_stored("p.in.s1", Some(&moved), b"{\"text\":\"hi\"}", 1_000_000),
            Err(Refusal::Forged)
        );
        assert_eq!(
            gate.check_stored("p.in.s1", None, b"{}", 1_000_000),
            Err(Refusal::Unsealed)
        );
        // Four here; the other key's refusal is its own gate's.
        assert_eq!((gate.refused(), other.refused()), (4, 1));
    }

    #[test]
    fn an_old_seal_is_stale_and_a_live_replay_is_refused() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let gate = gate(clock.clone(), Arc::new(MemoryLog::default()));
        let headers = gate.headers("p.out.telegram", "abc", b"x");
        assert!(
            gate.check_live("p.out.telegram", Some(&headers), b"x")
                .is_ok()
        );
        assert_eq!(
            gate.check_live("p.out.telegram", Some(&headers), b"x"),
            Err(Refusal::Replayed)
        );
        assert!(matches!(
            gate.check_stored(
                "p.out.telegram",
                Some(&headers),
                b"x",
                1_000_000 + MAX_SKEW_MS + 1
            ),
            Err(Refusal::Stale { .. })
        ));
        clock.advance(MAX_SKEW_MS + 1);
        assert!(matches!(
            gate.check_live("p.out.telegram", Some(&headers), b"x"),
            Err(Refusal::Stale { .. })
        ));
    }

    #[test]
    fn refusals_are_logged_at_most_once_per_period_with_the_subject() {
        let clock = Arc::new(ManualClock::new(5_000_000));
        let log = Arc::new(MemoryLog::default());
        let gate = gate(clock.clone(), log.clone());
        for _ in 0..100 {
            let _ = gate.check_live("p.out.telegram", None, b"x");
        }
        assert_eq!(gate.refused(), 100);
        let lines = log.lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(format!("{:?}", lines[0]).contains("p.out.telegram"));
        clock.advance(LOG_EVERY_MS);
        let _ = gate.check_live("p.out.telegram", None, b"x");
        let lines = log.lines();
        assert_eq!(lines.len(), 2);
        assert!(format!("{:?}", lines[1]).contains("99"), "{:?}", lines[1]);
    }

    #[test]
    fn the_replay_window_is_bounded() {
        let mut window = ReplayWindow::default();
        for i in 0..(REPLAY_WINDOW_IDS + 10) {
            assert!(window.admit(&i.to_string(), 0));
        }
        assert!(window.order.len() <= REPLAY_WINDOW_IDS);
        assert!(!window.admit(&(REPLAY_WINDOW_IDS + 9).to_string(), 0));
        // Past twice the skew an id is forgotten (its seal is stale by then anyway).
        assert!(window.admit("0x", 0));
        assert!(window.admit("fresh", 2 * MAX_SKEW_MS + 1));
        assert!(window.admit("0x", 2 * MAX_SKEW_MS + 1));
    }
}
