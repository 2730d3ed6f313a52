//! Where the long poll stands: the next update id to ask for, kept in memory across a stop
//! and start and in a small file across restarts, so a restart neither gets the last
//! handled batch again nor sends an offset Telegram no longer honours.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long Telegram keeps an update nobody fetched: "they will not be kept longer than
/// 24 hours" (Bot API, Getting updates). An offset older than that confirms nothing that
/// is still queued, and after a week without updates Telegram may restart the ids at a
/// random (possibly lower) number, which an old offset would silently swallow. So an
/// offset older than this is not sent.
pub const OFFSET_KEPT: Duration = Duration::from_secs(24 * 60 * 60);

/// The next update id to ask for, and when it last moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offset {
    /// Highest handled `update_id` + 1.
    pub next: i64,
    /// When `next` was last moved, in ms since the epoch.
    pub moved_at_ms: u64,
}

impl Offset {
    /// The `offset` to send now: `None` once it is older than [`OFFSET_KEPT`].
    pub fn for_request(self, now_ms: u64) -> Option<i64> {
        let kept = u64::try_from(OFFSET_KEPT.as_millis()).unwrap_or(u64::MAX);
        (now_ms.saturating_sub(self.moved_at_ms) < kept).then_some(self.next)
    }
}

/// The offset file's content.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OffsetFile {
    version: u32,
    offset: i64,
    saved_at_ms: u64,
}

/// Where one bot's offset is kept: `<state dir>/telegram-<botId>.offset.json`, named after
/// the bot (never the token), so two bots never share one.
#[derive(Debug, Clone)]
pub struct OffsetStore {
    path: PathBuf,
}

impl OffsetStore {
    /// The store for `bot_id` in `dir`.
    pub fn new(dir: &Path, bot_id: &str) -> OffsetStore {
        OffsetStore {
            path: dir.join(format!("telegram-{bot_id}.offset.json")),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved offset; `Ok(None)` when there is none yet. A file that cannot be read
    /// is an error for `diagnose`, and polling starts from Telegram's queue.
    pub fn load(&self) -> Result<Option<Offset>, String> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => {
                return Err(format!(
                    "could not read the saved Telegram offset {}: {error}",
                    self.path.display()
                ));
            }
        };
        let file: OffsetFile = serde_json::from_slice(&bytes).map_err(|_| {
            format!(
                "the saved Telegram offset {} is not valid; polling starts from Telegram's queue",
                self.path.display()
            )
        })?;
        if file.version != 1 {
            return Err(format!(
                "the saved Telegram offset {} has version {}, which this build does not know; polling starts from Telegram's queue",
                self.path.display(),
                file.version
            ));
        }
        Ok(Some(Offset {
            next: file.offset,
            moved_at_ms: file.saved_at_ms,
        }))
    }

    /// Replaces the file atomically: a temporary file in the same directory (created
    /// with mode 0600), flushed to disk, renamed over the old one. A crash leaves the old
    /// offset or the new one, never half a file.
    pub fn save(&self, offset: Offset) -> Result<(), String> {
        use std::io::Write as _;
        let failed = |error: &dyn std::fmt::Display| {
            format!(
                "could not save the Telegram offset to {}: {error}; after a restart the last messages may be answered twice",
                self.path.display()
            )
        };
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        std::fs::create_dir_all(dir).map_err(|error| failed(&error))?;
        let body = serde_json::to_vec(&OffsetFile {
            version: 1,
            offset: offset.next,
            saved_at_ms: offset.moved_at_ms,
        })
        .map_err(|error| failed(&error))?;
        let mut file = tempfile::Builder::new()
            .prefix(".telegram-offset-")
            .tempfile_in(dir)
            .map_err(|error| failed(&error))?;
        file.write_all(&body).map_err(|error| failed(&error))?;
        file.as_file().sync_all().map_err(|error| failed(&error))?;
        file.persist(&self.path)
            .map_err(|error| failed(&error.error))?;
        Ok(())
    }
}
