//! `lock`: single-instance locks (one process per bot credential), as lock files.

use wasmtime::component::HasData;

use super::{Imports, SessionContext};
use crate::disk::lock::{Claimant, LockDir, LockGuard};
use crate::local::clock::Clock;
use crate::transcript::line::Event;
use crate::transcript::script::Script;
use crate::wit::lock;

/// What the lock calls may touch: the lock directory, the locks this session holds, and
/// the clock a claim is stamped with.
pub struct LockPart<'a> {
    locks: &'a LockDir,
    held: &'a mut Vec<(String, LockGuard)>,
    clock: &'a dyn Clock,
}

/// The lock interface's view, for the linker.
pub struct LockImports;

impl HasData for LockImports {
    type Data<'a> = Imports<'a, LockPart<'a>>;
}

impl SessionContext {
    /// The lock interface's view of this session.
    pub fn lock_imports(&mut self) -> Imports<'_, LockPart<'_>> {
        imports!(
            self,
            LockPart {
                locks: &self.locks,
                held: &mut self.held_locks,
                clock: &*self.clock,
            }
        )
    }
}

impl lock::Host for Imports<'_, LockPart<'_>> {
    async fn acquire(&mut self, name: String, stale_after_ms: u64) -> Result<(), String> {
        let live = name.clone();
        let part = &mut self.part;
        self.tape
            .exchange(
                || Event::Acquire {
                    name: name.clone(),
                    stale_after_ms,
                },
                Script::acquired,
                // In a block: a replay must not take the lock.
                async move { part.acquire(live, stale_after_ms) },
                |result| Event::Acquired {
                    result: result.clone(),
                },
            )
            .await
    }

    async fn release(&mut self, name: String) {
        self.tape.record(|| Event::Release { name: name.clone() });
        // Dropping the guard releases the file, token-verified.
        self.part.held.retain(|(held, _)| *held != name);
    }
}

impl LockPart<'_> {
    fn acquire(&mut self, name: String, stale_after_ms: u64) -> Result<(), String> {
        if self.held.iter().any(|(held, _)| *held == name) {
            return Ok(());
        }
        let claimant = Claimant::this_process(self.clock.now_ms());
        let guard = self
            .locks
            .acquire(&name, stale_after_ms, &claimant)
            .map_err(|e| e.to_string())?;
        self.held.push((name, guard));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::sandbox::imports::fixture::{NOW, host};
    use crate::wit::transport;

    #[tokio::test]
    async fn a_transport_lock_is_reclaimed_after_the_stale_time_the_guest_gives() {
        use transport_testing::fake::{FakeConfig, FakeTransport};
        let dir = tempfile::tempdir().expect("temp dir");
        let mut host = host(dir.path());
        let fake = FakeTransport::new(FakeConfig::default());
        host.ctx.transports.insert(Arc::new(fake.handle()));
        let identity = transport::Host::identify(&mut host.ctx.transport_imports(), "fake".into())
            .await
            .expect("identifies");
        let lock = identity.lock_name.expect("the fake names its lock");
        // Another host took the lock 6 s ago: it cannot be probed, only outlived.
        std::fs::create_dir_all(dir.path().join("locks")).expect("lock dir");
        let holder = format!(
            "{{\"pid\":1,\"startedAt\":{},\"host\":\"elsewhere\",\"token\":\"x\"}}\n",
            NOW - 6_000
        );
        std::fs::write(
            dir.path().join("locks").join(format!("{lock}.lock")),
            holder,
        )
        .expect("plant lock");

        let refused =
            lock::Host::acquire(&mut host.ctx.lock_imports(), lock.clone(), 900_000).await;
        assert!(refused.is_err(), "a 15-minute limit keeps a 6 s old lock");
        lock::Host::acquire(&mut host.ctx.lock_imports(), lock, 5_000)
            .await
            .expect("a 5 s limit reclaims a 6 s old lock");
    }
}
