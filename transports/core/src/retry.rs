//! The one retry and backoff policy every platform uses: for reconnecting a poll or a
//! socket, and for waiting out a platform's `retry_after`.
//!
//! Why one policy: four platforms each inventing their own loop is how a bridge ends up
//! hammering an API after an outage (no jitter, so every restarted host retries in the
//! same millisecond), or waiting forever on a `retry_after` of a day that a buggy proxy
//! sent. The rules (I32): 5xx, timeouts and dropped connections are retried with
//! exponential backoff and jitter; a 429 waits as long as the platform said (never less,
//! capped); any other 4xx is not retried.
//!
//! Randomness is injected ([`Jitter`], from [`crate::jitter`]) so tests see exact delays.

use std::time::Duration;

use crate::jitter::Jitter;

/// How one attempt at a platform call ended, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It worked.
    Success,
    /// The platform asked to wait this long (HTTP 429 `retry_after`, Slack's
    /// `Retry-After`, Discord's float seconds converted to ms).
    RateLimited {
        /// What the platform asked for.
        retry_after_ms: u64,
    },
    /// Worth another try: 5xx, a timeout, a dropped or refused connection.
    Transient,
    /// Retrying cannot help: 4xx other than 429 (bad token, bad request, forbidden).
    Fatal,
}

impl Outcome {
    /// Classifies an HTTP status. 2xx is success, 429 needs the platform's wait (the
    /// caller reads it from the body or headers; this gives 1 s when none was given),
    /// 5xx and 408 are transient, every other status is fatal.
    pub fn from_status(status: u16, retry_after_ms: Option<u64>) -> Outcome {
        match status {
            200..=299 => Outcome::Success,
            429 => Outcome::RateLimited {
                retry_after_ms: retry_after_ms.unwrap_or(1_000),
            },
            408 | 500..=599 => Outcome::Transient,
            _ => Outcome::Fatal,
        }
    }
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Stop: it worked, it cannot work, or the attempts are used up.
    Stop,
    /// Wait this long, then try again.
    RetryAfter(Duration),
}

/// Whether one client call retries, and what. Every platform client takes one per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// One attempt (typing: worthless late).
    Never,
    /// 5xx and network failures are retried; a 429 goes to the caller, whose outbox waits
    /// per conversation and keeps the order of messages. A platform wait known in advance
    /// (an empty bucket) is waited for only up to the policy's `max_platform_wait`.
    Transient,
    /// 5xx, network failures and short 429 waits are retried within the call.
    All,
}

impl Retry {
    /// Whether this rule lets a failure that ended in `outcome` be tried again at all
    /// (the policy then decides whether the attempts and the wait allow it).
    pub fn allows(self, outcome: Outcome) -> bool {
        !matches!(
            (self, outcome),
            (Retry::Never, _) | (Retry::Transient, Outcome::RateLimited { .. })
        )
    }
}

/// Exponential backoff with jitter, and how platform waits are honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Delay after the first failure (before jitter).
    pub initial: Duration,
    /// Largest delay between two attempts after failures.
    pub max: Duration,
    /// Longest platform `retry_after` honoured within a call; a longer one is handed to
    /// the caller as a failure, so the bridge's outbox can wait without holding a call open.
    pub max_platform_wait: Duration,
    /// Attempts in all (the first one included) for one call; `None` retries for ever,
    /// which only a listener's reconnect loop should do.
    pub max_attempts: Option<u32>,
}

impl RetryPolicy {
    /// For one request: a few quick retries, then the error goes to the caller.
    pub const REQUEST: RetryPolicy = RetryPolicy {
        initial: Duration::from_millis(250),
        max: Duration::from_secs(5),
        max_platform_wait: Duration::from_secs(10),
        max_attempts: Some(3),
    };

    /// For a listener (long poll, gateway, socket): reconnect for ever, backing off to
    /// half a minute so an outage of hours costs a request every 30 s, not a flood.
    pub const RECONNECT: RetryPolicy = RetryPolicy {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(30),
        max_platform_wait: Duration::from_secs(300),
        max_attempts: None,
    };

