//! `host-shim serve --nats <url> --role ingress|sessions`: one node of a cluster on NATS JetStream
//! (docs/decisions.md#decision-19-past-one-host-on-nats-jetstream, docs/scaling.md). The ingress
//! holds the bots its config asks for (one node per bot at a time, the others standing by); a session
//! node runs the pi sessions of its machine (they attach to it as to a broker) and its share of the
//! `--demo` sessions. State, bindings and the list of sessions live in
//! JetStream, so any node can stop and another carries on.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::agent::{Agent, DemoAgent};
use crate::broker;
use crate::cluster::bot_lock::Holder;
use crate::cluster::connect_options::NatsAuth;
use crate::cluster::inbound::InboundSettings;
use crate::cluster::ingress::{Ingress, IngressOptions};
use crate::cluster::seal::Gate;
use crate::cluster::session_node::{Attach, Attacher, SessionNode, SessionNodeOptions, Wanted};
use crate::cluster::subjects::Prefix;
use crate::cluster::trust_settings::{self, TrustSettings};
use crate::commands::control::{self, SessionHome};
use crate::commands::operator;
use crate::commands::process;
use crate::commands::serve::ServeArgs;
use crate::disk::lock::LockDir;
use crate::local::clock::{Clock, SystemClock};
use crate::local::logging::{TARGET, TracingLog};
use crate::local::ui::{LabelledStderrUi, Ui};
use crate::pi::attach::{self, Bound, BoxFuture, Served};
use crate::pi::link::LinkSession;
use crate::sandbox::hibernation::{HibernatedCount, Hibernation};
use crate::sandbox::runtime::{Limits, Runtime};
use crate::wit::agent::SessionInfo;
use crate::wit::session::TransportRequest;
use crate::wit::types::Level;

/// What a cluster node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Holds the bots (platform connections) and routes their messages.
    Ingress,
    /// Runs sessions, talking through the ingress.
    Sessions,
}

/// How a node logs in to NATS and which cluster key it holds: file paths and the names
/// of environment variables only (argv is visible in `ps`). Each overrides the same key of
/// the `cluster` object in the user's bot-connect.json.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TrustFlags {
    /// With --nats: a NATS credentials file (user JWT + nkey seed, `nsc generate creds`).
    #[arg(long, value_name = "FILE")]
    pub nats_creds: Option<PathBuf>,
    /// With --nats: a file holding an nkey seed (SU…), for `nkey:` users.
    #[arg(long, value_name = "FILE")]
    pub nats_nkey: Option<PathBuf>,
    /// With --nats: the environment variable holding the NATS user name.
    #[arg(long, value_name = "VAR")]
    pub nats_user_env: Option<String>,
    /// With --nats: the environment variable holding the NATS password.
    #[arg(long, value_name = "VAR")]
    pub nats_password_env: Option<String>,
    /// With --nats: the environment variable holding the NATS token.
    #[arg(long, value_name = "VAR")]
    pub nats_token_env: Option<String>,
    /// With --nats: a PEM file of the CAs the server's certificate must chain to (TLS).
    #[arg(long, value_name = "FILE")]
    pub nats_ca: Option<PathBuf>,
    /// With --nats: a PEM client certificate (with --nats-key), for servers verifying clients.
    #[arg(long, value_name = "FILE")]
    pub nats_cert: Option<PathBuf>,
    /// With --nats: the PEM key of --nats-cert.
    #[arg(long, value_name = "FILE")]
    pub nats_key: Option<PathBuf>,
    /// With --nats: a file holding the cluster key (at least 32 bytes, the same on every
    /// node), which seals every envelope and stored value.
    #[arg(long, value_name = "FILE")]
    pub cluster_key_file: Option<PathBuf>,
    /// With --nats: the environment variable holding the cluster key.
    #[arg(long, value_name = "VAR")]
    pub cluster_key_env: Option<String>,
    /// With --nats: start without NATS credentials or a cluster key. Anyone who reaches the
    /// server can then read and drive the cluster; a warning says so at every start.
    #[arg(long)]
    pub insecure_no_auth: bool,
}

