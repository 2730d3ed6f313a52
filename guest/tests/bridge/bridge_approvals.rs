//! Scenarios: approval from the phone (docs/decisions.md#decision-11-approval-from-the-phone). A
//! remote turn's tool call that needs approval is pending; every paired chat is asked with a short
//! id; the first answer (terminal, trusted `/approve` / `/deny`, deadline) decides exactly once.

use std::collections::BTreeMap;

use guest::bridge::Bridge;
use guest::core::approvals::clock;
use guest::model::{
    AgentEvent, Level, PathAccess, ToolAnswer, ToolCall, ToolDecision, ToolPath, TurnOrigin,
};
use proptest::prelude::*;

use crate::support::{FakeHost, caps, dm, pair, press_in_group, started};
use guest::core::notices;
use guest::model::{LengthUnit, Markup};

const CONFIG: &str = r#"{"bridge":{"remoteToolPolicy":"unrestricted","remoteToolApproval":"each","remoteApproval":{"enabled":true,"timeoutMs":60000}}}"#;

/// A bridge with remote approval on and two paired chats, `tg:c1` (u1) and `dc:c2` (u2),
/// in a remote turn.
fn in_remote_turn(host: &mut FakeHost) -> Bridge {
    let (mut bridge, _, _) = started(host, CONFIG, &["tg", "dc"]);
    pair(&mut bridge, host, "tg", "c1", "u1");
    pair(&mut bridge, host, "dc", "c2", "u2");
    bridge.on_agent_event(host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.clear_records();
    bridge
}

/// Asks for `tool` and returns the approval id.
fn ask(bridge: &mut Bridge, host: &mut FakeHost, tool: &str) -> String {
    match bridge.on_tool_call(host, &guest::model::ToolCall::named(tool)) {
        ToolAnswer::Pending(request) => {
            assert_eq!(request.title, format!("Remote tool call: {tool}"));
            assert!(request.message.contains(&request.id), "{request:?}");
            request.id
        }
        other => panic!("expected pending, got {other:?}"),
    }
}

fn declined(tool: &str) -> ToolDecision {
    ToolDecision::Block(format!(
        "The operator declined '{tool}' for this messenger-originated turn."
    ))
}

#[test]
fn every_paired_chat_is_asked_and_a_trusted_approve_lets_the_call_run() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);

    let id = ask(&mut bridge, &mut host, "bash");
    assert!(host.resolved.is_empty(), "nothing decided yet");
    let request = format!(
        "Approval needed ({id}): a messenger-started turn wants to run 'bash'. Reply /approve {id} (/approve {id} turn also lets 'bash' run unasked for the rest of this turn) or /deny {id} within 1m; /details {id} shows what it touches. The terminal can answer too; the first answer counts."
    );
    assert_eq!(host.texts_to("tg", "c1"), vec![request.clone()]);
    assert_eq!(host.texts_to("dc", "c2"), vec![request]);
    // The request carries the choices as buttons standing for the same commands.
    let commands: Vec<Vec<(String, String)>> = host
        .sent
        .iter()
        .map(|m| {
            m.buttons
                .iter()
                .map(|b| (b.label.clone(), b.command.clone()))
                .collect()
        })
        .collect();
    let expected = vec![
        ("Approve once".to_string(), format!("/approve {id}")),
        ("Deny".to_string(), format!("/deny {id}")),
        (
            "Allow for this turn".to_string(),
            format!("/approve {id} turn"),
        ),
        ("Details".to_string(), format!("/details {id}")),
    ];
    assert_eq!(commands, vec![expected.clone(), expected]);

    host.clear_records();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("/approve {id}")));
    assert_eq!(host.resolved, vec![(id.clone(), ToolDecision::Allow)]);
    let told = format!("Approval {id} ('bash'): approved by tg:u1 from the chat.");
    let outcome = format!(
        "Approval {id}: a messenger-started turn asked to run 'bash'.\nApproved once by tg:u1 from the chat at {}.",
        clock(host.now)
    );
    // Each request message becomes the outcome in place; the one who answered, the
    // other chat and the terminal all hear who decided.
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![outcome.clone(), told.clone()]
    );
    assert_eq!(host.texts_to("dc", "c2"), vec![outcome, told.clone()]);
    assert_eq!(host.notes, vec![(Level::Info, told)]);
    assert!(host.prompts.is_empty(), "an answer is never a prompt");
    // The outcome edits the request messages, and nothing after the request has buttons.
    assert_eq!(
        host.sent.iter().filter_map(|m| m.edit_key.clone()).count(),
        2
    );
    assert!(host.sent.iter().all(|m| m.buttons.is_empty()));
}

