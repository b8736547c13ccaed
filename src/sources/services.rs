//! The LoadBalancer facts the planner needs, per Service and per EndpointSlice, and the
//! incremental updates that carry them from a source to the daemon.
//!
//! Unlike the node facts (sent as a whole [`super::ClusterState`] after each change),
//! Services and EndpointSlices travel as one [`LbUpdate`] per object that changed: a
//! cluster can hold tens of thousands of them, and the cost of one event must not grow
//! with their number. A source keeps only these facts (never whole objects), sends an
//! update only when an object's facts change (a status-only or annotation-only edit
//! sends nothing), and after a relist (410 Gone, reconnect) sends exactly the
//! differences against what it sent before: the deletions of objects that are gone
//! and the changes of those that differ.
//!
//! Pure (no tokio, no I/O, no logging) and free of Kubernetes types, so that the
//! planner (`routes::lb`) reads the facts without importing `k8s_openapi`: the mapping
//! of a Service and of an EndpointSlice to their facts is [`super::service_objects`].
//! Also here: the differences between two sets of facts ([`LbFacts::changes_to`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

/// A namespaced object's identity: `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl ObjectKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: Arc::from(namespace),
            name: Arc::from(name),
        }
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// `spec.externalTrafficPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum TrafficPolicy {
    /// `Cluster` (also the meaning of an absent field).
    #[default]
    Cluster,
    /// `Local`: announced only from nodes that host a ready endpoint.
    Local,
}

/// What one Service says that the LoadBalancer planner needs. Sent for every Service,
/// whatever its type, so that a type change away from LoadBalancer withdraws.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceFacts {
    /// `spec.type == LoadBalancer`.
    pub load_balancer: bool,
    /// `spec.loadBalancerClass`, `None` when unset.
    pub class: Option<Arc<str>>,
    pub policy: TrafficPolicy,
    /// Every `status.loadBalancer.ingress[].ip` that parses as an IP address, in the
    /// object's order, without duplicates.
    pub ingress_ips: Vec<IpAddr>,
    /// Ingress entries that carry no usable IP (a `hostname` only, or an `ip` that does
    /// not parse), as written, for `plan`/`doctor` and a log line.
    pub ingress_refused: Vec<String>,
}

impl ServiceFacts {
    /// A Service this speaker could announce: `type: LoadBalancer` of a class it
    /// handles ([`class_served`]). The planner's first two rules, and what scopes the
    /// EndpointSlice watches to the Services whose endpoints matter.
    pub fn announceable(&self, classes: &BTreeSet<Arc<str>>) -> bool {
        self.load_balancer && class_served(classes, self.class.as_ref())
    }
}

/// Whether a `spec.loadBalancerClass` is handled (`--lb-class`): with no class given,
/// only Services without a class (MetalLB's rule); otherwise only the classes listed.
pub fn class_served(classes: &BTreeSet<Arc<str>>, class: Option<&Arc<str>>) -> bool {
    match class {
        None => classes.is_empty(),
        Some(c) => classes.contains(c),
    }
}

/// What one EndpointSlice (discovery.k8s.io/v1) says that the planner needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SliceFacts {
    /// The Service it belongs to: its namespace and its `kubernetes.io/service-name`
    /// label. `None` when the label is missing (such a slice counts for no Service).
    pub service: Option<ObjectKey>,
    /// Ready endpoints per node (`nodeName`): `conditions.ready` true or unset, and
    /// `conditions.terminating` not true. Nodes with no ready endpoint are absent.
    pub ready_by_node: BTreeMap<Arc<str>, u32>,
    /// Ready endpoints without a `nodeName`: they count for `Cluster` Services, and for
    /// no node under `Local`.
    pub ready_without_node: u32,
}

impl SliceFacts {
    /// Ready endpoints anywhere.
    pub fn ready(&self) -> u64 {
        self.ready_by_node
            .values()
            .map(|n| u64::from(*n))
            .sum::<u64>()
            + u64::from(self.ready_without_node)
    }
}

/// One change to the LoadBalancer facts. `None` means the object is gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LbUpdate {
    Service {
        key: ObjectKey,
        facts: Option<ServiceFacts>,
    },
    Slice {
        key: ObjectKey,
        facts: Option<SliceFacts>,
    },
    /// Every Service and EndpointSlice has been listed once (after the updates of that
    /// first list). Sent once per source run; until then the planner announces no LB
    /// route, so a restart never withdraws routes of Services not yet seen.
    Synced,
}

