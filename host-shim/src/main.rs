//! `host-shim`: runs the bot-connect bridge next to an agent session.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use host_shim::agent::DemoAgent;
use host_shim::audit::{self, Verdict};
use host_shim::clock::{Clock, SystemClock};
use host_shim::config_files::{self, Discovery};
use host_shim::factory;
use host_shim::lock::LockDir;
use host_shim::logging::StderrLog;
use host_shim::paths::Paths;
use host_shim::runtime::bindings::exports::pi::bot_connect::session::ConfigSource;
use host_shim::runtime::bindings::pi::bot_connect::agent::SessionInfo;
use host_shim::runtime::bindings::pi::bot_connect::types::Level;
use host_shim::runtime::{EMBEDDED_COMPONENT, Limits, Runtime};
use host_shim::session::{Session, SessionSpec};
use host_shim::state_file::StateFile;
use host_shim::ui::{StderrUi, TerminalUi, Ui};
use transports::Transport;
use transports::terminal::{TerminalEvent, TerminalTransport};

/// Bridge a live coding-agent session to messengers, from a sandboxed component.
#[derive(Parser)]
#[command(name = "host-shim", version)]
struct Cli {
    /// Load this component instead of the embedded one (a wasm32-wasip2 build of guest/).
    #[arg(long, global = true, value_name = "PATH")]
    component: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the bridge with the demo agent. With no transport configured, this terminal
    /// plays the chat: type messages as the remote user, `/connect …` for local
    /// commands, `/quit` (or Ctrl-D) to leave.
    Run {
        /// Session key the pairing and state are stored under (default: one per
        /// working directory).
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
        /// Seconds the demo agent spends on each step of a turn.
        #[arg(long, default_value_t = 0.8, value_name = "SECONDS")]
        pace: f64,
    },
    /// Print the component's imports and exports: the capability audit.
    Inspect,
    /// Check config, state file, locks and the sandbox without starting transports.
    Doctor {
        /// Session key to report on (default: one per working directory).
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("host-shim: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("host-shim: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let component = load_component(cli.component.as_deref())?;
    match cli.command {
        Command::Run { session, pace } => run_demo(&component, session, pace).await,
        Command::Inspect => inspect(&component),
        Command::Doctor { session } => doctor(&component, session).await,
    }
}

fn load_component(path: Option<&Path>) -> anyhow::Result<Vec<u8>> {
    match path {
        Some(path) => std::fs::read(path)
            .with_context(|| format!("cannot read the component {}", path.display())),
        None => Ok(EMBEDDED_COMPONENT.to_vec()),
    }
}

/// What every command needs from the environment.
struct Setup {
    paths: Paths,
    cwd: PathBuf,
    discovery: Discovery,
}

fn setup() -> anyhow::Result<Setup> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let paths = Paths::resolve(&|name| std::env::var(name).ok(), home.as_deref(), &cwd)?;
    let discovery = config_files::discover(&paths.config);
    Ok(Setup {
        paths,
        cwd,
        discovery,
    })
}

fn config_sources(discovery: &Discovery) -> Vec<ConfigSource> {
    discovery
        .sources
        .iter()
        .map(|s| ConfigSource {
            scope: s.scope.label().into(),
            path: s.path.display().to_string(),
            text: s.text.clone(),
        })
        .collect()
}

fn default_session_key(cwd: &Path) -> String {
    format!("host-shim:{}", cwd.display())
}

fn open_state(path: &Path, clock: &dyn Clock) -> anyhow::Result<(StateFile, Vec<String>)> {
    StateFile::open(path, clock.now_ms())
        .with_context(|| format!("cannot open the state file {}", path.display()))
}

fn debug_enabled() -> bool {
    matches!(
        std::env::var("PI_BOT_CONNECT_DEBUG").as_deref(),
        Ok("1") | Ok("true")
    )
}

async fn run_demo(component: &[u8], session: Option<String>, pace: f64) -> anyhow::Result<()> {
    if !(0.0..=60.0).contains(&pace) {
        bail!("--pace must be between 0 and 60 seconds, got {pace}");
    }
    let setup = setup()?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (terminal, mut events) = TerminalTransport::stdio();
    let terminal = Arc::new(terminal);
    let ui: Arc<dyn Ui> = Arc::new(TerminalUi(terminal.clone()));
    ui.notify(
        Level::Info,
        "bot-connect demo. This terminal plays both sides: lines you type are chat messages \
         from a remote user; lines marked `local` are what only the person at the agent's \
         terminal sees (that is where pairing codes appear). Local commands: /connect status, \
         /connect pair, /connect doctor, … Leave with /quit or Ctrl-D.",
    )
    .await;
    for note in &setup.discovery.notes {
        ui.notify(Level::Warning, note).await;
    }
    let (state, warnings) = open_state(&setup.paths.state_file, clock.as_ref())?;
    for warning in warnings {
        ui.notify(Level::Warning, &warning).await;
    }
    let key = session.unwrap_or_else(|| default_session_key(&setup.cwd));
    let info = SessionInfo {
        id: key.clone(),
        name: Some("demo".into()),
        cwd: setup.cwd.display().to_string(),
        accepts_images: true,
    };
    let runtime = Arc::new(Runtime::new(component, Limits::default())?);
    let chat: Arc<dyn Transport> = terminal.clone();
    let spec = SessionSpec {
        key,
        config_sources: config_sources(&setup.discovery),
        transports: Box::new(move |requests| factory::build(requests, Some(chat))),
        agent: Arc::new(DemoAgent::new(Duration::from_secs_f64(pace), info)),
        ui: ui.clone(),
        state: Arc::new(Mutex::new(state)),
        locks: LockDir::new(&setup.paths.lock_dir),
        clock,
        log: Arc::new(StderrLog::new(debug_enabled())),
    };
    let session = Session::spawn(runtime, spec).await?;
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            _ = tokio::signal::ctrl_c() => None,
        };
        match event {
            Some(TerminalEvent::LocalCommand(args)) => {
                let note = session.local_command(&args).await?;
                ui.notify(note.level, &note.text).await;
            }
            Some(TerminalEvent::Quit) | None => break,
        }
    }
    session.shutdown().await?;
    ui.notify(Level::Info, "bye: pairing and state are saved.")
        .await;
    Ok(())
}

