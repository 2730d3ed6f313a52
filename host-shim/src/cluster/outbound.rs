//! Outbound over NATS: a session node's transports are [`RemoteTransport`]s with the real
//! ids, whose `send` and `typing` are requests to `<prefix>.out.<transport>`; the ingress
//! node holding the bot serves them through the real transport ([`OutboundServer`]).
//!
//! Why request/reply and not a stream: the bridge needs the send's receipt (the message
//! id it edits later) or its error (a rate limit it waits out) back, at once, and a
//! message nobody can post should fail now rather than sit in a queue. A request that
//! finds no ingress was certainly not posted, and is kept in the outbox (`outbox.rs`). One
//! whose answer does not come (nats-server restarting, an answer lost) is asked again with
//! the same send id, which the ingress posts at most once (`posted.rs`), until the session
//! node's patience runs out; only then is the chat told it may not have been posted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_nats::{Client, RequestErrorKind};
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use transport_core::{
    BotIdentity, Capabilities, FetchedAttachment, InboundSink, OutboundKind, OutboundMessage,
    Reaction, SendReceipt, Transport, TransportError,
};

use super::outbox::{DRAIN_BEFORE_SERVING, Outbox};
use super::posted::{PostLedger, Unposted, maybe_posted_notice};
use super::seal::{Gate, random_id};
use super::subjects::{INGRESS_QUEUE_GROUP, NameError, Prefix};
use super::warn;
use crate::local::logging::LogSink;

/// How long a session node waits for the ingress's answer, unless configured. Covers the
/// real transport's own retries of a rate limit or a 5xx.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one try of a send waits before it is asked again (within the request timeout).
/// A try whose answer was lost (nats-server restarting under it) would otherwise hold the
/// session for the whole timeout; asking again is safe because the ingress posts a send id
/// once, and a copy of a send still being posted waits for it.
const SEND_TRY: Duration = Duration::from_secs(1);

/// The pause before a send is asked again.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// A request from a session node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum WireRequest {
    /// `Transport::send`.
    Send {
        /// The message.
        message: OutboundMessage,
        /// The same for every copy of one send: the ingress posts it once
        /// (`posted.rs`). Absent for an edit (asked twice, it changes nothing) and from a
        /// node before send ids: done as asked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        send_id: Option<String>,
    },
    /// `Transport::typing`.
    Typing {
        /// Target conversation.
        conversation_id: String,
        /// Target thread.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread_id: Option<String>,
    },
    /// Who the bot is and what the transport can do (for `identify` and `capabilities`).
    Describe,
    /// `Transport::react`.
    React {
        /// Conversation of the message.
        conversation_id: String,
        /// The message reacted to (the transport's reference).
        message_id: String,
        /// The reaction set.
        reaction: Reaction,
        /// The reaction taken away.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replaces: Option<Reaction>,
    },
    /// `Transport::draft`.
    Draft {
        /// Target conversation.
        conversation_id: String,
        /// Target thread.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread_id: Option<String>,
        /// The draft stream.
        draft_id: u64,
        /// The draft, rendered.
        text: String,
    },
}

/// The ingress's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum WireReply {
    /// Posted or edited.
    Sent {
        /// Platform message id.
        message_id: String,
        /// Key to edit it later.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        edit_key: Option<String>,
    },
    /// The typing indicator was shown.
    Typed,
    /// The reaction or the draft was shown.
    Shown,
    /// The answer to [`WireRequest::Describe`].
    Described {
        /// The bot's own user id.
        bot_id: String,
        /// The bot's name.
        bot_name: String,
        /// What the transport can do.
        capabilities: Capabilities,
    },
    /// The real transport refused.
    Failed {
        /// Its error.
        error: WireError,
    },
    /// An ingress that is gone was posting this send: it may or may not have been posted,
    /// so it was not posted again.
    MaybePosted,
}

