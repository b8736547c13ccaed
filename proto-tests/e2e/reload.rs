//! Editing the bgp-config under a running speaker (`--bgp-config FILE`): each edit
//! touches exactly the sessions and routes it changes.
//!
//! One speaker (node n1, local) with BIRD (eBGP) and FRR (iBGP) as peers. In turn: new
//! communities are re-sent on the running sessions (no reset); an invalid config
//! changes nothing (the last good one stays in force); a new hold time for FRR resets
//! only the FRR session, with Cease / Administrative Shutdown and a message; removing
//! FRR from the config closes its session with Cease / Peer De-configured. BIRD sees
//! nothing of the FRR edits.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use crate::fixture::{start_tors, BgpConfig, Peer, NODE_AS};
use crate::harness::{v4, wait_for, BgpDaemon, Origin, Route};
use crate::isolated;
use crate::scrape::{get, value};
use crate::speaker::{net, node_ip, Inputs, NodeSpec, Speaker};
use crate::tor::{
    bird_imports, bird_notifications_received, bird_route_times, frr_last_notification,
    frr_updates_received,
};
use crate::{settle, wait_exact, WAIT};

/// BIRD, FRR with `frr_hold` as its hold time (`None`: FRR left out of the config), and
/// `community` on the pod CIDRs.
fn bgp_config(community: &str, frr_hold: Option<&str>) -> String {
    let frr = frr_hold.map(|hold| Peer::frr().key("hold-time", hold));
    BgpConfig::new([Some(Peer::bird()), frr].into_iter().flatten())
        .pod_cidr_community(community)
        .yaml()
}

fn route(community: (u16, u16), ibgp: bool) -> Route {
    Route {
        prefix: net("10.244.1.0/24"),
        next_hop: node_ip(1),
        as_path: if ibgp { vec![] } else { vec![NODE_AS] },
        local_pref: Some(100),
        med: None,
        communities: vec![community],
        large_communities: vec![],
        origin: Origin::Incomplete,
        stale: false,
    }
}

fn one(addr: IpAddr, route: Route) -> std::collections::BTreeMap<IpAddr, Vec<Route>> {
    [(addr, vec![route])].into_iter().collect()
}

#[test]
fn config_edits_touch_exactly_the_sessions_they_change() {
    let Some(ns) = isolated!(
        &[v4(2), v4(3), node_ip(1)],
        std::time::Duration::from_secs(240)
    ) else {
        return;
    };
    let n1 = node_ip(1);
    let (bird, frr) = start_tors(ns.dir(), &[n1]);
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_config(&bgp_config("65001:100", Some("9s")));
    inputs.write_node(&NodeSpec::new("n1", n1).node_cidrs(&["10.244.1.0/24"]));
    let speaker = Speaker::start(ns.dir(), "n1", &Speaker::standalone_args(&inputs, "n1", n1));
    let log = || speaker.log_tail(30);
    bird.wait_established(n1, WAIT)
        .unwrap_or_else(|e| panic!("BIRD: {e}\n{}", log()));
    frr.wait_established(n1, WAIT)
        .unwrap_or_else(|e| panic!("FRR: {e}\n{}", log()));
    wait_exact(&bird, &one(n1, route((65001, 100), false)), "start");
    wait_exact(&frr, &one(n1, route((65001, 100), true)), "start");
    let bird_up_since = bird.session_state(n1).unwrap().uptime;
    let frr_updates = frr_updates_received(&frr, n1);

    // New communities: re-sent on the running sessions, one UPDATE each, no reset.
    inputs.write_config(&bgp_config("65001:200", Some("9s")));
    wait_exact(&bird, &one(n1, route((65001, 200), false)), "communities");
    wait_exact(&frr, &one(n1, route((65001, 200), true)), "communities");
    settle();
    assert_eq!(frr_updates_received(&frr, n1), frr_updates + 1);
    assert!(bird_notifications_received(&bird, n1).is_empty());
    assert_eq!(
        frr_last_notification(&frr, n1),
        None,
        "FRR session was reset"
    );
    let uptime = bird.session_state(n1).unwrap().uptime;
    assert!(
        uptime > bird_up_since,
        "BIRD session restarted: uptime {bird_up_since:?} then {uptime:?}"
    );

    // An invalid config (hold-time 2s) changes nothing on the wire.
    let bird_before = (bird_imports(&bird, n1), bird_route_times(&bird, n1));
    let frr_updates = frr_updates_received(&frr, n1);
    inputs.write_config(&bgp_config("65001:300", Some("2s")));
    settle();
    settle();
    assert_eq!(
        (bird_imports(&bird, n1), bird_route_times(&bird, n1)),
        bird_before,
        "BIRD got something from an invalid config"
    );
    assert_eq!(frr_updates_received(&frr, n1), frr_updates);
    assert!(frr.session_state(n1).unwrap().established());

    // A new hold time for FRR: only the FRR session is opened again, after a Cease /
    // Administrative Shutdown. The new session comes up within milliseconds, before
    // FRR has shown why the old one ended, so the NOTIFICATION is read from the
    // speaker's own counters and the reset from FRR's session uptime.
    let edited = Instant::now();
    inputs.write_config(&bgp_config("65001:200", Some("15s")));
    wait_for("FRR on a new session", WAIT, || {
        match frr.session_state(n1) {
            Ok(s) if s.established() && s.uptime.is_some_and(|u| u < edited.elapsed()) => Ok(()),
            Ok(s) => Err(format!("{s:?}")),
            Err(e) => Err(e.to_string()),
        }
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", log()));
    let endpoint = SocketAddr::new(n1, 9477);
    let sent = |m: &str, peer: IpAddr, subcode: &str| {
        value(
            m,
            "podcidr_speaker_notifications_total",
            &[
                ("peer", &format!("{peer}:179")),
                ("direction", "sent"),
                ("code", "6"),
                ("subcode", subcode),
            ],
        )
    };
    let (_, m) = get(endpoint, "/metrics");
    assert_eq!(
        sent(&m, v4(3), "2"),
        Some(1.0),
        "one Cease / Administrative Shutdown to FRR:\n{m}"
    );
    assert_eq!(sent(&m, v4(2), "2"), None, "no NOTIFICATION to BIRD:\n{m}");
    wait_exact(&frr, &one(n1, route((65001, 200), true)), "hold time");
    settle();
    assert_eq!(
        (bird_imports(&bird, n1), bird_route_times(&bird, n1)),
        bird_before,
        "BIRD was touched by FRR's hold time"
    );
    assert!(bird_notifications_received(&bird, n1).is_empty());

    // FRR removed from the config: Cease / Peer De-configured, BIRD untouched.
    inputs.write_config(&bgp_config("65001:200", None));
    wait_for(
        "FRR to be de-configured",
        WAIT,
        || match frr_last_notification(&frr, n1).as_deref() {
            Some("Cease/Peer De-configured") => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", log()));
    settle();
    assert!(!frr.session_state(n1).unwrap().established());
    assert_eq!(
        (bird_imports(&bird, n1), bird_route_times(&bird, n1)),
        bird_before,
        "BIRD was touched by FRR's removal"
    );
}
