//! The Slack transport itself: its configuration, the counters it shares with the
//! Socket Mode listener, and its [`transport_core::Transport`] implementation. The
//! crate root only lists the modules and re-exports what callers use.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use transport_core::Secret;
use transport_core::download::served_media_type;
use transport_core::http_client::tls_config;
use transport_core::jitter::{self, Jitter};
use transport_core::platform::BotSelf;
use transport_core::retry::RetryPolicy;
use transport_core::sync::lock;
use transport_core::{
    BotIdentity, Button, Capabilities, FetchedAttachment, InboundSink, LengthUnit, Markup,
    OutboundFile, OutboundMessage, Reaction, SendReceipt, Topic, TopicError, TopicNaming,
    Transport, TransportError, own_message_id,
};

use crate::client::{ApiError, ClientSettings, Upload, WebApi, has_shape};
use crate::dedupe::Dedupe;
use crate::listen::{Dispatcher, Listener, OpenError, RECEIVED_CAPACITY};
use crate::normalize::{TRANSPORT_ID, is_ts, split_conversation};
use crate::socket::SocketTimings;
use crate::state::{Shared, SocketState, Stats};
use crate::{blocks, settings};

/// What Slack can do (docs/architecture.md#transports-and-their-shared-core): 4,000
/// characters (Slack's own guidance for `text`; it truncates at 40,000), mrkdwn, threads
/// (`thread_ts`), edits, attachments, and no typing indicator (see the crate docs).
pub const CAPABILITIES: Capabilities = Capabilities {
    threads: true,
    edit: true,
    attachments: true,
    typing: false,
    max_message_length: 4000,
    length_unit: LengthUnit::Chars,
    markup: Markup::Mrkdwn,
    reactions: true,
    drafts: false,
};

/// The emoji name of each reaction (Slack's standard set; `reactions:write` scope).
pub fn reaction_name(reaction: Reaction) -> &'static str {
    match reaction {
        Reaction::Received => "eyes",
        Reaction::Done => "white_check_mark",
        Reaction::Failed => "x",
    }
}

/// Error codes of `chat.update` after which the bridge should post a new message (I21).
const EDIT_REJECTED: &[&str] = &[
    "message_not_found",
    "cant_update_message",
    "edit_window_closed",
];

/// How a [`SlackTransport`] is set up. [`SlackConfig::new`] gives the defaults the
/// settings declare; tests shorten the timeouts and retry delays.
#[derive(Clone)]
pub struct SlackConfig {
    /// The bot token (`xoxb-…`). Never shown: `Debug` hides it.
    pub bot_token: String,
    /// Name of the variable the bot token came from, for error messages.
    pub bot_token_env: String,
    /// The app-level token (`xapp-…`). Never shown.
    pub app_token: String,
    /// Name of the variable the app-level token came from.
    pub app_token_env: String,
    /// Web API base URL (`https://slack.com/api`).
    pub base_url: String,
    /// Timeout of every Web API request.
    pub request_timeout: Duration,
    /// Timeout of an attachment download.
    pub download_timeout: Duration,
    /// Socket Mode timings.
    pub socket: SocketTimings,
    /// Retries within one request (5xx, network, short 429 waits).
    pub request_policy: RetryPolicy,
    /// Socket Mode's reconnect backoff.
    pub reconnect_policy: RetryPolicy,
    /// `Some(x)`: every jitter draw is `x` (tests); `None`: the system's randomness.
    pub fixed_jitter: Option<f64>,
    /// `sessionTopics` as written: the channel the broker starts a thread per session in;
    /// `None`: no threads.
    pub session_topics: Option<String>,
}

/// Slack has no limit on a thread's parent message worth meeting; a title longer than a
/// line helps nobody.
pub const THREAD_NAME_MAX_CHARS: usize = 150;

/// A session thread's parent message: its name, in bold (a `*` in the name would end the
/// bold early, so it is left plain then).
fn thread_title(name: &str) -> String {
    if name.contains('*') {
        format!("Session {name}")
    } else {
        format!("*Session {name}*")
    }
}

