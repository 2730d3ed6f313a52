//! `log`: the bridge's structured log lines, into the host's log sink.

use wasmtime::component::HasData;

use super::{Imports, SessionContext};
use crate::local::logging::{LogLine, LogSink};
use crate::transcript::line::Event;
use crate::wit::{log, types};

/// What the log's calls may touch: the host's log sink, under this session's key.
pub struct LogPart<'a> {
    key: &'a str,
    log: &'a dyn LogSink,
}

/// The log interface's view, for the linker.
pub struct LogImports;

impl HasData for LogImports {
    type Data<'a> = Imports<'a, LogPart<'a>>;
}

impl SessionContext {
    /// The log interface's view of this session.
    pub fn log_imports(&mut self) -> Imports<'_, LogPart<'_>> {
        imports!(
            self,
            LogPart {
                key: &self.key,
                log: &*self.log,
            }
        )
    }
}

impl log::Host for Imports<'_, LogPart<'_>> {
    fn write(
        &mut self,
        level: types::Level,
        event: String,
        fields: Vec<log::Field>,
    ) -> wasmtime::Result<()> {
        let fields: Vec<(String, String)> = fields.into_iter().map(|f| (f.key, f.value)).collect();
        self.tape.record(|| Event::Log {
            level,
            event: event.clone(),
            fields: fields.clone(),
        });
        self.part.log.write(
            self.part.key,
            LogLine {
                level,
                event,
                fields,
            },
        );
        Ok(())
    }
}
