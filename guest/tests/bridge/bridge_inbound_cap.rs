//! Scenarios: an inbound size cap (docs/security.md#remote-input). A 1 MB chat message used to
//! reach the agent as a prompt; now anything over `bridge.maxInboundChars` is refused, the sender
//! is told the limit, and nothing is forwarded.

use proptest::prelude::*;

use crate::support::{FakeHost, default_bridge, dm, pair, started};

#[test]
fn a_megabyte_message_is_refused_with_the_limit_and_never_forwarded() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    pair(&mut bridge, &mut host, "tg", "c1", "u1");

    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &"x".repeat(1 << 20)));

    assert!(host.prompts.is_empty(), "a 1 MB message became a prompt");
    assert_eq!(
        host.texts_to("tg", "c1"),
        vec![
            "That message is too long to forward: 1048576 characters, and this session takes at \
             most 16000. Nothing was sent to pi; please shorten it or send it in parts."
        ]
    );
    let explain = bridge.on_local_command(&mut host, "explain");
    assert!(
        explain
            .text
            .contains("longer than bridge.maxInboundChars (16000 characters)"),
        "{}",
        explain.text
    );
}

#[test]
fn the_cap_is_configurable_and_counted_in_characters() {
    let mut host = FakeHost::new();
    let mut bridge = started(&mut host, r#"{"bridge":{"maxInboundChars":100}}"#, &["tg"]).0;
    pair(&mut bridge, &mut host, "tg", "c1", "u1");

    // 100 two-byte characters: 200 bytes, but 100 characters, so it goes.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &"é".repeat(100)));
    assert_eq!(host.prompts.len(), 1);
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &"é".repeat(101)));
    assert_eq!(host.prompts.len(), 1);
    assert!(
        host.texts_to("tg", "c1")
            .last()
            .is_some_and(|t| t.contains("101 characters") && t.contains("at most 100")),
        "{:?}",
        host.sent
    );
    // Commands still work whatever the cap.
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/status"));
    assert!(
        host.texts_to("tg", "c1")
            .last()
            .is_some_and(|t| t.starts_with("pi-bot-connect status"))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the text and the cap, no prompt is longer than the cap, and every refusal
    /// names the cap.
    #[test]
    fn no_prompt_is_ever_over_the_cap(
        cap in 100u32..400,
        text in prop_oneof!["[a-z ]{90,420}", "[é😀a]{90,420}"],
    ) {
        let mut host = FakeHost::new();
        let mut bridge = started(
            &mut host,
            &format!(r#"{{"bridge":{{"maxInboundChars":{cap}}}}}"#),
            &["tg"],
        )
        .0;
        pair(&mut bridge, &mut host, "tg", "c1", "u1");
        bridge.on_envelope(&mut host, dm("tg", "c1", "u1", &text));
        let chars = text.trim().chars().count();
        for prompt in &host.prompts {
            prop_assert!(prompt.text.chars().count() <= cap as usize);
        }
        if chars > cap as usize {
            prop_assert!(host.prompts.is_empty());
            let cap_text = format!("at most {cap}");
            prop_assert!(host.texts_to("tg", "c1").iter().any(|t| t.contains(&cap_text)));
        } else if chars > 0 {
            prop_assert_eq!(host.prompts.len(), 1);
        }
    }
}
