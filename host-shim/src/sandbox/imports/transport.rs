//! `transport`: the messengers this session's bridge created, by id.

use transport_core::{Button, OutboundMessage, TransportError};

use super::SessionHost;
use crate::sandbox::convert;
use crate::transcript::line::{Event, FetchedMeta};
use crate::transcript::script::Script;
use crate::wit::transport;

impl transport::Host for SessionHost {
    async fn identify(&mut self, id: String) -> Result<transport::Identity, String> {
        let asked = id.clone();
        self.answer(
            |script| script.identified(&asked),
            async |host: &mut SessionHost| host.identify_live(&id).await,
            |result| Event::Identified {
                transport: id.clone(),
                result: result.clone(),
            },
        )
        .await
    }

    async fn listen(&mut self, id: String) -> Result<(), String> {
        let live = id.clone();
        self.exchange(
            || Event::Listen {
                transport: id.clone(),
            },
            Script::listened,
            async |host: &mut SessionHost| host.listen_live(live).await,
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
        self.note(|| Event::Send {
            message: message.clone(),
        });
        self.answer(
            Script::sent,
            async |host: &mut SessionHost| host.send_live(message).await,
            |result| Event::Sent {
                result: result.clone(),
            },
        )
        .await
    }

    fn typing(
        &mut self,
        id: String,
        conversation_id: String,
        thread_id: Option<String>,
    ) -> wasmtime::Result<()> {
        self.note(|| Event::Typing {
            transport: id.clone(),
            conversation_id: conversation_id.clone(),
            thread_id: thread_id.clone(),
        });
        self.typing_live(id, conversation_id, thread_id);
        Ok(())
    }

    async fn fetch_attachment(
        &mut self,
        id: String,
        reference: String,
        max_bytes: u64,
    ) -> Result<transport::FetchedAttachment, String> {
        self.answer(
            Script::fetched,
            async |host: &mut SessionHost| host.fetch_live(id, reference, max_bytes).await,
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

    async fn diagnose(&mut self, id: String) -> String {
        let live = id.clone();
        self.answer(
            Script::diagnosed,
            async |host: &mut SessionHost| match host.transport(&live) {
                Some(t) => t.diagnose(),
                None => "not created".into(),
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
impl SessionHost {
    async fn identify_live(&mut self, id: &str) -> Result<transport::Identity, String> {
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

    async fn listen_live(&mut self, id: String) -> Result<(), String> {
        let Some(t) = self.transport(&id) else {
            return Err(format!("no transport '{id}' was created for this session"));
        };
        // A restarted guest asks again; the transport is still running.
        if self.ctx.listening.contains(&id) {
            return Ok(());
        }
        t.start(self.ctx.inbound.clone())
            .await
            .map_err(|e| e.to_string())?;
        self.ctx.listening.push(id);
        Ok(())
    }

    async fn send_live(
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
        };
        t.send(outbound)
            .await
            .map(|r| transport::Receipt {
                message_id: r.message_id,
                edit_key: r.edit_key,
            })
            .map_err(|e| match e {
                TransportError::NotStarted(_) => transport::SendError::NotRunning,
                TransportError::EditRejected(m) => transport::SendError::EditRejected(m),
                TransportError::RateLimited { retry_after_ms } => {
                    transport::SendError::RateLimited(retry_after_ms)
                }
                other => transport::SendError::Failed(other.to_string()),
            })
    }

    fn typing_live(&mut self, id: String, conversation_id: String, thread_id: Option<String>) {
        if let Some(t) = self.transport(&id) {
            // Best effort by contract (I24): a failed indicator never fails a turn, so the
            // bridge does not wait for it either. A platform round trip (Telegram's
            // sendChatAction) would otherwise hold up every prompt it accompanies.
            tokio::spawn(async move {
                let _ = t.typing(&conversation_id, thread_id.as_deref()).await;
            });
        }
    }

    async fn fetch_live(
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
