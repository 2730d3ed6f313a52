//! At most once to the platform per send (`cluster/posted.rs`), on a real nats-server: a
//! send whose answer does not come is asked again with the same send id and posted once; a
//! copy reaching another ingress returns the first receipt; a send whose ingress died
//! mid-post is not posted again, and its chat is told; a refused post may go again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use host_shim::cluster::async_nats::jetstream;
use host_shim::cluster::outbound::{OutboundServer, RemoteTransport};
use host_shim::cluster::outbox::{Outbox, OutboxDrain};
use host_shim::cluster::posted::{PostLedger, Unposted};
use host_shim::cluster::subjects::Prefix;
use host_shim::local::logging::MemoryLog;
use tokio::sync::Semaphore;
use tokio_stream::StreamExt as _;
use transport_core::{
    BotIdentity, Capabilities, InboundSink, OutboundMessage, SendReceipt, Transport,
    TransportError, inbound,
};
use transport_testing::fake::{FakeConfig, FakeTransport};

use crate::common::cluster::{
    self, NatsServer, drain_to, eventually, nats_or_skip, remote_with_outbox,
};

fn reply(text: &str) -> OutboundMessage {
    crate::common::reply_in("42", text)
}

/// A platform whose posts wait until the test lets each one through: a slow platform, or
/// one whose answer the session node does not hear in time.
struct HeldPlatform {
    fake: FakeTransport,
    passes: Semaphore,
    /// Posts asked of it so far, let through or not.
    asked: AtomicUsize,
}

