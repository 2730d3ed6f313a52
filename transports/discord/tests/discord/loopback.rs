//! The Discord transport against the loopback gateway (a real WebSocket) and REST server
//! (real HTTP) on 127.0.0.1: the conformance kit (I41), the gateway's state machine
//! (HELLO/IDENTIFY/READY, heartbeats, missed ACKs, RECONNECT, INVALID_SESSION, fatal close
//! codes, READY deadlines, IDENTIFY limits), resuming without loss or duplicates, REST
//! rate limits, sending rules, typing, attachments and token hygiene (I18).
//!
//! No test sleeps to wait for something: each waits on a server's change hook or on the
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
use transport_discord::{DiscordConfig, DiscordTransport};
use transport_testing::conformance::{Subject, Violation, run_all};
use transport_testing::discord::{
    CREATE_MESSAGE, ConformanceDiscord, DiscordLoopback, EDIT_MESSAGE, GatewayServer,
    INTERACTION_DEADLINE, RestServer, TEST_BOT_ID, TEST_TOKEN, TYPING, bot_user, component_click,
    dm_message, guild_message,
};
use transport_testing::telegram::ServedFile;

/// Long enough for a loaded 2-core machine, short enough that a hang fails fast.
const WAIT: Duration = Duration::from_secs(10);

const DM: &str = "900000000000000001";
const PERSON: &str = "555000000000000001";

fn fast_policy(max_attempts: Option<u32>) -> RetryPolicy {
    RetryPolicy {
        initial: Duration::from_millis(10),
        max: Duration::from_millis(40),
        max_platform_wait: Duration::from_secs(5),
        max_attempts,
    }
}

fn config(loopback: &DiscordLoopback) -> DiscordConfig {
    let mut config = DiscordConfig::new(loopback.token(), loopback.base_url());
    config.request_timeout = Duration::from_secs(5);
    config.download_timeout = Duration::from_secs(5);
    config.ready_timeout = Duration::from_secs(5);
    config.identify_interval = Duration::from_millis(10);
    config.invalid_session_wait = (Duration::from_millis(10), Duration::from_millis(20));
    config.request_policy = fast_policy(Some(3));
    config.reconnect_policy = fast_policy(None);
    config.fixed_jitter = Some(0.0);
    config
}

fn transport(config: DiscordConfig) -> DiscordTransport {
    DiscordTransport::new(config).expect("a valid config")
}

fn reply(conversation: &str, text: &str, edit_key: Option<&str>) -> OutboundMessage {
    OutboundMessage {
        conversation_id: conversation.to_owned(),
        thread_id: None,
        kind: OutboundKind::Reply,
        text: text.to_owned(),
        edit_key: edit_key.map(str::to_owned),
        buttons: Vec::new(),
        answers_press: None,
        reply_to: None,
    }
}

async fn started(transport: &DiscordTransport) -> InboundStream {
    let (sink, stream) = channel(16);
    transport.start(sink).await.expect("start");
    stream
}

async fn next(stream: &mut InboundStream) -> Inbound {
    tokio::time::timeout(WAIT, stream.recv())
        .await
        .expect("something arrives in time")
        .expect("the stream is open")
}

/// The next message's envelope; handled as soon as it is returned.
async fn next_envelope(stream: &mut InboundStream) -> Envelope {
    match next(stream).await {
        Inbound::Message { envelope, .. } => envelope,
        Inbound::Alert { text, .. } => panic!("expected a message, got the alert {text:?}"),
    }
}

async fn next_alert(stream: &mut InboundStream) -> String {
    match next(stream).await {
        Inbound::Alert { transport, text } => {
            assert_eq!(transport, "discord");
            text
        }
        Inbound::Message { envelope, .. } => panic!("expected an alert, got {envelope:?}"),
    }
}

async fn wait_gateway(
    loopback: &DiscordLoopback,
    what: &str,
    done: impl FnMut(&GatewayServer) -> bool,
) {
    assert!(
        loopback.gateway.wait_until(WAIT, done).await,
        "timed out waiting for {what}"
    );
}

async fn wait_rest(loopback: &DiscordLoopback, what: &str, done: impl FnMut(&RestServer) -> bool) {
    assert!(
        loopback.rest.wait_until(WAIT, done).await,
        "timed out waiting for {what}"
    );
}

