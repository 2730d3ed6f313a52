//! The Discord transport itself: its configuration, the counters and gateway state it
//! shares with the gateway task, and its [`transport_core::Transport`] implementation.
//! The crate root only lists the modules and re-exports what callers use.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use transport_core::http_client::tls_config;
use transport_core::jitter::{self, Jitter};
use transport_core::platform::BotSelf;
use transport_core::retry::RetryPolicy;
use transport_core::sync::lock;
use transport_core::{
    BotIdentity, Capabilities, FetchedAttachment, InboundSink, LengthUnit, Markup, OutboundFile,
    OutboundMessage, Reaction, Secret, SendReceipt, Topic, TopicError, TopicNaming, Transport,
    TransportError, own_message_id,
};

use crate::client::{ApiError, ClientSettings, RestApi, Upload, bot_token, looks_like_bot_token};
use crate::gateway::{Gateway, GatewaySettings, IdentifyBudget, Queued};
use crate::normalize::TRANSPORT_ID;
use crate::state::{GatewayState, Shared, Stats};
use crate::{components, gateway, settings, wire};

/// What Discord can do (docs/architecture.md#transports-and-their-shared-core): 2000 per
/// message, counted by Discord in code points and declared here in UTF-16 units (never more
/// than the code points, so a piece within 2000 units is within Discord's limit whatever it
/// holds); markdown; edits, attachments, typing. No threads: a thread is a channel of its
/// own.
pub const CAPABILITIES: Capabilities = Capabilities {
    threads: false,
    edit: true,
    attachments: true,
    typing: true,
    max_message_length: 2000,
    length_unit: LengthUnit::Utf16,
    markup: Markup::Markdown,
    reactions: true,
    drafts: false,
};

/// The emoji of each reaction: any Unicode emoji works on Discord.
pub fn reaction_emoji(reaction: Reaction) -> &'static str {
    match reaction {
        Reaction::Received => "👀",
        Reaction::Done => "✅",
        Reaction::Failed => "❌",
    }
}

/// How a [`DiscordTransport`] is set up. [`DiscordConfig::new`] gives the defaults the
/// settings declare; tests shorten the timeouts and waits.
#[derive(Clone)]
pub struct DiscordConfig {
    /// The bot token. Never shown: `Debug` hides it.
    pub token: String,
    /// Name of the environment variable the token came from, for error messages.
    pub token_env: String,
    /// REST base URL including the version (`https://discord.com/api/v10`).
    pub base_url: String,
    /// Gateway URL to use instead of the one `GET /gateway/bot` names.
    pub gateway_url: Option<String>,
    /// Timeout of every REST request.
    pub request_timeout: Duration,
    /// Timeout of an attachment download.
    pub download_timeout: Duration,
    /// Per gateway connection: HELLO and READY/RESUMED must arrive within this (I31).
    pub ready_timeout: Duration,
    /// Shortest time between two IDENTIFYs (Discord: 5 s).
    pub identify_interval: Duration,
    /// The random wait after op 9 INVALID_SESSION lies between these (Discord: 1–5 s).
    pub invalid_session_wait: (Duration, Duration),
    /// Retries within one REST call.
    pub request_policy: RetryPolicy,
    /// The gateway's reconnect backoff.
    pub reconnect_policy: RetryPolicy,
    /// Shortest time between two typing calls to one channel (Discord shows one 10 s).
    pub typing_interval: Duration,
    /// The largest file the agent may upload (`maxUploadBytes`).
    pub max_upload_bytes: u64,
    /// `Some(x)`: every jitter draw is `x` (tests); `None`: the system's randomness.
    pub fixed_jitter: Option<f64>,
    /// `sessionTopics` as written: the channel the broker makes a thread per session in;
    /// `None`: no threads.
    pub session_topics: Option<String>,
}

