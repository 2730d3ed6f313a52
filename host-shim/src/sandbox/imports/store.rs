//! `store`: this session's state document, in the host's state store.

use std::sync::Arc;

use wasmtime::component::HasData;

use super::{Imports, SessionContext};
use crate::disk::state_file::StateStore;
use crate::local::logging::{LogLine, LogSink};
use crate::transcript::line::Event;
use crate::transcript::script::Script;
use crate::wit::{store, types};

/// What the store calls may touch: this session's document in the host's state store, and
/// the log for a load that failed.
pub struct StorePart<'a> {
    key: &'a str,
    state: &'a Arc<dyn StateStore>,
    log: &'a dyn LogSink,
}

/// The store interface's view, for the linker.
pub struct StoreImports;

impl HasData for StoreImports {
    type Data<'a> = Imports<'a, StorePart<'a>>;
}

impl SessionContext {
    /// The store interface's view of this session.
    pub fn store_imports(&mut self) -> Imports<'_, StorePart<'_>> {
        imports!(
            self,
            StorePart {
                key: &self.key,
                state: &self.state,
                log: &*self.log,
            }
        )
    }
}

impl store::Host for Imports<'_, StorePart<'_>> {
    async fn load(&mut self) -> Option<String> {
        self.tape
            .answer(Script::loaded, self.part.load(), |document| Event::Loaded {
                document: document.clone(),
            })
            .await
    }

    async fn save(&mut self, document: String) -> Result<(), String> {
        self.tape.record(|| Event::Save {
            bytes: document.len(),
        });
        self.tape
            .answer(Script::saved, self.part.save(&document), |result| {
                Event::Saved {
                    result: result.clone(),
                }
            })
            .await
    }
}

impl StorePart<'_> {
    async fn save(&self, document: &str) -> Result<(), String> {
        self.state
            .save(self.key, document)
            .await
            .map_err(|e| e.to_string())
    }

    async fn load(&mut self) -> Option<String> {
        match self.state.load(self.key).await {
            Ok(document) => document,
            Err(error) => {
                // Starting empty is safe: the store refuses a save over the document
                // it could not read (no revision known), so nothing is overwritten.
                self.log.write(
                    self.key,
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
