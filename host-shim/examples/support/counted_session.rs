//! The session the counting examples (`wake_count`, `reply_count`) drive: one bridge
//! instance with the hibernation bench's config, the fake bot, the real state database,
//! and the fuel (wasm operators) each call burns. Counted rather than timed: wall figures
//! on a shared machine swing with the other workers' load, counts do not.
#![allow(dead_code)] // each example uses a different part

use std::path::PathBuf;
use std::sync::Arc;

use host_shim::agent::NamedIdleAgent;
use host_shim::disk::lock::LockDir;
use host_shim::disk::state_db::StateDb;
use host_shim::local::clock::ManualClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::imports::{Given, SessionContext};
use host_shim::sandbox::runtime::{EMBEDDED_COMPONENT, Instance, Limits, Runtime};
use host_shim::wit::session::{ConfigContent, ConfigScope, ConfigSource};
use host_shim::wit::types;
use transport_core::Transport;
use transport_core::inbound::InboundStream;
use transport_testing::fake::FakeTransport;

/// The hibernation bench's session: the writer trusted by config, rate limits off, so
/// every `/status` is answered.
pub const CONFIG: &str = r#"{"bridge": {"allowUsers": ["fake:user-1"],
  "rateLimit": {"promptsPerMinute": 0, "commandsPerMinute": 0}},
  "transports": {"terminal": {"enabled": true}}}"#;

pub fn sources() -> Vec<ConfigSource> {
    vec![ConfigSource {
        scope: ConfigScope::Global,
        path: "bench.json".into(),
        content: ConfigContent::Text(CONFIG.into()),
    }]
}

pub fn status() -> types::Envelope {
    types::Envelope {
        transport: "fake".into(),
        conversation_id: "conv-1".into(),
        user_id: "user-1".into(),
        thread_id: None,
        timestamp_ms: 0,
        text: "/status".into(),
        is_direct: true,
        addressed: true,
        attachments: Vec::new(),
        press: None,
        message_id: Some("501".into()),
    }
}

/// What the session keeps while it sleeps, as `Session::spawn` builds it.
pub fn context(
    dir: &std::path::Path,
    state: Arc<StateDb>,
    fake: Arc<dyn Transport>,
    inbound: transport_core::InboundSink,
) -> SessionContext {
    SessionContext {
        transports: std::iter::once(fake).collect(),
        ..SessionContext::new(Given {
            key: "wake".into(),
            inbound,
            agent: Arc::new(NamedIdleAgent::new("s0")),
            ui: Arc::new(RecordingUi::default()),
            state,
            locks: LockDir::new(dir.join("locks")),
            pairing: host_shim::sandbox::pairing_budget::PairingBudget::default(),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            log: Arc::new(MemoryLog::default()),
        })
    }
}

/// Fuel (wasm operators) that `instance` burnt since its tank was last filled, and a full
/// tank for the next call.
pub fn burnt(instance: &mut Instance) -> u64 {
    let full = instance.store.data().call_fuel;
    let left = instance.store.get_fuel().expect("fuel is on");
    instance.store.set_fuel(full).expect("fuel is on");
    full - left
}

pub async fn configure(instance: &mut Instance) -> u64 {
    let session = instance.bridge.pi_bot_connect_session();
    session
        .call_configure(
            &mut instance.store,
            &sources(),
            &host_shim::factory::declarations(),
        )
        .await
        .expect("configure");
    burnt(instance)
}

pub async fn start(instance: &mut Instance) -> u64 {
    let session = instance.bridge.pi_bot_connect_session();
    let notes = session
        .call_start(&mut instance.store, &["fake".to_string()])
        .await
        .expect("start");
    assert!(notes.is_empty(), "the fake bot did not start: {notes:?}");
    burnt(instance)
}

/// The bridge to count: the embedded one, or another build named by `COUNT_COMPONENT`
/// (`COUNT_COMPONENT=guest.wasm`), counted beside it without rebuilding the host. Its
/// compiled code is cached in `target/count-cache` (or `COUNT_CACHE`): run an example once
/// before counting it under valgrind.
pub fn runtime() -> Runtime {
    let cache = std::env::var_os("COUNT_CACHE").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/count-cache"),
        PathBuf::from,
    );
    let component = std::env::var_os("COUNT_COMPONENT")
        .map(|path| std::fs::read(&path).expect("COUNT_COMPONENT is readable"));
    let component = component.as_deref().unwrap_or(EMBEDDED_COMPONENT);
    Runtime::load(component, Limits::default(), Some(&cache)).expect("component")
}

/// What a counting example drives: the bridge ([`runtime`]), the fake bot, the state
/// database in a directory of its own, and the context the first instance takes.
pub struct Counted {
    /// Runs the calls.
    pub tokio: tokio::runtime::Runtime,
    /// The bridge.
    pub runtime: Runtime,
    /// The bot's platform side: what the session sent is read here.
    pub fake: FakeTransport,
    /// The session's context, for its first instance.
    pub ctx: SessionContext,
    /// Holds the state database and the locks.
    _dir: tempfile::TempDir,
    /// Kept open: a closed inbound channel would fail the fake bot's start.
    _inbound: InboundStream,
}

/// A session's world, nothing run in it yet.
pub fn counted() -> Counted {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let dir = tempfile::tempdir().expect("tempdir");
    let (state, _) = StateDb::open(&dir.path().join("state.json"), 0).expect("state");
    let fake = FakeTransport::default();
    let (inbound, stream) = transport_core::inbound::channel(16);
    let ctx = context(
        dir.path(),
        Arc::new(state),
        Arc::new(fake.handle()),
        inbound,
    );
    Counted {
        tokio,
        runtime: runtime(),
        fake,
        ctx,
        _dir: dir,
        _inbound: stream,
    }
}
