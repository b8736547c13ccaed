//! The planner: which peers this node opens and the exact routes each must hold, from
//! the node view (sources), the validated config, the local node and the announce mode.
//!
//! Owns the rules below and nothing else; the peer driver owns the Adj-RIB-Out and asks
//! [`super::diff`] what to send. Must not: log above debug, read the clock, touch
//! sockets or metrics, or import anything of `sources` but its pure model.
//!
//! Rules (issue #6):
//! - Peers: the config's `peers` whose `node-selectors` match the local node's labels,
//!   keyed by [`PeerKey`]; when two entries for one router both select the node, the first
//!   in the file is used and the clash is kept in [`Plan::peer_conflicts`]. A local node
//!   that is not in the view selects nothing: its labels are unknown, and a selector such
//!   as `DoesNotExist` would otherwise open sessions the node must not have.
//! - `local` (the DaemonSet): the local node's pod CIDRs. Next hop per (peer, family):
//!   [`next_hop::rule`] (the peer's `next-hop-v4`/`next-hop-v6`; else for the session's
//!   family the source address it binds ([`source_address`]) or its local address; for
//!   the other family the node's address, else for IPv4 the session's IPv6 address with
//!   RFC 8950). A family without a next hop is not announced to that peer; its prefixes
//!   are listed in [`Plan::unannounceable`].
//! - `cluster` (one speaker for the whole cluster): every node's pod CIDRs, next hop that
//!   node's InternalIP of the prefix's family. A node without one cannot have prefixes of
//!   that family announced; they are listed in [`Plan::unannounceable`].
//! - Ownership, the same in both modes and computed from the whole view: a prefix listed
//!   by several nodes belongs to the node whose name sorts first (byte order), so the
//!   outcome is stable across restarts and independent of the order events arrived in;
//!   only the owner announces it, the others are reported ([`Conflict::SamePrefix`]).
//!   Different prefixes where one covers the other are both announced: the switch's
//!   longest-prefix match gives each node the space it claims most specifically, and the
//!   overlap is reported ([`Conflict::Overlap`], read from the view's overlaps, which
//!   `node_view` works out once for the planner, the metrics and `doctor`). In `local`
//!   mode only conflicts that involve the local node are reported.
//! - Attributes (RFC 4271 section 5.1): ORIGIN from the config (`incomplete` by default,
//!   as MetalLB sent); AS_PATH empty on iBGP and our AS on eBGP; LOCAL_PREF on iBGP only,
//!   `pod-cidr-local-pref` or [`attrs::DEFAULT_LOCAL_PREF`] (not MetalLB's 0, which loses to
//!   every other route); communities from `pod-cidr-communities`; no MED.
//! - Pools (multi-pool IPAM, issue #21): which pools a peer gets is `routes::pools`'
//!   rule ([`Selection`]), its findings in [`Plan::pools`]; each route of a pool the peer
//!   lists carries the pool's `communities` besides the peer's.
//!
//! Cost: peers with the same attributes and next-hop rule share one
//! `Arc<DesiredRoutes>`; within a route set, routes with equal attributes share one
//! `Arc<RouteAttrs>` (one per distinct next hop), and node names are the view's
//! `Arc<str>`s. `benches/planner.rs` measures 50,000 nodes x 16 peers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use super::attrs::{self, PeerTemplate};
use super::lb::LbProfile;
pub use super::mode::AnnounceMode;
use super::next_hop::{self, NextHopRule, NoNextHop, NodeAddresses};
use super::pools::{self, PoolFinding, Selection};
use super::{DesiredRoutes, NextHop, PlannedRoute, RouteAttrs};
use crate::config::{Config, Peer, PeerConflict, PeerKey};
use crate::sources::model::{Family, NodeEntry, NodeView};

/// The node this speaker runs on (`--node`); its labels come from the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalNode {
    pub name: Arc<str>,
}

impl LocalNode {
    pub fn new(name: impl Into<Arc<str>>) -> LocalNode {
        LocalNode { name: name.into() }
    }
}

/// Command-line settings that change the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Overrides {
    /// `--source-address`: the address every session binds when its peer sets none.
    pub source_address: Option<IpAddr>,
}

/// Everything the speaker on one node must do, as values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub node: Arc<str>,
    pub mode: AnnounceMode,
    /// False when the local node is not in the view: then no peer is selected.
    pub node_present: bool,
    /// The sessions to hold and their routes.
    pub peers: BTreeMap<PeerKey, PeerPlan>,
    /// `peers` entries (by index in the file) whose selectors do not match this node.
    pub unselected: Vec<usize>,
    /// `peers` entries for the same router that all select this node.
    pub peer_conflicts: Vec<PeerConflict>,
    /// Prefixes claimed by more than one node, in prefix order.
    pub conflicts: Vec<Conflict>,
    /// Owned prefixes that cannot be announced, in prefix order.
    pub unannounceable: Vec<Unannounceable>,
    /// What `pod-cidr-pools` left out, or that it does not apply (`routes::pools`).
    pub pools: Vec<PoolFinding>,
    /// The bgp-config's `speaker.announce-pod-cidrs`: false plans the sessions with no
    /// pod CIDR route (the view's CIDRs and conflicts are still reported).
    pub announce_pod_cidrs: bool,
}

impl Plan {
    /// Routes across all peers (for a gauge; shared route sets are counted per peer).
    pub fn route_count(&self) -> usize {
        self.peers.values().map(|p| p.routes.len()).sum()
    }
}

/// One session and what it must announce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerPlan {
    /// The config entry in use for this session.
    pub peer: Peer,
    /// The address the session binds, see [`source_address`].
    pub source_address: Option<IpAddr>,
    /// The routes the peer must hold; shared by every peer with the same attributes, so
    /// the daemon can hand it to the peer task's `watch` without copying.
    pub routes: Arc<DesiredRoutes>,
    /// How this peer's LoadBalancer routes are built (`routes::lb`): the same next hop
    /// rule as its pod CIDRs; no next hop in cluster mode.
    pub lb: LbProfile,
}

/// Two or more nodes claim the same address space. Ordered by prefix, then node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Conflict {
    /// Several nodes list the same prefix: `owner` (the name that sorts first) announces
    /// it, `others` (sorted) do not.
    SamePrefix {
        prefix: IpNet,
        owner: Arc<str>,
        others: Vec<Arc<str>>,
    },
    /// `covering` (of `covering_node`) contains `covered` (of another node). Both are
    /// announced; longest-prefix match sends `covered` to `covered_node`.
    Overlap {
        covering: IpNet,
        covering_node: Arc<str>,
        covered: IpNet,
        covered_node: Arc<str>,
    },
}

impl Conflict {
    /// Whether `node` is one of the parties.
    pub fn involves(&self, node: &str) -> bool {
        match self {
            Conflict::SamePrefix { owner, others, .. } => {
                &**owner == node || others.iter().any(|o| &**o == node)
            }
            Conflict::Overlap {
                covering_node,
                covered_node,
                ..
            } => &**covering_node == node || &**covered_node == node,
        }
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::SamePrefix {
                prefix,
                owner,
                others,
            } => {
                let others: Vec<&str> = others.iter().map(|o| &**o).collect();
                write!(
                    f,
                    "{prefix} is listed by nodes {owner}, {}: only {owner} announces it \
                     (the name that sorts first)",
                    others.join(", ")
                )
            }
            Conflict::Overlap {
                covering,
                covering_node,
                covered,
                covered_node,
            } => write!(
                f,
                "{covering} of node {covering_node} covers {covered} of node {covered_node}: \
                 both are announced, the more specific prefix wins its own space"
            ),
        }
    }
}

