//! The Slack transport against the loopback Slack (a real WebSocket and real HTTP on
//! 127.0.0.1): the conformance kit (I41), the Socket Mode handshake, acknowledgements,
//! refreshes, deduplication, every `disconnect` reason, Web API errors and rate limits,
//! attachments and token hygiene (I18).
//!
//! No test sleeps to wait for something: each waits on the server's change hook or on the
//! inbound stream, bounded by a timeout.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use transport_core::inbound::channel;
use transport_core::retry::RetryPolicy;
use transport_core::{
    Button, Envelope, Inbound, InboundStream, OutboundKind, OutboundMessage, Reaction, Transport,
    TransportError,
};
use transport_slack::{SlackConfig, SlackTransport, SocketTimings};
use transport_testing::conformance::{Subject, Violation, run_all};
use transport_testing::slack::{
    ACK_DEADLINE, ConformanceSlack, EphemeralRecord, ServedFile, SlackFailure, SlackServer,
    TEST_BOT_USER_ID, app_mention, block_actions, channel_message, im_message, in_thread,
};

/// Long enough for a loaded 2-core machine, short enough that a hang fails fast.
const WAIT: Duration = Duration::from_secs(10);

fn fast_policy(max_attempts: Option<u32>) -> RetryPolicy {
    RetryPolicy {
        initial: Duration::from_millis(10),
        max: Duration::from_millis(40),
        max_platform_wait: Duration::from_secs(5),
        max_attempts,
    }
}

fn config(server: &SlackServer) -> SlackConfig {
    let mut config = SlackConfig::new(server.bot_token(), server.app_token(), server.base_url());
    config.request_timeout = Duration::from_secs(5);
    config.download_timeout = Duration::from_secs(5);
    config.socket = SocketTimings {
        hello_timeout: Duration::from_secs(5),
        keepalive: Duration::from_secs(5),
        close_timeout: Duration::from_secs(5),
    };
    config.request_policy = fast_policy(Some(3));
    config.reconnect_policy = fast_policy(None);
    config.fixed_jitter = Some(0.0);
    config
}

fn transport(config: SlackConfig) -> SlackTransport {
    SlackTransport::new(config).expect("a valid config")
}

fn reply(
    conversation: &str,
    thread: Option<&str>,
    text: &str,
    edit: Option<&str>,
) -> OutboundMessage {
    OutboundMessage {
        conversation_id: conversation.to_owned(),
        thread_id: thread.map(str::to_owned),
        kind: OutboundKind::Reply,
        text: text.to_owned(),
        edit_key: edit.map(str::to_owned),
        buttons: Vec::new(),
        answers_press: None,
        reply_to: None,
    }
}

async fn started(transport: &SlackTransport, capacity: usize) -> InboundStream {
    let (sink, stream) = channel(capacity);
    transport.start(sink).await.expect("start");
    stream
}

async fn next(stream: &mut InboundStream) -> Inbound {
    tokio::time::timeout(WAIT, stream.recv())
        .await
        .expect("something arrives in time")
        .expect("the stream is open")
}

async fn next_envelope(stream: &mut InboundStream) -> Envelope {
    match next(stream).await {
        Inbound::Message { envelope, .. } => envelope,
        Inbound::Alert { text, .. } => panic!("expected a message, got the alert {text:?}"),
    }
}

async fn next_alert(stream: &mut InboundStream) -> String {
    match next(stream).await {
        Inbound::Alert { transport, text } => {
            assert_eq!(transport, "slack");
            text
        }
        Inbound::Message { envelope, .. } => panic!("expected an alert, got {envelope:?}"),
    }
}

async fn wait(server: &SlackServer, what: &str, done: impl FnMut(&SlackServer) -> bool) {
    assert!(
        server.wait_until(WAIT, done).await,
        "timed out waiting for {what}"
    );
}

