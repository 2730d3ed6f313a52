//! Idle sessions cost nothing (docs/scaling.md#idle-sessions): resident memory with 100,000
//! hibernated sessions on one node, the extra time of the first envelope to a hibernated
//! session over one to a live session, and envelope latency with 10,000 active sessions.
//! Each figure is printed next to its budget; every answer is checked to come from the
//! session the chat is bound to, and every woken session is checked to have woken (its
//! health counts the wake), so a figure cannot time an early return or a wrong route.
//!
//! A session here is what `host-shim serve` runs per pi session: broker entry, component
//! instance from the pool while it is awake, configure and start, the shared bot (the
//! in-memory fake) started for it, its actor task; hibernated, only the host's part stays.
//! Its state lives in the real state database (`serve`'s SQLite file, on disk); the
//! cluster's KV is not involved, so the figures are one node's host and bridge, not NATS.
//! The person writing is trusted by config (`allowUsers`), as a paired one is: the state
//! database holds a pairing the same way and no part of it is resident.
//!
//! `cargo bench -p host-shim --bench hibernation` (several minutes; ~7 GiB while 10,000
//! sessions are awake). `HIBERNATION_BENCH_SESSIONS=20000 HIBERNATION_BENCH_ACTIVE=2000`
//! for a quicker look.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use host_shim::agent::{Agent, AgentSignal, IdleAgent, RecentWork};
use host_shim::broker::bindings::{self, Bindings};
use host_shim::broker::{Broker, BrokerOptions};
use host_shim::disk::state_db::StateDb;
use host_shim::local::clock::{ManualClock, SystemClock};
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::hibernation::{HibernatedCount, Hibernation};
use host_shim::sandbox::runtime::{EMBEDDED_COMPONENT, Limits, Runtime};
use host_shim::sandbox::session::{Built, Session, SessionSpec};
use host_shim::wit::agent::{DeliverAs, PromptImage, SessionInfo};
use host_shim::wit::session::{ConfigContent, ConfigScope, ConfigSource};
use support::{private_kib, proportional_kib, resident_kib};
use transport_core::Transport;
use transport_testing::fake::FakeTransport;

/// The person writing; trusted by config, rate limits off, so every command is answered.
const CONFIG: &str = r#"{"bridge": {"allowUsers": ["fake:user-1"],
  "rateLimit": {"promptsPerMinute": 0, "commandsPerMinute": 0}},
  "transports": {"terminal": {"enabled": true}}}"#;
/// The idle time after which the sessions hibernate (the shortest `serve` accepts).
const AFTER: Duration = Duration::from_secs(60);
/// Sessions started and hibernated together while the node fills up.
const BATCH: usize = 500;
/// Sessions woken one by one for the first-envelope figure.
const WAKES: usize = 1_000;
/// Envelopes routed among the active sessions for the latency figure.
const REPEATS: usize = 5_000;

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

fn sorted(times: &[Duration]) -> Vec<Duration> {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted
}

fn verdict(within: bool) -> &'static str {
    if within {
        "within budget"
    } else {
        "OVER BUDGET"
    }
}

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

struct World {
    broker: Arc<Broker>,
    fake: FakeTransport,
    runtime: Arc<Runtime>,
    state: Arc<StateDb>,
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    hibernated: HibernatedCount,
    sessions: Vec<Session>,
}

