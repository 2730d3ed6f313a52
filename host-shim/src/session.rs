//! One agent session = one sandboxed instance, driven by one task.
//!
//! The task owns the store and delivers envelopes, agent signals, local commands and
//! ticks to the guest one at a time (calls never overlap). A trap is reported locally,
//! the poisoned instance is dropped, and a fresh one is configured from the saved state;
//! other sessions never notice (C2).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use transports::Transport;

use crate::agent::{Agent, AgentSignal};
use crate::clock::Clock;
use crate::convert;
use crate::imports::{SessionContext, SessionHost};
use crate::lock::LockDir;
use crate::logging::{LogLine, LogSink};
use crate::runtime::bindings::exports::pi::bot_connect::session::{
    AgentEvent, ConfigSource, Configuration, DiagnosticsReport, Note, ToolCall, ToolDecision,
    TransportRequest,
};
use crate::runtime::bindings::pi::bot_connect::types::Level;
use crate::runtime::{Instance, Runtime};
use crate::state_file::StateFile;
use crate::ui::Ui;

/// Consecutive restarts after which a session stops trying: a trap that repeats on
/// every fresh instance (say, in `configure`) would otherwise loop forever.
const MAX_RESTARTS: u32 = 3;

/// Builds the transports a configuration asks for; returns them and the notes about
/// the ones it could not build (missing credential, unknown kind).
pub type TransportFactory =
    Box<dyn FnOnce(&[TransportRequest]) -> (Vec<Arc<dyn Transport>>, Vec<String>) + Send>;

/// Everything needed to start a session.
pub struct SessionSpec {
    /// Session key: the scope of the saved state.
    pub key: String,
    /// Configuration files, lowest precedence first.
    pub config_sources: Vec<ConfigSource>,
    /// Builds the transports from the validated configuration.
    pub transports: TransportFactory,
    /// The agent.
    pub agent: Arc<dyn Agent>,
    /// The local terminal.
    pub ui: Arc<dyn Ui>,
    /// The shared state file.
    pub state: Arc<Mutex<StateFile>>,
    /// Lock directory.
    pub locks: LockDir,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Log sink.
    pub log: Arc<dyn LogSink>,
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
}

enum Command {
    Local(String, oneshot::Sender<Note>),
    Diagnostics(oneshot::Sender<Option<DiagnosticsReport>>),
    Health(oneshot::Sender<Health>),
    Tick(oneshot::Sender<()>),
    Shutdown(oneshot::Sender<()>),
}

/// A running session. Dropping it does not stop it; call [`Session::shutdown`].
pub struct Session {
    commands: mpsc::Sender<Command>,
    task: JoinHandle<()>,
}

/// The error when the session task is gone.
fn gone() -> anyhow::Error {
    anyhow::anyhow!("the session has stopped")
}

impl Session {
    /// Instantiates the bridge for `spec`, configures it, builds and starts transports.
    /// Configuration problems are notified locally and never stop the session (I16).
    pub async fn spawn(runtime: Arc<Runtime>, spec: SessionSpec) -> anyhow::Result<Session> {
        let (inbound_tx, inbound_rx) = mpsc::channel(256);
        let (signals_tx, signals_rx) = mpsc::channel(64);
        spec.agent.attach(signals_tx);
        let ctx = Arc::new(SessionContext {
            key: spec.key,
            transports: RwLock::new(BTreeMap::new()),
            inbound: inbound_tx,
            agent: spec.agent,
            ui: spec.ui,
            state: spec.state,
            locks: spec.locks,
            lock_stale_ms: RwLock::default(),
            lock_owners: Mutex::default(),
            clock: spec.clock,
            log: spec.log,
            held_locks: Mutex::default(),
            listening: Mutex::default(),
            tick_at: Mutex::default(),
        });
        let instance = runtime.instantiate(SessionHost::new(ctx.clone())).await?;
        let mut actor = Actor {
            runtime,
            ctx,
            instance: Some(instance),
            sources: spec.config_sources,
            transport_ids: Vec::new(),
            health: Health::default(),
            consecutive_restarts: 0,
        };
        actor.boot(Some(spec.transports)).await;
        let (commands, commands_rx) = mpsc::channel(32);
        let task = tokio::spawn(actor.run(commands_rx, inbound_rx, signals_rx));
        Ok(Session { commands, task })
    }

    async fn ask<R>(&self, make: impl FnOnce(oneshot::Sender<R>) -> Command) -> anyhow::Result<R> {
        let (tx, rx) = oneshot::channel();
        self.commands.send(make(tx)).await.map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }

    /// Runs a local `/connect …` command; returns the text for the terminal.
    pub async fn local_command(&self, args: &str) -> anyhow::Result<Note> {
        self.ask(|tx| Command::Local(args.to_string(), tx)).await
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

    /// Stops the bridge (locks released, state saved) and its transports.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let result = self.ask(Command::Shutdown).await;
        let _ = self.task.await;
        result
    }
}

