//! What the host benches share.

pub mod broker_world;
pub mod heap;

/// Resident memory of this process, in KiB (Linux `/proc/self/statm`; 0 elsewhere).
pub fn resident_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4
}

/// This process's proportional set size in KiB (Linux `/proc/self/smaps_rollup`, `Pss`; 0
/// elsewhere): resident memory with each page shared by several mappings counted once in
/// all. RSS counts a page of the component's image once per instance that reads it, though
/// every instance maps the same page.
pub fn proportional_kib() -> u64 {
    smaps_rollup("Pss")
}

/// Resident pages of this process that no other mapping shares, in KiB (`Private_Clean` +
/// `Private_Dirty`): what each instance has of its own.
pub fn private_kib() -> u64 {
    smaps_rollup("Private_Clean") + smaps_rollup("Private_Dirty")
}

fn smaps_rollup(field: &str) -> u64 {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    rollup
        .lines()
        .find_map(|line| {
            let (name, rest) = line.split_once(':')?;
            (name == field).then(|| rest.trim().trim_end_matches("kB").trim().parse().ok())?
        })
        .unwrap_or(0)
}
