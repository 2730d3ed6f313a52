//! `store`: this session's state (its document and queue), in the host's state store.

use std::sync::Arc;

use wasmtime::component::HasData;

use super::{Imports, SessionContext};
use crate::disk::state_store::{StateChanges, StateStore};
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
    async fn load(&mut self) -> Option<store::SavedState> {
        self.tape
            .answer(Script::loaded, self.part.load(), |saved| Event::Loaded {
                document: saved.as_ref().map(|saved| saved.document.clone()),
                queued: saved
                    .as_ref()
                    .map(|saved| saved.queued.clone())
                    .unwrap_or_default(),
            })
            .await
    }

    async fn save(&mut self, changes: store::StateChanges) -> Result<(), String> {
        self.tape.record(|| Event::Save {
            bytes: changes.document.as_ref().map_or(0, String::len),
            dequeued: changes.dequeued,
            enqueued: changes.enqueued.len(),
        });
        let changes = StateChanges {
            document: changes.document,
            dequeued: changes.dequeued,
            enqueued: changes.enqueued,
        };
        self.tape
            .answer(Script::saved, self.part.save(&changes), |result| {
                Event::Saved {
                    result: result.clone(),
                }
            })
            .await
    }
}

impl StorePart<'_> {
    async fn save(&self, changes: &StateChanges) -> Result<(), String> {
        self.state
            .save(self.key, changes)
            .await
            .map_err(|e| e.to_string())
    }

    async fn load(&mut self) -> Option<store::SavedState> {
        match self.state.load(self.key).await {
            Ok(saved) => saved.map(|saved| store::SavedState {
                document: saved.document,
                queued: saved.queued,
            }),
            Err(error) => {
                // Starting empty is safe: the store refuses a save over the state it
                // could not read (no revision known), so nothing is overwritten.
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
