//! The sessions role of `host-shim serve --nats` (docs/scaling.md): every node is told the
//! same sessions; each runs the ones [`placement`](super::placement) gives it among the
//! live nodes, under a lease, so no session ever runs on two nodes.
//!
//! - **Presence.** A node holds a key in the node bucket (renewed like a bot lock); the
//!   live nodes are the keys there. A node that dies drops out after the TTL.
//! - **Leases.** Running a session takes its key in the lease bucket. A session whose node
//!   died is free after the TTL and the next owner takes it; the state CAS is the second
//!   guard (a stale node's save is refused).
//! - **Moving.** When a node joins, the sessions it now wins leave their old node, but
//!   only while idle (no turn, no prompt waiting for its reply): nobody's turn is cut for
//!   a rebalance.
//! - **Each session** is a component instance with [`RemoteTransport`]s for the bots (the
//!   ingress holds them), state in the KV bucket, and its inbound from its durable
//!   consumer, prompts acked only once their reply is out ([`settle`](super::settle)).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::Client;
use async_nats::jetstream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use transport_core::Transport;

use super::bot_lock::{BotLocks, Holder, KeptLock};
use super::directory::{Directory, SessionEntry};
use super::handed::HandedLedger;
use super::inbound::{InboundSettings, SessionConsumer, SessionGuards};
use super::outbound::RemoteTransport;
use super::outbox::Outbox;
use super::placement;
use super::seal::Gate;
use super::settle::{LedgerAgent, LedgerStore, TurnLedger};
use super::state_store::{KvSessionStates, KvStateStore};
use super::subjects::{Prefix, session_token};
use crate::agent::Agent;
use crate::disk::lock::LockDir;
use crate::disk::state_store::StateStore;
use crate::local::clock::Clock;
use crate::local::logging::{LogLine, LogSink};
use crate::local::ui::Ui;
use crate::ops::health::Check;
use crate::sandbox::hibernation::Hibernation;
use crate::sandbox::pairing_budget::PairingBudget;
use crate::sandbox::runtime::Runtime;
use crate::sandbox::session::{Built, Session, SessionSpec};
use crate::wit::session::ConfigSource;
use crate::wit::types::Level;

/// A session the cluster runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// Session key (its state, subject and consumer derive from it).
    pub key: String,
    /// The name chats reach it by.
    pub name: String,
    /// Its working directory.
    pub cwd: String,
}

/// Makes a session's agent or terminal.
pub type MakeFor<T> = Arc<dyn Fn(&Wanted) -> T + Send + Sync>;

/// What a session node needs.
pub struct SessionNodeOptions {
    /// Names on the wire.
    pub prefix: Prefix,
    /// Lease and presence TTL; renewed, and placement looked at, every third of it.
    pub lease_ttl: Duration,
    /// The inbound stream's settings (the same on every node of the prefix); `ack_wait`
    /// at most half of `lease_ttl` ([`InboundSettings::for_lease_ttl`]).
    pub inbound: InboundSettings,
    /// How long a send through the ingress may take.
    pub request_timeout: Duration,
    /// The sessions of the cluster (every session node is given the same list).
    pub sessions: Vec<Wanted>,
    /// The sessions' config.
    pub config_sources: Vec<ConfigSource>,
    /// The component.
    pub runtime: Arc<Runtime>,
    /// Each session's agent.
    pub agent: MakeFor<Arc<dyn Agent>>,
    /// Each session's terminal.
    pub ui: MakeFor<Arc<dyn Ui>>,
    /// Where the sessions' own locks go (their bots' locks are the ingress's).
    pub locks: LockDir,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The node's log.
    pub log: Arc<dyn LogSink>,
    /// This node.
    pub holder: Holder,
    /// Checks what this node consumes and seals what it sends and stores (the cluster key).
    pub gate: Gate,
    /// When idle sessions hibernate (`--hibernate-after`; docs/scaling.md#idle-sessions).
    pub hibernation: Hibernation,
}

/// The session node failed to start.
#[derive(Debug, thiserror::Error)]
#[error("the session node could not start: {0}")]
pub struct SessionNodeError(String);

/// A running session node.
pub struct SessionNode {
    task: JoinHandle<()>,
    stop: watch::Sender<bool>,
    running: Arc<Mutex<Vec<String>>>,
    client: Client,
    gate: Gate,
}

/// One session running here.
struct Running {
    session: Session,
    consumer: SessionConsumer,
    lease: KeptLock,
    agent: Arc<dyn Agent>,
    entry: SessionEntry,
}

