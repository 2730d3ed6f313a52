//! The long fault soak (docs/architecture.md#how-it-is-tested): as many sessions as asked, each the
//! real component in the real host with a fake messenger and the demo agent, prompted under random
//! faults. Prints the figures and exits 1 if anything was lost, duplicated, reordered or leaked.
//!
//! ```sh
//! cargo run --release -p bot-connect-tests --example soak -- --sessions 1000 --prompts 20
//! ```
//!
//! Options: `--sessions N` (default 1000), `--prompts N` per session (20), `--fault-rate F`
//! (0.3), `--seed S` (the time; printed, so a failing run can be repeated).

#[path = "../tests/e2e/common/soak.rs"]
mod soak;

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut config = soak::SoakConfig {
        sessions: 1000,
        prompts: 20,
        fault_rate: 0.3,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs()),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let (flag, value) = match pair {
            [flag, value] => (flag.as_str(), value.as_str()),
            _ => {
                eprintln!("soak: {} needs a value", pair[0]);
                return ExitCode::from(2);
            }
        };
        let parsed = match flag {
            "--sessions" => value.parse().map(|v| config.sessions = v).is_ok(),
            "--prompts" => value.parse().map(|v| config.prompts = v).is_ok(),
            "--fault-rate" => value.parse().map(|v| config.fault_rate = v).is_ok(),
            "--seed" => value.parse().map(|v| config.seed = v).is_ok(),
            _ => {
                eprintln!(
                    "soak: unknown option {flag} (--sessions, --prompts, --fault-rate, --seed)"
                );
                return ExitCode::from(2);
            }
        };
        if !parsed {
            eprintln!("soak: {flag} {value:?} is not a number");
            return ExitCode::from(2);
        }
    }
    println!(
        "soak: seed {}, {} sessions × {} prompts, fault rate {}",
        config.seed, config.sessions, config.prompts, config.fault_rate
    );
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("soak: cannot start the async runtime: {error}");
            return ExitCode::from(2);
        }
    };
    let figures = match runtime.block_on(soak::run(config)) {
        Ok(figures) => figures,
        Err(error) => {
            eprintln!("soak: could not set up: {error:#}");
            return ExitCode::from(2);
        }
    };
    println!("{}", figures.report());
    for problem in &figures.problems {
        println!("problem: {problem}");
    }
    let clean = figures.lost == 0
        && figures.duplicated == 0
        && figures.prompted_twice == 0
        && figures.out_of_order == 0
        && figures.leaked == 0;
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
