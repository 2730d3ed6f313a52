//! The operator's counters and gauges (docs/operations.md#metrics), kept in one
//! `prometheus-client` registry per process and rendered as OpenMetrics text for `GET /metrics`.
//!
//! What feeds them: the log lines every session, the broker and the cluster already write
//! ([`Metrics::observe`], through [`super::metrics_log::MetricsLog`]), the broker's own
//! inbound and outbound paths, and gauges read at scrape time ([`Metrics::set_sessions`] and
//! friends). No label carries a user id, a chat id, a session key or any text a user typed:
//! every label value is one of a fixed set named here, or `other` (a metric per chat would
//! both leak who talks to the bot and grow without bound).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use transport_core::TransportError;

use crate::local::clock::{Clock, SystemClock};
use crate::local::logging::{CallCost, LogLine};
use crate::ops::recent::Recent;

/// The label value of anything outside a family's fixed set.
const OTHER: &str = "other";

/// A transport's label (`telegram`, `discord`, …).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransportLabel {
    /// The transport id, or `other`.
    pub transport: String,
}

/// A transport and what happened to one outbound message.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SendLabels {
    /// The transport id, or `other`.
    pub transport: String,
    /// `sent`, `refused` (the chat talks to another session) or `failed`.
    pub outcome: String,
}

/// A transport and the kind of error its platform gave.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// The transport id, or `other`.
    pub transport: String,
    /// `rate_limited`, `not_started`, `edit_rejected`, `unsupported` or `failed`.
    pub kind: String,
}

/// One label named `state`, `outcome`, `kind` or `reason`, with a value from a fixed set.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    /// The state.
    pub state: String,
}

/// One `outcome` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// The outcome.
    pub outcome: String,
}

/// One `kind` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// The kind.
    pub kind: String,
}

/// One `reason` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    /// The reason.
    pub reason: String,
}

/// Every family this process exports, and the registry that renders them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Transport ids that may appear as label values (the platforms this build knows).
    transports: BTreeSet<String>,
    sessions: Family<StateLabel, Gauge>,
    envelopes_received: Family<TransportLabel, Counter>,
    envelopes_sent: Family<SendLabels, Counter>,
    platform_errors: Family<ErrorLabels, Counter>,
    deliveries_lost: Family<TransportLabel, Counter>,
    deliveries_retried: Family<TransportLabel, Counter>,
    inbound_rate_limited: Family<KindLabel, Counter>,
    approvals: Family<OutcomeLabel, Counter>,
    pairing: Family<OutcomeLabel, Counter>,
    ignored: Family<ReasonLabel, Counter>,
    stranger_answers_dropped: Counter,
    traps: Counter,
    restarts: Counter,
    call_fuel: Histogram,
    memory_bytes: Histogram,
    nats_refused: Counter,
    nats_redeliveries: Counter,
    nats_leases: Family<KindLabel, Counter>,
    /// The dashboard's figures, summed over every label: received, sent, failed, refused,
    /// reported lost.
    figures: [AtomicU64; 5],
    /// The dashboard's last decisions and open approvals: fed from the same lines as the
    /// counters, and the dashboard exists only beside the metrics.
    recent: Recent,
}

