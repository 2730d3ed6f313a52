//! Broker benchmarks (docs/decisions.md#decision-14-one-host-one-bot-many-sessions): attaching a
//! session against the number already attached, an envelope routed to the right session and
//! answered at 10,000 sessions (a chat's first message, which binds it, apart from the repeats),
//! and resident memory with 10,000 idle sessions attached. Each figure is printed next to its
//! budget; every answer is checked to come from the session the chat is bound to, so a figure
//! cannot time an early return or a wrong route.
//!
//! A session here is the whole thing `host-shim serve` runs per pi session: broker
//! entry, component instance from the pool, configure, the shared bot started for it
//! (routed), its actor task. The bot is the in-memory fake, so the figures are the
//! host's and the bridge's, not a network's.
//!
//! `cargo bench -p host-shim --bench broker` (about a minute; 10,000 sessions need
//! ~3 GiB). `BROKER_BENCH_SESSIONS=2000` for a quicker look.

mod support;

use std::sync::Arc;
use std::time::Duration;

use host_shim::local::clock::SystemClock;
use host_shim::sandbox::hibernation::Hibernation;
use support::broker_world::{World, ms, percentile};
use support::{private_kib, proportional_kib, resident_kib};

/// Chats that bind themselves to a session (each a first message), spread over all sessions.
const CHATS: usize = 1_000;
/// Repeat envelopes routed through those chats for the latency figure.
const REPEATS: usize = 3_000;
/// The attach figure's slices: the first and the last this many attaches.
const SLICE: usize = 1_000;

fn summary(label: &str, times: &[Duration], budget: &str) {
    let mut sorted = times.to_vec();
    sorted.sort();
    println!(
        "{label}: p50 {}, p99 {}, max {} ({} measured)   budget: {budget}",
        ms(percentile(&sorted, 0.5)),
        ms(percentile(&sorted, 0.99)),
        ms(*sorted.last().unwrap_or(&Duration::ZERO)),
        sorted.len(),
    );
}

fn main() {
    let total: usize = std::env::var("BROKER_BENCH_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
        .max(2 * SLICE);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    tokio.block_on(async {
        let mut world = World::new(total).await;
        let rss_start = resident_kib();
        let (pss_start, private_start) = (proportional_kib(), private_kib());
        let mut attach_times = Vec::with_capacity(total);
        for i in 0..total {
            attach_times.push(
                world
                    .attach(i, Arc::new(SystemClock), Hibernation::never())
                    .await,
            );
        }
        let rss_end = resident_kib();
        let (pss_end, private_end) = (proportional_kib(), private_kib());
        summary(
            &format!(
                "attach, the first {SLICE} (0 to {} already attached)",
                SLICE - 1
            ),
            &attach_times[..SLICE],
            "p99 ≤ 2 ms",
        );
        summary(
            &format!(
                "attach, the last {SLICE} ({} to {} already attached)",
                total - SLICE,
                total - 1
            ),
            &attach_times[total - SLICE..],
            "p99 ≤ 2 ms",
        );
        summary(&format!("attach, all {total}"), &attach_times, "p99 ≤ 2 ms");
        let gib = |kib: u64| kib as f64 / (1024.0 * 1024.0);
        let each = |end: u64, start: u64| end.saturating_sub(start) as f64 / total as f64;
        // RSS counts a page of the component's image once per instance that reads it; the
        // proportional set size counts it once: the memory the host really needs.
        println!(
            "memory with {total} idle sessions attached: {:.2} GiB proportional ({:.0} KiB \
             each, {:.0} KiB of it each session's own pages; RSS {:.2} GiB, {:.0} KiB each, \
             counting the shared image once per instance; RSS {} MiB at start)   budget: \
             10,000 in ≤ 5 GiB",
            gib(pss_end),
            each(pss_end, pss_start),
            each(private_end, private_start),
            gib(rss_end),
            each(rss_end, rss_start),
            rss_start / 1024,
        );

        // Each chat binds itself with /switch (its first message: a binding is made and
        // kept), to a session spread over all of them (7919 is prime, so the sessions are
        // distinct), then repeats are routed by that binding in a scattered order.
        let session_of = |chat: usize| (chat * 7919) % total;
        let mut first = Vec::with_capacity(CHATS);
        for chat in 0..CHATS {
            first.push(world.bind(&format!("chat-{chat}"), session_of(chat)).await);
        }
        // Each /switch wrote its chat's binding down, as `serve` does.
        world.state.committed().await.expect("bindings committed");
        let kept = world.state.bindings().expect("bindings").len();
        assert_eq!(kept, CHATS, "every chat's /switch was written down");
        let mut repeats = Vec::with_capacity(REPEATS);
        for k in 0..REPEATS {
            let chat = (k * 7919) % CHATS;
            repeats.push(
                world
                    .status(&format!("chat-{chat}"), session_of(chat))
                    .await,
            );
        }
        summary(
            &format!("routed + answered at {total} sessions, a chat's first message (/switch)"),
            &first,
            "p99 ≤ 2 ms",
        );
        summary(
            &format!("routed + answered at {total} sessions, repeats (/status)"),
            &repeats,
            "p99 ≤ 2 ms",
        );
        let all: Vec<Duration> = first.iter().chain(&repeats).copied().collect();
        summary(
            &format!("routed + answered at {total} sessions, first messages and repeats"),
            &all,
            "p99 ≤ 2 ms",
        );
        world.shutdown().await;
    });
}
