//! The operator's view of a running `serve` (docs/operations.md#operating-bot-connect):
//! Prometheus metrics, health and readiness on one opt-in HTTP listener.

pub mod counted_transport;
pub mod dashboard;
pub mod health;
pub mod listener;
pub mod metrics;
pub mod metrics_log;
pub mod recent;
pub mod session_row;
