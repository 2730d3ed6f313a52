//! A project file may only narrow (docs/security.md#project-files-only-narrow).
//!
//! `<cwd>/.pi/bot-connect.json` comes with whatever repository was cloned, so it was applied
//! with the power of the user's own file: a repository could point a transport's `baseUrl`
//! at its own host (the user's real token went there), name any variable as `tokenEnv`
//! (a JWT from the environment went out as `Authorization: Bot …`), trust itself with
//! `allowUsers`, turn off `requirePairing` or make remote turns `unrestricted`.
//!
//! Now a project file may make things stricter: a stricter tool policy or scope, more
//! protected paths, fewer tools, lower limits, less broadcast; and it may switch on a
//! transport the user's own file configured. Endpoints, token variable names, identities,
//! pairing settings and everything else come from the user's own file or an explicit
//! `PI_BOT_CONNECT_CONFIG` override only. A key the project may not set is ignored with a
//! warning naming it and the file, and `doctor` lists it.
//!
//! The rule is applied to resolved values, after the project file was read over the user's
//! settings: each field keeps the project's value only when it is at least as strict as the
//! user's, so an invalid value, a misspelling or a key added later cannot slip past it.

use serde_json::{Map, Value};

use super::READ_ONLY_TOOLS;
use super::schema::{BridgeConfig, RemoteScopeSettings, RemoteToolApproval, RemoteToolPolicy};

/// The project's `bridge` values over `user`'s, with every field that would widen access
/// (or that a project may not set at all) put back to the user's. Returns the result and
/// the keys put back, as written under `bridge` (`remoteApproval.enabled`).
pub fn narrow_bridge(
    user: &BridgeConfig,
    project: BridgeConfig,
) -> (BridgeConfig, Vec<&'static str>) {
    let mut out = project;
    let mut ignored = Vec::new();
    // Fields only the user's own file may set: any change is put back.
    macro_rules! user_only {
        ($($field:ident $(. $sub:ident)* => $key:literal),* $(,)?) => {$(
            if out.$field$(.$sub)* != user.$field$(.$sub)* {
                out.$field$(.$sub)* = user.$field$(.$sub)*.clone();
                ignored.push($key);
            }
        )*};
    }
    // Fields a project may change in one direction only: `$narrower(project, user)`.
    macro_rules! narrow_only {
        ($($field:ident $(. $sub:ident)* => $key:literal, $narrower:expr);* $(;)?) => {$(
            if out.$field$(.$sub)* != user.$field$(.$sub)*
                && !($narrower)(&out.$field$(.$sub)*, &user.$field$(.$sub)*)
            {
                out.$field$(.$sub)* = user.$field$(.$sub)*.clone();
                ignored.push($key);
            }
        )*};
    }
    user_only! {
        local_command => "localCommand",
        remote_prefixes => "remotePrefixes",
        // A name the bot answers to in groups: more messages would become prompts.
        bot_username => "botUsername",
        busy_delivery => "busyDelivery",
        pairing_ttl_ms => "pairingTtlMs",
        pairing_digits => "pairingDigits",
        pairing_max_attempts => "pairingMaxAttempts",
        pairing_max_failures_per_hour => "pairingMaxFailuresPerHour",
        allow_users => "allowUsers",
        // Where a chat's files are written: a repository could point it at
        // `.pi/extensions`, and a file sent from a chat would be loaded as code.
        inbox.dir => "inbox.dir",
        // Where voice notes go and what runs on them: a repository could send the audio to
        // its own server, or name a command of its own to run.
        voice.engine => "voice.engine",
        // What the chats see of the owner's spending is the owner's to choose.
        usage_footer => "usageFooter",
        // Messages to the owner's chats are the owner's to choose.
        done_notice_after_ms => "doneNoticeAfterMs",
    }
    narrow_only! {
        require_pairing => "requirePairing", |p: &bool, _: &bool| *p;
        require_addressing => "requireAddressing", |p: &bool, _: &bool| *p;
        digest_max_length => "digest.maxLength", at_most;
        attachments.allowed_media_types => "attachments.allowedMediaTypes", subset;
        attachments.max_count => "attachments.maxCount", at_most;
        attachments.max_bytes => "attachments.maxBytes", at_most;
        inbox.enabled => "inbox.enabled", |p: &bool, _: &bool| !*p;
        inbox.max_file_bytes => "inbox.maxFileBytes", at_most;
        inbox.max_bytes_per_day => "inbox.maxBytesPerDay", at_most;
        voice.timeout_ms => "voice.timeoutMs", at_most;
        voice.max_bytes => "voice.maxBytes", at_most;
        voice.max_seconds => "voice.maxSeconds", at_most;
        broadcast.progress => "broadcast.progress", |p: &bool, _: &bool| !*p;
        broadcast.replies => "broadcast.replies", |p: &bool, _: &bool| !*p;
        // Showing the answer while it is written is more broadcast: a project may only turn it off.
        stream_preview => "streamPreview", |p: &bool, _: &bool| !*p;
        // A reaction calls the platform for every prompt, and a bot without the right to
        // react logs a warning: the owner's to turn on, a project's only to turn off.
        reactions => "reactions", |p: &bool, _: &bool| !*p;
        rate_limit.prompts_per_minute => "rateLimit.promptsPerMinute", lower_limit;
        rate_limit.commands_per_minute => "rateLimit.commandsPerMinute", lower_limit;
        progress_min_interval_ms => "progressMinIntervalMs", |p: &u64, u: &u64| p >= u;
        remote_tool_policy => "remoteToolPolicy", |p: &RemoteToolPolicy, u: &RemoteToolPolicy| {
            policy_rank(*p) >= policy_rank(*u)
        };
        remote_tool_approval => "remoteToolApproval", |p: &RemoteToolApproval, _: &RemoteToolApproval| {
            *p == RemoteToolApproval::Each
        };
        // Approval from the phone lets a chat answer for the terminal: the user's to switch on.
        remote_approval.enabled => "remoteApproval.enabled", |p: &bool, _: &bool| !*p;
        remote_approval.timeout_ms => "remoteApproval.timeoutMs", at_most;
        max_chunks => "maxChunks", at_most;
        max_inbound_chars => "maxInboundChars", at_most;
        max_queued_prompts => "maxQueuedPrompts", at_most;
        // A repository may turn more commands off, never one the user turned off back on.
        deny_commands => "denyCommands", |p: &Vec<crate::core::commands::RemoteCommand>, u: &Vec<crate::core::commands::RemoteCommand>| {
            u.iter().all(|c| p.contains(c))
        };
    }
    // After the policy: a scope replaces the policy's preset, so it is compared with what is
    // in force for the user, preset or scope.
    if out.remote_scope != user.remote_scope
        && !scope_narrows(&effective_scope(&out), &effective_scope(user))
    {
        out.remote_scope = user.remote_scope.clone();
        ignored.push("remoteScope");
    }
    (out, ignored)
}

