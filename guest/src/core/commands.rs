//! The remote command surface typed in a chat (docs/architecture.md#the-original-module-by-module,
//! docs/decisions.md#decision-1-bot-status-is-a-command).
//!
//! Parsing is conservative: a message is a command only when it is clearly addressed as one
//! (a prefix, or a leading `@bot` mention) **and** its first word is a known command or alias.
//! Everything else is a prompt, so ordinary chatter is never swallowed by the bridge.
//! Names, aliases, help lines and parsing all come from the one [`COMMANDS`] table, so a
//! command cannot be listed in help but unparseable, or the other way round.

use crate::core::text::{format_duration, strip_leading_mention, strip_prefix_ci};
use crate::keys::Identity;

/// A remote command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteCommand {
    /// List the commands.
    Help,
    /// Show bridge, session and agent state.
    Status,
    /// Stop forwarding prompts from this conversation.
    Pause,
    /// Forward prompts again.
    Resume,
    /// Show turns typed at the terminal (and `/connect digest`) in this conversation too.
    Follow,
    /// Stop showing turns typed at the terminal here; the chat's own turns still answer.
    Unfollow,
    /// Abort the agent's current turn.
    Abort,
    /// Show the paired identity.
    Whoami,
    /// Revoke this identity's pairing.
    Disconnect,
    /// Approve a pending tool call (`/approve <id>`).
    Approve,
    /// Deny a pending tool call (`/deny <id>`).
    Deny,
    /// Show what a pending tool call touches (`/details <id>`), in place on the request.
    Details,
    /// Show what a remote turn may do (docs/decisions.md#decision-16-scoped-remote-turns).
    Scope,
    /// Answer a question the agent asked (`/answer <id> <answer>`).
    Answer,
    /// Show how many prompts wait for the agent, and what happens to one sent while it is
    /// busy.
    Queue,
    /// Start a new agent session (asks first while a turn runs or prompts wait).
    New,
    /// Summarise the conversation to free context (`/compact [instructions]`).
    Compact,
    /// Switch model (`/model <name>`), or list the models (`/model`).
    Model,
    /// Set or show the thinking level (`/thinking [level]`).
    Thinking,
    /// Show tokens, cost and context used.
    Usage,
}

impl RemoteCommand {
    /// Answers an approval or an agent question (`/approve`, `/deny`, `/details`,
    /// `/answer`): only an identity trusted to decide may, whatever else it may do.
    pub fn decides(self) -> bool {
        matches!(
            self,
            RemoteCommand::Approve
                | RemoteCommand::Deny
                | RemoteCommand::Details
                | RemoteCommand::Answer
        )
    }

    /// Canonical name from the command table (for audit log lines).
    pub fn name(self) -> &'static str {
        COMMANDS
            .iter()
            .find(|spec| spec.command == self)
            .map_or("unknown", |spec| spec.name)
    }
}

/// One row of the command table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandSpec {
    /// The command.
    pub command: RemoteCommand,
    /// Canonical name, typed after a prefix.
    pub name: &'static str,
    /// Other accepted names.
    pub aliases: &'static [&'static str],
    /// Argument synopsis shown in help (empty: none).
    pub usage: &'static str,
    /// One-line description shown in help.
    pub summary: &'static str,
}