/// A prefix its owner cannot announce.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Unannounceable {
    pub node: Arc<str>,
    pub prefix: IpNet,
    pub reason: UnannounceableReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnannounceableReason {
    /// Cluster mode needs the node's InternalIP of the prefix's family as next hop
    /// (RFC 4271 section 5.1.3; RFC 4760 section 3 for IPv6).
    NoInternalIp { family: Family },
    /// Local mode: this peer has no next hop for the prefix's family
    /// ([`NextHopRule::Unavailable`]).
    NoNextHop { peer: PeerKey, why: NoNextHop },
}

impl UnannounceableReason {
    /// A bounded name, fit for a metric label.
    pub fn as_str(&self) -> &'static str {
        match self {
            UnannounceableReason::NoInternalIp { .. } => "no_internal_ip",
            UnannounceableReason::NoNextHop { .. } => "no_next_hop",
        }
    }
}

impl fmt::Display for Unannounceable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            UnannounceableReason::NoInternalIp { family } => write!(
                f,
                "{} of node {} is not announced: the node has no {family} InternalIP for \
                 the next hop",
                self.prefix, self.node
            ),
            UnannounceableReason::NoNextHop { peer, why } => write!(
                f,
                "{} of node {} is not announced to {peer}: {why}",
                self.prefix, self.node
            ),
        }
    }
}

/// The address a session with `peer` binds: the peer's `source-address`, else the
/// `--source-address` override when it is of the peer's address family (a socket can
/// bind only an address of its own family). `None`: the kernel chooses.
pub fn source_address(peer: &Peer, overrides: &Overrides) -> Option<IpAddr> {
    peer.source_address.or(overrides
        .source_address
        .filter(|a| a.is_ipv4() == peer.address.is_ipv4()))
}

/// Plans the sessions and routes of the speaker on `local`. Pure and deterministic:
/// equal inputs give equal plans, whatever order the view was built in.
pub fn plan(
    view: &NodeView,
    config: &Config,
    local: &LocalNode,
    mode: AnnounceMode,
    overrides: &Overrides,
) -> Plan {
    plan_reusing(view, config, local, mode, overrides, None)
}

/// [`plan`], taking each route's attributes from `previous` (the last plan) where they
/// are equal. The result equals `plan`'s; only the allocations differ: in cluster mode
/// every node has attributes of its own (its next hop), so a plan from scratch makes
/// one `Arc<RouteAttrs>` per node and frees the last plan's, while one event changes a
/// node or two. Reused, they also stay the very `Arc`s the peer tasks hold, which their
/// comparisons take as equal at once.
pub fn plan_reusing(
    view: &NodeView,
    config: &Config,
    local: &LocalNode,
    mode: AnnounceMode,
    overrides: &Overrides,
    previous: Option<&Plan>,
) -> Plan {
    let owned = Ownership::of(view);
    let local_entry = view.nodes.get(&*local.name);
    let mut plan = Plan {
        node: Arc::clone(&local.name),
        mode,
        node_present: local_entry.is_some(),
        peers: BTreeMap::new(),
        unselected: Vec::new(),
        peer_conflicts: Vec::new(),
        conflicts: owned.conflicts,
        unannounceable: Vec::new(),
        pools: Vec::new(),
        announce_pod_cidrs: config.speaker.announce_pod_cidrs,
    };
    let routable = match mode {
        AnnounceMode::Local => {
            plan.conflicts.retain(|c| c.involves(&local.name));
            Routable::Local(
                owned
                    .claims
                    .iter()
                    .filter(|c| **c.name == *local.name)
                    .map(|c| (c.prefix, c.node.pool_of(&c.prefix)))
                    .collect(),
            )
        }
        AnnounceMode::Cluster => {
            // Next hops get dense ids once here, so that building each route set is
            // indexing, not hashing.
            let mut ids: HashMap<IpAddr, usize> = HashMap::new();
            let mut next_hops = Vec::new();
            let mut routes = Vec::with_capacity(owned.claims.len());
            for c in &owned.claims {
                match internal_ip(c.node, c.prefix) {
                    Some(ip) => {
                        let id = *ids.entry(ip).or_insert_with(|| {
                            next_hops.push(ip);
                            next_hops.len() - 1
                        });
                        routes.push((c.prefix, c.name, id, c.node.pool_of(&c.prefix)));
                    }
                    None => plan.unannounceable.push(Unannounceable {
                        node: Arc::clone(c.name),
                        prefix: c.prefix,
                        reason: UnannounceableReason::NoInternalIp {
                            family: family(c.prefix),
                        },
                    }),
                }
            }
            Routable::Cluster { next_hops, routes }
        }
    };
    let routable = if plan.announce_pod_cidrs {
        routable
    } else {
        // Nothing is announced, so nothing is unannounceable either.
        plan.unannounceable.clear();
        Routable::Local(Vec::new())
    };
    let Some(entry) = local_entry else {
        return plan;
    };

    let selected = config.peers_for_node(&entry.labels);
    plan.peer_conflicts = selected.conflicts;
    plan.unselected = config
        .peers
        .iter()
        .filter(|p| !p.selects(&entry.labels))
        .map(|p| p.index)
        .collect();
    let addresses = NodeAddresses::of(Some(entry), overrides.source_address);
    let mut shared: HashMap<Profile<'_>, Arc<DesiredRoutes>> = HashMap::new();
    for (key, peer) in selected.peers {
        let source = source_address(peer, overrides);
        let selection = Selection::of(peer, view.ipam);
        // In cluster mode every next hop is a node's InternalIP.
        let next_hops = (mode == AnnounceMode::Local).then(|| {
            [Family::Ipv4, Family::Ipv6].map(|f| next_hop::rule(peer, f, source, &addresses))
        });
        if let (Some(rules), Routable::Local(prefixes)) = (&next_hops, &routable) {
            for (p, pool) in prefixes {
                let family = next_hop::family_of(p);
                // A pool this peer does not take is not announced to it at all.
                if selection.takes(*pool) && rules[family as usize] == NextHopRule::Unavailable {
                    plan.unannounceable.push(Unannounceable {
                        node: Arc::clone(&local.name),
                        prefix: *p,
                        reason: UnannounceableReason::NoNextHop {
                            peer: key,
                            why: NoNextHop {
                                family,
                                index: peer.index,
                            },
                        },
                    });
                }
            }
        }
        let next_hops = next_hops.map(|r| r.map(NextHopRule::next_hop));
        let lb = LbProfile::new(peer, next_hops.clone());
        let profile = Profile {
            template: attrs_template(peer),
            next_hops,
            pools: selection,
        };
        let routes = match shared.get(&profile) {
            Some(routes) => Arc::clone(routes),
            None => {
                // The first peer of a profile plans the routes every peer of it shares:
                // reuse from a previous peer with the same attributes (its own, else
                // any other, such as the one a new or edited peer now shares with), so
                // that the sharers keep their `Arc`s too; else its own old routes.
                let reuse = previous
                    .and_then(|p| {
                        let own = p.peers.get(&key);
                        own.filter(|old| attrs_template(&old.peer) == profile.template)
                            .or_else(|| {
                                p.peers
                                    .values()
                                    .find(|old| attrs_template(&old.peer) == profile.template)
                            })
                            .or(own)
                    })
                    .map(|p| &*p.routes);
                let routes = Arc::new(routable.routes(&profile, &local.name, reuse));
                shared.insert(profile, Arc::clone(&routes));
                routes
            }
        };
        plan.peers.insert(
            key,
            PeerPlan {
                peer: peer.clone(),
                source_address: source,
                routes,
                lb,
            },
        );
    }
    plan.unannounceable
        .sort_by(|a, b| (a.prefix, &a.node).cmp(&(b.prefix, &b.node)));
    let nodes = view
        .nodes
        .values()
        .filter(|n| mode == AnnounceMode::Cluster || n.name == local.name);
    let found = pools::findings(
        plan.peers.iter().map(|(key, p)| (*key, &p.peer)),
        nodes,
        view.ipam,
    );
    plan.pools = found;
    plan
}

