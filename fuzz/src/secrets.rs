//! Finding the secrets an input holds, with the guest's one list of secret shapes
//! (`guest::core::secrets`) and its catalog of provider families and generic shapes
//! (`guest::core::secret_spans`), so "never echoes a secret" means what redaction knows.

use guest::core::secret_spans::find_spans;
use guest::core::secrets::{BEARER, SHAPES, candidates, markers};
use serde_json::Value;

/// Shortest secret part checked for by substring. An assignment's value can be one
/// character (`TOKEN=x`), which ordinary output contains by chance.
pub const MIN_SECRET_BYTES: usize = 8;

/// The secret part (what redaction hides) of every shape match in `text` that occurs
/// nowhere in `text` except as a shape match (see [`secrets_in_documents`]).
pub fn secrets_in(text: &str) -> Vec<String> {
    unambiguous(&[text])
}

/// Each secret part with how many places in `text` hold it as a shape match (two shapes
/// matching the same place, `TOKEN=ghp_…`, count once).
fn hits_in(text: &str) -> Vec<(String, usize)> {
    let mut found: Vec<(String, Vec<usize>)> = Vec::new();
    for candidate in candidates(text) {
        let Some(shape) = SHAPES.get(candidate.shape) else {
            continue;
        };
        let Some(hit) = shape.find(text, candidate.at, 0) else {
            continue;
        };
        if shape.replace(text, &hit).is_none() {
            continue;
        }
        let Some(part) = text.get(hit.keep..hit.end) else {
            continue;
        };
        // The kept name's separator (`=`, `: `) is not part of the secret, nor is the word
        // of a `Bearer` match, replaced with its value: an output that lost the word to
        // another shape (`AUTH_TOKEN=Bearer 4f9a…` once sent `AUTH_TOKEN=[redacted] 4f9a…`)
        // still shows the secret.
        let whole = part.len();
        let part = match candidate.shape {
            BEARER => part
                .get(6..)
                .unwrap_or_default()
                .trim_start_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b'),
            _ => part,
        };
        let unkept = part.trim_start_matches(['=', ':', ' ', '\t']);
        let at = hit.keep + (whole - unkept.len());
        let secret = unkept.trim_end();
        if secret.len() >= MIN_SECRET_BYTES {
            match found.iter_mut().find(|(known, _)| known == secret) {
                Some((_, places)) if !places.contains(&at) => places.push(at),
                Some(_) => {}
                None => found.push((secret.to_owned(), vec![at])),
            }
        }
    }
    // The catalog's families and the generic shapes (docs/security.md#redaction): each span is a
    // secret the output must not show, as the shapes' matches are.
    for span in find_spans(text) {
        let Some(secret) = text.get(span.start..span.end) else {
            continue;
        };
        if secret.len() >= MIN_SECRET_BYTES {
            match found.iter_mut().find(|(known, _)| known == secret) {
                Some((_, places)) if !places.contains(&span.start) => places.push(span.start),
                Some(_) => {}
                None => found.push((secret.to_owned(), vec![span.start])),
            }
        }
    }
    found
        .into_iter()
        .map(|(secret, places)| (secret, places.len()))
        .collect()
}

/// The secrets in `documents` and, where one is JSON, in each of its strings (keys and
/// values) as decoded: `"\u0073k-ant-..."` is a secret only once the escape is read.
///
/// Only secrets that occur nowhere in the input except as a shape match: the same
/// characters inside a word (`traAKIA…` is no AWS key id: no word boundary) may be quoted,
/// and an output quoting them cannot be told from one quoting the secret. That holds across
/// all the documents of one input: a key id planted in the project file is no secret to
/// look for in a note quoting the global file's `AKIA…AA` (found by fuzzing, 2026-12-01).
/// Those outputs are still checked for any text of a secret shape.
pub fn secrets_in_documents(documents: &[&str]) -> Vec<String> {
    let parsed: Vec<Value> = documents
        .iter()
        .filter_map(|text| serde_json::from_str::<Value>(text).ok())
        .collect();
    let mut texts: Vec<&str> = documents.to_vec();
    for value in &parsed {
        collect_strings(value, &mut texts);
    }
    unambiguous(&texts)
}

