//! How a node proves itself to the NATS server (docs/security.md#cluster-security): a credentials
//! file (JWT + nkey), an nkey seed file, a user and password or a token read from environment
//! variables, a CA file and a client certificate, `tls://` URLs.
//!
//! Why no secret on the command line or in the config: argv is readable by every user of
//! the machine (`ps`), and config files get committed and pasted. Both hold only file paths
//! and the NAMES of environment variables; the values are read here, once, and never shown.

use std::path::{Path, PathBuf};

/// Where a node's NATS credentials come from: paths and variable names only. Built from the
/// `cluster` object of the user's config and the `--nats-*` flags (a flag overrides the
/// config field by field, [`NatsAuth::overridden_by`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NatsAuth {
    /// A `.creds` file: the user JWT and its nkey seed (`nsc generate creds`).
    pub creds_file: Option<PathBuf>,
    /// A file holding one nkey seed (`SU…`), for servers configured with `nkey:` users.
    pub nkey_file: Option<PathBuf>,
    /// The environment variable holding the NATS user name.
    pub user_env: Option<String>,
    /// The environment variable holding the NATS password.
    pub password_env: Option<String>,
    /// The environment variable holding the NATS token.
    pub token_env: Option<String>,
    /// A PEM file of the CAs the server's certificate must chain to.
    pub ca_file: Option<PathBuf>,
    /// A PEM client certificate, for servers that verify clients (`verify: true`).
    pub cert_file: Option<PathBuf>,
    /// The PEM key of [`NatsAuth::cert_file`].
    pub key_file: Option<PathBuf>,
}

/// Why a node cannot connect with the credentials it was given. Never holds a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The URL carries a password or a token, which `ps` shows to every local user.
    #[error(
        "the NATS URL {url} carries a {what}: a command line is visible to every user of this \
         machine (ps). Remove it from the URL and use {instead} instead"
    )]
    SecretInUrl {
        /// The URL with the secret replaced by `***`.
        url: String,
        /// "password" or "token".
        what: &'static str,
        /// The flags to use.
        instead: &'static str,
    },
    /// Two settings that go together, one of them missing.
    #[error("{given} is set but {missing} is not: set both (or neither)")]
    Incomplete {
        /// The setting given.
        given: &'static str,
        /// The one it needs.
        missing: &'static str,
    },
    /// More than one way to log in was configured; the server checks only one.
    #[error(
        "NATS takes one way to log in, and {first} and {second} are both set: keep one (a \
         client certificate may go with any of them)"
    )]
    Conflicting {
        /// One setting.
        first: &'static str,
        /// The other.
        second: &'static str,
    },
    /// A named environment variable is unset or empty.
    #[error(
        "{setting} names the environment variable {name}, which is unset or empty in this \
         process: export it before starting the node"
    )]
    MissingEnv {
        /// The flag or config key.
        setting: &'static str,
        /// The variable's name (never its value).
        name: String,
    },
    /// A named file cannot be read or is not what it should be.
    #[error("{setting} {path}: {detail}")]
    File {
        /// The flag or config key.
        setting: &'static str,
        /// The file.
        path: String,
        /// What is wrong (never the file's content).
        detail: String,
    },
}

/// The login part of [`NatsAuth`], read from its files and variables: holds secrets, so
/// its `Debug` shows none.
#[derive(Clone, Default)]
pub struct ResolvedAuth {
    login: Login,
    ca_file: Option<PathBuf>,
    client_cert: Option<(PathBuf, PathBuf)>,
}

#[derive(Clone, Default)]
enum Login {
    #[default]
    Anonymous,
    Creds(String),
    Nkey(String),
    UserPassword(String, String),
    Token(String),
}

impl std::fmt::Debug for ResolvedAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedAuth")
            .field("login", &self.login_kind())
            .field("ca_file", &self.ca_file)
            .field("client_cert", &self.client_cert.as_ref().map(|(c, _)| c))
            .finish()
    }
}

