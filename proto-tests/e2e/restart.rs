//! SIGTERM with graceful restart (RFC 4724) negotiated: the speaker closes its sessions
//! without a NOTIFICATION, exits 0, and BIRD and FRR keep its routes, marked stale,
//! until a new speaker process is back; the routes never leave their RIBs.

use std::net::IpAddr;
use std::time::Duration;

use crate::fixture::{start_tors, BgpConfig, Peer, NODE_AS};
use crate::harness::{hold_for, v4, Afi, BgpDaemon, Origin, Route, RoutesExt};
use crate::isolated;
use crate::speaker::{net, node_ip, Inputs, NodeSpec, Speaker};
use crate::tor::{bird_notifications_received, frr_last_notification};
use crate::{wait_exact, WAIT};

fn bgp_config() -> String {
    BgpConfig::new([Peer::bird(), Peer::frr()])
        .speaker("graceful-restart", true)
        .speaker("graceful-restart-time", "60s")
        .yaml()
}

fn route(prefix: &str, ibgp: bool) -> Route {
    Route {
        prefix: net(prefix),
        next_hop: node_ip(1),
        as_path: if ibgp { vec![] } else { vec![NODE_AS] },
        local_pref: Some(100),
        med: None,
        communities: vec![],
        large_communities: vec![],
        origin: Origin::Incomplete,
        stale: false,
    }
}

/// How long the speaker stays away before the new process starts.
const AWAY: Duration = Duration::from_secs(3);

const PREFIXES: [&str; 2] = ["10.244.1.0/24", "10.244.101.0/24"];

fn want(ibgp: bool) -> std::collections::BTreeMap<IpAddr, Vec<Route>> {
    [(
        node_ip(1),
        PREFIXES.iter().map(|p| route(p, ibgp)).collect(),
    )]
    .into_iter()
    .collect()
}

/// Both prefixes are in `tor`'s RIB from the speaker, stale or not.
fn held(tor: &dyn BgpDaemon) -> Result<Vec<Route>, String> {
    let routes = tor
        .routes(node_ip(1), Afi::Ipv4)
        .map_err(|e| e.to_string())?;
    let present = PREFIXES.iter().all(|p| routes.has(&net(p)));
    if present {
        Ok(routes)
    } else {
        Err(format!("{} lost the routes: {routes:?}", tor.kind()))
    }
}

#[test]
fn sigterm_with_graceful_restart_keeps_the_routes_until_the_speaker_is_back() {
    let n1 = node_ip(1);
    let Some(ns) = isolated!(&[v4(2), v4(3), n1], Duration::from_secs(180)) else {
        return;
    };
    let (bird, frr) = start_tors(ns.dir(), &[n1]);
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_config(&bgp_config());
    inputs.write_node(&NodeSpec::new("n1", n1).node_cidrs(&PREFIXES));
    let args = Speaker::standalone_args(&inputs, "n1", n1);
    let mut first = Speaker::start(ns.dir(), "n1-first", &args);
    for tor in [&bird as &dyn BgpDaemon, &frr] {
        tor.wait_established(n1, WAIT)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", tor.kind(), first.log_tail(30)));
    }
    wait_exact(&bird, &want(false), "start");
    wait_exact(&frr, &want(true), "start");

    let status = first.terminate();
    assert!(status.success(), "exit {status}:\n{}", first.log_tail(30));
    assert!(
        bird_notifications_received(&bird, n1).is_empty(),
        "graceful restart: no NOTIFICATION to BIRD"
    );
    assert_eq!(
        frr_last_notification(&frr, n1),
        None,
        "no NOTIFICATION to FRR"
    );
    // Both keep the routes, as stale, while the speaker is away.
    hold_for(
        "routes kept as stale while the speaker is away",
        AWAY,
        || {
            for tor in [&bird as &dyn BgpDaemon, &frr] {
                let routes = held(tor)?;
                if !routes.iter().all(|r| r.stale) {
                    return Err(format!("{}: not all stale: {routes:?}", tor.kind()));
                }
                if tor.session_state(n1).is_ok_and(|s| s.established()) {
                    return Err(format!("{}: session up without a speaker", tor.kind()));
                }
            }
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));

    // A new process: sessions back, the same routes refreshed (no longer stale), and
    // they never left either RIB meanwhile.
    let second = Speaker::start(ns.dir(), "n1-second", &args);
    crate::harness::wait_for("both sessions back", WAIT, || {
        held(&bird)?;
        held(&frr)?;
        let up = |t: &dyn BgpDaemon| t.session_state(n1).is_ok_and(|s| s.established());
        if up(&bird) && up(&frr) {
            Ok(())
        } else {
            Err("not yet established".into())
        }
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", second.log_tail(30)));
    wait_exact(&bird, &want(false), "after the restart");
    wait_exact(&frr, &want(true), "after the restart");
}
