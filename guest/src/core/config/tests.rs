//! `load_config` end to end: every message text, merge order and transport requests.

use super::*;
use crate::keys::Identity;
use crate::model::{ConfigScope, DeliverAs};

use super::schema::{RemoteToolApproval, RemoteToolPolicy};

fn platforms() -> Vec<Platform> {
    super::test_platforms::platforms()
}

fn load_config(sources: &[ConfigSource]) -> LoadedConfig {
    super::load_config(sources, &platforms())
}

fn source(scope: &str, text: &str) -> ConfigSource {
    let scope = match scope {
        "global" => ConfigScope::Global,
        "project" => ConfigScope::Project,
        _ => ConfigScope::Override,
    };
    ConfigSource {
        scope,
        path: format!("/{}/bot-connect.json", scope.label()),
        content: ConfigContent::Text(text.into()),
    }
}

/// The credential variable a request names.
fn token_env(request: &TransportRequest) -> Option<String> {
    match request.setting("tokenEnv")? {
        SettingValue::Text(name) => Some(name.clone()),
        _ => None,
    }
}

/// A request's settings as one JSON object with sorted keys, so a table of expected
/// settings reads as the configuration file would write them.
fn settings_text(request: &TransportRequest) -> String {
    let object: serde_json::Map<String, Value> = request
        .settings
        .iter()
        .map(|entry| {
            let value = match &entry.value {
                SettingValue::Boolean(b) => Value::Bool(*b),
                SettingValue::Integer(n) => Value::from(*n),
                SettingValue::Text(text) => Value::from(text.as_str()),
            };
            (entry.name.clone(), value)
        })
        .collect();
    Value::Object(object).to_string()
}

/// The user's own file: a project file may only narrow
/// (docs/security.md#project-files-only-narrow), so the texts and values of every key are tried
/// here, and the project's narrowing in its own tests.
fn project(text: &str) -> LoadedConfig {
    load_config(&[source("global", text)])
}

const TELEGRAM_TOKEN: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";

/// The secret error as the spec words it, for `path` and its example variable.
fn secret_note(path: &str, example: &str) -> String {
    format!(
        "global config: {path}: this looks like a secret. Config files must not hold tokens: \
         export it in the environment and name the variable with \"tokenEnv\" (for example \
         \"tokenEnv\": \"{example}\")."
    )
}

