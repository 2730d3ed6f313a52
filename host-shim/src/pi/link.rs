//! The agent link: the JSON-lines protocol between the pi extension
//! (`examples/pi-extension/`) and `host-shim attach`, over a Unix socket. Pure: messages
//! and their encoding, no I/O. `examples/pi-extension/PROTOCOL.md` is the prose version;
//! the tests here pin the wire shapes it documents.
//!
//! Versioning: both sides name their protocol version in the hello. The major version
//! must match; a host that cannot serve the extension's version says so in
//! `hello_rejected` with both versions, so the person knows which side to update.
//! Unknown message types are reported and skipped, never fatal.

use serde::{Deserialize, Serialize};

use crate::wit::agent::{
    DeliverAs, ModelList, PromptImage, QuestionAnswer, SessionCommand, SessionReply, TokenUse,
    UsageReport,
};
use crate::wit::session::{AgentEvent, ToolDecision, ToolResult, TurnOrigin};
use crate::wit::types::Level;

/// The protocol version this host speaks.
pub const PROTOCOL: u32 = 1;

/// The pi session, as the extension describes it in its hello.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LinkSession {
    /// pi's session id: the bridge's session key.
    pub key: String,
    /// The session's display name, if it has one.
    #[serde(default)]
    pub name: Option<String>,
    /// pi's working directory (the digest's).
    pub cwd: String,
}

/// Where a turn came from, on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Typed in pi.
    Local,
    /// Injected by this bridge.
    Remote,
}

/// A message from the extension.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum FromExtension {
    /// The first message: who is calling.
    Hello {
        /// The extension's protocol version.
        protocol: u32,
        /// The extension's own version.
        #[serde(default)]
        extension: Option<String>,
        /// pi's version.
        #[serde(default)]
        pi: Option<String>,
        /// The session.
        session: LinkSession,
    },
    /// A run started.
    TurnStarted {
        /// Who started it.
        origin: Origin,
    },
    /// A tool started.
    ToolStarted {
        /// Tool name.
        name: String,
    },
    /// A tool finished.
    ToolFinished {
        /// Tool name.
        name: String,
        /// It succeeded.
        ok: bool,
    },
    /// The visible text of an assistant message.
    AssistantMessage {
        /// The text.
        text: String,
    },
    /// The assistant message being written, as far as it goes (at most every 250 ms).
    AssistantDraft {
        /// Its visible text so far.
        text: String,
    },
    /// The run is over.
    TurnSettled,
    /// The prompt being worked on (digest).
    LastPrompt {
        /// Its text.
        text: String,
    },
    /// A shell command finished (digest).
    ShellRun {
        /// The command line.
        command: String,
        /// It failed.
        failed: bool,
        /// The end of its output.
        output: String,
    },
    /// A tool call of a remote turn waits for a verdict.
    ToolCall {
        /// Answer with this id.
        id: String,
        /// Tool name.
        name: String,
        /// The call's path-like arguments (the extension leaves out long strings such as
        /// file contents); absent from an older extension, then no paths are known.
        #[serde(default)]
        input: serde_json::Value,
    },
    /// The agent called the extension's `send_file` tool.
    SendFile {
        /// Answer with this id.
        id: String,
        /// The path as the agent wrote it.
        path: String,
        /// Text to show with the file.
        #[serde(default)]
        caption: Option<String>,
    },
    /// `/connect <args>` was typed in pi.
    Command {
        /// Answer with this id.
        id: String,
        /// Everything after the command name.
        args: String,
    },
    /// Whether a prompt was injected.
    PromptResult {
        /// The prompt's id.
        id: String,
        /// pi took it.
        ok: bool,
        /// Why not.
        #[serde(default)]
        error: Option<String>,
    },
    /// The person's answer to a confirm.
    ConfirmResult {
        /// The confirm's id.
        id: String,
        /// Yes.
        yes: bool,
    },
    /// Another extension asks the person something during a remote turn; the dialog is
    /// open in pi too (docs/pi.md#questions-pi-asks).
    Question {
        /// Answer with `question_answer` and this id.
        id: String,
        /// `select`, `confirm` or `input`.
        method: String,
        /// The question.
        title: String,
        /// The confirm message or the input placeholder.
        #[serde(default)]
        message: String,
        /// A select's options.
        #[serde(default)]
        options: Vec<String>,
        /// The dialog closes unanswered after this many ms; absent: it waits.
        #[serde(default)]
        timeout_ms: Option<u64>,
    },
    /// The person in pi answered (or dismissed) a question first.
    QuestionAnswered {
        /// The question's id.
        id: String,
        /// The option chosen or the text typed.
        #[serde(default)]
        value: Option<String>,
        /// The confirm's yes or no.
        #[serde(default)]
        confirmed: Option<bool>,
        /// Dismissed.
        #[serde(default)]
        cancelled: bool,
    },
    /// Another extension's notify, status or widget during a remote run: the card's
    /// notice line (empty clears it).
    Notice {
        /// The line.
        text: String,
    },
    /// The answer to a `session_command`.
    SessionResult {
        /// The command's id.
        id: String,
        /// pi did it.
        ok: bool,
        /// Why not, for a person.
        #[serde(default)]
        error: Option<String>,
        /// What changed (`new_session`, `compact`, `set_model`, `thinking`).
        #[serde(default)]
        text: Option<String>,
        /// `list_models`: the model in use, as `provider/id`.
        #[serde(default)]
        current: Option<String>,
        /// `list_models`: every model available, as `provider/id`.
        #[serde(default)]
        models: Option<Vec<String>>,
        /// `usage`: the figures.
        #[serde(default)]
        usage: Option<LinkUsage>,
    },
    /// The session ends on purpose (pi exits, `/new`, `/reload`).
    Bye,
}

