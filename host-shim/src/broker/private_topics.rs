//! Topics in private chats (docs/broker.md#topics-in-private-chats): where a bot makes
//! topics in its private chats (Telegram's `sessionTopics: "private"`), each session's topic
//! is made in the chat of every user paired with it, or allowed by its config: when the
//! session attaches, for the users paired then, and when a user pairs, for that user: heard
//! from the state database when the session saves the pairing
//! ([`crate::disk::state_db::StateDb::report_trusted_to`]), or at the user's next message.
//!
//! The decisions (names, kept names, what is said once) are [`super::topics`]'s, and the
//! making, resuming, ending and replacing of one topic is the broker's as for a topic in a
//! group; what is here is who gets one and when.

use std::sync::Arc;

use transport_core::TopicError;

use super::Broker;
use super::shared::{Shared, lock};
use super::topics::{self, TopicAt};

/// Whether the topic task key `bot` belongs to the bot `fingerprint`: its attach task
/// (the fingerprint itself) or a user's (the fingerprint, a line break, the user's chat).
pub(super) fn on_bot(bot: &str, fingerprint: &str) -> bool {
    bot.strip_prefix(fingerprint)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('\n'))
}

impl Broker {
    /// Opens `session`'s topic in the private chat of every user paired with it or allowed
    /// by its config (`allowUsers`) on `shared`'s bot, one after the other. The bot's topic
    /// mode being off (a missing right) ends the round: it is one switch for every chat,
    /// said once, and asking for each user would only hear it again.
    pub(super) async fn open_private_topics(&self, session: &str, shared: &Arc<Shared>) {
        let transport = shared.real.id().to_owned();
        let mut identities = self.paired_with_session(session);
        if let Some(allowed) = self.inner(|inner| {
            inner
                .sessions
                .get(session)
                .map(|s| s.allowed.to_vec())
        }) {
            identities.extend(allowed);
        }
        for chat in topics::private_chats(&transport, identities.iter().map(String::as_str)) {
            let problem = self.open_private_topic(session, shared, chat).await;
            if matches!(
                problem,
                Some(TopicError::MissingPermission(_) | TopicError::Unsupported(_))
            ) {
                break;
            }
        }
    }

    /// Opens `session`'s topic in the private chat `chat`, unless it is open there already
    /// (the attach and a user's pairing may ask at once: one topic, not two).
    async fn open_private_topic(
        &self,
        session: &str,
        shared: &Arc<Shared>,
        chat: String,
    ) -> Option<TopicError> {
        let _one_at_a_time = self.topic_replacing.lock().await;
        if self.inner(|inner| inner.topics.has_open_in(session, shared.real.id(), &chat)) {
            return None;
        }
        self.open_topic(session, shared, &TopicAt::PrivateChat(chat))
            .await
    }

    /// `identity` was found paired with `session` on the bot `fingerprint` (its chat was
    /// bound to the session while it paired): where the bot makes topics in private chats,
    /// the session's topic in that user's chat is made now. The users paired before had
    /// theirs made when the session attached.
    pub(super) fn user_paired(&self, fingerprint: &str, session: &str, identity: &str) {
        let Some(shared) = self.inner(|inner| inner.shared.get(fingerprint).cloned()) else {
            return;
        };
        if !shared.real.topics_in_private_chats() {
            return;
        }
        if let Some(chat) = topics::private_chats(shared.real.id(), [identity]).pop() {
            self.start_private_topic(session, &shared, chat);
        }
    }

    /// `session` saved a document trusting `trusted` (the state database tells each
    /// committed save): a user whose private chat with a bot that makes topics there is on
    /// its way to pairing with the session (bound to it until its sender pairs) and who is
    /// trusted now has just paired, and gets the session's topic at once rather than at
    /// their next message. Only such chats are looked at: a save without a stranger's
    /// private chat bound to its session costs one lookup.
    pub(super) fn trust_saved(&self, session: &str, trusted: &[String]) {
        if trusted.is_empty() {
            return;
        }
        let paired: Vec<(String, String)> = self.inner(|inner| {
            let Some(provisional) = inner.bindings.provisional_of(session) else {
                return Vec::new();
            };
            let mut paired = Vec::new();
            for (fingerprint, shared) in &inner.shared {
                let on_it = inner
                    .on_bot
                    .get(fingerprint)
                    .is_some_and(|sessions| sessions.contains(session));
                if !on_it || !shared.real.topics_in_private_chats() {
                    continue;
                }
                let prefix = format!("{}:", shared.real.id());
                // A private chat's id is its user's, so the chat's key is its sender's
                // identity (a group's chat is nobody's, and never trusted as such).
                paired.extend(
                    provisional
                        .iter()
                        .filter(|chat| chat.starts_with(&prefix))
                        .filter(|chat| trusted.iter().any(|identity| identity == *chat))
                        .map(|chat| (fingerprint.clone(), (*chat).to_owned())),
                );
            }
            paired
        });
        for (fingerprint, identity) in paired {
            self.user_paired(&fingerprint, session, &identity);
        }
    }

    /// Starts making `session`'s topic in the private chat `chat` off the path that found
    /// the user paired (a message's routing, a send): a slow platform holds neither up.
    fn start_private_topic(&self, session: &str, shared: &Arc<Shared>, chat: String) {
        let Some(broker) = self.me.upgrade() else {
            return;
        };
        if self.inner(|inner| inner.topics.has_open_in(session, shared.real.id(), &chat)) {
            return;
        }
        let key = (
            session.to_owned(),
            format!("{}\n{chat}", shared.fingerprint),
        );
        let mut tasks = lock(&self.topic_tasks);
        if tasks.get(&key).is_some_and(|task| !task.is_finished()) {
            return;
        }
        let (session, shared) = (session.to_owned(), shared.clone());
        let task = tokio::spawn(async move {
            broker.open_private_topic(&session, &shared, chat).await;
        });
        tasks.insert(key, task);
    }
}

#[cfg(test)]
mod tests {
    use super::on_bot;

    #[test]
    fn a_task_key_belongs_to_its_own_bot_only() {
        assert!(on_bot("Telegram{a}", "Telegram{a}"));
        assert!(on_bot("Telegram{a}\n4242", "Telegram{a}"));
        // Another bot whose fingerprint starts like this one's is not this one.
        assert!(!on_bot("Telegram{a}x", "Telegram{a}"));
        assert!(!on_bot("Telegram{b}\n4242", "Telegram{a}"));
    }
}
