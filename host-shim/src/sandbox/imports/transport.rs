//! `transport`: the messengers this session's bridge created, by id.

use transport_core::{Button, OutboundFile, OutboundMessage, TransportError};

use std::sync::Arc;

use transport_core::{InboundSink, Transport};
use wasmtime::component::HasData;

use super::{Imports, SessionContext};
use crate::sandbox::convert;
use crate::sandbox::session_transports::SessionTransports;
use crate::transcript::line::{Event, FetchedMeta};
use crate::transcript::script::Script;
use crate::wit::transport;

/// What the transport calls may touch: the messengers created for this session, where
/// they deliver, and which of them listen already.
pub struct TransportPart<'a> {
    transports: &'a SessionTransports,
    inbound: &'a InboundSink,
    listening: &'a mut Vec<String>,
}

/// The transport interface's view, for the linker.
pub struct TransportImports;

impl HasData for TransportImports {
    type Data<'a> = Imports<'a, TransportPart<'a>>;
}

impl SessionContext {
    /// The transport interface's view of this session.
    pub fn transport_imports(&mut self) -> Imports<'_, TransportPart<'_>> {
        imports!(
            self,
            TransportPart {
                transports: &self.transports,
                inbound: &self.inbound,
                listening: &mut self.listening,
            }
        )
    }
}

impl transport::Host for Imports<'_, TransportPart<'_>> {
    async fn identify(&mut self, id: String) -> Result<transport::Identity, String> {
        let asked = id.clone();
        self.tape
            .answer(
                |script| script.identified(&asked),
                self.part.identify(&id),
                |result| Event::Identified {
                    transport: id.clone(),
                    result: result.clone(),
                },
            )
            .await
    }

    async fn listen(&mut self, id: String) -> Result<(), String> {
        let live = id.clone();
        self.tape
            .exchange(
                || Event::Listen {
                    transport: id.clone(),
                },
                Script::listened,
                self.part.listen(live),
                |result| Event::Listened {
                    transport: id.clone(),
                    result: result.clone(),
                },
            )
            .await
    }

    async fn send(
        &mut self,
        message: transport::Outbound,
    ) -> Result<transport::Receipt, transport::SendError> {
        self.tape.record(|| Event::Send {
            message: message.clone(),
        });
        self.tape
            .answer(Script::sent, self.part.send(message), |result| {
                Event::Sent {
                    result: result.clone(),
                }
            })
            .await
    }

    fn typing(
        &mut self,
        id: String,
        conversation_id: String,
        thread_id: Option<String>,
    ) -> wasmtime::Result<()> {
        self.tape.record(|| Event::Typing {
            transport: id.clone(),
            conversation_id: conversation_id.clone(),
            thread_id: thread_id.clone(),
        });
        self.part.typing(id, conversation_id, thread_id);
        Ok(())
    }

    async fn react(
        &mut self,
        id: String,
        conversation_id: String,
        message_id: String,
        reaction: transport::Reaction,
        replaces: Option<transport::Reaction>,
    ) -> Result<(), String> {
        self.tape.record(|| Event::React {
            transport: id.clone(),
            conversation_id: conversation_id.clone(),
            message_id: message_id.clone(),
            reaction,
            replaces,
        });
        self.tape
            .answer(
                Script::reacted,
                self.part
                    .react(id, conversation_id, message_id, reaction, replaces),
                |result| Event::Reacted {
                    result: result.clone(),
                },
            )
            .await
    }

    async fn draft(
        &mut self,
        id: String,
        conversation_id: String,
        thread_id: Option<String>,
        draft_id: u64,
        text: String,
    ) -> Result<(), transport::SendError> {
        self.tape.record(|| Event::Draft {
            transport: id.clone(),
            conversation_id: conversation_id.clone(),
            draft_id,
            text: text.clone(),
        });
        self.tape
            .answer(
                Script::drafted,
                self.part
                    .draft(id, conversation_id, thread_id, draft_id, text),
                |result| Event::Drafted {
                    result: result.clone(),
                },
            )
            .await
    }

