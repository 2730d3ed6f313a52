//! The example configs in `examples/` stay valid: every one loads without a note.

use guest::core::config::load_config;
use guest::model::ConfigSource;

fn load(path: &str, text: &str) -> Vec<String> {
    let source = ConfigSource {
        scope: "project".into(),
        path: path.into(),
        text: text.into(),
    };
    load_config(&[source])
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
            include_str!("../../examples/bot-connect.json"),
        ),
        (
            "examples/strict.json",
            include_str!("../../examples/strict.json"),
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
        scope: "project".into(),
        path: "examples/bot-connect.json".into(),
        text: include_str!("../../examples/bot-connect.json").into(),
    };
    let ids: Vec<String> = load_config(&[source])
        .transports
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(ids, ["terminal"]);
}