/// Every remote command, in help order.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        command: RemoteCommand::Help,
        name: "help",
        aliases: &["?", "h", "commands"],
        usage: "",
        summary: "Show the remote command list",
    },
    CommandSpec {
        command: RemoteCommand::Status,
        name: "status",
        aliases: &["s", "state"],
        usage: "",
        summary: "Show bridge, session and agent state",
    },
    CommandSpec {
        command: RemoteCommand::Pause,
        name: "pause",
        aliases: &["hold"],
        usage: "",
        summary: "Stop forwarding prompts; local session keeps running",
    },
    CommandSpec {
        command: RemoteCommand::Resume,
        name: "resume",
        aliases: &["unhold", "continue"],
        usage: "",
        summary: "Resume forwarding prompts",
    },
    CommandSpec {
        command: RemoteCommand::Follow,
        name: "follow",
        aliases: &["subscribe"],
        usage: "",
        summary: "Also show turns typed at the terminal here (DMs do by default)",
    },
    CommandSpec {
        command: RemoteCommand::Unfollow,
        name: "unfollow",
        aliases: &["unsubscribe"],
        usage: "",
        summary: "Stop showing turns typed at the terminal here",
    },
    CommandSpec {
        command: RemoteCommand::Abort,
        name: "abort",
        aliases: &["stop", "cancel"],
        usage: "",
        summary: "Abort the current agent turn",
    },
    CommandSpec {
        command: RemoteCommand::Whoami,
        name: "whoami",
        aliases: &["who", "me"],
        usage: "",
        summary: "Show the paired identity for this chat",
    },
    CommandSpec {
        command: RemoteCommand::Disconnect,
        name: "disconnect",
        aliases: &["bye", "unpair"],
        usage: "",
        summary: "Revoke this chat's pairing for the current session",
    },
    CommandSpec {
        command: RemoteCommand::Approve,
        name: "approve",
        aliases: &[],
        usage: "<id> [turn]",
        summary: "Let a tool call waiting for approval run (turn: and the same tool for the rest of the turn)",
    },
    CommandSpec {
        command: RemoteCommand::Deny,
        name: "deny",
        aliases: &[],
        usage: "<id>",
        summary: "Block a tool call waiting for approval",
    },
    CommandSpec {
        command: RemoteCommand::Details,
        name: "details",
        aliases: &[],
        usage: "<id>",
        summary: "Show what a tool call waiting for approval touches",
    },
    CommandSpec {
        command: RemoteCommand::Answer,
        name: "answer",
        aliases: &[],
        usage: "<id> <answer>",
        summary: "Answer a question the agent asked",
    },
    CommandSpec {
        command: RemoteCommand::Scope,
        name: "scope",
        aliases: &["rights"],
        usage: "",
        summary: "Show what a turn started from here may do",
    },
    CommandSpec {
        command: RemoteCommand::Queue,
        name: "queue",
        aliases: &["queued", "q"],
        usage: "",
        summary: "Show the prompts waiting for the agent",
    },
    CommandSpec {
        command: RemoteCommand::New,
        name: "new",
        aliases: &[],
        usage: "",
        summary: "Start a new agent session (earlier turns are forgotten)",
    },
    CommandSpec {
        command: RemoteCommand::Compact,
        name: "compact",
        aliases: &[],
        usage: "[instructions]",
        summary: "Summarise the conversation to free context",
    },
    CommandSpec {
        command: RemoteCommand::Model,
        name: "model",
        aliases: &["models"],
        usage: "[name]",
        summary: "Switch model, or list the models",
    },
    CommandSpec {
        command: RemoteCommand::Thinking,
        name: "thinking",
        aliases: &["think"],
        usage: "[level]",
        summary: "Set or show the thinking level",
    },
    CommandSpec {
        command: RemoteCommand::Usage,
        name: "usage",
        aliases: &["cost", "tokens"],
        usage: "",
        summary: "Show tokens, cost and context used",
    },
];

/// What `/queue` reports: counts only (the queue records chats, not prompt texts, and a chat
/// is not told about other chats' prompts beyond their number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueView {
    /// Prompts waiting in all.
    pub waiting: usize,
    /// Of them, sent from the asking chat.
    pub from_here: usize,
    /// A turn is running.
    pub turn_running: bool,
    /// What a prompt sent while the agent is busy becomes (`bridge.busyDelivery`).
    pub busy_delivery: crate::model::DeliverAs,
    /// `bridge.maxQueuedPrompts`.
    pub limit: u32,
}

