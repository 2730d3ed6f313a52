//! The transports created for one session, found by their id.

use std::sync::Arc;

use transport_core::Transport;

/// A session's transports in id order, each found by its own [`Transport::id`]. A sorted
/// list, not a `BTreeMap<String, _>`: a session has one or two, and the map's first node
/// (room for eleven keys and values, about 450 bytes) plus a copy of each id was kept by
/// every session for its whole life, 100,000 of them on a node of hibernated sessions
/// (docs/scaling.md#idle-sessions).
#[derive(Clone, Default)]
pub struct SessionTransports(Vec<Arc<dyn Transport>>);

impl SessionTransports {
    /// The transport whose id is `id`.
    pub fn get(&self, id: &str) -> Option<&Arc<dyn Transport>> {
        self.find(id).ok().map(|at| &self.0[at])
    }

    /// Adds `transport` under its id; one already there with that id is replaced and
    /// returned (an id names one transport of a session, as a map key would).
    pub fn insert(&mut self, transport: Arc<dyn Transport>) -> Option<Arc<dyn Transport>> {
        let replaced = match self.find(transport.id()) {
            Ok(at) => Some(std::mem::replace(&mut self.0[at], transport)),
            Err(at) => {
                self.0.insert(at, transport);
                None
            }
        };
        // A vector grows to room for four at its first push; a session keeps its list for
        // its whole life, so it holds no more room than it uses.
        self.0.shrink_to_fit();
        replaced
    }

    /// Every transport, in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Transport>> {
        self.0.iter()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// None was created (yet).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Where `id` is, or where it would go to keep the id order.
    fn find(&self, id: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|transport| transport.id().cmp(id))
    }
}

impl FromIterator<Arc<dyn Transport>> for SessionTransports {
    fn from_iter<I: IntoIterator<Item = Arc<dyn Transport>>>(transports: I) -> Self {
        let mut all = SessionTransports::default();
        for transport in transports {
            all.insert(transport);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport_testing::fake::{FakeConfig, FakeTransport};

    fn named(id: &str) -> Arc<dyn Transport> {
        Arc::new(FakeTransport::new(FakeConfig {
            id: id.into(),
            ..FakeConfig::default()
        }))
    }

    fn ids(all: &SessionTransports) -> Vec<&str> {
        all.iter().map(|t| t.id()).collect()
    }

    #[test]
    fn each_transport_is_found_by_its_id_and_listed_in_id_order() {
        let all: SessionTransports = ["telegram", "discord", "slack", "terminal"]
            .into_iter()
            .map(named)
            .collect();
        assert_eq!(ids(&all), ["discord", "slack", "telegram", "terminal"]);
        for id in ["discord", "slack", "telegram", "terminal"] {
            assert_eq!(all.get(id).map(|t| t.id()), Some(id));
        }
        assert!(all.get("matrix").is_none());
        assert!(all.get("").is_none());
        assert_eq!(all.len(), 4);
    }

    #[test]
    fn a_second_transport_with_the_same_id_replaces_the_first() {
        let mut all = SessionTransports::default();
        assert!(all.is_empty());
        let first = named("telegram");
        assert!(all.insert(first.clone()).is_none());
        all.insert(named("discord"));
        let second = named("telegram");
        let replaced = all.insert(second.clone()).expect("the first is returned");
        assert!(Arc::ptr_eq(&replaced, &first));
        assert!(Arc::ptr_eq(all.get("telegram").expect("kept"), &second));
        assert_eq!(ids(&all), ["discord", "telegram"]);
    }
}
