//! Buttons → Block Kit (pure): the message text in a `section` block and the buttons in an
//! `actions` block, each button's `value` the command a click stands for. A click comes
//! back over Socket Mode as an `interactive` envelope of type `block_actions`, which
//! [`crate::normalize`] turns into that command from the clicker.

use serde_json::{Value, json};
use transport_core::Button;

/// Slack's limit for a section's text, in characters.
pub const SECTION_TEXT_MAX_CHARS: usize = 3000;
/// Slack's limit for a button's text, in characters.
pub const BUTTON_TEXT_MAX_CHARS: usize = 75;
/// Slack's limit for a button's `value`, in characters.
pub const VALUE_MAX_CHARS: usize = 2000;
/// Slack's limit for elements in one `actions` block.
pub const ACTIONS_MAX_ELEMENTS: usize = 25;
/// The `block_id` of the bridge's buttons.
pub const ACTIONS_BLOCK_ID: &str = "bridge-buttons";

/// The blocks for `text` with `buttons` under it; empty when there is nothing to show or
/// the text does not fit a section (then the message goes as plain `text`, which always
/// says what to type). A button whose command is empty or too long is left out rather
/// than failing the message (Slack answers `invalid_blocks`).
pub fn message_blocks(text: &str, buttons: &[Button]) -> Vec<Value> {
    let elements: Vec<Value> = buttons
        .iter()
        .filter(|b| !b.command.trim().is_empty() && b.command.chars().count() <= VALUE_MAX_CHARS)
        .take(ACTIONS_MAX_ELEMENTS)
        .enumerate()
        .map(|(index, button)| {
            let mut element = json!({
                "type": "button",
                "action_id": format!("bridge-{index}"),
                "text": {"type": "plain_text", "text": label(button), "emoji": true},
                "value": button.command,
            });
            if let Some(style) = style(&button.command) {
                element["style"] = json!(style);
            }
            element
        })
        .collect();
    if elements.is_empty()
        || text.trim().is_empty()
        || text.chars().count() > SECTION_TEXT_MAX_CHARS
    {
        return Vec::new();
    }
    vec![
        json!({"type": "section", "text": {"type": "mrkdwn", "text": text}}),
        json!({"type": "actions", "block_id": ACTIONS_BLOCK_ID, "elements": elements}),
    ]
}

/// Green for a yes, red for a no, default for the rest.
fn style(command: &str) -> Option<&'static str> {
    match command.split_whitespace().collect::<Vec<_>>().as_slice() {
        ["/approve", _] => Some("primary"),
        ["/deny", ..] => Some("danger"),
        _ => None,
    }
}

/// The label, cut to 75 characters; a blank one shows the command (Slack refuses empty
/// button text).
fn label(button: &Button) -> String {
    let text = if button.label.trim().is_empty() {
        &button.command
    } else {
        &button.label
    };
    text.chars().take(BUTTON_TEXT_MAX_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn button(label: &str, command: &str) -> Button {
        Button {
            label: label.to_owned(),
            command: command.to_owned(),
        }
    }

    #[test]
    fn buttons_become_an_actions_block_under_the_text() {
        let blocks = message_blocks(
            "Approval needed (qd4k)",
            &[
                button("Approve once", "/approve qd4k"),
                button("Deny", "/deny qd4k"),
                button("Details", "/details qd4k"),
            ],
        );
        assert_eq!(
            Value::Array(blocks),
            json!([
                {"type": "section", "text": {"type": "mrkdwn", "text": "Approval needed (qd4k)"}},
                {"type": "actions", "block_id": "bridge-buttons", "elements": [
                    {"type": "button", "action_id": "bridge-0", "text": {"type": "plain_text", "text": "Approve once", "emoji": true}, "value": "/approve qd4k", "style": "primary"},
                    {"type": "button", "action_id": "bridge-1", "text": {"type": "plain_text", "text": "Deny", "emoji": true}, "value": "/deny qd4k", "style": "danger"},
                    {"type": "button", "action_id": "bridge-2", "text": {"type": "plain_text", "text": "Details", "emoji": true}, "value": "/details qd4k"}
                ]}
            ])
        );
    }

    #[test]
    fn nothing_to_show_or_too_long_a_text_means_plain_text() {
        assert!(message_blocks("hi", &[]).is_empty());
        assert!(message_blocks("hi", &[button("Empty", " ")]).is_empty());
        let long = "x".repeat(3001);
        assert!(message_blocks(&long, &[button("Deny", "/deny ab")]).is_empty());
        let blocks = message_blocks("hi", &[button("", "/deny ab")]);
        assert_eq!(blocks[1]["elements"][0]["text"]["text"], "/deny ab");
        let blocks = message_blocks("hi", &[button(&"L".repeat(90), "/deny ab")]);
        assert_eq!(
            blocks[1]["elements"][0]["text"]["text"]
                .as_str()
                .map(|t| t.chars().count()),
            Some(75)
        );
    }
}
