//! The Kubernetes objects the sources read (Node, CiliumNode, CiliumPodIPPool, ConfigMap)
//! and the pure
//! mapping from each object to the facts of [`ClusterState`](super::model::ClusterState).
//!
//! Shared by the kube watchers and the file source, so a node read from the API and the
//! same node read from `kubectl get -o yaml` give the same facts. Pure: no tokio, no I/O,
//! no logging. A field that cannot be read fails the whole object with a
//! [`SourceError`] naming the field and the value; the caller decides what to keep.
//!
//! CIDRs are normalised the way Cilium's `net.ParseCIDR` reads them: host bits are
//! cleared (`10.0.1.5/24` is `10.0.1.0/24`).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ClusterResourceScope;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use super::error::SourceError;
use super::model::{
    CiliumConfig, CiliumNodeFacts, NodeFacts, NodeLifecycle, PoolAllocation, PoolRanges,
};

/// Cilium's annotation for a node's IPv4 pod CIDR (Cilium `annotation.V4CIDRName`).
pub const ANNOTATION_V4_CIDR: &str = "io.cilium.network.ipv4-pod-cidr";
/// Cilium's annotation for a node's IPv6 pod CIDR (Cilium `annotation.V6CIDRName`).
pub const ANNOTATION_V6_CIDR: &str = "io.cilium.network.ipv6-pod-cidr";

/// cilium-config keys read by [`cilium_config`].
pub const KEY_IPAM: &str = "ipam";
pub const KEY_ANNOUNCE_POD_CIDR: &str = "bgp-announce-pod-cidr";
pub const KEY_ANNOUNCE_LB_IP: &str = "bgp-announce-lb-ip";
pub const KEY_POOL_V4: &str = "cluster-pool-ipv4-cidr";
pub const KEY_POOL_V6: &str = "cluster-pool-ipv6-cidr";

/// A CiliumNode (`cilium.io/v2`, cluster-scoped, plural `ciliumnodes`), reduced to the
/// fields this speaker reads; every other field is ignored.
///
/// `spec` is read leniently: a spec of the wrong shape does not fail the list or watch
/// it arrives in (which would stall every other node), it fails only this object's
/// mapping, in [`cilium_node_facts`].
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CiliumNode {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Lenient<CiliumNodeSpec>,
}

/// CiliumNode `spec`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct CiliumNodeSpec {
    #[serde(default)]
    pub ipam: CiliumNodeIpam,
}

/// CiliumNode `spec.ipam`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct CiliumNodeIpam {
    /// The pod CIDRs the cluster-pool operator allocated to the node.
    #[serde(default, rename = "podCIDRs")]
    pub pod_cidrs: Option<Vec<String>>,
    /// The multi-pool state: what the agent requested and the operator allocated.
    #[serde(default)]
    pub pools: Option<CiliumNodePools>,
}

/// CiliumNode `spec.ipam.pools` (Cilium's `IPAMPoolSpec`); `requested` is ignored.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct CiliumNodePools {
    #[serde(default)]
    pub allocated: Option<Vec<CiliumNodePoolAllocation>>,
}

/// One entry of `spec.ipam.pools.allocated` (Cilium's `IPAMPoolAllocation`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct CiliumNodePoolAllocation {
    #[serde(default)]
    pub pool: String,
    #[serde(default)]
    pub cidrs: Option<Vec<String>>,
}

/// A CiliumPodIPPool (`cilium.io/v2alpha1`, cluster-scoped, plural `ciliumpodippools`):
/// a multi-pool IPAM pool, reduced to its ranges. `spec` is lenient as a CiliumNode's.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CiliumPodIpPool {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Lenient<PodIpPoolSpec>,
}

/// CiliumPodIPPool `spec`: `ipv4` and `ipv6`, each optional.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct PodIpPoolSpec {
    #[serde(default)]
    pub ipv4: Option<PodIpPoolFamily>,
    #[serde(default)]
    pub ipv6: Option<PodIpPoolFamily>,
}

/// CiliumPodIPPool `spec.ipv4` / `spec.ipv6`; `maskSize` is the operator's business.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct PodIpPoolFamily {
    #[serde(default)]
    pub cidrs: Vec<String>,
}

