//! Local `/connect …` commands typed at the terminal (the original's pi adapter:
//! docs/architecture.md#the-original-module-by-module).

use super::{Bridge, TransportState};
use crate::core::config;
use crate::core::explain;
use crate::core::local::{self, LiveCode, LocalCommand, LocalStatusView};
use crate::host::Host;
use crate::model::{Level, Note};

/// Version of the bridge component.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

impl Bridge {
    /// Runs a local command; returns the text for the terminal.
    pub fn on_local_command(&mut self, host: &mut dyn Host, args: &str) -> Note {
        let now = host.now_ms();
        match local::parse_local_command(args) {
            LocalCommand::Status => {
                Note::new(Level::Info, local::status_text(&self.status_view(now), now))
            }
            LocalCommand::Help => {
                Note::new(Level::Info, local::help_text(&self.config.local_command))
            }
            LocalCommand::Doctor => self.doctor_note(host),
            LocalCommand::Version => Note::new(
                Level::Info,
                format!("bot-connect {VERSION}\n- bridge: wasm32-wasip2 component"),
            ),
            LocalCommand::Pair if host.pairing_closed_since().is_some() => {
                let made = self.reopen_pairing(host, now);
                let codes = local::pair_text(&self.live_codes_view(now), now);
                Note::new(Level::Info, local::reopened_text(made, &codes))
            }
            LocalCommand::Pair => Note::new(
                Level::Info,
                local::pair_text(&self.live_codes_view(now), now),
            ),
            LocalCommand::Pause | LocalCommand::Resume => {
                let pause = matches!(local::parse_local_command(args), LocalCommand::Pause);
                let keys: Vec<_> = self.state.conversations.iter().map(|t| t.key()).collect();
                let mut changed = 0;
                for key in &keys {
                    self.state.set_paused(key, pause);
                    changed += 1;
                }
                self.save(host);
                let text = if pause {
                    local::paused_text(changed)
                } else {
                    local::resumed_text(changed)
                };
                Note::new(Level::Info, text)
            }
            LocalCommand::Disconnect => {
                // Local and remote disconnect clear the same state
                // (docs/decisions.md#decision-7-local-and-remote-disconnect-clear-the-same-state),
                // here for every identity and every conversation.
                let revoked = self.state.disconnect_all();
                self.trust.live_codes.clear();
                self.trust.reissued.clear();
                self.trust.terminal_codes.clear();
                self.save(host);
                host.log(
                    Level::Info,
                    "revoked all pairings",
                    &[("count", revoked.to_string())],
                );
                Note::new(Level::Info, local::revoked_text(revoked))
            }
            LocalCommand::Config => {
                let warnings = config::fail_closed_lines(&self.fail_closed);
                let level = if warnings.is_empty() {
                    Level::Info
                } else {
                    Level::Error
                };
                Note::new(
                    level,
                    local::config_text(&self.config.to_pretty_json(), &warnings),
                )
            }
            LocalCommand::Digest => self.digest_note(host),
            LocalCommand::Scope => Note::new(Level::Info, self.scope_text()),
            LocalCommand::Explain => Note::new(
                Level::Info,
                explain::explain_text(&self.decisions, now, &self.config.local_command),
            ),
            LocalCommand::Answer => {
                let rest = args.trim_start();
                let rest = rest.get(rest.find(char::is_whitespace).unwrap_or(rest.len())..);
                self.answer_question_locally(host, rest.unwrap_or(""))
            }
            LocalCommand::Unknown(sub) => Note::new(
                Level::Warning,
                local::unknown_subcommand_text(&sub, &self.config.local_command),
            ),
        }
    }

    fn status_view(&self, now: u64) -> LocalStatusView {
        LocalStatusView {
            // `<name> <version>` as the original printed it, like the `version` subcommand's first
            // line.
            version: Some(format!("bot-connect {VERSION}")),
            transports: self.delivery.transports.keys().cloned().collect(),
            paired: self.state.trusted.len(),
            conversations: self.state.conversations.len(),
            paused: self.state.paused.iter().map(ToString::to_string).collect(),
            following: self
                .state
                .following
                .iter()
                .map(ToString::to_string)
                .collect(),
            // Live codes only, as `pair` and `doctor` count them: an expired code cannot
            // be typed, and "1 pending" next to "No pending pairing" confuses the reader.
            codes: self.live_codes_view(now),
            local_command: self.config.local_command.clone(),
        }
    }

    fn live_codes_view(&self, now: u64) -> Vec<LiveCode> {
        self.live_code_list(now)
            .into_iter()
            .map(|(key, code, expires_at)| LiveCode {
                key,
                code,
                expires_at,
            })
            .collect()
    }

    /// The bridge's part of `doctor`: transports and state counts, never a token.
    fn doctor_note(&mut self, host: &mut dyn Host) -> Note {
        let diagnostics = self.diagnostics(host);
        let mut lines = vec![
            format!("bot-connect doctor"),
            format!("- bridge: {VERSION}"),
        ];
        if diagnostics.transports.is_empty() {
            lines.push("- transports: none registered".into());
        }
        for t in &diagnostics.transports {
            let state = t.state.label();
            // A transport whose own diagnosis is just its state ("running") would print
            // it twice: `terminal: running — running`.
            match t.detail.as_deref().filter(|detail| *detail != state) {
                Some(detail) => lines.push(format!("- {}: {state} — {detail}", t.id)),
                None => lines.push(format!("- {}: {state}", t.id)),
            }
        }
        lines.push(format!("- session key: {}", self.session.id));
        lines.push(format!("- paired chats: {}", diagnostics.paired));
        lines.push(format!(
            "- broadcast targets: {}",
            diagnostics.conversations
        ));
        lines.push(format!("- pending codes: {}", diagnostics.pending));
        let now = host.now_ms();
        lines.push(self.pairing_budget_line(host, now));
        let fail_closed = config::fail_closed_lines(&self.fail_closed);
        for line in &fail_closed {
            lines.push(format!("- config: {line}"));
        }
        for ignored in &self.project_ignored {
            lines.push(format!(
                "- config: ignored {ignored}: a project file may only narrow access (docs/security.md#project-files-only-narrow)"
            ));
        }
        if let Some(warning) =
            config::shell_scope_warning::shell_scope_warning(self.config.remote_scope.as_ref())
        {
            lines.push(format!("- config: {warning}"));
        }
        lines.push(String::new());
        lines.push("If a transport is not working, check in this order:".into());
        lines.push("1. credential present in the environment (never in the config file)".into());
        lines.push("2. bot invited/installed where you are talking to it".into());
        lines.push(
            "3. privileged intents or message scopes enabled in the platform app settings".into(),
        );
        lines.push("4. no other pi process holds the same bot credential".into());
        lines.push(String::new());
        lines.push(format!(
            "Why a message got no answer: /{} explain",
            self.config.local_command
        ));
        let failing = self
            .delivery
            .transports
            .values()
            .any(|t| matches!(t, TransportState::Failed(_)));
        // A guard failing closed is an error: the config does not say what the person
        // meant, and remote turns run with less than they may expect.
        let level = if !fail_closed.is_empty() {
            Level::Error
        } else if failing {
            Level::Warning
        } else {
            Level::Info
        };
        Note::new(level, lines.join("\n"))
    }
}
