//! Idle sessions cost nothing (docs/scaling.md#idle-sessions): resident memory with 100,000
//! hibernated sessions on one node, the extra time of the first envelope to a hibernated
//! session over one to a live session, and envelope latency with 10,000 active sessions.
//! Each figure is printed next to its budget; every answer is checked to come from the
//! session the chat is bound to, and every woken session is checked to have woken (its
//! health counts the wake), so a figure cannot time an early return or a wrong route.
//!
//! A session here is what `host-shim serve` runs per pi session: broker entry, component
//! instance from the pool while it is awake, configure and start, the shared bot (the
//! in-memory fake) started for it, its actor task; hibernated, only the host's part stays.
//! Its state lives in the real state database (`serve`'s SQLite file, on disk); the
//! cluster's KV is not involved, so the figures are one node's host and bridge, not NATS.
//! The person writing is trusted by config (`allowUsers`), as a paired one is: the state
//! database holds a pairing the same way and no part of it is resident.
//!
//! `cargo bench -p host-shim --bench hibernation` (several minutes; ~7 GiB while 10,000
//! sessions are awake). `HIBERNATION_BENCH_SESSIONS=20000 HIBERNATION_BENCH_ACTIVE=2000`
//! for a quicker look.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use host_shim::local::clock::ManualClock;
use host_shim::sandbox::hibernation::{HibernatedCount, Hibernation};
use support::broker_world::{World, ms, percentile};
use support::heap::{COUNTING, HELD};
use support::{private_kib, proportional_kib, resident_kib};

/// The idle time after which the sessions hibernate (the shortest `serve` accepts).
const AFTER: Duration = Duration::from_secs(60);
/// Sessions started and hibernated together while the node fills up.
const BATCH: usize = 500;
/// Sessions woken one by one for the first-envelope figure.
const WAKES: usize = 1_000;
/// Envelopes routed among the active sessions for the latency figure.
const REPEATS: usize = 5_000;

fn sorted(times: &[Duration]) -> Vec<Duration> {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted
}

fn verdict(within: bool) -> &'static str {
    if within {
        "within budget"
    } else {
        "OVER BUDGET"
    }
}

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// The broker's world with the sessions' clock, which the bench moves past the idle time.
struct Node {
    world: World,
    clock: Arc<ManualClock>,
    hibernated: HibernatedCount,
}

impl Node {
    /// A broker with room in the pool for `awake` instances at once.
    async fn new(awake: usize) -> Node {
        let world = World::new(awake).await;
        let hibernated = world.broker.hibernated();
        Node {
            world,
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            hibernated,
        }
    }

    /// Attaches session `i` as `host-shim serve` does, hibernating after [`AFTER`] by the
    /// node's clock.
    async fn attach(&mut self, i: usize) {
        let hibernation = Hibernation::after(AFTER, self.hibernated.clone());
        self.world.attach(i, self.clock.clone(), hibernation).await;
    }

    /// Lets the idle time pass and hibernates sessions `range`; each must go.
    async fn hibernate(&self, range: impl IntoIterator<Item = usize>) {
        self.clock.advance(AFTER.as_millis() as u64);
        for i in range {
            let session = &self.world.sessions[i];
            assert!(
                session.hibernate_if_idle().await.expect("session alive"),
                "session {i} did not hibernate: {:?}",
                session.health().await
            );
        }
    }
}

