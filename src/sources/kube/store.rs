//! The per-resource fold of watch events into facts, with kube-rs's relist semantics:
//! a relist (`Init`, `InitApply`..., `InitDone`) replaces the facts atomically at
//! `InitDone`, and anything else (errors, a relist cut short) leaves them as they were.
//!
//! Pure: no tokio, no clock, no logging. Keeps the mapped facts, not the objects, so
//! a cluster-wide watch of 5,000 Nodes holds a few hundred bytes per node rather than
//! every Node's status and managedFields (why this replaces kube-rs's `reflector` Store).
//!
//! A store made with [`Store::tracking`] also records each change of its facts (the
//! Services' and EndpointSlices', sent as deltas): after a relist exactly the objects
//! that differ, additions first, then changes, then deletions.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::sources::service_objects;
use crate::sources::services::{self, Change, ObjectKey};

/// How a store keys its objects.
pub trait StoreKey: Ord + Clone {
    /// The key of an object; `None` when it has no name.
    fn of(meta: &ObjectMeta) -> Option<Self>;
}

/// Cluster-scoped objects (and ConfigMaps watched by name): the name.
impl StoreKey for String {
    fn of(meta: &ObjectMeta) -> Option<Self> {
        meta.name.clone()
    }
}

/// Namespaced objects: `namespace/name`.
impl StoreKey for ObjectKey {
    fn of(meta: &ObjectMeta) -> Option<Self> {
        service_objects::object_key(meta)
    }
}

/// One recorded change: the new facts, `None` for a deletion.
pub type Delta<K, F> = (K, Option<F>);

/// Facts by object key, with a relist buffer.
#[derive(Debug)]
pub struct Store<F, K = String> {
    live: BTreeMap<K, F>,
    relist: Option<BTreeMap<K, F>>,
    synced: bool,
    /// `Some` when the changes are recorded for [`Store::take_changes`].
    changes: Option<Vec<Delta<K, F>>>,
}

impl<F, K> Default for Store<F, K> {
    fn default() -> Self {
        Self {
            live: BTreeMap::new(),
            relist: None,
            synced: false,
            changes: None,
        }
    }
}

impl<F: Clone + PartialEq, K: Ord + Clone> Store<F, K> {
    pub fn new() -> Self {
        Self::default()
    }

    /// A store that records each change of its facts.
    pub fn tracking() -> Self {
        Self {
            changes: Some(Vec::new()),
            ..Self::default()
        }
    }

