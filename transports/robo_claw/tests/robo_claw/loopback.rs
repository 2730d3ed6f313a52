//! The transport against a real tonic client over a real socket on 127.0.0.1.

use std::time::Duration;

use tokio_stream::StreamExt;
use transport_core::{AttachmentKind, Inbound, Transport, TransportError};
use transport_robo_claw::proto::{DownloadRequest, FileChunk};
use transport_robo_claw::{RoboClawConfig, RoomStatus};

use crate::support::{self, TOKEN, chat, client, config, open, request, start};

const PNG: &[u8] = &[
    0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3, 4, 5, 6,
];

#[tokio::test]
async fn a_client_with_the_token_in_the_header_is_heard() {
    let mut server = start(config()).await;
    let mut client = client(server.addr).await;
    let chat_stream = open(&mut client, Some(TOKEN), None)
        .await
        .expect("accepted");
    chat_stream
        .send(chat(" alice ", "  hello bridge  ", None))
        .await;
    let envelope = server.next_envelope().await;
    assert_eq!(envelope.transport, "robo_claw");
    assert_eq!(envelope.conversation_id, "default");
    assert_eq!(envelope.user_id, "alice");
    assert_eq!(envelope.text, "hello bridge");
    assert_eq!(envelope.timestamp, 1_700_000_000_123);
    assert!(envelope.is_direct && envelope.addressed);
    server.transport.stop().await;
}

#[tokio::test]
async fn a_client_with_the_token_in_its_first_message_is_heard() {
    let mut server = start(config()).await;
    let mut client = client(server.addr).await;
    let mut chat_stream = open(&mut client, None, None).await.expect("opened");
    let mut first = chat("alice", "first", Some("lab"));
    first.metadata.insert("auth_token".into(), TOKEN.into());
    chat_stream.send(first).await;
    // Later messages need no token: the stream is authenticated.
    chat_stream.send(chat("alice", "second", Some("lab"))).await;
    assert_eq!(server.next_envelope().await.text, "first");
    assert_eq!(server.next_envelope().await.text, "second");
    server.reply("lab", "answer").await;
    assert_eq!(chat_stream.next_text().await, "answer");
    server.transport.stop().await;
}

#[tokio::test]
async fn a_wrong_token_is_refused_with_unauthenticated_and_nothing_is_delivered() {
    let mut server = start(config()).await;
    let mut client = client(server.addr).await;

    // In the header: refused before the stream opens.
    let refused = open(&mut client, Some("wrong-token"), Some("lab")).await;
    let status = refused.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert!(!status.message().contains(TOKEN), "{}", status.message());

    // In the first message, or missing: the stream ends with UNAUTHENTICATED.
    for token in [Some("wrong-token"), None] {
        let mut chat_stream = open(&mut client, None, Some("lab")).await.expect("opened");
        let mut message = chat("mallory", "let me in", Some("lab"));
        if let Some(token) = token {
            message.metadata.insert("auth_token".into(), token.into());
        }
        chat_stream.send(message).await;
        let status = chat_stream.next().await.expect_err("refused");
        assert_eq!(status.code(), tonic::Code::Unauthenticated);
    }

    // A refused stream never joined its room, so a reply there is buffered, not written.
    server.reply("lab", "not for mallory").await;
    assert_eq!(
        server.transport.rooms(),
        [RoomStatus {
            room: "lab".into(),
            streams: 0,
            buffered: 1
        }]
    );

    // The refused messages never reached the session: the first it sees is this one.
    let good = open(&mut client, Some(TOKEN), None)
        .await
        .expect("accepted");
    good.send(chat("alice", "legit", None)).await;
    assert_eq!(server.next_envelope().await.text, "legit");
    assert!(
        server
            .transport
            .diagnose()
            .contains("refused 3 (wrong or missing token)"),
        "{}",
        server.transport.diagnose()
    );
    server.transport.stop().await;
}

#[tokio::test]
async fn without_a_token_every_client_is_heard_and_the_start_says_so() {
    let mut server = start(RoboClawConfig {
        token: None,
        ..config()
    })
    .await;
    let alert = server.next_alert().await;
    assert!(alert.contains("no peer token is set"), "{alert}");
    assert!(alert.contains("$PI_ROBO_CLAW_TOKEN"), "{alert}");
    assert!(server.transport.diagnose().contains("NO peer token"));
    let mut client = client(server.addr).await;
    let chat_stream = open(&mut client, None, None).await.expect("open server");
    chat_stream.send(chat("anyone", "hi", None)).await;
    assert_eq!(server.next_envelope().await.text, "hi");
    server.transport.stop().await;
}

