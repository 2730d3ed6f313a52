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
//! - **Attached sessions** (a pi on this machine, through [`Attacher`]) run here and only
//!   here: the component needs its agent's link, so a session lives where its agent
//!   lives. Placement never moves them; when their pi exits they stop, and their entry
//!   stays in the directory without a node (offline) so their chats keep their binding,
//!   pairing and waiting messages until the session attaches again, on any machine.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::Client;
use async_nats::jetstream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use transport_core::Transport;

use super::bot_lock::{BotLocks, Holder, KeptLock};
use super::directory::{Directory, SessionEntry};
use super::handed::HandedLedger;
use super::inbound::{InboundSettings, SessionConsumer, SessionGuards};
use super::outbound::RemoteTransport;
use super::outbox::Outbox;
use super::paired_seen::{PairedSeen, PairedStore};
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
use crate::ops::dashboard::SessionRow;
use crate::ops::health::Check;
use crate::pi::attach::Served;
use crate::sandbox::hibernation::Hibernation;
use crate::sandbox::pairing_budget::PairingBudget;
use crate::sandbox::runtime::Runtime;
use crate::sandbox::session::{Built, Session, SessionHandle, SessionSpec};
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

/// A session whose agent runs on this machine (a pi that attached here): it runs on this
/// node and no other.
#[derive(Clone)]
pub struct Attach {
    /// Its key, name and directory.
    pub wanted: Wanted,
    /// Its config (the user's and its project's, read from its directory).
    pub config_sources: Vec<ConfigSource>,
    /// Its agent (the pi link).
    pub agent: Arc<dyn Agent>,
    /// Its terminal (pi's, through the link): pairing codes show there.
    pub ui: Arc<dyn Ui>,
}

/// What the rest of the process asks of the node.
enum Request {
    /// Run an attached session here; answered once it runs, or why it cannot.
    Attach(Attach, oneshot::Sender<Result<SessionHandle, String>>),
    /// Stop an attached session (its pi has gone); answered once it stopped.
    Detach(String, oneshot::Sender<()>),
}

/// Hands the node the sessions of the pi processes on this machine.
#[derive(Clone)]
pub struct Attacher {
    requests: mpsc::Sender<Request>,
}

impl Attacher {
    /// Runs `attach` on this node: takes its lease (waiting for up to two lease TTLs while
    /// a dead node's lease ages out or no ingress holds its bots yet), loads its state and
    /// binds its inbound, so the messages its chats sent meanwhile arrive now. Ending the
    /// returned [`Served`] stops it and leaves its directory entry offline.
    pub async fn attach(&self, attach: Attach) -> Result<Served, SessionNodeError> {
        let key = attach.wanted.key.clone();
        let (tx, rx) = oneshot::channel();
        let stopped = || SessionNodeError("the session node has stopped".into());
        self.requests
            .send(Request::Attach(attach, tx))
            .await
            .map_err(|_| stopped())?;
        let handle = rx.await.map_err(|_| stopped())?.map_err(SessionNodeError)?;
        let requests = self.requests.clone();
        Ok(Served {
            handle,
            end: Box::pin(async move {
                let (tx, rx) = oneshot::channel();
                if requests.send(Request::Detach(key, tx)).await.is_ok() {
                    let _ = rx.await;
                }
                Ok(())
            }),
        })
    }
}

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
    rows: Rows,
    /// Sessions here running a turn, as of the last look.
    busy: Arc<std::sync::atomic::AtomicUsize>,
    hibernated: crate::sandbox::hibernation::HibernatedCount,
    client: Client,
    gate: Gate,
    attacher: Attacher,
}

