//! A loopback Telegram Bot API server: real HTTP/1.1 and JSON on `127.0.0.1:<random port>`,
//! scriptable from tests, for the Telegram transport's tests and the host's end-to-end tests.
//!
//! It follows the Bot API documentation (docs/protocols.md#telegram-bot-api), not the
//! transport: routes `POST|GET /bot<token>/<method>` (JSON, form or query parameters;
//! method names case-insensitive) and `GET /file/bot<token>/<file_path>`; a wrong token
//! gets 401. `getUpdates` honours `offset` (updates below it are confirmed and forgotten, a
//! negative one keeps only the last ones), `limit` and `timeout` (the poll is held open
//! until an update arrives or the timeout passes), and a new poll while another is held
//! terminates the held one with 409 Conflict, as Telegram does. `sendMessage` and
//! `editMessageText` parse `parse_mode: HTML` with Telegram's tag list and answer 400
//! "can't parse entities" for malformed HTML, "message is not modified" for an identical
//! edit and "message to edit not found" for an unknown message.
//!
//! `reply_markup` on `sendMessage` is checked as an inline keyboard (400
//! `BUTTON_DATA_INVALID` for `callback_data` over 64 bytes) and recorded; button presses
//! are queued as `callback_query` updates ([`button_press`]); `answerCallbackQuery` calls
//! are recorded ([`BotApiServer::callback_answers`]). `sendMessage`'s `reply_parameters` is
//! recorded with the message; `setMessageReaction` takes at most one reaction, an emoji
//! from Telegram's own list (400 `REACTION_INVALID` otherwise, as Telegram answers), and
//! records it ([`BotApiServer::reactions`]); `sendMessageDraft` takes private chats only, a
//! non-zero `draft_id` and parsable text, and records it ([`BotApiServer::drafts`]).
//!
//! Forum topics: supergroups the test declares ([`BotApiServer::add_group`], a forum or not,
//! the bot with `can_manage_topics` or not) take `createForumTopic`, `editForumTopic`,
//! `closeForumTopic` and `reopenForumTopic` with Telegram's refusals ("chat not found", "the
//! chat is not a forum", "not enough rights…", "message thread not found",
//! `TOPIC_NOT_MODIFIED`); a message or file into a topic of a declared forum that is not
//! there (deleted with [`BotApiServer::delete_topic`]) is "message thread not found".
//!
//! Topics in private chats (Bot API 9.3/9.4): with [`BotApiServer::set_private_topics`] on
//! (@BotFather's Threaded Mode) `getMe` says `has_topics_enabled: true` and a user's private
//! chat (a positive chat id) takes `createForumTopic` and `editForumTopic`; off (the
//! default, as for a new bot), `getMe` says `false` and `createForumTopic` there answers "the
//! chat is not a forum". `closeForumTopic` and `reopenForumTopic` are documented for forum
//! supergroups only and refused in a private chat. Its topics are read with
//! [`BotApiServer::topics`] under the user's id; [`private_topic_text`] writes in one.
//!
//! Tests script it: [`BotApiServer::queue_update`], [`BotApiServer::fail_next`],
//! [`BotApiServer::drop_next`] (the connection closes without an answer), call counts,
//! the records of what was sent, edited and shown as typing, and [`BotApiServer::wait_until`]
//! to wait for any of it without sleeping.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Notify, oneshot};
use transport_core::sync::lock;

use crate::conformance::ConformancePlatform;

/// The token [`BotApiServer::start`] accepts.
pub const TEST_TOKEN: &str = "123456:TEST-loopback-token-AAbbCCddEEff";

/// The bot id [`BotApiServer::start`] answers `getMe` with.
pub const TEST_BOT_ID: i64 = 999;

/// The bot user name [`BotApiServer::start`] answers `getMe` with.
pub const TEST_BOT_USERNAME: &str = "piBot";

/// The description Telegram gives a poll terminated by a newer one.
pub const CONFLICT_DESCRIPTION: &str = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running";

/// The description Telegram gives `getUpdates` while a webhook is set.
pub const WEBHOOK_CONFLICT_DESCRIPTION: &str = "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first";

/// The description of an identical edit.
pub const NOT_MODIFIED_DESCRIPTION: &str = "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message";

/// A Bot API error body: `{"ok": false, "error_code": code, "description": ...}`.
pub fn error_body(code: u16, description: &str) -> Value {
    json!({"ok": false, "error_code": code, "description": description})
}

/// Telegram's 429 body with `parameters.retry_after`.
pub fn rate_limited_body(retry_after_seconds: u64) -> Value {
    json!({
        "ok": false,
        "error_code": 429,
        "description": format!("Too Many Requests: retry after {retry_after_seconds}"),
        "parameters": {"retry_after": retry_after_seconds}
    })
}

/// A person, as `from` in a message.
pub fn user(id: i64, first_name: &str) -> Value {
    json!({"id": id, "is_bot": false, "first_name": first_name, "language_code": "en"})
}

/// A text message from `user_id` in the private chat with them (no `update_id`: the
/// server assigns one when it is queued).
pub fn private_text(user_id: i64, message_id: i64, text: &str) -> Value {
    json!({
        "message": {
            "message_id": message_id,
            "from": user(user_id, "Ada"),
            "chat": {"id": user_id, "first_name": "Ada", "type": "private"},
            "date": 1_700_000_000,
            "text": text
        }
    })
}

/// A text message from `user_id` in supergroup `chat_id`, with these entities.
pub fn group_text(
    chat_id: i64,
    user_id: i64,
    message_id: i64,
    text: &str,
    entities: Value,
) -> Value {
    json!({
        "message": {
            "message_id": message_id,
            "from": user(user_id, "Ada"),
            "chat": {"id": chat_id, "title": "Team", "type": "supergroup"},
            "date": 1_700_000_000,
            "text": text,
            "entities": entities
        }
    })
}

/// A press on a callback button of the bot's message `message_id` in `chat` (a private
/// chat with `user_id` when `chat` is `None`), as a `callback_query` update:
/// `{id, from, message: {message_id, from: bot, chat, date, text}, chat_instance, data}`.
/// Queue it with [`BotApiServer::queue_update`].
pub fn button_press(
    query_id: &str,
    user_id: i64,
    chat: Option<Value>,
    message_id: i64,
    data: &str,
) -> Value {
    let chat =
        chat.unwrap_or_else(|| json!({"id": user_id, "first_name": "Ada", "type": "private"}));
    json!({
        "callback_query": {
            "id": query_id,
            "from": user(user_id, "Ada"),
            "message": {
                "message_id": message_id,
                "from": {"id": TEST_BOT_ID, "is_bot": true, "first_name": "Pi", "username": TEST_BOT_USERNAME},
                "chat": chat,
                "date": 1_700_000_000,
                "text": "(the message the button was under)"
            },
            "chat_instance": "-8205300382226391735",
            "data": data
        }
    })
}

/// An `answerCallbackQuery` call the server accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackAnswerRecord {
    /// `callback_query_id`.
    pub callback_query_id: String,
    /// The notification text, if any.
    pub text: Option<String>,
    /// `show_alert`: the text is an alert to dismiss, not a toast.
    pub show_alert: bool,
}

