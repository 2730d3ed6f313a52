//! The agent session behind the bridge, and the built-in demo agent.
//!
//! An agent takes prompts and reports what it does as [`AgentSignal`]s: events for
//! progress cards and replies, and tool calls that wait for the bridge's verdict (remote
//! tool policy). The demo agent scripts a short turn per prompt so the whole flow is
//! visible offline.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};

use crate::wit::agent::{
    AgentQuestion, DeliverAs, PromptImage, QuestionAnswer, SessionCommand, SessionInfo,
    SessionReply, ShellRun,
};
use crate::wit::session::{AgentEvent, ToolDecision, ToolResult, TurnOrigin};

/// What an agent tells the session it is attached to.
#[derive(Debug)]
pub enum AgentSignal {
    /// Something happened (turn start, tool start/end, message, settle).
    Event(AgentEvent),
    /// A tool is about to run; the agent waits for the verdict. A dropped reply
    /// means the session is gone, and the agent must treat it as a block.
    ToolCall {
        /// Tool name.
        name: String,
        /// The call's arguments as the agent gave them; the session reads the paths out
        /// of them (`tool_paths`) and nothing else.
        input: serde_json::Value,
        /// Where the verdict goes.
        reply: oneshot::Sender<ToolDecision>,
    },
    /// The agent asks the person a question and waits (pi's `ctx.ui.select`, `confirm`,
    /// `input`, `editor`). A dropped reply means the session is gone: the agent treats it
    /// as dismissed.
    Question {
        /// The question; its id is the agent's own. Boxed: the largest signal by far, it set
        /// the size of every slot of every session's signal channel, whose first block of 32
        /// is allocated when the channel is made and kept while the session sleeps.
        question: Box<AgentQuestion>,
        /// Where the answer goes.
        reply: oneshot::Sender<QuestionAnswer>,
    },
    /// The agent's `send_file` tool (headless pi, through its RPC dialogs): the bridge
    /// judges, reads and uploads the file. A dropped reply means the session is gone: the
    /// tool fails with nothing sent.
    SendFile {
        /// The path as the agent wrote it, and the caption.
        request: FileRequest,
        /// What the agent is told: what went where, or why nothing was sent.
        reply: oneshot::Sender<Result<String, String>>,
    },
    /// The person at the agent's own terminal answered question `id` first (pi's TUI,
    /// where the question is asked too).
    LocalQuestionAnswer {
        /// The agent's id for the question.
        id: String,
        /// The answer given there.
        answer: QuestionAnswer,
    },
}

/// The agent's request to send a file (its `send_file` tool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRequest {
    /// The path as the agent wrote it.
    pub path: String,
    /// Text to show with it.
    pub caption: Option<String>,
}

/// Where an agent sends its [`AgentSignal`]s: the attached session's queue, in order, at
/// most `capacity` waiting (a full queue makes `send` wait).
///
/// Each signal travels boxed. A tokio channel allocates its first block of 32 slots when it
/// is made, and every session keeps its queue for its whole life, asleep or not: with the
/// signals inline, a slot was as large as the largest signal, 2.3 KiB a session for a queue
/// that is empty almost all the time (docs/scaling.md#idle-sessions); boxed, 256 bytes.
#[derive(Debug, Clone)]
pub struct SignalSender(mpsc::Sender<Box<AgentSignal>>);

/// The session's end of a [`SignalSender`].
#[derive(Debug)]
pub struct SignalReceiver(mpsc::Receiver<Box<AgentSignal>>);

/// A queue for an agent's signals holding at most `capacity` (at least one).
pub fn signal_channel(capacity: usize) -> (SignalSender, SignalReceiver) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    (SignalSender(tx), SignalReceiver(rx))
}

impl SignalSender {
    /// Queues `signal`, waiting while the queue is full; the signal comes back in the
    /// error when the session is gone.
    pub async fn send(
        &self,
        signal: AgentSignal,
    ) -> Result<(), mpsc::error::SendError<AgentSignal>> {
        self.0
            .send(Box::new(signal))
            .await
            .map_err(|gone| mpsc::error::SendError(*gone.0))
    }
}

impl SignalReceiver {
    /// The next signal, in the order they were sent; `None` once every sender is gone and
    /// nothing is left.
    pub async fn recv(&mut self) -> Option<AgentSignal> {
        self.0.recv().await.map(|signal| *signal)
    }

