//! `host-shim`: runs the bot-connect bridge next to an agent session.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use host_shim::agent::DemoAgent;
use host_shim::bindings::agent::SessionInfo;
use host_shim::bindings::types::Level;
use host_shim::commands::offline::{self, OfflineSetup};
use host_shim::commands::process;
use host_shim::disk::config_files::{self, Discovery};
use host_shim::disk::lock::LockDir;
use host_shim::disk::paths::Paths;
use host_shim::disk::state_file::StateFile;
use host_shim::factory;
use host_shim::local::clock::{Clock, SystemClock};
use host_shim::local::logging::StderrLog;
use host_shim::local::terminal::{TerminalEvent, TerminalTransport};
use host_shim::local::ui::{TerminalUi, Ui};
use host_shim::sandbox::audit::{self, Verdict};
use host_shim::sandbox::runtime::{EMBEDDED_COMPONENT, Limits, Runtime};
use host_shim::sandbox::session::{Session, SessionSpec};
use host_shim::transcript::{self, Transcript, file::Rotation};
use transport_core::Transport;
use transport_core::platform::{BotSelf, Normalized};

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
    /// Run the bridge with the demo agent (or pi: `--agent pi`). With no transport
    /// configured, this terminal plays the chat: type messages as the remote user,
    /// `/connect …` for local commands, `/quit` (or Ctrl-D) to leave.
    Run {
        /// Session key the pairing and state are stored under (default: one per
        /// working directory).
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
        /// Seconds the demo agent spends on each step of a turn.
        #[arg(long, default_value_t = 0.8, value_name = "SECONDS")]
        pace: f64,
        /// The agent behind the bridge: the built-in demo, or pi started headless
        /// (`pi --mode rpc`); arguments after `--` go to pi.
        #[arg(long, value_enum, default_value_t = AgentKind::Demo)]
        agent: AgentKind,
        /// The pi executable for `--agent pi`.
        #[arg(long = "pi", default_value = "pi", value_name = "PROGRAM")]
        pi_program: std::ffi::OsString,
        /// Arguments for pi (`-- --provider x --model y`).
        #[arg(last = true, value_name = "PI_ARGS")]
        pi_args: Vec<std::ffi::OsString>,
        /// Record a transcript of the session in this directory (JSON lines, redacted,
        /// rotated at 8 MiB; for `host-shim replay`). Default: PI_BOT_CONNECT_TRANSCRIPT,
        /// else none.
        #[arg(long, value_name = "DIR")]
        transcript: Option<PathBuf>,
    },
    /// Serve one live pi session for the bot-connect pi extension, which starts this
    /// command itself (examples/pi-extension). Prints one `ready` line naming the socket;
    /// stops when stdin closes.
    Attach {
        /// pi's session id: the key pairing and state are stored under.
        #[arg(long, value_name = "KEY")]
        session: String,
    },
    /// Serve many sessions with one set of bots (the broker): pi sessions with the
    /// bot-connect extension attach to it by themselves, and `--demo <name>` starts demo
    /// sessions. Chats pick a session with /sessions and /switch. Stop with Ctrl-C.
    Serve {
        /// Start a demo session with this name (repeat for several).
        #[arg(long = "demo", value_name = "NAME")]
        demo: Vec<String>,
        /// Seconds the demo agents spend on each step of a turn.
        #[arg(long, default_value_t = 0.8, value_name = "SECONDS")]
        pace: f64,
        /// Sessions the sandbox has room for at once (the pooling allocator's size).
        #[arg(long, default_value_t = 64, value_name = "N")]
        max_sessions: u32,
        /// Run as one node of a cluster on this NATS server (JetStream enabled), in the
        /// role --role names; see docs/scaling.md.
        #[arg(long, value_name = "URL", requires = "role")]
        nats: Option<String>,
        /// With --nats: `ingress` holds the bots, `sessions` runs the --demo sessions.
        #[arg(long, value_enum, requires = "nats")]
        role: Option<host_shim::commands::cluster::Role>,
        /// With --nats: the cluster's name on NATS (one subject token).
        #[arg(long, default_value = "botconnect", value_name = "NAME")]
        prefix: String,
        /// With --nats: seconds a dead node's bot locks and session leases outlive it.
        #[arg(long, default_value_t = 15.0, value_name = "SECONDS")]
        lock_ttl: f64,
        /// With --nats: how the node logs in and the cluster key.
        #[command(flatten)]
        trust: host_shim::commands::cluster::TrustFlags,
    },
    /// Run a transcript's inputs through the component (the embedded one, or
    /// --component) and print where its effects differ from the recorded ones. Exit
    /// status: 0 identical, 1 different, 2 transcript unreadable.
    Replay {
        /// The transcript file (`<session>.jsonl` in the transcript directory).
        transcript: PathBuf,
        /// Show at most this many differences.
        #[arg(long, default_value_t = 5, value_name = "N")]
        max_differences: usize,
    },
    /// Print the component's imports and exports: the capability audit.
    Inspect,
    /// Check config, state file, locks and the sandbox without starting transports.
    Doctor {
        /// Session key to report on (default: one per working directory).
        #[arg(long, value_name = "KEY")]
        session: Option<String>,
    },
    /// Normalize one raw platform payload (a Telegram update, ...) and say what the bridge
    /// would do with it, without sending, saving or starting anything.
    Explain {
        /// Transport whose payload it is (`telegram`, `discord`, `slack`, `robo_claw`).
        transport: String,
        /// The payload as the platform sent it, in a JSON file.
        payload: PathBuf,
        /// The bot's user id on the platform (to recognise itself and replies to it);
        /// unset: unknown (robo_claw then takes its default sender id, `robot`).
        #[arg(long, value_name = "ID", default_value = "")]
        bot_id: String,
        /// The bot's user name without `@` (to recognise mentions of it).
        #[arg(long, value_name = "NAME", default_value = "bot")]
        bot_name: String,
        /// Session key whose pairings and pauses apply (default: one per working directory).
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
    let result = runtime.block_on(run(cli));
    // Dropping the runtime would wait for the blocking thread that reads stdin, so after
    // `/quit` the process would hang until another line was typed.
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("host-shim: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Which agent `run` drives.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AgentKind {
    /// The built-in demo agent (offline, no node needed).
    Demo,
    /// pi, started headless over its RPC mode.
    Pi,
}

async fn run(cli: Cli) -> anyhow::Result<std::process::ExitCode> {
    let component = load_component(cli.component.as_deref())?;
    let ok = std::process::ExitCode::SUCCESS;
    match cli.command {
        Command::Run {
            session,
            pace,
            agent,
            pi_program,
            pi_args,
            transcript,
        } => {
            let pi = (agent == AgentKind::Pi).then_some((pi_program, pi_args));
            let transcript = transcript::directory(transcript, &|name| std::env::var(name).ok());
            run_demo(&component, session, pace, pi, transcript)
                .await
                .map(|()| ok)
        }
        Command::Replay {
            transcript,
            max_differences,
        } => Ok(replay(
            &component,
            cli.component.as_deref(),
            &transcript,
            max_differences,
        )
        .await),
        Command::Attach { session } => {
            let args = host_shim::commands::attach::AttachArgs {
                session,
                debug: debug_enabled(),
            };
            host_shim::commands::attach::run(&component, args)
                .await
                .map(|()| ok)
        }
        Command::Serve {
            demo,
            pace,
            max_sessions,
            nats,
            role,
            prefix,
            lock_ttl,
            trust,
        } => {
            if !(0.0..=60.0).contains(&pace) {
                bail!("--pace must be between 0 and 60 seconds, got {pace}");
            }
            // Each slot reserves address space for one instance's memory cap (64 MiB);
            // 100,000 of them is 6 TiB of reservations, the most a 47-bit space sensibly holds.
            if !(1..=100_000).contains(&max_sessions) {
                bail!("--max-sessions must be between 1 and 100000, got {max_sessions}");
            }
            let args = host_shim::commands::serve::ServeArgs {
                demo,
                pace: Duration::from_secs_f64(pace),
                max_sessions,
                debug: debug_enabled(),
            };
            if let (Some(url), Some(role)) = (nats, role) {
                if !(1.0..=600.0).contains(&lock_ttl) {
                    bail!("--lock-ttl must be between 1 and 600 seconds, got {lock_ttl}");
                }
                let cluster = host_shim::commands::cluster::ClusterArgs {
                    url,
                    role,
                    prefix,
                    lock_ttl: Duration::from_secs_f64(lock_ttl),
                    trust,
                };
                return host_shim::commands::cluster::run(&component, args, cluster)
                    .await
                    .map(|()| ok);
            }
            host_shim::commands::serve::run(&component, args)
                .await
                .map(|()| ok)
        }
        Command::Inspect => inspect(&component).map(|()| ok),
        Command::Doctor { session } => doctor(&component, session).await,
        Command::Explain {
            transport,
            payload,
            bot_id,
            bot_name,
            session,
        } => {
            let bot = BotSelf {
                id: bot_id,
                username: bot_name,
            };
            explain(&component, &transport, &payload, &bot, session)
                .await
                .map(|()| ok)
        }
    }
}

/// `host-shim replay`: the exit status says identical (0), different (1) or unreadable (2).
async fn replay(
    component: &[u8],
    component_path: Option<&Path>,
    path: &Path,
    max_differences: usize,
) -> std::process::ExitCode {
    let unreadable = std::process::ExitCode::from(2);
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!(
                "host-shim: cannot read the transcript {}: {e}",
                path.display()
            );
            return unreadable;
        }
    };
    let parsed = transcript::read::parse(&bytes);
    for warning in &parsed.warnings {
        eprintln!("warning: {}: {warning}", path.display());
    }
    let runtime = match Runtime::new(component, Limits::default()) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("host-shim: cannot load the component: {e}");
            return unreadable;
        }
    };
    let report = match host_shim::commands::replay::replay(&runtime, &parsed).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("host-shim: cannot replay {}: {e}", path.display());
            return unreadable;
        }
    };
    let against = match component_path {
        Some(p) => p.display().to_string(),
        None => "the embedded component".into(),
    };
    println!(
        "replayed {} inputs of {} against {against}; {} recorded effects compared",
        report.inputs,
        path.display(),
        report.effects
    );
    if report.differences.is_empty() {
        println!("identical");
        return std::process::ExitCode::SUCCESS;
    }
    // Which builds were compared, when it is known and not the same: "a new build behaves
    // unlike the old one" needs both names.
    if !report.recorded_bridge.is_empty() && report.recorded_bridge != report.replayed_bridge {
        println!(
            "recorded with bridge {}, replayed with bridge {}",
            report.recorded_bridge, report.replayed_bridge
        );
    }
    for difference in report.differences.iter().take(max_differences) {
        println!(
            "line {} (after the input on line {}):",
            difference.line, difference.input_line
        );
        println!(
            "  expected: {}",
            difference.expected.as_deref().unwrap_or("(nothing)")
        );
        println!(
            "  got:      {}",
            difference.got.as_deref().unwrap_or("(nothing)")
        );
    }
    let n = report.differences.len();
    println!(
        "{n} input{} with different effects{}",
        if n == 1 { "" } else { "s" },
        if n > max_differences {
            format!(" (the first {max_differences} shown)")
        } else {
            String::new()
        }
    );
    std::process::ExitCode::from(1)
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