impl DiscordConfig {
    /// The defaults for `token` against `base_url`.
    pub fn new(token: impl Into<String>, base_url: impl Into<String>) -> DiscordConfig {
        DiscordConfig {
            token: token.into(),
            token_env: settings::DEFAULT_TOKEN_ENV.to_owned(),
            base_url: base_url.into(),
            gateway_url: None,
            request_timeout: Duration::from_secs(15),
            download_timeout: Duration::from_secs(60),
            ready_timeout: Duration::from_secs(
                settings::DEFAULT_READY_TIMEOUT_SECONDS.unsigned_abs(),
            ),
            identify_interval: gateway::IDENTIFY_INTERVAL,
            invalid_session_wait: (Duration::from_secs(1), Duration::from_secs(5)),
            request_policy: RetryPolicy::REQUEST,
            reconnect_policy: RetryPolicy::RECONNECT,
            typing_interval: Duration::from_secs(8),
            max_upload_bytes: settings::DEFAULT_MAX_UPLOAD_BYTES.unsigned_abs(),
            fixed_jitter: None,
            session_topics: None,
        }
    }

    fn jitter(&self) -> Box<dyn Jitter> {
        jitter::source(self.fixed_jitter)
    }
}

impl std::fmt::Debug for DiscordConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordConfig")
            .field("token", &"<hidden>")
            .field("token_env", &self.token_env)
            .field("base_url", &self.base_url)
            .field("gateway_url", &self.gateway_url)
            .field("ready_timeout", &self.ready_timeout)
            .finish_non_exhaustive()
    }
}

/// Why a transport could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The token cannot be a bot token (the value is never shown).
    #[error(
        "the value of ${env} does not look like a Discord bot token (three parts joined by dots, as Developer Portal → your application → Bot → Reset Token shows it); export the token again"
    )]
    MalformedToken {
        /// The variable's name.
        env: String,
    },
    /// A URL or the HTTP client is unusable.
    #[error("{0}")]
    Client(String),
}

/// Who the bot is, from `GET /users/@me`.
#[derive(Debug, Clone)]
struct Me {
    id: String,
    name: String,
}

struct Running {
    cancel: CancellationToken,
    gateway: tokio::task::JoinHandle<()>,
    delivery: tokio::task::JoinHandle<()>,
}

/// The Discord transport.
pub struct DiscordTransport {
    shared: Arc<Shared>,
    config: DiscordConfig,
    token: Secret,
    me: Mutex<Option<Me>>,
    /// Held across `start` and `stop`, so two starts cannot both open a gateway.
    lifecycle: tokio::sync::Mutex<Option<Running>>,
    /// Between a successful `start` and `stop`: sends are allowed.
    started: AtomicBool,
    /// When the last typing call went to each channel.
    typing: Mutex<HashMap<String, tokio::time::Instant>>,
    /// The gateway's TLS setup (only for `wss://`).
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for DiscordTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordTransport")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The most characters a thread's name may hold (1–100).
pub const THREAD_NAME_MAX_CHARS: usize = 100;

/// Discord's JSON code for a channel (a thread) that does not exist.
const UNKNOWN_CHANNEL: i64 = 10003;

/// What Discord's refusal of a thread call means for the broker: 403 (50001 Missing
/// Access, 50013 Missing Permissions) names the permissions to give; 10003 Unknown Channel
/// on the thread is a thread deleted by hand, on the channel a wrong `sessionTopics`.
fn topic_error(error: ApiError, channel: &str, on_thread: bool) -> TopicError {
    match error {
        ApiError::NotFound {
            code: UNKNOWN_CHANNEL,
            ..
        } if on_thread => TopicError::Gone(error.to_string()),
        ApiError::Forbidden {
            call,
            code,
            message,
        } => TopicError::MissingPermission(format!(
            "give the bot's role View Channel, Create Public Threads, Send Messages in Threads \
             and Manage Threads in channel {channel} (Discord refused {call}: {message}, code \
             {code})"
        )),
        error @ ApiError::NotFound { .. } => TopicError::MissingPermission(format!(
            "channel {channel} was not found: check transports.discord.sessionTopics and that \
             the bot can see the channel ({error})"
        )),
        other => TopicError::Failed(other.to_string()),
    }
}

fn send_error(error: ApiError) -> TransportError {
    match error {
        ApiError::RateLimited { retry_after_ms, .. } => {
            TransportError::RateLimited { retry_after_ms }
        }
        other => TransportError::Failed(other.to_string()),
    }
}

/// The media type of downloaded bytes (I25): what the bytes' magic numbers say when they
/// say anything; otherwise the served `Content-Type` (before `;`, trimmed, lower-cased),
/// except that an image type the bytes do not bear out becomes
/// `application/octet-stream`, so a page that only claims to be a picture is never handed
/// to the agent as one.
pub fn served_media_type(header: Option<&str>, data: &[u8]) -> String {
    if let Some(kind) = infer::get(data) {
        return kind.mime_type().to_owned();
    }
    header
        .and_then(|value| value.split(';').next())
        .map(|value| value.trim().to_ascii_lowercase())
        .filter(|value| !value.is_empty() && !value.starts_with("image/"))
        .unwrap_or_else(|| "application/octet-stream".to_owned())
}

impl DiscordTransport {
    /// A stopped transport; no I/O until `identify` or `start`.
    pub fn new(config: DiscordConfig) -> Result<DiscordTransport, ConfigError> {
        let token = bot_token(&config.token);
        if !looks_like_bot_token(&token) {
            return Err(ConfigError::MalformedToken {
                env: config.token_env.clone(),
            });
        }
        if let Some(url) = &config.gateway_url {
            gateway::connect_url(url).map_err(ConfigError::Client)?;
        }
        let api = RestApi::new(
            ClientSettings {
                base_url: config.base_url.clone(),
                token: token.clone(),
                token_env: config.token_env.clone(),
                request_timeout: config.request_timeout,
                download_timeout: config.download_timeout,
                policy: config.request_policy,
            },
            config.jitter(),
        )
        .map_err(ConfigError::Client)?;
        // tungstenite runs over HTTP/1.1 only.
        let tls = tls_config("Discord", &[b"http/1.1"])
            .map_err(|error| ConfigError::Client(error.to_string()))?;
        Ok(DiscordTransport {
            shared: Arc::new(Shared {
                api,
                stats: Mutex::new(Stats::default()),
                presses: transport_core::presses::Presses::default(),
            }),
            config,
            token,
            me: Mutex::new(None),
            lifecycle: tokio::sync::Mutex::new(None),
            started: AtomicBool::new(false),
            typing: Mutex::new(HashMap::new()),
            tls: Arc::new(tls),
        })
    }

