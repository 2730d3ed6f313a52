//! The `transports` section: each transport's keys validated against the platform declarations the
//! host offers, and every secret-looking value refused
//! (docs/decisions.md#decision-9-a-secret-looking-value-in-transports-is-refused, I10).

use serde_json::Value;

use super::Sink;
use super::readers::{boolean, int_in, string};
use crate::core::secrets;
use crate::model::{Platform, Setting, SettingEntry, SettingKind, SettingValue, TransportRequest};

/// The variable a message suggests: the transport's own credential variable when it
/// declares one.
fn example_env(platform: Option<&Platform>) -> &str {
    platform
        .and_then(|platform| {
            platform
                .settings
                .iter()
                .find(|key| key.kind == SettingKind::EnvName)
        })
        .and_then(|key| match &key.default {
            Some(SettingValue::Text(name)) => Some(name.as_str()),
            _ => None,
        })
        .unwrap_or("PI_TELEGRAM_TOKEN")
}

/// Validates one source's `transports` section into `layers` (one per offered platform,
/// `Some` once any source mentions it), field-wise over lower sources.
pub(super) fn apply_transports(
    platforms: &[Platform],
    layers: &mut [Option<std::collections::BTreeMap<String, SettingValue>>],
    value: &Value,
    sink: &mut Sink<'_>,
) {
    let Some(section) = value.as_object() else {
        report_secrets(value, "transports", "transports", example_env(None), sink);
        sink.error("transports: expected an object".into());
        return;
    };
    for (id, entry) in section {
        let known = platforms
            .iter()
            .zip(layers.iter_mut())
            .find(|(platform, _)| platform.id == *id);
        let example = example_env(known.as_ref().map(|(platform, _)| *platform));
        let path = format!("transports.{}", shown_key(id));
        let Some((spec, layer)) = known else {
            if looks_like_secret("", id) {
                sink.error(secret_text(&path, example));
            } else {
                let offered: Vec<&str> = platforms.iter().map(|p| p.id.as_str()).collect();
                sink.warn(format!(
                    "{path}: this host has no such transport, so it is ignored (available: {})",
                    offered.join(", ")
                ));
            }
            report_secrets(entry, id, &path, example, sink);
            continue;
        };
        let Some(fields) = entry.as_object() else {
            if !report_secrets(entry, id, &path, example, sink) {
                sink.error(format!("{path}: expected an object"));
            }
            continue;
        };
        let layer = layer.get_or_insert_default();
        for (key, value) in fields {
            let key_path = format!("{path}.{}", shown_key(key));
            let secret_key = looks_like_secret("", key);
            if secret_key {
                sink.error(secret_text(&key_path, example));
            }
            if report_secrets(value, key, &key_path, example, sink) || secret_key {
                continue;
            }
            let Some(key_spec) = spec.settings.iter().find(|k| k.name == *key) else {
                sink.warn(format!("{key_path}: unknown key, ignored"));
                continue;
            };
            match validate(key_spec, value) {
                Ok(valid) => {
                    layer.insert(key.clone(), valid);
                }
                Err(text) => sink.error(format!("{key_path}: {text}")),
            }
        }
    }
}

