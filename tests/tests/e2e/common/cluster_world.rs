//! A cluster under test, as the cluster's end-to-end tests share it: a real nats-server,
//! one Telegram bot on a loopback Bot API (its real wire), ingresses and session nodes
//! started as `serve --nats` starts them, demo agents that echo their prompt, and the waits
//! those tests repeat (a node running its sessions, a prompt reaching its agent, a session
//! leaving the directory, a notice posted once).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use host_shim::agent::{Agent, DemoAgent};
use host_shim::cluster::bot_lock::Holder;
use host_shim::cluster::inbound::InboundSettings;
use host_shim::cluster::ingress::{Ingress, IngressOptions};
use host_shim::cluster::seal::Gate;
use host_shim::cluster::session_node::{SessionNode, SessionNodeOptions, Wanted};
use host_shim::cluster::state_store::{KvStateStore, Loaded};
use host_shim::cluster::subjects::{Prefix, session_consumer, session_token};
use host_shim::commands::cluster::messenger_requests;
use host_shim::commands::operator;
use host_shim::local::clock::SystemClock;
use host_shim::local::logging::MemoryLog;
use host_shim::local::ui::{RecordingUi, Ui};
use host_shim::ops::metrics::Metrics;
use host_shim::wit::agent::SessionInfo;
use host_shim::wit::session::ConfigSource;
use transport_testing::telegram::{BotApiServer, private_text};

use crate::common::cluster::{self, NatsServer, eventually, prefix};
use crate::common::{Dirs, WAIT, build_with_env, runtime, user_config};

pub(crate) const USER: i64 = 4242;
/// A dead node's locks and leases age out this fast here (15 s in production).
pub(crate) const TTL: Duration = Duration::from_secs(1);

fn inbound(ttl: Duration) -> InboundSettings {
    InboundSettings::for_lease_ttl(ttl)
}

/// Every node's log, by who wrote it (`ingress` or the node's name).
pub(crate) type NodeLogs = Arc<Mutex<Vec<(String, Arc<MemoryLog>)>>>;

/// Every demo agent made, by node and session key.
pub(crate) type Agents = Arc<Mutex<HashMap<(String, String), Arc<DemoAgent>>>>;

pub(crate) struct Cluster {
    pub(crate) nats: NatsServer,
    pub(crate) bot: BotApiServer,
    pub(crate) prefix: Prefix,
    dirs: Dirs,
    sources: Vec<ConfigSource>,
    /// Every agent a session node made, by node and session, so a test can see who ran
    /// what.
    pub(crate) agents: Agents,
    /// The nodes' gate (one, so the test reads every node's refusals in one count).
    pub(crate) gate: Gate,
    /// The bot locks' and session leases' TTL (the operator's `--lock-ttl`).
    pub(crate) ttl: Duration,
    /// How long a session node's send waits for the ingress.
    pub(crate) request_timeout: Duration,
    /// Every node's log lines, by who wrote them (`ingress` or the node's name).
    pub(crate) logs: NodeLogs,
    /// The ingress's `--forget-offline-after` (never unless a test sets it).
    pub(crate) forget_offline_after: Option<Duration>,
    /// The ingress's "environment": the bots' token variables and their values.
    env: Vec<(String, String)>,
}

impl Cluster {
    pub(crate) async fn new(nats: NatsServer, name: &str) -> Cluster {
        Cluster::with_ttl(nats, name, TTL).await
    }

    /// A cluster whose locks and leases live `ttl`.
    pub(crate) async fn with_ttl(nats: NatsServer, name: &str, ttl: Duration) -> Cluster {
        Cluster::configured(nats, name, ttl, |_| {}).await
    }

