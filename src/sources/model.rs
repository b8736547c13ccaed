//! The cluster facts the sources gather and the pure rule that turns them into the node
//! view: which pod CIDRs each node announces, which it may not, and where the Node and
//! CiliumNode disagree.
//!
//! This file is pure: no tokio, no clock, no I/O, no logging above debug. Both the kube
//! watchers and the file source fill a [`ClusterState`]; [`node_view`] is the only place
//! that decides which object is in force for the cluster's IPAM mode, and it works out
//! each fact the planner, the metrics and `doctor` read once: both sides' CIDRs and
//! their sources, what is in force, refusals, drift, and the overlaps between nodes
//! ([`NodeView::overlaps`]).
//!
//! The rules (issue #5):
//! - IPAM `kubernetes`: the Node's `spec.podCIDRs` with `spec.podCIDR` first (already
//!   ordered by the mapping, see `objects::node_facts`); when the Node sets neither, the
//!   `io.cilium.network.ipv4-pod-cidr` / `ipv6-pod-cidr` annotations.
//! - IPAM `cluster-pool`: the CiliumNode's `spec.ipam.podCIDRs`; a CIDR outside the
//!   configured cluster pool of its family is refused. When cilium-config configures no
//!   pool for a family, CIDRs of that family cannot be checked: they are announced and
//!   the view carries [`ViewWarning::ClusterPoolUnknown`].
//! - IPAM `cluster-pool-v2beta` (Cilium 1.12-1.14): read as `cluster-pool`, the same
//!   object, field and pool keys.
//! - IPAM `multi-pool` (issue #21): every CIDR of the CiliumNode's
//!   `spec.ipam.pools.allocated[].cidrs`, IPv4 and IPv6, grouped by pool
//!   ([`NodeEntry::pools`]). A CIDR outside the ranges of its CiliumPodIPPool
//!   (`spec.ipv4.cidrs` / `spec.ipv6.cidrs`) is refused. When the pools cannot be read
//!   ([`ClusterState::pod_ip_pools`] is `None`: CRD not served, access denied, or a
//!   cluster-state file without them) or a node holds CIDRs of a pool that does not
//!   exist, those CIDRs cannot be checked: they are announced and the view carries
//!   [`ViewWarning::PoolRangesUnknown`]. The Node's `spec.podCIDRs` is not in force
//!   and there is no drift to report: the two objects hold different things.
//! - IPAM `auto`: the `ipam` key of cilium-config. When cilium-config does not exist, or
//!   has no `ipam` key, the mode is `cluster-pool`, Cilium's own default; the view then
//!   carries [`ViewWarning::CiliumConfigAbsent`] (or nothing, when only the key is absent,
//!   which is how Cilium itself reads it). Any other mode (`crd`, `eni`, `azure`,
//!   `alibabacloud`, `delegated-plugin`, unknown ones) is refused with an error naming
//!   it: their per-node addresses are not routable pod CIDRs. The daemon then keeps the
//!   last plan in force.
//!   A cilium-config that was seen and then disappears stays in force
//!   ([`CiliumConfigMemory`]): its deletion must not switch the mode.
//! - Cilium's `bgp-announce-pod-cidr` and `bgp-announce-lb-ip` are read as facts (they
//!   start Cilium's own embedded speaker, see `routes::cilium`), never as this speaker's
//!   switches: what is announced at all is the bgp-config's `speaker` block's say
//!   (`routes::plan`, `routes::lb`).
//! - 0.0.0.0/0 and ::/0 are never announced.
//! - A node exists in the view while its Node exists. Without the object its IPAM mode
//!   reads (no CiliumNode in cluster-pool), it is in the view with no prefixes.
//! - Drift: when both the Node (spec or annotations) and the CiliumNode list CIDRs and the
//!   two sets differ, the entry carries both lists; the IPAM mode decides what is announced.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::sync::Arc;

use ipnet::IpNet;

/// Everything the sources know about the cluster, as raw facts: what each object says,
/// not yet what is announced. Compared by value so an unchanged relist or reload is
/// recognised and sends nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterState {
    /// Facts from each Node object, by node name.
    pub nodes: BTreeMap<String, NodeFacts>,
    /// `spec.ipam.podCIDRs` of each CiliumNode (cilium.io/v2), by name (= node name).
    /// Kept apart from `nodes` because either object can exist without the other.
    pub cilium_nodes: BTreeMap<String, Vec<IpNet>>,
    /// `spec.ipam.pools.allocated` of each CiliumNode (multi-pool IPAM), by name.
    pub cilium_node_pools: BTreeMap<String, Vec<PoolAllocation>>,
    /// The ranges of each CiliumPodIPPool (cilium.io/v2alpha1), by pool name; `None`
    /// when the source cannot read them (see [`node_view`]).
    pub pod_ip_pools: Option<BTreeMap<String, PoolRanges>>,
    /// The `cilium-config` ConfigMap, `None` when it does not exist (or is not watched).
    pub cilium_config: Option<CiliumConfig>,
}

/// A Node's `metadata.labels`, shared by every copy of its facts and view entry: a
/// label map is a few hundred octets even with one label, and a 50,000-node view is
/// copied in a few places.
pub type Labels = Arc<BTreeMap<String, String>>;

/// What one Node object says about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// `metadata.uid`, so Kubernetes Events about the node attach to it.
    pub uid: Option<String>,
    /// `metadata.labels`: the planner matches peers' node selectors against them.
    pub labels: Labels,
    /// First `status.addresses` entry of type InternalIP that is an IPv4 address.
    pub internal_ipv4: Option<Ipv4Addr>,
    /// First `status.addresses` entry of type InternalIP that is an IPv6 address.
    pub internal_ipv6: Option<Ipv6Addr>,
    /// `spec.podCIDRs`, with `spec.podCIDR` first when it differs from `podCIDRs[0]`.
    pub node_cidrs: Vec<IpNet>,
    /// The `io.cilium.network.ipv4-pod-cidr` and `ipv6-pod-cidr` annotations, IPv4 first.
    pub annotation_cidrs: Vec<IpNet>,
    /// What the Node says of its own coming and going (the stop decision reads it).
    pub lifecycle: NodeLifecycle,
}

/// What a Node object says about whether the node is going away: the facts the stop
/// decision (`routes::stop::decide`) reads at the moment the speaker stops.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeLifecycle {
    /// `spec.unschedulable`: cordoned (by hand, or by a drain).
    pub unschedulable: bool,
    /// `metadata.deletionTimestamp` is set: the Node is being deleted.
    pub deleting: bool,
    /// The kubelet's graceful node shutdown is under way: its Ready condition is False
    /// with "node is shutting down" in its message (written before it kills the pods).
    pub shutting_down: bool,
    /// `spec.taints[].key`, sorted, without duplicates.
    pub taints: Vec<String>,
}

/// One entry of a CiliumNode's `spec.ipam.pools.allocated`: the CIDRs the multi-pool
/// operator allocated to the node from one pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolAllocation {
    /// `pool`: the CiliumPodIPPool's name.
    pub pool: String,
    /// `cidrs`, in the object's order, without duplicates.
    pub cidrs: Vec<IpNet>,
}

/// What one CiliumNode says: the pod CIDRs of each IPAM mode that reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CiliumNodeFacts {
    /// `spec.ipam.podCIDRs` (cluster-pool).
    pub pod_cidrs: Vec<IpNet>,
    /// `spec.ipam.pools.allocated` (multi-pool), pools without CIDRs left out.
    pub pools: Vec<PoolAllocation>,
}

