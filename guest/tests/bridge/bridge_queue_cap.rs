//! Scenarios: a bounded queue per session and a state written only when it changed
//! (docs/state.md). Prompts waiting for a busy agent are recorded in the state document
//! every save writes; without a bound, a chat that kept sending made every save of the
//! session slower, and a longer queue than the reader keeps was cut at a restart without a
//! word. Now the prompt over `bridge.maxQueuedPrompts` is refused with a reply and never
//! reaches the agent.

use crate::support::{FakeHost, dm, pair, started};

#[test]
fn a_prompt_over_the_cap_is_refused_with_a_reply_and_never_forwarded() {
    let mut host = FakeHost::new();
    let mut bridge = started(&mut host, r#"{"bridge":{"maxQueuedPrompts":2}}"#, &["tg"]).0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    host.idle = false;
    for text in ["one", "two", "three"] {
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", text));
    }
    let forwarded: Vec<&str> = host.prompts.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(forwarded, ["one", "two"], "the third reached the agent");
    assert_eq!(
        host.texts_to("tg", "c1").last().map(String::as_str),
        Some(
            "Not queued: 2 prompts already wait for the agent, the most this session keeps. \
             Nothing was sent to pi; send it again once some have run (/status shows the \
             agent's state)."
        )
    );
    let explain = bridge.on_local_command(&mut host, "explain");
    assert!(
        explain
            .text
            .contains("not queued: 2 prompts already waited (bridge.maxQueuedPrompts)"),
        "{}",
        explain.text
    );
}

#[test]
fn the_default_cap_is_one_hundred() {
    let mut host = FakeHost::new();
    // Without the per-minute prompt limit, which would stop the chat first.
    let mut bridge = started(
        &mut host,
        r#"{"bridge":{"rateLimit":{"promptsPerMinute":0}}}"#,
        &["tg"],
    )
    .0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    host.idle = false;
    for i in 0..101 {
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("prompt {i}")));
    }
    assert_eq!(host.prompts.len(), 100);
    assert!(
        host.texts_to("tg", "c1")
            .last()
            .is_some_and(|text| text.starts_with("Not queued: 100 prompts")),
        "{:?}",
        host.texts_to("tg", "c1").last()
    );
}

#[test]
fn the_cap_must_be_between_one_and_what_a_restart_keeps() {
    for (value, accepted) in [("0", false), ("1", true), ("10000", true), ("10001", false)] {
        let mut host = FakeHost::new();
        let configuration = started(
            &mut host,
            &format!(r#"{{"bridge":{{"maxQueuedPrompts":{value}}}}}"#),
            &["tg"],
        )
        .1;
        let refused = configuration.notes.iter().any(|note| {
            note.text
                .contains("bridge.maxQueuedPrompts: expected an integer between 1 and 10000")
        });
        assert_eq!(!refused, accepted, "{value}: {:?}", configuration.notes);
    }
}

#[test]
fn a_message_that_changes_nothing_writes_nothing() {
    let mut host = FakeHost::new();
    let mut bridge = started(&mut host, "{}", &["tg"]).0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/status"));
    host.saved.clear();
    // A paired chat already remembered asks for its status again: nothing in the state
    // changes, so nothing is written.
    for _ in 0..5 {
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/status"));
    }
    assert!(
        host.saved.is_empty(),
        "{} writes for nothing",
        host.saved.len()
    );
    // A change is written.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/pause"));
    assert_eq!(host.saved.len(), 1);
}
