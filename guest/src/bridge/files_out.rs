//! The agent's `send_file` (docs/media.md#files-out): a file from the working directory
//! to the chats of the current turn. The rules are `core::outgoing_file`'s; this is the
//! order they run in and who hears what.

use super::Bridge;
use crate::core::inbox::size_text;
use crate::core::outgoing_file::{self as rules, judge_path, read_cap};
use crate::core::state::ConversationTarget;
use crate::host::Host;
use crate::model::{FileReadError, Level, OutboundFile, TurnOrigin};

impl Bridge {
    /// Sends the file at `path` with `caption` to the current turn's chats: judged by the
    /// turn's scope (on the path as written, then on where it leads), read by the host
    /// within the smallest cap that matters, redacted or refused, then uploaded to each
    /// chat. `Ok` tells the agent what went where; `Err` why nothing was sent. A refusal
    /// the chat would otherwise wonder about (too large, a secret in a binary) is said
    /// there too.
    pub fn send_file(
        &mut self,
        host: &mut dyn Host,
        path: &str,
        caption: Option<&str>,
    ) -> Result<String, String> {
        let remote = self
            .turn
            .as_ref()
            .is_none_or(|t| t.origin == TurnOrigin::Remote);
        let scope = remote.then(|| self.frozen_scope());
        let cwd = self.session.cwd.clone();
        judge_path(scope.as_deref(), path, None, &cwd)?;
        let name = rules::display_name(path);
        let targets: Vec<(ConversationTarget, u64)> = self
            .audience()
            .into_iter()
            .map(|target| {
                let limit = host.upload_limit(&target.transport);
                (target, limit)
            })
            .collect();
        if targets.is_empty() {
            return Err(format!(
                "{name} was not sent: no chat takes part in this turn (nobody wrote from a chat, \
                 and no chat follows the terminal). Send it when a chat asks."
            ));
        }
        let (able, unable): (Vec<_>, Vec<_>) = targets.into_iter().partition(|(_, l)| *l > 0);
        if able.is_empty() {
            let transports = unable
                .iter()
                .map(|(t, _)| t.transport.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(format!(
                "{name} was not sent: {transports} cannot upload files from this bridge."
            ));
        }
        let cap = able
            .iter()
            .map(|(_, limit)| read_cap(*limit))
            .max()
            .unwrap_or(0);
        let file = match host.read_file(path, cap) {
            Ok(file) => file,
            Err(FileReadError::TooLarge(size)) => {
                let (target, limit) = &able[0];
                let reason = rules::too_large(&name, size, &platform(&target.transport), *limit);
                self.tell_chats(
                    host,
                    &able,
                    &format!("The agent could not send a file: {reason}"),
                );
                return Err(reason);
            }
            Err(FileReadError::Failed(why)) => {
                return Err(format!("{name} was not sent: {why}"));
            }
        };
        // The file as it was read: a link is judged where it leads, after the read and
        // before a byte leaves.
        judge_path(scope.as_deref(), path, Some(&file.resolved_path), &cwd)?;
        let size = file.data.len() as u64;
        let prepared = match rules::prepare(&name, file.data) {
            Ok(prepared) => prepared,
            Err(reason) => {
                host.log(
                    Level::Warning,
                    "file not sent",
                    &[("reason", "secret shape in a binary file".to_string())],
                );
                self.tell_chats(
                    host,
                    &able,
                    &format!("The agent could not send a file: {reason}"),
                );
                return Err(reason);
            }
        };
        let caption = rules::caption(caption);
        let mut sent = Vec::new();
        let mut failed = Vec::new();
        let sent_bytes = prepared.data.len() as u64;
        let mut data = Some(prepared.data);
        let last = able.len() - 1;
        for (index, (target, limit)) in able.iter().enumerate() {
            let where_ = platform(&target.transport);
            if sent_bytes > *limit {
                failed.push(rules::too_large(&name, size, &where_, *limit));
                continue;
            }
            let upload = OutboundFile {
                transport: target.transport.clone(),
                conversation_id: target.conversation_id.clone(),
                thread_id: target.thread_id.clone(),
                name: name.clone(),
                media_type: prepared.media_type.clone(),
                as_image: prepared.as_image,
                caption: caption.clone(),
                // One copy at a time: the last chat gets the bytes themselves.
                data: if index == last {
                    data.take().unwrap_or_default()
                } else {
                    data.clone().unwrap_or_default()
                },
            };
            match host.send_file(upload) {
                Ok(_) => sent.push(format!("{where_} {}", target.conversation_id)),
                Err(error) => {
                    host.log(
                        Level::Warning,
                        "file upload failed",
                        &[("transport", target.transport.clone())],
                    );
                    failed.push(format!(
                        "{where_} {} refused it: {error}",
                        target.conversation_id
                    ));
                }
            }
        }
        for (target, _) in &unable {
            failed.push(format!(
                "{} cannot upload files",
                platform(&target.transport)
            ));
        }
        if sent.is_empty() {
            return Err(format!("{name} was not sent: {}", failed.join("; ")));
        }
        let mut said = format!(
            "Sent {name} ({}) to {}.",
            size_text(sent_bytes),
            sent.join(", ")
        );
        if !prepared.redacted.is_empty() {
            said.push_str(&format!(
                " Secrets in it were redacted before sending ({}).",
                prepared.redacted.join(", ")
            ));
        }
        if !failed.is_empty() {
            said.push_str(&format!(" Not sent: {}.", failed.join("; ")));
        }
        Ok(said)
    }

    fn tell_chats(
        &mut self,
        host: &mut dyn Host,
        targets: &[(ConversationTarget, u64)],
        text: &str,
    ) {
        for (target, _) in targets {
            self.reply(host, target, text);
        }
    }
}

/// A person's name for a transport id (`telegram` is Telegram).
fn platform(id: &str) -> String {
    let mut chars = id.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
