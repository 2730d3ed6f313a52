//! One Socket Mode WebSocket connection: connect, read frames, acknowledge every envelope
//! the moment it is read, and tell the listener what happened.
//!
//! Why the acknowledgement is sent here, before anything else looks at the envelope: Slack
//! wants it within 3 seconds and redelivers otherwise
//! (docs/protocols.md#slack-socket-mode), while handling can take as long as the session
//! needs (a slow session pushes back on the transport). So the read loop writes
//! `{"envelope_id"}` back, *then* hands the envelope on; it never waits for the bridge
//! first. The dispatcher de-duplicates what Slack redelivers anyway.
//!
//! Closing has two speeds. A graceful close (the connection is being replaced after a
//! refresh) sends a Close frame and keeps reading, and acknowledging, until Slack closes
//! its side, so an event Slack sent on the old connection in the meantime is not lost. An
//! abort (the transport stops) sends a Close frame and reads nothing more: an envelope
//! that was not acknowledged is redelivered by Slack, to this process later or another.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

use crate::state::Shared;
use crate::wire::{self, Frame};

/// A connected Socket Mode WebSocket.
pub(crate) type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Timing of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketTimings {
    /// How long connecting (TCP, TLS, upgrade) and then the `hello` frame may take.
    pub hello_timeout: Duration,
    /// After this long without any frame a ping is sent; after twice this long the
    /// connection is taken for dead (a half-open TCP connection never errors by itself).
    pub keepalive: Duration,
    /// How long a graceful close waits for Slack to close its side.
    pub close_timeout: Duration,
}

impl Default for SocketTimings {
    fn default() -> SocketTimings {
        SocketTimings {
            hello_timeout: Duration::from_secs(15),
            keepalive: Duration::from_secs(20),
            close_timeout: Duration::from_secs(10),
        }
    }
}

/// What a connection tells the listener.
#[derive(Debug)]
pub(crate) enum SocketEvent {
    /// The `hello` frame arrived: the connection receives events.
    Hello { connection: u64 },
    /// Slack sent `disconnect` with this reason.
    Disconnect { connection: u64, reason: String },
    /// The connection ended; `None` when it was closed on purpose or cleanly.
    Closed {
        connection: u64,
        error: Option<String>,
    },
}

/// An acknowledged envelope, on its way to the dispatcher.
#[derive(Debug)]
pub(crate) struct Received {
    pub(crate) envelope: wire::Envelope,
}

/// Connects to a URL `apps.connections.open` gave. Errors never contain the URL (its
/// ticket is a one-time credential), only its host.
pub(crate) async fn connect(
    url: &str,
    tls: Arc<rustls::ClientConfig>,
    timeout: Duration,
) -> Result<Ws, String> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|_| "apps.connections.open gave an address that is not a URL".to_owned())?;
    if !matches!(parsed.scheme(), "wss" | "ws") {
        return Err(format!(
            "apps.connections.open gave a {}:// address, not a WebSocket (wss://) one",
            parsed.scheme()
        ));
    }
    let host = transport_core::http_client::origin(&parsed);
    let connecting = tokio_tungstenite::connect_async_tls_with_config(
        url,
        None,
        true,
        Some(Connector::Rustls(tls)),
    );
    match tokio::time::timeout(timeout, connecting).await {
        Ok(Ok((ws, _response))) => Ok(ws),
        Ok(Err(error)) => Err(format!(
            "could not open the Socket Mode connection to {host}: {}",
            describe(&error)
        )),
        Err(_) => Err(format!(
            "the Socket Mode connection to {host} did not open within {} s",
            timeout.as_secs().max(1)
        )),
    }
}

/// What tungstenite said, without a URL (its HTTP error shows only the status).
fn describe(error: &tokio_tungstenite::tungstenite::Error) -> String {
    use tokio_tungstenite::tungstenite::Error;
    match error {
        Error::Http(response) => format!("the server answered HTTP {}", response.status()),
        Error::Url(_) => "the address cannot be used for a WebSocket".to_owned(),
        other => other.to_string(),
    }
}

