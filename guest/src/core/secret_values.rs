//! Whether a value found after a secret's key name is a secret (docs/security.md#redaction).
//!
//! A key name says a value is secret; the value says whether it is one. `TOKEN_TTL_SECONDS=3600`
//! holds a number, `password: ${DB_PASSWORD}` a reference, `api_key: <your-key>` a
//! placeholder: redacting them hides configuration a person needs to read, and teaches them
//! that the markers are noise. These checks are on shape only (digits, words, references,
//! how many different characters), never on a list of known secrets.

/// Whether `value` is a placeholder rather than a credential: `<your-token>`, `changeme`,
/// `xxxx…`, `****`, or a token-shaped string with too few different characters to be random
/// (`ghp_` and 36 `x`).
pub fn is_placeholder(value: &str) -> bool {
    let v = value.trim_matches(|c: char| c == '"' || c == '\'');
    if v.is_empty() {
        return true;
    }
    // Redaction's own marker: a value already replaced is not found again.
    if v.starts_with("[redacted") {
        return true;
    }
    if (v.starts_with('<') && v.ends_with('>'))
        || (v.starts_with("{{") && v.ends_with("}}"))
        || (v.starts_with('%') && v.ends_with('%') && v.len() > 2)
    {
        return true;
    }
    // Compared without ASCII case in place, the bytes read once: a config dump asks this of
    // every value (thousands per 64 KiB), and a lower-case copy and a substring search per
    // word were most of the time redaction spent on one (docs/benchmarks.md).
    let b = v.as_bytes();
    let filler = (0..b.len()).any(|i| {
        let at = |word: &[u8]| starts_folded(&b[i..], word);
        match b[i].to_ascii_lowercase() {
            b'c' => at(b"changeme") || at(b"change_me") || at(b"change-me"),
            b'p' => at(b"placeholder"),
            b'x' => at(b"xxxx"),
            b'*' => at(b"****"),
            _ => false,
        }
    });
    // `example` only at an end (`AKIAIOSFODNN7EXAMPLE`, `example-token`): inside a value it
    // is as likely a host (`https://u:p@git.example.com`) whose credentials must go.
    if filler
        || starts_folded(b, b"your")
        || starts_folded(b, b"example")
        || ends_folded(b, b"example")
    {
        return true;
    }
    // A random token of 16 or more characters uses many different ones; a filler does not.
    v.len() >= 16 && !has_distinct(v, 8)
}

/// Whether `text` starts with `word` (lower-case ASCII), without ASCII case.
fn starts_folded(text: &[u8], word: &[u8]) -> bool {
    text.get(..word.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(word))
}

/// Whether `text` ends with `word` (lower-case ASCII), without ASCII case.
fn ends_folded(text: &[u8], word: &[u8]) -> bool {
    text.len() >= word.len() && text[text.len() - word.len()..].eq_ignore_ascii_case(word)
}

/// Whether `value` is configuration rather than a secret, whatever its key says: a number, a
/// boolean, a duration, a reference to a variable or a file, or a placeholder.
pub fn is_plain_value(value: &str) -> bool {
    let v = value.trim_matches(|c: char| c == '"' || c == '\'');
    if is_placeholder(v) {
        return true;
    }
    const WORDS: [&str; 14] = [
        "true",
        "false",
        "yes",
        "no",
        "on",
        "off",
        "null",
        "nil",
        "none",
        "undefined",
        "required",
        "optional",
        "string",
        "env",
    ];
    if WORDS.iter().any(|w| v.eq_ignore_ascii_case(w)) {
        return true;
    }
    // An environment variable's name (`PI_SLACK_BOT_TOKEN`): upper-case words joined by `_`.
    // A config file names the variable that holds a token, and a message telling a person to
    // do so shows one (`"tokenEnv": "PI_TELEGRAM_TOKEN"`); random tokens do not look like it.
    if is_variable_name(v) {
        return true;
    }
    let b = v.as_bytes();
    // References: `$VAR`, `${VAR}`, `$(cmd)`, `process.env.X`, `os.environ[...]`, `env(...)`.
    if v.starts_with('$')
        || [
            &b"process.env"[..],
            b"os.environ",
            b"os.getenv",
            b"env(",
            b"env.",
            b"secrets.",
        ]
        .iter()
        .any(|head| starts_folded(b, head))
    {
        return true;
    }
    // Code, not a value: a path through a module or type (`Token::parse(line)`,
    // `Secret::new`). Tokens and passwords are not written with `::`.
    if memchr::memmem::find(b, b"::").is_some() {
        return true;
    }
    // A URL without credentials (`TOKEN_URL=https://auth.example.com/token`) is where a
    // token comes from, not the token; with `user:pass@` it is the URL shape's to redact.
    if (starts_folded(b, b"https://") || starts_folded(b, b"http://"))
        && memchr::memchr(b'@', b).is_none()
    {
        return true;
    }
    is_number_or_duration(v) || is_path(v)
}

