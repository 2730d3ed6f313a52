//! Socket Mode, kept connected: the listener opens connections and replaces them, the
//! dispatcher turns acknowledged envelopes into envelopes for the session.
//!
//! The listener (docs/protocols.md#slack-socket-mode):
//! - every connection starts with `apps.connections.open` (its URL is a single-use
//!   ticket) and counts once its `hello` arrives;
//! - `disconnect` with `warning` or `refresh_requested` (or a reason it does not know)
//!   opens a new connection **before** the old one is closed, and the old one is closed
//!   gracefully only once the new one said `hello`: both read and acknowledge meanwhile, so
//!   nothing Slack sends in the gap is lost;
//! - `link_disabled` (Socket Mode was turned off for the app) and a refused token stop
//!   receiving, tell the terminal at once (`InboundSink::alert`) and stay in `diagnose`;
//! - `too_many_websockets`, network failures, 5xx and 429 answers back off with the shared
//!   policy (`transport_core::retry`, reset by the next `hello`);
//! - a connection that ends unexpectedly is replaced at once.
//!
//! The dispatcher handles what every connection read, in arrival order: it drops
//! duplicates ([`crate::dedupe`]), normalizes ([`crate::normalize`]) and delivers. It is a
//! task of its own so that a slow session never delays the listener's answers to Slack.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use transport_core::InboundSink;
use transport_core::http::Failure as _;
use transport_core::jitter::Jitter;
use transport_core::platform::{BotSelf, Normalized};
use transport_core::retry::{Backoff, Outcome, RetryPolicy};

use crate::client::ApiError;
use crate::dedupe::Dedupe;
use crate::normalize::{TRANSPORT_ID, event_of, normalize, refusal, split_conversation};
use crate::socket::{self, Connection, Received, SocketEvent, SocketTimings};
use crate::state::{Clicked, Shared};

/// Room for acknowledged envelopes waiting for the dispatcher. When a slow session fills
/// it the connections stop reading (and acknowledging) until there is room again: Slack
/// then redelivers, which the dispatcher de-duplicates, instead of this process buffering
/// without bound.
pub const RECEIVED_CAPACITY: usize = 1_024;

/// Why a connection could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpenError {
    /// Retrying cannot help (a refused token, Socket Mode turned off).
    Fatal(String),
    /// Worth another try after the backoff.
    Retry { outcome: Outcome, text: String },
}

/// Refusals of `apps.connections.open` that retrying cannot fix.
fn open_error(error: ApiError) -> OpenError {
    let outcome = error.outcome();
    let text = error.to_string();
    match outcome {
        Outcome::Fatal => OpenError::Fatal(text),
        outcome => OpenError::Retry { outcome, text },
    }
}

/// The alert and halt reason for `link_disabled`.
pub const LINK_DISABLED: &str = "Slack closed the Socket Mode connection with link_disabled: Socket Mode is turned off for this app. Turn it on again at https://api.slack.com/apps (your app, Socket Mode), then restart";

struct Handle {
    close: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// Opens, watches and replaces Socket Mode connections.
pub(crate) struct Listener {
    pub(crate) shared: Arc<Shared>,
    pub(crate) sink: InboundSink,
    pub(crate) cancel: CancellationToken,
    pub(crate) reconnect: RetryPolicy,
    pub(crate) jitter: Box<dyn Jitter>,
    pub(crate) timings: SocketTimings,
    pub(crate) tls: Arc<rustls::ClientConfig>,
    pub(crate) received: mpsc::Sender<Received>,
    pub(crate) events_tx: mpsc::UnboundedSender<SocketEvent>,
    pub(crate) events: mpsc::UnboundedReceiver<SocketEvent>,
    next_id: u64,
    connections: HashMap<u64, Handle>,
    /// The connection that receives events.
    primary: Option<u64>,
    /// A connection opened but without `hello` yet, and until when it may take.
    pending: Option<(u64, Instant)>,
    /// The primary asked to be replaced.
    refresh: bool,
    backoff: Backoff,
    /// No new connection before this (backing off).
    not_before: Option<Instant>,
}

/// What to do after an event.
enum Next {
    Go,
    Halt(String),
}

impl Listener {
    /// A listener with no connection yet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        shared: Arc<Shared>,
        sink: InboundSink,
        cancel: CancellationToken,
        reconnect: RetryPolicy,
        jitter: Box<dyn Jitter>,
        timings: SocketTimings,
        tls: Arc<rustls::ClientConfig>,
        received: mpsc::Sender<Received>,
    ) -> Listener {
        let (events_tx, events) = mpsc::unbounded_channel();
        Listener {
            shared,
            sink,
            cancel,
            backoff: Backoff::new(reconnect),
            reconnect,
            jitter,
            timings,
            tls,
            received,
            events_tx,
            events,
            next_id: 0,
            connections: HashMap::new(),
            primary: None,
            pending: None,
            refresh: false,
            not_before: None,
        }
    }

