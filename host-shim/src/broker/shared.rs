//! One real bot connection shared by every session of a broker, and the per-session
//! [`RoutedTransport`] each session's bridge sees in its place.
//!
//! The bridge inside a session does not know it shares the bot: it identifies, starts, sends and
//! stops as usual. Underneath, the first session to start the transport starts the real one (with
//! the router as its sink and the broker holding the bot's lock), later ones only register their
//! own sink, and a session's stop only unregisters it. Sends are refused for a conversation bound
//! to another session, so one session's cards and replies never land in a chat that talks to
//! another (docs/decisions.md#decision-14-one-host-one-bot-many-sessions).

use std::sync::{Arc, Mutex, PoisonError, Weak};

use async_trait::async_trait;
use transport_core::{
    BotIdentity, Capabilities, FetchedAttachment, InboundSink, OutboundFile, OutboundMessage,
    SendReceipt, Topic, Transport, TransportError,
};

use super::Broker;
use crate::disk::lock::{Claimant, LockError, LockGuard};
use crate::ops::health::Check;

/// Messages in flight from one real transport to the router.
const ROUTER_CAPACITY: usize = 256;

struct Started {
    identity: BotIdentity,
    _lock: Option<LockGuard>,
    /// The real connection is started and its router runs.
    running: bool,
}

/// One real transport, started at most once for all sessions.
pub(super) struct Shared {
    /// The request it was built from (`id` + settings): sessions asking for the same
    /// bot share it; another credential under the same id is another `Shared`.
    pub(super) fingerprint: Arc<str>,
    pub(super) real: Arc<dyn Transport>,
    started: tokio::sync::Mutex<Option<Started>>,
}

impl Shared {
    pub(super) fn new(fingerprint: String, real: Arc<dyn Transport>) -> Arc<Shared> {
        Arc::new(Shared {
            fingerprint: fingerprint.into(),
            real,
            started: tokio::sync::Mutex::new(None),
        })
    }

    /// Identifies the bot and takes its lock for the broker, once; later calls answer
    /// from memory. The identity handed to sessions names no lock: the broker holds it
    /// for all of them, so the sessions never contend for it.
    async fn identify(&self, broker: &Broker) -> Result<BotIdentity, TransportError> {
        let mut started = self.started.lock().await;
        if let Some(started) = started.as_ref() {
            return Ok(started.identity.clone());
        }
        let identity = self.real.identify().await?;
        let lock = match &identity.lock_name {
            Some(name) => Some(
                broker
                    .locks
                    .acquire(
                        name,
                        u64::MAX,
                        &Claimant::this_process(broker.clock.now_ms()),
                    )
                    .map_err(|error| match error {
                        LockError::Held { holder_description } => TransportError::Failed(format!(
                            "another host-shim already uses this {} bot ({holder_description}); \
                             stop it, or attach that session to this broker instead",
                            self.real.id()
                        )),
                        other => TransportError::Failed(format!(
                            "cannot take the {} bot's lock: {other}",
                            self.real.id()
                        )),
                    })?,
            ),
            None => None,
        };
        let identity = BotIdentity {
            lock_name: None,
            ..identity
        };
        *started = Some(Started {
            identity: identity.clone(),
            _lock: lock,
            running: false,
        });
        Ok(identity)
    }

    /// Whether the real connection runs, for `/readyz`; a start in progress (its lock
    /// taken) is not ready yet.
    pub(super) fn readiness(&self) -> Check {
        let name = format!("bot {}", self.real.id());
        match self.started.try_lock() {
            Ok(started) => match started.as_ref() {
                Some(Started { running: true, .. }) => {
                    Check::ready(name, "running, its lock held here")
                }
                Some(_) => Check::not_ready(name, "identified, not started yet"),
                None => Check::not_ready(name, "not connected yet"),
            },
            Err(_) => Check::not_ready(name, "connecting"),
        }
    }

    /// Forgets the identity and releases the bot's lock (the broker stops).
    pub(super) async fn release(&self) {
        self.started.lock().await.take();
    }
}

