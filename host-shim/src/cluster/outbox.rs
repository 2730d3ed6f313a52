//! Replies made while no ingress holds their bot (docs/scaling.md#the-flow, step 6): kept in a
//! JetStream stream, `<prefix>-outbox`, and posted in order by the ingress that takes the
//! bot next.
//!
//! Why: between an ingress's death and a standby taking the bot (up to the lock TTL), a
//! session's send finds no responder. It used to fail at once with "no ingress node
//! serves telegram", the prompt was acked all the same, and the only trace was a line on
//! the session node's stderr: 48 prompts of one kill test were never answered, with
//! nothing said in the chat. A send that found no responder was certainly not posted, so
//! parking it and posting it later cannot post it twice.
//!
//! The ingress drains the bot's outbox *before* it serves new sends, so what was parked is
//! posted before what comes after. A parked message that the platform then refuses is
//! said in its chat (a notice naming what happened), never only in a log.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer, stream};
use bytes::Bytes;
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use transport_core::{OutboundMessage, SendReceipt, Transport, TransportError};

use super::inbound::{PULL_EXPIRES, PULL_GRACE};
use super::posted::{PostLedger, Unposted, maybe_posted_notice};
use super::seal::{Gate, random_id};
use super::subjects::Prefix;
use super::warn;
use crate::local::logging::{LogLine, LogSink};
use crate::wit::types::Level;

/// How long a parked reply waits for an ingress before it is dropped. Matches the inbound
/// stream: a bot nobody holds for a day has no one to answer anyway.
pub const OUTBOX_MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// How long the ingress that takes a bot waits for its outbox to drain before it serves
/// new sends anyway (so a platform that refuses everything cannot keep the bot mute).
pub const DRAIN_BEFORE_SERVING: Duration = Duration::from_secs(30);

/// The receipt's message id of a parked reply: no platform id exists yet, and the bridge
/// needs one that is never empty.
fn parked_id(sequence: u64) -> String {
    format!("outbox-{sequence}")
}

/// A parked reply as stored: the message, and the send id its copies share
/// (`posted.rs`), so the drain does not post one an ingress posted before it went away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Parked {
    /// Absent for a notice (never asked of an ingress) and from nodes before send ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    send_id: Option<String>,
    #[serde(flatten)]
    message: OutboundMessage,
}

/// The outbox could not be set up or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "NATS could not {action} ({name}): {detail}. Replies made while no ingress holds the bot \
     cannot be kept; check that nats-server runs with JetStream (-js) and that this node can \
     reach it"
)]
pub struct OutboxError {
    /// What was being done.
    pub action: &'static str,
    /// The stream or subject.
    pub name: String,
    /// What the client said.
    pub detail: String,
}

async fn ensure_stream(
    jetstream: &jetstream::Context,
    prefix: &Prefix,
) -> Result<stream::Stream<()>, OutboxError> {
    let name = prefix.outbox_stream();
    jetstream
        .create_or_update_stream(stream::Config {
            name: name.clone(),
            description: Some(
                "bot-connect: replies waiting for an ingress to hold their bot".into(),
            ),
            subjects: vec![format!("{prefix}.outbox.*")],
            // Posted means done: nothing needs keeping after the ack.
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            max_age: OUTBOX_MAX_AGE,
            ..stream::Config::default()
        })
        .await
        .map_err(|error| OutboxError {
            action: "create or update the outbox stream",
            name: name.clone(),
            detail: error.to_string(),
        })?;
    jetstream
        .get_stream_no_info(&name)
        .await
        .map_err(|error| OutboxError {
            action: "name the outbox stream",
            name,
            detail: error.to_string(),
        })
}

/// The session side: parks a reply that found no ingress.
#[derive(Debug, Clone)]
pub struct Outbox {
    jetstream: jetstream::Context,
    stream: stream::Stream<()>,
    prefix: Prefix,
    gate: Gate,
}

