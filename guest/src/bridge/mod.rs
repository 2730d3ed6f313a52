//! Orchestration: turns envelopes, agent events and commands into effects on the host.
