//! Redaction runs the secret catalog (docs/security.md#redaction): every family's positives go,
//! in every place an agent prints them, with exactly the secret replaced; near-misses and
//! ordinary engineering text stay.

use guest::core::redact::{redact, redact_shapes};
use guest::core::secret_families::FAMILIES;
use guest::core::secret_spans::{families, find_spans};
use regex_lite::Regex;

/// Where a secret is planted: a name for the failure message, the text before and after.
/// The text after holds what must survive redaction: a full stop, a closing backtick, a
/// closing fence, the rest of a list.
const CONTEXTS: [(&str, &str, &str); 4] = [
    ("prose", "the key is ", ". Rotate it."),
    ("code block", "```sh\nexport X=", "\n```\n"),
    ("list item", "- ", "\n- next item\n"),
    ("code span", "use `", "` here."),
];

const CORPUS: &str = include_str!("support/engineering_text.md");

/// The secret part of a planted positive: the `secret` group's text where the pattern has
/// one, else the whole sample.
fn secret_of(pattern: &str, sample: &str) -> String {
    let re = Regex::new(pattern).expect("catalog patterns compile");
    re.captures(sample)
        .and_then(|c| c.name("secret").or_else(|| c.get(0)))
        .map_or_else(|| sample.to_owned(), |m| m.as_str().to_owned())
}

fn short(s: &str) -> String {
    s.chars().take(70).collect()
}

