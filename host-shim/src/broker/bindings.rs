//! Which session each conversation talks to, kept in the state database (table
//! `bindings`) so a broker restart does not send a chat's next message to the wrong
//! session. The name is kept so a chat whose session has not come back yet hears which one
//! it was.
//!
//! One row per chat, written with the database's next commit: the JSON file of every
//! binding (`broker-bindings.json`, moved in once and kept as `.migrated`) was rewritten
//! whole and fsynced for each chat's first message, 8 ms at 5,000 chats.
//!
//! Only a chat whose sender is paired with its session is written down. A stranger's chat
//! (handed to a session's pairing) is bound in memory only, at most
//! [`MAX_PROVISIONAL`] of them: 2,000 strangers used to mean 2,000 bindings and as many
//! writes.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::disk::state_db::{StateDb, StateDbError};

/// One conversation's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Session key.
    pub session: String,
    /// The session's name when it was bound.
    pub name: String,
}

/// The file older versions kept the bindings in (read once, to move them in).
#[derive(Deserialize)]
struct OldFile {
    version: u32,
    bindings: HashMap<String, Binding>,
}

/// Most strangers' chats bound in memory at once; the oldest is forgotten first (that
/// chat is then unbound again and can `/switch` again).
pub const MAX_PROVISIONAL: usize = 256;

/// The bindings, by conversation key (`transport:conversationId`).
#[derive(Debug, Default)]
pub struct Bindings {
    store: Option<Arc<StateDb>>,
    map: HashMap<String, Binding>,
    /// Strangers' chats, bound until they pair (or are pushed out), oldest first.
    provisional: VecDeque<(String, Binding)>,
}

/// The file older versions kept the bindings in, next to `state_file`.
pub fn path_beside(state_file: &Path) -> PathBuf {
    state_file.with_file_name("broker-bindings.json")
}

impl Bindings {
    /// Bindings kept only in memory (tests, benches).
    pub fn in_memory() -> Bindings {
        Bindings::default()
    }

    /// The bindings kept in `state`, with those of the JSON file older versions wrote
    /// (`old_file`) moved in once: written and committed before the file is renamed to
    /// `<file>.migrated`, so a crash in between only moves them again. The warnings are
    /// lines for the person who started the broker; an unreadable old file is left where it
    /// is and named (bindings only route: every chat can `/switch` again).
    pub async fn kept_in(
        state: Arc<StateDb>,
        old_file: &Path,
    ) -> Result<(Bindings, Vec<String>), StateDbError> {
        let mut bindings = Bindings {
            store: Some(state.clone()),
            map: HashMap::new(),
            provisional: VecDeque::new(),
        };
        for (conversation, session, name) in state.bindings()? {
            bindings.map.insert(conversation, Binding { session, name });
        }
        let mut warnings = Vec::new();
        match read_old(old_file) {
            Ok(None) => {}
            Ok(Some(old)) => {
                // A chat bound since (in the database) keeps its newer binding.
                let moved: Vec<(String, Binding)> = old
                    .into_iter()
                    .filter(|(conversation, _)| !bindings.map.contains_key(conversation))
                    .collect();
                state
                    .keep_bindings_now(
                        moved
                            .iter()
                            .map(|(c, b)| (c.as_str(), b.session.as_str(), b.name.as_str())),
                    )
                    .await?;
                let count = moved.len();
                bindings.map.extend(moved);
                let backup = old_file.with_extension("json.migrated");
                match std::fs::rename(old_file, &backup) {
                    Ok(()) => warnings.push(format!(
                        "moved {count} chat binding(s) from {} into the state database; the \
                         old file is kept as {}",
                        old_file.display(),
                        backup.display()
                    )),
                    Err(e) => warnings.push(format!(
                        "moved the chat bindings of {} into the state database, but could not \
                         rename it to {} ({e}); delete it by hand",
                        old_file.display(),
                        backup.display()
                    )),
                }
            }
            Err(problem) => warnings.push(problem),
        }
        Ok((bindings, warnings))
    }

