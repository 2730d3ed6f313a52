//! The component's sandbox: the wasmtime runtime and its import audit, the host side of
//! every WIT import, one session's task and its transports, and the conversions between WIT and native types.

pub mod audit;
pub mod convert;
pub mod freed_memory;
pub mod hibernation;
pub mod imports;
pub mod pairing_budget;
pub mod runtime;
pub mod session;
pub mod session_transports;
pub mod tool_paths;
