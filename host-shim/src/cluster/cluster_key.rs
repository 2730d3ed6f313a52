//! The cluster key (docs/security.md#cluster-security): a secret every node of a cluster shares, so
//! a client that can reach the NATS server (with credentials, even) but does not hold the key can
//! neither inject an envelope nor forge or read what the buckets hold.
//!
//! From the operator's key material (at least 32 bytes, from a file or an environment
//! variable) HKDF-SHA256 derives one key per use: the HMAC-SHA256 key that seals envelopes
//! ([`super::seal`]) and the ChaCha20-Poly1305 key that seals KV values
//! ([`super::sealed_kv`]). Separate keys, so a value sealed for one use is never accepted
//! by the other.
//!
//! Crate: `ring` (HMAC, HKDF, ChaCha20-Poly1305 and the OS random generator in one audited
//! family), already in the tree as the TLS provider of reqwest and async-nats, so no new
//! cryptography code is compiled in.

use std::path::Path;
use std::sync::Arc;

use ring::{aead, hkdf, hmac};

/// The least key material accepted: 32 bytes, the HMAC-SHA256 key size.
pub const MIN_KEY_BYTES: usize = 32;

/// Why the cluster key could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterKeyError {
    /// The key material is shorter than [`MIN_KEY_BYTES`].
    #[error(
        "the cluster key from {source_name} is {len} bytes; it must be at least \
         {MIN_KEY_BYTES}. Make one with `openssl rand -base64 48 > cluster.key` (chmod 600) \
         and give every node the same"
    )]
    TooShort {
        /// The file or variable it came from.
        source_name: String,
        /// How long it was.
        len: usize,
    },
    /// The file cannot be read.
    #[error("cannot read the cluster key file {path}: {detail}")]
    File {
        /// The file.
        path: String,
        /// What went wrong (never the content).
        detail: String,
    },
    /// The variable is unset or empty.
    #[error(
        "--cluster-key-env names {name}, which is unset or empty in this process: export it \
         (every node of the cluster needs the same value) before starting the node"
    )]
    MissingEnv {
        /// The variable's name.
        name: String,
    },
    /// Both a file and a variable were given.
    #[error("both a cluster key file and a cluster key variable are set: keep one")]
    Both,
}

/// The keys derived from one cluster key. Cheap to clone; its `Debug` shows nothing secret.
#[derive(Clone)]
pub struct ClusterKey {
    inner: Arc<Keys>,
}

struct Keys {
    seal: hmac::Key,
    values: aead::LessSafeKey,
    names: hmac::Key,
    public: bool,
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.inner.public {
            "ClusterKey(public, insecure)"
        } else {
            "ClusterKey(***)"
        })
    }
}

/// The fixed material `--insecure-no-auth` without a key falls back to. It is in the
/// source, so anyone can seal with it: it keeps one code path, not a secret.
const PUBLIC_MATERIAL: &[u8] = b"bot-connect insecure public cluster key: anyone can forge";

struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

impl ClusterKey {
    /// Derives the keys from `material`, refused when shorter than [`MIN_KEY_BYTES`].
    /// `source_name` names where it came from, for the error.
    pub fn from_material(
        material: &[u8],
        source_name: &str,
    ) -> Result<ClusterKey, ClusterKeyError> {
        if material.len() < MIN_KEY_BYTES {
            return Err(ClusterKeyError::TooShort {
                source_name: source_name.to_owned(),
                len: material.len(),
            });
        }
        Ok(ClusterKey::derive(material, false))
    }