impl TrustFlags {
    /// The settings these flags give (what they leave unset comes from the config).
    pub fn settings(&self) -> TrustSettings {
        TrustSettings {
            auth: NatsAuth {
                creds_file: self.nats_creds.clone(),
                nkey_file: self.nats_nkey.clone(),
                user_env: self.nats_user_env.clone(),
                password_env: self.nats_password_env.clone(),
                token_env: self.nats_token_env.clone(),
                ca_file: self.nats_ca.clone(),
                cert_file: self.nats_cert.clone(),
                key_file: self.nats_key.clone(),
            },
            cluster_key_file: self.cluster_key_file.clone(),
            cluster_key_env: self.cluster_key_env.clone(),
        }
    }
}

/// The cluster part of `host-shim serve`.
#[derive(Debug, Clone)]
pub struct ClusterArgs {
    /// The NATS server.
    pub url: String,
    /// This node's role.
    pub role: Role,
    /// The cluster's name on NATS.
    pub prefix: String,
    /// How long a dead node's locks and leases outlive it.
    pub lock_ttl: Duration,
    /// The NATS login and cluster key flags.
    pub trust: TrustFlags,
    /// An ingress forgets sessions offline this long (`--forget-offline-after`); `None`
    /// never.
    pub forget_offline_after: Option<Duration>,
}

/// The shortest `--forget-offline-after`: less would forget a session whose machine is
/// only rebooting, or whose pi is being updated.
pub const MIN_FORGET_AFTER: Duration = Duration::from_secs(3_600);

/// `--forget-offline-after` could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ForgetAfterError {
    /// Not a number with a unit.
    #[error(
        "--forget-offline-after takes a whole number with a unit, like 7d, 36h or 90m (or 0 \
         for never), got {0:?}"
    )]
    Unreadable(String),
    /// Under [`MIN_FORGET_AFTER`].
    #[error(
        "--forget-offline-after must be at least 1h (or 0 for never), got {0:?}: a shorter \
         time would forget a session whose machine is only rebooting"
    )]
    TooShort(String),
}

/// Reads `--forget-offline-after`: `<n>d`, `<n>h`, `<n>m` or `<n>s`; `0` (with or without a
/// unit) never.
pub fn parse_forget_after(text: &str) -> Result<Option<Duration>, ForgetAfterError> {
    let trimmed = text.trim();
    let unreadable = || ForgetAfterError::Unreadable(text.to_owned());
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let number: u64 = number.parse().map_err(|_| unreadable())?;
    let unit_secs = match unit {
        "d" => 86_400,
        "h" => 3_600,
        "m" => 60,
        "s" => 1,
        "" if number == 0 => 1,
        _ => return Err(unreadable()),
    };
    if number == 0 {
        return Ok(None);
    }
    let after = Duration::from_secs(number.checked_mul(unit_secs).ok_or_else(unreadable)?);
    if after < MIN_FORGET_AFTER {
        return Err(ForgetAfterError::TooShort(text.to_owned()));
    }
    Ok(Some(after))
}

/// How long a send through the ingress may take. Short, because a send in flight to an
/// ingress that died waits it out while the session handles nothing else (at 30 s, a kill
/// test measured a 30 s stall while the bot had moved in 14 s); a platform post takes well
/// under a second, and one that does not come back in time is reported in the chat as
/// perhaps not posted.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The validated transport requests of `config` (the messengers only).
pub fn messenger_requests(config: &guest::core::config::LoadedConfig) -> Vec<TransportRequest> {
    config
        .transports
        .iter()
        .filter(|r| r.id != "terminal")
        .map(|r| TransportRequest {
            id: r.id.clone(),
            required: r.required,
            settings: crate::factory::settings_from_model(&r.settings),
        })
        .collect()
}

/// Starts the pi sessions of this machine on its session node.
struct NodeHome {
    attacher: Attacher,
    /// This node as it describes itself (host and process), for the session's terminal.
    machine: String,
}

