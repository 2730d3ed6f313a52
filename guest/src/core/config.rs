//! Configuration: schema, defaults, validation and merge (reference-behaviour §4.1–4.3).
//!
//! The host finds the files and hands over their raw text; everything else happens here,
//! so every message a person sees about their config is tested in one place.

use std::sync::LazyLock;

use regex_lite::Regex;
use serde::Serialize;
use serde_json::{Map, Value};

use super::state::is_identity;
use crate::model::{ConfigSource, DeliverAs, Level, Note, TransportRequest};

/// Which tools a messenger-originated turn may run (§3.16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteToolPolicy {
    /// Every tool.
    Unrestricted,
    /// Only `read`, `grep`, `find`, `ls`.
    ReadOnly,
    /// No tool at all.
    NoTools,
}

impl RemoteToolPolicy {
    /// The config spelling (`unrestricted`, `read-only`, `no-tools`).
    pub fn as_str(self) -> &'static str {
        match self {
            RemoteToolPolicy::Unrestricted => "unrestricted",
            RemoteToolPolicy::ReadOnly => "read-only",
            RemoteToolPolicy::NoTools => "no-tools",
        }
    }
}

/// Whether each remote tool call needs a local yes (§3.16, I39).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteToolApproval {
    /// No approval.
    Off,
    /// Ask locally for every call.
    Each,
}

impl RemoteToolApproval {
    /// The config spelling (`off`, `each`).
    pub fn as_str(self) -> &'static str {
        match self {
            RemoteToolApproval::Off => "off",
            RemoteToolApproval::Each => "each",
        }
    }
}

/// `bridge.attachments`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentSettings {
    /// Media types that may be forwarded.
    pub allowed_media_types: Vec<String>,
    /// Most attachments in one message.
    pub max_count: u32,
    /// Largest attachment in bytes.
    pub max_bytes: u64,
}

/// `bridge.broadcast`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BroadcastSettings {
    /// Send progress cards.
    pub progress: bool,
    /// Send final replies.
    pub replies: bool,
}

/// `bridge.rateLimit` (0 disables a limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitSettings {
    /// Prompts per identity per minute.
    pub prompts_per_minute: u32,
    /// Commands per identity per minute.
    pub commands_per_minute: u32,
}

/// The resolved `bridge` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeConfig {
    /// Local slash command namespace (`/connect`).
    pub local_command: String,
    /// Prefixes that mark a remote command.
    pub remote_prefixes: Vec<String>,
    /// Bot user name for `@bot` mentions (without `@`).
    pub bot_username: Option<String>,
    /// How prompts are delivered while the agent is busy (`Steer` or `FollowUp`).
    pub busy_delivery: DeliverAs,
    /// Pairing code lifetime.
    pub pairing_ttl_ms: u64,
    /// Digits in a pairing code.
    pub pairing_digits: u32,
    /// Wrong attempts before a code is replaced.
    pub pairing_max_attempts: u32,
    /// Pre-trusted identities (`transport:userId`).
    pub allow_users: Vec<String>,
    /// Unknown identities must pair.
    pub require_pairing: bool,
    /// Channel messages must address the bot.
    pub require_addressing: bool,
    /// Longest digest card.
    pub digest_max_length: u32,
    /// Attachment policy.
    pub attachments: AttachmentSettings,
    /// What is broadcast.
    pub broadcast: BroadcastSettings,
    /// Remote input rate limits.
    pub rate_limit: RateLimitSettings,
    /// Minimum interval between progress card updates.
    pub progress_min_interval_ms: u64,
    /// Tool policy for remote turns.
    pub remote_tool_policy: RemoteToolPolicy,
    /// Per-call approval for remote turns.
    pub remote_tool_approval: RemoteToolApproval,
    /// Most messages one send may produce.
    pub max_chunks: u32,
}

impl Default for BridgeConfig {
    /// The original's defaults (reference-behaviour §3.1).
    fn default() -> Self {
        BridgeConfig {
            local_command: "connect".into(),
            remote_prefixes: vec!["/".into(), "connect ".into(), "bot ".into()],
            bot_username: None,
            busy_delivery: DeliverAs::FollowUp,
            pairing_ttl_ms: 300_000,
            pairing_digits: 6,
            pairing_max_attempts: 3,
            allow_users: Vec::new(),
            require_pairing: true,
            require_addressing: true,
            digest_max_length: 1500,
            attachments: AttachmentSettings {
                allowed_media_types: ["image/png", "image/jpeg", "image/gif", "image/webp"]
                    .map(String::from)
                    .to_vec(),
                max_count: 4,
                max_bytes: 8 * 1024 * 1024,
            },
            broadcast: BroadcastSettings {
                progress: true,
                replies: true,
            },
            rate_limit: RateLimitSettings {
                prompts_per_minute: 30,
                commands_per_minute: 60,
            },
            progress_min_interval_ms: 1000,
            remote_tool_policy: RemoteToolPolicy::Unrestricted,
            remote_tool_approval: RemoteToolApproval::Off,
            max_chunks: 8,
        }
    }
}

impl BridgeConfig {
    /// The resolved config for `/connect config`: pretty JSON (2-space indent) with the
    /// spec's camelCase keys. It holds no secrets because the bridge section has none and
    /// transport settings are not part of it.
    pub fn to_pretty_json(&self) -> String {
        let view = BridgeJson {
            local_command: &self.local_command,
            remote_prefixes: &self.remote_prefixes,
            bot_username: self.bot_username.as_deref(),
            busy_delivery: self.busy_delivery.as_str(),
            pairing_ttl_ms: self.pairing_ttl_ms,
            pairing_digits: self.pairing_digits,
            pairing_max_attempts: self.pairing_max_attempts,
            allow_users: &self.allow_users,
            require_pairing: self.require_pairing,
            require_addressing: self.require_addressing,
            digest: DigestJson {
                max_length: self.digest_max_length,
            },
            attachments: AttachmentsJson {
                allowed_media_types: &self.attachments.allowed_media_types,
                max_count: self.attachments.max_count,
                max_bytes: self.attachments.max_bytes,
            },
            broadcast: BroadcastJson {
                progress: self.broadcast.progress,
                replies: self.broadcast.replies,
            },
            rate_limit: RateLimitJson {
                prompts_per_minute: self.rate_limit.prompts_per_minute,
                commands_per_minute: self.rate_limit.commands_per_minute,
            },
            progress_min_interval_ms: self.progress_min_interval_ms,
            remote_tool_policy: self.remote_tool_policy.as_str(),
            remote_tool_approval: self.remote_tool_approval.as_str(),
            max_chunks: self.max_chunks,
        };
        // Strings, booleans and integers always serialize; the fallback only keeps this total.
        serde_json::to_string_pretty(&view)
            .unwrap_or_else(|error| format!("(cannot show the config: {error})"))
    }
}

