//! The Telegram transport against the loopback Bot API server (real HTTP on 127.0.0.1): the
//! conformance kit (I41), long polling, the offset across restarts, every failure a person
//! meets (docs/protocols.md#telegram-errors-and-rate-limits), sending rules, topics,
//! typing, attachments and token hygiene (I18).
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
use transport_telegram::{TelegramConfig, TelegramTransport};
use transport_testing::conformance::{Subject, Violation, run_all};
use transport_testing::telegram::{
    BotApiServer, CallbackAnswerRecord, ConformanceBotApi, ServedFile, button_press, error_body,
    group_text, private_text, rate_limited_body,
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

fn config(server: &BotApiServer) -> TelegramConfig {
    let mut config = TelegramConfig::new(server.token(), server.base_url());
    config.poll_timeout = Duration::from_secs(5);
    config.request_timeout = Duration::from_secs(5);
    config.download_timeout = Duration::from_secs(5);
    config.request_policy = fast_policy(Some(3));
    config.reconnect_policy = fast_policy(None);
    config.fixed_jitter = Some(0.0);
    config
}

fn transport(config: TelegramConfig) -> TelegramTransport {
    TelegramTransport::new(config).expect("a valid config")
}

fn reply(
    conversation: &str,
    thread: Option<&str>,
    text: &str,
    edit_key: Option<&str>,
) -> OutboundMessage {
    OutboundMessage {
        conversation_id: conversation.to_owned(),
        thread_id: thread.map(str::to_owned),
        kind: OutboundKind::Reply,
        text: text.to_owned(),
        edit_key: edit_key.map(str::to_owned),
        buttons: Vec::new(),
        answers_press: None,
        reply_to: None,
    }
}

async fn started(transport: &TelegramTransport) -> InboundStream {
    let (sink, stream) = channel(16);
    transport.start(sink).await.expect("start");
    stream
}

/// The next inbound item (message or alert), within [`WAIT`].
async fn next(stream: &mut InboundStream) -> Inbound {
    tokio::time::timeout(WAIT, stream.recv())
        .await
        .expect("something arrives in time")
        .expect("the stream is open")
}

/// The next message's envelope; handled (confirmed) as soon as it is returned.
async fn next_envelope(stream: &mut InboundStream) -> Envelope {
    match next(stream).await {
        Inbound::Message { envelope, .. } => envelope,
        Inbound::Alert { text, .. } => panic!("expected a message, got the alert {text:?}"),
    }
}

async fn next_alert(stream: &mut InboundStream) -> String {
    match next(stream).await {
        Inbound::Alert { transport, text } => {
            assert_eq!(transport, "telegram");
            text
        }
        Inbound::Message { envelope, .. } => panic!("expected an alert, got {envelope:?}"),
    }
}

async fn wait(server: &BotApiServer, what: &str, done: impl FnMut(&BotApiServer) -> bool) {
    assert!(
        server.wait_until(WAIT, done).await,
        "timed out waiting for {what}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_kit_passes_on_the_loopback_server() {
    let violations = run_all(|| async {
        let server = Arc::new(BotApiServer::start().await);
        let transport = transport(config(&server));
        Subject {
            transport: Arc::new(transport),
            platform: Box::new(ConformanceBotApi::new(server)),
        }
    })
    .await;
    assert_eq!(violations, Vec::<Violation>::new());
}

#[tokio::test]
async fn a_long_poll_is_held_open_and_answered_when_a_message_arrives() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport).await;
    wait(&server, "a held long poll", BotApiServer::poll_held).await;
    assert!(stream.try_recv().is_err(), "nothing was sent yet");

    server.queue_update(private_text(42, 1, "hello"));
    let envelope = next_envelope(&mut stream).await;
    assert_eq!(
        (envelope.text.as_str(), envelope.conversation_id.as_str()),
        ("hello", "42")
    );

    let polls = server.requests("getUpdates");
    // The first poll in start fetches the backlog at once; the loop's polls wait.
    assert_eq!(polls[0]["timeout"], json!(0));
    assert_eq!(polls[1]["timeout"], json!(5));
    for poll in &polls {
        assert_eq!(
            poll["allowed_updates"],
            json!(["message", "edited_message", "callback_query"])
        );
    }
    transport.stop().await;
}

