//! pi's `--mode rpc` wire format: commands out, lines in. Pure: no process, no I/O.
//!
//! The protocol is JSON lines (pi's `docs/rpc.md`): one object per line, split on `\n`
//! only (a trailing `\r` is tolerated; U+2028 inside a string is not a line break).
//! Commands carry an optional `id` that pi echoes in its `response`; events carry none.
//! Only the fields bot-connect uses are read; everything else on a line is ignored, so a
//! newer pi that adds fields keeps working. [`parse_line`] is total: any text yields a
//! [`RpcLine`], and a line it cannot use says why instead of panicking.

use serde::Serialize;
use serde_json::{Map, Value};

/// An image attached to a prompt, as pi's `ImageContent` (base64, no `data:` prefix).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RpcImage {
    /// Always `image`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Base64 of the bytes.
    pub data: String,
    /// Media type, e.g. `image/png`.
    #[serde(rename = "mimeType")]
    pub mime_type: String,
}

impl RpcImage {
    /// An image from its media type and raw bytes.
    pub fn new(mime_type: &str, bytes: &[u8]) -> RpcImage {
        use base64::Engine as _;
        RpcImage {
            kind: "image",
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
            mime_type: mime_type.to_string(),
        }
    }
}

/// How pi queues a prompt that arrives while it is working.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum StreamingBehavior {
    /// After the running tool calls, before the next model call.
    #[serde(rename = "steer")]
    Steer,
    /// When the running work is done.
    #[serde(rename = "followUp")]
    FollowUp,
}

/// A command for pi's stdin. Only the commands bot-connect sends are modelled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RpcCommand {
    /// A user prompt. With `streaming_behavior` set it is queued while pi is busy and
    /// runs at once while idle, so no idle/busy race can reject it.
    Prompt {
        /// Correlation id echoed in the response.
        id: String,
        /// The prompt text.
        message: String,
        /// Attached images.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        images: Vec<RpcImage>,
        /// Queueing while busy.
        #[serde(rename = "streamingBehavior", skip_serializing_if = "Option::is_none")]
        streaming_behavior: Option<StreamingBehavior>,
    },
    /// Stops the running work.
    Abort {
        /// Correlation id.
        id: String,
    },
    /// Asks for the session state; the first answer also tells that pi is ready.
    GetState {
        /// Correlation id.
        id: String,
    },
    /// Starts a fresh session (`/new`); an extension may cancel it.
    NewSession {
        /// Correlation id.
        id: String,
    },
    /// Summarises the conversation so far (`/compact`).
    Compact {
        /// Correlation id.
        id: String,
        /// What the summary should keep.
        #[serde(rename = "customInstructions", skip_serializing_if = "Option::is_none")]
        custom_instructions: Option<String>,
    },
    /// Switches the model (`/model <name>`).
    SetModel {
        /// Correlation id.
        id: String,
        /// The model's provider.
        provider: String,
        /// The model's id at that provider.
        #[serde(rename = "modelId")]
        model_id: String,
    },
    /// Lists the models pi can switch to.
    GetAvailableModels {
        /// Correlation id.
        id: String,
    },
    /// Sets the thinking level (`/thinking <level>`).
    SetThinkingLevel {
        /// Correlation id.
        id: String,
        /// `off` … `xhigh`.
        level: String,
    },
    /// Token use, cost and context of the session (`/usage`, the footer).
    GetSessionStats {
        /// Correlation id.
        id: String,
    },
    /// Answers a dialog an extension opened (`extension_ui_request`).
    #[serde(rename = "extension_ui_response")]
    UiResponse {
        /// The request's id.
        id: String,
        /// The answer of an `input` / `select` / `editor` dialog.
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// The answer of a `confirm` dialog.
        #[serde(skip_serializing_if = "Option::is_none")]
        confirmed: Option<bool>,
        /// The dialog was dismissed without an answer.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        cancelled: bool,
    },
}

/// One line for pi's stdin, newline included.
pub fn encode(command: &RpcCommand) -> String {
    // Serialising these plain structs cannot fail; the fallback keeps the function total.
    let mut line = serde_json::to_string(command).unwrap_or_else(|_| "{}".into());
    line.push('\n');
    line
}