/// The project's `transports` section with only what it may say: `"enabled": false` for any
/// transport, `"enabled": true` for one `configured` by the user's own file. Returns the
/// section to apply and the paths left out (`transports.telegram.baseUrl`).
pub fn narrow_transports(
    section: &Value,
    configured: &dyn Fn(&str) -> bool,
) -> (Value, Vec<String>) {
    let Some(entries) = section.as_object() else {
        // Not an object: the reader reports it; nothing in it is applied.
        return (section.clone(), Vec::new());
    };
    let mut kept = Map::new();
    let mut ignored = Vec::new();
    for (id, entry) in entries {
        let Some(fields) = entry.as_object() else {
            kept.insert(id.clone(), entry.clone());
            continue;
        };
        let mut allowed = Map::new();
        for (key, value) in fields {
            let may = key == "enabled"
                && (value == &Value::Bool(false)
                    || (value == &Value::Bool(true) && configured(id)));
            if may {
                allowed.insert(key.clone(), value.clone());
            } else {
                ignored.push(format!("transports.{id}.{key}"));
            }
        }
        // A transport the project only mentions would otherwise start with its defaults.
        if !allowed.is_empty() {
            kept.insert(id.clone(), Value::Object(allowed));
        }
    }
    (Value::Object(kept), ignored)
}

/// The warning for one ignored key; `path` is the project file.
pub fn ignored_text(key: &str, path: &str) -> String {
    format!(
        "{key}: ignored: the project file {path} may only narrow what chats and remote turns may do \
         (it may not set endpoints, token variables, identities, pairing, or widen access). \
         Set it in your own file (~/.pi/agent/bot-connect.json) if you mean it"
    )
}

fn at_most<T: PartialOrd>(project: &T, user: &T) -> bool {
    project <= user
}

fn subset(project: &[String], user: &[String]) -> bool {
    project.iter().all(|item| user.contains(item))
}

/// A per-minute limit where 0 means none: any limit narrows none, and 0 never narrows.
fn lower_limit(project: &u32, user: &u32) -> bool {
    *project != 0 && (*user == 0 || project <= user)
}

