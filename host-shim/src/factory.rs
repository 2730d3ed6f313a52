//! The transports this host offers, and building the ones a configuration asks for.
//!
//! Each platform crate declares its settings and constructor once
//! ([`transport_core::platform::Platform`]); this module lists those declarations
//! ([`PLATFORMS`]), hands them to the bridge for validation, and builds from the
//! validated requests. Adding a platform is one line in [`PLATFORMS`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use transport_core::Transport;
use transport_core::platform::{
    BuildInput, ENABLED, EnvLookup, Platform, Setting, SettingDefault, SettingKind, Settings,
};

use crate::wit::session::{self, SettingValue, TransportRequest};
use crate::wit::types::Level;

/// What a factory built from the validated configuration.
#[derive(Default)]
pub struct Built {
    /// The transports, in start order.
    pub transports: Vec<Arc<dyn Transport>>,
    /// Notes about the requests it could not honour (missing credential, unavailable).
    pub notes: Vec<(Level, String)>,
}

/// Builds the transports a configuration asks for.
pub type TransportFactory = Box<dyn FnOnce(&[TransportRequest]) -> Built + Send>;

/// The terminal chat of `host-shim run`: owned by the host, not built from settings, but
/// configurable like any transport (`"terminal": {"enabled": false}`).
pub const TERMINAL: Settings = Settings {
    id: "terminal",
    display_name: "the terminal chat",
    keys: &[ENABLED],
};

/// The messenger platforms this build of host-shim can start.
pub static PLATFORMS: &[&Platform] = &[
    &transport_telegram::PLATFORM,
    &transport_discord::PLATFORM,
    &transport_slack::PLATFORM,
    &transport_robo_claw::PLATFORM,
];

/// Every transport's declaration, for the bridge's `configure`: the messengers, then the
/// terminal.
pub fn declarations() -> Vec<session::Platform> {
    PLATFORMS
        .iter()
        .map(|platform| &platform.settings)
        .chain(std::iter::once(&TERMINAL))
        .map(declaration_to_wit)
        .collect()
}

fn declaration_to_wit(settings: &Settings) -> session::Platform {
    session::Platform {
        id: settings.id.into(),
        display_name: settings.display_name.into(),
        settings: settings.keys.iter().map(setting_to_wit).collect(),
    }
}

fn setting_to_wit(setting: &Setting) -> session::Setting {
    session::Setting {
        name: setting.name.into(),
        kind: match setting.kind {
            SettingKind::Boolean => session::SettingKind::Boolean,
            // The bridge validates both alike (a variable name, never a value); only the
            // host treats an unset optional one differently (`build_one`).
            SettingKind::EnvName | SettingKind::OptionalEnvName => session::SettingKind::EnvName,
            SettingKind::Url(schemes) => {
                session::SettingKind::Url(schemes.iter().map(|s| s.to_string()).collect())
            }
            SettingKind::Integer { min, max } => {
                session::SettingKind::Integer(session::IntegerRange { min, max })
            }
            SettingKind::Text => session::SettingKind::Text,
        },
        default: match setting.default {
            SettingDefault::Absent => None,
            SettingDefault::Boolean(b) => Some(session::SettingValue::Boolean(b)),
            SettingDefault::Integer(n) => Some(session::SettingValue::Integer(n)),
            SettingDefault::Text(text) => Some(session::SettingValue::Text(text.into())),
        },
        summary: setting.summary.into(),
    }
}

/// What building needs from outside: the environment (credentials) and where transports
/// may keep their own small state.
pub struct Environment<'a> {
    /// Reads an environment variable.
    pub var: &'a dyn Fn(&str) -> Option<String>,
    /// Directory for transports' own state (Telegram's update offset).
    pub state_dir: Option<PathBuf>,
}

/// Builds `requests` with the host's `terminal` (when it has one). With no request at
/// all, the terminal is the chat (the demo).
pub fn build(
    requests: &[TransportRequest],
    terminal: Option<Arc<dyn Transport>>,
    env: &Environment<'_>,
) -> Built {
    let mut built = Built::default();
    for request in requests {
        if request.id == TERMINAL.id {
            match &terminal {
                Some(t) => built.transports.push(t.clone()),
                None => built.notes.push((
                    Level::Warning,
                    "terminal: there is no terminal in this mode; it was not started".into(),
                )),
            }
            continue;
        }
        let Some(platform) = PLATFORMS.iter().find(|p| p.settings.id == request.id) else {
            // The bridge validated against `declarations()`, so this is a host bug.
            built.notes.push((
                Level::Error,
                format!("{}: this build of host-shim cannot start it", request.id),
            ));
            continue;
        };
        match build_one(platform, request, env) {
            Ok(Some(transport)) => built.transports.push(transport),
            Ok(None) => {}
            Err((level, text)) => built.notes.push((level, text)),
        }
    }
    if requests.is_empty()
        && let Some(t) = terminal
    {
        built.transports.push(t);
    }
    built
}