/// The spec's field order and spelling for [`BridgeConfig::to_pretty_json`].
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BridgeJson<'a> {
    local_command: &'a str,
    remote_prefixes: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    bot_username: Option<&'a str>,
    busy_delivery: &'static str,
    pairing_ttl_ms: u64,
    pairing_digits: u32,
    pairing_max_attempts: u32,
    allow_users: &'a [String],
    require_pairing: bool,
    require_addressing: bool,
    digest: DigestJson,
    attachments: AttachmentsJson<'a>,
    broadcast: BroadcastJson,
    rate_limit: RateLimitJson,
    progress_min_interval_ms: u64,
    remote_tool_policy: &'static str,
    remote_tool_approval: &'static str,
    max_chunks: u32,
}

/// `bridge.digest` as shown.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DigestJson {
    max_length: u32,
}

/// `bridge.attachments` as shown.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AttachmentsJson<'a> {
    allowed_media_types: &'a [String],
    max_count: u32,
    max_bytes: u64,
}

/// `bridge.broadcast` as shown.
#[derive(Serialize)]
struct BroadcastJson {
    progress: bool,
    replies: bool,
}

/// `bridge.rateLimit` as shown.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RateLimitJson {
    prompts_per_minute: u32,
    commands_per_minute: u32,
}

/// Everything the config files say, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedConfig {
    /// The `bridge` section over the defaults.
    pub bridge: BridgeConfig,
    /// Transports to create, in the order telegram, discord, slack, robo_claw, terminal.
    pub transports: Vec<TransportRequest>,
    /// Messages for the person at the terminal, shown once.
    pub notes: Vec<Note>,
}

/// Reads the config files, `sources` in precedence order (lowest first: global, then
/// project; or a single `override`).
///
/// Never fails: a bad file or field becomes a note and is simply not applied, so the
/// lower source's or the default value stays in force and the session still starts.
pub fn load_config(sources: &[ConfigSource]) -> LoadedConfig {
    let mut bridge = BridgeConfig::default();
    let mut layers: [Option<Map<String, Value>>; TRANSPORTS.len()] = Default::default();
    let mut notes = Vec::new();
    for source in sources {
        let mut sink = Sink {
            scope: &source.scope,
            notes: &mut notes,
        };
        let document: Value = match serde_json::from_str(&source.text) {
            Ok(document) => document,
            Err(error) => {
                // serde_json's messages name a position, never the text, so nothing leaks here.
                sink.warn(format!("invalid JSON in {}: {error}", source.path));
                continue;
            }
        };
        let Some(top) = document.as_object() else {
            sink.error("expected a JSON object at the top level".into());
            continue;
        };
        for (key, value) in top {
            match key.as_str() {
                "bridge" => apply_bridge(&mut bridge, value, &mut sink),
                "transports" => apply_transports(&mut layers, value, &mut sink),
                _ => sink.warn(format!("{key}: unknown top-level key, ignored")),
            }
        }
    }
    let mut transports = Vec::new();
    let mut disabled = Vec::new();
    for (spec, layer) in TRANSPORTS.iter().zip(&layers) {
        let Some(fields) = layer else { continue };
        match transport_request(spec, fields) {
            Some(request) => transports.push(request),
            None => disabled.push(spec.id),
        }
    }
    if !disabled.is_empty() {
        notes.push(Note::new(
            Level::Info,
            format!("disabled transports: {}", disabled.join(", ")),
        ));
    }
    LoadedConfig {
        bridge,
        transports,
        notes,
    }
}

/// Collects one source's notes, each prefixed `<scope> config: ` so the person knows
/// which file to open.
struct Sink<'a> {
    scope: &'a str,
    notes: &'a mut Vec<Note>,
}

impl Sink<'_> {
    /// An invalid value that was not applied.
    fn error(&mut self, text: String) {
        self.push(Level::Error, text);
    }

    /// Something ignored that is probably a typo.
    fn warn(&mut self, text: String) {
        self.push(Level::Warning, text);
    }

    fn push(&mut self, level: Level, text: String) {
        self.notes
            .push(Note::new(level, format!("{} config: {text}", self.scope)));
    }
}

/// JavaScript's `typeof` name, which the original's messages use (null and arrays are
/// "object").
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Null | Value::Array(_) | Value::Object(_) => "object",
    }
}

/// What a range error says it received: the number as JavaScript prints it, otherwise
/// only the type, so an arbitrary string is not echoed into the terminal.
fn received(value: &Value) -> String {
    let Value::Number(number) = value else {
        return type_name(value).into();
    };
    match (number.as_i64(), number.as_u64(), number.as_f64()) {
        (Some(n), _, _) => n.to_string(),
        (_, Some(n), _) => n.to_string(),
        (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{f:.0}"),
        (_, _, Some(f)) if f.abs() >= 1e21 => format!("{f:e}"),
        _ => number.to_string(),
    }
}

/// An integer in `min..=max` (JSON `5.0` counts, as `Number.isInteger` says it does).
fn int_in(value: &Value, min: i64, max: i64) -> Result<i64, String> {
    match value.as_f64() {
        // The range check comes first, so the cast below cannot truncate.
        Some(f) if f.fract() == 0.0 && f >= min as f64 && f <= max as f64 => Ok(f as i64),
        _ => Err(format!(
            "expected an integer between {min} and {max}, received {}",
            received(value)
        )),
    }
}

/// A string, or the generic type error.
fn string(value: &Value) -> Result<&str, String> {
    value
        .as_str()
        .ok_or_else(|| format!("expected a string, received {}", type_name(value)))
}

/// A boolean, or the generic type error.
fn boolean(value: &Value) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| format!("expected a boolean, received {}", type_name(value)))
}

/// An array whose entries are all strings.
fn strings(value: &Value) -> Result<Vec<String>, String> {
    let error = || "expected an array of strings".to_string();
    let items = value.as_array().ok_or_else(error)?;
    items
        .iter()
        .map(|item| item.as_str().map(String::from).ok_or_else(error))
        .collect()
}

