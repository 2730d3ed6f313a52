//! The ingress role of `host-shim serve --nats` (docs/scaling.md): for each bot its config
//! asks for, wait for the bot's cluster-wide lock (a standby until the holder's key ages
//! out), then hold the platform connection: route every message to a session's subject,
//! answer `/sessions` and `/switch` itself, and serve the sessions' sends.
//!
//! Routing is the broker's (`broker::routing`), over the cluster's directory instead of
//! one process's sessions: a conversation bound to a session gets its messages published
//! to that session's subject whether or not a node runs it right now, so a message sent
//! while a session moves between nodes waits in the stream instead of being lost.
//!
//! A session whose node is gone (its lease or its node's key aged out) is **offline**: its
//! chats' messages are still published (the stream keeps them 24 h, and its consumer
//! delivers them when it is back), and each chat is told so once per offline period.
//!
//! With `sessionTopics` in its config for a bot, the ingress also keeps a topic per
//! session listed in the directory ([`super::topics`]): made at the same periodic look (in
//! the configured place, or in each paired user's private chat with the bot), a message in
//! it published to its session without `/switch`.

use futures_util::StreamExt as _;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_nats::Client;
use async_nats::jetstream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use transport_core::{Envelope, Inbound, InboundStream, Transport};

use super::bot_lock::{BotLockError, BotLocks, Holder};
use super::directory::{Directory, ForgetReason, Listed, Presence, PresenceReader, state_of};
use super::forgetting::{self, ForgetError};
use super::inbound::{InboundPublisher, InboundSettings};
use super::offline_told::OfflineTold;
use super::outbound::OutboundServer;
use super::outbox::{DRAIN_BEFORE_SERVING, OutboxDrain};
use super::posted::PostLedger;
use super::seal::Gate;
use super::state_store::KvStateStore;
use super::subjects::{Prefix, bot_lock_key, session_consumer};
use super::topics::{ListedSession, TopicKeeper, TopicSends};
use super::warn;
use crate::broker::bindings::Binding;
use crate::broker::routing::{self, Audience, Decision, SessionState, SessionView};
use crate::broker::topics::{self, TopicRoute};
use crate::broker::{BuildOne, send_notice, send_notice_to};
use crate::local::clock::{Clock, SystemClock};
use crate::local::logging::{LogLine, LogSink};
use crate::ops::health::Check;
use crate::ops::metrics::Metrics;
use crate::wit::session::TransportRequest;
use crate::wit::types::Level;

/// What an ingress node needs.
pub struct IngressOptions {
    /// Names on the wire.
    pub prefix: Prefix,
    /// The bot locks' TTL; renewed every third of it.
    pub lock_ttl: Duration,
    /// The inbound stream's settings (the same on every node of the prefix).
    pub inbound: InboundSettings,
    /// The bots to hold, as the sessions' config asks for them (validated).
    pub requests: Vec<TransportRequest>,
    /// Identities the config lets in without pairing (`allowUsers`): they see every
    /// session in `/sessions`.
    pub allowed: BTreeSet<String>,
    /// Builds the real transport of one request.
    pub build: BuildOne,
    /// Who holds the locks.
    pub holder: Holder,
    /// Seals what this node publishes and checks what it is asked (the cluster key).
    pub gate: Gate,
    /// The node's log.
    pub log: Arc<dyn LogSink>,
    /// Sessions offline at least this long are forgotten (`--forget-offline-after`);
    /// `None` never (docs/scaling.md#forgetting-a-session).
    pub forget_offline_after: Option<Duration>,
}

/// A running ingress node.
pub struct Ingress {
    bots: Vec<JoinHandle<()>>,
    /// Looks at which sessions are offline, every third of the TTL.
    watch: JoinHandle<()>,
    stop: watch::Sender<bool>,
    shared: Arc<Shared>,
}

/// The bucket or stream an ingress needs could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("the ingress could not start: {0}")]
pub struct IngressError(String);

