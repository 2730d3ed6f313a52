//! Fail closed (docs/decisions.md#decision-17-fail-closed): the settings that guard what a
//! messenger-originated turn may do fall back to their strictest value when the file that may have
//! set them cannot be read or parsed, or when their own value is invalid.
//!
//! The original applied "the invalid field is simply not applied" to every key alike, so a strict
//! config (`remoteToolPolicy: "no-tools"`) with one trailing comma, or a typo such as `"yolo"`,
//! silently left remote turns `unrestricted` (docs/decisions.md#decision-17-fail-closed). For
//! ordinary keys that rule stays; for these it would turn a safety limit off by mistake.
//!
//! A broken file counts as if it set every guard to its strictest value at its own
//! precedence, so a higher-precedence file that sets a guard validly still wins (it would
//! have overridden the broken file anyway). What remains forced at the end is reported once,
//! loudly, naming the file or field and the value in force.

use std::collections::BTreeMap;

use super::schema::{BridgeConfig, RemoteScopeSettings, RemoteToolApproval, RemoteToolPolicy};
use crate::model::{Level, Note};

/// A setting that guards what remote turns may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Guard {
    /// `bridge.remoteToolPolicy`: which tools a remote turn may run.
    RemoteToolPolicy,
    /// `bridge.remoteToolApproval`: whether each remote tool call needs a local yes.
    RemoteToolApproval,
    /// `bridge.remoteScope`: tools and paths a remote turn may use
    /// (docs/decisions.md#decision-16-scoped-remote-turns).
    RemoteScope,
    /// `bridge.requirePairing`: `false` lets anyone who can write to the bot prompt.
    RequirePairing,
    /// `bridge.allowUsers`: identities trusted without pairing.
    AllowUsers,
    /// `bridge.requireAddressing`: `false` turns a paired person's every group message into
    /// a prompt.
    RequireAddressing,
}

impl Guard {
    /// Every guard, in the order notes list them.
    pub const ALL: [Guard; 6] = [
        Guard::RemoteToolPolicy,
        Guard::RemoteToolApproval,
        Guard::RemoteScope,
        Guard::RequirePairing,
        Guard::AllowUsers,
        Guard::RequireAddressing,
    ];

    /// The key under `bridge`.
    pub fn key(self) -> &'static str {
        match self {
            Guard::RemoteToolPolicy => "remoteToolPolicy",
            Guard::RemoteToolApproval => "remoteToolApproval",
            Guard::RemoteScope => "remoteScope",
            Guard::RequirePairing => "requirePairing",
            Guard::AllowUsers => "allowUsers",
            Guard::RequireAddressing => "requireAddressing",
        }
    }

    /// The guard a `bridge` key is, if it is one.
    pub fn for_key(key: &str) -> Option<Guard> {
        Guard::ALL.into_iter().find(|g| g.key() == key)
    }

    /// The guard an unknown `bridge` key was probably meant to be: a misspelt guard must
    /// not leave the limit at a more permissive default.
    pub fn misspelt(key: &str) -> Option<Guard> {
        Guard::ALL
            .into_iter()
            .find(|g| g.key() != key && looks_misspelt(key, g.key()))
    }

    /// The strictest value as it is written in a config file.
    pub fn strictest_json(self) -> &'static str {
        match self {
            Guard::RemoteToolPolicy => "\"no-tools\"",
            Guard::RemoteToolApproval => "\"each\"",
            Guard::RemoteScope => "{\"allowTools\": []}",
            Guard::RequirePairing | Guard::RequireAddressing => "true",
            Guard::AllowUsers => "[]",
        }
    }

    /// Puts the strictest value in force.
    pub fn apply_strictest(self, config: &mut BridgeConfig) {
        match self {
            Guard::RemoteToolPolicy => config.remote_tool_policy = RemoteToolPolicy::NoTools,
            Guard::RemoteToolApproval => config.remote_tool_approval = RemoteToolApproval::Each,
            Guard::RemoteScope => config.remote_scope = Some(RemoteScopeSettings::default()),
            Guard::RequirePairing => config.require_pairing = true,
            Guard::AllowUsers => config.allow_users.clear(),
            Guard::RequireAddressing => config.require_addressing = true,
        }
    }
}

/// Whether `typed` is within two edits (insert, delete, replace, swap) of `meant`, ignoring
/// case, `-` and `_`. Short words are left out: every 3-letter key is two edits from
/// another.
pub(super) fn looks_misspelt(typed: &str, meant: &str) -> bool {
    let normal = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '-' && *c != '_')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let (typed, meant) = (normal(typed), normal(meant));
    meant.chars().count() >= 5 && strsim::damerau_levenshtein(&typed, &meant) <= 2
}

