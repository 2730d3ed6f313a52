//! Loopback Discord servers: a Gateway v10 WebSocket server and a REST v10 HTTP server on
//! `127.0.0.1:<random port>`, scriptable from tests, for the Discord transport's tests and
//! the host's end-to-end tests.
//!
//! They follow Discord's documentation (docs/protocols.md#discord-gateway-and-rest), not
//! the transport:
//!
//! - **Gateway** ([`GatewayServer`]): HELLO with a chosen interval on every connection;
//!   IDENTIFY checks the token (close 4004 otherwise) and answers READY with a new
//!   session id and a `resume_gateway_url` on the path `/resume`; RESUME of a known
//!   session replays every event after the client's `seq`, then RESUMED; of an unknown one
//!   answers op 9 `false`; HEARTBEAT is answered with ACK. Events go into the session's
//!   log with increasing sequence numbers whether or not a client is connected, so a
//!   message emitted while the socket is down is replayed by a RESUME, as Discord does.
//!   Scripts: withhold ACKs, withhold HELLO or READY, close the next IDENTIFY with a code,
//!   answer the next RESUME with op 9, send RECONNECT / INVALID_SESSION / HEARTBEAT, close
//!   with any code, drop the TCP connection without a close frame, send raw text, replay
//!   more than asked (a sloppy server, to prove duplicates are dropped). Every IDENTIFY,
//!   RESUME, heartbeat, connection URL and client close code is recorded.
//! - **REST** ([`RestServer`]): `Authorization: Bot <token>` (401 otherwise), a
//!   `DiscordBot (...)` user agent, `GET /users/@me`, `GET /gateway/bot` (the loopback
//!   gateway's URL and a session start limit), create and edit message (content checked:
//!   empty → 50006, over 2000 code points → 50035; unknown message → 10008), typing (204),
//!   the bot's own reactions (`PUT`/`DELETE .../reactions/{emoji}/@me`, 204, kept per
//!   message), `X-RateLimit-*` headers on every answer, files under `/attachments/...` served
//!   without authentication, as the CDN does, and the interaction callback
//!   (`POST /interactions/{id}/{token}/callback`, no authentication needed): an interaction
//!   the test did not click, a wrong token or a callback more than 3 s after the click is
//!   10062 Unknown interaction, a second callback 40060 already acknowledged. Threads: Start
//!   Thread without Message and Modify Channel (name, `archived`) in channels the test
//!   declares ([`RestServer::add_text_channel`], with the thread permissions or not: 403
//!   50013), 10003 Unknown Channel for a thread deleted with [`RestServer::delete_thread`]
//!   (a message there too). Scripts: a failure, a 429 with float
//!   `retry_after` (bucket or global), a dropped connection, chosen bucket headers.
//!
//! [`DiscordLoopback`] starts both, wired together. Tests wait with `wait_until` on either
//! server's change hook, never by sleeping.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use transport_core::sync::lock;

use crate::conformance::ConformancePlatform;
use crate::telegram::ServedFile;

/// The token the loopback servers accept.
pub const TEST_TOKEN: &str = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GLoopB.loopback-token_AAbbCCddEEff";

/// The bot's user id.
pub const TEST_BOT_ID: &str = "123456789012345678";

/// The bot's user name.
pub const TEST_BOT_NAME: &str = "pi-bot";

/// Create Message's route, as scripts name it.
pub const CREATE_MESSAGE: &str = "POST /channels/{channel_id}/messages";
/// Edit Message's route.
pub const EDIT_MESSAGE: &str = "PATCH /channels/{channel_id}/messages/{message_id}";
/// Trigger Typing's route.
pub const TYPING: &str = "POST /channels/{channel_id}/typing";
/// Create Reaction's route (the bot's own).
pub const ADD_REACTION: &str =
    "PUT /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me";
/// Delete Own Reaction's route.
pub const REMOVE_REACTION: &str =
    "DELETE /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me";
/// Route of the interaction callback.
pub const INTERACTION_CALLBACK: &str =
    "POST /interactions/{interaction_id}/{interaction_token}/callback";
/// How long Discord waits for an interaction's callback.
pub const INTERACTION_DEADLINE: Duration = Duration::from_secs(3);
/// Route of a follow-up message to an interaction.
pub const FOLLOWUP: &str = "POST /webhooks/{application_id}/{interaction_token}";
/// How long an interaction token answers follow-ups.
pub const INTERACTION_TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Get Current User's route.
pub const GET_ME: &str = "GET /users/@me";
/// Start Thread without Message.
pub const START_THREAD: &str = "POST /channels/{channel_id}/threads";
/// Modify Channel (a thread's name, `archived`).
pub const MODIFY_CHANNEL: &str = "PATCH /channels/{channel_id}";
/// Get Gateway Bot's route.
pub const GATEWAY_BOT: &str = "GET /gateway/bot";

/// The default heartbeat interval HELLO announces, in ms: short, so tests see beats
/// quickly, long enough that a loaded machine does not miss ACKs.
pub const DEFAULT_HEARTBEAT_MS: u64 = 250;

/// Waits until `done()` holds or `timeout` passes, re-checking on every `changed` wake.
async fn wait_on(changed: &Notify, timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let notified = changed.notified();
        tokio::pin!(notified);
        // Registered before the check, so a change between the two is not missed.
        notified.as_mut().enable();
        if done() {
            return true;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return done();
        }
    }
}

// ---------------------------------------------------------------------------------------
// Payloads
// ---------------------------------------------------------------------------------------

/// A person, as `author` in a message.
pub fn user(id: &str, username: &str) -> Value {
    json!({
        "id": id,
        "username": username,
        "global_name": username,
        "discriminator": "0",
        "avatar": null,
        "public_flags": 0
    })
}

/// The loopback bot's user object.
pub fn bot_user() -> Value {
    json!({
        "id": TEST_BOT_ID,
        "username": TEST_BOT_NAME,
        "discriminator": "0",
        "avatar": null,
        "bot": true,
        "flags": 0
    })
}

/// A MESSAGE_CREATE `d` for a DM from `author_id` in DM channel `channel_id`.
pub fn dm_message(id: &str, channel_id: &str, author_id: &str, content: &str) -> Value {
    json!({
        "type": 0,
        "tts": false,
        "timestamp": "2024-05-01T12:00:00.000000+00:00",
        "pinned": false,
        "nonce": id,
        "mentions": [],
        "mention_roles": [],
        "mention_everyone": false,
        "id": id,
        "flags": 0,
        "embeds": [],
        "edited_timestamp": null,
        "content": content,
        "components": [],
        "channel_type": 1,
        "channel_id": channel_id,
        "author": user(author_id, "ada"),
        "attachments": []
    })
}

/// An INTERACTION_CREATE `d` for a click on the button `custom_id` under message
/// `message_id` in channel `channel_id`, by `user_id`: in server `guild_id` (the clicker
/// then in `member.user`, as Discord sends it) or in a DM (`user`) when it is `None`.
pub fn component_click(
    interaction_id: &str,
    token: &str,
    channel_id: &str,
    guild_id: Option<&str>,
    user_id: &str,
    message_id: &str,
    custom_id: &str,
) -> Value {
    let mut click = json!({
        "version": 1,
        "type": 3,
        "token": token,
        "id": interaction_id,
        "application_id": TEST_BOT_ID,
        "channel_id": channel_id,
        "channel": {"id": channel_id, "type": if guild_id.is_some() { 0 } else { 1 }},
        "locale": "en-GB",
        "app_permissions": "562949953421311",
        "entitlements": [],
        "authorizing_integration_owners": {"0": guild_id.unwrap_or("0")},
        "message": {
            "type": 0, "id": message_id, "channel_id": channel_id, "content": "Approval needed",
            "author": bot_user(), "components": [], "attachments": [], "embeds": [],
            "mentions": [], "mention_roles": [], "pinned": false, "mention_everyone": false,
            "tts": false, "timestamp": "2024-05-01T12:00:00.000000+00:00", "flags": 0
        },
        "data": {"custom_id": custom_id, "component_type": 2}
    });
    match guild_id {
        Some(guild) => {
            click["guild_id"] = json!(guild);
            click["guild_locale"] = json!("en-US");
            click["member"] = json!({
                "user": user(user_id, "ada"), "roles": [], "permissions": "0",
                "joined_at": "2024-01-01T00:00:00+00:00", "deaf": false, "mute": false,
                "flags": 0, "nick": null, "avatar": null
            });
        }
        None => click["user"] = user(user_id, "ada"),
    }
    click
}

