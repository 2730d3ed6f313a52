//! What `transports.discord` may hold, declared once for config validation (in the
//! bridge) and for the factory (in the host), and how the transport is built from it.

use std::sync::Arc;
use std::time::Duration;

use transport_core::Transport;
use transport_core::platform::{
    BuildInput, ENABLED, HTTP_SCHEMES, LOCK_STALE_MS, Platform, Setting, SettingDefault,
    SettingKind, Settings, WS_SCHEMES,
};

use crate::{DiscordConfig, DiscordTransport, normalize};

/// Default name of the environment variable holding the bot token.
pub const DEFAULT_TOKEN_ENV: &str = "PI_DISCORD_TOKEN";

/// Default REST base URL (API v10).
pub const DEFAULT_BASE_URL: &str = "https://discord.com/api/v10";

/// Default READY deadline per gateway connection, in seconds: Discord answers in well
/// under a second; twenty covers a slow network without leaving a dead connection
/// unnoticed for long.
pub const DEFAULT_READY_TIMEOUT_SECONDS: i64 = 20;

/// `tokenEnv`: the name of the variable holding the token (never the token, I10).
pub const TOKEN_ENV: Setting = Setting {
    name: "tokenEnv",
    kind: SettingKind::EnvName,
    default: SettingDefault::Text(DEFAULT_TOKEN_ENV),
    summary: "name of the environment variable holding the bot token from the Developer Portal",
};

/// `baseUrl`: the REST API, version included.
pub const BASE_URL: Setting = Setting {
    name: "baseUrl",
    kind: SettingKind::Url(HTTP_SCHEMES),
    default: SettingDefault::Text(DEFAULT_BASE_URL),
    summary: "Discord REST API with its version; change it only for a proxy or a test server",
};

/// `gatewayUrl`: a gateway to connect to instead of the one `GET /gateway/bot` names.
pub const GATEWAY_URL: Setting = Setting {
    name: "gatewayUrl",
    kind: SettingKind::Url(WS_SCHEMES),
    default: SettingDefault::Absent,
    summary: "gateway WebSocket to use instead of the one Discord names; only for a proxy or a test server",
};

/// `readyTimeoutSeconds`: how long one gateway connection may take to become ready.
pub const READY_TIMEOUT_SECONDS: Setting = Setting {
    name: "readyTimeoutSeconds",
    kind: SettingKind::Integer { min: 5, max: 120 },
    default: SettingDefault::Integer(DEFAULT_READY_TIMEOUT_SECONDS),
    summary: "seconds a gateway connection may take to send READY before it is tried again",
};

/// Discord's default upload limit for bots (25 MiB, since 2023); a server with boosts may
/// allow more, a channel never tells a bot its own limit before the upload.
pub const DEFAULT_MAX_UPLOAD_BYTES: i64 = 25 * 1024 * 1024;

/// The most bytes one file the agent sends may hold here: Discord's limit for the servers
/// the bot posts in. Discord answers a bigger upload with 413, which is said as such.
pub const MAX_UPLOAD_BYTES: Setting = Setting {
    name: "maxUploadBytes",
    kind: SettingKind::Integer {
        min: 1024 * 1024,
        max: 500 * 1024 * 1024,
    },
    default: SettingDefault::Integer(DEFAULT_MAX_UPLOAD_BYTES),
    summary: "largest file the agent may upload (bytes): 25 MiB unless the server's boosts allow more",
};

/// `sessionTopics`: the channel the broker makes a thread per session in.
pub const SESSION_TOPICS: Setting = Setting {
    name: "sessionTopics",
    kind: SettingKind::Text,
    default: SettingDefault::Absent,
    summary: "id of a text channel where `host-shim serve` makes a thread per session; the bot's \
              role needs Create Public Threads, Send Messages in Threads and Manage Threads there",
};

/// Every key of `transports.discord`.
pub const SETTINGS: Settings = Settings {
    id: "discord",
    display_name: "Discord",
    keys: &[
        ENABLED,
        TOKEN_ENV,
        BASE_URL,
        GATEWAY_URL,
        LOCK_STALE_MS,
        READY_TIMEOUT_SECONDS,
        MAX_UPLOAD_BYTES,
        SESSION_TOPICS,
    ],
};

/// Discord, as a host offers it: settings, constructor and the pure normalizer.
pub static PLATFORM: Platform = Platform {
    settings: SETTINGS,
    build,
    normalize: normalize::normalize,
};

