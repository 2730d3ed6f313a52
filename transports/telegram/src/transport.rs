//! The Telegram transport itself: its configuration, the counters and offset it shares
//! with the long poll, and its [`transport_core::Transport`] implementation. The crate
//! root only lists the modules and re-exports what callers use.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use transport_core::capped::OverCap;
use transport_core::download::served_media_type;
use transport_core::jitter::{self, Jitter};
use transport_core::platform::BotSelf;
use transport_core::presses::Presses;
use transport_core::retry::RetryPolicy;
use transport_core::sync::lock;
use transport_core::{
    BotIdentity, Button, Capabilities, FetchedAttachment, InboundSink, LengthUnit, Markup,
    OutboundFile, OutboundMessage, Reaction, Secret, SendReceipt, Topic, TopicError, TopicNaming,
    Transport, TransportError, own_message_id,
};

use crate::client::{
    ApiError, BotApi, ClientSettings, DownloadError, Upload, looks_like_bot_token,
};
use crate::listen::Listener;
use crate::normalize::TRANSPORT_ID;
use crate::offset::{Offset, OffsetStore};
use crate::state::{PollState, Shared, Stats};
use crate::wire::ChatId;
use crate::{html, keyboard, listen, settings};

/// The most a bot may upload (the Bot API: "Bots can currently send files of any type of
/// up to 50 MB in size").
pub const UPLOAD_LIMIT: u64 = 50 * 1024 * 1024;

/// The most `sendPhoto` takes ("The photo must be at most 10 MB in size").
pub const PHOTO_LIMIT: u64 = 10 * 1024 * 1024;

/// What Telegram can do (docs/architecture.md#transports-and-their-shared-core): 4096
/// UTF-16 units of rendered text (safe whether Telegram counts code points or UTF-16 units,
/// docs/protocols.md#telegram-the-4096-limit), Telegram HTML, forum topics, edits,
/// attachments, typing, reactions (`setMessageReaction`).
pub const CAPABILITIES: Capabilities = Capabilities {
    threads: true,
    edit: true,
    attachments: true,
    typing: true,
    max_message_length: 4096,
    length_unit: LengthUnit::Utf16,
    markup: Markup::Html,
    reactions: true,
    // `sendMessageDraft`, in private chats only.
    drafts: true,
};

/// Telegram takes only emoji from its own list as a bot's reaction (`ReactionTypeEmoji`;
/// ✅ and ❌ are not on it, `REACTION_INVALID`), so done and failed are 👍 and 👎.
pub fn reaction_emoji(reaction: Reaction) -> &'static str {
    match reaction {
        Reaction::Received => "👀",
        Reaction::Done => "👍",
        Reaction::Failed => "👎",
    }
}

/// How a [`TelegramTransport`] is set up. [`TelegramConfig::new`] gives the defaults the
/// settings declare; tests shorten the timeouts and retry delays.
#[derive(Clone)]
pub struct TelegramConfig {
    /// The bot token (trimmed). Never shown: `Debug` hides it.
    pub token: String,
    /// Name of the environment variable the token came from, for error messages.
    pub token_env: String,
    /// Bot API server (`https://api.telegram.org`).
    pub base_url: String,
    /// How long one `getUpdates` waits for news.
    pub poll_timeout: Duration,
    /// Timeout of every other request.
    pub request_timeout: Duration,
    /// Timeout of an attachment download.
    pub download_timeout: Duration,
    /// Where the offset file lives; `None` keeps the offset in memory only.
    pub state_dir: Option<PathBuf>,
    /// Retries within one request (5xx, network, short 429 waits).
    pub request_policy: RetryPolicy,
    /// The long poll's reconnect backoff.
    pub reconnect_policy: RetryPolicy,
    /// Shortest time between two typing hints to the same chat and topic (Telegram shows
    /// one for up to 5 s).
    pub typing_interval: Duration,
    /// `Some(x)`: every jitter draw is `x` (tests); `None`: the system's randomness.
    pub fixed_jitter: Option<f64>,
    /// `sessionTopics` as written: the forum supergroup the broker makes a topic per
    /// session in, or [`PRIVATE_TOPICS`] (a topic per session in each paired user's private
    /// chat with the bot); `None`: no topics.
    pub session_topics: Option<String>,
}

impl TelegramConfig {
    /// The defaults for `token` against `base_url`.
    pub fn new(token: impl Into<String>, base_url: impl Into<String>) -> TelegramConfig {
        TelegramConfig {
            token: token.into(),
            token_env: settings::DEFAULT_TOKEN_ENV.to_owned(),
            base_url: base_url.into(),
            poll_timeout: Duration::from_secs(
                settings::DEFAULT_POLL_TIMEOUT_SECONDS.unsigned_abs(),
            ),
            request_timeout: Duration::from_secs(15),
            download_timeout: Duration::from_secs(60),
            state_dir: None,
            request_policy: RetryPolicy::REQUEST,
            reconnect_policy: RetryPolicy::RECONNECT,
            typing_interval: Duration::from_secs(4),
            fixed_jitter: None,
            session_topics: None,
        }
    }

