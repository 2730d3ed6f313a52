//! The local `/connect …` commands typed at the terminal: parsing and the texts they print
//! (docs/architecture.md#the-original-module-by-module). `doctor` and `digest` are composed
//! elsewhere.
//!
//! These texts go to the terminal only, so `status` and `pair` may show codes here (I1).

use crate::core::pairing::format_challenge_code;
use crate::core::text::format_duration;
use crate::keys::ConversationKey;

/// Reply to a subcommand that needs a session when none is running.
pub const NO_ACTIVE_SESSION_TEXT: &str = "bot-connect: no active session.";

/// A local subcommand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalCommand {
    /// Overview (also bare).
    Status,
    /// The list of local commands.
    Help,
    /// Transport health and troubleshooting.
    Doctor,
    /// Version report.
    Version,
    /// Pending pairing codes.
    Pair,
    /// Send the work digest.
    Digest,
    /// Pause every remembered conversation.
    Pause,
    /// Resume every remembered conversation.
    Resume,
    /// Revoke every pairing.
    Disconnect,
    /// Show the resolved configuration.
    Config,
    /// Show the scope of remote turns (docs/decisions.md#decision-16-scoped-remote-turns).
    Scope,
    /// What was done with the last inbound messages, and why.
    Explain,
    /// Answer a question the agent asked (`answer <id> <answer>`).
    Answer,
    /// Anything else, as typed.
    Unknown(String),
}

/// Parses the text after `/connect`. Only the first word counts, in any case.
pub fn parse_local_command(args: &str) -> LocalCommand {
    let word = args.split_whitespace().next().unwrap_or("");
    match word.to_lowercase().as_str() {
        // `help` printed the status in the original; it now lists the commands.
        "" | "status" => LocalCommand::Status,
        "help" | "--help" | "-h" | "?" => LocalCommand::Help,
        "doctor" => LocalCommand::Doctor,
        "version" | "--version" | "-v" => LocalCommand::Version,
        "pair" => LocalCommand::Pair,
        "digest" => LocalCommand::Digest,
        "pause" => LocalCommand::Pause,
        "resume" => LocalCommand::Resume,
        "disconnect" => LocalCommand::Disconnect,
        "config" => LocalCommand::Config,
        "scope" => LocalCommand::Scope,
        "explain" | "why" => LocalCommand::Explain,
        "answer" => LocalCommand::Answer,
        _ => LocalCommand::Unknown(word.to_string()),
    }
}

/// What `/connect status` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalStatusView {
    /// `<name> <version>` of the extension, when known.
    pub version: Option<String>,
    /// Running transport ids.
    pub transports: Vec<String>,
    /// Trusted identities.
    pub paired: usize,
    /// Remembered broadcast targets.
    pub conversations: usize,
    /// Paused conversation keys.
    pub paused: Vec<String>,
    /// Conversation keys that follow the terminal: they see local turns and the digest
    /// (docs/security.md#who-sees-what), so the person at the terminal can check who reads their
    /// work.
    pub following: Vec<String>,
    /// Live pairing codes, shown in full (docs/security.md#pairing: the chat says "run /connect to
    /// see the code", so `/connect` must show it, not only a count).
    pub codes: Vec<LiveCode>,
    /// Local command namespace (`connect`).
    pub local_command: String,
}

/// A live pairing code as the terminal lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveCode {
    /// The conversation it pairs.
    pub key: ConversationKey,
    /// The digits, when this session made the code; `None` for one made before a restart
    /// whose transport is not running (only its hash is stored).
    pub code: Option<String>,
    /// When it stops working (ms).
    pub expires_at: u64,
}

