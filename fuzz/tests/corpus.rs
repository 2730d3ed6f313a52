//! Replays every committed seed (`corpus/<target>/`) and crash regression
//! (`regressions/<target>/`) through its property check, so a regression fails
//! `cargo test` on stable, without libFuzzer.

use std::fs;
use std::path::{Path, PathBuf};

use bot_connect_fuzz::TARGETS;
use bot_connect_fuzz::outbound::{MARKUPS, PipelineInput, check};

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_and_regression_file_passes_its_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failures = Vec::new();
    for (name, check) in TARGETS {
        let seeds = files(&root.join("corpus").join(name));
        assert!(!seeds.is_empty(), "target {name} has no seed corpus");
        for path in seeds
            .iter()
            .chain(&files(&root.join("regressions").join(name)))
        {
            let data = fs::read(path).expect("a readable corpus file");
            if std::panic::catch_unwind(|| check(&data)).is_err() {
                failures.push(path.display().to_string());
            }
        }
    }
    assert!(failures.is_empty(), "property violated by: {failures:#?}");
}

/// A pipeline finding is about what a renderer or a cut does to a text, and each markup
/// renders and cuts differently: every pipeline seed and regression is replayed under
/// every markup, so a fix for one platform is checked on all four. (The Slack renderer's
/// entity join was found this way in review: each regression was first met on one markup.)
#[test]
fn every_pipeline_file_passes_under_every_markup() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failures = Vec::new();
    let mut checked = 0;
    for path in files(&root.join("corpus").join("outbound"))
        .iter()
        .chain(&files(&root.join("regressions").join("outbound")))
    {
        let data = fs::read(path).expect("a readable corpus file");
        let Ok(input) = PipelineInput::read(&data) else {
            continue;
        };
        for markup in MARKUPS {
            let other = PipelineInput {
                markup,
                text: input.text.clone(),
                ..input
            };
            checked += 1;
            if std::panic::catch_unwind(|| check(&other)).is_err() {
                failures.push(format!("{} as {markup:?}", path.display()));
            }
        }
    }
    assert!(
        checked >= 4 * 40,
        "only {checked} pipeline inputs were read"
    );
    assert!(failures.is_empty(), "property violated by: {failures:#?}");
}

#[test]
fn every_corpus_directory_names_a_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for kind in ["corpus", "regressions"] {
        for dir in fs::read_dir(root.join(kind)).into_iter().flatten() {
            let name = dir.expect("a readable directory entry").file_name();
            let name = name.to_string_lossy();
            assert!(
                TARGETS.iter().any(|(target, _)| *target == name),
                "{kind}/{name} is not a target: its files are never replayed"
            );
        }
    }
}