impl ClusterState {
    /// Drops every node's facts but `own`'s (its Node's and CiliumNode's); the
    /// cluster-wide facts (cilium-config, the pools' ranges) stay.
    pub fn keep_only_node(&mut self, own: &str) {
        fn keep<V>(map: &mut BTreeMap<String, V>, own: &str) {
            *map = map.remove_entry(own).into_iter().collect();
        }
        keep(&mut self.nodes, own);
        keep(&mut self.cilium_nodes, own);
        keep(&mut self.cilium_node_pools, own);
    }

    /// Records what the CiliumNode `name` says, replacing what it said before.
    pub fn insert_cilium_node(&mut self, name: String, facts: CiliumNodeFacts) {
        if facts.pools.is_empty() {
            self.cilium_node_pools.remove(&name);
        } else {
            self.cilium_node_pools.insert(name.clone(), facts.pools);
        }
        self.cilium_nodes.insert(name, facts.pod_cidrs);
    }
}

/// A CiliumPodIPPool's ranges: `spec.ipv4.cidrs` and `spec.ipv6.cidrs`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolRanges {
    pub ipv4: Vec<IpNet>,
    pub ipv6: Vec<IpNet>,
}

impl PoolRanges {
    /// The ranges of `net`'s family.
    pub fn of_family(&self, net: &IpNet) -> &[IpNet] {
        match net {
            IpNet::V4(_) => &self.ipv4,
            IpNet::V6(_) => &self.ipv6,
        }
    }
}

/// The keys of Cilium's `cilium-config` ConfigMap this speaker reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CiliumConfig {
    /// The `ipam` key as written, `None` when the key is absent.
    pub ipam: Option<String>,
    /// `bgp-announce-pod-cidr` (Cilium's switch for its embedded speaker's pod CIDRs);
    /// `None` when the key is absent or empty. The sources only read it;
    /// `routes::cilium` decides what it means.
    pub announce_pod_cidr: Option<bool>,
    /// `bgp-announce-lb-ip` (the same for its LoadBalancer IPs); `None` when absent or
    /// empty.
    pub announce_lb_ip: Option<bool>,
    /// `cluster-pool-ipv4-cidr` (one or more CIDRs, separated by spaces or commas).
    pub cluster_pool_v4: Vec<IpNet>,
    /// `cluster-pool-ipv6-cidr`.
    pub cluster_pool_v6: Vec<IpNet>,
}

/// A source's status (its last error) while a deleted cilium-config is kept in force.
pub const CILIUM_CONFIG_KEPT: &str =
    "cilium-config deleted: the last one seen stays in force until it is back";

/// Remembers the last cilium-config a source saw, so that its deletion changes nothing.
///
/// Without it, auto mode would fall back to cluster-pool (Cilium's default, right for a
/// cluster that never had a cilium-config) the moment the ConfigMap disappears: on a
/// cluster whose IPAM is `kubernetes` that announces the CiliumNode CIDRs instead of the
/// Node ones, the very outage this speaker exists to prevent. Both sources keep one.
#[derive(Clone, Debug, Default)]
pub struct CiliumConfigMemory {
    last: Option<CiliumConfig>,
    /// The config in force is the remembered copy of one that is gone.
    kept: bool,
}

/// How [`CiliumConfigMemory::in_force`] changed what is kept, for the sources to say so
/// once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeptChange {
    Unchanged,
    /// The cilium-config just went away: its last copy is kept.
    NowKept,
    /// It is back.
    Back,
}

impl CiliumConfigMemory {
    /// The cilium-config in force when the source sees `seen`, and how that changed
    /// whether a gone one is kept.
    pub fn in_force(&mut self, seen: Option<CiliumConfig>) -> (Option<CiliumConfig>, KeptChange) {
        let (config, kept) = match seen {
            Some(config) => {
                self.last = Some(config.clone());
                (Some(config), false)
            }
            None => (self.last.clone(), self.last.is_some()),
        };
        let change = match (self.kept, kept) {
            (false, true) => KeptChange::NowKept,
            (true, false) => KeptChange::Back,
            _ => KeptChange::Unchanged,
        };
        self.kept = kept;
        (config, change)
    }

    /// The config in force is the remembered copy of one that is gone.
    pub fn kept(&self) -> bool {
        self.kept
    }
}

/// The `--ipam` flag: which object is in force, or `Auto` to follow cilium-config.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IpamOverride {
    /// Follow the `ipam` key of cilium-config, live.
    #[default]
    Auto,
    /// Announce the Node's CIDRs whatever cilium-config says.
    Kubernetes,
    /// Announce the CiliumNode's CIDRs whatever cilium-config says.
    ClusterPool,
    /// Announce the CiliumNode's multi-pool allocations whatever cilium-config says.
    MultiPool,
}

impl FromStr for IpamOverride {
    type Err = IpamError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "kubernetes" => Ok(Self::Kubernetes),
            "cluster-pool" => Ok(Self::ClusterPool),
            "multi-pool" => Ok(Self::MultiPool),
            other => Err(IpamError::UnknownOverride {
                value: other.to_owned(),
            }),
        }
    }
}

impl fmt::Display for IpamOverride {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Kubernetes => "kubernetes",
            Self::ClusterPool => "cluster-pool",
            Self::MultiPool => "multi-pool",
        })
    }
}

/// The IPAM mode in force: Cilium's `ipam` option values that this speaker supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpamMode {
    /// `ipam: kubernetes`: the Node object is in force.
    Kubernetes,
    /// `ipam: cluster-pool` (and `cluster-pool-v2beta`): the CiliumNode's
    /// `spec.ipam.podCIDRs` is in force.
    ClusterPool,
    /// `ipam: multi-pool`: the CiliumNode's `spec.ipam.pools.allocated` is in force.
    MultiPool,
}

impl IpamMode {
    /// Every mode, for one-hot metric series.
    pub const ALL: [IpamMode; 3] = [Self::Kubernetes, Self::ClusterPool, Self::MultiPool];

    /// The name Cilium uses for the mode in cilium-config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kubernetes => "kubernetes",
            Self::ClusterPool => "cluster-pool",
            Self::MultiPool => "multi-pool",
        }
    }

    /// The kind of the object whose CIDRs are announced in this mode.
    pub fn object(self) -> &'static str {
        match self {
            Self::Kubernetes => "Node",
            Self::ClusterPool | Self::MultiPool => "CiliumNode",
        }
    }
}

impl fmt::Display for IpamMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the IPAM mode cannot be decided.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IpamError {
    /// cilium-config names a mode without routable per-node pod CIDRs (eni, azure,
    /// crd, alibabacloud, ...) or one this speaker does not know.
    #[error(
        "cilium-config ipam: {mode:?} is not supported: pod CIDRs can be announced only for \
         ipam \"kubernetes\", \"cluster-pool\", \"cluster-pool-v2beta\" or \"multi-pool\" \
         (or pass --ipam to override)"
    )]
    Unsupported { mode: String },
    /// The `--ipam` value is not one of the known ones.
    #[error("--ipam: {value:?} must be one of auto, kubernetes, cluster-pool, multi-pool")]
    UnknownOverride { value: String },
}

/// The pod CIDRs in force per node, decided by [`node_view`]. What the planner, the
/// metrics and `doctor` read: each fact is computed here once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    /// The IPAM mode that decided which object is announced.
    pub ipam: IpamMode,
    /// One entry per Node object, by name.
    pub nodes: BTreeMap<Arc<str>, NodeEntry>,
    /// Facts about the whole view worth showing to an operator.
    pub warnings: Vec<ViewWarning>,
    /// Every pair of in-force CIDRs of different nodes that overlap (see [`overlaps`]),
    /// announced or not, default routes left out (they are a finding of their own).
    pub overlaps: Vec<Overlap>,
}

