//! One agent session = one sandboxed instance, driven by one task.
//!
//! The task owns the store and delivers envelopes, agent signals, local commands and
//! ticks to the guest one at a time (calls never overlap). A trap is reported locally,
//! the session's host state is taken back out of the poisoned store, and a fresh instance
//! is configured from the saved state; other sessions never notice (C2).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use transport_core::{Inbound, Transport};

use crate::agent::{Agent, AgentSignal, SignalReceiver};
use crate::disk::lock::{Claimant, LockDir, LockError, LockGuard};
use crate::disk::state_store::StateStore;
use crate::local::clock::Clock;
use crate::local::logging::{CallCost, LogLine, LogSink};
use crate::local::ui::Ui;
use crate::sandbox::convert;
use crate::sandbox::hibernation::{self, Facts, Hibernation, Verdict};
use crate::sandbox::imports::{Given, ParkedCall, SessionContext, SessionHost};
use crate::sandbox::pairing_budget::PairingBudget;
use crate::sandbox::runtime::{Instance, Runtime};
use crate::sandbox::tool_paths::{PathContext, tool_paths};
use crate::transcript::Transcript;
use crate::transcript::line::Event;
use crate::wit::agent::QuestionAnswer;
use crate::wit::session::{
    AgentEvent, ConfigSource, Configuration, DiagnosticsReport, Note, Platform, ToolAnswer,
    ToolCall, ToolDecision,
};
use crate::wit::types::Level;

/// Consecutive restarts after which a session stops trying: a trap that repeats on
/// every fresh instance (say, in `configure`) would otherwise loop forever.
const MAX_RESTARTS: u32 = 3;

/// The local command's name when the bridge says none (`/connect …`).
const DEFAULT_LOCAL_COMMAND: &str = "connect";

// The session API names what a factory builds; they live with the factory.
pub use crate::factory::{Built, TransportFactory};

/// Everything needed to start a session.
pub struct SessionSpec {
    /// Session key: the scope of the saved state.
    pub key: String,
    /// Configuration files, lowest precedence first.
    pub config_sources: Vec<ConfigSource>,
    /// The transports this host offers, as their crates declare them.
    pub platforms: Vec<Platform>,
    /// Builds the transports from the validated configuration.
    pub transports: TransportFactory,
    /// The agent.
    pub agent: Arc<dyn Agent>,
    /// The local terminal.
    pub ui: Arc<dyn Ui>,
    /// Where the session's state document lives: the shared state file, or a cluster's
    /// KV bucket.
    pub state: Arc<dyn StateStore>,
    /// Lock directory.
    pub locks: LockDir,
    /// The pairing failure budget: one per host, the same for every session a broker runs.
    pub pairing: PairingBudget,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Log sink.
    pub log: Arc<dyn LogSink>,
    /// Take the session lock (a live host). `doctor` and `explain` look without taking
    /// it, so they work while the session runs elsewhere.
    pub exclusive: bool,
    /// Where to record the session (opt-in: `--transcript`, `PI_BOT_CONNECT_TRANSCRIPT`).
    pub transcript: Option<Transcript>,
}

/// How a session has fared, for tests and `doctor`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Health {
    /// Instances replaced after a trap.
    pub restarts: u32,
    /// The last trap, as reported.
    pub last_trap: Option<String>,
    /// The session gave up after repeated traps.
    pub stopped: bool,
    /// The session is hibernated now: no instance, its state in the store
    /// (docs/scaling.md#idle-sessions).
    pub hibernated: bool,
    /// Times it hibernated.
    pub hibernations: u32,
    /// Times an input woke it.
    pub wakes: u32,
}

enum Command {
    Local(String, oneshot::Sender<Note>),
    SendFile(FileRequest, oneshot::Sender<Result<String, String>>),
    // Boxed: every session's command channel allocates its first block of 32 commands at
    // once, and an envelope inline made each command 4x larger (7 KiB a session, idle or
    // hibernated, for a command a session almost never gets).
    Preview(
        Box<transport_core::Envelope>,
        oneshot::Sender<Option<String>>,
    ),
    Diagnostics(oneshot::Sender<Option<DiagnosticsReport>>),
    Health(oneshot::Sender<Health>),
    Tick(oneshot::Sender<()>),
    Hibernate(oneshot::Sender<bool>),
    Shutdown(oneshot::Sender<()>),
}

/// The agent's request to send a file, named here too for the session's callers.
pub use crate::agent::FileRequest;

/// What a chat hears when its message finds the session hibernated and the pool full.
pub const WAKE_REFUSED: &str = "⚠ This session is asleep and could not wake for your message: \
     its machine runs as many sessions at once as it may. Nothing was sent to the agent; send it \
     again in a minute.";

/// A session's local commands and the agent's files, for a pi link whose session is
/// owned elsewhere (a cluster node starts, moves and stops it): a clone of its queue.
#[derive(Clone)]
pub struct SessionHandle {
    commands: mpsc::Sender<Box<Command>>,
    local_command: String,
}

impl SessionHandle {
    /// [`Session::local_command_name`].
    pub fn local_command_name(&self) -> &str {
        &self.local_command
    }

    /// [`Session::local_command`].
    pub async fn local_command(&self, args: &str) -> anyhow::Result<Note> {
        ask(&self.commands, |tx| Command::Local(args.to_string(), tx)).await
    }

    /// [`Session::send_file`].
    pub async fn send_file(&self, request: FileRequest) -> anyhow::Result<Result<String, String>> {
        ask(&self.commands, |tx| Command::SendFile(request, tx)).await
    }
}

async fn ask<R>(
    commands: &mpsc::Sender<Box<Command>>,
    make: impl FnOnce(oneshot::Sender<R>) -> Command,
) -> anyhow::Result<R> {
    let (tx, rx) = oneshot::channel();
    commands
        .send(Box::new(make(tx)))
        .await
        .map_err(|_| gone())?;
    rx.await.map_err(|_| gone())
}

/// A running session. Dropping it does not stop it; call [`Session::shutdown`].
pub struct Session {
    commands: mpsc::Sender<Box<Command>>,
    task: JoinHandle<()>,
    local_command: String,
}

