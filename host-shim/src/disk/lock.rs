//! Single-instance lock files (docs/architecture.md#the-original-module-by-module): one process per
//! bot credential (I15).
//!
//! A lock is `<dir>/<name>.lock` holding `{"pid","startedAt","host","token"}`. A holder that
//! is dead (same host, signal-0 probe) or older than the stale limit is reclaimed; release
//! deletes the file only when it still carries our token, so a process whose lock was
//! reclaimed never deletes the new holder's lock.
//!
//! The pid, host name and time are parameters ([`Claimant`]) so every rule can be tested
//! without sleeping or spawning processes.

use std::fs::{self, DirBuilder, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

/// Default age after which a lock counts as abandoned (15 minutes), even if its pid lives:
/// pids are reused, so a very old lock more likely names an unrelated process.
pub const DEFAULT_STALE_MS: u64 = 900_000;

/// Holder description when the lock kept changing hands while we tried to take it.
const UNKNOWN_HOLDER: &str = "another process holds the lock";

/// Lock files are tiny; reading more than this means the file is not ours.
const MAX_LOCK_FILE_BYTES: u64 = 4096;

/// Who is taking a lock, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimant {
    /// Process id written to the lock file and probed by other processes on this host.
    pub pid: i32,
    /// Host name; holders on other hosts cannot be probed and are assumed alive.
    pub host: String,
    /// Current time in milliseconds since the Unix epoch.
    pub now_ms: u64,
}

impl Claimant {
    /// The current process on this host at `now_ms`.
    pub fn this_process(now_ms: u64) -> Claimant {
        // Linux caps pids at 2^22 (`pid_max`), so the kernel's pid_t is this u32 as is.
        let pid = std::process::id() as i32;
        Claimant {
            pid,
            host: host_name(),
            now_ms,
        }
    }
}

/// Why a lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The name could escape the lock directory or is otherwise unusable.
    #[error(
        "lock name {name:?} is not allowed: use 1 to 128 letters, digits, '.', '_' or '-' (this is a bug in the caller)"
    )]
    InvalidName {
        /// The rejected name.
        name: String,
    },
    /// A live, fresh holder has the lock.
    #[error("the lock is held by {holder_description}; stop that process or wait until it ends")]
    Held {
        /// `pid <pid> on <host> (held for <n>m)`; never the token.
        holder_description: String,
    },
    /// The file system refused an operation on the lock directory or file.
    #[error("cannot {action} {path}: {source}; check that the lock directory is writable")]
    Io {
        /// What was being done, e.g. "create the lock file".
        action: &'static str,
        /// The directory or file concerned.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The OS random source failed, so no unguessable token could be made.
    #[error("cannot get random bytes for a lock token: {0}")]
    Random(getrandom::Error),
}

/// The directory holding the lock files.
#[derive(Debug, Clone)]
pub struct LockDir {
    dir: PathBuf,
}

/// What a lock file says on disk; field order is the file's key order.
#[derive(Serialize)]
struct LockInfo<'a> {
    pid: i32,
    #[serde(rename = "startedAt")]
    started_at: u64,
    host: &'a str,
    token: &'a str,
}

/// A well-formed holder read back from a lock file.
struct Holder {
    pid: i32,
    started_at: f64,
    host: String,
    token: String,
}

/// What was found at the lock path.
enum Found {
    /// Nothing (the holder released it meanwhile).
    Gone,
    /// Unreadable or not shaped like a lock file: nobody can own it, so it may be deleted.
    Malformed,
    /// A proper holder.
    Holder(Holder),
}

impl LockDir {
    /// The directory holding the lock files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Who holds `name` right now, without taking or touching it (`doctor`); `None` when
    /// nobody does. A dead holder on this machine is reported as such.
    pub fn holder(&self, name: &str, now_ms: u64) -> Option<String> {
        validate_name(name).ok()?;
        match read_holder(&self.dir.join(format!("{name}.lock"))) {
            Found::Gone => None,
            Found::Malformed => Some("an unreadable lock file".to_owned()),
            Found::Holder(holder) => {
                let dead = holder.host == host_name() && !process_alive(holder.pid);
                let description = describe_holder(&holder, now_ms);
                Some(if dead {
                    format!("{description}, no longer running: the next start reclaims it")
                } else {
                    description
                })
            }
        }
    }

