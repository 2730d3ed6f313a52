//! The reference redaction engine: the shared list's patterns applied one after another with
//! regex-lite, each replacing all its matches in the text the previous ones left, as
//! redaction ran before the one-pass engine. Slow (a regex pass per shape) and plain on
//! purpose: the differential tests hold the engine equal to it.

use guest::core::redact::Redacted;
use guest::core::secrets::{PRIVATE_KEY, Replacement, SHAPES, Shape};
use regex_lite::{Captures, Regex};

/// `text` redacted by running every shape's pattern in list order, pass after pass while a
/// pass changes the text, as the engine.
pub fn reference_redact(text: &str) -> Redacted {
    // The looks (emphasis view, dropped delimiters) are shared; the passes are what this
    // reference checks.
    guest::core::redact::redact_with(text, reference_passes)
}

fn reference_passes(text: &str) -> Redacted {
    // Repeated and settled as the engine's passes are: this reference checks one pass.
    guest::core::redact::repeat_passes(text, reference_once)
}

/// One pass: every shape's pattern in list order.
fn reference_once(text: &str) -> Redacted {
    let mut rules = Vec::new();
    let mut current = match private_keys(text) {
        Some(replaced) => {
            rules.push(SHAPES[PRIVATE_KEY].name);
            replaced
        }
        None => text.to_owned(),
    };
    for (i, shape) in SHAPES.iter().enumerate() {
        if i == PRIVATE_KEY {
            continue;
        }
        let regex = Regex::new(shape.pattern).expect("the shared patterns compile");
        let mut fired = false;
        let mut replaced = String::with_capacity(current.len());
        let mut copied = 0;
        let mut at = 0;
        while let Some(caps) = regex.captures_at(&current, at) {
            let whole = caps.get(0).expect("group 0 is the match");
            let (whole_end, new) = cut_and_replace(shape, &current, &caps);
            // A later match starting inside this one and running past it is the same
            // secret's: the replacement covers both, as the engine's does.
            let whole_end = match &new {
                Some(new) if *new != current[whole.start()..whole_end] => {
                    overlapped_end(&regex, shape, &current, whole.start(), whole_end)
                }
                _ => whole_end,
            };
            match new {
                Some(new) if new != current[whole.start()..whole_end] => {
                    fired = true;
                    replaced.push_str(&current[copied..whole.start()]);
                    replaced.push_str(&new);
                    copied = whole_end;
                    at = whole_end.max(whole.start() + 1);
                }
                // A match kept as it is shadows nothing: the search goes on right after
                // its start, as the engine's does.
                _ => at = next_char(&current, whole.start()),
            }
            if at > current.len() {
                break;
            }
        }
        replaced.push_str(&current[copied..]);
        if fired {
            current = replaced;
            rules.push(shape.name);
        }
    }
    Redacted {
        text: current,
        rules,
    }
}

/// Where a match of `shape` (its regex `regex`) from `start` to `end` ends once every later
/// match that starts inside it and runs past it (and is replaced) joins it.
fn overlapped_end(regex: &Regex, shape: &Shape, text: &str, start: usize, end: usize) -> usize {
    let mut end = end;
    let mut at = next_char(text, start);
    while at < end {
        let Some(caps) = regex.captures_at(text, at) else {
            break;
        };
        let later = caps.get(0).expect("group 0 is the match");
        if later.start() >= end {
            break;
        }
        let (later_end, new) = cut_and_replace(shape, text, &caps);
        if later_end > end && new.is_some_and(|new| new != text[later.start()..later_end]) {
            end = later_end;
        }
        at = next_char(text, later.start());
    }
    end
}

/// The byte after the character at `at`.
fn next_char(text: &str, at: usize) -> usize {
    at + text[at..].chars().next().map_or(1, char::len_utf8)
}

