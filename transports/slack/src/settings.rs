//! What `transports.slack` may hold, declared once for config validation (in the bridge)
//! and for the factory (in the host), and how the transport is built from it.

use std::sync::Arc;

use transport_core::Transport;
use transport_core::platform::{
    BuildInput, ENABLED, HTTP_SCHEMES, LOCK_STALE_MS, Platform, Setting, SettingDefault,
    SettingKind, Settings,
};

use crate::{SlackConfig, SlackTransport, normalize};

/// Default name of the variable holding the bot token (`xoxb-…`).
pub const DEFAULT_TOKEN_ENV: &str = "PI_SLACK_BOT_TOKEN";

/// Default name of the variable holding the app-level token (`xapp-…`).
pub const DEFAULT_APP_TOKEN_ENV: &str = "PI_SLACK_APP_TOKEN";

/// Default Web API base URL.
pub const DEFAULT_BASE_URL: &str = "https://slack.com/api";

/// `tokenEnv`: the name of the variable holding the bot token (never the token, I10).
pub const TOKEN_ENV: Setting = Setting {
    name: "tokenEnv",
    kind: SettingKind::EnvName,
    default: SettingDefault::Text(DEFAULT_TOKEN_ENV),
    summary: "name of the environment variable holding the bot token (xoxb-...) from OAuth & Permissions",
};

/// `appTokenEnv`: the name of the variable holding the app-level token.
pub const APP_TOKEN_ENV: Setting = Setting {
    name: "appTokenEnv",
    kind: SettingKind::EnvName,
    default: SettingDefault::Text(DEFAULT_APP_TOKEN_ENV),
    summary: "name of the environment variable holding the app-level token (xapp-...) with connections:write, for Socket Mode",
};

/// `baseUrl`: the Web API (a test server in tests).
pub const BASE_URL: Setting = Setting {
    name: "baseUrl",
    kind: SettingKind::Url(HTTP_SCHEMES),
    default: SettingDefault::Text(DEFAULT_BASE_URL),
    summary: "Slack Web API base URL; change it only for a test server",
};

/// `sessionTopics`: the channel the broker makes a thread per session in.
pub const SESSION_TOPICS: Setting = Setting {
    name: "sessionTopics",
    kind: SettingKind::Text,
    default: SettingDefault::Absent,
    summary: "id of a channel (like C0123456789) where `host-shim serve` starts a thread per \
              session; invite the bot to it first",
};

/// Every key of `transports.slack`.
pub const SETTINGS: Settings = Settings {
    id: "slack",
    display_name: "Slack",
    keys: &[
        ENABLED,
        TOKEN_ENV,
        APP_TOKEN_ENV,
        BASE_URL,
        LOCK_STALE_MS,
        SESSION_TOPICS,
    ],
};

/// Slack, as a host offers it: settings, constructor and the pure normalizer.
pub static PLATFORM: Platform = Platform {
    settings: SETTINGS,
    build,
    normalize: normalize::normalize,
};

