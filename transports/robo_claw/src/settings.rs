//! What `transports.robo_claw` may hold, declared once for config validation (in the
//! bridge) and for the factory (in the host), and how the transport is built from it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use transport_core::Transport;
use transport_core::platform::{
    BuildInput, ENABLED, LOCK_STALE_MS, Platform, Setting, SettingDefault, SettingKind, Settings,
};

use crate::clients::parse_clients;
use crate::normalize::{self, DEFAULT_SELF_SENDER_ID};
use crate::{ClientConfig, RoboClawConfig, RoboClawTransport, TlsFiles};

/// Default name of the environment variable holding the peer token.
pub const DEFAULT_TOKEN_ENV: &str = "PI_ROBO_CLAW_TOKEN";

/// Default address: this machine only. The original bound `0.0.0.0`, which put an
/// unauthenticated, unencrypted prompt port on every network the machine is on.
pub const DEFAULT_HOST: &str = "127.0.0.1";

/// Default port, as in the original.
pub const DEFAULT_PORT: i64 = 50052;

/// Default number of replies kept per room while no client of it is connected.
pub const DEFAULT_BUFFER_SIZE: i64 = 50;

/// Default time a `SendCommand` waits for the bridge.
pub const DEFAULT_COMMAND_TIMEOUT_MS: i64 = 30_000;

/// Default largest upload: 10 MiB.
pub const DEFAULT_MAX_UPLOAD_BYTES: i64 = 10 * 1024 * 1024;

/// Default number of files kept at once.
pub const DEFAULT_MAX_UPLOADS: i64 = 16;

/// `tokenEnv`: the variable holding the peer token clients must present. Optional: without
/// it any client that reaches the port is accepted, and the transport says so at start.
pub const TOKEN_ENV: Setting = Setting {
    name: "tokenEnv",
    kind: SettingKind::OptionalEnvName,
    default: SettingDefault::Text(DEFAULT_TOKEN_ENV),
    summary: "name of the environment variable holding the peer token RoboClaw clients must present (optional; without it any client that reaches the port is accepted)",
};

/// `clients`: per-client tokens, senders and rooms (docs/security.md#robo_claw-clients; see
/// [`crate::clients`] for the format and why).
pub const CLIENTS: Setting = Setting {
    name: "clients",
    kind: SettingKind::Text,
    default: SettingDefault::Absent,
    summary: "clients with their own tokens: \"<client>: <TOKEN_ENV>: <sender>, <sender>...\", entries separated by ';'. Each client may send only as its senders and reads only its own rooms and uploads; tokenEnv is then ignored",
};

/// `host`: the address the gRPC server listens on.
pub const HOST: Setting = Setting {
    name: "host",
    kind: SettingKind::Text,
    default: SettingDefault::Text(DEFAULT_HOST),
    summary: "address to listen on; 127.0.0.1 keeps it on this machine, 0.0.0.0 opens it to the network (use TLS then)",
};

/// `port`: the TCP port of the gRPC server; also names the lock (`robo_claw-<port>`).
pub const PORT: Setting = Setting {
    name: "port",
    kind: SettingKind::Integer {
        min: 1,
        max: 65_535,
    },
    default: SettingDefault::Integer(DEFAULT_PORT),
    summary: "TCP port of the gRPC server",
};

/// `selfSenderId`: the sender id of the bot's own messages; only it counts as the bot.
pub const SELF_SENDER_ID: Setting = Setting {
    name: "selfSenderId",
    kind: SettingKind::Text,
    default: SettingDefault::Text(DEFAULT_SELF_SENDER_ID),
    summary: "sender_id of the bot's replies; messages with this sender_id are the bot's own and ignored",
};

/// `tlsCertPath`: PEM certificate chain; with `tlsKeyPath` the server speaks TLS.
pub const TLS_CERT_PATH: Setting = Setting {
    name: "tlsCertPath",
    kind: SettingKind::Text,
    default: SettingDefault::Absent,
    summary: "PEM file with the server certificate (chain); set together with tlsKeyPath to serve TLS",
};

/// `tlsKeyPath`: PEM private key of the certificate.
pub const TLS_KEY_PATH: Setting = Setting {
    name: "tlsKeyPath",
    kind: SettingKind::Text,
    default: SettingDefault::Absent,
    summary: "PEM file with the certificate's private key; set together with tlsCertPath",
};

/// `bufferSize`: replies kept per room while no client of it is connected.
pub const BUFFER_SIZE: Setting = Setting {
    name: "bufferSize",
    kind: SettingKind::Integer { min: 0, max: 1_000 },
    default: SettingDefault::Integer(DEFAULT_BUFFER_SIZE),
    summary: "replies kept per room while no client of it is connected (oldest dropped first, and reported); 0 fails such sends instead",
};

