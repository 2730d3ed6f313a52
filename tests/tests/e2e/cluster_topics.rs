//! A topic per session in the cluster (docs/scaling.md#a-topic-per-session), on a real
//! nats-server with the Telegram wire on a loopback Bot API: the ingress makes a topic for
//! a session a node runs, a message in it reaches that session without `/switch` and is
//! answered there; an ingress taking the bot over after a failover reopens nothing twice;
//! a session leaving the directory has its topic marked ended (kept); a missing right is
//! said once in the ingress's log while `/switch` keeps working.

use std::time::Duration;

use host_shim::agent::Agent as _;
use host_shim::broker::topics::topic_name;
use host_shim::cluster::subjects::session_token;
use transport_testing::telegram::{BotApiServer, topic_text};

use crate::cluster_serve::{Cluster, USER};
use crate::common::WAIT;
use crate::common::cluster::{eventually, nats_or_skip};

const FORUM: i64 = -1_001_234_567_890;
const TTL: Duration = Duration::from_secs(1);

/// A cluster whose config names [`FORUM`] for topics, the fake forum made with the bot's
/// right to manage topics or without it.
async fn cluster(
    nats: crate::common::cluster::NatsServer,
    name: &str,
    can_manage_topics: bool,
) -> Cluster {
    let cluster = Cluster::configured(nats, name, TTL, |config| {
        config["transports"]["telegram"]["sessionTopics"] = FORUM.to_string().into();
    })
    .await;
    cluster.bot.add_group(FORUM, true, can_manage_topics);
    cluster
}

/// The name of the topic of session `name` (in `/work/<name>`) on machine `laptop`.
fn name_of(name: &str) -> String {
    topic_name(name, &format!("/work/{name}"), "laptop", 128)
}

/// The thread id of the topic called `name`, once it is there.
async fn topic(bot: &BotApiServer, name: &str) -> i64 {
    eventually(&format!("a topic named {name:?}"), || async {
        bot.topics(FORUM)
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| t.message_thread_id)
    })
    .await
}

