//! The `host-shim attach` command: from the process environment to a serving link.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::commands::process;
use crate::disk::lock::LockDir;
use crate::disk::state_db::StateDb;
use crate::factory;
use crate::local::clock::{Clock, SystemClock};
use crate::local::logging::TracingLog;
use crate::pi::attach::{self, Bound, Link};
use crate::pi::link::LinkSession;
use crate::sandbox::pairing_budget::PairingBudget;
use crate::sandbox::runtime::{Limits, Runtime};
use crate::sandbox::session::{Session, SessionSpec};
use crate::transcript::Transcript;
use crate::transcript::file::Rotation;
use crate::wit::types::Level;

/// What `host-shim attach` was asked to serve.
#[derive(Debug, Clone)]
pub struct AttachArgs {
    /// pi's session id (the session key).
    pub session: String,
    /// Log level: info lines too.
    pub debug: bool,
}

/// Resolves when stdin reaches its end: the pi that started this process has exited,
/// however it exited. A plain thread, not tokio's stdin: a blocking read there would keep
/// the runtime from shutting down.
fn stdin_closed() -> oneshot::Receiver<()> {
    let (tx, rx) = oneshot::channel();
    std::thread::spawn(move || {
        let mut sink = [0u8; 256];
        let mut stdin = std::io::stdin();
        while matches!(std::io::Read::read(&mut stdin, &mut sink), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    rx
}

async fn stop_signal() {
    let stdin = stdin_closed();
    let terminate = process::terminated();
    tokio::select! {
        _ = stdin => {}
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

/// Runs `host-shim attach`: listens for the pi extension of one session, prints the
/// `ready` line, serves until stdin closes or a stop signal arrives.
pub async fn run(component: &[u8], args: AttachArgs) -> anyhow::Result<()> {
    let (_cwd, paths, state_dir) = process::process_paths()?;
    // A running broker (`host-shim serve`) serves the session with its shared bots;
    // this process then only ties the session's life to pi's.
    if let Some((ready, mut connection)) = process::ask_broker(&state_dir, &args.session).await? {
        print!("{ready}");
        std::io::stdout().flush().ok();
        // The broker never writes again: a read returning means it is gone, and this
        // process exits so the extension notices and can start a new host on `/connect`.
        let mut byte = [0u8; 1];
        tokio::select! {
            () = stop_signal() => {}
            _ = tokio::io::AsyncReadExt::read(&mut connection, &mut byte) => {
                anyhow::bail!("the broker (host-shim serve) serving this session stopped");
            }
        }
        return Ok(());
    }
    let socket = attach::socket_path(&state_dir, &args.session);
    let listener = match attach::bind(&socket).await? {
        Bound::Listening(listener) => listener,
        Bound::AlreadyServed => {
            print!("{}", attach::ready_line(&socket, false));
            std::io::stdout().flush().ok();
            return Ok(());
        }
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    // The database's own message names the file and the way back; no second layer.
    let (state, warnings) = StateDb::open(&paths.state_file, clock.now_ms())?;
    // Compiled code is cached beside the state file, as `run` does: pi waits for this
    // process at every session start.
    let cache = state_dir.join("cache");
    let runtime = Arc::new(Runtime::load(component, Limits::default(), Some(&cache))?);
    let link = Link::new();
    let ui = link.ui();
    for warning in warnings {
        ui.notify(Level::Warning, &warning).await;
    }
    let locks = LockDir::new(&paths.lock_dir);
    let state = Arc::new(state);
    let agent = link.agent();
    let bridge = crate::sandbox::runtime::component_digest(component);
    let starter: attach::SessionStarter = Box::new(move |described: LinkSession| {
        Box::pin(async move {
            // The project config is the one of pi's working directory.
            let config_sources = process::config_sources_in(Path::new(&described.cwd))?;
            let transport_state = Some(state_dir);
            let log: Arc<dyn crate::local::logging::LogSink> = Arc::new(TracingLog::new());
            // Opt-in through the environment (pi starts this command); a transcript that
            // cannot be written is reported and the session runs without it.
            let transcript = crate::transcript::directory(None, &|name| std::env::var(name).ok())
                .and_then(|dir| {
                    match Transcript::create(
                        &dir,
                        &described.key,
                        &bridge,
                        Rotation::default(),
                        clock.now_ms(),
                    ) {
                        Ok(transcript) => Some(transcript),
                        Err(error) => {
                            log.write(
                                &described.key,
                                crate::local::logging::LogLine {
                                    level: Level::Warning,
                                    event: "no transcript".into(),
                                    fields: vec![("error".into(), error.to_string())],
                                },
                            );
                            None
                        }
                    }
                });
            // One session in this process: the budget is its own, kept under its key.
            let (pairing, warning) =
                PairingBudget::kept_in(state.clone(), &format!("session:{}", described.key));
            if let Some(warning) = warning {
                ui.notify(Level::Warning, &warning).await;
            }
            let spec = SessionSpec {
                key: described.key,
                config_sources,
                platforms: factory::declarations(),
                transports: Box::new(move |requests| {
                    let var = |name: &str| std::env::var(name).ok();
                    factory::build(
                        requests,
                        None,
                        &factory::Environment {
                            var: &var,
                            state_dir: transport_state,
                        },
                    )
                }),
                agent,
                ui,
                state,
                locks,
                pairing,
                clock,
                log,
                exclusive: true,
                transcript,
            };
            Session::spawn(runtime, spec)
                .await
                .map(attach::Served::owned)
        })
    });
    print!("{}", attach::ready_line(&socket, true));
    std::io::stdout().flush().ok();
    attach::serve(listener, link, Some(args.session), starter, stop_signal()).await;
    let _ = std::fs::remove_file(&socket);
    Ok(())
}
