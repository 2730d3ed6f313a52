//! The road from a transport to its session, with a receipt for every message.
//!
//! Why a receipt: a platform that redelivers (Telegram's `getUpdates` offset, Slack's
//! envelope retries, a JetStream consumer) must be told "done" only once the session has
//! taken the message, or a crash between fetching and handling loses it. Each
//! [`Inbound`] carries a [`Handled`] signal that fires when the session drops it, which
//! it does after the bridge has handled the message (or deliberately dropped it after a
//! trap, which is reported). A process that dies first never fires it, so the platform
//! delivers the message again.
//!
//! The same road carries alerts: a transport that stops receiving for a reason the person
//! must act on (another poller took the token, the token was revoked) says so here, so
//! the terminal hears it when it happens, not only when someone runs `doctor`.

use tokio::sync::{mpsc, oneshot};

use crate::Envelope;

/// What a transport hands its session.
#[derive(Debug)]
pub enum Inbound {
    /// One message.
    Message {
        /// The normalized message.
        envelope: Envelope,
        /// Fires when this value is dropped: the session is done with the message.
        handled: Handled,
    },
    /// Something the person at the terminal must hear about now.
    Alert {
        /// Transport id.
        transport: String,
        /// What happened and what to do; never a token.
        text: String,
    },
}

impl Inbound {
    /// The envelope, if this is a message (tests read messages this way).
    pub fn into_envelope(self) -> Option<Envelope> {
        match self {
            Inbound::Message { envelope, .. } => Some(envelope),
            Inbound::Alert { .. } => None,
        }
    }
}

/// Fires its receiver when dropped (see the module docs).
#[derive(Debug)]
pub struct Handled(Option<oneshot::Sender<()>>);

impl Drop for Handled {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            // The transport may have stopped waiting (it was stopped); nothing to tell then.
            let _ = done.send(());
        }
    }
}

/// The session is gone: nobody will handle messages any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the session no longer takes messages")]
pub struct SessionGone;

/// Where a running transport delivers inbound messages, in arrival order. The channel is
/// bounded: a slow session pushes back on the transport instead of dropping messages.
///
/// Messages travel boxed: tokio allocates a channel's first block of 32 slots when the
/// channel is made, and an [`Inbound`] inline made that block 7 KiB for every session a
/// host holds, asleep or awake (docs/scaling.md#idle-sessions); boxed it is 256 bytes.
#[derive(Debug, Clone)]
pub struct InboundSink(mpsc::Sender<Box<Inbound>>);

/// The session's end of an [`InboundSink`].
#[derive(Debug)]
pub struct InboundStream(mpsc::Receiver<Box<Inbound>>);

impl InboundStream {
    /// The next message or alert, in arrival order; `None` once every sink is gone and
    /// nothing is left.
    pub async fn recv(&mut self) -> Option<Inbound> {
        self.0.recv().await.map(|inbound| *inbound)
    }

    /// The next message or alert if one is waiting, without waiting for one.
    pub fn try_recv(&mut self) -> Result<Inbound, mpsc::error::TryRecvError> {
        self.0.try_recv().map(|inbound| *inbound)
    }
}

/// A sink and its stream, with room for `capacity` messages in flight.
pub fn channel(capacity: usize) -> (InboundSink, InboundStream) {
    let (tx, rx) = mpsc::channel(capacity);
    (InboundSink(tx), InboundStream(rx))
}

impl InboundSink {
    /// Hands `envelope` on and returns at once, once there is room; for platforms that
    /// do not redeliver (the terminal, a gRPC stream).
    pub async fn deliver(&self, envelope: Envelope) -> Result<(), SessionGone> {
        self.0
            .send(Box::new(Inbound::Message {
                envelope,
                handled: Handled(None),
            }))
            .await
            .map_err(|_| SessionGone)
    }

    /// Hands `envelope` on and waits until the session is done with it; only then may a
    /// redelivering platform be told the message is confirmed.
    pub async fn deliver_and_wait(&self, envelope: Envelope) -> Result<(), SessionGone> {
        let (done, wait) = oneshot::channel();
        self.0
            .send(Box::new(Inbound::Message {
                envelope,
                handled: Handled(Some(done)),
            }))
            .await
            .map_err(|_| SessionGone)?;
        wait.await.map_err(|_| SessionGone)
    }

