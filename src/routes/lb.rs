//! The LoadBalancer planner (issue 17), pure and incremental: from the Services' and
//! EndpointSlices' facts (`sources::services`), the bgp-config's `address-pools`, the
//! local node and the on/off decision, the LoadBalancer routes this node announces,
//! and the change each event makes to them.
//!
//! Rules:
//! - A Service is considered when it is `type: LoadBalancer` and its
//!   `spec.loadBalancerClass` is accepted ([`LbContext::classes`]: by default only
//!   Services without a class, as MetalLB; with `--lb-class` only the classes listed).
//! - Each `status.loadBalancer.ingress[].ip` (IPv4 and IPv6, several per Service) inside
//!   a pool with `protocol: bgp` is announced; an IP in a `layer2` pool or in no pool is
//!   not (and the decision says so).
//! - `externalTrafficPolicy: Cluster`: announced while the Service has a ready endpoint
//!   anywhere; `Local`: only while this node hosts one. A node labelled
//!   [`EXCLUDE_LABEL`] announces no LoadBalancer IP.
//! - Routes: one per `bgp-advertisements` entry of the IP's pool, the IP masked to the
//!   entry's `aggregation-length` (`-v6`), with its `localpref` and communities. IPs or
//!   Services that fall in one aggregate, or share one IP, give one route, held while
//!   any of them qualifies (a count per (prefix, attributes)).
//! - Two contributions to one prefix with different attributes (two advertisements of
//!   a pool with one aggregation length but other communities, or an IP and an aggregate
//!   of the same length): BGP without ADD-PATH sends one path per prefix, so the route
//!   carries the union of their communities and large communities and the highest
//!   `localpref`. MetalLB 0.12 kept one of them per prefix (a map keyed by prefix,
//!   filled in the order Services were walked, so which one depended on map order); the
//!   union is the same whatever order events arrive in.
//! - Nothing is announced before [`LbUpdate::Synced`]: a restart does not withdraw the
//!   routes of Services not listed yet.
//!
//! Cost: an event about one Service or one EndpointSlice re-plans that Service only
//! (its IPs times its pool's advertisements), whatever the number of Services or nodes;
//! a new [`LbContext`] (config, node labels, on/off) re-plans every Service. Each call
//! returns an [`LbDelta`]: only the prefixes whose route changed.
//!
//! Must not: read the clock, log above debug, touch sockets or metrics, or import any of
//! `sources` but its pure `model` and `services`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::Arc;

use ipnet::IpNet;

use super::attrs::{self, PeerTemplate};
use super::error::RoutesError;
use super::mode::AnnounceMode;
use super::{Family, NextHop, RouteAttrs};
use crate::bgp::wire::LargeCommunity;
use crate::config::{Config, Peer, Protocol};
use crate::sources::model::Labels;
use crate::sources::services::{
    self, LbUpdate, ObjectKey, ServiceFacts, SliceFacts, TrafficPolicy,
};

/// Nodes with this label announce no LoadBalancer IP (Kubernetes' well-known label;
/// its presence counts, whatever its value, as in MetalLB).
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// `--announce-lb-ips`: whether LoadBalancer IPs are announced at all.
///
/// Cilium's `bgp-announce-lb-ip` is not read here: on Cilium 1.10-1.16 it starts
/// Cilium's embedded speaker, so a user turning it off to stop that speaker must not
/// switch this one off too (issue 29). It is a conflict fact (`routes::cilium`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LbSwitch {
    /// As the bgp-config's `speaker.announce-lb-ips` says (absent: announced).
    #[default]
    Auto,
    On,
    Off,
}

impl LbSwitch {
    pub fn as_str(self) -> &'static str {
        match self {
            LbSwitch::Auto => "auto",
            LbSwitch::On => "on",
            LbSwitch::Off => "off",
        }
    }

    /// [`LbSwitch::decide`] for a speaker in `mode`: never in cluster mode, where no
    /// speaker is a node's own.
    pub fn decide_for(self, mode: AnnounceMode, config: &Config) -> LbEnabled {
        match mode {
            AnnounceMode::Cluster => LbEnabled {
                on: false,
                why: "--announce cluster: each node's speaker announces its own LoadBalancer IPs",
            },
            AnnounceMode::Local => self.decide(config.speaker.announce_lb_ips),
        }
    }

    /// Whether LoadBalancer IPs are announced, and why. `config_says`: the bgp-config's
    /// `speaker.announce-lb-ips` (true when absent). The flag, when not `auto`, wins:
    /// it is the operator's word for this one DaemonSet.
    pub fn decide(self, config_says: bool) -> LbEnabled {
        let (on, why) = match (self, config_says) {
            (LbSwitch::On, _) => (true, "--announce-lb-ips on"),
            (LbSwitch::Off, _) => (false, "--announce-lb-ips off"),
            (LbSwitch::Auto, true) => (
                true,
                "the bgp-config's speaker.announce-lb-ips, true by default",
            ),
            (LbSwitch::Auto, false) => (false, "the bgp-config's speaker.announce-lb-ips is false"),
        };
        LbEnabled { on, why }
    }
}