/// A reply kept in the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// What the bridge gets for it.
    pub receipt: SendReceipt,
    /// Its place in the outbox stream, to ask whether it still waits
    /// ([`Outbox::waiting`]).
    pub sequence: u64,
}

impl Outbox {
    /// Sets up the outbox stream of `prefix`.
    pub async fn open(
        jetstream: jetstream::Context,
        prefix: Prefix,
        gate: Gate,
    ) -> Result<Outbox, OutboxError> {
        let stream = ensure_stream(&jetstream, &prefix).await?;
        Ok(Outbox {
            jetstream,
            stream,
            prefix,
            gate,
        })
    }

    /// Whether the reply kept at `sequence` still waits to be posted. Posted replies are
    /// acked and so gone (a work queue); an answer NATS cannot give counts as waiting, which
    /// only keeps the next reply behind it.
    pub async fn waiting(&self, sequence: u64) -> bool {
        match self.stream.get_raw_message(sequence).await {
            Ok(_) => true,
            Err(error) => error.kind() != stream::RawMessageErrorKind::NoMessageFound,
        }
    }

    /// Keeps `message` for the next ingress to hold `transport_id`'s bot, sealed; returns
    /// the receipt the bridge gets (no edit key: the platform message does not exist yet,
    /// so a later edit is posted as a message of its own). `send_id` is that of the send it
    /// comes from, when an ingress may have been asked for it already.
    pub async fn park(
        &self,
        transport_id: &str,
        message: &OutboundMessage,
        send_id: Option<&str>,
    ) -> Result<Kept, OutboxError> {
        let subject = self
            .prefix
            .outbox_subject(transport_id)
            .map_err(|error| OutboxError {
                action: "name the outbox subject",
                name: transport_id.to_owned(),
                detail: error.to_string(),
            })?;
        let failed = |detail: String| OutboxError {
            action: "keep a reply in the outbox",
            name: subject.clone(),
            detail,
        };
        let parked = Parked {
            send_id: send_id.map(str::to_owned),
            message: message.clone(),
        };
        let payload = serde_json::to_vec(&parked).map_err(|error| failed(error.to_string()))?;
        let headers = self
            .gate
            .headers(&subject, &format!("outbox:{}", random_id()), &payload);
        let ack = self
            .jetstream
            .publish_with_headers(subject.clone(), headers, Bytes::from(payload))
            .await
            .map_err(|error| failed(error.to_string()))?
            .await
            .map_err(|error| failed(error.to_string()))?;
        Ok(Kept {
            receipt: SendReceipt {
                message_id: parked_id(ack.sequence),
                edit_key: None,
            },
            sequence: ack.sequence,
        })
    }
}

/// What to do with a parked reply the platform did not take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undelivered {
    /// This ingress stopped holding the bot: leave it for the next holder.
    Later,
    /// Wait this long and try the same message again (the platform's rate limit).
    RetryAfter(Duration),
    /// Post it again as a new message: the one it was to edit is gone.
    PostFresh,
    /// Say in the chat that it could not be delivered, with this text, and go on.
    TellTheChat(String),
}

/// The decision for a parked `message` whose post failed with `error`.
pub fn undelivered(message: &OutboundMessage, error: &TransportError) -> Undelivered {
    match error {
        TransportError::RateLimited { retry_after_ms } => {
            Undelivered::RetryAfter(Duration::from_millis((*retry_after_ms).clamp(100, 60_000)))
        }
        TransportError::NotStarted(_) => Undelivered::Later,
        TransportError::EditRejected(_) if message.edit_key.is_some() => Undelivered::PostFresh,
        other => Undelivered::TellTheChat(format!(
            "⚠ A reply made while the bot was moving to another machine could not be \
             delivered ({other}). Ask again if you still need it."
        )),
    }
}

/// The ingress side: posts one bot's parked replies, in order, through `transport`.
pub struct OutboxDrain {
    task: JoinHandle<()>,
    consumer: consumer::PullConsumer,
}

