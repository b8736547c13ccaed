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
//! Also here, pure (no tokio, no I/O, no logging) and shared by the kube watchers and
//! the file source: the mapping of a Service ([`service_facts`]) and of an
//! EndpointSlice, discovery.k8s.io/v1 ([`slice_facts`]) to their facts, and the
//! differences between two sets of facts ([`LbFacts::changes_to`]).

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::error::SourceError;

/// The label that ties an EndpointSlice to its Service (Kubernetes
/// `discovery.k8s.io/v1` `LabelServiceName`).
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";

/// The namespace of an object that names none: what `kubectl apply` gives such a file
/// with the default context. The API server always sets it.
pub const DEFAULT_NAMESPACE: &str = "default";

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

/// A Service's key and the facts the LoadBalancer planner needs.
///
/// - `spec.type` `LoadBalancer` (exactly, as the API server spells it) sets
///   `load_balancer`; any other type or none is not a LoadBalancer.
/// - `spec.loadBalancerClass`: an empty string counts as unset.
/// - `spec.externalTrafficPolicy`: `Cluster` or absent, or `Local`. Any other value
///   (the API server accepts no other) fails the object: guessing `Cluster` would
///   announce a `Local` Service from nodes without its endpoints.
/// - `status.loadBalancer.ingress[]`: each `ip` that parses (spaces around it trimmed)
///   goes to `ingress_ips`, once; an entry with only a `hostname` (a cloud
///   load balancer's DNS name) or an `ip` that does not parse goes to `ingress_refused`
///   as written (the `ip` when present, else the `hostname`; an entry with neither as
///   an empty string). `ipMode` and `ports` are not read: they do not change what is
///   announced.
pub fn service_facts(service: &Service) -> Result<(ObjectKey, ServiceFacts), SourceError> {
    const KIND: &str = "Service";
    let key = object_key(&service.metadata).ok_or(SourceError::MissingName { kind: KIND })?;
    let spec = service.spec.as_ref();
    let policy = match spec
        .and_then(|s| s.external_traffic_policy.as_deref())
        .map(str::trim)
    {
        None | Some("") | Some("Cluster") => TrafficPolicy::Cluster,
        Some("Local") => TrafficPolicy::Local,
        Some(other) => {
            return Err(SourceError::Malformed {
                kind: KIND,
                name: key.to_string(),
                field: "spec.externalTrafficPolicy".into(),
                reason: format!("{other:?} is not Cluster or Local"),
            })
        }
    };
    let mut facts = ServiceFacts {
        load_balancer: spec.and_then(|s| s.type_.as_deref()) == Some("LoadBalancer"),
        class: spec
            .and_then(|s| s.load_balancer_class.as_deref())
            .filter(|c| !c.is_empty())
            .map(Arc::from),
        policy,
        ..ServiceFacts::default()
    };
    let ingress = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_deref())
        .unwrap_or_default();
    let mut seen = HashSet::new();
    for entry in ingress {
        let ip = entry.ip.as_deref().map(str::trim).filter(|s| !s.is_empty());
        match ip.map(|text| (text, text.parse::<IpAddr>())) {
            Some((_, Ok(ip))) => {
                if seen.insert(ip) {
                    facts.ingress_ips.push(ip);
                }
            }
            Some((text, Err(_))) => facts.ingress_refused.push(text.to_owned()),
            None => facts
                .ingress_refused
                .push(entry.hostname.clone().unwrap_or_default()),
        }
    }
    Ok((key, facts))
}

