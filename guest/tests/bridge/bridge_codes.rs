//! Scenarios: pairing codes at rest and on the terminal (docs/security.md#pairing).
//!
//! The state document holds a salted hash, never the code; `/connect` shows the live codes;
//! after a restart each still-live code is replaced by a fresh one shown locally, and the
//! chat hears of it only when it writes again.

use guest::bridge::Bridge;
use guest::model::Level;
use proptest::prelude::*;

use crate::support::{FakeHost, default_bridge, dm, platforms, source};

fn saved_json(host: &FakeHost) -> serde_json::Value {
    let doc = host.saved.last().cloned().unwrap_or_default();
    serde_json::from_str(&doc).unwrap_or_else(|e| panic!("saved state is not JSON ({e}): {doc}"))
}

/// Every string (keys and values) in a JSON tree.
fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                strings(v, out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_state_document_holds_a_salted_hash_not_the_code() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    host.script_code("482913");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hello"));

    let doc = saved_json(&host);
    let entry = &doc["pending"]["tg:c1"];
    assert!(entry.get("code").is_none(), "plain code stored: {entry}");
    assert_eq!(entry["digits"], 6);
    assert_eq!(entry["salt"].as_str().map(str::len), Some(32));
    assert_eq!(entry["sha256"].as_str().map(str::len), Some(64));
    let mut all = Vec::new();
    strings(&doc, &mut all);
    assert!(
        all.iter()
            .all(|s| !s.contains("482913") && !s.contains("482 913")),
        "{doc}"
    );

    // The hash still pairs the person who types the code.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "482 913"));
    assert!(host.note_texts().contains(&"Paired tg:u1".to_string()));
}

#[test]
fn every_code_gets_its_own_salt() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    host.script_code("111111");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hello"));
    host.script_code("111111");
    bridge.on_envelope(&mut host, dm("tg", "c2", "u2", "hello"));
    let doc = saved_json(&host);
    assert_ne!(
        doc["pending"]["tg:c1"]["salt"],
        doc["pending"]["tg:c2"]["salt"]
    );
    assert_ne!(
        doc["pending"]["tg:c1"]["sha256"],
        doc["pending"]["tg:c2"]["sha256"]
    );
}

#[test]
fn an_old_document_with_a_plain_code_loads_with_a_warning_and_no_code() {
    let mut host = FakeHost::new();
    host.stored = Some(
        r#"{"trusted":{"tg:u9":1},"pending":{"tg:c1":{"code":"482913","expiresAt":9999999999,"attempts":0}}}"#
            .into(),
    );
    let mut bridge = Bridge::new();
    let configuration = bridge.configure(&mut host, &[source("{}")], &platforms());
    assert!(
        configuration.notes.iter().any(|n| n.level == Level::Warning
            && n.text
                == "sessions.session-1.pending.tg:c1: a pairing code stored in plain text by an \
                    older version was dropped; that chat gets a new code when it writes again"),
        "{:?}",
        configuration.notes
    );
    bridge.start(&mut host, &["tg".to_string()]);
    // The plain code leaves the disk as soon as the session runs.
    assert!(
        host.saved.last().is_some_and(|doc| !doc.contains("482913")),
        "{:?}",
        host.saved
    );
    host.clear_records();
    // The old code no longer pairs; the chat is asked to pair afresh.
    host.script_code("555555");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "482913"));
    assert!(!host.note_texts().contains(&"Paired tg:u1".to_string()));
    assert_eq!(
        host.note_texts(),
        vec!["Messenger pairing code: 555 555 (valid 5 min). Type it in the chat to pair."]
    );
    // Trust from the old document survived.
    bridge.on_envelope(&mut host, dm("tg", "c9", "u9", "hello"));
    assert_eq!(host.prompts.len(), 1);
}

#[test]
fn bare_connect_shows_the_live_codes_not_only_a_count() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    host.script_code("482913");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hello"));
    host.script_code("605148");
    bridge.on_envelope(&mut host, dm("dc", "c2", "u2", "hello"));
    host.now += 60_000;

    for args in ["", "status"] {
        let status = bridge.on_local_command(&mut host, args);
        let lines: Vec<&str> = status.text.lines().collect();
        assert!(lines.contains(&"- pending codes: 2"), "{lines:?}");
        assert!(
            lines.contains(&"  - tg:c1: 482 913 (expires in 4m)"),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"  - dc:c2: 605 148 (expires in 4m)"),
            "{lines:?}"
        );
    }
    let pair = bridge.on_local_command(&mut host, "pair");
    assert_eq!(
        pair.text,
        "Pending pairing codes:\n- dc:c2: 605 148 (expires in 4m)\n- tg:c1: 482 913 (expires in 4m)"
    );
    // Paired: the code is gone from the terminal lists too.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "482913"));
    let status = bridge.on_local_command(&mut host, "");
    assert!(!status.text.contains("482 913"), "{}", status.text);
}

