//! A loopback Slack: a Web API server (real HTTP/1.1 and JSON) and a Socket Mode server
//! (a real WebSocket), both on `127.0.0.1:<random port>`, scriptable from tests, for the
//! Slack transport's tests and the host's end-to-end tests.
//!
//! It follows Slack's documentation (docs/protocols.md#slack-socket-mode-and-events-api),
//! not the transport:
//! - Web API: `POST /api/<method>` with `Authorization: Bearer <token>`, JSON or form
//!   bodies; errors are HTTP 200 with `{"ok": false, "error": ...}` (`not_authed`,
//!   `invalid_auth`, `not_allowed_token_type` for the wrong kind of token,
//!   `channel_not_found`, `no_text`, `msg_too_long`, `message_not_found`), a rate limit is
//!   HTTP 429 with `Retry-After`. Methods: `auth.test`, `apps.connections.open` (app-level
//!   token only; answers a `ws://` URL with a single-use ticket), `chat.postMessage`,
//!   `chat.update`, `chat.postEphemeral`, `reactions.add` and `reactions.remove`
//!   (`already_reacted`, `no_reaction`); `not_in_channel` in a channel declared without the
//!   bot ([`SlackServer::add_channel`]), `thread_not_found` for a reply under a message
//!   deleted with [`SlackServer::delete_message`]. Files: `GET /files/<name>` with the bot token; without it, like Slack, a
//!   sign-in web page with status 200.
//! - Socket Mode: `GET /link/?ticket=…` upgrades once per ticket; `hello` is sent on connect
//!   (unless a test turns that off); envelopes carry `envelope_id`, `retry_attempt` and
//!   `retry_reason`; acknowledgements are recorded with how long after sending they came;
//!   `disconnect` frames are sent with any reason, and a connection stays open after one
//!   until the client or the test closes it, as Slack keeps it open for a few seconds.
//!
//! Tests script it ([`SlackServer::send_event`], [`SlackServer::redeliver`],
//! [`SlackServer::disconnect`], [`SlackServer::fail_next`], [`SlackServer::hold_connections_open`],
//! ...) and wait for what the transport does with [`SlackServer::wait_until`], never by
//! sleeping.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{
    ErrorResponse, Request as WsRequest, Response as WsResponse,
};
use transport_core::sync::lock;

use crate::conformance::ConformancePlatform;

/// The bot token [`SlackServer::start`] accepts.
pub const TEST_BOT_TOKEN: &str = "xoxb-1111111111-2222222222222-TESTloopbackBotTokenAbc";

/// The app-level token [`SlackServer::start`] accepts.
pub const TEST_APP_TOKEN: &str = "xapp-1-A0TEST-3333333333333-TESTloopbackAppTokenXyz";

/// The bot user id `auth.test` answers (what mentions of the bot carry).
pub const TEST_BOT_USER_ID: &str = "U0TESTBOT";

/// The bot id `auth.test` answers (what the bot's own messages carry as `bot_id`).
pub const TEST_BOT_ID: &str = "B0TESTBOT";

/// The bot user's name.
pub const TEST_BOT_NAME: &str = "pi";

/// The workspace id.
pub const TEST_TEAM_ID: &str = "T0TEST";

/// How long Slack waits for an acknowledgement before it redelivers
/// (docs/protocols.md#slack-socket-mode).
pub const ACK_DEADLINE: Duration = Duration::from_secs(3);

/// A failure scripted for a Web API method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlackFailure {
    /// HTTP 200 with `{"ok": false, "error": code}`.
    Error(String),
    /// HTTP 429 with `Retry-After: seconds` and `{"ok": false, "error": "ratelimited"}`.
    RateLimited(u64),
    /// This HTTP status with a non-JSON body (a 5xx from a proxy).
    Status(u16),
}

/// A message the bot posted, as the server recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostedRecord {
    /// Channel.
    pub channel: String,
    /// The `ts` the server gave it.
    pub ts: String,
    /// Text exactly as sent.
    pub text: String,
    /// `thread_ts`, if any.
    pub thread_ts: Option<String>,
    /// `mrkdwn` as sent (`None` when absent, which Slack reads as true).
    pub mrkdwn: Option<bool>,
    /// `blocks` as sent, if any.
    pub blocks: Option<Value>,
}

/// An update the server applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdatedRecord {
    /// Channel.
    pub channel: String,
    /// The updated message.
    pub ts: String,
    /// The new text.
    pub text: String,
    /// `blocks` as sent: `Some([])` removes the old ones, `None` keeps them.
    pub blocks: Option<Value>,
}

/// A `chat.postEphemeral` the server took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EphemeralRecord {
    /// Channel.
    pub channel: String,
    /// The only user who sees it.
    pub user: String,
    /// Thread, if any.
    pub thread_ts: Option<String>,
    /// Text.
    pub text: String,
}

/// An acknowledgement the Socket Mode server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckRecord {
    /// Connection it came on.
    pub connection: u64,
    /// The acknowledged envelope.
    pub envelope_id: String,
    /// How long after the envelope was sent it came; `None` for an id the server never sent.
    pub after: Option<Duration>,
}

/// What the server knows of one Socket Mode connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// 1, 2, ... in the order of connecting.
    pub id: u64,
    /// Still open.
    pub open: bool,
    /// The client sent the Close frame (rather than the server or a dropped socket).
    pub closed_by_client: bool,
}

