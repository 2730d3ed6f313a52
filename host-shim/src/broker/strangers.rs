//! The broker's answers to strangers (senders paired with no session), off the routing
//! path and under a rate limit (docs/security.md#pairing).
//!
//! Why: each stranger used to be answered inline, the router awaiting the platform's
//! send before it looked at the next message. 200 strangers delayed a paired user's
//! `/status` from 0.2 s to 15 s, and nothing bounded how many answers the bot posted (a
//! platform rate-limits the bot, not the stranger). Now a stranger's answer goes to a
//! bounded queue ([`QUEUE`]) that one task empties at most [`ANSWERS_PER_MINUTE`] a
//! minute; beyond the queue an answer is dropped and counted, and the log says so (the
//! first drop, then every [`LOG_EVERY`]th). A paired user's message never waits for it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use transport_core::{Envelope, Transport};

use crate::local::clock::Clock;
use crate::local::logging::{LogLine, LogSink};
use crate::wit::types::Level;

/// Most answers to strangers per minute, across every bot of the broker.
pub const ANSWERS_PER_MINUTE: u64 = 20;

/// Answers waiting for the rate limit; more are dropped (and counted).
pub const QUEUE: usize = 32;

/// After the first dropped answer, the log says so again every this many drops.
pub const LOG_EVERY: u64 = 100;

/// A token bucket: `per_minute` answers at once, then one every `60 000 / per_minute` ms.
/// Pure: the caller passes the time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    capacity: u64,
    interval_ms: u64,
    available: u64,
    refilled_at: u64,
}

impl RateLimit {
    /// A full bucket at `now_ms`.
    pub fn new(per_minute: u64, now_ms: u64) -> RateLimit {
        let per_minute = per_minute.max(1);
        RateLimit {
            capacity: per_minute,
            interval_ms: (60_000 / per_minute).max(1),
            available: per_minute,
            refilled_at: now_ms,
        }
    }

    /// Takes one answer's worth at `now_ms`; `Err(ms)`: none left, the next one comes in
    /// `ms`.
    pub fn take(&mut self, now_ms: u64) -> Result<(), u64> {
        let elapsed = now_ms.saturating_sub(self.refilled_at);
        let earned = elapsed / self.interval_ms;
        if earned > 0 {
            self.available = (self.available + earned).min(self.capacity);
            self.refilled_at += earned * self.interval_ms;
        }
        if self.available == self.capacity {
            // A full bucket earns nothing more: idle time must not bank a larger burst.
            self.refilled_at = self.refilled_at.max(now_ms);
        }
        if self.available > 0 {
            self.available -= 1;
            Ok(())
        } else {
            Err(self.interval_ms - now_ms.saturating_sub(self.refilled_at))
        }
    }
}

/// One answer to send.
pub struct Answer {
    /// The bot to send it with.
    pub transport: Arc<dyn Transport>,
    /// The stranger's message (its conversation and thread are answered).
    pub envelope: Envelope,
    /// The broker's text.
    pub text: String,
}

/// The queue and the task that empties it.
pub struct StrangerAnswers {
    queue: mpsc::Sender<Answer>,
    dropped: AtomicU64,
    log: Arc<dyn LogSink>,
    worker: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl StrangerAnswers {
    /// Starts the task (on the current tokio runtime) that sends queued answers under the
    /// rate limit, reading the time from `clock`.
    pub fn spawn(clock: Arc<dyn Clock>, log: Arc<dyn LogSink>) -> Arc<StrangerAnswers> {
        let (queue, mut receiver) = mpsc::channel::<Answer>(QUEUE);
        let worker_log = log.clone();
        let worker = tokio::spawn(async move {
            let mut limit = RateLimit::new(ANSWERS_PER_MINUTE, clock.now_ms());
            while let Some(answer) = receiver.recv().await {
                while let Err(wait) = limit.take(clock.now_ms()) {
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
                let sent =
                    super::send_notice(answer.transport.as_ref(), &answer.envelope, &answer.text)
                        .await;
                if let Err(error) = sent {
                    worker_log.write(
                        super::LOG_NAME,
                        LogLine::new(
                            Level::Warning,
                            "broker reply not sent",
                            &[
                                ("transport", answer.envelope.transport.clone()),
                                ("error", error.to_string()),
                            ],
                        ),
                    );
                }
            }
        });
        Arc::new(StrangerAnswers {
            queue,
            dropped: AtomicU64::new(0),
            log,
            worker: Mutex::new(Some(worker)),
        })
    }

    /// Queues `answer` without waiting; when the queue is full it is dropped, counted and
    /// (the first time, then every [`LOG_EVERY`]th) logged. False when dropped.
    pub fn offer(&self, answer: Answer) -> bool {
        let transport = answer.envelope.transport.clone();
        if self.queue.try_send(answer).is_ok() {
            return true;
        }
        let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        if dropped == 1 || dropped.is_multiple_of(LOG_EVERY) {
            self.log.write(
                super::LOG_NAME,
                LogLine::new(
                    Level::Warning,
                    "answers to strangers dropped",
                    &[
                        ("transport", transport),
                        ("dropped", dropped.to_string()),
                        (
                            "why",
                            format!(
                                "more than {QUEUE} waiting under the limit of {ANSWERS_PER_MINUTE} a minute: many unknown senders at once (a flood?); paired users are not affected"
                            ),
                        ),
                    ],
                ),
            );
        }
        false
    }

    /// Answers dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Stops the task; queued answers are not sent.
    pub fn stop(&self) {
        if let Some(worker) = super::shared::lock(&self.worker).take() {
            worker.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_allows_a_burst_then_one_every_three_seconds_and_banks_no_idle_time() {
        let mut limit = RateLimit::new(20, 1_000);
        for _ in 0..20 {
            assert_eq!(limit.take(1_000), Ok(()));
        }
        assert_eq!(limit.take(1_000), Err(3_000));
        assert_eq!(limit.take(2_500), Err(1_500));
        assert_eq!(limit.take(4_000), Ok(()));
        assert_eq!(limit.take(4_000), Err(3_000));
        // An hour idle refills the bucket, never beyond 20.
        let later = 4_000 + 3_600_000;
        for _ in 0..20 {
            assert_eq!(limit.take(later), Ok(()));
        }
        assert!(limit.take(later).is_err());
    }
}