impl FromStr for LbSwitch {
    type Err = RoutesError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(LbSwitch::Auto),
            "on" => Ok(LbSwitch::On),
            "off" => Ok(LbSwitch::Off),
            other => Err(RoutesError::UnknownLbSwitch {
                value: other.to_owned(),
            }),
        }
    }
}

impl fmt::Display for LbSwitch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The on/off decision ([`LbSwitch::decide`]) and its reason, for logs and `plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LbEnabled {
    pub on: bool,
    pub why: &'static str,
}

/// The attributes of a LoadBalancer route that do not depend on the peer: what one
/// `bgp-advertisements` entry sets (or the union of several, see the module rules).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct LbAttrs {
    /// `localpref`, sent to iBGP peers only.
    pub local_pref: Option<u32>,
    /// Sorted and deduplicated.
    pub communities: Vec<u32>,
    /// Sorted and deduplicated.
    pub large_communities: Vec<LargeCommunity>,
}

impl LbAttrs {
    /// The route of several contributions to one prefix: the union of the communities,
    /// the highest `localpref`.
    pub fn merge<'a>(all: impl IntoIterator<Item = &'a LbAttrs>) -> LbAttrs {
        let mut out = LbAttrs::default();
        for a in all {
            out.local_pref = out.local_pref.max(a.local_pref);
            out.communities.extend(&a.communities);
            out.large_communities.extend(&a.large_communities);
        }
        out.communities = attrs::sorted(out.communities);
        out.large_communities = attrs::sorted(out.large_communities);
        out
    }
}

/// One `bgp-advertisements` entry as the planner uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbAdvertisement {
    pub aggregation_length: u8,
    pub aggregation_length_v6: u8,
    pub attrs: Arc<LbAttrs>,
}

impl LbAdvertisement {
    /// The prefix this advertisement announces for `ip`: the IP masked to the length.
    pub fn prefix(&self, ip: IpAddr) -> IpNet {
        let len = match ip {
            IpAddr::V4(_) => self.aggregation_length.min(32),
            IpAddr::V6(_) => self.aggregation_length_v6.min(128),
        };
        // Cannot fail: the length is at most the family's width (clamped above).
        IpNet::new(ip, len).map_or_else(|_| IpNet::from(ip), |n| n.trunc())
    }
}

/// One `address-pools` entry as the planner uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbPool {
    pub name: Arc<str>,
    pub protocol: Protocol,
    pub cidrs: Vec<IpNet>,
    /// Empty for a layer2 pool.
    pub advertisements: Vec<LbAdvertisement>,
}

/// Everything besides the Services and slices that decides the routes; a new one
/// re-plans every Service ([`LbPlanner::set_context`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LbContext {
    /// Whether LoadBalancer IPs are announced at all.
    pub enabled: bool,
    pub pools: Vec<LbPool>,
    /// The local node carries [`EXCLUDE_LABEL`].
    pub excluded: bool,
    /// `--lb-class`: the classes handled; empty: only Services without a class.
    pub classes: BTreeSet<Arc<str>>,
}

impl LbContext {
    /// The context from the config's pools, the local node's labels (`None`: the node
    /// is not known), the `--lb-class` values and the on/off decision.
    pub fn new(
        config: &Config,
        labels: Option<&Labels>,
        classes: &[String],
        enabled: bool,
    ) -> Self {
        let pools = config
            .pools
            .iter()
            .map(|p| LbPool {
                name: Arc::from(p.name.as_str()),
                protocol: p.protocol,
                cidrs: p.cidrs.clone(),
                advertisements: p
                    .bgp_advertisements
                    .iter()
                    .map(|a| LbAdvertisement {
                        aggregation_length: a.aggregation_length,
                        aggregation_length_v6: a.aggregation_length_v6,
                        attrs: Arc::new(LbAttrs {
                            local_pref: a.local_pref,
                            communities: attrs::sorted(a.communities.iter().map(|c| c.0).collect()),
                            large_communities: attrs::sorted(a.large_communities.clone()),
                        }),
                    })
                    .collect(),
            })
            .collect();
        LbContext {
            enabled,
            pools,
            excluded: labels.is_some_and(|l| l.contains_key(EXCLUDE_LABEL)),
            classes: classes.iter().map(|c| Arc::from(c.as_str())).collect(),
        }
    }

    /// The pool an address lies in (pools do not overlap: the config refuses it).
    /// Private: outside the planner an address is classified by [`LbContext::place`].
    fn pool_of(&self, ip: IpAddr) -> Option<&LbPool> {
        self.pools
            .iter()
            .find(|p| p.cidrs.iter().any(|c| c.contains(&ip)))
    }

    /// Where `ip` lies: the one classification of an address against the pools, for the
    /// planner's decisions and for `doctor`'s audit (`routes::lb_findings`).
    pub fn place(&self, ip: IpAddr) -> IpPlacement {
        match self.pool_of(ip) {
            Some(p) if p.protocol == Protocol::Bgp => IpPlacement::Bgp {
                ip,
                pool: Arc::clone(&p.name),
            },
            Some(p) => IpPlacement::Layer2 {
                ip,
                pool: Arc::clone(&p.name),
            },
            None => IpPlacement::Outside { ip },
        }
    }

    fn class_accepted(&self, class: Option<&Arc<str>>) -> bool {
        services::class_served(&self.classes, class)
    }
}

/// Why a Service's IPs are not announced. Bounded: fit for a metric label
/// ([`LbReason::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LbReason {
    /// `spec.type` is not LoadBalancer.
    NotLoadBalancer,
    /// `spec.loadBalancerClass` is not one this speaker handles (`--lb-class`).
    Class,
    /// LoadBalancer IPs are off ([`LbSwitch::decide`]).
    LbIpsOff,
    /// The Services and EndpointSlices are not all listed yet.
    NotSynced,
    /// This node carries [`EXCLUDE_LABEL`].
    NodeExcluded,
    /// No `status.loadBalancer.ingress[].ip` (no allocator wrote one yet, or only
    /// hostnames).
    NoIp,
    /// Every IP lies outside every pool.
    OutsidePools,
    /// Every IP lies in a `protocol: layer2` pool (never announced by BGP) or outside
    /// every pool.
    Layer2Pool,
    /// No ready endpoint anywhere.
    NoEndpoints,
    /// `externalTrafficPolicy: Local` and no ready endpoint on this node.
    NoLocalEndpoints,
}

