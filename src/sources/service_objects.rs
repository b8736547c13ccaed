//! The mapping of a Service and of an EndpointSlice (discovery.k8s.io/v1) to the
//! LoadBalancer facts of [`super::services`]: [`service_facts`], [`slice_facts`] and
//! their object key ([`object_key`]), beside [`super::objects`] which does the same for
//! Nodes, CiliumNodes and the cilium-config. Shared by the kube watchers and the file
//! source.
//!
//! Pure (no tokio, no I/O, no logging). Must not: keep whole objects (only their facts
//! leave here), or be imported by the planner (it reads [`super::services`]).

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::error::SourceError;
use super::services::{ObjectKey, ServiceFacts, SliceFacts, TrafficPolicy};

/// The label that ties an EndpointSlice to its Service (Kubernetes
/// `discovery.k8s.io/v1` `LabelServiceName`).
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";

/// The namespace of an object that names none: what `kubectl apply` gives such a file
/// with the default context. The API server always sets it.
pub const DEFAULT_NAMESPACE: &str = "default";

/// `spec.type` is `LoadBalancer`, exactly as the API server spells it (and as its
/// `spec.type=LoadBalancer` field selector matches); any other type or none is not.
pub fn is_load_balancer(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}

/// A Service's key and the facts the LoadBalancer planner needs.
///
/// - [`is_load_balancer`] sets `load_balancer`.
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
        load_balancer: is_load_balancer(service),
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
}
