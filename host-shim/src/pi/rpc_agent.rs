//! `host-shim run --agent pi`: host-shim starts `pi --mode rpc` itself and drives it
//! over pi's JSON-lines RPC protocol (`pi::rpc`), with no terminal UI in between.
//!
//! pi's RPC has no tool-call hook, so the remote tool policy is enforced by loading the
//! bot-connect extension into the rpc-mode pi as well (`-e`, with
//! `PI_BOT_CONNECT_RPC_GATE=1`): its `tool_call` handler asks host-shim for a verdict
//! through pi's own extension-UI sub-protocol (an `input` dialog titled
//! [`GATE_TITLE`]), and blocks the tool when no verdict comes within its timeout. Until
//! that extension has said it is loaded, remote prompts are refused: a policy that
//! cannot be enforced must not be assumed.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

use crate::agent::{Agent, AgentSignal, FileRequest, RecentWork, SignalSender};
use crate::local::ui::Ui;
use crate::pi::json_lines::{Record, next_record};
use crate::pi::rpc::{
    self, PiEvent, RpcCommand, RpcImage, RpcLine, RpcResponse, StreamingBehavior, UiRequest, Usage,
};
use crate::pi::session_commands;
use crate::pi::turns::PiTurns;
use crate::wit::agent::{
    AgentQuestion, DeliverAs, PromptImage, QuestionAnswer, QuestionKind, SessionCommand,
    SessionInfo, SessionReply, UsageReport,
};
use crate::wit::session::{AgentEvent, ToolDecision, TurnOrigin};
use crate::wit::types::Level;

/// The bot-connect pi extension, embedded so `run --agent pi` needs no separate install.
pub const EXTENSION_SOURCE: &str = include_str!("../../../examples/pi-extension/index.ts");

/// Environment variable that puts the extension in tool-gate mode (rpc pi under host-shim).
pub const GATE_ENV: &str = "PI_BOT_CONNECT_RPC_GATE";
/// Title of the `input` dialog the gate extension opens for each tool call.
pub const GATE_TITLE: &str = "bot-connect:tool-call";
/// The title of the dialog the extension's `send_file` opens in rpc mode: its body is
/// `{"v":1,"path":…,"caption":…}`, the answer `{"ok":…,"text":…}`. pi's RPC mode has no
/// other channel from an extension's tool to host-shim.
pub const SEND_FILE_TITLE: &str = "bot-connect:send-file";
/// Footer status key the gate extension sets once it is loaded.
pub const GATE_STATUS_KEY: &str = "bot-connect-gate";
/// Version of the gate's request and answer documents.
pub const GATE_VERSION: u64 = 1;

/// How long a prompt may wait for pi to accept it.
const PROMPT_ACK_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a session command may wait for pi's answer; a compaction is a model call.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(15);
/// Least time between two drafts of an answer sent to the bridge.
const DRAFT_EVERY: Duration = Duration::from_millis(250);
/// How long `/compact` may take: pi answers when the summary is written.
const COMPACT_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest stdout line kept: `agent_end` repeats the whole run, which can be large.
const MAX_LINE: usize = 64 << 20;
/// How much of pi's stderr is kept for the report when it exits.
const STDERR_TAIL: usize = 4096;
/// Warnings about unreadable lines shown before the rest are only counted.
const MAX_WARNINGS: u32 = 5;

/// How to start pi.
#[derive(Debug, Clone)]
pub struct PiLaunch {
    /// The pi executable (`pi` on `PATH` by default).
    pub program: OsString,
    /// Extra arguments for pi (provider, model, `--no-session`, …).
    pub args: Vec<OsString>,
    /// pi's working directory (the digest's).
    pub cwd: PathBuf,
    /// The extension file pi loads with `-e` (see [`write_extension`]).
    pub extension: PathBuf,
    /// Session key the bridge stores state under.
    pub key: String,
    /// How long pi may take to answer its first command.
    pub ready_timeout: Duration,
    /// Extra environment for pi (tests keep it away from the real `~/.pi`).
    pub env: Vec<(OsString, OsString)>,
}

