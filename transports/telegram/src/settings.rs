//! What `transports.telegram` may hold, declared once for config validation (in the
//! bridge) and for the factory (in the host), and how the transport is built from it.

use std::sync::Arc;
use std::time::Duration;

use transport_core::Transport;
use transport_core::platform::{
    BuildInput, ENABLED, HTTP_SCHEMES, LOCK_STALE_MS, Platform, Setting, SettingDefault,
    SettingKind, Settings,
};

use crate::{TelegramConfig, TelegramTransport, normalize};

/// Default name of the environment variable holding the bot token.
pub const DEFAULT_TOKEN_ENV: &str = "PI_TELEGRAM_TOKEN";

/// Default Bot API server.
pub const DEFAULT_BASE_URL: &str = "https://api.telegram.org";

/// Default long-poll timeout in seconds: long enough that an idle bot costs two requests a
/// minute, short enough that a silently dead connection is noticed within half a minute.
pub const DEFAULT_POLL_TIMEOUT_SECONDS: i64 = 25;

/// `tokenEnv`: the name of the variable holding the token (never the token, I10).
pub const TOKEN_ENV: Setting = Setting {
    name: "tokenEnv",
    kind: SettingKind::EnvName,
    default: SettingDefault::Text(DEFAULT_TOKEN_ENV),
    summary: "name of the environment variable holding the bot token from @BotFather",
};

/// `baseUrl`: the Bot API server (a local `telegram-bot-api` server, or a test server).
pub const BASE_URL: Setting = Setting {
    name: "baseUrl",
    kind: SettingKind::Url(HTTP_SCHEMES),
    default: SettingDefault::Text(DEFAULT_BASE_URL),
    summary: "Bot API server; change it only for a local Bot API server or a test server",
};

/// `pollTimeoutSeconds`: how long one `getUpdates` long poll waits for news.
pub const POLL_TIMEOUT_SECONDS: Setting = Setting {
    name: "pollTimeoutSeconds",
    kind: SettingKind::Integer { min: 1, max: 50 },
    default: SettingDefault::Integer(DEFAULT_POLL_TIMEOUT_SECONDS),
    summary: "seconds one getUpdates long poll waits for new messages before asking again",
};

/// `sessionTopics`: the forum supergroup the broker makes a topic per session in, or
/// `private` for a topic per session in each paired user's private chat with the bot.
pub const SESSION_TOPICS: Setting = Setting {
    name: "sessionTopics",
    kind: SettingKind::Text,
    default: SettingDefault::Absent,
    summary: "chat id of a forum supergroup (like -1001234567890) where `host-shim serve` makes a \
              topic per session; the bot must be an admin there with the right to manage topics. \
              Or \"private\": a topic per session in each paired user's private chat with the bot \
              (Threaded Mode on in @BotFather)",
};

/// Every key of `transports.telegram`.
pub const SETTINGS: Settings = Settings {
    id: "telegram",
    display_name: "Telegram",
    keys: &[
        ENABLED,
        TOKEN_ENV,
        BASE_URL,
        LOCK_STALE_MS,
        POLL_TIMEOUT_SECONDS,
        SESSION_TOPICS,
    ],
};

/// Telegram, as a host offers it: settings, constructor and the pure normalizer.
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
                "Telegram is enabled but ${env} is not set. Export the bot token from @BotFather in the environment; never put it in the config file."
            )
        })?;
    let mut config =
        TelegramConfig::new(token, input.text(BASE_URL.name).unwrap_or(DEFAULT_BASE_URL));
    config.token_env = env.to_owned();
    config.state_dir = input.state_dir.clone();
    if let Some(seconds) = input
        .integer(POLL_TIMEOUT_SECONDS.name)
        .and_then(|seconds| u64::try_from(seconds).ok())
    {
        config.poll_timeout = Duration::from_secs(seconds.clamp(1, 50));
    }
    config.session_topics = input.text(SESSION_TOPICS.name).map(str::to_owned);
    let transport = TelegramTransport::new(config).map_err(|error| error.to_string())?;
    Ok(Arc::new(transport))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "123456:SECRET-settings";

    fn input(token: Option<&str>) -> BuildInput<'static> {
        let mut input = BuildInput::default();
        input.settings.insert("tokenEnv".to_owned(), "MY_TG".into());
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
                "lockStaleMs",
                "pollTimeoutSeconds",
                "sessionTopics"
            ]
        );
        assert_eq!(
            SETTINGS.key("tokenEnv").map(|key| key.default),
            Some(SettingDefault::Text("PI_TELEGRAM_TOKEN"))
        );
        assert_eq!(SETTINGS.env_keys().count(), 1);
        assert_eq!(PLATFORM.settings.id, "telegram");
    }

    #[test]
    fn a_missing_token_names_the_variable() {
        let error = build(&input(None)).err().expect("no token");
        assert!(error.contains("$MY_TG is not set"), "{error}");
        let error = build(&input(Some("  "))).err().expect("blank token");
        assert!(error.contains("$MY_TG"), "{error}");
    }

    #[test]
    fn a_malformed_token_or_url_is_refused_without_showing_the_token() {
        let error = build(&input(Some("not a token"))).err().expect("bad token");
        assert!(error.contains("$MY_TG"), "{error}");
        assert!(!error.contains("not a token"), "{error}");
        let mut bad_url = input(Some(TOKEN));
        bad_url
            .settings
            .insert("baseUrl".to_owned(), format!("ftp://x/{TOKEN}").into());
        let error = build(&bad_url).err().expect("bad url");
        assert!(!error.contains(TOKEN), "{error}");
    }

    #[test]
    fn a_token_and_defaults_build_a_transport() {
        let transport = build(&input(Some(TOKEN))).expect("built");
        assert_eq!(transport.id(), "telegram");
        assert!(!transport.diagnose().contains(TOKEN));
    }
}