/// Builds the transport from validated settings. No I/O: the tokens are first tried by
/// `identify` and `start`. The errors name the variables, never their values.
pub fn build(input: &BuildInput<'_>) -> Result<Arc<dyn Transport>, String> {
    let bot_env = input.text(TOKEN_ENV.name).unwrap_or(DEFAULT_TOKEN_ENV);
    let app_env = input
        .text(APP_TOKEN_ENV.name)
        .unwrap_or(DEFAULT_APP_TOKEN_ENV);
    let token = |key: &str| {
        input
            .credential(key)
            .map(str::trim)
            .filter(|token| !token.is_empty())
    };
    let missing: Vec<String> = [(TOKEN_ENV.name, bot_env), (APP_TOKEN_ENV.name, app_env)]
        .iter()
        .filter(|(key, _)| token(key).is_none())
        .map(|(_, env)| format!("${env}"))
        .collect();
    let (Some(bot), Some(app)) = (token(TOKEN_ENV.name), token(APP_TOKEN_ENV.name)) else {
        return Err(format!(
            "Slack is enabled but {} {} not set. Export the bot token (xoxb-..., OAuth & Permissions) as ${bot_env} and the app-level token (xapp-..., Basic Information, App-Level Tokens) as ${app_env}; never put them in the config file.",
            missing.join(" and "),
            if missing.len() == 1 { "is" } else { "are" },
        ));
    };
    let mut config = SlackConfig::new(
        bot,
        app,
        input.text(BASE_URL.name).unwrap_or(DEFAULT_BASE_URL),
    );
    config.bot_token_env = bot_env.to_owned();
    config.app_token_env = app_env.to_owned();
    config.session_topics = input.text(SESSION_TOPICS.name).map(str::to_owned);
    let transport = SlackTransport::new(config).map_err(|error| error.to_string())?;
    Ok(Arc::new(transport))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOT: &str = "xoxb-1-2-SECRETbotsettings";
    const APP: &str = "xapp-1-A1-2-SECRETappsettings";

    fn input(bot: Option<&str>, app: Option<&str>) -> BuildInput<'static> {
        let mut input = BuildInput::default();
        input
            .settings
            .insert("tokenEnv".to_owned(), "MY_BOT".into());
        input
            .settings
            .insert("appTokenEnv".to_owned(), "MY_APP".into());
        if let Some(bot) = bot {
            input.credentials.insert("tokenEnv", bot.to_owned());
        }
        if let Some(app) = app {
            input.credentials.insert("appTokenEnv", app.to_owned());
        }
        input
    }

    #[test]
    fn the_declaration_lists_every_key_and_both_credentials() {
        let names: Vec<_> = SETTINGS.keys.iter().map(|key| key.name).collect();
        assert_eq!(
            names,
            [
                "enabled",
                "tokenEnv",
                "appTokenEnv",
                "baseUrl",
                "lockStaleMs",
                "sessionTopics"
            ]
        );
        let env: Vec<_> = SETTINGS.env_keys().map(|key| key.default).collect();
        assert_eq!(
            env,
            [
                SettingDefault::Text("PI_SLACK_BOT_TOKEN"),
                SettingDefault::Text("PI_SLACK_APP_TOKEN")
            ]
        );
        assert_eq!(PLATFORM.settings.id, "slack");
    }

    #[test]
    fn a_missing_token_names_its_variable() {
        let error = build(&input(None, Some(APP))).err().expect("no bot token");
        assert!(error.contains("$MY_BOT is not set"), "{error}");
        let error = build(&input(Some(BOT), Some(" ")))
            .err()
            .expect("blank app token");
        assert!(error.contains("$MY_APP is not set"), "{error}");
        let error = build(&input(None, None)).err().expect("neither");
        assert!(error.contains("$MY_BOT and $MY_APP are not set"), "{error}");
    }

    #[test]
    fn malformed_or_swapped_tokens_are_refused_without_showing_them() {
        let error = build(&input(Some(APP), Some(BOT))).err().expect("swapped");
        assert!(
            error.contains("$MY_BOT") && error.contains("swapped"),
            "{error}"
        );
        assert!(!error.contains("SECRET"), "{error}");
        let error = build(&input(Some("not a token"), Some(APP)))
            .err()
            .expect("bad");
        assert!(
            error.contains("xoxb-") && !error.contains("not a token"),
            "{error}"
        );
        let mut bad_url = input(Some(BOT), Some(APP));
        bad_url
            .settings
            .insert("baseUrl".to_owned(), format!("ftp://x/{BOT}").into());
        let error = build(&bad_url).err().expect("bad url");
        assert!(!error.contains(BOT), "{error}");
    }

    #[test]
    fn two_tokens_and_defaults_build_a_transport() {
        let transport = build(&input(Some(BOT), Some(APP))).expect("built");
        assert_eq!(transport.id(), "slack");
        assert!(!transport.capabilities().typing);
        let line = transport.diagnose();
        assert!(!line.contains(BOT) && !line.contains(APP), "{line}");
    }
}
