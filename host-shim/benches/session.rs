//! Session benchmarks (docs/architecture.md#performance-budgets): instantiating a session, memory
//! per idle session, and one prompt's whole cycle (the envelope, its turn starting and settling)
//! through the component next to the same guest code called natively, on the real state
//! database. Every run checks that the work happened: each measured prompt reached the agent
//! (an earlier version measured an early return: the shared fake transport was left started
//! by an earlier benchmark, so the measured session's transport never ran).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};

mod support;
use guest::bridge::Bridge;
use guest::core::pairing_budget::{BudgetView, FailureOutcome};
use guest::host::Host;
use guest::model;
use host_shim::agent::{Agent, IdleAgent, RecentWork, SignalSender};
use host_shim::disk::lock::LockDir;
use host_shim::disk::state_db::StateDb;
use host_shim::local::clock::SystemClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::imports::{Given, SessionContext, SessionHost};
use host_shim::sandbox::runtime::{EMBEDDED_COMPONENT, Instance, Limits, Runtime};
use host_shim::wit::session::{ConfigContent, ConfigScope, ConfigSource};
use host_shim::wit::types;
use support::heap::{COUNTING, HELD, PEAK};
use support::{private_kib, proportional_kib, resident_kib};
use transport_core::Transport;
use transport_testing::fake::FakeTransport;

/// Pre-trusts the sender, so the envelope is a prompt (the common case once paired). It is the
/// user's own (global) file: a project file may not trust anyone, and an earlier version of
/// this benchmark, reading it as a project file, measured a stranger being told to pair.
const CONFIG: &str =
    r#"{"bridge": {"allowUsers": ["fake:user-1"], "rateLimit": {"promptsPerMinute": 0}}}"#;
/// Sessions held at once for the memory figure.
const IDLE_SESSIONS: usize = 500;

struct Bench {
    runtime: Arc<Runtime>,
    tokio: tokio::runtime::Runtime,
    state: Arc<StateDb>,
    /// Prompts the agent took: the proof that a measured envelope did its work.
    agent: Arc<CountingAgent>,
    fake: Arc<dyn Transport>,
    /// The same fake, to read what the bridge sent.
    fake_handle: FakeTransport,
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
    let (state, _) = StateDb::open(&dir.path().join("state.json"), 0).unwrap();
    let (inbound, inbound_rx) = transport_core::inbound::channel(16);
    let fake = FakeTransport::default();
    Bench {
        runtime,
        tokio,
        state: Arc::new(state),
        agent: Arc::new(CountingAgent::default()),
        fake: Arc::new(fake.handle()),
        fake_handle: fake,
        inbound,
        _inbound_rx: inbound_rx,
        dir,
    }
}

impl Bench {
    /// A session's host state, as `Session::spawn` builds it.
    fn ctx(&self) -> SessionContext {
        SessionContext {
            transports: std::iter::once(self.fake.clone()).collect(),
            ..SessionContext::new(Given {
                key: "bench".into(),
                inbound: self.inbound.clone(),
                agent: self.agent.clone(),
                ui: Arc::new(RecordingUi::default()),
                state: self.state.clone(),
                locks: LockDir::new(self.dir.path().join("locks")),
                pairing: host_shim::sandbox::pairing_budget::PairingBudget::default(),
                clock: Arc::new(SystemClock),
                log: Arc::new(MemoryLog::default()),
            })
        }
    }
}

/// [`IdleAgent`] that counts the prompts it takes.
#[derive(Default)]
struct CountingAgent {
    prompts: AtomicU64,
}

