//! The robo_claw transport itself: its configuration, the server it starts and stops
//! around the rooms and files its gRPC service shares, and its
//! [`transport_core::Transport`] implementation. The crate root only lists the modules
//! and re-exports what callers use.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use transport_core::{
    BotIdentity, Capabilities, FetchedAttachment, InboundSink, LengthUnit, Markup, OutboundKind,
    OutboundMessage, SendReceipt, Transport, TransportError,
};

use crate::clients::{Access, Client};
use crate::files::{StoredFile, sniff_media_type};
use crate::normalize::TRANSPORT_ID;
use crate::peer_token::PeerToken;
use crate::rooms::RoomStatus;
use crate::serve::TlsFiles;
use crate::service::Messenger;
use crate::shared::{Clock, Random};
use crate::shared::{Options, ServerState, Shared};
use crate::{clients, normalize, rooms, serve, settings};

/// What robo_claw can do (docs/architecture.md#transports-and-their-shared-core): 4000
/// characters of markdown, no threads, no edits, no typing indicator; attachments through
/// `UploadFile`.
pub const CAPABILITIES: Capabilities = Capabilities {
    threads: false,
    edit: false,
    attachments: true,
    typing: false,
    max_message_length: 4000,
    length_unit: LengthUnit::Chars,
    markup: Markup::Markdown,
    // The protocol has no reactions (docs/platforms.md#reactions).
    reactions: false,
    drafts: false,
};

/// Most streams served at once; more are refused with `RESOURCE_EXHAUSTED`, so a client
/// opening streams in a loop cannot exhaust memory.
pub const MAX_STREAMS: usize = 256;

/// How long `stop` waits for open calls to end before cutting them off.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How a [`RoboClawTransport`] is set up. `Default` gives the defaults the settings declare.
#[derive(Clone)]
pub struct RoboClawConfig {
    /// Address to listen on.
    pub host: String,
    /// Port to listen on (0: any free port, for tests).
    pub port: u16,
    /// The peer token clients must present; `None` accepts every client. `Debug` hides it.
    pub token: Option<String>,
    /// Name of the variable the token comes from, for messages.
    pub token_env: String,
    /// Clients with their own tokens, senders and rooms; when any is configured, `token`
    /// is ignored (see [`clients`]).
    pub clients: Vec<ClientConfig>,
    /// Sender id of the bot's own messages.
    pub self_sender_id: String,
    /// Serve TLS with these files; `None`: plain TCP.
    pub tls: Option<TlsFiles>,
    /// Replies kept per room while no client of it is connected; 0 fails such sends.
    pub buffer_size: usize,
    /// How long `SendCommand` waits for the bridge.
    pub command_timeout: Duration,
    /// Largest upload in bytes.
    pub max_upload_bytes: u64,
    /// Files kept at once.
    pub max_uploads: usize,
    /// Most streams served at once.
    pub max_streams: usize,
    /// The time, in ms since the epoch (reply timestamps and message ids).
    pub clock: Clock,
    /// Randomness for file ids.
    pub random: Random,
}

impl Default for RoboClawConfig {
    fn default() -> RoboClawConfig {
        RoboClawConfig {
            host: settings::DEFAULT_HOST.to_owned(),
            port: u16::try_from(settings::DEFAULT_PORT).unwrap_or(50052),
            token: None,
            token_env: settings::DEFAULT_TOKEN_ENV.to_owned(),
            clients: Vec::new(),
            self_sender_id: normalize::DEFAULT_SELF_SENDER_ID.to_owned(),
            tls: None,
            buffer_size: settings::DEFAULT_BUFFER_SIZE.unsigned_abs() as usize,
            command_timeout: Duration::from_millis(
                settings::DEFAULT_COMMAND_TIMEOUT_MS.unsigned_abs(),
            ),
            max_upload_bytes: settings::DEFAULT_MAX_UPLOAD_BYTES.unsigned_abs(),
            max_uploads: settings::DEFAULT_MAX_UPLOADS.unsigned_abs() as usize,
            max_streams: MAX_STREAMS,
            clock: Arc::new(system_now_ms),
            random: Arc::new(|buffer: &mut [u8]| {
                getrandom::fill(buffer).map_err(|error| error.to_string())
            }),
        }
    }
}

fn system_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

