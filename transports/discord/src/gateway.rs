//! The Gateway v10 connection: HELLO → heartbeat → IDENTIFY or RESUME → READY/RESUMED →
//! events, and every way it ends
//! (docs/protocols.md#discord-connecting-heartbeats-and-resuming,
//! docs/protocols.md#discord-close-codes).
//!
//! One task runs the connection loop for as long as the transport runs:
//!
//! - **Connecting**: `GET /gateway/bot` gave the URL (cached) and the session start limit;
//!   `?v=10&encoding=json` is added (no compression: plain JSON text frames). A RESUME
//!   goes to READY's `resume_gateway_url` instead.
//! - **Deadline** (I31): every connection arms a deadline when it opens; HELLO and then
//!   READY or RESUMED must arrive before it, or the connection is closed and another one
//!   made with backoff. During `start` that deadline failing fails `start`.
//! - **Heartbeat**: the first beat after `heartbeat_interval × jitter`, then one per
//!   interval, each carrying the last sequence number. A beat due while the previous one
//!   is still unacknowledged means the connection is a zombie: it is closed with 4000
//!   (not 1000, which would end the session) and the session resumed. A HEARTBEAT from
//!   Discord is answered at once.
//! - **Reconnect and resume**: op 7 RECONNECT, a dropped socket, a missed ACK and any
//!   close code Discord marks as reconnectable resume the session (session id and last
//!   sequence); op 9 INVALID_SESSION resumes when `d` is true and starts a new session
//!   when it is false, after the documented random wait of 1–5 s; close codes 4007 and
//!   4009 start a new session. Waits come from the shared [`Backoff`], which READY and
//!   RESUMED reset.
//! - **Fatal close codes** 4004 and 4010–4014 stop the gateway: retrying cannot fix a
//!   bad token or a missing intent. The text names the fix and reaches the terminal at once
//!   ([`InboundSink::alert`]) and `diagnose`.
//! - **IDENTIFY rate**: a new session is started no sooner than [`IDENTIFY_INTERVAL`]
//!   after the previous one, and never while the day's session start limit is used up
//!   (Discord resets the token of a bot that goes over it).
//! - **No message lost or duplicated**: every MESSAGE_CREATE goes into one ordered
//!   queue that outlives the connection, drained by a delivery task with
//!   `deliver_and_wait`; the heartbeat never waits for the session. The sequence
//!   number moves as events arrive, so a RESUME replays exactly what came after the last
//!   one received; an event replayed at or below it is not delivered again, and the last
//!   message ids delivered are remembered as a second guard.
//! - **Button clicks** (INTERACTION_CREATE): acknowledged at once by a task of their own
//!   ([`crate::interactions`]), so the 3-second deadline never waits on the session or
//!   on the gateway loop; a taken click joins the same queue, and the delivery task hands
//!   it on only once its acknowledgement was sent (or failed), so the session never
//!   answers a click before Discord has heard it was taken. Interactions need no intent.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message as WsMessage};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;
use transport_core::jitter::Jitter;
use transport_core::platform::{BotSelf, Normalized};
use transport_core::retry::{Backoff, Outcome, RetryPolicy};
use transport_core::sync::lock;
use transport_core::{Envelope, InboundSink, Secret};

use crate::interactions::acknowledgement;
use crate::normalize::{TRANSPORT_ID, normalize};
use crate::state::{GatewayState, PressToken, Shared};
use crate::wire::{
    Frame, Hello, Identify, IdentifyProperties, Ready, Resume, SessionStartLimit, op,
};

/// Discord's IDENTIFY rate for one shard: one per 5 seconds.
pub const IDENTIFY_INTERVAL: Duration = Duration::from_secs(5);

/// The close code this client uses when it reconnects: anything but 1000/1001 keeps the
/// session resumable (docs/protocols.md#discord-connecting-heartbeats-and-resuming).
pub const RESUMABLE_CLOSE: u16 = 4000;

/// How many delivered message ids are remembered to refuse a duplicate.
const RECENT_IDS: usize = 512;

/// Shortest and longest heartbeat interval accepted from HELLO: a 0 would spin, a day
/// would never notice a dead connection.
const HEARTBEAT_BOUNDS: (Duration, Duration) =
    (Duration::from_millis(10), Duration::from_secs(600));

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What a close code means for the connection (docs/protocols.md#discord-close-codes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseAction {
    /// Reconnect and resume the session.
    Resume,
    /// Reconnect with a new session (4007 invalid seq, 4009 session timed out).
    Reidentify,
    /// Stop: the configuration must be fixed. The text names the code and the fix.
    Fatal(String),
}