/// A request's settings as the JSON object a transport's `build` reads: the transports'
/// settings modules read keys from JSON, and each key arrives here once with the kind its
/// platform declared.
pub fn settings_object(request: &TransportRequest) -> serde_json::Map<String, serde_json::Value> {
    request
        .settings
        .iter()
        .map(|entry| {
            let value = match &entry.value {
                SettingValue::Boolean(b) => serde_json::Value::Bool(*b),
                SettingValue::Integer(n) => serde_json::Value::from(*n),
                SettingValue::Text(text) => serde_json::Value::from(text.as_str()),
            };
            (entry.name.clone(), value)
        })
        .collect()
}

/// The request's settings in the WIT's form, from the guest's own model (a command that
/// validated the configuration natively).
pub fn settings_from_model(settings: &[guest::model::SettingEntry]) -> Vec<session::SettingEntry> {
    settings
        .iter()
        .map(|entry| session::SettingEntry {
            name: entry.name.clone(),
            value: match &entry.value {
                guest::model::SettingValue::Boolean(b) => SettingValue::Boolean(*b),
                guest::model::SettingValue::Integer(n) => SettingValue::Integer(*n),
                guest::model::SettingValue::Text(text) => SettingValue::Text(text.clone()),
            },
        })
        .collect()
}

/// One platform from its validated request. `Ok(None)`: not started, and that is fine.
fn build_one(
    platform: &Platform,
    request: &TransportRequest,
    env: &Environment<'_>,
) -> Result<Option<Arc<dyn Transport>>, (Level, String)> {
    let settings = settings_object(request);
    let mut credentials = BTreeMap::new();
    let mut missing = Vec::new();
    for key in platform.settings.env_keys() {
        let Some(name) = settings.get(key.name).and_then(|v| v.as_str()) else {
            continue;
        };
        match (env.var)(name).filter(|value| !value.trim().is_empty()) {
            Some(value) => {
                credentials.insert(key.name, value);
            }
            // The transport runs without it and says so itself (robo_claw's peer token).
            None if key.kind == SettingKind::OptionalEnvName => {}
            None => missing.push(name.to_string()),
        }
    }
    let name = platform.settings.display_name;
    if !missing.is_empty() {
        let vars = missing
            .iter()
            .map(|v| format!("${v}"))
            .collect::<Vec<_>>()
            .join(" and ");
        // Slack needs two credentials; the sentence must fit one or both missing.
        let (verb, them) = if missing.len() == 1 {
            ("is", "it")
        } else {
            ("are", "them")
        };
        return Err(if request.required {
            (
                Level::Error,
                format!(
                    "{name} is enabled but {vars} {verb} not set. Export {them} in the \
                     environment; never put a token in the config file."
                ),
            )
        } else {
            (
                Level::Info,
                format!(
                    "{name} was not started: {vars} {verb} not set. Export {them} to start \
                     {name}, or set \"enabled\": true to make this an error."
                ),
            )
        });
    }
    let input = BuildInput {
        settings,
        credentials,
        state_dir: env.state_dir.clone(),
        env: Some(EnvLookup(env.var)),
    };
    (platform.build)(&input)
        .map(Some)
        .map_err(|e| (Level::Error, format!("{} failed to start: {e}", request.id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport_testing::fake::FakeTransport;

    fn request(id: &str) -> TransportRequest {
        TransportRequest {
            id: id.into(),
            required: false,
            settings: Vec::new(),
        }
    }

    fn no_env() -> Environment<'static> {
        Environment {
            var: &|_| None,
            state_dir: None,
        }
    }

    #[test]
    fn nothing_configured_means_the_terminal_is_the_chat() {
        let terminal: Arc<dyn Transport> = Arc::new(FakeTransport::default());
        let built = build(&[], Some(terminal), &no_env());
        assert_eq!(built.transports.len(), 1);
        assert!(built.notes.is_empty());
        let built = build(&[], None, &no_env());
        assert!(built.transports.is_empty() && built.notes.is_empty());
    }

    #[test]
    fn a_terminal_request_without_a_terminal_is_named_not_skipped_silently() {
        let built = build(&[request("terminal")], None, &no_env());
        assert!(built.transports.is_empty());
        assert_eq!(
            built.notes,
            vec![(
                Level::Warning,
                "terminal: there is no terminal in this mode; it was not started".to_string()
            )]
        );
    }

    #[test]
    fn every_declared_transport_reaches_the_bridge_with_its_keys() {
        let declared = declarations();
        let terminal = declared
            .iter()
            .find(|p| p.id == "terminal")
            .expect("the terminal is always declared");
        assert_eq!(
            terminal
                .settings
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            ["enabled"]
        );
        for platform in PLATFORMS {
            let wit = declared
                .iter()
                .find(|p| p.id == platform.settings.id)
                .expect("every platform is declared");
            assert_eq!(wit.settings.len(), platform.settings.keys.len());
        }
    }
}
