//! What the host benches share.

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
