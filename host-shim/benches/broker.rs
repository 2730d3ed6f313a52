//! Broker benchmarks (docs/decisions.md#decision-14-one-host-one-bot-many-sessions): attaching a
//! session against the number already attached, an envelope routed to the right session and
//! answered at 10,000 sessions (a chat's first message, which binds it, apart from the repeats),
//! and resident memory with 10,000 idle sessions attached. Each figure is printed next to its
//! budget; every answer is checked to come from the session the chat is bound to, so a figure
//! cannot time an early return or a wrong route.
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

use host_shim::agent::{Agent, AgentSignal, IdleAgent, RecentWork};
use host_shim::broker::bindings::{self, Bindings};
use host_shim::broker::{Broker, BrokerOptions};
use host_shim::disk::state_db::StateDb;
use host_shim::local::clock::SystemClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
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
/// Chats that bind themselves to a session (each a first message), spread over all sessions.
const CHATS: usize = 1_000;
/// Repeat envelopes routed through those chats for the latency figure.
const REPEATS: usize = 3_000;
/// The attach figure's slices: the first and the last this many attaches.
const SLICE: usize = 1_000;

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
    /// A broker as `serve` builds it: bindings kept in the state database, a status file
    /// for `doctor`, the pairing budget shared.
    async fn new(capacity: usize) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let state_file = dir.path().join("state.json");
        let (state, _) = StateDb::open(&state_file, 0).expect("state");
        let state = Arc::new(state);
        let (bindings, _) = Bindings::kept_in(state.clone(), &bindings::path_beside(&state_file))
            .await
            .expect("bindings");
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
            bindings,
            status_file: Some(host_shim::broker::status_path_beside(&state_file)),
            pairing: host_shim::sandbox::pairing_budget::PairingBudget::default(),
        });
        World {
            broker,
            fake,
            runtime,
            state,
            dir,
            sessions: Vec::new(),
        }
    }

    /// Attaches session `i` as `host-shim serve` does; returns how long it took.
    async fn attach(&mut self, i: usize) -> Duration {
        let key = format!("session-{i}");
        let sources = vec![ConfigSource {
            scope: ConfigScope::Global,
            path: "bench.json".into(),
            content: ConfigContent::Text(CONFIG.into()),
        }];
        let started = Instant::now();
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

    /// Sends `text` in `conversation` and waits for the answer; returns the round trip and
    /// the answer's text.
    async fn round_trip(&self, conversation: &str, text: &str) -> (Duration, String) {
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

fn summary(label: &str, times: &[Duration], budget: &str) {
    let mut sorted = times.to_vec();
    sorted.sort();
    println!(
        "{label}: p50 {}, p99 {}, max {} ({} measured)   budget: {budget}",
        ms(percentile(&sorted, 0.5)),
        ms(percentile(&sorted, 0.99)),
        ms(*sorted.last().unwrap_or(&Duration::ZERO)),
        sorted.len(),
    );
}

fn main() {
    let total: usize = std::env::var("BROKER_BENCH_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
        .max(2 * SLICE);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    tokio.block_on(async {
        let mut world = World::new(total).await;
        let rss_start = resident_kib();
        let (pss_start, private_start) = (proportional_kib(), private_kib());
        let mut attach_times = Vec::with_capacity(total);
        for i in 0..total {
            attach_times.push(world.attach(i).await);
        }
        let rss_end = resident_kib();
        let (pss_end, private_end) = (proportional_kib(), private_kib());
        summary(
            &format!(
                "attach, the first {SLICE} (0 to {} already attached)",
                SLICE - 1
            ),
            &attach_times[..SLICE],
            "p99 ≤ 2 ms",
        );
        summary(
            &format!(
                "attach, the last {SLICE} ({} to {} already attached)",
                total - SLICE,
                total - 1
            ),
            &attach_times[total - SLICE..],
            "p99 ≤ 2 ms",
        );
        summary(&format!("attach, all {total}"), &attach_times, "p99 ≤ 2 ms");
        let gib = |kib: u64| kib as f64 / (1024.0 * 1024.0);
        let each = |end: u64, start: u64| end.saturating_sub(start) as f64 / total as f64;
        // RSS counts a page of the component's image once per instance that reads it; the
        // proportional set size counts it once: the memory the host really needs.
        println!(
            "memory with {total} idle sessions attached: {:.2} GiB proportional ({:.0} KiB \
             each, {:.0} KiB of it each session's own pages; RSS {:.2} GiB, {:.0} KiB each, \
             counting the shared image once per instance; RSS {} MiB at start)   budget: \
             10,000 in ≤ 5 GiB",
            gib(pss_end),
            each(pss_end, pss_start),
            each(private_end, private_start),
            gib(rss_end),
            each(rss_end, rss_start),
            rss_start / 1024,
        );

        // Each chat binds itself with /switch (its first message: a binding is made and
        // kept), to a session spread over all of them (7919 is prime, so the sessions are
        // distinct), then repeats are routed by that binding in a scattered order.
        let session_of = |chat: usize| (chat * 7919) % total;
        let mut first = Vec::with_capacity(CHATS);
        for chat in 0..CHATS {
            let name = format!("s{}", session_of(chat));
            let (elapsed, answer) = world
                .round_trip(&format!("chat-{chat}"), &format!("/switch {name}"))
                .await;
            assert!(
                answer.contains(&name),
                "/switch {name} was answered with {answer:?}"
            );
            first.push(elapsed);
        }
        // Each /switch wrote its chat's binding down, as `serve` does.
        world.state.committed().await.expect("bindings committed");
        let kept = world.state.bindings().expect("bindings").len();
        assert_eq!(kept, CHATS, "every chat's /switch was written down");
        let mut repeats = Vec::with_capacity(REPEATS);
        for k in 0..REPEATS {
            let chat = (k * 7919) % CHATS;
            let name = format!("s{}", session_of(chat));
            let (elapsed, answer) = world.round_trip(&format!("chat-{chat}"), "/status").await;
            assert!(
                answer.contains(&format!("- session: {name}\n")),
                "chat-{chat} is bound to {name}, but /status was answered with {answer:?}"
            );
            repeats.push(elapsed);
        }
        summary(
            &format!("routed + answered at {total} sessions, a chat's first message (/switch)"),
            &first,
            "p99 ≤ 2 ms",
        );
        summary(
            &format!("routed + answered at {total} sessions, repeats (/status)"),
            &repeats,
            "p99 ≤ 2 ms",
        );
        let all: Vec<Duration> = first.iter().chain(&repeats).copied().collect();
        summary(
            &format!("routed + answered at {total} sessions, first messages and repeats"),
            &all,
            "p99 ≤ 2 ms",
        );
        for session in world.sessions.drain(..) {
            let _ = session.shutdown().await;
        }
        world.broker.shutdown().await;
    });
}
