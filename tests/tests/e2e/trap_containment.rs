//! C2: a trap in one session (out of memory, or a call over its CPU budget) is reported,
//! the session restarts from its saved state, and another session on the same host never
//! notices.

use std::sync::Arc;

use host_shim::sandbox::runtime::Limits;
use host_shim::wit::session::{AgentEvent, TurnOrigin};

use crate::common::{self, Dirs, Setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_out_of_memory_guest_is_contained_and_restarted() {
    let limits = Limits {
        memory_bytes: 24 << 20,
        ..Limits::default()
    };
    let runtime = crate::common::compiled::runtime(limits);
    let dirs = Dirs::new();
    let mut a = Setup::new(&dirs, "session-a");
    a.runtime = runtime.clone();
    a.config = vec![common::demo_runs_tools()];
    let a = a.start().await;
    // Its own lock directory: the two fakes share a bot id, and one bot credential may
    // be held by one session only (I15).
    let other_dirs = Dirs::new();
    let mut b = Setup::new(&other_dirs, "session-b");
    b.runtime = runtime;
    b.config = vec![common::demo_runs_tools()];
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
    // The operator's metrics count traps and restarts from these two lines, in this order.
    let events: Vec<(String, Vec<(String, String)>)> = a
        .log
        .lines()
        .into_iter()
        .map(|(_, line)| (line.event, line.fields))
        .filter(|(event, _)| event == "guest trap" || event == "guest restarted")
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0].0, "guest trap", "{events:?}");
    assert_eq!(events[1].0, "guest restarted", "{events:?}");
    assert_eq!(events[1].1, [("restarts".to_owned(), "1".to_owned())]);

    // The other session goes on as if nothing happened.
    b.say("user-2", "still fine?", "You asked").await;
    assert_eq!(b.session.health().await.unwrap().restarts, 0);

    // The restarted session kept its pairing (reloaded from the saved state).
    a.say("user-1", "after the crash", "You asked").await;
    a.session.shutdown().await.unwrap();
    b.session.shutdown().await.unwrap();
}

/// Agent-like markdown of about `size` bytes: enough work for the outbound pipeline that a
/// few milliseconds of CPU cannot finish it.
fn long_reply(size: usize) -> String {
    let mut text = String::with_capacity(size + 256);
    let mut i = 0;
    while text.len() < size {
        text.push_str(&format!(
            "## Step {i}\n\nI changed **the parser** so _nested_ blocks close (see [issue {i}](https://example.com/{i})).\n\n- one `a < b`\n- two\n\n```rust\nfn f_{i}() {{}}\n```\n\n"
        ));
        i += 1;
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_call_over_its_cpu_budget_is_interrupted_and_the_session_goes_on() {
    // The budget is fuel: the guest's own instructions, the same on a loaded machine as on
    // an idle one, so this test cannot be tripped (or saved) by how busy the host is.
    // Ordinary calls burn a few million units; rendering 4 MiB burns far more than 100
    // million. The memory cap is raised so that size is not stopped by memory first.
    let limits = Limits {
        call_fuel: 100_000_000,
        memory_bytes: 512 << 20,
        ..Limits::default()
    };
    let runtime = crate::common::compiled::runtime(limits);
    let dirs = Dirs::new();
    let agent = Arc::new(common::ScriptAgent::default());
    let mut setup = Setup::new(&dirs, "cpu");
    setup.runtime = runtime;
    setup.agent = agent.clone();
    let h = setup.start().await;
    h.pair("user-1").await;

    agent.emit(AgentEvent::TurnStarted(TurnOrigin::Local)).await;
    agent
        .emit(AgentEvent::AssistantMessage(long_reply(4 << 20)))
        .await;
    agent.emit(AgentEvent::TurnSettled).await;
    let health = h.session.health().await.expect("session alive");
    assert_eq!(
        health.restarts, 1,
        "the runaway call was interrupted: {health:?}"
    );
    assert!(
        health
            .last_trap
            .as_deref()
            .is_some_and(|t| t.contains("over its CPU budget")),
        "stopped by the CPU budget, not by something else: {health:?}"
    );
    assert!(
        h.ui.notes()
            .iter()
            .any(|(_, t)| t.contains("The bridge failed")),
        "the interruption is reported locally: {:?}",
        h.ui.notes()
    );

    // The fresh instance answers as before, with the pairing it reloaded.
    agent.emit(AgentEvent::TurnStarted(TurnOrigin::Local)).await;
    agent
        .emit(AgentEvent::AssistantMessage("short and fine".into()))
        .await;
    agent.emit(AgentEvent::TurnSettled).await;
    let delivered = h
        .fake
        .wait_for(common::WAIT, |sent, _| {
            sent.iter()
                .any(|m| m.message.text.contains("short and fine"))
        })
        .await;
    assert!(delivered, "sent: {:?}", h.texts());
    h.session.shutdown().await.expect("clean shutdown");
}