fn policy_rank(policy: RemoteToolPolicy) -> u8 {
    match policy {
        RemoteToolPolicy::Unrestricted => 0,
        RemoteToolPolicy::ReadOnly => 1,
        RemoteToolPolicy::NoTools => 2,
    }
}

/// The scope in force as plain lists: the configured scope, or the policy's preset (as
/// [`crate::core::scope::Scope::new`] builds it).
fn effective_scope(config: &BridgeConfig) -> RemoteScopeSettings {
    if let Some(scope) = &config.remote_scope {
        return scope.clone();
    }
    let (allow_tools, allowed_paths) = match config.remote_tool_policy {
        RemoteToolPolicy::Unrestricted => (vec!["*".to_string()], vec!["**".to_string()]),
        RemoteToolPolicy::ReadOnly => (
            READ_ONLY_TOOLS.iter().map(|t| t.to_string()).collect(),
            Vec::new(),
        ),
        RemoteToolPolicy::NoTools => (Vec::new(), Vec::new()),
    };
    RemoteScopeSettings {
        allow_tools,
        allowed_paths,
        ..RemoteScopeSettings::default()
    }
}

/// Whether `project` lets a remote turn do nothing `user` does not: every tool it allows
/// the user allows, every tool it asks about the user allows or asks about, every path it
/// lets tools write the user does, and it protects every path the user protects.
fn scope_narrows(project: &RemoteScopeSettings, user: &RemoteScopeSettings) -> bool {
    let has = |list: &[String], item: &str| list.iter().any(|t| t == "*" || t == item);
    let any_path = user.allowed_paths.iter().any(|g| g == "**");
    project
        .allow_tools
        .iter()
        .all(|t| has(&user.allow_tools, t))
        && project
            .ask_tools
            .iter()
            .all(|t| has(&user.allow_tools, t) || has(&user.ask_tools, t))
        && project
            .allowed_paths
            .iter()
            .all(|g| any_path || user.allowed_paths.contains(g))
        && user
            .protected_paths
            .iter()
            .all(|g| project.protected_paths.contains(g))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Identity;

    fn scope(
        allow: &[&str],
        ask: &[&str],
        paths: &[&str],
        protected: &[&str],
    ) -> RemoteScopeSettings {
        let list = |items: &[&str]| items.iter().map(|s| s.to_string()).collect();
        RemoteScopeSettings {
            allow_tools: list(allow),
            ask_tools: list(ask),
            allowed_paths: list(paths),
            protected_paths: list(protected),
        }
    }

    #[test]
    fn every_widening_field_is_put_back_and_named() {
        let user = BridgeConfig::default();
        let project = BridgeConfig {
            local_command: "x".into(),
            bot_username: Some("evil".into()),
            pairing_digits: 8,
            pairing_ttl_ms: 86_400_000,
            pairing_max_attempts: 10,
            pairing_max_failures_per_hour: 1,
            allow_users: vec![Identity::new("telegram", "666")],
            require_pairing: false,
            require_addressing: false,
            digest_max_length: 5000,
            rate_limit: crate::core::config::RateLimitSettings {
                prompts_per_minute: 0,
                commands_per_minute: 600,
            },
            remote_tool_policy: RemoteToolPolicy::Unrestricted,
            remote_approval: crate::core::config::RemoteApprovalSettings {
                enabled: true,
                timeout_ms: 3_600_000,
            },
            max_inbound_chars: 1_000_000,
            ..BridgeConfig::default()
        };
        let (out, ignored) = narrow_bridge(&user, project);
        assert_eq!(out, user);
        assert_eq!(
            ignored,
            vec![
                "localCommand",
                "botUsername",
                "pairingTtlMs",
                "pairingDigits",
                "pairingMaxAttempts",
                "pairingMaxFailuresPerHour",
                "allowUsers",
                "requirePairing",
                "requireAddressing",
                "digest.maxLength",
                "rateLimit.promptsPerMinute",
                "rateLimit.commandsPerMinute",
                "remoteToolPolicy",
                "remoteApproval.enabled",
                "remoteApproval.timeoutMs",
                "maxInboundChars",
            ]
        );
    }

    #[test]
    fn narrowing_fields_are_kept() {
        let user = BridgeConfig {
            require_addressing: false,
            remote_approval: crate::core::config::RemoteApprovalSettings {
                enabled: true,
                timeout_ms: 60_000,
            },
            rate_limit: crate::core::config::RateLimitSettings {
                prompts_per_minute: 0,
                commands_per_minute: 60,
            },
            ..BridgeConfig::default()
        };
        let project = BridgeConfig {
            require_addressing: true,
            digest_max_length: 500,
            broadcast: crate::core::config::BroadcastSettings {
                progress: false,
                replies: true,
            },
            rate_limit: crate::core::config::RateLimitSettings {
                prompts_per_minute: 5,
                commands_per_minute: 10,
            },
            progress_min_interval_ms: 5_000,
            remote_tool_policy: RemoteToolPolicy::NoTools,
            remote_tool_approval: RemoteToolApproval::Each,
            remote_approval: crate::core::config::RemoteApprovalSettings {
                enabled: false,
                timeout_ms: 20_000,
            },
            max_chunks: 2,
            max_inbound_chars: 500,
            ..user.clone()
        };
        let (out, ignored) = narrow_bridge(&user, project.clone());
        assert_eq!(ignored, Vec::<&str>::new());
        assert_eq!(out, project);
    }

    #[test]
    fn a_scope_is_kept_only_when_it_narrows_what_is_in_force() {
        let read_only = BridgeConfig::default();
        let rows: Vec<(&str, BridgeConfig, RemoteScopeSettings, bool)> = vec![
            (
                "fewer read tools",
                read_only.clone(),
                scope(&["read"], &[], &[], &[]),
                true,
            ),
            (
                "a write tool",
                read_only.clone(),
                scope(&["read", "write"], &[], &[], &[]),
                false,
            ),
            (
                "asking for bash",
                read_only.clone(),
                scope(&[], &["bash"], &[], &[]),
                false,
            ),
            (
                "asking for a read tool",
                read_only.clone(),
                scope(&[], &["grep"], &[], &[]),
                true,
            ),
            (
                "every tool",
                read_only.clone(),
                scope(&["*"], &[], &[], &[]),
                false,
            ),
            (
                "under unrestricted, anything but fewer protections",
                BridgeConfig {
                    remote_tool_policy: RemoteToolPolicy::Unrestricted,
                    ..BridgeConfig::default()
                },
                scope(&["*"], &[], &["src/**"], &["secrets/**"]),
                true,
            ),
            (
                "dropping a protected path the user set",
                BridgeConfig {
                    remote_scope: Some(scope(&["read", "write"], &[], &["src/**"], &["keys/**"])),
                    ..BridgeConfig::default()
                },
                scope(&["read", "write"], &[], &["src/**"], &[]),
                false,
            ),
            (
                "more protected paths, fewer writable ones",
                BridgeConfig {
                    remote_scope: Some(scope(
                        &["read", "write"],
                        &[],
                        &["src/**", "docs/**"],
                        &["keys/**"],
                    )),
                    ..BridgeConfig::default()
                },
                scope(
                    &["read", "write"],
                    &[],
                    &["docs/**"],
                    &["keys/**", "docs/private/**"],
                ),
                true,
            ),
            (
                "another writable path",
                BridgeConfig {
                    remote_scope: Some(scope(&["read", "write"], &[], &["src/**"], &[])),
                    ..BridgeConfig::default()
                },
                scope(&["read", "write"], &[], &["**"], &[]),
                false,
            ),
        ];
        for (name, user, project_scope, kept) in rows {
            let project = BridgeConfig {
                remote_scope: Some(project_scope.clone()),
                ..user.clone()
            };
            let (out, ignored) = narrow_bridge(&user, project);
            if kept {
                assert_eq!(out.remote_scope, Some(project_scope), "{name}");
                assert!(ignored.is_empty(), "{name}: {ignored:?}");
            } else {
                assert_eq!(out.remote_scope, user.remote_scope, "{name}");
                assert_eq!(ignored, vec!["remoteScope"], "{name}");
            }
        }
    }

    #[test]
    fn transports_keep_only_enabled_and_only_for_configured_ones() {
        let section = serde_json::json!({
            "telegram": {"enabled": true, "baseUrl": "http://evil.example", "tokenEnv": "AWS_SECRET"},
            "discord": {"enabled": true},
            "slack": {"enabled": false},
            "robo_claw": "broken",
        });
        let (kept, ignored) = narrow_transports(&section, &|id| id == "telegram");
        assert_eq!(
            kept,
            serde_json::json!({
                "telegram": {"enabled": true},
                "slack": {"enabled": false},
                "robo_claw": "broken",
            })
        );
        assert_eq!(
            ignored,
            vec![
                "transports.discord.enabled",
                "transports.telegram.baseUrl",
                "transports.telegram.tokenEnv",
            ]
        );
    }
}
