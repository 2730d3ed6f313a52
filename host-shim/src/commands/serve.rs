//! `host-shim serve`: the broker process
//! (docs/decisions.md#decision-14-one-host-one-bot-many-sessions). It owns the bot connections and
//! serves many sessions at once, each its own sandboxed instance:
//!
//! - pi sessions: the pi extension starts `host-shim attach` as always; `attach` finds
//!   the broker's control socket and asks it to serve the session (the broker then
//!   listens on that session's link socket), and stays alive only to tie the session's
//!   life to pi's: when pi exits, `attach` exits, its control connection closes, and the
//!   broker shuts that session down and detaches it;
//! - demo sessions started by the broker itself (`--demo <name>`), whose terminal is the
//!   broker's stderr (their pairing codes show there, labelled with the name).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::bail;
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;
use tokio::sync::watch;

use crate::agent::{Agent, DemoAgent};
use crate::broker::bindings::{self, Bindings};
use crate::broker::{self, Broker, BrokerOptions};
use crate::commands::operator;
use crate::commands::process;
use crate::disk::lock::{Claimant, LockDir, LockError};
use crate::disk::state_db::StateDb;
use crate::factory;
use crate::local::clock::{Clock, SystemClock};
use crate::local::logging::{LogSink, TARGET, TracingLog};
use crate::local::ui::{LabelledStderrUi, Ui};
use crate::pi::attach::{self, Bound, Link};
use crate::pi::link::LinkSession;
use crate::sandbox::hibernation::Hibernation;
use crate::sandbox::pairing_budget::PairingBudget;
use crate::sandbox::runtime::{Limits, Runtime};
use crate::sandbox::session::{Session, SessionSpec};
use crate::wit::agent::SessionInfo;
use crate::wit::types::Level;

/// The longest control line read.
const MAX_CONTROL_LINE: u64 = 64 * 1024;

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

/// One request on the control socket.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ControlRequest {
    /// Serve the pi session `session` until this connection closes.
    Serve {
        /// pi's session id.
        session: String,
    },
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
    /// Turns true when the broker stops: every served session stops with it.
    stopping: watch::Receiver<bool>,
    /// `--hibernate-after`.
    hibernate_after: Option<Duration>,
}

/// The name a session goes by in `/sessions`: pi's session name, else its directory's.
fn session_name(name: Option<&str>, cwd: &str) -> String {
    name.filter(|n| !n.trim().is_empty())
        .map(str::to_owned)
        .or_else(|| {
            Path::new(cwd)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "session".into())
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
            &session_name(info.name.as_deref(), &info.cwd),
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

    /// Serves one pi session's link until its `attach` goes away or the broker stops.
    async fn serve_link(self: Arc<Self>, key: String, mut control: UnixStream) {
        let socket = attach::socket_path(&self.state_dir, &key);
        let listener = match attach::bind(&socket).await {
            Ok(Bound::Listening(listener)) => listener,
            Ok(Bound::AlreadyServed) => {
                let _ = control
                    .write_all(attach::ready_line(&socket, false).as_bytes())
                    .await;
                return;
            }
            Err(error) => {
                let _ = control
                    .write_all(error_line(&error.to_string()).as_bytes())
                    .await;
                return;
            }
        };
        let link = Link::new();
        let attached = Arc::new(AtomicBool::new(false));
        let starter: attach::SessionStarter = {
            let process = self.clone();
            let agent = link.agent();
            let ui = link.ui();
            let attached = attached.clone();
            Box::new(move |described: LinkSession| {
                Box::pin(async move {
                    let info = SessionInfo {
                        id: described.key.clone(),
                        name: described.name.clone(),
                        cwd: described.cwd.clone(),
                        accepts_images: true,
                    };
                    let (session, _) = process
                        .start_session(described.key, info, agent, ui)
                        .await?;
                    attached.store(true, Ordering::SeqCst);
                    Ok(session)
                })
            })
        };
        if control
            .write_all(attach::ready_line(&socket, true).as_bytes())
            .await
            .is_err()
        {
            let _ = std::fs::remove_file(&socket);
            return;
        }
        let mut stopping = self.stopping.clone();
        let stop = async move {
            // `attach` never writes again: anything read, or the end, means it is gone.
            let mut byte = [0u8; 1];
            tokio::select! {
                _ = control.read(&mut byte) => {}
                _ = stopping.wait_for(|stop| *stop) => {}
            }
        };
        attach::serve(listener, link, Some(key.clone()), starter, stop).await;
        if attached.load(Ordering::SeqCst) {
            self.broker.detach(&key);
        }
        let _ = std::fs::remove_file(&socket);
    }

    async fn control(self: Arc<Self>, stream: UnixStream) {
        let (read, write) = stream.into_split();
        let mut reader = BufReader::new(read.take(MAX_CONTROL_LINE));
        let mut line = String::new();
        let request = match tokio::time::timeout(
            process::ANSWER_TIMEOUT,
            reader.read_line(&mut line),
        )
        .await
        {
            Ok(Ok(n)) if n > 0 => serde_json::from_str::<ControlRequest>(line.trim()),
            _ => return,
        };
        let Ok(stream) = reader.into_inner().into_inner().reunite(write) else {
            return;
        };
        match request {
            Ok(ControlRequest::Serve { session }) => self.serve_link(session, stream).await,
            Err(error) => {
                let mut stream = stream;
                let _ = stream
                    .write_all(
                        error_line(&format!(
                            "the broker did not understand the request ({error}); is this \
                             host-shim attach from the same build as host-shim serve?"
                        ))
                        .as_bytes(),
                    )
                    .await;
            }
        }
    }
}

fn error_line(message: &str) -> String {
    let mut line = serde_json::json!({"type": "error", "message": message}).to_string();
    line.push('\n');
    line
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
    let (stop_tx, stopping) = watch::channel(false);
    let process = Arc::new(Process {
        broker: broker.clone(),
        runtime,
        state,
        state_dir,
        locks,
        clock,
        log,
        stopping,
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
    let mut links = tokio::task::JoinSet::new();
    let terminate = process::terminated();
    tokio::pin!(terminate);
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            () = &mut terminate => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => { links.spawn(process.clone().control(stream)); }
                Err(e) => tracing::warn!(target: TARGET, scope = "broker", "a control connection failed: {e}"),
            },
            Some(_) = links.join_next(), if !links.is_empty() => {}
        }
    }
    // Every served session shuts down (reporting what it could not send) before the
    // bots stop.
    stop_tx.send_replace(true);
    while links.join_next().await.is_some() {}
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
