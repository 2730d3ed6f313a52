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
//! `BOT_CONNECT_WRITE_DOCS=1 cargo test -p guest --test secret_families` to write it; without
//! the variable the test fails when the file and the table disagree.

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
         BOT_CONNECT_WRITE_DOCS=1 cargo test -p guest --test secret_families\n     \
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
        "{} is out of date with the catalog: run `{WRITE_DOCS}=1 cargo test -p guest --test secret_families` and commit the file",
        path.display()
    );
}

/// About 10 KiB of what an agent prints on an ordinary day: release notes with commit ids,
/// request UUIDs, an env file whose secrets are references, lockfile integrity hashes,
/// docker digests, a data URI and a base64 font, minified JS, paths and plain URLs. Its
/// random parts were generated once, from a fixed seed, and pasted here.
const CORPUS: &str = r#"## Release notes: 2.14.0

The deploy at commit 880128c3ab96821c3f3e890d1c190aead0f8cda4 rolled out to the Heroku staging app first; the release
(v142) was promoted after `git revert 4b753cd` fixed the Stripe webhook retry loop. Merge
pull request #4821 from dev/rotate-credentials (squashed as cc5e7c3b6646) rotated the Twilio,
SendGrid and Datadog credentials; the new values live in the vault, not in this file.

```text
bd27555d35a7e9cb023528a9b8b9342efe6fede0 docs(deps): drop the old token path
170318e34c89edafb04eec4b672506188b5a8856 docs(redact): handle empty replies
6570856911bed6587bf2cfdd010c00b5f353739e fix(redact): cache the schema
b982b210c1520f0b112e086eebea38d3fc863d9b chore(ci): cache the schema
19a34adb90a57fabe4440872d5a169ebb126499b fix(redact): cache the schema
2cb348a3069023e887318ce87e218753ec1ba9e5 docs(deps): handle empty replies
```

Request ids from the incident (all UUIDs):

- `4bf5a6e8-eccd-421c-9a53-d17ebd6a4f96` at 2026-11-10T08:46:33.986Z, status 502, 1834 ms
- `0793baba-12e8-46c1-92de-7577ffa3ffe5` at 2026-11-11T08:51:15.434Z, status 502, 1834 ms
- `4a7f28ef-27f3-4e45-b208-f1d5bd6bc13f` at 2026-11-12T08:52:58.533Z, status 502, 1834 ms
- `bad3569b-1032-4628-a8b8-b556dd1091b7` at 2026-11-13T08:27:23.415Z, status 502, 1834 ms
- `a92a9994-e4fc-4dad-b9a9-4cdd0f74cd3b` at 2026-11-14T08:27:47.389Z, status 502, 1834 ms

Environment, as the service prints it on start (secrets are references, never values):

```sh
TOKEN_TTL_SECONDS=3600
SESSION_TIMEOUT_MS=900000
AWS_REGION=us-east-1
AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}
AWS_PROFILE=deploy-ci
DD_SITE=datadoghq.eu
DD_API_KEY=${DD_API_KEY}
DATADOG_ENV=production
HEROKU_APP_NAME=acme-staging-eu
STRIPE_API_VERSION=2024-06-20
SENTRY_ENVIRONMENT=production
GITHUB_SHA=a7419be54d3fb2f0e2dfe4ff2757ab177bd73e69
GITHUB_REF=refs/heads/main
VAULT_ADDR=https://vault.internal.example:8200
VAULT_TOKEN_TTL=768h
API_KEY=<your-api-key>
OPENAI_MODEL=gpt-4o-mini
ANTHROPIC_MAX_TOKENS=4096
SLACK_CHANNEL=#deploys
TWILIO_REGION=ie1
MAILGUN_DOMAIN=mg.example.com
CLOUDFLARE_ZONE=example.com
NETLIFY_SITE_NAME=acme-docs
DISCORD_GUILD_ID=1122334455667788990
TELEGRAM_CHAT_ID=-1001234567890
HEROKU_APP_ID=21bd7cff-49f2-43b1-afb5-85206ef674ee
HEROKU_SLUG_COMMIT=002945647fc694229dc9b48346ab6a9be3694802
SNYK_ORG_ID=3696d73d-ecd0-40b3-813a-8e4e0401021e
CLOUDFLARE_ACCOUNT_ID=7752c96018e1b6b1404961a22692b7ae
MIXPANEL_PROJECT_ID=8069632
SENTRY_RELEASE=662650f358985680474d1db01e5685e1d30a6972
DATADOG_TRACE_ID=f2643788919b89301c9dfd29486d6d60
GITEA_COMMIT=c810a4da60d1639be18d4a17c7bde4f5da8f7862
```

