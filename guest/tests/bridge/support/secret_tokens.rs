//! Tokens of every shape of the shared list, as each platform issues them.

// Each test module uses only some helpers.
#![allow(dead_code)]

use proptest::prelude::*;

/// A strategy for strings matching `pattern` (a literal of this file).
pub fn re(pattern: &str) -> proptest::string::RegexGeneratorStrategy<String> {
    proptest::string::string_regex(pattern).expect("test pattern")
}

/// `count` (a regex repetition such as `6` or `27,38`) base64url characters.
pub fn b64(count: &str) -> proptest::string::RegexGeneratorStrategy<String> {
    re(&format!("[A-Za-z0-9_-]{{{count}}}"))
}

/// Standard base64 without padding, as Discord encodes a bot id.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

/// A Discord bot token for `id`: base64(id) . timestamp . HMAC.
pub fn discord_token(id: &str, stamp: &str, mac: &str) -> String {
    format!("{}.{stamp}.{mac}", base64(id.as_bytes()))
}

/// Bot ids of every length Discord issues (17–20 digits), any first digit.
pub fn discord_id() -> impl Strategy<Value = String> {
    (17usize..=20).prop_flat_map(|len| re(&format!("[1-9][0-9]{{{}}}", len - 1)))
}

/// A token of one shape, with the rule name that must report it.
///
/// Random base64url can hold `-sk-…` or `-ghp_…`, which an earlier shape of the list then
/// takes first (the list's order is the original's); real tokens hold such a run about once
/// in 10^5. Those draws are left out so that each token is reported under its own shape.
pub fn token() -> impl Strategy<Value = (&'static str, String)> {
    any_token().prop_filter("an earlier shape's prefix inside the token", |(_, t)| {
        !EMBEDDED_PREFIXES.iter().any(|p| t[1..].contains(p))
    })
}

/// Prefixes of shapes that can start after a `-` inside another token.
const EMBEDDED_PREFIXES: [&str; 12] = [
    "-sk-",
    "-ghp_",
    "-gho_",
    "-ghu_",
    "-ghs_",
    "-ghr_",
    "-github_pat_",
    "-xox",
    "-xapp-",
    "-npm_",
    "-eyJ",
    "-AIza",
];

pub fn any_token() -> impl Strategy<Value = (&'static str, String)> {
    prop_oneof![
        (discord_id(), b64("6"), b64("27,38"))
            .prop_map(|(id, s, m)| ("discord-token", discord_token(&id, &s, &m))),
        ("[1-9][0-9]{5,11}", "AA[A-Za-z0-9_-]{33}")
            .prop_map(|(id, s)| ("telegram-bot-token", format!("{id}:{s}"))),
        (
            "[abcdeprs]",
            "[0-9]{10,13}",
            "[0-9]{10,13}",
            "[A-Za-z0-9]{24}"
        )
            .prop_map(|(k, a, b, c)| ("slack-bot-token", format!("xox{k}-{a}-{b}-{c}"))),
        ("[A-Z0-9]{11}", "[0-9]{13}", "[a-f0-9]{64}")
            .prop_map(|(a, b, c)| ("slack-app-token", format!("xapp-1-{a}-{b}-{c}"))),
        ("[pousr]", "[A-Za-z0-9]{36}")
            .prop_map(|(k, s)| ("github-token", format!("gh{k}_{s}"))),
        ("[A-Za-z0-9]{22}", "[A-Za-z0-9]{59}")
            .prop_map(|(a, b)| ("github-token", format!("github_pat_{a}_{b}"))),
        "[A-Za-z0-9]{48}".prop_map(|s| ("openai-key", format!("sk-{s}"))),
        ("(proj|svcacct|admin|None)", b64("40,160"))
            .prop_map(|(p, s)| ("openai-key", format!("sk-{p}-{s}"))),
        ("(api03|admin01|oat01)", b64("95"))
            .prop_map(|(p, s)| ("anthropic-key", format!("sk-ant-{p}-{s}AA"))),
        ("(AKIA|ASIA)", "[A-Z0-9]{16}")
            .prop_map(|(p, s)| ("aws-access-key", format!("{p}{s}"))),
        b64("35").prop_map(|s| ("google-api-key", format!("AIza{s}"))),
        "[A-Za-z0-9]{36}".prop_map(|s| ("npm-token", format!("npm_{s}"))),
        (b64("10,40"), b64("10,200"), b64("43"))
            .prop_map(|(h, p, s)| ("jwt", format!("eyJ{h}.eyJ{p}.{s}"))),
        (
            "(RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP |)",
            prop::collection::vec("[A-Za-z0-9+/]{64}", 1..5),
            any::<bool>()
        )
            .prop_map(|(label, lines, crlf)| {
                let block = if label == "PGP " { " BLOCK" } else { "" };
                let eol = if crlf { "\r\n" } else { "\n" };
                let body = lines.join(eol);
                (
                    "private-key",
                    format!(
                        "-----BEGIN {label}PRIVATE KEY{block}-----{eol}{body}{eol}-----END {label}PRIVATE KEY{block}-----"
                    ),
                )
            }),
    ]
}
