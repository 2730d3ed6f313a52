//! Scenarios: pairing and unauthenticated input (I1, I6, I7, I33, I38).

use guest::model::Level;

use crate::support::{FakeHost, chatter, default_bridge, dm};

const NEW_PROMPT: &str = "This chat is not paired with a pi session yet.\nIn the local pi terminal, run /connect to see the 6-digit code, then send it here.";
const CODE_NOTICE: &str =
    "Messenger pairing code: 482 913 (valid 5 min). Type it in the chat to pair.";

#[test]
fn first_message_gets_the_chat_prompt_and_the_terminal_gets_the_code() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    host.script_code("482913");

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hello"));

    assert_eq!(host.texts_to("tg", "c1"), vec![NEW_PROMPT]);
    assert_eq!(host.notes, vec![(Level::Info, CODE_NOTICE.to_string())]);
    assert!(
        host.prompts.is_empty(),
        "an unpaired message reached the agent"
    );
}

#[test]
fn wrong_code_counts_attempts_and_chatter_never_burns_one() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    host.script_code("482913");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hello"));
    host.clear_records();

    let script = [
        (
            "111111",
            "That code did not match. 2 attempt(s) left. Check the local pi terminal.",
        ),
        (
            "meeting at 3pm",
            "Waiting for the pairing code. Check the local pi terminal.",
        ),
        (
            "42",
            "Waiting for the pairing code. Check the local pi terminal.",
        ),
        (
            "222 222",
            "That code did not match. 1 attempt(s) left. Check the local pi terminal.",
        ),
    ];
    for (text, _) in script {
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", text));
    }
    let expected: Vec<&str> = script.iter().map(|(_, reply)| *reply).collect();
    assert_eq!(host.texts_to("tg", "c1"), expected);
    // Neither mismatch nor awaiting shows the code again (no flood at the terminal).
    assert!(host.notes.is_empty(), "{:?}", host.notes);

    // The third wrong attempt locks the code and a new one goes to the terminal only.
    host.script_code("777000");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "333333"));
    assert_eq!(
        host.texts_to("tg", "c1").last().map(String::as_str),
        Some(
            "Too many wrong attempts. A new code is shown in the local pi terminal, or run /connect there again."
        )
    );
    assert_eq!(
        host.note_texts(),
        vec!["Messenger pairing code: 777 000 (valid 5 min). Type it in the chat to pair."]
    );
}

#[test]
fn right_code_trusts_the_identity_and_says_so() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    host.script_code("482913");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hello"));
    host.clear_records();

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "482-913"));

    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
            "Paired as tg:u1.\nSend a message to steer this pi session, or send /help for commands."
        ]
    );
    assert_eq!(host.notes, vec![(Level::Info, "Paired tg:u1".to_string())]);
    let audit = host.logs_named("paired remote identity");
    assert_eq!(audit.len(), 1);
    assert_eq!(
        audit[0].fields,
        vec![
            ("transport".to_string(), "tg".to_string()),
            ("identity".to_string(), "tg:u1".to_string())
        ]
    );
    assert!(
        host.saved.last().is_some_and(|doc| doc.contains("tg:u1")),
        "trust was not saved"
    );

    // Trusted now: the next message is a prompt.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "run the tests"));
    assert_eq!(host.prompts.len(), 1);
}

#[test]
fn the_code_never_appears_in_a_send_or_a_log() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    host.script_code("482913");
    for text in ["hello", "111111", "what?", "482913", "/status"] {
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", text));
    }
    // A second chat pairs too, with its code locked out and replaced once.
    host.script_code("605148");
    bridge.on_envelope(&mut host, dm("dc", "c2", "u2", "hi"));
    host.script_code("935726");
    for text in ["000000", "000001", "000002"] {
        bridge.on_envelope(&mut host, dm("dc", "c2", "u2", text));
    }
    assert!(
        host.note_texts().iter().any(|n| n.contains("935 726")),
        "the relocked code was not shown: {:?}",
        host.notes
    );
    for code in [
        "482913", "482 913", "605148", "605 148", "935726", "935 726",
    ] {
        for text in host.all_send_texts() {
            assert!(!text.contains(code), "code {code} sent to a chat: {text:?}");
        }
        for value in host.all_log_strings() {
            assert!(!value.contains(code), "code {code} logged: {value:?}");
        }
    }
}

#[test]
fn unauthenticated_channel_chatter_gets_nothing() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);

    bridge.on_envelope(&mut host, chatter("dc", "general", "u9", "meeting at 3pm"));
    bridge.on_envelope(&mut host, chatter("dc", "general", "u9", "123456"));

    assert!(
        host.sent.is_empty() && host.failed.is_empty(),
        "{:?}",
        host.sent
    );
    assert!(
        host.notes.is_empty(),
        "a code was made for chatter: {:?}",
        host.notes
    );
    assert!(host.prompts.is_empty());
    assert!(host.saved.is_empty(), "chatter changed the state");
    assert_eq!(host.logs_named("ignored message").len(), 2);
}

#[test]
fn an_addressed_channel_message_starts_pairing_without_the_code() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    host.script_code("482913");

    bridge.on_envelope(&mut host, chatter("dc", "general", "u9", "/status"));

    assert_eq!(host.texts_to("dc", "general"), vec![NEW_PROMPT]);
    assert!(host.prompts.is_empty());
}

/// After a restart
/// (docs/decisions.md#decision-10-telegrams-backlog-is-answered-but-not-a-stale-one-for-strangers)
/// the platform hands over what arrived meanwhile. A stranger's message older than the pairing
/// window gets no code and no reply; a fresh one does, and `/connect explain` says which was which.
#[test]
fn a_strangers_backlog_older_than_the_pairing_window_mints_no_code() {
    let mut host = FakeHost::new();
    host.now = 1_700_000_000_000;
    let mut bridge = default_bridge(&mut host);
    host.script_code("482913");

    let mut old = dm("tg", "c1", "u1", "are you there?");
    old.timestamp_ms = host.now - 6 * 60_000;
    bridge.on_envelope(&mut host, old.clone());
    assert!(
        host.all_send_texts().is_empty(),
        "{:?}",
        host.all_send_texts()
    );
    assert!(host.notes.is_empty(), "no code for it: {:?}", host.notes);

    // `explain` judges a captured payload as if it arrived now: it would get a code.
    let preview = bridge.preview_envelope(&mut host, &old);
    assert!(preview.contains("a new code would be shown"), "{preview}");

    let mut fresh = dm("tg", "c1", "u1", "hello again");
    fresh.timestamp_ms = host.now - 30_000;
    bridge.on_envelope(&mut host, fresh);
    assert_eq!(host.texts_to("tg", "c1"), vec![NEW_PROMPT]);
    assert_eq!(host.notes, vec![(Level::Info, CODE_NOTICE.to_string())]);

    let explained = bridge.on_local_command(&mut host, "explain");
    assert!(
        explained.text.contains("older than the pairing window"),
        "{}",
        explained.text
    );
}