/// What a close code from Discord means; `token_env` names the token's variable.
pub fn classify_close(code: Option<u16>, token_env: &str) -> CloseAction {
    let fatal = |name: &str, fix: String| {
        CloseAction::Fatal(format!(
            "Discord closed the gateway with code {} ({name}): {fix}",
            code.unwrap_or_default()
        ))
    };
    match code {
        Some(4004) => fatal(
            "Authentication failed",
            format!(
                "the bot token in ${token_env} is not valid (reset or mistyped). Copy a new one (Developer Portal → your application → Bot → Reset Token), export it as {token_env} again and restart"
            ),
        ),
        Some(4010) => fatal(
            "Invalid shard",
            "bot-connect connects as one shard; this is a bug, please report it".to_owned(),
        ),
        Some(4011) => fatal(
            "Sharding required",
            "the bot is in too many servers (2,500 or more) for one gateway connection, and bot-connect does not shard; use a bot that is in fewer servers".to_owned(),
        ),
        Some(4012) => fatal(
            "Invalid API version",
            "this build speaks Gateway v10; if gatewayUrl is set, point it at a Discord gateway that serves v10".to_owned(),
        ),
        Some(4013) => fatal(
            "Invalid intent(s)",
            "the intents bot-connect asks for were refused; this is a bug, please report it".to_owned(),
        ),
        Some(4014) => fatal(
            "Disallowed intent(s)",
            "enable the Message Content intent in the Developer Portal (Applications → your application → Bot → Privileged Gateway Intents → Message Content Intent), save, and restart".to_owned(),
        ),
        Some(4007 | 4009) => CloseAction::Reidentify,
        _ => CloseAction::Resume,
    }
}

/// The gateway URL with `v=10&encoding=json` (any other query kept, compression never
/// asked for); only `ws://` and `wss://` are accepted.
pub fn connect_url(base: &str) -> Result<String, String> {
    let mut url = reqwest::Url::parse(base.trim())
        .map_err(|error| format!("the Discord gateway URL {base:?} is not a URL: {error}"))?;
    if !matches!(url.scheme(), "ws" | "wss") {
        return Err(format!(
            "the Discord gateway URL must start with wss:// (or ws:// for a local test server), not {}://",
            url.scheme()
        ));
    }
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(key, _)| !matches!(key.as_ref(), "v" | "encoding" | "compress"))
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect();
    url.query_pairs_mut()
        .clear()
        .extend_pairs(kept)
        .append_pair("v", "10")
        .append_pair("encoding", "json");
    Ok(url.into())
}

/// How many new sessions Discord still allows, and when the next may start.
#[derive(Debug, Clone)]
pub struct IdentifyBudget {
    total: u64,
    remaining: Option<u64>,
    reset_at: Option<Instant>,
    last: Option<Instant>,
    interval: Duration,
}

impl IdentifyBudget {
    /// A budget that allows one IDENTIFY per `interval` and knows no daily limit yet.
    pub fn new(interval: Duration) -> IdentifyBudget {
        IdentifyBudget {
            total: 0,
            remaining: None,
            reset_at: None,
            last: None,
            interval,
        }
    }

    /// Learns the limit from `GET /gateway/bot`, answered at `now`.
    pub fn learn(&mut self, limit: SessionStartLimit, now: Instant) {
        self.total = limit.total;
        self.remaining = Some(limit.remaining);
        self.reset_at = Some(now + Duration::from_millis(limit.reset_after));
    }

    /// How long to wait at `now` before the next IDENTIFY.
    pub fn wait(&self, now: Instant) -> Duration {
        let spacing = self.last.map_or(Duration::ZERO, |last| {
            (last + self.interval).saturating_duration_since(now)
        });
        let daily = match (self.remaining, self.reset_at) {
            (Some(0), Some(reset)) => reset.saturating_duration_since(now),
            _ => Duration::ZERO,
        };
        spacing.max(daily)
    }

    /// Records an IDENTIFY sent at `now`.
    pub fn spend(&mut self, now: Instant) {
        self.last = Some(now);
        if let Some(reset) = self.reset_at
            && reset <= now
        {
            // The day's count was reset; the next /gateway/bot says by how much.
            self.remaining = None;
            self.reset_at = None;
        }
        if let Some(remaining) = self.remaining.as_mut() {
            *remaining = remaining.saturating_sub(1);
        }
    }

    /// The text for a used-up daily limit that resets in `wait`.
    pub fn exhausted_text(&self, wait: Duration) -> String {
        format!(
            "Discord allows this bot {} new gateway sessions a day and they are used up (too many restarts or dropped sessions); new messages arrive again in about {} minutes, when Discord resets the count",
            self.total,
            wait.as_secs().div_ceil(60)
        )
    }
}

