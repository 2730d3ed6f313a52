//! The state document loader (`guest::core::state::parse_session_state`).
//!
//! Properties: no panic on any document; and what it loads is stable: written back with
//! `serialize_session_state` and read again, it is the same state, with no warning (a
//! state that does not survive its own round trip loses pairings or pauses on restart).

use guest::core::state::{parse_session_state, serialize_session_state};

/// `data` is the document under `sessions.<id>`.
pub fn state(data: &[u8]) {
    let document = String::from_utf8_lossy(data);
    let (state, warnings) = parse_session_state(&document, "fuzz");
    for warning in &warnings {
        assert!(
            warning.starts_with("sessions.fuzz"),
            "a warning that does not name the session: {warning:?}"
        );
    }
    let written = serialize_session_state(&state);
    let (again, warnings) = parse_session_state(&written, "fuzz");
    assert!(
        warnings.is_empty(),
        "its own document warns: {warnings:?} in {written}"
    );
    assert_eq!(again, state, "the state changed in a round trip: {written}");
}