    /// Who holds `name`, only when that holder may still run (on another host, or alive
    /// on this one): a dead holder or an unreadable file is `None`.
    pub fn live_holder(&self, name: &str, now_ms: u64) -> Option<String> {
        validate_name(name).ok()?;
        match read_holder(&self.dir.join(format!("{name}.lock"))) {
            Found::Holder(holder) if holder.host != host_name() || process_alive(holder.pid) => {
                Some(describe_holder(&holder, now_ms))
            }
            _ => None,
        }
    }

    /// Locks live in `dir` (created with mode 0700 on first acquire).
    pub fn new(dir: impl Into<PathBuf>) -> LockDir {
        LockDir { dir: dir.into() }
    }

    /// Takes the lock `name` for `claimant`, reclaiming it from a dead or stale holder
    /// (`now − startedAt >= stale_ms`). Two tries at most, so two processes reclaiming the
    /// same lock cannot loop forever.
    pub fn acquire(
        &self,
        name: &str,
        stale_ms: u64,
        claimant: &Claimant,
    ) -> Result<LockGuard, LockError> {
        validate_name(name)?;
        let io_error = |action, path: &Path| {
            let path = path.to_path_buf();
            move |source| LockError::Io {
                action,
                path,
                source,
            }
        };
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io_error("create the lock directory", &self.dir))?;
        let path = self.dir.join(format!("{name}.lock"));
        let token = new_token()?;
        let mut content = serde_json::to_string(&LockInfo {
            pid: claimant.pid,
            started_at: claimant.now_ms,
            host: &claimant.host,
            token: &token,
        })
        .map_err(|err| io_error("encode the lock file", &path)(io::Error::other(err)))?;
        content.push('\n');

        for _ in 0..2 {
            if try_create(&path, &token, content.as_bytes())
                .map_err(io_error("create the lock file", &path))?
            {
                return Ok(LockGuard {
                    path,
                    token,
                    released: false,
                });
            }
            match read_holder(&path) {
                Found::Gone => continue,
                Found::Malformed => {}
                Found::Holder(holder) => {
                    if !reclaimable(&holder, stale_ms, claimant) {
                        return Err(LockError::Held {
                            holder_description: describe_holder(&holder, claimant.now_ms),
                        });
                    }
                }
            }
            remove_if_present(&path).map_err(io_error("remove the abandoned lock file", &path))?;
        }
        Err(LockError::Held {
            holder_description: UNKNOWN_HOLDER.to_owned(),
        })
    }
}

/// A held lock; released on [`LockGuard::release`] or drop.
#[derive(Debug)]
pub struct LockGuard {
    path: PathBuf,
    token: String,
    released: bool,
}

impl LockGuard {
    /// Deletes the lock file if it still carries our token. Safe to call more than once.
    /// Failures are ignored: a lock left behind names our pid, so it is reclaimed once this
    /// process has ended, and there is nothing better to do at release time.
    pub fn release(&mut self) {
        if std::mem::replace(&mut self.released, true) {
            return;
        }
        if let Found::Holder(holder) = read_holder(&self.path)
            && holder.token == self.token
        {
            let _ = remove_if_present(&self.path);
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        self.release();
    }
}

/// 16 random bytes as hex: unguessable, so no other process can forge our release.
fn new_token() -> Result<String, LockError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(LockError::Random)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The guest chooses names; anything outside this alphabet (`/`, NUL, ...) could
/// address a file outside the lock directory.
fn validate_name(name: &str) -> Result<(), LockError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if (1..=128).contains(&name.len()) && name.chars().all(allowed) {
        Ok(())
    } else {
        Err(LockError::InvalidName {
            name: name.to_owned(),
        })
    }
}

/// Creates the lock file exclusively; `Ok(false)` when it already exists. The content is
/// written to a private temp file and hard-linked into place (exclusive like O_EXCL), so
/// another process never reads a half-written lock, which it would take for malformed and delete.
///
/// No fsync: a lock only means something while its holder runs. A killed process leaves its
/// file in the page cache, whole; a power loss ends every holder, and a file it tore is read
/// as malformed and reclaimed. The fsync cost every session's start 1–3 ms on a busy disk.
fn try_create(path: &Path, token: &str, content: &[u8]) -> io::Result<bool> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(format!(".tmp-{token}"));
    let temp = PathBuf::from(temp);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)?;
    let result = file
        .write_all(content)
        .and_then(|()| fs::set_permissions(&temp, Permissions::from_mode(0o600)))
        .and_then(|()| fs::hard_link(&temp, path));
    let _ = fs::remove_file(&temp);
    match result {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(err) => Err(err),
    }
}

