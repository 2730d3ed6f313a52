//! Scenarios: approval from the phone (docs/decisions.md#decision-11-approval-from-the-phone). A
//! remote turn's tool call that needs approval is pending; every paired chat is asked with a short
//! id; the first answer (terminal, trusted `/approve` / `/deny`, deadline) decides exactly once.

use std::collections::BTreeMap;

use guest::bridge::Bridge;
use guest::model::{AgentEvent, Level, ToolAnswer, ToolDecision, TurnOrigin};
use proptest::prelude::*;

use crate::support::{FakeHost, dm, pair, started};

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
        "Approval needed ({id}): a messenger-started turn wants to run 'bash'. Reply /approve {id} or /deny {id} within 1m. The terminal can answer too; the first answer counts."
    );
    assert_eq!(host.texts_to("tg", "c1"), vec![request.clone()]);
    assert_eq!(host.texts_to("dc", "c2"), vec![request]);
    // The request carries Approve / Deny buttons standing for the same commands.
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
        ("Approve".to_string(), format!("/approve {id}")),
        ("Deny".to_string(), format!("/deny {id}")),
    ];
    assert_eq!(commands, vec![expected.clone(), expected]);

    host.clear_records();
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &format!("/approve {id}")));
    assert_eq!(host.resolved, vec![(id.clone(), ToolDecision::Allow)]);
    let told = format!("Approval {id} ('bash'): approved by tg:u1 from the chat.");
    // The one who answered, the other chat and the terminal all hear who decided.
    assert_eq!(host.texts_to("tg", "c1"), vec![told.clone()]);
    assert_eq!(host.texts_to("dc", "c2"), vec![told.clone()]);
    assert_eq!(host.notes, vec![(Level::Info, told)]);
    assert!(host.prompts.is_empty(), "an answer is never a prompt");
    // Only the request carries buttons: the verdicts are plain messages.
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
    // The card shows the call blocked; then who decided, then the late answer's reply.
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
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
    assert_eq!(host.texts_to("tg", "c1"), vec![told.clone()]);
    assert_eq!(host.texts_to("dc", "c2"), vec![told]);
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

/// One step of an interleaving.
#[derive(Debug, Clone)]
enum Step {
    /// The agent calls a tool that needs approval.
    Call,
    /// The terminal answers the `n`-th call.
    Local(usize, bool),
    /// A chat answers the `n`-th call: (trusted sender, approve).
    Remote(usize, bool, bool),
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
        for step in steps {
            match step {
                Step::Call => {
                    let id = ask(&mut bridge, &mut host, "bash");
                    prop_assert!(!parked.iter().any(|(_, p)| *p == id), "id {} reused while pending", id);
                    parked.push((calls.len(), id.clone()));
                    calls.push(id);
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