#[async_trait::async_trait]
impl Agent for CountingAgent {
    fn attach(&self, signals: SignalSender) {
        IdleAgent.attach(signals);
    }
    async fn send_prompt(
        &self,
        _: String,
        _: host_shim::wit::agent::DeliverAs,
        _: Vec<host_shim::wit::agent::PromptImage>,
    ) -> Result<(), String> {
        self.prompts.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn abort(&self) {}
    fn is_idle(&self) -> bool {
        true
    }
    fn session_info(&self) -> host_shim::wit::agent::SessionInfo {
        IdleAgent.session_info()
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

impl Bench {
    async fn instance(&self) -> Instance {
        self.runtime
            .instantiate(SessionHost::new(self.ctx()))
            .await
            .unwrap()
    }

    async fn configure(&self, instance: &mut Instance) {
        let session = instance.bridge.pi_bot_connect_session();
        session
            .call_configure(
                &mut instance.store,
                &sources(),
                &host_shim::factory::declarations(),
            )
            .await
            .unwrap();
    }

    async fn start(&self, instance: &mut Instance) {
        let session = instance.bridge.pi_bot_connect_session();
        session
            .call_start(&mut instance.store, &["fake".to_string()])
            .await
            .unwrap();
    }

    async fn started_instance(&self) -> Instance {
        let mut instance = self.instance().await;
        self.configure(&mut instance).await;
        self.start(&mut instance).await;
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
        press: None,
        message_id: Some("501".into()),
    }
}

/// The same bridge code, natively, with a host that does what the component's host does
/// where it matters for a prompt: its state is saved to a real state database, as the
/// component's is (a no-op save made the native figure look cheaper than the same work).
struct NativeHost {
    prompts: u64,
    /// What `is_idle` answers: a busy agent keeps its queue across a turn's end.
    idle: bool,
    state: StateDb,
    tokio: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

impl NativeHost {
    fn new() -> NativeHost {
        let dir = tempfile::tempdir().unwrap();
        let (state, _) = StateDb::open(&dir.path().join("state.json"), 0).unwrap();
        NativeHost {
            prompts: 0,
            idle: true,
            state,
            tokio: tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
            _dir: dir,
        }
    }
}

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
                reactions: false,
                drafts: false,
            },
            lock_name: None,
        })
    }
    fn listen(&mut self, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn react(
        &mut self,
        _: &str,
        _: &str,
        _: &str,
        _: model::Reaction,
        _: Option<model::Reaction>,
    ) -> Result<(), String> {
        Ok(())
    }
    fn draft(
        &mut self,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: u64,
        _: &str,
    ) -> Result<(), model::SendError> {
        Ok(())
    }
    fn resolve_tool_call(&mut self, _: &str, _: &model::ToolDecision) {}
    fn answer_question(&mut self, _: &str, _: &model::QuestionAnswer) {}
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
        self.prompts += 1;
        Ok(())
    }
    fn abort(&mut self) {}
    fn is_idle(&mut self) -> bool {
        self.idle
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
    fn load_state(&mut self) -> Option<model::SavedState> {
        self.state
            .load_state("native")
            .unwrap()
            .map(|state| model::SavedState {
                document: state.document,
                queued: state.queued,
            })
    }
    fn save_state(&mut self, changes: &model::StateChanges) -> Result<(), String> {
        let changes = host_shim::disk::state_store::StateChanges {
            document: changes.document.clone(),
            dequeued: changes.dequeued,
            enqueued: changes.enqueued.clone(),
        };
        self.tokio
            .block_on(self.state.save_changes("native", &changes))
            .map_err(|error| error.to_string())
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
        press: None,
        message_id: e.message_id,
    }
}

