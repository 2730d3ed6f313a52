//! The secret catalog held to its samples, at the pattern level (docs/security.md#redaction).
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
//! `BOT_CONNECT_WRITE_DOCS=1 cargo test -p guest --test bridge secret_families` to write it;
//! without the variable the test fails when the file and the table disagree.

use guest::core::secret_families::{FAMILIES, Family};
use guest::core::secret_generic::GENERIC;
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
        "the catalog must hold at least 150 provider families (docs/security.md#redaction); it has {}",
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

/// What the generic shapes find and what they leave, for the docs: written here, next to
/// the generator, so the file stays generated; `secret_generic.rs`, `secret_values.rs`,
/// `secrets.rs` and `invisible.rs` are what it describes.
const GENERIC_DOC: &str = r#"## Generic shapes

Most secrets an agent prints have no provider prefix: a password in an env file, a token in a
YAML file, a key passed to a command. These are found by what stands before them. The shapes
of `guest/src/core/secrets.rs` run first, then the provider families above, then the generic
entries of `guest/src/core/secret_generic.rs` (listed at the end); where two find the same
secret, one marker replaces it, labelled by the longer find (the provider's label when they
are as long). Only the value goes: the key name, the `=` or `:`, the quotes around the value
and the punctuation after it stay.

- **Secret-like keys.** A key name that holds `password`, `passwd`, `passphrase` or `pwd`
  (label `password`), or `secret`, `token`, `api_key`, `apikey`, `access_key`,
  `private_key`, `auth_key` or `credential`/`credentials` (label `secret`; the words inside
  those names may be joined by `_`, `-`, `.` or nothing), in any case, with up to 40 letters,
  digits, `_`, `-` or `.` before and after it: `db_password`, `AWS_SECRET_ACCESS_KEY`,
  `client-secret`, `apiKey`, `X-Goog-Api-Key`. It is assigned with `=`, `:`, `=>` or `:=`,
  with up to eight blanks on either side, and its closing quote may come before the sign, as
  JSON and YAML write keys: this covers env files, shell, YAML, TOML, JSON, INI and source
  code. The value is either quoted (`"…"` or `'…'`, on one line, up to 200 characters) or
  bare: up to 200 characters, ending at a blank, a quote, a backtick, `<`, `>`, `;` or `,`
  (so `Password=…;` in a connection string ends at its `;`), and never starting with `:` or
  `=` (`Token::parse(line)` and `token == x` are code) or with `[`, `{` or `(`. A bare
  value's trailing `.`, `,`, `;` or `:`, and a closing bracket it did not open, are left out.
- **Upper-case assignments.** `NAME=value` where the upper-case name holds `TOKEN`,
  `SECRET`, `PASSWORD`, `PASSWD`, `API_KEY`, `APIKEY`, `PRIVATE_KEY` or `ACCESS_KEY`
  (including the word alone: `PASSWORD=…`) becomes `NAME=[redacted]`. An unquoted value ends
  at a blank, a quote or a backtick, but takes a `Bearer` value or URL credentials it runs
  into; a quoted value goes to its closing quote, over line breaks.
- **Command-line flags.** `-` or `--` and `password`, `passwd`, `pass`, `token`,
  `auth-token`, `access-token`, `secret`, `client-secret`, `api-key` or `apikey`, then `=` or
  blanks and the value, quoted or not (`--password=…`, `redis-cli --pass …`; label
  `cli-secret`). `--password-file /run/pw` names a file, not a password, and stays. For
  `mysql`, `mysqldump`, `mysqladmin`, `mysqlsh` and `mysqlimport`, a `-p` glued to its value
  later on the same line (`-phunter2`, `-p'…'`; label `mysql-password`); `-p` alone (which
  asks for the password) and `-P3306` (the port) stay.
- **URL user info.** `scheme://user:password@host` becomes `scheme://[redacted]@host`, also
  when the scheme was already replaced (`[redacted]://user:password@`).
- **Connection strings.** `Password=` and `Pwd=` are password keys (`Server=db;User
  Id=sa;Password=…;`), and the provider families know Azure's `AccountKey=` and
  `SharedAccessKey=`.
- **Headers.** `Authorization`, `X-Api-Key`, `X-Auth-Token` and `X-Access-Token`, in any
  case, followed by `:`: the name stays and its value becomes `[redacted]`, to the end of the
  line, or to the closing quote or backtick when the header is quoted as curl's
  `-H "…"` writes it. A value that is a `Bearer` credential keeps its scheme:
  `Authorization: Bearer [redacted]`. A `Bearer` value of 20 or more characters of
  `[A-Za-z0-9._~+/-]` (and `=` padding) is replaced wherever it stands, a shorter one of six
  or more by the `bearer` entry. Any other header whose name is a secret-like key
  (`X-Goog-Api-Key: …`) is an assignment with `:`. `Cookie:` and `Set-Cookie:` lose
  everything from their first `name=` to the end of the line or the first quote or backtick
  (label `cookie`);
  `Cookie: a small file a site stores` has no `name=` and stays.
