//! A topic per session (docs/broker.md#a-topic-per-session), on each platform's real wire
//! through the broker `serve` runs (bindings and topics in the state database): a session
//! that attaches gets its own topic, named after it; a message there reaches it without
//! `/switch` and its reply goes back there; its end marks the topic ended (kept); a missing
//! right is said once while `/switch` keeps working; a topic deleted by hand is made again.

use host_shim::local::ui::RecordingUi;
use host_shim::wit::session::{AgentEvent, TurnOrigin};
use serde_json::json;

use crate::common::broker_world::World;
use crate::common::{Dirs, ScriptAgent, WAIT};

/// The topic name a session `name` in `/work/<name>` gets on this machine.
fn topic_name(name: &str) -> String {
    format!("{name} · {name} · {}", host_shim::disk::lock::host_name())
}

/// Polls `check` until it is true; panics with `what` after [`WAIT`].
async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// [`until`], describing what never happened with `what()` (read at the deadline).
async fn until_with(what: impl Fn() -> String, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "never: {}", what());
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Waits for a note in `ui` (the session's terminal) containing `needle`.
async fn shown(ui: &RecordingUi, needle: &str) {
    until(&format!("a note containing {needle:?}"), || {
        ui.notes().iter().any(|(_, t)| t.contains(needle))
    })
    .await;
}

/// How many notes containing `needle` the terminals `uis` show in all.
fn told(uis: &[&RecordingUi], needle: &str) -> usize {
    uis.iter()
        .map(|ui| {
            ui.notes()
                .iter()
                .filter(|(_, t)| t.contains(needle))
                .count()
        })
        .sum()
}

/// The agent answers its running remote turn with `text`.
async fn answer(agent: &ScriptAgent, text: &str) {
    agent
        .emit(AgentEvent::TurnStarted(TurnOrigin::Remote))
        .await;
    agent
        .emit(AgentEvent::AssistantMessage(text.to_owned()))
        .await;
    agent.emit(AgentEvent::TurnSettled).await;
}

/// The same three flows on each platform (a Telegram forum, a Discord channel, a Slack
/// channel), each a test per platform.
mod flows {
    use super::*;
    use crate::common::topic_places::TopicPlace;
    use transport_testing::discord::DiscordLoopback;
    use transport_testing::slack::SlackServer;
    use transport_testing::telegram::BotApiServer;

    async fn world(place: &dyn TopicPlace, dirs: Dirs) -> World {
        let (transports, env) = place.transports();
        World::new(dirs, transports, env).await
    }

    fn users(place: &dyn TopicPlace) -> Vec<String> {
        vec![place.user()]
    }

    /// Polls `check` until it is true, or panics with `what` and what the bot posted.
    async fn until_at(place: &dyn TopicPlace, what: &str, check: impl FnMut() -> bool) {
        until_with(|| format!("{what}: {}", place.shown()), check).await;
    }

    /// The latest topic called `name`, once it is there.
    async fn topic(place: &dyn TopicPlace, name: &str) -> String {
        until_at(place, &format!("a topic named {name:?}"), || {
            place.topic_named(name).is_some()
        })
        .await;
        place.topic_named(name).expect("found")
    }

    async fn posted_in(place: &dyn TopicPlace, topic: &str, needle: &str) {
        until_at(place, &format!("{needle:?} in topic {topic}"), || {
            place.posted_in(topic, needle)
        })
        .await;
    }

    /// The user's `text` in `topic`, once the bot is connected to hear it.
    async fn say(place: &dyn TopicPlace, n: u64, topic: &str, text: &str) {
        until_at(place, &format!("{text:?} heard in {topic}"), || {
            place.say(n, topic, text)
        })
        .await;
    }

    async fn dm(place: &dyn TopicPlace, n: u64, text: &str) {
        until_at(place, &format!("{text:?} heard in the direct chat"), || {
            place.dm(n, text)
        })
        .await;
    }

    /// A session that attaches gets its own topic, named after it; a message there reaches
    /// it without `/switch` and its answer goes back there; the broker's own commands are
    /// answered there; its end marks the topic ended (kept), and a message in it is told
    /// so; a restarted broker finds the topic by name and opens it again.
    async fn made_used_ended_and_found_again(place: &dyn TopicPlace) {
        place.open_place(true);
        let world = world(place, Dirs::new()).await;
        let api = world.attach("api", &users(place)).await;
        let web = world.attach("web", &users(place)).await;
        let api_topic = topic(place, &topic_name("api")).await;
        let web_topic = topic(place, &topic_name("web")).await;
        posted_in(place, &web_topic, "talks to the session web").await;

        // No /switch: the topic is the session's own place.
        say(place, 100, &web_topic, "build it").await;
        web.agent.wait_for_prompts(1).await;
        assert!(
            api.agent.prompts.lock().unwrap().is_empty(),
            "api got web's"
        );
        answer(&web.agent, "built in the topic").await;
        posted_in(place, &web_topic, "built in the topic").await;
        say(place, 101, &api_topic, "test it").await;
        api.agent.wait_for_prompts(1).await;
        assert_eq!(web.agent.prompts.lock().unwrap().len(), 1);

        // The broker's own commands are still the broker's, answered in the topic.
        say(place, 102, &api_topic, "/sessions").await;
        posted_in(place, &api_topic, "2. web").await;
        assert_eq!(api.agent.prompts.lock().unwrap().len(), 1, "not a prompt");

        // The end: a last message, then marked ended, never deleted.
        web.session.shutdown().await.expect("shutdown");
        posted_in(place, &web_topic, "has ended").await;
        let ended = format!("ended · {}", topic_name("web"));
        until_at(place, "web's topic marked ended", || {
            place.ended(&web_topic, &ended)
        })
        .await;
        // A message in the ended topic is not lost silently.
        say(place, 103, &web_topic, "still there?").await;
        posted_in(place, &web_topic, "not running now").await;

        // A restarted broker finds the topic by name and opens it again: no second topic.
        api.session.shutdown().await.expect("shutdown");
        let world = world.restart().await;
        let web = world.attach("web", &users(place)).await;
        posted_in(place, &web_topic, "running again").await;
        until_at(place, "web's topic open again", || {
            place.open_again(&web_topic, &topic_name("web"))
        })
        .await;
        assert_eq!(place.made(), 2, "reused, not made again");
        say(place, 104, &web_topic, "again").await;
        web.agent.wait_for_prompts(1).await;

        web.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    /// The bot lacks the right to make topics: said once in the log and one terminal,
    /// nothing retried, and the direct chat reaches each session with `/switch`.
    async fn a_missing_right_said_once(place: &dyn TopicPlace) {
        place.open_place(false);
        let (logged, told_to_grant) = place.refusal();
        let world = world(place, Dirs::new()).await;
        let api = world.attach("api", &users(place)).await;
        let web = world.attach("web", &users(place)).await;
        until_at(place, "both sessions asked for a topic", || {
            place.made() == 2
        })
        .await;
        until("the terminal hears it", || {
            told(&[&api.ui, &web.ui], told_to_grant) > 0
        })
        .await;
        let said = world.logged("session topic not made");
        assert_eq!(said.len(), 1, "said once: {said:#?}");
        assert!(said[0].contains(logged), "{said:#?}");

        dm(place, 200, "/switch web").await;
        until_at(place, "the switch answered", || {
            place.answered_dm("This chat now talks to web")
        })
        .await;
        dm(place, 201, "deploy").await;
        web.agent.wait_for_prompts(1).await;
        assert_eq!(place.made(), 2, "no retry storm");
        assert_eq!(
            told(&[&api.ui, &web.ui], told_to_grant),
            1,
            "one terminal, once"
        );

        api.session.shutdown().await.expect("shutdown");
        web.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    /// A topic deleted while the agent works: the answer goes to a new topic of the same
    /// name, which says why (so does the terminal); deleted again while the session is
    /// away, the next attach makes a third.
    async fn deleted_made_again(place: &dyn TopicPlace) {
        place.open_place(true);
        let world = world(place, Dirs::new()).await;
        let api = world.attach("api", &users(place)).await;
        let first = topic(place, &topic_name("api")).await;
        say(place, 300, &first, "long job").await;
        api.agent.wait_for_prompts(1).await;

        place.delete(&first);
        answer(&api.agent, "the long job is done").await;
        until_at(place, "a second topic", || {
            place.made() == 2 && place.topic_named(&topic_name("api")) != Some(first.clone())
        })
        .await;
        let second = topic(place, &topic_name("api")).await;
        posted_in(place, &second, "the long job is done").await;
        posted_in(place, &second, "was deleted").await;
        shown(&api.ui, "was deleted").await;
        // Messages in the new topic reach the session.
        say(place, 301, &second, "thanks").await;
        api.agent.wait_for_prompts(2).await;

        // Deleted again while detached: the next attach makes a third.
        api.session.shutdown().await.expect("shutdown");
        world.broker.detach("key-api");
        place.delete(&second);
        let api = world.attach("api", &users(place)).await;
        until_at(place, "a third topic", || place.made() == 3).await;
        let third = topic(place, &topic_name("api")).await;
        assert_ne!(third, second);
        posted_in(place, &third, "was deleted").await;
        say(place, 302, &third, "hello again").await;
        api.agent.wait_for_prompts(1).await;

        api.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    #[tokio::test]
    async fn telegram_a_session_gets_its_own_topic_talks_there_and_ends_it_on_detach() {
        made_used_ended_and_found_again(&BotApiServer::start().await).await;
    }

    #[tokio::test]
    async fn discord_a_session_gets_its_own_thread_talks_there_and_archives_it_on_detach() {
        made_used_ended_and_found_again(&DiscordLoopback::start().await).await;
    }

    #[tokio::test]
    async fn slack_a_session_gets_its_own_thread_talks_there_and_ends_it_on_detach() {
        made_used_ended_and_found_again(&SlackServer::start().await).await;
    }

    #[tokio::test]
    async fn telegram_a_missing_right_is_said_once_and_switch_keeps_working() {
        a_missing_right_said_once(&BotApiServer::start().await).await;
    }

    #[tokio::test]
    async fn discord_missing_permissions_are_said_once_and_switch_keeps_working() {
        a_missing_right_said_once(&DiscordLoopback::start().await).await;
    }

    #[tokio::test]
    async fn slack_a_channel_without_the_bot_is_said_once_and_switch_keeps_working() {
        a_missing_right_said_once(&SlackServer::start().await).await;
    }

    #[tokio::test]
    async fn telegram_a_topic_deleted_by_hand_is_made_again_and_the_reply_goes_there() {
        deleted_made_again(&BotApiServer::start().await).await;
    }

    #[tokio::test]
    async fn discord_a_thread_deleted_by_hand_is_made_again_and_the_reply_goes_there() {
        deleted_made_again(&DiscordLoopback::start().await).await;
    }

    #[tokio::test]
    async fn slack_a_thread_whose_parent_was_deleted_is_made_again_and_the_reply_goes_there() {
        deleted_made_again(&SlackServer::start().await).await;
    }
}

mod telegram_private {
    use super::*;
    use transport_testing::telegram::{BotApiServer, private_text, private_topic_text};

    const ADA: i64 = 4242;
    const BOB: i64 = 4343;

    async fn world(server: &BotApiServer, dirs: Dirs) -> World {
        let transports = json!({"telegram": {
            "enabled": true,
            "tokenEnv": "TG_TEST_TOKEN",
            "baseUrl": server.base_url(),
            "pollTimeoutSeconds": 1,
            "sessionTopics": "private",
        }});
        World::new(dirs, transports, vec![("TG_TEST_TOKEN", server.token())]).await
    }

    fn users(ids: &[i64]) -> Vec<String> {
        ids.iter().map(|id| format!("telegram:{id}")).collect()
    }

    /// The thread id of the topic called `name` in `user`'s private chat, once it is there.
    async fn topic(server: &BotApiServer, user: i64, name: &str) -> i64 {
        until_with(
            || {
                format!(
                    "a topic named {name:?} in {user}'s chat: {:#?}",
                    server.topics(user)
                )
            },
            || server.topics(user).iter().any(|t| t.name == name),
        )
        .await;
        server
            .topics(user)
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| t.message_thread_id)
            .expect("found")
    }

    /// Waits for a message of the bot in topic `thread` of `user`'s chat with `needle`.
    async fn posted_in(server: &BotApiServer, user: i64, thread: i64, needle: &str) {
        let what = format!("{needle:?} in topic {thread} of {user}'s chat");
        until_with(
            || format!("{what}: sent {:#?}", server.sent()),
            || {
                server.sent().iter().any(|m| {
                    m.chat_id == user.to_string()
                        && m.message_thread_id == Some(thread)
                        && m.text.contains(needle)
                })
            },
        )
        .await;
    }

    /// The pairing code the session's terminal shows.
    fn code_shown(ui: &RecordingUi) -> String {
        let notes = ui.notes();
        let (_, note) = notes
            .iter()
            .rev()
            .find(|(_, text)| text.contains("Messenger pairing code:"))
            .expect("a pairing code was shown locally");
        let after = note.split("Messenger pairing code:").nth(1).unwrap_or("");
        after
            .split('(')
            .next()
            .unwrap_or("")
            .chars()
            .filter(char::is_ascii_digit)
            .collect()
    }

    #[tokio::test]
    async fn each_user_gets_a_topic_per_session_talks_there_and_it_is_renamed_at_the_end() {
        let server = BotApiServer::start().await;
        server.set_private_topics(true);
        let world = world(&server, Dirs::new()).await;
        let api = world.attach("api", &users(&[ADA, BOB])).await;
        let web = world.attach("web", &users(&[ADA, BOB])).await;

        // One topic per user and session, each in the user's own chat with the bot.
        let ada_api = topic(&server, ADA, &topic_name("api")).await;
        let ada_web = topic(&server, ADA, &topic_name("web")).await;
        let bob_api = topic(&server, BOB, &topic_name("api")).await;
        let bob_web = topic(&server, BOB, &topic_name("web")).await;
        assert_eq!(server.topics(ADA).len(), 2);
        assert_eq!(server.topics(BOB).len(), 2);
        posted_in(&server, ADA, ada_web, "talks to the session web").await;
        posted_in(&server, BOB, bob_api, "talks to the session api").await;

        // No /switch: a message in a session's topic (is_topic_message, a private chat)
        // reaches that session, and its answer goes back there.
        server.queue_update(private_topic_text(ADA, ada_web, 100, "build it"));
        web.agent.wait_for_prompts(1).await;
        assert!(
            api.agent.prompts.lock().unwrap().is_empty(),
            "api got web's"
        );
        answer(&web.agent, "built in ada's topic").await;
        posted_in(&server, ADA, ada_web, "built in ada's topic").await;
        server.queue_update(private_topic_text(BOB, bob_api, 101, "test it"));
        api.agent.wait_for_prompts(1).await;
        assert_eq!(web.agent.prompts.lock().unwrap().len(), 1);

        // The end: a last message in every user's topic, renamed, never deleted; a private
        // chat's topic cannot be closed (closeForumTopic is for forum groups).
        web.session.shutdown().await.expect("shutdown");
        posted_in(&server, ADA, ada_web, "has ended").await;
        posted_in(&server, BOB, bob_web, "has ended").await;
        for (user, thread) in [(ADA, ada_web), (BOB, bob_web)] {
            let ended = server
                .topics(user)
                .into_iter()
                .find(|t| t.message_thread_id == thread)
                .expect("kept, not deleted");
            assert_eq!(ended.name, format!("ended · {}", topic_name("web")));
        }
        assert_eq!(server.calls("closeForumTopic"), 0);
        assert_eq!(server.calls("reopenForumTopic"), 0);
        server.queue_update(private_topic_text(ADA, ada_web, 102, "still there?"));
        posted_in(&server, ADA, ada_web, "not running now").await;
        // The other session's topic in the same chat still reaches it.
        server.queue_update(private_topic_text(ADA, ada_api, 104, "and the api?"));
        api.agent.wait_for_prompts(2).await;

        // A restarted broker finds each user's topic by name and names it again.
        api.session.shutdown().await.expect("shutdown");
        let world = world.restart().await;
        let web = world.attach("web", &users(&[ADA, BOB])).await;
        posted_in(&server, ADA, ada_web, "running again").await;
        posted_in(&server, BOB, bob_web, "running again").await;
        for (user, thread) in [(ADA, ada_web), (BOB, bob_web)] {
            let reopened = server
                .topics(user)
                .into_iter()
                .find(|t| t.message_thread_id == thread)
                .expect("kept");
            assert_eq!(reopened.name, topic_name("web"));
        }
        assert_eq!(
            server.calls("createForumTopic"),
            4,
            "reused, not made again"
        );
        server.queue_update(private_topic_text(BOB, bob_web, 103, "again"));
        web.agent.wait_for_prompts(1).await;

        web.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    #[tokio::test]
    async fn a_user_who_pairs_gets_the_sessions_topic_at_once() {
        let server = BotApiServer::start().await;
        server.set_private_topics(true);
        let world = world(&server, Dirs::new()).await;
        let api = world.attach("api", &[]).await;
        // Nobody is paired yet: no topic anywhere.
        server.queue_update(private_text(ADA, 1, "hello"));
        until("the pairing prompt", || {
            server.sent().iter().any(|m| m.text.contains("not paired"))
        })
        .await;
        assert_eq!(server.calls("createForumTopic"), 0);

        let code = code_shown(&api.ui);
        server.queue_update(private_text(ADA, 2, &code));
        let thread = topic(&server, ADA, &topic_name("api")).await;
        posted_in(&server, ADA, thread, "talks to the session api").await;
        server.queue_update(private_topic_text(ADA, thread, 3, "first job"));
        api.agent.wait_for_prompts(1).await;
        // Their next message in the chat itself adds no second topic.
        server.queue_update(private_text(ADA, 4, "and another"));
        api.agent.wait_for_prompts(2).await;
        assert_eq!(
            server.calls("createForumTopic"),
            1,
            "one topic for the pair"
        );

        api.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    #[tokio::test]
    async fn a_user_who_pairs_in_a_group_gets_their_private_topic_with_their_next_message_there() {
        const GROUP: i64 = -1_009_876_543_210;
        let mention = json!([{"type": "mention", "offset": 0, "length": 6}]);
        let said = |n: i64, text: &str| {
            transport_testing::telegram::group_text(
                GROUP,
                ADA,
                n,
                &format!("@piBot {text}"),
                mention.clone(),
            )
        };
        let server = BotApiServer::start().await;
        server.set_private_topics(true);
        let world = world(&server, Dirs::new()).await;
        let api = world.attach("api", &[]).await;
        server.queue_update(said(1, "hello"));
        until("the pairing prompt", || {
            server.sent().iter().any(|m| m.text.contains("not paired"))
        })
        .await;
        server.queue_update(said(2, &code_shown(&api.ui)));
        until("paired", || {
            server.sent().iter().any(|m| m.text.contains("Paired as"))
        })
        .await;
        // The group is not the user's chat: the answer there makes no private topic.
        assert_eq!(server.calls("createForumTopic"), 0);

        // Their next message in the group finds them paired: their topic is made.
        server.queue_update(said(3, "build it"));
        api.agent.wait_for_prompts(1).await;
        let thread = topic(&server, ADA, &topic_name("api")).await;
        posted_in(&server, ADA, thread, "talks to the session api").await;
        server.queue_update(private_topic_text(ADA, thread, 4, "from my own chat"));
        api.agent.wait_for_prompts(2).await;
        assert_eq!(server.calls("createForumTopic"), 1);

        api.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    #[tokio::test]
    async fn without_topic_mode_the_bot_says_once_what_to_turn_on_and_switch_keeps_working() {
        let server = BotApiServer::start().await;
        // A bot as @BotFather makes it: getMe says has_topics_enabled: false.
        let world = world(&server, Dirs::new()).await;
        let api = world.attach("api", &users(&[ADA, BOB])).await;
        let web = world.attach("web", &users(&[ADA, BOB])).await;
        until_with(
            || format!("said: {:#?}", world.logged("session topic not made")),
            || !world.logged("session topic not made").is_empty(),
        )
        .await;
        until("a terminal hears it", || {
            told(&[&api.ui, &web.ui], "Threaded Mode") > 0
        })
        .await;

        server.queue_update(private_text(ADA, 1, "/switch web"));
        until("the switch answered", || {
            server
                .sent()
                .iter()
                .any(|m| m.text.contains("This chat now talks to web"))
        })
        .await;
        server.queue_update(private_text(ADA, 2, "deploy"));
        web.agent.wait_for_prompts(1).await;

        let said = world.logged("session topic not made");
        assert_eq!(
            said.len(),
            1,
            "said once for both sessions and users: {said:#?}"
        );
        assert!(said[0].contains("@BotFather"), "{said:#?}");
        assert_eq!(
            told(&[&api.ui, &web.ui], "Threaded Mode"),
            1,
            "one terminal, once"
        );
        // getMe said so: nothing was asked in vain, per user or per session.
        assert_eq!(server.calls("createForumTopic"), 0);
        assert!(server.topics(ADA).is_empty() && server.topics(BOB).is_empty());

        // Threaded Mode turned on meanwhile: the next attach asks again, no restart needed.
        server.set_private_topics(true);
        let docs = world.attach("docs", &users(&[ADA, BOB])).await;
        topic(&server, ADA, &topic_name("docs")).await;
        topic(&server, BOB, &topic_name("docs")).await;
        docs.session.shutdown().await.expect("shutdown");

        api.session.shutdown().await.expect("shutdown");
        web.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    #[tokio::test]
    async fn a_private_topic_deleted_by_hand_is_made_again_in_that_users_chat() {
        let server = BotApiServer::start().await;
        server.set_private_topics(true);
        let world = world(&server, Dirs::new()).await;
        let api = world.attach("api", &users(&[ADA, BOB])).await;
        let first = topic(&server, ADA, &topic_name("api")).await;
        let bobs = topic(&server, BOB, &topic_name("api")).await;
        server.queue_update(private_topic_text(ADA, first, 100, "long job"));
        api.agent.wait_for_prompts(1).await;

        server.delete_topic(ADA, first);
        answer(&api.agent, "the long job is done").await;
        until("a second topic in ada's chat", || {
            server.topics(ADA).len() == 1 && server.calls("createForumTopic") == 3
        })
        .await;
        let second = topic(&server, ADA, &topic_name("api")).await;
        assert_ne!(second, first);
        posted_in(&server, ADA, second, "the long job is done").await;
        posted_in(&server, ADA, second, "was deleted").await;
        // Bob's topic is his and untouched.
        assert_eq!(topic(&server, BOB, &topic_name("api")).await, bobs);

        api.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }
}
