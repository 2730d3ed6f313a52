//! A topic or thread per session (docs/broker.md#a-topic-per-session): the pure decisions.
//! The broker's I/O (asking the platform, writing the state database, telling the person)
//! is in `mod.rs`; everything it decides is here, over plain data, so each rule is a table
//! test.
//!
//! Rules:
//! - a session's topic is named `<name> · <directory's last part> · <host>`, cut to the
//!   platform's length (the session's name is kept whole as long as it fits);
//! - a topic is found again by that name, in the state database, so a session attaching
//!   again (or after a broker restart) gets its old topic back instead of a new one;
//! - a message in a session's topic goes to that session without `/switch`, unless it is
//!   one of the broker's own commands; in the topic of a session that is not attached, the
//!   person is told so;
//! - a session's send into another session's topic is refused, as a send into a chat bound
//!   to another session is;
//! - a missing right is said once per place, however many sessions attach;
//! - with topics in private chats (Telegram's `sessionTopics: "private"`), each user paired
//!   with a session (or allowed by its config) gets the session's topic in their own chat
//!   with the bot: one topic per user and session, kept under the user's chat, and a
//!   missing right (the bot's topic mode off) is said once for all users.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use transport_core::{Topic, TopicError};

/// What an ended topic's name starts with.
pub const ENDED_PREFIX: &str = "ended · ";

/// The prefix of the names topics are kept under in the state database (`meta`).
pub const KEPT_PREFIX: &str = "session-topic:";

/// What stands for a cut part of a name.
const CUT: char = '…';

/// The name of a session's topic: `<name> · <directory's last part> · <host>`, at most
/// `max_chars` characters. The host is cut first, then the directory, then the name.
pub fn topic_name(session: &str, cwd: &str, host: &str, max_chars: usize) -> String {
    let directory = cwd
        .trim_end_matches(['/', '\\'])
        .rsplit(['/', '\\'])
        .next()
        .filter(|last| !last.is_empty())
        .unwrap_or("/");
    let parts = [session.trim(), directory, host.trim()];
    let whole = parts
        .iter()
        .filter(|part| !part.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" · ");
    cut(&whole, max_chars)
}

/// The name of `name`'s topic once its session ended: [`ENDED_PREFIX`] before it, within
/// `max_chars` (the end of the name is cut).
pub fn ended_name(name: &str, max_chars: usize) -> String {
    cut(&format!("{ENDED_PREFIX}{name}"), max_chars)
}

/// `text` cut to `max` characters, the cut marked with `…`.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max.saturating_sub(1)).collect();
    kept.push(CUT);
    kept
}

/// The name a topic is kept under in the state database: unique per transport, place
/// and topic name, so the same session name in two forums has two topics.
pub fn kept_name(transport: &str, place: &str, name: &str) -> String {
    format!("{KEPT_PREFIX}{transport}:{place}|{name}")
}

/// Where a session's topic is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicAt {
    /// The one place the bot's config names (`sessionTopics`: a forum group, a channel).
    Place(String),
    /// A user's private chat with the bot (`sessionTopics: "private"`): its id.
    PrivateChat(String),
}

impl TopicAt {
    /// The place the topic's kept name holds: the configured place, or the user's chat, so
    /// each user has a topic of the session's name.
    pub fn kept_place(&self) -> &str {
        match self {
            TopicAt::Place(place) | TopicAt::PrivateChat(place) => place,
        }
    }

    /// The place a problem is said once for: the configured place, or "private" for every
    /// user's chat at once (the bot's topic mode is one switch, not one per user).
    pub fn said_place(&self) -> &str {
        match self {
            TopicAt::Place(place) => place,
            TopicAt::PrivateChat(_) => PRIVATE_PLACE,
        }
    }
}

impl TopicAt {
    /// Where `topic` of `transport`'s bot was made: a user's private chat (when the bot
    /// makes topics there) or the place its config names.
    pub fn of(transport: &dyn transport_core::Transport, topic: &Topic) -> TopicAt {
        if transport.topics_in_private_chats() {
            TopicAt::PrivateChat(topic.conversation_id.clone())
        } else {
            TopicAt::Place(transport.topic_place().unwrap_or_default())
        }
    }
}

/// The place [`TopicAt::PrivateChat`] problems are said for.
pub const PRIVATE_PLACE: &str = "private";