    fn derive(material: &[u8], public: bool) -> ClusterKey {
        let prk =
            hkdf::Salt::new(hkdf::HKDF_SHA256, b"bot-connect cluster key v1").extract(material);
        let expand = |info: &'static [u8], len: usize| {
            let mut out = vec![0u8; len];
            // Lengths here are 32 bytes, far under HKDF's 255 × 32 limit: cannot fail.
            prk.expand(&[info], Len(len))
                .and_then(|okm| okm.fill(&mut out))
                .expect("HKDF of 32 bytes");
            out
        };
        let values = aead::UnboundKey::new(&aead::CHACHA20_POLY1305, &expand(b"kv values", 32))
            .expect("a 32-byte ChaCha20-Poly1305 key");
        ClusterKey {
            inner: Arc::new(Keys {
                seal: hmac::Key::new(hmac::HMAC_SHA256, &expand(b"envelope seal", 32)),
                values: aead::LessSafeKey::new(values),
                names: hmac::Key::new(hmac::HMAC_SHA256, &expand(b"kv names", 32)),
                public,
            }),
        }
    }

    /// The key `--insecure-no-auth` runs with when no key is given: public, so envelopes
    /// and values are sealed but anyone can forge them. Never for a real deployment.
    pub fn insecure_public() -> ClusterKey {
        ClusterKey::derive(PUBLIC_MATERIAL, true)
    }

    /// True for [`ClusterKey::insecure_public`].
    pub fn is_public(&self) -> bool {
        self.inner.public
    }

    /// Reads the key from a file: its bytes, surrounding whitespace (a trailing newline)
    /// trimmed.
    pub fn from_file(path: &Path) -> Result<ClusterKey, ClusterKeyError> {
        let bytes = std::fs::read(path).map_err(|error| ClusterKeyError::File {
            path: path.display().to_string(),
            detail: error.kind().to_string(),
        })?;
        ClusterKey::from_material(bytes.trim_ascii(), &path.display().to_string())
    }

    /// Reads the key from the variable `name` of `env` (the process environment, injected).
    pub fn from_env(
        name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ClusterKey, ClusterKeyError> {
        let value =
            env(name)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| ClusterKeyError::MissingEnv {
                    name: name.to_owned(),
                })?;
        ClusterKey::from_material(value.trim().as_bytes(), &format!("${name}"))
    }

    /// The key from a file or a variable, `None` when neither is named.
    pub fn load(
        file: Option<&Path>,
        env_name: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<ClusterKey>, ClusterKeyError> {
        match (file, env_name) {
            (Some(_), Some(_)) => Err(ClusterKeyError::Both),
            (Some(path), None) => ClusterKey::from_file(path).map(Some),
            (None, Some(name)) => ClusterKey::from_env(name, env).map(Some),
            (None, None) => Ok(None),
        }
    }

    pub(crate) fn seal_key(&self) -> &hmac::Key {
        &self.inner.seal
    }

    pub(crate) fn value_key(&self) -> &aead::LessSafeKey {
        &self.inner.values
    }

    /// A KV key name an outsider cannot link to what it stands for: `prefix` and 32 hex
    /// digits of HMAC-SHA256 (keyed with the cluster key) over `parts`. Unkeyed hashes let
    /// anyone who guesses a session name or chat id confirm the guess.
    pub fn name(&self, prefix: &str, parts: &[&str]) -> String {
        let mut context = hmac::Context::with_key(&self.inner.names);
        for part in parts {
            context.update(&(part.len() as u64).to_be_bytes());
            context.update(part.as_bytes());
        }
        let tag = context.sign();
        let hex: String = tag.as_ref()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{prefix}{hex}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_material_is_refused_with_how_to_make_a_key() {
        let error = ClusterKey::from_material(&[7u8; 31], "/etc/k").unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("31 bytes") && text.contains("openssl rand"),
            "{text}"
        );
        assert!(ClusterKey::from_material(&[7u8; 32], "/etc/k").is_ok());
    }

    #[test]
    fn a_key_comes_from_a_file_or_a_variable_never_both() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, format!("{}\n", "k".repeat(40))).unwrap();
        let none = |_: &str| None;
        assert!(
            ClusterKey::load(Some(&path), None, &none)
                .unwrap()
                .is_some()
        );
        assert_eq!(
            ClusterKey::load(Some(&path), Some("K"), &none).unwrap_err(),
            ClusterKeyError::Both
        );
        let missing = ClusterKey::load(None, Some("K"), &none).unwrap_err();
        assert!(missing.to_string().contains("K,") || missing.to_string().contains("names K"));
        let short = |_: &str| Some("short".to_owned());
        assert!(matches!(
            ClusterKey::load(None, Some("K"), &short),
            Err(ClusterKeyError::TooShort { len: 5, .. })
        ));
        assert_eq!(
            ClusterKey::load(None, None, &none).unwrap().map(|_| ()),
            None
        );
    }

    #[test]
    fn names_depend_on_the_key_and_hide_their_parts() {
        let a = ClusterKey::from_material(&[1u8; 32], "a").unwrap();
        let b = ClusterKey::from_material(&[2u8; 32], "b").unwrap();
        let name = a.name("s", &["session", "serve:alice"]);
        assert_eq!(name.len(), 33);
        assert!(!name.contains("alice"));
        assert_ne!(name, b.name("s", &["session", "serve:alice"]));
        assert_ne!(a.name("s", &["ab", "c"]), a.name("s", &["a", "bc"]));
        assert!(!format!("{a:?}").contains('1'));
    }
}