/// `commandTimeoutMs`: how long `SendCommand` waits for the bridge's answer.
pub const COMMAND_TIMEOUT_MS: Setting = Setting {
    name: "commandTimeoutMs",
    kind: SettingKind::Integer {
        min: 1_000,
        max: 300_000,
    },
    default: SettingDefault::Integer(DEFAULT_COMMAND_TIMEOUT_MS),
    summary: "ms a SendCommand call waits for the bridge's answer",
};

/// `maxUploadBytes`: the largest file `UploadFile` accepts.
pub const MAX_UPLOAD_BYTES: Setting = Setting {
    name: "maxUploadBytes",
    kind: SettingKind::Integer {
        min: 1_024,
        max: 52_428_800,
    },
    default: SettingDefault::Integer(DEFAULT_MAX_UPLOAD_BYTES),
    summary: "largest file UploadFile accepts, in bytes",
};

/// `maxUploads`: how many files are kept in memory at once.
pub const MAX_UPLOADS: Setting = Setting {
    name: "maxUploads",
    kind: SettingKind::Integer { min: 1, max: 256 },
    default: SettingDefault::Integer(DEFAULT_MAX_UPLOADS),
    summary: "files kept in memory at once; the oldest is forgotten to make room",
};

/// Every key of `transports.robo_claw`.
pub const SETTINGS: Settings = Settings {
    id: "robo_claw",
    display_name: "RoboClaw",
    keys: &[
        ENABLED,
        TOKEN_ENV,
        CLIENTS,
        HOST,
        PORT,
        SELF_SENDER_ID,
        TLS_CERT_PATH,
        TLS_KEY_PATH,
        LOCK_STALE_MS,
        BUFFER_SIZE,
        COMMAND_TIMEOUT_MS,
        MAX_UPLOAD_BYTES,
        MAX_UPLOADS,
    ],
};

/// RoboClaw, as a host offers it: settings, constructor and the pure normalizer.
pub static PLATFORM: Platform = Platform {
    settings: SETTINGS,
    build,
    normalize: normalize::normalize,
};

fn integer(input: &BuildInput<'_>, key: &Setting, default: i64) -> i64 {
    input.integer(key.name).unwrap_or(default)
}

/// Builds the transport from validated settings. No I/O: the port is bound by `start`.
pub fn build(input: &BuildInput<'_>) -> Result<Arc<dyn Transport>, String> {
    let config = config_from(input)?;
    Ok(Arc::new(RoboClawTransport::new(config)))
}