#[test]
fn every_message_text_is_exact() {
    use Level::{Error, Info, Warning};
    let rows: &[(&str, Level, &str)] = &[
        (
            "[]",
            Error,
            "global config: expected a JSON object at the top level",
        ),
        (
            r#"{"x":1}"#,
            Warning,
            "global config: x: unknown top-level key, ignored",
        ),
        (
            r#"{"bridge":5}"#,
            Error,
            "global config: bridge: expected an object",
        ),
        (
            r#"{"bridge":{"foo":1}}"#,
            Warning,
            "global config: bridge.foo: unknown key, ignored",
        ),
        (
            r#"{"bridge":{"localCommand":"9x"}}"#,
            Error,
            "global config: bridge.localCommand: must start with a letter and contain only letters, digits or '-'",
        ),
        (
            r#"{"bridge":{"localCommand":5}}"#,
            Error,
            "global config: bridge.localCommand: expected a string, received number",
        ),
        (
            r#"{"bridge":{"remotePrefixes":"/"}}"#,
            Error,
            "global config: bridge.remotePrefixes: expected an array of strings",
        ),
        (
            r#"{"bridge":{"remotePrefixes":["/",""]}}"#,
            Error,
            "global config: bridge.remotePrefixes: entries must not be empty",
        ),
        (
            r#"{"bridge":{"botUsername":null}}"#,
            Error,
            "global config: bridge.botUsername: expected a string, received object",
        ),
        (
            r#"{"bridge":{"busyDelivery":"now"}}"#,
            Error,
            r#"global config: bridge.busyDelivery: expected "steer" or "followUp", received "now""#,
        ),
        (
            r#"{"bridge":{"pairingTtlMs":5}}"#,
            Error,
            "global config: bridge.pairingTtlMs: expected between 10000 and 86400000 ms",
        ),
        (
            r#"{"bridge":{"pairingTtlMs":"5"}}"#,
            Error,
            "global config: bridge.pairingTtlMs: expected a finite number",
        ),
        (
            r#"{"bridge":{"pairingDigits":3}}"#,
            Error,
            "global config: bridge.pairingDigits: expected an integer between 6 and 10, received 3",
        ),
        (
            r#"{"bridge":{"pairingDigits":4.5}}"#,
            Error,
            "global config: bridge.pairingDigits: expected an integer between 6 and 10, received 4.5",
        ),
        (
            r#"{"bridge":{"pairingDigits":"6"}}"#,
            Error,
            "global config: bridge.pairingDigits: expected an integer between 6 and 10, received string",
        ),
        (
            r#"{"bridge":{"pairingDigits":5}}"#,
            Error,
            "global config: bridge.pairingDigits: expected an integer between 6 and 10, received 5",
        ),
        (
            r#"{"bridge":{"pairingMaxFailuresPerHour":11}}"#,
            Error,
            "global config: bridge.pairingMaxFailuresPerHour: expected an integer between 1 and 10, received 11",
        ),
        (
            r#"{"bridge":{"pairingMaxFailuresPerHour":0}}"#,
            Error,
            "global config: bridge.pairingMaxFailuresPerHour: expected an integer between 1 and 10, received 0",
        ),
        (
            r#"{"bridge":{"pairingMaxAttempts":11}}"#,
            Error,
            "global config: bridge.pairingMaxAttempts: expected an integer between 1 and 10, received 11",
        ),
        (
            r#"{"bridge":{"allowUsers":["a","telegram:1","b c:d",":x"]}}"#,
            Error,
            r#"global config: bridge.allowUsers: entries must look like "transport:userId" (invalid: a, b c:d, :x)"#,
        ),
        (
            r#"{"bridge":{"allowUsers":[1]}}"#,
            Error,
            "global config: bridge.allowUsers: expected an array of strings",
        ),
        (
            r#"{"bridge":{"requirePairing":"yes"}}"#,
            Error,
            "global config: bridge.requirePairing: expected a boolean, received string",
        ),
        (
            r#"{"bridge":{"requireAddressing":[]}}"#,
            Error,
            "global config: bridge.requireAddressing: expected a boolean, received object",
        ),
        (
            r#"{"bridge":{"digest":1}}"#,
            Error,
            "global config: bridge.digest: expected an object",
        ),
        (
            r#"{"bridge":{"digest":{"maxLength":50}}}"#,
            Error,
            "global config: bridge.digest.maxLength: expected an integer between 100 and 10000, received 50",
        ),
        (
            r#"{"bridge":{"digest":{"x":1}}}"#,
            Warning,
            "global config: bridge.digest.x: unknown key, ignored",
        ),
        (
            r#"{"bridge":{"inbox":{"dir":"../elsewhere"}}}"#,
            Error,
            "global config: bridge.inbox.dir: must not contain '..': the inbox stays inside the working directory (received \"../elsewhere\"; the default is .pi/inbox/)",
        ),
        (
            r#"{"bridge":{"inbox":{"dir":"/tmp/in"}}}"#,
            Error,
            "global config: bridge.inbox.dir: must be relative to the working directory, not absolute (received \"/tmp/in\"; the default is .pi/inbox/)",
        ),
        (
            r#"{"bridge":{"inbox":{"dir":" "}}}"#,
            Error,
            "global config: bridge.inbox.dir: must not be empty (received \" \"; the default is .pi/inbox/)",
        ),
        (
            r#"{"bridge":{"inbox":{"maxFileBytes":40000000}}}"#,
            Error,
            "global config: bridge.inbox.maxFileBytes: expected an integer between 1024 and 33554432, received 40000000",
        ),
        (
            r#"{"bridge":{"inbox":{"keep":1}}}"#,
            Warning,
            "global config: bridge.inbox.keep: unknown key, ignored",
        ),
        (
            r#"{"bridge":{"voice":{"maxSeconds":0}}}"#,
            Error,
            "global config: bridge.voice.maxSeconds: expected an integer between 1 and 3600, received 0",
        ),
        (
            r#"{"bridge":{"voice":{"engine":"command"}}}"#,
            Error,
            "global config: bridge.voice.command: the command engine needs the program and its arguments, with {file} where the audio goes",
        ),
        (
            r#"{"bridge":{"attachments":"x"}}"#,
            Error,
            "global config: bridge.attachments: expected an object",
        ),
        (
            r#"{"bridge":{"attachments":{"allowedMediaTypes":["image/png"," "]}}}"#,
            Error,
            "global config: bridge.attachments.allowedMediaTypes: entries must not be empty",
        ),
        (
            r#"{"bridge":{"attachments":{"allowedMediaTypes":[]}}}"#,
            Error,
            "global config: bridge.attachments.allowedMediaTypes: expected a non-empty array of strings",
        ),
        (
            r#"{"bridge":{"attachments":{"allowedMediaTypes":"image/png"}}}"#,
            Error,
            "global config: bridge.attachments.allowedMediaTypes: expected an array of strings",
        ),
        (
            r#"{"bridge":{"attachments":{"maxCount":0}}}"#,
            Error,
            "global config: bridge.attachments.maxCount: expected an integer between 1 and 10, received 0",
        ),
        (
            r#"{"bridge":{"attachments":{"maxBytes":100}}}"#,
            Error,
            "global config: bridge.attachments.maxBytes: expected an integer between 1024 and 52428800, received 100",
        ),
        (
            r#"{"bridge":{"attachments":{"y":1}}}"#,
            Warning,
            "global config: bridge.attachments.y: unknown key, ignored",
        ),
        (
            r#"{"bridge":{"broadcast":1}}"#,
            Error,
            "global config: bridge.broadcast: expected an object",
        ),
        (
            r#"{"bridge":{"broadcast":{"replies":"no"}}}"#,
            Error,
            "global config: bridge.broadcast.replies: expected a boolean, received string",
        ),
        (
            r#"{"bridge":{"broadcast":{"z":true}}}"#,
            Warning,
            "global config: bridge.broadcast.z: unknown key, ignored",
        ),
        (
            r#"{"bridge":{"rateLimit":"x"}}"#,
            Error,
            "global config: bridge.rateLimit: expected an object",
        ),
        (
            r#"{"bridge":{"rateLimit":{"promptsPerMinute":-1}}}"#,
            Error,
            "global config: bridge.rateLimit.promptsPerMinute: expected an integer between 0 and 600, received -1",
        ),
        (
            r#"{"bridge":{"rateLimit":{"commandsPerMinute":601}}}"#,
            Error,
            "global config: bridge.rateLimit.commandsPerMinute: expected an integer between 0 and 600, received 601",
        ),
        (
            r#"{"bridge":{"rateLimit":{"q":1}}}"#,
            Warning,
            "global config: bridge.rateLimit.q: unknown key, ignored",
        ),
        (
            r#"{"bridge":{"progressMinIntervalMs":60001}}"#,
            Error,
            "global config: bridge.progressMinIntervalMs: expected an integer between 0 and 60000, received 60001",
        ),
        (
            r#"{"bridge":{"remoteToolPolicy":"all"}}"#,
            Error,
            r#"global config: bridge.remoteToolPolicy: expected "unrestricted", "read-only" or "no-tools", received "all""#,
        ),
        (
            r#"{"bridge":{"remoteToolApproval":true}}"#,
            Error,
            r#"global config: bridge.remoteToolApproval: expected "off" or "each", received boolean"#,
        ),
        (
            r#"{"bridge":{"remoteApproval":"sometimes"}}"#,
            Error,
            r#"global config: bridge.remoteApproval: expected "off", "on" or an object, received "sometimes""#,
        ),
        (
            r#"{"bridge":{"remoteApproval":{"timeoutMs":5}}}"#,
            Error,
            "global config: bridge.remoteApproval.timeoutMs: expected an integer between 10000 and 3600000, received 5",
        ),
        (
            r#"{"bridge":{"remoteApproval":{"enabled":"yes"}}}"#,
            Error,
            "global config: bridge.remoteApproval.enabled: expected a boolean, received string",
        ),
        (
            r#"{"bridge":{"remoteApproval":{"buttons":true}}}"#,
            Warning,
            "global config: bridge.remoteApproval.buttons: unknown key, ignored",
        ),
        (
            r#"{"bridge":{"maxChunks":0}}"#,
            Error,
            "global config: bridge.maxChunks: expected an integer between 1 and 50, received 0",
        ),
        (
            r#"{"bridge":{"maxInboundChars":99}}"#,
            Error,
            "global config: bridge.maxInboundChars: expected an integer between 100 and 1000000, received 99",
        ),
        (
            r#"{"transports":[]}"#,
            Error,
            "global config: transports: expected an object",
        ),
        (
            r#"{"transports":{"matrix":{}}}"#,
            Warning,
            "global config: transports.matrix: this host has no such transport, so it is ignored (available: telegram, discord, slack, robo_claw, terminal)",
        ),
        (
            r#"{"transports":{"telegram":1}}"#,
            Error,
            "global config: transports.telegram: expected an object",
        ),
        (
            r#"{"transports":{"telegram":{"foo":1}}}"#,
            Warning,
            "global config: transports.telegram.foo: unknown key, ignored",
        ),
        (
            r#"{"transports":{"terminal":{"tokenEnv":"X"}}}"#,
            Warning,
            "global config: transports.terminal.tokenEnv: unknown key, ignored",
        ),
        (
            r#"{"transports":{"telegram":{"enabled":"yes"}}}"#,
            Error,
            "global config: transports.telegram.enabled: expected a boolean, received string",
        ),
        (
            r#"{"transports":{"telegram":{"tokenEnv":"1BAD"}}}"#,
            Error,
            r#"global config: transports.telegram.tokenEnv: expected an environment variable name like "PI_TELEGRAM_TOKEN""#,
        ),
        (
            r#"{"transports":{"discord":{"tokenEnv":5}}}"#,
            Error,
            r#"global config: transports.discord.tokenEnv: expected an environment variable name like "PI_DISCORD_TOKEN""#,
        ),
        (
            r#"{"transports":{"slack":{"appTokenEnv":"A B"}}}"#,
            Error,
            r#"global config: transports.slack.appTokenEnv: expected an environment variable name like "PI_SLACK_APP_TOKEN""#,
        ),
        (
            r#"{"transports":{"telegram":{"baseUrl":"ftp://example.com"}}}"#,
            Error,
            "global config: transports.telegram.baseUrl: expected a URL starting with http:// or https://",
        ),
        (
            r#"{"transports":{"discord":{"gatewayUrl":"https://gateway.discord.gg"}}}"#,
            Error,
            "global config: transports.discord.gatewayUrl: expected a URL starting with ws:// or wss://",
        ),
        (
            r#"{"transports":{"telegram":{"lockStaleMs":10}}}"#,
            Error,
            "global config: transports.telegram.lockStaleMs: expected an integer between 1000 and 86400000, received 10",
        ),
        (
            r#"{"transports":{"robo_claw":{"port":0}}}"#,
            Error,
            "global config: transports.robo_claw.port: expected an integer between 1 and 65535, received 0",
        ),
        (
            r#"{"transports":{"robo_claw":{"host":5}}}"#,
            Error,
            "global config: transports.robo_claw.host: expected a string, received number",
        ),
        (
            r#"{"transports":{"robo_claw":{"selfSenderId":""}}}"#,
            Error,
            "global config: transports.robo_claw.selfSenderId: must not be empty",
        ),
        (
            r#"{"transports":{"telegram":{"enabled":false}}}"#,
            Info,
            "disabled transports: telegram",
        ),
    ];
    for (text, level, message) in rows {
        // The fail-closed notes a broken guard adds are checked exactly by their own test.
        let notes: Vec<Note> = project(text)
            .notes
            .into_iter()
            .filter(|n| !n.text.starts_with("failing closed:"))
            .collect();
        assert_eq!(notes, vec![Note::new(*level, *message)], "config {text}");
    }
}