/// The lock file that keeps a second host off this session: named after a hash of the
/// key (keys hold paths and colons, lock names may not).
pub fn session_lock_name(key: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(key.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("session-{hex}")
}

/// The directory holding `key`'s session lock: `<locks>/sessions/<2 hex digits>/`, one of
/// 256 shards picked by the lock name's hash. 100,000 sessions make about 390 files per
/// directory instead of 100,000 in one (each lookup, `ls` and backup of the lock
/// directory slowed with all of them). The lock files keep the protocol every other lock
/// uses (pid probe, token, reclaim of a dead holder): a lock held in the database could not
/// tell a holder killed with SIGKILL from a live one.
pub fn session_lock_dir(locks: &LockDir, key: &str) -> LockDir {
    let name = session_lock_name(key);
    let shard = &name[name.len() - 2..];
    LockDir::new(locks.dir().join("sessions").join(shard))
}

/// Takes the session lock, or says who holds it and what to do. Two hosts on one
/// session would each save their own copy of its state over the other's, losing a
/// pairing the other had just made. A live holder is never reclaimed for its age (a
/// session runs for days); a dead one on this machine is.
fn acquire_session_lock(locks: &LockDir, key: &str, now_ms: u64) -> anyhow::Result<LockGuard> {
    // A host-shim from before the shards may still run this session, holding its lock
    // where it used to be: refuse while that holder lives.
    if let Some(holder) = locks.live_holder(&session_lock_name(key), now_ms) {
        anyhow::bail!(
            "another host-shim already runs session {key:?} ({holder}). Stop that one first, \
             or start this one with --session <another key>."
        );
    }
    session_lock_dir(locks, key)
        .acquire(
            &session_lock_name(key),
            u64::MAX,
            &Claimant::this_process(now_ms),
        )
        .map_err(|error| match error {
            LockError::Held { holder_description } => anyhow::anyhow!(
                "another host-shim already runs session {key:?} ({holder_description}). Stop \
                 that one first, or start this one with --session <another key>."
            ),
            other => anyhow::anyhow!("cannot take the lock of session {key:?}: {other}"),
        })
}

/// `platforms` as one allocation shared by every session that offers the same list (in a
/// broker or a node, all of them): the declarations with their settings' descriptions are
/// about 5 KiB, which 100,000 hibernated sessions would otherwise each keep a copy of.
fn shared_platforms(platforms: Vec<Platform>) -> Arc<[Platform]> {
    static LAST: std::sync::Mutex<Option<Arc<[Platform]>>> = std::sync::Mutex::new(None);
    share_with_last(&LAST, platforms)
}

/// A session's config files (their paths and text) as one allocation shared by every
/// session that reads the same: a broker's sessions mostly read one global config, whose
/// copy each of 100,000 hibernated sessions kept otherwise.
fn shared_sources(sources: Vec<ConfigSource>) -> Arc<[ConfigSource]> {
    static LAST: std::sync::Mutex<Option<Arc<[ConfigSource]>>> = std::sync::Mutex::new(None);
    share_with_last(&LAST, sources)
}

/// A session's own paths (`PathContext::own`) as one allocation shared by every session with
/// the same config files: the state database's files and the broker's are the same for all.
fn shared_own_paths(paths: Vec<PathBuf>) -> Arc<[PathBuf]> {
    static LAST: std::sync::Mutex<Option<Arc<[PathBuf]>>> = std::sync::Mutex::new(None);
    share_with_last(&LAST, paths)
}

/// `list`, or the last list shared through `last` when it is equal.
fn share_with_last<T: PartialEq>(
    last: &std::sync::Mutex<Option<Arc<[T]>>>,
    list: Vec<T>,
) -> Arc<[T]> {
    // A poisoned lock only means another session panicked while swapping the Arc in.
    let mut last = last
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match &*last {
        Some(shared) if shared[..] == list[..] => shared.clone(),
        _ => {
            let shared: Arc<[T]> = list.into();
            *last = Some(shared.clone());
            shared
        }
    }
}

/// The error when the session task is gone.
fn gone() -> anyhow::Error {
    anyhow::anyhow!("the session has stopped")
}

impl Session {
    /// Instantiates the bridge for `spec`, configures it, builds and starts transports.
    /// Configuration problems are notified locally and never stop the session (I16).
    /// It never hibernates ([`Session::spawn_with`] for one that does).
    pub async fn spawn(runtime: Arc<Runtime>, spec: SessionSpec) -> anyhow::Result<Session> {
        Self::spawn_with(runtime, spec, Hibernation::never()).await
    }

    /// [`Session::spawn`], hibernating as `hibernation` says: after that long without
    /// input, an idle session's instance is dropped and the next input boots a fresh one
    /// from the store (docs/scaling.md#idle-sessions).
    pub async fn spawn_with(
        runtime: Arc<Runtime>,
        spec: SessionSpec,
        hibernation: Hibernation,
    ) -> anyhow::Result<Session> {
        // Exactly as long as it needs: a pushed vector keeps room for four (320 bytes), for
        // the whole life of the session.
        let held_locks = if spec.exclusive {
            let lock = acquire_session_lock(&spec.locks, &spec.key, spec.clock.now_ms())?;
            vec![(session_lock_name(&spec.key), lock)]
        } else {
            Vec::new()
        };
        // A running session's document is never pruned by another session's save.
        spec.state.hold(&spec.key);
        let (inbound_tx, inbound_rx) = transport_core::inbound::channel(256);
        let (signals_tx, signals_rx) = crate::agent::signal_channel(64);
        spec.agent.attach(signals_tx);
        let paths = PathContext {
            cwd: PathBuf::from(spec.agent.session_info().cwd),
            // The process edge: `~` in a tool's path means this user's home.
            home: std::env::var_os("HOME").map(PathBuf::from),
            own: shared_own_paths(
                spec.config_sources
                    .iter()
                    .map(|source| PathBuf::from(&source.path))
                    .chain(
                        spec.state
                            .path()
                            .iter()
                            .flat_map(|p| crate::disk::paths::bridge_files(p)),
                    )
                    .chain(std::iter::once(spec.locks.dir().to_path_buf()))
                    .collect(),
            ),
        };
        let ctx = SessionContext {
            held_locks,
            transcript: spec.transcript,
            ..SessionContext::new(Given {
                key: spec.key,
                inbound: inbound_tx,
                agent: spec.agent,
                ui: spec.ui,
                state: spec.state,
                locks: spec.locks,
                pairing: spec.pairing,
                clock: spec.clock,
                log: spec.log,
            })
        };
        let started_ms = ctx.clock.now_ms();
        let instance = runtime.instantiate(SessionHost::new(ctx)).await?;
        let mut actor = Actor {
            answers: Answers::default(),
            runtime,
            slot: Slot::Live(Box::new(instance)),
            sources: shared_sources(spec.config_sources),
            platforms: shared_platforms(spec.platforms),
            transport_ids: Vec::new(),
            health: Health::default(),
            consecutive_restarts: 0,
            local_command: DEFAULT_LOCAL_COMMAND.to_owned(),
            paths,
            idle_check_at: hibernation
                .after
                .map(|after| hibernation::due_at(started_ms, after)),
            last_input_ms: started_ms,
            hibernation,
            told_notes: String::new(),
        };
        actor.boot(Some(spec.transports), Notes::Told).await;
        let local_command = actor.local_command.clone();
        let (commands, commands_rx) = mpsc::channel(32);
        let task = tokio::spawn(actor.run(commands_rx, inbound_rx, signals_rx));
        Ok(Session {
            commands,
            task,
            local_command,
        })
    }

    /// `bridge.localCommand` as the bridge read it (`connect` when the bridge could not be
    /// configured): a terminal takes `/<it> …` as a local command.
    pub fn local_command_name(&self) -> &str {
        &self.local_command
    }

    async fn ask<R>(&self, make: impl FnOnce(oneshot::Sender<R>) -> Command) -> anyhow::Result<R> {
        ask(&self.commands, make).await
    }

    /// What the session's pi link may ask of it while its owner (a cluster node) keeps
    /// the session itself.
    pub fn handle(&self) -> SessionHandle {
        SessionHandle {
            commands: self.commands.clone(),
            local_command: self.local_command.clone(),
        }
    }

    /// Runs a local `/connect …` command; returns the text for the terminal.
    pub async fn local_command(&self, args: &str) -> anyhow::Result<Note> {
        self.ask(|tx| Command::Local(args.to_string(), tx)).await
    }

    /// The agent's `send_file`: the bridge judges, reads (through the host), redacts and
    /// uploads the file to the current turn's chats. `Ok` says what went where, `Err` why
    /// nothing was sent; both are for the agent.
    pub async fn send_file(&self, request: FileRequest) -> anyhow::Result<Result<String, String>> {
        self.ask(|tx| Command::SendFile(request, tx)).await
    }

    /// What the bridge would do with `envelope`, without doing it; `None` when the
    /// session gave up after traps.
    pub async fn preview(
        &self,
        envelope: transport_core::Envelope,
    ) -> anyhow::Result<Option<String>> {
        self.ask(|tx| Command::Preview(Box::new(envelope), tx))
            .await
    }

    /// The bridge's diagnostics; `None` when the session gave up after traps.
    pub async fn diagnostics(&self) -> anyhow::Result<Option<DiagnosticsReport>> {
        self.ask(Command::Diagnostics).await
    }

    /// Trap and restart counters.
    pub async fn health(&self) -> anyhow::Result<Health> {
        self.ask(Command::Health).await
    }

    /// Delivers a tick now (tests with a manual clock use this instead of waiting).
    pub async fn tick(&self) -> anyhow::Result<()> {
        self.ask(Command::Tick).await
    }

    /// Hibernates the session now if it may (quiet for the configured time by its clock,
    /// nothing held only in memory); true when it is hibernated after the call. The
    /// session does this by itself when the time comes; tests with a manual clock call it
    /// instead of waiting.
    pub async fn hibernate_if_idle(&self) -> anyhow::Result<bool> {
        self.ask(Command::Hibernate).await
    }

    /// Stops the bridge (locks released, state saved) and its transports.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let result = self.ask(Command::Shutdown).await;
        let _ = self.task.await;
        result
    }
}