#[test]
fn deny_blocks_and_a_second_answer_learns_who_decided() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, "write");
    host.clear_records();

    bridge.on_envelope(
        &mut host,
        dm("dc", "c2", "u2", &format!("/deny {}", id.to_uppercase())),
    );
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("/approve {id}")));
    bridge.on_local_answer(&mut host, &id, true);

    assert_eq!(host.resolved, vec![(id.clone(), declined("write"))]);
    let denied = format!("Approval {id} ('write'): denied by dc:u2 from the chat.");
    let late = format!("Approval {id} was already decided; your answer changed nothing. {denied}");
    // The request becomes its outcome; the card shows the call blocked; then who decided,
    // then the late answer's reply.
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
            format!(
                "Approval {id}: a messenger-started turn asked to run 'write'.\nDenied by dc:u2 from the chat at {}.",
                clock(host.now)
            ),
            "⊘ write (blocked)".to_string(),
            denied.clone(),
            late.clone()
        ]
    );
    assert_eq!(host.texts_to("dc", "c2").last(), Some(&denied));
    assert_eq!(
        host.notes,
        vec![(Level::Warning, denied), (Level::Info, late)]
    );
}

#[test]
fn the_local_answer_can_come_first_and_the_chats_are_told() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, "bash");
    host.clear_records();

    bridge.on_local_answer(&mut host, &id, true);
    assert_eq!(host.resolved, vec![(id.clone(), ToolDecision::Allow)]);
    let told = format!("Approval {id} ('bash'): approved at the terminal.");
    let outcome = format!(
        "Approval {id}: a messenger-started turn asked to run 'bash'.\nApproved once at the terminal at {}.",
        clock(host.now)
    );
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![outcome.clone(), told.clone()]
    );
    assert_eq!(host.texts_to("dc", "c2"), vec![outcome, told]);
    assert!(host.notes.is_empty(), "the terminal knows: it answered");
}

#[test]
fn a_wrong_id_or_a_missing_one_says_so() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let _id = ask(&mut bridge, &mut host, "bash");
    host.clear_records();

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/approve zzzz"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/deny"));
    assert!(host.resolved.is_empty());
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
            "No approval 'zzzz' is waiting: the id is wrong, or it is from before the bridge restarted (then the call was already blocked).".to_string(),
            "Usage: /deny <id> (the id is in the approval request).".to_string(),
        ]
    );
}

#[test]
fn no_answer_in_time_blocks_the_call_and_says_so_everywhere() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let start = host.now;
    let id = ask(&mut bridge, &mut host, "bash");
    assert_eq!(host.ticks.last(), Some(&(start + 60_000)));
    host.clear_records();

    host.now = start + 59_999;
    bridge.tick(&mut host);
    assert!(host.resolved.is_empty());
    host.now = start + 60_000;
    bridge.tick(&mut host);
    assert_eq!(
        host.resolved,
        vec![(
            id.clone(),
            ToolDecision::Block(
                "Nobody approved 'bash' in time, so it was blocked (fail closed). Ask the operator to run it locally.".into()
            )
        )]
    );
    let told = format!("Approval {id} ('bash'): no answer in time, so the call was blocked.");
    assert!(host.texts_to("tg", "c1").contains(&told));
    assert!(host.texts_to("dc", "c2").contains(&told));
    assert_eq!(host.notes, vec![(Level::Warning, told)]);

    // An answer after the deadline changes nothing.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("/approve {id}")));
    assert_eq!(host.resolved.len(), 1);
}

#[test]
fn an_identity_that_is_not_paired_never_decides() {
    let mut host = FakeHost::new();
    // requirePairing off lets anyone prompt, but approving needs real trust.
    let config = r#"{"bridge":{"requirePairing":false,"remoteToolPolicy":"unrestricted","remoteToolApproval":"each","remoteApproval":"on"}}"#;
    let (mut bridge, _, _) = started(&mut host, config, &["tg"]);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let id = ask(&mut bridge, &mut host, "bash");
    host.clear_records();

    bridge.on_envelope(
        &mut host,
        dm("tg", "c9", "stranger", &format!("/approve {id}")),
    );
    assert!(host.resolved.is_empty());
    assert_eq!(
        host.texts_to("tg", "c9"),
        vec!["Only a paired identity can answer approvals. Pair this chat first."]
    );
    assert_eq!(
        host.logs_named("approval answer from an untrusted identity refused")
            .len(),
        1
    );
}

