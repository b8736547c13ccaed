//! `--announce cluster`: one speaker (on node n1, with n1's address) announces every
//! node's pod CIDRs, each with that node's InternalIP as next hop. BIRD (eBGP) peers with
//! it always, FRR (iBGP, `pod-cidr-local-pref: 200`) while n1 carries the label
//! `tor2=yes`.
//!
//! Phases: start; delete a node (exactly its prefix is withdrawn, in one withdrawal, the
//! other routes keep their "last changed" time); change a node's CIDR; take the
//! selecting label off n1 and put it back (the FRR session closes and opens with every
//! route); SIGTERM (exit 0). Along the way the speaker's own endpoint must tell the
//! same story: sessions up, prefixes per peer, latencies observed, a de-configured
//! peer's series gone.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::fixture::{start_tors, BgpConfig, Peer, NODE_AS};
use crate::harness::{v4, wait_for, BgpDaemon, Origin, Route};
use crate::isolated;
use crate::scrape::{get, mentions_peer, value, wait_metrics};
use crate::speaker::{net, node_ip, Inputs, NodeSpec, Speaker};
use crate::tor::{
    bird_imports, bird_notifications_received, bird_route_times, frr_route_times,
    frr_updates_received,
};
use crate::{settle, wait_exact, WAIT};
use podcidr_speaker::daemon::SHUTDOWN_MESSAGE;

/// The iBGP peer's `pod-cidr-local-pref`: not 100, which is BIRD's and FRR's own default,
/// so FRR's RIB shows the speaker really sent it.
const FRR_LOCAL_PREF: u32 = 200;

fn bgp_config() -> String {
    BgpConfig::new([
        Peer::bird(),
        Peer::frr()
            .key("pod-cidr-local-pref", FRR_LOCAL_PREF)
            .selector("tor2", "yes"),
    ])
    .stop_for_good()
    .speaker("origin", "igp")
    .pod_cidr_community("65001:7")
    .yaml()
}

fn nodes() -> Vec<NodeSpec> {
    (1..=4u8)
        .map(|n| {
            let spec = NodeSpec::new(&format!("n{n}"), node_ip(n))
                .node_cidrs(&[&format!("10.244.{n}.0/24")]);
            if n == 1 {
                spec.label("tor2", "yes")
            } else {
                spec
            }
        })
        .collect()
}

fn bird_route(prefix: &str, node: u8) -> Route {
    Route {
        prefix: net(prefix),
        next_hop: node_ip(node),
        as_path: vec![NODE_AS],
        local_pref: Some(100),
        med: None,
        communities: vec![(65001, 7)],
        large_communities: vec![],
        origin: Origin::Igp,
        stale: false,
    }
}

/// Over iBGP: an empty AS_PATH and the peer's `pod-cidr-local-pref`.
fn frr_route(prefix: &str, node: u8) -> Route {
    Route {
        as_path: vec![],
        local_pref: Some(FRR_LOCAL_PREF),
        ..bird_route(prefix, node)
    }
}

/// Every route of the cluster, from the one speaker.
fn want(routes: &[(&str, u8)], make: fn(&str, u8) -> Route) -> BTreeMap<IpAddr, Vec<Route>> {
    [(
        node_ip(1),
        routes.iter().map(|(p, n)| make(p, *n)).collect(),
    )]
    .into_iter()
    .collect()
}

