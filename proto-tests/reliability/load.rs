//! Load: the speaker in cluster mode with 50,000 nodes in view and 16 peers (8 eBGP, 8
//! iBGP), soaking while the cluster churns at a steady rate (nodes added, deleted, and
//! given new pod CIDRs), re-planned with the real planner after every batch as the
//! daemon does. At the end every peer's RIB must be exactly the plan's routes for it,
//! attribute by attribute (next hop = the owning node's InternalIP), no session may have
//! been reset, and RSS must not have grown past a bound.
//!
//! The 16 peers are raw peers in the test's namespace (100.64.0.2-17), each following
//! the speaker's UPDATEs on a thread of its own. `PODCIDR_SOAK_SECS` (default 20) and
//! `PODCIDR_SOAK_RATE` (changes per second, default 40) scale the run.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipnet::{IpNet, Ipv4Net};
use podcidr_speaker::bgp::session::State;
use podcidr_speaker::config::{self, Config, PeerKey};
use podcidr_speaker::routes::{
    plan, AnnounceMode, DesiredRoutes, LocalNode, NextHop, Overrides, Plan,
};
use podcidr_speaker::sources::model::{CidrSource, IpamMode, NodeEntry, NodeView};

use crate::fixture::ctx;
use crate::harness::{v4, v6};
use crate::isolated;
use crate::raw_peer::{self, fingerprint, live_rss_kb, RawListener, Seen};
use crate::speaker::{runtime, spec, Speaker};

const NODES: u32 = 50_000;
const PEERS: u8 = 16;
const MY_AS: u32 = 65001;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn entry(name: &str, i: u32, cidr: Ipv4Net) -> NodeEntry {
    let [_, a, b, c] = i.to_be_bytes();
    NodeEntry {
        internal_ipv4: Some(Ipv4Addr::new(172, 16 + a, b, c)),
        node_cidrs: vec![IpNet::V4(cidr)],
        node_source: Some(CidrSource::NodeSpec),
        source: Some(CidrSource::NodeSpec),
        prefixes: vec![IpNet::V4(cidr)],
        ..NodeEntry::new(Arc::from(name))
    }
}

/// Pod CIDRs handed out in order: 10.0.0.0/24, 10.0.1.0/24, ... then 11.x.y.0/24.
fn cidr(n: u32) -> Ipv4Net {
    Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 + (n << 8)), 24).expect("/24")
}

fn initial_view() -> NodeView {
    NodeView::new(
        IpamMode::Kubernetes,
        (0..NODES)
            .map(|i| {
                let name = format!("node-{i:05}");
                (Arc::from(name.as_str()), entry(&name, i, cidr(i)))
            })
            .collect(),
        Vec::new(),
    )
}

fn config() -> Config {
    let mut y = String::from("peers:\n");
    for i in 0..PEERS {
        let peer_asn = if i < PEERS / 2 { 65002 } else { MY_AS };
        y += &format!(
            "  - {{peer-address: {}, peer-asn: {peer_asn}, my-asn: {MY_AS}, hold-time: 9s, \
             connect-retry-time: 1s, pod-cidr-communities: ['65001:{i}']}}\n",
            v4(2 + i)
        );
    }
    config::parse(&y).expect("load config")
}

/// The route a peer must see for `route`, from the plan's attributes.
fn expected(routes: &DesiredRoutes) -> HashMap<IpNet, u64> {
    routes
        .iter()
        .map(|(p, r)| {
            let a = &r.attrs;
            let seen = Seen {
                origin: Some(a.origin as u8),
                as_path: a.as_path.clone(),
                next_hop: Some(match &a.next_hop {
                    NextHop::Address(ip) => *ip,
                    NextHop::SessionLocal if p.addr().is_ipv4() => v4(1),
                    NextHop::SessionLocal => v6(1),
                }),
                med: a.med,
                local_pref: a.local_pref,
                communities: a.communities.clone(),
            };
            (*p, fingerprint(&seen))
        })
        .collect()
}

