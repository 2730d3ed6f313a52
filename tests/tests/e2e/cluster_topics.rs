//! A topic per session in the cluster (docs/scaling.md#a-topic-per-session), on a real
//! nats-server with the Telegram wire on a loopback Bot API: the ingress makes a topic for
//! a session a node runs, a message in it reaches that session without `/switch` and is
//! answered there; an ingress taking the bot over after a failover reopens nothing twice;
//! a session leaving the directory has its topic marked ended (kept); a missing right is
//! said once in the ingress's log while `/switch` keeps working.

use std::time::Duration;

use host_shim::broker::topics::topic_name;
use transport_testing::telegram::{BotApiServer, topic_text};

use crate::common::WAIT;
use crate::common::cluster::{eventually, nats_or_skip};
use crate::common::cluster_world::{Cluster, USER};

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
    assert_eq!(
        cluster.last_prompt("laptop", "serve:api").as_deref(),
        Some("build it")
    );

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
    cluster.leaves("serve:api").await;
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
    cluster.prompted("laptop", "serve:api", "long job").await;

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

/// The same flow on Discord and Slack: the ingress holding the bot makes a thread per
/// session listed in the directory, a message in it reaches that session without `/switch`
/// and is answered there, the session leaving the directory marks its thread ended (kept),
/// and a message there is answered that the session is not running.
mod threads {
    use super::*;
    use crate::common::topic_places::TopicPlace as Place;
    use serde_json::json;
    use transport_testing::discord::DiscordLoopback;
    use transport_testing::slack::SlackServer;

