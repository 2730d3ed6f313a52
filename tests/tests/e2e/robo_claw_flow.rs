//! End to end with robo_claw: the real component and host, the real robo_claw transport
//! (a gRPC server on 127.0.0.1), and its generated tonic client playing the RoboClaw app.
//! Pair from a room, prompt, get the reply in that room only, ask `/status` through
//! `SendCommand`, and send a picture through `UploadFile`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use host_shim::factory::{self, Environment};
use host_shim::local::clock::ManualClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::pairing_budget::PairingBudget;
use host_shim::sandbox::session::{Session, SessionSpec};
use host_shim::wit::session::{AgentEvent, TurnOrigin};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Request;
use tonic::transport::Channel;
use transport_robo_claw::proto::robo_messenger_client::RoboMessengerClient;
use transport_robo_claw::proto::{ChatMessage, FileChunk};

use crate::common::{self, Dirs, ScriptAgent, WAIT};

const TOKEN: &str = "robo-claw-e2e-peer-token";
const PNG: &[u8] = &[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13];

/// A port nobody listens on right now (the lock and the server are named by it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

fn with_token<T>(body: T, room: Option<&str>) -> Request<T> {
    let mut request = Request::new(body);
    request
        .metadata_mut()
        .insert("x-robo-claw-peer-token", TOKEN.parse().expect("ascii"));
    if let Some(room) = room {
        request
            .metadata_mut()
            .insert("x-robo-claw-room-id", room.parse().expect("ascii"));
    }
    request
}

fn message(room: &str, text: &str) -> ChatMessage {
    ChatMessage {
        sender_id: "alice".into(),
        content: text.into(),
        timestamp: 1_700_000_000_000,
        metadata: [("room_id".to_owned(), room.to_owned())].into(),
    }
}

/// One room's stream, as the app holds it.
struct Room {
    outgoing: mpsc::Sender<ChatMessage>,
    incoming: tonic::Streaming<ChatMessage>,
    name: String,
}

impl Room {
    async fn open(client: &mut RoboMessengerClient<Channel>, name: &str) -> Room {
        let (outgoing, requests) = mpsc::channel(8);
        let incoming = client
            .chat_stream(with_token(ReceiverStream::new(requests), Some(name)))
            .await
            .expect("the stream opens")
            .into_inner();
        Room {
            outgoing,
            incoming,
            name: name.into(),
        }
    }

    async fn say(&self, text: &str) {
        self.send(message(&self.name, text)).await;
    }

    async fn send(&self, message: ChatMessage) {
        self.outgoing.send(message).await.expect("stream open");
    }

    /// Reads until a message containing `expect` arrives; returns everything read.
    async fn until(&mut self, expect: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let next = tokio::time::timeout(WAIT, self.incoming.message())
                .await
                .unwrap_or_else(|_| panic!("no {expect:?} within the wait; saw {seen:#?}"))
                .expect("the stream stays open")
                .expect("a message");
            assert_eq!(next.sender_id, "robot");
            assert_eq!(next.metadata.get("room_id"), Some(&self.name));
            let found = next.content.contains(expect);
            seen.push(next.content);
            if found {
                return seen;
            }
        }
    }
}

struct RoboClaw {
    session: Session,
    agent: Arc<ScriptAgent>,
    ui: Arc<RecordingUi>,
    client: RoboMessengerClient<Channel>,
    _dirs: Dirs,
}

impl RoboClaw {
    async fn start() -> RoboClaw {
        let port = free_port();
        let dirs = Dirs::new();
        let agent = Arc::new(ScriptAgent::default());
        let ui = Arc::new(RecordingUi::default());
        let config = json!({"transports": {"robo_claw": {
            "enabled": true,
            "tokenEnv": "RC_TEST_TOKEN",
            "port": port,
        }}});
        let state_dir = dirs.dir.path().to_path_buf();
        let spec = SessionSpec {
            key: "robo-claw-e2e".into(),
            config_sources: vec![common::user_config(&config.to_string())],
            platforms: factory::declarations(),
            transports: Box::new(move |requests| {
                // The token comes from the "environment" only, as in production.
                let var = |name: &str| (name == "RC_TEST_TOKEN").then(|| TOKEN.to_owned());
                factory::build(
                    requests,
                    None,
                    &Environment {
                        var: &var,
                        state_dir: Some(state_dir),
                    },
                )
            }),
            agent: agent.clone(),
            ui: ui.clone(),
            state: Dirs::open_state(&dirs.dir),
            locks: dirs.locks(),
            pairing: PairingBudget::default(),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            log: Arc::new(MemoryLog::default()),
            exclusive: true,
            transcript: None,
        };
        let session = Session::spawn(common::runtime(), spec)
            .await
            .expect("session starts");
        // The session has started its transports, so the port is open.
        let channel = Channel::from_shared(format!("http://127.0.0.1:{port}"))
            .expect("uri")
            .connect_timeout(WAIT)
            .connect()
            .await
            .unwrap_or_else(|e| {
                panic!("robo_claw listens on {port}: {e}; notes {:#?}", ui.notes())
            });
        RoboClaw {
            session,
            agent,
            ui,
            client: RoboMessengerClient::new(channel),
            _dirs: dirs,
        }
    }

