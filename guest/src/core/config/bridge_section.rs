//! The `bridge` section: each key read, validated and applied over lower sources and the
//! defaults (docs/security.md#defaults-and-what-a-mistake-does-to-them).

use serde_json::Value;

use super::Sink;
use super::fail_closed::{Guard, Guards};
use super::readers::{boolean, holds_secret, int_in, nested, quoted_or_type, string, strings};
use super::schema::{
    AttachmentSettings, BridgeConfig, BroadcastSettings, InboxSettings, RateLimitSettings,
    RemoteApprovalSettings, RemoteScopeSettings, RemoteToolApproval, RemoteToolPolicy, UsageFooter,
    VoiceSettings,
};
use crate::core::globs::validate_glob;
use crate::core::invisible::is_invisible;
use crate::keys::Identity;
use crate::model::DeliverAs;

/// Applies the valid keys of one source's `bridge` section over what lower sources and
/// the defaults set; each invalid key is reported and skipped, except that an invalid
/// guard ([`Guard`]) goes to its strictest value. `file` names the source in causes.
pub(super) fn apply_bridge(
    config: &mut BridgeConfig,
    value: &Value,
    sink: &mut Sink<'_>,
    guards: &mut Guards,
    file: &str,
) {
    let Some(section) = value.as_object() else {
        sink.error("bridge: expected an object".into());
        guards.source_broken(
            config,
            format!("{file} has a `bridge` that is not an object"),
        );
        return;
    };
    for (key, value) in section {
        let path = format!("bridge.{key}");
        let outcome = match key.as_str() {
            // Before any reader: an enum reader quotes what it received, and a list or name
            // would be stored and shown by `/connect config`. Found by fuzzing.
            _ if holds_secret(value) => Err(
                "this looks like a secret. Config files must not hold tokens; the value was not applied"
                    .to_string(),
            ),
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
            // Six at least: four digits fell to guessing within a day (docs/security.md#pairing).
            "pairingDigits" => int_in(value, 6, 10).map(|n| config.pairing_digits = n as u32),
            "pairingMaxAttempts" => {
                int_in(value, 1, 10).map(|n| config.pairing_max_attempts = n as u32)
            }
            // Above 10 an hour the odds in the README no longer hold (docs/security.md#pairing).
            "pairingMaxFailuresPerHour" => int_in(
                value,
                1,
                i64::from(crate::core::pairing_budget::MAX_FAILURES_PER_HOUR),
            )
            .map(|n| config.pairing_max_failures_per_hour = n as u32),
            "allowUsers" => strings(value).and_then(|users| {
                let invalid: Vec<&str> = users
                    .iter()
                    .map(String::as_str)
                    .filter(|u| Identity::parse(u).is_none())
                    .collect();
                if !invalid.is_empty() {
                    return Err(format!(
                        "entries must look like \"transport:userId\" (invalid: {})",
                        invalid.join(", ")
                    ));
                }
                config.allow_users = users.iter().filter_map(|u| Identity::parse(u)).collect();
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
            "inbox" => {
                apply_inbox(&mut config.inbox, value, &path, sink);
                Ok(())
            }
            "voice" => {
                apply_voice(&mut config.voice, value, &path, sink);
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
            "remoteApproval" => {
                apply_remote_approval(&mut config.remote_approval, value, &path, sink)
            }
            "remoteScope" => {
                remote_scope(value).map(|scope| config.remote_scope = Some(scope))
            }
            "maxChunks" => int_in(value, 1, 50).map(|n| config.max_chunks = n as u32),
            "maxInboundChars" => {
                int_in(value, 100, 1_000_000).map(|n| config.max_inbound_chars = n as u32)
            }
            "maxQueuedPrompts" => int_in(value, 1, i64::from(super::schema::MAX_QUEUED_PROMPTS))
                .map(|n| config.max_queued_prompts = n as u32),
            "denyCommands" => deny_commands(value, config),
            "streamPreview" => boolean(value).map(|b| config.stream_preview = b),
            "reactions" => boolean(value).map(|b| config.reactions = b),
            "doneNoticeAfterMs" => int_in(value, 0, 86_400_000)
                .map(|n| config.done_notice_after_ms = n as u64),
            "usageFooter" => match value.as_str() {
                Some("off") => Ok(UsageFooter::Off),
                Some("tokens") => Ok(UsageFooter::Tokens),
                Some("tokens-cost") => Ok(UsageFooter::TokensCost),
                Some("context") => Ok(UsageFooter::Context),
                _ => Err(format!(
                    "expected \"off\", \"tokens\", \"tokens-cost\" or \"context\", got {}",
                    quoted_or_type(value)
                )),
            }
            .map(|footer| config.usage_footer = footer),
            _ => {
                sink.warn(format!("{path}: unknown key, ignored"));
                if let Some(guard) = Guard::misspelt(key)
                    && !section.contains_key(guard.key())
                {
                    guards.value_broken(
                        config,
                        guard,
                        format!(
                            "{file} has {path}, which looks like a misspelt bridge.{}",
                            guard.key()
                        ),
                    );
                }
                Ok(())
            }
        };
        match (outcome, Guard::for_key(key)) {
            (Ok(()), Some(guard)) => guards.value_set(guard),
            (Ok(()), None) => {}
            (Err(text), guard) => {
                sink.error(format!("{path}: {text}"));
                if let Some(guard) = guard {
                    guards.value_broken(config, guard, format!("{file} has an invalid {path}"));
                }
            }
        }
    }
}

/// `bridge.denyCommands`: remote command names (or aliases) the owner turns off. A name
/// that is no command is reported, and the names that are still apply: an owner who
/// misspelt one of three should not get none of them turned off.
fn deny_commands(value: &Value, config: &mut BridgeConfig) -> Result<(), String> {
    use crate::core::commands::{RemoteCommand, resolve_remote_command_name};
    let names = strings(value)?;
    let mut denied: Vec<RemoteCommand> = Vec::new();
    let mut unknown = Vec::new();
    for name in &names {
        match resolve_remote_command_name(name) {
            // Help stays: it is how a person learns what is turned off.
            Some(RemoteCommand::Help) => {
                unknown.push(format!("{name} (help cannot be turned off)"))
            }
            Some(command) if !denied.contains(&command) => denied.push(command),
            Some(_) => {}
            None => unknown.push(name.clone()),
        }
    }
    config.deny_commands = denied;
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "not remote commands: {}; the others apply (see /help for the names)",
            unknown.join(", ")
        ))
    }
}

