//! Unpaired strangers benchmark (docs/architecture.md#performance-budgets "Messages from unpaired
//! strangers: flat cost per message, whatever their number";
//! docs/decisions.md#decision-18-unpaired-senders-are-bounded).
//!
//! Before the limits, each stranger's message made a code, printed a terminal line and
//! rewrote a document that grew with every stranger: 12.7 ms per envelope at 10,000 and
//! rising. Here a session has already heard from 10, 1,000 or 10,000 distinct strangers
//! (one a second, on one transport), and the figure is what the next distinct stranger's
//! message costs, natively, through the whole bridge with a recording fake host (routing,
//! rate limit, code and hash, save, reply through the outbound pipeline).
//!
//! Budget: flat, i.e. the 10,000-stranger figure within 1.5x of the 10-stranger one.
//! `cargo bench -p guest --bench strangers` prints criterion's figures, then a summary table
//! with each figure next to its budget.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use guest::bridge::Bridge;

#[path = "../tests/bridge/support/mod.rs"]
mod support;

use support::{FakeHost, default_bridge, dm};

const POPULATIONS: [u64; 3] = [10, 1_000, 10_000];

/// Most the 10,000-stranger figure may be over the 10-stranger one and still count as flat.
const FLAT_RATIO: f64 = 1.5;

/// A session that has heard from `strangers` distinct unpaired senders, one a second.
fn flooded(strangers: u64) -> (Bridge, FakeHost, u64) {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    for i in 0..strangers {
        stranger(&mut bridge, &mut host, i);
    }
    host.clear_records();
    (bridge, host, strangers)
}

/// The message of distinct stranger `i`, a second after the one before.
fn stranger(bridge: &mut Bridge, host: &mut FakeHost, i: u64) {
    host.now += 1_000;
    let id = i.to_string();
    bridge.on_envelope(host, dm("tg", &id, &id, "hello"));
}

/// Time per message for the next `count` distinct strangers; the host's records are
/// cleared first (untimed) so they do not grow across batches.
fn next_strangers(
    bridge: &mut Bridge,
    host: &mut FakeHost,
    next: &mut u64,
    count: u64,
) -> Duration {
    host.clear_records();
    let start = Instant::now();
    for _ in 0..count {
        stranger(bridge, host, *next);
        *next += 1;
    }
    black_box(&host.sent);
    start.elapsed()
}

fn strangers(c: &mut Criterion) {
    let mut group = c.benchmark_group("next distinct stranger");
    for population in POPULATIONS {
        let (mut bridge, mut host, mut next) = flooded(population);
        group.bench_function(BenchmarkId::from_parameter(population), |b| {
            b.iter_custom(|iters| next_strangers(&mut bridge, &mut host, &mut next, iters));
        });
    }
    group.finish();
}

/// Best time per message for each population over several rounds of 600 messages (ten
/// simulated minutes, so every round holds the same mix of admitted and rate-limited
/// strangers). The populations take turns round by round, so a busy machine slows them
/// alike instead of skewing whichever ran during the load.
fn per_message() -> Vec<(u64, Duration)> {
    let mut sessions: Vec<_> = POPULATIONS.iter().map(|&n| flooded(n)).collect();
    let mut best = vec![Duration::MAX; sessions.len()];
    for _ in 0..9 {
        for (slot, (bridge, host, next)) in sessions.iter_mut().enumerate() {
            let t = next_strangers(bridge, host, next, 600) / 600;
            best[slot] = best[slot].min(t);
        }
    }
    POPULATIONS.iter().copied().zip(best).collect()
}

fn summary(_: &mut Criterion) {
    let figures = per_message();
    let base = figures[0].1.as_secs_f64();
    println!("\nUnpaired strangers: cost of the next distinct stranger's message (native)");
    println!(
        "  {:>8}  {:>11}  {:>8}  budget",
        "heard", "per message", "vs 10"
    );
    for (population, t) in &figures {
        let ratio = t.as_secs_f64() / base;
        let verdict = if ratio <= FLAT_RATIO {
            "flat: ok".to_string()
        } else {
            format!("flat: OVER x{:.1}", ratio / FLAT_RATIO)
        };
        println!(
            "  {population:>8}  {:>11.3?}  x{ratio:<7.2}  {verdict} (≤ x{FLAT_RATIO} of the 10-stranger figure)",
            t
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = strangers, summary
}
criterion_main!(benches);