/// A MESSAGE_CREATE `d` in server `guild_id`'s channel `channel_id`; `mentions` are user
/// objects (the bot's, for a mention).
pub fn guild_message(
    id: &str,
    channel_id: &str,
    guild_id: &str,
    author_id: &str,
    content: &str,
    mentions: Value,
) -> Value {
    let mut message = dm_message(id, channel_id, author_id, content);
    message["guild_id"] = json!(guild_id);
    message["channel_type"] = json!(0);
    message["mentions"] = mentions;
    message["member"] = json!({"roles": [], "joined_at": "2024-01-01T00:00:00+00:00", "deaf": false, "mute": false, "flags": 0});
    message
}

// ---------------------------------------------------------------------------------------
// Gateway
// ---------------------------------------------------------------------------------------

/// What the test asks a live connection to do.
#[derive(Debug)]
enum Command {
    Text(String),
    Close(u16, String),
    Drop,
}

#[derive(Debug)]
struct Live {
    serial: u64,
    commands: mpsc::UnboundedSender<Command>,
    /// The session this connection is ready on (after READY or RESUMED).
    ready_on: Option<String>,
}

#[derive(Debug, Default)]
struct SessionLog {
    next_seq: u64,
    /// Every event dispatched after READY (not READY/RESUMED themselves).
    events: Vec<(u64, String, Value)>,
}

#[derive(Debug, Default)]
struct GatewayState {
    token: String,
    heartbeat_ms: u64,
    withhold_acks: bool,
    withhold_hello: bool,
    withhold_ready: bool,
    close_next_identify: VecDeque<(u16, String)>,
    invalid_next_resume: VecDeque<bool>,
    replay_overlap: u64,
    sessions: HashMap<String, SessionLog>,
    current: Option<String>,
    session_serial: u64,
    connection_serial: u64,
    live: Option<Live>,
    identifies: Vec<Value>,
    resumes: Vec<Value>,
    heartbeats: Vec<Value>,
    acks: u64,
    connections: Vec<String>,
    client_closes: Vec<Option<u16>>,
    ready_count: u64,
    resumed_count: u64,
}

#[derive(Debug)]
struct GatewayInner {
    state: Mutex<GatewayState>,
    changed: Notify,
    address: SocketAddr,
}

impl GatewayInner {
    fn state(&self) -> MutexGuard<'_, GatewayState> {
        lock(&self.state)
    }
}

/// The loopback gateway. Dropping it stops it.
#[derive(Debug)]
pub struct GatewayServer {
    inner: Arc<GatewayInner>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for GatewayServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl GatewayServer {
    /// A gateway that accepts `token`. Panics when no loopback port can be bound.
    pub async fn start(token: &str) -> GatewayServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the gateway");
        let address = listener.local_addr().expect("the bound address");
        let inner = Arc::new(GatewayInner {
            state: Mutex::new(GatewayState {
                token: token.to_owned(),
                heartbeat_ms: DEFAULT_HEARTBEAT_MS,
                ..GatewayState::default()
            }),
            changed: Notify::new(),
            address,
        });
        let accept = tokio::spawn(gateway_accept(listener, inner.clone()));
        GatewayServer { inner, accept }
    }

    /// `ws://127.0.0.1:<port>`: what `GET /gateway/bot` names.
    pub fn url(&self) -> String {
        format!("ws://{}", self.inner.address)
    }

    fn changed(&self) {
        self.inner.changed.notify_waiters();
    }

    fn script(&self, change: impl FnOnce(&mut GatewayState)) {
        change(&mut self.inner.state());
        self.changed();
    }

    /// The interval later HELLOs announce.
    pub fn set_heartbeat_interval(&self, ms: u64) {
        self.script(|state| state.heartbeat_ms = ms);
    }

    /// Stop (or resume) answering heartbeats with ACK.
    pub fn withhold_acks(&self, withhold: bool) {
        self.script(|state| state.withhold_acks = withhold);
    }

    /// Stop (or resume) sending HELLO on new connections.
    pub fn withhold_hello(&self, withhold: bool) {
        self.script(|state| state.withhold_hello = withhold);
    }

    /// Stop (or resume) answering IDENTIFY with READY and RESUME with RESUMED.
    pub fn withhold_ready(&self, withhold: bool) {
        self.script(|state| state.withhold_ready = withhold);
    }

    /// The next IDENTIFY is answered by closing with `code` (4014 for a missing intent).
    pub fn close_next_identify(&self, code: u16, reason: &str) {
        self.script(|state| {
            state
                .close_next_identify
                .push_back((code, reason.to_owned()))
        });
    }

    /// The next RESUME is answered with op 9 INVALID_SESSION `d: resumable`.
    pub fn invalidate_next_resume(&self, resumable: bool) {
        self.script(|state| state.invalid_next_resume.push_back(resumable));
    }

    /// A RESUME replays this many events *before* the client's `seq` too (a sloppy
    /// server), so the client must drop what it already had.
    pub fn set_replay_overlap(&self, events: u64) {
        self.script(|state| state.replay_overlap = events);
    }

    fn command(&self, command: Command) -> bool {
        let sent = self
            .inner
            .state()
            .live
            .as_ref()
            .is_some_and(|live| live.commands.send(command).is_ok());
        self.changed();
        sent
    }

    /// Sends op 7 RECONNECT on the live connection; false when there is none.
    pub fn send_reconnect(&self) -> bool {
        self.command(Command::Text(json!({"op": 7, "d": null}).to_string()))
    }

    /// Sends op 9 INVALID_SESSION `d: resumable` on the live connection.
    pub fn send_invalid_session(&self, resumable: bool) -> bool {
        self.command(Command::Text(json!({"op": 9, "d": resumable}).to_string()))
    }

    /// Sends op 1 HEARTBEAT (the client must answer with a heartbeat at once).
    pub fn request_heartbeat(&self) -> bool {
        self.command(Command::Text(json!({"op": 1, "d": null}).to_string()))
    }

    /// Sends `text` as it is (malformed frames).
    pub fn send_raw(&self, text: &str) -> bool {
        self.command(Command::Text(text.to_owned()))
    }

    /// Closes the live connection with `code`.
    pub fn close(&self, code: u16, reason: &str) -> bool {
        self.command(Command::Close(code, reason.to_owned()))
    }

    /// Drops the live TCP connection without a close frame.
    pub fn drop_connection(&self) -> bool {
        self.command(Command::Drop)
    }

    /// Dispatches event `t` with `d` in the current session: logged with the next
    /// sequence number and sent at once when a client is ready on the session, replayed by
    /// a RESUME otherwise. Returns the sequence number; `None` when no session exists yet.
    pub fn dispatch(&self, t: &str, d: Value) -> Option<u64> {
        let seq = {
            let mut state = self.inner.state();
            let current = state.current.clone()?;
            let log = state.sessions.entry(current.clone()).or_default();
            log.next_seq += 1;
            let seq = log.next_seq;
            log.events.push((seq, t.to_owned(), d.clone()));
            if let Some(live) = &state.live
                && live.ready_on.as_deref() == Some(current.as_str())
            {
                let frame = json!({"op": 0, "t": t, "s": seq, "d": d});
                let _ = live.commands.send(Command::Text(frame.to_string()));
            }
            seq
        };
        self.changed();
        Some(seq)
    }

    /// Dispatches MESSAGE_CREATE with `message`.
    pub fn message_create(&self, message: Value) -> Option<u64> {
        self.dispatch("MESSAGE_CREATE", message)
    }

    /// The `d` of every IDENTIFY, oldest first.
    pub fn identifies(&self) -> Vec<Value> {
        self.inner.state().identifies.clone()
    }

    /// The `d` of every RESUME, oldest first.
    pub fn resumes(&self) -> Vec<Value> {
        self.inner.state().resumes.clone()
    }

