//! `store`: this session's state document, in the host's state store.

use super::SessionHost;
use crate::local::logging::LogLine;
use crate::transcript::line::Event;
use crate::transcript::script::Script;
use crate::wit::{store, types};

impl store::Host for SessionHost {
    async fn load(&mut self) -> Option<String> {
        self.answer(
            Script::loaded,
            async |host: &mut SessionHost| host.load_live().await,
            |document| Event::Loaded {
                document: document.clone(),
            },
        )
        .await
    }

    async fn save(&mut self, document: String) -> Result<(), String> {
        self.note(|| Event::Save {
            bytes: document.len(),
        });
        self.answer(
            Script::saved,
            async |host: &mut SessionHost| {
                host.ctx
                    .state
                    .save(&host.ctx.key, &document)
                    .await
                    .map_err(|e| e.to_string())
            },
            |result| Event::Saved {
                result: result.clone(),
            },
        )
        .await
    }
}

impl SessionHost {
    async fn load_live(&mut self) -> Option<String> {
        match self.ctx.state.load(&self.ctx.key).await {
            Ok(document) => document,
            Err(error) => {
                // Starting empty is safe: the store refuses a save over the document
                // it could not read (no revision known), so nothing is overwritten.
                self.ctx.log.write(
                    &self.ctx.key,
                    LogLine::new(
                        types::Level::Error,
                        "state not loaded",
                        &[("error", error.to_string())],
                    ),
                );
                None
            }
        }
    }
}