#[tokio::test]
async fn a_reply_reaches_only_its_room() {
    let mut server = start(config()).await;
    let mut client = client(server.addr).await;
    let mut kitchen = open(&mut client, Some(TOKEN), Some("kitchen"))
        .await
        .expect("accepted");
    let mut garage = open(&mut client, Some(TOKEN), Some("garage"))
        .await
        .expect("accepted");
    server.wait_for_streams("kitchen", 1).await;
    server.wait_for_streams("garage", 1).await;

    server.reply("kitchen", "for the kitchen").await;
    server.reply("garage", "for the garage").await;
    // Each stream's first message is its own room's: the other room's reply never came.
    assert_eq!(kitchen.next_text().await, "for the kitchen");
    let to_garage = garage.next().await.expect("a message");
    assert_eq!(to_garage.content, "for the garage");
    assert_eq!(to_garage.sender_id, "robot");
    assert_eq!(
        to_garage.metadata.get("room_id").map(String::as_str),
        Some("garage")
    );

    // Inbound messages carry their room as the conversation.
    garage
        .send(chat("bob", "in the garage", Some("garage")))
        .await;
    let envelope = server.next_envelope().await;
    assert_eq!(envelope.conversation_id, "garage");
    server.transport.stop().await;
}

#[tokio::test]
async fn a_message_for_another_room_ends_the_stream_instead_of_being_misrouted() {
    let mut server = start(config()).await;
    let mut client = client(server.addr).await;
    let mut chat_stream = open(&mut client, Some(TOKEN), Some("a"))
        .await
        .expect("accepted");
    chat_stream
        .send(chat("alice", "wrong room", Some("b")))
        .await;
    let status = chat_stream.next().await.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert!(
        status.message().contains("one ChatStream per room"),
        "{}",
        status.message()
    );
    let other = open(&mut client, Some(TOKEN), None)
        .await
        .expect("accepted");
    other.send(chat("alice", "right room", None)).await;
    assert_eq!(server.next_envelope().await.text, "right room");
    server.transport.stop().await;
}

#[tokio::test]
async fn replies_wait_while_the_room_is_offline_and_arrive_in_order() {
    let server = start(config()).await;
    for text in ["one", "two", "three"] {
        server.reply("lab", text).await;
    }
    assert_eq!(
        server.transport.rooms(),
        [RoomStatus {
            room: "lab".into(),
            streams: 0,
            buffered: 3
        }]
    );
    let mut client = client(server.addr).await;
    let mut chat_stream = open(&mut client, Some(TOKEN), Some("lab"))
        .await
        .expect("accepted");
    server.wait_for_streams("lab", 1).await;
    server.reply("lab", "four").await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(chat_stream.next_text().await);
    }
    assert_eq!(seen, ["one", "two", "three", "four"]);
    assert!(
        server
            .transport
            .diagnose()
            .contains("\"lab\": 1 stream(s), 0 buffered")
    );
    server.transport.stop().await;
}

#[tokio::test]
async fn a_room_joined_by_its_first_message_gets_its_buffer_too() {
    let mut server = start(config()).await;
    server.reply("lab", "while you were away").await;
    let mut client = client(server.addr).await;
    let mut chat_stream = open(&mut client, Some(TOKEN), None)
        .await
        .expect("accepted");
    chat_stream.send(chat("alice", "back", Some("lab"))).await;
    assert_eq!(server.next_envelope().await.text, "back");
    assert_eq!(chat_stream.next_text().await, "while you were away");
    server.transport.stop().await;
}

