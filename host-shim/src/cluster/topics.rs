//! A topic per session in the cluster (docs/scaling.md#a-topic-per-session): the ingress
//! holding a bot whose config names a place for topics (`sessionTopics`) makes (or opens
//! again, by name) a topic for every session listed in the directory, at its periodic look,
//! and marks it ended when the session leaves the directory. A session that is offline is
//! still listed, so its topic stays open: it comes back.
//!
//! The decisions are the broker's ([`crate::broker::topics`]: naming, what to do on attach,
//! routing, saying a problem once); what is here is the plan of one look over the directory
//! ([`plan`], pure) and the I/O around it: the topics are kept in the sealed KV bucket
//! `<prefix>-topics` (one value per topic, under a keyed hash of its kept name), so an
//! ingress that takes the bot over after a failover reads them and reopens nothing twice.
//!
//! Where the bot makes topics in its private chats (Telegram's `sessionTopics: "private"`),
//! each listed session's topic is made in the private chat of every user paired with it
//! (its directory entry's `paired`, written by the node running it from the session's own
//! saves) or allowed by the config, as `serve` does (docs/scaling.md#topics-in-private-chats).
//!
//! Only the ingress holding a bot writes that bot's topics (the kept name carries the
//! transport id), so a plain `put` is enough, as for bindings, and a standby makes none.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use futures_util::TryStreamExt as _;
use serde::{Deserialize, Serialize};
use transport_core::{
    Envelope, OutboundFile, OutboundMessage, SendReceipt, Topic, TopicError, Transport,
    TransportError,
};

use super::directory::DirectoryError;
use super::seal::Gate;
use super::sealed_kv;
use super::subjects::Prefix;
use crate::broker::make_topic;
use crate::broker::routing;
use crate::broker::send_notice_to;
use crate::broker::topics::{self, OnAttach, TopicAt, TopicRecord, TopicRoute, Topics};
use crate::local::logging::{LogLine, LogSink};
use crate::wit::types::Level;

/// A session listed in the directory, as far as its topic needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedSession {
    /// Its key.
    pub key: String,
    /// The name chats reach it by.
    pub name: String,
    /// Its working directory.
    pub cwd: String,
    /// The machine running it.
    pub machine: String,
    /// Who is paired with it (its entry's `paired`) or allowed by the config
    /// (`allowUsers`): where the bot makes topics in private chats, each one's chat gets
    /// the session's topic.
    pub paired: BTreeSet<String>,
}

/// One thing a look over the directory does for a bot's topics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Make a topic for a session that has none.
    Create {
        /// The session.
        session: ListedSession,
        /// Where it is made.
        at: TopicAt,
        /// The topic's kept name ([`topics::kept_name`]).
        kept: String,
        /// The topic's name.
        name: String,
    },
    /// Open again the topic a session had (it was marked ended: the session is back).
    Resume {
        /// The session.
        session: ListedSession,
        /// The topic's kept name.
        kept: String,
        /// The topic's name.
        name: String,
        /// Where it is.
        topic: Topic,
    },
    /// Give an open topic to the session now listed under its name, its previous session
    /// having left the directory (a session started again under a new key): the topic
    /// stays open, nothing is asked of the platform.
    Move {
        /// The session now listed.
        session: ListedSession,
        /// The topic's kept name.
        kept: String,
        /// The topic as kept (for its previous session).
        record: TopicRecord,
    },
    /// Mark ended the topic of a session that left the directory.
    End {
        /// The topic's kept name.
        kept: String,
        /// The topic as kept.
        record: TopicRecord,
    },
}

/// What one look over the directory does for `transport`'s topics in `place`, given the
/// `book` of topics made so far and the `sessions` listed now (offline ones included).
/// `asked` holds the kept names whose topic could not be made or opened while this ingress
/// holds the bot: they are not asked again at every look (the platform said no; a right
/// granted meanwhile works when the bot is held again or the session comes back).
///
/// Rules: a listed session with an open topic of its name is left alone; one whose topic
/// was ended gets it opened again; one without gets a new one; two listed sessions whose
/// topic names are equal share the first one's (in key order); an open topic whose session
/// is no longer listed is ended, unless a listed session has its name (it moves to that
/// session).
pub fn plan(
    book: &Topics,
    transport: &str,
    place: &str,
    max_chars: usize,
    sessions: &[ListedSession],
    asked: &HashSet<String>,
) -> Vec<Step> {
    let wanted: Vec<(TopicAt, &ListedSession)> = sessions
        .iter()
        .map(|session| (TopicAt::Place(place.to_owned()), session))
        .collect();
    plan_at(book, transport, max_chars, sessions, wanted, asked)
}

