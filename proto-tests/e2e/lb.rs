//! LoadBalancer Service IPs end to end (issue 17): three per-node speakers (n1, n2, n3)
//! announce the IPs of `type: LoadBalancer` Services from the bgp-config's bgp
//! address-pools, beside their pod CIDRs, to two top-of-rack switches that keep every
//! path of a prefix: BIRD (eBGP; its table holds one route per BGP protocol for a prefix,
//! `show route for X all` lists them all, the best marked) and FRR (iBGP with
//! `maximum-paths ibgp`: the paths it would install as ECMP are flagged `multipath`).
//!
//! The Services and EndpointSlices live in the standalone cluster state, one file per
//! Service (`kind: List` of the Service and its EndpointSlice, as `kubectl get -o yaml`
//! prints them), so deleting a Service is deleting its file.
//!
//! Phases, each checked at both switches, path set by path set:
//! - start: an `externalTrafficPolicy: Local` Service with endpoints on n1 and n2 is held
//!   with exactly those two next hops; a Cluster Service (one ready endpoint) from all
//!   three nodes; two Services whose IPs share one /24 of a pool with `aggregation-length:
//!   24` give one /24 route from every node; communities arrive as the pools'
//!   `bgp-advertisements` name them (through `bgp-communities`), LOCAL_PREF over iBGP
//!   only; an IP outside every bgp pool is never announced;
//! - an endpoint moves (slice edited, n2 -> n3): n2 withdraws exactly that route, n3
//!   announces exactly it, n1 sends nothing;
//! - one of the two aggregated Services is deleted: the aggregate stays, nothing is sent;
//! - the Local Service is deleted: exactly its route is withdrawn, by exactly its nodes.
//!
//! Throughout, every pod CIDR route keeps the time BIRD learned it at (`since`) and its
//! FRR `lastUpdate`: no LB event re-sends or flaps it.
//!
//! [`flapping_service_never_withdraws_anything_else`]: a Service whose only endpoint
//! turns ready and unready every second, for ten seconds: its own route comes and goes,
//! every other route (LB and pod CIDR) stays untouched at BIRD.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use serde_json::Value;

use crate::fixture::{frr_maximum_paths, start_tors, BgpConfig, Peer, NODE_AS};
use crate::harness::bird::{self, Bird};
use crate::harness::frr::Frr;
use crate::harness::{v4, wait_for, Afi, BgpDaemon, Origin, Route};
use crate::isolated;
use crate::speaker::{net, node_ip, Inputs, NodeSpec, Speaker};
use crate::tor::{
    bird_imports, bird_route_times, frr_route_times, frr_updates_received, BirdImports, BirdTime,
    Learned,
};
use crate::{settle, WAIT};

const NODES: [u8; 3] = [1, 2, 3];

/// The `web` pool's advertisement: one /32 per IP, LOCAL_PREF 150 (sent over iBGP
/// only), the community named `web` in `bgp-communities`.
const WEB_LOCAL_PREF: u32 = 150;
const WEB_COMMUNITY: (u16, u16) = (65001, 80);
/// The `agg` pool's advertisement: the /24 aggregate, a named community and a literal
/// one.
const AGG_COMMUNITIES: [(u16, u16); 2] = [(65001, 24), (65001, 2400)];
const POD_COMMUNITY: (u16, u16) = (65001, 100);

