//! Generic secret shapes: a secret found by what stands before it, not by a provider's format
//! (docs/security.md#redaction).
//!
//! A key name that says it holds a secret (`password`, `db_password`, `api_key`, `client-secret`,
//! `X-Goog-Api-Key`, in any case, with any prefix or suffix) assigned with `=`, `:`, `=>` or
//! `:=`, as env files, shell, YAML, TOML, JSON, INI and source code write it; CLI flags
//! (`--password=…`, `--token …`, mysql's `-p…`); `Password=`/`Pwd=` in connection strings;
//! `Cookie` headers; short `Bearer` values; base64-wrapped JWTs. The upper-case `NAME=value`
//! assignment, credential headers, long `Bearer` values, URL user info and PEM blocks are the
//! shapes of `secrets.rs`, which run first.
//!
//! These entries have the catalog's form ([`Family`]) and run in the same engine
//! (`secret_spans.rs`); their values are judged by shape (`secret_values.rs`), because a key
//! name alone also stands before `3600`, `${VAR}` and `<your-token>`. The `key` group, where a
//! pattern has one, is the key name: a name whose last word says the value is about a secret
//! (`TOKEN_TTL_SECONDS`, `SECRET_NAME`) is no secret's. Labels may repeat here: the quoted and
//! unquoted forms of one shape are one kind of secret to the person reading the marker.

use crate::core::secret_families::Family;

macro_rules! assigned {
    ($key:expr, quoted) => {
        concat!(
            $key,
            r#"["']?[ \t]{0,8}(?:=>|:=|=|:)[ \t]{0,8}["'](?P<secret>[^"'\r\n]{1,200})["']"#
        )
    };
    // An unquoted value never starts with `:` or `=`: `Token::parse(line)` and
    // `a::token::new()` are paths in code, and `key == value` is a comparison.
    ($key:expr, bare) => {
        concat!(
            $key,
            r#"["']?[ \t]{0,8}(?:=>|:=|=|:)[ \t]{0,8}(?P<secret>[^\s"'`<>;,\[{(:=][^\s"'`<>;,]{0,199})"#
        )
    };
}

/// The password key words, as keywords.
const PASSWORD_WORDS: &[&str] = &["password", "passwd", "passphrase", "pwd"];
/// The token, key and secret key words, as keywords: every spelling the patterns' key
/// alternation accepts (`access[_.-]?key` is four), since the engine runs a pattern only
/// around a keyword. Without `accesskey`, `accesskey=…` alone was never searched, yet found
/// when some other keyword's window happened to cover it: a secret went out or not
/// depending on the line above (`SECRET=U` before it; found by fuzzing the pipeline).
const SECRET_WORDS: &[&str] = &[
    "secret",
    "token",
    "api_key",
    "api-key",
    "api.key",
    "apikey",
    "access_key",
    "access-key",
    "access.key",
    "accesskey",
    "private_key",
    "private-key",
    "private.key",
    "privatekey",
    "auth_key",
    "auth-key",
    "auth.key",
    "authkey",
    "credential",
];

