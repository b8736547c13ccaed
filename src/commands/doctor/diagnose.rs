//! The diagnosis of a [`ClusterState`] ([`diagnose`]): per node both sides' CIDRs, the
//! object in force, drift, overlaps, CIDRs outside the pool, shared router ids; and the
//! LoadBalancer findings ([`lb_findings`]: `routes::lb_findings::audit`, rendered as
//! lines).
//!
//! Must not: decide which object is in force, which CIDRs are refused or which overlap
//! (that is `node_view`'s alone), or classify a LoadBalancer IP (the planner's rule);
//! this file only reads their answers.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use ipnet::IpNet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;

use super::super::allocation::{AllocationView, Outcome};
use crate::alloc::PoolUsage;

use crate::config::Config;
use crate::routes::cilium::{self, CiliumBgpConflict};
use crate::routes::lb_findings::{self, AllocatorMissing};
use crate::routes::router_id::{router_id, shared, RouterIdOrigin};
use crate::sources::model::{
    node_view, CidrList, CidrRefusal, CidrSource, ClusterState, IpamError, IpamMode, IpamOverride,
    NodeEntry, NodeView, PoolRanges,
};
use crate::sources::services::{LbFacts, ObjectKey};

/// An overlap seen from one node: (its CIDR, the other node, the other node's CIDR).
pub type OverlapWith = (IpNet, Arc<str>, IpNet);

/// What doctor found about one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDiagnosis {
    /// The node as the view has it: its name, both sides' CIDRs and where they come
    /// from, drift.
    pub node: NodeEntry,
    /// The object in force for the IPAM mode; `None` when it lists nothing (or the mode
    /// cannot be decided).
    pub in_force: Option<CidrSource>,
    /// The CIDRs the object in force lists (what Cilium uses for pods on the node).
    pub in_force_cidrs: Vec<IpNet>,
    /// What the speaker announces for the node.
    pub announced: Vec<IpNet>,
    /// Other nodes whose in-force CIDRs overlap this node's: (this node's CIDR, the
    /// other node, its CIDR).
    pub overlaps: Vec<OverlapWith>,
    /// In-force CIDRs outside the cluster pool (cluster-pool IPAM) or outside the
    /// CiliumPodIPPool they were allocated from (multi-pool IPAM).
    pub outside_pool: Vec<IpNet>,
    /// Default routes the object in force lists (never announced).
    pub default_routes: Vec<IpNet>,
}

impl NodeDiagnosis {
    pub fn ok(&self) -> bool {
        self.node.drift.is_none()
            && self.overlaps.is_empty()
            && self.outside_pool.is_empty()
            && self.default_routes.is_empty()
    }
}

/// How the IPAM mode was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeOrigin {
    /// `--ipam kubernetes|cluster-pool`.
    Override,
    /// The `ipam` key of cilium-config (or its absence, which Cilium reads as
    /// cluster-pool).
    CiliumConfig,
    /// No cilium-config at all: Cilium's default, cluster-pool, is assumed.
    Default,
}

impl fmt::Display for ModeOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Override => "from --ipam",
            Self::CiliumConfig => "from cilium-config",
            Self::Default => "Cilium's default: no cilium-config found",
        })
    }
}

/// The whole diagnosis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    /// The IPAM mode in force, or why it cannot be decided.
    pub ipam: Result<IpamMode, IpamError>,
    pub origin: ModeOrigin,
    pub pool_v4: Vec<IpNet>,
    pub pool_v6: Vec<IpNet>,
    /// The CiliumPodIPPools' ranges (multi-pool IPAM); `None` when they were not read.
    pub pod_ip_pools: Option<BTreeMap<String, PoolRanges>>,
    pub nodes: Vec<NodeDiagnosis>,
    /// CiliumNodes without a Node: leftovers whose CIDRs nobody announces.
    pub orphan_cilium_nodes: Vec<String>,
    /// Objects that could not be read (in-cluster only; a file source fails as a whole).
    pub unreadable: Vec<String>,
    /// View-wide warnings and reading notes (a CRD not installed...).
    pub warnings: Vec<String>,
    /// cilium-config turns Cilium's embedded BGP speaker on (`routes::cilium`).
    pub cilium_bgp: Option<CiliumBgpConflict>,
    /// The bgp-config: where it was read and whether it is there and valid.
    pub bgp_config: BgpConfigCheck,
    /// LoadBalancer Services pending an IP while the bgp-config has bgp pools (the
    /// guess made from the status alone, without the allocator: only where the Service
    /// objects cannot be had for [`Diagnosis::allocation`]).
    pub allocator: Option<AllocatorMissing>,
    /// With a bgp-config that has address-pools: the allocator's answer over the
    /// Services (live, or the `--cluster-state` files'), and in a cluster whether an
    /// allocator of ours runs. When present it is shown instead of
    /// [`Diagnosis::allocator`].
    pub allocation: Option<AllocationCheck>,
}

