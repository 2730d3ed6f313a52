//! Buttons → an inline keyboard (pure). One row, every button a callback button whose
//! `callback_data` is the command the press stands for; a press comes back as a
//! `callback_query` that [`crate::normalize`] turns into that command from the presser.

use transport_core::Button;

use crate::wire::{InlineKeyboardButton, InlineKeyboardMarkup};

/// Telegram's limit for `callback_data`, in bytes.
pub const CALLBACK_DATA_MAX_BYTES: usize = 64;

/// The keyboard for `buttons`, or `None` when there is nothing to show. A button whose
/// command is empty or over 64 bytes cannot be carried and is left out rather than
/// failing the whole message (Telegram answers 400 `BUTTON_DATA_INVALID`): the message
/// text always says what to type. A blank label shows the command instead, since
/// Telegram refuses an empty one.
pub fn inline_keyboard(buttons: &[Button]) -> Option<InlineKeyboardMarkup> {
    let row: Vec<InlineKeyboardButton> = buttons
        .iter()
        .filter(|b| !b.command.trim().is_empty() && b.command.len() <= CALLBACK_DATA_MAX_BYTES)
        .map(|b| InlineKeyboardButton {
            text: if b.label.trim().is_empty() {
                b.command.clone()
            } else {
                b.label.clone()
            },
            callback_data: b.command.clone(),
        })
        .collect();
    (!row.is_empty()).then(|| InlineKeyboardMarkup {
        inline_keyboard: vec![row],
    })
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
    fn buttons_become_one_row_of_callback_buttons() {
        let keyboard = inline_keyboard(&[
            button("Approve", "/approve qd4k"),
            button("Deny", "/deny qd4k"),
        ])
        .expect("a keyboard");
        assert_eq!(
            serde_json::to_value(&keyboard).expect("json"),
            serde_json::json!({"inline_keyboard": [[
                {"text": "Approve", "callback_data": "/approve qd4k"},
                {"text": "Deny", "callback_data": "/deny qd4k"}
            ]]})
        );
    }

    #[test]
    fn what_telegram_would_refuse_is_left_out() {
        assert_eq!(inline_keyboard(&[]), None);
        let long = format!("/approve {}", "x".repeat(60));
        assert_eq!(
            inline_keyboard(&[button("Too long", &long), button("Empty", " ")]),
            None
        );
        let keyboard = inline_keyboard(&[button("", "/deny ab")]).expect("a keyboard");
        assert_eq!(keyboard.inline_keyboard[0][0].text, "/deny ab");
        // Exactly 64 bytes still fits.
        let edge = format!("/deny {}", "y".repeat(58));
        assert_eq!(edge.len(), 64);
        assert!(inline_keyboard(&[button("Edge", &edge)]).is_some());
    }
}
