//! One bot, many sessions (docs/decisions.md#decision-14-one-host-one-bot-many-sessions): the
//! broker owns each bot connection and its lock once, and each attached session (its own component
//! instance, state and trust) talks through a [`shared::RoutedTransport`] in its place.
//!
//! Inbound, the broker routes every message of a shared bot by its conversation's binding
//! (`routing.rs`) and answers `/sessions` and `/switch` itself. Outbound, a session's send
//! to a conversation bound to another session is refused, and the bridge reports it
//! locally like any failed send. Pairing stays per session: the broker never sees a code.

pub mod bindings;
mod private_topics;
pub mod routing;
mod session_sinks;
pub mod shared;
pub mod strangers;
pub mod topics;

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use transport_core::{Inbound, InboundSink, InboundStream, Transport};

use crate::agent::Agent;
use crate::disk::lock::LockDir;
use crate::disk::state_db::StateReader;
use crate::disk::state_store::StateStoreError;
use crate::factory;
use crate::local::clock::Clock;
use crate::local::logging::{LogLine, LogSink};
use crate::ops::counted_transport::CountedTransport;
use crate::ops::health::Check;
use crate::ops::metrics::Metrics;
use crate::sandbox::hibernation::HibernatedCount;
use crate::sandbox::pairing_budget::PairingBudget;
use crate::sandbox::session::{Built, TransportFactory};
use crate::wit::session::{ConfigSource, TransportRequest};
use crate::wit::types::Level;
use bindings::{Binding, Bindings};
use indexmap::IndexMap;
use routing::{Audience, Census, Decision, Roster, SessionState, SessionView, UsageSoFar};
use session_sinks::SessionSinks;
use shared::{RoutedTransport, Shared, lock};
use strangers::{Answer, StrangerAnswers};
use topics::{OnAttach, TopicAt, TopicRecord, TopicRoute, Topics};

/// The shortest time between two writes of the status file: `doctor` may show an attach a
/// second late.
const STATUS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// The log's session name for the broker's own lines.
const LOG_NAME: &str = "broker";

/// Why a session could not attach.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrokerError {
    /// The key is attached already (a second pi on one session).
    #[error(
        "session {0:?} is already attached to this broker; stop the other one first, or use another session key"
    )]
    AlreadyAttached(String),
}

/// Builds the real transport one validated request asks for.
pub type BuildOne = Arc<dyn Fn(&TransportRequest) -> Built + Send + Sync>;

/// The production [`BuildOne`]: the platform crates, credentials from the environment.
pub fn build_from_environment(transport_state_dir: Option<PathBuf>) -> BuildOne {
    Arc::new(move |request| {
        let var = |name: &str| std::env::var(name).ok();
        factory::build(
            std::slice::from_ref(request),
            None,
            &factory::Environment {
                var: &var,
                state_dir: transport_state_dir.clone(),
            },
        )
    })
}

/// The broker's notices are rendered by the bridge's own pipeline, natively.
pub use crate::native_guest::{send_notice, send_notice_to};

/// What the broker needs from its process.
pub struct BrokerOptions {
    /// Where the bots' locks go.
    pub locks: LockDir,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The broker's log.
    pub log: Arc<dyn LogSink>,
    /// Builds the real transport for one request (`factory::build` with the process's
    /// environment; a fake in tests).
    pub build: BuildOne,
    /// The state file, read (never written) for who is paired with which session.
    pub state_file: Option<PathBuf>,
    /// Conversation bindings (kept in the state database by `serve`).
    pub bindings: Bindings,
    /// Where to keep the list of attached sessions for `doctor` (none in tests).
    pub status_file: Option<PathBuf>,
    /// The pairing failure budget every attached session shares (kept in the state
    /// database by `serve`; a fresh one in tests).
    pub pairing: PairingBudget,
}

/// What `doctor` reads of a running broker.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Status {
    /// The broker's process id.
    pub pid: u32,
    /// Attached sessions, in attach order (`busy` as of the last attach or detach).
    pub sessions: Vec<SessionSummary>,
}

/// The status file next to `state_file`.
pub fn status_path_beside(state_file: &std::path::Path) -> PathBuf {
    state_file.with_file_name("broker-status.json")
}

/// Reads a broker's status file; the error says what was wrong, for `doctor`.
pub fn read_status(path: &std::path::Path) -> Result<Status, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is malformed: {e}", path.display()))
}

/// One attached session.
struct Attached {
    key: String,
    name: String,
    cwd: String,
    agent: Arc<dyn Agent>,
    /// When a chat's message last reached it (or it attached), ms since the epoch.
    last_active_ms: u64,
    /// Identities the session's config trusts without pairing (`allowUsers`), sorted, each
    /// once. A boxed list, not a `BTreeSet`: only walked at attach and detach (the lookups
    /// go through `Inner::allowing`), and a set's first node was about 300 bytes for one
    /// identity, kept by every session for its whole life (docs/scaling.md#idle-sessions).
    allowed: Box<[String]>,
    /// The session's inbound sink, by shared transport (fingerprint).
    sinks: SessionSinks,
}

/// The broker's books. Every question a message asks is one lookup here: with 10,000
/// sessions, scanning them all for each chat's first message cost 15 ms.
#[derive(Default)]
struct Inner {
    /// Attached sessions by key, in attach order (the order `/sessions` numbers them).
    sessions: IndexMap<String, Attached>,
    /// Attached sessions' keys by lower-cased name (`/switch <name>`; unique names).
    names: HashMap<String, String>,
    /// The sessions with a sink on each shared bot, by fingerprint.
    on_bot: HashMap<String, HashSet<String>>,
    /// The sessions whose config allows each identity without pairing (`allowUsers`).
    allowing: HashMap<String, HashSet<String>>,
    bindings: Bindings,
    shared: HashMap<String, Arc<Shared>>,
    /// Every topic made for a session (docs/broker.md#a-topic-per-session).
    topics: Topics,
}

/// An attached session as `doctor` and the status line show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionSummary {
    /// Session key.
    pub key: String,
    /// Its name in `/sessions`.
    pub name: String,
    /// Working directory.
    pub cwd: String,
    /// A turn is running.
    pub busy: bool,
}

/// The broker: shared transports, attached sessions, bindings.
pub struct Broker {
    locks: LockDir,
    clock: Arc<dyn Clock>,
    log: Arc<dyn LogSink>,
    build: BuildOne,
    state_file: Option<PathBuf>,
    /// Wakes the thread that writes the status file for `doctor` (none in tests).
    status: Option<Mutex<std::sync::mpsc::Sender<()>>>,
    /// Held while the status file is written or removed; `true` once the broker stopped
    /// (a write after the removal would leave a running broker's file behind).
    status_stopped: Arc<Mutex<bool>>,
    status_file: Option<PathBuf>,
    inner: Mutex<Inner>,
    routers: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Answers to strangers, sent off the routing path (started with the first router).
    answers: OnceLock<Arc<StrangerAnswers>>,
    /// The one pairing failure budget of every session attached here: a guesser facing
    /// ten sessions of the shared bot gets the judged guesses of one.
    pairing: PairingBudget,
    /// The state database, opened for reading once: opening it checks the whole file
    /// (`PRAGMA quick_check`), which at 10,000 sessions cost more than the message that
    /// asked (`/sessions`, `/switch`). A reader sees every commit made since it opened.
    reader: Mutex<Option<Arc<StateReader>>>,
    /// The operator's metrics, when `--metrics` asked for them.
    metrics: OnceLock<Arc<Metrics>>,
    /// This machine's host name: every session attached here runs on it (`/sessions`, and
    /// each session's topic name).
    machine: String,
    /// A session's topic being made or opened, by `(session, fingerprint)`: its end waits
    /// for it, or a session stopping at once would leave its topic open.
    topic_tasks: Mutex<HashMap<(String, String), tokio::task::JoinHandle<()>>>,
    /// Held while a deleted topic is replaced: two sends failing at once make one topic.
    topic_replacing: tokio::sync::Mutex<()>,
    /// How many of the attached sessions are hibernated (docs/scaling.md#idle-sessions).
    hibernated: HibernatedCount,
    /// This broker, for the tasks a message starts (a user's private topic once paired).
    me: Weak<Broker>,
}

impl Broker {
    /// A broker with no session attached yet.
    pub fn new(options: BrokerOptions) -> Arc<Broker> {
        if let Some(store) = options.bindings.store() {
            // Nobody waits for a binding's commit: a failed one is told here, or its chat
            // goes to another session after a restart with nothing in the log to say why.
            let log = options.log.clone();
            store.report_lost_to(move |lost| {
                log.write(
                    LOG_NAME,
                    LogLine::new(
                        Level::Warning,
                        "bindings not saved",
                        &[("error", lost.to_string())],
                    ),
                );
            });
        }
        let status_stopped = Arc::new(Mutex::new(false));
        let topics = kept_topics(options.bindings.store().as_deref(), options.log.as_ref());
        let store = options.bindings.store();
        let broker = Arc::new_cyclic(|me| Broker {
            status: options.status_file.as_ref().and_then(|path| {
                spawn_status_writer(
                    me.clone(),
                    path.clone(),
                    status_stopped.clone(),
                    options.log.as_ref(),
                )
                .map(Mutex::new)
            }),
            status_stopped,
            locks: options.locks,
            clock: options.clock,
            log: options.log,
            build: options.build,
            state_file: options.state_file,
            status_file: options.status_file,
            inner: Mutex::new(Inner {
                bindings: options.bindings,
                topics,
                ..Inner::default()
            }),
            routers: Mutex::new(Vec::new()),
            answers: OnceLock::new(),
            pairing: options.pairing,
            reader: Mutex::new(None),
            metrics: OnceLock::new(),
            machine: crate::disk::lock::host_name(),
            topic_tasks: Mutex::new(HashMap::new()),
            topic_replacing: tokio::sync::Mutex::new(()),
            hibernated: HibernatedCount::default(),
            me: me.clone(),
        });
        if let Some(store) = store {
            // A pairing is the save that records it: heard here once it is on disk.
            let me = Arc::downgrade(&broker);
            store.report_trusted_to(move |session, trusted| {
                if let Some(broker) = me.upgrade() {
                    broker.trust_saved(session, trusted);
                }
            });
        }
        broker
    }

