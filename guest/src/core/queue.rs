//! The queue of prompts forwarded as follow-ups and not yet started, by the chat each came
//! from, kept apart from the state document: the store holds one entry per prompt, and a
//! save hands over only what changed since the last one (entries that left the front,
//! entries added at the end). A prompt queued behind ten thousand others used to rewrite
//! all ten thousand (24 ms a message); now it writes one.

use std::collections::VecDeque;

use serde_json::Value;

use crate::core::state::{
    ConversationTarget, MAX_ENTRIES, PromptMark, parse_marked_target, target_entry,
};

/// One prompt waiting for its turn: the chat it came from and, where the platform has one,
/// its message id (what its reactions and its turn's done message name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedPrompt {
    /// The chat it came from.
    pub target: ConversationTarget,
    /// The platform's id of the message.
    pub message_id: Option<String>,
}

impl QueuedPrompt {
    /// Its message, when the platform gave it an id.
    pub fn mark(&self) -> Option<PromptMark> {
        Some(PromptMark {
            target: self.target.clone(),
            message_id: self.message_id.clone()?,
        })
    }
}

/// The queue, oldest first, with what changed since it was loaded or saved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptQueue {
    entries: VecDeque<QueuedPrompt>,
    /// How many of the front entries the store holds (the rest were added since).
    stored: usize,
    /// Entries the store holds that left the front since the last save.
    dequeued: u32,
}

/// What a save must write for the queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueChanges {
    /// Entries that left the front of the stored queue.
    pub dequeued: u32,
    /// Entries to add at its end, oldest first, in the stored shape.
    pub enqueued: Vec<String>,
}

impl PromptQueue {
    /// The queue as the store holds it, with a warning for each entry that could not be
    /// read. Unreadable entries and those past [`MAX_ENTRIES`] are dropped from the store
    /// at the next save (all stored entries are written again), so what the store holds
    /// and what the bridge counts never drift apart.
    pub fn load(stored: &[String], base: &str) -> (PromptQueue, Vec<String>) {
        let mut warnings = Vec::new();
        let mut entries = VecDeque::with_capacity(stored.len().min(MAX_ENTRIES));
        for (i, entry) in stored.iter().enumerate() {
            if i == MAX_ENTRIES {
                warnings.push(format!(
                    "{base}.queued: more than {MAX_ENTRIES} entries, the rest ignored"
                ));
                break;
            }
            match serde_json::from_str::<Value>(entry)
                .ok()
                .as_ref()
                .and_then(parse_marked_target)
            {
                Some((target, message_id)) => {
                    entries.push_back(QueuedPrompt { target, message_id })
                }
                None => warnings.push(format!("{base}.queued[{i}]: malformed target, ignored")),
            }
        }
        let queue = if warnings.is_empty() {
            PromptQueue {
                stored: entries.len(),
                entries,
                dequeued: 0,
            }
        } else {
            PromptQueue {
                entries,
                stored: 0,
                dequeued: u32::try_from(stored.len()).unwrap_or(u32::MAX),
            }
        };
        (queue, warnings)
    }

    /// Adds the entries of a document saved before the queue had entries of its own (its
    /// `queued` array, read by [`crate::core::state::parse_legacy_queue`]): they are
    /// written as entries at the next save.
    pub fn adopt(&mut self, targets: Vec<ConversationTarget>) {
        for target in targets {
            self.push(target, None);
        }
    }