    /// Answers press `press` with `text` in an ephemeral follow-up only the clicker sees
    /// (`POST /webhooks/{application_id}/{interaction_token}`, flags 64): the click was
    /// already acknowledged with a deferred update, so a follow-up is the one way left to
    /// say something to the clicker alone. A press the book no longer has (older than the
    /// token's 15 minutes) fails, and nothing is posted.
    async fn answer_privately(
        &self,
        press: &str,
        text: &str,
    ) -> Result<SendReceipt, TransportError> {
        let Some(answer) = self.shared.presses.get(press, std::time::Instant::now()) else {
            return Err(TransportError::Failed(format!(
                "Discord can no longer answer button click {press} privately: its interaction token expired after 15 minutes, or it was never handed out"
            )));
        };
        let id = self
            .shared
            .api
            .create_followup(
                &answer.application_id,
                &answer.interaction_id,
                &answer.token,
                text,
            )
            .await
            .map_err(send_error)?;
        self.shared.update(|stats| stats.sent += 1);
        Ok(SendReceipt {
            message_id: id,
            edit_key: None,
        })
    }

    /// The channel from `sessionTopics`: a snowflake (digits), or what to write instead.
    fn topic_channel(&self) -> Result<String, TopicError> {
        let written = self
            .config
            .session_topics
            .as_deref()
            .unwrap_or_default()
            .trim();
        if !written.is_empty() && written.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(written.to_owned());
        }
        Err(TopicError::Unsupported(format!(
            "transports.discord.sessionTopics is {written:?}, not a channel id: write the text \
             channel's id (digits; Developer Mode on, then right-click the channel, Copy \
             Channel ID)"
        )))
    }

    fn not_started(&self) -> TransportError {
        TransportError::NotStarted(TRANSPORT_ID.to_owned())
    }

    fn is_started(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }

    /// `GET /users/@me`, remembered.
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
        if user.id.is_empty() {
            return Err(TransportError::Failed(
                "Discord /users/@me returned an empty bot id; check baseUrl".to_owned(),
            ));
        }
        let name = Some(user.username.clone())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| user.id.clone());
        let me = Me { id: user.id, name };
        self.shared
            .update(|stats| stats.bot = Some(format!("{} ({})", me.name, me.id)));
        *lock(&self.me) = Some(me.clone());
        Ok(me)
    }

    async fn edit(
        &self,
        channel: &str,
        key: &str,
        text: &str,
        rows: &[wire::ActionRow],
    ) -> Result<SendReceipt, TransportError> {
        match self.shared.api.edit_message(channel, key, text, rows).await {
            Ok(()) => {}
            // Unknown message (deleted), or not the bot's (403 50005): the bridge posts a
            // new message instead (I21).
            Err(
                error @ (ApiError::NotFound { .. }
                | ApiError::Forbidden { code: 50005, .. }
                | ApiError::Rejected { status: 400, .. }),
            ) => {
                return Err(TransportError::EditRejected(format!(
                    "Discord refused to edit message {key}: {error}"
                )));
            }
            Err(error) => return Err(send_error(error)),
        }
        self.shared.update(|stats| stats.edited += 1);
        Ok(SendReceipt {
            message_id: key.to_owned(),
            edit_key: Some(key.to_owned()),
        })
    }

    /// Stops the gateway and the delivery task of `running`, waiting for both.
    async fn shut(&self, running: Running) {
        running.cancel.cancel();
        let _ = running.gateway.await;
        let _ = running.delivery.await;
    }
}

/// Longest a click waits for its acknowledgement before it is delivered anyway.
const ACK_WAIT: Duration = Duration::from_secs(10);

/// Hands queued envelopes to the session one at a time, in order, each only after the
/// previous one was handled.
async fn deliver(
    shared: Arc<Shared>,
    sink: InboundSink,
    mut queue: mpsc::UnboundedReceiver<Queued>,
    cancel: CancellationToken,
) {
    loop {
        let Queued {
            envelope,
            acknowledged,
        } = tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            queued = queue.recv() => match queued {
                Some(queued) => queued,
                None => return,
            },
        };
        if let Some(acknowledged) = acknowledged {
            // The callback is one bounded attempt; this bound only guards against a task
            // that never ends, so a stuck acknowledgement cannot stall every message.
            tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                _ = tokio::time::timeout(ACK_WAIT, acknowledged) => {}
            }
        }
        shared.update(|stats| stats.queued = stats.queued.saturating_sub(1));
        let delivered = tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            delivered = sink.deliver_and_wait(envelope) => delivered,
        };
        if delivered.is_err() {
            shared.update(|stats| {
                let text = "the session no longer takes messages".to_owned();
                stats.state = GatewayState::Halted(text.clone());
                stats.last_error = Some(text);
            });
            // Nobody listens any more: the gateway closes too.
            cancel.cancel();
            return;
        }
        shared.update(|stats| stats.received += 1);
    }
}