impl Metrics {
    /// Empty families; `transports` are the ids allowed as a `transport` label's value
    /// (anything else counts as `other`).
    pub fn new<I, S>(transports: I) -> Metrics
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Metrics::with_clock(transports, Arc::new(SystemClock))
    }

    /// [`Metrics::new`], the dashboard's decisions stamped with `clock`'s time (tests
    /// inject theirs; the process uses the system's).
    pub fn with_clock<I, S>(transports: I, clock: Arc<dyn Clock>) -> Metrics
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut registry = Registry::with_prefix("botconnect");
        let metrics = Metrics {
            transports: transports.into_iter().map(Into::into).collect(),
            sessions: Family::default(),
            envelopes_received: Family::default(),
            envelopes_sent: Family::default(),
            platform_errors: Family::default(),
            deliveries_lost: Family::default(),
            deliveries_retried: Family::default(),
            inbound_rate_limited: Family::default(),
            approvals: Family::default(),
            pairing: Family::default(),
            ignored: Family::default(),
            stranger_answers_dropped: Counter::default(),
            traps: Counter::default(),
            restarts: Counter::default(),
            // From a command's few thousand instructions to the per-call budget (2e10).
            call_fuel: Histogram::new(exponential_buckets(1e4, 10.0, 7)),
            // From the 1 MiB a fresh instance has to the 64 MiB cap, by doubling.
            memory_bytes: Histogram::new(exponential_buckets(f64::from(1u32 << 20), 2.0, 7)),
            nats_refused: Counter::default(),
            nats_redeliveries: Counter::default(),
            nats_leases: Family::default(),
            figures: Default::default(),
            recent: Recent::new(clock),
            registry: Registry::default(),
        };
        // Counters are registered without `_total`: the encoder adds it (OpenMetrics).
        registry.register(
            "sessions",
            "Sessions by state (active: a turn runs; idle; hibernated: no instance until its \
             next input; offline: a cluster session whose node is gone, its messages waiting)",
            metrics.sessions.clone(),
        );
        registry.register(
            "envelopes_received",
            "Messages received from a platform, by transport",
            metrics.envelopes_received.clone(),
        );
        registry.register(
            "envelopes_sent",
            "Messages handed to a platform, by transport and outcome (sent, refused, failed)",
            metrics.envelopes_sent.clone(),
        );
        registry.register(
            "platform_errors",
            "Errors a platform gave on send, by transport and kind (rate_limited is a rate-limit wait)",
            metrics.platform_errors.clone(),
        );
        registry.register(
            "deliveries_reported_lost",
            "Replies the bridge gave up on and reported at the terminal, by transport",
            metrics.deliveries_lost.clone(),
        );
        registry.register(
            "deliveries_retried",
            "Messages sent after waiting out a platform's rate limit in the bridge's outbox, by transport",
            metrics.deliveries_retried.clone(),
        );
        registry.register(
            "inbound_rate_limited",
            "Remote inputs refused by the per-sender rate limit, by kind (prompt, command)",
            metrics.inbound_rate_limited.clone(),
        );
        registry.register(
            "approvals",
            "Remote approvals, by outcome (asked, approved, denied, expired)",
            metrics.approvals.clone(),
        );
        registry.register(
            "pairing",
            "Pairing events, by outcome (paired, wrong: a wrong code, budget_closed)",
            metrics.pairing.clone(),
        );
        registry.register(
            "messages_ignored",
            "Messages the bridge ignored, by reason (empty, unaddressed, stale_unpaired)",
            metrics.ignored.clone(),
        );
        registry.register(
            "stranger_answers_dropped",
            "Broker answers to unpaired senders dropped because their queue was full",
            metrics.stranger_answers_dropped.clone(),
        );
        registry.register(
            "component_traps",
            "Traps of a session's component (each is followed by a restart, up to a limit)",
            metrics.traps.clone(),
        );
        registry.register(
            "component_restarts",
            "Restarts of a session's component from its saved state after a trap",
            metrics.restarts.clone(),
        );
        registry.register(
            "component_call_fuel",
            "Fuel (about one per instruction) each call into a session's component burnt",
            metrics.call_fuel.clone(),
        );
        registry.register(
            "component_memory_bytes",
            "A session's component's linear memory after each call into it, in bytes",
            metrics.memory_bytes.clone(),
        );
        registry.register(
            "nats_redeliveries",
            "Cluster messages JetStream delivered again (a node died or was slow before its ack)",
            metrics.nats_redeliveries.clone(),
        );
        registry.register(
            "nats_envelopes_refused",
            "Cluster envelopes refused by the seal check (forged, stale or replayed)",
            metrics.nats_refused.clone(),
        );
        registry.register(
            "nats_lease_changes",
            "Bot locks and session leases taken or lost by this node, by kind",
            metrics.nats_leases.clone(),
        );
        Metrics {
            registry,
            ..metrics
        }
    }

    /// The families as OpenMetrics text (ends with `# EOF`).
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail; a failure would be a bug in the encoder, and
        // an empty scrape is what Prometheus then shows (`up` stays 1, series vanish).
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }

    /// The delivery figures the dashboard draws, summed over transports.
    pub fn figures(&self) -> Vec<(String, u64)> {
        ["received", "sent", "failed", "refused", "reported lost"]
            .iter()
            .zip(&self.figures)
            .map(|(label, n)| ((*label).to_owned(), n.load(Ordering::Relaxed)))
            .collect()
    }

    fn figure(&self, which: usize) {
        self.figures[which].fetch_add(1, Ordering::Relaxed);
    }

    fn transport(&self, id: &str) -> String {
        if self.transports.contains(id) {
            id.to_owned()
        } else {
            OTHER.to_owned()
        }
    }

    /// Sessions attached now: `active` ones run a turn, `idle` ones wait with their
    /// instance, `hibernated` ones wait without (docs/scaling.md#idle-sessions).
    pub fn set_sessions(&self, active: usize, idle: usize, hibernated: usize) {
        self.set_session_states(&[
            ("active", active),
            ("idle", idle),
            ("hibernated", hibernated),
        ]);
    }

    /// A cluster's sessions by state, as its directory and presence say (the ingress):
    /// `offline` ones are listed but no live node runs them.
    pub fn set_cluster_sessions(&self, active: usize, idle: usize, offline: usize) {
        self.set_session_states(&[("active", active), ("idle", idle), ("offline", offline)]);
    }

    fn set_session_states(&self, states: &[(&str, usize)]) {
        for &(state, count) in states {
            self.sessions
                .get_or_create(&StateLabel {
                    state: state.into(),
                })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }

    /// Raises a counter that mirrors a monotonic count kept elsewhere to `total`.
    fn mirror(counter: &Counter, total: u64) {
        let seen = counter.get();
        if total > seen {
            counter.inc_by(total - seen);
        }
    }

    /// The broker's count of answers to strangers dropped so far.
    pub fn set_stranger_answers_dropped(&self, total: u64) {
        Self::mirror(&self.stranger_answers_dropped, total);
    }

    /// The seal gate's count of refused envelopes so far.
    pub fn set_nats_envelopes_refused(&self, total: u64) {
        Self::mirror(&self.nats_refused, total);
    }

    /// One message received from `transport`'s platform.
    pub fn envelope_received(&self, transport: &str) {
        self.figure(0);
        self.envelopes_received
            .get_or_create(&TransportLabel {
                transport: self.transport(transport),
            })
            .inc();
    }

    /// One message handed to `transport`'s platform, and what came of it.
    pub fn envelope_sent(&self, transport: &str, result: Result<(), &TransportError>) {
        let transport = self.transport(transport);
        let outcome = match result {
            Ok(()) => {
                self.figure(1);
                "sent"
            }
            Err(error) => {
                self.figure(2);
                self.platform_errors
                    .get_or_create(&ErrorLabels {
                        transport: transport.clone(),
                        kind: error_kind(error).into(),
                    })
                    .inc();
                "failed"
            }
        };
        self.envelopes_sent
            .get_or_create(&SendLabels {
                transport,
                outcome: outcome.into(),
            })
            .inc();
    }

    /// A send the broker refused before the platform saw it (the chat talks to another
    /// session).
    pub fn envelope_refused(&self, transport: &str) {
        self.figure(3);
        self.envelopes_sent
            .get_or_create(&SendLabels {
                transport: self.transport(transport),
                outcome: "refused".into(),
            })
            .inc();
    }

    /// The sessions' last decisions and open approvals, as their log lines told them.
    pub fn recent(&self) -> &Recent {
        &self.recent
    }

    /// Takes one call's cost into the fuel and memory histograms.
    pub fn call_cost(&self, cost: CallCost) {
        self.call_fuel.observe(cost.fuel as f64);
        self.memory_bytes.observe(cost.memory_bytes as f64);
    }

    /// Counts what one log line says happened, if it is one of the events measured here.
    /// The line's free-text fields are never copied into a label: each value is matched
    /// against a fixed set.
    pub fn observe(&self, line: &LogLine) {
        let field = |name: &str| {
            line.fields
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.as_str())
        };
        let count = |family: &Family<OutcomeLabel, Counter>, outcome: &str| {
            family
                .get_or_create(&OutcomeLabel {
                    outcome: outcome.into(),
                })
                .inc();
        };
        let lease = |kind: &str| {
            self.nats_leases
                .get_or_create(&KindLabel { kind: kind.into() })
                .inc();
        };
        match line.event.as_str() {
            "remote approval requested" => count(&self.approvals, "asked"),
            "remote approval settled" => {
                let outcome = match (field("by"), field("approved")) {
                    (Some("timeout"), _) => "expired",
                    (_, Some("true")) => "approved",
                    (_, Some("false")) => "denied",
                    _ => OTHER,
                };
                count(&self.approvals, outcome);
            }
            "paired remote identity" => count(&self.pairing, "paired"),
            "wrong pairing code" => count(&self.pairing, "wrong"),
            "guest restarted" => {
                self.restarts.inc();
            }
            "nats_redelivery" => {
                self.nats_redeliveries.inc();
            }
            "pairing closed" => count(&self.pairing, "budget_closed"),
            "outbound send failed" => {
                self.figure(4);
                let transport = self.transport(field("transport").unwrap_or_default());
                self.deliveries_lost
                    .get_or_create(&TransportLabel { transport })
                    .inc();
            }
            "outbound sent after waiting" => {
                let transport = self.transport(field("transport").unwrap_or_default());
                self.deliveries_retried
                    .get_or_create(&TransportLabel { transport })
                    .inc();
            }
            "remote input rate limited" => {
                let kind = match field("kind") {
                    Some(kind @ ("prompt" | "command")) => kind,
                    _ => OTHER,
                };
                self.inbound_rate_limited
                    .get_or_create(&KindLabel { kind: kind.into() })
                    .inc();
            }
            "ignored message" => {
                let reason = match field("reason") {
                    Some(reason @ ("empty" | "unaddressed")) => reason,
                    Some(reason) if reason.starts_with("unpaired and older") => "stale_unpaired",
                    _ => OTHER,
                };
                self.ignored
                    .get_or_create(&ReasonLabel {
                        reason: reason.into(),
                    })
                    .inc();
            }
            "guest trap" => {
                self.traps.inc();
            }
            "bot held" => lease("bot_held"),
            "bot lock lost" => lease("bot_lost"),
            "session started" | "session started no bot" => lease("session_taken"),
            "session lease lost" => lease("session_lost"),
            _ => {}
        }
    }
}

