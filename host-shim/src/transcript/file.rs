//! The transcript file of one session, rotated by size.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Size limits of one session's transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// A file that would grow past this many bytes is moved aside first.
    pub max_bytes: u64,
    /// Older files kept (`<name>.1.jsonl` is the newest of them).
    pub keep: usize,
}

impl Default for Rotation {
    /// 8 MiB a file and three old ones: about a month of a busy chat, 32 MiB at most.
    fn default() -> Self {
        Rotation {
            max_bytes: 8 * 1024 * 1024,
            keep: 3,
        }
    }
}

/// The file name of a session's transcript: the key made safe for a file name (keys
/// hold paths and colons), with a hash so two keys that read alike never share a file.
pub fn file_stem(key: &str) -> String {
    use sha2::Digest as _;
    let readable: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let readable = readable.trim_matches('_');
    let readable: String = readable
        .chars()
        .rev()
        .take(48)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let digest = sha2::Sha256::digest(key.as_bytes());
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    if readable.is_empty() {
        hex
    } else {
        format!("{readable}-{hex}")
    }
}

/// An append-only JSON-lines file that moves itself aside at a size cap.
#[derive(Debug)]
pub struct RotatingFile {
    dir: PathBuf,
    stem: String,
    rotation: Rotation,
    file: File,
    size: u64,
}

impl RotatingFile {
    /// Opens (appending) `<dir>/<stem>.jsonl`, creating `dir` (0700: transcripts hold
    /// conversations) if needed. A symbolic link at the file's path is refused, never
    /// followed.
    pub fn open(dir: &Path, stem: &str, rotation: Rotation) -> std::io::Result<RotatingFile> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt as _;
            builder.mode(0o700);
        }
        builder.create(dir)?;
        let path = dir.join(format!("{stem}.jsonl"));
        let file = open_append(&path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            dir: dir.to_path_buf(),
            stem: stem.to_string(),
            rotation,
            file,
            size,
        })
    }

    /// The file being written.
    pub fn path(&self) -> PathBuf {
        self.dir.join(format!("{}.jsonl", self.stem))
    }

    fn old(&self, n: usize) -> PathBuf {
        self.dir.join(format!("{}.{n}.jsonl", self.stem))
    }

    /// Whether `bytes` more would pass the cap of a file that already holds something.
    pub fn needs_rotation(&self, bytes: u64) -> bool {
        self.size > 0 && self.size + bytes > self.rotation.max_bytes
    }

    /// Moves the current file to `.1`, `.1` to `.2`, …, dropping the oldest, and starts
    /// an empty one.
    pub fn rotate(&mut self) -> std::io::Result<()> {
        if self.rotation.keep == 0 {
            std::fs::remove_file(self.path())?;
        } else {
            let _ = std::fs::remove_file(self.old(self.rotation.keep));
            for n in (1..self.rotation.keep).rev() {
                let from = self.old(n);
                if from.exists() {
                    std::fs::rename(&from, self.old(n + 1))?;
                }
            }
            std::fs::rename(self.path(), self.old(1))?;
        }
        self.file = open_append(&self.path())?;
        self.size = 0;
        Ok(())
    }

    /// Appends one line (a newline is added) in one write, so a crash never leaves half
    /// of a line followed by the next one.
    pub fn append(&mut self, line: &str) -> std::io::Result<()> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.file.write_all(&bytes)?;
        self.size += bytes.len() as u64;
        Ok(())
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        // Transcripts hold conversations: readable by this user only, like the state file.
        // O_NOFOLLOW: a symbolic link planted at the transcript's path (in a directory
        // someone else can write) would otherwise make every conversation append to a file
        // of the planter's choosing (a shell profile, an authorized_keys).
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    options.open(path).map_err(|error| {
        #[cfg(unix)]
        if error.raw_os_error() == Some(libc::ELOOP) {
            return std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{} is a symbolic link, which a transcript never follows (it could point anywhere); remove it, or set another transcript directory",
                    path.display()
                ),
            );
        }
        error
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_at_the_cap_and_keeps_the_configured_number_of_old_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let rotation = Rotation {
            max_bytes: 100,
            keep: 2,
        };
        let mut file = RotatingFile::open(dir.path(), "s", rotation).expect("opens");
        let line = "x".repeat(39); // 40 bytes with the newline
        for round in 0..8 {
            if file.needs_rotation(40) {
                file.rotate().expect("rotates");
            }
            file.append(&line).expect("appends");
            assert!(file.size <= 100, "round {round}: {} bytes", file.size);
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("lists")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["s.1.jsonl", "s.2.jsonl", "s.jsonl"]);
        for name in names {
            let size = std::fs::metadata(dir.path().join(&name))
                .expect("meta")
                .len();
            assert!(size <= 100, "{name} is {size} bytes");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_at_the_transcript_path_is_refused_and_its_target_untouched() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("temp dir");
        let transcripts = dir.path().join("transcripts");
        let target = dir.path().join("authorized_keys");
        std::fs::write(&target, "ssh-ed25519 AAAA me\n").expect("target");
        std::fs::create_dir(&transcripts).expect("dir");
        std::os::unix::fs::symlink(&target, transcripts.join("s.jsonl")).expect("planted");
        let error =
            RotatingFile::open(&transcripts, "s", Rotation::default()).expect_err("refused");
        assert!(error.to_string().contains("is a symbolic link"), "{error}");
        assert_eq!(
            std::fs::read_to_string(&target).expect("read"),
            "ssh-ed25519 AAAA me\n"
        );
        // A directory it creates is this user's only.
        let fresh = dir.path().join("new").join("transcripts");
        RotatingFile::open(&fresh, "s", Rotation::default()).expect("opens");
        let mode = std::fs::metadata(&fresh)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn file_names_are_safe_and_distinct() {
        assert_eq!(file_stem("a/b").len(), "a_b-".len() + 8);
        assert_ne!(file_stem("a/b"), file_stem("a:b"));
        assert!(!file_stem("/home/me/project").contains('/'));
    }
}