/// What every bot task of one ingress shares.
struct Shared {
    client: Client,
    jetstream: jetstream::Context,
    locks: BotLocks,
    directory: Directory,
    states: KvStateStore,
    publisher: InboundPublisher,
    options: IngressOptions,
    /// The platform connections held now.
    live: std::sync::Mutex<Vec<Arc<dyn Transport>>>,
    /// Where each bot stands, by transport id, for `/readyz`.
    standing: std::sync::Mutex<BTreeMap<String, Check>>,
    /// The operator's metrics, when `--metrics` asked for them.
    metrics: std::sync::OnceLock<Arc<Metrics>>,
    /// Which session nodes are live and who holds each lease.
    presence: PresenceReader,
    /// The sessions offline at the last look, each with the chats this ingress knows were
    /// told so since it went offline (only bound chats, so strangers cannot grow it). The
    /// marks that count are in `told`: this is what spares a round trip to them.
    offline: std::sync::Mutex<HashMap<String, HashSet<String>>>,
    /// Which chats were told of which offline period, in the cluster's KV: a failover
    /// ingress does not tell a chat again.
    told: OfflineTold,
    /// The sessions listed at the last look (`None` before the first): a bound chat's
    /// message to one of them is published without reading its entry.
    listed: std::sync::Mutex<Option<HashSet<String>>>,
    /// Messages published to sessions the last look found online, the last of each chat,
    /// by session: a session whose node died (or whose pi left) just before is found
    /// offline only at the next look, which tells the chats whose messages still wait.
    recent: std::sync::Mutex<HashMap<String, HashMap<String, Recent>>>,
    /// The topic per session of the bots whose config names a place for them
    /// (docs/scaling.md#a-topic-per-session).
    topics: Arc<TopicKeeper>,
    /// The sends posted, so a send asked again (its answer lost) is not posted twice; shared
    /// by the sends served and the outbox drained.
    posts: PostLedger,
    /// The bots held now, for the look that keeps their sessions' topics.
    topic_bots: std::sync::Mutex<Vec<Arc<dyn Transport>>>,
    /// The last look at the topics, stopped with the ingress: a stopped (or dead) node
    /// asks the platform nothing more.
    topic_look: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Ingress {
    /// Opens the buckets and the stream, and starts one task per bot: each waits for its
    /// lock, then runs the bot until the lock is lost or the ingress stops.
    pub async fn start(
        client: Client,
        jetstream: jetstream::Context,
        options: IngressOptions,
    ) -> Result<Ingress, IngressError> {
        let failed = |e: &dyn std::fmt::Display| IngressError(e.to_string());
        let locks = BotLocks::open(&jetstream, &options.prefix, options.lock_ttl)
            .await
            .map_err(|e| failed(&e))?;
        let directory = Directory::open(&jetstream, &options.prefix, &options.gate)
            .await
            .map_err(|e| failed(&e))?;
        let states = KvStateStore::open(&jetstream, &options.prefix, &options.gate)
            .await
            .map_err(|e| failed(&e))?;
        let publisher = InboundPublisher::open(
            jetstream.clone(),
            options.prefix.clone(),
            &options.inbound,
            options.gate.clone(),
        )
        .await
        .map_err(|e| failed(&e))?;
        let topics = TopicKeeper::open(
            &jetstream,
            &options.prefix,
            &options.gate,
            options.log.clone(),
        )
        .await
        .map_err(|e| failed(&e))?;
        let told = OfflineTold::open(&jetstream, &options.prefix, &options.gate)
            .await
            .map_err(|e| failed(&e))?;
        let posts = PostLedger::open(
            &jetstream,
            &options.prefix,
            &options.gate,
            options.log.clone(),
        )
        .await
        .map_err(|e| failed(&e))?;
        let requests = options.requests.clone();
        let presence = PresenceReader::new(jetstream.clone(), &options.prefix);
        let shared = Arc::new(Shared {
            told,
            posts,
            listed: std::sync::Mutex::default(),
            recent: std::sync::Mutex::default(),
            topics: Arc::new(topics),
            topic_bots: std::sync::Mutex::default(),
            topic_look: std::sync::Mutex::default(),
            presence,
            offline: std::sync::Mutex::default(),
            metrics: std::sync::OnceLock::new(),
            client,
            jetstream,
            locks,
            directory,
            states,
            publisher,
            options,
            live: std::sync::Mutex::new(Vec::new()),
            standing: std::sync::Mutex::new(
                requests
                    .iter()
                    .map(|r| {
                        let name = format!("bot {}", r.id);
                        (r.id.clone(), Check::not_ready(name, "waiting for its lock"))
                    })
                    .collect(),
            ),
        });
        let (stop, stopping) = watch::channel(false);
        let bots = requests
            .into_iter()
            .map(|request| tokio::spawn(shared.clone().run_bot(request, stopping.clone())))
            .collect();
        let watch = tokio::spawn(shared.clone().watch_sessions());
        Ok(Ingress {
            bots,
            watch,
            stop,
            shared,
        })
    }

    /// Envelopes and stored values this node refused (not sealed with the cluster key).
    pub fn refused(&self) -> u64 {
        self.shared.options.gate.refused()
    }

    /// Reports the cluster's sessions by state (active, idle, offline) in `metrics` from
    /// now on (set once). The messages its bots send and receive are counted where the
    /// bots are built (`commands::operator::counted_build`).
    pub fn count_in(&self, metrics: Arc<Metrics>) {
        let _ = self.shared.metrics.set(metrics);
    }

    /// `/readyz`: the NATS connection, then each bot: ready when held here or when another
    /// node holds it (this one stands by), not ready while its lock cannot be read or its
    /// connection does not start.
    pub fn readiness(&self) -> Vec<Check> {
        self.shared.readiness()
    }

    /// [`Ingress::readiness`] for the listener, which outlives no ingress: it is stopped
    /// first.
    pub fn probe(&self) -> Arc<dyn Fn() -> Vec<Check> + Send + Sync> {
        let shared = self.shared.clone();
        Arc::new(move || shared.readiness())
    }

    /// Stops every bot: its platform connection closes and its lock is released, so a
    /// standby takes over at once instead of after the TTL.
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        self.watch.abort();
        self.shared.stop_topic_look();
        for bot in self.bots {
            let _ = bot.await;
        }
    }

    /// Stops at once without releasing anything, as a node that dies does: its locks age
    /// out after the TTL, and its platform connections go quiet. For tests of failover.
    pub async fn kill(self) {
        self.watch.abort();
        self.shared.stop_topic_look();
        // The platform connections first: a transport's poll loop and its sends run in
        // tasks of their own, which aborting the bot's task leaves running. A "dead" node
        // that kept polling would take updates the standby should get (and, polling after
        // it, make the platform end the standby's poll), so failover tests would not
        // test a dead process. Stopped, a transport polls nothing and refuses every send.
        let live: Vec<Arc<dyn Transport>> = self.shared.live().drain(..).collect();
        for transport in live {
            transport.stop().await;
        }
        for bot in &self.bots {
            bot.abort();
        }
        for bot in self.bots {
            let _ = bot.await;
        }
        // A dead machine's connection closes: a send in flight to it gets no answer.
        let _ = self.shared.client.drain().await;
    }
}

impl Shared {
    fn topic_bots(&self) -> std::sync::MutexGuard<'_, Vec<Arc<dyn Transport>>> {
        self.topic_bots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Vec<Arc<dyn Transport>>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn readiness(&self) -> Vec<Check> {
        let mut checks = vec![super::readiness::nats(&self.client)];
        checks.extend(self.standing().values().cloned());
        checks
    }