/// Implements `kube::Resource` for a cluster-scoped Cilium custom resource (group
/// `cilium.io`), so it can be listed and watched without generated CRD code.
macro_rules! cilium_cluster_resource {
    ($type:ty, kind: $kind:literal, version: $version:literal, plural: $plural:literal) => {
        impl kube::Resource for $type {
            type DynamicType = ();
            type Scope = ClusterResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }

            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("cilium.io")
            }

            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($version)
            }

            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }

            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

cilium_cluster_resource!(CiliumNode, kind: "CiliumNode", version: "v2", plural: "ciliumnodes");
cilium_cluster_resource!(
    CiliumPodIpPool,
    kind: "CiliumPodIPPool",
    version: "v2alpha1",
    plural: "ciliumpodippools"
);

/// A field that either has the expected shape or is kept as the reason it does not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Lenient<T> {
    /// Absent or null.
    #[default]
    Absent,
    Valid(T),
    /// Present but not of the expected shape: the deserializer's message.
    Invalid(String),
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        if value.is_null() {
            return Ok(Self::Absent);
        }
        Ok(match serde_json::from_value(value) {
            Ok(v) => Self::Valid(v),
            Err(e) => Self::Invalid(e.to_string()),
        })
    }
}

/// The facts a Node states about itself, keyed by its name.
///
/// Pod CIDR order follows Kubernetes and Cilium: `spec.podCIDR` first when it is set and
/// differs from `spec.podCIDRs[0]`, then the rest of `spec.podCIDRs`, without duplicates.
pub fn node_facts(node: &Node) -> Result<(String, NodeFacts), SourceError> {
    const KIND: &str = "Node";
    let name = object_name(KIND, &node.metadata)?;
    let spec = node.spec.as_ref();

    let mut node_cidrs: Vec<IpNet> = Vec::new();
    // Order-preserving dedup; a set, not `Vec::contains`, so a Node with many CIDRs
    // (a generated cluster state) loads in linear time.
    let mut seen = HashSet::new();
    if let Some(primary) = spec
        .and_then(|s| s.pod_cidr.as_deref())
        .filter(|s| !s.is_empty())
    {
        let net = parse_cidr(KIND, &name, "spec.podCIDR", primary)?;
        seen.insert(net);
        node_cidrs.push(net);
    }
    for (i, text) in spec
        .and_then(|s| s.pod_cidrs.as_deref())
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let net = parse_cidr(KIND, &name, &format!("spec.podCIDRs[{i}]"), text)?;
        if seen.insert(net) {
            node_cidrs.push(net);
        }
    }

    let annotations = node.metadata.annotations.as_ref();
    let mut annotation_cidrs = Vec::new();
    for (key, want_v4) in [(ANNOTATION_V4_CIDR, true), (ANNOTATION_V6_CIDR, false)] {
        let Some(text) = annotations
            .and_then(|a| a.get(key))
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
        else {
            continue;
        };
        let field = format!("metadata.annotations[{key}]");
        annotation_cidrs.push(parse_cidr_of_family(KIND, &name, field, text, want_v4)?);
    }

    let mut facts = NodeFacts {
        uid: node.metadata.uid.clone(),
        labels: Arc::new(node.metadata.labels.clone().unwrap_or_default()),
        node_cidrs,
        annotation_cidrs,
        lifecycle: node_lifecycle(node),
        ..NodeFacts::default()
    };
    // Addresses are the kubelet's to validate; one we cannot read is not an InternalIP
    // we could use as a next hop, and must not hide the node's pod CIDRs.
    let addresses = node.status.as_ref().and_then(|s| s.addresses.as_deref());
    for address in addresses.unwrap_or_default() {
        if address.type_ != "InternalIP" {
            continue;
        }
        match address.address.trim().parse::<IpAddr>() {
            Ok(IpAddr::V4(v4)) if facts.internal_ipv4.is_none() => facts.internal_ipv4 = Some(v4),
            Ok(IpAddr::V6(v6)) if facts.internal_ipv6.is_none() => facts.internal_ipv6 = Some(v6),
            _ => {}
        }
    }
    Ok((name, facts))
}

/// The kubelet's words in the Ready condition while its graceful node shutdown runs
/// (pkg/kubelet/nodeshutdown: `ShutdownStatus` is one of the Ready condition's errors).
pub const SHUTTING_DOWN_MESSAGE: &str = "node is shutting down";

