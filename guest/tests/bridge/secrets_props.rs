//! The one list of secret shapes (docs/security.md#redaction, I3, I10): tokens of every documented
//! format are redacted in replies and refused in config files, by the same list.

use guest::core::redact::redact;
use guest::core::secrets::{SHAPES, contains_secret};
use guest::model::{ConfigContent, ConfigScope, ConfigSource, Level};
use proptest::prelude::*;

use crate::support::platforms;
use crate::support::secret_tokens;

fn load_config(sources: &[ConfigSource]) -> guest::core::config::LoadedConfig {
    guest::core::config::load_config(sources, &platforms::platforms())
}
use secret_tokens::{discord_token, token};

/// Text around a token as agents print it; none of it may join the token (a word byte
/// right before it, or a base64 byte right after it, would make it another string).
fn context() -> impl Strategy<Value = (&'static str, &'static str)> {
    prop::sample::select(
        &[
            ("", ""),
            ("use ", " to push."),
            ("{\"token\": \"", "\"}"),
            ("(`", "`)"),
            ("token=", "\n"),
            ("Authorization: Bearer ", "\r\n"),
            // The header's value runs to the end of the line: nothing after it survives.
            ("X-Api-Key: ", ""),
            ("2024-05-01 INFO key ", ", retrying"),
            ("日本語 ", " 🎉"),
        ][..],
    )
}

fn config_with(value: &str) -> Vec<ConfigSource> {
    let project = serde_json::json!({ "transports": { "telegram": { "label": value } } });
    // The user's own file: a project file may not set transport keys
    // (docs/security.md#project-files-only-narrow).
    vec![ConfigSource {
        scope: ConfigScope::Global,
        path: "/home/u/.pi/agent/bot-connect.json".into(),
        content: ConfigContent::Text(project.to_string()),
    }]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Redaction replaces the token wherever it sits and reports its shape's name; the text
    /// around it stays.
    #[test]
    fn every_shape_is_redacted_in_context((rule, token) in token(), (before, after) in context()) {
        let text = format!("{before}{token}{after}");
        let out = redact(&text);
        prop_assert!(!out.text.contains(&token), "{rule} not redacted: {:?}", out.text);
        // A context shape runs before the tokens (see `SHAPES`): in a header or after
        // `Bearer` the context's rule takes the token with the rest of the value.
        let by_context = match before {
            "Authorization: Bearer " => Some("bearer-header"),
            "X-Api-Key: " => Some("auth-header"),
            _ => None,
        };
        prop_assert!(
            out.rules.contains(&rule) || by_context.is_some_and(|r| out.rules.contains(&r)),
            "{rule} not reported: {:?}",
            out.rules
        );
        prop_assert!(out.text.starts_with(before) && out.text.ends_with(after), "{:?}", out.text);
    }

    /// Config refuses the same tokens: the list says so on its own (short tokens do not
    /// trip the entropy rule) and a config file holding one is an error that names the path.
    #[test]
    fn every_shape_is_refused_in_config((rule, token) in token(), (before, after) in context()) {
        let value = format!("{before}{token}{after}");
        prop_assert!(contains_secret(&value), "{rule}: {value:?}");
        let loaded = load_config(&config_with(&value));
        prop_assert!(
            loaded.notes.iter().any(|n| n.level == Level::Error
                && n.text.contains("transports.telegram.label: this looks like a secret")),
            "{rule}: {:?}",
            loaded.notes
        );
        for request in &loaded.transports {
            let shown = format!("{:?}", request.settings);
            prop_assert!(!shown.contains(&token));
        }
    }
}

/// Every Discord id length and every first digit, not left to chance: the first segment
/// starts with `M`, `N` or `O` and is 23, 24, 26 or 27 characters long.
#[test]
fn discord_tokens_of_every_id_length_and_first_digit_are_caught() {
    let mut seen = std::collections::BTreeSet::new();
    for len in 17..=20 {
        for first in 1..=9u8 {
            let id = format!("{first}{}", "0123456789".repeat(2).get(..len - 1).unwrap());
            let token = discord_token(&id, "GhIjKl", "abcdefghijklmnopqrstuvwxyz0_-");
            let segment = token.split('.').next().unwrap();
            seen.insert((segment.len(), segment.chars().next().unwrap()));
            let text = format!("bot token {token} in the log");
            let out = redact(&text);
            assert_eq!(
                out.text, "bot token [redacted:discord-token] in the log",
                "{id}"
            );
            assert_eq!(out.rules, ["discord-token"]);
            assert!(contains_secret(&token), "{id}");
        }
    }
    let lengths: std::collections::BTreeSet<usize> = seen.iter().map(|(l, _)| *l).collect();
    let firsts: std::collections::BTreeSet<char> = seen.iter().map(|(_, c)| *c).collect();
    assert_eq!(lengths.into_iter().collect::<Vec<_>>(), [23, 24, 26, 27]);
    assert_eq!(firsts.into_iter().collect::<Vec<_>>(), ['M', 'N', 'O']);
}

/// The generator above covers every shape of the list: a shape added without a generator
/// fails here.
#[test]
fn every_shape_has_a_generator_or_a_table_row() {
    let generated = [
        "private-key",
        "anthropic-key",
        "openai-key",
        "github-token",
        "slack-bot-token",
        "slack-app-token",
        "npm-token",
        "discord-token",
        "jwt",
        "aws-access-key",
        "google-api-key",
        "telegram-bot-token",
    ];
    let contextual = [
        (
            "telegram-bot-url",
            // A secret under 30 characters: only the `/bot` prefix marks it as a token (a
            // full-length one is taken by telegram-bot-token, glued to `bot` or not).
            "GET https://api.telegram.org/bot7123456789:AAHdqTcvCH1vGWJxfSeofSAs/getMe",
        ),
        ("auth-header", "X-Auth-Token: s3cr3t"),
        ("bearer-header", "Bearer abcdefghijklmnopqrstuvwxyz012345"),
        ("env-secret-assignment", "PASSWORD=hunter2"),
        ("url-credentials", "postgres://app:hunter2@db:5432/app"),
    ];
    for (rule, text) in contextual {
        assert_eq!(redact(text).rules, [rule], "{text}");
        assert!(contains_secret(text), "{text}");
    }
    let mut all: Vec<&str> = generated.to_vec();
    all.extend(contextual.iter().map(|(rule, _)| *rule));
    all.sort_unstable();
    let mut names: Vec<&str> = SHAPES.iter().map(|s| s.name).collect();
    names.sort_unstable();
    assert_eq!(all, names);
}

/// Strings that look close to a token but are not one stay as they are in replies and are
/// allowed in config (where nothing else refuses them).
#[test]
fn near_misses_are_neither_redacted_nor_refused() {
    let near = [
        // A 25-character first segment cannot come from a 17–20 digit id.
        "MTIzNDU2Nzg5MDEyMzQ1Njc4O.GhIjKl.abcdefghijklmnopqrstuvwxyz0",
        // `P` is not the first character of base64 of a digit.
        "PTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.abcdefghijklmnopqrstuvwxyz0",
        "12345:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ",
        "AKIAQWERTYUIOPASDFG",
        "the task-runner and sk-short",
        "API_KEY is set in the shell",
        "Bearer tokens are sent in the Authorization header",
    ];
    for text in near {
        assert_eq!(redact(text).text, text);
        assert!(!contains_secret(text), "{text}");
    }
}