/// An EndpointSlice's key and the ready endpoints it holds, by node.
///
/// Readiness follows the EndpointConditions API (discovery.k8s.io/v1): `ready` "nil
/// should be interpreted as true"; `terminating` "nil should be interpreted as false".
/// An endpoint counts when `ready` is true or unset and `terminating` is not true.
/// `ready` alone is not enough: it may stay true on a terminating endpoint when the
/// Service sets `publishNotReadyAddresses`, and a node whose only endpoints are going
/// away should stop attracting traffic. `serving` (ready regardless of terminating) is
/// not read: announcing a Service from terminating endpoints would hold its route
/// through a rollout's drain, which is what withdrawing on the last ready endpoint
/// exists to avoid.
///
/// An endpoint with no (or an empty) `nodeName` counts in `ready_without_node`. Each
/// endpoint counts once whatever its number of `addresses` (a dual-stack Service has
/// one slice per family; the planner asks "any ready endpoint", never how many Pods).
/// A slice without the `kubernetes.io/service-name` label (or with an empty one)
/// belongs to no Service.
///
/// Node names come from `names`, so that the slices of a cluster share one copy of each
/// (100,000 endpoints on 100 nodes hold 100 names, not 100,000).
pub fn slice_facts(
    slice: &EndpointSlice,
    names: &mut Names,
) -> Result<(ObjectKey, SliceFacts), SourceError> {
    let key = object_key(&slice.metadata).ok_or(SourceError::MissingName {
        kind: "EndpointSlice",
    })?;
    let service = slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_SERVICE_NAME))
        .map(|name| name.trim())
        .filter(|name| !name.is_empty())
        .map(|name| ObjectKey {
            namespace: Arc::clone(&key.namespace),
            name: Arc::from(name),
        });
    let mut facts = SliceFacts {
        service,
        ..SliceFacts::default()
    };
    for endpoint in slice.endpoints.iter().filter(|e| endpoint_ready(e)) {
        match endpoint.node_name.as_deref().filter(|n| !n.is_empty()) {
            Some(node) => {
                let count = facts.ready_by_node.entry(names.get(node)).or_insert(0);
                *count = count.saturating_add(1);
            }
            None => facts.ready_without_node = facts.ready_without_node.saturating_add(1),
        }
    }
    Ok((key, facts))
}

/// One shared copy of each name that many objects repeat (node names), for as long as
/// an object uses it: names no fact holds any more are dropped whenever the set has
/// doubled since the last such sweep, so node churn does not grow it for ever.
#[derive(Debug, Default)]
pub struct Names {
    set: HashSet<Arc<str>>,
    sweep_at: usize,
}

impl Names {
    /// The shared copy of `name`.
    pub fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.set.get(name) {
            return Arc::clone(shared);
        }
        if self.set.len() >= self.sweep_at {
            self.set.retain(|n| Arc::strong_count(n) > 1);
            self.sweep_at = (self.set.len() * 2).max(64);
        }
        let shared: Arc<str> = Arc::from(name);
        self.set.insert(Arc::clone(&shared));
        shared
    }

    /// Names held (for tests).
    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

/// `conditions.ready` true or unset, and `conditions.terminating` not true.
fn endpoint_ready(endpoint: &Endpoint) -> bool {
    let conditions = endpoint.conditions.as_ref();
    let ready = conditions.and_then(|c| c.ready).unwrap_or(true);
    let terminating = conditions.and_then(|c| c.terminating).unwrap_or(false);
    ready && !terminating
}

