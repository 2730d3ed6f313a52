//! Property: whatever rate limits a platform answers with, every reply reaches the chat exactly
//! once and in the order the turns ended
//! (docs/decisions.md#decision-12-an-outbox-per-conversation).

use guest::model::{AgentEvent, OutboundKind, TurnOrigin};
use proptest::prelude::*;

use crate::support::{FakeHost, pair, started};

#[derive(Debug, Clone)]
enum Step {
    /// A turn ends with a reply.
    Reply,
    /// The platform rate-limits the next send for this long.
    Limit(u64),
    /// Time passes and the host delivers the tick it was asked for.
    Wait(u64),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        3 => Just(Step::Reply),
        1 => (1u64..5_000).prop_map(Step::Limit),
        2 => (0u64..4_000).prop_map(Step::Wait),
    ];
    // At most three limits in all, so a queue never meets the give-up threshold (five in a
    // row): this property is about order and completeness, not giving up.
    proptest::collection::vec(step, 0..40).prop_filter("at most three limits", |s| {
        s.iter().filter(|x| matches!(x, Step::Limit(_))).count() <= 3
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_reply_arrives_once_and_in_order(script in steps()) {
        let mut host = FakeHost::new();
        // Without progress cards every send is a reply, so each limit lands on one.
        let (mut bridge, _, _) = started(
            &mut host,
            r#"{"bridge": {"broadcast": {"progress": false}}}"#,
            &["tg"],
        );
        pair(&mut bridge, &mut host, "tg", "c1", "u1");
        let mut replies = 0;
        for step in script {
            match step {
                Step::Reply => {
                    bridge.on_agent_event(&mut host, AgentEvent::TurnStarted(TurnOrigin::Local));
                    bridge.on_agent_event(
                        &mut host,
                        AgentEvent::AssistantMessage(format!("reply {replies}")),
                    );
                    bridge.on_agent_event(&mut host, AgentEvent::TurnSettled);
                    replies += 1;
                }
                Step::Limit(ms) => host.rate_limit_next = Some(ms),
                Step::Wait(ms) => {
                    host.now += ms;
                    bridge.tick(&mut host);
                }
            }
        }
        // Long enough for every wait to pass.
        for _ in 0..5 {
            host.now += 10_000;
            bridge.tick(&mut host);
        }
        let got: Vec<String> = host
            .sent
            .iter()
            .filter(|m| m.kind == OutboundKind::Reply)
            .map(|m| m.text.clone())
            .collect();
        let expected: Vec<String> = (0..replies).map(|i| format!("reply {i}")).collect();
        prop_assert_eq!(got, expected);
        prop_assert!(host.notes.is_empty(), "{:?}", host.notes);
    }
}