impl SessionHome for NodeHome {
    fn start(
        self: Arc<Self>,
        described: LinkSession,
        agent: Arc<dyn Agent>,
        ui: Arc<dyn Ui>,
    ) -> BoxFuture<anyhow::Result<Served>> {
        Box::pin(async move {
            let config_sources = process::config_sources_in(Path::new(&described.cwd))?;
            let name = control::session_name(described.name.as_deref(), &described.cwd);
            let attach = Attach {
                wanted: Wanted {
                    key: described.key.clone(),
                    name: name.clone(),
                    cwd: described.cwd.clone(),
                },
                config_sources,
                agent,
                ui: ui.clone(),
            };
            let served = self.attacher.attach(attach).await?;
            ui.notify(
                Level::Info,
                &format!(
                    "This session runs on the cluster's session node {} and is served by the \
                     cluster's bot as {name:?}. A chat reaches it with /switch {name}; \
                     /sessions lists the sessions a chat is paired with.",
                    self.machine
                ),
            )
            .await;
            Ok(served)
        })
    }
}

/// Who this node is to NATS and the key it seals with, refused before anything is reached: a
/// cluster without them is open to anyone on the server (docs/security.md#cluster-security).
fn decide_trust(
    sources: &[crate::wit::session::ConfigSource],
    cluster: &ClusterArgs,
) -> anyhow::Result<trust_settings::Trust> {
    decide_trust_for(sources, &cluster.url, &cluster.trust)
}

/// [`decide_trust`] for `url` and `flags`: a node's, or an operator command's
/// (`host-shim cluster …`), which logs in and seals as a node does.
pub fn decide_trust_for(
    sources: &[crate::wit::session::ConfigSource],
    url: &str,
    flags: &TrustFlags,
) -> anyhow::Result<trust_settings::Trust> {
    let settings = trust_settings::from_config(sources)?.overridden_by(flags.settings());
    let env = |name: &str| std::env::var(name).ok();
    let trust = trust_settings::decide(url, &settings, flags.insecure_no_auth, &env)?;
    for warning in &trust.warnings {
        // On the terminal whatever RUST_LOG says: a node open to anyone on the server must
        // not be started without its operator seeing so.
        eprintln!("[node] WARNING: {warning}");
    }
    Ok(trust)
}

/// `host-shim run --nats`: this process joins the cluster as a session node that runs only
/// the session `run` starts (pi headless, or the demo), so that session is served by the
/// cluster's bot while its agent stays here. The caller attaches it through the node's
/// [`SessionNode::attacher`].
pub async fn join_for_one_session(
    runtime: Arc<Runtime>,
    sources: Vec<crate::wit::session::ConfigSource>,
    cluster: &ClusterArgs,
    locks: LockDir,
) -> anyhow::Result<SessionNode> {
    let prefix = Prefix::new(&cluster.prefix)?;
    let trust = decide_trust(&sources, cluster)?;
    let config = crate::native_guest::read_transports_natively(&sources);
    if messenger_requests(&config).is_empty() {
        bail!(
            "the config enables no messenger, so there is no cluster bot to talk through: set \
             transports.telegram (or discord, slack, robo_claw) with \"enabled\": true and the \
             same tokenEnv name as the ingress (the token itself only the ingress needs)"
        );
    }
    let (client, jetstream) = crate::cluster::connect(&cluster.url, &trust.auth).await?;
    let holder = Holder::this_process();
    let log = Arc::new(TracingLog::for_node(&holder.description));
    let gate = Gate::new(trust.key.clone(), Arc::new(SystemClock), log.clone());
    let node = SessionNode::start(
        client,
        jetstream,
        SessionNodeOptions {
            prefix,
            lease_ttl: cluster.lock_ttl,
            inbound: InboundSettings::for_lease_ttl(cluster.lock_ttl),
            request_timeout: REQUEST_TIMEOUT,
            sessions: Vec::new(),
            config_sources: sources,
            runtime,
            // No session is placed here: only the attached one runs.
            agent: Arc::new(|wanted: &Wanted| {
                Arc::new(DemoAgent::new(Duration::ZERO, info_of(wanted))) as Arc<dyn Agent>
            }),
            ui: Arc::new(|wanted: &Wanted| {
                Arc::new(LabelledStderrUi::new(&wanted.name)) as Arc<dyn Ui>
            }),
            locks,
            clock: Arc::new(SystemClock),
            log,
            holder,
            gate,
            // `run`'s one session never hibernates: its terminal is there.
            hibernation: Hibernation::never(),
        },
    )
    .await?;
    Ok(node)
}

fn info_of(wanted: &Wanted) -> SessionInfo {
    SessionInfo {
        id: wanted.key.clone(),
        name: Some(wanted.name.clone()),
        cwd: wanted.cwd.clone(),
        accepts_images: true,
    }
}

