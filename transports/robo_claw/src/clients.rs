//! Per-client credentials (docs/security.md#robo_claw-clients): who a caller is, which
//! senders it may speak as, and which rooms and files are its own.
//!
//! Why: with one shared peer token, every holder of it could send as any `sender_id`
//! (so as any paired identity, answering that identity's approvals) and read any room by
//! naming it. With `clients` configured, each client has its own token (in its own
//! environment variable), a list of the sender ids it may use, and its own namespace of
//! rooms and uploads: client `phone`'s room `lab` is the conversation `phone:lab`, which
//! no other client can join, read or send to. The shared `tokenEnv` token is then
//! ignored (with a warning), so an old copy of it opens nothing.
//!
//! The `clients` setting is one line of text (the config's setting kinds are scalars):
//! `<client>: <TOKEN_ENV>: <sender>[, <sender>...]`, entries separated by `;`, e.g.
//! `"phone: PI_RC_PHONE_TOKEN: alice, alice-tablet; arm: PI_RC_ARM_TOKEN: arm-1"`.
//! Pure: parsing and decisions only; the tokens are read by the caller.

use std::collections::BTreeSet;

use crate::normalize::MAX_ID_BYTES;
use crate::peer_token::PeerToken;

/// The key the clients are configured under, for messages.
pub const CLIENTS_KEY: &str = "transports.robo_claw.clients";

/// Longest client name, in bytes.
pub const MAX_CLIENT_NAME: usize = 64;

/// Separates a client's name from its room in a conversation id (`phone:lab`). Client
/// names cannot contain it, so the first one always ends the name.
pub const ROOM_SEPARATOR: char = ':';

/// One client as the config describes it (no token yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSpec {
    /// The client's name: the namespace of its rooms (`[A-Za-z0-9_-]`, at most 64 bytes).
    pub name: String,
    /// The environment variable holding its token.
    pub token_env: String,
    /// The sender ids it may send as; at least one.
    pub senders: Vec<String>,
}

