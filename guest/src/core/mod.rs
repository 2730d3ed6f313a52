//! Pure rules: every function here is deterministic over its arguments.

pub mod blocks;
pub mod chunk;
pub mod commands;
pub mod config;
pub mod digest;
pub mod explain;
pub mod local;
pub mod notices;
pub mod outbound;
pub mod pairing;
pub mod progress;
pub mod rate_limit;
pub mod redact;
pub mod render;
pub mod router;
pub mod scan;
pub mod state;
pub mod text;
pub mod todo;
pub mod tool_policy;
pub mod work;
