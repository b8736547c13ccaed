//! The EndpointSlice watches scoped to the Services this speaker could announce
//! ([`ServiceFacts::announceable`]: `type: LoadBalancer` of a class it handles): what
//! they select, when they are re-established, and the slice facts they give.
//!
//! - The watches are cluster-wide with a set-based label selector
//!   `kubernetes.io/service-name in (a,b,...)` on the Service names; a Service name is
//!   only unique per namespace, so a slice counts only when its namespace's Service of
//!   that name is one we could announce (a same-named Service elsewhere costs its
//!   slices' events, nothing else).
//! - The names are packed into watches of at most `budget` bytes of selector
//!   ([`SELECTOR_BYTES`] by default): a name joins the first watch with room and stays
//!   there while it is needed, so a change re-establishes one watch, not all.
//! - Re-establishing is make-before-break: the new watch (new selector) lists while the
//!   old one keeps delivering; the old one stops only when the new one's list is
//!   complete. Nothing is ever announced from a gap and nothing is withdrawn by it. A
//!   Service that becomes announceable is held back (its update not sent) until the
//!   watch that selects its name has listed, so the planner sees it with its slices;
//!   a Service that stops being announceable is sent at once, then its slices' deletions.
//! - At the swap, the new watch's list is in force: a slice that changed after that list
//!   was served and before the swap (the old watch delivered it) is back at its listed
//!   state until the new watch, which resumes from its list, delivers the change again
//!   (at once: it is the first event after the list). Keeping the old watch's facts
//!   instead could keep a lagging watch's stale facts for good, and resource versions
//!   are not comparable.
//! - A slice that moves between Services of two watches is seen by both (an ADDED in
//!   one, a DELETED in the other, in either order): the last writer is in force.
//!
//! Decides and folds only: the kube source's loop carries out its [`WatchOrder`]s. No
//! tokio, no clock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher::{self, Event};

use super::step;
use super::store::Store;
use crate::sources::service_objects::{self, Names, LABEL_SERVICE_NAME};
use crate::sources::services::{LbUpdate, ObjectKey, ServiceFacts, SliceFacts};
use crate::sources::{Resource, ResourceStatus};

/// The longest label selector of one watch, in bytes. The selector travels in the
/// request's URL: the API server (Go's net/http) accepts 1 MiB of request line and
/// headers, but proxies and load balancers in front of it commonly stop at 8 KiB
/// (nginx's `large_client_header_buffers`), so half of that. 4 KiB holds 60 names of
/// the longest kind (63 characters) or about 190 of 20 characters.
pub const SELECTOR_BYTES: usize = 4096;

/// The selector's fixed part, before the names.
const SELECTOR_HEAD: &str = "kubernetes.io/service-name in (";

/// One slice watch, for the kube source's loop.
pub type WatchId = u64;

/// What the kube source's loop must do with the slice watches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchOrder {
    /// Start a cluster-wide EndpointSlice watch with this label selector; its events
    /// come back tagged with `id`.
    Start { id: WatchId, selector: String },
    /// Stop the watch `id` (drop it: its connection closes).
    Stop { id: WatchId },
}

/// The label selector of a set of Service names.
pub fn selector(names: &BTreeSet<Arc<str>>) -> String {
    debug_assert_eq!(
        SELECTOR_HEAD.trim_end_matches(" in ("),
        LABEL_SERVICE_NAME,
        "the selector is on the label that ties a slice to its Service"
    );
    let mut s = String::from(SELECTOR_HEAD);
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(name);
    }
    s.push(')');
    s
}

/// A label value the API server accepts in a selector: at most 63 characters of
/// `[A-Za-z0-9._-]`, alphanumeric at both ends. Every Service name is one (a DNS-1035
/// label); anything else would make the API server refuse the whole selector.
fn label_value(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// One watch: the names it selects and its slices' facts.
#[derive(Debug)]
struct Watch {
    id: WatchId,
    names: BTreeSet<Arc<str>>,
    store: Store<SliceFacts, ObjectKey>,
}

/// One slot of names: the watch in force, and the one listing to replace it.
#[derive(Debug, Default)]
struct Chunk {
    /// The names this slot must select.
    target: BTreeSet<Arc<str>>,
    /// Listed: its slices are in force.
    active: Option<Watch>,
    /// Listing with `target` (make-before-break).
    pending: Option<Watch>,
}

/// Which of a chunk's watches an id is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Active,
    Pending,
}