/// Why the `clients` setting cannot be used. Every message names the key and the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientsError {
    /// An entry is not `<client>: <TOKEN_ENV>: <sender>[, <sender>...]`.
    #[error(
        "{CLIENTS_KEY}: entry {entry} ({text:?}) is not \"<client>: <TOKEN_ENV>: <sender>, <sender>...\"; separate clients with ';'"
    )]
    Shape {
        /// 1-based entry number.
        entry: usize,
        /// The entry as written.
        text: String,
    },
    /// A client name with characters outside `[A-Za-z0-9_-]`, or too long.
    #[error(
        "{CLIENTS_KEY}: client name {name:?} must be 1 to {MAX_CLIENT_NAME} letters, digits, '-' or '_'"
    )]
    Name {
        /// The name as written.
        name: String,
    },
    /// The same client name twice.
    #[error("{CLIENTS_KEY}: client {name:?} is listed twice; give each client one entry")]
    DuplicateClient {
        /// The name.
        name: String,
    },
    /// Not an environment variable name.
    #[error(
        "{CLIENTS_KEY}: client {client:?} names {env:?} as its token variable, which is not an environment variable name (letters, digits and '_', not starting with a digit); put the token in a variable and write its NAME here"
    )]
    EnvName {
        /// The client.
        client: String,
        /// What was written.
        env: String,
    },
    /// Two clients share a token variable, so the server could not tell them apart.
    #[error(
        "{CLIENTS_KEY}: clients {first:?} and {second:?} both read ${env}; give each client its own token variable"
    )]
    SharedEnv {
        /// The first client.
        first: String,
        /// The second client.
        second: String,
        /// The variable.
        env: String,
    },
    /// A sender id that is empty, too long, or the bot's own.
    #[error("{CLIENTS_KEY}: client {client:?} lists sender {sender:?}: {reason}")]
    Sender {
        /// The client.
        client: String,
        /// The sender id as written.
        sender: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The same sender id under two clients: either could then answer the other's
    /// approvals.
    #[error(
        "{CLIENTS_KEY}: sender {sender:?} is listed under both {first:?} and {second:?}; a sender id belongs to one client only"
    )]
    SharedSender {
        /// The sender id.
        sender: String,
        /// The first client.
        first: String,
        /// The second client.
        second: String,
    },
    /// Two clients whose variables hold the same token.
    #[error(
        "{CLIENTS_KEY}: clients {first:?} and {second:?} have the same token; give each client its own"
    )]
    SameToken {
        /// The first client.
        first: String,
        /// The second client.
        second: String,
    },
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_client_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_CLIENT_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Parses the `clients` setting; `self_sender_id` is the bot's own sender id, which no
/// client may claim. An empty text means no clients.
pub fn parse_clients(text: &str, self_sender_id: &str) -> Result<Vec<ClientSpec>, ClientsError> {
    let mut clients: Vec<ClientSpec> = Vec::new();
    let entries = text.split(';').map(str::trim).filter(|e| !e.is_empty());
    for (index, entry) in entries.enumerate() {
        let shape = || ClientsError::Shape {
            entry: index + 1,
            text: entry.to_owned(),
        };
        // Exactly three parts: a sender id with a ':' in it would be ambiguous.
        let parts: Vec<&str> = entry.split(':').map(str::trim).collect();
        let [name, env, senders] = parts[..] else {
            return Err(shape());
        };
        if !is_client_name(name) {
            return Err(ClientsError::Name { name: name.into() });
        }
        if clients.iter().any(|client| client.name == name) {
            return Err(ClientsError::DuplicateClient { name: name.into() });
        }
        if !is_env_name(env) {
            return Err(ClientsError::EnvName {
                client: name.into(),
                env: env.into(),
            });
        }
        if let Some(other) = clients.iter().find(|client| client.token_env == env) {
            return Err(ClientsError::SharedEnv {
                first: other.name.clone(),
                second: name.into(),
                env: env.into(),
            });
        }
        let mut listed = Vec::new();
        for sender in senders.split(',').map(str::trim) {
            let problem = |reason: &str| ClientsError::Sender {
                client: name.into(),
                sender: sender.into(),
                reason: reason.into(),
            };
            if sender.is_empty() {
                return Err(problem(
                    "an empty sender id (list at least one, comma-separated)",
                ));
            }
            if sender.len() > MAX_ID_BYTES {
                return Err(problem("longer than 256 bytes"));
            }
            if sender == self_sender_id.trim() {
                return Err(problem(
                    "that is the bot's own sender id (selfSenderId); messages from it are ignored",
                ));
            }
            if let Some(other) = clients
                .iter()
                .find(|client| client.senders.iter().any(|s| s == sender))
            {
                return Err(ClientsError::SharedSender {
                    sender: sender.into(),
                    first: other.name.clone(),
                    second: name.into(),
                });
            }
            if !listed.iter().any(|s| s == sender) {
                listed.push(sender.to_owned());
            }
        }
        clients.push(ClientSpec {
            name: name.into(),
            token_env: env.into(),
            senders: listed,
        });
    }
    Ok(clients)
}

/// One configured client with its token (when its variable is set).
#[derive(Debug, Clone)]
pub struct Client {
    /// The client's name (its room namespace).
    pub name: String,
    /// The variable its token comes from, for messages.
    pub token_env: String,
    /// Its token; `None` when the variable is unset: the client cannot connect.
    pub token: Option<PeerToken>,
    /// The sender ids it may send as.
    pub senders: BTreeSet<String>,
}

/// Who may connect, as the server checks it.
#[derive(Debug, Clone)]
pub enum Access {
    /// No token and no clients: anyone who reaches the port, as any sender.
    Open,
    /// One shared token: its holders may send as any sender and name any room.
    Shared(PeerToken),
    /// Per-client tokens, senders and room namespaces.
    Clients(Vec<Client>),
}

/// Who made a call, once its token was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// Open access or the shared token: no per-client limits.
    Anyone,
    /// The configured client at this index.
    Client(usize),
}

