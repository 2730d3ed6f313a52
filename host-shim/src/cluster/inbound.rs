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
use transport_core::{Envelope, InboundSink};

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

    /// [`SessionConsumer::start`] for a session whose prompts are acked only once their
    /// turn's reply is out (`ledger`, see `settle.rs`). Every message's seal is checked
    /// with `gate` before its body is read.
    #[allow(clippy::too_many_arguments)] // each is one thing the consumer is built from
    pub async fn start_with(
        jetstream: jetstream::Context,
        prefix: &Prefix,
        session_key: &str,
        sink: InboundSink,
        settings: &InboundSettings,
        ledger: Option<Arc<TurnLedger>>,
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
                max_ack_pending: if ledger.is_some() { HELD_PROMPTS } else { 1 },
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
            ledger,
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

/// The consumer loop: pull, deliver, ack; reconnects with a bounded backoff. Each argument
/// is one thing the loop owns for its whole life (it runs as its own task).
#[allow(clippy::too_many_arguments)]
async fn consume(
    consumer: consumer::PullConsumer,
    name: String,
    sink: InboundSink,
    progress_every: Duration,
    ledger: Option<Arc<TurnLedger>>,
    holding: Arc<std::sync::atomic::AtomicUsize>,
    gate: Gate,
    log: Arc<dyn LogSink>,
) {
    // Prompts waiting for their turn's reply; dropped (so never acked) with this task.
    let mut held = tokio::task::JoinSet::new();
    let mut backoff = Duration::from_millis(200);
    loop {
        let mut messages = match consumer.messages().await {
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
        while let Some(next) = messages.next().await {
            let message = match next {
                Ok(message) => message,
                Err(error) => {
                    // Missed heartbeats and reconnects show up here; the stream goes on.
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
                ledger: ledger.as_ref(),
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
    ledger: Option<&'a Arc<TurnLedger>>,
    holding: &'a Arc<std::sync::atomic::AtomicUsize>,
    gate: &'a Gate,
    log: &'a Arc<dyn LogSink>,
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
    // sign that failover is doing work (the ledger keeps the answer from going out twice).
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
    let taken_before = step.ledger.map(|ledger| ledger.taken());
    let delivered = step.sink.deliver_and_wait(envelope);
    let outcome = in_progress(&message, step.progress_every, delivered).await;
    match outcome {
        Ok(()) => {
            // The agent accepted a prompt while the session handled this message.
            let prompt = step
                .ledger
                .zip(taken_before)
                .map(|(ledger, before)| (ledger.clone(), before, ledger.taken()))
                .filter(|(_, before, taken)| taken > before)
                .map(|(ledger, _, taken)| (ledger, taken));
            match prompt {
                Some((ledger, prompt)) => {
                    let (name, log) = (name.to_owned(), step.log.clone());
                    let every = step.progress_every;
                    let holding = step.holding.clone();
                    holding.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    held.spawn(async move {
                        in_progress(&message, every, ledger.settled(prompt)).await;
                        acked(&message, &name, log.as_ref()).await;
                        holding.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    });
                }
                None => acked(&message, name, log).await,
            }
            true
        }
        Err(_gone) => {
            // The session ended before handling it: whoever runs the session next gets it now.
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
