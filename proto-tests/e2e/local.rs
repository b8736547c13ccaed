//! `--announce local`, the DaemonSet: one speaker process per node, each with its own
//! `--source-address`, all following one standalone cluster state. BIRD (eBGP, every
//! node) and FRR (iBGP, only nodes labelled `tor2=yes`: the node-selector gives them an
//! extra peer) are the top-of-rack switches.
//!
//! The cluster is cluster-pool with the outage's permutation on two nodes (Node and
//! CiliumNode CIDRs swapped): the switches must hold the CiliumNode CIDRs.
//!
//! Phases, each asserting every switch's RIB and that nothing else moved: start; delete
//! a node; change a node's CIDR; edit labels (an FRR session opens, another closes);
//! SIGTERM (exit 0, Cease to the switches).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;

use crate::fixture::{start_tors, BgpConfig, Peer, NODE_AS};
use crate::harness::bird::Bird;
use crate::harness::frr::Frr;
use crate::harness::{v4, Afi, BgpDaemon, Origin, Route, RoutesExt};
use crate::isolated;
use crate::speaker::{net, node_ip, Inputs, NodeSpec, Speaker};
use crate::tor::{
    bird_imports, bird_notifications_received, bird_route_times, frr_last_notification,
    frr_route_times, frr_updates_received, Learned,
};
use crate::{settle, wait_exact, WAIT};
use podcidr_speaker::daemon::SHUTDOWN_MESSAGE;

fn bgp_config() -> String {
    BgpConfig::new([Peer::bird(), Peer::frr().selector("tor2", "yes")])
        .stop_for_good()
        .pod_cidr_community("65001:100")
        .yaml()
}

/// The four nodes at the start. n1 and n2 have the outage's swap: their Node says the
/// other's CIDR; the CiliumNode (in force for cluster-pool) is right.
fn nodes() -> Vec<NodeSpec> {
    vec![
        NodeSpec::new("n1", node_ip(1))
            .label("rack", "r1")
            .node_cidrs(&["10.244.2.0/24"])
            .cilium_cidrs(&["10.244.1.0/24"]),
        NodeSpec::new("n2", node_ip(2))
            .label("rack", "r1")
            .label("tor2", "yes")
            .node_cidrs(&["10.244.1.0/24"])
            .cilium_cidrs(&["10.244.2.0/24", "10.244.102.0/24"]),
        NodeSpec::new("n3", node_ip(3))
            .label("rack", "r2")
            .label("tor2", "yes")
            .node_cidrs(&["10.244.3.0/24"])
            .cilium_cidrs(&["10.244.3.0/24"]),
        NodeSpec::new("n4", node_ip(4))
            .label("rack", "r2")
            .node_cidrs(&["10.244.4.0/24"])
            .cilium_cidrs(&["10.244.4.0/24"]),
    ]
}

/// A pod CIDR route as BIRD shows it: eBGP from the node's address; BIRD fills in its
/// default LOCAL_PREF 100.
pub(crate) fn bird_route(prefix: &str, node: u8) -> Route {
    Route {
        prefix: net(prefix),
        next_hop: node_ip(node),
        as_path: vec![NODE_AS],
        local_pref: Some(100),
        med: None,
        communities: vec![(65001, 100)],
        large_communities: vec![],
        origin: Origin::Incomplete,
        stale: false,
    }
}

/// The same route as FRR shows it over iBGP: empty AS_PATH, the speaker's LOCAL_PREF.
pub(crate) fn frr_route(prefix: &str, node: u8) -> Route {
    Route {
        as_path: vec![],
        local_pref: Some(100),
        ..bird_route(prefix, node)
    }
}

/// What each switch must hold from each node's speaker.
pub(crate) type Expected = BTreeMap<IpAddr, Vec<Route>>;

pub(crate) fn expect(routes: &[(u8, &[&str])], make: fn(&str, u8) -> Route) -> Expected {
    routes
        .iter()
        .map(|(n, prefixes)| (node_ip(*n), prefixes.iter().map(|p| make(p, *n)).collect()))
        .collect()
}

/// Every counter and "last changed" time the switches keep per speaker, to show that
/// nothing but the intended change reached them.
#[derive(Debug, Clone, PartialEq)]
struct Snapshot {
    bird_imports: BTreeMap<IpAddr, Option<crate::tor::BirdImports>>,
    bird_times: BTreeMap<IpAddr, BTreeMap<IpNet, crate::tor::BirdTime>>,
    frr_updates: BTreeMap<IpAddr, u64>,
    frr_times: BTreeMap<IpAddr, BTreeMap<IpNet, Learned>>,
}

fn snapshot(bird: &Bird, frr: &Frr, frr_sessions: &[u8]) -> Snapshot {
    let all: Vec<IpAddr> = (1..=4).map(node_ip).collect();
    Snapshot {
        bird_imports: all.iter().map(|&a| (a, bird_imports(bird, a))).collect(),
        bird_times: all
            .iter()
            .map(|&a| (a, bird_route_times(bird, a)))
            .collect(),
        frr_updates: frr_sessions
            .iter()
            .map(|&n| (node_ip(n), frr_updates_received(frr, node_ip(n))))
            .collect(),
        frr_times: frr_sessions
            .iter()
            .map(|&n| (node_ip(n), frr_route_times(frr, node_ip(n))))
            .collect(),
    }
}

