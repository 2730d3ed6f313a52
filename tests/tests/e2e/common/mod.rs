//! Shared set-up for the end-to-end tests: the real component in the real host, with
//! a fake messenger, a recording terminal and a temporary state directory; the real pi
//! ([`pi`]), a fake model for it ([`fake_model`]), a real nats-server ([`cluster`]),
//! ripgrep ([`ripgrep`]) and the fault soak ([`soak`]).
#![allow(dead_code)] // each test module uses a different part of this module

pub mod broker_world;
pub mod browser;
pub mod cluster;
pub mod cluster_world;
pub mod compiled;
pub mod fake_model;
pub mod npm;
pub mod pi;
pub mod ripgrep;
pub mod soak;
pub mod topic_places;
pub mod transcription;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use host_shim::agent::{Agent, AgentSignal, DemoAgent, RecentWork, SignalSender};
use host_shim::broker::BuildOne;
use host_shim::disk::lock::LockDir;
use host_shim::disk::state_db::StateDb;
use host_shim::factory::{self, Environment};
use host_shim::local::clock::ManualClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::hibernation::Hibernation;
use host_shim::sandbox::pairing_budget::PairingBudget;
use host_shim::sandbox::runtime::{Limits, Runtime};
use host_shim::sandbox::session::{Built, Session, SessionSpec};
use host_shim::transcript::Transcript;
use host_shim::wit::agent::{DeliverAs, PromptImage, SessionInfo};
use host_shim::wit::session::{AgentEvent, ConfigContent, ConfigScope, ConfigSource, TurnOrigin};
use tokio::sync::Notify;
use transport_core::{Envelope, OutboundKind, OutboundMessage, Transport};
use transport_testing::fake::{FakeConfig, FakeTransport};

/// Builds transports as the host does (`factory::build`), their credentials read from `env`
/// only, never from the process's own environment: a developer's real token cannot reach
/// a test, and each test's loopback server has its own.
pub fn build_with_env(env: Vec<(String, String)>, state_dir: std::path::PathBuf) -> BuildOne {
    Arc::new(move |request| {
        let var = |wanted: &str| {
            env.iter()
                .find(|(name, _)| name == wanted)
                .map(|(_, value)| value.clone())
        };
        factory::build(
            std::slice::from_ref(request),
            None,
            &Environment {
                var: &var,
                state_dir: Some(state_dir.clone()),
            },
        )
    })
}

/// An agent's reply of `text` to conversation `conversation_id`, as the bridge hands it to
/// a transport: no thread, no edit, no buttons.
pub fn reply_in(conversation_id: &str, text: &str) -> OutboundMessage {
    OutboundMessage {
        conversation_id: conversation_id.into(),
        thread_id: None,
        kind: OutboundKind::Reply,
        text: text.into(),
        edit_key: None,
        buttons: Vec::new(),
        answers_press: None,
        reply_to: None,
    }
}

/// How long any wait in these tests may take before it counts as a failure.
pub const WAIT: Duration = Duration::from_secs(20);

/// Instance slots the shared [`runtime`] gives each test running at once: a test holds a
/// few sessions, one more while a trapped one is replaced, and some hold several.
const SLOTS_PER_TEST: usize = 16;

/// The component loaded once for all the tests of this binary ([`compiled`]: compiled
/// once for the whole run). Every test running at once takes its sessions from this one pool, and libtest
/// runs as many at once as `RUST_TEST_THREADS` says, or as the machine has cores; the
/// default 16 slots are one process's worth of sessions. A slot is address space reserved,
/// not memory used, until an instance lives in it.
pub fn runtime() -> Arc<Runtime> {
    static RUNTIME: OnceLock<Arc<Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let threads = std::env::var("RUST_TEST_THREADS")
                .ok()
                .and_then(|threads| threads.parse().ok())
                .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
                .unwrap_or(1);
            let limits = Limits {
                max_instances: u32::try_from(threads.saturating_mul(SLOTS_PER_TEST))
                    .unwrap_or(u32::MAX)
                    .max(Limits::default().max_instances),
                ..Limits::default()
            };
            compiled::runtime(limits)
        })
        .clone()
}

/// Session facts for tests.
pub fn info(key: &str) -> SessionInfo {
    SessionInfo {
        id: key.into(),
        name: Some("test".into()),
        cwd: "/work".into(),
        accepts_images: true,
    }
}