    /// The `d` of every heartbeat received (the client's last sequence number).
    pub fn heartbeats(&self) -> Vec<Value> {
        self.inner.state().heartbeats.clone()
    }

    /// ACKs sent.
    pub fn acks(&self) -> u64 {
        self.inner.state().acks
    }

    /// Path and query of every connection, oldest first (`/?v=10&encoding=json`,
    /// `/resume?v=10&encoding=json`).
    pub fn connections(&self) -> Vec<String> {
        self.inner.state().connections.clone()
    }

    /// The close code of every connection the client closed (`None`: closed without a
    /// close frame, or dropped).
    pub fn client_closes(&self) -> Vec<Option<u16>> {
        self.inner.state().client_closes.clone()
    }

    /// READYs sent.
    pub fn ready_count(&self) -> u64 {
        self.inner.state().ready_count
    }

    /// RESUMEDs sent.
    pub fn resumed_count(&self) -> u64 {
        self.inner.state().resumed_count
    }

    /// Whether a client is connected and ready (after READY or RESUMED).
    pub fn is_ready(&self) -> bool {
        self.inner
            .state()
            .live
            .as_ref()
            .is_some_and(|live| live.ready_on.is_some())
    }

    /// Whether a client is connected at all.
    pub fn is_connected(&self) -> bool {
        self.inner.state().live.is_some()
    }

    /// The current session's id.
    pub fn session_id(&self) -> Option<String> {
        self.inner.state().current.clone()
    }

    /// Waits until `done(self)` holds or `timeout` passes; returns whether it held.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&GatewayServer) -> bool,
    ) -> bool {
        wait_on(&self.inner.changed, timeout, || done(self)).await
    }
}

async fn gateway_accept(listener: TcpListener, inner: Arc<GatewayInner>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        connections.spawn(gateway_connection(stream, inner.clone()));
        while connections.try_join_next().is_some() {}
    }
}

type ServerSocket = tokio_tungstenite::WebSocketStream<TcpStream>;

async fn send_text(socket: &mut ServerSocket, text: String) -> bool {
    socket.send(WsMessage::text(text)).await.is_ok()
}

async fn gateway_connection(stream: TcpStream, inner: Arc<GatewayInner>) {
    let path = Arc::new(Mutex::new(String::new()));
    let seen = path.clone();
    // The error type is tungstenite's (`ErrorResponse`), not ours to shrink.
    #[allow(clippy::result_large_err)]
    let callback = move |request: &tokio_tungstenite::tungstenite::handshake::server::Request,
                         response| {
        *lock(&seen) = request
            .uri()
            .path_and_query()
            .map(|path| path.as_str().to_owned())
            .unwrap_or_default();
        Ok(response)
    };
    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };
    let (commands, mut scripted) = mpsc::unbounded_channel();
    let (serial, hello) = {
        let mut state = inner.state();
        state.connection_serial += 1;
        let serial = state.connection_serial;
        state.connections.push(lock(&path).clone());
        state.live = Some(Live {
            serial,
            commands,
            ready_on: None,
        });
        let hello = (!state.withhold_hello).then(|| {
            json!({"op": 10, "d": {"heartbeat_interval": state.heartbeat_ms, "_trace": ["loopback"]}, "s": null, "t": null})
        });
        (serial, hello)
    };
    inner.changed.notify_waiters();
    let mut client_close: Option<Option<u16>> = None;
    if let Some(hello) = hello
        && !send_text(&mut socket, hello.to_string()).await
    {
        client_close = Some(None);
    }
    while client_close.is_none() {
        tokio::select! {
            command = scripted.recv() => match command {
                Some(Command::Text(text)) => {
                    if !send_text(&mut socket, text).await {
                        client_close = Some(None);
                    }
                }
                Some(Command::Close(code, reason)) => {
                    let _ = socket
                        .close(Some(CloseFrame { code: CloseCode::from(code), reason: reason.into() }))
                        .await;
                    // Read until the client's answer or the end, briefly.
                    let _ = tokio::time::timeout(Duration::from_secs(2), async {
                        while let Some(Ok(_)) = socket.next().await {}
                    })
                    .await;
                    break;
                }
                Some(Command::Drop) | None => break,
            },
            incoming = socket.next() => match incoming {
                Some(Ok(WsMessage::Text(text))) => {
                    if !on_client_frame(&inner, serial, &mut socket, text.as_str()).await {
                        break;
                    }
                }
                Some(Ok(WsMessage::Close(frame))) => {
                    client_close = Some(frame.map(|frame| u16::from(frame.code)));
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => client_close = Some(None),
            },
        }
    }
    {
        let mut state = inner.state();
        if let Some(code) = client_close {
            state.client_closes.push(code);
        }
        if state
            .live
            .as_ref()
            .is_some_and(|live| live.serial == serial)
        {
            state.live = None;
        }
    }
    inner.changed.notify_waiters();
}

/// Answers one client frame; false when the server closed the connection.
async fn on_client_frame(
    inner: &GatewayInner,
    serial: u64,
    socket: &mut ServerSocket,
    text: &str,
) -> bool {
    let Ok(frame) = serde_json::from_str::<Value>(text) else {
        let _ = socket
            .close(Some(CloseFrame {
                code: CloseCode::from(4002),
                reason: "Error while decoding payload.".into(),
            }))
            .await;
        return false;
    };
    let d = frame.get("d").cloned().unwrap_or(Value::Null);
    let mut out: Vec<String> = Vec::new();
    let mut close: Option<(u16, String)> = None;
    {
        let mut state = inner.state();
        match frame.get("op").and_then(Value::as_u64) {
            Some(1) => {
                state.heartbeats.push(d);
                if !state.withhold_acks {
                    state.acks += 1;
                    out.push(json!({"op": 11}).to_string());
                }
            }
            Some(2) => {
                state.identifies.push(d.clone());
                if d.get("token").and_then(Value::as_str) != Some(state.token.as_str()) {
                    close = Some((4004, "Authentication failed.".to_owned()));
                } else if let Some(scripted) = state.close_next_identify.pop_front() {
                    close = Some(scripted);
                } else if !state.withhold_ready {
                    state.session_serial += 1;
                    let session = format!("loopback-session-{}", state.session_serial);
                    state.current = Some(session.clone());
                    let log = state.sessions.entry(session.clone()).or_default();
                    log.next_seq = 1;
                    let ready = json!({
                        "op": 0, "t": "READY", "s": 1,
                        "d": {
                            "v": 10,
                            "user": bot_user(),
                            "guilds": [],
                            "session_id": session,
                            "resume_gateway_url": format!("ws://{}/resume", inner.address),
                            "session_type": "normal",
                            "application": {"id": TEST_BOT_ID, "flags": 0},
                            "_trace": ["loopback"]
                        }
                    });
                    out.push(ready.to_string());
                    state.ready_count += 1;
                    if let Some(live) = state.live.as_mut().filter(|live| live.serial == serial) {
                        live.ready_on = Some(session);
                    }
                }
            }
            Some(6) => {
                state.resumes.push(d.clone());
                let session = d
                    .get("session_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let after = d.get("seq").and_then(Value::as_u64).unwrap_or(0);
                if d.get("token").and_then(Value::as_str) != Some(state.token.as_str()) {
                    close = Some((4004, "Authentication failed.".to_owned()));
                } else if let Some(resumable) = state.invalid_next_resume.pop_front() {
                    out.push(json!({"op": 9, "d": resumable}).to_string());
                } else if !state.sessions.contains_key(&session) {
                    out.push(json!({"op": 9, "d": false}).to_string());
                } else if !state.withhold_ready {
                    let overlap = state.replay_overlap;
                    let log = state.sessions.entry(session.clone()).or_default();
                    let from = after.saturating_sub(overlap);
                    for (seq, t, event) in log.events.iter().filter(|(seq, _, _)| *seq > from) {
                        out.push(json!({"op": 0, "t": t, "s": seq, "d": event}).to_string());
                    }
                    log.next_seq += 1;
                    let resumed_seq = log.next_seq;
                    out.push(
                        json!({"op": 0, "t": "RESUMED", "s": resumed_seq, "d": {"_trace": ["loopback"]}})
                            .to_string(),
                    );
                    state.resumed_count += 1;
                    state.current = Some(session.clone());
                    if let Some(live) = state.live.as_mut().filter(|live| live.serial == serial) {
                        live.ready_on = Some(session);
                    }
                }
            }
            // Other opcodes (presence, voice, unknown) are accepted silently.
            _ => {}
        }
    }
    inner.changed.notify_waiters();
    for text in out {
        if !send_text(socket, text).await {
            return false;
        }
    }
    if let Some((code, reason)) = close {
        let _ = socket
            .close(Some(CloseFrame {
                code: CloseCode::from(code),
                reason: reason.into(),
            }))
            .await;
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while let Some(Ok(_)) = socket.next().await {}
        })
        .await;
        return false;
    }
    true
}