/// The newest connection (the one that said hello last).
fn connection(server: &SlackServer) -> u64 {
    server.latest_connection().expect("an open connection")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_kit_passes_on_the_loopback_server() {
    let violations = run_all(|| async {
        let server = Arc::new(SlackServer::start().await);
        let transport = transport(config(&server));
        Subject {
            transport: Arc::new(transport),
            platform: Box::new(ConformanceSlack::new(server)),
        }
    })
    .await;
    assert_eq!(violations, Vec::<Violation>::new());
}

#[tokio::test]
async fn start_checks_the_bot_token_opens_a_socket_with_the_app_token_and_waits_for_hello() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let identity = transport.identify().await.expect("identify");
    assert_eq!(identity.bot_id, TEST_BOT_USER_ID);
    assert_eq!(identity.lock_name.as_deref(), Some("slack-U0TESTBOT"));

    let _stream = started(&transport, 8).await;
    // auth.test once (identify's answer is kept), one ticket, one connection with hello.
    assert_eq!(server.calls("auth.test"), 1);
    assert_eq!(server.calls("apps.connections.open"), 1);
    assert_eq!(server.timeline()[..2], ["open 1", "hello 1"]);
    let line = transport.diagnose();
    assert!(line.contains("bot @pi (U0TESTBOT) in Loopback"), "{line}");
    assert!(
        line.contains("socket connected (1 open connection)"),
        "{line}"
    );
    assert!(line.contains("typing: none"), "{line}");

    transport.stop().await;
    wait(&server, "the client closing its socket", |server| {
        server.connections()[0].closed_by_client
    })
    .await;
    transport.stop().await;
    assert!(transport.diagnose().contains("socket stopped"));
}

#[tokio::test]
async fn a_connection_without_hello_is_given_up_and_a_new_ticket_is_used() {
    let server = SlackServer::start().await;
    server.set_auto_hello(false);
    let mut config = config(&server);
    config.socket.hello_timeout = Duration::from_millis(300);
    let transport = transport(config);
    // No hello: start does not fail (it may be a slow network); the loop tries again.
    let mut stream = started(&transport, 8).await;
    wait(&server, "a second ticket", |server| {
        server.calls("apps.connections.open") >= 2
    })
    .await;
    server.set_auto_hello(true);
    wait(&server, "a connection with hello", |server| {
        server
            .timeline()
            .iter()
            .any(|line| line.starts_with("hello"))
    })
    .await;
    let id = connection(&server);
    let ts = server.new_ts();
    server.send_event(id, im_message("D1", "U1", &ts, "after hello"));
    assert_eq!(next_envelope(&mut stream).await.text, "after hello");
    assert!(transport.diagnose().contains("no hello within"));
    transport.stop().await;
}

#[tokio::test]
async fn every_envelope_is_acknowledged_at_once_before_the_session_handles_it() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    // Room for one message only, and nobody reads yet: the session is busy.
    let mut stream = started(&transport, 1).await;
    let id = connection(&server);
    let mut envelopes = Vec::new();
    for n in 1..=3 {
        let ts = server.new_ts();
        envelopes.push(
            server
                .send_event(id, im_message("D1", "U1", &ts, &format!("m{n}")))
                .expect("sent"),
        );
    }
    wait(&server, "three acknowledgements", |server| {
        server.acks().len() == 3
    })
    .await;
    for (ack, envelope) in server.acks().iter().zip(&envelopes) {
        assert_eq!(&ack.envelope_id, envelope);
        let after = ack.after.expect("an envelope the server sent");
        assert!(after < ACK_DEADLINE, "acknowledged after {after:?}");
    }
    // Every ack came while the session had taken at most the first message.
    for n in 1..=3 {
        assert_eq!(next_envelope(&mut stream).await.text, format!("m{n}"));
    }
    let line = transport.diagnose();
    assert!(line.contains("envelopes acked 3, received 3"), "{line}");
    transport.stop().await;
}