/// The secrets in `texts` whose every occurrence there is a shape match, also once the
/// markup delimiters a renderer or redaction's looks drop are gone: `bot1sk-a`nt-…` is no
/// secret (glued to `1`), but reads as `bot1sk-ant-…` without its backtick, a twin of a
/// real key elsewhere that no output can be told from (found by fuzzing, 2026-12-01).
fn unambiguous(texts: &[&str]) -> Vec<String> {
    // Without emphasis and code delimiters, and without every delimiter: dropping a
    // link's brackets too can hide a twin that dropping `*` alone shows (`](htth�*��`).
    // And as redaction's delimiter look reads it, underscores kept. The views above also
    // drop the secret's own `_`, so they missed the twin in `…GAmDghp_Q0AmDf~GAmDfGh…`
    // (no secret: glued to `D`), which that look sends without its `~`, holding the
    // characters of a real `ghp_Q0AmDfGAmDfGh…` elsewhere (found by fuzzing the config).
    // Discord's spoiler bars are dropped with the other delimiters (2026-12-02).
    const VIEWS: [&[char]; 4] = [
        &[],
        &['*', '_', '~', '`'],
        &['*', '_', '~', '`', '\\', '[', ']', '|'],
        &['*', '~', '`', '\\', '[', ']', '|'],
    ];
    // The pieces between the dropped characters, copied whole: a character at a time was a
    // seventh of this target's time on the catalog seeds (callgrind, 2026-12-07).
    let without = |text: &str, dropped: &[char]| -> String {
        match dropped.is_empty() {
            true => text.to_owned(),
            false => text.split(dropped).collect(),
        }
    };
    let views: Vec<Vec<String>> = VIEWS
        .iter()
        .map(|dropped| texts.iter().map(|text| without(text, dropped)).collect())
        .collect();
    let mut tally: Vec<(String, usize)> = Vec::new();
    for text in texts {
        for (secret, hits) in hits_in(text) {
            match tally.iter_mut().find(|(known, _)| *known == secret) {
                Some((_, total)) => *total += hits,
                None => tally.push((secret, hits)),
            }
        }
    }
    // Each view is taken of the secret too: a secret holding delimiters
    // (`dwi*_�________�_*_` after `Authorization: `) was never found in a view without
    // them, so its twin went uncounted, where the mrkdwn renderer writes
    // `andwi_______�________�____ln` elsewhere in the text as `andwi*_�________�_*_ln`
    // (found by fuzzing the pipeline, 2026-12-01).
    // Every secret's count in every view at once: one automaton per view, not a substring
    // search per secret per view, which was a fifth of the pipeline target's time on inputs
    // holding a few dozen secrets (perf, 2026-12-06).
    let needles: Vec<Vec<String>> = VIEWS
        .iter()
        .map(|dropped| {
            tally
                .iter()
                .map(|(secret, _)| without(secret, dropped))
                .collect()
        })
        .collect();
    let searched: Vec<(&[String], &[String])> = views
        .iter()
        .zip(&needles)
        .map(|(view, needles)| (view.as_slice(), needles.as_slice()))
        .collect();
    let counts: Vec<Vec<usize>> = needles
        .iter()
        .zip(overlapping_all(&searched))
        .map(|(needles, found)| {
            needles
                .iter()
                .zip(found)
                // A secret of delimiters alone is in every text of that view.
                .map(|(needle, count)| if needle.is_empty() { usize::MAX } else { count })
                .collect()
        })
        .collect();
    tally
        .into_iter()
        .enumerate()
        .filter(|(index, (_, hits))| {
            let occurrences = counts
                .iter()
                .filter_map(|view| view.get(*index).copied())
                .max()
                .unwrap_or(0);
            *hits >= occurrences
        })
        .map(|(_, (secret, _))| secret)
        .collect()
}

