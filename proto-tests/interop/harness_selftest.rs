//! Self-tests of the real-peer harness: BIRD, FRR, GoBGP and ExaBGP talking to EACH
//! OTHER, no speaker involved. Each test asserts what one implementation received from
//! another through the harness's parsers, so when a later speaker test fails through
//! the same harness, the failure is the speaker's.
//!
//! Every daemon test runs in a network namespace of its own (see harness/netns.rs) and
//! needs the daemons installed (scripts/install-peers); `PODCIDR_SKIP_INTEROP=1` skips
//! them. Addresses: 100.64.0.n and fd00::n on lo; AS 6500n for the daemon on .n.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod harness;

use std::net::IpAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use ipnet::IpNet;

use harness::bird::{self, Bird};
use harness::exabgp::{self, ExaEventKind, Exabgp};
use harness::frr::{self, Frr};
use harness::gobgp::{self, Gobgp};
use harness::netns;
use harness::process::{Process, TempDir};
use harness::{
    hold_for, v4, v6, wait_for, Afi, Announce, BgpDaemon, Neighbor, Origin, PeerOpts, Route,
    RoutesExt,
};

/// How long any single convergence may take (sessions come up in 1-5 s here).
const WAIT: Duration = Duration::from_secs(30);

fn net(s: &str) -> IpNet {
    s.parse().expect("test prefix literal")
}

fn addr(s: &str) -> IpAddr {
    s.parse().expect("test address literal")
}

/// What GoBGP (AS 65001 on 100.64.0.1) originates in the route tests.
fn gobgp_v4_route() -> Announce {
    Announce::new(net("198.51.100.0/24"))
        .aspath(&[64999])
        .med(50)
        .communities(&[(65001, 100), (65001, 200)])
        .large_communities(&[(65001, 1, 2)])
}

fn gobgp_v6_route() -> Announce {
    Announce::new(net("2001:db8:1::/48")).communities(&[(65001, 300)])
}

/// How every receiver must show `gobgp_v4_route()` (`local_pref` varies by receiver).
fn expected_v4(local_pref: Option<u32>) -> Route {
    Route {
        prefix: net("198.51.100.0/24"),
        next_hop: v4(1),
        as_path: vec![65001, 64999],
        local_pref,
        med: Some(50),
        communities: vec![(65001, 100), (65001, 200)],
        large_communities: vec![(65001, 1, 2)],
        origin: Origin::Igp,
        stale: false,
    }
}

fn expected_v6(local_pref: Option<u32>) -> Route {
    Route {
        prefix: net("2001:db8:1::/48"),
        next_hop: v6(1),
        as_path: vec![65001],
        local_pref,
        med: None,
        communities: vec![(65001, 300)],
        large_communities: vec![],
        origin: Origin::Igp,
        stale: false,
    }
}

/// Waits until `d` holds `want` (exactly) from `from`, and returns it.
fn wait_route(d: &dyn BgpDaemon, from: IpAddr, want: &Route) -> Route {
    let afi = Afi::of(&want.prefix);
    let routes = d
        .wait_routes(from, afi, WAIT, &|r| r.find(&want.prefix) == Some(want))
        .unwrap_or_else(|e| panic!("{} never held {want:?}: {e}", d.kind()));
    routes
        .find(&want.prefix)
        .cloned()
        .expect("checked by the predicate")
}

fn wait_gone(d: &dyn BgpDaemon, from: IpAddr, prefix: IpNet) {
    d.wait_routes(from, Afi::of(&prefix), WAIT, &|r| !r.has(&prefix))
        .unwrap_or_else(|e| panic!("{} kept {prefix}: {e}", d.kind()));
}

fn established(d: &dyn BgpDaemon, neighbor: IpAddr) {
    d.wait_established(neighbor, WAIT)
        .unwrap_or_else(|e| panic!("{}: {e}", d.kind()));
}