/// A file the server serves at `/files/<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedFile {
    /// `Content-Type`; `None` sends none.
    pub content_type: Option<String>,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// `true`: `Content-Length` is sent; `false`: chunked, so only the bytes received tell.
    pub content_length: bool,
    /// `Some(url)`: answer 302 to this location instead of the bytes.
    pub redirect: Option<String>,
}

impl ServedFile {
    /// `bytes` served honestly.
    pub fn new(content_type: Option<&str>, bytes: Vec<u8>) -> ServedFile {
        ServedFile {
            content_type: content_type.map(str::to_owned),
            bytes,
            content_length: true,
            redirect: None,
        }
    }

    /// A 302 to `location`.
    pub fn redirect(location: &str) -> ServedFile {
        ServedFile {
            content_type: None,
            bytes: Vec::new(),
            content_length: true,
            redirect: Some(location.to_owned()),
        }
    }
}

/// A person's message in an IM (`D…`), as a `message.im` event.
pub fn im_message(channel: &str, user: &str, ts: &str, text: &str) -> Value {
    json!({
        "type": "message",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "channel_type": "im",
        "client_msg_id": format!("c-{ts}"),
        "team": TEST_TEAM_ID
    })
}

/// A person's message in a public channel, as a `message.channels` event.
pub fn channel_message(channel: &str, user: &str, ts: &str, text: &str) -> Value {
    json!({
        "type": "message",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "channel_type": "channel",
        "client_msg_id": format!("c-{ts}"),
        "team": TEST_TEAM_ID
    })
}

/// `event` as a reply in the thread rooted at `thread_ts`.
pub fn in_thread(mut event: Value, thread_ts: &str) -> Value {
    event["thread_ts"] = json!(thread_ts);
    event["parent_user_id"] = json!("U0PARENT");
    event
}

/// An `app_mention` event.
pub fn app_mention(channel: &str, user: &str, ts: &str, text: &str) -> Value {
    json!({
        "type": "app_mention",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "client_msg_id": format!("c-{ts}"),
        "team": TEST_TEAM_ID
    })
}

/// A `block_actions` payload (an `interactive` envelope's) for a click by `user` on the
/// button whose value is `value`, under the bot's message `message_ts` in `channel`
/// (inside thread `thread_ts` when given), as Slack sends it.
pub fn block_actions(
    channel: &str,
    user: &str,
    message_ts: &str,
    thread_ts: Option<&str>,
    value: &str,
    action_ts: &str,
) -> Value {
    let mut container = json!({
        "type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": false
    });
    let mut message = json!({
        "type": "message", "user": TEST_BOT_USER_ID, "bot_id": TEST_BOT_ID, "ts": message_ts,
        "text": "Approval needed", "team": TEST_TEAM_ID, "blocks": []
    });
    if let Some(thread) = thread_ts {
        container["thread_ts"] = json!(thread);
        message["thread_ts"] = json!(thread);
    }
    json!({
        "type": "block_actions",
        "user": {"id": user, "username": "ada", "name": "ada", "team_id": TEST_TEAM_ID},
        "api_app_id": "A0TEST",
        "token": "verification-token-unused",
        "container": container,
        "trigger_id": "1234.5678.abcd",
        "team": {"id": TEST_TEAM_ID, "domain": "loopback"},
        "enterprise": null,
        "is_enterprise_install": false,
        "channel": {"id": channel, "name": "general"},
        "message": message,
        "state": {"values": {}},
        "response_url": "https://hooks.slack.com/actions/T0TEST/1/loopback",
        "actions": [{
            "action_id": "bridge-0", "block_id": "bridge-buttons",
            "text": {"type": "plain_text", "text": "Approve once", "emoji": true},
            "value": value, "type": "button", "action_ts": action_ts
        }]
    })
}

/// The Events API body around `event`.
pub fn event_callback(event: Value, event_id: &str) -> Value {
    json!({
        "token": "verification-token-unused-in-socket-mode",
        "team_id": TEST_TEAM_ID,
        "api_app_id": "A0TEST",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1_700_000_000,
        "authorizations": [{"team_id": TEST_TEAM_ID, "user_id": TEST_BOT_USER_ID, "is_bot": true}],
        "is_ext_shared_channel": false,
        "event_context": "4-loopback"
    })
}

#[derive(Debug)]
enum Outgoing {
    Text(String),
    Close,
}

#[derive(Debug)]
struct ConnectionState {
    info: ConnectionInfo,
    outgoing: mpsc::UnboundedSender<Outgoing>,
}

#[derive(Debug, Clone)]
struct SentEnvelope {
    connection: u64,
    kind: String,
    payload: Value,
    retry_attempt: u64,
    sent_at: Instant,
}

#[derive(Debug, Default)]
struct State {
    bot_token: String,
    app_token: String,
    calls: HashMap<String, Vec<Value>>,
    next_failures: HashMap<String, VecDeque<SlackFailure>>,
    always: HashMap<String, SlackFailure>,
    hold_open: bool,
    tickets: HashMap<String, bool>,
    next_ticket: u64,
    connections: Vec<ConnectionState>,
    auto_hello: bool,
    envelopes: HashMap<String, SentEnvelope>,
    next_envelope: u64,
    next_event: u64,
    acks: Vec<AckRecord>,
    next_ts: u64,
    messages: HashMap<(String, String), String>,
    posted: Vec<PostedRecord>,
    updated: Vec<UpdatedRecord>,
    ephemeral: Vec<EphemeralRecord>,
    /// The bot's reactions by `(channel, ts)`, in the order they were added.
    reactions: HashMap<(String, String), Vec<String>>,
    files: HashMap<String, ServedFile>,
    /// External uploads by file id: the name and length promised, the bytes once sent.
    pending_uploads: HashMap<String, PendingUpload>,
    next_upload: u64,
    shared_files: Vec<SharedFile>,
    timeline: Vec<String>,
    /// Channels the tests declared, and whether the bot is a member (`not_in_channel`
    /// otherwise); a channel not declared takes posts as before.
    channels: HashMap<String, bool>,
    /// Messages deleted by hand, by `(channel, ts)`: a reply under one is refused with
    /// `thread_not_found`, an update with `message_not_found`.
    deleted: std::collections::HashSet<(String, String)>,
}

