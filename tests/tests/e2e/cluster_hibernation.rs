//! Idle sessions on a cluster session node (docs/scaling.md#idle-sessions): a session the
//! node runs hibernates once quiet (its instance dropped; its lease, its inbound consumer
//! and its remote bots kept), and the next message through the ingress wakes it and is
//! answered exactly once: the wake happens while JetStream waits for the message's ack,
//! so a wake that outlived the ack wait without saying "in progress" would have the
//! message handed out again and answered twice.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use host_shim::agent::{Agent, DemoAgent};
use host_shim::cluster::session_node::Wanted;
use host_shim::sandbox::hibernation::{HibernatedCount, Hibernation};
use host_shim::wit::agent::SessionInfo;

use crate::common::cluster_world::Cluster;
use crate::common::cluster::{eventually, nats_or_skip};
use crate::common::soak::CountingAgent;

/// The node's idle time: far below what `--hibernate-after` accepts (a minute), so the
/// session's own timer comes within the test; the decision is the same at any length.
const AFTER: Duration = Duration::from_millis(300);

/// The node's log lines called `event`.
fn logged(cluster: &Cluster, event: &str) -> usize {
    let prefix = format!("node-a: {event} ");
    cluster
        .log_lines()
        .iter()
        .filter(|line| line.starts_with(&prefix))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hibernated_session_on_a_cluster_node_wakes_for_a_message_and_answers_it_once() {
    let nats = nats_or_skip!();
    let cluster = Cluster::new(nats, "hibernate").await;
    let ingress = cluster.ingress().await;
    let count = HibernatedCount::default();
    let prompts: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut options = cluster.node_options("node-a", &["api"], Duration::ZERO);
    options.hibernation = Hibernation::after(AFTER, count.clone());
    let kept = prompts.clone();
    options.agent = Arc::new(move |wanted: &Wanted| {
        // Every prompt handed to it is written down: a prompt handed twice is a message
        // answered twice, whatever the chat shows.
        Arc::new(CountingAgent {
            inner: DemoAgent::new(
                Duration::ZERO,
                SessionInfo {
                    id: wanted.key.clone(),
                    name: Some(wanted.name.clone()),
                    cwd: wanted.cwd.clone(),
                    accepts_images: true,
                },
            ),
            prompts: kept.clone(),
        }) as Arc<dyn Agent>
    });
    let node = cluster.start_node(options).await.expect("node starts");
    eventually("api runs on node-a", || async {
        (node.running() == ["serve:api"]).then_some(())
    })
    .await;
    cluster.say(1, "/switch api", "now talks to api").await;
    cluster.say(2, "before the nap", "You asked").await;

    // Nobody writes: the session's own timer finds it quiet and it sleeps, still placed
    // on this node (its lease and consumer are not the instance's).
    eventually("api hibernated on node-a", || async {
        (count.get() == 1).then_some(())
    })
    .await;
    assert_eq!(
        node.running(),
        ["serve:api"],
        "a sleeping session stays placed"
    );
    let slept_before = logged(&cluster, "session hibernated");
    assert!(slept_before >= 1, "{:#?}", cluster.log_lines());
    let woke_before = logged(&cluster, "session woke");

    // The next message, through the ingress and JetStream, wakes it and is answered once.
    cluster
        .say(3, "after the nap", "You asked: <i>after the nap</i>")
        .await;
    cluster.drained("serve:api").await;
    // Anything a second delivery would do is done once the consumer has nothing left: the
    // message reached the agent once and its answer was posted once.
    assert_eq!(
        prompts
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.contains("after the nap"))
            .count(),
        1,
        "{:?}",
        prompts.lock().unwrap()
    );
    assert_eq!(
        cluster.sent_with("You asked: <i>after the nap</i>"),
        1,
        "{:#?}",
        cluster.bot.sent()
    );
    assert!(
        logged(&cluster, "session woke") > woke_before,
        "{:#?}",
        cluster.log_lines()
    );
    assert!(
        !cluster
            .log_lines()
            .iter()
            .any(|line| line.contains("guest trap") || line.contains("could not wake")),
        "{:#?}",
        cluster.log_lines()
    );

    // Quiet again, it sleeps again: the wake started its idle time over.
    eventually("api hibernated again", || async {
        (logged(&cluster, "session hibernated") > slept_before && count.get() == 1).then_some(())
    })
    .await;
    node.shutdown().await;
    assert_eq!(
        count.get(),
        0,
        "a session shut down asleep is no longer counted"
    );
    ingress.shutdown().await;
}