/// What pi said on one stdout line.
#[derive(Debug, Clone, PartialEq)]
pub enum RpcLine {
    /// The answer to a command.
    Response(RpcResponse),
    /// Something happened in the agent.
    Event(PiEvent),
    /// An extension asks the client something (`extension_ui_request`).
    Ui(UiRequest),
    /// A well-formed line bot-connect has no use for (streaming deltas, compaction, …).
    Ignored(String),
    /// Not a pi line at all; the text says why, for a warning.
    Invalid(String),
}

/// pi's answer to a command.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcResponse {
    /// The command's id, when it had one.
    pub id: Option<String>,
    /// Which command it answers.
    pub command: String,
    /// Accepted or not.
    pub success: bool,
    /// Why not.
    pub error: Option<String>,
    /// The payload (`get_state` data, …).
    pub data: Option<Value>,
}

/// The agent events bot-connect follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PiEvent {
    /// A run started (one per prompt; follow-ups and steers join the running run).
    AgentStart,
    /// The run is over (an automatic retry may start another one).
    AgentEnd,
    /// A message started; user messages are the prompts of the run.
    MessageStart {
        /// `user`, `assistant`, `toolResult`, `custom`, …
        role: String,
        /// Its text parts, joined.
        text: String,
    },
    /// A message is being written (`message_update`): the assistant's text so far.
    MessageUpdate {
        /// `assistant`, …
        role: String,
        /// Its text parts so far, joined.
        text: String,
    },
    /// A message is complete.
    MessageEnd {
        /// `user`, `assistant`, `toolResult`, …
        role: String,
        /// Its text parts, joined (thinking and tool calls left out).
        text: String,
        /// `stop`, `toolUse`, `error`, `aborted`, … (assistant messages).
        stop_reason: Option<String>,
        /// Why the model call failed, when it did.
        error_message: Option<String>,
        /// What the model call cost, as pi reports it (assistant messages).
        usage: Option<Usage>,
    },
    /// A tool started.
    ToolStart {
        /// Correlates start and end.
        call_id: String,
        /// Tool name.
        name: String,
        /// The `command` argument, for `bash` (digest only; never sent to a chat).
        command: Option<String>,
    },
    /// A tool finished (or was blocked).
    ToolEnd {
        /// Correlates start and end.
        call_id: String,
        /// Tool name.
        name: String,
        /// It failed or was blocked.
        is_error: bool,
        /// Its text output (digest only; never sent to a chat).
        output: String,
    },
    /// pi will retry a failed model call after a delay.
    AutoRetryStart,
    /// The retries are over.
    AutoRetryEnd {
        /// The last retry worked.
        success: bool,
    },
    /// An extension handler threw.
    ExtensionError {
        /// Which extension.
        extension: String,
        /// In which event.
        event: String,
        /// What it threw.
        error: String,
    },
}

/// Tokens and cost of model calls, as pi's `usage` object reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens not read from the cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the cache.
    pub cache_read: u64,
    /// Tokens written to the cache.
    pub cache_write: u64,
    /// Cost in millionths of a dollar; none when pi gave none.
    pub cost_micros: Option<u64>,
}

impl Usage {
    /// Reads pi's `usage` (`input`, `output`, `cacheRead`, `cacheWrite`, `cost.total`, or a
    /// plain `cost` number as `get_session_stats` gives it). A missing or negative count is
    /// zero: a figure pi did not report is not invented, and one it got wrong is not
    /// allowed to wrap.
    pub fn from_pi(value: Option<&Value>) -> Option<Usage> {
        let value = value?.as_object()?;
        let count = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_f64)
                .filter(|n| n.is_finite() && *n > 0.0)
                .map_or(0, |n| n as u64)
        };
        let cost = match value.get("cost") {
            Some(Value::Object(cost)) => cost.get("total"),
            other => other,
        };
        Some(Usage {
            input: count("input"),
            output: count("output"),
            cache_read: count("cacheRead"),
            cache_write: count("cacheWrite"),
            cost_micros: cost_micros(cost),
        })
    }

    /// Both together (a turn of several model calls).
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            input: self.input.saturating_add(other.input),
            output: self.output.saturating_add(other.output),
            cache_read: self.cache_read.saturating_add(other.cache_read),
            cache_write: self.cache_write.saturating_add(other.cache_write),
            cost_micros: match (self.cost_micros, other.cost_micros) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
            },
        }
    }
}

