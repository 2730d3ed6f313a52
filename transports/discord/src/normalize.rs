//! The pure normalizer: one raw gateway payload and the bot's own identity in, an
//! [`Envelope`] or the reason it is ignored out. No I/O, no clock, no randomness, so
//! `host-shim explain discord payload.json` shows exactly what the running transport
//! would do, and no payload can make it panic (C5).
//!
//! Accepted payloads: a gateway frame (`{"op":0,"t":"MESSAGE_CREATE","s":..,"d":{..}}`),
//! an event without the frame (`{"t":..,"d":..}`), or a bare Message object (what a
//! person copies out of a log or the docs).
//!
//! # What the envelope carries
//!
//! - `conversation_id`: `channel_id`. A thread is a channel of its own
//!   (docs/protocols.md#discord-messages): a message in a thread has the thread's id as
//!   `channel_id`, and replying to that channel replies in the thread. So `thread_id` is
//!   always `None` and the capabilities say `threads: false`; pairing a thread pairs that
//!   thread, not its parent.
//! - `user_id`: `author.id`.
//! - `is_direct`: no `guild_id` (the primary DM signal; `channel_type` is missing in
//!   older payloads).
//! - `timestamp`: from the message id: a snowflake holds its creation time in ms since
//!   the Discord epoch (2015-01-01), the same instant as the `timestamp` field, with no
//!   date parsing that could fail.
//! - `text`: `content` with every mention of the bot (`<@id>`, and the deprecated `<@!id>`)
//!   removed; other users', roles' and channels' mentions stay as Discord wrote them.
//! - `attachments`: each attachment's signed CDN `url` (or `proxy_url`), its declared
//!   `content_type` (`application/octet-stream` when absent), file name and size. The
//!   URL expires (`ex=` in its query), so the bridge fetches promptly; the size is checked
//!   again on the bytes received (I19).
//!
//! # Addressing and commands (docs/decisions.md#decision-1-bot-status-is-a-command)
//!
//! `addressed` is true when the bot was explicitly addressed: a DM; the bot's id in
//! `mentions` (which is also how a *reply that pings* shows, with no `<@id>` in the
//! content, docs/protocols.md#discord-messages); `<@id>` / `<@!id>` in the content; or a
//! reply to one of the bot's messages (`referenced_message.author.id`), pinging or not.
//! `@everyone` and `@here` do not address the bot: they address everyone, and answering
//! them all would turn one announcement into a flood of pairing notices. A mention of the
//! bot's managed *role* (`<@&role>`) is not recognised: the gateway does not say which role
//! is the bot's without the GUILDS intent, which the bridge does not ask for.
//!
//! The mention is removed with what separates a *leading* mention from the words after
//! it (whitespace, `,`, `:`, `-`), the same rule as Telegram's normalizer. In a channel:
//!
//! | sent | text | addressed |
//! |---|---|---|
//! | `<@Bot> status` | `status` | true |
//! | `<@!Bot> /status` | `/status` | true |
//! | `<@Bot>, status please` | `status please` | true |
//! | `please <@Bot> look` | `please look` | true |
//! | reply (pinging) to the bot: `status` | `status` | true |
//! | `<@Bot>` | `` (empty) | true |
//! | `status` | `status` | false |
//!
//! The router treats the text of an addressed, non-direct envelope as the body after a
//! leading `@bot`: `status` and `/status` are commands, an empty text is the bot being
//! called by name. The flag is the only carrier of the mention.
//!
//! # Button clicks
//!
//! An INTERACTION_CREATE of type 3 (a click on a message component, the approval request's
//! buttons) becomes the command the button stands for (its `custom_id`), from the clicker
//! (`member.user` in a server, `user` in a DM), in the clicked message's channel,
//! addressed, with the interaction's id as its message id (two clicks are two answers)
//! ([`normalize_interaction`]). A `custom_id` that is not one of the bridge's button
//! commands ([`transport_core::buttons::is_button_command`]) is refused: a client can send
//! any `custom_id` it likes. Every click is acknowledged by the gateway, refused or not
//! ([`crate::interactions`]).
//!
//! # What is ignored, and why
//!
//! The bot's own messages, other bots' and webhooks' (I14: two bots answering each other
//! never stop), Discord's system user, system messages (joins, pins, boosts, thread
//! created: every `type` other than 0 DEFAULT and 19 REPLY), messages with neither text
//! nor a readable attachment (stickers, polls, forwards), and every event other than
//! MESSAGE_CREATE and component clicks (edits are not new prompts; slash commands and
//! modals are not something the bridge registers).

