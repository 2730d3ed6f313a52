//! A transport that counts what it sends and receives: wrapped around each real bot
//! connection, it sees every message to the platform whichever path sent it (a session's
//! reply, the broker's own answers, the queued answers to strangers), so the counts cannot
//! miss one path.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use transport_core::inbound::Inbound;
use transport_core::{
    InboundSink, OutboundFile, OutboundMessage, SendReceipt, Transport, TransportError,
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

transport_core::forward_transport! {
    // Everything but the counted paths goes to the bot as it is, reactions and drafts too.
    impl Transport for CountedTransport => inner {
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

        async fn send_file(&self, file: OutboundFile) -> Result<SendReceipt, TransportError> {
            let sent = self.inner.send_file(file).await;
            self.metrics
                .envelope_sent(self.inner.id(), sent.as_ref().map(|_| ()));
            sent
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport_core::{Reaction, Topic};
    use transport_testing::fake::{FakeConfig, FakeTransport};

    /// Counting must not change what the bot can do: every method the counter does not
    /// count reaches the bot inside it. Reactions and drafts once fell back to the trait's
    /// "cannot" whenever `--metrics` wrapped the bot.
    #[tokio::test]
    async fn what_is_not_counted_reaches_the_bot_unchanged() {
        let mut config = FakeConfig::default();
        config.capabilities.reactions = true;
        config.capabilities.drafts = true;
        let fake = Arc::new(FakeTransport::new(config));
        fake.set_topic_place(Some("forum"));
        let metrics = Arc::new(Metrics::new(["fake"]));
        let counted = CountedTransport::new(fake.clone(), metrics);
        let (sink, _inbound) = transport_core::inbound::channel(4);
        counted.start(sink).await.expect("started");

        counted
            .react("chat", "7", Reaction::Done, Some(Reaction::Received))
            .await
            .expect("reacted");
        counted
            .draft("chat", None, 3, "half an answer")
            .await
            .expect("drafted");
        assert_eq!(fake.reactions().len(), 1);
        assert_eq!(
            fake.drafts(),
            [("chat".to_owned(), 3, "half an answer".to_owned())]
        );

        assert_eq!(counted.topic_place().as_deref(), Some("forum"));
        assert_eq!(
            counted.topics_in_private_chats(),
            fake.topics_in_private_chats()
        );
        let topic: Topic = counted.create_topic("api").await.expect("made");
        counted
            .end_topic(&topic, "ended · api")
            .await
            .expect("ended");
        counted.resume_topic(&topic, "api").await.expect("resumed");
        assert_eq!(fake.topics().len(), 1);
        assert_eq!(counted.id(), "fake");
        assert_eq!(counted.diagnose(), fake.diagnose());
    }
}
