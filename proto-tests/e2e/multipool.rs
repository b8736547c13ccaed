//! Multi-pool IPAM end to end: each node's speaker announces every CIDR of its
//! CiliumNode's `spec.ipam.pools.allocated`, checked against the CiliumPodIPPools, and
//! follows the operator exactly. BIRD (eBGP) is the switch.
//!
//! Phases: start (n1 holds CIDRs of two pools, one of them outside its pool and refused;
//! n2 of one pool); n1 gains a CIDR; n1 releases its other pool. After each change BIRD
//! holds exactly the node's CIDRs, n1 sent exactly one UPDATE for the change (one
//! announce, then one withdraw), its other routes keep their age (BIRD's `since`) and
//! n2's session saw nothing at all.

use std::collections::BTreeMap;
use std::time::Duration;

use ipnet::IpNet;

use crate::fixture::{BgpConfig, Peer, BIRD_AS, NODE_AS};
use crate::harness::bird::Bird;
use crate::harness::{v4, BgpDaemon, Neighbor, PeerOpts};
use crate::isolated;
use crate::local::{bird_route, Expected};
use crate::speaker::{net, node_ip, Inputs, NodeSpec, Speaker};
use crate::tor::{bird_imports, bird_route_times, BirdImports, BirdTime};
use crate::{settle, wait_exact, WAIT};

/// What BIRD must hold from each node: the routes of [`crate::local`], whose bgp-config
/// (AS numbers, `pod-cidr-communities`) this one repeats.
fn expect(routes: &[(u8, &[&str])]) -> Expected {
    crate::local::expect(routes, bird_route)
}

fn imports(bird: &Bird, n: u8) -> BirdImports {
    bird_imports(bird, node_ip(n)).unwrap_or_else(|| panic!("BIRD - n{n} has no import stats"))
}

#[test]
fn multi_pool_node_gains_then_releases_cidrs_and_bird_follows_exactly() {
    let addrs = vec![v4(2), node_ip(1), node_ip(2)];
    let Some(ns) = isolated!(&addrs, Duration::from_secs(180)) else {
        return;
    };
    let bird_opts = PeerOpts::new(v4(2), BIRD_AS)
        .neighbor(Neighbor::new(node_ip(1), NODE_AS))
        .neighbor(Neighbor::new(node_ip(2), NODE_AS));
    let bird = Bird::start(ns.dir(), bird_opts).expect("start BIRD");

    let inputs = Inputs::new(ns.dir(), "multi-pool", "10.244.0.0/16");
    inputs.write_config(
        &BgpConfig::new([Peer::bird()])
            .pod_cidr_community("65001:100")
            .yaml(),
    );
    inputs.write_pools(&[("default", &["10.10.0.0/16"]), ("blue", &["10.20.0.0/16"])]);
    // The Nodes' own podCIDRs are not in force in multi-pool mode: never announced.
    let mut n1 = NodeSpec::new("n1", node_ip(1))
        .node_cidrs(&["10.244.1.0/24"])
        .pool("default", &["10.10.0.0/27"])
        .pool("blue", &["10.20.0.0/27", "10.30.0.0/27"]);
    let n2 = NodeSpec::new("n2", node_ip(2))
        .node_cidrs(&["10.244.2.0/24"])
        .pool("default", &["10.10.0.32/27"]);
    inputs.write_node(&n1);
    inputs.write_node(&n2);
    let speakers: Vec<Speaker> = [(1u8, "n1"), (2, "n2")]
        .into_iter()
        .map(|(n, name)| {
            let args = Speaker::standalone_args(&inputs, name, node_ip(n));
            Speaker::start(ns.dir(), name, &args)
        })
        .collect();
    for (i, s) in speakers.iter().enumerate() {
        bird.wait_established(node_ip(i as u8 + 1), WAIT)
            .unwrap_or_else(|e| panic!("BIRD - {}: {e}\n{}", s.name, s.log_tail(30)));
    }
    // 10.30.0.0/27 lies outside blue's range: refused, never sent.
    let mut want = expect(&[
        (1, &["10.10.0.0/27", "10.20.0.0/27"]),
        (2, &["10.10.0.32/27"]),
    ]);
    wait_exact(&bird, &want, "start");
    settle();
    let times_before = bird_route_times(&bird, node_ip(1));
    let (n1_before, n2_before) = (imports(&bird, 1), imports(&bird, 2));
    let n2_times = bird_route_times(&bird, node_ip(2));

    // The operator allocates n1 a second CIDR of the default pool.
    n1 = n1.pool("default", &["10.10.0.0/27", "10.10.0.64/27"]);
    inputs.write_node(&n1);
    want = expect(&[
        (1, &["10.10.0.0/27", "10.10.0.64/27", "10.20.0.0/27"]),
        (2, &["10.10.0.32/27"]),
    ]);
    wait_exact(&bird, &want, "n1 gains 10.10.0.64/27");
    settle();
    let (times_before, n1_before) = assert_only_change(
        &bird,
        (&times_before, n1_before),
        (n2_before, &n2_times),
        (1, 0),
        &["10.10.0.0/27", "10.20.0.0/27"],
        "n1 gains 10.10.0.64/27",
    );

    // n1 releases everything it held of blue.
    n1 = n1.pool("blue", &[]);
    inputs.write_node(&n1);
    want = expect(&[
        (1, &["10.10.0.0/27", "10.10.0.64/27"]),
        (2, &["10.10.0.32/27"]),
    ]);
    wait_exact(&bird, &want, "n1 releases blue");
    settle();
    assert_only_change(
        &bird,
        (&times_before, n1_before),
        (n2_before, &n2_times),
        (0, 1),
        &["10.10.0.0/27", "10.10.0.64/27"],
        "n1 releases blue",
    );

    for mut s in speakers {
        let status = s.terminate();
        assert!(status.success(), "speaker {} exit: {status:?}", s.name);
    }
}

/// After a change of n1's CIDRs: n1 sent exactly `(updates, withdraws)`, its `kept`
/// routes keep their BIRD `since` time, and n2's session saw nothing. Returns n1's
/// route times and import counters, for the next phase.
fn assert_only_change(
    bird: &Bird,
    (n1_times, n1_imports): (&BTreeMap<IpNet, BirdTime>, BirdImports),
    (n2_imports, n2_times): (BirdImports, &BTreeMap<IpNet, BirdTime>),
    sent: (u64, u64),
    kept: &[&str],
    what: &str,
) -> (BTreeMap<IpNet, BirdTime>, BirdImports) {
    let now = imports(bird, 1);
    assert_eq!(
        (
            now.updates - n1_imports.updates,
            now.withdraws - n1_imports.withdraws
        ),
        sent,
        "{what}: n1's (updates, withdraws) to BIRD"
    );
    let times = bird_route_times(bird, node_ip(1));
    for prefix in kept {
        let (before, after) = (n1_times.get(&net(prefix)), times.get(&net(prefix)));
        assert!(
            before.is_some() && before == after,
            "{what}: {prefix} of n1 was re-sent: since {before:?}, now {after:?}"
        );
    }
    assert_eq!(
        imports(bird, 2),
        n2_imports,
        "{what}: n2's session saw an UPDATE"
    );
    let n2_now = bird_route_times(bird, node_ip(2));
    assert!(
        n2_now.len() == n2_times.len() && n2_now.iter().all(|(p, t)| n2_times.get(p) == Some(t)),
        "{what}: n2's routes: {n2_times:?} then {n2_now:?}"
    );
    (times, now)
}