#[tokio::test]
async fn an_overflowing_buffer_drops_the_oldest_and_reports_it() {
    let mut server = start(RoboClawConfig {
        buffer_size: 2,
        ..config()
    })
    .await;
    for text in ["one", "two", "three", "four"] {
        server.reply("lab", text).await;
    }
    let alert = server.next_alert().await;
    assert!(alert.contains("room \"lab\""), "{alert}");
    assert!(
        alert.contains("oldest replies are being dropped"),
        "{alert}"
    );
    // One alert per offline spell, not one per dropped reply: nothing else is waiting.
    assert!(server.inbound.try_recv().is_err());
    assert!(
        server
            .transport
            .diagnose()
            .contains("dropped 2 (buffer full)"),
        "{}",
        server.transport.diagnose()
    );
    let mut client = client(server.addr).await;
    let mut chat_stream = open(&mut client, Some(TOKEN), Some("lab"))
        .await
        .expect("accepted");
    assert_eq!(chat_stream.next_text().await, "three");
    assert_eq!(chat_stream.next_text().await, "four");
    server.transport.stop().await;
}

#[tokio::test]
async fn without_a_buffer_a_reply_to_an_empty_room_fails() {
    let server = start(RoboClawConfig {
        buffer_size: 0,
        ..config()
    })
    .await;
    let error = server
        .transport
        .send(support::reply("lab", "nobody listens"))
        .await
        .expect_err("refused");
    assert!(
        matches!(&error, TransportError::Failed(text) if text.contains("bufferSize is 0")),
        "{error:?}"
    );
    server.transport.stop().await;
}

/// Plays the bridge: answers `/status` in the room it came from, then finishes handling.
async fn answer_commands(mut server: support::Server) -> support::Server {
    let inbound = tokio::time::timeout(support::WAIT, server.inbound.recv())
        .await
        .expect("a command within the wait")
        .expect("open");
    let Inbound::Message { envelope, handled } = inbound else {
        panic!("expected a message");
    };
    assert_eq!(envelope.text, "/status");
    assert_eq!(envelope.user_id, "operator");
    server.reply(&envelope.conversation_id, "agent: idle").await;
    server.reply(&envelope.conversation_id, "paused: no").await;
    drop(handled);
    server
}

#[tokio::test]
async fn send_command_is_answered_with_what_the_bridge_replied() {
    let server = start(config()).await;
    let mut client = client(server.addr).await;
    // A stream of the same room does not see the command's answer: it belongs to the caller.
    let mut watcher = open(&mut client, Some(TOKEN), Some("ops"))
        .await
        .expect("accepted");
    server.wait_for_streams("ops", 1).await;
    let bridge = tokio::spawn(answer_commands(server));
    let response = client
        .send_command(request(
            chat("operator", "status", Some("ops")),
            Some(TOKEN),
            None,
        ))
        .await
        .expect("answered")
        .into_inner();
    let server = bridge.await.expect("the bridge task");
    assert!(response.success, "{response:?}");
    assert_eq!(response.message, "agent: idle\n\npaused: no");
    let result: serde_json::Value =
        serde_json::from_str(&response.result_json).expect("result_json is JSON");
    assert_eq!(result["room_id"], "ops");
    assert_eq!(result["replies"][1]["text"], "paused: no");
    assert_eq!(result["replies"][0]["kind"], "reply");
    server.reply("ops", "after the command").await;
    assert_eq!(watcher.next_text().await, "after the command");
    server.transport.stop().await;
}

#[tokio::test]
async fn send_command_needs_the_token_and_says_when_the_bridge_is_too_slow() {
    let mut server = start(RoboClawConfig {
        command_timeout: Duration::from_millis(300),
        ..config()
    })
    .await;
    let mut client = client(server.addr).await;
    let refused = client
        .send_command(request(
            chat("operator", "/status", None),
            Some("nope"),
            None,
        ))
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let mut with_token = chat("operator", "/status", None);
    with_token
        .metadata
        .insert("auth_token".into(), TOKEN.into());
    // The session holds the message without finishing it: the command times out.
    let call = client.send_command(request(with_token, None, None));
    let (response, held) = tokio::join!(call, server.inbound.recv());
    let response = response.expect("answered").into_inner();
    assert!(!response.success);
    assert!(
        response.message.contains("did not finish"),
        "{}",
        response.message
    );
    drop(held);
    server.transport.stop().await;
}

fn chunk(data: &[u8], filename: &str, last: bool) -> FileChunk {
    FileChunk {
        file_id: String::new(),
        data: data.to_vec(),
        is_last: last,
        filename: filename.to_owned(),
    }
}

