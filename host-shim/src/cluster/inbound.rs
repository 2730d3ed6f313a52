//! Inbound over JetStream: ingress nodes publish each session's envelopes to its subject;
//! the node running the session consumes them with a durable consumer and acks each one
//! only after the session has handled it.
//!
//! Why this shape:
//! - `Nats-Msg-Id` = `<transport>:<platform message id>`: a platform that redelivers (a
//!   restarted poller, a Slack retry) makes the ingress publish the same message again, and
//!   the stream's duplicate window drops the copy.
//! - Ack after effect: [`InboundSink::deliver_and_wait`] returns once the bridge is done
//!   with the message (the receipt design of `transport_core::inbound`). Only then is it
//!   acked; a node that dies first never acks, and JetStream hands the message to the next
//!   consumer after `ack_wait`. While the session works on it the consumer says "in
//!   progress", so a slow live node is not redelivered to.
//! - `max_ack_pending` 1: one message of a session in flight at a time, so its messages stay
//!   in order even when two nodes bind the same consumer.
//! - A prompt's effect is its reply, at the end of its turn: a consumer with a
//!   [`TurnLedger`] (a session node's) holds a prompt's ack until that turn has settled and
//!   been saved (`settle.rs`), and takes the session's next messages meanwhile (so `/stop`
//!   reaches a busy session): up to [`HELD_PROMPTS`] unacked, still one handled at a time
//!   and in order, the session lease keeping a second node off the consumer.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer, stream};
use bytes::Bytes;
use futures_util::StreamExt as _;
use tokio::task::JoinHandle;
use transport_core::{Envelope, InboundSink, Transport};

use super::handed::{HandedLedger, Handover, Mark, decide, may_not_have_run_notice};
use super::seal::{Gate, random_id};
use super::settle::TurnLedger;
use super::subjects::{Prefix, message_dedup_id, session_consumer};
use super::warn;
use crate::local::logging::{LogLine, LogSink};
use crate::wit::types::Level;

/// Unacked messages a consumer with a [`TurnLedger`] may hold: prompts waiting for their
/// turn's reply, plus the one being handled.
pub const HELD_PROMPTS: i64 = 64;

/// How the inbound stream and the session consumers are set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboundSettings {
    /// A copy with the same message id published within this long is dropped. Platforms
    /// redeliver within minutes (Slack retries after 1 and 5 minutes).
    pub duplicate_window: Duration,
    /// Envelopes nobody consumed for this long are dropped (a session that never came back).
    pub max_age: Duration,
    /// How long a consumer may hold a message without acking or saying "in progress"
    /// before JetStream gives it to another consumer (the node is presumed dead). At most
    /// half the session lease's TTL ([`InboundSettings::for_lease_ttl`]): JetStream hands
    /// out a dead node's unacked messages before newer ones only once this has passed, and
    /// the node that takes the session over can bind its consumer two thirds of a TTL after
    /// the death. With 30 s against a 15 s lease, a message sent meanwhile was answered
    /// before the interrupted prompt (found in review, 2026-12-02).
    pub ack_wait: Duration,
}

impl InboundSettings {
    /// The settings for sessions whose leases live `lease_ttl`: `ack_wait` is half of it.
    pub fn for_lease_ttl(lease_ttl: Duration) -> InboundSettings {
        InboundSettings {
            duplicate_window: Duration::from_secs(10 * 60),
            max_age: Duration::from_secs(24 * 60 * 60),
            ack_wait: lease_ttl / 2,
        }
    }

    /// Why these settings cannot serve sessions whose leases live `lease_ttl`, if they
    /// cannot: an `ack_wait` over half of it lets the node taking a dead node's session
    /// answer newer messages before the interrupted one.
    pub fn unfit_for_lease_ttl(&self, lease_ttl: Duration) -> Option<String> {
        (self.ack_wait > lease_ttl / 2).then(|| {
            format!(
                "the inbound ack_wait ({:?}) is over half the session lease TTL ({:?}): a dead \
                 node's unanswered prompt would come back after messages sent since, and be \
                 answered out of order. Build the settings with \
                 InboundSettings::for_lease_ttl",
                self.ack_wait, lease_ttl
            )
        })
    }
}