/// `bridge.remoteApproval`: `"off"`, `"on"`, or `{ "enabled": bool, "timeoutMs": n }`
/// field-wise. A bad field is reported and not applied; off, the default, is the strictest.
fn apply_remote_approval(
    target: &mut RemoteApprovalSettings,
    value: &Value,
    path: &str,
    sink: &mut Sink<'_>,
) -> Result<(), String> {
    match value.as_str() {
        Some("off") => {
            target.enabled = false;
            return Ok(());
        }
        Some("on") => {
            target.enabled = true;
            return Ok(());
        }
        Some(_) => {
            return Err(format!(
                "expected \"off\", \"on\" or an object, received {}",
                quoted_or_type(value)
            ));
        }
        None => {}
    }
    for (key, value) in nested(value, path, sink).into_iter().flatten() {
        let outcome = match key.as_str() {
            "enabled" => boolean(value).map(|b| target.enabled = b),
            "timeoutMs" => int_in(value, 10_000, 3_600_000).map(|n| target.timeout_ms = n as u64),
            _ => {
                sink.warn(format!("{path}.{key}: unknown key, ignored"));
                Ok(())
            }
        };
        if let Err(text) = outcome {
            sink.error(format!("{path}.{key}: {text}"));
        }
    }
    Ok(())
}

