//! bot-connect host: the native side that keeps time, files, locks and secrets for the guest.

/// Config discovery: which config files exist and their raw text (the guest validates them).
pub mod config_files;
/// Single-instance lock files, one per bot credential (I15).
pub mod lock;
/// Where the config, state and lock files live, resolved from an injected environment.
pub mod paths;
/// The state file shared by all sessions, one opaque document per session key (I17).
pub mod state_file;