fn dm(id: u64, text: &str) -> serde_json::Value {
    dm_message(&id.to_string(), DM, PERSON, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_kit_passes_on_the_loopback_servers() {
    let violations = run_all(|| async {
        let loopback = Arc::new(DiscordLoopback::start().await);
        let transport = transport(config(&loopback));
        Subject {
            transport: Arc::new(transport),
            platform: Box::new(ConformanceDiscord::new(loopback)),
        }
    })
    .await;
    assert_eq!(violations, Vec::<Violation>::new());
}

#[tokio::test]
async fn hello_identify_ready_with_exactly_the_needed_intents_then_acknowledged_heartbeats() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let identity = transport.identify().await.expect("identify");
    assert_eq!(identity.bot_id, TEST_BOT_ID);
    assert_eq!(
        identity.lock_name.as_deref(),
        Some("discord-123456789012345678")
    );
    let mut stream = started(&transport).await;

    let identifies = loopback.gateway.identifies();
    assert_eq!(identifies.len(), 1);
    let identify = &identifies[0];
    // GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT and nothing more.
    assert_eq!(identify["intents"], json!(37_376));
    assert_eq!(identify["token"], json!(TEST_TOKEN));
    assert_eq!(identify["properties"]["browser"], json!("bot-connect"));
    assert!(identify.get("compress").is_none());
    assert_eq!(loopback.gateway.connections(), ["/?v=10&encoding=json"]);

    // Beats are acknowledged and carry the last sequence number: null before READY
    // (the first beat may go out at once), then READY's 1.
    wait_gateway(
        &loopback,
        "acknowledged heartbeats after READY",
        |gateway| gateway.acks() >= 2 && gateway.heartbeats().contains(&json!(1)),
    )
    .await;
    assert!(
        loopback
            .gateway
            .heartbeats()
            .iter()
            .all(|seq| *seq == json!(1) || seq.is_null())
    );
    let line = transport.diagnose();
    assert!(line.contains("gateway ready"), "{line}");
    assert!(line.contains("session resumable at seq 1"), "{line}");
    assert!(line.contains("bot pi-bot (123456789012345678)"), "{line}");

    // A heartbeat Discord asks for is sent at once.
    let before = loopback.gateway.heartbeats().len();
    assert!(loopback.gateway.request_heartbeat());
    wait_gateway(&loopback, "an asked-for heartbeat", |gateway| {
        gateway.heartbeats().len() > before
    })
    .await;

    loopback.gateway.message_create(dm(1, "hello"));
    let envelope = next_envelope(&mut stream).await;
    assert_eq!(
        (
            envelope.text.as_str(),
            envelope.conversation_id.as_str(),
            envelope.is_direct
        ),
        ("hello", DM, true)
    );
    transport.stop().await;
    // Stopping ends the session for good: close code 1000.
    wait_gateway(&loopback, "the client's close", |gateway| {
        gateway.client_closes() == [Some(1000)]
    })
    .await;
}

#[tokio::test]
async fn a_missed_heartbeat_ack_closes_with_a_resumable_code_and_resumes() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let mut stream = started(&transport).await;
    let session = loopback.gateway.session_id().expect("a session");
    loopback.gateway.message_create(dm(1, "before"));
    assert_eq!(next_envelope(&mut stream).await.text, "before");

    loopback.gateway.withhold_acks(true);
    wait_gateway(&loopback, "a resume after the missed ACK", |gateway| {
        !gateway.resumes().is_empty()
    })
    .await;
    loopback.gateway.withhold_acks(false);
    // Not 1000/1001, which would end the session.
    assert_eq!(loopback.gateway.client_closes()[0], Some(4000));
    let resume = &loopback.gateway.resumes()[0];
    assert_eq!(resume["session_id"], json!(session));
    assert_eq!(resume["seq"], json!(2));
    assert_eq!(resume["token"], json!(TEST_TOKEN));
    assert_eq!(loopback.gateway.identifies().len(), 1, "no new session");
    assert_eq!(
        loopback.gateway.connections().last().map(String::as_str),
        Some("/resume?v=10&encoding=json"),
        "a resume goes to resume_gateway_url"
    );
    wait_gateway(&loopback, "RESUMED", |gateway| gateway.is_ready()).await;
    loopback.gateway.message_create(dm(2, "after"));
    assert_eq!(next_envelope(&mut stream).await.text, "after");
    let line = transport.diagnose();
    assert!(line.contains("resumes 1"), "{line}");
    transport.stop().await;
}

#[tokio::test]
async fn op_7_reconnect_resumes_the_session() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let mut stream = started(&transport).await;
    assert!(loopback.gateway.send_reconnect());
    wait_gateway(&loopback, "RESUMED after RECONNECT", |gateway| {
        gateway.resumed_count() == 1 && gateway.is_ready()
    })
    .await;
    assert_eq!(loopback.gateway.identifies().len(), 1);
    assert_eq!(loopback.gateway.client_closes()[0], Some(4000));
    loopback.gateway.message_create(dm(1, "still here"));
    assert_eq!(next_envelope(&mut stream).await.text, "still here");
    transport.stop().await;
}

