//! Configuration: schema, defaults, validation and merge
//! (docs/architecture.md#the-original-module-by-module).
//!
//! The host finds the files and hands over their raw text; everything else happens here,
//! so every message a person sees about their config is tested in one place. By concern:
//! [`schema`] holds the types and defaults, `readers` the generic value readers,
//! `bridge_section` the `bridge` keys and `transports` the transport settings (secret
//! detection itself lives in [`crate::core::secrets`]).

mod bridge_section;
pub mod fail_closed;
pub mod project_narrowing;
mod readers;
pub mod schema;
pub mod shell_scope_warning;
mod transports;

use std::collections::BTreeMap;

use serde_json::Value;

use bridge_section::apply_bridge;
use transports::{apply_transports, transport_request};

pub use schema::{
    AttachmentSettings, BridgeConfig, BroadcastSettings, InboxSettings, READ_ONLY_TOOLS,
    RateLimitSettings, RemoteApprovalSettings, RemoteScopeSettings, RemoteToolApproval,
    RemoteToolPolicy, VoiceSettings,
};

pub use fail_closed::{FailedClosed, Guard, fail_closed_lines};

use crate::core::redact::redact;
use crate::model::{
    ConfigContent, ConfigScope, ConfigSource, Level, Note, Platform, SettingValue, TransportRequest,
};
use fail_closed::{Guards, fail_closed_notes};

/// Everything the config files say, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedConfig {
    /// The `bridge` section over the defaults.
    pub bridge: BridgeConfig,
    /// Transports to create, in the order telegram, discord, slack, robo_claw, terminal.
    pub transports: Vec<TransportRequest>,
    /// Messages for the person at the terminal, shown once.
    pub notes: Vec<Note>,
    /// Guards held at their strictest value because a file or value was broken; also in
    /// `notes`, and shown again by `/connect config` and `doctor`.
    pub fail_closed: Vec<FailedClosed>,
    /// Keys a project file set that only the user's own file may
    /// (docs/security.md#project-files-only-narrow), as
    /// `bridge.allowUsers in /repo/.pi/bot-connect.json`; also in `notes`, and listed by `doctor`.
    pub project_ignored: Vec<String>,
}

