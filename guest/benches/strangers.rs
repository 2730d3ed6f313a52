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
//! Budget: flat, i.e. the 10,000-stranger figure within 1.5x of the 10-stranger one, for
//! each path a message can take (dropped at the gate, refused with a reply, issued a code):
//! an average over all of them would hide a slow path behind the many cheap drops.
//! `cargo bench -p guest --bench strangers` prints criterion's figures, then a summary table
//! with each path's median next to its budget; every path must be taken in every population.

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

/// What became of one stranger's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// Nothing sent, nothing shown at the terminal (over the gate's budget).
    Dropped,
    /// A reply in the chat, no code (the code budget is spent; told to wait).
    Refused,
    /// A pairing code made and shown at the terminal.
    Issued,
}

const PATHS: [(Path, &str); 3] = [
    (Path::Dropped, "dropped at the gate"),
    (Path::Refused, "refused with a reply"),
    (Path::Issued, "issued a code"),
];

/// Each message of the next `count` distinct strangers timed alone, with its path (read
/// from what the host recorded: the terminal's code line, a reply in the chat, or nothing).
fn timed_paths(
    bridge: &mut Bridge,
    host: &mut FakeHost,
    next: &mut u64,
    count: u64,
) -> Vec<(Path, Duration)> {
    host.clear_records();
    let mut timed = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let (sent, notes) = (host.sent.len(), host.notes.len());
        let start = Instant::now();
        stranger(bridge, host, *next);
        let took = start.elapsed();
        *next += 1;
        let path = if host.notes[notes..]
            .iter()
            .any(|(_, text)| text.starts_with("Messenger pairing code:"))
        {
            Path::Issued
        } else if host.sent.len() > sent {
            Path::Refused
        } else {
            Path::Dropped
        };
        timed.push((path, took));
    }
    black_box(&host.sent);
    timed
}

/// A path, how many messages took it, and their median time.
type PathFigure = (Path, usize, Duration);

/// Per population: the median time of each path and how many messages took it, over
/// several rounds of 600 messages (ten simulated minutes at one stranger a second, so every
/// round holds the same mix). The populations take turns round by round, so a busy machine
/// slows them alike instead of skewing whichever ran during the load.
fn per_path() -> Vec<(u64, Vec<PathFigure>)> {
    let mut sessions: Vec<_> = POPULATIONS.iter().map(|&n| flooded(n)).collect();
    let mut all: Vec<Vec<(Path, Duration)>> = vec![Vec::new(); sessions.len()];
    for _ in 0..9 {
        for (slot, (bridge, host, next)) in sessions.iter_mut().enumerate() {
            all[slot].extend(timed_paths(bridge, host, next, 600));
        }
    }
    POPULATIONS
        .iter()
        .zip(all)
        .map(|(&population, timed)| {
            let paths = PATHS
                .iter()
                .map(|&(path, _)| {
                    let mut times: Vec<Duration> = timed
                        .iter()
                        .filter(|(p, _)| *p == path)
                        .map(|(_, t)| *t)
                        .collect();
                    times.sort();
                    let median = times.get(times.len() / 2).copied().unwrap_or_default();
                    (path, times.len(), median)
                })
                .collect();
            (population, paths)
        })
        .collect()
}

fn summary(_: &mut Criterion) {
    let figures = per_path();
    println!(
        "\nUnpaired strangers: cost of the next distinct stranger's message by what became of \
         it (native; one new stranger a second, 5,400 messages per population)"
    );
    println!(
        "  {:>8}  {:<22}  {:>8}  {:>11}  {:>8}  budget",
        "heard", "path", "messages", "median", "vs 10"
    );
    let base = &figures[0].1;
    for (population, paths) in &figures {
        for (i, (path, count, median)) in paths.iter().enumerate() {
            let name = PATHS[i].1;
            // The work happened: every path is taken in every population, so each figure
            // times what it names.
            assert!(
                *count > 0,
                "{population} strangers heard: no message was {name} ({path:?})"
            );
            let ratio = median.as_secs_f64() / base[i].2.as_secs_f64();
            let verdict = if ratio <= FLAT_RATIO {
                "flat: ok".to_string()
            } else {
                format!("flat: OVER x{:.1}", ratio / FLAT_RATIO)
            };
            println!(
                "  {population:>8}  {name:<22}  {count:>8}  {median:>11.3?}  x{ratio:<7.2}  \
                 {verdict} (≤ x{FLAT_RATIO} of the 10-stranger figure)"
            );
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = strangers, summary
}
criterion_main!(benches);