#[tokio::test]
async fn invalid_session_resumes_when_allowed_and_identifies_anew_when_not() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let mut stream = started(&transport).await;
    let first_session = loopback.gateway.session_id();

    assert!(loopback.gateway.send_invalid_session(true));
    wait_gateway(&loopback, "a resume after op 9 true", |gateway| {
        gateway.resumed_count() == 1 && gateway.is_ready()
    })
    .await;
    assert_eq!(loopback.gateway.identifies().len(), 1);
    assert_eq!(loopback.gateway.session_id(), first_session);

    assert!(loopback.gateway.send_invalid_session(false));
    wait_gateway(&loopback, "a new session after op 9 false", |gateway| {
        gateway.identifies().len() == 2 && gateway.is_ready()
    })
    .await;
    assert_ne!(loopback.gateway.session_id(), first_session);
    // A new session connects to the gateway URL, not the resume URL.
    assert_eq!(
        loopback.gateway.connections().last().map(String::as_str),
        Some("/?v=10&encoding=json")
    );
    // A RESUME that Discord refuses (op 9 false) also ends in a new session.
    loopback.gateway.invalidate_next_resume(false);
    assert!(loopback.gateway.drop_connection());
    wait_gateway(
        &loopback,
        "a third session after a refused resume",
        |gateway| gateway.identifies().len() == 3 && gateway.is_ready(),
    )
    .await;
    loopback.gateway.message_create(dm(1, "new session"));
    assert_eq!(next_envelope(&mut stream).await.text, "new session");
    transport.stop().await;
}

#[tokio::test]
async fn a_fatal_close_code_at_start_fails_start_with_the_fix() {
    let loopback = DiscordLoopback::start().await;
    loopback
        .gateway
        .close_next_identify(4014, "Disallowed intent(s).");
    let transport = transport(config(&loopback));
    let (sink, _stream) = channel(4);
    let error = transport.start(sink).await.expect_err("4014");
    let text = error.to_string();
    assert!(text.contains("4014"), "{text}");
    assert!(text.contains("enable the Message Content intent"), "{text}");
    assert!(!text.contains(TEST_TOKEN));
    let line = transport.diagnose();
    assert!(line.contains("stopped receiving"), "{line}");
    assert!(line.contains("Developer Portal"), "{line}");
    // It does not retry: one IDENTIFY, and no connection after it.
    assert_eq!(loopback.gateway.identifies().len(), 1);
    assert_eq!(loopback.gateway.connections().len(), 1);
    // Send before a successful start is refused.
    assert!(matches!(
        transport.send(reply(DM, "x", None)).await,
        Err(TransportError::NotStarted(_))
    ));
}

#[tokio::test]
async fn a_fatal_close_while_running_stops_with_an_alert_and_a_diagnosis() {
    let loopback = DiscordLoopback::start().await;
    let mut config = config(&loopback);
    config.token_env = "MY_DISCORD_TOKEN".to_owned();
    let transport = transport(config);
    let mut stream = started(&transport).await;
    assert!(loopback.gateway.close(4004, "Authentication failed."));
    let alert = next_alert(&mut stream).await;
    assert!(alert.contains("4004"), "{alert}");
    assert!(alert.contains("$MY_DISCORD_TOKEN"), "{alert}");
    assert!(alert.contains("Reset Token"), "{alert}");
    let line = transport.diagnose();
    assert!(line.contains("stopped receiving"), "{line}");
    assert!(line.contains("last close code 4004"), "{line}");
    assert_eq!(loopback.gateway.connections().len(), 1, "no reconnect");
    transport.stop().await;
}

#[tokio::test]
async fn other_close_codes_reconnect_with_backoff_and_4009_starts_a_new_session() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let _stream = started(&transport).await;
    assert!(loopback.gateway.close(4000, "Unknown error"));
    wait_gateway(&loopback, "a resume after 4000", |gateway| {
        gateway.resumed_count() == 1 && gateway.is_ready()
    })
    .await;
    assert!(loopback.gateway.close(4009, "Session timed out"));
    wait_gateway(&loopback, "a new session after 4009", |gateway| {
        gateway.identifies().len() == 2 && gateway.is_ready()
    })
    .await;
    let line = transport.diagnose();
    assert!(
        line.contains("last close code 4009 (Session timed out)"),
        "{line}"
    );
    transport.stop().await;
}