/// The peers whose `next-hop-v4`/`next-hop-v6` the plan does not use: in cluster mode
/// each route's next hop is its own node's InternalIP. By index in the config.
pub fn unused_next_hop_fields(plan: &Plan) -> Vec<usize> {
    if plan.mode != AnnounceMode::Cluster {
        return Vec::new();
    }
    plan.peers
        .values()
        .filter(|p| p.peer.next_hop_v4.is_some() || p.peer.next_hop_v6.is_some())
        .map(|p| p.peer.index)
        .collect()
}

/// What decides a peer's routes: its attributes (next hop left as `SessionLocal`) and,
/// in local mode, the next hop of each family (`None`: not announced), indexed by
/// `Family as usize`; and the pools it announces (`pod-cidr-pools`, multi-pool IPAM).
#[derive(PartialEq, Eq, Hash)]
struct Profile<'c> {
    template: RouteAttrs,
    next_hops: Option<[Option<NextHop>; 2]>,
    /// `pod-cidr-pools`, when it applies (multi-pool IPAM).
    pools: Selection<'c>,
}

impl Profile<'_> {
    /// Whether a prefix of `pool` is announced, and the attributes it carries
    /// (`base` with the pool's communities added).
    fn pool_attrs(&self, pool: Option<&str>, base: &Arc<RouteAttrs>) -> Option<Arc<RouteAttrs>> {
        let Some(pools) = self.pools.0 else {
            return Some(Arc::clone(base));
        };
        let options = pools.get(pool?)?;
        if options.communities.is_empty() && options.large_communities.is_empty() {
            return Some(Arc::clone(base));
        }
        let mut attrs = RouteAttrs::clone(base);
        attrs.communities = attrs::sorted(
            (attrs.communities.iter().copied())
                .chain(options.communities.iter().map(|c| c.0))
                .collect(),
        );
        attrs.large_communities = attrs::sorted(
            (attrs.large_communities.iter().copied())
                .chain(options.large_communities.iter().copied())
                .collect(),
        );
        if attrs == **base {
            return Some(Arc::clone(base));
        }
        Some(Arc::new(attrs))
    }
}

/// Attributes per (pool, base attributes), so routes of one pool and next hop share
/// one `Arc` when a peer has `pod-cidr-pools`.
#[derive(Default)]
struct PoolAttrs<'v> {
    cache: HashMap<(Option<&'v str>, usize), Option<Arc<RouteAttrs>>>,
}

impl<'v> PoolAttrs<'v> {
    fn get(
        &mut self,
        profile: &Profile<'_>,
        pool: Option<&'v str>,
        base_id: usize,
        base: &Arc<RouteAttrs>,
    ) -> Option<Arc<RouteAttrs>> {
        if profile.pools.0.is_none() {
            return Some(Arc::clone(base));
        }
        self.cache
            .entry((pool, base_id))
            .or_insert_with(|| profile.pool_attrs(pool, base))
            .clone()
    }
}

/// The attributes of every pod CIDR route to `peer`, next hop aside (the template of
/// `routes::attrs`, with the peer's `pod-cidr-*` values).
fn attrs_template(peer: &Peer) -> RouteAttrs {
    PeerTemplate::of(peer).attrs(
        NextHop::SessionLocal,
        peer.pod_cidr_local_pref,
        peer.pod_cidr_communities.iter().map(|c| c.0).collect(),
        peer.pod_cidr_large_communities.clone(),
    )
}

/// The owned prefixes in a form ready to turn into routes for any profile, each with
/// its pool (multi-pool IPAM).
enum Routable<'v> {
    /// The local node's owned prefixes, sorted.
    Local(Vec<(IpNet, Option<&'v str>)>),
    /// Every owned prefix with the index of its next hop in `next_hops`, sorted by
    /// prefix.
    Cluster {
        next_hops: Vec<IpAddr>,
        routes: Vec<(IpNet, &'v Arc<str>, usize, Option<&'v str>)>,
    },
}

impl<'v> Routable<'v> {
    /// The routes of one profile; in cluster mode, attributes equal to those of the same
    /// prefix in `reuse` are that `Arc` (see [`plan_reusing`]).
    fn routes(
        &self,
        profile: &Profile<'_>,
        local: &Arc<str>,
        reuse: Option<&DesiredRoutes>,
    ) -> DesiredRoutes {
        let mut pooled = PoolAttrs::<'v>::default();
        let with_next_hop = |next_hop| {
            Arc::new(RouteAttrs {
                next_hop,
                ..profile.template.clone()
            })
        };
        match self {
            Routable::Local(prefixes) => {
                let attrs: Vec<Option<Arc<RouteAttrs>>> = profile
                    .next_hops
                    .iter()
                    .flatten()
                    .map(|nh| nh.clone().map(with_next_hop))
                    .collect();
                prefixes
                    .iter()
                    .filter_map(|(p, pool)| {
                        let family = next_hop::family_of(p) as usize;
                        let attrs = attrs.get(family)?.as_ref()?;
                        Some((
                            *p,
                            PlannedRoute {
                                attrs: pooled.get(profile, *pool, family, attrs)?,
                                node: Arc::clone(local),
                            },
                        ))
                    })
                    .collect()
            }
            Routable::Cluster { next_hops, routes } => {
                // One base per next hop: the previous plan's when one of its prefixes
                // had it (a node's new prefix takes its other prefixes' `Arc`), else a
                // new one when a route first needs it.
                let mut attrs: Vec<Option<Arc<RouteAttrs>>> = vec![None; next_hops.len()];
                if let Some(reuse) = reuse {
                    for (prefix, _, id, _) in routes {
                        let (Some(slot), Some(ip)) = (attrs.get_mut(*id), next_hops.get(*id))
                        else {
                            continue;
                        };
                        if slot.is_some() {
                            continue;
                        }
                        *slot = reuse
                            .get(prefix)
                            .map(|r| &r.attrs)
                            .filter(|a| a.next_hop == NextHop::Address(*ip))
                            .filter(|a| same_but_next_hop(a, &profile.template))
                            .cloned();
                    }
                }
                routes
                    .iter()
                    .filter_map(|(prefix, node, id, pool)| {
                        let next_hop = NextHop::Address(*next_hops.get(*id)?);
                        let base = attrs
                            .get_mut(*id)?
                            .get_or_insert_with(|| with_next_hop(next_hop));
                        Some((
                            *prefix,
                            PlannedRoute {
                                attrs: pooled.get(profile, *pool, *id, base)?,
                                node: Arc::clone(node),
                            },
                        ))
                    })
                    .collect()
            }
        }
    }
}

/// Whether `a` is `template` with some next hop (so that `a` with the template's next
/// hop replaced is `template`), without building that copy.
fn same_but_next_hop(a: &RouteAttrs, template: &RouteAttrs) -> bool {
    // Every field named, so that a field added to `RouteAttrs` is compared here too.
    let RouteAttrs {
        origin,
        as_path,
        next_hop: _,
        med,
        local_pref,
        communities,
        large_communities,
    } = a;
    *origin == template.origin
        && *as_path == template.as_path
        && *med == template.med
        && *local_pref == template.local_pref
        && *communities == template.communities
        && *large_communities == template.large_communities
}

/// One node's claim on a prefix.
struct Claim<'v> {
    /// Host bits cleared, so `10.0.0.1/24` and `10.0.0.0/24` are one claim.
    prefix: IpNet,
    name: &'v Arc<str>,
    node: &'v NodeEntry,
}

