//! One module per subcommand; what several share lives in `process`.

pub mod attach;
pub mod cluster;
pub mod cluster_admin;
pub mod control;
pub mod doctor;
pub mod inspect;
pub mod offline;
pub mod operator;
pub mod preview;
pub mod process;
pub mod replay;
pub mod run;
pub mod serve;
