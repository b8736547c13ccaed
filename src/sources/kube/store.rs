//! The per-resource fold of watch events into facts, with kube-rs's relist semantics:
//! a relist (`Init`, `InitApply`..., `InitDone`) replaces the facts atomically at
//! `InitDone`, and anything else (errors, a relist cut short) leaves them as they were.
//!
//! Pure: no tokio, no clock, no logging. Keeps the mapped facts, not the objects, so
//! a cluster-wide watch of 5,000 Nodes holds a few hundred bytes per node rather than
//! every Node's status and managedFields (why this replaces kube-rs's `reflector` Store).

use std::collections::BTreeMap;

/// Facts by object name, with a relist buffer.
#[derive(Debug)]
pub struct Store<F> {
    live: BTreeMap<String, F>,
    relist: Option<BTreeMap<String, F>>,
    synced: bool,
}

impl<F> Default for Store<F> {
    fn default() -> Self {
        Self {
            live: BTreeMap::new(),
            relist: None,
            synced: false,
        }
    }
}

impl<F: Clone + PartialEq> Store<F> {
    pub fn new() -> Self {
        Self::default()
    }

    /// The facts in force.
    pub fn live(&self) -> &BTreeMap<String, F> {
        &self.live
    }

    /// A complete list has been applied at least once.
    pub fn synced(&self) -> bool {
        self.synced
    }

    /// A watch event added or modified `name`. True when its facts changed.
    pub fn apply(&mut self, name: String, facts: F) -> bool {
        match self.live.get(&name) {
            Some(old) if *old == facts => false,
            _ => {
                self.live.insert(name, facts);
                true
            }
        }
    }

    /// A watch event deleted `name`. True when it was known.
    pub fn delete(&mut self, name: &str) -> bool {
        self.live.remove(name).is_some()
    }

    /// A relist starts: collect its objects apart until it is complete.
    pub fn init(&mut self) {
        self.relist = Some(BTreeMap::new());
    }

    /// An object of the relist.
    pub fn init_apply(&mut self, name: String, facts: F) {
        self.relist
            .get_or_insert_with(BTreeMap::new)
            .insert(name, facts);
    }

    /// An object of the relist whose facts cannot be read: it still exists, so its last
    /// good facts (if any) stay in force rather than being treated as a deletion.
    pub fn init_keep(&mut self, name: &str) {
        let kept = self.live.get(name).cloned();
        let relist = self.relist.get_or_insert_with(BTreeMap::new);
        if let Some(facts) = kept {
            relist.insert(name.to_owned(), facts);
        }
    }

    /// The relist is complete: its objects replace the facts. True when that changed
    /// anything (false for a relist that found the same facts).
    pub fn init_done(&mut self) -> bool {
        self.synced = true;
        match self.relist.take() {
            Some(relist) if relist != self.live => {
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
        self.live.clear();
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
    fn absent_resource_is_synced_and_empty() {
        let mut store = synced_with(&[("a", 1)]);
        assert!(store.mark_absent());
        assert!(store.synced());
        assert!(names(&store).is_empty());
        assert!(!store.mark_absent());
    }
}
