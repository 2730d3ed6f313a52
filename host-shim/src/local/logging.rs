//! Where the guest's structured log lines go. Lines carry an event name and scalar
//! fields chosen by the guest; message bodies and secrets never reach them (I2, I36).

use std::io::Write as _;
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

/// A destination for log lines.
pub trait LogSink: Send + Sync {
    /// Writes one line.
    fn write(&self, session: &str, line: LogLine);
}

/// JSON lines on stderr: warnings and errors always, everything with
/// `PI_BOT_CONNECT_DEBUG=1` (or `true`).
#[derive(Debug)]
pub struct StderrLog {
    debug: bool,
}

impl StderrLog {
    /// A sink that prints info lines only when `debug` is set.
    pub fn new(debug: bool) -> Self {
        StderrLog { debug }
    }
}

/// Lower-case name of a level.
pub fn level_name(level: Level) -> &'static str {
    match level {
        Level::Info => "info",
        Level::Warning => "warning",
        Level::Error => "error",
    }
}

impl LogSink for StderrLog {
    fn write(&self, session: &str, line: LogLine) {
        if !self.debug && line.level == Level::Info {
            return;
        }
        // A closed stderr must not take the session down with it.
        let _ = writeln!(std::io::stderr(), "{}", render(session, line));
    }
}

/// One log line as the JSON object written to stderr. JSON escapes control characters,
/// but not bidi overrides, zero-width characters or U+2028: a field quoting a platform id
/// (a robo_claw room, a sender) could still reorder or hide what a person reads, so
/// every value loses them first (see [`transport_core::printable::is_invisible`]).
pub fn render(session: &str, line: LogLine) -> String {
    let clean = |text: &str| strip_invisible_keep_lines(text).into_owned();
    let mut object = serde_json::Map::new();
    object.insert("level".into(), level_name(line.level).into());
    object.insert("session".into(), clean(session).into());
    object.insert("event".into(), clean(&line.event).into());
    for (key, value) in line.fields {
        object.insert(clean(&key), clean(&value).into());
    }
    serde_json::Value::Object(object).to_string()
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

    #[test]
    fn a_log_line_carries_no_bidi_override_zero_width_or_separator() {
        let line = LogLine::new(
            Level::Warning,
            "transport alert",
            &[(
                "room",
                "lab\u{202E}\u{200B}\u{2028}\u{1b}]52;c;eA==\u{7}".to_owned(),
            )],
        );
        let rendered = render("se\u{2066}ssion", line);
        for hidden in [
            '\u{202E}', '\u{200B}', '\u{2028}', '\u{2066}', '\u{1b}', '\u{7}',
        ] {
            assert!(!rendered.contains(hidden), "{hidden:?} in {rendered}");
        }
        let value: serde_json::Value = serde_json::from_str(&rendered).expect("JSON");
        assert_eq!(value["room"], "lab]52;c;eA==");
        assert_eq!(value["session"], "session");
    }
}