fn bench_sessions(c: &mut Criterion) {
    let bench = setup();

    c.bench_function("instantiate a session (fresh store + instance)", |b| {
        b.iter(|| bench.tokio.block_on(bench.instance()))
    });

    c.bench_function("instantiate + configure + start a session", |b| {
        b.iter(|| bench.tokio.block_on(bench.started_instance()))
    });

    // Its own transport and lock directory: the instances started above hold the shared
    // fake's lock and left it started, and a session whose transport is not running
    // returns early from every envelope.
    let measured = setup();
    let mut instance = measured.tokio.block_on(measured.started_instance());
    let wit_envelope = envelope();
    let mut group = c.benchmark_group("one prompt: envelope, turn started, turn settled");
    let mut component_cycles = 0u64;
    group.bench_function("through the component", |b| {
        b.iter(|| {
            component_cycles += 1;
            measured
                .tokio
                .block_on(component_cycle(&mut instance, &wit_envelope))
        })
    });
    let reached = measured.agent.prompts.load(Ordering::Relaxed);
    assert_eq!(
        reached,
        component_cycles,
        "through the component: {component_cycles} prompts measured, {reached} reached the \
         agent; the bridge sent {:?}",
        measured.fake_handle.sent()
    );
    let mut native = Bridge::new();
    let mut host = NativeHost::new();
    let sources = vec![model::ConfigSource {
        scope: model::ConfigScope::Global,
        path: "bench.json".into(),
        content: model::ConfigContent::Text(CONFIG.into()),
    }];
    native.configure(&mut host, &sources, &[]);
    native.start(&mut host, &["fake".to_string()]);
    let native_envelope = native_envelope();
    let mut native_cycles = 0u64;
    group.bench_function("native (same guest code)", |b| {
        b.iter(|| {
            native_cycles += 1;
            native_cycle(&mut native, &mut host, &native_envelope);
        })
    });
    assert_eq!(
        host.prompts, native_cycles,
        "native: {native_cycles} prompts measured, {} reached the agent",
        host.prompts
    );
    group.finish();

    // The budget line: the same cycles timed back to back, each path on its own line.
    let rounds = 2_000u32;
    let started = Instant::now();
    for _ in 0..rounds {
        measured
            .tokio
            .block_on(component_cycle(&mut instance, &wit_envelope));
    }
    let component = started.elapsed() / rounds;
    let started = Instant::now();
    for _ in 0..rounds {
        native_cycle(&mut native, &mut host, &native_envelope);
    }
    let native_each = started.elapsed() / rounds;
    println!("one prompt through the component: {component:?}");
    println!("one prompt natively (same guest code): {native_each:?}");
    println!(
        "component / native: {:.1}x (budget 1.5x)",
        component.as_secs_f64() / native_each.as_secs_f64()
    );
}

/// One prompt's cycle in the component: the envelope, then its turn starting and settling
/// (the queue of prompts waiting for their turn stays empty, as in a live session).
async fn component_cycle(instance: &mut Instance, envelope: &types::Envelope) {
    let fuel = instance.store.data().call_fuel;
    let session = instance.bridge.pi_bot_connect_session();
    for step in 0..3 {
        instance.store.set_fuel(fuel).unwrap();
        match step {
            0 => session
                .call_on_envelope(&mut instance.store, envelope)
                .await
                .unwrap(),
            1 => session
                .call_on_agent_event(
                    &mut instance.store,
                    &host_shim::wit::session::AgentEvent::TurnStarted(
                        host_shim::wit::session::TurnOrigin::Remote,
                    ),
                )
                .await
                .unwrap(),
            _ => session
                .call_on_agent_event(
                    &mut instance.store,
                    &host_shim::wit::session::AgentEvent::TurnSettled,
                )
                .await
                .unwrap(),
        }
    }
}

/// The same cycle natively.
fn native_cycle(bridge: &mut Bridge, host: &mut NativeHost, envelope: &model::Envelope) {
    bridge.on_envelope(host, envelope.clone());
    bridge.on_agent_event(
        host,
        model::AgentEvent::TurnStarted(model::TurnOrigin::Remote),
    );
    bridge.on_agent_event(host, model::AgentEvent::TurnSettled);
}

