//! Outbound pipeline benchmarks (docs/architecture.md#performance-budgets,
//! docs/security.md#redaction).
//!
//! Budgets, natively, on 64 KiB of realistic agent text (curl lines, exports, diffs, test
//! output, JSON), once with secrets planted in it and once with none, each figure read against
//! pulldown-cmark's parse of the same text in the same run (the floor):
//! - redaction (markdown's, with its looks through markup and the whole catalog) ≤ 1x the
//!   floor and ≤ 0.15 ms;
//! - the whole pipeline ≤ 3x the floor, and ≤ 0.8 ms on every text;
//! - a text full of trigger words that are not secrets no slower to redact than the
//!   secret-laden one;
//! - 1 MiB ≤ 16x the 64 KiB time for every text and shape, redacted and through the pipeline,
//!   including text dense with keywords (`token token …`), assignments whose values stay
//!   (`password=changeme secret: ${APP_SECRET} …`) and long base64 runs, wrapped or not;
//! - 32 KiB of bare headings ≤ 1 ms.
//!
//! The component's size is reported beside them (no budget). Every figure proves its work
//! before it is timed: redaction and the pipeline send none of the planted secrets, write a
//! marker for each, and one more for a secret after the text's end; the parse reaches the end; the split and the chunker
//! make pieces.
//!
//! `cargo bench -p guest --bench pipeline` prints criterion's time and MB/s for the whole
//! pipeline per text, profile and size, per stage, and for the adversarial shapes, then a
//! summary table with every figure next to its budget. `-- summary` prints the table alone.

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use guest::core::blocks::split;
use guest::core::chunk::chunk_rendered;
use guest::core::measure::Meter;
use guest::core::outbound::prepare;
use guest::core::redact::redact;
use guest::model::{Capabilities, LengthUnit, Markup};

mod traffic;
use traffic::{PLANTED, agent_reply, realistic_reply, trigger_words};

const SIZES: [(&str, usize); 3] = [("4KiB", 4 << 10), ("64KiB", 64 << 10), ("1MiB", 1 << 20)];

fn caps(limit: u32, unit: LengthUnit, markup: Markup) -> Capabilities {
    Capabilities::text_only(markup, unit, limit)
}

fn profiles() -> [(&'static str, Capabilities); 3] {
    [
        ("telegram", Capabilities::TELEGRAM_TEXT),
        ("discord", caps(2000, LengthUnit::Utf16, Markup::Markdown)),
        ("slack", caps(4000, LengthUnit::Chars, Markup::Mrkdwn)),
    ]
}

/// The secrets the shapes below plant: a generic `token:` value, a password, a GitHub token
/// and a long `Bearer` value.
const SHAPE_SECRETS: [&str; 4] = [
    "Zq8Vn3Lr7Wx2Kp5Ty9Hb4Md6Fs1Gc0J",
    "Hq7Rt2Wz9Lm4Xv8Nc3Ks6Pd1",
    "ghp_Tq7Wm2Xc9Lr4Vb8Nz3Hs6Kd1Pf5Jy0Ga2Ue7",
    "4f9a8c7e2b1d6f3a5c8e9b0d7a2f4c6e",
];

/// A text a figure is taken on, and what redacting it must show.
struct Sample {
    name: &'static str,
    text: String,
    /// Secrets planted in it: redaction writes at least this many markers, or the figure
    /// timed something other than redaction of the whole text.
    secrets: usize,
}

impl Sample {
    fn new(name: &'static str, text: String, secrets: usize) -> Self {
        Self {
            name,
            text,
            secrets,
        }
    }
}

/// The texts every figure is taken on.
fn texts(size: usize) -> [Sample; 4] {
    let (secrets, planted) = realistic_reply(size, true);
    let (clean, _) = realistic_reply(size, false);
    [
        Sample::new("agent", agent_reply(size), 0),
        Sample::new("secrets", secrets, planted),
        Sample::new("clean", clean, 0),
        Sample::new("triggers", trigger_words(size), 0),
    ]
}

fn pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipeline");
    for (size_name, size) in SIZES {
        for sample in texts(size) {
            group.throughput(Throughput::Bytes(sample.text.len() as u64));
            for (name, caps) in profiles() {
                let id = BenchmarkId::new(format!("{}-{name}", sample.name), size_name);
                group.bench_with_input(id, &sample.text, |b, t| {
                    b.iter(|| prepare(black_box(t), &caps, u32::MAX))
                });
            }
        }
    }
    group.finish();
}