    /// A cluster whose locks and leases live `ttl`, its config changed by `edit`.
    pub(crate) async fn configured(
        nats: NatsServer,
        name: &str,
        ttl: Duration,
        edit: impl FnOnce(&mut serde_json::Value),
    ) -> Cluster {
        let bot = BotApiServer::start().await;
        let mut config = cluster::telegram_cluster_config(&bot.base_url(), USER);
        edit(&mut config);
        let env = vec![("TG_TEST_TOKEN".to_owned(), bot.token())];
        Cluster {
            env,
            nats,
            bot,
            prefix: prefix(name),
            dirs: Dirs::new(),
            sources: vec![user_config(&config.to_string())],
            agents: Arc::default(),
            gate: cluster::gate(),
            ttl,
            request_timeout: Duration::from_secs(5),
            logs: Arc::default(),
            forget_offline_after: None,
        }
    }

    /// This cluster, its ingress's environment also holding `name` = `value` (another
    /// platform's token).
    pub(crate) fn with_env(mut self, name: &str, value: String) -> Cluster {
        self.env.push((name.to_owned(), value));
        self
    }

    pub(crate) async fn ingress(&self) -> Ingress {
        self.ingress_counted(None).await
    }

    /// An ingress whose bots are counted in `metrics`, wrapped as `serve --nats --metrics`
    /// wraps them (`operator::counted_build`).
    pub(crate) async fn ingress_counted(&self, metrics: Option<&Arc<Metrics>>) -> Ingress {
        let client = self.nats.connect().await;
        let jetstream = host_shim::cluster::async_nats::jetstream::new(client.clone());
        let config = host_shim::native_guest::read_transports_natively(&self.sources);
        Ingress::start(
            client,
            jetstream,
            IngressOptions {
                prefix: self.prefix.clone(),
                lock_ttl: self.ttl,
                inbound: inbound(self.ttl),
                requests: messenger_requests(&config),
                // As `serve --nats` reads it: the config's `allowUsers`.
                allowed: host_shim::native_guest::read_config_natively(&self.sources)
                    .bridge
                    .allow_users
                    .iter()
                    .map(|identity| identity.as_str().to_owned())
                    .collect(),
                // The token comes from the "environment" only, as in production.
                build: operator::counted_build(
                    build_with_env(self.env.clone(), self.dirs.dir.path().to_path_buf()),
                    metrics,
                ),
                holder: Holder::this_process(),
                gate: self.gate.clone(),
                log: self.log_for("ingress"),
                forget_offline_after: self.forget_offline_after,
            },
        )
        .await
        .expect("ingress starts")
    }

    /// A session node called `node` for `sessions`; its demo agents take `pace` per step.
    pub(crate) async fn node(&self, node: &str, sessions: &[&str], pace: Duration) -> SessionNode {
        self.start_node(self.node_options(node, sessions, pace))
            .await
            .expect("session node starts")
    }

    pub(crate) async fn start_node(
        &self,
        options: SessionNodeOptions,
    ) -> Result<SessionNode, String> {
        let client = self.nats.connect().await;
        let jetstream = host_shim::cluster::async_nats::jetstream::new(client.clone());
        SessionNode::start(client, jetstream, options)
            .await
            .map_err(|error| error.to_string())
    }

    pub(crate) fn node_options(
        &self,
        node: &str,
        sessions: &[&str],
        pace: Duration,
    ) -> SessionNodeOptions {
        let agents = self.agents.clone();
        let node_name = node.to_owned();
        SessionNodeOptions {
            prefix: self.prefix.clone(),
            lease_ttl: self.ttl,
            inbound: inbound(self.ttl),
            request_timeout: self.request_timeout,
            sessions: sessions
                .iter()
                .map(|name| Wanted {
                    key: format!("serve:{name}"),
                    name: (*name).to_owned(),
                    cwd: format!("/work/{name}"),
                })
                .collect(),
            config_sources: self.sources.clone(),
            runtime: runtime(),
            agent: Arc::new(move |wanted: &Wanted| {
                let agent = Arc::new(DemoAgent::new(
                    pace,
                    SessionInfo {
                        id: wanted.key.clone(),
                        name: Some(wanted.name.clone()),
                        cwd: wanted.cwd.clone(),
                        accepts_images: true,
                    },
                ));
                agents
                    .lock()
                    .unwrap()
                    .insert((node_name.clone(), wanted.key.clone()), agent.clone());
                agent as Arc<dyn Agent>
            }),
            ui: Arc::new(|_: &Wanted| Arc::new(RecordingUi::default()) as Arc<dyn Ui>),
            locks: self.dirs.locks(),
            clock: Arc::new(SystemClock),
            log: self.log_for(node),
            // A fixed id: placement hashes it, so where each session runs is the same
            // on every run of the test.
            holder: Holder {
                id: node.to_owned(),
                description: node.to_owned(),
            },
            gate: self.gate.clone(),
            hibernation: host_shim::sandbox::hibernation::Hibernation::never(),
        }
    }