/// The last message ids delivered: a second guard against a duplicate.
#[derive(Debug, Default)]
struct RecentIds {
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl RecentIds {
    /// True when `id` is new (and remembers it).
    fn insert(&mut self, id: &str) -> bool {
        if id.is_empty() {
            return true;
        }
        if !self.set.insert(id.to_owned()) {
            return false;
        }
        self.order.push_back(id.to_owned());
        if self.order.len() > RECENT_IDS
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        true
    }
}

/// How the gateway is set up.
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    /// Intents sent with IDENTIFY.
    pub intents: u64,
    /// Per connection: HELLO and READY/RESUMED must arrive within this.
    pub ready_timeout: Duration,
    /// Shortest time between two IDENTIFYs.
    pub identify_interval: Duration,
    /// The random wait after INVALID_SESSION, between these two.
    pub invalid_session_wait: (Duration, Duration),
    /// Reconnect backoff.
    pub reconnect: RetryPolicy,
}

/// The session a RESUME continues.
#[derive(Debug, Clone)]
struct Session {
    id: String,
    resume_url: String,
}

/// Heartbeat schedule of one connection.
#[derive(Debug, Clone, Copy)]
struct Heart {
    interval: Duration,
    next: Instant,
    awaiting_ack: bool,
}

/// How long to wait before the next connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Discord asked (op 7) or the connection was a zombie: at once the first time.
    Soon,
    /// A failure: the shared backoff.
    Backoff,
    /// After INVALID_SESSION: a random 1–5 s.
    InvalidSession,
}

/// One draw handed to [`Backoff::failed`], which takes a `&mut dyn Jitter`.
struct JitterDraw(f64);

impl Jitter for JitterDraw {
    fn unit(&mut self) -> f64 {
        self.0
    }
}

/// What woke the connection loop.
enum Event {
    Cancelled,
    Deadline,
    Beat,
    Incoming(Option<Result<WsMessage, tungstenite::Error>>),
}

/// How one connection ended.
#[derive(Debug)]
enum Ended {
    Stopped,
    Fatal(String),
    /// HELLO and READY/RESUMED did not arrive before the connection's deadline.
    NoReady {
        reason: String,
    },
    Reconnect {
        resume: bool,
        wait: Wait,
        reason: String,
    },
}

/// One envelope waiting for the session, in arrival order.
pub(crate) struct Queued {
    pub(crate) envelope: Envelope,
    /// For a click: closes once its acknowledgement was sent or failed. The envelope is
    /// delivered only after that, so nothing the session does can precede it.
    pub(crate) acknowledged: Option<oneshot::Receiver<()>>,
}

/// What the gateway remembers between connections.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    session: Option<Session>,
    seq: Option<u64>,
    recent: RecentIds,
    identified_once: bool,
}

/// What the gateway task owns.
pub(crate) struct Gateway {
    pub(crate) shared: Arc<Shared>,
    pub(crate) settings: GatewaySettings,
    pub(crate) token: Secret,
    pub(crate) token_env: String,
    pub(crate) me: BotSelf,
    pub(crate) sink: InboundSink,
    pub(crate) deliveries: mpsc::UnboundedSender<Queued>,
    pub(crate) cancel: CancellationToken,
    /// In a mutex only so the gateway is `Sync` across awaits; one task uses it.
    pub(crate) jitter: std::sync::Mutex<Box<dyn Jitter>>,
    /// Where new sessions connect (from `/gateway/bot` or the `gatewayUrl` setting).
    pub(crate) gateway_url: String,
    /// `gatewayUrl` was set: `/gateway/bot`'s URL is not used.
    pub(crate) url_fixed: bool,
    pub(crate) budget: IdentifyBudget,
    /// Told once: the first READY, or why the gateway could not get there.
    pub(crate) first: Option<oneshot::Sender<Result<(), String>>>,
    /// TLS for `wss://` (a `ws://` test server needs none).
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    pub(crate) progress: Progress,
}

