//! Scenarios: a bounded queue per session and a state written only when it changed
//! (docs/state.md). Prompts waiting for a busy agent used to be recorded in the state
//! document every save writes; without a bound, a chat that kept sending made every save of
//! the session slower, and a longer queue than the reader keeps was cut at a restart
//! without a word. Now the prompt over `bridge.maxQueuedPrompts` is refused with a reply and
//! never reaches the agent, and the queue is stored as entries of its own: a save writes
//! only the entries that changed.

use guest::bridge::Bridge;
use guest::model::{AgentEvent, TurnOrigin};

use crate::support::{FakeHost, dm, pair, platforms, source, started};

#[test]
fn a_prompt_queued_behind_many_writes_one_entry_and_no_document() {
    let mut host = FakeHost::new();
    let mut bridge = started(
        &mut host,
        r#"{"bridge":{"maxQueuedPrompts":10000,"rateLimit":{"promptsPerMinute":0}}}"#,
        &["tg"],
    )
    .0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "first"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    for i in 0..500 {
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("prompt {i}")));
    }
    assert_eq!(host.stored_queue.len(), 500);
    host.clear_records();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "one more"));
    assert_eq!(host.changes.len(), 1, "{:?}", host.changes);
    let change = &host.changes[0];
    assert_eq!(change.document, None, "the document did not change");
    assert_eq!(
        (change.dequeued, change.enqueued.len()),
        (0, 1),
        "only the new entry is written"
    );
    // The next remote turn takes the oldest: one entry leaves, nothing else is written.
    host.clear_records();
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    assert!(
        host.changes.iter().all(|c| c.enqueued.is_empty()),
        "{:?}",
        host.changes
    );
    assert_eq!(host.changes.iter().map(|c| c.dequeued).sum::<u32>(), 1);
    assert_eq!(host.stored_queue.len(), 500);
}

#[test]
fn a_queue_an_older_version_kept_in_the_document_is_adopted_once() {
    let mut host = FakeHost::new();
    host.stored = Some(
        concat!(
            r#"{"updatedAt":1,"trusted":{},"pending":{},"paused":[],"following":[],"#,
            r#""conversations":[{"transport":"tg","conversationId":"c1"}],"#,
            r#""queued":[{"transport":"tg","conversationId":"c1"},"#,
            r#"{"transport":"tg","conversationId":"c1"}]}"#
        )
        .to_owned(),
    );
    host.idle = true;
    let mut bridge = Bridge::new();
    bridge.configure(&mut host, &[source("{}")], &platforms());
    bridge.start(&mut host, &["tg".to_string()]);
    // The restarted session reports them (the agent is idle: they were not run) ...
    assert!(
        host.texts_to("tg", "c1")
            .iter()
            .any(|t| t.contains("2 queued message(s) from this chat were not run")),
        "{:?}",
        host.texts_to("tg", "c1")
    );
    // ... and the document is rewritten without them, so no later start reports them again.
    let stored = host.stored.clone().expect("rewritten");
    assert!(!stored.contains("queued"), "{stored}");
    assert!(host.stored_queue.is_empty(), "{:?}", host.stored_queue);
    host.clear_records();
    let mut again = Bridge::new();
    again.configure(&mut host, &[source("{}")], &platforms());
    again.start(&mut host, &["tg".to_string()]);
    assert!(
        !host
            .texts_to("tg", "c1")
            .iter()
            .any(|t| t.contains("queued message")),
        "{:?}",
        host.texts_to("tg", "c1")
    );
}

#[test]
fn entries_the_store_holds_survive_a_restart_and_are_reported() {
    let mut host = FakeHost::new();
    let mut bridge = started(&mut host, "{}", &["tg"]).0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "first"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "second"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "third"));
    assert_eq!(host.stored_queue.len(), 2);
    // The session dies without a shutdown; the next one finds the agent idle.
    drop(bridge);
    host.idle = true;
    host.clear_records();
    let mut again = Bridge::new();
    again.configure(&mut host, &[source("{}")], &platforms());
    again.start(&mut host, &["tg".to_string()]);
    assert!(
        host.texts_to("tg", "c1")
            .iter()
            .any(|t| t.contains("2 queued message(s) from this chat were not run")),
        "{:?}",
        host.texts_to("tg", "c1")
    );
    assert!(host.stored_queue.is_empty());
}

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

#[test]
fn queue_lists_what_waits_by_count_and_explains_busy_delivery() {
    let mut host = FakeHost::new();
    let mut bridge = started(
        &mut host,
        r#"{"bridge":{"maxQueuedPrompts":5,"rateLimit":{"promptsPerMinute":0}}}"#,
        &["tg"],
    )
    .0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    pair(&mut bridge, &mut host, "tg", "c2", "u2");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/queue"));
    assert_eq!(
        host.texts_to("tg", "c1").last().map(String::as_str),
        Some(
            "No prompt waits for the agent.\nNo turn is running now.\nA prompt sent while the \
             agent is busy is a follow-up: it waits here for a turn of its own \
             (bridge.busyDelivery: followUp; steer hands it to the running turn instead).\nAt \
             most 5 wait (bridge.maxQueuedPrompts); one more is refused with a reply, never \
             dropped."
        )
    );
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "first"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "second"));
    bridge.on_envelope(&mut host, dm("tg", "c2", "u2", "third"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "fourth"));
    let prompts = host.prompts.len();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/queue"));
    assert_eq!(host.prompts.len(), prompts, "/queue is not a prompt");
    let reply = host
        .texts_to("tg", "c1")
        .last()
        .cloned()
        .unwrap_or_default();
    assert!(
        reply.starts_with(
            "3 prompt(s) wait for the agent, oldest first: 2 from this chat, 1 from other chats."
        ),
        "{reply}"
    );
    assert!(reply.contains("A turn is running now."), "{reply}");
    // The other chat's prompts are counted, never shown.
    assert!(!reply.contains("c2") && !reply.contains("third"), "{reply}");
}
