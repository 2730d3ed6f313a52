//! When an idle session may hibernate (docs/scaling.md#idle-sessions): the pure decision,
//! over what the host and the bridge say the session holds. The session's actor asks it
//! and applies the verdict: dropping the instance (its pool slot freed, its state already
//! in the store) and booting a fresh one from the store on the next input, the way a
//! trapped instance is replaced.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::wit::session::Hold;

/// `serve --hibernate-after`'s default: long enough that a conversation's pauses (reading
/// a reply, running a command) never cost a wake, short enough that a node's forgotten
/// sessions stop holding memory the same hour.
pub const DEFAULT_AFTER: Duration = Duration::from_secs(10 * 60);

/// The shortest idle time accepted. The bridge's per-minute input budgets live in memory
/// and start full after a wake; after a minute without input they are full anyway, so
/// hibernating never hands a sender more than the budget allows.
pub const MIN_AFTER: Duration = Duration::from_secs(60);

/// How a session hibernates: after how long without input (never: `run`, one session, and
/// the tests that do not ask for it), and the count of hibernated sessions the metrics read.
#[derive(Debug, Clone, Default)]
pub struct Hibernation {
    /// Time without input after which an idle session's instance is dropped; `None`:
    /// never.
    pub after: Option<Duration>,
    /// Raised while this session is hibernated (shared by every session of a broker).
    pub count: HibernatedCount,
}

impl Hibernation {
    /// Never hibernates.
    pub fn never() -> Self {
        Hibernation::default()
    }

    /// Hibernates after `after` without input, counted in `count`.
    pub fn after(after: Duration, count: HibernatedCount) -> Self {
        Hibernation {
            after: Some(after),
            count,
        }
    }
}

/// How many sessions are hibernated now, shared by the sessions of one broker or node and
/// read by the metrics (`botconnect_sessions{state="hibernated"}`).
#[derive(Debug, Clone, Default)]
pub struct HibernatedCount(Arc<AtomicUsize>);

impl HibernatedCount {
    /// Sessions hibernated now.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn raise(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn lower(&self) {
        // Never below zero: a count that wrapped would read as 2^64 hibernated sessions.
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

/// Why `--hibernate-after` was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AfterError {
    /// Not a number of seconds, or a negative one.
    #[error("--hibernate-after takes seconds (e.g. 600 for ten minutes) or 0 for never, got {0:?}")]
    NotSeconds(String),
    /// Shorter than [`MIN_AFTER`].
    #[error(
        "--hibernate-after must be at least {min} seconds (the bridge's per-minute budgets must \
         refill before a session sleeps), or 0 for never; got {got}",
        min = MIN_AFTER.as_secs()
    )]
    TooShort {
        /// The seconds asked for.
        got: f64,
    },
}

/// Reads `--hibernate-after`: seconds, `0` for never.
pub fn parse_after(text: &str) -> Result<Option<Duration>, AfterError> {
    let seconds: f64 = text
        .trim()
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s >= 0.0)
        .ok_or_else(|| AfterError::NotSeconds(text.to_owned()))?;
    if seconds == 0.0 {
        return Ok(None);
    }
    if seconds < MIN_AFTER.as_secs_f64() {
        return Err(AfterError::TooShort { got: seconds });
    }
    // Beyond a year is "never" in practice; Duration would overflow far later.
    Ok(Some(Duration::from_secs_f64(seconds.min(366.0 * 86_400.0))))
}

/// What the host knows of a live session when it asks whether it may hibernate.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts<'a> {
    /// Now, by the session's clock.
    pub now_ms: u64,
    /// When the last input went into the session (or it started).
    pub last_input_ms: u64,
    /// The idle time after which it hibernates.
    pub after: Duration,
    /// The bridge asked for a timer (a retry, a throttled card, a deadline): something in
    /// its memory waits for it.
    pub timer_pending: bool,
    /// Tool calls the agent waits on for a verdict.
    pub parked_calls: usize,
    /// The agent's questions waiting for an answer.
    pub agent_questions: usize,
    /// The agent says a turn runs (a local one too).
    pub agent_busy: bool,
    /// What the bridge holds only in memory (`hibernation-holds`).
    pub holds: &'a [Hold],
}