impl ResolvedAuth {
    /// No credentials at all (only for `--insecure-no-auth` and tests of refusal).
    pub fn anonymous() -> ResolvedAuth {
        ResolvedAuth::default()
    }

    /// How this node logs in, for the start-up line (never a secret).
    pub fn login_kind(&self) -> &'static str {
        match (&self.login, self.client_cert.is_some()) {
            (Login::Anonymous, false) => "no credentials",
            (Login::Anonymous, true) => "a client certificate",
            (Login::Creds(_), _) => "a credentials file",
            (Login::Nkey(_), _) => "an nkey",
            (Login::UserPassword(..), _) => "a user and password",
            (Login::Token(_), _) => "a token",
        }
    }

    /// True when the server is shown something that identifies this node.
    pub fn authenticates(&self) -> bool {
        !matches!(self.login, Login::Anonymous) || self.client_cert.is_some()
    }

    /// The client options for one connection. `tls` forces TLS (a `tls://` URL, or a CA
    /// or client certificate configured), so a downgrade to plain text fails instead.
    pub fn options(&self, tls: bool) -> Result<async_nats::ConnectOptions, AuthError> {
        let mut options = match &self.login {
            Login::Anonymous => async_nats::ConnectOptions::new(),
            Login::Creds(text) => async_nats::ConnectOptions::new()
                .credentials(text)
                .map_err(|error| AuthError::File {
                    setting: "--nats-creds",
                    path: "(the credentials file)".into(),
                    detail: format!(
                        "is not a NATS credentials file ({}); generate one with `nsc generate \
                         creds`",
                        error.kind()
                    ),
                })?,
            Login::Nkey(seed) => async_nats::ConnectOptions::with_nkey(seed.clone()),
            Login::UserPassword(user, password) => {
                async_nats::ConnectOptions::with_user_and_password(user.clone(), password.clone())
            }
            Login::Token(token) => async_nats::ConnectOptions::with_token(token.clone()),
        };
        if let Some(ca) = &self.ca_file {
            options = options.add_root_certificates(ca.clone());
        }
        if let Some((cert, key)) = &self.client_cert {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        if tls || self.ca_file.is_some() || self.client_cert.is_some() {
            options = options.require_tls(true);
        }
        Ok(options)
    }

    /// A user and password, for tests that start a server with one.
    pub fn user_and_password(user: &str, password: &str) -> ResolvedAuth {
        ResolvedAuth {
            login: Login::UserPassword(user.to_owned(), password.to_owned()),
            ..ResolvedAuth::default()
        }
    }
}

impl NatsAuth {
    /// `self` (from the config) with every field `flags` sets replaced: the command line
    /// wins. A login method from the flags replaces the config's login entirely, so a
    /// config token and a `--nats-creds` flag do not conflict.
    pub fn overridden_by(self, flags: NatsAuth) -> NatsAuth {
        let flags_login = flags.creds_file.is_some()
            || flags.nkey_file.is_some()
            || flags.user_env.is_some()
            || flags.password_env.is_some()
            || flags.token_env.is_some();
        let base = if flags_login {
            NatsAuth {
                creds_file: None,
                nkey_file: None,
                user_env: None,
                password_env: None,
                token_env: None,
                ..self
            }
        } else {
            self
        };
        NatsAuth {
            creds_file: flags.creds_file.or(base.creds_file),
            nkey_file: flags.nkey_file.or(base.nkey_file),
            user_env: flags.user_env.or(base.user_env),
            password_env: flags.password_env.or(base.password_env),
            token_env: flags.token_env.or(base.token_env),
            ca_file: flags.ca_file.or(base.ca_file),
            cert_file: flags.cert_file.or(base.cert_file),
            key_file: flags.key_file.or(base.key_file),
        }
    }