/// A tiny deterministic generator for the churn.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn fifty_thousand_nodes_sixteen_peers_churning_end_exactly_as_planned() {
    let soak = Duration::from_secs(env_u64("PODCIDR_SOAK_SECS", 20));
    let rate = env_u64("PODCIDR_SOAK_RATE", 40);
    let mut addrs: Vec<IpAddr> = (1..=1 + PEERS).map(v4).collect();
    addrs.push(v6(1));
    let Some(_ns) = isolated!(&addrs, soak + Duration::from_secs(150)) else {
        return;
    };
    let config = config();
    let local = LocalNode::new("node-00000");
    let over = Overrides::default();
    let mut view = initial_view();
    let t = Instant::now();
    let first = plan(&view, &config, &local, AnnounceMode::Cluster, &over);
    let plan_time = t.elapsed();
    assert_eq!(first.peers.len(), usize::from(PEERS));
    assert_eq!(first.route_count(), NODES as usize * usize::from(PEERS));

    let keys: Vec<PeerKey> = config.peers.iter().map(|p| p.key()).collect();
    let listeners: Vec<RawListener> = (0..PEERS)
        .map(|i| RawListener::bind((v4(2 + i), 179).into()))
        .collect();
    let rt = runtime();
    let speakers: Vec<Speaker> = config
        .peers
        .iter()
        .map(|p| Speaker::start(&rt, spec(1, p), first.peers[&p.key()].routes.clone()))
        .collect();
    let t0 = Instant::now();
    let followers: Vec<raw_peer::Follower> = listeners
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut conn = l.accept();
            let asn = config.peers[i].peer_asn as u16;
            let id = match v4(2 + i as u8) {
                IpAddr::V4(a) => a,
                IpAddr::V6(_) => unreachable!("v4() is IPv4"),
            };
            let open = raw_peer::open(
                4,
                asn,
                9,
                id,
                &raw_peer::cap_params(&[
                    &raw_peer::CAP_MP_IPV4,
                    &raw_peer::CAP_MP_IPV6,
                    &raw_peer::cap_as4(u32::from(asn)),
                ]),
            );
            conn.handshake(&open);
            conn.start_keepalives(Duration::from_secs(3));
            conn.follow(ctx())
        })
        .collect();
    // The initial tables: every peer holds its plan.
    let synced = |plan: &Plan, what: &str, timeout: Duration| {
        let deadline = Instant::now() + timeout;
        for (i, f) in followers.iter().enumerate() {
            let want = expected(&plan.peers[&keys[i]].routes);
            loop {
                if let Some(why) = f.failed() {
                    panic!("peer {i}: {why}");
                }
                let got = f.snapshot();
                if got == want {
                    break;
                }
                if Instant::now() > deadline {
                    let missing = want.keys().filter(|p| !got.contains_key(p)).count();
                    let extra = got.keys().filter(|p| !want.contains_key(p)).count();
                    let differ = want
                        .iter()
                        .filter(|(p, v)| got.get(p).is_some_and(|g| g != *v))
                        .count();
                    panic!(
                        "{what}: peer {i} holds {} routes, plan {}: {missing} missing, \
                         {extra} extra, {differ} with other attributes",
                        got.len(),
                        want.len()
                    );
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    synced(&first, "initial sync", Duration::from_secs(120));
    let initial_sync = t0.elapsed();
    drop(first);
    let rss_synced = live_rss_kb();

    // The soak: a steady rate of changes, re-planned every tick.
    let tick = Duration::from_millis(500);
    let per_tick = (rate * tick.as_millis() as u64 / 1000).max(1);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut next_cidr = NODES;
    let mut next_node = 0u32;
    let (mut added, mut deleted, mut moved, mut plans) = (0u64, 0u64, 0u64, 0u64);
    let mut max_plan = Duration::ZERO;
    let mut rss_max = rss_synced;
    // The baseline of the growth check: a quarter into the soak. Right after the sync it
    // is lower than the steady state: each Adj-RIB-Out frees its drained send queues
    // (50,000 prefixes per peer) once the table is out, and the soak's first plans take
    // pages the allocator then keeps. A leak per change or per plan still grows over the
    // remaining three quarters.
    let mut rss_settled = None;
    let started = Instant::now();
    let mut last = None;
    while started.elapsed() < soak {
        let tick_start = Instant::now();
        for _ in 0..per_tick {
            let names: usize = view.nodes.len();
            match rng.below(3) {
                0 => {
                    let name = format!("added-{next_node:05}");
                    let e = entry(&name, NODES + next_node, cidr(next_cidr));
                    view.nodes.insert(Arc::from(name.as_str()), e);
                    next_node += 1;
                    next_cidr += 1;
                    added += 1;
                }
                k => {
                    let idx = 1 + rng.below(names as u64 - 1) as usize;
                    let name = view.nodes.keys().nth(idx).cloned().expect("a node");
                    if &*name == "node-00000" {
                        continue;
                    }
                    if k == 1 {
                        view.nodes.remove(&name);
                        deleted += 1;
                    } else {
                        let e = view.nodes.get_mut(&name).expect("node");
                        // A fresh CIDR: the view's overlaps (none) stay true.
                        e.prefixes = vec![IpNet::V4(cidr(next_cidr))];
                        e.node_cidrs = e.prefixes.clone();
                        next_cidr += 1;
                        moved += 1;
                    }
                }
            }
        }
        let t = Instant::now();
        let p = plan(&view, &config, &local, AnnounceMode::Cluster, &over);
        max_plan = max_plan.max(t.elapsed());
        plans += 1;
        for (i, s) in speakers.iter().enumerate() {
            s.set_routes(p.peers[&keys[i]].routes.clone());
        }
        last = Some(p);
        let rss = live_rss_kb();
        rss_max = rss_max.max(rss);
        if rss_settled.is_none() && started.elapsed() >= soak / 4 {
            rss_settled = Some(rss);
        }
        for (i, f) in followers.iter().enumerate() {
            if let Some(why) = f.failed() {
                panic!("peer {i} during the soak: {why}");
            }
        }
        if let Some(rest) = tick.checked_sub(tick_start.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    let churned = started.elapsed();
    let last = last.expect("at least one tick");

    // Everything written, every session the one it started with, every RIB the plan.
    for (i, s) in speakers.iter().enumerate() {
        let st = s.wait("all written", Duration::from_secs(60), |st| {
            st.pending == 0 && st.write_buffer == 0
        });
        assert_eq!(
            (
                st.state,
                st.stats.established_count,
                st.stats.sent.notification
            ),
            (State::Established, 1, 0),
            "peer {i}: no reset during the soak"
        );
    }
    synced(&last, "after the soak", Duration::from_secs(60));
    let rss_end = live_rss_kb();
    let rss_settled = rss_settled.expect("the soak ran a quarter of its time");
    let grown = rss_end.saturating_sub(rss_settled);
    let routes: usize = last.route_count();
    // The view, the plan, the 16 Adj-RIB-Outs and the 16 raw tables grow with the nodes
    // added minus those deleted (tens); one leaked plan alone (16 route sets of 50,000)
    // is about 80 MB, and a leak per change or per plan would grow with every tick.
    let bound_kb = 96 * 1024;
    println!(
        "load: {NODES} nodes x {PEERS} peers; plan {plan_time:?} (worst during the soak \
         {max_plan:?}); initial sync of {} routes in {initial_sync:?}; soak {churned:?} at \
         {rate} changes/s: {added} added, {deleted} deleted, {moved} new CIDRs, {plans} \
         plans; final {routes} routes, every RIB exactly the plan, no session reset; RSS \
         {rss_synced} kB after sync, {rss_settled} kB a quarter into the soak, peak \
         {rss_max} kB, end {rss_end} kB (+{grown} kB from the quarter, bound {bound_kb} kB; \
         live heap, after malloc_trim)",
        NODES as usize * usize::from(PEERS),
    );
    assert!(
        grown < bound_kb,
        "RSS grew {grown} kB over the last three quarters of the soak"
    );
    drop(followers);
    drop(speakers);
}
