//! The two keys the bridge files everything under, as types of their own.
//!
//! Both are `transport:something` strings, and mixing them up is silent: a pause filed
//! under an identity, or trust looked up by a conversation, compiles and quietly never
//! matches. As newtypes the compiler keeps them apart.

use std::borrow::Borrow;
use std::fmt;

/// The unit of trust: `transport:userId` (I12). A bare user id is never an identity,
/// because the same id on two platforms belongs to two different people.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Identity(String);

impl Identity {
    /// The identity of `user_id` on `transport`.
    pub fn new(transport: &str, user_id: &str) -> Self {
        Identity(format!("{transport}:{user_id}"))
    }

    /// Reads an identity written by a person or a file: a transport without `:` or
    /// whitespace, `:`, then a user id without whitespace. Anything else is `None`.
    pub fn parse(text: &str) -> Option<Self> {
        is_identity(text).then(|| Identity(text.to_string()))
    }

    /// The identity as written (`telegram:42`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The transport part (`telegram`).
    pub fn transport(&self) -> &str {
        self.0.split_once(':').map_or(&self.0, |(t, _)| t)
    }
}

/// `transport:conversationId`: the key for pause state and pending pairing codes
/// (docs/decisions.md#decision-5-pause-and-pending-codes-are-per-conversation). A thread is not
/// part of it, so pausing a chat pauses all its threads.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ConversationKey(String);

impl ConversationKey {
    /// The key of `conversation_id` on `transport`.
    pub fn new(transport: &str, conversation_id: &str) -> Self {
        ConversationKey(format!("{transport}:{conversation_id}"))
    }

    /// A key read back from the state document. It is not checked: only equality with
    /// keys the bridge makes matters, and a malformed one simply never matches.
    pub fn from_stored(text: &str) -> Self {
        ConversationKey(text.to_string())
    }

    /// The key as written (`telegram:-100123`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The transport part (`telegram`).
    pub fn transport(&self) -> &str {
        self.0.split_once(':').map_or(&self.0, |(t, _)| t)
    }
}

/// `transport:userId`: a transport without `:` or whitespace, then a user id without
/// whitespace.
pub(crate) fn is_identity(text: &str) -> bool {
    text.split_once(':').is_some_and(|(transport, user)| {
        !transport.is_empty()
            && !user.is_empty()
            && !transport.chars().any(char::is_whitespace)
            && !user.chars().any(char::is_whitespace)
    })
}

macro_rules! string_key {
    ($name:ident) => {
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        // Ordering and equality are the inner string's, so maps keyed by the type can be
        // searched with a plain `&str` (the state parser and tests do).
        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

string_key!(Identity);
string_key!(ConversationKey);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_table() {
        let rows = [
            ("telegram:42", Some("telegram")),
            ("discord:1:2", Some("discord")),
            ("42", None),
            (":42", None),
            ("telegram:", None),
            ("tele gram:42", None),
            ("telegram:4 2", None),
            ("", None),
        ];
        for (text, transport) in rows {
            let parsed = Identity::parse(text);
            assert_eq!(
                parsed.as_ref().map(Identity::transport),
                transport,
                "{text:?}"
            );
            if let Some(identity) = parsed {
                assert_eq!(identity.as_str(), text);
                assert_eq!(identity.to_string(), text);
            }
        }
        assert_eq!(Identity::new("tg", "u1").as_str(), "tg:u1");
    }

    #[test]
    fn conversation_key_table() {
        let key = ConversationKey::new("telegram", "-100:5");
        assert_eq!(key.as_str(), "telegram:-100:5");
        assert_eq!(key.transport(), "telegram");
        assert_eq!(ConversationKey::from_stored("odd").transport(), "odd");
        let borrowed: &str = key.borrow();
        assert_eq!(borrowed, "telegram:-100:5");
    }
}