impl Gateway {
    /// Runs until stopped, a fatal close, or the session going away.
    pub(crate) async fn run(mut self) {
        let mut backoff = Backoff::new(self.settings.reconnect);
        loop {
            if self.progress.session.is_none() && !self.before_identify().await {
                return;
            }
            let ended = self.connection(&mut backoff).await;
            let (resume, wait, reason) = match ended {
                Ended::Stopped => return,
                Ended::Fatal(text) => {
                    self.halt(text);
                    return;
                }
                Ended::Reconnect {
                    resume,
                    wait,
                    reason,
                } => (resume, wait, reason),
                Ended::NoReady { reason } if self.first.is_some() => {
                    // During start a gateway that never gets ready fails start (the host
                    // reports it, I16) instead of retrying out of sight.
                    self.halt(format!(
                        "the Discord gateway did not become ready ({reason}); check the network, and gatewayUrl if it is set"
                    ));
                    return;
                }
                Ended::NoReady { reason } => (true, Wait::Backoff, reason),
            };
            if !resume {
                self.progress.session = None;
                self.progress.seq = None;
            }
            let failures_before = backoff.failures();
            let delay = match wait {
                Wait::InvalidSession => {
                    let (low, high) = self.settings.invalid_session_wait;
                    low + high.saturating_sub(low).mul_f64(self.draw())
                }
                Wait::Soon | Wait::Backoff => {
                    let delay = backoff
                        .failed(Outcome::Transient, &mut JitterDraw(self.draw()))
                        .unwrap_or(self.settings.reconnect.max);
                    // A first reconnect Discord asked for is immediate; a loop of them
                    // backs off like any other failure.
                    if wait == Wait::Soon && failures_before == 0 {
                        Duration::ZERO
                    } else {
                        delay
                    }
                }
            };
            let failures = backoff.failures();
            self.shared.update(|stats| {
                stats.reconnects += 1;
                stats.resumable = self.progress.session.is_some();
                stats.state = GatewayState::Reconnecting {
                    failures,
                    reason: reason.clone(),
                };
                stats.last_error = Some(reason.clone());
            });
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// One jitter draw in `[0, 1)`.
    fn draw(&self) -> f64 {
        lock(&self.jitter).unit()
    }

    /// Stops for good: `diagnose` shows `text`, and `start` or the terminal hears it.
    fn halt(&mut self, text: String) {
        self.shared.update(|stats| {
            stats.state = GatewayState::Halted(text.clone());
            stats.last_error = Some(text.clone());
            stats.resumable = false;
        });
        match self.first.take() {
            Some(first) => {
                let _ = first.send(Err(text));
            }
            None => self
                .sink
                .alert(TRANSPORT_ID, format!("stopped receiving messages: {text}")),
        }
    }

    /// Waits until a new session may start; false when stopped meanwhile (or the wait
    /// cannot end while `start` waits).
    async fn before_identify(&mut self) -> bool {
        if self.progress.identified_once {
            // A fresh look at the limit and the URL; the cached ones do if it fails.
            match self.shared.api.gateway_bot().await {
                Ok(bot) => {
                    if let Some(limit) = bot.session_start_limit {
                        self.budget.learn(limit, Instant::now());
                    }
                    if !self.url_fixed {
                        self.gateway_url = bot.url;
                    }
                }
                Err(error) => {
                    let text = error.to_string();
                    self.shared.update(|stats| stats.last_error = Some(text));
                }
            }
        }
        let wait = self.budget.wait(Instant::now());
        if wait.is_zero() {
            return true;
        }
        if wait > IDENTIFY_INTERVAL.max(self.settings.identify_interval) {
            let text = self.budget.exhausted_text(wait);
            if self.first.is_some() {
                self.halt(text);
                return false;
            }
            self.sink.alert(TRANSPORT_ID, text.clone());
            self.shared.update(|stats| {
                stats.state = GatewayState::Reconnecting {
                    failures: 0,
                    reason: text.clone(),
                };
                stats.last_error = Some(text);
            });
        }
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => false,
            () = tokio::time::sleep(wait) => true,
        }
    }

    async fn open(&self, url: &str) -> Result<Socket, String> {
        let connector = self.tls.clone().map(tokio_tungstenite::Connector::Rustls);
        match tokio_tungstenite::connect_async_tls_with_config(url, None, true, connector).await {
            Ok((socket, _)) => Ok(socket),
            Err(error) => Err(self.token.scrub(&describe_ws(&error))),
        }
    }

    /// One connection, from opening the socket to its end.
    async fn connection(&mut self, backoff: &mut Backoff) -> Ended {
        let resuming = self.progress.session.is_some();
        let base = match &self.progress.session {
            Some(session) => session.resume_url.clone(),
            None => self.gateway_url.clone(),
        };
        let url = match connect_url(&base) {
            Ok(url) => url,
            Err(text) => return Ended::Fatal(text),
        };
        self.shared.update(|stats| {
            stats.connections += 1;
            stats.state = if resuming {
                GatewayState::Resuming
            } else {
                GatewayState::Connecting
            };
        });
        // Armed on every connection (I31): HELLO, then READY or RESUMED, before it.
        let deadline = Instant::now() + self.settings.ready_timeout;
        let ready_ms = self.settings.ready_timeout.as_millis();
        let no_ready = move || Ended::NoReady {
            reason: format!("no READY within {ready_ms} ms of connecting"),
        };
        let opened = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Ended::Stopped,
            () = tokio::time::sleep_until(deadline) => return no_ready(),
            opened = self.open(&url) => opened,
        };
        let mut socket = match opened {
            Ok(socket) => socket,
            Err(detail) => {
                return Ended::Reconnect {
                    resume: true,
                    wait: Wait::Backoff,
                    reason: format!("could not connect to the Discord gateway: {detail}"),
                };
            }
        };
        let mut heart: Option<Heart> = None;
        let mut ready = false;
        loop {
            let beat_at = heart.map(|heart| heart.next);
            // The select only says what happened; acting on it (which needs the socket)
            // comes after, when no future borrows anything any more.
            let event = tokio::select! {
                biased;
                () = self.cancel.cancelled() => Event::Cancelled,
                () = tokio::time::sleep_until(deadline), if !ready => Event::Deadline,
                () = sleep_until_some(beat_at) => Event::Beat,
                incoming = socket.next() => Event::Incoming(incoming),
            };
            let incoming = match event {
                Event::Cancelled => {
                    // 1000: the session ends and the bot goes offline at once.
                    close(&mut socket, 1000, "bot-connect is stopping").await;
                    return Ended::Stopped;
                }
                Event::Deadline => {
                    close(&mut socket, RESUMABLE_CLOSE, "no READY in time").await;
                    return no_ready();
                }
                Event::Beat => {
                    let Some(beat) = heart.as_mut() else { continue };
                    if beat.awaiting_ack {
                        close(&mut socket, RESUMABLE_CLOSE, "heartbeat not acknowledged").await;
                        return Ended::Reconnect {
                            resume: true,
                            wait: Wait::Soon,
                            reason: "Discord did not acknowledge a heartbeat (a dead connection); resuming".to_owned(),
                        };
                    }
                    beat.awaiting_ack = true;
                    beat.next += beat.interval;
                    if let Err(ended) = self.heartbeat(&mut socket).await {
                        return ended;
                    }
                    continue;
                }
                Event::Incoming(incoming) => incoming,
            };
            let bytes: Vec<u8> = match incoming {
                None => {
                    return Ended::Reconnect {
                        resume: true,
                        wait: Wait::Backoff,
                        reason: "the gateway connection dropped without a close code".to_owned(),
                    };
                }
                Some(Err(error)) => {
                    return Ended::Reconnect {
                        resume: true,
                        wait: Wait::Backoff,
                        reason: format!(
                            "the gateway connection failed: {}",
                            self.token.scrub(&describe_ws(&error))
                        ),
                    };
                }
                Some(Ok(WsMessage::Close(frame))) => return self.closed(frame.as_ref()),
                Some(Ok(WsMessage::Text(text))) => text.as_bytes().to_vec(),
                Some(Ok(WsMessage::Binary(bytes))) => bytes.to_vec(),
                Some(Ok(_)) => continue,
            };
            let Ok(frame) = serde_json::from_slice::<Frame>(&bytes) else {
                // A frame that is not JSON (or zlib, which is never asked for) is dropped,
                // counted, and the connection goes on (C5).
                self.shared.update(|stats| stats.malformed_frames += 1);
                continue;
            };
            if let Some(ended) = self
                .on_frame(&mut socket, frame, &mut heart, &mut ready, backoff)
                .await
            {
                return ended;
            }
        }
    }

