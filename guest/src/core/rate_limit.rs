//! Remote input rate limiting: a token bucket per kind and identity (docs/security.md#remote-input,
//! invariant I37, docs/decisions.md#decision-6-rate-limit-notices-are-keyed-by-identity).
//!
//! Tokens are counted in 1/60 000ths so a per-minute budget refills by exactly `per_minute`
//! units every millisecond: integer arithmetic, no float drift, the same answer on every build.

use std::collections::BTreeMap;

use crate::core::config::RateLimitSettings;
use crate::keys::Identity;

/// Units in one token: one minute in milliseconds.
const UNITS_PER_TOKEN: u64 = 60_000;

/// At most one rate-limit notice per identity in this window; later denials are silent so a
/// flood does not get a flood of notices back.
pub const NOTICE_INTERVAL_MS: u64 = 60_000;

/// Buckets and notice times kept before a sweep forgets the ones that carry no information.
const SWEEP_FLOOR: usize = 64;

/// One token bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Remaining budget in 1/60 000 tokens.
    pub units: u64,
    /// When `units` was last brought up to date (ms).
    pub updated_at: u64,
}

impl Bucket {
    /// The bucket refilled up to `now` for a budget of `per_minute`. A clock that went backwards
    /// refills nothing, so it cannot mint tokens.
    fn refilled(self, now: u64, per_minute: u32) -> u64 {
        let elapsed = now.saturating_sub(self.updated_at);
        self.units
            .saturating_add(elapsed.saturating_mul(u64::from(per_minute)))
            .min(capacity(per_minute))
    }
}

fn capacity(per_minute: u32) -> u64 {
    u64::from(per_minute) * UNITS_PER_TOKEN
}

/// Takes one token from `bucket` (a missing bucket starts full) for a budget of `per_minute`.
/// Returns the updated bucket and whether a token was available.
pub fn take_token(bucket: Option<Bucket>, now: u64, per_minute: u32) -> (Bucket, bool) {
    let units = bucket.map_or(capacity(per_minute), |b| b.refilled(now, per_minute));
    let allowed = units >= UNITS_PER_TOKEN;
    let units = if allowed {
        units - UNITS_PER_TOKEN
    } else {
        units
    };
    (
        Bucket {
            units,
            updated_at: now,
        },
        allowed,
    )
}

/// What a remote input is charged as; the two have separate budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum InputKind {
    /// A message forwarded to the agent.
    Prompt,
    /// A remote command.
    Command,
}

impl InputKind {
    /// Name used in log fields.
    pub fn name(self) -> &'static str {
        match self {
            InputKind::Prompt => "prompt",
            InputKind::Command => "command",
        }
    }
}

/// The verdict on one remote input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateVerdict {
    /// Go ahead.
    Allowed,
    /// Drop it; reply [`crate::core::notices::RATE_LIMITED_NOTICE`] only when `notify`.
    Denied {
        /// First denial for this identity in [`NOTICE_INTERVAL_MS`].
        notify: bool,
    },
}

/// Rate-limit memory for one session.
///
/// Memory stays bounded by recent activity: a bucket that has refilled to full says the same as
/// no bucket, and a notice older than the interval says the same as no notice, so both are
/// forgotten. Sweeps run when the maps have doubled since the last one, which keeps the cost per
/// check constant on average even when many identities write in.
#[derive(Debug, Clone, Default)]
pub struct RateLimiter {
    buckets: BTreeMap<(InputKind, Identity), Bucket>,
    last_notice: BTreeMap<Identity, u64>,
    next_sweep_at: usize,
}

impl RateLimiter {
    /// Charges one input of `kind` from `identity` at `now`. A budget of 0 per minute disables
    /// that kind's limit.
    pub fn check(
        &mut self,
        kind: InputKind,
        identity: &Identity,
        now: u64,
        settings: &RateLimitSettings,
    ) -> RateVerdict {
        let per_minute = per_minute(kind, settings);
        if per_minute == 0 {
            return RateVerdict::Allowed;
        }
        let key = (kind, identity.clone());
        let (bucket, allowed) = take_token(self.buckets.get(&key).copied(), now, per_minute);
        self.buckets.insert(key, bucket);
        let verdict = if allowed {
            RateVerdict::Allowed
        } else {
            // Keyed by identity alone
            // (docs/decisions.md#decision-6-rate-limit-notices-are-keyed-by-identity): the identity
            // already names the transport, and one notice a minute is the promise whichever budget
            // ran out.
            let notify = self
                .last_notice
                .get(identity)
                .is_none_or(|&last| now.saturating_sub(last) >= NOTICE_INTERVAL_MS);
            if notify {
                self.last_notice.insert(identity.clone(), now);
            }
            RateVerdict::Denied { notify }
        };
        if self.buckets.len() + self.last_notice.len() > self.next_sweep_at {
            self.sweep(now, settings);
        }
        verdict
    }

