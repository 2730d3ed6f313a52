//! `speech`: voice notes to text, by the engine the bridge chose (local/transcribe.rs).

use std::time::Duration;

use wasmtime::component::HasData;

use super::{Imports, SessionContext};
use crate::transcript::line::Event;
use crate::transcript::script::Script;
use crate::wit::speech;

/// The speech interface's view, for the linker: the tape alone (a replay answers with the
/// recorded transcript and runs no engine).
pub struct SpeechImports;

impl HasData for SpeechImports {
    type Data<'a> = Imports<'a, ()>;
}

impl SessionContext {
    /// The speech interface's view of this session.
    pub fn speech_imports(&mut self) -> Imports<'_, ()> {
        imports!(self, ())
    }
}

impl speech::Host for Imports<'_, ()> {
    async fn transcribe(
        &mut self,
        engine: speech::Engine,
        audio: speech::Audio,
        timeout_ms: u32,
    ) -> Result<String, String> {
        // The audio's type and size, never its bytes; the engine's kind, never its URL or
        // the key's variable.
        self.tape.record(|| Event::Transcribe {
            engine: match &engine {
                speech::Engine::Http(_) => "http".into(),
                speech::Engine::Command(_) => "command".into(),
            },
            media_type: audio.media_type.clone(),
            bytes: audio.data.len(),
        });
        let live = async move {
            let env = |name: &str| std::env::var(name).ok();
            crate::local::transcribe::transcribe(
                engine,
                audio,
                Duration::from_millis(u64::from(timeout_ms)),
                &env,
            )
            .await
        };
        self.tape
            .answer(Script::transcribed, live, |result| Event::Transcribed {
                result: result.clone(),
            })
            .await
    }
}