/// `namespace/name`; a missing namespace is [`DEFAULT_NAMESPACE`]; `None` without a
/// name.
pub fn object_key(meta: &ObjectMeta) -> Option<ObjectKey> {
    let name = meta.name.as_deref().filter(|n| !n.is_empty())?;
    let namespace = meta
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(DEFAULT_NAMESPACE);
    Some(ObjectKey::new(namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(value: serde_json::Value) -> Service {
        serde_json::from_value(value).unwrap()
    }

    fn slice(value: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(value).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// A dual-stack LoadBalancer Service as the API server returns it, with a status
    /// written by an allocator.
    #[test]
    fn load_balancer_service_reads_type_class_policy_and_ips() {
        let (key, facts) = service_facts(&service(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "812",
                "annotations": {"metallb.universe.tf/address-pool": "public"}},
            "spec": {
                "type": "LoadBalancer", "loadBalancerClass": "io.cilium/bgp",
                "externalTrafficPolicy": "Local", "healthCheckNodePort": 31234,
                "clusterIP": "10.96.0.10", "ipFamilies": ["IPv4", "IPv6"],
                "ipFamilyPolicy": "PreferDualStack",
                "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080}],
                "selector": {"app": "web"}
            },
            "status": {"loadBalancer": {"ingress": [
                {"ip": "192.0.2.10", "ipMode": "VIP"},
                {"ip": "2001:db8::10"},
                {"ip": "192.0.2.10"},
                {"hostname": "web.lb.example"},
                {"ip": "192.0.2.300"},
                {}
            ]}}
        })))
        .unwrap();
        assert_eq!(key, ObjectKey::new("shop", "web"));
        assert_eq!(key.to_string(), "shop/web");
        assert_eq!(
            facts,
            ServiceFacts {
                load_balancer: true,
                class: Some(Arc::from("io.cilium/bgp")),
                policy: TrafficPolicy::Local,
                ingress_ips: vec![ip("192.0.2.10"), ip("2001:db8::10")],
                ingress_refused: vec![
                    "web.lb.example".to_owned(),
                    "192.0.2.300".to_owned(),
                    String::new()
                ],
            }
        );
    }

    #[test]
    fn other_types_and_bare_services_have_default_facts() {
        for value in [
            json!({"metadata": {"name": "a", "namespace": "n"}}),
            json!({"metadata": {"name": "a", "namespace": "n"}, "spec": {"type": "ClusterIP"}, "status": {}}),
            json!({"metadata": {"name": "a", "namespace": "n"}, "spec": {"type": "loadbalancer"}}),
            json!({"metadata": {"name": "a", "namespace": "n"},
                "spec": {"type": "NodePort", "externalTrafficPolicy": "Cluster", "loadBalancerClass": ""},
                "status": {"loadBalancer": {}}}),
        ] {
            let (_, facts) = service_facts(&service(value.clone())).unwrap();
            assert_eq!(facts, ServiceFacts::default(), "{value}");
        }
    }

    #[test]
    fn service_without_namespace_is_in_default_and_without_name_fails() {
        let (key, _) = service_facts(&service(json!({"metadata": {"name": "a"}}))).unwrap();
        assert_eq!(key, ObjectKey::new(DEFAULT_NAMESPACE, "a"));
        let err = service_facts(&service(json!({"metadata": {"namespace": "n"}}))).unwrap_err();
        assert_eq!(err, SourceError::MissingName { kind: "Service" });
    }

    #[test]
    fn unknown_traffic_policy_fails_the_service_naming_the_field() {
        let err = service_facts(&service(json!({
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "OnlyLocal"}
        })))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Service n/a: spec.externalTrafficPolicy: \"OnlyLocal\" is not Cluster or Local"
        );
    }

    /// An EndpointSlice as the EndpointSlice controller writes it during a rollout:
    /// one ready Pod per node, one terminating, one not ready yet, one ready without a
    /// node, one with conditions unset.
    #[test]
    fn slice_counts_ready_endpoints_per_node() {
        let (key, facts) = slice_facts(&slice(json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-x7k2p", "namespace": "shop", "generateName": "web-",
                "labels": {"kubernetes.io/service-name": "web",
                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "u1"}]},
            "addressType": "IPv4",
            "ports": [{"name": "", "port": 8080, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["10.0.1.5"], "nodeName": "n1", "zone": "a",
                    "conditions": {"ready": true, "serving": true, "terminating": false},
                    "targetRef": {"kind": "Pod", "name": "web-1", "namespace": "shop"}},
                {"addresses": ["10.0.1.6"], "nodeName": "n1",
                    "conditions": {"ready": true, "serving": true}},
                {"addresses": ["10.0.2.5"], "nodeName": "n2",
                    "conditions": {"ready": false, "serving": true, "terminating": true}},
                {"addresses": ["10.0.2.6"], "nodeName": "n2",
                    "conditions": {"ready": true, "serving": true, "terminating": true}},
                {"addresses": ["10.0.3.5"], "nodeName": "n3",
                    "conditions": {"ready": false, "serving": false, "terminating": false}},
                {"addresses": ["10.0.4.5"], "nodeName": "n4"},
                {"addresses": ["10.0.5.5"], "conditions": {"ready": true}},
                {"addresses": ["10.0.5.6"], "nodeName": "", "conditions": {}}
            ]
        })), &mut Names::default())
        .unwrap();
        assert_eq!(key, ObjectKey::new("shop", "web-x7k2p"));
        assert_eq!(facts.service, Some(ObjectKey::new("shop", "web")));
        let by_node: Vec<(&str, u32)> = facts
            .ready_by_node
            .iter()
            .map(|(n, c)| (&**n, *c))
            .collect();
        assert_eq!(by_node, [("n1", 2), ("n4", 1)]);
        assert_eq!(facts.ready_without_node, 2);
        assert_eq!(facts.ready(), 5);
    }

    #[test]
    fn slice_without_service_label_or_endpoints_belongs_to_nothing() {
        let (key, facts) = slice_facts(
            &slice(json!({
                "metadata": {"name": "manual", "namespace": "n", "labels": {"app": "x"}},
                "addressType": "IPv4", "endpoints": null
            })),
            &mut Names::default(),
        )
        .unwrap();
        assert_eq!(key, ObjectKey::new("n", "manual"));
        assert_eq!(facts, SliceFacts::default());
        let (_, facts) = slice_facts(
            &slice(json!({
                "metadata": {"name": "m", "namespace": "n", "labels": {LABEL_SERVICE_NAME: ""}},
                "addressType": "FQDN", "endpoints": [{"addresses": ["a.example"]}]
            })),
            &mut Names::default(),
        )
        .unwrap();
        assert_eq!(facts.service, None);
        assert_eq!(facts.ready_without_node, 1);
        let err = slice_facts(
            &slice(json!({"metadata": {}, "addressType": "IPv4", "endpoints": []})),
            &mut Names::default(),
        )
        .unwrap_err();
        assert_eq!(
            err,
            SourceError::MissingName {
                kind: "EndpointSlice"
            }
        );
    }

    #[test]
    fn node_names_are_shared_and_swept_when_unused() {
        let mut names = Names::default();
        let slice_on = |node: &str| {
            slice(
                json!({"metadata": {"name": format!("s-{node}"), "namespace": "n"},
                "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"], "nodeName": node}]}),
            )
        };
        let (_, a) = slice_facts(&slice_on("n1"), &mut names).unwrap();
        let (_, b) = slice_facts(&slice_on("n1"), &mut names).unwrap();
        let (na, nb) = (
            a.ready_by_node.keys().next().unwrap(),
            b.ready_by_node.keys().next().unwrap(),
        );
        assert!(Arc::ptr_eq(na, nb), "one copy of n1");
        drop((a, b));
        // 200 nodes come and go; only the names still held survive the sweeps.
        let mut kept = Vec::new();
        for i in 0..200 {
            let (_, facts) = slice_facts(&slice_on(&format!("node-{i}")), &mut names).unwrap();
            if i % 50 == 0 {
                kept.push(facts);
            }
        }
        assert!(names.len() < 200, "swept: {}", names.len());
        let (_, again) = slice_facts(&slice_on("node-150"), &mut names).unwrap();
        assert!(Arc::ptr_eq(
            kept[3].ready_by_node.keys().next().unwrap(),
            again.ready_by_node.keys().next().unwrap()
        ));
    }

    #[test]
    fn odd_objects_map_without_panicking() {
        // Shapes that deserialize but carry nothing usable; none may panic.
        for value in [
            json!({"metadata": {"name": "a"}, "spec": {}, "status": {"loadBalancer": {"ingress": []}}}),
            json!({"metadata": {"name": "a"}, "spec": {"type": ""},
                "status": {"loadBalancer": {"ingress": [{"ip": ""}, {"ip": " 192.0.2.1 "}, {"hostname": ""}]}}}),
        ] {
            let _ = service_facts(&service(value));
        }
        let (_, facts) = service_facts(&service(json!({"metadata": {"name": "a"},
            "status": {"loadBalancer": {"ingress": [{"ip": " 192.0.2.1 "}, {"ip": "fe80::1%eth0"}]}}})))
        .unwrap();
        assert_eq!(facts.ingress_ips, [ip("192.0.2.1")]);
        assert_eq!(facts.ingress_refused, ["fe80::1%eth0"]);
    }

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