impl Access {
    /// Builds the access rules: clients win over a shared token. Two clients with the same
    /// token are refused, since a call could not be told apart.
    pub fn new(shared: Option<PeerToken>, clients: Vec<Client>) -> Result<Access, ClientsError> {
        if clients.is_empty() {
            return Ok(shared.map_or(Access::Open, Access::Shared));
        }
        for (index, client) in clients.iter().enumerate() {
            let Some(token) = &client.token else { continue };
            if let Some(other) = clients[..index].iter().find(|other| {
                other
                    .token
                    .as_ref()
                    .is_some_and(|t| t.matches(token.as_str()))
            }) {
                return Err(ClientsError::SameToken {
                    first: other.name.clone(),
                    second: client.name.clone(),
                });
            }
        }
        Ok(Access::Clients(clients))
    }

    /// True when no token is needed.
    pub fn is_open(&self) -> bool {
        matches!(self, Access::Open)
    }

    /// Who presents `offered`, if anyone. Every client's token is compared (in constant
    /// time each), so the time taken does not tell which one came close.
    pub fn identify(&self, offered: &str) -> Option<Caller> {
        match self {
            Access::Open => Some(Caller::Anyone),
            Access::Shared(token) => token.matches(offered).then_some(Caller::Anyone),
            Access::Clients(clients) => {
                let mut found = None;
                for (index, client) in clients.iter().enumerate() {
                    if client.token.as_ref().is_some_and(|t| t.matches(offered)) {
                        found = Some(Caller::Client(index));
                    }
                }
                found
            }
        }
    }

    fn client(&self, caller: Caller) -> Option<&Client> {
        match (self, caller) {
            (Access::Clients(clients), Caller::Client(index)) => clients.get(index),
            _ => None,
        }
    }

    /// The client's name, for file ownership and messages; `None` for [`Caller::Anyone`].
    pub fn owner(&self, caller: Caller) -> Option<&str> {
        self.client(caller).map(|client| client.name.as_str())
    }

    /// True when `caller` may send as `sender`.
    pub fn may_send_as(&self, caller: Caller, sender: &str) -> bool {
        match (self, caller) {
            (Access::Clients(_), Caller::Anyone) => false,
            (Access::Clients(_), Caller::Client(_)) => self
                .client(caller)
                .is_some_and(|client| client.senders.contains(sender)),
            _ => true,
        }
    }

    /// The conversation id of `caller`'s room `room`: `<client>:<room>` with clients, the
    /// room itself otherwise.
    pub fn room_key(&self, caller: Caller, room: &str) -> String {
        match self.owner(caller) {
            Some(name) => format!("{name}{ROOM_SEPARATOR}{room}"),
            None => room.to_owned(),
        }
    }

