//! The button presses a transport can still answer privately (`OutboundMessage::answers_press`).
//!
//! Why a book and not the press itself in the envelope: what answers a press privately is
//! platform material the bridge must never hold (a Discord interaction token answers for
//! the bot for 15 minutes), and a press the transport never handed out must not be
//! answerable at all. So a transport remembers each press it delivers under the id it put
//! in `Envelope::press`, with what it needs to answer it, and looks the id up when the
//! answer comes. The book is bounded twice: entries older than the platform allows an
//! answer are forgotten, and past `capacity` the oldest goes first, so a flood of presses
//! costs a fixed amount of memory.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::lock;

/// How long a press stays answerable unless a platform says otherwise: Discord's
/// interaction tokens live 15 minutes, and no bridge answer comes later than that.
pub const PRESS_TTL: Duration = Duration::from_secs(15 * 60);

/// Presses kept at most; far more than people press in 15 minutes.
pub const PRESS_CAPACITY: usize = 1024;

/// Presses by id, oldest first, each with what answers it.
#[derive(Debug)]
pub struct Presses<T> {
    entries: Mutex<VecDeque<(String, Instant, T)>>,
    ttl: Duration,
    capacity: usize,
}

impl<T> Default for Presses<T> {
    fn default() -> Self {
        Presses::new(PRESS_CAPACITY, PRESS_TTL)
    }
}

impl<T> Presses<T> {
    /// An empty book keeping at most `capacity` presses for `ttl` each.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Presses {
            entries: Mutex::new(VecDeque::new()),
            ttl,
            capacity: capacity.max(1),
        }
    }

    /// Remembers press `id` (seen at `now`) with what answers it.
    pub fn remember(&self, id: &str, now: Instant, what: T) {
        let mut entries = lock(&self.entries);
        self.forget_old(&mut entries, now);
        entries.retain(|(known, _, _)| known != id);
        while entries.len() >= self.capacity {
            entries.pop_front();
        }
        entries.push_back((id.to_owned(), now, what));
    }

    /// Takes press `id` out of the book: `None` when it was never remembered, already
    /// taken, or is older than the book keeps. A platform that allows one answer per press
    /// (Telegram's `answerCallbackQuery`) takes it.
    pub fn take(&self, id: &str, now: Instant) -> Option<T> {
        let mut entries = lock(&self.entries);
        self.forget_old(&mut entries, now);
        let at = entries.iter().position(|(known, _, _)| known == id)?;
        entries.remove(at).map(|(_, _, what)| what)
    }

    /// How many presses are answerable at `now`.
    pub fn len(&self, now: Instant) -> usize {
        let mut entries = lock(&self.entries);
        self.forget_old(&mut entries, now);
        entries.len()
    }

    /// True when no press is answerable at `now`.
    pub fn is_empty(&self, now: Instant) -> bool {
        self.len(now) == 0
    }

    fn forget_old(&self, entries: &mut VecDeque<(String, Instant, T)>, now: Instant) {
        while entries
            .front()
            .is_some_and(|(_, at, _)| now.saturating_duration_since(*at) > self.ttl)
        {
            entries.pop_front();
        }
    }
}

impl<T: Clone> Presses<T> {
    /// What answers press `id`, leaving it in the book (a platform that allows several
    /// answers to one press, such as Discord's follow-ups).
    pub fn get(&self, id: &str, now: Instant) -> Option<T> {
        let mut entries = lock(&self.entries);
        self.forget_old(&mut entries, now);
        entries
            .iter()
            .find(|(known, _, _)| known == id)
            .map(|(_, _, what)| what.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_press_is_answerable_until_it_is_taken_or_too_old() {
        let start = Instant::now();
        let book = Presses::new(8, Duration::from_secs(60));
        book.remember("p1", start, 1);
        book.remember("p2", start + Duration::from_secs(30), 2);
        assert_eq!(book.get("p1", start), Some(1));
        assert_eq!(book.take("p1", start), Some(1));
        assert_eq!(book.take("p1", start), None, "taken once");
        assert_eq!(book.get("never", start), None, "never handed out");
        assert_eq!(book.get("p2", start + Duration::from_secs(90)), Some(2));
        assert_eq!(
            book.get("p2", start + Duration::from_secs(91)),
            None,
            "older than the book keeps"
        );
        assert!(book.is_empty(start + Duration::from_secs(91)));
    }

    #[test]
    fn past_its_capacity_the_oldest_press_goes_first() {
        let now = Instant::now();
        let book = Presses::new(2, PRESS_TTL);
        book.remember("a", now, 'a');
        book.remember("b", now, 'b');
        book.remember("c", now, 'c');
        assert_eq!(book.len(now), 2);
        assert_eq!(book.get("a", now), None);
        assert_eq!(book.get("c", now), Some('c'));
        // Remembered again: one entry, not two.
        book.remember("c", now, 'C');
        assert_eq!(book.len(now), 2);
        assert_eq!(book.get("c", now), Some('C'));
    }
}
