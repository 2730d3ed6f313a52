//! The process's log output (docs/operations.md#logs): one `tracing` subscriber on stderr,
//! human lines on a terminal and JSON lines elsewhere (a journal, a container, a file) or
//! when `PI_BOT_CONNECT_LOG_FORMAT` asks, filtered by `RUST_LOG` in its usual syntax.
//! Without `RUST_LOG`, bot-connect's warnings and errors show, and its info lines too with
//! `PI_BOT_CONNECT_DEBUG=1` (what the hand-written sink this replaced printed).

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// The variable that picks the format (`json` or `text`).
pub const FORMAT_VAR: &str = "PI_BOT_CONNECT_LOG_FORMAT";

/// How lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One line a person reads, with the spans in front (`session{key=…}: …`).
    Text,
    /// One JSON object a line, with the spans listed (for journald, Loki, jq).
    Json,
}

/// What is wrong with the log settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogSettingsError {
    /// The format variable holds something else.
    #[error("{FORMAT_VAR}={0:?} is not a log format; use json or text (or unset it)")]
    Format(String),
    /// `RUST_LOG` does not parse.
    #[error(
        "RUST_LOG={value:?} is not a filter ({why}); write it like RUST_LOG=warn or RUST_LOG=bot_connect=info"
    )]
    Filter {
        /// The value.
        value: String,
        /// What the parser said.
        why: String,
    },
}

/// The format `var` asks for, else JSON unless stderr is a terminal.
pub fn format(var: Option<&str>, stderr_is_terminal: bool) -> Result<Format, LogSettingsError> {
    match var.map(str::trim) {
        None | Some("") => Ok(if stderr_is_terminal {
            Format::Text
        } else {
            Format::Json
        }),
        Some(v) if v.eq_ignore_ascii_case("json") => Ok(Format::Json),
        Some(v) if v.eq_ignore_ascii_case("text") => Ok(Format::Text),
        Some(other) => Err(LogSettingsError::Format(other.to_owned())),
    }
}

/// The filter: `RUST_LOG` when set, else warnings (and bot-connect's info lines with
/// `debug`).
pub fn filter(rust_log: Option<&str>, debug: bool) -> Result<EnvFilter, LogSettingsError> {
    let directives = match rust_log.map(str::trim) {
        Some(value) if !value.is_empty() => value.to_owned(),
        _ if debug => format!("warn,{}=info", super::logging::TARGET),
        _ => "warn".to_owned(),
    };
    EnvFilter::try_new(&directives).map_err(|e| LogSettingsError::Filter {
        value: directives,
        why: e.to_string(),
    })
}

/// Installs the subscriber for the process (once; a second call changes nothing).
pub fn install(format: Format, filter: EnvFilter, ansi: bool) {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        Format::Text => builder.with_ansi(ansi).try_init(),
        Format::Json => builder
            .json()
            .with_current_span(false)
            .with_span_list(true)
            .try_init(),
    };
}

/// An in-memory writer, for tests that read what was logged.
#[derive(Debug, Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut bytes) = self.0.lock() {
            bytes.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The subscriber [`install`] would make, writing to `into` and filtered by `directives`
/// (for `tracing::subscriber::set_default` in tests).
pub fn subscriber(
    format: Format,
    directives: &str,
    into: Captured,
) -> Box<dyn tracing::Subscriber + Send + Sync> {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(directives))
        .with_writer(into)
        .with_ansi(false);
    match format {
        Format::Text => Box::new(builder.finish()),
        Format::Json => Box::new(
            builder
                .json()
                .with_current_span(false)
                .with_span_list(true)
                .finish(),
        ),
    }
}

/// Makes [`subscriber`] this thread's default until the guard drops (async tests on a
/// current-thread runtime, whose tasks all run on it).
pub fn capture_on_this_thread(
    format: Format,
    directives: &str,
    into: Captured,
) -> tracing::subscriber::DefaultGuard {
    tracing::subscriber::set_default(subscriber(format, directives, into))
}

/// What `f` logs through `tracing` on this thread, as `format` writes it.
pub fn capture(format: Format, directives: &str, f: impl FnOnce()) -> String {
    let captured = Captured::default();
    tracing::subscriber::with_default(subscriber(format, directives, captured.clone()), f);
    captured.text()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_unless_on_a_terminal_or_asked() {
        assert_eq!(format(None, true), Ok(Format::Text));
        assert_eq!(format(None, false), Ok(Format::Json));
        assert_eq!(format(Some("JSON"), true), Ok(Format::Json));
        assert_eq!(format(Some("text"), false), Ok(Format::Text));
        let error = format(Some("yaml"), true).unwrap_err().to_string();
        assert!(error.contains("use json or text"), "{error}");
    }

    #[test]
    fn a_bad_rust_log_is_refused_with_what_to_write() {
        let error = filter(Some("bot_connect=loud"), false)
            .unwrap_err()
            .to_string();
        assert!(error.contains("RUST_LOG=bot_connect=info"), "{error}");
        assert!(filter(None, true).is_ok());
    }
}
