//! `rng`: bytes from the operating system's secure source.

use wasmtime::component::HasData;

use super::{Imports, SessionContext};
use crate::transcript::line::Event;
use crate::transcript::script::hex_encode;
use crate::transcript::scrub::RNG_KEEP_MIN;
use crate::wit::rng;

/// The rng interface's view, for the linker: the tape alone (a replay answers with the
/// recorded bytes).
pub struct RngImports;

impl HasData for RngImports {
    type Data<'a> = Imports<'a, ()>;
}

impl SessionContext {
    /// The rng interface's view of this session.
    pub fn rng_imports(&mut self) -> Imports<'_, ()> {
        imports!(self, ())
    }
}

impl rng::Host for Imports<'_, ()> {
    fn random_bytes(&mut self, len: u32) -> wasmtime::Result<Vec<u8>> {
        // Not an `answer_now`: a failed source traps the call, and a trap has no answer to
        // note.
        let bytes = match self.tape.script.as_deref_mut() {
            Some(script) => script.rng(len.min(4096)),
            None => random_bytes_live(len)?,
        };
        // A code is made from short draws: those bytes never reach a transcript, or the
        // code could be rebuilt from it.
        self.tape.record(|| Event::Rng {
            len,
            bytes: (len >= RNG_KEEP_MIN).then(|| hex_encode(&bytes)),
        });
        Ok(bytes)
    }
}

/// Bytes from the operating system's secure source.
fn random_bytes_live(len: u32) -> wasmtime::Result<Vec<u8>> {
    // Pairing codes need at most a few dozen bytes; a larger request is a guest bug
    // and must not become a host allocation the guest controls.
    let mut bytes = vec![0u8; len.min(4096) as usize];
    // Without an OS random source no code would be safe: trap the call rather than
    // hand out a predictable code.
    getrandom::fill(&mut bytes).map_err(|e| {
        wasmtime::Error::msg(format!("the operating system's random source failed: {e}"))
    })?;
    Ok(bytes)
}