#[test]
fn gobgp_routes_reach_bird_frr_and_exabgp_and_are_withdrawn() {
    let Some(ns) = isolated!(&[v4(1), v4(2), v4(3), v4(4), v6(1), v6(2), v6(3), v6(4)]) else {
        return;
    };
    let mut gobgp = Gobgp::start(
        ns.dir(),
        PeerOpts::new(v4(1), 65001)
            .local_addr6(v6(1))
            .neighbor(Neighbor::new(v4(2), 65002).ipv6())
            .neighbor(Neighbor::new(v4(3), 65003).ipv6())
            // ExaBGP twice: IPv4 over an IPv4 session, IPv6 over an IPv6 session.
            .neighbor(Neighbor::new(v4(4), 65004))
            .neighbor(Neighbor::new(v6(4), 65004).ipv6_only())
            .route(gobgp_v4_route()),
    )
    .unwrap();
    let bird = Bird::start(
        ns.dir(),
        PeerOpts::new(v4(2), 65002)
            .local_addr6(v6(2))
            .neighbor(Neighbor::new(v4(1), 65001).ipv6()),
    )
    .unwrap();
    let frr = Frr::start(
        ns.dir(),
        PeerOpts::new(v4(3), 65003)
            .local_addr6(v6(3))
            .neighbor(Neighbor::new(v4(1), 65001).ipv6()),
    )
    .unwrap();
    let exa = Exabgp::start(
        ns.dir(),
        PeerOpts::new(v4(4), 65004)
            .local_addr6(v6(4))
            .neighbor(Neighbor::new(v4(1), 65001))
            .neighbor(Neighbor::new(v6(1), 65001).ipv6_only()),
    )
    .unwrap();

    // The route from the config is there once each session is up; the IPv6 one is
    // announced at run time.
    established(&bird, v4(1));
    established(&frr, v4(1));
    established(&exa, v4(1));
    established(&exa, v6(1));
    for n in [v4(2), v4(3), v4(4), v6(4)] {
        established(&gobgp, n);
    }
    gobgp.announce(gobgp_v6_route()).unwrap();

    // BIRD shows its default LOCAL_PREF on eBGP routes; FRR and ExaBGP show none.
    wait_route(&bird, v4(1), &expected_v4(Some(100)));
    wait_route(&bird, v4(1), &expected_v6(Some(100)));
    wait_route(&frr, v4(1), &expected_v4(None));
    wait_route(&frr, v4(1), &expected_v6(None));
    wait_route(&exa, v4(1), &expected_v4(None));
    wait_route(&exa, v6(1), &expected_v6(None));
    assert!(
        exa.routes(v4(1), Afi::Ipv6).unwrap().is_empty(),
        "IPv6 was not negotiated on the IPv4 session"
    );

    // ExaBGP's log has GoBGP's OPEN as GoBGP configured it.
    let opens: Vec<_> = exa
        .events_from(v4(1))
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            ExaEventKind::Open {
                asn,
                hold_time,
                router_id,
                ..
            } => Some((asn, hold_time, router_id)),
            _ => None,
        })
        .collect();
    assert_eq!(opens, vec![(65001, 9, "100.64.0.1".parse().unwrap())]);

    gobgp.withdraw(net("198.51.100.0/24")).unwrap();
    gobgp.withdraw(net("2001:db8:1::/48")).unwrap();
    for (d, from) in [
        (&bird as &dyn BgpDaemon, v4(1)),
        (&frr as &dyn BgpDaemon, v4(1)),
    ] {
        wait_gone(d, from, net("198.51.100.0/24"));
        wait_gone(d, from, net("2001:db8:1::/48"));
    }
    wait_gone(&exa, v4(1), net("198.51.100.0/24"));
    wait_gone(&exa, v6(1), net("2001:db8:1::/48"));
    let withdrawn: Vec<IpNet> = exa
        .updates_from(v6(1))
        .unwrap()
        .into_iter()
        .flat_map(|u| u.withdraw)
        .collect();
    assert_eq!(withdrawn, vec![net("2001:db8:1::/48")]);
}