/// An envelope's cost against the queue's depth and the sessions stored: the same prompt
/// cycle (the envelope joins the queue's end, the next turn takes its front, the turn
/// settles with the agent still busy, so the depth stays put) on the real state database,
/// natively, with 0, 1,000 and 9,999 prompts waiting and with 10,000 other sessions stored.
fn report_queue_depth() {
    const ROUNDS: u32 = 300;
    let config = r#"{"bridge": {"allowUsers": ["fake:user-1"], "maxQueuedPrompts": 10000,
        "rateLimit": {"promptsPerMinute": 0}}}"#;
    let measure = |depth: usize, others: usize| {
        let mut host = NativeHost::new();
        for i in 0..others {
            host.tokio
                .block_on(
                    host.state
                        .save_document(&format!("other-{i}"), r#"{"trusted":{}}"#),
                )
                .unwrap();
        }
        let mut bridge = Bridge::new();
        let sources = vec![model::ConfigSource {
            scope: model::ConfigScope::Global,
            path: "bench.json".into(),
            content: model::ConfigContent::Text(config.into()),
        }];
        bridge.configure(&mut host, &sources, &[]);
        bridge.start(&mut host, &["fake".to_string()]);
        let envelope = native_envelope();
        // A turn runs and `depth` prompts wait behind it.
        bridge.on_envelope(&mut host, envelope.clone());
        bridge.on_agent_event(
            &mut host,
            model::AgentEvent::TurnStarted(model::TurnOrigin::Remote),
        );
        host.idle = false;
        for _ in 0..depth {
            bridge.on_envelope(&mut host, envelope.clone());
        }
        let before = host.prompts;
        let started = Instant::now();
        for _ in 0..ROUNDS {
            bridge.on_envelope(&mut host, envelope.clone());
            bridge.on_agent_event(&mut host, model::AgentEvent::TurnSettled);
            bridge.on_agent_event(
                &mut host,
                model::AgentEvent::TurnStarted(model::TurnOrigin::Remote),
            );
        }
        let each = started.elapsed() / ROUNDS;
        // The work happened: every envelope reached the agent, and the store holds the
        // depth the figure names.
        assert_eq!(
            host.prompts - before,
            u64::from(ROUNDS),
            "prompts that reached the agent"
        );
        let stored = host.state.load_state("native").unwrap().expect("saved");
        assert_eq!(stored.queued.len(), depth, "queue entries stored");
        each
    };
    let base = measure(0, 0);
    println!("envelope with the real store, queue depth 0, 1 session stored: {base:?}");
    for (depth, others, what) in [
        (1_000, 0, "queue depth 1,000"),
        (9_999, 0, "queue depth 9,999"),
        (0, 10_000, "10,000 other sessions stored"),
    ] {
        let each = measure(depth, others);
        println!(
            "envelope with the real store, {what}: {each:?} = {:.2}x depth 0 (budget 1.5x)",
            each.as_secs_f64() / base.as_secs_f64()
        );
    }
}

/// Where a session's start goes: instantiating the component, `configure` (config parsed and
/// validated, scope compiled) and `start` (transports started, the first state load and save).
/// The attach budget (2 ms) is for the sum; this split says which part to work on.
fn report_start_phases() {
    const ROUNDS: u32 = 200;
    let bench = setup();
    let (mut instantiate, mut configure, mut start) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut started = 0u32;
    for _ in 0..ROUNDS {
        let t0 = Instant::now();
        let mut instance = bench.tokio.block_on(bench.instance());
        let t1 = Instant::now();
        bench.tokio.block_on(bench.configure(&mut instance));
        let t2 = Instant::now();
        bench.tokio.block_on(bench.start(&mut instance));
        let t3 = Instant::now();
        instantiate += t1 - t0;
        configure += t2 - t1;
        start += t3 - t2;
        // The proof that `start` did its work: it started the transport. Stopping it (as the
        // host's shutdown does) keeps the next round's start from being an early return on a
        // running transport.
        assert!(
            bench.fake_handle.is_running(),
            "start did not start the transport"
        );
        started += 1;
        bench
            .tokio
            .block_on(
                instance
                    .bridge
                    .pi_bot_connect_session()
                    .call_shutdown(&mut instance.store),
            )
            .unwrap();
        bench.tokio.block_on(bench.fake.stop());
    }
    let total = instantiate + configure + start;
    println!(
        "session start, mean of {ROUNDS}: {:.2?} (budget 2 ms) = instantiate {:.2?} + configure {:.2?} + start {:.2?} ({started} transports started)",
        total / ROUNDS,
        instantiate / ROUNDS,
        configure / ROUNDS,
        start / ROUNDS,
    );
}

