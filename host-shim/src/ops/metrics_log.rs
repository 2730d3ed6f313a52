//! A log sink that counts before it writes: the sessions, the broker and the cluster already
//! log every event the operator's metrics measure, so the counters read those lines rather
//! than a second call beside each one that could drift from it.

use std::sync::Arc;

use super::metrics::Metrics;
use crate::local::logging::{CallCost, LogLine, LogSink};

/// Counts each line in [`Metrics`], then hands it to the sink it wraps (whatever that sink
/// filters, e.g. info lines without debug, is still counted).
pub struct MetricsLog {
    metrics: Arc<Metrics>,
    inner: Arc<dyn LogSink>,
}

impl MetricsLog {
    /// Counts into `metrics` and writes to `inner`.
    pub fn new(metrics: Arc<Metrics>, inner: Arc<dyn LogSink>) -> MetricsLog {
        MetricsLog { metrics, inner }
    }
}

impl LogSink for MetricsLog {
    fn write(&self, session: &str, line: LogLine) {
        self.metrics.observe(&line);
        self.metrics.recent().note(session, &line);
        self.inner.write(session, line);
    }

    fn call_cost(&self, session: &str, cost: CallCost) {
        self.metrics.call_cost(cost);
        self.inner.call_cost(session, cost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::logging::MemoryLog;
    use crate::wit::types::Level;

    #[test]
    fn a_line_is_counted_and_still_written() {
        let metrics = Arc::new(Metrics::new(Vec::<String>::new()));
        let memory = Arc::new(MemoryLog::default());
        let log = MetricsLog::new(metrics.clone(), memory.clone());
        log.write("s", LogLine::new(Level::Error, "guest trap", &[]));
        assert_eq!(memory.lines().len(), 1);
        assert!(
            metrics
                .render()
                .contains("botconnect_component_traps_total 1"),
            "{}",
            metrics.render()
        );
    }
}