fn main() {
    let total = env_count("HIBERNATION_BENCH_SESSIONS", 100_000).max(2 * WAKES);
    let active = env_count("HIBERNATION_BENCH_ACTIVE", 10_000).clamp(WAKES, total);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    tokio.block_on(async {
        let mut node = Node::new(active).await;
        // Memory freed before (compiling the component) is not the sessions': given back
        // first, as the sessions' hibernations give theirs back.
        host_shim::sandbox::freed_memory::release_now();
        let rss_start = resident_kib();
        let private_start = private_kib();
        // Everything allocated from here that the sessions still hold once they sleep.
        let held_start = HELD.load(Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);

        // (a) The node fills up: sessions start a batch at a time and hibernate once quiet.
        let filling = Instant::now();
        for first in (0..total).step_by(BATCH) {
            let end = (first + BATCH).min(total);
            for i in first..end {
                node.attach(i).await;
            }
            node.hibernate(first..end).await;
        }
        let filled_in = filling.elapsed();
        assert_eq!(node.hibernated.get(), total, "every session hibernated");
        assert_eq!(
            node.world.runtime.live_instances(),
            0,
            "no instance is left"
        );
        // Whatever the allocator kept from the batches' instances is freed memory, not a
        // session's: let the SQLite commit settle first so its pages are counted too.
        node.world.state.committed().await.expect("state committed");
        COUNTING.store(false, Ordering::Relaxed);
        let heap_each = (HELD.load(Ordering::Relaxed) - held_start) as f64 / 1024.0 / total as f64;
        // Sessions that hold nothing were never made: the figure would be an empty node's.
        assert!(
            heap_each > 0.0,
            "the hibernated sessions hold no memory at all"
        );
        let rss_idle = resident_kib();
        let (pss_idle, private_idle) = (proportional_kib(), private_kib());
        let gib = |kib: u64| kib as f64 / (1024.0 * 1024.0);
        let each = rss_idle.saturating_sub(rss_start) as f64 / total as f64;
        let private_each = private_idle.saturating_sub(private_start) as f64 / total as f64;
        // The budget is for 100,000 on one node; a smaller run is held to what it projects:
        // the node's start plus 100,000 sessions at the measured cost each.
        let budget_kib = 1024.0 * 1024.0;
        let projected_kib = rss_start as f64 + each * 100_000.0;
        println!(
            "(a) {total} paired sessions, all hibernated: resident (VmRSS) {:.2} GiB, {each:.1} \
             KiB each over the {} MiB at start ({private_each:.1} KiB of it private, \
             {heap_each:.1} KiB held in the host's heap; proportional {:.2} GiB); started and \
             hibernated in {:.0} s; 100,000 at that cost: {:.2} GiB   budget: 100,000 in ≤ 1 \
             GiB: {}",
            gib(rss_idle),
            rss_start / 1024,
            gib(pss_idle),
            filled_in.as_secs_f64(),
            projected_kib / (1024.0 * 1024.0),
            verdict(projected_kib <= budget_kib),
        );

        // (b) The first envelope to a hibernated session, then the next one (live), per
        // session: the same route, the same command, the same answer; only the wake differs.
        // Each chat talks to its session once before (untimed): a chat's first message to a
        // session records the chat in its state (a write that waits for its commit's fsync),
        // which is the chat's cost, not the wake's.
        let session_of = |k: usize| (k * 7919) % total;
        let woken: Vec<usize> = (0..WAKES).map(session_of).collect();
        let mut switches = Vec::with_capacity(WAKES);
        for (k, &i) in woken.iter().enumerate() {
            let chat = format!("wake-{k}");
            switches.push(node.world.bind(&chat, i).await);
            node.world.status(&chat, i).await;
        }
        // Not a budget: the sender may use every session here, and a step of `/switch`'s
        // answer that grew with them kept the first one from being answered at 100,000
        // (docs/scaling.md#idle-sessions).
        let switches = sorted(&switches);
        println!(
            "(b) /switch from a sender allowed in all {total} sessions, answered by the \
             broker: p50 {}, p99 {} ({WAKES} chats)",
            ms(percentile(&switches, 0.5)),
            ms(percentile(&switches, 0.99)),
        );
        node.world
            .state
            .committed()
            .await
            .expect("bindings committed");
        node.hibernate(woken.iter().copied()).await;
        let mut first = Vec::with_capacity(WAKES);
        let mut then = Vec::with_capacity(WAKES);
        for (k, &i) in woken.iter().enumerate() {
            let chat = format!("wake-{k}");
            first.push(node.world.status(&chat, i).await);
            then.push(node.world.status(&chat, i).await);
            let health = node.world.sessions[i]
                .health()
                .await
                .expect("session alive");
            assert_eq!(
                (health.wakes, health.hibernated),
                (2, false),
                "session {i} woke for its first /status after each sleep: {health:?}"
            );
        }
        let (first_sorted, then_sorted) = (sorted(&first), sorted(&then));
        // The wake's cost per session: its first envelope against its next one, the same
        // route and answer a moment apart. A difference of two p99s taken apart would let a
        // stall of the loaded machine in either series hide or invent a wake's cost.
        let extra: Vec<Duration> = first
            .iter()
            .zip(&then)
            .map(|(first, then)| first.saturating_sub(*then))
            .collect();
        let extra = sorted(&extra);
        let extra_p99 = percentile(&extra, 0.99);
        println!(
            "(b) first envelope to a hibernated session: p50 {}, p99 {}; the next one (live): \
             p50 {}, p99 {}; the first's extra over the next, per session: p50 {}, p99 {} \
             ({WAKES} sessions)   budget: ≤ 1 ms extra at p99: {}",
            ms(percentile(&first_sorted, 0.5)),
            ms(percentile(&first_sorted, 0.99)),
            ms(percentile(&then_sorted, 0.5)),
            ms(percentile(&then_sorted, 0.99)),
            ms(percentile(&extra, 0.5)),
            ms(extra_p99),
            verdict(extra_p99 <= Duration::from_millis(1)),
        );
        // They go back to sleep, so (c) starts from the same node.
        node.hibernate(woken.iter().copied()).await;

        // (c) `active` sessions awake with traffic: each gets a chat and its first message
        // (a wake, untimed), then envelopes go to them in a scattered order.
        let active_session = |j: usize| (j * 7919 + 13) % total;
        for j in 0..active {
            let chat = format!("active-{j}");
            node.world.bind(&chat, active_session(j)).await;
            node.world.status(&chat, active_session(j)).await;
        }
        assert_eq!(
            node.world.runtime.live_instances(),
            active as u64,
            "{active} sessions are awake"
        );
        let rss_active = resident_kib();
        let mut latencies = Vec::with_capacity(REPEATS);
        for k in 0..REPEATS {
            let j = (k * 104_729) % active;
            latencies.push(
                node.world
                    .status(&format!("active-{j}"), active_session(j))
                    .await,
            );
        }
        let latencies = sorted(&latencies);
        let p99 = percentile(&latencies, 0.99);
        println!(
            "(c) {active} active sessions (beside {} hibernated), envelope routed + answered: \
             p50 {}, p99 {}, max {} ({REPEATS} measured; resident {:.2} GiB)   budget: p99 ≤ 2 \
             ms: {}",
            total - active,
            ms(percentile(&latencies, 0.5)),
            ms(p99),
            ms(*latencies.last().unwrap_or(&Duration::ZERO)),
            gib(rss_active),
            verdict(p99 <= Duration::from_millis(2)),
        );

        node.world.shutdown().await;
    });
}