/// Redaction on its own, per text: the stage the issue found at 95 % of the pipeline.
fn redaction(c: &mut Criterion) {
    let mut group = c.benchmark_group("redact");
    for (size_name, size) in SIZES {
        for sample in texts(size) {
            group.throughput(Throughput::Bytes(sample.text.len() as u64));
            group.bench_with_input(
                BenchmarkId::new(sample.name, size_name),
                &sample.text,
                |b, t| b.iter(|| redact(black_box(t))),
            );
        }
    }
    group.finish();
}

/// Stages per profile on the secret-laden text. Rendering happens inside the split's single
/// parse, so "split" is parse + structure alone (as for markdown) and "split+render" adds
/// rendering; the render stage costs the difference. "chunk" cuts the rendered pieces to the
/// platform's limit.
fn stages(c: &mut Criterion) {
    for (name, caps) in profiles() {
        let meter = Meter::for_source(caps.length_unit, caps.markup);
        let limit = caps.max_message_length as usize;
        let mut group = c.benchmark_group(format!("stage-{name}"));
        for (size_name, size) in SIZES {
            let (text, _) = realistic_reply(size, true);
            let redacted = redact(&text).text;
            let rendered: Vec<(String, usize)> = split(&redacted, limit, meter, caps.markup)
                .into_iter()
                .map(|p| (p.rendered.into_owned(), p.visible))
                .collect();
            group.throughput(Throughput::Bytes(text.len() as u64));
            group.bench_function(BenchmarkId::new("split", size_name), |b| {
                b.iter(|| split(black_box(&redacted), limit, meter, Markup::Markdown))
            });
            if caps.markup != Markup::Markdown {
                group.bench_function(BenchmarkId::new("split+render", size_name), |b| {
                    b.iter(|| split(black_box(&redacted), limit, meter, caps.markup))
                });
                // Chunking takes the pieces by value: the copies are made outside the timing.
                group.bench_function(BenchmarkId::new("chunk", size_name), |b| {
                    b.iter_batched(
                        || rendered.clone(),
                        |pieces| {
                            pieces
                                .into_iter()
                                .map(|(r, v)| {
                                    chunk_rendered(r, v, limit, caps.length_unit, caps.markup).len()
                                })
                                .sum::<usize>()
                        },
                        BatchSize::LargeInput,
                    )
                });
            }
        }
        group.finish();
    }
}

/// `len` base64 characters from a fixed xorshift stream: as random to a pattern as key
/// material, a build artefact or an inlined image, and the same in every run.
fn base64_noise(len: usize, seed: u64) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(ALPHABET[(x >> 58) as usize])
        })
        .collect()
}

/// `unit` (which plants `per_unit` secrets) repeated to at least `size` bytes, and the
/// secrets planted.
fn fill(unit: &str, per_unit: usize, size: usize) -> (String, usize) {
    let n = size / unit.len() + 1;
    (unit.repeat(n), n * per_unit)
}