    fn jitter(&self) -> Box<dyn Jitter> {
        jitter::source(self.fixed_jitter)
    }
}

impl std::fmt::Debug for TelegramConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramConfig")
            .field("token", &"<hidden>")
            .field("token_env", &self.token_env)
            .field("base_url", &self.base_url)
            .field("poll_timeout", &self.poll_timeout)
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

/// Why a transport could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The token cannot be a bot token (the value is never shown).
    #[error(
        "the value of ${env} does not look like a Telegram bot token (it should look like 123456789:AAE..., as @BotFather shows it); export the token again"
    )]
    MalformedToken {
        /// The variable's name.
        env: String,
    },
    /// The base URL or the HTTP client is unusable.
    #[error("{0}")]
    Client(String),
}

/// Who the bot is, from `getMe`.
#[derive(Debug, Clone)]
struct Me {
    id: i64,
    name: String,
    /// `has_topics_enabled`: topics in private chats are on (`None`: a server older than
    /// Bot API 9.3 did not say; the first `createForumTopic` tells).
    has_topics: Option<bool>,
}

impl Me {
    fn bot_self(&self) -> BotSelf {
        BotSelf {
            id: self.id.to_string(),
            username: self.name.clone(),
        }
    }
}

struct Running {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// The Telegram transport.
pub struct TelegramTransport {
    shared: Arc<Shared>,
    config: TelegramConfig,
    me: Mutex<Option<Me>>,
    /// Held across `start` and `stop`, so two starts cannot both begin polling.
    lifecycle: tokio::sync::Mutex<Option<Running>>,
    /// Between a successful `start` and `stop`: sends are allowed.
    started: AtomicBool,
    /// When the last typing hint went to each chat and topic.
    typing: Mutex<HashMap<(String, Option<i64>), Instant>>,
}

impl std::fmt::Debug for TelegramTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramTransport")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Telegram's answer to a message whose HTML it cannot parse.
fn html_refused(error: &ApiError) -> bool {
    error
        .description()
        .is_some_and(|text| text.to_ascii_lowercase().contains("can't parse entities"))
}

fn not_modified(error: &ApiError) -> bool {
    error.description().is_some_and(|text| {
        text.to_ascii_lowercase()
            .contains("message is not modified")
    })
}

/// The most characters a forum topic's name may hold (`createForumTopic`: 1–128).
pub const TOPIC_NAME_MAX_CHARS: usize = 128;

/// `sessionTopics` for a topic per session in each paired user's private chat with the bot
/// (Bot API 9.3 topics in private chats, made by the bot since 9.4).
pub const PRIVATE_TOPICS: &str = "private";

/// What to turn on when the bot has no topics in private chats. The switch is the bot
/// owner's, in @BotFather, not the user's (the chat with a bot has no Topics toggle).
const TURN_ON_TOPIC_MODE: &str = "turn on Threaded Mode (topics in private chats) for this \
     bot in @BotFather's Mini App (Bot Settings), then restart the session";

/// Whether `chat` is a private chat: a user's id, which is positive (groups' and channels'
/// ids are negative).
fn is_private_chat(chat: &str) -> bool {
    chat.trim().parse::<i64>().is_ok_and(|id| id > 0)
}

/// What Telegram's refusal of a topic call means for the broker. Telegram documents the
/// right (`can_manage_topics`) but not its error texts, so the known ones are matched
/// loosely, lower-cased; anything else is a plain failure, said with Telegram's words.
fn topic_error(error: &ApiError, chat: &str) -> TopicError {
    let text = error.to_string();
    let lower = text.to_ascii_lowercase();
    let status = match error {
        ApiError::Rejected { status, .. } => *status,
        _ => 0,
    };
    if is_topic_gone(&lower) {
        TopicError::Gone(text)
    } else if is_private_chat(chat)
        && (lower.contains("not a forum")
            || lower.contains("forum_create_forbidden")
            || lower.contains("forums_disabled"))
    {
        TopicError::MissingPermission(format!(
            "the bot has no topics in private chats: {TURN_ON_TOPIC_MODE} ({text})"
        ))
    } else if lower.contains("not a forum") {
        TopicError::MissingPermission(format!(
            "the group {chat} is not a forum; turn on Topics in its settings ({text})"
        ))
    } else if lower.contains("not enough rights") || lower.contains("chat_admin_required") {
        TopicError::MissingPermission(format!(
            "make the bot an admin of {chat} with the right to manage topics \
             (can_manage_topics) ({text})"
        ))
    } else if status == 403 || lower.contains("chat not found") {
        TopicError::MissingPermission(format!(
            "add the bot to {chat} as an admin with the right to manage topics, and check \
             transports.telegram.sessionTopics ({text})"
        ))
    } else {
        TopicError::Failed(text)
    }
}

/// Telegram's words for a topic that no longer exists (deleted by hand).
fn is_topic_gone(lower: &str) -> bool {
    lower.contains("message thread not found")
        || lower.contains("topic_id_invalid")
        || lower.contains("topic_deleted")
}

/// Telegram's answer to a change that changes nothing (a topic already open, closed or
/// so named): the change is done.
fn topic_unchanged(error: &ApiError) -> bool {
    error
        .description()
        .is_some_and(|text| text.to_ascii_uppercase().contains("TOPIC_NOT_MODIFIED"))
}

fn send_error(error: ApiError) -> TransportError {
    match error {
        ApiError::RateLimited { retry_after_ms, .. } => {
            TransportError::RateLimited { retry_after_ms }
        }
        other => TransportError::Failed(other.to_string()),
    }
}

impl TelegramTransport {
    /// A stopped transport; no I/O until `identify` or `start`.
    pub fn new(config: TelegramConfig) -> Result<TelegramTransport, ConfigError> {
        let token = Secret::new(&config.token);
        if !looks_like_bot_token(&token) {
            return Err(ConfigError::MalformedToken {
                env: config.token_env.clone(),
            });
        }
        let api = BotApi::new(
            ClientSettings {
                base_url: config.base_url.clone(),
                token,
                token_env: config.token_env.clone(),
                request_timeout: config.request_timeout,
                download_timeout: config.download_timeout,
                policy: config.request_policy,
            },
            config.jitter(),
        )
        .map_err(ConfigError::Client)?;
        Ok(TelegramTransport {
            shared: Arc::new(Shared {
                api,
                stats: Mutex::new(Stats::default()),
                offset: Mutex::new(None),
                presses: Presses::default(),
            }),
            config,
            me: Mutex::new(None),
            lifecycle: tokio::sync::Mutex::new(None),
            started: AtomicBool::new(false),
            typing: Mutex::new(HashMap::new()),
        })
    }