fn default_session_key(cwd: &Path) -> String {
    format!("host-shim:{}", cwd.display())
}

fn debug_enabled() -> bool {
    matches!(
        std::env::var("PI_BOT_CONNECT_DEBUG").as_deref(),
        Ok("1") | Ok("true")
    )
}

/// Where compiled code is cached: beside the state file, so `PI_BOT_CONNECT_STATE`
/// moves it too and a test never touches the user's own cache.
fn cache_dir(paths: &Paths) -> Option<PathBuf> {
    process::transport_state_dir(&paths.state_file).map(|dir| dir.join("cache"))
}

async fn run_demo(
    component: &[u8],
    session: Option<String>,
    pace: f64,
    pi: Option<(std::ffi::OsString, Vec<std::ffi::OsString>)>,
    transcript_dir: Option<PathBuf>,
) -> anyhow::Result<()> {
    if !(0.0..=60.0).contains(&pace) {
        bail!("--pace must be between 0 and 60 seconds, got {pace}");
    }
    let setup = setup()?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (terminal, mut events) = TerminalTransport::stdio();
    let terminal = Arc::new(terminal);
    // Local commands and /quit work from the first moment, whatever the chat is.
    terminal.listen_locally();
    let ui: Arc<dyn Ui> = Arc::new(TerminalUi(terminal.clone()));
    ui.notify(
        Level::Info,
        "bot-connect demo. This terminal plays both sides: lines you type are chat messages \
         from a remote user; lines marked `local` are what only the person at the agent's \
         terminal sees (that is where pairing codes appear). Local commands: /connect status, \
         /connect pair, /connect doctor, … Leave with /quit or Ctrl-D.",
    )
    .await;
    // The state file's own message names the path and what to do; no second layer.
    let (state, warnings) = StateFile::open(&setup.paths.state_file, clock.now_ms())?;
    for warning in warnings {
        ui.notify(Level::Warning, &warning).await;
    }
    let key = session.unwrap_or_else(|| default_session_key(&setup.cwd));
    let transcript = match transcript_dir {
        Some(dir) => {
            let bridge = host_shim::sandbox::runtime::component_digest(component);
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
            let started = host_shim::pi::rpc_agent::start_headless(
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
    let agent: Arc<dyn host_shim::agent::Agent> = match &pi {
        Some(pi) => Arc::new(pi.clone()),
        None => Arc::new(DemoAgent::new(Duration::from_secs_f64(pace), info)),
    };
    let spec = SessionSpec {
        key,
        config_sources: process::config_sources(&setup.discovery),
        platforms: factory::declarations(),
        transports: Box::new(move |requests| {
            let var = |name: &str| std::env::var(name).ok();
            factory::build(
                requests,
                Some(chat),
                &factory::Environment {
                    var: &var,
                    state_dir,
                },
            )
        }),
        agent,
        ui: ui.clone(),
        state: Arc::new(Mutex::new(state)),
        locks: LockDir::new(&setup.paths.lock_dir),
        pairing: host_shim::sandbox::pairing_budget::PairingBudget::default(),
        clock,
        log: Arc::new(StderrLog::new(debug_enabled())),
        exclusive: true,
        transcript,
    };
    let session = Session::spawn(runtime, spec).await?;
    // The terminal read `/connect …` until the bridge was configured; from now on it
    // follows `bridge.localCommand`.
    let local_command = session.local_command_name().to_owned();
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
                let note = session.local_command(&args).await?;
                ui.notify(note.level, &note.text).await;
            }
            Some(TerminalEvent::Quit) | None => break,
        }
    }
    session.shutdown().await?;
    if let Some(pi) = pi {
        pi.stop().await;
    }
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

/// `host-shim explain`: the platform's normalizer, then the bridge's preview.
async fn explain(
    component: &[u8],
    transport: &str,
    payload: &Path,
    bot: &BotSelf,
    session: Option<String>,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(payload)
        .with_context(|| format!("cannot read the payload file {}", payload.display()))?;
    println!(
        "assuming the bot is @{} (id {}); pass --bot-name and --bot-id to match yours",
        bot.username, bot.id
    );
    let envelope = match host_shim::commands::explain::normalize(transport, &text, bot)? {
        Normalized::Ignored(reason) => {
            println!("ignored by the {transport} transport: {reason}");
            println!("The bridge never sees this payload, so nothing is sent.");
            return Ok(());
        }
        Normalized::Message(envelope) => envelope,
    };
    println!("{}", host_shim::commands::explain::describe(&envelope));
    let setup = setup()?;
    let offline = offline::spawn(OfflineSetup {
        component,
        paths: &setup.paths,
        discovery: &setup.discovery,
        key: session.unwrap_or_else(|| default_session_key(&setup.cwd)),
        cwd: setup.cwd.clone(),
        clock: Arc::new(SystemClock),
    })
    .await?;
    match offline.session.preview(envelope).await? {
        Some(verdict) => println!("{verdict}"),
        None => println!("The bridge failed while previewing; run `host-shim doctor`."),
    }
    offline.session.shutdown().await
}

/// `host-shim doctor`: one report on stdout; exit status 1 when it found errors.
async fn doctor(
    component: &[u8],
    session: Option<String>,
) -> anyhow::Result<std::process::ExitCode> {
    let setup = setup()?;
    let report = offline::doctor(
        OfflineSetup {
            component,
            paths: &setup.paths,
            discovery: &setup.discovery,
            key: session.unwrap_or_else(|| default_session_key(&setup.cwd)),
            cwd: setup.cwd.clone(),
            clock: Arc::new(SystemClock),
        },
        &|name| std::env::var(name).ok(),
    )
    .await?;
    println!("{}", report.text);
    if report.errors == 0 {
        Ok(std::process::ExitCode::SUCCESS)
    } else {
        println!(
            "doctor found {} error(s); see the lines marked error above.",
            report.errors
        );
        Ok(std::process::ExitCode::FAILURE)
    }
}
