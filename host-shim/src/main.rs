//! `host-shim`: runs the bot-connect bridge next to an agent session.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::{Parser, Subcommand};
use host_shim::commands::{self, process};
use host_shim::local::log_output;
use host_shim::transcript;
use transport_core::platform::BotSelf;

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

// Parsed once per process: the size of its largest variant (`serve`'s flags) costs nothing.
#[allow(clippy::large_enum_variant)]
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
        /// Serve Prometheus metrics (/metrics), /healthz and /readyz on this address, e.g.
        /// 127.0.0.1:9464 (off by default; see docs/operations.md).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
        /// Serve a read-only dashboard at /dashboard on the --metrics listener (loopback
        /// only), behind a token printed here.
        #[arg(long, requires = "metrics")]
        dashboard: bool,
        /// Join the cluster on this NATS server as a session node running only this
        /// session: its chats come through the cluster's bot, held by an ingress node
        /// elsewhere (docs/scaling.md). Not with --metrics.
        #[arg(long, value_name = "URL", conflicts_with = "metrics")]
        nats: Option<String>,
        /// With --nats: the cluster's name on NATS (one subject token).
        #[arg(long, default_value = "botconnect", value_name = "NAME")]
        prefix: String,
        /// With --nats: seconds a dead node's bot locks and session leases outlive it.
        #[arg(long, default_value_t = 15.0, value_name = "SECONDS")]
        lock_ttl: f64,
        /// With --nats: how this process logs in and the cluster key.
        #[command(flatten)]
        trust: commands::cluster::TrustFlags,
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
        /// With --nats: `ingress` holds the bots; `sessions` runs the pi sessions of this machine
        /// (they attach to it as to a local broker) and its share of the --demo sessions.
        #[arg(long, value_enum, requires = "nats")]
        role: Option<commands::cluster::Role>,
        /// With --nats: the cluster's name on NATS (one subject token).
        #[arg(long, default_value = "botconnect", value_name = "NAME")]
        prefix: String,
        /// With --nats: seconds a dead node's bot locks and session leases outlive it.
        #[arg(long, default_value_t = 15.0, value_name = "SECONDS")]
        lock_ttl: f64,
        /// Serve Prometheus metrics (/metrics), /healthz and /readyz on this address, e.g.
        /// 127.0.0.1:9464 (off by default; see docs/operations.md).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
        /// Serve a read-only dashboard at /dashboard on the --metrics listener (loopback
        /// only), behind a token printed here; with --nats, on session nodes (each shows
        /// the sessions it runs).
        #[arg(long, requires = "metrics")]
        dashboard: bool,
        /// Seconds without input after which an idle session's sandbox instance is dropped
        /// (its state is in the store; its next message wakes it); 0: never. At least 60.
        /// See docs/scaling.md#idle-sessions.
        #[arg(long, default_value = "600", value_name = "SECONDS")]
        hibernate_after: String,
        /// With --nats --role ingress: forget a session offline this long (its topic ends,
        /// its chats are told, nothing more waits for it): 7d, 36h, 90m; 0 never. At least
        /// 1h. See docs/scaling.md#forgetting-a-session.
        #[arg(long, default_value = "7d", value_name = "TIME")]
        forget_offline_after: String,
        /// With --nats: how the node logs in and the cluster key.
        #[command(flatten)]
        trust: commands::cluster::TrustFlags,
    },
    /// Look after a cluster's directory of sessions (docs/scaling.md#forgetting-a-session):
    /// `sessions` lists every session with its state, `forget <session>` removes one that
    /// left for good.
    Cluster {
        /// What to do.
        #[command(subcommand)]
        action: commands::cluster_admin::Action,
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
    Preview {
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
    if let Err(error) = install_logging() {
        eprintln!("host-shim: {error}");
        return std::process::ExitCode::FAILURE;
    }
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

/// Log lines through `tracing` on stderr (docs/operations.md#logs): human lines on a terminal,
/// JSON otherwise or with PI_BOT_CONNECT_LOG_FORMAT=json; RUST_LOG filters. Bad settings stop
/// the process before anything starts, rather than logging nothing.
fn install_logging() -> Result<(), log_output::LogSettingsError> {
    use std::io::IsTerminal as _;
    let terminal = std::io::stderr().is_terminal();
    let format = log_output::format(
        std::env::var(log_output::FORMAT_VAR).ok().as_deref(),
        terminal,
    )?;
    let filter = log_output::filter(
        std::env::var("RUST_LOG").ok().as_deref(),
        process::debug_enabled(),
    )?;
    log_output::install(format, filter, terminal);
    Ok(())
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
    let component = process::load_component(cli.component.as_deref())?;
    let ok = std::process::ExitCode::SUCCESS;
    match cli.command {
        Command::Run {
            session,
            pace,
            agent,
            pi_program,
            pi_args,
            transcript,
            metrics,
            dashboard,
            nats,
            prefix,
            lock_ttl,
            trust,
        } => {
            let pi = (agent == AgentKind::Pi).then_some((pi_program, pi_args));
            let transcript = transcript::directory(transcript, &|name| std::env::var(name).ok());
            let cluster = match nats {
                Some(url) => {
                    if !(1.0..=600.0).contains(&lock_ttl) {
                        bail!("--lock-ttl must be between 1 and 600 seconds, got {lock_ttl}");
                    }
                    Some(commands::cluster::ClusterArgs {
                        url,
                        role: commands::cluster::Role::Sessions,
                        prefix,
                        lock_ttl: Duration::from_secs_f64(lock_ttl),
                        trust,
                        // Only an ingress forgets sessions; this process is a session node.
                        forget_offline_after: None,
                    })
                }
                None => None,
            };
            let ops = commands::run::RunOps { metrics, dashboard };
            commands::run::run(&component, session, pace, pi, transcript, ops, cluster)
                .await
                .map(|()| ok)
        }
        Command::Replay {
            transcript,
            max_differences,
        } => Ok(commands::replay::run(
            &component,
            cli.component.as_deref(),
            &transcript,
            max_differences,
        )
        .await),
        Command::Attach { session } => {
            let args = commands::attach::AttachArgs {
                session,
                debug: process::debug_enabled(),
            };
            commands::attach::run(&component, args).await.map(|()| ok)
        }
        Command::Serve {
            demo,
            pace,
            max_sessions,
            nats,
            role,
            prefix,
            lock_ttl,
            metrics,
            dashboard,
            hibernate_after,
            forget_offline_after,
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
            // Said before the broker takes its lock or opens the state: nothing starts.
            if let (true, Some(addr)) = (dashboard, metrics) {
                commands::operator::check_dashboard_addr(addr)?;
            }
            let args = commands::serve::ServeArgs {
                demo,
                pace: Duration::from_secs_f64(pace),
                max_sessions,
                debug: process::debug_enabled(),
                metrics,
                dashboard,
                hibernate_after: host_shim::sandbox::hibernation::parse_after(&hibernate_after)?,
            };
            if let (Some(url), Some(role)) = (nats, role) {
                if !(1.0..=600.0).contains(&lock_ttl) {
                    bail!("--lock-ttl must be between 1 and 600 seconds, got {lock_ttl}");
                }
                let cluster = commands::cluster::ClusterArgs {
                    url,
                    role,
                    prefix,
                    lock_ttl: Duration::from_secs_f64(lock_ttl),
                    trust,
                    forget_offline_after: commands::cluster::parse_forget_after(
                        &forget_offline_after,
                    )?,
                };
                return commands::cluster::run(&component, args, cluster)
                    .await
                    .map(|()| ok);
            }
            commands::serve::run(&component, args).await.map(|()| ok)
        }
        Command::Cluster { action } => commands::cluster_admin::run(action).await.map(|()| ok),
        Command::Inspect => commands::inspect::run(&component).map(|()| ok),
        Command::Doctor { session } => commands::doctor::run(&component, session).await,
        Command::Preview {
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
            commands::preview::run(&component, &transport, &payload, &bot, session)
                .await
                .map(|()| ok)
        }
    }
}