#[tokio::test]
async fn an_upload_becomes_the_attachment_of_a_prompt() {
    let mut server = start(config()).await;
    let mut client = client(server.addr).await;
    let chunks = tokio_stream::iter(vec![
        chunk(&PNG[..5], "cat.png", false),
        chunk(&PNG[5..], "", true),
    ]);
    let uploaded = client
        .upload_file(request(chunks, Some(TOKEN), None))
        .await
        .expect("stored")
        .into_inner();
    assert!(uploaded.success, "{uploaded:?}");
    assert!(uploaded.file_id.starts_with("rcf_"), "{}", uploaded.file_id);

    let chat_stream = open(&mut client, Some(TOKEN), None)
        .await
        .expect("accepted");
    let mut message = chat("alice", "what is in this picture?", None);
    message
        .metadata
        .insert("file_id".into(), uploaded.file_id.clone());
    chat_stream.send(message).await;
    let envelope = server.next_envelope().await;
    let attachment = &envelope.attachments[0];
    assert_eq!(attachment.reference, uploaded.file_id);
    assert_eq!(attachment.kind, AttachmentKind::Image);
    assert_eq!(attachment.media_type, "image/png");
    assert_eq!(attachment.size_bytes, Some(PNG.len() as u64));
    assert_eq!(attachment.name.as_deref(), Some("cat.png"));

    let fetched = server
        .transport
        .fetch_attachment(&attachment.reference, 1024)
        .await
        .expect("fetched");
    assert_eq!(
        (fetched.media_type.as_str(), fetched.data.as_slice()),
        ("image/png", PNG)
    );
    let too_big = server
        .transport
        .fetch_attachment(&attachment.reference, 4)
        .await
        .expect_err("over the cap");
    assert!(
        too_big.to_string().contains("over the 4 byte limit"),
        "{too_big}"
    );
    let unknown = server
        .transport
        .fetch_attachment("rcf_unknown", 1024)
        .await
        .expect_err("unknown");
    assert!(unknown.to_string().contains("upload it again"), "{unknown}");
    server.transport.stop().await;
}

#[tokio::test]
async fn uploads_are_bounded_and_need_the_token() {
    let server = start(RoboClawConfig {
        max_upload_bytes: 8,
        ..config()
    })
    .await;
    let mut client = client(server.addr).await;
    let too_big = tokio_stream::iter(vec![chunk(b"12345", "a", false), chunk(b"6789", "", true)]);
    let status = client
        .upload_file(request(too_big, Some(TOKEN), None))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    let empty = tokio_stream::iter(vec![chunk(b"", "a", true)]);
    let status = client
        .upload_file(request(empty, Some(TOKEN), None))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    let no_token = tokio_stream::iter(vec![chunk(b"1", "a", true)]);
    let status = client
        .upload_file(request(no_token, None, None))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert!(server.transport.diagnose().contains("0 file(s) stored"));
    server.transport.stop().await;
}

#[tokio::test]
async fn an_offered_file_and_an_upload_can_be_downloaded() {
    let server = start(config()).await;
    let mut client = client(server.addr).await;
    let report: Vec<u8> = (0..200_000u32).map(|n| (n % 251) as u8).collect();
    let offered = server
        .transport
        .offer_file("report.bin", report.clone())
        .expect("offered");

    let mut chunks = client
        .download_file(request(
            DownloadRequest {
                file_id: offered.clone(),
            },
            Some(TOKEN),
            None,
        ))
        .await
        .expect("found")
        .into_inner();
    let mut received = Vec::new();
    let mut names = Vec::new();
    let mut last = false;
    while let Some(piece) = chunks.next().await {
        let piece = piece.expect("a chunk");
        assert!(!last, "nothing after the chunk marked is_last");
        received.extend_from_slice(&piece.data);
        names.push(piece.filename);
        last = piece.is_last;
    }
    assert!(last);
    assert_eq!(received, report);
    assert_eq!(names[0], "report.bin");

    let missing = client
        .download_file(request(
            DownloadRequest {
                file_id: "rcf_nothing".into(),
            },
            Some(TOKEN),
            None,
        ))
        .await
        .expect_err("not found");
    assert_eq!(missing.code(), tonic::Code::NotFound);
    let no_token = client
        .download_file(request(DownloadRequest { file_id: offered }, None, None))
        .await
        .expect_err("refused");
    assert_eq!(no_token.code(), tonic::Code::Unauthenticated);
    server.transport.stop().await;
}