/// `bridge.remoteScope`, whole or not at all: it is a guard, so a misspelt or invalid
/// field (say `protectedPath`, which would drop the user's protections) makes the whole
/// value invalid and the scope fails closed, instead of being applied half.
fn remote_scope(value: &Value) -> Result<RemoteScopeSettings, String> {
    let Some(section) = value.as_object() else {
        return Err(format!(
            "expected an object with allowTools, askTools, allowedPaths, protectedPaths, received {}",
            quoted_or_type(value)
        ));
    };
    let mut scope = RemoteScopeSettings::default();
    for (key, value) in section {
        let list = strings(value).map_err(|text| format!("{key}: {text}"))?;
        let tools = |list: Vec<String>| -> Result<Vec<String>, String> {
            if list.iter().any(|t| t.trim().is_empty()) {
                return Err(format!("{key}: tool names must not be empty"));
            }
            Ok(list)
        };
        let globs = |list: Vec<String>| -> Result<Vec<String>, String> {
            for glob in &list {
                validate_glob(glob)
                    .map_err(|e| format!("{key}: glob \"{}\": {}", e.glob, e.reason))?;
            }
            Ok(list)
        };
        match key.as_str() {
            "allowTools" => scope.allow_tools = tools(list)?,
            "askTools" => scope.ask_tools = tools(list)?,
            "allowedPaths" => scope.allowed_paths = globs(list)?,
            "protectedPaths" => scope.protected_paths = globs(list)?,
            _ => {
                return Err(format!(
                    "unknown key {key:?} (expected allowTools, askTools, allowedPaths, protectedPaths)"
                ));
            }
        }
    }
    Ok(scope)
}

