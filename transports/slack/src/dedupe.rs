//! Handling each Slack message once, with bounded memory.
//!
//! Slack delivers the same message more than once in two ways (docs/protocols.md#slack-socket-mode,
//! docs/protocols.md#slack-events):
//! - an envelope it saw no acknowledgement for comes again in a new envelope with
//!   `retry_attempt` ≥ 1 and the same `event_id`;
//! - an app subscribed to both `app_mention` and `message.*` gets a mention twice, as two
//!   events with different `event_id`s but the same `(channel, ts)`.
//!
//! Both keys are remembered in one least-recently-used set of fixed size: a redelivery
//! comes within minutes and the twin event within seconds, so a few thousand recent keys
//! cover them while a bot that runs for months keeps a constant footprint.

use std::num::NonZeroUsize;

use lru::LruCache;

/// How many keys are remembered: far more than the events of the minutes a redelivery
/// can take, for a bot in busy channels.
pub const DEFAULT_CAPACITY: usize = 4_096;

/// The recently seen events and messages.
#[derive(Debug)]
pub struct Dedupe {
    seen: LruCache<String, ()>,
}

/// Why an event is not handled again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Duplicate {
    /// The same `event_id` was handled (a redelivered envelope).
    Event(String),
    /// A message with the same `(channel, ts)` was handled (`app_mention` + `message`).
    Message {
        /// The channel.
        channel: String,
        /// The message's `ts`.
        ts: String,
    },
}

impl std::fmt::Display for Duplicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Duplicate::Event(id) => write!(f, "event {id} was already handled (a redelivery)"),
            Duplicate::Message { channel, ts } => write!(
                f,
                "message {ts} in {channel} was already handled (it came as app_mention and message)"
            ),
        }
    }
}

impl Dedupe {
    /// Remembers up to `capacity` keys (at least one).
    pub fn new(capacity: usize) -> Dedupe {
        Dedupe {
            seen: LruCache::new(NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN)),
        }
    }

    /// Keys remembered now.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Records an event by its `event_id` and its message by `(channel, ts)` (either may
    /// be absent) and says whether it was seen before. Both keys are recorded even when
    /// the first one already matched, so a third delivery is caught by either.
    pub fn check(
        &mut self,
        event_id: Option<&str>,
        message: Option<(&str, &str)>,
    ) -> Result<(), Duplicate> {
        let mut duplicate = None;
        if let Some(id) = event_id.filter(|id| !id.is_empty())
            && self.seen.put(format!("event {id}"), ()).is_some()
        {
            duplicate = Some(Duplicate::Event(id.to_owned()));
        }
        if let Some((channel, ts)) = message.filter(|(c, ts)| !c.is_empty() && !ts.is_empty())
            && self
                .seen
                .put(format!("message {channel} {ts}"), ())
                .is_some()
            && duplicate.is_none()
        {
            duplicate = Some(Duplicate::Message {
                channel: channel.to_owned(),
                ts: ts.to_owned(),
            });
        }
        duplicate.map_or(Ok(()), Err)
    }
}

impl Default for Dedupe {
    fn default() -> Dedupe {
        Dedupe::new(DEFAULT_CAPACITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redelivered_event_and_a_twin_message_are_duplicates() {
        let mut dedupe = Dedupe::default();
        assert_eq!(dedupe.check(Some("Ev1"), Some(("C1", "1.1"))), Ok(()));
        assert_eq!(
            dedupe.check(Some("Ev1"), Some(("C1", "1.1"))),
            Err(Duplicate::Event("Ev1".to_owned()))
        );
        // The app_mention twin: another event id, the same channel and ts.
        assert_eq!(
            dedupe.check(Some("Ev2"), Some(("C1", "1.1"))),
            Err(Duplicate::Message {
                channel: "C1".to_owned(),
                ts: "1.1".to_owned()
            })
        );
        // The same ts in another channel is another message.
        assert_eq!(dedupe.check(Some("Ev3"), Some(("C2", "1.1"))), Ok(()));
        // Events without a message (and messages without ids) are still tracked.
        assert_eq!(dedupe.check(Some("Ev4"), None), Ok(()));
        assert!(dedupe.check(Some("Ev4"), None).is_err());
        assert_eq!(dedupe.check(None, Some(("C3", "2.2"))), Ok(()));
        assert!(dedupe.check(None, Some(("C3", "2.2"))).is_err());
        assert_eq!(dedupe.check(None, None), Ok(()));
        assert_eq!(dedupe.check(Some(""), Some(("", ""))), Ok(()));
    }

    #[test]
    fn memory_stays_bounded_and_the_oldest_keys_go_first() {
        let mut dedupe = Dedupe::new(4);
        for n in 0..100 {
            assert_eq!(dedupe.check(Some(&format!("Ev{n}")), None), Ok(()));
            assert!(dedupe.len() <= 4);
        }
        assert!(dedupe.check(Some("Ev99"), None).is_err());
        assert_eq!(dedupe.check(Some("Ev0"), None), Ok(()), "long forgotten");
        assert_eq!(Dedupe::new(0).check(Some("x"), None), Ok(()));
    }
}
