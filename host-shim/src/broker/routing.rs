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
//! - the broker answers only messages meant for the bot: group chatter gets no answer.

use std::collections::BTreeSet;

/// One attached session as routing sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    /// Session key.
    pub key: String,
    /// The name people use for it (`/switch <name>`).
    pub name: String,
    /// Its working directory.
    pub cwd: String,
    /// A turn is running.
    pub busy: bool,
    /// Identities (`transport:userId`) paired with it; the broker fills in only the
    /// sender's (the one a decision asks about).
    pub paired: BTreeSet<String>,
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
    /// The session `wanted` names (its name in any case, or its key), one `identity` is
    /// paired with first when several could be meant.
    fn named(&self, wanted: &str, identity: &str) -> Option<SessionView>;
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

    fn named(&self, wanted: &str, identity: &str) -> Option<SessionView> {
        let by_name = |s: &&SessionView| s.name.eq_ignore_ascii_case(wanted) || s.key == wanted;
        let mut named = self.iter().filter(by_name);
        let first = named.clone().next();
        named
            .find(|s| s.paired.contains(identity))
            .or(first)
            .cloned()
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
    let target = by_number.or_else(|| sessions.named(wanted, identity));
    match target {
        Some(target) if sessions.is_paired(&target.key, identity) => Decision::Switch {
            reply: format!("This chat now talks to {} ({}).", target.name, target.cwd),
            session: target.key,
        },
        // A stranger names a session: the session's own pairing decides, and its code
        // shows only in its terminal.
        Some(target) => Decision::Pair {
            session: target.key,
            reply: PAIRING_ANSWER.to_owned(),
        },
        _ => Decision::Reply(PAIRING_ANSWER.to_owned()),
    }
}

/// The numbered list of `visible` sessions, marking the one `bound` to this chat.
fn list(visible: &[SessionView], bound: Option<&str>) -> String {
    if visible.is_empty() {
        return STRANGER_HELP.to_owned();
    }
    let mut text = String::from("Sessions you are paired with:");
    for (i, session) in visible.iter().enumerate() {
        let state = if session.busy { "busy" } else { "idle" };
        let here = if bound == Some(session.key.as_str()) {
            " ← this chat"
        } else {
            ""
        };
        text.push_str(&format!(
            "\n{}. {} — {} ({state}){here}",
            i + 1,
            session.name,
            session.cwd
        ));
    }
    text.push_str("\nSend /switch <number or name> to talk to another.");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(key: &str, name: &str, paired: &[&str]) -> SessionView {
        SessionView {
            key: key.into(),
            name: name.into(),
            cwd: format!("/work/{name}"),
            busy: false,
            paired: paired.iter().map(|p| p.to_string()).collect(),
        }
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
        assert!(text.contains("1. web — /work/web (idle)"), "{text}");
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
        sessions[0].busy = true;
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
        assert!(text.contains("1. api — /work/api (busy)\n"), "{text}");
        assert!(
            text.contains("2. web — /work/web (idle) ← this chat"),
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
    fn only_the_command_word_makes_a_broker_command() {
        assert!(is_broker_command("  /sessions "));
        assert!(is_broker_command("/SWITCH api"));
        assert!(!is_broker_command("/sessionsx"));
        assert!(!is_broker_command("please /switch api"));
    }
}