#[test]
fn bird_frr_and_exabgp_routes_reach_gobgp_and_are_withdrawn() {
    let Some(ns) = isolated!(&[v4(1), v4(2), v4(3), v4(4), v6(1), v6(2), v6(3), v6(4)]) else {
        return;
    };
    let mut gobgp_opts = PeerOpts::new(v4(1), 65001).local_addr6(v6(1));
    for n in 2..=4 {
        gobgp_opts = gobgp_opts.neighbor(Neighbor::new(v4(n), 65000 + u32::from(n)).ipv6());
    }
    let gobgp = Gobgp::start(ns.dir(), gobgp_opts).unwrap();

    // Peer n originates 192.0.2.<64(n-2)>/26 from its config and 2001:db8:n::/48 at run
    // time, each with attributes of its own.
    let v4_route = |n: u8| {
        Announce::new(net(&format!("192.0.2.{}/26", 64 * (n - 2))))
            .aspath(&[64999])
            .origin(Origin::Egp)
            .med(u32::from(n))
            .communities(&[(65000 + u16::from(n), 1)])
            .large_communities(&[(65000 + u32::from(n), 1, 2)])
    };
    let v6_route =
        |n: u8| Announce::new(net(&format!("2001:db8:{n}::/48"))).origin(Origin::Incomplete);
    let opts = |n: u8| {
        PeerOpts::new(v4(n), 65000 + u32::from(n))
            .local_addr6(v6(n))
            .neighbor(Neighbor::new(v4(1), 65001).ipv6())
            .route(v4_route(n))
    };
    let mut peers: Vec<(u8, Box<dyn BgpDaemon>)> = vec![
        (2, Box::new(Bird::start(ns.dir(), opts(2)).unwrap())),
        (3, Box::new(Frr::start(ns.dir(), opts(3)).unwrap())),
        (4, Box::new(Exabgp::start(ns.dir(), opts(4)).unwrap())),
    ];
    for (n, _) in &peers {
        established(&gobgp, v4(*n));
    }
    for (n, p) in peers.iter_mut() {
        p.announce(v6_route(*n)).unwrap();
    }

    for (n, p) in &peers {
        let n = *n;
        let asn = 65000 + u32::from(n);
        let want4 = Route {
            prefix: v4_route(n).prefix,
            next_hop: v4(n),
            as_path: vec![asn, 64999],
            local_pref: None,
            med: Some(u32::from(n)),
            communities: vec![(asn as u16, 1)],
            large_communities: vec![(asn, 1, 2)],
            origin: Origin::Egp,
            stale: false,
        };
        let want6 = Route {
            prefix: v6_route(n).prefix,
            next_hop: v6(n),
            as_path: vec![asn],
            local_pref: None,
            // FRR gives a `network` route the IGP metric as MED: 0 without zebra.
            med: (p.kind() == "frr").then_some(0),
            communities: vec![],
            large_communities: vec![],
            origin: Origin::Incomplete,
            stale: false,
        };
        let got4 = gobgp
            .wait_routes(v4(n), Afi::Ipv4, WAIT, &|r| {
                r.find(&want4.prefix) == Some(&want4)
            })
            .unwrap_or_else(|e| panic!("{} route never reached gobgp as expected: {e}", p.kind()));
        assert_eq!(got4.find(&want4.prefix), Some(&want4));
        gobgp
            .wait_routes(v4(n), Afi::Ipv6, WAIT, &|r| {
                r.find(&want6.prefix) == Some(&want6)
            })
            .unwrap_or_else(|e| panic!("{} v6 route never reached gobgp: {e}", p.kind()));
    }

    // A second announcement of a prefix replaces the first.
    for (n, p) in peers.iter_mut() {
        p.announce(v4_route(*n).med(1000)).unwrap();
    }
    for (n, p) in &peers {
        let prefix = v4_route(*n).prefix;
        gobgp
            .wait_routes(v4(*n), Afi::Ipv4, WAIT, &|r| {
                r.find(&prefix).is_some_and(|r| r.med == Some(1000))
            })
            .unwrap_or_else(|e| panic!("{} did not replace its route: {e}", p.kind()));
    }

    for (n, p) in peers.iter_mut() {
        p.withdraw(v4_route(*n).prefix).unwrap();
        p.withdraw(v6_route(*n).prefix).unwrap();
        assert!(
            p.withdraw(v6_route(*n).prefix).is_err(),
            "not originated any more"
        );
    }
    for (n, _) in &peers {
        wait_gone(&gobgp, v4(*n), v4_route(*n).prefix);
        wait_gone(&gobgp, v4(*n), v6_route(*n).prefix);
    }
    // BIRD applied its changes with `configure`, FRR with vtysh, ExaBGP through its
    // API: none of them reset its session to do so.
    for (n, p) in &peers {
        let (received, _) = gobgp.message_counts(v4(*n)).unwrap();
        assert_eq!(received.open, 1, "{} reopened its session", p.kind());
        assert_eq!(received.notification, 0, "{} sent a NOTIFICATION", p.kind());
    }
}

