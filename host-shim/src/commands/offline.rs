//! Sessions that only look: `doctor` and `explain` load the real component, config and
//! state, and then start no transport, take no session lock and write nothing. A person
//! can run them next to a live session, or on a broken setup, without changing it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::agent::DemoAgent;
use crate::commands::process;
use crate::disk::config_files::Discovery;
use crate::disk::lock::LockDir;
use crate::disk::paths::{ConfigLocations, Paths};
use crate::disk::state_db::StateReader;
use crate::factory;
use crate::local::clock::Clock;
use crate::local::logging::MemoryLog;
use crate::local::ui::RecordingUi;
use crate::sandbox::runtime::{Limits, Runtime};
use crate::sandbox::session::{Session, SessionSpec, session_lock_dir, session_lock_name};
use crate::wit::agent::SessionInfo;
use crate::wit::session::TransportRequest;
use crate::wit::types::Level;
use transport_core::platform::SettingKind;

/// A looking session and what it saw while starting.
pub struct Offline {
    /// The session (shut it down when done).
    pub session: Session,
    /// Notes the bridge gave at start (config problems, and so on).
    pub ui: Arc<RecordingUi>,
    /// Transports the configuration asks for, with their validated settings.
    pub requested: Vec<TransportRequest>,
    /// Problems with the state file, read without moving anything.
    pub state_warnings: Vec<String>,
    /// Where the state is (the database, or a JSON file not migrated yet), for `doctor`.
    pub state_lines: Vec<String>,
}

/// Everything an offline session is built from.
pub struct OfflineSetup<'a> {
    /// The component bytes.
    pub component: &'a [u8],
    /// Where config, state and locks are.
    pub paths: &'a Paths,
    /// The config files found.
    pub discovery: &'a Discovery,
    /// The session key to look at.
    pub key: String,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

/// Starts a session that starts no transport, takes no lock and writes nothing.
pub async fn spawn(setup: OfflineSetup<'_>) -> anyhow::Result<Offline> {
    let (state, state_warnings) = StateReader::open(&setup.paths.state_file)?;
    let state_lines = state.describe(&setup.paths.state_file);
    let runtime = Arc::new(Runtime::load_read_only(
        setup.component,
        Limits::default(),
        process::cache_dir(setup.paths).as_deref(),
    )?);
    let requested = Arc::new(Mutex::new(Vec::new()));
    let seen = requested.clone();
    let ui = Arc::new(RecordingUi::default());
    let info = SessionInfo {
        id: setup.key.clone(),
        name: None,
        cwd: setup.cwd.display().to_string(),
        accepts_images: true,
    };
    let spec = SessionSpec {
        key: setup.key,
        config_sources: process::config_sources(setup.discovery),
        platforms: factory::declarations(),
        // Never a transport: a second poller would fight the running one.
        transports: Box::new(move |requests| {
            if let Ok(mut seen) = seen.lock() {
                seen.extend(requests.iter().cloned());
            }
            Default::default()
        }),
        agent: Arc::new(DemoAgent::new(Duration::ZERO, info)),
        ui: ui.clone(),
        state: Arc::new(state),
        locks: LockDir::new(&setup.paths.lock_dir),
        pairing: crate::sandbox::pairing_budget::PairingBudget::default(),
        clock: setup.clock,
        log: Arc::new(MemoryLog::default()),
        exclusive: false,
        transcript: None,
    };
    let session = Session::spawn(runtime, spec).await?;
    let requested = requested.lock().map(|r| r.clone()).unwrap_or_default();
    Ok(Offline {
        session,
        ui,
        requested,
        state_warnings,
        state_lines,
    })
}

/// The `doctor` report and how many errors it found (a non-zero count fails the command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoctorReport {
    /// The whole report, one line per fact.
    pub text: String,
    /// Errors in it.
    pub errors: usize,
}

