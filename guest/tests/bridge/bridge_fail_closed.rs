//! Scenarios: a broken config fails closed and says so at start, in `/connect config` and
//! in `doctor` (docs/decisions.md#decision-17-fail-closed).

use guest::bridge::Bridge;
use guest::model::{
    AgentEvent, ConfigContent, ConfigScope, ConfigSource, Level, ToolDecision, TurnOrigin,
};

use crate::support::{self, FakeHost, platforms};

const CAUSE: &str = "failing closed: the project config /w/.pi/bot-connect.json is not valid JSON";

fn project(content: ConfigContent) -> ConfigSource {
    ConfigSource {
        scope: ConfigScope::Project,
        path: "/w/.pi/bot-connect.json".into(),
        content,
    }
}

/// A bridge configured from `sources`, started on `tg`, with a remote turn running.
fn remote_turn(host: &mut FakeHost, sources: &[ConfigSource]) -> (Bridge, Vec<String>) {
    let mut bridge = Bridge::new();
    let configuration = bridge.configure(host, sources, &platforms());
    bridge.start(host, &["tg".to_string()]);
    bridge.on_agent_event(host, AgentEvent::TurnStarted(TurnOrigin::Remote));
    let errors = configuration
        .notes
        .iter()
        .filter(|n| n.level == Level::Error)
        .map(|n| n.text.clone())
        .collect();
    (bridge, errors)
}

#[test]
fn a_strict_config_with_a_trailing_comma_blocks_every_remote_tool_and_says_so_everywhere() {
    let mut host = FakeHost::new();
    let broken = r#"{"bridge":{"remoteToolPolicy":"no-tools","remoteToolApproval":"each",}}"#;
    let global = ConfigSource {
        scope: ConfigScope::Global,
        path: "/home/me/.pi/agent/bot-connect.json".into(),
        content: ConfigContent::Text(r#"{"bridge":{"remoteToolPolicy":"unrestricted"}}"#.into()),
    };
    let (mut bridge, errors) = remote_turn(
        &mut host,
        &[global, project(ConfigContent::Text(broken.into()))],
    );

    assert!(
        errors.iter().any(|e| e.starts_with(CAUSE)),
        "no loud note at start: {errors:?}"
    );
    for tool in ["bash", "read"] {
        assert!(
            matches!(
                support::verdict(
                    bridge.on_tool_call(&mut host, &guest::model::ToolCall::named(tool))
                ),
                ToolDecision::Block(_)
            ),
            "{tool} ran in a remote turn under a broken strict config"
        );
    }

    let config = bridge.on_local_command(&mut host, "config");
    assert_eq!(config.level, Level::Error);
    assert!(config.text.contains("\"remoteToolPolicy\": \"no-tools\""));
    assert!(config.text.contains("\"remoteToolApproval\": \"each\""));
    assert!(config.text.contains(CAUSE), "{}", config.text);

    let doctor = bridge.on_local_command(&mut host, "doctor");
    assert_eq!(doctor.level, Level::Error);
    assert!(
        doctor
            .text
            .lines()
            .any(|l| l.starts_with(&format!("- config: {CAUSE}"))),
        "{}",
        doctor.text
    );
}

#[test]
fn an_unreadable_file_fails_closed_too() {
    let mut host = FakeHost::new();
    let (mut bridge, errors) = remote_turn(
        &mut host,
        &[project(ConfigContent::Unreadable(
            "permission denied".into(),
        ))],
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("/w/.pi/bot-connect.json cannot be read, so the strictest")),
        "{errors:?}"
    );
    assert!(matches!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("read"))),
        ToolDecision::Block(_)
    ));
}

#[test]
fn a_sound_config_has_no_fail_closed_lines_and_a_read_only_default() {
    let mut host = FakeHost::new();
    let (mut bridge, errors) = remote_turn(&mut host, &[]);
    assert!(errors.is_empty());
    assert_eq!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("read"))),
        ToolDecision::Allow
    );
    assert!(matches!(
        support::verdict(bridge.on_tool_call(&mut host, &guest::model::ToolCall::named("bash"))),
        ToolDecision::Block(_)
    ));
    let config = bridge.on_local_command(&mut host, "config");
    assert_eq!(config.level, Level::Info);
    assert!(!config.text.contains("failing closed"));
    let doctor = bridge.on_local_command(&mut host, "doctor");
    assert!(!doctor.text.contains("failing closed"));
}
