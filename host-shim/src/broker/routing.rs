//! Which session a message is for, and the broker's own two commands (`/sessions`,
//! `/switch`): pure decisions over plain data, so every rule is a table test.
//!
//! Rules (docs/decisions.md#decision-14-one-host-one-bot-many-sessions):
//! - a message goes to the session its conversation is bound to; unbound, to the only
//!   attached session (which binds it); otherwise the sender gets the list;
//! - `/sessions` lists only the sessions the sender's identity is paired with: a
//!   stranger learns nothing about the others (not their names, not their directories);
//! - `/switch <n|name>` binds the conversation to one of those. A stranger may name a
//!   session shown in its terminal: the conversation is bound (in memory only, until it
//!   pairs) to that session, whose pairing challenge (code shown only in its terminal)
//!   decides at the next message; but not in a group already bound, which would move
//!   everyone's chat. A stranger's `/switch` gets the same answer whether the name
//!   exists or not ([`PAIRING_ANSWER`]), so names cannot be probed;
//! - the broker answers only messages meant for the bot: group chatter gets no answer;
//! - two sessions of one name (on two machines) are told apart as `name@machine`, and
//!   `/switch name` then answers with the choices instead of picking one.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// One attached session as routing sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    /// Session key.
    pub key: String,
    /// The name people use for it (`/switch <name>`).
    pub name: String,
    /// Its working directory.
    pub cwd: String,
    /// The machine (host name) running it.
    pub machine: String,
    /// Idle, busy, or offline (its node is gone).
    pub state: SessionState,
    /// How long ago it was last active (online) or last seen (offline), by the answering
    /// node's clock and never negative ([`since`]); `None` when unknown.
    pub ago: Option<Duration>,
    /// Tokens and cost so far, where its agent reports them.
    pub usage: Option<UsageSoFar>,
    /// What keeps it from running, when something does (a machine too old for its state).
    pub note: Option<String>,
    /// Identities (`transport:userId`) paired with it; the broker fills in only the
    /// sender's (the one a decision asks about).
    pub paired: BTreeSet<String>,
}

impl SessionView {
    /// A view with only what every caller knows; the rest is filled in where known.
    pub fn new(key: &str, name: &str, cwd: &str, machine: &str) -> SessionView {
        SessionView {
            key: key.to_owned(),
            name: name.to_owned(),
            cwd: cwd.to_owned(),
            machine: machine.to_owned(),
            state: SessionState::Idle,
            ago: None,
            usage: None,
            note: None,
            paired: BTreeSet::new(),
        }
    }

    /// `name@machine`: how a session is told apart from another of its name.
    pub fn qualified(&self) -> String {
        format!("{}@{}", self.name, self.machine)
    }

    /// Whether `wanted` names this session: its name or `name@machine` in any case, or its
    /// key.
    pub fn answers_to(&self, wanted: &str) -> bool {
        self.name.eq_ignore_ascii_case(wanted)
            || self.key == wanted
            || self.qualified().eq_ignore_ascii_case(wanted)
    }
}

/// Where a session stands, as `/sessions` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Running, no turn.
    Idle,
    /// Running a turn.
    Busy,
    /// Its node is no longer live (its presence or lease aged out): messages to it wait
    /// in its stream.
    Offline,
}

/// A session's token use so far, as its agent reports it (`/usage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UsageSoFar {
    /// Input tokens (read from the cache or not).
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Cost in millionths of a US dollar; none when the agent does not know it.
    pub cost_micros: Option<u64>,
}

impl UsageSoFar {
    /// The figures of an agent's usage report (every model call of its session).
    pub fn of(report: &crate::wit::agent::UsageReport) -> UsageSoFar {
        let s = &report.session;
        UsageSoFar {
            input: s.input.saturating_add(s.cache_read),
            output: s.output,
            cost_micros: s.cost_micros,
        }
    }

    /// Asks `agent` for its usage so far, waiting at most `wait`: `None` from an agent
    /// that cannot say (the demo refuses session commands) or is slow to.
    pub async fn ask(agent: &dyn crate::agent::Agent, wait: Duration) -> Option<UsageSoFar> {
        use crate::wit::agent::{SessionCommand, SessionReply};
        match tokio::time::timeout(wait, agent.session_command(SessionCommand::Usage)).await {
            Ok(Ok(SessionReply::Usage(report))) => Some(UsageSoFar::of(&report)),
            _ => None,
        }
    }

