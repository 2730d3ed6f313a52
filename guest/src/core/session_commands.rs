//! Session commands typed in a chat (`/new`, `/compact`, `/model`, `/thinking`, `/usage`):
//! what a typed command asks the agent, and how its answer reads on a phone. Pure.

use crate::core::commands::RemoteCommand;
use crate::core::config::schema::UsageFooter;
use crate::model::{Button, SessionCommand, TokenUse, UsageReport};

/// The words after `/new` that confirm it while a turn runs or prompts wait.
const CONFIRM_WORDS: &[&str] = &["confirm", "yes", "now"];

/// Buttons under a model list: more would not fit one row on a phone.
const MAX_MODEL_BUTTONS: usize = 5;

/// A button's command is at most this many bytes (Telegram's callback data).
const MAX_BUTTON_COMMAND: usize = 64;

/// What a session command typed with `args` asks of the agent; `None` for a command that
/// is not a session command.
pub fn session_command(command: RemoteCommand, args: &str) -> Option<SessionCommand> {
    let args = args.trim();
    let text = (!args.is_empty()).then(|| args.to_string());
    Some(match command {
        RemoteCommand::New => SessionCommand::NewSession,
        RemoteCommand::Compact => SessionCommand::Compact(text),
        RemoteCommand::Model => match text {
            Some(name) => SessionCommand::SetModel(name),
            None => SessionCommand::ListModels,
        },
        RemoteCommand::Thinking => SessionCommand::Thinking(text),
        RemoteCommand::Usage => SessionCommand::Usage,
        _ => return None,
    })
}

/// The question `/new` asks before it throws work away: a turn running, or prompts the
/// agent took but has not started. `None` when there is nothing to lose or the person
/// confirmed (`/new confirm`).
pub fn new_needs_confirmation(args: &str, busy: bool, waiting: usize) -> Option<(String, Button)> {
    let confirmed = CONFIRM_WORDS
        .iter()
        .any(|word| args.trim().eq_ignore_ascii_case(word));
    if confirmed || (!busy && waiting == 0) {
        return None;
    }
    let mut lost = Vec::new();
    if busy {
        lost.push("a turn is running (it is aborted)".to_string());
    }
    if waiting > 0 {
        lost.push(format!("{waiting} prompt(s) wait for the agent"));
    }
    Some((
        format!(
            "Start a new session anyway? {}. Send /new confirm to go ahead.",
            capitalise(&lost.join(" and "))
        ),
        Button {
            label: "Start new session".into(),
            command: "/new confirm".into(),
        },
    ))
}

