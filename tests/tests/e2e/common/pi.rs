//! The real pi coding agent for end-to-end tests, offline.
//!
//! [`require_pi`] installs the pinned npm package once into a cache folder (under
//! `target/tmp`, or `$BOT_CONNECT_PI_CACHE`), never touching the user's `~/.pi`. When node,
//! npm or the install is unavailable the test is skipped with the reason written to the
//! real stderr (libtest does not capture direct writes), unless `BOT_CONNECT_REQUIRE_PI=1`
//! makes that a failure (for CI machines that must run these tests).
//!
//! [`PiHome`] is a throw-away agent directory (models.json naming the fake model, retries
//! off) and [`PiProcess`] runs `pi --mode rpc` in it and reads its JSON lines.
#![allow(dead_code)] // each test module uses a different part of this module

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{Notify, OnceCell};

use super::npm::{self, output};

/// The pi release these tests are pinned to.
pub const PI_VERSION: &str = "0.73.1";
const PI_PACKAGE: &str = "@mariozechner/pi-coding-agent";
/// An install that takes longer than this counts as unavailable.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);
/// Any wait on pi in these tests; its start alone took up to 5 s on a busy 2-core box.
pub const PI_WAIT: Duration = Duration::from_secs(60);

/// The bot-connect extension in this repository.
pub fn extension_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/pi-extension/index.ts")
}

fn cache_dir() -> PathBuf {
    match std::env::var_os("BOT_CONNECT_PI_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pi-{PI_VERSION}")),
    }
}

async fn install() -> Result<PathBuf, String> {
    let dir = cache_dir();
    let bin = dir.join("node_modules/.bin/pi");
    let spec = format!("{PI_PACKAGE}@{PI_VERSION}");
    if bin.exists() && npm::installed(&dir, &spec) {
        return Ok(bin);
    }
    let here = std::env::temp_dir();
    let node = output("node", &["--version"], &here, Duration::from_secs(30)).await?;
    let (major, minor) =
        parse_node_version(&node).ok_or(format!("cannot read node's version {node:?}"))?;
    if (major, minor) < (20, 6) {
        return Err(format!("pi {PI_VERSION} needs node >= 20.6, found {node}"));
    }
    npm::install(&dir, &spec, INSTALL_TIMEOUT).await?;
    Ok(bin)
}

/// `v20.20.2` → `(20, 20)`.
pub fn parse_node_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.trim().trim_start_matches('v').split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The pi executable, or `None` after printing why this test is skipped.
pub async fn require_pi(test: &str) -> Option<PathBuf> {
    static PI: OnceCell<Result<PathBuf, String>> = OnceCell::const_new();
    match PI.get_or_init(install).await {
        Ok(bin) => Some(bin.clone()),
        Err(why) => {
            if std::env::var("BOT_CONNECT_REQUIRE_PI").as_deref() == Ok("1") {
                panic!(
                    "{test}: the real pi is required (BOT_CONNECT_REQUIRE_PI=1) but unavailable: {why}"
                );
            }
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: the real pi is unavailable: {why}"
            );
            None
        }
    }
}

/// A throw-away pi home: agent dir, HOME and a working directory, nothing of `~/.pi`.
pub struct PiHome {
    pub dir: tempfile::TempDir,
}