    /// The session `conversation` is bound to (written down or not).
    pub fn get(&self, conversation: &str) -> Option<&Binding> {
        self.map.get(conversation).or_else(|| {
            self.provisional
                .iter()
                .find(|(key, _)| key == conversation)
                .map(|(_, binding)| binding)
        })
    }

    /// The binding of `conversation` if it is written down (its sender was paired).
    pub fn get_kept(&self, conversation: &str) -> Option<&Binding> {
        self.map.get(conversation)
    }

    /// True when `conversation` is bound in memory only (a stranger's chat).
    pub fn is_provisional(&self, conversation: &str) -> bool {
        !self.map.contains_key(conversation)
            && self.provisional.iter().any(|(key, _)| key == conversation)
    }

    /// The strangers' chats bound to `session` in memory only (on their way to pairing
    /// with it); `None` when there are none, which costs no allocation.
    pub fn provisional_of(&self, session: &str) -> Option<Vec<&str>> {
        let chats: Vec<&str> = self
            .provisional
            .iter()
            .filter(|(key, binding)| binding.session == session && !self.map.contains_key(key))
            .map(|(key, _)| key.as_str())
            .collect();
        (!chats.is_empty()).then_some(chats)
    }

    /// Binds a stranger's `conversation` in memory only, until it pairs; a written-down
    /// binding of it is not touched (a stranger does not move a paired user's chat).
    pub fn bind_provisional(&mut self, conversation: &str, binding: Binding) {
        if self.map.contains_key(conversation) {
            return;
        }
        self.provisional.retain(|(key, _)| key != conversation);
        while self.provisional.len() >= MAX_PROVISIONAL {
            self.provisional.pop_front();
        }
        self.provisional
            .push_back((conversation.to_owned(), binding));
    }

    /// Binds `conversation` and writes it down with the database's next commit (a failed
    /// commit is reported by the sessions whose saves shared it; the binding holds in
    /// memory until the broker stops).
    pub fn bind(&mut self, conversation: &str, binding: Binding) {
        self.provisional.retain(|(key, _)| key != conversation);
        if self.map.get(conversation) == Some(&binding) {
            return;
        }
        if let Some(store) = &self.store {
            store.keep_binding(conversation, &binding.session, &binding.name);
        }
        self.map.insert(conversation.to_owned(), binding);
    }

    /// The database the bindings are written to (none in memory).
    pub fn store(&self) -> Option<Arc<StateDb>> {
        self.store.clone()
    }

    /// The chats bound to each session: written down (their senders paired) or not yet
    /// (a stranger's, on its way to pairing), each list sorted.
    pub fn chats(&self) -> HashMap<String, Vec<(String, bool)>> {
        let mut chats: HashMap<String, Vec<(String, bool)>> = HashMap::new();
        for (conversation, binding) in &self.map {
            chats
                .entry(binding.session.clone())
                .or_default()
                .push((conversation.clone(), true));
        }
        for (conversation, binding) in &self.provisional {
            chats
                .entry(binding.session.clone())
                .or_default()
                .push((conversation.clone(), false));
        }
        for list in chats.values_mut() {
            list.sort();
        }
        chats
    }

    /// Chats bound and written down.
    pub fn kept(&self) -> usize {
        self.map.len()
    }
}