use serde::Deserialize;
use serde_json::Value;
use transport_core::buttons::is_button_command;
use transport_core::platform::{BotSelf, Normalized};
use transport_core::printable::clean_ids;
use transport_core::{Attachment, AttachmentKind, Envelope};

use crate::wire::{Interaction, MESSAGE_COMPONENT, Message, User};

/// The transport id envelopes carry.
pub const TRANSPORT_ID: &str = "discord";

/// 2015-01-01T00:00:00Z in ms since the Unix epoch: snowflake time zero.
pub const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// Message type DEFAULT.
const DEFAULT: u8 = 0;
/// Message type REPLY.
const REPLY: u8 = 19;

/// Normalizes one raw payload (a gateway frame, an event, or a bare Message).
pub fn normalize(payload: &Value, me: &BotSelf) -> Normalized {
    let Some(fields) = payload.as_object() else {
        return ignored("not a Discord payload (expected a JSON object)");
    };
    let event = fields.get("t").and_then(Value::as_str);
    let op = fields.get("op").and_then(Value::as_u64);
    let message = match (op, event) {
        (Some(0) | None, Some("MESSAGE_CREATE")) => fields.get("d").unwrap_or(&Value::Null),
        (Some(0) | None, Some("INTERACTION_CREATE")) => {
            let d = fields.get("d").unwrap_or(&Value::Null);
            return match Interaction::deserialize(d) {
                Ok(interaction) => normalize_interaction(&interaction, me),
                Err(_) => ignored(
                    "an interaction this bridge cannot read (no id or type, or a field of the wrong type)",
                ),
            };
        }
        (Some(0) | None, Some(other)) => {
            return Normalized::Ignored(format!(
                "a {other} event: only new messages (MESSAGE_CREATE) become prompts or commands"
            ));
        }
        (Some(op), None) if fields.contains_key("d") => {
            return Normalized::Ignored(format!("a gateway frame with op {op}, not an event"));
        }
        _ => payload,
    };
    match Message::deserialize(message) {
        Ok(message) => normalize_message(&message, me),
        Err(_) => ignored(
            "not a Discord message this bridge can read (no id, channel_id or author.id, or a field of the wrong type)",
        ),
    }
}

/// Normalizes one MESSAGE_CREATE message (see the module docs for every rule).
pub fn normalize_message(message: &Message, me: &BotSelf) -> Normalized {
    if message.id.is_empty() || message.channel_id.is_empty() || message.author.id.is_empty() {
        return ignored("a message without an id, channel_id or author id");
    }
    if is_me(&message.author.id, me) {
        return ignored("the bot's own message");
    }
    if message.webhook_id.is_some() {
        return Normalized::Ignored(format!(
            "a webhook message{}: webhooks are not people the bridge answers",
            name(&message.author)
        ));
    }
    if message.author.system == Some(true) {
        return ignored("a message from Discord's system user");
    }
    if message.author.bot == Some(true) {
        return Normalized::Ignored(format!(
            "a message from another bot{}",
            name(&message.author)
        ));
    }
    if message.kind != DEFAULT && message.kind != REPLY {
        return Normalized::Ignored(format!(
            "a system message of type {} (only ordinary messages and replies are handled)",
            message.kind
        ));
    }
    let attachments = attachments(message);
    if message.content.trim().is_empty() && attachments.is_empty() {
        return ignored(
            "a message with neither text nor an attachment (a sticker, an embed, a poll or a forward)",
        );
    }

    let is_direct = message.guild_id.is_none();
    let spans = mention_spans(&message.content, me);
    let mentioned = message.mentions.iter().any(|user| is_me(&user.id, me));
    let replied_to_me = message
        .referenced_message
        .as_ref()
        .and_then(|referenced| referenced.author.as_ref())
        .is_some_and(|author| is_me(&author.id, me));
    let addressed = is_direct || mentioned || !spans.is_empty() || replied_to_me;

    Normalized::Message(clean_ids(Envelope {
        transport: TRANSPORT_ID.to_owned(),
        conversation_id: message.channel_id.clone(),
        user_id: message.author.id.clone(),
        thread_id: None,
        timestamp: snowflake_ms(&message.id),
        text: remove_spans(&message.content, &spans),
        is_direct,
        addressed,
        attachments,
        // Snowflakes are unique across Discord.
        message_id: Some(message.id.clone()).filter(|id| !id.is_empty()),
        press: None,
    }))
}

