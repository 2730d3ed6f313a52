//! `host-shim serve`: the broker process
//! (docs/decisions.md#decision-14-one-host-one-bot-many-sessions). It owns the bot connections and
//! serves many sessions at once, each its own sandboxed instance:
//!
//! - pi sessions, which `host-shim attach` asks for on the control socket
//!   ([`control`]): when pi exits, the broker shuts its session down and detaches it;
//! - demo sessions started by the broker itself (`--demo <name>`), whose terminal is the
//!   broker's stderr (their pairing codes show there, labelled with the name).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;

use crate::agent::{Agent, DemoAgent};
use crate::broker::bindings::{self, Bindings};
use crate::broker::{self, Broker, BrokerOptions};
use crate::commands::control::{self, SessionHome};
use crate::commands::operator;
use crate::commands::process;
use crate::disk::lock::{Claimant, LockDir, LockError};
use crate::disk::state_db::StateDb;
use crate::factory;
use crate::local::clock::{Clock, SystemClock};
use crate::local::logging::{LogSink, TARGET, TracingLog};
use crate::local::ui::{LabelledStderrUi, Ui};
use crate::pi::attach::{self, Bound, BoxFuture, Served};
use crate::pi::link::LinkSession;
use crate::sandbox::hibernation::Hibernation;
use crate::sandbox::pairing_budget::PairingBudget;
use crate::sandbox::runtime::{Limits, Runtime};
use crate::sandbox::session::{Session, SessionSpec};
use crate::wit::agent::SessionInfo;
use crate::wit::types::Level;

/// What `host-shim serve` was asked for.
#[derive(Debug, Clone)]
pub struct ServeArgs {
    /// Demo sessions to start, by name.
    pub demo: Vec<String>,
    /// Seconds the demo agents spend on each step.
    pub pace: Duration,
    /// Sessions the pooling allocator has room for at once.
    pub max_sessions: u32,
    /// Log info lines too.
    pub debug: bool,
    /// Serve metrics, `/healthz` and `/readyz` on this address (`--metrics`).
    pub metrics: Option<std::net::SocketAddr>,
    /// Serve the read-only dashboard on the metrics listener too (`--dashboard`).
    pub dashboard: bool,
    /// Hibernate a session after this long without input (`--hibernate-after`; `None`:
    /// never). docs/scaling.md#idle-sessions.
    pub hibernate_after: Option<Duration>,
}

/// Everything a served session needs from the broker process.
struct Process {
    broker: Arc<Broker>,
    runtime: Arc<Runtime>,
    state: Arc<StateDb>,
    state_dir: PathBuf,
    locks: LockDir,
    clock: Arc<dyn Clock>,
    log: Arc<dyn LogSink>,
    /// `--hibernate-after`.
    hibernate_after: Option<Duration>,
}

impl Process {
    /// Attaches `key` to the broker and starts its bridge session; on failure nothing
    /// stays attached.
    async fn start_session(
        &self,
        key: String,
        info: SessionInfo,
        agent: Arc<dyn Agent>,
        ui: Arc<dyn Ui>,
    ) -> anyhow::Result<(Session, String)> {
        let sources = process::config_sources_in(Path::new(&info.cwd))?;
        let name = self.broker.attach(
            &key,
            &control::session_name(info.name.as_deref(), &info.cwd),
            &info.cwd,
            &sources,
            agent.clone(),
        )?;
        ui.notify(
            Level::Info,
            &format!(
                "This session is served by the shared bot as {name:?}. A chat reaches it with \
                 /switch {name}; /sessions lists the sessions a chat is paired with."
            ),
        )
        .await;
        let spec = SessionSpec {
            key: key.clone(),
            config_sources: sources,
            platforms: factory::declarations(),
            transports: self.broker.transports(&key),
            agent,
            ui,
            state: self.state.clone(),
            locks: self.locks.clone(),
            pairing: self.broker.pairing(),
            clock: self.clock.clone(),
            log: self.log.clone(),
            exclusive: true,
            transcript: None,
        };
        let hibernation = match self.hibernate_after {
            Some(after) => Hibernation::after(after, self.broker.hibernated()),
            None => Hibernation::never(),
        };
        match Session::spawn_with(self.runtime.clone(), spec, hibernation).await {
            Ok(session) => Ok((session, name)),
            Err(error) => {
                self.broker.detach(&key);
                Err(error)
            }
        }
    }
}

impl SessionHome for Process {
    fn start(
        self: Arc<Self>,
        described: LinkSession,
        agent: Arc<dyn Agent>,
        ui: Arc<dyn Ui>,
    ) -> BoxFuture<anyhow::Result<Served>> {
        Box::pin(async move {
            let info = SessionInfo {
                id: described.key.clone(),
                name: described.name.clone(),
                cwd: described.cwd.clone(),
                accepts_images: true,
            };
            let key = described.key;
            let (session, _) = self.start_session(key.clone(), info, agent, ui).await?;
            let handle = session.handle();
            let end = Box::pin(async move {
                let result = session.shutdown().await;
                self.broker.detach(&key);
                result
            });
            Ok(Served { handle, end })
        })
    }
}