#[tokio::test]
async fn the_bot_itself_is_only_the_configured_sender() {
    let mut server = start(RoboClawConfig {
        self_sender_id: "claw".into(),
        ..config()
    })
    .await;
    let mut client = client(server.addr).await;
    let chat_stream = open(&mut client, Some(TOKEN), None)
        .await
        .expect("accepted");
    chat_stream.send(chat("claw", "my own echo", None)).await;
    chat_stream
        .send(chat("robot", "a person called robot", None))
        .await;
    assert_eq!(server.next_envelope().await.text, "a person called robot");
    assert!(server.transport.diagnose().contains("ignored 1"));
    server.transport.stop().await;
}

#[tokio::test]
async fn stop_ends_the_streams_closes_the_port_and_a_restart_serves_again() {
    let mut server = start(config()).await;
    let mut client = client(server.addr).await;
    let mut chat_stream = open(&mut client, Some(TOKEN), Some("lab"))
        .await
        .expect("accepted");
    server.wait_for_streams("lab", 1).await;
    server.transport.stop().await;
    let ended = tokio::time::timeout(support::WAIT, chat_stream.incoming.message())
        .await
        .expect("the stream ends within the wait");
    assert!(!matches!(ended, Ok(Some(_))), "{ended:?}");
    assert!(server.transport.local_addr().is_none());
    assert!(server.transport.diagnose().starts_with("stopped"));
    assert!(
        tokio::net::TcpStream::connect(server.addr).await.is_err(),
        "the port is closed"
    );
    let (sink, inbound) = transport_core::inbound::channel(8);
    server.inbound = inbound;
    server.transport.start(sink).await.expect("restarts");
    let addr = server.transport.local_addr().expect("bound again");
    let mut client = support::client(addr).await;
    let chat_stream = open(&mut client, Some(TOKEN), None)
        .await
        .expect("accepted");
    chat_stream.send(chat("alice", "again", None)).await;
    assert_eq!(server.next_envelope().await.text, "again");
    server.transport.stop().await;
}

#[tokio::test]
async fn a_taken_port_fails_start_with_a_hint() {
    let server = start(config()).await;
    let second = transport_robo_claw::RoboClawTransport::new(RoboClawConfig {
        port: server.addr.port(),
        ..config()
    });
    let (sink, _inbound) = transport_core::inbound::channel(8);
    let error = second.start(sink).await.expect_err("port taken");
    assert!(error.to_string().contains("pick another"), "{error}");
    let identity = second.identify().await.expect("identified");
    assert_eq!(
        identity.lock_name,
        Some(format!("robo_claw-{}", server.addr.port()))
    );
    server.transport.stop().await;
}

#[tokio::test]
async fn diagnose_shows_rooms_and_never_the_token() {
    let server = start(config()).await;
    let mut client = client(server.addr).await;
    // A client that names a room after the token still cannot make diagnose show it.
    let _chat = open(&mut client, Some(TOKEN), Some(TOKEN))
        .await
        .expect("accepted");
    server.wait_for_streams(TOKEN, 1).await;
    server.reply("lab", "waiting").await;
    let line = server.transport.diagnose();
    assert!(
        line.contains(&format!("listening on {}", server.addr)),
        "{line}"
    );
    assert!(line.contains("plain TCP, no TLS"), "{line}");
    assert!(line.contains("peer token required"), "{line}");
    assert!(line.contains("\"lab\": 0 stream(s), 1 buffered"), "{line}");
    assert!(!line.contains(TOKEN), "{line}");
    server.transport.stop().await;
}

#[tokio::test]
async fn a_hostile_room_id_reaches_the_bridge_clean_and_its_replies_still_arrive() {
    let mut server = start(config()).await;
    let mut client = client(server.addr).await;
    let mut chat_stream = open(&mut client, Some(TOKEN), None)
        .await
        .expect("accepted");
    let hostile = "lab\u{1b}]52;c;ZXZpbA==\u{7}\u{202E}";
    chat_stream
        .send(chat("mal\u{202E}lory", "hello", Some(hostile)))
        .await;
    let envelope = server.next_envelope().await;
    assert_eq!(envelope.conversation_id, "lab]52;c;ZXZpbA==");
    assert_eq!(envelope.user_id, "mallory");
    // The stream joined the cleaned room, so the bridge's reply to it arrives.
    server.reply(&envelope.conversation_id, "answer").await;
    assert_eq!(chat_stream.next_text().await, "answer");
    server.transport.stop().await;
}
