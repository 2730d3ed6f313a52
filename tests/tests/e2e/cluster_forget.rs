//! Forgetting a session (docs/scaling.md#forgetting-a-session), on a real nats-server with
//! Telegram's wire on a loopback Bot API: a session that left for good, forgotten by its
//! operator or by the ingress once it has been offline too long, leaves `/sessions`, its
//! waiting messages are dropped, each chat bound to it is told once and a later message gets
//! an answer, not silence; its state is kept, so when it does come back it is listed again.

use std::time::Duration;

use host_shim::cluster::directory::{Directory, ForgetReason};
use host_shim::cluster::forgetting;

use transport_testing::telegram::private_text;

use crate::common::cluster::{eventually, nats_or_skip};
use crate::common::cluster_world::{Cluster, USER};

async fn directory(cluster: &Cluster) -> Directory {
    Directory::open(
        &cluster.nats.jetstream().await,
        &cluster.prefix,
        &cluster.gate,
    )
    .await
    .expect("directory")
}

/// Waits until the tombstone of `session` says its Telegram chat was told.
async fn marked_told(directory: &Directory, session: &str) {
    eventually("the tombstone is marked told", || async {
        let listed = directory.entry(session).await.ok()??;
        listed
            .entry
            .forgotten?
            .told
            .contains("telegram")
            .then_some(())
    })
    .await;
}

/// Messages waiting in `session`'s stream (published, not yet acked).
async fn waiting(cluster: &Cluster, session: &str) -> u64 {
    use tokio_stream::StreamExt as _;
    let jetstream = cluster.nats.jetstream().await;
    let stream = jetstream
        .get_stream(cluster.prefix.inbound_stream())
        .await
        .expect("the inbound stream");
    let subject = cluster.prefix.inbound_subject(session);
    let mut subjects = stream
        .info_with_subjects(subject.clone())
        .await
        .expect("stream info");
    let mut count = 0;
    while let Some(Ok((name, messages))) = subjects.next().await {
        if name == subject {
            count += messages as u64;
        }
    }
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_forgets_a_session_that_left_its_chats_hear_it_once_and_it_can_come_back() {
    let nats = nats_or_skip!();
    let cluster = Cluster::new(nats, "forget").await;
    let ingress = cluster.ingress().await;
    let node = cluster.node_running("node-a", &["api", "web"]).await;
    cluster.say(1, "/switch api", "now talks to api").await;
    cluster.say(2, "hello", "You asked").await;
    // Acked once its turn settled: only what is sent from now on waits.
    cluster.drained("serve:api").await;

    // api leaves every node's list: the node is restarted with web only.
    node.shutdown().await;
    let node = cluster.node_running("node-a", &["web"]).await;
    cluster.say(3, "are you there?", "is offline").await;
    assert_eq!(waiting(&cluster, "serve:api").await, 1);

    // A session still running is not forgotten (its node would list it again at once).
    let directory = directory(&cluster).await;
    let entries = directory.entries().await.expect("entries");
    let web = forgetting::resolve("web", &entries).expect("web is listed");
    assert!(
        host_shim::cluster::directory::state_of(
            &web.entry,
            &host_shim::cluster::directory::PresenceReader::new(
                cluster.nats.jetstream().await,
                &cluster.prefix
            )
            .read()
            .await
            .expect("presence")
        ) != host_shim::broker::routing::SessionState::Offline
    );
    let api = forgetting::resolve("api", &entries).expect("api is listed");
    let forgot = forgetting::forget(
        &cluster.nats.jetstream().await,
        &cluster.prefix,
        &directory,
        api,
        ForgetReason::Operator,
    )
    .await
    .expect("forgotten");
    assert_eq!(forgot.dropped, 1, "the waiting message was dropped");
    assert_eq!(waiting(&cluster, "serve:api").await, 0);
    // Forgetting the same reading again finds the entry changed: nothing is done twice.
    let again = forgetting::forget(
        &cluster.nats.jetstream().await,
        &cluster.prefix,
        &directory,
        api,
        ForgetReason::Operator,
    )
    .await;
    assert!(
        matches!(again, Err(forgetting::ForgetError::Changed { .. })),
        "{again:?}"
    );

    // The chat bound to it is told once, at the ingress's next look.
    let told = "🗑 The session api on node-a was removed from the cluster (by its operator)";
    cluster.posted(told).await;
    marked_told(&directory, "serve:api").await;
    // Several looks later, still once.
    cluster.not_posted_again(told, Duration::from_secs(1)).await;
    // /sessions no longer lists it.
    let list = cluster
        .say(4, "/sessions", "Sessions you are paired with")
        .await;
    assert!(!list.contains("api"), "{list}");
    assert!(list.contains("web"), "{list}");
    // Its next message is answered, not published for nobody; the chat is unbound, so the
    // one after is routed afresh (to the only session left).
    cluster
        .say(
            5,
            "anyone?",
            "was removed from the cluster (by its operator), so this message was not delivered",
        )
        .await;
    assert_eq!(waiting(&cluster, "serve:api").await, 0);
    cluster
        .say(6, "then you", "You asked: <i>then you</i>")
        .await;

    // Its state was kept: it comes back listed, and its chats can reach it again.
    let kept = cluster.kept_state("serve:api").await;
    assert!(kept.document.is_some(), "{kept:?}");
    node.shutdown().await;
    let node = cluster.node_running("node-a", &["api", "web"]).await;
    cluster.say(7, "/switch api", "now talks to api").await;
    cluster.say(8, "back?", "You asked: <i>back?</i>").await;
    node.shutdown().await;
    ingress.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_ingress_forgets_a_session_offline_longer_than_its_limit_and_tells_its_chat_once() {
    let nats = nats_or_skip!();
    let mut cluster = Cluster::new(nats, "expire").await;
    cluster.forget_offline_after = Some(Duration::from_secs(2));
    let ingress = cluster.ingress().await;
    let node = cluster.node_running("node-a", &["api"]).await;
    cluster.say(1, "hello", "You asked").await;
    // Running: older than the limit, never forgotten while its node holds it.
    let directory = directory(&cluster).await;
    let running_for = cluster
        .bot
        .wait_until(Duration::from_secs(3), |s| {
            s.sent()
                .iter()
                .any(|m| m.text.contains("removed from the cluster"))
        })
        .await;
    assert!(!running_for, "{:#?}", cluster.bot.sent());

    node.shutdown().await;
    cluster
        .bot
        .queue_update(private_text(USER, 2, "still there?"));
    let told = "🗑 The session api on node-a was removed from the cluster (after 2 seconds offline)";
    cluster.posted(told).await;
    marked_told(&directory, "serve:api").await;
    assert_eq!(
        directory.sessions().await.expect("sessions").len(),
        0,
        "no longer listed"
    );
    assert_eq!(waiting(&cluster, "serve:api").await, 0);
    assert_eq!(cluster.sent_with(told), 1, "{:#?}", cluster.bot.sent());
    let forgotten_lines: Vec<String> = cluster
        .log_lines()
        .into_iter()
        .filter(|line| line.starts_with("ingress: session forgotten"))
        .collect();
    assert_eq!(forgotten_lines.len(), 1, "{forgotten_lines:#?}");
    assert!(
        forgotten_lines[0].contains("after 2 seconds offline"),
        "{forgotten_lines:#?}"
    );
    ingress.shutdown().await;
}
