//! Which session each conversation talks to, kept in a file beside the state file so a
//! broker restart does not send a chat's next message to the wrong session.
//!
//! `{"version":1,"bindings":{"telegram:42":{"session":"<key>","name":"api"}}}`. The name
//! is kept so a chat whose session has not come back yet hears which one it was.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One conversation's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Session key.
    pub session: String,
    /// The session's name when it was bound.
    pub name: String,
}

#[derive(Serialize, Deserialize)]
struct File {
    version: u32,
    bindings: BTreeMap<String, Binding>,
}

/// The bindings, by conversation key (`transport:conversationId`).
#[derive(Debug, Default)]
pub struct Bindings {
    path: Option<PathBuf>,
    map: BTreeMap<String, Binding>,
}

/// The bindings file next to `state_file`.
pub fn path_beside(state_file: &Path) -> PathBuf {
    state_file.with_file_name("broker-bindings.json")
}

impl Bindings {
    /// Bindings kept only in memory (tests, benches).
    pub fn in_memory() -> Bindings {
        Bindings::default()
    }

    /// Reads the file at `path`; a missing file is no bindings. An unreadable or
    /// malformed one is reported in the returned warning and replaced at the next change:
    /// bindings only route, every chat can bind again with /switch.
    pub fn load(path: &Path) -> (Bindings, Option<String>) {
        let mut bindings = Bindings {
            path: Some(path.to_path_buf()),
            map: BTreeMap::new(),
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (bindings, None),
            Err(e) => {
                return (
                    bindings,
                    Some(format!(
                        "cannot read the broker's bindings {}: {e}; chats start unbound (each can \
                         /switch again)",
                        path.display()
                    )),
                );
            }
        };
        match serde_json::from_str::<File>(&text) {
            Ok(file) if file.version == 1 => {
                bindings.map = file.bindings;
                (bindings, None)
            }
            Ok(file) => (
                bindings,
                Some(format!(
                    "the broker's bindings {} have version {}, this host reads version 1; chats \
                     start unbound (each can /switch again)",
                    path.display(),
                    file.version
                )),
            ),
            Err(e) => (
                bindings,
                Some(format!(
                    "the broker's bindings {} are malformed ({e}); chats start unbound (each can \
                     /switch again) and the file is rewritten at the next change",
                    path.display()
                )),
            ),
        }
    }

    /// The session `conversation` is bound to.
    pub fn get(&self, conversation: &str) -> Option<&Binding> {
        self.map.get(conversation)
    }

    /// Binds `conversation` and writes the file; a write failure is returned for the log
    /// (the binding holds in memory until the broker stops).
    pub fn bind(&mut self, conversation: &str, binding: Binding) -> Result<(), String> {
        if self.map.get(conversation) == Some(&binding) {
            return Ok(());
        }
        self.map.insert(conversation.to_owned(), binding);
        self.write()
    }

    fn write(&self) -> Result<(), String> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let file = File {
            version: 1,
            bindings: self.map.clone(),
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| e.to_string())?;
        // Written aside and renamed over: a crash mid-write never leaves half a file.
        let temporary = path.with_extension("json.tmp");
        let written = std::fs::File::create(&temporary)
            .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&temporary, path));
        written.map_err(|e| {
            format!(
                "cannot write the broker's bindings {}: {e}; they hold until the broker stops",
                path.display()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_survive_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = path_beside(&dir.path().join("state.json"));
        let (mut bindings, warning) = Bindings::load(&path);
        assert_eq!(warning, None);
        let binding = Binding {
            session: "k-api".into(),
            name: "api".into(),
        };
        bindings
            .bind("telegram:42", binding.clone())
            .expect("written");
        let (again, warning) = Bindings::load(&path);
        assert_eq!(warning, None);
        assert_eq!(again.get("telegram:42"), Some(&binding));
    }

    #[test]
    fn a_malformed_file_is_reported_and_replaced_at_the_next_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("broker-bindings.json");
        std::fs::write(&path, "{not json").expect("write");
        let (mut bindings, warning) = Bindings::load(&path);
        let warning = warning.expect("a warning");
        assert!(warning.contains("malformed"), "{warning}");
        assert!(warning.contains("/switch again"), "{warning}");
        bindings
            .bind(
                "slack:C1",
                Binding {
                    session: "k".into(),
                    name: "n".into(),
                },
            )
            .expect("written");
        assert_eq!(Bindings::load(&path).1, None);
    }

    #[test]
    fn another_version_is_not_read_as_this_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("broker-bindings.json");
        std::fs::write(&path, r#"{"version":2,"bindings":{}}"#).expect("write");
        let warning = Bindings::load(&path).1.expect("a warning");
        assert!(warning.contains("version 2"), "{warning}");
    }
}
