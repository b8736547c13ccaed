//! Property tests of the route planner: for random clusters and random event sequences
//! (node added, deleted, CIDRs changed, labels changed, InternalIPs changed, config
//! changed), after every event the plan equals what an independent model expects, and a
//! node deletion changes exactly that node's prefixes.
//!
//! The model below is written from the rules of issue #6 and `config/README.md`, not
//! from the planner's code: a naive O(n^2) ownership and overlap check, peer selection
//! evaluated on its own small selector type, attributes built field by field. The
//! planner's inputs go through the real pipeline: the config as YAML text through
//! `config::parse`, the cluster as a `ClusterState` through `sources::node_view`.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use ipnet::IpNet;
use podcidr_speaker::bgp::wire::Origin;
use podcidr_speaker::config::{self, PeerKey};
use podcidr_speaker::routes::{
    self, plan, plan_reusing, AnnounceMode, Conflict, LocalNode, NextHop, Overrides, Plan,
    RouteAttrs, UnannounceableReason,
};
use podcidr_speaker::sources::model::{
    node_view, CiliumConfig, ClusterState, Family, IpamOverride, NodeFacts,
};
use proptest::prelude::*;

/// Node names, some of which sort differently as bytes than as numbers.
const NAMES: [&str; 8] = ["a", "a-10", "a-9", "b", "master1", "node-10", "node-2", "z"];

// ---------------------------------------------------------------------------------------
// The model

#[derive(Debug, Clone, PartialEq)]
enum Selector {
    Label(&'static str, &'static str),
    Exists(&'static str),
    DoesNotExist(&'static str),
}

impl Selector {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Selector::Label(k, v) => labels.get(*k).map(String::as_str) == Some(*v),
            Selector::Exists(k) => labels.contains_key(*k),
            Selector::DoesNotExist(k) => !labels.contains_key(*k),
        }
    }

