//! Which session each conversation talks to, kept in a file beside the state file so a
//! broker restart does not send a chat's next message to the wrong session.
//!
//! `{"version":1,"bindings":{"telegram:42":{"session":"<key>","name":"api"}}}`. The name
//! is kept so a chat whose session has not come back yet hears which one it was.
//!
//! Only a chat whose sender is paired with its session is written down. A stranger's chat
//! (handed to a session's pairing) is bound in memory only, at most
//! [`MAX_PROVISIONAL`] of them: 2,000 strangers used to mean 2,000 bindings and as many
//! rewrites and fsyncs of the file. The file is this user's only (0600).

use std::collections::{BTreeMap, VecDeque};
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

/// Most strangers' chats bound in memory at once; the oldest is forgotten first (that
/// chat is then unbound again and can `/switch` again).
pub const MAX_PROVISIONAL: usize = 256;

/// The bindings, by conversation key (`transport:conversationId`).
#[derive(Debug, Default)]
pub struct Bindings {
    path: Option<PathBuf>,
    map: BTreeMap<String, Binding>,
    /// Strangers' chats, bound until they pair (or are pushed out), oldest first.
    provisional: VecDeque<(String, Binding)>,
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
            provisional: VecDeque::new(),
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

    /// Binds `conversation` and writes the file; a write failure is returned for the log
    /// (the binding holds in memory until the broker stops).
    pub fn bind(&mut self, conversation: &str, binding: Binding) -> Result<(), String> {
        self.provisional.retain(|(key, _)| key != conversation);
        if self.map.get(conversation) == Some(&binding) {
            return Ok(());
        }
        self.map.insert(conversation.to_owned(), binding);
        self.write()
    }

    /// Chats bound in the file.
    pub fn kept(&self) -> usize {
        self.map.len()
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
        let written = write_private(&temporary, text.as_bytes())
            .and_then(|()| std::fs::rename(&temporary, path));
        written.map_err(|e| {
            format!(
                "cannot write the broker's bindings {}: {e}; they hold until the broker stops",
                path.display()
            )
        })
    }
}

/// Writes `bytes` to a new file at `path` readable by this user only (0600) and syncs
/// it. A leftover at `path` is removed first: reopening it would keep its old mode (the
/// bindings file used to be 0644), or follow a link planted there.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_file_is_private_and_a_strangers_binding_never_reaches_it() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = path_beside(&dir.path().join("state.json"));
        let (mut bindings, _) = Bindings::load(&path);
        let binding = |session: &str| Binding {
            session: session.into(),
            name: session.into(),
        };
        for n in 0..(MAX_PROVISIONAL + 10) {
            bindings.bind_provisional(&format!("telegram:{n}"), binding("k-api"));
        }
        assert!(!path.exists(), "strangers wrote the file");
        assert!(
            bindings.get("telegram:0").is_none(),
            "the oldest was forgotten"
        );
        assert!(bindings.is_provisional(&format!("telegram:{}", MAX_PROVISIONAL + 9)));
        // Pairing writes it down, 0600.
        bindings
            .bind("telegram:20", binding("k-api"))
            .expect("written");
        assert!(!bindings.is_provisional("telegram:20"));
        assert_eq!(bindings.get_kept("telegram:20"), Some(&binding("k-api")));
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (again, _) = Bindings::load(&path);
        assert_eq!(again.kept(), 1);
        // A stranger cannot move a written-down chat.
        bindings.bind_provisional("telegram:20", binding("k-web"));
        assert_eq!(bindings.get("telegram:20"), Some(&binding("k-api")));
    }

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