    /// Handles one frame; `Some` when the connection must end.
    async fn on_frame(
        &mut self,
        socket: &mut Socket,
        frame: Frame,
        heart: &mut Option<Heart>,
        ready: &mut bool,
        backoff: &mut Backoff,
    ) -> Option<Ended> {
        match frame.op {
            op::HELLO => {
                let interval = serde_json::from_value::<Hello>(frame.d)
                    .map(|hello| Duration::from_millis(hello.heartbeat_interval))
                    .unwrap_or(Duration::from_millis(41_250))
                    .clamp(HEARTBEAT_BOUNDS.0, HEARTBEAT_BOUNDS.1);
                // The first beat is jittered, so many clients that reconnect together
                // after an outage do not all beat in the same millisecond.
                let first = interval.mul_f64(self.draw());
                *heart = Some(Heart {
                    interval,
                    next: Instant::now() + first,
                    awaiting_ack: false,
                });
                let sent = match self.progress.session.clone() {
                    Some(session) => self.resume(socket, &session).await,
                    None => self.identify(socket).await,
                };
                sent.err()
            }
            op::HEARTBEAT_ACK => {
                if let Some(beat) = heart.as_mut() {
                    beat.awaiting_ack = false;
                }
                None
            }
            op::HEARTBEAT => self.heartbeat(socket).await.err(),
            op::RECONNECT => {
                close(socket, RESUMABLE_CLOSE, "reconnecting as asked").await;
                Some(Ended::Reconnect {
                    resume: true,
                    wait: Wait::Soon,
                    reason: "Discord asked to reconnect (op 7 RECONNECT)".to_owned(),
                })
            }
            op::INVALID_SESSION => {
                let resumable = frame.d.as_bool() == Some(true);
                close(socket, RESUMABLE_CLOSE, "invalid session").await;
                Some(Ended::Reconnect {
                    resume: resumable,
                    wait: Wait::InvalidSession,
                    reason: if resumable {
                        "Discord invalidated the session but allows resuming it (op 9)".to_owned()
                    } else {
                        "Discord invalidated the session (op 9); starting a new one".to_owned()
                    },
                })
            }
            op::DISPATCH => {
                self.dispatch(frame, ready, backoff);
                None
            }
            _ => None,
        }
    }