    /// The config every session of the cluster reads (one user config).
    pub(crate) fn sources(&self) -> Vec<ConfigSource> {
        self.sources.clone()
    }

    /// A new log for a node called `who`, kept for [`Cluster::log_lines`].
    fn log_for(&self, who: &str) -> Arc<MemoryLog> {
        let log = Arc::new(MemoryLog::default());
        self.logs
            .lock()
            .unwrap()
            .push((who.to_owned(), log.clone()));
        log
    }

    /// Every node's log lines so far, as `who: event fields`.
    pub(crate) fn log_lines(&self) -> Vec<String> {
        self.logs
            .lock()
            .unwrap()
            .iter()
            .flat_map(|(who, log)| {
                log.lines()
                    .into_iter()
                    .map(move |(_, line)| format!("{who}: {} {:?}", line.event, line.fields))
            })
            .collect()
    }

    /// Queues a private message and waits for a sent message holding `expect`.
    pub(crate) async fn say(&self, message_id: i64, text: &str, expect: &str) -> String {
        self.say_update(private_text(USER, message_id, text), expect)
            .await
    }

    /// As [`Cluster::say`], dated now: a stranger's message must be new to be answered
    /// with a pairing challenge (older ones may be a backlog replayed at start).
    pub(crate) async fn say_now(&self, message_id: i64, text: &str, expect: &str) -> String {
        let mut update = private_text(USER, message_id, text);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is after 1970")
            .as_secs();
        update["message"]["date"] = serde_json::json!(now);
        self.say_update(update, expect).await
    }