/// A cost in dollars as millionths; none when it is not a usable number.
fn cost_micros(cost: Option<&Value>) -> Option<u64> {
    cost.and_then(Value::as_f64)
        .filter(|c| c.is_finite() && *c >= 0.0)
        .map(|c| (c * 1_000_000.0).round() as u64)
}

/// A request from an extension to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UiRequest {
    /// A dialog that blocks until answered (`select`, `confirm`, `input`, `editor`).
    Dialog {
        /// Answer with this id.
        id: String,
        /// Which dialog.
        method: String,
        /// Its title.
        title: String,
        /// The confirm message, the input placeholder, or the editor's prefilled text.
        body: String,
        /// A select's options, in order (empty for the other dialogs).
        options: Vec<String>,
        /// pi answers the dialog itself (dismissed) after this many ms; none: it waits.
        timeout_ms: Option<u64>,
    },
    /// A notification for the person.
    Notify {
        /// `info`, `warning` or `error`.
        level: String,
        /// The text.
        message: String,
    },
    /// A footer status entry was set or cleared.
    Status {
        /// The entry's key.
        key: String,
        /// Its text; none clears it.
        text: Option<String>,
    },
    /// A widget (lines of text above or below pi's editor) was set or cleared.
    Widget {
        /// The widget's key.
        key: String,
        /// Its lines; none clears it.
        lines: Option<Vec<String>>,
    },
    /// Another fire-and-forget method (`setTitle`, `set_editor_text`, …).
    Other(String),
}

/// Reads one stdout line. Total: never panics, whatever the text.
pub fn parse_line(line: &str) -> RpcLine {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let value: Value = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(e) => return RpcLine::Invalid(format!("not JSON ({e})")),
    };
    let Value::Object(object) = value else {
        return RpcLine::Invalid("not a JSON object".into());
    };
    let Some(kind) = object.get("type").and_then(Value::as_str) else {
        return RpcLine::Invalid("no \"type\" field".into());
    };
    let kind = kind.to_string();
    match kind.as_str() {
        "response" => parse_response(&object),
        "extension_ui_request" => parse_ui(&object),
        "agent_start" => RpcLine::Event(PiEvent::AgentStart),
        "agent_end" => RpcLine::Event(PiEvent::AgentEnd),
        "message_start" | "message_end" | "message_update" => parse_message(&kind, &object),
        "tool_execution_start" | "tool_execution_end" => parse_tool(&kind, &object),
        "auto_retry_start" => RpcLine::Event(PiEvent::AutoRetryStart),
        "auto_retry_end" => RpcLine::Event(PiEvent::AutoRetryEnd {
            success: object.get("success").and_then(Value::as_bool) == Some(true),
        }),
        "extension_error" => RpcLine::Event(PiEvent::ExtensionError {
            extension: text_field(&object, "extensionPath"),
            event: text_field(&object, "event"),
            error: text_field(&object, "error"),
        }),
        _ => RpcLine::Ignored(kind),
    }
}