/// Applies the valid keys of one source's `bridge` section over what lower sources and
/// the defaults set; each invalid key is reported and skipped.
fn apply_bridge(config: &mut BridgeConfig, value: &Value, sink: &mut Sink) {
    let Some(section) = value.as_object() else {
        sink.error("bridge: expected an object".into());
        return;
    };
    for (key, value) in section {
        let path = format!("bridge.{key}");
        let outcome = match key.as_str() {
            "localCommand" => string(value).and_then(|text| {
                let lower = text.to_ascii_lowercase();
                let mut chars = lower.chars();
                let valid = chars.next().is_some_and(|c| c.is_ascii_lowercase())
                    && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
                if !valid {
                    return Err(
                        "must start with a letter and contain only letters, digits or '-'".into(),
                    );
                }
                config.local_command = lower;
                Ok(())
            }),
            "remotePrefixes" => strings(value).and_then(|prefixes| {
                if prefixes.iter().any(String::is_empty) {
                    return Err("entries must not be empty".into());
                }
                config.remote_prefixes = prefixes;
                Ok(())
            }),
            "botUsername" => string(value).map(|name| {
                let name = name.strip_prefix('@').unwrap_or(name);
                // An empty name would make every bare "@" look like a mention.
                config.bot_username = (!name.is_empty()).then(|| name.to_string());
            }),
            "busyDelivery" => match value.as_str() {
                Some("steer") => Ok(DeliverAs::Steer),
                Some("followUp") => Ok(DeliverAs::FollowUp),
                _ => Err(format!(
                    "expected \"steer\" or \"followUp\", received {}",
                    quoted_or_type(value)
                )),
            }
            .map(|mode| config.busy_delivery = mode),
            "pairingTtlMs" => match value.as_f64() {
                None => Err("expected a finite number".into()),
                Some(ms) if (10_000.0..=86_400_000.0).contains(&ms) => Ok(ms as u64),
                Some(_) => Err("expected between 10000 and 86400000 ms".into()),
            }
            .map(|ms| config.pairing_ttl_ms = ms),
            "pairingDigits" => int_in(value, 4, 10).map(|n| config.pairing_digits = n as u32),
            "pairingMaxAttempts" => {
                int_in(value, 1, 10).map(|n| config.pairing_max_attempts = n as u32)
            }
            "allowUsers" => strings(value).and_then(|users| {
                let invalid: Vec<&str> = users
                    .iter()
                    .map(String::as_str)
                    .filter(|u| !is_identity(u))
                    .collect();
                if !invalid.is_empty() {
                    return Err(format!(
                        "entries must look like \"transport:userId\" (invalid: {})",
                        invalid.join(", ")
                    ));
                }
                config.allow_users = users;
                Ok(())
            }),
            "requirePairing" => boolean(value).map(|b| config.require_pairing = b),
            "requireAddressing" => boolean(value).map(|b| config.require_addressing = b),
            "digest" => {
                apply_digest(config, value, &path, sink);
                Ok(())
            }
            "attachments" => {
                apply_attachments(&mut config.attachments, value, &path, sink);
                Ok(())
            }
            "broadcast" => {
                apply_broadcast(&mut config.broadcast, value, &path, sink);
                Ok(())
            }
            "rateLimit" => {
                apply_rate_limit(&mut config.rate_limit, value, &path, sink);
                Ok(())
            }
            "progressMinIntervalMs" => {
                int_in(value, 0, 60_000).map(|n| config.progress_min_interval_ms = n as u64)
            }
            "remoteToolPolicy" => match value.as_str() {
                Some("unrestricted") => Ok(RemoteToolPolicy::Unrestricted),
                Some("read-only") => Ok(RemoteToolPolicy::ReadOnly),
                Some("no-tools") => Ok(RemoteToolPolicy::NoTools),
                _ => Err(format!(
                    "expected \"unrestricted\", \"read-only\" or \"no-tools\", received {}",
                    quoted_or_type(value)
                )),
            }
            .map(|policy| config.remote_tool_policy = policy),
            "remoteToolApproval" => match value.as_str() {
                Some("off") => Ok(RemoteToolApproval::Off),
                Some("each") => Ok(RemoteToolApproval::Each),
                _ => Err(format!(
                    "expected \"off\" or \"each\", received {}",
                    quoted_or_type(value)
                )),
            }
            .map(|approval| config.remote_tool_approval = approval),
            "maxChunks" => int_in(value, 1, 50).map(|n| config.max_chunks = n as u32),
            _ => {
                sink.warn(format!("{path}: unknown key, ignored"));
                Ok(())
            }
        };
        if let Err(text) = outcome {
            sink.error(format!("{path}: {text}"));
        }
    }
}

/// A received enum value: the string in quotes, or the type of anything else.
fn quoted_or_type(value: &Value) -> String {
    match value.as_str() {
        Some(text) => format!("\"{text}\""),
        None => type_name(value).into(),
    }
}

/// The entries of a nested bridge object, or the error that it is not one.
fn nested<'v>(value: &'v Value, path: &str, sink: &mut Sink) -> Option<&'v Map<String, Value>> {
    let object = value.as_object();
    if object.is_none() {
        sink.error(format!("{path}: expected an object"));
    }
    object
}

/// `bridge.digest`, field-wise.
fn apply_digest(config: &mut BridgeConfig, value: &Value, path: &str, sink: &mut Sink) {
    for (key, value) in nested(value, path, sink).into_iter().flatten() {
        match key.as_str() {
            "maxLength" => match int_in(value, 100, 10_000) {
                Ok(n) => config.digest_max_length = n as u32,
                Err(text) => sink.error(format!("{path}.{key}: {text}")),
            },
            _ => sink.warn(format!("{path}.{key}: unknown key, ignored")),
        }
    }
}

/// `bridge.attachments`, field-wise; a blank media type discards the whole section, as
/// the original does, so a half-edited list never widens what is accepted.
fn apply_attachments(target: &mut AttachmentSettings, value: &Value, path: &str, sink: &mut Sink) {
    let Some(section) = nested(value, path, sink) else {
        return;
    };
    let mut next = target.clone();
    let mut blank_entry = false;
    for (key, value) in section {
        let outcome = match key.as_str() {
            "allowedMediaTypes" => match strings(value) {
                Ok(types) if types.iter().any(|t| t.trim().is_empty()) => {
                    blank_entry = true;
                    Err("entries must not be empty".to_string())
                }
                Ok(types) if types.is_empty() => {
                    Err("expected a non-empty array of strings".to_string())
                }
                Ok(types) => {
                    next.allowed_media_types = types;
                    Ok(())
                }
                Err(text) => Err(text),
            },
            "maxCount" => int_in(value, 1, 10).map(|n| next.max_count = n as u32),
            "maxBytes" => int_in(value, 1024, 52_428_800).map(|n| next.max_bytes = n as u64),
            _ => {
                sink.warn(format!("{path}.{key}: unknown key, ignored"));
                Ok(())
            }
        };
        if let Err(text) = outcome {
            sink.error(format!("{path}.{key}: {text}"));
        }
    }
    if !blank_entry {
        *target = next;
    }
}

/// `bridge.broadcast`, field-wise.
fn apply_broadcast(target: &mut BroadcastSettings, value: &Value, path: &str, sink: &mut Sink) {
    for (key, value) in nested(value, path, sink).into_iter().flatten() {
        let slot = match key.as_str() {
            "progress" => &mut target.progress,
            "replies" => &mut target.replies,
            _ => {
                sink.warn(format!("{path}.{key}: unknown key, ignored"));
                continue;
            }
        };
        match boolean(value) {
            Ok(b) => *slot = b,
            Err(text) => sink.error(format!("{path}.{key}: {text}")),
        }
    }
}

