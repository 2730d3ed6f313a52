//! Which session node runs which session: rendezvous hashing over the live nodes. Every
//! node computes the same answer from the same list, with no coordinator; when a node
//! goes, only its own sessions move, and when one comes, only the sessions it now wins
//! move to it (no reshuffle of everyone, which would interrupt idle sessions for nothing).

use sha2::Digest as _;

/// The node of `nodes` (their ids) that should run `session_key`; `None` with no node.
pub fn owner<'a>(session_key: &str, nodes: &'a [String]) -> Option<&'a str> {
    nodes
        .iter()
        .max_by_key(|node| (weight(node, session_key), node.as_str()))
        .map(String::as_str)
}

fn weight(node: &str, session_key: &str) -> [u8; 8] {
    let mut hasher = sha2::Sha256::new();
    hasher.update(node.as_bytes());
    hasher.update([0]);
    hasher.update(session_key.as_bytes());
    let digest = hasher.finalize();
    let mut weight = [0u8; 8];
    weight.copy_from_slice(&digest[..8]);
    weight
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn no_node_runs_nothing_and_one_node_runs_everything() {
        assert_eq!(owner("s", &[]), None);
        assert_eq!(owner("s", &nodes(&["a"])), Some("a"));
    }

    #[test]
    fn every_node_agrees_whatever_order_it_lists_the_nodes_in() {
        let forward = nodes(&["n1", "n2", "n3"]);
        let backward = nodes(&["n3", "n2", "n1"]);
        for i in 0..50 {
            let key = format!("session-{i}");
            assert_eq!(owner(&key, &forward), owner(&key, &backward), "{key}");
        }
    }

    #[test]
    fn sessions_spread_and_only_a_gone_nodes_sessions_move() {
        let three = nodes(&["n1", "n2", "n3"]);
        let keys: Vec<String> = (0..300).map(|i| format!("session-{i}")).collect();
        let before: Vec<&str> = keys.iter().map(|k| owner(k, &three).unwrap()).collect();
        for node in ["n1", "n2", "n3"] {
            let count = before.iter().filter(|o| **o == node).count();
            // 100 expected each; a hash this far off would mean no spread at all.
            assert!((60..=140).contains(&count), "{node} runs {count} of 300");
        }
        let two = nodes(&["n1", "n3"]);
        for (key, was) in keys.iter().zip(&before) {
            let now = owner(key, &two).unwrap();
            if *was != "n2" {
                assert_eq!(now, *was, "{key} moved though its node stayed");
            }
        }
    }
}