/// A match's end as the engine cuts it, and what replaces it (`None`: it stays).
fn cut_and_replace(shape: &Shape, current: &str, caps: &Captures<'_>) -> (usize, Option<String>) {
    let whole = caps.get(0).expect("group 0 is the match");
    // The engine's value ends before trailing sentence punctuation, and a quoted
    // header's value at the closing quote: the match is cut there.
    let whole_end = match shape.replacement {
        Replacement::Assignment => caps.get(2).map_or(whole.end(), |v| {
            v.start() + guest::core::secrets::value_len(v.as_str().as_bytes())
        }),
        Replacement::Header => caps.get(2).map_or(whole.end(), |v| {
            v.start()
                + guest::core::secrets::quoted_header_value_len(
                    current.as_bytes(),
                    whole.start(),
                    v.start(),
                    v.end(),
                )
        }),
        _ => whole.end(),
    };
    let new = match shape.replacement {
        Replacement::Fixed(text) => Some(text.to_owned()),
        Replacement::Header => {
            let is_bearer = guest::core::secrets::header_value_is_bearer(group(caps, 2).as_bytes());
            (!is_bearer).then(|| format!("{}: [redacted]", group(caps, 1)))
        }
        // A value that is configuration (`TOKEN_TTL_SECONDS=3600`, `${VAR}`) or a
        // name about a secret rather than holding one stays, as the engine keeps it.
        Replacement::Assignment => (!guest::core::secrets::assignment_is_plain(
            group(caps, 1),
            caps.get(2).map_or("", |v| &current[v.start()..whole_end]),
        ))
        .then(|| format!("{}=[redacted]", group(caps, 1))),
        Replacement::UrlCredentials => Some(format!("{}[redacted]@", group(caps, 1))),
    };
    (whole_end, new)
}

fn group<'h>(caps: &Captures<'h>, i: usize) -> &'h str {
    caps.get(i).map_or("", |m| m.as_str())
}

/// Length of a `<head><LABEL>PRIVATE KEY[ BLOCK]-----` line at the start of `s`.
fn pem_line(s: &str, head: &str) -> Option<usize> {
    let rest = s.strip_prefix(head)?;
    let label = rest
        .bytes()
        .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b' ')
        .count();
    let name = rest.get(..label)?;
    let ok = (name.ends_with("PRIVATE KEY") || name.ends_with("PRIVATE KEY BLOCK"))
        && rest.get(label..)?.starts_with("-----");
    ok.then_some(head.len() + label + 5)
}

/// Each BEGIN line to the first END line after it, or without one, the whole base64 lines
/// right under it; `None` when there is none.
fn private_keys(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut copied = 0;
    let mut pos = 0;
    let mut any = false;
    while let Some(i) = text.get(pos..).and_then(|t| t.find("-----BEGIN ")) {
        let begin = pos + i;
        let Some(header) = text.get(begin..).and_then(|t| pem_line(t, "-----BEGIN ")) else {
            pos = begin + 1;
            continue;
        };
        let body = begin + header;
        let mut end = None;
        let mut search = body;
        while let Some(j) = text.get(search..).and_then(|t| t.find("-----END ")) {
            let at = search + j;
            if let Some(len) = text.get(at..).and_then(|t| pem_line(t, "-----END ")) {
                end = Some(at + len);
                break;
            }
            search = at + 1;
        }
        let stop = end.unwrap_or_else(|| base64_lines_end(text, body));
        // A BEGIN line with nothing under it names a format; it holds no key.
        if stop == body {
            pos = body;
            continue;
        }
        out.push_str(&text[copied..begin]);
        out.push_str("[redacted:private-key]");
        copied = stop;
        pos = stop;
        any = true;
    }
    any.then(|| out + &text[copied..])
}

fn base64_lines_end(text: &str, mut from: usize) -> usize {
    loop {
        let rest = &text[from..];
        let brk = if rest.starts_with("\r\n") {
            2
        } else if rest.starts_with('\n') {
            1
        } else {
            return from;
        };
        let line = &rest[brk..];
        let len = line
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
            .count();
        if len == 0 || !matches!(line.as_bytes().get(len), None | Some(b'\r' | b'\n')) {
            return from;
        }
        from += brk + len;
    }
}
