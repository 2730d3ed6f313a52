//! Properties of the trust core: an unpaired identity can never reach the agent without the
//! code, and the code never reaches a chat (I1, I6, I33).

use guest::core::config::BridgeConfig;
use guest::core::pairing::{
    PairingDecision, PairingOptions, PairingReason, chat_prompt, create_challenge, decide_pairing,
    normalize_challenge_input,
};
use guest::core::router::{Route, RouteInput, route};
use guest::core::state::PendingChallenge;
use guest::model::Envelope;
use proptest::prelude::*;

/// A random source that cycles through `values` (never empty: the strategies guarantee it).
fn cycling(values: Vec<u32>) -> impl FnMut() -> u32 {
    let mut i = 0;
    move || {
        let v = values.get(i % values.len().max(1)).copied().unwrap_or(0);
        i += 1;
        v
    }
}

/// Random values, often from the range rejection sampling discards.
fn random_values() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(
        prop_oneof![any::<u32>(), 4_294_967_290u32..=u32::MAX],
        1..32,
    )
}

/// Messages as people type them: chatter, numbers, codes with separators, commands, mentions.
fn message_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9 @/:,-]{0,24}",
        "[0-9]{1,11}",
        "[0-9]{3}[ -][0-9]{3}",
        Just("meeting at 3pm".to_string()),
        Just("42".to_string()),
        Just("@piBot status".to_string()),
        Just("@piBot fix the build".to_string()),
        Just("/status".to_string()),
        Just("/connect help".to_string()),
    ]
}

/// One inbound message: text, direct, transport-addressed, ms since the previous message.
fn message() -> impl Strategy<Value = (String, bool, bool, u64)> {
    (message_text(), any::<bool>(), any::<bool>(), 0u64..150_000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn unpaired_identity_never_prompts_never_trusts_never_sees_the_code(
        messages in prop::collection::vec(message(), 1..40),
        values in random_values(),
        digits in 4u32..=10,
        max_attempts in 1u32..=10,
        require_addressing in any::<bool>(),
    ) {
        let config = BridgeConfig {
            bot_username: Some("piBot".into()),
            pairing_digits: digits,
            pairing_max_attempts: max_attempts,
            require_addressing,
            ..BridgeConfig::default()
        };
        let opts = PairingOptions::from_config(&config);
        let mut random = cycling(values);
        let mut pending: Option<PendingChallenge> = None;
        let mut live_code = String::new();
        let mut codes_issued: Vec<String> = Vec::new();
        let mut now = 1_000_000u64;
        for (text, is_direct, addressed, dt) in messages {
            now += dt;
            // The sequence never contains the live code as an exact digit string.
            if pending.is_some() && normalize_challenge_input(&text) == live_code {
                continue;
            }
            let envelope = Envelope {
                transport: "telegram".into(),
                conversation_id: "group-1".into(),
                user_id: "666".into(),
                text: text.clone(),
                is_direct,
                addressed,
                ..Envelope::default()
            };
            let input = RouteInput {
                envelope: &envelope,
                config: &config,
                authenticated: false,
                pending: pending.as_ref(),
                busy: false,
                attachments_accepted: true,
                transport_fetches: true,
                now,
            };
            match route(&input) {
                Route::Ignore(_) => continue,
                Route::Pair => {}
                other => prop_assert!(false, "unauthenticated {text:?} routed to {other:?}"),
            }
            let (next, reason) = match decide_pairing(pending.as_ref(), &text, now, &opts) {
                PairingDecision::Trust => {
                    prop_assert!(false, "{text:?} paired without the code");
                    continue;
                }
                PairingDecision::Keep { pending: next, reason } => (next, reason),
                PairingDecision::Issue { reason } => {
                    let created = create_challenge(now, opts.ttl_ms, opts.digits, &mut random, [0; 16]);
                    codes_issued.push(created.code.clone());
                    live_code = created.code;
                    (created.pending, reason)
                }
            };
            let reply = chat_prompt(reason, &opts, next.attempts, &config.local_command);
            let reply_digits = normalize_challenge_input(&reply);
            for code in &codes_issued {
                prop_assert!(!reply_digits.contains(code.as_str()), "{reply:?} leaks {code}");
            }
            pending = Some(next);
        }
    }

    #[test]
    fn only_a_digit_string_of_the_code_length_is_an_attempt(
        text in "[a-z0-9 :-]{0,30}",
        values in random_values(),
        salt in any::<[u8; 16]>(),
    ) {
        let opts = PairingOptions { ttl_ms: 300_000, digits: 6, max_attempts: 3 };
        let created = create_challenge(0, opts.ttl_ms, opts.digits, &mut cycling(values), salt);
        let live = created.pending;
        let decision = decide_pairing(Some(&live), &text, 1, &opts);
        let provided = normalize_challenge_input(&text);
        if provided.len() != 6 {
            prop_assert_eq!(
                decision,
                PairingDecision::Keep { pending: live, reason: PairingReason::Awaiting }
            );
        } else if provided == created.code {
            prop_assert_eq!(decision, PairingDecision::Trust);
        } else {
            prop_assert_eq!(
                decision,
                PairingDecision::Keep {
                    pending: PendingChallenge { attempts: 1, ..live },
                    reason: PairingReason::Mismatch,
                }
            );
        }
    }

    #[test]
    fn challenge_codes_are_digits_of_the_asked_length_for_any_source(
        values in random_values(),
        digits in 0u32..=12,
        now in any::<u64>(),
        ttl in any::<u64>(),
    ) {
        let challenge = create_challenge(now, ttl, digits, &mut cycling(values), [3; 16]);
        prop_assert_eq!(challenge.code.len(), digits as usize);
        prop_assert!(challenge.code.bytes().all(|b| b.is_ascii_digit()), "{}", challenge.code);
        prop_assert_eq!(challenge.pending.attempts, 0);
        prop_assert_eq!(challenge.pending.digits, digits);
        prop_assert_eq!(challenge.pending.expires_at, now.saturating_add(ttl));
        // Only the hash is kept, and it recognises the code and nothing shorter or longer.
        prop_assert!(challenge.pending.hash.matches(&challenge.code));
        let longer = format!("{}0", challenge.code);
        prop_assert!(!challenge.pending.hash.matches(&longer));
    }
}