    /// The next signal if one is waiting, without waiting for one.
    pub fn try_recv(&mut self) -> Result<AgentSignal, mpsc::error::TryRecvError> {
        self.0.try_recv().map(|signal| *signal)
    }
}

/// A live agent session.
#[async_trait]
pub trait Agent: Send + Sync {
    /// Where the agent reports; called once when a session attaches.
    fn attach(&self, signals: SignalSender);
    /// Injects a remote prompt.
    async fn send_prompt(
        &self,
        text: String,
        deliver_as: DeliverAs,
        images: Vec<PromptImage>,
    ) -> Result<(), String>;
    /// Aborts the current turn.
    fn abort(&self);
    /// True when no turn is running.
    fn is_idle(&self) -> bool;
    /// Facts about the session.
    fn session_info(&self) -> SessionInfo;
    /// What the agent remembers for the work digest.
    fn recent_work(&self) -> RecentWork;
    /// Runs a session command (`/new`, `/compact`, `/model`, `/thinking`, `/usage`). An
    /// agent without such operations (the demo, test fakes) refuses, and the chat is told
    /// so: a command that pretended to work would mislead the person on the phone.
    async fn session_command(&self, command: SessionCommand) -> Result<SessionReply, String> {
        let _ = command;
        Err("this agent has no session commands".into())
    }
}

/// Hands the signals an agent's reader queued to the session that attached, on a task of
/// their own, once: `queued` is taken out of its slot (a second attach finds it empty). The
/// reader never waits for the session: a reader blocked on a full session channel could not
/// read the response a `send_prompt` (called by that same session) waits for. A slot whose
/// lock a panic poisoned still gives its receiver: dropping it would lose every signal.
pub fn feed_session(
    queued: &Mutex<Option<mpsc::UnboundedReceiver<Box<AgentSignal>>>>,
    signals: SignalSender,
) {
    let queued = queued
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let Some(mut queued) = queued else { return };
    tokio::spawn(async move {
        while let Some(signal) = queued.recv().await {
            // Passed on in its box: no copy, no second allocation.
            if signals.0.send(signal).await.is_err() {
                break;
            }
        }
    });
}

/// What an agent remembers for the work digest (the host adds what git says).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecentWork {
    /// The last prompt that started a turn.
    pub last_prompt: Option<String>,
    /// The last shell command it ran, with the end of its output.
    pub last_shell: Option<ShellRun>,
}

/// One step of a scripted turn.
#[derive(Debug, Clone)]
enum Step {
    Tool {
        name: &'static str,
        ok: bool,
        /// The path argument, for the tools that take one.
        path: Option<String>,
    },
    /// The answer, written from what the turn's tools actually did.
    Reply(Answer),
}

fn millis(pace: Duration) -> u64 {
    u64::try_from(pace.as_millis()).unwrap_or(u64::MAX)
}

/// Which answer a turn ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Short,
    /// After a pretend `write`.
    Wrote,
    Long,
    Failed,
}

/// What happened to one tool call of a turn: the answer must say exactly this, never
/// claim a tool ran that the bridge blocked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Ran { name: &'static str, ok: bool },
    Blocked { name: &'static str, reason: String },
}

/// What the demo's `bash` step pretends to run, and what it pretends to print: the digest
/// shows it as the last test run.
const DEMO_COMMAND: &str = "cargo test --workspace";
const DEMO_PASS: &str =
    "running 12 tests\n............\ntest result: ok. 12 passed; 0 failed; 0 ignored";
const DEMO_FAIL: &str =
    "running 12 tests\n.........F..\ntest result: FAILED. 11 passed; 1 failed; 0 ignored";

#[derive(Default)]
struct DemoState {
    queue: VecDeque<String>,
    running: bool,
    abort: bool,
    signals: Option<SignalSender>,
    facts: RecentWork,
}

/// The built-in demo agent: each prompt becomes a short scripted turn with tool calls
/// and a markdown reply; the prompt `long` produces a reply that needs several
/// messages. It stays busy for a few `pace` steps so commands-while-busy can be tried.
#[derive(Clone)]
pub struct DemoAgent {
    state: Arc<Mutex<DemoState>>,
    /// Milliseconds between steps, shared by the clones that run turns.
    pace: Arc<AtomicU64>,
    info: SessionInfo,
}