/// [`TransportError`] on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum WireError {
    /// [`TransportError::NotStarted`].
    NotStarted {
        /// Transport id.
        transport: String,
    },
    /// [`TransportError::AlreadyStarted`].
    AlreadyStarted {
        /// Transport id.
        transport: String,
    },
    /// [`TransportError::EditRejected`].
    EditRejected {
        /// For a person.
        message: String,
    },
    /// [`TransportError::RateLimited`].
    RateLimited {
        /// How long the platform asked to wait.
        retry_after_ms: u64,
    },
    /// [`TransportError::Unsupported`].
    Unsupported {
        /// For a person.
        message: String,
    },
    /// [`TransportError::Failed`].
    Failed {
        /// For a person.
        message: String,
    },
}

impl From<TransportError> for WireError {
    fn from(error: TransportError) -> Self {
        match error {
            TransportError::NotStarted(transport) => WireError::NotStarted { transport },
            TransportError::AlreadyStarted(transport) => WireError::AlreadyStarted { transport },
            TransportError::EditRejected(message) => WireError::EditRejected { message },
            TransportError::RateLimited { retry_after_ms } => {
                WireError::RateLimited { retry_after_ms }
            }
            TransportError::Unsupported(message) => WireError::Unsupported { message },
            TransportError::Failed(message) => WireError::Failed { message },
        }
    }
}

impl From<WireError> for TransportError {
    fn from(error: WireError) -> Self {
        match error {
            WireError::NotStarted { transport } => TransportError::NotStarted(transport),
            WireError::AlreadyStarted { transport } => TransportError::AlreadyStarted(transport),
            WireError::EditRejected { message } => TransportError::EditRejected(message),
            WireError::RateLimited { retry_after_ms } => {
                TransportError::RateLimited { retry_after_ms }
            }
            WireError::Unsupported { message } => TransportError::Unsupported(message),
            WireError::Failed { message } => TransportError::Failed(message),
        }
    }
}

/// Why the ingress could not start serving a transport.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutboundError {
    /// The transport id cannot be a subject token.
    #[error(transparent)]
    Name(#[from] NameError),
    /// Subscribing failed.
    #[error(
        "NATS refused the subscription to {subject}: {detail}; check this node's NATS connection"
    )]
    Subscribe {
        /// The outbound subject.
        subject: String,
        /// What the client said.
        detail: String,
    },
}

/// The ingress side: serves `<prefix>.out.<transport>` through the real transport.
#[derive(Debug)]
pub struct OutboundServer {
    task: JoinHandle<()>,
}

impl OutboundServer {
    /// Subscribes (in the ingress queue group) and answers every request through
    /// `transport`, each in its own task so one slow send does not hold up the others. A
    /// request this version cannot read is logged and answered with `Failed`.
    ///
    /// A request's seal is checked first ([`Gate::check_live`]): one that is not sealed with
    /// the cluster key, or is a replay, is never read, counted and logged by the gate, and
    /// answered with an unsealed refusal (so a node with a wrong key hears why at once).
    /// A send with a send id is posted at most once through `posts`.
    pub async fn start(
        client: Client,
        prefix: &Prefix,
        transport: Arc<dyn Transport>,
        posts: PostLedger,
        gate: Gate,
        log: Arc<dyn LogSink>,
    ) -> Result<OutboundServer, OutboundError> {
        let subject = prefix.outbound_subject(transport.id())?;
        let mut requests = client
            .queue_subscribe(subject.clone(), INGRESS_QUEUE_GROUP.to_owned())
            .await
            .map_err(|error| OutboundError::Subscribe {
                subject: subject.clone(),
                detail: error.to_string(),
            })?;
        // The subscription must be in place at the server before anyone is told to send.
        client
            .flush()
            .await
            .map_err(|error| OutboundError::Subscribe {
                subject: subject.clone(),
                detail: error.to_string(),
            })?;
        let task = tokio::spawn(async move {
            while let Some(request) = requests.next().await {
                let client = client.clone();
                let transport = transport.clone();
                let log = log.clone();
                let gate = gate.clone();
                let posts = posts.clone();
                tokio::spawn(async move {
                    let verified = gate.check_live(
                        &request.subject,
                        request.headers.as_ref(),
                        &request.payload,
                    );
                    let Some(reply_to) = request.reply.clone() else {
                        warn(
                            log.as_ref(),
                            "nats_outbound_without_reply",
                            &[("subject", request.subject.to_string())],
                        );
                        return;
                    };
                    let Ok(verified) = verified else {
                        // Unsealed, so a forger learns nothing but that it was refused.
                        let refusal = WireReply::Failed {
                            error: WireError::Failed {
                                message: "refused: the request is not sealed with this \
                                          cluster's key"
                                    .into(),
                            },
                        };
                        let payload = serde_json::to_vec(&refusal).unwrap_or_default();
                        let _ = client.publish(reply_to, Bytes::from(payload)).await;
                        return;
                    };
                    let reply =
                        serve(transport.as_ref(), &posts, &request.payload, log.as_ref()).await;
                    let payload = serde_json::to_vec(&reply).unwrap_or_default();
                    // Bound to the request's id: a forged or replayed answer fails the check.
                    let headers = gate.headers(
                        &reply_subject(&request.subject),
                        &verified.message_id,
                        &payload,
                    );
                    if let Err(error) = client
                        .publish_with_headers(reply_to, headers, Bytes::from(payload))
                        .await
                    {
                        warn(
                            log.as_ref(),
                            "nats_outbound_reply_failed",
                            &[("error", error.to_string())],
                        );
                    }
                });
            }
        });
        Ok(OutboundServer { task })
    }

