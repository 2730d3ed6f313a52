//! The three platforms' loopback servers as a topic-per-session flow drives them: a Telegram
//! forum, a Discord text channel, a Slack channel. One trait, so each flow
//! (docs/broker.md#a-topic-per-session) is written once and run on every platform, through
//! the broker (`broker_topics.rs`) and through the cluster's ingress (`cluster_topics.rs`).

use serde_json::{Value, json};
use transport_testing::discord::{DiscordLoopback, START_THREAD, dm_message, thread_message};
use transport_testing::slack::{SlackServer, channel_message, im_message, in_thread};
use transport_testing::telegram::{BotApiServer, private_text, topic_text};

/// One platform's loopback server, where the bot makes a topic (or thread) per session.
pub trait TopicPlace: Sync {
    /// The platform's `transports` entry (its place for topics named) and the token
    /// variables it reads, as the process environment would hold them.
    fn transports(&self) -> (Value, Vec<(&'static str, String)>);
    /// The test user, as `allowUsers` names them.
    fn user(&self) -> String;
    /// Declares the place, the bot with or without the right to make topics there.
    fn open_place(&self, with_right: bool);
    /// The latest topic called `name`, once it is there.
    fn topic_named(&self, name: &str) -> Option<String>;
    /// Whether the bot posted `needle` in topic `topic`.
    fn posted_in(&self, topic: &str, needle: &str) -> bool;
    /// The user writes `text` (the `n`th message of the test) in topic `topic`; `false`
    /// while the bot is not connected to hear it.
    fn say(&self, n: u64, topic: &str, text: &str) -> bool;
    /// The user writes `text` in their direct chat with the bot; `false` while the bot
    /// is not connected to hear it.
    fn dm(&self, n: u64, text: &str) -> bool;
    /// Whether the bot posted `needle` in the user's direct chat.
    fn answered_dm(&self, needle: &str) -> bool;
    /// Whether topic `topic` is marked ended under `ended` (renamed and closed, archived,
    /// or its parent message saying so).
    fn ended(&self, topic: &str, ended: &str) -> bool;
    /// Whether topic `topic` is open again under `name`.
    fn open_again(&self, topic: &str, name: &str) -> bool;
    /// How many topics the bot asked to make, refused ones included.
    fn made(&self) -> usize;
    /// Deletes topic `topic`, as a person does by hand.
    fn delete(&self, topic: &str);
    /// How the platform's refusal of a missing right is logged, and what the session's
    /// terminal is told to grant.
    fn refusal(&self) -> (&'static str, &'static str);
    /// What the bot posted, for a failure's message.
    fn shown(&self) -> String;
}

/// The Telegram forum supergroup the topics go to.
pub const FORUM: i64 = -1_001_234_567_890;
/// The Telegram user.
pub const TELEGRAM_USER: i64 = 4242;

impl TopicPlace for BotApiServer {
    fn transports(&self) -> (Value, Vec<(&'static str, String)>) {
        let transports = json!({"telegram": {
            "enabled": true,
            "tokenEnv": "TG_TEST_TOKEN",
            "baseUrl": self.base_url(),
            "pollTimeoutSeconds": 1,
            "sessionTopics": FORUM.to_string(),
        }});
        (transports, vec![("TG_TEST_TOKEN", self.token())])
    }
    fn user(&self) -> String {
        format!("telegram:{TELEGRAM_USER}")
    }
    fn open_place(&self, with_right: bool) {
        self.add_group(FORUM, true, with_right);
    }
    fn topic_named(&self, name: &str) -> Option<String> {
        self.topics(FORUM)
            .into_iter()
            .rev()
            .find(|t| t.name == name)
            .map(|t| t.message_thread_id.to_string())
    }
    fn posted_in(&self, topic: &str, needle: &str) -> bool {
        self.sent().iter().any(|m| {
            m.chat_id == FORUM.to_string()
                && m.message_thread_id.map(|t| t.to_string()).as_deref() == Some(topic)
                && m.text.contains(needle)
        })
    }
    fn say(&self, n: u64, topic: &str, text: &str) -> bool {
        let thread = topic.parse().expect("a Telegram topic id");
        let n = i64::try_from(n).expect("a small message number");
        self.queue_update(topic_text(FORUM, thread, TELEGRAM_USER, n, text));
        true
    }
    fn dm(&self, n: u64, text: &str) -> bool {
        let n = i64::try_from(n).expect("a small message number");
        self.queue_update(private_text(TELEGRAM_USER, n, text));
        true
    }
    fn answered_dm(&self, needle: &str) -> bool {
        self.sent()
            .iter()
            .any(|m| m.chat_id == TELEGRAM_USER.to_string() && m.text.contains(needle))
    }
    fn ended(&self, topic: &str, ended: &str) -> bool {
        self.topics(FORUM)
            .iter()
            .any(|t| t.message_thread_id.to_string() == topic && t.closed && t.name == ended)
    }
    fn open_again(&self, topic: &str, name: &str) -> bool {
        self.topics(FORUM)
            .iter()
            .any(|t| t.message_thread_id.to_string() == topic && !t.closed && t.name == name)
    }
    fn made(&self) -> usize {
        self.calls("createForumTopic")
    }
    fn delete(&self, topic: &str) {
        self.delete_topic(FORUM, topic.parse().expect("a Telegram topic id"));
    }
    fn refusal(&self) -> (&'static str, &'static str) {
        ("can_manage_topics", "can_manage_topics")
    }
    fn shown(&self) -> String {
        format!("{:#?} {:#?}", self.sent(), self.topics(FORUM))
    }
}

/// The Discord user.
pub const DISCORD_USER: &str = "555000111222333444";
const GUILD: &str = "777000111222333444";
/// The Discord text channel the threads go to.
pub const DISCORD_CHANNEL: &str = "888000111222333444";
const DISCORD_DM: &str = "999000111222333444";

impl TopicPlace for DiscordLoopback {
    fn transports(&self) -> (Value, Vec<(&'static str, String)>) {
        let transports = json!({"discord": {
            "enabled": true,
            "tokenEnv": "DISCORD_TEST_TOKEN",
            "baseUrl": self.base_url(),
            "readyTimeoutSeconds": 10,
            "sessionTopics": DISCORD_CHANNEL,
        }});
        (transports, vec![("DISCORD_TEST_TOKEN", self.token())])
    }
    fn user(&self) -> String {
        format!("discord:{DISCORD_USER}")
    }
    fn open_place(&self, with_right: bool) {
        self.rest.add_text_channel(DISCORD_CHANNEL, with_right);
    }
    fn topic_named(&self, name: &str) -> Option<String> {
        self.rest
            .threads()
            .into_iter()
            .rev()
            .find(|t| t.name == name)
            .map(|t| t.id)
    }
    fn posted_in(&self, topic: &str, needle: &str) -> bool {
        self.rest
            .created()
            .iter()
            .any(|m| m.channel_id == topic && m.content.contains(needle))
    }
    fn say(&self, n: u64, topic: &str, text: &str) -> bool {
        let message = thread_message(&n.to_string(), topic, GUILD, DISCORD_USER, text);
        self.gateway.message_create(message).is_some()
    }
    fn dm(&self, n: u64, text: &str) -> bool {
        let message = dm_message(&n.to_string(), DISCORD_DM, DISCORD_USER, text);
        self.gateway.message_create(message).is_some()
    }
    fn answered_dm(&self, needle: &str) -> bool {
        self.posted_in(DISCORD_DM, needle)
    }
    fn ended(&self, topic: &str, ended: &str) -> bool {
        self.rest
            .threads()
            .iter()
            .any(|t| t.id == topic && t.archived && t.name == ended)
    }
    fn open_again(&self, topic: &str, name: &str) -> bool {
        self.rest
            .threads()
            .iter()
            .any(|t| t.id == topic && !t.archived && t.name == name)
    }
    fn made(&self) -> usize {
        self.rest.calls(START_THREAD)
    }
    fn delete(&self, topic: &str) {
        self.rest.delete_thread(topic);
    }
    fn refusal(&self) -> (&'static str, &'static str) {
        ("Missing Permissions", "Create Public Threads")
    }
    fn shown(&self) -> String {
        format!("{:#?} {:#?}", self.rest.created(), self.rest.threads())
    }
}

/// The Slack user.
pub const SLACK_USER: &str = "U0ADA";
/// The Slack channel the threads go to.
pub const SLACK_CHANNEL: &str = "C0SESSIONS";
const SLACK_DM: &str = "D0ADA";

impl TopicPlace for SlackServer {
    fn transports(&self) -> (Value, Vec<(&'static str, String)>) {
        let transports = json!({"slack": {
            "enabled": true,
            "tokenEnv": "SLACK_E2E_BOT",
            "appTokenEnv": "SLACK_E2E_APP",
            "baseUrl": self.base_url(),
            "sessionTopics": SLACK_CHANNEL,
        }});
        let env = vec![
            ("SLACK_E2E_BOT", self.bot_token()),
            ("SLACK_E2E_APP", self.app_token()),
        ];
        (transports, env)
    }
    fn user(&self) -> String {
        format!("slack:{SLACK_USER}")
    }
    fn open_place(&self, with_right: bool) {
        self.add_channel(SLACK_CHANNEL, with_right);
    }
    fn topic_named(&self, name: &str) -> Option<String> {
        // The latest: a parent deleted by hand stays in the record of what was posted.
        self.posted()
            .into_iter()
            .rev()
            .find(|p| p.channel == SLACK_CHANNEL && p.thread_ts.is_none() && p.text.contains(name))
            .map(|p| p.ts)
    }
    fn posted_in(&self, topic: &str, needle: &str) -> bool {
        self.posted().iter().any(|p| {
            p.channel == SLACK_CHANNEL
                && p.thread_ts.as_deref() == Some(topic)
                && p.text.contains(needle)
        })
    }
    fn say(&self, n: u64, topic: &str, text: &str) -> bool {
        let Some(connection) = self.open_connections().last().copied() else {
            return false;
        };
        let at = format!("1700000100.{n:06}");
        let event = in_thread(channel_message(SLACK_CHANNEL, SLACK_USER, &at, text), topic);
        self.send_event(connection, event).is_some()
    }
    fn dm(&self, n: u64, text: &str) -> bool {
        let Some(connection) = self.open_connections().last().copied() else {
            return false;
        };
        let at = format!("1700000200.{n:06}");
        self.send_event(connection, im_message(SLACK_DM, SLACK_USER, &at, text))
            .is_some()
    }
    fn answered_dm(&self, needle: &str) -> bool {
        self.posted()
            .iter()
            .any(|p| p.channel == SLACK_DM && p.text.contains(needle))
    }
    fn ended(&self, topic: &str, ended: &str) -> bool {
        self.message_text(SLACK_CHANNEL, topic)
            .is_some_and(|text| text.contains(ended))
    }
    fn open_again(&self, topic: &str, name: &str) -> bool {
        self.message_text(SLACK_CHANNEL, topic)
            .is_some_and(|text| text.contains(name) && !text.contains("ended"))
    }
    fn made(&self) -> usize {
        self.requests("chat.postMessage")
            .iter()
            .filter(|r| r["channel"] == SLACK_CHANNEL && r["thread_ts"].is_null())
            .count()
    }
    fn delete(&self, topic: &str) {
        self.delete_message(SLACK_CHANNEL, topic);
    }
    fn refusal(&self) -> (&'static str, &'static str) {
        ("not_in_channel", "/invite")
    }
    fn shown(&self) -> String {
        format!("{:#?}", self.posted())
    }
}
