//! `--metrics ADDR` of `host-shim serve`: the metrics of this process and the listener that
//! serves them with `/healthz` and `/readyz` (docs/operations.md).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use transport_core::Transport;

use crate::broker::{Broker, BuildOne};
use crate::cluster::seal::Gate;
use crate::factory;
use crate::local::logging::LogSink;
use crate::ops::counted_transport::CountedTransport;
use crate::ops::dashboard::{self, DecisionRow, SessionRow, View};
use crate::ops::health::Check;
use crate::ops::listener::{self, Dashboard, Endpoints, Listener, Readiness, Refresh};
use crate::ops::metrics::Metrics;
use crate::ops::metrics_log::MetricsLog;

/// This process's metrics: every platform this build knows may appear as a `transport`
/// label, nothing else.
pub fn metrics() -> Arc<Metrics> {
    Arc::new(Metrics::new(
        factory::declarations()
            .into_iter()
            .map(|platform| platform.id),
    ))
}

/// `log`, counted in `metrics` first when there are metrics.
pub fn counted(log: Arc<dyn LogSink>, metrics: Option<&Arc<Metrics>>) -> Arc<dyn LogSink> {
    match metrics {
        Some(metrics) => Arc::new(MetricsLog::new(metrics.clone(), log)),
        None => log,
    }
}

/// `build`, its transports counted in `metrics` when there are metrics (the cluster's
/// ingress builds its bots this way; the broker wraps its own).
pub fn counted_build(build: BuildOne, metrics: Option<&Arc<Metrics>>) -> BuildOne {
    let Some(metrics) = metrics.cloned() else {
        return build;
    };
    Arc::new(move |request| {
        let mut built = build(request);
        built.transports = built
            .transports
            .into_iter()
            .map(|transport| {
                Arc::new(CountedTransport::new(transport, metrics.clone())) as Arc<dyn Transport>
            })
            .collect();
        built
    })
}

/// Starts the listener on `addr` and says where at the terminal. An address other than
/// loopback is served as asked (a Kubernetes probe needs one), with a warning: the pages
/// hold no secret, but they tell anyone who reaches them how busy the bot is.
pub async fn listen(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    refresh: Refresh,
    ready: Readiness,
    dashboard: Option<Dashboard>,
) -> anyhow::Result<Listener> {
    let token = dashboard.as_ref().map(|d| d.token.clone());
    let listener = listener::start(
        addr,
        Endpoints {
            metrics,
            refresh,
            ready,
            dashboard,
        },
    )
    .await?;
    if !addr.ip().is_loopback() {
        eprintln!(
            "[ops] warning: --metrics listens on {addr}, beyond this machine: anyone who reaches \
             it reads the metrics and health (no secrets, but the traffic). Use 127.0.0.1 unless \
             a probe or scraper on another host needs it."
        );
    }
    println!(
        "host-shim serve: metrics on http://{0}/metrics, health on http://{0}/healthz and \
         http://{0}/readyz",
        listener.addr()
    );
    if let Some(token) = token {
        // Like a pairing code: on the terminal only, never in a log line.
        println!(
            "host-shim serve: dashboard (read-only; this link holds its token, keep it to \
             yourself) at http://{}/dashboard?token={token}",
            listener.addr()
        );
    }
    Ok(listener)
}

/// The dashboard of a broker, with a fresh token, for `--dashboard`: served on loopback
/// only, since its token travels in plain HTTP (an SSH tunnel reaches it from elsewhere).
pub fn broker_dashboard(
    addr: SocketAddr,
    metrics: &Arc<Metrics>,
    broker: &Arc<Broker>,
) -> anyhow::Result<Dashboard> {
    if !addr.ip().is_loopback() {
        anyhow::bail!(
            "--dashboard is served on loopback only (its token would cross the network in \
             plain HTTP): use --metrics 127.0.0.1:{}, and an SSH tunnel to reach it from \
             another machine",
            addr.port()
        );
    }
    let token = dashboard::new_token()
        .map_err(|e| anyhow::anyhow!("cannot make the dashboard's token: {e}"))?;
    let (weak, metrics) = (Arc::downgrade(broker), metrics.clone());
    Ok(Dashboard {
        token,
        view: Arc::new(move || {
            let Some(broker) = weak.upgrade() else {
                return View::default();
            };
            let sessions = broker.sessions();
            let names: HashMap<&str, &str> = sessions
                .iter()
                .map(|s| (s.key.as_str(), s.name.as_str()))
                .collect();
            // A line of a session that left since names its key: the page still says whose.
            let name = |key: &str| names.get(key).map_or(key, |name| *name).to_owned();
            let mut chats = broker.chats();
            let recent = metrics.recent();
            View {
                sessions: sessions
                    .iter()
                    .take(dashboard::SESSIONS_SHOWN)
                    .map(|s| SessionRow {
                        name: s.name.clone(),
                        busy: s.busy,
                        chats: chats.remove(&s.key).unwrap_or_default(),
                        paired: broker.paired_with_session(&s.key),
                    })
                    .collect(),
                more_sessions: sessions.len().saturating_sub(dashboard::SESSIONS_SHOWN),
                approvals: recent
                    .pending()
                    .into_iter()
                    // An approval of a session that went away died with it.
                    .filter(|p| names.contains_key(p.session.as_str()))
                    .map(|p| (name(&p.session), p.tool, p.id))
                    .collect(),
                decisions: recent
                    .decisions()
                    .into_iter()
                    .map(|d| DecisionRow {
                        session: name(&d.session),
                        event: d.event,
                        detail: d.detail,
                        at_ms: d.at_ms,
                    })
                    .collect(),
                checks: broker.bot_checks(),
                figures: metrics.figures(),
            }
        }),
    })
}

/// The listener of a broker (`serve` without `--nats`): sessions by state and the
/// strangers' dropped answers at each scrape; ready while every bot a session asked for
/// runs.
pub async fn listen_for_broker(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    broker: &Arc<Broker>,
    dashboard: Option<Dashboard>,
) -> anyhow::Result<Listener> {
    let weak = Arc::downgrade(broker);
    let refresh: Refresh = Arc::new(move |metrics: &Metrics| {
        if let Some(broker) = weak.upgrade() {
            let sessions = broker.sessions();
            let active = sessions.iter().filter(|s| s.busy).count();
            metrics.set_sessions(active, sessions.len() - active);
            metrics.set_stranger_answers_dropped(broker.strangers_dropped());
        }
    });
    let weak = Arc::downgrade(broker);
    let ready: Readiness = Arc::new(move || {
        weak.upgrade()
            .map(|broker| broker.bot_checks())
            .unwrap_or_default()
    });
    listen(addr, metrics, refresh, ready, dashboard).await
}

/// The listener of a cluster node, when `--metrics` asked for one: refused envelopes at each
/// scrape; ready as the node's `probe` says (NATS connected, its bots held or standing by).
pub async fn listen_for_node(
    addr: Option<SocketAddr>,
    metrics: Option<Arc<Metrics>>,
    gate: &Gate,
    probe: Arc<dyn Fn() -> Vec<Check> + Send + Sync>,
) -> anyhow::Result<Option<Listener>> {
    let (Some(addr), Some(metrics)) = (addr, metrics) else {
        return Ok(None);
    };
    let gate = gate.clone();
    let refresh: Refresh = Arc::new(move |metrics: &Metrics| {
        metrics.set_nats_envelopes_refused(gate.refused());
    });
    listen(addr, metrics, refresh, probe, None).await.map(Some)
}