impl NodeView {
    /// A view of `nodes`, with the overlaps between their in-force CIDRs worked out.
    /// [`node_view`] builds every view through here; tests and benches may too.
    pub fn new(
        ipam: IpamMode,
        nodes: BTreeMap<Arc<str>, NodeEntry>,
        warnings: Vec<ViewWarning>,
    ) -> NodeView {
        let overlaps = overlaps(nodes.values().flat_map(|n| {
            // Host bits cleared and each CIDR once, as the planner claims them.
            let mut own: Vec<IpNet> = n
                .in_force_cidrs()
                .iter()
                .filter(|p| p.prefix_len() > 0)
                .map(IpNet::trunc)
                .collect();
            own.sort_unstable();
            own.dedup();
            own.into_iter().map(move |p| (&n.name, p))
        }));
        NodeView {
            ipam,
            nodes,
            warnings,
            overlaps,
        }
    }

    /// Whether `node` announces `prefix` (host bits ignored).
    pub fn announces(&self, node: &str, prefix: IpNet) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|n| n.prefixes.iter().any(|p| p.trunc() == prefix))
    }

    /// The overlaps between announced prefixes only.
    pub fn announced_overlaps(&self) -> impl Iterator<Item = &Overlap> {
        self.overlaps.iter().filter(|o| {
            self.announces(&o.node, o.prefix) && self.announces(&o.other_node, o.other_prefix)
        })
    }

    /// Nodes whose Node and CiliumNode disagree (for a gauge).
    pub fn drift_count(&self) -> usize {
        self.nodes.values().filter(|n| n.drift.is_some()).count()
    }

    /// Prefixes refused across all nodes (for a gauge).
    pub fn refused_count(&self) -> usize {
        self.nodes.values().map(|n| n.refused.len()).sum()
    }
}

/// One node in the view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    /// The node name, shared so the planner can tag routes without allocating.
    pub name: Arc<str>,
    /// `metadata.uid` of the Node.
    pub uid: Option<String>,
    pub labels: Labels,
    pub internal_ipv4: Option<Ipv4Addr>,
    pub internal_ipv6: Option<Ipv6Addr>,
    /// The Node's pod CIDRs: its spec, or the Cilium annotations when the spec lists
    /// none (see `node_source`).
    pub node_cidrs: Vec<IpNet>,
    /// Where `node_cidrs` come from; `None` when the Node lists none.
    pub node_source: Option<CidrSource>,
    /// The CiliumNode's `spec.ipam.podCIDRs`; `None` when there is no CiliumNode.
    pub cilium_cidrs: Option<Vec<IpNet>>,
    /// Which object the prefixes were read from (the one in force); `None` when no
    /// object lists any.
    pub source: Option<CidrSource>,
    /// The pod CIDRs in force and not refused, in the object's order, without
    /// duplicates: what is announced when the bgp-config announces pod CIDRs.
    pub prefixes: Vec<IpNet>,
    /// CIDRs the object in force lists but that must not be announced.
    pub refused: Vec<(IpNet, CidrRefusal)>,
    /// Set when the Node and the CiliumNode list different CIDRs. Boxed: few nodes
    /// drift, and inline it took a fifth of every entry (2 MB at 50,000 nodes).
    pub drift: Option<Box<Drift>>,
    /// Multi-pool IPAM: the pools the node holds CIDRs of, as the CiliumNode lists them
    /// (refused CIDRs included); empty in other modes.
    pub pools: Vec<PoolAllocation>,
}

impl NodeEntry {
    /// The pool `prefix` was allocated from (multi-pool IPAM), `None` in other modes.
    pub fn pool_of(&self, prefix: &IpNet) -> Option<&str> {
        self.pools
            .iter()
            .find(|p| p.cidrs.contains(prefix))
            .map(|p| p.pool.as_str())
    }
}

impl NodeEntry {
    /// An entry for `name` with no facts: what a Node that lists nothing gives.
    pub fn new(name: Arc<str>) -> NodeEntry {
        NodeEntry {
            name,
            uid: None,
            labels: Labels::default(),
            internal_ipv4: None,
            internal_ipv6: None,
            node_cidrs: Vec::new(),
            node_source: None,
            cilium_cidrs: None,
            source: None,
            prefixes: Vec::new(),
            refused: Vec::new(),
            drift: None,
            pools: Vec::new(),
        }
    }

    /// The CIDRs the object in force lists, as listed (what Cilium uses for the node's
    /// pods, announced or refused); in multi-pool mode, every pool's in turn.
    pub fn in_force_cidrs(&self) -> Vec<IpNet> {
        match self.source {
            Some(CidrSource::NodeSpec | CidrSource::NodeAnnotations) => self.node_cidrs.clone(),
            Some(CidrSource::CiliumNode) => self.cilium_cidrs.clone().unwrap_or_default(),
            Some(CidrSource::CiliumNodePools) => self
                .pools
                .iter()
                .flat_map(|p| p.cidrs.iter().copied())
                .collect(),
            None => Vec::new(),
        }
    }
}

/// Two nodes whose pod CIDRs overlap (equal, or one inside the other); `prefix` is the
/// shorter (or, when equal, the one of the node whose name sorts first).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Overlap {
    pub node: Arc<str>,
    pub prefix: IpNet,
    pub other_node: Arc<str>,
    pub other_prefix: IpNet,
}

/// Every pair of CIDRs of different nodes that overlap, each pair once, sorted.
///
/// CIDR prefixes are either nested or disjoint, and sorted by (network, length) a prefix
/// comes after everything that contains it: one sweep with a stack of the prefixes
/// containing the current one finds each pair once, O(n log n) plus the pairs found, so
/// a 50,000-node view is instant.
pub fn overlaps<'a>(cidrs: impl IntoIterator<Item = (&'a Arc<str>, IpNet)>) -> Vec<Overlap> {
    let mut items: Vec<(IpNet, &'a Arc<str>)> = cidrs.into_iter().map(|(n, p)| (p, n)).collect();
    // IPv4 before IPv6, then by network address, then shortest prefix first.
    items.sort_by(|(a, an), (b, bn)| {
        (a.network(), a.prefix_len(), an).cmp(&(b.network(), b.prefix_len(), bn))
    });
    let mut found = Vec::new();
    let mut stack: Vec<(IpNet, &Arc<str>)> = Vec::new();
    for (net, node) in items {
        while stack.last().is_some_and(|(open, _)| !open.contains(&net)) {
            stack.pop();
        }
        for (open, open_node) in &stack {
            if *open_node != node {
                found.push(Overlap {
                    node: Arc::clone(open_node),
                    prefix: *open,
                    other_node: Arc::clone(node),
                    other_prefix: net,
                });
            }
        }
        stack.push((net, node));
    }
    found.sort();
    found
}

/// The object (and field) a node's prefixes were read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CidrSource {
    /// Node `spec.podCIDR` / `spec.podCIDRs`.
    NodeSpec,
    /// Node annotations `io.cilium.network.ipv4-pod-cidr` / `ipv6-pod-cidr`.
    NodeAnnotations,
    /// CiliumNode `spec.ipam.podCIDRs`.
    CiliumNode,
    /// CiliumNode `spec.ipam.pools.allocated[].cidrs` (multi-pool IPAM).
    CiliumNodePools,
}

impl fmt::Display for CidrSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NodeSpec => "Node spec.podCIDRs",
            Self::NodeAnnotations => "Node annotations io.cilium.network.ipv*-pod-cidr",
            Self::CiliumNode => "CiliumNode spec.ipam.podCIDRs",
            Self::CiliumNodePools => "CiliumNode spec.ipam.pools.allocated",
        })
    }
}

