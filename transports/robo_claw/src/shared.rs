//! What the transport and its gRPC service share: rooms, files, counters and the sink.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use transport_core::sync::lock;
use transport_core::{InboundSink, TransportError};

use crate::clients::Access;
use crate::files::Files;
use crate::normalize::TRANSPORT_ID;
use crate::proto::ChatMessage;
use crate::rooms::{Outcome, Outlet, Rooms};

/// Milliseconds since the Unix epoch; injected so tests control time.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Fills a buffer with random bytes (file ids); injected so tests control randomness.
pub type Random = Arc<dyn Fn(&mut [u8]) -> Result<(), String> + Send + Sync>;

/// Settings the running service reads.
pub(crate) struct Options {
    /// Who may connect, as which senders, to which rooms.
    pub(crate) access: Access,
    pub(crate) self_sender_id: String,
    pub(crate) command_timeout: Duration,
    pub(crate) max_upload_bytes: u64,
    pub(crate) max_streams: usize,
    pub(crate) clock: Clock,
    pub(crate) random: Random,
}

/// Where the server stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum ServerState {
    #[default]
    NotStarted,
    Listening {
        addr: SocketAddr,
        tls: bool,
    },
    Stopped,
}

/// Counters and the last problems, for `diagnose`.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) state: ServerState,
    pub(crate) received: u64,
    pub(crate) ignored: u64,
    pub(crate) refused: u64,
    /// Calls refused for a sender id their client may not use.
    pub(crate) denied: u64,
    pub(crate) sent: u64,
    pub(crate) buffered: u64,
    pub(crate) dropped: u64,
    pub(crate) stalled: u64,
    pub(crate) discarded_at_stop: u64,
    pub(crate) commands: u64,
    pub(crate) uploads: u64,
    pub(crate) downloads: u64,
    pub(crate) tls_failures: u64,
    pub(crate) last_skip: Option<String>,
    pub(crate) last_error: Option<String>,
}

/// The state behind the transport and its service.
pub(crate) struct Shared {
    pub(crate) options: Options,
    rooms: Mutex<Rooms>,
    files: Mutex<Files>,
    stats: Mutex<Stats>,
    sink: Mutex<Option<InboundSink>>,
    /// Rooms whose overflow was reported and not yet relieved by a joining stream: one
    /// alert per offline spell, not one per dropped reply.
    overflowing: Mutex<BTreeSet<String>>,
    /// Bumped on every change of rooms and streams, for whoever waits for one (tests).
    changes: watch::Sender<u64>,
    /// One `SendCommand` at a time: the bridge answers commands one by one anyway.
    pub(crate) commands: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
    live_streams: AtomicUsize,
}

impl Shared {
    pub(crate) fn new(options: Options, buffer_size: usize, max_files: usize) -> Shared {
        Shared {
            options,
            rooms: Mutex::new(Rooms::new(buffer_size)),
            files: Mutex::new(Files::new(max_files)),
            stats: Mutex::new(Stats::default()),
            sink: Mutex::new(None),
            overflowing: Mutex::new(BTreeSet::new()),
            changes: watch::channel(0).0,
            commands: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(1),
            live_streams: AtomicUsize::new(0),
        }
    }