/// One session running here.
struct Running {
    session: Session,
    consumer: SessionConsumer,
    lease: KeptLock,
    agent: Arc<dyn Agent>,
    entry: SessionEntry,
    /// Its prompts taken and turns settled: a prompt taken since the last look is activity
    /// (`/sessions`' "active … ago"), however short its turn.
    turns: Arc<TurnLedger>,
    /// `turns.taken()` at the last look.
    prompts_seen: u64,
    /// Whom its state trusts, as its last load or save said: a change is announced in its
    /// entry at the next look, for the ingress's topics in private chats.
    paired: PairedSeen,
}

/// An attached session waiting to run here: its lease is still a dead node's, or no
/// ingress holds its bots yet.
struct Waiting {
    attach: Attach,
    reply: oneshot::Sender<Result<SessionHandle, String>>,
    /// Why it did not start at the last try, for the answer when time runs out.
    why: String,
    /// When the attach gives up.
    until: tokio::time::Instant,
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
    /// Attached sessions (by key): they run here and nowhere else.
    attached: BTreeMap<String, Attach>,
    /// Attached sessions not running yet.
    waiting: Vec<Waiting>,
    shown: Arc<Mutex<Vec<String>>>,
    /// What the dashboard lists, refreshed at each look at placement.
    rows: Rows,
    /// Sessions here running a turn, as of the last look.
    busy: Arc<std::sync::atomic::AtomicUsize>,
    /// Sessions this node will not run (their state is newer than it reads), each said once.
    refused: std::collections::HashSet<String>,
}

/// The dashboard's rows of the sessions running here, by key, and whether a dashboard
/// reads them (without one, the node reads no session's state for them).
#[derive(Default)]
struct RowsShared {
    wanted: std::sync::atomic::AtomicBool,
    rows: Mutex<Vec<(String, SessionRow)>>,
}

type Rows = Arc<RowsShared>;