/// Reads the config files, `sources` in precedence order (lowest first: global, then
/// project; or a single `override`), validating `transports.*` against the `platforms`
/// the host offers (each declared once, by its own crate).
///
/// Never fails: a bad file or field becomes a note and is simply not applied, so the
/// lower source's or the default value stays in force and the session still starts. The
/// exception are the settings that guard remote turns ([`Guard`]): a broken file or value
/// puts them at their strictest value, with an error note (`fail_closed`).
pub fn load_config(sources: &[ConfigSource], platforms: &[Platform]) -> LoadedConfig {
    let mut bridge = BridgeConfig::default();
    let mut layers: Vec<Option<BTreeMap<String, SettingValue>>> = vec![None; platforms.len()];
    let mut notes = Vec::new();
    let mut guards = Guards::default();
    let mut project_ignored = Vec::new();
    for source in sources {
        let scope = source.scope.label();
        let mut sink = Sink {
            scope,
            notes: &mut notes,
        };
        let file = format!("the {scope} config {}", source.path);
        let text = match &source.content {
            ConfigContent::Text(text) => text,
            ConfigContent::Unreadable(reason) => {
                sink.error(format!("cannot read {}: {reason}", source.path));
                guards.source_broken(&mut bridge, format!("{file} cannot be read"));
                continue;
            }
        };
        let document: Value = match serde_json::from_str(text) {
            Ok(document) => document,
            Err(error) => {
                // serde_json's messages name a position, never the text, so nothing leaks here.
                // An error, not the original's warning: none of the file was applied, which
                // may include the limits on remote turns.
                sink.error(format!("invalid JSON in {}: {error}", source.path));
                guards.source_broken(&mut bridge, format!("{file} is not valid JSON"));
                continue;
            }
        };
        let Some(top) = document.as_object() else {
            sink.error("expected a JSON object at the top level".into());
            guards.source_broken(&mut bridge, format!("{file} is not a JSON object"));
            continue;
        };
        let project = source.scope == ConfigScope::Project;
        for (key, value) in top {
            match key.as_str() {
                "bridge" if project => {
                    // Read over the user's settings as any file is, then every field that would
                    // widen them is put back (docs/security.md#project-files-only-narrow). A guard
                    // the project file broke still fails closed: strictest is always narrower.
                    let mut candidate = bridge.clone();
                    let mut project_guards = Guards::default();
                    apply_bridge(&mut candidate, value, &mut sink, &mut project_guards, &file);
                    let (narrowed, ignored) = project_narrowing::narrow_bridge(&bridge, candidate);
                    bridge = narrowed;
                    for forced in project_guards.finish() {
                        guards.value_broken(&mut bridge, forced.guard, forced.cause);
                    }
                    for key in ignored {
                        let key = format!("bridge.{key}");
                        sink.warn(project_narrowing::ignored_text(&key, &source.path));
                        project_ignored.push(format!("{key} in {}", source.path));
                    }
                }
                "transports" if project => {
                    let configured = |id: &str| {
                        platforms
                            .iter()
                            .zip(&layers)
                            .any(|(platform, layer)| platform.id == id && layer.is_some())
                    };
                    let (narrowed, ignored) =
                        project_narrowing::narrow_transports(value, &configured);
                    for key in ignored {
                        sink.warn(project_narrowing::ignored_text(&key, &source.path));
                        project_ignored.push(redact(&format!("{key} in {}", source.path)).text);
                    }
                    apply_transports(platforms, &mut layers, &narrowed, &mut sink);
                }
                "bridge" => apply_bridge(&mut bridge, value, &mut sink, &mut guards, &file),
                "transports" => apply_transports(platforms, &mut layers, value, &mut sink),
                // The cluster's NATS login and key: read by the host (`serve --nats`), never
                // by the bridge. A project file may not set them: a cloned repository must
                // not choose where a node logs in or which cluster key it trusts.
                "cluster" if matches!(source.scope, ConfigScope::Project) => sink.warn(
                    "cluster: ignored in a project file; put the cluster settings in your own \
                     config file (~/.pi/agent/bot-connect.json or PI_BOT_CONNECT_CONFIG)"
                        .into(),
                ),
                "cluster" if !value.is_object() => sink.warn(
                    "cluster: must be an object of file paths and environment variable names; \
                     `serve --nats` will refuse to start"
                        .into(),
                ),
                "cluster" => {}
                _ => {
                    sink.warn(format!("{key}: unknown top-level key, ignored"));
                    // `"brigde"` would leave every guard at its default: fail closed.
                    if fail_closed::looks_misspelt(key, "bridge") && !top.contains_key("bridge") {
                        guards.source_broken(
                            &mut bridge,
                            format!("{file} has `{key}`, which looks like a misspelt `bridge`"),
                        );
                    }
                }
            }
        }
    }
    let mut transports = Vec::new();
    let mut disabled = Vec::new();
    for (platform, layer) in platforms.iter().zip(&layers) {
        let Some(fields) = layer else { continue };
        match transport_request(platform, fields) {
            Some(request) => transports.push(request),
            None => disabled.push(platform.id.as_str()),
        }
    }
    if !disabled.is_empty() {
        notes.push(Note::new(
            Level::Info,
            format!("disabled transports: {}", disabled.join(", ")),
        ));
    }
    if let Some(text) = shell_scope_warning::shell_scope_warning(bridge.remote_scope.as_ref()) {
        notes.push(Note::new(Level::Warning, text));
    }
    let fail_closed = guards.finish();
    notes.extend(fail_closed_notes(&fail_closed));
    LoadedConfig {
        bridge,
        transports,
        notes,
        fail_closed,
        project_ignored,
    }
}

/// Collects one source's notes, each prefixed `<scope> config: ` so the person knows
/// which file to open.
pub(super) struct Sink<'a> {
    scope: &'a str,
    notes: &'a mut Vec<Note>,
}

impl Sink<'_> {
    /// An invalid value that was not applied.
    pub(super) fn error(&mut self, text: String) {
        self.push(Level::Error, text);
    }

    /// Something ignored that is probably a typo.
    pub(super) fn warn(&mut self, text: String) {
        self.push(Level::Warning, text);
    }

    fn push(&mut self, level: Level, text: String) {
        // Notes quote keys (`<key>: unknown key, ignored`), and a key can be a pasted
        // token: every note is redacted on its way out (found by fuzzing).
        let text = redact(&text).text;
        self.notes
            .push(Note::new(level, format!("{} config: {text}", self.scope)));
    }
}

#[cfg(test)]
use crate::model::{Setting, SettingKind};

/// The platform declarations the integration tests use too.
#[cfg(test)]
#[path = "../../../tests/bridge/support/platforms.rs"]
mod test_platforms;

#[cfg(test)]
mod tests;