    fn standing(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Check>> {
        self.standing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records where the bot of `transport` stands.
    fn stand(&self, transport: &str, ready: bool, detail: &str) {
        let name = format!("bot {transport}");
        let check = if ready {
            Check::ready(name, detail)
        } else {
            Check::not_ready(name, detail)
        };
        self.standing().insert(transport.to_owned(), check);
    }

    fn log(&self, level: Level, event: &str, fields: &[(&str, String)]) {
        self.options
            .log
            .write(super::LOG_SCOPE, LogLine::new(level, event, fields));
    }

    /// One bot, for the life of the ingress: standby, hold, and standby again if the lock
    /// is lost.
    async fn run_bot(
        self: Arc<Self>,
        request: TransportRequest,
        mut stopping: watch::Receiver<bool>,
    ) {
        let Some(key) = lock_key(&request) else {
            self.log(
                Level::Error,
                "bot without a credential",
                &[("transport", request.id.clone())],
            );
            return;
        };
        let ttl = self.options.lock_ttl;
        let every = (ttl / 3).max(Duration::from_millis(100));
        let mut said_standby = false;
        loop {
            let lock = match self.locks.try_acquire(&key, &self.options.holder).await {
                Ok(lock) => lock,
                Err(error) => {
                    if matches!(error, BotLockError::Held { .. }) {
                        self.stand(&request.id, true, "standing by: another node holds it");
                    } else {
                        self.stand(&request.id, false, "cannot read its lock in NATS");
                    }
                    if !said_standby || !matches!(error, BotLockError::Held { .. }) {
                        self.log(
                            Level::Info,
                            "bot held elsewhere; standing by",
                            &[
                                ("transport", request.id.clone()),
                                ("why", error.to_string()),
                            ],
                        );
                        said_standby = true;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(every) => continue,
                        _ = stopping.wait_for(|stop| *stop) => return,
                    }
                }
            };
            said_standby = false;
            let mut kept = lock.keep_alive(every, ttl);
            let mut built = (self.options.build)(&request);
            for (level, text) in built.notes.drain(..) {
                self.log(
                    level,
                    "bot note",
                    &[("transport", request.id.clone()), ("text", text)],
                );
            }
            let Some(transport) = built.transports.pop() else {
                // Nothing to run (a missing credential is in the notes): give the lock back.
                let _ = kept.release().await;
                return;
            };
            let (sink, stream) = transport_core::inbound::channel(256);
            if let Err(error) = transport.start(sink).await {
                self.log(
                    Level::Error,
                    "bot did not start",
                    &[
                        ("transport", request.id.clone()),
                        ("error", error.to_string()),
                    ],
                );
                self.stand(&request.id, false, "its platform connection did not start");
                let _ = kept.release().await;
                tokio::select! {
                    _ = tokio::time::sleep(ttl) => continue,
                    _ = stopping.wait_for(|stop| *stop) => return,
                }
            }
            // Kept where `kill` finds it: the connection's own tasks outlive this one.
            self.live().push(transport.clone());
            // The sessions' sends (and the kept replies) go through the topics: a reply into
            // a topic deleted by hand makes it again. Read before anything is sent, so the
            // topics the previous holder made (or replaced) are known.
            let served: Arc<dyn Transport> = if transport.topic_place().is_some() {
                self.topics.reload(&request.id).await;
                Arc::new(TopicSends::new(transport.clone(), self.topics.clone()))
            } else {
                transport.clone()
            };
            // Replies parked while nobody held the bot go out first, before new sends are
            // served, so the chat reads them in the order they were made.
            let drain = match OutboxDrain::start(
                self.jetstream.clone(),
                &self.options.prefix,
                served.clone(),
                self.posts.clone(),
                self.options.gate.clone(),
                self.options.log.clone(),
            )
            .await
            {
                Ok(mut drain) => {
                    if !drain.drained(DRAIN_BEFORE_SERVING).await {
                        self.log(
                            Level::Warning,
                            "outbox not drained; serving new sends anyway",
                            &[("transport", request.id.clone())],
                        );
                    }
                    Some(drain)
                }
                Err(error) => {
                    self.log(
                        Level::Error,
                        "outbox not drained",
                        &[
                            ("transport", request.id.clone()),
                            ("error", error.to_string()),
                        ],
                    );
                    None
                }
            };
            let server = match OutboundServer::start(
                self.client.clone(),
                &self.options.prefix,
                served,
                self.posts.clone(),
                self.options.gate.clone(),
                self.options.log.clone(),
            )
            .await
            {
                Ok(server) => server,
                Err(error) => {
                    self.log(
                        Level::Error,
                        "bot's sends not served",
                        &[
                            ("transport", request.id.clone()),
                            ("error", error.to_string()),
                        ],
                    );
                    self.live().retain(|t| !Arc::ptr_eq(t, &transport));
                    transport.stop().await;
                    let _ = kept.release().await;
                    tokio::select! {
                        _ = tokio::time::sleep(every) => continue,
                        _ = stopping.wait_for(|stop| *stop) => return,
                    }
                }
            };
            self.log(
                Level::Info,
                "bot held",
                &[("transport", request.id.clone())],
            );
            self.stand(&request.id, true, "held here");
            if transport.topic_place().is_some() {
                // Read above, before the first look: the topics the previous holder made
                // are kept, not made twice.
                self.topic_bots().push(transport.clone());
            }
            let stop = tokio::select! {
                () = self.route_all(transport.as_ref(), stream) => false,
                lost = kept.lost() => {
                    self.stand(&request.id, false, "its lock was lost; taking it again");
                    // Another node has the bot now: stop at once, so two pollers overlap
                    // for one renewal at most.
                    self.log(
                        Level::Warning,
                        "bot lock lost",
                        &[("transport", request.id.clone()), ("error", lost.to_string())],
                    );
                    false
                }
                _ = stopping.wait_for(|stop| *stop) => true,
            };
            self.live().retain(|t| !Arc::ptr_eq(t, &transport));
            self.topic_bots().retain(|t| !Arc::ptr_eq(t, &transport));
            if let Some(drain) = drain {
                drain.stop();
            }
            transport.stop().await;
            server.stop();
            if stop {
                let _ = kept.release().await;
                return;
            }
            kept.abandon();
        }
    }

    /// Routes every message of one bot until its stream ends.
    ///
    /// The chats' bindings are read from the directory once and then kept: while this
    /// ingress holds the bot it is the only one that writes them, so the copy stays exact
    /// and a bound chat's message costs no directory round trip. The copy lives as long as
    /// this hold; after a lost lock another ingress may have rebound a chat. Only bound
    /// chats are kept, so strangers' chats cannot grow it.
    async fn route_all(&self, transport: &dyn Transport, mut stream: InboundStream) {
        let mut bound: HashMap<String, Binding> = HashMap::new();
        while let Some(inbound) = stream.recv().await {
            match inbound {
                Inbound::Alert { transport, text } => {
                    self.log(
                        Level::Error,
                        "transport alert",
                        &[("transport", transport), ("text", text)],
                    );
                }
                // Counted by the bot's CountedTransport (`counted_build`), as sends are.
                Inbound::Message { envelope, handled } => {
                    self.route(transport, &envelope, &mut bound).await;
                    // Published (stored by JetStream) or answered: the platform may be told.
                    drop(handled);
                }
            }
        }
    }

    async fn route(
        &self,
        transport: &dyn Transport,
        envelope: &Envelope,
        known: &mut HashMap<String, Binding>,
    ) {
        let conversation = format!("{}:{}", envelope.transport, envelope.conversation_id);
        // A session's topic is its own place: every message there is meant for the bot,
        // mentioned or not, and goes to that session without `/switch` (a stranger there
        // meets that session's pairing).
        let in_topic;
        let envelope = if self.topics.in_a_topic(envelope) {
            in_topic = Envelope {
                addressed: true,
                ..envelope.clone()
            };
            &in_topic
        } else {
            envelope
        };
        match self.topics.route(envelope) {
            TopicRoute::NotATopic => {}
            TopicRoute::Session(session) => {
                // Forgotten since the last look: answered, not published for nobody.
                if let Some(answer) = self.gone(&session, "").await {
                    self.reply(transport, envelope, &answer).await;
                    return;
                }
                let sequence = self.publish(&session, envelope).await;
                let place = format!(
                    "{conversation}:{}",
                    envelope.thread_id.as_deref().unwrap_or_default()
                );
                self.tell_if_offline(transport, envelope, &session, &place, sequence)
                    .await;
                return;
            }
            TopicRoute::Ended(name) => {
                self.reply(transport, envelope, &topics::ended_topic_answer(&name))
                    .await;
                return;
            }
        }
        let identity = format!("{}:{}", envelope.transport, envelope.user_id);
        let bound = match known.get(&conversation) {
            Some(binding) => Some(binding.clone()),
            None => {
                let read = self
                    .retrying(|| self.directory.binding(&conversation))
                    .await;
                if let Some(binding) = &read {
                    known.insert(conversation.clone(), binding.clone());
                }
                read
            }
        };
        let broker_command = routing::is_broker_command(&envelope.text);
        // The common case needs nothing else: a bound chat writing to its session.
        if let Some(binding) = &bound
            && !broker_command
        {
            // A session forgotten (or removed by hand) keeps nothing routed to it: the chat
            // hears why and is unbound, so its next message is routed afresh. A group's
            // chatter not meant for the bot is dropped without a word, as it is unbound.
            if let Some(answer) = self.gone(&binding.session, &binding.name).await {
                known.remove(&conversation);
                if let Err(error) = self.directory.unbind(&conversation).await {
                    self.log(
                        Level::Warning,
                        "binding not removed",
                        &[("error", error.to_string())],
                    );
                }
                if Audience::of(envelope.is_direct, envelope.addressed) != Audience::Chatter {
                    self.reply(transport, envelope, &answer).await;
                }
                return;
            }
            let sequence = self.publish(&binding.session, envelope).await;
            self.tell_if_offline(
                transport,
                envelope,
                &binding.session,
                &conversation,
                sequence,
            )
            .await;
            return;
        }
        let audience = Audience::of(envelope.is_direct, envelope.addressed);
        let sessions = self.retrying(|| self.directory.sessions()).await;
        let now = SystemClock.now_ms();
        // Who is paired where, and which sessions are live, only shape an answer, and a
        // group message not meant for the bot is never answered: group chatter in an
        // unbound chat reads no session state and no presence.
        let views = if audience != Audience::Chatter || broker_command {
            let presence = self.retrying(|| self.presence.read()).await;
            self.views(sessions, &presence, now).await
        } else {
            sessions
                .iter()
                .map(|listed| unpaired_view(listed, &Presence::default(), now))
                .collect()
        };
        let decision = routing::decide(
            &envelope.text,
            &identity,
            audience,
            bound.as_ref().map(|b| b.session.as_str()),
            bound.as_ref().map(|b| b.name.as_str()),
            views.as_slice(),
        );
        match decision {
            Decision::Deliver { session, bind } => {
                if bind {
                    self.bind(&conversation, &session, &views, known).await;
                }
                let sequence = self.publish(&session, envelope).await;
                self.tell_if_offline(transport, envelope, &session, &conversation, sequence)
                    .await;
            }
            // A stranger's `/switch` (Pair) is answered like a missing name; the cluster's
            // directory has no in-memory bindings, so it binds like a switch.
            Decision::Switch { session, reply } | Decision::Pair { session, reply } => {
                self.bind(&conversation, &session, &views, known).await;
                self.reply(transport, envelope, &reply).await;
            }
            Decision::Reply(text) => self.reply(transport, envelope, &text).await,
            Decision::Ignore => {}
        }
    }

    /// Every third of the TTL: which sessions are offline now (a session back online
    /// forgets which chats were told), the chats whose messages went to a session that
    /// turned out offline, sessions offline too long forgotten and forgotten ones' chats
    /// told, and the sessions by state for the metrics.
    async fn watch_sessions(self: Arc<Self>) {
        let mut ticks =
            tokio::time::interval((self.options.lock_ttl / 3).max(Duration::from_millis(100)));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let (entries, presence) =
                match (self.directory.entries().await, self.presence.read().await) {
                    (Ok(entries), Ok(presence)) => (entries, presence),
                    (Err(error), _) | (_, Err(error)) => {
                        warn(
                            self.options.log.as_ref(),
                            "nats_directory_failed",
                            &[("error", error.to_string())],
                        );
                        continue;
                    }
                };
            let now = SystemClock.now_ms();
            let (tombstones, mut sessions): (Vec<Listed>, Vec<Listed>) = entries
                .into_iter()
                .partition(|listed| listed.entry.forgotten.is_some());
            let expired: Vec<Listed> = sessions
                .iter()
                .filter(|l| {
                    forgetting::expired(l, &presence, now, self.options.forget_offline_after)
                })
                .cloned()
                .collect();
            for listed in &expired {
                self.expire(listed).await;
            }
            sessions.retain(|l| !expired.iter().any(|e| e.entry.key == l.entry.key));
            *self.listed() = Some(sessions.iter().map(|l| l.entry.key.clone()).collect());
            let newly_offline: Vec<Listed> = {
                let mut offline = self.offline();
                let now_offline: HashSet<&str> = sessions
                    .iter()
                    .filter(|l| state_of(&l.entry, &presence) == SessionState::Offline)
                    .map(|l| l.entry.key.as_str())
                    .collect();
                offline.retain(|key, _| now_offline.contains(key.as_str()));
                let newly = sessions
                    .iter()
                    .filter(|l| {
                        now_offline.contains(l.entry.key.as_str())
                            && !offline.contains_key(&l.entry.key)
                    })
                    .cloned()
                    .collect();
                for key in now_offline {
                    offline.entry(key.to_owned()).or_default();
                }
                newly
            };
            self.tell_recent(&newly_offline, &presence, now).await;
            self.settle_forgotten(&tombstones, now).await;
            if let Some(metrics) = self.metrics.get() {
                let (active, idle, offline) = census(&sessions, &presence);
                metrics.set_cluster_sessions(active, idle, offline);
            }
            self.look_at_topics(&sessions);
        }
    }

    /// Forgets a session offline longer than `--forget-offline-after` (every ingress
    /// looks; the entry's revision lets only one of them do it).
    async fn expire(&self, listed: &Listed) {
        let Some(after) = self.options.forget_offline_after else {
            return;
        };
        let why = ForgetReason::Expired {
            after_secs: after.as_secs(),
        };
        let token = super::subjects::session_token(&listed.entry.key);
        match forgetting::forget(
            &self.jetstream,
            &self.options.prefix,
            &self.directory,
            listed,
            why,
        )
        .await
        {
            Ok(forgot) => self.log(
                Level::Info,
                "session forgotten",
                &[
                    ("session", token),
                    ("name", forgetting::label(listed)),
                    ("why", forgetting::why_text(why)),
                    ("dropped", forgot.dropped.to_string()),
                ],
            ),
            // Back, or another ingress forgot it first: either way nothing to do here.
            Err(ForgetError::Changed { .. }) => {}
            Err(error) => self.log(
                Level::Warning,
                "session not forgotten",
                &[("session", token), ("error", error.to_string())],
            ),
        }
    }

    /// For each forgotten session: its tombstone dropped once kept long enough; otherwise,
    /// on each bot held here whose chats were not told yet, every chat its state remembers
    /// that is still bound to it is told once and unbound, what was published for it
    /// since it was forgotten is dropped, and the tombstone marked told for that bot.
    async fn settle_forgotten(&self, tombstones: &[Listed], now_ms: u64) {
        for listed in tombstones {
            let Some(forgotten) = &listed.entry.forgotten else {
                continue;
            };
            if forgetting::tombstone_spent(listed, now_ms) {
                if let Err(error) = self.directory.drop_tombstone(listed).await {
                    self.log(
                        Level::Warning,
                        "forgotten session not dropped",
                        &[("error", error.to_string())],
                    );
                }
                continue;
            }
            let held: Vec<Arc<dyn Transport>> = self
                .live()
                .iter()
                .filter(|t| !forgotten.told.contains(t.id()))
                .cloned()
                .collect();
            if held.is_empty() {
                continue;
            }
            let key = &listed.entry.key;
            let remembered = match self.states.load(key).await {
                Ok(loaded) => loaded
                    .document
                    .map(|document| {
                        guest::core::state::parse_session_state(&document, key)
                            .0
                            .conversations
                    })
                    .unwrap_or_default(),
                Err(error) => {
                    // Not retried (a state newer than this host-shim reads stays so, and a
                    // warning every look would bury the log): its chats hear it at their
                    // next message instead, which is answered.
                    self.log(
                        Level::Warning,
                        "session state unreadable",
                        &[("error", error.to_string())],
                    );
                    Vec::new()
                }
            };
            // Anything published between the forgetting and this look.
            if let Err(error) =
                forgetting::drop_waiting(&self.jetstream, &self.options.prefix, key).await
            {
                self.log(
                    Level::Warning,
                    "forgotten session's messages not dropped",
                    &[("error", error)],
                );
            }
            let machine = forgetting::machine(listed);
            let notice = forgetting::told_notice(&listed.entry.name, &machine, forgotten.why);
            for transport in held {
                let mut told = HashSet::new();
                for target in remembered.iter().filter(|t| t.transport == transport.id()) {
                    if !told.insert(target.conversation_id.clone()) {
                        continue;
                    }
                    let conversation = format!("{}:{}", target.transport, target.conversation_id);
                    let bound_here = self
                        .directory
                        .binding(&conversation)
                        .await
                        .ok()
                        .flatten()
                        .is_some_and(|b| &b.session == key);
                    if !bound_here {
                        told.remove(&target.conversation_id);
                        continue;
                    }
                    if let Err(error) = send_notice_to(
                        transport.as_ref(),
                        &target.conversation_id,
                        target.thread_id.as_deref(),
                        &notice,
                    )
                    .await
                    {
                        self.log(
                            Level::Warning,
                            "ingress reply not sent",
                            &[
                                ("transport", transport.id().to_owned()),
                                ("error", error.to_string()),
                            ],
                        );
                    }
                    let _ = self.directory.unbind(&conversation).await;
                }
                match self.directory.mark_told(key, transport.id()).await {
                    Ok(_) => self.log(
                        Level::Info,
                        "forgotten session's chats told",
                        &[
                            ("session", super::subjects::session_token(key)),
                            ("transport", transport.id().to_owned()),
                            ("chats", told.len().to_string()),
                        ],
                    ),
                    Err(error) => self.log(
                        Level::Warning,
                        "forgotten session's chats told, not marked",
                        &[("error", error.to_string())],
                    ),
                }
            }
        }
    }

    /// Tells the chats whose messages went to `newly_offline` sessions while the last look
    /// still saw them online, if the message still waits in the stream (the session did
    /// not take it before it went) and the chat was not told this offline period. The
    /// records of sessions still online are dropped once no look needs them: a session
    /// that died before a message was published is seen offline within 1⅓ TTL of it.
    async fn tell_recent(&self, newly_offline: &[Listed], presence: &Presence, now_ms: u64) {
        let kept = self.options.lock_ttl * 2 + Duration::from_secs(1);
        let due: Vec<(Listed, Vec<Recent>)> = {
            let mut recent = self.recent();
            let due = newly_offline
                .iter()
                .filter_map(|listed| {
                    let chats = recent.remove(&listed.entry.key)?;
                    Some((listed.clone(), chats.into_values().collect()))
                })
                .collect();
            recent.retain(|_, chats| {
                chats.retain(|_, r| r.at.elapsed() < kept);
                !chats.is_empty()
            });
            due
        };
        if due.is_empty() {
            return;
        }
        let Ok(stream) = self
            .jetstream
            .get_stream(self.options.prefix.inbound_stream())
            .await
        else {
            return;
        };
        for (listed, chats) in due {
            let view = unpaired_view(&listed, presence, now_ms);
            // What its consumer handed out: a message the session took before it went (a
            // prompt answered but not yet acked when it stopped) does not wait for it.
            let delivered = stream
                .consumer_info(session_consumer(&listed.entry.key))
                .await
                .map_or(0, |info| info.delivered.stream_sequence);
            for chat in chats {
                // Taken, or acked (the work queue dropped it): not waiting.
                if chat.sequence <= delivered
                    || stream.get_raw_message(chat.sequence).await.is_err()
                {
                    continue;
                }
                let transport = self
                    .live()
                    .iter()
                    .find(|t| t.id() == chat.transport)
                    .cloned();
                let Some(transport) = transport else {
                    continue;
                };
                self.tell_offline(transport.as_ref(), &listed, view.clone(), &chat)
                    .await;
            }
        }
    }

    fn listed(&self) -> std::sync::MutexGuard<'_, Option<HashSet<String>>> {
        self.listed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<String, Recent>>> {
        self.recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The answer for a chat whose message is for `session` (bound as `name`), if that
    /// session was forgotten or is no longer in the directory at all. A session listed at
    /// the last look costs nothing; any other is read.
    async fn gone(&self, session: &str, name: &str) -> Option<String> {
        if self
            .listed()
            .as_ref()
            .is_some_and(|listed| listed.contains(session))
        {
            return None;
        }
        match self.retrying(|| self.directory.entry(session)).await {
            Some(listed) => listed.entry.forgotten.as_ref().map(|forgotten| {
                forgetting::forgotten_answer(
                    &listed.entry.name,
                    &forgetting::machine(&listed),
                    forgotten.why,
                )
            }),
            None => Some(forgetting::unlisted_answer(name)),
        }
    }

    /// Makes, reopens and ends the held bots' session topics for the sessions listed now
    /// (offline ones keep theirs). In a task of its own, so a slow platform (making a
    /// hundred topics under a rate limit) does not hold up telling offline sessions; a
    /// look still running makes the next one skip.
    fn look_at_topics(&self, sessions: &[Listed]) {
        let bots: Vec<Arc<dyn Transport>> = self.topic_bots().clone();
        if bots.is_empty() {
            return;
        }
        let listed: Vec<ListedSession> = sessions
            .iter()
            .map(|listed| {
                let view = unpaired_view(listed, &Presence::default(), 0);
                // As routing counts them: its state's pairs (announced by its node in its
                // entry) and the config's `allowUsers`.
                let mut paired = listed.entry.paired.clone();
                paired.extend(self.options.allowed.iter().cloned());
                ListedSession {
                    key: view.key,
                    name: view.name,
                    cwd: view.cwd,
                    machine: view.machine,
                    paired,
                }
            })
            .collect();
        let mut last = self
            .topic_look
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.as_ref().is_some_and(|look| !look.is_finished()) {
            // The last look still runs (a slow platform): this one is skipped.
            return;
        }
        let keeper = self.topics.clone();
        *last = Some(tokio::spawn(async move {
            for bot in bots {
                keeper.look(bot.as_ref(), &listed).await;
            }
        }));
    }

    fn stop_topic_look(&self) {
        let look = self
            .topic_look
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(look) = look {
            look.abort();
        }
    }

    fn offline(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
        self.offline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Tells `conversation` that `session` is offline and its message (stream sequence
    /// `sequence`) waits, once per offline period. A session online at the last look is
    /// not read again (that would cost every message two round trips): its message is
    /// remembered, and the next look tells the chat if the session turns out to have gone
    /// and the message still waits. One offline at the last look is checked again against
    /// the buckets first: a session that came back since is not reported. Only a sender
    /// paired with the session is told: a stranger bound to it on its way to pairing
    /// learns nothing of its machine or when it was last seen (its message waits all the
    /// same).
    async fn tell_if_offline(
        &self,
        transport: &dyn Transport,
        envelope: &Envelope,
        session: &str,
        conversation: &str,
        sequence: u64,
    ) {
        let chat = Recent {
            sequence,
            at: tokio::time::Instant::now(),
            transport: envelope.transport.clone(),
            conversation_id: envelope.conversation_id.clone(),
            thread_id: envelope.thread_id.clone(),
            place: conversation.to_owned(),
            identity: format!("{}:{}", envelope.transport, envelope.user_id),
        };
        let offline_told = self
            .offline()
            .get(session)
            .map(|told| told.contains(conversation));
        match offline_told {
            // Told already this offline period.
            Some(true) => return,
            Some(false) => {}
            None => {
                self.remember(session, chat);
                return;
            }
        }
        let (Ok(Some(listed)), Ok(presence)) = (
            self.directory.session(session).await,
            self.presence.of(session).await,
        ) else {
            return;
        };
        let view = unpaired_view(&listed, &presence, SystemClock.now_ms());
        if view.state != SessionState::Offline {
            self.offline().remove(session);
            return;
        }
        self.tell_offline(transport, &listed, view, &chat).await;
    }

    /// Remembers the last message of a chat to a session the last look found online, for
    /// the next look. Bounded per session: a chat past the bound is not told at that look
    /// (it is at its next message, once the session is known offline).
    fn remember(&self, session: &str, chat: Recent) {
        let mut recent = self.recent();
        let chats = recent.entry(session.to_owned()).or_default();
        if chats.len() < RECENT_CHATS || chats.contains_key(&chat.place) {
            chats.insert(chat.place.clone(), chat);
        }
    }

    /// Tells `chat` (if its sender is paired with the session) that the session of
    /// `listed`, seen as `view`, is offline, unless it was told this offline period by
    /// this ingress or any other.
    async fn tell_offline(
        &self,
        transport: &dyn Transport,
        listed: &Listed,
        view: SessionView,
        chat: &Recent,
    ) {
        let session = listed.entry.key.as_str();
        if !self
            .view(view.clone())
            .await
            .paired
            .contains(&chat.identity)
        {
            return;
        }
        let first = {
            let mut offline = self.offline();
            offline
                .entry(session.to_owned())
                .or_default()
                .insert(chat.place.clone())
        };
        if !first {
            return;
        }
        // The period is the entry's revision: nobody writes an offline session's entry.
        let first = match self.told.first(session, &chat.place, listed.revision).await {
            Ok(first) => first,
            Err(error) => {
                // Told twice after a failover is better than never told.
                self.log(
                    Level::Warning,
                    "offline notice not marked",
                    &[("error", error.to_string())],
                );
                true
            }
        };
        if first {
            let text = offline_notice(&view);
            if let Err(error) = send_notice_to(
                transport,
                &chat.conversation_id,
                chat.thread_id.as_deref(),
                &text,
            )
            .await
            {
                self.log(
                    Level::Warning,
                    "ingress reply not sent",
                    &[
                        ("transport", chat.transport.clone()),
                        ("error", error.to_string()),
                    ],
                );
            }
        }
    }

    /// Runs a directory call until NATS answers, holding this message (and so the
    /// platform's confirmation of it) meanwhile.
    async fn retrying<T, F, Fut>(&self, call: F) -> T
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, super::directory::DirectoryError>>,
    {
        let mut backoff = Duration::from_millis(100);
        loop {
            match call().await {
                Ok(value) => return value,
                Err(error) => {
                    warn(
                        self.options.log.as_ref(),
                        "nats_directory_failed",
                        &[("error", error.to_string())],
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    /// Publishes until JetStream has stored it: the platform is confirmed only after.
    /// Returns its sequence in the stream.
    async fn publish(&self, session: &str, envelope: &Envelope) -> u64 {
        let mut backoff = Duration::from_millis(100);
        loop {
            let error = match self.publisher.publish(session, envelope).await {
                Ok(published) => return published.sequence,
                Err(error) => error,
            };
            warn(
                self.options.log.as_ref(),
                "nats_publish_failed",
                &[
                    ("transport", envelope.transport.clone()),
                    ("error", error.to_string()),
                ],
            );
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    async fn bind(
        &self,
        conversation: &str,
        session: &str,
        views: &[SessionView],
        known: &mut HashMap<String, Binding>,
    ) {
        let name = views
            .iter()
            .find(|v| v.key == session)
            .map(|v| v.name.clone())
            .unwrap_or_default();
        let binding = Binding {
            session: session.to_owned(),
            name,
        };
        match self.directory.bind(conversation, &binding).await {
            Ok(()) => {
                known.insert(conversation.to_owned(), binding);
            }
            Err(error) => {
                // Not kept either: the next message reads the directory again.
                known.remove(conversation);
                self.log(
                    Level::Warning,
                    "binding not saved",
                    &[("error", error.to_string())],
                );
            }
        }
    }

    async fn reply(&self, transport: &dyn Transport, envelope: &Envelope, text: &str) {
        if let Err(error) = send_notice(transport, envelope, text).await {
            self.log(
                Level::Warning,
                "ingress reply not sent",
                &[
                    ("transport", envelope.transport.clone()),
                    ("error", error.to_string()),
                ],
            );
        }
    }

    /// The sessions as routing sees them: who is paired with each comes from its state in
    /// the KV bucket (read fresh: a session may have paired someone a moment ago), plus
    /// the identities the config allows. The states are read [`STATE_READS`] at a time, in
    /// order: one after another, a first message to a bot of a thousand sessions waited
    /// for a thousand round trips.
    async fn views(
        &self,
        sessions: Vec<Listed>,
        presence: &Presence,
        now_ms: u64,
    ) -> Vec<SessionView> {
        futures_util::stream::iter(sessions)
            .map(|listed| self.view(unpaired_view(&listed, presence, now_ms)))
            .buffered(STATE_READS)
            .collect()
            .await
    }

    async fn view(&self, mut view: SessionView) -> SessionView {
        view.paired = self.options.allowed.clone();
        match self.states.load(&view.key).await {
            Ok(loaded) => {
                if let Some(document) = loaded.document {
                    let (state, _) = guest::core::state::parse_session_state(&document, &view.key);
                    view.paired
                        .extend(state.trusted.keys().map(|i| i.as_str().to_owned()));
                }
            }
            Err(error) => {
                self.log(
                    Level::Warning,
                    "session state unreadable",
                    &[("error", error.to_string())],
                );
            }
        }
        view
    }
}

/// Session states read at once for [`Shared::views`]: enough to hide the round trips,
/// few enough not to flood the KV bucket from one message.
const STATE_READS: usize = 32;

/// Chats remembered per session between two looks ([`Shared::remember`]).
const RECENT_CHATS: usize = 256;

/// The last message of a chat to a session the last look found online.
#[derive(Debug, Clone)]
struct Recent {
    /// Its stream sequence: gone from the work-queue stream once the session acked it.
    sequence: u64,
    /// When it was published: a record no look needs any more is dropped.
    at: tokio::time::Instant,
    /// Where the notice goes: the bot, the conversation and its thread.
    transport: String,
    conversation_id: String,
    thread_id: Option<String>,
    /// The place the "told" mark is for (`<transport>:<conversation>`, and the thread in
    /// a session's topic).
    place: String,
    /// Who sent it (`<transport>:<user>`): only a sender paired with the session is told.
    identity: String,
}

/// A directory entry as routing sees it at `now_ms` (this node's clock), with no one
/// paired: offline unless a live node holds its lease, and how long ago it was last
/// active (or, offline, last seen).
fn unpaired_view(listed: &Listed, presence: &Presence, now_ms: u64) -> SessionView {
    let entry = &listed.entry;
    let machine = if entry.machine.is_empty() {
        // Written by a node before machines were recorded: its description says.
        super::directory::machine_in(&entry.node)
    } else {
        entry.machine.clone()
    };
    let mut view = SessionView::new(&entry.key, &entry.name, &entry.cwd, &machine);
    view.state = state_of(entry, presence);
    view.ago = Some(listed.ago(now_ms, view.state != SessionState::Offline));
    view.usage = entry.usage;
    // Only while it is offline: a node that runs it now has nothing to be refused.
    if view.state == SessionState::Offline {
        view.note.clone_from(&entry.refused);
    }
    view
}

/// What a chat bound to an offline session is told (once per offline period) when its
/// message was kept for it.
pub fn offline_notice(view: &SessionView) -> String {
    let seen = view
        .ago
        .map_or_else(|| "a while ago".to_owned(), routing::ago);
    let why = view
        .note
        .as_ref()
        .map_or_else(String::new, |note| format!(" ⚠ {note}."));
    format!(
        "⏸ {} on {} is offline (last seen {seen}); your message waits and is delivered when \
         it is back.{why}",
        view.name, view.machine
    )
}

/// The sessions counted by state (active, idle, offline), for the metrics.
fn census(sessions: &[Listed], presence: &Presence) -> (usize, usize, usize) {
    sessions
        .iter()
        .fold(
            (0, 0, 0),
            |(active, idle, offline), listed| match state_of(&listed.entry, presence) {
                SessionState::Busy => (active + 1, idle, offline),
                SessionState::Idle => (active, idle + 1, offline),
                SessionState::Offline => (active, idle, offline + 1),
            },
        )
}

/// The bot lock's key for `request`: its platform and the *name* of its first credential
/// variable (two ingress nodes configured alike contend for one key).
fn lock_key(request: &TransportRequest) -> Option<String> {
    let platform = crate::factory::PLATFORMS
        .iter()
        .find(|p| p.settings.id == request.id)?;
    let settings = crate::factory::settings_object(request);
    let env_name = platform
        .settings
        .env_keys()
        .find_map(|key| settings.get(key.name).and_then(|v| v.as_str()))?;
    Some(bot_lock_key(&request.id, env_name))
}