/// What woke a session's loop.
enum Next {
    Inbound(Inbound),
    Signal(AgentSignal),
    Answer(String, bool),
    /// `None`: every handle to the session is gone.
    Command(Option<Box<Command>>),
    Tick,
    IdleCheck,
}

/// Whether a session's loop goes on after handling one input.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    Go,
    Stop,
}

/// Where local answers to pending approvals come back from their question tasks. Made with
/// the first approval a session asks and dropped when it hibernates (none is pending then):
/// tokio allocates a channel's first block of 32 messages when the channel is made, which
/// every session, awake or asleep, kept for a channel most never use.
#[derive(Default)]
struct Answers(Option<(mpsc::Sender<Answer>, mpsc::Receiver<Answer>)>);

/// A local answer to a pending approval: the approval's id and whether it was allowed.
type Answer = (String, bool);

impl Answers {
    /// Where a question task sends its answer.
    fn sender(&mut self) -> mpsc::Sender<Answer> {
        self.0.get_or_insert_with(|| mpsc::channel(16)).0.clone()
    }

    /// The next answer; never ready while there is no channel.
    async fn recv(&mut self) -> Option<Answer> {
        match &mut self.0 {
            Some((_, answers)) => answers.recv().await,
            None => std::future::pending().await,
        }
    }

    /// Drops the channel (no question task may hold its sender any more).
    fn forget(&mut self) {
        self.0 = None;
    }
}

/// Whether a boot's configuration notes go to the terminal.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Notes {
    /// Told (a start, a restart after a trap: something changed the person should hear).
    Told,
    /// Told only if they differ from the last told (a wake from hibernation: the same
    /// configuration, already told, unless a transport now fails to start).
    Quiet,
}

/// Where the session's host state lives: inside the live instance's store, or parked
/// here while there is no instance (after the session gave up on repeated traps).
enum Slot {
    Live(Box<Instance>),
    // Boxed like `Live`: the slot is moved on every restart, and the context is large.
    Parked(Box<SessionContext>),
    /// Hibernated: no instance, the state in the store; the next input boots one.
    Hibernated(Box<SessionContext>),
    /// Only for the moment the context moves from a dead store to the next one.
    Moving,
}

struct Actor {
    /// Where local answers to pending approvals come back from their question tasks.
    answers: Answers,
    runtime: Arc<Runtime>,
    slot: Slot,
    /// Shared by every session of the process with the same config files
    /// ([`shared_sources`]).
    sources: Arc<[ConfigSource]>,
    /// Shared by every session of the process that offers the same platforms
    /// ([`shared_platforms`]).
    platforms: Arc<[Platform]>,
    transport_ids: Vec<String>,
    health: Health,
    consecutive_restarts: u32,
    /// `bridge.localCommand`, from the last `configure`.
    local_command: String,
    /// Where the agent works and which files are bot-connect's own, for tool paths.
    paths: PathContext,
    /// When and how the session hibernates.
    hibernation: Hibernation,
    /// When the last input went in (or the session started), by its clock.
    last_input_ms: u64,
    /// When to ask next whether the session may hibernate; `None`: not while it is
    /// hibernated, stopped, or never hibernates.
    idle_check_at: Option<u64>,
    /// The configuration notes the terminal was told last.
    told_notes: String,
}