/// The `/connect status` text. With no transport it names the ones that exist and where to
/// configure them, because "(none configured)" alone leaves a new user stuck.
pub fn status_text(view: &LocalStatusView, now: u64) -> String {
    let version = view
        .version
        .as_deref()
        .map_or_else(|| "version unknown".to_string(), str::to_string);
    let transports = if view.transports.is_empty() {
        "(none configured)".to_string()
    } else {
        view.transports.join(", ")
    };
    let paused = if view.paused.is_empty() {
        "none".to_string()
    } else {
        view.paused.join(", ")
    };
    let following = if view.following.is_empty() {
        "none (a DM follows once paired; a group sends /follow)".to_string()
    } else {
        view.following.join(", ")
    };
    let mut lines = vec![
        "bot-connect status".to_string(),
        format!("- extension: {version}"),
        format!("- transports: {transports}"),
        format!("- paired chats: {}", view.paired),
        format!("- conversations: {}", view.conversations),
        format!("- paused: {paused}"),
        format!("- terminal turns go to: {following}"),
        format!("- pending codes: {}", view.codes.len()),
    ];
    lines.extend(code_lines(&view.codes, now, "  - "));
    if view.transports.is_empty() {
        lines.push(String::new());
        // Slack is listed because this product ships it (the original had no Slack transport).
        lines.push(
            "Available transports: discord, telegram, slack, robo_claw. Configure one under \"transports\" in the config file."
                .to_string(),
        );
    }
    lines.push(String::new());
    // `explain` is this product's addition
    // (docs/decisions.md#decision-15-explain-replay-and-doctor-answer-why-did-the-bot-not-answer):
    // listed so it can be found. `help` too, now that it lists the commands instead of repeating
    // this status.
    lines.push(format!(
        "Local commands: /{} status|doctor|version|pair|digest|explain|pause|resume|disconnect|config|help",
        view.local_command
    ));
    lines.join("\n")
}

/// The `/connect pair` text: the live codes with their conversation and time left. Expired
/// codes are left out: they no longer work, and typing one would only earn a new code.
pub fn pair_text(codes: &[LiveCode], now: u64) -> String {
    let live = code_lines(codes, now, "- ");
    if live.is_empty() {
        return "No pending pairing. Have the remote user send any message; the code appears here."
            .to_string();
    }
    format!("Pending pairing codes:\n{}", live.join("\n"))
}

/// The `/connect pair` text when it reopened pairing after too many wrong codes
/// (docs/security.md#pairing): the fresh codes, and that they work at once.
pub fn reopened_text(made: usize, codes: &str) -> String {
    if made == 0 {
        return "Pairing was closed after too many wrong codes; it is open again. Have the remote user send any message; the code appears here."
            .to_string();
    }
    format!(
        "Pairing was closed after too many wrong codes; it is open again with fresh codes, which work at once.\n{codes}"
    )
}

/// One line per live code: `<bullet><key>: 123 456 (expires in 4m)`.
fn code_lines(codes: &[LiveCode], now: u64, bullet: &str) -> Vec<String> {
    codes
        .iter()
        .filter(|live| now < live.expires_at)
        .map(|live| {
            let left = i64::try_from(live.expires_at.saturating_sub(now)).unwrap_or(i64::MAX);
            let code = live.code.as_deref().map_or_else(
                || "made before the last restart and not kept; a new code comes when that chat writes again".to_string(),
                format_challenge_code,
            );
            format!(
                "{bullet}{}: {code} (expires in {})",
                live.key,
                format_duration(left)
            )
        })
        .collect()
}