    fn yaml(&self) -> String {
        match self {
            Selector::Label(k, v) => format!("{{match-labels: {{{k}: \"{v}\"}}}}"),
            Selector::Exists(k) => {
                format!("{{match-expressions: [{{key: {k}, operator: Exists}}]}}")
            }
            Selector::DoesNotExist(k) => {
                format!("{{match-expressions: [{{key: {k}, operator: DoesNotExist}}]}}")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct ModelPeer {
    address: IpAddr,
    port: u16,
    peer_asn: u32,
    my_asn: u32,
    source: Option<IpAddr>,
    origin_igp: Option<bool>,
    communities: Option<Vec<(u16, u16)>>,
    /// Only ever set on iBGP peers (the config refuses it on eBGP).
    local_pref: Option<u32>,
    /// ORed; empty selects every node.
    selectors: Vec<Selector>,
}

impl ModelPeer {
    fn ibgp(&self) -> bool {
        self.peer_asn == self.my_asn
    }

    fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selectors.is_empty() || self.selectors.iter().any(|s| s.matches(labels))
    }

    fn key(&self) -> PeerKey {
        PeerKey {
            address: self.address,
            port: self.port,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Speaker {
    origin_igp: Option<bool>,
    communities: Option<Vec<(u16, u16)>>,
    local_pref: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
struct ModelNode {
    labels: BTreeMap<String, String>,
    v4: Option<Ipv4Addr>,
    v6: Option<Ipv6Addr>,
    cidrs: Vec<IpNet>,
}

#[derive(Debug, Clone)]
struct Model {
    nodes: BTreeMap<&'static str, ModelNode>,
    peers: Vec<ModelPeer>,
    speaker: Speaker,
}

/// What the model expects of one session.
#[derive(Debug, PartialEq)]
struct ExpectedPeer {
    index: usize,
    source: Option<IpAddr>,
    routes: BTreeMap<IpNet, (RouteAttrs, String)>,
}

#[derive(Debug, PartialEq)]
struct Expected {
    present: bool,
    peers: BTreeMap<PeerKey, ExpectedPeer>,
    unselected: Vec<usize>,
    conflicts: BTreeSet<Conflict>,
    /// (node, prefix) without a next hop.
    unannounceable: BTreeSet<(String, IpNet)>,
}

fn same_family(a: IpAddr, prefix: IpNet) -> bool {
    matches!(
        (a, prefix),
        (IpAddr::V4(_), IpNet::V4(_)) | (IpAddr::V6(_), IpNet::V6(_))
    )
}

impl Model {
    /// Every node's claimed prefixes, host bits cleared, without duplicates.
    fn claims(&self) -> BTreeMap<&'static str, BTreeSet<IpNet>> {
        self.nodes
            .iter()
            .map(|(name, n)| (*name, n.cidrs.iter().map(IpNet::trunc).collect()))
            .collect()
    }

    /// prefix -> every node claiming it, sorted by name (byte order).
    fn claimants(&self) -> BTreeMap<IpNet, Vec<&'static str>> {
        let mut out: BTreeMap<IpNet, Vec<&'static str>> = BTreeMap::new();
        for (name, prefixes) in self.claims() {
            for p in prefixes {
                out.entry(p).or_default().push(name);
            }
        }
        for names in out.values_mut() {
            names.sort();
        }
        out
    }

    fn owner_of(&self) -> BTreeMap<IpNet, &'static str> {
        self.claimants()
            .into_iter()
            .map(|(p, names)| (p, names[0]))
            .collect()
    }

    fn conflicts(&self, local: &str, mode: AnnounceMode) -> BTreeSet<Conflict> {
        let mut out = BTreeSet::new();
        for (prefix, names) in self.claimants() {
            if names.len() > 1 {
                out.insert(Conflict::SamePrefix {
                    prefix,
                    owner: Arc::from(names[0]),
                    others: names[1..].iter().map(|n| Arc::from(*n)).collect(),
                });
            }
        }
        let owned: Vec<(IpNet, &str)> = self.owner_of().into_iter().collect();
        for (outer, outer_node) in &owned {
            for (inner, inner_node) in &owned {
                if outer != inner && outer_node != inner_node && outer.contains(inner) {
                    out.insert(Conflict::Overlap {
                        covering: *outer,
                        covering_node: Arc::from(*outer_node),
                        covered: *inner,
                        covered_node: Arc::from(*inner_node),
                    });
                }
            }
        }
        if mode == AnnounceMode::Local {
            out.retain(|c| match c {
                Conflict::SamePrefix { owner, others, .. } => {
                    &**owner == local || others.iter().any(|o| &**o == local)
                }
                Conflict::Overlap {
                    covering_node,
                    covered_node,
                    ..
                } => &**covering_node == local || &**covered_node == local,
            });
        }
        out
    }

    fn attrs(&self, peer: &ModelPeer, next_hop: NextHop) -> RouteAttrs {
        let igp = peer.origin_igp.or(self.speaker.origin_igp).unwrap_or(false);
        let communities: BTreeSet<u32> = peer
            .communities
            .as_ref()
            .or(self.speaker.communities.as_ref())
            .map(|cs| {
                cs.iter()
                    .map(|(hi, lo)| (u32::from(*hi) << 16) | u32::from(*lo))
                    .collect()
            })
            .unwrap_or_default();
        RouteAttrs {
            origin: if igp { Origin::Igp } else { Origin::Incomplete },
            as_path: if peer.ibgp() {
                vec![]
            } else {
                vec![peer.my_asn]
            },
            next_hop,
            med: None,
            local_pref: peer
                .ibgp()
                .then(|| peer.local_pref.or(self.speaker.local_pref).unwrap_or(100)),
            communities: communities.into_iter().collect(),
            large_communities: vec![],
        }
    }

    fn expected(&self, local: &str, mode: AnnounceMode, over: Option<IpAddr>) -> Expected {
        let owner = self.owner_of();
        let mut unannounceable = BTreeSet::new();
        if mode == AnnounceMode::Cluster {
            for (prefix, node) in &owner {
                if self.next_hop_of(node, *prefix).is_none() {
                    unannounceable.insert((node.to_string(), *prefix));
                }
            }
        }
        let mut out = Expected {
            present: self.nodes.contains_key(local),
            peers: BTreeMap::new(),
            unselected: vec![],
            conflicts: self.conflicts(local, mode),
            unannounceable,
        };
        let Some(me) = self.nodes.get(local) else {
            return out;
        };
        for (index, peer) in self.peers.iter().enumerate() {
            if !peer.selects(&me.labels) {
                out.unselected.push(index);
                continue;
            }
            if out.peers.contains_key(&peer.key()) {
                continue;
            }
            let source = peer
                .source
                .or(over.filter(|o| o.is_ipv4() == peer.address.is_ipv4()));
            let mut routes = BTreeMap::new();
            for (prefix, node) in &owner {
                let next_hop = match mode {
                    // The session's own family: the bound address, else the session's.
                    AnnounceMode::Local if *node == local && same_family(peer.address, *prefix) => {
                        match source {
                            Some(s) => NextHop::Address(s),
                            None => NextHop::SessionLocal,
                        }
                    }
                    // The other family: the node's address, else --source-address of
                    // that family; IPv4 then falls back to the session's IPv6 address
                    // (RFC 8950), IPv6 has nothing.
                    AnnounceMode::Local if *node == local => {
                        match self
                            .next_hop_of(node, *prefix)
                            .or(over.filter(|o| same_family(*o, *prefix)))
                        {
                            Some(ip) => NextHop::Address(ip),
                            None if prefix.addr().is_ipv4() => NextHop::SessionLocal,
                            None => {
                                out.unannounceable.insert((node.to_string(), *prefix));
                                continue;
                            }
                        }
                    }
                    AnnounceMode::Local => continue,
                    AnnounceMode::Cluster => match self.next_hop_of(node, *prefix) {
                        Some(ip) => NextHop::Address(ip),
                        None => continue,
                    },
                };
                routes.insert(*prefix, (self.attrs(peer, next_hop), node.to_string()));
            }
            out.peers.insert(
                peer.key(),
                ExpectedPeer {
                    index,
                    source,
                    routes,
                },
            );
        }
        out
    }

    fn next_hop_of(&self, node: &str, prefix: IpNet) -> Option<IpAddr> {
        let n = self.nodes.get(node)?;
        match prefix {
            IpNet::V4(_) => n.v4.map(IpAddr::V4),
            IpNet::V6(_) => n.v6.map(IpAddr::V6),
        }
    }

    fn state(&self) -> ClusterState {
        let mut state = ClusterState {
            cilium_config: Some(CiliumConfig {
                ipam: Some("kubernetes".into()),
                ..CiliumConfig::default()
            }),
            ..ClusterState::default()
        };
        for (name, n) in &self.nodes {
            state.nodes.insert(
                name.to_string(),
                NodeFacts {
                    labels: n.labels.clone().into(),
                    internal_ipv4: n.v4,
                    internal_ipv6: n.v6,
                    node_cidrs: n.cidrs.clone(),
                    ..NodeFacts::default()
                },
            );
        }
        state
    }

    fn config_yaml(&self) -> String {
        let communities = |cs: &[(u16, u16)]| {
            let items: Vec<String> = cs.iter().map(|(a, b)| format!("\"{a}:{b}\"")).collect();
            format!("[{}]", items.join(", "))
        };
        let origin = |igp: bool| if igp { "igp" } else { "incomplete" };
        let mut y = String::from("speaker:\n  graceful-restart: false\n");
        if let Some(igp) = self.speaker.origin_igp {
            y += &format!("  origin: {}\n", origin(igp));
        }
        if let Some(cs) = &self.speaker.communities {
            y += &format!("  pod-cidr-communities: {}\n", communities(cs));
        }
        if let Some(lp) = self.speaker.local_pref {
            y += &format!("  pod-cidr-local-pref: {lp}\n");
        }
        y += "peers:\n";
        if self.peers.is_empty() {
            y = y.replace("peers:\n", "peers: []\n");
        }
        for p in &self.peers {
            y += &format!(
                "  - peer-address: \"{}\"\n    peer-port: {}\n    peer-asn: {}\n    my-asn: {}\n",
                p.address, p.port, p.peer_asn, p.my_asn
            );
            if let Some(s) = p.source {
                y += &format!("    source-address: \"{s}\"\n");
            }
            if let Some(igp) = p.origin_igp {
                y += &format!("    origin: {}\n", origin(igp));
            }
            if let Some(cs) = &p.communities {
                y += &format!("    pod-cidr-communities: {}\n", communities(cs));
            }
            if let Some(lp) = p.local_pref {
                y += &format!("    pod-cidr-local-pref: {lp}\n");
            }
            if !p.selectors.is_empty() {
                let sels: Vec<String> = p.selectors.iter().map(Selector::yaml).collect();
                y += &format!("    node-selectors: [{}]\n", sels.join(", "));
            }
        }
        y
    }

    /// Drops entries the config would refuse: a second entry for one router with the
    /// same set of selectors.
    fn set_peers(&mut self, peers: Vec<ModelPeer>) {
        let same = |a: &[Selector], b: &[Selector]| {
            a.iter().all(|s| b.contains(s)) && b.iter().all(|s| a.contains(s))
        };
        let mut kept: Vec<ModelPeer> = Vec::new();
        for p in peers {
            if !kept
                .iter()
                .any(|k| k.key() == p.key() && same(&k.selectors, &p.selectors))
            {
                kept.push(p);
            }
        }
        self.peers = kept;
    }

    fn apply(&mut self, event: &Event) {
        let node = |i: usize| NAMES[i % NAMES.len()];
        match event {
            Event::PutNode(i, n) => {
                self.nodes.insert(node(*i), n.clone());
            }
            Event::DeleteNode(i) => {
                self.nodes.remove(node(*i));
            }
            Event::SetCidrs(i, cidrs) => {
                if let Some(n) = self.nodes.get_mut(node(*i)) {
                    n.cidrs = cidrs.clone();
                }
            }
            Event::SetLabels(i, labels) => {
                if let Some(n) = self.nodes.get_mut(node(*i)) {
                    n.labels = labels.clone();
                }
            }
            Event::SetIps(i, v4, v6) => {
                if let Some(n) = self.nodes.get_mut(node(*i)) {
                    n.v4 = *v4;
                    n.v6 = *v6;
                }
            }
            Event::SetPeers(peers) => self.set_peers(peers.clone()),
            Event::EditPeer(i, peer) => {
                let mut peers = self.peers.clone();
                match peers.get_mut(*i) {
                    Some(p) => *p = peer.clone(),
                    None => peers.push(peer.clone()),
                }
                self.set_peers(peers);
            }
            Event::SetSpeaker(s) => self.speaker = s.clone(),
        }
    }
}

#[derive(Debug, Clone)]
enum Event {
    PutNode(usize, ModelNode),
    DeleteNode(usize),
    SetCidrs(usize, Vec<IpNet>),
    SetLabels(usize, BTreeMap<String, String>),
    SetIps(usize, Option<Ipv4Addr>, Option<Ipv6Addr>),
    SetPeers(Vec<ModelPeer>),
    EditPeer(usize, ModelPeer),
    SetSpeaker(Speaker),
}

// ---------------------------------------------------------------------------------------
// Generators: a small address space, so that duplicates and overlaps are common.

fn prefix() -> impl Strategy<Value = IpNet> {
    prop_oneof![
        3 => (
            prop::sample::select(vec![[10, 0, 0, 0], [10, 0, 1, 0], [10, 0, 2, 0], [10, 0, 128, 0], [10, 1, 0, 0]]),
            prop::sample::select(vec![16u8, 17, 24, 25]),
            prop_oneof![4 => Just(0u8), 1 => 1u8..=255],
        )
            .prop_map(|(a, len, host)| {
                IpNet::new(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], host)), len).unwrap()
            }),
        1 => (
            prop::sample::select(vec![0u16, 1, 0x100]),
            prop::sample::select(vec![48u8, 56, 64]),
        )
            .prop_map(|(sub, len)| {
                IpNet::new(IpAddr::V6(Ipv6Addr::new(0xfd00, 0, sub, 0, 0, 0, 0, 0)), len).unwrap()
            }),
    ]
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    (
        prop::option::of(prop::sample::select(vec!["a", "b"])),
        any::<bool>(),
    )
        .prop_map(|(rack, control_plane)| {
            let mut l = BTreeMap::new();
            if let Some(r) = rack {
                l.insert("rack".to_string(), r.to_string());
            }
            if control_plane {
                l.insert("role".to_string(), String::new());
            }
            l
        })
}

fn ips() -> impl Strategy<Value = (Option<Ipv4Addr>, Option<Ipv6Addr>)> {
    (
        prop::option::weighted(0.85, (1u8..=4).prop_map(|h| Ipv4Addr::new(192, 168, 0, h))),
        prop::option::weighted(
            0.6,
            (1u16..=4).prop_map(|h| Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, h)),
        ),
    )
}