#[test]
fn local_turns_and_policy_blocks_are_never_asked() {
    let mut host = FakeHost::new();
    let config = r#"{"bridge":{"remoteToolPolicy":"read-only","remoteToolApproval":"each","remoteApproval":"on"}}"#;
    let (mut bridge, _, _) = started(&mut host, config, &["tg"]);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    // A call the policy blocks is blocked without asking anyone.
    assert!(matches!(
        bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash")),
        ToolAnswer::Decided(ToolDecision::Block(_))
    ));
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    assert_eq!(
        bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash")),
        ToolAnswer::Decided(ToolDecision::Allow)
    );
    assert!(host.confirms.is_empty());
}

/// The command of the button labelled `label` under the last request sent to
/// `transport:conversation`: what a press on it sends, exactly (the button route).
fn press(host: &FakeHost, transport: &str, conversation: &str, label: &str) -> String {
    host.sent
        .iter()
        .rev()
        .filter(|m| m.transport == transport && m.conversation_id == conversation)
        .flat_map(|m| m.buttons.iter())
        .find(|b| b.label == label)
        .map(|b| b.command.clone())
        .unwrap_or_else(|| panic!("no {label} button sent to {transport}:{conversation}"))
}

/// Edits of approval requests (the progress cards are edited too, and left out).
fn edits(host: &FakeHost) -> Vec<(String, String)> {
    host.sent
        .iter()
        .filter(|m| m.text.starts_with("Approval"))
        .filter_map(|m| m.edit_key.clone().map(|k| (k, m.text.clone())))
        .collect()
}

#[test]
fn a_press_decides_once_and_a_second_press_on_the_decided_request_says_so() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, "bash");
    let deny = press(&host, "dc", "c2", "Deny");
    let approve = press(&host, "tg", "c1", "Approve once");
    host.clear_records();

    bridge.on_envelope(&mut host, dm("dc", "c2", "u2", &deny));
    assert_eq!(host.resolved, vec![(id.clone(), declined("bash"))]);
    assert_eq!(
        edits(&host).len(),
        2,
        "both request messages show the outcome"
    );
    host.clear_records();
    // The other chat's button, pressed after the decision: nothing changes.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &approve));
    assert_eq!(host.resolved.len(), 1);
    assert!(
        edits(&host).is_empty(),
        "a decided request is not edited again"
    );
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![format!(
            "Approval {id} was already decided; your answer changed nothing. Approval {id} ('bash'): denied by dc:u2 from the chat."
        )]
    );
}

#[test]
fn an_unpaired_press_decides_nothing_and_leaves_the_request_live() {
    let mut host = FakeHost::new();
    let config = r#"{"bridge":{"requirePairing":false,"remoteToolPolicy":"unrestricted","remoteToolApproval":"each","remoteApproval":"on"}}"#;
    let (mut bridge, _, _) = started(&mut host, config, &["tg"]);
    bridge.on_envelope(&mut host, dm("tg", "c1", "stranger", "hello"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let _id = ask(&mut bridge, &mut host, "bash");
    let approve = press(&host, "tg", "c1", "Approve once");
    host.clear_records();

    bridge.on_envelope(&mut host, dm("tg", "c1", "stranger", &approve));
    assert!(host.resolved.is_empty());
    assert!(
        edits(&host).is_empty(),
        "the buttons stay for someone who may decide"
    );
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec!["Only a paired identity can answer approvals. Pair this chat first."]
    );
}

/// The private answer every refused press gets.
fn refused_privately(host: &FakeHost, press: &str) {
    let answers: Vec<(Option<&str>, &str, &str)> = host
        .private
        .iter()
        .map(|m| {
            (
                m.answers_press.as_deref(),
                m.conversation_id.as_str(),
                m.text.as_str(),
            )
        })
        .collect();
    assert_eq!(
        answers,
        vec![(Some(press), "c1", notices::PRESS_REFUSED_NOTICE)],
        "one private answer to the press"
    );
}

#[test]
fn an_unpaired_press_in_a_group_is_refused_to_the_presser_alone_and_decides_nothing() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, "bash");
    let approve = press(&host, "tg", "c1", "Approve once");
    host.clear_records();

    bridge.on_envelope(
        &mut host,
        press_in_group("tg", "c1", "stranger", &approve, "press:1"),
    );
    assert!(host.resolved.is_empty(), "nothing decided");
    refused_privately(&host, "press:1");
    assert!(
        host.texts_to("tg", "c1").is_empty(),
        "the group hears nothing: {:?}",
        host.texts_to("tg", "c1")
    );
    assert!(
        host.notes.is_empty(),
        "no pairing code is made for a press: {:?}",
        host.notes
    );
    assert_eq!(
        host.live_buttons.len(),
        2,
        "the request stays live for those who may decide"
    );
    // The paired owner's press still decides, in the open.
    bridge.on_envelope(
        &mut host,
        press_in_group("tg", "c1", "u1", &approve, "press:2"),
    );
    assert_eq!(host.resolved, vec![(id, ToolDecision::Allow)]);
    assert_eq!(
        host.private.len(),
        1,
        "a deciding press is answered in the chat"
    );
}