    /// The queued prompts' chats, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &ConversationTarget> {
        self.entries.iter().map(|entry| &entry.target)
    }

    /// The queued prompts, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = &QueuedPrompt> {
        self.entries.iter()
    }

    /// How many prompts wait.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no prompt waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Queues a prompt from `target`'s chat, with its message id when it has one.
    pub fn push(&mut self, target: ConversationTarget, message_id: Option<String>) {
        self.entries.push_back(QueuedPrompt { target, message_id });
    }

    /// The oldest prompt, removed.
    pub fn pop_front(&mut self) -> Option<QueuedPrompt> {
        let front = self.entries.pop_front()?;
        if self.stored > 0 {
            self.stored -= 1;
            self.dequeued = self.dequeued.saturating_add(1);
        }
        Some(front)
    }

    /// Keeps only the prompts `keep` says yes to. The stored queue is written again whole at
    /// the next save (a shutdown's cleanup; never on the path of a message).
    pub fn retain(&mut self, mut keep: impl FnMut(&ConversationTarget) -> bool) {
        let before = self.entries.len();
        self.entries.retain(|entry| keep(&entry.target));
        if self.entries.len() != before {
            self.dequeued = self
                .dequeued
                .saturating_add(u32::try_from(self.stored).unwrap_or(u32::MAX));
            self.stored = 0;
        }
    }

    /// Forgets every queued prompt, handing back the messages they came from (each of
    /// them is owed a "failed" reaction: it will never run).
    pub fn clear(&mut self) -> Vec<PromptMark> {
        self.dequeued = self
            .dequeued
            .saturating_add(u32::try_from(self.stored).unwrap_or(u32::MAX));
        self.stored = 0;
        self.entries
            .drain(..)
            .filter_map(|entry| entry.mark())
            .collect()
    }

    /// Whether a save has anything to write for the queue.
    pub fn changed(&self) -> bool {
        self.dequeued > 0 || self.entries.len() > self.stored
    }

    /// What a save must write: only what changed, whatever the queue's length.
    pub fn changes(&self) -> QueueChanges {
        QueueChanges {
            dequeued: self.dequeued,
            enqueued: self
                .entries
                .iter()
                .skip(self.stored)
                .map(|entry| target_entry(&entry.target, entry.message_id.as_deref()))
                .collect(),
        }
    }

    /// The changes were written: the store now holds exactly this queue.
    pub fn saved(&mut self) {
        self.stored = self.entries.len();
        self.dequeued = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(conversation: &str) -> ConversationTarget {
        ConversationTarget {
            transport: "tg".into(),
            conversation_id: conversation.into(),
            thread_id: None,
        }
    }

    /// The store as a list the changes are applied to, as the host does.
    fn apply(store: &mut Vec<String>, changes: &QueueChanges) {
        store.drain(..changes.dequeued as usize);
        store.extend(changes.enqueued.iter().cloned());
    }

    #[test]
    fn a_save_writes_only_what_changed_and_the_store_follows_the_queue() {
        let mut store = Vec::new();
        let (mut queue, warnings) = PromptQueue::load(&store, "s");
        assert!(warnings.is_empty());
        for i in 0..1000 {
            queue.push(target(&format!("c{i}")), None);
        }
        apply(&mut store, &queue.changes());
        queue.saved();
        assert_eq!(store.len(), 1000);
        // One more prompt behind a thousand writes one entry, not a thousand and one.
        queue.push(target("late"), None);
        let changes = queue.changes();
        assert_eq!((changes.dequeued, changes.enqueued.len()), (0, 1));
        apply(&mut store, &changes);
        queue.saved();
        // Two leave the front, one is added and leaves again before the save.
        queue.pop_front();
        queue.pop_front();
        queue.push(target("gone"), Some("m9".into()));
        assert!(queue.changed());
        let changes = queue.changes();
        apply(&mut store, &changes);
        queue.saved();
        let (reloaded, warnings) = PromptQueue::load(&store, "s");
        assert!(warnings.is_empty());
        let names: Vec<&str> = reloaded
            .iter()
            .map(|t| t.conversation_id.as_str())
            .collect();
        let expected: Vec<&str> = queue.iter().map(|t| t.conversation_id.as_str()).collect();
        assert_eq!(names, expected);
        assert_eq!(names.first(), Some(&"c2"));
        assert_eq!(names.last(), Some(&"gone"));
        assert!(!queue.changed(), "nothing to write right after a save");
    }

    #[test]
    fn entries_added_and_taken_before_a_save_write_nothing() {
        let (mut queue, _) = PromptQueue::load(&[], "s");
        queue.push(target("a"), None);
        assert_eq!(queue.pop_front().map(|p| p.target), Some(target("a")));
        assert!(!queue.changed());
    }

    #[test]
    fn clearing_drops_the_stored_entries_and_the_new_ones() {
        let mut store = vec![
            target_entry(&target("a"), None),
            target_entry(&target("b"), None),
        ];
        let (mut queue, _) = PromptQueue::load(&store, "s");
        queue.push(target("c"), None);
        let _ = queue.clear();
        apply(&mut store, &queue.changes());
        assert!(store.is_empty());
    }

    #[test]
    fn an_unreadable_entry_is_reported_and_the_store_rewritten_without_it() {
        let mut store = vec![
            target_entry(&target("a"), None),
            "{\"transport\":7}".to_owned(),
            target_entry(&target("b"), None),
        ];
        let (mut queue, warnings) = PromptQueue::load(&store, "sessions.s");
        assert_eq!(
            warnings,
            ["sessions.s.queued[1]: malformed target, ignored"]
        );
        assert_eq!(queue.len(), 2);
        assert!(queue.changed(), "the store must lose the bad entry");
        apply(&mut store, &queue.changes());
        queue.saved();
        assert_eq!(
            store,
            [
                target_entry(&target("a"), None),
                target_entry(&target("b"), None)
            ]
        );
        // And counting goes on from the rewritten store.
        queue.pop_front();
        apply(&mut store, &queue.changes());
        assert_eq!(store, [target_entry(&target("b"), None)]);
    }

    #[test]
    fn a_queue_past_the_limit_is_cut_with_a_warning_never_silently() {
        let store: Vec<String> = (0..MAX_ENTRIES + 3)
            .map(|i| target_entry(&target(&format!("c{i}")), None))
            .collect();
        let (queue, warnings) = PromptQueue::load(&store, "s");
        assert_eq!(queue.len(), MAX_ENTRIES);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("more than 10000"), "{warnings:?}");
    }

    /// A prompt's message id is stored with it, so after a restart its reactions and its
    /// turn's done message still name the right message, and a queue cleared (`/new`, a
    /// restart's report) hands back every message owed a "failed" reaction.
    #[test]
    fn message_ids_survive_a_save_and_come_back_when_the_queue_is_cleared() {
        let mut store = Vec::new();
        let (mut queue, _) = PromptQueue::load(&store, "s");
        queue.push(target("a"), Some("101".into()));
        queue.push(target("b"), None);
        queue.push(target("c"), Some("303".into()));
        apply(&mut store, &queue.changes());
        queue.saved();
        assert_eq!(
            store[0],
            r#"{"transport":"tg","conversationId":"a","messageId":"101"}"#
        );
        let (mut reloaded, warnings) = PromptQueue::load(&store, "s");
        assert!(warnings.is_empty(), "{warnings:?}");
        let first = reloaded.pop_front().and_then(|p| p.mark());
        assert_eq!(
            first.map(|m| (m.target.conversation_id, m.message_id)),
            Some(("a".to_owned(), "101".to_owned()))
        );
        let owed: Vec<String> = reloaded.clear().into_iter().map(|m| m.message_id).collect();
        assert_eq!(owed, ["303"], "the prompt without an id is owed nothing");
        assert!(reloaded.is_empty());
    }

    #[test]
    fn a_message_id_that_is_not_a_string_spoils_its_entry_with_a_warning() {
        let store = vec![
            r#"{"transport":"tg","conversationId":"a","messageId":7}"#.to_owned(),
            target_entry(&target("b"), Some("2")),
        ];
        let (queue, warnings) = PromptQueue::load(&store, "s");
        assert_eq!(warnings, ["s.queued[0]: malformed target, ignored"]);
        assert_eq!(queue.len(), 1);
    }
}