    /// The delay after `failures` consecutive failures (1 = the first), with "equal
    /// jitter": half the exponential delay is fixed, half is random. A floor keeps a
    /// storm from retrying in a tight loop; the random half spreads many hosts apart.
    pub fn backoff(&self, failures: u32, jitter: &mut dyn Jitter) -> Duration {
        let exponent = failures.saturating_sub(1).min(20);
        let full = self.initial.saturating_mul(1u32 << exponent).min(self.max);
        let half = full / 2;
        half + half.mul_f64(jitter.unit())
    }

    /// The wait for a platform's `retry_after`: never shorter than asked (waiting less
    /// only earns another 429), plus up to 10 % jitter so queued senders do not all
    /// return at once.
    pub fn platform_wait(&self, retry_after_ms: u64, jitter: &mut dyn Jitter) -> Duration {
        let asked = Duration::from_millis(retry_after_ms);
        asked + asked.mul_f64(0.1 * jitter.unit())
    }

    /// What to do after attempt number `attempt` (1 = the first) ended in `outcome`.
    pub fn decide(&self, attempt: u32, outcome: Outcome, jitter: &mut dyn Jitter) -> Decision {
        let exhausted = self.max_attempts.is_some_and(|max| attempt >= max);
        match outcome {
            Outcome::Success | Outcome::Fatal => Decision::Stop,
            _ if exhausted => Decision::Stop,
            Outcome::RateLimited { retry_after_ms } => {
                let wait = self.platform_wait(retry_after_ms, jitter);
                if Duration::from_millis(retry_after_ms) > self.max_platform_wait {
                    Decision::Stop
                } else {
                    Decision::RetryAfter(wait)
                }
            }
            Outcome::Transient => Decision::RetryAfter(self.backoff(attempt, jitter)),
        }
    }
}

/// A listener's reconnect state: counts consecutive failures and resets on success, so
/// one bad minute does not leave a healthy connection backing off at the maximum.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: RetryPolicy,
    failures: u32,
}