/// The private chats of `transport` among `identities` (`<transport>:<user id>`): a user's
/// private chat with a bot has the user's id, a positive number (a group's is negative, so
/// a group "paired" by id never gets a private topic). Sorted, each once.
pub fn private_chats<'a>(
    transport: &str,
    identities: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let prefix = format!("{transport}:");
    let mut chats: Vec<String> = identities
        .into_iter()
        .filter_map(|identity| identity.strip_prefix(&prefix))
        .filter(|id| id.parse::<i64>().is_ok_and(|id| id > 0))
        .map(str::to_owned)
        .collect();
    chats.sort();
    chats.dedup();
    chats
}

/// One topic the broker made, as the state database keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicRecord {
    /// The transport it is on (`telegram`).
    pub transport: String,
    /// The session key last attached to it.
    pub session: String,
    /// Its name while the session runs.
    pub name: String,
    /// Where it is.
    pub topic: Topic,
    /// Marked ended (its session detached).
    pub ended: bool,
}

/// What to do for a session's topic when the session attaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnAttach {
    /// No topic of that name is known: make one.
    Create,
    /// Its topic is known: open it again (it was marked ended, or the broker restarted).
    Resume(Topic),
}

/// [`OnAttach`] for a session whose topic name finds `known`.
pub fn on_attach(known: Option<&TopicRecord>) -> OnAttach {
    match known {
        Some(record) => OnAttach::Resume(record.topic.clone()),
        None => OnAttach::Create,
    }
}

/// What a failed resume leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterResumeFailed {
    /// The topic was deleted by hand: make a new one, and say so once.
    Recreate,
    /// Keep routing through the old topic (it is still there); say why it was not
    /// reopened.
    KeepAndSay,
}

/// [`AfterResumeFailed`] for `error`.
pub fn after_resume_failed(error: &TopicError) -> AfterResumeFailed {
    match error {
        TopicError::Gone(_) => AfterResumeFailed::Recreate,
        TopicError::Unsupported(_) | TopicError::MissingPermission(_) | TopicError::Failed(_) => {
            AfterResumeFailed::KeepAndSay
        }
    }
}

/// Where a message that came in at a conversation and thread goes, as far as topics tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicRoute {
    /// Not a session's topic: the usual routing decides.
    NotATopic,
    /// The topic of this attached session: it goes there, without `/switch`.
    Session(String),
    /// The topic of a session that is not attached (ended): the person is told, with the
    /// topic's name.
    Ended(String),
}

/// The broker's book of topics: every topic it made, by kept name, and the conversation
/// (and thread) each is reached at.
#[derive(Debug, Default)]
pub struct Topics {
    by_name: HashMap<String, TopicRecord>,
    /// `(transport, conversation, thread)` to the kept name: the topic's place now, and
    /// the places of the topics it replaced (deleted by hand), so a reply the session
    /// still addresses to the old place goes to the new one.
    by_place: HashMap<(String, String, Option<String>), String>,
    /// Problems already told, so each is said once: `<transport>:<place>:<kind>`.
    said: HashSet<String>,
}

impl Topics {
    /// The book holding `records`, each under its kept name (read from the state database).
    pub fn from_kept(records: impl IntoIterator<Item = (String, TopicRecord)>) -> Topics {
        let mut topics = Topics::default();
        for (name, record) in records {
            topics.keep(&name, record);
        }
        topics
    }

    /// The topic kept under `name`.
    pub fn get(&self, name: &str) -> Option<&TopicRecord> {
        self.by_name.get(name)
    }

    /// Keeps `record` under `name`, replacing what was there (a topic made anew: the old
    /// place now leads to the new topic).
    pub fn keep(&mut self, name: &str, record: TopicRecord) {
        self.by_place
            .insert(place_key(&record.transport, &record.topic), name.to_owned());
        self.by_name.insert(name.to_owned(), record);
    }

    /// Every topic in the book, with its kept name.
    pub fn records(&self) -> impl Iterator<Item = (&str, &TopicRecord)> {
        self.by_name
            .iter()
            .map(|(name, record)| (name.as_str(), record))
    }

    /// The topic `session` has on `transport` and is not ended: its kept name and record.
    pub fn open_of(&self, session: &str, transport: &str) -> Option<(&str, &TopicRecord)> {
        self.by_name
            .iter()
            .find(|(_, record)| {
                record.session == session && record.transport == transport && !record.ended
            })
            .map(|(name, record)| (name.as_str(), record))
    }