    /// The count of this broker's hibernated sessions: each session spawned for it
    /// raises it while it sleeps (`Hibernation::after`), the metrics read it.
    pub fn hibernated(&self) -> HibernatedCount {
        self.hibernated.clone()
    }

    /// Counts what passes through the shared bots in `metrics` from now on (set once; a
    /// second call is ignored).
    pub fn count_in(&self, metrics: Arc<Metrics>) {
        let _ = self.metrics.set(metrics);
    }

    pub(crate) fn metrics(&self) -> Option<&Metrics> {
        self.metrics.get().map(Arc::as_ref)
    }

    /// One readiness check per shared bot: ready once its connection runs (identified,
    /// its lock held by this broker, started). A bot no session has asked for yet is
    /// not listed: the broker starts bots on a session's demand.
    pub fn bot_checks(&self) -> Vec<Check> {
        let shared: Vec<Arc<Shared>> = self.inner(|inner| inner.shared.values().cloned().collect());
        let mut checks: Vec<Check> = shared.iter().map(|shared| shared.readiness()).collect();
        checks.sort_by(|a, b| a.name.cmp(&b.name));
        checks
    }

    /// The pairing failure budget the sessions attached here share (their
    /// `SessionSpec::pairing`).
    pub fn pairing(&self) -> PairingBudget {
        self.pairing.clone()
    }