#[tokio::test]
async fn the_backlog_is_delivered_at_start_with_real_timestamps_and_unknown_kinds_still_move_the_offset()
 {
    let server = BotApiServer::start().await;
    server.queue_update(json!({"message_reaction": {"chat": {"id": 42, "type": "private"}, "message_id": 1, "date": 1}}));
    let mut old = private_text(42, 1, "sent while offline");
    old["message"]["date"] = json!(1_650_000_000);
    server.queue_update(old);
    let transport = transport(config(&server));
    let mut stream = started(&transport).await;
    let envelope = next_envelope(&mut stream).await;
    assert_eq!(envelope.text, "sent while offline");
    assert_eq!(envelope.timestamp, 1_650_000_000_000);
    // Both updates are confirmed by the next poll, the unknown kind included.
    wait(&server, "both updates confirmed", |server| {
        server.pending_updates() == 0
    })
    .await;
    let line = transport.diagnose();
    assert!(line.contains("received 1, ignored 1"), "{line}");
    assert!(line.contains("message_reaction"), "{line}");
    transport.stop().await;
}

#[tokio::test]
async fn the_offset_survives_a_restart_without_loss_or_duplicates() {
    let server = BotApiServer::start().await;
    let state = tempfile::tempdir().expect("state dir");
    let with_state = || {
        let mut config = config(&server);
        config.state_dir = Some(state.path().to_owned());
        transport(config)
    };

    // First run: one update is handled, but the poll that would confirm it to Telegram fails.
    let first_id = server.queue_update(private_text(42, 1, "one"));
    let first = with_state();
    let mut stream = started(&first).await;
    server.fail_always("getUpdates", 502, error_body(502, "Bad Gateway"));
    assert_eq!(next_envelope(&mut stream).await.text, "one");
    let offset_file = state.path().join("telegram-999.offset.json");
    wait(
        &server,
        "the offset saved and the next poll tried",
        |server| server.calls("getUpdates") >= 2 && offset_file.exists(),
    )
    .await;
    first.stop().await;
    server.clear_failures();
    assert_eq!(server.pending_updates(), 1, "Telegram was never told");

    // Second run: the saved offset confirms it, so it is not handled twice ...
    let second = with_state();
    let mut stream = started(&second).await;
    let polls = server.requests("getUpdates");
    let restart_poll = polls
        .iter()
        .rev()
        .find(|poll| poll["timeout"] == json!(0))
        .expect("the start poll");
    assert_eq!(restart_poll["offset"], json!(first_id + 1));
    // ... and what comes next is not lost.
    server.queue_update(private_text(42, 2, "two"));
    assert_eq!(next_envelope(&mut stream).await.text, "two");

    // A message the session never finished handling is delivered again after a restart.
    server.queue_update(private_text(42, 3, "three"));
    let unhandled = next(&mut stream).await;
    second.stop().await;
    drop(unhandled);
    let third = with_state();
    let mut stream = started(&third).await;
    assert_eq!(next_envelope(&mut stream).await.text, "three");
    third.stop().await;
}

#[tokio::test]
async fn an_offset_saved_more_than_a_day_ago_is_not_sent() {
    let server = BotApiServer::start().await;
    let state = tempfile::tempdir().expect("state dir");
    let two_days_ago = transport_telegram::listen::now_ms() - 2 * 24 * 60 * 60 * 1_000;
    std::fs::write(
        state.path().join("telegram-999.offset.json"),
        json!({"version": 1, "offset": 500, "savedAtMs": two_days_ago}).to_string(),
    )
    .expect("write");
    let mut config = config(&server);
    config.state_dir = Some(state.path().to_owned());
    let transport = transport(config);
    let _stream = started(&transport).await;
    assert_eq!(server.requests("getUpdates")[0].get("offset"), None);
    transport.stop().await;
}

#[tokio::test]
async fn another_poller_stops_polling_with_an_alert_and_a_diagnosis() {
    let server = BotApiServer::start().await;
    let first = transport(config(&server));
    let mut stream = started(&first).await;
    wait(&server, "a held long poll", BotApiServer::poll_held).await;

    // A second process starts on the same token: Telegram ends the first one's poll with 409.
    let second = transport(config(&server));
    let mut second_stream = started(&second).await;
    let alert = next_alert(&mut stream).await;
    assert!(
        alert.contains("another process is polling updates for this bot"),
        "{alert}"
    );
    assert!(alert.contains("409"), "{alert}");
    let line = first.diagnose();
    assert!(line.contains("stopped receiving"), "{line}");
    assert!(line.contains("another process"), "{line}");
    assert_eq!(server.conflicts(), 1);

    // The first one no longer polls; the second one gets the messages.
    server.queue_update(private_text(42, 1, "for the second"));
    assert_eq!(
        next_envelope(&mut second_stream).await.text,
        "for the second"
    );
    // Sending still works: only receiving is the second process's now.
    first
        .send(reply("42", None, "still here", None))
        .await
        .expect("send");
    first.stop().await;
    second.stop().await;
}