From package-lock.json:

```json
    "node_modules/react": {
      "version": "18.3.1",
      "resolved": "https://registry.npmjs.org/react/-/react-18.3.1.tgz",
      "integrity": "sha512-iSUOwSpBEUpQgzhJ9g2FUrrpPPUsXhyKocXdVKS0eA7kd0ozmkVl4ZHA5ogye5EjbzZXhWD4F7obkx2OIHltlw==",
      "dev": true
    },
    "node_modules/lodash": {
      "version": "4.17.21",
      "resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",
      "integrity": "sha512-ZYHgpNe2u/0JS9uHgi05uEF7aHsJ9VHd+8gvrUrFTbPUdzrXBJXanX47cMCBPsMmmvuaPdrXXs+4XhHgruI+Eg==",
      "dev": true
    },
    "node_modules/@types/node": {
      "version": "20.14.2",
      "resolved": "https://registry.npmjs.org/@types/node/-/node-20.14.2.tgz",
      "integrity": "sha512-DH9lqXR7UOPFexuXNmG15/rqzOEong62/Tk8C0LJY7OyGrv2FAaA6Yu9tSawAmb5EZKNcjn3YROjF6yO5DoVig==",
      "dev": true
    },
    "node_modules/esbuild": {
      "version": "0.21.5",
      "resolved": "https://registry.npmjs.org/esbuild/-/esbuild-0.21.5.tgz",
      "integrity": "sha512-zNyoqnxDqbyF3Q/P+sDO0ymTtHyTtpWNcEMRQj8lkAiGulO1GjdyOjkyrIf1sM1wwgICkesI9hohPomAQWOAmw==",
      "dev": true
    },
```

yarn.lock still pins `left-pad@1.3.0` with `integrity sha1-aS3PvHTsFW5aWIYowLddn181xKY=`, and the
page loads its bundle with `integrity="sha384-ph5hE4JRaNgvYFR7z6xOanUIb3XR12nk9+noA0Bk0g3CJgG2EDaisBdsvNNBsPmq"`.

Cargo.lock and go.sum:

```toml
[[package]]
name = "serde"
version = "1.21.6"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "7de2e6789dbd89fb491c0cbe48e72b8eafca652f2b242918987461524f88d3a5"

[[package]]
name = "regex-lite"
version = "1.10.3"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "3367592055829ed0cdc29be0f51500c21a9018b278665f8274c781c1161812e4"

[[package]]
name = "tokio"
version = "1.36.4"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "9b9bcada7c6a59041c72adbd8ec40372bb6ee7385ff51ae825372147019c012a"

```

```text
golang.org/x/net v0.25.0 h1:3PPSe3kYtqXtfXDTprxsi3plgQb/vL2vEZnm+UR3rbg=
golang.org/x/net v0.25.0/go.mod h1:/LSOHArmIR7B8H7oCtobIADjqHbSe7SfzgJ7ku2li+g=
github.com/stretchr/testify v1.9.0 h1:egPjWJkezTR6UGbAL2HhZ1zXIVkli1lbefWtwUmVLfY=
```

Docker:

```console
$ docker pull ghcr.io/acme/bridge:2.14.0
2.14.0: Pulling from acme/bridge
c872c5fb18a2: Pull complete
a1401ad0fdb0: Pull complete
7805c35ac44e: Pull complete
Digest: sha256:494b2683fa186eab913785af3158597e7aa6a6809bb0a0bddfc8b4e241f601ce
Status: Downloaded newer image for ghcr.io/acme/bridge:2.14.0
$ docker inspect --format '{{.Id}}' acme/bridge
sha256:3ed3b89b40e48297c8517f05b25f61984c66993c8131fc5dc2f47fca50f2a80f
```

