//! A topic per session (docs/broker.md#a-topic-per-session), on each platform's real wire
//! through the broker `serve` runs (bindings and topics in the state database): a session
//! that attaches gets its own topic, named after it; a message there reaches it without
//! `/switch` and its reply goes back there; its end marks the topic ended (kept); a missing
//! right is said once while `/switch` keeps working; a topic deleted by hand is made again.

use std::sync::Arc;

use host_shim::broker::bindings::{self, Bindings};
use host_shim::broker::{Broker, BrokerOptions};
use host_shim::factory::{self, Environment};
use host_shim::local::clock::ManualClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::RecordingUi;
use host_shim::sandbox::session::{Session, SessionSpec};
use host_shim::wit::session::{AgentEvent, TurnOrigin};
use serde_json::{Value, json};

use crate::common::{Dirs, ScriptAgent, WAIT, runtime, user_config};

/// One attached session.
struct Attached {
    session: Session,
    agent: Arc<ScriptAgent>,
    ui: Arc<RecordingUi>,
}

/// A broker as `serve` builds it (bindings and topics kept in the state database) for one
/// platform's loopback server, whose token the "environment" holds.
struct World {
    dirs: Dirs,
    broker: Arc<Broker>,
    log: Arc<MemoryLog>,
    /// `transports` of the user's config file.
    transports: Value,
    /// The "environment": the platform's token variables.
    env: Env,
}