impl Backoff {
    /// A fresh state for `policy`.
    pub fn new(policy: RetryPolicy) -> Self {
        Backoff {
            policy,
            failures: 0,
        }
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Records a success: the next failure starts from the initial delay again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// Records a failure and returns how long to wait before the next attempt; `None`
    /// when the policy's attempts are used up.
    pub fn failed(&mut self, outcome: Outcome, jitter: &mut dyn Jitter) -> Option<Duration> {
        self.failures = self.failures.saturating_add(1);
        match outcome {
            // A listener honours even a long platform wait: it has nothing else to do.
            Outcome::RateLimited { retry_after_ms } => {
                Some(self.policy.platform_wait(retry_after_ms, jitter))
            }
            _ => match self.policy.max_attempts {
                Some(max) if self.failures >= max => None,
                _ => Some(self.policy.backoff(self.failures, jitter)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jitter::FixedJitter;

    #[test]
    fn backoff_doubles_from_the_initial_delay_up_to_the_cap_with_equal_jitter() {
        let policy = RetryPolicy::RECONNECT;
        let none = &mut FixedJitter(0.0);
        let all = &mut FixedJitter(0.999_999);
        // Half fixed, half random: 1 s becomes 0.5–1 s.
        assert_eq!(policy.backoff(1, none), Duration::from_millis(500));
        assert!(policy.backoff(1, all) > Duration::from_millis(999));
        assert_eq!(policy.backoff(2, none), Duration::from_secs(1));
        assert_eq!(policy.backoff(3, none), Duration::from_secs(2));
        assert_eq!(policy.backoff(5, none), Duration::from_secs(8));
        // Capped at 30 s: never more, whatever the count (no overflow at u32::MAX).
        assert_eq!(policy.backoff(6, none), Duration::from_secs(15));
        assert!(policy.backoff(6, all) <= Duration::from_secs(30));
        assert_eq!(policy.backoff(u32::MAX, none), Duration::from_secs(15));
    }

    #[test]
    fn jitter_spreads_two_hosts_that_failed_together() {
        let policy = RetryPolicy::REQUEST;
        let a = policy.backoff(2, &mut FixedJitter(0.1));
        let b = policy.backoff(2, &mut FixedJitter(0.9));
        assert_ne!(a, b);
    }

    #[test]
    fn a_platform_wait_is_never_shortened_and_only_slightly_lengthened() {
        let policy = RetryPolicy::REQUEST;
        assert_eq!(
            policy.platform_wait(3_000, &mut FixedJitter(0.0)),
            Duration::from_secs(3)
        );
        let most = policy.platform_wait(3_000, &mut FixedJitter(0.999_999));
        assert!(most >= Duration::from_secs(3) && most < Duration::from_millis(3_300));
    }

    #[test]
    fn statuses_are_classified_as_i32_says() {
        assert_eq!(Outcome::from_status(200, None), Outcome::Success);
        assert_eq!(
            Outcome::from_status(429, Some(7_000)),
            Outcome::RateLimited {
                retry_after_ms: 7_000
            }
        );
        assert_eq!(
            Outcome::from_status(429, None),
            Outcome::RateLimited {
                retry_after_ms: 1_000
            }
        );
        for transient in [408, 500, 502, 503, 504] {
            assert_eq!(Outcome::from_status(transient, None), Outcome::Transient);
        }
        for fatal in [400, 401, 403, 404, 409] {
            assert_eq!(Outcome::from_status(fatal, None), Outcome::Fatal);
        }
    }

    #[test]
    fn a_request_retries_transient_failures_a_few_times_and_never_a_fatal_one() {
        let policy = RetryPolicy::REQUEST;
        let jitter = &mut FixedJitter(0.0);
        assert_eq!(policy.decide(1, Outcome::Fatal, jitter), Decision::Stop);
        assert_eq!(policy.decide(1, Outcome::Success, jitter), Decision::Stop);
        assert_eq!(
            policy.decide(1, Outcome::Transient, jitter),
            Decision::RetryAfter(Duration::from_millis(125))
        );
        assert_eq!(
            policy.decide(2, Outcome::Transient, jitter),
            Decision::RetryAfter(Duration::from_millis(250))
        );
        assert_eq!(policy.decide(3, Outcome::Transient, jitter), Decision::Stop);
    }

    #[test]
    fn a_request_waits_out_a_short_rate_limit_and_hands_a_long_one_to_the_caller() {
        let policy = RetryPolicy::REQUEST;
        let jitter = &mut FixedJitter(0.0);
        assert_eq!(
            policy.decide(
                1,
                Outcome::RateLimited {
                    retry_after_ms: 2_000
                },
                jitter
            ),
            Decision::RetryAfter(Duration::from_secs(2))
        );
        // An hour-long wait inside one call would hold the session; the outbox waits instead.
        assert_eq!(
            policy.decide(
                1,
                Outcome::RateLimited {
                    retry_after_ms: 3_600_000
                },
                jitter
            ),
            Decision::Stop
        );
    }

    #[test]
    fn a_listener_backs_off_while_failing_and_starts_over_after_a_success() {
        let mut backoff = Backoff::new(RetryPolicy::RECONNECT);
        let jitter = &mut FixedJitter(0.0);
        let first = backoff.failed(Outcome::Transient, jitter);
        let second = backoff.failed(Outcome::Transient, jitter);
        let third = backoff.failed(Outcome::Transient, jitter);
        assert_eq!(
            [first, second, third],
            [
                Some(Duration::from_millis(500)),
                Some(Duration::from_secs(1)),
                Some(Duration::from_secs(2))
            ]
        );
        assert_eq!(backoff.failures(), 3);
        backoff.succeeded();
        assert_eq!(
            backoff.failed(Outcome::Transient, jitter),
            Some(Duration::from_millis(500))
        );
        // A listener honours the platform's wait in full, even a long one.
        assert_eq!(
            backoff.failed(
                Outcome::RateLimited {
                    retry_after_ms: 120_000
                },
                jitter
            ),
            Some(Duration::from_secs(120))
        );
    }

    #[test]
    fn a_bounded_backoff_gives_up_after_its_attempts() {
        let mut backoff = Backoff::new(RetryPolicy::REQUEST);
        let jitter = &mut FixedJitter(0.0);
        assert!(backoff.failed(Outcome::Transient, jitter).is_some());
        assert!(backoff.failed(Outcome::Transient, jitter).is_some());
        assert_eq!(backoff.failed(Outcome::Transient, jitter), None);
    }
}