impl HeldPlatform {
    /// `fake` behind a gate that lets nothing through yet.
    fn new(fake: FakeTransport) -> Arc<HeldPlatform> {
        Arc::new(HeldPlatform {
            fake,
            passes: Semaphore::new(0),
            asked: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl Transport for HeldPlatform {
    fn id(&self) -> &str {
        self.fake.id()
    }
    fn capabilities(&self) -> Capabilities {
        self.fake.capabilities()
    }
    async fn identify(&self) -> Result<BotIdentity, TransportError> {
        self.fake.identify().await
    }
    async fn start(&self, sink: InboundSink) -> Result<(), TransportError> {
        self.fake.start(sink).await
    }
    async fn stop(&self) {
        self.fake.stop().await
    }
    async fn send(&self, message: OutboundMessage) -> Result<SendReceipt, TransportError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let pass = self
            .passes
            .acquire()
            .await
            .expect("the semaphore stays open");
        pass.forget();
        self.fake.send(message).await
    }
    fn diagnose(&self) -> String {
        format!("held: {}", self.fake.diagnose())
    }
}

async fn telegram() -> FakeTransport {
    let fake = FakeTransport::new(FakeConfig {
        id: "telegram".into(),
        ..FakeConfig::default()
    });
    let (sink, _stream) = inbound::channel(4);
    fake.start(sink).await.expect("the fake starts");
    fake
}

/// A ledger of its own: what one ingress process remembers.
async fn ledger(jetstream: &jetstream::Context, prefix: &Prefix) -> PostLedger {
    PostLedger::open(
        jetstream,
        prefix,
        &cluster::gate(),
        Arc::new(MemoryLog::default()),
    )
    .await
    .expect("the posted ledger opens")
}

fn texts(fake: &FakeTransport) -> Vec<String> {
    fake.sent().into_iter().map(|m| m.message.text).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_whose_answer_is_late_is_asked_again_and_posted_once() {
    let server: NatsServer = nats_or_skip!();
    let prefix = cluster::prefix("posted1");
    let client = server.connect().await;
    let jetstream = jetstream::new(client.clone());
    let fake = telegram().await;
    let platform = HeldPlatform::new(fake.handle());
    let log = Arc::new(MemoryLog::default());
    let _ingress = OutboundServer::start(
        server.connect().await,
        &prefix,
        platform.clone(),
        ledger(&jetstream, &prefix).await,
        cluster::gate(),
        log,
    )
    .await
    .expect("serving");
    // Sees every request the ingress gets (a plain subscription beside its queue group).
    let watcher = server.connect().await;
    let mut requests = watcher
        .subscribe(prefix.outbound_subject("telegram").expect("subject"))
        .await
        .expect("subscribed");
    watcher.flush().await.expect("flushed");

    let remote = RemoteTransport::new(
        client,
        &prefix,
        "telegram",
        fake.capabilities(),
        Duration::from_secs(20),
        cluster::gate(),
    )
    .expect("a valid id");
    let (sink, _stream) = inbound::channel(4);
    remote.start(sink).await.expect("started");
    let remote = Arc::new(remote);
    let remote_again = remote.clone();
    let sending = tokio::spawn(async move { remote.send(reply("the answer")).await });

    // The first try gets no answer while the platform holds the post; the session node asks
    // again, with the same send id.
    let mut ids = Vec::new();
    while ids.len() < 2 {
        let request = tokio::time::timeout(cluster::WAIT, requests.next())
            .await
            .expect("the send is asked again while no answer comes")
            .expect("subscription open");
        let body: serde_json::Value =
            serde_json::from_slice(&request.payload).expect("a request in JSON");
        ids.push(body["send_id"].as_str().expect("a send id").to_owned());
    }
    assert_eq!(ids[0], ids[1], "the copy came with another send id");
    platform.passes.add_permits(8);
    let receipt = tokio::time::timeout(cluster::WAIT, sending)
        .await
        .expect("answered once the platform posts")
        .expect("the send task")
        .expect("posted");
    assert_eq!(texts(&fake), ["the answer"], "posted once");
    assert_eq!(receipt.message_id, fake.sent()[0].message_id);

    // An edit carries no send id: asked twice it changes nothing, and a mark for each of a
    // progress card's edits would fill the ledger.
    let mut edit = reply("the answer, edited");
    edit.edit_key = receipt
        .edit_key
        .clone()
        .or(Some(receipt.message_id.clone()));
    let editing = tokio::spawn(async move { remote_again.send(edit).await });
    let request = tokio::time::timeout(cluster::WAIT, requests.next())
        .await
        .expect("the edit is asked")
        .expect("subscription open");
    let body: serde_json::Value =
        serde_json::from_slice(&request.payload).expect("a request in JSON");
    assert!(body.get("send_id").is_none(), "{body}");
    tokio::time::timeout(cluster::WAIT, editing)
        .await
        .expect("answered")
        .expect("the edit task")
        .expect("edited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_at_another_ingress_gets_the_first_receipt_or_a_notice_never_a_second_post() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("posted2");
    let client = server.connect().await;
    let jetstream = jetstream::new(client.clone());
    let fake = telegram().await;
    let first = ledger(&jetstream, &prefix).await;
    let second = ledger(&jetstream, &prefix).await;

    // Posted by the first ingress; a copy at the second gets its receipt, and posts nothing.
    let posted = first
        .post_once("send-a", || fake.send(reply("a")))
        .await
        .expect("posted");
    let copy = second
        .post_once("send-a", || fake.send(reply("a, again")))
        .await
        .expect("the first receipt");
    assert_eq!(copy, posted);
    // And at the first itself (its memory).
    let again = first
        .post_once("send-a", || fake.send(reply("a, once more")))
        .await
        .expect("the first receipt");
    assert_eq!(again, posted);
    assert_eq!(texts(&fake), ["a"]);

    // Refused by the platform: nothing was posted, so a copy posts.
    fake.queue_faults([TransportError::Failed("chat not found".into())]);
    let refused = first.post_once("send-b", || fake.send(reply("b"))).await;
    assert_eq!(
        refused,
        Err(Unposted::Refused(TransportError::Failed(
            "chat not found".into()
        )))
    );
    second
        .post_once("send-b", || fake.send(reply("b")))
        .await
        .expect("a refused send may go again");
    assert_eq!(texts(&fake), ["a", "b"]);

    // The first ingress dies while the platform holds its post: a copy at the second may
    // have been posted, so it is not posted again.
    let held = HeldPlatform::new(fake.handle());
    let dying = {
        let (first, held) = (first.clone(), held.clone());
        tokio::spawn(async move { first.post_once("send-c", || held.send(reply("c"))).await })
    };
    // The post starts only once its mark is written: wait for the platform to be asked.
    eventually("the first ingress starts posting send-c", || {
        let held = held.clone();
        async move { (held.asked.load(Ordering::SeqCst) > 0).then_some(()) }
    })
    .await;
    dying.abort();
    let copy = second
        .post_once("send-c", || fake.send(reply("c, again")))
        .await;
    assert_eq!(copy, Err(Unposted::MayHaveBeenPosted));
    assert_eq!(texts(&fake), ["a", "b"]);

    // Parked copies of those sends, drained by a third holder: the posted one is not posted
    // again, the one caught mid-post becomes a notice, a new one is posted.
    let outbox = Outbox::open(jetstream.clone(), prefix.clone(), cluster::gate())
        .await
        .expect("the outbox opens");
    for (text, send_id) in [
        ("a, parked", Some("send-a")),
        ("c, parked", Some("send-c")),
        ("d", Some("send-d")),
    ] {
        outbox
            .park("telegram", &reply(text), send_id)
            .await
            .expect("parked");
    }
    let mut drain = OutboxDrain::start(
        jetstream.clone(),
        &prefix,
        Arc::new(fake.handle()),
        ledger(&jetstream, &prefix).await,
        cluster::gate(),
        Arc::new(MemoryLog::default()),
    )
    .await
    .expect("the drain starts");
    assert!(drain.drained(cluster::WAIT).await);
    let told = texts(&fake);
    assert_eq!(told.len(), 4, "{told:?}");
    assert!(told[2].contains("may not have been posted"), "{told:?}");
    assert_eq!(told[3], "d");
    drain.stop();
    drop(client);
}

/// The session node's side of an ingress that went away mid-post: the copy it asks again
/// reaches the next ingress, which cannot know whether the first posted it. The bridge gets
/// an error that says so, nothing is posted a second time, and the chat is told once an
/// ingress holds the bot, so the person knows to ask again if the answer is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_caught_mid_post_by_an_ingress_that_went_away_is_told_in_its_chat() {
    let server = nats_or_skip!();
    let prefix = cluster::prefix("posted3");
    let jetstream = jetstream::new(server.connect().await);
    let fake = telegram().await;
    let log = Arc::new(MemoryLog::default());
    let held = HeldPlatform::new(fake.handle());
    let first = OutboundServer::start(
        server.connect().await,
        &prefix,
        held.clone(),
        ledger(&jetstream, &prefix).await,
        cluster::gate(),
        log.clone(),
    )
    .await
    .expect("serving");
    let remote =
        Arc::new(remote_with_outbox(&server, &prefix, &fake, Duration::from_secs(20)).await);
    let sending = {
        let remote = remote.clone();
        tokio::spawn(async move { remote.send(reply("the answer")).await })
    };
    eventually("the first ingress starts posting", || {
        let held = held.clone();
        async move { (held.asked.load(Ordering::SeqCst) > 0).then_some(()) }
    })
    .await;
    // The next ingress serves before the first goes: a copy that found nobody would be kept
    // in the outbox rather than answered.
    let _second = OutboundServer::start(
        server.connect().await,
        &prefix,
        Arc::new(fake.handle()),
        ledger(&jetstream, &prefix).await,
        cluster::gate(),
        log.clone(),
    )
    .await
    .expect("serving");
    first.stop();

    let error = tokio::time::timeout(cluster::WAIT, sending)
        .await
        .expect("answered by the next ingress")
        .expect("the send task")
        .expect_err("not posted again");
    assert!(
        matches!(&error, TransportError::Failed(message)
            if message.contains("went away while it did")
                && message.contains("was not posted again")),
        "{error:?}"
    );
    assert!(texts(&fake).is_empty(), "posted again: {:?}", texts(&fake));
    let mut holder = drain_to(&server, &prefix, Arc::new(fake.handle()), log).await;
    assert!(holder.drained(cluster::WAIT).await);
    let told = texts(&fake);
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains("may not have been posted"), "{told:?}");
    holder.stop();
}