#[test]
fn md5_with_the_right_password_establishes_and_with_a_wrong_one_never() {
    let Some(ns) = isolated!(&[v4(1), v4(2), v4(3)]) else {
        return;
    };
    let bird = Bird::start(
        ns.dir(),
        PeerOpts::new(v4(2), 65002)
            .neighbor(Neighbor::new(v4(1), 65001).password("right-secret"))
            .neighbor(Neighbor::new(v4(3), 65003).password("right-secret")),
    )
    .unwrap();
    let right = Gobgp::start(
        ns.dir(),
        PeerOpts::new(v4(1), 65001)
            .neighbor(Neighbor::new(v4(2), 65002).password("right-secret"))
            .route(gobgp_v4_route()),
    )
    .unwrap();
    let wrong = Gobgp::start(
        ns.dir(),
        PeerOpts::new(v4(3), 65003).neighbor(Neighbor::new(v4(2), 65002).password("wrong-secret")),
    )
    .unwrap();

    established(&bird, v4(1));
    established(&right, v4(2));
    wait_route(&bird, v4(1), &expected_v4(Some(100)));
    // Both sides retry every 1-2 s: several attempts, none may succeed.
    hold_for(
        "wrong MD5 password never establishes",
        Duration::from_secs(6),
        || {
            let b = bird.session_state(v4(3)).map_err(|e| e.to_string())?;
            let w = wrong.session_state(v4(2)).map_err(|e| e.to_string())?;
            if b.established() || w.established() {
                return Err(format!("bird sees {b:?}, gobgp sees {w:?}"));
            }
            Ok(())
        },
    )
    .unwrap();
    assert!(bird.session_state(v4(1)).unwrap().established());

    // The control: the same GoBGP with the right password gets through.
    drop(wrong);
    let fixed = Gobgp::start(
        ns.dir(),
        PeerOpts::new(v4(3), 65003).neighbor(Neighbor::new(v4(2), 65002).password("right-secret")),
    )
    .unwrap();
    established(&fixed, v4(2));
    established(&bird, v4(3));
}