/// What the Node says of its own coming and going. Nothing here can fail: a field we
/// cannot read says nothing.
pub fn node_lifecycle(node: &Node) -> NodeLifecycle {
    let spec = node.spec.as_ref();
    let mut taints: Vec<String> = spec
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|t| t.key.clone())
        .collect();
    taints.sort_unstable();
    taints.dedup();
    let shutting_down = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| {
            c.type_ == "Ready"
                && c.status != "True"
                && c.message
                    .as_deref()
                    .is_some_and(|m| m.contains(SHUTTING_DOWN_MESSAGE))
        });
    NodeLifecycle {
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        deleting: node.metadata.deletion_timestamp.is_some(),
        shutting_down,
        taints,
    }
}

/// What a CiliumNode says, keyed by its name, which is the node's name: its
/// `spec.ipam.podCIDRs` (cluster-pool) and `spec.ipam.pools.allocated` (multi-pool).
///
/// Allocations are kept in the object's order; an allocation without CIDRs is left out,
/// one naming no pool fails the object, a CIDR listed twice (in one pool or two) is kept
/// once, where it is first listed.
pub fn cilium_node_facts(node: &CiliumNode) -> Result<(String, CiliumNodeFacts), SourceError> {
    const KIND: &str = "CiliumNode";
    let (name, spec) = named_spec(KIND, &node.metadata, &node.spec)?;
    let Some(spec) = spec else {
        return Ok((name, CiliumNodeFacts::default()));
    };
    let pod_cidrs = spec.ipam.pod_cidrs.as_deref().unwrap_or_default();
    // Sized to the list: a one-CIDR Vec grown by a push takes room for four, and
    // there is one per node for as long as the state is kept.
    let mut facts = CiliumNodeFacts {
        pod_cidrs: Vec::with_capacity(pod_cidrs.len()),
        ..CiliumNodeFacts::default()
    };
    let mut seen = HashSet::new();
    for (i, text) in pod_cidrs.iter().enumerate() {
        let field = || format!("spec.ipam.podCIDRs[{i}]");
        push_new(
            &mut facts.pod_cidrs,
            &mut seen,
            parse_cidr(KIND, &name, &field(), text)?,
        );
    }
    let allocated = spec
        .ipam
        .pools
        .as_ref()
        .and_then(|p| p.allocated.as_deref())
        .unwrap_or_default();
    let mut seen = HashSet::new();
    for (i, allocation) in allocated.iter().enumerate() {
        let field = format!("spec.ipam.pools.allocated[{i}]");
        if allocation.pool.trim().is_empty() {
            return Err(SourceError::Malformed {
                kind: KIND,
                name,
                field: format!("{field}.pool"),
                reason: "must name a CiliumPodIPPool".into(),
            });
        }
        let mut cidrs = Vec::new();
        for (j, text) in allocation.cidrs.iter().flatten().enumerate() {
            let net = parse_cidr(KIND, &name, &format!("{field}.cidrs[{j}]"), text)?;
            push_new(&mut cidrs, &mut seen, net);
        }
        if cidrs.is_empty() {
            continue;
        }
        match facts.pools.iter_mut().find(|p| p.pool == allocation.pool) {
            Some(pool) => pool.cidrs.extend(cidrs),
            None => facts.pools.push(PoolAllocation {
                pool: allocation.pool.clone(),
                cidrs,
            }),
        }
    }
    Ok((name, facts))
}

/// The ranges of a CiliumPodIPPool, keyed by its name (the pool name CiliumNodes use).
/// A range of the wrong family fails the object, as in cilium-config's pool keys.
pub fn pod_ip_pool_ranges(pool: &CiliumPodIpPool) -> Result<(String, PoolRanges), SourceError> {
    const KIND: &str = "CiliumPodIPPool";
    let (name, spec) = named_spec(KIND, &pool.metadata, &pool.spec)?;
    let Some(spec) = spec else {
        return Ok((name, PoolRanges::default()));
    };
    let mut ranges = PoolRanges::default();
    for (family, key, want_v4) in [(&spec.ipv4, "ipv4", true), (&spec.ipv6, "ipv6", false)] {
        for (i, text) in family.iter().flat_map(|f| f.cidrs.iter()).enumerate() {
            let field = format!("spec.{key}.cidrs[{i}]");
            let net = parse_cidr_of_family(KIND, &name, field, text, want_v4)?;
            match net {
                IpNet::V4(_) => ranges.ipv4.push(net),
                IpNet::V6(_) => ranges.ipv6.push(net),
            }
        }
    }
    Ok((name, ranges))
}