/// A message the bot sent, as the server recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentRecord {
    /// `chat_id` as given (numbers as decimal text).
    pub chat_id: String,
    /// The id the server gave the message.
    pub message_id: i64,
    /// `text` exactly as sent (markup included).
    pub text: String,
    /// `parse_mode`, if any.
    pub parse_mode: Option<String>,
    /// `message_thread_id`, if any.
    pub message_thread_id: Option<i64>,
    /// `reply_markup` as sent (an `inline_keyboard`), if any.
    pub reply_markup: Option<Value>,
    /// `reply_parameters.message_id`: the message this one replies to, if any.
    pub reply_to: Option<i64>,
}

/// A `sendMessageDraft` call the server accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftRecord {
    /// The private chat.
    pub chat_id: i64,
    /// The stream the draft belongs to.
    pub draft_id: i64,
    /// The text exactly as sent.
    pub text: String,
    /// `message_thread_id`, if any.
    pub message_thread_id: Option<i64>,
}

/// A `setMessageReaction` call the server accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReactionRecord {
    /// `chat_id` as given.
    pub chat_id: String,
    /// The message reacted to.
    pub message_id: i64,
    /// The emoji the bot's reactions are now (empty clears them).
    pub emoji: Vec<String>,
}

/// The emoji Telegram accepts as a bot's reaction (`ReactionTypeEmoji`, Bot API 9.x); any
/// other answers 400 `REACTION_INVALID`, as Telegram does.
pub const REACTION_EMOJI: &[&str] = &[
    "👍",
    "👎",
    "❤",
    "🔥",
    "🥰",
    "👏",
    "😁",
    "🤔",
    "🤯",
    "😱",
    "🤬",
    "😢",
    "🎉",
    "🤩",
    "🤮",
    "💩",
    "🙏",
    "👌",
    "🕊",
    "🤡",
    "🥱",
    "🥴",
    "😍",
    "🐳",
    "❤‍🔥",
    "🌚",
    "🌭",
    "💯",
    "🤣",
    "⚡",
    "🍌",
    "🏆",
    "💔",
    "🤨",
    "😐",
    "🍓",
    "🍾",
    "💋",
    "🖕",
    "😈",
    "😴",
    "😭",
    "🤓",
    "👻",
    "👨‍💻",
    "👀",
    "🎃",
    "🙈",
    "😇",
    "😨",
    "🤝",
    "✍",
    "🤗",
    "🫡",
    "🎅",
    "🎄",
    "☃",
    "💅",
    "🤪",
    "🗿",
    "🆒",
    "💘",
    "🙉",
    "🦄",
    "😘",
    "💊",
    "🙊",
    "😎",
    "👾",
    "🤷‍♂",
    "🤷",
    "🤷‍♀",
    "😡",
];

impl SentRecord {
    /// The inline keyboard's buttons as `(text, callback_data)`, row after row.
    pub fn buttons(&self) -> Vec<(String, String)> {
        self.reply_markup
            .as_ref()
            .and_then(|markup| markup["inline_keyboard"].as_array())
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .map(|button| {
                (
                    text(&button["text"]).unwrap_or_default(),
                    text(&button["callback_data"]).unwrap_or_default(),
                )
            })
            .collect()
    }
}

/// A file the bot uploaded (`sendDocument` or `sendPhoto`), read from its multipart body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadRecord {
    /// `senddocument` or `sendphoto`.
    pub method: String,
    /// `chat_id` as given.
    pub chat_id: String,
    /// `message_thread_id`, if any.
    pub message_thread_id: Option<i64>,
    /// `caption`, if any.
    pub caption: Option<String>,
    /// The form field the file came in (`document`, `photo`).
    pub field: String,
    /// The file part's `filename`.
    pub file_name: Option<String>,
    /// The file part's `Content-Type`.
    pub content_type: Option<String>,
    /// The file's bytes.
    pub data: Vec<u8>,
}

/// An edit the server applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditRecord {
    /// `chat_id` as given.
    pub chat_id: String,
    /// The edited message.
    pub message_id: i64,
    /// The new text exactly as sent.
    pub text: String,
    /// `parse_mode`, if any.
    pub parse_mode: Option<String>,
    /// `reply_markup` as sent: the keyboard the message keeps; `None` removes it.
    pub reply_markup: Option<Value>,
}

/// A `sendChatAction` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatActionRecord {
    /// `chat_id` as given.
    pub chat_id: String,
    /// `typing`, `upload_photo`, ...
    pub action: String,
    /// `message_thread_id`, if any.
    pub message_thread_id: Option<i64>,
}

/// A file the server serves through `getFile` and `/file/bot<token>/<path>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedFile {
    /// `Content-Type` of the download; `None` sends none.
    pub content_type: Option<String>,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// `file_size` in `getFile`; `None` leaves it out.
    pub declared_size: Option<u64>,
    /// `true`: `Content-Length` is sent; `false`: the body is chunked, so only the bytes
    /// received tell the size.
    pub content_length: bool,
}

impl ServedFile {
    /// `bytes` served honestly: declared size and `Content-Length` match.
    pub fn new(content_type: Option<&str>, bytes: Vec<u8>) -> ServedFile {
        ServedFile {
            content_type: content_type.map(str::to_owned),
            declared_size: Some(bytes.len() as u64),
            bytes,
            content_length: true,
        }
    }
}

/// What a scripted failure does.
#[derive(Debug, Clone)]
enum Failure {
    /// Answer with this status and JSON body.
    Answer(u16, Value),
    /// Close the connection without answering.
    Drop,
}

#[derive(Debug)]
struct HeldPoll {
    serial: u64,
    terminate: oneshot::Sender<()>,
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Value>,
    next_update_id: i64,
    held: Option<HeldPoll>,
    poll_serial: u64,
    conflicts: u64,
    next_failures: HashMap<String, VecDeque<Failure>>,
    always: HashMap<String, Failure>,
    calls: HashMap<String, Vec<Value>>,
    /// Current text and parse mode of every message the bot sent, by chat and id.
    messages: HashMap<(String, i64), (String, Option<String>)>,
    next_message_id: i64,
    sent: Vec<SentRecord>,
    uploads: Vec<UploadRecord>,
    edited: Vec<EditRecord>,
    actions: Vec<ChatActionRecord>,
    callback_answers: Vec<CallbackAnswerRecord>,
    reactions: Vec<ReactionRecord>,
    drafts: Vec<DraftRecord>,
    files: HashMap<String, (String, ServedFile)>,
    next_file: u64,
    webhook: Option<String>,
    token: String,
    /// Supergroups declared with [`BotApiServer::add_group`], by chat id; private chats
    /// with topics, by the user's id, once the bot made one there.
    groups: HashMap<String, FakeGroup>,
    /// Threaded Mode: topics in private chats are on for the bot.
    private_topics: bool,
}

/// A supergroup the tests declared: whether it is a forum, whether the bot may manage its
/// topics, and its topics by `message_thread_id`.
#[derive(Debug, Default)]
struct FakeGroup {
    is_forum: bool,
    can_manage_topics: bool,
    topics: std::collections::BTreeMap<i64, ForumTopicRecord>,
}