/// The sessions of a node by state, (active, idle, hibernated), read at each scrape.
pub type Census = Arc<dyn Fn() -> (usize, usize, usize) + Send + Sync>;

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
        let rows: Rows = Arc::default();
        let busy: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
        let hibernated = options.hibernation.count.clone();
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
            attached: BTreeMap::new(),
            waiting: Vec::new(),
            shown: shown.clone(),
            rows: rows.clone(),
            busy: busy.clone(),
            refused: std::collections::HashSet::new(),
        };
        let (stop, stopping) = watch::channel(false);
        let (requests, requests_rx) = mpsc::channel(16);
        let task = tokio::spawn(node.run(presence, stopping, requests_rx));
        Ok(SessionNode {
            task,
            stop,
            running: shown,
            rows,
            busy,
            hibernated,
            client,
            gate,
            attacher: Attacher { requests },
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

    /// The dashboard's rows of the sessions running here (key and row), as of the last look
    /// at placement (every third of the lease TTL): a page is built without a NATS round
    /// trip.
    pub fn dashboard_rows(&self) -> Arc<dyn Fn() -> Vec<(String, SessionRow)> + Send + Sync> {
        let rows = self.rows.clone();
        rows.wanted
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Arc::new(move || {
            rows.rows
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        })
    }

    /// The sessions running here by state, (active, idle, hibernated), for the metrics:
    /// active as of the last look at placement, hibernated now.
    pub fn sessions_by_state(&self) -> Census {
        let (running, busy, hibernated) = (
            self.running.clone(),
            self.busy.clone(),
            self.hibernated.clone(),
        );
        Arc::new(move || {
            let total = running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .len();
            let active = busy.load(std::sync::atomic::Ordering::Relaxed).min(total);
            let hibernated = hibernated.get().min(total - active);
            (active, total - active - hibernated, hibernated)
        })
    }

    /// Where the pi sessions of this machine are handed to the node.
    pub fn attacher(&self) -> Attacher {
        self.attacher.clone()
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

    async fn run(
        mut self,
        mut presence: KeptLock,
        mut stopping: watch::Receiver<bool>,
        mut requests: mpsc::Receiver<Request>,
    ) {
        let mut ticks = tokio::time::interval(renew_every(self.options.lease_ttl));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => self.place().await,
                Some(request) = requests.recv() => match request {
                    Request::Attach(attach, reply) => self.attach(attach, reply).await,
                    Request::Detach(key, reply) => {
                        self.detach(&key).await;
                        let _ = reply.send(());
                    }
                },
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
        self.start_waiting().await;
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
            if let Some(attach) = self.attached.remove(&key) {
                // Another node may run it by now, and its pi cannot be moved there: say
                // so where the user sees it rather than leave a link to nothing.
                let text = "bot-connect: this session lost its place in the cluster (this \
                            machine could not reach NATS for longer than the lease). Chats \
                            cannot reach it now; type /connect in pi to attach it again.";
                attach.ui.notify(Level::Error, text).await;
            }
        }
        self.announce_changes().await;
        self.show();
        self.refresh_rows().await;
    }

    /// Reads the saved state of the sessions running here (the first
    /// [`SESSIONS_SHOWN`](crate::ops::dashboard::SESSIONS_SHOWN)) for the dashboard.
    async fn refresh_rows(&self) {
        // A state read per session every look is for a page: none without one.
        if !self.rows.wanted.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let mut rows = Vec::new();
        for (key, running) in self
            .running
            .iter()
            .take(crate::ops::dashboard::SESSIONS_SHOWN)
        {
            let document = match self.states.load(key).await {
                Ok(loaded) => loaded.document,
                // The page shows the session without its chats until the next look.
                Err(_) => None,
            };
            rows.push((
                key.clone(),
                crate::ops::session_row::row_from_state(
                    key,
                    &running.entry.name,
                    running.entry.busy,
                    document.as_deref(),
                ),
            ));
        }
        *self
            .rows
            .rows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = rows;
    }

    fn is_idle(&self, key: &str) -> bool {
        self.running
            .get(key)
            .is_some_and(|r| r.agent.is_idle() && !r.consumer.holds_prompts())
    }

    /// Starts a placed session with the node's agent, terminal and config.
    async fn start(&mut self, wanted: &Wanted) {
        let launch = Attach {
            wanted: wanted.clone(),
            config_sources: self.options.config_sources.clone(),
            agent: (self.options.agent)(wanted),
            ui: (self.options.ui)(wanted),
        };
        let _ = self.launch(&launch).await;
    }

    /// An attached session: runs it now, or keeps it waiting for its lease or its bots.
    async fn attach(
        &mut self,
        attach: Attach,
        reply: oneshot::Sender<Result<SessionHandle, String>>,
    ) {
        let key = attach.wanted.key.clone();
        if self.attached.contains_key(&key) {
            let _ = reply.send(Err(format!(
                "session {} is already attached on this node",
                attach.wanted.name
            )));
            return;
        }
        self.attached.insert(key, attach.clone());
        // Twice the TTL: a dead node's lease ages out within one.
        let until = tokio::time::Instant::now() + self.options.lease_ttl * 2;
        self.waiting.push(Waiting {
            attach,
            reply,
            why: String::new(),
            until,
        });
        self.start_waiting().await;
        self.show();
    }

    /// Tries the waiting attached sessions again; answers those that run now and those
    /// whose time ran out.
    async fn start_waiting(&mut self) {
        for mut waiting in std::mem::take(&mut self.waiting) {
            let key = waiting.attach.wanted.key.clone();
            if !self.attached.contains_key(&key) {
                // Detached while it waited: its pi has gone.
                continue;
            }
            match self.launch(&waiting.attach).await {
                Ok(handle) => {
                    if waiting.reply.send(Ok(handle)).is_err() {
                        // Its pi gave up meanwhile.
                        self.detach(&key).await;
                    }
                }
                Err(why) if tokio::time::Instant::now() >= waiting.until => {
                    self.attached.remove(&key);
                    let _ = waiting.reply.send(Err(why));
                }
                Err(why) => {
                    waiting.why = why;
                    self.waiting.push(waiting);
                }
            }
        }
    }

    /// Stops an attached session whose pi has gone, and leaves its directory entry without
    /// a node: `/sessions` shows it offline, its chats stay bound to it, and what they send
    /// waits in its stream until it attaches again.
    async fn detach(&mut self, key: &str) {
        self.attached.remove(key);
        self.waiting.retain(|w| w.attach.wanted.key != key);
        let Some(mut entry) = self.running.get(key).map(|r| r.entry.clone()) else {
            return;
        };
        self.stop(key, true).await;
        // Written now: its "last seen" is when its pi left.
        entry.busy = false;
        entry.node = String::new();
        entry.node_id = String::new();
        entry.written_at_ms = self.options.clock.now_ms();
        if let Err(error) = self.directory.announce(&entry).await {
            self.log(
                Level::Warning,
                "session not listed",
                &[("error", error.to_string())],
            );
        }
        self.show();
    }

    /// Starts one session here: takes its lease, reaches its bots, spawns its component,
    /// binds its inbound and lists it. `Err` says why it did not start (nothing of it is
    /// left running).
    async fn launch(&mut self, launch: &Attach) -> Result<SessionHandle, String> {
        let wanted = &launch.wanted;
        if self.refuses(wanted).await {
            return Err(format!(
                "session {}'s saved state was written by a newer host-shim than this one \
                 ({}): upgrade host-shim on this machine, then attach again",
                wanted.name,
                super::directory::machine_of(&self.options.holder)
            ));
        }
        let lease_key = session_token(&wanted.key);
        let lease = match self
            .leases
            .try_acquire(&lease_key, &self.options.holder)
            .await
        {
            Ok(lease) => lease,
            // Its old node still has it: it lets go when idle, or ages out if dead.
            Err(error) => return Err(error.to_string()),
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
                    return Err(error.to_string());
                }
            }
        }
        let inner_agent = launch.agent.clone();
        let ledger = TurnLedger::new(inner_agent.clone());
        let agent: Arc<dyn Agent> = Arc::new(LedgerAgent::new(ledger.clone()));
        let kv: Arc<dyn StateStore> = Arc::new(KvSessionStates::new(self.states.clone()));
        let state: Arc<dyn StateStore> = Arc::new(LedgerStore::new(kv, ledger.clone()));
        let paired = PairedSeen::default();
        let state: Arc<dyn StateStore> = Arc::new(PairedStore::new(state, paired.clone()));
        let offered: Vec<Arc<dyn Transport>> = remotes
            .iter()
            .map(|r| r.clone() as Arc<dyn Transport>)
            .collect();
        let spec = SessionSpec {
            key: wanted.key.clone(),
            config_sources: launch.config_sources.clone(),
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
            ui: launch.ui.clone(),
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
                let why = format!("{error:#}");
                self.log(
                    Level::Error,
                    "session did not start",
                    &[("session", lease_key), ("error", why.clone())],
                );
                let _ = lease.release().await;
                return Err(why);
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
            return Err(
                "the session's config enables none of the bots the cluster's ingress holds".into(),
            );
        };
        let consumer = match SessionConsumer::start_with(
            self.jetstream.clone(),
            &self.options.prefix,
            &wanted.key,
            sink,
            &self.options.inbound,
            Some(SessionGuards {
                turns: ledger.clone(),
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
                return Err(error.to_string());
            }
        };
        let now = self.options.clock.now_ms();
        let entry = SessionEntry {
            key: wanted.key.clone(),
            name: wanted.name.clone(),
            cwd: wanted.cwd.clone(),
            busy: false,
            node: self.options.holder.description.clone(),
            node_id: self.options.holder.id.clone(),
            machine: super::directory::machine_of(&self.options.holder),
            active_at_ms: now,
            written_at_ms: now,
            usage: None,
            refused: None,
            // Loaded as the session started.
            paired: paired.now(),
            forgotten: None,
        };
        if let Err(error) = self.directory.announce(&entry).await {
            self.log(
                Level::Warning,
                "session not listed",
                &[("error", error.to_string())],
            );
        }
        self.log(Level::Info, "session started", &[("session", lease_key)]);
        let handle = session.handle();
        self.running.insert(
            wanted.key.clone(),
            Running {
                session,
                consumer,
                lease,
                agent: inner_agent,
                entry,
                turns: ledger,
                prompts_seen: 0,
                paired,
            },
        );
        Ok(handle)
    }

    /// Whether this node must not run `wanted`: its state was written by a newer host-shim,
    /// and running it here would drop what this one cannot read at the next save. Said once
    /// in this node's log and in the session's directory entry (which `/sessions` and the
    /// chats' offline notice show), written only under its lease so it never overwrites the
    /// entry of a node that runs it.
    async fn refuses(&mut self, wanted: &Wanted) -> bool {
        let Ok(loaded) = self.states.load(&wanted.key).await else {
            // Unreadable for another reason: the session's own load reports it.
            return false;
        };
        let Err(newer) = loaded.readable(&wanted.key) else {
            self.refused.remove(&wanted.key);
            return false;
        };
        if !self.refused.insert(wanted.key.clone()) {
            return true;
        }
        let machine = super::directory::machine_of(&self.options.holder);
        let token = session_token(&wanted.key);
        self.log(
            Level::Error,
            "session refused",
            &[
                ("session", token.clone()),
                ("machine", machine.clone()),
                ("error", newer.to_string()),
            ],
        );
        if let Ok(lease) = self.leases.try_acquire(&token, &self.options.holder).await {
            let now = self.options.clock.now_ms();
            let entry = SessionEntry {
                key: wanted.key.clone(),
                name: wanted.name.clone(),
                cwd: wanted.cwd.clone(),
                node: self.options.holder.description.clone(),
                node_id: self.options.holder.id.clone(),
                refused: Some(super::directory::refusal(&newer, &machine)),
                machine,
                active_at_ms: now,
                written_at_ms: now,
                ..SessionEntry::default()
            };
            if let Err(error) = self.directory.announce(&entry).await {
                self.log(
                    Level::Warning,
                    "session not listed",
                    &[("error", error.to_string())],
                );
            }
            let _ = lease.release().await;
        }
        true
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
            if graceful && self.attached.contains_key(&key) {
                // Its pi stays behind on this machine: listed offline, not moved.
                self.detach(&key).await;
            } else {
                self.stop(&key, graceful).await;
            }
        }
        self.attached.clear();
        for waiting in self.waiting.drain(..) {
            let _ = waiting
                .reply
                .send(Err("the session node is stopping".into()));
        }
        self.show();
    }

    /// Keeps `/sessions`' busy or idle, last activity, usage and last seen current, and who
    /// the session is paired with: written when a turn starts or ends, when a user pairs,
    /// and every [`SEEN_REFRESH`](super::directory::SEEN_REFRESH)
    /// besides (never more often than this is called: once a lease renewal).
    async fn announce_changes(&mut self) {
        let active = self.running.values().filter(|r| !r.agent.is_idle()).count();
        self.busy
            .store(active, std::sync::atomic::Ordering::Relaxed);
        for running in self.running.values_mut() {
            let busy = !running.agent.is_idle();
            let taken = running.turns.taken();
            let prompted = taken != running.prompts_seen;
            running.prompts_seen = taken;
            let now = self.options.clock.now_ms();
            // A user paired (or unpaired) since: the ingress makes their topic from it.
            let paired = !running.paired.is(&running.entry.paired);
            if paired {
                running.entry.paired = running.paired.now();
            }
            if paired || running.entry.due(busy, prompted, now) {
                let usage = crate::broker::routing::UsageSoFar::ask(
                    running.agent.as_ref(),
                    renew_every(self.options.lease_ttl),
                )
                .await;
                running.entry.record(busy, prompted, usage, now);
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