/// One session under test and everything around it.
pub struct Harness {
    pub session: Session,
    pub fake: FakeTransport,
    pub ui: Arc<RecordingUi>,
    pub log: Arc<MemoryLog>,
    pub clock: Arc<ManualClock>,
}

/// What a harness is built from; the state file and lock dir can be shared between
/// harnesses (restart, isolation).
pub struct Setup {
    pub key: String,
    pub agent: Arc<dyn Agent>,
    pub config: Vec<ConfigSource>,
    pub fake: FakeTransport,
    pub state: Arc<StateDb>,
    pub locks: LockDir,
    pub runtime: Arc<Runtime>,
    pub transcript: Option<Transcript>,
    /// When the session hibernates (never, unless a test asks).
    pub hibernation: Hibernation,
}

/// A temporary directory with a state file and a lock dir.
pub struct Dirs {
    pub dir: tempfile::TempDir,
    pub state: Arc<StateDb>,
}

impl Dirs {
    pub fn new() -> Dirs {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = Dirs::open_state(&dir);
        Dirs { dir, state }
    }

    /// Opens the state database again, as a restarted process would.
    pub fn open_state(dir: &tempfile::TempDir) -> Arc<StateDb> {
        let (state, warnings) =
            StateDb::open(&dir.path().join("state.json"), 1_000).expect("state database opens");
        assert!(
            warnings.is_empty(),
            "unexpected state warnings: {warnings:?}"
        );
        Arc::new(state)
    }

    pub fn locks(&self) -> LockDir {
        LockDir::new(self.dir.path().join("locks"))
    }
}

/// A fake messenger that can edit (so progress cards are edited in place).
pub fn editable_fake() -> FakeTransport {
    let mut config = FakeConfig::default();
    config.capabilities.edit = true;
    FakeTransport::new(config)
}

impl Setup {
    pub fn new(dirs: &Dirs, key: &str) -> Setup {
        Setup {
            key: key.into(),
            agent: Arc::new(DemoAgent::new(Duration::ZERO, info(key))),
            config: Vec::new(),
            fake: editable_fake(),
            state: dirs.state.clone(),
            locks: dirs.locks(),
            runtime: runtime(),
            transcript: None,
            hibernation: Hibernation::never(),
        }
    }

    pub async fn start(self) -> Harness {
        let ui = Arc::new(RecordingUi::default());
        let log = Arc::new(MemoryLog::default());
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let transport: Arc<dyn Transport> = Arc::new(self.fake.handle());
        let spec = SessionSpec {
            key: self.key,
            config_sources: self.config,
            platforms: host_shim::factory::declarations(),
            transports: Box::new(move |_requests| Built {
                transports: vec![transport],
                notes: Vec::new(),
            }),
            agent: self.agent,
            ui: ui.clone(),
            state: self.state,
            locks: self.locks,
            pairing: PairingBudget::default(),
            clock: clock.clone(),
            log: log.clone(),
            exclusive: true,
            transcript: self.transcript,
        };
        let session = Session::spawn_with(self.runtime, spec, self.hibernation)
            .await
            .expect("session starts");
        Harness {
            session,
            fake: self.fake,
            ui,
            log,
            clock,
        }
    }
}

impl Harness {
    /// A direct message from `user` in its own conversation.
    pub fn dm(&self, user: &str, text: &str) -> Envelope {
        let mut envelope = self.fake.envelope(text);
        envelope.user_id = user.into();
        envelope.conversation_id = format!("dm-{user}");
        envelope
    }

    /// Sends a DM and waits until the bridge has posted something containing `expect`.
    pub async fn say(&self, user: &str, text: &str, expect: &str) {
        let before = self.fake.sent().len();
        self.fake
            .inject(self.dm(user, text))
            .await
            .expect("fake is listening");
        let found = self
            .fake
            .wait_for(WAIT, |sent, _| {
                sent[before.min(sent.len())..]
                    .iter()
                    .any(|m| m.message.text.contains(expect))
            })
            .await;
        assert!(
            found,
            "no message containing {expect:?} after {text:?}; sent: {:#?}",
            self.texts()
        );
    }

    /// Sends a DM without waiting for an answer (the answer may wait for something else,
    /// such as an approval).
    pub async fn send(&self, user: &str, text: &str) {
        self.fake
            .inject(self.dm(user, text))
            .await
            .expect("fake is listening");
    }