/// Calls one export on the live instance with a fresh fuel budget, containing a trap:
/// `$call` is `|bridge, store| future`. Evaluates to `Option<result>`: `None` after a trap
/// (already reported and recovered from) or when the session has given up.
macro_rules! guest {
    ($actor:expr, $what:expr, |$bridge:ident, $store:ident| $call:expr) => {{
        match &mut $actor.slot {
            Slot::Live(instance) => {
                let fuel = instance.store.data().call_fuel;
                // A store whose fuel cannot be set is broken; the call below then traps
                // and the instance is replaced like after any other failure.
                let _ = instance.store.set_fuel(fuel);
                let $bridge = instance.bridge.pi_bot_connect_session();
                let $store = &mut instance.store;
                match $call.await {
                    Ok(value) => {
                        $actor.consecutive_restarts = 0;
                        // A store whose fuel cannot be read reports none used, not a guess.
                        let left = instance.store.get_fuel().unwrap_or(fuel);
                        let data = instance.store.data();
                        data.ctx.log.call_cost(
                            &data.ctx.key,
                            CallCost {
                                fuel: fuel.saturating_sub(left),
                                memory_bytes: data.limits.memory_bytes as u64,
                            },
                        );
                        Some(value)
                    }
                    Err(error) => {
                        $actor.trapped($what, error).await;
                        None
                    }
                }
            }
            Slot::Parked(_) | Slot::Hibernated(_) | Slot::Moving => None,
        }
    }};
}

impl Actor {
    /// Records an input about to go into the live instance (none goes in otherwise).
    fn record_input(&mut self, event: impl FnOnce() -> Event) {
        if matches!(self.slot, Slot::Live(_)) {
            self.ctx().record_input(event);
        }
    }

    /// The session's host state, wherever it lives now.
    fn ctx(&mut self) -> &mut SessionContext {
        match &mut self.slot {
            Slot::Live(instance) => &mut instance.store.data_mut().ctx,
            Slot::Parked(ctx) | Slot::Hibernated(ctx) => ctx,
            Slot::Moving => unreachable!("the context is moved only inside `trapped`"),
        }
    }

    /// An input is about to go in: a hibernated session wakes first, and the session's
    /// quiet time starts again.
    async fn input(&mut self) {
        if matches!(self.slot, Slot::Hibernated(_)) {
            self.wake().await;
        }
        if matches!(self.slot, Slot::Moving) {
            return;
        }
        self.last_input_ms = self.ctx().clock.now_ms();
        if let Some(after) = self.hibernation.after {
            self.idle_check_at = Some(hibernation::due_at(self.last_input_ms, after));
        }
    }

    /// Drops the instance if the session has been quiet long enough and the bridge and
    /// the host hold nothing that lives only in memory; true when it is hibernated after.
    async fn hibernate_if_idle(&mut self) -> bool {
        if matches!(self.slot, Slot::Hibernated(_)) {
            return true;
        }
        let Some(after) = self.hibernation.after else {
            self.idle_check_at = None;
            return false;
        };
        if !matches!(self.slot, Slot::Live(_)) {
            // Stopped after traps: nothing to drop, nothing to wake.
            self.idle_check_at = None;
            return false;
        }
        let now_ms = self.ctx().clock.now_ms();
        let due = hibernation::due_at(self.last_input_ms, after);
        if now_ms < due {
            // Not yet: the bridge is not asked (a call per check would cost every session).
            self.idle_check_at = Some(due);
            return false;
        }
        let holds: Option<Vec<crate::wit::session::Hold>> =
            guest!(self, calls::HIBERNATION_HOLDS, |b, s| b
                .call_hibernation_holds(s));
        let Some(holds) = holds else {
            // It trapped and was replaced: its quiet time starts again.
            self.idle_check_at = Some(hibernation::due_at(now_ms, after));
            return false;
        };
        let last_input_ms = self.last_input_ms;
        let ctx = self.ctx();
        let facts = Facts {
            now_ms,
            last_input_ms,
            after,
            timer_pending: ctx.tick_at.is_some(),
            parked_calls: ctx.parked.len(),
            agent_questions: ctx.questions.len(),
            agent_busy: !ctx.agent.is_idle(),
            holds: &holds,
        };
        match hibernation::decide(&facts) {
            Verdict::NotYet { at_ms } => {
                self.idle_check_at = Some(at_ms);
                false
            }
            Verdict::Held {
                reasons,
                again_at_ms,
            } => {
                self.idle_check_at = Some(again_at_ms);
                let ctx = self.ctx();
                ctx.log.write(
                    &ctx.key,
                    LogLine::new(
                        Level::Info,
                        "session kept awake",
                        &[("waiting_for", hibernation::describe(&reasons))],
                    ),
                );
                false
            }
            Verdict::Hibernate => {
                let Slot::Live(instance) = std::mem::replace(&mut self.slot, Slot::Moving) else {
                    unreachable!("checked live above");
                };
                // Dropping the store frees the instance's pool slot and its memory; the
                // context (transports, locks, agent link, pending nothing) stays.
                let ctx = instance.store.into_data().into_context();
                self.slot = Slot::Hibernated(Box::new(ctx));
                // No approval is pending (or it would not hibernate): no question task is
                // left to answer, and the channel's block would stay for the whole sleep.
                self.answers.forget();
                self.idle_check_at = None;
                self.health.hibernated = true;
                self.health.hibernations += 1;
                self.hibernation.count.raise();
                // What the store freed stays resident in the allocator's arenas otherwise:
                // most of a hibernated session's memory, measured.
                crate::sandbox::freed_memory::release(now_ms);
                let quiet_s = now_ms.saturating_sub(self.last_input_ms) / 1000;
                let ctx = self.ctx();
                ctx.log.write(
                    &ctx.key,
                    LogLine::new(
                        Level::Info,
                        "session hibernated",
                        &[("quiet_seconds", quiet_s.to_string())],
                    ),
                );
                true
            }
        }
    }