    fn text(&self) -> String {
        use guest::core::session_commands::{cost, count};
        let tokens = format!("{} in, {} out", count(self.input), count(self.output));
        match self.cost_micros {
            Some(micros) => format!("{tokens}, {}", cost(micros)),
            None => tokens,
        }
    }
}

/// How long before `now_ms` the moment `then_ms` was, both ms since the epoch: zero when
/// `then_ms` is later (a machine whose clock runs ahead must never make it "in 3 min").
pub fn since(now_ms: u64, then_ms: u64) -> Duration {
    Duration::from_millis(now_ms.saturating_sub(then_ms))
}

/// `d` as a phone reads it in a list: `just now`, `4 min ago`, `3 h ago`, `2 days ago`.
pub fn ago(d: Duration) -> String {
    let minutes = d.as_secs() / 60;
    match minutes {
        0 => "just now".to_owned(),
        1..=59 => format!("{minutes} min ago"),
        60..=2_879 => format!("{} h ago", minutes / 60),
        _ => format!("{} days ago", minutes / 1_440),
    }
}

/// The label of each session of `visible` in a list: its name, or `name@machine` when
/// another of them has the same name (in any case), so two `api` sessions on two machines
/// read `api@laptop` and `api@build`.
pub fn labels(visible: &[SessionView]) -> Vec<String> {
    // Counted once, not per pair: comparing every name with every other was ten billion
    // comparisons for a sender allowed in 100,000 sessions, and the bot answered nobody
    // for minutes.
    let mut named: HashMap<String, usize> = HashMap::with_capacity(visible.len());
    for session in visible {
        *named.entry(session.name.to_ascii_lowercase()).or_default() += 1;
    }
    visible
        .iter()
        .map(|s| {
            label(
                s,
                named
                    .get(&s.name.to_ascii_lowercase())
                    .copied()
                    .unwrap_or(1),
            )
        })
        .collect()
}

/// `session`'s label when `twins` sessions listed with it (itself included) have its name.
fn label(session: &SessionView, twins: usize) -> String {
    if twins > 1 {
        session.qualified()
    } else {
        session.name.clone()
    }
}

/// What to do with one inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Hand it to this session; `bind` when the conversation was not bound yet.
    Deliver {
        /// Session key.
        session: String,
        /// Bind the conversation to it first.
        bind: bool,
    },
    /// Bind the conversation to this session and answer with `reply` (a paired `/switch`).
    Switch {
        /// Session key.
        session: String,
        /// The confirmation.
        reply: String,
    },
    /// Bind the conversation, in memory only, to a session the sender is not paired with,
    /// so its next message meets that session's pairing; answer with `reply`, the same
    /// text a missing name gets.
    Pair {
        /// Session key.
        session: String,
        /// [`PAIRING_ANSWER`].
        reply: String,
    },
    /// Answer the message here; no session sees it.
    Reply(String),
    /// Leave it: a group message not meant for the bot, which no session takes.
    Ignore,
}

impl Decision {
    /// A stranger's `/switch` binds the chat to the session it names, for that session's
    /// pairing; in a group already bound, that would move everyone's chat, so it is
    /// refused there (a direct message is the stranger's own chat). A missing name is
    /// refused alike, or the refusal would tell names apart.
    fn refused_to_a_stranger_in_a_bound_group(
        self,
        audience: Audience,
        bound: Option<&str>,
    ) -> Decision {
        match self {
            Decision::Pair { .. } | Decision::Reply(_)
                if audience != Audience::Direct && bound.is_some() =>
            {
                Decision::Reply(GROUP_SWITCH_REFUSED.to_owned())
            }
            decision => decision,
        }
    }
}

/// The answer to `/switch <name>` from someone not paired with a session of that name,
/// whether one exists or not: the same text (the name is not even echoed), so a stranger
/// cannot probe for session names.
pub const PAIRING_ANSWER: &str = "If a session of that name is attached to this bot, this \
     chat now talks to it: send a message, then the pairing code its terminal shows. Send \
     /sessions to see the sessions you are paired with.";

/// The broker's command in `text`, if any: `/sessions` or `/switch <arg>`, with a
/// Telegram-style `@botname` suffix allowed on the command word.
fn broker_command(text: &str) -> Option<(&'static str, &str)> {
    let text = text.trim();
    let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let word = word.split_once('@').map_or(word, |(w, _)| w);
    match word.to_ascii_lowercase().as_str() {
        "/sessions" => Some(("sessions", rest.trim())),
        "/switch" => Some(("switch", rest.trim())),
        _ => None,
    }
}

/// True when `text` is one of the broker's own commands (it never reaches a session).
pub fn is_broker_command(text: &str) -> bool {
    broker_command(text).is_some()
}

