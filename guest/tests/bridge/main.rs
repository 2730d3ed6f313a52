//! The bridge's tests, natively and in one binary: the bridge against a fake host
//! ([`support`]), the pipeline, redaction and trust rules as tables and properties, and the
//! seams of its source.

mod support;

mod bridge_approvals;
mod bridge_audience;
mod bridge_codes;
mod bridge_digest;
mod bridge_explain;
mod bridge_fail_closed;
mod bridge_files_in;
mod bridge_files_out;
mod bridge_hibernation;
mod bridge_inbound_cap;
mod bridge_interrupted;
mod bridge_lifecycle;
mod bridge_notices;
mod bridge_pairing;
mod bridge_pairing_budget;
mod bridge_prompts;
mod bridge_questions;
mod bridge_queue_cap;
mod bridge_reactions;
mod bridge_scope;
mod bridge_session_commands;
mod bridge_strangers;
mod bridge_turns;
mod bridge_voice;
mod config_state_props;
mod control_chars;
mod digest_tables;
mod doc_comments;
mod example_configs;
mod fail_closed_props;
mod outbox_props;
mod pipeline_props;
mod pipeline_seams;
mod pipeline_tables;
mod redact_catalog;
mod redact_differential;
mod redact_props;
mod secret_families;
mod secrets_props;
mod trust_props;