fn bgp_config() -> String {
    let (w, a, b, p) = (
        WEB_COMMUNITY,
        AGG_COMMUNITIES[0],
        AGG_COMMUNITIES[1],
        POD_COMMUNITY,
    );
    BgpConfig::new([Peer::bird(), Peer::frr()])
        .section(&format!(
            "bgp-communities:
  web: \"{w0}:{w1}\"
  agg: \"{a0}:{a1}\"
address-pools:
  - name: web
    protocol: bgp
    addresses: [198.51.100.0/24]
    bgp-advertisements:
      - aggregation-length: 32
        localpref: {WEB_LOCAL_PREF}
        communities: [web]
  - name: agg
    protocol: bgp
    addresses: [203.0.113.0/24]
    bgp-advertisements:
      - aggregation-length: 24
        communities: [agg, \"{b0}:{b1}\"]
  - name: l2
    protocol: layer2
    addresses: [192.0.2.0/24]
",
            w0 = w.0,
            w1 = w.1,
            a0 = a.0,
            a1 = a.1,
            b0 = b.0,
            b1 = b.1,
        ))
        .stop_for_good()
        .pod_cidr_community(&format!("{}:{}", p.0, p.1))
        .yaml()
}

/// A LoadBalancer Service and its one EndpointSlice.
#[derive(Debug, Clone)]
pub struct ServiceSpec {
    pub name: String,
    /// `Local` or `Cluster`.
    pub policy: &'static str,
    pub ips: Vec<String>,
    /// (node, ready) per endpoint.
    pub endpoints: Vec<(String, bool)>,
}

impl ServiceSpec {
    pub fn new(name: &str, policy: &'static str, ips: &[&str]) -> Self {
        Self {
            name: name.into(),
            policy,
            ips: ips.iter().map(|s| s.to_string()).collect(),
            endpoints: Vec::new(),
        }
    }

    /// Sets the endpoints: one per node, `ready` for all of them.
    pub fn endpoints(mut self, nodes: &[&str], ready: bool) -> Self {
        self.endpoints = nodes.iter().map(|n| (n.to_string(), ready)).collect();
        self
    }

    pub fn file(&self) -> String {
        format!("svc-{}.yaml", self.name)
    }

    /// The Service and its EndpointSlice as `kubectl get svc,endpointslice -o yaml`
    /// prints them (the fields that matter, and a few that must not).
    pub fn yaml(&self) -> String {
        let mut y = String::from("apiVersion: v1\nkind: List\nitems:\n");
        let _ = writeln!(
            y,
            "- apiVersion: v1
  kind: Service
  metadata:
    name: {name}
    namespace: default
  spec:
    type: LoadBalancer
    externalTrafficPolicy: {policy}
    ports:
    - port: 80
      protocol: TCP
      targetPort: 8080
  status:
    loadBalancer:
      ingress:",
            name = self.name,
            policy = self.policy
        );
        for ip in &self.ips {
            let _ = writeln!(y, "      - ip: {ip}\n        ipMode: VIP");
        }
        let _ = writeln!(
            y,
            "- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata:
    name: {name}-x7k2p
    namespace: default
    labels:
      kubernetes.io/service-name: {name}
      endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io
  addressType: IPv4
  ports:
  - port: 8080
    protocol: TCP
  endpoints:{empty}",
            name = self.name,
            empty = if self.endpoints.is_empty() { " []" } else { "" }
        );
        for (i, (node, ready)) in self.endpoints.iter().enumerate() {
            let _ = writeln!(
                y,
                "  - addresses: [\"10.244.200.{}\"]
    conditions:
      ready: {ready}
      serving: {ready}
      terminating: false
    nodeName: {node}",
                i + 1
            );
        }
        y
    }
}

fn write_service(inputs: &Inputs, svc: &ServiceSpec) {
    inputs.write_cluster_file(&svc.file(), &svc.yaml());
}

fn pod_cidr(n: u8) -> String {
    format!("10.244.{n}.0/24")
}

/// A route as BIRD (eBGP) shows it: BIRD fills in its default LOCAL_PREF 100.
fn bird_route(prefix: &str, node: u8, communities: &[(u16, u16)]) -> Route {
    let mut communities = communities.to_vec();
    communities.sort_unstable();
    Route {
        prefix: net(prefix),
        next_hop: node_ip(node),
        as_path: vec![NODE_AS],
        local_pref: Some(100),
        med: None,
        communities,
        large_communities: vec![],
        origin: Origin::Incomplete,
        stale: false,
    }
}

/// The same route as FRR (iBGP) shows it: empty AS_PATH, the LOCAL_PREF sent.
fn frr_route(prefix: &str, node: u8, communities: &[(u16, u16)], local_pref: u32) -> Route {
    Route {
        as_path: vec![],
        local_pref: Some(local_pref),
        ..bird_route(prefix, node, communities)
    }
}

/// The LB routes in force: prefix -> the nodes announcing it.
type LbState = BTreeMap<&'static str, BTreeSet<u8>>;

const WEB_LOCAL: &str = "198.51.100.10/32";
const WEB_CLUSTER: &str = "198.51.100.20/32";
const AGG: &str = "203.0.113.0/24";

fn lb_communities(prefix: &str) -> (&'static [(u16, u16)], u32) {
    if prefix == AGG {
        (&AGG_COMMUNITIES, 100)
    } else {
        (std::slice::from_ref(&WEB_COMMUNITY), WEB_LOCAL_PREF)
    }
}

/// What each switch must hold from each node: its pod CIDR and the LB routes it
/// announces.
fn expected(lb: &LbState) -> (Expected, Expected) {
    let (mut bird, mut frr) = (Expected::new(), Expected::new());
    for n in NODES {
        let pod = pod_cidr(n);
        let mut b = vec![bird_route(&pod, n, &[POD_COMMUNITY])];
        let mut f = vec![frr_route(&pod, n, &[POD_COMMUNITY], 100)];
        for (prefix, nodes) in lb {
            if nodes.contains(&n) {
                let (communities, lp) = lb_communities(prefix);
                b.push(bird_route(prefix, n, communities));
                f.push(frr_route(prefix, n, communities, lp));
            }
        }
        bird.insert(node_ip(n), b);
        frr.insert(node_ip(n), f);
    }
    (bird, frr)
}

type Expected = BTreeMap<IpAddr, Vec<Route>>;

/// Routes compared as sets: prefixes and communities in order.
fn normalized(routes: &[Route]) -> Vec<Route> {
    let mut v: Vec<Route> = routes
        .iter()
        .cloned()
        .map(|mut r| {
            r.communities.sort_unstable();
            r
        })
        .collect();
    v.sort_by_key(|r| r.prefix);
    v
}

/// Waits until `tor` holds exactly `want[n]` from each node `n`.
fn wait_exact(tor: &dyn BgpDaemon, want: &Expected, what: &str, speakers: &[Speaker]) {
    for (neighbor, routes) in want {
        let want = normalized(routes);
        tor.wait_routes(*neighbor, Afi::Ipv4, WAIT, &|got| normalized(got) == want)
            .unwrap_or_else(|e| {
                let logs: String = speakers
                    .iter()
                    .map(|s| format!("--- {}\n{}\n", s.name, s.log_tail(15)))
                    .collect();
                panic!(
                    "{what}: {} never held exactly {want:?} from {neighbor}: {e}\n{logs}",
                    tor.kind()
                )
            });
    }
}

/// The next hops of every route BIRD holds for `prefix` (one per BGP protocol that
/// sent it): `show route for PREFIX all`.
fn bird_paths(b: &Bird, prefix: &str) -> BTreeSet<IpAddr> {
    match b.control(&format!("show route for {prefix} all")) {
        Ok(text) => bird::parse_routes(&text)
            .unwrap_or_else(|e| panic!("bird show route for {prefix}: {e}\n{text}"))
            .into_iter()
            .filter(|r| r.prefix == net(prefix))
            .map(|r| r.next_hop)
            .collect(),
        // 8001 "Network not found".
        Err(_) => BTreeSet::new(),
    }
}

/// The next hops FRR selected for `prefix`: the best path and every path flagged
/// `multipath` (what it would install as ECMP).
pub(crate) fn frr_multipath(f: &Frr, prefix: &str) -> BTreeSet<IpAddr> {
    let text = f
        .vtysh(&[&format!("show bgp ipv4 unicast {prefix} json")])
        .unwrap_or_else(|e| panic!("frr show bgp {prefix}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("frr json: {e}: {text}"));
    v.get("paths")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| {
            p.get("multipath").and_then(Value::as_bool) == Some(true)
                || p.pointer("/bestpath/overall").and_then(Value::as_bool) == Some(true)
        })
        .filter_map(|p| p.pointer("/nexthops/0/ip")?.as_str()?.parse().ok())
        .collect()
}

/// Asserts the path set of every LB prefix at both switches: exactly the nodes that
/// announce it (ECMP at FRR), and no path at all for a prefix no node announces.
fn assert_paths(b: &Bird, f: &Frr, lb: &LbState, gone: &[&str], what: &str) {
    for (prefix, nodes) in lb {
        let want: BTreeSet<IpAddr> = nodes.iter().map(|&n| node_ip(n)).collect();
        assert_eq!(
            bird_paths(b, prefix),
            want,
            "{what}: BIRD's paths of {prefix}"
        );
        // FRR computes multipath after the best path; the routes are in already.
        wait_for(&format!("FRR multipath of {prefix}"), WAIT, || {
            let got = frr_multipath(f, prefix);
            if got == want {
                Ok(())
            } else {
                Err(format!("{got:?}"))
            }
        })
        .unwrap_or_else(|e| panic!("{what}: FRR's ECMP set of {prefix} is not {want:?}: {e}"));
    }
    for prefix in gone {
        assert_eq!(
            bird_paths(b, prefix),
            BTreeSet::new(),
            "{what}: BIRD holds {prefix}"
        );
        assert_eq!(
            frr_multipath(f, prefix),
            BTreeSet::new(),
            "{what}: FRR holds {prefix}"
        );
    }
}

/// Per node: BIRD's import counters, the `since` of each route at BIRD, FRR's UPDATE
/// count and each route's FRR `lastUpdate`.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    bird: BirdImports,
    bird_times: BTreeMap<IpNet, BirdTime>,
    frr_updates: u64,
    frr_times: BTreeMap<IpNet, Learned>,
}

impl Seen {
    /// Every route node `n` had at both switches, but `except`, is still there with the
    /// time it was learned at in `self`: not withdrawn, not re-sent.
    fn assert_kept(&self, after: &Seen, except: IpNet, n: u8, what: &str) {
        for (prefix, t) in self.bird_times.iter().filter(|(p, _)| **p != except) {
            assert_eq!(
                after.bird_times.get(prefix),
                Some(t),
                "{what}: BIRD re-learned or lost {prefix} of n{n}"
            );
        }
        for (prefix, t) in self.frr_times.iter().filter(|(p, _)| **p != except) {
            assert_eq!(
                after.frr_times.get(prefix),
                Some(t),
                "{what}: FRR re-learned or lost {prefix} of n{n}"
            );
        }
    }
}

fn seen(b: &Bird, f: &Frr) -> BTreeMap<u8, Seen> {
    NODES
        .iter()
        .map(|&n| {
            let a = node_ip(n);
            let s = Seen {
                bird: bird_imports(b, a).unwrap_or_else(|| panic!("BIRD - n{n}: no counters")),
                bird_times: bird_route_times(b, a),
                frr_updates: frr_updates_received(f, a),
                frr_times: frr_route_times(f, a),
            };
            (n, s)
        })
        .collect()
}

/// After a change: node `n` sent BIRD exactly `sent[n]` (updates, withdraws) prefixes
/// (a node not listed: none, and FRR got no UPDATE from it either), every route but
/// `changed` kept its time at both switches, and each pod CIDR still has the time it
/// had at the start.
fn assert_only(
    before: &BTreeMap<u8, Seen>,
    after: &BTreeMap<u8, Seen>,
    start: &BTreeMap<u8, Seen>,
    sent: &[(u8, (u64, u64))],
    changed: &str,
    what: &str,
) {
    let changed = net(changed);
    for n in NODES {
        let (b, a) = (&before[&n], &after[&n]);
        let want = sent
            .iter()
            .find(|(m, _)| *m == n)
            .map_or((0, 0), |(_, s)| *s);
        assert_eq!(
            (
                a.bird.updates - b.bird.updates,
                a.bird.withdraws - b.bird.withdraws
            ),
            want,
            "{what}: n{n}'s (updates, withdraws) at BIRD"
        );
        if want == (0, 0) {
            assert_eq!(
                a.frr_updates, b.frr_updates,
                "{what}: n{n} sent FRR an UPDATE"
            );
        }
        b.assert_kept(a, changed, n, what);
        let pod = net(&pod_cidr(n));
        assert_eq!(
            a.bird_times.get(&pod),
            start[&n].bird_times.get(&pod),
            "{what}: n{n}'s pod CIDR changed age at BIRD since the start"
        );
        assert_eq!(
            a.frr_times.get(&pod),
            start[&n].frr_times.get(&pod),
            "{what}: n{n}'s pod CIDR changed age at FRR since the start"
        );
    }
}

/// BIRD (eBGP) and FRR (iBGP, `maximum-paths ibgp 8`) peering with n1..n3, the
/// bgp-config and the three nodes written, the speakers not started.
fn switches(ns: &crate::harness::netns::Netns) -> (Bird, Frr, Inputs) {
    let (bird, frr) = start_tors(ns.dir(), &NODES.map(node_ip));
    frr_maximum_paths(&frr);
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_config(&bgp_config());
    for n in NODES {
        inputs.write_node(&NodeSpec::new(&format!("n{n}"), node_ip(n)).node_cidrs(&[&pod_cidr(n)]));
    }
    (bird, frr, inputs)
}

fn start_speakers(ns: &crate::harness::netns::Netns, inputs: &Inputs) -> Vec<Speaker> {
    NODES
        .iter()
        .map(|&n| {
            let name = format!("n{n}");
            let mut args = Speaker::standalone_args(inputs, &name, node_ip(n));
            args.push("--announce-lb-ips=on".into());
            Speaker::start(ns.dir(), &name, &args)
        })
        .collect()
}

fn wait_sessions(bird: &Bird, frr: &Frr, speakers: &[Speaker]) {
    for (i, n) in NODES.iter().enumerate() {
        let log = || speakers[i].log_tail(30);
        bird.wait_established(node_ip(*n), WAIT)
            .unwrap_or_else(|e| panic!("BIRD - n{n}: {e}\n{}", log()));
        frr.wait_established(node_ip(*n), WAIT)
            .unwrap_or_else(|e| panic!("FRR - n{n}: {e}\n{}", log()));
    }
}

fn nodes(set: &[u8]) -> BTreeSet<u8> {
    set.iter().copied().collect()
}

#[test]
fn lb_ips_follow_endpoints_with_exact_path_sets_and_never_touch_pod_cidrs() {
    let mut addrs = vec![v4(2), v4(3)];
    addrs.extend(NODES.map(node_ip));
    let Some(ns) = isolated!(&addrs, Duration::from_secs(300)) else {
        return;
    };
    let (bird, frr, inputs) = switches(&ns);

    let mut local_web =
        ServiceSpec::new("local-web", "Local", &["198.51.100.10"]).endpoints(&["n1", "n2"], true);
    // One ready endpoint (on n1) and one that is not: a Cluster Service needs one.
    let mut cluster_web =
        ServiceSpec::new("cluster-web", "Cluster", &["198.51.100.20"]).endpoints(&["n1"], true);
    cluster_web.endpoints.push(("n2".into(), false));
    let agg_a = ServiceSpec::new("agg-a", "Cluster", &["203.0.113.5"]).endpoints(&["n3"], true);
    let agg_b = ServiceSpec::new("agg-b", "Cluster", &["203.0.113.6"]).endpoints(&["n2"], true);
    // In a layer2 pool only, and in no pool: never announced.
    let l2 = ServiceSpec::new("l2", "Cluster", &["192.0.2.7"]).endpoints(&["n1"], true);
    let outside = ServiceSpec::new("outside", "Cluster", &["192.0.3.7"]).endpoints(&["n1"], true);
    for s in [&local_web, &cluster_web, &agg_a, &agg_b, &l2, &outside] {
        write_service(&inputs, s);
    }
    let speakers = start_speakers(&ns, &inputs);
    wait_sessions(&bird, &frr, &speakers);

    let mut lb: LbState = [
        (WEB_LOCAL, nodes(&[1, 2])),
        (WEB_CLUSTER, nodes(&NODES)),
        (AGG, nodes(&NODES)),
    ]
    .into_iter()
    .collect();
    let (bird_want, frr_want) = expected(&lb);
    wait_exact(&bird, &bird_want, "start", &speakers);
    wait_exact(&frr, &frr_want, "start", &speakers);
    assert_paths(
        &bird,
        &frr,
        &lb,
        &["192.0.2.7/32", "192.0.3.7/32", "203.0.113.5/32"],
        "start",
    );
    settle();
    let start = seen(&bird, &frr);

    // An endpoint moves: n2's goes, one on n3 comes.
    local_web = local_web.endpoints(&["n1", "n3"], true);
    write_service(&inputs, &local_web);
    lb.insert(WEB_LOCAL, nodes(&[1, 3]));
    let (bird_want, frr_want) = expected(&lb);
    wait_exact(&bird, &bird_want, "endpoint moved", &speakers);
    wait_exact(&frr, &frr_want, "endpoint moved", &speakers);
    assert_paths(&bird, &frr, &lb, &[], "endpoint moved");
    settle();
    let after = seen(&bird, &frr);
    assert_only(
        &start,
        &after,
        &start,
        &[(2, (0, 1)), (3, (1, 0))],
        WEB_LOCAL,
        "endpoint moved",
    );

    // One of the two Services of the aggregate goes: the other still qualifies.
    let before = after;
    inputs.delete_cluster_file(&agg_a.file());
    settle();
    wait_exact(&bird, &bird_want, "agg-a deleted", &speakers);
    wait_exact(&frr, &frr_want, "agg-a deleted", &speakers);
    assert_paths(&bird, &frr, &lb, &[], "agg-a deleted");
    let after = seen(&bird, &frr);
    assert_only(&before, &after, &start, &[], AGG, "agg-a deleted");
    assert_eq!(before, after, "agg-a deleted: the switches saw a change");

    // The Local Service goes: exactly its route, from exactly its two nodes.
    let before = after;
    inputs.delete_cluster_file(&local_web.file());
    lb.remove(WEB_LOCAL);
    let (bird_want, frr_want) = expected(&lb);
    wait_exact(&bird, &bird_want, "local-web deleted", &speakers);
    wait_exact(&frr, &frr_want, "local-web deleted", &speakers);
    assert_paths(&bird, &frr, &lb, &[WEB_LOCAL], "local-web deleted");
    settle();
    let after = seen(&bird, &frr);
    assert_only(
        &before,
        &after,
        &start,
        &[(1, (0, 1)), (3, (0, 1))],
        WEB_LOCAL,
        "local-web deleted",
    );

    stop_all(speakers);
}

fn stop_all(speakers: Vec<Speaker>) {
    for mut s in speakers {
        let status = s.terminate();
        assert!(
            status.success(),
            "speaker {} exit {status:?}:\n{}",
            s.name,
            s.log_tail(30)
        );
    }
}

#[test]
fn flapping_service_never_withdraws_anything_else() {
    let mut addrs = vec![v4(2), v4(3)];
    addrs.extend(NODES.map(node_ip));
    let Some(ns) = isolated!(&addrs, Duration::from_secs(240)) else {
        return;
    };
    let (bird, frr, inputs) = switches(&ns);
    let steady =
        ServiceSpec::new("steady", "Local", &["198.51.100.10"]).endpoints(&["n1", "n2"], true);
    let mut flapper =
        ServiceSpec::new("flapper", "Cluster", &["198.51.100.20"]).endpoints(&["n2"], true);
    write_service(&inputs, &steady);
    write_service(&inputs, &flapper);
    let speakers = start_speakers(&ns, &inputs);
    wait_sessions(&bird, &frr, &speakers);
    let lb: LbState = [(WEB_LOCAL, nodes(&[1, 2])), (WEB_CLUSTER, nodes(&NODES))]
        .into_iter()
        .collect();
    let (bird_want, frr_want) = expected(&lb);
    wait_exact(&bird, &bird_want, "start", &speakers);
    wait_exact(&frr, &frr_want, "start", &speakers);
    settle();
    let before = seen(&bird, &frr);

    // Ten seconds of flapping: the only endpoint turns unready, then ready, each second.
    let flaps = 10;
    let t0 = Instant::now();
    for i in 0..flaps {
        flapper = flapper.endpoints(&["n2"], i % 2 == 1);
        write_service(&inputs, &flapper);
        let next = t0 + Duration::from_secs(i + 1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    // The last write made it ready again: everything as at the start.
    wait_exact(&bird, &bird_want, "after flapping", &speakers);
    wait_exact(&frr, &frr_want, "after flapping", &speakers);
    settle();
    let after = seen(&bird, &frr);
    for n in NODES {
        let (b, a) = (&before[&n], &after[&n]);
        // Each node withdrew and announced the flapper's route at most once per flap,
        // and as often one as the other (it ends announced).
        let withdraws = a.bird.withdraws - b.bird.withdraws;
        let updates = a.bird.updates - b.bird.updates;
        eprintln!("flapping: n{n} sent BIRD {updates} updates and {withdraws} withdraws for {flaps} flaps");
        assert!(
            withdraws <= flaps / 2 && updates == withdraws,
            "n{n}: {updates} updates and {withdraws} withdraws for {flaps} flaps"
        );
        b.assert_kept(a, net(WEB_CLUSTER), n, "flapping");
    }
    // The flaps were seen (not all coalesced away by the file source): at least one
    // node withdrew the route at least once.
    assert!(
        NODES
            .iter()
            .any(|n| after[n].bird.withdraws > before[n].bird.withdraws),
        "no flap reached BIRD: the test did not test anything"
    );
    stop_all(speakers);
}