/// The bindings of the JSON file older versions wrote; `None` when there is none.
fn read_old(path: &Path) -> Result<Option<HashMap<String, Binding>>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "cannot read the broker's old bindings file {}: {e}; its chats start unbound \
                 (each can /switch again)",
                path.display()
            ));
        }
    };
    match serde_json::from_str::<OldFile>(&text) {
        Ok(file) if file.version == 1 => Ok(Some(file.bindings)),
        Ok(file) => Err(format!(
            "the broker's old bindings file {} has version {}, this host reads version 1; its \
             chats start unbound (each can /switch again); delete the file to silence this",
            path.display(),
            file.version
        )),
        Err(e) => Err(format!(
            "the broker's old bindings file {} is malformed ({e}); its chats start unbound \
             (each can /switch again); delete the file to silence this",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(session: &str) -> Binding {
        Binding {
            session: session.into(),
            name: session.into(),
        }
    }

    fn open(dir: &tempfile::TempDir) -> Arc<StateDb> {
        let (state, _) = StateDb::open(&dir.path().join("state.json"), 0).expect("state");
        Arc::new(state)
    }

    #[tokio::test]
    async fn a_strangers_binding_is_never_written_and_a_paired_one_survives_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = path_beside(&dir.path().join("state.json"));
        let (mut bindings, warnings) = Bindings::kept_in(open(&dir), &old).await.expect("open");
        assert_eq!(warnings, Vec::<String>::new());
        for n in 0..(MAX_PROVISIONAL + 10) {
            bindings.bind_provisional(&format!("telegram:{n}"), binding("k-api"));
        }
        assert!(
            bindings.get("telegram:0").is_none(),
            "the oldest was forgotten"
        );
        assert!(bindings.is_provisional(&format!("telegram:{}", MAX_PROVISIONAL + 9)));
        // Pairing writes it down.
        bindings.bind("telegram:20", binding("k-api"));
        assert!(!bindings.is_provisional("telegram:20"));
        assert_eq!(bindings.get_kept("telegram:20"), Some(&binding("k-api")));
        // A stranger cannot move a written-down chat.
        bindings.bind_provisional("telegram:20", binding("k-web"));
        assert_eq!(bindings.get("telegram:20"), Some(&binding("k-api")));
        drop(bindings);
        // Dropping the last handle commits what was handed to the writer.
        let (again, _) = Bindings::kept_in(open(&dir), &old).await.expect("reopen");
        assert_eq!(again.kept(), 1, "only the paired chat was written down");
        assert_eq!(again.get("telegram:20"), Some(&binding("k-api")));
    }

    #[tokio::test]
    async fn the_old_file_is_moved_in_once_and_kept_as_a_backup() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = path_beside(&dir.path().join("state.json"));
        std::fs::write(
            &old,
            r#"{"version":1,"bindings":{"telegram:42":{"session":"k-api","name":"api"},
               "slack:C1":{"session":"k-web","name":"web"}}}"#,
        )
        .expect("write");
        let state = open(&dir);
        let (bindings, warnings) = Bindings::kept_in(state.clone(), &old).await.expect("open");
        assert_eq!(bindings.kept(), 2);
        assert!(!old.exists(), "the old file was renamed");
        let backup = old.with_extension("json.migrated");
        assert!(backup.exists(), "the backup is kept");
        assert!(
            warnings.len() == 1 && warnings[0].contains("moved 2 chat binding(s)"),
            "{warnings:?}"
        );
        // Committed before the rename: the database holds them now.
        assert_eq!(state.bindings().expect("read").len(), 2);
        let (again, warnings) = Bindings::kept_in(state, &old).await.expect("reopen");
        assert_eq!(warnings, Vec::<String>::new(), "moved once");
        assert_eq!(
            again.get("telegram:42"),
            Some(&Binding {
                session: "k-api".into(),
                name: "api".into()
            })
        );
    }

    #[tokio::test]
    async fn a_malformed_or_newer_old_file_is_named_and_left_alone() {
        for (text, said) in [
            ("{not json", "malformed"),
            (r#"{"version":2,"bindings":{}}"#, "version 2"),
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            let old = path_beside(&dir.path().join("state.json"));
            std::fs::write(&old, text).expect("write");
            let (mut bindings, warnings) = Bindings::kept_in(open(&dir), &old).await.expect("open");
            assert!(
                warnings.len() == 1
                    && warnings[0].contains(said)
                    && warnings[0].contains("/switch again"),
                "{warnings:?}"
            );
            assert!(old.exists(), "left for the person to look at");
            bindings.bind("slack:C1", binding("k"));
            assert_eq!(bindings.kept(), 1);
        }
    }
}