// ---------------------------------------------------------------------------------------
// REST
// ---------------------------------------------------------------------------------------

/// A file the bot uploaded with a message (`files[n]` beside `payload_json`).
#[derive(Debug, Clone, PartialEq)]
pub struct UploadedFile {
    /// Channel posted in.
    pub channel_id: String,
    /// The message's id.
    pub message_id: String,
    /// `payload_json`'s `content` (the caption).
    pub content: String,
    /// The form field (`files[0]`).
    pub field: String,
    /// The part's `filename`.
    pub file_name: Option<String>,
    /// The part's `Content-Type`.
    pub content_type: Option<String>,
    /// The bytes.
    pub data: Vec<u8>,
    /// `payload_json` as parsed.
    pub payload: Value,
}

/// A message the bot created, as the server recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatedMessage {
    /// Channel.
    pub channel_id: String,
    /// The id the server gave it.
    pub id: String,
    /// `content` exactly as sent.
    pub content: String,
    /// The whole request body (to check `allowed_mentions`).
    pub body: Value,
}

/// An edit the server applied.
#[derive(Debug, Clone, PartialEq)]
pub struct EditedMessage {
    /// Channel.
    pub channel_id: String,
    /// The edited message.
    pub id: String,
    /// New `content`.
    pub content: String,
    /// The whole request body.
    pub body: Value,
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// `GET /users/@me`, `POST /channels/1/messages`, ...
    pub line: String,
    /// The route template it matched (see the route constants), or the path.
    pub route: String,
    /// Whether it carried an `Authorization` header.
    pub authorized: bool,
    /// JSON body (`Null` when none).
    pub body: Value,
}

/// What a scripted failure does.
#[derive(Debug, Clone)]
enum Failure {
    Answer {
        status: u16,
        body: Value,
        headers: Vec<(String, String)>,
    },
    Drop,
}

/// Bucket headers for the next answers on a route.
#[derive(Debug, Clone, Copy)]
struct BucketScript {
    remaining: u64,
    reset_after: f64,
}

#[derive(Debug, Default)]
struct RestState {
    token: String,
    gateway_url: String,
    session_start_limit: Value,
    next_failures: HashMap<String, VecDeque<Failure>>,
    always: HashMap<String, Failure>,
    next_buckets: HashMap<String, VecDeque<BucketScript>>,
    requests: Vec<RecordedRequest>,
    messages: HashMap<(String, String), String>,
    created: Vec<CreatedMessage>,
    /// The bot's own reactions by `(channel, message)`, in the order they were added.
    reactions: HashMap<(String, String), Vec<String>>,
    uploads: Vec<UploadedFile>,
    edited: Vec<EditedMessage>,
    typing: Vec<String>,
    files: HashMap<String, ServedFile>,
    next_id: u64,
    /// Clicks the test made: interaction id → (token, when, acknowledged).
    interactions: HashMap<String, (String, tokio::time::Instant, bool)>,
    callbacks: Vec<InteractionCallback>,
    followups: Vec<Followup>,
    /// How long the next interaction callbacks are held before they are answered.
    hold_callbacks: Duration,
    /// Text channels the tests declared: whether the bot's role may create and manage
    /// threads there.
    channels: HashMap<String, bool>,
    /// Threads made with Start Thread without Message, by id.
    threads: std::collections::BTreeMap<String, ThreadRecord>,
    /// Threads deleted by hand: a message or change there is 10003 Unknown Channel.
    deleted: std::collections::HashSet<String>,
}

/// A thread on the server, as the tests see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRecord {
    /// Its id (a channel's).
    pub id: String,
    /// The channel it was started in.
    pub parent_id: String,
    /// Its current name.
    pub name: String,
    /// Archived (and not unarchived since).
    pub archived: bool,
}

/// An interaction callback the server took.
#[derive(Debug, Clone, PartialEq)]
pub struct InteractionCallback {
    /// The interaction.
    pub interaction_id: String,
    /// The whole request body (`type`, `data.flags`, `data.content`).
    pub body: Value,
    /// How long after the click it came.
    pub after: Duration,
    /// The server has answered it (after any hold).
    pub answered: bool,
}

/// A follow-up message the server took (`POST /webhooks/{application_id}/{token}`).
#[derive(Debug, Clone, PartialEq)]
pub struct Followup {
    /// The interaction whose token it used.
    pub interaction_id: String,
    /// The whole request body (`content`, `flags`, `allowed_mentions`).
    pub body: Value,
}

#[derive(Debug)]
struct RestInner {
    state: Mutex<RestState>,
    changed: Notify,
    address: SocketAddr,
}

impl RestInner {
    fn state(&self) -> MutexGuard<'_, RestState> {
        lock(&self.state)
    }
}

/// The loopback REST server. Dropping it stops it.
#[derive(Debug)]
pub struct RestServer {
    inner: Arc<RestInner>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for RestServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl RestServer {
    /// A server for `token` whose `GET /gateway/bot` names `gateway_url`.
    pub async fn start(token: &str, gateway_url: &str) -> RestServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the REST server");
        let address = listener.local_addr().expect("the bound address");
        let inner = Arc::new(RestInner {
            state: Mutex::new(RestState {
                token: token.to_owned(),
                gateway_url: gateway_url.to_owned(),
                session_start_limit: json!({"total": 1000, "remaining": 998, "reset_after": 86_000_000, "max_concurrency": 1}),
                next_id: 1_200_000_000_000_000_000,
                ..RestState::default()
            }),
            changed: Notify::new(),
            address,
        });
        let accept = tokio::spawn(rest_accept(listener, inner.clone()));
        RestServer { inner, accept }
    }

    /// `http://127.0.0.1:<port>/api/v10`: the transport's `baseUrl`.
    pub fn base_url(&self) -> String {
        format!("http://{}/api/v10", self.inner.address)
    }

    /// The token the server accepts.
    pub fn token(&self) -> String {
        self.inner.state().token.clone()
    }

    fn script(&self, change: impl FnOnce(&mut RestState)) {
        change(&mut self.inner.state());
        self.inner.changed.notify_waiters();
    }

    /// From now on only `token` is accepted (the old one gets 401, like a reset token).
    pub fn change_token(&self, token: &str) {
        self.script(|state| state.token = token.to_owned());
    }

    /// `session_start_limit` of `GET /gateway/bot`.
    pub fn set_session_start_limit(&self, remaining: u64, reset_after_ms: u64) {
        self.script(|state| {
            state.session_start_limit = json!({"total": 1000, "remaining": remaining, "reset_after": reset_after_ms, "max_concurrency": 1});
        });
    }

    /// The next call of `route` answers `status` with `body`. Several queue up.
    pub fn fail_next(&self, route: &str, status: u16, body: Value) {
        self.push_failure(
            route,
            Failure::Answer {
                status,
                body,
                headers: Vec::new(),
            },
        );
    }

    /// The next call of `route` gets a 429 with float `retry_after` seconds, as Discord
    /// sends it: the body, `Retry-After` (whole seconds, rounded up), the bucket headers
    /// at zero, and for a global one `X-RateLimit-Global`.
    pub fn rate_limit_next(&self, route: &str, retry_after: f64, global: bool) {
        let mut headers = vec![
            ("retry-after".to_owned(), format!("{}", retry_after.ceil())),
            (
                "x-ratelimit-scope".to_owned(),
                if global { "global" } else { "user" }.to_owned(),
            ),
        ];
        if global {
            headers.push(("x-ratelimit-global".to_owned(), "true".to_owned()));
        } else {
            headers.push(("x-ratelimit-remaining".to_owned(), "0".to_owned()));
            headers.push((
                "x-ratelimit-reset-after".to_owned(),
                format!("{retry_after}"),
            ));
        }
        self.push_failure(
            route,
            Failure::Answer {
                status: 429,
                body: json!({"message": "You are being rate limited.", "retry_after": retry_after, "global": global}),
                headers,
            },
        );
    }