    pub(crate) fn stats(&self) -> MutexGuard<'_, Stats> {
        lock(&self.stats)
    }

    pub(crate) fn update(&self, change: impl FnOnce(&mut Stats)) {
        change(&mut self.stats());
    }

    pub(crate) fn files(&self) -> MutexGuard<'_, Files> {
        lock(&self.files)
    }

    /// Runs `change` on the rooms and tells waiters something changed.
    pub(crate) fn rooms<R>(&self, change: impl FnOnce(&mut Rooms) -> R) -> R {
        let result = change(&mut lock(&self.rooms));
        self.changes.send_modify(|version| *version += 1);
        result
    }

    /// Reads the rooms without telling anyone.
    pub(crate) fn peek_rooms<R>(&self, read: impl FnOnce(&Rooms) -> R) -> R {
        read(&lock(&self.rooms))
    }

    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub(crate) fn sink(&self) -> Option<InboundSink> {
        lock(&self.sink).clone()
    }

    pub(crate) fn set_sink(&self, sink: Option<InboundSink>) {
        *lock(&self.sink) = sink;
    }

    /// Tells the person at the terminal now; `diagnose` shows the counters behind it.
    pub(crate) fn alert(&self, text: String) {
        if let Some(sink) = self.sink() {
            sink.alert(TRANSPORT_ID, text);
        }
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// An unguessable id (`<prefix>_<32 hex digits>`), so a client cannot fetch another
    /// client's upload by counting.
    pub(crate) fn random_id(&self, prefix: &str) -> Result<String, String> {
        let mut bytes = [0u8; 16];
        (self.options.random)(&mut bytes)?;
        let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        Ok(format!("{prefix}_{hex}"))
    }

    /// Counts a stream for the lifetime of the returned guard; `None` when the server
    /// already holds as many as it accepts.
    pub(crate) fn open_stream(self: &Arc<Self>) -> Option<LiveStream> {
        let previous = self.live_streams.fetch_add(1, Ordering::SeqCst);
        let guard = LiveStream(self.clone());
        (previous < self.options.max_streams).then_some(guard)
    }

    pub(crate) fn live_streams(&self) -> usize {
        self.live_streams.load(Ordering::SeqCst)
    }

    /// Adds a stream to `room`, writing the room's buffered replies to it first.
    pub(crate) fn join(&self, room: &str, stream: u64, outlet: Outlet) {
        self.rooms(|rooms| rooms.join(room, stream, outlet));
        lock(&self.overflowing).remove(room);
    }

    /// Removes a stream from every room.
    pub(crate) fn leave(&self, stream: u64) {
        self.rooms(|rooms| rooms.leave(stream));
    }

    /// Routes a reply to its room and reports what a person must hear about: dropped
    /// replies (once per offline spell) and clients that stopped reading.
    pub(crate) fn route(
        &self,
        room: &str,
        kind: &'static str,
        message: ChatMessage,
    ) -> Result<Outcome, TransportError> {
        let routed = self.rooms(|rooms| rooms.route(room, kind, message));
        if routed.stalled > 0 {
            self.update(|stats| stats.stalled += routed.stalled as u64);
            self.alert(format!(
                "{} client(s) of room {room:?} stopped reading their stream and were disconnected; they get replies again once they reconnect",
                routed.stalled
            ));
        }
        match routed.outcome {
            Outcome::Written(_) => self.update(|stats| stats.sent += 1),
            Outcome::Captured => {}
            Outcome::Buffered { dropped } => {
                self.update(|stats| {
                    stats.buffered += 1;
                    stats.dropped += dropped as u64;
                });
                if dropped > 0 && lock(&self.overflowing).insert(room.to_owned()) {
                    let size = self.peek_rooms(|rooms| rooms.queue_capacity())
                        - crate::rooms::STREAM_QUEUE;
                    self.alert(format!(
                        "no client of room {room:?} is connected and its reply buffer ({size}) is full: the oldest replies are being dropped until one connects (doctor shows how many)"
                    ));
                }
            }
            Outcome::Refused => {
                let text = format!(
                    "no RoboClaw client of room {room:?} is connected, and bufferSize is 0, so the reply was not kept"
                );
                self.update(|stats| stats.last_error = Some(text.clone()));
                return Err(TransportError::Failed(text));
            }
        }
        Ok(routed.outcome)
    }
}

/// One counted stream; uncounted when dropped.
pub(crate) struct LiveStream(Arc<Shared>);

impl Drop for LiveStream {
    fn drop(&mut self) {
        self.0.live_streams.fetch_sub(1, Ordering::SeqCst);
        self.0.changes.send_modify(|version| *version += 1);
    }
}