    /// Reads the files and variables named. `env` is the process environment (injected so
    /// tests never touch the real one).
    pub fn resolve(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<ResolvedAuth, AuthError> {
        let logins = [
            ("--nats-creds", self.creds_file.is_some()),
            ("--nats-nkey", self.nkey_file.is_some()),
            (
                "--nats-user-env",
                self.user_env.is_some() || self.password_env.is_some(),
            ),
            ("--nats-token-env", self.token_env.is_some()),
        ];
        let mut set = logins.iter().filter(|(_, on)| *on).map(|(name, _)| *name);
        if let (Some(first), Some(second)) = (set.next(), set.next()) {
            return Err(AuthError::Conflicting { first, second });
        }
        let var = |setting: &'static str, name: &str| {
            env(name)
                .filter(|value| !value.is_empty())
                .ok_or_else(|| AuthError::MissingEnv {
                    setting,
                    name: name.to_owned(),
                })
        };
        let login = match (
            &self.creds_file,
            &self.nkey_file,
            &self.user_env,
            &self.password_env,
            &self.token_env,
        ) {
            (Some(path), ..) => Login::Creds(read_secret_file("--nats-creds", path)?),
            (_, Some(path), ..) => {
                let seed = read_secret_file("--nats-nkey", path)?;
                let seed = seed.trim().to_owned();
                // A public key (U…) in place of the seed is the usual mistake.
                if !seed.starts_with('S') {
                    return Err(AuthError::File {
                        setting: "--nats-nkey",
                        path: path.display().to_string(),
                        detail: "does not hold an nkey seed (it starts with S, e.g. SU…; the \
                                 U… public key goes in the server's config)"
                            .into(),
                    });
                }
                Login::Nkey(seed)
            }
            (_, _, Some(user), Some(password), _) => Login::UserPassword(
                var("--nats-user-env", user)?,
                var("--nats-password-env", password)?,
            ),
            (_, _, Some(_), None, _) => {
                return Err(AuthError::Incomplete {
                    given: "--nats-user-env",
                    missing: "--nats-password-env",
                });
            }
            (_, _, None, Some(_), _) => {
                return Err(AuthError::Incomplete {
                    given: "--nats-password-env",
                    missing: "--nats-user-env",
                });
            }
            (_, _, _, _, Some(token)) => Login::Token(var("--nats-token-env", token)?),
            _ => Login::Anonymous,
        };
        let client_cert = match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                readable("--nats-cert", cert)?;
                readable("--nats-key", key)?;
                Some((cert.clone(), key.clone()))
            }
            (Some(_), None) => {
                return Err(AuthError::Incomplete {
                    given: "--nats-cert",
                    missing: "--nats-key",
                });
            }
            (None, Some(_)) => {
                return Err(AuthError::Incomplete {
                    given: "--nats-key",
                    missing: "--nats-cert",
                });
            }
            (None, None) => None,
        };
        if let Some(ca) = &self.ca_file {
            readable("--nats-ca", ca)?;
        }
        Ok(ResolvedAuth {
            login,
            ca_file: self.ca_file.clone(),
            client_cert,
        })
    }
}

/// Refuses a URL whose user-info holds a password (`user:pw@`) or a token (`tok@`): it
/// would be on the command line or in a config for anyone to read.
pub fn refuse_secrets_in_url(url: &str) -> Result<(), AuthError> {
    for address in url.split(',') {
        let rest = address.split_once("://").map_or(address, |(_, rest)| rest);
        let authority = rest.split('/').next().unwrap_or(rest);
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            let (what, instead) = if userinfo.contains(':') {
                (
                    "password",
                    "--nats-user-env and --nats-password-env (the names of variables holding \
                     them), or --nats-creds",
                )
            } else {
                (
                    "token",
                    "--nats-token-env (the name of a variable holding it), or --nats-creds",
                )
            };
            return Err(AuthError::SecretInUrl {
                url: super::redacted(url),
                what,
                instead,
            });
        }
    }
    Ok(())
}

/// True when any address of `url` asks for TLS.
pub fn wants_tls(url: &str) -> bool {
    url.split(',')
        .any(|address| address.trim().to_ascii_lowercase().starts_with("tls://"))
}

