//! `host-shim inspect`: the component's imports and exports, each import with the reason
//! it is allowed, and a refusal when one is not.

use anyhow::bail;

use crate::sandbox::audit::{self, Verdict};
use crate::sandbox::runtime::{Limits, Runtime};

/// Prints the capability audit of `component`; fails when an import is outside it.
pub fn run(component: &[u8]) -> anyhow::Result<()> {
    let runtime = Runtime::new(component, Limits::default())?;
    let ty = runtime.component_type();
    let engine = runtime.engine();
    println!("imports (everything the bridge can reach):");
    let mut unexpected = 0;
    for import in audit::imports(&ty, engine) {
        let why = match &import.verdict {
            Verdict::Bridge => "bridge world".to_string(),
            Verdict::Wasi(why) => format!("std: {why}"),
            Verdict::Unexpected => {
                unexpected += 1;
                "NOT EXPECTED: a capability outside the bridge world".to_string()
            }
        };
        println!("  {}  [{why}]", import.name);
        if !import.functions.is_empty() {
            println!("      {}", import.functions.join(", "));
        }
    }
    println!("exports:");
    for (name, functions) in audit::exports(&ty, engine) {
        println!("  {name}");
        if !functions.is_empty() {
            println!("      {}", functions.join(", "));
        }
    }
    println!(
        "grants: no filesystem preopens, no environment variables, no arguments, no sockets, \
         empty stdin; stderr is captured for trap reports"
    );
    if unexpected > 0 {
        bail!("{unexpected} import(s) outside the audited set; this component must not run");
    }
    Ok(())
}
