//! Who gets a reply: the streams of the addressed room, else the room's bounded buffer.
//!
//! Decision 8
//! (docs/decisions.md#decision-8-robo_claw-sends-only-to-the-addressed-room-and-knows-only-its-own-sender):
//! a reply goes only to the streams of its conversation (`room_id`), never to every stream
//! as the original did. While no stream of the room is connected, replies wait in a
//! per-room buffer of at most `buffer_size` messages and are written, in order, to the
//! first stream that joins the room. When the buffer is full the oldest reply is dropped
//! and the caller is told how many were dropped, so the drop is reported and never silent.
//! With `buffer_size` 0 nothing is kept: a reply for a room with no stream is refused and
//! the bridge reports the failed send.
//!
//! Everything happens under one lock with non-blocking writes, so replies reach every
//! stream in the order they were routed. Each stream's queue has room for a full buffer
//! plus [`STREAM_QUEUE`] messages; a client that stops reading fills it and is detached
//! (reported as stalled) instead of holding up the bridge.

use std::collections::{BTreeMap, VecDeque};

use tokio::sync::mpsc::{self, error::TrySendError};
use tonic::Status;

use crate::proto::ChatMessage;

/// Messages a stream may have queued beyond a flushed buffer before it counts as stalled.
pub const STREAM_QUEUE: usize = 64;

/// The sending half of one `ChatStream` response.
pub type Outlet = mpsc::Sender<Result<ChatMessage, Status>>;

/// A reply taken by a waiting `SendCommand` instead of the room's streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedReply {
    /// `reply`, `progress`, `digest` or `notice`.
    pub kind: &'static str,
    /// The text the bridge sent.
    pub text: String,
}

/// Where one reply went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written to this many streams of the room.
    Written(usize),
    /// Kept in the room's buffer; `dropped` older replies made room for it.
    Buffered {
        /// How many of the oldest buffered replies were dropped.
        dropped: usize,
    },
    /// Taken by a `SendCommand` waiting for the bridge's answer in this room.
    Captured,
    /// No stream and no buffer (`buffer_size` 0): not delivered.
    Refused,
}

/// The result of routing one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Routed {
    /// Where it went.
    pub outcome: Outcome,
    /// Streams detached because their client stopped reading (queue full).
    pub stalled: usize,
}

/// One room as `diagnose` and tests see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomStatus {
    /// Room id (the conversation id).
    pub room: String,
    /// Connected streams.
    pub streams: usize,
    /// Replies waiting for a stream.
    pub buffered: usize,
}

struct Member {
    stream: u64,
    outlet: Outlet,
}

#[derive(Default)]
struct Room {
    members: Vec<Member>,
    buffer: VecDeque<ChatMessage>,
}

impl Room {
    fn is_idle(&self) -> bool {
        self.members.is_empty() && self.buffer.is_empty()
    }
}

/// Every room with its streams and buffer. Rooms with neither are forgotten, so a client
/// naming many rooms costs nothing once it is gone.
pub struct Rooms {
    rooms: BTreeMap<String, Room>,
    captures: BTreeMap<String, Vec<CapturedReply>>,
    buffer_size: usize,
}

impl Rooms {
    /// No rooms; at most `buffer_size` replies wait per room.
    pub fn new(buffer_size: usize) -> Rooms {
        Rooms {
            rooms: BTreeMap::new(),
            captures: BTreeMap::new(),
            buffer_size,
        }
    }

    /// How many messages one stream's queue must hold: a flushed buffer and then some.
    pub fn queue_capacity(&self) -> usize {
        self.buffer_size + STREAM_QUEUE
    }

    /// Adds `stream` to `room` and writes the room's buffer to it first, oldest first.
    /// Returns how many buffered replies it received. A stream whose client is already
    /// gone is not added and the buffer stays for the next one.
    pub fn join(&mut self, room: &str, stream: u64, outlet: Outlet) -> usize {
        let entry = self.rooms.entry(room.to_owned()).or_default();
        let mut flushed = 0;
        while let Some(message) = entry.buffer.pop_front() {
            match outlet.try_send(Ok(message)) {
                Ok(()) => flushed += 1,
                // The queue holds a whole buffer, so only a closed stream ends up here.
                Err(TrySendError::Full(Ok(message)) | TrySendError::Closed(Ok(message))) => {
                    entry.buffer.push_front(message);
                    break;
                }
                Err(_) => break,
            }
        }
        if !outlet.is_closed() {
            entry.members.push(Member { stream, outlet });
        }
        flushed
    }

