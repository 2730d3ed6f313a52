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
        "host-shim: metrics on http://{0}/metrics, health on http://{0}/healthz and \
         http://{0}/readyz",
        listener.addr()
    );
    if let Some(token) = token {
        // Like a pairing code: on the terminal only, never in a log line.
        println!(
            "host-shim: dashboard (read-only; this link holds its token, keep it to \
             yourself) at http://{}/dashboard?token={token}",
            listener.addr()
        );
    }
    Ok(listener)
}

/// Refuses `--dashboard` beyond loopback, before anything starts: its token travels in
/// plain HTTP (an SSH tunnel reaches it from elsewhere).
pub fn check_dashboard_addr(addr: SocketAddr) -> anyhow::Result<()> {
    if !addr.ip().is_loopback() {
        anyhow::bail!(
            "--dashboard is served on loopback only (its token would cross the network in \
             plain HTTP): use --metrics 127.0.0.1:{}, and an SSH tunnel to reach it from \
             another machine",
            addr.port()
        );
    }
    Ok(())
}

/// A fresh dashboard token for `addr`, refused beyond loopback.
fn dashboard_token(addr: SocketAddr) -> anyhow::Result<String> {
    check_dashboard_addr(addr)?;
    dashboard::new_token().map_err(|e| anyhow::anyhow!("cannot make the dashboard's token: {e}"))
}

/// The last decisions of `metrics`, each named after its session by `name`.
fn decision_rows(metrics: &Metrics, name: impl Fn(&str) -> String) -> Vec<DecisionRow> {
    metrics
        .recent()
        .decisions()
        .into_iter()
        .map(|d| DecisionRow {
            session: name(&d.session),
            event: d.event,
            detail: d.detail,
            at_ms: d.at_ms,
        })
        .collect()
}

