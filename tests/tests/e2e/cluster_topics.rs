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

/// The same flow on Discord and Slack: the ingress holding the bot makes a thread per
/// session listed in the directory, a message in it reaches that session without `/switch`
/// and is answered there, the session leaving the directory marks its thread ended (kept),
/// and a message there is answered that the session is not running.
mod threads {
    use super::*;
    use serde_json::json;
    use transport_testing::discord::{DiscordLoopback, START_THREAD, dm_message, thread_message};
    use transport_testing::slack::{SlackServer, channel_message, im_message, in_thread};

    /// One platform's loopback server as this flow drives it.
    trait Place {
        /// Where a thread called `name` is, once it is there.
        fn thread_named(&self, name: &str) -> Option<String>;
        /// Whether the bot posted `needle` in thread `thread`.
        fn posted_in(&self, thread: &str, needle: &str) -> bool;
        /// The user writes `text` in thread `thread`; `false` while the bot is not
        /// connected to hear it.
        fn say(&self, n: u64, thread: &str, text: &str) -> bool;
        /// Whether thread `thread` is marked ended, under `ended` (its name, or its parent
        /// message's text).
        fn ended(&self, thread: &str, ended: &str) -> bool;
        /// How many threads the bot asked to make (refused ones included).
        fn made(&self) -> usize;
        /// Deletes thread `thread`, as a person does by hand.
        fn delete(&self, thread: &str);
        /// The user writes `text` in their direct chat with the bot; `false` while the
        /// bot is not connected to hear it.
        fn dm(&self, n: u64, text: &str) -> bool;
        /// Whether the bot posted `needle` in the user's direct chat.
        fn answered_dm(&self, needle: &str) -> bool;
        /// What the bot posted, for a failure's message.
        fn shown(&self) -> String;
    }

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

    const DISCORD_USER: &str = "555000111222333444";
    const GUILD: &str = "777000111222333444";
    const DISCORD_CHANNEL: &str = "888000111222333444";
    const DISCORD_DM: &str = "999000111222333444";

    impl Place for DiscordLoopback {
        fn thread_named(&self, name: &str) -> Option<String> {
            self.rest
                .threads()
                .into_iter()
                .find(|t| t.name == name)
                .map(|t| t.id)
        }
        fn posted_in(&self, thread: &str, needle: &str) -> bool {
            self.rest
                .created()
                .iter()
                .any(|m| m.channel_id == thread && m.content.contains(needle))
        }
        fn say(&self, n: u64, thread: &str, text: &str) -> bool {
            let message = thread_message(&n.to_string(), thread, GUILD, DISCORD_USER, text);
            self.gateway.message_create(message).is_some()
        }
        fn ended(&self, thread: &str, ended: &str) -> bool {
            self.rest
                .threads()
                .iter()
                .any(|t| t.id == thread && t.archived && t.name == ended)
        }
        fn made(&self) -> usize {
            self.rest.calls(START_THREAD)
        }
        fn delete(&self, thread: &str) {
            self.rest.delete_thread(thread);
        }
        fn dm(&self, n: u64, text: &str) -> bool {
            let message = dm_message(&n.to_string(), DISCORD_DM, DISCORD_USER, text);
            self.gateway.message_create(message).is_some()
        }
        fn answered_dm(&self, needle: &str) -> bool {
            self.posted_in(DISCORD_DM, needle)
        }
        fn shown(&self) -> String {
            format!("{:#?} {:#?}", self.rest.created(), self.rest.threads())
        }
    }

    const SLACK_USER: &str = "U0ADA";
    const SLACK_CHANNEL: &str = "C0SESSIONS";
    const SLACK_DM: &str = "D0ADA";