/// The shapes that made the original super-linear, and those that could make the keyword prefilter
/// so (docs/architecture.md#performance-budgets): text dense with keywords, assignments whose
/// values are not secrets, long base64 runs. About `size` bytes each; the dense ones plant a secret
/// now and then, so the marker count proves the whole text was read.
fn shapes(size: usize) -> Vec<Sample> {
    let plain = |unit: &str| fill(unit, 0, size).0;
    let mut pem = String::new();
    while pem.len() < size {
        pem.push_str("-----BEGIN RSA PRIVATE KEY-----\n");
        pem.push_str(&"lorem ipsum dolor sit amet ".repeat(150));
        pem.push('\n');
    }
    let nested: String = (0..400)
        .map(|i| format!("{}- item {i}\n", "  ".repeat(i % 100)))
        .collect();
    let quotes: String = (0..400)
        .map(|i| format!("{} quote {i}\n", ">".repeat(i % 100 + 1)))
        .collect();
    // Every keyword's windows touching the next: one line in sixteen assigns a real token.
    let keywords = format!(
        "{}token: {}\n",
        "token token token token token token token token token token token token\n".repeat(15),
        SHAPE_SECRETS[0],
    );
    // Secret-like keys with the values that stay (docs/security.md#redaction), as a config dump
    // prints them.
    let assignments = format!(
        "{}db_password = {}\n",
        "password=changeme secret: ${APP_SECRET} api_key: <your-api-key> token=3600 pwd=true \
         client_secret: $CLIENT_SECRET auth_token: null passwd: xxxxxxxx timeout: 30s\n"
            .repeat(15),
        SHAPE_SECRETS[1],
    );
    // One run of the whole size with no line break, then a token on the next line.
    let mut base64_line = base64_noise(size, 0x9E37_79B9_7F4A_7C15);
    base64_line.push_str(&format!("\n$ export GITHUB_TOKEN={}\n", SHAPE_SECRETS[2]));
    // Wrapped at 76 as MIME and certificate bundles print it, a key after every 16 KiB.
    let wrapped_unit = {
        let noise = base64_noise(76 * 215, 0xD1B5_4A32_D192_ED03);
        let mut unit: String = noise
            .as_bytes()
            .chunks(76)
            .map(|line| format!("{}\n", String::from_utf8_lossy(line)))
            .collect();
        unit.push_str(&format!("Authorization: Bearer {}\n", SHAPE_SECRETS[3]));
        unit
    };
    let (keywords, keyword_secrets) = fill(&keywords, 1, size);
    let (assignments, assignment_secrets) = fill(&assignments, 1, size);
    let (wrapped, wrapped_secrets) = fill(&wrapped_unit, 1, size);
    vec![
        Sample::new("bare-headings", plain("## h\n"), 0),
        Sample::new("long-line", "x".repeat(size), 0),
        Sample::new("unclosed-fences", plain("```rust\nfn f() {}\n\n"), 0),
        Sample::new("nested-lists", plain(&nested), 0),
        Sample::new("nested-quotes", plain(&quotes), 0),
        Sample::new("pem-no-end", pem, 0),
        Sample::new("zwj-emoji", plain("👨\u{200d}👩\u{200d}👧\u{200d}👦"), 0),
        Sample::new("keyword-dense", keywords, keyword_secrets),
        Sample::new("assignments", assignments, assignment_secrets),
        Sample::new("base64-line", base64_line, 1),
        Sample::new("base64-wrapped", wrapped, wrapped_secrets),
    ]
}

/// The adversarial shapes through the whole pipeline on every profile.
fn adversarial(c: &mut Criterion) {
    let mut group = c.benchmark_group("adversarial-64KiB");
    for sample in &shapes(64 << 10) {
        group.throughput(Throughput::Bytes(sample.text.len() as u64));
        for (profile, caps) in profiles() {
            group.bench_with_input(
                BenchmarkId::new(sample.name, profile),
                &sample.text,
                |b, t| b.iter(|| prepare(black_box(t), &caps, u32::MAX)),
            );
        }
    }
    group.finish();
}

/// pulldown-cmark's own pass over `text` with the pipeline's options, every event consumed:
/// the floor under any split that takes its structure from the parser. Returns the furthest
/// offset an event reached, which shows the parse read the whole text.
fn parse_only(text: &str) -> usize {
    let mut reached = 0;
    for (event, range) in
        pulldown_cmark::Parser::new_ext(text, guest::core::dialect::options()).into_offset_iter()
    {
        black_box(&event);
        reached = reached.max(range.end);
    }
    reached
}

/// The markers in `text`: `[redacted]` and `[redacted:LABEL]` alike.
fn markers(text: &str) -> usize {
    text.matches("[redacted").count()
}

/// A secret written after a sample's end, in an untimed copy: it is found only by an engine
/// that reads the text to its end, so a text without secrets proves its figure too.
const TAIL: &str =
    "\n\nDeployed with DEPLOY_TOKEN=ghp_Tq7Wm2Xc9Lr4Vb8Nz3Hs6Kd1Pf5Jy0Ga2Ue7 today.\n";