struct Actor {
    runtime: Arc<Runtime>,
    ctx: Arc<SessionContext>,
    instance: Option<Instance>,
    sources: Vec<ConfigSource>,
    transport_ids: Vec<String>,
    health: Health,
    consecutive_restarts: u32,
}

/// Calls one export on the live instance, containing a trap: `$call` is
/// `|bridge, store| future`. Evaluates to `Option<result>`: `None` after a trap (already
/// reported and recovered from) or when the session has given up.
macro_rules! guest {
    ($actor:expr, $what:expr, |$bridge:ident, $store:ident| $call:expr) => {{
        match $actor.instance.as_mut() {
            None => None,
            Some(instance) => {
                instance.store.data_mut().begin_call();
                let $bridge = instance.bridge.pi_bot_connect_session();
                let $store = &mut instance.store;
                match $call.await {
                    Ok(value) => {
                        $actor.consecutive_restarts = 0;
                        Some(value)
                    }
                    Err(error) => {
                        $actor.trapped($what, error).await;
                        None
                    }
                }
            }
        }
    }};
}

/// `lockStaleMs` from a transport's validated settings (the bridge checked its range).
fn lock_stale_ms(settings_json: &str) -> Option<u64> {
    serde_json::from_str::<serde_json::Value>(settings_json)
        .ok()?
        .get("lockStaleMs")?
        .as_u64()
}

impl Actor {
    /// Configures a fresh instance; on the first boot also builds the transports.
    async fn boot(&mut self, factory: Option<TransportFactory>) {
        let sources = self.sources.clone();
        let configuration: Option<Configuration> =
            guest!(self, "configure", |b, s| b.call_configure(s, &sources));
        let Some(configuration) = configuration else {
            return;
        };
        let mut notes: Vec<(Level, String)> = configuration
            .notes
            .into_iter()
            .map(|n| (n.level, n.text))
            .collect();
        if let Ok(mut stale) = self.ctx.lock_stale_ms.write() {
            for request in &configuration.transports {
                if let Some(ms) = lock_stale_ms(&request.settings_json) {
                    stale.insert(request.id.clone(), ms);
                }
            }
        }
        if let Some(factory) = factory {
            let (built, problems) = factory(&configuration.transports);
            notes.extend(problems.into_iter().map(|p| (Level::Error, p)));
            if let Ok(mut transports) = self.ctx.transports.write() {
                for transport in built {
                    self.transport_ids.push(transport.id().to_string());
                    transports.insert(transport.id().to_string(), transport);
                }
            }
        }
        let ids = self.transport_ids.clone();
        let started: Option<Vec<Note>> = guest!(self, "start", |b, s| b.call_start(s, &ids));
        notes.extend(
            started
                .unwrap_or_default()
                .into_iter()
                .map(|n| (n.level, n.text)),
        );
        if !notes.is_empty() {
            let level = notes.iter().map(|(l, _)| *l).max_by_key(|l| severity(*l));
            let text: Vec<String> = notes.into_iter().map(|(_, t)| t).collect();
            self.ctx
                .ui
                .notify(level.unwrap_or(Level::Warning), &text.join("\n"))
                .await;
        }
    }

    /// Reports a trap, drops the poisoned instance and boots a fresh one from the saved
    /// state (the store import reloads it).
    async fn trapped(&mut self, what: &str, error: wasmtime::Error) {
        let stderr = self
            .instance
            .take()
            .map(|i| i.store.data().stderr_text())
            .unwrap_or_default();
        let cause = match error.downcast_ref::<wasmtime::Trap>() {
            Some(trap) => trap.to_string(),
            None => error.root_cause().to_string(),
        };
        let panic = stderr
            .lines()
            .find(|l| !l.trim().is_empty() && !l.starts_with("note:"));
        let report = match panic {
            Some(line) => format!("{cause} ({line})"),
            None => cause,
        };
        self.health.last_trap = Some(format!("{what}: {report}"));
        self.ctx.log.write(
            &self.ctx.key,
            LogLine {
                level: Level::Error,
                event: "guest trap".into(),
                fields: vec![
                    ("call".into(), what.into()),
                    ("cause".into(), report.clone()),
                ],
            },
        );
        if self.consecutive_restarts >= MAX_RESTARTS {
            self.health.stopped = true;
            self.ctx.ui.notify(
                Level::Error,
                &format!(
                    "The bridge failed again in {what} ({report}) after {MAX_RESTARTS} restarts; \
                     this session stops bridging. Run `host-shim doctor` and report the error."
                ),
            ).await;
            return;
        }
        self.ctx
            .ui
            .notify(
                Level::Error,
                &format!(
                    "The bridge failed while handling {what} ({report}). That input was dropped; \
                 restarting the bridge from the saved state."
                ),
            )
            .await;
        self.consecutive_restarts += 1;
        self.health.restarts += 1;
        match self
            .runtime
            .instantiate(SessionHost::new(self.ctx.clone()))
            .await
        {
            Ok(instance) => {
                self.instance = Some(instance);
                Box::pin(self.boot(None)).await;
            }
            Err(e) => {
                self.health.stopped = true;
                self.ctx
                    .ui
                    .notify(
                        Level::Error,
                        &format!("Could not restart the bridge: {e:#}"),
                    )
                    .await;
            }
        }
    }

