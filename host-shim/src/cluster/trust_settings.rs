//! What a cluster node trusts and proves (docs/security.md#cluster-security): its NATS login and
//! the cluster key, from the `cluster` object of the user's own config and the command line (a flag
//! wins), and the refusal to start without either unless the operator said `--insecure-no-auth`.
//!
//! Why refuse: a NATS server without authentication lets anyone who reaches it read the
//! sessions, publish prompts as a paired user and read every reply (reproduced in issue
//! 30); the cluster key is what keeps a client that does have NATS credentials (another
//! service on the same server) from doing the same. A cluster running without them must
//! be a choice someone made and is reminded of at every start.

use std::path::{Path, PathBuf};

use super::cluster_key::{ClusterKey, ClusterKeyError};
use super::connect_options::{AuthError, NatsAuth, ResolvedAuth, refuse_secrets_in_url};
use crate::wit::session::{ConfigContent, ConfigScope, ConfigSource};

/// The trust settings from one place (the config or the flags): paths and variable names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustSettings {
    /// The NATS login and TLS files.
    pub auth: NatsAuth,
    /// A file holding the cluster key.
    pub cluster_key_file: Option<PathBuf>,
    /// The environment variable holding the cluster key.
    pub cluster_key_env: Option<String>,
}

impl TrustSettings {
    /// `self` with what `flags` sets replacing it. A key source in the flags replaces the
    /// config's (a file flag and a config variable do not conflict).
    pub fn overridden_by(self, flags: TrustSettings) -> TrustSettings {
        let flag_key = flags.cluster_key_file.is_some() || flags.cluster_key_env.is_some();
        TrustSettings {
            auth: self.auth.overridden_by(flags.auth),
            cluster_key_file: if flag_key {
                flags.cluster_key_file
            } else {
                self.cluster_key_file
            },
            cluster_key_env: if flag_key {
                flags.cluster_key_env
            } else {
                self.cluster_key_env
            },
        }
    }
}

/// Why a node will not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    /// The login settings are wrong.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The cluster key cannot be had.
    #[error(transparent)]
    Key(#[from] ClusterKeyError),
    /// The `cluster` object of a config file is malformed.
    #[error("{file}: cluster.{key}: {problem}")]
    Config {
        /// The config file.
        file: String,
        /// The key.
        key: String,
        /// What is wrong.
        problem: String,
    },
    /// No way to log in to NATS was given.
    #[error(
        "cluster mode needs the NATS server to know this node: pass --nats-creds FILE, \
         --nats-nkey FILE, --nats-user-env VAR with --nats-password-env VAR, --nats-token-env \
         VAR, or a client certificate (--nats-cert/--nats-key), or the same keys in the \
         `cluster` object of your bot-connect.json (docs/scaling.md has a server config). \
         Without them anyone who reaches the server can read the sessions and send prompts. \
         To run without anyway (a test on one machine), pass --insecure-no-auth"
    )]
    NoAuth,
    /// No cluster key was given.
    #[error(
        "cluster mode needs a cluster key, the same on every node: pass --cluster-key-file \
         FILE or --cluster-key-env VAR (at least 32 bytes; make one with `openssl rand \
         -base64 48`), or cluster.clusterKeyFile / cluster.clusterKeyEnv in your \
         bot-connect.json. Without it any client of the NATS server can inject prompts and \
         approvals. To run without anyway, pass --insecure-no-auth"
    )]
    NoKey,
}

/// What a node runs with.
#[derive(Debug, Clone)]
pub struct Trust {
    /// How it logs in to NATS.
    pub auth: ResolvedAuth,
    /// The key sealing envelopes and values.
    pub key: ClusterKey,
    /// What is insecure about this start, said at every start; empty when nothing is.
    pub warnings: Vec<String>,
}