    /// Boots a fresh instance from the store for a hibernated session, as after a trap
    /// but unseen by the chats: configure and start again, the transports kept.
    async fn wake(&mut self) {
        let Slot::Hibernated(ctx) = std::mem::replace(&mut self.slot, Slot::Moving) else {
            return;
        };
        match self.runtime.try_instantiate(SessionHost::new(*ctx)).await {
            Ok(instance) => {
                self.slot = Slot::Live(Box::new(instance));
                self.hibernation.count.lower();
                self.health.hibernated = false;
                self.health.wakes += 1;
                let ctx = self.ctx();
                ctx.log
                    .write(&ctx.key, LogLine::new(Level::Info, "session woke", &[]));
                // The terminal heard the configuration's notes at the first start; a wake
                // every few minutes must not repeat them.
                self.boot(None, Notes::Quiet).await;
            }
            Err(refused) => {
                // The pool is full (more sessions awake than --max-sessions): the session
                // stays hibernated with everything it holds, and this input is refused
                // where the operator sees it.
                let ctx = refused.host.into_context();
                let ui = ctx.ui.clone();
                ctx.log.write(
                    &ctx.key,
                    LogLine::new(
                        Level::Error,
                        "session could not wake",
                        &[("cause", format!("{:#}", refused.error))],
                    ),
                );
                self.slot = Slot::Hibernated(Box::new(ctx));
                ui.notify(
                    Level::Error,
                    &format!(
                        "This hibernated session could not wake for a message ({:#}); the \
                         message was not handled. Raise --max-sessions, or lower \
                         --hibernate-after so idle sessions free their slots sooner.",
                        refused.error
                    ),
                )
                .await;
            }
        }
    }

    /// Tells the chat of a message meant for the bot that this session could not wake for
    /// it (the terminal and the log were told why by [`Actor::wake`]).
    async fn refuse_unwoken(&mut self, envelope: &transport_core::Envelope) {
        if !(envelope.is_direct || envelope.addressed) {
            return;
        }
        let Some(transport) = self.ctx().transports.get(&envelope.transport).cloned() else {
            return;
        };
        if let Err(error) =
            crate::native_guest::send_notice(transport.as_ref(), envelope, WAKE_REFUSED).await
        {
            let ctx = self.ctx();
            ctx.log.write(
                &ctx.key,
                LogLine::new(
                    Level::Warning,
                    "wake refusal not sent",
                    &[("error", error.to_string())],
                ),
            );
        }
    }

    /// Configures a fresh instance; on the first boot also builds the transports.
    async fn boot(&mut self, factory: Option<TransportFactory>, notes_to: Notes) {
        let sources = self.sources.clone();
        let platforms = self.platforms.clone();
        self.record_input(|| Event::Configure {
            sources: sources.to_vec(),
            platforms: platforms.to_vec(),
        });
        let configuration: Option<Configuration> = guest!(self, calls::CONFIGURE, |b, s| b
            .call_configure(s, &sources, &platforms));
        let Some(configuration) = configuration else {
            return;
        };
        self.ctx().record(|| Event::Configured {
            configuration: configuration.clone(),
        });
        if !configuration.local_command.is_empty() {
            self.local_command = configuration.local_command.clone();
        }
        let mut notes: Vec<(Level, String)> = configuration
            .notes
            .into_iter()
            .map(|n| (n.level, n.text))
            .collect();
        if let Some(factory) = factory {
            let built = factory(&configuration.transports);
            notes.extend(built.notes);
            for transport in built.transports {
                self.transport_ids.push(transport.id().to_owned());
                self.ctx().transports.insert(transport);
            }
        }
        let ids = self.transport_ids.clone();
        self.record_input(|| Event::Start {
            transports: ids.clone(),
        });
        let started: Option<Vec<Note>> = guest!(self, calls::START, |b, s| b.call_start(s, &ids));
        if let Some(notes) = &started {
            self.ctx().record(|| Event::Started {
                notes: notes.clone(),
            });
        }
        notes.extend(
            started
                .unwrap_or_default()
                .into_iter()
                .map(|n| (n.level, n.text)),
        );
        if notes.is_empty() {
            return;
        }
        let level = notes.iter().map(|(l, _)| *l).max_by_key(|l| severity(*l));
        let text = notes
            .into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<String>>()
            .join("\n");
        if notes_to == Notes::Quiet && text == self.told_notes {
            return;
        }
        self.told_notes.clone_from(&text);
        let ui = self.ctx().ui.clone();
        ui.notify(level.unwrap_or(Level::Warning), &text).await;
    }

    /// Reports a trap, takes the session's state out of the poisoned store and boots a
    /// fresh instance with it (the store import reloads the saved document).
    async fn trapped(&mut self, what: &str, error: wasmtime::Error) {
        let Slot::Live(dead) = std::mem::replace(&mut self.slot, Slot::Moving) else {
            return;
        };
        let host = dead.store.into_data();
        let stderr = host.stderr_text();
        let mut ctx = host.into_context();
        // The next instance knows nothing of the approvals this one left pending.
        ctx.block_parked(
            "the messenger bridge failed while this call waited for approval; run the tool locally",
        );
        let report = describe_trap(&error, &stderr);
        self.health.last_trap = Some(format!("{what}: {report}"));
        ctx.record(|| Event::Trap {
            call: what.to_string(),
            cause: report.clone(),
        });
        ctx.log.write(
            &ctx.key,
            LogLine {
                level: Level::Error,
                event: "guest trap".into(),
                fields: vec![
                    ("call".into(), what.into()),
                    ("cause".into(), report.clone()),
                ],
            },
        );
        let ui = ctx.ui.clone();
        if self.consecutive_restarts >= MAX_RESTARTS {
            self.health.stopped = true;
            self.slot = Slot::Parked(Box::new(ctx));
            ui.notify(
                Level::Error,
                &format!(
                    "The bridge failed again in {what} ({report}) after {MAX_RESTARTS} restarts; \
                     this session stops bridging. Run `host-shim doctor` and report the error."
                ),
            )
            .await;
            return;
        }
        ui.notify(
            Level::Error,
            &format!(
                "The bridge failed while handling {what} ({report}). That input was dropped; \
                 restarting the bridge from the saved state."
            ),
        )
        .await;
        self.consecutive_restarts += 1;
        self.health.restarts += 1;
        match self.runtime.instantiate(SessionHost::new(ctx)).await {
            Ok(instance) => {
                let ctx = &instance.store.data().ctx;
                ctx.log.write(
                    &ctx.key,
                    LogLine::new(
                        Level::Warning,
                        "guest restarted",
                        &[("restarts", self.health.restarts.to_string())],
                    ),
                );
                self.slot = Slot::Live(Box::new(instance));
                Box::pin(self.boot(None, Notes::Told)).await;
            }
            Err(e) => {
                // The context went into the failed store; nothing is left to run with,
                // and the transports are stopped by their own drop.
                self.health.stopped = true;
                ui.notify(
                    Level::Error,
                    &format!("Could not restart the bridge: {e:#}"),
                )
                .await;
            }
        }
    }

