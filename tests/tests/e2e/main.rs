//! The end-to-end tests: the real component in the real host, with fake and loopback
//! messengers, the real pi and a real nats-server. One test binary, so the component is
//! compiled once for all of them; what the tests share is in [`common`].

mod common;

mod broker;
mod broker_telegram;
mod broker_topics;
mod capability_audit;
mod cluster_bot_lock;
mod cluster_documented_config;
mod cluster_failover;
mod cluster_forget;
mod cluster_hibernation;
mod cluster_inbound;
mod cluster_outbound;
mod cluster_pi;
mod cluster_posted;
mod cluster_serve;
mod cluster_sessions;
mod cluster_state;
mod cluster_topics;
mod demo_agent;
mod digest_flow;
mod discord_flow;
mod doc_references;
mod hibernation;
mod message_strings;
mod pairing_flow;
mod pi_extension;
mod pi_headless;
mod pi_notices;
mod pi_questions;
mod remote_approval;
mod robo_claw_flow;
mod runtime_seams;
mod scoped_turns;
mod secret_isolation;
mod slack_flow;
mod soak;
mod telegram_flow;
mod transcripts;
mod trap_containment;
mod trust_flow;
