//! The one-pass redaction engine against the reference engine (every shape's regex applied
//! in list order, as redaction ran before): equal text and equal rule names on generated
//! text and on every table case (docs/security.md#redaction, I3, I36).

use guest::core::redact::redact;
use proptest::prelude::*;

use redact_reference::reference_redact;
use secret_tokens::any_token as token;

use crate::support::redact_reference;
use crate::support::secret_tokens;

/// Near-misses: a token cut, grown, broken or glued to a word, so matchers see the edges of
/// every length, class and boundary rule.
fn near_miss() -> impl Strategy<Value = String> {
    (token(), 0usize..8, any::<prop::sample::Index>()).prop_map(|((_, t), kind, index)| {
        let at = index.index(t.len().max(1));
        let (head, tail) = t.split_at(at);
        match kind {
            0 => t[..t.len() - 1].to_owned(),
            1 => t[1..].to_owned(),
            2 => format!("{head}.{tail}"),
            3 => format!("{head}_{tail}"),
            4 => format!("{head}\n{tail}"),
            5 => head.to_owned(),
            6 => format!("x{t}"),
            _ => format!("{t}x"),
        }
    })
}

/// Words and pieces that trigger shapes without being secrets, and pieces of the context
/// shapes (headers, assignments, URLs, key blocks) whole and broken.
const TRIGGERS: &[&str] = &[
    "token",
    "key",
    "secret",
    "Bearer",
    "bearer",
    "BEARER",
    "Bearer\n\n",
    "Authorization",
    "Authorization:",
    "authorization :",
    "AUTHORIZATION:\t",
    "X-Api-Key:",
    "x-auth-token:",
    "X-Access-Token\t:",
    "x-Authorization:",
    "Authorization: Basic dXNlcjpwYXNz",
    "Authorization:   ",
    "Authorization: Bearer ",
    "API_KEY",
    "MY_TOKEN",
    "PASSWORD",
    "passwd",
    "TOKEN=",
    "A_SECRET=\"",
    "B_TOKEN='",
    "PASSWORD='x y'",
    "export A_TOKEN=\"multi\nline\"",
    "A_TOKEN=B_PASSWORD='multi\nline'",
    "SECRET=",
    "9TOKEN=x",
    "aTOKEN=x",
    "sk-",
    "sk-ant-",
    "ghp_",
    "github_pat_",
    "xoxb-",
    "xapp-",
    "npm_",
    "eyJ",
    "AKIA",
    "ASIA",
    "AIza",
    "/bot",
    "/bot123456:",
    "://",
    "https://",
    "git+ssh://",
    "x1.2a://",
    "user:pass@",
    "postgres://u:p@h/db",
    "https://deploy:S3cret@git.example.com",
    "@",
    "=",
    "\"",
    "'",
    ":",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----",
    "-----BEGIN CERTIFICATE-----",
    "MIIEowIBAAKCAQEA",
    "MTIzNDU2Nzg5MDEyMzQ1Njc4",
    ".GhIjKl.",
    "123456789:",
    "abcdefghijklmnopqrstuvwxyz0123456789",
    "[redacted]",
    "[redacted:github-token]",
];

const UNICODE: &[&str] = &[
    "é",
    "日本語",
    "👨\u{200d}👩\u{200d}👧",
    "\u{a0}",
    "Ω",
    "\u{2028}",
];

/// What sits between fragments: often nothing, so tokens touch and overlap.
const SEPARATORS: &[&str] = &[
    "", "", "", " ", " ", "\n", "\r\n", "\t", "=", ":", "\"", "'", "-", "_", ".", "/", "@", "é",
    "\u{a0}", "\x0b", "\x0c", "\r", ": ", "://",
];

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => token().prop_map(|(_, t)| t),
        3 => near_miss(),
        4 => prop::sample::select(TRIGGERS).prop_map(str::to_owned),
        2 => "[a-zA-Z]{1,12}",
        1 => prop::sample::select(UNICODE).prop_map(str::to_owned),
        1 => "[0-9]{1,14}",
        1 => "[A-Za-z0-9_-]{1,40}",
        1 => "[A-Z_]{1,12}",
    ]
}

/// Mixtures of secrets, near-misses, trigger words, unicode and CRLF.
fn mixture() -> impl Strategy<Value = String> {
    prop::collection::vec((fragment(), prop::sample::select(SEPARATORS)), 0..24).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(f, sep)| f + sep)
            .collect::<String>()
    })
}