/// Waits for a message of the bot in `thread` of the forum holding `needle`.
async fn posted_in(bot: &BotApiServer, thread: i64, needle: &str) {
    let found = bot
        .wait_until(WAIT, |s| {
            s.sent().iter().any(|m| {
                m.chat_id == FORUM.to_string()
                    && m.message_thread_id == Some(thread)
                    && m.text.contains(needle)
            })
        })
        .await;
    assert!(found, "no {needle:?} in topic {thread}: {:#?}", bot.sent());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_ingress_makes_a_topic_per_session_routes_it_without_switch_and_ends_it_when_the_session_leaves()
 {
    let nats = nats_or_skip!();
    let cluster = cluster(nats, "ctopics", true).await;
    let first = cluster.ingress().await;
    let standby = cluster.ingress().await;
    let laptop = cluster.node("laptop", &["api"], Duration::ZERO).await;

    let api = topic(&cluster.bot, &name_of("api")).await;
    posted_in(&cluster.bot, api, "talks to the session api").await;

    // No /switch: the topic is the session's own place, and the answer comes back there.
    cluster
        .bot
        .queue_update(topic_text(FORUM, api, USER, 100, "build it"));
    posted_in(&cluster.bot, api, "You asked").await;
    let agent = cluster
        .agents
        .lock()
        .unwrap()
        .get(&("laptop".to_owned(), "serve:api".to_owned()))
        .cloned()
        .expect("the node runs api");
    assert_eq!(agent.recent_work().last_prompt.as_deref(), Some("build it"));

    // Someone with the NATS login but not the cluster key claims another thread of the
    // forum for the session: the standby reading the bucket refuses it.
    let jetstream = cluster.nats.jetstream().await;
    let kept = jetstream
        .get_key_value(cluster.prefix.topic_bucket())
        .await
        .expect("the topics bucket");
    let forged = serde_json::json!({
        "kept": "session-topic:telegram:-1001234567890|forged",
        "record": {"transport": "telegram", "session": "serve:api", "name": "forged",
                   "topic": {"conversationId": FORUM.to_string(), "threadId": "555"},
                   "ended": false}});
    kept.put("forged", forged.to_string().into_bytes().into())
        .await
        .expect("forged value written");
    let refused_before = cluster.gate.refused();

    // The ingress holding the bot dies; the standby takes it over and finds the topic in
    // the bucket: no second topic, and the topic still reaches the session.
    first.kill().await;
    cluster
        .bot
        .queue_update(topic_text(FORUM, api, USER, 101, "ship it"));
    posted_in(&cluster.bot, api, "ship it").await;
    assert_eq!(
        cluster.bot.calls("createForumTopic"),
        1,
        "{:#?}",
        cluster.bot.topics(FORUM)
    );
    assert!(
        cluster.gate.refused() > refused_before,
        "the forged topic was not refused: {:#?}",
        cluster.log_lines()
    );

    // The session leaves the directory (its node stopped and its entry deleted, as
    // `nats kv del` does): its topic is marked ended, kept, and a message there answered.
    laptop.shutdown().await;
    let sessions = jetstream
        .get_key_value(cluster.prefix.session_bucket())
        .await
        .expect("the sessions bucket");
    sessions
        .delete(session_token("serve:api"))
        .await
        .expect("entry deleted");
    posted_in(&cluster.bot, api, "has ended").await;
    let ended = eventually("the topic marked ended", || async {
        cluster
            .bot
            .topics(FORUM)
            .into_iter()
            .find(|t| t.message_thread_id == api && t.closed)
    })
    .await;
    assert_eq!(ended.name, format!("ended · {}", name_of("api")));
    cluster
        .bot
        .queue_update(topic_text(FORUM, api, USER, 102, "still there?"));
    posted_in(&cluster.bot, api, "not running now").await;
    assert_eq!(cluster.bot.calls("createForumTopic"), 1);

    standby.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_right_to_make_topics_is_said_once_and_switch_keeps_working() {
    let nats = nats_or_skip!();
    let cluster = cluster(nats, "ctopicsrights", false).await;
    let ingress = cluster.ingress().await;
    let node = cluster
        .node("laptop", &["api", "web"], Duration::ZERO)
        .await;
    eventually("both sessions asked for a topic", || async {
        (cluster.bot.calls("createForumTopic") == 2).then_some(())
    })
    .await;
    let said: Vec<String> = cluster
        .log_lines()
        .into_iter()
        .filter(|line| line.contains("session topic not made"))
        .collect();
    assert_eq!(said.len(), 1, "said once: {said:#?}");
    assert!(said[0].contains("can_manage_topics"), "{said:#?}");

    cluster.say(1, "/switch web", "now talks to web").await;
    cluster.say(2, "deploy", "You asked").await;

    node.shutdown().await;
    ingress.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_topic_deleted_by_hand_while_its_session_works_is_made_again_and_the_reply_goes_there() {
    let nats = nats_or_skip!();
    let cluster = cluster(nats, "ctopicsgone", true).await;
    let ingress = cluster.ingress().await;
    // Paced, so the topic can be deleted between the prompt and the answer.
    let laptop = cluster
        .node("laptop", &["api"], Duration::from_millis(700))
        .await;
    let first = topic(&cluster.bot, &name_of("api")).await;
    cluster
        .bot
        .queue_update(topic_text(FORUM, first, USER, 100, "long job"));
    eventually("the prompt reaches the session", || async {
        let agent = cluster
            .agents
            .lock()
            .unwrap()
            .get(&("laptop".to_owned(), "serve:api".to_owned()))
            .cloned()?;
        (agent.recent_work().last_prompt.as_deref() == Some("long job")).then_some(())
    })
    .await;

    cluster.bot.delete_topic(FORUM, first);
    eventually("a second topic of the same name", || async {
        (cluster.bot.calls("createForumTopic") == 2).then_some(())
    })
    .await;
    let second = topic(&cluster.bot, &name_of("api")).await;
    assert_ne!(second, first);
    posted_in(&cluster.bot, second, "was deleted").await;
    posted_in(&cluster.bot, second, "You asked").await;

    // Messages in the new topic reach the session and are answered there.
    cluster
        .bot
        .queue_update(topic_text(FORUM, second, USER, 101, "and again"));
    posted_in(&cluster.bot, second, "and again").await;
    assert_eq!(cluster.bot.calls("createForumTopic"), 2);

    laptop.shutdown().await;
    ingress.shutdown().await;
}