/// A session's view of a shared transport.
pub struct RoutedTransport {
    pub(super) shared: Arc<Shared>,
    pub(super) session: String,
    pub(super) broker: Weak<Broker>,
}

impl RoutedTransport {
    fn broker(&self) -> Result<Arc<Broker>, TransportError> {
        self.broker
            .upgrade()
            .ok_or_else(|| TransportError::NotStarted(self.shared.real.id().to_owned()))
    }

    /// The session `conversation_id` (and `thread_id`) belongs to when that is another
    /// one: its name. A session's topic belongs to it whatever the chat it is in is bound
    /// to (a forum's topics share one chat id).
    fn bound_elsewhere(
        &self,
        broker: &Broker,
        conversation_id: &str,
        thread_id: Option<&str>,
    ) -> Option<String> {
        if let Some((owner, name)) =
            broker.topic_owner(self.shared.real.id(), conversation_id, thread_id)
        {
            return (owner != self.session).then_some(name);
        }
        let key = format!("{}:{conversation_id}", self.shared.real.id());
        broker.inner(|inner| {
            inner
                .bindings
                .get(&key)
                .filter(|b| b.session != self.session)
                .map(|b| b.name.clone())
        })
    }
}

#[async_trait]
impl Transport for RoutedTransport {
    fn id(&self) -> &str {
        self.shared.real.id()
    }

    fn capabilities(&self) -> Capabilities {
        self.shared.real.capabilities()
    }

    async fn identify(&self) -> Result<BotIdentity, TransportError> {
        let broker = self.broker()?;
        self.shared.identify(&broker).await
    }

    async fn start(&self, sink: InboundSink) -> Result<(), TransportError> {
        let broker = self.broker()?;
        {
            // Held across the real start, so two sessions starting at once start it once.
            let mut started = self.shared.started.lock().await;
            let Some(started) = started.as_mut() else {
                return Err(TransportError::Failed(format!(
                    "{}: start before identify (a host bug)",
                    self.id()
                )));
            };
            if !started.running {
                let (router_sink, stream) = transport_core::inbound::channel(ROUTER_CAPACITY);
                self.shared.real.start(router_sink).await?;
                broker.run_router(self.shared.clone(), stream);
                started.running = true;
            }
        }
        broker.register_sink(&self.session, &self.shared.fingerprint, self.id(), sink)?;
        broker.start_topic(&self.session, &self.shared);
        Ok(())
    }

    async fn stop(&self) {
        if let Some(broker) = self.broker.upgrade() {
            // Before the sink goes: a problem ending the topic is told in its terminal.
            broker.end_topic(&self.session, &self.shared).await;
            broker.unregister_sink(&self.session, &self.shared.fingerprint);
        }
    }