#[tokio::test]
async fn a_refresh_opens_the_new_connection_before_the_old_one_closes_and_loses_nothing() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport, 8).await;
    let old = connection(&server);

    // The new ticket is held, so the gap between the warning and the new connection is
    // as long as the test wants.
    server.hold_connections_open(true);
    server.disconnect(old, "warning");
    wait(&server, "a new ticket asked for", |server| {
        server.calls("apps.connections.open") == 2
    })
    .await;
    let ts = server.new_ts();
    server.send_event(old, im_message("D1", "U1", &ts, "in the gap"));
    assert_eq!(next_envelope(&mut stream).await.text, "in the gap");
    assert!(
        server.connections()[0].open,
        "the old connection is still open"
    );
    assert!(transport.diagnose().contains("socket refreshing"));

    server.hold_connections_open(false);
    wait(
        &server,
        "the old connection closed by the client",
        |server| {
            server
                .connections()
                .first()
                .is_some_and(|c| c.closed_by_client)
        },
    )
    .await;
    let timeline = server.timeline();
    let position = |line: &str| timeline.iter().position(|l| l == line).expect(line);
    assert!(
        position("hello 2") < position("client closed 1"),
        "{timeline:?}"
    );
    let new = connection(&server);
    assert_eq!(new, 2);
    let ts = server.new_ts();
    server.send_event(new, im_message("D1", "U1", &ts, "on the new one"));
    assert_eq!(next_envelope(&mut stream).await.text, "on the new one");

    // refresh_requested is handled the same way.
    server.disconnect(new, "refresh_requested");
    wait(&server, "connection 3 and 2 closed", |server| {
        server.open_connections() == [3]
    })
    .await;
    let line = transport.diagnose();
    assert!(line.contains("connections opened 3, refreshes 2"), "{line}");
    assert!(line.contains("last disconnect refresh_requested"), "{line}");
    assert!(line.contains("socket connected"), "{line}");
    transport.stop().await;
}

#[tokio::test]
async fn a_connection_slack_drops_is_replaced_at_once_with_a_new_ticket() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport, 8).await;
    server.close(connection(&server));
    wait(&server, "a second connection", |server| {
        server.open_connections() == [2]
    })
    .await;
    assert_eq!(server.calls("apps.connections.open"), 2);
    let ts = server.new_ts();
    server.send_event(2, im_message("D1", "U1", &ts, "still here"));
    assert_eq!(next_envelope(&mut stream).await.text, "still here");
    transport.stop().await;
}

#[tokio::test]
async fn a_redelivered_envelope_is_acknowledged_again_but_handled_once() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport, 8).await;
    let id = connection(&server);
    let ts = server.new_ts();
    let first = server
        .send_event(id, im_message("D1", "U1", &ts, "once"))
        .expect("sent");
    let again = server.redeliver(&first, None).expect("redelivered");
    let ts = server.new_ts();
    server.send_event(id, im_message("D1", "U1", &ts, "next"));
    assert_eq!(next_envelope(&mut stream).await.text, "once");
    assert_eq!(next_envelope(&mut stream).await.text, "next");
    // Both envelopes were acknowledged, or Slack would keep redelivering.
    wait(&server, "both envelopes acknowledged", |server| {
        server.acked(&first) && server.acked(&again)
    })
    .await;
    let line = transport.diagnose();
    assert!(
        line.contains("received 2, ignored 0, duplicates 1"),
        "{line}"
    );
    assert!(line.contains("a redelivery"), "{line}");
    assert!(stream.try_recv().is_err(), "nothing else arrived");
    transport.stop().await;
}

#[tokio::test]
async fn an_app_mention_and_its_message_twin_are_one_message_in_either_order() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport, 8).await;
    let id = connection(&server);
    let text = format!("<@{TEST_BOT_USER_ID}> status");

    let ts = server.new_ts();
    server.send_event(id, app_mention("C1", "U1", &ts, &text));
    server.send_event(id, channel_message("C1", "U1", &ts, &text));
    let ts2 = server.new_ts();
    server.send_event(id, channel_message("C1", "U1", &ts2, &text));
    server.send_event(id, app_mention("C1", "U1", &ts2, &text));
    let ts3 = server.new_ts();
    server.send_event(id, channel_message("C1", "U1", &ts3, "end"));

    for expected in [&ts, &ts2] {
        let envelope = next_envelope(&mut stream).await;
        assert_eq!(envelope.text, "status");
        assert!(envelope.addressed);
        assert_eq!(envelope.thread_id.as_deref(), Some(expected.as_str()));
    }
    assert_eq!(next_envelope(&mut stream).await.text, "end");
    let line = transport.diagnose();
    assert!(line.contains("duplicates 2"), "{line}");
    transport.stop().await;
}