    async fn fetch_attachment(
        &mut self,
        id: String,
        reference: String,
        max_bytes: u64,
    ) -> Result<transport::FetchedAttachment, String> {
        self.tape
            .answer(
                Script::fetched,
                self.part.fetch(id, reference, max_bytes),
                // The bytes (megabytes) stay out of the transcript; their type and size are kept.
                |result| Event::Fetched {
                    result: result
                        .as_ref()
                        .map(|f| FetchedMeta {
                            media_type: f.media_type.clone(),
                            bytes: f.data.len(),
                        })
                        .map_err(Clone::clone),
                },
            )
            .await
    }

    fn upload_limit(&mut self, id: String) -> wasmtime::Result<u64> {
        self.tape.record(|| Event::UploadLimit {
            transport: id.clone(),
        });
        let transport = self.part.transport(&id);
        Ok(self.tape.answer_now(
            Script::upload_limit,
            || transport.map_or(0, |t| t.max_upload_bytes()),
            |bytes| Event::UploadLimited { bytes: *bytes },
        ))
    }

    async fn send_file(
        &mut self,
        file: transport::OutboundFile,
    ) -> Result<transport::Receipt, transport::SendError> {
        // The bytes stay out of the transcript: where the file went, its name, type and size.
        self.tape.record(|| Event::SendUpload {
            transport: file.transport.clone(),
            conversation_id: file.conversation_id.clone(),
            name: file.name.clone(),
            media_type: file.media_type.clone(),
            bytes: file.data.len(),
            caption: file.caption.clone(),
        });
        self.tape
            .answer(Script::uploaded, self.part.send_file(file), |result| {
                Event::UploadSent {
                    result: result.clone(),
                }
            })
            .await
    }

    async fn diagnose(&mut self, id: String) -> String {
        let transport = self.part.transport(&id);
        self.tape
            .answer(
                Script::diagnosed,
                async {
                    match transport {
                        Some(t) => t.diagnose(),
                        None => "not created".into(),
                    }
                },
                |text| Event::Diagnosed {
                    transport: id.clone(),
                    text: text.clone(),
                },
            )
            .await
    }
}