/// The scoped slice watches' state, and the updates and orders they produce.
#[derive(Debug)]
pub(super) struct ScopedSlices {
    classes: BTreeSet<Arc<str>>,
    budget: usize,
    chunks: Vec<Chunk>,
    /// The chunk each wanted name is in.
    chunk_of: BTreeMap<Arc<str>, usize>,
    /// The Services we could announce.
    wanted: BTreeSet<ObjectKey>,
    /// How many of them bear each name (over all namespaces).
    wanted_names: BTreeMap<Arc<str>, usize>,
    /// Announceable Services waiting for their watch's list: their latest facts.
    held: BTreeMap<ObjectKey, ServiceFacts>,
    /// The chunk whose facts of a slice are in force (the last that wrote it).
    owner: BTreeMap<ObjectKey, usize>,
    /// The slices' facts as sent.
    sent: BTreeMap<ObjectKey, SliceFacts>,
    next_id: WatchId,
    orders: Vec<WatchOrder>,
    out: Vec<LbUpdate>,
    names: Names,
}

impl ScopedSlices {
    /// `first_id`: the first watch id to hand out (ids below are the caller's).
    pub(super) fn new(classes: BTreeSet<Arc<str>>, budget: usize, first_id: WatchId) -> Self {
        Self {
            classes,
            budget,
            chunks: Vec::new(),
            chunk_of: BTreeMap::new(),
            wanted: BTreeSet::new(),
            wanted_names: BTreeMap::new(),
            held: BTreeMap::new(),
            owner: BTreeMap::new(),
            sent: BTreeMap::new(),
            next_id: first_id,
            orders: Vec::new(),
            out: Vec::new(),
            names: Names::default(),
        }
    }

    /// The watch orders produced since the last call.
    pub(super) fn take_orders(&mut self) -> Vec<WatchOrder> {
        std::mem::take(&mut self.orders)
    }

    /// The updates produced since the last call, in the order they must be applied.
    pub(super) fn take_updates(&mut self) -> Vec<LbUpdate> {
        std::mem::take(&mut self.out)
    }

    /// Every watch started so far has listed and no Service is held back.
    pub(super) fn listed(&self) -> bool {
        self.held.is_empty() && self.chunks.iter().all(|c| c.pending.is_none())
    }

    /// The watches in force and listing.
    pub(super) fn watch_count(&self) -> usize {
        self.chunks
            .iter()
            .map(|c| usize::from(c.active.is_some()) + usize::from(c.pending.is_some()))
            .sum()
    }

    /// The Services' changes as their store recorded them (additions, changes, then
    /// deletions): sends them, holding back those that wait for their slices, and
    /// re-scopes the watches.
    pub(super) fn services_changed(&mut self, changes: Vec<(ObjectKey, Option<ServiceFacts>)>) {
        let mut affected = BTreeSet::new();
        let (mut first, mut last) = (Vec::new(), Vec::new());
        for (key, facts) in changes {
            let now = facts
                .as_ref()
                .is_some_and(|f| f.announceable(&self.classes))
                && label_value(&key.name);
            if now != self.wanted.contains(&key) {
                self.want(&key, now);
                affected.insert(key.clone());
            }
            let update = LbUpdate::Service { key, facts };
            if now {
                last.push(update);
            } else {
                first.push(update);
            }
        }
        // Services that stop counting first, then the slices that change with them
        // (the watches re-scoped), then the Services that count: so the planner never
        // sees an announceable Service without the slices it has.
        for update in first {
            if let Some(key) = update.key() {
                self.held.remove(key);
            }
            self.out.push(update);
        }
        self.reconcile();
        self.recompute_services(&affected);
        for update in last {
            let LbUpdate::Service {
                key,
                facts: Some(facts),
            } = update
            else {
                continue;
            };
            if self.covered(&key) {
                self.held.remove(&key);
                self.out.push(LbUpdate::Service {
                    key,
                    facts: Some(facts),
                });
            } else {
                self.held.insert(key, facts);
            }
        }
    }

