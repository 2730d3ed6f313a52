//! Outbound over NATS on a real nats-server
//! (docs/decisions.md#decision-19-past-one-host-on-nats-jetstream): a session node's
//! `RemoteTransport` sends through the ingress node's real transport and gets its receipt or its
//! error back; no ingress, or one that does not answer, gives a clear error.

use std::sync::Arc;
use std::time::Duration;

use host_shim::cluster::outbound::{OutboundServer, RemoteTransport};
use host_shim::cluster::posted::PostLedger;
use host_shim::local::logging::MemoryLog;
use tokio_stream::StreamExt as _;
use transport_core::inbound;
use transport_core::{OutboundMessage, Reaction, Transport, TransportError};
use transport_testing::fake::{FakeConfig, FakeTransport};

use crate::common::cluster::{self, NatsServer, drain_to, nats_or_skip, remote_with_outbox};
use host_shim::cluster::subjects::Prefix;

const TIMEOUT: Duration = Duration::from_secs(2);

/// A reply to conversation 42.
fn reply(text: &str) -> OutboundMessage {
    crate::common::reply_in("42", text)
}

/// The ingress's end: serves the sends of the cluster at `prefix` with `fake`, the bot.
async fn serve_sends(
    server: &NatsServer,
    prefix: &Prefix,
    fake: &FakeTransport,
    log: Arc<MemoryLog>,
) -> OutboundServer {
    let client = server.connect().await;
    let jetstream = host_shim::cluster::async_nats::jetstream::new(client.clone());
    let posts = PostLedger::open(&jetstream, prefix, &cluster::gate(), log.clone())
        .await
        .expect("the posted ledger opens");
    OutboundServer::start(
        client,
        prefix,
        Arc::new(fake.handle()),
        posts,
        cluster::gate(),
        log,
    )
    .await
    .expect("serving")
}

/// The texts `fake` posted, in order.
fn posted_texts(fake: &FakeTransport) -> Vec<String> {
    fake.sent().iter().map(|m| m.message.text.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_round_trips_through_the_ingress_to_the_real_transport() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("out1");
    let fake = FakeTransport::new(FakeConfig {
        id: "telegram".into(),
        ..FakeConfig::default()
    });
    let (platform_sink, _platform_stream) = inbound::channel(4);
    fake.start(platform_sink).await.expect("the fake starts");
    let log = Arc::new(MemoryLog::default());
    let _ingress = serve_sends(&server, &prefix, &fake, log.clone()).await;

    let (remote, identity) = RemoteTransport::discover(
        server.connect().await,
        &prefix,
        "telegram",
        TIMEOUT,
        cluster::gate(),
    )
    .await
    .expect("the ingress describes the bot");
    assert_eq!(
        (identity.bot_id.as_str(), identity.lock_name),
        ("telegram-bot", None)
    );
    assert_eq!(remote.id(), "telegram");
    assert_eq!(remote.capabilities(), fake.capabilities());

    // Like every transport, it sends only once started.
    assert_eq!(
        remote.send(reply("early")).await,
        Err(TransportError::NotStarted("telegram".into()))
    );
    let (session_sink, _session_stream) = inbound::channel(4);
    remote.start(session_sink).await.expect("started");

    let receipt = remote.send(reply("hello")).await.expect("posted");
    assert_eq!(receipt.message_id, "telegram-m1");
    let sent = fake.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].message, reply("hello"));
    remote.typing("42", None).await.expect("typing");
    assert_eq!(fake.typing_calls(), ["42"]);

    // The real transport's errors come back as themselves.
    fake.queue_faults([TransportError::RateLimited {
        retry_after_ms: 1500,
    }]);
    assert_eq!(
        remote.send(reply("too fast")).await,
        Err(TransportError::RateLimited {
            retry_after_ms: 1500
        })
    );
    fake.set_fail_sends(true);
    assert_eq!(
        remote.send(reply("refused")).await,
        Err(TransportError::Failed("telegram rejected the send".into()))
    );
    assert_eq!(fake.sent().len(), 1, "nothing else was posted");
    assert!(
        remote.diagnose().contains("answered 2, failed 2"),
        "{}",
        remote.diagnose()
    );
    assert!(log.lines().is_empty(), "{:?}", log.lines());
}

