//! What a button press may stand for, the same on every platform. A press arrives as an
//! ordinary envelope whose text is the button's command (`wit/transport.wit`, `record
//! button`), so a client that forges a press (Telegram's `callback_data`, Discord's
//! `custom_id` and Slack's `value` are all chosen by whoever sends them) could smuggle a
//! prompt in under a button's name. A transport therefore takes a press only when its text
//! is one of the bridge's button commands, shaped as the bridge makes them.

/// What may follow a button command's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Nothing, or one of these words (`/approve <id> turn`).
    Optional(&'static [&'static str]),
    /// Exactly one short word of letters and digits (`/answer <id> 2`, `/answer <id> yes`).
    Word,
}

/// One command a button may stand for: its name, an id, then what [`After`] allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ButtonCommand {
    /// `/approve`.
    pub name: &'static str,
    /// What may follow the id.
    pub after: After,
}

/// The commands a button may stand for: an approval's choices (`/approve <id>`,
/// `/approve <id> turn`, `/deny <id>`, `/details <id>`) and an agent question's answer
/// (`/answer <id> <choice>`: an option's number, yes or no). A new kind of button adds
/// its command here, and every platform takes it.
pub const BUTTON_COMMANDS: &[ButtonCommand] = &[
    ButtonCommand {
        name: "/approve",
        after: After::Optional(&["turn"]),
    },
    ButtonCommand {
        name: "/deny",
        after: After::Optional(&[]),
    },
    ButtonCommand {
        name: "/details",
        after: After::Optional(&[]),
    },
    ButtonCommand {
        name: "/answer",
        after: After::Word,
    },
];

/// Longest id or word a button command carries (approval ids are 4 letters).
pub const MAX_ID: usize = 16;

/// True when `text` is a button command: one of [`BUTTON_COMMANDS`], then an id of at most
/// [`MAX_ID`] ASCII letters and digits, then what that command allows after it. Anything
/// else (a prompt, a second sentence, markup) is not what any bridge button sends.
pub fn is_button_command(text: &str) -> bool {
    let short = |word: &str| {
        !word.is_empty() && word.len() <= MAX_ID && word.chars().all(|c| c.is_ascii_alphanumeric())
    };
    let words: Vec<&str> = text.split_whitespace().collect();
    let (name, id, rest) = match words.as_slice() {
        [name, id, rest @ ..] => (*name, *id, rest),
        _ => return false,
    };
    short(id)
        && BUTTON_COMMANDS.iter().any(|command| {
            command.name == name
                && match (command.after, rest) {
                    (After::Optional(_), []) => true,
                    (After::Optional(words), [word]) => words.contains(word),
                    (After::Word, [word]) => short(word),
                    _ => false,
                }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bridges_own_commands_are_taken() {
        for taken in [
            "/approve qd4k",
            "/deny qd4k",
            "/approve qd4k turn",
            "/details qd4k",
            " /deny ab ",
        ] {
            assert!(is_button_command(taken), "{taken}");
        }
        for refused in [
            "",
            "/approve",
            "/status",
            "delete everything",
            "/approve qd4k turn now",
            "/approve qd4k extra",
            "/deny qd4k turn",
            "/answer qd4k",
            "/answer qd4k run rm -rf",
            "/answer qd4k ../x",
            "/deny qd4k yes",
            "/approve qd4k; rm -rf",
            "/approve <b>x</b>",
            "/approve aaaaaaaaaaaaaaaaa",
            "/approve q-d4k",
            "approve qd4k",
        ] {
            assert!(!is_button_command(refused), "{refused}");
        }
    }
}