    fn inner<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        f(&mut lock(&self.inner))
    }

    fn log(&self, level: Level, event: &str, fields: &[(&str, String)]) {
        self.log.write(LOG_NAME, LogLine::new(level, event, fields));
    }

    /// Attaches a session before its bridge starts (so its transports find it), and
    /// returns the name chats reach it by: `name` (its pi session name or its
    /// directory's), made unique with `-2`, `-3`… when another session has it.
    pub fn attach(
        &self,
        key: &str,
        name: &str,
        cwd: &str,
        config_sources: &[ConfigSource],
        agent: Arc<dyn Agent>,
    ) -> Result<String, BrokerError> {
        let allowed: BTreeSet<String> = crate::native_guest::read_config_natively(config_sources)
            .bridge
            .allow_users
            .iter()
            .map(|identity| identity.as_str().to_owned())
            .collect();
        let allowed: Box<[String]> = allowed.into_iter().collect();
        let now = self.clock.now_ms();
        let name = self.inner(|inner| {
            if inner.sessions.contains_key(key) {
                return Err(BrokerError::AlreadyAttached(key.to_owned()));
            }
            let base = if name.trim().is_empty() {
                "session"
            } else {
                name.trim()
            };
            let mut unique = base.to_owned();
            let mut n = 2;
            while inner.names.contains_key(&unique.to_ascii_lowercase()) {
                unique = format!("{base}-{n}");
                n += 1;
            }
            inner
                .names
                .insert(unique.to_ascii_lowercase(), key.to_owned());
            for identity in &allowed {
                inner
                    .allowing
                    .entry(identity.clone())
                    .or_default()
                    .insert(key.to_owned());
            }
            inner.sessions.insert(
                key.to_owned(),
                Attached {
                    key: key.to_owned(),
                    name: unique.clone(),
                    cwd: cwd.to_owned(),
                    agent,
                    last_active_ms: now,
                    allowed,
                    sinks: SessionSinks::default(),
                },
            );
            Ok(unique)
        })?;
        self.log(
            Level::Info,
            "session attached",
            &[("session", key.to_owned())],
        );
        self.write_status();
        Ok(name)
    }

    /// Forgets a session after its bridge has shut down (its pending replies were
    /// reported locally by that shutdown). Its bindings stay: its chats hear that it is
    /// away until it comes back or they `/switch`.
    pub fn detach(&self, key: &str) {
        self.inner(|inner| {
            // Removed in place, keeping the others' attach order (their `/sessions` numbers).
            let Some(gone) = inner.sessions.shift_remove(key) else {
                return;
            };
            inner.names.remove(&gone.name.to_ascii_lowercase());
            for identity in &gone.allowed {
                if let Some(keys) = inner.allowing.get_mut(identity) {
                    keys.remove(key);
                    if keys.is_empty() {
                        inner.allowing.remove(identity);
                    }
                }
            }
            for fingerprint in gone.sinks.keys() {
                if let Some(keys) = inner.on_bot.get_mut(fingerprint) {
                    keys.remove(key);
                }
            }
        });
        self.log(
            Level::Info,
            "session detached",
            &[("session", key.to_owned())],
        );
        // Its approvals died with it; the dashboard must not list them as waiting.
        if let Some(metrics) = self.metrics.get() {
            metrics.recent().forget_session(key);
        }
        self.write_status();
    }

    /// Asks the status thread to write the status file. Never waits: the file lists every
    /// attached session, and writing it in each attach cost O(sessions) there.
    fn write_status(&self) {
        if let Some(status) = &self.status {
            let _ = lock(status).send(());
        }
    }

    /// Writes the status file now (the status thread).
    fn write_status_now(&self, path: &Path) {
        let status = Status {
            pid: std::process::id(),
            sessions: self.sessions(),
        };
        let stopped = lock(&self.status_stopped);
        if *stopped {
            return;
        }
        let written = serde_json::to_string_pretty(&status)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                let temporary = path.with_extension("json.tmp");
                write_private(&temporary, text.as_bytes())
                    .and_then(|()| std::fs::rename(&temporary, path))
                    .map_err(|e| e.to_string())
            });
        drop(stopped);
        if let Err(error) = written {
            self.log(
                Level::Warning,
                "broker status not written",
                &[("path", path.display().to_string()), ("error", error)],
            );
        }
    }

    /// The transport factory for session `key`: shared bots in place of its own.
    pub fn transports(self: &Arc<Self>, key: &str) -> TransportFactory {
        let broker = Arc::downgrade(self);
        let session = key.to_owned();
        Box::new(move |requests| {
            let Some(broker) = broker.upgrade() else {
                return Built::default();
            };
            broker.build_for(&session, requests)
        })
    }

    fn build_for(self: &Arc<Self>, session: &str, requests: &[TransportRequest]) -> Built {
        let mut built = Built::default();
        for request in requests {
            let fingerprint = format!("{request:?}");
            let existing = self.inner(|inner| inner.shared.get(&fingerprint).cloned());
            let shared = match existing {
                Some(shared) => shared,
                None => {
                    let mut one = (self.build)(request);
                    built.notes.append(&mut one.notes);
                    let Some(real) = one.transports.pop() else {
                        continue;
                    };
                    // Every path to the platform goes through `real`: counted there once.
                    let real = match self.metrics.get() {
                        Some(metrics) => Arc::new(CountedTransport::new(real, metrics.clone()))
                            as Arc<dyn Transport>,
                        None => real,
                    };
                    let shared = Shared::new(fingerprint.clone(), real);
                    // Two sessions building the same bot at once keep the first.
                    self.inner(|inner| inner.shared.entry(fingerprint).or_insert(shared).clone())
                }
            };
            built.transports.push(Arc::new(RoutedTransport {
                shared,
                session: session.to_owned(),
                broker: Arc::downgrade(self),
            }) as Arc<dyn Transport>);
        }
        built
    }

    fn register_sink(
        &self,
        session: &str,
        fingerprint: &Arc<str>,
        transport_id: &str,
        sink: InboundSink,
    ) -> Result<(), transport_core::TransportError> {
        self.inner(|inner| {
            let Some(attached) = inner.sessions.get_mut(session) else {
                return Err(transport_core::TransportError::Failed(
                    "this session is not attached to the broker (a host bug)".into(),
                ));
            };
            if attached.sinks.contains_key(fingerprint) {
                return Err(transport_core::TransportError::AlreadyStarted(
                    transport_id.to_owned(),
                ));
            }
            attached.sinks.insert(fingerprint.clone(), sink);
            inner
                .on_bot
                .entry(fingerprint.to_string())
                .or_default()
                .insert(session.to_owned());
            Ok(())
        })
    }

    fn unregister_sink(&self, session: &str, fingerprint: &str) {
        self.inner(|inner| {
            if let Some(attached) = inner.sessions.get_mut(session) {
                attached.sinks.remove(fingerprint);
            }
            if let Some(keys) = inner.on_bot.get_mut(fingerprint) {
                keys.remove(session);
            }
        });
    }

    fn sessions_on(&self, fingerprint: &str) -> usize {
        self.inner(|inner| inner.on_bot.get(fingerprint).map_or(0, HashSet::len))
    }

    /// Starts routing the real transport's stream; called once per shared transport.
    fn run_router(self: &Arc<Self>, shared: Arc<Shared>, mut stream: InboundStream) {
        self.answers
            .get_or_init(|| StrangerAnswers::spawn(self.clock.clone(), self.log.clone()));
        let broker: Weak<Broker> = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            while let Some(inbound) = stream.recv().await {
                let Some(broker) = broker.upgrade() else {
                    break;
                };
                broker.route(&shared, inbound).await;
            }
        });
        lock(&self.routers).push(task);
    }

    /// Routes one inbound message or alert of `shared`'s bot.
    async fn route(&self, shared: &Arc<Shared>, inbound: Inbound) {
        let (envelope, handled) = match inbound {
            Inbound::Alert { transport, text } => {
                let sinks = self.sinks_on(&shared.fingerprint);
                if sinks.is_empty() {
                    // Nobody's terminal to show it in: the broker's log says it.
                    self.log(
                        Level::Error,
                        "transport alert",
                        &[("transport", transport.clone()), ("text", text.clone())],
                    );
                }
                for sink in sinks {
                    sink.alert(&transport, text.clone());
                }
                return;
            }
            Inbound::Message { envelope, handled } => (envelope, handled),
        };
        // Counted by the bot's CountedTransport, as sends are.
        let mut envelope = envelope;
        let conversation = format!("{}:{}", envelope.transport, envelope.conversation_id);
        let identity = format!("{}:{}", envelope.transport, envelope.user_id);
        // A session's topic is the bot's own place: every message in it is meant for the
        // bot, mentioned or not (a stranger there meets its session's pairing, a bare
        // `/sessions` there is answered).
        if self
            .topic_owner(
                &envelope.transport,
                &envelope.conversation_id,
                envelope.thread_id.as_deref(),
            )
            .is_some()
        {
            envelope.addressed = true;
        }
        match self.topic_route(shared, &envelope) {
            TopicRoute::NotATopic => {}
            TopicRoute::Session(session) => {
                self.deliver(shared, &session, envelope, handled, Audience::Direct, false)
                    .await;
                return;
            }
            TopicRoute::Ended(name) => {
                drop(handled);
                self.answer(shared, envelope, &topics::ended_topic_answer(&name), true)
                    .await;
                return;
            }
        }
        let audience = Audience::of(envelope.is_direct, envelope.addressed);
        let usage = if routing::lists_sessions(&envelope.text) {
            self.usage_of_paired(&shared.fingerprint, &identity).await
        } else {
            HashMap::new()
        };
        let (decision, stranger) = self.decide(
            &shared.fingerprint,
            &conversation,
            &identity,
            audience,
            &envelope.text,
            usage,
        );
        match decision {
            Decision::Deliver { session, .. } => {
                self.deliver(shared, &session, envelope, handled, audience, stranger)
                    .await;
            }
            Decision::Switch { session, reply } => {
                drop(handled);
                self.bind(&conversation, &session, true);
                self.answer(shared, envelope, &reply, stranger).await;
            }
            Decision::Pair { session, reply } => {
                drop(handled);
                self.bind(&conversation, &session, false);
                self.answer(shared, envelope, &reply, stranger).await;
            }
            Decision::Reply(text) => {
                drop(handled);
                self.answer(shared, envelope, &text, stranger).await;
            }
            Decision::Ignore => drop(handled),
        }
    }

    /// Hands `envelope` to `session`'s sink on `shared`'s bot.
    async fn deliver(
        &self,
        shared: &Arc<Shared>,
        session: &str,
        envelope: transport_core::Envelope,
        handled: transport_core::inbound::Handled,
        audience: Audience,
        stranger: bool,
    ) {
        let now = self.clock.now_ms();
        let sink = self.inner(|inner| {
            let attached = inner.sessions.get_mut(session)?;
            // `/sessions`' "active … ago".
            attached.last_active_ms = now;
            attached.sinks.get(&shared.fingerprint).cloned()
        });
        let message = Inbound::Message { envelope, handled };
        let returned = match sink {
            Some(sink) => sink.forward(message).await.err(),
            None => Some(message),
        };
        // The session went away between the decision and the hand-over. Said only
        // to a message meant for the bot, like every answer of the broker's own.
        if let Some(Inbound::Message { envelope, handled }) = returned {
            drop(handled);
            if audience != Audience::Chatter {
                self.answer(
                    shared,
                    envelope,
                    "The session this chat talks to has just stopped, so this message was \
                     not delivered. Send /sessions to pick another.",
                    stranger,
                )
                .await;
            }
        }
    }

    fn sinks_on(&self, fingerprint: &str) -> Vec<InboundSink> {
        self.inner(|inner| {
            inner
                .sessions
                .values()
                .filter_map(|s| s.sinks.get(fingerprint).cloned())
                .collect()
        })
    }

    /// What to do with `text` from `identity` in `conversation`, and whether its sender is
    /// a stranger (paired with no session of this bot: the broker's answers to it wait in
    /// the stranger queue). The conversation is bound as the decision says; a stranger's
    /// chat is written down once its sender is paired with its session.
    fn decide(
        &self,
        fingerprint: &str,
        conversation: &str,
        identity: &str,
        audience: Audience,
        text: &str,
        usage: HashMap<String, UsageSoFar>,
    ) -> (Decision, bool) {
        if let Some(decision) = self.fast_path(fingerprint, conversation, text) {
            return (decision, false);
        }
        let mut roster = BotRoster::new(self, fingerprint, identity);
        roster.usage = usage;
        let bound = self.inner(|inner| inner.bindings.get(conversation).cloned());
        let decision = routing::decide(
            text,
            identity,
            audience,
            bound.as_ref().map(|b| b.session.as_str()),
            bound.as_ref().map(|b| b.name.as_str()),
            &roster,
        );
        let provisional = self.inner(|inner| {
            inner
                .bindings
                .is_provisional(conversation)
                .then(|| inner.bindings.get(conversation).map(|b| b.session.clone()))
                .flatten()
        });
        if let Some(session) = provisional.filter(|session| roster.is_paired(session, identity)) {
            self.bind(conversation, &session, true);
            // Paired since its last message: its private topic, where the bot makes them.
            self.user_paired(fingerprint, &session, identity);
        }
        if let Decision::Deliver {
            session,
            bind: true,
        } = &decision
        {
            self.bind(conversation, session, roster.is_paired(session, identity));
        }
        (decision, !roster.paired_with_any())
    }

    /// The decision for a written-down chat writing to its attached session, which needs
    /// no view of who is paired where; `None` sends the message the long way (a stranger's
    /// chat, bound in memory only, takes it too, which also tells when it has paired).
    fn fast_path(&self, fingerprint: &str, conversation: &str, text: &str) -> Option<Decision> {
        self.inner(|inner| {
            let bound = inner.bindings.get_kept(conversation)?;
            let attached = inner
                .sessions
                .get(&bound.session)
                .is_some_and(|s| s.sinks.contains_key(fingerprint));
            (attached && !routing::is_broker_command(text)).then(|| Decision::Deliver {
                session: bound.session.clone(),
                bind: false,
            })
        })
    }

    /// The usage so far of each session of this bot `identity` is paired with, as its
    /// agent reports it, asked of them all at once and waited for at most [`USAGE_WAIT`]:
    /// an agent that cannot say (the demo) or is slow to is listed without it.
    async fn usage_of_paired(
        &self,
        fingerprint: &str,
        identity: &str,
    ) -> HashMap<String, UsageSoFar> {
        let agents: Vec<(String, Arc<dyn Agent>)> = {
            let roster = BotRoster::new(self, fingerprint, identity);
            let keys: Vec<String> = roster
                .paired_with(identity)
                .into_iter()
                .map(|view| view.key)
                .collect();
            self.inner(|inner| {
                keys.into_iter()
                    .filter_map(|key| {
                        let agent = inner.sessions.get(&key)?.agent.clone();
                        Some((key, agent))
                    })
                    .collect()
            })
        };
        let asked = agents.into_iter().map(|(key, agent)| async move {
            UsageSoFar::ask(agent.as_ref(), USAGE_WAIT)
                .await
                .map(|usage| (key, usage))
        });
        futures_util::future::join_all(asked)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Who trusts `identity` among the stored sessions (read fresh: a session may have
    /// paired it a moment ago), or `None` with a warning when the state cannot be read
    /// (the config's `allowUsers` still count).
    fn trusted_by<R>(
        &self,
        read: impl FnOnce(&StateReader) -> Result<R, StateStoreError>,
    ) -> Option<R> {
        let path = self.state_file.as_ref()?;
        match self.state_reader(path).and_then(|reader| read(&reader)) {
            Ok(found) => Some(found),
            Err(e) => {
                self.log(
                    Level::Warning,
                    "state file unreadable",
                    &[("error", e.to_string())],
                );
                None
            }
        }
    }

    /// The state reader, opened at the first need and kept once it reads the database (a
    /// JSON file not yet migrated is read afresh each time: the database may appear).
    fn state_reader(&self, path: &Path) -> Result<Arc<StateReader>, StateStoreError> {
        let mut slot = self
            .reader
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(reader) = slot.as_ref() {
            return Ok(reader.clone());
        }
        let (reader, _) = StateReader::open(path)?;
        let reader = Arc::new(reader);
        if matches!(*reader, StateReader::Db(_)) {
            *slot = Some(reader.clone());
        }
        Ok(reader)
    }

    /// Binds `conversation` to `session`: written down when `keep` (its sender is paired
    /// with the session), in memory only otherwise (a stranger on its way to pairing).
    fn bind(&self, conversation: &str, session: &str, keep: bool) {
        self.inner(|inner| {
            let name = inner
                .sessions
                .get(session)
                .map(|s| s.name.clone())
                .unwrap_or_default();
            let binding = Binding {
                session: session.to_owned(),
                name,
            };
            if keep {
                inner.bindings.bind(conversation, binding);
            } else {
                inner.bindings.bind_provisional(conversation, binding);
            }
        });
    }

    /// Answers `envelope`: a paired sender at once, a stranger through the rate-limited
    /// queue, so no stranger's answer holds up the next message (see [`strangers`]).
    async fn answer(
        &self,
        shared: &Arc<Shared>,
        envelope: transport_core::Envelope,
        text: &str,
        stranger: bool,
    ) {
        match self.answers.get() {
            Some(answers) if stranger => {
                answers.offer(Answer {
                    transport: shared.real.clone(),
                    envelope,
                    text: text.to_owned(),
                });
            }
            _ => self.reply(shared, &envelope, text).await,
        }
    }

    /// Answers to strangers dropped so far because the queue was full.
    pub fn strangers_dropped(&self) -> u64 {
        self.answers.get().map_or(0, |answers| answers.dropped())
    }

    /// Answers `envelope` from the broker itself (see [`send_notice`]).
    async fn reply(&self, shared: &Shared, envelope: &transport_core::Envelope, text: &str) {
        if let Err(error) = send_notice(shared.real.as_ref(), envelope, text).await {
            self.log(
                Level::Warning,
                "broker reply not sent",
                &[
                    ("transport", envelope.transport.clone()),
                    ("error", error.to_string()),
                ],
            );
        }
    }

    /// The attached sessions, in attach order.
    pub fn sessions(&self) -> Vec<SessionSummary> {
        // Each agent is asked whether it is busy after the books are let go: 10,000 of them
        // would hold up routing meanwhile.
        let listed: Vec<(SessionSummary, Arc<dyn Agent>)> = self.inner(|inner| {
            inner
                .sessions
                .values()
                .map(|s| {
                    let summary = SessionSummary {
                        key: s.key.clone(),
                        name: s.name.clone(),
                        cwd: s.cwd.clone(),
                        busy: false,
                    };
                    (summary, s.agent.clone())
                })
                .collect()
        });
        listed
            .into_iter()
            .map(|(summary, agent)| SessionSummary {
                busy: !agent.is_idle(),
                ..summary
            })
            .collect()
    }

    /// The chats bound to each attached session (`true`: written down, its sender paired),
    /// for the dashboard.
    pub fn chats(&self) -> HashMap<String, Vec<(String, bool)>> {
        self.inner(|inner| inner.bindings.chats())
    }

    /// The identities session `key` is paired with, for the dashboard; empty when the
    /// state cannot be read (the page is no place for that error: `doctor` says it).
    pub fn paired_with_session(&self, key: &str) -> Vec<String> {
        let Some(path) = &self.state_file else {
            return Vec::new();
        };
        self.state_reader(path)
            .and_then(|reader| reader.trusted_by(key))
            .unwrap_or_default()
    }

    /// Stops every real transport and releases the bots' locks. Sessions are shut down
    /// by their owners first (each reports what it could not send).
    pub async fn shutdown(&self) {
        for task in lock(&self.routers).drain(..) {
            task.abort();
        }
        if let Some(answers) = self.answers.get() {
            answers.stop();
        }
        let shared: Vec<Arc<Shared>> =
            self.inner(|inner| inner.shared.drain().map(|(_, s)| s).collect());
        for shared in shared {
            shared.real.stop().await;
            shared.release().await;
        }
        // Bindings are written with the database's next commit: a clean stop waits for it.
        if let Some(store) = self.inner(|inner| inner.bindings.store())
            && let Err(error) = store.committed().await
        {
            self.log(
                Level::Warning,
                "bindings not saved",
                &[("error", error.to_string())],
            );
        }
        if let Some(path) = &self.status_file {
            *lock(&self.status_stopped) = true;
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The topics kept in the state database, read once when the broker starts. A row that
/// cannot be read is named in the log and left alone: its session gets a new topic.
fn kept_topics(store: Option<&crate::disk::state_db::StateDb>, log: &dyn LogSink) -> Topics {
    let warn = |event: &str, fields: &[(&str, String)]| {
        log.write(LOG_NAME, LogLine::new(Level::Warning, event, fields));
    };
    let Some(store) = store else {
        return Topics::default();
    };
    match store.kept_under(topics::KEPT_PREFIX) {
        Ok(rows) => {
            Topics::from_kept(rows.into_iter().filter_map(
                |(name, value)| match serde_json::from_str::<TopicRecord>(&value) {
                    Ok(record) => Some((name, record)),
                    Err(error) => {
                        warn(
                            "session topic unreadable",
                            &[
                                ("name", name),
                                (
                                    "error",
                                    format!(
                                        "{error}; its session gets a new topic when it attaches"
                                    ),
                                ),
                            ],
                        );
                        None
                    }
                },
            ))
        }
        Err(error) => {
            warn(
                "session topics unreadable",
                &[(
                    "error",
                    format!("{error}; sessions get new topics when they attach"),
                )],
            );
            Topics::default()
        }
    }
}

/// A topic per session (docs/broker.md#a-topic-per-session): the I/O around the decisions
/// of [`topics`].
impl Broker {
    /// Where a message goes as far as session topics tell. The broker's own commands are
    /// answered by the broker even in a topic, so `/sessions` and `/switch` work anywhere.
    fn topic_route(&self, shared: &Shared, envelope: &transport_core::Envelope) -> TopicRoute {
        if routing::is_broker_command(&envelope.text) {
            return TopicRoute::NotATopic;
        }
        self.inner(|inner| {
            let Inner {
                topics, sessions, ..
            } = inner;
            topics.route(
                &envelope.transport,
                &envelope.conversation_id,
                envelope.thread_id.as_deref(),
                |key| {
                    sessions
                        .get(key)
                        .is_some_and(|s| s.sinks.contains_key(&shared.fingerprint))
                },
            )
        })
    }

    /// The session whose topic `conversation_id` (and `thread_id`) is on `transport`, with
    /// its name: a send there from another session is refused.
    fn topic_owner(
        &self,
        transport: &str,
        conversation_id: &str,
        thread_id: Option<&str>,
    ) -> Option<(String, String)> {
        self.inner(|inner| {
            let owner = inner.topics.owner(transport, conversation_id, thread_id)?;
            let name = inner
                .sessions
                .get(owner)
                .map_or_else(|| owner.to_owned(), |s| s.name.clone());
            Some((owner.to_owned(), name))
        })
    }

    /// The current place of the topic that was at `conversation_id` (and `thread_id`) of
    /// `transport`, when it was replaced since (deleted by hand, made anew).
    fn topic_moved(
        &self,
        transport: &str,
        conversation_id: &str,
        thread_id: Option<&str>,
    ) -> Option<transport_core::Topic> {
        self.inner(|inner| {
            inner
                .topics
                .moved(transport, conversation_id, thread_id)
                .cloned()
        })
    }

    /// Starts making (or opening again) `session`'s topic on `shared`'s bot, whose
    /// transport the session just started; off the start path, so a slow platform does not
    /// hold the session up. Nothing when the bot's config names no place for topics.
    fn start_topic(self: &Arc<Self>, session: &str, shared: &Arc<Shared>) {
        let Some(place) = shared.real.topic_place() else {
            return;
        };
        let broker = self.clone();
        let key = (session.to_owned(), shared.fingerprint.to_string());
        let (session, shared) = (session.to_owned(), shared.clone());
        let task = tokio::spawn(async move {
            if shared.real.topics_in_private_chats() {
                broker.open_private_topics(&session, &shared).await;
            } else {
                broker
                    .open_topic(&session, &shared, &TopicAt::Place(place))
                    .await;
            }
        });
        if let Some(earlier) = lock(&self.topic_tasks).insert(key, task) {
            earlier.abort();
        }
    }

    /// Makes or opens `session`'s topic `at` (see [`topics::on_attach`]) and writes it
    /// down. The problem when none could be made or kept, after saying it (once).
    async fn open_topic(
        &self,
        session: &str,
        shared: &Arc<Shared>,
        at: &TopicAt,
    ) -> Option<transport_core::TopicError> {
        // A session gone meanwhile has nothing to make, and no problem to tell.
        let (shown, cwd) = self.inner(|inner| {
            inner
                .sessions
                .get(session)
                .map(|s| (s.name.clone(), s.cwd.clone()))
        })?;
        let transport = shared.real.id().to_owned();
        let max = shared.real.topic_naming().max_chars;
        let name = topics::topic_name(&shown, &cwd, &self.machine, max);
        let kept = topics::kept_name(&transport, at.kept_place(), &name);
        let known = self.inner(|inner| inner.topics.get(&kept).cloned());
        let mut replaced = false;
        // What the topic is told once it is kept: kept first, so a reply typed the moment
        // the announcement shows finds the topic routed (else it reads as group chatter).
        let resumed = match topics::on_attach(known.as_ref()) {
            OnAttach::Create => None,
            OnAttach::Resume(topic) => match shared.real.resume_topic(&topic, &name).await {
                Ok(()) => Some((topic, Some(topics::resumed_announcement(&shown)))),
                Err(error) => match topics::after_resume_failed(&error) {
                    topics::AfterResumeFailed::Recreate => {
                        replaced = true;
                        None
                    }
                    topics::AfterResumeFailed::KeepAndSay => {
                        self.topic_problem(session, shared, at.said_place(), &error);
                        Some((topic, None))
                    }
                },
            },
        };
        let (topic, announcement) = match resumed {
            Some(resumed) => resumed,
            None => match make_topic(shared.real.as_ref(), at, &name).await {
                Ok(topic) => (
                    topic,
                    Some(topics::announcement(&shown, &cwd, &self.machine)),
                ),
                Err(error) => {
                    self.topic_problem(session, shared, at.said_place(), &error);
                    return Some(error);
                }
            },
        };
        self.keep_topic(
            &kept,
            TopicRecord {
                transport: transport.clone(),
                session: session.to_owned(),
                name: name.clone(),
                topic: topic.clone(),
                ended: false,
            },
        );
        self.log(
            Level::Info,
            "session topic ready",
            &[
                ("session", session.to_owned()),
                ("transport", transport),
                ("topic", name.clone()),
            ],
        );
        if let Some(text) = announcement {
            self.topic_notice(shared, &topic, &text).await;
        }
        if replaced {
            let text = topics::recreated(&name);
            self.topic_notice(shared, &topic, &text).await;
            self.tell_session(session, shared, &text);
        }
        None
    }

    /// Marks `session`'s topic on `shared`'s bot ended (its transport stops): a last
    /// message in it, then renamed and closed (archived) by the platform, never deleted.
    async fn end_topic(&self, session: &str, shared: &Arc<Shared>) {
        // Every topic being made for it: at attach, and each user's who paired since.
        let opening: Vec<tokio::task::JoinHandle<()>> = {
            let mut tasks = lock(&self.topic_tasks);
            let mine: Vec<(String, String)> = tasks
                .keys()
                .filter(|(key, bot)| {
                    key == session && private_topics::on_bot(bot, &shared.fingerprint)
                })
                .cloned()
                .collect();
            mine.iter().filter_map(|key| tasks.remove(key)).collect()
        };
        for opening in opening {
            let _ = opening.await;
        }
        let transport = shared.real.id().to_owned();
        let open = self.inner(|inner| inner.topics.open_all_of(session, &transport));
        let shown = self.inner(|inner| inner.sessions.get(session).map(|s| s.name.clone()));
        for (kept, record) in open {
            let shown = shown.clone().unwrap_or_else(|| record.name.clone());
            self.topic_notice(shared, &record.topic, &topics::ended_announcement(&shown))
                .await;
            let ended = topics::ended_name(&record.name, shared.real.topic_naming().max_chars);
            if let Err(error) = shared.real.end_topic(&record.topic, &ended).await {
                // Gone: the next attach makes a new one. Anything else: the topic stays open
                // under its running name, which the next attach reuses all the same.
                let at = TopicAt::of(shared.real.as_ref(), &record.topic);
                self.topic_problem(session, shared, at.said_place(), &error);
            }
            self.keep_topic(
                &kept,
                TopicRecord {
                    ended: true,
                    ..record
                },
            );
        }
    }

    /// After a send into `session`'s topic failed because the topic is gone (deleted by
    /// hand): makes a new topic under the same name, says so once (in the new topic and
    /// the session's terminal), and returns it, for the send to go there (nothing is
    /// lost). `failed` is the topic the send went to; when another send replaced it
    /// meanwhile, that replacement is returned. `None` when no new topic could be made
    /// (said as any topic problem is).
    async fn replace_gone_topic(
        &self,
        session: &str,
        shared: &Arc<Shared>,
        failed: &transport_core::Topic,
    ) -> Option<transport_core::Topic> {
        let _one_at_a_time = self.topic_replacing.lock().await;
        let transport = shared.real.id().to_owned();
        // The topic that was there (a session has one per user's private chat).
        let (kept, record) = self.inner(|inner| {
            inner
                .topics
                .at(
                    &transport,
                    &failed.conversation_id,
                    failed.thread_id.as_deref(),
                )
                .filter(|(_, record)| record.session == session && !record.ended)
                .map(|(kept, record)| (kept.to_owned(), record.clone()))
        })?;
        if &record.topic != failed {
            return Some(record.topic);
        }
        let at = TopicAt::of(shared.real.as_ref(), &record.topic);
        let topic = match make_topic(shared.real.as_ref(), &at, &record.name).await {
            Ok(topic) => topic,
            Err(problem) => {
                self.topic_problem(session, shared, at.said_place(), &problem);
                return None;
            }
        };
        let text = topics::recreated(&record.name);
        // Kept before it is announced, as at attach.
        self.keep_topic(
            &kept,
            TopicRecord {
                topic: topic.clone(),
                ..record
            },
        );
        self.topic_notice(shared, &topic, &text).await;
        self.tell_session(session, shared, &text);
        Some(topic)
    }

    /// Keeps `record` in the book and writes it to the state database with its next commit.
    fn keep_topic(&self, kept: &str, record: TopicRecord) {
        let written = serde_json::to_string(&record);
        let store = self.inner(|inner| {
            inner.topics.keep(kept, record);
            inner.bindings.store()
        });
        if let (Some(store), Ok(value)) = (store, written) {
            store.keep(kept, value);
        }
    }

    /// Posts `text` in `topic` from the broker; a failure is logged (the topic's use does
    /// not depend on it).
    async fn topic_notice(&self, shared: &Shared, topic: &transport_core::Topic, text: &str) {
        if let Err(error) = send_notice_to(
            shared.real.as_ref(),
            &topic.conversation_id,
            topic.thread_id.as_deref(),
            text,
        )
        .await
        {
            self.log(
                Level::Warning,
                "session topic notice not sent",
                &[
                    ("transport", shared.real.id().to_owned()),
                    ("error", error.to_string()),
                ],
            );
        }
    }

    /// Says a topic problem once per place and kind: in the broker's log and in the
    /// terminal of the session it happened to. Nothing is retried: the next attach asks
    /// the platform once again (a right granted meanwhile then works).
    fn topic_problem(
        &self,
        session: &str,
        shared: &Shared,
        place: &str,
        error: &transport_core::TopicError,
    ) {
        let transport = shared.real.id().to_owned();
        let problem = topics::problem_key(error);
        if !self.inner(|inner| inner.topics.first_time(&transport, place, &problem)) {
            return;
        }
        let text = topics::not_made(&transport, place, error);
        self.log(
            Level::Warning,
            "session topic not made",
            &[
                ("session", session.to_owned()),
                ("transport", transport),
                ("error", text.clone()),
            ],
        );
        self.tell_session(session, shared, &text);
    }

    /// Shows `text` in the terminal of `session` (an alert on its sink of `shared`'s bot).
    fn tell_session(&self, session: &str, shared: &Shared, text: &str) {
        let sink = self.inner(|inner| {
            inner
                .sessions
                .get(session)
                .and_then(|s| s.sinks.get(&shared.fingerprint).cloned())
        });
        if let Some(sink) = sink {
            sink.alert(shared.real.id(), text.to_owned());
        }
    }
}

/// Makes a new topic `name` `at` its place on `transport` (the broker's, and the cluster
/// ingress's).
pub(crate) async fn make_topic(
    transport: &dyn Transport,
    at: &TopicAt,
    name: &str,
) -> Result<transport_core::Topic, transport_core::TopicError> {
    match at {
        TopicAt::Place(_) => transport.create_topic(name).await,
        TopicAt::PrivateChat(chat) => transport.create_private_topic(chat, name).await,
    }
}

/// Writes `bytes` to a new file at `path` readable by this user only (0600) and syncs
/// it. A leftover at `path` is removed first: reopening it would keep its old mode (the
/// bindings file of older versions was 0644), or follow a link planted there.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    std::io::Write::write_all(&mut file, bytes)?;
    file.sync_all()
}

/// Starts the thread that writes the status file when asked, at most once per
/// [`STATUS_INTERVAL`], taking every request that arrived meanwhile as one: the file lists
/// every session, so a burst of 10,000 attaches writing it back to back kept a core busy
/// and the attaches waiting. It ends with the broker.
fn spawn_status_writer(
    broker: Weak<Broker>,
    path: PathBuf,
    stopped: Arc<Mutex<bool>>,
    log: &dyn LogSink,
) -> Option<std::sync::mpsc::Sender<()>> {
    let shown = path.display().to_string();
    let (sender, requests) = std::sync::mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("broker-status".into())
        .spawn(move || {
            let write = || {
                let Some(broker) = broker.upgrade() else {
                    return false;
                };
                if *lock(&stopped) {
                    return false;
                }
                broker.write_status_now(&path);
                true
            };
            pace_status_writes(&requests, STATUS_INTERVAL, write, std::thread::sleep);
        });
    match spawned {
        Ok(_) => Some(sender),
        Err(error) => {
            log.write(
                LOG_NAME,
                LogLine::new(
                    Level::Warning,
                    "broker status not written",
                    &[
                        ("path", shown),
                        (
                            "error",
                            format!(
                                "cannot start its thread ({error}); `doctor` will not list \
                                 the attached sessions"
                            ),
                        ),
                    ],
                ),
            );
            None
        }
    }
}

/// The status thread's loop: waits for a request, takes every request that came with it
/// as one, calls `write` (`false`: the broker is gone or stopped, so the loop ends), then
/// `pause`s for `interval` while new requests wait in the channel for the next write.
/// Ends when every sender is gone.
fn pace_status_writes(
    requests: &std::sync::mpsc::Receiver<()>,
    interval: std::time::Duration,
    mut write: impl FnMut() -> bool,
    mut pause: impl FnMut(std::time::Duration),
) {
    while requests.recv().is_ok() {
        while requests.try_recv().is_ok() {}
        if !write() {
            return;
        }
        pause(interval);
    }
}

/// How long `/sessions` waits for an agent's usage report (pi answers from its RPC).
const USAGE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Routing's questions about one shared bot, for one sender, answered from the broker's
/// books and the state database's trust index (see [`Roster`]).
struct BotRoster<'a> {
    broker: &'a Broker,
    fingerprint: &'a str,
    identity: &'a str,
    /// Who trusts the sender, read once for a list (`/sessions`, `/switch <n>`).
    trusting: OnceCell<BTreeSet<String>>,
    /// Each session's answer to "is the sender paired with it", asked once a message:
    /// routing, the provisional binding and the binding after delivery all ask, and each
    /// asking read the state database again.
    paired: RefCell<HashMap<String, bool>>,
    /// How many times the state database was asked whether the sender is paired.
    reads: Cell<u32>,
    /// Usage so far by session key, where it was asked for (`/sessions`).
    usage: HashMap<String, UsageSoFar>,
    /// Now, by the broker's clock (for "active 2 min ago").
    now_ms: u64,
}

impl<'a> BotRoster<'a> {
    fn new(broker: &'a Broker, fingerprint: &'a str, identity: &'a str) -> BotRoster<'a> {
        BotRoster {
            broker,
            fingerprint,
            identity,
            trusting: OnceCell::new(),
            paired: RefCell::default(),
            reads: Cell::new(0),
            usage: HashMap::new(),
            now_ms: broker.clock.now_ms(),
        }
    }

    /// An attached session as routing sees it, with no one paired.
    fn view_of(&self, s: &Attached) -> SessionView {
        let mut view = SessionView::new(&s.key, &s.name, &s.cwd, &self.broker.machine);
        view.state = if s.agent.is_idle() {
            SessionState::Idle
        } else {
            SessionState::Busy
        };
        view.ago = Some(routing::since(self.now_ms, s.last_active_ms));
        view.usage = self.usage.get(&s.key).copied();
        view
    }
}

impl BotRoster<'_> {
    /// Session `key` as routing sees it, when it is attached to this bot. Whether the
    /// sender is paired is asked after the books are let go (it may read the database).
    fn view(&self, key: &str) -> Option<SessionView> {
        let mut view = self.broker.inner(|inner| {
            inner
                .sessions
                .get(key)
                .filter(|s| s.sinks.contains_key(self.fingerprint))
                .map(|s| self.view_of(s))
        })?;
        if self.is_paired(key, self.identity) {
            view.paired.insert(self.identity.to_owned());
        }
        Some(view)
    }

    /// Whether the sender is paired with any session of this bot (else it is a stranger,
    /// answered through the rate-limited queue).
    fn paired_with_any(&self) -> bool {
        let allowed = self.broker.inner(|inner| {
            let (Some(allowing), Some(on_bot)) = (
                inner.allowing.get(self.identity),
                inner.on_bot.get(self.fingerprint),
            ) else {
                return false;
            };
            allowing.iter().any(|key| on_bot.contains(key))
        });
        allowed
            || self
                .broker
                .trusted_by(|reader| {
                    reader.trusts_any(self.identity, &|key| {
                        self.broker.inner(|inner| {
                            inner
                                .on_bot
                                .get(self.fingerprint)
                                .is_some_and(|keys| keys.contains(key))
                        })
                    })
                })
                .unwrap_or(false)
    }
}

impl BotRoster<'_> {
    /// Whether `identity` is paired with session `key`: the config's `allowUsers`, else
    /// the trust read for a list, else one read of the state database's index.
    fn ask_paired(&self, key: &str, identity: &str) -> bool {
        let allowed = self.broker.inner(|inner| {
            inner
                .allowing
                .get(identity)
                .is_some_and(|keys| keys.contains(key))
        });
        if allowed {
            return true;
        }
        match self.trusting.get() {
            Some(trusting) => trusting.contains(key),
            None => {
                self.reads.set(self.reads.get() + 1);
                self.broker
                    .trusted_by(|reader| reader.trusts(identity, key))
                    .unwrap_or(false)
            }
        }
    }
}

impl Roster for BotRoster<'_> {
    fn census(&self) -> Census {
        let only = self.broker.inner(|inner| {
            let keys = inner.on_bot.get(self.fingerprint)?;
            match keys.len() {
                0 => None,
                1 => keys.iter().next().cloned().map(Ok),
                _ => Some(Err(())),
            }
        });
        match only {
            None => Census::Empty,
            Some(Err(())) => Census::Several,
            Some(Ok(key)) => self.view(&key).map_or(Census::Empty, Census::Only),
        }
    }

    fn is_attached(&self, key: &str) -> bool {
        self.broker.inner(|inner| {
            inner
                .sessions
                .get(key)
                .is_some_and(|s| s.sinks.contains_key(self.fingerprint))
        })
    }

    fn named(&self, wanted: &str, _identity: &str) -> Vec<SessionView> {
        // Names are unique among attached sessions, but a name may equal another's key;
        // `name@machine` names one here when the machine is this one.
        let here = wanted
            .rsplit_once('@')
            .filter(|(_, machine)| machine.eq_ignore_ascii_case(&self.broker.machine))
            .map(|(name, _)| name);
        let by_name = |name: &str| {
            self.broker
                .inner(|inner| inner.names.get(&name.to_ascii_lowercase()).cloned())
        };
        let mut keys: Vec<String> = [by_name(wanted), here.and_then(by_name)]
            .into_iter()
            .flatten()
            .chain([wanted.to_owned()])
            .collect();
        let mut seen = HashSet::new();
        keys.retain(|key| seen.insert(key.clone()));
        keys.iter().filter_map(|key| self.view(key)).collect()
    }

    fn is_paired(&self, key: &str, identity: &str) -> bool {
        if identity != self.identity {
            return self.ask_paired(key, identity);
        }
        if let Some(known) = self.paired.borrow().get(key) {
            return *known;
        }
        let answer = self.ask_paired(key, identity);
        self.paired.borrow_mut().insert(key.to_owned(), answer);
        answer
    }

    fn paired_with(&self, identity: &str) -> Vec<SessionView> {
        let trusting = self.trusting.get_or_init(|| {
            // The keys matter only to a JSON file not migrated yet (read per session).
            let keys: Vec<String> = self.broker.inner(|inner| {
                inner
                    .on_bot
                    .get(self.fingerprint)
                    .map(|keys| keys.iter().cloned().collect())
                    .unwrap_or_default()
            });
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            self.broker
                .trusted_by(|reader| reader.trusting(identity, &keys))
                .unwrap_or_default()
        });
        self.broker.inner(|inner| {
            let allowing = inner.allowing.get(identity);
            inner
                .sessions
                .values()
                .filter(|s| s.sinks.contains_key(self.fingerprint))
                .filter(|s| {
                    trusting.contains(&s.key) || allowing.is_some_and(|keys| keys.contains(&s.key))
                })
                .map(|s| SessionView {
                    paired: BTreeSet::from([identity.to_owned()]),
                    ..self.view_of(s)
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport_core::{Capabilities, LengthUnit, Markup, OutboundKind, OutboundMessage};
    use transport_testing::fake::{FakeConfig, FakeTransport};

    #[cfg(unix)]
    #[test]
    fn the_status_file_is_private_even_over_a_leftover_with_another_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("broker-status.json");
        std::fs::write(&path, "old").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_private(&path, b"{}").expect("written");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "{}");
    }

    use crate::agent::IdleAgent;
    use crate::disk::state_db::StateDb;
    use crate::local::clock::ManualClock;
    use crate::local::logging::{LogLine, MemoryLog};
    use crate::wit::session::{ConfigContent, ConfigScope};

    /// The shared bot the rosters below are asked about; `OTHER_BOT` is another one.
    const BOT: &str = "bot";
    const OTHER_BOT: &str = "other-bot";

    /// A broker with no bot of its own, reading who is paired from the state beside
    /// `state_file` and keeping its status file at `status_file`.
    fn broker(state_file: Option<PathBuf>, status_file: Option<PathBuf>) -> Arc<Broker> {
        broker_on(
            Arc::new(ManualClock::new(1_700_000_000_000)),
            state_file,
            status_file,
        )
    }

    /// [`broker`] with its clock.
    fn broker_on(
        clock: Arc<ManualClock>,
        state_file: Option<PathBuf>,
        status_file: Option<PathBuf>,
    ) -> Arc<Broker> {
        let locks = tempfile::tempdir().expect("tempdir").keep();
        Broker::new(BrokerOptions {
            locks: LockDir::new(locks),
            clock,
            log: Arc::new(MemoryLog::default()),
            build: Arc::new(|_| Built::default()),
            state_file,
            bindings: Bindings::default(),
            status_file,
            pairing: PairingBudget::default(),
        })
    }

    /// Attaches `key` as `name`, letting `allowed` in without pairing, with a sink on `bot`.
    fn attach(broker: &Broker, key: &str, name: &str, allowed: &[&str], bot: &str) {
        attach_agent(broker, key, name, allowed, bot, Arc::new(IdleAgent));
    }

    /// [`attach`] with `agent`.
    fn attach_agent(
        broker: &Broker,
        key: &str,
        name: &str,
        allowed: &[&str],
        bot: &str,
        agent: Arc<dyn Agent>,
    ) {
        let users: Vec<String> = allowed.iter().map(|u| format!("{u:?}")).collect();
        let config = ConfigSource {
            scope: ConfigScope::Global,
            path: "/home/me/.pi/agent/bot-connect.json".into(),
            content: ConfigContent::Text(format!(
                r#"{{"bridge": {{"allowUsers": [{}]}}}}"#,
                users.join(", ")
            )),
        };
        let shown = broker
            .attach(key, name, "/work", &[config], agent)
            .expect("attaches");
        assert_eq!(shown, name, "names are unique here");
        let (sink, _stream) = transport_core::inbound::channel(1);
        broker
            .register_sink(key, &Arc::from(bot), "fake", sink)
            .expect("the sink registers");
    }

    fn roster<'a>(broker: &'a Broker, identity: &'a str) -> BotRoster<'a> {
        BotRoster::new(broker, BOT, identity)
    }

    /// An idle agent that reports this usage, as pi does.
    struct Reporting(crate::wit::agent::TokenUse);

    #[async_trait::async_trait]
    impl Agent for Reporting {
        fn attach(&self, signals: crate::agent::SignalSender) {
            IdleAgent.attach(signals);
        }
        async fn send_prompt(
            &self,
            _: String,
            _: crate::wit::agent::DeliverAs,
            _: Vec<crate::wit::agent::PromptImage>,
        ) -> Result<(), String> {
            Ok(())
        }
        fn abort(&self) {}
        fn is_idle(&self) -> bool {
            true
        }
        fn session_info(&self) -> crate::wit::agent::SessionInfo {
            IdleAgent.session_info()
        }
        fn recent_work(&self) -> crate::agent::RecentWork {
            crate::agent::RecentWork::default()
        }
        async fn session_command(
            &self,
            command: crate::wit::agent::SessionCommand,
        ) -> Result<crate::wit::agent::SessionReply, String> {
            match command {
                crate::wit::agent::SessionCommand::Usage => Ok(
                    crate::wit::agent::SessionReply::Usage(crate::wit::agent::UsageReport {
                        session: self.0,
                        last_turn: None,
                        context_tokens: None,
                        context_window: None,
                    }),
                ),
                _ => Err("not in this test".into()),
            }
        }
    }

    #[tokio::test]
    async fn sessions_shows_this_machine_the_time_since_attach_and_the_usage_an_agent_reports() {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let broker = broker_on(clock.clone(), None, None);
        let reporting = Reporting(crate::wit::agent::TokenUse {
            input: 10_000,
            output: 1_200,
            cache_read: 2_300,
            cache_write: 5,
            cost_micros: Some(41_200),
        });
        attach_agent(&broker, "key-a", "api", &[SENDER], BOT, Arc::new(reporting));
        // The idle agent refuses session commands, as the demo does: listed without usage.
        attach(&broker, "key-b", "web", &[SENDER], BOT);
        attach_agent(
            &broker,
            "key-c",
            "other",
            &["fake:u2"],
            BOT,
            Arc::new(Reporting(crate::wit::agent::TokenUse {
                input: 1,
                output: 1,
                cache_read: 0,
                cache_write: 0,
                cost_micros: None,
            })),
        );
        let usage = broker.usage_of_paired(BOT, SENDER).await;
        assert_eq!(
            usage,
            HashMap::from([(
                "key-a".to_owned(),
                UsageSoFar {
                    input: 12_300,
                    output: 1_200,
                    cost_micros: Some(41_200)
                }
            )]),
            "only the sender's sessions are asked, and only those that report"
        );
        clock.advance(130_000);
        let mut books = roster(&broker, SENDER);
        books.usage = usage;
        let Decision::Reply(text) =
            routing::decide("/sessions", SENDER, Audience::Direct, None, None, &books)
        else {
            panic!("expected the list");
        };
        let machine = &broker.machine;
        assert_eq!(
            text,
            format!(
                "Sessions you are paired with:\n1. api on {machine} — /work · idle, active 2 min \
                 ago · 12.3k in, 1.2k out, $0.0412\n2. web on {machine} — /work · idle, active \
                 2 min ago\nSend /switch <number or name> to talk to another."
            )
        );
        // A clock set back since the attach: "just now", never a time to come.
        clock.set(1_600_000_000_000);
        let books = roster(&broker, SENDER);
        let views = books.paired_with(SENDER);
        assert!(
            views
                .iter()
                .all(|v| v.ago == Some(std::time::Duration::ZERO)),
            "{views:?}"
        );
    }

    #[test]
    fn a_detached_session_leaves_no_approval_waiting_on_the_dashboard() {
        let broker = broker(None, None);
        let metrics = Arc::new(Metrics::new(["fake"]));
        broker.count_in(metrics.clone());
        attach(&broker, "key-a", "api", &[], BOT);
        attach(&broker, "key-b", "web", &[], BOT);
        let asked = |id: &str| {
            LogLine::new(
                Level::Info,
                "remote approval requested",
                &[("tool", "bash".to_owned()), ("id", id.to_owned())],
            )
        };
        metrics.recent().note("key-a", &asked("qd4k"));
        metrics.recent().note("key-b", &asked("x7p2"));
        broker.detach("key-a");
        let open: Vec<(String, String)> = metrics
            .recent()
            .pending()
            .into_iter()
            .map(|p| (p.session, p.id))
            .collect();
        assert_eq!(open, [("key-b".to_owned(), "x7p2".to_owned())]);
    }

    #[tokio::test]
    async fn a_binding_the_database_could_not_write_is_in_the_brokers_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state_file = dir.path().join("state.json");
        let (db, _) = StateDb::open(&state_file, 0).expect("the state database opens");
        let db = Arc::new(db);
        let (bindings, _) = Bindings::kept_in(db.clone(), &dir.path().join("old.json"))
            .await
            .expect("bindings");
        let log = Arc::new(MemoryLog::default());
        let broker = Broker::new(BrokerOptions {
            locks: LockDir::new(dir.path().join("locks")),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            log: log.clone(),
            build: Arc::new(|_| Built::default()),
            state_file: Some(state_file.clone()),
            bindings,
            status_file: None,
            pairing: PairingBudget::default(),
        });
        // Every write of a binding fails from now on, as on a full disk.
        rusqlite::Connection::open(crate::disk::state_db::db_path(&state_file))
            .expect("a second connection")
            .execute_batch(
                "CREATE TRIGGER full BEFORE INSERT ON bindings
                 BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;",
            )
            .expect("the trigger");
        broker.bind("fake:dm-1", "key-a", true);
        // Nobody waits for the binding's commit; the barrier after it does.
        let _ = db.committed().await;
        let lines: Vec<String> = log
            .lines()
            .into_iter()
            .filter(|(_, line)| line.event == "bindings not saved")
            .flat_map(|(_, line)| line.fields.into_iter().map(|(_, value)| value))
            .collect();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("1 chat binding(s)") && lines[0].contains("/switch"),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn the_sender_is_asked_about_once_a_message_however_often_routing_asks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let broker = broker(Some(dir.path().join("state.json")), None);
        attach(&broker, "key-a", "a", &[], BOT);
        attach(&broker, "key-b", "b", &[], BOT);
        let roster = roster(&broker, "fake:u1");
        // Routing, the provisional binding and the binding after delivery each ask.
        for _ in 0..3 {
            assert!(!roster.is_paired("key-a", "fake:u1"));
        }
        assert_eq!(roster.reads.get(), 1, "one read of the database for key-a");
        assert!(!roster.is_paired("key-b", "fake:u1"));
        assert_eq!(roster.reads.get(), 2, "another session is another question");
    }

    /// One session of a generated roster: attached to `BOT` or another bot, the sender
    /// let in by `allowUsers`, paired in the state database, or neither.
    #[derive(Debug, Clone)]
    struct Modelled {
        on_bot: bool,
        allowed: bool,
        trusted: bool,
    }

    /// Names differing in case from what is asked, and never equal to another's key.
    const NAMES: [&str; 5] = ["alpha", "Beta", "gamma", "DELTA", "eps"];
    const SENDER: &str = "fake:u1";

    /// The roster `sessions` make for `SENDER`, answered by the broker's books and the
    /// state database, and the same as a list of views.
    fn both(sessions: &[Modelled]) -> (tempfile::TempDir, Arc<Broker>, Vec<SessionView>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let state_file = dir.path().join("state.json");
        let (db, _) = StateDb::open(&state_file, 0).expect("the state database opens");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let broker = broker(Some(state_file), None);
        let mut views = Vec::new();
        for (i, session) in sessions.iter().enumerate() {
            let key = format!("key-{i}");
            let allowed: &[&str] = if session.allowed { &[SENDER] } else { &[] };
            let bot = if session.on_bot { BOT } else { OTHER_BOT };
            attach(&broker, &key, NAMES[i], allowed, bot);
            if session.trusted {
                let document = format!(r#"{{"trusted": {{"{SENDER}": {{"at": 1}}}}}}"#);
                runtime
                    .block_on(db.save_document(&key, &document))
                    .expect("saved");
            }
            if session.on_bot {
                views.push(SessionView {
                    // The test's clock stands still: attached "just now".
                    ago: Some(std::time::Duration::ZERO),
                    paired: if session.allowed || session.trusted {
                        BTreeSet::from([SENDER.to_owned()])
                    } else {
                        BTreeSet::new()
                    },
                    ..SessionView::new(&key, NAMES[i], "/work", &broker.machine)
                });
            }
        }
        runtime.block_on(db.committed()).expect("committed");
        (dir, broker, views)
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// The broker answers routing from its indexes and the trust index; the cluster
        /// and the routing tests from a list of views. Both must route alike, or a chat
        /// reaches another session on a cluster than on one host.
        #[test]
        fn the_brokers_roster_answers_as_a_list_of_the_same_sessions_does(
            sessions in prop::collection::vec(
                (any::<bool>(), any::<bool>(), any::<bool>())
                    .prop_map(|(on_bot, allowed, trusted)| Modelled { on_bot, allowed, trusted }),
                0..=NAMES.len(),
            )
        ) {
            let (_dir, broker, views) = both(&sessions);
            let books = roster(&broker, SENDER);
            let list: &[SessionView] = &views;
            prop_assert_eq!(books.census(), list.census());
            prop_assert_eq!(books.paired_with(SENDER), list.paired_with(SENDER));
            let keys = (0..NAMES.len()).map(|i| format!("key-{i}"));
            for key in keys.chain(["nobody".to_owned()]) {
                prop_assert_eq!(books.is_attached(&key), list.is_attached(&key), "{}", key);
                prop_assert_eq!(
                    books.named(&key, SENDER), list.named(&key, SENDER), "{}", key
                );
                // Routing asks this only of a session it found on this bot; the broker
                // also knows a pairing with a session on another bot, a list does not.
                if list.is_attached(&key) {
                    prop_assert_eq!(
                        books.is_paired(&key, SENDER), list.is_paired(&key, SENDER), "{}", key
                    );
                }
            }
            let machine = broker.machine.clone();
            let spellings = |n: &&str| {
                [
                    n.to_string(),
                    n.to_ascii_uppercase(),
                    format!("{n}@{machine}"),
                    format!("{n}@{}", machine.to_ascii_uppercase()),
                    format!("{n}@elsewhere"),
                ]
            };
            for name in NAMES.iter().flat_map(spellings) {
                prop_assert_eq!(
                    books.named(&name, SENDER), list.named(&name, SENDER), "{}", name
                );
            }
        }
    }

    #[test]
    fn the_status_file_is_written_at_most_once_an_interval_however_often_it_is_asked() {
        let clock = ManualClock::new(0);
        let (ask, requests) = std::sync::mpsc::channel();
        for _ in 0..5 {
            ask.send(()).expect("asked");
        }
        let mut writes = Vec::new();
        pace_status_writes(
            &requests,
            STATUS_INTERVAL,
            || {
                writes.push(clock.now_ms());
                // Attaches keep coming while a write is made; the third write is the last
                // (the broker stops), so a loop that never pauses still ends.
                if writes.len() == 3 {
                    return false;
                }
                (0..4).for_each(|_| ask.send(()).expect("asked"));
                true
            },
            |interval| clock.advance(u64::try_from(interval.as_millis()).expect("ms")),
        );
        assert_eq!(writes, vec![0, 1_000, 2_000], "writes a second apart");
        assert_eq!(
            requests.try_iter().count(),
            0,
            "the 13 requests were taken by the 3 writes, none left waiting"
        );
    }

    #[test]
    fn a_stopped_status_thread_writes_nothing_more() {
        let (ask, requests) = std::sync::mpsc::channel();
        for _ in 0..3 {
            ask.send(()).expect("asked");
        }
        let mut writes = 0;
        // `write` says the broker stopped: the loop ends though requests are waiting.
        pace_status_writes(
            &requests,
            STATUS_INTERVAL,
            || {
                writes += 1;
                false
            },
            |_| panic!("no pause after the broker stopped"),
        );
        assert_eq!(writes, 1);
    }

    #[tokio::test]
    async fn a_broker_that_stopped_leaves_no_status_file_and_writes_none_after() {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = dir.path().join("broker-status.json");
        let broker = broker(None, Some(status.clone()));
        attach(&broker, "key-a", "a", &[], BOT);
        broker.write_status_now(&status);
        let written = read_status(&status).expect("the status file reads");
        assert_eq!(written.sessions.len(), 1);
        broker.shutdown().await;
        assert!(!status.exists(), "shutdown removes the status file");
        // The status thread's write that was under way when the broker stopped.
        broker.write_status_now(&status);
        assert!(
            !status.exists(),
            "a write after the stop leaves no file behind"
        );
    }

    #[tokio::test]
    async fn a_topic_belongs_to_its_session_whatever_its_chat_is_bound_to() {
        let broker = broker(None, None);
        attach(&broker, "key-a", "a", &[], BOT);
        attach(&broker, "key-b", "b", &[], BOT);
        let fake = Arc::new(FakeTransport::new(FakeConfig::default()));
        let (sink, _inbound) = transport_core::inbound::channel(4);
        fake.start(sink).await.expect("started");
        let shared = Shared::new(BOT.to_owned(), fake.clone());
        let routed = |session: &str| RoutedTransport {
            shared: shared.clone(),
            session: session.to_owned(),
            broker: Arc::downgrade(&broker),
        };
        let topic = |thread: &str| transport_core::Topic {
            conversation_id: "-100".into(),
            thread_id: Some(thread.into()),
        };
        for (kept, session, thread) in [("t-a", "key-a", "7"), ("t-b", "key-b", "9")] {
            broker.keep_topic(
                kept,
                TopicRecord {
                    transport: "fake".into(),
                    session: session.into(),
                    name: kept.into(),
                    topic: topic(thread),
                    ended: false,
                },
            );
        }
        // Someone switched the forum's General topic (the chat itself) to b.
        broker.bind("fake:-100", "key-b", true);
        let message = |thread: &str| OutboundMessage {
            conversation_id: "-100".into(),
            thread_id: Some(thread.into()),
            kind: OutboundKind::Reply,
            text: "hello".into(),
            edit_key: None,
            buttons: Vec::new(),
            answers_press: None,
            reply_to: None,
        };
        routed("key-a")
            .send(message("7"))
            .await
            .expect("a's own topic, though the chat is bound to b");
        let refused = routed("key-a")
            .send(message("9"))
            .await
            .expect_err("b's topic");
        assert!(
            refused.to_string().contains("another session (b)"),
            "{refused}"
        );
        routed("key-b").send(message("9")).await.expect("b's own");
        // The chat itself (General) follows its binding.
        let general = OutboundMessage {
            thread_id: None,
            ..message("0")
        };
        assert!(routed("key-a").send(general.clone()).await.is_err());
        routed("key-b").send(general).await.expect("bound to b");
        let threads: Vec<Option<String>> = fake
            .sent()
            .into_iter()
            .map(|s| s.message.thread_id)
            .collect();
        assert_eq!(threads, [Some("7".into()), Some("9".into()), None]);
    }

    #[tokio::test]
    async fn a_file_into_a_deleted_topic_goes_to_the_new_one() {
        let broker = broker(None, None);
        attach(&broker, "key-a", "a", &[], BOT);
        let fake = Arc::new(FakeTransport::new(FakeConfig::default()));
        fake.set_topic_place(Some("forum"));
        let (sink, _inbound) = transport_core::inbound::channel(4);
        fake.start(sink).await.expect("started");
        let shared = Shared::new(BOT.to_owned(), fake.clone());
        broker
            .open_topic("key-a", &shared, &TopicAt::Place("forum".into()))
            .await;
        let routed = RoutedTransport {
            shared: shared.clone(),
            session: "key-a".to_owned(),
            broker: Arc::downgrade(&broker),
        };
        let file = |thread: &str| transport_core::OutboundFile {
            conversation_id: "forum".into(),
            thread_id: Some(thread.into()),
            name: "report.txt".into(),
            media_type: "text/plain".into(),
            as_image: false,
            caption: "the report".into(),
            data: b"all green".to_vec(),
        };
        assert_eq!(fake.topics().len(), 1);
        fake.delete_topic("t1");
        routed
            .send_file(file("t1"))
            .await
            .expect("sent to the new topic");
        let files: Vec<Option<String>> = fake.files().into_iter().map(|f| f.thread_id).collect();
        assert_eq!(files, [Some("t2".to_owned())]);
        // The next one, still addressed to the deleted topic, goes straight to the new one.
        routed.send_file(file("t1")).await.expect("redirected");
        assert_eq!(fake.files().len(), 2);
        assert_eq!(fake.topics().len(), 1, "one new topic, not one per send");
    }

    #[tokio::test]
    async fn a_notice_cut_at_its_cap_says_so() {
        let fake = FakeTransport::new(FakeConfig {
            capabilities: Capabilities {
                max_message_length: 40,
                length_unit: LengthUnit::Chars,
                markup: Markup::Plain,
                ..FakeConfig::default().capabilities
            },
            ..FakeConfig::default()
        });
        let (sink, _inbound) = transport_core::inbound::channel(4);
        fake.start(sink).await.unwrap();
        let envelope = fake.envelope("/sessions");
        let list: String = (1..=12)
            .map(|n| format!("{n}. session number {n}\n\n"))
            .collect();
        send_notice(&fake, &envelope, &list).await.unwrap();
        let texts: Vec<String> = fake.sent().into_iter().map(|s| s.message.text).collect();
        assert_eq!(texts.len(), 5, "{texts:?}");
        assert!(texts[0].starts_with("1. session number 1"), "{texts:?}");
        assert!(
            texts[4].starts_with("[truncated: ")
                && texts[4].ends_with(" more message(s) were not sent]"),
            "{texts:?}"
        );
    }
}