/// A transport error's kind, as the `kind` label says it.
fn error_kind(error: &TransportError) -> &'static str {
    match error {
        TransportError::RateLimited { .. } => "rate_limited",
        TransportError::NotStarted(_) => "not_started",
        TransportError::AlreadyStarted(_) => "already_started",
        TransportError::EditRejected(_) => "edit_rejected",
        TransportError::Unsupported(_) => "unsupported",
        TransportError::Failed(_) => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wit::types::Level;

    fn line(event: &str, fields: &[(&str, &str)]) -> LogLine {
        let fields: Vec<(&str, String)> = fields.iter().map(|(k, v)| (*k, v.to_string())).collect();
        LogLine::new(Level::Info, event, &fields)
    }

    #[test]
    fn no_label_takes_a_value_from_outside_its_fixed_set() {
        let metrics = Metrics::new(["telegram"]);
        // A user id where a transport id belongs, and one where a kind or reason belongs.
        metrics.envelope_received("4242424242");
        metrics.envelope_received("telegram");
        metrics.observe(&line(
            "remote input rate limited",
            &[("kind", "alice-4242"), ("identity", "telegram:4242424242")],
        ));
        metrics.observe(&line("ignored message", &[("reason", "chat 4242424242")]));
        metrics.observe(&line(
            "remote approval settled",
            &[("by", "telegram:4242424242"), ("approved", "true")],
        ));
        let text = metrics.render();
        assert!(!text.contains("4242"), "{text}");
        assert!(!text.contains("alice"), "{text}");
        assert!(
            text.contains("botconnect_envelopes_received_total{transport=\"other\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("botconnect_approvals_total{outcome=\"approved\"} 1"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn a_cluster_counts_offline_sessions_and_a_broker_has_none_to_count() {
        let metrics = Metrics::new(Vec::<String>::new());
        metrics.set_cluster_sessions(1, 2, 3);
        let text = metrics.render();
        for line in [
            "botconnect_sessions{state=\"active\"} 1",
            "botconnect_sessions{state=\"idle\"} 2",
            "botconnect_sessions{state=\"offline\"} 3",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
        let broker = Metrics::new(Vec::<String>::new());
        broker.set_sessions(1, 2, 0);
        let text = broker.render();
        assert!(!text.contains("state=\"offline\""), "{text}");
    }

    #[test]
    fn an_approval_that_timed_out_counts_as_expired() {
        let metrics = Metrics::new(Vec::<String>::new());
        metrics.observe(&line(
            "remote approval settled",
            &[("by", "timeout"), ("approved", "false")],
        ));
        let text = metrics.render();
        assert!(
            text.contains("botconnect_approvals_total{outcome=\"expired\"} 1"),
            "{text}"
        );
        assert!(!text.contains("outcome=\"denied\""), "{text}");
    }

    #[test]
    fn restarts_redeliveries_and_wrong_codes_are_counted_from_their_lines() {
        let metrics = Metrics::new(Vec::<String>::new());
        metrics.observe(&line("guest trap", &[("call", "on-envelope")]));
        metrics.observe(&line("guest restarted", &[("restarts", "1")]));
        metrics.observe(&line("nats_redelivery", &[("delivered", "2")]));
        metrics.observe(&line("nats_redelivery", &[("delivered", "3")]));
        metrics.observe(&line("wrong pairing code", &[("budget", "counted")]));
        metrics.observe(&line(
            "outbound sent after waiting",
            &[("transport", "telegram"), ("kind", "reply")],
        ));
        let text = metrics.render();
        for expected in [
            "botconnect_component_traps_total 1",
            "botconnect_component_restarts_total 1",
            "botconnect_nats_redeliveries_total 2",
            "botconnect_pairing_total{outcome=\"wrong\"} 1",
            "botconnect_deliveries_retried_total{transport=\"other\"} 1",
        ] {
            assert!(text.contains(expected), "{expected} in {text}");
        }
    }

    #[test]
    fn each_call_lands_in_the_fuel_and_memory_buckets_it_fits() {
        let metrics = Metrics::new(Vec::<String>::new());
        metrics.call_cost(CallCost {
            fuel: 50_000,
            memory_bytes: 3 << 20,
        });
        metrics.call_cost(CallCost {
            fuel: 2_000_000,
            memory_bytes: 3 << 20,
        });
        let text = metrics.render();
        for expected in [
            // 5e4 is over the 1e4 bucket and within 1e5; 2e6 within 1e7.
            "botconnect_component_call_fuel_bucket{le=\"10000.0\"} 0",
            "botconnect_component_call_fuel_bucket{le=\"100000.0\"} 1",
            "botconnect_component_call_fuel_bucket{le=\"10000000.0\"} 2",
            "botconnect_component_call_fuel_count 2",
            "botconnect_component_call_fuel_sum 2050000.0",
            // 3 MiB is over 2 MiB and within 4 MiB.
            "botconnect_component_memory_bytes_bucket{le=\"2097152.0\"} 0",
            "botconnect_component_memory_bytes_bucket{le=\"4194304.0\"} 2",
        ] {
            assert!(text.contains(expected), "{expected} in {text}");
        }
    }

    #[test]
    fn a_mirrored_count_never_goes_back() {
        let metrics = Metrics::new(Vec::<String>::new());
        metrics.set_stranger_answers_dropped(5);
        metrics.set_stranger_answers_dropped(3);
        metrics.set_stranger_answers_dropped(7);
        assert!(
            metrics
                .render()
                .contains("botconnect_stranger_answers_dropped_total 7"),
            "{}",
            metrics.render()
        );
    }
}