#[tokio::test]
async fn no_ready_in_time_fails_start_and_later_reconnects_until_one_comes() {
    let loopback = DiscordLoopback::start().await;
    loopback.gateway.withhold_ready(true);
    let mut short = config(&loopback);
    short.ready_timeout = Duration::from_millis(400);
    let transport = transport(short.clone());
    let (sink, _stream) = channel(4);
    let error = transport.start(sink).await.expect_err("no READY");
    assert!(
        error.to_string().contains("did not become ready"),
        "{error}"
    );
    assert_eq!(loopback.gateway.identifies().len(), 1);

    // Once running, a connection that gets no RESUMED in time is replaced (the deadline
    // is re-armed on every connection, I31), until one comes.
    loopback.gateway.withhold_ready(false);
    let running = DiscordTransport::new(short).expect("config");
    let mut stream = started(&running).await;
    loopback.gateway.withhold_ready(true);
    assert!(loopback.gateway.drop_connection());
    wait_gateway(
        &loopback,
        "two resume attempts without RESUMED",
        |gateway| gateway.resumes().len() >= 2,
    )
    .await;
    loopback.gateway.withhold_ready(false);
    wait_gateway(&loopback, "RESUMED at last", |gateway| {
        gateway.resumed_count() >= 1 && gateway.is_ready()
    })
    .await;
    loopback.gateway.message_create(dm(1, "made it"));
    assert_eq!(next_envelope(&mut stream).await.text, "made it");
    running.stop().await;
}

#[tokio::test]
async fn a_drop_mid_turn_loses_and_duplicates_nothing_across_the_resume() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let mut stream = started(&transport).await;
    loopback.gateway.message_create(dm(1, "one"));
    // The session is busy with "one" (not handled yet) when the socket drops.
    let busy = next(&mut stream).await;
    assert!(loopback.gateway.drop_connection());
    wait_gateway(&loopback, "the drop", |gateway| !gateway.is_ready()).await;
    // Sent while the socket is down; a sloppy server replays "one" as well.
    loopback.gateway.message_create(dm(2, "two"));
    loopback.gateway.message_create(dm(3, "three"));
    loopback.gateway.set_replay_overlap(2);
    wait_gateway(&loopback, "RESUMED", |gateway| gateway.resumed_count() == 1).await;
    loopback.gateway.message_create(dm(4, "four"));
    drop(busy);
    let mut texts = Vec::new();
    for _ in 0..3 {
        texts.push(next_envelope(&mut stream).await.text);
    }
    assert_eq!(texts, ["two", "three", "four"]);
    // Nothing else arrives: "one" was not delivered twice.
    loopback.gateway.message_create(dm(5, "five"));
    assert_eq!(next_envelope(&mut stream).await.text, "five");
    // The replayed "one" was recognised by its sequence number (before RESUMED, so
    // before "four" arrived).
    let line = transport.diagnose();
    assert!(line.contains("duplicates dropped 1"), "{line}");
    transport.stop().await;
}

#[tokio::test]
async fn a_429_on_create_and_on_edit_becomes_rate_limited_and_the_bucket_waits() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let _stream = started(&transport).await;

    loopback.rest.rate_limit_next(CREATE_MESSAGE, 0.337, false);
    let error = transport
        .send(reply(DM, "hi", None))
        .await
        .expect_err("429");
    assert_eq!(
        error,
        TransportError::RateLimited {
            retry_after_ms: 337
        }
    );
    assert_eq!(loopback.rest.calls(CREATE_MESSAGE), 1, "the outbox waits");
    // The route's bucket waits out the rest before the next call is sent.
    let receipt = transport
        .send(reply(DM, "card v1", None))
        .await
        .expect("sent after the wait");
    assert_eq!(loopback.rest.calls(CREATE_MESSAGE), 2);
    let line = transport.diagnose();
    assert!(line.contains("rate limited 1, bucket waits 1"), "{line}");

    loopback.rest.rate_limit_next(EDIT_MESSAGE, 1.25, false);
    let error = transport
        .send(reply(DM, "card v2", receipt.edit_key.as_deref()))
        .await
        .expect_err("429 on edit");
    assert_eq!(
        error,
        TransportError::RateLimited {
            retry_after_ms: 1_250
        }
    );

    // A wait longer than one call may hold goes to the caller without a request.
    loopback.rest.rate_limit_next(CREATE_MESSAGE, 30.5, false);
    assert!(transport.send(reply(DM, "x", None)).await.is_err());
    let calls = loopback.rest.calls(CREATE_MESSAGE);
    match transport.send(reply(DM, "y", None)).await {
        Err(TransportError::RateLimited { retry_after_ms }) => {
            assert!(
                retry_after_ms > 25_000 && retry_after_ms <= 30_500,
                "{retry_after_ms}"
            )
        }
        other => panic!("expected a rate limit, got {other:?}"),
    }
    assert_eq!(loopback.rest.calls(CREATE_MESSAGE), calls);
    // Another channel has its own bucket.
    transport
        .send(reply("900000000000000777", "elsewhere", None))
        .await
        .expect("another channel");
    transport.stop().await;
}