#[tokio::test]
async fn link_disabled_stops_receiving_with_an_alert_and_a_diagnosis() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport, 8).await;
    server.disconnect(connection(&server), "link_disabled");
    let alert = next_alert(&mut stream).await;
    assert!(alert.contains("link_disabled"), "{alert}");
    assert!(alert.contains("Socket Mode"), "{alert}");
    wait(&server, "the connection closed", |server| {
        server.open_connections().is_empty()
    })
    .await;
    assert_eq!(server.calls("apps.connections.open"), 1, "no reconnect");
    assert!(transport.diagnose().contains("stopped receiving"));
    // Sending still works: only receiving stopped.
    transport
        .send(reply("D1", None, "still here", None))
        .await
        .expect("send");
    transport.stop().await;

    // At start, the same reason fails start itself (I16).
    let server = SlackServer::start().await;
    server.set_auto_hello(false);
    let transport = Arc::new(self::transport(config(&server)));
    let starting = tokio::spawn({
        let transport = transport.clone();
        async move {
            let (sink, _stream) = channel(4);
            transport.start(sink).await
        }
    });
    wait(&server, "a connection", |server| {
        server.latest_connection().is_some()
    })
    .await;
    server.disconnect(connection(&server), "link_disabled");
    let error = starting.await.expect("task").expect_err("start fails");
    assert!(error.to_string().contains("link_disabled"), "{error}");
}

#[tokio::test]
async fn too_many_websockets_backs_off_and_connects_again() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport, 8).await;
    let first = connection(&server);
    server.disconnect(first, "too_many_websockets");
    wait(&server, "a new connection after the backoff", |server| {
        server.open_connections() == [2]
    })
    .await;
    let line = transport.diagnose();
    assert!(
        line.contains("last disconnect too_many_websockets"),
        "{line}"
    );
    let ts = server.new_ts();
    server.send_event(2, im_message("D1", "U1", &ts, "back"));
    assert_eq!(next_envelope(&mut stream).await.text, "back");

    // Refused on a fresh connection: counted as a failure, with the reason in doctor.
    server.set_auto_hello(false);
    server.close(2);
    wait(&server, "connection 3", |server| {
        server.open_connections() == [3]
    })
    .await;
    server.disconnect(3, "too_many_websockets");
    server.set_auto_hello(true);
    wait(&server, "connection 4 with hello", |server| {
        server.timeline().contains(&"hello 4".to_owned())
    })
    .await;
    assert!(transport.diagnose().contains("too_many_websockets"));
    transport.stop().await;
}

#[tokio::test]
async fn ok_false_is_an_error_and_a_refused_edit_is_edit_rejected() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport, 8).await;

    server.fail_next(
        "chat.postMessage",
        SlackFailure::Error("not_in_channel".into()),
    );
    let error = transport
        .send(reply("C1", None, "hi", None))
        .await
        .expect_err("refused");
    assert!(
        matches!(&error, TransportError::Failed(text) if text.contains("not_in_channel") && text.contains("/invite")),
        "{error:?}"
    );
    assert_eq!(
        server.calls("chat.postMessage"),
        1,
        "a refusal is not retried"
    );

    // Slack's own failures with HTTP 200 are retried like a 5xx.
    server.fail_next(
        "chat.postMessage",
        SlackFailure::Error("internal_error".into()),
    );
    server.fail_next("chat.postMessage", SlackFailure::Status(503));
    let receipt = transport
        .send(reply("C1", None, "card v1", None))
        .await
        .expect("retried");
    assert_eq!(server.calls("chat.postMessage"), 4);

    for code in ["message_not_found", "cant_update_message"] {
        server.fail_next("chat.update", SlackFailure::Error(code.into()));
        let error = transport
            .send(reply("C1", None, "card v2", receipt.edit_key.as_deref()))
            .await
            .expect_err("refused edit");
        assert!(
            matches!(&error, TransportError::EditRejected(text) if text.contains(code)),
            "{error:?}"
        );
    }
    // An edit of a message that never existed is refused by Slack itself.
    let error = transport
        .send(reply("C1", None, "v2", Some("1.000001")))
        .await
        .expect_err("unknown message");
    assert!(
        matches!(error, TransportError::EditRejected(_)),
        "{error:?}"
    );
    let error = transport
        .send(reply("C1", None, "v2", Some("not-a-ts")))
        .await
        .expect_err("not a ts");
    assert!(
        matches!(error, TransportError::EditRejected(_)),
        "{error:?}"
    );

    server.fail_next(
        "chat.postMessage",
        SlackFailure::Error("missing_scope".into()),
    );
    let error = transport
        .send(reply("C1", None, "hi", None))
        .await
        .expect_err("scope");
    assert!(error.to_string().contains("scope"), "{error}");
    let line = transport.diagnose();
    assert!(
        line.contains("last error: Slack chat.postMessage needs the scope"),
        "{line}"
    );
    transport.stop().await;
}