    /// Hands on a message another sink received, receipt and all, once there is room: a
    /// broker routing one bot's messages to many sessions keeps the platform's receipt
    /// tied to the session that really handles the message. When this sink's session is
    /// gone the message comes back, so the caller can still answer it.
    pub async fn forward(&self, inbound: Inbound) -> Result<(), Inbound> {
        self.0
            .send(Box::new(inbound))
            .await
            .map_err(|returned| *returned.0)
    }

    /// Tells the person at the terminal about a problem now. Never waits: when messages
    /// fill the channel the alert is dropped, and `diagnose` still carries it.
    pub fn alert(&self, transport: &str, text: impl Into<String>) {
        let _ = self.0.try_send(Box::new(Inbound::Alert {
            transport: transport.to_owned(),
            text: text.into(),
        }));
    }

    /// True once the session's end is gone.
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn deliver_and_wait_returns_only_after_the_session_drops_the_message() {
        let (sink, mut stream) = channel(4);
        let waiting = tokio::spawn(async move { sink.deliver_and_wait(Envelope::default()).await });
        let inbound = stream.recv().await.expect("delivered");
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "not handled yet");
        drop(inbound);
        assert_eq!(waiting.await.expect("task"), Ok(()));
    }

    #[tokio::test]
    async fn an_alert_reaches_the_session_without_waiting() {
        let (sink, mut stream) = channel(1);
        sink.alert("telegram", "another poller");
        match stream.recv().await {
            Some(Inbound::Alert { transport, text }) => {
                assert_eq!(
                    (transport.as_str(), text.as_str()),
                    ("telegram", "another poller")
                );
            }
            other => panic!("expected an alert, got {other:?}"),
        }
        // A full channel drops the alert instead of blocking the transport.
        sink.deliver(Envelope::default()).await.expect("room");
        sink.alert("telegram", "dropped");
        assert!(
            stream
                .recv()
                .await
                .and_then(Inbound::into_envelope)
                .is_some()
        );
    }

    #[tokio::test]
    async fn a_session_that_goes_away_unhandled_is_reported_not_awaited_for_ever() {
        let (sink, stream) = channel(4);
        drop(stream);
        assert_eq!(sink.deliver(Envelope::default()).await, Err(SessionGone));
        assert_eq!(
            sink.deliver_and_wait(Envelope::default()).await,
            Err(SessionGone)
        );
        assert!(sink.is_closed());
    }

    #[tokio::test]
    async fn a_forwarded_message_keeps_its_receipt_and_comes_back_from_a_gone_session() {
        let (platform, mut router) = channel(4);
        let (session, mut session_stream) = channel(4);
        let waiting =
            tokio::spawn(async move { platform.deliver_and_wait(Envelope::default()).await });
        let inbound = router.recv().await.expect("delivered");
        session.forward(inbound).await.expect("room");
        let forwarded = session_stream.recv().await.expect("forwarded");
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the session has not handled it yet");
        drop(forwarded);
        assert_eq!(waiting.await.expect("task"), Ok(()));

        let (gone, gone_stream) = channel(1);
        drop(gone_stream);
        let returned = gone
            .forward(Inbound::Alert {
                transport: "telegram".into(),
                text: "x".into(),
            })
            .await;
        assert!(matches!(returned, Err(Inbound::Alert { .. })));
    }

    #[tokio::test]
    async fn messages_arrive_in_the_order_they_were_delivered() {
        let (sink, mut stream) = channel(4);
        for text in ["a", "b", "c"] {
            sink.deliver(Envelope {
                text: text.into(),
                ..Envelope::default()
            })
            .await
            .expect("room");
        }
        let mut seen = Vec::new();
        for _ in 0..3 {
            let inbound = stream.recv().await.expect("message");
            seen.push(inbound.into_envelope().expect("a message").text);
        }
        assert_eq!(seen, ["a", "b", "c"]);
    }
}