impl LbReason {
    pub const ALL: [LbReason; 10] = [
        LbReason::NotLoadBalancer,
        LbReason::Class,
        LbReason::LbIpsOff,
        LbReason::NotSynced,
        LbReason::NodeExcluded,
        LbReason::NoIp,
        LbReason::OutsidePools,
        LbReason::Layer2Pool,
        LbReason::NoEndpoints,
        LbReason::NoLocalEndpoints,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LbReason::NotLoadBalancer => "not_load_balancer",
            LbReason::Class => "class",
            LbReason::LbIpsOff => "lb_ips_off",
            LbReason::NotSynced => "not_synced",
            LbReason::NodeExcluded => "node_excluded",
            LbReason::NoIp => "no_ip",
            LbReason::OutsidePools => "outside_pools",
            LbReason::Layer2Pool => "layer2_pool",
            LbReason::NoEndpoints => "no_endpoints",
            LbReason::NoLocalEndpoints => "no_local_endpoints",
        }
    }

    /// What it means, for people (`plan`, logs).
    pub fn describe(self) -> &'static str {
        match self {
            LbReason::NotLoadBalancer => "not type LoadBalancer",
            LbReason::Class => "its loadBalancerClass is not handled here (--lb-class)",
            LbReason::LbIpsOff => "LoadBalancer IPs are not announced (--announce-lb-ips, cilium-config bgp-announce-lb-ip)",
            LbReason::NotSynced => "the Services and EndpointSlices are not all listed yet",
            LbReason::NodeExcluded => "this node is labelled node.kubernetes.io/exclude-from-external-load-balancers",
            LbReason::NoIp => "no ingress IP yet (is an allocator running?)",
            LbReason::OutsidePools => "its IPs lie outside every address pool",
            LbReason::Layer2Pool => "its IPs lie in layer2 pools, which BGP never announces",
            LbReason::NoEndpoints => "no ready endpoint",
            LbReason::NoLocalEndpoints => "externalTrafficPolicy Local and no ready endpoint on this node",
        }
    }
}

impl fmt::Display for LbReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one ingress IP lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpPlacement {
    /// In a bgp pool: announced when the Service qualifies.
    Bgp { ip: IpAddr, pool: Arc<str> },
    /// In a layer2 pool: never announced by BGP.
    Layer2 { ip: IpAddr, pool: Arc<str> },
    /// In no pool: not announced.
    Outside { ip: IpAddr },
}

impl IpPlacement {
    pub fn ip(&self) -> IpAddr {
        match self {
            IpPlacement::Bgp { ip, .. }
            | IpPlacement::Layer2 { ip, .. }
            | IpPlacement::Outside { ip } => *ip,
        }
    }
}

/// Ready endpoints of one Service, summed over its slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Endpoints {
    /// Anywhere (with or without a node).
    pub ready: u64,
    /// On this node.
    pub here: u64,
}

/// What the planner decided for one Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbDecision {
    /// `None`: announced.
    pub reason: Option<LbReason>,
    pub policy: TrafficPolicy,
    pub class: Option<Arc<str>>,
    pub ips: Vec<IpPlacement>,
    /// Ingress entries without a usable IP, as written.
    pub refused: Vec<String>,
    pub endpoints: Endpoints,
    /// The routes this Service contributes (empty unless announced), sorted.
    pub routes: Vec<(IpNet, Arc<LbAttrs>)>,
}

