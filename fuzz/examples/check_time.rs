//! How long one target's check takes on each input file, natively and without libFuzzer:
//! the executions a second a fuzzing run of that target can reach at best
//! (docs/fuzzing.md#speed).
//!
//! `cargo run --release -p bot-connect-fuzz --no-default-features --example check_time --
//! outbound fuzz/corpus/outbound/* fuzz/regressions/outbound/*` prints, per file, the
//! median of five checks and the executions a second that makes, then the same over all the
//! files. A fuzzing run adds libFuzzer's coverage instrumentation on top; `cargo fuzz run`
//! without `-O` also builds with debug assertions, which the guest uses to hold its
//! hand-written matchers to the regex engine: build this with
//! `--config 'profile.release.package.guest.debug-assertions=true'` to see what they cost.

use std::time::{Duration, Instant};

use bot_connect_fuzz::TARGETS;

/// Checks per file: the median of five is what a long run sees once its caches are warm.
const ROUNDS: usize = 5;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(name) = args.next() else {
        eprintln!("usage: check_time TARGET FILE...");
        std::process::exit(2);
    };
    let Some((_, check)) = TARGETS.iter().find(|(target, _)| *target == name) else {
        let names: Vec<&str> = TARGETS.iter().map(|(target, _)| *target).collect();
        eprintln!("no target {name:?}: one of {names:?}");
        std::process::exit(2);
    };
    let mut total = Duration::ZERO;
    let mut files = 0u32;
    for path in args {
        let data = match std::fs::read(&path) {
            Ok(data) => data,
            Err(error) => {
                eprintln!("{path}: {error}");
                std::process::exit(1);
            }
        };
        let mut times: Vec<Duration> = (0..ROUNDS)
            .map(|_| {
                let start = Instant::now();
                check(std::hint::black_box(&data));
                start.elapsed()
            })
            .collect();
        times.sort_unstable();
        let median = times[ROUNDS / 2];
        total += median;
        files += 1;
        println!(
            "{:>10.3} ms {:>9.0} exec/s {:>6} B  {path}",
            median.as_secs_f64() * 1e3,
            1.0 / median.as_secs_f64().max(1e-9),
            data.len()
        );
    }
    if files > 0 {
        let mean = total / files;
        println!(
            "{files} files: {:.3} ms an execution on average, {:.0} exec/s",
            mean.as_secs_f64() * 1e3,
            1.0 / mean.as_secs_f64().max(1e-9)
        );
    }
}