/// True when `text` asks for the list of sessions (`/sessions`, or `/switch` alone): the
/// only answer that shows usage, so the only one worth asking the agents for it.
pub fn lists_sessions(text: &str) -> bool {
    matches!(broker_command(text), Some(("sessions", _)) | Some((_, "")))
}

/// The text a stranger gets when several sessions could be meant: how to reach one,
/// without naming any.
pub const STRANGER_HELP: &str = "This bot serves several agent sessions. Send /switch <name> \
     with the name shown in the terminal of the session you want to reach.";

/// The text when no session is attached: the message is answered, not kept.
pub const NONE_ATTACHED: &str = "No agent session is attached to this bot right now, so this \
     message was not delivered. Start one (pi with bot-connect, or host-shim serve --demo \
     <name>) and send it again.";

/// Who a message was written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// A direct message to the bot: the conversation is the sender's alone.
    Direct,
    /// A group message that mentions or replies to the bot (on Telegram, a bare command).
    Mentioned,
    /// A group message among people, not meant for the bot.
    Chatter,
}

impl Audience {
    /// The audience of an envelope with these flags, as its transport set them.
    ///
    /// The bridge's own router (`guest/src/core/router.rs`, `route`) starts from the same
    /// two flags and also counts a message led by the bot's name or a remote prefix as
    /// addressed. Those come from each session's config, which the broker, in front of
    /// several sessions, does not hold: such a message in a group no session talks to yet
    /// goes unanswered here, where one session would have answered it.
    pub fn of(is_direct: bool, addressed: bool) -> Audience {
        match (is_direct, addressed) {
            (true, _) => Audience::Direct,
            (false, true) => Audience::Mentioned,
            (false, false) => Audience::Chatter,
        }
    }
}

/// A stranger's `/switch` in a group that already talks to a session: it would move the
/// whole group away from what its paired members chose. Names nothing.
pub const GROUP_SWITCH_REFUSED: &str = "This group already talks to a session, and only \
     someone paired with a session can switch it. To pair, send /switch <name> to the bot in \
     a direct message.";

/// What routing asks of the sessions attached to one bot, one question at a time. The
/// broker answers from its indexes and the state database's trust index, so a chat's first
/// message costs the same with ten or ten thousand sessions attached (it used to build a
/// view of every session for each one: 15 ms at 10,000); the cluster and the tests answer
/// from a list of views ([`SessionView`] slices).
pub trait Roster {
    /// How many sessions are attached, and the one when it is the only one.
    fn census(&self) -> Census;
    /// Whether session `key` is attached.
    fn is_attached(&self, key: &str) -> bool;
    /// Every session `wanted` names ([`SessionView::answers_to`]: its name in any case,
    /// `name@machine`, or its key), in attach order, each with `identity` in `paired`
    /// when it is paired with it.
    fn named(&self, wanted: &str, identity: &str) -> Vec<SessionView>;
    /// Whether `identity` is paired with session `key`.
    fn is_paired(&self, key: &str, identity: &str) -> bool;
    /// The sessions `identity` is paired with, in attach order (what `/sessions` lists
    /// and `/switch <n>` counts in).
    fn paired_with(&self, identity: &str) -> Vec<SessionView>;
}

/// How many sessions are attached to a bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Census {
    /// None.
    Empty,
    /// Exactly this one: an unbound chat goes to it.
    Only(SessionView),
    /// More than one: an unbound chat must choose.
    Several,
}

/// A list of views answers every question by looking through it.
impl Roster for [SessionView] {
    fn census(&self) -> Census {
        match self {
            [] => Census::Empty,
            [only] => Census::Only(only.clone()),
            _ => Census::Several,
        }
    }

    fn is_attached(&self, key: &str) -> bool {
        self.iter().any(|s| s.key == key)
    }

    fn named(&self, wanted: &str, _identity: &str) -> Vec<SessionView> {
        self.iter()
            .filter(|s| s.answers_to(wanted))
            .cloned()
            .collect()
    }

    fn is_paired(&self, key: &str, identity: &str) -> bool {
        self.iter()
            .any(|s| s.key == key && s.paired.contains(identity))
    }

    fn paired_with(&self, identity: &str) -> Vec<SessionView> {
        self.iter()
            .filter(|s| s.paired.contains(identity))
            .cloned()
            .collect()
    }
}

