//! Builds the transports a configuration asks for.

use std::sync::Arc;

use transports::Transport;

use crate::runtime::bindings::exports::pi::bot_connect::session::TransportRequest;

/// Transports this build can create from a configuration file; the others are
/// reported by name so a configured but unavailable transport is never silent.
pub const BUILT_IN: &[&str] = &["terminal"];

/// Builds `requests`, given the terminal the standalone host uses. Returns the
/// transports and one note per request that could not be honoured.
pub fn build(
    requests: &[TransportRequest],
    terminal: Option<Arc<dyn Transport>>,
) -> (Vec<Arc<dyn Transport>>, Vec<String>) {
    let mut built: Vec<Arc<dyn Transport>> = Vec::new();
    let mut notes = Vec::new();
    for request in requests {
        match (request.id.as_str(), &terminal) {
            ("terminal", Some(t)) => built.push(t.clone()),
            ("terminal", None) => {
                notes.push("terminal: there is no terminal in this mode; it was not started".into())
            }
            (id, _) => notes.push(format!(
                "{id}: this build of host-shim has no {id} transport yet (available: {}); it was not started",
                BUILT_IN.join(", ")
            )),
        }
    }
    // With nothing configured, the terminal is the chat (the demo).
    if requests.is_empty()
        && let Some(t) = terminal
    {
        built.push(t);
    }
    (built, notes)
}
