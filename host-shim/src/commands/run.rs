//! `host-shim run`: one session in this process, with the demo agent or pi started
//! headless, and this terminal as the chat when no messenger is configured.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use transport_core::Transport;

use crate::agent::DemoAgent;
use crate::cluster::session_node::{Attach, Wanted};
use crate::commands::cluster::ClusterArgs;
use crate::commands::operator::{self, OneSession};
use crate::commands::process::{self, cache_dir, default_session_key, setup};
use crate::disk::lock::LockDir;
use crate::disk::state_db::StateDb;
use crate::factory;
use crate::local::clock::{Clock, SystemClock};
use crate::local::logging::TracingLog;
use crate::local::terminal::{TerminalEvent, TerminalTransport};
use crate::local::ui::{TerminalUi, Ui};
use crate::pi::attach::Served;
use crate::sandbox::pairing_budget::PairingBudget;
use crate::sandbox::runtime::{Limits, Runtime};
use crate::sandbox::session::{Session, SessionSpec};
use crate::transcript::Transcript;
use crate::transcript::file::Rotation;
use crate::wit::agent::SessionInfo;
use crate::wit::types::Level;

/// pi's program and arguments, for `--agent pi`.
pub type PiCommand = (std::ffi::OsString, Vec<std::ffi::OsString>);

/// What `host-shim run` serves to an operator (docs/operations.md), as `serve` does.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOps {
    /// Serve metrics, `/healthz` and `/readyz` on this address (`--metrics`).
    pub metrics: Option<SocketAddr>,
    /// Serve the read-only dashboard on the metrics listener too (`--dashboard`).
    pub dashboard: bool,
}