/// Normalizes one INTERACTION_CREATE (see "Button clicks" in the module docs).
pub fn normalize_interaction(interaction: &Interaction, me: &BotSelf) -> Normalized {
    if interaction.kind != MESSAGE_COMPONENT {
        return Normalized::Ignored(format!(
            "an interaction of type {} (only clicks on the bridge's buttons, type 3, are handled)",
            interaction.kind
        ));
    }
    let clicker = interaction
        .member
        .as_ref()
        .and_then(|member| member.user.as_ref())
        .or(interaction.user.as_ref());
    let Some(clicker) = clicker.filter(|user| !user.id.is_empty()) else {
        return ignored("a button click that names no user");
    };
    if is_me(&clicker.id, me) || clicker.bot == Some(true) {
        return Normalized::Ignored(format!("a button click from a bot{}", name(clicker)));
    }
    let channel = interaction
        .channel_id
        .as_deref()
        .filter(|channel| !channel.is_empty());
    let Some(channel) = channel else {
        return ignored("a button click that names no channel, so there is nowhere to answer");
    };
    let text = interaction
        .data
        .as_ref()
        .map(|data| data.custom_id.trim())
        .unwrap_or_default();
    if !is_button_command(text) {
        return ignored(
            "a button click whose custom_id is not a bridge command (a client can send any custom_id, so only the bridge's own /approve, /deny and /details buttons are taken)",
        );
    }
    Normalized::Message(clean_ids(Envelope {
        transport: TRANSPORT_ID.to_owned(),
        conversation_id: channel.to_owned(),
        user_id: clicker.id.clone(),
        thread_id: None,
        timestamp: snowflake_ms(&interaction.id),
        text: text.to_owned(),
        is_direct: interaction.guild_id.is_none(),
        addressed: true,
        attachments: Vec::new(),
        message_id: Some(format!("interaction:{}", interaction.id)),
        // The interaction's token answers it privately; the transport keeps it under
        // this id, the bridge never sees it.
        press: Some(format!("interaction:{}", interaction.id)),
    }))
}

fn ignored(reason: &str) -> Normalized {
    Normalized::Ignored(reason.to_owned())
}

fn is_me(id: &str, me: &BotSelf) -> bool {
    !me.id.is_empty() && id == me.id
}

fn name(user: &User) -> String {
    if user.username.is_empty() {
        String::new()
    } else {
        format!(" ({})", user.username)
    }
}

/// When a snowflake was made, in ms since the Unix epoch; 0 for an id that is not one.
pub fn snowflake_ms(id: &str) -> u64 {
    id.parse::<u64>().map_or(0, |snowflake| {
        (snowflake >> 22).saturating_add(DISCORD_EPOCH_MS)
    })
}

/// Byte ranges of `<@id>` and `<@!id>` mentions of the bot, in order.
fn mention_spans(content: &str, me: &BotSelf) -> Vec<(usize, usize)> {
    if me.id.is_empty() {
        return Vec::new();
    }
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(found) = content[from..].find("<@") {
        let start = from + found;
        let rest = &content[start + 2..];
        let rest_after_bang = rest.strip_prefix('!').unwrap_or(rest);
        let bang = rest.len() - rest_after_bang.len();
        match rest_after_bang
            .strip_prefix(me.id.as_str())
            .and_then(|after| after.strip_prefix('>'))
        {
            Some(_) => {
                let end = start + 2 + bang + me.id.len() + 1;
                spans.push((start, end));
                from = end;
            }
            None => from = start + 2,
        }
    }
    spans
}