impl DemoAgent {
    /// A demo agent that waits `pace` between steps (zero in tests).
    pub fn new(pace: Duration, info: SessionInfo) -> Self {
        DemoAgent {
            state: Arc::default(),
            pace: Arc::new(AtomicU64::new(millis(pace))),
            info,
        }
    }

    /// Waits `pace` between steps from now on: the soak test's slow agent.
    pub fn set_pace(&self, pace: Duration) {
        self.pace.store(millis(pace), Ordering::Relaxed);
    }

    fn script(prompt: &str) -> Vec<Step> {
        let trimmed = prompt.trim();
        if trimmed.eq_ignore_ascii_case("long") {
            return vec![
                Step::Tool {
                    name: "read",
                    ok: true,
                    path: Some("README.md".into()),
                },
                Step::Tool {
                    name: "bash",
                    ok: true,
                    path: None,
                },
                Step::Reply(Answer::Long),
            ];
        }
        // `write <path>`: a pretend edit, to see a remote turn's scope at work (a path
        // outside `allowedPaths` is refused, a protected one asks). Nothing is written.
        if let Some(path) = trimmed
            .get(..6)
            .filter(|head| head.eq_ignore_ascii_case("write "))
            .map(|_| trimmed[6..].trim())
            .filter(|path| !path.is_empty())
        {
            return vec![
                Step::Tool {
                    name: "write",
                    ok: true,
                    path: Some(path.to_string()),
                },
                Step::Reply(Answer::Wrote),
            ];
        }
        if trimmed.eq_ignore_ascii_case("fail") {
            return vec![
                Step::Tool {
                    name: "bash",
                    ok: false,
                    path: None,
                },
                Step::Reply(Answer::Failed),
            ];
        }
        vec![
            Step::Tool {
                name: "read",
                ok: true,
                path: Some("README.md".into()),
            },
            Step::Tool {
                name: "bash",
                ok: true,
                path: None,
            },
            Step::Reply(Answer::Short),
        ]
    }

    async fn run(self) {
        loop {
            let (prompt, signals) = {
                let Ok(mut state) = self.state.lock() else {
                    return;
                };
                let Some(signals) = state.signals.clone() else {
                    state.running = false;
                    return;
                };
                match state.queue.pop_front() {
                    Some(prompt) => {
                        state.abort = false;
                        (prompt, signals)
                    }
                    None => {
                        state.running = false;
                        return;
                    }
                }
            };
            self.run_turn(&prompt, &signals).await;
        }
    }

    fn aborted(&self) -> bool {
        self.state.lock().map(|s| s.abort).unwrap_or(true)
    }

    fn remember(&self, remember: impl FnOnce(&mut RecentWork)) {
        if let Ok(mut state) = self.state.lock() {
            remember(&mut state.facts);
        }
    }

    async fn run_turn(&self, prompt: &str, signals: &SignalSender) {
        let emit = |event| signals.send(AgentSignal::Event(event));
        self.remember(|f| f.last_prompt = Some(prompt.to_string()));
        if emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
            .await
            .is_err()
        {
            return;
        }
        let mut outcomes = Vec::new();
        for step in Self::script(prompt) {
            if self.aborted() {
                let _ = emit(AgentEvent::AssistantMessage("Aborted.".into())).await;
                break;
            }
            match step {
                Step::Tool { name, ok, path } => {
                    let (reply, verdict) = oneshot::channel();
                    let input = match &path {
                        Some(path) => serde_json::json!({ "path": path }),
                        None if name == "bash" => serde_json::json!({ "command": DEMO_COMMAND }),
                        None => serde_json::json!({}),
                    };
                    let call = AgentSignal::ToolCall {
                        name: name.into(),
                        input,
                        reply,
                    };
                    if signals.send(call).await.is_err() {
                        return;
                    }
                    match verdict.await {
                        Ok(ToolDecision::Allow | ToolDecision::Narrowed(_)) => {
                            let _ = emit(AgentEvent::ToolStarted(name.into())).await;
                            self.pause().await;
                            if name == "bash" {
                                let output = if ok { DEMO_PASS } else { DEMO_FAIL };
                                self.remember(|f| {
                                    f.last_shell = Some(ShellRun {
                                        command: DEMO_COMMAND.into(),
                                        failed: !ok,
                                        output: output.into(),
                                    });
                                });
                            }
                            let result = ToolResult {
                                name: name.into(),
                                ok,
                            };
                            let _ = emit(AgentEvent::ToolFinished(result)).await;
                            outcomes.push(Outcome::Ran { name, ok });
                        }
                        Ok(ToolDecision::Block(reason)) => {
                            outcomes.push(Outcome::Blocked { name, reason });
                        }
                        Err(_) => return,
                    }
                }
                Step::Reply(answer) => {
                    self.pause().await;
                    let text = reply(answer, prompt.trim(), &outcomes);
                    let _ = emit(AgentEvent::AssistantMessage(text)).await;
                }
            }
        }
        let _ = emit(AgentEvent::TurnSettled).await;
    }