#[tokio::test]
async fn a_429_becomes_rate_limited_with_the_retry_after_wait() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport, 8).await;
    server.fail_next("chat.postMessage", SlackFailure::RateLimited(3));
    let error = transport
        .send(reply("C1", None, "hi", None))
        .await
        .expect_err("429");
    assert_eq!(
        error,
        TransportError::RateLimited {
            retry_after_ms: 3_000
        }
    );
    assert_eq!(
        server.calls("chat.postMessage"),
        1,
        "the outbox waits, not the transport"
    );

    let receipt = transport
        .send(reply("C1", None, "card v1", None))
        .await
        .expect("sent");
    server.fail_next("chat.update", SlackFailure::RateLimited(7));
    let error = transport
        .send(reply("C1", None, "card v2", receipt.edit_key.as_deref()))
        .await
        .expect_err("429");
    assert_eq!(
        error,
        TransportError::RateLimited {
            retry_after_ms: 7_000
        }
    );
    assert!(transport.diagnose().contains("rate limited 2"));

    // apps.connections.open rate limited: the socket waits as told, then connects.
    server.fail_next("apps.connections.open", SlackFailure::RateLimited(1));
    server.close(connection(&server));
    wait(&server, "a connection after the wait", |server| {
        server.open_connections() == [2]
    })
    .await;
    assert_eq!(server.calls("apps.connections.open"), 3);
    transport.stop().await;
}

#[tokio::test]
async fn replies_go_into_the_thread_as_mrkdwn_without_unfurls_and_cards_are_updated() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport, 8).await;
    // The conversation id carries the thread; a thread id that is not a ts is ignored.
    transport
        .send(reply("C1/1700000000.000001", None, "in the thread", None))
        .await
        .expect("send");
    transport
        .send(reply("C1", Some("1700000000.000002"), "by thread id", None))
        .await
        .expect("send");
    transport
        .send(reply("D1", Some("conformance-thread"), "top level", None))
        .await
        .expect("send");
    let posted = server.posted();
    let threads: Vec<_> = posted
        .iter()
        .map(|p| (p.channel.as_str(), p.thread_ts.as_deref()))
        .collect();
    assert_eq!(
        threads,
        [
            ("C1", Some("1700000000.000001")),
            ("C1", Some("1700000000.000002")),
            ("D1", None)
        ]
    );
    let request = &server.requests("chat.postMessage")[0];
    assert_eq!(request["mrkdwn"], json!(true));
    assert_eq!(request["unfurl_links"], json!(false));

    let card = transport
        .send(reply("C1/1700000000.000001", None, "*working*", None))
        .await
        .expect("card");
    assert_eq!(card.edit_key.as_deref(), Some(card.message_id.as_str()));
    transport
        .send(reply(
            "C1/1700000000.000001",
            None,
            "*done*",
            card.edit_key.as_deref(),
        ))
        .await
        .expect("edit");
    let updated = server.updated();
    assert_eq!(updated.len(), 1);
    assert_eq!(
        (updated[0].channel.as_str(), updated[0].text.as_str()),
        ("C1", "*done*")
    );
    assert_eq!(updated[0].ts, card.message_id);
    // No typing indicator exists, and asking for one does nothing and never fails.
    transport.typing("C1", None).await.expect("typing");
    transport.stop().await;
}

#[tokio::test]
async fn refused_tokens_name_their_variable_and_never_show() {
    let server = SlackServer::start().await;
    let mut wrong = config(&server);
    wrong.bot_token = "xoxb-9-9-NOTtheRightBotToken".to_owned();
    wrong.bot_token_env = "MY_SLACK_BOT".to_owned();
    let refused = transport(wrong);
    let error = refused
        .identify()
        .await
        .expect_err("invalid_auth")
        .to_string();
    assert!(
        error.contains("$MY_SLACK_BOT") && error.contains("invalid_auth"),
        "{error}"
    );
    assert!(!error.contains("NOTtheRight"), "{error}");

    let mut wrong = config(&server);
    wrong.app_token = "xapp-1-A9-9-NOTtheRightAppToken".to_owned();
    let refused = transport(wrong);
    let (sink, _stream) = channel(4);
    let error = refused
        .start(sink)
        .await
        .expect_err("invalid_auth")
        .to_string();
    assert!(
        error.contains("$PI_SLACK_APP_TOKEN") && error.contains("App-Level Tokens"),
        "{error}"
    );
    let line = refused.diagnose();
    assert!(line.contains("stopped receiving"), "{line}");
    for secret in ["NOTtheRight", &server.bot_token(), &server.app_token()] {
        assert!(!line.contains(secret) && !error.contains(secret), "{line}");
    }
    // A failed start can be tried again once the token is fixed.
    let (sink, _stream) = channel(4);
    assert!(refused.start(sink).await.is_err());

    // Revoked while running: the next reconnect is refused, with an alert.
    let transport = transport(config(&server));
    let mut stream = started(&transport, 8).await;
    server.change_app_token("xapp-1-A0-0-regenerated");
    server.close(connection(&server));
    let alert = next_alert(&mut stream).await;
    assert!(
        alert.contains("refused the app-level token in $PI_SLACK_APP_TOKEN"),
        "{alert}"
    );
    assert!(transport.diagnose().contains("stopped receiving"));
    transport.stop().await;
}