/// Who owns which prefix, and the conflicts found deciding it.
struct Ownership<'v> {
    /// One claim per prefix, the owner's, sorted by prefix.
    claims: Vec<Claim<'v>>,
    /// Sorted.
    conflicts: Vec<Conflict>,
}

impl<'v> Ownership<'v> {
    fn of(view: &'v NodeView) -> Ownership<'v> {
        let mut all: Vec<Claim<'v>> = view
            .nodes
            .iter()
            .flat_map(|(name, node)| {
                node.prefixes.iter().map(move |p| Claim {
                    prefix: p.trunc(),
                    name,
                    node,
                })
            })
            .collect();
        all.sort_unstable_by(|a, b| a.prefix.cmp(&b.prefix).then_with(|| a.name.cmp(b.name)));
        all.dedup_by(|later, first| later.prefix == first.prefix && later.name == first.name);

        let mut conflicts = Vec::new();
        let mut claims: Vec<Claim<'v>> = Vec::with_capacity(all.len());
        for claim in all {
            match claims.last() {
                Some(owner) if owner.prefix == claim.prefix => match conflicts.last_mut() {
                    Some(Conflict::SamePrefix { prefix, others, .. })
                        if *prefix == claim.prefix =>
                    {
                        others.push(Arc::clone(claim.name))
                    }
                    _ => conflicts.push(Conflict::SamePrefix {
                        prefix: claim.prefix,
                        owner: Arc::clone(owner.name),
                        others: vec![Arc::clone(claim.name)],
                    }),
                },
                _ => claims.push(claim),
            }
        }
        conflicts.extend(overlaps(view, &conflicts));
        conflicts.sort_unstable_by(|a, b| conflict_order(a).cmp(&conflict_order(b)));
        Ownership { claims, conflicts }
    }
}

/// Conflicts in prefix order (the covered prefix for an overlap, so an overlap is listed
/// where the more specific route is), then by kind and nodes.
fn conflict_order(c: &Conflict) -> (IpNet, &Conflict) {
    match c {
        Conflict::SamePrefix { prefix, .. } => (*prefix, c),
        Conflict::Overlap { covered, .. } => (*covered, c),
    }
}

/// Every pair of owned prefixes of different nodes where one contains the other: the
/// view's overlaps (worked out once, by `node_view`) between announced prefixes that
/// differ, each announced by its owner (`same` lists the prefixes with other claimants).
fn overlaps(view: &NodeView, same: &[Conflict]) -> Vec<Conflict> {
    let not_owners: HashSet<(IpNet, &str)> = same
        .iter()
        .flat_map(|c| match c {
            Conflict::SamePrefix { prefix, others, .. } => {
                others.iter().map(|o| (*prefix, &**o)).collect::<Vec<_>>()
            }
            Conflict::Overlap { .. } => Vec::new(),
        })
        .collect();
    let not_owner = |node: &str, prefix: IpNet| not_owners.contains(&(prefix, node));
    view.announced_overlaps()
        .filter(|o| o.prefix != o.other_prefix)
        .filter(|o| !not_owner(&o.node, o.prefix) && !not_owner(&o.other_node, o.other_prefix))
        .map(|o| Conflict::Overlap {
            covering: o.prefix,
            covering_node: Arc::clone(&o.node),
            covered: o.other_prefix,
            covered_node: Arc::clone(&o.other_node),
        })
        .collect()
}

fn internal_ip(node: &NodeEntry, prefix: IpNet) -> Option<IpAddr> {
    match prefix {
        IpNet::V4(_) => node.internal_ipv4.map(IpAddr::V4),
        IpNet::V6(_) => node.internal_ipv6.map(IpAddr::V6),
    }
}

fn family(prefix: IpNet) -> Family {
    match prefix {
        IpNet::V4(_) => Family::Ipv4,
        IpNet::V6(_) => Family::Ipv6,
    }
}

/// What changed in a plan's findings since the last plan, so the daemon logs and
/// counts each conflict once per change instead of once per event.
#[derive(Debug, Default)]
pub struct FindingTracker {
    conflicts: HashSet<Conflict>,
    unannounceable: HashSet<Unannounceable>,
}

/// One change in a plan's findings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    Conflict(Conflict),
    ConflictResolved(Conflict),
    Unannounceable(Unannounceable),
    /// The prefix is announceable again, or gone.
    UnannounceableResolved(Unannounceable),
}

impl FindingTracker {
    pub fn new() -> FindingTracker {
        FindingTracker::default()
    }

    /// The findings `plan` adds or resolves, new ones first, each in plan order.
    pub fn observe(&mut self, plan: &Plan) -> Vec<Finding> {
        let conflicts: HashSet<Conflict> = plan.conflicts.iter().cloned().collect();
        let unannounceable: HashSet<Unannounceable> = plan.unannounceable.iter().cloned().collect();
        let mut out: Vec<Finding> = plan
            .conflicts
            .iter()
            .filter(|c| !self.conflicts.contains(*c))
            .map(|c| Finding::Conflict(c.clone()))
            .collect();
        out.extend(
            plan.unannounceable
                .iter()
                .filter(|u| !self.unannounceable.contains(*u))
                .map(|u| Finding::Unannounceable(u.clone())),
        );
        let mut resolved: Vec<Conflict> = self
            .conflicts
            .iter()
            .filter(|c| !conflicts.contains(*c))
            .cloned()
            .collect();
        resolved.sort_unstable_by(|a, b| conflict_order(a).cmp(&conflict_order(b)));
        out.extend(resolved.into_iter().map(Finding::ConflictResolved));
        let mut gone: Vec<Unannounceable> = self
            .unannounceable
            .iter()
            .filter(|u| !unannounceable.contains(*u))
            .cloned()
            .collect();
        gone.sort_unstable_by(|a, b| (a.prefix, &a.node).cmp(&(b.prefix, &b.node)));
        out.extend(gone.into_iter().map(Finding::UnannounceableResolved));
        self.conflicts = conflicts;
        self.unannounceable = unannounceable;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::attrs::DEFAULT_LOCAL_PREF;
    use crate::sources::model::{CidrSource, IpamMode};
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    struct N {
        name: &'static str,
        labels: &'static [(&'static str, &'static str)],
        v4: Option<&'static str>,
        v6: Option<&'static str>,
        prefixes: &'static [&'static str],
    }

