//! bot-connect host: runs the bridge component in a sandbox, one instance per agent
//! session, and serves its imports (transports, agent, terminal, state, time,
//! randomness, locks, logs).

pub mod agent;
pub mod agent_link;
pub mod attach;
pub mod attach_command;
pub mod audit;
pub mod bindings;
pub mod broker;
pub mod clock;
pub mod cluster;
pub mod cluster_command;
pub mod config_files;
pub mod convert;
pub mod explain;
pub mod factory;
pub mod imports;
pub mod json_lines;
pub mod lock;
pub mod logging;
pub mod offline;
pub mod pairing_budget;
pub mod paths;
pub mod pi_rpc;
pub mod pi_rpc_agent;
pub mod pi_turns;
pub mod runtime;
pub mod serve_command;
pub mod session;
pub mod state_file;
pub mod terminal;
pub mod tool_paths;
pub mod transcript;
pub mod ui;
pub mod work;