/// A forum topic on the server, as the tests see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForumTopicRecord {
    /// Its `message_thread_id`.
    pub message_thread_id: i64,
    /// Its current name.
    pub name: String,
    /// Closed with `closeForumTopic` (and not reopened).
    pub closed: bool,
}

#[derive(Debug)]
struct Inner {
    bot: Value,
    state: Mutex<State>,
    /// Woken on every request, answer and scripted change: [`BotApiServer::wait_until`].
    changed: Notify,
    /// Woken when updates are queued: held polls.
    updates: Notify,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock must not hide its own failure
        // behind a poison error in the server.
        lock(&self.state)
    }
}

/// The loopback Bot API server. Dropping it stops it.
#[derive(Debug)]
pub struct BotApiServer {
    inner: Arc<Inner>,
    address: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for BotApiServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl BotApiServer {
    /// A server for [`TEST_TOKEN`] and the bot `@piBot` (id 999).
    pub async fn start() -> BotApiServer {
        BotApiServer::start_with(TEST_TOKEN, TEST_BOT_ID, TEST_BOT_USERNAME).await
    }

    /// A server that accepts `token` and answers `getMe` with bot `bot_id` `@username`.
    /// Panics when no loopback port can be bound (a test environment problem).
    pub async fn start_with(token: &str, bot_id: i64, username: &str) -> BotApiServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the Bot API server");
        let address = listener.local_addr().expect("the bound address");
        let inner = Arc::new(Inner {
            bot: json!({
                "id": bot_id,
                "is_bot": true,
                "first_name": "Pi",
                "username": username,
                "can_join_groups": true,
                "can_read_all_group_messages": false,
                "supports_inline_queries": false
            }),
            state: Mutex::new(State {
                next_update_id: 1,
                next_message_id: 1,
                token: token.to_owned(),
                ..State::default()
            }),
            changed: Notify::new(),
            updates: Notify::new(),
        });
        let accept = tokio::spawn(accept_loop(listener, inner.clone()));
        BotApiServer {
            inner,
            address,
            accept,
        }
    }

    /// `http://127.0.0.1:<port>`: the transport's `baseUrl`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The token the server accepts.
    pub fn token(&self) -> String {
        self.inner.state().token.clone()
    }

    /// The bot's id.
    pub fn bot_id(&self) -> i64 {
        self.inner.bot["id"].as_i64().unwrap_or_default()
    }