    /// The room name a client knows for conversation `key` (the inverse of
    /// [`Access::room_key`]), written into replies' `metadata.room_id`.
    pub fn client_room<'k>(&self, key: &'k str) -> &'k str {
        match self {
            Access::Clients(_) => key.split_once(ROOM_SEPARATOR).map_or(key, |(_, room)| room),
            _ => key,
        }
    }

    /// The error a call gets for a sender it may not use. It names the sender and the
    /// client, never a token.
    pub fn denied_sender(&self, caller: Caller, sender: &str) -> tonic::Status {
        let client = self.owner(caller).unwrap_or("?");
        tonic::Status::permission_denied(format!(
            "client {client:?} may not send as sender_id {sender:?}; list it under this client in {CLIENTS_KEY} to allow it"
        ))
    }

    /// Configured clients whose token variable is unset (they cannot connect).
    pub fn clients_without_token(&self) -> Vec<&Client> {
        match self {
            Access::Clients(clients) => clients.iter().filter(|c| c.token.is_none()).collect(),
            _ => Vec::new(),
        }
    }

    /// Every configured token, for scrubbing text that must never show one.
    pub(crate) fn tokens(&self) -> Vec<&PeerToken> {
        match self {
            Access::Open => Vec::new(),
            Access::Shared(token) => vec![token],
            Access::Clients(clients) => clients.iter().filter_map(|c| c.token.as_ref()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(name: &str, token: &str, senders: &[&str]) -> Client {
        Client {
            name: name.into(),
            token_env: format!("{}_TOKEN", name.to_uppercase()),
            token: PeerToken::new(token),
            senders: senders.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn the_clients_line_is_parsed_into_names_variables_and_senders() {
        let clients = parse_clients(
            " phone: PI_RC_PHONE: alice, alice-tablet ;arm:PI_RC_ARM:arm-1; ",
            "robot",
        )
        .expect("valid");
        assert_eq!(
            clients,
            [
                ClientSpec {
                    name: "phone".into(),
                    token_env: "PI_RC_PHONE".into(),
                    senders: vec!["alice".into(), "alice-tablet".into()],
                },
                ClientSpec {
                    name: "arm".into(),
                    token_env: "PI_RC_ARM".into(),
                    senders: vec!["arm-1".into()],
                },
            ]
        );
        assert_eq!(parse_clients("  ", "robot"), Ok(Vec::new()));
    }

    #[test]
    fn every_bad_clients_line_is_refused_with_the_key_named() {
        let cases = [
            ("phone: PI_RC_PHONE", "is not \"<client>"),
            ("ph:one: PI_RC_PHONE: alice", "is not \"<client>"),
            ("ph one: PI_RC_PHONE: alice", "client name \"ph one\""),
            (
                "phone: PI_RC_PHONE: alice; phone: PI_RC_2: bob",
                "listed twice",
            ),
            ("phone: 1ABC: alice", "not an environment variable name"),
            ("phone: PI_RC: alice; arm: PI_RC: bob", "both read $PI_RC"),
            ("phone: PI_RC: alice,", "an empty sender id"),
            ("phone: PI_RC: robot", "the bot's own sender id"),
            (
                "phone: PI_RC: alice; arm: PI_RC_ARM: alice",
                "listed under both",
            ),
        ];
        for (text, expected) in cases {
            let error = parse_clients(text, "robot").expect_err(text).to_string();
            assert!(error.starts_with(CLIENTS_KEY), "{text}: {error}");
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn a_caller_is_told_apart_by_its_token_and_held_to_its_senders() {
        let access = Access::new(
            PeerToken::new("shared"),
            vec![
                client("a", "token-a", &["alice"]),
                client("b", "token-b", &["bob"]),
            ],
        )
        .expect("valid");
        assert_eq!(access.identify("token-a"), Some(Caller::Client(0)));
        assert_eq!(access.identify("token-b"), Some(Caller::Client(1)));
        // The shared token opens nothing once clients are configured.
        assert_eq!(access.identify("shared"), None);
        assert_eq!(access.identify(""), None);
        let a = Caller::Client(0);
        assert!(access.may_send_as(a, "alice"));
        assert!(!access.may_send_as(a, "bob"));
        assert!(!access.may_send_as(Caller::Anyone, "bob"));
        assert_eq!(access.room_key(a, "lab"), "a:lab");
        assert_eq!(access.client_room("a:lab:1"), "lab:1");
        let denied = access.denied_sender(a, "bob");
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        assert!(!denied.message().contains("token-a"));
    }

    #[test]
    fn without_clients_the_shared_token_or_nothing_decides() {
        let shared = Access::new(PeerToken::new("shared"), Vec::new()).expect("valid");
        assert_eq!(shared.identify("shared"), Some(Caller::Anyone));
        assert_eq!(shared.identify("other"), None);
        assert!(shared.may_send_as(Caller::Anyone, "anyone"));
        assert_eq!(shared.room_key(Caller::Anyone, "a:b"), "a:b");
        assert_eq!(shared.client_room("a:b"), "a:b");
        let open = Access::new(None, Vec::new()).expect("valid");
        assert!(open.is_open());
        assert_eq!(open.identify(""), Some(Caller::Anyone));
    }

    #[test]
    fn two_clients_with_one_token_are_refused() {
        let error = Access::new(
            None,
            vec![
                client("a", "same", &["alice"]),
                client("b", "same", &["bob"]),
            ],
        )
        .expect_err("refused");
        assert!(error.to_string().contains("the same token"), "{error}");
        assert!(!error.to_string().contains("same\""), "{error}");
    }
}