#[test]
fn one_cluster_speaker_announces_every_node_with_its_own_next_hop() {
    let mut addrs = vec![v4(2), v4(3)];
    addrs.extend((1..=4).map(node_ip));
    let Some(ns) = isolated!(&addrs, Duration::from_secs(240)) else {
        return;
    };
    let speaker_addr = node_ip(1);
    let (bird, frr) = start_tors(ns.dir(), &[speaker_addr]);

    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_config(&bgp_config());
    let mut nodes = nodes();
    for n in &nodes {
        inputs.write_node(n);
    }
    let mut args = Speaker::standalone_args(&inputs, "n1", speaker_addr);
    args.push("--announce=cluster".into());
    let mut speaker = Speaker::start(ns.dir(), "cluster", &args);

    let mut routes = vec![
        ("10.244.1.0/24", 1),
        ("10.244.2.0/24", 2),
        ("10.244.3.0/24", 3),
        ("10.244.4.0/24", 4),
    ];
    bird.wait_established(speaker_addr, WAIT)
        .unwrap_or_else(|e| panic!("BIRD: {e}\n{}", speaker.log_tail(30)));
    frr.wait_established(speaker_addr, WAIT)
        .unwrap_or_else(|e| panic!("FRR: {e}\n{}", speaker.log_tail(30)));
    wait_exact(&bird, &want(&routes, bird_route), "start");
    wait_exact(&frr, &want(&routes, frr_route), "start");

    // The endpoint shows the same: both sessions up, four prefixes each, a latency
    // observed per peer for its initial table.
    let endpoint = SocketAddr::new(speaker_addr, 9477);
    let (bird_peer, frr_peer) = (format!("{}:179", v4(2)), format!("{}:179", v4(3)));
    let announced = |m: &str, peer: &str| {
        value(
            m,
            "podcidr_speaker_announced_prefixes",
            &[("peer", peer), ("afi", "ipv4")],
        )
    };
    let up = |m: &str, peer: &str| value(m, "podcidr_speaker_session_up", &[("peer", peer)]);
    let latencies = |m: &str| value(m, "podcidr_speaker_event_to_update_seconds_count", &[]);
    let m = wait_metrics(endpoint, "both sessions up with 4 prefixes", |m| {
        [&bird_peer, &frr_peer]
            .iter()
            .all(|p| up(m, p) == Some(1.0) && announced(m, p) == Some(4.0))
            && value(m, "podcidr_speaker_view_nodes", &[]) == Some(4.0)
            && latencies(m) >= Some(2.0)
    });
    let latencies_at_start = latencies(&m).unwrap_or_default();
    assert_eq!(
        get(endpoint, "/readyz").0,
        200,
        "ready once config and cluster are in"
    );
    assert_eq!(get(endpoint, "/healthz").0, 200);
    settle();

    // Delete n3: one withdrawal, nothing re-sent.
    let bird_before = bird_imports(&bird, speaker_addr).expect("BIRD session up");
    let bird_times = bird_route_times(&bird, speaker_addr);
    let frr_before = frr_updates_received(&frr, speaker_addr);
    let frr_times = frr_route_times(&frr, speaker_addr);
    inputs.delete_node("n3");
    routes.retain(|(_, n)| *n != 3);
    wait_exact(&bird, &want(&routes, bird_route), "n3 deleted");
    wait_exact(&frr, &want(&routes, frr_route), "n3 deleted");
    settle();
    let bird_after = bird_imports(&bird, speaker_addr).expect("BIRD session up");
    assert_eq!(
        (bird_after.updates, bird_after.withdraws),
        (bird_before.updates, bird_before.withdraws + 1),
        "n3 deleted: BIRD got exactly one prefix withdrawn and nothing announced"
    );
    assert_eq!(
        frr_updates_received(&frr, speaker_addr),
        frr_before + 1,
        "n3 deleted: FRR got exactly one UPDATE"
    );
    let mut kept_bird = bird_times.clone();
    kept_bird.remove(&net("10.244.3.0/24"));
    assert_eq!(
        bird_route_times(&bird, speaker_addr),
        kept_bird,
        "n3 deleted: BIRD route times"
    );
    let mut kept_frr = frr_times.clone();
    kept_frr.remove(&net("10.244.3.0/24"));
    assert_eq!(
        frr_route_times(&frr, speaker_addr),
        kept_frr,
        "n3 deleted: FRR route times"
    );
    wait_metrics(endpoint, "3 prefixes per peer, the withdrawal timed", |m| {
        announced(m, &bird_peer) == Some(3.0)
            && announced(m, &frr_peer) == Some(3.0)
            && latencies(m) >= Some(latencies_at_start + 2.0)
    });

    // n2's CIDR changes: withdraw the old, announce the new, touch nothing else.
    let bird_before = bird_imports(&bird, speaker_addr).expect("BIRD session up");
    let bird_times = bird_route_times(&bird, speaker_addr);
    let frr_times = frr_route_times(&frr, speaker_addr);
    nodes[1] = nodes[1].clone().node_cidrs(&["10.244.22.0/24"]);
    inputs.write_node(&nodes[1]);
    routes.retain(|(_, n)| *n != 2);
    routes.push(("10.244.22.0/24", 2));
    wait_exact(&bird, &want(&routes, bird_route), "n2 CIDR changed");
    wait_exact(&frr, &want(&routes, frr_route), "n2 CIDR changed");
    settle();
    let bird_after = bird_imports(&bird, speaker_addr).expect("BIRD session up");
    assert_eq!(
        (bird_after.updates, bird_after.withdraws),
        (bird_before.updates + 1, bird_before.withdraws + 1),
        "n2 CIDR changed: one prefix withdrawn, one announced"
    );
    for kept in ["10.244.1.0/24", "10.244.4.0/24"] {
        let kept = net(kept);
        assert_eq!(
            bird_times.get(&kept),
            bird_route_times(&bird, speaker_addr).get(&kept),
            "n2 CIDR changed: BIRD re-learned {kept}"
        );
        assert_eq!(
            frr_times.get(&kept),
            frr_route_times(&frr, speaker_addr).get(&kept),
            "n2 CIDR changed: FRR re-learned {kept}"
        );
    }

    // The speaker's own node loses the label that selects FRR: that session closes, the
    // BIRD session does not notice. The label back: FRR gets every route again.
    let bird_before = bird_imports(&bird, speaker_addr).expect("BIRD session up");
    let bird_times = bird_route_times(&bird, speaker_addr);
    nodes[0].labels.remove("tor2");
    inputs.write_node(&nodes[0]);
    wait_for("FRR session to close", WAIT, || {
        match frr.session_state(speaker_addr) {
            Ok(s) if !s.established() => Ok(()),
            Ok(s) => Err(format!("{s:?}")),
            Err(e) => Err(e.to_string()),
        }
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", speaker.log_tail(30)));
    wait_metrics(endpoint, "the de-configured peer's series removed", |m| {
        !mentions_peer(m, &frr_peer) && up(m, &bird_peer) == Some(1.0)
    });
    nodes[0] = nodes[0].clone().label("tor2", "yes");
    inputs.write_node(&nodes[0]);
    frr.wait_established(speaker_addr, WAIT)
        .unwrap_or_else(|e| {
            panic!(
                "FRR after the label came back: {e}\n{}",
                speaker.log_tail(30)
            )
        });
    wait_exact(&frr, &want(&routes, frr_route), "label back");
    wait_metrics(endpoint, "the peer back with its prefixes", |m| {
        up(m, &frr_peer) == Some(1.0) && announced(m, &frr_peer) == Some(3.0)
    });
    settle();
    assert_eq!(
        bird_imports(&bird, speaker_addr),
        Some(bird_before),
        "labels: BIRD got updates"
    );
    assert_eq!(
        bird_route_times(&bird, speaker_addr),
        bird_times,
        "labels: BIRD route times"
    );
    assert!(bird.session_state(speaker_addr).unwrap().established());

    let status = speaker.terminate();
    assert!(
        status.success(),
        "exit status {status} on SIGTERM:\n{}",
        speaker.log_tail(30)
    );
    assert_eq!(
        bird_notifications_received(&bird, speaker_addr),
        [format!("Administrative shutdown: \"{SHUTDOWN_MESSAGE}\"")],
        "BIRD: the speaker says goodbye once, with Cease / Administrative Shutdown"
    );
}