/// Appends `net` unless `seen` already holds it: an order-preserving dedup in linear
/// time.
fn push_new(out: &mut Vec<IpNet>, seen: &mut HashSet<IpNet>, net: IpNet) {
    if seen.insert(net) {
        out.push(net);
    }
}

/// An object's name and its lenient `spec`: `None` when absent, an error naming the
/// object when malformed.
fn named_spec<'a, T>(
    kind: &'static str,
    meta: &ObjectMeta,
    spec: &'a Lenient<T>,
) -> Result<(String, Option<&'a T>), SourceError> {
    let name = object_name(kind, meta)?;
    match spec {
        Lenient::Absent => Ok((name, None)),
        Lenient::Valid(spec) => Ok((name, Some(spec))),
        Lenient::Invalid(reason) => Err(SourceError::Malformed {
            kind,
            name,
            field: "spec".into(),
            reason: reason.clone(),
        }),
    }
}

/// The keys of Cilium's `cilium-config` ConfigMap this speaker reads.
///
/// `bgp-announce-pod-cidr` and `bgp-announce-lb-ip` accept what Go's
/// `strconv.ParseBool` accepts (Cilium reads them with viper); anything else fails the
/// ConfigMap like any bad value. An empty value counts as absent. Pool keys hold one or more CIDRs separated by spaces or commas.
pub fn cilium_config(config_map: &ConfigMap) -> Result<CiliumConfig, SourceError> {
    const KIND: &str = "ConfigMap";
    let name = object_name(KIND, &config_map.metadata)?;
    let empty = BTreeMap::new();
    let data = config_map.data.as_ref().unwrap_or(&empty);
    let field = |key: &str| format!("data[{key}]");

    let flag = |key: &str| -> Result<Option<bool>, SourceError> {
        match data.get(key).map(|s| s.trim()) {
            None | Some("") => Ok(None),
            Some(text) => parse_bool(text)
                .map(Some)
                .ok_or_else(|| SourceError::InvalidBool {
                    kind: KIND,
                    name: name.clone(),
                    field: field(key),
                    value: text.to_owned(),
                }),
        }
    };
    let announce_pod_cidr = flag(KEY_ANNOUNCE_POD_CIDR)?;
    let announce_lb_ip = flag(KEY_ANNOUNCE_LB_IP)?;
    let mut pools = [Vec::new(), Vec::new()];
    for (pool, key, want_v4) in [(0, KEY_POOL_V4, true), (1, KEY_POOL_V6, false)] {
        let Some(text) = data.get(key) else { continue };
        for part in text
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|s| !s.is_empty())
        {
            pools[pool].push(parse_cidr_of_family(
                KIND,
                &name,
                field(key),
                part,
                want_v4,
            )?);
        }
    }
    let [cluster_pool_v4, cluster_pool_v6] = pools;
    Ok(CiliumConfig {
        ipam: data.get(KEY_IPAM).cloned(),
        announce_pod_cidr,
        announce_lb_ip,
        cluster_pool_v4,
        cluster_pool_v6,
    })
}

/// The text under `key` of a ConfigMap (the bgp-config), `None` when the key is absent.
pub fn config_map_text(config_map: &ConfigMap, key: &str) -> Option<String> {
    config_map.data.as_ref().and_then(|d| d.get(key)).cloned()
}

fn object_name(kind: &'static str, meta: &ObjectMeta) -> Result<String, SourceError> {
    meta.name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or(SourceError::MissingName { kind })
}

fn parse_cidr(
    kind: &'static str,
    name: &str,
    field: &str,
    text: &str,
) -> Result<IpNet, SourceError> {
    text.trim()
        .parse::<IpNet>()
        .map(|net| net.trunc())
        .map_err(|e| SourceError::InvalidCidr {
            kind,
            name: name.to_owned(),
            field: field.to_owned(),
            value: text.to_owned(),
            reason: e.to_string(),
        })
}