fn inspect(component: &[u8]) -> anyhow::Result<()> {
    let runtime = Runtime::new(component, Limits::default())?;
    let ty = runtime.component_type();
    let engine = runtime.engine();
    println!("imports (everything the bridge can reach):");
    let mut unexpected = 0;
    for import in audit::imports(&ty, engine) {
        let why = match &import.verdict {
            Verdict::Bridge => "bridge world".to_string(),
            Verdict::Wasi(why) => format!("std: {why}"),
            Verdict::Unexpected => {
                unexpected += 1;
                "NOT EXPECTED: a capability outside the bridge world".to_string()
            }
        };
        println!("  {}  [{why}]", import.name);
        if !import.functions.is_empty() {
            println!("      {}", import.functions.join(", "));
        }
    }
    println!("exports:");
    for (name, functions) in audit::exports(&ty, engine) {
        println!("  {name}");
        if !functions.is_empty() {
            println!("      {}", functions.join(", "));
        }
    }
    println!(
        "grants: no filesystem preopens, no environment variables, no arguments, no sockets, \
         empty stdin; stderr is captured for trap reports"
    );
    if unexpected > 0 {
        bail!("{unexpected} import(s) outside the audited set; this component must not run");
    }
    Ok(())
}

async fn doctor(component: &[u8], session: Option<String>) -> anyhow::Result<()> {
    let setup = setup()?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    println!("host-shim doctor");
    println!("- host-shim: {}", env!("CARGO_PKG_VERSION"));
    println!("- component: {} bytes", component.len());
    match &setup.paths.config {
        host_shim::paths::ConfigLocations::Discover { global, project } => {
            println!(
                "- config: {} (global), {} (project)",
                global.display(),
                project.display()
            );
        }
        host_shim::paths::ConfigLocations::Override(path) => {
            println!("- config: {} (PI_BOT_CONNECT_CONFIG)", path.display());
        }
    }
    for source in &setup.discovery.sources {
        println!(
            "  found {} config: {}",
            source.scope.label(),
            source.path.display()
        );
    }
    for note in &setup.discovery.notes {
        println!("  note: {note}");
    }
    let (state, warnings) = open_state(&setup.paths.state_file, clock.as_ref())?;
    println!(
        "- state file: {} (persistent)",
        setup.paths.state_file.display()
    );
    for warning in &warnings {
        println!("  warning: {warning}");
    }
    println!("- lock directory: {}", setup.paths.lock_dir.display());
    let key = session.unwrap_or_else(|| default_session_key(&setup.cwd));
    let info = SessionInfo {
        id: key.clone(),
        name: None,
        cwd: setup.cwd.display().to_string(),
        accepts_images: false,
    };
    let runtime = Arc::new(Runtime::new(component, Limits::default())?);
    let requested = Arc::new(Mutex::new(Vec::new()));
    let seen = requested.clone();
    let spec = SessionSpec {
        key,
        config_sources: config_sources(&setup.discovery),
        // Doctor never starts a transport: a second poller would fight the running one.
        transports: Box::new(move |requests| {
            if let Ok(mut seen) = seen.lock() {
                seen.extend(requests.iter().map(|r| r.id.clone()));
            }
            (Vec::new(), Vec::new())
        }),
        agent: Arc::new(DemoAgent::new(Duration::ZERO, info)),
        ui: Arc::new(StderrUi),
        state: Arc::new(Mutex::new(state)),
        locks: LockDir::new(&setup.paths.lock_dir),
        clock,
        log: Arc::new(StderrLog::new(debug_enabled())),
    };
    let session = Session::spawn(runtime, spec).await?;
    let requested = requested.lock().map(|r| r.clone()).unwrap_or_default();
    if requested.is_empty() {
        println!("- transports configured: none (`run` uses this terminal as the chat)");
    } else {
        println!(
            "- transports configured: {} (not started by doctor)",
            requested.join(", ")
        );
    }
    if let Some(diagnostics) = session.diagnostics().await? {
        println!(
            "- sandbox: the bridge sees {} environment variable(s) and {} argument(s)",
            diagnostics.sandbox.environment_variables, diagnostics.sandbox.arguments
        );
    }
    let note = session.local_command("doctor").await?;
    println!("{}", note.text);
    session.shutdown().await
}
