//! The conformance kit (I41) against robo_claw; the messenger side is a real tonic client.
//!
//! The RoboClaw app is a client that is connected while the bridge runs. The kit starts
//! and stops the transport itself, so the subject's transport is the real one wrapped in
//! [`Connected`], which only adds what the app does: once `start` succeeds, a client
//! opens a stream to the kit's room and the wrapper returns when the server has it. Every
//! call still goes to the real transport. The buffer is off (`bufferSize` 0), so a send
//! after the client went away fails on the platform side as rule 4 asks; buffering has
//! its own tests in `loopback.rs`.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use transport_core::{
    BotIdentity, Capabilities, FetchedAttachment, InboundSink, OutboundMessage, SendReceipt,
    Transport, TransportError,
};
use transport_robo_claw::proto::ChatMessage;
use transport_robo_claw::{RoboClawConfig, RoboClawTransport};
use transport_testing::conformance::{ConformancePlatform, Subject, Violation, run_all};

use crate::support;

const SECRET: &str = "test-token";
const ROOM: &str = "conformance-chat";

/// The client side: the open stream and everything it received.
#[derive(Default)]
struct ClientSide {
    outgoing: Mutex<Option<mpsc::Sender<ChatMessage>>>,
    reader: Mutex<Option<JoinHandle<()>>>,
    received: Arc<Mutex<Vec<String>>>,
}

impl ClientSide {
    async fn connect(&self, transport: &RoboClawTransport) -> Result<(), TransportError> {
        let addr = transport
            .local_addr()
            .ok_or_else(|| TransportError::Failed("started but not bound".into()))?;
        let mut client = support::client(addr).await;
        let chat = support::open(&mut client, Some(SECRET), Some(ROOM))
            .await
            .map_err(|status| TransportError::Failed(status.to_string()))?;
        let support::Chat {
            outgoing,
            mut incoming,
        } = chat;
        let received = self.received.clone();
        let reader = tokio::spawn(async move {
            while let Ok(Some(message)) = incoming.message().await {
                received.lock().expect("not poisoned").push(message.content);
            }
        });
        *self.outgoing.lock().expect("not poisoned") = Some(outgoing);
        *self.reader.lock().expect("not poisoned") = Some(reader);
        let joined = transport
            .wait_until(support::WAIT, |t| {
                t.rooms()
                    .iter()
                    .any(|room| room.room == ROOM && room.streams == 1)
            })
            .await;
        if joined {
            Ok(())
        } else {
            Err(TransportError::Failed(
                "the client never joined its room".into(),
            ))
        }
    }
}

/// The real transport; `start` also connects the app's client.
struct Connected {
    inner: Arc<RoboClawTransport>,
    client: Arc<ClientSide>,
}

#[async_trait]
impl Transport for Connected {
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
        self.inner.start(sink).await?;
        self.client.connect(&self.inner).await
    }
    async fn stop(&self) {
        self.inner.stop().await;
    }
    async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
        self.inner.send(message).await
    }
    async fn fetch_attachment(
        &self,
        reference: &str,
        max_bytes: u64,
    ) -> Result<FetchedAttachment, TransportError> {
        self.inner.fetch_attachment(reference, max_bytes).await
    }
    fn diagnose(&self) -> String {
        self.inner.diagnose()
    }
}

struct Platform {
    transport: Arc<RoboClawTransport>,
    client: Arc<ClientSide>,
}

#[async_trait]
impl ConformancePlatform for Platform {
    /// What the client received. The kit asks after `stop`, when the server has ended the
    /// stream; waiting for that end makes every message written before it count.
    async fn posted(&self) -> Vec<String> {
        let reader = self.client.reader.lock().expect("not poisoned").take();
        if let Some(reader) = reader {
            tokio::time::timeout(support::WAIT, reader)
                .await
                .expect("the stream ends after stop")
                .expect("the reader task");
        }
        self.client.received.lock().expect("not poisoned").clone()
    }

    async fn edited(&self) -> Vec<String> {
        Vec::new()
    }

    /// The app goes away; once the server has noticed, nobody is there to write to.
    async fn fail_sends(&self) {
        self.client.outgoing.lock().expect("not poisoned").take();
        if let Some(reader) = self.client.reader.lock().expect("not poisoned").take() {
            reader.abort();
        }
        let gone = self
            .transport
            .wait_until(support::WAIT, |t| {
                t.rooms().iter().all(|room| room.streams == 0)
            })
            .await;
        assert!(gone, "the server never noticed the client leave");
    }

    async fn deliver(&self, text: &str) -> Result<(), String> {
        let outgoing = self
            .client
            .outgoing
            .lock()
            .expect("not poisoned")
            .clone()
            .ok_or("the client is not connected")?;
        outgoing
            .send(support::chat("conformance-user", text, Some(ROOM)))
            .await
            .map_err(|error| error.to_string())
    }

    fn secret(&self) -> &str {
        SECRET
    }

    fn conversation_id(&self) -> String {
        ROOM.to_owned()
    }
}

fn subject() -> Subject {
    let transport = Arc::new(RoboClawTransport::new(RoboClawConfig {
        token: Some(SECRET.into()),
        buffer_size: 0,
        ..support::config()
    }));
    let client = Arc::new(ClientSide::default());
    Subject {
        transport: Arc::new(Connected {
            inner: transport.clone(),
            client: client.clone(),
        }),
        platform: Box::new(Platform { transport, client }),
    }
}

#[tokio::test]
async fn robo_claw_conforms() {
    assert_eq!(
        run_all(|| async { subject() }).await,
        Vec::<Violation>::new()
    );
}
