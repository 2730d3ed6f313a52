//! Inbound over JetStream on a real nats-server
//! (docs/decisions.md#decision-19-past-one-host-on-nats-jetstream): a redelivered publish is
//! dropped by the duplicate window, and a message is acked only after the session has handled it,
//! so a node that dies first loses nothing.

use std::sync::Arc;
use std::time::Duration;

use host_shim::cluster::async_nats::jetstream;
use host_shim::cluster::inbound::{InboundPublisher, InboundSettings, SessionConsumer};
use host_shim::cluster::seal::Gate;
use host_shim::cluster::subjects::{Prefix, session_consumer};
use host_shim::local::logging::MemoryLog;
use transport_core::Envelope;
use transport_core::inbound::{self, Inbound, InboundStream};

use crate::common::cluster::{self, NatsServer, nats_or_skip};

const SESSION: &str = "/home/me/project:main";

fn settings() -> InboundSettings {
    InboundSettings {
        // Real time: the server redelivers after this, so it is short.
        ack_wait: Duration::from_secs(1),
        ..InboundSettings::default()
    }
}

fn envelope(text: &str, message_id: &str) -> Envelope {
    Envelope {
        transport: "telegram".into(),
        conversation_id: "42".into(),
        user_id: "7".into(),
        text: text.into(),
        is_direct: true,
        message_id: Some(message_id.into()),
        ..Envelope::default()
    }
}

/// The ingress's end of the session's subject on `server`, sealing with `gate`.
async fn publisher(server: &NatsServer, prefix: &Prefix, gate: Gate) -> InboundPublisher {
    InboundPublisher::open(server.jetstream().await, prefix.clone(), &settings(), gate)
        .await
        .expect("inbound stream")
}

/// A session node's consumer of [`SESSION`] on `jetstream`, reading with `gate`, and the
/// stream it delivers to (the session's end).
async fn consumer(
    jetstream: &jetstream::Context,
    prefix: &Prefix,
    gate: Gate,
    log: Arc<MemoryLog>,
) -> (SessionConsumer, InboundStream) {
    let (sink, stream) = inbound::channel(8);
    let consumer = SessionConsumer::start(
        jetstream.clone(),
        prefix,
        SESSION,
        sink,
        &settings(),
        gate,
        log,
    )
    .await
    .expect("consumer");
    (consumer, stream)
}

/// The next message the session gets, within the wait.
async fn next(stream: &mut InboundStream) -> (Envelope, Inbound) {
    let inbound = tokio::time::timeout(cluster::WAIT, stream.recv())
        .await
        .expect("a message within the wait")
        .expect("the consumer is running");
    match &inbound {
        Inbound::Message { envelope, .. } => (envelope.clone(), inbound),
        Inbound::Alert { text, .. } => panic!("expected a message, got the alert {text}"),
    }
}

