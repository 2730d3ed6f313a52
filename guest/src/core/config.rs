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
            sink.error("config: expected a JSON object at the top level".into());
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
        let index = TRANSPORTS.iter().position(|spec| spec.id == id);
        let spec = index.and_then(|i| TRANSPORTS.get(i));
        let example = example_env(spec);
        let path = format!("transports.{}", shown_key(id));
        if looks_like_secret("", id) {
            sink.error(secret_text(&path, example));
        }
        let (Some(spec), Some(layer)) = (spec, index.and_then(|i| layers.get_mut(i))) else {
            if !looks_like_secret("", id) {
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
                "expected a {} URL",
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
            report_secrets(item, inner, &inner_path, example, sink) | secret_key | found
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
    let normalized: String = key
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if SECRET_KEY_NAMES.contains(&normalized.as_str()) {
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