/// Decides what a node at `url` runs with: `settings` resolved against `env`, refused
/// without a login or a key unless `insecure_no_auth`.
pub fn decide(
    url: &str,
    settings: &TrustSettings,
    insecure_no_auth: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Trust, TrustError> {
    refuse_secrets_in_url(url)?;
    let auth = settings.auth.resolve(env)?;
    let key = ClusterKey::load(
        settings.cluster_key_file.as_deref(),
        settings.cluster_key_env.as_deref(),
        env,
    )?;
    let mut warnings = Vec::new();
    if !auth.authenticates() {
        if !insecure_no_auth {
            return Err(TrustError::NoAuth);
        }
        warnings.push(
            "INSECURE: --insecure-no-auth and no NATS credentials: anyone who reaches the NATS \
             server can read this cluster's traffic and state and disrupt it. Never use this \
             beyond one test machine."
                .to_owned(),
        );
    }
    let key = match key {
        Some(key) => key,
        None if insecure_no_auth => {
            warnings.push(
                "INSECURE: --insecure-no-auth and no cluster key: envelopes and state are \
                 sealed with a public key, so any client of the NATS server can send prompts \
                 and approvals as any paired user and read what the buckets hold."
                    .to_owned(),
            );
            ClusterKey::insecure_public()
        }
        None => return Err(TrustError::NoKey),
    };
    if insecure_no_auth && warnings.is_empty() {
        warnings.push(
            "--insecure-no-auth was given, but this node has NATS credentials and a cluster \
             key, so it changes nothing: drop it"
                .to_owned(),
        );
    }
    Ok(Trust {
        auth,
        key,
        warnings,
    })
}

/// The `cluster` objects of the user's own config files (global, then override: later
/// wins field by field). A project file's `cluster` is never read: a cloned repository
/// must not choose where a node logs in or which key it trusts (the guest's config
/// reader warns about it). Relative paths are taken from the config file's directory.
pub fn from_config(sources: &[ConfigSource]) -> Result<TrustSettings, TrustError> {
    let mut settings = TrustSettings::default();
    for source in sources {
        if matches!(source.scope, ConfigScope::Project) {
            continue;
        }
        let ConfigContent::Text(text) = &source.content else {
            continue;
        };
        // Unreadable or non-object files are reported by the config reader itself.
        let Ok(serde_json::Value::Object(top)) = serde_json::from_str::<serde_json::Value>(text)
        else {
            continue;
        };
        let Some(cluster) = top.get("cluster") else {
            continue;
        };
        let file = source.path.as_str();
        let base = Path::new(file).parent().unwrap_or(Path::new(""));
        settings = settings.overridden_by(read_object(file, base, cluster)?);
    }
    Ok(settings)
}

fn read_object(
    file: &str,
    base: &Path,
    value: &serde_json::Value,
) -> Result<TrustSettings, TrustError> {
    let problem = |key: &str, problem: &str| TrustError::Config {
        file: file.to_owned(),
        key: key.to_owned(),
        problem: problem.to_owned(),
    };
    let serde_json::Value::Object(object) = value else {
        return Err(TrustError::Config {
            file: file.to_owned(),
            key: String::new(),
            problem: "must be an object of file paths and environment variable names".into(),
        });
    };
    let mut settings = TrustSettings::default();
    for (key, value) in object {
        let Some(text) = value.as_str().filter(|t| !t.trim().is_empty()) else {
            return Err(problem(key, "must be a non-empty string"));
        };
        let path = || Some(base.join(text));
        let var = || -> Result<Option<String>, TrustError> {
            // A value that is not a variable name is most likely the secret itself.
            if text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !text.as_bytes()[0].is_ascii_digit()
            {
                Ok(Some(text.to_owned()))
            } else {
                Err(problem(
                    key,
                    "must be the NAME of an environment variable (letters, digits, _), never \
                     the secret itself; if you pasted the secret here, change it",
                ))
            }
        };
        match key.as_str() {
            "credsFile" => settings.auth.creds_file = path(),
            "nkeyFile" => settings.auth.nkey_file = path(),
            "userEnv" => settings.auth.user_env = var()?,
            "passwordEnv" => settings.auth.password_env = var()?,
            "tokenEnv" => settings.auth.token_env = var()?,
            "caFile" => settings.auth.ca_file = path(),
            "certFile" => settings.auth.cert_file = path(),
            "keyFile" => settings.auth.key_file = path(),
            "clusterKeyFile" => settings.cluster_key_file = path(),
            "clusterKeyEnv" => settings.cluster_key_env = var()?,
            _ => {
                return Err(problem(
                    key,
                    "unknown key; the cluster object takes credsFile, nkeyFile, userEnv, \
                     passwordEnv, tokenEnv, caFile, certFile, keyFile, clusterKeyFile and \
                     clusterKeyEnv",
                ));
            }
        }
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(scope: ConfigScope, path: &str, text: &str) -> ConfigSource {
        ConfigSource {
            scope,
            path: path.into(),
            content: ConfigContent::Text(text.into()),
        }
    }

    fn env_with(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    const KEY: &str = "0123456789abcdef0123456789abcdef0123";

    #[test]
    fn no_login_or_no_key_refuses_to_start_and_says_how() {
        let env = env_with(&[("NT", "tok"), ("CK", KEY)]);
        let keyed = TrustSettings {
            cluster_key_env: Some("CK".into()),
            ..TrustSettings::default()
        };
        let error = decide("nats://127.0.0.1:4222", &keyed, false, &env).unwrap_err();
        assert_eq!(error, TrustError::NoAuth);
        assert!(error.to_string().contains("--insecure-no-auth"));
        let logged_in = TrustSettings {
            auth: NatsAuth {
                token_env: Some("NT".into()),
                ..NatsAuth::default()
            },
            ..TrustSettings::default()
        };
        let error = decide("nats://127.0.0.1:4222", &logged_in, false, &env).unwrap_err();
        assert_eq!(error, TrustError::NoKey);
        let both = TrustSettings {
            cluster_key_env: Some("CK".into()),
            ..logged_in
        };
        let trust = decide("nats://127.0.0.1:4222", &both, false, &env).unwrap();
        assert!(trust.warnings.is_empty() && !trust.key.is_public());
    }

    #[test]
    fn insecure_no_auth_starts_and_warns_every_time() {
        let env = env_with(&[]);
        let trust = decide(
            "nats://127.0.0.1:4222",
            &TrustSettings::default(),
            true,
            &env,
        )
        .unwrap();
        assert_eq!(trust.warnings.len(), 2, "{:?}", trust.warnings);
        assert!(trust.warnings.iter().all(|w| w.starts_with("INSECURE")));
        assert!(trust.key.is_public());
    }

    #[test]
    fn a_secret_in_the_url_is_refused_before_anything_else() {
        let env = env_with(&[]);
        let error = decide("nats://u:p@h:1", &TrustSettings::default(), true, &env).unwrap_err();
        assert!(matches!(
            error,
            TrustError::Auth(AuthError::SecretInUrl { .. })
        ));
    }

    #[test]
    fn config_is_read_from_the_users_files_only_and_flags_win() {
        let sources = [
            source(
                ConfigScope::Global,
                "/home/me/.pi/bot-connect.json",
                r#"{"cluster": {"credsFile": "node.creds", "clusterKeyEnv": "CK", "caFile": "/etc/ca.pem"}}"#,
            ),
            source(
                ConfigScope::Project,
                "/repo/.pi/bot-connect.json",
                r#"{"cluster": {"clusterKeyEnv": "EVIL", "caFile": "/repo/ca.pem"}}"#,
            ),
        ];
        let config = from_config(&sources).unwrap();
        assert_eq!(
            config.auth.creds_file.as_deref(),
            Some(Path::new("/home/me/.pi/node.creds"))
        );
        assert_eq!(config.cluster_key_env.as_deref(), Some("CK"));
        assert_eq!(
            config.auth.ca_file.as_deref(),
            Some(Path::new("/etc/ca.pem"))
        );
        let merged = config.overridden_by(TrustSettings {
            cluster_key_file: Some("/k".into()),
            ..TrustSettings::default()
        });
        assert_eq!(merged.cluster_key_env, None);
        assert_eq!(merged.cluster_key_file.as_deref(), Some(Path::new("/k")));
    }

    #[test]
    fn a_secret_pasted_into_an_env_key_or_an_unknown_key_is_an_error() {
        let pasted = [source(
            ConfigScope::Global,
            "/g.json",
            r#"{"cluster": {"tokenEnv": "s3cr3t-t0ken.value"}}"#,
        )];
        let text = from_config(&pasted).unwrap_err().to_string();
        assert!(
            text.contains("cluster.tokenEnv") && !text.contains("s3cr3t"),
            "{text}"
        );
        let unknown = [source(
            ConfigScope::Global,
            "/g.json",
            r#"{"cluster": {"token": "x"}}"#,
        )];
        assert!(
            from_config(&unknown)
                .unwrap_err()
                .to_string()
                .contains("unknown key")
        );
    }
}