    /// Stops serving (new requests find no responder once NATS notices).
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for OutboundServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One request through the real transport.
async fn serve(
    transport: &dyn Transport,
    posts: &PostLedger,
    payload: &[u8],
    log: &dyn LogSink,
) -> WireReply {
    let request = match serde_json::from_slice::<WireRequest>(payload) {
        Ok(request) => request,
        Err(error) => {
            warn(
                log,
                "nats_bad_outbound_request",
                &[
                    ("transport", transport.id().to_owned()),
                    ("error", error.to_string()),
                ],
            );
            return WireReply::Failed {
                error: WireError::Failed {
                    message: format!(
                        "the ingress node serving {} could not read the request ({error}); do \
                         all nodes run the same host-shim version?",
                        transport.id()
                    ),
                },
            };
        }
    };
    let failed = |error: TransportError| WireReply::Failed {
        error: error.into(),
    };
    match request {
        WireRequest::Send { message, send_id } => {
            let posted = match send_id {
                Some(send_id) => posts.post_once(&send_id, || transport.send(message)).await,
                None => transport.send(message).await.map_err(Unposted::Refused),
            };
            match posted {
                Ok(receipt) => WireReply::Sent {
                    message_id: receipt.message_id,
                    edit_key: receipt.edit_key,
                },
                Err(Unposted::Refused(error)) => failed(error),
                Err(Unposted::MayHaveBeenPosted) => WireReply::MaybePosted,
            }
        }
        WireRequest::Typing {
            conversation_id,
            thread_id,
        } => match transport
            .typing(&conversation_id, thread_id.as_deref())
            .await
        {
            Ok(()) => WireReply::Typed,
            Err(error) => failed(error),
        },
        WireRequest::React {
            conversation_id,
            message_id,
            reaction,
            replaces,
        } => match transport
            .react(&conversation_id, &message_id, reaction, replaces)
            .await
        {
            Ok(()) => WireReply::Shown,
            Err(error) => failed(error),
        },
        WireRequest::Draft {
            conversation_id,
            thread_id,
            draft_id,
            text,
        } => match transport
            .draft(&conversation_id, thread_id.as_deref(), draft_id, &text)
            .await
        {
            Ok(()) => WireReply::Shown,
            Err(error) => failed(error),
        },
        WireRequest::Describe => match transport.identify().await {
            Ok(identity) => WireReply::Described {
                bot_id: identity.bot_id,
                bot_name: identity.bot_name,
                capabilities: transport.capabilities(),
            },
            Err(error) => failed(error),
        },
    }
}

/// The session side of a transport whose platform connection lives on an ingress node.
#[derive(Debug)]
pub struct RemoteTransport {
    client: Client,
    id: String,
    subject: String,
    capabilities: Capabilities,
    timeout: Duration,
    started: AtomicBool,
    /// The session's sink, given at start: the session node feeds it from the session's
    /// JetStream consumer.
    sink: std::sync::Mutex<Option<InboundSink>>,
    sent: AtomicU64,
    failed: AtomicU64,
    gate: Gate,
    /// Where a send that finds no ingress is kept for the next one (`outbox.rs`).
    outbox: Option<Outbox>,
    /// The outbox place of the last reply this transport kept, while it may still wait:
    /// later sends are kept behind it rather than posted before it.
    kept_through: tokio::sync::Mutex<Option<KeptThrough>>,
}

/// The last reply a transport kept, and since when its replies have been kept.
#[derive(Debug, Clone, Copy)]
struct KeptThrough {
    sequence: u64,
    since: tokio::time::Instant,
}

impl KeptThrough {
    /// `sequence` kept now, after `earlier` (when replies were kept already).
    fn after(earlier: Option<KeptThrough>, sequence: u64) -> KeptThrough {
        KeptThrough {
            sequence,
            since: earlier.map_or_else(tokio::time::Instant::now, |earlier| earlier.since),
        }
    }