#[tokio::test]
async fn a_global_429_holds_every_route_and_an_exhausted_bucket_is_waited_for() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let _stream = started(&transport).await;
    loopback.rest.bucket_next(CREATE_MESSAGE, 0, 0.2);
    transport.send(reply(DM, "one", None)).await.expect("one");
    transport.send(reply(DM, "two", None)).await.expect("two");
    assert!(transport.diagnose().contains("bucket waits 1"));

    loopback.rest.rate_limit_next(CREATE_MESSAGE, 0.2, true);
    assert!(matches!(
        transport.send(reply(DM, "three", None)).await,
        Err(TransportError::RateLimited {
            retry_after_ms: 200
        })
    ));
    // The global limit holds the edit route too, then lets it through.
    let receipt = transport.send(reply(DM, "four", None)).await.expect("four");
    transport
        .send(reply(DM, "four, edited", receipt.edit_key.as_deref()))
        .await
        .expect("edit");
    transport.stop().await;
}

#[tokio::test]
async fn messages_never_ping_and_edits_of_unknown_messages_are_refused_as_edits() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let _stream = started(&transport).await;
    let receipt = transport
        .send(reply(DM, "hey @everyone and <@&42>", None))
        .await
        .expect("sent");
    assert_eq!(
        receipt.edit_key.as_deref(),
        Some(receipt.message_id.as_str())
    );
    let created = loopback.rest.created();
    assert_eq!(
        created[0].body["allowed_mentions"],
        json!({"parse": [], "replied_user": false})
    );
    transport
        .send(reply(DM, "edited @here", Some(&receipt.message_id)))
        .await
        .expect("edited");
    assert_eq!(
        loopback.rest.edited()[0].body["allowed_mentions"],
        json!({"parse": [], "replied_user": false})
    );
    assert!(matches!(
        transport.send(reply(DM, "gone", Some("1"))).await,
        Err(TransportError::EditRejected(_))
    ));
    // A thread id is accepted and ignored: a thread is its own channel.
    let mut threaded = reply("900000000000000888", "in a thread", None);
    threaded.thread_id = Some("something".to_owned());
    transport.send(threaded).await.expect("sent");
    assert_eq!(
        loopback.rest.created().last().map(|m| m.channel_id.clone()),
        Some("900000000000000888".to_owned())
    );
    // A server error is retried; a refusal is not.
    loopback.rest.fail_next(
        CREATE_MESSAGE,
        502,
        json!({"message": "Bad Gateway", "code": 0}),
    );
    transport
        .send(reply(DM, "retried", None))
        .await
        .expect("retried");
    let before = loopback.rest.calls(CREATE_MESSAGE);
    loopback.rest.fail_next(
        CREATE_MESSAGE,
        403,
        json!({"message": "Missing Permissions", "code": 50013}),
    );
    let error = transport
        .send(reply(DM, "refused", None))
        .await
        .expect_err("403");
    assert!(error.to_string().contains("Send Messages"), "{error}");
    assert_eq!(loopback.rest.calls(CREATE_MESSAGE), before + 1);
    assert!(
        transport
            .diagnose()
            .contains("last error: Discord refused create message")
    );
    transport.stop().await;
}

#[tokio::test]
async fn typing_is_throttled_per_channel_and_never_fails() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    transport
        .typing(DM, None)
        .await
        .expect("no-op before start");
    assert!(loopback.rest.typing().is_empty());
    let _stream = started(&transport).await;
    transport.typing(DM, None).await.expect("typing");
    transport.typing(DM, None).await.expect("throttled");
    transport
        .typing("900000000000000002", None)
        .await
        .expect("other");
    assert_eq!(loopback.rest.typing(), [DM, "900000000000000002"]);
    loopback
        .rest
        .fail_always(TYPING, 500, json!({"message": "oops", "code": 0}));
    transport
        .typing("900000000000000003", None)
        .await
        .expect("a failure is not an error");
    assert_eq!(loopback.rest.calls(TYPING), 3, "one attempt, no retries");
    assert!(transport.diagnose().contains("typing failures 1"));
    transport.stop().await;
}