impl PiHome {
    /// A home whose pi talks to the model at `base_url` (none: no provider configured).
    pub fn new(base_url: Option<&str>) -> PiHome {
        PiHome::with_settings(base_url, r#"{"retry":{"enabled":false}}"#)
    }

    /// A home whose pi retries a failed model call at once (pi's automatic retry after an
    /// overload, as a provider's bad minute makes it), up to twice.
    pub fn with_retries(base_url: Option<&str>) -> PiHome {
        PiHome::with_settings(
            base_url,
            r#"{"retry":{"enabled":true,"maxRetries":2,"baseDelayMs":1}}"#,
        )
    }

    fn with_settings(base_url: Option<&str>, settings: &str) -> PiHome {
        let dir = tempfile::tempdir().expect("temp dir");
        for sub in ["agent", "home", "work"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("pi home dirs");
        }
        if let Some(base_url) = base_url {
            let models = json!({"providers": {"fake": {
                "baseUrl": base_url, "api": "openai-completions", "apiKey": "fake-key",
                "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
                // Two models, so a test can switch (`/model`) and see the next request name
                // the other one.
                "models": [{"id": "fake-model", "name": "Fake Model", "reasoning": false,
                    "contextWindow": 32000, "maxTokens": 1024},
                    {"id": "fake-model-2", "name": "Fake Model 2", "reasoning": false,
                    "contextWindow": 64000, "maxTokens": 1024}],
            }}});
            std::fs::write(dir.path().join("agent/models.json"), models.to_string())
                .expect("models.json");
        }
        // By default a failed call must end the run: a retry would start another one after
        // agent_end.
        std::fs::write(dir.path().join("agent/settings.json"), settings).expect("settings.json");
        PiHome { dir }
    }

    /// pi's working directory.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// The variables that keep pi inside this home.
    pub fn env(&self) -> Vec<(String, String)> {
        let path = |sub: &str| self.dir.path().join(sub).display().to_string();
        vec![
            ("HOME".into(), path("home")),
            ("PI_CODING_AGENT_DIR".into(), path("agent")),
            ("PI_OFFLINE".into(), "1".into()),
        ]
    }

    /// Flags for a hermetic pi: the fake model, no session file, nothing discovered.
    pub fn args(&self) -> Vec<String> {
        [
            "--no-session",
            "--provider",
            "fake",
            "--model",
            "fake-model",
            "-ne",
            "-nc",
            "-ns",
            "-np",
            "--no-themes",
            "--offline",
            // pi's read-only tools too (off by default), so a test can search as a model would.
            "--tools",
            "read,bash,edit,write,grep,find,ls",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

#[derive(Default)]
struct Lines {
    lines: Vec<Value>,
    closed: bool,
}

/// `pi --mode rpc`, driven by a test.
pub struct PiProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Arc<Mutex<Lines>>,
    changed: Arc<Notify>,
    next_id: u64,
}

impl PiProcess {
    /// Starts pi with `args` (after `--mode rpc`) and `env`, in `cwd`; waits until it
    /// answers (pi has no ready event).
    pub async fn start(
        bin: &Path,
        cwd: &Path,
        args: &[String],
        env: &[(String, String)],
    ) -> PiProcess {
        let mut command = Command::new(bin);
        command.arg("--mode").arg("rpc").args(args).current_dir(cwd);
        // Nothing of the person running the tests may steer these processes.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy().into_owned();
            if key.starts_with("PI_") {
                command.env_remove(&key);
            }
        }
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("pi starts");
        let stdout = child.stdout.take().expect("pi stdout");
        let lines = Arc::new(Mutex::new(Lines::default()));
        let changed = Arc::new(Notify::new());
        let (reader_lines, reader_changed) = (lines.clone(), changed.clone());
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stdout);
            while let Ok(Some(record)) =
                host_shim::pi::json_lines::next_record(&mut reader, 64 << 20).await
            {
                if let host_shim::pi::json_lines::Record::Line(line) = record
                    && let Ok(value) = serde_json::from_str::<Value>(&line)
                {
                    reader_lines
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .lines
                        .push(value);
                    reader_changed.notify_waiters();
                }
            }
            reader_lines
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .closed = true;
            reader_changed.notify_waiters();
        });
        let mut pi = PiProcess {
            stdin: child.stdin.take(),
            child,
            lines,
            changed,
            next_id: 1,
        };
        pi.request(json!({"type": "get_state"})).await;
        pi
    }

    /// Writes one command.
    pub async fn send(&mut self, command: Value) {
        let stdin = self.stdin.as_mut().expect("pi's stdin is open");
        stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .expect("write to pi");
        stdin.flush().await.expect("flush to pi");
    }

    /// Sends a command with an id and returns pi's response to it.
    pub async fn request(&mut self, mut command: Value) -> Value {
        let id = format!("t{}", self.next_id);
        self.next_id += 1;
        command["id"] = json!(id);
        self.send(command).await;
        self.wait_for(&format!("response {id}"), |v| {
            v["type"] == "response" && v["id"] == json!(id)
        })
        .await
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<Value> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lines
            .clone()
    }

    /// Waits for a line matching `matches` (among all lines so far), or fails the test.
    pub async fn wait_for(&self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + PI_WAIT;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(found) = lines.lines.iter().find(|v| matches(v)) {
                    return found.clone();
                }
                if lines.closed {
                    panic!(
                        "pi exited while waiting for {what}; lines: {:#?}",
                        tail(&lines.lines)
                    );
                }
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!(
                    "pi: no {what} in time; last lines: {:#?}",
                    tail(&self.lines())
                );
            }
        }
    }

    /// Waits until `n` lines match `matches`; returns the `n`th.
    pub async fn wait_for_nth(
        &self,
        what: &str,
        n: usize,
        matches: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + PI_WAIT;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(found) = lines.lines.iter().filter(|v| matches(v)).nth(n - 1) {
                    return found.clone();
                }
                if lines.closed {
                    panic!(
                        "pi exited while waiting for {what}; lines: {:#?}",
                        tail(&lines.lines)
                    );
                }
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!(
                    "pi: no {what} in time; last lines: {:#?}",
                    tail(&self.lines())
                );
            }
        }
    }

    /// Waits for a notification from an extension whose text contains `text`.
    pub async fn notified(&self, text: &str) -> Value {
        self.wait_for(&format!("a notification containing {text:?}"), |v| {
            v["type"] == "extension_ui_request"
                && v["method"] == "notify"
                && v["message"].as_str().is_some_and(|m| m.contains(text))
        })
        .await
    }

    /// True while pi runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// Closes pi's stdin (pi exits within about a second) and waits for it.
    pub async fn close(mut self) {
        drop(self.stdin.take());
        if tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

fn tail(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .rev()
        .take(25)
        .rev()
        .map(|v| {
            let text = v.to_string();
            text.chars().take(300).collect()
        })
        .collect()
}

/// A link socket in `dir`, bound: the directory is made private first, since `attach`
/// refuses one others can enter (a user's state directory is private).
pub async fn private_link_socket(dir: &Path) -> (PathBuf, tokio::net::UnixListener) {
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod the link's directory");
    let socket = dir.join("link.sock");
    let host_shim::pi::attach::Bound::Listening(listener) =
        host_shim::pi::attach::bind(&socket).await.expect("bind")
    else {
        panic!("a fresh socket is free");
    };
    (socket, listener)
}

/// Starts pi with `args` in `home`, its extension pointed at `socket`, and waits until the
/// extension has linked (`connected`, from the link's `connected()`).
pub async fn start_linked(
    bin: &Path,
    home: &PiHome,
    args: &[String],
    socket: &Path,
    extra_env: &[(String, String)],
    mut connected: tokio::sync::watch::Receiver<bool>,
) -> PiProcess {
    let mut env = home.env();
    env.push(("PI_BOT_CONNECT_SOCKET".into(), socket.display().to_string()));
    env.extend(extra_env.iter().cloned());
    let pi = PiProcess::start(bin, &home.work(), args, &env).await;
    tokio::time::timeout(super::WAIT, connected.wait_for(|up| *up))
        .await
        .expect("the extension links to the host in time")
        .expect("link alive");
    pi
}