/// Decides what happens to `text` from `identity`, given who it was written for
/// (`audience`), the conversation's binding (`bound`: a session key, attached or not) and
/// the attached sessions.
///
/// Group chatter still goes to a session that takes it (a live pairing code needs no
/// addressing), but the broker never answers it. Sessions ignore such messages too (I7);
/// a list or a help text in answer to each would flood the group.
pub fn decide<R: Roster + ?Sized>(
    text: &str,
    identity: &str,
    audience: Audience,
    bound: Option<&str>,
    bound_name: Option<&str>,
    sessions: &R,
) -> Decision {
    match decide_addressed(text, identity, audience, bound, bound_name, sessions) {
        Decision::Reply(_) | Decision::Pair { .. } if audience == Audience::Chatter => {
            Decision::Ignore
        }
        decision => decision,
    }
}

/// [`decide`] for a message meant for the bot.
fn decide_addressed<R: Roster + ?Sized>(
    text: &str,
    identity: &str,
    audience: Audience,
    bound: Option<&str>,
    bound_name: Option<&str>,
    sessions: &R,
) -> Decision {
    match broker_command(text) {
        Some(("sessions", _)) | Some((_, "")) => {
            Decision::Reply(list(&sessions.paired_with(identity), bound))
        }
        Some((_, wanted)) => switch(wanted, identity, sessions)
            .refused_to_a_stranger_in_a_bound_group(audience, bound),
        None => match bound {
            Some(key) if sessions.is_attached(key) => Decision::Deliver {
                session: key.to_owned(),
                bind: false,
            },
            Some(_) => Decision::Reply(format!(
                "The session this chat talks to ({}) is not attached right now, so this message \
                 was not delivered. Send /sessions to pick another, or send it again once it is back.",
                bound_name.unwrap_or("unnamed")
            )),
            None => match sessions.census() {
                Census::Empty => Decision::Reply(NONE_ATTACHED.to_owned()),
                Census::Only(only) => Decision::Deliver {
                    session: only.key,
                    bind: true,
                },
                Census::Several => {
                    let visible = sessions.paired_with(identity);
                    if visible.is_empty() {
                        Decision::Reply(STRANGER_HELP.to_owned())
                    } else {
                        Decision::Reply(format!(
                            "This message was not delivered: this chat is not bound to a session yet.\n{}",
                            list(&visible, None)
                        ))
                    }
                }
            },
        },
    }
}

fn switch<R: Roster + ?Sized>(wanted: &str, identity: &str, sessions: &R) -> Decision {
    let by_number = wanted
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| sessions.paired_with(identity).into_iter().nth(i));
    let named = match by_number {
        Some(target) => vec![target],
        None => sessions.named(wanted, identity),
    };
    let (paired, strange): (Vec<SessionView>, Vec<SessionView>) = named
        .into_iter()
        .partition(|s| sessions.is_paired(&s.key, identity));
    match (paired.as_slice(), strange.first()) {
        ([target], _) => {
            let label = label(target, twins(target, identity, sessions));
            let offline = if target.state == SessionState::Offline {
                " It is offline: your messages wait and are delivered when it is back."
            } else {
                ""
            };
            Decision::Switch {
                reply: format!("This chat now talks to {label} ({}).{offline}", target.cwd),
                session: target.key.clone(),
            }
        }
        // Two of the sender's own sessions have that name: never pick one silently.
        ([_, _, ..], _) => {
            Decision::Reply(choices(wanted, &paired, &sessions.paired_with(identity)))
        }
        // A stranger names a session: the session's own pairing decides, and its code
        // shows only in its terminal.
        ([], Some(target)) => Decision::Pair {
            session: target.key.clone(),
            reply: PAIRING_ANSWER.to_owned(),
        },
        ([], None) => Decision::Reply(PAIRING_ANSWER.to_owned()),
    }
}

/// How many of `identity`'s sessions have `session`'s name (in any case), `session`
/// among them: asked by that name, not by walking the sender's list, which for a sender
/// allowed in 100,000 sessions made `/switch` take 130 ms.
fn twins<R: Roster + ?Sized>(session: &SessionView, identity: &str, sessions: &R) -> usize {
    let same = sessions
        .named(&session.name, identity)
        .iter()
        .filter(|s| s.key != session.key && s.name.eq_ignore_ascii_case(&session.name))
        .filter(|s| sessions.is_paired(&s.key, identity))
        .count();
    same + 1
}

