//! The four sets of a session (seed 003 §5): index ⊇ pool ⊇ active, pool ⊇ pinned.
//!
//! Each set keeps insertion order (the active set in activation order) with a hash set beside it
//! for membership, so a set's JSON array is reproducible and "most recently activated" is defined.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::hash::{jcs_string_len, push_jcs_string};
use crate::object::SessionIds;

/// Membership by FxHash: ids are hashes and short names, and a resumed session of 10 000 files
/// hashes each of them once per set (SipHash made that a tenth of a resume).
type Members = rustc_hash::FxHashSet<String>;

/// One ordered set of ids.
#[derive(Clone, Debug, Default)]
pub struct OrderedSet {
    /// The ids in order, shared with the documents built from them (copied on the first change
    /// while one still holds them).
    order: SessionIds,
    /// Membership, built from `order` on first use: a resume that changes no set never asks.
    members: std::sync::OnceLock<Members>,
    /// The JCS strings of the first `json_ids` ids joined by commas: the inside of the set's
    /// canonical JSON array, kept between commits and brought up to date lazily. An append
    /// leaves it valid; a change at position `p` cuts it back to the first `p` ids.
    json: String,
    json_ids: usize,
}

impl PartialEq for OrderedSet {
    fn eq(&self, other: &Self) -> bool {
        self.order == other.order
    }
}

impl Eq for OrderedSet {}

impl OrderedSet {
    /// A set holding `ids` in this order (duplicates after the first are dropped).
    pub fn from_ids(ids: impl IntoIterator<Item = String>) -> Self {
        let ids = ids.into_iter();
        let mut set = OrderedSet::default();
        Arc::make_mut(&mut set.order).reserve(ids.size_hint().0);
        let mut members = Members::default();
        members.reserve(ids.size_hint().0);
        for id in ids {
            if members.insert(id.clone()) {
                Arc::make_mut(&mut set.order).push(id);
            }
        }
        set.members = members.into();
        set
    }

    /// A set holding `ids` in this order, keeping the shared list itself when it repeats no id
    /// (a restored session's sets are the lists its document decoded to).
    pub fn from_shared(ids: SessionIds) -> Self {
        if distinct(&ids).is_none() {
            return OrderedSet::from_ids(ids.iter().cloned());
        }
        OrderedSet::unchecked(ids)
    }

    /// A set holding `ids`, which repeat no id (the caller checked).
    fn unchecked(ids: SessionIds) -> Self {
        OrderedSet {
            order: ids,
            members: std::sync::OnceLock::new(),
            json: String::new(),
            json_ids: 0,
        }
    }

    /// Whether `id` is a member.
    pub fn contains(&self, id: &str) -> bool {
        self.members().contains(id)
    }

    /// The membership map, built on first use.
    fn members(&self) -> &Members {
        self.members
            .get_or_init(|| self.order.iter().cloned().collect())
    }

    /// Runs `change` on the membership map (built first when it is not yet).
    fn with_members<R>(&mut self, change: impl FnOnce(&mut Members) -> R) -> R {
        let mut members = self
            .members
            .take()
            .unwrap_or_else(|| self.order.iter().cloned().collect());
        let out = change(&mut members);
        self.members = members.into();
        out
    }

    /// The ids in order.
    pub fn ids(&self) -> &[String] {
        &self.order
    }