/// `bridge.rateLimit`, field-wise (0 disables a limit).
fn apply_rate_limit(target: &mut RateLimitSettings, value: &Value, path: &str, sink: &mut Sink) {
    for (key, value) in nested(value, path, sink).into_iter().flatten() {
        let slot = match key.as_str() {
            "promptsPerMinute" => &mut target.prompts_per_minute,
            "commandsPerMinute" => &mut target.commands_per_minute,
            _ => {
                sink.warn(format!("{path}.{key}: unknown key, ignored"));
                continue;
            }
        };
        match int_in(value, 0, 600) {
            Ok(n) => *slot = n as u32,
            Err(text) => sink.error(format!("{path}.{key}: {text}")),
        }
    }
}

/// What a transport key holds.
#[derive(Clone, Copy)]
enum Kind {
    /// `enabled`.
    Boolean,
    /// The name of an environment variable (never its value).
    EnvName,
    /// A URL with one of these schemes.
    Url(&'static [&'static str]),
    /// An integer in `min..=max`.
    Int(i64, i64),
    /// A non-empty string.
    Text,
}

/// A value filled in when no source sets the key.
#[derive(Clone, Copy)]
enum Fallback {
    None,
    Int(i64),
    Text(&'static str),
}

/// One key a transport reads.
struct KeySpec {
    name: &'static str,
    kind: Kind,
    fallback: Fallback,
}

/// One transport the config may ask for.
struct TransportSpec {
    id: &'static str,
    keys: &'static [KeySpec],
}

const HTTP: &[&str] = &["http", "https"];
const WS: &[&str] = &["ws", "wss"];
const ENABLED: KeySpec = KeySpec {
    name: "enabled",
    kind: Kind::Boolean,
    fallback: Fallback::None,
};
const BASE_URL: KeySpec = KeySpec {
    name: "baseUrl",
    kind: Kind::Url(HTTP),
    fallback: Fallback::None,
};
const LOCK_STALE_MS: KeySpec = KeySpec {
    name: "lockStaleMs",
    kind: Kind::Int(1000, 86_400_000),
    fallback: Fallback::Int(900_000),
};

/// A `tokenEnv`-like key with its default variable name.
const fn env_key(name: &'static str, default: &'static str) -> KeySpec {
    KeySpec {
        name,
        kind: Kind::EnvName,
        fallback: Fallback::Text(default),
    }
}

/// Known transports in output order.
const TRANSPORTS: [TransportSpec; 5] = [
    TransportSpec {
        id: "telegram",
        keys: &[
            ENABLED,
            env_key("tokenEnv", "PI_TELEGRAM_TOKEN"),
            BASE_URL,
            LOCK_STALE_MS,
        ],
    },
    TransportSpec {
        id: "discord",
        keys: &[
            ENABLED,
            env_key("tokenEnv", "PI_DISCORD_TOKEN"),
            BASE_URL,
            KeySpec {
                name: "gatewayUrl",
                kind: Kind::Url(WS),
                fallback: Fallback::None,
            },
            LOCK_STALE_MS,
        ],
    },
    TransportSpec {
        id: "slack",
        keys: &[
            ENABLED,
            env_key("tokenEnv", "PI_SLACK_BOT_TOKEN"),
            env_key("appTokenEnv", "PI_SLACK_APP_TOKEN"),
            BASE_URL,
            LOCK_STALE_MS,
        ],
    },
    TransportSpec {
        id: "robo_claw",
        keys: &[
            ENABLED,
            env_key("tokenEnv", "PI_ROBO_CLAW_TOKEN"),
            KeySpec {
                name: "host",
                kind: Kind::Text,
                fallback: Fallback::Text("0.0.0.0"),
            },
            KeySpec {
                name: "port",
                kind: Kind::Int(1, 65_535),
                fallback: Fallback::Int(50_052),
            },
            KeySpec {
                name: "selfSenderId",
                kind: Kind::Text,
                fallback: Fallback::Text("robot"),
            },
            LOCK_STALE_MS,
        ],
    },
    TransportSpec {
        id: "terminal",
        keys: &[ENABLED],
    },
];

/// The variable a message suggests: the transport's own token variable when it has one.
fn example_env(spec: Option<&TransportSpec>) -> &'static str {
    spec.and_then(|spec| spec.keys.iter().find(|key| key.name == "tokenEnv"))
        .and_then(|key| match key.fallback {
            Fallback::Text(name) => Some(name),
            _ => None,
        })
        .unwrap_or("PI_TELEGRAM_TOKEN")
}