/// The dashboard of a broker, with a fresh token, for `--dashboard`: served on loopback
/// only, since its token travels in plain HTTP (an SSH tunnel reaches it from elsewhere).
pub fn broker_dashboard(
    addr: SocketAddr,
    metrics: &Arc<Metrics>,
    broker: &Arc<Broker>,
) -> anyhow::Result<Dashboard> {
    let token = dashboard_token(addr)?;
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
                decisions: decision_rows(&metrics, name),
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
            // A hibernated session's agent is idle (it would not have slept otherwise), so
            // it is among the not-busy; a wake racing this count is clamped, never negative.
            let hibernated = broker.hibernated().get().min(sessions.len() - active);
            metrics.set_sessions(active, sessions.len() - active - hibernated, hibernated);
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

/// The one session of `host-shim run`, as its listener and dashboard see it.
#[derive(Clone)]
pub struct OneSession {
    /// Its name on the page.
    pub name: String,
    /// Its agent: active while a turn runs.
    pub agent: Arc<dyn crate::agent::Agent>,
    /// Its transports, each counted and saying whether it runs.
    pub transports: Arc<std::sync::OnceLock<Vec<Arc<CountedTransport>>>>,
    /// Its key, and the state database it saves to: its chats and pairings are read from
    /// the saved document, since no broker keeps them in this mode.
    pub saved: Option<(String, Arc<crate::disk::state_db::StateDb>)>,
}

impl OneSession {
    /// Its row, with the chats and pairings of its last saved state (none when it could
    /// not be read: the page then shows the session alone).
    fn row(&self) -> SessionRow {
        let (key, document) = match &self.saved {
            Some((key, state)) => (key.as_str(), state.load_document(key).ok().flatten()),
            None => ("", None),
        };
        crate::ops::session_row::row_from_state(
            key,
            &self.name,
            !self.agent.is_idle(),
            document.as_deref(),
        )
    }

    /// Each transport's check; none before the bridge asked for its transports.
    fn checks(&self) -> Vec<Check> {
        self.transports
            .get()
            .map(|all| all.iter().map(|t| t.readiness()).collect())
            .unwrap_or_default()
    }
}

/// The dashboard of `host-shim run --dashboard`: its one session with its chats and
/// pairings (read from its saved state), its open approvals and last decisions, its
/// transports' checks and the delivery figures.
pub fn session_dashboard(
    addr: SocketAddr,
    metrics: &Arc<Metrics>,
    session: OneSession,
) -> anyhow::Result<Dashboard> {
    let token = dashboard_token(addr)?;
    let metrics = metrics.clone();
    Ok(Dashboard {
        token,
        view: Arc::new(move || View {
            sessions: vec![session.row()],
            more_sessions: 0,
            approvals: metrics
                .recent()
                .pending()
                .into_iter()
                .map(|p| (session.name.clone(), p.tool, p.id))
                .collect(),
            decisions: decision_rows(&metrics, |_| session.name.clone()),
            checks: session.checks(),
            figures: metrics.figures(),
        }),
    })
}

/// `build`, each transport counted in `metrics` and kept in `session` for its readiness
/// (`host-shim run`).
pub fn counted_factory(
    build: crate::factory::TransportFactory,
    metrics: &Arc<Metrics>,
    session: &OneSession,
) -> crate::factory::TransportFactory {
    let (metrics, kept) = (metrics.clone(), session.transports.clone());
    Box::new(move |requests| {
        let built = build(requests);
        let counted: Vec<Arc<CountedTransport>> = built
            .transports
            .into_iter()
            .map(|transport| Arc::new(CountedTransport::new(transport, metrics.clone())))
            .collect();
        // A factory runs once (FnOnce), so the list is always empty here and `set` cannot fail.
        let _ = kept.set(counted.clone());
        crate::factory::Built {
            transports: counted
                .into_iter()
                .map(|t| t as Arc<dyn Transport>)
                .collect(),
            notes: built.notes,
        }
    })
}

/// The listener of `host-shim run`: one session, active while its agent works; ready while
/// every transport it started runs.
pub async fn listen_for_session(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    session: OneSession,
    dashboard: Option<Dashboard>,
) -> anyhow::Result<Listener> {
    let agent = session.agent.clone();
    let refresh: Refresh = Arc::new(move |metrics: &Metrics| {
        let active = usize::from(!agent.is_idle());
        // `run` never hibernates its one session.
        metrics.set_sessions(active, 1 - active, 0);
    });
    let ready: Readiness = Arc::new(move || session.checks());
    listen(addr, metrics, refresh, ready, dashboard).await
}

/// The listener of a cluster node, when `--metrics` asked for one: refused envelopes at each
/// scrape; ready as the node's `probe` says (NATS connected, its bots held or standing by).
pub async fn listen_for_node(
    addr: Option<SocketAddr>,
    metrics: Option<Arc<Metrics>>,
    gate: &Gate,
    probe: Arc<dyn Fn() -> Vec<Check> + Send + Sync>,
    sessions: Option<crate::cluster::session_node::Census>,
    dashboard: Option<Dashboard>,
) -> anyhow::Result<Option<Listener>> {
    let (Some(addr), Some(metrics)) = (addr, metrics) else {
        return Ok(None);
    };
    let gate = gate.clone();
    let refresh: Refresh = Arc::new(move |metrics: &Metrics| {
        metrics.set_nats_envelopes_refused(gate.refused());
        // A session node's own sessions; the ingress reports the cluster's by itself.
        if let Some(sessions) = &sessions {
            let (active, idle, hibernated) = sessions();
            metrics.set_sessions(active, idle, hibernated);
        }
    });
    listen(addr, metrics, refresh, probe, dashboard)
        .await
        .map(Some)
}

/// The dashboard of a cluster's session node (`serve --nats --role sessions --dashboard`):
/// the sessions running on it with their chats and pairings (read from their saved state
/// at each look at placement), their open approvals and last decisions, the node's checks
/// and the delivery figures. Each node shows its own sessions: the decisions and approvals
/// are its bridges'.
pub fn node_dashboard(
    addr: SocketAddr,
    metrics: &Arc<Metrics>,
    rows: Arc<dyn Fn() -> Vec<(String, SessionRow)> + Send + Sync>,
    probe: Arc<dyn Fn() -> Vec<Check> + Send + Sync>,
) -> anyhow::Result<Dashboard> {
    let token = dashboard_token(addr)?;
    let metrics = metrics.clone();
    Ok(Dashboard {
        token,
        view: Arc::new(move || {
            let rows = rows();
            let names: HashMap<&str, &str> = rows
                .iter()
                .map(|(key, row)| (key.as_str(), row.name.as_str()))
                .collect();
            let name = |key: &str| names.get(key).map_or(key, |name| *name).to_owned();
            View {
                sessions: rows.iter().map(|(_, row)| row.clone()).collect(),
                more_sessions: 0,
                approvals: metrics
                    .recent()
                    .pending()
                    .into_iter()
                    // An approval of a session that left this node went with it.
                    .filter(|p| names.contains_key(p.session.as_str()))
                    .map(|p| (name(&p.session), p.tool, p.id))
                    .collect(),
                decisions: decision_rows(&metrics, name),
                checks: probe(),
                figures: metrics.figures(),
            }
        }),
    })
}
