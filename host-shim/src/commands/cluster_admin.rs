//! `host-shim cluster sessions|forget`: an operator's look at a cluster's directory of
//! sessions, and forgetting a session that left for good (docs/scaling.md#forgetting-a-session).
//! The command logs in and holds the cluster key as a node does (the same flags, the same
//! `cluster` object of the user's config), so it can open the sealed entries.

use std::sync::Arc;

use anyhow::{Context as _, bail};

use crate::broker::routing::{self, SessionState};
use crate::cluster::bot_lock::Holder;
use crate::cluster::directory::{Directory, ForgetReason, PresenceReader, state_of};
use crate::cluster::forgetting;
use crate::cluster::seal::Gate;
use crate::cluster::subjects::{Prefix, session_token};
use crate::commands::cluster::{TrustFlags, decide_trust_for};
use crate::commands::process;
use crate::local::clock::{Clock, SystemClock};
use crate::local::logging::TracingLog;

/// What `host-shim cluster` does.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Action {
    /// List every session in the cluster's directory: name@machine, directory, state (idle,
    /// busy, offline with when it was last seen, or forgotten) and key.
    Sessions {
        /// Where the cluster is.
        #[command(flatten)]
        at: Reach,
    },
    /// Forget a session that left for good (its pi will not come back, a demo removed from
    /// every node's --demo list): it leaves /sessions, the messages waiting for it are
    /// dropped, and at the ingress's next look its topic ends and each chat bound to it is
    /// told once. Its saved state is kept (if it comes back it is paired as before) unless
    /// --delete-state. A session a live node runs is refused: stop it there first.
    Forget {
        /// The session: its name, name@machine, its key, or its token (s…), as
        /// `host-shim cluster sessions` shows them.
        session: String,
        /// Also delete its saved state (pairings, remembered chats): if it comes back, it
        /// starts unpaired. Also works on a session forgotten before.
        #[arg(long)]
        delete_state: bool,
        /// Where the cluster is.
        #[command(flatten)]
        at: Reach,
    },
}

/// The cluster a `host-shim cluster` command works on, and how it logs in.
#[derive(Debug, Clone, clap::Args)]
pub struct Reach {
    /// The cluster's NATS server.
    #[arg(long, value_name = "URL")]
    pub nats: String,
    /// The cluster's name on NATS (one subject token), as its nodes' --prefix.
    #[arg(long, default_value = "botconnect", value_name = "NAME")]
    pub prefix: String,
    /// How this command logs in and the cluster key, as for the nodes.
    #[command(flatten)]
    pub trust: TrustFlags,
}

impl Action {
    fn reach(&self) -> &Reach {
        match self {
            Action::Sessions { at } | Action::Forget { at, .. } => at,
        }
    }
}

/// Runs one `host-shim cluster` command, printing what it found or did.
pub async fn run(action: Action) -> anyhow::Result<()> {
    let at = action.reach();
    let (cwd, _, _) = process::process_paths()?;
    let sources = process::config_sources_in(&cwd)?;
    let prefix = Prefix::new(&at.prefix)?;
    let trust = decide_trust_for(&sources, &at.nats, &at.trust)?;
    let (_client, jetstream) = crate::cluster::connect(&at.nats, &trust.auth).await?;
    // Opening the directory would make its buckets: a mistyped --prefix must say so
    // instead of reading an empty cluster into being.
    let bucket = prefix.session_bucket();
    if jetstream.get_key_value(&bucket).await.is_err() {
        bail!(
            "there is no cluster called {:?} on {}: its bucket {bucket} does not exist. Pass the \
             --prefix its nodes were started with",
            prefix.as_str(),
            crate::cluster::redacted(&at.nats)
        );
    }
    let holder = Holder::this_process();
    let log = Arc::new(TracingLog::for_node(&holder.description));
    let gate = Gate::new(trust.key.clone(), Arc::new(SystemClock), log);
    let directory = Directory::open(&jetstream, &prefix, &gate).await?;
    let presence = PresenceReader::new(jetstream.clone(), &prefix)
        .read()
        .await?;
    let entries = directory.entries().await?;
    let now = SystemClock.now_ms();
    match &action {
        Action::Sessions { .. } => {
            if entries.is_empty() {
                println!("No sessions in cluster {:?}.", prefix.as_str());
            }
            for listed in &entries {
                println!("{}", forgetting::line(listed, &presence, now));
            }
            Ok(())
        }
        Action::Forget {
            session,
            delete_state,
            ..
        } => {
            let listed = forgetting::resolve(session, &entries)?;
            let label = forgetting::label(listed);
            let key = listed.entry.key.clone();
            if let Some(forgotten) = &listed.entry.forgotten {
                if !delete_state {
                    println!(
                        "{label} was forgotten already ({}); nothing to do. --delete-state \
                         deletes its saved state too.",
                        forgetting::why_text(forgotten.why)
                    );
                    return Ok(());
                }
            } else {
                let state = state_of(&listed.entry, &presence);
                if state != SessionState::Offline {
                    bail!(
                        "{label} is running ({}, on node {}), and its node would list it again at \
                         once. Stop it there first (quit its pi, or take it out of that node's \
                         --demo list and restart the node), then forget it",
                        if state == SessionState::Busy {
                            "busy"
                        } else {
                            "idle"
                        },
                        listed.entry.node
                    );
                }
                let seen = routing::ago(listed.ago(now, false));
                let forgot = forgetting::forget(
                    &jetstream,
                    &prefix,
                    &directory,
                    listed,
                    ForgetReason::Operator,
                )
                .await?;
                println!(
                    "Forgot {label} (offline, last seen {seen}); {} message(s) waiting for it \
                     were dropped. The ingress holding the bot ends its topic and tells each chat \
                     bound to it at its next look (within a third of its --lock-ttl).",
                    forgot.dropped
                );
            }
            if *delete_state {
                delete_saved_state(&jetstream, &prefix, &key).await?;
                println!("Its saved state (pairings, remembered chats) was deleted.");
            } else {
                println!(
                    "Its saved state (pairings, remembered chats) is kept: if it comes back it is \
                     listed again, paired as before. `host-shim cluster forget {} \
                     --delete-state` deletes it.",
                    shell_word(&label)
                );
            }
            Ok(())
        }
    }
}

/// Removes every revision of a session's state document.
async fn delete_saved_state(
    jetstream: &crate::cluster::async_nats::jetstream::Context,
    prefix: &Prefix,
    session_key: &str,
) -> anyhow::Result<()> {
    let bucket = prefix.state_bucket();
    let Ok(store) = jetstream.get_key_value(&bucket).await else {
        // No session ever saved anything here.
        return Ok(());
    };
    store
        .purge(session_token(session_key))
        .await
        .with_context(|| format!("could not delete the saved state in bucket {bucket}"))
}

/// `text` as one shell word: quoted when it holds anything but plain characters.
fn shell_word(text: &str) -> String {
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "@._-:/".contains(c))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_is_quoted_for_the_shell_only_when_it_must_be() {
        assert_eq!(shell_word("api@build.example"), "api@build.example");
        assert_eq!(shell_word("my api@laptop"), "'my api@laptop'");
        assert_eq!(shell_word("it's@x"), r"'it'\''s@x'");
    }
}