    impl Place for SlackServer {
        fn thread_named(&self, name: &str) -> Option<String> {
            // The latest: a parent deleted by hand stays in the record of what was posted.
            self.posted()
                .into_iter()
                .rev()
                .find(|p| {
                    p.channel == SLACK_CHANNEL && p.thread_ts.is_none() && p.text.contains(name)
                })
                .map(|p| p.ts)
        }
        fn posted_in(&self, thread: &str, needle: &str) -> bool {
            self.posted().iter().any(|p| {
                p.channel == SLACK_CHANNEL
                    && p.thread_ts.as_deref() == Some(thread)
                    && p.text.contains(needle)
            })
        }
        fn say(&self, n: u64, thread: &str, text: &str) -> bool {
            let Some(connection) = self.open_connections().last().copied() else {
                return false;
            };
            let at = format!("1700000100.{n:06}");
            let event = in_thread(
                channel_message(SLACK_CHANNEL, SLACK_USER, &at, text),
                thread,
            );
            self.send_event(connection, event).is_some()
        }
        fn ended(&self, thread: &str, ended: &str) -> bool {
            self.message_text(SLACK_CHANNEL, thread)
                .is_some_and(|text| text.contains(ended))
        }
        fn made(&self) -> usize {
            self.requests("chat.postMessage")
                .iter()
                .filter(|r| r["channel"] == SLACK_CHANNEL && r["thread_ts"].is_null())
                .count()
        }
        fn delete(&self, thread: &str) {
            self.delete_message(SLACK_CHANNEL, thread);
        }
        fn dm(&self, n: u64, text: &str) -> bool {
            let Some(connection) = self.open_connections().last().copied() else {
                return false;
            };
            let at = format!("1700000200.{n:06}");
            let event = im_message(SLACK_DM, SLACK_USER, &at, text);
            self.send_event(connection, event).is_some()
        }
        fn answered_dm(&self, needle: &str) -> bool {
            self.posted()
                .iter()
                .any(|p| p.channel == SLACK_DM && p.text.contains(needle))
        }
        fn shown(&self) -> String {
            format!("{:#?}", self.posted())
        }
    }