/// Runs `host-shim run` until `/quit`, Ctrl-D or Ctrl-C; with `cluster`, as a session node
/// of that cluster running only this session.
pub async fn run(
    component: &[u8],
    session: Option<String>,
    pace: f64,
    pi: Option<PiCommand>,
    transcript_dir: Option<PathBuf>,
    ops: RunOps,
    cluster: Option<ClusterArgs>,
) -> anyhow::Result<()> {
    if !(0.0..=60.0).contains(&pace) {
        bail!("--pace must be between 0 and 60 seconds, got {pace}");
    }
    // Said before the session takes its lock: nothing starts.
    if let (true, Some(addr)) = (ops.dashboard, ops.metrics) {
        operator::check_dashboard_addr(addr)?;
    }
    let metrics = ops.metrics.map(|_| operator::metrics());
    let setup = setup()?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (terminal, mut events) = TerminalTransport::stdio();
    let terminal = Arc::new(terminal);
    // Local commands and /quit work from the first moment, whatever the chat is.
    terminal.listen_locally();
    let ui: Arc<dyn Ui> = Arc::new(TerminalUi(terminal.clone()));
    let welcome = match &cluster {
        None => {
            "bot-connect demo. This terminal plays both sides: lines you type are chat \
                 messages from a remote user; lines marked `local` are what only the person at \
                 the agent's terminal sees (that is where pairing codes appear). Local \
                 commands: /connect status, /connect pair, /connect doctor, … Leave with /quit \
                 or Ctrl-D."
        }
        Some(_) => {
            "bot-connect: this session joins the cluster; chats reach it through the \
                    cluster's bot, and its pairing codes appear here. Local commands: /connect \
                    status, /connect pair, /connect doctor, … Leave with /quit or Ctrl-D."
        }
    };
    ui.notify(Level::Info, welcome).await;
    let transcript_dir = match (transcript_dir, &cluster) {
        (Some(dir), Some(_)) => {
            ui.notify(
                Level::Warning,
                &format!(
                    "No transcript is recorded in {}: a cluster session's inputs come through \
                     NATS, which a transcript cannot replay. Run without --nats to record one.",
                    dir.display()
                ),
            )
            .await;
            None
        }
        (dir, _) => dir,
    };
    // The database's own message names the file and the way back; no second layer.
    let (state, warnings) = StateDb::open(&setup.paths.state_file, clock.now_ms())?;
    for warning in warnings {
        ui.notify(Level::Warning, &warning).await;
    }
    let key = session.unwrap_or_else(|| default_session_key(&setup.cwd));
    let transcript = match transcript_dir {
        Some(dir) => {
            let bridge = crate::sandbox::runtime::component_digest(component);
            let transcript =
                Transcript::create(&dir, &key, &bridge, Rotation::default(), clock.now_ms())?;
            if let Some(path) = transcript.path() {
                ui.notify(
                    Level::Info,
                    &format!("Recording a transcript in {}.", path.display()),
                )
                .await;
            }
            Some(transcript)
        }
        None => None,
    };
    let info = SessionInfo {
        id: key.clone(),
        name: Some("demo".into()),
        cwd: setup.cwd.display().to_string(),
        accepts_images: true,
    };
    let runtime = Arc::new(Runtime::load(
        component,
        Limits::default(),
        cache_dir(&setup.paths).as_deref(),
    )?);
    let chat: Arc<dyn Transport> = terminal.clone();
    let state_dir = process::transport_state_dir(&setup.paths.state_file);
    let pi = match pi {
        Some((program, args)) => {
            ui.notify(Level::Info, "starting pi (--mode rpc)…").await;
            let dir = state_dir.clone().unwrap_or_else(|| setup.cwd.clone());
            let started = crate::pi::rpc_agent::start_headless(
                program,
                args,
                setup.cwd.clone(),
                key.clone(),
                &dir,
                ui.clone(),
            )
            .await?;
            Some(started)
        }
        None => None,
    };
    let state = Arc::new(state);
    // One session in this process: the budget is its own, kept under its key.
    let (pairing, warning) = PairingBudget::kept_in(state.clone(), &format!("session:{key}"));
    if let Some(warning) = warning {
        ui.notify(Level::Warning, &warning).await;
    }
    let agent: Arc<dyn crate::agent::Agent> = match &pi {
        Some(pi) => Arc::new(pi.clone()),
        None => Arc::new(DemoAgent::new(Duration::from_secs_f64(pace), info)),
    };
    let one = OneSession {
        // The dashboard's row says which agent the session steers.
        name: if pi.is_some() { "pi" } else { "demo" }.into(),
        agent: agent.clone(),
        transports: Arc::default(),
        saved: Some((key.clone(), state.clone())),
    };
    let transports: factory::TransportFactory = Box::new(move |requests| {
        let var = |name: &str| std::env::var(name).ok();
        factory::build(
            requests,
            Some(chat),
            &factory::Environment {
                var: &var,
                state_dir,
            },
        )
    });
    let transports = match &metrics {
        Some(metrics) => operator::counted_factory(transports, metrics, &one),
        None => transports,
    };
    let spec = SessionSpec {
        key,
        config_sources: process::config_sources(&setup.discovery),
        platforms: factory::declarations(),
        transports,
        agent,
        ui: ui.clone(),
        state,
        locks: LockDir::new(&setup.paths.lock_dir),
        pairing,
        clock,
        log: operator::counted(Arc::new(TracingLog::new()), metrics.as_ref()),
        exclusive: true,
        transcript,
    };
    let (handle, end, node) = match cluster {
        None => {
            let session = Session::spawn(runtime, spec).await?;
            let handle = session.handle();
            (handle, Served::owned(session).end, None)
        }
        Some(cluster) => {
            let node = super::cluster::join_for_one_session(
                runtime,
                spec.config_sources.clone(),
                &cluster,
                spec.locks.clone(),
            )
            .await?;
            let attach = Attach {
                wanted: Wanted {
                    key: spec.key.clone(),
                    name: super::control::session_name(None, &setup.cwd.display().to_string()),
                    cwd: setup.cwd.display().to_string(),
                },
                config_sources: spec.config_sources,
                agent: spec.agent,
                ui: spec.ui,
            };
            let Served { handle, end } = node.attacher().attach(attach).await?;
            (handle, end, Some(node))
        }
    };
    let _listener = match (ops.metrics, metrics) {
        (Some(addr), Some(metrics)) => {
            let dashboard = if ops.dashboard {
                Some(operator::session_dashboard(addr, &metrics, one.clone())?)
            } else {
                None
            };
            Some(operator::listen_for_session(addr, metrics, one, dashboard).await?)
        }
        _ => None,
    };
    // The terminal read `/connect …` until the bridge was configured; from now on it
    // follows `bridge.localCommand`.
    let local_command = handle.local_command_name().to_owned();
    if terminal.local_command() != local_command {
        terminal.set_local_command(&local_command);
        ui.notify(
            Level::Info,
            &format!("Local commands start with /{local_command} (bridge.localCommand)."),
        )
        .await;
    }
    terminal.settled().await;
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            _ = tokio::signal::ctrl_c() => None,
        };
        match event {
            Some(TerminalEvent::LocalCommand(args)) => {
                let note = handle.local_command(&args).await?;
                ui.notify(note.level, &note.text).await;
            }
            Some(TerminalEvent::Quit) | None => break,
        }
    }
    end.await?;
    if let Some(node) = node {
        node.shutdown().await;
    }
    if let Some(pi) = pi {
        pi.stop().await;
    }
    ui.notify(Level::Info, "bye: pairing and state are saved.")
        .await;
    Ok(())
}
