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

#[cfg(test)]
mod tests {
    use super::*;
    use transports::fake::FakeTransport;

    fn request(id: &str) -> TransportRequest {
        TransportRequest {
            id: id.into(),
            token_env: None,
            required: false,
            settings_json: "{}".into(),
        }
    }

    #[test]
    fn nothing_configured_means_the_terminal_is_the_chat() {
        let terminal: Arc<dyn Transport> = Arc::new(FakeTransport::default());
        let (built, notes) = build(&[], Some(terminal));
        assert_eq!(built.len(), 1);
        assert!(notes.is_empty());
        let (built, notes) = build(&[], None);
        assert!(built.is_empty() && notes.is_empty());
    }

    #[test]
    fn a_configured_transport_this_build_lacks_is_named_not_skipped_silently() {
        let terminal: Arc<dyn Transport> = Arc::new(FakeTransport::default());
        let (built, notes) = build(&[request("telegram"), request("terminal")], Some(terminal));
        assert_eq!(built.len(), 1, "only the terminal is built");
        assert_eq!(
            notes,
            vec![
                "telegram: this build of host-shim has no telegram transport yet (available: terminal); it was not started"
                    .to_string()
            ]
        );
        let (_, notes) = build(&[request("terminal")], None);
        assert_eq!(
            notes,
            vec!["terminal: there is no terminal in this mode; it was not started".to_string()]
        );
    }
}
