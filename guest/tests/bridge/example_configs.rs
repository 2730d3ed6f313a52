//! The example configs in `examples/` stay valid: every one loads without a note. They are written
//! for the user's own file: a project file may only narrow
//! (docs/security.md#project-files-only-narrow).

use guest::core::config::load_config;
use guest::model::{ConfigContent, ConfigScope, ConfigSource};

use crate::support::platforms;

fn load(path: &str, text: &str) -> Vec<String> {
    let source = ConfigSource {
        scope: ConfigScope::Global,
        path: path.into(),
        content: ConfigContent::Text(text.into()),
    };
    load_config(&[source], &platforms())
        .notes
        .into_iter()
        .map(|n| n.text)
        .collect()
}

#[test]
fn example_configs_load_cleanly() {
    for (path, text) in [
        (
            "examples/bot-connect.json",
            include_str!("../../../examples/bot-connect.json"),
        ),
        (
            "examples/strict.json",
            include_str!("../../../examples/strict.json"),
        ),
        (
            "examples/approve-from-phone.json",
            include_str!("../../../examples/approve-from-phone.json"),
        ),
    ] {
        assert_eq!(
            load(path, text),
            Vec::<String>::new(),
            "{path} has problems"
        );
    }
}

#[test]
fn the_terminal_example_requests_the_terminal() {
    let source = ConfigSource {
        scope: ConfigScope::Global,
        path: "examples/bot-connect.json".into(),
        content: ConfigContent::Text(include_str!("../../../examples/bot-connect.json").into()),
    };
    let ids: Vec<String> = load_config(&[source], &platforms())
        .transports
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(ids, ["terminal"]);
}
