//! The secret catalog held to its samples, at the pattern level (issue 32 §1, §8).
//!
//! Each family's pattern must find every one of its positives whole, in the places an agent
//! prints a secret (prose, a code block, a list item, a code span), and none of its
//! near-misses; no family may find anything in a page of ordinary engineering text (commit
//! ids, UUIDs, lockfile integrity hashes, docker digests, data URIs, minified code). The
//! engine that runs the catalog has its own tests; these hold the data to what the engine
//! relies on: patterns that compile, keywords that every match contains, matches no longer
//! than the window the engine gives them.
//!
//! `docs/secret-families.md` is generated from the table: run
//! `BOT_CONNECT_WRITE_DOCS=1 cargo test -p guest --test bridge secret_families` to write it;
//! without the variable the test fails when the file and the table disagree.

use guest::core::secret_families::{FAMILIES, Family};
use regex_lite::Regex;
use std::collections::HashSet;
use std::path::PathBuf;

/// Where a secret is planted: a name for the failure message, the text before and after.
const CONTEXTS: [(&str, &str, &str); 4] = [
    ("prose", "the key is ", "."),
    ("code block", "```sh\nexport X=", "\n```\n"),
    ("list item", "- ", "\n"),
    ("code span", "use `", "` here"),
];

/// The environment variable that makes the docs test write the file instead of comparing.
const WRITE_DOCS: &str = "BOT_CONNECT_WRITE_DOCS";

/// Every family with its compiled pattern. A pattern that does not compile is reported by
/// `every_pattern_compiles`; here it would only hide the other tests' findings, so it panics.
fn compiled() -> Vec<(&'static Family, Regex)> {
    FAMILIES
        .iter()
        .map(|f| {
            let re = Regex::new(f.pattern)
                .unwrap_or_else(|e| panic!("{}: the pattern does not compile: {e}", f.label));
            (f, re)
        })
        .collect()
}

fn has_secret_group(re: &Regex) -> bool {
    re.capture_names().any(|n| n == Some("secret"))
}

/// The match of `re` in `text` that is the sample planted at `start..end`, if there is one.
///
/// Without a `secret` group the whole match must be exactly the sample. With one, the match
/// must start where the sample starts (the key name is part of the sample) and the group must
/// lie inside the sample and either end it (the match may then take one delimiter character
/// after it, as the base64 families do) or sit inside a match that ends it (a URL's password).
fn planted_match<'t>(re: &Regex, text: &'t str, start: usize, end: usize) -> Option<&'t str> {
    let next = text[end..].chars().next().map_or(0, char::len_utf8);
    for caps in re.captures_iter(text) {
        let whole = caps.get(0).expect("group 0 is the match");
        if whole.start() != start {
            continue;
        }
        let found = if has_secret_group(re) {
            caps.name("secret").is_some_and(|s| {
                s.start() >= start
                    && s.start() < s.end()
                    && s.end() <= end
                    && ((s.end() == end && (whole.end() == end || whole.end() == end + next))
                        || whole.end() == end)
            })
        } else {
            whole.end() == end
        };
        if found {
            return Some(whole.as_str());
        }
    }
    None
}

fn contains_keyword(family: &Family, text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    family.keywords.iter().any(|k| lower.contains(k))
}

/// Where the first of `family`'s keywords starts in `text`, compared as the prefilter does.
fn first_keyword_at(family: &Family, text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    family.keywords.iter().filter_map(|k| lower.find(k)).min()
}

/// A sample shortened for a failure message (they are synthetic, but a PEM block is long).
fn short(s: &str) -> String {
    let cut: String = s.chars().take(60).collect();
    if cut.len() < s.len() {
        format!("{cut}…")
    } else {
        cut.to_string()
    }
}

#[test]
fn the_catalog_holds_at_least_150_families() {
    assert!(
        FAMILIES.len() >= 150,
        "issue 32 §1 asks for at least 150 provider families; the catalog has {}",
        FAMILIES.len()
    );
}

#[test]
fn every_pattern_compiles() {
    let broken: Vec<String> = FAMILIES
        .iter()
        .filter_map(|f| {
            Regex::new(f.pattern)
                .err()
                .map(|e| format!("{}: {e}", f.label))
        })
        .collect();
    assert!(
        broken.is_empty(),
        "patterns that do not compile:\n{}",
        broken.join("\n")
    );
}

