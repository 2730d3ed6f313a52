//! The one request path every platform client goes through: an attempt, how the platform
//! reads its own failure, and the shared policy's verdict on trying again.
//!
//! Why one door: the Telegram, Discord and Slack clients each had their own copy of this
//! loop, with their own jitter behind their own lock and their own retry counter. Three
//! copies drift: one forgets that `Retry::Transient` hands a 429 to the caller's outbox,
//! and a flood wait is spent holding a send open; another sleeps before checking the
//! attempts left. A platform now writes only its request (the `attempt`) and its error
//! dialect ([`Failure::outcome`]: rate limit and its wait, transient or fatal).

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::jitter::Jitter;
use crate::retry::{Decision, Outcome, Retry, RetryPolicy};
use crate::sync::lock;

/// A platform's failure, as the retry policy needs to see it.
pub trait Failure {
    /// Success never reaches here; a rate limit carries the platform's wait, a 5xx, a
    /// timeout or a dropped connection is [`Outcome::Transient`], anything retrying
    /// cannot mend (a refused token, a bad request) is [`Outcome::Fatal`].
    fn outcome(&self) -> Outcome;
}

/// The retry loop of one client: its policy, its jitter and how many retries it made
/// (for `diagnose`).
pub struct Retrier {
    policy: RetryPolicy,
    jitter: Mutex<Box<dyn Jitter>>,
    retries: AtomicU64,
}

impl std::fmt::Debug for Retrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retrier")
            .field("policy", &self.policy)
            .field("retries", &self.retries())
            .finish_non_exhaustive()
    }
}

impl Retrier {
    /// A loop under `policy`; `jitter` spreads the waits (fixed in tests).
    pub fn new(policy: RetryPolicy, jitter: Box<dyn Jitter>) -> Retrier {
        Retrier {
            policy,
            jitter: Mutex::new(jitter),
            retries: AtomicU64::new(0),
        }
    }

    /// The policy the loop follows.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Retries made so far, over every call.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// Runs `attempt` until it succeeds, fails in a way `retry` and the policy do not
    /// retry, or the policy's attempts are used up; then returns its last result. Between
    /// two attempts it waits as the policy says: backoff with jitter after a transient
    /// failure, at least the platform's own wait after a rate limit.
    pub async fn call<T, E, F, Fut>(&self, retry: Retry, mut attempt: F) -> Result<T, E>
    where
        E: Failure,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut number: u32 = 1;
        loop {
            let error = match attempt().await {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            let outcome = error.outcome();
            if !retry.allows(outcome) {
                return Err(error);
            }
            // The guard ends with this statement: no lock is held across the wait.
            let decision = self
                .policy
                .decide(number, outcome, lock(&self.jitter).as_mut());
            match decision {
                Decision::Stop => return Err(error),
                Decision::RetryAfter(wait) => {
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(wait).await;
                    number = number.saturating_add(1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;
    use crate::jitter::FixedJitter;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Failed(Outcome);

    impl Failure for Failed {
        fn outcome(&self) -> Outcome {
            self.0
        }
    }

    fn retrier() -> Retrier {
        Retrier::new(RetryPolicy::REQUEST, Box::new(FixedJitter(0.0)))
    }

    /// Runs `call` against attempts that fail with `script` in turn (then succeed), and
    /// returns the result, the attempts made and the time waited on the paused clock.
    async fn run(retry: Retry, script: &[Outcome]) -> (Result<u32, Failed>, u32, Duration) {
        let retrier = retrier();
        let made = Cell::new(0u32);
        let started = Instant::now();
        let result = retrier
            .call(retry, || {
                let n = made.get();
                made.set(n + 1);
                let step = script.get(n as usize).copied();
                async move {
                    match step {
                        Some(outcome) => Err(Failed(outcome)),
                        None => Ok(n + 1),
                    }
                }
            })
            .await;
        assert_eq!(u64::from(made.get().saturating_sub(1)), retrier.retries());
        (result, made.get(), started.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn the_loop_gives_up_after_the_policys_attempts() {
        let transient = [Outcome::Transient; 10];
        let (result, attempts, waited) = run(Retry::All, &transient).await;
        assert_eq!(result, Err(Failed(Outcome::Transient)));
        assert_eq!(
            attempts, 3,
            "RetryPolicy::REQUEST allows three attempts in all"
        );
        // Equal jitter at 0: half of 250 ms, then half of 500 ms.
        assert_eq!(waited, Duration::from_millis(125 + 250));
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_failure_is_retried_until_it_works() {
        let (result, attempts, _) = run(Retry::Transient, &[Outcome::Transient]).await;
        assert_eq!((result, attempts), (Ok(2), 2));
    }

    #[tokio::test(start_paused = true)]
    async fn the_loop_waits_at_least_the_platforms_retry_after() {
        let limited = Outcome::RateLimited {
            retry_after_ms: 2_000,
        };
        let (result, attempts, waited) = run(Retry::All, &[limited]).await;
        assert_eq!((result, attempts), (Ok(2), 2));
        assert_eq!(waited, Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_retry_after_or_a_transient_rule_hands_the_429_to_the_caller() {
        let long = Outcome::RateLimited {
            retry_after_ms: 3_600_000,
        };
        let (result, attempts, waited) = run(Retry::All, &[long]).await;
        assert_eq!(
            (result, attempts, waited),
            (Err(Failed(long)), 1, Duration::ZERO)
        );
        // The outbox waits per conversation and keeps the messages' order.
        let short = Outcome::RateLimited {
            retry_after_ms: 1_000,
        };
        let (result, attempts, _) = run(Retry::Transient, &[short]).await;
        assert_eq!((result, attempts), (Err(Failed(short)), 1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_fatal_failure_is_never_retried() {
        for retry in [Retry::All, Retry::Transient, Retry::Never] {
            let (result, attempts, waited) = run(retry, &[Outcome::Fatal]).await;
            assert_eq!(
                (result, attempts, waited),
                (Err(Failed(Outcome::Fatal)), 1, Duration::ZERO),
                "{retry:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn never_means_one_attempt() {
        let (result, attempts, _) = run(Retry::Never, &[Outcome::Transient]).await;
        assert_eq!((result, attempts), (Err(Failed(Outcome::Transient)), 1));
    }
}