#[tokio::test]
async fn attachments_come_from_the_cdn_without_the_token_within_the_cap_and_retyped() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let _stream = started(&transport).await;
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR-picture-bytes".to_vec();
    let url = loopback.rest.serve_file(
        "a.png",
        ServedFile::new(Some("application/octet-stream"), png.clone()),
    );
    let fetched = transport
        .fetch_attachment(&url, 1_024)
        .await
        .expect("fetched");
    assert_eq!(
        (fetched.media_type.as_str(), fetched.data),
        ("image/png", png)
    );
    let download = loopback
        .rest
        .requests()
        .into_iter()
        .find(|request| request.route == "GET /attachments")
        .expect("downloaded");
    assert!(!download.authorized, "the token never goes to the CDN");

    // A server that declares no length is still stopped at the cap (I19).
    let mut big = ServedFile::new(Some("text/plain"), vec![b'a'; 5_000]);
    big.content_length = false;
    let url = loopback.rest.serve_file("big.txt", big);
    let error = transport
        .fetch_attachment(&url, 4_096)
        .await
        .expect_err("too big");
    assert!(error.to_string().contains("4096 byte limit"), "{error}");

    // An expired link, and a URL that is not Discord's.
    let error = transport
        .fetch_attachment(
            &format!("{}/../attachments/9/9/gone.png", loopback.base_url()),
            1_024,
        )
        .await
        .expect_err("404");
    assert!(error.to_string().contains("expire"), "{error}");
    let error = transport
        .fetch_attachment("https://example.com/a.png?ex=1", 1_024)
        .await
        .expect_err("not the CDN");
    assert!(
        error.to_string().contains("not a Discord attachment URL"),
        "{error}"
    );
    transport.stop().await;
}

#[tokio::test]
async fn a_refused_token_names_the_variable_and_never_shows_the_token() {
    let loopback = DiscordLoopback::start().await;
    let mut wrong = config(&loopback);
    wrong.token = "MTIz.NOT.the-right-token".to_owned();
    wrong.token_env = "MY_DISCORD_TOKEN".to_owned();
    let refused = transport(wrong);
    let error = refused.identify().await.expect_err("401");
    let text = error.to_string();
    assert!(text.contains("$MY_DISCORD_TOKEN"), "{text}");
    assert!(!text.contains("NOT.the-right-token"), "{text}");
    let (sink, _stream) = channel(4);
    assert!(refused.start(sink).await.is_err());
    assert!(!refused.diagnose().contains("NOT.the-right-token"));
    assert!(
        loopback.gateway.connections().is_empty(),
        "no socket with a bad token"
    );
}

#[tokio::test]
async fn a_used_up_session_start_limit_fails_start_with_when_it_resets() {
    let loopback = DiscordLoopback::start().await;
    loopback
        .rest
        .set_session_start_limit(0, 2 * 60 * 60 * 1_000);
    let transport = transport(config(&loopback));
    let (sink, _stream) = channel(4);
    let error = transport.start(sink).await.expect_err("no sessions left");
    let text = error.to_string();
    assert!(text.contains("new gateway sessions a day"), "{text}");
    assert!(text.contains("120 minutes"), "{text}");
    assert!(
        loopback.gateway.identifies().is_empty(),
        "no IDENTIFY over the limit"
    );
}

#[tokio::test]
async fn unreadable_frames_and_ignored_messages_do_not_break_the_connection() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let mut stream = started(&transport).await;
    assert!(loopback.gateway.send_raw("{not json"));
    assert!(
        loopback
            .gateway
            .send_raw(r#"{"op": 0, "t": "MESSAGE_CREATE", "s": "x"}"#)
    );
    let mut from_bot = dm(1, "a bot says hi");
    from_bot["author"] = bot_user();
    from_bot["author"]["id"] = json!("777");
    loopback.gateway.message_create(from_bot);
    loopback.gateway.message_create(guild_message(
        "2",
        "700000000000000001",
        "800000000000000001",
        PERSON,
        "<@123456789012345678> status",
        json!([bot_user()]),
    ));
    let envelope = next_envelope(&mut stream).await;
    assert_eq!(
        (envelope.text.as_str(), envelope.addressed),
        ("status", true)
    );
    let line = transport.diagnose();
    assert!(line.contains("unreadable frames 2"), "{line}");
    assert!(line.contains("ignored 1"), "{line}");
    assert!(
        line.contains("last ignored: a message from another bot"),
        "{line}"
    );
    assert!(!line.contains(TEST_TOKEN));
    transport.stop().await;
    wait_rest(&loopback, "nothing", |_| true).await;
}