#[async_trait]
impl Transport for DiscordTransport {
    fn id(&self) -> &str {
        TRANSPORT_ID
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    async fn identify(&self) -> Result<BotIdentity, TransportError> {
        let me = self.who_am_i().await?;
        Ok(BotIdentity {
            bot_id: me.id.clone(),
            bot_name: me.name.clone(),
            lock_name: Some(format!("discord-{}", me.id)),
        })
    }

    /// Checks the token (`GET /users/@me`, unless `identify` did), asks `GET /gateway/bot`
    /// where to connect and how many sessions are left, then connects and returns once
    /// READY arrived. A refused token, a fatal close code (a missing intent), a used-up
    /// session limit or no READY within the deadline fail `start` itself, so the host
    /// reports it (I16); after that, failures reconnect in the background.
    async fn start(&self, sink: InboundSink) -> Result<(), TransportError> {
        let mut lifecycle = self.lifecycle.lock().await;
        if lifecycle.is_some() {
            return Err(TransportError::AlreadyStarted(TRANSPORT_ID.to_owned()));
        }
        let me = self.who_am_i().await?;
        let bot = self.shared.api.gateway_bot().await.map_err(|error| {
            let text = error.to_string();
            self.shared.update(|stats| {
                stats.state = GatewayState::Halted(text.clone());
                stats.last_error = Some(text.clone());
            });
            TransportError::Failed(text)
        })?;
        let mut budget = IdentifyBudget::new(self.config.identify_interval);
        if let Some(limit) = bot.session_start_limit {
            budget.learn(limit, tokio::time::Instant::now());
        }
        let (gateway_url, url_fixed) = match &self.config.gateway_url {
            Some(url) => (url.clone(), true),
            None => (bot.url, false),
        };
        let cancel = CancellationToken::new();
        let (queue, queued) = mpsc::unbounded_channel();
        let (first, ready) = oneshot::channel();
        let gateway = Gateway {
            shared: self.shared.clone(),
            settings: GatewaySettings {
                intents: wire::intents::BRIDGE,
                ready_timeout: self.config.ready_timeout,
                identify_interval: self.config.identify_interval,
                invalid_session_wait: self.config.invalid_session_wait,
                reconnect: self.config.reconnect_policy,
            },
            token: self.token.clone(),
            token_env: self.config.token_env.clone(),
            me: BotSelf {
                id: me.id.clone(),
                username: me.name.clone(),
            },
            sink: sink.clone(),
            deliveries: queue,
            cancel: cancel.clone(),
            jitter: Mutex::new(self.config.jitter()),
            gateway_url,
            url_fixed,
            budget,
            first: Some(first),
            tls: Some(self.tls.clone()),
            progress: Default::default(),
        };
        let running = Running {
            cancel: cancel.clone(),
            gateway: tokio::spawn(gateway.run()),
            delivery: tokio::spawn(deliver(self.shared.clone(), sink, queued, cancel)),
        };
        // The gateway fails a connection that does not get READY in time by itself; this
        // bound only covers connecting attempts that keep failing before that.
        let bound = self.config.ready_timeout + self.config.request_timeout;
        let outcome = match tokio::time::timeout(bound, ready).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(text))) => Err(text),
            Ok(Err(_)) | Err(_) => {
                let last = self.shared.stats().last_error.clone();
                Err(format!(
                    "the Discord gateway did not become ready within {} s{}",
                    bound.as_secs(),
                    last.map(|last| format!(" (last problem: {last})"))
                        .unwrap_or_default()
                ))
            }
        };
        match outcome {
            Ok(()) => {
                self.started.store(true, Ordering::SeqCst);
                *lifecycle = Some(running);
                Ok(())
            }
            Err(text) => {
                self.shut(running).await;
                let text = self.token.scrub(&text);
                self.shared.update(|stats| {
                    stats.state = GatewayState::Halted(text.clone());
                    stats.last_error = Some(text.clone());
                });
                Err(TransportError::Failed(text))
            }
        }
    }

    async fn stop(&self) {
        let mut lifecycle = self.lifecycle.lock().await;
        self.started.store(false, Ordering::SeqCst);
        let Some(running) = lifecycle.take() else {
            return;
        };
        self.shut(running).await;
        self.shared.update(|stats| {
            if !matches!(stats.state, GatewayState::Halted(_)) {
                stats.state = GatewayState::Stopped;
            }
            stats.resumable = false;
        });
    }

    /// Posts or edits. A thread id is ignored: a Discord thread is a channel, and its id
    /// is already the conversation id.
    async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
        if !self.is_started() {
            return Err(self.not_started());
        }
        if let Some(press) = &message.answers_press {
            return self.answer_privately(press, &message.text).await;
        }
        let channel = message.conversation_id.as_str();
        let rows = components::action_rows(&message.buttons);
        let sent = match message.edit_key.as_deref() {
            Some(key) => self.edit(channel, key, &message.text, &rows).await,
            None => match self
                .shared
                .api
                .create_message(
                    channel,
                    &message.text,
                    &rows,
                    message.reply_to.as_deref().map(own_message_id),
                )
                .await
            {
                Ok(id) => {
                    self.shared.update(|stats| stats.sent += 1);
                    Ok(SendReceipt {
                        edit_key: Some(id.clone()),
                        message_id: id,
                    })
                }
                Err(error) => Err(send_error(error)),
            },
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
    /// two reactions, never none. Needs the Add Reactions and Read Message History
    /// permissions in a server channel (docs/platforms.md#reactions).
    async fn react(
        &self,
        conversation_id: &str,
        message_id: &str,
        reaction: Reaction,
        replaces: Option<Reaction>,
    ) -> Result<(), TransportError> {
        if !self.is_started() {
            return Err(self.not_started());
        }
        let api = &self.shared.api;
        let message_id = own_message_id(message_id);
        api.own_reaction(true, conversation_id, message_id, reaction_emoji(reaction))
            .await
            .map_err(send_error)?;
        if let Some(old) = replaces.filter(|old| *old != reaction) {
            api.own_reaction(false, conversation_id, message_id, reaction_emoji(old))
                .await
                .map_err(send_error)?;
        }
        Ok(())
    }

    /// Best effort (I24): never fails, at most one call per channel every
    /// `typing_interval` (Discord shows the indicator for 10 s), one attempt.
    async fn typing(
        &self,
        conversation_id: &str,
        _thread_id: Option<&str>,
    ) -> Result<(), TransportError> {
        if !self.is_started() {
            return Ok(());
        }
        let now = tokio::time::Instant::now();
        {
            let mut last = lock(&self.typing);
            let interval = self.config.typing_interval;
            if last
                .get(conversation_id)
                .is_some_and(|at| now.duration_since(*at) < interval)
            {
                return Ok(());
            }
            last.retain(|_, at| now.duration_since(*at) < interval);
            last.insert(conversation_id.to_owned(), now);
        }
        if self
            .shared
            .api
            .trigger_typing(conversation_id)
            .await
            .is_err()
        {
            self.shared.update(|stats| stats.typing_failures += 1);
        }
        Ok(())
    }

    fn max_upload_bytes(&self) -> u64 {
        self.config.max_upload_bytes
    }

    async fn send_file(&self, file: OutboundFile) -> Result<SendReceipt, TransportError> {
        if !self.is_started() {
            return Err(self.not_started());
        }
        let limit = self.config.max_upload_bytes;
        if file.data.len() as u64 > limit {
            return Err(TransportError::Failed(format!(
                "Discord takes files of up to {limit} bytes here (transports.discord.maxUploadBytes); this one is {} bytes",
                file.data.len()
            )));
        }
        let upload = Upload {
            name: &file.name,
            media_type: &file.media_type,
            caption: &file.caption,
            data: &file.data,
        };
        // A thread is a channel of its own on Discord: the conversation names it already.
        let sent = self
            .shared
            .api
            .upload_file(&file.conversation_id, &upload)
            .await;
        match sent {
            Ok(id) => {
                self.shared.update(|stats| stats.sent += 1);
                Ok(SendReceipt {
                    message_id: id,
                    edit_key: None,
                })
            }
            Err(error) => {
                let error = match error {
                    ApiError::Rejected { status: 413, .. } => TransportError::Failed(
                        "Discord refused the file as too large for this server (HTTP 413): its \
                         limit is lower than transports.discord.maxUploadBytes, so lower that \
                         setting to the server's limit"
                            .to_owned(),
                    ),
                    other => send_error(other),
                };
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
            return Err(self.not_started());
        }
        let (content_type, data) = self
            .shared
            .api
            .download(reference, max_bytes)
            .await
            .map_err(|error| TransportError::Failed(self.token.scrub(&error.to_string())))?;
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
            max_chars: THREAD_NAME_MAX_CHARS,
        }
    }

    async fn create_topic(&self, name: &str) -> Result<Topic, TopicError> {
        let channel = self.topic_channel()?;
        let thread = self
            .shared
            .api
            .start_thread(&channel, name)
            .await
            .map_err(|error| topic_error(error, &channel, false))?;
        // A thread is a channel: its messages carry its id as `channel_id`.
        Ok(Topic {
            conversation_id: thread,
            thread_id: None,
        })
    }

    async fn resume_topic(&self, topic: &Topic, name: &str) -> Result<(), TopicError> {
        self.shared
            .api
            .modify_thread(&topic.conversation_id, name, false)
            .await
            .map_err(|error| topic_error(error, &topic.conversation_id, true))
    }

    async fn end_topic(&self, topic: &Topic, name: &str) -> Result<(), TopicError> {
        self.shared
            .api
            .modify_thread(&topic.conversation_id, name, true)
            .await
            .map_err(|error| topic_error(error, &topic.conversation_id, true))
    }

    fn topic_gone(&self, error: &TransportError) -> bool {
        // `send_error` keeps the refusal's text: "… (HTTP 404, code 10003); …".
        matches!(error, TransportError::Failed(text) if text.contains("HTTP 404, code 10003"))
    }

    fn diagnose(&self) -> String {
        let retries = self.shared.api.retries();
        let waits = self.shared.api.wait_stats();
        let stats = self.shared.stats();
        let bot = stats.bot.as_deref().unwrap_or("not identified yet");
        let state = match &stats.state {
            GatewayState::NotStarted => "gateway not started".to_owned(),
            GatewayState::Connecting => "gateway connecting".to_owned(),
            GatewayState::Identifying => "gateway identifying".to_owned(),
            GatewayState::Resuming => "gateway resuming".to_owned(),
            GatewayState::Ready => "gateway ready".to_owned(),
            GatewayState::Reconnecting { failures, reason } => {
                format!("gateway reconnecting after {failures} failure(s): {reason}")
            }
            GatewayState::Halted(reason) => format!("stopped receiving: {reason}"),
            GatewayState::Stopped => "stopped".to_owned(),
        };
        let session = match (stats.resumable, stats.seq) {
            (true, Some(seq)) => format!("session resumable at seq {seq}"),
            (true, None) => "session resumable".to_owned(),
            (false, _) => "no resumable session".to_owned(),
        };
        let mut line = format!(
            "bot {bot}; {state}; {session}; received {}, ignored {}, duplicates dropped {}, queued {}, sent {}, edited {}; clicks taken {}, refused {}, unacknowledged {}; connections {}, identifies {}, resumes {}, reconnects {}; rate limited {}, bucket waits {} ({} ms), retries {}, typing failures {}",
            stats.received,
            stats.ignored,
            stats.duplicates,
            stats.queued,
            stats.sent,
            stats.edited,
            stats.clicks_taken,
            stats.clicks_refused,
            stats.click_ack_failures,
            stats.connections,
            stats.identifies,
            stats.resumes,
            stats.reconnects,
            waits.limited,
            waits.waits,
            waits.waited.as_millis(),
            retries,
            stats.typing_failures,
        );
        if stats.malformed_frames > 0 {
            line.push_str(&format!(", unreadable frames {}", stats.malformed_frames));
        }
        if let Some((code, reason)) = &stats.last_close {
            line.push_str(&format!("; last close code {code}"));
            if !reason.is_empty() {
                line.push_str(&format!(" ({reason})"));
            }
        }
        let halted_for = match &stats.state {
            GatewayState::Halted(reason) => Some(reason),
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
        self.token.scrub(&line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discords_thread_refusals_are_sorted_into_what_the_broker_does() {
        let unknown = || ApiError::NotFound {
            call: "modify thread",
            code: 10003,
            message: "Unknown Channel".into(),
            hint: String::new(),
        };
        let forbidden = ApiError::Forbidden {
            call: "start thread",
            code: 50013,
            message: "Missing Permissions".into(),
        };
        // The thread gone: made again. The channel gone: the setting is wrong.
        assert!(matches!(
            topic_error(unknown(), "1", true),
            TopicError::Gone(_)
        ));
        let channel = topic_error(unknown(), "1", false);
        assert!(
            matches!(&channel, TopicError::MissingPermission(t) if t.contains("sessionTopics")),
            "{channel:?}"
        );
        let rights = topic_error(forbidden, "1", false);
        assert!(
            matches!(&rights, TopicError::MissingPermission(t) if t.contains("Create Public Threads")),
            "{rights:?}"
        );
        let slow = ApiError::Timeout {
            call: "start thread",
            seconds: 15,
        };
        assert!(matches!(
            topic_error(slow, "1", false),
            TopicError::Failed(_)
        ));
        // A send into a deleted thread says 10003 in its text.
        let transport = DiscordTransport::new(DiscordConfig::new(
            "MTIzNDU2Nzg5MDEyMzQ1Njc4.GLoopB.loopback-token_AAbbCCddEEff",
            "http://127.0.0.1:9/api/v10",
        ))
        .expect("builds");
        assert!(transport.topic_gone(&send_error(unknown())));
        let other = ApiError::NotFound {
            call: "create message",
            code: 10008,
            message: "Unknown Message".into(),
            hint: String::new(),
        };
        assert!(!transport.topic_gone(&send_error(other)));
    }

    #[test]
    fn the_media_type_is_what_the_bytes_are() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        assert_eq!(served_media_type(Some("text/plain"), png), "image/png");
        assert_eq!(
            served_media_type(Some("Text/Plain; charset=utf-8"), b"hello"),
            "text/plain"
        );
        // Claimed to be a picture, but the bytes are a page, or nothing known.
        assert_eq!(
            served_media_type(Some("image/png"), b"<html>not a picture</html>"),
            "text/html"
        );
        assert_eq!(
            served_media_type(Some("image/png"), b"plain words"),
            "application/octet-stream"
        );
        assert_eq!(served_media_type(None, b"?"), "application/octet-stream");
    }
}
