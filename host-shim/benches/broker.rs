//! Broker benchmarks (docs/decisions.md#decision-14-one-host-one-bot-many-sessions): attaching a
//! session, an envelope routed to the right session and answered at 1,000 sessions, and resident
//! memory with 10,000 idle sessions attached. Each figure is printed next to its budget; nothing is
//! asserted.
//!
//! A session here is the whole thing `host-shim serve` runs per pi session: broker
//! entry, component instance from the pool, configure, the shared bot started for it
//! (routed), its actor task. The bot is the in-memory fake, so the figures are the
//! host's and the bridge's, not a network's.
//!
//! `cargo bench -p host-shim --bench broker` (about a minute; 10,000 sessions need
//! ~3 GiB). `BROKER_BENCH_SESSIONS=2000` for a quicker look.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use host_shim::agent::IdleAgent;
use host_shim::broker::bindings::Bindings;
use host_shim::broker::{Broker, BrokerOptions};
use host_shim::disk::state_db::StateDb;
use host_shim::local::clock::SystemClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::runtime::{EMBEDDED_COMPONENT, Limits, Runtime};
use host_shim::sandbox::session::{Built, Session, SessionSpec};
use host_shim::wit::session::{ConfigContent, ConfigScope, ConfigSource};
use support::resident_kib;
use transport_core::Transport;
use transport_testing::fake::FakeTransport;

/// The person writing; trusted by config, rate limits off, so every command is answered.
const CONFIG: &str = r#"{"bridge": {"allowUsers": ["fake:user-1"],
  "rateLimit": {"promptsPerMinute": 0, "commandsPerMinute": 0}},
  "transports": {"terminal": {"enabled": true}}}"#;
/// Sessions for the routing figure.
const ROUTED_SESSIONS: usize = 1_000;
/// Envelopes routed for the latency figure.
const ROUTED_ENVELOPES: usize = 3_000;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

struct World {
    broker: Arc<Broker>,
    fake: FakeTransport,
    runtime: Arc<Runtime>,
    state: Arc<StateDb>,
    dir: tempfile::TempDir,
    sessions: Vec<Session>,
}

impl World {
    fn new(capacity: usize) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let (state, _) = StateDb::open(&dir.path().join("state.json"), 0).expect("state");
        let limits = Limits {
            max_instances: capacity as u32 + 8,
            ..Limits::default()
        };
        let runtime = Arc::new(Runtime::new(EMBEDDED_COMPONENT, limits).expect("component"));
        let fake = FakeTransport::default();
        let bot = fake.handle();
        let broker = Broker::new(BrokerOptions {
            locks: host_shim::disk::lock::LockDir::new(dir.path().join("locks")),
            clock: Arc::new(SystemClock),
            log: Arc::new(MemoryLog::default()),
            build: Arc::new(move |_| Built {
                transports: vec![Arc::new(bot.handle()) as Arc<dyn Transport>],
                notes: Vec::new(),
            }),
            state_file: Some(dir.path().join("state.json")),
            bindings: Bindings::in_memory(),
            status_file: None,
            pairing: host_shim::sandbox::pairing_budget::PairingBudget::default(),
        });
        World {
            broker,
            fake,
            runtime,
            state: Arc::new(state),
            dir,
            sessions: Vec::new(),
        }
    }

    /// Attaches session `i` as `host-shim serve` does; returns how long it took.
    async fn attach(&mut self, i: usize) -> Duration {
        let key = format!("session-{i}");
        let sources = vec![ConfigSource {
            scope: ConfigScope::Project,
            path: "bench.json".into(),
            content: ConfigContent::Text(CONFIG.into()),
        }];
        let started = Instant::now();
        let agent = Arc::new(IdleAgent);
        self.broker
            .attach(&key, &format!("s{i}"), "/bench", &sources, agent.clone())
            .expect("attach");
        let spec = SessionSpec {
            key: key.clone(),
            config_sources: sources,
            platforms: host_shim::factory::declarations(),
            transports: self.broker.transports(&key),
            agent,
            ui: Arc::new(RecordingUi::default()),
            state: self.state.clone(),
            locks: host_shim::disk::lock::LockDir::new(self.dir.path().join("locks")),
            pairing: self.broker.pairing(),
            clock: Arc::new(SystemClock),
            log: Arc::new(MemoryLog::default()),
            exclusive: true,
            transcript: None,
        };
        let session = Session::spawn(self.runtime.clone(), spec)
            .await
            .expect("session starts");
        let elapsed = started.elapsed();
        self.sessions.push(session);
        elapsed
    }

    /// Sends `text` in `conversation` and waits for the answer; returns the round trip.
    async fn round_trip(&self, conversation: &str, text: &str) -> Duration {
        let mut envelope = self.fake.envelope(text);
        envelope.conversation_id = conversation.into();
        // Forget what was posted so far (copying a growing list would be timed too).
        drop(self.fake.take_records());
        let started = Instant::now();
        self.fake.inject(envelope).await.expect("bot running");
        let answered = self
            .fake
            .wait_for(Duration::from_secs(10), |sent, _| !sent.is_empty())
            .await;
        assert!(answered, "no answer to {text:?} in {conversation}");
        started.elapsed()
    }
}

fn main() {
    let total: usize = std::env::var("BROKER_BENCH_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
        .max(ROUTED_SESSIONS);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    tokio.block_on(async {
        let mut world = World::new(total);
        let rss_start = resident_kib();
        let mut attach_times = Vec::with_capacity(total);
        for i in 0..ROUTED_SESSIONS {
            attach_times.push(world.attach(i).await);
        }
        // Each session gets its own chat: bound once with /switch, then routed by binding.
        for i in 0..ROUTED_SESSIONS {
            world
                .round_trip(&format!("chat-{i}"), &format!("/switch s{i}"))
                .await;
        }
        let mut routed = Vec::with_capacity(ROUTED_ENVELOPES);
        for k in 0..ROUTED_ENVELOPES {
            // Spread over the sessions in a scattered order, as many chats would.
            let i = (k * 7919) % ROUTED_SESSIONS;
            routed.push(world.round_trip(&format!("chat-{i}"), "/status").await);
        }
        routed.sort();
        println!(
            "routed + answered at {ROUTED_SESSIONS} sessions ({ROUTED_ENVELOPES} envelopes, /status): \
             p50 {}, p99 {}, max {}   budget: p99 ≤ 2 ms",
            ms(percentile(&routed, 0.5)),
            ms(percentile(&routed, 0.99)),
            ms(*routed.last().unwrap_or(&Duration::ZERO)),
        );
        for i in ROUTED_SESSIONS..total {
            attach_times.push(world.attach(i).await);
        }
        let rss_end = resident_kib();
        attach_times.sort();
        println!(
            "attach a session ({total} attached one after another): p50 {}, p99 {}, mean {}   \
             budget: ≤ 1 ms",
            ms(percentile(&attach_times, 0.5)),
            ms(percentile(&attach_times, 0.99)),
            ms(attach_times.iter().sum::<Duration>() / total as u32),
        );
        println!(
            "resident memory with {total} idle sessions attached: {:.2} GiB ({:.0} KiB each; \
             RSS {} MiB at start)   budget: 10,000 in ≤ 5 GiB",
            rss_end as f64 / (1024.0 * 1024.0),
            rss_end.saturating_sub(rss_start) as f64 / total as f64,
            rss_start / 1024,
        );
        for session in world.sessions.drain(..) {
            let _ = session.shutdown().await;
        }
        world.broker.shutdown().await;
    });
}