#[tokio::test]
async fn attachments_are_capped_on_bytes_received_and_rechecked_and_never_leave_slack() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport, 8).await;
    let png = {
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        bytes.extend_from_slice(&[0; 56]);
        bytes
    };
    let honest = server.serve_file("a.png", ServedFile::new(Some("image/png"), png.clone()));
    let fetched = transport
        .fetch_attachment(&honest, 1_000)
        .await
        .expect("fetched");
    assert_eq!(
        (fetched.media_type.as_str(), fetched.data.len()),
        ("image/png", 64)
    );

    // The type is re-checked on the bytes when the server does not say (I25).
    let sniffed = server.serve_file(
        "b",
        ServedFile::new(Some("application/octet-stream"), png.clone()),
    );
    let fetched = transport
        .fetch_attachment(&sniffed, 1_000)
        .await
        .expect("fetched");
    assert_eq!(fetched.media_type, "image/png");

    // Over the cap: refused by Content-Length, and by counting when none is sent (I19).
    let error = transport
        .fetch_attachment(&honest, 10)
        .await
        .expect_err("too big");
    assert!(
        error.to_string().contains("over the 10 byte limit"),
        "{error}"
    );
    let mut chunked = ServedFile::new(Some("image/png"), vec![7; 5_000]);
    chunked.content_length = false;
    let chunked = server.serve_file("c.png", chunked);
    let error = transport
        .fetch_attachment(&chunked, 1_500)
        .await
        .expect_err("too big");
    assert!(error.to_string().contains("stopped there"), "{error}");

    // A redirect within Slack is followed; one elsewhere is not, nor is a foreign URL.
    let inside = server.serve_file("d", ServedFile::redirect(&honest));
    assert!(transport.fetch_attachment(&inside, 1_000).await.is_ok());
    let outside = server.serve_file("e", ServedFile::redirect("https://evil.example/steal"));
    let error = transport
        .fetch_attachment(&outside, 1_000)
        .await
        .expect_err("off Slack");
    assert!(
        error.to_string().contains("https://evil.example"),
        "{error}"
    );
    let error = transport
        .fetch_attachment("https://evil.example/files/a.png", 1_000)
        .await
        .expect_err("not Slack");
    assert!(error.to_string().contains("never left Slack"), "{error}");

    // Slack's sign-in page (what a missing files:read scope gets) is not an attachment.
    server.change_bot_token("xoxb-0-0-another");
    let error = transport
        .fetch_attachment(&honest, 1_000)
        .await
        .expect_err("html");
    assert!(error.to_string().contains("files:read"), "{error}");
    transport.stop().await;
}

#[tokio::test]
async fn thread_replies_top_level_channel_messages_and_ims_keep_their_conversations() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport, 8).await;
    let id = connection(&server);
    let root = server.new_ts();
    server.send_event(
        id,
        channel_message("C1", "U1", &root, &format!("<@{TEST_BOT_USER_ID}> go")),
    );
    let reply_ts = server.new_ts();
    server.send_event(
        id,
        in_thread(channel_message("C1", "U1", &reply_ts, "more"), &root),
    );
    let dm = server.new_ts();
    server.send_event(id, im_message("D1", "U1", &dm, "hi"));
    let first = next_envelope(&mut stream).await;
    let second = next_envelope(&mut stream).await;
    let third = next_envelope(&mut stream).await;
    assert_eq!(first.conversation_id, format!("C1/{root}"));
    assert_eq!(second.conversation_id, first.conversation_id);
    assert_eq!(second.thread_id.as_deref(), Some(root.as_str()));
    assert!(
        !second.addressed,
        "a thread reply without a mention is not addressed"
    );
    assert_eq!(
        (third.conversation_id.as_str(), third.thread_id),
        ("D1", None)
    );
    assert!(third.is_direct && third.addressed);
    transport.stop().await;
}