    fn view(nodes: &[N]) -> NodeView {
        NodeView::new(
            IpamMode::Kubernetes,
            nodes
                .iter()
                .map(|n| {
                    let name: Arc<str> = Arc::from(n.name);
                    let entry = NodeEntry {
                        labels: Arc::new(
                            n.labels
                                .iter()
                                .map(|(k, v)| (k.to_string(), v.to_string()))
                                .collect(),
                        ),
                        internal_ipv4: n.v4.map(|a| a.parse::<Ipv4Addr>().unwrap()),
                        internal_ipv6: n.v6.map(|a| a.parse::<Ipv6Addr>().unwrap()),
                        node_cidrs: n.prefixes.iter().map(|p| net(p)).collect(),
                        node_source: Some(CidrSource::NodeSpec),
                        source: Some(CidrSource::NodeSpec),
                        prefixes: n.prefixes.iter().map(|p| net(p)).collect(),
                        ..NodeEntry::new(Arc::clone(&name))
                    };
                    (name, entry)
                })
                .collect(),
            Vec::new(),
        )
    }

    fn node(name: &'static str, prefixes: &'static [&'static str]) -> N {
        N {
            name,
            labels: &[],
            v4: None,
            v6: None,
            prefixes,
        }
    }

    fn config(yaml: &str) -> Config {
        crate::config::parse(yaml).unwrap()
    }

    fn key(s: &str) -> PeerKey {
        PeerKey {
            address: s.parse().unwrap(),
            port: 179,
        }
    }

    fn local(
        view: &NodeView,
        config: &Config,
        node: &str,
        mode: AnnounceMode,
        source: Option<&str>,
    ) -> Plan {
        plan(
            view,
            config,
            &LocalNode::new(node),
            mode,
            &Overrides {
                source_address: source.map(|s| s.parse().unwrap()),
            },
        )
    }

    fn prefixes(routes: &DesiredRoutes) -> Vec<String> {
        routes.keys().map(ToString::to_string).collect()
    }

    const TWO_PEERS: &str = "
peers:
  - peer-address: 10.5.0.1
    peer-asn: 65000
    my-asn: 65083
    pod-cidr-communities: [65083:200, 65083:100, 65083:200, large:1:2:3]
  - peer-address: 10.5.83.251
    peer-asn: 65083
    my-asn: 65083
    origin: igp
    node-selectors:
      - match-labels: {kubernetes/route: bgp-peer-83}
";

    #[test]
    fn ebgp_routes_carry_our_as_and_no_local_pref_ibgp_an_empty_path_and_local_pref_100() {
        let v = view(&[N {
            name: "a",
            labels: &[("kubernetes/route", "bgp-peer-83")],
            v4: None,
            v6: None,
            prefixes: &["10.0.1.0/24"],
        }]);
        let p = local(&v, &config(TWO_PEERS), "a", AnnounceMode::Local, None);
        let ebgp = &p.peers[&key("10.5.0.1")].routes[&net("10.0.1.0/24")];
        assert_eq!(
            *ebgp.attrs,
            RouteAttrs {
                origin: crate::bgp::wire::Origin::Incomplete,
                as_path: vec![65083],
                next_hop: NextHop::SessionLocal,
                med: None,
                local_pref: None,
                communities: vec![(65083 << 16) | 100, (65083 << 16) | 200],
                large_communities: vec![crate::bgp::wire::LargeCommunity {
                    global_admin: 1,
                    local_data1: 2,
                    local_data2: 3
                }],
            }
        );
        assert_eq!(&*ebgp.node, "a");
        let ibgp = &p.peers[&key("10.5.83.251")].routes[&net("10.0.1.0/24")];
        assert_eq!(ibgp.attrs.as_path, Vec::<u32>::new());
        assert_eq!(ibgp.attrs.local_pref, Some(DEFAULT_LOCAL_PREF));
        assert_eq!(ibgp.attrs.origin, crate::bgp::wire::Origin::Igp);
        assert!(ibgp.attrs.communities.is_empty());
    }

    #[test]
    fn configured_local_pref_replaces_the_default_on_ibgp() {
        let c = config(
            "
speaker: {pod-cidr-local-pref: 250}
peers:
  - {peer-address: 10.0.0.1, peer-asn: 65001, my-asn: 65001}
  - {peer-address: 10.0.0.2, peer-asn: 65001, my-asn: 65001, pod-cidr-local-pref: 0}
",
        );
        let v = view(&[node("a", &["10.0.1.0/24"])]);
        let p = local(&v, &c, "a", AnnounceMode::Local, None);
        let lp = |k| {
            p.peers[&key(k)].routes[&net("10.0.1.0/24")]
                .attrs
                .local_pref
        };
        assert_eq!(lp("10.0.0.1"), Some(250));
        assert_eq!(lp("10.0.0.2"), Some(0));
    }

    #[test]
    fn peers_are_selected_by_the_local_nodes_labels() {
        let v = view(&[
            N {
                name: "in-rack",
                labels: &[("kubernetes/route", "bgp-peer-83")],
                v4: None,
                v6: None,
                prefixes: &["10.0.1.0/24"],
            },
            node("other", &["10.0.2.0/24"]),
        ]);
        let c = config(TWO_PEERS);
        let p = local(&v, &c, "in-rack", AnnounceMode::Local, None);
        assert_eq!(
            p.peers.keys().copied().collect::<Vec<_>>(),
            vec![key("10.5.0.1"), key("10.5.83.251")]
        );
        assert!(p.unselected.is_empty());
        let p = local(&v, &c, "other", AnnounceMode::Local, None);
        assert_eq!(
            p.peers.keys().copied().collect::<Vec<_>>(),
            vec![key("10.5.0.1")]
        );
        assert_eq!(p.unselected, vec![1]);
        assert_eq!(prefixes(&p.peers[&key("10.5.0.1")].routes), ["10.0.2.0/24"]);
    }

    #[test]
    fn a_node_missing_from_the_view_selects_no_peer() {
        // A DoesNotExist selector would match a node whose labels are unknown.
        let c = config(
            "
peers:
  - peer-address: 10.0.0.1
    peer-asn: 65000
    my-asn: 65083
    node-selectors:
      - match-expressions:
          - {key: node-role.kubernetes.io/control-plane, operator: DoesNotExist}
",
        );
        let v = view(&[node("a", &["10.0.1.0/24"])]);
        for mode in [AnnounceMode::Local, AnnounceMode::Cluster] {
            let p = local(&v, &c, "ghost", mode, None);
            assert!(!p.node_present);
            assert!(p.peers.is_empty(), "{mode}");
            assert!(p.unselected.is_empty());
        }
        assert_eq!(local(&v, &c, "a", AnnounceMode::Local, None).peers.len(), 1);
    }

    #[test]
    fn local_next_hop_is_the_bound_source_address_of_its_family_else_the_session_address() {
        let c = config(
            "
peers:
  - {peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65083, source-address: 10.0.0.9}
  - {peer-address: 10.0.0.2, peer-asn: 65000, my-asn: 65083}
  - {peer-address: 'fd00::2', peer-asn: 65000, my-asn: 65083}
",
        );
        let v = view(&[node("a", &["10.0.1.0/24", "fd00:1::/64"])]);
        let p = local(&v, &c, "a", AnnounceMode::Local, Some("192.168.1.5"));
        let hop = |k: &str, prefix: &str| {
            p.peers[&key(k)]
                .routes
                .get(&net(prefix))
                .map(|r| r.attrs.next_hop.clone())
        };
        let at = |s: &str| Some(NextHop::Address(s.parse().unwrap()));
        // The peer's own source-address wins over the override.
        assert_eq!(
            p.peers[&key("10.0.0.1")].source_address,
            Some("10.0.0.9".parse().unwrap())
        );
        assert_eq!(hop("10.0.0.1", "10.0.1.0/24"), at("10.0.0.9"));
        assert_eq!(hop("10.0.0.2", "10.0.1.0/24"), at("192.168.1.5"));
        // No IPv6 address for an IPv6 route on an IPv4 session: not planned, reported.
        assert_eq!(hop("10.0.0.1", "fd00:1::/64"), None);
        assert_eq!(hop("10.0.0.2", "fd00:1::/64"), None);
        let missing: Vec<(IpNet, PeerKey)> = p
            .unannounceable
            .iter()
            .map(|u| match u.reason {
                UnannounceableReason::NoNextHop { peer, why } => {
                    assert_eq!(why.family, Family::Ipv6);
                    (u.prefix, peer)
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            missing,
            [
                (net("fd00:1::/64"), key("10.0.0.1")),
                (net("fd00:1::/64"), key("10.0.0.2"))
            ]
        );
        // An IPv4 override cannot be bound by an IPv6 session, but it is the node's IPv4
        // address for the IPv4 routes there.
        assert_eq!(p.peers[&key("fd00::2")].source_address, None);
        assert_eq!(hop("fd00::2", "10.0.1.0/24"), at("192.168.1.5"));
        assert_eq!(hop("fd00::2", "fd00:1::/64"), Some(NextHop::SessionLocal));
        let p = local(&v, &c, "a", AnnounceMode::Local, None);
        assert_eq!(
            p.peers[&key("10.0.0.2")].routes[&net("10.0.1.0/24")]
                .attrs
                .next_hop,
            NextHop::SessionLocal
        );
        // Without any IPv4 address, IPv4 routes on the IPv6 session use its address with
        // RFC 8950.
        assert_eq!(
            p.peers[&key("fd00::2")].routes[&net("10.0.1.0/24")]
                .attrs
                .next_hop,
            NextHop::SessionLocal
        );
    }

    #[test]
    fn the_node_address_or_next_hop_v6_carries_ipv6_routes_over_an_ipv4_session() {
        let c = config(
            "
peers:
  - {peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65083}
  - {peer-address: 10.0.0.2, peer-asn: 65000, my-asn: 65083, next-hop-v6: 'fd00:99::1'}
",
        );
        let with_v6 = view(&[N {
            name: "a",
            labels: &[],
            v4: Some("192.168.0.1"),
            v6: Some("fd00:192::1"),
            prefixes: &["10.0.1.0/24", "fd00:1::/64"],
        }]);
        let p = local(&with_v6, &c, "a", AnnounceMode::Local, None);
        let hop = |p: &Plan, k: &str| {
            p.peers[&key(k)]
                .routes
                .get(&net("fd00:1::/64"))
                .map(|r| r.attrs.next_hop.clone())
        };
        let at = |s: &str| Some(NextHop::Address(s.parse().unwrap()));
        assert_eq!(hop(&p, "10.0.0.1"), at("fd00:192::1"));
        assert_eq!(hop(&p, "10.0.0.2"), at("fd00:99::1"));
        assert!(p.unannounceable.is_empty());
        let without = view(&[N {
            name: "a",
            labels: &[],
            v4: Some("192.168.0.1"),
            v6: None,
            prefixes: &["10.0.1.0/24", "fd00:1::/64"],
        }]);
        let p = local(&without, &c, "a", AnnounceMode::Local, None);
        assert_eq!(hop(&p, "10.0.0.1"), None);
        assert_eq!(hop(&p, "10.0.0.2"), at("fd00:99::1"));
        assert_eq!(p.unannounceable.len(), 1);
        assert_eq!(
            p.unannounceable[0].to_string(),
            "fd00:1::/64 of node a is not announced to 10.0.0.1:179: an IPv6 route on an IPv4 \
             session needs an IPv6 next hop: the node has no IPv6 address (InternalIP or \
             --source-address) and peers[0] sets no next-hop-v6"
        );
        // Cluster mode ignores the field, and says so.
        let p = local(&without, &c, "a", AnnounceMode::Cluster, None);
        assert_eq!(unused_next_hop_fields(&p), vec![1]);
        assert_eq!(hop(&p, "10.0.0.2"), None);
    }

    #[test]
    fn cluster_mode_announces_every_node_with_its_internal_ip_and_reports_a_missing_one() {
        let c = config("peers: [{peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65083}]");
        let v = view(&[
            N {
                name: "a",
                labels: &[],
                v4: Some("192.168.0.1"),
                v6: Some("fd00:192::1"),
                prefixes: &["10.0.1.0/24", "fd00:1::/64"],
            },
            N {
                name: "b",
                labels: &[],
                v4: Some("192.168.0.2"),
                v6: None,
                prefixes: &["10.0.2.0/24", "fd00:2::/64"],
            },
        ]);
        let p = local(&v, &c, "a", AnnounceMode::Cluster, Some("192.168.0.1"));
        let routes = &p.peers[&key("10.0.0.1")].routes;
        let got: Vec<(String, String, NextHop)> = routes
            .iter()
            .map(|(p, r)| (p.to_string(), r.node.to_string(), r.attrs.next_hop.clone()))
            .collect();
        let at = |s: &str| NextHop::Address(s.parse().unwrap());
        assert_eq!(
            got,
            vec![
                ("10.0.1.0/24".into(), "a".into(), at("192.168.0.1")),
                ("10.0.2.0/24".into(), "b".into(), at("192.168.0.2")),
                ("fd00:1::/64".into(), "a".into(), at("fd00:192::1")),
            ]
        );
        assert_eq!(
            p.unannounceable,
            vec![Unannounceable {
                node: Arc::from("b"),
                prefix: net("fd00:2::/64"),
                reason: UnannounceableReason::NoInternalIp {
                    family: Family::Ipv6
                },
            }]
        );
        // Local mode uses the session's address for its own family, and needs an IPv6
        // address of the node for IPv6 routes on this IPv4 session.
        let p = local(&v, &c, "b", AnnounceMode::Local, None);
        assert_eq!(prefixes(&p.peers[&key("10.0.0.1")].routes), ["10.0.2.0/24"]);
        assert_eq!(
            p.unannounceable
                .iter()
                .map(|u| (u.prefix, u.reason.as_str()))
                .collect::<Vec<_>>(),
            [(net("fd00:2::/64"), "no_next_hop")]
        );
        let p = local(&v, &c, "a", AnnounceMode::Local, None);
        assert_eq!(
            prefixes(&p.peers[&key("10.0.0.1")].routes),
            ["10.0.1.0/24", "fd00:1::/64"]
        );
        assert!(p.unannounceable.is_empty());
    }

    #[test]
    fn the_same_prefix_on_several_nodes_belongs_to_the_name_that_sorts_first() {
        let c = config("peers: [{peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65083}]");
        // Host bits do not make a different prefix.
        let v = view(&[
            node("b", &["10.0.1.0/24", "10.0.9.0/24"]),
            node("a", &["10.0.1.7/24"]),
            node("c", &["10.0.1.0/24"]),
        ]);
        let want = Conflict::SamePrefix {
            prefix: net("10.0.1.0/24"),
            owner: Arc::from("a"),
            others: vec![Arc::from("b"), Arc::from("c")],
        };
        let a = local(&v, &c, "a", AnnounceMode::Local, None);
        assert_eq!(prefixes(&a.peers[&key("10.0.0.1")].routes), ["10.0.1.0/24"]);
        assert_eq!(a.conflicts, vec![want.clone()]);
        let b = local(&v, &c, "b", AnnounceMode::Local, None);
        assert_eq!(prefixes(&b.peers[&key("10.0.0.1")].routes), ["10.0.9.0/24"]);
        assert_eq!(b.conflicts, vec![want.clone()]);
        let cl = local(&v, &c, "b", AnnounceMode::Cluster, None);
        assert!(cl.peers[&key("10.0.0.1")].routes.is_empty());
        let v = view(&[
            N {
                name: "b",
                labels: &[],
                v4: Some("192.168.0.2"),
                v6: None,
                prefixes: &["10.0.1.0/24"],
            },
            N {
                name: "a",
                labels: &[],
                v4: Some("192.168.0.1"),
                v6: None,
                prefixes: &["10.0.1.0/24"],
            },
        ]);
        let cl = local(&v, &c, "b", AnnounceMode::Cluster, None);
        let route = &cl.peers[&key("10.0.0.1")].routes[&net("10.0.1.0/24")];
        assert_eq!(&*route.node, "a");
        assert_eq!(
            route.attrs.next_hop,
            NextHop::Address("192.168.0.1".parse().unwrap())
        );
    }

    #[test]
    fn overlapping_prefixes_of_different_nodes_are_both_announced_and_reported() {
        let c = config("peers: [{peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65083}]");
        let v = view(&[
            N {
                name: "wide",
                labels: &[],
                v4: Some("192.168.0.1"),
                v6: None,
                prefixes: &["10.0.0.0/16"],
            },
            N {
                name: "narrow",
                labels: &[],
                v4: Some("192.168.0.2"),
                v6: None,
                prefixes: &["10.0.1.0/24", "10.0.1.0/25", "10.9.0.0/24"],
            },
            N {
                name: "bystander",
                labels: &[],
                v4: Some("192.168.0.3"),
                v6: None,
                prefixes: &["10.1.0.0/24"],
            },
        ]);
        let p = local(&v, &c, "bystander", AnnounceMode::Cluster, None);
        assert_eq!(
            prefixes(&p.peers[&key("10.0.0.1")].routes),
            [
                "10.0.0.0/16",
                "10.0.1.0/24",
                "10.0.1.0/25",
                "10.1.0.0/24",
                "10.9.0.0/24"
            ]
        );
        let overlap = |covered: &str| Conflict::Overlap {
            covering: net("10.0.0.0/16"),
            covering_node: Arc::from("wide"),
            covered: net(covered),
            covered_node: Arc::from("narrow"),
        };
        // The nesting inside one node (10.0.1.0/24 and /25 of narrow) is not a conflict.
        assert_eq!(
            p.conflicts,
            vec![overlap("10.0.1.0/24"), overlap("10.0.1.0/25")]
        );
        // Local mode reports only what involves the local node.
        let p = local(&v, &c, "bystander", AnnounceMode::Local, None);
        assert!(p.conflicts.is_empty());
        let p = local(&v, &c, "wide", AnnounceMode::Local, None);
        assert_eq!(p.conflicts.len(), 2);
        assert_eq!(prefixes(&p.peers[&key("10.0.0.1")].routes), ["10.0.0.0/16"]);
    }

    #[test]
    fn peers_with_equal_attributes_share_one_route_set_and_routes_share_attributes() {
        let c = config(
            "
peers:
  - {peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65083}
  - {peer-address: 10.0.0.2, peer-asn: 65001, my-asn: 65083}
  - {peer-address: 10.0.0.3, peer-asn: 65000, my-asn: 65083, pod-cidr-communities: ['1:1']}
",
        );
        let v = view(&[
            N {
                name: "a",
                labels: &[],
                v4: Some("192.168.0.1"),
                v6: None,
                prefixes: &["10.0.1.0/24", "10.0.3.0/24"],
            },
            N {
                name: "b",
                labels: &[],
                v4: Some("192.168.0.2"),
                v6: None,
                prefixes: &["10.0.2.0/24"],
            },
        ]);
        let p = local(&v, &c, "a", AnnounceMode::Cluster, None);
        let routes = |k| &p.peers[&key(k)].routes;
        assert!(Arc::ptr_eq(routes("10.0.0.1"), routes("10.0.0.2")));
        assert!(!Arc::ptr_eq(routes("10.0.0.1"), routes("10.0.0.3")));
        assert_eq!(
            routes("10.0.0.3")[&net("10.0.2.0/24")].attrs.communities,
            [(1 << 16) | 1]
        );
        let r = routes("10.0.0.1");
        let attrs = |p: &str| &r[&net(p)].attrs;
        assert!(Arc::ptr_eq(attrs("10.0.1.0/24"), attrs("10.0.3.0/24")));
        assert!(!Arc::ptr_eq(attrs("10.0.1.0/24"), attrs("10.0.2.0/24")));
        let r = &p.peers[&key("10.0.0.1")].routes;
        assert!(Arc::ptr_eq(
            &r[&net("10.0.1.0/24")].node,
            &v.nodes["a"].name
        ));
    }

    #[test]
    fn two_entries_for_one_router_use_the_first_and_report_the_clash() {
        let c = config(
            "
peers:
  - peer-address: 10.0.0.1
    peer-asn: 65000
    my-asn: 65083
    node-selectors: [{match-labels: {rack: a}}]
  - peer-address: 10.0.0.1
    peer-asn: 65001
    my-asn: 65083
",
        );
        let v = view(&[N {
            name: "a",
            labels: &[("rack", "a")],
            v4: None,
            v6: None,
            prefixes: &["10.0.1.0/24"],
        }]);
        let p = local(&v, &c, "a", AnnounceMode::Local, None);
        assert_eq!(p.peers[&key("10.0.0.1")].peer.peer_asn, 65000);
        assert_eq!(p.peer_conflicts.len(), 1);
        assert_eq!(p.peer_conflicts[0].indexes, vec![0, 1]);
    }

    #[test]
    fn announce_pod_cidrs_false_keeps_the_sessions_with_no_routes() {
        let c = config(
            "peers: [{peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65083}]\n\
             speaker: {announce-pod-cidrs: false}",
        );
        let v = view(&[node("a", &["10.0.1.0/24"]), node("b", &["10.0.2.0/24"])]);
        for mode in [AnnounceMode::Local, AnnounceMode::Cluster] {
            let p = local(&v, &c, "a", mode, None);
            assert!(!p.announce_pod_cidrs);
            assert!(p.peers[&key("10.0.0.1")].routes.is_empty(), "{mode:?}");
            assert_eq!(p.route_count(), 0);
        }
        let on = config("peers: [{peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65083}]");
        let p = local(&v, &on, "a", AnnounceMode::Local, None);
        assert!(p.announce_pod_cidrs, "announced by default");
        assert_eq!(p.route_count(), 1);
    }

    #[test]
    fn announce_mode_parses_and_prints_its_flag_values() {
        for (text, mode) in [
            ("local", AnnounceMode::Local),
            ("cluster", AnnounceMode::Cluster),
        ] {
            assert_eq!(text.parse::<AnnounceMode>().unwrap(), mode);
            assert_eq!(mode.to_string(), text);
        }
        let err = "all".parse::<AnnounceMode>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "--announce: \"all\" must be local or cluster"
        );
    }

    #[test]
    fn the_tracker_reports_each_finding_once_and_its_resolution() {
        let c = config("peers: [{peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65083}]");
        let both = view(&[
            N {
                name: "a",
                labels: &[],
                v4: Some("192.168.0.1"),
                v6: None,
                prefixes: &["10.0.1.0/24", "fd00::/64"],
            },
            node("b", &["10.0.1.0/24"]),
        ]);
        let only_a = view(&[N {
            name: "a",
            labels: &[],
            v4: Some("192.168.0.1"),
            v6: None,
            prefixes: &["10.0.1.0/24", "fd00::/64"],
        }]);
        let mut tracker = FindingTracker::new();
        let first = local(&both, &c, "a", AnnounceMode::Cluster, None);
        let found = tracker.observe(&first);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(matches!(
            &found[0],
            Finding::Conflict(Conflict::SamePrefix { .. })
        ));
        assert!(matches!(&found[1], Finding::Unannounceable(u) if u.prefix == net("fd00::/64")));
        assert!(tracker.observe(&first).is_empty());
        let second = local(&only_a, &c, "a", AnnounceMode::Cluster, None);
        let found = tracker.observe(&second);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(matches!(
            &found[0],
            Finding::ConflictResolved(Conflict::SamePrefix { .. })
        ));
    }

    /// A multi-pool view decided by the sources' own rule: node a holds CIDRs of the
    /// pools default and blue, node b of default only.
    fn multi_pool_view() -> NodeView {
        use crate::sources::model::{
            node_view, CiliumConfig, CiliumNodeFacts, ClusterState, IpamOverride, NodeFacts,
            PoolAllocation,
        };
        let mut state = ClusterState {
            cilium_config: Some(CiliumConfig {
                ipam: Some("multi-pool".into()),
                ..CiliumConfig::default()
            }),
            ..ClusterState::default()
        };
        for (name, ip, pools) in [
            (
                "a",
                "192.168.1.1",
                vec![
                    ("default", vec!["10.10.0.0/27", "fd00:10::/120"]),
                    ("blue", vec!["10.20.0.0/27"]),
                ],
            ),
            ("b", "192.168.1.2", vec![("default", vec!["10.10.0.32/27"])]),
        ] {
            state.nodes.insert(
                name.into(),
                NodeFacts {
                    internal_ipv4: Some(ip.parse().unwrap()),
                    node_cidrs: vec![net("10.244.0.0/24")],
                    ..NodeFacts::default()
                },
            );
            state.insert_cilium_node(
                name.into(),
                CiliumNodeFacts {
                    pod_cidrs: Vec::new(),
                    pools: pools
                        .into_iter()
                        .map(|(pool, cidrs)| PoolAllocation {
                            pool: pool.into(),
                            cidrs: cidrs.into_iter().map(net).collect(),
                        })
                        .collect(),
                },
            );
        }
        node_view(&state, IpamOverride::Auto).unwrap()
    }

    const POOL_PEERS: &str = "
bgp-communities:
  blue-tag: 65083:300
speaker:
  pod-cidr-communities: [65083:100]
peers:
  - peer-address: 10.5.0.1
    peer-asn: 65000
    my-asn: 65083
  - peer-address: 10.5.0.2
    peer-asn: 65000
    my-asn: 65083
    pod-cidr-pools:
      blue:
        communities: [blue-tag, large:65083:1:2]
  - peer-address: 10.5.0.3
    peer-asn: 65000
    my-asn: 65083
    pod-cidr-pools:
      default: {}
      blue:
        communities: [65083:100]
";

    #[test]
    fn multi_pool_every_pool_by_default_and_pod_cidr_pools_chooses_and_tags() {
        let v = multi_pool_view();
        let c = config(POOL_PEERS);
        let p = local(&v, &c, "a", AnnounceMode::Local, None);
        let all = &p.peers[&key("10.5.0.1")].routes;
        // The IPv6 CIDR of the default pool has no next hop: node a has no IPv6 address
        // and the sessions are IPv4 (routes::next_hop); it is reported, not planned.
        assert_eq!(prefixes(all), ["10.10.0.0/27", "10.20.0.0/27"]);
        assert!(p
            .unannounceable
            .iter()
            .all(|u| u.prefix.to_string() == "fd00:10::/120"));
        assert!(!p.unannounceable.is_empty());
        assert!(all.values().all(|r| r.attrs.communities == [0xfe3b_0064]));

        let blue = &p.peers[&key("10.5.0.2")].routes;
        assert_eq!(prefixes(blue), ["10.20.0.0/27"]);
        let attrs = &blue[&net("10.20.0.0/27")].attrs;
        assert_eq!(attrs.communities, [0xfe3b_0064, 0xfe3b_012c]);
        assert_eq!(attrs.large_communities.len(), 1);

        let both = &p.peers[&key("10.5.0.3")].routes;
        assert_eq!(prefixes(both), prefixes(all));
        // 65083:100 is already the peer's: listed once.
        assert!(both.values().all(|r| r.attrs.communities == [0xfe3b_0064]));
        // Equal attributes are shared, across pools too.
        assert!(Arc::ptr_eq(
            &both[&net("10.10.0.0/27")].attrs,
            &both[&net("10.20.0.0/27")].attrs
        ));

        // Cluster mode: each node's CIDRs by the same rule, with its own next hop.
        let p = local(&v, &c, "a", AnnounceMode::Cluster, None);
        assert_eq!(
            prefixes(&p.peers[&key("10.5.0.2")].routes),
            ["10.20.0.0/27"]
        );
        let both = &p.peers[&key("10.5.0.3")].routes;
        assert_eq!(
            prefixes(both),
            ["10.10.0.0/27", "10.10.0.32/27", "10.20.0.0/27"]
        );
        assert_eq!(
            both[&net("10.10.0.32/27")].attrs.next_hop,
            NextHop::Address("192.168.1.2".parse().unwrap())
        );
        assert_eq!(
            p.unannounceable
                .iter()
                .map(|u| u.prefix.to_string())
                .collect::<Vec<_>>(),
            ["fd00:10::/120"]
        );
    }

    #[test]
    fn pod_cidr_pools_does_not_apply_without_pools_and_the_plan_says_so() {
        let v = view(&[node("a", &["10.0.1.0/24"])]);
        let c = config(POOL_PEERS);
        let p = local(&v, &c, "a", AnnounceMode::Local, None);
        assert_eq!(prefixes(&p.peers[&key("10.5.0.2")].routes), ["10.0.1.0/24"]);
        let inactive: Vec<String> = p.pools.iter().map(ToString::to_string).collect();
        assert_eq!(
            inactive,
            [
                "pod-cidr-pools is set for peers 10.5.0.2:179, 10.5.0.3:179 but ipam kubernetes \
              has no pools: every pod CIDR is announced to them"
            ]
        );
        assert!(p
            .pools
            .iter()
            .all(|f| f.kind() == "pod-cidr-pools-inactive"));
        // In multi-pool mode, a pool a peer does not take is reported for it.
        let v = multi_pool_view();
        let p = local(&v, &c, "a", AnnounceMode::Local, None);
        let skipped: Vec<String> = p
            .pools
            .iter()
            .filter(|f| f.kind() == "pool-not-announced")
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            skipped,
            [
                "[10.10.0.0/27, fd00:10::/120] of node a (pool \"default\") not announced to \
              10.5.0.2:179: the pool is not in its pod-cidr-pools"
            ]
        );
    }
}
