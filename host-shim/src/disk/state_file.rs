//! The state file (docs/architecture.md#the-original-module-by-module): one file shared by all
//! sessions, holding each session's state document under its session key
//! (`{"version":1,"sessions":{"<key>":{...}}}`).
//!
//! The document belongs to the guest; the host reads only the envelope and each document's
//! `updatedAt` (for pruning), so trust, pause and targets of one session can never be mixed
//! into another's by the host (I17).
//!
//! Several processes share the file (every `host-shim run` in every directory uses the
//! same default path), so a save never writes from a stale copy: under an exclusive
//! `flock` on the file's directory it re-reads the file, replaces only its own session's
//! document, and writes the result. Each session's document carries a revision (kept
//! beside it, in `revisions`); a save whose session was saved by someone else since this
//! process loaded it is refused with [`StateFileError::Conflict`], so a stale host can
//! never overwrite a pairing another host just made. (The session lock in `session.rs`
//! keeps two hosts off one session in the first place; this is the second line.)

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, DirBuilder, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::state_store::{QueueFold, StateChanges, StateStore, StateStoreError, StoredState};

/// Sessions kept in the file; older ones are pruned on write so the file cannot grow forever.
pub const MAX_SESSIONS: usize = 20;

/// Why the state file could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// The file exists but could not be read (anything other than "not found").
    #[error(
        "cannot read the state file {path}: {source}; check its permissions, or set PI_BOT_CONNECT_STATE to another path"
    )]
    Read {
        /// The state file.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The file is unusable, and moving it aside (so it is not overwritten) failed.
    #[error(
        "the state file {path} is unusable and could not be moved aside to {aside}: {source}; move or delete it by hand"
    )]
    SetAside {
        /// The state file.
        path: PathBuf,
        /// Where it was to be moved.
        aside: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The guest handed over something that is not a JSON object (a guest bug).
    #[error(
        "the state of session {session_key:?} is not a JSON object ({detail}); nothing was written to {path}"
    )]
    NotAnObject {
        /// The session whose save was refused.
        session_key: String,
        /// The state file.
        path: PathBuf,
        /// What was wrong with the document.
        detail: String,
    },
    /// Another process saved this session since this one loaded it; nothing was written.
    #[error(
        "another host-shim saved session {session_key:?} in {path} since this one loaded it, so \
         this one did not overwrite it. Only one host may run a session: stop one of them, or \
         start this one with --session <another key>"
    )]
    Conflict {
        /// The session whose save was refused.
        session_key: String,
        /// The state file.
        path: PathBuf,
    },
    /// Writing the file failed; the previous file is left as it was.
    #[error(
        "cannot write the state file {path}: {source}; check that its directory is writable and the disk is not full"
    )]
    Write {
        /// The state file.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
}

impl From<StateFileError> for StateStoreError {
    fn from(error: StateFileError) -> Self {
        StateStoreError::Backend(Box::new(error))
    }
}

/// The state file as a [`StateStore`]: the file's own locking (a `flock` per save) makes
/// the calls safe across processes, the mutex across this process's sessions.
#[async_trait::async_trait]
impl StateStore for std::sync::Mutex<StateFile> {
    async fn load(&self, session_key: &str) -> Result<Option<StoredState>, StateStoreError> {
        let mut state = self.lock().map_err(|_| StateStoreError::Unavailable)?;
        let document = state.load(session_key);
        Ok(state.queues.split(session_key, document))
    }

    async fn save(&self, session_key: &str, changes: &StateChanges) -> Result<(), StateStoreError> {
        let mut state = self.lock().map_err(|_| StateStoreError::Unavailable)?;
        let (whole, folded) = state.queues.fold(session_key, changes)?;
        state.save(session_key, &whole)?;
        state.queues.written(session_key, folded);
        Ok(())
    }

    fn path(&self) -> Option<PathBuf> {
        self.lock().ok().map(|state| state.path.clone())
    }

    fn hold(&self, session_key: &str) {
        if let Ok(mut state) = self.lock() {
            state.hold(session_key);
        }
    }

    fn release(&self, session_key: &str) {
        if let Ok(mut state) = self.lock() {
            state.release(session_key);
        }
    }
}

/// The state file: where it is, what was last read of it, and which revision of each
/// session this process last loaded or saved.
#[derive(Debug)]
pub struct StateFile {
    path: PathBuf,
    contents: Contents,
    /// Session key → the revision this process last loaded or wrote.
    known: HashMap<String, u64>,
    /// Sessions running in this process now ([`StateFile::hold`]): never pruned.
    held: BTreeSet<String>,
    /// Opened by `doctor` or `explain`: never written, never moved aside.
    read_only: bool,
    temp_counter: u64,
    /// The queue each session keeps inside its document in this file.
    queues: QueueFold,
}

