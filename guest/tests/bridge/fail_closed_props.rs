//! Property: a strict config stays strict under any one-character slip
//! (docs/decisions.md#decision-17-fail-closed).
//!
//! A trailing comma, a dropped quote, a typo in a key or a value: whatever single character
//! is deleted, inserted or replaced in `examples/strict.json`'s bridge section, remote
//! turns never end up with more tools or less approval than the file asked for, and when
//! the file no longer says what it meant, the person is told at error level.

use guest::core::config::{RemoteToolApproval, RemoteToolPolicy, load_config};
use guest::model::{ConfigContent, ConfigScope, ConfigSource, Level};
use proptest::prelude::*;

use crate::support::platforms;

const STRICT: &str =
    r#"{"bridge":{"remoteToolPolicy":"no-tools","remoteToolApproval":"each"},"transports":{}}"#;

/// One character deleted, inserted or replaced at `at` (a char index).
#[derive(Debug, Clone)]
enum Slip {
    Delete(usize),
    Insert(usize, char),
    Replace(usize, char),
}

fn apply(text: &str, slip: &Slip) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let len = chars.len();
    match *slip {
        Slip::Delete(at) => {
            chars.remove(at % len);
        }
        Slip::Insert(at, c) => chars.insert(at % (len + 1), c),
        Slip::Replace(at, c) => chars[at % len] = c,
    }
    chars.into_iter().collect()
}

/// The characters a hand editing JSON slips on, plus anything at all.
fn arb_char() -> impl Strategy<Value = char> {
    prop_oneof![
        prop::sample::select(&[',', '"', '{', '}', '[', ']', ':', ' ', '\n', '-', 'x', 'e'][..]),
        any::<char>(),
    ]
}

fn arb_slip() -> impl Strategy<Value = Slip> {
    prop_oneof![
        any::<usize>().prop_map(Slip::Delete),
        (any::<usize>(), arb_char()).prop_map(|(at, c)| Slip::Insert(at, c)),
        (any::<usize>(), arb_char()).prop_map(|(at, c)| Slip::Replace(at, c)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn a_strict_config_stays_strict_under_any_one_character_slip(slip in arb_slip()) {
        let text = apply(STRICT, &slip);
        let loaded = load_config(
            &[ConfigSource {
                scope: ConfigScope::Project,
                path: "/p/.pi/bot-connect.json".into(),
                content: ConfigContent::Text(text.clone()),
            }],
            &platforms::platforms(),
        );
        prop_assert_eq!(loaded.bridge.remote_tool_policy, RemoteToolPolicy::NoTools, "{}", text);
        prop_assert_eq!(loaded.bridge.remote_tool_approval, RemoteToolApproval::Each, "{}", text);
        prop_assert!(loaded.bridge.require_pairing && loaded.bridge.require_addressing);
        prop_assert!(loaded.bridge.allow_users.is_empty());
        // Whenever a guard holds only because the file broke, the person is told loudly.
        if !loaded.fail_closed.is_empty() {
            prop_assert!(
                loaded.notes.iter().any(|n| n.level == Level::Error && n.text.starts_with("failing closed:")),
                "{:?}", loaded.notes
            );
        }
    }
}