fn cidrs() -> impl Strategy<Value = Vec<IpNet>> {
    prop::collection::vec(prefix(), 0..4)
}

fn model_node() -> impl Strategy<Value = ModelNode> {
    (labels(), ips(), cidrs()).prop_map(|(labels, (v4, v6), cidrs)| ModelNode {
        labels,
        v4,
        v6,
        cidrs,
    })
}

fn selector() -> impl Strategy<Value = Selector> {
    prop_oneof![
        Just(Selector::Label("rack", "a")),
        Just(Selector::Label("rack", "b")),
        Just(Selector::Exists("role")),
        Just(Selector::DoesNotExist("role")),
    ]
}

fn communities() -> impl Strategy<Value = Vec<(u16, u16)>> {
    prop::collection::vec(
        (
            prop::sample::select(vec![65083u16, 1]),
            prop::sample::select(vec![100u16, 200, 7]),
        ),
        0..4,
    )
}

fn model_peer() -> impl Strategy<Value = ModelPeer> {
    (
        prop::sample::select(vec!["10.5.0.1", "10.5.0.2", "fd00:5::1"]),
        prop_oneof![5 => Just(179u16), 1 => Just(1179)],
        prop::sample::select(vec![65000u32, 65083]),
        prop::sample::select(vec![65083u32, 4_200_000_000]),
        any::<bool>(),
        prop::option::of(any::<bool>()),
        prop::option::of(communities()),
        prop::option::of(prop::sample::select(vec![0u32, 100, 300])),
        prop::collection::vec(selector(), 0..3),
    )
        .prop_map(
            |(address, port, peer_asn, my_asn, source, origin_igp, communities, lp, selectors)| {
                let address: IpAddr = address.parse().unwrap();
                let source = source.then(|| match address {
                    IpAddr::V4(_) => "10.5.0.9".parse().unwrap(),
                    IpAddr::V6(_) => "fd00:5::9".parse().unwrap(),
                });
                ModelPeer {
                    address,
                    port,
                    peer_asn,
                    my_asn,
                    source,
                    origin_igp,
                    communities,
                    local_pref: lp.filter(|_| peer_asn == my_asn),
                    selectors,
                }
            },
        )
}

