//! The platforms a host offers, as test data: the same declarations the transport crates
//! make (id, keys, kinds, defaults), written out here because the guest cannot depend on
//! native transport crates. Shared by the config unit tests (`#[path]`) and the
//! integration tests (`support`).

// The including module (config.rs's tests, or `support`) brings the model types.
use super::{Platform, Setting, SettingKind, SettingValue};

fn key(name: &str, kind: SettingKind, default: Option<SettingValue>) -> Setting {
    Setting {
        name: name.into(),
        kind,
        default,
        summary: String::new(),
    }
}

fn enabled() -> Setting {
    key("enabled", SettingKind::Boolean, None)
}

fn env(name: &str, default: &str) -> Setting {
    key(
        name,
        SettingKind::EnvName,
        Some(SettingValue::Text(default.into())),
    )
}

fn url(name: &str, schemes: &[&str]) -> Setting {
    key(
        name,
        SettingKind::Url(schemes.iter().map(|s| s.to_string()).collect()),
        None,
    )
}

fn lock_stale_ms() -> Setting {
    key(
        "lockStaleMs",
        SettingKind::Integer {
            min: 1_000,
            max: 86_400_000,
        },
        Some(SettingValue::Integer(900_000)),
    )
}

fn platform(id: &str, settings: Vec<Setting>) -> Platform {
    Platform {
        id: id.into(),
        display_name: id.into(),
        settings,
    }
}

/// Telegram, Discord, Slack, robo_claw and the terminal, in that order.
pub fn platforms() -> Vec<Platform> {
    vec![
        platform(
            "telegram",
            vec![
                enabled(),
                env("tokenEnv", "PI_TELEGRAM_TOKEN"),
                url("baseUrl", &["http", "https"]),
                lock_stale_ms(),
            ],
        ),
        platform(
            "discord",
            vec![
                enabled(),
                env("tokenEnv", "PI_DISCORD_TOKEN"),
                url("baseUrl", &["http", "https"]),
                url("gatewayUrl", &["ws", "wss"]),
                lock_stale_ms(),
            ],
        ),
        platform(
            "slack",
            vec![
                enabled(),
                env("tokenEnv", "PI_SLACK_BOT_TOKEN"),
                env("appTokenEnv", "PI_SLACK_APP_TOKEN"),
                url("baseUrl", &["http", "https"]),
                lock_stale_ms(),
            ],
        ),
        platform(
            "robo_claw",
            vec![
                enabled(),
                env("tokenEnv", "PI_ROBO_CLAW_TOKEN"),
                key(
                    "host",
                    SettingKind::Text,
                    Some(SettingValue::Text("0.0.0.0".into())),
                ),
                key(
                    "port",
                    SettingKind::Integer {
                        min: 1,
                        max: 65_535,
                    },
                    Some(SettingValue::Integer(50_052)),
                ),
                key(
                    "selfSenderId",
                    SettingKind::Text,
                    Some(SettingValue::Text("robot".into())),
                ),
                lock_stale_ms(),
            ],
        ),
        platform("terminal", vec![enabled()]),
    ]
}
