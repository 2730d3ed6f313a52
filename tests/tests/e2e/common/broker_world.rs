//! A broker as `serve` builds it (bindings and topics kept in the state database) on one
//! platform's loopback server, and the sessions attached to it, as the broker's end-to-end
//! tests on a real wire share them.

use std::sync::Arc;

use host_shim::broker::bindings::{self, Bindings};
use host_shim::broker::{Broker, BrokerOptions};
use host_shim::factory;
use host_shim::local::clock::ManualClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::session::{Session, SessionSpec};
use serde_json::{Value, json};

use crate::common::{Dirs, ScriptAgent, build_with_env, runtime, user_config};

/// One attached session.
pub(crate) struct Attached {
    /// The session, running its component.
    pub(crate) session: Session,
    /// Its agent, which records the prompts it is given.
    pub(crate) agent: Arc<ScriptAgent>,
    /// Its terminal, which records the notes shown there.
    pub(crate) ui: Arc<RecordingUi>,
}

/// A broker as `serve` builds it (bindings and topics kept in the state database) for one
/// platform's loopback server, whose token the "environment" holds.
pub(crate) struct World {
    /// Its state directory and database.
    pub(crate) dirs: Dirs,
    /// The broker.
    pub(crate) broker: Arc<Broker>,
    /// The broker's log.
    pub(crate) log: Arc<MemoryLog>,
    /// `transports` of the user's config file.
    transports: Value,
    /// The "environment": the platform's token variables.
    env: Env,
}

/// Variables and their values, as the process environment would hold them.
pub(crate) type Env = Vec<(&'static str, String)>;

impl World {
    /// A broker on `dirs` for the platforms of `transports`, their tokens in `env`.
    pub(crate) async fn new(dirs: Dirs, transports: Value, env: Env) -> World {
        let log = Arc::new(MemoryLog::default());
        let broker = broker(&dirs, log.clone(), env.clone()).await;
        World {
            dirs,
            broker,
            log,
            transports,
            env,
        }
    }

    /// Stops the broker and starts another on the same state, as a restarted `serve`.
    pub(crate) async fn restart(self) -> World {
        self.broker.shutdown().await;
        let World {
            transports,
            env,
            dirs,
            ..
        } = self;
        let dirs = Dirs {
            state: Dirs::open_state(&dirs.dir),
            dir: dirs.dir,
        };
        World::new(dirs, transports, env).await
    }

    /// Attaches a session called `name` (in `/work/<name>`) that lets in `users`, and
    /// starts it.
    pub(crate) async fn attach(&self, name: &str, users: &[String]) -> Attached {
        let key = format!("key-{name}");
        let config = json!({
            "bridge": {"allowUsers": users},
            "transports": self.transports,
        });
        let sources = vec![user_config(&config.to_string())];
        let agent = Arc::new(ScriptAgent::default());
        let ui = Arc::new(RecordingUi::default());
        self.broker
            .attach(
                &key,
                name,
                &format!("/work/{name}"),
                &sources,
                agent.clone(),
            )
            .expect("attaches");
        let spec = SessionSpec {
            key: key.clone(),
            config_sources: sources,
            platforms: factory::declarations(),
            transports: self.broker.transports(&key),
            agent: agent.clone(),
            ui: ui.clone(),
            state: self.dirs.state.clone(),
            locks: self.dirs.locks(),
            pairing: self.broker.pairing(),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            log: Arc::new(MemoryLog::default()),
            exclusive: true,
            transcript: None,
        };
        let session = Session::spawn(runtime(), spec)
            .await
            .expect("session starts");
        Attached { session, agent, ui }
    }

    /// How many times the broker logged `event`.
    pub(crate) fn logged(&self, event: &str) -> Vec<String> {
        self.log
            .lines()
            .into_iter()
            .filter(|(_, line)| line.event == event)
            .map(|(_, line)| format!("{:?}", line.fields))
            .collect()
    }
}

async fn broker(dirs: &Dirs, log: Arc<MemoryLog>, env: Env) -> Arc<Broker> {
    let (kept, _) = Bindings::kept_in(
        dirs.state.clone(),
        &bindings::path_beside(&dirs.dir.path().join("state.json")),
    )
    .await
    .expect("bindings");
    Broker::new(BrokerOptions {
        locks: dirs.locks(),
        clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        log,
        build: build_with_env(
            env.into_iter()
                .map(|(name, value)| (name.to_owned(), value))
                .collect(),
            dirs.dir.path().to_path_buf(),
        ),
        state_file: Some(dirs.dir.path().join("state.json")),
        bindings: kept,
        status_file: None,
        pairing: host_shim::sandbox::pairing_budget::PairingBudget::default(),
    })
}