fn text_field(object: &Map<String, Value>, key: &str) -> String {
    object
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn optional_text(object: &Map<String, Value>, key: &str) -> Option<String> {
    object.get(key).and_then(Value::as_str).map(str::to_string)
}

fn parse_response(object: &Map<String, Value>) -> RpcLine {
    let Some(success) = object.get("success").and_then(Value::as_bool) else {
        return RpcLine::Invalid("a response without a boolean \"success\"".into());
    };
    RpcLine::Response(RpcResponse {
        id: optional_text(object, "id"),
        command: text_field(object, "command"),
        success,
        error: optional_text(object, "error"),
        data: object.get("data").cloned(),
    })
}

fn parse_ui(object: &Map<String, Value>) -> RpcLine {
    let method = text_field(object, "method");
    match method.as_str() {
        "select" | "confirm" | "input" | "editor" => {
            let Some(id) = optional_text(object, "id") else {
                return RpcLine::Invalid(format!("a {method} dialog without an id"));
            };
            let body = optional_text(object, "message")
                .or_else(|| optional_text(object, "placeholder"))
                .or_else(|| optional_text(object, "prefill"))
                .unwrap_or_default();
            // Options that are not text cannot be shown or sent back as pi's value: left
            // out, as pi's own TUI could not show them either.
            let options = match object.get("options") {
                Some(Value::Array(options)) => options
                    .iter()
                    .filter_map(|o| o.as_str().map(str::to_string))
                    .collect(),
                _ => Vec::new(),
            };
            RpcLine::Ui(UiRequest::Dialog {
                id,
                title: text_field(object, "title"),
                method,
                body,
                options,
                timeout_ms: object.get("timeout").and_then(Value::as_u64),
            })
        }
        "notify" => RpcLine::Ui(UiRequest::Notify {
            level: optional_text(object, "notifyType").unwrap_or_else(|| "info".into()),
            message: text_field(object, "message"),
        }),
        "setStatus" => RpcLine::Ui(UiRequest::Status {
            key: text_field(object, "statusKey"),
            text: optional_text(object, "statusText"),
        }),
        "setWidget" => RpcLine::Ui(UiRequest::Widget {
            key: text_field(object, "widgetKey"),
            lines: match object.get("widgetLines") {
                Some(Value::Array(lines)) => Some(
                    lines
                        .iter()
                        .filter_map(|l| l.as_str().map(str::to_string))
                        .collect(),
                ),
                _ => None,
            },
        }),
        _ => RpcLine::Ui(UiRequest::Other(method)),
    }
}

fn parse_message(kind: &str, object: &Map<String, Value>) -> RpcLine {
    let Some(Value::Object(message)) = object.get("message") else {
        // A streaming step without its partial message is noise to skip, not a broken
        // line: a warning per token would bury the terminal.
        if kind == "message_update" {
            return RpcLine::Ignored(kind.to_string());
        }
        return RpcLine::Invalid(format!("a {kind} without a message object"));
    };
    let role = text_field(message, "role");
    let text = visible_text(message.get("content"));
    if kind == "message_start" {
        return RpcLine::Event(PiEvent::MessageStart { role, text });
    }
    if kind == "message_update" {
        return RpcLine::Event(PiEvent::MessageUpdate { role, text });
    }
    RpcLine::Event(PiEvent::MessageEnd {
        role,
        text,
        stop_reason: optional_text(message, "stopReason"),
        error_message: optional_text(message, "errorMessage"),
        usage: Usage::from_pi(message.get("usage")),
    })
}

fn parse_tool(kind: &str, object: &Map<String, Value>) -> RpcLine {
    let (Some(call_id), Some(name)) = (
        optional_text(object, "toolCallId"),
        optional_text(object, "toolName"),
    ) else {
        return RpcLine::Invalid(format!("a {kind} without toolCallId or toolName"));
    };
    if kind == "tool_execution_start" {
        let command = object
            .get("args")
            .and_then(|a| a.get("command"))
            .and_then(Value::as_str)
            .map(str::to_string);
        return RpcLine::Event(PiEvent::ToolStart {
            call_id,
            name,
            command,
        });
    }
    let output = visible_text(object.get("result").and_then(|r| r.get("content")));
    RpcLine::Event(PiEvent::ToolEnd {
        call_id,
        name,
        is_error: object.get("isError").and_then(Value::as_bool) == Some(true),
        output,
    })
}

/// The text parts of a message content: a plain string, or an array whose `text` parts
/// are joined with newlines. Thinking, tool calls and images are not visible text.
pub fn visible_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The session facts in a `get_state` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PiState {
    /// pi's session id.
    pub session_id: Option<String>,
    /// The session's display name, if set.
    pub session_name: Option<String>,
    /// pi is working on a run.
    pub streaming: bool,
    /// The model in use, as `provider/id`.
    pub model: Option<String>,
    /// The thinking level in use.
    pub thinking_level: Option<String>,
}

/// A model object of pi's (`get_state`'s `model`, `set_model`'s answer) as `provider/id`.
pub fn model_name(model: Option<&Value>) -> Option<String> {
    let model = model?;
    let provider = model.get("provider").and_then(Value::as_str)?;
    let id = model.get("id").and_then(Value::as_str)?;
    Some(format!("{provider}/{id}"))
}

/// The models in a `get_available_models` answer, as (provider, id), in pi's order.
pub fn parse_models(data: Option<&Value>) -> Vec<(String, String)> {
    data.and_then(|d| d.get("models"))
        .and_then(Value::as_array)
        .map(|models| {
            models
                .iter()
                .filter_map(|m| {
                    Some((
                        m.get("provider")?.as_str()?.to_string(),
                        m.get("id")?.as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The figures of a `get_session_stats` answer: the session's tokens and cost, and the
/// context used of the window (each none when pi did not know it, as right after a
/// compaction).
pub fn parse_stats(data: Option<&Value>) -> (Usage, Option<u64>, Option<u64>) {
    let mut usage = Usage::from_pi(data.and_then(|d| d.get("tokens"))).unwrap_or_default();
    // The stats give the cost beside `tokens`, as a plain number.
    usage.cost_micros = cost_micros(data.and_then(|d| d.get("cost")));
    let context = data.and_then(|d| d.get("contextUsage"));
    let figure = |key: &str| {
        context
            .and_then(|c| c.get(key))
            .and_then(Value::as_f64)
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| n as u64)
    };
    (usage, figure("tokens"), figure("contextWindow"))
}

/// Reads the `data` of a `get_state` response; missing fields stay empty.
pub fn parse_state(data: Option<&Value>) -> PiState {
    let field = |key| {
        data.and_then(|d| d.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    PiState {
        session_id: field("sessionId"),
        session_name: field("sessionName"),
        streaming: data
            .and_then(|d| d.get("isStreaming"))
            .and_then(Value::as_bool)
            == Some(true),
        model: model_name(data.and_then(|d| d.get("model"))),
        thinking_level: field("thinkingLevel"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn json(line: &str) -> Value {
        serde_json::from_str(line.trim_end()).expect("encoded line is JSON")
    }

    #[test]
    fn a_prompt_queues_while_busy_and_carries_images() {
        let line = encode(&RpcCommand::Prompt {
            id: "p1".into(),
            message: "look".into(),
            images: vec![RpcImage::new("image/png", b"\x89PNG")],
            streaming_behavior: Some(StreamingBehavior::FollowUp),
        });
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        assert_eq!(
            json(&line),
            serde_json::json!({"type":"prompt","id":"p1","message":"look",
                "images":[{"type":"image","data":"iVBORw==","mimeType":"image/png"}],
                "streamingBehavior":"followUp"})
        );
    }

    #[test]
    fn a_plain_prompt_has_no_optional_fields() {
        let line = encode(&RpcCommand::Prompt {
            id: "p2".into(),
            message: "a\nb\u{2028}c".into(),
            images: vec![],
            streaming_behavior: None,
        });
        // The newline inside the text is escaped: one command, one line.
        assert_eq!(line.matches('\n').count(), 1);
        assert_eq!(
            json(&line),
            serde_json::json!({"type":"prompt","id":"p2","message":"a\nb\u{2028}c"})
        );
    }

    #[test]
    fn control_commands_encode_as_pi_documents_them() {
        assert_eq!(
            json(&encode(&RpcCommand::Abort { id: "a".into() })),
            serde_json::json!({"type":"abort","id":"a"})
        );
        assert_eq!(
            json(&encode(&RpcCommand::GetState { id: "s".into() })),
            serde_json::json!({"type":"get_state","id":"s"})
        );
        assert_eq!(
            json(&encode(&RpcCommand::UiResponse {
                id: "u".into(),
                value: Some("v".into()),
                confirmed: None,
                cancelled: false
            })),
            serde_json::json!({"type":"extension_ui_response","id":"u","value":"v"})
        );
        assert_eq!(
            json(&encode(&RpcCommand::UiResponse {
                id: "u".into(),
                value: None,
                confirmed: None,
                cancelled: true
            })),
            serde_json::json!({"type":"extension_ui_response","id":"u","cancelled":true})
        );
    }

    #[test]
    fn responses_echo_their_id_and_errors() {
        let ok = parse_line(r#"{"id":"p1","type":"response","command":"prompt","success":true}"#);
        assert_eq!(
            ok,
            RpcLine::Response(RpcResponse {
                id: Some("p1".into()),
                command: "prompt".into(),
                success: true,
                error: None,
                data: None
            })
        );
        let busy = parse_line(
            r#"{"type":"response","command":"prompt","success":false,"error":"Agent is already processing."}"#,
        );
        let RpcLine::Response(busy) = busy else {
            panic!("a response: {busy:?}")
        };
        assert!(!busy.success);
        assert_eq!(busy.error.as_deref(), Some("Agent is already processing."));
    }

    #[test]
    fn a_tool_run_as_captured_from_pi() {
        // Lines from a real pi 0.73.1 run.
        let start = parse_line(
            r#"{"type":"tool_execution_start","toolCallId":"call_fake_1","toolName":"bash","args":{"command":"echo hi"}}"#,
        );
        assert_eq!(
            start,
            RpcLine::Event(PiEvent::ToolStart {
                call_id: "call_fake_1".into(),
                name: "bash".into(),
                command: Some("echo hi".into())
            })
        );
        let end = parse_line(
            r#"{"type":"tool_execution_end","toolCallId":"call_fake_1","toolName":"bash","result":{"content":[{"type":"text","text":"hi\n"}]},"isError":false}"#,
        );
        assert_eq!(
            end,
            RpcLine::Event(PiEvent::ToolEnd {
                call_id: "call_fake_1".into(),
                name: "bash".into(),
                is_error: false,
                output: "hi\n".into()
            })
        );
        let blocked = parse_line(
            r#"{"type":"tool_execution_end","toolCallId":"c2","toolName":"bash","result":{"content":[{"type":"text","text":"blocked"}]},"isError":true}"#,
        );
        assert!(matches!(
            blocked,
            RpcLine::Event(PiEvent::ToolEnd { is_error: true, .. })
        ));
    }

    #[test]
    fn assistant_text_leaves_out_tool_calls_and_thinking() {
        let line = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"one"},{"type":"toolCall","id":"c","name":"bash","arguments":{}},{"type":"text","text":"two"}],"stopReason":"stop"}}"#;
        assert_eq!(
            parse_line(line),
            RpcLine::Event(PiEvent::MessageEnd {
                role: "assistant".into(),
                text: "one\ntwo".into(),
                stop_reason: Some("stop".into()),
                error_message: None,
                usage: None,
            })
        );
        let failed = r#"{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"Connection error."}}"#;
        assert!(matches!(
            parse_line(failed),
            RpcLine::Event(PiEvent::MessageEnd { error_message: Some(ref m), .. }) if m == "Connection error."
        ));
        let user = r#"{"type":"message_start","message":{"role":"user","content":"plain string"}}"#;
        assert_eq!(
            parse_line(user),
            RpcLine::Event(PiEvent::MessageStart {
                role: "user".into(),
                text: "plain string".into()
            })
        );
    }

    #[test]
    fn extension_requests_are_told_apart() {
        let dialog = parse_line(
            r#"{"type":"extension_ui_request","id":"u1","method":"input","title":"t","placeholder":"{}","timeout":5000}"#,
        );
        assert_eq!(
            dialog,
            RpcLine::Ui(UiRequest::Dialog {
                id: "u1".into(),
                method: "input".into(),
                title: "t".into(),
                body: "{}".into(),
                options: Vec::new(),
                timeout_ms: Some(5000),
            })
        );
        let select = parse_line(
            r#"{"type":"extension_ui_request","id":"u5","method":"select","title":"Where?","options":["eu","us",3]}"#,
        );
        assert_eq!(
            select,
            RpcLine::Ui(UiRequest::Dialog {
                id: "u5".into(),
                method: "select".into(),
                title: "Where?".into(),
                body: String::new(),
                options: vec!["eu".into(), "us".into()],
                timeout_ms: None,
            })
        );
        let editor = parse_line(
            r#"{"type":"extension_ui_request","id":"u6","method":"editor","title":"Edit","prefill":"line 1"}"#,
        );
        assert!(
            matches!(editor, RpcLine::Ui(UiRequest::Dialog { ref body, .. }) if body == "line 1")
        );
        let confirm = parse_line(
            r#"{"type":"extension_ui_request","id":"u2","method":"confirm","title":"Probe?","message":"Send?"}"#,
        );
        assert!(
            matches!(confirm, RpcLine::Ui(UiRequest::Dialog { ref body, .. }) if body == "Send?")
        );
        let notify = parse_line(
            r#"{"type":"extension_ui_request","id":"u3","method":"notify","message":"hi","notifyType":"warning"}"#,
        );
        assert_eq!(
            notify,
            RpcLine::Ui(UiRequest::Notify {
                level: "warning".into(),
                message: "hi".into()
            })
        );
        let status = parse_line(
            r#"{"type":"extension_ui_request","id":"u4","method":"setStatus","statusKey":"k"}"#,
        );
        assert_eq!(
            status,
            RpcLine::Ui(UiRequest::Status {
                key: "k".into(),
                text: None
            })
        );
        assert!(matches!(
            parse_line(r#"{"type":"extension_ui_request","method":"confirm","title":"x"}"#),
            RpcLine::Invalid(_)
        ));
        assert_eq!(
            parse_line(
                r#"{"type":"extension_ui_request","id":"u7","method":"setWidget","widgetKey":"w","widgetLines":["a","b"]}"#
            ),
            RpcLine::Ui(UiRequest::Widget {
                key: "w".into(),
                lines: Some(vec!["a".into(), "b".into()])
            })
        );
        assert_eq!(
            parse_line(
                r#"{"type":"extension_ui_request","id":"u8","method":"setWidget","widgetKey":"w"}"#
            ),
            RpcLine::Ui(UiRequest::Widget {
                key: "w".into(),
                lines: None
            })
        );
    }

    #[test]
    fn streaming_noise_is_ignored_and_garbage_is_invalid() {
        assert_eq!(
            parse_line(
                r#"{"type":"message_update","assistantMessageEvent":{"type":"text_delta"}}"#
            ),
            RpcLine::Ignored("message_update".into())
        );
        assert_eq!(
            parse_line("{\"type\":\"agent_end\",\"messages\":[]}\r"),
            RpcLine::Event(PiEvent::AgentEnd)
        );
        for bad in [
            "",
            "not json",
            "[1,2]",
            "{}",
            r#"{"type":3}"#,
            r#"{"type":"response"}"#,
        ] {
            assert!(
                matches!(parse_line(bad), RpcLine::Invalid(_)),
                "{bad:?} should be invalid"
            );
        }
        assert!(matches!(
            parse_line(r#"{"type":"tool_execution_start"}"#),
            RpcLine::Invalid(_)
        ));
        assert!(matches!(
            parse_line(r#"{"type":"message_end","message":"…"}"#),
            RpcLine::Invalid(_)
        ));
    }

    #[test]
    fn state_names_the_session() {
        let data = serde_json::json!({"sessionId":"abc","sessionName":"work","isStreaming":true});
        assert_eq!(
            parse_state(Some(&data)),
            PiState {
                session_id: Some("abc".into()),
                session_name: Some("work".into()),
                streaming: true,
                model: None,
                thinking_level: None,
            }
        );
        assert_eq!(parse_state(None), PiState::default());
        let data = serde_json::json!({"model":{"provider":"fake","id":"m2","name":"M"},"thinkingLevel":"high"});
        let state = parse_state(Some(&data));
        assert_eq!(state.model.as_deref(), Some("fake/m2"));
        assert_eq!(state.thinking_level.as_deref(), Some("high"));
    }

    #[test]
    fn a_streamed_message_reads_as_its_text_so_far() {
        let line = r#"{"type":"message_update","message":{"role":"assistant","content":[{"type":"text","text":"Hello wor"}]},"assistantMessageEvent":{"type":"text_delta","delta":"wor"}}"#;
        assert_eq!(
            parse_line(line),
            RpcLine::Event(PiEvent::MessageUpdate {
                role: "assistant".into(),
                text: "Hello wor".into(),
            })
        );
    }

    #[test]
    fn session_commands_are_pis_rpc_commands() {
        let rows = [
            (
                RpcCommand::NewSession { id: "n".into() },
                serde_json::json!({"type":"new_session","id":"n"}),
            ),
            (
                RpcCommand::Compact {
                    id: "c".into(),
                    custom_instructions: None,
                },
                serde_json::json!({"type":"compact","id":"c"}),
            ),
            (
                RpcCommand::Compact {
                    id: "c".into(),
                    custom_instructions: Some("keep the API".into()),
                },
                serde_json::json!({"type":"compact","id":"c","customInstructions":"keep the API"}),
            ),
            (
                RpcCommand::SetModel {
                    id: "m".into(),
                    provider: "fake".into(),
                    model_id: "m2".into(),
                },
                serde_json::json!({"type":"set_model","id":"m","provider":"fake","modelId":"m2"}),
            ),
            (
                RpcCommand::GetAvailableModels { id: "a".into() },
                serde_json::json!({"type":"get_available_models","id":"a"}),
            ),
            (
                RpcCommand::SetThinkingLevel {
                    id: "t".into(),
                    level: "high".into(),
                },
                serde_json::json!({"type":"set_thinking_level","id":"t","level":"high"}),
            ),
            (
                RpcCommand::GetSessionStats { id: "s".into() },
                serde_json::json!({"type":"get_session_stats","id":"s"}),
            ),
        ];
        for (command, expected) in rows {
            assert_eq!(json(&encode(&command)), expected);
        }
    }

    #[test]
    fn usage_is_read_from_messages_and_stats() {
        let line = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"stopReason":"stop","usage":{"input":10,"output":5,"cacheRead":2,"cacheWrite":0,"totalTokens":17,"cost":{"input":0.00001,"output":0.0000125,"total":0.0000225}}}}"#;
        let RpcLine::Event(PiEvent::MessageEnd {
            usage: Some(usage), ..
        }) = parse_line(line)
        else {
            panic!("usage read: {:?}", parse_line(line));
        };
        assert_eq!(
            usage,
            Usage {
                input: 10,
                output: 5,
                cache_read: 2,
                cache_write: 0,
                cost_micros: Some(23)
            }
        );
        assert_eq!(usage.plus(usage).input, 20);
        assert_eq!(usage.plus(usage).cost_micros, Some(46));
        // Nonsense counts are zero, not a wrapped or invented figure.
        let odd = serde_json::json!({"input": -3, "output": "many", "cost": {"total": -1}});
        assert_eq!(Usage::from_pi(Some(&odd)), Some(Usage::default()));
        let stats = serde_json::json!({"tokens":{"input":50000,"output":10000,"cacheRead":40000,"cacheWrite":5000,"total":105000},
            "cost":0.45,"contextUsage":{"tokens":60000,"contextWindow":200000,"percent":30}});
        let (session, used, window) = parse_stats(Some(&stats));
        assert_eq!(session.input, 50000);
        assert_eq!(session.cache_write, 5000);
        assert_eq!(session.cost_micros, Some(450_000));
        assert_eq!((used, window), (Some(60000), Some(200000)));
        // Right after a compaction pi does not know the context: none, not zero.
        let fresh =
            serde_json::json!({"tokens":{},"contextUsage":{"tokens":null,"contextWindow":32000}});
        assert_eq!(parse_stats(Some(&fresh)).1, None);
        assert_eq!(parse_stats(Some(&fresh)).0.cost_micros, None);
    }

    #[test]
    fn available_models_are_provider_and_id() {
        let data = serde_json::json!({"models":[{"provider":"fake","id":"a"},{"id":"no-provider"},{"provider":"x","id":"b"}]});
        assert_eq!(
            parse_models(Some(&data)),
            vec![
                ("fake".to_string(), "a".to_string()),
                ("x".to_string(), "b".to_string())
            ]
        );
        assert!(parse_models(None).is_empty());
    }

    proptest! {
        #[test]
        fn any_line_parses_without_panicking(line in "\\PC*") {
            let _ = parse_line(&line);
        }

        #[test]
        fn any_json_shape_parses_without_panicking(
            kind in prop::sample::select(vec!["response", "extension_ui_request", "message_start",
                "message_end", "tool_execution_start", "tool_execution_end", "auto_retry_end",
                "extension_error", "agent_end", "other"]),
            field in prop::sample::select(vec!["id", "success", "method", "message", "content",
                "toolCallId", "toolName", "args", "result", "isError", "role", "title"]),
            value in prop::sample::select(vec!["1", "true", "null", "\"s\"", "[]", "{}",
                "[{\"type\":\"text\"}]", "{\"content\":7}"]),
        ) {
            let line = format!("{{\"type\":\"{kind}\",\"{field}\":{value}}}");
            let _ = parse_line(&line);
        }
    }
}