    /// Whether replies have been kept too long, at `now`, to keep more behind them.
    fn overdue(&self, now: tokio::time::Instant) -> bool {
        now.saturating_duration_since(self.since) > DRAIN_BEFORE_SERVING
    }
}

/// The subject a reply's seal names: the request's, marked, so a sealed request can never
/// pass for a reply or the other way round.
fn reply_subject(request_subject: &str) -> String {
    format!("{request_subject}#reply")
}

impl RemoteTransport {
    /// The sink the session started this transport with; `None` before start.
    pub fn sink(&self) -> Option<InboundSink> {
        self.sink
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A remote `id` with known `capabilities`; requests wait `timeout` for an answer, and
    /// are sealed (answers checked) with `gate`.
    pub fn new(
        client: Client,
        prefix: &Prefix,
        id: &str,
        capabilities: Capabilities,
        timeout: Duration,
        gate: Gate,
    ) -> Result<RemoteTransport, NameError> {
        Ok(RemoteTransport {
            subject: prefix.outbound_subject(id)?,
            client,
            id: id.to_owned(),
            capabilities,
            timeout,
            started: AtomicBool::new(false),
            sink: std::sync::Mutex::new(None),
            sent: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            gate,
            outbox: None,
            kept_through: tokio::sync::Mutex::new(None),
        })
    }

    /// Keeps sends that find no ingress in `outbox`, posted once an ingress holds the bot,
    /// instead of failing them.
    pub fn with_outbox(mut self, outbox: Outbox) -> RemoteTransport {
        self.outbox = Some(outbox);
        self
    }

    /// Asks the ingress serving `id` for the bot and its capabilities, and builds the
    /// remote transport from the answer.
    pub async fn discover(
        client: Client,
        prefix: &Prefix,
        id: &str,
        timeout: Duration,
        gate: Gate,
    ) -> Result<(RemoteTransport, BotIdentity), TransportError> {
        let subject = prefix
            .outbound_subject(id)
            .map_err(|error| TransportError::Failed(error.to_string()))?;
        let reply = request(
            &client,
            &gate,
            id,
            &subject,
            timeout,
            &WireRequest::Describe,
        )
        .await?;
        match reply {
            WireReply::Described {
                bot_id,
                bot_name,
                capabilities,
            } => {
                let transport =
                    RemoteTransport::new(client, prefix, id, capabilities, timeout, gate)
                        .map_err(|error| TransportError::Failed(error.to_string()))?;
                Ok((
                    transport,
                    BotIdentity {
                        bot_id,
                        bot_name,
                        lock_name: None,
                    },
                ))
            }
            WireReply::Failed { error } => Err(error.into()),
            other => Err(unexpected(id, &subject, &other)),
        }
    }

    /// A request answered with [`WireReply::Shown`] (a reaction, a draft).
    async fn shown(&self, body: &WireRequest) -> Result<(), TransportError> {
        match self.call(body).await? {
            WireReply::Shown => Ok(()),
            WireReply::Failed { error } => Err(error.into()),
            other => Err(unexpected(&self.id, &self.subject, &other)),
        }
    }

    async fn call(&self, body: &WireRequest) -> Result<WireReply, RequestFailure> {
        self.call_within(body, self.timeout).await
    }

    async fn call_within(
        &self,
        body: &WireRequest,
        timeout: Duration,
    ) -> Result<WireReply, RequestFailure> {
        if !self.started.load(Ordering::SeqCst) {
            return Err(RequestFailure {
                error: TransportError::NotStarted(self.id.clone()),
                delivery: Delivery::Unsent,
            });
        }
        let result = request(
            &self.client,
            &self.gate,
            &self.id,
            &self.subject,
            timeout,
            body,
        )
        .await;
        let counter = match &result {
            Ok(WireReply::Failed { .. }) | Err(_) => &self.failed,
            Ok(_) => &self.sent,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        result
    }

    /// A send that found no ingress: parked in the outbox when there is one, with its send
    /// id, so a copy an ingress already posted before it went away is not posted again.
    async fn park(
        &self,
        message: &OutboundMessage,
        send_id: Option<&str>,
        error: TransportError,
    ) -> Result<SendReceipt, TransportError> {
        let Some(outbox) = &self.outbox else {
            return Err(error);
        };
        let mut kept_through = self.kept_through.lock().await;
        let kept = outbox
            .park(&self.id, message, send_id)
            .await
            .map_err(|parking| {
                TransportError::Failed(format!(
                    "{error}; keeping it until an ingress holds the bot failed too: {parking}"
                ))
            })?;
        *kept_through = Some(KeptThrough::after(*kept_through, kept.sequence));
        Ok(kept.receipt)
    }

    /// Parks `message` when a reply this transport kept earlier still waits: posted now, it
    /// would come before that one (a send that found no ingress for the instant nats-server
    /// restarted, then the next found it back: the chat read answers out of order). `None`
    /// when nothing waits, and the send may go to the ingress; also when replies have been
    /// kept for longer than a new holder waits for its outbox to drain
    /// ([`DRAIN_BEFORE_SERVING`]): a holder whose outbox consumer could not start posts
    /// nothing kept, and this session would otherwise stay mute until the next holder.
    async fn behind_kept(
        &self,
        message: &OutboundMessage,
        send_id: Option<&str>,
    ) -> Option<Result<SendReceipt, TransportError>> {
        let outbox = self.outbox.as_ref()?;
        let mut kept_through = self.kept_through.lock().await;
        let last = (*kept_through)?;
        if last.overdue(tokio::time::Instant::now()) || !outbox.waiting(last.sequence).await {
            *kept_through = None;
            return None;
        }
        Some(match outbox.park(&self.id, message, send_id).await {
            Ok(kept) => {
                *kept_through = Some(KeptThrough::after(Some(last), kept.sequence));
                Ok(kept.receipt)
            }
            Err(parking) => Err(TransportError::Failed(format!(
                "an earlier reply still waits for an ingress to hold the bot, and keeping this \
                 one behind it failed: {parking}"
            ))),
        })
    }

    /// A send that may or may not have been posted (no answer within the patience, or the
    /// ingress posting it went away mid-post): not repeated (Telegram and Slack have no
    /// dedup for a post), but the chat is told, once an ingress holds the bot, so the
    /// person knows to ask again if the answer is missing.
    async fn tell_maybe_posted(&self, message: &OutboundMessage) {
        let Some(outbox) = &self.outbox else {
            return;
        };
        if message.answers_press.is_some() {
            // A press's answer is private: a notice in the chat would show it was meant.
            return;
        }
        let notice = OutboundMessage {
            conversation_id: message.conversation_id.clone(),
            thread_id: message.thread_id.clone(),
            kind: OutboundKind::Notice,
            text: maybe_posted_notice(),
            edit_key: None,
            buttons: Vec::new(),
            answers_press: None,
            reply_to: None,
        };
        let mut kept_through = self.kept_through.lock().await;
        if let Ok(kept) = outbox.park(&self.id, &notice, None).await {
            *kept_through = Some(KeptThrough::after(*kept_through, kept.sequence));
        }
    }
}

/// Whether a failed request may have reached the platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// Certainly not: nobody received it (no responder), so it may be sent again.
    Unsent,
    /// Perhaps: it may have been posted, so it is never sent again blindly.
    Unknown,
}

/// A request that got no usable answer.
#[derive(Debug)]
struct RequestFailure {
    error: TransportError,
    delivery: Delivery,
}

impl From<RequestFailure> for TransportError {
    fn from(failure: RequestFailure) -> TransportError {
        failure.error
    }
}

/// One request, sealed, and its decoded answer once its seal is checked; every NATS
/// failure becomes a `Failed` that says whether anything may have been posted.
async fn request(
    client: &Client,
    gate: &Gate,
    id: &str,
    subject: &str,
    timeout: Duration,
    body: &WireRequest,
) -> Result<WireReply, RequestFailure> {
    let unknown = |error: TransportError| RequestFailure {
        error,
        delivery: Delivery::Unknown,
    };
    let payload = serde_json::to_vec(body).map_err(|error| RequestFailure {
        error: TransportError::Failed(format!("cannot encode the {id} request: {error}")),
        delivery: Delivery::Unsent,
    })?;
    let message_id = random_id();
    let headers = gate.headers(subject, &message_id, &payload);
    let request = async_nats::Request::new()
        .payload(Bytes::from(payload))
        .headers(headers)
        .timeout(Some(timeout));
    let answer = client
        .send_request(subject.to_owned(), request)
        .await
        .map_err(|error| match error.kind() {
            RequestErrorKind::NoResponders => RequestFailure {
                error: TransportError::Failed(format!(
                    "no ingress node serves {id} on NATS subject {subject}, so nothing was \
                     sent. Start one (host-shim serve --nats <url> --role ingress) with this \
                     bot's credential, or wait for a standby to take the bot lock (up to the \
                     lock TTL)"
                )),
                delivery: Delivery::Unsent,
            },
            RequestErrorKind::TimedOut => unknown(TransportError::Failed(format!(
                "the ingress node serving {id} did not answer within {} ms on NATS subject \
                 {subject}; the message may or may not have been posted. Check that node and \
                 the platform's status",
                timeout.as_millis()
            ))),
            _ => unknown(TransportError::Failed(format!(
                "the NATS request to {subject} failed ({error}), so nothing is known to have \
                 been sent; check this node's NATS connection"
            ))),
        })?;
    // Judged against this node's clock; the id is this request's own, so an answer to
    // another request, or one forged by a client without the key, is refused.
    let sealed = super::seal::verify(
        gate.key(),
        &reply_subject(subject),
        answer.headers.as_ref(),
        &answer.payload,
        gate.now_ms(),
    )
    .and_then(|verified| {
        if verified.message_id == message_id {
            Ok(())
        } else {
            Err(super::seal::Refusal::Forged)
        }
    });
    if let Err(refusal) = sealed {
        gate.refuse(subject, &refusal);
        // What an unsealed answer says is only shown when it is the ingress's refusal.
        let refused_by_ingress = serde_json::from_slice::<WireReply>(&answer.payload)
            .is_ok_and(|reply| matches!(reply, WireReply::Failed { error: WireError::Failed { message } } if message.starts_with("refused: ")));
        return Err(unknown(TransportError::Failed(if refused_by_ingress {
            format!(
                "the ingress node serving {id} refused the request on {subject}: it is not \
                 sealed with that node's cluster key, so nothing was sent. Give every node \
                 the same cluster key (--cluster-key-file or --cluster-key-env)"
            )
        } else {
            format!(
                "the answer on {subject} for {id} is not sealed with this cluster's key \
                 ({refusal}); it was ignored, and the message may or may not have been \
                 posted. Check that every node has the same cluster key"
            )
        })));
    }
    serde_json::from_slice::<WireReply>(&answer.payload).map_err(|error| {
        unknown(TransportError::Failed(format!(
            "the ingress node serving {id} answered on {subject} with something this version \
             cannot read ({error}); the message may have been posted. Do all nodes run the \
             same host-shim version?"
        )))
    })
}

fn unexpected(id: &str, subject: &str, reply: &WireReply) -> TransportError {
    let kind = match reply {
        WireReply::Sent { .. } => "sent",
        WireReply::Typed => "typed",
        WireReply::Shown => "shown",
        WireReply::Described { .. } => "described",
        WireReply::Failed { .. } => "failed",
        WireReply::MaybePosted => "maybe posted",
    };
    TransportError::Failed(format!(
        "the ingress node serving {id} on {subject} answered {kind:?} to another request; do all \
         nodes run the same host-shim version?"
    ))
}

#[async_trait]
impl Transport for RemoteTransport {
    fn id(&self) -> &str {
        &self.id
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    async fn identify(&self) -> Result<BotIdentity, TransportError> {
        match request(
            &self.client,
            &self.gate,
            &self.id,
            &self.subject,
            self.timeout,
            &WireRequest::Describe,
        )
        .await?
        {
            WireReply::Described {
                bot_id, bot_name, ..
            } => Ok(BotIdentity {
                bot_id,
                bot_name,
                // The bot lock is the ingress's: a session node takes none.
                lock_name: None,
            }),
            WireReply::Failed { error } => Err(error.into()),
            other => Err(unexpected(&self.id, &self.subject, &other)),
        }
    }

    /// Inbound does not come through here: the session's JetStream consumer
    /// (`cluster::inbound::SessionConsumer`) feeds the session through the sink kept here
    /// ([`RemoteTransport::sink`]). Starting allows sends.
    async fn start(&self, sink: InboundSink) -> Result<(), TransportError> {
        if self.started.swap(true, Ordering::SeqCst) {
            return Err(TransportError::AlreadyStarted(self.id.clone()));
        }
        *self
            .sink
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(sink);
        Ok(())
    }

    async fn stop(&self) {
        self.started.store(false, Ordering::SeqCst);
        self.sink
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }

    /// Asked again, with the same send id, while no answer comes and the request timeout
    /// lasts: the ingress posts a send id once, so a copy never posts twice.
    async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
        // An edit asked twice is harmless (the platforms take an edit to the same text as
        // done), so only posts carry a send id: a progress card's edits every second would
        // otherwise leave a mark each in the posted ledger.
        let send_id = message
            .edit_key
            .is_none()
            .then(|| format!("{}{}", random_id(), random_id()));
        if self.started.load(Ordering::SeqCst)
            && let Some(kept) = self.behind_kept(&message, send_id.as_deref()).await
        {
            return kept;
        }
        let body = WireRequest::Send {
            message: message.clone(),
            send_id: send_id.clone(),
        };
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let result = self.call_within(&body, left.min(SEND_TRY)).await;
            return match result {
                Ok(WireReply::Sent {
                    message_id,
                    edit_key,
                }) => Ok(SendReceipt {
                    message_id,
                    edit_key,
                }),
                Ok(WireReply::Failed { error }) => Err(error.into()),
                Ok(WireReply::MaybePosted) => {
                    self.tell_maybe_posted(&message).await;
                    Err(TransportError::Failed(format!(
                        "the ingress node that was posting this {} message went away while it \
                         did; it may or may not have been posted, and was not posted again",
                        self.id
                    )))
                }
                Ok(other) => Err(unexpected(&self.id, &self.subject, &other)),
                Err(RequestFailure {
                    error,
                    delivery: Delivery::Unsent,
                }) if !matches!(error, TransportError::NotStarted(_)) => {
                    self.park(&message, send_id.as_deref(), error).await
                }
                Err(RequestFailure {
                    delivery: Delivery::Unknown,
                    ..
                }) if tokio::time::Instant::now() < deadline => {
                    // A try can fail at once (the connection down mid-restart): not a spin.
                    tokio::time::sleep_until(
                        (tokio::time::Instant::now() + RETRY_PAUSE).min(deadline),
                    )
                    .await;
                    continue;
                }
                Err(RequestFailure {
                    delivery: Delivery::Unknown,
                    ..
                }) => {
                    self.tell_maybe_posted(&message).await;
                    Err(TransportError::Failed(format!(
                        "the ingress node serving {} did not answer within {} ms on NATS \
                         subject {}; the message may or may not have been posted. Check that \
                         node and the platform's status",
                        self.id,
                        self.timeout.as_millis(),
                        self.subject
                    )))
                }
                Err(failure) => Err(failure.error),
            };
        }
    }