/// The allocator run from scratch over the live Services and the live bgp-config
/// ([`AllocationView`]), held against what the cluster shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocationCheck {
    /// The LoadBalancer Services (of the classes the allocator serves, `--lb-class`)
    /// whose status has no address, in key order, with the allocator's answer: the
    /// reason it leaves them pending too, or what it would give them.
    pub pending: Vec<(ObjectKey, Outcome)>,
    /// The Services with status addresses that the allocator, starting now, would not
    /// keep: their status, and what it would write instead (other addresses, or none
    /// and why). Another allocator wrote them, or the config changed under them.
    pub changed: Vec<(ObjectKey, Vec<IpAddr>, Outcome)>,
    /// Status addresses the config leaves outside every pool, with their Services: the
    /// allocator refuses such a config (a problem).
    pub outside: BTreeMap<IpAddr, Vec<ObjectKey>>,
    /// Per pool: in use (from scratch) / total.
    pub pools: Vec<PoolUsage>,
    /// Services the allocator cannot read.
    pub unreadable: Vec<String>,
    /// The allocator's Lease.
    pub lease: LeaseCheck,
}

impl AllocationCheck {
    /// The check of `view` (from the live Services) with the Lease as read.
    pub fn new(view: AllocationView, lease: LeaseCheck) -> AllocationCheck {
        AllocationCheck {
            pending: view
                .services
                .iter()
                .filter(|s| s.status.is_empty())
                .map(|s| (s.service.clone(), s.outcome.clone()))
                .collect(),
            changed: view
                .services
                .iter()
                .filter(|s| !s.status.is_empty() && !matches!(s.outcome, Outcome::Kept(_)))
                .map(|s| (s.service.clone(), s.status.clone(), s.outcome.clone()))
                .collect(),
            outside: view.outside,
            pools: view.pools,
            unreadable: view.unreadable,
            lease,
        }
    }

    /// The pending Services, a few named with the allocator's answer, the rest counted.
    pub fn pending_text(&self) -> String {
        let named: Vec<String> = self
            .pending
            .iter()
            .take(lb_findings::PENDING_NAMED)
            .map(|(key, outcome)| match outcome {
                Outcome::Pending(r) => format!("{key}: {r}"),
                Outcome::Kept(h) | Outcome::New(h) => format!(
                    "{key}: the allocator would give it {} from pool {}",
                    h.ips
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    h.pool
                ),
            })
            .collect();
        let more = self
            .pending
            .len()
            .saturating_sub(lb_findings::PENDING_NAMED);
        let more = if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        };
        format!(
            "{} LoadBalancer Service(s) pending an IP ({}{more})",
            self.pending.len(),
            named.join("; ")
        )
    }

    /// The Services whose status the allocator would change, a few named, the rest
    /// counted.
    pub fn changed_text(&self) -> String {
        let ips = |l: &[IpAddr]| {
            l.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let named: Vec<String> = self
            .changed
            .iter()
            .take(lb_findings::PENDING_NAMED)
            .map(|(key, status, outcome)| match outcome {
                Outcome::Pending(r) => format!("{key}: {} -> none: {r}", ips(status)),
                Outcome::Kept(h) | Outcome::New(h) => {
                    format!(
                        "{key}: {} -> {} from pool {}",
                        ips(status),
                        ips(&h.ips),
                        h.pool
                    )
                }
            })
            .collect();
        let more = self
            .changed
            .len()
            .saturating_sub(lb_findings::PENDING_NAMED);
        let more = if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        };
        format!(
            "the allocator, starting now, would change the status of {} LoadBalancer \
             Service(s) ({}{more})",
            self.changed.len(),
            named.join("; ")
        )
    }

    /// Pending Services the allocator would serve: nothing has allocated them.
    pub fn allocatable_pending(&self) -> usize {
        self.pending
            .iter()
            .filter(|(_, o)| o.holding().is_some())
            .count()
    }
}

/// The `podcidr-speaker-allocator` Lease as doctor read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseCheck {
    /// Held, and renewed within its duration: an allocator of ours is running.
    Held {
        lease: String,
        holder: String,
        /// Seconds since the last renewal.
        renewed_ago: i64,
    },
    /// There, but nobody holds it or its holder stopped renewing it.
    Stale {
        lease: String,
        holder: Option<String>,
        /// Seconds since the last renewal, when the Lease says.
        renewed_ago: Option<i64>,
    },
    /// No such Lease: no allocator of ours ever ran with it.
    Missing { lease: String },
    /// Not readable with these credentials.
    Unreadable { lease: String, reason: String },
    /// Files diagnosed (`--cluster-state`): there is no Lease to read, so whether an
    /// allocator runs is not known.
    Files,
}

