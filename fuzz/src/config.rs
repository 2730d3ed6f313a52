//! The config parser and validator (`guest::core::config::load_config`).
//!
//! Property: no panic, and nothing it says (notes, fail-closed lines, the validated
//! transport settings, the `Debug` of the whole result) holds a secret: neither one that
//! was in the input (I10: config refuses secret values and names the key, never the value)
//! nor any other text of a secret shape.

use std::sync::OnceLock;

use guest::core::config::{LoadedConfig, fail_closed_lines, load_config};
use guest::model::{
    ConfigContent, ConfigScope, ConfigSource, Platform, Setting, SettingKind, SettingValue,
};
use transport_core::platform::{self as core, Settings};

use crate::secrets::{secrets_in_documents, worth_looking_for};

/// The terminal's declaration, as host-shim hands it to the bridge.
const TERMINAL: Settings = Settings {
    id: "terminal",
    display_name: "the terminal chat",
    keys: &[core::ENABLED],
};

/// The platforms a host offers, from each crate's own declaration (as host-shim's
/// `factory::declarations` converts them), then the terminal; built once per process.
pub fn platforms() -> &'static [Platform] {
    static PLATFORMS: OnceLock<Vec<Platform>> = OnceLock::new();
    PLATFORMS.get_or_init(declared)
}

fn declared() -> Vec<Platform> {
    [
        &transport_telegram::PLATFORM.settings,
        &transport_discord::PLATFORM.settings,
        &transport_slack::PLATFORM.settings,
        &transport_robo_claw::PLATFORM.settings,
        &TERMINAL,
    ]
    .into_iter()
    .map(|settings| Platform {
        id: settings.id.into(),
        display_name: settings.display_name.into(),
        settings: settings.keys.iter().map(setting).collect(),
    })
    .collect()
}

fn setting(setting: &core::Setting) -> Setting {
    Setting {
        name: setting.name.into(),
        kind: match setting.kind {
            core::SettingKind::Boolean => SettingKind::Boolean,
            core::SettingKind::EnvName | core::SettingKind::OptionalEnvName => SettingKind::EnvName,
            core::SettingKind::Url(schemes) => {
                SettingKind::Url(schemes.iter().map(|s| (*s).to_owned()).collect())
            }
            core::SettingKind::Integer { min, max } => SettingKind::Integer { min, max },
            core::SettingKind::Text => SettingKind::Text,
        },
        default: match setting.default {
            core::SettingDefault::Absent => None,
            core::SettingDefault::Boolean(b) => Some(SettingValue::Boolean(b)),
            core::SettingDefault::Integer(n) => Some(SettingValue::Integer(n)),
            core::SettingDefault::Text(text) => Some(SettingValue::Text(text.into())),
        },
        summary: setting.summary.into(),
    }
}

/// What the config says with every transport enabled and nothing else set: default
/// variable names and URLs. A "secret" of the input that is part of these
/// (`PITOKEN_=PP_TOKEN` and the default `PI_SLACK_APP_TOKEN`) is a coincidence of the
/// fuzzer's, not an echo. Also what it says failing closed (a second file that is not
/// JSON): the strictest values in the bridge's own layout (`pproval": "each",` planted
/// after `x-API-KEY:` met `"remoteToolApproval": "each",`; found by fuzzing, 2026-12-02).
fn baseline() -> &'static [String] {
    static BASELINE: OnceLock<Vec<String>> = OnceLock::new();
    BASELINE.get_or_init(|| {
        // With every transport and an (empty) remote scope, so the layout of everything
        // config can show is known: `": [],\n    "` is the scope's formatting, not a
        // secret of the input (found by fuzzing, 2026-12-01).
        let all = r#"{"bridge":{"remoteScope":{}},"transports":{"telegram":{"enabled":true},"discord":{"enabled":true},"slack":{"enabled":true},"robo_claw":{"enabled":true},"terminal":{"enabled":true}}}"#;
        let mut known = Vec::new();
        for sources in [
            vec![source(ConfigScope::Project, all)],
            vec![
                source(ConfigScope::Global, all),
                source(ConfigScope::Project, "{"),
            ],
        ] {
            let loaded = load_config(&sources, platforms());
            known.extend(said(&loaded));
            known.push(format!("{loaded:?}"));
        }
        known
    })
}

/// One config file of `scope` holding `text`, where pi keeps it.
fn source(scope: ConfigScope, text: &str) -> ConfigSource {
    ConfigSource {
        scope,
        path: format!("/home/dev/.pi/{}.json", scope.label()),
        content: ConfigContent::Text(text.to_owned()),
    }
}

/// Every text `load_config` gives a person to read in what it `loaded`.
fn said(loaded: &LoadedConfig) -> Vec<String> {
    let mut said: Vec<String> = loaded.notes.iter().map(|n| n.text.clone()).collect();
    said.extend(fail_closed_lines(&loaded.fail_closed));
    said.extend(
        loaded
            .transports
            .iter()
            .map(|t| format!("{:?}", t.settings)),
    );
    said.push(loaded.bridge.to_pretty_json());
    said
}

/// `data` is one config file, or two (global, then project) separated by a NUL byte.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let files: Vec<&str> = text.splitn(2, '\0').collect();
    let scopes = [ConfigScope::Global, ConfigScope::Project];
    let sources: Vec<ConfigSource> = files
        .iter()
        .zip(scopes)
        .map(|(file, scope)| source(scope, file))
        .collect();
    let loaded = load_config(&sources, platforms());
    let said = said(&loaded);
    // Everything the loader holds, in one text: no secret of the input may be anywhere in
    // it. Its shapes are not checked: a quote opened in one note and another note's quote
    // read together as one quoted value (`KEY='a: …" }, Note { … '`) that no person ever
    // reads (found by fuzzing, 2026-12-01); each text a person reads is checked above.
    let everything = format!("{loaded:?}");

    let secrets: Vec<String> = secrets_in_documents(&files)
        .into_iter()
        .filter(|secret| !baseline().iter().any(|text| text.contains(secret.as_str())))
        .filter(|secret| worth_looking_for(secret))
        .collect();
    // A secret read from a document as written keeps its JSON escapes (`…:Sug\n(vp…@`);
    // the `Debug` escapes a real line break the same way, in text where the break ended
    // the shape (found by fuzzing, 2026-12-01): such a secret is checked in what is said.
    for secret in secrets.iter().filter(|s| !s.contains('\\')) {
        assert!(
            !everything.contains(secret.as_str()),
            "config holds a secret of its input: {everything:?}"
        );
    }
    for output in &said {
        for secret in &secrets {
            assert!(
                !output.contains(secret.as_str()),
                "config echoed a secret of its input: {output:?}"
            );
        }
        // Nothing of a secret shape, except redaction's own output followed by text: a
        // value that ended at a quote (`PASSWORD=x'Fts` quoted as `PASSWORD=[redacted]Fts`)
        // or a line break `Debug` escaped (`KEY=[redacted]\nmore`) is no secret (both
        // found by fuzzing, 2026-12-01). The outbound check draws the same line.
        crate::outbound::assert_redacted(output, &[]);
    }
}