/// Why a session that has been quiet long enough is kept live all the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The bridge waits for a timer.
    Timer,
    /// Tool calls wait for a verdict.
    ParkedCalls,
    /// The agent's questions wait for an answer.
    AgentQuestions,
    /// The agent runs a turn.
    AgentBusy,
    /// The bridge holds this in memory only.
    Bridge(Hold),
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reason::Timer => "a timer",
            Reason::ParkedCalls => "tool calls waiting for a verdict",
            Reason::AgentQuestions => "the agent's questions",
            Reason::AgentBusy => "the agent's turn",
            Reason::Bridge(Hold::Turn) => "a running turn",
            Reason::Bridge(Hold::QueuedPrompts) => "queued prompts",
            Reason::Bridge(Hold::Approvals) => "pending approvals",
            Reason::Bridge(Hold::Questions) => "open questions",
            Reason::Bridge(Hold::Outbox) => "messages waiting out a rate limit",
            Reason::Bridge(Hold::CardEdit) => "a progress card edit",
            Reason::Bridge(Hold::Pairing) => "a live pairing code",
            Reason::Bridge(Hold::Steers) => "steers for the next turn",
            Reason::Bridge(Hold::Unsaved) => "unsaved state",
        })
    }
}

/// `reasons` as a log field: `a running turn, a timer`.
pub fn describe(reasons: &[Reason]) -> String {
    reasons
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Drop the instance now: nothing would be lost.
    Hibernate,
    /// Input came too recently: ask again at this time (ms).
    NotYet {
        /// When the session will have been quiet for long enough.
        at_ms: u64,
    },
    /// Quiet long enough, but something lives only in memory: ask again at this time.
    Held {
        /// What keeps it live.
        reasons: Vec<Reason>,
        /// When to look again (the holds may clear without an input, e.g. a code expiring).
        again_at_ms: u64,
    },
}

/// When a session whose last input was at `last_input_ms` has been quiet for `after`.
pub fn due_at(last_input_ms: u64, after: Duration) -> u64 {
    last_input_ms.saturating_add(u64::try_from(after.as_millis()).unwrap_or(u64::MAX))
}

