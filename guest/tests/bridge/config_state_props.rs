//! Property tests for config loading and session state: no input makes them panic,
//! no secret-looking transport value gets through (I10), and state survives a round trip.

use guest::core::code_hash::CodeHash;
use guest::core::state::{
    CardRecord, ConversationTarget, PendingChallenge, PromptMark, RunningTurn, SessionState,
    parse_session_state, serialize_session_state,
};
use guest::keys::{ConversationKey, Identity};
use guest::model::{ConfigContent, ConfigScope, ConfigSource, Level, SettingKind, SettingValue};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Keys the code looks for, so generated trees reach deep validation paths, not just
/// "unknown key".
const KNOWN_KEYS: &[&str] = &[
    "bridge",
    "transports",
    "telegram",
    "discord",
    "slack",
    "robo_claw",
    "terminal",
    "matrix",
    "enabled",
    "tokenEnv",
    "appTokenEnv",
    "baseUrl",
    "gatewayUrl",
    "lockStaleMs",
    "host",
    "port",
    "selfSenderId",
    "localCommand",
    "remotePrefixes",
    "botUsername",
    "busyDelivery",
    "pairingTtlMs",
    "pairingDigits",
    "pairingMaxAttempts",
    "pairingMaxFailuresPerHour",
    "allowUsers",
    "requirePairing",
    "requireAddressing",
    "digest",
    "maxLength",
    "attachments",
    "allowedMediaTypes",
    "maxCount",
    "maxBytes",
    "broadcast",
    "progress",
    "replies",
    "rateLimit",
    "promptsPerMinute",
    "commandsPerMinute",
    "progressMinIntervalMs",
    "remoteToolPolicy",
    "remoteToolApproval",
    "remoteApproval",
    "enabled",
    "timeoutMs",
    "maxChunks",
    "updatedAt",
    "trusted",
    "pending",
    "paused",
    "conversations",
    "code",
    "expiresAt",
    "attempts",
    "transport",
    "conversationId",
    "threadId",
    "token",
];

fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(KNOWN_KEYS).prop_map(String::from),
        ".{0,12}"
    ]
}

/// Arbitrary JSON trees, biased towards the shapes and keys the code reads.
fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        (0i64..70_000).prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
        "[a-z]{1,6}:[0-9a-z]{1,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((arb_key(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

use crate::support::platforms;

use crate::support::secret_tokens;

fn load_config(sources: &[ConfigSource]) -> guest::core::config::LoadedConfig {
    guest::core::config::load_config(sources, &platforms::platforms())
}

fn source(scope: &str, text: String) -> ConfigSource {
    let scope = match scope {
        "global" => ConfigScope::Global,
        "project" => ConfigScope::Project,
        _ => ConfigScope::Override,
    };
    ConfigSource {
        scope,
        path: format!("/{}/bot-connect.json", scope.label()),
        content: ConfigContent::Text(text),
    }
}

/// Secrets of every shape the detector knows, paired with a key that holds them.
fn arb_secret() -> impl Strategy<Value = (String, String)> {
    // Every shape as the platforms issue it (support/secret_tokens.rs): Discord tokens come
    // from real 17–20 digit ids, not from a pattern that allowed impossible lengths and `_`
    // that could now and then slip past detection. Plus a bare high-entropy key.
    let shaped = prop_oneof![
        4 => secret_tokens::token().prop_map(|(_, token)| token),
        1 => "[A-Za-z0-9+/=]{30,40}".prop_map(|body| format!("a1{body}")),
    ];
    let prefix = prop::sample::select(&["", "Bearer ", "token="][..]);
    let any_key = prop_oneof![
        prop::sample::select(
            &[
                "tokenEnv",
                "appTokenEnv",
                "baseUrl",
                "gatewayUrl",
                "host",
                "selfSenderId",
                "port"
            ][..]
        )
        .prop_map(String::from),
        "[a-z]{1,10}",
    ];
    let named_key = prop::sample::select(
        &[
            "token", "botToken", "appToken", "secret", "password", "apiKey",
        ][..],
    );
    prop_oneof![
        (any_key, prefix, shaped)
            .prop_map(|(key, prefix, secret)| (key, format!("{prefix}{secret}"))),
        (named_key, "[A-Za-z]{12,20}").prop_map(|(key, secret)| (key.to_string(), secret)),
    ]
}

