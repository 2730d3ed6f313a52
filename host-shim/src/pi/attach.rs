//! `host-shim attach`: serves one live pi session for the bot-connect pi extension.
//!
//! The extension starts `host-shim attach --session <pi session id>` and reads one
//! `ready` line from its stdout naming the socket; it then connects and says hello
//! (`link`). The bridge session is built at the first accepted hello, from the
//! session the extension describes (id = key, name, cwd). pi is the only local terminal:
//! notifications and confirms go over the link, and notifications made while no pi is
//! connected (start-up notes, a pairing code) wait for it.
//!
//! Lifetimes: `attach` stops when its stdin closes (pi exited, however it exited) or on
//! Ctrl-C / SIGTERM. A second `attach` for a session that is already served prints the
//! running one's socket and exits. When pi vanishes mid-turn the open turn is settled, so
//! no card stays open, and the next remote prompt fails with a clear reason.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use sha2::Digest as _;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::agent::{Agent, AgentSignal, RecentWork, SignalSender};
use crate::local::ui::{CONFIRM_TIMEOUT, Ui};
use crate::pi::json_lines::{Record, next_record};
use crate::pi::link::{self, FromExtension, LinkSession, ToExtension};
use crate::sandbox::session::{FileRequest, Session, SessionHandle};
use crate::wit::agent::{
    DeliverAs, PromptImage, QuestionAnswer, SessionCommand, SessionInfo, SessionReply, ShellRun,
};
use crate::wit::session::{AgentEvent, Note, ToolDecision};
use crate::wit::types::Level;

/// How long a new connection may take to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a prompt may wait for the extension to inject it.
const PROMPT_ACK_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a session command may wait for the extension's answer.
const SESSION_COMMAND_TIMEOUT: Duration = Duration::from_secs(15);
/// How long `/compact` may take: the extension answers when the summary is written.
const COMPACT_TIMEOUT: Duration = Duration::from_secs(300);
/// Notifications kept for a pi that has not connected yet.
const BACKLOG: usize = 50;
/// The longest line accepted from the extension.
const MAX_LINE: usize = 16 << 20;