#[derive(Debug, Clone)]
struct PendingUpload {
    filename: String,
    length: usize,
    received: Option<(Option<String>, Option<String>, Vec<u8>)>,
}

/// A file the bot uploaded and shared: `files.getUploadURLExternal`, the bytes to the
/// upload URL, then `files.completeUploadExternal`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedFile {
    /// Slack's file id.
    pub file_id: String,
    /// `filename` promised in `files.getUploadURLExternal`.
    pub filename: String,
    /// The `title` given when completing.
    pub title: Option<String>,
    /// The upload's `filename` part's own file name.
    pub part_file_name: Option<String>,
    /// The upload's `Content-Type`.
    pub content_type: Option<String>,
    /// The bytes.
    pub data: Vec<u8>,
    /// `channel_id`.
    pub channel_id: String,
    /// `thread_ts`, if any.
    pub thread_ts: Option<String>,
    /// `initial_comment`, if any.
    pub initial_comment: Option<String>,
}

impl State {
    fn next_ts(&mut self) -> String {
        self.next_ts += 1;
        format!("1700000000.{:06}", self.next_ts)
    }
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// Woken on every request, frame and scripted change: [`SlackServer::wait_until`].
    changed: Notify,
    /// Woken when held `apps.connections.open` calls may go on.
    released: Notify,
    web: SocketAddr,
    socket: SocketAddr,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock must not hide its own failure
        // behind a poison error in the server.
        lock(&self.state)
    }

    fn changed(&self) {
        self.changed.notify_waiters();
    }
}

