//! Where one attached session takes the messages of each shared bot it started.

use std::sync::Arc;

use transport_core::InboundSink;

/// A session's inbound sinks, by the shared bot's fingerprint. A short list, not a
/// `HashMap<String, _>`: a session starts one bot or two, and the map's first four buckets
/// plus its own copy of each fingerprint (the bot's request, printed) were kept by every
/// attached session for its whole life, 100,000 of them on a node of hibernated sessions
/// (docs/scaling.md#idle-sessions). The fingerprint is the bot's own (`Shared`), shared.
#[derive(Default)]
pub(super) struct SessionSinks(Vec<(Arc<str>, InboundSink)>);

impl SessionSinks {
    /// The sink for the bot `fingerprint`.
    pub(super) fn get(&self, fingerprint: &str) -> Option<&InboundSink> {
        self.0
            .iter()
            .find(|(bot, _)| **bot == *fingerprint)
            .map(|(_, sink)| sink)
    }

    /// The session takes the bot `fingerprint`'s messages.
    pub(super) fn contains_key(&self, fingerprint: &str) -> bool {
        self.get(fingerprint).is_some()
    }

    /// `sink` takes the bot `fingerprint`'s messages from now on, in place of any before.
    pub(super) fn insert(&mut self, fingerprint: Arc<str>, sink: InboundSink) {
        self.remove(&fingerprint);
        self.0.push((fingerprint, sink));
        // A vector grows to room for four at its first push; the entry is kept for the
        // session's whole life.
        self.0.shrink_to_fit();
    }

    /// The session takes no more of the bot `fingerprint`'s messages.
    pub(super) fn remove(&mut self, fingerprint: &str) {
        self.0.retain(|(bot, _)| **bot != *fingerprint);
    }

    /// The bots the session takes messages from, in the order it started them.
    pub(super) fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(bot, _)| &**bot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport_core::{Envelope, Inbound, inbound};

    /// A sink whose messages can be told apart by the stream they reach.
    fn sink() -> (InboundSink, inbound::InboundStream) {
        inbound::channel(4)
    }

    async fn reaches(sink: &InboundSink, stream: &mut inbound::InboundStream) -> bool {
        sink.deliver(Envelope::default()).await.expect("open");
        matches!(stream.try_recv(), Ok(Inbound::Message { .. }))
    }

    #[tokio::test]
    async fn each_bot_finds_its_own_sink() {
        let mut sinks = SessionSinks::default();
        let (telegram, mut from_telegram) = sink();
        let (discord, mut from_discord) = sink();
        sinks.insert("telegram-bot".into(), telegram);
        sinks.insert("discord-bot".into(), discord);
        assert!(sinks.contains_key("telegram-bot") && sinks.contains_key("discord-bot"));
        assert!(!sinks.contains_key("slack-bot"));
        assert!(!sinks.contains_key("telegram"), "a prefix is another bot");
        let to_telegram = sinks.get("telegram-bot").expect("kept");
        assert!(reaches(to_telegram, &mut from_telegram).await);
        assert!(
            from_discord.try_recv().is_err(),
            "nothing reached the other bot's"
        );
        let to_discord = sinks.get("discord-bot").expect("kept");
        assert!(reaches(to_discord, &mut from_discord).await);
        assert_eq!(
            sinks.keys().collect::<Vec<_>>(),
            ["telegram-bot", "discord-bot"]
        );
    }

    #[tokio::test]
    async fn a_sink_replaced_or_removed_takes_nothing_more() {
        let mut sinks = SessionSinks::default();
        let (old, mut from_old) = sink();
        let (new, mut from_new) = sink();
        sinks.insert("bot".into(), old);
        sinks.insert("bot".into(), new);
        assert_eq!(sinks.keys().count(), 1, "one sink per bot");
        assert!(reaches(sinks.get("bot").expect("kept"), &mut from_new).await);
        assert!(from_old.try_recv().is_err());
        sinks.remove("bot");
        assert!(sinks.get("bot").is_none());
        assert_eq!(sinks.keys().count(), 0);
    }
}