/// Tokens and cost as the extension sums them from pi's messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LinkTokens {
    /// Input tokens not read from the cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the cache.
    pub cache_read: u64,
    /// Tokens written to the cache.
    pub cache_write: u64,
    /// Cost in millionths of a dollar, when pi priced it.
    pub cost_micros: Option<u64>,
}

/// The `usage` of a `session_result`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LinkUsage {
    /// The session's messages.
    pub session: LinkTokens,
    /// The last finished run's messages.
    pub last_turn: Option<LinkTokens>,
    /// Tokens in the context now (`ctx.getContextUsage()`).
    pub context_tokens: Option<u64>,
    /// The model's context window.
    pub context_window: Option<u64>,
}

/// An image as the extension hands it to pi (`ImageContent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkImage {
    /// Media type.
    pub mime_type: String,
    /// Base64 of the bytes.
    pub data: String,
}

/// A message to the extension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum ToExtension {
    /// The hello was accepted.
    Hello {
        /// The host's protocol version.
        protocol: u32,
        /// host-shim's version.
        host: String,
    },
    /// The hello was refused; the link closes after this.
    HelloRejected {
        /// The host's protocol version.
        protocol: u32,
        /// Why, for a person.
        reason: String,
    },
    /// Inject a remote prompt.
    Prompt {
        /// Answer with `prompt_result` and this id.
        id: String,
        /// The text.
        text: String,
        /// `immediate`, `steer` or `followUp`.
        deliver_as: &'static str,
        /// Images.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        images: Vec<LinkImage>,
    },
    /// Abort the running work.
    Abort,
    /// Show a notification.
    Notify {
        /// `info`, `warning` or `error`.
        level: &'static str,
        /// The text.
        text: String,
    },
    /// Ask the person yes or no.
    Confirm {
        /// Answer with `confirm_result` and this id.
        id: String,
        /// Title.
        title: String,
        /// Question.
        message: String,
        /// After this the dialog closes as a no.
        timeout_ms: u64,
    },
    /// The verdict on a tool call.
    ToolVerdict {
        /// The tool call's id.
        id: String,
        /// `allow` or `block`.
        verdict: &'static str,
        /// Why it is blocked.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Arguments to set before the call runs (a search's exclusion glob).
        #[serde(skip_serializing_if = "Option::is_none")]
        set: Option<serde_json::Map<String, serde_json::Value>>,
    },
    /// The chats' answer to a question (or its dismissal): pi's dialog closes.
    QuestionAnswer {
        /// The question's id.
        id: String,
        /// The option chosen or the text typed.
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// The confirm's yes or no.
        #[serde(skip_serializing_if = "Option::is_none")]
        confirmed: Option<bool>,
        /// Dismissed: nobody answered in time.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        cancelled: bool,
    },
    /// Run a session command: `command` is `new_session`, `compact`, `set_model`,
    /// `list_models`, `thinking` or `usage`; `arg` the instructions, model name or level.
    SessionCommand {
        /// Answer with `session_result` and this id.
        id: String,
        /// Which command.
        command: &'static str,
        /// Its argument, when it has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        arg: Option<String>,
    },
    /// The answer to `send_file`: what went where, or why nothing was sent (the tool's
    /// result for the agent).
    SendFileResult {
        /// The request's id.
        id: String,
        /// The file was sent to at least one chat.
        ok: bool,
        /// What the agent is told.
        text: String,
    },
    /// The answer to a `/connect` command.
    CommandResult {
        /// The command's id.
        id: String,
        /// Severity.
        level: &'static str,
        /// Text for the terminal.
        text: String,
    },
}

