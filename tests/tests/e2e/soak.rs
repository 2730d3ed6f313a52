//! The fault soak, short (docs/architecture.md#how-it-is-tested): a few sessions with faults at a
//! high rate, so every kind of fault is hit in CI. The long run is `tests/examples/soak.rs` (see
//! the README).

use crate::common::soak;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_faults_nothing_is_lost_duplicated_or_leaked() {
    let figures = soak::run(soak::SoakConfig {
        sessions: 6,
        prompts: 24,
        fault_rate: 0.6,
        seed: 17,
    })
    .await
    .expect("the soak runs");
    println!("{}", figures.report());
    for kind in soak::FAULTS {
        assert!(
            figures.faults.get(kind).copied().unwrap_or(0) > 0,
            "the short soak must hit every fault kind; {kind} was not: {}",
            figures.report()
        );
    }
    assert!(figures.traps_recovered > 0, "{}", figures.report());
    assert_eq!(
        (
            figures.lost,
            figures.duplicated,
            figures.prompted_twice,
            figures.out_of_order,
            figures.leaked
        ),
        (0, 0, 0, 0, 0),
        "{}\nproblems: {:#?}",
        figures.report(),
        figures.problems
    );
    assert_eq!(
        figures.delivered + figures.reported,
        figures.prompts,
        "{}",
        figures.report()
    );
}