    fn dispatch(&mut self, frame: Frame, ready: &mut bool, backoff: &mut Backoff) {
        let replayed = match (frame.s, self.progress.seq) {
            (Some(seq), Some(last)) if seq <= last => true,
            (Some(seq), _) => {
                self.progress.seq = Some(seq);
                false
            }
            (None, _) => false,
        };
        let seq = self.progress.seq;
        match frame.t.as_deref() {
            Some("READY") => {
                let Ok(ready_event) = serde_json::from_value::<Ready>(frame.d) else {
                    self.shared.update(|stats| stats.malformed_frames += 1);
                    return;
                };
                self.progress.session = Some(Session {
                    id: ready_event.session_id,
                    resume_url: ready_event
                        .resume_gateway_url
                        .filter(|url| !url.is_empty())
                        .unwrap_or_else(|| self.gateway_url.clone()),
                });
                if !ready_event.user.id.is_empty() {
                    self.me.id = ready_event.user.id;
                }
                self.on_ready(ready, backoff, seq);
            }
            Some("RESUMED") => {
                self.shared.update(|stats| stats.resumes += 1);
                self.on_ready(ready, backoff, seq);
            }
            Some("MESSAGE_CREATE") => {
                if replayed {
                    self.shared.update(|stats| stats.duplicates += 1);
                    return;
                }
                let id = frame
                    .d
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                match normalize(&frame.d, &self.me) {
                    Normalized::Message(envelope) => {
                        if !self.progress.recent.insert(&id) {
                            self.shared.update(|stats| stats.duplicates += 1);
                            return;
                        }
                        self.shared.update(|stats| stats.queued += 1);
                        // The delivery task holds the other end until the run ends.
                        let _ = self.deliveries.send(Queued {
                            envelope,
                            acknowledged: None,
                        });
                    }
                    Normalized::Ignored(reason) => self.shared.update(|stats| {
                        stats.ignored += 1;
                        stats.last_skip = Some(reason);
                    }),
                }
            }
            Some("INTERACTION_CREATE") => {
                if replayed {
                    self.shared.update(|stats| stats.duplicates += 1);
                    return;
                }
                self.interaction(&frame);
            }
            _ => {}
        }
        if let Some(seq) = seq {
            self.shared.update(|stats| stats.seq = Some(seq));
        }
    }

