//! C2: a trap in one session is reported, the session restarts from its saved state,
//! and another session on the same host never notices.

mod common;

use std::sync::Arc;

use common::{Dirs, Setup};
use host_shim::runtime::{EMBEDDED_COMPONENT, Limits, Runtime};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_out_of_memory_guest_is_contained_and_restarted() {
    let limits = Limits {
        memory_bytes: 24 << 20,
        ..Limits::default()
    };
    let runtime = Arc::new(Runtime::new(EMBEDDED_COMPONENT, limits).expect("component compiles"));
    let dirs = Dirs::new();
    let mut a = Setup::new(&dirs, "session-a");
    a.runtime = runtime.clone();
    let a = a.start().await;
    // Its own lock directory: the two fakes share a bot id, and one bot credential may
    // be held by one session only (I15).
    let other_dirs = Dirs::new();
    let mut b = Setup::new(&other_dirs, "session-b");
    b.runtime = runtime;
    let b = b.start().await;
    a.pair("user-1").await;
    b.pair("user-2").await;

    // A message far larger than the instance's memory cap: lowering it into the guest
    // fails inside the guest's allocator, which traps.
    let huge = "x".repeat(40 << 20);
    a.fake.inject(a.dm("user-1", &huge)).await.unwrap();
    let health = a.session.health().await.unwrap();
    assert_eq!(
        health.restarts, 1,
        "the trapped instance was replaced: {health:?}"
    );
    assert!(health.last_trap.is_some());
    assert!(
        a.ui.notes()
            .iter()
            .any(|(_, t)| t.contains("The bridge failed while handling an inbound message")),
        "the trap is reported locally: {:?}",
        a.ui.notes()
    );

    // The other session goes on as if nothing happened.
    b.say("user-2", "still fine?", "You asked").await;
    assert_eq!(b.session.health().await.unwrap().restarts, 0);

    // The restarted session kept its pairing (reloaded from the saved state).
    a.say("user-1", "after the crash", "You asked").await;
    a.session.shutdown().await.unwrap();
    b.session.shutdown().await.unwrap();
}
