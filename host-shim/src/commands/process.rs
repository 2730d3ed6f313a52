//! What several commands share: where the process's files are, which config files a
//! working directory reads, the broker's lock and control socket (so `attach` can ask a
//! running `serve`), and the stop signal. Kept apart so no command imports another.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;

use crate::disk::config_files::{self, Discovery, Scope};
use crate::disk::paths::Paths;
use crate::sandbox::runtime::EMBEDDED_COMPONENT;
use crate::wit::session::{ConfigContent, ConfigScope, ConfigSource};

/// The lock that keeps a second broker off one state directory.
pub const BROKER_LOCK: &str = "broker";
/// How long `attach` waits for the broker's answer.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);
/// The config files as the bridge takes them.
pub fn config_sources(discovery: &Discovery) -> Vec<ConfigSource> {
    discovery
        .sources
        .iter()
        .map(|s| ConfigSource {
            scope: match s.scope {
                Scope::Global => ConfigScope::Global,
                Scope::Project => ConfigScope::Project,
                Scope::Override => ConfigScope::Override,
            },
            path: s.path.display().to_string(),
            content: match &s.text {
                Ok(text) => ConfigContent::Text(text.clone()),
                Err(why) => ConfigContent::Unreadable(why.clone()),
            },
        })
        .collect()
}

/// The config files for a pi working directory, as the bridge reads them.
pub fn config_sources_in(cwd: &Path) -> anyhow::Result<Vec<ConfigSource>> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let paths = Paths::resolve(&|name| std::env::var(name).ok(), home.as_deref(), cwd)?;
    Ok(config_sources(&config_files::discover(&paths.config)))
}

/// The working directory, the paths the environment gives, and the state directory
/// (sockets, caches and the broker's files live there): what `attach` and `serve` start
/// from.
pub fn process_paths() -> anyhow::Result<(PathBuf, Paths, PathBuf)> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let paths = Paths::resolve(&|name| std::env::var(name).ok(), home.as_deref(), &cwd)?;
    let state_dir = paths
        .state_file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| cwd.clone());
    Ok((cwd, paths, state_dir))
}

/// Resolves on SIGTERM (how a service manager or `kill` stops a process).
pub async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}

/// Where a session key's transports keep their own state: beside the state file.
pub fn transport_state_dir(state_file: &Path) -> Option<PathBuf> {
    state_file.parent().map(Path::to_path_buf)
}

/// Asks a running broker to serve pi session `key`. `None` when no broker listens
/// there; otherwise the broker's `ready` line (to print for the extension) and the
/// connection, which must stay open as long as the session is wanted.
pub async fn ask_broker(
    state_dir: &Path,
    key: &str,
) -> anyhow::Result<Option<(String, UnixStream)>> {
    let Ok(mut stream) =
        UnixStream::connect(crate::disk::paths::control_socket_path(state_dir)).await
    else {
        return Ok(None);
    };
    let mut request = serde_json::json!({"type": "serve", "session": key}).to_string();
    request.push('\n');
    stream
        .write_all(request.as_bytes())
        .await
        .context("the broker (host-shim serve) closed the connection")?;
    let mut reader = BufReader::new(&mut stream);
    let mut line = String::new();
    match tokio::time::timeout(ANSWER_TIMEOUT, reader.read_line(&mut line)).await {
        Ok(Ok(n)) if n > 0 => {}
        Ok(_) => bail!("the broker (host-shim serve) closed the connection without answering"),
        Err(_) => bail!(
            "the broker (host-shim serve) did not answer within {} s; restart it",
            ANSWER_TIMEOUT.as_secs()
        ),
    }
    let answer: serde_json::Value = serde_json::from_str(line.trim())
        .context("the broker (host-shim serve) answered something that is not JSON")?;
    if answer["type"] == "error" {
        bail!(
            "the broker (host-shim serve) refused the session: {}",
            answer["message"].as_str().unwrap_or("no reason given")
        );
    }
    Ok(Some((line, stream)))
}

/// The component to run: the file `--component` names, or the embedded build.
pub fn load_component(path: Option<&Path>) -> anyhow::Result<Vec<u8>> {
    match path {
        Some(path) => std::fs::read(path)
            .with_context(|| format!("cannot read the component {}", path.display())),
        None => Ok(EMBEDDED_COMPONENT.to_vec()),
    }
}

/// What every command needs from the environment.
pub struct Setup {
    /// Where the process's files are.
    pub paths: Paths,
    /// The working directory.
    pub cwd: PathBuf,
    /// The config files found.
    pub discovery: Discovery,
}

/// The paths, working directory and config files of this process.
pub fn setup() -> anyhow::Result<Setup> {
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

/// The session key when none is given: one per working directory.
pub fn default_session_key(cwd: &Path) -> String {
    format!("host-shim:{}", cwd.display())
}

/// `PI_BOT_CONNECT_DEBUG`: log info lines too.
pub fn debug_enabled() -> bool {
    matches!(
        std::env::var("PI_BOT_CONNECT_DEBUG").as_deref(),
        Ok("1") | Ok("true")
    )
}

/// Where compiled code is cached: beside the state file, so `PI_BOT_CONNECT_STATE`
/// moves it too and a test never touches the user's own cache.
pub fn cache_dir(paths: &Paths) -> Option<PathBuf> {
    transport_state_dir(&paths.state_file).map(|dir| dir.join("cache"))
}