/// Variables and their values, as the process environment would hold them.
type Env = Vec<(&'static str, String)>;

impl World {
    async fn new(dirs: Dirs, transports: Value, env: Env) -> World {
        let log = Arc::new(MemoryLog::default());
        let broker = broker(&dirs, log.clone(), env.clone()).await;
        World {
            dirs,
            broker,
            log,
            transports,
            env,
        }
    }

    /// Stops the broker and starts another on the same state, as a restarted `serve`.
    async fn restart(self) -> World {
        self.broker.shutdown().await;
        let World {
            transports,
            env,
            dirs,
            ..
        } = self;
        let dirs = Dirs {
            state: Dirs::open_state(&dirs.dir),
            dir: dirs.dir,
        };
        World::new(dirs, transports, env).await
    }

    async fn attach(&self, name: &str, users: &[String]) -> Attached {
        let key = format!("key-{name}");
        let config = json!({
            "bridge": {"allowUsers": users},
            "transports": self.transports,
        });
        let sources = vec![user_config(&config.to_string())];
        let agent = Arc::new(ScriptAgent::default());
        let ui = Arc::new(RecordingUi::default());
        self.broker
            .attach(
                &key,
                name,
                &format!("/work/{name}"),
                &sources,
                agent.clone(),
            )
            .expect("attaches");
        let spec = SessionSpec {
            key: key.clone(),
            config_sources: sources,
            platforms: factory::declarations(),
            transports: self.broker.transports(&key),
            agent: agent.clone(),
            ui: ui.clone(),
            state: self.dirs.state.clone(),
            locks: self.dirs.locks(),
            pairing: self.broker.pairing(),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            log: Arc::new(MemoryLog::default()),
            exclusive: true,
            transcript: None,
        };
        let session = Session::spawn(runtime(), spec)
            .await
            .expect("session starts");
        Attached { session, agent, ui }
    }

    /// How many times the broker logged `event`.
    fn logged(&self, event: &str) -> Vec<String> {
        self.log
            .lines()
            .into_iter()
            .filter(|(_, line)| line.event == event)
            .map(|(_, line)| format!("{:?}", line.fields))
            .collect()
    }
}

async fn broker(dirs: &Dirs, log: Arc<MemoryLog>, env: Env) -> Arc<Broker> {
    let state_dir = dirs.dir.path().to_path_buf();
    let (kept, _) = Bindings::kept_in(
        dirs.state.clone(),
        &bindings::path_beside(&dirs.dir.path().join("state.json")),
    )
    .await
    .expect("bindings");
    Broker::new(BrokerOptions {
        locks: dirs.locks(),
        clock: Arc::new(ManualClock::new(1_700_000_000_000)),
        log,
        build: Arc::new(move |request| {
            let var = |wanted: &str| {
                env.iter()
                    .find(|(name, _)| *name == wanted)
                    .map(|(_, value)| value.clone())
            };
            factory::build(
                std::slice::from_ref(request),
                None,
                &Environment {
                    var: &var,
                    state_dir: Some(state_dir.clone()),
                },
            )
        }),
        state_file: Some(dirs.dir.path().join("state.json")),
        bindings: kept,
        status_file: None,
        pairing: host_shim::sandbox::pairing_budget::PairingBudget::default(),
    })
}

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

mod telegram {
    use super::*;
    use transport_testing::telegram::{BotApiServer, private_text, topic_text};

    const USER: i64 = 4242;
    const FORUM: i64 = -1_001_234_567_890;

    async fn world(server: &BotApiServer, dirs: Dirs) -> World {
        let transports = json!({"telegram": {
            "enabled": true,
            "tokenEnv": "TG_TEST_TOKEN",
            "baseUrl": server.base_url(),
            "pollTimeoutSeconds": 1,
            "sessionTopics": FORUM.to_string(),
        }});
        World::new(dirs, transports, vec![("TG_TEST_TOKEN", server.token())]).await
    }

    fn users() -> Vec<String> {
        vec![format!("telegram:{USER}")]
    }

    /// The thread id of the topic called `name`, once it is there.
    async fn topic(server: &BotApiServer, name: &str) -> i64 {
        until(&format!("a topic named {name:?}"), || {
            server.topics(FORUM).iter().any(|t| t.name == name)
        })
        .await;
        server
            .topics(FORUM)
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| t.message_thread_id)
            .expect("found")
    }

    /// Waits for a message of the bot in `thread` of the forum containing `needle`.
    async fn posted_in(server: &BotApiServer, thread: i64, needle: &str) {
        let what = format!("{needle:?} in topic {thread}");
        let shown = || {
            format!(
                "{what}: sent {:#?}, asked {:#?}",
                server.sent(),
                server.requests("sendMessage")
            )
        };
        until_with(shown, || {
            server.sent().iter().any(|m| {
                m.chat_id == FORUM.to_string()
                    && m.message_thread_id == Some(thread)
                    && m.text.contains(needle)
            })
        })
        .await;
    }

    #[tokio::test]
    async fn a_session_gets_its_own_topic_talks_there_without_switch_and_ends_it_on_detach() {
        let server = BotApiServer::start().await;
        server.add_group(FORUM, true, true);
        let world = world(&server, Dirs::new()).await;
        let api = world.attach("api", &users()).await;
        let web = world.attach("web", &users()).await;

        let api_topic = topic(&server, &topic_name("api")).await;
        let web_topic = topic(&server, &topic_name("web")).await;
        posted_in(&server, web_topic, "talks to the session web").await;

        // No /switch: the topic is the session's own place.
        server.queue_update(topic_text(FORUM, web_topic, USER, 100, "build it"));
        web.agent.wait_for_prompts(1).await;
        assert!(
            api.agent.prompts.lock().unwrap().is_empty(),
            "api got web's"
        );
        answer(&web.agent, "built in the topic").await;
        posted_in(&server, web_topic, "built in the topic").await;

        server.queue_update(topic_text(FORUM, api_topic, USER, 101, "test it"));
        api.agent.wait_for_prompts(1).await;
        assert_eq!(web.agent.prompts.lock().unwrap().len(), 1);

        // The broker's own commands are still the broker's, answered in the topic.
        server.queue_update(topic_text(FORUM, api_topic, USER, 104, "/sessions"));
        posted_in(&server, api_topic, "2. web").await;
        assert_eq!(api.agent.prompts.lock().unwrap().len(), 1, "not a prompt");

        // The end: a last message, then renamed and closed, never deleted.
        web.session.shutdown().await.expect("shutdown");
        posted_in(&server, web_topic, "has ended").await;
        let ended = server
            .topics(FORUM)
            .into_iter()
            .find(|t| t.message_thread_id == web_topic)
            .expect("kept, not deleted");
        assert_eq!(ended.name, format!("ended · {}", topic_name("web")));
        assert!(ended.closed, "closed");

        // A message in the ended topic is not lost silently.
        server.queue_update(topic_text(FORUM, web_topic, USER, 102, "still there?"));
        posted_in(&server, web_topic, "not running now").await;

        api.session.shutdown().await.expect("shutdown");
        // A restarted broker finds the topic by name and opens it again: no second topic.
        let world = world.restart().await;
        let web = world.attach("web", &users()).await;
        posted_in(&server, web_topic, "running again").await;
        let reopened = server
            .topics(FORUM)
            .into_iter()
            .find(|t| t.message_thread_id == web_topic)
            .expect("kept");
        assert_eq!(reopened.name, topic_name("web"));
        assert!(!reopened.closed, "reopened");
        assert_eq!(
            server.calls("createForumTopic"),
            2,
            "reused, not made again"
        );
        server.queue_update(topic_text(FORUM, web_topic, USER, 103, "again"));
        web.agent.wait_for_prompts(1).await;

        web.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    #[tokio::test]
    async fn a_missing_right_is_said_once_and_switch_keeps_working() {
        let server = BotApiServer::start().await;
        server.add_group(FORUM, true, false);
        let world = world(&server, Dirs::new()).await;
        let api = world.attach("api", &users()).await;
        let web = world.attach("web", &users()).await;
        until("both sessions asked for a topic", || {
            server.calls("createForumTopic") == 2
        })
        .await;
        // Each attach asks once; nothing retries.
        let said = world.logged("session topic not made");
        assert_eq!(said.len(), 1, "said once: {said:#?}");
        assert!(said[0].contains("can_manage_topics"), "{said:#?}");
        until("the terminal hears it", || {
            told(&[&api.ui, &web.ui], "can_manage_topics") > 0
        })
        .await;

        server.queue_update(private_text(USER, 1, "/switch web"));
        until("the switch answered", || {
            server
                .sent()
                .iter()
                .any(|m| m.text.contains("This chat now talks to web"))
        })
        .await;
        server.queue_update(private_text(USER, 2, "deploy"));
        web.agent.wait_for_prompts(1).await;
        assert_eq!(server.calls("createForumTopic"), 2, "no retry storm");
        assert!(server.topics(FORUM).is_empty());
        assert_eq!(
            told(&[&api.ui, &web.ui], "can_manage_topics"),
            1,
            "one terminal, once"
        );

        api.session.shutdown().await.expect("shutdown");
        web.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    #[tokio::test]
    async fn a_topic_deleted_by_hand_is_made_again_and_the_reply_goes_there() {
        let server = BotApiServer::start().await;
        server.add_group(FORUM, true, true);
        let world = world(&server, Dirs::new()).await;
        let api = world.attach("api", &users()).await;
        let first = topic(&server, &topic_name("api")).await;
        server.queue_update(topic_text(FORUM, first, USER, 100, "long job"));
        api.agent.wait_for_prompts(1).await;

        // Deleted while the agent works: its answer goes to a new topic of the same name.
        server.delete_topic(FORUM, first);
        answer(&api.agent, "the long job is done").await;
        until("a second topic", || {
            server.topics(FORUM).len() == 1 && server.calls("createForumTopic") == 2
        })
        .await;
        let second = topic(&server, &topic_name("api")).await;
        assert_ne!(second, first);
        posted_in(&server, second, "the long job is done").await;
        posted_in(&server, second, "was deleted").await;
        shown(&api.ui, "was deleted").await;

        // Messages in the new topic reach the session.
        server.queue_update(topic_text(FORUM, second, USER, 101, "thanks"));
        api.agent.wait_for_prompts(2).await;

        // Deleted again while detached: the next attach makes a third.
        api.session.shutdown().await.expect("shutdown");
        world.broker.detach("key-api");
        server.delete_topic(FORUM, second);
        let api = world.attach("api", &users()).await;
        until("a third topic", || server.calls("createForumTopic") == 3).await;
        let third = topic(&server, &topic_name("api")).await;
        posted_in(&server, third, "was deleted").await;
        server.queue_update(topic_text(FORUM, third, USER, 102, "hello again"));
        api.agent.wait_for_prompts(1).await;

        api.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }
}

/// Telegram's topics in a private chat with the bot (Bot API 9.3/9.4), one per user and
/// session (docs/broker.md#topics-in-private-chats).
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

mod discord {
    use super::*;
    use transport_testing::discord::{DiscordLoopback, dm_message, thread_message};

    const USER: &str = "555000111222333444";
    const GUILD: &str = "777000111222333444";
    const CHANNEL: &str = "888000111222333444";

    async fn world(loopback: &DiscordLoopback, dirs: Dirs) -> World {
        let transports = json!({"discord": {
            "enabled": true,
            "tokenEnv": "DISCORD_TEST_TOKEN",
            "baseUrl": loopback.base_url(),
            "readyTimeoutSeconds": 10,
            "sessionTopics": CHANNEL,
        }});
        World::new(
            dirs,
            transports,
            vec![("DISCORD_TEST_TOKEN", loopback.token())],
        )
        .await
    }

    fn users() -> Vec<String> {
        vec![format!("discord:{USER}")]
    }

    /// The id of the thread called `name`, once it is there.
    async fn thread(loopback: &DiscordLoopback, name: &str) -> String {
        until(&format!("a thread named {name:?}"), || {
            loopback.rest.threads().iter().any(|t| t.name == name)
        })
        .await;
        loopback
            .rest
            .threads()
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| t.id)
            .expect("found")
    }

    /// Waits for a message of the bot in `channel` containing `needle`.
    async fn posted_in(loopback: &DiscordLoopback, channel: &str, needle: &str) {
        let what = format!("{needle:?} in channel {channel}");
        until_with(
            || format!("{what}: created {:#?}", loopback.rest.created()),
            || {
                loopback
                    .rest
                    .created()
                    .iter()
                    .any(|m| m.channel_id == channel && m.content.contains(needle))
            },
        )
        .await;
    }

    /// A message from the user in `channel` (a thread), through the gateway.
    fn say(loopback: &DiscordLoopback, id: u64, channel: &str, text: &str) {
        let message = thread_message(&id.to_string(), channel, GUILD, USER, text);
        assert!(loopback.gateway.message_create(message).is_some());
    }

    #[tokio::test]
    async fn a_session_gets_its_own_thread_talks_there_without_switch_and_archives_it_on_detach() {
        let loopback = DiscordLoopback::start().await;
        loopback.rest.add_text_channel(CHANNEL, true);
        let world = world(&loopback, Dirs::new()).await;
        let api = world.attach("api", &users()).await;
        let web = world.attach("web", &users()).await;
        let api_thread = thread(&loopback, &topic_name("api")).await;
        let web_thread = thread(&loopback, &topic_name("web")).await;
        posted_in(&loopback, &web_thread, "talks to the session web").await;

        say(&loopback, 9_001, &web_thread, "build it");
        web.agent.wait_for_prompts(1).await;
        assert!(
            api.agent.prompts.lock().unwrap().is_empty(),
            "api got web's"
        );
        answer(&web.agent, "built in the thread").await;
        posted_in(&loopback, &web_thread, "built in the thread").await;
        say(&loopback, 9_002, &api_thread, "test it");
        api.agent.wait_for_prompts(1).await;

        web.session.shutdown().await.expect("shutdown");
        posted_in(&loopback, &web_thread, "has ended").await;
        let ended = loopback
            .rest
            .threads()
            .into_iter()
            .find(|t| t.id == web_thread)
            .expect("kept, not deleted");
        assert_eq!(ended.name, format!("ended · {}", topic_name("web")));
        assert!(ended.archived, "archived");

        api.session.shutdown().await.expect("shutdown");
        let world = world.restart().await;
        let web = world.attach("web", &users()).await;
        posted_in(&loopback, &web_thread, "running again").await;
        let reopened = loopback
            .rest
            .threads()
            .into_iter()
            .find(|t| t.id == web_thread)
            .expect("kept");
        assert_eq!(reopened.name, topic_name("web"));
        assert!(!reopened.archived);
        assert_eq!(loopback.rest.threads().len(), 2, "reused, not made again");
        say(&loopback, 9_003, &web_thread, "again");
        web.agent.wait_for_prompts(1).await;
        web.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    #[tokio::test]
    async fn missing_permissions_are_said_once_and_switch_keeps_working() {
        let loopback = DiscordLoopback::start().await;
        loopback.rest.add_text_channel(CHANNEL, false);
        let world = world(&loopback, Dirs::new()).await;
        let api = world.attach("api", &users()).await;
        let web = world.attach("web", &users()).await;
        let start_thread = transport_testing::discord::START_THREAD;
        until("both sessions asked for a thread", || {
            loopback.rest.calls(start_thread) == 2
        })
        .await;
        until("the terminal hears it", || {
            [&api.ui, &web.ui].iter().any(|ui| {
                ui.notes()
                    .iter()
                    .any(|(_, t)| t.contains("Create Public Threads"))
            })
        })
        .await;
        let said = world.logged("session topic not made");
        assert_eq!(said.len(), 1, "said once: {said:#?}");
        assert!(said[0].contains("Missing Permissions"), "{said:#?}");
        assert_eq!(
            told(&[&api.ui, &web.ui], "Create Public Threads"),
            1,
            "one terminal, once"
        );

        let dm = "600000000000000001";
        let switch = dm_message("9100", dm, USER, "/switch web");
        assert!(loopback.gateway.message_create(switch).is_some());
        posted_in(&loopback, dm, "This chat now talks to web").await;
        let prompt = dm_message("9101", dm, USER, "deploy");
        assert!(loopback.gateway.message_create(prompt).is_some());
        web.agent.wait_for_prompts(1).await;
        assert_eq!(loopback.rest.calls(start_thread), 2, "no retry storm");

        api.session.shutdown().await.expect("shutdown");
        web.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    #[tokio::test]
    async fn a_thread_deleted_by_hand_is_made_again_and_the_reply_goes_there() {
        let loopback = DiscordLoopback::start().await;
        loopback.rest.add_text_channel(CHANNEL, true);
        let world = world(&loopback, Dirs::new()).await;
        let api = world.attach("api", &users()).await;
        let first = thread(&loopback, &topic_name("api")).await;
        say(&loopback, 9_001, &first, "long job");
        api.agent.wait_for_prompts(1).await;

        loopback.rest.delete_thread(&first);
        answer(&api.agent, "the long job is done").await;
        let second = thread(&loopback, &topic_name("api")).await;
        assert_ne!(second, first);
        posted_in(&loopback, &second, "the long job is done").await;
        posted_in(&loopback, &second, "was deleted").await;
        shown(&api.ui, "was deleted").await;
        say(&loopback, 9_002, &second, "thanks");
        api.agent.wait_for_prompts(2).await;

        api.session.shutdown().await.expect("shutdown");
        world.broker.detach("key-api");
        loopback.rest.delete_thread(&second);
        let api = world.attach("api", &users()).await;
        until("a third thread", || {
            loopback.rest.threads().len() == 1 && loopback.rest.threads()[0].id != second
        })
        .await;
        let third = thread(&loopback, &topic_name("api")).await;
        posted_in(&loopback, &third, "was deleted").await;
        say(&loopback, 9_003, &third, "hello again");
        api.agent.wait_for_prompts(1).await;
        api.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }
}

mod slack {
    use super::*;
    use transport_testing::slack::{SlackServer, channel_message, im_message, in_thread};

    const USER: &str = "U0ADA";
    const CHANNEL: &str = "C0SESSIONS";

    async fn world(server: &SlackServer, dirs: Dirs) -> World {
        let transports = json!({"slack": {
            "enabled": true,
            "tokenEnv": "SLACK_E2E_BOT",
            "appTokenEnv": "SLACK_E2E_APP",
            "baseUrl": server.base_url(),
            "sessionTopics": CHANNEL,
        }});
        let env = vec![
            ("SLACK_E2E_BOT", server.bot_token()),
            ("SLACK_E2E_APP", server.app_token()),
        ];
        World::new(dirs, transports, env).await
    }

    fn users() -> Vec<String> {
        vec![format!("slack:{USER}")]
    }

    /// The `ts` of the thread parent whose text holds `name` (and not "ended"), once it
    /// is there.
    async fn thread(server: &SlackServer, name: &str) -> String {
        let find = || {
            server
                .posted()
                .into_iter()
                .rev()
                .find(|p| p.channel == CHANNEL && p.thread_ts.is_none() && p.text.contains(name))
                .map(|p| p.ts)
        };
        until(&format!("a thread named {name:?}"), || find().is_some()).await;
        find().expect("found")
    }

    /// Waits for a message of the bot in the thread `ts` containing `needle`.
    async fn posted_in(server: &SlackServer, ts: &str, needle: &str) {
        let what = format!("{needle:?} in thread {ts}");
        until_with(
            || format!("{what}: posted {:#?}", server.posted()),
            || {
                server.posted().iter().any(|p| {
                    p.channel == CHANNEL
                        && p.thread_ts.as_deref() == Some(ts)
                        && p.text.contains(needle)
                })
            },
        )
        .await;
    }

    /// A message from the user in thread `ts` of the channel, through Socket Mode.
    fn say(server: &SlackServer, ts: &str, at: &str, text: &str) {
        let connection = *server.open_connections().last().expect("connected");
        let event = in_thread(channel_message(CHANNEL, USER, at, text), ts);
        assert!(server.send_event(connection, event).is_some());
    }

    #[tokio::test]
    async fn a_session_gets_its_own_thread_talks_there_without_switch_and_ends_it_on_detach() {
        let server = SlackServer::start().await;
        server.add_channel(CHANNEL, true);
        let world = world(&server, Dirs::new()).await;
        let api = world.attach("api", &users()).await;
        let web = world.attach("web", &users()).await;
        let api_thread = thread(&server, &topic_name("api")).await;
        let web_thread = thread(&server, &topic_name("web")).await;
        posted_in(&server, &web_thread, "talks to the session web").await;

        until("connected", || !server.open_connections().is_empty()).await;
        say(&server, &web_thread, "1700000100.000100", "build it");
        web.agent.wait_for_prompts(1).await;
        assert!(
            api.agent.prompts.lock().unwrap().is_empty(),
            "api got web's"
        );
        answer(&web.agent, "built in the thread").await;
        posted_in(&server, &web_thread, "built in the thread").await;
        say(&server, &api_thread, "1700000100.000200", "test it");
        api.agent.wait_for_prompts(1).await;

        // The end: a last message in the thread, and its parent says it ended.
        web.session.shutdown().await.expect("shutdown");
        posted_in(&server, &web_thread, "has ended").await;
        let parent = server.message_text(CHANNEL, &web_thread).expect("kept");
        assert!(
            parent.contains(&format!("ended · {}", topic_name("web"))),
            "{parent}"
        );

        api.session.shutdown().await.expect("shutdown");
        let world = world.restart().await;
        let web = world.attach("web", &users()).await;
        posted_in(&server, &web_thread, "running again").await;
        let parent = server.message_text(CHANNEL, &web_thread).expect("kept");
        assert!(!parent.contains("ended"), "{parent}");
        let parents = server
            .posted()
            .iter()
            .filter(|p| p.channel == CHANNEL && p.thread_ts.is_none())
            .count();
        assert_eq!(parents, 2, "reused, not made again");
        until("connected", || !server.open_connections().is_empty()).await;
        say(&server, &web_thread, "1700000100.000300", "again");
        web.agent.wait_for_prompts(1).await;
        web.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    #[tokio::test]
    async fn a_channel_without_the_bot_is_said_once_and_switch_keeps_working() {
        let server = SlackServer::start().await;
        server.add_channel(CHANNEL, false);
        let world = world(&server, Dirs::new()).await;
        let api = world.attach("api", &users()).await;
        let web = world.attach("web", &users()).await;
        until("both sessions asked for a thread", || {
            server.requests("chat.postMessage").len() == 2
        })
        .await;
        until("the terminal hears it", || {
            [&api.ui, &web.ui]
                .iter()
                .any(|ui| ui.notes().iter().any(|(_, t)| t.contains("/invite")))
        })
        .await;
        let said = world.logged("session topic not made");
        assert_eq!(said.len(), 1, "said once: {said:#?}");
        assert!(said[0].contains("not_in_channel"), "{said:#?}");
        assert_eq!(
            told(&[&api.ui, &web.ui], "/invite"),
            1,
            "one terminal, once"
        );

        until("connected", || !server.open_connections().is_empty()).await;
        let connection = *server.open_connections().last().expect("connected");
        let dm = "D0ADA";
        server.send_event(
            connection,
            im_message(dm, USER, "1700000200.000100", "/switch web"),
        );
        until("the switch answered", || {
            server
                .posted()
                .iter()
                .any(|p| p.channel == dm && p.text.contains("This chat now talks to web"))
        })
        .await;
        server.send_event(
            connection,
            im_message(dm, USER, "1700000200.000200", "deploy"),
        );
        web.agent.wait_for_prompts(1).await;
        let parents = server
            .requests("chat.postMessage")
            .iter()
            .filter(|r| r["channel"] == CHANNEL)
            .count();
        assert_eq!(parents, 2, "no retry storm");

        api.session.shutdown().await.expect("shutdown");
        web.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }

    #[tokio::test]
    async fn a_thread_whose_parent_was_deleted_is_made_again_and_the_reply_goes_there() {
        let server = SlackServer::start().await;
        server.add_channel(CHANNEL, true);
        let world = world(&server, Dirs::new()).await;
        let api = world.attach("api", &users()).await;
        let first = thread(&server, &topic_name("api")).await;
        until("connected", || !server.open_connections().is_empty()).await;
        say(&server, &first, "1700000300.000100", "long job");
        api.agent.wait_for_prompts(1).await;

        server.delete_message(CHANNEL, &first);
        answer(&api.agent, "the long job is done").await;
        until("a second thread", || {
            server
                .posted()
                .iter()
                .filter(|p| p.channel == CHANNEL && p.thread_ts.is_none())
                .count()
                == 2
        })
        .await;
        let second = thread(&server, &topic_name("api")).await;
        assert_ne!(second, first);
        posted_in(&server, &second, "the long job is done").await;
        posted_in(&server, &second, "was deleted").await;
        shown(&api.ui, "was deleted").await;
        say(&server, &second, "1700000300.000200", "thanks");
        api.agent.wait_for_prompts(2).await;

        api.session.shutdown().await.expect("shutdown");
        world.broker.detach("key-api");
        server.delete_message(CHANNEL, &second);
        let api = world.attach("api", &users()).await;
        until("a third thread", || {
            server
                .posted()
                .iter()
                .filter(|p| p.channel == CHANNEL && p.thread_ts.is_none())
                .count()
                == 3
        })
        .await;
        let third = thread(&server, &topic_name("api")).await;
        posted_in(&server, &third, "was deleted").await;
        until("connected", || !server.open_connections().is_empty()).await;
        say(&server, &third, "1700000300.000300", "hello again");
        api.agent.wait_for_prompts(1).await;
        api.session.shutdown().await.expect("shutdown");
        world.broker.shutdown().await;
    }
}