    /// The forum's chat id from `sessionTopics`: a number, since the topics' messages
    /// arrive with the numeric id (an `@username` would never match them).
    fn topic_chat(&self) -> Result<i64, TopicError> {
        let written = self
            .config
            .session_topics
            .as_deref()
            .unwrap_or_default()
            .trim();
        written.parse::<i64>().map_err(|_| {
            TopicError::Unsupported(format!(
                "transports.telegram.sessionTopics is {written:?}, not a chat id: write the \
                 forum supergroup's numeric id (like -1001234567890; forward a message from \
                 the group to @userinfobot to see it), or \"{PRIVATE_TOPICS}\" for a topic \
                 per session in each paired user's private chat with the bot"
            ))
        })
    }

    /// Whether `sessionTopics` asks for topics in each paired user's private chat.
    fn private_topics(&self) -> bool {
        self.config
            .session_topics
            .as_deref()
            .is_some_and(|written| written.trim().eq_ignore_ascii_case(PRIVATE_TOPICS))
    }

    /// One change of `topic` (`editForumTopic`, `closeForumTopic`, `reopenForumTopic`);
    /// a change that changes nothing is done.
    async fn change_topic(
        &self,
        topic: &Topic,
        method: &'static str,
        name: Option<&str>,
    ) -> Result<(), TopicError> {
        let thread = topic
            .thread_id
            .as_deref()
            .and_then(|thread| thread.trim().parse::<i64>().ok())
            .ok_or_else(|| {
                TopicError::Gone(format!(
                    "the kept topic {:?} has no topic id; a new one is made",
                    topic.thread_id
                ))
            })?;
        let chat = ChatId::parse(&topic.conversation_id);
        match self
            .shared
            .api
            .change_forum_topic(method, &chat, thread, name)
            .await
        {
            Ok(()) => Ok(()),
            Err(error) if topic_unchanged(&error) => Ok(()),
            Err(error) => Err(topic_error(&error, &topic.conversation_id)),
        }
    }

    fn not_started(&self) -> TransportError {
        TransportError::NotStarted(TRANSPORT_ID.to_owned())
    }

    fn is_started(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }

    /// `getMe`, remembered for the normalizer and the offset file.
    async fn who_am_i(&self) -> Result<Me, TransportError> {
        if let Some(me) = lock(&self.me).clone() {
            return Ok(me);
        }
        let user = self.shared.api.get_me().await.map_err(|error| {
            let text = error.to_string();
            self.shared
                .update(|stats| stats.last_error = Some(text.clone()));
            TransportError::Failed(text)
        })?;
        let name = user
            .username
            .clone()
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| user.id.to_string());
        let me = Me {
            id: user.id,
            name,
            has_topics: user.has_topics_enabled,
        };
        self.shared
            .update(|stats| stats.bot = Some(format!("@{} ({})", me.name, me.id)));
        *lock(&self.me) = Some(me.clone());
        Ok(me)
    }