/// Whether the session described by `facts` may hibernate now.
pub fn decide(facts: &Facts<'_>) -> Verdict {
    let after_ms = u64::try_from(facts.after.as_millis()).unwrap_or(u64::MAX);
    let due_ms = due_at(facts.last_input_ms, facts.after);
    if facts.now_ms < due_ms {
        return Verdict::NotYet { at_ms: due_ms };
    }
    let mut reasons = Vec::new();
    if facts.timer_pending {
        reasons.push(Reason::Timer);
    }
    if facts.parked_calls > 0 {
        reasons.push(Reason::ParkedCalls);
    }
    if facts.agent_questions > 0 {
        reasons.push(Reason::AgentQuestions);
    }
    if facts.agent_busy {
        reasons.push(Reason::AgentBusy);
    }
    reasons.extend(facts.holds.iter().map(|hold| Reason::Bridge(*hold)));
    if reasons.is_empty() {
        Verdict::Hibernate
    } else {
        Verdict::Held {
            reasons,
            // Not sooner than a minute: each look costs a call into the bridge.
            again_at_ms: facts
                .now_ms
                .saturating_add(after_ms.min(MIN_AFTER.as_millis() as u64)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000;
    const TEN_MIN: Duration = Duration::from_secs(600);

    fn quiet(now_ms: u64) -> Facts<'static> {
        Facts {
            now_ms,
            last_input_ms: T0,
            after: TEN_MIN,
            timer_pending: false,
            parked_calls: 0,
            agent_questions: 0,
            agent_busy: false,
            holds: &[],
        }
    }

    #[test]
    fn a_quiet_session_hibernates_exactly_when_the_idle_time_has_passed() {
        let table = [
            (
                T0,
                Verdict::NotYet {
                    at_ms: T0 + 600_000,
                },
            ),
            (
                T0 + 599_999,
                Verdict::NotYet {
                    at_ms: T0 + 600_000,
                },
            ),
            (T0 + 600_000, Verdict::Hibernate),
            (T0 + 3_600_000, Verdict::Hibernate),
        ];
        for (now, expected) in table {
            assert_eq!(decide(&quiet(now)), expected, "at T0 + {} ms", now - T0);
        }
    }

    #[test]
    fn anything_held_in_memory_keeps_the_session_live_and_is_named() {
        let late = T0 + 700_000;
        let again = late + 60_000;
        let cases: Vec<(Facts<'static>, Vec<Reason>)> = vec![
            (
                Facts {
                    timer_pending: true,
                    ..quiet(late)
                },
                vec![Reason::Timer],
            ),
            (
                Facts {
                    parked_calls: 1,
                    ..quiet(late)
                },
                vec![Reason::ParkedCalls],
            ),
            (
                Facts {
                    agent_questions: 2,
                    ..quiet(late)
                },
                vec![Reason::AgentQuestions],
            ),
            (
                Facts {
                    agent_busy: true,
                    ..quiet(late)
                },
                vec![Reason::AgentBusy],
            ),
            (
                Facts {
                    holds: &[Hold::Turn],
                    ..quiet(late)
                },
                vec![Reason::Bridge(Hold::Turn)],
            ),
            (
                Facts {
                    holds: &[Hold::QueuedPrompts, Hold::Approvals],
                    ..quiet(late)
                },
                vec![
                    Reason::Bridge(Hold::QueuedPrompts),
                    Reason::Bridge(Hold::Approvals),
                ],
            ),
            (
                Facts {
                    holds: &[Hold::Pairing],
                    ..quiet(late)
                },
                vec![Reason::Bridge(Hold::Pairing)],
            ),
            (
                Facts {
                    holds: &[Hold::Outbox, Hold::CardEdit, Hold::Unsaved],
                    timer_pending: true,
                    ..quiet(late)
                },
                vec![
                    Reason::Timer,
                    Reason::Bridge(Hold::Outbox),
                    Reason::Bridge(Hold::CardEdit),
                    Reason::Bridge(Hold::Unsaved),
                ],
            ),
        ];
        for (facts, reasons) in cases {
            assert_eq!(
                decide(&facts),
                Verdict::Held {
                    reasons,
                    again_at_ms: again
                },
                "{facts:?}"
            );
        }
    }

    #[test]
    fn what_is_held_does_not_matter_before_the_idle_time() {
        let facts = Facts {
            agent_busy: true,
            holds: &[Hold::Turn],
            ..quiet(T0 + 1_000)
        };
        assert_eq!(
            decide(&facts),
            Verdict::NotYet {
                at_ms: T0 + 600_000
            }
        );
    }

    #[test]
    fn hibernate_after_takes_seconds_zero_for_never_and_refuses_less_than_a_minute() {
        assert_eq!(parse_after("600"), Ok(Some(TEN_MIN)));
        assert_eq!(parse_after("60"), Ok(Some(Duration::from_secs(60))));
        assert_eq!(parse_after("0"), Ok(None));
        assert_eq!(parse_after("59"), Err(AfterError::TooShort { got: 59.0 }));
        for bad in ["", "10m", "-5", "NaN", "inf"] {
            assert_eq!(
                parse_after(bad),
                Err(AfterError::NotSeconds(bad.to_owned())),
                "{bad:?}"
            );
        }
        let message = parse_after("5").unwrap_err().to_string();
        assert!(message.contains("at least 60 seconds"), "{message}");
    }

    #[test]
    fn reasons_read_as_words_in_the_log() {
        assert_eq!(
            describe(&[Reason::Bridge(Hold::Turn), Reason::Timer]),
            "a running turn, a timer"
        );
    }

    #[test]
    fn the_count_never_goes_below_zero() {
        let count = HibernatedCount::default();
        count.lower();
        assert_eq!(count.get(), 0);
        count.raise();
        count.raise();
        count.lower();
        assert_eq!(count.get(), 1);
    }
}
