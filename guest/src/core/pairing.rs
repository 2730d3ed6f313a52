//! Pairing: the code challenge that turns an unknown chat identity into a trusted one
//! (docs/security.md#pairing, invariants I1, I6, I33).
//!
//! The code is rendered only by [`terminal_code_notice`], which goes to the local terminal;
//! every text meant for a chat is built without it (I1).

use crate::core::code_hash::{CodeHash, SALT_LEN};
use crate::core::config::BridgeConfig;
use crate::core::state::PendingChallenge;
use crate::keys::{ConversationKey, Identity};

/// Largest multiple of 10 that fits below 2^32. Values at or above it are discarded, otherwise
/// the digits 0–5 would come up slightly more often than 6–9.
const UNIFORM_LIMIT: u32 = u32::MAX - u32::MAX % 10;

/// How many out-of-range values in a row are discarded before one is used anyway. A real random
/// source hits the discarded range with probability 6 in 2^32, so this only ever triggers for a
/// broken source; spinning forever on one would trap the whole session instead.
const MAX_REJECTIONS: u32 = 16;

/// Pairing parameters taken from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairingOptions {
    /// How long a code stays valid (ms).
    pub ttl_ms: u64,
    /// Number of digits in a code.
    pub digits: u32,
    /// Wrong attempts before the code is replaced.
    pub max_attempts: u32,
}

impl PairingOptions {
    /// The pairing settings of `config`.
    pub fn from_config(config: &BridgeConfig) -> Self {
        PairingOptions {
            ttl_ms: config.pairing_ttl_ms,
            digits: config.pairing_digits,
            max_attempts: config.pairing_max_attempts,
        }
    }
}

/// Why a chat is asked to pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairingReason {
    /// No code existed: a new one was made.
    New,
    /// The previous code ran out of time: a new one was made.
    Expired,
    /// Too many wrong attempts: a new one was made.
    Locked,
    /// A live code exists and the message was not an attempt.
    Awaiting,
    /// A live code exists and the attempt was wrong.
    Mismatch,
    /// The session restarted and made a new code for this chat (the old one is not kept,
    /// docs/security.md#pairing); the message was neither the new code nor counted as an attempt.
    Reissued,
}

impl PairingReason {
    /// True when a new code was made, so it must be shown at the terminal. Awaiting and
    /// mismatch keep the code already shown; re-notifying would flood the terminal.
    pub fn is_fresh(self) -> bool {
        matches!(
            self,
            PairingReason::New | PairingReason::Expired | PairingReason::Locked
        )
    }
}

/// Outcome of one message from an unauthenticated identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairingDecision {
    /// The code matched: trust the identity and drop the challenge.
    Trust,
    /// Keep `pending` (with its attempt count brought up to date) and tell the chat why it
    /// is not paired yet ([`PairingReason::Awaiting`] or [`PairingReason::Mismatch`]).
    Keep {
        /// The challenge to store.
        pending: PendingChallenge,
        /// Why.
        reason: PairingReason,
    },
    /// Make a new code with [`create_challenge`] ([`PairingReason::New`], `Expired` or
    /// `Locked`). Deciding and drawing are apart so the decision stays a pure function of
    /// its inputs and a flood can be refused before any randomness or hashing is spent.
    Issue {
        /// Why.
        reason: PairingReason,
    },
}

/// A challenge just made: the code for the local terminal (and the guest's memory only),
/// and the record the state document keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewChallenge {
    /// The digits to type. Never stored, never sent to a chat (I1).
    pub code: String,
    /// What is stored: the salted hash, length, expiry and attempts.
    pub pending: PendingChallenge,
}

/// A new challenge of `digits` uniformly random digits, valid for `ttl_ms` from `now`, its
/// hash salted with `salt`.
///
/// Each digit comes from one `random_u32()` value by rejection sampling, so every digit is
/// equally likely (a plain `% 10` would favour 0–5 slightly).
pub fn create_challenge(
    now: u64,
    ttl_ms: u64,
    digits: u32,
    random_u32: &mut dyn FnMut() -> u32,
    salt: [u8; SALT_LEN],
) -> NewChallenge {
    let code: String = (0..digits).map(|_| uniform_digit(random_u32)).collect();
    NewChallenge {
        pending: PendingChallenge {
            hash: CodeHash::new(&code, salt),
            digits,
            expires_at: now.saturating_add(ttl_ms),
            attempts: 0,
        },
        code,
    }
}

fn uniform_digit(random_u32: &mut dyn FnMut() -> u32) -> char {
    let mut value = random_u32();
    let mut rejections = 0;
    while value >= UNIFORM_LIMIT && rejections < MAX_REJECTIONS {
        value = random_u32();
        rejections += 1;
    }
    char::from(b'0' + (value % 10) as u8)
}