impl std::fmt::Debug for RoboClawConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoboClawConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("token", &self.token.as_ref().map(|_| "<hidden>"))
            .field("token_env", &self.token_env)
            .field("clients", &self.clients)
            .field("self_sender_id", &self.self_sender_id)
            .field("tls", &self.tls)
            .field("buffer_size", &self.buffer_size)
            .finish_non_exhaustive()
    }
}

/// One client with its own token (see [`clients`]).
#[derive(Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// Its name: the namespace of its rooms.
    pub name: String,
    /// The variable its token comes from, for messages.
    pub token_env: String,
    /// Its token; `None` when the variable is unset (the client cannot connect, and the
    /// start says so). `Debug` hides it.
    pub token: Option<String>,
    /// The sender ids it may send as.
    pub senders: Vec<String>,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("name", &self.name)
            .field("token_env", &self.token_env)
            .field("token", &self.token.as_ref().map(|_| "<hidden>"))
            .field("senders", &self.senders)
            .finish()
    }
}

/// The access rules `config` describes, or why they cannot be used.
fn access_of(config: &RoboClawConfig) -> Result<Access, clients::ClientsError> {
    let clients = config
        .clients
        .iter()
        .map(|client| Client {
            name: client.name.clone(),
            token_env: client.token_env.clone(),
            token: client.token.as_deref().and_then(PeerToken::new),
            senders: client.senders.iter().cloned().collect(),
        })
        .collect();
    Access::new(config.token.as_deref().and_then(PeerToken::new), clients)
}

struct Running {
    cancel: CancellationToken,
    server: JoinHandle<()>,
}

/// The robo_claw transport: a gRPC server while started.
pub struct RoboClawTransport {
    shared: Arc<Shared>,
    config: RoboClawConfig,
    /// Held across `start` and `stop`, so two starts cannot both bind.
    lifecycle: tokio::sync::Mutex<Option<Running>>,
    /// Between a successful `start` and `stop`: sends are allowed.
    started: AtomicBool,
    /// Where the server listens while started.
    addr: std::sync::Mutex<Option<SocketAddr>>,
    receipts: AtomicU64,
    /// Why the configured clients cannot be used; `start` fails with it, and meanwhile
    /// nobody is let in.
    config_error: Option<String>,
}

impl std::fmt::Debug for RoboClawTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoboClawTransport")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn kind_name(kind: OutboundKind) -> &'static str {
    match kind {
        OutboundKind::Reply => "reply",
        OutboundKind::Progress => "progress",
        OutboundKind::Digest => "digest",
        OutboundKind::Notice => "notice",
    }
}

impl RoboClawTransport {
    /// A stopped transport; no I/O until `start`.
    pub fn new(config: RoboClawConfig) -> RoboClawTransport {
        // Fail closed: clients that cannot be told apart let nobody in, and `start` says why.
        let (access, config_error) = match access_of(&config) {
            Ok(access) => (access, None),
            Err(error) => (Access::Clients(Vec::new()), Some(error.to_string())),
        };
        let options = Options {
            access,
            self_sender_id: match config.self_sender_id.trim() {
                "" => normalize::DEFAULT_SELF_SENDER_ID.to_owned(),
                id => id.to_owned(),
            },
            command_timeout: config.command_timeout,
            max_upload_bytes: config.max_upload_bytes,
            max_streams: config.max_streams,
            clock: config.clock.clone(),
            random: config.random.clone(),
        };
        RoboClawTransport {
            shared: Arc::new(Shared::new(options, config.buffer_size, config.max_uploads)),
            config,
            lifecycle: tokio::sync::Mutex::new(None),
            started: AtomicBool::new(false),
            addr: std::sync::Mutex::new(None),
            receipts: AtomicU64::new(1),
            config_error,
        }
    }

    fn not_started(&self) -> TransportError {
        TransportError::NotStarted(TRANSPORT_ID.to_owned())
    }

    fn is_started(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }

    /// The address the server listens on while started (the real port when 0 was asked).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        *transport_core::sync::lock(&self.addr)
    }

    /// Every room with a connected stream or a buffered reply.
    pub fn rooms(&self) -> Vec<RoomStatus> {
        self.shared.peek_rooms(rooms::Rooms::status)
    }

    /// Open `ChatStream` calls, including those that have not joined a room yet.
    pub fn streams(&self) -> usize {
        self.shared.live_streams()
    }

    /// Waits until `condition` holds, re-checking whenever a stream opens, joins, leaves or
    /// a reply is routed; false when `within` passes first. For tests and tools that must
    /// know a client is connected before sending, without sleeping.
    pub async fn wait_until(
        &self,
        within: Duration,
        condition: impl Fn(&RoboClawTransport) -> bool,
    ) -> bool {
        let mut changes = self.shared.watch();
        let wait = async {
            loop {
                changes.borrow_and_update();
                if condition(self) {
                    return;
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(within, wait).await.is_ok() && condition(self)
    }

    /// Offers `data` for `DownloadFile` under a new id, which is returned (hand it to the
    /// client in a reply). Bounded like uploads: the oldest stored file is forgotten.
    pub fn offer_file(&self, name: &str, data: Vec<u8>) -> Result<String, TransportError> {
        if data.len() as u64 > self.config.max_upload_bytes {
            return Err(TransportError::Failed(format!(
                "the file is {} bytes, over the {} byte limit (maxUploadBytes)",
                data.len(),
                self.config.max_upload_bytes
            )));
        }
        let id = self.shared.random_id("rcf").map_err(|error| {
            TransportError::Failed(format!("could not make a file id: {error}"))
        })?;
        let file = StoredFile {
            name: name.to_owned(),
            media_type: sniff_media_type(&data),
            data: data.into(),
            owner: None,
        };
        self.shared.files().insert(id.clone(), file);
        Ok(id)
    }

    /// The `diagnose` line before the token is scrubbed from it.
    fn describe(&self) -> String {
        let tls = if self.config.tls.is_some() {
            "TLS"
        } else {
            "plain TCP, no TLS"
        };
        let stats = self.shared.stats();
        let state = match &stats.state {
            ServerState::NotStarted => format!(
                "not started (will listen on {}:{}, {tls})",
                self.config.host, self.config.port
            ),
            ServerState::Listening { addr, .. } => format!("listening on {addr} ({tls})"),
            ServerState::Stopped => "stopped".to_owned(),
        };
        let token = match &self.shared.options.access {
            Access::Shared(_) => "peer token required".to_owned(),
            Access::Open => format!(
                "NO peer token (${} is not set): any client that reaches the port is accepted",
                self.config.token_env
            ),
            Access::Clients(clients) => {
                let listed: Vec<String> = clients
                    .iter()
                    .map(|client| {
                        let state = if client.token.is_some() {
                            "token set"
                        } else {
                            "NO token, cannot connect"
                        };
                        format!(
                            "{} (${}, {state}; senders {})",
                            client.name,
                            client.token_env,
                            client
                                .senders
                                .iter()
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })
                    .collect();
                let shared = if self.config.token.is_some() {
                    format!(
                        "; the shared token in ${} is ignored",
                        self.config.token_env
                    )
                } else {
                    String::new()
                };
                format!("per-client tokens: {}{shared}", listed.join(", "))
            }
        };
        let rooms = self.rooms();
        let rooms = if rooms.is_empty() {
            "no rooms".to_owned()
        } else {
            let listed: Vec<String> = rooms
                .iter()
                .map(|room| {
                    format!(
                        "{:?}: {} stream(s), {} buffered",
                        room.room, room.streams, room.buffered
                    )
                })
                .collect();
            format!("rooms {}", listed.join(", "))
        };
        let (files, bytes) = {
            let files = self.shared.files();
            (files.len(), files.bytes())
        };
        let mut line = format!(
            "{state}; {token}; {} open stream(s); {rooms}; received {}, ignored {}, refused {} (wrong or missing token), denied {} (sender not the client's), sent {}, buffered {}, dropped {} (buffer full), stalled clients {}, commands {}, uploads {}, downloads {}, {files} file(s) stored ({bytes} bytes)",
            self.streams(),
            stats.received,
            stats.ignored,
            stats.refused,
            stats.denied,
            stats.sent,
            stats.buffered,
            stats.dropped,
            stats.stalled,
            stats.commands,
            stats.uploads,
            stats.downloads,
        );
        if stats.discarded_at_stop > 0 {
            line.push_str(&format!(
                "; {} buffered repl(ies) discarded at stop",
                stats.discarded_at_stop
            ));
        }
        if stats.tls_failures > 0 {
            line.push_str(&format!("; {} failed TLS handshake(s)", stats.tls_failures));
        }
        if let Some(error) = &stats.last_error {
            line.push_str("; last error: ");
            line.push_str(error);
        }
        if let Some(skip) = &stats.last_skip {
            line.push_str("; last ignored: ");
            line.push_str(skip);
        }
        line
    }

    /// Alerts what the person at the terminal should know once the server runs.
    fn start_notes(&self, addr: SocketAddr) {
        let mut notes = start_notes(
            addr,
            self.config.tls.is_some(),
            !self.shared.options.access.is_open(),
            &self.config.token_env,
        );
        notes.extend(client_notes(
            &self.shared.options.access,
            self.config.token.is_some(),
            &self.config.token_env,
        ));
        for note in notes {
            self.shared.alert(note);
        }
    }
}

/// What a person must hear when the server starts at `addr`: that there is no peer token,
/// and that a non-loopback address without TLS carries everything in clear text.
pub fn start_notes(addr: SocketAddr, tls: bool, token: bool, token_env: &str) -> Vec<String> {
    let mut notes = Vec::new();
    if !token {
        notes.push(format!(
            "no peer token is set (${token_env} is empty), so any client that reaches {addr} can send prompts under any sender_id. Export a token in ${token_env} and give it to the RoboClaw app."
        ));
    }
    if !addr.ip().is_loopback() && !tls {
        notes.push(format!(
            "listening on {addr} without TLS: messages and the peer token cross the network unencrypted. Set tlsCertPath and tlsKeyPath, or keep host at 127.0.0.1."
        ));
    }
    notes
}

/// What a person must hear about per-client tokens at start: a shared token that is now
/// ignored (whoever still holds it is locked out, on purpose), and clients that cannot
/// connect because their variable is unset.
pub fn client_notes(access: &Access, shared_token: bool, token_env: &str) -> Vec<String> {
    let Access::Clients(_) = access else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    if shared_token {
        notes.push(format!(
            "robo_claw: clients are configured, so the shared peer token in ${token_env} is ignored: a client presenting it is refused. Give each app its client's own token and unset ${token_env}."
        ));
    }
    for client in access.clients_without_token() {
        notes.push(format!(
            "robo_claw: client {:?} cannot connect: ${} is not set. Export its token there.",
            client.name, client.token_env
        ));
    }
    notes
}

#[async_trait]
impl Transport for RoboClawTransport {
    fn id(&self) -> &str {
        TRANSPORT_ID
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    /// No I/O: the bot is whoever sends as `selfSenderId`; one process per port.
    async fn identify(&self) -> Result<BotIdentity, TransportError> {
        Ok(BotIdentity {
            bot_id: self.shared.options.self_sender_id.clone(),
            bot_name: "RoboClaw".to_owned(),
            lock_name: Some(format!("{TRANSPORT_ID}-{}", self.config.port)),
        })
    }

    /// Loads TLS (when configured), binds the port and serves in the background. A bad
    /// certificate or a taken port fails `start` itself, so the host reports it (I16).
    async fn start(&self, sink: InboundSink) -> Result<(), TransportError> {
        let mut lifecycle = self.lifecycle.lock().await;
        if lifecycle.is_some() {
            return Err(TransportError::AlreadyStarted(TRANSPORT_ID.to_owned()));
        }
        if let Some(error) = &self.config_error {
            return Err(TransportError::Failed(error.clone()));
        }
        let failed = |text: String| {
            self.shared
                .update(|stats| stats.last_error = Some(text.clone()));
            TransportError::Failed(text)
        };
        let tls = match &self.config.tls {
            Some(files) => Some(serve::server_config(files).map_err(|e| failed(e.to_string()))?),
            None => None,
        };
        let listener = serve::bind(&self.config.host, self.config.port)
            .await
            .map_err(failed)?;
        let addr = serve::local_addr(&listener).map_err(failed)?;
        let cancel = CancellationToken::new();
        self.shared.set_sink(Some(sink));
        let messenger = Messenger {
            shared: self.shared.clone(),
            cancel: cancel.clone(),
        };
        let tls_on = tls.is_some();
        let server = serve::spawn(listener, tls, messenger, cancel.clone());
        self.shared.update(|stats| {
            stats.state = ServerState::Listening { addr, tls: tls_on };
        });
        *transport_core::sync::lock(&self.addr) = Some(addr);
        self.started.store(true, Ordering::SeqCst);
        *lifecycle = Some(Running { cancel, server });
        self.start_notes(addr);
        Ok(())
    }

    /// Ends every stream and call, discards buffered replies (counted in `diagnose`) and
    /// closes the port. Idempotent.
    async fn stop(&self) {
        let mut lifecycle = self.lifecycle.lock().await;
        self.started.store(false, Ordering::SeqCst);
        let Some(mut running) = lifecycle.take() else {
            return;
        };
        running.cancel.cancel();
        let discarded = self.shared.rooms(rooms::Rooms::close_all);
        // Open calls end at their next await point; the server then closes its
        // connections. A client that never reads is cut off after the grace period.
        if tokio::time::timeout(STOP_GRACE, &mut running.server)
            .await
            .is_err()
        {
            running.server.abort();
        }
        self.shared.set_sink(None);
        *transport_core::sync::lock(&self.addr) = None;
        self.shared.update(|stats| {
            stats.state = ServerState::Stopped;
            stats.discarded_at_stop += discarded as u64;
        });
    }

    /// Writes the reply to the streams of its room (or buffers it, see [`rooms`]). There
    /// is no editing: a message with an edit key is posted anew.
    async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
        if !self.is_started() {
            return Err(self.not_started());
        }
        // A robo_claw choice arrives as an ordinary message (the client sends the command
        // as content), so no press is ever handed out and none can be answered privately:
        // the room's streams may belong to several people, so the answer is not posted.
        if let Some(press) = &message.answers_press {
            return Err(TransportError::Failed(format!(
                "robo_claw has no button press {press} to answer privately (choices arrive as ordinary messages)"
            )));
        }
        let now = (self.shared.options.clock)();
        let room = message.conversation_id.trim();
        // The client knows its room by its own name, not by the namespaced conversation id.
        let reply = normalize::outbound(
            &self.shared.options.self_sender_id,
            self.shared.options.access.client_room(room),
            &message.text,
            now,
            &message.buttons,
        );
        self.shared.route(room, kind_name(message.kind), reply)?;
        let number = self.receipts.fetch_add(1, Ordering::Relaxed);
        Ok(SendReceipt {
            message_id: format!("rc_{now}_{number}"),
            edit_key: None,
        })
    }

    /// Reads an uploaded file, refusing more than `max_bytes`; the media type is the one
    /// its bytes have (I25).
    async fn fetch_attachment(
        &self,
        reference: &str,
        max_bytes: u64,
    ) -> Result<FetchedAttachment, TransportError> {
        if !self.is_started() {
            return Err(self.not_started());
        }
        let reference = reference.trim();
        let (file, capacity) = {
            let files = self.shared.files();
            (files.get(reference), files.capacity())
        };
        let file = file.ok_or_else(|| {
            TransportError::Failed(format!(
                "robo_claw has no uploaded file {reference:?}: it was never uploaded, or it was forgotten to keep only the {capacity} most recent files; upload it again"
            ))
        })?;
        if file.data.len() as u64 > max_bytes {
            return Err(TransportError::Failed(format!(
                "the attachment is {} bytes, over the {max_bytes} byte limit",
                file.data.len()
            )));
        }
        Ok(FetchedAttachment {
            media_type: file.media_type.clone(),
            data: file.data.to_vec(),
        })
    }

    fn diagnose(&self) -> String {
        let line = self.describe();
        // Every text above is free of the token; a client could still name a room after
        // it, so this is the last line of defence (I18).
        self.shared
            .options
            .access
            .tokens()
            .into_iter()
            .fold(line, |line, token| line.replace(token.as_str(), "<hidden>"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_notes_name_a_missing_token_and_a_wide_bind_without_tls() {
        let local: SocketAddr = "127.0.0.1:50052".parse().expect("address");
        let wide: SocketAddr = "0.0.0.0:50052".parse().expect("address");
        assert!(start_notes(local, false, true, "T").is_empty());
        assert!(start_notes(wide, true, true, "T").is_empty());
        let notes = start_notes(wide, false, false, "MY_TOKEN");
        assert_eq!(notes.len(), 2);
        assert!(notes[0].contains("$MY_TOKEN"), "{}", notes[0]);
        assert!(
            notes[1].contains("0.0.0.0:50052 without TLS"),
            "{}",
            notes[1]
        );
    }
}