/// A started fake transport served by an ingress on `prefix`, and the started session-side
/// transport that reaches it over NATS.
async fn served(
    server: &NatsServer,
    prefix: &Prefix,
    config: FakeConfig,
) -> (FakeTransport, OutboundServer, RemoteTransport) {
    let id = config.id.clone();
    let fake = FakeTransport::new(config);
    let (platform_sink, _platform_stream) = inbound::channel(4);
    fake.start(platform_sink).await.expect("the fake starts");
    let ingress = serve_sends(server, prefix, &fake, Arc::new(MemoryLog::default())).await;
    let (remote, _) = RemoteTransport::discover(
        server.connect().await,
        prefix,
        &id,
        TIMEOUT,
        cluster::gate(),
    )
    .await
    .expect("described");
    let (session_sink, _session_stream) = inbound::channel(4);
    remote.start(session_sink).await.expect("started");
    (fake, ingress, remote)
}

/// A reaction and a draft go through the ingress to the real transport and come back as
/// what it answered, like a send: a bridge on a session node reacts and streams drafts as it
/// does on a single host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reactions_and_drafts_round_trip_through_the_ingress() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("out-react");
    let mut config = FakeConfig {
        id: "telegram".into(),
        ..FakeConfig::default()
    };
    config.capabilities.reactions = true;
    config.capabilities.drafts = true;
    let (fake, _ingress, remote) = served(&server, &prefix, config).await;
    assert!(remote.capabilities().reactions && remote.capabilities().drafts);
    remote
        .react("42", "42:7", Reaction::Done, Some(Reaction::Received))
        .await
        .expect("reacted");
    assert_eq!(
        fake.reactions(),
        [(
            "42".to_owned(),
            "42:7".to_owned(),
            Reaction::Done,
            Some(Reaction::Received)
        )]
    );
    remote
        .draft("42", None, 9, "half an answer")
        .await
        .expect("drafted");
    assert_eq!(
        fake.drafts(),
        [("42".to_owned(), 9, "half an answer".to_owned())]
    );
    // The real transport's refusal comes back as itself.
    let plain = FakeConfig {
        id: "slack".into(),
        ..FakeConfig::default()
    };
    let (_plain, _plain_ingress, remote_plain) = served(&server, &prefix, plain).await;
    assert!(matches!(
        remote_plain.draft("42", None, 9, "x").await,
        Err(TransportError::Unsupported(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_ingress_or_a_silent_one_gives_an_error_that_says_what_may_have_happened() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("out2");
    let client = server.connect().await;
    let capabilities = FakeTransport::default().capabilities();
    let (sink, _stream) = inbound::channel(4);

    // Nobody serves discord: the request fails at once, and nothing was sent.
    let nobody = RemoteTransport::new(
        client.clone(),
        &prefix,
        "discord",
        capabilities,
        TIMEOUT,
        cluster::gate(),
    )
    .expect("a valid id");
    nobody.start(sink.clone()).await.expect("started");
    let started = tokio::time::Instant::now();
    let Err(TransportError::Failed(message)) = nobody.send(reply("hello")).await else {
        panic!("expected Failed");
    };
    assert!(
        message.contains("no ingress node serves discord") && message.contains("nothing was sent"),
        "{message}"
    );
    assert!(
        started.elapsed() < TIMEOUT,
        "no responders is known at once"
    );

    // An ingress that takes the request and never answers (hung, or posting very slowly).
    let silent_ingress = server.connect().await;
    let mut requests = silent_ingress
        .subscribe(prefix.outbound_subject("slack").expect("subject"))
        .await
        .expect("subscribed");
    silent_ingress.flush().await.expect("flushed");
    let short = Duration::from_millis(300);
    let silent = RemoteTransport::new(
        client.clone(),
        &prefix,
        "slack",
        capabilities,
        short,
        cluster::gate(),
    )
    .expect("a valid id");
    silent.start(sink).await.expect("started");
    // The subscription is flushed to the server, yet under load a request can still find
    // no responder for a moment (seen once in CI): ask again until it reaches the ingress.
    let mut attempts = 0;
    let (message, waited) = loop {
        attempts += 1;
        let started = tokio::time::Instant::now();
        let Err(TransportError::Failed(message)) = silent.send(reply("hello")).await else {
            panic!("expected Failed");
        };
        if !message.contains("no ingress node serves") || attempts == 50 {
            break (message, started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        message.contains("did not answer within 300 ms")
            && message.contains("may or may not have been posted"),
        "{message}"
    );
    assert!(waited >= short && waited < TIMEOUT, "waited {waited:?}");
    // The request did reach it: that is why the outcome is unknown.
    let seen = tokio::time::timeout(cluster::WAIT, requests.next())
        .await
        .expect("the request arrived")
        .expect("subscription open");
    assert!(
        String::from_utf8_lossy(&seen.payload).contains("\"op\":\"send\""),
        "{:?}",
        seen.payload
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_ingress_cannot_read_is_logged_and_answered_not_a_panic() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("out3");
    let fake = FakeTransport::new(FakeConfig {
        id: "telegram".into(),
        ..FakeConfig::default()
    });
    let log = Arc::new(MemoryLog::default());
    let _ingress = serve_sends(&server, &prefix, &fake, log.clone()).await;
    let client = server.connect().await;
    // Sealed with the cluster key (a node of another version), so it is read, and not
    // understood.
    let subject = prefix.outbound_subject("telegram").expect("subject");
    let body = b"{\"op\":\"launch\"}";
    let headers = cluster::gate().headers(&subject, "launch-1", body);
    let answer = client
        .send_request(
            subject,
            host_shim::cluster::async_nats::Request::new()
                .headers(headers)
                .payload(body.as_slice().into()),
        )
        .await
        .expect("answered");
    let text = String::from_utf8_lossy(&answer.payload).into_owned();
    assert!(
        text.contains("\"result\":\"failed\"") && text.contains("could not read the request"),
        "{text}"
    );
    let events: Vec<String> = log
        .lines()
        .into_iter()
        .map(|(_, line)| line.event)
        .collect();
    assert_eq!(events, ["nats_bad_outbound_request"]);
    assert!(fake.sent().is_empty());
}

/// The outbox (`cluster/outbox.rs`): a send that finds no ingress is kept, not failed, and
/// the ingress that takes the bot next posts what was kept, in order; a kept reply the
/// platform refuses is said in its chat; a send the ingress took and never answered is not
/// repeated, but its chat is told it may not have been posted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_no_ingress_took_are_kept_and_posted_in_order_by_the_next_holder() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("out4");
    let fake = FakeTransport::new(FakeConfig {
        id: "telegram".into(),
        ..FakeConfig::default()
    });
    let platform: Arc<dyn Transport> = Arc::new(fake.clone());
    let (ingress_sink, _ingress_stream) = inbound::channel(4);
    platform
        .start(ingress_sink)
        .await
        .expect("the platform connection starts");
    let log = Arc::new(MemoryLog::default());
    let drain = || drain_to(&server, &prefix, platform.clone(), log.clone());
    let posted = || posted_texts(&fake);

    // Nobody holds the bot: each send is kept, and the bridge gets a receipt it cannot edit.
    let remote = remote_with_outbox(&server, &prefix, &fake, TIMEOUT).await;
    for text in ["first", "second", "third"] {
        let receipt = remote.send(reply(text)).await.expect("kept, not failed");
        assert!(receipt.message_id.starts_with("outbox-"), "{receipt:?}");
        assert_eq!(receipt.edit_key, None);
    }
    assert!(posted().is_empty(), "nothing posted yet");
    // An ingress takes the bot: what was kept goes out, in order.
    let mut holder = drain().await;
    assert!(holder.drained(cluster::WAIT).await);
    assert_eq!(posted(), ["first", "second", "third"]);
    holder.stop();

    // A kept reply the platform refuses: said in its chat, not only in a log.
    remote.send(reply("doomed")).await.expect("kept");
    fake.queue_faults([TransportError::Failed("chat not found".into())]);
    let mut holder = drain().await;
    assert!(holder.drained(cluster::WAIT).await);
    let told = posted();
    let notice = told.last().expect("a notice");
    assert!(
        notice.contains("could not be delivered") && notice.contains("chat not found"),
        "{told:?}"
    );
    assert!(!told.contains(&"doomed".to_owned()), "{told:?}");
    holder.stop();

    // An ingress that takes the request and never answers: an error for the bridge, and a
    // notice for the chat, posted by the next holder.
    let silent_ingress = server.connect().await;
    let _requests = silent_ingress
        .subscribe(prefix.outbound_subject("telegram").expect("subject"))
        .await
        .expect("subscribed");
    silent_ingress.flush().await.expect("flushed");
    let silent = remote_with_outbox(&server, &prefix, &fake, Duration::from_millis(300)).await;
    let before = posted().len();
    // Under load a fresh subscription can still find no responder for a moment (seen once
    // in CI): such a send is kept, and posted below before the notice.
    let mut kept = 0;
    let message = loop {
        match silent.send(reply("in flight")).await {
            Err(TransportError::Failed(message)) => break message,
            Ok(_) if kept < 50 => kept += 1,
            other => panic!("expected Failed: {other:?}"),
        }
    };
    assert!(
        message.contains("may or may not have been posted"),
        "{message}"
    );
    drop(_requests);
    let mut holder = drain().await;
    assert!(holder.drained(cluster::WAIT).await);
    let told = posted()[before..].to_vec();
    assert_eq!(told.len(), kept + 1, "{told:?}");
    let notice = told.last().expect("the notice");
    assert!(notice.contains("may not have been posted"), "{told:?}");
    holder.stop();
}

/// A send that finds the ingress again while a reply kept a moment before still waits (an
/// ingress unreachable for the instant nats-server restarted) is kept behind it: posted
/// at once, it would come first, and the chat would read answers out of order. Once the
/// kept replies are posted, sends go to the ingress again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_after_a_kept_reply_waits_behind_it_until_it_is_posted() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("out5");
    let fake = FakeTransport::new(FakeConfig {
        id: "telegram".into(),
        ..FakeConfig::default()
    });
    let (platform_sink, _platform_stream) = inbound::channel(4);
    fake.start(platform_sink).await.expect("the fake starts");
    let remote = remote_with_outbox(&server, &prefix, &fake, TIMEOUT).await;
    let posted = || posted_texts(&fake);

    let first = remote.send(reply("first")).await.expect("kept");
    assert!(first.message_id.starts_with("outbox-"), "{first:?}");
    // The ingress serves sends again before its drain has posted what was kept.
    let log = Arc::new(MemoryLog::default());
    let _ingress = serve_sends(&server, &prefix, &fake, log.clone()).await;
    let second = remote.send(reply("second")).await.expect("kept behind");
    assert!(second.message_id.starts_with("outbox-"), "{second:?}");
    assert!(
        posted().is_empty(),
        "posted before the kept one: {:?}",
        posted()
    );

    let mut drain = drain_to(&server, &prefix, Arc::new(fake.handle()), log).await;
    assert!(drain.drained(cluster::WAIT).await);
    let third = remote.send(reply("third")).await.expect("posted");
    assert!(!third.message_id.starts_with("outbox-"), "{third:?}");
    assert_eq!(posted(), ["first", "second", "third"]);
    drain.stop();
}
