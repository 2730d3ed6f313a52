//! What a cluster node reports at `/readyz`: whether its NATS connection is up (everything a
//! node does goes through it), and for an ingress where each of its bots stands.

use async_nats::Client;
use async_nats::connection::State;

use crate::ops::health::Check;

/// The node's NATS connection: ready only while connected. The client reconnects by
/// itself; until it has, no message is routed, stored or acked by this node.
pub fn nats(client: &Client) -> Check {
    match client.connection_state() {
        State::Connected => Check::ready("nats", "connected"),
        State::Disconnected => Check::not_ready(
            "nats",
            "disconnected; reconnecting (is nats-server running and reachable?)",
        ),
        State::Pending => Check::not_ready("nats", "connecting"),
    }
}