    /// The next call of `route` gets its connection closed without an answer.
    pub fn drop_next(&self, route: &str) {
        self.push_failure(route, Failure::Drop);
    }

    fn push_failure(&self, route: &str, failure: Failure) {
        self.script(|state| {
            state
                .next_failures
                .entry(route.to_owned())
                .or_default()
                .push_back(failure);
        });
    }

    /// Every later call of `route` answers `status` with `body` (until
    /// [`Self::clear_failures`]).
    pub fn fail_always(&self, route: &str, status: u16, body: Value) {
        self.script(|state| {
            state.always.insert(
                route.to_owned(),
                Failure::Answer {
                    status,
                    body,
                    headers: Vec::new(),
                },
            );
        });
    }

    /// Forgets every scripted failure.
    pub fn clear_failures(&self) {
        self.script(|state| {
            state.always.clear();
            state.next_failures.clear();
        });
    }

    /// The next successful answer on `route` says its bucket has `remaining` calls left
    /// and refills in `reset_after` seconds.
    pub fn bucket_next(&self, route: &str, remaining: u64, reset_after: f64) {
        self.script(|state| {
            state
                .next_buckets
                .entry(route.to_owned())
                .or_default()
                .push_back(BucketScript {
                    remaining,
                    reset_after,
                });
        });
    }

    /// Serves `file` as an attachment; returns its signed-looking CDN URL on this server.
    pub fn serve_file(&self, name: &str, file: ServedFile) -> String {
        let path = format!("/attachments/900/{}/{name}", self.next_id());
        self.script(|state| {
            state.files.insert(path.clone(), file);
        });
        format!(
            "http://{}{path}?ex=6650f1a0&is=664fa020&hm=0a1b2c3d",
            self.inner.address
        )
    }

    fn next_id(&self) -> String {
        let mut state = self.inner.state();
        state.next_id += 1;
        state.next_id.to_string()
    }

    /// Every request, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.inner.state().requests.clone()
    }

    /// How often `route` was called, failed calls included.
    pub fn calls(&self, route: &str) -> usize {
        self.inner
            .state()
            .requests
            .iter()
            .filter(|request| request.route == route)
            .count()
    }

    /// Declares text channel `channel`, where the bot's role may (or may not) create and
    /// manage threads. Thread calls on a channel not declared answer 10003 Unknown Channel.
    pub fn add_text_channel(&self, channel: &str, can_manage_threads: bool) {
        self.script(|state| {
            state
                .channels
                .insert(channel.to_owned(), can_manage_threads);
        });
    }

    /// The threads made, oldest first (ids grow).
    pub fn threads(&self) -> Vec<ThreadRecord> {
        self.inner.state().threads.values().cloned().collect()
    }

    /// Deletes a thread, as a person does by hand: later messages or changes there are
    /// 10003 Unknown Channel.
    pub fn delete_thread(&self, id: &str) {
        self.script(|state| {
            state.threads.remove(id);
            state.deleted.insert(id.to_owned());
        });
    }

    /// Registers a click the gateway is about to dispatch, so its callback is accepted
    /// within [`INTERACTION_DEADLINE`] of now.
    pub fn expect_interaction(&self, interaction_id: &str, token: &str) {
        self.inner.state().interactions.insert(
            interaction_id.to_owned(),
            (token.to_owned(), tokio::time::Instant::now(), false),
        );
    }

    /// Holds every later interaction callback this long before answering it (a slow
    /// Discord), so a test can tell "sent" from "answered".
    pub fn hold_callbacks(&self, hold: Duration) {
        self.inner.state().hold_callbacks = hold;
    }

    /// Follow-up messages taken, oldest first.
    pub fn followups(&self) -> Vec<Followup> {
        self.inner.state().followups.clone()
    }

    /// Interaction callbacks taken, oldest first.
    pub fn callbacks(&self) -> Vec<InteractionCallback> {
        self.inner.state().callbacks.clone()
    }

    /// The bot's reactions on a message now, in the order they were added.
    pub fn own_reactions(&self, channel: &str, message: &str) -> Vec<String> {
        self.inner
            .state()
            .reactions
            .get(&(channel.to_owned(), message.to_owned()))
            .cloned()
            .unwrap_or_default()
    }

    /// Messages created, oldest first.
    pub fn created(&self) -> Vec<CreatedMessage> {
        self.inner.state().created.clone()
    }

    /// Files uploaded with messages, oldest first.
    pub fn uploads(&self) -> Vec<UploadedFile> {
        self.inner.state().uploads.clone()
    }

    /// Edits applied, oldest first.
    pub fn edited(&self) -> Vec<EditedMessage> {
        self.inner.state().edited.clone()
    }

    /// Channels a typing indicator was triggered in, oldest first.
    pub fn typing(&self) -> Vec<String> {
        self.inner.state().typing.clone()
    }

    /// Waits until `done(self)` holds or `timeout` passes; returns whether it held.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&RestServer) -> bool,
    ) -> bool {
        wait_on(&self.inner.changed, timeout, || done(self)).await
    }
}

async fn rest_accept(listener: TcpListener, inner: Arc<RestInner>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let inner = inner.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let inner = inner.clone();
                async move { rest_handle(inner, request).await }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

type Answer = Response<BoxBody<Bytes, Infallible>>;

/// Why the server closes a connection without answering.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the test asked to drop this connection")
    }
}

impl std::error::Error for Dropped {}