    /// The bot's user name.
    pub fn bot_username(&self) -> String {
        self.inner.bot["username"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn changed(&self) {
        self.inner.changed.notify_waiters();
    }

    /// Queues an update for `getUpdates` and wakes a held poll. Without an `update_id`
    /// the next one in sequence is given; returns the update's id.
    pub fn queue_update(&self, mut update: Value) -> i64 {
        let id = {
            let mut state = self.inner.state();
            let id = match update.get("update_id").and_then(Value::as_i64) {
                Some(id) => id,
                None => state.next_update_id,
            };
            state.next_update_id = state.next_update_id.max(id.saturating_add(1));
            if let Some(fields) = update.as_object_mut() {
                fields.insert("update_id".to_owned(), json!(id));
            }
            state.queue.push_back(update);
            id
        };
        self.inner.updates.notify_waiters();
        self.changed();
        id
    }

    /// Updates not yet confirmed by an `offset` past them.
    pub fn pending_updates(&self) -> usize {
        self.inner.state().queue.len()
    }

    /// The next call of `method` (case-insensitive) answers `status` with `body`.
    /// Several calls queue up, one per call.
    pub fn fail_next(&self, method: &str, status: u16, body: Value) {
        self.push_failure(method, Failure::Answer(status, body));
    }

    /// The next call of `method` gets its connection closed without an answer.
    pub fn drop_next(&self, method: &str) {
        self.push_failure(method, Failure::Drop);
    }

    fn push_failure(&self, method: &str, failure: Failure) {
        self.inner
            .state()
            .next_failures
            .entry(method.to_ascii_lowercase())
            .or_default()
            .push_back(failure);
        self.changed();
    }

    /// Every later call of `method` answers `status` with `body` (until [`Self::clear_failures`]).
    pub fn fail_always(&self, method: &str, status: u16, body: Value) {
        self.inner
            .state()
            .always
            .insert(method.to_ascii_lowercase(), Failure::Answer(status, body));
        self.changed();
    }

    /// Forgets every scripted failure.
    pub fn clear_failures(&self) {
        let mut state = self.inner.state();
        state.always.clear();
        state.next_failures.clear();
    }

    /// From now on only `token` is accepted (the old one gets 401, like a revoked token).
    pub fn change_token(&self, token: &str) {
        self.inner.state().token = token.to_owned();
        self.changed();
    }

    /// Sets (`Some`) or removes a webhook; while one is set `getUpdates` answers 409.
    pub fn set_webhook(&self, url: Option<&str>) {
        self.inner.state().webhook = url.map(str::to_owned);
        self.changed();
    }

    /// Serves `file` under `file_id`; its download path is made up by the server.
    pub fn serve_file(&self, file_id: &str, file: ServedFile) {
        let mut state = self.inner.state();
        state.next_file += 1;
        let path = format!("documents/file_{}.bin", state.next_file);
        state.files.insert(file_id.to_owned(), (path, file));
    }

    /// Declares supergroup `chat_id`: a forum (topics on) or not, and whether the bot is an
    /// admin with `can_manage_topics` there. Topic calls on a chat not declared answer
    /// "chat not found", as Telegram does for a chat the bot is not in.
    pub fn add_group(&self, chat_id: i64, is_forum: bool, can_manage_topics: bool) {
        self.inner.state().groups.insert(
            chat_id.to_string(),
            FakeGroup {
                is_forum,
                can_manage_topics,
                topics: std::collections::BTreeMap::new(),
            },
        );
        self.changed();
    }

    /// Turns topics in private chats on or off for the bot (@BotFather's Threaded Mode):
    /// what `getMe` says and whether `createForumTopic` works in a user's private chat.
    pub fn set_private_topics(&self, on: bool) {
        self.inner.state().private_topics = on;
        self.changed();
    }

    /// Gives (or takes) the bot's right to manage topics in declared group `chat_id`.
    pub fn set_can_manage_topics(&self, chat_id: i64, can: bool) {
        if let Some(group) = self.inner.state().groups.get_mut(&chat_id.to_string()) {
            group.can_manage_topics = can;
        }
        self.changed();
    }

    /// The topics of declared group `chat_id`, by `message_thread_id`.
    pub fn topics(&self, chat_id: i64) -> Vec<ForumTopicRecord> {
        self.inner
            .state()
            .groups
            .get(&chat_id.to_string())
            .map(|group| group.topics.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Deletes a topic, as a person does by hand: later calls naming it answer "message
    /// thread not found".
    pub fn delete_topic(&self, chat_id: i64, message_thread_id: i64) {
        if let Some(group) = self.inner.state().groups.get_mut(&chat_id.to_string()) {
            group.topics.remove(&message_thread_id);
        }
        self.changed();
    }

    /// How often `method` (case-insensitive) was called, failed calls included.
    pub fn calls(&self, method: &str) -> usize {
        self.inner
            .state()
            .calls
            .get(&method.to_ascii_lowercase())
            .map_or(0, Vec::len)
    }

    /// The parameters of every call of `method`, oldest first.
    pub fn requests(&self, method: &str) -> Vec<Value> {
        self.inner
            .state()
            .calls
            .get(&method.to_ascii_lowercase())
            .cloned()
            .unwrap_or_default()
    }

    /// Messages the bot sent, oldest first.
    pub fn sent(&self) -> Vec<SentRecord> {
        self.inner.state().sent.clone()
    }

    /// Files uploaded (`sendDocument`, `sendPhoto`), oldest first.
    pub fn uploads(&self) -> Vec<UploadRecord> {
        self.inner.state().uploads.clone()
    }

    /// Edits applied, oldest first.
    pub fn edited(&self) -> Vec<EditRecord> {
        self.inner.state().edited.clone()
    }

    /// Chat actions, oldest first.
    pub fn chat_actions(&self) -> Vec<ChatActionRecord> {
        self.inner.state().actions.clone()
    }

    /// `answerCallbackQuery` calls accepted, oldest first.
    pub fn callback_answers(&self) -> Vec<CallbackAnswerRecord> {
        self.inner.state().callback_answers.clone()
    }

    /// `sendMessageDraft` calls accepted, oldest first.
    pub fn drafts(&self) -> Vec<DraftRecord> {
        self.inner.state().drafts.clone()
    }

    /// `setMessageReaction` calls accepted, oldest first.
    pub fn reactions(&self) -> Vec<ReactionRecord> {
        self.inner.state().reactions.clone()
    }

    /// Whether a long poll is being held open right now.
    pub fn poll_held(&self) -> bool {
        self.inner.state().held.is_some()
    }

    /// Polls terminated with 409 because a newer one arrived.
    pub fn conflicts(&self) -> u64 {
        self.inner.state().conflicts
    }

    /// Waits until `done(self)` holds or `timeout` passes; returns whether it held.
    /// Re-checked after every request and every scripted change, so tests wait for the
    /// transport's asynchronous work without sleeping.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&BotApiServer) -> bool,
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

async fn accept_loop(listener: TcpListener, inner: Arc<Inner>) {
    // Connections live in the set, so aborting the accept loop (dropping the server)
    // closes them too.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let inner = inner.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let inner = inner.clone();
                async move { handle(inner, request).await }
            });
            // A connection the client drops, or one the server drops on purpose, ends here.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
        // Reap finished connections so the set does not grow for ever.
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

fn json_answer(status: u16, body: &Value) -> Answer {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

fn ok(result: Value) -> Answer {
    json_answer(200, &json!({"ok": true, "result": result}))
}

fn bad_request(description: &str) -> Answer {
    json_answer(
        400,
        &error_body(400, &format!("Bad Request: {description}")),
    )
}

/// A body that sends its bytes in pieces without a length: hyper then uses chunked
/// encoding, so a client can only learn the size by counting what it receives.
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

async fn handle(inner: Arc<Inner>, request: Request<Incoming>) -> Result<Answer, Dropped> {
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let content_type = request
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = request
        .into_body()
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    let answer = route(&inner, &path, &query, &content_type, &body).await;
    inner.changed.notify_waiters();
    answer
}

async fn route(
    inner: &Arc<Inner>,
    path: &str,
    query: &str,
    content_type: &str,
    body: &[u8],
) -> Result<Answer, Dropped> {
    let token = inner.state().token.clone();
    if let Some(rest) = path.strip_prefix("/file/bot") {
        let Some(file_path) = rest.strip_prefix(&format!("{token}/")) else {
            return Ok(json_answer(401, &error_body(401, "Unauthorized")));
        };
        return Ok(download(inner, file_path));
    }
    let Some(rest) = path.strip_prefix("/bot") else {
        return Ok(json_answer(404, &error_body(404, "Not Found")));
    };
    let Some((given, method)) = rest.rsplit_once('/') else {
        return Ok(json_answer(404, &error_body(404, "Not Found")));
    };
    if given != token {
        return Ok(json_answer(401, &error_body(401, "Unauthorized")));
    }
    let method = method.to_ascii_lowercase();
    let params = parameters(query, content_type, body);
    let failure = {
        let mut state = inner.state();
        state
            .calls
            .entry(method.clone())
            .or_default()
            .push(params.clone());
        let next = state
            .next_failures
            .get_mut(&method)
            .and_then(VecDeque::pop_front);
        next.or_else(|| state.always.get(&method).cloned())
    };
    inner.changed.notify_waiters();
    match failure {
        Some(Failure::Answer(status, body)) => return Ok(json_answer(status, &body)),
        Some(Failure::Drop) => return Err(Dropped),
        None => {}
    }
    Ok(match method.as_str() {
        "getme" => {
            let mut me = inner.bot.clone();
            let on = inner.state().private_topics;
            me["has_topics_enabled"] = json!(on);
            me["allows_users_to_create_topics"] = json!(on);
            ok(me)
        }
        "getupdates" => get_updates(inner, &params).await,
        "sendmessage" => send_message(inner, &params),
        "editmessagetext" => edit_message_text(inner, &params),
        "sendchataction" => send_chat_action(inner, &params),
        "answercallbackquery" => answer_callback_query(inner, &params),
        "setmessagereaction" => set_message_reaction(inner, &params),
        "sendmessagedraft" => send_message_draft(inner, &params),
        "getfile" => get_file(inner, &params),
        "createforumtopic" => create_forum_topic(inner, &params),
        "editforumtopic" | "closeforumtopic" | "reopenforumtopic" => {
            change_forum_topic(inner, &method, &params)
        }
        "senddocument" => upload(inner, "senddocument", "document", content_type, body),
        "sendphoto" => upload(inner, "sendphoto", "photo", content_type, body),
        "deletewebhook" => {
            inner.state().webhook = None;
            ok(json!(true))
        }
        "setwebhook" => {
            inner.state().webhook = text(&params["url"]);
            ok(json!(true))
        }
        _ => json_answer(404, &error_body(404, "Not Found: method not found")),
    })
}

/// The call's parameters from the query string and the body (JSON or form). Form and
/// query values are strings on the wire; JSON-looking ones (`5`, `["message"]`) are read
/// as JSON, as the Bot API does.
fn parameters(query: &str, content_type: &str, body: &[u8]) -> Value {
    let mut params = serde_json::Map::new();
    let mut form = |bytes: &[u8]| {
        for (key, value) in form_urlencoded::parse(bytes) {
            let value = serde_json::from_str::<Value>(&value)
                .ok()
                .filter(|parsed| !parsed.is_string())
                .unwrap_or_else(|| Value::String(value.into_owned()));
            params.insert(key.into_owned(), value);
        }
    };
    form(query.as_bytes());
    if content_type.starts_with("application/x-www-form-urlencoded") {
        form(body);
    } else if content_type.starts_with("multipart/form-data") {
        // The text fields only; a file part is read by the method that takes it.
        for part in crate::multipart::parse(content_type, body).unwrap_or_default() {
            if part.file_name.is_none() {
                params.insert(part.name.clone(), Value::String(part.text()));
            }
        }
    } else if let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) {
        params.extend(fields);
    }
    Value::Object(params)
}

fn chat_key(value: &Value) -> Option<String> {
    match value {
        Value::Number(number) => Some(number.to_string()),
        Value::String(text) if !text.is_empty() => Some(text.clone()),
        _ => None,
    }
}

/// A string parameter; a form value that looked like a number (`text=7`) is still text.
fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

fn integer(value: &Value) -> Option<i64> {
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|text| text.parse().ok()))
}

async fn get_updates(inner: &Arc<Inner>, params: &Value) -> Answer {
    let offset = integer(&params["offset"]);
    let limit = integer(&params["limit"]).unwrap_or(100).clamp(1, 100) as usize;
    let timeout = integer(&params["timeout"]).unwrap_or(0).max(0) as u64;
    let (serial, terminated, woken) = {
        let mut state = inner.state();
        if state.webhook.is_some() {
            return json_answer(409, &error_body(409, WEBHOOK_CONFLICT_DESCRIPTION));
        }
        confirm(&mut state, offset);
        // A newer poll ends the held one with 409, as Telegram does.
        if let Some(held) = state.held.take() {
            state.conflicts += 1;
            let _ = held.terminate.send(());
        }
        let ready: Vec<Value> = state.queue.iter().take(limit).cloned().collect();
        if !ready.is_empty() || timeout == 0 {
            return ok(Value::Array(ready));
        }
        let (terminate, terminated) = oneshot::channel();
        state.poll_serial += 1;
        let serial = state.poll_serial;
        state.held = Some(HeldPoll { serial, terminate });
        let woken = inner.updates.notified();
        (serial, terminated, woken)
    };
    inner.changed.notify_waiters();
    let mut woken = Box::pin(woken);
    woken.as_mut().enable();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let mut terminated = terminated;
    loop {
        tokio::select! {
            _ = &mut terminated => {
                return json_answer(409, &error_body(409, CONFLICT_DESCRIPTION));
            }
            () = tokio::time::sleep_until(deadline) => {
                release(inner, serial);
                return ok(json!([]));
            }
            () = &mut woken => {
                let ready: Vec<Value> = {
                    let state = inner.state();
                    state.queue.iter().take(limit).cloned().collect()
                };
                if !ready.is_empty() {
                    release(inner, serial);
                    return ok(Value::Array(ready));
                }
                woken = Box::pin(inner.updates.notified());
                woken.as_mut().enable();
            }
        }
    }
}

/// Forgets the updates an `offset` confirms.
fn confirm(state: &mut State, offset: Option<i64>) {
    match offset {
        Some(offset) if offset >= 0 => state
            .queue
            .retain(|update| update["update_id"].as_i64().is_none_or(|id| id >= offset)),
        Some(negative) => {
            let keep = usize::try_from(negative.unsigned_abs()).unwrap_or(usize::MAX);
            while state.queue.len() > keep {
                state.queue.pop_front();
            }
        }
        None => {}
    }
}

fn release(inner: &Inner, serial: u64) {
    let mut state = inner.state();
    if state
        .held
        .as_ref()
        .is_some_and(|held| held.serial == serial)
    {
        state.held = None;
    }
}

/// Telegram's HTML check (docs/protocols.md#telegram-html): supported tags only, properly
/// nested, the four named entities and numeric ones. Returns the visible text, or the
/// reason Telegram gives after "can't parse entities: ".
pub fn parse_telegram_html(html: &str) -> Result<String, String> {
    const TAGS: &[&str] = &[
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "a",
        "tg-emoji",
        "tg-time",
        "code",
        "pre",
        "blockquote",
    ];
    let mut visible = String::new();
    let mut open: Vec<String> = Vec::new();
    let mut index = 0;
    while index < html.len() {
        let rest = &html[index..];
        let Some(c) = rest.chars().next() else { break };
        if c == '<' {
            let Some(end) = rest.find('>') else {
                return Err(format!("Unclosed start tag at byte offset {index}"));
            };
            let tag = &rest[1..end];
            if let Some(name) = tag.strip_prefix('/') {
                let name = name.trim().to_ascii_lowercase();
                if open.last() != Some(&name) {
                    return Err(format!("Unexpected end tag at byte offset {index}"));
                }
                open.pop();
            } else {
                let name = tag
                    .split(|c: char| c.is_whitespace())
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                if !TAGS.contains(&name.as_str()) {
                    return Err(format!(
                        "Unsupported start tag \"{name}\" at byte offset {index}"
                    ));
                }
                open.push(name);
            }
            index += end + 1;
        } else if c == '&' {
            let entity_end = rest.find(';').filter(|end| *end <= 10);
            match entity_end.map(|end| &rest[1..end]) {
                Some("lt") => visible.push('<'),
                Some("gt") => visible.push('>'),
                Some("amp") => visible.push('&'),
                Some("quot") => visible.push('"'),
                Some(numeric) if numeric.starts_with('#') => {
                    let code = numeric
                        .strip_prefix("#x")
                        .or_else(|| numeric.strip_prefix("#X"))
                        .map_or_else(
                            || numeric[1..].parse().ok(),
                            |hex| u32::from_str_radix(hex, 16).ok(),
                        );
                    match code.and_then(char::from_u32) {
                        Some(decoded) => visible.push(decoded),
                        None => {
                            return Err(format!("Unsupported HTML entity at byte offset {index}"));
                        }
                    }
                }
                Some(name)
                    if name.chars().all(|c| c.is_ascii_alphanumeric()) && !name.is_empty() =>
                {
                    return Err(format!(
                        "Unsupported HTML entity \"&{name};\" at byte offset {index}"
                    ));
                }
                // A bare `&` is taken literally.
                _ => {
                    visible.push('&');
                    index += 1;
                    continue;
                }
            }
            index += entity_end.map_or(1, |end| end + 1);
        } else {
            visible.push(c);
            index += c.len_utf8();
        }
    }
    match open.last() {
        Some(name) => Err(format!(
            "Can't find end tag corresponding to start tag \"{name}\""
        )),
        None => Ok(visible),
    }
}

/// The visible text of a message, or the reason for the 400 Telegram gives
/// (after "Bad Request: ").
fn visible_text(text: &str, parse_mode: Option<&str>) -> Result<String, String> {
    let visible = match parse_mode.map(str::to_ascii_lowercase).as_deref() {
        Some("html") => {
            parse_telegram_html(text).map_err(|reason| format!("can't parse entities: {reason}"))?
        }
        _ => text.to_owned(),
    };
    if visible.trim().is_empty() {
        return Err("message text is empty".to_owned());
    }
    if visible.encode_utf16().count() > 4096 {
        return Err("message is too long".to_owned());
    }
    Ok(visible)
}

fn message_json(
    inner: &Inner,
    chat_id: &Value,
    message_id: i64,
    text: &str,
    thread: Option<i64>,
) -> Value {
    let mut message = json!({
        "message_id": message_id,
        "from": inner.bot,
        "chat": {"id": chat_id, "type": "private"},
        "date": 1_700_000_000,
        "text": text
    });
    if let Some(thread) = thread {
        message["message_thread_id"] = json!(thread);
        message["is_topic_message"] = json!(true);
    }
    message
}

/// `sendDocument` / `sendPhoto`: a multipart form with `chat_id`, optional
/// `message_thread_id` and `caption`, and the file under `field` (as the Bot API takes
/// "multipart/form-data" uploads). A form without the file, or not multipart, is refused
/// with 400 as Telegram does.
fn upload(inner: &Inner, method: &str, field: &str, content_type: &str, body: &[u8]) -> Answer {
    let parts = match crate::multipart::parse(content_type, body) {
        Ok(parts) => parts,
        Err(reason) => return bad_request(&format!("the upload is not a valid form: {reason}")),
    };
    let value = |name: &str| {
        parts
            .iter()
            .find(|p| p.name == name && p.file_name.is_none())
            .map(crate::multipart::Part::text)
    };
    let Some(chat) = value("chat_id").filter(|c| !c.is_empty()) else {
        return bad_request("chat_id is empty");
    };
    let Some(file) = parts
        .iter()
        .find(|p| p.name == field && p.file_name.is_some())
    else {
        return bad_request(&format!("there is no file in the request (field {field})"));
    };
    let caption = value("caption");
    if caption.as_ref().is_some_and(|c| c.chars().count() > 1024) {
        return bad_request("message caption is too long");
    }
    let thread = value("message_thread_id").and_then(|t| t.parse::<i64>().ok());
    if let Some(refused) = missing_thread(inner, &chat, thread) {
        return refused;
    }
    let message_id = {
        let mut state = inner.state();
        let message_id = state.next_message_id;
        state.next_message_id += 1;
        state.uploads.push(UploadRecord {
            method: method.to_owned(),
            chat_id: chat.clone(),
            message_thread_id: thread,
            caption: caption.clone(),
            field: field.to_owned(),
            file_name: file.file_name.clone(),
            content_type: file.content_type.clone(),
            data: file.data.clone(),
        });
        message_id
    };
    let chat_value = chat
        .parse::<i64>()
        .map_or_else(|_| Value::String(chat.clone()), Value::from);
    ok(message_json(
        inner,
        &chat_value,
        message_id,
        caption.as_deref().unwrap_or(""),
        thread,
    ))
}

fn send_message(inner: &Inner, params: &Value) -> Answer {
    let Some(chat) = chat_key(&params["chat_id"]) else {
        return bad_request("chat_id is empty");
    };
    let parse_mode = text(&params["parse_mode"]);
    let text = text(&params["text"]).unwrap_or_default();
    let visible = match visible_text(&text, parse_mode.as_deref()) {
        Ok(visible) => visible,
        Err(reason) => return bad_request(&reason),
    };
    let thread = integer(&params["message_thread_id"]);
    if let Some(refused) = missing_thread(inner, &chat, thread) {
        return refused;
    }
    let reply_markup = match reply_markup(&params["reply_markup"]) {
        Ok(markup) => markup,
        Err(reason) => return bad_request(reason),
    };
    let message_id = {
        let mut state = inner.state();
        let message_id = state.next_message_id;
        state.next_message_id += 1;
        state.messages.insert(
            (chat.clone(), message_id),
            (text.clone(), parse_mode.clone()),
        );
        state.sent.push(SentRecord {
            chat_id: chat,
            message_id,
            text,
            parse_mode,
            message_thread_id: thread,
            reply_markup,
            reply_to: integer(&params["reply_parameters"]["message_id"]),
        });
        message_id
    };
    ok(message_json(
        inner,
        &params["chat_id"],
        message_id,
        &visible,
        thread,
    ))
}

/// Telegram's answer to a message into a topic of a declared forum that does not exist
/// (deleted by hand); `None` when the thread is there or the chat is not declared.
fn missing_thread(inner: &Inner, chat: &str, thread: Option<i64>) -> Option<Answer> {
    let thread = thread?;
    let state = inner.state();
    let group = state.groups.get(chat).filter(|group| group.is_forum)?;
    (!group.topics.contains_key(&thread)).then(|| bad_request("message thread not found"))
}

/// The declared group of `params["chat_id"]` for a topic call, or the description of
/// Telegram's refusal (a 400): "chat not found" (not declared: the bot is not in it), "the
/// chat is not a forum", "not enough rights to manage topics" (the bot is no admin with
/// `can_manage_topics`).
fn forum<'a>(state: &'a mut State, params: &Value) -> Result<&'a mut FakeGroup, &'static str> {
    let chat = chat_key(&params["chat_id"]).ok_or("chat_id is empty")?;
    if chat.parse::<i64>().is_ok_and(|id| id > 0) {
        // A user's private chat with the bot: a forum only in Threaded Mode.
        if !state.private_topics {
            return Err("the chat is not a forum");
        }
        return Ok(state.groups.entry(chat).or_insert_with(|| FakeGroup {
            is_forum: true,
            can_manage_topics: true,
            topics: std::collections::BTreeMap::new(),
        }));
    }
    let group = state.groups.get_mut(&chat).ok_or("chat not found")?;
    if !group.is_forum {
        return Err("the chat is not a forum");
    }
    if !group.can_manage_topics {
        return Err("not enough rights to manage topics");
    }
    Ok(group)
}

/// `createForumTopic`: `name` of 1–128 characters; the topic's id is a message id (its
/// `forum_topic_created` service message's), returned as a `ForumTopic`.
fn create_forum_topic(inner: &Inner, params: &Value) -> Answer {
    let name = text(&params["name"]).unwrap_or_default();
    if name.is_empty() || name.chars().count() > 128 {
        return bad_request("TOPIC_NAME_INVALID");
    }
    let mut state = inner.state();
    let thread = state.next_message_id;
    let group = match forum(&mut state, params) {
        Ok(group) => group,
        Err(refused) => return bad_request(refused),
    };
    group.topics.insert(
        thread,
        ForumTopicRecord {
            message_thread_id: thread,
            name: name.clone(),
            closed: false,
        },
    );
    state.next_message_id += 1;
    ok(json!({"message_thread_id": thread, "name": name, "icon_color": 7_322_096}))
}

/// `editForumTopic` (a new `name`), `closeForumTopic`, `reopenForumTopic`: "message thread
/// not found" for a topic that is not there, `TOPIC_NOT_MODIFIED` for a change that
/// changes nothing, as Telegram answers.
fn change_forum_topic(inner: &Inner, method: &str, params: &Value) -> Answer {
    let private = chat_key(&params["chat_id"])
        .and_then(|chat| chat.parse::<i64>().ok())
        .is_some_and(|id| id > 0);
    if private && method != "editforumtopic" {
        // The Bot API documents closing and reopening for forum supergroups only; its
        // refusal in a private chat is not documented, so this one says it in its own words.
        return bad_request("this method works in forum supergroups only, not a private chat");
    }
    let mut state = inner.state();
    let group = match forum(&mut state, params) {
        Ok(group) => group,
        Err(refused) => return bad_request(refused),
    };
    let Some(topic) = integer(&params["message_thread_id"]).and_then(|t| group.topics.get_mut(&t))
    else {
        return bad_request("message thread not found");
    };
    let changed = match method {
        "editforumtopic" => match text(&params["name"]) {
            Some(name) if name.is_empty() || name.chars().count() > 128 => {
                return bad_request("TOPIC_NAME_INVALID");
            }
            Some(name) if name != topic.name => {
                topic.name = name;
                true
            }
            _ => false,
        },
        "closeforumtopic" => !std::mem::replace(&mut topic.closed, true),
        _ => std::mem::replace(&mut topic.closed, false),
    };
    if changed {
        ok(json!(true))
    } else {
        bad_request("TOPIC_NOT_MODIFIED")
    }
}

/// A text message from `user_id` in topic `thread` of their private chat with the bot, as
/// Telegram sends it (Bot API 9.3): `message_thread_id` and `is_topic_message` in a chat of
/// type `private`.
pub fn private_topic_text(user_id: i64, thread: i64, message_id: i64, text: &str) -> Value {
    json!({
        "message": {
            "message_id": message_id,
            "message_thread_id": thread,
            "is_topic_message": true,
            "from": user(user_id, "Ada"),
            "chat": {"id": user_id, "first_name": "Ada", "type": "private"},
            "date": 1_700_000_000,
            "text": text
        }
    })
}

/// A text message from `user_id` in topic `thread` of forum supergroup `chat_id`, as
/// Telegram sends it: `message_thread_id`, `is_topic_message`, and `reply_to_message` the
/// topic's `forum_topic_created` service message (every message in a topic carries it).
pub fn topic_text(chat_id: i64, thread: i64, user_id: i64, message_id: i64, text: &str) -> Value {
    json!({
        "message": {
            "message_id": message_id,
            "message_thread_id": thread,
            "is_topic_message": true,
            "from": user(user_id, "Ada"),
            "chat": {"id": chat_id, "title": "Sessions", "type": "supergroup", "is_forum": true},
            "date": 1_700_000_000,
            "text": text,
            "reply_to_message": {
                "message_id": thread,
                "message_thread_id": thread,
                "chat": {"id": chat_id, "title": "Sessions", "type": "supergroup", "is_forum": true},
                "date": 1_700_000_000,
                "forum_topic_created": {"name": "topic", "icon_color": 7_322_096}
            }
        }
    })
}

/// `sendMessageDraft`: a private chat (a positive id), a non-zero `draft_id`, text that
/// parses like `sendMessage`'s. Telegram documents the chat as "the target private chat";
/// its exact refusal for another is not documented, so this one says it in its own words.
fn send_message_draft(inner: &Inner, params: &Value) -> Answer {
    let Some(chat) = integer(&params["chat_id"]).filter(|id| *id > 0) else {
        return bad_request("drafts can be sent to private chats only");
    };
    let Some(draft_id) = integer(&params["draft_id"]).filter(|id| *id != 0) else {
        return bad_request("draft_id must be non-zero");
    };
    let parse_mode = text(&params["parse_mode"]);
    let text = text(&params["text"]).unwrap_or_default();
    if let Err(reason) = visible_text(&text, parse_mode.as_deref()) {
        return bad_request(&reason);
    }
    inner.state().drafts.push(DraftRecord {
        chat_id: chat,
        draft_id,
        text,
        message_thread_id: integer(&params["message_thread_id"]),
    });
    inner.changed.notify_waiters();
    ok(json!(true))
}

/// `setMessageReaction`: the list replaces the bot's reactions on the message; a bot may
/// leave at most one, and only an emoji from Telegram's list.
fn set_message_reaction(inner: &Inner, params: &Value) -> Answer {
    let (Some(chat), Some(message_id)) =
        (chat_key(&params["chat_id"]), integer(&params["message_id"]))
    else {
        return bad_request("message to react not found");
    };
    let reactions = match &params["reaction"] {
        Value::Null => Vec::new(),
        Value::Array(list) => list.clone(),
        _ => return bad_request("can't parse reaction types JSON object"),
    };
    if reactions.len() > 1 {
        return bad_request("REACTIONS_TOO_MANY");
    }
    let mut emoji = Vec::new();
    for reaction in &reactions {
        match (text(&reaction["type"]).as_deref(), text(&reaction["emoji"])) {
            (Some("emoji"), Some(e)) if REACTION_EMOJI.contains(&e.as_str()) => emoji.push(e),
            _ => return bad_request("REACTION_INVALID"),
        }
    }
    inner.state().reactions.push(ReactionRecord {
        chat_id: chat,
        message_id,
        emoji,
    });
    // Waiters re-read on a change: the call was counted before its reaction was kept.
    inner.changed.notify_waiters();
    ok(json!(true))
}

fn edit_message_text(inner: &Inner, params: &Value) -> Answer {
    let (Some(chat), Some(message_id)) =
        (chat_key(&params["chat_id"]), integer(&params["message_id"]))
    else {
        return bad_request("message to edit not found");
    };
    let parse_mode = text(&params["parse_mode"]);
    let text = text(&params["text"]).unwrap_or_default();
    let visible = match visible_text(&text, parse_mode.as_deref()) {
        Ok(visible) => visible,
        Err(reason) => return bad_request(&reason),
    };
    let reply_markup = match reply_markup(&params["reply_markup"]) {
        Ok(markup) => markup,
        Err(reason) => return bad_request(reason),
    };
    let mut state = inner.state();
    let Some(current) = state.messages.get(&(chat.clone(), message_id)) else {
        return bad_request("message to edit not found");
    };
    if current == &(text.clone(), parse_mode.clone()) {
        return json_answer(400, &error_body(400, NOT_MODIFIED_DESCRIPTION));
    }
    state.messages.insert(
        (chat.clone(), message_id),
        (text.clone(), parse_mode.clone()),
    );
    state.edited.push(EditRecord {
        chat_id: chat,
        message_id,
        text,
        parse_mode,
        reply_markup,
    });
    drop(state);
    ok(message_json(
        inner,
        &params["chat_id"],
        message_id,
        &visible,
        None,
    ))
}

/// Checks `reply_markup` as Telegram does for an inline keyboard: an array of rows of
/// buttons, each with a non-empty `text` and 1–64 bytes of `callback_data`. Form-encoded
/// calls send it as JSON text.
fn reply_markup(value: &Value) -> Result<Option<Value>, &'static str> {
    let markup = match value {
        Value::Null => return Ok(None),
        Value::String(json) => serde_json::from_str(json)
            .map_err(|_| "can't parse reply keyboard markup JSON object")?,
        other => other.clone(),
    };
    let rows = markup["inline_keyboard"]
        .as_array()
        .ok_or("field \"inline_keyboard\" of the InlineKeyboardMarkup must be an Array")?;
    for row in rows {
        let buttons = row.as_array().ok_or(
            "field \"inline_keyboard\" of the InlineKeyboardMarkup must be an Array of Arrays",
        )?;
        for button in buttons {
            if text(&button["text"]).is_none_or(|label| label.is_empty()) {
                return Err("BUTTON_TEXT_EMPTY");
            }
            let data = text(&button["callback_data"]).unwrap_or_default();
            if data.is_empty() || data.len() > 64 {
                return Err("BUTTON_DATA_INVALID");
            }
        }
    }
    Ok(Some(markup))
}