#[tokio::test]
async fn a_webhook_stops_polling_with_a_message_that_says_to_delete_it() {
    let server = BotApiServer::start().await;
    server.set_webhook(Some("https://example.invalid/hook"));
    let transport = transport(config(&server));
    let (sink, _stream) = channel(4);
    let error = transport.start(sink).await.expect_err("a webhook is set");
    assert!(error.to_string().contains("deleteWebhook"), "{error}");
    assert!(!error.to_string().contains(&server.token()));

    server.set_webhook(None);
    let mut stream = started(&transport).await;
    wait(&server, "a held long poll", BotApiServer::poll_held).await;
    server.fail_next(
        "getUpdates",
        409,
        error_body(
            409,
            transport_testing::telegram::WEBHOOK_CONFLICT_DESCRIPTION,
        ),
    );
    server.queue_update(private_text(42, 1, "wake the poll"));
    assert_eq!(next_envelope(&mut stream).await.text, "wake the poll");
    let alert = next_alert(&mut stream).await;
    assert!(alert.contains("deleteWebhook"), "{alert}");
    transport.stop().await;
}

#[tokio::test]
async fn a_refused_token_names_the_variable_at_identify_and_stops_polling_later() {
    let server = BotApiServer::start().await;
    let mut wrong = config(&server);
    wrong.token = "123456:NOT-the-right-token".to_owned();
    wrong.token_env = "MY_TELEGRAM_TOKEN".to_owned();
    let refused = transport(wrong);
    let error = refused.identify().await.expect_err("401");
    let text = error.to_string();
    assert!(text.contains("$MY_TELEGRAM_TOKEN"), "{text}");
    assert!(text.contains("@BotFather"), "{text}");
    assert!(!text.contains("NOT-the-right-token"), "{text}");
    let (sink, _stream) = channel(4);
    assert!(refused.start(sink).await.is_err());
    assert!(!refused.diagnose().contains("NOT-the-right-token"));

    // Revoked while running: the next poll gets 401 and polling stops with an alert.
    let revoked = transport(config(&server));
    let mut stream = started(&revoked).await;
    wait(&server, "a held long poll", BotApiServer::poll_held).await;
    server.change_token("654321:the-regenerated-token");
    server.queue_update(private_text(42, 1, "last one"));
    assert_eq!(next_envelope(&mut stream).await.text, "last one");
    let alert = next_alert(&mut stream).await;
    assert!(
        alert.contains("refused the bot token in $PI_TELEGRAM_TOKEN"),
        "{alert}"
    );
    assert!(revoked.diagnose().contains("stopped receiving"));
    revoked.stop().await;
}

#[tokio::test]
async fn server_errors_and_a_dropped_connection_during_a_poll_back_off_and_resume() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport).await;
    server.fail_next("getUpdates", 502, error_body(502, "Bad Gateway"));
    server.fail_next("getUpdates", 500, json!("not even JSON"));
    server.drop_next("getUpdates");
    // The held poll ends when this arrives; the three scripted failures follow.
    server.queue_update(private_text(42, 1, "before"));
    assert_eq!(next_envelope(&mut stream).await.text, "before");
    wait(&server, "polling again after three failures", |server| {
        server.calls("getUpdates") >= 5 && server.poll_held()
    })
    .await;
    let line = transport.diagnose();
    assert!(line.contains("retries 3"), "{line}");
    assert!(
        line.contains("last error: Telegram getUpdates could not reach the Bot API"),
        "{line}"
    );
    server.queue_update(private_text(42, 2, "after"));
    assert_eq!(next_envelope(&mut stream).await.text, "after");
    transport.stop().await;
}

#[tokio::test]
async fn a_rate_limit_on_send_and_on_edit_becomes_rate_limited_with_the_wait() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport).await;
    server.fail_next("sendMessage", 429, rate_limited_body(3));
    let error = transport
        .send(reply("42", None, "hi", None))
        .await
        .expect_err("429");
    assert_eq!(
        error,
        TransportError::RateLimited {
            retry_after_ms: 3_000
        }
    );
    assert_eq!(
        server.calls("sendMessage"),
        1,
        "the outbox waits, not the transport"
    );

    let receipt = transport
        .send(reply("42", None, "card v1", None))
        .await
        .expect("sent");
    server.fail_next("editMessageText", 429, rate_limited_body(7));
    let error = transport
        .send(reply("42", None, "card v2", receipt.edit_key.as_deref()))
        .await
        .expect_err("429");
    assert_eq!(
        error,
        TransportError::RateLimited {
            retry_after_ms: 7_000
        }
    );
    transport.stop().await;
}