/// Cases per property: proptest's own `PROPTEST_CASES` when it is set (a long run:
/// `PROPTEST_CASES=20000 cargo test -p guest --test bridge redact_differential`), else 500.
/// 2,000 mixtures took over a minute of an unoptimised test build, a third of the suite's
/// time; the fuzzers (docs/fuzzing.md) read far more inputs through the same engine.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(500)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Any string at all, control characters and every plane included: no panic, same result.
    #[test]
    fn the_engine_equals_the_reference_on_any_string(text in "(?s).{0,300}") {
        prop_assert_eq!(redact(&text), reference_redact(&text), "input {:?}", text);
    }

    #[test]
    fn the_engine_equals_the_reference_on_mixtures(text in mixture()) {
        let engine = redact(&text);
        let reference = reference_redact(&text);
        prop_assert_eq!(&engine.text, &reference.text, "input {:?}", text);
        prop_assert_eq!(&engine.rules, &reference.rules, "input {:?}", text);
    }
}

/// Every redaction input of the table tests, and the edge cases the engine's regions and
/// matchers were built around.
const TABLE: &[&str] = &[
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz123456",
    "X-Api-Key: abc123def456",
    "Authorization: Basic dXNlcjpwYXNz",
    "export PI_TELEGRAM_TOKEN=\"123:secret\"",
    "MY_API_KEY=plainvalue",
    "token ghp_ABCDEFGHIJKLMNOPQRSTUVWX",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc+/=\n\nnext",
    "-----BEGIN EC PRIVATE KEY-----\r\nMIIEowIBAAKCAQEA\r\nabc+/=\r\nend of paste",
    "sk-ant-api03-abcdefghijklmnop",
    "sk-abcdefghijklmnopqrstuvwxyz",
    "sk-proj-abcdefghijklmnopqrstuvwxyz",
    "gho_abcdefghijklmnop1234",
    "xoxb-1234567890-abcdef",
    "xapp-1-A0123456789-abcdef",
    "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.abcdefghijklmnopqrstuvwxyz0",
    "eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeK",
    "AKIAABCDEFGHIJKLMNOP",
    "AIzaabcdefghijklmnopqrstuvwxyz012345678",
    "123456789:AAHabcdefghijklmnopqrstuvwxyz012345",
    "https://api.telegram.org/bot123456789:AAHabcdefghijklmnopqrstuvwxyz012345/getMe",
    "x-auth-token: s3cr3t",
    "bearer abcdefghijklmnopqrstuvwxyz==",
    "DB_PASSWORD='hunter2 x'",
    // A quoted value after another assignment, over a line break (found by fuzzing).
    "APIKEY======'hunter2\nstill the password' after",
    "postgres://admin:hunter2@db:5432/app",
    "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuv and ghp_abcdefghijklmnopqrstuw, sk-abcdefghijklmnopqrstuvwxyz",
    "The task-runner uses sk-short, ghp_x and Bearer tokens; see https://example.com/a@b.",
    "key sk-abcdefghijklmnopqrstuvwxyz",
    // A replacement ends a word right before another shape's start.
    "ghp_AAAAAAAAAAAAAAAAAAAA_API_KEY=foo",
    // A later shape starts before an earlier shape's match inside it.
    "sk-abcd-sk-ant-abcdefghijklmnopqrstu",
    "https://user:API_KEY=secret@host",
    // Credentials a value runs into, quotes in them, and after an unclosed quote (found by
    // fuzzing the pipeline).
    "GITHUB_TOKEN=ghp_x:xhttps://'deploy:Sup3rS3cret@git.example.com/r'",
    "TOKEN=a://x:y@z://u'v:p@q rest",
    "A_TOKEN=B_PASSWORD=https://u=':Sup3rS3cret@host",
    "TOKEN=https://u'v@host:p'q@h",
    // A bearer value a value runs into (found in review), with credentials before it.
    "AUTH_TOKEN=Bearer eyJhbGciOiJIUzI1NiJ9.abcdefghijklmnop next",
    "TOKEN=x://'u:p@Bearer\n\nabcdefghijklmnopqrstuvwxyz=='q",
    "TOKEN=aBearer abcdefghijklmnopqrstuvwxyz",
    "TOKEN=Bearer://u:p@h Bearer abcdefghijklmnopqrstuvwxyz",
    // A header whose last word is `Bearer`, its value on a later line (found in review).
    "X-Api-Key: abc Bearer\n4f9a8c7e2b1d6f3a5c8e9b0d7a2f4c6e rest\nnext",
    "Authorization: Bearer \t\n\n4f9a8c7e2b1d6f3a5c8e9b0d7a2f4c6e== rest\nnext",
    "A_TOKEN=\"x\nX-Api-Key: y Bearer\n4f9a8c7e2b1d6f3a5c8e9b0d7a2f4c6e\" z\" w",
    "A_TOKEN=\"x\nX-Api-Key: y Bearer\n4f9a8c7e2b1d6f3a5c8e9b0d7a2f4c6e\" z\nw\" v",
    "B_TOKEN='x\nx-auth-token: Bearer\r\nabcdefghijklmnopqrstuvwxyz' y\n' z",
    "X-Api-Key: a bearer\nshort\nX-Api-Key: b BEARER\n\nabcdefghijklmnopqrstuvwxyz tail",
    "Authorization: a Bearer\n4f9a8c7e2b1d6f3a5c8e9b0d7a2f4c6e b bearer\n5e0b9d8f3c2e7a4b6d9f0c1e8b3a5d7f rest\nnext",
    "X-Api-Key: Bearer\nabcdefghijklmnopqrstuvwxyz x Bearer\nshort\nnext Bearer abcdefghijklmnopqrstuvwxyz",
    // Header values: blank only, bearer, over CRLF, two on a line.
    "Authorization:   \nnext",
    "Authorization:\t\r\nnext",
    "Authorization: X-Api-Key: v",
    "Set Authorization: `Bearer ${token}` on each call.",
    "Set Authorization: `Bearer 4f9a8c7e2b1d6f3a5c8e9b0d` on each call.",
    "X-Api-Key: \"q8Zp2vR7kW3mN9xT\" rest",
    "X-Api-Key: 'a' 'b'",
    "X-Api-Key: '' rest",
    "\"Authorization: `Bearer x`\" rest",
    "AUTHORIZATION : bEaReR abcdefghijklmnopqrstuvwxyz",
    // Bearer across lines; a quoted value across lines and past a header.
    "Bearer\n\n  abcdefghijklmnopqrstuvwxyz012345",
    "A_TOKEN=\"one\nAuthorization: two\"\nthree\" four\nfive",
    "A_TOKEN=\"one\nB_TOKEN=\"two\"\nthree\"",
    "X_TOKEN=\"unclosed\nand more",
    "TOKEN=abc PASSWORD=hunter2 API_KEY=x 9TOKEN=y aTOKEN=z",
    // Schemes with non-word characters; a scheme starting after a digit.
    "git+ssh://a:b@c x1.2a://u:p@h .x://u:p@h",
    // Every Discord first-segment length, 25 included.
    "MTIzNDU2Nzg5MDEyMzQ1Njc.GhIjKl.abcdefghijklmnopqrstuvwxyz0 MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GhIjKl.abcdefghijklmnopqrstuvwxyz0 MTIzNDU2Nzg5MDEyMzQ1Njc4O.GhIjKl.abcdefghijklmnopqrstuvwxyz0",
    "ODAzNTExMTAyMjQ2Nzg5MTI.GhIjKl.abcdefghijklmnopqrstuvwxyz0 OTg3NjU0MzIxMDk4NzY1NDMyMTA.GhIjKl.abcdefghijklmnopqrstuvwxyz0",
    "npm_abcdefghijklmnopqrstuvwxyz0123456789_ AKIAABCDEFGHIJKLMNOPQ AKIAABCDEFGHIJKLMNOPa",
    "/bot1234567890123:AAHabcdefghijklmnopqrstuvwxyz012345/",
    "日本語 ghp_ABCDEFGHIJKLMNOPQRSTUVWX é\u{a0}Bearer\u{a0}abcdefghijklmnopqrstuvwxyz",
    "",
];

#[test]
fn the_engine_equals_the_reference_on_every_table_case() {
    for text in TABLE {
        let engine = redact(text);
        let reference = reference_redact(text);
        assert_eq!(engine, reference, "{text:?}");
    }
    // And all of them in one text, so regions meet and merge.
    for sep in ["", " ", "\n", "\r\n"] {
        let joined = TABLE.join(sep);
        assert_eq!(
            redact(&joined),
            reference_redact(&joined),
            "joined by {sep:?}"
        );
    }
}