    /// Applies one event of the watch `id` (ignored when that watch was stopped).
    pub(super) fn slice(
        &mut self,
        id: WatchId,
        item: watcher::Result<Event<EndpointSlice>>,
        status: &mut ResourceStatus,
        now: SystemTime,
    ) {
        let Some((c, role)) = self.find(id) else {
            return;
        };
        let names = &mut self.names;
        let chunk = &mut self.chunks[c];
        let watch = match role {
            Role::Active => chunk.active.as_mut(),
            Role::Pending => chunk.pending.as_mut(),
        };
        let Some(watch) = watch else { return };
        let listed = matches!(item, Ok(Event::InitDone));
        step(
            Resource::EndpointSlices,
            &mut watch.store,
            status,
            item,
            now,
            |s| service_objects::slice_facts(s, names).map(|(_, facts)| facts),
        );
        match role {
            Role::Pending if listed => self.promote(c),
            Role::Pending => {}
            Role::Active => {
                let changes = watch.store.take_changes();
                for (key, facts) in changes {
                    if facts.is_some() {
                        self.owner.insert(key.clone(), c);
                    } else {
                        self.disown(&key, c);
                    }
                    self.recompute(&key);
                }
            }
        }
    }

    fn find(&self, id: WatchId) -> Option<(usize, Role)> {
        self.chunks.iter().enumerate().find_map(|(c, chunk)| {
            if chunk.active.as_ref().is_some_and(|w| w.id == id) {
                Some((c, Role::Active))
            } else if chunk.pending.as_ref().is_some_and(|w| w.id == id) {
                Some((c, Role::Pending))
            } else {
                None
            }
        })
    }

    fn want(&mut self, key: &ObjectKey, now: bool) {
        if now {
            self.wanted.insert(key.clone());
            *self.wanted_names.entry(Arc::clone(&key.name)).or_insert(0) += 1;
        } else {
            self.wanted.remove(key);
            if let Some(n) = self.wanted_names.get_mut(&key.name) {
                *n -= 1;
                if *n == 0 {
                    self.wanted_names.remove(&key.name);
                }
            }
        }
    }

    /// The Service is announceable and the watch in force for its name selects it.
    fn covered(&self, service: &ObjectKey) -> bool {
        self.wanted.contains(service)
            && self
                .chunk_of
                .get(&service.name)
                .and_then(|c| self.chunks[*c].active.as_ref())
                .is_some_and(|w| w.names.contains(&service.name))
    }

    /// Brings each chunk's target in line with the wanted names, and orders the
    /// watches that this changes.
    fn reconcile(&mut self) {
        let gone: Vec<Arc<str>> = self
            .chunk_of
            .keys()
            .filter(|n| !self.wanted_names.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(c) = self.chunk_of.remove(&name) {
                self.chunks[c].target.remove(&name);
            }
        }
        let new: Vec<Arc<str>> = self
            .wanted_names
            .keys()
            .filter(|n| !self.chunk_of.contains_key(*n))
            .cloned()
            .collect();
        for name in new {
            let c = self.slot_for(&name);
            self.chunks[c].target.insert(Arc::clone(&name));
            self.chunk_of.insert(name, c);
        }
        for c in 0..self.chunks.len() {
            self.reconcile_chunk(c);
        }
    }

