//! Properties of redaction with the whole catalog (docs/security.md#redaction): idempotent, never
//! grows the text except by its markers, never splits a character (or a UTF-16 surrogate pair),
//! changes nothing when nothing matches, and a secret split by an invisible character is replaced
//! whole.

use guest::core::redact::{redact, redact_shapes};
use guest::core::secret_families::FAMILIES;
use guest::core::secrets::markers;
use proptest::prelude::*;

/// Every positive sample of the catalog (single-line ones: the pieces are joined by blanks
/// and markup, which a multi-line key block does not survive as one secret).
fn positive() -> impl Strategy<Value = String> {
    positive_with_secret().prop_map(|(sample, _)| sample)
}

/// A positive sample and its secret part (the `secret` group where the family has one).
fn positive_with_secret() -> impl Strategy<Value = (String, String)> {
    let all: Vec<(String, String)> = FAMILIES
        .iter()
        .flat_map(|f| {
            let re = regex_lite::Regex::new(f.pattern).expect("catalog patterns compile");
            f.positives
                .iter()
                .filter(|p| !p.contains('\n'))
                .map(move |p| {
                    let secret = re
                        .captures(p)
                        .and_then(|c| c.name("secret").or_else(|| c.get(0)))
                        .map_or(*p, |m| m.as_str());
                    ((*p).to_owned(), secret.to_owned())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    prop::sample::select(all)
}

/// Pieces of agent text: prose, markup, key names, plain values, non-ASCII (a character of
/// two, three and four UTF-8 bytes; the emoji is a surrogate pair in UTF-16) and invisible
/// characters.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => positive(),
        2 => prop::sample::select(vec![
            " ", "\n", "the ", "token ", "key", "`", "**", "_", "~", "[", "](", ")", "\"", "'",
            ": ", "=", "password", "db_password = ", "API_KEY=", "Bearer ", "Cookie: ",
            "mysql -p", "--token ", "3600", "${VAR}", "é", "日本", "🎉", "\u{200B}", "\u{2060}",
            "\u{00AD}", "\u{FEFF}", ".", ",", "-", "ghp_", "sk_live_", "eyJ", "://", "@",
        ])
        .prop_map(str::to_owned),
        1 => "[A-Za-z0-9+/_-]{1,24}",
    ]
}

fn agent_text() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..24).prop_map(|v| v.concat())
}

/// Text that holds no secret of any shape or family: lower-case words, digits and blanks
/// with punctuation, non-ASCII, markup, and invisible characters between words.
fn plain_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            "[a-z]{1,9}",
            "[0-9]{1,4}",
            prop::sample::select(vec![
                " ",
                "\n",
                ". ",
                ", ",
                "`",
                "**",
                "_",
                "- ",
                "# ",
                "é",
                "日本",
                "🎉",
                "(",
                ")",
                " \u{200B}",
                "\u{00AD} ",
            ])
            .prop_map(str::to_owned),
        ],
        0..40,
    )
    .prop_map(|v| v.concat())
}

/// `text` without redaction's markers.
fn without_markers(text: &str) -> String {
    markers().fold(text.to_owned(), |t, m| t.replace(m, ""))
}