    /// The ids in order, shared (no copy): what a session document holds.
    pub fn shared_ids(&self) -> SessionIds {
        Arc::clone(&self.order)
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The inside of this set's canonical JSON array (its ids as JCS strings joined by commas),
    /// written only for the ids appended since the last call.
    pub(crate) fn json_inner(&mut self) -> &str {
        for id in &self.order[self.json_ids..] {
            if self.json_ids > 0 {
                self.json.push(',');
            }
            push_jcs_string(&mut self.json, id);
            self.json_ids += 1;
        }
        &self.json
    }

    /// Seeds the JSON text with `inner`, the inside of this set's array in a stored canonical
    /// document (so a loaded session's first commit appends to it, not rebuilds it).
    /// Seeds nothing when the text is not as long as the set's JSON: restoring drops repeated
    /// ids, and a stored document repeating one must not leave its repeat in the kept text.
    fn seed_json(&mut self, inner: &str) {
        let commas = self.order.len().saturating_sub(1);
        let len: usize = self
            .order
            .iter()
            .map(|id| jcs_string_len(id))
            .sum::<usize>()
            + commas;
        if inner.len() != len {
            return;
        }
        debug_assert_eq!(
            inner,
            OrderedSet::from_ids(self.order.iter().cloned()).json_inner(),
            "a seeded JSON text that is not the set's"
        );
        self.json = inner.to_string();
        self.json_ids = self.order.len();
    }

    /// Cuts the JSON text back to the ids before position `at` (about to change). Counted from
    /// the end: changes are mostly near it (recent activations, collapsed tool calls).
    fn json_cut(&mut self, at: usize) {
        if at >= self.json_ids {
            return;
        }
        if at == 0 {
            self.json.clear();
        } else {
            let dropped: usize = self.order[at..self.json_ids]
                .iter()
                .map(|id| jcs_string_len(id) + 1)
                .sum();
            self.json.truncate(self.json.len() - dropped);
        }
        self.json_ids = at;
    }

    /// Appends `id` unless it is a member; true when it was added.
    fn push(&mut self, id: String) -> bool {
        if !self.with_members(|members| members.insert(id.clone())) {
            return false;
        }
        Arc::make_mut(&mut self.order).push(id);
        true
    }

    /// Moves `id` to the end, adding it when absent.
    fn push_to_end(&mut self, id: String) {
        if self.contains(&id) {
            if let Some(at) = self.order.iter().rposition(|x| *x == id) {
                self.json_cut(at);
                Arc::make_mut(&mut self.order).remove(at);
            }
            Arc::make_mut(&mut self.order).push(id);
        } else {
            self.push(id);
        }
    }

    /// Removes `id`; true when it was a member.
    fn remove(&mut self, id: &str) -> bool {
        if !self.with_members(|members| members.remove(id)) {
            return false;
        }
        if let Some(at) = self.order.iter().rposition(|x| x == id) {
            self.json_cut(at);
            Arc::make_mut(&mut self.order).remove(at);
        }
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
    /// Every id added to the active set since [`Sets::watch_active`] last set this: a superset
    /// of the active tool calls auto-collapse may have to drop. `None` (restored sets) means
    /// unknown: every active id is a candidate.
    active_candidates: Option<Vec<String>>,
    /// The stored document the JSON texts are to be seeded from, taken at the first change or
    /// use of a text (a resume that changes nothing never splits it).
    unseeded: Option<Arc<String>>,
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
        index: SessionIds,
        pool: SessionIds,
        active: SessionIds,
        pinned: SessionIds,
    ) -> Result<Self> {
        let corrupt = |e: Error| Error::corrupt(format!("session sets: {e}"));
        // No id repeated (always, in a document a session wrote): the sets keep the lists as
        // they are, checked through maps borrowing the ids; their own maps wait for first use.
        // A list equal to the one it must lie within (a pool of every indexed id, everything
        // pooled active) is distinct when that one is, and within it: it needs no map.
        let same_pool = pool == index;
        let same_active = active == pool;
        let in_index = distinct(&index);
        let pool_own = if same_pool { None } else { distinct(&pool) };
        let in_pool = if same_pool {
            in_index.as_ref()
        } else {
            pool_own.as_ref()
        };
        if let (Some(in_index), Some(in_pool), true, Some(_)) = (
            in_index.as_ref(),
            in_pool,
            same_active || distinct(&active).is_some(),
            distinct(&pinned),
        ) {
            if !same_pool {
                within(&pool, |id| in_index.contains(id), NOT_IN_INDEX).map_err(corrupt)?;
            }
            if !same_active {
                within(&active, |id| in_pool.contains(id), ACTIVE_NOT_IN_POOL).map_err(corrupt)?;
            }
            within(&pinned, |id| in_pool.contains(id), PINNED_NOT_IN_POOL).map_err(corrupt)?;
            return Ok(Sets {
                index: OrderedSet::unchecked(index),
                pool: OrderedSet::unchecked(pool),
                active: OrderedSet::unchecked(active),
                pinned: OrderedSet::unchecked(pinned),
                revision: 0,
                active_candidates: None,
                unseeded: None,
            });
        }
        // A repeated id is dropped after its first place.
        let sets = Sets {
            index: OrderedSet::from_shared(index),
            pool: OrderedSet::from_shared(pool),
            active: OrderedSet::from_shared(active),
            pinned: OrderedSet::from_shared(pinned),
            revision: 0,
            active_candidates: None,
            unseeded: None,
        };
        sets.check().map_err(corrupt)?;
        Ok(sets)
    }

    /// Seeds the sets' JSON texts from `stored`, the canonical JSON of the session document they
    /// were restored from, so the next commit only appends to them; the text is split at the
    /// first change or use of the sets' texts, while the ids it holds are still in place.
    pub(crate) fn seed_json(&mut self, stored: Arc<String>) {
        self.unseeded = Some(stored);
    }

    /// Takes the seed [`Sets::seed_json`] left, if any: before any change of the sets.
    fn settle_seed(&mut self) {
        if let Some(stored) = self.unseeded.take() {
            self.seed_now(&stored);
        }
    }

    /// Seeds the JSON texts from `stored` now. A text without the canonical layout seeds
    /// nothing (the next commit then writes the sets' JSON in full). Splitting at the first
    /// `],"key":` is exact: inside an array of JCS strings a raw `"` never follows a comma or
    /// `]` (a string's quotes are escaped).
    fn seed_now(&mut self, stored: &str) {
        // `memmem` rather than `str::split_once`: a 10 000-file session's text is 2 MB, and
        // the SIMD search runs through it several times faster.
        let parts = (|| {
            let rest = stored.strip_prefix("{\"active_set\":[")?;
            let (active, rest) = split_once(rest, "],\"chat_ref\":")?;
            let (_, rest) = split_once(rest, ",\"metadata_pool\":[")?;
            let (pool, rest) = split_once(rest, "],\"pinned_set\":[")?;
            let (pinned, rest) = split_once(rest, "],\"session_id\":")?;
            let (_, rest) = split_once(rest, ",\"session_index\":[")?;
            let (index, _) = split_once(rest, "],\"system_prompt_ref\":")?;
            Some((index, pool, active, pinned))
        })();
        if let Some((index, pool, active, pinned)) = parts {
            self.index.seed_json(index);
            self.pool.seed_json(pool);
            self.active.seed_json(active);
            self.pinned.seed_json(pinned);
        }
    }

    /// The insides of the JSON arrays of index, pool, active set and pinned set (in that order),
    /// brought up to date (see [`OrderedSet::json_inner`]).
    pub(crate) fn json_inners(&mut self) -> [&str; 4] {
        self.settle_seed();
        let Sets {
            index,
            pool,
            active,
            pinned,
            ..
        } = self;
        [
            index.json_inner(),
            pool.json_inner(),
            active.json_inner(),
            pinned.json_inner(),
        ]
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
        within(self.pool.ids(), |id| self.index.contains(id), NOT_IN_INDEX)?;
        within(
            self.active.ids(),
            |id| self.pool.contains(id),
            ACTIVE_NOT_IN_POOL,
        )?;
        within(
            self.pinned.ids(),
            |id| self.pool.contains(id),
            PINNED_NOT_IN_POOL,
        )
    }

    /// Adds `id` to the index (append-only, idempotent).
    pub(crate) fn add_to_index(&mut self, id: &str) {
        self.settle_seed();
        if !self.index.contains(id) {
            self.revision += 1;
            self.index.push(id.to_string());
        }
    }

    /// Adds `id` to the index and the pool.
    pub(crate) fn add_to_pool(&mut self, id: &str) {
        self.settle_seed();
        self.add_to_index(id);
        if !self.pool.contains(id) {
            self.revision += 1;
            self.pool.push(id.to_string());
        }
    }

    /// Adds `id` to index, pool and the end of the active set (most recently activated).
    pub(crate) fn add_active(&mut self, id: &str) {
        self.settle_seed();
        self.add_to_pool(id);
        if self.active.ids().last().map(String::as_str) != Some(id) {
            self.revision += 1;
            self.active.push_to_end(id.to_string());
        }
        if let Some(candidates) = &mut self.active_candidates {
            candidates.push(id.to_string());
        }
    }

    /// The active ids auto-collapse has to look at: those added since the last
    /// [`Sets::watch_active`], or the whole active set when that is unknown. Each id at most
    /// once; ids no longer active are left out.
    pub(crate) fn active_candidates(&self) -> Vec<&str> {
        match &self.active_candidates {
            None => self.active.ids().iter().map(String::as_str).collect(),
            Some(candidates) => {
                let mut seen = rustc_hash::FxHashSet::default();
                seen.reserve(candidates.len());
                candidates
                    .iter()
                    .map(String::as_str)
                    .filter(|id| self.active.contains(id) && seen.insert(*id))
                    .collect()
            }
        }
    }

    /// Starts a new list of active candidates with `ids` (the active ids auto-collapse kept
    /// and must look at again next time).
    pub(crate) fn watch_active(&mut self, ids: Vec<String>) {
        self.active_candidates = Some(ids);
    }

    /// Removes `id` from the active set; it stays in the pool. False when it was not active.
    pub(crate) fn remove_active(&mut self, id: &str) -> bool {
        self.settle_seed();
        let removed = self.active.remove(id);
        self.revision += u64::from(removed);
        removed
    }

    /// Pins `id`, which must be in the pool. False when it already was pinned.
    pub(crate) fn pin(&mut self, id: &str) -> bool {
        self.settle_seed();
        debug_assert!(self.pool.contains(id));
        let pinned = self.pinned.push(id.to_string());
        self.revision += u64::from(pinned);
        pinned
    }

    /// Unpins `id`. False when it was not pinned.
    pub(crate) fn unpin(&mut self, id: &str) -> bool {
        self.settle_seed();
        let unpinned = self.pinned.remove(id);
        self.revision += u64::from(unpinned);
        unpinned
    }

    /// A counter bumped by every change: the sets are unchanged while it stays the same.
    pub(crate) fn revision(&self) -> u64 {
        self.revision
    }
}

/// What a pool id missing from the index is.
const NOT_IN_INDEX: &str = "in the metadata pool but not in the session index";
/// What an active id missing from the pool is.
const ACTIVE_NOT_IN_POOL: &str = "active but not in the metadata pool";
/// What a pinned id missing from the pool is.
const PINNED_NOT_IN_POOL: &str = "pinned but not in the metadata pool";

/// Checks that every id of `inner` is in the outer set `contains` answers for, naming the first
/// that is not as `what`.
fn within(inner: &[String], contains: impl Fn(&str) -> bool, what: &str) -> Result<()> {
    match inner.iter().find(|id| !contains(id)) {
        Some(id) => Err(Error::invalid_input(format!("{id} is {what}"))),
        None => Ok(()),
    }
}

/// The ids of `ids` as a set borrowing them, `None` when one repeats.
fn distinct(ids: &[String]) -> Option<rustc_hash::FxHashSet<&str>> {
    let mut seen = rustc_hash::FxHashSet::default();
    seen.reserve(ids.len());
    ids.iter()
        .all(|id| seen.insert(id.as_str()))
        .then_some(seen)
}

/// `text` split around the first `at` ([`str::split_once`] through `memchr`'s SIMD search).
fn split_once<'a>(text: &'a str, at: &str) -> Option<(&'a str, &'a str)> {
    let found = memchr::memmem::find(text.as_bytes(), at.as_bytes())?;
    // `at` is ASCII-led, so both sides are on character boundaries.
    Some((text.get(..found)?, text.get(found + at.len()..)?))
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
            vec!["a".into()].into(),
            vec!["a".into(), "z".into()].into(),
            Default::default(),
            Default::default(),
        );
        assert!(matches!(broken, Err(Error::Corrupt { .. })), "{broken:?}");
        Ok(())
    }

    /// Lists equal to the ones they lie within are taken as they are; a repeat in them is
    /// still dropped, and a list that is not within its set still refused.
    #[test]
    fn restore_takes_equal_lists_and_still_checks_the_others() -> Result<()> {
        let ids = |list: &[&str]| -> SessionIds {
            std::sync::Arc::new(list.iter().map(|id| id.to_string()).collect())
        };
        let abc = ids(&["a", "b", "c"]);
        let sets = Sets::restore(abc.clone(), abc.clone(), abc.clone(), ids(&["b"]))?;
        sets.check()?;
        assert_eq!(sets.active().ids(), ["a", "b", "c"]);
        let repeated = ids(&["a", "b", "a"]);
        let sets = Sets::restore(repeated.clone(), repeated.clone(), repeated, ids(&[]))?;
        assert_eq!(sets.pool().ids(), ["a", "b"]);
        assert_eq!(sets.active().ids(), ["a", "b"]);
        for (pool, active, pinned) in [
            (abc.clone(), ids(&["a", "z"]), ids(&[])),
            (abc.clone(), abc.clone(), ids(&["z"])),
            (ids(&["a", "z"]), ids(&["a", "z"]), ids(&[])),
        ] {
            let broken = Sets::restore(abc.clone(), pool, active, pinned);
            assert!(matches!(broken, Err(Error::Corrupt { .. })), "{broken:?}");
        }
        Ok(())
    }

    /// The JSON insides written from scratch, to compare the kept ones with.
    fn fresh(sets: &Sets) -> [String; 4] {
        [sets.index(), sets.pool(), sets.active(), sets.pinned()].map(|set| {
            OrderedSet::from_ids(set.ids().to_vec())
                .json_inner()
                .to_string()
        })
    }

    #[test]
    fn kept_json_follows_cuts_and_appends() {
        let mut sets = Sets::default();
        for id in ["a", "b\"", "c\\", "d\n", "e\u{1}"] {
            sets.add_active(id);
        }
        assert_eq!(sets.json_inners()[2], r#""a","b\"","c\\","d\n","e\u0001""#);
        assert!(sets.remove_active("d\n"));
        sets.add_active("b\"");
        sets.add_active("f");
        assert_eq!(sets.json_inners()[2], r#""a","c\\","e\u0001","b\"","f""#);
        assert!(sets.remove_active("a"));
        assert_eq!(sets.json_inners().map(str::to_string), fresh(&sets));
    }

    proptest::proptest! {
        /// After any sequence of operations, with the JSON brought up to date at random points
        /// and the sets re-seeded from a stored document at others, the kept JSON equals a
        /// fresh build and the document assembled from it is the canonical JSON of the fields.
        #[test]
        fn kept_json_equals_a_fresh_build(
            ops in proptest::collection::vec((0u8..8, 0usize..12), 0..80),
            names in proptest::collection::vec(proptest::prelude::any::<String>(), 12),
        ) {
            // One id holding the separators the seeding splits at, escaped inside a string.
            let mut names = names;
            names[0] = r#"],"chat_ref":,"session_index":["#.into();
            let mut sets = Sets::default();
            for (op, n) in ops {
                let id = names[n].as_str();
                match op {
                    0 => sets.add_to_index(id),
                    1 => sets.add_to_pool(id),
                    2 => sets.add_active(id),
                    3 => {
                        sets.remove_active(id);
                    }
                    4 if sets.pool().contains(id) => {
                        sets.pin(id);
                    }
                    5 => {
                        sets.unpin(id);
                    }
                    6 => {
                        sets.json_inners();
                    }
                    _ => {
                        let fields = crate::object::SessionFields {
                            session_id: "s".into(),
                            chat_ref: "chat:s".into(),
                            system_prompt_ref: "system_prompt:s".into(),
                            session_index: sets.index().shared_ids(),
                            metadata_pool: sets.pool().shared_ids(),
                            active_set: sets.active().shared_ids(),
                            pinned_set: sets.pinned().shared_ids(),
                        };
                        let stored = crate::object::Fields::Session(fields.clone()).canonical_json()?;
                        let [index, pool, active, pinned] = sets.json_inners();
                        let kept = crate::object::session_json_of_parts(
                            &crate::object::SessionJsonParts {
                                session_id: "s",
                                chat_ref: "chat:s",
                                system_prompt_ref: "system_prompt:s",
                                session_index: index,
                                metadata_pool: pool,
                                active_set: active,
                                pinned_set: pinned,
                            },
                        );
                        proptest::prop_assert_eq!(&kept, &stored);
                        let mut restored = Sets::restore(
                            fields.session_index,
                            fields.metadata_pool,
                            fields.active_set,
                            fields.pinned_set,
                        )?;
                        restored.seed_json(Arc::new(stored.clone()));
                        // Seeded now, or left for the next change or use of the texts.
                        if n % 2 == 0 {
                            restored.settle_seed();
                            proptest::prop_assert_eq!(restored.index.json_ids, sets.index.len());
                        }
                        sets = restored;
                    }
                }
            }
            proptest::prop_assert_eq!(sets.json_inners().map(str::to_string), fresh(&sets));
        }
    }
}