    /// `apps.connections.open`, then the WebSocket; the connection's task is running when
    /// this returns, and its `hello` is awaited by the caller.
    async fn open(&mut self) -> Result<u64, OpenError> {
        self.shared.update(|stats| stats.connecting());
        let url = self
            .shared
            .api
            .connections_open()
            .await
            .map_err(open_error)?;
        let ws = socket::connect(&url, self.tls.clone(), self.timings.hello_timeout)
            .await
            .map_err(|text| OpenError::Retry {
                outcome: Outcome::Transient,
                text,
            })?;
        self.next_id += 1;
        let id = self.next_id;
        let close = CancellationToken::new();
        let connection = Connection {
            id,
            ws,
            shared: self.shared.clone(),
            events: self.events_tx.clone(),
            received: self.received.clone(),
            close: close.clone(),
            abort: self.cancel.child_token(),
            timings: self.timings,
        };
        let task = tokio::spawn(connection.run());
        self.connections.insert(id, Handle { close, task });
        self.pending = Some((id, Instant::now() + self.timings.hello_timeout));
        self.shared.update(|stats| stats.connections_opened += 1);
        Ok(id)
    }

    /// Opens the first connection and waits for its `hello`, so `start` can report a
    /// refused token or disabled Socket Mode itself (I16). A failure worth retrying is
    /// returned as [`OpenError::Retry`] and the loop retries it after `start`.
    pub(crate) async fn first_connection(&mut self) -> Result<(), OpenError> {
        let id = match self.open().await {
            Ok(id) => id,
            Err(error) => {
                self.failed(&error);
                return Err(error);
            }
        };
        let deadline = Instant::now() + self.timings.hello_timeout;
        loop {
            let event = tokio::select! {
                event = self.events.recv() => event,
                () = tokio::time::sleep_until(deadline) => None,
            };
            let Some(event) = event else {
                self.hello_timed_out(id);
                return Err(OpenError::Retry {
                    outcome: Outcome::Transient,
                    text: self.hello_missing_text(),
                });
            };
            let ends = matches!(
                &event,
                SocketEvent::Hello { .. } | SocketEvent::Closed { .. }
            ) || matches!(&event, SocketEvent::Disconnect { reason, .. } if reason == "link_disabled" || reason == "too_many_websockets");
            match self.on_event(event) {
                Next::Halt(reason) => return Err(OpenError::Fatal(reason)),
                Next::Go if self.primary == Some(id) => return Ok(()),
                Next::Go if ends => {
                    return Err(OpenError::Retry {
                        outcome: Outcome::Transient,
                        text: self
                            .shared
                            .stats()
                            .last_error
                            .clone()
                            .unwrap_or_else(|| "the connection ended before hello".to_owned()),
                    });
                }
                Next::Go => {}
            }
        }
    }

    fn hello_missing_text(&self) -> String {
        format!(
            "Slack sent no hello within {} s of connecting",
            self.timings.hello_timeout.as_secs().max(1)
        )
    }

    /// Gives up on a connection that said no `hello` in time.
    fn hello_timed_out(&mut self, id: u64) {
        if let Some(handle) = self.connections.remove(&id) {
            handle.task.abort();
        }
        self.pending = None;
        let text = self.hello_missing_text();
        self.failed(&OpenError::Retry {
            outcome: Outcome::Transient,
            text,
        });
    }

    /// Records a failed attempt and when the next may be made.
    fn failed(&mut self, error: &OpenError) {
        let OpenError::Retry { outcome, text } = error else {
            return;
        };
        let wait = self
            .backoff
            .failed(*outcome, self.jitter.as_mut())
            .unwrap_or(self.reconnect.max);
        self.not_before = Some(Instant::now() + wait);
        let failures = self.backoff.failures();
        self.shared.update(|stats| stats.retrying(text, failures));
    }

