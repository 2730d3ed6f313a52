//! Putting the bot's reaction on a user's message (`bridge.reactions`,
//! docs/pi.md#reactions-and-the-done-message). Best effort: a reaction that fails (a bot
//! without the right to react, a message deleted meanwhile) never touches the turn, and is
//! said once per transport in the log, not once per message.

use super::Bridge;
use crate::core::state::PromptMark;
use crate::host::Host;
use crate::model::{Level, Reaction};

impl Bridge {
    /// Puts `reaction` on each message of `marks`, taking away `replaces`.
    pub(super) fn react(
        &mut self,
        host: &mut dyn Host,
        marks: &[PromptMark],
        reaction: Reaction,
        replaces: Option<Reaction>,
    ) {
        if !self.config.reactions {
            return;
        }
        for mark in marks {
            let transport = &mark.target.transport;
            if !self.capabilities(transport).is_some_and(|c| c.reactions) {
                continue;
            }
            if let Err(why) = host.react(
                transport,
                &mark.target.conversation_id,
                &mark.message_id,
                reaction,
                replaces,
            ) && self.reactions_failed.insert(transport.clone())
            {
                host.log(
                    Level::Warning,
                    "reaction not set (said once per transport; the turn goes on)",
                    &[
                        ("transport", transport.clone()),
                        ("reaction", reaction.as_str().into()),
                        ("reason", why),
                    ],
                );
            }
        }
    }
}