/// [`parse_cidr`] for a field that holds CIDRs of one family only.
fn parse_cidr_of_family(
    kind: &'static str,
    name: &str,
    field: String,
    text: &str,
    want_v4: bool,
) -> Result<IpNet, SourceError> {
    let net = parse_cidr(kind, name, &field, text)?;
    if matches!(net, IpNet::V4(_)) != want_v4 {
        return Err(SourceError::WrongFamily {
            kind,
            name: name.to_owned(),
            field,
            value: text.to_owned(),
            expected: if want_v4 { "IPv4" } else { "IPv6" },
        });
    }
    Ok(net)
}

/// Go's `strconv.ParseBool`.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn node(value: serde_json::Value) -> Node {
        serde_json::from_value(value).unwrap()
    }

    fn cilium(value: serde_json::Value) -> CiliumNode {
        serde_json::from_value(value).unwrap()
    }

    fn config_map(data: serde_json::Value) -> ConfigMap {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cilium-config", "namespace": "kube-system"},
            "data": data,
        }))
        .unwrap()
    }

    #[test]
    fn node_lifecycle_reads_cordon_deletion_taints_and_the_kubelets_shutdown() {
        // As the API server sends a node the kubelet is shutting down (graceful node
        // shutdown), cordoned by a drain, tainted twice with one key.
        let n = node(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "w1", "deletionTimestamp": "2026-11-27T10:00:00Z"},
            "spec": {"unschedulable": true, "taints": [
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                {"key": "ToBeDeletedByClusterAutoscaler", "value": "1732700000", "effect": "NoSchedule"},
                {"key": "ToBeDeletedByClusterAutoscaler", "effect": "PreferNoSchedule"}
            ]},
            "status": {"conditions": [
                {"type": "MemoryPressure", "status": "False", "message": "node is shutting down"},
                {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                 "message": "[container runtime status check may not have completed yet, node is shutting down]"}
            ]}
        }));
        assert_eq!(
            node_lifecycle(&n),
            NodeLifecycle {
                unschedulable: true,
                deleting: true,
                shutting_down: true,
                taints: vec![
                    "ToBeDeletedByClusterAutoscaler".to_owned(),
                    "node.kubernetes.io/unschedulable".to_owned()
                ],
            }
        );
        assert_eq!(node_facts(&n).unwrap().1.lifecycle, node_lifecycle(&n));
        // A Ready node with the same words elsewhere, and a bare node: nothing.
        let ready = node(json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "w2"},
            "status": {"conditions": [
                {"type": "Ready", "status": "True", "message": "node is shutting down"}
            ]}
        }));
        assert_eq!(node_lifecycle(&ready), NodeLifecycle::default());
    }

    #[test]
    fn node_facts_reads_labels_uid_addresses_and_cidrs() {
        let (name, facts) = node_facts(&node(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": "master1", "uid": "7f0c", "labels": {"role": "master"},
                "annotations": {ANNOTATION_V4_CIDR: "10.9.0.0/24"}
            },
            "spec": {"podCIDR": "10.5.112.0/24", "podCIDRs": ["10.5.112.0/24", "fd00:5:112::/64"]},
            "status": {"addresses": [
                {"type": "Hostname", "address": "master1"},
                {"type": "ExternalIP", "address": "198.51.100.7"},
                {"type": "InternalIP", "address": "not-an-ip"},
                {"type": "InternalIP", "address": "192.168.10.11"},
                {"type": "InternalIP", "address": "192.168.10.99"},
                {"type": "InternalIP", "address": "fd00:192:168::11"}
            ]}
        })))
        .unwrap();
        assert_eq!(name, "master1");
        assert_eq!(facts.uid.as_deref(), Some("7f0c"));
        assert_eq!(facts.labels.get("role").map(String::as_str), Some("master"));
        assert_eq!(facts.internal_ipv4, Some("192.168.10.11".parse().unwrap()));
        assert_eq!(
            facts.internal_ipv6,
            Some("fd00:192:168::11".parse().unwrap())
        );
        assert_eq!(
            facts.node_cidrs,
            vec![net("10.5.112.0/24"), net("fd00:5:112::/64")]
        );
        assert_eq!(facts.annotation_cidrs, vec![net("10.9.0.0/24")]);
    }

    #[test]
    fn pod_cidr_comes_first_when_it_differs_from_pod_cidrs_0() {
        let (_, facts) = node_facts(&node(json!({
            "metadata": {"name": "a"},
            "spec": {"podCIDR": "10.0.2.0/24", "podCIDRs": ["fd00::/64", "10.0.2.0/24"]}
        })))
        .unwrap();
        assert_eq!(facts.node_cidrs, vec![net("10.0.2.0/24"), net("fd00::/64")]);
        // podCIDR alone (clusters older than dual-stack) is honoured.
        let (_, facts) = node_facts(&node(json!({
            "metadata": {"name": "a"}, "spec": {"podCIDR": "10.0.3.0/24"}
        })))
        .unwrap();
        assert_eq!(facts.node_cidrs, vec![net("10.0.3.0/24")]);
    }

    #[test]
    fn host_bits_are_cleared_as_cilium_reads_them() {
        let (_, facts) = node_facts(&node(json!({
            "metadata": {"name": "a"}, "spec": {"podCIDRs": ["10.0.4.9/24"]}
        })))
        .unwrap();
        assert_eq!(facts.node_cidrs, vec![net("10.0.4.0/24")]);
    }

    #[test]
    fn malformed_node_cidr_names_node_field_and_value() {
        let err = node_facts(&node(json!({
            "metadata": {"name": "worker7"},
            "spec": {"podCIDRs": ["10.0.5.0/24", "10.0.300.0/24"]}
        })))
        .unwrap_err();
        assert!(
            matches!(&err, SourceError::InvalidCidr { name, field, value, .. }
                if name == "worker7" && field == "spec.podCIDRs[1]" && value == "10.0.300.0/24"),
            "{err:?}"
        );
        assert!(err
            .to_string()
            .starts_with("Node worker7: spec.podCIDRs[1]: \"10.0.300.0/24\" is not a CIDR"));
    }

    #[test]
    fn annotation_of_the_wrong_family_is_an_error() {
        let err = node_facts(&node(json!({
            "metadata": {"name": "a", "annotations": {ANNOTATION_V4_CIDR: "fd00::/64"}}
        })))
        .unwrap_err();
        assert!(
            matches!(
                err,
                SourceError::WrongFamily {
                    expected: "IPv4",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn node_without_name_is_an_error() {
        let err = node_facts(&node(json!({"metadata": {}}))).unwrap_err();
        assert_eq!(err, SourceError::MissingName { kind: "Node" });
    }

    #[test]
    fn cilium_node_reads_spec_ipam_pod_cidrs_and_ignores_the_rest() {
        let (name, facts) = cilium_node_facts(&cilium(json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
            "metadata": {"name": "master1", "resourceVersion": "12"},
            "spec": {
                "addresses": [{"type": "InternalIP", "ip": "192.168.10.11"}],
                "health": {"ipv4": "10.5.113.20"},
                "ipam": {"podCIDRs": ["10.5.113.0/24"], "pool": {}},
                "eni": {}
            },
            "status": {"ipam": {"operator-status": {}}}
        })))
        .unwrap();
        assert_eq!(name, "master1");
        assert_eq!(facts.pod_cidrs, vec![net("10.5.113.0/24")]);
        assert!(facts.pools.is_empty());
    }

    #[test]
    fn cilium_node_without_spec_or_ipam_has_no_cidrs() {
        for value in [
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": {"name": "a"}, "spec": null}),
            json!({"metadata": {"name": "a"}, "spec": {}}),
            json!({"metadata": {"name": "a"}, "spec": {"ipam": {}}}),
        ] {
            assert_eq!(
                cilium_node_facts(&cilium(value.clone())).unwrap(),
                ("a".to_owned(), CiliumNodeFacts::default()),
                "{value}"
            );
        }
    }

    #[test]
    fn cilium_node_with_a_spec_of_the_wrong_shape_deserializes_and_fails_mapping() {
        // Deserializing must succeed, or one bad object would fail a whole list.
        let object = cilium(json!({
            "metadata": {"name": "bad"}, "spec": {"ipam": {"podCIDRs": "10.0.0.0/24"}}
        }));
        let err = cilium_node_facts(&object).unwrap_err();
        assert!(
            matches!(&err, SourceError::Malformed { kind: "CiliumNode", name, field, .. }
                if name == "bad" && field == "spec"),
            "{err:?}"
        );
    }

    #[test]
    fn cilium_config_reads_mode_switch_and_pools() {
        let config = cilium_config(&config_map(json!({
            "ipam": "cluster-pool",
            "bgp-announce-pod-cidr": "false",
            "bgp-announce-lb-ip": "true",
            "cluster-pool-ipv4-cidr": "10.0.0.0/16 10.1.0.0/16,10.2.0.0/16",
            "cluster-pool-ipv6-cidr": "fd00::/104",
            "cluster-pool-ipv4-mask-size": "24"
        })))
        .unwrap();
        assert_eq!(
            config,
            CiliumConfig {
                ipam: Some("cluster-pool".into()),
                announce_pod_cidr: Some(false),
                announce_lb_ip: Some(true),
                cluster_pool_v4: vec![net("10.0.0.0/16"), net("10.1.0.0/16"), net("10.2.0.0/16")],
                cluster_pool_v6: vec![net("fd00::/104")],
            }
        );
    }

    #[test]
    fn cilium_config_defaults_and_go_booleans() {
        assert_eq!(
            cilium_config(&config_map(json!({}))).unwrap(),
            CiliumConfig::default()
        );
        for (text, value) in [("True", true), ("0", false), ("F", false), ("1", true)] {
            let config = cilium_config(&config_map(json!({KEY_ANNOUNCE_POD_CIDR: text}))).unwrap();
            assert_eq!(config.announce_pod_cidr, Some(value), "{text}");
        }
        let err = cilium_config(&config_map(json!({KEY_ANNOUNCE_POD_CIDR: "no"}))).unwrap_err();
        assert!(
            matches!(&err, SourceError::InvalidBool { value, .. } if value == "no"),
            "{err:?}"
        );
    }

    #[test]
    fn announce_lb_ip_is_absent_or_a_go_boolean() {
        let read = |data| cilium_config(&config_map(data)).map(|c| c.announce_lb_ip);
        assert_eq!(read(json!({})).unwrap(), None);
        assert_eq!(read(json!({KEY_ANNOUNCE_LB_IP: " "})).unwrap(), None);
        for (text, value) in [("true", true), ("T", true), ("0", false), ("FALSE", false)] {
            assert_eq!(
                read(json!({KEY_ANNOUNCE_LB_IP: text})).unwrap(),
                Some(value),
                "{text}"
            );
        }
        let err = read(json!({KEY_ANNOUNCE_LB_IP: "yes"})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ConfigMap cilium-config: data[bgp-announce-lb-ip]: \"yes\" is not a boolean (true or false)"
        );
    }

    #[test]
    fn cilium_config_rejects_bad_pools() {
        let err = cilium_config(&config_map(json!({KEY_POOL_V4: "10.0.0.0/33"}))).unwrap_err();
        assert!(matches!(err, SourceError::InvalidCidr { .. }), "{err:?}");
        let err = cilium_config(&config_map(json!({KEY_POOL_V6: "10.0.0.0/8"}))).unwrap_err();
        assert!(
            matches!(
                err,
                SourceError::WrongFamily {
                    expected: "IPv6",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn config_map_text_reads_one_key() {
        let cm = config_map(json!({"config.yaml": "peers: []\n"}));
        assert_eq!(
            config_map_text(&cm, "config.yaml").as_deref(),
            Some("peers: []\n")
        );
        assert_eq!(config_map_text(&cm, "config"), None);
    }

    #[test]
    fn cilium_node_resource_paths() {
        use kube::Resource;
        assert_eq!(
            CiliumNode::url_path(&(), None),
            "/apis/cilium.io/v2/ciliumnodes"
        );
        assert_eq!(CiliumNode::api_version(&()), "cilium.io/v2");
    }

    /// A CiliumNode of a multi-pool cluster as Cilium 1.15 writes it (agent's requests,
    /// operator's allocations, the other IPAM backends' empty blocks).
    #[test]
    fn cilium_node_reads_multi_pool_allocations_grouped_by_pool() {
        let (name, facts) = cilium_node_facts(&cilium(json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
            "metadata": {"name": "worker1", "resourceVersion": "9921"},
            "spec": {
                "addresses": [{"type": "InternalIP", "ip": "172.18.0.3"}],
                "alibaba-cloud": {}, "azure": {}, "encryption": {}, "eni": {},
                "health": {"ipv4": "10.10.0.190"},
                "ipam": {"pools": {
                    "allocated": [
                        {"pool": "default", "cidrs": ["10.10.0.0/27", "fd00:10::/120"]},
                        {"pool": "blue", "cidrs": ["10.20.0.0/27"]},
                        {"pool": "default", "cidrs": ["10.10.0.32/27", "10.10.0.0/27"]},
                        {"pool": "empty"}
                    ],
                    "requested": [
                        {"pool": "default", "needed": {"ipv4-addrs": 16, "ipv6-addrs": 16}},
                        {"pool": "blue", "needed": {"ipv4-addrs": 1}}
                    ]
                }}
            },
            "status": {"ipam": {"operator-status": {}}}
        })))
        .unwrap();
        assert_eq!(name, "worker1");
        assert!(facts.pod_cidrs.is_empty());
        assert_eq!(
            facts.pools,
            vec![
                PoolAllocation {
                    pool: "default".into(),
                    cidrs: vec![
                        net("10.10.0.0/27"),
                        net("fd00:10::/120"),
                        net("10.10.0.32/27")
                    ],
                },
                PoolAllocation {
                    pool: "blue".into(),
                    cidrs: vec![net("10.20.0.0/27")],
                },
            ]
        );
    }

    #[test]
    fn cilium_node_pool_errors_name_the_field() {
        let err = cilium_node_facts(&cilium(json!({
            "metadata": {"name": "w"},
            "spec": {"ipam": {"pools": {"allocated": [{"pool": "p", "cidrs": ["10.0.0.0/33"]}]}}}
        })))
        .unwrap_err();
        assert!(
            matches!(&err, SourceError::InvalidCidr { field, .. } if field == "spec.ipam.pools.allocated[0].cidrs[0]"),
            "{err:?}"
        );
        let err = cilium_node_facts(&cilium(json!({
            "metadata": {"name": "w"},
            "spec": {"ipam": {"pools": {"allocated": [{"cidrs": ["10.0.0.0/24"]}]}}}
        })))
        .unwrap_err();
        assert!(
            matches!(&err, SourceError::Malformed { field, .. } if field == "spec.ipam.pools.allocated[0].pool"),
            "{err:?}"
        );
    }

    fn pool(value: serde_json::Value) -> CiliumPodIpPool {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn pod_ip_pool_reads_both_families_and_refuses_the_wrong_one() {
        let (name, ranges) = pod_ip_pool_ranges(&pool(json!({
            "apiVersion": "cilium.io/v2alpha1", "kind": "CiliumPodIPPool",
            "metadata": {"name": "default"},
            "spec": {
                "ipv4": {"cidrs": ["10.10.0.0/16", "10.11.0.0/16"], "maskSize": 27},
                "ipv6": {"cidrs": ["fd00:10::/104"], "maskSize": 120}
            }
        })))
        .unwrap();
        assert_eq!(name, "default");
        assert_eq!(
            ranges,
            PoolRanges {
                ipv4: vec![net("10.10.0.0/16"), net("10.11.0.0/16")],
                ipv6: vec![net("fd00:10::/104")],
            }
        );
        let (_, ranges) = pod_ip_pool_ranges(&pool(json!({
            "metadata": {"name": "v4"}, "spec": {"ipv4": {"cidrs": ["10.1.0.0/16"], "maskSize": 24}}
        })))
        .unwrap();
        assert!(ranges.ipv6.is_empty());
        let err = pod_ip_pool_ranges(&pool(json!({
            "metadata": {"name": "bad"}, "spec": {"ipv6": {"cidrs": ["10.1.0.0/16"]}}
        })))
        .unwrap_err();
        assert!(
            matches!(&err, SourceError::WrongFamily { field, expected: "IPv6", .. } if field == "spec.ipv6.cidrs[0]"),
            "{err:?}"
        );
        let err = pod_ip_pool_ranges(&pool(json!({
            "metadata": {"name": "bad"}, "spec": {"ipv4": "10.1.0.0/16"}
        })))
        .unwrap_err();
        assert!(matches!(err, SourceError::Malformed { .. }), "{err:?}");
    }

    #[test]
    fn pod_ip_pool_resource_paths() {
        use kube::Resource;
        assert_eq!(
            CiliumPodIpPool::url_path(&(), None),
            "/apis/cilium.io/v2alpha1/ciliumpodippools"
        );
    }
}
