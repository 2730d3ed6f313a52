//! `host-shim doctor`: config, state file, locks and the sandbox checked without starting
//! a transport.

use std::sync::Arc;

use crate::commands::offline::{self, OfflineSetup};
use crate::commands::process::{default_session_key, setup};
use crate::local::clock::SystemClock;

/// `host-shim doctor`: one report on stdout; exit status 1 when it found errors.
pub async fn run(
    component: &[u8],
    session: Option<String>,
) -> anyhow::Result<std::process::ExitCode> {
    let setup = setup()?;
    let report = offline::doctor(
        OfflineSetup {
            component,
            paths: &setup.paths,
            discovery: &setup.discovery,
            key: session.unwrap_or_else(|| default_session_key(&setup.cwd)),
            cwd: setup.cwd.clone(),
            clock: Arc::new(SystemClock),
        },
        &|name| std::env::var(name).ok(),
    )
    .await?;
    println!("{}", report.text);
    if report.errors == 0 {
        Ok(std::process::ExitCode::SUCCESS)
    } else {
        println!(
            "doctor found {} error(s); see the lines marked error above.",
            report.errors
        );
        Ok(std::process::ExitCode::FAILURE)
    }
}
