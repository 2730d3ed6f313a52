//! Scenarios: what only the bridge's memory holds (`hibernation-holds`,
//! docs/scaling.md#idle-sessions). A host drops an idle session's instance only when this
//! is empty; each thing that would be lost with the instance must be named, or a hibernated
//! session would forget a running turn, a queued prompt, an approval or a pairing code.

use guest::bridge::Bridge;
use guest::model::{AgentEvent, Hold, ToolAnswer, TurnOrigin};

use crate::support::{FakeHost, dm, pair, started};

const APPROVALS: &str = r#"{"bridge":{"remoteToolPolicy":"unrestricted","remoteToolApproval":"each","remoteApproval":{"enabled":true,"timeoutMs":60000},"rateLimit":{"promptsPerMinute":0}}}"#;

fn paired(host: &mut FakeHost) -> Bridge {
    let (mut bridge, _, _) = started(host, APPROVALS, &["tg"]);
    pair(&mut bridge, host, "tg", "c1", "u1");
    bridge
}

#[test]
fn a_paired_quiet_bridge_holds_nothing() {
    let mut host = FakeHost::new();
    let bridge = paired(&mut host);
    assert_eq!(bridge.hibernation_holds(&mut host), []);
}

#[test]
fn a_pairing_code_that_can_still_be_typed_is_held_until_it_expires() {
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(&mut host, APPROVALS, &["tg"]);
    bridge.on_envelope(&mut host, dm("tg", "c9", "u9", "hello"));
    assert_eq!(bridge.hibernation_holds(&mut host), [Hold::Pairing]);
    // A day later the code is dead: nothing of it is worth keeping.
    host.now += 24 * 3_600_000;
    assert_eq!(bridge.hibernation_holds(&mut host), []);
}

#[test]
fn a_running_turn_and_the_prompts_queued_behind_it_are_held() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "first"));
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.idle = false;
    let holds = bridge.hibernation_holds(&mut host);
    assert!(holds.contains(&Hold::Turn), "{holds:?}");
    assert!(!holds.contains(&Hold::QueuedPrompts), "{holds:?}");
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "second"));
    let holds = bridge.hibernation_holds(&mut host);
    assert!(holds.contains(&Hold::QueuedPrompts), "{holds:?}");
    assert!(holds.contains(&Hold::Turn), "{holds:?}");
}

#[test]
fn a_pending_approval_is_held() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let answer = bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash"));
    assert!(matches!(answer, ToolAnswer::Pending(_)), "{answer:?}");
    let holds = bridge.hibernation_holds(&mut host);
    assert!(holds.contains(&Hold::Approvals), "{holds:?}");
}

#[test]
fn state_the_last_save_could_not_write_is_held() {
    let mut host = FakeHost::new();
    let mut bridge = paired(&mut host);
    host.save_error = Some("disk full".into());
    // Pausing changes the document; its save fails.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/pause"));
    let holds = bridge.hibernation_holds(&mut host);
    assert!(holds.contains(&Hold::Unsaved), "{holds:?}");
}