    /// Runs until stopped, or until a failure retrying cannot fix.
    pub(crate) async fn run(mut self) {
        loop {
            let wanted = self.pending.is_none() && (self.primary.is_none() || self.refresh);
            let ready = self.not_before.is_none_or(|at| Instant::now() >= at);
            if wanted && ready {
                self.not_before = None;
                let cancel = self.cancel.clone();
                let opened = tokio::select! {
                    biased;
                    () = cancel.cancelled() => break,
                    opened = self.open() => opened,
                };
                match opened {
                    Ok(_) => {}
                    Err(OpenError::Fatal(reason)) => {
                        self.halt(&reason);
                        break;
                    }
                    Err(error) => self.failed(&error),
                }
                continue;
            }
            let wake = self.not_before.unwrap_or_else(Instant::now);
            let (pending, hello_by) = self.pending.unwrap_or((0, Instant::now()));
            let cancel = self.cancel.clone();
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                event = self.events.recv() => {
                    // The listener holds a sender itself, so the channel never closes.
                    let Some(event) = event else { break };
                    if let Next::Halt(reason) = self.on_event(event) {
                        self.halt(&reason);
                        break;
                    }
                }
                () = tokio::time::sleep_until(wake), if wanted && self.not_before.is_some() => {
                    self.not_before = None;
                }
                () = tokio::time::sleep_until(hello_by), if self.pending.is_some() => {
                    self.hello_timed_out(pending);
                }
            }
        }
        self.shutdown().await;
    }

    fn on_event(&mut self, event: SocketEvent) -> Next {
        match event {
            SocketEvent::Hello { connection } => {
                if self.pending.is_some_and(|(id, _)| id == connection) {
                    self.pending = None;
                    self.backoff.succeeded();
                    self.not_before = None;
                    // The replacement is receiving: now the old connection may go.
                    if let Some(old) = self.primary.replace(connection)
                        && let Some(handle) = self.connections.get(&old)
                    {
                        handle.close.cancel();
                    }
                    self.refresh = false;
                    let open = self.connections.len();
                    self.shared.update(|stats| stats.connected(open));
                }
                Next::Go
            }
            SocketEvent::Disconnect { connection, reason } => {
                self.shared
                    .update(|stats| stats.last_disconnect = Some(reason.clone()));
                match reason.as_str() {
                    "link_disabled" => Next::Halt(LINK_DISABLED.to_owned()),
                    "too_many_websockets" => {
                        // Refused: this connection will not receive. Close it and try again
                        // later, when another of the app's connections has gone.
                        if let Some(handle) = self.connections.get(&connection) {
                            handle.close.cancel();
                        }
                        if self.pending.is_some_and(|(id, _)| id == connection) {
                            self.pending = None;
                            self.failed(&OpenError::Retry {
                                outcome: Outcome::Transient,
                                text: "Slack refused the connection with too_many_websockets: the app has about 10 Socket Mode connections open already (other processes using the same app token?); backing off".to_owned(),
                            });
                        } else if self.primary == Some(connection) {
                            self.primary = None;
                        }
                        Next::Go
                    }
                    // `warning`, `refresh_requested` and anything newer: replace it.
                    _ => {
                        if self.primary == Some(connection) && !self.refresh {
                            self.refresh = true;
                            self.shared.update(|stats| stats.refreshing());
                        }
                        Next::Go
                    }
                }
            }
            SocketEvent::Closed { connection, error } => {
                self.connections.remove(&connection);
                let open = self.connections.len();
                self.shared.update(|stats| stats.open_connections = open);
                if self.pending.is_some_and(|(id, _)| id == connection) {
                    self.pending = None;
                    let text =
                        error.unwrap_or_else(|| "the connection closed before hello".to_owned());
                    self.failed(&OpenError::Retry {
                        outcome: Outcome::Transient,
                        text,
                    });
                } else if self.primary == Some(connection) {
                    // Replaced at once, without a backoff: it worked until now.
                    self.primary = None;
                    self.refresh = false;
                    self.shared.update(|stats| {
                        if let Some(error) = error {
                            stats.last_error = Some(error);
                        }
                        stats.connecting();
                    });
                }
                Next::Go
            }
        }
    }

    fn halt(&mut self, reason: &str) {
        self.shared.update(|stats| stats.halted(reason));
        self.sink.alert(
            TRANSPORT_ID,
            format!("stopped receiving messages: {reason}"),
        );
    }

    /// Closes every connection and waits (briefly) for their tasks.
    pub(crate) async fn shutdown(&mut self) {
        // Cancelling the listener's token has aborted every connection (their abort
        // token is its child): each sends its Close frame and ends within a second.
        self.cancel.cancel();
        for (_, mut handle) in self.connections.drain() {
            if tokio::time::timeout(std::time::Duration::from_secs(2), &mut handle.task)
                .await
                .is_err()
            {
                handle.task.abort();
            }
        }
        self.primary = None;
        self.pending = None;
    }
}