struct Node {
    client: Client,
    jetstream: jetstream::Context,
    options: SessionNodeOptions,
    nodes: BotLocks,
    leases: BotLocks,
    directory: Directory,
    states: KvStateStore,
    /// Which messages were handed to their session already (at most once).
    handed: HandedLedger,
    /// Where the sessions' sends wait while no ingress holds their bot.
    outbox: Outbox,
    /// The pairing failure budget of every session this node runs (one process, one
    /// budget, as in a broker).
    pairing: PairingBudget,
    transport_ids: Vec<String>,
    running: BTreeMap<String, Running>,
    shown: Arc<Mutex<Vec<String>>>,
}

impl SessionNode {
    /// Opens the buckets, announces this node and starts placing sessions.
    pub async fn start(
        client: Client,
        jetstream: jetstream::Context,
        options: SessionNodeOptions,
    ) -> Result<SessionNode, SessionNodeError> {
        let failed = |e: &dyn std::fmt::Display| SessionNodeError(e.to_string());
        let ttl = options.lease_ttl;
        if let Some(why) = options.inbound.unfit_for_lease_ttl(ttl) {
            return Err(SessionNodeError(why));
        }
        let nodes = BotLocks::open_bucket(
            &jetstream,
            options.prefix.node_bucket(),
            "bot-connect: the live session nodes",
            ttl,
        )
        .await
        .map_err(|e| failed(&e))?;
        let leases = BotLocks::open_bucket(
            &jetstream,
            options.prefix.lease_bucket(),
            "bot-connect: which node runs which session",
            ttl,
        )
        .await
        .map_err(|e| failed(&e))?;
        let directory = Directory::open(&jetstream, &options.prefix, &options.gate)
            .await
            .map_err(|e| failed(&e))?;
        let states = KvStateStore::open(&jetstream, &options.prefix, &options.gate)
            .await
            .map_err(|e| failed(&e))?;
        let handed = HandedLedger::open(&jetstream, &options.prefix, &options.gate)
            .await
            .map_err(|e| failed(&e))?;
        let outbox = Outbox::open(
            jetstream.clone(),
            options.prefix.clone(),
            options.gate.clone(),
        )
        .await
        .map_err(|e| failed(&e))?;
        let presence = nodes
            .try_acquire(&node_key(&options.holder), &options.holder)
            .await
            .map_err(|e| failed(&e))?
            .keep_alive(renew_every(ttl), ttl);
        let config = crate::native_guest::read_transports_natively(&options.config_sources);
        let transport_ids: Vec<String> = config
            .transports
            .iter()
            .map(|r| r.id.clone())
            .filter(|id| id != "terminal")
            .collect();
        if transport_ids.is_empty() {
            return Err(SessionNodeError(
                "the config enables no messenger (transports.telegram, discord, slack or \
                 robo_claw); a cluster's sessions talk only through the ingress's bots"
                    .into(),
            ));
        }
        let shown = Arc::new(Mutex::new(Vec::new()));
        let gate = options.gate.clone();
        let node = Node {
            client: client.clone(),
            jetstream,
            options,
            nodes,
            leases,
            directory,
            states,
            handed,
            outbox,
            pairing: PairingBudget::default(),
            transport_ids,
            running: BTreeMap::new(),
            shown: shown.clone(),
        };
        let (stop, stopping) = watch::channel(false);
        let task = tokio::spawn(node.run(presence, stopping));
        Ok(SessionNode {
            task,
            stop,
            running: shown,
            client,
            gate,
        })
    }

    /// Envelopes and stored values this node refused (not sealed with the cluster key).
    pub fn refused(&self) -> u64 {
        self.gate.refused()
    }

    /// `/readyz`: the NATS connection (sessions here are fed and saved through it), and how
    /// many sessions run here (none is ready too: the others may run them all).
    pub fn readiness(&self) -> Vec<Check> {
        (self.probe())()
    }

    /// [`SessionNode::readiness`] for the listener.
    pub fn probe(&self) -> Arc<dyn Fn() -> Vec<Check> + Send + Sync> {
        let client = self.client.clone();
        let running = self.running.clone();
        Arc::new(move || {
            let running = running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .len();
            vec![
                super::readiness::nats(&client),
                Check::ready("sessions", format!("{running} running here")),
            ]
        })
    }