/// Looks at everything `run` would use, in one report: config files and their problems,
/// the state file, locks, credentials (present or not, never their value), the sandbox
/// and the bridge's own doctor.
pub async fn doctor(
    setup: OfflineSetup<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<DoctorReport> {
    let now = setup.clock.now_ms();
    let mut lines = vec![
        "host-shim doctor".to_string(),
        format!("- host-shim: {}", env!("CARGO_PKG_VERSION")),
        format!("- component: {} bytes", setup.component.len()),
    ];
    let mut errors = 0;
    match &setup.paths.config {
        ConfigLocations::Discover { global, project } => lines.push(format!(
            "- config: {} (global), {} (project)",
            global.display(),
            project.display()
        )),
        ConfigLocations::Override(path) => {
            lines.push(format!(
                "- config: {} (PI_BOT_CONNECT_CONFIG)",
                path.display()
            ));
        }
    }
    for source in &setup.discovery.sources {
        let state = if source.text.is_ok() {
            "found"
        } else {
            "UNREADABLE"
        };
        lines.push(format!(
            "  {state} {} config: {}",
            source.scope.label(),
            source.path.display()
        ));
    }
    let key = setup.key.clone();
    let locks = LockDir::new(&setup.paths.lock_dir);
    let state_file = setup.paths.state_file.clone();
    let lock_dir = setup.paths.lock_dir.clone();
    let offline = spawn(setup).await?;
    lines.extend(offline.state_lines.iter().cloned());
    for warning in &offline.state_warnings {
        errors += 1;
        lines.push(format!("  error: {warning}"));
    }
    lines.push(format!("- lock directory: {}", lock_dir.display()));
    match session_lock_dir(&locks, &key).holder(&session_lock_name(&key), now) {
        Some(holder) => lines.push(format!("- session {key:?}: in use by {holder}")),
        None => lines.push(format!("- session {key:?}: no host runs it now")),
    }
    lines.extend(broker_lines(&locks, &state_file, now));
    for (level, text) in offline.ui.notes() {
        let label = match level {
            Level::Error => {
                errors += 1;
                "error"
            }
            Level::Warning => "warning",
            Level::Info => "note",
        };
        for (i, line) in text.lines().enumerate() {
            let prefix = if i == 0 {
                format!("  {label}: ")
            } else {
                "    ".into()
            };
            lines.push(format!("{prefix}{line}"));
        }
    }
    if offline.requested.is_empty() {
        lines.push("- transports configured: none (`run` uses this terminal as the chat)".into());
    } else {
        let ids: Vec<&str> = offline.requested.iter().map(|r| r.id.as_str()).collect();
        lines.push(format!(
            "- transports configured: {} (doctor does not start them)",
            ids.join(", ")
        ));
    }
    for line in credential_lines(&offline.requested, env) {
        if line.contains("NOT SET") {
            errors += 1;
        }
        lines.push(line);
    }
    if let Some(diagnostics) = offline.session.diagnostics().await? {
        lines.push(format!(
            "- sandbox: the bridge sees {} environment variable(s) and {} argument(s)",
            diagnostics.sandbox.environment_variables, diagnostics.sandbox.arguments
        ));
    }
    let note = offline.session.local_command("doctor").await?;
    lines.extend(note.text.lines().map(String::from));
    offline.session.shutdown().await?;
    Ok(DoctorReport {
        text: lines.join("\n"),
        errors,
    })
}

/// For each requested platform, whether each credential variable its settings name is
/// set: the first thing to check when a transport does not start. Names only, never values.
fn credential_lines(
    requested: &[TransportRequest],
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut lines = Vec::new();
    for request in requested {
        let Some(platform) = factory::PLATFORMS
            .iter()
            .find(|p| p.settings.id == request.id)
        else {
            continue;
        };
        let settings = factory::settings_object(request);
        for key in platform.settings.env_keys() {
            let Some(name) = settings.get(key.name).and_then(|v| v.as_str()) else {
                continue;
            };
            let set = env(name).is_some_and(|v| !v.trim().is_empty());
            let optional = key.kind == SettingKind::OptionalEnvName;
            lines.push(format!(
                "  {}: ${name} is {}",
                request.id,
                match (set, optional) {
                    (true, _) => "set",
                    // robo_claw runs without its peer token, but anyone may then connect.
                    (false, true) => "not set (optional; without it any client that reaches the port is accepted)",
                    (false, false) => "NOT SET (export it in the shell that runs host-shim)",
                }
            ));
        }
    }
    lines
}

/// The broker's lines for `doctor`: whether one runs for this state directory and which
/// sessions are attached to it.
fn broker_lines(locks: &LockDir, state_file: &std::path::Path, now: u64) -> Vec<String> {
    let Some(holder) = locks.holder(process::BROKER_LOCK, now) else {
        return vec!["- broker (host-shim serve): not running".into()];
    };
    if holder.contains("no longer running") {
        return vec![format!("- broker (host-shim serve): {holder}")];
    }
    let mut lines = vec![format!("- broker (host-shim serve): running ({holder})")];
    match crate::broker::read_status(&crate::broker::status_path_beside(state_file)) {
        Ok(status) if status.sessions.is_empty() => {
            lines.push("  no session is attached".into());
        }
        Ok(status) => {
            for (i, session) in status.sessions.iter().enumerate() {
                lines.push(format!(
                    "  {}. {} — {} (session {:?})",
                    i + 1,
                    session.name,
                    session.cwd,
                    session.key
                ));
            }
        }
        Err(error) => lines.push(format!(
            "  warning: its session list is unreadable: {error}"
        )),
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: &str, token_env: &str) -> TransportRequest {
        TransportRequest {
            id: id.into(),
            required: false,
            settings: vec![crate::wit::session::SettingEntry {
                name: "tokenEnv".into(),
                value: crate::wit::session::SettingValue::Text(token_env.into()),
            }],
        }
    }

    #[test]
    fn an_unset_optional_credential_is_named_as_optional_not_as_missing() {
        let lines = credential_lines(
            &[request("robo_claw", "RC_PEER"), request("telegram", "TG")],
            &|_| None,
        );
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains("$RC_PEER is not set (optional"),
            "{}",
            lines[0]
        );
        assert!(lines[1].contains("$TG is NOT SET"), "{}", lines[1]);
    }
}