fn read_holder(path: &Path) -> Found {
    let mut text = String::new();
    let read = fs::File::open(path)
        .and_then(|file| file.take(MAX_LOCK_FILE_BYTES).read_to_string(&mut text));
    match read {
        Ok(_) => parse_holder(&text).map_or(Found::Malformed, Found::Holder),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Found::Gone,
        Err(_) => Found::Malformed,
    }
}

/// A holder only when every field has the right type. A pid of 0 or below is refused:
/// `kill(0 or -1, 0)` probes process groups, which would keep such a lock alive forever.
fn parse_holder(text: &str) -> Option<Holder> {
    let value: Value = serde_json::from_str(text).ok()?;
    let pid = value.get("pid")?.as_i64()?;
    Some(Holder {
        pid: i32::try_from(pid).ok().filter(|pid| *pid > 0)?,
        started_at: value.get("startedAt")?.as_f64()?,
        host: value.get("host")?.as_str()?.to_owned(),
        token: value.get("token")?.as_str()?.to_owned(),
    })
}

fn reclaimable(holder: &Holder, stale_ms: u64, claimant: &Claimant) -> bool {
    let too_old = claimant.now_ms as f64 - holder.started_at >= stale_ms as f64;
    let alive = holder.host != claimant.host || process_alive(holder.pid);
    too_old || !alive
}