/// A guard held at its strictest value, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedClosed {
    /// The setting.
    pub guard: Guard,
    /// What broke, naming the file or field (`the project config /p/x.json is not valid
    /// JSON`).
    pub cause: String,
}

/// Which guards are forced, as the sources are read in precedence order.
#[derive(Debug, Default)]
pub(super) struct Guards {
    forced: BTreeMap<Guard, String>,
}

impl Guards {
    /// A whole source could not be used: every guard goes to its strictest value.
    pub(super) fn source_broken(&mut self, config: &mut BridgeConfig, cause: String) {
        for guard in Guard::ALL {
            self.value_broken(config, guard, cause.clone());
        }
    }

    /// One guard's value was invalid: that guard goes to its strictest value.
    pub(super) fn value_broken(&mut self, config: &mut BridgeConfig, guard: Guard, cause: String) {
        guard.apply_strictest(config);
        self.forced.insert(guard, cause);
    }

    /// A later source set the guard validly: its value wins, as it would have over the
    /// broken source's.
    pub(super) fn value_set(&mut self, guard: Guard) {
        self.forced.remove(&guard);
    }

    /// The guards still forced, in [`Guard::ALL`] order.
    pub(super) fn finish(self) -> Vec<FailedClosed> {
        self.forced
            .into_iter()
            .map(|(guard, cause)| FailedClosed { guard, cause })
            .collect()
    }
}

/// The loud notes: one error per cause, naming the settings and the values in force.
pub fn fail_closed_notes(failed: &[FailedClosed]) -> Vec<Note> {
    fail_closed_lines(failed)
        .into_iter()
        .map(|text| Note::new(Level::Error, text))
        .collect()
}

/// One line per cause (for `/connect config` and `doctor` as well as the start notes).
pub fn fail_closed_lines(failed: &[FailedClosed]) -> Vec<String> {
    let mut by_cause: Vec<(&str, Vec<Guard>)> = Vec::new();
    for entry in failed {
        match by_cause.iter_mut().find(|(c, _)| *c == entry.cause) {
            Some((_, guards)) => guards.push(entry.guard),
            None => by_cause.push((&entry.cause, vec![entry.guard])),
        }
    }
    by_cause
        .into_iter()
        .map(|(cause, guards)| {
            let values: Vec<String> = guards
                .iter()
                .map(|g| format!("{} {}", g.key(), g.strictest_json()))
                .collect();
            format!(
                "failing closed: {cause}, so the strictest value is in force for {}. These \
                 settings guard what messenger turns may do; fix the config to use your own.",
                values.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strictest_values_table() {
        let mut config = BridgeConfig {
            remote_tool_policy: RemoteToolPolicy::Unrestricted,
            remote_tool_approval: RemoteToolApproval::Off,
            require_pairing: false,
            allow_users: vec![crate::keys::Identity::new("telegram", "1")],
            require_addressing: false,
            ..BridgeConfig::default()
        };
        for guard in Guard::ALL {
            guard.apply_strictest(&mut config);
            assert_eq!(Guard::for_key(guard.key()), Some(guard));
        }
        assert_eq!(config.remote_tool_policy, RemoteToolPolicy::NoTools);
        assert_eq!(config.remote_tool_approval, RemoteToolApproval::Each);
        assert!(config.require_pairing && config.require_addressing);
        assert!(config.allow_users.is_empty());
        assert_eq!(Guard::for_key("maxChunks"), None);
    }

    #[test]
    fn lines_group_by_cause() {
        let failed = [
            FailedClosed {
                guard: Guard::RemoteToolPolicy,
                cause: "the project config /p is not valid JSON".into(),
            },
            FailedClosed {
                guard: Guard::RequirePairing,
                cause: "global config: bridge.requirePairing is invalid".into(),
            },
            FailedClosed {
                guard: Guard::AllowUsers,
                cause: "the project config /p is not valid JSON".into(),
            },
        ];
        assert_eq!(
            fail_closed_lines(&failed),
            vec![
                "failing closed: the project config /p is not valid JSON, so the strictest value \
                 is in force for remoteToolPolicy \"no-tools\", allowUsers []. These settings \
                 guard what messenger turns may do; fix the config to use your own."
                    .to_string(),
                "failing closed: global config: bridge.requirePairing is invalid, so the \
                 strictest value is in force for requirePairing true. These settings guard what \
                 messenger turns may do; fix the config to use your own."
                    .to_string(),
            ]
        );
        assert!(
            fail_closed_notes(&failed)
                .iter()
                .all(|n| n.level == Level::Error)
        );
    }
}