/// `bridge.digest`, field-wise.
fn apply_digest(config: &mut BridgeConfig, value: &Value, path: &str, sink: &mut Sink<'_>) {
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
fn apply_attachments(
    target: &mut AttachmentSettings,
    value: &Value,
    path: &str,
    sink: &mut Sink<'_>,
) {
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

/// `bridge.inbox`, field-wise. The directory must stay a plain relative path inside the
/// working directory: the host refuses anything else at every save, so a bad one is said
/// here, once, with the default kept, rather than at each file a chat sends.
fn apply_inbox(target: &mut InboxSettings, value: &Value, path: &str, sink: &mut Sink<'_>) {
    for (key, value) in nested(value, path, sink).into_iter().flatten() {
        let outcome = match key.as_str() {
            "enabled" => boolean(value).map(|b| target.enabled = b),
            "dir" => string(value).and_then(|dir| {
                check_inbox_dir(dir)?;
                target.dir = dir.to_owned();
                Ok(())
            }),
            "maxFileBytes" => {
                int_in(value, 1024, 32 * 1024 * 1024).map(|n| target.max_file_bytes = n as u64)
            }
            "maxBytesPerDay" => int_in(value, 1024, 10 * 1024 * 1024 * 1024)
                .map(|n| target.max_bytes_per_day = n as u64),
            _ => {
                sink.warn(format!("{path}.{key}: unknown key, ignored"));
                Ok(())
            }
        };
        if let Err(text) = outcome {
            sink.error(format!("{path}.{key}: {text}"));
        }
    }
}

/// Checks `bridge.inbox.dir`: a relative path of plain segments inside the working
/// directory. The error is the config message's tail.
fn check_inbox_dir(dir: &str) -> Result<(), String> {
    let problem = if dir.trim().is_empty() {
        Some("must not be empty")
    } else if dir.starts_with('/') || dir.starts_with('\\') || dir.starts_with('~') {
        Some("must be relative to the working directory, not absolute")
    } else if dir.split(['/', '\\']).any(|segment| segment == "..") {
        Some("must not contain '..': the inbox stays inside the working directory")
    } else if dir.chars().any(|c| c.is_control() || is_invisible(c)) {
        Some("must not contain control or invisible characters")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(format!(
            "{problem} (received {dir:?}; the default is .pi/inbox/)"
        )),
        None => Ok(()),
    }
}

/// `bridge.voice`: the engine's keys are read together (an `openai` engine needs its URL
/// and model, a `command` engine its argv with `{file}`), the caps field-wise. An engine
/// that does not add up is reported and left out: no transcription beats audio sent to a
/// half-configured place, and the chat is told how to set one up.
fn apply_voice(target: &mut VoiceSettings, value: &Value, path: &str, sink: &mut Sink<'_>) {
    let Some(section) = nested(value, path, sink) else {
        return;
    };
    let mut engine: Option<String> = None;
    let mut base_url = "https://api.openai.com/v1".to_owned();
    let mut api_key_env: Option<String> = Some("OPENAI_API_KEY".to_owned());
    let mut model = "whisper-1".to_owned();
    let mut language: Option<String> = None;
    let mut command: Option<Vec<String>> = None;
    let mut broken = false;
    for (key, value) in section {
        let outcome = match key.as_str() {
            "engine" => string(value).and_then(|name| match name {
                "openai" | "command" | "none" => {
                    engine = Some(name.to_owned());
                    Ok(())
                }
                other => Err(format!(
                    "expected \"openai\" (an OpenAI-compatible /v1/audio/transcriptions), \"command\" (a local program such as whisper-cli) or \"none\", received \"{other}\""
                )),
            }),
            "baseUrl" => string(value).and_then(|url| {
                if url.starts_with("https://") || url.starts_with("http://") {
                    base_url = url.trim_end_matches('/').to_owned();
                    Ok(())
                } else {
                    Err(format!("expected an http(s) URL like https://api.openai.com/v1, received \"{url}\""))
                }
            }),
            "apiKeyEnv" => {
                if value.is_null() {
                    api_key_env = None;
                    Ok(())
                } else {
                    string(value).and_then(|name| {
                        if !name.is_empty()
                            && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                            && !name.starts_with(|c: char| c.is_ascii_digit())
                        {
                            api_key_env = Some(name.to_owned());
                            Ok(())
                        } else {
                            // The value may be the key itself: it is not repeated here.
                            Err("expected the NAME of an environment variable (like OPENAI_API_KEY) that holds the key, never the key itself; null for a server that wants none".to_owned())
                        }
                    })
                }
            }
            "model" => string(value).and_then(|name| {
                if name.trim().is_empty() {
                    Err("must not be empty (whisper-1 for OpenAI)".to_owned())
                } else {
                    model = name.to_owned();
                    Ok(())
                }
            }),
            "language" => string(value).map(|code| language = Some(code.to_owned())),
            "command" => strings(value).and_then(|argv| {
                if argv.is_empty() || argv[0].trim().is_empty() {
                    Err("expected the program and its arguments, like [\"whisper-cli\", \"-m\", \"/models/ggml-base.bin\", \"-nt\", \"-f\", \"{file}\"]".to_owned())
                } else if !argv.iter().skip(1).any(|arg| arg.contains("{file}")) {
                    Err("one argument must hold {file}, where the audio's path goes".to_owned())
                } else {
                    command = Some(argv);
                    Ok(())
                }
            }),
            "timeoutMs" => int_in(value, 1_000, 600_000).map(|n| target.timeout_ms = n as u32),
            "maxBytes" => int_in(value, 1024, 25 * 1024 * 1024).map(|n| target.max_bytes = n as u64),
            "maxSeconds" => int_in(value, 1, 3_600).map(|n| target.max_seconds = n as u32),
            _ => {
                sink.warn(format!("{path}.{key}: unknown key, ignored"));
                Ok(())
            }
        };
        if let Err(text) = outcome {
            broken |= !matches!(key.as_str(), "timeoutMs" | "maxBytes" | "maxSeconds");
            sink.error(format!("{path}.{key}: {text}"));
        }
    }
    // A half-right engine is no engine: audio is never sent where the operator did not
    // quite say (a variable misspelt, a URL mistyped).
    if broken {
        target.engine = None;
        return;
    }
    match engine.as_deref() {
        Some("openai") => {
            target.engine = Some(crate::model::VoiceEngine::Http {
                base_url,
                api_key_env,
                model,
                language,
            });
        }
        Some("command") => match command {
            Some(argv) => target.engine = Some(crate::model::VoiceEngine::Command { argv }),
            None => sink.error(format!(
                "{path}.command: the command engine needs the program and its arguments, with {{file}} where the audio goes"
            )),
        },
        Some(_) => target.engine = None,
        None => {}
    }
}

/// `bridge.broadcast`, field-wise.
fn apply_broadcast(target: &mut BroadcastSettings, value: &Value, path: &str, sink: &mut Sink<'_>) {
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
fn apply_rate_limit(
    target: &mut RateLimitSettings,
    value: &Value,
    path: &str,
    sink: &mut Sink<'_>,
) {
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
