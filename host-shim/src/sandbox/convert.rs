//! Conversions between the transports' plain types and the WIT types.

use transport_core::{
    AttachmentKind, Capabilities, Envelope, LengthUnit, Markup, OutboundKind, Reaction,
};

use crate::wit::{transport, types};

/// Transport capabilities as the guest sees them.
pub fn capabilities_to_wit(c: Capabilities) -> types::Capabilities {
    types::Capabilities {
        threads: c.threads,
        edit: c.edit,
        attachments: c.attachments,
        typing: c.typing,
        max_message_length: c.max_message_length,
        length_unit: match c.length_unit {
            LengthUnit::Chars => types::LengthUnit::Chars,
            LengthUnit::Utf16 => types::LengthUnit::Utf16,
            LengthUnit::Bytes => types::LengthUnit::Bytes,
        },
        markup: match c.markup {
            Markup::Plain => types::Markup::Plain,
            Markup::Markdown => types::Markup::Markdown,
            Markup::Html => types::Markup::Html,
            Markup::Mrkdwn => types::Markup::Mrkdwn,
        },
        reactions: c.reactions,
        drafts: c.drafts,
    }
}

/// A reaction as the transports see it.
pub fn reaction_from_wit(reaction: transport::Reaction) -> Reaction {
    match reaction {
        transport::Reaction::Received => Reaction::Received,
        transport::Reaction::Done => Reaction::Done,
        transport::Reaction::Failed => Reaction::Failed,
    }
}

/// An outbound kind as the transports see it.
pub fn kind_from_wit(kind: transport::OutboundKind) -> OutboundKind {
    match kind {
        transport::OutboundKind::Reply => OutboundKind::Reply,
        transport::OutboundKind::Progress => OutboundKind::Progress,
        transport::OutboundKind::Digest => OutboundKind::Digest,
        transport::OutboundKind::Notice => OutboundKind::Notice,
    }
}

/// An inbound envelope as the guest sees it.
pub fn envelope_to_wit(e: Envelope) -> types::Envelope {
    types::Envelope {
        transport: e.transport,
        conversation_id: e.conversation_id,
        user_id: e.user_id,
        thread_id: e.thread_id,
        timestamp_ms: e.timestamp,
        text: e.text,
        is_direct: e.is_direct,
        addressed: e.addressed,
        attachments: e
            .attachments
            .into_iter()
            .map(|a| types::Attachment {
                kind: match a.kind {
                    AttachmentKind::Image => types::AttachmentKind::Image,
                    AttachmentKind::File => types::AttachmentKind::File,
                },
                media_type: a.media_type,
                reference: a.reference,
                name: a.name,
                size_bytes: a.size_bytes,
                duration_seconds: a.duration_seconds,
            })
            .collect(),
        // A press is no message of the user's: nothing to reply to or react on.
        message_id: e.message_id.filter(|_| e.press.is_none()),
        press: e.press,
    }
}