/// Runs one cluster node until Ctrl-C or SIGTERM.
pub async fn run(component: &[u8], args: ServeArgs, cluster: ClusterArgs) -> anyhow::Result<()> {
    let (cwd, paths, state_dir) = process::process_paths()?;
    let sources = process::config_sources_in(&cwd)?;
    let prefix = Prefix::new(&cluster.prefix)?;
    let config = crate::native_guest::read_transports_natively(&sources);
    for note in &config.notes {
        tracing::warn!(target: TARGET, scope = "node", "config: {}", note.text);
    }
    let trust = decide_trust(&sources, &cluster)?;
    // What is wrong with the command line is said before anything is reached.
    let requests = messenger_requests(&config);
    match cluster.role {
        Role::Ingress if !args.demo.is_empty() => {
            bail!("--demo starts sessions, which session nodes run: use it with --role sessions")
        }
        Role::Ingress if args.dashboard => bail!(
            "--dashboard shows sessions, their chats, approvals and decisions, which live on the \
             session nodes: use it with --role sessions (the ingress serves /metrics, /healthz \
             and /readyz)"
        ),
        _ if requests.is_empty() => bail!(
            "the config enables no messenger, so the cluster has no bot to talk through: set \
             transports.telegram (or discord, slack, robo_claw) with \"enabled\": true"
        ),
        _ => {}
    }
    let metrics = args.metrics.map(|_| operator::metrics());
    let build = operator::counted_build(
        broker::build_from_environment(process::transport_state_dir(&paths.state_file)),
        metrics.as_ref(),
    );
    if cluster.role == Role::Ingress {
        // A missing token would leave the ingress "ready" with no bot: say it now.
        for request in &requests {
            let built = build(request);
            if built.transports.is_empty() {
                let why: Vec<String> = built.notes.into_iter().map(|(_, text)| text).collect();
                bail!("the ingress cannot hold {}: {}", request.id, why.join("; "));
            }
        }
    }
    let (client, jetstream) = crate::cluster::connect(&cluster.url, &trust.auth).await?;
    let holder = Holder::this_process();
    let log = operator::counted(
        Arc::new(TracingLog::for_node(&holder.description)),
        metrics.as_ref(),
    );
    let gate = Gate::new(trust.key.clone(), Arc::new(SystemClock), log.clone());
    let gate_for_metrics = gate.clone();
    let inbound = InboundSettings::for_lease_ttl(cluster.lock_ttl);
    let stop = async {
        let terminate = process::terminated();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = terminate => {}
        }
    };
    match cluster.role {
        Role::Ingress => {
            let ids: Vec<&str> = requests.iter().map(|r| r.id.as_str()).collect();
            let ingress = Ingress::start(
                client,
                jetstream,
                IngressOptions {
                    prefix,
                    lock_ttl: cluster.lock_ttl,
                    inbound,
                    requests: requests.clone(),
                    allowed: config
                        .bridge
                        .allow_users
                        .iter()
                        .map(|i| i.as_str().to_owned())
                        .collect(),
                    build,
                    holder: holder.clone(),
                    gate,
                    log,
                    forget_offline_after: cluster.forget_offline_after,
                },
            )
            .await?;
            if let Some(metrics) = &metrics {
                ingress.count_in(metrics.clone());
            }
            let _listener = operator::listen_for_node(
                args.metrics,
                metrics,
                &gate_for_metrics,
                ingress.probe(),
                None,
                None,
            )
            .await?;
            println!(
                "host-shim serve: ingress node ({}) ready for {}; it holds each bot whose lock \
                 is free and stands by for the others. Stop with Ctrl-C.",
                holder.description,
                ids.join(", ")
            );
            stop.await;
            ingress.shutdown().await;
        }
        Role::Sessions => {
            let limits = Limits {
                max_instances: args.max_sessions.saturating_add(1),
                ..Limits::default()
            };
            let runtime = Arc::new(
                Runtime::load(component, limits, Some(&state_dir.join("cache")))
                    .context("cannot load the component")?,
            );
            let cwd_text = cwd.display().to_string();
            let sessions: Vec<Wanted> = args
                .demo
                .iter()
                .map(|name| Wanted {
                    key: format!("serve:{name}"),
                    name: name.clone(),
                    cwd: cwd_text.clone(),
                })
                .collect();
            let pace = args.pace;
            let clock: Arc<dyn Clock> = Arc::new(SystemClock);
            let node = SessionNode::start(
                client,
                jetstream,
                SessionNodeOptions {
                    prefix,
                    lease_ttl: cluster.lock_ttl,
                    inbound,
                    request_timeout: REQUEST_TIMEOUT,
                    sessions,
                    config_sources: sources,
                    runtime,
                    agent: Arc::new(move |wanted: &Wanted| {
                        Arc::new(DemoAgent::new(pace, info_of(wanted))) as Arc<dyn Agent>
                    }),
                    ui: Arc::new(|wanted: &Wanted| {
                        Arc::new(LabelledStderrUi::new(&wanted.name)) as Arc<dyn Ui>
                    }),
                    locks: LockDir::new(&paths.lock_dir),
                    clock,
                    log,
                    holder: holder.clone(),
                    gate,
                    hibernation: match args.hibernate_after {
                        Some(after) => Hibernation::after(after, HibernatedCount::default()),
                        None => Hibernation::never(),
                    },
                },
            )
            .await?;
            let dashboard = match (args.dashboard, args.metrics, &metrics) {
                (true, Some(addr), Some(metrics)) => Some(operator::node_dashboard(
                    addr,
                    metrics,
                    node.dashboard_rows(),
                    node.probe(),
                )?),
                _ => None,
            };
            let _listener = operator::listen_for_node(
                args.metrics,
                metrics,
                &gate_for_metrics,
                node.probe(),
                Some(node.sessions_by_state()),
                dashboard,
            )
            .await?;
            // pi sessions on this machine attach here, as they would to a broker. A second
            // node in the same state directory (the README's one-machine setup) leaves them
            // to the first.
            let control_path = crate::disk::paths::control_socket_path(&state_dir);
            let listener = match attach::bind(&control_path).await? {
                Bound::Listening(listener) => Some(listener),
                Bound::AlreadyServed => None,
            };
            let demos = if args.demo.is_empty() {
                String::new()
            } else {
                format!("its share of {}; ", args.demo.join(", "))
            };
            let attached = match &listener {
                Some(_) => format!(
                    "the pi sessions of this machine, which attach through {}",
                    control_path.display()
                ),
                None => format!(
                    "no pi session (another node or broker answers on {}: pi sessions attach \
                     there)",
                    control_path.display()
                ),
            };
            println!(
                "host-shim serve: session node ({}) ready for {demos}{attached}. It takes over \
                 a dead node's demo sessions. Stop with Ctrl-C.",
                holder.description,
            );
            match listener {
                Some(listener) => {
                    let home = Arc::new(NodeHome {
                        attacher: node.attacher(),
                        machine: holder.description.clone(),
                    });
                    control::serve(listener, state_dir.clone(), home, stop).await;
                    let _ = std::fs::remove_file(&control_path);
                }
                None => stop.await,
            }
            node.shutdown().await;
        }
    }
    println!("host-shim serve: node stopped; its bots and sessions are free for the others.");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forget_offline_after_reads_days_hours_minutes_and_seconds_and_zero_is_never() {
        let table: [(&str, Result<Option<u64>, &str>); 10] = [
            ("7d", Ok(Some(7 * 86_400))),
            ("36h", Ok(Some(36 * 3_600))),
            ("90m", Ok(Some(5_400))),
            ("3600s", Ok(Some(3_600))),
            ("0", Ok(None)),
            ("0d", Ok(None)),
            ("59m", Err("at least 1h")),
            ("7", Err("whole number with a unit")),
            ("1.5d", Err("whole number with a unit")),
            ("7 days", Err("whole number with a unit")),
        ];
        for (text, expected) in table {
            match (parse_forget_after(text), expected) {
                (Ok(got), Ok(want)) => {
                    assert_eq!(got, want.map(Duration::from_secs), "{text}");
                }
                (Err(error), Err(needle)) => {
                    assert!(error.to_string().contains(needle), "{text}: {error}");
                }
                (got, want) => panic!("{text}: got {got:?}, wanted {want:?}"),
            }
        }
    }
}