    /// Waits until a posted message contains `needle` and returns it; fails the test,
    /// naming everything posted, when none does in time.
    pub async fn posted(&self, needle: &str) -> String {
        let found = self
            .fake
            .wait_for(WAIT, |sent, _| {
                sent.iter().any(|m| m.message.text.contains(needle))
            })
            .await;
        assert!(
            found,
            "nothing posted contains {needle:?}: {:#?}",
            self.texts()
        );
        self.texts()
            .into_iter()
            .find(|t| t.contains(needle))
            .unwrap_or_default()
    }

    /// The id of the first approval request posted (`Approval needed (<id>): …`), once
    /// one is.
    pub async fn approval_id(&self) -> String {
        let request = self.posted("Approval needed (").await;
        request
            .trim_start_matches("Approval needed (")
            .split(')')
            .next()
            .unwrap_or_default()
            .to_string()
    }

    /// Every posted text, in order.
    pub fn texts(&self) -> Vec<String> {
        self.fake
            .sent()
            .into_iter()
            .map(|m| m.message.text)
            .collect()
    }

    /// The pairing code the terminal was shown last (digits only).
    pub fn code_shown_locally(&self) -> String {
        let notes = self.ui.notes();
        let note = notes
            .iter()
            .rev()
            .find(|(_, text)| text.starts_with("Messenger pairing code:"))
            .expect("a pairing code was shown locally");
        let code = note.1.trim_start_matches("Messenger pairing code:");
        code.split('(')
            .next()
            .unwrap_or("")
            .chars()
            .filter(char::is_ascii_digit)
            .collect()
    }

    /// Pairs `user` through the real flow: message, code from the terminal, code in chat.
    pub async fn pair(&self, user: &str) -> String {
        self.say(user, "hello", "not paired").await;
        let code = self.code_shown_locally();
        self.say(user, &code, "Paired as").await;
        code
    }
}

/// An agent that stays busy until the test releases it: for commands-while-busy.
#[derive(Default)]
pub struct GatedAgent {
    signals: Mutex<Option<SignalSender>>,
    busy: std::sync::atomic::AtomicBool,
    pub release: Arc<Notify>,
    pub prompts: Mutex<Vec<(String, DeliverAs)>>,
}

#[async_trait]
impl Agent for GatedAgent {
    fn attach(&self, signals: SignalSender) {
        *self.signals.lock().unwrap() = Some(signals);
    }

    async fn send_prompt(
        &self,
        text: String,
        deliver_as: DeliverAs,
        _images: Vec<PromptImage>,
    ) -> Result<(), String> {
        self.prompts
            .lock()
            .unwrap()
            .push((text.clone(), deliver_as));
        if self.busy.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Ok(()); // queued behind the running turn
        }
        let signals = self.signals.lock().unwrap().clone().ok_or("not attached")?;
        let release = self.release.clone();
        tokio::spawn(async move {
            let _ = signals
                .send(AgentSignal::Event(AgentEvent::TurnStarted(
                    TurnOrigin::Remote,
                )))
                .await;
            release.notified().await;
            let _ = signals
                .send(AgentSignal::Event(AgentEvent::AssistantMessage(format!(
                    "answer to: {text}"
                ))))
                .await;
            let _ = signals
                .send(AgentSignal::Event(AgentEvent::TurnSettled))
                .await;
        });
        Ok(())
    }

    fn abort(&self) {}

    fn is_idle(&self) -> bool {
        !self.busy.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn session_info(&self) -> SessionInfo {
        info("gated")
    }

    fn recent_work(&self) -> RecentWork {
        RecentWork::default()
    }
}

impl GatedAgent {
    /// Lets the running turn finish.
    pub fn finish(&self) {
        self.busy.store(false, std::sync::atomic::Ordering::SeqCst);
        self.release.notify_one();
    }
}

/// An agent the test drives by hand: it records prompts and aborts, and the test
/// plays its turns (local or remote) and its tool calls.
#[derive(Default)]
pub struct ScriptAgent {
    signals: Mutex<Option<SignalSender>>,
    pub busy: std::sync::atomic::AtomicBool,
    pub prompts: Mutex<Vec<String>>,
    /// The images that came with each prompt: media type and byte count.
    pub images: Mutex<Vec<(String, usize)>>,
    /// Signalled on every prompt, so a test waits for one without polling.
    prompted: Notify,
    pub aborts: std::sync::atomic::AtomicUsize,
    /// What the agent reports for the work digest; the test sets it.
    pub facts: Mutex<RecentWork>,
    /// The working directory it reports, when a test gives one (files from a chat are
    /// saved inside it); `/work` otherwise, like the other fakes.
    pub cwd: Mutex<Option<String>>,
}

