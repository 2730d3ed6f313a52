//! The local side of a session: the terminal, the UI port, logging, the clock, what
//! git says about the working directory (`work`), and speech to text (`transcribe`).

pub mod clock;
pub mod log_output;
pub mod logging;
pub mod terminal;
pub mod transcribe;
pub mod ui;
pub mod work;