The Kubernetes manifest pins `image: ghcr.io/acme/bridge@sha256:83e35a51192ed4eefaf694a64cb16e1c55f23835bbb7863fee037ad155054379`, and the
Git LFS pointer for the demo video reads `oid sha256:74fbabbd99db74b54db9ac39c6d869f77647f13c94b893e6d485c083493a3f3d` with `size 48213377`.

The SSH host key fingerprint is `SHA256:59BroKCICxTIwET4c9XGKEaYK7uDU9jnjDDoFiTogvE`; the deploy key is public:
`ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE0cfTDg4VUKY7wmUFbTZ/NLaplVZaXsyON4x2ynRik0 deploy@ci`.

The badge is inlined as a data URI:

<img alt="build" src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUuEgC+UsT0VPFYvlXSHZF6KJbOhwsL2uJr9sTiyORI9whiGkZAlkw4R2Cf5zAOrhk3AqTEvLk0BG3lTqQ2oRHtpuLxy/TMEXmFPkKUu8SMWYdpzkChOQ0PwFfGscFaYAOJdkfs8jOWljnpnrKPZ+srtM/oY1EyoJjSEqrlS58zVM0bAwNMO5lBovBZTxIFLUN1RAm4jd4mSx2IDnbH5QLsNaWD657p6bCRO7m4N7/fkK1NQmGFjREMZ3q+MOIpUOgU19bF7tQIkEKsiFqAbUJSpSG3yWlZacNtL7jN7OS5qArgEn+AsefWSESxCbScCxjSyDUm9PElGdf/8CS3ucHn0Z40PXda3S46UyekuDMLfq56368rBHdXhrEQMQ9L82+0LuGfpT2v9f3qp/DQGXgXiOgbhQmcCDHFLB0fi57ej4+2rDXah/ow2cEaSRrcjbr2XKoBEzZR87PUkncbAtvgauWxZwiC2U+tovyLU8/SpxzJarGmHbinIXL3x0Kbw+XiqVaI2zunjaflmbmWXFgROJ2caVWVvwPpIdyQKXpy0TZaMNEpEiL+/z3ALZe01+S83Oj+McOsCFUb3psNHc30ElV2ZRlDBgZElQ/ImYJqJbSeBgz0UeED7SfTYBLhmPkSdVxVlgyIhk/4UM6EpLLA9eE7RaLFSsqXynbDS7Mqqxiu4ISBP7zZgu8SmVX+RSVTryqHC6LtYwrJN8waxa8+8w6LetGRa42OC3wkA4JAXolPBD75uzPsgB0rCVoIYrCDw0fnNtN3FvBBAi1oHttvEYrvnEvqpiAyRAeDr7PbYZBFU3Kp4rJVvI17G+mvE2ystUqEpkvWtTsPMmzVk+KXMXuQIDlHfB67+4qkXOQQNsptcyJzLSxkKq84Q5f44L5Tn4GI+Nl+wFdIOYnyU+JwohOb3Gl0XuVB/W1w0=">

and the icon font as base64 in the stylesheet:

```css
@font-face{font-family:icons;src:url(data:font/woff2;base64,
D0oL+KaLl5z8FnGJayEi4vkEjAWthjHg6845SZ7p/St/4rZ/5iuaNOFwfLTdzdmZLpSW2T4MHmpB
mK0iFcyetg4CFnBLlYr93zutrlk/IqEPtJ2fqYeh5t758nwG5gXzXn/scpzDIyr1zuCVCe0EGSU/
ZA7Orvt77qOU4HNwW6fJN/NCXDCVmvcRzN08CO4q80hbmIOmWhAa9djDX0PojcCGfhTM4TOPJRrC
HzqMIjuYpl2CalmQCd3jcUZc+aAPAAn8kC/5NtEmxtiu8NweKMufA2Xzm07P/LoJga2P6fu9rwcY
LLW1to/c8moWCJW90fGuvoSokAMgIuYF6xqr4m4vpkJCllclY+k3ReU0Ej3ux80puCevdqxXVlbz
nyIRbt9d1GV1OgtrhMW+FRh9p0+t/XuTfuSBG3mMjDzePZ2qKQL4vUqdifVL098Q5dG+pJ0wuqw5
kxSnH1rO38WhahWO6hjMjNLRAMyM36GZniNhrALZUqgrsvRhPiez10jYcYrvMnMHmAiRNuz5vF9S
6W+gHKWM7tT4mCaBJMKsR42twIFo4qSRhREM9+XRH0Cgz4uJgd31xtLaV+DmpYr+EH7oCDRyLMTZ
bKaoZla1xtnxHbTcfSkbVAcAozi88vqgbVVGdIXuQpj2gvuljSnQaq+TdgfOVZj+so7NBiKsKjSI
eIknG5eheorAJwLu3zf68Z8+FPmcB6GBuVrft+Dy3Don6UebFKblQ07BKh3NTYfhcOngD2ZtA4hF
L2mtBSejS/WJmePL30w8cPs+xQ8Kkg7OVDZbvCcG
) format("woff2")}
```

