//! `ui`: the local terminal of the agent session.

use super::SessionHost;
use crate::transcript::line::Event;
use crate::transcript::script::Script;
use crate::wit::{types, ui};

impl ui::Host for SessionHost {
    async fn notify(&mut self, level: types::Level, text: String) {
        self.note(|| Event::Notify {
            level,
            text: text.clone(),
        });
        // Notices quote platform ids and names (a robo_claw room, a sender); whatever a
        // normaliser missed must still not reach a terminal, stderr or pi's TUI as an
        // escape, a bidi override or an invisible character.
        let text = transport_core::printable::strip_invisible_keep_lines(&text);
        self.ctx.ui.notify(level, &text).await;
    }

    async fn confirm(&mut self, title: String, message: String) -> bool {
        self.exchange(
            || Event::Confirm {
                title: title.clone(),
                message: message.clone(),
            },
            Script::confirmed,
            async |host: &mut SessionHost| host.ctx.ui.confirm(&title, &message).await,
            |yes| Event::Confirmed { yes: *yes },
        )
        .await
    }
}
