//! The local side of a session: the terminal, the UI port, logging, the clock, and what
//! git says about the working directory (`work`).

pub mod clock;
pub mod log_output;
pub mod logging;
pub mod terminal;
pub mod ui;
pub mod work;
