//! `log`: the bridge's structured log lines, into the host's log sink.

use super::SessionHost;
use crate::local::logging::LogLine;
use crate::transcript::line::Event;
use crate::wit::{log, types};

impl log::Host for SessionHost {
    fn write(
        &mut self,
        level: types::Level,
        event: String,
        fields: Vec<log::Field>,
    ) -> wasmtime::Result<()> {
        let fields: Vec<(String, String)> = fields.into_iter().map(|f| (f.key, f.value)).collect();
        self.note(|| Event::Log {
            level,
            event: event.clone(),
            fields: fields.clone(),
        });
        self.ctx.log.write(
            &self.ctx.key,
            LogLine {
                level,
                event,
                fields,
            },
        );
        Ok(())
    }
}
