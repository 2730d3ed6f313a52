//! The peer token a robo_claw client presents, and the two places it may carry it: one
//! secret type that never prints, compared in constant time. It sits below `clients` (whose
//! access rules hold tokens) and `auth` (which checks a call against those rules), so the
//! rules need not import the checker to name a token.

use subtle::ConstantTimeEq;

/// Call metadata carrying the peer token.
pub const PEER_TOKEN_HEADER: &str = "x-robo-claw-peer-token";

/// `ChatMessage.metadata` key carrying the peer token on a first message.
pub const AUTH_TOKEN_KEY: &str = "auth_token";

/// The configured peer token. `Debug` never shows it.
#[derive(Clone)]
pub struct PeerToken(String);

impl std::fmt::Debug for PeerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerToken(<hidden>)")
    }
}

impl PeerToken {
    /// The token, trimmed; `None` when it is empty (an exported but blank variable means
    /// "no token", as in the original).
    pub fn new(raw: &str) -> Option<PeerToken> {
        let token = raw.trim();
        (!token.is_empty()).then(|| PeerToken(token.to_owned()))
    }

    /// True when `offered` (trimmed) is the token, compared in constant time.
    pub fn matches(&self, offered: &str) -> bool {
        bool::from(self.0.as_bytes().ct_eq(offered.trim().as_bytes()))
    }

    /// The token's bytes, for scrubbing text that must never show it.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blank_token_means_no_token() {
        assert!(PeerToken::new("  ").is_none());
        assert!(PeerToken::new(" s3cret ").expect("set").matches("s3cret"));
    }
}
