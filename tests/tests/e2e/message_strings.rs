//! No message the product writes holds a run of spaces from its source's indentation.
//!
//! A string literal continued on the next source line without its `\` keeps the line break
//! and the next line's indentation: four error messages read "(or 0          for never)"
//! that way before anyone saw them (2026-12-07). This reads the product's sources and
//! refuses a string literal holding a line break that no `\` continues, except SQL, whose
//! statements are written over several lines on purpose.

use std::path::Path;

use crate::doc_references::{repository, sources};

/// What an SQL statement starts with: the only literals written over several lines.
const SQL: [&str; 7] = [
    "BEGIN", "CREATE", "SELECT", "INSERT", "UPDATE", "DELETE", "PRAGMA",
];

/// The product's code: what a person reads messages from (tests and fuzz inputs may hold
/// any text).
fn product(path: &Path) -> bool {
    let relative = path.strip_prefix(repository()).unwrap_or(path);
    let mut parts = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy());
    match (parts.next().as_deref(), parts.next().as_deref()) {
        (Some("guest" | "host-shim"), Some("src")) => true,
        (Some("transports"), Some(_)) => parts.next().as_deref() == Some("src"),
        _ => false,
    }
}

/// Each ordinary string literal of `source` that holds a line break no `\` continues, or that
/// is an error's message (`#[error("…")]`, read with its continuations joined) holding a
/// run of spaces: its first line (1-based) and its text.
fn broken_literals(source: &str) -> Vec<(usize, &str)> {
    let bytes = source.as_bytes();
    let ident =
        |at: usize| at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                at = source[at..].find('\n').map_or(bytes.len(), |i| at + i);
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                at = source[at..].find("*/").map_or(bytes.len(), |i| at + i + 2);
            }
            // A raw string (`r"…"`, `r#"…"#`, `br"…"`) holds what it holds, breaks included.
            b'r' if !ident(at) || (at > 0 && bytes[at - 1] == b'b' && !ident(at - 1)) => {
                let hashes = bytes[at + 1..].iter().take_while(|b| **b == b'#').count();
                if bytes.get(at + 1 + hashes) == Some(&b'"') {
                    let close = format!("\"{}", "#".repeat(hashes));
                    let body = at + 2 + hashes;
                    at = source[body..]
                        .find(&close)
                        .map_or(bytes.len(), |i| body + i + close.len());
                } else {
                    at += 1;
                }
            }
            // A character literal, not a lifetime: `'"'` must not open a string.
            b'\'' => {
                let rest = &source[at + 1..];
                let mut chars = rest.char_indices();
                at += match chars.next() {
                    // The escaped character comes first: `'\''` closes at its second quote.
                    Some((_, '\\')) => rest
                        .get(2..)
                        .and_then(|r| r.find('\''))
                        .map_or(1, |i| i + 4),
                    Some((_, c)) if rest[c.len_utf8()..].starts_with('\'') => c.len_utf8() + 2,
                    _ => 1,
                };
            }
            b'"' => {
                let start = at;
                let mut broken = false;
                at += 1;
                while at < bytes.len() && bytes[at] != b'"' {
                    match bytes[at] {
                        // An escape, a continuation (`\` and its line break) among them.
                        b'\\' => at += 2,
                        b'\n' => {
                            broken = true;
                            at += 1;
                        }
                        _ => at += 1,
                    }
                }
                let text = &source[start + 1..at.min(bytes.len())];
                let sql = SQL.iter().any(|word| text.trim_start().starts_with(word));
                // The form the broken messages of 2026-12-07 had: the continuation's `\` lost
                // and the break with it, the next line's indentation left in the sentence.
                let spaced =
                    source[..start].trim_end().ends_with("#[error(") && joined(text).contains("  ");
                if (broken && !sql) || spaced {
                    found.push((source[..start].matches('\n').count() + 1, text));
                }
                at += 1;
            }
            _ => at += 1,
        }
    }
    found
}

/// A literal's text as it reads: each continuation (`\`, the line break and the next line's
/// leading blanks) gone.
fn joined(text: &str) -> String {
    text.split("\\\n")
        .enumerate()
        .map(|(i, part)| if i == 0 { part } else { part.trim_start() })
        .collect()
}

#[test]
fn no_product_message_holds_a_line_break_or_indentation_its_source_did_not_continue() {
    let mut problems = Vec::new();
    let mut read = 0;
    for path in sources().into_iter().filter(|p| product(p)) {
        let source = std::fs::read_to_string(&path).expect("a source file");
        read += 1;
        for (line, text) in broken_literals(&source) {
            problems.push(format!("{}:{line}: {text:?}", path.display()));
        }
    }
    // The walk found the product's sources (hundreds of files), not an empty folder.
    assert!(read > 100, "only {read} product sources found");
    assert!(
        problems.is_empty(),
        "messages that keep a line break or the next line's indentation (end the line with \
         `\\` and no blank after it, or use a raw string if the break is meant):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_reader_tells_a_broken_literal_from_continued_raw_sql_and_char_ones_and_spaced_errors() {
    let source = "let a = \"one \\\n    two\";\n\
                  let b = r#\"raw\n\"#;\n\
                  let c = '\"';\n\
                  let q = ['\\'', '\\\\', '\\u{200B}'];\n\
                  fn f<'a>(x: &'a str) {}\n\
                  // \"a comment\n\
                  let d = \"CREATE TABLE t (\n  x TEXT\n)\";\n\
                  let e = \"(or 0\n          for never)\";\n\
                  #[error(\"at least 1h, \\\n     got {0}\")]\n\
                  #[error(\"at least 1h (or 0          for never)\")]\n";
    assert_eq!(
        broken_literals(source),
        [
            (12, "(or 0\n          for never)"),
            (16, "at least 1h (or 0          for never)")
        ]
    );
}