impl World {
    /// A broker as `serve` builds it, with room in the pool for `awake` instances at once.
    async fn new(awake: usize) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let state_file = dir.path().join("state.json");
        let (state, _) = StateDb::open(&state_file, 0).expect("state");
        let state = Arc::new(state);
        let (bindings, _) = Bindings::kept_in(state.clone(), &bindings::path_beside(&state_file))
            .await
            .expect("bindings");
        let limits = Limits {
            max_instances: awake as u32 + 8,
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
            bindings,
            status_file: Some(host_shim::broker::status_path_beside(&state_file)),
            pairing: host_shim::sandbox::pairing_budget::PairingBudget::default(),
        });
        let hibernated = broker.hibernated();
        World {
            broker,
            fake,
            runtime,
            state,
            dir,
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            hibernated,
            sessions: Vec::new(),
        }
    }

    /// Attaches session `i` as `host-shim serve` does, hibernating after [`AFTER`] by the
    /// world's clock.
    async fn attach(&mut self, i: usize) {
        let key = format!("session-{i}");
        let sources = vec![ConfigSource {
            scope: ConfigScope::Global,
            path: "bench.json".into(),
            content: ConfigContent::Text(CONFIG.into()),
        }];
        let agent = Arc::new(NamedAgent {
            name: format!("s{i}"),
        });
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
            clock: self.clock.clone(),
            log: Arc::new(MemoryLog::default()),
            exclusive: true,
            transcript: None,
        };
        let hibernation = Hibernation::after(AFTER, self.hibernated.clone());
        let session = Session::spawn_with(self.runtime.clone(), spec, hibernation)
            .await
            .expect("session starts");
        self.sessions.push(session);
    }

    /// Lets the idle time pass and hibernates sessions `range`; each must go.
    async fn hibernate(&self, range: std::ops::Range<usize>) {
        self.clock.advance(AFTER.as_millis() as u64);
        for i in range {
            assert!(
                self.sessions[i]
                    .hibernate_if_idle()
                    .await
                    .expect("session alive"),
                "session {i} did not hibernate: {:?}",
                self.sessions[i].health().await
            );
        }
    }

    /// Sends `text` in `conversation` and waits for the answer; returns the round trip and
    /// the answer's text.
    async fn round_trip(&self, conversation: &str, text: &str) -> (Duration, String) {
        let mut envelope = self.fake.envelope(text);
        envelope.conversation_id = conversation.into();
        drop(self.fake.take_records());
        let started = Instant::now();
        self.fake.inject(envelope).await.expect("bot running");
        let answered = self
            .fake
            .wait_for(Duration::from_secs(10), |sent, _| !sent.is_empty())
            .await;
        let elapsed = started.elapsed();
        assert!(answered, "no answer to {text:?} in {conversation}");
        let answer = self
            .fake
            .sent()
            .first()
            .map(|sent| sent.message.text.clone())
            .unwrap_or_default();
        (elapsed, answer)
    }

    /// Binds `chat` to session `i` with `/switch` (answered by the broker: no wake).
    async fn bind(&self, chat: &str, i: usize) {
        let name = format!("s{i}");
        let (_, answer) = self.round_trip(chat, &format!("/switch {name}")).await;
        assert!(
            answer.contains(&name),
            "/switch {name} was answered {answer:?}"
        );
    }

    /// `/status` in `chat`, answered by session `i`'s component; checked to be its.
    async fn status(&self, chat: &str, i: usize) -> Duration {
        let (elapsed, answer) = self.round_trip(chat, "/status").await;
        assert!(
            answer.contains(&format!("- session: s{i}\n")),
            "{chat} is bound to s{i}, but /status was answered with {answer:?}"
        );
        elapsed
    }
}

/// [`IdleAgent`] with a name of its own, so `/status` says which session answered.
struct NamedAgent {
    name: String,
}

#[async_trait::async_trait]
impl Agent for NamedAgent {
    fn attach(&self, signals: tokio::sync::mpsc::Sender<AgentSignal>) {
        IdleAgent.attach(signals);
    }
    async fn send_prompt(
        &self,
        text: String,
        deliver_as: DeliverAs,
        images: Vec<PromptImage>,
    ) -> Result<(), String> {
        IdleAgent.send_prompt(text, deliver_as, images).await
    }
    fn abort(&self) {}
    fn is_idle(&self) -> bool {
        true
    }
    fn session_info(&self) -> SessionInfo {
        SessionInfo {
            name: Some(self.name.clone()),
            ..IdleAgent.session_info()
        }
    }
    fn recent_work(&self) -> RecentWork {
        RecentWork::default()
    }
}