/// The `/connect help` text: every local command with what it is for.
pub fn help_text(local_command: &str) -> String {
    let rows = [
        (
            "status",
            "what is connected, paired and waiting, with the live pairing codes (also bare /{cmd})",
        ),
        ("pair", "the live pairing codes and the chats they are for"),
        (
            "doctor",
            "transport health, and what to check when a chat gets no answer",
        ),
        (
            "explain",
            "what was done with the last messages, and why (also: why)",
        ),
        (
            "digest",
            "send the work digest card to the chats that follow this session",
        ),
        ("pause", "stop forwarding prompts from every chat"),
        ("resume", "forward prompts again"),
        ("disconnect", "revoke every pairing"),
        ("config", "the configuration in force"),
        (
            "scope",
            "what a turn started from a chat may do (frozen while it runs)",
        ),
        (
            "answer <id> <answer>",
            "answer a question the agent asked (the chats may answer too; the first answer counts)",
        ),
        ("version", "the bridge's version"),
        ("help", "this list"),
    ];
    let mut lines = vec![format!(
        "bot-connect local commands (/{local_command} <command>):"
    )];
    for (name, what) in rows {
        lines.push(format!(
            "  {name:<10}  {}",
            what.replace("{cmd}", local_command)
        ));
    }
    lines.join("\n")
}

/// After `/connect pause`.
pub fn paused_text(n: usize) -> String {
    format!("Paused {n} conversation(s).")
}

/// After `/connect resume`.
pub fn resumed_text(n: usize) -> String {
    format!("Resumed {n} conversation(s).")
}

/// After `/connect disconnect`.
pub fn revoked_text(n: usize) -> String {
    format!("Revoked {n} pairing(s).")
}

/// Reply to a subcommand that does not exist, pointing at the list.
pub fn unknown_subcommand_text(sub: &str, local_command: &str) -> String {
    format!("Unknown subcommand '{sub}'. Try /{local_command} help.")
}