/// The bridge's answer to `send_file` as the link's `send_file_result` message.
pub fn send_file_result(id: String, result: Result<String, String>) -> ToExtension {
    let (ok, text) = match result {
        Ok(text) => (true, text),
        Err(text) => (false, text),
    };
    ToExtension::SendFileResult { id, ok, text }
}

/// A session command as the link's `session_command` message.
pub fn session_command(id: String, command: SessionCommand) -> ToExtension {
    let (command, arg) = match command {
        SessionCommand::NewSession => ("new_session", None),
        SessionCommand::Compact(text) => ("compact", text),
        SessionCommand::SetModel(name) => ("set_model", Some(name)),
        SessionCommand::ListModels => ("list_models", None),
        SessionCommand::Thinking(level) => ("thinking", level),
        SessionCommand::Usage => ("usage", None),
    };
    ToExtension::SessionCommand { id, command, arg }
}

/// The extension's answer to `command` as its reply: a `session_result` that lacks what
/// the command needs, or another message, is an error that says so, never an empty answer.
pub fn session_reply(
    command: &SessionCommand,
    answer: FromExtension,
) -> Result<SessionReply, String> {
    let FromExtension::SessionResult {
        ok,
        error,
        text,
        current,
        models,
        usage,
        ..
    } = answer
    else {
        return Err("the pi extension answered something else".into());
    };
    if !ok {
        return Err(error.unwrap_or_else(|| "pi did not do it".into()));
    }
    let tokens = |t: LinkTokens| TokenUse {
        input: t.input,
        output: t.output,
        cache_read: t.cache_read,
        cache_write: t.cache_write,
        cost_micros: t.cost_micros,
    };
    match command {
        SessionCommand::ListModels => models
            .map(|available| SessionReply::Models(ModelList { current, available }))
            .ok_or_else(|| "the pi extension sent no model list".into()),
        SessionCommand::Usage => usage
            .map(|u| {
                SessionReply::Usage(UsageReport {
                    session: tokens(u.session),
                    last_turn: u.last_turn.map(tokens),
                    context_tokens: u.context_tokens,
                    context_window: u.context_window,
                })
            })
            .ok_or_else(|| "the pi extension sent no usage figures".into()),
        _ => Ok(SessionReply::Done(text.unwrap_or_else(|| "Done.".into()))),
    }
}

/// Reads one line from the extension. Total: `Err` says why a line is unusable.
pub fn parse(line: &str) -> Result<FromExtension, String> {
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let kind = value
        .get("type")
        .and_then(serde_json::Value::as_str)
        .map(shown_kind);
    serde_json::from_value(value).map_err(|e| match kind {
        Some(kind) => format!(
            "a {kind:?} message host-shim cannot use ({})",
            without_values(&e.to_string())
        ),
        None => "a message without a \"type\"".to_string(),
    })
}

/// A message type as a reason may quote it: every type of the protocol is a short
/// snake_case word, anything else is not repeated (it could be a pasted token).
fn shown_kind(kind: &str) -> String {
    let plain = !kind.is_empty()
        && kind.len() <= 32
        && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    if plain {
        kind.to_string()
    } else {
        "(unrecognised type)".to_string()
    }
}

/// serde's reason with the values it quotes from the line replaced by `…`: the reason is
/// printed on the terminal and sent back to the extension, and a value in the wrong place
/// can be anything the agent saw, a token included (`unknown variant \`sk-…\``, found by
/// fuzzing). What follows `expected` comes from our own types and stays, as do
/// the field names in `missing field` and `duplicate field`.
fn without_values(reason: &str) -> String {
    if reason.starts_with("missing field") || reason.starts_with("duplicate field") {
        return reason.to_string();
    }
    // The last `, expected`: the value may hold the words too.
    let (received, expected) = match reason.rfind(", expected") {
        Some(at) => reason.split_at(at),
        None => (reason, ""),
    };
    // From the first quote to the last of the same kind: the value may hold quotes too.
    let mut out = match received.find(['`', '"']) {
        Some(open) => {
            let quote = &received[open..=open];
            let close = received.rfind(quote).filter(|close| *close > open);
            let mut out = received[..=open].to_string();
            out.push('…');
            if let Some(close) = close {
                out.push_str(&received[close..]);
            }
            out
        }
        None => received.to_string(),
    };
    out.push_str(expected);
    out
}