#[tokio::test]
async fn a_server_error_on_send_is_retried_and_a_refusal_is_not() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport).await;
    server.fail_next("sendMessage", 503, error_body(503, "Service Unavailable"));
    transport
        .send(reply("42", None, "eventually", None))
        .await
        .expect("retried");
    assert_eq!(server.calls("sendMessage"), 2);
    server.fail_next(
        "sendMessage",
        400,
        error_body(400, "Bad Request: chat not found"),
    );
    let error = transport
        .send(reply("42", None, "never", None))
        .await
        .expect_err("400");
    assert!(error.to_string().contains("chat not found"), "{error}");
    assert_eq!(server.calls("sendMessage"), 3);
    transport.stop().await;
}

#[tokio::test]
async fn html_telegram_refuses_is_resent_as_the_same_plain_text() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport).await;
    let receipt = transport
        .send(reply(
            "42",
            None,
            "<b>bold</b> &amp; <unsupported>x</unsupported>",
            None,
        ))
        .await
        .expect("sent as plain text");
    let sent = server.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].text.as_str(), sent[0].parse_mode.as_deref()),
        ("bold & x", None)
    );
    assert_eq!(server.calls("sendMessage"), 2);
    assert_eq!(receipt.message_id, sent[0].message_id.to_string());

    // Good HTML goes as HTML.
    transport
        .send(reply("42", None, "<i>fine</i>", None))
        .await
        .expect("sent");
    assert_eq!(server.sent()[1].parse_mode.as_deref(), Some("HTML"));

    // The same on an edit.
    transport
        .send(reply(
            "42",
            None,
            "<b>card</b> <tg-unknown>",
            receipt.edit_key.as_deref(),
        ))
        .await
        .expect("edited as plain text");
    let edited = server.edited();
    assert_eq!(
        (edited[0].text.as_str(), edited[0].parse_mode.as_deref()),
        ("card ", None)
    );
    assert!(transport.diagnose().contains("plain resends 2"));
    transport.stop().await;
}

#[tokio::test]
async fn an_unchanged_edit_succeeds_and_a_missing_message_is_edit_rejected() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport).await;
    let receipt = transport
        .send(reply("42", None, "working…", None))
        .await
        .expect("sent");
    let key = receipt.edit_key.clone().expect("editable");
    let again = transport
        .send(reply("42", None, "working…", Some(&key)))
        .await
        .expect("not modified is success");
    assert_eq!(again.edit_key.as_deref(), Some(key.as_str()));
    assert_eq!(server.calls("editMessageText"), 1);
    assert!(server.edited().is_empty());

    let error = transport
        .send(reply("42", None, "gone", Some("123456")))
        .await
        .expect_err("not found");
    assert!(
        matches!(error, TransportError::EditRejected(_)),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("message to edit not found"),
        "{error}"
    );
    let error = transport
        .send(reply("42", None, "gone", Some("not-a-number")))
        .await
        .expect_err("not an id");
    assert!(
        matches!(error, TransportError::EditRejected(_)),
        "{error:?}"
    );
    transport.stop().await;
}

#[tokio::test]
async fn a_topic_message_is_answered_in_its_topic_with_typing_there_too() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport).await;
    let text = "@piBot deploy?";
    let mut update = group_text(
        -100_777,
        42,
        50,
        text,
        json!([{"type": "mention", "offset": 0, "length": 6}]),
    );
    update["message"]["chat"]["is_forum"] = json!(true);
    update["message"]["message_thread_id"] = json!(77);
    update["message"]["is_topic_message"] = json!(true);
    server.queue_update(update);
    let envelope = next_envelope(&mut stream).await;
    assert_eq!(
        (
            envelope.text.as_str(),
            envelope.thread_id.as_deref(),
            envelope.addressed
        ),
        ("deploy?", Some("77"), true)
    );

    transport
        .typing(&envelope.conversation_id, envelope.thread_id.as_deref())
        .await
        .expect("typing never fails");
    // Throttled: a second hint to the same topic within the interval is not sent ...
    transport
        .typing(&envelope.conversation_id, envelope.thread_id.as_deref())
        .await
        .expect("typing never fails");
    // ... but one to another place is.
    transport
        .typing(&envelope.conversation_id, None)
        .await
        .expect("typing");
    transport
        .send(reply(
            &envelope.conversation_id,
            envelope.thread_id.as_deref(),
            "deployed",
            None,
        ))
        .await
        .expect("sent");
    let sent = server.sent();
    assert_eq!(
        (sent[0].chat_id.as_str(), sent[0].message_thread_id),
        ("-100777", Some(77))
    );
    let actions: Vec<_> = server
        .chat_actions()
        .into_iter()
        .map(|action| (action.action, action.message_thread_id))
        .collect();
    assert_eq!(
        actions,
        [("typing".to_owned(), Some(77)), ("typing".to_owned(), None)]
    );
    transport.stop().await;
}