/// The digits of what someone typed: `123 456`, `123-456` and ` code: 123456 ` all give `123456`.
pub fn normalize_challenge_input(text: &str) -> String {
    text.chars().filter(char::is_ascii_digit).collect()
}

/// A 6-digit code in two groups of three (`123 456`) so it is easy to read aloud and retype;
/// other lengths have no obvious grouping and are shown as they are.
pub fn format_challenge_code(code: &str) -> String {
    match (code.len(), code.get(..3), code.get(3..)) {
        (6, Some(head), Some(tail)) => format!("{head} {tail}"),
        _ => code.to_string(),
    }
}

/// Whether `pending` can still be typed at `now`: not expired and not locked.
pub fn is_live(pending: &PendingChallenge, now: u64, opts: &PairingOptions) -> bool {
    now < pending.expires_at && pending.attempts < opts.max_attempts
}

/// Decides what one message from an unauthenticated identity does to the conversation's challenge.
///
/// Only a digit string of exactly the code's length is an attempt (I33): chatter such as
/// "meeting at 3pm" or "42" never burns one, so a busy channel cannot lock a person out.
/// The guess is compared against the stored hash in constant time ([`CodeHash::matches`]).
pub fn decide_pairing(
    pending: Option<&PendingChallenge>,
    text: &str,
    now: u64,
    opts: &PairingOptions,
) -> PairingDecision {
    let Some(live) = pending.filter(|p| is_live(p, now, opts)) else {
        let reason = match pending {
            None => PairingReason::New,
            Some(p) if now >= p.expires_at => PairingReason::Expired,
            Some(_) => PairingReason::Locked,
        };
        return PairingDecision::Issue { reason };
    };
    let provided = normalize_challenge_input(text);
    if provided.is_empty() || provided.len() != live.digits as usize {
        return PairingDecision::Keep {
            pending: live.clone(),
            reason: PairingReason::Awaiting,
        };
    }
    if live.hash.matches(&provided) {
        return PairingDecision::Trust;
    }
    let attempts = live.attempts.saturating_add(1);
    if attempts >= opts.max_attempts {
        return PairingDecision::Issue {
            reason: PairingReason::Locked,
        };
    }
    PairingDecision::Keep {
        pending: PendingChallenge {
            attempts,
            ..live.clone()
        },
        reason: PairingReason::Mismatch,
    }
}

/// What the chat is told while it is not paired. Never contains the code (I1): it points the
/// person at the local terminal, which is the proof of being the operator. `attempts` is the
/// wrong attempts against the code so far (for [`PairingReason::Mismatch`]).
pub fn chat_prompt(
    reason: PairingReason,
    opts: &PairingOptions,
    attempts: u32,
    local_command: &str,
) -> String {
    match reason {
        PairingReason::New => format!(
            "This chat is not paired with a pi session yet.\nIn the local pi terminal, run /{local_command} to see the {}-digit code, then send it here.",
            opts.digits
        ),
        PairingReason::Awaiting => {
            "Waiting for the pairing code. Check the local pi terminal.".to_string()
        }
        PairingReason::Mismatch => format!(
            "That code did not match. {} attempt(s) left. Check the local pi terminal.",
            opts.max_attempts.saturating_sub(attempts)
        ),
        PairingReason::Expired => {
            "The pairing code expired. A new code is shown in the local pi terminal.".to_string()
        }
        PairingReason::Locked => format!(
            "Too many wrong attempts. A new code is shown in the local pi terminal, or run /{local_command} there again."
        ),
        PairingReason::Reissued => {
            "The pi session restarted, so the pairing code changed. The new code is shown in the local pi terminal.".to_string()
        }
    }
}

/// The terminal notification that shows the code: the only place a code is ever rendered (I1).
pub fn terminal_code_notice(code: &str, ttl_ms: u64) -> String {
    format!(
        "Messenger pairing code: {} (valid {} min). Type it in the chat to pair.",
        format_challenge_code(code),
        minutes(ttl_ms)
    )
}

/// The terminal notification for a code made anew at start for a chat whose code was still live:
/// the old code is stored only as a hash, so it cannot be shown again (docs/security.md#pairing).
pub fn terminal_reissued_notice(key: &ConversationKey, code: &str, ttl_ms: u64) -> String {
    format!(
        "Messenger pairing code for {key}: {} (valid {} min). The session restarted, so the code shown before no longer works.",
        format_challenge_code(code),
        minutes(ttl_ms)
    )
}

/// A TTL in whole minutes, rounded to the nearest, at least 1, so a 30 s TTL does not read
/// "valid 0 min".
fn minutes(ttl_ms: u64) -> u64 {
    (ttl_ms.saturating_add(30_000) / 60_000).max(1)
}

