//! A transport that counts what it sends and receives: wrapped around each real bot
//! connection, it sees every message to the platform whichever path sent it (a session's
//! reply, the broker's own answers, the queued answers to strangers), so the counts cannot
//! miss one path.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use transport_core::inbound::Inbound;
use transport_core::{
    BotIdentity, Capabilities, FetchedAttachment, InboundSink, OutboundFile, OutboundMessage,
    SendReceipt, Topic, TopicError, TopicNaming, Transport, TransportError,
};

use super::health::Check;
use super::metrics::Metrics;

/// `inner`, with each send counted in `metrics` by transport and outcome.
pub struct CountedTransport {
    inner: Arc<dyn Transport>,
    metrics: Arc<Metrics>,
    /// Started and not stopped since: `/readyz` of a single session (`run`) is this.
    running: AtomicBool,
}

impl CountedTransport {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Transport>, metrics: Arc<Metrics>) -> CountedTransport {
        CountedTransport {
            inner,
            metrics,
            running: AtomicBool::new(false),
        }
    }

    /// Whether this transport serves: started and not stopped since.
    pub fn readiness(&self) -> Check {
        let name = format!("transport {}", self.inner.id());
        if self.running.load(Ordering::SeqCst) {
            Check::ready(name, "running")
        } else {
            Check::not_ready(
                name,
                "not started: see the session's log or `host-shim doctor` for why",
            )
        }
    }
}

#[async_trait]
impl Transport for CountedTransport {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn identify(&self) -> Result<BotIdentity, TransportError> {
        self.inner.identify().await
    }

    async fn start(&self, sink: InboundSink) -> Result<(), TransportError> {
        // Counted on the way in, in order, each with its receipt: under `run` the transport
        // hands messages straight to the session, with no broker or ingress to count them.
        let (counted, mut stream) = transport_core::inbound::channel(1);
        let metrics = self.metrics.clone();
        tokio::spawn(async move {
            while let Some(inbound) = stream.recv().await {
                if let Inbound::Message { envelope, .. } = &inbound {
                    metrics.envelope_received(&envelope.transport);
                }
                if sink.forward(inbound).await.is_err() {
                    // The session is gone: the transport sees its sink closed as before.
                    break;
                }
            }
        });
        let started = self.inner.start(counted).await;
        self.running.store(started.is_ok(), Ordering::SeqCst);
        started
    }

    async fn stop(&self) {
        self.running.store(false, Ordering::SeqCst);
        self.inner.stop().await;
    }

    async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
        let sent = self.inner.send(message).await;
        self.metrics
            .envelope_sent(self.inner.id(), sent.as_ref().map(|_| ()));
        sent
    }

    async fn typing(
        &self,
        conversation_id: &str,
        thread_id: Option<&str>,
    ) -> Result<(), TransportError> {
        self.inner.typing(conversation_id, thread_id).await
    }

    async fn fetch_attachment(
        &self,
        reference: &str,
        max_bytes: u64,
    ) -> Result<FetchedAttachment, TransportError> {
        self.inner.fetch_attachment(reference, max_bytes).await
    }

    fn max_upload_bytes(&self) -> u64 {
        self.inner.max_upload_bytes()
    }

    async fn send_file(&self, file: OutboundFile) -> Result<SendReceipt, TransportError> {
        let sent = self.inner.send_file(file).await;
        self.metrics
            .envelope_sent(self.inner.id(), sent.as_ref().map(|_| ()));
        sent
    }

    fn topic_place(&self) -> Option<String> {
        self.inner.topic_place()
    }

    fn topic_naming(&self) -> TopicNaming {
        self.inner.topic_naming()
    }

    async fn create_topic(&self, name: &str) -> Result<Topic, TopicError> {
        self.inner.create_topic(name).await
    }

    async fn resume_topic(&self, topic: &Topic, name: &str) -> Result<(), TopicError> {
        self.inner.resume_topic(topic, name).await
    }

    async fn end_topic(&self, topic: &Topic, name: &str) -> Result<(), TopicError> {
        self.inner.end_topic(topic, name).await
    }

    fn topic_gone(&self, error: &TransportError) -> bool {
        self.inner.topic_gone(error)
    }

    fn diagnose(&self) -> String {
        self.inner.diagnose()
    }
}
