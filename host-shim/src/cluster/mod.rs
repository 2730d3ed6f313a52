//! Past one machine (issue 16 §2, docs/scaling.md): the building blocks of running
//! bot-connect on NATS JetStream. Ingress nodes hold the platform connections under a
//! cluster-wide [`bot_lock`], publish each session's envelopes to its subject
//! ([`inbound::InboundPublisher`]) and serve the sessions' sends
//! ([`outbound::OutboundServer`]); session nodes consume those subjects
//! ([`inbound::SessionConsumer`]), send through [`outbound::RemoteTransport`]s and keep
//! session state in a KV bucket with compare-and-set ([`state_store`]).
//!
//! Every name on the wire comes from [`subjects`]: never a token, a path or a chat id.

pub mod bot_lock;
pub mod inbound;
pub mod outbound;
pub mod state_store;
pub mod subjects;

/// The NATS client this module is built on, so callers (and tests) use the same version.
pub use async_nats;

use crate::bindings::types::Level;
use crate::logging::{LogLine, LogSink};

/// The "session" cluster log lines are filed under: they belong to a node, not a session.
pub const LOG_SCOPE: &str = "cluster";

/// Logs a warning about something NATS handed over or refused. Fields are ids, subjects
/// and error texts, never a payload (a payload holds message text).
pub(crate) fn warn(log: &dyn LogSink, event: &str, fields: &[(&str, String)]) {
    log.write(
        LOG_SCOPE,
        LogLine {
            level: Level::Warning,
            event: event.to_owned(),
            fields: fields
                .iter()
                .map(|(key, value)| ((*key).to_owned(), value.clone()))
                .collect(),
        },
    );
}