fn readable(setting: &'static str, path: &Path) -> Result<(), AuthError> {
    std::fs::metadata(path)
        .map_err(|error| AuthError::File {
            setting,
            path: path.display().to_string(),
            detail: format!("cannot be read ({})", error.kind()),
        })
        .and_then(|meta| {
            if meta.is_file() {
                Ok(())
            } else {
                Err(AuthError::File {
                    setting,
                    path: path.display().to_string(),
                    detail: "is not a file".into(),
                })
            }
        })
}

fn read_secret_file(setting: &'static str, path: &Path) -> Result<String, AuthError> {
    std::fs::read_to_string(path).map_err(|error| AuthError::File {
        setting,
        path: path.display().to_string(),
        // The kind only: an io error's text never holds the content, but say little.
        detail: format!("cannot be read ({})", error.kind()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn a_password_or_token_in_the_url_is_refused_naming_the_flag_to_use() {
        let error = refuse_secrets_in_url("nats://bot:s3cret@127.0.0.1:4222").unwrap_err();
        let text = error.to_string();
        assert!(text.contains("--nats-password-env"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
        let error = refuse_secrets_in_url("tls://a:1,tls://t0ken@b:2").unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("--nats-token-env") && !text.contains("t0ken"),
            "{text}"
        );
        assert_eq!(
            refuse_secrets_in_url("nats://127.0.0.1:4222,tls://h:1"),
            Ok(())
        );
    }

    #[test]
    fn values_come_from_the_named_variables_and_missing_ones_are_named() {
        let auth = NatsAuth {
            user_env: Some("NU".into()),
            password_env: Some("NP".into()),
            ..NatsAuth::default()
        };
        let resolved = auth.resolve(&env(&[("NU", "node"), ("NP", "pw")])).unwrap();
        assert!(resolved.authenticates());
        assert!(!format!("{resolved:?}").contains("pw"));
        let error = auth.resolve(&env(&[("NU", "node")])).unwrap_err();
        assert_eq!(
            error,
            AuthError::MissingEnv {
                setting: "--nats-password-env",
                name: "NP".into()
            }
        );
        let half = NatsAuth {
            user_env: Some("NU".into()),
            ..NatsAuth::default()
        };
        assert!(matches!(
            half.resolve(&env(&[])),
            Err(AuthError::Incomplete { .. })
        ));
    }

    #[test]
    fn two_logins_conflict_and_a_flag_login_replaces_the_configs() {
        let config = NatsAuth {
            token_env: Some("T".into()),
            ca_file: Some("/ca.pem".into()),
            ..NatsAuth::default()
        };
        let both = NatsAuth {
            creds_file: Some("/c.creds".into()),
            ..config.clone()
        };
        assert!(matches!(
            both.resolve(&env(&[("T", "x")])),
            Err(AuthError::Conflicting { .. })
        ));
        let merged = config.overridden_by(NatsAuth {
            creds_file: Some("/c.creds".into()),
            ..NatsAuth::default()
        });
        assert_eq!(merged.token_env, None);
        assert_eq!(merged.creds_file.as_deref(), Some(Path::new("/c.creds")));
        assert_eq!(merged.ca_file.as_deref(), Some(Path::new("/ca.pem")));
    }

    #[test]
    fn no_login_does_not_authenticate_and_a_public_nkey_is_refused() {
        assert!(
            !NatsAuth::default()
                .resolve(&env(&[]))
                .unwrap()
                .authenticates()
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seed");
        std::fs::write(
            &path,
            "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4\n",
        )
        .unwrap();
        let auth = NatsAuth {
            nkey_file: Some(path),
            ..NatsAuth::default()
        };
        let text = auth.resolve(&env(&[])).unwrap_err().to_string();
        assert!(text.contains("does not hold an nkey seed"), "{text}");
    }

    #[test]
    fn tls_urls_are_recognised() {
        assert!(wants_tls("tls://h:1"));
        assert!(wants_tls("nats://a:1, TLS://b:2"));
        assert!(!wants_tls("nats://a:1"));
    }
}
