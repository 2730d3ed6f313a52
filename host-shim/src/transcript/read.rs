//! Reading a transcript back: every good line, and a warning naming each bad one (I42: a
//! bad line is skipped, never a reason to stop).

use crate::transcript::line::{FORMAT_VERSION, Line};

/// A transcript as read.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// Good lines with their line numbers (from 1).
    pub lines: Vec<(usize, Line)>,
    /// One message per skipped line.
    pub warnings: Vec<String>,
}

/// Parses transcript bytes. Blank lines are ignored; anything else that is not a line
/// of this format is skipped with a warning that names its line number. The warning
/// quotes no content: a hand-edited line may hold what a transcript must not.
pub fn parse(bytes: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    for (index, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let number = index + 1;
        let Ok(text) = std::str::from_utf8(raw) else {
            parsed
                .warnings
                .push(format!("line {number}: skipped: not UTF-8 text"));
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<serde_json::Value>(text) {
            Err(e) => parsed.warnings.push(format!(
                "line {number}: skipped: not JSON ({})",
                e.classify_message()
            )),
            Ok(value) => match value.get("v").and_then(serde_json::Value::as_u64) {
                Some(v) if v != u64::from(FORMAT_VERSION) => parsed.warnings.push(format!(
                    "line {number}: skipped: format version {v}, this host-shim reads {FORMAT_VERSION}"
                )),
                _ => match serde_json::from_value::<Line>(value) {
                    Ok(line) if line.dir != line.event.dir() => parsed.warnings.push(format!(
                        "line {number}: skipped: its dir does not match its kind"
                    )),
                    Ok(line) => parsed.lines.push((number, line)),
                    // serde's own message would quote the offending value.
                    Err(_) => parsed.warnings.push(format!(
                        "line {number}: skipped: not a transcript line (a field missing or \
                         of the wrong type, or an unknown kind)"
                    )),
                },
            },
        }
    }
    parsed
}

trait Classify {
    fn classify_message(&self) -> &'static str;
}

impl Classify for serde_json::Error {
    fn classify_message(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Eof => "it ends in the middle",
            serde_json::error::Category::Syntax => "a syntax error",
            serde_json::error::Category::Data => "unexpected data",
            serde_json::error::Category::Io => "unreadable",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::line::Event;

    #[test]
    fn bad_lines_are_skipped_with_their_number() {
        let good = Line::new(1, 5, Event::Tick).to_json();
        let wrong_dir = good.replace("\"dir\":\"in\"", "\"dir\":\"out\"");
        let future = good.replace("\"v\":1", "\"v\":9");
        let secret = r#"{"v":1,"seq":"ghp_notquoted","at":1,"dir":"in","kind":"tick"}"#;
        let text = format!(
            "{good}\n{{not json\n\n{{\"v\":1,\"seq\":2,\"at\":1,\"dir\":\"in\",\"kind\":\"nope\"}}\n{wrong_dir}\n{future}\n{good}\n{secret}\n"
        );
        let parsed = parse(text.as_bytes());
        let numbers: Vec<usize> = parsed.lines.iter().map(|(n, _)| *n).collect();
        assert_eq!(numbers, [1, 7]);
        assert_eq!(parsed.warnings.len(), 5, "{:?}", parsed.warnings);
        for (warning, line) in parsed.warnings.iter().zip([2, 4, 5, 6, 8]) {
            assert!(
                warning.starts_with(&format!("line {line}: skipped")),
                "{warning}"
            );
            // A warning names the line, never what it holds.
            assert!(
                !warning.contains("ghp_") && !warning.contains("nope"),
                "{warning}"
            );
        }
    }
}
