//! The four sets of a session (seed 003 §5): index ⊇ pool ⊇ active, pool ⊇ pinned.
//!
//! Each set keeps insertion order (the active set in activation order) with a hash set beside it
//! for membership, so a set's JSON array is reproducible and "most recently activated" is defined.

use std::collections::HashSet;

use crate::error::{Error, Result};

/// One ordered set of ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderedSet {
    order: Vec<String>,
    members: HashSet<String>,
}

impl OrderedSet {
    /// A set holding `ids` in this order (duplicates after the first are dropped).
    pub fn from_ids(ids: impl IntoIterator<Item = String>) -> Self {
        let mut set = OrderedSet::default();
        for id in ids {
            set.push(id);
        }
        set
    }

    /// Whether `id` is a member.
    pub fn contains(&self, id: &str) -> bool {
        self.members.contains(id)
    }

    /// The ids in order.
    pub fn ids(&self) -> &[String] {
        &self.order
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Appends `id` unless it is a member; true when it was added.
    fn push(&mut self, id: String) -> bool {
        if self.members.contains(&id) {
            return false;
        }
        self.members.insert(id.clone());
        self.order.push(id);
        true
    }

    /// Moves `id` to the end, adding it when absent.
    fn push_to_end(&mut self, id: String) {
        if self.members.contains(&id) {
            self.order.retain(|x| *x != id);
            self.order.push(id);
        } else {
            self.push(id);
        }
    }

    /// Removes `id`; true when it was a member.
    fn remove(&mut self, id: &str) -> bool {
        if !self.members.remove(id) {
            return false;
        }
        self.order.retain(|x| x != id);
        true
    }
}

/// The session index, metadata pool, active set and pinned set, with their invariants enforced
/// by every method: active ⊆ pool ⊆ index, pinned ⊆ pool, the index append-only.
#[derive(Clone, Debug, Default)]
pub struct Sets {
    index: OrderedSet,
    pool: OrderedSet,
    active: OrderedSet,
    pinned: OrderedSet,
    /// Bumped by every mutation that may have changed a set: equal revisions mean equal sets.
    revision: u64,
}

impl PartialEq for Sets {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index
            && self.pool == other.pool
            && self.active == other.active
            && self.pinned == other.pinned
    }
}

impl Eq for Sets {}

impl Sets {
    /// Sets restored from a session document, checked against the invariants.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the first id that breaks an invariant.
    pub fn restore(
        index: Vec<String>,
        pool: Vec<String>,
        active: Vec<String>,
        pinned: Vec<String>,
    ) -> Result<Self> {
        let sets = Sets {
            index: OrderedSet::from_ids(index),
            pool: OrderedSet::from_ids(pool),
            active: OrderedSet::from_ids(active),
            pinned: OrderedSet::from_ids(pinned),
            revision: 0,
        };
        sets.check()
            .map_err(|e| Error::corrupt(format!("session sets: {e}")))?;
        Ok(sets)
    }

    /// The session index (every content object the session has seen), in first-seen order.
    pub fn index(&self) -> &OrderedSet {
        &self.index
    }

    /// The metadata pool (objects whose metadata line is rendered).
    pub fn pool(&self) -> &OrderedSet {
        &self.pool
    }

    /// The active set (objects whose content is rendered), in activation order.
    pub fn active(&self) -> &OrderedSet {
        &self.active
    }

    /// The pinned set (protected from auto-collapse).
    pub fn pinned(&self) -> &OrderedSet {
        &self.pinned
    }

    /// Checks the invariants, naming the first id that breaks one.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] describing the broken invariant.
    pub fn check(&self) -> Result<()> {
        let within = |inner: &OrderedSet, outer: &OrderedSet, what: &str| -> Result<()> {
            match inner.ids().iter().find(|id| !outer.contains(id)) {
                Some(id) => Err(Error::invalid_input(format!("{id} is {what}"))),
                None => Ok(()),
            }
        };
        within(
            &self.pool,
            &self.index,
            "in the metadata pool but not in the session index",
        )?;
        within(
            &self.active,
            &self.pool,
            "active but not in the metadata pool",
        )?;
        within(
            &self.pinned,
            &self.pool,
            "pinned but not in the metadata pool",
        )
    }

    /// Adds `id` to the index (append-only, idempotent).
    pub(crate) fn add_to_index(&mut self, id: &str) {
        if !self.index.contains(id) {
            self.revision += 1;
            self.index.push(id.to_string());
        }
    }

    /// Adds `id` to the index and the pool.
    pub(crate) fn add_to_pool(&mut self, id: &str) {
        self.add_to_index(id);
        if !self.pool.contains(id) {
            self.revision += 1;
            self.pool.push(id.to_string());
        }
    }

    /// Adds `id` to index, pool and the end of the active set (most recently activated).
    pub(crate) fn add_active(&mut self, id: &str) {
        self.add_to_pool(id);
        if self.active.ids().last().map(String::as_str) != Some(id) {
            self.revision += 1;
            self.active.push_to_end(id.to_string());
        }
    }

    /// Removes `id` from the active set; it stays in the pool. False when it was not active.
    pub(crate) fn remove_active(&mut self, id: &str) -> bool {
        let removed = self.active.remove(id);
        self.revision += u64::from(removed);
        removed
    }

    /// Pins `id`, which must be in the pool. False when it already was pinned.
    pub(crate) fn pin(&mut self, id: &str) -> bool {
        debug_assert!(self.pool.contains(id));
        let pinned = self.pinned.push(id.to_string());
        self.revision += u64::from(pinned);
        pinned
    }

    /// Unpins `id`. False when it was not pinned.
    pub(crate) fn unpin(&mut self, id: &str) -> bool {
        let unpinned = self.pinned.remove(id);
        self.revision += u64::from(unpinned);
        unpinned
    }

    /// A counter bumped by every change: the sets are unchanged while it stays the same.
    pub(crate) fn revision(&self) -> u64 {
        self.revision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_order_is_activation_order_and_invariants_hold() -> Result<()> {
        let mut sets = Sets::default();
        sets.add_active("a");
        sets.add_active("b");
        sets.add_to_pool("c");
        sets.add_active("a");
        assert_eq!(sets.active().ids(), ["b", "a"]);
        assert_eq!(sets.index().ids(), ["a", "b", "c"]);
        assert!(sets.remove_active("b"));
        assert!(!sets.remove_active("b"));
        assert!(sets.pool().contains("b"));
        sets.check()?;
        let broken = Sets::restore(
            vec!["a".into()],
            vec!["a".into(), "z".into()],
            vec![],
            vec![],
        );
        assert!(matches!(broken, Err(Error::Corrupt { .. })), "{broken:?}");
        Ok(())
    }
}