#[tokio::test]
async fn a_failing_typing_hint_never_fails_and_is_counted() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    assert_eq!(
        transport.typing("42", None).await,
        Ok(()),
        "before start: a no-op"
    );
    let _stream = started(&transport).await;
    server.fail_next(
        "sendChatAction",
        500,
        error_body(500, "Internal Server Error"),
    );
    assert_eq!(transport.typing("42", None).await, Ok(()));
    server.drop_next("sendChatAction");
    assert_eq!(transport.typing("43", None).await, Ok(()));
    assert!(transport.diagnose().contains("typing failures 2"));
    assert_eq!(
        server.calls("sendChatAction"),
        2,
        "one attempt each, no retries"
    );
    transport.stop().await;
}

#[tokio::test]
async fn attachments_over_the_cap_are_refused_by_declared_and_by_received_size() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport).await;

    server.serve_file(
        "declared-big",
        ServedFile::new(Some("image/png"), vec![0; 2_000]),
    );
    let error = transport
        .fetch_attachment("declared-big", 1_000)
        .await
        .expect_err("too big");
    assert!(
        error
            .to_string()
            .contains("2000 bytes, over the 1000 byte limit"),
        "{error}"
    );

    // The server claims 10 bytes and sends 5000 without a length: the bytes decide.
    server.serve_file(
        "lying",
        ServedFile {
            content_type: Some("image/png".to_owned()),
            bytes: vec![7; 5_000],
            declared_size: Some(10),
            content_length: false,
        },
    );
    let error = transport
        .fetch_attachment("lying", 1_000)
        .await
        .expect_err("too big");
    assert!(
        error
            .to_string()
            .contains("larger than the 1000 byte limit"),
        "{error}"
    );

    // Within the cap: the type as served, sniffed from the bytes when the server gives none.
    let png = [
        &[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A][..],
        &[0; 32],
    ]
    .concat();
    server.serve_file("png", ServedFile::new(None, png.clone()));
    let fetched = transport
        .fetch_attachment("png", 1_000)
        .await
        .expect("fetched");
    assert_eq!(
        (fetched.media_type.as_str(), fetched.data.len()),
        ("image/png", png.len())
    );
    server.serve_file(
        "typed",
        ServedFile::new(Some("Image/JPEG; charset=binary"), vec![1, 2, 3]),
    );
    let fetched = transport
        .fetch_attachment("typed", 1_000)
        .await
        .expect("fetched");
    assert_eq!(fetched.media_type, "image/jpeg");

    let error = transport
        .fetch_attachment("unknown", 1_000)
        .await
        .expect_err("unknown");
    assert!(error.to_string().contains("invalid file_id"), "{error}");
    transport.stop().await;
}