/// What the file holds.
#[derive(Debug, Default)]
struct Contents {
    sessions: Map<String, Value>,
    revisions: Map<String, Value>,
}

impl Contents {
    fn revision(&self, key: &str) -> u64 {
        self.revisions.get(key).and_then(Value::as_u64).unwrap_or(0)
    }
}

/// The on-disk envelope; a struct (not a `Value`) so `version` is written first.
#[derive(Serialize)]
struct Envelope<'a> {
    version: u32,
    revisions: &'a Map<String, Value>,
    sessions: &'a Map<String, Value>,
}

impl StateFile {
    /// Where the file lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads `path` tolerantly: a missing file is empty; an unusable one (not JSON, wrong
    /// version, wrong shape) yields a warning and an empty state, after being moved aside to
    /// `<path>.corrupt-<now_ms>` so the next save cannot destroy what the user had.
    pub fn open(path: &Path, now_ms: u64) -> Result<(StateFile, Vec<String>), StateFileError> {
        Self::open_with(path, Some(now_ms))
    }

    /// Loads `path` for reading only (`doctor`, `explain`): an unusable file is reported
    /// and left exactly where it is, and [`StateFile::save`] writes nothing.
    pub fn open_read_only(path: &Path) -> Result<(StateFile, Vec<String>), StateFileError> {
        Self::open_with(path, None)
    }

    /// `set_aside_at`: when to name a moved-aside unusable file; `None` = read only.
    fn open_with(
        path: &Path,
        set_aside_at: Option<u64>,
    ) -> Result<(StateFile, Vec<String>), StateFileError> {
        let mut state = StateFile {
            path: path.to_path_buf(),
            contents: Contents::default(),
            known: HashMap::new(),
            held: BTreeSet::new(),
            read_only: set_aside_at.is_none(),
            temp_counter: 0,
            queues: QueueFold::default(),
        };
        let warnings = match read_contents(path)? {
            Ok(contents) => {
                state.contents = contents;
                Vec::new()
            }
            Err(problem) => match set_aside_at {
                Some(now_ms) => {
                    let aside = set_aside(path, now_ms)?;
                    vec![format!(
                        "{problem} (the old file was kept as {})",
                        aside.display()
                    )]
                }
                None => vec![format!(
                    "{problem} (left as it is: this command never writes it)"
                )],
            },
        };
        Ok((state, warnings))
    }

    /// The document saved last for `session_key`, as JSON text, read fresh from the file
    /// (another process may have saved other sessions since). Remembers its revision, so a
    /// later save can tell whether someone else saved this session in between.
    pub fn load(&mut self, session_key: &str) -> Option<String> {
        // A file that became unreadable keeps the last good copy; the next save reports it.
        if let Ok(Ok(contents)) = read_contents(&self.path) {
            self.contents = contents;
        }
        self.known
            .insert(session_key.to_owned(), self.contents.revision(session_key));
        self.contents
            .sessions
            .get(session_key)
            .map(Value::to_string)
    }

    /// Marks `session_key` as running in this process until [`StateFile::release`]:
    /// pruning never drops it. A broker runs many sessions that may all outnumber
    /// [`MAX_SESSIONS`]; one session's save must not prune another's pairings while it
    /// runs (its next save would then find its document gone).
    pub fn hold(&mut self, session_key: &str) {
        self.held.insert(session_key.to_owned());
    }

    /// The session stopped: it may be pruned again, as the oldest ones are.
    pub fn release(&mut self, session_key: &str) {
        self.held.remove(session_key);
    }

    /// The document for `session_key` as this copy read it at `open`, without reading
    /// the file again or remembering a revision: for a reader that looks at many
    /// sessions at once (the broker's `/sessions`), one read of the file for all of them.
    pub fn document(&self, session_key: &str) -> Option<String> {
        self.contents
            .sessions
            .get(session_key)
            .map(Value::to_string)
    }

    /// Every session the file holds, as `(key, document as JSON text, revision)`, sorted by
    /// key: what the state database takes over when it migrates this file.
    pub fn entries(&self) -> Vec<(String, String, u64)> {
        self.contents
            .sessions
            .iter()
            .map(|(key, document)| {
                (
                    key.clone(),
                    document.to_string(),
                    self.contents.revision(key),
                )
            })
            .collect()
    }

