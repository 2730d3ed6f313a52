//! Per-client tokens (docs/security.md#robo_claw-clients), tried the way an attacker would:
//! client A holds its own valid token and tries to speak as client B's sender, read B's
//! room, answer B's approvals and fetch B's upload. Real server on 127.0.0.1, real tonic
//! client.

use transport_core::Transport;
use transport_robo_claw::proto::{DownloadRequest, FileChunk};
use transport_robo_claw::{ClientConfig, RoboClawConfig, RoomStatus};

use crate::support::{TOKEN, chat, client, config, open, request, start};

const TOKEN_A: &str = "client-a-token-for-tests";
const TOKEN_B: &str = "client-b-token-for-tests";

fn client_config(name: &str, token: &str, senders: &[&str]) -> ClientConfig {
    ClientConfig {
        name: name.into(),
        token_env: format!("PI_RC_{}", name.to_uppercase()),
        token: Some(token.into()),
        senders: senders.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// Clients `a` (sender alice) and `b` (sender bob), and the old shared token still set.
fn two_clients() -> RoboClawConfig {
    RoboClawConfig {
        clients: vec![
            client_config("a", TOKEN_A, &["alice"]),
            client_config("b", TOKEN_B, &["bob"]),
        ],
        ..config()
    }
}

#[tokio::test]
async fn a_client_speaking_as_another_clients_sender_is_denied_and_nothing_is_delivered() {
    let mut server = start(two_clients()).await;
    let mut client = client(server.addr).await;

    let mut chat_stream = open(&mut client, Some(TOKEN_A), Some("lab"))
        .await
        .expect("A's own token is accepted");
    chat_stream.send(chat("bob", "/approve", Some("lab"))).await;
    let status = chat_stream.next().await.expect_err("denied");
    assert_eq!(status.code(), tonic::Code::PermissionDenied);
    assert!(status.message().contains("\"bob\""), "{}", status.message());
    assert!(!status.message().contains(TOKEN_A), "{}", status.message());

    // The same through SendCommand (how a remote /approve is sent in one call).
    let denied = client
        .send_command(request(
            chat("bob", "approve", Some("lab")),
            Some(TOKEN_A),
            None,
        ))
        .await
        .expect_err("denied");
    assert_eq!(denied.code(), tonic::Code::PermissionDenied);
    // A blank sender_id is "user", which A does not own either.
    let denied = client
        .send_command(request(chat("", "approve", None), Some(TOKEN_A), None))
        .await
        .expect_err("denied");
    assert_eq!(denied.code(), tonic::Code::PermissionDenied);

    // The shared token opens nothing once clients are configured.
    let refused = open(&mut client, Some(TOKEN), None)
        .await
        .expect_err("the shared token is refused");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    // Nothing of the above reached the session: the first envelope is B's own message.
    let b = open(&mut client, Some(TOKEN_B), None)
        .await
        .expect("accepted");
    b.send(chat("bob", "legit", None)).await;
    let envelope = server.next_envelope().await;
    assert_eq!(
        (envelope.user_id.as_str(), envelope.text.as_str()),
        ("bob", "legit")
    );
    let line = server.transport.diagnose();
    assert!(
        line.contains("denied 3 (sender not the client's)"),
        "{line}"
    );
    assert!(!line.contains(TOKEN_A) && !line.contains(TOKEN_B), "{line}");
    server.transport.stop().await;
}

#[tokio::test]
async fn a_client_naming_another_clients_room_gets_its_own_room_and_none_of_the_replies() {
    let mut server = start(two_clients()).await;
    let mut client = client(server.addr).await;
    let mut b = open(&mut client, Some(TOKEN_B), Some("lab"))
        .await
        .expect("B");
    let mut a = open(&mut client, Some(TOKEN_A), Some("lab"))
        .await
        .expect("A");
    server.wait_for_streams("b:lab", 1).await;
    server.wait_for_streams("a:lab", 1).await;

    // B's prompt lives in B's namespace; A's /approve in A's, as A's own sender: it can
    // never be the answer to B's approval request, which is B's conversation's.
    b.send(chat("bob", "run the tests", Some("lab"))).await;
    let from_b = server.next_envelope().await;
    assert_eq!(from_b.conversation_id, "b:lab");
    a.send(chat("alice", "/approve", Some("lab"))).await;
    let from_a = server.next_envelope().await;
    assert_eq!(
        (from_a.conversation_id.as_str(), from_a.user_id.as_str()),
        ("a:lab", "alice")
    );

    // The bridge asks B for approval; only B hears it, under the room name B knows.
    server
        .reply(&from_b.conversation_id, "approve `bash`? /approve")
        .await;
    server.reply(&from_a.conversation_id, "for A").await;
    let to_b = b.next().await.expect("B's reply");
    assert_eq!(to_b.content, "approve `bash`? /approve");
    assert_eq!(
        to_b.metadata.get("room_id").map(String::as_str),
        Some("lab")
    );
    // A's next message is its own reply: B's approval request never reached it.
    assert_eq!(a.next_text().await, "for A");
    assert_eq!(
        server.transport.rooms(),
        [
            RoomStatus {
                room: "a:lab".into(),
                streams: 1,
                buffered: 0
            },
            RoomStatus {
                room: "b:lab".into(),
                streams: 1,
                buffered: 0
            }
        ]
    );
    server.transport.stop().await;
}

fn chunk(data: &[u8], last: bool) -> FileChunk {
    FileChunk {
        file_id: String::new(),
        data: data.to_vec(),
        is_last: last,
        filename: "secret.txt".into(),
    }
}

#[tokio::test]
async fn a_client_cannot_download_or_attach_another_clients_upload() {
    let mut server = start(two_clients()).await;
    let mut client = client(server.addr).await;
    let uploaded = client
        .upload_file(request(
            tokio_stream::iter(vec![chunk(b"B's notes", true)]),
            Some(TOKEN_B),
            None,
        ))
        .await
        .expect("stored")
        .into_inner();

    let missing = client
        .download_file(request(
            DownloadRequest {
                file_id: uploaded.file_id.clone(),
            },
            Some(TOKEN_A),
            None,
        ))
        .await
        .expect_err("not A's");
    let unknown = client
        .download_file(request(
            DownloadRequest {
                file_id: "rcf_00000000000000000000000000000000".into(),
            },
            Some(TOKEN_A),
            None,
        ))
        .await
        .expect_err("unknown");
    // Alike, so A cannot tell B's file from one that does not exist.
    assert_eq!(missing.code(), tonic::Code::NotFound);
    assert_eq!(unknown.code(), tonic::Code::NotFound);

    let mut a = open(&mut client, Some(TOKEN_A), None).await.expect("A");
    let mut message = chat("alice", "summarise this", None);
    message
        .metadata
        .insert("file_id".into(), uploaded.file_id.clone());
    a.send(message).await;
    assert_eq!(
        a.next().await.expect_err("refused").code(),
        tonic::Code::NotFound
    );

    // B still reads its own file, and the session saw nothing from A.
    let mut own = client
        .download_file(request(
            DownloadRequest {
                file_id: uploaded.file_id,
            },
            Some(TOKEN_B),
            None,
        ))
        .await
        .expect("B's own")
        .into_inner();
    let first = own.message().await.expect("a chunk").expect("data");
    assert_eq!(first.data, b"B's notes");
    let b = open(&mut client, Some(TOKEN_B), None).await.expect("B");
    b.send(chat("bob", "first seen", None)).await;
    assert_eq!(server.next_envelope().await.text, "first seen");
    server.transport.stop().await;
}

#[tokio::test]
async fn the_start_warns_about_the_ignored_shared_token_and_a_client_without_one() {
    let mut config = two_clients();
    config.clients[1].token = None;
    let mut server = start(config).await;
    let first = server.next_alert().await;
    assert!(
        first.contains("shared peer token in $PI_ROBO_CLAW_TOKEN is ignored"),
        "{first}"
    );
    let second = server.next_alert().await;
    assert!(
        second.contains("client \"b\" cannot connect: $PI_RC_B"),
        "{second}"
    );
    server.transport.stop().await;
}

#[tokio::test]
async fn two_clients_with_the_same_token_fail_the_start() {
    let transport = transport_robo_claw::RoboClawTransport::new(RoboClawConfig {
        clients: vec![
            client_config("a", TOKEN_A, &["alice"]),
            client_config("b", TOKEN_A, &["bob"]),
        ],
        ..config()
    });
    let (sink, _inbound) = transport_core::inbound::channel(4);
    let error = transport.start(sink).await.expect_err("refused");
    assert!(error.to_string().contains("the same token"), "{error}");
    assert!(!error.to_string().contains(TOKEN_A), "{error}");
}
