//! A session's dashboard row read from its saved state (docs/operations.md#dashboard): where
//! no broker keeps the chats and pairings in memory (a cluster's session node, whose sessions
//! save to the bucket; `run`, whose one session saves to the state database), the page reads
//! them from the document the bridge saved.

use guest::core::state::parse_session_state;

use super::dashboard::SessionRow;

/// The row of session `key`, shown as `name`, `busy` or not, whose saved state document is
/// `document` (none before its first save): its paired identities, and its chats, those it
/// remembers (written) and those waiting on a pairing code (not yet).
pub fn row_from_state(key: &str, name: &str, busy: bool, document: Option<&str>) -> SessionRow {
    let mut row = SessionRow {
        name: name.to_owned(),
        busy,
        chats: Vec::new(),
        paired: Vec::new(),
    };
    let Some(document) = document else {
        return row;
    };
    // A document the node could not read is the bridge's to report; the page shows none.
    let (state, _) = parse_session_state(document, key);
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

    fn row(document: Option<&str>) -> SessionRow {
        row_from_state("pi:laptop", "laptop", true, document)
    }

    #[test]
    fn a_session_never_saved_shows_its_name_and_nothing_else() {
        let row = row(None);
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
        let row = row(Some(&document));
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
        let row = row(Some("{not json"));
        assert!(row.paired.is_empty() && row.chats.is_empty());
    }
}