/// One line for the extension, newline included.
pub fn encode(message: &ToExtension) -> String {
    // Serialising these plain structs cannot fail; the fallback keeps the function total.
    let mut line = serde_json::to_string(message).unwrap_or_else(|_| "{}".into());
    line.push('\n');
    line
}

/// Whether this host serves an extension that speaks `protocol` for `session`, when the
/// host was started for `expected_key` (none: whichever session calls first).
pub fn check_hello(
    protocol: u32,
    session: &LinkSession,
    expected_key: Option<&str>,
) -> Result<(), String> {
    if protocol != PROTOCOL {
        return Err(format!(
            "the pi extension speaks agent-link protocol {protocol}, this host-shim speaks {PROTOCOL}; \
             install matching versions of host-shim and the extension"
        ));
    }
    if session.key.trim().is_empty() {
        return Err("the hello names no session".into());
    }
    if let Some(expected) = expected_key
        && expected != session.key
    {
        return Err(format!(
            "this host-shim serves session {expected}, not {}",
            session.key
        ));
    }
    Ok(())
}

/// The bridge's answer to question `id`, for the extension.
pub fn question_answer(id: String, answer: QuestionAnswer) -> ToExtension {
    let (value, confirmed, cancelled) = match answer {
        QuestionAnswer::Value(value) => (Some(value), None, false),
        QuestionAnswer::Confirmed(yes) => (None, Some(yes), false),
        QuestionAnswer::Cancelled => (None, None, true),
    };
    ToExtension::QuestionAnswer {
        id,
        value,
        confirmed,
        cancelled,
    }
}

/// What the person in pi answered, from a `question_answered`: a value, else a yes/no,
/// else dismissed (also when the line says nothing usable: no answer is the safe one).
pub fn answered_in_pi(
    value: Option<String>,
    confirmed: Option<bool>,
    cancelled: bool,
) -> QuestionAnswer {
    match (cancelled, value, confirmed) {
        (false, Some(value), _) => QuestionAnswer::Value(value),
        (false, None, Some(yes)) => QuestionAnswer::Confirmed(yes),
        _ => QuestionAnswer::Cancelled,
    }
}

/// The bridge event a link message carries, if it is one.
pub fn agent_event(message: &FromExtension) -> Option<AgentEvent> {
    Some(match message {
        FromExtension::TurnStarted { origin } => AgentEvent::TurnStarted(match origin {
            Origin::Local => TurnOrigin::Local,
            Origin::Remote => TurnOrigin::Remote,
        }),
        FromExtension::ToolStarted { name } => AgentEvent::ToolStarted(name.clone()),
        FromExtension::ToolFinished { name, ok } => AgentEvent::ToolFinished(ToolResult {
            name: name.clone(),
            ok: *ok,
        }),
        FromExtension::AssistantMessage { text } => AgentEvent::AssistantMessage(text.clone()),
        FromExtension::Notice { text } => AgentEvent::Notice(text.clone()),
        FromExtension::AssistantDraft { text } => AgentEvent::AssistantDraft(text.clone()),
        FromExtension::TurnSettled => AgentEvent::TurnSettled,
        _ => return None,
    })
}

/// The prompt message for a remote prompt.
pub fn prompt(
    id: String,
    text: String,
    deliver_as: DeliverAs,
    images: &[PromptImage],
) -> ToExtension {
    use base64::Engine as _;
    ToExtension::Prompt {
        id,
        text,
        deliver_as: match deliver_as {
            DeliverAs::Immediate => "immediate",
            DeliverAs::Steer => "steer",
            DeliverAs::FollowUp => "followUp",
        },
        images: images
            .iter()
            .map(|i| LinkImage {
                mime_type: i.media_type.clone(),
                data: base64::engine::general_purpose::STANDARD.encode(&i.data),
            })
            .collect(),
    }
}