    async fn pause(&self) {
        let pace = Duration::from_millis(self.pace.load(Ordering::Relaxed));
        if !pace.is_zero() {
            tokio::time::sleep(pace).await;
        }
    }
}

#[async_trait]
impl Agent for DemoAgent {
    fn attach(&self, signals: SignalSender) {
        if let Ok(mut state) = self.state.lock() {
            state.signals = Some(signals);
        }
    }

    async fn send_prompt(
        &self,
        text: String,
        _deliver_as: DeliverAs,
        images: Vec<PromptImage>,
    ) -> Result<(), String> {
        let text = if images.is_empty() {
            text
        } else {
            format!("{text} (with {} image(s))", images.len())
        };
        let start = {
            let mut state = self
                .state
                .lock()
                .map_err(|_| "the demo agent is broken".to_string())?;
            if state.signals.is_none() {
                return Err("the demo agent is not attached to a session".into());
            }
            // Follow-up and steer both wait for the running turn in the demo: one turn
            // at a time keeps its cards easy to read.
            state.queue.push_back(text);
            !std::mem::replace(&mut state.running, true)
        };
        if start {
            tokio::spawn(self.clone().run());
        }
        Ok(())
    }

    fn abort(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.abort = true;
            state.queue.clear();
        }
    }

    fn is_idle(&self) -> bool {
        self.state.lock().map(|s| !s.running).unwrap_or(true)
    }

    fn session_info(&self) -> SessionInfo {
        self.info.clone()
    }

    fn recent_work(&self) -> RecentWork {
        self.state
            .lock()
            .map(|s| s.facts.clone())
            .unwrap_or_default()
    }
}

/// The turn's answer, from what its tools really did.
fn reply(answer: Answer, prompt: &str, outcomes: &[Outcome]) -> String {
    let blocked: Vec<String> = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Blocked { name, reason } => Some(format!("- `{name}` was blocked: {reason}")),
            Outcome::Ran { .. } => None,
        })
        .collect();
    if !blocked.is_empty() {
        return format!(
            "## Not done\n\nI could not do this, because the tools it needs were not allowed \
             for this turn:\n\n{}\n\nRun it at the terminal, or change \
             `bridge.remoteToolPolicy` or `bridge.remoteScope`.",
            blocked.join("\n")
        );
    }
    match answer {
        Answer::Long => long_reply(),
        Answer::Failed => "The command failed; see above.".into(),
        Answer::Short => short_reply(prompt, outcomes),
        Answer::Wrote => format!(
            "## Done\n\nI wrote `{}` (the demo agent only pretends: nothing on disk changed).",
            prompt.get(6..).unwrap_or("").trim()
        ),
    }
}

fn short_reply(prompt: &str, outcomes: &[Outcome]) -> String {
    let shown: String = prompt.chars().take(200).collect();
    let ran = |tool: &str| {
        outcomes
            .iter()
            .any(|o| matches!(o, Outcome::Ran { name, .. } if *name == tool))
    };
    let tick = |done: bool| if done { "[x]" } else { "[ ]" };
    format!(
        "## Done\n\nYou asked: *{shown}*\n\nWhat I did:\n\n- {} read `README.md`\n- {} ran the tests\n\
         - [ ] look at the result with `/connect digest`\n\n\
         ```sh\ncargo test --workspace\n```\n\nAll **green**. Send `long` for a long answer.",
        tick(ran("read")),
        tick(ran("bash"))
    )
}

fn long_reply() -> String {
    let mut text = String::from("# A long answer\n\nThis reply is split at its sections.\n\n");
    for section in 1..=12 {
        text.push_str(&format!("## Part {section}\n\n"));
        for line in 1..=6 {
            text.push_str(&format!(
                "Line {line} of part {section}: the bridge splits long replies at markdown \
                 structure, so a heading always travels with its body.\n"
            ));
        }
        text.push_str(&format!(
            "\n```rust\nfn part_{section}() -> u32 {{\n    {section}\n}}\n```\n\n"
        ));
    }
    text
}