/// The answer to a `/new` that went ahead: the agent's own words, and how many waiting
/// prompts the old session took with it (the confirmation named them before).
pub fn new_session_text(agent_said: &str, dropped: usize) -> String {
    match dropped {
        0 => agent_said.to_owned(),
        n => format!("{agent_said} {n} waiting prompt(s) went with the old session."),
    }
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The reply to a denied command (`bridge.denyCommands`).
pub fn denied_text(command: RemoteCommand) -> String {
    format!(
        "/{} is turned off for the chats here by the owner (bridge.denyCommands).",
        command.name()
    )
}

/// The `/model` list, with a button per other model (up to five) where the platform has
/// buttons; the text says what to type either way.
pub fn models_reply(current: Option<&str>, available: &[String]) -> (String, Vec<Button>) {
    if available.is_empty() {
        return (
            "The agent offers no models to switch to (none configured with a key).".into(),
            Vec::new(),
        );
    }
    let mut lines = vec!["Models:".to_string()];
    for name in available {
        if Some(name.as_str()) == current {
            lines.push(format!("- {name} (in use)"));
        } else {
            lines.push(format!("- {name}"));
        }
    }
    lines.push("Switch with /model <name>.".into());
    let buttons = available
        .iter()
        .filter(|name| Some(name.as_str()) != current)
        .map(|name| Button {
            label: name.clone(),
            command: format!("/model {name}"),
        })
        // A longer command could not ride on the button; the list above still names it.
        .filter(|button| button.command.len() <= MAX_BUTTON_COMMAND)
        .take(MAX_MODEL_BUTTONS)
        .collect();
    (lines.join("\n"), buttons)
}

/// A token count as a phone shows it: `950`, `12.3k`, `1.2M`.
pub fn count(n: u64) -> String {
    let short = |value: f64, unit: &str| {
        let text = format!("{value:.1}");
        format!("{}{unit}", text.strip_suffix(".0").unwrap_or(&text))
    };
    if n < 1_000 {
        n.to_string()
    } else if n < 1_000_000 {
        short(n as f64 / 1_000.0, "k")
    } else {
        short(n as f64 / 1_000_000.0, "M")
    }
}

/// A cost in millionths of a dollar: four decimals under a dollar (a turn costs cents).
pub fn cost(micros: u64) -> String {
    let dollars = micros as f64 / 1_000_000.0;
    if dollars < 1.0 {
        format!("${dollars:.4}")
    } else {
        format!("${dollars:.2}")
    }
}

fn tokens_line(use_: &TokenUse) -> String {
    let mut parts = vec![
        format!("{} in", count(use_.input)),
        format!("{} out", count(use_.output)),
    ];
    if use_.cache_read > 0 || use_.cache_write > 0 {
        parts.push(format!(
            "cache {} read, {} written",
            count(use_.cache_read),
            count(use_.cache_write)
        ));
    }
    if let Some(micros) = use_.cost_micros {
        parts.push(cost(micros));
    }
    parts.join(", ")
}

fn context_line(report: &UsageReport) -> Option<String> {
    let window = report.context_window.filter(|w| *w > 0)?;
    let used = report.context_tokens?;
    let percent = used.saturating_mul(100) / window;
    Some(format!("{} of {} ({percent}%)", count(used), count(window)))
}

/// The `/usage` reply.
pub fn usage_text(report: &UsageReport) -> String {
    let mut lines = vec![
        "Usage".to_string(),
        format!("- this session: {}", tokens_line(&report.session)),
    ];
    match &report.last_turn {
        Some(turn) => lines.push(format!("- last turn: {}", tokens_line(turn))),
        None => lines.push("- last turn: none finished yet".into()),
    }
    lines.push(format!(
        "- context: {}",
        context_line(report).unwrap_or_else(|| "not known yet".into())
    ));
    lines.join("\n")
}

/// The usage line under a turn's final answer (`bridge.usageFooter`); `None` when it is
/// off or the agent reported nothing to show.
pub fn footer(report: &UsageReport, mode: UsageFooter) -> Option<String> {
    let turn = report.last_turn.as_ref();
    match mode {
        UsageFooter::Off => None,
        UsageFooter::Tokens => {
            turn.map(|t| format!("Tokens: {} in, {} out", count(t.input), count(t.output)))
        }
        UsageFooter::TokensCost => turn.map(|t| {
            let tokens = format!("Tokens: {} in, {} out", count(t.input), count(t.output));
            match t.cost_micros {
                Some(micros) => format!("{tokens} · {}", cost(micros)),
                None => tokens,
            }
        }),
        UsageFooter::Context => context_line(report).map(|c| format!("Context: {c}")),
    }
}

/// A turn's length as a phone shows it: `45s`, `4m12s`, `1h03m`.
pub fn elapsed(ms: u64) -> String {
    let secs = ms / 1_000;
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3_599 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3_600, (secs % 3_600) / 60),
    }
}

/// The one short message that ends a long turn (`bridge.doneNoticeAfterMs`): card edits do
/// not make a phone buzz, a new message does. `files` is how many files differ from HEAD,
/// `tests` the last test run's summary, each left out when unknown.
pub fn done_text(ms: u64, files: Option<usize>, tests: Option<&str>) -> String {
    let mut facts = Vec::new();
    match files {
        Some(0) | None => {}
        Some(1) => facts.push("1 file changed".to_string()),
        Some(n) => facts.push(format!("{n} files changed")),
    }
    if let Some(tests) = tests {
        facts.push(format!("tests: {tests}"));
    }
    if facts.is_empty() {
        format!("Done in {}.", elapsed(ms))
    } else {
        format!("Done in {}: {}.", elapsed(ms), facts.join(", "))
    }
}

/// Characters of the answer a card's preview shows: its end, as a phone shows the latest.
pub const PREVIEW_CHARS: usize = 600;

/// Characters of the answer a platform's draft shows (`transport.draft`): a draft is a
/// message of its own, so it shows far more than the card's line, and stays under
/// Telegram's 4,096 once rendered.
pub const DRAFT_CHARS: usize = 3_500;

/// The part of an answer still being written that a card may show (`bridge.streamPreview`),
/// or `None` while there is nothing safe to show. A secret must never show, even for one
/// edit, and redaction can only recognise a secret it sees whole: so the unfinished last
/// word is held back (a token streamed in pieces shows only once it is complete, and then
/// redacted), so is everything from a `-----BEGIN` without its `-----END` (a key block
/// recognised by its end), and the text kept is redacted from its start before its end is
/// cut for the card (a window starting inside a token would hide what it is).
pub fn preview(draft: &str) -> Option<String> {
    safe_draft(draft).map(|safe| tail(&safe, PREVIEW_CHARS))
}

