//! Where the guest's structured log lines go. Lines carry an event name and scalar
//! fields chosen by the guest; message bodies and secrets never reach them (I2, I36).

use std::sync::Mutex;

use crate::wit::types::Level;
use transport_core::printable::strip_invisible_keep_lines;

/// One structured log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Severity.
    pub level: Level,
    /// Event name.
    pub event: String,
    /// Scalar fields.
    pub fields: Vec<(String, String)>,
}

impl LogLine {
    /// A line with these fields (host code's lines: ids, names and error texts, never a
    /// message body).
    pub fn new(level: Level, event: &str, fields: &[(&str, String)]) -> LogLine {
        LogLine {
            level,
            event: event.to_owned(),
            fields: fields
                .iter()
                .map(|(key, value)| ((*key).to_owned(), value.clone()))
                .collect(),
        }
    }
}

/// What one call into a session's component cost: the fuel it burnt and how large the
/// instance's memory was when it returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallCost {
    /// Fuel the call consumed (wasmtime's unit, about one per instruction).
    pub fuel: u64,
    /// The instance's linear memory after the call, in bytes.
    pub memory_bytes: u64,
}

/// A destination for log lines.
pub trait LogSink: Send + Sync {
    /// Writes one line.
    fn write(&self, session: &str, line: LogLine);

    /// Takes note of what a call into a session's component cost. Only a sink that measures
    /// (the operator's metrics) keeps it: a log line per call would bury every other line.
    fn call_cost(&self, _session: &str, _cost: CallCost) {}
}

/// Lower-case name of a level.
pub fn level_name(level: Level) -> &'static str {
    match level {
        Level::Info => "info",
        Level::Warning => "warning",
        Level::Error => "error",
    }
}

/// Where log lines go in a real process: `tracing` events (the subscriber `log_output`
/// installs prints them as human lines or JSON), each inside a span naming where it came
/// from (`session{key=…}`, `node{name=…}` for a cluster node's own lines, and
/// `transport{id=…}` when the line is about one). Every value passes through the bridge's
/// redaction engine and loses invisible characters first: a field quoting a platform error
/// could hold a token, and a bidi override could reorder what a person reads.
#[derive(Debug, Default)]
pub struct TracingLog {
    /// The cluster node this process is, for lines filed under the cluster's scope.
    node: Option<String>,
}

/// The target of every bot-connect event, for `RUST_LOG` (`RUST_LOG=bot_connect=info`).
pub const TARGET: &str = "bot_connect";

/// The session name cluster nodes file their own lines under (`cluster::LOG_SCOPE`).
const NODE_SCOPE: &str = "cluster";

/// Field names written as fields of their own; any other key goes into `other`. Static
/// because `tracing` fields are named at compile time.
const KNOWN: &[&str] = &[
    "error",
    "identity",
    "id",
    "tool",
    "kind",
    "command",
    "reason",
    "why",
    "text",
    "path",
    "subject",
    "consumer",
    "count",
    "by",
    "approved",
    "conversation",
    "session",
];

impl TracingLog {
    /// A sink for a process that is not a cluster node.
    pub fn new() -> TracingLog {
        TracingLog { node: None }
    }

    /// A sink for the cluster node `name` (its holder description: host and process id).
    pub fn for_node(name: &str) -> TracingLog {
        TracingLog {
            node: Some(name.to_owned()),
        }
    }
}

/// `text` as it may appear in a log: secrets replaced, invisible characters removed.
pub fn clean(text: &str) -> String {
    let visible = strip_invisible_keep_lines(text);
    guest::core::redact::redact(&visible).text
}

/// Writes one event at `$level` with the line's known fields.
macro_rules! emit {
    ($level:expr, $get:ident, $other:ident, $event:ident) => {
        tracing::event!(
            target: TARGET,
            $level,
            error = $get("error"),
            identity = $get("identity"),
            id = $get("id"),
            tool = $get("tool"),
            kind = $get("kind"),
            command = $get("command"),
            reason = $get("reason"),
            why = $get("why"),
            text = $get("text"),
            path = $get("path"),
            subject = $get("subject"),
            consumer = $get("consumer"),
            count = $get("count"),
            by = $get("by"),
            approved = $get("approved"),
            conversation = $get("conversation"),
            session = $get("session"),
            other = $other.map(tracing::field::display),
            "{}",
            $event
        )
    };
}

