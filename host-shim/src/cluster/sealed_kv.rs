//! What the cluster's KV buckets hold, sealed (docs/security.md#cluster-security): every value of
//! the state, sessions and bindings buckets is ChaCha20-Poly1305 ciphertext under a key derived
//! from the cluster key, with the bucket and the KV key as associated data.
//!
//! Why: the state documents hold paired identities and the bindings who talks to which
//! session. In plain JSON any client of the NATS server read them, and could write a
//! paired identity of its own into a session's state. Sealed, an outsider reads nothing,
//! and a value it wrote (or moved from another key or bucket) fails to open and is refused.
//!
//! Layout: `bck1` (4 bytes: format and version), a 12-byte random nonce from the OS
//! generator, then the ciphertext with its 16-byte tag. Random nonces are safe for far more
//! writes than a cluster makes (the collision odds reach 2^-32 after 2^32 writes).

use ring::aead::{self, Aad, Nonce};
use ring::rand::{SecureRandom as _, SystemRandom};

use super::cluster_key::ClusterKey;

/// What a sealed value starts with.
const MAGIC: &[u8; 4] = b"bck1";

/// A stored value could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueRefused {
    /// Not a sealed value at all (plain text written by something else, or by a version
    /// before sealing).
    #[error(
        "the value of {key} in bucket {bucket} is not sealed with the cluster key (written by \
         something that is not a node of this cluster, or before sealing): it was ignored; \
         delete it (`nats kv del {bucket} {key}`) if it is not yours"
    )]
    Unsealed {
        /// The bucket.
        bucket: String,
        /// The KV key (a hash).
        key: String,
    },
    /// The tag does not verify: another cluster key, a changed value, or one moved from
    /// another key.
    #[error(
        "the value of {key} in bucket {bucket} does not open with this node's cluster key (a \
         forgery, a value moved from another key, or a node with another key: every node \
         needs the same one); it was ignored"
    )]
    Forged {
        /// The bucket.
        bucket: String,
        /// The KV key (a hash).
        key: String,
    },
    /// The OS random generator failed, so nothing could be sealed.
    #[error("the OS random generator failed, so the value for {key} could not be sealed")]
    NoRandomness {
        /// The KV key.
        key: String,
    },
}

fn aad(bucket: &str, key: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(bucket.len() + key.len() + 40);
    aad.extend_from_slice(b"bot-connect kv value v1");
    for part in [bucket.as_bytes(), key.as_bytes()] {
        aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
        aad.extend_from_slice(part);
    }
    aad
}

/// Seals `plaintext` as the value of `key` in `bucket`.
pub fn seal(
    cluster: &ClusterKey,
    bucket: &str,
    key: &str,
    plaintext: &[u8],
) -> Result<Vec<u8>, ValueRefused> {
    let mut nonce = [0u8; aead::NONCE_LEN];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| ValueRefused::NoRandomness {
            key: key.to_owned(),
        })?;
    let mut sealed = Vec::with_capacity(MAGIC.len() + nonce.len() + plaintext.len() + 16);
    sealed.extend_from_slice(MAGIC);
    sealed.extend_from_slice(&nonce);
    let mut body = plaintext.to_vec();
    cluster
        .value_key()
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad(bucket, key)),
            &mut body,
        )
        // Only fails for inputs over 256 GiB.
        .map_err(|_| ValueRefused::NoRandomness {
            key: key.to_owned(),
        })?;
    sealed.extend_from_slice(&body);
    Ok(sealed)
}

/// Opens the value of `key` in `bucket`; refused unless this cluster key sealed exactly it
/// for exactly that place.
pub fn open(
    cluster: &ClusterKey,
    bucket: &str,
    key: &str,
    sealed: &[u8],
) -> Result<Vec<u8>, ValueRefused> {
    let Some(rest) = sealed.strip_prefix(MAGIC.as_slice()) else {
        return Err(ValueRefused::Unsealed {
            bucket: bucket.to_owned(),
            key: key.to_owned(),
        });
    };
    let forged = || ValueRefused::Forged {
        bucket: bucket.to_owned(),
        key: key.to_owned(),
    };
    if rest.len() < aead::NONCE_LEN + cluster.value_key().algorithm().tag_len() {
        return Err(forged());
    }
    let (nonce, ciphertext) = rest.split_at(aead::NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| forged())?;
    let mut body = ciphertext.to_vec();
    let plain = cluster
        .value_key()
        .open_in_place(nonce, Aad::from(aad(bucket, key)), &mut body)
        .map_err(|_| forged())?;
    Ok(plain.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> ClusterKey {
        ClusterKey::from_material(&[byte; 32], "test").unwrap()
    }

    #[test]
    fn a_value_opens_only_with_its_key_bucket_and_place() {
        let plain = br#"{"trusted":{"telegram:1":{}}}"#;
        let sealed = seal(&key(1), "p-session-state", "s1", plain).unwrap();
        assert!(
            !sealed.windows(8).any(|w| w == b"telegram"),
            "ciphertext shows the text"
        );
        assert_eq!(
            open(&key(1), "p-session-state", "s1", &sealed).unwrap(),
            plain
        );
        for (k, bucket, place) in [
            (key(2), "p-session-state", "s1"),
            (key(1), "p-sessions", "s1"),
            (key(1), "p-session-state", "s2"),
        ] {
            assert!(matches!(
                open(&k, bucket, place, &sealed),
                Err(ValueRefused::Forged { .. })
            ));
        }
        let mut flipped = sealed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(matches!(
            open(&key(1), "p-session-state", "s1", &flipped),
            Err(ValueRefused::Forged { .. })
        ));
        assert!(matches!(
            open(&key(1), "p-session-state", "s1", plain),
            Err(ValueRefused::Unsealed { .. })
        ));
        assert!(matches!(
            open(&key(1), "p-session-state", "s1", b"bck1short"),
            Err(ValueRefused::Forged { .. })
        ));
    }

    #[test]
    fn two_seals_of_one_value_differ() {
        let a = seal(&key(1), "b", "k", b"same").unwrap();
        let b = seal(&key(1), "b", "k", b"same").unwrap();
        assert_ne!(a, b, "a nonce was reused");
    }
}