/// Why `attach` could not listen.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The socket directory or file could not be set up.
    #[error(
        "cannot listen on {path}: {source}. Check that the state directory is writable, or set PI_BOT_CONNECT_STATE"
    )]
    Listen {
        /// The socket path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The path is longer than a Unix socket address can hold.
    #[error(
        "the socket path {path} is {len} bytes, over the {max}-byte limit of Unix sockets; set PI_BOT_CONNECT_STATE to a shorter path"
    )]
    PathTooLong {
        /// The socket path.
        path: String,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// Where the socket for `key` lives: `<state dir>/links/<hash>.sock`. Named by a hash so
/// any session id fits a socket address; the directory is owner-only.
pub fn socket_path(state_dir: &Path, key: &str) -> PathBuf {
    let digest = sha2::Sha256::digest(key.as_bytes());
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    state_dir.join("links").join(format!("{name}.sock"))
}

/// The result of trying to listen for a session.
pub enum Bound {
    /// This process serves the session.
    Listening(UnixListener),
    /// Another live `attach` already serves it at this path.
    AlreadyServed,
}

/// Listens on `path` (owner-only directory and socket), unless a live process already
/// does; a socket file left by a crashed process is replaced.
pub async fn bind(path: &Path) -> Result<Bound, AttachError> {
    use std::os::unix::fs::PermissionsExt;
    // sun_path holds 108 bytes on Linux, including the terminating NUL.
    const MAX: usize = 107;
    let len = path.as_os_str().len();
    if len > MAX {
        return Err(AttachError::PathTooLong {
            path: path.display().to_string(),
            len,
            max: MAX,
        });
    }
    let fail = |source| AttachError::Listen {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        private_dir(dir).map_err(fail)?;
    }
    for _ in 0..2 {
        if UnixStream::connect(path).await.is_ok() {
            return Ok(Bound::AlreadyServed);
        }
        // Nobody answers: a leftover of a crashed process (or nothing at all).
        let _ = std::fs::remove_file(path);
        match UnixListener::bind(path) {
            Ok(listener) => {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                    .map_err(fail)?;
                return Ok(Bound::Listening(listener));
            }
            // Another attach bound it between our check and our bind: ask again.
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(fail(e)),
        }
    }
    Ok(Bound::AlreadyServed)
}

/// Makes `dir`, the directory a socket lives in, private: created 0700 when missing; when
/// it exists, used only if it is a real directory of this user that nobody else can
/// enter. It is never chmodded: with the state file in /tmp, the socket's directory used
/// to be /tmp itself, and chmodding it 0700 locked every other user out of /tmp. A
/// directory someone else made (a squatter in /tmp) is refused instead of trusted.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = std::fs::symlink_metadata(dir)?;
            // SAFETY: getuid has no preconditions and cannot fail.
            #[allow(unsafe_code)]
            let me = unsafe { libc::getuid() };
            let refuse = |why: String| {
                Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "{} {why}, so a socket there would not be private; remove it (or, if it is yours, run chmod 700 on it)",
                        dir.display()
                    ),
                ))
            };
            if !meta.is_dir() {
                return refuse("is not a directory (a symlink or a file)".into());
            }
            if meta.uid() != me {
                return refuse(format!("belongs to user {} and not to you", meta.uid()));
            }
            if meta.mode() & 0o077 != 0 {
                return refuse(format!(
                    "is open to other users (mode {:o})",
                    meta.mode() & 0o777
                ));
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The `ready` line `attach` prints on stdout once it listens.
pub fn ready_line(socket: &Path, started: bool) -> String {
    let mut line = serde_json::json!({
        "type": "ready",
        "protocol": link::PROTOCOL,
        "host": env!("CARGO_PKG_VERSION"),
        "socket": socket.display().to_string(),
        "started": started,
    })
    .to_string();
    line.push('\n');
    line
}

struct Conn {
    id: u64,
    writer: mpsc::UnboundedSender<String>,
}

#[derive(Default)]
struct LinkState {
    conn: Option<Conn>,
    info: Option<LinkSession>,
    turn_open: bool,
    awaiting_ack: u32,
    prompts: HashMap<String, oneshot::Sender<Result<(), String>>>,
    confirms: HashMap<String, oneshot::Sender<bool>>,
    sessions: HashMap<String, oneshot::Sender<FromExtension>>,
    backlog: VecDeque<String>,
    work: RecentWork,
}

/// The connected pi session, shared by the agent, the terminal and the connection.
pub struct Link {
    state: Mutex<LinkState>,
    connected: tokio::sync::watch::Sender<bool>,
    /// Boxed signals: the queue's first block of 32 slots lives as long as the session
    /// ([`crate::agent::SignalSender`] says why a slot must be small).
    queue: mpsc::UnboundedSender<Box<AgentSignal>>,
    queued: Mutex<Option<mpsc::UnboundedReceiver<Box<AgentSignal>>>>,
    next_id: AtomicU64,
}

impl Link {
    /// A link with no pi connected yet.
    pub fn new() -> Arc<Link> {
        let (queue, queued) = mpsc::unbounded_channel();
        Arc::new(Link {
            state: Mutex::default(),
            connected: tokio::sync::watch::Sender::new(false),
            queue,
            queued: Mutex::new(Some(queued)),
            next_id: AtomicU64::new(1),
        })
    }

    fn state<R>(&self, f: impl FnOnce(&mut LinkState) -> R) -> R {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Follows whether a pi is connected (its bridge session is then running): a hook
    /// for whoever must wait for that, tests first of all.
    pub fn connected(&self) -> tokio::sync::watch::Receiver<bool> {
        self.connected.subscribe()
    }

    fn id(&self, what: &str) -> String {
        format!("{what}{}", self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Sends to the connected pi; false when none is connected.
    fn send(&self, message: &ToExtension) -> bool {
        let line = link::encode(message);
        self.state(|s| match &s.conn {
            Some(conn) => conn.writer.send(line).is_ok(),
            None => false,
        })
    }

    fn emit(&self, signal: AgentSignal) {
        let _ = self.queue.send(Box::new(signal));
    }

    /// The agent side of this link, for the bridge session.
    pub fn agent(self: &Arc<Self>) -> Arc<dyn Agent> {
        Arc::new(LinkAgent(self.clone()))
    }

    /// The terminal side of this link: pi's own notifications and dialogs.
    pub fn ui(self: &Arc<Self>) -> Arc<dyn Ui> {
        Arc::new(LinkUi(self.clone()))
    }

    /// Learns the session pi described before the bridge starts: the bridge reads the
    /// working directory once, when it configures, and judges every remote path against
    /// it. Started before this, it judged against an empty one: every absolute path was
    /// "outside", and a relative one was inside whatever it named.
    fn describe(&self, session: &LinkSession) {
        self.state(|s| s.info = Some(session.clone()));
    }

    fn connect(&self, id: u64, writer: mpsc::UnboundedSender<String>, session: LinkSession) {
        self.state(|s| {
            for line in s.backlog.drain(..) {
                let _ = writer.send(line);
            }
            s.conn = Some(Conn { id, writer });
            s.info = Some(session);
        });
        self.connected.send_replace(true);
    }

    /// Forgets whichever pi is connected, as when it disconnects.
    fn close(&self) {
        let id = self.state(|s| s.conn.as_ref().map(|c| c.id));
        if let Some(id) = id {
            self.disconnect(id);
        }
    }

    /// Forgets connection `id`: waiting prompts fail, confirms answer no, and an open
    /// turn is settled so its card does not stay open.
    fn disconnect(&self, id: u64) {
        let settle = self.state(|s| {
            if s.conn.as_ref().map(|c| c.id) != Some(id) {
                return false;
            }
            s.conn = None;
            for (_, tx) in s.prompts.drain() {
                let _ = tx.send(Err("the pi session disconnected".into()));
            }
            s.confirms.clear();
            std::mem::replace(&mut s.turn_open, false)
        });
        if self.state(|s| s.conn.is_none()) {
            self.connected.send_replace(false);
        }
        if settle {
            self.emit(AgentSignal::Event(AgentEvent::TurnSettled));
        }
    }

    fn on_message(self: &Arc<Self>, message: FromExtension) {
        if let Some(event) = link::agent_event(&message) {
            match &event {
                AgentEvent::TurnStarted(_) => self.state(|s| s.turn_open = true),
                AgentEvent::TurnSettled => self.state(|s| s.turn_open = false),
                _ => {}
            }
            self.emit(AgentSignal::Event(event));
            return;
        }
        match message {
            FromExtension::LastPrompt { text } => {
                self.state(|s| s.work.last_prompt = Some(text));
            }
            FromExtension::ShellRun {
                command,
                failed,
                output,
            } => self.state(|s| {
                s.work.last_shell = Some(ShellRun {
                    command,
                    failed,
                    output,
                })
            }),
            FromExtension::ToolCall { id, name, input } => {
                let (reply, verdict) = oneshot::channel();
                self.emit(AgentSignal::ToolCall { name, input, reply });
                let link = self.clone();
                tokio::spawn(async move {
                    // A dropped reply means the session is gone: block (fail closed).
                    let decision = verdict.await.unwrap_or_else(|_| {
                        ToolDecision::Block(
                            "the messenger bridge has stopped; run the tool locally".into(),
                        )
                    });
                    link.send(&link::verdict(id, decision));
                });
            }
            FromExtension::Question {
                id,
                method,
                title,
                message,
                options,
                timeout_ms,
            } => {
                let question = crate::pi::rpc_agent::question_of(
                    id.clone(),
                    &method,
                    title,
                    message,
                    options,
                    timeout_ms,
                );
                let (reply, answer) = oneshot::channel();
                self.emit(AgentSignal::Question {
                    question: Box::new(question),
                    reply,
                });
                let link = self.clone();
                tokio::spawn(async move {
                    // A dropped reply means the session is gone: the dialog in pi stays
                    // open for the person there, and this dismissal closes nothing else.
                    let answer = answer.await.unwrap_or(QuestionAnswer::Cancelled);
                    link.send(&link::question_answer(id, answer));
                });
            }
            FromExtension::QuestionAnswered {
                id,
                value,
                confirmed,
                cancelled,
            } => {
                let answer = link::answered_in_pi(value, confirmed, cancelled);
                self.emit(AgentSignal::LocalQuestionAnswer { id, answer });
            }
            FromExtension::PromptResult { id, ok, error } => {
                if let Some(tx) = self.state(|s| s.prompts.remove(&id)) {
                    let _ = tx.send(if ok {
                        Ok(())
                    } else {
                        Err(error.unwrap_or_else(|| "pi refused the prompt".into()))
                    });
                }
            }
            FromExtension::ConfirmResult { id, yes } => {
                if let Some(tx) = self.state(|s| s.confirms.remove(&id)) {
                    let _ = tx.send(yes);
                }
            }
            FromExtension::SessionResult { ref id, .. } => {
                let id = id.clone();
                if let Some(tx) = self.state(|s| s.sessions.remove(&id)) {
                    let _ = tx.send(message);
                }
            }
            // Handled by the connection (hello, command, bye) or mapped above.
            _ => {}
        }
    }
}

struct LinkAgent(Arc<Link>);

#[async_trait]
impl Agent for LinkAgent {
    fn attach(&self, signals: SignalSender) {
        crate::agent::feed_session(&self.0.queued, signals);
    }

    async fn send_prompt(
        &self,
        text: String,
        deliver_as: DeliverAs,
        images: Vec<PromptImage>,
    ) -> Result<(), String> {
        let id = self.0.id("p");
        let (tx, rx) = oneshot::channel();
        let connected = self.0.state(|s| {
            if s.conn.is_none() {
                return false;
            }
            s.prompts.insert(id.clone(), tx);
            s.awaiting_ack += 1;
            true
        });
        if !connected {
            return Err("the pi session is not connected to host-shim".into());
        }
        self.0
            .send(&link::prompt(id.clone(), text, deliver_as, &images));
        let result = tokio::time::timeout(PROMPT_ACK_TIMEOUT, rx).await;
        self.0.state(|s| {
            s.awaiting_ack = s.awaiting_ack.saturating_sub(1);
            s.prompts.remove(&id);
        });
        match result {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err("the pi session disconnected".into()),
            Err(_) => Err(format!(
                "pi did not take the prompt within {} s",
                PROMPT_ACK_TIMEOUT.as_secs()
            )),
        }
    }

    fn abort(&self) {
        self.0.send(&ToExtension::Abort);
    }

    fn is_idle(&self) -> bool {
        self.0.state(|s| !s.turn_open && s.awaiting_ack == 0)
    }

    fn session_info(&self) -> SessionInfo {
        self.0.state(|s| {
            let info = s.info.clone();
            SessionInfo {
                id: info.as_ref().map(|i| i.key.clone()).unwrap_or_default(),
                name: info.as_ref().and_then(|i| i.name.clone()),
                cwd: info.map(|i| i.cwd).unwrap_or_default(),
                accepts_images: true,
            }
        })
    }

    fn recent_work(&self) -> RecentWork {
        self.0.state(|s| s.work.clone())
    }

    async fn session_command(&self, command: SessionCommand) -> Result<SessionReply, String> {
        let id = self.0.id("s");
        let (tx, rx) = oneshot::channel();
        let connected = self.0.state(|s| {
            if s.conn.is_none() {
                return false;
            }
            s.sessions.insert(id.clone(), tx);
            true
        });
        if !connected {
            return Err("the pi session is not connected to host-shim".into());
        }
        self.0
            .send(&link::session_command(id.clone(), command.clone()));
        // A compaction is a model call: it may take minutes.
        let wait = if matches!(command, SessionCommand::Compact(_)) {
            COMPACT_TIMEOUT
        } else {
            SESSION_COMMAND_TIMEOUT
        };
        let result = tokio::time::timeout(wait, rx).await;
        self.0.state(|s| s.sessions.remove(&id));
        match result {
            Ok(Ok(answer)) => link::session_reply(&command, answer),
            Ok(Err(_)) => Err("the pi session disconnected".into()),
            // An extension older than session commands ignores the message.
            Err(_) => Err(format!(
                "pi did not answer within {} s (an older bot-connect extension has no session commands; install the one matching host-shim)",
                wait.as_secs()
            )),
        }
    }
}

struct LinkUi(Arc<Link>);

#[async_trait]
impl Ui for LinkUi {
    async fn notify(&self, level: Level, text: &str) {
        // pi's TUI prints this: no escape or invisible character may ride along (the
        // extension strips them too; this side does not rely on it).
        let message = ToExtension::Notify {
            level: link::level_name(level),
            text: transport_core::printable::strip_invisible_keep_lines(text).into_owned(),
        };
        if self.0.send(&message) {
            return;
        }
        // Nobody to show it to yet (start-up notes, a pairing code): keep it for pi.
        self.0.state(|s| {
            if s.backlog.len() == BACKLOG {
                s.backlog.pop_front();
            }
            s.backlog.push_back(link::encode(&message));
        });
    }

    async fn confirm(&self, title: &str, message: &str) -> bool {
        let id = self.0.id("k");
        let (tx, rx) = oneshot::channel();
        self.0.state(|s| s.confirms.insert(id.clone(), tx));
        let sent = self.0.send(&ToExtension::Confirm {
            id: id.clone(),
            title: title.into(),
            message: message.into(),
            timeout_ms: CONFIRM_TIMEOUT.as_millis() as u64,
        });
        // pi closes its dialog at the timeout; the margin covers the round trip.
        let yes = sent
            && matches!(
                tokio::time::timeout(CONFIRM_TIMEOUT + Duration::from_secs(5), rx).await,
                Ok(Ok(true))
            );
        self.0.state(|s| s.confirms.remove(&id));
        yes
    }
}

/// A pinned, boxed, sendable future.
pub type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// Builds the bridge session once the first pi says who it is.
pub type SessionStarter = Box<dyn FnOnce(LinkSession) -> BoxFuture<anyhow::Result<Served>> + Send>;

/// A started bridge session as its link sees it: where its local commands go, and what
/// ends it once its pi has gone.
pub struct Served {
    /// The session's local commands and the agent's files.
    pub handle: SessionHandle,
    /// Stops the session (state saved, pending replies reported) and lets go of whatever
    /// holds it: the session itself, a broker's attachment, a cluster node's lease.
    pub end: BoxFuture<anyhow::Result<()>>,
}

impl Served {
    /// A session this link owns alone: ending it is shutting it down.
    pub fn owned(session: Session) -> Served {
        Served {
            handle: session.handle(),
            end: Box::pin(session.shutdown()),
        }
    }
}

/// What the extension asks of the bridge session itself, answered in order.
enum Request {
    /// `/connect <args>` typed in pi.
    Local(String, oneshot::Sender<Note>),
    /// The agent's `send_file` tool.
    SendFile(FileRequest, oneshot::Sender<Result<String, String>>),
}

type CommandQueue = mpsc::Sender<Request>;

struct Server {
    link: Arc<Link>,
    expected_key: Option<String>,
    starter: Mutex<Option<SessionStarter>>,
    commands: tokio::sync::Mutex<Option<CommandQueue>>,
    runner: Mutex<Option<tokio::task::JoinHandle<()>>>,
    next_conn: AtomicU64,
}

/// Serves pi extensions on `listener` until `stop` resolves, then shuts the bridge
/// session down (state saved, locks released, transports stopped).
pub async fn serve(
    listener: UnixListener,
    link: Arc<Link>,
    expected_key: Option<String>,
    starter: SessionStarter,
    stop: impl std::future::Future<Output = ()>,
) {
    let server = Arc::new(Server {
        link,
        expected_key,
        starter: Mutex::new(Some(starter)),
        commands: tokio::sync::Mutex::new(None),
        runner: Mutex::new(None),
        next_conn: AtomicU64::new(1),
    });
    let mut connections = JoinSet::new();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let id = server.next_conn.fetch_add(1, Ordering::Relaxed);
                    connections.spawn(server.clone().connection(stream, id));
                }
                Err(e) => eprintln!("host-shim attach: a connection failed: {e}"),
            },
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
    // The aborted connections did not get to say so: a confirm still waiting for pi
    // answers no now, rather than hold the session's shutdown for its whole timeout.
    server.link.close();
    // Closing the queue makes the runner shut the session down.
    server.commands.lock().await.take();
    let runner = server
        .runner
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(runner) = runner {
        let _ = runner.await;
    }
}

impl Server {
    /// The queue of local commands, starting the session on first use.
    async fn session(&self, described: &LinkSession) -> Result<CommandQueue, String> {
        let mut commands = self.commands.lock().await;
        if let Some(queue) = commands.as_ref() {
            return Ok(queue.clone());
        }
        let starter = self
            .starter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| "the bridge session failed to start earlier".to_string())?;
        let Served { handle, end } = starter(described.clone())
            .await
            .map_err(|e| format!("the bridge session could not start: {e:#}"))?;
        let (queue, mut rx) = mpsc::channel::<Request>(16);
        let runner = tokio::spawn(async move {
            while let Some(request) = rx.recv().await {
                match request {
                    Request::Local(args, reply) => {
                        let note = handle.local_command(&args).await.unwrap_or_else(|e| Note {
                            level: Level::Error,
                            text: format!("bot-connect: {e}"),
                        });
                        let _ = reply.send(note);
                    }
                    Request::SendFile(file, reply) => {
                        let result = handle
                            .send_file(file)
                            .await
                            .unwrap_or_else(|e| Err(format!("bot-connect: {e}")));
                        let _ = reply.send(result);
                    }
                }
            }
            if let Err(e) = end.await {
                eprintln!("host-shim attach: {e:#}");
            }
        });
        *self.runner.lock().unwrap_or_else(PoisonError::into_inner) = Some(runner);
        *commands = Some(queue.clone());
        Ok(queue)
    }

    async fn connection(self: Arc<Self>, stream: UnixStream, id: u64) {
        let (read, mut write) = stream.into_split();
        let mut reader = BufReader::new(read);
        let (writer, mut lines) = mpsc::unbounded_channel::<String>();
        let writing = tokio::spawn(async move {
            while let Some(line) = lines.recv().await {
                if write.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
            let _ = write.shutdown().await;
        });
        let hello = tokio::time::timeout(HELLO_TIMEOUT, next_record(&mut reader, MAX_LINE)).await;
        let hello = match hello {
            Ok(Ok(Some(Record::Line(line)))) => link::parse(&line),
            // A peer that leaves without a word is another `attach` checking whether
            // this session is served: nothing to report.
            Ok(Ok(None)) => return,
            Ok(_) => Err("the connection failed before its hello".into()),
            Err(_) => Err(format!("no hello within {} s", HELLO_TIMEOUT.as_secs())),
        };
        let session = match hello {
            Ok(FromExtension::Hello {
                protocol, session, ..
            }) => match link::check_hello(protocol, &session, self.expected_key.as_deref()) {
                Ok(()) => session,
                Err(reason) => return refuse(reason, writer, writing).await,
            },
            Ok(_) => {
                let reason = "the first message must be a hello".to_string();
                return refuse(reason, writer, writing).await;
            }
            Err(why) => return refuse(why, writer, writing).await,
        };
        let busy = self.link.state(|s| s.conn.is_some());
        if busy {
            let reason = "another pi process is already attached to this session".to_string();
            return refuse(reason, writer, writing).await;
        }
        self.link.describe(&session);
        let commands = match self.session(&session).await {
            Ok(commands) => commands,
            Err(reason) => return refuse(reason, writer, writing).await,
        };
        let _ = writer.send(link::encode(&ToExtension::Hello {
            protocol: link::PROTOCOL,
            host: env!("CARGO_PKG_VERSION").into(),
        }));
        self.link.connect(id, writer.clone(), session);
        let mut said_bye = false;
        loop {
            let record = match next_record(&mut reader, MAX_LINE).await {
                Ok(Some(record)) => record,
                Ok(None) | Err(_) => break,
            };
            let line = match record {
                Record::Line(line) if line.trim().is_empty() => continue,
                Record::Line(line) => line,
                Record::TooLong(n) => {
                    self.warn(format!(
                        "the pi extension sent a line of {n} bytes; it was skipped"
                    ));
                    continue;
                }
            };
            match link::parse(&line) {
                Ok(FromExtension::Bye) => said_bye = true,
                Ok(FromExtension::Hello { .. }) => {
                    self.warn("the pi extension said hello twice; ignored".into());
                }
                Ok(FromExtension::Command { id, args }) => {
                    let commands = commands.clone();
                    let link = self.link.clone();
                    tokio::spawn(async move {
                        let (tx, rx) = oneshot::channel();
                        let note = match commands.send(Request::Local(args, tx)).await {
                            Ok(()) => rx.await.ok(),
                            Err(_) => None,
                        };
                        let note = note.unwrap_or(Note {
                            level: Level::Error,
                            text: "bot-connect: the bridge session has stopped.".into(),
                        });
                        link.send(&ToExtension::CommandResult {
                            id,
                            level: link::level_name(note.level),
                            text: note.text,
                        });
                    });
                }
                Ok(FromExtension::SendFile { id, path, caption }) => {
                    let commands = commands.clone();
                    let link = self.link.clone();
                    tokio::spawn(async move {
                        let (tx, rx) = oneshot::channel();
                        let request = Request::SendFile(FileRequest { path, caption }, tx);
                        let result = match commands.send(request).await {
                            Ok(()) => rx.await.ok(),
                            Err(_) => None,
                        };
                        let result = result.unwrap_or_else(|| {
                            Err(
                                "bot-connect: the bridge session has stopped; nothing was sent."
                                    .into(),
                            )
                        });
                        link.send(&link::send_file_result(id, result));
                    });
                }
                Ok(message) => self.link.on_message(message),
                Err(why) => self.warn(format!(
                    "host-shim skipped a message from the pi extension: {why}"
                )),
            }
        }
        self.link.disconnect(id);
        if !said_bye {
            eprintln!(
                "host-shim attach: the pi session disconnected without saying goodbye (did pi crash?)"
            );
        }
        drop(writer);
        let _ = writing.await;
    }

    /// A protocol problem: shown in pi, where the person is.
    fn warn(&self, text: String) {
        eprintln!("host-shim attach: {text}");
        self.link.send(&ToExtension::Notify {
            level: "warning",
            text,
        });
    }
}

/// Refuses a connection: says why, then closes it once the reason is written.
async fn refuse(
    reason: String,
    writer: mpsc::UnboundedSender<String>,
    writing: tokio::task::JoinHandle<()>,
) {
    eprintln!("host-shim attach: refused a pi extension: {reason}");
    let _ = writer.send(link::encode(&ToExtension::HelloRejected {
        protocol: link::PROTOCOL,
        reason,
    }));
    drop(writer);
    let _ = writing.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_names_are_short_stable_and_per_session() {
        let dir = Path::new("/state");
        let a = socket_path(dir, "019a-session");
        assert_eq!(a, socket_path(dir, "019a-session"));
        assert_ne!(a, socket_path(dir, "another"));
        assert_eq!(a.parent(), Some(Path::new("/state/links")));
        assert_eq!(a.file_name().unwrap().len(), 16 + ".sock".len());
    }

    #[test]
    fn the_ready_line_names_the_socket_and_version() {
        let line = ready_line(Path::new("/s/links/x.sock"), false);
        assert!(line.ends_with('\n'));
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["type"], "ready");
        assert_eq!(value["protocol"], link::PROTOCOL);
        assert_eq!(value["socket"], "/s/links/x.sock");
        assert_eq!(value["started"], false);
    }

    #[tokio::test]
    async fn a_live_socket_is_served_once_and_a_stale_one_is_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = socket_path(dir.path(), "k");
        let Bound::Listening(listener) = bind(&path).await.unwrap() else {
            panic!("the first attach listens");
        };
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&path), 0o600);
        assert!(matches!(bind(&path).await.unwrap(), Bound::AlreadyServed));
        drop(listener);
        // The file is still there, but nobody answers: a crashed attach's leftover.
        assert!(path.exists());
        assert!(matches!(bind(&path).await.unwrap(), Bound::Listening(_)));
    }

    #[tokio::test]
    async fn binding_never_chmods_a_directory_it_did_not_create_and_refuses_an_open_one() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        // The state file in a shared directory, like /tmp: that directory keeps its mode.
        let shared = tempfile::tempdir().unwrap();
        std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let path = crate::disk::paths::control_socket_path(shared.path());
        let Bound::Listening(_listener) = bind(&path).await.unwrap() else {
            panic!("listens");
        };
        assert_eq!(
            std::fs::metadata(shared.path())
                .unwrap()
                .permissions()
                .mode()
                & 0o7777,
            0o1777
        );
        assert_eq!(path.parent(), Some(shared.path().join("broker").as_path()));
        assert_eq!(mode(path.parent().unwrap()), 0o700);

        // A socket directory someone left open is refused, and left as it was.
        let open = shared.path().join("squatted");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = bind(&open.join("x.sock")).await.err().expect("refused");
        assert!(
            error
                .to_string()
                .contains("is open to other users (mode 777)"),
            "{error}"
        );
        assert_eq!(mode(&open), 0o777);
        // A symlink planted where the directory goes is refused too.
        let target = shared.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = shared.path().join("linked");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = bind(&link.join("x.sock")).await.err().expect("refused");
        assert!(error.to_string().contains("is not a directory"), "{error}");
    }

    #[tokio::test]
    async fn an_overlong_socket_path_is_a_clear_error() {
        let long = Path::new("/").join("d".repeat(120)).join("x.sock");
        let error = bind(&long).await.err().expect("too long");
        assert!(
            error.to_string().contains("PI_BOT_CONNECT_STATE"),
            "{error}"
        );
    }
}