/// The loopback Slack. Dropping it stops both servers and closes every connection.
#[derive(Debug)]
pub struct SlackServer {
    inner: Arc<Inner>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for SlackServer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl SlackServer {
    /// A server for [`TEST_BOT_TOKEN`] and [`TEST_APP_TOKEN`]. Panics when no loopback
    /// port can be bound (a test environment problem).
    pub async fn start() -> SlackServer {
        let web = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the Web API server");
        let socket = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the Socket Mode server");
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                bot_token: TEST_BOT_TOKEN.to_owned(),
                app_token: TEST_APP_TOKEN.to_owned(),
                auto_hello: true,
                ..State::default()
            }),
            changed: Notify::new(),
            released: Notify::new(),
            web: web.local_addr().expect("the bound address"),
            socket: socket.local_addr().expect("the bound address"),
        });
        let tasks = vec![
            tokio::spawn(web_loop(web, inner.clone())),
            tokio::spawn(socket_loop(socket, inner.clone())),
        ];
        SlackServer { inner, tasks }
    }

    /// `http://127.0.0.1:<port>/api`: the transport's `baseUrl`.
    pub fn base_url(&self) -> String {
        format!("http://{}/api", self.inner.web)
    }

    /// The bot token the server accepts.
    pub fn bot_token(&self) -> String {
        self.inner.state().bot_token.clone()
    }

    /// The app-level token the server accepts.
    pub fn app_token(&self) -> String {
        self.inner.state().app_token.clone()
    }

    /// From now on only `token` is accepted as the bot token (a revoked one).
    pub fn change_bot_token(&self, token: &str) {
        self.inner.state().bot_token = token.to_owned();
        self.inner.changed();
    }

    /// From now on only `token` is accepted as the app-level token.
    pub fn change_app_token(&self, token: &str) {
        self.inner.state().app_token = token.to_owned();
        self.inner.changed();
    }

    /// The next call of `method` fails so. Several calls queue up, one per call.
    pub fn fail_next(&self, method: &str, failure: SlackFailure) {
        self.inner
            .state()
            .next_failures
            .entry(method.to_owned())
            .or_default()
            .push_back(failure);
        self.inner.changed();
    }

    /// Every later call of `method` fails so (until [`Self::clear_failures`]).
    pub fn fail_always(&self, method: &str, failure: SlackFailure) {
        self.inner.state().always.insert(method.to_owned(), failure);
        self.inner.changed();
    }

    /// Forgets every scripted failure.
    pub fn clear_failures(&self) {
        let mut state = self.inner.state();
        state.always.clear();
        state.next_failures.clear();
    }

    /// `true`: `apps.connections.open` calls wait (unanswered) until this is set to
    /// `false`, so a test can act while a new connection is being opened.
    pub fn hold_connections_open(&self, hold: bool) {
        self.inner.state().hold_open = hold;
        if !hold {
            self.inner.released.notify_waiters();
        }
        self.inner.changed();
    }

    /// `false`: new connections get no `hello` until [`Self::send_hello`].
    pub fn set_auto_hello(&self, on: bool) {
        self.inner.state().auto_hello = on;
    }

    /// How often `method` was called, failed calls included.
    pub fn calls(&self, method: &str) -> usize {
        self.inner.state().calls.get(method).map_or(0, Vec::len)
    }

    /// The parameters of every call of `method`, oldest first.
    pub fn requests(&self, method: &str) -> Vec<Value> {
        self.inner
            .state()
            .calls
            .get(method)
            .cloned()
            .unwrap_or_default()
    }

    /// Files uploaded and shared, oldest first.
    pub fn shared_files(&self) -> Vec<SharedFile> {
        self.inner.state().shared_files.clone()
    }

    /// Declares `channel`, with the bot a member of it or not (then `chat.postMessage`
    /// there is `not_in_channel`).
    pub fn add_channel(&self, channel: &str, member: bool) {
        self.inner
            .state()
            .channels
            .insert(channel.to_owned(), member);
    }

    /// Deletes message `ts` of `channel`, as a person does by hand: a reply under it is
    /// `thread_not_found`, an update `message_not_found`.
    pub fn delete_message(&self, channel: &str, ts: &str) {
        let mut state = self.inner.state();
        state.messages.remove(&(channel.to_owned(), ts.to_owned()));
        state.deleted.insert((channel.to_owned(), ts.to_owned()));
    }

    /// The current text of message `ts` of `channel` (after updates), if it is there.
    pub fn message_text(&self, channel: &str, ts: &str) -> Option<String> {
        self.inner
            .state()
            .messages
            .get(&(channel.to_owned(), ts.to_owned()))
            .cloned()
    }

    /// Messages posted, oldest first.
    pub fn posted(&self) -> Vec<PostedRecord> {
        self.inner.state().posted.clone()
    }

    /// Ephemeral messages, oldest first.
    pub fn ephemeral(&self) -> Vec<EphemeralRecord> {
        self.inner.state().ephemeral.clone()
    }

    /// The bot's reactions on a message now (emoji names), in the order they were added.
    pub fn own_reactions(&self, channel: &str, ts: &str) -> Vec<String> {
        self.inner
            .state()
            .reactions
            .get(&(channel.to_owned(), ts.to_owned()))
            .cloned()
            .unwrap_or_default()
    }

    /// Updates applied, oldest first.
    pub fn updated(&self) -> Vec<UpdatedRecord> {
        self.inner.state().updated.clone()
    }

    /// Every Socket Mode connection so far, oldest first.
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.inner
            .state()
            .connections
            .iter()
            .map(|c| c.info.clone())
            .collect()
    }

    /// Ids of the connections open now.
    pub fn open_connections(&self) -> Vec<u64> {
        self.connections()
            .into_iter()
            .filter(|c| c.open)
            .map(|c| c.id)
            .collect()
    }

    /// The newest open connection.
    pub fn latest_connection(&self) -> Option<u64> {
        self.open_connections().last().copied()
    }

    /// What happened, in order: `open 1`, `hello 1`, `ack 1 e-3`, `client closed 1`, ...
    pub fn timeline(&self) -> Vec<String> {
        self.inner.state().timeline.clone()
    }

    /// Acknowledgements received, oldest first.
    pub fn acks(&self) -> Vec<AckRecord> {
        self.inner.state().acks.clone()
    }

    /// Whether `envelope_id` was acknowledged.
    pub fn acked(&self, envelope_id: &str) -> bool {
        self.inner
            .state()
            .acks
            .iter()
            .any(|ack| ack.envelope_id == envelope_id)
    }

    /// A `ts` the server has not given out yet (for inbound messages).
    pub fn new_ts(&self) -> String {
        self.inner.state().next_ts()
    }

    /// Serves `file` at `/files/<name>`; returns its `url_private_download`.
    pub fn serve_file(&self, name: &str, file: ServedFile) -> String {
        self.inner.state().files.insert(name.to_owned(), file);
        format!("http://{}/files/{name}", self.inner.web)
    }

    fn push(&self, connection: u64, outgoing: Outgoing, note: String) -> bool {
        let mut state = self.inner.state();
        let Some(target) = state
            .connections
            .iter()
            .find(|c| c.info.id == connection && c.info.open)
        else {
            return false;
        };
        let sent = target.outgoing.send(outgoing).is_ok();
        state.timeline.push(note);
        drop(state);
        self.inner.changed();
        sent
    }

    /// Sends `hello` on `connection`.
    pub fn send_hello(&self, connection: u64) -> bool {
        self.push(
            connection,
            Outgoing::Text(hello_frame(1)),
            format!("hello {connection}"),
        )
    }

    /// Sends any text frame on `connection`.
    pub fn send_raw(&self, connection: u64, text: &str) -> bool {
        self.push(
            connection,
            Outgoing::Text(text.to_owned()),
            format!("raw {connection}"),
        )
    }

    /// Sends `disconnect` with `reason` on `connection`; the connection stays open.
    pub fn disconnect(&self, connection: u64, reason: &str) -> bool {
        let frame =
            json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "wss-loopback"}});
        self.push(
            connection,
            Outgoing::Text(frame.to_string()),
            format!("disconnect {connection} {reason}"),
        )
    }

    /// Closes `connection` from the server's side.
    pub fn close(&self, connection: u64) -> bool {
        self.push(
            connection,
            Outgoing::Close,
            format!("server closed {connection}"),
        )
    }

    /// Sends `event` (a `message`, `app_mention`, ...) in a fresh `event_callback` with a
    /// new `event_id`, in an `events_api` envelope; returns the envelope id.
    pub fn send_event(&self, connection: u64, event: Value) -> Option<String> {
        let event_id = {
            let mut state = self.inner.state();
            state.next_event += 1;
            format!("Ev{:08}", state.next_event)
        };
        self.send_envelope(
            connection,
            "events_api",
            event_callback(event, &event_id),
            0,
        )
    }

    /// Sends an envelope of `kind` with `payload`; returns the envelope id.
    pub fn send_envelope(
        &self,
        connection: u64,
        kind: &str,
        payload: Value,
        retry_attempt: u64,
    ) -> Option<String> {
        let envelope_id = {
            let mut state = self.inner.state();
            state.next_envelope += 1;
            format!("env-{}", state.next_envelope)
        };
        let frame = json!({
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": retry_attempt,
            "retry_reason": if retry_attempt > 0 { "timeout" } else { "" },
        });
        self.inner.state().envelopes.insert(
            envelope_id.clone(),
            SentEnvelope {
                connection,
                kind: kind.to_owned(),
                payload,
                retry_attempt,
                sent_at: Instant::now(),
            },
        );
        self.push(
            connection,
            Outgoing::Text(frame.to_string()),
            format!("envelope {connection} {envelope_id}"),
        )
        .then_some(envelope_id)
    }

    /// Delivers envelope `envelope_id` again, as Slack does when it saw no ack in time:
    /// a new envelope id, the same payload, `retry_attempt` one higher, `retry_reason`
    /// `timeout`; on `connection`, or the original's when `None`. Returns the new id.
    pub fn redeliver(&self, envelope_id: &str, connection: Option<u64>) -> Option<String> {
        let original = self.inner.state().envelopes.get(envelope_id).cloned()?;
        self.send_envelope(
            connection.unwrap_or(original.connection),
            &original.kind,
            original.payload,
            original.retry_attempt + 1,
        )
    }

    /// Waits until `done(self)` holds or `timeout` passes; returns whether it held.
    /// Re-checked after every request, frame and scripted change, so tests wait for the
    /// transport's asynchronous work without sleeping.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&SlackServer) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a change between the two is not missed.
            changed.as_mut().enable();
            if done(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return done(self);
            }
        }
    }
}