/// The settings for the default 15 s lease.
impl Default for InboundSettings {
    fn default() -> Self {
        InboundSettings::for_lease_ttl(Duration::from_secs(15))
    }
}

/// Why an envelope could not be published or consumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InboundError {
    /// The stream or the consumer could not be set up.
    #[error(
        "NATS could not {action} ({name}): {detail}. Check that nats-server runs with JetStream \
         (-js), that this node can reach it, and that every node of this prefix uses the same \
         inbound settings"
    )]
    Setup {
        /// What was being done.
        action: &'static str,
        /// The stream or consumer.
        name: String,
        /// What the client said.
        detail: String,
    },
    /// JetStream did not confirm a publish: the message is not known to be stored, so the
    /// platform must not be told it was handled.
    #[error(
        "JetStream did not store a {transport} message for session subject {subject}: {detail}. \
         Do not confirm it to the platform (it will come again); check the NATS connection"
    )]
    Publish {
        /// The envelope's transport.
        transport: String,
        /// The session's subject (a hash, never the key).
        subject: String,
        /// What the client said.
        detail: String,
    },
}

/// Creates the inbound stream, or updates it to `settings`.
async fn ensure_stream(
    jetstream: &jetstream::Context,
    prefix: &Prefix,
    settings: &InboundSettings,
) -> Result<(), InboundError> {
    let name = prefix.inbound_stream();
    jetstream
        .create_or_update_stream(stream::Config {
            name: name.clone(),
            description: Some("bot-connect: normalized envelopes, one subject per session".into()),
            subjects: vec![prefix.inbound_wildcard()],
            // Acked means handled: nothing needs keeping after that.
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            duplicate_window: settings.duplicate_window,
            max_age: settings.max_age,
            ..stream::Config::default()
        })
        .await
        .map(drop)
        .map_err(|error| InboundError::Setup {
            action: "create or update the inbound stream",
            name,
            detail: error.to_string(),
        })
}

/// What JetStream said about a publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    /// The stream sequence the envelope is stored at (the original's, for a duplicate).
    pub sequence: u64,
    /// True when this was a copy of a message already stored, and was dropped.
    pub duplicate: bool,
}

/// The ingress side: publishes envelopes to their session's subject, sealed.
#[derive(Debug, Clone)]
pub struct InboundPublisher {
    jetstream: jetstream::Context,
    prefix: Prefix,
    gate: Gate,
}

impl InboundPublisher {
    /// Sets up the inbound stream with `settings` and returns a publisher on it that seals
    /// every envelope with `gate`'s key.
    pub async fn open(
        jetstream: jetstream::Context,
        prefix: Prefix,
        settings: &InboundSettings,
        gate: Gate,
    ) -> Result<InboundPublisher, InboundError> {
        ensure_stream(&jetstream, &prefix, settings).await?;
        Ok(InboundPublisher {
            jetstream,
            prefix,
            gate,
        })
    }

    /// Publishes `envelope` for `session_key` and waits until JetStream has stored it (or
    /// dropped it as a duplicate). Only after `Ok` may the transport's receipt be dropped,
    /// which lets the platform confirm the message.
    pub async fn publish(
        &self,
        session_key: &str,
        envelope: &Envelope,
    ) -> Result<Published, InboundError> {
        let subject = self.prefix.inbound_subject(session_key);
        let failed = |detail: String| InboundError::Publish {
            transport: envelope.transport.clone(),
            subject: subject.clone(),
            detail,
        };
        let payload = serde_json::to_vec(envelope).map_err(|error| failed(error.to_string()))?;
        // The seal needs an id; a message the platform gave none gets a unique one (it
        // could not be told from a redelivery before either).
        let id = message_dedup_id(envelope)
            .unwrap_or_else(|| format!("{}:~{}", envelope.transport, random_id()));
        let headers = self.gate.headers(&subject, &id, &payload);
        let ack = self
            .jetstream
            .publish_with_headers(subject.clone(), headers, Bytes::from(payload))
            .await
            .map_err(|error| failed(error.to_string()))?
            .await
            .map_err(|error| failed(error.to_string()))?;
        Ok(Published {
            sequence: ack.sequence,
            duplicate: ack.duplicate,
        })
    }
}

