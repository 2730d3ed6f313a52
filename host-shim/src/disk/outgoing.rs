//! Reading a file the agent asked to send (`agent.read-file`, docs/media.md#files-out).
//!
//! The bridge judges the path; the host reads it and says where it really is. The path is
//! resolved first (`~`, the working directory, every symbolic link) and the file opened
//! at that resolved path, so the bytes handed over are the bytes of the file the bridge
//! judged a second time, not of whatever a link pointed at a moment later. Only regular
//! files are read: a FIFO would block the session for ever, and `/dev/zero` never ends.
//! The size is checked on the opened file before any read, and the read itself stops one
//! byte past the cap, so a file that grows meanwhile is still refused.

use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Why no bytes were read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReadFailure {
    /// Bigger than the cap; the payload is its size. Nothing was read.
    #[error("the file is {0} bytes, over the limit")]
    TooLarge(u64),
    /// Nothing at that path (or a link to nothing).
    #[error("there is no file at '{0}' (paths are relative to the agent's working directory)")]
    Missing(String),
    /// A directory, a device, a FIFO or a socket.
    #[error("'{0}' is not a regular file; send_file sends one file (zip a directory first)")]
    NotAFile(String),
    /// The file system refused (permissions, an I/O error).
    #[error("could not read '{path}': {error}")]
    Io {
        /// The path as the agent wrote it.
        path: String,
        /// What the file system said.
        error: String,
    },
}

/// A file read for sending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// Absolute, links followed.
    pub resolved: PathBuf,
    /// Size on disk.
    pub size: u64,
    /// All of its bytes.
    pub data: Vec<u8>,
}

/// Reads `path` (relative to `cwd`, absolute, or `~`-relative with `home`) if it is a
/// regular file of at most `max_bytes`.
pub fn read(
    cwd: &Path,
    home: Option<&Path>,
    path: &str,
    max_bytes: u64,
) -> Result<Outgoing, ReadFailure> {
    let written = if path == "~" || path.starts_with("~/") {
        match home {
            Some(home) => home.join(path.trim_start_matches('~').trim_start_matches('/')),
            None => PathBuf::from(path),
        }
    } else {
        cwd.join(path)
    };
    let resolved = std::fs::canonicalize(&written).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => ReadFailure::Missing(path.to_owned()),
        _ => ReadFailure::Io {
            path: path.to_owned(),
            error: error.to_string(),
        },
    })?;
    // The type is checked before opening: opening a FIFO for reading blocks until a
    // writer comes.
    let before = std::fs::metadata(&resolved).map_err(|error| io(path, &error))?;
    if !before.is_file() {
        return Err(ReadFailure::NotAFile(path.to_owned()));
    }
    let file = std::fs::File::open(&resolved).map_err(|error| io(path, &error))?;
    let meta = file.metadata().map_err(|error| io(path, &error))?;
    if !meta.is_file() {
        return Err(ReadFailure::NotAFile(path.to_owned()));
    }
    if meta.len() > max_bytes {
        return Err(ReadFailure::TooLarge(meta.len()));
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(|error| io(path, &error))?;
    if data.len() as u64 > max_bytes {
        return Err(ReadFailure::TooLarge(data.len() as u64));
    }
    Ok(Outgoing {
        resolved,
        size: data.len() as u64,
        data,
    })
}

fn io(path: &str, error: &std::io::Error) -> ReadFailure {
    ReadFailure::Io {
        path: path.to_owned(),
        error: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().expect("a temporary directory")
    }

    #[test]
    fn a_file_is_read_whole_with_where_its_links_lead() {
        let root = dir();
        let cwd = std::fs::canonicalize(root.path()).unwrap();
        std::fs::write(cwd.join("report.txt"), b"hello").unwrap();
        std::os::unix::fs::symlink(cwd.join("report.txt"), cwd.join("link.txt")).unwrap();
        let read_back = read(&cwd, None, "link.txt", 100).unwrap();
        assert_eq!(read_back.data, b"hello");
        assert_eq!(read_back.size, 5);
        assert_eq!(read_back.resolved, cwd.join("report.txt"));
        let home = read(Path::new("/"), Some(&cwd), "~/report.txt", 100).unwrap();
        assert_eq!(home.data, b"hello");
    }

    #[test]
    fn too_large_missing_and_not_a_file_are_refused_without_reading() {
        let root = dir();
        let cwd = root.path();
        std::fs::write(cwd.join("big.bin"), vec![7u8; 101]).unwrap();
        assert_eq!(
            read(cwd, None, "big.bin", 100),
            Err(ReadFailure::TooLarge(101))
        );
        assert_eq!(read(cwd, None, "big.bin", 101).unwrap().data.len(), 101);
        assert_eq!(
            read(cwd, None, "nope.txt", 100),
            Err(ReadFailure::Missing("nope.txt".into()))
        );
        std::fs::create_dir(cwd.join("sub")).unwrap();
        assert_eq!(
            read(cwd, None, "sub", 100),
            Err(ReadFailure::NotAFile("sub".into()))
        );
        let fifo = cwd.join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            // Refused before any open: a FIFO would block the read for ever.
            assert_eq!(
                read(cwd, None, "pipe", 100),
                Err(ReadFailure::NotAFile("pipe".into()))
            );
        }
    }
}