/// What Slack's refusal of a thread call means for the broker: a missing scope or
/// membership names what to do; `message_not_found`/`thread_not_found` on the thread is
/// a parent deleted by hand.
fn topic_error(error: ApiError, channel: &str, on_thread: bool) -> TopicError {
    match error {
        ApiError::MissingScope { .. } => TopicError::MissingPermission(error.to_string()),
        ApiError::Refused { ref code, .. } => match code.as_str() {
            "message_not_found" | "thread_not_found" if on_thread => {
                TopicError::Gone(error.to_string())
            }
            "not_in_channel" => TopicError::MissingPermission(format!(
                "invite the bot to channel {channel} (type /invite @<the bot> there) ({error})"
            )),
            "channel_not_found" | "is_archived" => TopicError::MissingPermission(format!(
                "channel {channel} cannot take threads: check transports.slack.sessionTopics \
                 and that the channel exists, is not archived and has the bot in it ({error})"
            )),
            _ => TopicError::Failed(error.to_string()),
        },
        other => TopicError::Failed(other.to_string()),
    }
}

impl SlackConfig {
    /// The defaults for the two tokens against `base_url`.
    pub fn new(
        bot_token: impl Into<String>,
        app_token: impl Into<String>,
        base_url: impl Into<String>,
    ) -> SlackConfig {
        SlackConfig {
            bot_token: bot_token.into(),
            bot_token_env: settings::DEFAULT_TOKEN_ENV.to_owned(),
            app_token: app_token.into(),
            app_token_env: settings::DEFAULT_APP_TOKEN_ENV.to_owned(),
            base_url: base_url.into(),
            request_timeout: Duration::from_secs(15),
            download_timeout: Duration::from_secs(60),
            socket: SocketTimings::default(),
            request_policy: RetryPolicy::REQUEST,
            reconnect_policy: RetryPolicy::RECONNECT,
            fixed_jitter: None,
            session_topics: None,
        }
    }

    fn jitter(&self) -> Box<dyn Jitter> {
        jitter::source(self.fixed_jitter)
    }
}

impl std::fmt::Debug for SlackConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackConfig")
            .field("bot_token", &"<hidden>")
            .field("bot_token_env", &self.bot_token_env)
            .field("app_token", &"<hidden>")
            .field("app_token_env", &self.app_token_env)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// Why a transport could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A token does not have its shape (the value is never shown).
    #[error(
        "the value of ${env} does not look like a Slack {kind} (it should start with {prefix}){swapped}; export the right token again"
    )]
    MalformedToken {
        /// The variable's name.
        env: String,
        /// `bot token` or `app-level token`.
        kind: &'static str,
        /// `xoxb-` or `xapp-`.
        prefix: &'static str,
        /// A hint when the value has the other token's shape.
        swapped: &'static str,
    },
    /// The base URL or the HTTP client is unusable.
    #[error("{0}")]
    Client(String),
}

/// Who the bot is, from `auth.test`.
#[derive(Debug, Clone)]
struct Me {
    user_id: String,
    name: String,
}

struct Running {
    cancel: CancellationToken,
    listener: tokio::task::JoinHandle<()>,
    dispatcher: tokio::task::JoinHandle<()>,
}

/// The Slack transport.
pub struct SlackTransport {
    shared: Arc<Shared>,
    config: SlackConfig,
    tls: Arc<rustls::ClientConfig>,
    me: Mutex<Option<Me>>,
    /// Held across `start` and `stop`, so two starts cannot both connect.
    lifecycle: tokio::sync::Mutex<Option<Running>>,
    /// Between a successful `start` and `stop`: sends are allowed.
    started: AtomicBool,
}

