//! Pairing codes at rest: a salted SHA-256, compared in constant time (docs/security.md#pairing).
//!
//! The state document used to hold live codes in plain text, so anything that could read
//! the file (a backup, a screen share, an agent's `read` tool) could pair a chat. The
//! document now keeps only `SHA-256(domain || salt || code)` with a fresh random salt per
//! code; the plain code lives in the guest's memory while it is live and is written only to
//! the local terminal (I1).
//!
//! What this does not do: a 6-digit code has a million values, so someone holding the file
//! can still find it by trying them all in well under a second. The hash keeps the code from
//! being *read*; what keeps it from being *guessed* is the short lifetime, the attempt
//! limit, and the file's 0600 mode. A slow KDF would not change that for a million values
//! and would cost every attempt.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Bytes of salt per code.
pub const SALT_LEN: usize = 16;

/// Separates these hashes from any other SHA-256 of the same bytes.
const DOMAIN: &[u8] = b"bot-connect pairing code v1\0";

/// A code's salted hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeHash {
    salt: [u8; SALT_LEN],
    digest: [u8; 32],
}

impl CodeHash {
    /// The hash of `code` under `salt`.
    pub fn new(code: &str, salt: [u8; SALT_LEN]) -> Self {
        CodeHash {
            salt,
            digest: digest(&salt, code),
        }
    }

    /// Whether `typed` is the code. The digests are compared without stopping at the first
    /// difference, so timing tells nothing about how close a guess was.
    pub fn matches(&self, typed: &str) -> bool {
        bool::from(digest(&self.salt, typed).ct_eq(&self.digest))
    }

    /// `(salt, sha256)` in lower-case hex, as the state document stores them.
    pub fn to_hex(&self) -> (String, String) {
        (hex(&self.salt), hex(&self.digest))
    }

    /// Reads what [`CodeHash::to_hex`] wrote; `None` unless both are hex of the right
    /// length.
    pub fn from_hex(salt: &str, sha256: &str) -> Option<Self> {
        Some(CodeHash {
            salt: unhex(salt)?,
            digest: unhex(sha256)?,
        })
    }
}

fn digest(salt: &[u8], code: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(DOMAIN);
    hasher.update(salt);
    hasher.update(code.as_bytes());
    hasher.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Exactly `N` bytes of hex digits (either case), or `None`.
fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; N];
    for (slot, pair) in out.iter_mut().zip(text.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        // `from_str_radix` would take a leading `+`; only hex digits are a stored byte.
        if !pair.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *slot = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SALT: [u8; SALT_LEN] = [7; SALT_LEN];

    #[test]
    fn matches_only_the_code() {
        let hash = CodeHash::new("482913", SALT);
        assert!(hash.matches("482913"));
        for other in ["482914", "", "48291", "4829130", " 482913"] {
            assert!(!hash.matches(other), "{other:?}");
        }
    }

    #[test]
    fn the_salt_changes_the_digest() {
        let a = CodeHash::new("482913", SALT);
        let b = CodeHash::new("482913", [8; SALT_LEN]);
        assert_ne!(a.to_hex().1, b.to_hex().1);
        assert!(b.matches("482913"));
    }

    #[test]
    fn hex_round_trip_and_refusals() {
        let hash = CodeHash::new("0042", SALT);
        let (salt, sha) = hash.to_hex();
        assert_eq!(salt, "07".repeat(16));
        assert_eq!(sha.len(), 64);
        assert_eq!(CodeHash::from_hex(&salt, &sha), Some(hash.clone()));
        assert_eq!(
            CodeHash::from_hex(&salt.to_uppercase(), &sha.to_uppercase()),
            Some(hash)
        );
        for (salt, sha) in [
            ("07", sha.as_str()),
            (&"zz".repeat(16), sha.as_str()),
            (&"+7".repeat(16), sha.as_str()),
            (&"é".repeat(16), sha.as_str()),
            (salt.as_str(), &sha[1..]),
        ] {
            assert_eq!(CodeHash::from_hex(salt, sha), None, "{salt} {sha}");
        }
    }

    #[test]
    fn known_answer() {
        // SHA-256("bot-connect pairing code v1\0" || 16 × 0x07 || "123456"), computed
        // independently, so a change of the stored format cannot pass unnoticed.
        assert_eq!(
            CodeHash::new("123456", SALT).to_hex().1,
            "a301c7eac815258beab9767015a7d23595f5a7592f01bde83f28b2d0e534b565"
        );
    }
}