/// Asserts that for every speaker except `changed`, BIRD's and FRR's counters and
/// route times are exactly as in `before`.
fn assert_untouched(before: &Snapshot, after: &Snapshot, changed: &[u8], what: &str) {
    assert_untouched_apart(before, after, changed, changed, what);
}

/// [`assert_untouched`] with one list of changed speakers per switch.
fn assert_untouched_apart(
    before: &Snapshot,
    after: &Snapshot,
    bird_changed: &[u8],
    frr_changed: &[u8],
    what: &str,
) {
    let bird_changed: Vec<IpAddr> = bird_changed.iter().map(|&n| node_ip(n)).collect();
    let frr_changed: Vec<IpAddr> = frr_changed.iter().map(|&n| node_ip(n)).collect();
    for (addr, imports) in &before.bird_imports {
        if bird_changed.contains(addr) {
            continue;
        }
        assert_eq!(
            Some(imports),
            after.bird_imports.get(addr),
            "{what}: BIRD received updates from the untouched speaker {addr}"
        );
        assert_eq!(
            before.bird_times.get(addr),
            after.bird_times.get(addr),
            "{what}: BIRD re-learned routes of the untouched speaker {addr}"
        );
    }
    for (addr, updates) in &before.frr_updates {
        if frr_changed.contains(addr) {
            continue;
        }
        assert_eq!(
            Some(updates),
            after.frr_updates.get(addr),
            "{what}: FRR received UPDATEs from the untouched speaker {addr}"
        );
        assert_eq!(
            before.frr_times.get(addr),
            after.frr_times.get(addr),
            "{what}: FRR re-learned routes of the untouched speaker {addr}"
        );
    }
}