    /// The chunk a new name goes to: one whose watch still selects it (no new list for
    /// that name), else the first with room, else a new (or emptied) one.
    fn slot_for(&mut self, name: &Arc<str>) -> usize {
        let selects = |w: &Option<Watch>| w.as_ref().is_some_and(|w| w.names.contains(name));
        if let Some(c) = self
            .chunks
            .iter()
            .position(|c| selects(&c.active) || selects(&c.pending))
        {
            return c;
        }
        let fits = |target: &BTreeSet<Arc<str>>| {
            // The selector grows by a comma and the name.
            let grown = selector(target).len() + 1 + name.len();
            !target.is_empty() && grown <= self.budget
        };
        if let Some(c) = self.chunks.iter().position(|c| fits(&c.target)) {
            return c;
        }
        if let Some(c) = self
            .chunks
            .iter()
            .position(|c| c.target.is_empty() && c.active.is_none() && c.pending.is_none())
        {
            return c;
        }
        self.chunks.push(Chunk::default());
        self.chunks.len() - 1
    }

    fn reconcile_chunk(&mut self, c: usize) {
        let chunk = &self.chunks[c];
        let target = chunk.target.clone();
        let in_force = chunk.active.as_ref().map(|w| &w.names) == Some(&target);
        let listing = chunk.pending.as_ref().map(|w| &w.names) == Some(&target);
        if target.is_empty() || in_force {
            // The watch in force selects exactly the target (or nothing is wanted):
            // a listing replacement is not needed any more.
            if let Some(pending) = self.chunks[c].pending.take() {
                self.orders.push(WatchOrder::Stop { id: pending.id });
            }
            if target.is_empty() {
                if let Some(active) = self.chunks[c].active.take() {
                    self.orders.push(WatchOrder::Stop { id: active.id });
                    self.drop_watch(c, &active);
                }
            }
            return;
        }
        if listing {
            return;
        }
        if let Some(pending) = self.chunks[c].pending.take() {
            self.orders.push(WatchOrder::Stop { id: pending.id });
        }
        let id = self.next_id;
        self.next_id += 1;
        self.orders.push(WatchOrder::Start {
            id,
            selector: selector(&target),
        });
        self.chunks[c].pending = Some(Watch {
            id,
            names: target,
            store: Store::tracking(),
        });
    }

    /// The pending watch of chunk `c` has listed: it replaces the one in force, whose
    /// slices it no longer selects are recomputed; the Services it covers now are
    /// released after their slices.
    fn promote(&mut self, c: usize) {
        let Some(mut new) = self.chunks[c].pending.take() else {
            return;
        };
        new.store.take_changes();
        let new_keys: Vec<ObjectKey> = new.store.live().keys().cloned().collect();
        for key in &new_keys {
            self.owner.insert(key.clone(), c);
        }
        if let Some(old) = self.chunks[c].active.replace(new) {
            self.orders.push(WatchOrder::Stop { id: old.id });
            self.drop_watch(c, &old);
        }
        for key in &new_keys {
            self.recompute(key);
        }
        let released: Vec<ObjectKey> = self
            .held
            .keys()
            .filter(|k| self.covered(k))
            .cloned()
            .collect();
        for key in released {
            if let Some(facts) = self.held.remove(&key) {
                self.out.push(LbUpdate::Service {
                    key,
                    facts: Some(facts),
                });
            }
        }
    }

    /// A watch of chunk `c` is gone: its slices are in force from another chunk that
    /// holds them, or not at all.
    fn drop_watch(&mut self, c: usize, watch: &Watch) {
        for key in watch.store.live().keys() {
            self.disown(key, c);
            self.recompute(key);
        }
    }

    /// Chunk `c`'s watch that held `key` no longer does: the watch in force of chunk
    /// `c` (a replacement that holds it too) or of another chunk takes over, if any.
    fn disown(&mut self, key: &ObjectKey, c: usize) {
        if self.owner.get(key) != Some(&c) {
            return;
        }
        let holds = |chunk: &Chunk| {
            chunk
                .active
                .as_ref()
                .is_some_and(|w| w.store.live().contains_key(key))
        };
        let next = if holds(&self.chunks[c]) {
            Some(c)
        } else {
            self.chunks.iter().position(holds)
        };
        match next {
            Some(i) => self.owner.insert(key.clone(), i),
            None => self.owner.remove(key),
        };
    }