#[test]
fn a_press_by_an_identity_that_may_prompt_but_not_decide_is_refused_privately() {
    let mut host = FakeHost::new();
    let config = r#"{"bridge":{"requirePairing":false,"remoteToolPolicy":"unrestricted","remoteToolApproval":"each","remoteApproval":"on"}}"#;
    let (mut bridge, _, _) = started(&mut host, config, &["tg"]);
    bridge.on_envelope(&mut host, dm("tg", "c1", "stranger", "hello"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let _id = ask(&mut bridge, &mut host, "bash");
    let deny = press(&host, "tg", "c1", "Deny");
    host.clear_records();

    bridge.on_envelope(
        &mut host,
        press_in_group("tg", "c1", "stranger", &deny, "press:7"),
    );
    assert!(host.resolved.is_empty());
    refused_privately(&host, "press:7");
    assert!(host.texts_to("tg", "c1").is_empty());
    assert_eq!(
        host.logs_named("button press from an identity that may not answer refused")
            .len(),
        1
    );
}

/// `explain` of a captured press says what the live bridge does with it: refused to the
/// presser, no pairing code; the owner's press is the command it stands for.
#[test]
fn explaining_a_strangers_press_says_it_is_refused_and_makes_no_code() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let _id = ask(&mut bridge, &mut host, "bash");
    let approve = press(&host, "tg", "c1", "Approve once");
    let stranger = press_in_group("tg", "c1", "stranger", &approve, "press:1");
    let preview = bridge.preview_envelope(&mut host, &stranger);
    assert!(preview.contains("refused: a button press"), "{preview}");
    assert!(preview.contains("no pairing code"), "{preview}");
    let owner = press_in_group("tg", "c1", "u1", &approve, "press:2");
    let preview = bridge.preview_envelope(&mut host, &owner);
    assert!(preview.contains("command: /approve"), "{preview}");
}

/// A press that changes nothing (the request was decided already) is answered to the
/// presser alone; the same words typed are answered in the chat, as before.
#[test]
fn a_press_on_a_decided_request_is_told_so_privately() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, "bash");
    let approve = press(&host, "tg", "c1", "Approve once");
    bridge.on_local_answer(&mut host, &id, false);
    host.clear_records();

    bridge.on_envelope(
        &mut host,
        press_in_group("tg", "c1", "u1", &approve, "press:late"),
    );
    assert_eq!(host.resolved.len(), 1, "only the terminal decided");
    assert!(
        host.texts_to("tg", "c1").is_empty(),
        "the group hears nothing"
    );
    assert_eq!(host.private.len(), 1);
    assert_eq!(host.private[0].answers_press.as_deref(), Some("press:late"));
    assert!(
        host.private[0]
            .text
            .starts_with(&format!("Approval {id} was already decided")),
        "{:?}",
        host.private[0]
    );
    host.clear_records();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &approve));
    assert!(host.private.is_empty());
    assert!(
        host.texts_to("tg", "c1")[0].starts_with(&format!("Approval {id} was already decided"))
    );
}