fn hello_frame(connections: usize) -> String {
    json!({
        "type": "hello",
        "num_connections": connections,
        "debug_info": {"host": "applink-loopback", "build_number": 1, "approximate_connection_time": 18_060},
        "connection_info": {"app_id": "A0TEST"}
    })
    .to_string()
}

async fn socket_loop(listener: TcpListener, inner: Arc<Inner>) {
    // Connections live in the set, so aborting this loop (dropping the server) closes them.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        connections.spawn(serve_socket(stream, inner.clone()));
        while connections.try_join_next().is_some() {}
    }
}

async fn serve_socket(stream: tokio::net::TcpStream, inner: Arc<Inner>) {
    let ticket = Arc::new(Mutex::new(None::<String>));
    // The signature is tungstenite's callback type; its error is a whole HTTP response.
    #[allow(clippy::result_large_err)]
    let check = {
        let inner = inner.clone();
        let ticket = ticket.clone();
        move |request: &WsRequest, response: WsResponse| -> Result<WsResponse, ErrorResponse> {
            let given = request
                .uri()
                .query()
                .unwrap_or_default()
                .split('&')
                .find_map(|pair| pair.strip_prefix("ticket="))
                .map(str::to_owned);
            let mut state = inner.state();
            let valid = request.uri().path() == "/link/"
                && given
                    .as_ref()
                    .and_then(|t| state.tickets.get_mut(t))
                    .is_some_and(|used| !std::mem::replace(used, true));
            if !valid {
                let mut refused = ErrorResponse::new(Some("invalid or used ticket".to_owned()));
                *refused.status_mut() = hyper::StatusCode::UNAUTHORIZED;
                return Err(refused);
            }
            *lock(&ticket) = given;
            Ok(response)
        }
    };
    let Ok(ws) = tokio_tungstenite::accept_hdr_async(stream, check).await else {
        inner.changed();
        return;
    };
    let (outgoing, mut queue) = mpsc::unbounded_channel();
    let (id, hello) = {
        let mut state = inner.state();
        let id = state.connections.len() as u64 + 1;
        state.connections.push(ConnectionState {
            info: ConnectionInfo {
                id,
                open: true,
                closed_by_client: false,
            },
            outgoing: outgoing.clone(),
        });
        state.timeline.push(format!("open {id}"));
        let open = state.connections.iter().filter(|c| c.info.open).count();
        let hello = state.auto_hello.then(|| hello_frame(open));
        if hello.is_some() {
            state.timeline.push(format!("hello {id}"));
        }
        (id, hello)
    };
    if let Some(hello) = hello {
        let _ = outgoing.send(Outgoing::Text(hello));
    }
    inner.changed();
    let (mut write, mut read) = ws.split();
    let mut closed_by_client = false;
    loop {
        tokio::select! {
            next = queue.recv() => match next {
                Some(Outgoing::Text(text)) => {
                    if write.send(Message::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Some(Outgoing::Close) | None => {
                    let _ = write.send(Message::Close(None)).await;
                    // Drain until the client answers the close.
                    while let Some(Ok(_)) = read.next().await {}
                    break;
                }
            },
            frame = read.next() => match frame {
                Some(Ok(Message::Text(text))) => record_ack(&inner, id, text.as_str()),
                Some(Ok(Message::Close(_))) => {
                    closed_by_client = true;
                    // tungstenite answers the close; reading on ends the stream.
                    while let Some(Ok(_)) = read.next().await {}
                    break;
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            },
        }
    }
    let mut state = inner.state();
    if let Some(connection) = state.connections.iter_mut().find(|c| c.info.id == id) {
        connection.info.open = false;
        connection.info.closed_by_client = closed_by_client;
    }
    state.timeline.push(if closed_by_client {
        format!("client closed {id}")
    } else {
        format!("closed {id}")
    });
    drop(state);
    inner.changed();
}

fn record_ack(inner: &Inner, connection: u64, text: &str) {
    let Some(envelope_id) = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|value| value.get("envelope_id")?.as_str().map(str::to_owned))
    else {
        return;
    };
    let mut state = inner.state();
    let after = state
        .envelopes
        .get(&envelope_id)
        .map(|sent| sent.sent_at.elapsed());
    state
        .timeline
        .push(format!("ack {connection} {envelope_id}"));
    state.acks.push(AckRecord {
        connection,
        envelope_id,
        after,
    });
    drop(state);
    inner.changed();
}

type Answer = Response<BoxBody<Bytes, Infallible>>;

async fn web_loop(listener: TcpListener, inner: Arc<Inner>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let inner = inner.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let inner = inner.clone();
                async move { Ok::<_, Infallible>(handle(inner, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

fn answer(status: u16, body: &Value) -> Answer {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json; charset=utf-8")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

fn ok(mut fields: Value) -> Answer {
    fields["ok"] = json!(true);
    answer(200, &fields)
}

fn error(code: &str) -> Answer {
    answer(200, &json!({"ok": false, "error": code}))
}

fn failure_answer(failure: &SlackFailure) -> Answer {
    match failure {
        SlackFailure::Error(code) => error(code),
        SlackFailure::RateLimited(seconds) => {
            let mut response = answer(429, &json!({"ok": false, "error": "ratelimited"}));
            if let Ok(value) = seconds.to_string().parse() {
                response.headers_mut().insert("retry-after", value);
            }
            response
        }
        SlackFailure::Status(status) => Response::builder()
            .status(StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY))
            .header("content-type", "text/html")
            .body(Full::new(Bytes::from_static(b"<html>upstream error</html>")).boxed())
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed())),
    }
}

async fn handle(inner: Arc<Inner>, request: Request<Incoming>) -> Answer {
    let path = request.uri().path().to_owned();
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let bearer = header("authorization")
        .strip_prefix("Bearer ")
        .map(str::to_owned);
    let content_type = header("content-type");
    let body = request
        .into_body()
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    let answer = if let Some(name) = path.strip_prefix("/files/") {
        download(&inner, name, bearer.as_deref())
    } else if let Some(file_id) = path.strip_prefix("/upload/") {
        receive_upload(&inner, file_id, &content_type, &body)
    } else if let Some(method) = path.strip_prefix("/api/") {
        let params = parameters(&content_type, &body);
        call(&inner, method, bearer.as_deref(), params).await
    } else {
        answer(404, &json!({"ok": false, "error": "unknown_method"}))
    };
    inner.changed();
    answer
}

fn parameters(content_type: &str, body: &[u8]) -> Value {
    if content_type.starts_with("application/x-www-form-urlencoded") {
        let fields: serde_json::Map<String, Value> = form_urlencoded::parse(body)
            .map(|(key, value)| (key.into_owned(), Value::String(value.into_owned())))
            .collect();
        return Value::Object(fields);
    }
    serde_json::from_slice(body).unwrap_or_else(|_| json!({}))
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

async fn call(inner: &Arc<Inner>, method: &str, bearer: Option<&str>, params: Value) -> Answer {
    let failure = {
        let mut state = inner.state();
        state
            .calls
            .entry(method.to_owned())
            .or_default()
            .push(params.clone());
        let next = state
            .next_failures
            .get_mut(method)
            .and_then(VecDeque::pop_front);
        next.or_else(|| state.always.get(method).cloned())
    };
    inner.changed();
    if let Some(failure) = failure {
        return failure_answer(&failure);
    }
    let Some(token) = bearer.filter(|token| !token.is_empty()) else {
        return error("not_authed");
    };
    let (bot, app) = {
        let state = inner.state();
        (token == state.bot_token, token == state.app_token)
    };
    if method == "apps.connections.open" {
        if bot || token.starts_with("xoxb-") {
            return error("not_allowed_token_type");
        }
        if !app {
            return error("invalid_auth");
        }
        return connections_open(inner).await;
    }
    if app || token.starts_with("xapp-") {
        return error("not_allowed_token_type");
    }
    if !bot {
        return error("invalid_auth");
    }
    match method {
        "auth.test" => ok(json!({
            "url": "https://loopback.slack.com/",
            "team": "Loopback",
            "user": TEST_BOT_NAME,
            "team_id": TEST_TEAM_ID,
            "user_id": TEST_BOT_USER_ID,
            "bot_id": TEST_BOT_ID,
            "is_enterprise_install": false
        })),
        "chat.postMessage" => post_message(inner, &params),
        "chat.update" => update_message(inner, &params),
        "chat.postEphemeral" => post_ephemeral(inner, &params),
        "reactions.add" => own_reaction(inner, &params, true),
        "reactions.remove" => own_reaction(inner, &params, false),
        "files.getUploadURLExternal" => get_upload_url(inner, &params),
        "files.completeUploadExternal" => complete_upload(inner, &params),
        _ => error("unknown_method"),
    }
}

/// `files.getUploadURLExternal`: `filename` and a non-zero `length` are required.
fn get_upload_url(inner: &Inner, params: &Value) -> Answer {
    let Some(filename) = text(&params["filename"]).filter(|f| !f.is_empty()) else {
        return error("invalid_arguments");
    };
    let Some(length) = text(&params["length"])
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
    else {
        return error("missing_argument");
    };
    let mut state = inner.state();
    state.next_upload += 1;
    let file_id = format!("F{:09}", state.next_upload);
    state.pending_uploads.insert(
        file_id.clone(),
        PendingUpload {
            filename,
            length,
            received: None,
        },
    );
    ok(json!({
        "upload_url": format!("http://{}/upload/{file_id}", inner.web),
        "file_id": file_id,
    }))
}

/// The upload URL: the bytes as a multipart form (field `filename`) or raw; 200 when they
/// match the promised length, as Slack's upload service checks.
fn receive_upload(inner: &Inner, file_id: &str, content_type: &str, body: &[u8]) -> Answer {
    let received = if content_type.starts_with("multipart/form-data") {
        match crate::multipart::parse(content_type, body) {
            Ok(parts) => match parts.into_iter().find(|p| p.name == "filename") {
                Some(part) => (part.file_name, part.content_type, part.data),
                None => return answer(400, &json!({"error": "no filename part"})),
            },
            Err(reason) => return answer(400, &json!({"error": reason})),
        }
    } else {
        (None, Some(content_type.to_owned()), body.to_vec())
    };
    let mut state = inner.state();
    let Some(pending) = state.pending_uploads.get_mut(file_id) else {
        return answer(404, &json!({"error": "unknown upload"}));
    };
    if received.2.len() != pending.length {
        return answer(400, &json!({"error": "length mismatch"}));
    }
    pending.received = Some(received);
    answer(200, &json!({}))
}

/// `files.completeUploadExternal`: every file must have been uploaded whole first.
fn complete_upload(inner: &Inner, params: &Value) -> Answer {
    let files = match &params["files"] {
        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        other => other.clone(),
    };
    let Some(files) = files.as_array().filter(|f| !f.is_empty()).cloned() else {
        return error("invalid_arguments");
    };
    let Some(channel) = text(&params["channel_id"]) else {
        // Without a channel the file stays private: the bot's files must be shared.
        return error("invalid_arguments");
    };
    let mut state = inner.state();
    let mut shared = Vec::new();
    for file in &files {
        let Some(id) = text(&file["id"]) else {
            return error("invalid_arguments");
        };
        let Some(pending) = state.pending_uploads.get(&id).cloned() else {
            return error("file_not_found");
        };
        let Some((part_file_name, content_type, data)) = pending.received else {
            return error("file_upload_not_completed");
        };
        shared.push(SharedFile {
            file_id: id.clone(),
            filename: pending.filename,
            title: text(&file["title"]),
            part_file_name,
            content_type,
            data,
            channel_id: channel.clone(),
            thread_ts: text(&params["thread_ts"]),
            initial_comment: text(&params["initial_comment"]),
        });
    }
    let listed: Vec<Value> = shared
        .iter()
        .map(|f| json!({"id": f.file_id, "title": f.title}))
        .collect();
    for file in shared {
        state.pending_uploads.remove(&file.file_id);
        state.shared_files.push(file);
    }
    ok(json!({ "files": listed }))
}

async fn connections_open(inner: &Arc<Inner>) -> Answer {
    loop {
        let released = inner.released.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        if !inner.state().hold_open {
            break;
        }
        released.await;
    }
    let ticket = {
        let mut state = inner.state();
        state.next_ticket += 1;
        let ticket = format!("t{}", state.next_ticket);
        state.tickets.insert(ticket.clone(), false);
        ticket
    };
    ok(json!({"url": format!("ws://{}/link/?ticket={ticket}&app_id=A0TEST", inner.socket)}))
}

fn post_message(inner: &Inner, params: &Value) -> Answer {
    let Some(channel) = text(&params["channel"]).filter(|c| !c.is_empty()) else {
        return error("channel_not_found");
    };
    {
        let state = inner.state();
        if state.channels.get(&channel) == Some(&false) {
            return error("not_in_channel");
        }
        if let Some(thread) = text(&params["thread_ts"])
            && state.deleted.contains(&(channel.clone(), thread))
        {
            return error("thread_not_found");
        }
    }
    let Some(message) = text(&params["text"]).filter(|t| !t.trim().is_empty()) else {
        return error("no_text");
    };
    if message.chars().count() > 40_000 {
        return error("msg_too_long");
    }
    let thread_ts = text(&params["thread_ts"]);
    let mrkdwn = params["mrkdwn"]
        .as_bool()
        .or_else(|| params["mrkdwn"].as_str().map(|flag| flag == "true"));
    let mut state = inner.state();
    let ts = state.next_ts();
    state
        .messages
        .insert((channel.clone(), ts.clone()), message.clone());
    state.posted.push(PostedRecord {
        channel: channel.clone(),
        ts: ts.clone(),
        text: message.clone(),
        thread_ts: thread_ts.clone(),
        mrkdwn,
        blocks: blocks(&params["blocks"]),
    });
    drop(state);
    let mut posted = json!({
        "type": "message",
        "user": TEST_BOT_USER_ID,
        "bot_id": TEST_BOT_ID,
        "text": message,
        "ts": ts,
    });
    if let Some(thread) = thread_ts {
        posted["thread_ts"] = json!(thread);
    }
    ok(json!({"channel": channel, "ts": ts, "message": posted}))
}

/// `blocks` as JSON (Slack takes them as a JSON array, or as a string holding one).
fn blocks(value: &Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::String(text) => serde_json::from_str(text).ok(),
        other => Some(other.clone()),
    }
}

fn post_ephemeral(inner: &Inner, params: &Value) -> Answer {
    let Some(channel) = text(&params["channel"]).filter(|c| !c.is_empty()) else {
        return error("channel_not_found");
    };
    let Some(user) = text(&params["user"]).filter(|u| !u.is_empty()) else {
        return error("user_not_in_channel");
    };
    let Some(message) = text(&params["text"]).filter(|t| !t.trim().is_empty()) else {
        return error("no_text");
    };
    let mut state = inner.state();
    let ts = state.next_ts();
    state.ephemeral.push(EphemeralRecord {
        channel,
        user,
        thread_ts: text(&params["thread_ts"]),
        text: message,
    });
    drop(state);
    ok(json!({"message_ts": ts}))
}

/// `reactions.add` / `reactions.remove` of the bot's own reaction, with Slack's errors:
/// `already_reacted` for a second add, `no_reaction` for removing one that is not there.
fn own_reaction(inner: &Inner, params: &Value, add: bool) -> Answer {
    let (Some(channel), Some(ts), Some(name)) = (
        text(&params["channel"]).filter(|c| !c.is_empty()),
        text(&params["timestamp"]).filter(|t| !t.is_empty()),
        text(&params["name"]).filter(|n| !n.is_empty()),
    ) else {
        return error("no_item_specified");
    };
    let mut state = inner.state();
    let own = state.reactions.entry((channel, ts)).or_default();
    let has = own.contains(&name);
    match (add, has) {
        (true, true) => return error("already_reacted"),
        (false, false) => return error("no_reaction"),
        (true, false) => own.push(name),
        (false, true) => own.retain(|n| *n != name),
    }
    drop(state);
    ok(json!({}))
}

fn update_message(inner: &Inner, params: &Value) -> Answer {
    let (Some(channel), Some(ts)) = (text(&params["channel"]), text(&params["ts"])) else {
        return error("message_not_found");
    };
    let Some(message) = text(&params["text"]).filter(|t| !t.trim().is_empty()) else {
        return error("no_text");
    };
    let mut state = inner.state();
    let key = (channel.clone(), ts.clone());
    if !state.messages.contains_key(&key) {
        return error("message_not_found");
    }
    state.messages.insert(key, message.clone());
    state.updated.push(UpdatedRecord {
        channel: channel.clone(),
        ts: ts.clone(),
        text: message.clone(),
        blocks: blocks(&params["blocks"]),
    });
    drop(state);
    ok(json!({"channel": channel, "ts": ts, "text": message}))
}

fn download(inner: &Inner, name: &str, bearer: Option<&str>) -> Answer {
    let state = inner.state();
    if bearer != Some(state.bot_token.as_str()) {
        // What Slack does: its sign-in page, with status 200.
        return Response::builder()
            .status(200)
            .header("content-type", "text/html; charset=utf-8")
            .body(
                Full::new(Bytes::from_static(
                    b"<!DOCTYPE html><html><title>Slack</title>Sign in</html>",
                ))
                .boxed(),
            )
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()));
    }
    let Some(file) = state.files.get(name) else {
        return answer(404, &json!({"ok": false, "error": "file_not_found"}));
    };
    if let Some(location) = &file.redirect {
        return Response::builder()
            .status(302)
            .header("location", location.as_str())
            .body(Full::new(Bytes::new()).boxed())
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()));
    }
    let mut response = Response::builder().status(200);
    if let Some(content_type) = &file.content_type {
        response = response.header("content-type", content_type.as_str());
    }
    let body = if file.content_length {
        Full::new(Bytes::from(file.bytes.clone())).boxed()
    } else {
        let chunks: Vec<Result<hyper::body::Frame<Bytes>, Infallible>> = file
            .bytes
            .chunks(1024)
            .map(|chunk| Ok(hyper::body::Frame::data(Bytes::copy_from_slice(chunk))))
            .collect();
        BodyExt::boxed(http_body_util::StreamBody::new(futures_util::stream::iter(
            chunks,
        )))
    };
    response
        .body(body)
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

/// The conformance kit's view of a Slack transport that talks to a [`SlackServer`]:
/// posted and updated texts as the server recorded them, failing sends with
/// `channel_not_found`, inbound messages as IM events on the newest connection.
#[derive(Debug)]
pub struct ConformanceSlack {
    /// The server the transport under test talks to.
    pub server: Arc<SlackServer>,
    /// The IM messages are delivered from and sent to.
    pub channel: String,
    /// The person writing.
    pub user: String,
    secret: String,
}

impl ConformanceSlack {
    /// A view of `server`, with IM `D0CONFORM` and user `U0PERSON`.
    pub fn new(server: Arc<SlackServer>) -> ConformanceSlack {
        ConformanceSlack {
            secret: server.bot_token(),
            server,
            channel: "D0CONFORM".to_owned(),
            user: "U0PERSON".to_owned(),
        }
    }
}

#[async_trait]
impl ConformancePlatform for ConformanceSlack {
    async fn posted(&self) -> Vec<String> {
        self.server.posted().into_iter().map(|p| p.text).collect()
    }

    async fn edited(&self) -> Vec<String> {
        self.server.updated().into_iter().map(|u| u.text).collect()
    }

    async fn fail_sends(&self) {
        self.server.fail_always(
            "chat.postMessage",
            SlackFailure::Error("channel_not_found".to_owned()),
        );
    }

    async fn deliver(&self, text: &str) -> Result<(), String> {
        let connection = self
            .server
            .latest_connection()
            .ok_or("no Socket Mode connection is open")?;
        let ts = self.server.new_ts();
        self.server
            .send_event(connection, im_message(&self.channel, &self.user, &ts, text))
            .map(|_| ())
            .ok_or_else(|| "the connection closed".to_owned())
    }

    fn secret(&self) -> &str {
        &self.secret
    }

    fn conversation_id(&self) -> String {
        self.channel.clone()
    }
}