The minified vendor chunk (first line):

```js
!function(e,t){"object"==typeof exports&&"undefined"!=typeof module?module.exports=t():"function"==typeof define&&define.amd?define(t):(e="undefined"!=typeof globalThis?globalThis:e||self).acme=t()}(this,function(){"use strict";var e={token:null,ttl:3600,refresh:function(t){return t&&t.expires_in?Math.min(t.expires_in,this.ttl):this.ttl}},n=/^[A-Za-z0-9_-]{20,}$/,r=function(t){return n.test(t)?"ok":"bad"};function o(t,i){for(var a=0,s=t.length;a<s;a++)if(i(t[a],a))return t[a]}var u="sk_"+"live_"+"placeholder",c={apiKey:"",secret:void 0,auth:{type:"bearer",token:e.token}};return{config:c,check:r,find:o,prefix:u,version:"2.14.0"}});
```

Paths touched: `/home/dev/.ssh/known_hosts`, `~/.aws/config`, `~/.config/gh/hosts.yml`,
`C:\Users\dev\AppData\Roaming\npm\node_modules`, `node_modules/.pnpm/esbuild@0.21.5/node_modules/esbuild/bin/esbuild`,
`/var/lib/docker/overlay2/de8983ad6c6e00a4bd76701b81fbc7c43603761c45f200c6ab2d602be761e572/merged`, and `target/wasm32-wasip2/release/guest.wasm`.

Links without credentials: https://github.com/acme/bridge/commit/ecb7e708c9cb4d53194252cf48850ee1399e4cd1,
https://docs.github.com/en/authentication/keeping-your-account-and-data-secure/about-authentication-to-github,
https://api.slack.com/messaging/webhooks, https://discord.com/developers/docs/resources/webhook,
https://platform.openai.com/docs/api-reference/authentication, https://console.aws.amazon.com/iam/home?region=us-east-1#/users,
https://dashboard.stripe.com/test/apikeys and https://huggingface.co/docs/hub/security-tokens.

How the providers' tokens are recognised, in words: GitHub tokens start with `ghp_` (then 36
characters), GitLab ones with `glpat-`, Stripe's secret keys with `sk_live_`, Slack's bot tokens
with `xoxb-`, npm's with `npm_`, Hugging Face's with `hf_`; an AWS access key id begins `AKIA`, a
Google API key `AIza`, an age identity `AGE-SECRET-KEY-1`, and a PEM private key with
`-----BEGIN PRIVATE KEY-----`. None of these prefixes alone is a secret.

Timing: p50 41 ms, p99 380 ms over 12,000 requests from 10.0.3.17 and 2001:db8::7; the
cache hit rate was 97.2 %, the retry budget 3 with a 250 ms base delay (`RETRY_BASE_MS=250`).
The Telegram poller slept 12:30:00 to 12:45:10 UTC; the Discord gateway resumed at seq 48213.
The secret_key_base rotation is tracked in the runbook, and the `api_token_expiry` column
moved to `timestamptz`. Run `kubeadm token list` to see bootstrap tokens (none are printed here).

Build 44205c71-3301 finished: 1,284 tests passed, 0 failed, 3 ignored; artefact sha256 a41dad40cf9b6e184da05148bc7340f568bc39eae1deecf068dd558c7129e64a.
"#;