#[test]
fn where_a_press_cannot_be_answered_privately_the_refusal_is_said_in_the_chat() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let _id = ask(&mut bridge, &mut host, "bash");
    let approve = press(&host, "tg", "c1", "Approve once");
    host.clear_records();
    host.fail_private = true;

    bridge.on_envelope(
        &mut host,
        press_in_group("tg", "c1", "stranger", &approve, "press:old"),
    );
    assert!(host.resolved.is_empty());
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![notices::PRESS_REFUSED_NOTICE],
        "never a refusal nobody hears"
    );
    assert_eq!(
        host.logs_named("press answered in the conversation").len(),
        1
    );
}

#[test]
fn an_expired_request_shows_when_it_expired_and_a_late_press_says_so() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let start = host.now;
    let id = ask(&mut bridge, &mut host, "bash");
    let approve = press(&host, "tg", "c1", "Approve once");
    host.clear_records();

    // The tick comes late; the outcome still names the deadline.
    host.now = start + 90_000;
    bridge.tick(&mut host);
    let expired = format!(
        "Approval {id}: a messenger-started turn asked to run 'bash'.\nExpired at {}: nobody answered, so the call was blocked.",
        clock(start + 60_000)
    );
    let edited = edits(&host);
    assert_eq!(edited.len(), 2, "{edited:?}");
    assert!(
        edited.iter().all(|(_, text)| *text == expired),
        "{edited:?}"
    );
    host.clear_records();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &approve));
    assert_eq!(host.resolved.len(), 1, "only the deadline decided");
    assert!(
        host.texts_to("tg", "c1")[0].starts_with(&format!("Approval {id} was already decided"))
    );
}

#[test]
fn allow_for_this_turn_lets_the_same_tool_run_unasked_until_the_turn_ends() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, "bash");
    let turn = press(&host, "tg", "c1", "Allow for this turn");
    assert_eq!(turn, format!("/approve {id} turn"));
    host.clear_records();

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &turn));
    assert_eq!(host.resolved, vec![(id.clone(), ToolDecision::Allow)]);
    assert!(edits(&host).iter().all(|(_, text)| {
        text.contains("Allowed for the rest of this turn by tg:u1 from the chat")
    }));
    host.clear_records();
    // The same tool runs unasked; another tool is still asked about.
    assert_eq!(
        bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash")),
        ToolAnswer::Decided(ToolDecision::Allow)
    );
    assert!(
        host.sent.iter().all(|m| m.buttons.is_empty()),
        "nobody was asked"
    );
    let _write = ask(&mut bridge, &mut host, "write");
    // The next turn asks again.
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let _again = ask(&mut bridge, &mut host, "bash");
}

#[test]
fn a_protected_path_is_never_allowed_for_the_turn() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let secret = ToolCall {
        name: "read".into(),
        paths: vec![ToolPath {
            path: ".env".into(),
            access: PathAccess::Read,
            bridge_owned: false,
        }],
    };
    let ToolAnswer::Pending(request) = bridge.on_tool_call(&mut host, &secret) else {
        panic!("a protected path is asked about");
    };
    let id = request.id;
    let labels: Vec<String> = host.sent[0]
        .buttons
        .iter()
        .map(|b| b.label.clone())
        .collect();
    assert_eq!(
        labels,
        ["Approve once", "Deny", "Details"],
        "no turn choice offered"
    );
    assert!(
        !host.sent[0].text.contains("turn also"),
        "{}",
        host.sent[0].text
    );
    host.clear_records();
    // Typed anyway: approved once only, and said so.
    bridge.on_envelope(
        &mut host,
        dm("tg", "c1", "u1", &format!("/approve {id} turn")),
    );
    assert_eq!(host.resolved, vec![(id, ToolDecision::Allow)]);
    let reply = host
        .texts_to("tg", "c1")
        .last()
        .cloned()
        .unwrap_or_default();
    assert!(reply.contains("Approved once only"), "{reply}");
    host.clear_records();
    assert!(matches!(
        bridge.on_tool_call(&mut host, &secret),
        ToolAnswer::Pending(_)
    ));
}