impl std::fmt::Debug for SlackTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackTransport")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn check_shape(
    token: &Secret,
    env: &str,
    kind: &'static str,
    prefix: &'static str,
    other: &'static str,
) -> Result<(), ConfigError> {
    if has_shape(token, prefix) {
        return Ok(());
    }
    Err(ConfigError::MalformedToken {
        env: env.to_owned(),
        kind,
        prefix,
        swapped: if has_shape(token, other) {
            " but it holds the other token: the two are swapped"
        } else {
            ""
        },
    })
}

impl SlackTransport {
    /// A stopped transport; no I/O until `identify` or `start`.
    pub fn new(config: SlackConfig) -> Result<SlackTransport, ConfigError> {
        let bot_token = Secret::new(&config.bot_token);
        let app_token = Secret::new(&config.app_token);
        check_shape(
            &bot_token,
            &config.bot_token_env,
            "bot token",
            "xoxb-",
            "xapp-",
        )?;
        check_shape(
            &app_token,
            &config.app_token_env,
            "app-level token",
            "xapp-",
            "xoxb-",
        )?;
        let api = WebApi::new(
            ClientSettings {
                base_url: config.base_url.clone(),
                bot_token,
                bot_token_env: config.bot_token_env.clone(),
                app_token,
                app_token_env: config.app_token_env.clone(),
                request_timeout: config.request_timeout,
                download_timeout: config.download_timeout,
                policy: config.request_policy,
            },
            config.jitter(),
        )
        .map_err(ConfigError::Client)?;
        let tls = tls_config("Slack", &[b"http/1.1"])
            .map_err(|error| ConfigError::Client(error.to_string()))?;
        Ok(SlackTransport {
            shared: Arc::new(Shared {
                api,
                stats: Mutex::new(Stats::default()),
                presses: transport_core::presses::Presses::default(),
            }),
            config,
            tls: Arc::new(tls),
            me: Mutex::new(None),
            lifecycle: tokio::sync::Mutex::new(None),
            started: AtomicBool::new(false),
        })
    }

    fn is_started(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }

    /// `auth.test`, remembered for the normalizer and the lock name.
    async fn who_am_i(&self) -> Result<Me, TransportError> {
        if let Some(me) = lock(&self.me).clone() {
            return Ok(me);
        }
        let auth = self.shared.api.auth_test().await.map_err(|error| {
            let text = error.to_string();
            self.shared
                .update(|stats| stats.last_error = Some(text.clone()));
            TransportError::Failed(text)
        })?;
        let name = auth
            .user
            .clone()
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| auth.user_id.clone());
        let me = Me {
            user_id: auth.user_id.clone(),
            name,
        };
        let team = auth.team.or(auth.team_id).map_or_else(String::new, |team| {
            format!(" in {}", self.shared.api.scrub(&team))
        });
        self.shared.update(|stats| {
            stats.bot = Some(format!("@{} ({}){team}", me.name, me.user_id));
        });
        *lock(&self.me) = Some(me.clone());
        Ok(me)
    }

    /// Answers press `press` with `text` shown to the clicker alone (`chat.postEphemeral`
    /// in the click's channel and thread). A press the book no longer has fails, and
    /// nothing is posted.
    async fn answer_privately(
        &self,
        press: &str,
        text: &str,
    ) -> Result<SendReceipt, TransportError> {
        let Some(clicked) = self.shared.presses.get(press, std::time::Instant::now()) else {
            return Err(TransportError::Failed(format!(
                "Slack can no longer answer button click {press} privately: it is too old, or was never handed out"
            )));
        };
        self.shared
            .api
            .post_ephemeral(
                &clicked.channel,
                &clicked.user,
                clicked.thread_ts.as_deref(),
                text,
            )
            .await
            .map_err(|error| self.send_error(error))?;
        self.shared.update(|stats| stats.sent += 1);
        Ok(SendReceipt {
            message_id: press.to_owned(),
            edit_key: None,
        })
    }

    async fn post(
        &self,
        channel: &str,
        thread: Option<&str>,
        text: &str,
        buttons: &[Button],
    ) -> Result<SendReceipt, TransportError> {
        let blocks = blocks::message_blocks(text, buttons);
        let posted = self
            .shared
            .api
            .post_message(channel, thread, text, &blocks)
            .await
            .map_err(|error| self.send_error(error))?;
        if posted.ts.is_empty() {
            return Err(TransportError::Failed(
                "Slack chat.postMessage answered ok but gave no ts for the message".to_owned(),
            ));
        }
        self.shared.update(|stats| stats.sent += 1);
        Ok(SendReceipt {
            message_id: posted.ts.clone(),
            edit_key: Some(posted.ts),
        })
    }

    async fn edit(
        &self,
        channel: &str,
        key: &str,
        text: &str,
        buttons: &[Button],
    ) -> Result<SendReceipt, TransportError> {
        let key = key.trim();
        let blocks = blocks::message_blocks(text, buttons);
        if !is_ts(key) {
            return Err(TransportError::EditRejected(format!(
                "{key:?} is not a Slack message ts, so there is nothing to edit"
            )));
        }
        match self
            .shared
            .api
            .update_message(channel, key, text, &blocks)
            .await
        {
            Ok(_) => {}
            Err(error)
                if error
                    .code()
                    .is_some_and(|code| EDIT_REJECTED.contains(&code)) =>
            {
                // The bridge posts a new message instead (I21).
                return Err(TransportError::EditRejected(error.to_string()));
            }
            Err(error) => return Err(self.send_error(error)),
        }
        self.shared.update(|stats| stats.edited += 1);
        Ok(SendReceipt {
            message_id: key.to_owned(),
            edit_key: Some(key.to_owned()),
        })
    }

    /// The channel from `sessionTopics`: a channel id (`C…` or `G…`), or what to write.
    fn topic_channel(&self) -> Result<String, TopicError> {
        let written = self
            .config
            .session_topics
            .as_deref()
            .unwrap_or_default()
            .trim();
        let shaped = written.len() > 1
            && (written.starts_with('C') || written.starts_with('G'))
            && written
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
        if shaped {
            return Ok(written.to_owned());
        }
        Err(TopicError::Unsupported(format!(
            "transports.slack.sessionTopics is {written:?}, not a channel id: write the \
             channel's id (like C0123456789: the channel's details, at the bottom), not its name"
        )))
    }

    /// Edits a session thread's parent message to show `name` (running or ended).
    async fn retitle(&self, topic: &Topic, name: &str) -> Result<(), TopicError> {
        let (channel, _) = split_conversation(&topic.conversation_id);
        let Some(ts) = topic.thread_id.as_deref() else {
            return Err(TopicError::Gone(format!(
                "the kept thread {} has no parent message; a new one is made",
                topic.conversation_id
            )));
        };
        self.shared
            .api
            .update_message(channel, ts, &thread_title(name), &[])
            .await
            .map(|_| ())
            .map_err(|error| topic_error(error, channel, true))
    }

    fn send_error(&self, error: ApiError) -> TransportError {
        match error {
            ApiError::RateLimited { retry_after_ms, .. } => {
                self.shared.update(|stats| stats.rate_limited += 1);
                TransportError::RateLimited { retry_after_ms }
            }
            other => TransportError::Failed(other.to_string()),
        }
    }
}

/// The most Slack takes in one file ("Files uploaded to Slack can be up to 1 GB").
pub const UPLOAD_LIMIT: u64 = 1024 * 1024 * 1024;