/// Fails the run unless `out` (`run` on the sample) shows the work was done: no planted
/// secret left, at least a marker per planted secret, and one marker more when the sample is
/// followed by [`TAIL`]. Markers are not counted exactly: a look may also mark text that only
/// resembles a secret, which is the engine's business, not the benchmark's.
fn prove(what: &str, sample: &Sample, out: &str, run: impl Fn(&str) -> String) {
    if let Some(secret) = PLANTED
        .iter()
        .chain(&SHAPE_SECRETS)
        .find(|s| out.contains(**s))
    {
        panic!("{what} on {}: {secret} was sent", sample.name);
    }
    let found = markers(out);
    // The clean text's figure stands for text with nothing to redact: a marker in it (it
    // once carried `Authorization: Bearer $API_TOKEN`, redacted 61 times) would time
    // redaction work the name denies.
    assert!(
        sample.name != "clean" || found == 0,
        "{what} on clean: {found} markers in a text meant to have nothing to redact"
    );
    assert!(
        found >= sample.secrets,
        "{what} on {}: {found} markers for {} planted secrets",
        sample.name,
        sample.secrets
    );
    let tailed = run(&format!("{}{TAIL}", sample.text));
    assert_eq!(
        markers(&tailed),
        found + 1,
        "{what} on {}: the secret after its end was not found",
        sample.name
    );
}

/// What a person receives of `text` on `caps`, the messages joined.
fn sent(text: &str, caps: &Capabilities) -> String {
    let prepared = prepare(text, caps, u32::MAX);
    assert!(prepared.truncation_notice.is_none(), "nothing is dropped");
    prepared.messages.concat()
}

/// Timing jobs run in interleaved rounds, each keeping its fastest time. This machine shows up
/// to half its CPU time stolen in phases lasting seconds: interference only ever adds time,
/// and interleaving makes every job see the same phases, so the figures compare fairly.
/// Criterion's groups above report the full distribution.
#[derive(Default)]
struct Rounds<'a> {
    jobs: Vec<(Box<dyn FnMut() + 'a>, u32)>,
}

impl<'a> Rounds<'a> {
    /// Adds a job; returns its index into [`Rounds::run`]'s result. Its first result goes to
    /// `check`, which panics unless it shows the work was done. Quick jobs are repeated
    /// within a sample so each sample lasts about a millisecond, well above timer resolution.
    fn add<T>(&mut self, mut f: impl FnMut() -> T + 'a, check: impl FnOnce(T)) -> usize {
        let start = Instant::now();
        let first = f();
        let once = start.elapsed().max(Duration::from_nanos(100));
        check(first);
        let reps = (Duration::from_millis(1).as_nanos() / once.as_nanos()).clamp(1, 10_000);
        self.jobs
            .push((Box::new(move || drop(black_box(f()))), reps as u32));
        self.jobs.len() - 1
    }

    /// Fastest time per run of each job over rounds filling about `budget` (at least 5).
    fn run(mut self, budget: Duration) -> Vec<Duration> {
        let mut best = vec![Duration::MAX; self.jobs.len()];
        let start = Instant::now();
        let mut rounds = 0;
        while rounds < 5 || (start.elapsed() < budget && rounds < 1000) {
            for ((job, reps), best) in self.jobs.iter_mut().zip(&mut best) {
                let t = Instant::now();
                for _ in 0..*reps {
                    job();
                }
                *best = (*best).min(t.elapsed() / *reps);
            }
            rounds += 1;
        }
        best
    }
}

fn mbps(t: Duration, n: usize) -> f64 {
    n as f64 / t.as_secs_f64() / 1e6
}