/// What of an answer still being written may show anywhere: complete words only, no open
/// key block, redacted from the start ([`preview`] says why); `None` while nothing is safe.
pub fn safe_draft(draft: &str) -> Option<String> {
    let complete = match draft.rfind(char::is_whitespace) {
        Some(at) => &draft[..at],
        None => return None,
    };
    let complete = match complete.rfind("-----BEGIN") {
        Some(at) if !complete[at..].contains("-----END") => &complete[..at],
        _ => complete,
    };
    let redacted = crate::core::redact::redact(complete).text;
    let redacted = redacted.trim();
    (!redacted.is_empty()).then(|| redacted.to_string())
}

/// The last `chars` characters of `text`, from a word boundary: a cut through a word (or a
/// redaction marker) reads as something else.
pub fn tail(text: &str, chars: usize) -> String {
    let count = text.chars().count();
    if count <= chars {
        return text.to_string();
    }
    let tail: String = text.chars().skip(count - chars).collect();
    let tail = match tail.find(char::is_whitespace) {
        Some(at) => tail[at..].trim_start(),
        None => tail.as_str(),
    };
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> UsageReport {
        UsageReport {
            session: TokenUse {
                input: 50_000,
                output: 10_000,
                cache_read: 40_000,
                cache_write: 5_000,
                cost_micros: Some(450_000),
            },
            last_turn: Some(TokenUse {
                input: 10,
                output: 5,
                cache_read: 0,
                cache_write: 0,
                cost_micros: Some(120),
            }),
            context_tokens: Some(60_000),
            context_window: Some(200_000),
        }
    }

    #[test]
    fn typed_commands_ask_the_agent_for_what_they_name() {
        use RemoteCommand::*;
        let rows = [
            (New, "", Some(SessionCommand::NewSession)),
            (Compact, "", Some(SessionCommand::Compact(None))),
            (
                Compact,
                " keep the API ",
                Some(SessionCommand::Compact(Some("keep the API".into()))),
            ),
            (Model, "", Some(SessionCommand::ListModels)),
            (
                Model,
                "fake/m2",
                Some(SessionCommand::SetModel("fake/m2".into())),
            ),
            (Thinking, "", Some(SessionCommand::Thinking(None))),
            (
                Thinking,
                "high",
                Some(SessionCommand::Thinking(Some("high".into()))),
            ),
            (Usage, "", Some(SessionCommand::Usage)),
            (Status, "", None),
            (Abort, "", None),
        ];
        for (command, args, expected) in rows {
            assert_eq!(
                session_command(command, args),
                expected,
                "{command:?} {args:?}"
            );
        }
    }

    #[test]
    fn new_asks_first_only_when_work_would_be_lost() {
        assert_eq!(new_needs_confirmation("", false, 0), None);
        let (text, button) = new_needs_confirmation("", true, 0).expect("asks while busy");
        assert!(
            text.contains("A turn is running") && text.contains("/new confirm"),
            "{text}"
        );
        assert_eq!(button.command, "/new confirm");
        let (text, _) = new_needs_confirmation("", false, 2).expect("asks with prompts waiting");
        assert!(text.contains("2 prompt(s) wait"), "{text}");
        let (both, _) = new_needs_confirmation("", true, 1).expect("asks");
        assert!(
            both.contains("running (it is aborted) and 1 prompt"),
            "{both}"
        );
        for word in ["confirm", "YES", " now "] {
            assert_eq!(new_needs_confirmation(word, true, 3), None, "{word}");
        }
        assert!(new_needs_confirmation("please", true, 0).is_some());
    }

    #[test]
    fn the_model_list_marks_the_current_one_and_offers_the_others_as_buttons() {
        let available: Vec<String> = ["fake/a", "fake/b", "fake/c"].map(String::from).to_vec();
        let (text, buttons) = models_reply(Some("fake/b"), &available);
        assert_eq!(
            text,
            "Models:\n- fake/a\n- fake/b (in use)\n- fake/c\nSwitch with /model <name>."
        );
        let commands: Vec<&str> = buttons.iter().map(|b| b.command.as_str()).collect();
        assert_eq!(commands, ["/model fake/a", "/model fake/c"]);
        let long = format!("p/{}", "x".repeat(70));
        let many: Vec<String> = (0..8)
            .map(|i| format!("p/m{i}"))
            .chain([long.clone()])
            .collect();
        let (text, buttons) = models_reply(None, &many);
        assert_eq!(buttons.len(), 5, "one row at most");
        assert!(
            text.contains(&long),
            "a model too long for a button is still listed"
        );
        assert!(models_reply(None, &[]).1.is_empty());
    }

    #[test]
    fn counts_and_costs_read_short() {
        let rows = [
            (0, "0"),
            (950, "950"),
            (1_000, "1k"),
            (12_345, "12.3k"),
            (1_200_000, "1.2M"),
        ];
        for (n, text) in rows {
            assert_eq!(count(n), text);
        }
        assert_eq!(cost(120), "$0.0001");
        assert_eq!(cost(450_000), "$0.4500");
        assert_eq!(cost(12_340_000), "$12.34");
    }

    #[test]
    fn usage_names_the_session_the_last_turn_and_the_context() {
        assert_eq!(
            usage_text(&report()),
            "Usage\n- this session: 50k in, 10k out, cache 40k read, 5k written, $0.4500\n\
             - last turn: 10 in, 5 out, $0.0001\n- context: 60k of 200k (30%)"
        );
        let fresh = UsageReport::default();
        let text = usage_text(&fresh);
        assert!(
            text.contains("none finished yet") && text.contains("not known yet"),
            "{text}"
        );
    }

    #[test]
    fn the_footer_shows_what_the_owner_chose() {
        let r = report();
        assert_eq!(footer(&r, UsageFooter::Off), None);
        assert_eq!(
            footer(&r, UsageFooter::Tokens).as_deref(),
            Some("Tokens: 10 in, 5 out")
        );
        assert_eq!(
            footer(&r, UsageFooter::TokensCost).as_deref(),
            Some("Tokens: 10 in, 5 out · $0.0001")
        );
        assert_eq!(
            footer(&r, UsageFooter::Context).as_deref(),
            Some("Context: 60k of 200k (30%)")
        );
        // Nothing reported: no footer rather than a made-up zero.
        assert_eq!(footer(&UsageReport::default(), UsageFooter::Tokens), None);
        assert_eq!(footer(&UsageReport::default(), UsageFooter::Context), None);
    }

    #[test]
    fn a_long_turn_ends_with_how_long_it_took_and_what_it_left() {
        let rows = [
            (45_000, "45s"),
            (252_000, "4m12s"),
            (3_780_000, "1h03m"),
            (999, "0s"),
        ];
        for (ms, text) in rows {
            assert_eq!(elapsed(ms), text);
        }
        assert_eq!(
            done_text(252_000, Some(3), Some("12 passed, 0 failed")),
            "Done in 4m12s: 3 files changed, tests: 12 passed, 0 failed."
        );
        assert_eq!(
            done_text(61_000, Some(1), None),
            "Done in 1m01s: 1 file changed."
        );
        assert_eq!(done_text(61_000, Some(0), None), "Done in 1m01s.");
        assert_eq!(done_text(61_000, None, None), "Done in 1m01s.");
    }

    #[test]
    fn a_preview_never_shows_a_secret_streamed_in_pieces() {
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        // Every prefix of a stream carrying the token: no preview shows any of its body.
        let stream = format!("Use the key {token} to push, then run the tests.");
        for end in 0..=stream.len() {
            if !stream.is_char_boundary(end) {
                continue;
            }
            if let Some(shown) = preview(&stream[..end]) {
                assert!(!shown.contains("abcdefghij"), "{end}: {shown}");
                assert!(!shown.contains("ghp_a"), "{end}: {shown}");
            }
        }
        assert_eq!(preview("Hello wor").as_deref(), Some("Hello"));
        assert_eq!(preview("Hello"), None, "one unfinished word: nothing yet");
        // A key block shows nothing of itself until it is closed.
        let pem = "Here:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ \nmore ";
        assert_eq!(preview(pem).as_deref(), Some("Here:"));
        // A long answer shows its end, from a word boundary.
        let long = format!("{} end of it ", "word ".repeat(300));
        let shown = preview(&long).expect("shown");
        assert!(
            shown.starts_with("…word") && shown.ends_with("end of it"),
            "{shown}"
        );
    }

    #[test]
    fn a_denied_command_names_the_key() {
        assert_eq!(
            denied_text(RemoteCommand::Model),
            "/model is turned off for the chats here by the owner (bridge.denyCommands)."
        );
    }
}
