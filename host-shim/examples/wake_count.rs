//! What a hibernated session's wake costs, counted rather than timed
//! (docs/scaling.md#idle-sessions): wall figures on a shared machine swing with the other
//! workers' load, counts do not.
//!
//! A wake is what `Actor::wake` does: a fresh instance from the pool for the session's kept
//! context, `configure` and `start` again, then the envelope that woke it. This does that
//! `N` times (`wake N`), or sends the same envelope `N` times to one live instance (`live
//! N`), and prints each phase's guest work in fuel (wasm operators, deterministic) for the
//! last round. For the host's share as well, run it under
//! `valgrind --tool=cachegrind --cache-sim=no` for two values of `N`: the difference in
//! instructions over the difference in `N` is one round, the component's load and the first
//! round's one-time costs cancelling out; a wake's extra is a `wake` round less a `live` one.
//!
//! `cargo build --release -p host-shim --example wake_count`, then
//! `target/release/examples/wake_count wake 5` once to fill the compiled-code cache (in
//! `target/wake-count-cache`, or the directory in `WAKE_COUNT_CACHE`), then under valgrind.
//! `WAKE_COUNT_COMPONENT=path/guest.wasm` counts another build of the bridge.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use host_shim::agent::{Agent, IdleAgent, RecentWork, SignalSender};
use host_shim::disk::lock::LockDir;
use host_shim::disk::state_db::StateDb;
use host_shim::local::clock::ManualClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::imports::{SessionContext, SessionHost};
use host_shim::sandbox::runtime::{EMBEDDED_COMPONENT, Instance, Limits, Runtime};
use host_shim::wit::agent::{DeliverAs, PromptImage, SessionInfo};
use host_shim::wit::session::{ConfigContent, ConfigScope, ConfigSource};
use host_shim::wit::types;
use transport_core::Transport;
use transport_testing::fake::FakeTransport;

/// The hibernation bench's session: the writer trusted by config, rate limits off, so
/// every `/status` is answered.
const CONFIG: &str = r#"{"bridge": {"allowUsers": ["fake:user-1"],
  "rateLimit": {"promptsPerMinute": 0, "commandsPerMinute": 0}},
  "transports": {"terminal": {"enabled": true}}}"#;

/// An idle agent with a name, so `/status` says which session answered.
struct NamedAgent;

#[async_trait::async_trait]
impl Agent for NamedAgent {
    fn attach(&self, signals: SignalSender) {
        IdleAgent.attach(signals);
    }
    async fn send_prompt(
        &self,
        _: String,
        _: DeliverAs,
        _: Vec<PromptImage>,
    ) -> Result<(), String> {
        Ok(())
    }
    fn abort(&self) {}
    fn is_idle(&self) -> bool {
        true
    }
    fn session_info(&self) -> SessionInfo {
        SessionInfo {
            name: Some("s0".into()),
            ..IdleAgent.session_info()
        }
    }
    fn recent_work(&self) -> RecentWork {
        RecentWork::default()
    }
}

fn sources() -> Vec<ConfigSource> {
    vec![ConfigSource {
        scope: ConfigScope::Global,
        path: "bench.json".into(),
        content: ConfigContent::Text(CONFIG.into()),
    }]
}