fn answer(status: u16, body: Option<&Value>, headers: &[(String, String)]) -> Answer {
    let mut response = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    for (name, value) in headers {
        response = response.header(name.as_str(), value.as_str());
    }
    let body = match body {
        Some(body) => {
            response = response.header("content-type", "application/json");
            Full::new(Bytes::from(body.to_string())).boxed()
        }
        None => Full::new(Bytes::new()).boxed(),
    };
    response
        .body(body)
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

fn error(status: u16, code: i64, message: &str) -> Answer {
    answer(
        status,
        Some(&json!({"message": message, "code": code})),
        &[],
    )
}

/// Start Thread without Message in a declared channel: 10003 for a channel not declared,
/// 403 50013 Missing Permissions without Create Public Threads, 50035 for a `type` other
/// than 11 (public) or a name outside 1–100 characters. Returns the thread's channel.
fn start_thread(
    state: &mut RestState,
    ids: &[String],
    body: &Value,
    headers: &[(String, String)],
) -> Answer {
    let channel = ids.first().cloned().unwrap_or_default();
    let Some(allowed) = state.channels.get(&channel).copied() else {
        return error(404, 10003, "Unknown Channel");
    };
    if !allowed {
        return error(403, 50013, "Missing Permissions");
    }
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    if body["type"].as_u64() != Some(11) || name.is_empty() || name.chars().count() > 100 {
        return error(400, 50035, "Invalid Form Body");
    }
    state.next_id += 1;
    let id = format!("{}", 1_400_000_000_000_000_000u64 + state.next_id);
    state.threads.insert(
        id.clone(),
        ThreadRecord {
            id: id.clone(),
            parent_id: channel.clone(),
            name: name.clone(),
            archived: false,
        },
    );
    let thread = json!({
        "id": id, "type": 11, "parent_id": channel, "name": name,
        "thread_metadata": {"archived": false, "auto_archive_duration": body["auto_archive_duration"], "locked": false}
    });
    answer(201, Some(&thread), headers)
}

/// Modify Channel on a thread: its `name` and `archived`; 10003 for a thread that is not
/// there (deleted), 403 50013 without Manage Threads in its channel.
fn modify_thread(
    state: &mut RestState,
    ids: &[String],
    body: &Value,
    headers: &[(String, String)],
) -> Answer {
    let id = ids.first().cloned().unwrap_or_default();
    let Some(parent) = state.threads.get(&id).map(|t| t.parent_id.clone()) else {
        return error(404, 10003, "Unknown Channel");
    };
    if !state.channels.get(&parent).copied().unwrap_or(false) {
        return error(403, 50013, "Missing Permissions");
    }
    let Some(thread) = state.threads.get_mut(&id) else {
        return error(404, 10003, "Unknown Channel");
    };
    if let Some(name) = body["name"].as_str() {
        if name.is_empty() || name.chars().count() > 100 {
            return error(400, 50035, "Invalid Form Body");
        }
        thread.name = name.to_owned();
    }
    if let Some(archived) = body["archived"].as_bool() {
        thread.archived = archived;
    }
    let channel = json!({
        "id": thread.id, "type": 11, "parent_id": thread.parent_id, "name": thread.name,
        "thread_metadata": {"archived": thread.archived, "locked": false}
    });
    answer(200, Some(&channel), headers)
}

/// A MESSAGE_CREATE `d` in thread `thread_id` of server `guild_id`: a thread is a channel,
/// so `channel_id` is the thread's id (`channel_type` 11, a public thread).
pub fn thread_message(
    id: &str,
    thread_id: &str,
    guild_id: &str,
    author_id: &str,
    content: &str,
) -> Value {
    let mut message = guild_message(id, thread_id, guild_id, author_id, content, json!([]));
    message["channel_type"] = json!(11);
    message
}

/// The route template a path matches, and the ids in it.
fn route_of(method: &str, path: &str) -> (String, Vec<String>) {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let decoded: Vec<String> = segments
        .iter()
        .map(|segment| percent_decode(segment))
        .collect();
    match (
        method,
        decoded
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
    ) {
        ("GET", ["users", "@me"]) => (GET_ME.to_owned(), Vec::new()),
        ("GET", ["gateway", "bot"]) => (GATEWAY_BOT.to_owned(), Vec::new()),
        ("POST", ["channels", channel, "messages"]) => {
            (CREATE_MESSAGE.to_owned(), vec![(*channel).to_owned()])
        }
        ("PATCH", ["channels", channel, "messages", message]) => (
            EDIT_MESSAGE.to_owned(),
            vec![(*channel).to_owned(), (*message).to_owned()],
        ),
        ("POST", ["channels", channel, "threads"]) => {
            (START_THREAD.to_owned(), vec![(*channel).to_owned()])
        }
        ("PATCH", ["channels", channel]) => {
            (MODIFY_CHANNEL.to_owned(), vec![(*channel).to_owned()])
        }
        ("POST", ["channels", channel, "typing"]) => {
            (TYPING.to_owned(), vec![(*channel).to_owned()])
        }
        (
            put_or_delete @ ("PUT" | "DELETE"),
            [
                "channels",
                channel,
                "messages",
                message,
                "reactions",
                emoji,
                "@me",
            ],
        ) => (
            if put_or_delete == "PUT" {
                ADD_REACTION
            } else {
                REMOVE_REACTION
            }
            .to_owned(),
            vec![
                (*channel).to_owned(),
                (*message).to_owned(),
                (*emoji).to_owned(),
            ],
        ),
        ("POST", ["interactions", id, token, "callback"]) => (
            INTERACTION_CALLBACK.to_owned(),
            vec![(*id).to_owned(), (*token).to_owned()],
        ),
        _ => (format!("{method} {path}"), Vec::new()),
    }
}

fn percent_decode(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned()
}

/// A body that sends its bytes in pieces without a length (chunked encoding), so a
/// client can only learn the size by counting what it receives.
struct Chunked(VecDeque<Bytes>);

impl Body for Chunked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|chunk| Ok(Frame::data(chunk))))
    }
}

async fn rest_handle(inner: Arc<RestInner>, request: Request<Incoming>) -> Result<Answer, Dropped> {
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let authorization = header("authorization");
    let user_agent = header("user-agent").unwrap_or_default();
    let content_type = header("content-type").unwrap_or_default();
    let bytes = request
        .into_body()
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    if let Some(interaction) = path
        .strip_prefix("/api/v10/interactions/")
        .and_then(|rest| rest.split('/').next())
        .map(str::to_owned)
        && method == "POST"
    {
        return Ok(interaction_callback(&inner, &interaction, &path, &bytes).await);
    }
    if method == "POST" && path.starts_with("/api/v10/webhooks/") {
        let answer = followup(&inner, &path, &bytes);
        inner.changed.notify_waiters();
        return Ok(answer);
    }
    let answer = rest_route(
        &inner,
        &method,
        &path,
        authorization.as_deref(),
        &user_agent,
        &content_type,
        &bytes,
    );
    inner.changed.notify_waiters();
    answer
}

/// `POST /interactions/{id}/{token}/callback`, as Discord checks it: the interaction must
/// be one the test clicked, the token its own, the callback within 3 s and the first.
async fn interaction_callback(
    inner: &RestInner,
    interaction: &str,
    path: &str,
    bytes: &[u8],
) -> Answer {
    let (_, ids) = route_of("POST", path.trim_start_matches("/api/v10"));
    let body: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let (verdict, hold, index) = {
        let mut state = inner.state();
        state.requests.push(RecordedRequest {
            line: format!("POST /interactions/{interaction}/<token>/callback"),
            route: INTERACTION_CALLBACK.to_owned(),
            authorized: false,
            body: body.clone(),
        });
        let token = ids.get(1).cloned().unwrap_or_default();
        let now = tokio::time::Instant::now();
        let verdict = match state.interactions.get_mut(interaction) {
            Some((expected, at, _)) if *expected != token || now - *at > INTERACTION_DEADLINE => {
                Err(error(404, 10062, "Unknown interaction"))
            }
            Some((_, _, true)) => Err(error(
                400,
                40060,
                "Interaction has already been acknowledged.",
            )),
            Some((_, at, acknowledged)) => {
                *acknowledged = true;
                Ok(now - *at)
            }
            None => Err(error(404, 10062, "Unknown interaction")),
        };
        let hold = state.hold_callbacks;
        let index = verdict.as_ref().ok().map(|after| {
            state.callbacks.push(InteractionCallback {
                interaction_id: interaction.to_owned(),
                body: body.clone(),
                after: *after,
                answered: false,
            });
            state.callbacks.len() - 1
        });
        (verdict, hold, index)
    };
    inner.changed.notify_waiters();
    let answer = match verdict {
        Err(refused) => refused,
        Ok(_) => {
            tokio::time::sleep(hold).await;
            answer(204, None, &[])
        }
    };
    if let Some(index) = index {
        inner.state().callbacks[index].answered = true;
        inner.changed.notify_waiters();
    }
    answer
}

/// `POST /webhooks/{application_id}/{interaction_token}`, as Discord checks a follow-up:
/// the application is the bot's, the token one of an interaction the test clicked, already
/// acknowledged and younger than 15 minutes; the content 1–2000 code points. No bot
/// authentication is needed (the token is the credential); the token never reaches a
/// recorded line.
fn followup(inner: &RestInner, path: &str, bytes: &[u8]) -> Answer {
    let segments: Vec<String> = path
        .trim_start_matches("/api/v10/webhooks/")
        .split('/')
        .map(percent_decode)
        .collect();
    let body: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let mut state = inner.state();
    let application = segments.first().cloned().unwrap_or_default();
    state.requests.push(RecordedRequest {
        line: format!("POST /webhooks/{application}/<token>"),
        route: FOLLOWUP.to_owned(),
        authorized: false,
        body: body.clone(),
    });
    let (Some(token), 2) = (segments.get(1), segments.len()) else {
        return error(404, 0, "404: Not Found");
    };
    let now = tokio::time::Instant::now();
    let interaction = state
        .interactions
        .iter()
        .find(|(_, (known, at, acknowledged))| {
            known == token && *acknowledged && now - *at <= INTERACTION_TOKEN_LIFETIME
        })
        .map(|(id, _)| id.clone());
    let Some(interaction_id) = interaction.filter(|_| application == TEST_BOT_ID) else {
        return error(404, 10015, "Unknown Webhook");
    };
    let length = body["content"].as_str().map_or(0, |c| c.chars().count());
    if length == 0 {
        return error(400, 50006, "Cannot send an empty message");
    }
    if length > 2000 {
        return error(400, 50035, "Invalid Form Body");
    }
    state.next_id += 1;
    let id = format!("{}", 1_300_000_000_000_000_000u64 + state.next_id);
    state.followups.push(Followup {
        interaction_id,
        body: body.clone(),
    });
    answer(
        200,
        Some(&json!({"id": id, "content": body["content"], "flags": body["flags"]})),
        &[],
    )
}

