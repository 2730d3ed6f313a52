//! bot-connect host: runs the bridge component in a sandbox, one instance per agent
//! session, and serves its imports (transports, agent, terminal, state, time,
//! randomness, locks, logs).

pub mod agent;
pub mod audit;
pub mod clock;
pub mod config_files;
pub mod convert;
pub mod factory;
pub mod imports;
pub mod lock;
pub mod logging;
pub mod paths;
pub mod runtime;
pub mod session;
pub mod state_file;
pub mod ui;
pub mod work;