/// [`plan`] where the bot makes topics in its private chats: each listed session wants
/// its topic in the private chat of every user in its `paired` (a group "paired" by id
/// has no private chat). The same rules hold per chat; a user no longer paired with a
/// session that is still listed keeps the topic they have (it ends with the session, as
/// with `serve`).
pub fn plan_private(
    book: &Topics,
    transport: &str,
    max_chars: usize,
    sessions: &[ListedSession],
    asked: &HashSet<String>,
) -> Vec<Step> {
    let wanted: Vec<(TopicAt, &ListedSession)> = sessions
        .iter()
        .flat_map(|session| {
            topics::private_chats(transport, session.paired.iter().map(String::as_str))
                .into_iter()
                .map(move |chat| (TopicAt::PrivateChat(chat), session))
        })
        .collect();
    plan_at(book, transport, max_chars, sessions, wanted, asked)
}

/// The plan for topics `wanted` (each session where it wants one), `sessions` being every
/// session listed.
fn plan_at(
    book: &Topics,
    transport: &str,
    max_chars: usize,
    sessions: &[ListedSession],
    mut wanted: Vec<(TopicAt, &ListedSession)>,
    asked: &HashSet<String>,
) -> Vec<Step> {
    wanted.sort_by(|(a_at, a), (b_at, b)| {
        (a.key.as_str(), a_at.kept_place()).cmp(&(b.key.as_str(), b_at.kept_place()))
    });
    let listed: BTreeSet<&str> = sessions.iter().map(|s| s.key.as_str()).collect();
    let mut planned: HashSet<String> = HashSet::new();
    let mut steps = Vec::new();
    for (at, session) in wanted {
        let name = topics::topic_name(&session.name, &session.cwd, &session.machine, max_chars);
        let kept = topics::kept_name(transport, at.kept_place(), &name);
        if asked.contains(&kept) || !planned.insert(kept.clone()) {
            continue;
        }
        let known = book.get(&kept);
        if let Some(record) = known.filter(|r| !r.ended) {
            if !listed.contains(record.session.as_str()) {
                steps.push(Step::Move {
                    session: session.clone(),
                    kept,
                    record: record.clone(),
                });
            }
            continue;
        }
        steps.push(match topics::on_attach(known) {
            OnAttach::Create => Step::Create {
                session: session.clone(),
                at,
                kept,
                name,
            },
            OnAttach::Resume(topic) => Step::Resume {
                session: session.clone(),
                kept,
                name,
                topic,
            },
        });
    }
    let mut ends: Vec<(&str, &TopicRecord)> = book
        .records()
        .filter(|(_, r)| r.transport == transport && !r.ended)
        .filter(|(kept, r)| !listed.contains(r.session.as_str()) && !planned.contains(*kept))
        .collect();
    ends.sort_by_key(|(kept, _)| *kept);
    steps.extend(ends.into_iter().map(|(kept, record)| Step::End {
        kept: kept.to_owned(),
        record: record.clone(),
    }));
    steps
}

/// Where a message at `envelope`'s conversation and thread goes as far as topics tell: the
/// broker's own commands (`/sessions`, `/switch`) are the ingress's even in a topic. A
/// topic not marked ended belongs to a listed session (ended ones are marked at the look
/// after their session left), which may be offline: its messages wait for it.
pub fn route(book: &Topics, envelope: &Envelope) -> TopicRoute {
    if routing::is_broker_command(&envelope.text) {
        return TopicRoute::NotATopic;
    }
    book.route(
        &envelope.transport,
        &envelope.conversation_id,
        envelope.thread_id.as_deref(),
        |_| true,
    )
}

/// One kept topic as its sealed value holds it: the kept name (the KV key is a hash of it)
/// and the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct KeptTopic {
    kept: String,
    record: TopicRecord,
}