impl OutboxDrain {
    /// Binds the bot's durable outbox consumer and starts posting; a reply with a send id
    /// is posted at most once through `posts`.
    pub async fn start(
        jetstream: jetstream::Context,
        prefix: &Prefix,
        transport: Arc<dyn Transport>,
        posts: PostLedger,
        gate: Gate,
        log: Arc<dyn LogSink>,
    ) -> Result<OutboxDrain, OutboxError> {
        ensure_stream(&jetstream, prefix).await?;
        let name = format!("outbox-{}", transport.id());
        let filter = prefix
            .outbox_subject(transport.id())
            .map_err(|error| OutboxError {
                action: "name the outbox subject",
                name: name.clone(),
                detail: error.to_string(),
            })?;
        let setup = |action: &'static str, detail: String| OutboxError {
            action,
            name: name.clone(),
            detail,
        };
        let stream = jetstream
            .get_stream(prefix.outbox_stream())
            .await
            .map_err(|error| setup("find the outbox stream", error.to_string()))?;
        let consumer: consumer::PullConsumer = stream
            .create_consumer(consumer::pull::Config {
                durable_name: Some(name.clone()),
                description: Some("bot-connect: one bot's parked replies".into()),
                filter_subject: filter,
                deliver_policy: consumer::DeliverPolicy::All,
                ack_policy: consumer::AckPolicy::Explicit,
                // One at a time keeps them in order, also across two ingresses overlapping.
                max_ack_pending: 1,
                ack_wait: Duration::from_secs(30),
                ..consumer::pull::Config::default()
            })
            .await
            .map_err(|error| setup("create the outbox consumer", error.to_string()))?;
        let task = tokio::spawn(drain(consumer.clone(), name, transport, posts, gate, log));
        Ok(OutboxDrain { task, consumer })
    }

    /// Returns once nothing is parked or being posted, or after `patience`: the ingress
    /// serves new sends only then, so parked replies go out before later ones.
    pub async fn drained(&mut self, patience: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            if let Ok(info) = self.consumer.info().await
                && info.num_pending == 0
                && info.num_ack_pending == 0
            {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops posting (a message being posted is redelivered to the next holder).
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for OutboxDrain {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn drain(
    consumer: consumer::PullConsumer,
    name: String,
    transport: Arc<dyn Transport>,
    posts: PostLedger,
    gate: Gate,
    log: Arc<dyn LogSink>,
) {
    let mut backoff = Duration::from_millis(200);
    loop {
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
                    "nats_outbox_unavailable",
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
            let Ok(message) = next else { continue };
            post_parked(&message, transport.as_ref(), &posts, &gate, log.as_ref()).await;
        }
    }
}

/// Posts one parked reply, or says in its chat why it cannot be; acks it either way.
async fn post_parked(
    message: &jetstream::Message,
    transport: &dyn Transport,
    posts: &PostLedger,
    gate: &Gate,
    log: &dyn LogSink,
) {
    let stored_at_ms = message
        .info()
        .ok()
        .map(|info| u64::try_from(info.published.unix_timestamp_nanos() / 1_000_000).unwrap_or(0))
        .unwrap_or_else(|| gate.now_ms());
    // Unsealed: a client without the key cannot make the bot post (the gate logs it).
    let sealed = gate.check_stored(
        &message.subject,
        message.headers.as_ref(),
        &message.payload,
        stored_at_ms,
    );
    let parked = sealed
        .ok()
        .and_then(|_| serde_json::from_slice::<Parked>(&message.payload).ok());
    let Some(Parked {
        send_id,
        message: mut parked,
    }) = parked
    else {
        warn(
            log,
            "nats_outbox_refused",
            &[("subject", message.subject.to_string())],
        );
        let _ = message.ack_with(AckKind::Term).await;
        return;
    };
    loop {
        let sent = match &send_id {
            Some(send_id) => {
                posts
                    .post_once(send_id, || transport.send(parked.clone()))
                    .await
            }
            None => transport
                .send(parked.clone())
                .await
                .map_err(Unposted::Refused),
        };
        let error = match sent {
            Ok(_) => break,
            Err(Unposted::Refused(error)) => error,
            Err(Unposted::MayHaveBeenPosted) if parked.answers_press.is_some() => break,
            Err(Unposted::MayHaveBeenPosted) => {
                // Its first ingress went away mid-post: posting it again could post it twice.
                // (A press's answer is private: a notice in the chat would show it was meant.)
                let told = crate::broker::send_notice_to(
                    transport,
                    &parked.conversation_id,
                    parked.thread_id.as_deref(),
                    &maybe_posted_notice(),
                )
                .await;
                if let Err(error) = told {
                    warn(log, "outbox_notice_failed", &[("error", error.to_string())]);
                }
                break;
            }
        };
        match undelivered(&parked, &error) {
            Undelivered::RetryAfter(wait) => {
                let _ = message.ack_with(AckKind::Progress).await;
                tokio::time::sleep(wait).await;
            }
            Undelivered::PostFresh => parked.edit_key = None,
            Undelivered::Later => {
                let _ = message.ack_with(AckKind::Nak(None)).await;
                return;
            }
            Undelivered::TellTheChat(text) => {
                log.write(
                    super::LOG_SCOPE,
                    LogLine::new(
                        Level::Warning,
                        "outbox_reply_undelivered",
                        &[
                            ("transport", transport.id().to_owned()),
                            ("error", error.to_string()),
                        ],
                    ),
                );
                // Rendered and redacted: it quotes the platform's answer.
                let told = crate::broker::send_notice_to(
                    transport,
                    &parked.conversation_id,
                    parked.thread_id.as_deref(),
                    &text,
                )
                .await;
                if let Err(error) = told {
                    warn(log, "outbox_notice_failed", &[("error", error.to_string())]);
                }
                break;
            }
        }
    }
    if let Err(error) = message.double_ack().await {
        warn(
            log,
            "nats_ack_failed",
            &[
                ("subject", message.subject.to_string()),
                ("error", error.to_string()),
            ],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport_core::OutboundKind;

    fn message(edit_key: Option<&str>) -> OutboundMessage {
        OutboundMessage {
            conversation_id: "c".into(),
            thread_id: None,
            kind: OutboundKind::Reply,
            text: "done".into(),
            edit_key: edit_key.map(str::to_owned),
            buttons: Vec::new(),
            answers_press: None,
            reply_to: None,
        }
    }

    #[test]
    fn a_rate_limited_parked_reply_waits_and_goes_again() {
        let error = TransportError::RateLimited {
            retry_after_ms: 1500,
        };
        assert_eq!(
            undelivered(&message(None), &error),
            Undelivered::RetryAfter(Duration::from_millis(1500))
        );
    }

    #[test]
    fn a_reply_this_ingress_can_no_longer_post_is_left_for_the_next_holder() {
        let error = TransportError::NotStarted("telegram".into());
        assert_eq!(undelivered(&message(None), &error), Undelivered::Later);
    }

    #[test]
    fn an_edit_of_a_vanished_message_is_posted_as_a_new_one() {
        let error = TransportError::EditRejected("gone".into());
        assert_eq!(
            undelivered(&message(Some("k")), &error),
            Undelivered::PostFresh
        );
    }

    #[test]
    fn any_other_refusal_is_said_in_the_chat_with_the_reason() {
        let error = TransportError::Failed("chat not found".into());
        match undelivered(&message(None), &error) {
            Undelivered::TellTheChat(text) => {
                assert!(text.contains("chat not found"), "{text}");
                assert!(text.contains("Ask again"), "{text}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_parked_receipt_names_its_place_and_offers_no_edit() {
        assert_eq!(parked_id(42), "outbox-42");
    }
}