/// The terminal notification after a chat identity paired.
pub fn terminal_paired_notice(identity: &Identity) -> String {
    format!("Paired {identity}")
}

/// The chat reply after pairing.
///
/// The original suggested `/connect help`, which is not a remote command: the `/` prefix
/// matches first and `connect` is an unknown word, so the person's first try became a prompt
/// to the agent (docs/decisions.md#decision-1-bot-status-is-a-command). `/help` is what
/// actually lists the commands with the default prefixes.
pub fn pairing_success_text(identity: &Identity) -> String {
    format!(
        "Paired as {identity}.\nSend a message to steer this pi session, or send /help for commands."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: PairingOptions = PairingOptions {
        ttl_ms: 300_000,
        digits: 6,
        max_attempts: 3,
    };

    /// A random source that yields `values` in turn, then repeats the last one.
    fn source(values: &[u32]) -> impl FnMut() -> u32 {
        let values = values.to_vec();
        let mut i = 0;
        move || {
            let v = values.get(i).or(values.last()).copied().unwrap_or(0);
            i += 1;
            v
        }
    }

    const SALT: [u8; SALT_LEN] = [9; SALT_LEN];

    fn challenge(code: &str, expires_at: u64, attempts: u32) -> PendingChallenge {
        PendingChallenge {
            hash: CodeHash::new(code, SALT),
            digits: code.len() as u32,
            expires_at,
            attempts,
        }
    }

    #[test]
    fn uniform_limit_is_the_largest_multiple_of_ten_below_two_to_the_32() {
        assert_eq!(UNIFORM_LIMIT, 4_294_967_290);
    }

    #[test]
    fn create_challenge_table() {
        let rows: Vec<(&[u32], u32, &str)> = vec![
            (&[1, 2, 3, 4, 5, 6], 6, "123456"),
            (&[19, 28, 37, 46], 4, "9876"),
            // Values at or above the limit are discarded, not folded onto 0–5.
            (&[4_294_967_290, 4_294_967_295, 7, 8], 2, "78"),
            (&[4_294_967_289], 3, "999"),
            // A source stuck in the discarded range still yields digits instead of spinning forever.
            (&[u32::MAX], 4, "5555"),
        ];
        for (values, digits, expected) in rows {
            let c = create_challenge(1_000, 300_000, digits, &mut source(values), SALT);
            assert_eq!(c.code, expected, "values {values:?}");
            assert_eq!(c.pending.expires_at, 301_000);
            assert_eq!(c.pending.attempts, 0);
            assert_eq!(c.pending.digits, digits);
            // Only the hash is stored, and it is the code's.
            assert!(c.pending.hash.matches(expected));
        }
        let c = create_challenge(u64::MAX - 1, 300_000, 6, &mut source(&[0]), SALT);
        assert_eq!(c.pending.expires_at, u64::MAX);
    }

    #[test]
    fn normalize_and_format_table() {
        let rows = [
            ("123 456", "123456"),
            ("123-456", "123456"),
            (" code: 123456 ", "123456"),
            ("meeting at 3pm", "3"),
            ("١٢٣", ""),
        ];
        for (input, expected) in rows {
            assert_eq!(normalize_challenge_input(input), expected, "{input:?}");
        }
        assert_eq!(format_challenge_code("123456"), "123 456");
        assert_eq!(format_challenge_code("1234"), "1234");
        assert_eq!(format_challenge_code("1234567890"), "1234567890");
    }

    #[test]
    fn reason_freshness() {
        let rows = [
            (PairingReason::New, true),
            (PairingReason::Expired, true),
            (PairingReason::Locked, true),
            (PairingReason::Awaiting, false),
            (PairingReason::Mismatch, false),
            (PairingReason::Reissued, false),
        ];
        for (reason, fresh) in rows {
            assert_eq!(reason.is_fresh(), fresh, "{reason:?}");
        }
    }

    #[test]
    fn decide_pairing_table() {
        let live = challenge("123456", 10_000, 0);
        let keep = |pending: PendingChallenge, reason| PairingDecision::Keep { pending, reason };
        let issue = |reason| PairingDecision::Issue { reason };
        let rows: Vec<(&str, Option<PendingChallenge>, &str, PairingDecision)> = vec![
            ("new", None, "hello", issue(PairingReason::New)),
            (
                "new even with digits",
                None,
                "123456",
                issue(PairingReason::New),
            ),
            (
                "awaiting",
                Some(live.clone()),
                "hello",
                keep(live.clone(), PairingReason::Awaiting),
            ),
            (
                "chatter with a time",
                Some(live.clone()),
                "meeting at 3pm",
                keep(live.clone(), PairingReason::Awaiting),
            ),
            (
                "short number",
                Some(live.clone()),
                "42",
                keep(live.clone(), PairingReason::Awaiting),
            ),
            (
                "too long",
                Some(live.clone()),
                "1234567",
                keep(live.clone(), PairingReason::Awaiting),
            ),
            (
                "match",
                Some(live.clone()),
                "123456",
                PairingDecision::Trust,
            ),
            (
                "match with dash",
                Some(live.clone()),
                "123-456",
                PairingDecision::Trust,
            ),
            (
                "match with words",
                Some(live.clone()),
                " code: 123 456 ",
                PairingDecision::Trust,
            ),
            (
                "mismatch",
                Some(live.clone()),
                "654321",
                keep(challenge("123456", 10_000, 1), PairingReason::Mismatch),
            ),
            (
                "second mismatch",
                Some(challenge("123456", 10_000, 1)),
                "000000",
                keep(challenge("123456", 10_000, 2), PairingReason::Mismatch),
            ),
            (
                "last mismatch locks",
                Some(challenge("123456", 10_000, 2)),
                "000000",
                issue(PairingReason::Locked),
            ),
            (
                "locked code is replaced",
                Some(challenge("123456", 10_000, 3)),
                "123456",
                issue(PairingReason::Locked),
            ),
            (
                "expired",
                Some(challenge("123456", 5_000, 0)),
                "123456",
                issue(PairingReason::Expired),
            ),
            (
                "expired beats locked",
                Some(challenge("123456", 4_000, 3)),
                "hi",
                issue(PairingReason::Expired),
            ),
        ];
        for (name, pending, text, expected) in rows {
            let decision = decide_pairing(pending.as_ref(), text, 5_000, &OPTS);
            assert_eq!(decision, expected, "{name}");
        }
    }

    #[test]
    fn chat_prompt_table() {
        // (reason, wrong attempts so far, text)
        let rows = [
            (
                PairingReason::New,
                0,
                "This chat is not paired with a pi session yet.\nIn the local pi terminal, run /connect to see the 6-digit code, then send it here.",
            ),
            (
                PairingReason::Awaiting,
                0,
                "Waiting for the pairing code. Check the local pi terminal.",
            ),
            (
                PairingReason::Mismatch,
                1,
                "That code did not match. 2 attempt(s) left. Check the local pi terminal.",
            ),
            (
                PairingReason::Mismatch,
                9,
                "That code did not match. 0 attempt(s) left. Check the local pi terminal.",
            ),
            (
                PairingReason::Expired,
                0,
                "The pairing code expired. A new code is shown in the local pi terminal.",
            ),
            (
                PairingReason::Locked,
                0,
                "Too many wrong attempts. A new code is shown in the local pi terminal, or run /connect there again.",
            ),
            (
                PairingReason::Reissued,
                0,
                "The pi session restarted, so the pairing code changed. The new code is shown in the local pi terminal.",
            ),
        ];
        for (reason, attempts, expected) in rows {
            let text = chat_prompt(reason, &OPTS, attempts, "connect");
            assert_eq!(text, expected, "{reason:?}");
        }
    }

    #[test]
    fn terminal_texts() {
        let rows = [
            (
                300_000,
                "Messenger pairing code: 123 456 (valid 5 min). Type it in the chat to pair.",
            ),
            (
                10_000,
                "Messenger pairing code: 123 456 (valid 1 min). Type it in the chat to pair.",
            ),
            (
                90_000,
                "Messenger pairing code: 123 456 (valid 2 min). Type it in the chat to pair.",
            ),
            (
                89_999,
                "Messenger pairing code: 123 456 (valid 1 min). Type it in the chat to pair.",
            ),
        ];
        for (ttl, expected) in rows {
            assert_eq!(terminal_code_notice("123456", ttl), expected, "{ttl}");
        }
        assert_eq!(
            terminal_reissued_notice(&ConversationKey::new("telegram", "9"), "0042", 300_000),
            "Messenger pairing code for telegram:9: 0042 (valid 5 min). The session restarted, so the code shown before no longer works."
        );
        assert_eq!(
            terminal_paired_notice(&Identity::new("telegram", "42")),
            "Paired telegram:42"
        );
        assert_eq!(
            pairing_success_text(&Identity::new("telegram", "42")),
            "Paired as telegram:42.\nSend a message to steer this pi session, or send /help for commands."
        );
    }

    #[test]
    fn options_come_from_config() {
        let config = BridgeConfig {
            pairing_ttl_ms: 60_000,
            pairing_digits: 8,
            pairing_max_attempts: 5,
            ..BridgeConfig::default()
        };
        assert_eq!(
            PairingOptions::from_config(&config),
            PairingOptions {
                ttl_ms: 60_000,
                digits: 8,
                max_attempts: 5
            }
        );
    }
}