/// Runs `host-shim serve` until Ctrl-C or SIGTERM.
pub async fn run(component: &[u8], args: ServeArgs) -> anyhow::Result<()> {
    let (cwd, paths, state_dir) = process::process_paths()?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let locks = LockDir::new(&paths.lock_dir);
    let _broker_lock = locks
        .acquire(
            process::BROKER_LOCK,
            u64::MAX,
            &Claimant::this_process(clock.now_ms()),
        )
        .map_err(|error| match error {
            LockError::Held { holder_description } => anyhow::anyhow!(
                "another host-shim serve already runs for this state directory \
                 ({holder_description}); stop it first, or set PI_BOT_CONNECT_STATE to another \
                 path"
            ),
            other => anyhow::anyhow!("cannot take the broker's lock: {other}"),
        })?;
    // The database's own message names the file and the way back; no second layer.
    let (state, warnings) = StateDb::open(&paths.state_file, clock.now_ms())?;
    for warning in warnings {
        tracing::warn!(target: TARGET, scope = "broker", "{warning}");
    }
    let limits = Limits {
        // One more than the sessions: a trapped instance is replaced while it still exists.
        max_instances: args.max_sessions.saturating_add(1),
        ..Limits::default()
    };
    let runtime = Arc::new(Runtime::load(
        component,
        limits,
        Some(&state_dir.join("cache")),
    )?);
    let metrics = args.metrics.map(|_| operator::metrics());
    let log = operator::counted(Arc::new(TracingLog::new()), metrics.as_ref());
    let state = Arc::new(state);
    let (bindings, warnings) =
        Bindings::kept_in(state.clone(), &bindings::path_beside(&paths.state_file)).await?;
    for warning in warnings {
        tracing::warn!(target: TARGET, scope = "broker", "{warning}");
    }
    let (pairing, warning) = PairingBudget::kept_in(state.clone(), "serve");
    if let Some(warning) = warning {
        tracing::warn!(target: TARGET, scope = "broker", "{warning}");
    }
    let broker = Broker::new(BrokerOptions {
        locks: locks.clone(),
        clock: clock.clone(),
        log: log.clone(),
        build: broker::build_from_environment(process::transport_state_dir(&paths.state_file)),
        state_file: Some(paths.state_file.clone()),
        bindings,
        status_file: Some(broker::status_path_beside(&paths.state_file)),
        pairing,
    });
    // Bound before any session starts, so a port in use stops the broker at once.
    let _listener = match (args.metrics, metrics) {
        (Some(addr), Some(metrics)) => {
            broker.count_in(metrics.clone());
            let dashboard = if args.dashboard {
                Some(operator::broker_dashboard(addr, &metrics, &broker)?)
            } else {
                None
            };
            Some(operator::listen_for_broker(addr, metrics, &broker, dashboard).await?)
        }
        _ => None,
    };
    let control_path = crate::disk::paths::control_socket_path(&state_dir);
    let listener = match attach::bind(&control_path).await? {
        Bound::Listening(listener) => listener,
        Bound::AlreadyServed => bail!(
            "another broker answers on {}; stop it first",
            control_path.display()
        ),
    };
    let process = Arc::new(Process {
        broker: broker.clone(),
        runtime,
        state,
        state_dir,
        locks,
        clock,
        log,
        hibernate_after: args.hibernate_after,
    });
    let mut demos = Vec::new();
    for name in &args.demo {
        let key = format!("serve:{name}");
        let info = SessionInfo {
            id: key.clone(),
            name: Some(name.clone()),
            cwd: cwd.display().to_string(),
            accepts_images: true,
        };
        let agent: Arc<dyn Agent> = Arc::new(DemoAgent::new(args.pace, info.clone()));
        let ui: Arc<dyn Ui> = Arc::new(LabelledStderrUi::new(name));
        match process.start_session(key, info, agent, ui).await {
            Ok((session, _)) => demos.push(session),
            Err(error) => {
                tracing::error!(target: TARGET, scope = "broker", "demo session {name:?} did not start: {error:#}")
            }
        }
    }
    println!(
        "host-shim serve: ready. {} demo session(s); pi sessions with the bot-connect extension \
         attach through {}. Stop with Ctrl-C.",
        demos.len(),
        control_path.display()
    );
    let stop = async {
        let terminate = process::terminated();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = terminate => {}
        }
    };
    // Every served session shuts down (reporting what it could not send) before the
    // bots stop.
    control::serve(listener, process.state_dir.clone(), process.clone(), stop).await;
    for session in demos {
        if let Err(error) = session.shutdown().await {
            tracing::error!(target: TARGET, scope = "broker", "{error:#}");
        }
    }
    broker.shutdown().await;
    let _ = std::fs::remove_file(&control_path);
    println!("host-shim serve: stopped; bindings, pairings and state are saved.");
    Ok(())
}