/// Cases per property: proptest's own `PROPTEST_CASES` when it is set (a long run:
/// `PROPTEST_CASES=20000 cargo test -p guest --test bridge redact_props`), else 384. Without
/// this the explicit count overrode the variable, and a long run silently ran 384.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(384)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn redaction_is_idempotent(text in agent_text()) {
        for engine in [redact, redact_shapes] {
            let once = engine(&text).text;
            let twice = engine(&once).text;
            prop_assert_eq!(&twice, &once, "a second redaction changed the text of {:?}", text);
        }
    }

    #[test]
    fn redaction_grows_text_only_by_its_markers(text in agent_text()) {
        let out = redact(&text).text;
        let bare = without_markers(&out);
        prop_assert!(
            bare.len() <= text.len(),
            "{} bytes besides markers from {} bytes: {:?} -> {:?}", bare.len(), text.len(), text, out
        );
    }

    /// A cut inside a character would make a different character (or none) in the output;
    /// so every non-ASCII character sent is one the input holds, and the output's UTF-16 is
    /// whole surrogate pairs.
    #[test]
    fn redaction_never_splits_a_character(text in agent_text()) {
        let out = redact(&text).text;
        for c in out.chars().filter(|c| !c.is_ascii()) {
            prop_assert!(text.contains(c), "{:?} is not in the input {:?}", c, text);
        }
        prop_assert!(String::from_utf16(&out.encode_utf16().collect::<Vec<_>>()).is_ok());
    }

    #[test]
    fn nothing_matches_so_nothing_changes(text in plain_text()) {
        let out = redact(&text);
        prop_assert_eq!(&out.text, &text);
        prop_assert!(out.rules.is_empty());
        prop_assert_eq!(redact_shapes(&text).text, text);
    }

    /// An invisible character anywhere inside a secret does not split it
    /// (docs/security.md#redaction).
    #[test]
    fn an_invisible_character_does_not_split_a_secret(
        (sample, secret) in positive_with_secret(),
        cut in any::<prop::sample::Index>(),
        hidden in prop::sample::select(vec!['\u{200B}', '\u{200D}', '\u{202C}', '\u{2060}', '\u{2063}', '\u{FEFF}', '\u{00AD}']),
    ) {
        // The cut falls inside the secret part of the sample.
        let offset = sample.find(&secret).unwrap_or(0);
        let at = cut.index(secret.len());
        let at = (0..=at).rev().find(|i| secret.is_char_boundary(*i)).unwrap_or(0);
        let split = format!("{}{hidden}{}", &sample[..offset + at], &sample[offset + at..]);
        let text = format!("see {split} now");
        for engine in [redact, redact_shapes] {
            let out = engine(&text).text;
            prop_assert!(out.contains("[redacted"), "{:?} went out as {:?}", split, out);
            // Neither half of a secret long enough to be one may go out.
            for half in [&secret[..at], &secret[at..]] {
                if half.len() >= 24 {
                    prop_assert!(!out.contains(half), "half of {:?} went out: {:?}", secret, out);
                }
            }
            prop_assert!(out.starts_with("see ") && out.ends_with(" now"), "{:?}", out);
        }
    }
}

#[test]
fn the_issues_invisible_character_cases_are_redacted_whole() {
    let telegram = "123456789:AA\u{2060}HdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1";
    let github = "ghp_jlKcHhK35KZs\u{200B}Zs4i1DTTXlfA9IgGgRs2TpI56";
    let github_shy = "ghp_jlKcHhK35KZsZ4i1DTTXl\u{00AD}fA9IgGgRs2TpI56";
    for token in [telegram, github, github_shy] {
        let out = redact(&format!("token {token}.")).text;
        assert!(
            !out.contains("fA9IgGgRs2TpI56") && !out.contains("HdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1"),
            "{out}"
        );
        assert!(out.ends_with('.'), "{out}");
    }
}

/// Every marker redaction writes is known as one from inside it (`secret_spans.rs` lists the
/// shapes' labels itself): a keyword in a marker it did not know (`token` in
/// `[redacted:github-token]`) could start a family's match in redaction's own output.
#[test]
fn every_marker_is_known_from_inside_it() {
    use guest::core::secret_spans::marker_end;
    let mut checked = 0;
    for marker in markers() {
        let text = format!("x {marker} y");
        let end = 2 + marker.len();
        for at in 3..end {
            assert_eq!(marker_end(&text, at), Some(end), "{marker} at {at}");
            checked += 1;
        }
        assert_eq!(marker_end(&text, end), None, "{marker} past its end");
    }
    assert!(
        checked > 1000,
        "only {checked} positions: the markers went missing"
    );
}