    async fn run(
        mut self,
        mut commands: mpsc::Receiver<Box<Command>>,
        mut inbound: transport_core::InboundStream,
        mut signals: SignalReceiver,
    ) {
        loop {
            let tick_delay = self.tick_delay();
            let idle_delay = self
                .idle_check_at
                .map(|at| Duration::from_millis(at.saturating_sub(self.ctx().clock.now_ms())));
            let answers = &mut self.answers;
            let next = tokio::select! {
                // Inbound first: a command sent after a message was delivered sees its effects.
                biased;
                Some(inbound) = inbound.recv() => Next::Inbound(inbound),
                Some(signal) = signals.recv() => Next::Signal(signal),
                Some((id, approved)) = answers.recv() => Next::Answer(id, approved),
                command = commands.recv() => Next::Command(command),
                () = sleep_or_forever(tick_delay) => Next::Tick,
                () = sleep_or_forever(idle_delay) => Next::IdleCheck,
            };
            // Boxed, and only while it runs: the handlers' futures (a wake's instantiate,
            // configure and start among them) are kilobytes, and inline they would make every
            // session's task that large for its whole life, hibernated or not.
            if Box::pin(self.handle(next)).await == Flow::Stop {
                return;
            }
        }
    }

    /// Handles what woke the loop; [`Flow::Stop`] once the session has shut down.
    async fn handle(&mut self, next: Next) -> Flow {
        match next {
            Next::Inbound(Inbound::Message { envelope, handled }) => {
                self.input().await;
                if matches!(self.slot, Slot::Hibernated(_)) {
                    // It could not wake (the pool is full): answered here, or the
                    // message would go unanswered with only the terminal knowing.
                    self.refuse_unwoken(&envelope).await;
                    drop(handled);
                    return Flow::Go;
                }
                let envelope = convert::envelope_to_wit(envelope);
                self.record_input(|| Event::Envelope {
                    envelope: envelope.clone(),
                    masked: Vec::new(),
                    code: None,
                });
                let _: Option<()> = guest!(self, calls::ENVELOPE, |b, s| b
                    .call_on_envelope(s, &envelope));
                // Only now may a redelivering platform consider it confirmed.
                drop(handled);
            }
            Next::Inbound(Inbound::Alert { transport, text }) => {
                let ui = self.ctx().ui.clone();
                ui.notify(Level::Error, &format!("{transport}: {text}"))
                    .await;
            }
            Next::Signal(signal) => self.on_signal(signal).await,
            Next::Answer(id, approved) => {
                self.input().await;
                self.record_input(|| Event::LocalAnswer {
                    id: id.clone(),
                    approved,
                });
                let _: Option<()> = guest!(self, calls::LOCAL_ANSWER, |b, s| b
                    .call_on_local_answer(s, &id, approved));
            }
            Next::Command(Some(command)) => match *command {
                Command::Shutdown(done) => {
                    self.shutdown().await;
                    let _ = done.send(());
                    return Flow::Stop;
                }
                command => self.on_command(command).await,
            },
            Next::Command(None) => {
                self.shutdown().await;
                return Flow::Stop;
            }
            Next::Tick => self.tick().await,
            Next::IdleCheck => {
                self.hibernate_if_idle().await;
            }
        }
        Flow::Go
    }

    fn tick_delay(&mut self) -> Option<Duration> {
        let ctx = self.ctx();
        let at = ctx.tick_at?;
        Some(Duration::from_millis(at.saturating_sub(ctx.clock.now_ms())))
    }

    async fn tick(&mut self) {
        // A timer is no traffic: it wakes a hibernated session (none sleeps with a timer
        // pending, so this is a safeguard) but does not start its quiet time again.
        if matches!(self.slot, Slot::Hibernated(_)) {
            self.wake().await;
        }
        self.ctx().tick_at = None;
        self.record_input(|| Event::Tick);
        let _: Option<()> = guest!(self, calls::TICK, |b, s| b.call_tick(s));
    }

    async fn on_signal(&mut self, signal: AgentSignal) {
        self.input().await;
        match signal {
            AgentSignal::Event(event) => {
                let event: AgentEvent = event;
                self.record_input(|| Event::AgentEvent {
                    event: event.clone(),
                });
                let _: Option<()> = guest!(self, calls::AGENT_EVENT, |b, s| b
                    .call_on_agent_event(s, &event));
            }
            AgentSignal::Question { question, reply } => {
                self.record_input(|| Event::Question {
                    question: (*question).clone(),
                });
                // Held before the call: the bridge may answer during it (nobody to ask).
                let id = question.id.clone();
                if let Some(old) = self.ctx().questions.insert(id.clone(), reply) {
                    // The agent reused an id: the older question cannot be told apart.
                    let _ = old.send(QuestionAnswer::Cancelled);
                }
                let asked: Option<()> = guest!(self, calls::QUESTION, |b, s| b
                    .call_on_question(s, &question));
                if asked.is_none() {
                    // The bridge failed on it: dismissed, so the agent does not wait for ever.
                    if let Some(reply) = self.ctx().questions.remove(&id) {
                        let _ = reply.send(QuestionAnswer::Cancelled);
                    }
                }
            }
            AgentSignal::SendFile { request, reply } => self.send_file(request, reply).await,
            AgentSignal::LocalQuestionAnswer { id, answer } => {
                self.record_input(|| Event::LocalQuestionAnswer {
                    id: id.clone(),
                    answer: answer.clone(),
                });
                let _: Option<()> = guest!(self, calls::LOCAL_QUESTION_ANSWER, |b, s| b
                    .call_on_local_question_answer(s, &id, &answer));
            }
            AgentSignal::ToolCall { name, input, reply } => {
                let paths = tool_paths(&name, &input, &self.paths);
                let call = ToolCall { name, paths };
                self.record_input(|| Event::ToolCall { call: call.clone() });
                let answer: Option<ToolAnswer> =
                    guest!(self, calls::TOOL_CALL, |b, s| b.call_on_tool_call(s, &call));
                if let Some(answer) = &answer {
                    self.ctx().record(|| Event::ToolAnswer {
                        answer: answer.clone(),
                    });
                }
                match answer {
                    Some(ToolAnswer::Decided(decision)) => {
                        let _ = reply.send(decision);
                    }
                    // Parked: the agent keeps waiting while envelopes (an `/approve`),
                    // local answers and ticks go on into the instance.
                    Some(ToolAnswer::Pending(request)) => self.park(request, reply),
                    // No verdict (the bridge failed) blocks the tool: fail closed.
                    None => {
                        let _ = reply.send(ToolDecision::Block(
                            "the messenger bridge failed; run the tool locally".into(),
                        ));
                    }
                }
            }
        }
    }