    /// Every topic `session` has on `transport` that is not ended (one per user's private
    /// chat, or the one in the configured place), with its kept name, in kept-name order.
    pub fn open_all_of(&self, session: &str, transport: &str) -> Vec<(String, TopicRecord)> {
        let mut open: Vec<(String, TopicRecord)> = self
            .by_name
            .iter()
            .filter(|(_, record)| {
                record.session == session && record.transport == transport && !record.ended
            })
            .map(|(name, record)| (name.clone(), record.clone()))
            .collect();
        open.sort_by(|a, b| a.0.cmp(&b.0));
        open
    }

    /// The topic that is (or was, before it was made anew) at `conversation` and `thread`
    /// of `transport`: its kept name and record as kept now.
    pub fn at(
        &self,
        transport: &str,
        conversation: &str,
        thread: Option<&str>,
    ) -> Option<(&str, &TopicRecord)> {
        let key = (
            transport.to_owned(),
            conversation.to_owned(),
            thread.map(str::to_owned),
        );
        let name = self.by_place.get(&key)?;
        self.by_name
            .get_key_value(name)
            .map(|(name, record)| (name.as_str(), record))
    }

    /// Whether `session` has an open topic on `transport` in `conversation` (a user's
    /// private chat): its topic there need not be made again.
    pub fn has_open_in(&self, session: &str, transport: &str, conversation: &str) -> bool {
        self.by_name.values().any(|record| {
            record.session == session
                && record.transport == transport
                && !record.ended
                && record.topic.conversation_id == conversation
        })
    }

    /// Where a send to `conversation` (and `thread`) of `transport` goes instead: the
    /// current place of the topic that was there, when it was replaced.
    pub fn moved(
        &self,
        transport: &str,
        conversation: &str,
        thread: Option<&str>,
    ) -> Option<&Topic> {
        let key = (
            transport.to_owned(),
            conversation.to_owned(),
            thread.map(str::to_owned),
        );
        let record = self.by_name.get(self.by_place.get(&key)?)?;
        let now = &record.topic;
        (now.conversation_id != conversation || now.thread_id.as_deref() != thread).then_some(now)
    }

    /// Where a message at `conversation` (and `thread`) of `transport` goes;
    /// `is_attached` says whether a session is attached to this bot.
    pub fn route(
        &self,
        transport: &str,
        conversation: &str,
        thread: Option<&str>,
        is_attached: impl Fn(&str) -> bool,
    ) -> TopicRoute {
        let key = (
            transport.to_owned(),
            conversation.to_owned(),
            thread.map(str::to_owned),
        );
        let Some(record) = self.by_place.get(&key).and_then(|n| self.by_name.get(n)) else {
            return TopicRoute::NotATopic;
        };
        if !record.ended && is_attached(&record.session) {
            TopicRoute::Session(record.session.clone())
        } else {
            TopicRoute::Ended(record.name.clone())
        }
    }

    /// The session whose topic is at `conversation` (and `thread`), ended or not.
    pub fn owner(&self, transport: &str, conversation: &str, thread: Option<&str>) -> Option<&str> {
        let key = (
            transport.to_owned(),
            conversation.to_owned(),
            thread.map(str::to_owned),
        );
        self.by_place
            .get(&key)
            .and_then(|name| self.by_name.get(name))
            .map(|record| record.session.as_str())
    }

    /// True the first time `problem` is reported for `transport`'s `place`: a missing
    /// right is said once, not at every attach.
    pub fn first_time(&mut self, transport: &str, place: &str, problem: &str) -> bool {
        self.said.insert(format!("{transport}:{place}:{problem}"))
    }
}

fn place_key(transport: &str, topic: &Topic) -> (String, String, Option<String>) {
    (
        transport.to_owned(),
        topic.conversation_id.clone(),
        topic.thread_id.clone(),
    )
}

/// What a topic problem is said once per place as: its kind for a missing right (however
/// the platform words it), the text for anything else with its figures left out ("wait
/// 3100 ms" and "wait 2900 ms" are one problem: a burst of attaches meeting a rate limit is
/// said once, not once per attach).
pub fn problem_key(error: &TopicError) -> String {
    match error {
        TopicError::MissingPermission(_) => "rights".to_owned(),
        TopicError::Unsupported(_) => "unsupported".to_owned(),
        TopicError::Gone(_) => "gone".to_owned(),
        TopicError::Failed(text) => text.chars().filter(|c| !c.is_ascii_digit()).collect(),
    }
}

/// What the person is told in a topic whose session is not attached.
pub fn ended_topic_answer(name: &str) -> String {
    format!(
        "This topic belongs to the session {name}, which is not running now, so this message \
         was not delivered. It reopens when that session starts again; send /sessions to pick \
         another."
    )
}