/// An agent that takes every prompt and never starts a turn: for a replay, where every
/// agent import answers from the recorded script, and for benchmarks of the host alone.
#[derive(Debug, Default)]
pub struct IdleAgent;

#[async_trait]
impl Agent for IdleAgent {
    fn attach(&self, _: SignalSender) {}
    async fn send_prompt(
        &self,
        _: String,
        _: DeliverAs,
        _: Vec<PromptImage>,
    ) -> Result<(), String> {
        Ok(())
    }
    fn abort(&self) {}
    fn is_idle(&self) -> bool {
        true
    }
    fn session_info(&self) -> SessionInfo {
        SessionInfo {
            id: "idle".into(),
            name: None,
            cwd: "/".into(),
            accepts_images: false,
        }
    }
    fn recent_work(&self) -> RecentWork {
        RecentWork::default()
    }
}

/// [`IdleAgent`] whose session has a name, so `/status` and `/sessions` say which of many
/// sessions answered: for benchmarks of one host running many sessions.
#[derive(Debug)]
pub struct NamedIdleAgent {
    name: String,
}

impl NamedIdleAgent {
    /// An idle agent whose session is called `name`.
    pub fn new(name: impl Into<String>) -> NamedIdleAgent {
        NamedIdleAgent { name: name.into() }
    }
}

#[async_trait]
impl Agent for NamedIdleAgent {
    fn attach(&self, signals: SignalSender) {
        IdleAgent.attach(signals);
    }
    async fn send_prompt(
        &self,
        text: String,
        deliver_as: DeliverAs,
        images: Vec<PromptImage>,
    ) -> Result<(), String> {
        IdleAgent.send_prompt(text, deliver_as, images).await
    }
    fn abort(&self) {}
    fn is_idle(&self) -> bool {
        true
    }
    fn session_info(&self) -> SessionInfo {
        SessionInfo {
            name: Some(self.name.clone()),
            ..IdleAgent.session_info()
        }
    }
    fn recent_work(&self) -> RecentWork {
        RecentWork::default()
    }
}

#[cfg(test)]
mod feed_tests {
    use super::*;

    /// A slot a panic poisoned still hands its signals on, and only the first attach gets
    /// them (a second finds the slot empty and feeds nothing twice).
    #[tokio::test]
    async fn a_poisoned_slot_still_feeds_the_session_once() {
        let (queue, queued) = mpsc::unbounded_channel();
        let slot = Arc::new(Mutex::new(Some(queued)));
        let poisoner = slot.clone();
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.lock().expect("first lock");
            panic!("poison the slot");
        })
        .join();
        assert!(slot.is_poisoned());
        queue
            .send(Box::new(AgentSignal::Event(AgentEvent::TurnSettled)))
            .expect("queued");
        let (signals, mut session) = signal_channel(4);
        feed_session(&slot, signals.clone());
        feed_session(&slot, signals);
        assert!(matches!(
            session.recv().await,
            Some(AgentSignal::Event(AgentEvent::TurnSettled))
        ));
        drop(queue);
        assert!(session.recv().await.is_none(), "fed once, then closed");
    }

    #[tokio::test]
    async fn signals_arrive_in_order_and_come_back_when_the_session_is_gone() {
        let (signals, mut session) = signal_channel(2);
        for text in ["first", "second"] {
            signals
                .send(AgentSignal::Event(AgentEvent::AssistantMessage(
                    text.into(),
                )))
                .await
                .expect("the session listens");
        }
        let mut heard = Vec::new();
        while let Ok(AgentSignal::Event(AgentEvent::AssistantMessage(text))) = session.try_recv() {
            heard.push(text);
        }
        assert_eq!(heard, ["first", "second"]);
        assert!(session.try_recv().is_err(), "nothing more waits");
        drop(session);
        let refused = signals
            .send(AgentSignal::Event(AgentEvent::Notice("late".into())))
            .await
            .expect_err("nobody listens");
        assert!(
            matches!(refused.0, AgentSignal::Event(AgentEvent::Notice(ref text)) if text == "late"),
            "{refused:?}"
        );
    }
}