impl LbUpdate {
    /// The object this update is about; `None` for [`LbUpdate::Synced`].
    pub fn key(&self) -> Option<&ObjectKey> {
        match self {
            Self::Service { key, .. } | Self::Slice { key, .. } => Some(key),
            Self::Synced => None,
        }
    }
}

/// Every Service's and EndpointSlice's facts, by object: what a source has sent, or
/// what a one-shot command reads from the cluster-state files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LbFacts {
    pub services: BTreeMap<ObjectKey, ServiceFacts>,
    pub slices: BTreeMap<ObjectKey, SliceFacts>,
}

impl LbFacts {
    /// The updates that turn `self` into `new`: exactly the objects that differ.
    /// Additions first, then changes, then deletions (each: Services, then slices), so
    /// that endpoints moving from a deleted slice to a new one are never all absent in
    /// between.
    pub fn changes_to(&self, new: &LbFacts) -> Vec<LbUpdate> {
        let services = changes(&self.services, &new.services);
        let slices = changes(&self.slices, &new.slices);
        let mut out = Vec::new();
        for kind in [Change::Added, Change::Changed, Change::Deleted] {
            for (key, facts, _) in services.iter().filter(|c| c.2 == kind) {
                out.push(LbUpdate::Service {
                    key: ObjectKey::clone(key),
                    facts: facts.cloned(),
                });
            }
            for (key, facts, _) in slices.iter().filter(|c| c.2 == kind) {
                out.push(LbUpdate::Slice {
                    key: ObjectKey::clone(key),
                    facts: facts.cloned(),
                });
            }
        }
        out
    }

    /// Applies one update (a receiver's side). True when it changed anything.
    pub fn apply(&mut self, update: &LbUpdate) -> bool {
        fn put<F: PartialEq>(
            map: &mut BTreeMap<ObjectKey, F>,
            key: &ObjectKey,
            facts: Option<F>,
        ) -> bool {
            match facts {
                Some(facts) if map.get(key) == Some(&facts) => false,
                Some(facts) => {
                    map.insert(key.clone(), facts);
                    true
                }
                None => map.remove(key).is_some(),
            }
        }
        match update {
            LbUpdate::Service { key, facts } => put(&mut self.services, key, facts.clone()),
            LbUpdate::Slice { key, facts } => put(&mut self.slices, key, facts.clone()),
            LbUpdate::Synced => false,
        }
    }
}

/// How an object differs between two sets of facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Added,
    Changed,
    Deleted,
}

