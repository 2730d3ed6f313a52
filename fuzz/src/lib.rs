//! Property checks for every parser of untrusted input (docs/architecture.md#how-it-is-tested).
//!
//! Each check is a plain function `fn(&[u8])` that panics only when a property is violated,
//! never because the input is bad: a panic in a parser on bad input is itself the
//! violation (C5). The cargo-fuzz targets in `cargo-fuzz/` call these functions and nothing
//! else, and `tests/corpus.rs` replays every committed corpus and regression file through
//! them, so `cargo test --workspace` catches a regression without nightly or libFuzzer.

pub mod config;
pub mod grpc;
#[cfg(feature = "host")]
pub mod lines;
pub mod media;
pub mod normalizers;
pub mod outbound;
pub mod secrets;
pub mod state;

/// A property check: panics when the property does not hold for `data`.
pub type Check = fn(&[u8]);

/// Every target by name, the name being its corpus directory (`corpus/<name>/`), its
/// regression directory (`regressions/<name>/`) and its cargo-fuzz target.
pub const TARGETS: &[(&str, Check)] = &[
    ("normalize_telegram", normalizers::telegram),
    ("normalize_discord", normalizers::discord),
    ("normalize_slack", normalizers::slack),
    ("normalize_robo_claw", normalizers::robo_claw),
    ("media_names", media::media_names),
    ("grpc_chat_message", grpc::chat_message),
    ("config", config::config),
    ("state", state::state),
    ("outbound", outbound::outbound),
    #[cfg(feature = "host")]
    ("agent_link_line", lines::agent_link_line),
    #[cfg(feature = "host")]
    ("pi_rpc_line", lines::pi_rpc_line),
    #[cfg(feature = "host")]
    ("json_lines", lines::json_lines),
];
