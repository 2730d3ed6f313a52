//! The optional peer token: where a client presents it and how it is checked.
//!
//! A client presents the token in the call metadata (`x-robo-claw-peer-token`, any gRPC
//! client can set it) or, on `ChatStream` and `SendCommand`, as `metadata.auth_token` of
//! its first message (for clients that cannot set call metadata). The comparison runs in
//! constant time, so the token cannot be guessed byte by byte from response times.

use tonic::metadata::MetadataMap;

use crate::clients::{Access, Caller};
use crate::peer_token::{AUTH_TOKEN_KEY, PEER_TOKEN_HEADER};

/// What the call metadata says about a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderCheck {
    /// No token is configured: every client is accepted.
    Open,
    /// The header carries a token that identifies this caller.
    Accepted(Caller),
    /// The header carries a wrong token (or one that is not text).
    Refused,
    /// No header: the first message may still carry `metadata.auth_token`.
    Absent,
}

/// Checks the call metadata against the access rules.
pub fn check_header(access: &Access, metadata: &MetadataMap) -> HeaderCheck {
    if access.is_open() {
        return HeaderCheck::Open;
    }
    match metadata.get(PEER_TOKEN_HEADER) {
        None => HeaderCheck::Absent,
        Some(value) => match value
            .to_str()
            .ok()
            .and_then(|offered| access.identify(offered))
        {
            Some(caller) => HeaderCheck::Accepted(caller),
            None => HeaderCheck::Refused,
        },
    }
}

/// The error every refused client gets. It says what to send, never what was expected.
pub fn refused() -> tonic::Status {
    tonic::Status::unauthenticated(format!(
        "invalid peer token: send the token in the `{PEER_TOKEN_HEADER}` call metadata (or as metadata.{AUTH_TOKEN_KEY} of the first message)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer_token::PeerToken;

    fn metadata(token: Option<&str>) -> MetadataMap {
        let mut map = MetadataMap::new();
        if let Some(token) = token {
            map.insert(PEER_TOKEN_HEADER, token.parse().expect("ascii"));
        }
        map
    }

    #[test]
    fn the_header_is_accepted_refused_or_absent() {
        let open = Access::Open;
        let token = Access::Shared(PeerToken::new("s3cret").expect("set"));
        assert_eq!(check_header(&open, &metadata(Some("x"))), HeaderCheck::Open);
        assert_eq!(
            check_header(&token, &metadata(Some("s3cret"))),
            HeaderCheck::Accepted(Caller::Anyone)
        );
        assert_eq!(
            check_header(&token, &metadata(Some("s3cre"))),
            HeaderCheck::Refused
        );
        assert_eq!(
            check_header(&token, &metadata(Some("s3cretX"))),
            HeaderCheck::Refused
        );
        assert_eq!(check_header(&token, &metadata(None)), HeaderCheck::Absent);
    }

    #[test]
    fn neither_debug_nor_the_refusal_shows_the_token() {
        let token = PeerToken::new("s3cret").expect("set");
        assert!(!format!("{token:?}").contains("s3cret"));
        assert!(!refused().message().contains("s3cret"));
        assert_eq!(refused().code(), tonic::Code::Unauthenticated);
    }
}