impl LbDecision {
    pub fn announced(&self) -> bool {
        self.reason.is_none()
    }
}

/// The change one call made to the routes: each prefix whose route changed, with its
/// new attributes (`None`: withdrawn). Never lists an unchanged prefix.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LbDelta {
    pub changes: BTreeMap<IpNet, Option<Arc<LbAttrs>>>,
}

impl LbDelta {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Adds a later delta: the newest value of each prefix wins (each value is absolute).
    pub fn then(&mut self, later: LbDelta) {
        self.changes.extend(later.changes);
    }
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct LbPlanner {
    node: Arc<str>,
    context: LbContext,
    synced: bool,
    services: HashMap<ObjectKey, ServiceFacts>,
    /// Each slice's Service and ready counts (what it added to `endpoints`).
    slices: HashMap<ObjectKey, (ObjectKey, Endpoints)>,
    endpoints: HashMap<ObjectKey, Endpoints>,
    decisions: BTreeMap<ObjectKey, LbDecision>,
    /// Contributions per prefix: attributes -> how many Services give them.
    counts: HashMap<IpNet, BTreeMap<Arc<LbAttrs>, u32>>,
    /// The routes: each prefix's merged attributes.
    routes: BTreeMap<IpNet, Arc<LbAttrs>>,
    /// Decisions per reason (`None`: announced), kept as decisions change.
    by_reason: BTreeMap<Option<LbReason>, usize>,
    /// Services re-decided so far: the work events cost ([`LbPlanner::replanned`]).
    replanned: u64,
}

/// The change of one event being worked out: each touched prefix's route before it.
#[derive(Default)]
struct Touched(BTreeMap<IpNet, Option<Arc<LbAttrs>>>);

impl LbPlanner {
    /// A planner for the speaker on `node` (its name decides which endpoints are local).
    pub fn new(node: impl Into<Arc<str>>) -> Self {
        LbPlanner {
            node: node.into(),
            ..LbPlanner::default()
        }
    }

    /// Takes one source update in, re-planning only the Service it touches (every
    /// Service for `Synced`).
    pub fn apply(&mut self, update: LbUpdate) -> LbDelta {
        let mut touched = Touched::default();
        match update {
            LbUpdate::Service { key, facts } => {
                match facts {
                    Some(f) => self.services.insert(key.clone(), f),
                    None => self.services.remove(&key),
                };
                self.replan_service(&key, &mut touched);
            }
            LbUpdate::Slice { key, facts } => {
                let old = self.slices.remove(&key);
                if let Some((service, counted)) = &old {
                    if let Some(e) = self.endpoints.get_mut(service) {
                        e.ready -= counted.ready.min(e.ready);
                        e.here -= counted.here.min(e.here);
                        if *e == Endpoints::default() {
                            self.endpoints.remove(service);
                        }
                    }
                }
                let new = facts.and_then(|f| {
                    let service = f.service.clone()?;
                    Some((service, self.count(&f)))
                });
                if let Some((service, counted)) = &new {
                    let e = self.endpoints.entry(service.clone()).or_default();
                    e.ready += counted.ready;
                    e.here += counted.here;
                    self.slices.insert(key, (service.clone(), *counted));
                }
                let services: BTreeSet<ObjectKey> =
                    old.into_iter().chain(new).map(|(s, _)| s).collect();
                for s in services {
                    self.replan_service(&s, &mut touched);
                }
            }
            LbUpdate::Synced => {
                if !self.synced {
                    self.synced = true;
                    self.replan_all(&mut touched);
                }
            }
        }
        self.settle(touched)
    }

    /// A new context (config, node labels, classes, on/off): re-plans every Service.
    pub fn set_context(&mut self, context: LbContext) -> LbDelta {
        if context == self.context {
            return LbDelta::default();
        }
        self.context = context;
        let mut touched = Touched::default();
        self.replan_all(&mut touched);
        self.settle(touched)
    }

    pub fn context(&self) -> &LbContext {
        &self.context
    }

    pub fn synced(&self) -> bool {
        self.synced
    }

    /// Every route: prefix -> attributes.
    pub fn routes(&self) -> &BTreeMap<IpNet, Arc<LbAttrs>> {
        &self.routes
    }

    /// Every Service's decision, by key.
    pub fn decisions(&self) -> &BTreeMap<ObjectKey, LbDecision> {
        &self.decisions
    }

    /// How many times a Service was re-decided since the planner was made: one per
    /// Service an event touches, every Service for a new context or `Synced`.
    pub fn replanned(&self) -> u64 {
        self.replanned
    }

    /// How many Services are announced (`None`) and not, per reason.
    pub fn by_reason(&self) -> &BTreeMap<Option<LbReason>, usize> {
        &self.by_reason
    }