    /// The sessions running on this node now, by key.
    pub fn running(&self) -> Vec<String> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Stops every session here (each reports what it could not send), gives their leases
    /// and this node's presence back, so the other nodes take the sessions at once.
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
    }

    /// Dies as a machine does: nothing is acked, released or sent from here any more (the
    /// NATS connection is closed), and the leases age out. For tests of failover.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
        let _ = self.client.drain().await;
    }
}

fn renew_every(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_millis(100))
}

fn node_key(holder: &Holder) -> String {
    format!("node-{}", holder.id)
}

impl Node {
    fn log(&self, level: Level, event: &str, fields: &[(&str, String)]) {
        self.options
            .log
            .write(super::LOG_SCOPE, LogLine::new(level, event, fields));
    }

    async fn run(mut self, mut presence: KeptLock, mut stopping: watch::Receiver<bool>) {
        let mut ticks = tokio::time::interval(renew_every(self.options.lease_ttl));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => self.place().await,
                lost = presence.lost() => {
                    // Others may have taken our sessions already: stop them all now.
                    self.log(Level::Error, "node presence lost", &[("error", lost.to_string())]);
                    self.stop_all(false).await;
                    return;
                }
                _ = async { stopping.wait_for(|stop| *stop).await.is_ok() } => {
                    self.stop_all(true).await;
                    let _ = presence.release().await;
                    return;
                }
            }
        }
    }

    /// One look at placement: start what this node should run, let go of what it should
    /// not (when idle), and stop what it lost.
    async fn place(&mut self) {
        let live: Vec<String> = match self.nodes.holders().await {
            Ok(holders) => holders.into_iter().map(|(_, h)| h.id).collect(),
            Err(error) => {
                self.log(
                    Level::Warning,
                    "node list unavailable",
                    &[("error", error.to_string())],
                );
                return;
            }
        };
        let me = self.options.holder.id.clone();
        let wanted = self.options.sessions.clone();
        for session in &wanted {
            let mine = placement::owner(&session.key, &live) == Some(me.as_str());
            let running = self.running.contains_key(&session.key);
            if mine && !running {
                self.start(session).await;
            } else if !mine && running && self.is_idle(&session.key) {
                self.stop(&session.key, true).await;
            }
        }
        let lost: Vec<String> = self
            .running
            .iter_mut()
            .filter_map(|(key, r)| r.lease.is_lost().then(|| key.clone()))
            .collect();
        for key in lost {
            self.log(
                Level::Error,
                "session lease lost",
                &[("session", session_token(&key))],
            );
            self.stop(&key, false).await;
        }
        self.announce_changes().await;
        self.show();
    }

    fn is_idle(&self, key: &str) -> bool {
        self.running
            .get(key)
            .is_some_and(|r| r.agent.is_idle() && !r.consumer.holds_prompts())
    }

    async fn start(&mut self, wanted: &Wanted) {
        let lease_key = session_token(&wanted.key);
        let Ok(lease) = self
            .leases
            .try_acquire(&lease_key, &self.options.holder)
            .await
        else {
            // Its old node still has it: it lets go when idle, or ages out if dead.
            return;
        };
        let ttl = self.options.lease_ttl;
        let lease = lease.keep_alive(renew_every(ttl), ttl);
        let mut remotes = Vec::new();
        for id in &self.transport_ids {
            match RemoteTransport::discover(
                self.client.clone(),
                &self.options.prefix,
                id,
                self.options.request_timeout,
                self.options.gate.clone(),
            )
            .await
            {
                Ok((remote, _)) => {
                    remotes.push(Arc::new(remote.with_outbox(self.outbox.clone())));
                }
                Err(error) => {
                    // No ingress holds this bot yet: try again at the next look.
                    self.log(
                        Level::Warning,
                        "session waits for its bots",
                        &[("session", lease_key.clone()), ("error", error.to_string())],
                    );
                    let _ = lease.release().await;
                    return;
                }
            }
        }
        let inner_agent = (self.options.agent)(wanted);
        let ledger = TurnLedger::new(inner_agent.clone());
        let agent: Arc<dyn Agent> = Arc::new(LedgerAgent::new(ledger.clone()));
        let kv: Arc<dyn StateStore> = Arc::new(KvSessionStates::new(self.states.clone()));
        let state: Arc<dyn StateStore> = Arc::new(LedgerStore::new(kv, ledger.clone()));
        let offered: Vec<Arc<dyn Transport>> = remotes
            .iter()
            .map(|r| r.clone() as Arc<dyn Transport>)
            .collect();
        let spec = SessionSpec {
            key: wanted.key.clone(),
            config_sources: self.options.config_sources.clone(),
            platforms: crate::factory::declarations(),
            transports: Box::new(move |requests| Built {
                transports: offered
                    .iter()
                    .filter(|t| requests.iter().any(|r| r.id == t.id()))
                    .cloned()
                    .collect(),
                notes: Vec::new(),
            }),
            agent: agent.clone(),
            ui: (self.options.ui)(wanted),
            state,
            locks: self.options.locks.clone(),
            pairing: self.pairing.clone(),
            clock: self.options.clock.clone(),
            log: self.options.log.clone(),
            // The lease is the session's lock, cluster-wide; a lock file would only stand
            // between two nodes on one machine.
            exclusive: false,
            transcript: None,
        };
        let runtime = self.options.runtime.clone();
        let hibernation = self.options.hibernation.clone();
        let session = match Session::spawn_with(runtime, spec, hibernation).await {
            Ok(session) => session,
            Err(error) => {
                self.log(
                    Level::Error,
                    "session did not start",
                    &[("session", lease_key), ("error", format!("{error:#}"))],
                );
                let _ = lease.release().await;
                return;
            }
        };
        let Some(sink) = remotes.iter().find_map(|r| r.sink()) else {
            self.log(
                Level::Error,
                "session started no bot",
                &[("session", lease_key)],
            );
            let _ = session.shutdown().await;
            let _ = lease.release().await;
            return;
        };
        let consumer = match SessionConsumer::start_with(
            self.jetstream.clone(),
            &self.options.prefix,
            &wanted.key,
            sink,
            &self.options.inbound,
            Some(SessionGuards {
                turns: ledger,
                handed: self.handed.clone(),
                session_key: wanted.key.clone(),
                notices: remotes
                    .iter()
                    .map(|r| r.clone() as Arc<dyn Transport>)
                    .collect(),
            }),
            self.options.gate.clone(),
            self.options.log.clone(),
        )
        .await
        {
            Ok(consumer) => consumer,
            Err(error) => {
                self.log(
                    Level::Error,
                    "session inbound unavailable",
                    &[("session", lease_key), ("error", error.to_string())],
                );
                let _ = session.shutdown().await;
                let _ = lease.release().await;
                return;
            }
        };
        let entry = SessionEntry {
            key: wanted.key.clone(),
            name: wanted.name.clone(),
            cwd: wanted.cwd.clone(),
            busy: false,
            node: self.options.holder.description.clone(),
        };
        if let Err(error) = self.directory.announce(&entry).await {
            self.log(
                Level::Warning,
                "session not listed",
                &[("error", error.to_string())],
            );
        }
        self.log(Level::Info, "session started", &[("session", lease_key)]);
        self.running.insert(
            wanted.key.clone(),
            Running {
                session,
                consumer,
                lease,
                agent: inner_agent,
                entry,
            },
        );
    }

    /// Stops a session here. `graceful`: it hands over (lease released at once);
    /// otherwise another node may own it already, so nothing more is acked.
    async fn stop(&mut self, key: &str, graceful: bool) {
        let Some(running) = self.running.remove(key) else {
            return;
        };
        running.consumer.stop().await;
        if let Err(error) = running.session.shutdown().await {
            self.log(
                Level::Warning,
                "session stop",
                &[("error", format!("{error:#}"))],
            );
        }
        if graceful {
            let _ = running.lease.release().await;
        } else {
            running.lease.abandon();
        }
        self.log(
            Level::Info,
            "session stopped here",
            &[("session", session_token(key))],
        );
    }

    async fn stop_all(&mut self, graceful: bool) {
        let keys: Vec<String> = self.running.keys().cloned().collect();
        for key in keys {
            self.stop(&key, graceful).await;
        }
        self.show();
    }

    /// Keeps `/sessions`' busy or idle current.
    async fn announce_changes(&mut self) {
        for running in self.running.values_mut() {
            let busy = !running.agent.is_idle();
            if busy != running.entry.busy {
                running.entry.busy = busy;
                if let Err(error) = self.directory.announce(&running.entry).await {
                    self.options.log.write(
                        super::LOG_SCOPE,
                        LogLine::new(
                            Level::Warning,
                            "session not listed",
                            &[("error", error.to_string())],
                        ),
                    );
                }
            }
        }
    }

    fn show(&self) {
        *self
            .shown
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            self.running.keys().cloned().collect();
    }
}