    /// Removes `stream` from every room it is in. Idempotent.
    pub fn leave(&mut self, stream: u64) {
        for room in self.rooms.values_mut() {
            room.members.retain(|member| member.stream != stream);
        }
        self.rooms.retain(|_, room| !room.is_idle());
    }

    /// Routes one reply to `room` (see the module docs).
    pub fn route(&mut self, room: &str, kind: &'static str, message: ChatMessage) -> Routed {
        if let Some(capture) = self.captures.get_mut(room) {
            capture.push(CapturedReply {
                kind,
                text: message.content,
            });
            return Routed {
                outcome: Outcome::Captured,
                stalled: 0,
            };
        }
        let buffer_size = self.buffer_size;
        let entry = self.rooms.entry(room.to_owned()).or_default();
        let mut written = 0;
        let mut stalled = 0;
        entry
            .members
            .retain(|member| match member.outlet.try_send(Ok(message.clone())) {
                Ok(()) => {
                    written += 1;
                    true
                }
                Err(TrySendError::Full(_)) => {
                    stalled += 1;
                    false
                }
                Err(TrySendError::Closed(_)) => false,
            });
        let outcome = if written > 0 {
            Outcome::Written(written)
        } else if buffer_size == 0 {
            Outcome::Refused
        } else {
            entry.buffer.push_back(message);
            let mut dropped = 0;
            while entry.buffer.len() > buffer_size {
                entry.buffer.pop_front();
                dropped += 1;
            }
            Outcome::Buffered { dropped }
        };
        if entry.is_idle() {
            self.rooms.remove(room);
        }
        Routed { outcome, stalled }
    }

    /// From now on replies to `room` are taken for a `SendCommand` (see [`Rooms::route`]).
    /// Returns false when a command already waits in that room.
    pub fn start_capture(&mut self, room: &str) -> bool {
        if self.captures.contains_key(room) {
            return false;
        }
        self.captures.insert(room.to_owned(), Vec::new());
        true
    }

    /// Ends the capture in `room` and returns what it took.
    pub fn end_capture(&mut self, room: &str) -> Vec<CapturedReply> {
        self.captures.remove(room).unwrap_or_default()
    }

    /// Detaches every stream (their responses end) and empties every buffer; returns how
    /// many buffered replies were discarded.
    pub fn close_all(&mut self) -> usize {
        let discarded = self.rooms.values().map(|room| room.buffer.len()).sum();
        self.rooms.clear();
        self.captures.clear();
        discarded
    }

    /// Every room with a stream or a buffered reply, by room id.
    pub fn status(&self) -> Vec<RoomStatus> {
        self.rooms
            .iter()
            .map(|(room, state)| RoomStatus {
                room: room.clone(),
                streams: state.members.len(),
                buffered: state.buffer.len(),
            })
            .collect()
    }