    /// The offset to start from: the one this process last used, else the saved one.
    fn starting_offset(&self, store: Option<&OffsetStore>) -> Option<Offset> {
        if let Some(offset) = *lock(&self.shared.offset) {
            return Some(offset);
        }
        match store.map(OffsetStore::load) {
            Some(Ok(offset)) => offset,
            Some(Err(error)) => {
                self.shared.update(|stats| stats.last_error = Some(error));
                None
            }
            None => None,
        }
    }

    /// Answers press `press` with `text` (Telegram HTML, shown as plain text) in the
    /// notification only the presser sees, as an alert: it says what to do, so it must not
    /// fade. One answer per query, so the press is taken from the book; a press the book
    /// no longer has fails, and nothing is posted.
    async fn answer_privately(
        &self,
        press: &str,
        text: &str,
    ) -> Result<SendReceipt, TransportError> {
        let Some(query_id) = self.shared.presses.take(press, Instant::now()) else {
            return Err(TransportError::Failed(format!(
                "Telegram can no longer answer button press {press} privately: it was answered already, or never handed out"
            )));
        };
        let text = listen::notification_text(&html::html_to_plain(text));
        self.shared
            .api
            .answer_callback_query(&query_id, Some(&text), true)
            .await
            .map_err(send_error)?;
        Ok(SendReceipt {
            message_id: press.to_owned(),
            edit_key: None,
        })
    }

    async fn post(
        &self,
        chat: &ChatId,
        thread: Option<i64>,
        text: &str,
        buttons: &[Button],
        reply_to: Option<i64>,
    ) -> Result<SendReceipt, TransportError> {
        let api = &self.shared.api;
        let keyboard = keyboard::inline_keyboard(buttons);
        let keyboard = keyboard.as_ref();
        let sent = match api
            .send_message(chat, thread, text, Some("HTML"), keyboard, reply_to)
            .await
        {
            Err(error) if html_refused(&error) => {
                // The same piece, as the text Telegram would have shown, without markup.
                self.shared.update(|stats| stats.plain_resends += 1);
                let plain = html::html_to_plain(text);
                api.send_message(chat, thread, &plain, None, keyboard, reply_to)
                    .await
            }
            other => other,
        };
        let message_id = sent.map_err(send_error)?.to_string();
        self.shared.update(|stats| stats.sent += 1);
        Ok(SendReceipt {
            edit_key: Some(message_id.clone()),
            message_id,
        })
    }

    async fn edit(
        &self,
        chat: &ChatId,
        key: &str,
        text: &str,
        buttons: &[Button],
    ) -> Result<SendReceipt, TransportError> {
        let receipt = SendReceipt {
            message_id: key.to_owned(),
            edit_key: Some(key.to_owned()),
        };
        let Ok(message_id) = key.trim().parse::<i64>() else {
            return Err(TransportError::EditRejected(format!(
                "{key:?} is not a Telegram message id, so there is nothing to edit"
            )));
        };
        let api = &self.shared.api;
        // Without buttons the edit sends no `reply_markup`, which removes the old keyboard.
        let keyboard = keyboard::inline_keyboard(buttons);
        let keyboard = keyboard.as_ref();
        let mut edited = api
            .edit_message_text(chat, message_id, text, Some("HTML"), keyboard)
            .await;
        if edited.as_ref().is_err_and(html_refused) {
            self.shared.update(|stats| stats.plain_resends += 1);
            edited = api
                .edit_message_text(chat, message_id, &html::html_to_plain(text), None, keyboard)
                .await;
        }
        match edited {
            Ok(()) => {}
            // The card already shows this text: exactly what was asked for.
            Err(error) if not_modified(&error) => {}
            Err(ApiError::Rejected {
                status: 400,
                description,
                ..
            }) => {
                // "message to edit not found", "message can't be edited" (too old): the
                // bridge posts a new message instead (I21).
                return Err(TransportError::EditRejected(format!(
                    "Telegram refused to edit message {message_id}: {description}"
                )));
            }
            Err(error) => return Err(send_error(error)),
        }
        self.shared.update(|stats| stats.edited += 1);
        Ok(receipt)
    }
}