/// The `/connect config` text around the resolved config JSON (which never holds secrets, I10),
/// then the fail-closed `warnings`, if any: the JSON shows the strictest values in force, and
/// the person must learn that they are not what the file says.
pub fn config_text(json: &str, warnings: &[String]) -> String {
    let mut text = format!("bot-connect config:\n{json}");
    for warning in warnings {
        text.push_str("\n\n");
        text.push_str(warning);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        let rows = [
            ("", LocalCommand::Status),
            ("   ", LocalCommand::Status),
            ("help", LocalCommand::Help),
            ("--help", LocalCommand::Help),
            ("?", LocalCommand::Help),
            ("status", LocalCommand::Status),
            ("STATUS now", LocalCommand::Status),
            ("doctor", LocalCommand::Doctor),
            ("version", LocalCommand::Version),
            ("--version", LocalCommand::Version),
            ("-v", LocalCommand::Version),
            ("pair", LocalCommand::Pair),
            ("digest", LocalCommand::Digest),
            ("pause", LocalCommand::Pause),
            ("resume", LocalCommand::Resume),
            ("disconnect", LocalCommand::Disconnect),
            (" config ", LocalCommand::Config),
            ("scope", LocalCommand::Scope),
            ("explain", LocalCommand::Explain),
            ("why", LocalCommand::Explain),
            ("deploy prod", LocalCommand::Unknown("deploy".into())),
        ];
        for (args, expected) in rows {
            assert_eq!(parse_local_command(args), expected, "{args:?}");
        }
    }

    #[test]
    fn status_table() {
        let running = LocalStatusView {
            version: Some("bot-connect 0.1.0".into()),
            transports: vec!["telegram".into(), "discord".into()],
            paired: 2,
            conversations: 3,
            paused: vec!["telegram:1".into(), "discord:9".into()],
            following: vec!["telegram:5".into()],
            codes: vec![
                LiveCode {
                    key: ConversationKey::new("telegram", "5"),
                    code: Some("482913".into()),
                    expires_at: 1_000 + 240_000,
                },
                LiveCode {
                    key: ConversationKey::new("discord", "7"),
                    code: None,
                    expires_at: 1_000 + 5_000,
                },
            ],
            local_command: "connect".into(),
        };
        let empty = LocalStatusView {
            version: None,
            transports: vec![],
            paired: 0,
            conversations: 0,
            paused: vec![],
            following: vec![],
            codes: vec![],
            local_command: "bc".into(),
        };
        let rows = [
            (
                running,
                "bot-connect status\n- extension: bot-connect 0.1.0\n- transports: telegram, discord\n- paired chats: 2\n- conversations: 3\n- paused: telegram:1, discord:9\n- terminal turns go to: telegram:5\n- pending codes: 2\n  - telegram:5: 482 913 (expires in 4m)\n  - discord:7: made before the last restart and not kept; a new code comes when that chat writes again (expires in 5s)\n\nLocal commands: /connect status|doctor|version|pair|digest|explain|pause|resume|disconnect|config|help",
            ),
            (
                empty,
                "bot-connect status\n- extension: version unknown\n- transports: (none configured)\n- paired chats: 0\n- conversations: 0\n- paused: none\n- terminal turns go to: none (a DM follows once paired; a group sends /follow)\n- pending codes: 0\n\nAvailable transports: discord, telegram, slack, robo_claw. Configure one under \"transports\" in the config file.\n\nLocal commands: /bc status|doctor|version|pair|digest|explain|pause|resume|disconnect|config|help",
            ),
        ];
        for (view, expected) in rows {
            assert_eq!(status_text(&view, 1_000), expected);
        }
    }

    #[test]
    fn pair_table() {
        let code = |key: &str, code: Option<&str>, expires_at| LiveCode {
            key: ConversationKey::from_stored(key),
            code: code.map(String::from),
            expires_at,
        };
        let rows: Vec<(Vec<LiveCode>, &str)> = vec![
            (
                vec![],
                "No pending pairing. Have the remote user send any message; the code appears here.",
            ),
            (
                vec![code("telegram:1", Some("123456"), 1_000)],
                "No pending pairing. Have the remote user send any message; the code appears here.",
            ),
            (
                vec![
                    code("telegram:1", Some("123456"), 1_000 + 240_000),
                    code("discord:2", Some("9876"), 1_000 + 5_000),
                    code("slack:3", Some("000000"), 500),
                ],
                "Pending pairing codes:\n- telegram:1: 123 456 (expires in 4m)\n- discord:2: 9876 (expires in 5s)",
            ),
        ];
        for (codes, expected) in rows {
            assert_eq!(pair_text(&codes, 1_000), expected);
        }
    }

    #[test]
    fn help_lists_every_command() {
        let help = help_text("connect");
        assert!(help.starts_with("bot-connect local commands (/connect <command>):\n"));
        assert!(help.contains("\n  status      what is connected, paired and waiting, with the live pairing codes (also bare /connect)"));
        for word in [
            "status",
            "pair",
            "doctor",
            "explain",
            "digest",
            "pause",
            "resume",
            "disconnect",
            "config",
            "version",
            "help",
        ] {
            assert!(
                help.lines().any(|l| l.trim_start().starts_with(word)),
                "{word} missing from help"
            );
            assert_ne!(
                parse_local_command(word),
                LocalCommand::Unknown(word.into()),
                "help lists {word}, which does not parse"
            );
        }
        assert!(!help.contains("- paired chats"), "help printed the status");
    }

    #[test]
    fn short_texts() {
        let rows = [
            (paused_text(2), "Paused 2 conversation(s)."),
            (resumed_text(0), "Resumed 0 conversation(s)."),
            (revoked_text(3), "Revoked 3 pairing(s)."),
            (
                unknown_subcommand_text("deploy", "connect"),
                "Unknown subcommand 'deploy'. Try /connect help.",
            ),
            (
                config_text("{\n  \"bridge\": {}\n}", &[]),
                "bot-connect config:\n{\n  \"bridge\": {}\n}",
            ),
            (
                config_text(
                    "{}",
                    &["failing closed: a".into(), "failing closed: b".into()],
                ),
                "bot-connect config:\n{}\n\nfailing closed: a\n\nfailing closed: b",
            ),
            (
                NO_ACTIVE_SESSION_TEXT.to_string(),
                "bot-connect: no active session.",
            ),
        ];
        for (actual, expected) in rows {
            assert_eq!(actual, expected);
        }
    }
}