    fn code_shown_locally(&self) -> String {
        let notes = self.ui.notes();
        let note = notes
            .iter()
            .rev()
            .find(|(_, text)| text.contains("Messenger pairing code:"))
            .expect("a pairing code was shown locally");
        let after = note.1.split("Messenger pairing code:").nth(1).unwrap_or("");
        after
            .split('(')
            .next()
            .unwrap_or("")
            .chars()
            .filter(char::is_ascii_digit)
            .collect()
    }

    async fn pair(&self, room: &mut Room) {
        room.say("hello").await;
        let told = room.until("not paired").await;
        let code = self.code_shown_locally();
        assert!(
            told.iter().all(|text| !text.contains(&code)),
            "the code never goes to the chat (I1)"
        );
        room.say(&code).await;
        room.until("Paired as robo_claw:alice").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pair_prompt_and_the_reply_reaches_only_its_room() {
    let mut t = RoboClaw::start().await;
    let mut client = t.client.clone();
    let mut lab = Room::open(&mut client, "lab").await;
    let mut hall = Room::open(&mut client, "hall").await;
    t.pair(&mut lab).await;

    lab.say("please fix the parser").await;
    t.agent.wait_for_prompts(1).await;
    assert_eq!(t.agent.prompts.lock().unwrap()[0], "please fix the parser");

    t.agent.busy.store(true, Ordering::SeqCst);
    t.agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    t.agent
        .emit(AgentEvent::AssistantMessage(
            "Fixed: the parser closes **nested** lists.".into(),
        ))
        .await;
    t.agent.busy.store(false, Ordering::SeqCst);
    t.agent.emit(AgentEvent::TurnSettled).await;
    lab.until("Fixed: the parser closes").await;

    // `/status` through its own RPC, answered with the bridge's text.
    let status = t
        .client
        .send_command(with_token(message("lab", "status"), None))
        .await
        .expect("answered")
        .into_inner();
    assert!(status.success, "{status:?}");
    assert!(status.message.contains("agent: idle"), "{}", status.message);

    // The other room heard nothing of this: its first message is the one meant for it.
    // (Pairing is per identity, so alice is trusted in the hall too.)
    hall.say("/whoami").await;
    let first = hall.until("robo_claw:alice").await;
    assert_eq!(
        first.len(),
        1,
        "the hall got only its own answer: {first:?}"
    );
    t.session.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uploaded_picture_reaches_the_agent_and_a_disguised_file_does_not() {
    let t = RoboClaw::start().await;
    let mut client = t.client.clone();
    let mut lab = Room::open(&mut client, "lab").await;
    t.pair(&mut lab).await;

    let upload = |data: &'static [u8]| {
        let mut client = t.client.clone();
        async move {
            let chunks = tokio_stream::iter(vec![FileChunk {
                file_id: String::new(),
                data: data.to_vec(),
                is_last: true,
                filename: "picture.png".into(),
            }]);
            client
                .upload_file(with_token(chunks, None))
                .await
                .expect("stored")
                .into_inner()
                .file_id
        }
    };

    let picture = upload(PNG).await;
    let mut prompt = message("lab", "what is in this picture?");
    prompt.metadata.insert("file_id".into(), picture);
    lab.send(prompt).await;
    t.agent.wait_for_prompts(1).await;
    assert_eq!(
        *t.agent.images.lock().unwrap(),
        [("image/png".to_owned(), PNG.len())]
    );

    // A text file declared as a PNG: the bytes decide, and the bridge refuses it (I25).
    let disguised = upload(b"just some text").await;
    let mut prompt = message("lab", "and this one?");
    prompt.metadata.insert("file_id".into(), disguised);
    prompt.metadata.insert("type".into(), "image/png".into());
    lab.send(prompt).await;
    lab.until("Only images can be forwarded").await;
    assert_eq!(t.agent.images.lock().unwrap().len(), 1);
    t.session.shutdown().await.expect("clean shutdown");
}
