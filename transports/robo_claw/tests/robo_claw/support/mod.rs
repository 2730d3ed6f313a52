//! A real server on 127.0.0.1 (port 0) and a real tonic client, for the loopback tests.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Request;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use transport_core::{Envelope, Inbound, InboundStream, OutboundKind, OutboundMessage, Transport};
use transport_robo_claw::proto::ChatMessage;
use transport_robo_claw::proto::robo_messenger_client::RoboMessengerClient;
use transport_robo_claw::{RoboClawConfig, RoboClawTransport};

/// Every wait in these tests is bounded by this.
pub const WAIT: Duration = Duration::from_secs(10);

/// The peer token the tests configure.
pub const TOKEN: &str = "peer-token-for-tests";

/// A started transport and the session's end of its sink.
pub struct Server {
    pub transport: Arc<RoboClawTransport>,
    pub inbound: InboundStream,
    pub addr: SocketAddr,
}

/// The defaults on 127.0.0.1, any free port, with the test token.
pub fn config() -> RoboClawConfig {
    RoboClawConfig {
        host: "127.0.0.1".into(),
        port: 0,
        token: Some(TOKEN.into()),
        clock: Arc::new(|| 1_700_000_000_000),
        ..RoboClawConfig::default()
    }
}

/// Starts a transport with `config`.
pub async fn start(config: RoboClawConfig) -> Server {
    let transport = Arc::new(RoboClawTransport::new(config));
    let (sink, inbound) = transport_core::inbound::channel(64);
    transport.start(sink).await.expect("the server starts");
    let addr = transport.local_addr().expect("bound");
    Server {
        transport,
        inbound,
        addr,
    }
}

impl Server {
    /// The next message the session receives, skipping alerts.
    pub async fn next_envelope(&mut self) -> Envelope {
        loop {
            let inbound = tokio::time::timeout(WAIT, self.inbound.recv())
                .await
                .expect("a message within the wait")
                .expect("the sink is open");
            if let Inbound::Message { envelope, .. } = inbound {
                return envelope;
            }
        }
    }

    /// The next alert the session receives, skipping messages.
    pub async fn next_alert(&mut self) -> String {
        loop {
            let inbound = tokio::time::timeout(WAIT, self.inbound.recv())
                .await
                .expect("an alert within the wait")
                .expect("the sink is open");
            if let Inbound::Alert { text, .. } = inbound {
                return text;
            }
        }
    }

    /// Sends a reply to `room` as the bridge would.
    pub async fn reply(&self, room: &str, text: &str) {
        self.transport
            .send(reply(room, text))
            .await
            .expect("the reply is accepted");
    }

    /// Waits until `room` has `streams` connected streams.
    pub async fn wait_for_streams(&self, room: &str, streams: usize) {
        let reached = self
            .transport
            .wait_until(WAIT, |transport| {
                let connected = transport
                    .rooms()
                    .iter()
                    .find(|status| status.room == room)
                    .map_or(0, |status| status.streams);
                connected == streams
            })
            .await;
        assert!(reached, "room {room:?} never had {streams} stream(s)");
    }
}

/// A reply to `room`.
pub fn reply(room: &str, text: &str) -> OutboundMessage {
    OutboundMessage {
        conversation_id: room.to_owned(),
        thread_id: None,
        kind: OutboundKind::Reply,
        text: text.to_owned(),
        edit_key: None,
        buttons: Vec::new(),
        answers_press: None,
        reply_to: None,
    }
}

/// A client over plain TCP.
pub async fn client(addr: SocketAddr) -> RoboMessengerClient<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect_timeout(WAIT)
        .connect()
        .await
        .expect("the client connects");
    RoboMessengerClient::new(channel)
}

/// A chat message from `sender` in `room` (the default room when `None`).
pub fn chat(sender: &str, content: &str, room: Option<&str>) -> ChatMessage {
    let mut message = ChatMessage {
        sender_id: sender.to_owned(),
        content: content.to_owned(),
        timestamp: 1_700_000_000_123,
        metadata: Default::default(),
    };
    if let Some(room) = room {
        message.metadata.insert("room_id".into(), room.to_owned());
    }
    message
}

/// A request carrying the peer token header (when given) and the room header (when given).
pub fn request<T>(body: T, token: Option<&str>, room: Option<&str>) -> Request<T> {
    let mut request = Request::new(body);
    if let Some(token) = token {
        request.metadata_mut().insert(
            "x-robo-claw-peer-token",
            MetadataValue::try_from(token).expect("ascii"),
        );
    }
    if let Some(room) = room {
        request.metadata_mut().insert(
            "x-robo-claw-room-id",
            MetadataValue::try_from(room).expect("ascii"),
        );
    }
    request
}

/// One open `ChatStream`: what the client sends and what it receives.
#[derive(Debug)]
pub struct Chat {
    pub outgoing: mpsc::Sender<ChatMessage>,
    pub incoming: tonic::Streaming<ChatMessage>,
}

impl Chat {
    /// Sends one message on the stream.
    pub async fn send(&self, message: ChatMessage) {
        self.outgoing
            .send(message)
            .await
            .expect("the stream is open");
    }

    /// The next message from the server.
    pub async fn next(&mut self) -> Result<ChatMessage, tonic::Status> {
        tokio::time::timeout(WAIT, self.incoming.message())
            .await
            .expect("an answer within the wait")
            .and_then(|message| message.ok_or_else(|| tonic::Status::cancelled("stream ended")))
    }

    /// The next text from the server.
    pub async fn next_text(&mut self) -> String {
        self.next().await.expect("a message").content
    }
}

/// Opens a `ChatStream` with the given headers.
pub async fn open(
    client: &mut RoboMessengerClient<Channel>,
    token: Option<&str>,
    room: Option<&str>,
) -> Result<Chat, tonic::Status> {
    let (outgoing, requests) = mpsc::channel(16);
    let response = client
        .chat_stream(request(ReceiverStream::new(requests), token, room))
        .await?;
    Ok(Chat {
        outgoing,
        incoming: response.into_inner(),
    })
}