/// The objects of `old` and `new` whose facts differ, in key order, with their new
/// facts (`None`: deleted). Linear in the size of both maps (one merge of two sorted
/// walks).
#[allow(clippy::type_complexity)]
pub fn changes<'a, K: Ord, F: PartialEq>(
    old: &'a BTreeMap<K, F>,
    new: &'a BTreeMap<K, F>,
) -> Vec<(&'a K, Option<&'a F>, Change)> {
    let mut out = Vec::new();
    let mut old_iter = old.iter().peekable();
    let mut new_iter = new.iter().peekable();
    loop {
        match (old_iter.peek(), new_iter.peek()) {
            (None, None) => break,
            (Some((k, _)), None) => {
                out.push((*k, None, Change::Deleted));
                old_iter.next();
            }
            (None, Some((k, v))) => {
                out.push((*k, Some(*v), Change::Added));
                new_iter.next();
            }
            (Some((ko, vo)), Some((kn, vn))) => match ko.cmp(kn) {
                std::cmp::Ordering::Less => {
                    out.push((*ko, None, Change::Deleted));
                    old_iter.next();
                }
                std::cmp::Ordering::Greater => {
                    out.push((*kn, Some(*vn), Change::Added));
                    new_iter.next();
                }
                std::cmp::Ordering::Equal => {
                    if vo != vn {
                        out.push((*kn, Some(*vn), Change::Changed));
                    }
                    old_iter.next();
                    new_iter.next();
                }
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts_of(services: &[(&str, u8)], slices: &[(&str, u32)]) -> LbFacts {
        let mut facts = LbFacts::default();
        for (name, last) in services {
            facts.services.insert(
                ObjectKey::new("n", name),
                ServiceFacts {
                    load_balancer: true,
                    ingress_ips: vec![IpAddr::from([192, 0, 2, *last])],
                    ..ServiceFacts::default()
                },
            );
        }
        for (name, ready) in slices {
            facts.slices.insert(
                ObjectKey::new("n", name),
                SliceFacts {
                    ready_without_node: *ready,
                    ..SliceFacts::default()
                },
            );
        }
        facts
    }

    #[test]
    fn changes_are_exactly_the_differences_additions_first() {
        let old = facts_of(&[("a", 1), ("b", 2), ("c", 3)], &[("s1", 1), ("s2", 1)]);
        let new = facts_of(&[("b", 2), ("c", 9), ("d", 4)], &[("s2", 1), ("s3", 1)]);
        let updates = old.changes_to(&new);
        let summary: Vec<String> = updates
            .iter()
            .map(|u| match u {
                LbUpdate::Service { key, facts } => format!("svc {key} {}", facts.is_some()),
                LbUpdate::Slice { key, facts } => format!("slice {key} {}", facts.is_some()),
                LbUpdate::Synced => "synced".into(),
            })
            .collect();
        assert_eq!(
            summary,
            [
                "svc n/d true",
                "slice n/s3 true",
                "svc n/c true",
                "svc n/a false",
                "slice n/s1 false"
            ]
        );
        let mut replayed = old.clone();
        for update in &updates {
            assert!(replayed.apply(update), "{update:?} changes something");
        }
        assert_eq!(replayed, new);
        assert!(new.changes_to(&new).is_empty());
        assert!(!replayed.apply(&LbUpdate::Synced));
        assert_eq!(LbUpdate::Synced.key(), None);
        assert_eq!(updates[0].key(), Some(&ObjectKey::new("n", "d")));
    }

    proptest::proptest! {
        /// Any two sets of facts: the delta is exactly the objects that differ (each
        /// update changes something, an equal object sends nothing), additions come
        /// before changes before deletions, and replaying it gives the new set.
        #[test]
        fn changes_to_is_exact_for_any_two_sets(
            old_services in proptest::collection::btree_map(0u8..12, 0u8..3, 0..10),
            new_services in proptest::collection::btree_map(0u8..12, 0u8..3, 0..10),
            old_slices in proptest::collection::btree_map(0u8..12, 0u32..3, 0..10),
            new_slices in proptest::collection::btree_map(0u8..12, 0u32..3, 0..10),
        ) {
            let build = |services: &BTreeMap<u8, u8>, slices: &BTreeMap<u8, u32>| {
                let names: Vec<(String, u8)> =
                    services.iter().map(|(k, v)| (format!("s{k}"), *v)).collect();
                let slices: Vec<(String, u32)> =
                    slices.iter().map(|(k, v)| (format!("e{k}"), *v)).collect();
                let services: Vec<(&str, u8)> = names.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                let slices: Vec<(&str, u32)> = slices.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                facts_of(&services, &slices)
            };
            let old = build(&old_services, &old_slices);
            let new = build(&new_services, &new_slices);
            let updates = old.changes_to(&new);
            let differing = new.services.iter().filter(|(k, v)| old.services.get(*k) != Some(*v)).count()
                + old.services.keys().filter(|k| !new.services.contains_key(*k)).count()
                + new.slices.iter().filter(|(k, v)| old.slices.get(*k) != Some(*v)).count()
                + old.slices.keys().filter(|k| !new.slices.contains_key(*k)).count();
            proptest::prop_assert_eq!(updates.len(), differing);
            let rank = |u: &LbUpdate| {
                let (key, gone, services_map, slices_map) = match u {
                    LbUpdate::Service { key, facts } => (key, facts.is_none(), true, false),
                    LbUpdate::Slice { key, facts } => (key, facts.is_none(), false, true),
                    LbUpdate::Synced => unreachable!(),
                };
                let existed = (services_map && old.services.contains_key(key))
                    || (slices_map && old.slices.contains_key(key));
                match (existed, gone) {
                    (false, _) => 0,
                    (true, false) => 1,
                    (true, true) => 2,
                }
            };
            let ranks: Vec<u8> = updates.iter().map(rank).collect();
            proptest::prop_assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{:?}", ranks);
            let mut replayed = old.clone();
            for update in &updates {
                proptest::prop_assert!(replayed.apply(update), "{:?} changes nothing", update);
            }
            proptest::prop_assert_eq!(replayed, new);
        }
    }
}