/// The ingress's topics: the book (shared by the routing of every bot and the look), the
/// sealed bucket it is kept in, and what was asked in vain.
pub struct TopicKeeper {
    store: kv::Store,
    gate: Gate,
    log: Arc<dyn LogSink>,
    book: Mutex<Topics>,
    asked: Mutex<HashSet<String>>,
    /// Held while a look runs: a slow platform makes the next look skip, not pile up.
    looking: tokio::sync::Mutex<()>,
    /// Held while a deleted topic is replaced: two sends failing at once make one topic.
    replacing: tokio::sync::Mutex<()>,
}

impl TopicKeeper {
    /// Opens (creating if need be) `prefix`'s topics bucket.
    pub async fn open(
        jetstream: &jetstream::Context,
        prefix: &Prefix,
        gate: &Gate,
        log: Arc<dyn LogSink>,
    ) -> Result<TopicKeeper, DirectoryError> {
        let bucket = prefix.topic_bucket();
        let store = jetstream
            .create_or_update_key_value(kv::Config {
                bucket: bucket.clone(),
                description: "bot-connect: the topic the ingress made for each session".into(),
                history: 1,
                ..kv::Config::default()
            })
            .await
            .map_err(|error| DirectoryError {
                action: "open the bucket",
                bucket,
                detail: error.to_string(),
            })?;
        Ok(TopicKeeper {
            store,
            gate: gate.clone(),
            log,
            book: Mutex::new(Topics::default()),
            asked: Mutex::new(HashSet::new()),
            looking: tokio::sync::Mutex::new(()),
            replacing: tokio::sync::Mutex::new(()),
        })
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Topics> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn asked(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn log(&self, level: Level, event: &str, fields: &[(&str, String)]) {
        self.log
            .write(super::LOG_SCOPE, LogLine::new(level, event, fields));
    }

    /// Where `envelope` goes as far as topics tell ([`route`]).
    pub fn route(&self, envelope: &Envelope) -> TopicRoute {
        route(&self.book(), envelope)
    }

    /// Whether `envelope` was written in a session's topic (ended or not): such a message
    /// is meant for the bot, mentioned or not.
    pub fn in_a_topic(&self, envelope: &Envelope) -> bool {
        self.book()
            .owner(
                &envelope.transport,
                &envelope.conversation_id,
                envelope.thread_id.as_deref(),
            )
            .is_some()
    }

    /// Reads every kept topic into the book, when this ingress takes `transport_id`'s bot:
    /// the ingress that held it before may have made topics since. What `transport_id`
    /// asked in vain is forgotten, so a right granted meanwhile is tried again. A value
    /// that does not open (not sealed with the cluster key) is refused and logged by the
    /// gate; a bucket that cannot be read is logged, and its sessions' topics are made
    /// again only for sessions the book does not know.
    pub async fn reload(&self, transport_id: &str) {
        match self.read_all().await {
            Ok(kept) => {
                let mut book = self.book();
                for KeptTopic { kept, record } in kept {
                    book.keep(&kept, record);
                }
            }
            Err(error) => self.log(
                Level::Warning,
                "session topics unreadable",
                &[("error", error.to_string())],
            ),
        }
        let mine = format!("{}{transport_id}:", topics::KEPT_PREFIX);
        self.asked().retain(|kept| !kept.starts_with(&mine));
    }

    async fn read_all(&self) -> Result<Vec<KeptTopic>, DirectoryError> {
        let fail = |detail: String| DirectoryError {
            action: "read the session topics",
            bucket: self.store.name.clone(),
            detail,
        };
        let keys: Vec<String> = self
            .store
            .keys()
            .await
            .map_err(|e| fail(e.to_string()))?
            .try_collect()
            .await
            .map_err(|e| fail(e.to_string()))?;
        let mut kept = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(value) = self
                .store
                .get(key.as_str())
                .await
                .map_err(|e| fail(e.to_string()))?
            else {
                continue;
            };
            match sealed_kv::open(self.gate.key(), &self.store.name, &key, &value) {
                Ok(plain) => match serde_json::from_slice::<KeptTopic>(&plain) {
                    Ok(topic) => kept.push(topic),
                    Err(error) => self.log(
                        Level::Warning,
                        "session topic unreadable",
                        &[
                            ("key", key.clone()),
                            (
                                "error",
                                format!("{error}; its session gets a new topic at the next look"),
                            ),
                        ],
                    ),
                },
                Err(refused) => self
                    .gate
                    .refuse(&format!("{}/{key}", self.store.name), &refused),
            }
        }
        Ok(kept)
    }

    /// Writes `record` under `kept`, in the bucket and then the book. A write NATS refuses
    /// is logged; the book keeps it all the same, so this ingress routes the topic (a
    /// failover ingress would make a new one).
    async fn keep(&self, kept: &str, record: TopicRecord) {
        let key = self.gate.key().name("t", &["topic", kept]);
        let plain = serde_json::to_vec(&KeptTopic {
            kept: kept.to_owned(),
            record: record.clone(),
        })
        .unwrap_or_default();
        let written = match sealed_kv::seal(self.gate.key(), &self.store.name, &key, &plain) {
            Ok(sealed) => self
                .store
                .put(key, Bytes::from(sealed))
                .await
                .map(|_| ())
                .map_err(|error| error.to_string()),
            Err(error) => Err(error.to_string()),
        };
        if let Err(error) = written {
            self.log(
                Level::Warning,
                "session topic not kept",
                &[
                    ("topic", record.name.clone()),
                    (
                        "error",
                        format!(
                            "{error}; it is used until this ingress stops, and an ingress \
                             taking the bot over makes a new one"
                        ),
                    ),
                ],
            );
        }
        self.book().keep(kept, record);
    }

    /// One look over the directory's `sessions` for the bot `transport` (when its config
    /// names a place for topics): makes, opens again and ends topics as [`plan`] (or, where
    /// the bot makes topics in private chats, [`plan_private`]) says. Skipped while another
    /// look still runs.
    pub async fn look(&self, transport: &dyn Transport, sessions: &[ListedSession]) {
        let Some(place) = transport.topic_place() else {
            return;
        };
        let Ok(_one_at_a_time) = self.looking.try_lock() else {
            return;
        };
        let transport_id = transport.id().to_owned();
        let private = transport.topics_in_private_chats();
        let max = transport.topic_naming().max_chars;
        let steps = {
            let book = self.book();
            let asked = self.asked();
            if private {
                plan_private(&book, &transport_id, max, sessions, &asked)
            } else {
                plan(&book, &transport_id, &place, max, sessions, &asked)
            }
        };
        // The bot's topic mode in private chats is one switch for every chat: once it says
        // no, the other users' topics are not asked for in vain (each is marked asked, as
        // the one refused is), while ending and reopening go on.
        let mut mode_off = false;
        for step in steps {
            match step {
                Step::Create {
                    session,
                    at,
                    kept,
                    name,
                } => {
                    if mode_off {
                        self.asked().insert(kept);
                        continue;
                    }
                    let refused = self
                        .create(transport, &at, &session, &kept, &name, false)
                        .await;
                    mode_off = private
                        && matches!(
                            refused,
                            Some(TopicError::MissingPermission(_) | TopicError::Unsupported(_))
                        );
                }
                Step::Resume {
                    session,
                    kept,
                    name,
                    topic,
                } => match transport.resume_topic(&topic, &name).await {
                    Ok(()) => {
                        // Kept before it is announced, as a new topic is.
                        self.opened(&transport_id, &session, &kept, &name, topic.clone())
                            .await;
                        notice(
                            self,
                            transport,
                            &topic,
                            &topics::resumed_announcement(&session.name),
                        )
                        .await;
                    }
                    Err(error) => {
                        let at = TopicAt::of(transport, &topic);
                        match topics::after_resume_failed(&error) {
                            topics::AfterResumeFailed::Recreate => {
                                self.create(transport, &at, &session, &kept, &name, true)
                                    .await;
                            }
                            topics::AfterResumeFailed::KeepAndSay => {
                                self.problem(&transport_id, at.said_place(), &error);
                                // Still there: its messages go to the session all the same.
                                self.opened(&transport_id, &session, &kept, &name, topic)
                                    .await;
                            }
                        }
                    }
                },
                Step::Move {
                    session,
                    kept,
                    record,
                } => {
                    self.opened(&transport_id, &session, &kept, &record.name, record.topic)
                        .await;
                }
                Step::End { kept, record } => {
                    notice(
                        self,
                        transport,
                        &record.topic,
                        &topics::ended_announcement(&record.name),
                    )
                    .await;
                    let ended = topics::ended_name(&record.name, max);
                    // Renamed, and closed where the platform closes topics (a private
                    // chat's topic is only renamed: closing is for forum groups).
                    if let Err(error) = transport.end_topic(&record.topic, &ended).await {
                        // Gone or refused: it is kept as ended all the same, so a message
                        // there is answered, and the session's return opens it again.
                        let at = TopicAt::of(transport, &record.topic);
                        self.problem(&transport_id, at.said_place(), &error);
                    }
                    self.log(
                        Level::Info,
                        "session topic ended",
                        &[
                            ("transport", transport_id.clone()),
                            ("topic", record.name.clone()),
                        ],
                    );
                    self.keep(
                        &kept,
                        TopicRecord {
                            ended: true,
                            ..record
                        },
                    )
                    .await;
                }
            }
        }
    }

    /// Makes `session`'s topic `at` its place; `deleted` when it replaces one deleted by
    /// hand (said in the new topic). A refusal is said once and not asked again during
    /// this hold, and returned.
    async fn create(
        &self,
        transport: &dyn Transport,
        at: &TopicAt,
        session: &ListedSession,
        kept: &str,
        name: &str,
        deleted: bool,
    ) -> Option<TopicError> {
        match make_topic(transport, at, name).await {
            Ok(topic) => {
                let text = if deleted {
                    topics::recreated(name)
                } else {
                    topics::announcement(&session.name, &session.cwd, &session.machine)
                };
                // Kept before it is announced: a reply typed the moment the announcement
                // shows must find the topic routed, or it is read as group chatter.
                self.opened(transport.id(), session, kept, name, topic.clone())
                    .await;
                notice(self, transport, &topic, &text).await;
                None
            }
            Err(error) => {
                self.asked().insert(kept.to_owned());
                self.problem(transport.id(), at.said_place(), &error);
                Some(error)
            }
        }
    }

    async fn opened(
        &self,
        transport_id: &str,
        session: &ListedSession,
        kept: &str,
        name: &str,
        topic: Topic,
    ) {
        self.log(
            Level::Info,
            "session topic ready",
            &[
                ("transport", transport_id.to_owned()),
                ("topic", name.to_owned()),
            ],
        );
        self.keep(
            kept,
            TopicRecord {
                transport: transport_id.to_owned(),
                session: session.key.clone(),
                name: name.to_owned(),
                topic,
                ended: false,
            },
        )
        .await;
    }

    /// Where a send to `conversation_id` (and `thread_id`) of `transport_id` goes instead:
    /// the topic that replaced one deleted by hand.
    fn moved(
        &self,
        transport_id: &str,
        conversation_id: &str,
        thread_id: Option<&str>,
    ) -> Option<Topic> {
        self.book()
            .moved(transport_id, conversation_id, thread_id)
            .cloned()
    }

    /// After a send into `failed` failed because the topic is gone (deleted by hand): makes
    /// a new topic of the same name for its session, says so there, and keeps it in place
    /// of the old one, so this send and later ones addressed to the old topic go there.
    /// When another send replaced it meanwhile, that replacement. `None` when `failed` is
    /// no session's open topic, or no new topic could be made (said as any problem is).
    async fn replace_gone(&self, transport: &dyn Transport, failed: &Topic) -> Option<Topic> {
        let _one_at_a_time = self.replacing.lock().await;
        let transport_id = transport.id();
        let (kept, record) = {
            let book = self.book();
            let session = book.owner(
                transport_id,
                &failed.conversation_id,
                failed.thread_id.as_deref(),
            )?;
            let (kept, record) = book.open_of(session, transport_id)?;
            (kept.to_owned(), record.clone())
        };
        if &record.topic != failed {
            return Some(record.topic);
        }
        let at = TopicAt::of(transport, &record.topic);
        let topic = match make_topic(transport, &at, &record.name).await {
            Ok(topic) => topic,
            Err(error) => {
                self.problem(transport_id, at.said_place(), &error);
                return None;
            }
        };
        self.log(
            Level::Warning,
            "session topic made again",
            &[
                ("transport", transport_id.to_owned()),
                ("topic", record.name.clone()),
            ],
        );
        let name = record.name.clone();
        // Kept before it is announced, as a new topic is.
        self.keep(
            &kept,
            TopicRecord {
                topic: topic.clone(),
                ..record
            },
        )
        .await;
        notice(self, transport, &topic, &topics::recreated(&name)).await;
        Some(topic)
    }

    /// Says a topic problem once per place and kind, in the ingress's log: chats still
    /// reach every session with `/switch`.
    fn problem(&self, transport_id: &str, place: &str, error: &TopicError) {
        let first = self
            .book()
            .first_time(transport_id, place, &topics::problem_key(error));
        if first {
            self.log(
                Level::Warning,
                "session topic not made",
                &[
                    ("transport", transport_id.to_owned()),
                    ("text", topics::not_made(transport_id, place, error)),
                ],
            );
        }
    }
}

/// `inner` with its sends into the sessions' topics looked after (what the ingress serves
/// the session nodes' sends and the kept replies through): a send into a topic deleted by
/// hand makes a new topic of the same name and goes there, so the reply is not lost, and
/// later sends still addressed to the old topic go to the new one.
pub struct TopicSends {
    inner: Arc<dyn Transport>,
    keeper: Arc<TopicKeeper>,
}

impl TopicSends {
    /// Wraps `inner`, whose topics `keeper` keeps.
    pub fn new(inner: Arc<dyn Transport>, keeper: Arc<TopicKeeper>) -> TopicSends {
        TopicSends { inner, keeper }
    }