#[test]
fn every_positive_is_redacted_whole_in_every_context_and_its_surroundings_stay() {
    let mut problems = Vec::new();
    for family in FAMILIES {
        for positive in family.positives {
            let secret = secret_of(family.pattern, positive);
            for (place, before, after) in CONTEXTS {
                let text = format!("{before}{positive}{after}");
                for (engine, out) in [
                    ("redact", redact(&text).text),
                    ("shapes", redact_shapes(&text).text),
                ] {
                    // A secret's longest line: a multi-line key must lose every line.
                    let leaked = secret
                        .lines()
                        .filter(|l| l.len() >= 12)
                        .any(|line| out.contains(line))
                        || (secret.len() >= 8 && out.contains(secret.as_str()));
                    if leaked {
                        problems.push(format!(
                            "{} ({place}, {engine}): {} went out: {}",
                            family.label,
                            short(&secret),
                            short(&out)
                        ));
                    }
                    if !out.starts_with(before) || !out.ends_with(after) {
                        problems.push(format!(
                            "{} ({place}, {engine}): the text around the secret changed: {:?}",
                            family.label, out
                        ));
                    }
                    if !out.contains("[redacted") {
                        problems.push(format!("{} ({place}, {engine}): no marker", family.label));
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n({} problems)",
        problems.join("\n"),
        problems.len()
    );
}

#[test]
fn a_catalog_secret_gets_its_familys_label() {
    let text = "deploy with sk_live_51HxVdQKx9LmQz3PwR8tYc2VbN4mJ7kLpQ8rS0tUv then";
    let out = redact(text).text;
    assert!(out.contains("[redacted:stripe]"), "{out}");
    assert!(
        out.starts_with("deploy with ") && out.ends_with(" then"),
        "{out}"
    );
    assert!(redact(text).rules.contains(&"stripe"));
}

#[test]
fn no_near_miss_is_found_as_its_family() {
    let mut problems = Vec::new();
    for family in families() {
        for near in family.near_misses {
            for (place, before, after) in CONTEXTS {
                let text = format!("{before}{near}{after}");
                for span in find_spans(&text) {
                    if span.label == family.label {
                        problems.push(format!(
                            "{} ({place}): near-miss {} found as {}",
                            family.label,
                            short(near),
                            short(&text[span.start..span.end])
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn ordinary_engineering_text_is_not_redacted() {
    assert!(
        CORPUS.contains("TOKEN_TTL_SECONDS=3600"),
        "the corpus lost its TTL line"
    );
    let out = redact(CORPUS);
    assert!(
        out.rules.is_empty() && out.text == CORPUS,
        "rules {:?} fired on ordinary text; first change near: {}",
        out.rules,
        first_difference(CORPUS, &out.text)
    );
}

fn first_difference(a: &str, b: &str) -> String {
    let at = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i);
    let from = a[..at].char_indices().rev().nth(40).map_or(0, |(i, _)| i);
    format!("{:?}", &a[from..(at + 60).min(a.len())])
}

/// Generic shapes (docs/security.md#redaction): the input and exactly what goes out. Only the
/// secret is replaced: key names, quotes, backticks, full stops and the rest of the line stay.
const GENERIC: &[(&str, &str)] = &[
    (
        "db_password = hunter2x",
        "db_password = [redacted:password]",
    ),
    (
        "DB_Password: \"s3cr3t-Pa55\"",
        "DB_Password: \"[redacted:password]\"",
    ),
    (
        "aws_secret_access_key = wJalrXUtnFEMIK7MDENGbPxRfiCYzKq3m9TzQx4L",
        "aws_secret_access_key = [redacted:aws-secret-access-key]",
    ),
    ("password: Tr0ub4dor&3.", "password: [redacted:password]."),
    (
        "{\"api_key\": \"q8Zp2vR7kW3mN9xT4c\"}",
        "{\"api_key\": \"[redacted:secret]\"}",
    ),
    (
        "client_secret = 'Xk29fLq0PzR8vM3n'",
        "client_secret = '[redacted:secret]'",
    ),
    (
        "[db]\npassword = Pa55w0rd!\nhost = db",
        "[db]\npassword = [redacted:password]\nhost = db",
    ),
    (
        "apiKey := \"Q7mZ2xP9kL4vR8tN3w\"",
        "apiKey := \"[redacted:secret]\"",
    ),
    (
        "token => 'Q7mZ2xP9kL4vR8tN3w',",
        "token => '[redacted:secret]',",
    ),
    (
        "mysql -u root -phunter2x mydb",
        "mysql -u root -p[redacted:mysql-password] mydb",
    ),
    (
        "psql --password=Pa55w0rd9 -h db",
        "psql --password=[redacted:password] -h db",
    ),
    (
        "vault login --token s.Xk29fLq0PzR8vM3nQ",
        "vault login --token [redacted:cli-secret]",
    ),
    (
        "redis-cli --pass s3cr3tPa55 ping",
        "redis-cli --pass [redacted:cli-secret] ping",
    ),
    (
        "Server=db;User Id=sa;Password=Pa55w0rd9;Encrypt=true",
        "Server=db;User Id=sa;Password=[redacted:password];Encrypt=true",
    ),
    (
        "curl -H 'Cookie: session=8f2a9c1e7b6d4f3a' https://x.test/",
        "curl -H 'Cookie: [redacted:cookie]' https://x.test/",
    ),
    (
        "curl -H \"Authorization: Bearer ab12cd34ef\" https://x.test/",
        "curl -H \"Authorization: Bearer [redacted:bearer]\" https://x.test/",
    ),
    (
        "curl -H \"X-Api-Key: q8Zp2vR7kW3mN9xT\" https://x.test/",
        "curl -H \"X-Api-Key: [redacted]\" https://x.test/",
    ),
    (
        "curl -H 'X-Goog-Api-Key: Q7mZ2xP9kL4vR8tN3w' https://x.test/",
        "curl -H 'X-Goog-Api-Key: [redacted:secret]' https://x.test/",
    ),
    // A quoted value is the quoted span: the closing quote and the rest of the sentence stay
    // (the rest of the line went, and Telegram paired the code spans wrongly).
    (
        "Set Authorization: `Bearer ${token}` on each call.",
        "Set Authorization: `Bearer ${token}` on each call.",
    ),
    (
        "Set Authorization: `Bearer 4f9a8c7e2b1d6f3a5c8e9b0d` on each call.",
        "Set Authorization: `Bearer [redacted]` on each call.",
    ),
    (
        "Send X-Api-Key: \"q8Zp2vR7kW3mN9xT\" with it, then retry.",
        "Send X-Api-Key: [redacted] with it, then retry.",
    ),
    (
        "See `DB_PASSWORD=hunter2x`.",
        "See `DB_PASSWORD=[redacted]`.",
    ),
    (
        "Run `TOKEN=Q7mZ2xP9kL4vR8tN3w make`, then",
        "Run `TOKEN=[redacted] make`, then",
    ),
    (
        "(GITHUB_TOKEN=Q7mZ2xP9kL4vR8tN3w).",
        "(GITHUB_TOKEN=[redacted]).",
    ),
];

#[test]
fn generic_shapes_lose_their_value_and_keep_the_rest() {
    let wrong: Vec<String> = GENERIC
        .iter()
        .filter_map(|(input, expected)| {
            let out = redact(input).text;
            (out != *expected)
                .then(|| format!("{input:?}\n  gave     {out:?}\n  expected {expected:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Values that are not secrets stay, whatever the key (docs/security.md#redaction).
const PLAIN: &[&str] = &[
    "TOKEN_TTL_SECONDS=3600",
    "password: required",
    "db_password = ${DB_PASSWORD}",
    "API_KEY=$API_KEY",
    "api_key: <your-api-key>",
    "token: changeme",
    "secret: xxxxxxxxxxxxxxxx",
    "SESSION_TOKEN_TIMEOUT=30s",
    "ENABLE_TOKEN_CACHE=true",
    "private_key_path = /etc/ssl/private/app.key",
    "GITHUB_TOKEN_FILE=~/.config/gh/token",
    "token_url: https://auth.example.com/oauth/token",
    "\"token_type\": \"bearer\"",
    "mysql -u root -p mydb",
    "the password is stored in vault",
    "Cookie: a small file a site stores",
    "commit 880128c3ab96821c3f3e890d1c190aead0f8cda4",
    "id 3f2b8c1e-9a4d-4e6f-8b2a-1c3d5e7f9a0b",
    "Bearer authentication",
    "token token token token",
    // Code: a path through a type named after a secret is no assignment (the pipeline
    // benchmark's agent text once lost `Token::parse(line).map_err(|e|` to a marker).
    "let tokens = Token::parse(line).map_err(|e| e.at(n))?;",
    "use a::b::token::new;",
    "if secret == expected { return; }",
];

#[test]
fn plain_values_stay() {
    let changed: Vec<String> = PLAIN
        .iter()
        .filter_map(|text| {
            let out = redact(text).text;
            (out != *text).then(|| format!("{text:?} became {out:?}"))
        })
        .collect();
    assert!(changed.is_empty(), "{}", changed.join("\n"));
}

/// The config refuses a secret written literally (`secrets::contains_secret`, read by
/// `config/readers.rs` and `config/transports.rs`): every catalog positive is one, as
/// redaction knows it, so a Stripe or Hugging Face key in a config file is refused too.
#[test]
fn the_config_refuses_every_catalog_secret() {
    let missed: Vec<&str> = FAMILIES
        .iter()
        .flat_map(|f| f.positives.iter().map(move |p| (f.label, *p)))
        .filter(|(_, p)| !guest::core::secrets::contains_secret(p))
        .map(|(label, _)| label)
        .collect();
    assert!(missed.is_empty(), "config would accept: {missed:?}");
    for plain in PLAIN {
        assert!(
            !guest::core::secrets::contains_secret(plain),
            "config would refuse plain {plain:?}"
        );
    }
}