    fn count(&self, slice: &SliceFacts) -> Endpoints {
        Endpoints {
            ready: slice.ready(),
            here: self.node_ready(slice).map_or(0, |n| u64::from(*n)),
        }
    }

    fn node_ready<'s>(&self, slice: &'s SliceFacts) -> Option<&'s u32> {
        slice.ready_by_node.get(&*self.node)
    }

    fn replan_all(&mut self, touched: &mut Touched) {
        let keys: BTreeSet<ObjectKey> = self
            .services
            .keys()
            .chain(self.decisions.keys())
            .cloned()
            .collect();
        for key in keys {
            self.replan_service(&key, touched);
        }
    }

    /// Re-decides one Service and moves its contributions.
    fn replan_service(&mut self, key: &ObjectKey, touched: &mut Touched) {
        self.replanned += 1;
        let new = self.services.get(key).map(|facts| {
            decide(
                &self.context,
                self.synced,
                facts,
                self.endpoints.get(key).copied().unwrap_or_default(),
            )
        });
        let old = match &new {
            Some(d) => self.decisions.insert(key.clone(), d.clone()),
            None => self.decisions.remove(key),
        };
        if let Some(o) = &old {
            if let Some(n) = self.by_reason.get_mut(&o.reason) {
                *n -= 1;
                if *n == 0 {
                    self.by_reason.remove(&o.reason);
                }
            }
        }
        if let Some(d) = &new {
            *self.by_reason.entry(d.reason).or_default() += 1;
        }
        let old_routes = old.map(|d| d.routes).unwrap_or_default();
        let new_routes = new.map(|d| d.routes).unwrap_or_default();
        if old_routes == new_routes {
            return;
        }
        for (prefix, attrs) in old_routes {
            touched
                .0
                .entry(prefix)
                .or_insert_with(|| self.routes.get(&prefix).cloned());
            if let Some(per) = self.counts.get_mut(&prefix) {
                if let Some(n) = per.get_mut(&attrs) {
                    *n -= 1;
                    if *n == 0 {
                        per.remove(&attrs);
                    }
                }
                if per.is_empty() {
                    self.counts.remove(&prefix);
                }
            }
        }
        for (prefix, attrs) in new_routes {
            touched
                .0
                .entry(prefix)
                .or_insert_with(|| self.routes.get(&prefix).cloned());
            *self
                .counts
                .entry(prefix)
                .or_default()
                .entry(attrs)
                .or_default() += 1;
        }
    }

    /// The routes of the touched prefixes from their counts, and what changed.
    fn settle(&mut self, touched: Touched) -> LbDelta {
        let mut delta = LbDelta::default();
        for (prefix, before) in touched.0 {
            let now = self.counts.get(&prefix).map(|per| {
                if per.len() == 1 {
                    // Cannot fail: one entry.
                    per.keys().next().map(Arc::clone).unwrap_or_default()
                } else {
                    Arc::new(LbAttrs::merge(per.keys().map(|a| &**a)))
                }
            });
            // Keep the old Arc when the value did not change (the peers' caches key on it).
            let now = match (&before, now) {
                (Some(b), Some(n)) if **b == *n => Some(Arc::clone(b)),
                (_, n) => n,
            };
            match &now {
                Some(a) => self.routes.insert(prefix, Arc::clone(a)),
                None => self.routes.remove(&prefix),
            };
            if before != now {
                delta.changes.insert(prefix, now);
            }
        }
        delta
    }
}

/// The decision for one Service.
pub fn decide(
    context: &LbContext,
    synced: bool,
    facts: &ServiceFacts,
    endpoints: Endpoints,
) -> LbDecision {
    let ips: Vec<IpPlacement> = facts
        .ingress_ips
        .iter()
        .map(|ip| context.place(*ip))
        .collect();
    let reason = if !facts.load_balancer {
        Some(LbReason::NotLoadBalancer)
    } else if !context.class_accepted(facts.class.as_ref()) {
        Some(LbReason::Class)
    } else if !context.enabled {
        Some(LbReason::LbIpsOff)
    } else if !synced {
        Some(LbReason::NotSynced)
    } else if context.excluded {
        Some(LbReason::NodeExcluded)
    } else if ips.is_empty() {
        Some(LbReason::NoIp)
    } else if !ips.iter().any(|p| matches!(p, IpPlacement::Bgp { .. })) {
        if ips.iter().any(|p| matches!(p, IpPlacement::Layer2 { .. })) {
            Some(LbReason::Layer2Pool)
        } else {
            Some(LbReason::OutsidePools)
        }
    } else if endpoints.ready == 0 {
        Some(LbReason::NoEndpoints)
    } else if facts.policy == TrafficPolicy::Local && endpoints.here == 0 {
        Some(LbReason::NoLocalEndpoints)
    } else {
        None
    };
    let mut routes = Vec::new();
    if reason.is_none() {
        for placement in &ips {
            let IpPlacement::Bgp { ip, .. } = placement else {
                continue;
            };
            let Some(pool) = context.pool_of(*ip) else {
                continue;
            };
            for ad in &pool.advertisements {
                routes.push((ad.prefix(*ip), Arc::clone(&ad.attrs)));
            }
        }
        routes.sort();
        routes.dedup();
    }
    LbDecision {
        reason,
        policy: facts.policy,
        class: facts.class.clone(),
        ips,
        refused: facts.ingress_refused.clone(),
        endpoints,
        routes,
    }
}