/// The first message in a new topic: what it is for.
pub fn announcement(session: &str, cwd: &str, host: &str) -> String {
    format!(
        "This topic talks to the session {session} ({cwd} on {host}). Messages here go to it \
         without /switch."
    )
}

/// The message in a topic opened again.
pub fn resumed_announcement(session: &str) -> String {
    format!("The session {session} is running again; messages here go to it.")
}

/// The last message in a topic whose session ended.
pub fn ended_announcement(session: &str) -> String {
    format!(
        "The session {session} has ended. This topic is kept; it reopens when the session \
         starts again."
    )
}

/// What is said (once) when a topic could not be made.
pub fn not_made(transport: &str, place: &str, error: &TopicError) -> String {
    let place = if place == PRIVATE_PLACE {
        "the private chats with the bot"
    } else {
        place
    };
    match error {
        TopicError::MissingPermission(what) => format!(
            "{transport}: no topic per session in {place}: {what}. Until then, chats reach \
             this session with /switch"
        ),
        other => format!(
            "{transport}: no topic for this session in {place}: {other}. Chats reach it with \
             /switch meanwhile"
        ),
    }
}

/// What is said (once) when a session's topic was deleted by hand and a new one made.
pub fn recreated(name: &str) -> String {
    format!(
        "The topic {name} was deleted, so a new one was made for this session; nothing \
         sent to it was lost."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(conversation: &str, thread: Option<&str>) -> Topic {
        Topic {
            conversation_id: conversation.into(),
            thread_id: thread.map(str::to_owned),
        }
    }

    fn record(session: &str, name: &str, at: Topic, ended: bool) -> TopicRecord {
        TopicRecord {
            transport: "telegram".into(),
            session: session.into(),
            name: name.into(),
            topic: at,
            ended,
        }
    }

    #[test]
    fn a_topic_is_named_after_the_session_its_directory_and_its_host_within_the_limit() {
        let table = [
            (
                "api",
                "/home/ada/work/api",
                "laptop",
                128,
                "api · api · laptop",
            ),
            (
                "web",
                "/home/ada/shop/",
                "build-1",
                128,
                "web · shop · build-1",
            ),
            ("root", "/", "h", 128, "root · / · h"),
            // Cut at the end, so the session's name stays whole as long as it fits.
            (
                "api",
                "/srv/a-very-long-directory",
                "host",
                16,
                "api · a-very-lo…",
            ),
            ("ééééé", "/x", "h", 3, "éé…"),
        ];
        for (session, cwd, host, max, expected) in table {
            let name = topic_name(session, cwd, host, max);
            assert_eq!(name, expected, "{session} {cwd} {host} {max}");
            assert!(name.chars().count() <= max, "{name}");
        }
    }

    #[test]
    fn an_ended_topic_is_prefixed_and_still_fits() {
        assert_eq!(ended_name("api · x · h", 128), "ended · api · x · h");
        let long = "n".repeat(128);
        let ended = ended_name(&long, 128);
        assert!(ended.starts_with(ENDED_PREFIX), "{ended}");
        assert_eq!(ended.chars().count(), 128);
    }

    #[test]
    fn a_known_topic_is_resumed_and_an_unknown_one_made() {
        let at = topic("-100", Some("7"));
        assert_eq!(on_attach(None), OnAttach::Create);
        assert_eq!(
            on_attach(Some(&record("k", "api", at.clone(), true))),
            OnAttach::Resume(at)
        );
    }

    #[test]
    fn only_a_deleted_topic_is_made_anew_after_a_failed_resume() {
        let table = [
            (
                TopicError::Gone("thread not found".into()),
                AfterResumeFailed::Recreate,
            ),
            (
                TopicError::MissingPermission("grant can_manage_topics".into()),
                AfterResumeFailed::KeepAndSay,
            ),
            (
                TopicError::Failed("timeout".into()),
                AfterResumeFailed::KeepAndSay,
            ),
            (
                TopicError::Unsupported("no".into()),
                AfterResumeFailed::KeepAndSay,
            ),
        ];
        for (error, expected) in table {
            assert_eq!(after_resume_failed(&error), expected, "{error}");
        }
    }

    #[test]
    fn a_message_in_a_topic_goes_to_its_attached_session_and_nowhere_else() {
        let mut topics = Topics::default();
        topics.keep(
            "a",
            record("key-api", "api · w · h", topic("-100", Some("7")), false),
        );
        topics.keep(
            "b",
            record("key-web", "web · w · h", topic("-100", Some("9")), true),
        );
        topics.keep(
            "c",
            record("key-gone", "gone · w · h", topic("-100", Some("11")), false),
        );
        let attached = |key: &str| key != "key-gone";
        let table = [
            (
                ("telegram", "-100", Some("7")),
                TopicRoute::Session("key-api".into()),
            ),
            // Marked ended: told, not delivered.
            (
                ("telegram", "-100", Some("9")),
                TopicRoute::Ended("web · w · h".into()),
            ),
            // Its session went away without its topic being ended (a crash).
            (
                ("telegram", "-100", Some("11")),
                TopicRoute::Ended("gone · w · h".into()),
            ),
            // The General topic, another thread, another chat, another transport.
            (("telegram", "-100", None), TopicRoute::NotATopic),
            (("telegram", "-100", Some("8")), TopicRoute::NotATopic),
            (("telegram", "-200", Some("7")), TopicRoute::NotATopic),
            (("discord", "-100", Some("7")), TopicRoute::NotATopic),
        ];
        for ((transport, conversation, thread), expected) in table {
            assert_eq!(
                topics.route(transport, conversation, thread, attached),
                expected,
                "{transport} {conversation} {thread:?}"
            );
        }
    }

    #[test]
    fn a_topic_made_anew_takes_over_the_old_place() {
        let mut topics = Topics::default();
        topics.keep("a", record("k", "api", topic("-100", Some("7")), false));
        assert_eq!(topics.moved("telegram", "-100", Some("7")), None);
        topics.keep("a", record("k", "api", topic("-100", Some("8")), false));
        // A reply still addressed to the deleted topic goes to the new one.
        assert_eq!(topics.owner("telegram", "-100", Some("7")), Some("k"));
        assert_eq!(
            topics.moved("telegram", "-100", Some("7")),
            Some(&topic("-100", Some("8")))
        );
        assert_eq!(topics.moved("telegram", "-100", Some("8")), None);
        assert_eq!(topics.owner("telegram", "-100", Some("8")), Some("k"));
        assert_eq!(
            topics.open_of("k", "telegram").map(|(name, _)| name),
            Some("a")
        );
        assert_eq!(topics.open_of("k", "discord"), None);
    }

    #[test]
    fn problems_that_differ_only_in_figures_or_wording_of_a_right_are_one() {
        let key = |e: TopicError| problem_key(&e);
        assert_eq!(
            key(TopicError::Failed("rate limited; wait 3100 ms".into())),
            key(TopicError::Failed("rate limited; wait 2900 ms".into()))
        );
        assert_ne!(
            key(TopicError::Failed("rate limited; wait 3100 ms".into())),
            key(TopicError::Failed("no answer within 15 s".into()))
        );
        assert_eq!(
            key(TopicError::MissingPermission("not a forum".into())),
            key(TopicError::MissingPermission("no can_manage_topics".into()))
        );
        assert_ne!(
            key(TopicError::MissingPermission("x".into())),
            key(TopicError::Unsupported("x".into()))
        );
    }

    #[test]
    fn a_problem_is_said_once_per_place() {
        let mut topics = Topics::default();
        assert!(topics.first_time("telegram", "-100", "rights"));
        assert!(!topics.first_time("telegram", "-100", "rights"));
        assert!(topics.first_time("telegram", "-200", "rights"));
        assert!(topics.first_time("discord", "-100", "rights"));
    }

    /// The bridge's own config reader, natively, over a user file and (maybe) a project
    /// file: the requests it makes and its warnings.
    fn read(
        user: &str,
        project: Option<&str>,
    ) -> (Vec<guest::model::TransportRequest>, Vec<String>) {
        use crate::wit::session::{ConfigContent, ConfigScope, ConfigSource};
        let mut sources = vec![ConfigSource {
            scope: ConfigScope::Global,
            path: "/home/ada/.pi/agent/bot-connect.json".into(),
            content: ConfigContent::Text(user.into()),
        }];
        if let Some(project) = project {
            sources.push(ConfigSource {
                scope: ConfigScope::Project,
                path: "/work/api/.pi/bot-connect.json".into(),
                content: ConfigContent::Text(project.into()),
            });
        }
        let loaded = crate::native_guest::read_transports_natively(&sources);
        let warnings = loaded
            .notes
            .iter()
            .filter(|n| n.level != guest::model::Level::Info)
            .map(|n| n.text.clone())
            .collect();
        (loaded.transports, warnings)
    }

    #[test]
    fn session_topics_come_from_the_users_own_file_only() {
        let user = r#"{"transports": {
            "telegram": {"enabled": true, "sessionTopics": "-1001234567890"},
            "discord": {"enabled": true, "sessionTopics": "123456789012345678"},
            "slack": {"enabled": true, "sessionTopics": "C0123456789"}}}"#;
        let (requests, warnings) = read(user, None);
        assert_eq!(warnings, Vec::<String>::new(), "accepted without a warning");
        for (id, place) in [
            ("telegram", "-1001234567890"),
            ("discord", "123456789012345678"),
            ("slack", "C0123456789"),
        ] {
            let request = requests.iter().find(|r| r.id == id).expect(id);
            assert_eq!(
                request.setting("sessionTopics"),
                Some(&guest::model::SettingValue::Text(place.into())),
                "{id}"
            );
        }
        // A cloned repository must not choose where sessions talk.
        let project = r#"{"transports": {"telegram": {"sessionTopics": "-1009999999999"}}}"#;
        let (requests, warnings) = read(user, Some(project));
        let telegram = requests
            .iter()
            .find(|r| r.id == "telegram")
            .expect("telegram");
        assert_eq!(
            telegram.setting("sessionTopics"),
            Some(&guest::model::SettingValue::Text("-1001234567890".into()))
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("transports.telegram.sessionTopics: ignored")),
            "{warnings:#?}"
        );
    }

    #[test]
    fn private_topics_go_to_each_users_own_chat_and_never_to_a_group() {
        let identities = [
            "telegram:4343",
            "telegram:4242",
            "telegram:4242",
            // A group "paired" by id, another platform's user, a malformed identity.
            "telegram:-1001234567890",
            "discord:4242",
            "telegram:@ada",
        ];
        assert_eq!(private_chats("telegram", identities), ["4242", "4343"]);
        let at = TopicAt::PrivateChat("4242".into());
        assert_eq!(at.kept_place(), "4242");
        // The bot's topic mode is one switch: said once for every user's chat.
        assert_eq!(at.said_place(), PRIVATE_PLACE);
        assert_eq!(
            TopicAt::PrivateChat("4343".into()).said_place(),
            at.said_place()
        );
        let place = TopicAt::Place("-100".into());
        assert_eq!((place.kept_place(), place.said_place()), ("-100", "-100"));
        assert!(
            not_made(
                "telegram",
                PRIVATE_PLACE,
                &TopicError::MissingPermission("x".into())
            )
            .contains("the private chats with the bot")
        );
    }

    #[test]
    fn a_session_has_a_topic_per_users_chat_each_found_by_its_place() {
        let mut topics = Topics::default();
        topics.keep("a", record("k", "api", topic("4242", Some("7")), false));
        topics.keep("b", record("k", "api", topic("4343", Some("9")), false));
        topics.keep("c", record("k", "api", topic("4444", Some("3")), true));
        topics.keep("d", record("other", "web", topic("4242", Some("8")), false));
        let open: Vec<String> = topics
            .open_all_of("k", "telegram")
            .into_iter()
            .map(|(kept, _)| kept)
            .collect();
        assert_eq!(open, ["a", "b"], "ended ones and other sessions' are not");
        assert!(topics.has_open_in("k", "telegram", "4242"));
        assert!(!topics.has_open_in("k", "telegram", "4444"), "ended");
        assert!(!topics.has_open_in("k", "discord", "4242"));
        assert_eq!(
            topics
                .at("telegram", "4343", Some("9"))
                .map(|(kept, _)| kept),
            Some("b")
        );
        // Made anew in the same chat: the old place still finds it, as kept now.
        topics.keep("b", record("k", "api", topic("4343", Some("11")), false));
        let (kept, now) = topics.at("telegram", "4343", Some("9")).expect("found");
        assert_eq!((kept, now.topic.thread_id.as_deref()), ("b", Some("11")));
        assert_eq!(topics.at("telegram", "4343", None), None);
    }

    #[test]
    fn kept_names_tell_places_and_transports_apart() {
        let names = [
            kept_name("telegram", "-100", "api"),
            kept_name("telegram", "-200", "api"),
            kept_name("discord", "-100", "api"),
        ];
        let unique: HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), 3);
        assert!(names.iter().all(|n| n.starts_with(KEPT_PREFIX)));
    }
}
