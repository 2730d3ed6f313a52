//! Every reference in a code comment resolves inside the repository. An invariant the code
//! cites (`I1`–`I42`, `C1`–`C5`, in comments next to the rules and tests that keep them) has
//! its heading in `docs/invariants.md`, so a reader who meets `(I36)` in a comment can look it
//! up, and a new number cannot be cited before it is written down. Every other design
//! reference is a link to a heading of a page in `docs/`, written `docs/FILE.md#anchor` with
//! GitHub's anchor for the heading, and each one names a page and a heading that exist. The
//! old forms ("issue 30 §6", "architecture §6", "protocols §1.8", "reference-behaviour
//! §3.9") pointed at documents a newcomer does not have, so they are refused.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub(crate) fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// The `.rs` files of the workspace's own code (not build output or fuzz corpora).
pub(crate) fn sources() -> Vec<PathBuf> {
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

/// Folders not swept yet: their comments still cite the old documents. Empty since the
/// transports were swept with their move into `transports/core`; a folder added here is
/// exempt from the first check, so add one only while it is being swept.
const NOT_YET_SWEPT: &[&str] = &[];

/// This file: it shows the forms it refuses, to test that they are refused.
const THIS_FILE: &str = "tests/tests/e2e/doc_references.rs";

/// The code files whose comments are read: Rust, WIT, TOML and the pi extension's
/// TypeScript, in the workspace's own folders and the root manifest.
fn code_files() -> Vec<PathBuf> {
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
                    Some(
                        "target"
                            | "target-guest"
                            | "corpus"
                            | "regressions"
                            | "node_modules"
                            | ".git"
                    )
                ) {
                    walk(&path, out);
                }
            } else if path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "rs" | "wit" | "toml" | "ts"))
            {
                out.push(path);
            }
        }
    }
    let root = repository();
    let mut out = vec![root.join("Cargo.toml")];
    for dir in [
        "guest",
        "host-shim",
        "transports",
        "tests",
        "fuzz",
        "examples",
        "wit",
    ] {
        walk(&root.join(dir), &mut out);
    }
    out
}

/// The comments of one file, with their line numbers (from 1): `//`, `///` and `//!` lines,
/// a comment after code (` // `), the lines of a `/* … */` block, and `#` lines in TOML.
/// String literals are not comments, so test data such as "issue 123456" in a string is not
/// read.
fn comments(path: &Path, source: &str) -> Vec<(usize, String)> {
    let toml = path.extension().is_some_and(|e| e == "toml");
    let mut found = Vec::new();
    let mut in_block = false;
    for (n, line) in source.lines().enumerate() {
        let trimmed = line.trim_start();
        let comment = if toml {
            trimmed
                .strip_prefix('#')
                .or_else(|| line.split_once(" # ").map(|(_, c)| c))
        } else if in_block || trimmed.starts_with("/*") {
            in_block = !line.contains("*/");
            Some(trimmed)
        } else {
            trimmed
                .strip_prefix("//")
                .or_else(|| line.split_once(" // ").map(|(_, c)| c))
        };
        if let Some(comment) = comment {
            found.push((n + 1, comment.to_owned()));
        }
    }
    found
}

/// References to documents that are not in the repository: "issue N" (any case, with or
/// without `#`) and the section numbers of the old design documents.
fn retired_citations(comment: &str) -> Vec<String> {
    const RETIRED: [&str; 4] = [
        "protocols §",
        "architecture §",
        "reference-behaviour §",
        "reference §",
    ];
    let lower = comment.to_lowercase();
    let mut found: Vec<String> = RETIRED
        .iter()
        .filter(|form| lower.contains(*form))
        .map(|form| (*form).to_owned())
        .collect();
    for (at, _) in lower.match_indices("issue ") {
        let before_ok = lower[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        let rest = lower[at + "issue ".len()..].trim_start_matches('#');
        if before_ok && rest.starts_with(|c: char| c.is_ascii_digit()) {
            let number: String = rest.chars().take_while(char::is_ascii_digit).collect();
            found.push(format!("issue {number}"));
        }
    }
    found
}

/// A link to a page in `docs/` found in a comment: the file name and, when given, the anchor.
#[derive(Debug, PartialEq, Eq)]
struct DocLink {
    file: String,
    anchor: Option<String>,
}

/// The `docs/FILE.md` and `docs/FILE.md#anchor` links in a comment. A bare file name in
/// backticks (`` `docs/rpc.md` ``) names a file of another project, or a pattern, and is
/// not a link; a link with an anchor is always one.
fn doc_links(comment: &str) -> Vec<DocLink> {
    let mut links = Vec::new();
    for (at, _) in comment.match_indices("docs/") {
        let before = comment[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-')) {
            continue;
        }
        let rest = &comment[at + "docs/".len()..];
        let stem: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            .collect();
        let Some(after) = rest[stem.len()..].strip_prefix(".md") else {
            continue;
        };
        if stem.is_empty() || after.starts_with(|c: char| c.is_alphanumeric()) {
            continue;
        }
        let anchor = after.strip_prefix('#').map(|a| {
            a.chars()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '_'))
                .collect::<String>()
        });
        if anchor.is_none() && before == Some('`') {
            continue;
        }
        links.push(DocLink {
            file: format!("{stem}.md"),
            anchor,
        });
    }
    links
}