/// The verdict message for a decision.
pub fn verdict(id: String, decision: ToolDecision) -> ToExtension {
    match decision {
        ToolDecision::Allow => ToExtension::ToolVerdict {
            id,
            verdict: "allow",
            reason: None,
            set: None,
        },
        ToolDecision::Block(reason) => ToExtension::ToolVerdict {
            id,
            verdict: "block",
            reason: Some(reason),
            set: None,
        },
        ToolDecision::Narrowed(arguments) => ToExtension::ToolVerdict {
            id,
            verdict: "allow",
            reason: None,
            set: Some(arguments_map(arguments)),
        },
    }
}

/// The arguments a narrowed verdict sets, as the JSON object the extension applies.
pub fn arguments_map(
    arguments: Vec<crate::wit::types::ToolArgument>,
) -> serde_json::Map<String, serde_json::Value> {
    arguments
        .into_iter()
        .map(|a| (a.name, serde_json::Value::String(a.value)))
        .collect()
}

/// A level's wire name.
pub fn level_name(level: Level) -> &'static str {
    crate::local::logging::level_name(level)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn json(line: &str) -> serde_json::Value {
        assert!(
            line.ends_with('\n') && line.matches('\n').count() == 1,
            "{line:?}"
        );
        serde_json::from_str(line.trim_end()).expect("JSON")
    }

    fn session(key: &str) -> LinkSession {
        LinkSession {
            key: key.into(),
            name: None,
            cwd: "/w".into(),
        }
    }

    #[test]
    fn the_hello_names_protocol_versions_and_session() {
        let hello = parse(
            r#"{"type":"hello","protocol":1,"extension":"0.1.0","pi":"0.73.1","session":{"key":"abc","name":"work","cwd":"/w"}}"#,
        );
        assert_eq!(
            hello,
            Ok(FromExtension::Hello {
                protocol: 1,
                extension: Some("0.1.0".into()),
                pi: Some("0.73.1".into()),
                session: LinkSession {
                    key: "abc".into(),
                    name: Some("work".into()),
                    cwd: "/w".into()
                }
            })
        );
        assert_eq!(
            json(&encode(&ToExtension::Hello {
                protocol: PROTOCOL,
                host: "0.1.0".into()
            })),
            serde_json::json!({"type":"hello","protocol":1,"host":"0.1.0"})
        );
    }

    #[test]
    fn a_hello_of_another_version_or_session_is_refused_with_both_named() {
        assert_eq!(check_hello(1, &session("a"), None), Ok(()));
        assert_eq!(check_hello(1, &session("a"), Some("a")), Ok(()));
        let version = check_hello(2, &session("a"), None).unwrap_err();
        assert!(
            version.contains("protocol 2") && version.contains("speaks 1"),
            "{version}"
        );
        let other = check_hello(1, &session("b"), Some("a")).unwrap_err();
        assert!(other.contains("serves session a, not b"), "{other}");
        assert!(check_hello(1, &session(" "), None).is_err());
    }

    #[test]
    fn events_map_to_the_bridge_events() {
        let cases = [
            (
                r#"{"type":"turn_started","origin":"remote"}"#,
                Some(AgentEvent::TurnStarted(TurnOrigin::Remote)),
            ),
            (
                r#"{"type":"turn_started","origin":"local"}"#,
                Some(AgentEvent::TurnStarted(TurnOrigin::Local)),
            ),
            (
                r#"{"type":"tool_started","name":"bash"}"#,
                Some(AgentEvent::ToolStarted("bash".into())),
            ),
            (
                r#"{"type":"tool_finished","name":"bash","ok":false}"#,
                Some(AgentEvent::ToolFinished(ToolResult {
                    name: "bash".into(),
                    ok: false,
                })),
            ),
            (
                r#"{"type":"assistant_message","text":"hi"}"#,
                Some(AgentEvent::AssistantMessage("hi".into())),
            ),
            (r#"{"type":"turn_settled"}"#, Some(AgentEvent::TurnSettled)),
            (r#"{"type":"last_prompt","text":"x"}"#, None),
        ];
        for (line, expected) in cases {
            let message = parse(line).expect(line);
            assert_eq!(agent_event(&message), expected, "{line}");
        }
    }

    #[test]
    fn requests_and_answers_carry_their_ids() {
        assert_eq!(
            parse(r#"{"type":"tool_call","id":"t1","name":"bash"}"#),
            Ok(FromExtension::ToolCall {
                id: "t1".into(),
                name: "bash".into(),
                input: serde_json::Value::Null,
            })
        );
        assert_eq!(
            parse(r#"{"type":"tool_call","id":"t2","name":"write","input":{"path":"src/a.rs"}}"#),
            Ok(FromExtension::ToolCall {
                id: "t2".into(),
                name: "write".into(),
                input: serde_json::json!({"path": "src/a.rs"}),
            })
        );
        assert_eq!(
            parse(r#"{"type":"command","id":"c1","args":"status"}"#),
            Ok(FromExtension::Command {
                id: "c1".into(),
                args: "status".into()
            })
        );
        assert_eq!(
            parse(r#"{"type":"prompt_result","id":"p1","ok":false,"error":"busy"}"#),
            Ok(FromExtension::PromptResult {
                id: "p1".into(),
                ok: false,
                error: Some("busy".into())
            })
        );
        assert_eq!(
            parse(r#"{"type":"shell_run","command":"ls","failed":true,"output":"x"}"#),
            Ok(FromExtension::ShellRun {
                command: "ls".into(),
                failed: true,
                output: "x".into()
            })
        );
        assert_eq!(
            json(&encode(&verdict(
                "t1".into(),
                ToolDecision::Block("no".into())
            ))),
            serde_json::json!({"type":"tool_verdict","id":"t1","verdict":"block","reason":"no"})
        );
        assert_eq!(
            json(&encode(&verdict("t2".into(), ToolDecision::Allow))),
            serde_json::json!({"type":"tool_verdict","id":"t2","verdict":"allow"})
        );
        assert_eq!(
            json(&encode(&ToExtension::Confirm {
                id: "k".into(),
                title: "t".into(),
                message: "m".into(),
                timeout_ms: 60_000
            })),
            serde_json::json!({"type":"confirm","id":"k","title":"t","message":"m","timeoutMs":60000})
        );
        assert_eq!(
            json(&encode(&ToExtension::Abort)),
            serde_json::json!({"type":"abort"})
        );
    }

    #[test]
    fn questions_and_their_answers_cross_the_link() {
        assert_eq!(
            parse(
                r#"{"type":"question","id":"q1","method":"select","title":"Where?","options":["eu","us"],"timeoutMs":5000}"#
            ),
            Ok(FromExtension::Question {
                id: "q1".into(),
                method: "select".into(),
                title: "Where?".into(),
                message: String::new(),
                options: vec!["eu".into(), "us".into()],
                timeout_ms: Some(5000),
            })
        );
        assert_eq!(
            parse(r#"{"type":"question_answered","id":"q1","value":"eu"}"#),
            Ok(FromExtension::QuestionAnswered {
                id: "q1".into(),
                value: Some("eu".into()),
                confirmed: None,
                cancelled: false,
            })
        );
        assert_eq!(
            answered_in_pi(None, Some(false), false),
            QuestionAnswer::Confirmed(false)
        );
        assert_eq!(
            answered_in_pi(Some("x".into()), None, true),
            QuestionAnswer::Cancelled
        );
        assert_eq!(answered_in_pi(None, None, false), QuestionAnswer::Cancelled);
        assert_eq!(
            parse(r#"{"type":"notice","text":"indexing 3/9"}"#)
                .ok()
                .as_ref()
                .and_then(agent_event),
            Some(AgentEvent::Notice("indexing 3/9".into()))
        );
        assert_eq!(
            json(&encode(&question_answer(
                "q1".into(),
                QuestionAnswer::Value("us".into())
            ))),
            serde_json::json!({"type": "question_answer", "id": "q1", "value": "us"})
        );
        assert_eq!(
            json(&encode(&question_answer(
                "q2".into(),
                QuestionAnswer::Cancelled
            ))),
            serde_json::json!({"type": "question_answer", "id": "q2", "cancelled": true})
        );
    }

    #[test]
    fn a_prompt_names_its_delivery_and_base64_images() {
        let image = PromptImage {
            media_type: "image/png".into(),
            data: b"\x89PNG".to_vec(),
        };
        assert_eq!(
            json(&encode(&prompt(
                "p1".into(),
                "look\nhere".into(),
                DeliverAs::FollowUp,
                &[image]
            ))),
            serde_json::json!({"type":"prompt","id":"p1","text":"look\nhere","deliverAs":"followUp",
                "images":[{"mimeType":"image/png","data":"iVBORw=="}]})
        );
        assert_eq!(
            json(&encode(&prompt(
                "p2".into(),
                "x".into(),
                DeliverAs::Immediate,
                &[]
            ))),
            serde_json::json!({"type":"prompt","id":"p2","text":"x","deliverAs":"immediate"})
        );
    }

    #[test]
    fn session_commands_cross_the_link_and_come_back_as_replies() {
        let line = encode(&session_command(
            "s1".into(),
            SessionCommand::Compact(Some("keep it".into())),
        ));
        assert_eq!(
            json(&line),
            serde_json::json!({"type":"session_command","id":"s1","command":"compact","arg":"keep it"})
        );
        let line = encode(&session_command("s2".into(), SessionCommand::Usage));
        assert_eq!(
            json(&line),
            serde_json::json!({"type":"session_command","id":"s2","command":"usage"})
        );
        let usage = r#"{"type":"session_result","id":"s2","ok":true,"usage":{"session":{"input":20,"output":10,"costMicros":30},"lastTurn":{"input":10,"output":5},"contextTokens":15,"contextWindow":32000}}"#;
        let reply = session_reply(&SessionCommand::Usage, parse(usage).expect("parses"));
        let Ok(SessionReply::Usage(report)) = reply else {
            panic!("{reply:?}")
        };
        assert_eq!(report.session.cost_micros, Some(30));
        assert_eq!(report.last_turn.map(|t| t.output), Some(5));
        assert_eq!(report.context_window, Some(32000));
        let result = |line: &str| parse(line).expect("parses");
        // A result without what the command needs is an error, not an empty answer.
        assert!(
            session_reply(
                &SessionCommand::ListModels,
                result(r#"{"type":"session_result","id":"s3","ok":true}"#)
            )
            .is_err()
        );
        assert_eq!(
            session_reply(
                &SessionCommand::NewSession,
                result(
                    r#"{"type":"session_result","id":"s4","ok":false,"error":"type /new in pi"}"#
                )
            ),
            Err("type /new in pi".into())
        );
        assert_eq!(
            session_reply(
                &SessionCommand::ListModels,
                result(
                    r#"{"type":"session_result","id":"s5","ok":true,"current":"a/b","models":["a/b"]}"#
                )
            ),
            Ok(SessionReply::Models(ModelList {
                current: Some("a/b".into()),
                available: vec!["a/b".into()]
            }))
        );
        assert_eq!(
            session_reply(&SessionCommand::Usage, FromExtension::Bye),
            Err("the pi extension answered something else".into())
        );
    }

    #[test]
    fn unusable_lines_say_why() {
        assert!(parse("nope").unwrap_err().contains("not JSON"));
        assert!(parse("{}").unwrap_err().contains("without a \"type\""));
        assert!(
            parse(r#"{"type":"teleport"}"#)
                .unwrap_err()
                .contains("\"teleport\"")
        );
        assert!(
            parse(r#"{"type":"tool_call","id":"t"}"#)
                .unwrap_err()
                .contains("\"tool_call\"")
        );
    }

    proptest! {
        #[test]
        fn any_line_parses_without_panicking(line in "\\PC*") {
            let _ = parse(&line);
        }
    }

    /// Found by fuzzing: serde quoted the offending value in the reason.
    #[test]
    fn a_refused_line_does_not_repeat_its_values() {
        let secret = "sk-ant-api03-Zk3vQ9xLp2mN8rT4wY6uB1";
        for line in [
            format!(r#"{{"type":"turn_started","origin":"{secret}"}}"#),
            format!(r#"{{"type":"hello","protocol":"{secret}"}}"#),
            format!(r#"{{"type":"tool_finished","name":"bash","ok":"{secret}"}}"#),
            format!(r#"{{"type":"{secret}"}}"#),
            format!(r#"{{"type":"turn_started","origin":"`x` {secret}`, expected"}}"#),
        ] {
            let why = parse(&line).expect_err("a wrong value");
            assert!(!why.contains(secret), "{why}");
            assert!(why.starts_with("a \""), "{why}");
        }
        let why = parse(r#"{"type":"turn_started","origin":"elsewhere"}"#).expect_err("bad");
        assert_eq!(
            why,
            "a \"turn_started\" message host-shim cannot use (unknown variant `…`, expected `local` or `remote`)"
        );
        let why = parse(r#"{"type":"tool_call","id":"t"}"#).expect_err("missing");
        assert!(why.contains("missing field `name`"), "{why}");
    }
}