fn rest_route(
    inner: &RestInner,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    user_agent: &str,
    content_type: &str,
    bytes: &[u8],
) -> Result<Answer, Dropped> {
    if method == "GET" && path.starts_with("/attachments/") {
        let mut state = inner.state();
        state.requests.push(RecordedRequest {
            line: format!("GET {path}"),
            route: "GET /attachments".to_owned(),
            authorized: authorization.is_some(),
            body: Value::Null,
        });
        return Ok(match state.files.get(path) {
            Some(file) => serve(file),
            None => error(404, 0, "404: Not Found"),
        });
    }
    let Some(api_path) = path.strip_prefix("/api/v10") else {
        return Ok(error(404, 0, "404: Not Found"));
    };
    let (route, ids) = route_of(method, api_path);
    // A message with files is `multipart/form-data`: its JSON is the `payload_json` part.
    let multipart = content_type.starts_with("multipart/form-data");
    let parts = if multipart {
        match crate::multipart::parse(content_type, bytes) {
            Ok(parts) => parts,
            Err(reason) => {
                return Ok(error(400, 50035, &format!("Invalid Form Body ({reason})")));
            }
        }
    } else {
        Vec::new()
    };
    let body: Value = if multipart {
        parts
            .iter()
            .find(|p| p.name == "payload_json")
            .and_then(|p| serde_json::from_slice(&p.data).ok())
            .unwrap_or(Value::Null)
    } else {
        serde_json::from_slice(bytes).unwrap_or(Value::Null)
    };
    let mut state = inner.state();
    state.requests.push(RecordedRequest {
        line: format!("{method} {api_path}"),
        route: route.clone(),
        authorized: authorization.is_some(),
        body: body.clone(),
    });
    if authorization != Some(format!("Bot {}", state.token).as_str()) {
        return Ok(error(401, 0, "401: Unauthorized"));
    }
    if !user_agent.starts_with("DiscordBot (") {
        return Ok(error(
            400,
            0,
            "a User-Agent of the form DiscordBot ($url, $version) is required",
        ));
    }
    if multipart && route != CREATE_MESSAGE {
        return Ok(error(
            400,
            50035,
            "Invalid Form Body (files only go with a new message)",
        ));
    }
    if !bytes.is_empty() && !multipart && !content_type.starts_with("application/json") {
        return Ok(error(
            400,
            50035,
            "Invalid Form Body (Content-Type must be application/json)",
        ));
    }
    let failure = state
        .next_failures
        .get_mut(&route)
        .and_then(VecDeque::pop_front)
        .or_else(|| state.always.get(&route).cloned());
    match failure {
        Some(Failure::Answer {
            status,
            body,
            headers,
        }) => return Ok(answer(status, Some(&body), &headers)),
        Some(Failure::Drop) => return Err(Dropped),
        None => {}
    }
    let bucket = state
        .next_buckets
        .get_mut(&route)
        .and_then(VecDeque::pop_front)
        .unwrap_or(BucketScript {
            remaining: 4,
            reset_after: 1.0,
        });
    let headers = vec![
        ("x-ratelimit-limit".to_owned(), "5".to_owned()),
        (
            "x-ratelimit-remaining".to_owned(),
            bucket.remaining.to_string(),
        ),
        (
            "x-ratelimit-reset-after".to_owned(),
            format!("{:.3}", bucket.reset_after),
        ),
        (
            "x-ratelimit-bucket".to_owned(),
            format!("loopback-{}", route.len()),
        ),
    ];
    let content = body
        .get("content")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(match route.as_str() {
        GET_ME => answer(200, Some(&bot_user()), &headers),
        GATEWAY_BOT => {
            let bot = json!({
                "url": state.gateway_url,
                "shards": 1,
                "session_start_limit": state.session_start_limit
            });
            answer(200, Some(&bot), &headers)
        }
        START_THREAD => start_thread(&mut state, &ids, &body, &headers),
        MODIFY_CHANNEL => modify_thread(&mut state, &ids, &body, &headers),
        CREATE_MESSAGE if ids.first().is_some_and(|c| state.deleted.contains(c)) => {
            error(404, 10003, "Unknown Channel")
        }
        CREATE_MESSAGE => {
            // A message in an archived (not locked) thread unarchives it, as Discord does.
            if let Some(thread) = ids.first().and_then(|c| state.threads.get_mut(c)) {
                thread.archived = false;
            }
            // A message with a file may have no text; its text is still held to 2000.
            let caption_only =
                multipart && content.as_deref().is_none_or(|c| c.chars().count() <= 2000);
            if let Some(refused) = content_refusal(content.as_deref()).filter(|_| !caption_only) {
                return Ok(refused);
            }
            let files: Vec<&crate::multipart::Part> = parts
                .iter()
                .filter(|p| p.name.starts_with("files["))
                .collect();
            // Each file must be declared in `attachments` by its index, as Discord checks.
            for file in &files {
                let index = file.name.trim_start_matches("files[").trim_end_matches(']');
                let declared = body["attachments"].as_array().is_some_and(|list| {
                    list.iter().any(|a| {
                        // Discord takes the index as a number or a string.
                        (a["id"].as_u64().map(|n| n.to_string()).as_deref() == Some(index)
                            || a["id"].as_str() == Some(index))
                            && a["filename"].as_str() == file.file_name.as_deref()
                    })
                });
                if !declared || file.file_name.is_none() {
                    return Ok(error(400, 50035, "Invalid Form Body (attachments)"));
                }
            }
            if multipart && files.is_empty() {
                return Ok(error(400, 50006, "Cannot send an empty message"));
            }
            let content = content.unwrap_or_default();
            let channel = ids[0].clone();
            state.next_id += 1;
            let id = state.next_id.to_string();
            for file in files {
                state.uploads.push(UploadedFile {
                    channel_id: channel.clone(),
                    message_id: id.clone(),
                    content: content.clone(),
                    field: file.name.clone(),
                    file_name: file.file_name.clone(),
                    content_type: file.content_type.clone(),
                    data: file.data.clone(),
                    payload: body.clone(),
                });
            }
            state
                .messages
                .insert((channel.clone(), id.clone()), content.clone());
            state.created.push(CreatedMessage {
                channel_id: channel.clone(),
                id: id.clone(),
                content: content.clone(),
                body,
            });
            let message = json!({"id": id, "channel_id": channel, "content": content, "author": bot_user(), "type": 0});
            answer(200, Some(&message), &headers)
        }
        EDIT_MESSAGE => {
            if let Some(refused) = content_refusal(content.as_deref()) {
                return Ok(refused);
            }
            let content = content.unwrap_or_default();
            let key = (ids[0].clone(), ids[1].clone());
            if !state.messages.contains_key(&key) {
                return Ok(error(404, 10008, "Unknown Message"));
            }
            state.messages.insert(key.clone(), content.clone());
            state.edited.push(EditedMessage {
                channel_id: key.0.clone(),
                id: key.1.clone(),
                content: content.clone(),
                body,
            });
            let message = json!({"id": key.1, "channel_id": key.0, "content": content, "author": bot_user(), "type": 0});
            answer(200, Some(&message), &headers)
        }
        TYPING => {
            state.typing.push(ids[0].clone());
            answer(204, None, &headers)
        }
        // Both are idempotent on Discord: adding a reaction the bot has, or deleting one it
        // has not, answers 204 as well.
        ADD_REACTION | REMOVE_REACTION => {
            let key = (ids[0].clone(), ids[1].clone());
            let own = state.reactions.entry(key).or_default();
            if route == ADD_REACTION {
                if !own.contains(&ids[2]) {
                    own.push(ids[2].clone());
                }
            } else {
                own.retain(|emoji| *emoji != ids[2]);
            }
            answer(204, None, &headers)
        }
        _ => error(404, 0, "404: Not Found"),
    })
}

