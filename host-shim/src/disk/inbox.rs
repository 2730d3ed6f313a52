//! The session's inbox: files a chat sent, written into the agent's working directory
//! (`agent.save-to-inbox`, docs/media.md#files-in).
//!
//! The bridge chose the directory and the name (sanitised, never `..`, never a separator),
//! but the host checks both again and refuses rather than repairs: a guest is not trusted
//! with the file system, and a name that slipped through its rules must not become a write
//! somewhere else. A directory reached through a symbolic link that leads out of the
//! working directory is refused too: the link would carry a chat's file to wherever it
//! points. The file is created new (`O_EXCL`), so nothing is ever replaced, and a link
//! planted at the name is not followed.

use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

/// Why nothing was written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InboxFailure {
    /// A file of that name exists: the bridge picks the next name.
    #[error("a file of that name is in the inbox already")]
    Exists,
    /// The directory is not a plain relative path inside the working directory.
    #[error(
        "the inbox directory '{0}' is not a relative path inside the working directory; set \
         bridge.inbox.dir to one like .pi/inbox"
    )]
    BadDir(String),
    /// The name is not a bare file name.
    #[error("'{0}' is not a plain file name, so it was not written")]
    BadName(String),
    /// The directory, once its links are resolved, is outside the working directory.
    #[error(
        "the inbox directory '{0}' leads out of the working directory (a symbolic link?), so \
         nothing was written there; remove the link or choose another bridge.inbox.dir"
    )]
    Escapes(String),
    /// Creating the directory or writing the file failed.
    #[error("could not save the file in '{dir}': {error}")]
    Io {
        /// The inbox directory as configured.
        dir: String,
        /// What the file system said.
        error: String,
    },
}

/// Writes `data` as `cwd/dir/name`, new, owner-only; returns `dir/name` as written, for
/// the prompt the agent reads.
pub fn save(cwd: &Path, dir: &str, name: &str, data: &[u8]) -> Result<String, InboxFailure> {
    let relative = plain_relative(dir).ok_or_else(|| InboxFailure::BadDir(dir.to_owned()))?;
    if !is_bare_name(name) {
        return Err(InboxFailure::BadName(name.to_owned()));
    }
    let io = |error: std::io::Error| InboxFailure::Io {
        dir: dir.to_owned(),
        error: error.to_string(),
    };
    let target = cwd.join(&relative);
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    let root = cwd.canonicalize().map_err(io)?;
    // The part of the inbox path that exists already, resolved, before anything is created:
    // creating `.pi/inbox` through a `.pi` that links out would make a directory wherever
    // the link points, even though no file is then written there.
    let mut existing = target.clone();
    while !existing.exists() && existing.pop() {}
    let reached = existing.canonicalize().map_err(io)?;
    if !reached.starts_with(&root) {
        return Err(InboxFailure::Escapes(dir.to_owned()));
    }
    builder.create(&target).map_err(io)?;
    // Again once it exists: a link could have been planted between the two.
    let resolved = target.canonicalize().map_err(io)?;
    if !resolved.starts_with(&root) {
        return Err(InboxFailure::Escapes(dir.to_owned()));
    }
    let path = resolved.join(name);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = match options.open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(InboxFailure::Exists);
        }
        Err(error) => return Err(io(error)),
    };
    if let Err(error) = file.write_all(data).and_then(|()| file.sync_all()) {
        // Half a file under the name the agent is told would be read as the whole one.
        drop(file);
        let _ = std::fs::remove_file(&path);
        return Err(io(error));
    }
    let shown = relative.join(name);
    Ok(shown.to_string_lossy().into_owned())
}

/// `dir` as a relative path of plain segments (no root, no `..`, no `.` only), or none.
fn plain_relative(dir: &str) -> Option<PathBuf> {
    if dir.chars().any(char::is_control) {
        return None;
    }
    let path = Path::new(dir);
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// One path segment a person could read: not empty, not `.` or `..`, no separator, no
/// control character, not hidden (a leading dot would make `.env` or `.git` of it).
fn is_bare_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_written_new_and_owner_only_and_never_replaced() {
        let cwd = tempfile::tempdir().expect("temp dir");
        let path = save(cwd.path(), ".pi/inbox/", "report.pdf", b"%PDF-1.7").expect("saved");
        assert_eq!(path, ".pi/inbox/report.pdf");
        let written = cwd.path().join(".pi/inbox/report.pdf");
        assert_eq!(std::fs::read(&written).expect("read"), b"%PDF-1.7");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&written)
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(
            save(cwd.path(), ".pi/inbox", "report.pdf", b"other"),
            Err(InboxFailure::Exists)
        );
        assert_eq!(std::fs::read(&written).expect("read"), b"%PDF-1.7");
    }

    #[test]
    fn a_name_or_directory_that_leads_elsewhere_is_refused() {
        let cwd = tempfile::tempdir().expect("temp dir");
        for dir in ["/tmp", "../x", ".pi/../../x", "", "a\nb"] {
            assert!(
                matches!(
                    save(cwd.path(), dir, "f.txt", b"x"),
                    Err(InboxFailure::BadDir(_))
                ),
                "{dir:?}"
            );
        }
        for name in ["../f", "a/b", "a\\b", ".env", "..", ".", "", "a\u{7}b"] {
            assert!(
                matches!(
                    save(cwd.path(), "in", name, b"x"),
                    Err(InboxFailure::BadName(_))
                ),
                "{name:?}"
            );
        }
        assert!(std::fs::read_dir(cwd.path()).expect("dir").next().is_none());
    }

    /// A link out of the working directory, as the inbox itself or above it: refused, and
    /// nothing made or written where it points (creating `.pi/inbox` through a `.pi` link
    /// once made `elsewhere/inbox`).
    #[cfg(unix)]
    #[test]
    fn an_inbox_reached_through_a_link_out_is_refused_and_nothing_is_made_there() {
        for (link, dir) in [("inbox", "inbox"), (".pi", ".pi/inbox")] {
            let cwd = tempfile::tempdir().expect("temp dir");
            let elsewhere = tempfile::tempdir().expect("temp dir");
            std::os::unix::fs::symlink(elsewhere.path(), cwd.path().join(link)).expect("link");
            let refused = save(cwd.path(), dir, "f.txt", b"x");
            assert!(
                matches!(refused, Err(InboxFailure::Escapes(_))),
                "{dir}: {refused:?}"
            );
            assert!(
                std::fs::read_dir(elsewhere.path())
                    .expect("dir")
                    .next()
                    .is_none(),
                "{dir}: nothing was made where the link points"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_link_planted_at_the_name_is_not_followed() {
        let cwd = tempfile::tempdir().expect("temp dir");
        let outside = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(cwd.path().join("in")).expect("dir");
        let victim = outside.path().join("victim");
        std::os::unix::fs::symlink(&victim, cwd.path().join("in/f.txt")).expect("link");
        assert_eq!(
            save(cwd.path(), "in", "f.txt", b"x"),
            Err(InboxFailure::Exists)
        );
        assert!(!victim.exists());
    }
}