fn main() {
    let total = env_count("HIBERNATION_BENCH_SESSIONS", 100_000).max(2 * WAKES);
    let active = env_count("HIBERNATION_BENCH_ACTIVE", 10_000).clamp(WAKES, total);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    tokio.block_on(async {
        let mut world = World::new(active).await;
        let rss_start = resident_kib();
        let private_start = private_kib();

        // (a) The node fills up: sessions start a batch at a time and hibernate once quiet.
        let filling = Instant::now();
        for first in (0..total).step_by(BATCH) {
            let end = (first + BATCH).min(total);
            for i in first..end {
                world.attach(i).await;
            }
            world.hibernate(first..end).await;
        }
        let filled_in = filling.elapsed();
        assert_eq!(world.hibernated.get(), total, "every session hibernated");
        assert_eq!(world.runtime.live_instances(), 0, "no instance is left");
        // Whatever the allocator kept from the batches' instances is freed memory, not a
        // session's: let the SQLite commit settle first so its pages are counted too.
        world.state.committed().await.expect("state committed");
        let rss_idle = resident_kib();
        let (pss_idle, private_idle) = (proportional_kib(), private_kib());
        let gib = |kib: u64| kib as f64 / (1024.0 * 1024.0);
        let each = rss_idle.saturating_sub(rss_start) as f64 / total as f64;
        let private_each = private_idle.saturating_sub(private_start) as f64 / total as f64;
        // The budget is for 100,000; a smaller run is held to its share.
        let budget_kib = 1024.0 * 1024.0 * total as f64 / 100_000.0;
        println!(
            "(a) {total} paired sessions, all hibernated: resident (VmRSS) {:.2} GiB, {each:.1} \
             KiB each over the {} MiB at start ({private_each:.1} KiB of it private; \
             proportional {:.2} GiB); started and hibernated in {:.0} s   budget: 100,000 in ≤ \
             1 GiB: {}",
            gib(rss_idle),
            rss_start / 1024,
            gib(pss_idle),
            filled_in.as_secs_f64(),
            verdict(rss_idle as f64 <= budget_kib),
        );

        // (b) The first envelope to a hibernated session, then the next one (live), per
        // session: the same route, the same command, the same answer; only the wake differs.
        // Each chat talks to its session once before (untimed): a chat's first message to a
        // session records the chat in its state (a write that waits for its commit's fsync),
        // which is the chat's cost, not the wake's.
        let session_of = |k: usize| (k * 7919) % total;
        let woken: Vec<usize> = (0..WAKES).map(session_of).collect();
        for (k, &i) in woken.iter().enumerate() {
            let chat = format!("wake-{k}");
            world.bind(&chat, i).await;
            world.status(&chat, i).await;
        }
        world.state.committed().await.expect("bindings committed");
        world.clock.advance(AFTER.as_millis() as u64);
        for &i in &woken {
            assert!(world.sessions[i].hibernate_if_idle().await.expect("alive"));
        }
        let mut first = Vec::with_capacity(WAKES);
        let mut then = Vec::with_capacity(WAKES);
        for (k, &i) in woken.iter().enumerate() {
            let chat = format!("wake-{k}");
            first.push(world.status(&chat, i).await);
            then.push(world.status(&chat, i).await);
            let health = world.sessions[i].health().await.expect("session alive");
            assert_eq!(
                (health.wakes, health.hibernated),
                (2, false),
                "session {i} woke for its first /status after each sleep: {health:?}"
            );
        }
        let (first_sorted, then_sorted) = (sorted(&first), sorted(&then));
        let extra_p99 =
            percentile(&first_sorted, 0.99).saturating_sub(percentile(&then_sorted, 0.99));
        println!(
            "(b) first envelope to a hibernated session: p50 {}, p99 {}; the next one (live): \
             p50 {}, p99 {}; extra at p99 {} ({WAKES} sessions)   budget: ≤ 1 ms extra at p99: {}",
            ms(percentile(&first_sorted, 0.5)),
            ms(percentile(&first_sorted, 0.99)),
            ms(percentile(&then_sorted, 0.5)),
            ms(percentile(&then_sorted, 0.99)),
            ms(extra_p99),
            verdict(extra_p99 <= Duration::from_millis(1)),
        );
        // They go back to sleep, so (c) starts from the same node.
        world.clock.advance(AFTER.as_millis() as u64);
        for &i in &woken {
            assert!(world.sessions[i].hibernate_if_idle().await.expect("alive"));
        }

        // (c) `active` sessions awake with traffic: each gets a chat and its first message
        // (a wake, untimed), then envelopes go to them in a scattered order.
        let active_session = |j: usize| (j * 7919 + 13) % total;
        for j in 0..active {
            let chat = format!("active-{j}");
            world.bind(&chat, active_session(j)).await;
            world.status(&chat, active_session(j)).await;
        }
        assert_eq!(
            world.runtime.live_instances(),
            active as u64,
            "{active} sessions are awake"
        );
        let rss_active = resident_kib();
        let mut latencies = Vec::with_capacity(REPEATS);
        for k in 0..REPEATS {
            let j = (k * 104_729) % active;
            latencies.push(
                world
                    .status(&format!("active-{j}"), active_session(j))
                    .await,
            );
        }
        let latencies = sorted(&latencies);
        let p99 = percentile(&latencies, 0.99);
        println!(
            "(c) {active} active sessions (beside {} hibernated), envelope routed + answered: \
             p50 {}, p99 {}, max {} ({REPEATS} measured; resident {:.2} GiB)   budget: p99 ≤ 2 \
             ms: {}",
            total - active,
            ms(percentile(&latencies, 0.5)),
            ms(p99),
            ms(*latencies.last().unwrap_or(&Duration::ZERO)),
            gib(rss_active),
            verdict(p99 <= Duration::from_millis(2)),
        );

        for session in world.sessions.drain(..) {
            let _ = session.shutdown().await;
        }
        world.broker.shutdown().await;
    });
}