    /// Stores `document` for `session_key`: under an exclusive lock, re-reads the file,
    /// refuses with [`StateFileError::Conflict`] when another process saved this session
    /// since this one loaded it, and otherwise writes the file with only this session's
    /// document replaced. The saving session is never pruned. Read-only: writes nothing.
    pub fn save(&mut self, session_key: &str, document: &str) -> Result<(), StateFileError> {
        let not_an_object = |detail: String| StateFileError::NotAnObject {
            session_key: session_key.to_owned(),
            path: self.path.clone(),
            detail,
        };
        let value = match serde_json::from_str::<Value>(document) {
            Ok(value @ Value::Object(_)) => value,
            Ok(other) => return Err(not_an_object(format!("got {}", kind(&other)))),
            Err(err) => return Err(not_an_object(err.to_string())),
        };
        if self.read_only {
            return Ok(());
        }
        let _lock = DirLock::exclusive(&self.path).map_err(|source| StateFileError::Write {
            path: self.path.clone(),
            source,
        })?;
        let mut contents = match read_contents(&self.path)? {
            Ok(contents) => contents,
            // It became unusable since it was opened: keep it aside, never overwrite it.
            Err(_) => {
                set_aside(&self.path, now_ms())?;
                Contents::default()
            }
        };
        let on_disk = contents.revision(session_key);
        let expected = self.known.get(session_key).copied().unwrap_or(0);
        if on_disk != expected {
            self.contents = contents;
            return Err(StateFileError::Conflict {
                session_key: session_key.to_owned(),
                path: self.path.clone(),
            });
        }
        let revision = on_disk + 1;
        contents.sessions.insert(session_key.to_owned(), value);
        contents
            .revisions
            .insert(session_key.to_owned(), Value::from(revision));
        prune(&mut contents, session_key, &self.held);
        self.contents = contents;
        self.write()?;
        self.known.insert(session_key.to_owned(), revision);
        Ok(())
    }

    fn write(&mut self) -> Result<(), StateFileError> {
        let write_error = |source| StateFileError::Write {
            path: self.path.clone(),
            source,
        };
        let mut text = Vec::new();
        let mut serializer = serde_json::Serializer::with_formatter(
            &mut text,
            serde_json::ser::PrettyFormatter::with_indent(b"\t"),
        );
        Envelope {
            version: 1,
            revisions: &self.contents.revisions,
            sessions: &self.contents.sessions,
        }
        .serialize(&mut serializer)
        .map_err(|err| write_error(io::Error::other(err)))?;
        text.push(b'\n');

        if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(write_error)?;
        }
        self.temp_counter += 1;
        let temp = with_suffix(
            &self.path,
            &format!(".tmp-{}-{}", std::process::id(), self.temp_counter),
        );
        // create_new: a stray file of the same name is never written through (or removed).
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(write_error)?;
        let result = replace_with(file, &temp, &self.path, &text);
        if result.is_err() {
            let _ = fs::remove_file(&temp);
        }
        result.map_err(write_error)
    }
}

/// Completes an atomic replace: readers see the old file or the new one, never a torn one.
fn replace_with(mut file: fs::File, temp: &Path, target: &Path, text: &[u8]) -> io::Result<()> {
    file.write_all(text)?;
    file.sync_all()?;
    // The umask may have narrowed the mode, never widened it; chmod makes 0600 certain.
    fs::set_permissions(temp, Permissions::from_mode(0o600))?;
    fs::rename(temp, target)
}

/// An exclusive `flock` on the state file's directory, held while a save re-reads and
/// rewrites the file; released when dropped. The directory is created if need be (0700).
struct DirLock(fs::File);

impl DirLock {
    fn exclusive(path: &Path) -> io::Result<DirLock> {
        let dir = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(dir) => dir.to_path_buf(),
            None => PathBuf::from("."),
        };
        DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        let handle = fs::File::open(&dir)?;
        // SAFETY: flock on a file descriptor this value owns; no memory is involved.
        #[allow(unsafe_code)]
        let locked = unsafe { libc::flock(handle.as_raw_fd(), libc::LOCK_EX) };
        if locked != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(DirLock(handle))
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // SAFETY: as above; closing the descriptor would release it too.
        #[allow(unsafe_code)]
        unsafe {
            libc::flock(self.0.as_raw_fd(), libc::LOCK_UN)
        };
    }
}