    async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
        let broker = self.broker()?;
        // The session answers where the message came from; that topic may have been
        // replaced since (deleted by hand).
        let message = match broker.topic_moved(
            self.id(),
            &message.conversation_id,
            message.thread_id.as_deref(),
        ) {
            Some(now) => OutboundMessage {
                conversation_id: now.conversation_id,
                thread_id: now.thread_id,
                ..message
            },
            None => message,
        };
        if let Some(other) = self.bound_elsewhere(
            &broker,
            &message.conversation_id,
            message.thread_id.as_deref(),
        ) {
            // The chat moved on with /switch: its messages now come from that session.
            if let Some(metrics) = broker.metrics() {
                metrics.envelope_refused(self.id());
            }
            return Err(TransportError::Failed(format!(
                "not sent: this chat now talks to another session ({other})"
            )));
        }
        // Only a send into the session's own topic is kept for a second try: the topic
        // may have been deleted by hand, and the message then goes to a new one.
        let own_topic = broker
            .topic_owner(
                self.id(),
                &message.conversation_id,
                message.thread_id.as_deref(),
            )
            .filter(|(owner, _)| *owner == self.session)
            .map(|_| {
                (
                    Topic {
                        conversation_id: message.conversation_id.clone(),
                        thread_id: message.thread_id.clone(),
                    },
                    message.clone(),
                )
            });
        match (self.shared.real.send(message).await, own_topic) {
            (Err(error), Some((topic, message))) if self.shared.real.topic_gone(&error) => {
                let Some(now) = broker
                    .replace_gone_topic(&self.session, &self.shared, &topic)
                    .await
                else {
                    return Err(error);
                };
                // An edit's message went with the old topic: the text is posted anew.
                self.shared
                    .real
                    .send(OutboundMessage {
                        conversation_id: now.conversation_id,
                        thread_id: now.thread_id,
                        edit_key: None,
                        ..message
                    })
                    .await
            }
            (sent, _) => sent,
        }
    }

    async fn typing(
        &self,
        conversation_id: &str,
        thread_id: Option<&str>,
    ) -> Result<(), TransportError> {
        let broker = self.broker()?;
        if self
            .bound_elsewhere(&broker, conversation_id, thread_id)
            .is_some()
        {
            return Ok(());
        }
        match broker.topic_moved(self.id(), conversation_id, thread_id) {
            Some(now) => {
                self.shared
                    .real
                    .typing(&now.conversation_id, now.thread_id.as_deref())
                    .await
            }
            None => self.shared.real.typing(conversation_id, thread_id).await,
        }
    }

    async fn fetch_attachment(
        &self,
        reference: &str,
        max_bytes: u64,
    ) -> Result<FetchedAttachment, TransportError> {
        self.shared
            .real
            .fetch_attachment(reference, max_bytes)
            .await
    }

    fn max_upload_bytes(&self) -> u64 {
        self.shared.real.max_upload_bytes()
    }

    async fn send_file(&self, file: OutboundFile) -> Result<SendReceipt, TransportError> {
        let broker = self.broker()?;
        let file =
            match broker.topic_moved(self.id(), &file.conversation_id, file.thread_id.as_deref()) {
                Some(now) => OutboundFile {
                    conversation_id: now.conversation_id,
                    thread_id: now.thread_id,
                    ..file
                },
                None => file,
            };
        if let Some(other) =
            self.bound_elsewhere(&broker, &file.conversation_id, file.thread_id.as_deref())
        {
            // The chat moved on with /switch: a file from this session would land in
            // another session's conversation.
            return Err(TransportError::Failed(format!(
                "not sent: this chat now talks to another session ({other})"
            )));
        }
        // As for a message: a file into the session's own topic is kept for a second try
        // in a new topic, should that one have been deleted by hand.
        let topic = Topic {
            conversation_id: file.conversation_id.clone(),
            thread_id: file.thread_id.clone(),
        };
        let own = broker
            .topic_owner(
                self.id(),
                &topic.conversation_id,
                topic.thread_id.as_deref(),
            )
            .is_some_and(|(owner, _)| owner == self.session);
        if !own {
            return self.shared.real.send_file(file).await;
        }
        match self.shared.real.send_file(file.clone()).await {
            Err(error) if self.shared.real.topic_gone(&error) => {
                let Some(now) = broker
                    .replace_gone_topic(&self.session, &self.shared, &topic)
                    .await
                else {
                    return Err(error);
                };
                self.shared
                    .real
                    .send_file(OutboundFile {
                        conversation_id: now.conversation_id,
                        thread_id: now.thread_id,
                        ..file
                    })
                    .await
            }
            sent => sent,
        }
    }

    fn diagnose(&self) -> String {
        let sessions = self
            .broker
            .upgrade()
            .map_or(0, |b| b.sessions_on(&self.shared.fingerprint));
        format!(
            "{} (shared by the broker with {sessions} session{})",
            self.shared.real.diagnose(),
            if sessions == 1 { "" } else { "s" }
        )
    }
}

/// Locks a std mutex, taking the value back from a poisoned one (a panic elsewhere must
/// not stop every session's routing).
pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
