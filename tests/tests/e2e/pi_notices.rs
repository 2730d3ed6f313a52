//! pi's notices during a chat-started turn, headless, end to end
//! (docs/pi.md#questions-pi-asks, "Notices"): an extension's `notify`, `setStatus` and
//! `setWidget` arrive as pi's `extension_ui_request` lines and show as one `ℹ` line on the
//! turn's card, the latest replacing the last, never as messages of their own.
//!
//! Against a fake pi (a shell script speaking pi's RPC lines) that keeps its run open
//! until the chat aborts it, so the card is read while the turn still runs. Every wait is
//! bounded (`WAIT`); none sleeps. (A first version of this test waited on a card edit that
//! the throttle held for a tick the manual clock never gave, and hung: here the card has no
//! throttle, `progressMinIntervalMs: 0`, so every notice is an edit at once.)

use std::sync::Arc;
use std::time::Duration;

use host_shim::local::ui::RecordingUi;
use host_shim::pi::rpc_agent::{PiLaunch, PiRpcAgent, write_extension};
use std::os::unix::fs::PermissionsExt;

use crate::common::{Dirs, Setup, WAIT, user_config};

/// A pi that answers `get_state`, says its gate is loaded, and on a prompt starts a run,
/// sends three notices (notify, setStatus, setWidget) and keeps the run open until it is
/// told to abort; then it ends the run.
const FAKE_PI: &str = r#"#!/bin/sh
printf '%s\n' '{"type":"extension_ui_request","id":"s0","method":"setStatus","statusKey":"bot-connect-gate","statusText":"gate v1"}'
id_of() { printf '%s' "$1" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'; }
while IFS= read -r line; do
  case "$line" in
    *'"get_state"'*)
      printf '{"type":"response","id":"%s","command":"get_state","success":true,"data":{}}\n' "$(id_of "$line")" ;;
    *'"prompt"'*)
      printf '{"type":"response","id":"%s","command":"prompt","success":true}\n' "$(id_of "$line")"
      printf '%s\n' '{"type":"agent_start"}'
      printf '%s\n' '{"type":"extension_ui_request","id":"n1","method":"notify","message":"Building 3 of 7","notifyType":"info"}'
      printf '%s\n' '{"type":"extension_ui_request","id":"n2","method":"setStatus","statusKey":"build","statusText":"linking the binary"}'
      printf '%s\n' '{"type":"extension_ui_request","id":"n3","method":"setWidget","widgetKey":"tests","widgetLines":["","tests: 41 of 50 passed","(more below)"]}' ;;
    *'"abort"'*)
      printf '{"type":"response","id":"%s","command":"abort","success":true}\n' "$(id_of "$line")"
      printf '%s\n' '{"type":"agent_end","messages":[]}' ;;
  esac
done
"#;

#[tokio::test]
async fn notices_during_a_chat_turn_are_one_line_on_its_card_never_messages() {
    let dir = tempfile::tempdir().expect("temp dir");
    let program = dir.path().join("pi");
    std::fs::write(&program, FAKE_PI).expect("fake pi written");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let launch = PiLaunch {
        program: program.into_os_string(),
        args: Vec::new(),
        cwd: dir.path().to_path_buf(),
        extension: write_extension(&dir.path().join("ext")).expect("extension"),
        key: "pi-notices".into(),
        ready_timeout: Duration::from_secs(20),
        env: Vec::new(),
    };
    let pi = PiRpcAgent::start(launch, Arc::new(RecordingUi::default()))
        .await
        .expect("the fake pi starts");
    let dirs = Dirs::new();
    let mut setup = Setup::new(&dirs, "pi-notices");
    setup.agent = Arc::new(pi.clone());
    setup.config = vec![user_config(
        r#"{"bridge":{"remoteToolPolicy":"read-only","progressMinIntervalMs":0}}"#,
    )];
    let h = setup.start().await;
    h.pair("dana").await;
    let posted_before = h.fake.sent().len();
    h.send("dana", "build it").await;

    // The card, edited in place, ends with the latest notice as its one ℹ line.
    let latest = "ℹ tests: 41 of 50 passed";
    let shown = h
        .fake
        .wait_for(WAIT, |sent, edits| {
            edits.last().is_some_and(|card| card.text.contains(latest))
                || sent[posted_before.min(sent.len())..]
                    .iter()
                    .any(|m| m.message.text.contains(latest))
        })
        .await;
    assert!(
        shown,
        "the latest notice on the card: posted {:#?}\nedits {:#?}",
        h.texts(),
        h.fake.edits()
    );
    let card = h
        .fake
        .edits()
        .into_iter()
        .rev()
        .chain(h.fake.sent().into_iter().rev().map(|m| m.message))
        .find(|m| m.text.contains(latest))
        .expect("the card");
    assert_eq!(
        card.text.matches('ℹ').count(),
        1,
        "one notice line, the latest replacing the others:\n{}",
        card.text
    );
    assert!(
        !card.text.contains("(more below)"),
        "a widget shows its first line only:\n{}",
        card.text
    );
    // Notices are never messages of their own: no post but the card carries one.
    let posted: Vec<String> = h.texts()[posted_before..].to_vec();
    let notices = ["Building 3 of 7", "linking the binary", "tests: 41 of 50"];
    assert!(
        posted
            .iter()
            .filter(|text| !text.contains('ℹ'))
            .all(|text| notices.iter().all(|notice| !text.contains(notice))),
        "{posted:#?}"
    );
    assert!(
        posted.len() <= 1,
        "at most the card itself was posted: {posted:#?}"
    );

    // The chat ends the run; the fake pi ends it, and the session stops cleanly.
    h.say("dana", "/abort", "").await;
    h.session.shutdown().await.expect("session stops");
    pi.stop().await;
}