    /// Connected streams in every room.
    pub fn stream_count(&self) -> usize {
        self.rooms.values().map(|room| room.members.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(text: &str) -> ChatMessage {
        ChatMessage {
            content: text.to_owned(),
            ..ChatMessage::default()
        }
    }

    fn texts(receiver: &mut mpsc::Receiver<Result<ChatMessage, Status>>) -> Vec<String> {
        let mut seen = Vec::new();
        while let Ok(message) = receiver.try_recv() {
            seen.push(message.expect("a message").content);
        }
        seen
    }

    #[test]
    fn a_reply_reaches_only_the_streams_of_its_room() {
        let mut rooms = Rooms::new(4);
        let (a, mut a_rx) = mpsc::channel(rooms.queue_capacity());
        let (b, mut b_rx) = mpsc::channel(rooms.queue_capacity());
        rooms.join("a", 1, a);
        rooms.join("b", 2, b);
        let routed = rooms.route("a", "reply", reply("for a"));
        assert_eq!(routed.outcome, Outcome::Written(1));
        assert_eq!(texts(&mut a_rx), ["for a"]);
        assert!(texts(&mut b_rx).is_empty());
    }

    #[test]
    fn replies_wait_for_the_room_and_arrive_in_order() {
        let mut rooms = Rooms::new(4);
        for text in ["1", "2", "3"] {
            let routed = rooms.route("a", "reply", reply(text));
            assert_eq!(routed.outcome, Outcome::Buffered { dropped: 0 });
        }
        assert_eq!(rooms.status()[0].buffered, 3);
        let (a, mut a_rx) = mpsc::channel(rooms.queue_capacity());
        assert_eq!(rooms.join("a", 1, a), 3);
        rooms.route("a", "reply", reply("4"));
        assert_eq!(texts(&mut a_rx), ["1", "2", "3", "4"]);
    }

    #[test]
    fn overflow_drops_the_oldest_and_says_how_many() {
        let mut rooms = Rooms::new(2);
        rooms.route("a", "reply", reply("1"));
        rooms.route("a", "reply", reply("2"));
        let routed = rooms.route("a", "reply", reply("3"));
        assert_eq!(routed.outcome, Outcome::Buffered { dropped: 1 });
        let (a, mut a_rx) = mpsc::channel(rooms.queue_capacity());
        rooms.join("a", 1, a);
        assert_eq!(texts(&mut a_rx), ["2", "3"]);
    }

    #[test]
    fn without_a_buffer_a_reply_for_an_empty_room_is_refused() {
        let mut rooms = Rooms::new(0);
        assert_eq!(
            rooms.route("a", "reply", reply("1")).outcome,
            Outcome::Refused
        );
        assert!(rooms.status().is_empty());
    }

    #[test]
    fn a_gone_client_is_dropped_and_the_reply_buffered() {
        let mut rooms = Rooms::new(4);
        let (a, a_rx) = mpsc::channel(rooms.queue_capacity());
        rooms.join("a", 1, a);
        drop(a_rx);
        let routed = rooms.route("a", "reply", reply("1"));
        assert_eq!(routed.outcome, Outcome::Buffered { dropped: 0 });
        assert_eq!(
            rooms.status(),
            [RoomStatus {
                room: "a".into(),
                streams: 0,
                buffered: 1
            }]
        );
    }

    #[test]
    fn a_client_that_stops_reading_is_detached_as_stalled() {
        let mut rooms = Rooms::new(0);
        let (a, _a_rx) = mpsc::channel(1);
        rooms.join("a", 1, a);
        assert_eq!(
            rooms.route("a", "reply", reply("1")).outcome,
            Outcome::Written(1)
        );
        let routed = rooms.route("a", "reply", reply("2"));
        assert_eq!(
            routed,
            Routed {
                outcome: Outcome::Refused,
                stalled: 1
            }
        );
        assert_eq!(rooms.stream_count(), 0);
    }

    #[test]
    fn a_capture_takes_the_replies_of_its_room_only() {
        let mut rooms = Rooms::new(4);
        assert!(rooms.start_capture("a"));
        assert!(!rooms.start_capture("a"));
        assert_eq!(
            rooms.route("a", "notice", reply("status")).outcome,
            Outcome::Captured
        );
        assert_eq!(
            rooms.route("b", "reply", reply("other")).outcome,
            Outcome::Buffered { dropped: 0 }
        );
        assert_eq!(
            rooms.end_capture("a"),
            [CapturedReply {
                kind: "notice",
                text: "status".into()
            }]
        );
        assert_eq!(
            rooms.route("a", "reply", reply("later")).outcome,
            Outcome::Buffered { dropped: 0 }
        );
    }

    #[test]
    fn leaving_forgets_empty_rooms_and_close_all_counts_the_discarded() {
        let mut rooms = Rooms::new(4);
        let (a, _a_rx) = mpsc::channel(rooms.queue_capacity());
        rooms.join("a", 1, a);
        rooms.leave(1);
        rooms.leave(1);
        assert!(rooms.status().is_empty());
        rooms.route("b", "reply", reply("1"));
        rooms.route("b", "reply", reply("2"));
        assert_eq!(rooms.close_all(), 2);
        assert!(rooms.status().is_empty());
    }
}
