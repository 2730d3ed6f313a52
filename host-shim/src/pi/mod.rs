//! The pi coding agent's two ways in: headless RPC (`rpc`, `rpc_agent`, `turns`) and the
//! extension's link (`link`, `attach`, `json_lines`).

pub mod attach;
pub mod json_lines;
pub mod link;
pub mod rpc;
pub mod rpc_agent;
pub mod session_commands;
pub mod turns;