/// The `/queue` reply.
pub fn queue_text(view: &QueueView) -> String {
    let mut lines = Vec::new();
    if view.waiting == 0 {
        lines.push("No prompt waits for the agent.".to_owned());
    } else {
        let others = view.waiting - view.from_here;
        lines.push(format!(
            "{} prompt(s) wait for the agent, oldest first: {} from this chat, {} from other chats. \
             Each runs as its own turn when the one before it ends.",
            view.waiting, view.from_here, others
        ));
    }
    lines.push(if view.turn_running {
        "A turn is running now.".to_owned()
    } else {
        "No turn is running now.".to_owned()
    });
    lines.push(match view.busy_delivery {
        crate::model::DeliverAs::Steer => {
            "A prompt sent while the agent is busy steers the running \
             turn: pi reads it as soon as the current step ends, instead of waiting for a turn \
             of its own (bridge.busyDelivery: steer)."
                .to_owned()
        }
        _ => "A prompt sent while the agent is busy is a follow-up: it waits here for a turn of \
             its own (bridge.busyDelivery: followUp; steer hands it to the running turn instead)."
            .to_owned(),
    });
    lines.push(format!(
        "At most {} wait (bridge.maxQueuedPrompts); one more is refused with a reply, never dropped.",
        view.limit
    ));
    lines.join("\n")
}

/// A recognised command and the words after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedCommand {
    /// The command.
    pub command: RemoteCommand,
    /// Everything after the command word, trimmed (never logged: it may hold anything).
    pub args: String,
}

/// What the bridge must do after a command replied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandEffect {
    /// Nothing beyond the reply.
    None,
    /// Pause delivery for this conversation.
    Pause,
    /// Resume delivery for this conversation.
    Resume,
    /// This conversation sees local turns from now on.
    Follow,
    /// This conversation no longer sees local turns.
    Unfollow,
    /// Abort the agent's turn.
    Abort,
    /// Revoke the identity, unpause and clear the pending code
    /// (docs/decisions.md#decision-7-local-and-remote-disconnect-clear-the-same-state).
    Disconnect,
}

/// What `/status` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusView {
    /// Transport id.
    pub transport: String,
    /// The asking identity (`transport:userId`).
    pub identity: Identity,
    /// Session name, if it has one.
    pub session_name: Option<String>,
    /// Working directory (empty: unknown).
    pub cwd: String,
    /// The agent is in a turn.
    pub busy: bool,
    /// Delivery is paused for this conversation.
    pub paused: bool,
    /// This conversation sees turns typed at the terminal.
    pub following: bool,
    /// How long ago the identity paired, when known.
    pub paired_for_ms: Option<u64>,
}

/// The command a typed name or alias means: trimmed, lower-cased, leading `/`s removed.
pub fn resolve_remote_command_name(name: &str) -> Option<RemoteCommand> {
    let normalized = name.trim().to_lowercase();
    let normalized = normalized.trim_start_matches('/');
    if normalized.is_empty() {
        return None;
    }
    COMMANDS
        .iter()
        .find(|spec| spec.name == normalized || spec.aliases.contains(&normalized))
        .map(|spec| spec.command)
}

/// Parses `text` as a remote command, or `None` when it is a prompt.
///
/// - With a leading `@bot` mention (docs/decisions.md#decision-1-bot-status-is-a-command): the
///   mention is stripped, then a prefixed command (`@bot /status`) is a command, and so is a bare
///   command word standing alone (`@bot status`). A bare word followed by more text
///   (`@bot continue with the refactor`) stays a prompt: many aliases are everyday words, and
///   swallowing a request as `resume` or `abort` would lose it. A mention with nothing after it
///   (`@bot`) asks for help.
/// - Without a mention a prefix is required. The first matching prefix (list order, any case)
///   wins; a bare prefix (`/`) asks for help.
/// - The first word must be a known command or alias, so `/deploy prod` is a prompt.
pub fn parse_remote_command(
    text: &str,
    prefixes: &[String],
    bot_username: Option<&str>,
) -> Option<ParsedCommand> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return None;
    }
    if let Some(body) = bot_username.and_then(|bot| strip_leading_mention(trimmed, bot)) {
        return parse_addressed_body(&body, prefixes);
    }
    parse_body(strip_first_prefix(trimmed, prefixes)?)
}