impl LeaseCheck {
    /// What `lease` (named `name`) says at `now`, by client-go's rule: held while
    /// `renewTime + leaseDurationSeconds` is not past.
    pub fn of(name: &str, lease: Option<&Lease>, now: Timestamp) -> LeaseCheck {
        let lease_name = name.to_owned();
        let Some(spec) = lease.map(|l| l.spec.clone().unwrap_or_default()) else {
            return LeaseCheck::Missing { lease: lease_name };
        };
        let holder = spec.holder_identity.filter(|h| !h.is_empty());
        let renewed_ago = spec
            .renew_time
            .map(|t| (now.as_millisecond() - t.0.as_millisecond()).div_euclid(1000));
        let duration = spec.lease_duration_seconds.map(i64::from);
        match (holder, renewed_ago, duration) {
            (Some(holder), Some(ago), Some(d)) if ago <= d => LeaseCheck::Held {
                lease: lease_name,
                holder,
                renewed_ago: ago,
            },
            (holder, renewed_ago, _) => LeaseCheck::Stale {
                lease: lease_name,
                holder,
                renewed_ago,
            },
        }
    }

    pub fn is_held(&self) -> bool {
        matches!(self, LeaseCheck::Held { .. })
    }
}

impl fmt::Display for LeaseCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const OTHERS: &str = "Cilium LB-IPAM or MetalLB's controller may be the allocator instead";
        match self {
            LeaseCheck::Held {
                lease,
                holder,
                renewed_ago,
            } => write!(
                f,
                "podcidr-speaker allocate is running: {holder} holds Lease {lease} \
                 (renewed {renewed_ago}s ago)"
            ),
            LeaseCheck::Stale {
                lease,
                holder,
                renewed_ago,
            } => {
                let holder = holder.as_deref().unwrap_or("nobody");
                let ago = renewed_ago.map_or_else(
                    || "never renewed".to_owned(),
                    |s| format!("last renewed {s}s ago"),
                );
                write!(
                    f,
                    "none of ours is running: Lease {lease} is not held (holder {holder}, \
                     {ago}); {OTHERS}"
                )
            }
            LeaseCheck::Missing { lease } => {
                write!(
                    f,
                    "none of ours is running (no Lease {lease}; one in another namespace is \
                     named with --allocator-lease); {OTHERS}"
                )
            }
            LeaseCheck::Unreadable { lease, reason } => {
                write!(f, "Lease {lease} cannot be read ({reason}): not checked")
            }
            LeaseCheck::Files => write!(
                f,
                "not checked: files (--cluster-state) have no Lease to say whether one runs"
            ),
        }
    }
}

/// The bgp-config as doctor found it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BgpConfigCheck {
    /// Not looked at (files without `--bgp-config`).
    #[default]
    NotChecked,
    /// There and valid.
    Valid {
        source: String,
        peers: usize,
        bgp_pools: usize,
    },
    /// The ConfigMap, or its key, does not exist: the speaker would wait for it.
    Missing { source: String },
    /// There, and refused: the speaker would keep its last good one, or wait.
    Invalid { source: String, errors: String },
    /// Not readable with these credentials.
    Unreadable { source: String, reason: String },
}

impl BgpConfigCheck {
    /// A valid `config` read from `source`.
    pub fn valid(source: &str, config: &Config) -> BgpConfigCheck {
        BgpConfigCheck::Valid {
            source: source.to_owned(),
            peers: config.peers.len(),
            bgp_pools: config
                .pools
                .iter()
                .filter(|p| p.protocol == crate::config::Protocol::Bgp)
                .count(),
        }
    }

    /// Missing or invalid: the speaker cannot run on it.
    pub fn is_problem(&self) -> bool {
        matches!(
            self,
            BgpConfigCheck::Missing { .. } | BgpConfigCheck::Invalid { .. }
        )
    }
}

impl fmt::Display for BgpConfigCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BgpConfigCheck::NotChecked => write!(f, "not checked (pass --bgp-config)"),
            BgpConfigCheck::Valid {
                source,
                peers,
                bgp_pools,
            } => write!(
                f,
                "{source}: found and valid, {peers} peer(s), {bgp_pools} bgp address-pool(s)"
            ),
            BgpConfigCheck::Missing { source } => write!(
                f,
                "{source}: NOT FOUND: the speaker opens no session until it exists \
                 (deploy/README.md)"
            ),
            BgpConfigCheck::Invalid { source, errors } => write!(
                f,
                "{source}: INVALID (`podcidr-speaker check` says why): {errors}"
            ),
            BgpConfigCheck::Unreadable { source, reason } => {
                write!(f, "{source}: cannot be read: {reason}")
            }
        }
    }
}

