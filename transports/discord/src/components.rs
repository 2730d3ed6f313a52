//! Buttons → message components (pure). One action row of buttons whose `custom_id` is the
//! command the click stands for; a click comes back as INTERACTION_CREATE, which
//! [`crate::normalize`] turns into that command from the clicker.

use transport_core::Button;

use crate::wire::{ACTION_ROW, ActionRow, BUTTON, ComponentButton};

/// Discord's limit for `custom_id`, in characters.
pub const CUSTOM_ID_MAX_CHARS: usize = 100;
/// Discord's limit for a button label, in characters.
pub const LABEL_MAX_CHARS: usize = 80;
/// Buttons in one action row.
pub const ROW_MAX_BUTTONS: usize = 5;

/// The action rows for `buttons`: empty when there is nothing to show. A button whose
/// command is empty or longer than 100 characters cannot be carried and is left out
/// rather than failing the whole message (Discord answers 400 Invalid Form Body): the
/// message text always says what to type. More than five buttons fill further rows.
pub fn action_rows(buttons: &[Button]) -> Vec<ActionRow> {
    let carried: Vec<ComponentButton> = buttons
        .iter()
        .filter(|b| {
            !b.command.trim().is_empty() && b.command.chars().count() <= CUSTOM_ID_MAX_CHARS
        })
        .map(|b| ComponentButton {
            kind: BUTTON,
            style: style(&b.command),
            label: label(b),
            custom_id: b.command.clone(),
        })
        .collect();
    carried
        .chunks(ROW_MAX_BUTTONS)
        .map(|row| ActionRow {
            kind: ACTION_ROW,
            components: row.to_vec(),
        })
        .collect()
}

/// Green for a yes, red for a no, grey for everything else: the colour tells the two
/// choices that decide apart at a glance on a phone.
fn style(command: &str) -> u8 {
    match command.split_whitespace().collect::<Vec<_>>().as_slice() {
        ["/approve", _] => 3,
        ["/deny", ..] => 4,
        _ => 2,
    }
}

/// The label, cut to Discord's 80 characters; a blank one shows the command, since
/// Discord refuses a button with neither label nor emoji.
fn label(button: &Button) -> String {
    let text = if button.label.trim().is_empty() {
        &button.command
    } else {
        &button.label
    };
    text.chars().take(LABEL_MAX_CHARS).collect()
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
    fn buttons_become_one_action_row_with_the_command_as_custom_id() {
        let rows = action_rows(&[
            button("Approve", "/approve qd4k"),
            button("Deny", "/deny qd4k"),
            button("This turn", "/approve qd4k turn"),
        ]);
        assert_eq!(
            serde_json::to_value(&rows).expect("json"),
            serde_json::json!([{"type": 1, "components": [
                {"type": 2, "style": 3, "label": "Approve", "custom_id": "/approve qd4k"},
                {"type": 2, "style": 4, "label": "Deny", "custom_id": "/deny qd4k"},
                {"type": 2, "style": 2, "label": "This turn", "custom_id": "/approve qd4k turn"}
            ]}])
        );
    }

    #[test]
    fn what_discord_would_refuse_is_left_out_or_cut() {
        assert!(action_rows(&[]).is_empty());
        let long = format!("/approve {}", "x".repeat(92));
        assert_eq!(long.chars().count(), 101);
        assert!(action_rows(&[button("Too long", &long), button("Empty", " ")]).is_empty());
        let edge = format!("/deny {}", "y".repeat(94));
        assert_eq!(action_rows(&[button("Edge", &edge)]).len(), 1);
        let rows = action_rows(&[button("", "/deny ab")]);
        assert_eq!(rows[0].components[0].label, "/deny ab");
        let rows = action_rows(&[button(&"L".repeat(100), "/deny ab")]);
        assert_eq!(rows[0].components[0].label.chars().count(), 80);
        let six: Vec<Button> = (0..6)
            .map(|i| button("n", &format!("/deny a{i}")))
            .collect();
        let rows = action_rows(&six);
        assert_eq!((rows.len(), rows[0].components.len()), (2, 5));
    }
}
