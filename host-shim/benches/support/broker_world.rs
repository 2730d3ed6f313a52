//! A broker as `host-shim serve` builds it, with sessions attached to it and a chat that
//! talks to them through the shared (fake) bot: what the broker and hibernation benches
//! both measure.
#![allow(dead_code)] // each bench uses a different part of the world (the session bench none)

use std::sync::Arc;
use std::time::{Duration, Instant};

use host_shim::agent::NamedIdleAgent;
use host_shim::broker::bindings::{self, Bindings};
use host_shim::broker::{Broker, BrokerOptions};
use host_shim::disk::state_db::StateDb;
use host_shim::local::clock::Clock;
use host_shim::local::logging::TracingLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::hibernation::Hibernation;
use host_shim::sandbox::runtime::{EMBEDDED_COMPONENT, Limits, Runtime};
use host_shim::sandbox::session::{Built, Session, SessionSpec};
use host_shim::wit::session::{ConfigContent, ConfigScope, ConfigSource};
use transport_core::Transport;
use transport_testing::fake::FakeTransport;

/// The person writing; trusted by config, rate limits off, so every command is answered.
const CONFIG: &str = r#"{"bridge": {"allowUsers": ["fake:user-1"],
  "rateLimit": {"promptsPerMinute": 0, "commandsPerMinute": 0}},
  "transports": {"terminal": {"enabled": true}}}"#;

/// The broker, its shared bot (the in-memory fake), the state database on disk and the
/// sessions attached so far (session `i` is `session-{i}`, named `s{i}`).
pub struct World {
    /// The broker every session is attached to.
    pub broker: Arc<Broker>,
    /// The shared bot's platform side: messages are injected and answers read here.
    pub fake: FakeTransport,
    /// The component and its instance pool.
    pub runtime: Arc<Runtime>,
    /// `serve`'s state database (SQLite, on disk).
    pub state: Arc<StateDb>,
    /// Holds the state database and the locks.
    pub dir: tempfile::TempDir,
    /// Every session attached, by index.
    pub sessions: Vec<Session>,
    /// One log for the process, as `serve` has (lines go to `tracing`, which no subscriber
    /// prints here): a log per session kept in memory would be counted as the sessions'.
    log: Arc<TracingLog>,
}

impl World {
    /// A broker as `serve` builds it (bindings kept in the state database, a status file for
    /// `doctor`, the pairing budget shared), with room in the pool for `awake` instances at
    /// once.
    pub async fn new(awake: usize) -> World {
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
        let log = Arc::new(TracingLog::new());
        let broker = Broker::new(BrokerOptions {
            locks: host_shim::disk::lock::LockDir::new(dir.path().join("locks")),
            clock: Arc::new(host_shim::local::clock::SystemClock),
            log: log.clone(),
            build: Arc::new(move |_| Built {
                transports: vec![Arc::new(bot.handle()) as Arc<dyn Transport>],
                notes: Vec::new(),
            }),
            state_file: Some(state_file.clone()),
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
            log,
        }
    }

    /// Attaches session `i` as `host-shim serve` does (broker entry, instance from the pool,
    /// configure, the shared bot started for it, its actor task), its time read from
    /// `clock`; returns how long it took.
    pub async fn attach(
        &mut self,
        i: usize,
        clock: Arc<dyn Clock>,
        hibernation: Hibernation,
    ) -> Duration {
        let key = format!("session-{i}");
        let sources = vec![ConfigSource {
            scope: ConfigScope::Global,
            path: "bench.json".into(),
            content: ConfigContent::Text(CONFIG.into()),
        }];
        let started = Instant::now();
        let agent = Arc::new(NamedIdleAgent::new(format!("s{i}")));
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
            clock,
            log: self.log.clone(),
            exclusive: true,
            transcript: None,
        };
        let session = Session::spawn_with(self.runtime.clone(), spec, hibernation)
            .await
            .expect("session starts");
        let elapsed = started.elapsed();
        self.sessions.push(session);
        elapsed
    }

    /// Sends `text` in `conversation` and waits for the answer; returns the round trip and
    /// the answer's text.
    pub async fn round_trip(&self, conversation: &str, text: &str) -> (Duration, String) {
        let mut envelope = self.fake.envelope(text);
        envelope.conversation_id = conversation.into();
        // Forget what was posted so far (copying a growing list would be timed too).
        drop(self.fake.take_records());
        let started = Instant::now();
        self.fake.inject(envelope).await.expect("bot running");
        // A bound, not a figure: a stall of a machine shared with builds must not fail the
        // bench, and an answer that never comes must (the first `/switch` at 100,000
        // sessions once took minutes: docs/scaling.md#idle-sessions).
        let answered = self
            .fake
            .wait_for(Duration::from_secs(120), |sent, _| !sent.is_empty())
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

    /// Binds `chat` to session `i` with `/switch` (answered by the broker, not the session);
    /// returns the round trip.
    pub async fn bind(&self, chat: &str, i: usize) -> Duration {
        let name = format!("s{i}");
        let (elapsed, answer) = self.round_trip(chat, &format!("/switch {name}")).await;
        assert!(
            answer.contains(&name),
            "/switch {name} was answered {answer:?}"
        );
        elapsed
    }

    /// `/status` in `chat`, answered by session `i`'s component; checked to be its.
    pub async fn status(&self, chat: &str, i: usize) -> Duration {
        let (elapsed, answer) = self.round_trip(chat, "/status").await;
        assert!(
            answer.contains(&format!("- session: s{i}\n")),
            "{chat} is bound to s{i}, but /status was answered with {answer:?}"
        );
        elapsed
    }

    /// Shuts every session down, then the broker.
    pub async fn shutdown(mut self) {
        for session in self.sessions.drain(..) {
            let _ = session.shutdown().await;
        }
        self.broker.shutdown().await;
    }
}

/// The `p` quantile of `sorted` (nearest rank); zero for none.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `d` in milliseconds, as the figures print it.
pub fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}