/// The live side of the transport imports: the transports themselves.
impl TransportPart<'_> {
    fn transport(&self, id: &str) -> Option<Arc<dyn Transport>> {
        self.transports.get(id).cloned()
    }

    async fn identify(&mut self, id: &str) -> Result<transport::Identity, String> {
        let Some(t) = self.transport(id) else {
            return Err(format!("no transport '{id}' was created for this session"));
        };
        let identity = t.identify().await.map_err(|e| e.to_string())?;
        Ok(transport::Identity {
            bot_id: identity.bot_id,
            bot_name: identity.bot_name,
            capabilities: convert::capabilities_to_wit(t.capabilities()),
            lock_name: identity.lock_name,
        })
    }

    async fn listen(&mut self, id: String) -> Result<(), String> {
        let Some(t) = self.transport(&id) else {
            return Err(format!("no transport '{id}' was created for this session"));
        };
        // A restarted guest asks again; the transport is still running.
        if self.listening.contains(&id) {
            return Ok(());
        }
        t.start(self.inbound.clone())
            .await
            .map_err(|e| e.to_string())?;
        self.listening.push(id);
        Ok(())
    }

    async fn send(
        &mut self,
        message: transport::Outbound,
    ) -> Result<transport::Receipt, transport::SendError> {
        let Some(t) = self.transport(&message.transport) else {
            return Err(transport::SendError::NotRunning);
        };
        let outbound = OutboundMessage {
            conversation_id: message.conversation_id,
            thread_id: message.thread_id,
            kind: convert::kind_from_wit(message.kind),
            text: message.text,
            edit_key: message.edit_key,
            buttons: message
                .buttons
                .into_iter()
                .map(|b| Button {
                    label: b.label,
                    command: b.command,
                })
                .collect(),
            answers_press: message.answers_press,
            reply_to: message.reply_to,
        };
        t.send(outbound)
            .await
            .map(|r| transport::Receipt {
                message_id: r.message_id,
                edit_key: r.edit_key,
            })
            .map_err(send_error_to_wit)
    }

    async fn draft(
        &mut self,
        id: String,
        conversation_id: String,
        thread_id: Option<String>,
        draft_id: u64,
        text: String,
    ) -> Result<(), transport::SendError> {
        let Some(t) = self.transport(&id) else {
            return Err(transport::SendError::NotRunning);
        };
        t.draft(&conversation_id, thread_id.as_deref(), draft_id, &text)
            .await
            .map_err(send_error_to_wit)
    }

    async fn send_file(
        &mut self,
        file: transport::OutboundFile,
    ) -> Result<transport::Receipt, transport::SendError> {
        let Some(t) = self.transport(&file.transport) else {
            return Err(transport::SendError::NotRunning);
        };
        // The transport's own limit, checked here too: a guest that asked for more than
        // it was told must not get a platform refusal (or a bill) for it.
        let limit = t.max_upload_bytes();
        if file.data.len() as u64 > limit {
            return Err(transport::SendError::Failed(format!(
                "{} takes uploads of up to {limit} bytes; this file is {} bytes",
                file.transport,
                file.data.len()
            )));
        }
        let upload = OutboundFile {
            conversation_id: file.conversation_id,
            thread_id: file.thread_id,
            name: file.name,
            media_type: file.media_type,
            as_image: file.as_image,
            caption: file.caption,
            data: file.data,
        };
        t.send_file(upload)
            .await
            .map(|r| transport::Receipt {
                message_id: r.message_id,
                edit_key: r.edit_key,
            })
            .map_err(send_error_to_wit)
    }

    fn typing(&mut self, id: String, conversation_id: String, thread_id: Option<String>) {
        if let Some(t) = self.transport(&id) {
            // Best effort by contract (I24): a failed indicator never fails a turn, so the
            // bridge does not wait for it either. A platform round trip (Telegram's
            // sendChatAction) would otherwise hold up every prompt it accompanies.
            tokio::spawn(async move {
                let _ = t.typing(&conversation_id, thread_id.as_deref()).await;
            });
        }
    }

    async fn react(
        &mut self,
        id: String,
        conversation_id: String,
        message_id: String,
        reaction: transport::Reaction,
        replaces: Option<transport::Reaction>,
    ) -> Result<(), String> {
        let Some(t) = self.transport(&id) else {
            return Err(format!("no transport '{id}' was created for this session"));
        };
        t.react(
            &conversation_id,
            &message_id,
            convert::reaction_from_wit(reaction),
            replaces.map(convert::reaction_from_wit),
        )
        .await
        .map_err(|e| e.to_string())
    }

    async fn fetch(
        &mut self,
        id: String,
        reference: String,
        max_bytes: u64,
    ) -> Result<transport::FetchedAttachment, String> {
        let Some(t) = self.transport(&id) else {
            return Err(format!("no transport '{id}' was created for this session"));
        };
        let fetched = t
            .fetch_attachment(&reference, max_bytes)
            .await
            .map_err(|e| e.to_string())?;
        // The transport enforces the cap; checking again here keeps a buggy transport
        // from handing the guest more than it asked for (I19).
        if fetched.data.len() as u64 > max_bytes {
            return Err(format!(
                "attachment is {} bytes, over the {max_bytes} byte limit",
                fetched.data.len()
            ));
        }
        Ok(transport::FetchedAttachment {
            media_type: fetched.media_type,
            data: fetched.data,
        })
    }
}

fn send_error_to_wit(e: TransportError) -> transport::SendError {
    match e {
        TransportError::NotStarted(_) => transport::SendError::NotRunning,
        TransportError::EditRejected(m) => transport::SendError::EditRejected(m),
        TransportError::RateLimited { retry_after_ms } => {
            transport::SendError::RateLimited(retry_after_ms)
        }
        other => transport::SendError::Failed(other.to_string()),
    }
}
