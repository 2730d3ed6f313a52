//! Doc comments stay clean for `cargo doc`.
//!
//! A doc line that starts with three backticks opens a code block, which rustdoc compiles or
//! highlights as Rust. Prose that only mentions a fence (`core/todo.rs` wrote "a ~~~ line
//! inside a ``` block") became a broken "Rust" block and a rustdoc warning. This reads the
//! sources and requires every fence in a doc comment to name a language.

use std::path::Path;

/// Languages a doc code block may name.
const LANGUAGES: [&str; 6] = ["text", "rust", "json", "wit", "markdown", "toml"];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable source folder") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The info string when `doc` (a doc comment's text) opens or closes a fence.
fn fence(doc: &str) -> Option<&str> {
    let line = doc.strip_prefix(' ').unwrap_or(doc);
    let indent = line.len() - line.trim_start_matches(' ').len();
    let line = line.trim_start_matches(' ');
    if indent > 3 {
        return None;
    }
    for marker in ['`', '~'] {
        let run = line.len() - line.trim_start_matches(marker).len();
        if run >= 3 {
            let info = line[run..].trim();
            // CommonMark: a backtick fence's info string holds no backtick, so
            // "```` ``` ```` block" is inline code, not a fence.
            if marker == '`' && info.contains('`') {
                return None;
            }
            return Some(info);
        }
    }
    None
}

#[test]
fn every_doc_code_block_names_its_language() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut problems = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("a source file");
        let mut open = false;
        for (n, line) in source.lines().enumerate() {
            let trimmed = line.trim_start();
            let Some(doc) = trimmed
                .strip_prefix("///")
                .or_else(|| trimmed.strip_prefix("//!"))
            else {
                continue;
            };
            let Some(info) = fence(doc) else { continue };
            if open {
                open = false;
                continue;
            }
            open = true;
            if !LANGUAGES.contains(&info) {
                problems.push(format!("{}:{}: {line}", file.display(), n + 1));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "doc code blocks without a language (rustdoc treats them as Rust):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_fence_reader_follows_commonmark() {
    assert_eq!(fence(" ```text"), Some("text"));
    assert_eq!(
        fence(" ``` block does not flip"),
        Some("block does not flip")
    );
    assert_eq!(fence(" ```` ``` ```` block"), None);
    assert_eq!(fence(" ~~~"), Some(""));
    assert_eq!(fence("     ```"), None);
    assert_eq!(fence(" a ``` in prose"), None);
}