/// Waits until the server holds nothing for the session (no message unacked, none
/// waiting) and returns how many deliveries it made in all, redeliveries included.
async fn settled(jetstream: &jetstream::Context, prefix: &Prefix) -> u64 {
    cluster::eventually("the session's consumer has nothing pending", || async {
        let stream = jetstream.get_stream(prefix.inbound_stream()).await.ok()?;
        let info = stream.consumer_info(session_consumer(SESSION)).await.ok()?;
        (info.num_ack_pending == 0 && info.num_pending == 0)
            .then_some(info.delivered.consumer_sequence)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envelope_published_twice_with_one_message_id_is_delivered_once() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("dedup");
    let ingress = publisher(&server, &prefix, cluster::gate()).await;

    let hello = envelope("hello", "42:100");
    let first = ingress.publish(SESSION, &hello).await.expect("stored");
    // The platform redelivers it (the poller restarted before confirming): published again.
    let again = ingress.publish(SESSION, &hello).await.expect("answered");
    assert!(!first.duplicate);
    assert!(again.duplicate, "the copy is dropped");
    assert_eq!(again.sequence, first.sequence);
    // The same message id on another transport is another message.
    let mut on_slack = hello.clone();
    on_slack.transport = "slack".into();
    assert!(
        !ingress
            .publish(SESSION, &on_slack)
            .await
            .expect("stored")
            .duplicate
    );
    ingress
        .publish(SESSION, &envelope("marker", "42:101"))
        .await
        .expect("stored");

    let session_node = server.jetstream().await;
    let (_consumer, mut stream) = consumer(
        &session_node,
        &prefix,
        cluster::gate(),
        Arc::new(MemoryLog::default()),
    )
    .await;
    let mut texts = Vec::new();
    for _ in 0..3 {
        let (envelope, handled) = next(&mut stream).await;
        texts.push(format!("{}:{}", envelope.transport, envelope.text));
        drop(handled);
    }
    assert_eq!(texts, ["telegram:hello", "slack:hello", "telegram:marker"]);
    assert_eq!(
        settled(&session_node, &prefix).await,
        3,
        "three deliveries in all"
    );
    assert!(stream.try_recv().is_err(), "nothing more was delivered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_not_yet_handled_when_its_node_dies_is_redelivered_to_the_next_and_a_handled_one_is_not()
 {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("ackafter");
    let ingress = publisher(&server, &prefix, cluster::gate()).await;
    for (text, id) in [("handled", "1"), ("in flight", "2")] {
        ingress
            .publish(SESSION, &envelope(text, id))
            .await
            .expect("stored");
    }

    // Node A: handles the first message, then dies while the session works on the second.
    let log = Arc::new(MemoryLog::default());
    let (node_a, mut stream_a) = consumer(
        &server.jetstream().await,
        &prefix,
        cluster::gate(),
        log.clone(),
    )
    .await;
    let (first, handled) = next(&mut stream_a).await;
    assert_eq!(first.text, "handled");
    drop(handled);
    let (second, in_flight) = next(&mut stream_a).await;
    assert_eq!(second.text, "in flight");
    let died = tokio::time::Instant::now();
    node_a.stop().await;
    // The session's half goes with it; its receipt now reaches nobody.
    drop(in_flight);
    drop(stream_a);

    // Node B binds the same durable consumer: it gets the second message, not the first.
    let session_node = server.jetstream().await;
    let (_node_b, mut stream_b) =
        consumer(&session_node, &prefix, cluster::gate(), log.clone()).await;
    let (redelivered, handled) = next(&mut stream_b).await;
    eprintln!(
        "redelivered to the next node {:?} after the first died (ack_wait {:?})",
        died.elapsed(),
        settings().ack_wait
    );
    assert_eq!(redelivered, second);
    drop(handled);
    // Handled, in flight, and the in-flight one again: nothing else was ever delivered.
    assert_eq!(settled(&session_node, &prefix).await, 3);
    assert!(
        stream_b.try_recv().is_err(),
        "the handled message did not come again"
    );
    // One line, the redelivery, which the operator's metrics count; nothing went wrong.
    let lines: Vec<(String, Option<String>)> = log
        .lines()
        .into_iter()
        .map(|(_, line)| {
            let delivered = line
                .fields
                .iter()
                .find(|(key, _)| key == "delivered")
                .map(|(_, value)| value.clone());
            (line.event, delivered)
        })
        .collect();
    assert_eq!(
        lines,
        [("nats_redelivery".to_owned(), Some("2".to_owned()))]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_session_keeps_its_message_and_a_bad_payload_is_logged_not_delivered() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("slow");
    let log = Arc::new(MemoryLog::default());
    let gate = host_shim::cluster::seal::Gate::new(
        cluster::cluster_key(),
        Arc::new(host_shim::local::clock::SystemClock),
        log.clone(),
    );
    let ingress = publisher(&server, &prefix, gate.clone()).await;
    // Something unsealed on the session's subject (another tool, an attacker): refused
    // before it is read.
    let raw = server.jetstream().await;
    let subject = prefix.inbound_subject(SESSION);
    raw.publish(subject.clone(), "not json".into())
        .await
        .expect("published")
        .await
        .expect("stored");
    // Sealed, but not an envelope (a bug, another version): read, and not delivered.
    let headers = gate.headers(&subject, "bad-1", b"not json");
    raw.publish_with_headers(subject, headers, "not json".into())
        .await
        .expect("published")
        .await
        .expect("stored");
    ingress
        .publish(SESSION, &envelope("slow turn", "3"))
        .await
        .expect("stored");

    let session_node = server.jetstream().await;
    let (_consumer, mut stream) = consumer(&session_node, &prefix, gate.clone(), log.clone()).await;
    let (slow, handled) = next(&mut stream).await;
    assert_eq!(slow.text, "slow turn");
    // The session holds it for three ack waits; "in progress" keeps it from redelivery.
    let held = tokio::time::timeout(settings().ack_wait * 3, stream.recv()).await;
    assert!(
        held.is_err(),
        "redelivered while the session still worked on it: {held:?}"
    );
    drop(handled);
    // The two bad payloads and the slow turn, once each: no redelivery.
    assert_eq!(settled(&session_node, &prefix).await, 3);

    let warnings: Vec<String> = log
        .lines()
        .into_iter()
        .map(|(_, line)| line.event)
        .collect();
    assert_eq!(warnings, ["nats_envelope_refused", "nats_bad_envelope"]);
    assert_eq!(gate.refused(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ingress_confirms_a_message_to_the_platform_only_once_jetstream_stored_it() {
    let mut server = nats_or_skip!();
    let prefix = cluster::prefix("forward");
    let publisher = publisher(&server, &prefix, cluster::gate()).await;
    // The real transport's end: it waits for each receipt before confirming to the platform.
    let (platform, from_platform) = inbound::channel(8);
    let log = Arc::new(MemoryLog::default());
    let forwarding = tokio::spawn(host_shim::cluster::inbound::forward(
        publisher,
        from_platform,
        |envelope: &Envelope| (envelope.conversation_id == "42").then(|| SESSION.to_owned()),
        log.clone(),
    ));

    tokio::time::timeout(
        cluster::WAIT,
        platform.deliver_and_wait(envelope("before", "1")),
    )
    .await
    .expect("confirmed once stored")
    .expect("the ingress runs");

    // NATS goes down: the next message is not confirmed, so the platform keeps it.
    server.kill();
    let during = platform.clone();
    let mut confirming =
        tokio::spawn(async move { during.deliver_and_wait(envelope("during", "2")).await });
    assert!(
        tokio::time::timeout(Duration::from_secs(2), &mut confirming)
            .await
            .is_err(),
        "confirmed to the platform while JetStream could not store it"
    );
    // NATS is back with its store: the message is stored and only then confirmed.
    server.restart();
    tokio::time::timeout(cluster::WAIT * 2, confirming)
        .await
        .expect("confirmed after NATS came back")
        .expect("task")
        .expect("the ingress runs");

    let session_node = server.jetstream().await;
    let (_consumer, mut stream) =
        consumer(&session_node, &prefix, cluster::gate(), log.clone()).await;
    let mut texts = Vec::new();
    for _ in 0..2 {
        let (envelope, handled) = next(&mut stream).await;
        texts.push(envelope.text);
        drop(handled);
    }
    assert_eq!(texts, ["before", "during"]);
    // Each once, though the ingress may have published "during" more than once.
    assert_eq!(settled(&session_node, &prefix).await, 2);
    forwarding.abort();
    let events: Vec<String> = log
        .lines()
        .into_iter()
        .map(|(_, line)| line.event)
        .collect();
    assert!(
        events.iter().all(|event| event == "nats_publish_failed"),
        "{events:?}"
    );
}

/// The premise of `InboundSettings::for_lease_ttl`, measured on the real server: a message
/// a dead node left unacked comes before newer ones only once `ack_wait` has passed since
/// its last delivery (or "in progress"); a node that pulls sooner gets the newer ones first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_nodes_unacked_message_comes_before_newer_ones_only_once_ack_wait_has_passed() {
    use host_shim::cluster::async_nats::jetstream::consumer;
    use host_shim::cluster::inbound::HELD_PROMPTS;
    use tokio_stream::StreamExt as _;

    let server = nats_or_skip!();
    let prefix = cluster::prefix("order");
    let ingress = publisher(&server, &prefix, cluster::gate()).await;
    let jetstream = server.jetstream().await;
    let stream = jetstream
        .get_stream(prefix.inbound_stream())
        .await
        .expect("stream");
    // The session consumer's settings (prompts held unacked until their reply is out).
    let consumer: consumer::PullConsumer = stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some(session_consumer(SESSION)),
            filter_subject: prefix.inbound_subject(SESSION),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: settings().ack_wait,
            max_ack_pending: HELD_PROMPTS,
            ..consumer::pull::Config::default()
        })
        .await
        .expect("consumer");
    let next_text = || async {
        let mut batch = consumer
            .fetch()
            .max_messages(1)
            .expires(cluster::WAIT)
            .messages()
            .await
            .expect("fetch");
        let message = tokio::time::timeout(cluster::WAIT, batch.next())
            .await
            .expect("a message within the wait")
            .expect("a message")
            .expect("no error");
        let envelope: Envelope = serde_json::from_slice(&message.payload).expect("an envelope");
        (envelope.text, message)
    };
    let publish = |text: &'static str, id: &'static str| {
        let ingress = &ingress;
        async move {
            ingress
                .publish(SESSION, &envelope(text, id))
                .await
                .expect("stored");
        }
    };

    // The dead node's prompt: delivered, never acked.
    publish("interrupted", "1").await;
    let (text, _never_acked) = next_text().await;
    assert_eq!(text, "interrupted");
    let delivered = tokio::time::Instant::now();

    // A node pulling right away gets what came since, before the interrupted prompt.
    publish("sent meanwhile", "2").await;
    let (text, early) = next_text().await;
    assert_eq!(text, "sent meanwhile");
    early.double_ack().await.expect("acked");

    // Once ack_wait has passed, the interrupted prompt comes first.
    publish("sent later", "3").await;
    tokio::time::sleep_until(delivered + settings().ack_wait + Duration::from_millis(500)).await;
    let (first, first_message) = next_text().await;
    first_message.double_ack().await.expect("acked");
    let (second, second_message) = next_text().await;
    second_message.double_ack().await.expect("acked");
    assert_eq!([first, second], ["interrupted", "sent later"]);
}