/// The answer to `/switch <name>` when several of the sender's sessions have that name:
/// each one, numbered as `/sessions` numbers it, with the name that picks it.
fn choices(wanted: &str, matching: &[SessionView], visible: &[SessionView]) -> String {
    let mut text = format!("Several of your sessions are called {wanted}:");
    for session in matching {
        let number = visible
            .iter()
            .position(|s| s.key == session.key)
            .map_or(String::new(), |i| format!("{}. ", i + 1));
        text.push_str(&format!(
            "\n{number}{} — {}",
            session.qualified(),
            session.cwd
        ));
    }
    let first = matching
        .first()
        .map_or_else(String::new, SessionView::qualified);
    text.push_str(&format!(
        "\nSend /switch {first} (or the number) to pick one."
    ));
    text
}

/// One session's line in `/sessions`: number, label, machine, directory, state, when it
/// was last active (or seen), and its usage where its agent reports it.
fn line(number: usize, label: &str, session: &SessionView, here: bool) -> String {
    let mut text = format!("{number}. {label}");
    if label != session.qualified() {
        text.push_str(&format!(" on {}", session.machine));
    }
    text.push_str(&format!(" — {}", session.cwd));
    let when = session.ago.map(ago);
    let state = match (session.state, when) {
        (SessionState::Idle, Some(when)) => format!("idle, active {when}"),
        (SessionState::Idle, None) => "idle".to_owned(),
        (SessionState::Busy, _) => "busy".to_owned(),
        (SessionState::Offline, Some(when)) => format!("offline, last seen {when}"),
        (SessionState::Offline, None) => "offline".to_owned(),
    };
    text.push_str(&format!(" · {state}"));
    if let Some(usage) = &session.usage {
        text.push_str(&format!(" · {}", usage.text()));
    }
    if let Some(note) = &session.note {
        text.push_str(&format!(" · ⚠ {note}"));
    }
    if here {
        text.push_str(" ← this chat");
    }
    text
}