/// Signal-0 probe. EPERM means the process exists but belongs to someone else: alive.
fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission; nothing is delivered,
    // and `pid` is positive, so no process group is addressed.
    #[allow(unsafe_code)]
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// `pid <pid> on <host> (held for <round(age/60000)>m)`; never the token. A negative age
/// (clock skew between hosts) shows as 0m rather than a confusing negative duration.
fn describe_holder(holder: &Holder, now_ms: u64) -> String {
    let age_ms = now_ms as f64 - holder.started_at;
    let minutes = (age_ms / 60_000.0 + 0.5).floor().max(0.0);
    format!(
        "pid {} on {} (held for {minutes}m)",
        holder.pid, holder.host
    )
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

/// This machine's host name, or "localhost" when the OS will not say (then every holder
/// written by this fallback compares as same-host and is probed, the safe default).
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the pointer and length describe `buf`, which outlives the call.
    #[allow(unsafe_code)]
    let result = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    match buf.get(..end) {
        Some(name) if result == 0 && !name.is_empty() => String::from_utf8_lossy(name).into_owned(),
        _ => "localhost".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;
    const HOST: &str = "here";
    /// Above any Linux pid_max (at most 2^22), so no process can have it.
    const DEAD_PID: i32 = i32::MAX;

    fn own_pid() -> i32 {
        Claimant::this_process(0).pid
    }

    fn me(now_ms: u64) -> Claimant {
        Claimant {
            pid: own_pid(),
            host: HOST.into(),
            now_ms,
        }
    }

    fn holder_json(pid: i32, started_at: u64, host: &str, token: &str) -> String {
        format!(
            "{{\"pid\":{pid},\"startedAt\":{started_at},\"host\":\"{host}\",\"token\":\"{token}\"}}\n"
        )
    }

    fn setup() -> (tempfile::TempDir, LockDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("locks");
        let path = dir.join("bot.lock");
        (tmp, LockDir::new(&dir), path)
    }

    fn plant(path: &Path, content: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn held_description(result: Result<LockGuard, LockError>) -> String {
        match result {
            Err(LockError::Held { holder_description }) => holder_description,
            other => panic!("expected Held, got {other:?}"),
        }
    }

    fn file_pid(path: &Path) -> i64 {
        let value: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
        value["pid"].as_i64().unwrap()
    }

    #[test]
    fn acquire_writes_the_holder_file() {
        let (_tmp, locks, path) = setup();
        let claimant = Claimant {
            pid: 4242,
            host: "box".into(),
            now_ms: NOW,
        };
        let _guard = locks.acquire("bot", DEFAULT_STALE_MS, &claimant).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        let token = text
            .split("\"token\":\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap();
        assert_eq!(token.len(), 32);
        assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            text,
            format!(
                "{{\"pid\":4242,\"startedAt\":{NOW},\"host\":\"box\",\"token\":\"{token}\"}}\n"
            )
        );
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let dir_mode = fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
    }

    #[test]
    fn tokens_differ_between_acquisitions() {
        let (_tmp, locks, path) = setup();
        let first = {
            let _guard = locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW)).unwrap();
            fs::read_to_string(&path).unwrap()
        };
        let _guard = locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW)).unwrap();
        assert_ne!(fs::read_to_string(&path).unwrap(), first);
    }

    #[test]
    fn a_live_holder_on_this_host_keeps_the_lock() {
        let (_tmp, locks, path) = setup();
        let _held = locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW)).unwrap();
        let before = fs::read_to_string(&path).unwrap();
        let description =
            held_description(locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW + 90_000)));
        assert_eq!(
            description,
            format!("pid {} on here (held for 2m)", own_pid())
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), before);
    }

    #[test]
    fn a_holder_on_another_host_is_assumed_alive() {
        let (_tmp, locks, path) = setup();
        plant(&path, &holder_json(DEAD_PID, NOW, "elsewhere", "t0k"));
        let description = held_description(locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW)));
        assert_eq!(
            description,
            format!("pid {DEAD_PID} on elsewhere (held for 0m)")
        );
        assert!(!description.contains("t0k"));
    }

    #[test]
    fn a_dead_holder_on_this_host_is_reclaimed() {
        let (_tmp, locks, path) = setup();
        plant(&path, &holder_json(DEAD_PID, NOW, HOST, "old"));
        let _guard = locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW)).unwrap();
        assert_eq!(file_pid(&path), i64::from(own_pid()));
    }

    #[test]
    fn a_reaped_childs_pid_counts_as_dead() {
        let (_tmp, locks, path) = setup();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        child.wait().unwrap();
        plant(&path, &holder_json(pid, NOW, HOST, "old"));
        let _guard = locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW)).unwrap();
        assert_eq!(file_pid(&path), i64::from(own_pid()));
    }

    #[test]
    fn staleness_boundary() {
        let stale_ms = 60_000;
        // A live holder (this process) on another host: only age can free it.
        for (age, reclaimed) in [
            (stale_ms - 1, false),
            (stale_ms, true),
            (stale_ms + 1, true),
        ] {
            let (_tmp, locks, path) = setup();
            plant(
                &path,
                &holder_json(own_pid(), NOW - age, "elsewhere", "old"),
            );
            let result = locks.acquire("bot", stale_ms, &me(NOW));
            assert_eq!(result.is_ok(), reclaimed, "age {age}");
            // Same rule for a live holder on this host.
            let (_tmp, locks, path) = setup();
            plant(&path, &holder_json(own_pid(), NOW - age, HOST, "old"));
            let result = locks.acquire("bot", stale_ms, &me(NOW));
            assert_eq!(result.is_ok(), reclaimed, "same host, age {age}");
        }
    }

    #[test]
    fn a_holder_from_the_future_is_not_stale() {
        let (_tmp, locks, path) = setup();
        plant(&path, &holder_json(1, NOW + 5 * 60_000, "elsewhere", "old"));
        let description = held_description(locks.acquire("bot", 1, &me(NOW)));
        assert_eq!(description, "pid 1 on elsewhere (held for 0m)");
    }

    #[test]
    fn malformed_holders_are_deleted_and_the_lock_taken() {
        let cases = [
            "".to_owned(),
            "garbage".to_owned(),
            "[]".to_owned(),
            "{\"pid\":\"1\",\"startedAt\":1,\"host\":\"h\",\"token\":\"t\"}".to_owned(),
            "{\"pid\":1.5,\"startedAt\":1,\"host\":\"h\",\"token\":\"t\"}".to_owned(),
            "{\"pid\":1,\"startedAt\":\"1\",\"host\":\"h\",\"token\":\"t\"}".to_owned(),
            "{\"pid\":1,\"startedAt\":1,\"host\":2,\"token\":\"t\"}".to_owned(),
            "{\"pid\":1,\"startedAt\":1,\"host\":\"h\"}".to_owned(),
            holder_json(0, NOW, "elsewhere", "t"),
            holder_json(-1, NOW, "elsewhere", "t"),
            "{\"pid\":4294967296,\"startedAt\":1,\"host\":\"h\",\"token\":\"t\"}".to_owned(),
        ];
        for content in cases {
            let (_tmp, locks, path) = setup();
            plant(&path, &content);
            let result = locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW));
            assert!(result.is_ok(), "content {content:?}: {result:?}");
            assert_eq!(file_pid(&path), i64::from(own_pid()));
        }
    }

    #[test]
    fn gives_up_after_two_tries() {
        let (_tmp, locks, path) = setup();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        // A dangling symlink exists for exclusive create but reads as gone, on every try.
        std::os::unix::fs::symlink("nowhere", &path).unwrap();
        let description = held_description(locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW)));
        assert_eq!(description, "another process holds the lock");
    }

    #[test]
    fn release_deletes_our_lock_and_is_safe_twice() {
        let (_tmp, locks, path) = setup();
        let mut guard = locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW)).unwrap();
        guard.release();
        assert!(!path.exists());
        let _next = locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW)).unwrap();
        guard.release();
        drop(guard);
        assert!(
            path.exists(),
            "a second release must not delete the new holder's lock"
        );
    }

    #[test]
    fn drop_releases() {
        let (_tmp, locks, path) = setup();
        drop(locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW)).unwrap());
        assert!(!path.exists());
    }

    #[test]
    fn release_leaves_a_lock_reclaimed_by_another_process() {
        let (_tmp, locks, path) = setup();
        let mut ours = locks.acquire("bot", 1_000, &me(NOW)).unwrap();
        let other = Claimant {
            pid: 1,
            host: "elsewhere".into(),
            now_ms: NOW + 1_000,
        };
        let _theirs = locks.acquire("bot", 1_000, &other).unwrap();
        ours.release();
        assert_eq!(file_pid(&path), 1);
    }

    #[test]
    fn release_leaves_a_malformed_file_alone() {
        let (_tmp, locks, path) = setup();
        let mut ours = locks.acquire("bot", DEFAULT_STALE_MS, &me(NOW)).unwrap();
        fs::write(&path, "not ours").unwrap();
        ours.release();
        assert_eq!(fs::read_to_string(&path).unwrap(), "not ours");
    }

    #[test]
    fn names_are_validated() {
        let (tmp, locks, _) = setup();
        let long = "a".repeat(129);
        for name in ["../x", "", "a/b", "/abs", "a b", "é", "x\0y", long.as_str()] {
            let err = locks.acquire(name, DEFAULT_STALE_MS, &me(NOW)).unwrap_err();
            assert!(matches!(err, LockError::InvalidName { .. }), "{name:?}");
        }
        assert_eq!(
            LockError::InvalidName {
                name: "../x".into()
            }
            .to_string(),
            "lock name \"../x\" is not allowed: use 1 to 128 letters, digits, '.', '_' or '-' (this is a bug in the caller)"
        );
        assert!(!tmp.path().join("x.lock").exists());
        assert!(!tmp.path().join("locks").exists());
        let max = "a".repeat(128);
        for name in ["discord-123456", "robo_claw-50052", "a.b", max.as_str()] {
            assert!(
                locks.acquire(name, DEFAULT_STALE_MS, &me(NOW)).is_ok(),
                "{name:?}"
            );
        }
    }

    #[test]
    fn describe_holder_rounds_minutes() {
        let cases = [
            (0, "0m"),
            (29_999, "0m"),
            (30_000, "1m"),
            (89_999, "1m"),
            (90_000, "2m"),
            (3_600_000, "60m"),
        ];
        for (age, shown) in cases {
            let holder = Holder {
                pid: 7,
                started_at: (NOW - age) as f64,
                host: "h".into(),
                token: "secret".into(),
            };
            assert_eq!(
                describe_holder(&holder, NOW),
                format!("pid 7 on h (held for {shown})")
            );
        }
    }

    #[test]
    fn unusable_lock_directory_is_an_io_error() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("locks");
        fs::write(&file, "").unwrap();
        let err = LockDir::new(&file)
            .acquire("bot", DEFAULT_STALE_MS, &me(NOW))
            .unwrap_err();
        assert!(err.to_string().starts_with(&format!(
            "cannot create the lock directory {}: ",
            file.display()
        )));
        assert!(
            err.to_string()
                .ends_with("; check that the lock directory is writable")
        );
    }

    #[test]
    fn this_process_names_this_pid_and_a_host() {
        let claimant = Claimant::this_process(NOW);
        assert_eq!(u32::try_from(claimant.pid).unwrap(), std::process::id());
        assert!(!claimant.host.is_empty());
        assert_eq!(claimant.now_ms, NOW);
    }

    #[test]
    fn held_message_says_what_to_do() {
        let err = LockError::Held {
            holder_description: "pid 7 on h (held for 3m)".into(),
        };
        assert_eq!(
            err.to_string(),
            "the lock is held by pid 7 on h (held for 3m); stop that process or wait until it ends"
        );
    }
}