/// Memory per idle, started session: N instances held at once, RSS before and after.
/// The native guest's heap after each phase of a session's start, in KiB: what the
/// component's "configured and started" memory is made of. Run first: the redaction engine
/// is built once per process natively (once per instance in the component), so a native
/// benchmark run before would have built it already.
fn report_heap() {
    let held = || HELD.load(Ordering::Relaxed) as f64 / 1024.0;
    let peak = || PEAK.load(Ordering::Relaxed) as f64 / 1024.0;
    COUNTING.store(true, Ordering::Relaxed);
    // Text with no secret-like word: the engine's tables are built, no family's pattern.
    let redacted = guest::core::redact::redact("the build passed in 4 minutes");
    assert_eq!(redacted.text, "the build passed in 4 minutes");
    let engine = held();
    let engine_peak = peak();
    let mut bridge = Bridge::new();
    let new = held() - engine;
    let mut host = NativeHost::new();
    let host_part = held() - engine - new;
    let sources = vec![model::ConfigSource {
        scope: model::ConfigScope::Global,
        path: "bench.json".into(),
        content: model::ConfigContent::Text(CONFIG.into()),
    }];
    let before_configure = held();
    bridge.configure(&mut host, &sources, &[]);
    let configured = held() - before_configure;
    bridge.start(&mut host, &["fake".to_string()]);
    let started = held() - before_configure - configured;
    let start_peak = peak();
    COUNTING.store(false, Ordering::Relaxed);
    let guest_total = engine + new + configured + started;
    // A start that allocated nothing did not run.
    assert!(
        configured > 0.0 && started >= 0.0,
        "the native bridge never started"
    );
    println!(
        "the guest's heap natively after a session's start: {guest_total:.1} KiB = redaction \
         engine tables {engine:.1} KiB + a new bridge {new:.1} KiB + configure {configured:.1} \
         KiB + start {started:.1} KiB (the bench's host, not counted: {host_part:.1} KiB); \
         at its highest {start_peak:.1} KiB, {engine_peak:.1} KiB of it while the engine was \
         built (a guest's memory keeps its high-water mark resident)"
    );
    drop(bridge);
}

fn report_memory() {
    let bench = setup();
    let n = IDLE_SESSIONS as f64;
    let before = resident_kib();
    let (pss_before, private_before) = (proportional_kib(), private_kib());
    let started = Instant::now();
    let mut instances: Vec<Instance> = (0..IDLE_SESSIONS)
        .map(|_| bench.tokio.block_on(bench.instance()))
        .collect();
    let instantiated = resident_kib();
    // The host's own heap is counted apart: what is left of the growth is the guests'
    // linear memories (mapped by wasmtime, not allocated through the host's allocator).
    let host_before = HELD.load(Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    for instance in &mut instances {
        bench.tokio.block_on(bench.configure(instance));
        bench.tokio.block_on(bench.start(instance));
    }
    COUNTING.store(false, Ordering::Relaxed);
    let host_heap = (HELD.load(Ordering::Relaxed) - host_before) as f64 / 1024.0 / n;
    let elapsed = started.elapsed();
    let after = resident_kib();
    let pss = proportional_kib().saturating_sub(pss_before) as f64 / n;
    let private = private_kib().saturating_sub(private_before) as f64 / n;
    let grown = instances
        .iter()
        .map(|i| i.guest_memory_bytes())
        .sum::<usize>() as f64
        / 1024.0
        / n;
    // A guest whose memory never grew did not run: the figure would be an empty shell's.
    assert!(grown > 0.0, "the instances' guests never ran");
    println!(
        "memory per idle session: {:.1} KiB = {:.1} KiB instantiated (wasmtime's instance, the \
         guest's data and the stack it touched, the session's host state) + {:.1} KiB \
         configured and started, of which the host's heap {host_heap:.1} KiB and the guest's \
         linear memory touched {:.1} KiB (its heap, the stack it reached, the data it wrote); \
         the guest's linear memory grew to {grown:.0} KiB, partly untouched and not resident \
         ({} sessions held, RSS {} KiB -> {} KiB -> {} KiB; created in {:.1?}, {:.1?} each)",
        after.saturating_sub(before) as f64 / n,
        instantiated.saturating_sub(before) as f64 / n,
        after.saturating_sub(instantiated) as f64 / n,
        after.saturating_sub(instantiated) as f64 / n - host_heap,
        IDLE_SESSIONS,
        before,
        instantiated,
        after,
        elapsed,
        elapsed / IDLE_SESSIONS as u32,
    );
    println!(
        "memory per idle session, each shared page counted once: {pss:.1} KiB (proportional \
         set size; {private:.1} KiB of it the session's own pages, the rest the component's \
         image and code that every instance maps)   budget: ≤ 512 KiB"
    );
    drop(instances);
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = bench_sessions
}

fn main() {
    report_heap();
    report_start_phases();
    report_queue_depth();
    report_memory();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
