//! A transport that counts what it sends: wrapped around each real bot connection, it sees
//! every message to the platform whichever path sent it (a session's reply, the broker's own
//! answers, the queued answers to strangers), so the counts cannot miss one path.

use std::sync::Arc;

use async_trait::async_trait;
use transport_core::{
    BotIdentity, Capabilities, FetchedAttachment, InboundSink, OutboundFile, OutboundMessage,
    SendReceipt, Transport, TransportError,
};

use super::metrics::Metrics;

/// `inner`, with each send counted in `metrics` by transport and outcome.
pub struct CountedTransport {
    inner: Arc<dyn Transport>,
    metrics: Arc<Metrics>,
}

impl CountedTransport {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Transport>, metrics: Arc<Metrics>) -> CountedTransport {
        CountedTransport { inner, metrics }
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
        self.inner.start(sink).await
    }

    async fn stop(&self) {
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

    fn diagnose(&self) -> String {
        self.inner.diagnose()
    }
}