fn arb_state() -> impl Strategy<Value = SessionState> {
    let trusted = prop::collection::btree_map("[a-z]{1,8}:[A-Za-z0-9]{1,10}", any::<u64>(), 0..5);
    let challenge = ("[0-9]{1,10}", any::<[u8; 16]>(), any::<u64>(), any::<u32>()).prop_map(
        |(code, salt, expires_at, attempts)| PendingChallenge {
            hash: CodeHash::new(&code, salt),
            digits: code.len() as u32,
            expires_at,
            attempts,
        },
    );
    let pending = prop::collection::btree_map(".{0,20}", challenge, 0..5);
    let paused = prop::collection::btree_set(".{0,20}", 0..5);
    let following = prop::collection::btree_set(".{0,20}", 0..5);
    let target = (".{1,10}", ".{1,10}", prop::option::of(".{1,10}")).prop_map(
        |(transport, conversation_id, thread_id)| ConversationTarget {
            transport,
            conversation_id,
            thread_id,
        },
    );
    let conversations = prop::collection::vec(target.clone(), 0..6);
    let card = (target.clone(), prop::option::of(".{0,10}"))
        .prop_map(|(target, edit_key)| CardRecord { target, edit_key });
    let turn = prop::option::of(
        (
            any::<u64>(),
            any::<bool>(),
            prop::collection::vec(card, 0..4),
            prop::collection::vec(target.clone(), 0..3),
            prop::collection::vec((target.clone(), "[0-9]{1,12}"), 0..3),
        )
            .prop_map(
                |(started_at, remote, cards, audience, prompts)| RunningTurn {
                    started_at,
                    remote,
                    cards,
                    audience,
                    prompts: prompts
                        .into_iter()
                        .map(|(target, message_id)| PromptMark { target, message_id })
                        .collect(),
                },
            ),
    );
    (
        any::<u64>(),
        trusted,
        pending,
        paused,
        conversations,
        (turn, following),
    )
        .prop_map(
            |(updated_at, trusted, pending, paused, targets, (turn, following))| {
                let mut state = SessionState {
                    updated_at,
                    trusted: trusted
                        .into_iter()
                        .filter_map(|(identity, at)| Some((Identity::parse(&identity)?, at)))
                        .collect(),
                    pending: pending
                        .into_iter()
                        .map(|(key, challenge)| (ConversationKey::from_stored(&key), challenge))
                        .collect(),
                    paused: paused
                        .iter()
                        .map(|key| ConversationKey::from_stored(key))
                        .collect(),
                    following: following
                        .iter()
                        .map(|key| ConversationKey::from_stored(key))
                        .collect(),
                    conversations: vec![],
                    turn,
                    // Varied by the generated time; a count of nothing is not written, so
                    // it reads back as the default.
                    inbox: match updated_at % 7 {
                        0 => guest::core::state::InboxUse::default(),
                        bytes => guest::core::state::InboxUse {
                            day: updated_at % 100_000,
                            bytes,
                        },
                    },
                };
                for target in targets {
                    state.remember_conversation(target);
                }
                state
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn load_config_never_panics_on_any_json(global in arb_json(), bridge in arb_json(), transports in arb_json()) {
        let project = json!({ "bridge": bridge, "transports": transports });
        let loaded = load_config(&[
            source("global", global.to_string()),
            source("project", project.to_string()),
        ]);
        let _ = loaded.bridge.to_pretty_json();
        // Whatever the files held, a request carries only keys its platform declared, each
        // once, with a value of the declared kind: the host builds the transport from them.
        let platforms = platforms::platforms();
        for request in loaded.transports {
            let platform = platforms.iter().find(|p| p.id == request.id).expect("a declared platform");
            let mut seen = std::collections::BTreeSet::new();
            for entry in &request.settings {
                prop_assert!(seen.insert(entry.name.clone()), "{} twice", entry.name);
                let key = platform.settings.iter().find(|k| k.name == entry.name);
                let kind_fits = key.is_some_and(|key| matches!(
                    (&key.kind, &entry.value),
                    (SettingKind::Boolean, SettingValue::Boolean(_))
                        | (SettingKind::Integer { .. }, SettingValue::Integer(_))
                        | (SettingKind::EnvName | SettingKind::Url(_) | SettingKind::Text, SettingValue::Text(_))
                ));
                prop_assert!(kind_fits, "{}: {:?} does not fit its declaration", entry.name, entry.value);
            }
        }
    }

    #[test]
    fn load_config_never_panics_on_any_text(text in ".{0,200}") {
        let _ = load_config(&[source("override", text)]);
    }

    #[test]
    fn parse_session_state_never_panics(document in arb_json(), text in ".{0,200}") {
        let _ = parse_session_state(&document.to_string(), "s");
        let _ = parse_session_state(&text, "s");
    }

    #[test]
    fn a_secret_under_transports_is_refused_and_never_shown(
        id in prop::sample::select(&["telegram", "discord", "slack", "robo_claw", "terminal", "matrix"][..]),
        (key, secret) in arb_secret(),
        nested in any::<bool>(),
    ) {
        let (value, path) = if nested {
            (json!({ "inner": ["fine", secret] }), format!("transports.{id}.{key}.inner[1]"))
        } else {
            (json!(secret), format!("transports.{id}.{key}"))
        };
        let global = json!({ "transports": { id: { "enabled": true } } });
        // An override, which may set transport keys: a project file may not
        // (docs/security.md#project-files-only-narrow).
        let project = json!({ "transports": { id: { key.as_str(): value } } });
        let loaded = load_config(&[
            source("global", global.to_string()),
            source("override", project.to_string()),
        ]);
        for note in &loaded.notes {
            prop_assert!(!note.text.contains(&secret), "leaked in note {:?}", note.text);
        }
        for request in &loaded.transports {
            let shown = format!("{:?}", request.settings);
            prop_assert!(!shown.contains(&secret));
        }
        prop_assert!(!loaded.bridge.to_pretty_json().contains(&secret));
        let expected = format!("override config: {path}: this looks like a secret.");
        prop_assert!(
            loaded.notes.iter().any(|n| n.level == Level::Error && n.text.starts_with(&expected)),
            "no error at {path}: {:?}",
            loaded.notes
        );
    }

    #[test]
    fn state_survives_a_round_trip(state in arb_state()) {
        let (parsed, warnings) = parse_session_state(&serialize_session_state(&state), "s");
        prop_assert_eq!(warnings, Vec::<String>::new());
        prop_assert_eq!(parsed, state);
    }
}