    async fn typing(
        &self,
        conversation_id: &str,
        thread_id: Option<&str>,
    ) -> Result<(), TransportError> {
        let body = WireRequest::Typing {
            conversation_id: conversation_id.to_owned(),
            thread_id: thread_id.map(str::to_owned),
        };
        match self.call(&body).await? {
            WireReply::Typed => Ok(()),
            WireReply::Failed { error } => Err(error.into()),
            other => Err(unexpected(&self.id, &self.subject, &other)),
        }
    }

    /// Asked of the ingress like a typing indicator: never parked in the outbox, since a
    /// reaction or a draft shown late is worth nothing.
    async fn react(
        &self,
        conversation_id: &str,
        message_id: &str,
        reaction: Reaction,
        replaces: Option<Reaction>,
    ) -> Result<(), TransportError> {
        let body = WireRequest::React {
            conversation_id: conversation_id.to_owned(),
            message_id: message_id.to_owned(),
            reaction,
            replaces,
        };
        self.shown(&body).await
    }

    async fn draft(
        &self,
        conversation_id: &str,
        thread_id: Option<&str>,
        draft_id: u64,
        text: &str,
    ) -> Result<(), TransportError> {
        let body = WireRequest::Draft {
            conversation_id: conversation_id.to_owned(),
            thread_id: thread_id.map(str::to_owned),
            draft_id,
            text: text.to_owned(),
        };
        self.shown(&body).await
    }