    async fn say_update(&self, update: serde_json::Value, expect: &str) -> String {
        let text = update["message"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let before = self.bot.sent().len();
        self.bot.queue_update(update);
        let found = self
            .bot
            .wait_until(WAIT, |s| {
                s.sent()[before..].iter().any(|m| m.text.contains(expect))
            })
            .await;
        assert!(
            found,
            "no {expect:?} after {text:?}: {:#?}",
            self.bot.sent()
        );
        self.bot.sent()[before..]
            .iter()
            .find(|m| m.text.contains(expect))
            .map(|m| m.text.clone())
            .unwrap_or_default()
    }

    /// Sent messages holding `needle`.
    pub(crate) fn sent_with(&self, needle: &str) -> usize {
        self.bot
            .sent()
            .iter()
            .filter(|m| m.text.contains(needle))
            .count()
    }

    /// Waits until `session`'s consumer has nothing unacked or waiting: every message it
    /// was sent has had its effect, so nothing more can come of it.
    pub(crate) async fn drained(&self, session: &str) {
        let jetstream = self.nats.jetstream().await;
        let name = session_consumer(session);
        let stream = self.prefix.inbound_stream();
        eventually(&format!("{session}'s inbound all acked"), || {
            let jetstream = jetstream.clone();
            let (name, stream) = (name.clone(), stream.clone());
            async move {
                let stream = jetstream.get_stream(&stream).await.ok()?;
                let info = stream.consumer_info(&name).await.ok()?.clone();
                (info.num_ack_pending == 0 && info.num_pending == 0).then_some(())
            }
        })
        .await;
    }

    /// A session node called `node` for `sessions`, whose demo agents answer at once, once
    /// it runs every one of them.
    pub(crate) async fn node_running(&self, node: &str, sessions: &[&str]) -> SessionNode {
        let started = self.node(node, sessions, Duration::ZERO).await;
        runs(&started, sessions.len()).await;
        started
    }

    /// The demo agent `node` made for session `key` (`serve:<name>`), if it made one.
    pub(crate) fn agent(&self, node: &str, key: &str) -> Option<Arc<DemoAgent>> {
        self.agents
            .lock()
            .unwrap()
            .get(&(node.to_owned(), key.to_owned()))
            .cloned()
    }

    /// What the agent of session `key` on `node` was asked last; panics if `node` made no
    /// agent for it.
    pub(crate) fn last_prompt(&self, node: &str, key: &str) -> Option<String> {
        self.agent(node, key)
            .unwrap_or_else(|| panic!("{node} made no agent for {key}"))
            .recent_work()
            .last_prompt
    }

    /// Waits until the agent of session `key` on `node` was last asked `prompt`.
    pub(crate) async fn prompted(&self, node: &str, key: &str, prompt: &str) {
        eventually(&format!("{prompt:?} reaches {key} on {node}"), || async {
            let agent = self.agent(node, key)?;
            (agent.recent_work().last_prompt.as_deref() == Some(prompt)).then_some(())
        })
        .await;
    }

    /// Session `key` leaves the directory, as `nats kv del` on its entry does.
    pub(crate) async fn leaves(&self, key: &str) {
        self.nats
            .jetstream()
            .await
            .get_key_value(self.prefix.session_bucket())
            .await
            .expect("the sessions bucket")
            .delete(session_token(key))
            .await
            .expect("entry deleted");
    }

    /// Waits for a message of the bot holding `needle`; panics with all it sent.
    pub(crate) async fn posted(&self, needle: &str) {
        let found = self
            .bot
            .wait_until(WAIT, |s| s.sent().iter().any(|m| m.text.contains(needle)))
            .await;
        assert!(found, "no {needle:?} posted: {:#?}", self.bot.sent());
    }

    /// What the cluster's state bucket holds for session `key`.
    pub(crate) async fn kept_state(&self, key: &str) -> Loaded {
        KvStateStore::open(&self.nats.jetstream().await, &self.prefix, &self.gate)
            .await
            .expect("state bucket")
            .load(key)
            .await
            .expect("load")
    }

    /// Waits until the bot confirmed every update queued at it: the ingress holding it
    /// stored each in JetStream.
    pub(crate) async fn confirmed(&self) {
        let confirmed = self
            .bot
            .wait_until(WAIT, |s| s.pending_updates() == 0)
            .await;
        assert!(
            confirmed,
            "{} update(s) never confirmed: {:#?}",
            self.bot.pending_updates(),
            self.log_lines()
        );
    }

    /// Waits for the demo agent's answer to `prompt`.
    pub(crate) async fn answered(&self, prompt: &str) {
        let found = self
            .bot
            .wait_until(WAIT, |s| {
                s.sent()
                    .iter()
                    .any(|m| m.text.contains("You asked") && m.text.contains(prompt))
            })
            .await;
        assert!(found, "{prompt:?} not answered: {:#?}", self.bot.sent());
    }

    /// Watches the bot for `within` and fails if it posts `needle` a second time: a notice
    /// the ingress's later looks must not repeat.
    pub(crate) async fn not_posted_again(&self, needle: &str, within: Duration) {
        let again = self
            .bot
            .wait_until(within, |s| {
                s.sent().iter().filter(|m| m.text.contains(needle)).count() > 1
            })
            .await;
        assert!(!again, "{needle:?} posted twice: {:#?}", self.bot.sent());
    }
}

/// Waits until `node` runs `count` sessions.
pub(crate) async fn runs(node: &SessionNode, count: usize) {
    eventually(&format!("the node runs {count} session(s)"), || async {
        (node.running().len() == count).then_some(())
    })
    .await;
}
