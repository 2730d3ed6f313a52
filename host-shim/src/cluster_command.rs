//! `host-shim serve --nats <url> --role ingress|sessions`: one node of a cluster on NATS
//! JetStream (issue 16 §2, docs/scaling.md). The ingress holds the bots its config asks
//! for (one node per bot at a time, the others standing by); session nodes run the
//! `--demo` sessions placed on them. State, bindings and the list of sessions live in
//! JetStream, so any node can stop and another carries on.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::agent::{Agent, DemoAgent};
use crate::bindings::agent::SessionInfo;
use crate::bindings::session::TransportRequest;
use crate::broker;
use crate::clock::{Clock, SystemClock};
use crate::cluster::bot_lock::Holder;
use crate::cluster::inbound::InboundSettings;
use crate::cluster::ingress::{Ingress, IngressOptions};
use crate::cluster::session_node::{SessionNode, SessionNodeOptions, Wanted};
use crate::cluster::subjects::Prefix;
use crate::lock::LockDir;
use crate::logging::{LogSink, StderrLog};
use crate::offline;
use crate::runtime::{Limits, Runtime};
use crate::serve_command::ServeArgs;
use crate::ui::{LabelledStderrUi, Ui};

/// What a cluster node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Holds the bots (platform connections) and routes their messages.
    Ingress,
    /// Runs sessions, talking through the ingress.
    Sessions,
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
}

/// How long a send through the ingress may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The validated transport requests of `config` (the messengers only).
pub fn messenger_requests(config: &guest::core::config::LoadedConfig) -> Vec<TransportRequest> {
    config
        .transports
        .iter()
        .filter(|r| r.id != "terminal")
        .map(|r| TransportRequest {
            id: r.id.clone(),
            required: r.required,
            settings_json: r.settings_json.clone(),
        })
        .collect()
}

/// Runs one cluster node until Ctrl-C or SIGTERM.
pub async fn run(component: &[u8], args: ServeArgs, cluster: ClusterArgs) -> anyhow::Result<()> {
    let (cwd, paths, state_dir) = crate::attach_command::process_paths()?;
    let sources = crate::attach_command::config_sources(&cwd)?;
    let prefix = Prefix::new(&cluster.prefix)?;
    let config = crate::convert::read_transports_natively(&sources);
    for note in &config.notes {
        eprintln!("[node] config: {}", note.text);
    }
    // What is wrong with the command line is said before anything is reached.
    let requests = messenger_requests(&config);
    match cluster.role {
        Role::Ingress if !args.demo.is_empty() => {
            bail!("--demo starts sessions, which session nodes run: use it with --role sessions")
        }
        Role::Sessions if args.demo.is_empty() => bail!(
            "a session node runs the sessions it is given: add --demo <name> for each (every \
             session node of the cluster gets the same list)"
        ),
        _ if requests.is_empty() => bail!(
            "the config enables no messenger, so the cluster has no bot to talk through: set \
             transports.telegram (or discord, slack, robo_claw) with \"enabled\": true"
        ),
        _ => {}
    }
    let build = broker::build_from_environment(offline::transport_state_dir(&paths.state_file));
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
    let (client, jetstream) = crate::cluster::connect(&cluster.url).await?;
    let log: Arc<dyn LogSink> = Arc::new(StderrLog::new(args.debug));
    let holder = Holder::this_process();
    let inbound = InboundSettings::for_lease_ttl(cluster.lock_ttl);
    let stop = async {
        let terminate = crate::attach_command::terminated();
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
                    log,
                },
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
                        let info = SessionInfo {
                            id: wanted.key.clone(),
                            name: Some(wanted.name.clone()),
                            cwd: wanted.cwd.clone(),
                            accepts_images: true,
                        };
                        Arc::new(DemoAgent::new(pace, info)) as Arc<dyn Agent>
                    }),
                    ui: Arc::new(|wanted: &Wanted| {
                        Arc::new(LabelledStderrUi::new(&wanted.name)) as Arc<dyn Ui>
                    }),
                    locks: LockDir::new(&paths.lock_dir),
                    clock,
                    log,
                    holder: holder.clone(),
                },
            )
            .await?;
            println!(
                "host-shim serve: session node ({}) ready for {}; it runs its share of them and \
                 takes over a dead node's. Stop with Ctrl-C.",
                holder.description,
                args.demo.join(", ")
            );
            stop.await;
            node.shutdown().await;
        }
    }
    println!("host-shim serve: node stopped; its bots and sessions are free for the others.");
    Ok(())
}