/// Parses the terminal habit typed in a chat: `/<localCommand> <command>` (`/connect help`)
/// runs the remote `<command>`, where it used to reach the agent as a prompt. A prefix is
/// required (after an optional leading `@bot`), then the local command's name as a whole
/// word (any case). Nothing after it shows the status, as bare `/connect` does locally; a
/// word that is no remote command (`/connect pair`: local only) gets the help, which lists
/// what the chat can run — the person clearly meant a command, not a prompt.
pub fn parse_local_habit(
    text: &str,
    prefixes: &[String],
    bot_username: Option<&str>,
    local_command: &str,
) -> Option<ParsedCommand> {
    if local_command.is_empty() {
        return None;
    }
    let trimmed = text.trim();
    let body = bot_username
        .and_then(|bot| strip_leading_mention(trimmed, bot))
        .unwrap_or_else(|| trimmed.to_string());
    let rest = strip_first_prefix(body.trim(), prefixes)?;
    let rest = strip_prefix_ci(rest.trim_start(), local_command)?;
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim();
    if rest.is_empty() {
        return Some(ParsedCommand {
            command: RemoteCommand::Status,
            args: String::new(),
        });
    }
    Some(parse_body(rest).unwrap_or_else(help))
}

/// Parses what follows the bot's name: after a leading `@bot` in the text, or the whole text of a
/// group message the transport already found addressed to the bot and stripped of its mention
/// (docs/decisions.md#decision-1-bot-status-is-a-command). Empty asks for help; a prefixed command
/// is a command; a bare command word is one only when it stands alone (`status`, not
/// `stop using tabs`).
pub fn parse_addressed_body(body: &str, prefixes: &[String]) -> Option<ParsedCommand> {
    let body = body.trim();
    if body.is_empty() {
        return Some(help());
    }
    if let Some(rest) = strip_first_prefix(body, prefixes) {
        return parse_body(rest);
    }
    parse_body(body).filter(|parsed| parsed.args.is_empty())
}

fn strip_first_prefix<'a>(text: &'a str, prefixes: &[String]) -> Option<&'a str> {
    prefixes
        .iter()
        .filter(|p| !p.is_empty())
        .find_map(|p| strip_prefix_ci(text, p))
}

fn parse_body(body: &str) -> Option<ParsedCommand> {
    let body = body.trim();
    if body.is_empty() {
        return Some(help());
    }
    let (word, args) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
    Some(ParsedCommand {
        command: resolve_remote_command_name(word)?,
        args: args.trim().to_string(),
    })
}

fn help() -> ParsedCommand {
    ParsedCommand {
        command: RemoteCommand::Help,
        args: String::new(),
    }
}

/// The `/help` reply, generated from [`COMMANDS`].
pub fn help_text() -> String {
    help_text_denying(&[])
}

/// The `/help` reply where the owner turned `denied` off (`bridge.denyCommands`): they are
/// still listed, marked, so the person learns why one is refused instead of guessing.
pub fn help_text_denying(denied: &[RemoteCommand]) -> String {
    let mut lines = vec!["pi-bot-connect commands:".to_string()];
    for spec in COMMANDS {
        let usage = if spec.usage.is_empty() {
            String::new()
        } else {
            format!(" {}", spec.usage)
        };
        let off = if denied.contains(&spec.command) {
            " (turned off here)"
        } else {
            ""
        };
        lines.push(format!("  /{}{usage} — {}{off}", spec.name, spec.summary));
    }
    lines.push(String::new());
    lines.push("Anything that is not a command is sent to pi as a prompt.".to_string());
    lines.join("\n")
}

/// The `/status` reply.
pub fn status_text(view: &StatusView) -> String {
    let session = view
        .session_name
        .as_deref()
        .filter(|name| !name.is_empty())
        .unwrap_or("(unnamed)");
    let cwd = if view.cwd.is_empty() {
        "(unknown)"
    } else {
        &view.cwd
    };
    let mut lines = vec![
        "pi-bot-connect status".to_string(),
        format!("- transport: {}", view.transport),
        format!("- identity: {}", view.identity),
        format!("- session: {session}"),
        format!("- cwd: {cwd}"),
        format!("- agent: {}", if view.busy { "busy" } else { "idle" }),
        format!(
            "- delivery: {}",
            if view.paused { "paused" } else { "active" }
        ),
        format!(
            "- terminal turns: {}",
            if view.following {
                "shown here"
            } else {
                "not shown here (send /follow)"
            }
        ),
    ];
    if let Some(ms) = view.paired_for_ms {
        let ms = i64::try_from(ms).unwrap_or(i64::MAX);
        lines.push(format!("- paired: {} ago", format_duration(ms)));
    }
    lines.join("\n")
}