    /// Parks a tool call under its approval id and asks the terminal, without waiting:
    /// the answer comes back through `answers` as a later, separate call.
    fn park(
        &mut self,
        request: crate::wit::session::ApprovalRequest,
        reply: oneshot::Sender<ToolDecision>,
    ) {
        let ui = self.ctx().ui.clone();
        let answers = self.answers.sender();
        let id = request.id.clone();
        let question = tokio::spawn(async move {
            if let Some(approved) = ui.ask_approval(&request.title, &request.message).await {
                // A session that stopped has nobody left to tell.
                let _ = answers.send((request.id, approved)).await;
            }
        });
        let call = ParkedCall {
            reply,
            question: Some(question),
        };
        if let Some(old) = self.ctx().parked.insert(id, call) {
            // The guest reused a pending id: that call cannot be told apart any more.
            old.resolve(ToolDecision::Block(
                "the messenger bridge lost track of this call; run the tool locally".into(),
            ));
        }
    }

    /// The agent's `send_file`, from the extension's link or headless pi's dialog.
    async fn send_file(
        &mut self,
        request: FileRequest,
        reply: oneshot::Sender<Result<String, String>>,
    ) {
        self.record_input(|| Event::SendFile {
            path: request.path.clone(),
            caption: request.caption.clone(),
        });
        let result: Option<Result<String, String>> = guest!(self, calls::SEND_FILE, |b, s| b
            .call_send_file(s, &request.path, request.caption.as_deref()));
        if let Some(result) = &result {
            self.ctx().record(|| Event::FileSendAnswer {
                result: result.clone(),
            });
        }
        let _ = reply.send(result.unwrap_or_else(|| {
            Err("the messenger bridge failed while sending the file; nothing was sent".into())
        }));
    }

    async fn on_command(&mut self, command: Command) {
        match &command {
            // Asking about the session is no input: it must not keep it awake.
            Command::Health(_) | Command::Hibernate(_) | Command::Shutdown(_) => {}
            // A tick wakes by itself and is no traffic.
            Command::Tick(_) => {}
            Command::Local(..)
            | Command::SendFile(..)
            | Command::Preview(..)
            | Command::Diagnostics(_) => self.input().await,
        }
        match command {
            Command::Local(args, reply) => {
                self.record_input(|| Event::LocalCommand { args: args.clone() });
                let note: Option<Note> = guest!(self, calls::LOCAL_COMMAND, |b, s| b
                    .call_on_local_command(s, &args));
                if let Some(note) = &note {
                    self.ctx().record(|| Event::Note { note: note.clone() });
                }
                let _ = reply.send(note.unwrap_or_else(|| {
                    Note {
                        level: Level::Error,
                        text:
                            "bot-connect: the bridge failed on that command; see the error above."
                                .into(),
                    }
                }));
            }
            Command::SendFile(request, reply) => self.send_file(request, reply).await,
            Command::Preview(envelope, reply) => {
                let envelope = convert::envelope_to_wit(*envelope);
                self.record_input(|| Event::Preview {
                    envelope: envelope.clone(),
                    masked: Vec::new(),
                    code: None,
                });
                let text: Option<String> = guest!(self, calls::PREVIEW, |b, s| b
                    .call_preview_envelope(s, &envelope));
                if let Some(text) = &text {
                    self.ctx()
                        .record(|| Event::PreviewText { text: text.clone() });
                }
                let _ = reply.send(text);
            }
            Command::Diagnostics(reply) => {
                self.record_input(|| Event::Diagnostics);
                let diagnostics: Option<DiagnosticsReport> =
                    guest!(self, calls::DIAGNOSTICS, |b, s| b.call_diagnostics(s));
                if let Some(report) = &diagnostics {
                    self.ctx().record(|| Event::DiagnosticsReport {
                        report: report.clone(),
                    });
                }
                let _ = reply.send(diagnostics);
            }
            Command::Health(reply) => {
                let _ = reply.send(self.health.clone());
            }
            Command::Tick(done) => {
                self.tick().await;
                let _ = done.send(());
            }
            Command::Hibernate(done) => {
                let hibernated = self.hibernate_if_idle().await;
                let _ = done.send(hibernated);
            }
            Command::Shutdown(done) => {
                self.shutdown().await;
                let _ = done.send(());
            }
        }
    }

    async fn shutdown(&mut self) {
        self.record_input(|| Event::Shutdown);
        let _: Option<()> = guest!(self, calls::SHUTDOWN, |b, s| b.call_shutdown(s));
        if matches!(self.slot, Slot::Moving) {
            return;
        }
        let transports: Vec<Arc<dyn Transport>> = self.ctx().transports.iter().cloned().collect();
        for transport in transports {
            transport.stop().await;
        }
        // Whatever the guest did not release (it may have trapped) is released here, so a
        // stopped session never leaves a lock behind (I15).
        self.ctx().held_locks.clear();
        let key = self.ctx().key.clone();
        self.ctx().state.release(&key);
        // Calls still waiting for approval will get no answer now: fail closed.
        self.ctx()
            .block_parked("the messenger bridge stopped while this call waited for approval");
        let ctx = match std::mem::replace(&mut self.slot, Slot::Moving) {
            Slot::Live(instance) => instance.store.into_data().into_context(),
            Slot::Parked(ctx) => *ctx,
            // Nothing of it was only in memory (that is when it hibernated), so the
            // bridge's own shutdown has nothing to save or tell.
            Slot::Hibernated(ctx) => {
                self.hibernation.count.lower();
                self.health.hibernated = false;
                *ctx
            }
            Slot::Moving => return,
        };
        self.idle_check_at = None;
        self.slot = Slot::Parked(Box::new(ctx));
    }
}