/// For each view (its texts and its needles), how many places in its texts hold each of its
/// needles, overlapping ones included (see [`overlapping`], which this is held equal to); an
/// empty needle counts 0.
///
/// One automaton for every view's needles (nearly the same secrets in each view), not one
/// per view: built afresh for each input, the four automata were half of this target's
/// time on the catalog seeds (callgrind, 2026-12-07).
fn overlapping_all(views: &[(&[String], &[String])]) -> Vec<Vec<usize>> {
    let mut counts: Vec<Vec<usize>> = views
        .iter()
        .map(|(_, needles)| vec![0; needles.len()])
        .collect();
    // Each distinct needle once in the automaton; its count goes to every secret that has
    // it.
    let mut distinct: Vec<&str> = views
        .iter()
        .flat_map(|(_, needles)| needles.iter())
        .map(String::as_str)
        .filter(|needle| !needle.is_empty())
        .collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.is_empty() {
        return counts;
    }
    // The NFA as first built, not the DFA `AhoCorasick::new` picks for a few dozen needles
    // nor the contiguous NFA it picks for more: the automaton is built afresh for every input
    // and searches a few tens of KB, and building the DFA was five sixths of this target's
    // time on a 3 KB catalog seed (callgrind, 2026-12-07: 64 M of 77 M instructions an
    // execution); the contiguous copy cost more to make than it saved. Every kind finds the
    // same overlapping matches.
    let built = aho_corasick::AhoCorasick::builder()
        .kind(Some(aho_corasick::AhoCorasickKind::NoncontiguousNFA))
        .build(&distinct);
    let Ok(automaton) = built else {
        // Too many needles for an automaton: one search each, as before.
        for ((texts, needles), counts) in views.iter().zip(&mut counts) {
            for (count, needle) in counts.iter_mut().zip(needles.iter()) {
                if !needle.is_empty() {
                    *count = texts.iter().map(|text| overlapping(text, needle)).sum();
                }
            }
        }
        return counts;
    };
    for ((texts, needles), counts) in views.iter().zip(&mut counts) {
        let mut per_needle = vec![0usize; distinct.len()];
        for text in texts.iter() {
            for hit in automaton.find_overlapping_iter(text.as_str()) {
                per_needle[hit.pattern().as_usize()] += 1;
            }
        }
        for (count, needle) in counts.iter_mut().zip(needles.iter()) {
            if let Ok(at) = distinct.binary_search(&needle.as_str()) {
                *count = per_needle[at];
            }
        }
    }
    counts
}

/// How many places in `text` hold `needle`, overlapping ones included: a quoted value
/// `'…='` and its twin can share the quote between them (`KEY='v='v='`), and counted
/// without overlaps the twin was missed, so an output quoting it was taken for an echo
/// of the secret (found by fuzzing the config, 2026-12-01).
fn overlapping(text: &str, needle: &str) -> usize {
    let step = needle.chars().next().map_or(1, char::len_utf8);
    let mut count = 0;
    let mut from = 0;
    while let Some(at) = text.get(from..).and_then(|rest| rest.find(needle)) {
        count += 1;
        from += at + step;
    }
    count
}

/// How every redaction begins.
pub const MARKER: &str = "[redacted";

/// Whether a secret of the input can be looked for in what came out: not redaction's own
/// output, and not mere symbols. Input that already reads as redaction's output
/// (`https://[redacted]@host`) plants no secret: it passes through as it is. Nor does a
/// value without a letter or digit (`TOKEN=��(�#`, `• ���`, `]���` after a key's `=` run):
/// control characters elsewhere are sent as the same text, and the renderer and redaction
/// write symbols of their own, a list's bullet or a marker's `]` (found by fuzzing the
/// pipeline, then the config, 2026-12-01).
pub fn worth_looking_for(secret: &str) -> bool {
    secret.chars().any(char::is_alphanumeric) && !touches_a_marker(secret)
}

/// Whether a planted value overlaps redaction's own output, which every redaction writes
/// and so no message can be checked for: it holds a marker, or is a piece of one
/// (`TOKEN=[redacte`), or ends with a marker's start (`e-�TOKEN=[redac`, met in the code
/// class `language-�TOKEN=[redacted]`), or starts with a marker's end (`token] |`, met
/// where a small limit cut inside `[redacted:slack-token]`). All found by fuzzing,
/// 2026-12-01.
fn touches_a_marker(secret: &str) -> bool {
    // A marker's start holds its `[` and its end its `]`: a secret without them is met by
    // no piece of a marker but a middle one. Asking every one of the catalog's two hundred
    // markers for every length regardless was a third of the pipeline target's time (perf,
    // 2026-12-06).
    let opens = secret.contains('[');
    let closes = secret.contains(']');
    // Without a bracket, a secret a marker holds is a piece of `redacted:` and a label, all
    // lower-case letters, digits, `-` and `:`: catalog secrets hold an upper-case letter or
    // a symbol, and asking two hundred markers of each was a twelfth of this target's time
    // (callgrind, 2026-12-07).
    let marker_byte =
        |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b':';
    if !opens && !closes && !secret.bytes().all(marker_byte) {
        return false;
    }
    secret.contains(MARKER)
        || markers().any(|marker| {
            (secret.len() <= marker.len() && marker.contains(secret))
                || (opens || closes)
                    && (2..marker.len()).any(|n| {
                        (opens && secret.ends_with(&marker[..n]))
                            || (closes && secret.starts_with(&marker[marker.len() - n..]))
                    })
        })
}