/// Why pi could not be started.
#[derive(Debug, thiserror::Error)]
pub enum PiStartError {
    /// The executable could not be run.
    #[error(
        "cannot start pi ({program}): {source}. Install it with `npm install -g @mariozechner/pi-coding-agent`, or name it with --pi PATH"
    )]
    Spawn {
        /// What was run.
        program: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// pi did not answer its first command in time, or exited first.
    #[error("pi did not answer over RPC ({why}); pi's stderr ends with: {stderr}")]
    NotReady {
        /// What happened.
        why: String,
        /// The end of pi's stderr.
        stderr: String,
    },
    /// The extension file could not be written.
    #[error("cannot write the bot-connect pi extension to {path}: {source}")]
    Extension {
        /// Where it was written.
        path: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// Writes the embedded extension to `dir/index.ts` (owner-only), where the rpc pi loads
/// it from. A private directory, not `/tmp`: pi executes this file, so nobody else may be
/// able to replace it.
pub fn write_extension(dir: &std::path::Path) -> Result<PathBuf, PiStartError> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let path = dir.join("index.ts");
    let fail = |source| PiStartError::Extension {
        path: path.display().to_string(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(fail)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
    let temp = dir.join(format!("index.ts.{}.tmp", std::process::id()));
    {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)
            .map_err(fail)?;
        file.write_all(EXTENSION_SOURCE.as_bytes()).map_err(fail)?;
    }
    std::fs::rename(&temp, &path).map_err(fail)?;
    Ok(path)
}

/// How long pi may take to answer its first command under `run --agent pi`: start-up
/// took 2.5–5 s on a busy two-core machine.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts pi for `host-shim run --agent pi`, with the extension written to
/// `<state dir>/pi-extension/`.
pub async fn start_headless(
    program: OsString,
    args: Vec<OsString>,
    cwd: PathBuf,
    key: String,
    state_dir: &std::path::Path,
    ui: Arc<dyn Ui>,
) -> Result<PiRpcAgent, PiStartError> {
    let extension = write_extension(&state_dir.join("pi-extension"))?;
    let launch = PiLaunch {
        program,
        args,
        cwd,
        extension,
        key,
        ready_timeout: READY_TIMEOUT,
        env: Vec::new(),
    };
    PiRpcAgent::start(launch, ui).await
}

/// The gate's request: which tool pi wants to run, and its path-like arguments (`input`,
/// absent from an older gate). `Err` says why it is unreadable.
pub fn parse_gate_request(body: &str) -> Result<(String, Value), String> {
    let value: Value =
        serde_json::from_str(body).map_err(|_| "the tool-call request is not JSON".to_string())?;
    let version = value.get("v").and_then(Value::as_u64);
    if version != Some(GATE_VERSION) {
        return Err(format!(
            "the bot-connect extension speaks tool-gate version {}, host-shim speaks {GATE_VERSION}; install matching versions",
            version.map_or("unknown".into(), |v| v.to_string())
        ));
    }
    match value.get("tool").and_then(Value::as_str) {
        Some(tool) if !tool.is_empty() => Ok((
            tool.to_string(),
            value.get("input").cloned().unwrap_or(Value::Null),
        )),
        _ => Err("the tool-call request names no tool".into()),
    }
}

/// The extension's `send_file` request from its dialog body.
pub fn parse_send_file_request(body: &str) -> Result<FileRequest, String> {
    let value: Value =
        serde_json::from_str(body).map_err(|_| "the send_file request is not JSON".to_string())?;
    let version = value.get("v").and_then(Value::as_u64);
    if version != Some(GATE_VERSION) {
        return Err(format!(
            "the bot-connect extension speaks version {} of send_file, host-shim speaks {GATE_VERSION}; install matching versions",
            version.map_or("unknown".into(), |v| v.to_string())
        ));
    }
    match value.get("path").and_then(Value::as_str) {
        Some(path) if !path.trim().is_empty() => Ok(FileRequest {
            path: path.to_owned(),
            caption: value
                .get("caption")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }),
        _ => Err(
            "send_file needs a path: the file to send, relative to the working directory".into(),
        ),
    }
}

/// The answer document of the `send_file` dialog.
pub fn send_file_answer(result: Result<String, String>) -> String {
    let (ok, text) = match result {
        Ok(text) => (true, text),
        Err(text) => (false, text),
    };
    serde_json::json!({"ok": ok, "text": text}).to_string()
}

/// The gate's answer document for a verdict.
pub fn gate_answer(decision: &ToolDecision) -> String {
    let value = match decision {
        ToolDecision::Allow => serde_json::json!({"v": GATE_VERSION, "verdict": "allow"}),
        ToolDecision::Block(reason) => {
            serde_json::json!({"v": GATE_VERSION, "verdict": "block", "reason": reason})
        }
        ToolDecision::Narrowed(arguments) => serde_json::json!({
            "v": GATE_VERSION, "verdict": "allow",
            "set": crate::pi::link::arguments_map(arguments.clone()),
        }),
    };
    value.to_string()
}

/// A remote prompt as pi should see it: plain text. pi runs a prompt that starts with
/// `/` as an extension command or expands it as a skill or template; a messenger must
/// not reach those (an extension command can run code that no tool policy sees), so a
/// leading space keeps the text literal.
pub fn literal_prompt(text: &str) -> String {
    if text.starts_with('/') {
        format!(" {text}")
    } else {
        text.to_string()
    }
}

/// A dialog pi asked for, as the bridge's question. A method this host does not know is
/// asked as text: pi answers every dialog with a value or a dismissal.
pub fn question_of(
    id: String,
    method: &str,
    title: String,
    body: String,
    options: Vec<String>,
    timeout_ms: Option<u64>,
) -> AgentQuestion {
    let kind = match method {
        "select" => QuestionKind::Select(options),
        "confirm" => QuestionKind::Confirm,
        "editor" => QuestionKind::Editor,
        _ => QuestionKind::Input,
    };
    AgentQuestion {
        id,
        kind,
        title,
        message: body,
        timeout_ms,
    }
}

/// The bridge's answer as pi's `extension_ui_response`.
pub fn ui_response(id: String, answer: QuestionAnswer) -> RpcCommand {
    match answer {
        QuestionAnswer::Value(value) => RpcCommand::UiResponse {
            id,
            value: Some(value),
            confirmed: None,
            cancelled: false,
        },
        QuestionAnswer::Confirmed(yes) => RpcCommand::UiResponse {
            id,
            value: None,
            confirmed: Some(yes),
            cancelled: false,
        },
        QuestionAnswer::Cancelled => RpcCommand::UiResponse {
            id,
            value: None,
            confirmed: None,
            cancelled: true,
        },
    }
}

/// A pi notification level as the terminal's.
fn level_of(name: &str) -> Level {
    match name {
        "error" => Level::Error,
        "warning" => Level::Warning,
        _ => Level::Info,
    }
}

#[derive(Default)]
struct Shared {
    pending: HashMap<String, oneshot::Sender<RpcResponse>>,
    awaiting_ack: u32,
    gate_ready: bool,
    exited: Option<String>,
    session_name: Option<String>,
    stderr: Vec<u8>,
    warnings: u32,
    /// The model calls of the run in progress.
    turn_usage: Usage,
    /// The model calls of the last finished run (`/usage`, the footer).
    last_turn: Option<Usage>,
    /// When the last draft of an answer went to the bridge.
    last_draft: Option<std::time::Instant>,
}

struct Inner {
    key: String,
    cwd: String,
    turns: Mutex<PiTurns>,
    shared: Mutex<Shared>,
    writer: mpsc::UnboundedSender<String>,
    /// Boxed signals: the queue's first block of 32 slots lives as long as the session
    /// ([`crate::agent::SignalSender`] says why a slot must be small).
    queue: mpsc::UnboundedSender<Box<AgentSignal>>,
    queued: Mutex<Option<mpsc::UnboundedReceiver<Box<AgentSignal>>>>,
    ui: Arc<dyn Ui>,
    next_id: AtomicU64,
    child: tokio::sync::Mutex<Option<Child>>,
}

/// pi in RPC mode, as the bridge's agent.
#[derive(Clone)]
pub struct PiRpcAgent {
    inner: Arc<Inner>,
}

impl PiRpcAgent {
    /// Starts pi and waits until it answers `get_state`. pi sends no ready event, and
    /// commands sent earlier are only buffered, so the first answer is the readiness.
    pub async fn start(launch: PiLaunch, ui: Arc<dyn Ui>) -> Result<PiRpcAgent, PiStartError> {
        let mut command = Command::new(&launch.program);
        command
            .arg("--mode")
            .arg("rpc")
            .arg("-e")
            .arg(&launch.extension)
            .args(&launch.args)
            .current_dir(&launch.cwd)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .env(GATE_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // host-shim going away must not leave an agent running unattended.
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|source| PiStartError::Spawn {
            program: launch.program.to_string_lossy().into_owned(),
            source,
        })?;
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => {
                    return Err(PiStartError::NotReady {
                        why: "its standard streams could not be opened".into(),
                        stderr: String::new(),
                    });
                }
            };
        let (writer, lines) = mpsc::unbounded_channel();
        let (queue, queued) = mpsc::unbounded_channel();
        let agent = PiRpcAgent {
            inner: Arc::new(Inner {
                key: launch.key.clone(),
                cwd: launch.cwd.display().to_string(),
                turns: Mutex::new(PiTurns::new(TurnOrigin::Remote)),
                shared: Mutex::new(Shared::default()),
                writer,
                queue,
                queued: Mutex::new(Some(queued)),
                ui,
                next_id: AtomicU64::new(1),
                child: tokio::sync::Mutex::new(Some(child)),
            }),
        };
        tokio::spawn(write_lines(stdin, lines));
        tokio::spawn(agent.clone().collect_stderr(stderr));
        tokio::spawn(agent.clone().read_stdout(stdout));

        let id = agent.next_id("state");
        let answer = agent.request(RpcCommand::GetState { id: id.clone() }, &id);
        let why = match tokio::time::timeout(launch.ready_timeout, answer).await {
            Ok(Ok(response)) if response.success => {
                let state = rpc::parse_state(response.data.as_ref());
                agent.shared(|s| s.session_name = state.session_name);
                return Ok(agent);
            }
            Ok(Ok(response)) => response.error.unwrap_or_else(|| "get_state failed".into()),
            Ok(Err(_)) => "pi exited during start-up".into(),
            Err(_) => format!("no answer within {} s", launch.ready_timeout.as_secs()),
        };
        agent.stop().await;
        Err(PiStartError::NotReady {
            why,
            stderr: agent.stderr_tail(),
        })
    }

    /// Stops pi: closes its stdin (pi exits within about a second), then kills it if it
    /// has not.
    pub async fn stop(&self) {
        let child = self.inner.child.lock().await.take();
        let Some(mut child) = child else { return };
        drop(child.stdin.take());
        self.shared(|s| {
            s.exited
                .get_or_insert_with(|| "host-shim stopped it".into());
        });
        // Closing the writer channel ends the writer task, which drops pi's stdin.
        let _ = self.inner.writer.send(String::new());
        if tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }

    fn shared<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> R {
        let mut shared = self
            .inner
            .shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut shared)
    }

    fn stderr_tail(&self) -> String {
        self.shared(|s| String::from_utf8_lossy(&s.stderr).trim().to_string())
    }

    fn next_id(&self, what: &str) -> String {
        format!(
            "{what}-{}",
            self.inner.next_id.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Sends a command and returns the receiver of its response.
    fn request(&self, command: RpcCommand, id: &str) -> oneshot::Receiver<RpcResponse> {
        let (tx, rx) = oneshot::channel();
        self.shared(|s| s.pending.insert(id.to_string(), tx));
        self.send(&command);
        rx
    }

    /// Sends a command and waits for its answer's `data`: `Err` says, for a person, why
    /// pi did not do it.
    async fn call(
        &self,
        what: &str,
        make: impl FnOnce(String) -> RpcCommand,
        timeout: Duration,
    ) -> Result<Option<Value>, String> {
        if let Some(why) = self.shared(|s| s.exited.clone()) {
            return Err(format!("pi is not running: {why}"));
        }
        let id = self.next_id(what);
        let answer = self.request(make(id.clone()), &id);
        let result = tokio::time::timeout(timeout, answer).await;
        self.shared(|s| s.pending.remove(&id));
        match result {
            Ok(Ok(response)) if response.success => Ok(response.data),
            Ok(Ok(response)) => Err(response
                .error
                .unwrap_or_else(|| format!("pi refused {what}"))),
            Ok(Err(_)) => Err("pi exited before it answered".into()),
            Err(_) => Err(format!(
                "pi did not answer {what} within {} s",
                timeout.as_secs()
            )),
        }
    }

    async fn state(&self) -> Result<rpc::PiState, String> {
        let data = self
            .call(
                "get_state",
                |id| RpcCommand::GetState { id },
                COMMAND_TIMEOUT,
            )
            .await?;
        Ok(rpc::parse_state(data.as_ref()))
    }

    async fn available_models(&self) -> Result<Vec<(String, String)>, String> {
        let data = self
            .call(
                "get_available_models",
                |id| RpcCommand::GetAvailableModels { id },
                COMMAND_TIMEOUT,
            )
            .await?;
        Ok(rpc::parse_models(data.as_ref()))
    }

    fn send(&self, command: &RpcCommand) {
        // A closed writer means pi is gone; the exit report says so.
        let _ = self.inner.writer.send(rpc::encode(command));
    }

    fn emit(&self, signal: AgentSignal) {
        let _ = self.inner.queue.send(Box::new(signal));
    }

    async fn warn(&self, text: String) {
        let shown = self.shared(|s| {
            s.warnings += 1;
            s.warnings
        });
        if shown < MAX_WARNINGS {
            self.inner.ui.notify(Level::Warning, &text).await;
        } else if shown == MAX_WARNINGS {
            let text = format!("{text} (further unreadable lines from pi are not shown)");
            self.inner.ui.notify(Level::Warning, &text).await;
        }
    }

    async fn collect_stderr(self, mut stderr: tokio::process::ChildStderr) {
        let mut buffer = [0u8; 1024];
        while let Ok(n) = stderr.read(&mut buffer).await {
            if n == 0 {
                break;
            }
            self.shared(|s| {
                s.stderr.extend_from_slice(&buffer[..n]);
                let excess = s.stderr.len().saturating_sub(STDERR_TAIL);
                s.stderr.drain(..excess);
            });
        }
    }

    async fn read_stdout(self, stdout: tokio::process::ChildStdout) {
        let mut reader = BufReader::new(stdout);
        loop {
            match next_record(&mut reader, MAX_LINE).await {
                Ok(Some(Record::Line(line))) => self.on_line(&line).await,
                Ok(Some(Record::TooLong(n))) => {
                    self.warn(format!("pi sent a line of {n} bytes; it was skipped"))
                        .await;
                }
                Ok(None) | Err(_) => break,
            }
        }
        self.on_exit().await;
    }

    async fn on_line(&self, line: &str) {
        match rpc::parse_line(line) {
            RpcLine::Response(response) => {
                let waiting = response
                    .id
                    .as_ref()
                    .and_then(|id| self.shared(|s| s.pending.remove(id)));
                match waiting {
                    Some(tx) => {
                        let _ = tx.send(response);
                    }
                    None if !response.success => {
                        let why = response.error.unwrap_or_default();
                        self.warn(format!(
                            "pi rejected a command ({}): {why}",
                            response.command
                        ))
                        .await;
                    }
                    None => {}
                }
            }
            RpcLine::Event(PiEvent::ExtensionError {
                extension,
                event,
                error,
            }) => {
                let text = format!("a pi extension failed in {event} ({extension}): {error}");
                self.inner.ui.notify(Level::Warning, &text).await;
            }
            RpcLine::Event(PiEvent::MessageUpdate { role, text }) => {
                // pi streams a line per token; the bridge needs a draft a few times a second
                // at most (a card edits at most once a second by default).
                let due = role == "assistant"
                    && self.shared(|s| {
                        let now = std::time::Instant::now();
                        let due = s.last_draft.is_none_or(|at| now - at >= DRAFT_EVERY);
                        if due {
                            s.last_draft = Some(now);
                        }
                        due
                    });
                if due {
                    self.emit(AgentSignal::Event(AgentEvent::AssistantDraft(text)));
                }
            }
            RpcLine::Event(event) => {
                // Before the turn's events go out: the bridge asks for the last turn's usage
                // as soon as it hears the turn settled.
                self.shared(|s| match &event {
                    PiEvent::AgentStart => s.turn_usage = Usage::default(),
                    PiEvent::MessageEnd {
                        role,
                        usage: Some(usage),
                        ..
                    } if role == "assistant" => s.turn_usage = s.turn_usage.plus(*usage),
                    PiEvent::AgentEnd => s.last_turn = Some(s.turn_usage),
                    _ => {}
                });
                let events = {
                    let mut turns = self
                        .inner
                        .turns
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    turns.on_event(event)
                };
                for event in events {
                    self.emit(AgentSignal::Event(event));
                }
            }
            RpcLine::Ui(request) => self.on_ui(request).await,
            RpcLine::Ignored(_) => {}
            RpcLine::Invalid(why) => {
                self.warn(format!("pi sent a line host-shim cannot read: {why}"))
                    .await;
            }
        }
    }

    async fn on_ui(&self, request: UiRequest) {
        match request {
            UiRequest::Dialog {
                id, title, body, ..
            } if title == GATE_TITLE => {
                self.gate(id, &body);
            }
            UiRequest::Dialog {
                id, title, body, ..
            } if title == SEND_FILE_TITLE => {
                self.send_file(id, &body);
            }
            UiRequest::Dialog {
                id,
                method,
                title,
                body,
                options,
                timeout_ms,
            } => self.ask(question_of(id, &method, title, body, options, timeout_ms)),
            UiRequest::Notify { level, message } => {
                // On the card too, as its one notice line: the chat sees what the
                // terminal sees, and a burst of notices replaces itself there.
                self.emit(AgentSignal::Event(AgentEvent::Notice(message.clone())));
                self.inner
                    .ui
                    .notify(level_of(&level), &format!("pi: {message}"))
                    .await;
            }
            UiRequest::Status { key, text } if key == GATE_STATUS_KEY => {
                self.shared(|s| s.gate_ready = text.is_some());
            }
            UiRequest::Status { text, .. } => {
                self.emit(AgentSignal::Event(AgentEvent::Notice(
                    text.unwrap_or_default(),
                )));
            }
            UiRequest::Widget { lines, .. } => {
                let first = lines
                    .unwrap_or_default()
                    .into_iter()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or_default();
                self.emit(AgentSignal::Event(AgentEvent::Notice(first)));
            }
            // A window title or the editor's text means nothing on a phone.
            UiRequest::Other(_) => {}
        }
    }

    /// Another extension asks the person something: the bridge asks the turn's chats and
    /// the terminal, and its answer (or its dismissal) goes back as pi's
    /// `extension_ui_response`. Before, only a confirm reached the terminal and every other
    /// dialog was dismissed at once: the agent went on as if the person had declined.
    fn ask(&self, question: AgentQuestion) {
        let (reply, answer) = oneshot::channel();
        let id = question.id.clone();
        self.emit(AgentSignal::Question {
            question: Box::new(question),
            reply,
        });
        let agent = self.clone();
        tokio::spawn(async move {
            // A dropped reply means the session is gone: dismissed.
            let answer = answer.await.unwrap_or(QuestionAnswer::Cancelled);
            agent.send(&ui_response(id, answer));
        });
    }

    /// Hands the extension's `send_file` to the bridge and answers its dialog with what
    /// the agent is told.
    fn send_file(&self, id: String, body: &str) {
        let answer = move |result: Result<String, String>| RpcCommand::UiResponse {
            id: id.clone(),
            value: Some(send_file_answer(result)),
            confirmed: None,
            cancelled: false,
        };
        let request = match parse_send_file_request(body) {
            Ok(request) => request,
            Err(why) => {
                self.send(&answer(Err(why)));
                return;
            }
        };
        let (reply, result) = oneshot::channel();
        self.emit(AgentSignal::SendFile { request, reply });
        let agent = self.clone();
        tokio::spawn(async move {
            let result = result.await.unwrap_or_else(|_| {
                Err("the messenger bridge has stopped; nothing was sent".into())
            });
            agent.send(&answer(result));
        });
    }

    /// Asks the bridge for a verdict on a tool call and answers the gate's dialog.
    fn gate(&self, id: String, body: &str) {
        let answer = move |decision: &ToolDecision| RpcCommand::UiResponse {
            id: id.clone(),
            value: Some(gate_answer(decision)),
            confirmed: None,
            cancelled: false,
        };
        let (name, input) = match parse_gate_request(body) {
            Ok(request) => request,
            Err(why) => {
                self.send(&answer(&ToolDecision::Block(why)));
                return;
            }
        };
        let (reply, verdict) = oneshot::channel();
        self.emit(AgentSignal::ToolCall { name, input, reply });
        let agent = self.clone();
        tokio::spawn(async move {
            // A dropped reply means the session is gone: block (fail closed).
            let decision = verdict.await.unwrap_or_else(|_| {
                ToolDecision::Block("the messenger bridge has stopped; run the tool locally".into())
            });
            agent.send(&answer(&decision));
        });
    }

    async fn on_exit(&self) {
        let status = {
            let mut child = self.inner.child.lock().await;
            match child.as_mut() {
                Some(child) => {
                    match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
                        Ok(Ok(status)) => status.to_string(),
                        _ => "its output closed".into(),
                    }
                }
                None => "host-shim stopped it".into(),
            }
        };
        let stopped_by_us = self.shared(|s| {
            s.pending.clear();
            let ours = s.exited.is_some();
            s.exited
                .get_or_insert_with(|| format!("pi exited ({status})"));
            ours
        });
        let was_busy = self
            .inner
            .turns
            .lock()
            .map(|mut turns| {
                let busy = turns.busy();
                if busy {
                    turns.on_event(PiEvent::AgentEnd);
                }
                busy
            })
            .unwrap_or(false);
        if was_busy {
            // Close the open card rather than leave it showing a tool forever.
            self.emit(AgentSignal::Event(AgentEvent::TurnSettled));
        }
        if !stopped_by_us {
            let stderr = self.stderr_tail();
            let text = if stderr.is_empty() {
                format!("pi exited ({status}); remote prompts can no longer be delivered")
            } else {
                format!(
                    "pi exited ({status}); remote prompts can no longer be delivered. Its stderr ends with:\n{stderr}"
                )
            };
            self.inner.ui.notify(Level::Error, &text).await;
        }
    }
}

async fn write_lines(
    mut stdin: tokio::process::ChildStdin,
    mut lines: mpsc::UnboundedReceiver<String>,
) {
    while let Some(line) = lines.recv().await {
        // The empty line is the stop request (see `PiRpcAgent::stop`).
        if line.is_empty() {
            break;
        }
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
}

#[async_trait]
impl Agent for PiRpcAgent {
    fn attach(&self, signals: SignalSender) {
        crate::agent::feed_session(&self.inner.queued, signals);
    }

    async fn send_prompt(
        &self,
        text: String,
        deliver_as: DeliverAs,
        images: Vec<PromptImage>,
    ) -> Result<(), String> {
        let refusal = self.shared(|s| {
            if let Some(why) = &s.exited {
                return Some(format!("pi is not running: {why}"));
            }
            if !s.gate_ready {
                return Some(
                    "the bot-connect extension did not load into pi, so the remote tool policy \
                     cannot be enforced; remote prompts are refused until it does"
                        .to_string(),
                );
            }
            s.awaiting_ack += 1;
            None
        });
        if let Some(why) = refusal {
            return Err(why);
        }
        let id = self.next_id("prompt");
        let command = RpcCommand::Prompt {
            id: id.clone(),
            message: literal_prompt(&text),
            images: images
                .iter()
                .map(|i| RpcImage::new(&i.media_type, &i.data))
                .collect(),
            // Always set: while idle pi runs the prompt at once, while busy it queues it,
            // so an idle/busy race can never get the prompt rejected.
            streaming_behavior: Some(match deliver_as {
                DeliverAs::Steer => StreamingBehavior::Steer,
                DeliverAs::Immediate | DeliverAs::FollowUp => StreamingBehavior::FollowUp,
            }),
        };
        let answer = self.request(command, &id);
        let result = tokio::time::timeout(PROMPT_ACK_TIMEOUT, answer).await;
        self.shared(|s| {
            s.awaiting_ack = s.awaiting_ack.saturating_sub(1);
            s.pending.remove(&id);
        });
        match result {
            Ok(Ok(response)) if response.success => Ok(()),
            Ok(Ok(response)) => Err(response
                .error
                .unwrap_or_else(|| "pi rejected the prompt".into())),
            Ok(Err(_)) => Err("pi exited before it took the prompt".into()),
            Err(_) => Err(format!(
                "pi did not take the prompt within {} s",
                PROMPT_ACK_TIMEOUT.as_secs()
            )),
        }
    }

    fn abort(&self) {
        let id = self.next_id("abort");
        self.send(&RpcCommand::Abort { id });
    }

    fn is_idle(&self) -> bool {
        let busy = self.inner.turns.lock().map(|t| t.busy()).unwrap_or(false);
        !busy && self.shared(|s| s.awaiting_ack == 0)
    }

    fn session_info(&self) -> SessionInfo {
        SessionInfo {
            id: self.inner.key.clone(),
            name: Some(
                self.shared(|s| s.session_name.clone())
                    .unwrap_or_else(|| "pi".into()),
            ),
            cwd: self.inner.cwd.clone(),
            accepts_images: true,
        }
    }

    fn recent_work(&self) -> RecentWork {
        self.inner
            .turns
            .lock()
            .map(|t| t.recent_work())
            .unwrap_or_default()
    }

    async fn session_command(&self, command: SessionCommand) -> Result<SessionReply, String> {
        match command {
            SessionCommand::NewSession => {
                let data = self
                    .call(
                        "new_session",
                        |id| RpcCommand::NewSession { id },
                        COMMAND_TIMEOUT,
                    )
                    .await?;
                let cancelled = data
                    .as_ref()
                    .and_then(|d| d.get("cancelled"))
                    .and_then(Value::as_bool)
                    == Some(true);
                if cancelled {
                    return Err("an extension in pi cancelled the new session".into());
                }
                self.shared(|s| {
                    s.last_turn = None;
                    s.turn_usage = Usage::default();
                });
                Ok(SessionReply::Done(
                    "New session started: the earlier turns are no longer in the model's context."
                        .into(),
                ))
            }
            SessionCommand::Compact(instructions) => {
                let data = self
                    .call(
                        "compact",
                        |id| RpcCommand::Compact {
                            id,
                            custom_instructions: instructions,
                        },
                        COMPACT_TIMEOUT,
                    )
                    .await?;
                Ok(SessionReply::Done(session_commands::compacted_text(
                    data.as_ref(),
                )))
            }
            SessionCommand::SetModel(name) => {
                let available = self.available_models().await?;
                let (provider, model_id) = session_commands::resolve_model(&name, &available)?;
                let data = self
                    .call(
                        "set_model",
                        |id| RpcCommand::SetModel {
                            id,
                            provider: provider.clone(),
                            model_id: model_id.clone(),
                        },
                        COMMAND_TIMEOUT,
                    )
                    .await?;
                let now = rpc::model_name(data.as_ref())
                    .unwrap_or_else(|| format!("{provider}/{model_id}"));
                Ok(SessionReply::Done(format!("Model: {now}")))
            }
            SessionCommand::ListModels => {
                let available = self.available_models().await?;
                let current = self.state().await?.model;
                Ok(SessionReply::Models(session_commands::model_list(
                    current, &available,
                )))
            }
            SessionCommand::Thinking(level) => {
                let asked = match level {
                    Some(level) => {
                        let level = session_commands::thinking_level(&level)?;
                        self.call(
                            "set_thinking_level",
                            |id| RpcCommand::SetThinkingLevel {
                                id,
                                level: level.clone(),
                            },
                            COMMAND_TIMEOUT,
                        )
                        .await?;
                        Some(level)
                    }
                    None => None,
                };
                let now = self.state().await?.thinking_level;
                Ok(SessionReply::Done(session_commands::thinking_text(
                    asked.as_deref(),
                    now.as_deref(),
                )))
            }
            SessionCommand::Usage => {
                let data = self
                    .call(
                        "get_session_stats",
                        |id| RpcCommand::GetSessionStats { id },
                        COMMAND_TIMEOUT,
                    )
                    .await?;
                let (session, context_tokens, context_window) = rpc::parse_stats(data.as_ref());
                let last_turn = self.shared(|s| s.last_turn);
                Ok(SessionReply::Usage(UsageReport {
                    session: session_commands::token_use(session),
                    last_turn: last_turn.map(session_commands::token_use),
                    context_tokens,
                    context_window,
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_request_names_its_tool_in_the_current_version() {
        assert_eq!(
            parse_gate_request(r#"{"v":1,"tool":"bash"}"#),
            Ok(("bash".into(), Value::Null))
        );
        assert_eq!(
            parse_gate_request(r#"{"v":1,"tool":"write","input":{"path":"a"}}"#),
            Ok(("write".into(), serde_json::json!({"path": "a"})))
        );
        let old = parse_gate_request(r#"{"v":0,"tool":"bash"}"#).unwrap_err();
        assert!(
            old.contains("version 0") && old.contains("speaks 1"),
            "{old}"
        );
        assert!(
            parse_gate_request(r#"{"tool":"bash"}"#)
                .unwrap_err()
                .contains("unknown")
        );
        assert!(parse_gate_request(r#"{"v":1}"#).is_err());
        assert!(parse_gate_request(r#"{"v":1,"tool":""}"#).is_err());
        assert!(parse_gate_request("bash").is_err());
    }

    #[test]
    fn a_send_file_dialog_is_read_and_answered_with_what_the_agent_is_told() {
        let request =
            parse_send_file_request(r#"{"v":1,"path":"out/report.pdf","caption":"Q3"}"#).unwrap();
        assert_eq!(request.path, "out/report.pdf");
        assert_eq!(request.caption.as_deref(), Some("Q3"));
        assert!(parse_send_file_request(r#"{"v":1,"path":" "}"#).is_err());
        assert!(
            parse_send_file_request(r#"{"v":2,"path":"a"}"#)
                .unwrap_err()
                .contains("install matching versions")
        );
        let sent: Value = serde_json::from_str(&send_file_answer(Ok("Sent a".into()))).unwrap();
        assert_eq!(sent, serde_json::json!({"ok": true, "text": "Sent a"}));
        let refused: Value = serde_json::from_str(&send_file_answer(Err("no".into()))).unwrap();
        assert_eq!(refused, serde_json::json!({"ok": false, "text": "no"}));
        assert!(EXTENSION_SOURCE.contains(SEND_FILE_TITLE));
    }

    #[test]
    fn gate_answers_carry_the_verdict_and_reason() {
        let allow: Value = serde_json::from_str(&gate_answer(&ToolDecision::Allow)).unwrap();
        assert_eq!(allow, serde_json::json!({"v":1,"verdict":"allow"}));
        let block: Value =
            serde_json::from_str(&gate_answer(&ToolDecision::Block("read-only".into()))).unwrap();
        assert_eq!(
            block,
            serde_json::json!({"v":1,"verdict":"block","reason":"read-only"})
        );
    }

    #[test]
    fn pi_dialogs_become_questions_and_answers_become_pi_responses() {
        let select = question_of(
            "u1".into(),
            "select",
            "Where?".into(),
            String::new(),
            vec!["eu".into(), "us".into()],
            Some(5_000),
        );
        assert_eq!(
            select.kind,
            QuestionKind::Select(vec!["eu".into(), "us".into()])
        );
        assert_eq!(select.timeout_ms, Some(5_000));
        assert_eq!(
            question_of(
                "u".into(),
                "confirm",
                "t".into(),
                "m".into(),
                Vec::new(),
                None
            )
            .kind,
            QuestionKind::Confirm
        );
        assert_eq!(
            question_of(
                "u".into(),
                "editor",
                "t".into(),
                "x".into(),
                Vec::new(),
                None
            )
            .kind,
            QuestionKind::Editor
        );
        // A dialog pi adds later is asked as text: some answer beats none.
        assert_eq!(
            question_of(
                "u".into(),
                "pick-date",
                "t".into(),
                String::new(),
                Vec::new(),
                None
            )
            .kind,
            QuestionKind::Input
        );
        let line = |answer| -> Value {
            serde_json::from_str(&rpc::encode(&ui_response("u1".into(), answer))).unwrap()
        };
        assert_eq!(
            line(QuestionAnswer::Value("eu".into())),
            serde_json::json!({"type": "extension_ui_response", "id": "u1", "value": "eu"})
        );
        assert_eq!(
            line(QuestionAnswer::Confirmed(false)),
            serde_json::json!({"type": "extension_ui_response", "id": "u1", "confirmed": false})
        );
        assert_eq!(
            line(QuestionAnswer::Cancelled),
            serde_json::json!({"type": "extension_ui_response", "id": "u1", "cancelled": true})
        );
    }

    #[test]
    fn a_remote_slash_is_text_not_a_pi_command() {
        assert_eq!(literal_prompt("/skill:deploy now"), " /skill:deploy now");
        assert_eq!(literal_prompt("fix /tmp usage"), "fix /tmp usage");
        assert_eq!(literal_prompt(""), "");
    }

    #[test]
    fn the_embedded_extension_speaks_the_same_gate() {
        // The TypeScript side has no compiler here; these names are the contract.
        assert!(EXTENSION_SOURCE.contains(GATE_ENV));
        assert!(EXTENSION_SOURCE.contains(GATE_TITLE));
        assert!(EXTENSION_SOURCE.contains(GATE_STATUS_KEY));
        assert!(EXTENSION_SOURCE.contains(&format!("GATE_VERSION = {GATE_VERSION}")));
    }

    #[test]
    fn the_extension_is_written_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("pi-extension");
        let path = write_extension(&target).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), EXTENSION_SOURCE);
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&target), 0o700);
        assert_eq!(mode(&path), 0o600);
        // Writing again (the next start) replaces it.
        write_extension(&target).unwrap();
    }
}