/// GitHub's anchor for a heading: lower case, every character that is not a letter, a digit,
/// a space, `-` or `_` dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown page's headings, outside code fences; a repeated heading gets
/// `-1`, `-2`, … as on GitHub.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut fence: Option<&str> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if trimmed.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        let level = line.len() - line.trim_start_matches('#').len();
        let Some(text) = line[level..].strip_prefix(' ') else {
            continue;
        };
        if !(1..=6).contains(&level) {
            continue;
        }
        let base = slug(text.trim_end_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while found.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        found.insert(anchor);
    }
    found
}

/// Every page in `docs/` with its headings' anchors.
fn docs_pages() -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let dir = repository().join("docs");
    let mut pages = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(&dir)
        .expect("docs/ is readable")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            let text = std::fs::read_to_string(entry.path()).expect("a docs page");
            pages.insert(name, anchors(&text));
        }
    }
    pages
}

/// What is wrong with one link, if anything, given the pages and their anchors.
fn broken(
    link: &DocLink,
    pages: &std::collections::BTreeMap<String, BTreeSet<String>>,
) -> Option<String> {
    let Some(headings) = pages.get(&link.file) else {
        return Some(format!("docs/{} does not exist", link.file));
    };
    match &link.anchor {
        Some(anchor) if !headings.contains(anchor) => Some(format!(
            "docs/{} has no heading whose anchor is #{anchor}",
            link.file
        )),
        _ => None,
    }
}

