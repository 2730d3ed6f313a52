//! Session benchmarks (docs/architecture.md#performance-budgets): instantiating a session, memory
//! per idle session, and one inbound envelope through the component next to the same guest code
//! called natively. Figures are printed; nothing is asserted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};

mod support;
use guest::bridge::Bridge;
use guest::core::pairing_budget::{BudgetView, FailureOutcome};
use guest::host::Host;
use guest::model;
use host_shim::agent::IdleAgent;
use host_shim::disk::lock::LockDir;
use host_shim::disk::state_file::StateFile;
use host_shim::local::clock::SystemClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::imports::{SessionContext, SessionHost};
use host_shim::sandbox::runtime::{EMBEDDED_COMPONENT, Instance, Limits, Runtime};
use host_shim::transcript::Transcript;
use host_shim::transcript::file::Rotation;
use host_shim::wit::session::{ConfigContent, ConfigScope, ConfigSource};
use host_shim::wit::types;
use support::resident_kib;
use transport_core::Transport;
use transport_testing::fake::FakeTransport;

/// Pre-trusts the sender, so the envelope is a prompt (the common case once paired).
const CONFIG: &str =
    r#"{"bridge": {"allowUsers": ["fake:user-1"], "rateLimit": {"promptsPerMinute": 0}}}"#;
/// Sessions held at once for the memory figure.
const IDLE_SESSIONS: usize = 500;

struct Bench {
    runtime: Arc<Runtime>,
    tokio: tokio::runtime::Runtime,
    state: Arc<Mutex<StateFile>>,
    fake: Arc<dyn Transport>,
    inbound: transport_core::InboundSink,
    _inbound_rx: transport_core::InboundStream,
    dir: tempfile::TempDir,
}