/// The reply to `/follow`.
pub const FOLLOW_REPLY: &str = "This chat now also sees turns typed at the terminal and the \
     work digest. Everyone in it can read them. Send /unfollow to stop.";

/// The reply to `/unfollow`.
pub const UNFOLLOW_REPLY: &str = "This chat no longer sees turns typed at the terminal. \
     Prompts sent from here are still answered here. Send /follow to see them again.";

/// The reply to `command` and the effect the bridge must apply.
pub fn run_remote_command(command: RemoteCommand, view: &StatusView) -> (String, CommandEffect) {
    match command {
        RemoteCommand::Help => (help_text(), CommandEffect::None),
        RemoteCommand::Status => (status_text(view), CommandEffect::None),
        RemoteCommand::Pause => (
            "Delivery paused. Send /resume to continue.".to_string(),
            CommandEffect::Pause,
        ),
        RemoteCommand::Resume => ("Delivery resumed.".to_string(), CommandEffect::Resume),
        RemoteCommand::Follow => (FOLLOW_REPLY.to_string(), CommandEffect::Follow),
        RemoteCommand::Unfollow => (UNFOLLOW_REPLY.to_string(), CommandEffect::Unfollow),
        RemoteCommand::Abort => ("Abort requested.".to_string(), CommandEffect::Abort),
        RemoteCommand::Whoami => (
            format!("{} ({})", view.identity, view.transport),
            CommandEffect::None,
        ),
        RemoteCommand::Disconnect => (
            "This chat is no longer paired.".to_string(),
            CommandEffect::Disconnect,
        ),
        // The bridge answers these itself (it holds the pending approvals); this text is
        // only what a caller without them would say.
        RemoteCommand::Approve | RemoteCommand::Deny | RemoteCommand::Details => {
            ("No approval is waiting.".to_string(), CommandEffect::None)
        }
        RemoteCommand::Scope => (
            "The scope is known only to a running bridge.".to_string(),
            CommandEffect::None,
        ),
        RemoteCommand::Answer => ("No question is waiting.".to_string(), CommandEffect::None),
        RemoteCommand::Queue => (
            "The queue is known only to a running bridge.".to_string(),
            CommandEffect::None,
        ),
        RemoteCommand::New
        | RemoteCommand::Compact
        | RemoteCommand::Model
        | RemoteCommand::Thinking
        | RemoteCommand::Usage => (
            "Session commands need a running bridge and agent.".to_string(),
            CommandEffect::None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RemoteCommand::*;

    fn default_prefixes() -> Vec<String> {
        vec!["/".into(), "connect ".into(), "bot ".into()]
    }

    fn view() -> StatusView {
        StatusView {
            transport: "fake".into(),
            identity: Identity::new("fake", "user-1"),
            session_name: Some("refactor".into()),
            cwd: "/home/me/proj".into(),
            busy: true,
            paused: false,
            following: true,
            paired_for_ms: Some(90_000),
        }
    }

    #[test]
    fn the_local_habit_runs_the_remote_command() {
        let prefixes = default_prefixes();
        let rows: [(&str, Option<RemoteCommand>); 10] = [
            ("/connect help", Some(Help)),
            ("/CONNECT   status", Some(Status)),
            ("/connect", Some(Status)),
            ("/connect abort now", Some(Abort)),
            ("/connect pair", Some(Help)),
            ("/connect follow", Some(Follow)),
            ("@pi_bot /connect whoami", Some(Whoami)),
            ("/connectivity", None),
            ("connect help", None),
            ("/help", None),
        ];
        for (text, expected) in rows {
            assert_eq!(
                parse_local_habit(text, &prefixes, Some("pi_bot"), "connect").map(|p| p.command),
                expected,
                "{text:?}"
            );
        }
        assert_eq!(
            parse_local_habit("/bc status", &prefixes, None, "bc").map(|p| p.command),
            Some(Status)
        );
        assert_eq!(
            parse_local_habit("/connect help", &prefixes, None, "bc"),
            None
        );
    }

    #[test]
    fn every_name_and_alias_resolves() {
        let rows = [
            ("help", Help),
            ("?", Help),
            ("h", Help),
            ("commands", Help),
            ("status", Status),
            ("s", Status),
            ("state", Status),
            ("pause", Pause),
            ("hold", Pause),
            ("resume", Resume),
            ("unhold", Resume),
            ("continue", Resume),
            ("abort", Abort),
            ("stop", Abort),
            ("cancel", Abort),
            ("whoami", Whoami),
            ("who", Whoami),
            ("me", Whoami),
            ("disconnect", Disconnect),
            ("bye", Disconnect),
            ("unpair", Disconnect),
            ("follow", Follow),
            ("subscribe", Follow),
            ("unfollow", Unfollow),
            ("unsubscribe", Unfollow),
            (" //STATUS ", Status),
            ("new", New),
            ("compact", Compact),
            ("model", Model),
            ("models", Model),
            ("thinking", Thinking),
            ("think", Thinking),
            ("usage", Usage),
            ("cost", Usage),
            ("tokens", Usage),
            ("Me", Whoami),
        ];
        for (name, expected) in rows {
            assert_eq!(
                resolve_remote_command_name(name),
                Some(expected),
                "{name:?}"
            );
        }
        for name in ["", "/", "  ", "deploy", "connect", "statuses"] {
            assert_eq!(resolve_remote_command_name(name), None, "{name:?}");
        }
    }

    #[test]
    fn parse_table() {
        let bot = Some("piBot");
        /// (text, bot user name, expected command and args)
        type Row = (
            &'static str,
            Option<&'static str>,
            Option<(RemoteCommand, &'static str)>,
        );
        let rows: Vec<Row> = vec![
            ("/status", None, Some((Status, ""))),
            ("  /STATUS  ", None, Some((Status, ""))),
            ("/status  verbose now ", None, Some((Status, "verbose now"))),
            ("connect help", None, Some((Help, ""))),
            ("BOT stop", None, Some((Abort, ""))),
            ("/", None, Some((Help, ""))),
            ("/?", None, Some((Help, ""))),
            ("/deploy prod", None, None),
            ("/connect help", None, None),
            ("status", None, None),
            ("hello there", None, None),
            ("", None, None),
            ("   ", None, None),
            // After a mention, bare and prefixed forms are both commands
            // (docs/decisions.md#decision-1-bot-status-is-a-command).
            ("@piBot status", bot, Some((Status, ""))),
            ("@piBot /status", bot, Some((Status, ""))),
            ("@pibot, /status verbose", bot, Some((Status, "verbose"))),
            ("@piBot: whoami", bot, Some((Whoami, ""))),
            ("@piBot connect pause", bot, Some((Pause, ""))),
            ("@piBot", bot, Some((Help, ""))),
            ("@piBot /", bot, Some((Help, ""))),
            ("@piBot continue with the refactor", bot, None),
            ("@piBot stop using tabs", bot, None),
            ("@piBot fix the tests", bot, None),
            ("@piBot /deploy", bot, None),
            ("@piBotty status", bot, None),
            // The mention is only recognised when the bot's name is configured.
            ("@piBot status", None, None),
            ("/status", bot, Some((Status, ""))),
        ];
        for (text, bot_username, expected) in rows {
            let parsed = parse_remote_command(text, &default_prefixes(), bot_username);
            let expected = expected.map(|(command, args)| ParsedCommand {
                command,
                args: args.to_string(),
            });
            assert_eq!(parsed, expected, "{text:?} bot {bot_username:?}");
        }
    }

    #[test]
    fn first_matching_prefix_wins_and_empty_prefixes_are_ignored() {
        let prefixes: Vec<String> = vec!["".into(), "!".into(), "!!".into()];
        assert_eq!(
            parse_remote_command("!!status", &prefixes, None),
            None,
            "'!' matches first, leaving '!status', which is not a command word"
        );
        assert_eq!(
            parse_remote_command("!status", &prefixes, None).map(|p| p.command),
            Some(Status)
        );
        assert_eq!(parse_remote_command("status", &prefixes, None), None);
    }

    #[test]
    fn help_text_is_verbatim() {
        assert_eq!(
            help_text(),
            "pi-bot-connect commands:\n\
             \x20 /help — Show the remote command list\n\
             \x20 /status — Show bridge, session and agent state\n\
             \x20 /pause — Stop forwarding prompts; local session keeps running\n\
             \x20 /resume — Resume forwarding prompts\n\
             \x20 /follow — Also show turns typed at the terminal here (DMs do by default)\n\
             \x20 /unfollow — Stop showing turns typed at the terminal here\n\
             \x20 /abort — Abort the current agent turn\n\
             \x20 /whoami — Show the paired identity for this chat\n\
             \x20 /disconnect — Revoke this chat's pairing for the current session\n\
             \x20 /approve <id> [turn] — Let a tool call waiting for approval run (turn: and the same tool for the rest of the turn)\n\
             \x20 /deny <id> — Block a tool call waiting for approval\n\
             \x20 /details <id> — Show what a tool call waiting for approval touches\n\
             \x20 /answer <id> <answer> — Answer a question the agent asked\n\
             \x20 /scope — Show what a turn started from here may do\n\
             \x20 /queue — Show the prompts waiting for the agent\n\
             \x20 /new — Start a new agent session (earlier turns are forgotten)\n\
             \x20 /compact [instructions] — Summarise the conversation to free context\n\
             \x20 /model [name] — Switch model, or list the models\n\
             \x20 /thinking [level] — Set or show the thinking level\n\
             \x20 /usage — Show tokens, cost and context used\n\
             \n\
             Anything that is not a command is sent to pi as a prompt."
        );
    }

    #[test]
    fn help_marks_the_commands_the_owner_turned_off() {
        let text = help_text_denying(&[Model, New]);
        assert!(
            text.contains("/model [name] — Switch model, or list the models (turned off here)")
        );
        assert!(text.contains(
            "/new — Start a new agent session (earlier turns are forgotten) (turned off here)"
        ));
        assert_eq!(text.matches("(turned off here)").count(), 2, "{text}");
        assert_eq!(help_text_denying(&[]), help_text());
    }

    #[test]
    fn status_text_table() {
        let full = view();
        let bare = StatusView {
            session_name: None,
            cwd: String::new(),
            busy: false,
            paused: true,
            following: false,
            paired_for_ms: None,
            ..view()
        };
        let rows = [
            (
                full,
                "pi-bot-connect status\n- transport: fake\n- identity: fake:user-1\n- session: refactor\n- cwd: /home/me/proj\n- agent: busy\n- delivery: active\n- terminal turns: shown here\n- paired: 1m ago",
            ),
            (
                bare,
                "pi-bot-connect status\n- transport: fake\n- identity: fake:user-1\n- session: (unnamed)\n- cwd: (unknown)\n- agent: idle\n- delivery: paused\n- terminal turns: not shown here (send /follow)",
            ),
        ];
        for (v, expected) in rows {
            assert_eq!(status_text(&v), expected);
        }
    }

    #[test]
    fn run_table() {
        let v = view();
        let rows = [
            (
                Pause,
                "Delivery paused. Send /resume to continue.",
                CommandEffect::Pause,
            ),
            (Resume, "Delivery resumed.", CommandEffect::Resume),
            (Follow, FOLLOW_REPLY, CommandEffect::Follow),
            (Unfollow, UNFOLLOW_REPLY, CommandEffect::Unfollow),
            (Abort, "Abort requested.", CommandEffect::Abort),
            (Whoami, "fake:user-1 (fake)", CommandEffect::None),
            (
                Disconnect,
                "This chat is no longer paired.",
                CommandEffect::Disconnect,
            ),
        ];
        for (command, text, effect) in rows {
            assert_eq!(
                run_remote_command(command, &v),
                (text.to_string(), effect),
                "{command:?}"
            );
        }
        assert_eq!(
            run_remote_command(Help, &v),
            (help_text(), CommandEffect::None)
        );
        assert_eq!(
            run_remote_command(Status, &v),
            (status_text(&v), CommandEffect::None)
        );
    }
}