/// Everything the dispatcher needs; it owns it until it ends.
pub(crate) struct Dispatcher {
    pub(crate) shared: Arc<Shared>,
    pub(crate) me: BotSelf,
    pub(crate) sink: InboundSink,
    pub(crate) cancel: CancellationToken,
    pub(crate) received: mpsc::Receiver<Received>,
    pub(crate) dedupe: Dedupe,
}

impl Dispatcher {
    /// Runs until stopped or until the session goes away.
    pub(crate) async fn run(mut self) {
        loop {
            let received = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return,
                received = self.received.recv() => received,
            };
            let Some(Received { envelope }) = received else {
                return;
            };
            if !self.handle(envelope).await {
                return;
            }
        }
    }

    /// False when the loop must end.
    async fn handle(&mut self, envelope: crate::wire::Envelope) -> bool {
        let payload = &envelope.payload;
        if envelope.kind == "events_api" {
            let event = event_of(payload);
            let event_id = payload.get("event_id").and_then(serde_json::Value::as_str);
            let is_message = matches!(
                event.get("type").and_then(serde_json::Value::as_str),
                Some("message" | "app_mention")
            );
            let text = |key: &str| event.get(key).and_then(serde_json::Value::as_str);
            let key = match (is_message, text("channel"), text("ts")) {
                (true, Some(channel), Some(ts)) => Some((channel, ts)),
                _ => None,
            };
            if let Err(duplicate) = self.dedupe.check(event_id, key) {
                self.shared.update(|stats| {
                    stats.duplicates += 1;
                    stats.last_skip = Some(duplicate.to_string());
                });
                return true;
            }
        }
        if envelope.kind == "interactive" {
            // A click Slack delivered twice (a redelivery) must not answer twice.
            let text = |value: Option<&serde_json::Value>, key: &str| {
                value
                    .and_then(|value| value.get(key))
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let action = payload.get("actions").and_then(|actions| actions.get(0));
            let click = format!(
                "action:{}:{}",
                text(payload.get("user"), "id"),
                text(action, "action_ts")
            );
            if let Err(duplicate) = self.dedupe.check(Some(&click), None) {
                self.shared.update(|stats| {
                    stats.duplicates += 1;
                    stats.last_skip = Some(duplicate.to_string());
                });
                return true;
            }
        }
        let wrapped = serde_json::json!({
            "envelope_id": envelope.envelope_id,
            "type": envelope.kind,
            "payload": envelope.payload,
        });
        let normalized = normalize(&wrapped, &self.me);
        if let Some(refused) = refusal(&wrapped["payload"], &normalized, &self.me) {
            self.refuse(refused);
        }
        match normalized {
            Normalized::Message(envelope) => {
                // A taken click is remembered, so the bridge can answer the clicker alone
                // (`chat.postEphemeral`) by the press id the envelope carries.
                if let Some(press) = &envelope.press {
                    let (channel, thread) = split_conversation(&envelope.conversation_id);
                    self.shared.presses.remember(
                        press,
                        std::time::Instant::now(),
                        Clicked {
                            channel: channel.to_owned(),
                            thread_ts: thread.map(str::to_owned),
                            user: envelope.user_id.clone(),
                        },
                    );
                }
                let delivered = tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => return false,
                    delivered = self.sink.deliver(envelope) => delivered,
                };
                if delivered.is_err() {
                    self.shared
                        .update(|stats| stats.halted("the session no longer takes messages"));
                    self.cancel.cancel();
                    return false;
                }
                self.shared.update(|stats| stats.received += 1);
            }
            Normalized::Ignored(reason) => self.shared.update(|stats| {
                stats.ignored += 1;
                stats.last_skip = Some(reason);
            }),
        }
        true
    }

    /// Tells a refused clicker why, in a message only they see. In its own task, best
    /// effort: the next envelope must not wait for it, and a failure only leaves the
    /// click unanswered (counted for `diagnose`).
    fn refuse(&self, refused: crate::normalize::Refusal) {
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let sent = shared
                .api
                .post_ephemeral(
                    &refused.channel,
                    &refused.user,
                    refused.thread_ts.as_deref(),
                    &refused.text,
                )
                .await;
            shared.update(|stats| match sent {
                Ok(()) => stats.clicks_refused += 1,
                Err(error) => {
                    stats.last_error = Some(format!(
                        "a refused button click could not be answered: {error}"
                    ));
                }
            });
        });
    }
}