/// Checks one known transport key; the value has already passed the secret check.
fn validate(key: &Setting, value: &Value) -> Result<SettingValue, String> {
    let text = |text: &str| SettingValue::Text(text.to_owned());
    match &key.kind {
        SettingKind::Boolean => boolean(value).map(SettingValue::Boolean),
        SettingKind::EnvName => match value.as_str() {
            Some(name) if is_env_name(name) => Ok(text(name)),
            _ => {
                let example = match &key.default {
                    Some(SettingValue::Text(name)) => name.as_str(),
                    _ => "PI_TELEGRAM_TOKEN",
                };
                Err(format!(
                    "expected an environment variable name like \"{example}\""
                ))
            }
        },
        SettingKind::Url(schemes) => match value.as_str() {
            Some(url) if is_url(url, schemes) && !is_plain_to_a_remote_host(url) => Ok(text(url)),
            Some(url) if is_url(url, schemes) => Err(
                "a plain http:// or ws:// address is allowed only to 127.0.0.1, ::1 or localhost: \
                 the token would cross the network unencrypted. Use https:// or wss://"
                    .to_string(),
            ),
            _ => Err(format!(
                "expected a URL starting with {}",
                schemes
                    .iter()
                    .map(|s| format!("{s}://"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            )),
        },
        SettingKind::Integer { min, max } => int_in(value, *min, *max).map(SettingValue::Integer),
        SettingKind::Text => string(value).and_then(|value| {
            if value.is_empty() {
                Err("must not be empty".into())
            } else {
                Ok(text(value))
            }
        }),
    }
}

/// `^[A-Za-z_][A-Za-z0-9_]*$`.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `<scheme>://<host>...` with one of `schemes`, a host, and no whitespace.
fn is_url(url: &str, schemes: &[String]) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme))
        && !host.is_empty()
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Whether `url` (already a valid URL) is unencrypted (`http`, `ws`) to a host other than this
/// machine's loopback (docs/security.md#project-files-only-narrow): the transport sends the bot
/// token to its base URL.
fn is_plain_to_a_remote_host(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("ws") {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    !matches!(
        host.to_ascii_lowercase().as_str(),
        "127.0.0.1" | "::1" | "localhost"
    )
}

/// The request for one mentioned transport, or `None` when it is disabled. Every
/// declared key gets its value or its default, so the host reads one complete object.
pub(super) fn transport_request(
    platform: &Platform,
    fields: &std::collections::BTreeMap<String, SettingValue>,
) -> Option<TransportRequest> {
    let enabled = match fields.get("enabled") {
        Some(SettingValue::Boolean(enabled)) => Some(*enabled),
        _ => None,
    };
    if enabled == Some(false) {
        return None;
    }
    let settings = platform
        .settings
        .iter()
        .filter(|key| key.name != "enabled")
        .filter_map(|key| {
            let value = fields.get(&key.name).or(key.default.as_ref())?;
            Some(SettingEntry {
                name: key.name.clone(),
                value: value.clone(),
            })
        })
        .collect();
    Some(TransportRequest {
        id: platform.id.clone(),
        required: enabled == Some(true),
        settings,
    })
}

/// The error for a secret at `path`; it names where, never what.
fn secret_text(path: &str, example: &str) -> String {
    format!(
        "{path}: this looks like a secret. Config files must not hold tokens: export it in the \
         environment and name the variable with \"tokenEnv\" (for example \"tokenEnv\": \"{example}\")."
    )
}

/// A key as it may appear in a message: a key that itself looks like a token is hidden.
fn shown_key(key: &str) -> &str {
    if looks_like_secret("", key) {
        "(hidden key)"
    } else {
        key
    }
}

/// Reports every secret-looking string inside `value` (object keys included) at its own
/// path; true when there was one. `key` is the name the value sits under.
fn report_secrets(
    value: &Value,
    key: &str,
    path: &str,
    example: &str,
    sink: &mut Sink<'_>,
) -> bool {
    match value {
        Value::String(text) if looks_like_secret(key, text) => {
            sink.error(secret_text(path, example));
            true
        }
        Value::Array(items) => items.iter().enumerate().fold(false, |found, (i, item)| {
            report_secrets(item, key, &format!("{path}[{i}]"), example, sink) | found
        }),
        Value::Object(map) => map.iter().fold(false, |found, (inner, item)| {
            let inner_path = format!("{path}.{}", shown_key(inner));
            let secret_key = looks_like_secret("", inner);
            if secret_key {
                sink.error(secret_text(&inner_path, example));
            }
            // A credential name covers everything beneath it: `"token": {"value": "..."}`.
            let rule_key = if is_secret_name(key) { key } else { inner };
            report_secrets(item, rule_key, &inner_path, example, sink) | secret_key | found
        }),
        _ => false,
    }
}

/// Key names whose every non-empty value is a credential (compared without case, `_`
/// or `-`).
const SECRET_KEY_NAMES: [&str; 6] = [
    "token", "bottoken", "apptoken", "secret", "password", "apikey",
];

/// Keys that hold a URL; their path may be long without being a secret.
const URL_KEYS: [&str; 2] = ["baseUrl", "gatewayUrl"];

/// Whether a config string under `transports` is (or contains) a credential, so it can be refused
/// before it is stored, shown or sent anywhere
/// (docs/decisions.md#decision-9-a-secret-looking-value-in-transports-is-refused, I10).
///
/// A value is a secret when any of these holds:
/// - `key` names a credential (token, botToken, appToken, secret, password, apiKey) and
///   the value is not empty;
/// - it contains a secret of any shape redaction knows ([`secrets::contains_secret`], the one
///   list both use), anywhere, so a Telegram token pasted into
///   `https://api.telegram.org/bot<token>` is caught too;
/// - it is a URL carrying credentials (`scheme://user:pass@host` or `scheme://token@host`);
/// - it contains a run of at least 32 characters of `[A-Za-z0-9_\-.+/=]` mixing letters
///   and digits (base64/hex-like keys). A credential-free URL under a URL key is exempt
///   for its scheme, host and path, but not for its query or fragment.
fn looks_like_secret(key: &str, value: &str) -> bool {
    if value.is_empty() {
        return false;
    }
    if is_secret_name(key) {
        return true;
    }
    if secrets::contains_secret(value) {
        return true;
    }
    if let Some((_, rest)) = value.split_once("://")
        && rest
            .split(['/', '?', '#'])
            .next()
            .is_some_and(|authority| authority.contains('@'))
    {
        return true;
    }
    let checked = if URL_KEYS.contains(&key) && value.contains("://") {
        value.split_once(['?', '#']).map_or("", |(_, query)| query)
    } else {
        value
    };
    has_high_entropy_run(checked)
}

/// Whether `key` names a credential ([`SECRET_KEY_NAMES`]), ignoring case, `_` and `-`.
fn is_secret_name(key: &str) -> bool {
    let normalized: String = key
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    SECRET_KEY_NAMES.contains(&normalized.as_str())
}

/// A run of at least 32 key-alphabet characters containing both letters and digits.
fn has_high_entropy_run(text: &str) -> bool {
    let in_alphabet =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+' | '/' | '=');
    text.split(|c: char| !in_alphabet(c)).any(|run| {
        run.len() >= 32
            && run.chars().any(|c| c.is_ascii_alphabetic())
            && run.chars().any(|c| c.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TELEGRAM_TOKEN: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";

    #[test]
    fn plain_urls_only_to_loopback_table() {
        let rows = [
            ("https://api.telegram.org", false),
            ("wss://gateway.discord.gg", false),
            ("http://127.0.0.1:8081", false),
            ("http://localhost:8081/x", false),
            ("HTTP://LOCALHOST", false),
            ("http://[::1]:9000", false),
            ("ws://127.0.0.1:9000", false),
            ("http://evil.example", true),
            ("http://127.0.0.1.evil.example", true),
            ("http://localhost.evil.example:80", true),
            ("ws://10.0.0.5", true),
            ("http://[::2]", true),
            ("http://0.0.0.0:8081", true),
        ];
        for (url, refused) in rows {
            assert_eq!(is_plain_to_a_remote_host(url), refused, "{url}");
        }
    }

    #[test]
    fn secret_detector_table() {
        let rows: &[(&str, &str, bool)] = &[
            ("x", TELEGRAM_TOKEN, true),
            // Each shape alone: no digit-and-letter run of 32, so only the pattern can match.
            ("x", "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcd", true),
            ("x", "xoxb-123456789012", true),
            ("x", "xapp-1-A012345678", true),
            (
                "x",
                "MTAAAAAAAAAAAAAAAAAAAAAAAA.GaBcDe.abcdefghijklmnopqrstuvwxyzabc",
                true,
            ),
            (
                "baseUrl",
                "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/",
                true,
            ),
            (
                "x",
                "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
                true,
            ),
            ("x", "xapp-1-A0123456789-1234567890123-abcdef", true),
            (
                "x",
                "MTA5ODc2NTQzMjEwOTg3NjU0.GaBcDe.abcdefghijklmnopqrstuvwxyz01234",
                true,
            ),
            ("x", "sk-ant-api03-abcdefghijklmnop", true),
            ("x", "sk-proj-abcdefghijklmnop", true),
            ("x", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", true),
            ("x", "gho_ABCDEFGHIJKLMNOPQRSTUVWXYZ", true),
            ("token", "hunter2", true),
            ("botToken", "x", true),
            ("app_token", "x", true),
            ("Secret", "x", true),
            ("password", "x", true),
            ("API-KEY", "x", true),
            ("token", "", false),
            ("x", "https://user:pass@example.com", true),
            ("baseUrl", "https://token@example.com/api", true),
            ("x", "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE", true),
            ("x", "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1d", false),
            ("x", "abcdefghijklmnopqrstuvwxyzabcdefgh", false),
            ("x", "0123456789012345678901234567890123", false),
            (
                "baseUrl",
                "https://example.com/a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6",
                false,
            ),
            (
                "note",
                "https://example.com/a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6",
                true,
            ),
            (
                "baseUrl",
                "https://example.com/?key=a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6",
                true,
            ),
            (
                "gatewayUrl",
                "wss://gateway.discord.gg/?v=10&encoding=json",
                false,
            ),
            ("tokenEnv", "PI_TELEGRAM_TOKEN", false),
            (
                "tokenEnv",
                "MY_COMPANY_PRODUCTION_TELEGRAM_BOT_TOKEN",
                false,
            ),
            ("host", "0.0.0.0", false),
            ("selfSenderId", "robot", false),
            ("x", "desk-serverhostname0123456789", false),
            ("x", "a-task-0123456789abcdefghijkl", false),
        ];
        for (key, value, secret) in rows {
            assert_eq!(looks_like_secret(key, value), *secret, "{key} = {value}");
        }
    }
}