#[test]
fn labels_are_unique_and_well_formed() {
    let shape = Regex::new(r"^[a-z0-9]+(?:-[a-z0-9]+)*$").expect("the label shape compiles");
    let mut seen = HashSet::new();
    let mut problems = Vec::new();
    for f in FAMILIES {
        if !shape.is_match(f.label) {
            problems.push(format!("{:?}: not lower-case words joined by '-'", f.label));
        }
        if !seen.insert(f.label) {
            problems.push(format!("{:?}: used twice", f.label));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_family_names_its_provider_source_and_samples() {
    let mut problems = Vec::new();
    for f in FAMILIES {
        if f.provider.trim().is_empty() {
            problems.push(format!("{}: no provider", f.label));
        }
        if f.source.trim().is_empty() {
            problems.push(format!("{}: no source", f.label));
        }
        if f.positives.is_empty() {
            problems.push(format!("{}: no positive sample", f.label));
        }
        if f.near_misses.is_empty() {
            problems.push(format!("{}: no near-miss sample", f.label));
        }
        if f.max_len == 0 {
            problems.push(format!("{}: max_len is 0", f.label));
        }
        if f.max_before_keyword >= f.max_len {
            problems.push(format!(
                "{}: max_before_keyword {} is not less than max_len {}",
                f.label, f.max_before_keyword, f.max_len
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn keywords_are_lower_case_ascii_literals() {
    let mut problems = Vec::new();
    for f in FAMILIES {
        if f.keywords.is_empty() {
            problems.push(format!(
                "{}: no keyword, so its pattern would run on every text",
                f.label
            ));
        }
        let mut seen = HashSet::new();
        for k in f.keywords {
            if k.is_empty() || !k.is_ascii() || k.to_ascii_lowercase() != *k {
                problems.push(format!(
                    "{}: keyword {k:?} is not a non-empty lower-case ASCII literal",
                    f.label
                ));
            }
            if !seen.insert(k) {
                problems.push(format!("{}: keyword {k:?} listed twice", f.label));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_positive_contains_a_keyword() {
    let missing: Vec<String> = FAMILIES
        .iter()
        .flat_map(|f| f.positives.iter().map(move |p| (f, p)))
        .filter(|(f, p)| !contains_keyword(f, p))
        .map(|(f, p)| format!("{}: {}", f.label, short(p)))
        .collect();
    assert!(
        missing.is_empty(),
        "positives without any of their family's keywords (the prefilter would never run the pattern on them):\n{}",
        missing.join("\n")
    );
}

/// A keyword no positive holds is untested: misspelt, it would silently stop the prefilter
/// from ever running the alternative of the pattern it stands for.
#[test]
fn every_keyword_is_held_by_a_positive() {
    let mut unused = Vec::new();
    for f in FAMILIES {
        for k in f.keywords {
            if !f
                .positives
                .iter()
                .any(|p| p.to_ascii_lowercase().contains(k))
            {
                unused.push(format!("{}: {k:?}", f.label));
            }
        }
    }
    assert!(
        unused.is_empty(),
        "keywords that no positive sample holds (add a positive that uses each):\n{}",
        unused.join("\n")
    );
}

/// `text` with every occurrence of every keyword of `family` broken (its middle byte replaced
/// by U+0001), compared without regard to ASCII case as the prefilter compares.
fn without_keywords(family: &Family, text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut bytes = text.as_bytes().to_vec();
    for k in family.keywords {
        let mut from = 0;
        while let Some(at) = lower[from..].find(k) {
            let hit = from + at;
            // Keywords are ASCII, so the byte replaced is a whole character.
            bytes[hit + k.len() / 2] = 1;
            from = hit + 1;
        }
    }
    String::from_utf8(bytes).expect("replacing an ASCII byte keeps UTF-8")
}

/// The prefilter's promise, tried on the samples: take every keyword out of a positive and
/// whatever the pattern still finds holds no keyword, so the engine would never have run it.
/// A pattern that can match without its keywords fails here.
#[test]
fn no_match_without_a_keyword() {
    let mut problems = Vec::new();
    for (f, re) in compiled() {
        for p in f.positives {
            let text = format!("the key is {}.", without_keywords(f, p));
            for m in re.find_iter(&text) {
                if !contains_keyword(f, m.as_str()) {
                    problems.push(format!(
                        "{}: matched without a keyword: {}",
                        f.label,
                        short(m.as_str())
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "patterns that match text holding none of their keywords (the prefilter would skip them):\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_positive_is_found_whole_in_every_context() {
    let mut problems = Vec::new();
    for (f, re) in compiled() {
        for p in f.positives {
            for (place, before, after) in CONTEXTS {
                let text = format!("{before}{p}{after}");
                let start = before.len();
                match planted_match(&re, &text, start, start + p.len()) {
                    None => problems.push(format!(
                        "{} ({place}): not found whole: {}",
                        f.label,
                        short(p)
                    )),
                    Some(m) => {
                        if m.len() > f.max_len {
                            problems.push(format!(
                                "{} ({place}): the match is {} bytes, more than max_len {}",
                                f.label,
                                m.len(),
                                f.max_len
                            ));
                        }
                        match first_keyword_at(f, m) {
                            None => problems.push(format!(
                                "{} ({place}): the match holds none of the keywords",
                                f.label
                            )),
                            Some(at) if at > f.max_before_keyword => problems.push(format!(
                                "{} ({place}): the first keyword starts {at} bytes into the match, more than max_before_keyword {}",
                                f.label, f.max_before_keyword
                            )),
                            Some(_) => {}
                        }
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_near_miss_matches_its_family() {
    let mut problems = Vec::new();
    for (f, re) in compiled() {
        for n in f.near_misses {
            for (place, before, after) in CONTEXTS {
                let text = format!("{before}{n}{after}");
                if let Some(m) = re.find(&text) {
                    problems.push(format!(
                        "{} ({place}): near-miss {} matched as {}",
                        f.label,
                        short(n),
                        short(m.as_str())
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn ordinary_engineering_text_matches_no_family() {
    // The corpus must hold what it claims to, or the test passes by having nothing in it.
    for needle in [
        "TOKEN_TTL_SECONDS=3600",
        "\"integrity\": \"sha512-",
        "Digest: sha256:",
        "data:image/png;base64,",
        "!function(e,t)",
        "commit/",
    ] {
        assert!(CORPUS.contains(needle), "the corpus lost {needle:?}");
    }
    assert!(
        CORPUS.len() >= 9 * 1024,
        "the corpus is {} bytes, short of ~10 KiB",
        CORPUS.len()
    );
    let mut problems = Vec::new();
    for (f, re) in compiled() {
        for m in re.find_iter(CORPUS) {
            problems.push(format!("{}: matched {}", f.label, short(m.as_str())));
        }
    }
    assert!(
        problems.is_empty(),
        "families that fire on ordinary text:\n{}",
        problems.join("\n")
    );
}

/// The README-ready list of families, as `docs/secret-families.md` holds it.
fn families_doc() -> String {
    let mut out = String::new();
    out.push_str("# Secret families\n\n");
    out.push_str(
        "<!-- Generated from guest/src/core/secret_families.rs by\n     \
         BOT_CONNECT_WRITE_DOCS=1 cargo test -p guest --test bridge secret_families\n     \
         Do not edit by hand: the test fails when this file and the table disagree. -->\n\n",
    );
    out.push_str(&format!(
        "Redaction knows {} provider families. Each match is replaced by `[redacted:LABEL]`; \
         where a format has no distinctive prefix, only the value after a key name that holds \
         the provider's name goes, and the key name stays.\n\n",
        FAMILIES.len()
    ));
    out.push_str("| Label | Provider | Source |\n|---|---|---|\n");
    for f in FAMILIES {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            f.label,
            f.provider.replace('|', "\\|"),
            f.source.replace('|', "\\|")
        ));
    }
    out
}

#[test]
fn the_docs_list_matches_the_table() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the guest crate sits in the workspace")
        .join("docs/secret-families.md");
    let want = families_doc();
    if std::env::var_os(WRITE_DOCS).is_some() {
        std::fs::write(&path, &want).expect("docs/secret-families.md is writable");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is out of date with the catalog: run `{WRITE_DOCS}=1 cargo test -p guest --test bridge secret_families` and commit the file",
        path.display()
    );
}

/// About 10 KiB of what an agent prints on an ordinary day: release notes with commit ids,
/// request UUIDs, an env file whose secrets are references, lockfile integrity hashes,
/// docker digests, a data URI and a base64 font, minified JS, paths and plain URLs. Its
/// random parts were generated once, from a fixed seed, and pasted here.
const CORPUS: &str = include_str!("support/engineering_text.md");