/// `ok` when every figure is within its budget, else how far over the worst one is: the
/// summary is read for this.
fn verdict(checks: &[(f64, f64)]) -> String {
    let worst = checks
        .iter()
        .map(|(figure, budget)| figure / budget)
        .fold(0.0, f64::max);
    if worst <= 1.0 {
        "ok".to_owned()
    } else {
        format!("OVER x{worst:.1}")
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `t` as a multiple of `floor`.
fn times(t: Duration, floor: Duration) -> f64 {
    t.as_secs_f64() / floor.as_secs_f64()
}

/// The component's size as built, shown beside the speed because it is a budget too
/// (docs/architecture.md#performance-budgets): host-shim's
/// build script embeds a release build of the guest, kept under its `out` directory; a
/// `--target wasm32-wasip2 --release` build of the guest alone is the fallback. The newest
/// file wins.
fn component() -> Option<(PathBuf, u64)> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let mut found = vec![target.join("wasm32-wasip2/release/guest.wasm")];
    for profile in fs::read_dir(&target).into_iter().flatten().flatten() {
        let builds = fs::read_dir(profile.path().join("build"))
            .into_iter()
            .flatten();
        for build in builds.flatten() {
            if build
                .file_name()
                .to_string_lossy()
                .starts_with("host-shim-")
            {
                found.push(build.path().join("out/guest.wasm"));
            }
        }
    }
    found
        .into_iter()
        .filter_map(|path| {
            let meta = fs::metadata(&path).ok()?;
            Some((meta.modified().ok()?, meta.len(), path))
        })
        .max()
        .map(|(_, len, path)| (path, len))
}

/// One table at the end, every figure beside its budget: the whole pipeline per text, profile
/// and size with the 1 MiB / 64 KiB ratio; redaction alone per text; the stages on the
/// secret-laden text; each adversarial shape at 64 KiB and 1 MiB, redacted and through the
/// pipeline; bare headings at 32 KiB; the component's size.
fn summary(_: &mut Criterion) {
    const PIPELINE_64K_MS: f64 = 0.8;
    const PIPELINE_FLOORS: f64 = 3.0;
    const REDACT_64K_MS: f64 = 0.15;
    const REDACT_FLOORS: f64 = 1.0;
    const RATIO: f64 = 16.0;
    const HEADINGS_32K_MS: f64 = 1.0;
    // The issue's budgets against the floor hold on realistic text with and without secrets.
    let floor_budgeted = |name: &str| matches!(name, "secrets" | "clean");
    let all_caps = profiles();
    let by_size: Vec<[Sample; 4]> = SIZES.iter().map(|(_, s)| texts(*s)).collect();
    let (secrets64, _) = realistic_reply(64 << 10, true);
    let redacted64 = redact(&secrets64).text;
    let rendered64: Vec<Vec<(String, usize)>> = all_caps
        .iter()
        .map(|(_, caps)| {
            let meter = Meter::for_source(caps.length_unit, caps.markup);
            split(
                &redacted64,
                caps.max_message_length as usize,
                meter,
                caps.markup,
            )
            .into_iter()
            .map(|p| (p.rendered.into_owned(), p.visible))
            .collect()
        })
        .collect();
    let shapes64 = shapes(64 << 10);
    let shapes1m = shapes(1 << 20);
    let headings32 = shapes(32 << 10).swap_remove(0).text;

    let mut rounds = Rounds::default();
    let redact_text = |t: &str| redact(t).text;
    let parsed = |sample: &Sample, reached: usize| {
        assert!(
            reached >= sample.text.trim_end().len(),
            "the parse of {} stopped at {reached}",
            sample.name
        )
    };
    // [text][profile][size]
    let pipeline_jobs: Vec<Vec<Vec<usize>>> = (0..4)
        .map(|t| {
            all_caps
                .iter()
                .map(|(profile, caps)| {
                    by_size
                        .iter()
                        .map(|texts| {
                            let sample = &texts[t];
                            rounds.add(
                                move || prepare(&sample.text, caps, u32::MAX),
                                |out| {
                                    let what = format!("the pipeline on {profile}");
                                    prove(&what, sample, &out.messages.concat(), |t| sent(t, caps))
                                },
                            )
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    // [text][size]
    let redact_jobs: Vec<Vec<usize>> = (0..4)
        .map(|t| {
            by_size
                .iter()
                .map(|texts| {
                    let sample = &texts[t];
                    rounds.add(
                        move || redact(&sample.text),
                        |out| prove("redaction", sample, &out.text, redact_text),
                    )
                })
                .collect()
        })
        .collect();
    // [text], at 64 KiB: the floor each text's figures are read against.
    let text_floors: Vec<usize> = by_size[1]
        .iter()
        .map(|sample| rounds.add(move || parse_only(&sample.text), |r| parsed(sample, r)))
        .collect();
    // [profile] -> [split, split+render, chunk]
    let stage_jobs: Vec<[usize; 3]> = all_caps
        .iter()
        .zip(&rendered64)
        .map(|((_, caps), rendered)| {
            let meter = Meter::for_source(caps.length_unit, caps.markup);
            let limit = caps.max_message_length as usize;
            let redacted = &redacted64;
            let pieces = |n: usize| assert!(n > 1, "the split made {n} pieces");
            [
                rounds.add(
                    move || split(redacted, limit, meter, Markup::Markdown).len(),
                    pieces,
                ),
                rounds.add(
                    move || split(redacted, limit, meter, caps.markup).len(),
                    pieces,
                ),
                // Includes copying the pieces, which chunking takes by value.
                rounds.add(
                    move || {
                        rendered
                            .clone()
                            .into_iter()
                            .map(|(r, v)| {
                                chunk_rendered(r, v, limit, caps.length_unit, caps.markup).len()
                            })
                            .sum::<usize>()
                    },
                    move |n| assert!(n >= rendered.len(), "{n} chunks"),
                ),
            ]
        })
        .collect();
    // [shape] -> (parser alone at 64 KiB, at 1 MiB): the floor the shape's ratio is read against.
    let shape_floors: Vec<(usize, usize)> = shapes64
        .iter()
        .zip(&shapes1m)
        .map(|(small, big)| {
            (
                rounds.add(move || parse_only(&small.text), |r| parsed(small, r)),
                rounds.add(move || parse_only(&big.text), |r| parsed(big, r)),
            )
        })
        .collect();
    // [shape] -> (redaction at 64 KiB, at 1 MiB)
    let shape_redactions: Vec<(usize, usize)> = shapes64
        .iter()
        .zip(&shapes1m)
        .map(|(small, big)| {
            (
                rounds.add(
                    move || redact(&small.text),
                    |out| prove("redaction", small, &out.text, redact_text),
                ),
                rounds.add(
                    move || redact(&big.text),
                    |out| prove("redaction", big, &out.text, redact_text),
                ),
            )
        })
        .collect();
    // [shape][profile] -> (64 KiB, 1 MiB)
    let shape_jobs: Vec<Vec<(usize, usize)>> = shapes64
        .iter()
        .zip(&shapes1m)
        .map(|(small, big)| {
            all_caps
                .iter()
                .map(|(profile, caps)| {
                    let what = format!("the pipeline on {profile}");
                    (
                        rounds.add(
                            move || prepare(&small.text, caps, u32::MAX),
                            |out| prove(&what, small, &out.messages.concat(), |t| sent(t, caps)),
                        ),
                        rounds.add(
                            move || prepare(&big.text, caps, u32::MAX),
                            |out| prove(&what, big, &out.messages.concat(), |t| sent(t, caps)),
                        ),
                    )
                })
                .collect()
        })
        .collect();
    let heading_jobs: Vec<usize> = all_caps
        .iter()
        .map(|(_, caps)| {
            let text = &headings32;
            rounds.add(
                move || prepare(text, caps, u32::MAX),
                |out| assert!(out.messages.len() > 1, "headings made {out:?}"),
            )
        })
        .collect();
    let t = rounds.run(Duration::from_secs(8));

    println!("\nsummary (fastest of interleaved rounds; each figure beside its budget)");
    println!(
        "whole pipeline: 64KiB ≤ {PIPELINE_64K_MS} ms, and ≤ {PIPELINE_FLOORS}x the parser floor of the same text (secrets, clean); 1MiB ≤ {RATIO}x 64KiB\n  {:9} {:9} {:>10} {:>10} {:>10} {:>8} {:>8} {:>12} {:>10}",
        "text", "profile", "4KiB", "64KiB", "1MiB", "MB/s", "x floor", "64KiB", "ratio"
    );
    for (t_i, per_profile) in pipeline_jobs.iter().enumerate() {
        let sample = &by_size[1][t_i];
        let floor = t[text_floors[t_i]];
        for ((profile, _), jobs) in all_caps.iter().zip(per_profile) {
            let [small, mid, big] = [jobs[0], jobs[1], jobs[2]].map(|j| t[j]);
            let ratio = big.as_secs_f64() / mid.as_secs_f64();
            let floors = times(mid, floor);
            let mut budgets = vec![(ms(mid), PIPELINE_64K_MS)];
            if floor_budgeted(sample.name) {
                budgets.push((floors, PIPELINE_FLOORS));
            }
            println!(
                "  {:9} {:9} {:>10.3?} {:>10.3?} {:>10.3?} {:>8.0} {:>8.2} {:>12} {:>5.1} {}",
                sample.name,
                profile,
                small,
                mid,
                big,
                mbps(mid, sample.text.len()),
                floors,
                verdict(&budgets),
                ratio,
                verdict(&[(ratio, RATIO)]),
            );
        }
    }
    let secret_redact = t[redact_jobs[1][1]];
    println!(
        "redaction alone (markdown's, with the looks): 64KiB ≤ {REDACT_64K_MS} ms and ≤ {REDACT_FLOORS}x the parser floor of the same text (secrets, clean); trigger words ≤ the secret-laden time; 1MiB ≤ {RATIO}x"
    );
    for (t_i, jobs) in redact_jobs.iter().enumerate() {
        let [small, mid, big] = [jobs[0], jobs[1], jobs[2]].map(|j| t[j]);
        let sample = &by_size[1][t_i];
        let floor = t[text_floors[t_i]];
        let floors = times(mid, floor);
        let budget = match sample.name {
            "triggers" => verdict(&[(ms(mid), ms(secret_redact))]),
            name if floor_budgeted(name) => {
                verdict(&[(ms(mid), REDACT_64K_MS), (floors, REDACT_FLOORS)])
            }
            _ => "-".to_owned(),
        };
        let ratio = big.as_secs_f64() / mid.as_secs_f64();
        println!(
            "  {:9} 4KiB {small:>10.3?}  64KiB {mid:>10.3?} {:>6.0} MB/s  x floor {floors:>6.2} {budget:>10}  1MiB {big:>10.3?}  ratio {ratio:>5.1} {}  ({} markers)",
            sample.name,
            mbps(mid, sample.text.len()),
            verdict(&[(ratio, RATIO)]),
            sample.secrets,
        );
    }
    println!("stages on the 64KiB secret-laden text (redaction above)");
    for ((profile, _), [spl, spl_render, chk]) in all_caps.iter().zip(&stage_jobs) {
        println!(
            "  {profile:9} split {:>10.3?}  render {:>10.3?}  chunk {:>10.3?}",
            t[*spl],
            t[*spl_render].saturating_sub(t[*spl]),
            t[*chk],
        );
    }
    println!("  parser floors, pulldown-cmark alone at 64KiB:");
    for (sample, floor) in by_size[1].iter().zip(&text_floors) {
        println!("    {:9} {:>10.3?}", sample.name, t[*floor]);
    }
    println!(
        "adversarial shapes: redaction alone, then the whole pipeline per profile: 64KiB / 1MiB and ratio, 1MiB ≤ {RATIO}x 64KiB; then pulldown-cmark alone"
    );
    for (((sample, per_profile), (floor64, floor1m)), (redact64, redact1m)) in shapes64
        .iter()
        .zip(&shape_jobs)
        .zip(&shape_floors)
        .zip(&shape_redactions)
    {
        let cell = |name: &str, small: usize, big: usize| {
            let ratio = times(t[big], t[small]);
            format!(
                "{name} {:>9.3?} / {:>9.3?} x{ratio:<5.1} {:6}",
                t[small],
                t[big],
                verdict(&[(ratio, RATIO)])
            )
        };
        let cells: Vec<String> = std::iter::once(cell("redact", *redact64, *redact1m))
            .chain(
                all_caps
                    .iter()
                    .zip(per_profile)
                    .map(|((profile, _), (small, big))| cell(profile, *small, *big)),
            )
            .collect();
        println!(
            "  {:15} {} || parser {:>9.3?} / {:>9.3?} x{:.1}",
            sample.name,
            cells.join(" | "),
            t[*floor64],
            t[*floor1m],
            times(t[*floor1m], t[*floor64]),
        );
    }
    let cells: Vec<String> = all_caps
        .iter()
        .zip(&heading_jobs)
        .map(|((profile, _), j)| {
            format!(
                "{profile} {:>9.3?} {}",
                t[*j],
                verdict(&[(ms(t[*j]), HEADINGS_32K_MS)])
            )
        })
        .collect();
    println!(
        "  bare headings 32KiB ≤ {HEADINGS_32K_MS} ms: {}",
        cells.join(" | ")
    );
    match component() {
        Some((path, len)) => println!(
            "component: {len} bytes ({:.2} MiB), {}",
            len as f64 / f64::from(1 << 20),
            path.display()
        ),
        None => {
            println!("component: not built yet (`cargo build -p host-shim` builds and embeds it)")
        }
    }
}

criterion_group!(benches, pipeline, redaction, stages, adversarial, summary);
criterion_main!(benches);