fn collect_strings<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|item| collect_strings(item, out)),
        Value::Object(fields) => {
            for (key, item) in fields {
                out.push(key);
                collect_strings(item, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `touches_a_marker` as first written, asking every marker: the reference its quick
    /// refusal is held to.
    fn touches_a_marker_reference(secret: &str) -> bool {
        secret.contains(MARKER)
            || markers().any(|marker| {
                (secret.len() <= marker.len() && marker.contains(secret))
                    || (2..marker.len()).any(|n| {
                        secret.ends_with(&marker[..n])
                            || secret.starts_with(&marker[marker.len() - n..])
                    })
            })
    }

    #[test]
    fn a_secret_touches_a_marker_as_when_every_marker_was_asked() {
        // Every piece of a few markers (inside, start, end), with text around, and secrets
        // of every kind of character.
        let mut samples: Vec<String> = [
            "ghp_Q1w2E3r4T5y6U7i8O9p0",
            "hunter2x",
            "redacted",
            "acted:github-to",
            "github-token",
            "token] |",
            "e-x TOKEN=[redac",
            "x[redacted:jwt]y",
            "sk-ant-api03-abc",
            "plain-lower-case",
            "::--",
            "é:redacted",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        for marker in ["[redacted]", "[redacted:github-token]", "[redacted:jwt]"] {
            for start in 0..marker.len() {
                for end in start + 1..=marker.len() {
                    let piece = &marker[start..end];
                    samples.push(piece.to_owned());
                    samples.push(format!("Ab{piece}"));
                    samples.push(format!("{piece}Z9"));
                }
            }
        }
        let mut touching = 0;
        for sample in &samples {
            let expected = touches_a_marker_reference(sample);
            assert_eq!(touches_a_marker(sample), expected, "{sample:?}");
            touching += usize::from(expected);
        }
        assert!(touching > 100 && touching < samples.len(), "{touching}");
    }

    #[test]
    fn one_automaton_counts_what_a_search_per_needle_counts() {
        // Overlapping places (`'v='v='`), a needle twice, one that is a piece of another,
        // an empty one, non-ASCII text, and one found nowhere.
        let texts = [
            "KEY='v='v=' and 'v=' é€ abcabc".to_owned(),
            "abca'v='".to_owned(),
        ];
        let needles: Vec<String> = ["'v='", "abc", "abc", "bca", "", "€ a", "zzz", "a"]
            .iter()
            .map(|n| (*n).to_owned())
            .collect();
        let expected = |texts: &[String], needles: &[String]| -> Vec<usize> {
            needles
                .iter()
                .map(|needle| match needle.is_empty() {
                    true => 0,
                    false => texts.iter().map(|t| overlapping(t, needle)).sum(),
                })
                .collect()
        };
        // A second view with needles of its own and some of the first's: each view counts
        // its own needles in its own texts, the automaton shared.
        let other_texts = ["abc zzz 'v='".to_owned()];
        let other_needles: Vec<String> = ["zzz", "abc", "only here", "'v='"]
            .iter()
            .map(|n| (*n).to_owned())
            .collect();
        let counts = overlapping_all(&[(&texts, &needles), (&other_texts, &other_needles)]);
        assert_eq!(
            counts,
            [
                expected(&texts, &needles),
                expected(&other_texts, &other_needles)
            ]
        );
        assert_eq!(counts[0][..4], [4, 3, 3, 2]);
        assert_eq!(counts[0][6], 0, "zzz is only in the other view's text");
        assert_eq!(counts[1], [1, 1, 0, 1]);
    }
}