#[test]
fn per_node_speakers_announce_exactly_their_pod_cidrs_and_follow_the_cluster() {
    let mut addrs = vec![v4(2), v4(3)];
    addrs.extend((1..=4).map(node_ip));
    let Some(ns) = isolated!(&addrs, Duration::from_secs(300)) else {
        return;
    };
    let (bird, frr) = start_tors(ns.dir(), &(1..=4).map(node_ip).collect::<Vec<_>>());

    let inputs = Inputs::new(ns.dir(), "cluster-pool", "10.244.0.0/16");
    inputs.write_config(&bgp_config());
    let mut nodes = nodes();
    for n in &nodes {
        inputs.write_node(n);
    }
    let mut speakers: Vec<Speaker> = (1..=4u8)
        .map(|n| {
            let name = format!("n{n}");
            let args = Speaker::standalone_args(&inputs, &name, node_ip(n));
            Speaker::start(ns.dir(), &name, &args)
        })
        .collect();

    // Start: BIRD peers with all four, FRR with the tor2=yes nodes (n2, n3).
    let mut bird_want = expect(
        &[
            (1, &["10.244.1.0/24"]),
            (2, &["10.244.2.0/24", "10.244.102.0/24"]),
            (3, &["10.244.3.0/24"]),
            (4, &["10.244.4.0/24"]),
        ],
        bird_route,
    );
    let mut frr_want = expect(
        &[
            (2, &["10.244.2.0/24", "10.244.102.0/24"]),
            (3, &["10.244.3.0/24"]),
        ],
        frr_route,
    );
    for n in 1..=4 {
        bird.wait_established(node_ip(n), WAIT).unwrap_or_else(|e| {
            panic!(
                "BIRD - n{n}: {e}\n{}",
                speakers[n as usize - 1].log_tail(30)
            )
        });
    }
    for n in [2, 3] {
        frr.wait_established(node_ip(n), WAIT).unwrap_or_else(|e| {
            panic!("FRR - n{n}: {e}\n{}", speakers[n as usize - 1].log_tail(30))
        });
    }
    wait_exact(&bird, &bird_want, "start");
    wait_exact(&frr, &frr_want, "start");
    for n in [1, 4] {
        let s = frr.session_state(node_ip(n)).expect("FRR neighbor state");
        assert!(!s.established(), "FRR - n{n} must not be up: {s:?}");
    }
    settle();
    let before = snapshot(&bird, &frr, &[2, 3]);

    // Delete n1: exactly its prefix goes; nothing else moves. Its speaker no longer
    // knows its labels, so it selects no peer: the session closes with Cease / Peer
    // De-configured (RFC 4486 subcode 3) and BIRD drops its routes with it.
    inputs.delete_node("n1");
    bird_want.insert(node_ip(1), vec![]);
    wait_exact(&bird, &bird_want, "n1 deleted");
    wait_exact(&frr, &frr_want, "n1 deleted");
    settle();
    let after = snapshot(&bird, &frr, &[2, 3]);
    assert_untouched(&before, &after, &[1], "n1 deleted");
    let s = bird.session_state(node_ip(1)).expect("BIRD - n1 state");
    assert!(!s.established(), "BIRD - n1 after n1 was deleted: {s:?}");
    assert_eq!(
        bird_notifications_received(&bird, node_ip(1)),
        ["Peer de-configured"],
        "BIRD - n1 must have been told Cease / Peer De-configured, once"
    );

    // n2's CiliumNode changes one CIDR: the old one is withdrawn, the new one announced,
    // its other CIDR and every other speaker untouched.
    let before = after;
    nodes[1] = nodes[1]
        .clone()
        .cilium_cidrs(&["10.244.22.0/24", "10.244.102.0/24"]);
    inputs.write_node(&nodes[1]);
    let n2_now = ["10.244.22.0/24", "10.244.102.0/24"];
    bird_want.insert(
        node_ip(2),
        n2_now.iter().map(|p| bird_route(p, 2)).collect(),
    );
    frr_want.insert(node_ip(2), n2_now.iter().map(|p| frr_route(p, 2)).collect());
    wait_exact(&bird, &bird_want, "n2 CIDR changed");
    wait_exact(&frr, &frr_want, "n2 CIDR changed");
    settle();
    let after = snapshot(&bird, &frr, &[2, 3]);
    assert_untouched(&before, &after, &[2], "n2 CIDR changed");
    let (Some(b), Some(a)) = (
        before.bird_imports[&node_ip(2)],
        after.bird_imports[&node_ip(2)],
    ) else {
        panic!("BIRD - n2 went down: {after:?}");
    };
    assert_eq!(
        (a.updates - b.updates, a.withdraws - b.withdraws),
        (1, 1),
        "one prefix withdrawn, one announced"
    );
    let kept = net("10.244.102.0/24");
    assert_eq!(
        before.bird_times[&node_ip(2)].get(&kept),
        after.bird_times[&node_ip(2)].get(&kept),
        "n2's unchanged CIDR was not re-sent to BIRD"
    );
    assert_eq!(
        before.frr_times[&node_ip(2)].get(&kept),
        after.frr_times[&node_ip(2)].get(&kept),
        "n2's unchanged CIDR was not re-sent to FRR"
    );

    // Labels: n4 gains tor2=yes (its FRR session opens with its routes), n3 loses it
    // (its FRR session closes); BIRD sees nothing of it.
    let before = after;
    nodes[3] = nodes[3].clone().label("tor2", "yes");
    nodes[2].labels.remove("tor2");
    inputs.write_node(&nodes[3]);
    inputs.write_node(&nodes[2]);
    frr.wait_established(node_ip(4), WAIT).unwrap_or_else(|e| {
        panic!(
            "FRR - n4 after the label edit: {e}\n{}",
            speakers[3].log_tail(30)
        )
    });
    frr_want.remove(&node_ip(3));
    frr_want.insert(node_ip(4), vec![frr_route("10.244.4.0/24", 4)]);
    wait_exact(&frr, &frr_want, "labels edited");
    crate::harness::wait_for("FRR - n3 to close", WAIT, || {
        match frr.session_state(node_ip(3)) {
            Ok(s) if !s.established() => Ok(()),
            Ok(s) => Err(format!("{s:?}")),
            Err(e) => Err(e.to_string()),
        }
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", speakers[2].log_tail(30)));
    // FRR clears a closed session's routes in the background: they must be gone
    // within the bound, not necessarily at the instant the state changes.
    crate::harness::wait_for(
        "n3's routes to leave FRR with its session",
        WAIT,
        || match frr.routes(node_ip(3), Afi::Ipv4) {
            Ok(r) if r.is_empty() => Ok(()),
            Ok(r) => Err(format!("{r:?}")),
            Err(e) => Err(e.to_string()),
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", speakers[2].log_tail(30)));
    assert_eq!(
        frr_last_notification(&frr, node_ip(3)).as_deref(),
        Some("Cease/Peer De-configured"),
        "FRR - n3 must have been told why"
    );
    settle();
    let after = snapshot(&bird, &frr, &[2]);
    assert_untouched_apart(&before, &after, &[], &[3, 4], "labels edited");
    wait_exact(&bird, &bird_want, "labels edited");

    // SIGTERM: every speaker exits 0 and tells the switches why.
    for s in &mut speakers {
        let status = s.terminate();
        assert!(
            status.success(),
            "speaker {} exited with {status} on SIGTERM:\n{}",
            s.name,
            s.log_tail(30)
        );
    }
    for n in 2..=4 {
        let s = bird.session_state(node_ip(n)).unwrap();
        assert!(!s.established(), "BIRD - n{n} after SIGTERM: {s:?}");
        assert_eq!(
            bird_notifications_received(&bird, node_ip(n)),
            [format!("Administrative shutdown: \"{SHUTDOWN_MESSAGE}\"")],
            "BIRD - n{n}: the speaker must say goodbye with Cease / Administrative Shutdown \
             (RFC 9003 message)"
        );
    }
    assert!(bird
        .routes(node_ip(2), Afi::Ipv4)
        .unwrap()
        .prefixes()
        .is_empty());
}