    /// The changes recorded since the last call (always empty unless tracking).
    pub fn take_changes(&mut self) -> Vec<Delta<K, F>> {
        self.changes
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn record(&mut self, key: K, facts: Option<F>) {
        if let Some(changes) = &mut self.changes {
            changes.push((key, facts));
        }
    }

    /// The facts in force.
    pub fn live(&self) -> &BTreeMap<K, F> {
        &self.live
    }

    /// A complete list has been applied at least once.
    pub fn synced(&self) -> bool {
        self.synced
    }

    /// A watch event added or modified `key`. True when its facts changed.
    pub fn apply(&mut self, key: K, facts: F) -> bool {
        match self.live.get(&key) {
            Some(old) if *old == facts => false,
            _ => {
                if self.changes.is_some() {
                    self.record(key.clone(), Some(facts.clone()));
                }
                self.live.insert(key, facts);
                true
            }
        }
    }

    /// A watch event deleted `key`. True when it was known.
    pub fn delete<Q: Ord + ?Sized>(&mut self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        match self.live.remove_entry(key) {
            Some((key, _)) => {
                self.record(key, None);
                true
            }
            None => false,
        }
    }

    /// A relist starts: collect its objects apart until it is complete.
    pub fn init(&mut self) {
        self.relist = Some(BTreeMap::new());
    }

    /// An object of the relist.
    pub fn init_apply(&mut self, key: K, facts: F) {
        self.relist
            .get_or_insert_with(BTreeMap::new)
            .insert(key, facts);
    }

    /// An object of the relist whose facts cannot be read: it still exists, so its last
    /// good facts (if any) stay in force rather than being treated as a deletion.
    pub fn init_keep<Q: Ord + ?Sized + ToOwned<Owned = K>>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
    {
        let kept = self.live.get(key).cloned();
        let relist = self.relist.get_or_insert_with(BTreeMap::new);
        if let Some(facts) = kept {
            relist.insert(key.to_owned(), facts);
        }
    }

    /// The relist is complete: its objects replace the facts. True when that changed
    /// anything (false for a relist that found the same facts).
    pub fn init_done(&mut self) -> bool {
        self.synced = true;
        match self.relist.take() {
            Some(relist) if relist != self.live => {
                if let Some(log) = &mut self.changes {
                    let found = services::changes(&self.live, &relist);
                    for kind in [Change::Added, Change::Changed, Change::Deleted] {
                        log.extend(
                            found
                                .iter()
                                .filter(|c| c.2 == kind)
                                .map(|(k, f, _)| (K::clone(k), f.cloned())),
                        );
                    }
                }
                self.live = relist;
                true
            }
            Some(_) => false,
            // InitDone without Init: kube-rs never does this; nothing to swap.
            None => false,
        }
    }

    /// The resource does not exist on the server (a CRD that is not installed): it is
    /// synced and empty. True when that removed facts.
    pub fn mark_absent(&mut self) -> bool {
        self.synced = true;
        self.relist = None;
        let changed = !self.live.is_empty();
        let gone = std::mem::take(&mut self.live);
        for key in gone.into_keys() {
            self.record(key, None);
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(store: &Store<u32>) -> Vec<(&str, u32)> {
        store.live().iter().map(|(k, v)| (k.as_str(), *v)).collect()
    }

    fn synced_with(items: &[(&str, u32)]) -> Store<u32> {
        let mut store = Store::new();
        store.init();
        for (name, v) in items {
            store.init_apply((*name).into(), *v);
        }
        assert!(store.init_done() || items.is_empty());
        store
    }

    #[test]
    fn relist_is_applied_only_at_init_done() {
        let mut store = synced_with(&[("a", 1), ("b", 2)]);
        store.init();
        store.init_apply("a".into(), 1);
        // Until InitDone the previous facts stay in force, b included.
        assert_eq!(names(&store), [("a", 1), ("b", 2)]);
        assert!(store.init_done());
        assert_eq!(names(&store), [("a", 1)]);
    }

    #[test]
    fn relist_with_the_same_facts_changes_nothing() {
        let mut store = synced_with(&[("a", 1), ("b", 2)]);
        store.init();
        store.init_apply("b".into(), 2);
        store.init_apply("a".into(), 1);
        assert!(!store.init_done());
        assert_eq!(names(&store), [("a", 1), ("b", 2)]);
    }

    #[test]
    fn interrupted_relist_keeps_the_facts_and_a_new_one_starts_clean() {
        let mut store = synced_with(&[("a", 1), ("b", 2)]);
        store.init();
        store.init_apply("a".into(), 9);
        // The list failed; kube-rs starts over with a new Init.
        store.init();
        assert_eq!(names(&store), [("a", 1), ("b", 2)]);
        store.init_apply("b".into(), 2);
        store.init_apply("a".into(), 1);
        assert!(!store.init_done());
    }

    #[test]
    fn unreadable_object_in_a_relist_keeps_its_last_good_facts() {
        let mut store = synced_with(&[("a", 1), ("b", 2)]);
        store.init();
        store.init_keep("a");
        store.init_keep("never-seen");
        store.init_apply("b".into(), 3);
        assert!(store.init_done());
        assert_eq!(names(&store), [("a", 1), ("b", 3)]);
    }

    #[test]
    fn apply_and_delete_report_changes() {
        let mut store = synced_with(&[]);
        assert!(store.synced());
        assert!(store.apply("a".into(), 1));
        assert!(!store.apply("a".into(), 1));
        assert!(store.apply("a".into(), 2));
        assert!(store.delete("a"));
        assert!(!store.delete("a"));
        assert!(names(&store).is_empty());
    }

    #[test]
    fn not_synced_until_the_first_list_completes() {
        let mut store: Store<u32> = Store::new();
        store.init();
        store.init_apply("a".into(), 1);
        assert!(!store.synced());
        assert!(store.init_done());
        assert!(store.synced());
    }

    #[test]
    fn a_tracking_store_records_exactly_the_changes_of_a_relist() {
        let mut store: Store<u32> = Store::tracking();
        store.init();
        store.init_apply("b".into(), 2);
        store.init_apply("a".into(), 1);
        store.init_apply("c".into(), 3);
        assert!(store.init_done());
        let first = store.take_changes();
        assert_eq!(
            first,
            [
                ("a".into(), Some(1)),
                ("b".into(), Some(2)),
                ("c".into(), Some(3))
            ]
        );
        assert!(!store.apply("a".into(), 1));
        assert!(store.apply("a".into(), 5));
        assert!(!store.delete("zz"));
        assert!(store.delete("c"));
        assert_eq!(
            store.take_changes(),
            [("a".into(), Some(5)), ("c".into(), None)]
        );
        // A relist (after a 410): b changed, c is back, a disappeared. Additions, then
        // changes, then deletions.
        store.init();
        store.init_apply("b".into(), 7);
        store.init_apply("c".into(), 3);
        assert!(store.take_changes().is_empty(), "nothing before InitDone");
        assert!(store.init_done());
        assert_eq!(
            store.take_changes(),
            [
                ("c".into(), Some(3)),
                ("b".into(), Some(7)),
                ("a".into(), None)
            ]
        );
        // The same relist again: nothing.
        store.init();
        store.init_apply("c".into(), 3);
        store.init_apply("b".into(), 7);
        assert!(!store.init_done());
        assert!(store.take_changes().is_empty());
        assert!(store.mark_absent());
        assert_eq!(
            store.take_changes(),
            [("b".into(), None), ("c".into(), None)]
        );
    }

    #[test]
    fn an_untracked_store_records_nothing() {
        let mut store = synced_with(&[("a", 1)]);
        assert!(store.apply("a".into(), 2));
        assert!(store.delete("a"));
        assert!(store.take_changes().is_empty());
    }

    #[test]
    fn absent_resource_is_synced_and_empty() {
        let mut store = synced_with(&[("a", 1)]);
        assert!(store.mark_absent());
        assert!(store.synced());
        assert!(names(&store).is_empty());
        assert!(!store.mark_absent());
    }
}
