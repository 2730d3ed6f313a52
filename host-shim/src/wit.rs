//! The Rust side of `wit/`: types, import traits and export calls, generated once here so
//! every other module takes WIT types from one place (and none has to import the runtime
//! to name a `Level`).

// Generated code: the WIT files document every item, and the generated Rust carries only
// some of those comments.
#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "bridge",
    // Imports that never wait are plain calls (an async host call costs several times
    // more, and an envelope makes a handful of them); `trappable` is how bindgen spells
    // "not async" here, and lets the rng trap instead of returning predictable bytes.
    imports: {
        "pi:bot-connect/clock.now-ms": trappable,
        "pi:bot-connect/clock.request-tick": trappable,
        "pi:bot-connect/rng.random-bytes": trappable,
        "pi:bot-connect/log.write": trappable,
        "pi:bot-connect/agent.is-idle": trappable,
        "pi:bot-connect/agent.info": trappable,
        "pi:bot-connect/agent.abort": trappable,
        "pi:bot-connect/agent.resolve-tool-call": trappable,
        "pi:bot-connect/agent.answer-question": trappable,
        "pi:bot-connect/transport.typing": trappable,
        "pi:bot-connect/transport.upload-limit": trappable,
        "pi:bot-connect/pairing.closed-since": trappable,
        "pi:bot-connect/pairing.record-failure": trappable,
        "pi:bot-connect/pairing.refused-unjudged": trappable,
        "pi:bot-connect/pairing.reopen": trappable,
        "pi:bot-connect/pairing.view": trappable,
        default: async,
    },
    exports: { default: async },
    // Tests and the host compare decisions and events by value.
    additional_derives: [PartialEq, Eq, serde::Serialize, serde::Deserialize],
});

pub use exports::pi::bot_connect::session;
pub use pi::bot_connect::{
    agent, clock, lock, log, pairing, rng, speech, store, transport, types, ui,
};