impl LogSink for TracingLog {
    fn write(&self, session: &str, line: LogLine) {
        let fields: Vec<(String, String)> = line
            .fields
            .iter()
            .map(|(key, value)| (clean(key), clean(value)))
            .collect();
        let get = |name: &str| {
            fields
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.as_str())
        };
        let rest: Vec<String> = fields
            .iter()
            .filter(|(key, _)| key != "transport" && !KNOWN.contains(&key.as_str()))
            .map(|(key, value)| format!("{key}={value:?}"))
            .collect();
        let other = (!rest.is_empty()).then(|| rest.join(" "));
        let other = other.as_deref();
        let event = clean(&line.event);
        let event = event.as_str();
        let scope = match (&self.node, session) {
            (Some(node), NODE_SCOPE) => tracing::error_span!("node", name = %clean(node)),
            _ => tracing::error_span!("session", key = %clean(session)),
        };
        let _scope = scope.enter();
        // Spans at error level: a span below the filter's level would vanish from the
        // warnings it should name.
        let transport = get("transport").map(|id| tracing::error_span!("transport", id = %id));
        let _transport = transport.as_ref().map(tracing::Span::enter);
        match line.level {
            Level::Info => emit!(tracing::Level::INFO, get, other, event),
            Level::Warning => emit!(tracing::Level::WARN, get, other, event),
            Level::Error => emit!(tracing::Level::ERROR, get, other, event),
        }
    }
}

/// Keeps lines in memory (tests assert on them).
#[derive(Debug, Default)]
pub struct MemoryLog {
    lines: Mutex<Vec<(String, LogLine)>>,
}

impl MemoryLog {
    /// Every line written so far, with its session key.
    pub fn lines(&self) -> Vec<(String, LogLine)> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Every line so far, forgotten here (see `RecordingUi::take_notes`).
    pub fn take(&self) -> Vec<(String, LogLine)> {
        self.lines
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default()
    }
}

impl LogSink for MemoryLog {
    fn write(&self, session: &str, line: LogLine) {
        if let Ok(mut lines) = self.lines.lock() {
            lines.push((session.to_string(), line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::log_output::{Format, capture};

    #[test]
    fn a_log_line_carries_no_bidi_override_zero_width_separator_or_token() {
        let token = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
        let output = capture(Format::Json, "info", || {
            TracingLog::new().write(
                "se\u{2066}ssion",
                LogLine::new(
                    Level::Warning,
                    "transport alert",
                    &[
                        ("transport", "robo_claw".to_owned()),
                        (
                            "text",
                            "lab\u{202E}\u{200B}\u{2028}\u{1b}]52;c;eA==\u{7}".to_owned(),
                        ),
                        ("error", format!("401 for Authorization: Bearer {token}")),
                    ],
                ),
            );
        });
        for hidden in [
            '\u{202E}', '\u{200B}', '\u{2028}', '\u{2066}', '\u{1b}', '\u{7}',
        ] {
            assert!(!output.contains(hidden), "{hidden:?} in {output}");
        }
        assert!(!output.contains(token), "{output}");
        let value: serde_json::Value = serde_json::from_str(output.trim()).expect("one JSON line");
        assert_eq!(value["fields"]["message"], "transport alert");
        assert_eq!(value["fields"]["text"], "lab]52;c;eA==");
        assert_eq!(value["level"], "WARN");
        let spans: Vec<String> = value["spans"]
            .as_array()
            .expect("spans")
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(spans.len(), 2, "{output}");
        assert!(spans[0].contains("\"key\":\"session\""), "{output}");
        assert!(spans[1].contains("\"id\":\"robo_claw\""), "{output}");
    }

    #[test]
    fn a_cluster_line_names_its_node_and_unknown_fields_are_kept() {
        let output = capture(Format::Text, "info", || {
            TracingLog::for_node("host-a:42").write(
                "cluster",
                LogLine::new(Level::Error, "bot lock lost", &[("limit", "3".to_owned())]),
            );
        });
        assert!(output.contains("node{name=host-a:42}"), "{output}");
        assert!(output.contains("other=limit=\"3\""), "{output}");
        assert!(output.contains("bot lock lost"), "{output}");
    }

    #[test]
    fn info_lines_are_filtered_out_unless_asked_for() {
        let line = || LogLine::new(Level::Info, "session attached", &[]);
        let quiet = capture(Format::Text, "warn", || {
            TracingLog::new().write("s", line())
        });
        assert_eq!(quiet, "");
        let loud = capture(Format::Text, "bot_connect=info", || {
            TracingLog::new().write("s", line())
        });
        assert!(loud.contains("session attached"), "{loud}");
    }
}