fn status() -> types::Envelope {
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

/// Fuel (wasm operators) each phase of one round burnt.
#[derive(Debug, Default)]
struct Round {
    instantiate: u64,
    configure: u64,
    start: u64,
    envelope: u64,
}

/// What the session keeps while it sleeps, as `Session::spawn` builds it.
fn context(
    dir: &std::path::Path,
    state: Arc<StateDb>,
    fake: Arc<dyn Transport>,
    inbound: transport_core::InboundSink,
) -> SessionContext {
    SessionContext {
        key: "wake".into(),
        transports: std::iter::once(fake).collect(),
        inbound,
        agent: Arc::new(NamedAgent),
        ui: Arc::new(RecordingUi::default()),
        state,
        locks: LockDir::new(dir.join("locks")),
        pairing: host_shim::sandbox::pairing_budget::PairingBudget::default(),
        clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        log: Arc::new(MemoryLog::default()),
        held_locks: Vec::new(),
        listening: Vec::new(),
        tick_at: None,
        parked: HashMap::new(),
        questions: HashMap::new(),
        transcript: None,
        script: None,
    }
}

/// Fuel (wasm operators) that `instance` burnt since its tank was last filled, and a full
/// tank for the next call.
fn burnt(instance: &mut Instance) -> u64 {
    let full = instance.store.data().call_fuel;
    let left = instance.store.get_fuel().expect("fuel is on");
    instance.store.set_fuel(full).expect("fuel is on");
    full - left
}

async fn configure(instance: &mut Instance) -> u64 {
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

async fn start(instance: &mut Instance) -> u64 {
    let session = instance.bridge.pi_bot_connect_session();
    let notes = session
        .call_start(&mut instance.store, &["fake".to_string()])
        .await
        .expect("start");
    assert!(notes.is_empty(), "the fake bot did not start: {notes:?}");
    burnt(instance)
}

async fn envelope(instance: &mut Instance, fake: &FakeTransport) -> u64 {
    drop(fake.take_records());
    let session = instance.bridge.pi_bot_connect_session();
    session
        .call_on_envelope(&mut instance.store, &status())
        .await
        .expect("envelope");
    // A count of an early return would say nothing: the session must have answered.
    let answered = fake.sent();
    assert!(
        answered
            .iter()
            .any(|sent| sent.message.text.contains("- session: s0\n")),
        "/status was not answered by the session: {answered:?}"
    );
    burnt(instance)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "wake".into());
    let rounds: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(5);
    let cache = std::env::var_os("WAKE_COUNT_CACHE").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/wake-count-cache"),
        PathBuf::from,
    );
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    // Another build of the bridge (`WAKE_COUNT_COMPONENT=guest.wasm`) is counted beside
    // the embedded one without rebuilding the host.
    let component = std::env::var_os("WAKE_COUNT_COMPONENT")
        .map(|path| std::fs::read(&path).expect("WAKE_COUNT_COMPONENT is readable"));
    let component = component.as_deref().unwrap_or(EMBEDDED_COMPONENT);
    let runtime = Runtime::load(component, Limits::default(), Some(&cache)).expect("component");
    let dir = tempfile::tempdir().expect("tempdir");
    let (state, _) = StateDb::open(&dir.path().join("state.json"), 0).expect("state");
    let state = Arc::new(state);
    let fake = FakeTransport::default();
    let (inbound, _inbound_rx) = transport_core::inbound::channel(16);
    let mut ctx = context(dir.path(), state, Arc::new(fake.handle()), inbound);
    let mut last = Round::default();
    tokio.block_on(async {
        match mode.as_str() {
            "wake" => {
                for _ in 0..rounds {
                    let mut instance = runtime
                        .instantiate(SessionHost::new(ctx))
                        .await
                        .expect("instance");
                    last.instantiate = burnt(&mut instance);
                    last.configure = configure(&mut instance).await;
                    last.start = start(&mut instance).await;
                    last.envelope = envelope(&mut instance, &fake).await;
                    // Hibernated: the store goes, the context stays for the next wake.
                    ctx = instance.store.into_data().into_context();
                }
            }
            "live" => {
                let mut instance = runtime
                    .instantiate(SessionHost::new(ctx))
                    .await
                    .expect("instance");
                burnt(&mut instance);
                configure(&mut instance).await;
                start(&mut instance).await;
                for _ in 0..rounds {
                    last.envelope = envelope(&mut instance, &fake).await;
                }
            }
            other => panic!("unknown mode {other:?}: `wake N` or `live N`"),
        }
    });
    println!(
        "{mode} x{rounds}, the last round's guest work in fuel (wasm operators): instantiate \
         {}, configure {}, start {}, /status {}; in all {}",
        last.instantiate,
        last.configure,
        last.start,
        last.envelope,
        last.instantiate + last.configure + last.start + last.envelope
    );
}