#[test]
fn details_show_in_place_with_the_deciding_buttons_and_never_decide() {
    let mut host = FakeHost::new();
    let mut bridge = in_remote_turn(&mut host);
    let call = ToolCall {
        name: "write".into(),
        paths: vec![ToolPath {
            path: "src/main.rs".into(),
            access: PathAccess::Write,
            bridge_owned: false,
        }],
    };
    let ToolAnswer::Pending(request) = bridge.on_tool_call(&mut host, &call) else {
        panic!("asked");
    };
    let id = request.id;
    let details = press(&host, "tg", "c1", "Details");
    let request_key = host.sent[0].edit_key.clone();
    host.clear_records();

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &details));
    assert!(host.resolved.is_empty(), "details decide nothing");
    let shown = &host.sent[0];
    assert_eq!(shown.conversation_id, "c1", "only the chat that asked");
    assert!(shown.edit_key.is_some(), "in place");
    assert!(
        shown.text.contains("- writes src/main.rs"),
        "{}",
        shown.text
    );
    assert!(
        shown.text.contains("remoteToolApproval is each"),
        "{}",
        shown.text
    );
    let labels: Vec<&str> = shown.buttons.iter().map(|b| b.label.as_str()).collect();
    assert_eq!(labels, ["Approve once", "Deny", "Allow for this turn"]);
    assert_eq!(
        host.texts_to("tg", "c1").last().map(String::as_str),
        Some(format!("Details of approval {id} are shown on the request above.").as_str())
    );
    assert!(host.texts_to("dc", "c2").is_empty());
    let _ = request_key;
    // Once decided, details say so instead.
    bridge.on_local_answer(&mut host, &id, false);
    host.clear_records();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &details));
    assert!(
        host.texts_to("tg", "c1")[0].starts_with(&format!("Approval {id} is no longer waiting."))
    );
}

/// A request longer than the platform's limit goes out in parts, with its buttons on the
/// first part only: the part whose receipt the bridge keeps and edits to the outcome. On
/// any other part they would outlive the decision (a split Details view posts new parts
/// too). Checked on what every message shows at the end, not on who was edited.
#[test]
fn a_request_split_in_parts_keeps_no_live_button_once_decided() {
    let mut host = FakeHost::new();
    host.set_capabilities("tg", caps(true, Markup::Markdown, LengthUnit::Chars, 120));
    let mut bridge = in_remote_turn(&mut host);
    let id = ask(&mut bridge, &mut host, "bash");
    let to_tg: Vec<&guest::model::Outbound> = host
        .sent
        .iter()
        .filter(|m| m.transport == "tg" && m.conversation_id == "c1")
        .collect();
    assert!(to_tg.len() > 1, "the request is split: {to_tg:?}");
    let carrying: Vec<usize> = (0..to_tg.len())
        .filter(|&i| !to_tg[i].buttons.is_empty())
        .collect();
    assert_eq!(carrying, [0], "buttons on the first part only");

    // Details edit the first part and overflow into new parts; none of those has buttons.
    let details = press(&host, "tg", "c1", "Details");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &details));
    assert_eq!(
        host.live_buttons.len(),
        2,
        "one live request per chat: {:?}",
        host.live_buttons
    );

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("/approve {id}")));
    assert_eq!(host.resolved, vec![(id, ToolDecision::Allow)]);
    assert!(
        host.live_buttons.is_empty(),
        "a decided request leaves no part with buttons: {:?}",
        host.live_buttons
    );
}

/// One step of an interleaving.
#[derive(Debug, Clone)]
enum Step {
    /// The agent calls a tool that needs approval.
    Call,
    /// The terminal answers the `n`-th call.
    Local(usize, bool),
    /// A chat answers the `n`-th call: (trusted sender, approve).
    Remote(usize, bool, bool),
    /// A trusted chat allows the `n`-th call's tool for the rest of the turn.
    RemoteTurn(usize),
    /// A chat answers an id that never existed.
    WrongId(bool),
    /// Time passes and the tick comes.
    Wait(u64),
    /// The instance is replaced (a trap): the host blocks what it had parked.
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Call),
        3 => (0usize..6, any::<bool>()).prop_map(|(n, yes)| Step::Local(n, yes)),
        4 => (0usize..6, any::<bool>(), any::<bool>()).prop_map(|(n, t, yes)| Step::Remote(n, t, yes)),
        1 => (0usize..6).prop_map(Step::RemoteTurn),
        1 => any::<bool>().prop_map(Step::WrongId),
        2 => (0u64..90_000).prop_map(Step::Wait),
        1 => Just(Step::Restart),
    ]
}