/// A trap as the terminal, the log and a transcript tell it: the cause and the guest's
/// panic line, if it wrote one.
pub fn describe_trap(error: &wasmtime::Error, stderr: &str) -> String {
    let cause = match error.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::OutOfFuel) => {
            "the call ran over its CPU budget and was stopped".to_string()
        }
        Some(trap) => trap.to_string(),
        None => error.root_cause().to_string(),
    };
    let panic = stderr
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with("note:"));
    match panic {
        Some(line) => format!("{cause} ({line})"),
        None => cause,
    }
}

/// What each export call is called in trap reports; replay names its calls the same way,
/// so a trap it reproduces reads the same.
pub mod calls {
    /// `configure`.
    pub const CONFIGURE: &str = "configure";
    /// `start`.
    pub const START: &str = "start";
    /// `on-envelope`.
    pub const ENVELOPE: &str = "an inbound message";
    /// `on-local-answer`.
    pub const LOCAL_ANSWER: &str = "a local approval";
    /// `tick`.
    pub const TICK: &str = "a timer";
    /// `on-agent-event`.
    pub const AGENT_EVENT: &str = "an agent event";
    /// `on-tool-call`.
    pub const TOOL_CALL: &str = "a tool call";
    /// `on-question`.
    pub const QUESTION: &str = "an agent question";
    /// `on-local-question-answer`.
    pub const LOCAL_QUESTION_ANSWER: &str = "a local answer to a question";
    /// `on-local-command`.
    pub const LOCAL_COMMAND: &str = "a local command";
    /// `send-file`.
    pub const SEND_FILE: &str = "a file to send";
    /// `preview-envelope`.
    pub const PREVIEW: &str = "a preview";
    /// `diagnostics`.
    pub const DIAGNOSTICS: &str = "diagnostics";
    /// `shutdown`.
    pub const SHUTDOWN: &str = "shutdown";
    /// `hibernation-holds`.
    pub const HIBERNATION_HOLDS: &str = "the hibernation check";
}

fn severity(level: Level) -> u8 {
    match level {
        Level::Info => 0,
        Level::Warning => 1,
        Level::Error => 2,
    }
}

async fn sleep_or_forever(delay: Option<Duration>) {
    match delay {
        Some(delay) => tokio::time::sleep(delay).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    #[test]
    fn session_locks_spread_over_256_shards_not_one_directory() {
        let dir = tempfile::tempdir().unwrap();
        let locks = LockDir::new(dir.path());
        let mut held = Vec::new();
        for i in 0..512 {
            held.push(acquire_session_lock(&locks, &format!("session {i}"), NOW).unwrap());
        }
        let shards = fs_entries(&dir.path().join("sessions"));
        assert!(
            shards.len() > 200,
            "{} shards for 512 sessions",
            shards.len()
        );
        let fullest = shards
            .iter()
            .map(|shard| fs_entries(&dir.path().join("sessions").join(shard)).len())
            .max()
            .unwrap();
        assert!(fullest < 16, "{fullest} locks in one shard");
        assert!(
            fs_entries(dir.path()) == ["sessions"],
            "no session lock in the top directory"
        );
        // The lock still keeps a second host off the session.
        let refused = acquire_session_lock(&locks, "session 7", NOW).unwrap_err();
        assert!(
            refused.to_string().contains("already runs session"),
            "{refused}"
        );
        // doctor looks where the lock is.
        let key = "session 7";
        assert!(
            session_lock_dir(&locks, key)
                .holder(&session_lock_name(key), NOW)
                .is_some()
        );
    }

    #[test]
    fn a_live_holder_at_the_unsharded_place_still_keeps_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let locks = LockDir::new(dir.path());
        // What a host-shim from before the shards holds while it runs.
        let _old = locks
            .acquire(
                &session_lock_name("k"),
                u64::MAX,
                &Claimant::this_process(NOW),
            )
            .unwrap();
        let refused = acquire_session_lock(&locks, "k", NOW).unwrap_err();
        assert!(
            refused.to_string().contains("already runs session"),
            "{refused}"
        );
    }

    #[test]
    fn sessions_offering_the_same_platforms_share_one_copy_of_them() {
        let first = shared_platforms(crate::factory::declarations());
        let second = shared_platforms(crate::factory::declarations());
        assert!(Arc::ptr_eq(&first, &second));
        let mut fewer = crate::factory::declarations();
        fewer.pop();
        let other = shared_platforms(fewer.clone());
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(other[..], fewer[..], "a different list is kept as it is");
    }

    #[test]
    fn sessions_with_the_same_own_paths_share_one_copy_of_them() {
        // A list of its own: sessions that other tests start at the same time swap the
        // process's last list.
        let last = std::sync::Mutex::new(None);
        let paths = || {
            vec![
                PathBuf::from("/cfg/bench.json"),
                PathBuf::from("/state/locks"),
            ]
        };
        let first = share_with_last(&last, paths());
        assert!(Arc::ptr_eq(&first, &share_with_last(&last, paths())));
        let other = share_with_last(&last, vec![PathBuf::from("/elsewhere.json")]);
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(other[..], [PathBuf::from("/elsewhere.json")]);
        // The process's own list is what a session gets.
        assert_eq!(shared_own_paths(paths())[..], paths()[..]);
    }

    #[test]
    fn a_session_keeps_its_config_files_as_read() {
        use crate::wit::session::{ConfigContent, ConfigScope};
        // The sharing itself is `share_with_last`'s (above); here, that a session's list is
        // its own files, whatever another session read before.
        let source = |path: &str, text: &str| ConfigSource {
            scope: ConfigScope::Global,
            path: path.into(),
            content: ConfigContent::Text(text.into()),
        };
        let first = vec![source("/a/bot-connect.json", "{}")];
        let second = vec![
            source("/a/bot-connect.json", "{}"),
            source("/b/.pi/bot-connect.json", r#"{"bridge":{}}"#),
        ];
        assert_eq!(shared_sources(first.clone())[..], first[..]);
        assert_eq!(shared_sources(second.clone())[..], second[..]);
    }

    fn fs_entries(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}