/// One running connection.
pub(crate) struct Connection {
    pub(crate) id: u64,
    pub(crate) ws: Ws,
    pub(crate) shared: Arc<Shared>,
    pub(crate) events: mpsc::UnboundedSender<SocketEvent>,
    pub(crate) received: mpsc::Sender<Received>,
    /// Graceful close: replace this connection (see the module docs).
    pub(crate) close: CancellationToken,
    /// Abort: the transport stops.
    pub(crate) abort: CancellationToken,
    pub(crate) timings: SocketTimings,
}

impl Connection {
    /// Runs until the connection ends, then reports [`SocketEvent::Closed`].
    pub(crate) async fn run(self) {
        let id = self.id;
        let events = self.events.clone();
        let error = self.read_loop().await;
        let _ = events.send(SocketEvent::Closed {
            connection: id,
            error,
        });
    }

    async fn read_loop(self) -> Option<String> {
        let Connection {
            id,
            ws,
            shared,
            events,
            received,
            close,
            abort,
            timings,
        } = self;
        let (mut write, mut read) = ws.split();
        let keepalive = timings.keepalive.max(Duration::from_millis(10));
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + keepalive, keepalive);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut heard = false;
        let mut pinged = false;
        let mut closing: Option<tokio::time::Instant> = None;
        loop {
            let close_deadline = closing.unwrap_or_else(tokio::time::Instant::now);
            tokio::select! {
                biased;
                () = abort.cancelled() => {
                    // Best effort and brief: the process may be on its way out.
                    let _ = tokio::time::timeout(Duration::from_secs(1), write.send(Message::Close(None))).await;
                    return None;
                }
                () = close.cancelled(), if closing.is_none() => {
                    closing = Some(tokio::time::Instant::now() + timings.close_timeout);
                    if write.send(Message::Close(None)).await.is_err() {
                        return None;
                    }
                }
                () = tokio::time::sleep_until(close_deadline), if closing.is_some() => {
                    return None;
                }
                _ = ticker.tick() => {
                    if !heard {
                        if pinged {
                            return Some(format!(
                                "the Socket Mode connection went silent (no answer to a ping within {} s)",
                                keepalive.as_secs().max(1)
                            ));
                        }
                        if write.send(Message::Ping(Vec::new().into())).await.is_err() {
                            return Some("the Socket Mode connection dropped".to_owned());
                        }
                        pinged = true;
                    }
                    heard = false;
                }
                frame = read.next() => {
                    let message = match frame {
                        None => return closing.is_none().then(|| "Slack closed the connection".to_owned()),
                        Some(Err(error)) => {
                            return closing.is_none().then(|| format!("the Socket Mode connection failed: {}", describe(&error)));
                        }
                        Some(Ok(message)) => message,
                    };
                    heard = true;
                    pinged = false;
                    let Message::Text(text) = message else {
                        // Pings are answered by tungstenite itself; a Close is answered too,
                        // and the stream then ends.
                        continue;
                    };
                    match Frame::parse(text.as_str()) {
                        Some(Frame::Hello(_)) => {
                            let _ = events.send(SocketEvent::Hello { connection: id });
                        }
                        Some(Frame::Disconnect { reason }) => {
                            let _ = events.send(SocketEvent::Disconnect { connection: id, reason });
                        }
                        Some(Frame::Envelope(envelope)) => {
                            // The acknowledgement goes first (module docs).
                            let ack = Message::Text(wire::ack(&envelope.envelope_id).into());
                            if write.send(ack).await.is_err() {
                                return Some("the Socket Mode connection dropped before an envelope could be acknowledged (Slack will deliver it again)".to_owned());
                            }
                            shared.update(|stats| stats.acked += 1);
                            if received.send(Received { envelope }).await.is_err() {
                                return None;
                            }
                        }
                        Some(Frame::Other(kind)) => {
                            shared.update(|stats| stats.last_skip = Some(format!("a Socket Mode {kind:?} frame")));
                        }
                        None => {
                            shared.update(|stats| {
                                stats.unreadable_frames += 1;
                                stats.last_skip = Some("a Socket Mode frame that is not a JSON object with a type".to_owned());
                            });
                        }
                    }
                }
            }
        }
    }
}