impl Diagnosis {
    /// Nothing is wrong: the mode is decided, no node drifts, overlaps or lists a CIDR
    /// it must not, and every object was read.
    pub fn ok(&self) -> bool {
        self.ipam.is_ok()
            && self.unreadable.is_empty()
            && self
                .allocation
                .as_ref()
                .is_none_or(|a| a.outside.is_empty())
            && self.cilium_bgp.is_none()
            && !self.bgp_config.is_problem()
            && self.nodes.iter().all(|n| n.ok())
    }

    /// The process exit status: 0 when [`Diagnosis::ok`], 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        u8::from(!self.ok())
    }

    /// One line per problem, for the summary.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Err(e) = &self.ipam {
            out.push(e.to_string());
        }
        if self.bgp_config.is_problem() {
            out.push(format!("bgp-config {}", self.bgp_config));
        }
        if let Some(c) = &self.cilium_bgp {
            out.push(format!(
                "{c}: the speaker opens no new session while it is on \
                 (--cilium-bgp-conflict hold, the default). To fix: {}",
                cilium::ADVICE
            ));
        }
        for u in &self.unreadable {
            out.push(format!("unreadable object: {u}"));
        }
        if let Some(a) = self.allocation.as_ref().filter(|a| !a.outside.is_empty()) {
            let items: Vec<String> = a
                .outside
                .iter()
                .map(|(ip, by)| {
                    let names: Vec<String> = by.iter().map(ToString::to_string).collect();
                    format!("{ip} (held by {})", names.join(", "))
                })
                .collect();
            out.push(format!(
                "loadbalancer ip allocation: the bgp-config leaves addresses in use outside \
                 every address-pool (or on an address avoid-buggy-ips skips): {}: a running \
                 podcidr-speaker allocate refuses this config and keeps its last good one \
                 until those Services change; one starting on it would move those Services \
                 to new addresses",
                items.join("; ")
            ));
        }
        let mode = self.ipam.as_ref().ok();
        for n in &self.nodes {
            if n.node.drift.is_some() {
                let cilium = n.node.cilium_cidrs.as_deref().unwrap_or_default();
                let announced = match mode {
                    Some(mode) => format!("the {}'s are announced", mode.object()),
                    None => "the IPAM mode decides which are announced".to_owned(),
                };
                out.push(format!(
                    "{}: drift: Node {} vs CiliumNode {}; {announced}",
                    n.node.name,
                    CidrList(&n.node.node_cidrs),
                    CidrList(cilium),
                ));
            }
            for (prefix, other, other_prefix) in &n.overlaps {
                // Each pair is listed under both nodes in the table; once here.
                if n.node.name.as_ref() < other.as_ref() {
                    out.push(format!(
                        "{}: {prefix} overlaps {other}'s {other_prefix}",
                        n.node.name
                    ));
                }
            }
            if mode == Some(&IpamMode::MultiPool) {
                for prefix in &n.outside_pool {
                    let pool = n.node.pool_of(prefix).unwrap_or_default();
                    let ranges = self
                        .pod_ip_pools
                        .as_ref()
                        .and_then(|p| p.get(pool))
                        .map(|r| r.of_family(prefix))
                        .unwrap_or_default();
                    out.push(format!(
                        "{}: {prefix} outside its pool {pool:?} {} (not announced)",
                        n.node.name,
                        CidrList(ranges)
                    ));
                }
            } else if !n.outside_pool.is_empty() {
                let mut pool = self.pool_v4.clone();
                pool.extend(&self.pool_v6);
                out.push(format!(
                    "{}: {} outside the cluster pool {} (not announced)",
                    n.node.name,
                    CidrList(&n.outside_pool),
                    CidrList(&pool)
                ));
            }
            if !n.default_routes.is_empty() {
                out.push(format!(
                    "{}: {} is a default route (never announced)",
                    n.node.name,
                    CidrList(&n.default_routes)
                ));
            }
        }
        out
    }
}