#[test]
fn secret_messages_name_the_path_and_the_transports_variable() {
    let rows: &[(String, String)] = &[
        (
            r#"{"transports":{"telegram":{"token":"hunter2"}}}"#.into(),
            secret_note("transports.telegram.token", "PI_TELEGRAM_TOKEN"),
        ),
        (
            format!(r#"{{"transports":{{"discord":{{"tokenEnv":"{TELEGRAM_TOKEN}"}}}}}}"#),
            secret_note("transports.discord.tokenEnv", "PI_DISCORD_TOKEN"),
        ),
        (
            format!(
                r#"{{"transports":{{"slack":{{"extra":{{"deep":["ok","{TELEGRAM_TOKEN}"]}}}}}}}}"#
            ),
            secret_note("transports.slack.extra.deep[1]", "PI_SLACK_BOT_TOKEN"),
        ),
        (
            format!(r#"{{"transports":{{"robo_claw":"{TELEGRAM_TOKEN}"}}}}"#),
            secret_note("transports.robo_claw", "PI_ROBO_CLAW_TOKEN"),
        ),
        (
            format!(r#"{{"transports":{{"telegram":{{"{TELEGRAM_TOKEN}":true}}}}}}"#),
            secret_note("transports.telegram.(hidden key)", "PI_TELEGRAM_TOKEN"),
        ),
        (
            format!(r#"{{"transports":{{"{TELEGRAM_TOKEN}":{{}}}}}}"#),
            secret_note("transports.(hidden key)", "PI_TELEGRAM_TOKEN"),
        ),
        (
            format!(r#"{{"transports":"{TELEGRAM_TOKEN}"}}"#),
            secret_note("transports", "PI_TELEGRAM_TOKEN"),
        ),
    ];
    for (text, message) in rows {
        let loaded = project(text);
        assert!(
            loaded
                .notes
                .contains(&Note::new(Level::Error, message.as_str())),
            "config {text}: {:?}",
            loaded.notes
        );
        assert!(
            loaded
                .notes
                .iter()
                .all(|note| !note.text.contains("AAHdqTcv"))
        );
        assert!(
            !loaded
                .notes
                .iter()
                .any(|note| note.text.contains("environment variable name"))
        );
    }
}

#[test]
fn a_credential_name_covers_nested_values() {
    let loaded = project(r#"{"transports":{"slack":{"password":{"value":["hunter2"]}}}}"#);
    assert_eq!(
        loaded.notes,
        vec![Note::new(
            Level::Error,
            secret_note("transports.slack.password.value[0]", "PI_SLACK_BOT_TOKEN")
        )]
    );
}

#[test]
fn secrets_under_unknown_transports_are_still_refused() {
    let loaded = project(&format!(
        r#"{{"transports":{{"matrix":{{"key":"{TELEGRAM_TOKEN}"}}}}}}"#
    ));
    assert!(loaded.notes.contains(&Note::new(
        Level::Error,
        secret_note("transports.matrix.key", "PI_TELEGRAM_TOKEN")
    )));
    assert!(loaded.transports.is_empty());
}

/// Found by fuzzing: the bridge section applied and quoted secret-shaped
/// values, and notes quoted secret-shaped keys.
#[test]
fn bridge_values_and_any_key_holding_a_secret_are_neither_applied_nor_echoed() {
    let text = format!(
        r#"{{"bridge":{{"remotePrefixes":["{TELEGRAM_TOKEN}"],"busyDelivery":"{TELEGRAM_TOKEN}","remoteToolPolicy":"{TELEGRAM_TOKEN}","{TELEGRAM_TOKEN}":1}},"{TELEGRAM_TOKEN}":{{}}}}"#
    );
    let loaded = project(&text);
    let secret = "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
    for note in &loaded.notes {
        assert!(!note.text.contains(secret), "{note:?}");
    }
    assert!(!format!("{loaded:?}").contains(secret));
    assert!(!loaded.bridge.to_pretty_json().contains(secret));
    assert_eq!(
        loaded.bridge.remote_prefixes,
        BridgeConfig::default().remote_prefixes
    );
    assert!(loaded.notes.contains(&Note::new(
        Level::Error,
        "global config: bridge.remotePrefixes: this looks like a secret. Config files must not \
         hold tokens; the value was not applied"
            .to_string()
    )));
    // A guard holding a secret is an invalid guard: it fails closed.
    assert!(
        loaded
            .fail_closed
            .iter()
            .any(|failed| failed.guard == Guard::RemoteToolPolicy),
        "{:?}",
        loaded.fail_closed
    );
}

#[test]
fn a_secret_token_env_is_not_applied() {
    let loaded = project(&format!(
        r#"{{"transports":{{"telegram":{{"tokenEnv":"{TELEGRAM_TOKEN}"}}}}}}"#
    ));
    assert_eq!(loaded.transports.len(), 1);
    assert_eq!(
        token_env(&loaded.transports[0]).as_deref(),
        Some("PI_TELEGRAM_TOKEN")
    );
}

#[test]
fn invalid_json_is_an_error_naming_the_file_and_contributes_nothing() {
    let loaded = load_config(&[
        source("global", r#"{"bridge":{"maxChunks":10}}"#),
        source("override", r#"{"bridge":{"maxChunks":20"#),
    ]);
    let serde_error = serde_json::from_str::<Value>(r#"{"bridge":{"maxChunks":20"#)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(!serde_error.is_empty());
    // An error, no longer the original's warning: the file was not applied at all.
    assert_eq!(
        loaded.notes[0],
        Note::new(
            Level::Error,
            format!("override config: invalid JSON in /override/bot-connect.json: {serde_error}")
        )
    );
    assert_eq!(loaded.bridge.max_chunks, 10);
}

/// A strict config, as `examples/strict.json` writes it.
const STRICT: &str = r#"{"bridge":{"remoteToolPolicy":"no-tools","remoteToolApproval":"each"}}"#;

fn unreadable(scope: ConfigScope) -> ConfigSource {
    ConfigSource {
        scope,
        path: format!("/{}/bot-connect.json", scope.label()),
        content: ConfigContent::Unreadable("permission denied".into()),
    }
}

/// The fail-closed note for `cause` and the listed guards, as the person reads it.
fn fail_closed_text(cause: &str, values: &str) -> String {
    format!(
        "failing closed: {cause}, so the strictest value is in force for {values}. These \
         settings guard what messenger turns may do; fix the config to use your own."
    )
}

const ALL_STRICTEST: &str = "remoteToolPolicy \"no-tools\", remoteToolApproval \"each\", \
    remoteScope {\"allowTools\": []}, requirePairing true, allowUsers [], requireAddressing true";

#[test]
fn a_broken_file_or_guard_value_fails_closed_and_says_so() {
    let permissive = r#"{"bridge":{"remoteToolPolicy":"unrestricted","requirePairing":false,
        "allowUsers":["telegram:1"],"requireAddressing":false}}"#;
    // (case, sources, expected policy, approval, the fail-closed notes)
    type Row = (
        &'static str,
        Vec<ConfigSource>,
        RemoteToolPolicy,
        RemoteToolApproval,
        Vec<String>,
    );
    let rows: Vec<Row> = vec![
        (
            "a strict config with one trailing comma",
            vec![source(
                "override",
                r#"{"bridge":{"remoteToolPolicy":"no-tools","remoteToolApproval":"each",}}"#,
            )],
            RemoteToolPolicy::NoTools,
            RemoteToolApproval::Each,
            vec![fail_closed_text(
                "the override config /override/bot-connect.json is not valid JSON",
                ALL_STRICTEST,
            )],
        ),
        (
            "an invalid policy value",
            vec![source(
                "override",
                r#"{"bridge":{"remoteToolPolicy":"yolo"}}"#,
            )],
            RemoteToolPolicy::NoTools,
            RemoteToolApproval::Off,
            vec![fail_closed_text(
                "the override config /override/bot-connect.json has an invalid bridge.remoteToolPolicy",
                "remoteToolPolicy \"no-tools\"",
            )],
        ),
        (
            "an unreadable project file may have held the limits",
            vec![
                source("global", permissive),
                unreadable(ConfigScope::Project),
            ],
            RemoteToolPolicy::NoTools,
            RemoteToolApproval::Each,
            vec![fail_closed_text(
                "the project config /project/bot-connect.json cannot be read",
                ALL_STRICTEST,
            )],
        ),
        (
            "not an object at the top level",
            vec![source("override", "[]")],
            RemoteToolPolicy::NoTools,
            RemoteToolApproval::Each,
            vec![fail_closed_text(
                "the override config /override/bot-connect.json is not a JSON object",
                ALL_STRICTEST,
            )],
        ),
        (
            "a bridge section that is not an object",
            vec![source("override", r#"{"bridge":"strict"}"#)],
            RemoteToolPolicy::NoTools,
            RemoteToolApproval::Each,
            vec![fail_closed_text(
                "the override config /override/bot-connect.json has a `bridge` that is not an object",
                ALL_STRICTEST,
            )],
        ),
        (
            "a broken global under a project that sets the policy: the project wins there",
            vec![
                source("global", "{,}"),
                source("override", r#"{"bridge":{"remoteToolPolicy":"read-only"}}"#),
            ],
            RemoteToolPolicy::ReadOnly,
            RemoteToolApproval::Each,
            vec![fail_closed_text(
                "the global config /global/bot-connect.json is not valid JSON",
                "remoteToolApproval \"each\", remoteScope {\"allowTools\": []}, requirePairing true, allowUsers [], \
                 requireAddressing true",
            )],
        ),
        (
            "an invalid global value under a valid project value",
            vec![
                source("global", r#"{"bridge":{"remoteToolApproval":"sometimes"}}"#),
                source("override", r#"{"bridge":{"remoteToolApproval":"off"}}"#),
            ],
            RemoteToolPolicy::ReadOnly,
            RemoteToolApproval::Off,
            vec![],
        ),
        (
            "every other guard's invalid value",
            vec![source(
                "global",
                r#"{"bridge":{"requirePairing":"no","allowUsers":["bare"],"requireAddressing":0}}"#,
            )],
            RemoteToolPolicy::ReadOnly,
            RemoteToolApproval::Off,
            vec![
                fail_closed_text(
                    "the global config /global/bot-connect.json has an invalid bridge.requirePairing",
                    "requirePairing true",
                ),
                fail_closed_text(
                    "the global config /global/bot-connect.json has an invalid bridge.allowUsers",
                    "allowUsers []",
                ),
                fail_closed_text(
                    "the global config /global/bot-connect.json has an invalid bridge.requireAddressing",
                    "requireAddressing true",
                ),
            ],
        ),
        (
            "a misspelt guard key",
            vec![source(
                "override",
                r#"{"bridge":{"remoteToolPolcy":"unrestricted"}}"#,
            )],
            RemoteToolPolicy::NoTools,
            RemoteToolApproval::Off,
            vec![fail_closed_text(
                "the override config /override/bot-connect.json has bridge.remoteToolPolcy, which \
                 looks like a misspelt bridge.remoteToolPolicy",
                "remoteToolPolicy \"no-tools\"",
            )],
        ),
        (
            "a misspelt bridge section",
            vec![source(
                "override",
                r#"{"brigde":{"remoteToolPolicy":"no-tools"}}"#,
            )],
            RemoteToolPolicy::NoTools,
            RemoteToolApproval::Each,
            vec![fail_closed_text(
                "the override config /override/bot-connect.json has `brigde`, which looks like a \
                 misspelt `bridge`",
                ALL_STRICTEST,
            )],
        ),
        (
            "a strict config as written",
            vec![source("override", STRICT)],
            RemoteToolPolicy::NoTools,
            RemoteToolApproval::Each,
            vec![],
        ),
        (
            "no config at all",
            vec![],
            RemoteToolPolicy::ReadOnly,
            RemoteToolApproval::Off,
            vec![],
        ),
    ];
    for (case, sources, policy, approval, expected) in rows {
        let loaded = load_config(&sources);
        assert_eq!(loaded.bridge.remote_tool_policy, policy, "{case}");
        assert_eq!(loaded.bridge.remote_tool_approval, approval, "{case}");
        let notes: Vec<&Note> = loaded
            .notes
            .iter()
            .filter(|n| n.text.starts_with("failing closed:"))
            .collect();
        let texts: Vec<String> = notes.iter().map(|n| n.text.clone()).collect();
        assert_eq!(texts, expected, "{case}");
        assert!(notes.iter().all(|n| n.level == Level::Error), "{case}");
        assert_eq!(loaded.fail_closed.is_empty(), expected.is_empty(), "{case}");
        if expected.len() == 1 && expected[0].contains("requireAddressing true") {
            assert!(loaded.bridge.require_pairing && loaded.bridge.require_addressing);
            assert!(loaded.bridge.allow_users.is_empty(), "{case}");
        }
    }
}

#[test]
fn the_default_lets_remote_turns_look_but_not_change() {
    assert_eq!(
        BridgeConfig::default().remote_tool_policy,
        RemoteToolPolicy::ReadOnly
    );
}

#[test]
fn no_sources_give_defaults_and_no_transports() {
    let loaded = load_config(&[]);
    assert_eq!(loaded.bridge, BridgeConfig::default());
    assert!(loaded.transports.is_empty());
    assert!(loaded.notes.is_empty());
}

#[test]
fn project_beats_global_per_key() {
    let loaded = load_config(&[
        source("global", r#"{"bridge":{"maxChunks":10,"pairingDigits":8}}"#),
        source("override", r#"{"bridge":{"maxChunks":20}}"#),
    ]);
    assert_eq!(loaded.bridge.max_chunks, 20);
    assert_eq!(loaded.bridge.pairing_digits, 8);
    assert_eq!(loaded.bridge.pairing_max_attempts, 3);
}

#[test]
fn nested_objects_merge_field_wise_across_sources_and_over_defaults() {
    let loaded = load_config(&[
        source(
            "global",
            r#"{"bridge":{"attachments":{"maxCount":2},"rateLimit":{"promptsPerMinute":5}}}"#,
        ),
        source(
            "override",
            r#"{"bridge":{"attachments":{"maxBytes":2048},"broadcast":{"replies":false}}}"#,
        ),
    ]);
    let bridge = loaded.bridge;
    assert_eq!(bridge.attachments.max_count, 2);
    assert_eq!(bridge.attachments.max_bytes, 2048);
    assert_eq!(bridge.attachments.allowed_media_types.len(), 4);
    assert_eq!(
        bridge.rate_limit,
        RateLimitSettings {
            prompts_per_minute: 5,
            commands_per_minute: 60
        }
    );
    assert_eq!(
        bridge.broadcast,
        BroadcastSettings {
            progress: true,
            replies: false
        }
    );
}

#[test]
fn an_invalid_project_value_keeps_the_global_one() {
    let loaded = load_config(&[
        source("global", r#"{"bridge":{"maxChunks":10}}"#),
        source(
            "override",
            r#"{"bridge":{"maxChunks":0,"pairingDigits":7}}"#,
        ),
    ]);
    assert_eq!(loaded.bridge.max_chunks, 10);
    assert_eq!(loaded.bridge.pairing_digits, 7);
    assert_eq!(loaded.notes.len(), 1);
}

#[test]
fn a_blank_media_type_discards_the_whole_attachments_section() {
    let loaded = project(
        r#"{"bridge":{"attachments":{"maxCount":2,"allowedMediaTypes":["image/png",""]}}}"#,
    );
    assert_eq!(
        loaded.bridge.attachments,
        BridgeConfig::default().attachments
    );
}

#[test]
fn values_are_normalized() {
    let loaded = project(
        r#"{"bridge":{"botUsername":"@MyBot","localCommand":"Bot-Connect","busyDelivery":"steer",
            "remoteToolPolicy":"read-only","remoteToolApproval":"each","allowUsers":["telegram:42"],
            "pairingTtlMs":60000,"digest":{"maxLength":200}}}"#,
    );
    let bridge = loaded.bridge;
    assert_eq!(bridge.bot_username.as_deref(), Some("MyBot"));
    assert_eq!(bridge.local_command, "bot-connect");
    assert_eq!(bridge.busy_delivery, DeliverAs::Steer);
    assert_eq!(bridge.remote_tool_policy, RemoteToolPolicy::ReadOnly);
    assert_eq!(bridge.remote_tool_approval, RemoteToolApproval::Each);
    assert_eq!(bridge.allow_users, vec![Identity::new("telegram", "42")]);
    assert_eq!(bridge.pairing_ttl_ms, 60_000);
    assert_eq!(bridge.digest_max_length, 200);
    assert!(loaded.notes.is_empty());
}

#[test]
fn transports_merge_per_id_and_field_wise() {
    let loaded = load_config(&[
        source(
            "global",
            r#"{"transports":{"telegram":{"tokenEnv":"MY_TG","lockStaleMs":5000}}}"#,
        ),
        source(
            "override",
            r#"{"transports":{"telegram":{"enabled":true},"discord":{}}}"#,
        ),
    ]);
    let requests: Vec<(&str, bool, String)> = loaded
        .transports
        .iter()
        .map(|t| (t.id.as_str(), t.required, settings_text(t)))
        .collect();
    assert_eq!(
        requests,
        vec![
            (
                "telegram",
                true,
                r#"{"lockStaleMs":5000,"tokenEnv":"MY_TG"}"#.to_string()
            ),
            (
                "discord",
                false,
                r#"{"lockStaleMs":900000,"tokenEnv":"PI_DISCORD_TOKEN"}"#.to_string()
            ),
        ]
    );
}

#[test]
fn project_can_disable_a_globally_enabled_transport() {
    let loaded = load_config(&[
        source(
            "global",
            r#"{"transports":{"telegram":{"enabled":true},"slack":{"enabled":false}}}"#,
        ),
        source(
            "override",
            r#"{"transports":{"telegram":{"enabled":false}}}"#,
        ),
    ]);
    assert!(loaded.transports.is_empty());
    assert_eq!(
        loaded.notes,
        vec![Note::new(
            Level::Info,
            "disabled transports: telegram, slack"
        )]
    );
}

#[test]
fn transports_come_out_in_fixed_order_with_defaults_applied() {
    let loaded = project(
        r#"{"transports":{"terminal":{},"robo_claw":{"port":6000},"slack":{},
            "discord":{"gatewayUrl":"wss://gateway.discord.gg/?v=10&encoding=json"},
            "telegram":{"baseUrl":"https://api.telegram.org"}}}"#,
    );
    assert!(loaded.notes.is_empty(), "{:?}", loaded.notes);
    let texts: Vec<String> = loaded.transports.iter().map(settings_text).collect();
    let rows: Vec<(&str, Option<String>, &str)> = loaded
        .transports
        .iter()
        .zip(&texts)
        .map(|(t, text)| (t.id.as_str(), token_env(t), text.as_str()))
        .collect();
    assert_eq!(
        rows,
        vec![
            (
                "telegram",
                Some("PI_TELEGRAM_TOKEN".into()),
                r#"{"baseUrl":"https://api.telegram.org","lockStaleMs":900000,"tokenEnv":"PI_TELEGRAM_TOKEN"}"#
            ),
            (
                "discord",
                Some("PI_DISCORD_TOKEN".into()),
                r#"{"gatewayUrl":"wss://gateway.discord.gg/?v=10&encoding=json","lockStaleMs":900000,"tokenEnv":"PI_DISCORD_TOKEN"}"#
            ),
            (
                "slack",
                Some("PI_SLACK_BOT_TOKEN".into()),
                r#"{"appTokenEnv":"PI_SLACK_APP_TOKEN","lockStaleMs":900000,"tokenEnv":"PI_SLACK_BOT_TOKEN"}"#
            ),
            (
                "robo_claw",
                Some("PI_ROBO_CLAW_TOKEN".into()),
                r#"{"host":"0.0.0.0","lockStaleMs":900000,"port":6000,"selfSenderId":"robot","tokenEnv":"PI_ROBO_CLAW_TOKEN"}"#
            ),
            ("terminal", None, "{}"),
        ]
    );
}

#[test]
fn the_override_scope_prefixes_its_notes() {
    let loaded = load_config(&[source("override", r#"{"bridge":{"maxChunks":0}}"#)]);
    assert_eq!(
        loaded.notes[0].text,
        "override config: bridge.maxChunks: expected an integer between 1 and 50, received 0"
    );
}

#[test]
fn remote_approval_reads_a_word_or_an_object() {
    let on = project(r#"{"bridge":{"remoteApproval":"on"}}"#).bridge;
    assert!(on.remote_approval.enabled);
    assert_eq!(on.remote_approval.timeout_ms, 60_000);
    let tuned =
        project(r#"{"bridge":{"remoteApproval":{"enabled":true,"timeoutMs":30000}}}"#).bridge;
    assert!(tuned.remote_approval.enabled);
    assert_eq!(tuned.remote_approval.timeout_ms, 30_000);
    let off = project(r#"{"bridge":{"remoteApproval":"off"}}"#).bridge;
    assert!(!off.remote_approval.enabled);
}

/// Found by fuzzing: a value is no secret while a line break parts it, but the
/// JSON shown writes that break as `\n`, which joins it into a URL credential.
#[test]
fn the_config_as_shown_is_redacted_as_shown() {
    let loaded = project(r#"{"bridge":{"remotePrefixes":["git https://deploy:Sup3r\n(x@host "]}}"#);
    let shown = loaded.bridge.to_pretty_json();
    assert!(!shown.contains("deploy:Sup3r"), "{shown}");
    assert!(shown.contains("https://[redacted]@host"), "{shown}");
}

#[test]
fn a_project_file_may_not_choose_the_cluster_login_or_key() {
    let loaded = load_config(&[source("project", r#"{"cluster":{"credsFile":"n.creds"}}"#)]);
    assert_eq!(
        loaded.notes,
        vec![Note::new(
            Level::Warning,
            "project config: cluster: ignored in a project file; put the cluster settings in \
             your own config file (~/.pi/agent/bot-connect.json or PI_BOT_CONNECT_CONFIG)"
        )]
    );
}

#[test]
fn the_users_own_file_may_hold_a_cluster_object() {
    // `serve --nats` reads it (host-shim cluster/trust_settings.rs); the bridge says nothing.
    let loaded = load_config(&[source(
        "global",
        r#"{"cluster":{"credsFile":"n.creds","clusterKeyEnv":"CK"}}"#,
    )]);
    assert!(loaded.notes.is_empty(), "{:?}", loaded.notes);
    let loaded = load_config(&[source("global", r#"{"cluster":5}"#)]);
    assert!(
        loaded
            .notes
            .iter()
            .any(|n| n.text.contains("cluster: must be an object")),
        "{:?}",
        loaded.notes
    );
}

/// A project file may only narrow (docs/security.md#project-files-only-narrow), as a cloned
/// repository would try it: its `.pi/bot-connect.json` points the
/// user's telegram at its own host over plain http, renames the token variable, trusts
/// itself, turns pairing off, makes remote turns unrestricted and the code four digits.
/// Each key is ignored with a warning naming it and the file; the user's values stand.
#[test]
fn a_project_file_cannot_widen_or_redirect_anything() {
    let user = source(
        "global",
        r#"{"bridge":{"allowUsers":["telegram:1"]},
            "transports":{"telegram":{"tokenEnv":"MY_TG","baseUrl":"https://api.telegram.org"}}}"#,
    );
    let attacker = source(
        "project",
        r#"{"bridge":{"allowUsers":["telegram:666"],"requirePairing":false,
                      "remoteToolPolicy":"unrestricted","pairingDigits":6,"pairingTtlMs":86400000,
                      "pairingMaxFailuresPerHour":1,"remoteApproval":"on"},
            "transports":{"telegram":{"baseUrl":"https://evil.example","tokenEnv":"AWS_SECRET_ACCESS_KEY"},
                          "discord":{"enabled":true,"tokenEnv":"GITHUB_TOKEN"}}}"#,
    );
    let loaded = load_config(&[user.clone(), attacker]);
    let alone = load_config(&[user]);
    assert_eq!(
        loaded.bridge, alone.bridge,
        "the user's bridge values stand"
    );
    assert_eq!(
        loaded.transports, alone.transports,
        "the user's transports stand"
    );
    assert_eq!(token_env(&loaded.transports[0]).as_deref(), Some("MY_TG"));
    let ignored = [
        "bridge.pairingTtlMs",
        "bridge.pairingMaxFailuresPerHour",
        "bridge.allowUsers",
        "bridge.requirePairing",
        "bridge.remoteToolPolicy",
        "bridge.remoteApproval.enabled",
        "transports.discord.enabled",
        "transports.discord.tokenEnv",
        "transports.telegram.baseUrl",
        "transports.telegram.tokenEnv",
    ];
    for key in ignored {
        let warned = loaded.notes.iter().any(|n| {
            n.level == Level::Warning
                && n.text.starts_with(&format!(
                    "project config: {key}: ignored: the project file /project/bot-connect.json may only narrow"
                ))
        });
        assert!(warned, "no warning for {key}: {:#?}", loaded.notes);
        assert!(
            loaded
                .project_ignored
                .contains(&format!("{key} in /project/bot-connect.json")),
            "{key} not listed for doctor: {:?}",
            loaded.project_ignored
        );
    }
    // pairingDigits 6 equals the user's (the default): nothing widened, nothing to say.
    assert_eq!(
        loaded.project_ignored.len(),
        ignored.len(),
        "{:?}",
        loaded.project_ignored
    );
}

#[test]
fn a_project_file_with_four_digits_gets_the_floor_error_and_is_not_applied() {
    let loaded = load_config(&[source("project", r#"{"bridge":{"pairingDigits":4}}"#)]);
    assert_eq!(loaded.bridge.pairing_digits, 6);
    assert!(loaded.notes.iter().any(|n| n.level == Level::Error
        && n.text
            == "project config: bridge.pairingDigits: expected an integer between 6 and 10, received 4"));
}

#[test]
fn a_project_file_may_narrow_and_enable_what_the_user_configured() {
    let user = source(
        "global",
        r#"{"bridge":{"remoteToolPolicy":"unrestricted","requireAddressing":false},
            "transports":{"telegram":{"enabled":false}}}"#,
    );
    let project_file = source(
        "project",
        r#"{"bridge":{"remoteToolPolicy":"read-only","requireAddressing":true,"maxChunks":2,
                      "remoteToolApproval":"each"},
            "transports":{"telegram":{"enabled":true}}}"#,
    );
    let loaded = load_config(&[user, project_file]);
    assert_eq!(loaded.bridge.remote_tool_policy, RemoteToolPolicy::ReadOnly);
    assert_eq!(loaded.bridge.remote_tool_approval, RemoteToolApproval::Each);
    assert!(loaded.bridge.require_addressing);
    assert_eq!(loaded.bridge.max_chunks, 2);
    assert_eq!(
        loaded.transports.len(),
        1,
        "telegram enabled by the project"
    );
    assert!(
        loaded.project_ignored.is_empty(),
        "{:?}",
        loaded.project_ignored
    );
    assert!(
        !loaded.notes.iter().any(|n| n.level != Level::Info),
        "{:#?}",
        loaded.notes
    );
}

#[test]
fn plain_http_base_urls_only_to_loopback_in_any_file() {
    let loaded = load_config(&[source(
        "global",
        r#"{"transports":{"telegram":{"baseUrl":"http://evil.example/"},
                          "discord":{"baseUrl":"http://127.0.0.1:9000"}}}"#,
    )]);
    assert!(loaded.notes.iter().any(|n| n.level == Level::Error
        && n.text.starts_with(
            "global config: transports.telegram.baseUrl: a plain http:// or ws:// address is allowed only to 127.0.0.1, ::1 or localhost"
        )), "{:#?}", loaded.notes);
    let urls: Vec<String> = loaded
        .transports
        .iter()
        .map(|t| match t.setting("baseUrl") {
            Some(SettingValue::Text(url)) => url.clone(),
            _ => String::new(),
        })
        .collect();
    assert!(
        urls.contains(&"http://127.0.0.1:9000".to_string()),
        "{urls:?}"
    );
    assert!(!urls.iter().any(|u| u.contains("evil")), "{urls:?}");
}

#[test]
fn a_shell_in_the_remote_scope_is_warned_about_at_start() {
    let loaded = project(
        r#"{"bridge":{"remoteScope":{"allowTools":["read","bash"],"protectedPaths":["keys/**"]}}}"#,
    );
    assert!(
        loaded.notes.iter().any(|n| n.level == Level::Warning
            && n.text
                .starts_with("bridge.remoteScope.allowTools has \"bash\": ")),
        "{:#?}",
        loaded.notes
    );
}

#[test]
fn deny_commands_turns_commands_off_and_a_project_may_only_add_to_it() {
    use crate::core::commands::RemoteCommand;
    let loaded = load_config(&[source(
        "global",
        r#"{"bridge":{"denyCommands":["model","/NEW","models","usage"],"usageFooter":"tokens-cost"}}"#,
    )]);
    assert_eq!(
        loaded.bridge.deny_commands,
        [
            RemoteCommand::Model,
            RemoteCommand::New,
            RemoteCommand::Usage
        ],
        "names and aliases, each once"
    );
    assert_eq!(loaded.bridge.usage_footer, schema::UsageFooter::TokensCost);
    // A misspelt name is reported; the names that are commands still apply.
    let loaded = load_config(&[source(
        "global",
        r#"{"bridge":{"denyCommands":["modle","compact","help"],"usageFooter":"dollars"}}"#,
    )]);
    assert_eq!(loaded.bridge.deny_commands, [RemoteCommand::Compact]);
    assert!(
        loaded.notes.iter().any(|n| n.level == Level::Error
            && n.text.contains(
                "bridge.denyCommands: not remote commands: modle, help (help cannot be turned off)"
            )),
        "{:#?}",
        loaded.notes
    );
    assert!(loaded.notes.iter().any(|n| n.level == Level::Error
        && n.text.contains(
            "bridge.usageFooter: expected \"off\", \"tokens\", \"tokens-cost\" or \"context\""
        )));
    // A project may turn more off, never turn the user's back on, and not choose the footer.
    let user = source("global", r#"{"bridge":{"denyCommands":["model"]}}"#);
    let narrower = source("project", r#"{"bridge":{"denyCommands":["model","new"]}}"#);
    let loaded = load_config(&[user.clone(), narrower]);
    assert_eq!(
        loaded.bridge.deny_commands,
        [RemoteCommand::Model, RemoteCommand::New]
    );
    let wider = source(
        "project",
        r#"{"bridge":{"denyCommands":[],"usageFooter":"tokens-cost","doneNoticeAfterMs":1000}}"#,
    );
    let loaded = load_config(&[user, wider]);
    assert_eq!(loaded.bridge.deny_commands, [RemoteCommand::Model]);
    assert_eq!(loaded.bridge.usage_footer, schema::UsageFooter::Off);
    assert_eq!(loaded.bridge.done_notice_after_ms, 0);
    for key in [
        "bridge.denyCommands",
        "bridge.usageFooter",
        "bridge.doneNoticeAfterMs",
    ] {
        assert!(
            loaded.project_ignored.iter().any(|i| i.starts_with(key)),
            "{key}: {:?}",
            loaded.project_ignored
        );
    }
}