    /// The slices of `services` (whose announceability changed), as sent and as in
    /// force, recomputed.
    fn recompute_services(&mut self, services: &BTreeSet<ObjectKey>) {
        if services.is_empty() {
            return;
        }
        let of = |f: &SliceFacts| f.service.as_ref().is_some_and(|s| services.contains(s));
        let mut keys: BTreeSet<ObjectKey> = self
            .sent
            .iter()
            .filter(|(_, f)| of(f))
            .map(|(k, _)| k.clone())
            .collect();
        for chunk in &self.chunks {
            if let Some(w) = &chunk.active {
                keys.extend(
                    w.store
                        .live()
                        .iter()
                        .filter(|(_, f)| of(f))
                        .map(|(k, _)| k.clone()),
                );
            }
        }
        for key in &keys {
            self.recompute(key);
        }
    }

    /// Sends the slice's facts in force when they differ from those sent: the owner's,
    /// when its Service is announceable and selected by the watch in force.
    fn recompute(&mut self, key: &ObjectKey) {
        let desired = self
            .owner
            .get(key)
            .and_then(|c| self.chunks[*c].active.as_ref())
            .and_then(|w| w.store.live().get(key))
            .filter(|f| f.service.as_ref().is_some_and(|s| self.covered(s)))
            .cloned();
        match desired {
            Some(facts) if self.sent.get(key) == Some(&facts) => {}
            Some(facts) => {
                self.sent.insert(key.clone(), facts.clone());
                self.out.push(LbUpdate::Slice {
                    key: key.clone(),
                    facts: Some(facts),
                });
            }
            None => {
                if self.sent.remove(key).is_some() {
                    self.out.push(LbUpdate::Slice {
                        key: key.clone(),
                        facts: None,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<Arc<str>> {
        names.iter().map(|n| Arc::from(*n)).collect()
    }

    fn lb() -> ServiceFacts {
        ServiceFacts {
            load_balancer: true,
            ..ServiceFacts::default()
        }
    }

    #[test]
    fn selector_is_set_based_on_the_service_name_label() {
        assert_eq!(
            selector(&set(&["web", "api"])),
            "kubernetes.io/service-name in (api,web)"
        );
        assert!(label_value("web-1.a_b"));
        for bad in ["", "-a", "a-", "a,b", "a)", &"x".repeat(64)] {
            assert!(!label_value(bad), "{bad}");
        }
    }

    /// Names are packed under the budget; a new name goes where there is room, and
    /// only the watch whose names changed is re-established.
    #[test]
    fn names_are_split_under_the_budget_and_only_one_watch_changes() {
        let budget = SELECTOR_HEAD.len() + "aaaa,bbbb)".len();
        let mut s = ScopedSlices::new(BTreeSet::new(), budget, 1);
        s.services_changed(
            ["aaaa", "bbbb", "cccc"]
                .iter()
                .map(|n| (ObjectKey::new("ns", n), Some(lb())))
                .collect(),
        );
        let orders = s.take_orders();
        assert_eq!(
            orders,
            [
                WatchOrder::Start {
                    id: 1,
                    selector: "kubernetes.io/service-name in (aaaa,bbbb)".into()
                },
                WatchOrder::Start {
                    id: 2,
                    selector: "kubernetes.io/service-name in (cccc)".into()
                },
            ]
        );
        for order in &orders {
            assert!(
                matches!(order, WatchOrder::Start { selector, .. } if selector.len() <= budget)
            );
        }
        assert!(s.take_updates().is_empty(), "held until listed");
        assert!(!s.listed());
        assert_eq!(s.watch_count(), 2);
        // cccc stops being a LoadBalancer: its watch stops; the other is untouched.
        s.services_changed(vec![(ObjectKey::new("ns", "cccc"), None)]);
        assert_eq!(s.take_orders(), [WatchOrder::Stop { id: 2 }]);
        assert_eq!(s.take_updates().len(), 1, "the deletion");
        // A class this speaker does not serve does not count.
        let classy = ServiceFacts {
            class: Some(Arc::from("other")),
            ..lb()
        };
        s.services_changed(vec![(ObjectKey::new("ns", "dddd"), Some(classy))]);
        assert!(s.take_orders().is_empty());
    }

    fn slice(namespace: &str, name: &str, service: &str, node: &str) -> EndpointSlice {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": namespace,
                "labels": {LABEL_SERVICE_NAME: service}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"], "nodeName": node,
                "conditions": {"ready": true}}]
        }))
        .unwrap()
    }

    fn list(s: &mut ScopedSlices, id: WatchId, slices: Vec<EndpointSlice>) {
        let mut status = ResourceStatus::default();
        let now = SystemTime::UNIX_EPOCH;
        s.slice(id, Ok(Event::Init), &mut status, now);
        for object in slices {
            s.slice(id, Ok(Event::InitApply(object)), &mut status, now);
        }
        s.slice(id, Ok(Event::InitDone), &mut status, now);
    }

    fn summary(updates: Vec<LbUpdate>) -> Vec<String> {
        updates
            .iter()
            .map(|u| match u {
                LbUpdate::Service { key, facts } => format!("svc {key} {}", facts.is_some()),
                LbUpdate::Slice { key, facts } => format!("slice {key} {}", facts.is_some()),
                LbUpdate::Synced => "synced".into(),
            })
            .collect()
    }

    /// The set changes again while a replacement watch is listing: that one is
    /// stopped and a new one started; the Services it covers stay held until it lists,
    /// and one that stops counting meanwhile is sent at once and never released.
    #[test]
    fn a_listing_replacement_is_replaced_when_the_set_changes_again() {
        let mut s = ScopedSlices::new(BTreeSet::new(), SELECTOR_BYTES, 1);
        s.services_changed(vec![(ObjectKey::new("n", "a"), Some(lb()))]);
        assert_eq!(
            s.take_orders(),
            [WatchOrder::Start {
                id: 1,
                selector: selector(&set(&["a"]))
            }]
        );
        list(&mut s, 1, vec![slice("n", "a-1", "a", "x")]);
        assert_eq!(
            summary(s.take_updates()),
            ["slice n/a-1 true", "svc n/a true"]
        );
        assert!(s.listed());

        s.services_changed(vec![(ObjectKey::new("n", "b"), Some(lb()))]);
        assert_eq!(
            s.take_orders(),
            [WatchOrder::Start {
                id: 2,
                selector: selector(&set(&["a", "b"]))
            }]
        );
        s.services_changed(vec![(ObjectKey::new("n", "c"), Some(lb()))]);
        assert_eq!(
            s.take_orders(),
            [
                WatchOrder::Stop { id: 2 },
                WatchOrder::Start {
                    id: 3,
                    selector: selector(&set(&["a", "b", "c"]))
                }
            ]
        );
        // b stops counting while held: sent at once, never released later.
        s.services_changed(vec![(
            ObjectKey::new("n", "b"),
            Some(ServiceFacts::default()),
        )]);
        assert_eq!(summary(s.take_updates()), ["svc n/b true"]);
        assert_eq!(
            s.take_orders(),
            [
                WatchOrder::Stop { id: 3 },
                WatchOrder::Start {
                    id: 4,
                    selector: selector(&set(&["a", "c"]))
                }
            ]
        );
        assert!(!s.listed(), "c is held");
        // An event of a stopped watch changes nothing.
        list(&mut s, 3, vec![slice("n", "c-9", "c", "x")]);
        assert!(s.take_updates().is_empty());
        assert!(!s.listed());
        list(
            &mut s,
            4,
            vec![slice("n", "a-1", "a", "x"), slice("n", "c-1", "c", "y")],
        );
        assert_eq!(
            summary(s.take_updates()),
            ["slice n/c-1 true", "svc n/c true"]
        );
        assert_eq!(s.take_orders(), [WatchOrder::Stop { id: 1 }]);
        assert!(s.listed());
        assert_eq!(s.watch_count(), 1);
    }
}
