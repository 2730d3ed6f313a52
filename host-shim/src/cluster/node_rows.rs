//! What a session node's dashboard lists of each session it runs
//! (docs/operations.md#dashboard): a pure reading of the session's saved state, since on a
//! node the chats and pairings live in the bucket, not in a broker's memory.

use guest::core::state::parse_session_state;

use super::directory::SessionEntry;
use crate::ops::dashboard::SessionRow;

/// The row of `entry`, whose saved state document is `document` (none before its first
/// save): its paired identities, and its chats, those it remembers (written) and those
/// waiting on a pairing code (not yet).
pub fn row_of(entry: &SessionEntry, document: Option<&str>) -> SessionRow {
    let mut row = SessionRow {
        name: entry.name.clone(),
        busy: entry.busy,
        chats: Vec::new(),
        paired: Vec::new(),
    };
    let Some(document) = document else {
        return row;
    };
    // A document the node could not read is the bridge's to report; the page shows none.
    let (state, _) = parse_session_state(document, &entry.key);
    row.paired = state
        .trusted
        .keys()
        .map(|identity| identity.as_str().to_owned())
        .collect();
    row.chats = state
        .conversations
        .iter()
        .map(|c| (c.key().as_str().to_owned(), true))
        .chain(
            state
                .pending
                .keys()
                .map(|key| (key.as_str().to_owned(), false)),
        )
        .collect();
    row.chats.sort();
    row.chats.dedup_by(|a, b| a.0 == b.0);
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> SessionEntry {
        SessionEntry {
            key: "pi:laptop".into(),
            name: "laptop".into(),
            cwd: "/work/laptop".into(),
            busy: true,
            node: "machine-b (pid 7)".into(),
            ..SessionEntry::default()
        }
    }

    #[test]
    fn a_session_never_saved_shows_its_name_and_nothing_else() {
        let row = row_of(&entry(), None);
        assert_eq!(row.name, "laptop");
        assert!(row.busy);
        assert!(row.chats.is_empty() && row.paired.is_empty());
    }

    #[test]
    fn paired_identities_and_remembered_chats_come_from_the_saved_state() {
        let document = serde_json::json!({
            "version": 1,
            "updatedAt": 1,
            "trusted": {"telegram:42": 1},
            "conversations": [{"transport": "telegram", "conversationId": "42"}],
            // A challenge as the bridge stores it: the code's salted hash, never the code.
            "pending": {"telegram:77": {
                "salt": "07070707070707070707070707070707",
                "sha256": "a301c7eac815258beab9767015a7d23595f5a7592f01bde83f28b2d0e534b565",
                "digits": 6, "expiresAt": 9, "attempts": 0,
            }},
        })
        .to_string();
        let row = row_of(&entry(), Some(&document));
        assert_eq!(row.paired, ["telegram:42"]);
        assert_eq!(
            row.chats,
            [
                ("telegram:42".to_owned(), true),
                ("telegram:77".to_owned(), false)
            ]
        );
    }

    #[test]
    fn an_unreadable_document_shows_no_one_paired() {
        let row = row_of(&entry(), Some("{not json"));
        assert!(row.paired.is_empty() && row.chats.is_empty());
    }
}