/// How one peer's LoadBalancer routes are built from [`LbAttrs`]: the peer's template
/// (`routes::attrs`: ORIGIN, AS_PATH, LOCAL_PREF on iBGP only) and its next hops. The
/// next hop follows the same rule as the pod CIDRs (`next_hop::rule`, the session's
/// local address by default); a family without one is not announced to that peer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LbProfile {
    pub template: PeerTemplate,
    /// Indexed by `Family as usize`; `None`: not announced.
    pub next_hops: [Option<NextHop>; 2],
}

impl LbProfile {
    /// The profile of `peer` with the next hops the planner chose for its pod CIDRs
    /// (`None` in cluster mode: LoadBalancer IPs are a node's own, announced in local
    /// mode only).
    pub fn new(peer: &Peer, next_hops: Option<[Option<NextHop>; 2]>) -> LbProfile {
        LbProfile {
            template: PeerTemplate::of(peer),
            next_hops: next_hops.unwrap_or([None, None]),
        }
    }

    /// The route's attributes for this peer; `None` when its family has no next hop.
    pub fn attrs(&self, family: Family, lb: &LbAttrs) -> Option<RouteAttrs> {
        let next_hop = self.next_hops[family as usize].clone()?;
        Some(self.template.attrs(
            next_hop,
            lb.local_pref,
            lb.communities.clone(),
            lb.large_communities.clone(),
        ))
    }
}

/// A peer's LoadBalancer routes as route sets and deltas, with one `Arc<RouteAttrs>`
/// per distinct attribute set (routes that share it are packed into the same UPDATEs).
#[derive(Debug)]
pub struct LbRouteMap {
    profile: LbProfile,
    cache: HashMap<(usize, Arc<LbAttrs>), Option<Arc<RouteAttrs>>>,
}

/// The cache is cleared past this many attribute sets (merges can create new ones
/// over time; a config has a handful).
const LB_CACHE_LIMIT: usize = 4096;

impl LbRouteMap {
    pub fn new(profile: LbProfile) -> Self {
        LbRouteMap {
            profile,
            cache: HashMap::new(),
        }
    }

    pub fn profile(&self) -> &LbProfile {
        &self.profile
    }

    /// One route's attributes for this peer.
    pub fn route(&mut self, prefix: &IpNet, lb: &Arc<LbAttrs>) -> Option<Arc<RouteAttrs>> {
        let family = super::next_hop::family_of(prefix);
        if self.cache.len() >= LB_CACHE_LIMIT {
            self.cache.clear();
        }
        let profile = &self.profile;
        self.cache
            .entry((family as usize, Arc::clone(lb)))
            .or_insert_with(|| profile.attrs(family, lb).map(Arc::new))
            .clone()
    }

    /// Every route for this peer.
    pub fn full(&mut self, routes: &BTreeMap<IpNet, Arc<LbAttrs>>) -> LbRoutes {
        routes
            .iter()
            .filter_map(|(p, a)| Some((*p, self.route(p, a)?)))
            .collect()
    }

    /// A delta for this peer (a route whose family has no next hop is withdrawn, which
    /// is a no-op for a peer that never had it).
    pub fn delta(&mut self, delta: &LbDelta) -> Vec<(IpNet, Option<Arc<RouteAttrs>>)> {
        delta
            .changes
            .iter()
            .map(|(p, a)| (*p, a.as_ref().and_then(|a| self.route(p, a))))
            .collect()
    }
}