#[async_trait]
impl Transport for TelegramTransport {
    fn id(&self) -> &str {
        TRANSPORT_ID
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    async fn identify(&self) -> Result<BotIdentity, TransportError> {
        let me = self.who_am_i().await?;
        Ok(BotIdentity {
            bot_id: me.id.to_string(),
            bot_name: me.name.clone(),
            lock_name: Some(format!("telegram-{}", me.id)),
        })
    }

    /// Checks the token (`getMe`, unless `identify` did), then fetches the backlog with one
    /// immediate `getUpdates` before polling in the background. A refused token or a second
    /// poller fails `start` itself, so the host reports it (I16); a network failure does
    /// not: the loop retries it.
    async fn start(&self, sink: InboundSink) -> Result<(), TransportError> {
        let mut lifecycle = self.lifecycle.lock().await;
        if lifecycle.is_some() {
            return Err(TransportError::AlreadyStarted(TRANSPORT_ID.to_owned()));
        }
        let me = self.who_am_i().await?;
        let store = self
            .config
            .state_dir
            .as_deref()
            .map(|dir| OffsetStore::new(dir, &me.id.to_string()));
        let offset = self.starting_offset(store.as_ref());
        let first = offset.and_then(|offset| offset.for_request(listen::now_ms()));
        let backlog = match self.shared.api.get_updates(first, Duration::ZERO).await {
            Ok(updates) => updates,
            // What the loop would retry (5xx, network, a rate limit) does not fail the start:
            // the loop fetches the backlog once Telegram answers again.
            Err(error) if !listen::halts(&error) => {
                let text = error.to_string();
                self.shared.update(|stats| stats.last_error = Some(text));
                Vec::new()
            }
            Err(error) => {
                let text = error.to_string();
                self.shared.update(|stats| stats.halted(&text));
                return Err(TransportError::Failed(text));
            }
        };
        let cancel = CancellationToken::new();
        let listener = Listener {
            shared: self.shared.clone(),
            me: me.bot_self(),
            sink,
            offset,
            store,
            cancel: cancel.clone(),
            poll_timeout: self.config.poll_timeout,
            reconnect: self.config.reconnect_policy,
            jitter: self.config.jitter(),
        };
        self.shared.update(|stats| stats.polling(first));
        let task = tokio::spawn(listener.run(backlog));
        self.started.store(true, Ordering::SeqCst);
        *lifecycle = Some(Running { cancel, task });
        Ok(())
    }

    async fn stop(&self) {
        let mut lifecycle = self.lifecycle.lock().await;
        self.started.store(false, Ordering::SeqCst);
        let Some(running) = lifecycle.take() else {
            return;
        };
        running.cancel.cancel();
        // The loop ends at its next await point: in a poll, a delivery or a backoff wait.
        let _ = running.task.await;
        self.shared.update(|stats| {
            if !matches!(stats.state, PollState::Halted(_)) {
                stats.state = PollState::Stopped;
            }
        });
    }

    async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
        if !self.is_started() {
            return Err(self.not_started());
        }
        if let Some(press) = &message.answers_press {
            return self.answer_privately(press, &message.text).await;
        }
        let chat = ChatId::parse(&message.conversation_id);
        let sent = match message.edit_key.as_deref() {
            Some(key) => self.edit(&chat, key, &message.text, &message.buttons).await,
            None => {
                // Only a number is a topic; anything else (another transport's thread
                // name) is ignored rather than failing the send.
                let thread = message
                    .thread_id
                    .as_deref()
                    .and_then(|thread| thread.trim().parse::<i64>().ok());
                // A message id is a number; anything else is no message of this chat.
                let reply_to = message
                    .reply_to
                    .as_deref()
                    .and_then(|id| own_message_id(id).parse::<i64>().ok());
                self.post(&chat, thread, &message.text, &message.buttons, reply_to)
                    .await
            }
        };
        // A rate limit or a refused edit is ordinary flow the bridge handles; a failed
        // send is what `doctor` should show.
        if let Err(TransportError::Failed(text)) = &sent {
            self.shared
                .update(|stats| stats.last_error = Some(text.clone()));
        }
        sent
    }

    /// Best effort (I24): never fails, at most one hint per chat and topic every
    /// `typing_interval`, one short attempt without retries.
    async fn typing(
        &self,
        conversation_id: &str,
        thread_id: Option<&str>,
    ) -> Result<(), TransportError> {
        if !self.is_started() {
            return Ok(());
        }
        let thread = thread_id.and_then(|thread| thread.trim().parse::<i64>().ok());
        let now = Instant::now();
        {
            let mut last = lock(&self.typing);
            let interval = self.config.typing_interval;
            if last
                .get(&(conversation_id.to_owned(), thread))
                .is_some_and(|at| now.duration_since(*at) < interval)
            {
                return Ok(());
            }
            last.retain(|_, at| now.duration_since(*at) < interval);
            last.insert((conversation_id.to_owned(), thread), now);
        }
        let chat = ChatId::parse(conversation_id);
        if self.shared.api.send_typing(&chat, thread).await.is_err() {
            self.shared.update(|stats| stats.typing_failures += 1);
        }
        Ok(())
    }