#[async_trait]
impl Transport for SlackTransport {
    fn id(&self) -> &str {
        TRANSPORT_ID
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    /// `auth.test` with the bot token; the lock is named after the bot user, never a token.
    async fn identify(&self) -> Result<BotIdentity, TransportError> {
        let me = self.who_am_i().await?;
        Ok(BotIdentity {
            lock_name: Some(format!("slack-{}", me.user_id)),
            bot_id: me.user_id,
            bot_name: me.name,
        })
    }

    /// Checks the bot token (`auth.test`, unless `identify` did), opens the first Socket
    /// Mode connection and waits for its `hello`. A refused token or disabled Socket Mode
    /// fails `start` itself, so the host reports it (I16); a network failure does not:
    /// the listener keeps retrying it.
    async fn start(&self, sink: InboundSink) -> Result<(), TransportError> {
        let mut lifecycle = self.lifecycle.lock().await;
        if lifecycle.is_some() {
            return Err(TransportError::AlreadyStarted(TRANSPORT_ID.to_owned()));
        }
        let me = self.who_am_i().await?;
        let cancel = CancellationToken::new();
        let (received_tx, received_rx) = mpsc::channel(RECEIVED_CAPACITY);
        let dispatcher = Dispatcher {
            shared: self.shared.clone(),
            me: BotSelf {
                id: me.user_id.clone(),
                username: me.name.clone(),
            },
            sink: sink.clone(),
            cancel: cancel.clone(),
            received: received_rx,
            dedupe: Dedupe::default(),
        };
        let mut listener = Listener::new(
            self.shared.clone(),
            sink,
            cancel.clone(),
            self.config.reconnect_policy,
            self.config.jitter(),
            self.config.socket,
            self.tls.clone(),
            received_tx,
        );
        let dispatcher = tokio::spawn(dispatcher.run());
        match listener.first_connection().await {
            Ok(()) | Err(OpenError::Retry { .. }) => {}
            Err(OpenError::Fatal(reason)) => {
                cancel.cancel();
                listener.shutdown().await;
                let _ = dispatcher.await;
                self.shared.update(|stats| stats.halted(&reason));
                return Err(TransportError::Failed(reason));
            }
        }
        let listener = tokio::spawn(listener.run());
        self.started.store(true, Ordering::SeqCst);
        *lifecycle = Some(Running {
            cancel,
            listener,
            dispatcher,
        });
        Ok(())
    }

    async fn stop(&self) {
        let mut lifecycle = self.lifecycle.lock().await;
        self.started.store(false, Ordering::SeqCst);
        let Some(running) = lifecycle.take() else {
            return;
        };
        running.cancel.cancel();
        let _ = running.listener.await;
        let _ = running.dispatcher.await;
        self.shared.update(|stats| {
            stats.open_connections = 0;
            if !matches!(stats.state, SocketState::Halted(_)) {
                stats.state = SocketState::Stopped;
            }
        });
    }

    async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
        if !self.is_started() {
            return Err(TransportError::NotStarted(TRANSPORT_ID.to_owned()));
        }
        if let Some(press) = &message.answers_press {
            return self.answer_privately(press, &message.text).await;
        }
        let (channel, conversation_thread) = split_conversation(&message.conversation_id);
        let sent = match message.edit_key.as_deref() {
            Some(key) => {
                self.edit(channel, key, &message.text, &message.buttons)
                    .await
            }
            None => {
                // Only a ts is a thread; anything else (another transport's thread name)
                // is ignored rather than failing the send.
                let thread = message
                    .thread_id
                    .as_deref()
                    .map(str::trim)
                    .filter(|thread| is_ts(thread))
                    .or(conversation_thread);
                self.post(channel, thread, &message.text, &message.buttons)
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

    /// The new reaction first, then the old one away: a failure between the two leaves
    /// two reactions, never none. Needs the `reactions:write` scope; without it Slack's
    /// `missing_scope` says so. Slack has no replies outside threads, so `reply_to` on a
    /// send is not used: a prompt in a thread is answered in that thread already.
    async fn react(
        &self,
        conversation_id: &str,
        message_id: &str,
        reaction: Reaction,
        replaces: Option<Reaction>,
    ) -> Result<(), TransportError> {
        if !self.is_started() {
            return Err(TransportError::NotStarted(TRANSPORT_ID.to_owned()));
        }
        let (channel, _) = split_conversation(conversation_id);
        let api = &self.shared.api;
        let ts = own_message_id(message_id);
        api.own_reaction(true, channel, ts, reaction_name(reaction))
            .await
            .map_err(|e| self.send_error(e))?;
        if let Some(old) = replaces.filter(|old| *old != reaction) {
            api.own_reaction(false, channel, ts, reaction_name(old))
                .await
                .map_err(|e| self.send_error(e))?;
        }
        Ok(())
    }

    /// Slack's Web API offers bots no typing indicator (crate docs): nothing is sent, and
    /// nothing can fail (I24).
    async fn typing(&self, _: &str, _: Option<&str>) -> Result<(), TransportError> {
        Ok(())
    }

    fn max_upload_bytes(&self) -> u64 {
        UPLOAD_LIMIT
    }

    async fn send_file(&self, file: OutboundFile) -> Result<SendReceipt, TransportError> {
        if !self.is_started() {
            return Err(TransportError::NotStarted(TRANSPORT_ID.to_owned()));
        }
        if file.data.len() as u64 > UPLOAD_LIMIT {
            return Err(TransportError::Failed(format!(
                "Slack takes files of up to 1 GB; this one is {} bytes",
                file.data.len()
            )));
        }
        let (channel, conversation_thread) = split_conversation(&file.conversation_id);
        let thread = file
            .thread_id
            .as_deref()
            .map(str::trim)
            .filter(|thread| is_ts(thread))
            .or(conversation_thread);
        let upload = Upload {
            name: &file.name,
            media_type: &file.media_type,
            caption: &file.caption,
            data: &file.data,
        };
        match self.shared.api.upload_file(channel, thread, &upload).await {
            Ok(file_id) => {
                self.shared.update(|stats| stats.sent += 1);
                Ok(SendReceipt {
                    message_id: file_id,
                    edit_key: None,
                })
            }
            Err(error) => {
                let error = self.send_error(error);
                if let TransportError::Failed(text) = &error {
                    self.shared
                        .update(|stats| stats.last_error = Some(text.clone()));
                }
                Err(error)
            }
        }
    }

    async fn fetch_attachment(
        &self,
        reference: &str,
        max_bytes: u64,
    ) -> Result<FetchedAttachment, TransportError> {
        if !self.is_started() {
            return Err(TransportError::NotStarted(TRANSPORT_ID.to_owned()));
        }
        let (content_type, data) = self
            .shared
            .api
            .download(reference, max_bytes)
            .await
            .map_err(|error| TransportError::Failed(self.shared.api.scrub(&error.to_string())))?;
        let media_type = served_media_type(content_type.as_deref(), &data);
        if media_type == "text/html" {
            // Slack answers a download it will not authorise with its sign-in page, as 200.
            return Err(TransportError::Failed(
                "Slack served a web page instead of the file: the app probably lacks the files:read scope (add it, reinstall the app, export the new bot token and restart)".to_owned(),
            ));
        }
        Ok(FetchedAttachment { media_type, data })
    }

    fn topic_place(&self) -> Option<String> {
        self.config.session_topics.clone()
    }

    fn topic_naming(&self) -> TopicNaming {
        TopicNaming {
            max_chars: THREAD_NAME_MAX_CHARS,
        }
    }

    async fn create_topic(&self, name: &str) -> Result<Topic, TopicError> {
        let channel = self.topic_channel()?;
        let posted = self
            .shared
            .api
            .post_message(&channel, None, &thread_title(name), &[])
            .await
            .map_err(|error| topic_error(error, &channel, false))?;
        let channel = if posted.channel.is_empty() {
            channel
        } else {
            posted.channel
        };
        // A thread is a conversation of its own here (`<channel>/<ts>`), as its messages
        // arrive (normalize.rs).
        Ok(Topic {
            conversation_id: crate::normalize::conversation_id(&channel, Some(&posted.ts)),
            thread_id: Some(posted.ts),
        })
    }

    async fn resume_topic(&self, topic: &Topic, name: &str) -> Result<(), TopicError> {
        self.retitle(topic, name).await
    }

    async fn end_topic(&self, topic: &Topic, name: &str) -> Result<(), TopicError> {
        self.retitle(topic, name).await
    }

    fn topic_gone(&self, error: &TransportError) -> bool {
        matches!(error, TransportError::Failed(text) if text.contains("thread_not_found"))
    }

    fn diagnose(&self) -> String {
        let retries = self.shared.api.retries();
        let stats = self.shared.stats();
        let bot = stats.bot.as_deref().unwrap_or("not identified yet");
        let state = match &stats.state {
            SocketState::NotStarted => "socket not started".to_owned(),
            SocketState::Connecting => "socket connecting".to_owned(),
            SocketState::Connected => format!(
                "socket connected ({} open connection{})",
                stats.open_connections,
                if stats.open_connections == 1 { "" } else { "s" }
            ),
            SocketState::Refreshing => {
                "socket refreshing (opening a new connection before the old one closes)".to_owned()
            }
            SocketState::Retrying { failures } => {
                format!("socket reconnecting after {failures} failed attempt(s)")
            }
            SocketState::Halted(reason) => format!("stopped receiving: {reason}"),
            SocketState::Stopped => "socket stopped".to_owned(),
        };
        let mut line = format!(
            "bot {bot}; {state}; connections opened {}, refreshes {}, last disconnect {}; envelopes acked {}, received {}, ignored {}, duplicates {}, refused clicks answered {}; sent {}, edited {}, rate limited {}, retries {}; typing: none (Slack has no bot typing indicator)",
            stats.connections_opened,
            stats.refreshes,
            stats.last_disconnect.as_deref().unwrap_or("none"),
            stats.acked,
            stats.received,
            stats.ignored,
            stats.duplicates,
            stats.clicks_refused,
            stats.sent,
            stats.edited,
            stats.rate_limited,
            retries + stats.connect_failures,
        );
        if stats.unreadable_frames > 0 {
            line.push_str(&format!("; unreadable frames {}", stats.unreadable_frames));
        }
        let halted_for = match &stats.state {
            SocketState::Halted(reason) => Some(reason),
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
        // Every text above is already free of tokens; this is the last line of defence.
        self.shared.api.scrub(&line)
    }
}

#[cfg(test)]
mod topic_tests {
    use super::*;

    fn refused(code: &str) -> ApiError {
        ApiError::Refused {
            method: "chat.update",
            code: code.to_owned(),
            hint: String::new(),
        }
    }

    #[test]
    fn slacks_thread_refusals_are_sorted_into_what_the_broker_does() {
        assert!(matches!(
            topic_error(refused("message_not_found"), "C1", true),
            TopicError::Gone(_)
        ));
        assert!(matches!(
            topic_error(refused("message_not_found"), "C1", false),
            TopicError::Failed(_)
        ));
        let invite = topic_error(refused("not_in_channel"), "C1", false);
        assert!(
            matches!(&invite, TopicError::MissingPermission(t) if t.contains("/invite")),
            "{invite:?}"
        );
        let setting = topic_error(refused("channel_not_found"), "C1", false);
        assert!(
            matches!(&setting, TopicError::MissingPermission(t) if t.contains("sessionTopics")),
            "{setting:?}"
        );
        let scope = ApiError::MissingScope {
            method: "chat.postMessage",
            needed: "chat:write".into(),
        };
        let scope = topic_error(scope, "C1", false);
        assert!(
            matches!(&scope, TopicError::MissingPermission(t) if t.contains("chat:write")),
            "{scope:?}"
        );
    }

    #[test]
    fn a_thread_title_stays_bold_unless_the_name_has_a_star() {
        assert_eq!(thread_title("api · api · h"), "*Session api · api · h*");
        assert_eq!(thread_title("a*b"), "Session a*b");
    }
}
