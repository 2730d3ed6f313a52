//! Scenarios: scoped remote turns (docs/decisions.md#decision-16-scoped-remote-turns). The scope is
//! frozen when a remote turn starts: a configuration loaded mid-turn (even one the agent edited)
//! changes nothing until the next turn. Local turns are never restricted. Without approval from the
//! phone, a call that needs approval asks at the terminal, naming the protected path.

use guest::model::{AgentEvent, PathAccess, ToolCall, ToolDecision, ToolPath, TurnOrigin};

use crate::support::{FakeHost, platforms, source, started, verdict};

const READ_ONLY: &str = r#"{"bridge":{"remoteToolPolicy":"read-only"}}"#;
const WIDE: &str =
    r#"{"bridge":{"remoteScope":{"allowTools":["read","write"],"allowedPaths":["**"]}}}"#;

fn write(path: &str) -> ToolCall {
    ToolCall {
        name: "write".into(),
        paths: vec![ToolPath {
            path: path.into(),
            access: PathAccess::Write,
            bridge_owned: false,
        }],
    }
}

const READ_ONLY_WRITE: &str = "Tool 'write' is not allowed for messenger-originated turns (read-only mode). Ask the operator to run it locally.";

#[test]
fn a_configuration_loaded_mid_turn_waits_for_the_next_turn() {
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(&mut host, READ_ONLY, &["tg"]);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    // The agent widened the config file and something reloaded it mid-turn.
    bridge.configure(&mut host, &[source(WIDE)], &platforms());
    assert_eq!(
        verdict(bridge.on_tool_call(&mut host, &write("src/a.rs"))),
        ToolDecision::Block(READ_ONLY_WRITE.into()),
        "the running turn keeps the scope it started with"
    );
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    assert_eq!(
        verdict(bridge.on_tool_call(&mut host, &write("src/a.rs"))),
        ToolDecision::Allow,
        "the next turn starts with the new scope"
    );
}

#[test]
fn narrowing_mid_turn_also_waits_for_the_next_turn() {
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(&mut host, WIDE, &["tg"]);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    bridge.configure(&mut host, &[source(READ_ONLY)], &platforms());
    assert_eq!(
        verdict(bridge.on_tool_call(&mut host, &write("src/a.rs"))),
        ToolDecision::Allow
    );
    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    assert_eq!(
        verdict(bridge.on_tool_call(&mut host, &write("src/a.rs"))),
        ToolDecision::Block(READ_ONLY_WRITE.into())
    );
}

#[test]
fn local_turns_are_never_scoped() {
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(&mut host, READ_ONLY, &["tg"]);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
    assert_eq!(
        verdict(bridge.on_tool_call(&mut host, &write(".git/config"))),
        ToolDecision::Allow
    );
    assert!(host.confirms.is_empty(), "{:?}", host.confirms);
}

#[test]
fn a_protected_path_asks_at_the_terminal_naming_the_path() {
    let mut host = FakeHost::new();
    let (mut bridge, _, _) = started(&mut host, WIDE, &["tg"]);
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    host.confirm_answers.push_back(true);
    assert_eq!(
        verdict(bridge.on_tool_call(&mut host, &write(".github/workflows/ci.yml"))),
        ToolDecision::Allow
    );
    assert_eq!(
        host.confirms,
        vec![(
            "Remote tool call: write".to_string(),
            "A messenger-originated turn wants to run 'write' on '.github/workflows/ci.yml' (a protected path). Allow it?".to_string()
        )]
    );
    // No answer (or a failed prompt) blocks: fail closed.
    assert_eq!(
        verdict(bridge.on_tool_call(&mut host, &write(".env"))),
        ToolDecision::Block(
            "The operator declined 'write' for this messenger-originated turn.".into()
        )
    );
}

#[test]
fn a_broken_scope_fails_closed() {
    let mut host = FakeHost::new();
    // `protectedPath` (singular) would silently drop the user's protections if ignored.
    let (mut bridge, configuration, _) = started(
        &mut host,
        r#"{"bridge":{"remoteScope":{"allowTools":["read","write"],"protectedPath":["secrets/**"]}}}"#,
        &["tg"],
    );
    let notes: Vec<&str> = configuration
        .notes
        .iter()
        .map(|n| n.text.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("bridge.remoteScope: unknown key \"protectedPath\"")),
        "{notes:#?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("failing closed:")
                && n.contains("remoteScope {\"allowTools\": []}")),
        "{notes:#?}"
    );
    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    assert!(matches!(
        verdict(bridge.on_tool_call(&mut host, &ToolCall::named("read"))),
        ToolDecision::Block(_)
    ));
}