#[test]
fn connect_help_prints_help_not_status() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    let help = bridge.on_local_command(&mut host, "help");
    assert!(
        help.text
            .starts_with("bot-connect local commands (/connect <command>):"),
        "{}",
        help.text
    );
    assert!(!help.text.contains("- paired chats"), "{}", help.text);
}

/// A bridge on `tg` with a live code for `tg:c1`, then a fresh bridge started from its saved
/// document (a restart within the code's lifetime).
fn restarted_with_a_live_code(host: &mut FakeHost) -> Bridge {
    let mut before = default_bridge(host);
    host.script_code("482913");
    before.on_envelope(host, dm("tg", "c1", "u1", "hello"));
    host.now += 60_000;
    let mut after = Bridge::new();
    after.configure(host, &[source("{}")], &platforms());
    host.clear_records();
    host.script_code("777123");
    after.start(host, &["tg".to_string()]);
    after
}

#[test]
fn after_a_restart_a_still_live_code_is_replaced_and_shown_again_locally() {
    let mut host = FakeHost::new();
    let mut bridge = restarted_with_a_live_code(&mut host);

    assert_eq!(
        host.notes,
        vec![(
            Level::Info,
            "Messenger pairing code for tg:c1: 777 123 (valid 5 min). The session restarted, so \
             the code shown before no longer works."
                .to_string()
        )]
    );
    // The chat is not messaged at start; the new hash is saved.
    assert!(host.sent.is_empty(), "{:?}", host.sent);
    assert_eq!(host.saved.len(), 1);
    let status = bridge.on_local_command(&mut host, "");
    assert!(
        status.text.contains("  - tg:c1: 777 123 (expires in 5m)"),
        "{}",
        status.text
    );

    // The old code, typed after the restart: told the code changed, no attempt counted.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "482913"));
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
            "The pi session restarted, so the pairing code changed. The new code is shown in the \
             local pi terminal."
        ]
    );
    assert_eq!(saved_json(&host)["pending"]["tg:c1"]["attempts"], 0);
    // The new code pairs.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "777123"));
    assert!(host.note_texts().contains(&"Paired tg:u1".to_string()));
}

#[test]
fn the_new_code_typed_right_after_a_restart_pairs_at_once() {
    let mut host = FakeHost::new();
    let mut bridge = restarted_with_a_live_code(&mut host);
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "777 123"));
    assert!(host.note_texts().contains(&"Paired tg:u1".to_string()));
}

#[test]
fn a_session_that_starts_no_transport_reissues_nothing_and_writes_nothing() {
    let mut host = FakeHost::new();
    let mut before = default_bridge(&mut host);
    before.on_envelope(&mut host, dm("tg", "c1", "u1", "hello"));
    let mut doctor = Bridge::new();
    doctor.configure(&mut host, &[source("{}")], &platforms());
    host.clear_records();
    doctor.start(&mut host, &[]);
    doctor.on_local_command(&mut host, "doctor");
    doctor.shutdown(&mut host);
    assert!(host.saved.is_empty(), "doctor wrote the state");
    assert!(host.notes.is_empty(), "{:?}", host.notes);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the code and whatever the person types, no saved document ever holds the
    /// code as a value or key, and no saved entry has a `code` field.
    #[test]
    fn no_saved_document_holds_a_code(
        code in "[0-9]{6}",
        texts in prop::collection::vec("[0-9 a-z-]{0,10}", 1..8),
    ) {
        let mut host = FakeHost::new();
        let mut bridge = default_bridge(&mut host);
        host.script_code(&code);
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hello"));
        for text in &texts {
            bridge.on_envelope(&mut host, dm("tg", "c1", "u1", text));
        }
        bridge.shutdown(&mut host);
        for doc in &host.saved {
            let value: serde_json::Value = serde_json::from_str(doc).expect("saved JSON");
            let mut all = Vec::new();
            strings(&value, &mut all);
            prop_assert!(all.iter().all(|s| *s != code && s != "code"), "{doc}");
        }
    }
}

#[test]
fn a_session_that_starts_no_transport_leaves_even_a_damaged_document_alone() {
    let mut host = FakeHost::new();
    host.stored = Some(
        r#"{"pending":{"tg:c1":{"code":"482913","expiresAt":9999999999,"attempts":0}}}"#.into(),
    );
    let mut doctor = Bridge::new();
    doctor.configure(&mut host, &[source("{}")], &platforms());
    doctor.start(&mut host, &[]);
    doctor.on_local_command(&mut host, "doctor");
    doctor.shutdown(&mut host);
    assert!(
        host.saved.is_empty(),
        "doctor rewrote the state: {:?}",
        host.saved
    );
}