fn approval_buttons() -> Vec<Button> {
    [("Approve once", "/approve qd4k"), ("Deny", "/deny qd4k")]
        .iter()
        .map(|(label, command)| Button {
            label: (*label).to_owned(),
            command: (*command).to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn buttons_go_out_as_block_kit_and_an_update_without_them_removes_them() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport, 4).await;
    let mut request = reply("C1/1700000000.000001", None, "Approval needed (qd4k)", None);
    request.buttons = approval_buttons();
    let receipt = transport.send(request).await.expect("sent");
    let posted = &server.posted()[0];
    assert_eq!(
        posted.text, "Approval needed (qd4k)",
        "the fallback text stays"
    );
    let blocks = posted.blocks.clone().expect("blocks");
    assert_eq!(blocks[0]["type"], "section");
    assert_eq!(blocks[1]["type"], "actions");
    assert_eq!(blocks[1]["elements"][0]["value"], "/approve qd4k");
    assert_eq!(blocks[1]["elements"][1]["value"], "/deny qd4k");
    transport
        .send(reply("C1", None, "plain", None))
        .await
        .expect("sent");
    assert_eq!(server.posted()[1].blocks, None, "no buttons, no blocks");
    transport
        .send(reply(
            "C1/1700000000.000001",
            None,
            "Approved once by slack:U1",
            receipt.edit_key.as_deref(),
        ))
        .await
        .expect("updated");
    assert_eq!(
        server.updated()[0].blocks,
        Some(json!([])),
        "the buttons are removed"
    );
    transport.stop().await;
}

#[tokio::test]
async fn a_click_is_acknowledged_on_the_socket_and_becomes_the_command_from_the_clicker() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    // Room for one message only, and nobody reads yet: the ack must not wait for the session.
    let mut stream = started(&transport, 1).await;
    let id = connection(&server);
    let root = "1700000000.000001";
    let clicks: Vec<String> = [
        ("C1", Some(root), "U1", "/approve qd4k"),
        ("D1", None, "U2", "/deny qd4k"),
    ]
    .iter()
    .enumerate()
    .map(|(n, (channel, thread, user, value))| {
        let payload = block_actions(
            channel,
            user,
            "1700000000.000009",
            *thread,
            value,
            &format!("1700000001.00000{n}"),
        );
        server
            .send_envelope(id, "interactive", payload, 0)
            .expect("sent")
    })
    .collect();
    wait(&server, "both acknowledgements", |server| {
        clicks.iter().all(|click| server.acked(click))
    })
    .await;
    for ack in server.acks() {
        let after = ack.after.expect("an envelope the server sent");
        assert!(after < ACK_DEADLINE, "acknowledged after {after:?}");
    }
    let first = next_envelope(&mut stream).await;
    assert_eq!(first.text, "/approve qd4k");
    assert_eq!(first.user_id, "U1", "the clicker");
    assert_eq!(
        first.conversation_id,
        format!("C1/{root}"),
        "the request's thread"
    );
    assert_eq!(first.thread_id.as_deref(), Some(root));
    assert!(first.addressed && !first.is_direct);
    let second = next_envelope(&mut stream).await;
    assert_eq!(
        (
            second.text.as_str(),
            second.conversation_id.as_str(),
            second.is_direct
        ),
        ("/deny qd4k", "D1", true)
    );
    assert!(server.ephemeral().is_empty(), "taken clicks get no refusal");
    transport.stop().await;
}