/// The numbered list of `visible` sessions, marking the one `bound` to this chat.
fn list(visible: &[SessionView], bound: Option<&str>) -> String {
    if visible.is_empty() {
        return STRANGER_HELP.to_owned();
    }
    let mut text = String::from("Sessions you are paired with:");
    for ((i, session), label) in visible.iter().enumerate().zip(labels(visible)) {
        let here = bound == Some(session.key.as_str());
        text.push('\n');
        text.push_str(&line(i + 1, &label, session, here));
    }
    text.push_str("\nSend /switch <number or name> to talk to another.");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(key: &str, name: &str, paired: &[&str]) -> SessionView {
        let mut view = SessionView::new(key, name, &format!("/work/{name}"), "laptop");
        view.paired = paired.iter().map(|p| p.to_string()).collect();
        view
    }

    fn two() -> Vec<SessionView> {
        vec![
            session("k-api", "api", &["telegram:1"]),
            session("k-web", "web", &["telegram:1", "telegram:2"]),
        ]
    }

    #[test]
    fn a_bound_conversation_goes_to_its_session() {
        assert_eq!(
            decide(
                "hello",
                "telegram:9",
                Audience::Direct,
                Some("k-web"),
                Some("web"),
                two().as_slice()
            ),
            Decision::Deliver {
                session: "k-web".into(),
                bind: false
            }
        );
    }

    #[test]
    fn unbound_goes_to_the_only_session_and_binds_it() {
        let only = vec![session("k-api", "api", &[])];
        assert_eq!(
            decide(
                "hello",
                "telegram:9",
                Audience::Direct,
                None,
                None,
                only.as_slice()
            ),
            Decision::Deliver {
                session: "k-api".into(),
                bind: true
            }
        );
    }

    #[test]
    fn unbound_with_several_sessions_gets_the_list_of_its_own_sessions_only() {
        let Decision::Reply(text) = decide(
            "hello",
            "telegram:2",
            Audience::Direct,
            None,
            None,
            two().as_slice(),
        ) else {
            panic!("expected a reply");
        };
        assert!(text.contains("not delivered"), "{text}");
        assert!(
            text.contains("1. web on laptop — /work/web · idle"),
            "{text}"
        );
        assert!(
            !text.contains("api"),
            "telegram:2 is not paired with api: {text}"
        );
    }

    #[test]
    fn a_stranger_learns_no_session_name_or_directory() {
        for text in ["hello", "/sessions", "/switch", "/switch 1", "/switch nope"] {
            let Decision::Reply(reply) = decide(
                text,
                "telegram:77",
                Audience::Direct,
                None,
                None,
                two().as_slice(),
            ) else {
                panic!("{text}: expected a reply");
            };
            for secret in ["api", "web", "/work"] {
                assert!(!reply.contains(secret), "{text} → {reply}");
            }
        }
    }

    #[test]
    fn a_stranger_naming_a_session_is_handed_to_its_pairing() {
        assert_eq!(
            decide(
                "/switch API",
                "telegram:77",
                Audience::Direct,
                None,
                None,
                two().as_slice()
            ),
            Decision::Pair {
                session: "k-api".into(),
                reply: PAIRING_ANSWER.to_owned()
            }
        );
    }

    #[test]
    fn a_strangers_switch_is_answered_alike_whether_the_name_exists_or_not() {
        let answer = |text: &str, audience: Audience, bound: Option<&str>| match decide(
            text,
            "telegram:77",
            audience,
            bound,
            None,
            two().as_slice(),
        ) {
            Decision::Pair { reply, .. } | Decision::Reply(reply) => Some(reply),
            Decision::Ignore => None,
            other => panic!("{text}: {other:?}"),
        };
        for (audience, bound) in [
            (Audience::Direct, None),
            (Audience::Direct, Some("k-web")),
            (Audience::Mentioned, None),
            (Audience::Mentioned, Some("k-web")),
            (Audience::Chatter, None),
        ] {
            assert_eq!(
                answer("/switch api", audience, bound),
                answer("/switch apx", audience, bound),
                "{audience:?} {bound:?}"
            );
        }
        let text = answer("/switch apx", Audience::Direct, None).expect("answered");
        assert!(!text.contains("/work"), "{text}");
    }

    #[test]
    fn switch_by_number_counts_in_the_senders_own_list() {
        // telegram:2 sees only `web`, so its 1 is web, not api.
        assert_eq!(
            decide(
                "/switch 1",
                "telegram:2",
                Audience::Direct,
                Some("k-api"),
                None,
                two().as_slice()
            ),
            Decision::Switch {
                session: "k-web".into(),
                reply: "This chat now talks to web (/work/web).".into()
            }
        );
        assert_eq!(
            decide(
                "/switch 2",
                "telegram:2",
                Audience::Direct,
                None,
                None,
                two().as_slice()
            ),
            Decision::Reply(PAIRING_ANSWER.to_owned())
        );
    }

    #[test]
    fn switch_by_name_ignores_case_and_takes_a_bot_suffix() {
        assert!(matches!(
            decide("/switch@my_bot Web", "telegram:1", Audience::Direct, None, None, two().as_slice()),
            Decision::Switch { session, .. } if session == "k-web"
        ));
    }

    #[test]
    fn sessions_marks_this_chat_and_says_busy() {
        let mut sessions = two();
        sessions[0].state = SessionState::Busy;
        let Decision::Reply(text) = decide(
            "/sessions",
            "telegram:1",
            Audience::Direct,
            Some("k-web"),
            None,
            sessions.as_slice(),
        ) else {
            panic!("expected a reply");
        };
        assert!(
            text.contains("1. api on laptop — /work/api · busy\n"),
            "{text}"
        );
        assert!(
            text.contains("2. web on laptop — /work/web · idle ← this chat"),
            "{text}"
        );
    }

    #[test]
    fn a_session_that_detached_keeps_its_binding_and_the_sender_hears_it() {
        let Decision::Reply(text) = decide(
            "hello",
            "telegram:1",
            Audience::Direct,
            Some("k-gone"),
            Some("old"),
            two().as_slice(),
        ) else {
            panic!("expected a reply");
        };
        assert!(text.contains("(old) is not attached"), "{text}");
        assert!(text.contains("not delivered"), "{text}");
    }

    #[test]
    fn with_no_session_the_message_is_answered_not_dropped() {
        assert_eq!(
            decide(
                "hello",
                "telegram:1",
                Audience::Direct,
                None,
                None,
                &[] as &[SessionView]
            ),
            Decision::Reply(NONE_ATTACHED.into())
        );
    }

    #[test]
    fn a_group_message_not_meant_for_the_bot_is_never_answered() {
        // Each case answers an addressed message; unaddressed, the broker stays silent.
        let cases: [(&str, Option<&str>, Vec<SessionView>); 4] = [
            ("hello", None, two()),
            ("hello", Some("k-gone"), two()),
            ("hello", None, Vec::new()),
            ("/switch nope", None, two()),
        ];
        for (text, bound, sessions) in cases {
            assert!(matches!(
                decide(
                    text,
                    "telegram:2",
                    Audience::Direct,
                    bound,
                    None,
                    sessions.as_slice()
                ),
                Decision::Reply(_)
            ));
            assert_eq!(
                decide(
                    text,
                    "telegram:2",
                    Audience::Chatter,
                    bound,
                    None,
                    sessions.as_slice()
                ),
                Decision::Ignore,
                "{text} bound to {bound:?}"
            );
        }
        // What a session takes still goes to it: its pairing decides, not the broker.
        let only = vec![session("k-api", "api", &[])];
        assert_eq!(
            decide(
                "123456",
                "telegram:9",
                Audience::Chatter,
                None,
                None,
                only.as_slice()
            ),
            Decision::Deliver {
                session: "k-api".into(),
                bind: true
            }
        );
        assert_eq!(
            decide(
                "hi",
                "telegram:9",
                Audience::Chatter,
                Some("k-web"),
                None,
                two().as_slice()
            ),
            Decision::Deliver {
                session: "k-web".into(),
                bind: false
            }
        );
    }

    #[test]
    fn a_stranger_cannot_move_a_bound_group_but_may_name_a_session_elsewhere() {
        // In a group already bound, a stranger's /switch would move everyone's chat: it
        // is refused, and not even answered when the bot was not addressed.
        for (audience, refused) in [
            (
                Audience::Mentioned,
                Decision::Reply(GROUP_SWITCH_REFUSED.into()),
            ),
            (Audience::Chatter, Decision::Ignore),
        ] {
            assert_eq!(
                decide(
                    "/switch web",
                    "telegram:77",
                    audience,
                    Some("k-api"),
                    None,
                    two().as_slice()
                ),
                refused,
                "{audience:?}"
            );
        }
        // Its own direct chat, or a group nobody bound yet, goes to that session's pairing.
        for (audience, bound) in [
            (Audience::Direct, Some("k-api")),
            (Audience::Mentioned, None),
        ] {
            assert_eq!(
                decide(
                    "/switch web",
                    "telegram:77",
                    audience,
                    bound,
                    None,
                    two().as_slice()
                ),
                Decision::Pair {
                    session: "k-web".into(),
                    reply: PAIRING_ANSWER.to_owned()
                },
                "{audience:?} {bound:?}"
            );
        }
        // Someone paired with the session moves the group.
        assert!(matches!(
            decide("/switch web", "telegram:2", Audience::Mentioned, Some("k-api"), None, two().as_slice()),
            Decision::Switch { session, .. } if session == "k-web"
        ));
        for hidden in ["api", "web", "/work"] {
            assert!(!GROUP_SWITCH_REFUSED.contains(hidden));
        }
    }

    #[test]
    fn time_since_is_never_negative_whatever_the_clocks_say() {
        // (now, then, expected): `then` from a machine whose clock runs ahead of ours.
        let table = [
            (10_000, 4_000, Duration::from_secs(6)),
            (10_000, 10_000, Duration::ZERO),
            (10_000, 190_000, Duration::ZERO),
            (0, u64::MAX, Duration::ZERO),
        ];
        for (now, then, expected) in table {
            assert_eq!(since(now, then), expected, "{now} {then}");
        }
        let table = [
            (0, "just now"),
            (59, "just now"),
            (60, "1 min ago"),
            (125, "2 min ago"),
            (3_599, "59 min ago"),
            (3_600, "1 h ago"),
            (47 * 3_600, "47 h ago"),
            (48 * 3_600, "2 days ago"),
        ];
        for (secs, text) in table {
            assert_eq!(ago(Duration::from_secs(secs)), text, "{secs}");
        }
    }

    #[test]
    fn a_sessions_line_says_machine_state_activity_and_usage() {
        let usage = UsageSoFar {
            input: 12_300,
            output: 1_200,
            cost_micros: Some(41_200),
        };
        let base = || session("k", "api", &["telegram:1"]);
        let table: Vec<(SessionView, bool, &str)> = vec![
            (base(), false, "1. api on laptop — /work/api · idle"),
            (
                SessionView {
                    ago: Some(Duration::from_secs(130)),
                    ..base()
                },
                true,
                "1. api on laptop — /work/api · idle, active 2 min ago ← this chat",
            ),
            (
                SessionView {
                    state: SessionState::Busy,
                    ago: Some(Duration::from_secs(130)),
                    usage: Some(usage),
                    ..base()
                },
                false,
                "1. api on laptop — /work/api · busy · 12.3k in, 1.2k out, $0.0412",
            ),
            (
                SessionView {
                    state: SessionState::Offline,
                    ago: Some(Duration::from_secs(7_200)),
                    usage: Some(UsageSoFar {
                        cost_micros: None,
                        ..usage
                    }),
                    ..base()
                },
                false,
                "1. api on laptop — /work/api · offline, last seen 2 h ago · 12.3k in, 1.2k out",
            ),
            (
                SessionView {
                    state: SessionState::Offline,
                    ..base()
                },
                false,
                "1. api on laptop — /work/api · offline",
            ),
            (
                SessionView {
                    state: SessionState::Offline,
                    note: Some("upgrade host-shim on laptop".into()),
                    ..base()
                },
                false,
                "1. api on laptop — /work/api · offline · ⚠ upgrade host-shim on laptop",
            ),
        ];
        for (view, here, expected) in table {
            let bound = here.then_some("k");
            assert_eq!(
                list(std::slice::from_ref(&view), bound),
                format!(
                    "Sessions you are paired with:\n{expected}\nSend /switch <number or name> \
                     to talk to another."
                )
            );
        }
    }

    /// `api` on two machines, both paired with telegram:1; telegram:2 with neither.
    fn twins() -> Vec<SessionView> {
        let mut build = session("k-api-build", "api", &["telegram:1"]);
        build.machine = "build".into();
        build.cwd = "/srv/api".into();
        vec![
            session("k-api-laptop", "API", &["telegram:1"]),
            session("k-web", "web", &["telegram:1"]),
            build,
        ]
    }

    #[test]
    fn two_sessions_of_one_name_are_told_apart_by_their_machine() {
        assert_eq!(
            labels(&twins()),
            ["API@laptop", "web", "api@build"].map(String::from)
        );
        let Decision::Reply(text) = decide(
            "/sessions",
            "telegram:1",
            Audience::Direct,
            Some("k-api-build"),
            None,
            twins().as_slice(),
        ) else {
            panic!("expected the list");
        };
        assert!(
            text.contains("\n1. API@laptop — /work/API · idle\n"),
            "{text}"
        );
        assert!(text.contains("\n2. web on laptop — /work/web"), "{text}");
        assert!(
            text.contains("\n3. api@build — /srv/api · idle ← this chat"),
            "{text}"
        );
    }

    #[test]
    fn switch_to_a_shared_name_answers_with_the_choices_and_each_choice_works() {
        let switch = |text: &str, who: &str| {
            decide(text, who, Audience::Direct, None, None, twins().as_slice())
        };
        let Decision::Reply(text) = switch("/switch api", "telegram:1") else {
            panic!("expected the choices, not a pick");
        };
        assert_eq!(
            text,
            "Several of your sessions are called api:\n1. API@laptop — /work/API\n3. \
             api@build — /srv/api\nSend /switch API@laptop (or the number) to pick one."
        );
        for (wanted, key, reply) in [
            ("api@build", "k-api-build", "api@build (/srv/api)"),
            ("API@BUILD", "k-api-build", "api@build (/srv/api)"),
            ("api@laptop", "k-api-laptop", "API@laptop (/work/API)"),
            ("3", "k-api-build", "api@build (/srv/api)"),
            ("web", "k-web", "web (/work/web)"),
        ] {
            assert_eq!(
                switch(&format!("/switch {wanted}"), "telegram:1"),
                Decision::Switch {
                    session: key.into(),
                    reply: format!("This chat now talks to {reply}.")
                },
                "{wanted}"
            );
        }
        // A stranger learns nothing of either: the pairing answer, as for any name.
        for wanted in ["api", "api@build", "api@nowhere"] {
            let answer = switch(&format!("/switch {wanted}"), "telegram:2");
            let (Decision::Pair { reply, .. } | Decision::Reply(reply)) = answer else {
                panic!("{wanted}: {answer:?}");
            };
            assert_eq!(reply, PAIRING_ANSWER, "{wanted}");
        }
    }

    #[test]
    fn switching_to_an_offline_session_says_that_messages_wait() {
        let mut sessions = two();
        sessions[1].state = SessionState::Offline;
        assert_eq!(
            decide(
                "/switch web",
                "telegram:1",
                Audience::Direct,
                None,
                None,
                sessions.as_slice()
            ),
            Decision::Switch {
                session: "k-web".into(),
                reply: "This chat now talks to web (/work/web). It is offline: your messages \
                        wait and are delivered when it is back."
                    .into()
            }
        );
    }

    #[test]
    fn only_the_command_word_makes_a_broker_command() {
        assert!(lists_sessions("/sessions@my_bot"));
        assert!(lists_sessions("/switch "));
        assert!(!lists_sessions("/switch api"));
        assert!(!lists_sessions("sessions"));
        assert!(is_broker_command("  /sessions "));
        assert!(is_broker_command("/SWITCH api"));
        assert!(!is_broker_command("/sessionsx"));
        assert!(!is_broker_command("please /switch api"));
    }
}