    /// A click: acknowledged in a task of its own, and queued behind its acknowledgement.
    fn interaction(&mut self, frame: &Frame) {
        let id = frame
            .d
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        // A click delivered twice (a replay past the sequence guard) must not answer twice.
        if !id.is_empty() && !self.progress.recent.insert(&format!("interaction:{id}")) {
            self.shared.update(|stats| stats.duplicates += 1);
            return;
        }
        let event = serde_json::json!({"t": "INTERACTION_CREATE", "d": frame.d});
        let normalized = normalize(&event, &self.me);
        let (done, acknowledged) = oneshot::channel();
        match acknowledgement(&frame.d, &normalized) {
            Some(ack) => {
                // A taken click's token is kept (inside the transport) so the bridge can
                // answer the clicker alone later: an ephemeral follow-up needs it.
                if let Normalized::Message(Envelope {
                    press: Some(press), ..
                }) = &normalized
                    && let Some(application_id) = frame
                        .d
                        .get("application_id")
                        .and_then(Value::as_str)
                        .filter(|id| !id.is_empty())
                {
                    self.shared.presses.remember(
                        press,
                        std::time::Instant::now(),
                        PressToken {
                            application_id: application_id.to_owned(),
                            interaction_id: ack.interaction_id.clone(),
                            token: ack.token.clone(),
                        },
                    );
                }
                let shared = self.shared.clone();
                let taken = matches!(normalized, Normalized::Message(_));
                tokio::spawn(async move {
                    let sent = shared
                        .api
                        .interaction_callback(&ack.interaction_id, &ack.token, &ack.callback)
                        .await;
                    shared.update(|stats| match sent {
                        Ok(()) if taken => stats.clicks_taken += 1,
                        Ok(()) => stats.clicks_refused += 1,
                        Err(error) => {
                            stats.click_ack_failures += 1;
                            stats.last_error = Some(format!(
                                "a button click could not be acknowledged (the clicker saw \"This interaction failed\"): {error}"
                            ));
                        }
                    });
                    let _ = done.send(());
                });
            }
            None => drop(done),
        }
        match normalized {
            Normalized::Message(envelope) => {
                self.shared.update(|stats| stats.queued += 1);
                let _ = self.deliveries.send(Queued {
                    envelope,
                    acknowledged: Some(acknowledged),
                });
            }
            Normalized::Ignored(reason) => self.shared.update(|stats| {
                stats.ignored += 1;
                stats.last_skip = Some(reason);
            }),
        }
    }

    fn on_ready(&mut self, ready: &mut bool, backoff: &mut Backoff, seq: Option<u64>) {
        *ready = true;
        // READY and RESUMED restore "ready" and reset the reconnect budget (I31).
        backoff.succeeded();
        self.shared.update(|stats| {
            stats.state = GatewayState::Ready;
            stats.resumable = self.progress.session.is_some();
            stats.seq = seq;
        });
        if let Some(first) = self.first.take() {
            let _ = first.send(Ok(()));
        }
    }

    async fn send(&self, socket: &mut Socket, frame: Value) -> Result<(), Ended> {
        let text = frame.to_string();
        socket
            .send(WsMessage::text(text))
            .await
            .map_err(|error| Ended::Reconnect {
                resume: true,
                wait: Wait::Backoff,
                reason: format!(
                    "could not write to the gateway: {}",
                    self.token.scrub(&describe_ws(&error))
                ),
            })
    }

    async fn heartbeat(&self, socket: &mut Socket) -> Result<(), Ended> {
        self.send(
            socket,
            serde_json::json!({"op": op::HEARTBEAT, "d": self.progress.seq}),
        )
        .await
    }

    async fn identify(&mut self, socket: &mut Socket) -> Result<(), Ended> {
        let identify = Identify {
            token: self.token.expose(),
            intents: self.settings.intents,
            properties: IdentifyProperties {
                os: std::env::consts::OS,
                browser: "bot-connect",
                device: "bot-connect",
            },
        };
        let frame = serde_json::json!({"op": op::IDENTIFY, "d": identify});
        self.budget.spend(Instant::now());
        self.progress.identified_once = true;
        self.shared.update(|stats| {
            stats.identifies += 1;
            stats.state = GatewayState::Identifying;
        });
        self.send(socket, frame).await
    }

    async fn resume(&mut self, socket: &mut Socket, session: &Session) -> Result<(), Ended> {
        let resume = Resume {
            token: self.token.expose(),
            session_id: &session.id,
            seq: self.progress.seq,
        };
        let frame = serde_json::json!({"op": op::RESUME, "d": resume});
        self.send(socket, frame).await
    }

    /// Discord closed the connection: what its code means.
    fn closed(&self, frame: Option<&CloseFrame>) -> Ended {
        let code = frame.map(|frame| u16::from(frame.code));
        let reason = frame
            .map(|frame| self.token.scrub(frame.reason.as_str()))
            .unwrap_or_default();
        if let Some(code) = code {
            self.shared
                .update(|stats| stats.last_close = Some((code, reason.clone())));
        }
        let described = match (code, reason.is_empty()) {
            (Some(code), true) => format!("Discord closed the gateway with code {code}"),
            (Some(code), false) => {
                format!("Discord closed the gateway with code {code} ({reason})")
            }
            (None, _) => "Discord closed the gateway without a code".to_owned(),
        };
        match classify_close(code, &self.token_env) {
            CloseAction::Fatal(text) => Ended::Fatal(text),
            CloseAction::Reidentify => Ended::Reconnect {
                resume: false,
                wait: Wait::Backoff,
                reason: format!("{described}; starting a new session"),
            },
            CloseAction::Resume => Ended::Reconnect {
                resume: true,
                wait: Wait::Backoff,
                reason: format!("{described}; resuming"),
            },
        }
    }
}

