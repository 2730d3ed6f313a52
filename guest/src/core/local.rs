//! The local `/connect …` commands typed at the terminal: parsing and the texts they print
//! (reference-behaviour §3.20). `doctor` and `digest` are composed elsewhere.
//!
//! These texts go to the terminal only, so `pair` may show codes here (I1).

use crate::core::pairing::format_challenge_code;
use crate::core::state::PendingChallenge;
use crate::core::text::format_duration;

/// Reply to a subcommand that needs a session when none is running.
pub const NO_ACTIVE_SESSION_TEXT: &str = "bot-connect: no active session.";

/// A local subcommand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalCommand {
    /// Overview (also bare, `help`).
    Status,
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
    /// What was done with the last inbound messages, and why.
    Explain,
    /// Anything else, as typed.
    Unknown(String),
}

/// Parses the text after `/connect`. Only the first word counts, in any case.
pub fn parse_local_command(args: &str) -> LocalCommand {
    let word = args.split_whitespace().next().unwrap_or("");
    match word.to_lowercase().as_str() {
        "" | "help" | "status" => LocalCommand::Status,
        "doctor" => LocalCommand::Doctor,
        "version" | "--version" | "-v" => LocalCommand::Version,
        "pair" => LocalCommand::Pair,
        "digest" => LocalCommand::Digest,
        "pause" => LocalCommand::Pause,
        "resume" => LocalCommand::Resume,
        "disconnect" => LocalCommand::Disconnect,
        "config" => LocalCommand::Config,
        "explain" | "why" => LocalCommand::Explain,
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
    /// Live pairing challenges.
    pub pending: usize,
    /// Local command namespace (`connect`).
    pub local_command: String,
}

/// The `/connect status` text. With no transport it names the ones that exist and where to
/// configure them, because "(none configured)" alone leaves a new user stuck.
pub fn status_text(view: &LocalStatusView) -> String {
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
    let mut lines = vec![
        "bot-connect status".to_string(),
        format!("- extension: {version}"),
        format!("- transports: {transports}"),
        format!("- paired chats: {}", view.paired),
        format!("- conversations: {}", view.conversations),
        format!("- paused: {paused}"),
        format!("- pending codes: {}", view.pending),
    ];
    if view.transports.is_empty() {
        lines.push(String::new());
        // Slack is listed because this product ships it (the original had no Slack transport).
        lines.push(
            "Available transports: discord, telegram, slack, robo_claw. Configure one under \"transports\" in the config file."
                .to_string(),
        );
    }
    lines.push(String::new());
    // `explain` is this product's addition (architecture §6): listed so it can be found.
    lines.push(format!(
        "Local commands: /{} status|doctor|version|pair|digest|explain|pause|resume|disconnect|config",
        view.local_command
    ));
    lines.join("\n")
}

/// The `/connect pair` text: the live codes with their conversation and time left. Expired
/// codes are left out: they no longer work, and typing one would only earn a new code.
pub fn pair_text(pending: &[(String, PendingChallenge)], now: u64) -> String {
    let live: Vec<String> = pending
        .iter()
        .filter(|(_, challenge)| now < challenge.expires_at)
        .map(|(key, challenge)| {
            let left = i64::try_from(challenge.expires_at.saturating_sub(now)).unwrap_or(i64::MAX);
            format!(
                "- {key}: {} (expires in {})",
                format_challenge_code(&challenge.code),
                format_duration(left)
            )
        })
        .collect();
    if live.is_empty() {
        return "No pending pairing. Have the remote user send any message; the code appears here."
            .to_string();
    }
    format!("Pending pairing codes:\n{}", live.join("\n"))
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

/// The `/connect config` text around the resolved config JSON (which never holds secrets, I10).
pub fn config_text(json: &str) -> String {
    format!("bot-connect config:\n{json}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        let rows = [
            ("", LocalCommand::Status),
            ("   ", LocalCommand::Status),
            ("help", LocalCommand::Status),
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
            pending: 1,
            local_command: "connect".into(),
        };
        let empty = LocalStatusView {
            version: None,
            transports: vec![],
            paired: 0,
            conversations: 0,
            paused: vec![],
            pending: 0,
            local_command: "bc".into(),
        };
        let rows = [
            (
                running,
                "bot-connect status\n- extension: bot-connect 0.1.0\n- transports: telegram, discord\n- paired chats: 2\n- conversations: 3\n- paused: telegram:1, discord:9\n- pending codes: 1\n\nLocal commands: /connect status|doctor|version|pair|digest|explain|pause|resume|disconnect|config",
            ),
            (
                empty,
                "bot-connect status\n- extension: version unknown\n- transports: (none configured)\n- paired chats: 0\n- conversations: 0\n- paused: none\n- pending codes: 0\n\nAvailable transports: discord, telegram, slack, robo_claw. Configure one under \"transports\" in the config file.\n\nLocal commands: /bc status|doctor|version|pair|digest|explain|pause|resume|disconnect|config",
            ),
        ];
        for (view, expected) in rows {
            assert_eq!(status_text(&view), expected);
        }
    }

    #[test]
    fn pair_table() {
        let code = |c: &str, expires_at| PendingChallenge {
            code: c.into(),
            expires_at,
            attempts: 0,
        };
        let rows: Vec<(Vec<(String, PendingChallenge)>, &str)> = vec![
            (
                vec![],
                "No pending pairing. Have the remote user send any message; the code appears here.",
            ),
            (
                vec![("telegram:1".into(), code("123456", 1_000))],
                "No pending pairing. Have the remote user send any message; the code appears here.",
            ),
            (
                vec![
                    ("telegram:1".into(), code("123456", 1_000 + 240_000)),
                    ("discord:2".into(), code("9876", 1_000 + 5_000)),
                    ("slack:3".into(), code("000000", 500)),
                ],
                "Pending pairing codes:\n- telegram:1: 123 456 (expires in 4m)\n- discord:2: 9876 (expires in 5s)",
            ),
        ];
        for (pending, expected) in rows {
            assert_eq!(pair_text(&pending, 1_000), expected);
        }
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
                config_text("{\n  \"bridge\": {}\n}"),
                "bot-connect config:\n{\n  \"bridge\": {}\n}",
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