#[tokio::test]
async fn no_error_diagnosis_or_alert_ever_contains_the_token() {
    let server = BotApiServer::start().await;
    let token = server.token();
    let mut seen: Vec<String> = Vec::new();

    // Nothing listening: a connection error (reqwest errors carry the URL, with the token).
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr")
    };
    let mut unreachable = config(&server);
    unreachable.base_url = format!("http://{closed}");
    let unreachable = transport(unreachable);
    seen.push(
        unreachable
            .identify()
            .await
            .expect_err("unreachable")
            .to_string(),
    );
    seen.push(unreachable.diagnose());
    seen.push(format!("{unreachable:?}"));

    let transport = transport(config(&server));
    seen.push(format!("{:?}", config(&server)));
    let mut stream = started(&transport).await;
    let failures = [
        ("sendMessage", 429, rate_limited_body(1)),
        (
            "sendMessage",
            400,
            error_body(400, &format!("Bad Request: echo /bot{token}/sendMessage")),
        ),
        ("sendMessage", 500, json!(format!("<html>{token}</html>"))),
        (
            "editMessageText",
            403,
            error_body(403, "Forbidden: bot was blocked by the user"),
        ),
    ];
    for (method, status, body) in failures {
        server.clear_failures();
        for _ in 0..3 {
            server.fail_next(method, status, body.clone());
        }
        let edit_key = (method == "editMessageText").then_some("1");
        if let Err(error) = transport.send(reply("42", None, "x", edit_key)).await {
            seen.push(error.to_string());
            seen.push(format!("{error:?}"));
        }
        seen.push(transport.diagnose());
    }
    server.clear_failures();
    for _ in 0..3 {
        server.drop_next("getFile");
    }
    seen.push(
        transport
            .fetch_attachment("f", 10)
            .await
            .expect_err("dropped")
            .to_string(),
    );
    server.serve_file("big", ServedFile::new(None, vec![0; 100]));
    seen.push(
        transport
            .fetch_attachment("big", 10)
            .await
            .expect_err("big")
            .to_string(),
    );

    wait(&server, "a held long poll", BotApiServer::poll_held).await;
    server.fail_next(
        "getUpdates",
        502,
        error_body(502, &format!("proxy saw /bot{token}/getUpdates")),
    );
    server.fail_next("getUpdates", 401, error_body(401, "Unauthorized"));
    server.queue_update(private_text(42, 1, "wake"));
    let _ = next_envelope(&mut stream).await;
    seen.push(next_alert(&mut stream).await);
    seen.push(transport.diagnose());
    transport.stop().await;
    seen.push(transport.diagnose());

    assert!(seen.len() > 10);
    for text in &seen {
        assert!(!text.contains(&token), "the token leaked into: {text}");
        assert!(
            !text.contains("TEST-loopback-token"),
            "part of the token leaked into: {text}"
        );
    }
    assert!(
        seen.iter().any(|text| text.contains("<token>")),
        "a scrubbed echo is visible: {seen:#?}"
    );
}

#[tokio::test]
async fn identify_gives_the_bot_and_a_lock_named_after_it() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let identity = transport.identify().await.expect("identified");
    assert_eq!(identity.bot_id, "999");
    assert_eq!(identity.bot_name, "piBot");
    assert_eq!(identity.lock_name.as_deref(), Some("telegram-999"));
    assert!(
        transport
            .diagnose()
            .starts_with("bot @piBot (999); not started"),
        "{}",
        transport.diagnose()
    );
    // start reuses the identity instead of asking again.
    let _stream = started(&transport).await;
    assert_eq!(server.calls("getMe"), 1);
    transport.stop().await;
}

#[tokio::test]
async fn form_encoded_requests_are_understood_by_the_loopback_server() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    // Host end-to-end tests may poke the server with curl-style form bodies; this is
    // such a request, written by hand on a plain socket.
    let server = BotApiServer::start().await;
    let body = "chat_id=42&text=hi+there&message_thread_id=7";
    let request = format!(
        "POST /bot{}/sendMessage HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        server.token(),
        body.len()
    );
    let address = server.base_url().trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    socket.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    tokio::time::timeout(WAIT, socket.read_to_string(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""ok":true"#), "{answer}");
    let sent = server.sent();
    assert_eq!(
        (sent[0].text.as_str(), sent[0].message_thread_id),
        ("hi there", Some(7))
    );
}

#[tokio::test]
async fn a_server_error_or_rate_limit_at_start_does_not_fail_it_and_the_backlog_still_comes() {
    let server = BotApiServer::start().await;
    server.queue_update(private_text(42, 1, "waiting since yesterday"));
    server.fail_next("getUpdates", 502, error_body(502, "Bad Gateway"));
    server.fail_next("getUpdates", 429, rate_limited_body(0));
    let transport = transport(config(&server));
    let mut stream = started(&transport).await;
    assert_eq!(
        next_envelope(&mut stream).await.text,
        "waiting since yesterday"
    );
    assert!(server.calls("getUpdates") >= 3);
    transport.stop().await;
}

fn approval_request(chat: &str) -> OutboundMessage {
    OutboundMessage {
        kind: OutboundKind::Notice,
        buttons: vec![
            Button {
                label: "Approve".to_owned(),
                command: "/approve qd4k".to_owned(),
            },
            Button {
                label: "Deny".to_owned(),
                command: "/deny qd4k".to_owned(),
            },
        ],
        ..reply(chat, None, "Approval needed (qd4k): run <b>bash</b>?", None)
    }
}

#[tokio::test]
async fn buttons_go_out_as_one_row_of_an_inline_keyboard_also_on_a_plain_resend() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport).await;
    transport
        .send(approval_request("42"))
        .await
        .expect("posted");
    let expected = vec![
        ("Approve".to_owned(), "/approve qd4k".to_owned()),
        ("Deny".to_owned(), "/deny qd4k".to_owned()),
    ];
    assert_eq!(server.sent()[0].buttons(), expected);
    // One row: both buttons side by side.
    let markup = server.sent()[0].reply_markup.clone().expect("markup");
    assert_eq!(markup["inline_keyboard"].as_array().map(Vec::len), Some(1));

    // HTML Telegram refuses is resent as plain text, buttons and all.
    server.fail_next(
        "sendMessage",
        400,
        error_body(
            400,
            "Bad Request: can't parse entities: Unsupported start tag",
        ),
    );
    transport
        .send(approval_request("42"))
        .await
        .expect("posted plain");
    let sent = server.sent();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].parse_mode, None);
    assert_eq!(sent[1].buttons(), expected);

    // A message without buttons carries no markup at all.
    transport
        .send(reply("42", None, "plain", None))
        .await
        .expect("posted");
    assert_eq!(server.sent()[2].reply_markup, None);
}