impl ScriptAgent {
    fn sender(&self) -> SignalSender {
        self.signals
            .lock()
            .unwrap()
            .clone()
            .expect("attached to a session")
    }

    /// Reports an agent event to the session.
    pub async fn emit(&self, event: AgentEvent) {
        self.sender()
            .send(AgentSignal::Event(event))
            .await
            .expect("session alive");
    }

    /// Waits until the agent has received `count` prompts; panics after [`WAIT`].
    pub async fn wait_for_prompts(&self, count: usize) {
        let wait = async {
            while self.prompts.lock().unwrap().len() < count {
                self.prompted.notified().await;
            }
        };
        if tokio::time::timeout(WAIT, wait).await.is_err() {
            panic!(
                "the agent never got {count} prompt(s): {:?}",
                self.prompts.lock().unwrap()
            );
        }
    }

    /// Asks the session whether a tool may run, as the agent does before each call.
    pub async fn tool_call(&self, name: &str) -> host_shim::wit::session::ToolDecision {
        self.tool_call_with(name, serde_json::json!({})).await
    }

    /// Like `tool_call`, with the call's arguments (the session reads paths from them).
    pub async fn tool_call_with(
        &self,
        name: &str,
        input: serde_json::Value,
    ) -> host_shim::wit::session::ToolDecision {
        let (reply, verdict) = tokio::sync::oneshot::channel();
        self.sender()
            .send(AgentSignal::ToolCall {
                name: name.into(),
                input,
                reply,
            })
            .await
            .expect("session alive");
        tokio::time::timeout(WAIT, verdict)
            .await
            .expect("a verdict in time")
            .expect("a verdict")
    }
}

#[async_trait]
impl Agent for ScriptAgent {
    fn attach(&self, signals: SignalSender) {
        *self.signals.lock().unwrap() = Some(signals);
    }

    async fn send_prompt(
        &self,
        text: String,
        _deliver_as: DeliverAs,
        images: Vec<PromptImage>,
    ) -> Result<(), String> {
        self.images.lock().unwrap().extend(
            images
                .into_iter()
                .map(|image| (image.media_type, image.data.len())),
        );
        self.prompts.lock().unwrap().push(text);
        self.prompted.notify_one();
        Ok(())
    }

    fn abort(&self) {
        self.aborts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn is_idle(&self) -> bool {
        !self.busy.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn session_info(&self) -> SessionInfo {
        let mut info = info("script");
        if let Some(cwd) = self.cwd.lock().unwrap().clone() {
            info.cwd = cwd;
        }
        info
    }

    fn recent_work(&self) -> RecentWork {
        self.facts.lock().unwrap().clone()
    }
}

/// A config under which the demo agent's scripted turn really runs its shell step. Remote
/// turns are read-only by default, and the demo then answers "Not done" without echoing the
/// request, which the tests that follow a reply's text need.
pub fn demo_runs_tools() -> ConfigSource {
    user_config(r#"{"bridge": {"remoteToolPolicy": "unrestricted"}}"#)
}

/// The user's own config file (`~/.pi/agent/bot-connect.json`) with this JSON text: tests configure
/// themselves here, since a project file may only narrow
/// (docs/security.md#project-files-only-narrow).
pub fn user_config(json: &str) -> ConfigSource {
    ConfigSource {
        scope: ConfigScope::Global,
        path: "/home/me/.pi/agent/bot-connect.json".into(),
        content: ConfigContent::Text(json.into()),
    }
}

/// A project config source (`<cwd>/.pi/bot-connect.json`, from a cloned repository) with
/// this JSON text: it may only narrow what the user's file says.
pub fn project_config(json: &str) -> ConfigSource {
    ConfigSource {
        scope: ConfigScope::Project,
        path: "/work/.pi/bot-connect.json".into(),
        content: ConfigContent::Text(json.into()),
    }
}

/// `GET path` on the operator's listener at `addr`: the status code and the body.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connects");
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
            )
            .await
            .expect("writes");
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.expect("reads");
        reply
    };
    let reply = tokio::time::timeout(WAIT, exchange)
        .await
        .expect("answers in time");
    let status = reply
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}