#[test]
fn no_comment_cites_a_document_outside_the_repository() {
    let root = repository();
    let mut found = Vec::new();
    for path in code_files() {
        let relative = path.strip_prefix(&root).unwrap_or(&path);
        if relative == Path::new(THIS_FILE)
            || NOT_YET_SWEPT.iter().any(|dir| relative.starts_with(dir))
        {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("a source file");
        for (line, comment) in comments(&path, &source) {
            for citation in retired_citations(&comment) {
                found.push(format!("{}:{line}: {citation}", relative.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "comments cite documents that are not in the repository; link the docs/ heading that \
         says it instead (e.g. docs/security.md#pairing), or say in words what found it:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_docs_link_in_a_comment_names_a_page_and_a_heading() {
    let root = repository();
    let pages = docs_pages();
    let mut wrong = Vec::new();
    let mut anchored = 0;
    for path in code_files() {
        let relative = path.strip_prefix(&root).unwrap_or(&path);
        if relative == Path::new(THIS_FILE) {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("a source file");
        for (line, comment) in comments(&path, &source) {
            for link in doc_links(&comment) {
                anchored += usize::from(link.anchor.is_some());
                if let Some(problem) = broken(&link, &pages) {
                    wrong.push(format!("{}:{line}: {problem}", relative.display()));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "links in comments that lead nowhere (the anchor is GitHub's: the heading in lower \
         case, punctuation dropped, spaces as -):\n{}",
        wrong.join("\n")
    );
    // The reader found the links it is meant to check.
    assert!(
        anchored >= 200,
        "only {anchored} docs/ links with an anchor"
    );
}

#[test]
fn a_planted_bad_reference_is_found() {
    let source = "fn f() {} // issue 30 §6 and Issue #4\n\
                  /// see docs/security.md#pairing, docs/security.md#no-such-heading,\n\
                  //! docs/nowhere.md#pairing, (docs/scaling.md) and pi's `docs/rpc.md`\n\
                  # architecture §6, reference-behaviour §3.9, protocols §1.8\n\
                  let s = \"issue 123456\";\n\
                  /* reference §4.5\n   issue 17 */";
    let comments = comments(Path::new("planted.rs"), source);
    let retired: Vec<String> = comments
        .iter()
        .flat_map(|(_, c)| retired_citations(c))
        .collect();
    assert_eq!(
        retired,
        ["issue 30", "issue 4", "reference §", "issue 17"],
        "the TOML-style line is not a comment in a .rs file, the string is not a comment"
    );
    let toml = comments_retired(
        Path::new("planted.toml"),
        "# architecture §6\nx = 1 # issue 9",
    );
    assert_eq!(toml, ["architecture §", "issue 9"]);

    let mut pages = std::collections::BTreeMap::new();
    pages.insert(
        "security.md".to_owned(),
        anchors("# Security model\n## Pairing\n```text\n## not a heading\n```\n"),
    );
    pages.insert("scaling.md".to_owned(), BTreeSet::new());
    let problems: Vec<String> = comments
        .iter()
        .flat_map(|(_, c)| doc_links(c))
        .filter_map(|link| broken(&link, &pages))
        .collect();
    assert_eq!(
        problems,
        [
            "docs/security.md has no heading whose anchor is #no-such-heading",
            "docs/nowhere.md does not exist",
        ]
    );
}

/// The retired citations in `source`'s comments, as [`retired_citations`] names them.
fn comments_retired(path: &Path, source: &str) -> Vec<String> {
    comments(path, source)
        .iter()
        .flat_map(|(_, c)| retired_citations(c))
        .collect()
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        slug("Decision 1: `@bot status` is a command"),
        "decision-1-bot-status-is-a-command"
    );
    assert_eq!(slug("robo_claw clients"), "robo_claw-clients");
    assert_eq!(
        slug(
            "Decision 15: `explain`, `replay` and `doctor` answer \"why did the bot not answer?\""
        ),
        "decision-15-explain-replay-and-doctor-answer-why-did-the-bot-not-answer"
    );
    let page = anchors("# A\n## Names\n### Names\n~~~\n# B\n~~~\n#NoSpace\n");
    assert_eq!(
        page,
        ["a", "names", "names-1"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}

/// What is wrong with the repository paths one markdown page (`page`, relative to the
/// repository) names: each link to a file of the repository (`[x](../guest/src/keys.rs)`,
/// `[x](security.md#pairing)`) and each path in a code span (`` `host-shim/src/wit.rs` ``)
/// must name a file that exists, and a link to a page's heading a heading it has. Files move
/// (the test binaries did, into one per crate), and a page that still names the old place
/// sends its reader nowhere; `file.rs::name` must name a function of the file (the test that
/// guards an invariant), since tests are renamed too. `exists`, `has_fn` and `headings`
/// answer for the repository.
fn broken_paths(
    page: &str,
    markdown: &str,
    exists: &dyn Fn(&Path) -> bool,
    has_fn: &dyn Fn(&Path, &str) -> bool,
    headings: &dyn Fn(&Path) -> Option<BTreeSet<String>>,
) -> Vec<String> {
    let dir = Path::new(page).parent().unwrap_or(Path::new(""));
    // `a/../b` as a path inside the repository, or `None` when it leaves it.
    let resolve = |relative: &str| -> Option<PathBuf> {
        let joined = dir.join(relative);
        let mut parts: Vec<&str> = Vec::new();
        for part in joined.to_str()?.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop()?;
                }
                part => parts.push(part),
            }
        }
        Some(parts.iter().collect())
    };
    let mut problems = Vec::new();
    let mut fence = false;
    for (number, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        let at = |what: String| format!("{page}:{}: {what}", number + 1);
        // Code spans are the odd pieces between backticks.
        let mut prose = String::new();
        for (i, piece) in line.split('`').enumerate() {
            if i % 2 == 0 {
                prose.push_str(piece);
                continue;
            }
            let names_a_file = [
                "guest/",
                "host-shim/",
                "transports/",
                "tests/",
                "fuzz/",
                "examples/",
                "wit/",
                "docs/",
            ]
            .iter()
            .any(|top| piece.starts_with(top))
                && !piece.contains([' ', '*', '<', '{', '$'])
                && Path::new(piece).extension().is_some();
            if !names_a_file {
                continue;
            }
            // `file.rs::test_name` names a test in the file, `page.md#anchor` a heading.
            let (file, item) = match piece.split_once("::") {
                Some((file, item)) => (file, Some(item)),
                None => (piece, None),
            };
            let (file, anchor) = match file.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (file, None),
            };
            let file = Path::new(file);
            if !exists(file) {
                problems.push(at(format!("`{piece}`: {} does not exist", file.display())));
            } else if let Some(item) = item.filter(|item| !has_fn(file, item)) {
                problems.push(at(format!(
                    "`{piece}`: {} has no fn {item}",
                    file.display()
                )));
            } else if let (Some(anchor), Some(found)) = (anchor, headings(file))
                && !found.contains(anchor)
            {
                problems.push(at(format!(
                    "`{piece}`: no heading whose anchor is #{anchor}"
                )));
            }
        }
        let mut rest = prose.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            let target = &after[..end];
            rest = &after[end..];
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target, None),
            };
            let path = if file.is_empty() {
                Some(PathBuf::from(page))
            } else {
                resolve(file)
            };
            let Some(path) = path.filter(|path| exists(path)) else {
                problems.push(at(format!(
                    "the link to {target} names no file of the repository"
                )));
                continue;
            };
            if let (Some(anchor), Some(found)) = (anchor, headings(&path))
                && !found.contains(anchor)
            {
                problems.push(at(format!(
                    "{} has no heading whose anchor is #{anchor}",
                    path.display()
                )));
            }
        }
    }
    problems
}

/// README.md and every page of docs/, as paths relative to the repository.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_owned()];
    for entry in std::fs::read_dir(repository().join("docs"))
        .expect("docs/ is readable")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    pages
}

#[test]
fn every_file_and_heading_the_docs_name_exists() {
    let root = repository();
    let exists = |path: &Path| root.join(path).exists();
    let has_fn = |path: &Path, name: &str| {
        std::fs::read_to_string(root.join(path)).is_ok_and(|text| {
            text.contains(&format!("fn {name}(")) || text.contains(&format!("fn {name}<"))
        })
    };
    let headings = |path: &Path| {
        (path.extension().is_some_and(|e| e == "md"))
            .then(|| std::fs::read_to_string(root.join(path)).ok())
            .flatten()
            .map(|text| anchors(&text))
    };
    let problems: Vec<String> = pages()
        .iter()
        .flat_map(|page| {
            let text = std::fs::read_to_string(root.join(page)).expect("a page");
            broken_paths(page, &text, &exists, &has_fn, &headings)
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_planted_bad_path_in_a_page_is_found() {
    let page = "Rules live in [keys](../guest/src/keys.rs) and `guest/tests/bridge_pairing.rs`;\n\
                tested by `guest/src/keys.rs::parses` and `guest/src/keys.rs::gone`, `docs/security.md#pairing`;\n\
                see [pairing](security.md#pairing), [gone](security.md#gone), [x](nowhere.md),\n\
                [up](../../outside.md), [web](https://example.com/a.rs), `cargo run -p x`,\n\
                [here](#intro) and [there](#nothing).\n\
                ```\n`guest/src/in_a_fence.rs`\n```\n# Intro\n";
    let files = ["guest/src/keys.rs", "docs/security.md", "docs/page.md"];
    let exists = |path: &Path| files.iter().any(|f| Path::new(f) == path);
    let has_fn =
        |path: &Path, name: &str| path == Path::new("guest/src/keys.rs") && name == "parses";
    let headings = |path: &Path| match path.to_str() {
        Some("docs/security.md") => Some(anchors("# Security\n## Pairing\n")),
        Some("docs/page.md") => Some(anchors(page)),
        _ => None,
    };
    let problems = broken_paths("docs/page.md", page, &exists, &has_fn, &headings);
    assert_eq!(
        problems,
        [
            "docs/page.md:1: `guest/tests/bridge_pairing.rs`: guest/tests/bridge_pairing.rs does not exist",
            "docs/page.md:2: `guest/src/keys.rs::gone`: guest/src/keys.rs has no fn gone",
            "docs/page.md:3: docs/security.md has no heading whose anchor is #gone",
            "docs/page.md:3: the link to nowhere.md names no file of the repository",
            "docs/page.md:4: the link to ../../outside.md names no file of the repository",
            "docs/page.md:5: docs/page.md has no heading whose anchor is #nothing",
        ]
    );
}