/// Why a CIDR listed by the object in force is not announced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CidrRefusal {
    /// 0.0.0.0/0 or ::/0: announcing it would attract all traffic to one node.
    DefaultRoute,
    /// In cluster-pool mode, the CIDR lies outside `cluster-pool-ipv4-cidr` /
    /// `cluster-pool-ipv6-cidr` (the pool is given for reporting).
    OutsideClusterPool { pool: Vec<IpNet> },
    /// In multi-pool mode, the CIDR lies outside the ranges of the CiliumPodIPPool it was
    /// allocated from (`ranges`: the pool's ranges of the CIDR's family).
    OutsidePool { pool: String, ranges: Vec<IpNet> },
}

impl fmt::Display for CidrRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DefaultRoute => f.write_str("a default route is never announced"),
            Self::OutsideClusterPool { pool } => {
                write!(f, "outside the cluster pool {}", CidrList(pool))
            }
            Self::OutsidePool { pool, ranges } => {
                write!(f, "outside its pool {pool:?} {}", CidrList(ranges))
            }
        }
    }
}

/// The Node and the CiliumNode of one node list different CIDRs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift {
    /// Node `spec.podCIDRs` (or its annotations when the spec has none).
    pub node_cidrs: Vec<IpNet>,
    /// CiliumNode `spec.ipam.podCIDRs`.
    pub cilium_cidrs: Vec<IpNet>,
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Node {} vs CiliumNode {}",
            CidrList(&self.node_cidrs),
            CidrList(&self.cilium_cidrs)
        )
    }
}

/// View-wide facts an operator should see (`plan`, `status`, logs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ViewWarning {
    /// Auto mode found no cilium-config: Cilium's default, cluster-pool, was assumed.
    CiliumConfigAbsent,
    /// Cluster-pool mode without a pool of this family in cilium-config: CIDRs of that
    /// family were announced unchecked.
    ClusterPoolUnknown { family: Family },
    /// Multi-pool mode: the ranges of the pool are unknown (`pool: None`: no
    /// CiliumPodIPPool could be read at all; `Some`: that pool does not exist), so the
    /// CIDRs allocated from it were announced unchecked.
    PoolRangesUnknown { pool: Option<String> },
}

impl fmt::Display for ViewWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CiliumConfigAbsent => f.write_str(
                "cilium-config not found: assuming ipam cluster-pool (Cilium's default)",
            ),
            Self::ClusterPoolUnknown { family } => write!(
                f,
                "cilium-config has no cluster-pool-{family}-cidr: {family} pod CIDRs are not \
                 checked against the cluster pool"
            ),
            Self::PoolRangesUnknown { pool: None } => f.write_str(
                "CiliumPodIPPools cannot be read: multi-pool CIDRs are not checked against \
                 their pools",
            ),
            Self::PoolRangesUnknown { pool: Some(pool) } => write!(
                f,
                "CiliumPodIPPool {pool:?} not found: the CIDRs allocated from it are not \
                 checked against its ranges"
            ),
        }
    }
}

/// An address family, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ipv4 => "ipv4",
            Self::Ipv6 => "ipv6",
        })
    }
}

/// Formats CIDRs as `[10.0.0.0/24, fd00::/64]` for messages.
pub struct CidrList<'a>(pub &'a [IpNet]);

impl fmt::Display for CidrList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, net) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{net}")?;
        }
        f.write_str("]")
    }
}

/// Decides the IPAM mode and, for every Node, the prefixes to announce.
///
/// Pure and deterministic: equal states give equal views, so a caller can skip work
/// when the view did not change.
pub fn node_view(state: &ClusterState, ipam: IpamOverride) -> Result<NodeView, IpamError> {
    let mut warnings = Vec::new();
    let mode = match ipam {
        IpamOverride::Kubernetes => IpamMode::Kubernetes,
        IpamOverride::ClusterPool => IpamMode::ClusterPool,
        IpamOverride::MultiPool => IpamMode::MultiPool,
        IpamOverride::Auto => match &state.cilium_config {
            None => {
                warnings.push(ViewWarning::CiliumConfigAbsent);
                IpamMode::ClusterPool
            }
            Some(config) => mode_from_config(config.ipam.as_deref())?,
        },
    };
    let (pool_v4, pool_v6) = match &state.cilium_config {
        Some(c) => (c.cluster_pool_v4.as_slice(), c.cluster_pool_v6.as_slice()),
        None => (&[][..], &[][..]),
    };

    // In name order (the state's), collected into the map at the end: a map built from
    // sorted entries has full leaves, where one insert at a time leaves them about half
    // empty, and an entry is a few hundred octets (50,000 nodes: 10 MB less).
    let mut nodes = Vec::with_capacity(state.nodes.len());
    let mut unchecked_v4 = false;
    let mut unchecked_v6 = false;
    let mut pools_unreadable = false;
    let mut pools_missing = BTreeSet::new();
    for (name, facts) in &state.nodes {
        let cilium = state.cilium_nodes.get(name);
        let (node_side, node_source) = if !facts.node_cidrs.is_empty() {
            (facts.node_cidrs.as_slice(), Some(CidrSource::NodeSpec))
        } else if !facts.annotation_cidrs.is_empty() {
            (
                facts.annotation_cidrs.as_slice(),
                Some(CidrSource::NodeAnnotations),
            )
        } else {
            (&[][..], None)
        };
        let cilium_side = cilium.map(Vec::as_slice).unwrap_or_default();
        let drift = (!node_side.is_empty()
            && !cilium_side.is_empty()
            && as_set(node_side) != as_set(cilium_side))
        .then(|| {
            Box::new(Drift {
                node_cidrs: node_side.to_vec(),
                cilium_cidrs: cilium_side.to_vec(),
            })
        });

        let allocations = match mode {
            IpamMode::MultiPool => state
                .cilium_node_pools
                .get(name)
                .map(Vec::as_slice)
                .unwrap_or_default(),
            _ => &[],
        };
        let (listed, source) = match mode {
            IpamMode::Kubernetes => (node_side, node_source),
            IpamMode::ClusterPool => (
                cilium_side,
                (!cilium_side.is_empty()).then_some(CidrSource::CiliumNode),
            ),
            IpamMode::MultiPool => (
                &[][..],
                allocations
                    .iter()
                    .any(|a| !a.cidrs.is_empty())
                    .then_some(CidrSource::CiliumNodePools),
            ),
        };
        // The Node's spec is not in force in multi-pool mode, and its CiliumNode keeps
        // its CIDRs elsewhere: nothing the two should agree on.
        let drift = drift.filter(|_| mode != IpamMode::MultiPool);
        // At most every CIDR listed: sized once (a push-grown Vec takes room for four).
        let most = listed.len() + allocations.iter().map(|a| a.cidrs.len()).sum::<usize>();
        let listed = listed.iter().map(|net| (*net, None)).chain(
            allocations
                .iter()
                .flat_map(|a| a.cidrs.iter().map(move |net| (*net, Some(a.pool.as_str())))),
        );
        let mut prefixes = Vec::with_capacity(most);
        let mut refused = Vec::new();
        let mut seen = BTreeSet::new();
        for (net, pool) in listed {
            if !seen.insert(net) {
                continue;
            }
            if net.prefix_len() == 0 {
                refused.push((net, CidrRefusal::DefaultRoute));
                continue;
            }
            if mode == IpamMode::ClusterPool {
                let (pool, unchecked) = match net {
                    IpNet::V4(_) => (pool_v4, &mut unchecked_v4),
                    IpNet::V6(_) => (pool_v6, &mut unchecked_v6),
                };
                if pool.is_empty() {
                    *unchecked = true;
                } else if !pool.iter().any(|p| p.contains(&net)) {
                    refused.push((
                        net,
                        CidrRefusal::OutsideClusterPool {
                            pool: pool.to_vec(),
                        },
                    ));
                    continue;
                }
            }
            if let Some(pool) = pool {
                match state.pod_ip_pools.as_ref().map(|p| p.get(pool)) {
                    None => pools_unreadable = true,
                    Some(None) => {
                        pools_missing.insert(pool);
                    }
                    Some(Some(ranges)) => {
                        let ranges = ranges.of_family(&net);
                        if !ranges.iter().any(|r| r.contains(&net)) {
                            refused.push((
                                net,
                                CidrRefusal::OutsidePool {
                                    pool: pool.to_owned(),
                                    ranges: ranges.to_vec(),
                                },
                            ));
                            continue;
                        }
                    }
                }
            }
            prefixes.push(net);
        }

        let name: Arc<str> = Arc::from(name.as_str());
        nodes.push((
            Arc::clone(&name),
            NodeEntry {
                name,
                uid: facts.uid.clone(),
                labels: facts.labels.clone(),
                internal_ipv4: facts.internal_ipv4,
                internal_ipv6: facts.internal_ipv6,
                node_cidrs: node_side.to_vec(),
                node_source,
                cilium_cidrs: cilium.cloned(),
                source,
                prefixes,
                refused,
                drift,
                pools: allocations.to_vec(),
            },
        ));
    }
    let nodes: BTreeMap<Arc<str>, NodeEntry> = nodes.into_iter().collect();
    if unchecked_v4 {
        warnings.push(ViewWarning::ClusterPoolUnknown {
            family: Family::Ipv4,
        });
    }
    if unchecked_v6 {
        warnings.push(ViewWarning::ClusterPoolUnknown {
            family: Family::Ipv6,
        });
    }
    if pools_unreadable {
        warnings.push(ViewWarning::PoolRangesUnknown { pool: None });
    }
    warnings.extend(
        pools_missing
            .into_iter()
            .map(|pool| ViewWarning::PoolRangesUnknown {
                pool: Some(pool.to_owned()),
            }),
    );
    Ok(NodeView::new(mode, nodes, warnings))
}