fn setup() -> Bench {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Room in the pool for every idle session the memory figure holds.
    let limits = Limits {
        max_instances: IDLE_SESSIONS as u32 + 8,
        ..Limits::default()
    };
    let runtime = Arc::new(Runtime::new(EMBEDDED_COMPONENT, limits).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let (state, _) = StateFile::open(&dir.path().join("state.json"), 0).unwrap();
    let (inbound, inbound_rx) = transport_core::inbound::channel(16);
    Bench {
        runtime,
        tokio,
        state: Arc::new(Mutex::new(state)),
        fake: Arc::new(FakeTransport::default()),
        inbound,
        _inbound_rx: inbound_rx,
        dir,
    }
}

impl Bench {
    /// A session's host state, as `Session::spawn` builds it.
    fn ctx(&self) -> SessionContext {
        SessionContext {
            key: "bench".into(),
            transports: BTreeMap::from([("fake".to_string(), self.fake.clone())]),
            inbound: self.inbound.clone(),
            agent: Arc::new(IdleAgent),
            ui: Arc::new(RecordingUi::default()),
            state: self.state.clone(),
            locks: LockDir::new(self.dir.path().join("locks")),
            pairing: host_shim::sandbox::pairing_budget::PairingBudget::default(),
            clock: Arc::new(SystemClock),
            log: Arc::new(MemoryLog::default()),
            held_locks: HashMap::new(),
            listening: Vec::new(),
            tick_at: None,
            parked: HashMap::new(),
            transcript: None,
            script: None,
        }
    }
}

fn sources() -> Vec<ConfigSource> {
    vec![ConfigSource {
        scope: ConfigScope::Project,
        path: "bench.json".into(),
        content: ConfigContent::Text(CONFIG.into()),
    }]
}

impl Bench {
    async fn started_instance(&self) -> Instance {
        let mut instance = self
            .runtime
            .instantiate(SessionHost::new(self.ctx()))
            .await
            .unwrap();
        let session = instance.bridge.pi_bot_connect_session();
        session
            .call_configure(
                &mut instance.store,
                &sources(),
                &host_shim::factory::declarations(),
            )
            .await
            .unwrap();
        session
            .call_start(&mut instance.store, &["fake".to_string()])
            .await
            .unwrap();
        instance
    }
}

fn envelope() -> types::Envelope {
    types::Envelope {
        transport: "fake".into(),
        conversation_id: "conv-1".into(),
        user_id: "user-1".into(),
        thread_id: None,
        timestamp_ms: 0,
        text: "please run the tests and tell me what failed".into(),
        is_direct: true,
        addressed: true,
        attachments: Vec::new(),
    }
}

/// The same bridge code, natively, with a host that does what the component's host
/// does minus the I/O: the baseline for the component's overhead.
struct NativeHost;

impl Host for NativeHost {
    fn identify(&mut self, _: &str) -> Result<model::BotIdentity, String> {
        Ok(model::BotIdentity {
            bot_id: "fake-bot".into(),
            bot_name: "fake bot".into(),
            capabilities: model::Capabilities {
                threads: false,
                edit: false,
                attachments: true,
                typing: true,
                max_message_length: 4000,
                length_unit: model::LengthUnit::Chars,
                markup: model::Markup::Markdown,
            },
            lock_name: None,
        })
    }
    fn listen(&mut self, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn resolve_tool_call(&mut self, _: &str, _: &model::ToolDecision) {}
    fn send(&mut self, _: &model::Outbound) -> Result<model::Receipt, model::SendError> {
        Ok(model::Receipt {
            message_id: "m".into(),
            edit_key: None,
        })
    }
    fn typing(&mut self, _: &str, _: &str, _: Option<&str>) {}
    fn fetch_attachment(
        &mut self,
        _: &str,
        _: &str,
        _: u64,
    ) -> Result<model::FetchedAttachment, String> {
        Err("none".into())
    }
    fn diagnose(&mut self, _: &str) -> String {
        String::new()
    }
    fn send_prompt(
        &mut self,
        _: &str,
        _: model::DeliverAs,
        _: &[model::PromptImage],
    ) -> Result<(), String> {
        Ok(())
    }
    fn abort(&mut self) {}
    fn is_idle(&mut self) -> bool {
        true
    }
    fn session_info(&mut self) -> model::SessionInfo {
        model::SessionInfo {
            id: "bench".into(),
            name: None,
            cwd: "/bench".into(),
            accepts_images: false,
        }
    }
    fn confirm(&mut self, _: &str, _: &str) -> bool {
        false
    }
    fn work_snapshot(&mut self) -> model::WorkFacts {
        model::WorkFacts::default()
    }
    fn notify(&mut self, _: model::Level, _: &str) {}
    fn load_state(&mut self) -> Option<String> {
        None
    }
    fn save_state(&mut self, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn now_ms(&mut self) -> u64 {
        1_700_000_000_000
    }
    fn request_tick(&mut self, _: u64) {}
    fn random_bytes(&mut self, len: u32) -> Vec<u8> {
        vec![7; len as usize]
    }
    fn acquire_lock(&mut self, _: &str, _: u64) -> Result<(), String> {
        Ok(())
    }
    fn release_lock(&mut self, _: &str) {}
    // The benchmarked prompts come from a paired sender: the budget is never asked.
    fn pairing_closed_since(&mut self) -> Option<u64> {
        None
    }
    fn pairing_record_failure(&mut self, _: u64, _: u32) -> FailureOutcome {
        FailureOutcome::Counted
    }
    fn pairing_refused_unjudged(&mut self) {}
    fn pairing_reopen(&mut self) {}
    fn pairing_view(&mut self, _: u64) -> BudgetView {
        BudgetView::default()
    }
    fn log(&mut self, _: model::Level, _: &str, _: &[(&str, String)]) {}
}

fn native_envelope() -> model::Envelope {
    let e = envelope();
    model::Envelope {
        transport: e.transport,
        conversation_id: e.conversation_id,
        user_id: e.user_id,
        thread_id: None,
        timestamp_ms: 0,
        text: e.text,
        is_direct: true,
        addressed: true,
        attachments: Vec::new(),
    }
}

fn bench_sessions(c: &mut Criterion) {
    let bench = setup();

    c.bench_function("instantiate a session (fresh store + instance)", |b| {
        b.iter(|| {
            bench
                .tokio
                .block_on(bench.runtime.instantiate(SessionHost::new(bench.ctx())))
                .unwrap()
        })
    });

    c.bench_function("instantiate + configure + start a session", |b| {
        b.iter(|| bench.tokio.block_on(bench.started_instance()))
    });

    let mut instance = bench.tokio.block_on(bench.started_instance());
    let wit_envelope = envelope();
    let mut group = c.benchmark_group("inbound envelope (prompt from a trusted identity)");
    group.bench_function("through the component", |b| {
        b.iter(|| {
            bench.tokio.block_on(async {
                let fuel = instance.store.data().call_fuel;
                instance.store.set_fuel(fuel).unwrap();
                let session = instance.bridge.pi_bot_connect_session();
                session
                    .call_on_envelope(&mut instance.store, &wit_envelope)
                    .await
                    .unwrap()
            })
        })
    });
    // The same envelope into the same session with a transcript file on (opt-in): what
    // recording costs. (A second started instance would find the fake transport's lock
    // taken and measure the "transport not running" path instead.)
    let transcript_dir = tempfile::tempdir().unwrap();
    instance.store.data_mut().ctx.transcript = Some(
        Transcript::create(transcript_dir.path(), "bench", "", Rotation::default(), 0).unwrap(),
    );
    group.bench_function("through the component, with a transcript file", |b| {
        b.iter(|| {
            bench.tokio.block_on(async {
                let fuel = instance.store.data().call_fuel;
                instance.store.set_fuel(fuel).unwrap();
                let session = instance.bridge.pi_bot_connect_session();
                session
                    .call_on_envelope(&mut instance.store, &wit_envelope)
                    .await
                    .unwrap()
            })
        })
    });
    let written = std::fs::read_dir(transcript_dir.path())
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .collect::<String>();
    let sample: Vec<&str> = written.lines().rev().take(4).collect();
    println!(
        "transcript: {} lines; the last: {sample:#?}",
        written.lines().count()
    );
    let mut native = Bridge::new();
    let mut host = NativeHost;
    let sources = vec![model::ConfigSource {
        scope: model::ConfigScope::Project,
        path: "bench.json".into(),
        content: model::ConfigContent::Text(CONFIG.into()),
    }];
    native.configure(&mut host, &sources, &[]);
    native.start(&mut host, &["fake".to_string()]);
    let native_envelope = native_envelope();
    group.bench_function("native (same guest code)", |b| {
        b.iter(|| native.on_envelope(&mut host, native_envelope.clone()))
    });
    group.finish();
}

/// Memory per idle, started session: N instances held at once, RSS before and after.
fn report_memory() {
    let bench = setup();
    let before = resident_kib();
    let started = Instant::now();
    let instances: Vec<Instance> = (0..IDLE_SESSIONS)
        .map(|_| bench.tokio.block_on(bench.started_instance()))
        .collect();
    let elapsed = started.elapsed();
    let after = resident_kib();
    println!(
        "memory per idle session: {:.1} KiB ({} sessions held, RSS {} KiB -> {} KiB; created in {:.1?}, {:.1?} each)",
        (after.saturating_sub(before)) as f64 / IDLE_SESSIONS as f64,
        IDLE_SESSIONS,
        before,
        after,
        elapsed,
        elapsed / IDLE_SESSIONS as u32,
    );
    drop(instances);
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = bench_sessions
}

fn main() {
    report_memory();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