/// Builds the transport from validated settings. No I/O: the token is first tried by
/// `identify`. The errors name the variable, never its value.
pub fn build(input: &BuildInput<'_>) -> Result<Arc<dyn Transport>, String> {
    let env = input.text(TOKEN_ENV.name).unwrap_or(DEFAULT_TOKEN_ENV);
    let token = input
        .credential(TOKEN_ENV.name)
        .map(str::trim)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| {
            format!(
                "Discord is enabled but ${env} is not set. Export the bot token from the Developer Portal in the environment; never put it in the config file."
            )
        })?;
    let mut config =
        DiscordConfig::new(token, input.text(BASE_URL.name).unwrap_or(DEFAULT_BASE_URL));
    config.token_env = env.to_owned();
    config.gateway_url = input.text(GATEWAY_URL.name).map(str::to_owned);
    if let Some(seconds) = input
        .integer(READY_TIMEOUT_SECONDS.name)
        .and_then(|seconds| u64::try_from(seconds).ok())
    {
        config.ready_timeout = Duration::from_secs(seconds.clamp(5, 120));
    }
    if let Some(bytes) = input
        .integer(MAX_UPLOAD_BYTES.name)
        .and_then(|bytes| u64::try_from(bytes).ok())
    {
        config.max_upload_bytes = bytes;
    }
    config.session_topics = input.text(SESSION_TOPICS.name).map(str::to_owned);
    let transport = DiscordTransport::new(config).map_err(|error| error.to_string())?;
    Ok(Arc::new(transport))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "MTIzNDU2Nzg5.GsEtTi.settings-secret_value";

    fn input(token: Option<&str>) -> BuildInput<'static> {
        let mut input = BuildInput::default();
        input
            .settings
            .insert("tokenEnv".to_owned(), "MY_DISCORD".into());
        if let Some(token) = token {
            input.credentials.insert("tokenEnv", token.to_owned());
        }
        input
    }

    #[test]
    fn the_declaration_lists_every_key_with_its_default() {
        let names: Vec<_> = SETTINGS.keys.iter().map(|key| key.name).collect();
        assert_eq!(
            names,
            [
                "enabled",
                "tokenEnv",
                "baseUrl",
                "gatewayUrl",
                "lockStaleMs",
                "readyTimeoutSeconds",
                "maxUploadBytes",
                "sessionTopics"
            ]
        );
        assert_eq!(
            SETTINGS.key("tokenEnv").map(|key| key.default),
            Some(SettingDefault::Text("PI_DISCORD_TOKEN"))
        );
        assert_eq!(
            SETTINGS.key("gatewayUrl").map(|key| key.kind),
            Some(SettingKind::Url(WS_SCHEMES))
        );
        assert_eq!(SETTINGS.env_keys().count(), 1);
        assert_eq!(PLATFORM.settings.id, "discord");
    }

    #[test]
    fn a_missing_token_names_the_variable() {
        let error = build(&input(None)).err().expect("no token");
        assert!(error.contains("$MY_DISCORD is not set"), "{error}");
        let error = build(&input(Some("  "))).err().expect("blank token");
        assert!(error.contains("$MY_DISCORD"), "{error}");
    }

    #[test]
    fn a_malformed_token_or_url_is_refused_without_showing_the_token() {
        let error = build(&input(Some("not a token"))).err().expect("bad token");
        assert!(error.contains("$MY_DISCORD"), "{error}");
        assert!(!error.contains("not a token"), "{error}");
        let mut bad_url = input(Some(TOKEN));
        bad_url
            .settings
            .insert("baseUrl".to_owned(), format!("ftp://x/{TOKEN}").into());
        let error = build(&bad_url).err().expect("bad url");
        assert!(!error.contains(TOKEN), "{error}");
        let mut bad_gateway = input(Some(TOKEN));
        bad_gateway
            .settings
            .insert("gatewayUrl".to_owned(), "https://gateway.discord.gg".into());
        let error = build(&bad_gateway).err().expect("bad gateway url");
        assert!(error.contains("wss://"), "{error}");
    }

    #[test]
    fn a_token_and_defaults_build_a_transport() {
        let transport = build(&input(Some(TOKEN))).expect("built");
        assert_eq!(transport.id(), "discord");
        assert!(!transport.diagnose().contains(TOKEN));
        assert_eq!(transport.capabilities().max_message_length, 2000);
    }
}