/// The generic shapes, run after the provider catalog in the same engine.
pub static GENERIC: &[Family] = &[
    // `db_password = "…"`, `"password": "…"`, `password: '…'`.
    Family {
        label: "password",
        provider: "Any password assignment",
        source: "detect-secrets KeywordDetector; gitleaks generic-api-key",
        keywords: PASSWORD_WORDS,
        pattern: assigned!(
            r"(?P<key>[A-Za-z0-9_.-]{0,40}(?i:password|passwd|passphrase|pwd)[A-Za-z0-9_.-]{0,40})",
            quoted
        ),
        max_len: 300,
        max_before_keyword: 41,
        positives: &[
            "db_password = \"hunter2!x\"",
            "\"password\": \"s3cr3t-Pa55\"",
        ],
        near_misses: &["\"password\": \"required\"", "password: \"${DB_PASSWORD}\""],
    },
    // `db_password = hunter2`, `Password=Pa55w0rd;` in a connection string, INI, YAML.
    Family {
        label: "password",
        provider: "Any password assignment",
        source: "detect-secrets KeywordDetector; gitleaks generic-api-key; ADO.NET connection strings",
        keywords: PASSWORD_WORDS,
        pattern: assigned!(
            r"(?P<key>[A-Za-z0-9_.-]{0,40}(?i:password|passwd|passphrase|pwd)[A-Za-z0-9_.-]{0,40})",
            bare
        ),
        max_len: 300,
        max_before_keyword: 41,
        positives: &[
            "db_password = hunter2",
            "Server=db;User Id=sa;Password=Pa55w0rd;",
        ],
        near_misses: &["PASSWORD_MIN_LENGTH=12", "password: $DB_PASSWORD"],
    },
    // `"api_key": "…"`, `client_secret: '…'`, `X-Goog-Api-Key: "…"`.
    Family {
        label: "secret",
        provider: "Any token, key or secret assignment",
        source: "detect-secrets KeywordDetector; gitleaks generic-api-key",
        keywords: SECRET_WORDS,
        pattern: assigned!(
            r"(?P<key>[A-Za-z0-9_.-]{0,40}(?i:secret|token|api[_.-]?key|apikey|access[_.-]?key|private[_.-]?key|auth[_.-]?key|credentials?)[A-Za-z0-9_.-]{0,40})",
            quoted
        ),
        max_len: 300,
        max_before_keyword: 41,
        positives: &["\"api_key\": \"q8Zp2vR7kW3mN9xT4c\""],
        near_misses: &["\"token_type\": \"bearer\""],
    },
    // `aws_secret_access_key = …`, `token: …`, `apiKey := …`.
    Family {
        label: "secret",
        provider: "Any token, key or secret assignment",
        source: "detect-secrets KeywordDetector; gitleaks generic-api-key",
        keywords: SECRET_WORDS,
        pattern: assigned!(
            r"(?P<key>[A-Za-z0-9_.-]{0,40}(?i:secret|token|api[_.-]?key|apikey|access[_.-]?key|private[_.-]?key|auth[_.-]?key|credentials?)[A-Za-z0-9_.-]{0,40})",
            bare
        ),
        max_len: 300,
        max_before_keyword: 41,
        positives: &["aws_secret_access_key = wJalrXUtnFEMIK7MDENGbPxRfiCYzKq3m9Tz"],
        near_misses: &[
            "TOKEN_TTL_SECONDS=3600",
            "token_url: https://auth.example.com/token",
        ],
    },
    // `--password=…`, `--token …`, `-api-key …`.
    Family {
        label: "cli-secret",
        provider: "Command-line credential flags",
        source: "gitleaks generic rules; curl, psql, redis-cli, vault and npm flags",
        keywords: &[
            "-pass",
            "-token",
            "-secret",
            "-api-key",
            "-apikey",
            "-client-secret",
        ],
        pattern: r#"-(?i:password|passwd|pass|token|auth-token|access-token|secret|client-secret|api-key|apikey)(?:=|[ \t]+)["']?(?P<secret>[^\s"'`;]{1,200})"#,
        max_len: 240,
        max_before_keyword: 1,
        positives: &["--password=hunter2x", "redis-cli --pass s3cr3tPa55"],
        near_misses: &["--password-file /run/pw", "--token $TOKEN"],
    },
    // `mysql -u root -phunter2`, `mysqldump -p'Pa55 w0rd'`. A value that is an upper-case
    // assignment (`-pDB_PASS=…`, a variable pasted after `-p`) keeps its name, as the
    // assignment shapes keep it, and the secret is its value: taken whole, the same line
    // came out as `-p[redacted:mysql-password]` or as `-pDB_PASS=[redacted:…]`, depending on
    // whether another family had replaced the value first, so a second redaction changed
    // the first one's output.
    Family {
        label: "mysql-password",
        provider: "MySQL command line",
        source: "MySQL manual, \"Specifying passwords on the command line\" (-p<password>)",
        keywords: &["mysql"],
        pattern: r#"\b(?i:mysql(?:dump|admin|sh|import)?)\b[^\r\n`]{0,200}?[ \t]-p(?:[A-Z_][A-Z0-9_]{0,63}=)?(?P<secret>"[^"\r\n]{1,100}"|'[^'\r\n]{1,100}'|[^\s"'`]{1,100})"#,
        // The tool's name (11), the gap (200), ` -p`, the name and `=` (64), the value (102).
        max_len: 384,
        max_before_keyword: 0,
        positives: &["mysql -u root -phunter2x db", "mysql -pDB_PASS=hunter2x db"],
        near_misses: &["mysql -u root -p db", "mysql -P3306 -h db"],
    },
    // `Cookie: session=…; csrftoken=…`, `Set-Cookie: id=…`: the value goes, the name stays.
    Family {
        label: "cookie",
        provider: "HTTP Cookie headers",
        source: "RFC 6265 (Cookie, Set-Cookie); trufflehog and gitleaks header rules",
        keywords: &["cookie"],
        pattern: r#"\b(?i:set-cookie|cookie)[ \t]*:[ \t]*(?P<secret>[^\s=;"'`]+=[^\r\n"'`]*[^\s"'`])"#,
        max_len: 4096,
        max_before_keyword: 4,
        positives: &["Cookie: session=8f2a9c1e7b6d4f3a; theme=dark"],
        near_misses: &["Cookie: a small file a site stores"],
    },
    // `Bearer ab12cd34` shorter than the 20 characters of the bearer shape in `secrets.rs`.
    Family {
        label: "bearer",
        provider: "HTTP Bearer credentials",
        source: "RFC 6750 (Bearer token syntax)",
        keywords: &["bearer"],
        pattern: r"\b(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{6,}=*)",
        max_len: 4096,
        max_before_keyword: 0,
        positives: &["Authorization: Bearer ab12cd34ef"],
        near_misses: &["Bearer authentication", "Bearer $TOKEN"],
    },
    // A JWT wrapped in base64 (`ZXlK` is `eyJ` encoded), as Kubernetes secrets and some
    // config formats carry one.
    Family {
        label: "jwt",
        provider: "JSON Web Token, base64-wrapped",
        source: "RFC 7519; RFC 4648 (base64 of the JWS compact form)",
        keywords: &["zxlk"],
        pattern: r"\bZXlK[A-Za-z0-9+/]{80,}={0,2}",
        max_len: 12288,
        max_before_keyword: 0,
        positives: &[],
        near_misses: &["ZXlKaGJHY2lP"],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every spelling a key alternation such as `secret|api[_.-]?key|credentials?` accepts,
    /// lower case: each `[…]?` and `c?` taken and left out.
    fn spellings(alternation: &str) -> Vec<String> {
        let mut out = Vec::new();
        for word in alternation.split('|') {
            let mut forms = vec![String::new()];
            let mut rest = word;
            while let Some(c) = rest.chars().next() {
                let (options, len): (Vec<char>, usize) = match c {
                    '[' => {
                        let close = rest.find(']').expect("a closed class");
                        (rest[1..close].chars().collect(), close + 1)
                    }
                    _ => (vec![c], c.len_utf8()),
                };
                rest = &rest[len..];
                let optional = rest.starts_with('?');
                if optional {
                    rest = &rest[1..];
                }
                let mut next = Vec::new();
                for form in &forms {
                    if optional {
                        next.push(form.clone());
                    }
                    for option in &options {
                        next.push(format!("{form}{}", option.to_ascii_lowercase()));
                    }
                }
                forms = next;
            }
            out.extend(forms);
        }
        out
    }

    #[test]
    fn every_key_spelling_a_generic_pattern_accepts_holds_one_of_its_keywords() {
        // The engine searches a family only around its keywords: a spelling the pattern
        // accepts without a keyword is found only when another hit's window covers it
        // (`accesskey=…` after `SECRET=U`), so whether it is redacted depends on the text
        // around it.
        let mut checked = 0;
        for family in GENERIC {
            let Some(open) = family.pattern.find("(?i:") else {
                continue;
            };
            let body = &family.pattern[open + 4..];
            let alternation = &body[..body.find(')').expect("a closed group")];
            // A nested group (mysql's tool names) is not a plain alternation of words.
            if alternation.contains('(') {
                continue;
            }
            // A literal before the group (the flags' `-`) is part of every keyword.
            let before = &family.pattern[..open];
            let prefix = match before
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
            {
                true => before,
                false => "",
            };
            for spelling in spellings(alternation) {
                let spelling = format!("{prefix}{spelling}");
                checked += 1;
                assert!(
                    family.keywords.iter().any(|k| spelling.contains(k)),
                    "{}: the key spelling {spelling:?} holds none of its keywords",
                    family.label
                );
            }
        }
        assert!(
            checked > 20,
            "only {checked} spellings: the patterns changed shape"
        );
        assert_eq!(
            spellings("api[_.-]?key|tokens?"),
            ["apikey", "api_key", "api.key", "api-key", "token", "tokens"]
        );
    }
}