/// Cilium's `ipam` option: an absent or empty key means its default, cluster-pool.
fn mode_from_config(ipam: Option<&str>) -> Result<IpamMode, IpamError> {
    match ipam.map(str::trim) {
        // cluster-pool-v2beta (Cilium 1.12-1.14) keeps its CIDRs and pools where
        // cluster-pool does.
        None | Some("") | Some("cluster-pool") | Some("cluster-pool-v2beta") => {
            Ok(IpamMode::ClusterPool)
        }
        Some("kubernetes") => Ok(IpamMode::Kubernetes),
        Some("multi-pool") => Ok(IpamMode::MultiPool),
        Some(other) => Err(IpamError::Unsupported {
            mode: other.to_owned(),
        }),
    }
}

fn as_set(nets: &[IpNet]) -> BTreeSet<IpNet> {
    nets.iter().copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| net(s)).collect()
    }

    fn node(cidrs: &[&str]) -> NodeFacts {
        NodeFacts {
            node_cidrs: nets(cidrs),
            ..NodeFacts::default()
        }
    }

    fn config(ipam: &str, pool_v4: &[&str]) -> CiliumConfig {
        CiliumConfig {
            ipam: Some(ipam.to_owned()),
            announce_pod_cidr: None,
            announce_lb_ip: None,
            cluster_pool_v4: nets(pool_v4),
            cluster_pool_v6: Vec::new(),
        }
    }

    /// The outage: four nodes whose Node and CiliumNode CIDRs are a permutation of each
    /// other.
    fn outage_state(ipam: &str) -> ClusterState {
        let pairs = [
            ("master1", "10.5.112.0/24", "10.5.113.0/24"),
            ("master2", "10.5.113.0/24", "10.5.114.0/24"),
            ("master3", "10.5.114.0/24", "10.5.115.0/24"),
            ("worker1", "10.5.115.0/24", "10.5.112.0/24"),
        ];
        let mut state = ClusterState {
            cilium_config: Some(config(ipam, &["10.5.112.0/20"])),
            ..ClusterState::default()
        };
        for (name, node_cidr, cilium_cidr) in pairs {
            state.nodes.insert(name.into(), node(&[node_cidr]));
            state.cilium_nodes.insert(name.into(), nets(&[cilium_cidr]));
        }
        state
    }

    fn prefixes(view: &NodeView, name: &str) -> Vec<IpNet> {
        view.nodes[name].prefixes.clone()
    }

    #[test]
    fn keep_only_node_drops_every_other_nodes_facts_and_keeps_the_cluster_wide_ones() {
        let mut state = outage_state("multi-pool");
        state.cilium_node_pools.insert(
            "master2".into(),
            vec![PoolAllocation {
                pool: "default".into(),
                cidrs: nets(&["10.6.0.0/24"]),
            }],
        );
        state.pod_ip_pools = Some(BTreeMap::new());
        let mut kept = state.clone();
        kept.keep_only_node("master2");
        assert_eq!(kept.nodes.keys().collect::<Vec<_>>(), ["master2"]);
        assert_eq!(kept.nodes["master2"], state.nodes["master2"]);
        assert_eq!(kept.cilium_nodes.keys().collect::<Vec<_>>(), ["master2"]);
        assert_eq!(kept.cilium_node_pools, state.cilium_node_pools);
        assert_eq!(kept.cilium_config, state.cilium_config);
        assert_eq!(kept.pod_ip_pools, state.pod_ip_pools);

        // A node the state does not hold: no node's facts.
        state.keep_only_node("gone");
        assert!(state.nodes.is_empty() && state.cilium_nodes.is_empty());
        assert!(state.cilium_node_pools.is_empty());
        assert!(state.cilium_config.is_some());
    }

    #[test]
    fn outage_cluster_pool_announces_cilium_node_cidrs_and_reports_drift_on_all_four() {
        let view = node_view(&outage_state("cluster-pool"), IpamOverride::Auto).unwrap();
        assert_eq!(view.ipam, IpamMode::ClusterPool);
        assert_eq!(prefixes(&view, "master1"), nets(&["10.5.113.0/24"]));
        assert_eq!(prefixes(&view, "master2"), nets(&["10.5.114.0/24"]));
        assert_eq!(prefixes(&view, "master3"), nets(&["10.5.115.0/24"]));
        assert_eq!(prefixes(&view, "worker1"), nets(&["10.5.112.0/24"]));
        assert_eq!(view.drift_count(), 4);
        assert_eq!(
            view.nodes["master1"].drift.as_deref(),
            Some(&Drift {
                node_cidrs: nets(&["10.5.112.0/24"]),
                cilium_cidrs: nets(&["10.5.113.0/24"]),
            })
        );
        assert!(view
            .nodes
            .values()
            .all(|n| n.source == Some(CidrSource::CiliumNode)));
        assert!(view.warnings.is_empty());
    }

    #[test]
    fn outage_kubernetes_announces_node_cidrs_and_reports_drift_on_all_four() {
        let view = node_view(&outage_state("kubernetes"), IpamOverride::Auto).unwrap();
        assert_eq!(view.ipam, IpamMode::Kubernetes);
        assert_eq!(prefixes(&view, "master1"), nets(&["10.5.112.0/24"]));
        assert_eq!(prefixes(&view, "master2"), nets(&["10.5.113.0/24"]));
        assert_eq!(prefixes(&view, "master3"), nets(&["10.5.114.0/24"]));
        assert_eq!(prefixes(&view, "worker1"), nets(&["10.5.115.0/24"]));
        assert_eq!(view.drift_count(), 4);
        assert_eq!(
            view.nodes["worker1"].drift.as_deref(),
            Some(&Drift {
                node_cidrs: nets(&["10.5.115.0/24"]),
                cilium_cidrs: nets(&["10.5.112.0/24"]),
            })
        );
    }

    #[test]
    fn override_wins_over_cilium_config() {
        let state = outage_state("cluster-pool");
        let view = node_view(&state, IpamOverride::Kubernetes).unwrap();
        assert_eq!(view.ipam, IpamMode::Kubernetes);
        assert_eq!(prefixes(&view, "master1"), nets(&["10.5.112.0/24"]));
        let state = outage_state("kubernetes");
        let view = node_view(&state, IpamOverride::ClusterPool).unwrap();
        assert_eq!(view.ipam, IpamMode::ClusterPool);
        assert_eq!(prefixes(&view, "master1"), nets(&["10.5.113.0/24"]));
    }

    #[test]
    fn unsupported_mode_is_refused_naming_it() {
        let err = node_view(&outage_state("eni"), IpamOverride::Auto).unwrap_err();
        assert_eq!(err, IpamError::Unsupported { mode: "eni".into() });
        assert!(err.to_string().contains("\"eni\""), "{err}");
        // An explicit override does not read cilium-config's mode at all.
        assert!(node_view(&outage_state("eni"), IpamOverride::Kubernetes).is_ok());
    }

    #[test]
    fn absent_cilium_config_defaults_to_cluster_pool_with_a_warning() {
        let mut state = outage_state("kubernetes");
        state.cilium_config = None;
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        assert_eq!(view.ipam, IpamMode::ClusterPool);
        assert_eq!(prefixes(&view, "master1"), nets(&["10.5.113.0/24"]));
        assert_eq!(
            view.warnings,
            vec![
                ViewWarning::CiliumConfigAbsent,
                ViewWarning::ClusterPoolUnknown {
                    family: Family::Ipv4
                }
            ]
        );
    }

    #[test]
    fn absent_or_empty_ipam_key_is_cluster_pool_without_warning() {
        for ipam in [None, Some(String::new())] {
            let mut state = outage_state("kubernetes");
            if let Some(c) = state.cilium_config.as_mut() {
                c.ipam = ipam.clone();
            }
            let view = node_view(&state, IpamOverride::Auto).unwrap();
            assert_eq!(view.ipam, IpamMode::ClusterPool, "ipam {ipam:?}");
            assert!(
                view.warnings.is_empty(),
                "ipam {ipam:?}: {:?}",
                view.warnings
            );
        }
    }

    #[test]
    fn cilium_bgp_keys_do_not_change_the_view() {
        // Issue 29: `bgp-announce-pod-cidr: "false"` is how a user stops Cilium's own
        // speaker; it used to empty this view too, and so switched this speaker off.
        let plain = node_view(&outage_state("cluster-pool"), IpamOverride::Auto).unwrap();
        for (pod, lb) in [(Some(false), Some(false)), (Some(true), Some(true))] {
            let mut state = outage_state("cluster-pool");
            if let Some(c) = state.cilium_config.as_mut() {
                c.announce_pod_cidr = pod;
                c.announce_lb_ip = lb;
            }
            let view = node_view(&state, IpamOverride::Auto).unwrap();
            assert_eq!(view, plain, "{pod:?} {lb:?}");
        }
        assert!(plain.nodes.values().all(|n| !n.prefixes.is_empty()));
    }

    #[test]
    fn cluster_pool_refuses_cidrs_outside_the_pool_per_family() {
        let mut state = ClusterState {
            cilium_config: Some(CiliumConfig {
                ipam: Some("cluster-pool".into()),
                announce_pod_cidr: None,
                announce_lb_ip: None,
                cluster_pool_v4: nets(&["10.0.0.0/16", "10.1.0.0/16"]),
                cluster_pool_v6: nets(&["fd00:10::/104"]),
            }),
            ..ClusterState::default()
        };
        state.nodes.insert("a".into(), NodeFacts::default());
        state.cilium_nodes.insert(
            "a".into(),
            nets(&[
                "10.1.7.0/24",
                "10.2.0.0/24",
                "fd00:10::1:0/120",
                "fd00:99::/120",
                "10.0.0.0/8",
            ]),
        );
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        let a = &view.nodes["a"];
        assert_eq!(a.prefixes, nets(&["10.1.7.0/24", "fd00:10::1:0/120"]));
        let pool4 = CidrRefusal::OutsideClusterPool {
            pool: nets(&["10.0.0.0/16", "10.1.0.0/16"]),
        };
        let pool6 = CidrRefusal::OutsideClusterPool {
            pool: nets(&["fd00:10::/104"]),
        };
        assert_eq!(
            a.refused,
            vec![
                (net("10.2.0.0/24"), pool4.clone()),
                (net("fd00:99::/120"), pool6),
                // A supernet of a pool member is not inside the pool.
                (net("10.0.0.0/8"), pool4),
            ]
        );
        assert_eq!(view.refused_count(), 3);
        assert!(view.warnings.is_empty());
    }

    #[test]
    fn pool_is_not_checked_in_kubernetes_mode() {
        let mut state = ClusterState {
            cilium_config: Some(config("kubernetes", &["10.0.0.0/16"])),
            ..ClusterState::default()
        };
        state.nodes.insert("a".into(), node(&["192.168.3.0/24"]));
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        assert_eq!(prefixes(&view, "a"), nets(&["192.168.3.0/24"]));
        assert!(view.nodes["a"].refused.is_empty());
    }

    #[test]
    fn default_routes_are_never_announced_in_either_mode() {
        let mut state = ClusterState {
            cilium_config: Some(config("kubernetes", &[])),
            ..ClusterState::default()
        };
        state
            .nodes
            .insert("a".into(), node(&["0.0.0.0/0", "::/0", "10.9.0.0/24"]));
        state
            .cilium_nodes
            .insert("a".into(), nets(&["0.0.0.0/0", "::/0"]));
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        assert_eq!(prefixes(&view, "a"), nets(&["10.9.0.0/24"]));
        assert_eq!(
            view.nodes["a"].refused,
            vec![
                (net("0.0.0.0/0"), CidrRefusal::DefaultRoute),
                (net("::/0"), CidrRefusal::DefaultRoute)
            ]
        );
        let view = node_view(&state, IpamOverride::ClusterPool).unwrap();
        assert!(prefixes(&view, "a").is_empty());
        assert_eq!(view.nodes["a"].refused.len(), 2);
    }

    #[test]
    fn annotations_are_used_only_when_the_node_spec_has_no_cidrs() {
        let mut state = ClusterState {
            cilium_config: Some(config("kubernetes", &[])),
            ..ClusterState::default()
        };
        state.nodes.insert(
            "annotated".into(),
            NodeFacts {
                annotation_cidrs: nets(&["10.20.0.0/24", "fd00:20::/64"]),
                ..NodeFacts::default()
            },
        );
        state.nodes.insert(
            "both".into(),
            NodeFacts {
                node_cidrs: nets(&["10.30.0.0/24"]),
                annotation_cidrs: nets(&["10.20.1.0/24"]),
                ..NodeFacts::default()
            },
        );
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        assert_eq!(
            prefixes(&view, "annotated"),
            nets(&["10.20.0.0/24", "fd00:20::/64"])
        );
        assert_eq!(
            view.nodes["annotated"].source,
            Some(CidrSource::NodeAnnotations)
        );
        assert_eq!(prefixes(&view, "both"), nets(&["10.30.0.0/24"]));
        assert_eq!(view.nodes["both"].source, Some(CidrSource::NodeSpec));
    }

    #[test]
    fn node_without_its_ipam_object_is_present_with_no_prefixes() {
        let mut state = ClusterState {
            cilium_config: Some(config("cluster-pool", &["10.0.0.0/8"])),
            ..ClusterState::default()
        };
        state.nodes.insert("a".into(), node(&["10.0.1.0/24"]));
        // A CiliumNode whose Node does not exist is not a node of the view.
        state
            .cilium_nodes
            .insert("ghost".into(), nets(&["10.0.2.0/24"]));
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        assert_eq!(view.nodes.keys().map(|k| &**k).collect::<Vec<_>>(), ["a"]);
        assert!(view.nodes["a"].prefixes.is_empty());
        assert_eq!(view.nodes["a"].source, None);
        // One side empty is not drift: that is how cluster-pool clusters look.
        assert_eq!(view.nodes["a"].drift, None);
    }

    #[test]
    fn same_cidrs_in_another_order_are_not_drift_and_duplicates_collapse() {
        let mut state = ClusterState {
            cilium_config: Some(config("kubernetes", &[])),
            ..ClusterState::default()
        };
        state.nodes.insert(
            "a".into(),
            node(&["10.0.1.0/24", "fd00::/64", "10.0.1.0/24"]),
        );
        state
            .cilium_nodes
            .insert("a".into(), nets(&["fd00::/64", "10.0.1.0/24"]));
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        assert_eq!(view.nodes["a"].drift, None);
        assert_eq!(prefixes(&view, "a"), nets(&["10.0.1.0/24", "fd00::/64"]));
    }

    #[test]
    fn equal_states_give_equal_views_and_a_change_changes_the_view() {
        let a = node_view(&outage_state("cluster-pool"), IpamOverride::Auto).unwrap();
        let b = node_view(&outage_state("cluster-pool"), IpamOverride::Auto).unwrap();
        assert_eq!(a, b);
        let mut changed = outage_state("cluster-pool");
        changed
            .cilium_nodes
            .insert("master1".into(), nets(&["10.5.116.0/24"]));
        let c = node_view(&changed, IpamOverride::Auto).unwrap();
        assert_ne!(a, c);
    }

    #[test]
    fn override_parses_and_prints_its_flag_values() {
        for (text, value) in [
            ("auto", IpamOverride::Auto),
            ("kubernetes", IpamOverride::Kubernetes),
            ("cluster-pool", IpamOverride::ClusterPool),
            ("multi-pool", IpamOverride::MultiPool),
        ] {
            assert_eq!(text.parse::<IpamOverride>().unwrap(), value);
            assert_eq!(value.to_string(), text);
        }
        assert_eq!(
            "crd".parse::<IpamOverride>().unwrap_err(),
            IpamError::UnknownOverride {
                value: "crd".into()
            }
        );
    }

    #[test]
    fn a_deleted_cilium_config_stays_in_force() {
        let mut memory = CiliumConfigMemory::default();
        assert_eq!(
            memory.in_force(None),
            (None, KeptChange::Unchanged),
            "never seen: nothing to keep"
        );
        let kubernetes = config("kubernetes", &[]);
        assert_eq!(
            memory.in_force(Some(kubernetes.clone())),
            (Some(kubernetes.clone()), KeptChange::Unchanged)
        );
        // Deleted: the mode stays kubernetes, so the Node CIDRs stay announced; said once.
        let (kept, change) = memory.in_force(None);
        assert_eq!(change, KeptChange::NowKept);
        assert!(memory.kept());
        assert_eq!(kept, Some(kubernetes.clone()));
        assert_eq!(memory.in_force(None).1, KeptChange::Unchanged);
        let mut state = outage_state("kubernetes");
        state.cilium_config = kept;
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        assert_eq!(view.ipam, IpamMode::Kubernetes);
        assert_eq!(prefixes(&view, "master1"), nets(&["10.5.112.0/24"]));
        // Back with another mode: that one is in force.
        let pool = config("cluster-pool", &["10.5.112.0/20"]);
        assert_eq!(
            memory.in_force(Some(pool.clone())),
            (Some(pool), KeptChange::Back)
        );
        assert!(!memory.kept());
    }

    fn name(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    #[test]
    fn overlaps_finds_equal_and_nested_prefixes_of_different_nodes_only() {
        let (a, b, c) = (name("a"), name("b"), name("c"));
        let found = overlaps([
            (&a, net("10.0.0.0/16")),
            (&b, net("10.0.5.0/24")),
            (&c, net("10.0.5.0/24")),
            (&a, net("10.0.7.0/24")),
            (&c, net("10.1.0.0/24")),
            (&b, net("fd00::/64")),
            (&c, net("fd00::/48")),
        ]);
        assert_eq!(
            found,
            vec![
                Overlap {
                    node: a.clone(),
                    prefix: net("10.0.0.0/16"),
                    other_node: b.clone(),
                    other_prefix: net("10.0.5.0/24"),
                },
                Overlap {
                    node: a.clone(),
                    prefix: net("10.0.0.0/16"),
                    other_node: c.clone(),
                    other_prefix: net("10.0.5.0/24"),
                },
                Overlap {
                    node: b.clone(),
                    prefix: net("10.0.5.0/24"),
                    other_node: c.clone(),
                    other_prefix: net("10.0.5.0/24"),
                },
                Overlap {
                    node: c.clone(),
                    prefix: net("fd00::/48"),
                    other_node: b.clone(),
                    other_prefix: net("fd00::/64"),
                },
            ]
        );
    }

    #[test]
    fn overlaps_of_disjoint_and_same_node_prefixes_are_none() {
        let (a, b) = (name("a"), name("b"));
        assert!(overlaps([
            (&a, net("10.0.0.0/24")),
            (&a, net("10.0.0.0/25")),
            (&b, net("10.0.1.0/24")),
            (&b, net("10.0.2.0/23")),
        ])
        .is_empty());
    }

    #[test]
    fn overlaps_match_a_brute_force_check() {
        // A deterministic pseudo-random set of prefixes over a small space, so that
        // nesting and equality are frequent.
        let names: Vec<Arc<str>> = (0..6).map(|i| name(&format!("n{i}"))).collect();
        let mut seed: u32 = 0x1234_5678;
        let mut items = Vec::new();
        for _ in 0..200 {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let len = 20 + (seed >> 28) as u8 % 9;
            let addr = std::net::Ipv4Addr::from(0x0a00_0000 | ((seed >> 4) & 0x000f_ff00));
            let prefix = IpNet::new(addr.into(), len).unwrap().trunc();
            items.push((&names[(seed % 6) as usize], prefix));
        }
        let fast = overlaps(items.iter().map(|(n, p)| (*n, *p)));
        let mut slow = Vec::new();
        for (i, (an, a)) in items.iter().enumerate() {
            for (bn, b) in &items[i + 1..] {
                if an != bn && (a.contains(b) || b.contains(a)) {
                    slow.push((a.min(b).to_owned(), a.max(b).to_owned()));
                }
            }
        }
        let mut fast_pairs: Vec<_> = fast
            .iter()
            .map(|o| (o.prefix.min(o.other_prefix), o.prefix.max(o.other_prefix)))
            .collect();
        fast_pairs.sort();
        slow.sort();
        assert!(!slow.is_empty());
        assert_eq!(fast_pairs, slow);
    }

    fn multi_pool_state(allocated: &[(&str, &[&str])]) -> ClusterState {
        let mut state = ClusterState {
            cilium_config: Some(config("multi-pool", &["10.5.0.0/16"])),
            ..ClusterState::default()
        };
        state.nodes.insert("a".into(), node(&["10.244.0.0/24"]));
        state.insert_cilium_node(
            "a".into(),
            CiliumNodeFacts {
                pod_cidrs: nets(&["10.5.1.0/24"]),
                pools: allocated
                    .iter()
                    .map(|(pool, cidrs)| PoolAllocation {
                        pool: (*pool).into(),
                        cidrs: nets(cidrs),
                    })
                    .collect(),
            },
        );
        let mut pools = BTreeMap::new();
        pools.insert(
            "default".to_owned(),
            PoolRanges {
                ipv4: nets(&["10.10.0.0/16"]),
                ipv6: nets(&["fd00:10::/104"]),
            },
        );
        pools.insert(
            "blue".to_owned(),
            PoolRanges {
                ipv4: nets(&["10.20.0.0/16"]),
                ipv6: Vec::new(),
            },
        );
        state.pod_ip_pools = Some(pools);
        state
    }

    #[test]
    fn multi_pool_announces_every_allocated_cidr_grouped_by_pool() {
        let state = multi_pool_state(&[
            ("default", &["10.10.0.0/27", "fd00:10::/120"]),
            ("blue", &["10.20.0.0/27", "10.20.0.32/27"]),
        ]);
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        assert_eq!(view.ipam, IpamMode::MultiPool);
        let a = &view.nodes["a"];
        assert_eq!(
            a.prefixes,
            nets(&[
                "10.10.0.0/27",
                "fd00:10::/120",
                "10.20.0.0/27",
                "10.20.0.32/27"
            ])
        );
        assert_eq!(a.source, Some(CidrSource::CiliumNodePools));
        assert_eq!(a.pools.len(), 2);
        assert_eq!(a.pool_of(&net("10.20.0.32/27")), Some("blue"));
        assert_eq!(a.pool_of(&net("fd00:10::/120")), Some("default"));
        assert_eq!(a.pool_of(&net("10.5.1.0/24")), None);
        // Neither the Node's spec nor the CiliumNode's podCIDRs are in force, and their
        // difference is not drift.
        assert_eq!(a.drift, None);
        assert!(view.warnings.is_empty());
        // The same state read as another mode ignores the pools.
        let view = node_view(&state, IpamOverride::ClusterPool).unwrap();
        assert_eq!(view.nodes["a"].prefixes, nets(&["10.5.1.0/24"]));
        assert!(view.nodes["a"].pools.is_empty());
        assert!(view.nodes["a"].drift.is_some());
    }

    #[test]
    fn multi_pool_refuses_cidrs_outside_their_own_pool_per_family() {
        let state = multi_pool_state(&[
            // In default's range but allocated from blue: outside blue.
            ("blue", &["10.10.5.0/27", "fd00:10::/120", "10.20.1.0/27"]),
            ("default", &["10.10.0.0/27", "0.0.0.0/0"]),
        ]);
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        let a = &view.nodes["a"];
        assert_eq!(a.prefixes, nets(&["10.20.1.0/27", "10.10.0.0/27"]));
        assert_eq!(
            a.refused,
            vec![
                (
                    net("10.10.5.0/27"),
                    CidrRefusal::OutsidePool {
                        pool: "blue".into(),
                        ranges: nets(&["10.20.0.0/16"])
                    }
                ),
                (
                    net("fd00:10::/120"),
                    CidrRefusal::OutsidePool {
                        pool: "blue".into(),
                        ranges: Vec::new()
                    }
                ),
                (net("0.0.0.0/0"), CidrRefusal::DefaultRoute),
            ]
        );
        assert_eq!(
            a.refused[0].1.to_string(),
            "outside its pool \"blue\" [10.20.0.0/16]"
        );
    }

    #[test]
    fn multi_pool_without_pool_ranges_announces_unchecked_and_says_so() {
        let mut state =
            multi_pool_state(&[("default", &["10.99.0.0/27"]), ("red", &["10.98.0.0/27"])]);
        // A pool the node holds CIDRs of but that does not exist.
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        assert_eq!(view.nodes["a"].prefixes, nets(&["10.98.0.0/27"]));
        assert_eq!(
            view.warnings,
            vec![ViewWarning::PoolRangesUnknown {
                pool: Some("red".into())
            }]
        );
        // No pool readable at all.
        state.pod_ip_pools = None;
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        assert_eq!(
            view.nodes["a"].prefixes,
            nets(&["10.99.0.0/27", "10.98.0.0/27"])
        );
        assert_eq!(
            view.warnings,
            vec![ViewWarning::PoolRangesUnknown { pool: None }]
        );
    }

    #[test]
    fn multi_pool_change_moves_only_what_changed_and_announce_false_holds() {
        let before = node_view(
            &multi_pool_state(&[("default", &["10.10.0.0/27", "10.10.0.32/27"])]),
            IpamOverride::Auto,
        )
        .unwrap();
        let after = node_view(
            &multi_pool_state(&[("default", &["10.10.0.32/27", "10.10.0.64/27"])]),
            IpamOverride::Auto,
        )
        .unwrap();
        assert_eq!(
            before.nodes["a"].prefixes,
            nets(&["10.10.0.0/27", "10.10.0.32/27"])
        );
        assert_eq!(
            after.nodes["a"].prefixes,
            nets(&["10.10.0.32/27", "10.10.0.64/27"])
        );
        let mut state = multi_pool_state(&[("default", &["10.10.0.0/27"])]);
        if let Some(c) = state.cilium_config.as_mut() {
            c.announce_pod_cidr = Some(false);
        }
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        assert_eq!(view.nodes["a"].prefixes, nets(&["10.10.0.0/27"]));
        assert_eq!(view.nodes["a"].pools.len(), 1);
    }

    #[test]
    fn cluster_pool_v2beta_reads_as_cluster_pool() {
        let v2beta = node_view(&outage_state("cluster-pool-v2beta"), IpamOverride::Auto).unwrap();
        let pool = node_view(&outage_state("cluster-pool"), IpamOverride::Auto).unwrap();
        assert_eq!(v2beta, pool);
        assert_eq!(v2beta.ipam, IpamMode::ClusterPool);
    }

    #[test]
    fn modes_without_routable_pod_cidrs_are_refused_by_name() {
        for mode in [
            "crd",
            "eni",
            "azure",
            "alibabacloud",
            "delegated-plugin",
            "bogus",
        ] {
            let err = node_view(&outage_state(mode), IpamOverride::Auto).unwrap_err();
            assert_eq!(err, IpamError::Unsupported { mode: mode.into() });
            assert!(err.to_string().contains("\"multi-pool\""), "{err}");
        }
    }

    #[test]
    fn kubernetes_ipam_reads_the_ipv6_annotation_as_the_ipv4_one() {
        let mut state = ClusterState {
            cilium_config: Some(config("kubernetes", &[])),
            ..ClusterState::default()
        };
        state.nodes.insert(
            "v6only".into(),
            NodeFacts {
                annotation_cidrs: nets(&["fd00:30::/64"]),
                ..NodeFacts::default()
            },
        );
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        assert_eq!(view.nodes["v6only"].prefixes, nets(&["fd00:30::/64"]));
        assert_eq!(
            view.nodes["v6only"].source,
            Some(CidrSource::NodeAnnotations)
        );
    }
}