/// Discord's answer to content it does not accept: empty (50006) or over 2000 code points
/// (50035); `None` for content it accepts.
fn content_refusal(content: Option<&str>) -> Option<Answer> {
    match content {
        None => Some(error(400, 50006, "Cannot send an empty message")),
        Some(text) if text.trim().is_empty() => {
            Some(error(400, 50006, "Cannot send an empty message"))
        }
        Some(text) if text.chars().count() > 2000 => Some(answer(
            400,
            Some(&json!({
                "message": "Invalid Form Body",
                "code": 50035,
                "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}}
            })),
            &[],
        )),
        Some(_) => None,
    }
}

fn serve(file: &ServedFile) -> Answer {
    let mut response = Response::builder().status(200);
    if let Some(content_type) = &file.content_type {
        response = response.header("content-type", content_type.as_str());
    }
    let body = if file.content_length {
        Full::new(Bytes::from(file.bytes.clone())).boxed()
    } else {
        let chunks = file
            .bytes
            .chunks(1024)
            .map(Bytes::copy_from_slice)
            .collect();
        Chunked(chunks).boxed()
    };
    response
        .body(body)
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

// ---------------------------------------------------------------------------------------
// Both, wired together
// ---------------------------------------------------------------------------------------

/// A gateway and a REST server for [`TEST_TOKEN`], the REST server naming the gateway.
#[derive(Debug)]
pub struct DiscordLoopback {
    /// The gateway.
    pub gateway: GatewayServer,
    /// The REST server.
    pub rest: RestServer,
}

impl DiscordLoopback {
    /// Starts both.
    pub async fn start() -> DiscordLoopback {
        let gateway = GatewayServer::start(TEST_TOKEN).await;
        let rest = RestServer::start(TEST_TOKEN, &gateway.url()).await;
        DiscordLoopback { gateway, rest }
    }

    /// The REST base URL (the transport's `baseUrl`).
    pub fn base_url(&self) -> String {
        self.rest.base_url()
    }

    /// The token both accept.
    pub fn token(&self) -> String {
        TEST_TOKEN.to_owned()
    }

    /// A click on a button, as Discord delivers it: the REST server learns of the
    /// interaction (its 3 s deadline starts now), then the gateway dispatches
    /// INTERACTION_CREATE with `click` (see [`component_click`]).
    pub fn click(&self, click: Value) -> Option<u64> {
        let id = click.get("id").and_then(Value::as_str).unwrap_or_default();
        let token = click
            .get("token")
            .and_then(Value::as_str)
            .unwrap_or_default();
        self.rest.expect_interaction(id, token);
        self.gateway.dispatch("INTERACTION_CREATE", click)
    }
}

/// The conformance kit's view of a Discord transport that talks to a [`DiscordLoopback`]:
/// posted and edited contents as the REST server recorded them, failing sends with 403
/// Missing Permissions, inbound messages as DMs dispatched by the gateway.
#[derive(Debug)]
pub struct ConformanceDiscord {
    /// The servers the transport under test talks to.
    pub loopback: Arc<DiscordLoopback>,
    /// The DM channel messages come from and go to.
    pub channel_id: String,
    next: Mutex<u64>,
}

impl ConformanceDiscord {
    /// A view of `loopback`, with DM channel 900000000000000001.
    pub fn new(loopback: Arc<DiscordLoopback>) -> ConformanceDiscord {
        ConformanceDiscord {
            loopback,
            channel_id: "900000000000000001".to_owned(),
            next: Mutex::new(1_250_000_000_000_000_000),
        }
    }
}

#[async_trait]
impl ConformancePlatform for ConformanceDiscord {
    async fn posted(&self) -> Vec<String> {
        self.loopback
            .rest
            .created()
            .into_iter()
            .map(|message| message.content)
            .collect()
    }

    async fn edited(&self) -> Vec<String> {
        self.loopback
            .rest
            .edited()
            .into_iter()
            .map(|message| message.content)
            .collect()
    }

    async fn fail_sends(&self) {
        self.loopback.rest.fail_always(
            CREATE_MESSAGE,
            403,
            json!({"message": "Missing Permissions", "code": 50013}),
        );
    }

    async fn deliver(&self, text: &str) -> Result<(), String> {
        let id = {
            let mut next = lock(&self.next);
            *next += 1;
            next.to_string()
        };
        self.loopback
            .gateway
            .message_create(dm_message(
                &id,
                &self.channel_id,
                "555000000000000001",
                text,
            ))
            .map(|_| ())
            .ok_or_else(|| "no gateway session: the transport never identified".to_owned())
    }

    fn secret(&self) -> &str {
        TEST_TOKEN
    }

    fn conversation_id(&self) -> String {
        self.channel_id.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_match_their_route_templates_with_ids_decoded() {
        assert_eq!(
            route_of("POST", "/channels/12/messages"),
            (CREATE_MESSAGE.to_owned(), vec!["12".to_owned()])
        );
        assert_eq!(
            route_of("PATCH", "/channels/12/messages/34"),
            (
                EDIT_MESSAGE.to_owned(),
                vec!["12".to_owned(), "34".to_owned()]
            )
        );
        assert_eq!(
            route_of("POST", "/channels/a%2Fb%20c/typing"),
            (TYPING.to_owned(), vec!["a/b c".to_owned()])
        );
        assert_eq!(route_of("GET", "/users/@me").0, GET_ME);
        assert_eq!(route_of("DELETE", "/x").0, "DELETE /x");
    }

    #[tokio::test]
    async fn a_resume_replays_what_came_after_the_clients_seq_then_resumed() {
        let loopback = DiscordLoopback::start().await;
        let (mut socket, _) = tokio_tungstenite::connect_async(loopback.gateway.url())
            .await
            .expect("connect");
        let hello = socket.next().await.expect("hello").expect("frame");
        assert!(
            hello
                .to_text()
                .expect("text")
                .contains("heartbeat_interval")
        );
        let identify =
            json!({"op": 2, "d": {"token": TEST_TOKEN, "intents": 37376, "properties": {}}});
        socket
            .send(WsMessage::text(identify.to_string()))
            .await
            .expect("identify");
        let ready: Value = serde_json::from_str(
            socket
                .next()
                .await
                .expect("ready")
                .expect("frame")
                .to_text()
                .expect("text"),
        )
        .expect("json");
        let session = ready["d"]["session_id"]
            .as_str()
            .expect("session")
            .to_owned();
        assert!(
            ready["d"]["resume_gateway_url"]
                .as_str()
                .expect("url")
                .ends_with("/resume")
        );
        assert!(
            loopback
                .gateway
                .wait_until(Duration::from_secs(5), GatewayServer::is_ready)
                .await
        );
        drop(socket);
        assert!(
            loopback
                .gateway
                .wait_until(Duration::from_secs(5), |gateway| !gateway.is_connected())
                .await
        );
        // Emitted while nobody is connected: kept for the resume.
        let first = loopback
            .gateway
            .message_create(json!({"id": "1"}))
            .expect("seq");
        let second = loopback
            .gateway
            .message_create(json!({"id": "2"}))
            .expect("seq");
        assert_eq!((first, second), (2, 3));

        let (mut socket, _) =
            tokio_tungstenite::connect_async(format!("{}/resume", loopback.gateway.url()))
                .await
                .expect("reconnect");
        let _hello = socket.next().await;
        let resume = json!({"op": 6, "d": {"token": TEST_TOKEN, "session_id": session, "seq": 2}});
        socket
            .send(WsMessage::text(resume.to_string()))
            .await
            .expect("resume");
        let mut seen = Vec::new();
        for _ in 0..2 {
            let frame: Value = serde_json::from_str(
                socket
                    .next()
                    .await
                    .expect("frame")
                    .expect("ok")
                    .to_text()
                    .expect("text"),
            )
            .expect("json");
            seen.push((
                frame["t"].as_str().unwrap_or_default().to_owned(),
                frame["s"].as_u64(),
            ));
        }
        assert_eq!(
            seen,
            [
                ("MESSAGE_CREATE".to_owned(), Some(3)),
                ("RESUMED".to_owned(), Some(4))
            ]
        );
        assert_eq!(loopback.gateway.connections(), ["/", "/resume"]);
    }
}