    /// Where a send addressed to `conversation_id` and `thread_id` goes now.
    fn now_at(&self, conversation_id: &mut String, thread_id: &mut Option<String>) {
        if let Some(now) = self
            .keeper
            .moved(self.inner.id(), conversation_id, thread_id.as_deref())
        {
            *conversation_id = now.conversation_id;
            *thread_id = now.thread_id;
        }
    }

    /// The topic to send again to after `error`, when it says the topic the send went to
    /// is gone and a new one was made.
    async fn replaced(
        &self,
        error: &TransportError,
        conversation_id: &str,
        thread_id: Option<&str>,
    ) -> Option<Topic> {
        if !self.inner.topic_gone(error) {
            return None;
        }
        let failed = Topic {
            conversation_id: conversation_id.to_owned(),
            thread_id: thread_id.map(str::to_owned),
        };
        self.keeper.replace_gone(self.inner.as_ref(), &failed).await
    }

    /// `item` posted with `post` where its topic is now; when the platform says that topic
    /// is gone, posted once more in the topic made to replace it. `place` reaches the item's
    /// conversation and thread (a message's, a file's).
    async fn post_following<T: Clone, Posted>(
        &self,
        mut item: T,
        place: fn(&mut T) -> (&mut String, &mut Option<String>),
        post: impl Fn(T) -> Posted,
    ) -> Result<SendReceipt, TransportError>
    where
        Posted: std::future::Future<Output = Result<SendReceipt, TransportError>>,
    {
        let (conversation, thread) = place(&mut item);
        self.now_at(conversation, thread);
        let error = match post(item.clone()).await {
            Err(error) => error,
            sent => return sent,
        };
        let (conversation, thread) = place(&mut item);
        let Some(topic) = self.replaced(&error, conversation, thread.as_deref()).await else {
            return Err(error);
        };
        *conversation = topic.conversation_id;
        *thread = topic.thread_id;
        post(item).await
    }
}

fn message_place(message: &mut OutboundMessage) -> (&mut String, &mut Option<String>) {
    (&mut message.conversation_id, &mut message.thread_id)
}

fn file_place(file: &mut OutboundFile) -> (&mut String, &mut Option<String>) {
    (&mut file.conversation_id, &mut file.thread_id)
}

transport_core::forward_transport! {
    // Sends, files and typing follow a topic made anew; everything else reaches the bot as
    // it is.
    impl Transport for TopicSends => inner {
        async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
            self.post_following(message, message_place, |message| self.inner.send(message))
                .await
        }

        async fn typing(
            &self,
            conversation_id: &str,
            thread_id: Option<&str>,
        ) -> Result<(), TransportError> {
            let (mut conversation, mut thread) =
                (conversation_id.to_owned(), thread_id.map(str::to_owned));
            self.now_at(&mut conversation, &mut thread);
            self.inner.typing(&conversation, thread.as_deref()).await
        }

        async fn send_file(&self, file: OutboundFile) -> Result<SendReceipt, TransportError> {
            self.post_following(file, file_place, |file| self.inner.send_file(file))
                .await
        }
    }
}