/// Diagnoses a cluster state under an `--ipam` setting. The view (mode, what is in
/// force, drift, refusals) is [`node_view`]'s; this adds overlaps and orphans.
pub fn diagnose(state: &ClusterState, ipam: IpamOverride) -> Diagnosis {
    let origin = match (ipam, &state.cilium_config) {
        (IpamOverride::Kubernetes | IpamOverride::ClusterPool | IpamOverride::MultiPool, _) => {
            ModeOrigin::Override
        }
        (IpamOverride::Auto, Some(_)) => ModeOrigin::CiliumConfig,
        (IpamOverride::Auto, None) => ModeOrigin::Default,
    };
    let decided = node_view(state, ipam);
    // Without a mode nothing is in force, but drift does not depend on the mode: read
    // it from a view under either explicit mode.
    let (view, in_force_known): (Option<NodeView>, bool) = match &decided {
        Ok(view) => (Some(view.clone()), true),
        Err(_) => (node_view(state, IpamOverride::ClusterPool).ok(), false),
    };
    let mut nodes = Vec::new();
    if let Some(view) = &view {
        // Overlaps are the view's, seen from each of the two nodes.
        let mut by_node: BTreeMap<&str, Vec<OverlapWith>> = BTreeMap::new();
        for o in view.overlaps.iter().filter(|_| in_force_known) {
            by_node.entry(&o.node).or_default().push((
                o.prefix,
                Arc::clone(&o.other_node),
                o.other_prefix,
            ));
            by_node.entry(&o.other_node).or_default().push((
                o.other_prefix,
                Arc::clone(&o.node),
                o.prefix,
            ));
        }
        for (name, entry) in &view.nodes {
            let in_force = entry.source.filter(|_| in_force_known);
            let mut in_force_cidrs = if in_force_known {
                entry.in_force_cidrs()
            } else {
                Vec::new()
            };
            in_force_cidrs.dedup();
            let refused = |want: fn(&CidrRefusal) -> bool| -> Vec<IpNet> {
                if !in_force_known {
                    return Vec::new();
                }
                entry
                    .refused
                    .iter()
                    .filter(|(_, r)| want(r))
                    .map(|(p, _)| *p)
                    .collect()
            };
            let mut overlaps = by_node.remove(name.as_ref()).unwrap_or_default();
            overlaps.sort();
            nodes.push(NodeDiagnosis {
                node: entry.clone(),
                in_force,
                announced: if in_force_known {
                    entry.prefixes.clone()
                } else {
                    Vec::new()
                },
                overlaps,
                outside_pool: refused(|r| {
                    matches!(
                        r,
                        CidrRefusal::OutsideClusterPool { .. } | CidrRefusal::OutsidePool { .. }
                    )
                }),
                default_routes: refused(|r| matches!(r, CidrRefusal::DefaultRoute)),
                in_force_cidrs,
            });
        }
    }

    let (pool_v4, pool_v6) = match &state.cilium_config {
        Some(c) => (c.cluster_pool_v4.clone(), c.cluster_pool_v6.clone()),
        None => (Vec::new(), Vec::new()),
    };
    Diagnosis {
        ipam: decided.as_ref().map(|v| v.ipam).map_err(Clone::clone),
        origin,
        cilium_bgp: CiliumBgpConflict::of(state.cilium_config.as_ref()),
        bgp_config: BgpConfigCheck::NotChecked,
        allocator: None,
        allocation: None,
        pool_v4,
        pool_v6,
        pod_ip_pools: state.pod_ip_pools.clone(),
        nodes,
        orphan_cilium_nodes: state
            .cilium_nodes
            .keys()
            .filter(|name| !state.nodes.contains_key(*name))
            .cloned()
            .collect(),
        unreadable: Vec::new(),
        warnings: view
            .filter(|_| in_force_known)
            .map(|v| {
                v.warnings
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
            .into_iter()
            .chain(shared_router_ids(state))
            .collect(),
    }
}

/// One warning per BGP Identifier that two nodes or more would use, under the rule the
/// speaker follows without `--router-id` or `--source-address` ([`router_id`]): peers
/// may refuse the second session, or break ties between their paths at random.
fn shared_router_ids(state: &ClusterState) -> Vec<String> {
    let ids: Vec<(Arc<str>, Ipv4Addr, RouterIdOrigin)> = state
        .nodes
        .iter()
        .map(|(name, facts)| {
            let (id, origin) = router_id(None, facts.internal_ipv4, None, name);
            (Arc::from(name.as_str()), id, origin)
        })
        .collect();
    let origin_of: BTreeMap<&str, RouterIdOrigin> =
        ids.iter().map(|(n, _, o)| (n.as_ref(), *o)).collect();
    shared(ids.iter().map(|(n, id, _)| (n, *id)))
        .into_iter()
        .map(|(id, nodes)| {
            let list: Vec<String> = nodes
                .iter()
                .map(|n| format!("{n} ({})", origin_of[n.as_ref()]))
                .collect();
            format!(
                "BGP Identifier {id} would be shared by {}: set router-id in the bgp-config \
                 (a node selector per node) or give the nodes distinct IPv4 InternalIPs",
                list.join(", ")
            )
        })
        .collect()
}

/// What the LoadBalancer Services say that an operator should look at: Services of type
/// LoadBalancer without an ingress IP (no allocator wrote one: nothing to announce),
/// ingress IPs inside a node's pod CIDR in force (a pool overlapping the pod range: the
/// IP is announced as its own, more specific route), and, given the bgp-config, ingress
/// IPs outside every bgp address-pool (never announced). One line each, by Service:
/// `routes::lb_findings::audit`'s findings, rendered.
/// The allocator finding (`routes::lb_findings::allocator_missing`) of `facts` under
/// `config`.
pub fn allocator(d: &Diagnosis, facts: &LbFacts, config: &Config) -> Option<AllocatorMissing> {
    let pods: Vec<(Arc<str>, &[IpNet])> = d
        .nodes
        .iter()
        .map(|n| (Arc::clone(&n.node.name), n.in_force_cidrs.as_slice()))
        .collect();
    lb_findings::allocator_missing(config, &lb_findings::audit(facts, Some(config), &pods))
}

pub fn lb_findings(d: &Diagnosis, facts: &LbFacts, config: Option<&Config>) -> Vec<String> {
    let pods: Vec<(Arc<str>, &[IpNet])> = d
        .nodes
        .iter()
        .map(|n| (Arc::clone(&n.node.name), n.in_force_cidrs.as_slice()))
        .collect();
    lb_findings::audit(facts, config, &pods)
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::model::{CiliumConfig, NodeFacts};

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| net(s)).collect()
    }

    fn state(ipam: &str, pool: &[&str], nodes: &[TestNode]) -> ClusterState {
        let mut state = ClusterState {
            cilium_config: Some(CiliumConfig {
                ipam: Some(ipam.into()),
                cluster_pool_v4: nets(pool),
                ..CiliumConfig::default()
            }),
            ..ClusterState::default()
        };
        for (name, node, cilium) in nodes {
            state.nodes.insert(
                (*name).into(),
                NodeFacts {
                    node_cidrs: nets(node),
                    ..NodeFacts::default()
                },
            );
            if let Some(c) = cilium {
                state.cilium_nodes.insert((*name).into(), nets(c));
            }
        }
        state
    }

    /// (name, Node CIDRs, CiliumNode CIDRs if there is a CiliumNode).
    type TestNode<'a> = (&'a str, &'a [&'a str], Option<&'a [&'a str]>);

    fn name(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    #[test]
    fn lb_services_pending_an_ip_or_inside_a_pod_cidr_are_warned_about() {
        use crate::sources::services::{ObjectKey, ServiceFacts};
        let st = state("kubernetes", &[], &[("n1", &["10.0.1.0/24"], None)]);
        let d = diagnose(&st, IpamOverride::Auto);
        let mut facts = LbFacts::default();
        let lb = |ips: &[&str]| ServiceFacts {
            load_balancer: true,
            ingress_ips: ips.iter().map(|i| i.parse().unwrap()).collect(),
            ..ServiceFacts::default()
        };
        facts
            .services
            .insert(ObjectKey::new("a", "pending"), lb(&[]));
        facts.services.insert(
            ObjectKey::new("a", "inside"),
            lb(&["10.0.1.7", "192.0.2.1"]),
        );
        facts
            .services
            .insert(ObjectKey::new("a", "clusterip"), ServiceFacts::default());
        assert_eq!(
            lb_findings(&d, &facts, None),
            vec![
                "service a/inside: LoadBalancer IP 10.0.1.7 lies inside the pod CIDR 10.0.1.0/24 \
                 of node n1: announced as its own, more specific route"
                    .to_owned(),
                "service a/pending: LoadBalancer pending an IP: nothing to announce".to_owned(),
            ]
        );
    }

    // client-go's rule: held while renewTime + leaseDurationSeconds is not past, and
    // only with a holder; a Lease that says less is not held.
    #[test]
    fn the_allocator_lease_is_held_only_when_renewed_within_its_duration() {
        let now = Timestamp::from_second(1_000_000).unwrap();
        let lease = |holder: Option<&str>, renewed: Option<i64>, duration: Option<i32>| {
            serde_json::from_value::<Lease>(serde_json::json!({
                "metadata": {"name": "podcidr-speaker-allocator", "namespace": "kube-system"},
                "spec": {
                    "holderIdentity": holder,
                    "renewTime": renewed.map(|s| {
                        Timestamp::from_second(s).unwrap().to_string()
                    }),
                    "leaseDurationSeconds": duration,
                }
            }))
            .unwrap()
        };
        let of = |l: Option<&Lease>| LeaseCheck::of("kube-system/a", l, now);
        assert_eq!(
            of(Some(&lease(Some("pod-1"), Some(999_985), Some(15)))),
            LeaseCheck::Held {
                lease: "kube-system/a".into(),
                holder: "pod-1".into(),
                renewed_ago: 15
            }
        );
        assert_eq!(
            of(Some(&lease(Some("pod-1"), Some(999_984), Some(15)))),
            LeaseCheck::Stale {
                lease: "kube-system/a".into(),
                holder: Some("pod-1".into()),
                renewed_ago: Some(16)
            }
        );
        // Released (holderIdentity cleared on a clean hand-over), or never renewed.
        assert!(!of(Some(&lease(Some(""), Some(999_999), Some(15)))).is_held());
        assert!(!of(Some(&lease(Some("pod-1"), None, Some(15)))).is_held());
        assert!(!of(Some(&lease(Some("pod-1"), Some(999_999), None))).is_held());
        assert_eq!(
            of(None),
            LeaseCheck::Missing {
                lease: "kube-system/a".into()
            }
        );
        let text = of(None).to_string();
        assert!(text.contains("Cilium LB-IPAM or MetalLB"), "{text}");
    }

    #[test]
    fn healthy_cluster_is_ok_with_exit_zero() {
        let s = state(
            "cluster-pool",
            &["10.0.0.0/16"],
            &[
                ("a", &["10.0.1.0/24"], Some(&["10.0.1.0/24"])),
                ("b", &[], Some(&["10.0.2.0/24"])),
            ],
        );
        let d = diagnose(&s, IpamOverride::Auto);
        assert!(d.ok(), "{d}");
        assert_eq!(d.exit_code(), 0);
        assert_eq!(d.ipam, Ok(IpamMode::ClusterPool));
        assert_eq!(d.origin, ModeOrigin::CiliumConfig);
        assert!(d.problems().is_empty());
        let b = &d.nodes[1];
        assert_eq!(b.in_force, Some(CidrSource::CiliumNode));
        assert_eq!(b.announced, nets(&["10.0.2.0/24"]));
        assert!(
            d.to_string()
                .ends_with("2 nodes: 0 with drift, 0 overlapping, 0 outside the pool: ok\n"),
            "{d}"
        );
    }

    #[test]
    fn overlapping_nodes_are_flagged_on_both_and_fail() {
        let s = state(
            "kubernetes",
            &[],
            &[("a", &["10.0.0.0/23"], None), ("b", &["10.0.1.0/24"], None)],
        );
        let d = diagnose(&s, IpamOverride::Auto);
        assert!(!d.ok());
        assert_eq!(d.exit_code(), 1);
        assert_eq!(
            d.nodes[0].overlaps,
            vec![(net("10.0.0.0/23"), name("b"), net("10.0.1.0/24"))]
        );
        assert_eq!(
            d.nodes[1].overlaps,
            vec![(net("10.0.1.0/24"), name("a"), net("10.0.0.0/23"))]
        );
        assert_eq!(
            d.problems(),
            vec!["a: 10.0.0.0/23 overlaps b's 10.0.1.0/24".to_owned()]
        );
    }

    #[test]
    fn outside_pool_and_default_routes_are_problems() {
        let s = state(
            "cluster-pool",
            &["10.0.0.0/16"],
            &[("a", &[], Some(&["10.9.0.0/24", "0.0.0.0/0", "10.0.3.0/24"]))],
        );
        let d = diagnose(&s, IpamOverride::Auto);
        let a = &d.nodes[0];
        assert_eq!(a.outside_pool, nets(&["10.9.0.0/24"]));
        assert_eq!(a.default_routes, nets(&["0.0.0.0/0"]));
        assert_eq!(a.announced, nets(&["10.0.3.0/24"]));
        assert!(a.overlaps.is_empty(), "a default route is not an overlap");
        assert_eq!(d.exit_code(), 1);
        let problems = d.problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("10.9.0.0/24") && problems[0].contains("10.0.0.0/16"));
    }

    #[test]
    fn undecidable_mode_still_shows_drift_and_fails() {
        let s = state(
            "eni",
            &[],
            &[("a", &["10.0.1.0/24"], Some(&["10.0.2.0/24"]))],
        );
        let d = diagnose(&s, IpamOverride::Auto);
        assert!(matches!(&d.ipam, Err(IpamError::Unsupported { mode }) if mode == "eni"));
        assert!(d.nodes[0].node.drift.is_some());
        assert_eq!(d.nodes[0].in_force, None);
        assert!(d.nodes[0].announced.is_empty());
        assert_eq!(d.exit_code(), 1);
        let text = d.to_string();
        assert!(text.contains("? (ipam undecided)"), "{text}");
        assert!(text.contains("\"eni\" is not supported"), "{text}");
    }

    #[test]
    fn nodes_that_would_share_a_bgp_identifier_are_warned_about() {
        let mut s = state(
            "cluster-pool",
            &["10.0.0.0/16"],
            &[
                ("a", &[], None),
                ("b", &[], None),
                ("c", &[], None),
                ("d", &[], None),
            ],
        );
        let ip = Ipv4Addr::new(192, 0, 2, 7);
        // a and b report one InternalIP; c is IPv6-only and derives the same value as
        // d's InternalIP; nothing else is shared.
        s.nodes.get_mut("a").unwrap().internal_ipv4 = Some(ip);
        s.nodes.get_mut("b").unwrap().internal_ipv4 = Some(ip);
        s.nodes.get_mut("c").unwrap().internal_ipv6 = Some("fd00::c".parse().unwrap());
        s.nodes.get_mut("d").unwrap().internal_ipv4 = Some(crate::routes::router_id::derived("c"));
        let d = diagnose(&s, IpamOverride::Auto);
        let shared: Vec<&String> = d
            .warnings
            .iter()
            .filter(|w| w.starts_with("BGP Identifier"))
            .collect();
        assert_eq!(shared.len(), 2, "{:?}", d.warnings);
        let ab =
            format!("{ip} would be shared by a (the IPv4 InternalIP), b (the IPv4 InternalIP)");
        assert!(shared.iter().any(|w| w.contains(&ab)), "{shared:?}");
        assert!(
            shared
                .iter()
                .any(|w| w.contains("c (derived from the node name), d (the IPv4 InternalIP)")),
            "{shared:?}"
        );
        assert!(d.ok(), "a warning, not a problem");
        assert!(d.to_string().contains("BGP Identifier"));

        s.nodes.get_mut("b").unwrap().internal_ipv4 = Some(Ipv4Addr::new(192, 0, 2, 8));
        s.nodes.get_mut("d").unwrap().internal_ipv4 = None;
        let d = diagnose(&s, IpamOverride::Auto);
        assert!(
            !d.warnings.iter().any(|w| w.starts_with("BGP Identifier")),
            "{:?}",
            d.warnings
        );
    }

    #[test]
    fn orphans_and_warnings_are_reported_without_failing() {
        let mut s = state(
            "cluster-pool",
            &["10.0.0.0/16"],
            &[("a", &[], Some(&["10.0.1.0/24"]))],
        );
        s.cilium_nodes.insert("gone".into(), nets(&["10.0.9.0/24"]));
        s.cilium_config = None;
        let d = diagnose(&s, IpamOverride::Auto);
        assert_eq!(d.origin, ModeOrigin::Default);
        assert_eq!(d.orphan_cilium_nodes, vec!["gone".to_owned()]);
        assert_eq!(d.warnings.len(), 2, "{:?}", d.warnings);
        assert!(d.ok());
        let text = d.to_string();
        assert!(
            text.contains("CiliumNodes without a Node (not announced): gone"),
            "{text}"
        );
    }

    #[test]
    fn multi_pool_lists_the_pools_each_node_holds_and_flags_cidrs_outside_their_pool() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("config/cluster-state/multi-pool.yaml");
        let d = diagnose(
            &crate::sources::file::load(&path).unwrap(),
            IpamOverride::Auto,
        );
        assert_eq!(d.ipam, Ok(IpamMode::MultiPool));
        let a = &d.nodes[0];
        assert_eq!(&*a.node.name, "worker-a");
        assert_eq!(a.in_force, Some(CidrSource::CiliumNodePools));
        let held: Vec<&str> = a.node.pools.iter().map(|p| p.pool.as_str()).collect();
        assert_eq!(held, ["default", "blue"]);
        assert!(
            a.node.drift.is_none(),
            "the Node's podCIDRs are not in force"
        );
        assert!(a.ok());
        let b = &d.nodes[1];
        assert_eq!(b.outside_pool, nets(&["10.30.0.0/27"]));
        assert!(!b
            .overlaps
            .iter()
            .any(|(p, _, _)| p.to_string() == "10.244.2.0/24"));
        assert_eq!(
            d.problems(),
            ["worker-b: 10.30.0.0/27 outside its pool \"default\" [10.10.0.0/16] (not announced)"]
        );
        assert_eq!(d.exit_code(), 1);
        let text = d.to_string();
        for line in [
            "ipam mode: multi-pool (from cilium-config)",
            "CiliumPodIPPool blue: ipv4 [10.20.0.0/16], ipv6 none",
            "CiliumPodIPPool default: ipv4 [10.10.0.0/16], ipv6 [fd00:10::/104]",
            "CiliumNode pools default [10.10.0.0/27, 10.10.0.32/27, fd00:10::/120], blue [10.20.0.0/27]",
        ] {
            assert!(text.contains(line), "{line:?} not in:\n{text}");
        }
    }
}