/// Milliseconds since the epoch, for naming a file set aside during a save.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The file's contents: `Ok(Ok)` when usable (a missing file is empty), `Ok(Err)` with the
/// warning when unusable, `Err` when it cannot be read at all.
fn read_contents(path: &Path) -> Result<Result<Contents, String>, StateFileError> {
    match fs::read(path) {
        Ok(bytes) => Ok(parse_envelope(&bytes)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Ok(Contents::default())),
        Err(source) => Err(StateFileError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The contents, or the file-level warning saying why the file cannot be used.
fn parse_envelope(bytes: &[u8]) -> Result<Contents, String> {
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return Err("store file is not valid JSON, starting empty".to_owned());
    };
    let Value::Object(mut top) = value else {
        return Err("store file: expected an object".to_owned());
    };
    match top.get("version") {
        Some(version) if version.as_f64() == Some(1.0) => {}
        Some(version) => {
            return Err(format!(
                "store file: unsupported version {version}, starting empty"
            ));
        }
        None => return Err("store file: unsupported version (missing), starting empty".to_owned()),
    }
    // Files written before revisions existed have none: every session is at revision 0.
    let revisions = match top.remove("revisions") {
        Some(Value::Object(revisions)) => revisions,
        _ => Map::new(),
    };
    match top.remove("sessions") {
        Some(Value::Object(sessions)) => Ok(Contents {
            sessions,
            revisions,
        }),
        _ => Err("store file: 'sessions' must be an object, starting empty".to_owned()),
    }
}

/// Moves an unusable file to a fresh `<path>.corrupt-<now_ms>[-<n>]` name. An existing name is
/// skipped rather than replaced, so an earlier set-aside file is never lost either.
fn set_aside(path: &Path, now_ms: u64) -> Result<PathBuf, StateFileError> {
    let base = format!(".corrupt-{now_ms}");
    let mut n = 0u32;
    loop {
        let aside = match n {
            0 => with_suffix(path, &base),
            _ => with_suffix(path, &format!("{base}-{n}")),
        };
        let failed = |source| StateFileError::SetAside {
            path: path.to_path_buf(),
            aside: aside.clone(),
            source,
        };
        match fs::symlink_metadata(&aside) {
            Ok(_) => n += 1,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return fs::rename(path, &aside)
                    .map(|()| aside.clone())
                    .map_err(failed);
            }
            Err(source) => return Err(failed(source)),
        }
    }
}

/// Keeps the newest `MAX_SESSIONS` sessions by `updatedAt`, always including `keep` and
/// the sessions `held` by this process (which may make more). Sessions without a numeric
/// `updatedAt` count as oldest.
fn prune(contents: &mut Contents, keep: &str, held: &BTreeSet<String>) {
    let Contents {
        sessions,
        revisions,
    } = contents;
    revisions.retain(|key, _| sessions.contains_key(key));
    if sessions.len() <= MAX_SESSIONS {
        return;
    }
    let mut others: Vec<(f64, String)> = sessions
        .iter()
        .filter(|(key, _)| key.as_str() != keep)
        .map(|(key, doc)| {
            let updated = doc.get("updatedAt").and_then(Value::as_f64);
            (updated.unwrap_or(f64::NEG_INFINITY), key.clone())
        })
        .collect();
    // Newest first; equal times break by key so the result does not depend on map order.
    others.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let room = MAX_SESSIONS.saturating_sub(1);
    for (_, key) in others.into_iter().skip(room) {
        if held.contains(&key) {
            continue;
        }
        sessions.remove(&key);
        revisions.remove(&key);
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    fn doc(updated_at: u64) -> String {
        format!("{{\"updatedAt\":{updated_at},\"trusted\":{{}}}}")
    }

    fn files_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_document_is_read_from_the_copy_opened_and_leaves_the_writer_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let (mut writer, _) = StateFile::open(&path, NOW).unwrap();
        writer.load("k");
        writer.save("k", &doc(1)).unwrap();
        let (reader, _) = StateFile::open_read_only(&path).unwrap();
        let read = |file: &StateFile| -> Option<Value> {
            file.document("k")
                .map(|d| serde_json::from_str(&d).unwrap())
        };
        let expected: Value = serde_json::from_str(&doc(1)).unwrap();
        assert_eq!(read(&reader), Some(expected.clone()));
        assert_eq!(reader.document("other"), None);
        // Reading never takes a revision: the writer's next save is not a conflict.
        writer.save("k", &doc(2)).unwrap();
        assert_eq!(read(&reader), Some(expected), "the copy as opened");
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn the_state_file_behind_the_store_seam_refuses_a_stale_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let first: Box<dyn StateStore> = Box::new(std::sync::Mutex::new(
            StateFile::open(&path, NOW).unwrap().0,
        ));
        let second: Box<dyn StateStore> = Box::new(std::sync::Mutex::new(
            StateFile::open(&path, NOW).unwrap().0,
        ));
        assert_eq!(first.path(), Some(path.clone()));
        assert_eq!(first.load("k").await.unwrap(), None);
        assert_eq!(second.load("k").await.unwrap(), None);
        second
            .save("k", &StateChanges::document("{\"by\":2}"))
            .await
            .unwrap();
        let stale = first
            .save("k", &StateChanges::document("{\"by\":1}"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                stale,
                StateStoreError::Backend(ref error)
                    if matches!(error.downcast_ref(), Some(StateFileError::Conflict { .. }))
            ),
            "{stale}"
        );
        assert_eq!(
            first
                .load("k")
                .await
                .unwrap()
                .map(|s| s.document)
                .as_deref(),
            Some("{\"by\":2}")
        );
    }

    #[test]
    fn two_handles_on_one_file_keep_each_others_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let (mut a, _) = StateFile::open(&path, NOW).unwrap();
        let (mut b, _) = StateFile::open(&path, NOW).unwrap();
        assert_eq!(a.load("x"), None);
        assert_eq!(b.load("y"), None);
        a.save("x", "{\"paired\":\"ada\"}").unwrap();
        // B never saw x: writing from its stale copy would have dropped it.
        b.save("y", "{\"paired\":\"bob\"}").unwrap();
        let (mut fresh, _) = StateFile::open(&path, NOW).unwrap();
        assert_eq!(fresh.load("x").as_deref(), Some("{\"paired\":\"ada\"}"));
        assert_eq!(fresh.load("y").as_deref(), Some("{\"paired\":\"bob\"}"));
    }

    #[test]
    fn a_stale_handle_cannot_overwrite_a_newer_save_of_the_same_session() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let (mut a, _) = StateFile::open(&path, NOW).unwrap();
        let (mut b, _) = StateFile::open(&path, NOW).unwrap();
        a.load("k");
        b.load("k");
        a.save("k", "{\"trusted\":[\"ada\"]}").unwrap();
        let refused = b.save("k", "{\"paused\":true}").unwrap_err();
        assert!(
            matches!(refused, StateFileError::Conflict { .. }),
            "{refused}"
        );
        assert!(
            refused
                .to_string()
                .contains("Only one host may run a session")
        );
        let (mut fresh, _) = StateFile::open(&path, NOW).unwrap();
        assert_eq!(fresh.load("k").as_deref(), Some("{\"trusted\":[\"ada\"]}"));
        // Once B loads the newer document, it may save again.
        assert_eq!(b.load("k").as_deref(), Some("{\"trusted\":[\"ada\"]}"));
        b.save("k", "{\"trusted\":[\"ada\"],\"paused\":true}")
            .unwrap();
    }

    /// One step of two hosts sharing a state file and a session key
    /// (docs/decisions.md#decision-21-two-hosts-on-one-session-never-lose-a-save).
    #[derive(Debug, Clone)]
    enum Step {
        /// The host (re)reads the session's document.
        Load(usize),
        /// The host pairs (or pauses) something in its copy and saves it.
        Remember(usize),
        /// The host quits and starts again: a fresh handle that has read nothing yet.
        Restart(usize),
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            (0..2usize).prop_map(Step::Load),
            (0..2usize).prop_map(Step::Remember),
            (0..2usize).prop_map(Step::Restart),
        ]
    }

    fn facts(document: Option<String>) -> Vec<String> {
        document
            .map(|doc| {
                let value: serde_json::Value = serde_json::from_str(&doc).unwrap();
                serde_json::from_value(value["facts"].clone()).unwrap()
            })
            .unwrap_or_default()
    }

    proptest::proptest! {
        /// Whatever the order of load, pair, save and quit of two hosts on one session,
        /// every fact a save acknowledged is still in the file at the end: a stale copy is
        /// refused instead of written over a newer one.
        #[test]
        fn two_hosts_in_any_order_never_lose_an_acknowledged_save(
            steps in proptest::collection::vec(step(), 1..40)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s.json");
            let open = || StateFile::open(&path, NOW).unwrap().0;
            let mut hosts = [open(), open()];
            // What each host believes the document holds (`{"facts": [...]}`).
            let mut copies: [Vec<String>; 2] = [Vec::new(), Vec::new()];
            let mut acknowledged: Vec<String> = Vec::new();
            for (n, step) in steps.into_iter().enumerate() {
                match step {
                    Step::Load(h) => {
                        copies[h] = facts(hosts[h].load("k"));
                    }
                    Step::Remember(h) => {
                        let mut next = copies[h].clone();
                        next.push(format!("fact-{n}"));
                        let doc = serde_json::json!({ "facts": next }).to_string();
                        match hosts[h].save("k", &doc) {
                            Ok(()) => {
                                copies[h] = next;
                                acknowledged.push(format!("fact-{n}"));
                            }
                            Err(StateFileError::Conflict { .. }) => {}
                            Err(other) => panic!("unexpected save error: {other}"),
                        }
                    }
                    Step::Restart(h) => {
                        hosts[h] = open();
                        copies[h] = Vec::new();
                    }
                }
            }
            let last = facts(open().load("k"));
            for fact in &acknowledged {
                proptest::prop_assert!(last.contains(fact), "{fact} lost; file holds {last:?}");
            }
        }
    }

    #[test]
    fn read_only_never_writes_and_never_moves_a_corrupt_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        fs::write(&path, "not json").unwrap();
        let (mut state, warnings) = StateFile::open_read_only(&path).unwrap();
        assert_eq!(
            warnings,
            [
                "store file is not valid JSON, starting empty (left as it is: this command never writes it)"
            ]
        );
        state.save("k", "{}").unwrap();
        assert_eq!(files_in(dir.path()), ["s.json"]);
        assert_eq!(fs::read_to_string(&path).unwrap(), "not json");
    }

    #[test]
    fn can_be_shared_between_session_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<std::sync::Mutex<StateFile>>();
    }

    #[test]
    fn missing_file_is_empty_without_warnings() {
        let dir = tempfile::tempdir().unwrap();
        let (mut state, warnings) = StateFile::open(&dir.path().join("s.json"), NOW).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(state.load("a"), None);
        assert!(files_in(dir.path()).is_empty());
    }

    #[test]
    fn round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let (mut state, _) = StateFile::open(&path, NOW).unwrap();
        state
            .save("a", "{\"updatedAt\":5,\"paused\":[\"x\"]}")
            .unwrap();
        state.save("b", "{\"updatedAt\":6}").unwrap();
        assert_eq!(
            state.load("a").as_deref(),
            Some("{\"paused\":[\"x\"],\"updatedAt\":5}")
        );

        let (mut reopened, warnings) = StateFile::open(&path, NOW).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(reopened.load("a"), state.load("a"));
        assert_eq!(reopened.load("b").as_deref(), Some("{\"updatedAt\":6}"));
        assert_eq!(reopened.load("c"), None);
    }

    #[test]
    fn written_with_tabs_version_first_and_trailing_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let (mut state, _) = StateFile::open(&path, NOW).unwrap();
        state.save("k", "{\"updatedAt\":1}").unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "{\n\t\"version\": 1,\n\t\"revisions\": {\n\t\t\"k\": 1\n\t},\n\t\"sessions\": {\n\t\t\"k\": {\n\t\t\t\"updatedAt\": 1\n\t\t}\n\t}\n}\n"
        );
    }

    #[test]
    fn sessions_are_isolated() {
        let dir = tempfile::tempdir().unwrap();
        let (mut state, _) = StateFile::open(&dir.path().join("s.json"), NOW).unwrap();
        state.save("a", "{\"trusted\":{\"discord:1\":1}}").unwrap();
        state.save("b", "{\"trusted\":{}}").unwrap();
        state.save("a", "{\"trusted\":{\"discord:2\":2}}").unwrap();
        assert_eq!(state.load("b").as_deref(), Some("{\"trusted\":{}}"));
        assert_eq!(
            state.load("a").as_deref(),
            Some("{\"trusted\":{\"discord:2\":2}}")
        );
    }

    #[test]
    fn file_is_0600_and_created_directory_0700() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a").join("b");
        let path = nested.join("s.json");
        let (mut state, _) = StateFile::open(&path, NOW).unwrap();
        state.save("k", "{}").unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&nested), 0o700);
        assert_eq!(mode(&dir.path().join("a")), 0o700);
    }

    #[test]
    fn replacing_a_world_readable_file_leaves_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        fs::write(&path, "{\"version\":1,\"sessions\":{}}").unwrap();
        fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        let (mut state, _) = StateFile::open(&path, NOW).unwrap();
        state.save("k", "{}").unwrap();
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn saves_leave_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let (mut state, _) = StateFile::open(&dir.path().join("s.json"), NOW).unwrap();
        for i in 0..3 {
            state.save("k", &doc(i)).unwrap();
        }
        assert_eq!(files_in(dir.path()), ["s.json"]);
    }

    #[test]
    fn failed_rename_removes_the_temp_file_and_reports_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let (mut state, _) = StateFile::open(&path, NOW).unwrap();
        // A non-empty directory at the target makes the rename fail after the temp is written.
        fs::create_dir(&path).unwrap();
        fs::write(path.join("inside"), "x").unwrap();
        // A save reads the file first and stops there, writing nothing.
        let err = state.save("k", "{}").unwrap_err();
        assert!(matches!(err, StateFileError::Read { .. }), "{err}");
        assert_eq!(files_in(dir.path()), ["s.json"]);
        // The write itself, when the rename fails, leaves no temp file behind.
        let err = state.write().unwrap_err();
        assert!(matches!(err, StateFileError::Write { .. }));
        assert!(
            err.to_string()
                .starts_with(&format!("cannot write the state file {}: ", path.display()))
        );
        assert_eq!(files_in(dir.path()), ["s.json"]);
    }

    #[test]
    fn non_object_documents_are_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let (mut state, _) = StateFile::open(&path, NOW).unwrap();
        let cases = [
            ("[]", "got an array"),
            ("\"x\"", "got a string"),
            ("null", "got null"),
        ];
        for (document, detail) in cases {
            let err = state.save("k", document).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "the state of session \"k\" is not a JSON object ({detail}); nothing was written to {}",
                    path.display()
                )
            );
        }
        assert!(matches!(
            state.save("k", "{oops"),
            Err(StateFileError::NotAnObject { .. })
        ));
        assert_eq!(state.load("k"), None);
        assert!(files_in(dir.path()).is_empty());
    }

    #[test]
    fn pruning_keeps_the_newest_twenty() {
        let dir = tempfile::tempdir().unwrap();
        let (mut state, _) = StateFile::open(&dir.path().join("s.json"), NOW).unwrap();
        for i in 0..25 {
            state.save(&format!("s{i:02}"), &doc(1000 + i)).unwrap();
        }
        let (reopened, _) = StateFile::open(&dir.path().join("s.json"), NOW).unwrap();
        let kept: Vec<&String> = reopened.contents.sessions.keys().collect();
        let expected: Vec<String> = (5..25).map(|i| format!("s{i:02}")).collect();
        assert_eq!(kept, expected.iter().collect::<Vec<_>>());
    }

    #[test]
    fn the_saving_session_is_never_pruned_even_when_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let (mut state, _) = StateFile::open(&dir.path().join("s.json"), NOW).unwrap();
        for i in 0..20 {
            state.save(&format!("s{i:02}"), &doc(1000 + i)).unwrap();
        }
        state.save("old", &doc(1)).unwrap();
        assert_eq!(state.contents.sessions.len(), 20);
        assert!(state.load("old").is_some());
        assert_eq!(state.load("s00"), None);
        assert!(state.load("s01").is_some());
    }

    #[test]
    fn a_session_held_by_this_process_is_never_pruned_while_it_runs() {
        let dir = tempfile::tempdir().unwrap();
        let (mut state, _) = StateFile::open(&dir.path().join("s.json"), NOW).unwrap();
        state.save("live", &doc(1)).unwrap();
        state.hold("live");
        for i in 0..25 {
            state.save(&format!("s{i:02}"), &doc(1000 + i)).unwrap();
        }
        assert!(state.load("live").is_some(), "held: kept although oldest");
        assert_eq!(
            state.contents.sessions.len(),
            21,
            "20 newest plus the held one"
        );
        // Its own next save is no conflict: its document and revision are still there.
        state.save("live", &doc(2000)).unwrap();
        state.release("live");
        state.save("live", &doc(3)).unwrap();
        state.save("s99", &doc(5000)).unwrap();
        assert_eq!(
            state.load("live"),
            None,
            "released: the oldest is pruned again"
        );
    }

    #[test]
    fn sessions_without_updated_at_are_pruned_first() {
        let dir = tempfile::tempdir().unwrap();
        let (mut state, _) = StateFile::open(&dir.path().join("s.json"), NOW).unwrap();
        state.save("undated", "{}").unwrap();
        for i in 0..20 {
            state.save(&format!("s{i:02}"), &doc(i)).unwrap();
        }
        assert_eq!(state.load("undated"), None);
        assert_eq!(state.contents.sessions.len(), 20);
    }

    #[test]
    fn file_level_warnings_are_exact_and_the_file_is_moved_aside() {
        let cases = [
            ("not json", "store file is not valid JSON, starting empty"),
            ("", "store file is not valid JSON, starting empty"),
            ("[1]", "store file: expected an object"),
            (
                "{\"version\":2,\"sessions\":{}}",
                "store file: unsupported version 2, starting empty",
            ),
            (
                "{\"version\":\"1\",\"sessions\":{}}",
                "store file: unsupported version \"1\", starting empty",
            ),
            (
                "{\"sessions\":{}}",
                "store file: unsupported version (missing), starting empty",
            ),
            (
                "{\"version\":1,\"sessions\":[]}",
                "store file: 'sessions' must be an object, starting empty",
            ),
            (
                "{\"version\":1}",
                "store file: 'sessions' must be an object, starting empty",
            ),
        ];
        for (content, expected) in cases {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s.json");
            fs::write(&path, content).unwrap();
            let (state, warnings) = StateFile::open(&path, NOW).unwrap();
            let aside = dir.path().join(format!("s.json.corrupt-{NOW}"));
            assert_eq!(
                warnings,
                vec![format!(
                    "{expected} (the old file was kept as {})",
                    aside.display()
                )],
                "content {content:?}"
            );
            assert_eq!(fs::read_to_string(&aside).unwrap(), content);
            assert!(!path.exists());
            assert!(state.contents.sessions.is_empty());
        }
    }

    #[test]
    fn version_one_as_float_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        fs::write(&path, "{\"version\":1.0,\"sessions\":{\"k\":{}}}").unwrap();
        let (mut state, warnings) = StateFile::open(&path, NOW).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(state.load("k").as_deref(), Some("{}"));
    }

    #[test]
    fn a_corrupt_file_is_never_overwritten_by_the_next_save() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        fs::write(&path, "{\"version\":1,\"sessions\":{\"k\":{}},").unwrap();
        let (mut state, _) = StateFile::open(&path, NOW).unwrap();
        state.save("new", "{}").unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join(format!("s.json.corrupt-{NOW}"))).unwrap(),
            "{\"version\":1,\"sessions\":{\"k\":{}},"
        );
        assert_eq!(
            files_in(dir.path()),
            ["s.json".to_owned(), format!("s.json.corrupt-{NOW}")]
        );
    }

    #[test]
    fn an_earlier_set_aside_file_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        fs::write(dir.path().join(format!("s.json.corrupt-{NOW}")), "first").unwrap();
        fs::write(&path, "second").unwrap();
        let (_, warnings) = StateFile::open(&path, NOW).unwrap();
        let aside = dir.path().join(format!("s.json.corrupt-{NOW}-1"));
        assert_eq!(
            warnings,
            vec![format!(
                "store file is not valid JSON, starting empty (the old file was kept as {})",
                aside.display()
            )]
        );
        assert_eq!(fs::read_to_string(&aside).unwrap(), "second");
        assert_eq!(
            fs::read_to_string(dir.path().join(format!("s.json.corrupt-{NOW}"))).unwrap(),
            "first"
        );
    }

    #[test]
    fn failing_to_move_aside_is_an_error_and_leaves_the_file() {
        let dir = tempfile::tempdir().unwrap();
        // 250 bytes is a legal name, but the set-aside suffix pushes it past NAME_MAX (255).
        let path = dir.path().join("s".repeat(250));
        fs::write(&path, "garbage").unwrap();
        let err = StateFile::open(&path, NOW).unwrap_err();
        assert!(matches!(err, StateFileError::SetAside { .. }));
        assert!(err.to_string().ends_with("; move or delete it by hand"));
        assert_eq!(fs::read_to_string(&path).unwrap(), "garbage");
    }

    #[test]
    fn unreadable_file_is_an_error_not_an_empty_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        fs::create_dir(&path).unwrap();
        let err = StateFile::open(&path, NOW).unwrap_err();
        assert!(matches!(err, StateFileError::Read { .. }));
        assert!(
            err.to_string()
                .starts_with(&format!("cannot read the state file {}: ", path.display()))
        );
    }

    #[test]
    fn per_session_values_are_kept_uninterpreted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        fs::write(
            &path,
            "{\"version\":1,\"sessions\":{\"k\":[1,2],\"j\":{\"x\":1}}}",
        )
        .unwrap();
        let (mut state, warnings) = StateFile::open(&path, NOW).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(state.load("k").as_deref(), Some("[1,2]"));
        state.save("j", "{\"x\":2}").unwrap();
        let (mut reopened, _) = StateFile::open(&path, NOW).unwrap();
        assert_eq!(reopened.load("k").as_deref(), Some("[1,2]"));
    }
}