fn answer_callback_query(inner: &Inner, params: &Value) -> Answer {
    let Some(id) = text(&params["callback_query_id"]).filter(|id| !id.is_empty()) else {
        return bad_request("query is too old and response timeout expired or query ID is invalid");
    };
    let notice = text(&params["text"]);
    if notice.as_ref().is_some_and(|t| t.chars().count() > 200) {
        return bad_request("MESSAGE_TOO_LONG");
    }
    let mut state = inner.state();
    // Telegram takes one answer per query; a second is refused as an invalid query.
    if state
        .callback_answers
        .iter()
        .any(|answer| answer.callback_query_id == id)
    {
        return bad_request("query is too old and response timeout expired or query ID is invalid");
    }
    state.callback_answers.push(CallbackAnswerRecord {
        callback_query_id: id,
        text: notice,
        show_alert: params["show_alert"].as_bool().unwrap_or(false),
    });
    ok(json!(true))
}

fn send_chat_action(inner: &Inner, params: &Value) -> Answer {
    let (Some(chat), Some(action)) = (chat_key(&params["chat_id"]), text(&params["action"])) else {
        return bad_request("chat_id and action are required");
    };
    inner.state().actions.push(ChatActionRecord {
        chat_id: chat,
        action,
        message_thread_id: integer(&params["message_thread_id"]),
    });
    ok(json!(true))
}