#[tokio::test]
async fn a_refused_click_is_told_only_to_the_clicker_and_never_reaches_the_session() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport, 4).await;
    let id = connection(&server);
    let root = "1700000000.000001";
    let forged = block_actions(
        "C1",
        "U1",
        "1700000000.000009",
        Some(root),
        "rm -rf /",
        "1700000001.000001",
    );
    server
        .send_envelope(id, "interactive", forged.clone(), 0)
        .expect("sent");
    // Redelivered: answered once, not twice.
    let again = server
        .send_envelope(id, "interactive", forged, 1)
        .expect("sent");
    wait(&server, "the redelivery's ack", |server| {
        server.acked(&again)
    })
    .await;
    let ts = server.new_ts();
    server.send_event(id, im_message("D1", "U1", &ts, "after"));
    assert_eq!(next_envelope(&mut stream).await.text, "after");
    wait(&server, "the ephemeral refusal", |server| {
        !server.ephemeral().is_empty()
    })
    .await;
    let refusal = &server.ephemeral()[0];
    assert_eq!(
        (
            refusal.channel.as_str(),
            refusal.user.as_str(),
            refusal.thread_ts.as_deref()
        ),
        ("C1", "U1", Some(root))
    );
    assert!(refusal.text.contains("decided nothing"), "{refusal:?}");
    assert_eq!(server.ephemeral().len(), 1);
    transport.stop().await;
}

/// The bridge answers a taken click privately: `chat.postEphemeral` to the clicker, in the
/// click's channel and thread, never a message in the channel; a press the transport never
/// handed out is refused without a call.
#[tokio::test]
async fn the_bridge_answers_a_click_privately_with_chat_post_ephemeral() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport, 4).await;
    let id = connection(&server);
    let root = "1700000000.000001";
    let click = block_actions(
        "C1",
        "U7",
        "1700000000.000009",
        Some(root),
        "/approve qd4k",
        "1700000001.000007",
    );
    server
        .send_envelope(id, "interactive", click, 0)
        .expect("sent");
    let envelope = next_envelope(&mut stream).await;
    let press = envelope.press.clone().expect("a click carries its press");
    assert_eq!(press, "action:U7:1700000001.000007");

    let answer = OutboundMessage {
        answers_press: Some(press),
        reply_to: None,
        ..reply(
            &envelope.conversation_id,
            envelope.thread_id.as_deref(),
            "Your press decided nothing: pair first.",
            None,
        )
    };
    let receipt = transport.send(answer).await.expect("answered");
    assert_eq!(
        receipt.edit_key, None,
        "an ephemeral message cannot be updated"
    );
    assert_eq!(
        server.ephemeral(),
        vec![EphemeralRecord {
            channel: "C1".to_owned(),
            user: "U7".to_owned(),
            thread_ts: Some(root.to_owned()),
            text: "Your press decided nothing: pair first.".to_owned(),
        }]
    );
    assert!(
        server.requests("chat.postMessage").is_empty(),
        "nothing is posted in the channel"
    );

    let unknown = OutboundMessage {
        answers_press: Some("action:U9:1.0".to_owned()),
        reply_to: None,
        ..reply("C1", None, "lost", None)
    };
    assert!(transport.send(unknown).await.is_err());
    assert_eq!(server.ephemeral().len(), 1);
    assert!(server.requests("chat.postMessage").is_empty());
    transport.stop().await;
}

/// A reaction replaces the bot's previous one on the message (the envelope's reference is
/// `<channel>:<ts>`, the reaction goes on the `ts`); reacting twice is no error; a missing
/// `reactions:write` scope is said as such.
#[tokio::test]
async fn a_new_reaction_replaces_the_old_and_a_missing_scope_is_named() {
    let server = SlackServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport, 16).await;
    let message = "C0LOOP:1700000000.000100";
    transport
        .react("C0LOOP", message, Reaction::Received, None)
        .await
        .expect("received");
    assert_eq!(
        server.own_reactions("C0LOOP", "1700000000.000100"),
        ["eyes"]
    );
    // Said twice (a retried call): Slack's already_reacted is what was asked for.
    transport
        .react("C0LOOP", message, Reaction::Received, None)
        .await
        .expect("already there");
    transport
        .react("C0LOOP", message, Reaction::Done, Some(Reaction::Received))
        .await
        .expect("done");
    assert_eq!(
        server.own_reactions("C0LOOP", "1700000000.000100"),
        ["white_check_mark"]
    );
    server.fail_next("reactions.add", SlackFailure::Error("missing_scope".into()));
    let error = transport
        .react("C0LOOP", message, Reaction::Failed, Some(Reaction::Done))
        .await
        .expect_err("no scope");
    assert!(
        error.to_string().contains("reactions.add needs the scope"),
        "{error}"
    );
    transport.stop().await;
}
