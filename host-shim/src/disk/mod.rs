//! What the host keeps on disk: the state file, lock files, where files live, and the
//! config files it discovers.

pub mod config_files;
pub mod inbox;
pub mod lock;
pub mod outgoing;
pub mod paths;
pub mod state_db;
pub mod state_file;
pub mod state_store;