fn approval_buttons() -> Vec<Button> {
    [
        "Approve:/approve qd4k",
        "Deny:/deny qd4k",
        "Details:/details qd4k",
    ]
    .iter()
    .map(|pair| {
        let (label, command) = pair.split_once(':').expect("label:command");
        Button {
            label: label.to_owned(),
            command: command.to_owned(),
        }
    })
    .collect()
}

const GUILD: &str = "700000000000000001";
const CHANNEL: &str = "800000000000000001";

#[tokio::test]
async fn buttons_go_out_as_an_action_row_and_an_edit_without_them_removes_them() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let _stream = started(&transport).await;
    let mut request = reply(CHANNEL, "Approval needed (qd4k)", None);
    request.buttons = approval_buttons();
    let receipt = transport.send(request).await.expect("sent");
    let components = &loopback.rest.created()[0].body["components"];
    assert_eq!(
        components,
        &json!([{"type": 1, "components": [
            {"type": 2, "style": 3, "label": "Approve", "custom_id": "/approve qd4k"},
            {"type": 2, "style": 4, "label": "Deny", "custom_id": "/deny qd4k"},
            {"type": 2, "style": 2, "label": "Details", "custom_id": "/details qd4k"}
        ]}])
    );
    // A plain message carries no components at all.
    transport
        .send(reply(CHANNEL, "plain", None))
        .await
        .expect("sent");
    assert!(loopback.rest.created()[1].body.get("components").is_none());
    // The outcome replaces the buttons: an edit always says which components remain.
    transport
        .send(reply(
            CHANNEL,
            "Approved by discord:1",
            Some(&receipt.message_id),
        ))
        .await
        .expect("edited");
    assert_eq!(loopback.rest.edited()[0].body["components"], json!([]));
    transport.stop().await;
}

#[tokio::test]
async fn a_click_is_acknowledged_before_the_session_sees_it_and_becomes_the_command_from_the_clicker()
 {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let mut stream = started(&transport).await;
    // A slow Discord: the callback is answered only after this hold. The click must still
    // reach the session only once it was answered.
    loopback.rest.hold_callbacks(Duration::from_millis(300));
    loopback.click(component_click(
        "1250000000000000001",
        "interaction-token-1",
        CHANNEL,
        Some(GUILD),
        PERSON,
        "1200000000000000001",
        "/approve qd4k",
    ));
    let envelope = next_envelope(&mut stream).await;
    let callbacks = loopback.rest.callbacks();
    assert_eq!(callbacks.len(), 1, "acknowledged before delivery");
    assert!(callbacks[0].answered, "answered before delivery");
    assert_eq!(callbacks[0].body, json!({"type": 6}));
    assert!(
        callbacks[0].after < INTERACTION_DEADLINE,
        "{:?}",
        callbacks[0].after
    );
    assert_eq!(envelope.text, "/approve qd4k");
    assert_eq!(envelope.user_id, PERSON, "the clicker, from member.user");
    assert_eq!(envelope.conversation_id, CHANNEL);
    assert!(envelope.addressed && !envelope.is_direct);
    assert_eq!(
        envelope.message_id.as_deref(),
        Some("interaction:1250000000000000001")
    );
    // In a DM the clicker is `user`.
    loopback.rest.hold_callbacks(Duration::ZERO);
    loopback.click(component_click(
        "1250000000000000002",
        "interaction-token-2",
        DM,
        None,
        PERSON,
        "1200000000000000001",
        "/approve qd4k turn",
    ));
    let envelope = next_envelope(&mut stream).await;
    assert_eq!(
        (
            envelope.text.as_str(),
            envelope.user_id.as_str(),
            envelope.is_direct
        ),
        ("/approve qd4k turn", PERSON, true)
    );
    assert!(transport.diagnose().contains("clicks taken 2, refused 0"));
    transport.stop().await;
}