    /// Private chats only (a user's id is positive; groups and channels are negative or
    /// named): anywhere else it fails at once, without a call, and the bridge shows the
    /// preview on the card there.
    async fn draft(
        &self,
        conversation_id: &str,
        thread_id: Option<&str>,
        draft_id: u64,
        text: &str,
    ) -> Result<(), TransportError> {
        if !self.is_started() {
            return Err(self.not_started());
        }
        let Some(chat) = conversation_id
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|id| *id > 0)
        else {
            return Err(TransportError::Unsupported(
                "Telegram streams drafts in private chats only".into(),
            ));
        };
        let thread = thread_id.and_then(|thread| thread.trim().parse::<i64>().ok());
        // Telegram wants a non-zero id that fits its integer.
        let draft_id = i64::try_from(draft_id).unwrap_or(i64::MAX).max(1);
        self.shared
            .api
            .send_message_draft(chat, thread, draft_id, text)
            .await
            .map_err(send_error)
    }

    async fn react(
        &self,
        conversation_id: &str,
        message_id: &str,
        reaction: Reaction,
        _replaces: Option<Reaction>,
    ) -> Result<(), TransportError> {
        if !self.is_started() {
            return Err(self.not_started());
        }
        let Ok(message_id) = own_message_id(message_id).parse::<i64>() else {
            return Err(TransportError::Failed(format!(
                "{message_id:?} is not a Telegram message id"
            )));
        };
        let chat = ChatId::parse(conversation_id);
        self.shared
            .api
            .set_message_reaction(&chat, message_id, reaction_emoji(reaction))
            .await
            .map_err(send_error)
    }

    fn max_upload_bytes(&self) -> u64 {
        UPLOAD_LIMIT
    }

    async fn send_file(&self, file: OutboundFile) -> Result<SendReceipt, TransportError> {
        if !self.is_started() {
            return Err(self.not_started());
        }
        if file.data.len() as u64 > UPLOAD_LIMIT {
            return Err(TransportError::Failed(format!(
                "Telegram takes files of up to 50 MB from bots; this one is {} bytes",
                file.data.len()
            )));
        }
        let chat = ChatId::parse(&file.conversation_id);
        let thread = file
            .thread_id
            .as_deref()
            .and_then(|thread| thread.trim().parse::<i64>().ok());
        let upload = Upload {
            name: &file.name,
            media_type: &file.media_type,
            caption: &file.caption,
            // Telegram recompresses photos and takes them up to 10 MB only; a bigger
            // picture goes as a document, whole.
            as_photo: file.as_image && file.data.len() as u64 <= PHOTO_LIMIT,
            data: &file.data,
        };
        let sent = self.shared.api.send_file(&chat, thread, &upload).await;
        let message_id = match sent {
            Ok(id) => id.to_string(),
            Err(error) => {
                let error = send_error(error);
                if let TransportError::Failed(text) = &error {
                    self.shared
                        .update(|stats| stats.last_error = Some(text.clone()));
                }
                return Err(error);
            }
        };
        self.shared.update(|stats| stats.sent += 1);
        Ok(SendReceipt {
            message_id,
            edit_key: None,
        })
    }

    async fn fetch_attachment(
        &self,
        reference: &str,
        max_bytes: u64,
    ) -> Result<FetchedAttachment, TransportError> {
        if !self.is_started() {
            return Err(self.not_started());
        }
        let fetched = async {
            let file = self.shared.api.get_file(reference).await?;
            if let Some(size) = file.file_size
                && size > max_bytes
            {
                return Err(DownloadError::TooLarge(OverCap::Declared {
                    size,
                    limit: max_bytes,
                }));
            }
            let path = file.file_path.ok_or(DownloadError::NoPath)?;
            self.shared.api.download(&path, max_bytes).await
        }
        .await;
        let (content_type, data) = fetched.map_err(|error| {
            TransportError::Failed(self.shared.api.token().scrub(&error.to_string()))
        })?;
        Ok(FetchedAttachment {
            media_type: served_media_type(content_type.as_deref(), &data),
            data,
        })
    }

    fn topic_place(&self) -> Option<String> {
        self.config.session_topics.clone()
    }

    fn topic_naming(&self) -> TopicNaming {
        TopicNaming {
            max_chars: TOPIC_NAME_MAX_CHARS,
        }
    }

    fn topics_in_private_chats(&self) -> bool {
        self.private_topics()
    }

    async fn create_topic(&self, name: &str) -> Result<Topic, TopicError> {
        let chat = self.topic_chat()?;
        let made = self
            .shared
            .api
            .create_forum_topic(&ChatId::Id(chat), name)
            .await
            .map_err(|error| topic_error(&error, &chat.to_string()))?;
        Ok(Topic {
            conversation_id: chat.to_string(),
            thread_id: Some(made.message_thread_id.to_string()),
        })
    }

    async fn create_private_topic(&self, chat_id: &str, name: &str) -> Result<Topic, TopicError> {
        if !self.private_topics() {
            return Err(TopicError::Unsupported(format!(
                "transports.telegram.sessionTopics is not \"{PRIVATE_TOPICS}\", so no topic \
                 is made in private chats"
            )));
        }
        let chat = chat_id
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|id| *id > 0)
            .ok_or_else(|| {
                TopicError::Unsupported(format!(
                    "{chat_id:?} is not a private chat with the bot (a user's numeric id)"
                ))
            })?;
        // `getMe` says whether topic mode is on: a bot without it is told so without a
        // refused call per user and session.
        let mut me = self
            .who_am_i()
            .await
            .map_err(|error| TopicError::Failed(error.to_string()))?;
        if me.has_topics == Some(false) {
            // Threaded Mode may have been turned on since: asked again (the broker asks once
            // per attach and stops at the first refusal), so no restart is needed after it.
            if let Ok(user) = self.shared.api.get_me().await {
                me.has_topics = user.has_topics_enabled;
                if let Some(kept) = lock(&self.me).as_mut() {
                    kept.has_topics = user.has_topics_enabled;
                }
            }
        }
        if me.has_topics == Some(false) {
            return Err(TopicError::MissingPermission(format!(
                "@{} has no topics in private chats (getMe: has_topics_enabled is false): \
                 {TURN_ON_TOPIC_MODE}",
                me.name
            )));
        }
        let made = self
            .shared
            .api
            .create_forum_topic(&ChatId::Id(chat), name)
            .await
            .map_err(|error| topic_error(&error, &chat.to_string()))?;
        Ok(Topic {
            conversation_id: chat.to_string(),
            thread_id: Some(made.message_thread_id.to_string()),
        })
    }

    async fn resume_topic(&self, topic: &Topic, name: &str) -> Result<(), TopicError> {
        // Closing and reopening are forum supergroups' only (`closeForumTopic`,
        // `reopenForumTopic`); a private chat's topic is only renamed.
        if !is_private_chat(&topic.conversation_id) {
            self.change_topic(topic, "reopenForumTopic", None).await?;
        }
        self.change_topic(topic, "editForumTopic", Some(name)).await
    }

    async fn end_topic(&self, topic: &Topic, name: &str) -> Result<(), TopicError> {
        self.change_topic(topic, "editForumTopic", Some(name))
            .await?;
        if is_private_chat(&topic.conversation_id) {
            return Ok(());
        }
        self.change_topic(topic, "closeForumTopic", None).await
    }

    fn topic_gone(&self, error: &TransportError) -> bool {
        match error {
            TransportError::Failed(text) => is_topic_gone(&text.to_ascii_lowercase()),
            _ => false,
        }
    }

    fn diagnose(&self) -> String {
        let retries = self.shared.api.retries();
        let stats = self.shared.stats();
        let bot = stats.bot.as_deref().unwrap_or("not identified yet");
        let state = match &stats.state {
            PollState::NotStarted => "not started".to_owned(),
            PollState::Polling => match stats.offset {
                Some(offset) => format!("polling (offset {offset})"),
                None => "polling".to_owned(),
            },
            PollState::Retrying { failures } => {
                format!("reconnecting after {failures} failed poll(s)")
            }
            PollState::Halted(reason) => format!("stopped receiving: {reason}"),
            PollState::Stopped => "stopped".to_owned(),
        };
        let mut line = format!(
            "bot {bot}; {state}; received {}, ignored {}, sent {}, edited {}, plain resends {}, retries {}, typing failures {}",
            stats.received,
            stats.ignored,
            stats.sent,
            stats.edited,
            stats.plain_resends,
            retries + stats.poll_failures,
            stats.typing_failures,
        );
        let halted_for = match &stats.state {
            PollState::Halted(reason) => Some(reason),
            _ => None,
        };
        if let Some(error) = stats
            .last_error
            .as_ref()
            .filter(|error| Some(*error) != halted_for)
        {
            line.push_str("; last error: ");
            line.push_str(error);
        }
        if let Some(skip) = &stats.last_skip {
            line.push_str("; last ignored: ");
            line.push_str(skip);
        }
        // Every text above is already free of the token; this is the last line of defence.
        self.shared.api.token().scrub(&line)
    }
}

