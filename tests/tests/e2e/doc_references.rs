//! Every invariant the code cites (`I1`–`I42`, `C1`–`C5`, in comments next to the rules
//! and tests that keep them) has its heading in `docs/invariants.md`, so a reader who meets
//! `(I36)` in a comment can look it up, and a new number cannot be cited before it is
//! written down.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// The `.rs` files of the workspace's own code (not build output or fuzz corpora).
fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if !matches!(
                    name.to_str(),
                    Some("target" | "corpus" | "regressions" | "node_modules" | ".git")
                ) {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for dir in ["guest", "host-shim", "transports", "tests", "fuzz"] {
        walk(&repository().join(dir), &mut out);
    }
    out
}

/// `I<n>` and `C<n>` standing alone in comment lines.
fn cited(source: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in source.lines() {
        let Some((_, comment)) = line.split_once("//") else {
            continue;
        };
        let bytes = comment.as_bytes();
        for (at, &b) in bytes.iter().enumerate() {
            if b != b'I' && b != b'C' {
                continue;
            }
            let before_ok = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
            let digits: String = comment[at + 1..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let after = comment[at + 1 + digits.len()..].chars().next();
            let after_ok = after.is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_');
            if before_ok && !digits.is_empty() && after_ok {
                found.insert(format!("{}{digits}", b as char));
            }
        }
    }
    found
}

#[test]
fn every_cited_invariant_has_its_heading() {
    let doc = std::fs::read_to_string(repository().join("docs/invariants.md"))
        .expect("docs/invariants.md is readable");
    let headings: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| h.split_whitespace().next().unwrap_or("").to_owned())
        .collect();
    let mut missing = Vec::new();
    let mut seen = BTreeSet::new();
    for path in sources() {
        let source = std::fs::read_to_string(&path).expect("a source file");
        for number in cited(&source) {
            // "C0/C1 controls" and Slack's channel ids (`C1…`) read like invariants: only
            // numbers in the invariants' ranges count, and C0 is a control-code name.
            let in_range = match number.split_at(1) {
                ("I", n) => n.parse::<u32>().is_ok_and(|n| (1..=99).contains(&n)),
                ("C", n) => n.parse::<u32>().is_ok_and(|n| (1..=9).contains(&n)),
                _ => false,
            };
            if !in_range {
                continue;
            }
            seen.insert(number.clone());
            if !headings.contains(&number) {
                missing.push(format!("{number} in {}", path.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "cited without a heading in docs/invariants.md:\n{}",
        missing.join("\n")
    );
    // The reader found the citations it is meant to check.
    assert!(
        seen.len() >= 40,
        "only {} invariants cited: {seen:?}",
        seen.len()
    );
}

#[test]
fn the_reader_takes_a_citation_only_when_it_stands_alone() {
    let found = cited("let x = 1; // keeps I36 and (C5), not I32x, NI3 or i7\n/// I4: why");
    assert_eq!(
        found,
        ["C5", "I36", "I4"].into_iter().map(String::from).collect()
    );
}