fn speaker() -> impl Strategy<Value = Speaker> {
    (
        prop::option::of(any::<bool>()),
        prop::option::of(communities()),
        prop::option::of(prop::sample::select(vec![50u32, 200])),
    )
        .prop_map(|(origin_igp, communities, local_pref)| Speaker {
            origin_igp,
            communities,
            local_pref,
        })
}

fn model() -> impl Strategy<Value = Model> {
    (
        prop::collection::btree_map(prop::sample::select(NAMES.to_vec()), model_node(), 0..7),
        prop::collection::vec(model_peer(), 0..5),
        speaker(),
    )
        .prop_map(|(nodes, peers, speaker)| {
            let mut m = Model {
                nodes,
                peers: vec![],
                speaker,
            };
            m.set_peers(peers);
            m
        })
}

fn event() -> impl Strategy<Value = Event> {
    let node = 0..NAMES.len();
    prop_oneof![
        2 => (node.clone(), model_node()).prop_map(|(i, n)| Event::PutNode(i, n)),
        3 => node.clone().prop_map(Event::DeleteNode),
        3 => (node.clone(), cidrs()).prop_map(|(i, c)| Event::SetCidrs(i, c)),
        2 => (node.clone(), labels()).prop_map(|(i, l)| Event::SetLabels(i, l)),
        1 => (node, ips()).prop_map(|(i, (v4, v6))| Event::SetIps(i, v4, v6)),
        1 => prop::collection::vec(model_peer(), 0..5).prop_map(Event::SetPeers),
        1 => (0usize..5, model_peer()).prop_map(|(i, p)| Event::EditPeer(i, p)),
        1 => speaker().prop_map(Event::SetSpeaker),
    ]
}