/// Validates one source's `transports` section into `layers` (one per known transport,
/// `Some` once any source mentions it), field-wise over lower sources.
fn apply_transports(layers: &mut [Option<Map<String, Value>>], value: &Value, sink: &mut Sink) {
    let Some(section) = value.as_object() else {
        report_secrets(value, "transports", "transports", example_env(None), sink);
        sink.error("transports: expected an object".into());
        return;
    };
    for (id, entry) in section {
        let known = TRANSPORTS
            .iter()
            .zip(layers.iter_mut())
            .find(|(spec, _)| spec.id == id);
        let example = example_env(known.as_ref().map(|(spec, _)| *spec));
        let path = format!("transports.{}", shown_key(id));
        let Some((spec, layer)) = known else {
            if looks_like_secret("", id) {
                sink.error(secret_text(&path, example));
            } else {
                sink.warn(format!(
                    "{path}: unknown transport, ignored (known: telegram, discord, slack, robo_claw, terminal)"
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
            let Some(key_spec) = spec.keys.iter().find(|k| k.name == key) else {
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
fn validate(key: &KeySpec, value: &Value) -> Result<Value, String> {
    match key.kind {
        Kind::Boolean => boolean(value).map(Value::Bool),
        Kind::EnvName => match value.as_str() {
            Some(name) if is_env_name(name) => Ok(value.clone()),
            _ => {
                let example = match key.fallback {
                    Fallback::Text(name) => name,
                    _ => "PI_TELEGRAM_TOKEN",
                };
                Err(format!(
                    "expected an environment variable name like \"{example}\""
                ))
            }
        },
        Kind::Url(schemes) => match value.as_str() {
            Some(url) if is_url(url, schemes) => Ok(value.clone()),
            _ => Err(format!(
                "expected a URL starting with {}",
                schemes
                    .iter()
                    .map(|s| format!("{s}://"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            )),
        },
        Kind::Int(min, max) => int_in(value, min, max).map(Value::from),
        Kind::Text => string(value).and_then(|text| {
            if text.is_empty() {
                Err("must not be empty".into())
            } else {
                Ok(value.clone())
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
fn is_url(url: &str, schemes: &[&str]) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme))
        && !host.is_empty()
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The request for one mentioned transport, or `None` when it is disabled.
fn transport_request(
    spec: &TransportSpec,
    fields: &Map<String, Value>,
) -> Option<TransportRequest> {
    let enabled = fields.get("enabled").and_then(Value::as_bool);
    if enabled == Some(false) {
        return None;
    }
    let mut token_env = None;
    let mut settings = Map::new();
    for key in spec.keys {
        let value = fields.get(key.name).cloned().or(match key.fallback {
            Fallback::None => None,
            Fallback::Int(n) => Some(Value::from(n)),
            Fallback::Text(text) => Some(Value::from(text)),
        });
        match (key.name, value) {
            ("enabled", _) | (_, None) => {}
            ("tokenEnv", Some(name)) => token_env = name.as_str().map(String::from),
            (name, Some(value)) => {
                settings.insert(name.into(), value);
            }
        }
    }
    Some(TransportRequest {
        id: spec.id.into(),
        token_env,
        required: enabled == Some(true),
        settings_json: Value::Object(settings).to_string(),
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
fn report_secrets(value: &Value, key: &str, path: &str, example: &str, sink: &mut Sink) -> bool {
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

/// Token shapes: Telegram bot tokens, Slack bot/user/app tokens, Discord bot tokens,
/// OpenAI/Anthropic keys, GitHub tokens. `None` only if the pattern failed to compile,
/// which [`looks_like_secret`] treats as "everything is a secret" (fail closed).
static TOKEN_SHAPES: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"[0-9]{6,12}:[A-Za-z0-9_-]{30,}",
        r"|\bxox[abprs]-[A-Za-z0-9-]{10,}",
        r"|\bxapp-[A-Za-z0-9-]{10,}",
        r"|[MN][A-Za-z0-9_-]{23,}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}",
        r"|\bsk-[A-Za-z0-9_-]{16,}",
        r"|\bgh[pousr]_[A-Za-z0-9]{20,}",
    ))
    .ok()
});

/// Key names whose every non-empty value is a credential (compared without case, `_`
/// or `-`).
const SECRET_KEY_NAMES: [&str; 6] = [
    "token", "bottoken", "apptoken", "secret", "password", "apikey",
];

/// Keys that hold a URL; their path may be long without being a secret.
const URL_KEYS: [&str; 2] = ["baseUrl", "gatewayUrl"];

/// Whether a config string under `transports` is (or contains) a credential, so it can be
/// refused before it is stored, shown or sent anywhere (decision 9, I10).
///
/// A value is a secret when any of these holds:
/// - `key` names a credential (token, botToken, appToken, secret, password, apiKey) and
///   the value is not empty;
/// - it contains a known token shape ([`TOKEN_SHAPES`]), anywhere, so a Telegram token
///   pasted into `https://api.telegram.org/bot<token>` is caught too;
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
    if TOKEN_SHAPES
        .as_ref()
        .is_none_or(|shapes| shapes.is_match(value))
    {
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

    fn source(scope: &str, text: &str) -> ConfigSource {
        ConfigSource {
            scope: scope.into(),
            path: format!("/{scope}/bot-connect.json"),
            text: text.into(),
        }
    }

    fn project(text: &str) -> LoadedConfig {
        load_config(&[source("project", text)])
    }

    const TELEGRAM_TOKEN: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";

    /// The secret error as the spec words it, for `path` and its example variable.
    fn secret_note(path: &str, example: &str) -> String {
        format!(
            "project config: {path}: this looks like a secret. Config files must not hold tokens: \
             export it in the environment and name the variable with \"tokenEnv\" (for example \
             \"tokenEnv\": \"{example}\")."
        )
    }

    #[test]
    fn every_message_text_is_exact() {
        use Level::{Error, Info, Warning};
        let rows: &[(&str, Level, &str)] = &[
            (
                "[]",
                Error,
                "project config: expected a JSON object at the top level",
            ),
            (
                r#"{"x":1}"#,
                Warning,
                "project config: x: unknown top-level key, ignored",
            ),
            (
                r#"{"bridge":5}"#,
                Error,
                "project config: bridge: expected an object",
            ),
            (
                r#"{"bridge":{"foo":1}}"#,
                Warning,
                "project config: bridge.foo: unknown key, ignored",
            ),
            (
                r#"{"bridge":{"localCommand":"9x"}}"#,
                Error,
                "project config: bridge.localCommand: must start with a letter and contain only letters, digits or '-'",
            ),
            (
                r#"{"bridge":{"localCommand":5}}"#,
                Error,
                "project config: bridge.localCommand: expected a string, received number",
            ),
            (
                r#"{"bridge":{"remotePrefixes":"/"}}"#,
                Error,
                "project config: bridge.remotePrefixes: expected an array of strings",
            ),
            (
                r#"{"bridge":{"remotePrefixes":["/",""]}}"#,
                Error,
                "project config: bridge.remotePrefixes: entries must not be empty",
            ),
            (
                r#"{"bridge":{"botUsername":null}}"#,
                Error,
                "project config: bridge.botUsername: expected a string, received object",
            ),
            (
                r#"{"bridge":{"busyDelivery":"now"}}"#,
                Error,
                r#"project config: bridge.busyDelivery: expected "steer" or "followUp", received "now""#,
            ),
            (
                r#"{"bridge":{"pairingTtlMs":5}}"#,
                Error,
                "project config: bridge.pairingTtlMs: expected between 10000 and 86400000 ms",
            ),
            (
                r#"{"bridge":{"pairingTtlMs":"5"}}"#,
                Error,
                "project config: bridge.pairingTtlMs: expected a finite number",
            ),
            (
                r#"{"bridge":{"pairingDigits":3}}"#,
                Error,
                "project config: bridge.pairingDigits: expected an integer between 4 and 10, received 3",
            ),
            (
                r#"{"bridge":{"pairingDigits":4.5}}"#,
                Error,
                "project config: bridge.pairingDigits: expected an integer between 4 and 10, received 4.5",
            ),
            (
                r#"{"bridge":{"pairingDigits":"6"}}"#,
                Error,
                "project config: bridge.pairingDigits: expected an integer between 4 and 10, received string",
            ),
            (
                r#"{"bridge":{"pairingMaxAttempts":11}}"#,
                Error,
                "project config: bridge.pairingMaxAttempts: expected an integer between 1 and 10, received 11",
            ),
            (
                r#"{"bridge":{"allowUsers":["a","telegram:1","b c:d",":x"]}}"#,
                Error,
                r#"project config: bridge.allowUsers: entries must look like "transport:userId" (invalid: a, b c:d, :x)"#,
            ),
            (
                r#"{"bridge":{"allowUsers":[1]}}"#,
                Error,
                "project config: bridge.allowUsers: expected an array of strings",
            ),
            (
                r#"{"bridge":{"requirePairing":"yes"}}"#,
                Error,
                "project config: bridge.requirePairing: expected a boolean, received string",
            ),
            (
                r#"{"bridge":{"requireAddressing":[]}}"#,
                Error,
                "project config: bridge.requireAddressing: expected a boolean, received object",
            ),
            (
                r#"{"bridge":{"digest":1}}"#,
                Error,
                "project config: bridge.digest: expected an object",
            ),
            (
                r#"{"bridge":{"digest":{"maxLength":50}}}"#,
                Error,
                "project config: bridge.digest.maxLength: expected an integer between 100 and 10000, received 50",
            ),
            (
                r#"{"bridge":{"digest":{"x":1}}}"#,
                Warning,
                "project config: bridge.digest.x: unknown key, ignored",
            ),
            (
                r#"{"bridge":{"attachments":"x"}}"#,
                Error,
                "project config: bridge.attachments: expected an object",
            ),
            (
                r#"{"bridge":{"attachments":{"allowedMediaTypes":["image/png"," "]}}}"#,
                Error,
                "project config: bridge.attachments.allowedMediaTypes: entries must not be empty",
            ),
            (
                r#"{"bridge":{"attachments":{"allowedMediaTypes":[]}}}"#,
                Error,
                "project config: bridge.attachments.allowedMediaTypes: expected a non-empty array of strings",
            ),
            (
                r#"{"bridge":{"attachments":{"allowedMediaTypes":"image/png"}}}"#,
                Error,
                "project config: bridge.attachments.allowedMediaTypes: expected an array of strings",
            ),
            (
                r#"{"bridge":{"attachments":{"maxCount":0}}}"#,
                Error,
                "project config: bridge.attachments.maxCount: expected an integer between 1 and 10, received 0",
            ),
            (
                r#"{"bridge":{"attachments":{"maxBytes":100}}}"#,
                Error,
                "project config: bridge.attachments.maxBytes: expected an integer between 1024 and 52428800, received 100",
            ),
            (
                r#"{"bridge":{"attachments":{"y":1}}}"#,
                Warning,
                "project config: bridge.attachments.y: unknown key, ignored",
            ),
            (
                r#"{"bridge":{"broadcast":1}}"#,
                Error,
                "project config: bridge.broadcast: expected an object",
            ),
            (
                r#"{"bridge":{"broadcast":{"replies":"no"}}}"#,
                Error,
                "project config: bridge.broadcast.replies: expected a boolean, received string",
            ),
            (
                r#"{"bridge":{"broadcast":{"z":true}}}"#,
                Warning,
                "project config: bridge.broadcast.z: unknown key, ignored",
            ),
            (
                r#"{"bridge":{"rateLimit":"x"}}"#,
                Error,
                "project config: bridge.rateLimit: expected an object",
            ),
            (
                r#"{"bridge":{"rateLimit":{"promptsPerMinute":-1}}}"#,
                Error,
                "project config: bridge.rateLimit.promptsPerMinute: expected an integer between 0 and 600, received -1",
            ),
            (
                r#"{"bridge":{"rateLimit":{"commandsPerMinute":601}}}"#,
                Error,
                "project config: bridge.rateLimit.commandsPerMinute: expected an integer between 0 and 600, received 601",
            ),
            (
                r#"{"bridge":{"rateLimit":{"q":1}}}"#,
                Warning,
                "project config: bridge.rateLimit.q: unknown key, ignored",
            ),
            (
                r#"{"bridge":{"progressMinIntervalMs":60001}}"#,
                Error,
                "project config: bridge.progressMinIntervalMs: expected an integer between 0 and 60000, received 60001",
            ),
            (
                r#"{"bridge":{"remoteToolPolicy":"all"}}"#,
                Error,
                r#"project config: bridge.remoteToolPolicy: expected "unrestricted", "read-only" or "no-tools", received "all""#,
            ),
            (
                r#"{"bridge":{"remoteToolApproval":true}}"#,
                Error,
                r#"project config: bridge.remoteToolApproval: expected "off" or "each", received boolean"#,
            ),
            (
                r#"{"bridge":{"maxChunks":0}}"#,
                Error,
                "project config: bridge.maxChunks: expected an integer between 1 and 50, received 0",
            ),
            (
                r#"{"transports":[]}"#,
                Error,
                "project config: transports: expected an object",
            ),
            (
                r#"{"transports":{"matrix":{}}}"#,
                Warning,
                "project config: transports.matrix: unknown transport, ignored (known: telegram, discord, slack, robo_claw, terminal)",
            ),
            (
                r#"{"transports":{"telegram":1}}"#,
                Error,
                "project config: transports.telegram: expected an object",
            ),
            (
                r#"{"transports":{"telegram":{"foo":1}}}"#,
                Warning,
                "project config: transports.telegram.foo: unknown key, ignored",
            ),
            (
                r#"{"transports":{"terminal":{"tokenEnv":"X"}}}"#,
                Warning,
                "project config: transports.terminal.tokenEnv: unknown key, ignored",
            ),
            (
                r#"{"transports":{"telegram":{"enabled":"yes"}}}"#,
                Error,
                "project config: transports.telegram.enabled: expected a boolean, received string",
            ),
            (
                r#"{"transports":{"telegram":{"tokenEnv":"1BAD"}}}"#,
                Error,
                r#"project config: transports.telegram.tokenEnv: expected an environment variable name like "PI_TELEGRAM_TOKEN""#,
            ),
            (
                r#"{"transports":{"discord":{"tokenEnv":5}}}"#,
                Error,
                r#"project config: transports.discord.tokenEnv: expected an environment variable name like "PI_DISCORD_TOKEN""#,
            ),
            (
                r#"{"transports":{"slack":{"appTokenEnv":"A B"}}}"#,
                Error,
                r#"project config: transports.slack.appTokenEnv: expected an environment variable name like "PI_SLACK_APP_TOKEN""#,
            ),
            (
                r#"{"transports":{"telegram":{"baseUrl":"ftp://example.com"}}}"#,
                Error,
                "project config: transports.telegram.baseUrl: expected a URL starting with http:// or https://",
            ),
            (
                r#"{"transports":{"discord":{"gatewayUrl":"https://gateway.discord.gg"}}}"#,
                Error,
                "project config: transports.discord.gatewayUrl: expected a URL starting with ws:// or wss://",
            ),
            (
                r#"{"transports":{"telegram":{"lockStaleMs":10}}}"#,
                Error,
                "project config: transports.telegram.lockStaleMs: expected an integer between 1000 and 86400000, received 10",
            ),
            (
                r#"{"transports":{"robo_claw":{"port":0}}}"#,
                Error,
                "project config: transports.robo_claw.port: expected an integer between 1 and 65535, received 0",
            ),
            (
                r#"{"transports":{"robo_claw":{"host":5}}}"#,
                Error,
                "project config: transports.robo_claw.host: expected a string, received number",
            ),
            (
                r#"{"transports":{"robo_claw":{"selfSenderId":""}}}"#,
                Error,
                "project config: transports.robo_claw.selfSenderId: must not be empty",
            ),
            (
                r#"{"transports":{"telegram":{"enabled":false}}}"#,
                Info,
                "disabled transports: telegram",
            ),
        ];
        for (text, level, message) in rows {
            let notes = project(text).notes;
            assert_eq!(notes, vec![Note::new(*level, *message)], "config {text}");
        }
    }

    #[test]
    fn secret_messages_name_the_path_and_the_transports_variable() {
        let rows: &[(String, String)] = &[
            (
                r#"{"transports":{"telegram":{"token":"hunter2"}}}"#.into(),
                secret_note("transports.telegram.token", "PI_TELEGRAM_TOKEN"),
            ),
            (
                format!(r#"{{"transports":{{"discord":{{"tokenEnv":"{TELEGRAM_TOKEN}"}}}}}}"#),
                secret_note("transports.discord.tokenEnv", "PI_DISCORD_TOKEN"),
            ),
            (
                format!(
                    r#"{{"transports":{{"slack":{{"extra":{{"deep":["ok","{TELEGRAM_TOKEN}"]}}}}}}}}"#
                ),
                secret_note("transports.slack.extra.deep[1]", "PI_SLACK_BOT_TOKEN"),
            ),
            (
                format!(r#"{{"transports":{{"robo_claw":"{TELEGRAM_TOKEN}"}}}}"#),
                secret_note("transports.robo_claw", "PI_ROBO_CLAW_TOKEN"),
            ),
            (
                format!(r#"{{"transports":{{"telegram":{{"{TELEGRAM_TOKEN}":true}}}}}}"#),
                secret_note("transports.telegram.(hidden key)", "PI_TELEGRAM_TOKEN"),
            ),
            (
                format!(r#"{{"transports":{{"{TELEGRAM_TOKEN}":{{}}}}}}"#),
                secret_note("transports.(hidden key)", "PI_TELEGRAM_TOKEN"),
            ),
            (
                format!(r#"{{"transports":"{TELEGRAM_TOKEN}"}}"#),
                secret_note("transports", "PI_TELEGRAM_TOKEN"),
            ),
        ];
        for (text, message) in rows {
            let loaded = project(text);
            assert!(
                loaded
                    .notes
                    .contains(&Note::new(Level::Error, message.as_str())),
                "config {text}: {:?}",
                loaded.notes
            );
            assert!(
                loaded
                    .notes
                    .iter()
                    .all(|note| !note.text.contains("AAHdqTcv"))
            );
            assert!(
                !loaded
                    .notes
                    .iter()
                    .any(|note| note.text.contains("environment variable name"))
            );
        }
    }

    #[test]
    fn a_credential_name_covers_nested_values() {
        let loaded = project(r#"{"transports":{"slack":{"password":{"value":["hunter2"]}}}}"#);
        assert_eq!(
            loaded.notes,
            vec![Note::new(
                Level::Error,
                secret_note("transports.slack.password.value[0]", "PI_SLACK_BOT_TOKEN")
            )]
        );
    }

    #[test]
    fn secrets_under_unknown_transports_are_still_refused() {
        let loaded = project(&format!(
            r#"{{"transports":{{"matrix":{{"key":"{TELEGRAM_TOKEN}"}}}}}}"#
        ));
        assert!(loaded.notes.contains(&Note::new(
            Level::Error,
            secret_note("transports.matrix.key", "PI_TELEGRAM_TOKEN")
        )));
        assert!(loaded.transports.is_empty());
    }

    #[test]
    fn a_secret_token_env_is_not_applied() {
        let loaded = project(&format!(
            r#"{{"transports":{{"telegram":{{"tokenEnv":"{TELEGRAM_TOKEN}"}}}}}}"#
        ));
        assert_eq!(loaded.transports.len(), 1);
        assert_eq!(
            loaded.transports[0].token_env.as_deref(),
            Some("PI_TELEGRAM_TOKEN")
        );
    }

    #[test]
    fn invalid_json_is_a_warning_naming_the_file_and_contributes_nothing() {
        let loaded = load_config(&[
            source("global", r#"{"bridge":{"maxChunks":10}}"#),
            source("project", r#"{"bridge":{"maxChunks":20"#),
        ]);
        let serde_error = serde_json::from_str::<Value>(r#"{"bridge":{"maxChunks":20"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(!serde_error.is_empty());
        assert_eq!(
            loaded.notes,
            vec![Note::new(
                Level::Warning,
                format!("project config: invalid JSON in /project/bot-connect.json: {serde_error}")
            )]
        );
        assert_eq!(loaded.bridge.max_chunks, 10);
    }

    #[test]
    fn no_sources_give_defaults_and_no_transports() {
        let loaded = load_config(&[]);
        assert_eq!(loaded.bridge, BridgeConfig::default());
        assert!(loaded.transports.is_empty());
        assert!(loaded.notes.is_empty());
    }

    #[test]
    fn project_beats_global_per_key() {
        let loaded = load_config(&[
            source("global", r#"{"bridge":{"maxChunks":10,"pairingDigits":8}}"#),
            source("project", r#"{"bridge":{"maxChunks":20}}"#),
        ]);
        assert_eq!(loaded.bridge.max_chunks, 20);
        assert_eq!(loaded.bridge.pairing_digits, 8);
        assert_eq!(loaded.bridge.pairing_max_attempts, 3);
    }

    #[test]
    fn nested_objects_merge_field_wise_across_sources_and_over_defaults() {
        let loaded = load_config(&[
            source(
                "global",
                r#"{"bridge":{"attachments":{"maxCount":2},"rateLimit":{"promptsPerMinute":5}}}"#,
            ),
            source(
                "project",
                r#"{"bridge":{"attachments":{"maxBytes":2048},"broadcast":{"replies":false}}}"#,
            ),
        ]);
        let bridge = loaded.bridge;
        assert_eq!(bridge.attachments.max_count, 2);
        assert_eq!(bridge.attachments.max_bytes, 2048);
        assert_eq!(bridge.attachments.allowed_media_types.len(), 4);
        assert_eq!(
            bridge.rate_limit,
            RateLimitSettings {
                prompts_per_minute: 5,
                commands_per_minute: 60
            }
        );
        assert_eq!(
            bridge.broadcast,
            BroadcastSettings {
                progress: true,
                replies: false
            }
        );
    }

    #[test]
    fn an_invalid_project_value_keeps_the_global_one() {
        let loaded = load_config(&[
            source("global", r#"{"bridge":{"maxChunks":10}}"#),
            source("project", r#"{"bridge":{"maxChunks":0,"pairingDigits":7}}"#),
        ]);
        assert_eq!(loaded.bridge.max_chunks, 10);
        assert_eq!(loaded.bridge.pairing_digits, 7);
        assert_eq!(loaded.notes.len(), 1);
    }

    #[test]
    fn a_blank_media_type_discards_the_whole_attachments_section() {
        let loaded = project(
            r#"{"bridge":{"attachments":{"maxCount":2,"allowedMediaTypes":["image/png",""]}}}"#,
        );
        assert_eq!(
            loaded.bridge.attachments,
            BridgeConfig::default().attachments
        );
    }

    #[test]
    fn values_are_normalized() {
        let loaded = project(
            r#"{"bridge":{"botUsername":"@MyBot","localCommand":"Bot-Connect","busyDelivery":"steer",
                "remoteToolPolicy":"read-only","remoteToolApproval":"each","allowUsers":["telegram:42"],
                "pairingTtlMs":60000,"digest":{"maxLength":200}}}"#,
        );
        let bridge = loaded.bridge;
        assert_eq!(bridge.bot_username.as_deref(), Some("MyBot"));
        assert_eq!(bridge.local_command, "bot-connect");
        assert_eq!(bridge.busy_delivery, DeliverAs::Steer);
        assert_eq!(bridge.remote_tool_policy, RemoteToolPolicy::ReadOnly);
        assert_eq!(bridge.remote_tool_approval, RemoteToolApproval::Each);
        assert_eq!(bridge.allow_users, vec!["telegram:42".to_string()]);
        assert_eq!(bridge.pairing_ttl_ms, 60_000);
        assert_eq!(bridge.digest_max_length, 200);
        assert!(loaded.notes.is_empty());
    }

    #[test]
    fn transports_merge_per_id_and_field_wise() {
        let loaded = load_config(&[
            source(
                "global",
                r#"{"transports":{"telegram":{"tokenEnv":"MY_TG","lockStaleMs":5000}}}"#,
            ),
            source(
                "project",
                r#"{"transports":{"telegram":{"enabled":true},"discord":{}}}"#,
            ),
        ]);
        assert_eq!(
            loaded.transports,
            vec![
                TransportRequest {
                    id: "telegram".into(),
                    token_env: Some("MY_TG".into()),
                    required: true,
                    settings_json: r#"{"lockStaleMs":5000}"#.into(),
                },
                TransportRequest {
                    id: "discord".into(),
                    token_env: Some("PI_DISCORD_TOKEN".into()),
                    required: false,
                    settings_json: r#"{"lockStaleMs":900000}"#.into(),
                },
            ]
        );
    }

    #[test]
    fn project_can_disable_a_globally_enabled_transport() {
        let loaded = load_config(&[
            source(
                "global",
                r#"{"transports":{"telegram":{"enabled":true},"slack":{"enabled":false}}}"#,
            ),
            source(
                "project",
                r#"{"transports":{"telegram":{"enabled":false}}}"#,
            ),
        ]);
        assert!(loaded.transports.is_empty());
        assert_eq!(
            loaded.notes,
            vec![Note::new(
                Level::Info,
                "disabled transports: telegram, slack"
            )]
        );
    }

    #[test]
    fn transports_come_out_in_fixed_order_with_defaults_applied() {
        let loaded = project(
            r#"{"transports":{"terminal":{},"robo_claw":{"port":6000},"slack":{},
                "discord":{"gatewayUrl":"wss://gateway.discord.gg/?v=10&encoding=json"},
                "telegram":{"baseUrl":"https://api.telegram.org"}}}"#,
        );
        assert!(loaded.notes.is_empty(), "{:?}", loaded.notes);
        let rows: Vec<(&str, Option<&str>, &str)> = loaded
            .transports
            .iter()
            .map(|t| {
                (
                    t.id.as_str(),
                    t.token_env.as_deref(),
                    t.settings_json.as_str(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                (
                    "telegram",
                    Some("PI_TELEGRAM_TOKEN"),
                    r#"{"baseUrl":"https://api.telegram.org","lockStaleMs":900000}"#
                ),
                (
                    "discord",
                    Some("PI_DISCORD_TOKEN"),
                    r#"{"gatewayUrl":"wss://gateway.discord.gg/?v=10&encoding=json","lockStaleMs":900000}"#
                ),
                (
                    "slack",
                    Some("PI_SLACK_BOT_TOKEN"),
                    r#"{"appTokenEnv":"PI_SLACK_APP_TOKEN","lockStaleMs":900000}"#
                ),
                (
                    "robo_claw",
                    Some("PI_ROBO_CLAW_TOKEN"),
                    r#"{"host":"0.0.0.0","lockStaleMs":900000,"port":6000,"selfSenderId":"robot"}"#
                ),
                ("terminal", None, "{}"),
            ]
        );
    }

    #[test]
    fn the_override_scope_prefixes_its_notes() {
        let loaded = load_config(&[source("override", r#"{"bridge":{"maxChunks":0}}"#)]);
        assert_eq!(
            loaded.notes[0].text,
            "override config: bridge.maxChunks: expected an integer between 1 and 50, received 0"
        );
    }

    #[test]
    fn pretty_json_shows_defaults_in_spec_order_and_spelling() {
        let expected = r#"{
  "localCommand": "connect",
  "remotePrefixes": [
    "/",
    "connect ",
    "bot "
  ],
  "busyDelivery": "followUp",
  "pairingTtlMs": 300000,
  "pairingDigits": 6,
  "pairingMaxAttempts": 3,
  "allowUsers": [],
  "requirePairing": true,
  "requireAddressing": true,
  "digest": {
    "maxLength": 1500
  },
  "attachments": {
    "allowedMediaTypes": [
      "image/png",
      "image/jpeg",
      "image/gif",
      "image/webp"
    ],
    "maxCount": 4,
    "maxBytes": 8388608
  },
  "broadcast": {
    "progress": true,
    "replies": true
  },
  "rateLimit": {
    "promptsPerMinute": 30,
    "commandsPerMinute": 60
  },
  "progressMinIntervalMs": 1000,
  "remoteToolPolicy": "unrestricted",
  "remoteToolApproval": "off",
  "maxChunks": 8
}"#;
        assert_eq!(BridgeConfig::default().to_pretty_json(), expected);
        let named = BridgeConfig {
            bot_username: Some("mybot".into()),
            ..BridgeConfig::default()
        };
        assert!(
            named
                .to_pretty_json()
                .contains("\"botUsername\": \"mybot\",\n  \"busyDelivery\"")
        );
    }

    #[test]
    fn token_shape_pattern_compiles() {
        assert!(TOKEN_SHAPES.is_some());
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