/// Hands the verdicts the bridge gave since `seen` to the parked calls, as the host does:
/// only a call it holds gets one (`imports.rs`); a verdict for anything else is stray.
fn absorb(
    host: &FakeHost,
    seen: &mut usize,
    parked: &mut Vec<(usize, String)>,
    verdicts: &mut BTreeMap<usize, Vec<ToolDecision>>,
    stray: &mut Vec<String>,
) {
    for (id, decision) in &host.resolved[*seen..] {
        match parked.iter().position(|(_, p)| p == id) {
            Some(at) => {
                let (call, _) = parked.remove(at);
                verdicts.entry(call).or_default().push(decision.clone());
            }
            None => stray.push(id.clone()),
        }
    }
    *seen = host.resolved.len();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Under any interleaving of local answers, remote answers, timeouts and restarts,
    /// each tool call gets exactly one verdict, and an untrusted identity never decides.
    #[test]
    fn each_call_gets_exactly_one_verdict_and_strangers_never_decide(
        steps in prop::collection::vec(step(), 1..40)
    ) {
        let mut host = FakeHost::new();
        let mut bridge = in_remote_turn(&mut host);
        // The host's side: the id of every call, the calls still parked (index, id), and
        // every verdict each call got.
        let mut calls: Vec<String> = Vec::new();
        let mut parked: Vec<(usize, String)> = Vec::new();
        let mut verdicts: BTreeMap<usize, Vec<ToolDecision>> = BTreeMap::new();
        let mut stray: Vec<String> = Vec::new();
        let mut seen = 0;
        let mut allowed_for_turn = false;
        for step in steps {
            match step {
                Step::Call => match bridge.on_tool_call(&mut host, &ToolCall::named("bash")) {
                    ToolAnswer::Pending(request) => {
                        let id = request.id;
                        prop_assert!(!parked.iter().any(|(_, p)| *p == id), "id {} reused while pending", id);
                        parked.push((calls.len(), id.clone()));
                        calls.push(id);
                    }
                    // Allowed for the turn: decided at once, never asked.
                    ToolAnswer::Decided(decision) => {
                        prop_assert!(allowed_for_turn, "decided unasked without a turn allowance: {:?}", decision);
                        verdicts.entry(calls.len()).or_default().push(decision);
                        calls.push(String::new());
                    }
                },
                Step::RemoteTurn(n) => {
                    if let Some(id) = calls.get(n).cloned().filter(|id| !id.is_empty()) {
                        let before = host.resolved.len();
                        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("/approve {id} turn")));
                        allowed_for_turn |= host.resolved.len() > before;
                    }
                }
                Step::Local(n, yes) => {
                    if let Some(id) = calls.get(n).cloned() {
                        bridge.on_local_answer(&mut host, &id, yes);
                    }
                }
                Step::Remote(n, trusted, yes) => {
                    if let Some(id) = calls.get(n).cloned() {
                        let before = host.resolved.len();
                        let text = format!("/{} {id}", if yes { "approve" } else { "deny" });
                        let (conversation, user) = if trusted { ("c1", "u1") } else { ("c9", "mallory") };
                        bridge.on_envelope(&mut host, dm("tg", conversation, user, &text));
                        if !trusted {
                            prop_assert_eq!(host.resolved.len(), before, "an untrusted identity decided");
                        }
                    }
                }
                Step::WrongId(yes) => {
                    let text = if yes { "/approve 0000" } else { "/deny 0000" };
                    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", text));
                }
                Step::Wait(ms) => {
                    host.now += ms;
                    bridge.tick(&mut host);
                }
                Step::Restart => {
                    absorb(&host, &mut seen, &mut parked, &mut verdicts, &mut stray);
                    // The host blocks every parked call; the fresh instance knows none.
                    for (call, _) in parked.drain(..) {
                        verdicts.entry(call).or_default().push(ToolDecision::Block("restarted".into()));
                    }
                    bridge = started(&mut host, CONFIG, &["tg", "dc"]).0;
                    allowed_for_turn = false;
                    seen = host.resolved.len();
                    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
                }
            }
            absorb(&host, &mut seen, &mut parked, &mut verdicts, &mut stray);
        }
        // Past every deadline, nothing is left waiting.
        host.now += 10 * 60_000;
        bridge.tick(&mut host);
        absorb(&host, &mut seen, &mut parked, &mut verdicts, &mut stray);
        prop_assert!(parked.is_empty(), "still waiting: {:?}", parked);
        prop_assert!(stray.is_empty(), "verdicts for calls never parked: {:?}", stray);
        for call in 0..calls.len() {
            prop_assert_eq!(verdicts.get(&call).map(Vec::len), Some(1), "call {} got {:?}", call, verdicts.get(&call));
        }
    }
}