    /// Polls `check` until it is true, or panics with `what`, what the bot posted and the
    /// nodes' logs after [`WAIT`].
    async fn until(
        cluster: &Cluster,
        place: &dyn Place,
        what: &str,
        mut check: impl FnMut() -> bool,
    ) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !check() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "never: {what}\nposted: {}\nlogs: {:#?}",
                place.shown(),
                cluster.log_lines()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A cluster whose one bot is `place`'s (its tokens in the ingress's environment),
    /// letting its user in; `None` (said) where no nats-server can be had.
    async fn cluster(name: &str, place: &dyn Place) -> Option<Cluster> {
        let nats = match crate::common::cluster::NatsServer::start() {
            Ok(nats) => nats,
            Err(crate::common::cluster::Unavailable(reason)) => {
                eprintln!("SKIPPED (no nats-server): {reason}");
                return None;
            }
        };
        let (transports, env) = place.transports();
        let user = place.user();
        let mut cluster = Cluster::configured(nats, name, TTL, |config| {
            config["bridge"]["allowUsers"] = json!([user]);
            config["transports"] = transports;
        })
        .await;
        for (name, value) in env {
            cluster = cluster.with_env(name, value);
        }
        Some(cluster)
    }

    /// Waits for the user's `text` in `thread` to be heard (the bot connected).
    async fn say(place: &dyn Place, n: u64, thread: &str, text: &str) {
        eventually(&format!("{text:?} heard in {thread}"), || async {
            place.say(n, thread, text).then_some(())
        })
        .await;
    }

    /// Waits for the user's `text` in their direct chat to be heard (the bot connected).
    async fn dm(place: &dyn Place, n: u64, text: &str) {
        eventually(&format!("{text:?} heard in the direct chat"), || async {
            place.dm(n, text).then_some(())
        })
        .await;
    }

    async fn posted_in(place: &dyn Place, thread: &str, needle: &str) {
        eventually(&format!("{needle:?} in thread {thread}"), || async {
            place.posted_in(thread, needle).then_some(())
        })
        .await;
    }

    async fn flow(cluster: &Cluster, place: &dyn Place) {
        let ingress = cluster.ingress().await;
        let laptop = cluster
            .node("laptop", &["api", "web"], Duration::ZERO)
            .await;
        let api = eventually("api's thread", || async {
            place.topic_named(&name_of("api"))
        })
        .await;
        let web = eventually("web's thread", || async {
            place.topic_named(&name_of("web"))
        })
        .await;
        posted_in(place, &api, "talks to the session api").await;

        // No /switch: the thread is the session's own place, and the answer comes there.
        say(place, 1, &web, "build it").await;
        posted_in(place, &web, "You asked").await;
        assert_eq!(
            cluster.last_prompt("laptop", "serve:web").as_deref(),
            Some("build it")
        );
        say(place, 2, &api, "test it").await;
        posted_in(place, &api, "test it").await;
        assert_eq!(
            cluster.last_prompt("laptop", "serve:web").as_deref(),
            Some("build it"),
            "web got api's"
        );

        // The sessions leave the directory: their threads are marked ended, kept.
        laptop.shutdown().await;
        cluster.leaves("serve:web").await;
        posted_in(place, &web, "has ended").await;
        let ended = format!("ended · {}", name_of("web"));
        eventually("web's thread marked ended", || async {
            place.ended(&web, &ended).then_some(())
        })
        .await;
        say(place, 3, &web, "still there?").await;
        posted_in(place, &web, "not running now").await;
        assert_eq!(place.made(), 2, "one thread per session");

        ingress.shutdown().await;
    }

    /// A thread deleted while its session works: the answer goes to a new thread of the
    /// same name, which says why it is there, and later messages there reach the session.
    async fn deleted_flow(cluster: &Cluster, place: &dyn Place) {
        let ingress = cluster.ingress().await;
        // Paced, so the thread can be deleted between the prompt and the answer.
        let laptop = cluster
            .node("laptop", &["api"], Duration::from_millis(700))
            .await;
        let first = eventually("api's thread", || async {
            place.topic_named(&name_of("api"))
        })
        .await;
        say(place, 1, &first, "long job").await;
        cluster.prompted("laptop", "serve:api", "long job").await;

        place.delete(&first);
        until(cluster, place, "a second thread of the same name", || {
            place.made() == 2
        })
        .await;
        let second = eventually("a second thread of the same name", || async {
            place
                .topic_named(&name_of("api"))
                .filter(|second| *second != first)
        })
        .await;
        posted_in(place, &second, "was deleted").await;
        posted_in(place, &second, "You asked").await;
        say(place, 2, &second, "and again").await;
        posted_in(place, &second, "and again").await;
        assert_eq!(place.made(), 2);

        laptop.shutdown().await;
        ingress.shutdown().await;
    }

    /// The bot lacks the right to make threads: said once in the ingress's log, however
    /// many sessions, and the direct chat still reaches each session with `/switch`.
    async fn refused_flow(cluster: &Cluster, place: &dyn Place) {
        let ingress = cluster.ingress().await;
        let node = cluster
            .node("laptop", &["api", "web"], Duration::ZERO)
            .await;
        let said = || {
            cluster
                .log_lines()
                .into_iter()
                .filter(|line| line.contains("session topic not made"))
                .collect::<Vec<String>>()
        };
        eventually("the refusal said", || async {
            (!said().is_empty()).then_some(())
        })
        .await;
        dm(place, 1, "/switch web").await;
        until(cluster, place, "/switch answered", || {
            place.answered_dm("now talks to web")
        })
        .await;
        dm(place, 2, "deploy").await;
        eventually("the prompt answered", || async {
            place.answered_dm("You asked").then_some(())
        })
        .await;
        let said = said();
        assert_eq!(said.len(), 1, "said once: {said:#?}");
        assert!(said[0].contains(place.refusal().0), "{said:#?}");
        assert_eq!(place.made(), 2, "each session asked once: no retry storm");

        node.shutdown().await;
        ingress.shutdown().await;
    }

    /// Runs `flow` on `place`, with the right to make threads or without.
    macro_rules! on {
        ($place:expr, $name:literal, $with_right:expr, $flow:ident) => {{
            let place = $place;
            place.open_place($with_right);
            let Some(cluster) = cluster($name, &place).await else {
                return;
            };
            $flow(&cluster, &place).await;
        }};
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn on_discord_the_ingress_makes_a_thread_per_session_routes_it_and_archives_it() {
        on!(DiscordLoopback::start().await, "ctopicsdiscord", true, flow);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn on_slack_the_ingress_makes_a_thread_per_session_routes_it_and_ends_it() {
        on!(SlackServer::start().await, "ctopicsslack", true, flow);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn on_discord_a_thread_deleted_by_hand_is_made_again_and_the_reply_goes_there() {
        on!(
            DiscordLoopback::start().await,
            "ctopicsdiscordgone",
            true,
            deleted_flow
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn on_slack_a_thread_deleted_by_hand_is_made_again_and_the_reply_goes_there() {
        on!(
            SlackServer::start().await,
            "ctopicsslackgone",
            true,
            deleted_flow
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn on_discord_a_missing_permission_is_said_once_and_switch_keeps_working() {
        on!(
            DiscordLoopback::start().await,
            "ctopicsdiscordrights",
            false,
            refused_flow
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn on_slack_a_channel_without_the_bot_is_said_once_and_switch_keeps_working() {
        on!(
            SlackServer::start().await,
            "ctopicsslackrights",
            false,
            refused_flow
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn topics_in_private_chats_are_said_to_be_serves_alone_and_switch_keeps_working() {
    let nats = nats_or_skip!();
    let cluster = Cluster::configured(nats, "ctopicsprivate", TTL, |config| {
        config["transports"]["telegram"]["sessionTopics"] = "private".into();
    })
    .await;
    cluster.bot.set_private_topics(true);
    let ingress = cluster.ingress().await;
    let node = cluster
        .node("laptop", &["api", "web"], Duration::ZERO)
        .await;
    let said = || -> Vec<String> {
        cluster
            .log_lines()
            .into_iter()
            .filter(|line| line.contains("session topic not made"))
            .collect()
    };
    eventually("the ingress says why", || async {
        (!said().is_empty()).then_some(())
    })
    .await;
    // Both sessions are in the directory (announced before this line is logged).
    eventually("both sessions listed", || async {
        let started = cluster
            .log_lines()
            .iter()
            .filter(|line| line.contains("session started"))
            .count();
        (started == 2).then_some(())
    })
    .await;
    cluster.say(1, "/switch web", "now talks to web").await;
    cluster.say(2, "deploy", "You asked").await;
    let said = said();
    assert_eq!(said.len(), 1, "said once, not at every look: {said:#?}");
    assert!(said[0].contains("without --nats"), "{said:#?}");
    assert_eq!(cluster.bot.calls("createForumTopic"), 0);

    node.shutdown().await;
    ingress.shutdown().await;
}