/// Sleeps until `at`, or for ever when there is no `at` (no heartbeat before HELLO).
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Sends a close frame, bounded: a peer that does not answer must not hold up the
/// reconnect.
async fn close(socket: &mut Socket, code: u16, reason: &str) {
    let frame = CloseFrame {
        code: CloseCode::from(code),
        reason: reason.to_owned().into(),
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), socket.close(Some(frame))).await;
}

/// What tungstenite said, for a person; never a URL with a query (there is none with a
/// secret in it, but the token is scrubbed by the callers all the same).
fn describe_ws(error: &tungstenite::Error) -> String {
    match error {
        tungstenite::Error::Http(response) => {
            format!(
                "the server answered HTTP {} instead of a WebSocket",
                response.status()
            )
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fatal_close_codes_stop_with_the_fix_and_others_reconnect() {
        for code in [4004, 4010, 4011, 4012, 4013, 4014] {
            let CloseAction::Fatal(text) = classify_close(Some(code), "MY_DISCORD") else {
                panic!("{code} must be fatal");
            };
            assert!(text.contains(&code.to_string()), "{text}");
        }
        let CloseAction::Fatal(intent) = classify_close(Some(4014), "X") else {
            panic!("fatal");
        };
        assert!(
            intent.contains("enable the Message Content intent"),
            "{intent}"
        );
        let CloseAction::Fatal(token) = classify_close(Some(4004), "MY_DISCORD") else {
            panic!("fatal");
        };
        assert!(token.contains("$MY_DISCORD"), "{token}");
        assert_eq!(classify_close(Some(4007), "X"), CloseAction::Reidentify);
        assert_eq!(classify_close(Some(4009), "X"), CloseAction::Reidentify);
        for code in [1000, 1001, 1006, 4000, 4001, 4002, 4003, 4005, 4008] {
            assert_eq!(
                classify_close(Some(code), "X"),
                CloseAction::Resume,
                "{code}"
            );
        }
        assert_eq!(classify_close(None, "X"), CloseAction::Resume);
    }

    #[test]
    fn the_connect_url_asks_for_v10_json_and_keeps_other_parameters() {
        assert_eq!(
            connect_url("wss://gateway.discord.gg").as_deref(),
            Ok("wss://gateway.discord.gg/?v=10&encoding=json")
        );
        assert_eq!(
            connect_url("wss://x.discord.gg/?v=9&compress=zlib-stream&shard=a").as_deref(),
            Ok("wss://x.discord.gg/?shard=a&v=10&encoding=json")
        );
        assert!(connect_url("https://gateway.discord.gg").is_err());
        assert!(connect_url("not a url").is_err());
    }

    #[test]
    fn identify_waits_for_its_spacing_and_for_a_used_up_day() {
        let now = Instant::now();
        let mut budget = IdentifyBudget::new(Duration::from_secs(5));
        assert_eq!(budget.wait(now), Duration::ZERO);
        budget.spend(now);
        assert_eq!(
            budget.wait(now + Duration::from_secs(1)),
            Duration::from_secs(4)
        );
        budget.learn(
            SessionStartLimit {
                total: 1000,
                remaining: 1,
                reset_after: 3_600_000,
                max_concurrency: 1,
            },
            now,
        );
        let later = now + Duration::from_secs(10);
        assert_eq!(budget.wait(later), Duration::ZERO);
        budget.spend(later);
        let wait = budget.wait(later);
        assert_eq!(wait, Duration::from_secs(3_590));
        let text = budget.exhausted_text(wait);
        assert!(text.contains("1000 new gateway sessions a day"), "{text}");
        assert!(text.contains("60 minutes"), "{text}");
        // After the reset the count is unknown again (the next /gateway/bot tells).
        let reset = now + Duration::from_secs(3_600);
        assert_eq!(budget.wait(reset), Duration::ZERO);
        budget.spend(reset);
        assert_eq!(budget.wait(reset + Duration::from_secs(5)), Duration::ZERO);
    }

    #[test]
    fn recent_ids_refuse_a_repeat_and_forget_the_oldest() {
        let mut recent = RecentIds::default();
        assert!(recent.insert("1"));
        assert!(!recent.insert("1"));
        for id in 2..=(RECENT_IDS + 1) {
            assert!(recent.insert(&id.to_string()));
        }
        assert!(
            recent.insert("1"),
            "forgotten after {RECENT_IDS} newer ones"
        );
        assert!(recent.insert("") && recent.insert(""), "no id, no guard");
    }
}