fn get_file(inner: &Inner, params: &Value) -> Answer {
    let file_id = text(&params["file_id"]).unwrap_or_default();
    let state = inner.state();
    let Some((path, file)) = state.files.get(&file_id) else {
        return bad_request("invalid file_id");
    };
    let mut result = json!({
        "file_id": file_id,
        "file_unique_id": format!("u-{file_id}"),
        "file_path": path
    });
    if let Some(size) = file.declared_size {
        result["file_size"] = json!(size);
    }
    ok(result)
}

fn download(inner: &Inner, file_path: &str) -> Answer {
    let state = inner.state();
    let Some((_, file)) = state.files.values().find(|(path, _)| path == file_path) else {
        return json_answer(404, &error_body(404, "Not Found: file not found"));
    };
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

/// The conformance kit's view of a Telegram transport that talks to a [`BotApiServer`]:
/// posted and edited texts as the server recorded them, failing sends with 403, inbound
/// messages as private-chat updates.
#[derive(Debug)]
pub struct ConformanceBotApi {
    /// The server the transport under test talks to.
    pub server: Arc<BotApiServer>,
    /// The chat messages are delivered from and sent to.
    pub chat_id: i64,
    token: String,
}

impl ConformanceBotApi {
    /// A view of `server`, with chat 4242.
    pub fn new(server: Arc<BotApiServer>) -> ConformanceBotApi {
        ConformanceBotApi {
            token: server.token(),
            server,
            chat_id: 4242,
        }
    }
}

#[async_trait]
impl ConformancePlatform for ConformanceBotApi {
    async fn posted(&self) -> Vec<String> {
        self.server
            .sent()
            .into_iter()
            .map(|sent| sent.text)
            .collect()
    }

    async fn edited(&self) -> Vec<String> {
        self.server
            .edited()
            .into_iter()
            .map(|edit| edit.text)
            .collect()
    }

    async fn fail_sends(&self) {
        self.server.fail_always(
            "sendMessage",
            403,
            error_body(403, "Forbidden: bot was blocked by the user"),
        );
    }

    async fn deliver(&self, text: &str) -> Result<(), String> {
        let message_id = i64::try_from(self.server.pending_updates()).unwrap_or(0) + 1;
        self.server
            .queue_update(private_text(self.chat_id, message_id, text));
        Ok(())
    }

    fn secret(&self) -> &str {
        &self.token
    }

    fn conversation_id(&self) -> String {
        self.chat_id.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_checked_like_telegram_checks_it() {
        let accepted = [
            ("<b>bold</b> &amp; <i>it</i>", "bold & it"),
            ("<a href=\"https://x.y/?a=1&amp;b=2\">link</a>", "link"),
            (
                "<pre><code class=\"language-rust\">a &lt; b</code></pre>",
                "a < b",
            ),
            ("<blockquote expandable>q</blockquote>", "q"),
            ("&#128512; &#x1F600; &quot;", "😀 😀 \""),
            ("a & b > c", "a & b > c"),
        ];
        for (html, visible) in accepted {
            assert_eq!(parse_telegram_html(html).as_deref(), Ok(visible), "{html}");
        }
        let refused = [
            ("<br>", "Unsupported start tag \"br\" at byte offset 0"),
            ("x <b>y</i>", "Unexpected end tag at byte offset 6"),
            (
                "<b>open",
                "Can't find end tag corresponding to start tag \"b\"",
            ),
            (
                "a &nbsp; b",
                "Unsupported HTML entity \"&nbsp;\" at byte offset 2",
            ),
            ("1 < 2", "Unclosed start tag at byte offset 2"),
        ];
        for (html, reason) in refused {
            assert_eq!(parse_telegram_html(html), Err(reason.to_owned()), "{html}");
        }
    }

    #[test]
    fn an_offset_confirms_the_updates_below_it_and_a_negative_one_keeps_the_last() {
        let mut state = State {
            queue: (1..=5).map(|id| json!({"update_id": id})).collect(),
            ..State::default()
        };
        confirm(&mut state, Some(3));
        assert_eq!(state.queue.len(), 3);
        confirm(&mut state, None);
        assert_eq!(state.queue.len(), 3);
        confirm(&mut state, Some(-1));
        assert_eq!(state.queue.front(), Some(&json!({"update_id": 5})));
    }

    #[test]
    fn parameters_come_from_json_forms_and_queries() {
        let params = parameters(
            "offset=5",
            "application/json",
            br#"{"chat_id": 42, "text": "hi"}"#,
        );
        assert_eq!(params, json!({"offset": 5, "chat_id": 42, "text": "hi"}));
        let params = parameters(
            "",
            "application/x-www-form-urlencoded",
            b"allowed_updates=%5B%22message%22%5D&chat_id=-100&text=007",
        );
        assert_eq!(params["allowed_updates"], json!(["message"]));
        assert_eq!(params["chat_id"], json!(-100));
        assert_eq!(text(&params["text"]).as_deref(), Some("007"));
    }

    #[tokio::test]
    async fn a_newer_long_poll_ends_the_held_one_with_409() {
        let server = BotApiServer::start().await;
        let inner = server.inner.clone();
        let held = tokio::spawn({
            let inner = inner.clone();
            async move { get_updates(&inner, &json!({"timeout": 30})).await }
        });
        assert!(
            server
                .wait_until(Duration::from_secs(10), BotApiServer::poll_held)
                .await
        );
        let newer = get_updates(&inner, &json!({"timeout": 0})).await;
        assert_eq!(newer.status(), 200);
        let held = held.await.expect("the held poll ends");
        assert_eq!(held.status(), 409);
        assert_eq!(server.conflicts(), 1);
    }
}
