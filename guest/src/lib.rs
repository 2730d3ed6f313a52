//! The bot-connect bridge.
//!
//! `core` holds pure functions over plain data (no clock, no randomness, no I/O);
//! `bridge` orchestrates them and reaches the world only through the [`host::Host`]
//! trait. Built for `wasm32-wasip2`, `wasm.rs` wires that trait to the WIT imports and
//! exports the `session` interface; built natively, the same code runs under tests and
//! benchmarks with a fake host.

pub mod bridge;
pub mod core;
pub mod host;
pub mod keys;
pub mod model;

#[cfg(target_arch = "wasm32")]
mod wasm;
