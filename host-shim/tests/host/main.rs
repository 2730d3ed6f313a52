//! The host-shim tests, in one binary: the `host-shim` binary as a person runs it (a
//! terminal, `serve` with the real pi and on a real nats-server, `attach`), the terminal
//! transport, and the hash-seed adapter; what they share is in [`common`].

mod common;

mod cli;
mod cluster_forget_cli;
mod hash_seed_adapter;
mod pi_attach_process;
mod rooms;
mod serve_cluster;
mod serve_kill;
mod serve_with_pi;
mod terminal;
mod terminal_conformance;