    async fn fetch_attachment(
        &self,
        _reference: &str,
        _max_bytes: u64,
    ) -> Result<FetchedAttachment, TransportError> {
        Err(TransportError::Unsupported(format!(
            "{} runs on another node (NATS cluster mode), and attachments are not fetched across \
             nodes yet; send the text, or run this session on a single host",
            self.id
        )))
    }

    fn diagnose(&self) -> String {
        format!(
            "{} over NATS {}, answered {}, failed {}",
            if self.started.load(Ordering::SeqCst) {
                "running"
            } else {
                "stopped"
            },
            self.subject,
            self.sent.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_transport_error_survives_the_wire() {
        let errors = [
            TransportError::NotStarted("t".into()),
            TransportError::AlreadyStarted("t".into()),
            TransportError::EditRejected("old".into()),
            TransportError::RateLimited {
                retry_after_ms: 1500,
            },
            TransportError::Unsupported("no".into()),
            TransportError::Failed("down".into()),
        ];
        for error in errors {
            let reply = WireReply::Failed {
                error: error.clone().into(),
            };
            let text = serde_json::to_string(&reply).unwrap();
            let back: WireReply = serde_json::from_str(&text).unwrap();
            match back {
                WireReply::Failed { error: wire } => {
                    assert_eq!(TransportError::from(wire), error, "{text}")
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn replies_are_kept_behind_a_kept_one_only_while_a_new_holder_would_wait_for_it() {
        let first = KeptThrough::after(None, 7);
        let later = KeptThrough::after(Some(first), 9);
        assert_eq!(later.sequence, 9);
        // The wait counts from the first reply kept, not the last.
        assert_eq!(later.since, first.since);
        assert!(!later.overdue(first.since + DRAIN_BEFORE_SERVING));
        assert!(later.overdue(first.since + DRAIN_BEFORE_SERVING + Duration::from_millis(1)));
    }

    #[test]
    fn a_message_survives_the_wire() {
        use transport_core::{Button, OutboundKind};
        let message = OutboundMessage {
            conversation_id: "c".into(),
            thread_id: Some("t".into()),
            kind: OutboundKind::Progress,
            text: "**x**".into(),
            edit_key: Some("e".into()),
            buttons: vec![Button {
                label: "Approve".into(),
                command: "/approve ab12".into(),
            }],
            answers_press: None,
            reply_to: None,
        };
        let text = serde_json::to_string(&WireRequest::Send {
            message: message.clone(),
            send_id: Some("5e".into()),
        })
        .unwrap();
        match serde_json::from_str::<WireRequest>(&text).unwrap() {
            WireRequest::Send {
                message: wire,
                send_id,
            } => assert_eq!((wire, send_id.as_deref()), (message, Some("5e"))),
            other => panic!("{other:?}"),
        }
    }
}
