//! bot-connect host: runs the bridge component in a sandbox, one instance per agent
//! session, and serves its imports (transports, agent, terminal, state, time,
//! randomness, locks, logs).

pub mod agent;
pub mod broker;
pub mod cluster;
pub mod commands;
pub mod disk;
pub mod factory;
pub mod local;
pub mod native_guest;
pub mod ops;
pub mod pi;
pub mod sandbox;
pub mod transcript;
pub mod wit;