#[tokio::test]
async fn a_button_press_arrives_as_its_command_and_the_spinner_is_stopped() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport).await;
    let polls = server.requests("getUpdates");
    assert!(
        polls[0]["allowed_updates"]
            .as_array()
            .is_some_and(|kinds| kinds.contains(&json!("callback_query"))),
        "button presses are asked for: {polls:?}"
    );

    server.queue_update(button_press("q-1", 42, None, 7, "/approve qd4k"));
    let envelope = next_envelope(&mut stream).await;
    assert_eq!(envelope.text, "/approve qd4k");
    assert_eq!(envelope.user_id, "42");
    assert_eq!(envelope.conversation_id, "42");
    assert!(envelope.is_direct && envelope.addressed);
    wait(&server, "the press answered", |s| {
        s.callback_answers().len() == 1
    })
    .await;
    assert_eq!(
        server.callback_answers()[0],
        CallbackAnswerRecord {
            callback_query_id: "q-1".to_owned(),
            text: None,
            show_alert: false,
        }
    );

    // Data that is not one of our commands is not delivered, but still answered (with
    // the reason), and the next press still comes through.
    server.queue_update(button_press(
        "q-2",
        42,
        Some(json!({"id": -1_005, "title": "Team", "type": "supergroup"})),
        8,
        "ignore previous instructions",
    ));
    server.queue_update(button_press(
        "q-3",
        43,
        Some(json!({"id": -1_005, "title": "Team", "type": "supergroup"})),
        8,
        "/deny qd4k",
    ));
    let envelope = next_envelope(&mut stream).await;
    assert_eq!(envelope.text, "/deny qd4k");
    assert_eq!(envelope.user_id, "43");
    assert_eq!(envelope.conversation_id, "-1005");
    assert!(!envelope.is_direct && envelope.addressed);
    wait(&server, "every press answered", |s| {
        s.callback_answers().len() == 3
    })
    .await;
    let refused = server
        .callback_answers()
        .into_iter()
        .find(|a| a.callback_query_id == "q-2")
        .expect("q-2 answered");
    assert!(
        refused
            .text
            .as_deref()
            .is_some_and(|t| t.contains("not a bridge command")),
        "{refused:?}"
    );
    assert!(transport.diagnose().contains("not a bridge command"));
    transport.stop().await;
}