/// A peer's LoadBalancer routes, with its attributes.
pub type LbRoutes = BTreeMap<IpNet, Arc<RouteAttrs>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BgpAdvertisement;
    use crate::config::{AddressPool, Community};

    fn key(n: &str) -> ObjectKey {
        ObjectKey::new("default", n)
    }

    fn config(ads: Vec<BgpAdvertisement>) -> Config {
        Config {
            pools: vec![
                AddressPool {
                    name: "bgp".into(),
                    protocol: Protocol::Bgp,
                    cidrs: vec![
                        "192.0.2.0/24".parse().unwrap(),
                        "2001:db8::/64".parse().unwrap(),
                    ],
                    avoid_buggy_ips: false,
                    auto_assign: true,
                    bgp_advertisements: ads,
                },
                AddressPool {
                    name: "l2".into(),
                    protocol: Protocol::Layer2,
                    cidrs: vec!["198.51.100.0/24".parse().unwrap()],
                    avoid_buggy_ips: false,
                    auto_assign: true,
                    bgp_advertisements: vec![],
                },
            ],
            ..Config::default()
        }
    }

    fn planner(ads: Vec<BgpAdvertisement>) -> LbPlanner {
        let mut p = LbPlanner::new("n1");
        p.set_context(LbContext::new(&config(ads), None, &[], true));
        p.apply(LbUpdate::Synced);
        p
    }

    fn service(ips: &[&str], policy: TrafficPolicy) -> Option<ServiceFacts> {
        Some(ServiceFacts {
            load_balancer: true,
            policy,
            ingress_ips: ips.iter().map(|i| i.parse().unwrap()).collect(),
            ..ServiceFacts::default()
        })
    }

    fn slice(svc: &str, nodes: &[(&str, u32)]) -> Option<SliceFacts> {
        Some(SliceFacts {
            service: Some(key(svc)),
            ready_by_node: nodes.iter().map(|(n, c)| (Arc::from(*n), *c)).collect(),
            ready_without_node: 0,
        })
    }

    fn prefixes(d: &LbDelta) -> Vec<(String, bool)> {
        d.changes
            .iter()
            .map(|(p, a)| (p.to_string(), a.is_some()))
            .collect()
    }

    #[test]
    fn a_cluster_service_is_announced_while_it_has_a_ready_endpoint_anywhere() {
        let mut p = planner(vec![BgpAdvertisement::default()]);
        let d = p.apply(LbUpdate::Service {
            key: key("a"),
            facts: service(&["192.0.2.10", "2001:db8::10"], TrafficPolicy::Cluster),
        });
        assert!(d.is_empty());
        assert_eq!(p.decisions()[&key("a")].reason, Some(LbReason::NoEndpoints));
        let d = p.apply(LbUpdate::Slice {
            key: key("a-1"),
            facts: slice("a", &[("n2", 1)]),
        });
        assert_eq!(
            prefixes(&d),
            vec![
                ("192.0.2.10/32".into(), true),
                ("2001:db8::10/128".into(), true)
            ]
        );
        let d = p.apply(LbUpdate::Slice {
            key: key("a-1"),
            facts: None,
        });
        assert_eq!(
            prefixes(&d),
            vec![
                ("192.0.2.10/32".into(), false),
                ("2001:db8::10/128".into(), false)
            ]
        );
    }

    #[test]
    fn a_local_service_needs_a_ready_endpoint_on_this_node() {
        let mut p = planner(vec![BgpAdvertisement::default()]);
        p.apply(LbUpdate::Service {
            key: key("a"),
            facts: service(&["192.0.2.10"], TrafficPolicy::Local),
        });
        p.apply(LbUpdate::Slice {
            key: key("a-1"),
            facts: slice("a", &[("n2", 3)]),
        });
        assert_eq!(
            p.decisions()[&key("a")].reason,
            Some(LbReason::NoLocalEndpoints)
        );
        let d = p.apply(LbUpdate::Slice {
            key: key("a-2"),
            facts: slice("a", &[("n1", 1)]),
        });
        assert_eq!(prefixes(&d), vec![("192.0.2.10/32".into(), true)]);
    }

    #[test]
    fn an_aggregate_is_held_while_any_service_in_it_qualifies() {
        let mut p = planner(vec![BgpAdvertisement {
            aggregation_length: 24,
            ..BgpAdvertisement::default()
        }]);
        for (svc, ip) in [("a", "192.0.2.1"), ("b", "192.0.2.2")] {
            p.apply(LbUpdate::Slice {
                key: key(&format!("{svc}-1")),
                facts: slice(svc, &[("n1", 1)]),
            });
            let d = p.apply(LbUpdate::Service {
                key: key(svc),
                facts: service(&[ip], TrafficPolicy::Cluster),
            });
            assert_eq!(d.is_empty(), svc == "b", "{svc}");
        }
        assert!(p
            .apply(LbUpdate::Service {
                key: key("a"),
                facts: None
            })
            .is_empty());
        let d = p.apply(LbUpdate::Service {
            key: key("b"),
            facts: None,
        });
        assert_eq!(prefixes(&d), vec![("192.0.2.0/24".into(), false)]);
        assert!(p.routes().is_empty());
    }

    #[test]
    fn two_advertisements_for_one_prefix_merge_their_communities() {
        let ad = |c: u32, lp: u32| BgpAdvertisement {
            communities: vec![Community(c)],
            local_pref: Some(lp),
            ..BgpAdvertisement::default()
        };
        let mut p = planner(vec![ad(0x0001_0001, 50), ad(0x0001_0002, 200)]);
        p.apply(LbUpdate::Slice {
            key: key("a-1"),
            facts: slice("a", &[("n1", 1)]),
        });
        p.apply(LbUpdate::Service {
            key: key("a"),
            facts: service(&["192.0.2.1"], TrafficPolicy::Cluster),
        });
        let route = &p.routes()[&"192.0.2.1/32".parse::<IpNet>().unwrap()];
        assert_eq!(route.communities, vec![0x0001_0001, 0x0001_0002]);
        assert_eq!(route.local_pref, Some(200));
    }

    #[test]
    fn reasons_name_why_a_service_is_not_announced() {
        let mut p = planner(vec![BgpAdvertisement::default()]);
        let cases = [
            ("l2", vec!["198.51.100.1"], LbReason::Layer2Pool),
            ("out", vec!["203.0.113.1"], LbReason::OutsidePools),
            ("none", vec![], LbReason::NoIp),
        ];
        for (name, ips, want) in cases {
            p.apply(LbUpdate::Slice {
                key: key(&format!("{name}-1")),
                facts: slice(name, &[("n1", 1)]),
            });
            p.apply(LbUpdate::Service {
                key: key(name),
                facts: service(&ips, TrafficPolicy::Cluster),
            });
            assert_eq!(p.decisions()[&key(name)].reason, Some(want), "{name}");
        }
        let mut classy = service(&["192.0.2.1"], TrafficPolicy::Cluster);
        if let Some(f) = classy.as_mut() {
            f.class = Some(Arc::from("other"));
        }
        p.apply(LbUpdate::Service {
            key: key("classy"),
            facts: classy,
        });
        assert_eq!(p.decisions()[&key("classy")].reason, Some(LbReason::Class));
        assert!(p.routes().is_empty());
    }

    #[test]
    fn nothing_before_synced_and_off_withdraws_everything() {
        let mut p = LbPlanner::new("n1");
        let cfg = config(vec![BgpAdvertisement::default()]);
        p.set_context(LbContext::new(&cfg, None, &[], true));
        p.apply(LbUpdate::Slice {
            key: key("a-1"),
            facts: slice("a", &[("n1", 1)]),
        });
        let d = p.apply(LbUpdate::Service {
            key: key("a"),
            facts: service(&["192.0.2.1"], TrafficPolicy::Cluster),
        });
        assert!(d.is_empty());
        assert_eq!(p.decisions()[&key("a")].reason, Some(LbReason::NotSynced));
        assert_eq!(
            prefixes(&p.apply(LbUpdate::Synced)),
            vec![("192.0.2.1/32".into(), true)]
        );
        let d = p.set_context(LbContext::new(&cfg, None, &[], false));
        assert_eq!(prefixes(&d), vec![("192.0.2.1/32".into(), false)]);
        assert_eq!(p.decisions()[&key("a")].reason, Some(LbReason::LbIpsOff));
        let labels: Labels = Arc::new([(EXCLUDE_LABEL.to_owned(), String::new())].into());
        p.set_context(LbContext::new(&cfg, Some(&labels), &[], true));
        assert_eq!(
            p.decisions()[&key("a")].reason,
            Some(LbReason::NodeExcluded)
        );
    }

    /// The work of one Service or slice event is that Service's, whether 10 or 10,000
    /// Services are in view; a new context re-plans them all.
    #[test]
    fn an_event_re_plans_only_the_service_it_touches() {
        for services in [10usize, 10_000] {
            let mut p = planner(vec![BgpAdvertisement::default()]);
            for i in 0..services {
                let ip = format!("192.0.2.{}", i % 250);
                p.apply(LbUpdate::Service {
                    key: key(&format!("s{i}")),
                    facts: service(&[&ip], TrafficPolicy::Cluster),
                });
            }
            let before = p.replanned();
            p.apply(LbUpdate::Slice {
                key: key("s7-1"),
                facts: slice("s7", &[("n1", 1)]),
            });
            assert_eq!(p.replanned() - before, 1, "{services} services");
            p.apply(LbUpdate::Service {
                key: key("s3"),
                facts: None,
            });
            assert_eq!(p.replanned() - before, 2, "{services} services");
            let before = p.replanned();
            p.set_context(LbContext::new(&config(vec![]), None, &[], true));
            assert_eq!(p.replanned() - before, services as u64 - 1);
        }
    }

    #[test]
    fn the_on_off_rule() {
        // Issue 29: auto follows the bgp-config, no longer cilium-config.
        assert!(LbSwitch::Auto.decide(true).on);
        assert!(!LbSwitch::Auto.decide(false).on);
        assert!(LbSwitch::On.decide(false).on);
        assert!(!LbSwitch::Off.decide(true).on);
        let off = crate::config::parse("speaker: {announce-lb-ips: false}").unwrap();
        assert!(!LbSwitch::Auto.decide_for(AnnounceMode::Local, &off).on);
        assert!(
            LbSwitch::Auto
                .decide_for(AnnounceMode::Local, &Config::default())
                .on
        );
        assert!(
            !LbSwitch::On
                .decide_for(AnnounceMode::Cluster, &Config::default())
                .on
        );
        assert_eq!("off".parse::<LbSwitch>().unwrap(), LbSwitch::Off);
        assert!("yes".parse::<LbSwitch>().is_err());
    }
}
