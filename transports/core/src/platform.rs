//! What a platform crate declares once: its settings (keys, kinds, defaults, which keys
//! name a credential's environment variable) and how to build its transport from them.
//!
//! Why a declaration instead of code in the host and the bridge: config validation runs
//! in the sandboxed bridge, the factory in the host, and both used to keep their own list
//! of transports and keys. A new platform then touched four crates, and a key added in
//! one list but not the other was silently ignored. Now the host hands these declarations
//! to the bridge (`configure`), the bridge validates against them, and the host builds
//! with the same declaration's `build`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::{Envelope, Transport};

/// What a setting holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingKind {
    /// `true` or `false`.
    Boolean,
    /// The *name* of an environment variable holding a credential (never its value);
    /// the host reads the variable and hands the value to [`Platform::build`].
    EnvName,
    /// Like [`SettingKind::EnvName`], but the transport also runs when the variable is
    /// unset: the credential is optional (robo_claw's peer token; without it the server
    /// accepts any client and says so). A host must not refuse to build for want of it.
    OptionalEnvName,
    /// A URL with one of these schemes (`baseUrl` pointed at a loopback server in tests).
    Url(&'static [&'static str]),
    /// An integer in `min..=max`.
    Integer {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// A non-empty string.
    Text,
}

/// The value a setting has when no config file sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingDefault {
    /// No value: the transport does without.
    Absent,
    /// A boolean.
    Boolean(bool),
    /// An integer.
    Integer(i64),
    /// A string (for an [`SettingKind::EnvName`], the variable's default name).
    Text(&'static str),
}

/// One key of `transports.<id>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// Key as written in the config file (`tokenEnv`, `baseUrl`, ...).
    pub name: &'static str,
    /// What it holds.
    pub kind: SettingKind,
    /// Its value when unset.
    pub default: SettingDefault,
    /// One line for a person: what it is for.
    pub summary: &'static str,
}

/// Every transport has these two keys, with the same meaning.
pub const ENABLED: Setting = Setting {
    name: "enabled",
    kind: SettingKind::Boolean,
    default: SettingDefault::Absent,
    summary: "true: start it and make a missing credential an error; false: never start it",
};

/// How old another process's lock on the same bot must be before it is taken over.
pub const LOCK_STALE_MS: Setting = Setting {
    name: "lockStaleMs",
    kind: SettingKind::Integer {
        min: 1_000,
        max: 86_400_000,
    },
    default: SettingDefault::Integer(900_000),
    summary: "ms after which another process's lock on this bot is reclaimed",
};

/// The schemes an HTTP `baseUrl` may use.
pub const HTTP_SCHEMES: &[&str] = &["http", "https"];

/// The schemes a WebSocket URL may use.
pub const WS_SCHEMES: &[&str] = &["ws", "wss"];

/// A transport's settings, as declared by its crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Transport id, the key under `transports` (`telegram`, `discord`, ...).
    pub id: &'static str,
    /// A person's name for it (`Telegram`), used in messages.
    pub display_name: &'static str,
    /// Every key it reads.
    pub keys: &'static [Setting],
}

impl Settings {
    /// The declaration of `name`, if the transport reads it.
    pub fn key(&self, name: &str) -> Option<&'static Setting> {
        self.keys.iter().find(|key| key.name == name)
    }

    /// The keys that name environment variables (required or optional), in declaration
    /// order.
    pub fn env_keys(&self) -> impl Iterator<Item = &'static Setting> + '_ {
        self.keys.iter().filter(|key| {
            matches!(
                key.kind,
                SettingKind::EnvName | SettingKind::OptionalEnvName
            )
        })
    }
}

/// Reads an environment variable for [`Platform::build`]: the host's reader, so tests
/// inject variables instead of changing the process environment.
#[derive(Clone, Copy)]
pub struct EnvLookup<'a>(pub &'a dyn Fn(&str) -> Option<String>);

impl std::fmt::Debug for EnvLookup<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values read through it may be credentials: nothing about them is shown.
        f.write_str("EnvLookup")
    }
}

/// What the host hands a platform to build its transport.
#[derive(Debug, Clone, Default)]
pub struct BuildInput<'a> {
    /// The validated settings (defaults filled in), as the bridge returned them.
    pub settings: serde_json::Map<String, serde_json::Value>,
    /// The credential behind each [`SettingKind::EnvName`] or
    /// [`SettingKind::OptionalEnvName`] key, by key name. Only
    /// variables that were set and non-empty are here.
    pub credentials: BTreeMap<&'static str, String>,
    /// A directory the transport may keep its own small state in (Telegram's confirmed
    /// update offset), next to the host's state file; `None` keeps it in memory only.
    pub state_dir: Option<PathBuf>,
    /// Reads further variables a setting names inside its value (robo_claw's per-client
    /// token variables in `clients`); `None`: no variable is set.
    pub env: Option<EnvLookup<'a>>,
}

impl BuildInput<'_> {
    /// A string setting.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.settings.get(key)?.as_str()
    }

    /// An integer setting.
    pub fn integer(&self, key: &str) -> Option<i64> {
        self.settings.get(key)?.as_i64()
    }

    /// A boolean setting.
    pub fn boolean(&self, key: &str) -> Option<bool> {
        self.settings.get(key)?.as_bool()
    }

    /// The credential behind the env-name key `key`.
    pub fn credential(&self, key: &str) -> Option<&str> {
        self.credentials.get(key).map(String::as_str)
    }

    /// The value of variable `name`, when it is set and not blank.
    pub fn variable(&self, name: &str) -> Option<String> {
        self.env
            .and_then(|env| (env.0)(name))
            .filter(|value| !value.trim().is_empty())
    }
}

/// Who the bot is, as a normalizer needs it to recognise itself and its mentions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BotSelf {
    /// The bot's own user id on the platform.
    pub id: String,
    /// The bot's user name, without `@`.
    pub username: String,
}

/// What a platform's pure normalizer made of one raw payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Normalized {
    /// A message for the bridge.
    Message(Envelope),
    /// Not for the bridge; the reason, for a person (`from another bot`, `an edit`).
    Ignored(String),
}

/// A platform a host can offer: its settings, its constructor and its normalizer.
pub struct Platform {
    /// The settings it reads.
    pub settings: Settings,
    /// Builds the transport (no I/O yet: connecting happens in `identify` and `start`).
    /// Fails with a message for a person, never containing a credential.
    pub build: fn(&BuildInput<'_>) -> Result<Arc<dyn Transport>, String>,
    /// The pure normalizer (raw platform payload → envelope or the reason it is ignored),
    /// exposed for `host-shim explain`; it does no I/O.
    pub normalize: fn(&serde_json::Value, &BotSelf) -> Normalized,
}

impl std::fmt::Debug for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Platform")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUIRED: Setting = Setting {
        name: "tokenEnv",
        kind: SettingKind::EnvName,
        default: SettingDefault::Text("A_TOKEN"),
        summary: "required credential",
    };

    const OPTIONAL: Setting = Setting {
        name: "peerTokenEnv",
        kind: SettingKind::OptionalEnvName,
        default: SettingDefault::Text("A_PEER_TOKEN"),
        summary: "optional credential",
    };

    #[test]
    fn optional_credentials_are_env_keys_too_so_the_host_reads_them() {
        let settings = Settings {
            id: "x",
            display_name: "X",
            keys: &[ENABLED, REQUIRED, LOCK_STALE_MS, OPTIONAL],
        };
        let names: Vec<_> = settings.env_keys().map(|key| key.name).collect();
        assert_eq!(names, ["tokenEnv", "peerTokenEnv"]);
    }
}
