//! Small text helpers shared by routing, commands and the formatters
//! (docs/architecture.md#the-original-module-by-module).

/// Removes one leading `@<bot_username>` mention from `text` (trimmed first) together with the
/// run of whitespace, `,`, `:` and `-` after it. `None` means the text does not start with the
/// mention, so the caller can tell "mentioned with nothing after it" (`Some("")`) from "not
/// mentioned at all".
///
/// Same semantics as the original regex `^@<bot>\b[\s,:-]*` (case-insensitive, the name taken
/// literally), matched by hand: compiling a regex for every inbound message would cost more than
/// the rest of routing, and a hand match has no escaping to get wrong (a name like `a.b` must not
/// match `@axb`). An empty name never matches, because `@` alone would address every message.
pub fn strip_leading_mention(text: &str, bot_username: &str) -> Option<String> {
    if bot_username.is_empty() {
        return None;
    }
    let after_at = text.trim().strip_prefix('@')?;
    let rest = strip_prefix_ci(after_at, bot_username)?;
    let last_of_name = bot_username.chars().next_back()?;
    let next = rest.chars().next();
    // `\b` in the original is the ASCII word boundary: one side a word character, the other not.
    let boundary = match next {
        Some(c) => is_word_char(last_of_name) != is_word_char(c),
        None => is_word_char(last_of_name),
    };
    if !boundary {
        return None;
    }
    let body = rest.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ':' | '-'));
    Some(body.trim_end().to_string())
}

/// True when `text` starts with any non-empty prefix, ignoring case. Empty prefixes are skipped
/// because an empty prefix would turn every message into an addressed one.
pub fn starts_with_any_ci(text: &str, prefixes: &[String]) -> bool {
    prefixes
        .iter()
        .any(|p| !p.is_empty() && strip_prefix_ci(text, p).is_some())
}

/// `text` without `prefix` when it starts with it, comparing case-insensitively character by
/// character (so the rest is always sliced at a character boundary, whatever the case mapping).
pub fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let mut rest = text.char_indices();
    for p in prefix.chars() {
        let (_, t) = rest.next()?;
        if !t.to_lowercase().eq(p.to_lowercase()) {
            return None;
        }
    }
    let offset = rest.next().map_or(text.len(), |(i, _)| i);
    text.get(offset..)
}

/// Every run of whitespace (newlines included) becomes one space, ends trimmed, so a tool name
/// with a newline in it cannot break the one-line progress card.
pub fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `value` on one line of at most `max` characters (code points): whitespace collapsed, and
/// when longer, the first `max - 1` characters and `…`, so the result is exactly `max` long.
/// A `max` of 0 gives an empty text: there is no room even for `…`, and the limit is a promise
/// to the caller (a chat line, a card) that it must keep.
pub fn one_line(value: &str, max: usize) -> String {
    let collapsed = collapse_whitespace(value);
    if collapsed.chars().count() <= max {
        return collapsed;
    }
    let mut cut: String = collapsed.chars().take(max.saturating_sub(1)).collect();
    if max > 0 {
        cut.push('…');
    }
    cut
}

/// A coarse age for people: whole seconds, minutes, hours or days (`5s`, `1m`, `3h`, `2d`).
/// Negative durations (a clock that went backwards) show as `0s` rather than a minus sign.
pub fn format_duration(ms: i64) -> String {
    let seconds = ms.max(0) / 1000;
    if seconds < 60 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 60 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 24 {
        return format!("{hours}h");
    }
    format!("{}d", hours / 24)
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_leading_mention_table() {
        let rows: Vec<(&str, &str, Option<&str>)> = vec![
            ("@piBot status", "piBot", Some("status")),
            ("  @PIBOT, status  ", "piBot", Some("status")),
            ("@piBot: - hello there", "piBot", Some("hello there")),
            ("@piBot", "piBot", Some("")),
            ("@piBot\n\nfix it", "piBot", Some("fix it")),
            ("@piBotty status", "piBot", None),
            ("@piBot_2 status", "piBot", None),
            ("hello @piBot", "piBot", None),
            ("piBot status", "piBot", None),
            ("@axb hi", "a.b", None),
            ("@a.b hi", "a.b", Some("hi")),
            ("@anything", "", None),
            ("", "piBot", None),
        ];
        for (text, bot, expected) in rows {
            assert_eq!(
                strip_leading_mention(text, bot).as_deref(),
                expected,
                "text {text:?} bot {bot:?}"
            );
        }
    }

    #[test]
    fn starts_with_any_ci_table() {
        let prefixes: Vec<String> = vec!["/".into(), "connect ".into(), "".into()];
        let rows = [
            ("/status", true),
            ("CONNECT help", true),
            ("connecting", false),
            ("hello", false),
            ("", false),
        ];
        for (text, expected) in rows {
            assert_eq!(starts_with_any_ci(text, &prefixes), expected, "{text:?}");
        }
        assert!(!starts_with_any_ci("anything", &[String::new()]));
    }

    #[test]
    fn strip_prefix_ci_keeps_the_rest_intact() {
        assert_eq!(strip_prefix_ci("BOT status", "bot "), Some("status"));
        assert_eq!(strip_prefix_ci("Ünïcode x", "üNÏ"), Some("code x"));
        assert_eq!(strip_prefix_ci("bo", "bot "), None);
    }

    #[test]
    fn collapse_whitespace_table() {
        assert_eq!(collapse_whitespace("  mcp\n weird  "), "mcp weird");
        assert_eq!(collapse_whitespace("a\t\tb\r\nc"), "a b c");
        assert_eq!(collapse_whitespace("   "), "");
    }

    #[test]
    fn one_line_table() {
        let rows = [
            ("  a \n b  ", 10, "a b"),
            ("abcdef", 6, "abcdef"),
            ("abcdefg", 6, "abcde…"),
            ("ééééé", 3, "éé…"),
            ("ab", 1, "…"),
            ("abc", 1, "…"),
            ("abc", 0, ""),
            ("", 0, ""),
        ];
        for (value, max, expected) in rows {
            assert_eq!(one_line(value, max), expected, "{value:?} {max}");
        }
    }

    #[test]
    fn format_duration_table() {
        let rows = [
            (5_000, "5s"),
            (59_999, "59s"),
            (90_000, "1m"),
            (3 * 3_600_000, "3h"),
            (50 * 3_600_000, "2d"),
            (-1, "0s"),
            (i64::MIN, "0s"),
            (999, "0s"),
        ];
        for (ms, expected) in rows {
            assert_eq!(format_duration(ms), expected, "{ms}");
        }
    }
}