/// The ingress loop for one real transport: every message from `stream` (the transport was
/// started with its sink) is published to the session `route` names, and its receipt is
/// dropped only once JetStream stored it, so the platform confirms nothing JetStream does
/// not hold. While NATS is unreachable it keeps retrying the same message (with a bounded
/// backoff) and takes no other: the transport feels the back-pressure and the platform
/// keeps the messages. A message `route` places nowhere, and every alert, is logged.
pub async fn forward<R>(
    publisher: InboundPublisher,
    mut stream: transport_core::InboundStream,
    route: R,
    log: Arc<dyn LogSink>,
) where
    R: Fn(&Envelope) -> Option<String> + Send,
{
    while let Some(inbound) = stream.recv().await {
        let (envelope, handled) = match inbound {
            transport_core::Inbound::Message { envelope, handled } => (envelope, handled),
            transport_core::Inbound::Alert { transport, text } => {
                warn(
                    log.as_ref(),
                    "transport_alert",
                    &[("transport", transport), ("text", text)],
                );
                continue;
            }
        };
        let Some(session_key) = route(&envelope) else {
            warn(
                log.as_ref(),
                "nats_unrouted_message",
                &[
                    ("transport", envelope.transport.clone()),
                    ("conversation", envelope.conversation_id.clone()),
                ],
            );
            continue;
        };
        let mut backoff = Duration::from_millis(100);
        while let Err(error) = publisher.publish(&session_key, &envelope).await {
            warn(
                log.as_ref(),
                "nats_publish_failed",
                &[
                    ("transport", envelope.transport.clone()),
                    ("error", error.to_string()),
                ],
            );
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        // Stored (or already stored): now the platform may be told.
        drop(handled);
    }
}

/// The session side: one durable consumer feeding one session's sink, in a task.
#[derive(Debug)]
pub struct SessionConsumer {
    task: JoinHandle<()>,
    /// Prompts handled but not yet acked (their reply is not out yet).
    held: Arc<std::sync::atomic::AtomicUsize>,
}

impl SessionConsumer {
    /// Binds (creating if need be) the durable consumer of `session_key` and hands every
    /// message to `sink` in order, acking each once `deliver_and_wait` returns. A payload
    /// that is not an envelope is logged and terminated (never redelivered, never a panic).
    pub async fn start(
        jetstream: jetstream::Context,
        prefix: &Prefix,
        session_key: &str,
        sink: InboundSink,
        settings: &InboundSettings,
        gate: Gate,
        log: Arc<dyn LogSink>,
    ) -> Result<SessionConsumer, InboundError> {
        SessionConsumer::start_with(
            jetstream,
            prefix,
            session_key,
            sink,
            settings,
            None,
            gate,
            log,
        )
        .await
    }

    /// [`SessionConsumer::start`] for a session node's session: prompts acked only once
    /// their turn's reply is out, and every message handed over at most once
    /// ([`SessionGuards`]). Every message's seal is checked with `gate` before its body is
    /// read.
    #[allow(clippy::too_many_arguments)] // each is one thing the consumer is built from
    pub async fn start_with(
        jetstream: jetstream::Context,
        prefix: &Prefix,
        session_key: &str,
        sink: InboundSink,
        settings: &InboundSettings,
        guards: Option<SessionGuards>,
        gate: Gate,
        log: Arc<dyn LogSink>,
    ) -> Result<SessionConsumer, InboundError> {
        ensure_stream(&jetstream, prefix, settings).await?;
        let name = session_consumer(session_key);
        let stream_name = prefix.inbound_stream();
        let setup = |action: &'static str, detail: String| InboundError::Setup {
            action,
            name: name.clone(),
            detail,
        };
        let stream = jetstream
            .get_stream(&stream_name)
            .await
            .map_err(|error| setup("find the inbound stream", error.to_string()))?;
        let consumer: consumer::PullConsumer = stream
            .create_consumer(consumer::pull::Config {
                durable_name: Some(name.clone()),
                description: Some("bot-connect: one session's inbound envelopes".into()),
                filter_subject: prefix.inbound_subject(session_key),
                deliver_policy: consumer::DeliverPolicy::All,
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: settings.ack_wait,
                max_ack_pending: if guards.is_some() { HELD_PROMPTS } else { 1 },
                ..consumer::pull::Config::default()
            })
            .await
            .map_err(|error| setup("create the session consumer", error.to_string()))?;
        let progress_every = (settings.ack_wait / 3).max(Duration::from_millis(100));
        let held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let task = tokio::spawn(consume(
            consumer,
            name,
            sink,
            progress_every,
            guards,
            held.clone(),
            gate,
            log,
        ));
        Ok(SessionConsumer { task, held })
    }

    /// Stops consuming, as a node that dies would: a message handed to the session but not
    /// yet acked is redelivered after `ack_wait`. Returns once the task is gone, so a
    /// receipt the session drops afterwards can no longer be acked (an abort alone lets a
    /// task that is running on another thread finish its current step).
    pub async fn stop(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }

    /// True while a prompt waits for its reply before being acked.
    pub fn holds_prompts(&self) -> bool {
        self.held.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    /// True once the consumer ended by itself (the session went away).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for SessionConsumer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How long one pull waits on the server for a message before it is asked again.
pub(crate) const PULL_EXPIRES: Duration = Duration::from_secs(2);

/// How long past [`PULL_EXPIRES`] the client waits for the server to end a pull. A
/// restarted nats-server forgot the pull, and the client alone waits 5 s past its expiry:
/// 10 s without an answer after a 1 s restart, over the lock TTL plus 5 s budget at a
/// short TTL. A pull the server forgot can deliver nothing, so giving up on it loses
/// nothing; one the server still has ends by itself before this.
pub(crate) const PULL_GRACE: Duration = Duration::from_secs(1);

/// How often a crash-window notice is tried before the message is let go (logged).
const NOTICE_ATTEMPTS: u32 = 5;

/// What a session node's consumer adds to a plain one: prompts acked only once their reply
/// is out ([`TurnLedger`]), and every message handed to the session at most once
/// ([`HandedLedger`], `handed.rs`).
pub struct SessionGuards {
    /// The session's prompts taken and turns settled.
    pub turns: Arc<TurnLedger>,
    /// The cluster's handed-over ledger.
    pub handed: HandedLedger,
    /// The session's key (the ledger's keys are per session).
    pub session_key: String,
    /// The session's bots, to tell a chat that a message caught in the crash window may
    /// not have run.
    pub notices: Vec<Arc<dyn Transport>>,
}

/// The consumer loop: pull, deliver, ack; reconnects with a bounded backoff. Each argument
/// is one thing the loop owns for its whole life (it runs as its own task).
#[allow(clippy::too_many_arguments)]
async fn consume(
    consumer: consumer::PullConsumer,
    name: String,
    sink: InboundSink,
    progress_every: Duration,
    guards: Option<SessionGuards>,
    holding: Arc<std::sync::atomic::AtomicUsize>,
    gate: Gate,
    log: Arc<dyn LogSink>,
) {
    // Prompts waiting for their turn's reply; dropped (so never acked) with this task.
    let mut held = tokio::task::JoinSet::new();
    let mut backoff = Duration::from_millis(200);
    loop {
        // One message per pull. A message the client has pulled runs on its ack_wait clock
        // from then on: pulled in the client's default batch, the messages queued behind a
        // slow one got no "in progress" and JetStream redelivered them (a kill test: 712
        // prompts to the agent for 200 sent).
        let pulled = consumer
            .batch()
            .max_messages(1)
            .expires(PULL_EXPIRES)
            .messages()
            .await;
        let mut messages = match pulled {
            Ok(messages) => messages,
            Err(error) => {
                warn(
                    log.as_ref(),
                    "nats_consumer_unavailable",
                    &[("consumer", name.clone()), ("error", error.to_string())],
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        backoff = Duration::from_millis(200);
        while let Ok(Some(next)) =
            tokio::time::timeout(PULL_EXPIRES + PULL_GRACE, messages.next()).await
        {
            let message = match next {
                Ok(message) => message,
                Err(error) => {
                    // Missed heartbeats and reconnects show up here; the next pull goes on.
                    warn(
                        log.as_ref(),
                        "nats_consumer_error",
                        &[("consumer", name.clone()), ("error", error.to_string())],
                    );
                    continue;
                }
            };
            while held.try_join_next().is_some() {}
            let step = Step {
                name: &name,
                sink: &sink,
                progress_every,
                guards: guards.as_ref(),
                holding: &holding,
                gate: &gate,
                log: &log,
            };
            if !handle(message, step, &mut held).await {
                return;
            }
        }
    }
}

/// What handling one message needs from its consumer.
struct Step<'a> {
    name: &'a str,
    sink: &'a InboundSink,
    progress_every: Duration,
    guards: Option<&'a SessionGuards>,
    holding: &'a Arc<std::sync::atomic::AtomicUsize>,
    gate: &'a Gate,
    log: &'a Arc<dyn LogSink>,
}

/// Retries `attempt` (a ledger read or write) until it succeeds, saying "in progress" for
/// `message` meanwhile. Never gives up: handing the message over without the ledger could
/// run it twice, and taking the next message instead would reorder the session's inbound;
/// NATS being unreachable stalls the session anyway.
async fn ledger_op<T, F, Fut>(message: &jetstream::Message, step: &Step<'_>, mut attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, super::handed::HandedError>>,
{
    let mut backoff = Duration::from_millis(100);
    loop {
        match in_progress(message, step.progress_every, attempt()).await {
            Ok(value) => return value,
            Err(error) => {
                warn(
                    step.log.as_ref(),
                    "nats_handed_ledger_unavailable",
                    &[
                        ("consumer", step.name.to_owned()),
                        ("error", error.to_string()),
                    ],
                );
                in_progress(message, step.progress_every, tokio::time::sleep(backoff)).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Tells the chat of `envelope` that it may not have run (the crash window, `handed.rs`),
/// a few times at most; false when every try failed (then it is only logged).
async fn tell_may_not_have_run(
    message: &jetstream::Message,
    step: &Step<'_>,
    guards: &SessionGuards,
    envelope: &Envelope,
) -> bool {
    let Some(transport) = guards
        .notices
        .iter()
        .find(|transport| transport.id() == envelope.transport)
    else {
        return false;
    };
    // Rendered and redacted like the bridge's messages: it quotes what the user typed.
    let notice = may_not_have_run_notice(&envelope.text);
    let mut backoff = Duration::from_millis(200);
    for _ in 0..NOTICE_ATTEMPTS {
        let sent = in_progress(
            message,
            step.progress_every,
            crate::broker::send_notice(transport.as_ref(), envelope, &notice),
        );
        match sent.await {
            Ok(_) => return true,
            Err(error) => {
                warn(
                    step.log.as_ref(),
                    "crash_window_notice_failed",
                    &[
                        ("consumer", step.name.to_owned()),
                        ("error", error.to_string()),
                    ],
                );
                in_progress(message, step.progress_every, tokio::time::sleep(backoff)).await;
                backoff *= 2;
            }
        }
    }
    false
}

/// Checks the handed-over ledger for `envelope` before the session sees it: true when it
/// is to be handed over (marked `Handing` now), false when it was dealt with here (a copy
/// of a message handed over before, acked; or one caught in the crash window, reported
/// in its chat and acked).
async fn first_handover(
    message: &jetstream::Message,
    step: &Step<'_>,
    guards: &SessionGuards,
    envelope: &Envelope,
    key: &str,
) -> bool {
    let (name, log) = (step.name, step.log.as_ref());
    let mark = ledger_op(message, step, || guards.handed.mark(key)).await;
    match decide(mark) {
        Handover::Deliver => {
            ledger_op(message, step, || guards.handed.set(key, Mark::Handing)).await;
            true
        }
        Handover::AlreadyHanded => {
            // The session's saved state speaks for it (a turn it interrupted is reported by
            // the bridge on load): running it again could do its work twice.
            log.write(
                super::LOG_SCOPE,
                LogLine::new(
                    Level::Info,
                    "nats_redelivery_already_handed",
                    &[("consumer", name.to_owned())],
                ),
            );
            acked(message, name, log).await;
            false
        }
        Handover::MayNotHaveRun => {
            if !tell_may_not_have_run(message, step, guards, envelope).await {
                log.write(
                    super::LOG_SCOPE,
                    LogLine::new(
                        Level::Error,
                        "crash_window_message_not_reported",
                        &[
                            ("consumer", name.to_owned()),
                            ("transport", envelope.transport.clone()),
                        ],
                    ),
                );
            }
            ledger_op(message, step, || guards.handed.set(key, Mark::Handed)).await;
            acked(message, name, log).await;
            false
        }
    }
}

/// Hands one message to the session and acks it after (a prompt once its turn's reply is
/// out, from a task in `held`); false when the session is gone.
async fn handle(
    message: jetstream::Message,
    step: Step<'_>,
    held: &mut tokio::task::JoinSet<()>,
) -> bool {
    let (name, log) = (step.name, step.log.as_ref());
    // The seal first: a body nobody of this cluster sealed is never read, let alone delivered
    // (docs/security.md#cluster-security). Terminated, so it is not redelivered forever; the gate
    // counts and logs it. Judged against the time the stream stored it, so a prompt that waited for
    // its session is still good and an old one published again is not.
    let info = message.info().ok();
    let stored_at_ms = info
        .as_ref()
        .map(|info| u64::try_from(info.published.unix_timestamp_nanos() / 1_000_000).unwrap_or(0))
        .unwrap_or_else(|| step.gate.now_ms());
    // A message delivered again means a node died or stalled before its ack: the operator's
    // sign that failover is doing work (the handed-over ledger keeps it from running twice).
    if let Some(delivered) = info.as_ref().map(|info| info.delivered).filter(|&n| n > 1) {
        log.write(
            super::LOG_SCOPE,
            LogLine::new(
                Level::Info,
                "nats_redelivery",
                &[
                    ("consumer", name.to_owned()),
                    ("delivered", delivered.to_string()),
                ],
            ),
        );
    }
    if step
        .gate
        .check_stored(
            &message.subject,
            message.headers.as_ref(),
            &message.payload,
            stored_at_ms,
        )
        .is_err()
    {
        if let Err(error) = message.ack_with(AckKind::Term).await {
            warn(
                log,
                "nats_ack_failed",
                &[("consumer", name.to_owned()), ("error", error.to_string())],
            );
        }
        return true;
    }
    let envelope = match serde_json::from_slice::<Envelope>(&message.payload) {
        Ok(envelope) => envelope,
        Err(error) => {
            // Never deliverable, so never redelivered: terminated, and said so.
            warn(
                log,
                "nats_bad_envelope",
                &[
                    ("consumer", name.to_owned()),
                    ("subject", message.subject.to_string()),
                    ("error", error.to_string()),
                ],
            );
            if let Err(error) = message.ack_with(AckKind::Term).await {
                warn(
                    log,
                    "nats_ack_failed",
                    &[("consumer", name.to_owned()), ("error", error.to_string())],
                );
            }
            return true;
        }
    };
    // A message without a platform id cannot be told from its copies: handed over as is.
    let guarded = step.guards.and_then(|guards| {
        message_dedup_id(&envelope).map(|id| (guards, guards.handed.key(&guards.session_key, &id)))
    });
    if let Some((guards, key)) = &guarded
        && !first_handover(&message, &step, guards, &envelope, key).await
    {
        return true;
    }
    let turns = step.guards.map(|guards| &guards.turns);
    let taken_before = turns.map(|turns| turns.taken());
    let delivered = step.sink.deliver_and_wait(envelope);
    let outcome = in_progress(&message, step.progress_every, delivered).await;
    match outcome {
        Ok(()) => {
            if let Some((guards, key)) = &guarded {
                // Handled and saved: a copy from now on is acked without running.
                ledger_op(&message, &step, || guards.handed.set(key, Mark::Handed)).await;
            }
            // The agent accepted a prompt while the session handled this message.
            let prompt = turns
                .zip(taken_before)
                .map(|(turns, before)| (turns.clone(), before, turns.taken()))
                .filter(|(_, before, taken)| taken > before)
                .map(|(turns, _, taken)| (turns, taken));
            match prompt {
                Some((turns, prompt)) => {
                    let (name, log) = (name.to_owned(), step.log.clone());
                    let every = step.progress_every;
                    let holding = step.holding.clone();
                    holding.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    held.spawn(async move {
                        in_progress(&message, every, turns.settled(prompt)).await;
                        acked(&message, &name, log.as_ref()).await;
                        holding.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    });
                }
                None => acked(&message, name, log).await,
            }
            true
        }
        Err(_gone) => {
            // The session ended before handling it: whoever runs the session next gets it
            // now. Its mark stays `Handing` (the session may have read it before it went),
            // so the next node reports it in the chat instead of perhaps running it twice.
            let _ = message.ack_with(AckKind::Nak(None)).await;
            false
        }
    }
}

/// Awaits `work`, telling JetStream every `every` that `message` is still in progress, so
/// a slow but live node is not redelivered to.
async fn in_progress<T>(
    message: &jetstream::Message,
    every: Duration,
    work: impl std::future::Future<Output = T>,
) -> T {
    tokio::pin!(work);
    let mut progress = tokio::time::interval(every);
    progress.tick().await;
    loop {
        tokio::select! {
            outcome = &mut work => return outcome,
            _ = progress.tick() => {
                // Best effort: a lost "in progress" only risks an early redelivery.
                let _ = message.ack_with(AckKind::Progress).await;
            }
        }
    }
}

/// Acks `message` and waits for the server to confirm: an ack lost on the way would hand
/// a handled message to another node.
async fn acked(message: &jetstream::Message, name: &str, log: &dyn LogSink) {
    if let Err(error) = message.double_ack().await {
        warn(
            log,
            "nats_ack_failed",
            &[("consumer", name.to_owned()), ("error", error.to_string())],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ack_wait_over_half_the_lease_is_unfit_and_half_is_fit() {
        let lease = Duration::from_secs(15);
        assert_eq!(InboundSettings::default().unfit_for_lease_ttl(lease), None);
        let half = InboundSettings::for_lease_ttl(lease);
        assert_eq!(half.ack_wait, Duration::from_millis(7500));
        assert_eq!(half.unfit_for_lease_ttl(lease), None);
        let over = InboundSettings {
            ack_wait: half.ack_wait + Duration::from_millis(1),
            ..half
        };
        let why = over.unfit_for_lease_ttl(lease).expect("unfit");
        assert!(why.contains("7.501s") && why.contains("15s"), "{why}");
    }
}