#[cfg(test)]
mod topic_tests {
    use super::*;

    fn refused(status: u16, description: &str) -> ApiError {
        ApiError::Rejected {
            method: "createForumTopic",
            status,
            description: description.to_owned(),
        }
    }

    /// Which [`TopicError`] a refusal should become.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Kind {
        Gone,
        Rights,
        Failed,
    }

    fn kind(error: &TopicError) -> Option<Kind> {
        match error {
            TopicError::Gone(_) => Some(Kind::Gone),
            TopicError::MissingPermission(_) => Some(Kind::Rights),
            TopicError::Failed(_) => Some(Kind::Failed),
            TopicError::Unsupported(_) => None,
        }
    }

    #[test]
    fn telegrams_topic_refusals_are_sorted_into_what_the_broker_does() {
        use Kind::{Failed as failed, Gone as gone, Rights as rights};
        let table = [
            (
                refused(400, "Bad Request: message thread not found"),
                gone,
                "",
            ),
            (refused(400, "Bad Request: TOPIC_ID_INVALID"), gone, ""),
            (
                refused(400, "Bad Request: the chat is not a forum"),
                rights,
                "turn on Topics",
            ),
            (
                refused(400, "Bad Request: not enough rights to create a topic"),
                rights,
                "can_manage_topics",
            ),
            (
                refused(403, "Forbidden: bot is not a member of the supergroup chat"),
                rights,
                "add the bot",
            ),
            (
                refused(400, "Bad Request: chat not found"),
                rights,
                "sessionTopics",
            ),
            (
                ApiError::Timeout {
                    method: "createForumTopic",
                    seconds: 15,
                },
                failed,
                "",
            ),
        ];
        for (error, expected, says) in table {
            let sorted = topic_error(&error, "-100");
            assert_eq!(kind(&sorted), Some(expected), "{error} became {sorted:?}");
            assert!(sorted.to_string().contains(says), "{sorted}");
        }
    }

    #[test]
    fn in_a_private_chat_not_a_forum_means_the_bots_topic_mode_is_off() {
        use Kind::{Gone as gone, Rights as rights};
        let table = [
            (
                refused(400, "Bad Request: the chat is not a forum"),
                rights,
                "Threaded Mode",
            ),
            (
                refused(400, "Bad Request: BOT_FORUM_CREATE_FORBIDDEN"),
                rights,
                "@BotFather",
            ),
            (
                refused(400, "Bad Request: message thread not found"),
                gone,
                "",
            ),
        ];
        for (error, expected, says) in table {
            let sorted = topic_error(&error, "4242");
            assert_eq!(kind(&sorted), Some(expected), "{error} became {sorted:?}");
            assert!(sorted.to_string().contains(says), "{sorted}");
            // Not the group's advice: a chat with a bot has no Topics setting of its own.
            assert!(
                !sorted
                    .to_string()
                    .contains("turn on Topics in its settings")
            );
        }
    }

    #[test]
    fn private_topics_are_asked_for_by_name_and_only_in_a_users_chat() {
        for (written, private) in [
            ("private", true),
            (" Private ", true),
            ("-1001234567890", false),
        ] {
            let mut config = TelegramConfig::new("123456:TEST-topic-token", "http://127.0.0.1:9");
            config.session_topics = Some(written.to_owned());
            let transport = TelegramTransport::new(config).expect("builds");
            assert_eq!(transport.topics_in_private_chats(), private, "{written}");
        }
        assert!(is_private_chat("4242"));
        assert!(!is_private_chat("-1001234567890"));
        assert!(!is_private_chat("-4242"));
        assert!(!is_private_chat("@someone"));
    }

    #[tokio::test]
    async fn a_private_topic_is_refused_without_a_call_when_private_topics_are_not_asked_for() {
        let mut config = TelegramConfig::new("123456:TEST-topic-token", "http://127.0.0.1:9");
        config.session_topics = Some("-1001234567890".into());
        let transport = TelegramTransport::new(config).expect("builds");
        let refused = transport
            .create_private_topic("4242", "api")
            .await
            .expect_err("not asked for");
        assert!(matches!(refused, TopicError::Unsupported(_)), "{refused:?}");
        assert!(refused.to_string().contains("private"), "{refused}");
    }

    #[test]
    fn a_send_into_a_deleted_topic_is_told_apart_from_other_failures() {
        let transport = TelegramTransport::new(TelegramConfig::new(
            "123456:TEST-topic-token",
            "http://127.0.0.1:9",
        ))
        .expect("builds");
        let failed = |error: ApiError| send_error(error);
        assert!(transport.topic_gone(&failed(refused(
            400,
            "Bad Request: message thread not found"
        ))));
        assert!(!transport.topic_gone(&failed(refused(400, "Bad Request: chat not found"))));
        assert!(!transport.topic_gone(&TransportError::RateLimited { retry_after_ms: 1 }));
    }

    #[test]
    fn only_a_numeric_chat_id_is_a_place_for_topics() {
        for (written, ok) in [
            ("-1001234567890", true),
            (" -1001234567890 ", true),
            ("@mygroup", false),
            ("sessions", false),
        ] {
            let mut config = TelegramConfig::new("123456:TEST-topic-token", "http://127.0.0.1:9");
            config.session_topics = Some(written.to_owned());
            let transport = TelegramTransport::new(config).expect("builds");
            match transport.topic_chat() {
                Ok(chat) => assert!(ok, "{written} -> {chat}"),
                Err(error) => {
                    assert!(!ok, "{written}: {error}");
                    assert!(error.to_string().contains("-1001234567890"), "{error}");
                }
            }
        }
    }
}
