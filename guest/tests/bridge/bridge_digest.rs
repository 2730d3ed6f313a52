//! Scenarios: `/connect digest` (I35). The
//! expected cards are written out from the spec's section formats, not produced by the code;
//! the summary quotes the answer as plain text (no `##`, list items as `•`).

use guest::bridge::Bridge;
use guest::model::{AgentEvent, Level, OutboundKind, ShellRun, TurnOrigin, WorkFacts};

use crate::support::{FakeHost, default_bridge, dm, pair, started};

/// The facts a busy afternoon leaves: a branch, two changed files, a green cargo run and the
/// prompt that started the turn.
fn afternoon() -> WorkFacts {
    WorkFacts {
        branch: Some("main\n".into()),
        numstat: Some("2\t1\tb.md\n10\t2\tsrc/a.rs\n".into()),
        last_shell: Some(ShellRun {
            command: "cargo test".into(),
            failed: false,
            output: "running 12 tests\ntest result: ok. 12 passed; 0 failed; 0 ignored\n".into(),
        }),
        last_prompt: Some("fix the build".into()),
    }
}

fn digest(bridge: &mut Bridge, host: &mut FakeHost) -> (Level, String) {
    let note = bridge.on_local_command(host, "digest");
    (note.level, note.text)
}

fn digests_to(host: &FakeHost, conversation: &str) -> Vec<String> {
    host.sent
        .iter()
        .filter(|m| m.kind == OutboundKind::Digest && m.conversation_id == conversation)
        .map(|m| m.text.clone())
        .collect()
}

#[test]
fn with_no_conversation_the_digest_is_previewed_locally() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);

    let (level, text) = digest(&mut bridge, &mut host);

    assert_eq!(level, Level::Warning);
    assert_eq!(
        text,
        "No conversation follows this session to send a digest to (a DM follows once paired; a group sends /follow). Preview:\n\n### demo — idle\n`/work/demo`"
    );
    assert!(host.sent.is_empty());
}

#[test]
fn the_card_gathers_git_tests_checklist_request_and_summary() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    host.work = afternoon();
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    bridge.on_agent_event(
        &mut host,
        AgentEvent::AssistantMessage("## Done.\n\n- [x] read it\n- [ ] ship it".into()),
    );
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    host.clear_records();

    let (level, text) = digest(&mut bridge, &mut host);

    assert_eq!(
        (level, text.as_str()),
        (Level::Info, "Digest sent to 1 conversation(s).")
    );
    assert_eq!(
        digests_to(&host, "c1"),
        vec![
            "### demo — idle\n`/work/demo` · branch `main`\n\n\
             **Changes (2 files, +12/-3)**\n- `src/a.rs` +10/-2\n- `b.md` +2/-1\n\n\
             **Tests:** cargo test — 12 passed, 0 failed\n\n\
             **Pending (1/2)**\n- [x] read it\n- [ ] ship it\n\n\
             **Last request**\n> fix the build\n\n\
             **Summary**\nDone."
        ]
    );
}

#[test]
fn the_running_tool_shows_while_it_runs_and_the_request_is_redacted() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    let token = format!("ghp_{}", "a1B2".repeat(9));
    host.work = WorkFacts {
        last_prompt: Some(format!("use {token} to push")),
        ..WorkFacts::default()
    };
    host.idle = false;
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    bridge.on_agent_event(&mut host, AgentEvent::ToolStarted("bash".into()));
    host.clear_records();

    digest(&mut bridge, &mut host);
    let card = digests_to(&host, "c1").concat();
    assert!(card.starts_with("### demo — busy\n"), "{card}");
    assert!(card.contains("\n\n**Now:** bash\n\n"), "{card}");
    assert!(
        !card.contains(&token),
        "the request must be redacted: {card}"
    );
    assert!(
        card.contains("**Last request**\n> use [redacted:"),
        "{card}"
    );

    bridge.on_agent_event(
        &mut host,
        AgentEvent::ToolFinished {
            name: "bash".into(),
            ok: true,
        },
    );
    host.clear_records();
    digest(&mut bridge, &mut host);
    assert!(!digests_to(&host, "c1").concat().contains("**Now:**"));
}

#[test]
fn an_explicit_digest_ignores_broadcast_switches_but_not_pause() {
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(
        &mut host,
        r#"{"bridge": {"broadcast": {"replies": false, "progress": false}}}"#,
        &["tg", "dc"],
    );
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    pair(&mut bridge, &mut host, "dc", "c2", "u2");
    bridge.on_envelope(&mut host, dm("dc", "c2", "u2", "/pause"));
    host.clear_records();

    let (_, text) = digest(&mut bridge, &mut host);

    assert_eq!(text, "Digest sent to 1 conversation(s).");
    assert_eq!(digests_to(&host, "c1").len(), 1);
    assert!(
        digests_to(&host, "c2").is_empty(),
        "a paused chat stays quiet"
    );
}

#[test]
fn the_latest_checklist_survives_later_messages_without_one() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    bridge.on_agent_event(
        &mut host,
        AgentEvent::AssistantMessage("- [ ] write tests".into()),
    );
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    bridge.on_agent_event(
        &mut host,
        AgentEvent::AssistantMessage("no list here".into()),
    );
    host.clear_records();

    digest(&mut bridge, &mut host);
    let card = digests_to(&host, "c1").concat();
    assert!(
        card.contains("**Pending (1/1)**\n- [ ] write tests"),
        "{card}"
    );
    assert!(card.contains("**Summary**\nno list here"), "{card}");
}
