//! Local `/connect …` commands typed at the terminal (reference-behaviour §3.20).

use super::{Bridge, TransportState};
use crate::core::explain;
use crate::core::local::{self, LocalCommand, LocalStatusView};
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
                Note::new(Level::Info, local::status_text(&self.status_view(now)))
            }
            LocalCommand::Doctor => self.doctor_note(host),
            LocalCommand::Version => Note::new(
                Level::Info,
                format!("bot-connect {VERSION}\n- bridge: wasm32-wasip2 component"),
            ),
            LocalCommand::Pair => {
                let pending: Vec<_> = self
                    .state
                    .pending
                    .iter()
                    .filter(|(_, p)| p.expires_at > now)
                    .map(|(k, p)| (k.clone(), p.clone()))
                    .collect();
                Note::new(Level::Info, local::pair_text(&pending, now))
            }
            LocalCommand::Pause | LocalCommand::Resume => {
                let pause = matches!(local::parse_local_command(args), LocalCommand::Pause);
                let keys: Vec<String> = self.state.conversations.iter().map(|t| t.key()).collect();
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
                // Local and remote disconnect clear the same state (decision 7), here for
                // every identity and every conversation.
                let revoked = self.state.disconnect_all();
                self.save(host);
                host.log(
                    Level::Info,
                    "revoked all pairings",
                    &[("count", revoked.to_string())],
                );
                Note::new(Level::Info, local::revoked_text(revoked))
            }
            LocalCommand::Config => Note::new(
                Level::Info,
                local::config_text(&self.config.to_pretty_json()),
            ),
            LocalCommand::Digest => self.digest_note(host),
            LocalCommand::Explain => Note::new(
                Level::Info,
                explain::explain_text(&self.decisions, now, &self.config.local_command),
            ),
            LocalCommand::Unknown(sub) => Note::new(
                Level::Warning,
                local::unknown_subcommand_text(&sub, &self.config.local_command),
            ),
        }
    }

    fn status_view(&self, now: u64) -> LocalStatusView {
        LocalStatusView {
            // `<name> <version>` (§3.20), like the `version` subcommand's first line.
            version: Some(format!("bot-connect {VERSION}")),
            transports: self.transports.keys().cloned().collect(),
            paired: self.state.trusted.len(),
            conversations: self.state.conversations.len(),
            paused: self.state.paused.iter().cloned().collect(),
            // Live codes only, as `pair` and `doctor` count them: an expired code cannot
            // be typed, and "1 pending" next to "No pending pairing" confuses the reader.
            pending: self
                .state
                .pending
                .values()
                .filter(|p| p.expires_at > now)
                .count(),
            local_command: self.config.local_command.clone(),
        }
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
            match &t.detail {
                Some(detail) => lines.push(format!("- {}: {} — {detail}", t.id, t.status)),
                None => lines.push(format!("- {}: {}", t.id, t.status)),
            }
        }
        lines.push(format!("- session key: {}", self.session.id));
        lines.push(format!("- paired chats: {}", diagnostics.paired));
        lines.push(format!(
            "- broadcast targets: {}",
            diagnostics.conversations
        ));
        lines.push(format!("- pending codes: {}", diagnostics.pending));
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
            .transports
            .values()
            .any(|t| matches!(t, TransportState::Failed(_)));
        Note::new(
            if failing { Level::Warning } else { Level::Info },
            lines.join("\n"),
        )
    }
}
