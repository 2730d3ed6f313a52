//! The bridge's own code run natively, for host code that must agree with the bridge
//! without asking a running instance: its config reader (a transcript's code length, a
//! broker's list of who is allowed in which session, the transports a cluster's ingress
//! starts) and its capabilities (the broker renders its few replies with the bridge's
//! pipeline).

use transport_core::{Capabilities, LengthUnit, Markup};

/// The config files read by the bridge's own reader, natively: for host code that must
/// agree with the bridge on a setting (a transcript's code length, a broker's list of
/// who is allowed in which session) without asking a running instance.
pub fn read_config_natively(
    sources: &[crate::wit::session::ConfigSource],
) -> guest::core::config::LoadedConfig {
    guest::core::config::load_config(&sources_to_guest(sources), &[])
}

/// [`read_config_natively`] with `transports.*` validated against every platform this
/// host offers, so `transports` holds the requests the bridge would make: a cluster's
/// ingress starts the bots its sessions' config asks for.
pub fn read_transports_natively(
    sources: &[crate::wit::session::ConfigSource],
) -> guest::core::config::LoadedConfig {
    let platforms: Vec<guest::model::Platform> = crate::factory::declarations()
        .into_iter()
        .map(platform_to_guest)
        .collect();
    guest::core::config::load_config(&sources_to_guest(sources), &platforms)
}

fn sources_to_guest(
    sources: &[crate::wit::session::ConfigSource],
) -> Vec<guest::model::ConfigSource> {
    use crate::wit::session::{ConfigContent, ConfigScope};
    use guest::model;
    sources
        .iter()
        .map(|s| model::ConfigSource {
            scope: match s.scope {
                ConfigScope::Global => model::ConfigScope::Global,
                ConfigScope::Project => model::ConfigScope::Project,
                ConfigScope::Override => model::ConfigScope::Override,
            },
            path: s.path.clone(),
            content: match &s.content {
                ConfigContent::Text(text) => model::ConfigContent::Text(text.clone()),
                ConfigContent::Unreadable(why) => model::ConfigContent::Unreadable(why.clone()),
            },
        })
        .collect()
}

fn platform_to_guest(p: crate::wit::session::Platform) -> guest::model::Platform {
    use crate::wit::session::{SettingKind, SettingValue};
    use guest::model;
    model::Platform {
        id: p.id,
        display_name: p.display_name,
        settings: p
            .settings
            .into_iter()
            .map(|s| model::Setting {
                name: s.name,
                kind: match s.kind {
                    SettingKind::Boolean => model::SettingKind::Boolean,
                    SettingKind::EnvName => model::SettingKind::EnvName,
                    SettingKind::Url(schemes) => model::SettingKind::Url(schemes),
                    SettingKind::Integer(range) => model::SettingKind::Integer {
                        min: range.min,
                        max: range.max,
                    },
                    SettingKind::Text => model::SettingKind::Text,
                },
                default: s.default.map(|d| match d {
                    SettingValue::Boolean(b) => model::SettingValue::Boolean(b),
                    SettingValue::Integer(n) => model::SettingValue::Integer(n),
                    SettingValue::Text(t) => model::SettingValue::Text(t),
                }),
                summary: s.summary,
            })
            .collect(),
    }
}

/// Capabilities as the bridge's native pipeline reads them (the broker renders its own
/// few replies with it, so they are escaped and split like the bridge's).
pub fn capabilities_to_guest(c: Capabilities) -> guest::model::Capabilities {
    use guest::model;
    model::Capabilities {
        threads: c.threads,
        edit: c.edit,
        attachments: c.attachments,
        typing: c.typing,
        max_message_length: c.max_message_length,
        length_unit: match c.length_unit {
            LengthUnit::Chars => model::LengthUnit::Chars,
            LengthUnit::Utf16 => model::LengthUnit::Utf16,
            LengthUnit::Bytes => model::LengthUnit::Bytes,
        },
        markup: match c.markup {
            Markup::Plain => model::Markup::Plain,
            Markup::Markdown => model::Markup::Markdown,
            Markup::Html => model::Markup::Html,
            Markup::Mrkdwn => model::Markup::Mrkdwn,
        },
        reactions: c.reactions,
        drafts: c.drafts,
    }
}

/// Answers `envelope` with a notice from the host itself (the broker, a cluster's ingress, a
/// session that could not wake), rendered by the bridge's own pipeline for the platform's
/// markup and limit (a `<name>` must not break Telegram's HTML). Stops at the first piece
/// that fails.
pub async fn send_notice(
    transport: &dyn transport_core::Transport,
    envelope: &transport_core::Envelope,
    text: &str,
) -> Result<(), transport_core::TransportError> {
    send_notice_to(
        transport,
        &envelope.conversation_id,
        envelope.thread_id.as_deref(),
        text,
    )
    .await
}

/// [`send_notice`] to a conversation (and thread) named directly: a cluster node's notice
/// about a reply or a message it holds, with no envelope at hand. Redacted and rendered
/// like the bridge's own messages: such a notice may quote what the user typed or what a
/// platform answered.
pub async fn send_notice_to(
    transport: &dyn transport_core::Transport,
    conversation_id: &str,
    thread_id: Option<&str>,
    text: &str,
) -> Result<(), transport_core::TransportError> {
    let caps = capabilities_to_guest(transport.capabilities());
    let prepared = guest::core::outbound::prepare(text, &caps, 4);
    // The truncation notice goes too: a long `/sessions` list cut at four messages must
    // say that it was cut, not end as if it were whole.
    for text in prepared
        .messages
        .into_iter()
        .chain(prepared.truncation_notice)
    {
        transport
            .send(transport_core::OutboundMessage {
                conversation_id: conversation_id.to_owned(),
                thread_id: thread_id.map(str::to_owned),
                kind: transport_core::OutboundKind::Notice,
                text,
                edit_key: None,
                buttons: Vec::new(),
                answers_press: None,
                reply_to: None,
            })
            .await?;
    }
    Ok(())
}