#[tokio::test]
async fn a_refused_click_gets_an_ephemeral_answer_and_never_reaches_the_session() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let mut stream = started(&transport).await;
    // A forged custom_id (a client can send anything) and a click by a bot.
    loopback.click(component_click(
        "1250000000000000003",
        "t3",
        CHANNEL,
        Some(GUILD),
        PERSON,
        "1200000000000000001",
        "please delete everything",
    ));
    let mut by_bot = component_click(
        "1250000000000000004",
        "t4",
        CHANNEL,
        Some(GUILD),
        "555000000000000009",
        "1200000000000000001",
        "/deny qd4k",
    );
    by_bot["member"]["user"]["bot"] = json!(true);
    loopback.click(by_bot);
    loopback.gateway.message_create(dm(10, "after"));
    assert_eq!(next_envelope(&mut stream).await.text, "after");
    wait_rest(&loopback, "two callbacks", |rest| {
        rest.callbacks().len() == 2
    })
    .await;
    for callback in loopback.rest.callbacks() {
        assert_eq!(callback.body["type"], 4, "{callback:?}");
        assert_eq!(callback.body["data"]["flags"], 64, "ephemeral");
        let content = callback.body["data"]["content"]
            .as_str()
            .unwrap_or_default();
        assert!(content.contains("decided nothing"), "{content}");
    }
    transport.stop().await;
}

/// The bridge answers a taken click privately with an ephemeral follow-up on the
/// interaction's token (flags 64, no pings), after the deferred acknowledgement; nothing
/// is posted in the channel, and a press the transport never handed out is refused.
#[tokio::test]
async fn the_bridge_answers_a_click_with_an_ephemeral_follow_up_only_the_clicker_sees() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let mut stream = started(&transport).await;
    loopback.click(component_click(
        "1250000000000000009",
        "interaction-token-9",
        CHANNEL,
        Some(GUILD),
        PERSON,
        "1200000000000000001",
        "/approve qd4k",
    ));
    let envelope = next_envelope(&mut stream).await;
    let press = envelope.press.clone().expect("a click carries its press");
    assert_eq!(press, "interaction:1250000000000000009");
    assert!(
        !format!("{envelope:?}").contains("interaction-token-9"),
        "the token stays inside the transport"
    );

    let answer = OutboundMessage {
        answers_press: Some(press),
        reply_to: None,
        ..reply(CHANNEL, "Your press decided nothing: pair first.", None)
    };
    let receipt = transport.send(answer).await.expect("answered");
    assert_eq!(
        receipt.edit_key, None,
        "an ephemeral message cannot be edited"
    );
    let followups = loopback.rest.followups();
    assert_eq!(followups.len(), 1);
    assert_eq!(followups[0].interaction_id, "1250000000000000009");
    assert_eq!(
        followups[0].body,
        json!({
            "content": "Your press decided nothing: pair first.",
            "flags": 64,
            "allowed_mentions": {"parse": [], "replied_user": false}
        })
    );
    assert_eq!(
        loopback.rest.calls(CREATE_MESSAGE),
        0,
        "nothing is posted in the channel"
    );
    assert!(
        loopback
            .rest
            .requests()
            .iter()
            .all(|request| !request.line.contains("interaction-token-9")),
        "the token is never recorded in a request line"
    );

    let unknown = OutboundMessage {
        answers_press: Some("interaction:never".to_owned()),
        reply_to: None,
        ..reply(CHANNEL, "lost", None)
    };
    assert!(transport.send(unknown).await.is_err());
    assert_eq!(loopback.rest.followups().len(), 1);
    assert_eq!(loopback.rest.calls(CREATE_MESSAGE), 0);
    transport.stop().await;
}

/// A reply references its prompt (and survives the prompt's deletion), pinging only its
/// author; a reaction replaces the bot's previous one, so one shows at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_references_its_prompt_and_a_new_reaction_replaces_the_old() {
    let loopback = DiscordLoopback::start().await;
    let transport = transport(config(&loopback));
    let _stream = started(&transport).await;
    let mut done = reply(DM, "Done in 4m12s.", None);
    done.reply_to = Some("700000000000000042".into());
    transport.send(done).await.expect("sent");
    let body = &loopback.rest.created()[0].body;
    assert_eq!(
        body["message_reference"],
        json!({"message_id": "700000000000000042", "fail_if_not_exists": false})
    );
    assert_eq!(
        body["allowed_mentions"],
        json!({"parse": [], "replied_user": true})
    );

    let prompt = "700000000000000042";
    transport
        .react(DM, prompt, Reaction::Received, None)
        .await
        .expect("received");
    assert_eq!(loopback.rest.own_reactions(DM, prompt), ["👀"]);
    transport
        .react(DM, prompt, Reaction::Done, Some(Reaction::Received))
        .await
        .expect("done");
    assert_eq!(loopback.rest.own_reactions(DM, prompt), ["✅"]);
    transport
        .react(DM, prompt, Reaction::Failed, Some(Reaction::Done))
        .await
        .expect("failed");
    assert_eq!(loopback.rest.own_reactions(DM, prompt), ["❌"]);
    transport.stop().await;
}