    /// A cluster whose one bot is `transports` (its tokens in `env`), letting `user` in.
    async fn cluster(
        nats: crate::common::cluster::NatsServer,
        name: &str,
        user: String,
        transports: serde_json::Value,
        env: &[(&str, String)],
    ) -> Cluster {
        let mut cluster = Cluster::configured(nats, name, TTL, |config| {
            config["bridge"]["allowUsers"] = json!([user]);
            config["transports"] = transports;
        })
        .await;
        for (name, value) in env {
            cluster = cluster.with_env(name, value.clone());
        }
        cluster
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
            place.thread_named(&name_of("api"))
        })
        .await;
        let web = eventually("web's thread", || async {
            place.thread_named(&name_of("web"))
        })
        .await;
        posted_in(place, &api, "talks to the session api").await;

        // No /switch: the thread is the session's own place, and the answer comes there.
        say(place, 1, &web, "build it").await;
        posted_in(place, &web, "You asked").await;
        let agent = |session: &str| {
            cluster
                .agents
                .lock()
                .unwrap()
                .get(&("laptop".to_owned(), format!("serve:{session}")))
                .cloned()
                .expect("the node runs it")
        };
        assert_eq!(
            agent("web").recent_work().last_prompt.as_deref(),
            Some("build it")
        );
        say(place, 2, &api, "test it").await;
        posted_in(place, &api, "test it").await;
        assert_eq!(
            agent("web").recent_work().last_prompt.as_deref(),
            Some("build it"),
            "web got api's"
        );

        // The sessions leave the directory: their threads are marked ended, kept.
        laptop.shutdown().await;
        let jetstream = cluster.nats.jetstream().await;
        let sessions = jetstream
            .get_key_value(cluster.prefix.session_bucket())
            .await
            .expect("the sessions bucket");
        sessions
            .delete(session_token("serve:web"))
            .await
            .expect("entry deleted");
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
            place.thread_named(&name_of("api"))
        })
        .await;
        say(place, 1, &first, "long job").await;
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

        place.delete(&first);
        until(cluster, place, "a second thread of the same name", || {
            place.made() == 2
        })
        .await;
        let second = eventually("a second thread of the same name", || async {
            place
                .thread_named(&name_of("api"))
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
    async fn refused_flow(cluster: &Cluster, place: &dyn Place, right: &str) {
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
        assert!(said[0].contains(right), "{said:#?}");
        assert_eq!(place.made(), 2, "each session asked once: no retry storm");

        node.shutdown().await;
        ingress.shutdown().await;
    }

    fn discord_transports(loopback: &DiscordLoopback) -> serde_json::Value {
        json!({"discord": {
            "enabled": true,
            "tokenEnv": "DISCORD_TEST_TOKEN",
            "baseUrl": loopback.base_url(),
            "readyTimeoutSeconds": 10,
            "sessionTopics": DISCORD_CHANNEL,
        }})
    }

    async fn discord_cluster(name: &str, loopback: &DiscordLoopback) -> Option<Cluster> {
        let nats = match crate::common::cluster::NatsServer::start() {
            Ok(nats) => nats,
            Err(crate::common::cluster::Unavailable(reason)) => {
                eprintln!("SKIPPED (no nats-server): {reason}");
                return None;
            }
        };
        Some(
            cluster(
                nats,
                name,
                format!("discord:{DISCORD_USER}"),
                discord_transports(loopback),
                &[("DISCORD_TEST_TOKEN", loopback.token())],
            )
            .await,
        )
    }

    fn slack_transports(server: &SlackServer) -> serde_json::Value {
        json!({"slack": {
            "enabled": true,
            "tokenEnv": "SLACK_E2E_BOT",
            "appTokenEnv": "SLACK_E2E_APP",
            "baseUrl": server.base_url(),
            "sessionTopics": SLACK_CHANNEL,
        }})
    }

    async fn slack_cluster(name: &str, server: &SlackServer) -> Option<Cluster> {
        let nats = match crate::common::cluster::NatsServer::start() {
            Ok(nats) => nats,
            Err(crate::common::cluster::Unavailable(reason)) => {
                eprintln!("SKIPPED (no nats-server): {reason}");
                return None;
            }
        };
        Some(
            cluster(
                nats,
                name,
                format!("slack:{SLACK_USER}"),
                slack_transports(server),
                &[
                    ("SLACK_E2E_BOT", server.bot_token()),
                    ("SLACK_E2E_APP", server.app_token()),
                ],
            )
            .await,
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn on_discord_a_thread_deleted_by_hand_is_made_again_and_the_reply_goes_there() {
        let loopback = DiscordLoopback::start().await;
        loopback.rest.add_text_channel(DISCORD_CHANNEL, true);
        let Some(cluster) = discord_cluster("ctopicsdiscordgone", &loopback).await else {
            return;
        };
        deleted_flow(&cluster, &loopback).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn on_slack_a_thread_deleted_by_hand_is_made_again_and_the_reply_goes_there() {
        let server = SlackServer::start().await;
        server.add_channel(SLACK_CHANNEL, true);
        let Some(cluster) = slack_cluster("ctopicsslackgone", &server).await else {
            return;
        };
        deleted_flow(&cluster, &server).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn on_discord_a_missing_permission_is_said_once_and_switch_keeps_working() {
        let loopback = DiscordLoopback::start().await;
        loopback.rest.add_text_channel(DISCORD_CHANNEL, false);
        let Some(cluster) = discord_cluster("ctopicsdiscordrights", &loopback).await else {
            return;
        };
        refused_flow(&cluster, &loopback, "Missing Permissions").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn on_slack_a_channel_without_the_bot_is_said_once_and_switch_keeps_working() {
        let server = SlackServer::start().await;
        server.add_channel(SLACK_CHANNEL, false);
        let Some(cluster) = slack_cluster("ctopicsslackrights", &server).await else {
            return;
        };
        refused_flow(&cluster, &server, "not_in_channel").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn on_discord_the_ingress_makes_a_thread_per_session_routes_it_and_archives_it() {
        let loopback = DiscordLoopback::start().await;
        loopback.rest.add_text_channel(DISCORD_CHANNEL, true);
        let Some(cluster) = discord_cluster("ctopicsdiscord", &loopback).await else {
            return;
        };
        flow(&cluster, &loopback).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn on_slack_the_ingress_makes_a_thread_per_session_routes_it_and_ends_it() {
        let server = SlackServer::start().await;
        server.add_channel(SLACK_CHANNEL, true);
        let Some(cluster) = slack_cluster("ctopicsslack", &server).await else {
            return;
        };
        flow(&cluster, &server).await;
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
