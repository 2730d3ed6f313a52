//! `ui`: the local terminal of the agent session.

use std::sync::Arc;

use wasmtime::component::HasData;

use super::{Imports, SessionContext};
use crate::local::ui::Ui;
use crate::transcript::line::Event;
use crate::transcript::script::Script;
use crate::wit::{types, ui};

/// What the ui calls may touch: the local terminal.
pub struct UiPart<'a> {
    ui: &'a Arc<dyn Ui>,
}

/// The ui interface's view, for the linker.
pub struct UiImports;

impl HasData for UiImports {
    type Data<'a> = Imports<'a, UiPart<'a>>;
}

impl SessionContext {
    /// The ui interface's view of this session.
    pub fn ui_imports(&mut self) -> Imports<'_, UiPart<'_>> {
        imports!(self, UiPart { ui: &self.ui })
    }
}

impl ui::Host for Imports<'_, UiPart<'_>> {
    async fn notify(&mut self, level: types::Level, text: String) {
        self.tape.record(|| Event::Notify {
            level,
            text: text.clone(),
        });
        // Notices quote platform ids and names (a robo_claw room, a sender); whatever a
        // normaliser missed must still not reach a terminal, stderr or pi's TUI as an
        // escape, a bidi override or an invisible character.
        let text = transport_core::printable::strip_invisible_keep_lines(&text);
        self.part.ui.notify(level, &text).await;
    }

    async fn confirm(&mut self, title: String, message: String) -> bool {
        self.tape
            .exchange(
                || Event::Confirm {
                    title: title.clone(),
                    message: message.clone(),
                },
                Script::confirmed,
                self.part.ui.confirm(&title, &message),
                |yes| Event::Confirmed { yes: *yes },
            )
            .await
    }
}