// ---------------------------------------------------------------------------------------
// Checks

/// Plans from scratch, as `plan` does (`plan_reusing` with no previous plan).
fn run_planner(model: &Model, local: &str, mode: AnnounceMode, over: Option<IpAddr>) -> Plan {
    run_planner_from(model, local, mode, over, None)
}

/// Plans through `plan_reusing`, from `previous`, as the daemon plans each event.
fn run_planner_from(
    model: &Model,
    local: &str,
    mode: AnnounceMode,
    over: Option<IpAddr>,
    previous: Option<&Plan>,
) -> Plan {
    let yaml = model.config_yaml();
    let config = config::parse(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    let view = node_view(&model.state(), IpamOverride::Auto).unwrap();
    plan_reusing(
        &view,
        &config,
        &LocalNode::new(local),
        mode,
        &Overrides {
            source_address: over,
        },
        previous,
    )
}

fn check_plan(
    plan: &Plan,
    model: &Model,
    local: &str,
    mode: AnnounceMode,
    over: Option<IpAddr>,
) -> Result<(), TestCaseError> {
    let want = model.expected(local, mode, over);
    prop_assert_eq!(plan.node_present, want.present);
    prop_assert_eq!(&plan.unselected, &want.unselected);
    prop_assert_eq!(
        plan.peers.keys().collect::<Vec<_>>(),
        want.peers.keys().collect::<Vec<_>>()
    );
    for (key, p) in &plan.peers {
        let w = &want.peers[key];
        prop_assert_eq!(p.peer.index, w.index, "peer {}", key);
        prop_assert_eq!(p.source_address, w.source, "peer {}", key);
        let got: BTreeMap<IpNet, (RouteAttrs, String)> = p
            .routes
            .iter()
            .map(|(prefix, r)| (*prefix, ((*r.attrs).clone(), r.node.to_string())))
            .collect();
        prop_assert_eq!(&got, &w.routes, "peer {}", key);
    }
    let conflicts: BTreeSet<Conflict> = plan.conflicts.iter().cloned().collect();
    prop_assert_eq!(
        conflicts.len(),
        plan.conflicts.len(),
        "a conflict is listed twice"
    );
    prop_assert_eq!(&conflicts, &want.conflicts);
    let unannounceable: BTreeSet<(String, IpNet)> = plan
        .unannounceable
        .iter()
        .map(|u| {
            let family = match u.reason {
                UnannounceableReason::NoInternalIp { family } => family,
                UnannounceableReason::NoNextHop { peer, why } => {
                    assert!(plan.peers.contains_key(&peer));
                    why.family
                }
            };
            assert_eq!(
                family,
                match u.prefix {
                    IpNet::V4(_) => Family::Ipv4,
                    IpNet::V6(_) => Family::Ipv6,
                }
            );
            (u.node.to_string(), u.prefix)
        })
        .collect();
    prop_assert_eq!(&unannounceable, &want.unannounceable);
    Ok(())
}

/// The deletion of `deleted` (a node other than the local one) changes only prefixes
/// that node claimed, and every route it owned before.
fn check_deletion(
    before: &Plan,
    after: &Plan,
    deleted: &str,
    claimed: &BTreeSet<IpNet>,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        before.peers.keys().collect::<Vec<_>>(),
        after.peers.keys().collect::<Vec<_>>(),
        "deleting another node changed the sessions"
    );
    for (key, b) in &before.peers {
        let a = &after.peers[key];
        let held: BTreeMap<IpNet, Arc<RouteAttrs>> = b
            .routes
            .iter()
            .map(|(p, r)| (*p, Arc::clone(&r.attrs)))
            .collect();
        let diff = routes::diff(&held, &a.routes);
        for prefix in diff
            .withdraw
            .iter()
            .chain(diff.announce.iter().map(|(p, _)| p))
        {
            prop_assert!(
                claimed.contains(prefix),
                "peer {}: {} changed but {} did not claim it",
                key,
                prefix,
                deleted
            );
        }
        let changed: BTreeSet<IpNet> = b
            .routes
            .iter()
            .filter(|(p, r)| a.routes.get(*p) != Some(*r))
            .map(|(p, _)| *p)
            .chain(
                a.routes
                    .keys()
                    .filter(|p| !b.routes.contains_key(*p))
                    .copied(),
            )
            .collect();
        let owned: BTreeSet<IpNet> = b
            .routes
            .iter()
            .filter(|(_, r)| &*r.node == deleted)
            .map(|(p, _)| *p)
            .collect();
        prop_assert!(
            owned.is_subset(&changed),
            "peer {}: routes of {} kept: {:?}",
            key,
            deleted,
            owned.difference(&changed).collect::<Vec<_>>()
        );
        prop_assert!(
            changed.is_subset(claimed),
            "peer {}: changed {:?}, {} claimed {:?}",
            key,
            changed,
            deleted,
            claimed
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// After every random event (nodes, CIDRs, labels, addresses, the config) the plan
    /// is the expected one, and a deleted node's prefixes are withdrawn and nothing
    /// else. The plan is made as the daemon makes it, from the last plan
    /// (`plan_reusing`): it must equal the plan from scratch, and in cluster mode a route
    /// whose attributes did not change keeps the last plan's very `Arc`.
    #[test]
    fn after_every_event_the_plan_is_the_expected_one(
        initial in model(),
        events in prop::collection::vec(event(), 1..30),
        local in 0..NAMES.len(),
        cluster in any::<bool>(),
        over in prop::option::of(prop::sample::select(vec!["192.168.0.1", "fd99::1"])),
    ) {
        let local = NAMES[local];
        let mode = if cluster { AnnounceMode::Cluster } else { AnnounceMode::Local };
        let over: Option<IpAddr> = over.map(|o| o.parse().unwrap());
        let mut model = initial;
        let mut before = run_planner(&model, local, mode, over);
        check_plan(&before, &model, local, mode, over)?;
        for event in &events {
            let deleted = match event {
                Event::DeleteNode(i) => {
                    let name = NAMES[i % NAMES.len()];
                    model.claims().get(name).cloned().map(|claimed| (name, claimed))
                }
                _ => None,
            };
            model.apply(event);
            let full = run_planner(&model, local, mode, over);
            let after = run_planner_from(&model, local, mode, over, Some(&before));
            prop_assert_eq!(&after, &full, "planned from the last plan, after {:?}", event);
            check_plan(&after, &model, local, mode, over)?;
            if mode == AnnounceMode::Cluster {
                for (key, p) in &after.peers {
                    let Some(old) = before.peers.get(key) else { continue };
                    for (prefix, r) in p.routes.iter() {
                        if let Some(o) = old.routes.get(prefix) {
                            if o.attrs == r.attrs {
                                prop_assert!(Arc::ptr_eq(&o.attrs, &r.attrs),
                                    "{} to {}: equal attributes, a new Arc", prefix, key);
                            }
                        }
                    }
                }
            }
            match deleted {
                Some((name, _)) if name == local => {
                    prop_assert!(after.peers.is_empty(), "the local node is gone, its sessions too");
                }
                Some((name, claimed)) => check_deletion(&before, &after, name, &claimed)?,
                None => {}
            }
            before = after;
        }
    }

    #[test]
    fn planning_twice_gives_the_same_plan(m in model(), local in 0..NAMES.len(), cluster in any::<bool>()) {
        let mode = if cluster { AnnounceMode::Cluster } else { AnnounceMode::Local };
        let a = run_planner(&m, NAMES[local], mode, None);
        let b = run_planner(&m, NAMES[local], mode, None);
        prop_assert_eq!(&a, &b);
        for (key, p) in &a.peers {
            let held: BTreeMap<IpNet, Arc<RouteAttrs>> =
                p.routes.iter().map(|(p, r)| (*p, Arc::clone(&r.attrs))).collect();
            prop_assert!(routes::diff(&held, &b.peers[key].routes).is_empty(), "peer {}", key);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Multi-pool IPAM and `pod-cidr-pools` (issue #21)

const POOLS: [&str; 3] = ["default", "blue", "red"];

/// A multi-pool cluster: per node (by index into NAMES), per pool, the /24s it holds.
/// Node i's CIDRs are 10.i.j.0/24, so no two nodes claim the same space.
type Allocations = BTreeMap<usize, BTreeMap<usize, BTreeSet<u8>>>;

fn allocations() -> impl Strategy<Value = Allocations> {
    prop::collection::btree_map(
        0..NAMES.len(),
        prop::collection::btree_map(
            0..POOLS.len(),
            prop::collection::btree_set(0u8..16, 0..4),
            0..3,
        ),
        1..6,
    )
}

fn allocation_cidr(node: usize, j: u8) -> IpNet {
    IpNet::V4(ipnet::Ipv4Net::new(Ipv4Addr::new(10, node as u8, j, 0), 24).unwrap())
}

fn multi_pool_state(alloc: &Allocations) -> ClusterState {
    use podcidr_speaker::sources::model::{CiliumNodeFacts, PoolAllocation, PoolRanges};
    let mut state = ClusterState {
        cilium_config: Some(CiliumConfig {
            ipam: Some("multi-pool".into()),
            ..CiliumConfig::default()
        }),
        pod_ip_pools: Some(
            POOLS
                .iter()
                .map(|p| {
                    let ranges = PoolRanges {
                        ipv4: vec!["10.0.0.0/8".parse().unwrap()],
                        ipv6: Vec::new(),
                    };
                    (p.to_string(), ranges)
                })
                .collect(),
        ),
        ..ClusterState::default()
    };
    for (&node, pools) in alloc {
        let name = NAMES[node].to_owned();
        state.nodes.insert(
            name.clone(),
            NodeFacts {
                internal_ipv4: Some(Ipv4Addr::new(192, 168, 0, node as u8 + 1)),
                ..NodeFacts::default()
            },
        );
        let pools = pools
            .iter()
            .filter(|(_, js)| !js.is_empty())
            .map(|(&p, js)| PoolAllocation {
                pool: POOLS[p].to_owned(),
                cidrs: js.iter().map(|&j| allocation_cidr(node, j)).collect(),
            })
            .collect();
        state.insert_cilium_node(
            name,
            CiliumNodeFacts {
                pod_cidrs: Vec::new(),
                pools,
            },
        );
    }
    state
}

/// A peer's `pod-cidr-pools`: `None` (every pool) or some pools, each with a community.
fn pool_choice() -> impl Strategy<Value = Option<BTreeMap<usize, Option<u16>>>> {
    prop::option::of(prop::collection::btree_map(
        0..POOLS.len(),
        prop::option::of(1u16..100),
        1..3,
    ))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// In cluster mode, a peer holds exactly the CIDRs of the pools it takes (every pool
    /// without `pod-cidr-pools`), each with the peer's community plus its pool's; after
    /// one node's allocations change, only that node's routes differ.
    #[test]
    fn pod_cidr_pools_selects_exactly_the_listed_pools(
        alloc in allocations(),
        choice in pool_choice(),
        changed in allocations(),
    ) {
        let mut yaml = String::from(
            "peers:\n- peer-address: 10.255.0.1\n  peer-asn: 65000\n  my-asn: 65001\n  pod-cidr-communities: [\"65001:1\"]\n",
        );
        if let Some(choice) = &choice {
            yaml.push_str("  pod-cidr-pools:\n");
            for (&p, community) in choice {
                match community {
                    Some(c) => yaml.push_str(&format!("    {}: {{communities: [\"65001:{c}\"]}}\n", POOLS[p])),
                    None => yaml.push_str(&format!("    {}: {{}}\n", POOLS[p])),
                }
            }
        }
        let config = config::parse(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        let routes_of = |alloc: &Allocations| {
            let view = node_view(&multi_pool_state(alloc), IpamOverride::Auto).unwrap();
            let local = NAMES[*alloc.keys().next().unwrap()];
            let p = plan(&view, &config, &LocalNode::new(local), AnnounceMode::Cluster, &Overrides::default());
            p.peers.values().next().map(|pp| pp.routes.as_ref().clone()).unwrap_or_default()
        };
        let got = routes_of(&alloc);
        // Planned from the plan of `alloc` (the daemon's way), `changed` plans as from
        // scratch, the pools' communities included.
        let planned = |alloc: &Allocations, previous: Option<&Plan>| {
            let view = node_view(&multi_pool_state(alloc), IpamOverride::Auto).unwrap();
            let local = NAMES[*alloc.keys().next().unwrap()];
            plan_reusing(&view, &config, &LocalNode::new(local), AnnounceMode::Cluster, &Overrides::default(), previous)
        };
        let first = planned(&alloc, None);
        prop_assert_eq!(planned(&changed, Some(&first)), planned(&changed, None));
        let mut want: BTreeMap<IpNet, (String, Vec<u32>)> = BTreeMap::new();
        for (&node, pools) in &alloc {
            // A CIDR listed in two pools belongs to the first (Cilium never does this;
            // the mapping keeps the first and the model follows).
            let mut seen = BTreeSet::new();
            for (&p, js) in pools {
                let js: Vec<u8> = js.iter().copied().filter(|j| seen.insert(*j)).collect();
                let extra = match &choice {
                    None => Some(None),
                    Some(choice) => choice.get(&p).copied(),
                };
                let Some(extra) = extra else { continue };
                let mut communities = vec![(65001u32 << 16) | 1];
                communities.extend(extra.map(|c| (65001u32 << 16) | u32::from(c)));
                communities.sort_unstable();
                communities.dedup();
                for j in js {
                    want.insert(allocation_cidr(node, j), (NAMES[node].to_owned(), communities.clone()));
                }
            }
        }
        let got_simple: BTreeMap<IpNet, (String, Vec<u32>)> = got
            .iter()
            .map(|(p, r)| (*p, (r.node.to_string(), r.attrs.communities.clone())))
            .collect();
        prop_assert_eq!(&got_simple, &want);

        // One node's allocations change (the first node of `changed`, if it exists in
        // `alloc`): the other nodes' routes are the same values.
        let (&node, new_pools) = changed.iter().next().unwrap();
        if alloc.contains_key(&node) && alloc.len() > 1 {
            let mut next = alloc.clone();
            next.insert(node, new_pools.clone());
            let after = routes_of(&next);
            let others = |r: &routes::DesiredRoutes| -> BTreeMap<IpNet, (String, Vec<u32>)> {
                r.iter()
                    .filter(|(_, r)| &*r.node != NAMES[node])
                    .map(|(p, r)| (*p, (r.node.to_string(), r.attrs.communities.clone())))
                    .collect()
            };
            prop_assert_eq!(others(&got), others(&after));
        }
    }
}