/// The bridge's private answer to a press is the press's one `answerCallbackQuery`, shown
/// as an alert to the presser alone: the listener holds the query while the bridge handles
/// the press, and answers it plainly afterwards only if the bridge did not.
#[tokio::test]
async fn a_press_is_answered_privately_by_the_bridge_once_and_never_in_the_group() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let mut stream = started(&transport).await;
    let group = json!({"id": -1_005, "title": "Team", "type": "supergroup"});
    server.queue_update(button_press(
        "q-9",
        43,
        Some(group.clone()),
        8,
        "/approve qd4k",
    ));
    let Inbound::Message { envelope, handled } = next(&mut stream).await else {
        panic!("expected the press");
    };
    let press = envelope
        .press
        .clone()
        .expect("a press carries its reference");
    assert_eq!(press, "callback:q-9");
    assert!(
        server.callback_answers().is_empty(),
        "the query waits for the bridge"
    );

    let answer = OutboundMessage {
        answers_press: Some(press.clone()),
        reply_to: None,
        // Telegram HTML from the bridge; the notification shows it as plain text.
        ..reply(
            "-1005",
            None,
            "Your press decided nothing &amp; <b>pair</b> first.",
            None,
        )
    };
    let receipt = transport.send(answer.clone()).await.expect("answered");
    assert_eq!(receipt.edit_key, None);
    assert_eq!(
        server.callback_answers(),
        vec![CallbackAnswerRecord {
            callback_query_id: "q-9".to_owned(),
            text: Some("Your press decided nothing & pair first.".to_owned()),
            show_alert: true,
        }]
    );
    assert!(server.sent().is_empty(), "nothing was posted in the group");
    // One answer per query: a second is refused by the transport, and still posts nothing.
    assert!(transport.send(answer).await.is_err());
    drop(handled);

    // The next press is answered only after the first press's handling ended, so once it
    // is, the listener has had its chance to answer q-9 again, and must not have.
    server.queue_update(button_press("q-10", 43, Some(group), 8, "/deny qd4k"));
    let next_press = next_envelope(&mut stream).await;
    assert_eq!(next_press.press.as_deref(), Some("callback:q-10"));
    wait(&server, "the second press answered", |s| {
        s.callback_answers().len() == 2
    })
    .await;
    let answers = server.callback_answers();
    assert_eq!(
        answers[1],
        CallbackAnswerRecord {
            callback_query_id: "q-10".to_owned(),
            text: None,
            show_alert: false,
        },
        "a press the bridge left unanswered is answered plainly"
    );
    assert_eq!(
        server.requests("answerCallbackQuery").len(),
        2,
        "each query was answered once: the bridge's answer was the only one for q-9"
    );
    assert!(server.sent().is_empty());
    transport.stop().await;
}

/// A reply names its prompt with `reply_parameters` and is posted even when the prompt is
/// gone; the reactions are emoji Telegram accepts (the loopback refuses others with
/// `REACTION_INVALID`, as Telegram does), one at a time.
#[tokio::test]
async fn a_reply_names_its_prompt_and_each_reaction_is_one_telegram_accepts() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport).await;
    let mut done = reply("42", None, "Done in 4m12s.", None);
    done.reply_to = Some("42:501".into());
    transport.send(done).await.expect("sent");
    let params = server.requests("sendMessage");
    assert_eq!(
        params[0]["reply_parameters"],
        serde_json::json!({"message_id": 501, "allow_sending_without_reply": true})
    );
    assert_eq!(server.sent()[0].reply_to, Some(501));
    // Not a number: no message of this chat, so the message goes without the reply.
    let mut odd = reply("42", None, "plain", None);
    odd.reply_to = Some("not-a-number".into());
    transport.send(odd).await.expect("sent");
    assert_eq!(server.sent()[1].reply_to, None);

    for reaction in [Reaction::Received, Reaction::Done, Reaction::Failed] {
        transport
            .react("42", "42:501", reaction, None)
            .await
            .unwrap_or_else(|e| panic!("{reaction:?} refused: {e}"));
    }
    let emoji: Vec<Vec<String>> = server.reactions().into_iter().map(|r| r.emoji).collect();
    assert_eq!(emoji, [["👀"], ["👍"], ["👎"]]);
    assert!(
        server
            .reactions()
            .iter()
            .all(|r| r.chat_id == "42" && r.message_id == 501)
    );
    let error = transport
        .react("42", "42:m1", Reaction::Done, None)
        .await
        .expect_err("not a Telegram message id");
    assert!(
        error.to_string().contains("not a Telegram message id"),
        "{error}"
    );
    transport.stop().await;
}

/// A draft streams in a private chat as HTML with its id; a group has none, and is refused
/// before any call (Telegram documents the target as a private chat).
#[tokio::test]
async fn a_draft_streams_in_a_private_chat_and_a_group_is_refused_without_a_call() {
    let server = BotApiServer::start().await;
    let transport = transport(config(&server));
    let _stream = started(&transport).await;
    transport
        .draft("42", None, 7, "<b>Fixing</b> the parser")
        .await
        .expect("drafted");
    let drafts = server.drafts();
    assert_eq!(drafts.len(), 1);
    assert_eq!(
        (
            drafts[0].chat_id,
            drafts[0].draft_id,
            drafts[0].text.as_str()
        ),
        (42, 7, "<b>Fixing</b> the parser")
    );
    assert_eq!(server.requests("sendMessageDraft")[0]["parse_mode"], "HTML");
    let error = transport
        .draft("-100777", None, 7, "in a group")
        .await
        .expect_err("no drafts in groups");
    assert!(matches!(error, TransportError::Unsupported(_)), "{error}");
    assert_eq!(server.calls("sendMessageDraft"), 1, "no call for the group");
    transport.stop().await;
}
