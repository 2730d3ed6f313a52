//! The session state with a mark of whether it changed since it was last loaded or saved.
//!
//! `save` used to serialise the whole document on every envelope just to compare it with
//! the last one written: with a long queue or many pairings that comparison cost more than
//! the message (2.8 ms a prompt at 1,000 queued, measured through the component). Every change to the
//! state goes through `DerefMut`, which sets the mark, so `save` asks the mark instead and
//! serialises only what it is about to write. A mutable borrow that changes nothing also
//! sets it (one write too many, never one too few): hot paths that may change nothing
//! (expiring codes, remembering a chat) check first through the read-only view.

use std::ops::{Deref, DerefMut};

use crate::core::state::SessionState;

/// [`SessionState`] plus its change mark.
#[derive(Debug, Default)]
pub(super) struct Tracked {
    state: SessionState,
    changed: bool,
}

impl Tracked {
    /// State as loaded (or the empty state of a fresh session): nothing to write yet.
    pub(super) fn clean(state: SessionState) -> Tracked {
        Tracked {
            state,
            changed: false,
        }
    }

    /// Whether anything was borrowed mutably since the last [`Tracked::saved`].
    pub(super) fn changed(this: &Tracked) -> bool {
        this.changed
    }

    /// The document was written: nothing to write until the next change.
    pub(super) fn saved(this: &mut Tracked) {
        this.changed = false;
    }

    /// Forces the next save to write (a document loaded with pieces dropped).
    pub(super) fn mark_changed(this: &mut Tracked) {
        this.changed = true;
    }
}

impl Deref for Tracked {
    type Target = SessionState;

    fn deref(&self) -> &SessionState {
        &self.state
    }
}

impl DerefMut for Tracked {
    fn deref_mut(&mut self) -> &mut SessionState {
        self.changed = true;
        &mut self.state
    }
}