/// Whether a value under a generic secret key name (`password`, `token`, `api_key`, …) is
/// secret-shaped enough to redact. Under a `secret` label (a key name holding `token`,
/// `secret`, `key`, …) it needs twelve characters of two kinds, or twenty with many
/// different characters; under any other generic label (a password, a CLI flag, a bearer
/// value) six characters and something besides letters. Plain words (`password: required`)
/// and short labels stay.
pub fn is_secret_like(label: &str, value: &str) -> bool {
    let v = value.trim_matches(|c: char| c == '"' || c == '\'');
    let classes = [
        v.bytes().any(|b| b.is_ascii_lowercase()),
        v.bytes().any(|b| b.is_ascii_uppercase()),
        v.bytes().any(|b| b.is_ascii_digit()),
        v.bytes().any(|b| !b.is_ascii_alphanumeric()),
    ]
    .iter()
    .filter(|c| **c)
    .count();
    if label != "secret" {
        return v.chars().count() >= 6
            && (classes >= 2 || !v.bytes().all(|b| b.is_ascii_alphabetic()));
    }
    let len = v.chars().count();
    (len >= 12 && classes >= 2 && has_distinct(v, 8)) || (len >= 20 && has_distinct(v, 12))
}

/// Whether a key name's last word says its value is about a secret, not the secret:
/// `TOKEN_TTL_SECONDS`, `API_KEY_FILE`, `SECRET_NAME`, `token_url`, `password_min_length`.
pub fn names_no_secret(key: &str) -> bool {
    let last = key
        .trim_matches(|c: char| c == '"' || c == '\'')
        .rsplit(['_', '-', '.'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    const WORDS: [&str; 30] = [
        "ttl", "seconds", "secs", "ms", "minutes", "hours", "days", "expiry", "expires", "timeout",
        "length", "len", "size", "count", "max", "min", "limit", "url", "uri", "endpoint", "path",
        "file", "dir", "name", "type", "id", "header", "prefix", "enabled", "format",
    ];
    // `tokenEnv`, `apiKeyEnvVar`: camel case names a variable too.
    let lower = key.to_ascii_lowercase();
    WORDS.contains(&last.as_str()) || lower.ends_with("env") || lower.ends_with("envvar")
}

/// `NAME_WITH_WORDS`: an upper-case letter, then upper-case letters and digits in at least
/// two words joined by `_`, each word holding a letter.
fn is_variable_name(v: &str) -> bool {
    v.as_bytes().first().is_some_and(u8::is_ascii_uppercase)
        && v.contains('_')
        && v.split('_').all(|word| {
            !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
                && word.bytes().any(|b| b.is_ascii_uppercase())
        })
}

/// Whether `v` has at least `n` different characters.
///
/// Every value a rule judges is asked this, and a token uses many characters: counting them
/// all, each looked up in a list of those seen, cost about 600 instructions per 40-character
/// token, a tenth of the span stage on secret-laden text (cachegrind, 2026-12-07). ASCII
/// characters are a bit each in one word, and the count stops at `n`.
fn has_distinct(v: &str, n: usize) -> bool {
    // Any text has none at least, the empty one too (its property test found "" with 0).
    if n == 0 {
        return true;
    }
    let mut ascii: u128 = 0;
    let mut others: Vec<char> = Vec::new();
    let mut count = 0;
    for c in v.chars() {
        let new = match u8::try_from(c).ok().filter(u8::is_ascii) {
            Some(b) => {
                let bit = 1u128 << b;
                let new = ascii & bit == 0;
                ascii |= bit;
                new
            }
            None if others.contains(&c) => false,
            None => {
                others.push(c);
                true
            }
        };
        count += usize::from(new);
        if count >= n {
            return true;
        }
    }
    false
}

/// How many different characters `v` has (at most 64): the count [`has_distinct`] is held to.
#[cfg(test)]
fn distinct(v: &str) -> usize {
    let mut seen: Vec<char> = Vec::with_capacity(32);
    for c in v.chars() {
        if !seen.contains(&c) {
            seen.push(c);
            if seen.len() >= 64 {
                break;
            }
        }
    }
    seen.len()
}

/// `3600`, `-1`, `1.5`, `10_000`, `30s`, `15m`, `2h`, `7d`, `250ms`, `1.5GB`.
fn is_number_or_duration(v: &str) -> bool {
    let v = v.strip_prefix('-').unwrap_or(v);
    let digits = v
        .bytes()
        .take_while(|b| b.is_ascii_digit() || matches!(b, b'.' | b'_' | b','))
        .count();
    if digits == 0 || !v.as_bytes()[0].is_ascii_digit() {
        return false;
    }
    let unit = &v[digits..];
    const UNITS: [&str; 24] = [
        "", "ns", "us", "µs", "ms", "s", "sec", "secs", "seconds", "m", "min", "mins", "minutes",
        "h", "hr", "hrs", "hours", "d", "days", "w", "kb", "mb", "gb", "%",
    ];
    UNITS.iter().any(|u| unit.eq_ignore_ascii_case(u))
}

/// `/etc/app/secret`, `./key.pem`, `~/.ssh/id_ed25519`, `C:\keys\app.pfx`.
fn is_path(v: &str) -> bool {
    let path_like = v.bytes().all(|b| {
        b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'~' | b'\\' | b':')
    });
    let rooted = v.starts_with("./")
        || v.starts_with("../")
        || v.starts_with("~/")
        || (v.starts_with('/') && v[1..].contains('/'))
        || (v.len() > 3 && v.as_bytes()[1] == b':' && v.as_bytes()[2] == b'\\');
    path_like && rooted
}

/// How much of an assignment's value `value` (as the pattern matched it) is the value: a full stop,
/// comma, semicolon, colon or closing bracket at its end is the sentence's (`Set TOKEN=abc.` or
/// `(TOKEN=abc)`), and went with the value (docs/security.md#redaction). One byte of value stays at
/// least. A closing bracket whose opener is in the value stays its own (`<your-key>`, `f(x)`).
pub fn value_len(value: &[u8]) -> usize {
    let mut len = value.len();
    while len > 1 {
        let opener = match value[len - 1] {
            // Not `!` or `?`: passwords end in them more often than sentences do here.
            b'.' | b',' | b';' | b':' => None,
            b')' => Some(b'('),
            b']' => Some(b'['),
            b'}' => Some(b'{'),
            b'>' => Some(b'<'),
            _ => break,
        };
        if opener.is_some_and(|o| value[..len - 1].contains(&o)) {
            break;
        }
        len -= 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks as first written (a lower-case copy, a substring search per word): the
    /// reference the allocation-free ones are held to.
    mod reference {
        use super::super::{distinct, is_path, is_variable_name};

        pub fn is_placeholder(value: &str) -> bool {
            let v = value.trim_matches(|c: char| c == '"' || c == '\'');
            if v.is_empty() {
                return true;
            }
            // Redaction's own marker: a value already replaced is not found again.
            if v.starts_with("[redacted") {
                return true;
            }
            if (v.starts_with('<') && v.ends_with('>'))
                || (v.starts_with("{{") && v.ends_with("}}"))
                || (v.starts_with('%') && v.ends_with('%') && v.len() > 2)
            {
                return true;
            }
            let lower = v.to_ascii_lowercase();
            const WORDS: [&str; 6] = [
                "changeme",
                "change_me",
                "change-me",
                "placeholder",
                "xxxx",
                "****",
            ];
            // `example` only at an end (`AKIAIOSFODNN7EXAMPLE`, `example-token`): inside a value it
            // is as likely a host (`https://u:p@git.example.com`) whose credentials must go.
            if WORDS.iter().any(|w| lower.contains(w))
                || lower.starts_with("your")
                || lower.starts_with("example")
                || lower.ends_with("example")
            {
                return true;
            }
            // A random token of 16 or more characters uses many different ones; a filler does not.
            v.len() >= 16 && distinct(v) < 8
        }

        pub fn is_plain_value(value: &str) -> bool {
            let v = value.trim_matches(|c: char| c == '"' || c == '\'');
            if is_placeholder(v) {
                return true;
            }
            let lower = v.to_ascii_lowercase();
            const WORDS: [&str; 14] = [
                "true",
                "false",
                "yes",
                "no",
                "on",
                "off",
                "null",
                "nil",
                "none",
                "undefined",
                "required",
                "optional",
                "string",
                "env",
            ];
            if WORDS.contains(&lower.as_str()) {
                return true;
            }
            // An environment variable's name (`PI_SLACK_BOT_TOKEN`): upper-case words joined by `_`.
            // A config file names the variable that holds a token, and a message telling a person to
            // do so shows one (`"tokenEnv": "PI_TELEGRAM_TOKEN"`); random tokens do not look like it.
            if is_variable_name(v) {
                return true;
            }
            // References: `$VAR`, `${VAR}`, `$(cmd)`, `process.env.X`, `os.environ[...]`, `env(...)`.
            if v.starts_with('$')
                || lower.starts_with("process.env")
                || lower.starts_with("os.environ")
                || lower.starts_with("os.getenv")
                || lower.starts_with("env(")
                || lower.starts_with("env.")
                || lower.starts_with("secrets.")
            {
                return true;
            }
            // Code, not a value: a path through a module or type (`Token::parse(line)`,
            // `Secret::new`). Tokens and passwords are not written with `::`.
            if v.contains("::") {
                return true;
            }
            // A URL without credentials (`TOKEN_URL=https://auth.example.com/token`) is where a
            // token comes from, not the token; with `user:pass@` it is the URL shape's to redact.
            if (lower.starts_with("https://") || lower.starts_with("http://")) && !v.contains('@') {
                return true;
            }
            is_number_or_duration(v) || is_path(v)
        }

        fn is_number_or_duration(v: &str) -> bool {
            let v = v.strip_prefix('-').unwrap_or(v);
            let digits = v
                .bytes()
                .take_while(|b| b.is_ascii_digit() || matches!(b, b'.' | b'_' | b','))
                .count();
            if digits == 0 || !v.as_bytes()[0].is_ascii_digit() {
                return false;
            }
            let unit = &v[digits..];
            const UNITS: [&str; 24] = [
                "", "ns", "us", "µs", "ms", "s", "sec", "secs", "seconds", "m", "min", "mins",
                "minutes", "h", "hr", "hrs", "hours", "d", "days", "w", "kb", "mb", "gb", "%",
            ];
            UNITS.contains(&unit.to_ascii_lowercase().as_str())
        }
    }

    proptest::proptest! {
        /// The in-place checks answer as the copying ones did, on values made of the words,
        /// prefixes and units they look for, in any case, with other bytes around them.
        #[test]
        fn the_checks_answer_as_first_written(
            value in "(changeme|Change_Me|CHANGE-me|placeholder|xXxX|\\*\\*\\*\\*|your|Example|true|NONE|env|\\$|process.ENV|os.environ|os.getenv|env\\(|Env\\.|secrets\\.|::|https://|HTTP://|@|<|>|\\{\\{|\\}\\}|%|-|[0-9]|\\.|_|,|ms|S|µs|MIN|h|%|/|\\./|~/|[A-Z]|[a-z]|é|\"|'){0,12}"
        ) {
            proptest::prop_assert_eq!(is_placeholder(&value), reference::is_placeholder(&value), "{:?}", value);
            proptest::prop_assert_eq!(is_plain_value(&value), reference::is_plain_value(&value), "{:?}", value);
        }
    }

    proptest::proptest! {
        /// The early-stopping count answers as the full count, on values of few and of many
        /// characters, ASCII and not, for every threshold the checks use and around them.
        #[test]
        fn distinct_characters_are_counted_as_in_full(
            value in "([a-d]|[A-Z0-9]|[é€ſ\u{212A}]|[\x00-\x7F]){0,80}",
            n in 0usize..=64,
        ) {
            proptest::prop_assert_eq!(has_distinct(&value, n), distinct(&value) >= n, "{:?} {}", value, n);
        }
    }

    #[test]
    fn the_empty_value_has_no_characters_and_at_least_none() {
        assert!(has_distinct("", 0));
        assert!(!has_distinct("", 1));
        assert!(has_distinct("aab", 2));
        assert!(!has_distinct("aab", 3));
    }

    #[test]
    fn configuration_values_are_plain() {
        for v in [
            "3600",
            "true",
            "False",
            "30s",
            "250ms",
            "${DB_PASSWORD}",
            "$TOKEN",
            "<your-token>",
            "changeme",
            "xxxxxxxxxxxx",
            "/run/secrets/db_password",
            "./key.pem",
            "~/.ssh/id_rsa",
            "{{ secrets.TOKEN }}",
            "process.env.API_KEY",
            "[redacted]",
            "1.5",
        ] {
            assert!(is_plain_value(v), "{v} should be plain");
        }
    }

    #[test]
    fn credentials_are_not_plain() {
        for v in [
            "hunter2!",
            "s3cr3t-Pa55",
            "8f2a9c1e7b6d4f3a",
            "Zm9vYmFyYmF6cXV4",
        ] {
            assert!(!is_plain_value(v), "{v} is a credential");
        }
    }

    #[test]
    fn token_shaped_fillers_are_placeholders() {
        assert!(is_placeholder(&format!("ghp_{}", "x".repeat(36))));
        assert!(is_placeholder("AKIAIOSFODNN7EXAMPLE"));
        assert!(!is_placeholder("ghp_jlKcHhK35KZsZ4i1DTTXlfA9IgGgRs2TpI56"));
    }

    #[test]
    fn generic_values_are_judged_by_shape() {
        assert!(is_secret_like("password", "hunter2"));
        assert!(!is_secret_like("password", "required"));
        assert!(!is_secret_like("password", "abc1"));
        assert!(is_secret_like("secret", "q8Zp2vR7kW3mN9xT"));
        assert!(!is_secret_like("secret", "my-app-name"));
    }
}