fn is_gap(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// `content` without the `spans`. Where a span is removed, the spaces on both sides become
/// one (`please <@1> look` → `please look`) while newlines and indentation elsewhere stay
/// as written (a prompt may hold code). A span at the start takes the separator after it
/// along (`<@1>, status` → `status`).
fn remove_spans(content: &str, spans: &[(usize, usize)]) -> String {
    let mut pieces: Vec<&str> = Vec::with_capacity(spans.len() + 1);
    let mut at = 0;
    for &(start, end) in spans {
        pieces.push(&content[at..start]);
        at = end;
    }
    pieces.push(&content[at..]);

    let mut pieces = pieces.into_iter();
    let mut text = pieces.next().unwrap_or_default().to_owned();
    let mut leading = text.trim().is_empty();
    for piece in pieces {
        if leading {
            // Everything so far was the mention (and whitespace before it).
            text = piece
                .trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ':' | '-'))
                .to_owned();
            leading = text.trim().is_empty();
            continue;
        }
        let kept = text.trim_end_matches(is_gap).len();
        let gap = kept < text.len() || piece.starts_with(is_gap);
        text.truncate(kept);
        // `thanks <@1>, nice` → `thanks nice`: the comma belonged to the mention.
        let right = piece.trim_start_matches(is_gap);
        let right = right
            .strip_prefix([',', ':'])
            .map_or(right, |after| after.trim_start_matches(is_gap));
        if gap && !text.is_empty() && !right.is_empty() {
            text.push(' ');
        }
        text.push_str(right);
    }
    text.trim().to_owned()
}

/// The attachments a message announces, never downloaded here.
fn attachments(message: &Message) -> Vec<Attachment> {
    message
        .attachments
        .iter()
        .filter_map(|attachment| {
            let reference = attachment
                .url
                .as_deref()
                .or(attachment.proxy_url.as_deref())
                .filter(|url| !url.is_empty())?;
            let media_type = attachment
                .content_type
                .as_deref()
                .and_then(|value| value.split(';').next())
                .map(|value| value.trim().to_ascii_lowercase())
                .filter(|value| !value.is_empty())
                .unwrap_or_else(|| "application/octet-stream".to_owned());
            Some(Attachment {
                kind: if media_type.starts_with("image/") {
                    AttachmentKind::Image
                } else {
                    AttachmentKind::File
                },
                media_type,
                reference: reference.to_owned(),
                name: Some(attachment.filename.clone()).filter(|name| !name.is_empty()),
                size_bytes: attachment.size,
                duration_seconds: attachment
                    .duration_secs
                    .as_ref()
                    .and_then(serde_json::Value::as_f64)
                    .filter(|secs| secs.is_finite() && *secs >= 0.0)
                    .map(|secs| secs.ceil().min(f64::from(u32::MAX)) as u32),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> BotSelf {
        BotSelf {
            id: "42".to_owned(),
            username: "pi".to_owned(),
        }
    }

    #[test]
    fn mention_spans_find_both_forms_and_nothing_else() {
        let text = "<@42> a <@!42> b <@420> <@&42> <@!4 <@";
        let spans = mention_spans(text, &me());
        let found: Vec<&str> = spans.iter().map(|&(s, e)| &text[s..e]).collect();
        assert_eq!(found, ["<@42>", "<@!42>"]);
        assert!(mention_spans(text, &BotSelf::default()).is_empty());
    }

    #[test]
    fn removing_mentions_keeps_the_rest_as_written() {
        let cases = [
            ("<@42> status", "status"),
            ("<@42>, status please", "status please"),
            ("  <@42>:  /status", "/status"),
            ("please <@42> look", "please look"),
            ("thanks <@42>, nice", "thanks nice"),
            ("<@42> <@!42> twice", "twice"),
            ("<@42>", ""),
            ("code:\n    indented <@42>", "code:\n    indented"),
            ("ünï <@42> cödé", "ünï cödé"),
        ];
        for (content, expected) in cases {
            let spans = mention_spans(content, &me());
            assert_eq!(remove_spans(content, &spans), expected, "{content:?}");
        }
    }

    #[test]
    fn a_snowflake_holds_its_creation_time() {
        // The docs' example: 175928847299117063 was made at 2016-04-30T11:18:25.796Z.
        assert_eq!(snowflake_ms("175928847299117063"), 1_462_015_105_796);
        assert_eq!(snowflake_ms("not a snowflake"), 0);
        assert_eq!(snowflake_ms(""), 0);
    }
}