    async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        mut inbound: mpsc::Receiver<transports::Envelope>,
        mut signals: mpsc::Receiver<AgentSignal>,
    ) {
        loop {
            let tick_delay = self.tick_delay();
            tokio::select! {
                // Inbound first: a command sent after a message was delivered sees its effects.
                biased;
                Some(envelope) = inbound.recv() => {
                    let envelope = convert::envelope_to_wit(envelope);
                    let _: Option<()> =
                        guest!(self, "an inbound message", |b, s| b.call_on_envelope(s, &envelope));
                }
                Some(signal) = signals.recv() => self.on_signal(signal).await,
                command = commands.recv() => match command {
                    Some(Command::Shutdown(done)) => {
                        self.shutdown().await;
                        let _ = done.send(());
                        return;
                    }
                    Some(command) => self.on_command(command).await,
                    None => {
                        self.shutdown().await;
                        return;
                    }
                },
                () = sleep_or_forever(tick_delay) => self.tick().await,
            }
        }
    }

    fn tick_delay(&self) -> Option<Duration> {
        let at = (*self.ctx.tick_at.lock().ok()?)?;
        Some(Duration::from_millis(
            at.saturating_sub(self.ctx.clock.now_ms()),
        ))
    }

    async fn tick(&mut self) {
        if let Ok(mut at) = self.ctx.tick_at.lock() {
            *at = None;
        }
        let _: Option<()> = guest!(self, "a timer", |b, s| b.call_tick(s));
    }

    async fn on_signal(&mut self, signal: AgentSignal) {
        match signal {
            AgentSignal::Event(event) => {
                let event: AgentEvent = event;
                let _: Option<()> = guest!(self, "an agent event", |b, s| b
                    .call_on_agent_event(s, &event));
            }
            AgentSignal::ToolCall { name, reply } => {
                let call = ToolCall { name };
                let decision: Option<ToolDecision> =
                    guest!(self, "a tool call", |b, s| b.call_on_tool_call(s, &call));
                // No verdict (the bridge failed) blocks the tool: fail closed.
                let decision = decision.unwrap_or_else(|| {
                    ToolDecision::Block("the messenger bridge failed; run the tool locally".into())
                });
                let _ = reply.send(decision);
            }
        }
    }

    async fn on_command(&mut self, command: Command) {
        match command {
            Command::Local(args, reply) => {
                let note: Option<Note> = guest!(self, "a local command", |b, s| b
                    .call_on_local_command(s, &args));
                let _ = reply.send(note.unwrap_or_else(|| {
                    Note {
                        level: Level::Error,
                        text:
                            "bot-connect: the bridge failed on that command; see the error above."
                                .into(),
                    }
                }));
            }
            Command::Diagnostics(reply) => {
                let diagnostics: Option<DiagnosticsReport> =
                    guest!(self, "diagnostics", |b, s| b.call_diagnostics(s));
                let _ = reply.send(diagnostics);
            }
            Command::Health(reply) => {
                let _ = reply.send(self.health.clone());
            }
            Command::Tick(done) => {
                self.tick().await;
                let _ = done.send(());
            }
            Command::Shutdown(done) => {
                self.shutdown().await;
                let _ = done.send(());
            }
        }
    }

    async fn shutdown(&mut self) {
        let _: Option<()> = guest!(self, "shutdown", |b, s| b.call_shutdown(s));
        let transports: Vec<Arc<dyn Transport>> = self
            .ctx
            .transports
            .read()
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default();
        for transport in transports {
            transport.stop().await;
        }
        // Whatever the guest did not release (it may have trapped) is released here, so a
        // stopped session never leaves a lock behind (I15).
        if let Ok(mut held) = self.ctx.held_locks.lock() {
            held.clear();
        }
        self.instance = None;
    }
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
    use super::lock_stale_ms;

    #[test]
    fn lock_stale_ms_is_read_from_a_transports_settings() {
        assert_eq!(
            lock_stale_ms(r#"{"lockStaleMs":5000,"port":1}"#),
            Some(5000)
        );
        assert_eq!(lock_stale_ms(r#"{"port":1}"#), None);
        assert_eq!(lock_stale_ms("not json"), None);
    }
}