    /// Entries currently remembered (buckets plus notice times).
    pub fn len(&self) -> usize {
        self.buckets.len() + self.last_notice.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn sweep(&mut self, now: u64, settings: &RateLimitSettings) {
        self.buckets.retain(|(kind, _), bucket| {
            let per_minute = per_minute(*kind, settings);
            per_minute > 0 && bucket.refilled(now, per_minute) < capacity(per_minute)
        });
        self.last_notice
            .retain(|_, last| now.saturating_sub(*last) < NOTICE_INTERVAL_MS);
        self.next_sweep_at = (2 * self.len()).max(SWEEP_FLOOR);
    }
}

fn per_minute(kind: InputKind, settings: &RateLimitSettings) -> u32 {
    match kind {
        InputKind::Prompt => settings.prompts_per_minute,
        InputKind::Command => settings.commands_per_minute,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> Identity {
        let (transport, user) = text.split_once(':').unwrap_or((text, ""));
        Identity::new(transport, user)
    }

    const SETTINGS: RateLimitSettings = RateLimitSettings {
        prompts_per_minute: 2,
        commands_per_minute: 3,
    };

    #[test]
    fn take_token_table() {
        let full = capacity(2);
        /// (case, bucket before, now, expected bucket after and verdict)
        type Row = (&'static str, Option<Bucket>, u64, (Bucket, bool));
        let rows: Vec<Row> = vec![
            (
                "missing bucket starts full",
                None,
                100,
                (
                    Bucket {
                        units: full - 60_000,
                        updated_at: 100,
                    },
                    true,
                ),
            ),
            (
                "empty bucket is denied",
                Some(Bucket {
                    units: 0,
                    updated_at: 100,
                }),
                100,
                (
                    Bucket {
                        units: 0,
                        updated_at: 100,
                    },
                    false,
                ),
            ),
            (
                "refills per_minute units per ms",
                Some(Bucket {
                    units: 0,
                    updated_at: 0,
                }),
                30_000,
                (
                    Bucket {
                        units: 0,
                        updated_at: 30_000,
                    },
                    true,
                ),
            ),
            (
                "just short of a token",
                Some(Bucket {
                    units: 0,
                    updated_at: 0,
                }),
                29_999,
                (
                    Bucket {
                        units: 59_998,
                        updated_at: 29_999,
                    },
                    false,
                ),
            ),
            (
                "refill is capped",
                Some(Bucket {
                    units: 0,
                    updated_at: 0,
                }),
                10_000_000,
                (
                    Bucket {
                        units: full - 60_000,
                        updated_at: 10_000_000,
                    },
                    true,
                ),
            ),
            (
                "backwards clock mints nothing",
                Some(Bucket {
                    units: 0,
                    updated_at: 5_000,
                }),
                1_000,
                (
                    Bucket {
                        units: 0,
                        updated_at: 1_000,
                    },
                    false,
                ),
            ),
        ];
        for (name, bucket, now, expected) in rows {
            assert_eq!(take_token(bucket, now, 2), expected, "{name}");
        }
    }

    #[test]
    fn burst_then_one_notice_a_minute() {
        let mut limiter = RateLimiter::default();
        let check =
            |l: &mut RateLimiter, now| l.check(InputKind::Prompt, &id("tg:1"), now, &SETTINGS);
        let denied = |notify| RateVerdict::Denied { notify };
        // (time, expected): a burst of 2 passes, the first denial notifies, later ones in the
        // same minute are silent, and a denial 60 s after the last notice notifies again.
        let rows = [
            (0, RateVerdict::Allowed),
            (0, RateVerdict::Allowed),
            (0, denied(true)),
            (10, denied(false)),
            (20_000, denied(false)),
            (30_000, RateVerdict::Allowed),
            (30_001, denied(false)),
            (59_999, denied(false)),
            (60_000, RateVerdict::Allowed),
            (60_001, denied(true)),
            (60_002, denied(false)),
        ];
        for (now, expected) in rows {
            assert_eq!(check(&mut limiter, now), expected, "at {now}");
        }
    }

    #[test]
    fn prompt_and_command_budgets_are_separate_but_notices_shared() {
        let mut limiter = RateLimiter::default();
        for _ in 0..2 {
            assert_eq!(
                limiter.check(InputKind::Prompt, &id("tg:1"), 0, &SETTINGS),
                RateVerdict::Allowed
            );
        }
        assert_eq!(
            limiter.check(InputKind::Prompt, &id("tg:1"), 0, &SETTINGS),
            RateVerdict::Denied { notify: true }
        );
        for _ in 0..3 {
            assert_eq!(
                limiter.check(InputKind::Command, &id("tg:1"), 0, &SETTINGS),
                RateVerdict::Allowed
            );
        }
        assert_eq!(
            limiter.check(InputKind::Command, &id("tg:1"), 0, &SETTINGS),
            RateVerdict::Denied { notify: false },
            "the prompt denial already sent this identity its notice"
        );
        assert_eq!(
            limiter.check(InputKind::Prompt, &id("tg:2"), 0, &SETTINGS),
            RateVerdict::Allowed,
            "another identity has its own budget"
        );
    }

    #[test]
    fn zero_per_minute_disables_the_limit() {
        let settings = RateLimitSettings {
            prompts_per_minute: 0,
            commands_per_minute: 1,
        };
        let mut limiter = RateLimiter::default();
        for _ in 0..1_000 {
            assert_eq!(
                limiter.check(InputKind::Prompt, &id("tg:1"), 0, &settings),
                RateVerdict::Allowed
            );
        }
        assert!(limiter.is_empty());
        assert_eq!(
            limiter.check(InputKind::Command, &id("tg:1"), 0, &settings),
            RateVerdict::Allowed
        );
        assert_eq!(
            limiter.check(InputKind::Command, &id("tg:1"), 0, &settings),
            RateVerdict::Denied { notify: true }
        );
    }

    #[test]
    fn many_identities_do_not_grow_memory_forever() {
        let mut limiter = RateLimiter::default();
        // One message each from 10 000 identities, one every 10 ms: each bucket is full again
        // 30 s later (2 per minute), so only the last few thousand can still be remembered.
        for i in 0..10_000u64 {
            limiter.check(
                InputKind::Prompt,
                &id(&format!("tg:{i}")),
                i * 10,
                &SETTINGS,
            );
        }
        assert!(
            limiter.len() <= 2 * 3_000 + SWEEP_FLOOR,
            "remembered {}",
            limiter.len()
        );
    }

    #[test]
    fn sweeping_keeps_buckets_that_still_matter() {
        let mut limiter = RateLimiter::default();
        for _ in 0..2 {
            limiter.check(InputKind::Prompt, &id("tg:drained"), 0, &SETTINGS);
        }
        limiter.check(InputKind::Prompt, &id("tg:noticed"), 0, &SETTINGS);
        limiter.check(InputKind::Prompt, &id("tg:noticed"), 0, &SETTINGS);
        assert_eq!(
            limiter.check(InputKind::Prompt, &id("tg:noticed"), 0, &SETTINGS),
            RateVerdict::Denied { notify: true }
        );
        // Enough other identities to force several sweeps.
        for i in 0..500u64 {
            limiter.check(InputKind::Prompt, &id(&format!("tg:{i}")), 1_000, &SETTINGS);
        }
        assert_eq!(
            limiter.check(InputKind::Prompt, &id("tg:drained"), 1_000, &SETTINGS),
            RateVerdict::Denied { notify: true },
            "a drained bucket survives the sweeps"
        );
        assert_eq!(
            limiter.check(InputKind::Prompt, &id("tg:noticed"), 1_000, &SETTINGS),
            RateVerdict::Denied { notify: false },
            "a recent notice survives the sweeps"
        );
    }
}