- **Private keys.** A PEM block (`-----BEGIN … PRIVATE KEY-----` to its END line, or without
  an END line the base64 lines under it) becomes `[redacted:private-key]`, and the
  `private-key` family also knows OpenSSH, PGP armour and PuTTY's `PuTTY-User-Key-File-2:` /
  `-3:` files up to their `Private-MAC:`. A BEGIN line with nothing under it and no END line
  only names a format (a README's "a key starts with …") and stays.
- **JWTs.** Three dot-separated base64url parts starting with `eyJ` (label `jwt`), and a JWT
  wrapped in base64 as Kubernetes secrets carry one: `ZXlK` (`eyJ` encoded) and 80 or more
  base64 characters.

### Values that stay

A key name only says a value may be secret; the value decides. After a secret-like key, a
CLI flag, a `Cookie` header, a short `Bearer` or a provider key name, the value stays when:

- it is a number or a duration: digits (with `.`, `_` or `,`) and nothing after them, or one
  of `ns`, `us`, `µs`, `ms`, `s`, `sec`, `secs`, `seconds`, `m`, `min`, `mins`, `minutes`, `h`,
  `hr`, `hrs`, `hours`, `d`, `days`, `w`, `kb`, `mb`, `gb`, `%`;
- it is `true`, `false`, `yes`, `no`, `on`, `off`, `null`, `nil`, `none`, `undefined`,
  `required`, `optional`, `string` or `env`, in any case;
- it refers to a secret kept elsewhere: `$VAR`, `${VAR}`, `$(cmd)`, `process.env.…`,
  `os.environ…`, `os.getenv…`, `env(…)`, `env.…`, `secrets.…`, or an environment variable's
  name (upper-case words joined by `_`: `"tokenEnv": "PI_TELEGRAM_TOKEN"`);
- it is a placeholder: `<your-token>`, `{{…}}`, `%…%`, anything holding `changeme`,
  `change_me`, `change-me`, `placeholder`, `xxxx` or `****`, starting with `your` or
  `example` or ending with `example`, or 16 characters and more with fewer than 8 different
  ones (`ghp_` and 36 `x`); this check holds for every family, providers' included;
- it is a path (`./key.pem`, `../x`, `~/.ssh/id_rsa`, `/run/secrets/db`, `C:\…`), a URL
  without user info (`TOKEN_URL=https://auth.example.com/token`), or code (`Secret::new`:
  values holding `::`);
- the key's last word says the value is about a secret rather than one: `ttl`, `seconds`,
  `secs`, `ms`, `minutes`, `hours`, `days`, `expiry`, `expires`, `timeout`, `length`, `len`,
  `size`, `count`, `max`, `min`, `limit`, `url`, `uri`, `endpoint`, `path`, `file`, `dir`,
  `name`, `type`, `id`, `header`, `prefix`, `enabled`, `format`, or a key ending in `env` or
  `envvar` (`TOKEN_TTL_SECONDS=3600`, `"token_type": "bearer"`, `SECRET_NAME=prod-db`,
  `passwordEnv`);
- for the generic entries, it does not look random enough: under `secret`, it needs 12
  characters of at least two kinds (lower case, upper case, digits, others) and 8 different
  ones, or 20 characters and 12 different ones; under the other generic labels, 6
  characters, not all letters or of two kinds (so `password: required` and
  `Bearer authentication` stay).

The upper-case assignments use the same checks on their value and name, all but the last.

### Invisible characters

Format characters render as nothing, so a token with one inside reads whole to a person and
to anyone who copies it, while a pattern sees two words: U+200B–U+200F (zero-width space,
joiners, direction marks), U+202A–U+202E (embeddings and overrides), U+2060–U+2064 (word
joiner, invisible operators), U+FEFF and U+00AD (soft hyphen). Each line holding one is also
read without them; where that reading holds a secret, the secret is replaced in the line as
written, the invisible characters inside it with it.

### The generic entries

| Label | What | Source |
|---|---|---|
"#;

/// The README-ready list of families, as `docs/secret-families.md` holds it.
fn families_doc() -> String {
    let mut out = String::new();
    out.push_str("# Secret families\n\n");
    out.push_str(
        "<!-- Generated from guest/src/core/secret_families.rs and secret_generic.rs by\n     \
         BOT_CONNECT_WRITE_DOCS=1 cargo test -p guest --test bridge secret_families\n     \
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
    out.push('\n');
    out.push_str(GENERIC_DOC);
    // The quoted and bare forms of one shape are two entries with one label: one row, with
    // the sources of both.
    let mut rows: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for f in GENERIC {
        let sources = f.source.split("; ");
        match rows.iter_mut().find(|(label, ..)| *label == f.label) {
            Some((.., known)) => {
                for source in sources {
                    if !known.contains(&source) {
                        known.push(source);
                    }
                }
            }
            None => rows.push((f.label, f.provider, sources.collect())),
        }
    }
    for (label, provider, sources) in rows {
        out.push_str(&format!(
            "| `{label}` | {} | {} |\n",
            provider.replace('|', "\\|"),
            sources.join("; ").replace('|', "\\|")
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
        "{} is out of date with the catalog: run `{WRITE_DOCS}=1 cargo test -p guest --test bridge secret_families` and commit the file",
        path.display()
    );
}

/// About 10 KiB of what an agent prints on an ordinary day: release notes with commit ids,
/// request UUIDs, an env file whose secrets are references, lockfile integrity hashes,
/// docker digests, a data URI and a base64 font, minified JS, paths and plain URLs. Its
/// random parts were generated once, from a fixed seed, and pasted here.
const CORPUS: &str = include_str!("support/engineering_text.md");