/// The configuration validated settings describe.
pub fn config_from(input: &BuildInput<'_>) -> Result<RoboClawConfig, String> {
    let mut config = RoboClawConfig::default();
    if let Some(env) = input.text(TOKEN_ENV.name) {
        config.token_env = env.to_owned();
    }
    config.token = input.credential(TOKEN_ENV.name).map(str::to_owned);
    if let Some(host) = input.text(HOST.name) {
        config.host = host.trim().to_owned();
    }
    let port = integer(input, &PORT, DEFAULT_PORT);
    config.port = u16::try_from(port)
        .ok()
        .filter(|port| *port > 0)
        .ok_or_else(|| format!("port {port} is not a TCP port (1 to 65535)"))?;
    if let Some(id) = input.text(SELF_SENDER_ID.name) {
        config.self_sender_id = id.trim().to_owned();
    }
    if let Some(text) = input.text(CLIENTS.name) {
        config.clients = parse_clients(text, &config.self_sender_id)
            .map_err(|error| error.to_string())?
            .into_iter()
            .map(|spec| ClientConfig {
                token: input.variable(&spec.token_env),
                name: spec.name,
                token_env: spec.token_env,
                senders: spec.senders,
            })
            .collect();
    }
    config.tls = match (
        input.text(TLS_CERT_PATH.name),
        input.text(TLS_KEY_PATH.name),
    ) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert_path: PathBuf::from(cert),
            key_path: PathBuf::from(key),
        }),
        (None, None) => None,
        _ => {
            return Err(
                "tlsCertPath and tlsKeyPath go together: set both to serve TLS, or neither for plain TCP"
                    .into(),
            );
        }
    };
    let clamp = |value: i64, min: i64, max: i64| value.clamp(min, max).unsigned_abs();
    config.buffer_size =
        clamp(integer(input, &BUFFER_SIZE, DEFAULT_BUFFER_SIZE), 0, 1_000) as usize;
    config.command_timeout = Duration::from_millis(clamp(
        integer(input, &COMMAND_TIMEOUT_MS, DEFAULT_COMMAND_TIMEOUT_MS),
        1_000,
        300_000,
    ));
    config.max_upload_bytes = clamp(
        integer(input, &MAX_UPLOAD_BYTES, DEFAULT_MAX_UPLOAD_BYTES),
        1_024,
        52_428_800,
    );
    config.max_uploads = clamp(integer(input, &MAX_UPLOADS, DEFAULT_MAX_UPLOADS), 1, 256) as usize;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport_core::platform::EnvLookup;

    const TOKEN: &str = "peer-SECRET-settings";

    fn input(settings: serde_json::Value, token: Option<&str>) -> BuildInput<'static> {
        let mut input = BuildInput::default();
        if let serde_json::Value::Object(map) = settings {
            input.settings = map;
        }
        if let Some(token) = token {
            input.credentials.insert("tokenEnv", token.to_owned());
        }
        input
    }

    #[test]
    fn the_declaration_lists_every_key_and_the_token_is_optional() {
        let names: Vec<_> = SETTINGS.keys.iter().map(|key| key.name).collect();
        assert_eq!(
            names,
            [
                "enabled",
                "tokenEnv",
                "clients",
                "host",
                "port",
                "selfSenderId",
                "tlsCertPath",
                "tlsKeyPath",
                "lockStaleMs",
                "bufferSize",
                "commandTimeoutMs",
                "maxUploadBytes",
                "maxUploads"
            ]
        );
        assert_eq!(
            SETTINGS.key("tokenEnv").map(|key| key.kind),
            Some(SettingKind::OptionalEnvName)
        );
        assert_eq!(
            SETTINGS.key("host").map(|key| key.default),
            Some(SettingDefault::Text("127.0.0.1"))
        );
        assert_eq!(PLATFORM.settings.id, "robo_claw");
    }

    #[test]
    fn defaults_bind_localhost_on_50052_without_tls() {
        let config = config_from(&input(serde_json::json!({}), None)).expect("built");
        assert_eq!((config.host.as_str(), config.port), ("127.0.0.1", 50052));
        assert!(config.tls.is_none() && config.token.is_none());
        assert_eq!(config.self_sender_id, "robot");
        assert_eq!(config.buffer_size, 50);
    }

    #[test]
    fn settings_and_the_token_reach_the_config() {
        let config = config_from(&input(
            serde_json::json!({
                "tokenEnv": "MY_RC", "host": "0.0.0.0", "port": 6000, "selfSenderId": "claw",
                "tlsCertPath": "/c.pem", "tlsKeyPath": "/k.pem", "bufferSize": 0,
                "commandTimeoutMs": 5000, "maxUploadBytes": 2048, "maxUploads": 3
            }),
            Some(TOKEN),
        ))
        .expect("built");
        assert_eq!(config.token.as_deref(), Some(TOKEN));
        assert_eq!(config.token_env, "MY_RC");
        assert_eq!((config.host.as_str(), config.port), ("0.0.0.0", 6000));
        assert_eq!(config.self_sender_id, "claw");
        assert_eq!(
            config.tls,
            Some(TlsFiles {
                cert_path: "/c.pem".into(),
                key_path: "/k.pem".into()
            })
        );
        assert_eq!(config.buffer_size, 0);
        assert_eq!(config.command_timeout, Duration::from_secs(5));
        assert_eq!((config.max_upload_bytes, config.max_uploads), (2048, 3));
        assert!(!format!("{config:?}").contains(TOKEN));
    }

    #[test]
    fn clients_read_their_own_token_variables_and_a_bad_line_names_the_key() {
        let env = |name: &str| match name {
            "PI_RC_PHONE" => Some("phone-SECRET".to_owned()),
            _ => None,
        };
        let mut input = input(
            serde_json::json!({ "clients": "phone: PI_RC_PHONE: alice; arm: PI_RC_ARM: arm-1" }),
            Some(TOKEN),
        );
        input.env = Some(EnvLookup(&env));
        let config = config_from(&input).expect("built");
        assert_eq!(config.clients.len(), 2);
        assert_eq!(config.clients[0].token.as_deref(), Some("phone-SECRET"));
        assert_eq!(config.clients[0].senders, ["alice"]);
        assert_eq!(config.clients[1].token, None);
        assert!(!format!("{config:?}").contains("phone-SECRET"));
        let transport = build(&input).expect("built");
        let line = transport.diagnose();
        assert!(line.contains("per-client tokens: phone"), "{line}");
        assert!(line.contains("arm ($PI_RC_ARM, NO token"), "{line}");
        assert!(
            line.contains("shared token in $PI_ROBO_CLAW_TOKEN is ignored"),
            "{line}"
        );

        let error = config_from(&super::tests::input(
            serde_json::json!({ "clients": "phone PI_RC_PHONE alice" }),
            None,
        ))
        .expect_err("refused");
        assert!(error.starts_with("transports.robo_claw.clients"), "{error}");
    }

    #[test]
    fn a_certificate_without_a_key_is_refused() {
        let error = config_from(&input(serde_json::json!({ "tlsCertPath": "/c.pem" }), None))
            .expect_err("refused");
        assert!(
            error.contains("tlsCertPath and tlsKeyPath go together"),
            "{error}"
        );
    }

    #[test]
    fn a_token_and_defaults_build_a_transport_that_hides_the_token() {
        let transport = build(&input(serde_json::json!({}), Some(TOKEN))).expect("built");
        assert_eq!(transport.id(), "robo_claw");
        assert!(!transport.diagnose().contains(TOKEN));
    }
}
