//! Progress card labels (docs/architecture.md#the-original-module-by-module). Only tool names reach
//! a chat, never arguments or outputs (I11), and names are flattened to one line so a hostile or
//! odd tool name cannot reshape the card.

use crate::core::text::collapse_whitespace;

/// The card every turn opens with, shown even when no tool runs (I23).
pub fn thinking_label() -> String {
    "thinking…".to_string()
}

/// The card while a tool runs.
pub fn tool_start_label(name: &str) -> String {
    format!("▶ {}", collapse_whitespace(name))
}

/// The card after a tool ended, marked by outcome.
pub fn tool_end_label(name: &str, ok: bool) -> String {
    let mark = if ok { '✓' } else { '✕' };
    format!("{mark} {}", collapse_whitespace(name))
}

/// The card for a tool call the bridge blocked (remote tool policy or a local "no"): it did not
/// run, and the card must not say it did
/// (docs/decisions.md#decision-22-the-card-says-only-what-happened).
pub fn tool_blocked_label(name: &str) -> String {
    format!("⊘ {} (blocked)", collapse_whitespace(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_table() {
        let rows = [
            (thinking_label(), "thinking…"),
            (tool_start_label("bash"), "▶ bash"),
            (tool_start_label("  mcp\n weird  "), "▶ mcp weird"),
            (tool_end_label("bash", true), "✓ bash"),
            (tool_end_label("bash", false), "✕ bash"),
            (tool_end_label(" a\tb ", false), "✕ a b"),
            (tool_blocked_label("bash"), "⊘ bash (blocked)"),
            (tool_blocked_label(" mcp\n x "), "⊘ mcp x (blocked)"),
        ];
        for (actual, expected) in rows {
            assert_eq!(actual, expected);
        }
    }
}