/// Posts `text` in `topic`; a failure is logged (the topic is kept all the same).
async fn notice(keeper: &TopicKeeper, transport: &dyn Transport, topic: &Topic, text: &str) {
    if let Err(error) = send_notice_to(
        transport,
        &topic.conversation_id,
        topic.thread_id.as_deref(),
        text,
    )
    .await
    {
        keeper.log(
            Level::Warning,
            "session topic notice not sent",
            &[
                ("transport", transport.id().to_owned()),
                ("error", error.to_string()),
            ],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLACE: &str = "-100";

    fn session(key: &str, name: &str) -> ListedSession {
        ListedSession {
            key: key.into(),
            name: name.into(),
            cwd: format!("/work/{name}"),
            machine: "laptop".into(),
            paired: BTreeSet::new(),
        }
    }

    /// `session` paired with `users` (`telegram:<id>`).
    fn paired_with(key: &str, name: &str, users: &[&str]) -> ListedSession {
        ListedSession {
            paired: users
                .iter()
                .map(|user| format!("telegram:{user}"))
                .collect(),
            ..session(key, name)
        }
    }

    fn kept(name: &str) -> String {
        topics::kept_name(
            "telegram",
            PLACE,
            &topics::topic_name(name, &format!("/work/{name}"), "laptop", 128),
        )
    }

    fn record(key: &str, name: &str, thread: &str, ended: bool) -> TopicRecord {
        TopicRecord {
            transport: "telegram".into(),
            session: key.into(),
            name: topics::topic_name(name, &format!("/work/{name}"), "laptop", 128),
            topic: Topic {
                conversation_id: PLACE.into(),
                thread_id: Some(thread.into()),
            },
            ended,
        }
    }

    fn kinds(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .map(|step| match step {
                Step::Create { session, at, .. } => match at {
                    TopicAt::Place(_) => format!("create {}", session.key),
                    TopicAt::PrivateChat(chat) => format!("create {} in {chat}", session.key),
                },
                Step::Resume { session, topic, .. } => {
                    format!("resume {} at {:?}", session.key, topic.thread_id)
                }
                Step::Move {
                    session, record, ..
                } => format!("move {} to {}", record.session, session.key),
                Step::End { record, .. } => format!("end {}", record.session),
            })
            .collect()
    }

    #[test]
    fn a_look_makes_missing_topics_reopens_ended_ones_and_ends_those_of_sessions_gone() {
        let book = Topics::from_kept([
            (kept("api"), record("k-api", "api", "7", false)),
            (kept("web"), record("k-web", "web", "9", true)),
            (kept("old"), record("k-old", "old", "11", false)),
            (kept("done"), record("k-done", "done", "13", true)),
        ]);
        let listed = [
            session("k-api", "api"),
            session("k-web", "web"),
            session("k-new", "new"),
        ];
        let steps = plan(&book, "telegram", PLACE, 128, &listed, &HashSet::new());
        assert_eq!(
            kinds(&steps),
            [
                // k-api's topic is open: nothing to do.
                "create k-new",
                "resume k-web at Some(\"9\")",
                // Left the directory; k-done was ended already.
                "end k-old",
            ]
        );
        // Another transport's book entries are not this bot's to end.
        assert_eq!(
            kinds(&plan(&book, "discord", PLACE, 128, &[], &HashSet::new())),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_failover_ingress_with_the_kept_book_does_nothing_twice() {
        let book = Topics::from_kept([(kept("api"), record("k-api", "api", "7", false))]);
        let steps = plan(
            &book,
            "telegram",
            PLACE,
            128,
            &[session("k-api", "api")],
            &HashSet::new(),
        );
        assert_eq!(steps, Vec::new());
    }

    #[test]
    fn a_session_started_again_under_a_new_key_takes_its_open_topic_over_without_ending_it() {
        let book = Topics::from_kept([(kept("api"), record("k-old", "api", "7", false))]);
        let steps = plan(
            &book,
            "telegram",
            PLACE,
            128,
            &[session("k-new", "api")],
            &HashSet::new(),
        );
        assert_eq!(kinds(&steps), ["move k-old to k-new"]);
    }

    #[test]
    fn a_topic_asked_in_vain_is_not_asked_again_at_every_look() {
        let asked: HashSet<String> = [kept("api")].into();
        let listed = [session("k-api", "api"), session("k-web", "web")];
        let steps = plan(&Topics::default(), "telegram", PLACE, 128, &listed, &asked);
        assert_eq!(kinds(&steps), ["create k-web"]);
    }

    #[test]
    fn two_sessions_of_one_topic_name_make_one_topic() {
        let listed = [session("k-b", "api"), session("k-a", "api")];
        let steps = plan(
            &Topics::default(),
            "telegram",
            PLACE,
            128,
            &listed,
            &HashSet::new(),
        );
        assert_eq!(kinds(&steps), ["create k-a"]);
        // Its topic kept, the other is not made a second one.
        let book = Topics::from_kept([(kept("api"), record("k-a", "api", "7", false))]);
        assert_eq!(
            plan(&book, "telegram", PLACE, 128, &listed, &HashSet::new()),
            Vec::new()
        );
    }

    #[test]
    fn in_private_chats_each_paired_user_gets_each_sessions_topic_once() {
        let private = |user: &str, key: &str, name: &str, thread: &str| {
            let name = topics::topic_name(name, &format!("/work/{name}"), "laptop", 128);
            (
                topics::kept_name("telegram", user, &name),
                TopicRecord {
                    transport: "telegram".into(),
                    session: key.into(),
                    name,
                    topic: Topic {
                        conversation_id: user.into(),
                        thread_id: Some(thread.into()),
                    },
                    ended: false,
                },
            )
        };
        let listed = [
            // A group "paired" by id has no private chat; another bot's user is not this
            // bot's.
            paired_with("k-api", "api", &["4242", "4343", "-1009"]),
            paired_with("k-web", "web", &["4242"]),
            ListedSession {
                paired: ["discord:77".to_owned()].into(),
                ..session("k-doc", "doc")
            },
        ];
        let none = HashSet::new();
        let steps = plan_private(&Topics::default(), "telegram", 128, &listed, &none);
        assert_eq!(
            kinds(&steps),
            [
                "create k-api in 4242",
                "create k-api in 4343",
                "create k-web in 4242"
            ]
        );

        // A failover ingress reading the kept topics makes none twice; a user no longer
        // paired with a listed session keeps their topic; a session gone ends it in
        // every chat.
        let book = Topics::from_kept([
            private("4242", "k-api", "api", "1"),
            private("4343", "k-api", "api", "2"),
            private("4242", "k-web", "web", "3"),
            private("4242", "k-old", "old", "4"),
        ]);
        assert_eq!(
            kinds(&plan_private(&book, "telegram", 128, &listed, &none)),
            ["end k-old"]
        );
        let unpaired = [paired_with("k-api", "api", &["4242"]), listed[1].clone()];
        assert_eq!(
            kinds(&plan_private(&book, "telegram", 128, &unpaired, &none)),
            ["end k-old"]
        );
        // A chat refused (topic mode off) is not asked again at the next look.
        let asked: HashSet<String> = [private("4343", "k-api", "api", "2").0].into();
        assert_eq!(
            kinds(&plan_private(
                &Topics::default(),
                "telegram",
                128,
                &listed,
                &asked
            )),
            ["create k-api in 4242", "create k-web in 4242"]
        );
    }

    fn envelope(thread: Option<&str>, text: &str) -> Envelope {
        Envelope {
            transport: "telegram".into(),
            conversation_id: PLACE.into(),
            user_id: "1".into(),
            thread_id: thread.map(str::to_owned),
            text: text.into(),
            ..Envelope::default()
        }
    }

    #[test]
    fn a_message_in_a_topic_goes_to_its_session_but_commands_stay_the_ingresss() {
        let book = Topics::from_kept([
            (kept("api"), record("k-api", "api", "7", false)),
            (kept("web"), record("k-web", "web", "9", true)),
        ]);
        let table = [
            (Some("7"), "build it", TopicRoute::Session("k-api".into())),
            (Some("7"), "/sessions", TopicRoute::NotATopic),
            (Some("7"), "/switch web", TopicRoute::NotATopic),
            (
                Some("9"),
                "hello",
                TopicRoute::Ended(record("k-web", "web", "9", true).name),
            ),
            (None, "hello", TopicRoute::NotATopic),
            (Some("8"), "hello", TopicRoute::NotATopic),
        ];
        for (thread, text, expected) in table {
            assert_eq!(
                route(&book, &envelope(thread, text)),
                expected,
                "{thread:?} {text}"
            );
        }
    }
}