#[test]
fn gobgp_restart_resets_the_session_and_its_routes_come_back() {
    let Some(ns) = isolated!(&[v4(1), v4(2)]) else {
        return;
    };
    let bird = Bird::start(
        ns.dir(),
        PeerOpts::new(v4(2), 65002).neighbor(Neighbor::new(v4(1), 65001)),
    )
    .unwrap();
    let mut gobgp = Gobgp::start(
        ns.dir(),
        PeerOpts::new(v4(1), 65001)
            .neighbor(Neighbor::new(v4(2), 65002))
            .route(gobgp_v4_route()),
    )
    .unwrap();
    let runtime = Announce::new(net("203.0.113.0/24")).communities(&[(65001, 1)]);
    let runtime_seen = Route {
        prefix: runtime.prefix,
        next_hop: v4(1),
        as_path: vec![65001],
        local_pref: Some(100),
        med: None,
        communities: vec![(65001, 1)],
        large_communities: vec![],
        origin: Origin::Igp,
        stale: false,
    };
    established(&bird, v4(1));
    gobgp.announce(runtime.clone()).unwrap();
    wait_route(&bird, v4(1), &expected_v4(Some(100)));
    wait_route(&bird, v4(1), &runtime_seen);
    // Let the session age, so that the new one is told apart by its uptime.
    wait_for("bird's session to be 3 s old", WAIT, || {
        match bird.session_state(v4(1)) {
            Ok(s) if s.uptime.is_some_and(|u| u >= Duration::from_secs(3)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .unwrap();

    let t0 = Instant::now();
    gobgp.restart().unwrap();
    // BIRD reports uptime in whole seconds: allow one of rounding.
    wait_for("a new session at bird", WAIT, || {
        match bird.session_state(v4(1)) {
            Ok(s)
                if s.established()
                    && s.uptime
                        .is_some_and(|u| u <= t0.elapsed() + Duration::from_secs(1)) =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .unwrap();
    wait_route(&bird, v4(1), &expected_v4(Some(100)));
    wait_route(&bird, v4(1), &runtime_seen);
    assert_eq!(bird.routes(v4(1), Afi::Ipv4).unwrap().len(), 2);
}

#[test]
fn bird_and_frr_keep_gobgps_routes_stale_through_its_graceful_restart() {
    let Some(ns) = isolated!(&[v4(1), v4(2), v4(3), v6(1), v6(2), v6(3)]) else {
        return;
    };
    let helper = |n: u8| {
        PeerOpts::new(v4(n), 65000 + u32::from(n))
            .local_addr6(v6(n))
            .neighbor(Neighbor::new(v4(1), 65001).ipv6().graceful_restart(30))
    };
    let bird = Bird::start(ns.dir(), helper(2)).unwrap();
    let frr = Frr::start(ns.dir(), helper(3)).unwrap();
    let mut gobgp = Gobgp::start(
        ns.dir(),
        PeerOpts::new(v4(1), 65001)
            .local_addr6(v6(1))
            .neighbor(Neighbor::new(v4(2), 65002).ipv6().graceful_restart(30))
            .neighbor(Neighbor::new(v4(3), 65003).ipv6().graceful_restart(30))
            .route(gobgp_v4_route())
            .route(gobgp_v6_route()),
    )
    .unwrap();
    let helpers: [(&dyn BgpDaemon, Option<u32>); 2] = [(&bird, Some(100)), (&frr, None)];
    for (d, lp) in helpers {
        established(d, v4(1));
        wait_route(d, v4(1), &expected_v4(lp));
        wait_route(d, v4(1), &expected_v6(lp));
    }

    gobgp.crash().unwrap();
    for (d, lp) in helpers {
        let stale4 = Route {
            stale: true,
            ..expected_v4(lp)
        };
        let stale6 = Route {
            stale: true,
            ..expected_v6(lp)
        };
        wait_route(d, v4(1), &stale4);
        wait_route(d, v4(1), &stale6);
        assert!(
            !d.session_state(v4(1)).unwrap().established(),
            "{} still sees the session up",
            d.kind()
        );
    }

    gobgp.start_graceful().unwrap();
    for (d, lp) in helpers {
        established(d, v4(1));
        // Fresh (not stale) once GoBGP has sent them again and its End-of-RIB.
        wait_route(d, v4(1), &expected_v4(lp));
        wait_route(d, v4(1), &expected_v6(lp));
    }
}

#[test]
fn shutdown_neighbor_sends_cease_administrative_shutdown() {
    let Some(ns) = isolated!(&[v4(1), v4(2), v4(3), v4(4)]) else {
        return;
    };
    let to_exa =
        |n: u8| PeerOpts::new(v4(n), 65000 + u32::from(n)).neighbor(Neighbor::new(v4(4), 65004));
    let mut gobgp = Gobgp::start(ns.dir(), to_exa(1)).unwrap();
    let mut bird = Bird::start(ns.dir(), to_exa(2)).unwrap();
    let mut frr = Frr::start(ns.dir(), to_exa(3)).unwrap();
    let mut exa_opts = PeerOpts::new(v4(4), 65004);
    for n in 1..=3 {
        exa_opts = exa_opts.neighbor(Neighbor::new(v4(n), 65000 + u32::from(n)));
    }
    let mut exa = Exabgp::start(ns.dir(), exa_opts).unwrap();
    for n in 1..=3 {
        established(&exa, v4(n));
    }

    // BIRD ends its initial update with End-of-RIB (RFC 4724 section 2), GR or not.
    wait_for("bird's end-of-rib at exabgp", WAIT, || {
        match exa.end_of_ribs_from(v4(2)) {
            Ok(e) if e.contains(&Afi::Ipv4) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .unwrap();

    gobgp.shutdown_neighbor(v4(4)).unwrap();
    bird.shutdown_neighbor(v4(4)).unwrap();
    frr.shutdown_neighbor(v4(4)).unwrap();
    for n in 1..=3 {
        let ceased = wait_for("cease from each peer", WAIT, || {
            let got = exa.notifications_from(v4(n)).map_err(|e| e.to_string())?;
            match got.iter().find(|(code, sub, _)| (*code, *sub) == (6, 2)) {
                Some(c) => Ok(c.clone()),
                None => Err(format!("notifications so far: {got:?}")),
            }
        });
        assert!(ceased.is_ok(), "peer {}: {ceased:?}", v4(n));
        assert!(!exa.session_state(v4(n)).unwrap().established());
    }

    gobgp.enable_neighbor(v4(4)).unwrap();
    bird.enable_neighbor(v4(4)).unwrap();
    frr.enable_neighbor(v4(4)).unwrap();
    for n in 1..=3 {
        established(&exa, v4(n));
    }

    // And ExaBGP's own teardown, as BIRD and GoBGP see it. BIRD reconnects at once and
    // then shows no error any more: its log has the NOTIFICATION.
    exa.shutdown_neighbor(v4(2)).unwrap();
    wait_for("bird to log the cease", WAIT, || {
        let log = bird.log_tail(50);
        if log.contains("Received: Administrative shutdown") {
            Ok(())
        } else {
            Err(log)
        }
    })
    .unwrap();
    exa.shutdown_neighbor(v4(1)).unwrap();
    wait_for("gobgp to count the NOTIFICATION", WAIT, || {
        match gobgp.message_counts(v4(4)) {
            Ok((rx, _)) if rx.notification == 1 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .unwrap();

    // A restarted ExaBGP starts a fresh event log; the whole one stays readable.
    exa.restart().unwrap();
    established(&exa, v4(2));
    assert!(exa.notifications_from(v4(2)).unwrap().is_empty());
    let before_restart = exa.all_events().unwrap();
    assert!(before_restart.iter().any(|e| e.peer == Some(v4(2))
        && matches!(
            e.kind,
            ExaEventKind::Notification {
                code: 6,
                subcode: 2,
                ..
            }
        )));
}

/// Generated configs are checked by the daemons' own parsers (`bird -p`, `bgpd -C`,
/// `gobgpd -d`, `exabgp --validate`), every option the harness can write included: a
/// config line a daemon ignores would otherwise go unnoticed (bgpd only logs it).
#[test]
fn generated_configs_pass_each_daemons_own_check() {
    if netns::skip_requested() {
        println!(
            "skipping generated_configs_pass_each_daemons_own_check: {}=1",
            netns::SKIP_ENV
        );
        return;
    }
    let dir = TempDir::new("pcs-check").unwrap();
    let every_option = PeerOpts::new(v4(2), 65002)
        .local_addr6(v6(2))
        .neighbor(
            Neighbor::new(v4(1), 65001)
                .ipv6()
                .password("p@ss-w0rd!")
                .graceful_restart(30)
                .multihop(2)
                .hold_time(30)
                .passive(),
        )
        .neighbor(Neighbor::new(v6(1), 4_200_000_000).ipv6_only())
        .route(
            Announce::new(net("192.0.2.0/24"))
                .aspath(&[64999, 64998])
                .origin(Origin::Incomplete)
                .med(7)
                .local_pref(200)
                .communities(&[(65002, 1), (65002, 2)])
                .large_communities(&[(65002, 1, 2)]),
        )
        .route(Announce::new(net("2001:db8::/32")).next_hop(addr("fd00::9")));
    every_option.validate().unwrap();
    let frr_routes: Vec<(Announce, u32)> = every_option.routes.iter().cloned().zip(1..).collect();

    bird::check_config(
        dir.path(),
        &bird::render_config(&every_option, &every_option.routes).unwrap(),
    )
    .unwrap();
    frr::check_config(
        dir.path(),
        &frr::render_config(&every_option, &frr_routes).unwrap(),
    )
    .unwrap();
    gobgp::check_config(dir.path(), &gobgp::render_config(&every_option).unwrap()).unwrap();
    let cat = std::path::Path::new("/bin/cat");
    exabgp::check_config(
        dir.path(),
        &exabgp::render_config(&every_option, &every_option.routes, cat, cat).unwrap(),
    )
    .unwrap();

    // And the checks do reject: a broken line is caught for each.
    assert!(bird::check_config(dir.path(), "protocol bgp x { bogus; }\n").is_err());
    assert!(frr::check_config(dir.path(), "router bgp 1\n neighbor 100.64.0.1 bogus\n").is_err());
    assert!(gobgp::check_config(dir.path(), "[global.config]\n  as = \"x\"\n").is_err());
    assert!(exabgp::check_config(dir.path(), "neighbor 100.64.0.1 { bogus 1; }\n").is_err());
}

/// Set by `isolation_reports_failures_and_kills_hung_tests` for its helpers.
const HELPER_ENV: &str = "PODCIDR_HARNESS_HELPER";
/// Where the hung helper writes "<sleeper pid> <namespace temp dir>".
const HELPER_PIDFILE_ENV: &str = "PODCIDR_HARNESS_HELPER_PIDFILE";

#[test]
fn each_test_gets_its_own_namespace_with_its_addresses() {
    let Some(ns) = isolated!(&[v4(1), v6(1)]) else {
        return;
    };
    assert!(netns::inside());
    let lo = harness::process::run_ok(
        Command::new("ip").args(["-o", "addr", "show", "dev", "lo"]),
        harness::process::COMMAND_TIMEOUT,
    )
    .unwrap();
    assert!(
        lo.contains("100.64.0.1/32") && lo.contains("fd00::1/128"),
        "{lo}"
    );
    // Port 179 on both addresses: the fake root may bind it, the IPv6 address is not
    // tentative, and no other test holds it (they run in their own namespaces).
    let l4 = std::net::TcpListener::bind((v4(1), 179)).unwrap();
    let l6 = std::net::TcpListener::bind((v6(1), 179)).unwrap();
    drop((l4, l6));
    assert!(ns.dir().starts_with("/tmp") && ns.dir().is_dir());
}

#[test]
fn isolation_reports_failures_and_kills_hung_tests() {
    if netns::skip_requested() {
        println!(
            "skipping isolation_reports_failures_and_kills_hung_tests: {}=1",
            netns::SKIP_ENV
        );
        return;
    }
    netns::probe_unshare().unwrap();

    let failed = netns::run_child(
        "helper_fails_inside_its_namespace",
        Duration::from_secs(60),
        &[(HELPER_ENV, "1")],
    )
    .unwrap();
    assert!(!failed.passed() && !failed.timed_out, "{failed:?}");
    assert!(
        failed.output.contains("deliberate failure"),
        "{}",
        failed.output
    );
    // The daemon guard printed the daemon's log when the test panicked.
    assert!(
        failed.output.contains("sleeper says hello"),
        "{}",
        failed.output
    );

    let pidfile = TempDir::new("pcs-helper").unwrap();
    let pidfile = pidfile.path().join("pid");
    let hung = netns::run_child(
        "helper_hangs_inside_its_namespace",
        Duration::from_secs(5),
        &[
            (HELPER_ENV, "1"),
            (HELPER_PIDFILE_ENV, pidfile.to_str().unwrap()),
        ],
    )
    .unwrap();
    assert!(hung.timed_out && !hung.passed(), "{hung:?}");
    assert!(hung.elapsed < Duration::from_secs(20), "{:?}", hung.elapsed);
    let written = std::fs::read_to_string(&pidfile).unwrap();
    let (pid, dir) = written.trim().split_once(' ').unwrap();
    let pid: libc::pid_t = pid.parse().unwrap();
    // Killed with the test's process group; reaped by init once its parent died.
    wait_for(
        "the hung test's daemon to be gone",
        Duration::from_secs(5),
        || {
            // SAFETY: kill(2) with signal 0 only checks for existence.
            if unsafe { libc::kill(pid, 0) } == 0 {
                Err(format!("pid {pid} alive"))
            } else {
                Ok(())
            }
        },
    )
    .unwrap();
    // A killed test cannot remove its temp dir: its parent does.
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
#[ignore = "helper of isolation_reports_failures_and_kills_hung_tests: fails on purpose"]
fn helper_fails_inside_its_namespace() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    let Some(ns) = isolated!(&[v4(1)]) else {
        return;
    };
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo sleeper says hello; exec sleep 600"]);
    let log = ns.dir().join("sleeper.log");
    let _sleeper = Process::spawn("sleeper", cmd, &log).unwrap();
    wait_for(
        "the sleeper's greeting",
        WAIT,
        || match std::fs::read_to_string(&log) {
            Ok(s) if s.contains("hello") => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .unwrap();
    panic!("deliberate failure inside the namespace");
}

#[test]
#[ignore = "helper of isolation_reports_failures_and_kills_hung_tests: hangs on purpose"]
fn helper_hangs_inside_its_namespace() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    let Some(ns) = isolated!(&[v4(1)]) else {
        return;
    };
    let mut cmd = Command::new("sleep");
    cmd.arg("600");
    let sleeper = Process::spawn("sleeper", cmd, &ns.dir().join("sleeper.log")).unwrap();
    let pidfile = std::env::var(HELPER_PIDFILE_ENV).unwrap();
    std::fs::write(pidfile, format!("{} {}", sleeper.pid(), ns.dir().display())).unwrap();
    std::thread::sleep(Duration::from_secs(600));
}
