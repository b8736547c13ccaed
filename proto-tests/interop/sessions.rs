//! The speaker's sessions against real BIRD 2, FRR bgpd, GoBGP and ExaBGP (issue #3):
//! each scenario is written once and run against every implementation, each run in a
//! network namespace of its own (harness/netns.rs) with the speaker in process
//! (speaker/mod.rs: `peer::spawn` on a Tokio runtime, desired routes through a `watch`).
//!
//! Scenarios: eBGP and iBGP with 2-octet and 4-octet AS numbers, IPv4 and IPv6 prefixes
//! announced, changed and withdrawn, checked in the daemon's RIB attribute by attribute;
//! hold time and keepalive negotiation; the daemon restarting and our routes coming back;
//! a NOTIFICATION from the daemon and one from us; TCP MD5 with the right and a wrong
//! password; graceful restart of the speaker with BIRD and FRR keeping our routes as
//! stale until we are back. ExaBGP's rx.jsonl shows exactly what went on the wire.
//!
//! Addresses: the daemons on 100.64.0.2 and .4 (fd00::2, ::4), speakers on .1, .3, .5,
//! .6. Needs the daemons (scripts/install-peers); `PODCIDR_SKIP_INTEROP=1` skips.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod harness;
mod speaker;

// Another speaker peering from our address (issue 29), its own file.
mod second_speaker;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipnet::IpNet;

use harness::{hold_for, v4, v6, wait_for, Afi, Neighbor, PeerOpts, RoutesExt};
use podcidr_speaker::bgp::session::{SessionError, State};
use podcidr_speaker::peer::Shutdown;
use speaker::{
    desired, net, peer_config, runtime, spec, time_jitter, tor_neighbor, Attrs, Kind, Speaker, Tor,
    WAIT,
};

/// Every address a scenario may use.
const ADDRS: [IpAddr; 10] = [
    IpAddr::V4(std::net::Ipv4Addr::new(100, 64, 0, 1)),
    IpAddr::V4(std::net::Ipv4Addr::new(100, 64, 0, 2)),
    IpAddr::V4(std::net::Ipv4Addr::new(100, 64, 0, 3)),
    IpAddr::V4(std::net::Ipv4Addr::new(100, 64, 0, 4)),
    IpAddr::V4(std::net::Ipv4Addr::new(100, 64, 0, 5)),
    IpAddr::V4(std::net::Ipv4Addr::new(100, 64, 0, 6)),
    IpAddr::V6(std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
    IpAddr::V6(std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
    IpAddr::V6(std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 3)),
    IpAddr::V6(std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 4)),
];

/// 2-octet AS of the first daemon, 4-octet AS of the second.
const TOR_AS2: u32 = 65002;
const TOR_AS4: u32 = 4_200_000_004;

/// The daemon most scenarios run against: `kind` on 100.64.0.2 and fd00::2, AS
/// [`TOR_AS2`], with `neighbors`.
fn start_tor(kind: Kind, dir: &Path, neighbors: impl IntoIterator<Item = Neighbor>) -> Tor {
    let opts = neighbors.into_iter().fold(
        PeerOpts::new(v4(2), TOR_AS2).local_addr6(v6(2)),
        PeerOpts::neighbor,
    );
    Tor::start(kind, dir, opts)
}

/// eBGP and iBGP, each with 2-octet and 4-octet AS numbers: four speakers against two
/// daemons. Each announces two IPv4 /24s and one IPv6 /64 over its IPv4 session; then
/// one of each family is withdrawn and the other changes its MED.
fn ebgp_and_ibgp_routes(kind: Kind, dir: &Path) {
    let rt = runtime();
    // (speaker address, speaker AS, daemon address, daemon AS)
    let sessions: [(u8, u32, u8, u32); 4] = [
        (1, 65001, 2, TOR_AS2),         // eBGP, 2-octet both sides
        (3, TOR_AS2, 2, TOR_AS2),       // iBGP, 2-octet
        (5, 4_200_000_005, 4, TOR_AS4), // eBGP, 4-octet both sides
        (6, TOR_AS4, 4, TOR_AS4),       // iBGP, 4-octet
    ];
    let opts = |me: u8, asn: u32| {
        let mut o = PeerOpts::new(v4(me), asn).local_addr6(v6(me));
        for (n, s_asn, tor, _) in sessions {
            if tor == me {
                o = o.neighbor(tor_neighbor(kind, n, s_asn));
            }
        }
        o
    };
    let tor2 = Tor::start(kind, dir, opts(2, TOR_AS2));
    let tor4 = Tor::start(kind, dir, opts(4, TOR_AS4));
    let tor_of = |t: u8| if t == 2 { &tor2 } else { &tor4 };

    let prefixes = |n: u8| {
        [
            net(&format!("10.244.{n}.0/24")),
            net(&format!("10.245.{n}.0/24")),
            net(&format!("fd10:{n}::/64")),
        ]
    };
    let attrs = |n: u8, asn: u32, ibgp: bool| {
        Attrs::new(asn, ibgp)
            .node(n)
            .med(u32::from(n))
            .large(&[(asn, 1, u32::from(n))])
    };
    let mut speakers = Vec::new();
    for (n, asn, tor, tor_asn) in sessions {
        let cfg = peer_config(v4(tor), tor_asn, asn, &[]);
        let a = attrs(n, asn, asn == tor_asn);
        speakers.push(Speaker::start(
            &rt,
            spec(n, &cfg),
            desired(&prefixes(n), &a),
        ));
    }
    for ((n, asn, tor, tor_asn), s) in sessions.iter().zip(&speakers) {
        let st = s.wait_synced();
        let neg = st.negotiated.expect("negotiated while established");
        assert_eq!(neg.ibgp, asn == tor_asn, "{}", s.name);
        assert_eq!(neg.peer_asn, *tor_asn);
        assert!(
            neg.four_octet_as,
            "{}: every implementation speaks RFC 6793",
            s.name
        );
        assert_eq!(
            neg.families,
            vec![
                podcidr_speaker::bgp::wire::AfiSafi::IPV4_UNICAST,
                podcidr_speaker::bgp::wire::AfiSafi::IPV6_UNICAST
            ],
            "{}",
            s.name
        );
        let t = tor_of(*tor);
        t.established(v4(*n));
        let a = attrs(*n, *asn, asn == tor_asn);
        let [p4a, p4b, p6] = prefixes(*n);
        t.wait_exact(
            v4(*n),
            Afi::Ipv4,
            &[a.expected(kind, p4a, *n), a.expected(kind, p4b, *n)],
        );
        t.wait_exact(v4(*n), Afi::Ipv6, &[a.expected(kind, p6, *n)]);
        let st = s.status();
        assert_eq!(
            st.advertised.values().sum::<u64>(),
            3,
            "{}: adj-rib-out {:?}",
            s.name,
            st.advertised
        );
    }

    // Withdraw 10.245.n.0/24 and the IPv6 prefix; change the MED of 10.244.n.0/24.
    for ((n, asn, _, tor_asn), s) in sessions.iter().zip(&speakers) {
        let changed = attrs(*n, *asn, asn == tor_asn).med(1000 + u32::from(*n));
        s.set_routes(desired(&[prefixes(*n)[0]], &changed));
    }
    for ((n, asn, tor, tor_asn), s) in sessions.iter().zip(&speakers) {
        s.wait_synced();
        let changed = attrs(*n, *asn, asn == tor_asn).med(1000 + u32::from(*n));
        let t = tor_of(*tor);
        t.wait_exact(
            v4(*n),
            Afi::Ipv4,
            &[changed.expected(kind, prefixes(*n)[0], *n)],
        );
        t.wait_exact(v4(*n), Afi::Ipv6, &[]);
        // Only the difference went out: one session, never reset.
        let st = s.status();
        assert_eq!(st.stats.established_count, 1, "{}", s.name);
        assert_eq!(st.stats.sent.notification, 0, "{}", s.name);
    }

    if kind == Kind::Exabgp {
        exabgp_saw_exactly_our_messages(&tor2, &speakers[0]);
    }
}

/// What ExaBGP logged from the eBGP 2-octet speaker (100.64.0.1): our OPEN, the table
/// with every attribute, End-of-RIB for both families, then exactly the change.
fn exabgp_saw_exactly_our_messages(tor: &Tor, s: &Speaker) {
    use harness::exabgp::ExaEventKind;
    let exa = tor.exabgp();
    let events = exa.events_from(v4(1)).unwrap();
    let opens: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ExaEventKind::Open {
                asn,
                hold_time,
                router_id,
                ..
            } => Some((*asn, *hold_time, *router_id)),
            _ => None,
        })
        .collect();
    assert_eq!(opens, vec![(65001, 9, speaker::v4_of(1))]);
    let eors = exa.end_of_ribs_from(v4(1)).unwrap();
    assert_eq!(
        eors,
        vec![Afi::Ipv4, Afi::Ipv6],
        "one End-of-RIB per family"
    );
    let updates = exa.updates_from(v4(1)).unwrap();
    // The table: one UPDATE per family (both IPv4 prefixes share attributes), then the
    // change: the IPv4 withdrawal, the IPv6 withdrawal, the new MED.
    let summary: Vec<(Vec<IpNet>, Vec<IpNet>, Option<u32>)> = updates
        .iter()
        .map(|u| {
            (
                u.announce.iter().map(|(p, _)| *p).collect(),
                u.withdraw.clone(),
                u.attrs.med,
            )
        })
        .collect();
    let p = |s: &str| net(s);
    assert_eq!(
        summary,
        vec![
            (
                vec![p("10.244.1.0/24"), p("10.245.1.0/24")],
                vec![],
                Some(1)
            ),
            (vec![p("fd10:1::/64")], vec![], Some(1)),
            (vec![], vec![p("10.245.1.0/24")], None),
            (vec![], vec![p("fd10:1::/64")], None),
            (vec![p("10.244.1.0/24")], vec![], Some(1001)),
        ],
        "{updates:#?}"
    );
    let first = &updates[0].attrs;
    assert_eq!(first.as_path, vec![65001]);
    assert_eq!(first.origin, Some(harness::Origin::Incomplete));
    assert_eq!(first.communities, vec![(65535, 100)]);
    assert_eq!(first.large_communities, vec![(65001, 1, 1)]);
    assert_eq!(first.local_pref, None, "no LOCAL_PREF on eBGP");
    assert!(updates[0].announce.iter().all(|(_, nh)| *nh == v4(1)));
    assert!(updates[1].announce.iter().all(|(_, nh)| *nh == v6(1)));
    assert_eq!(
        s.status().stats.sent.update,
        2 + 2 + 3,
        "table, two End-of-RIBs, change"
    );
}

/// Hold time: the smaller offer wins on both sides (RFC 4271 section 4.2), and the
/// keepalive interval is at most a third of it. The speaker on .1 offers 30 s against
/// the daemon's 9 s; the one on .3 offers 6 s with a 1 s keepalive. Both sessions then
/// outlive their hold time several times over: keepalives flow both ways.
fn hold_time_and_keepalive(kind: Kind, dir: &Path) {
    let rt = runtime();
    let tor = start_tor(
        kind,
        dir,
        [tor_neighbor(kind, 1, 65001), tor_neighbor(kind, 3, 65003)],
    );
    let routes = |n: u8| {
        desired(
            &[net(&format!("10.244.{n}.0/24"))],
            &Attrs::new(65000 + u32::from(n), false).node(n),
        )
    };
    let long = Speaker::start(
        &rt,
        spec(1, &peer_config(v4(2), TOR_AS2, 65001, &["hold-time: 30s"])),
        routes(1),
    );
    let short = Speaker::start(
        &rt,
        spec(
            3,
            &peer_config(
                v4(2),
                TOR_AS2,
                65003,
                &["hold-time: 6s", "keepalive-time: 1s"],
            ),
        ),
        routes(3),
    );
    let n_long = long.wait_synced().negotiated.expect("negotiated");
    let n_short = short.wait_synced().negotiated.expect("negotiated");
    assert_eq!((n_long.hold_time, n_long.keepalive), (9, 3));
    assert_eq!(n_long.peer_hold_time, 9);
    assert_eq!((n_short.hold_time, n_short.keepalive), (6, 1));
    tor.established(v4(1));
    tor.established(v4(3));
    if let Some((hold, keepalive)) = tor.negotiated_timers(v4(1)) {
        assert_eq!((hold, keepalive), (9, 3), "{kind:?} with the 30 s offer");
    }
    if let Some((hold, keepalive)) = tor.negotiated_timers(v4(3)) {
        assert_eq!(hold, 6, "{kind:?} with the 6 s offer");
        assert!(keepalive <= 2, "{kind:?} keepalive {keepalive} > hold/3");
    }
    if kind == Kind::Exabgp {
        // What we offered, as ExaBGP decoded our OPENs, and the hold time ExaBGP
        // negotiated from them and its own 9 s.
        use harness::exabgp::ExaEventKind;
        for (n, offer, negotiated) in [(1, 30, 9), (3, 6, 6)] {
            let events = tor.exabgp().events_from(v4(n)).unwrap();
            let holds: Vec<u16> = events
                .iter()
                .filter_map(|e| match e.kind {
                    ExaEventKind::Open { hold_time, .. } => Some(hold_time),
                    _ => None,
                })
                .collect();
            assert_eq!(holds, vec![offer]);
            let agreed: Vec<u16> = events
                .iter()
                .filter_map(|e| match e.kind {
                    ExaEventKind::Negotiated { hold_time } => Some(hold_time),
                    _ => None,
                })
                .collect();
            assert_eq!(agreed, vec![negotiated], "exabgp with the {offer} s offer");
        }
    }

    // Twice the short hold time: no session may drop, and our keepalives go out at the
    // negotiated pace (one per second on .3, one per 3 s on .1).
    let before = (long.status().stats, short.status().stats);
    let t0 = Instant::now();
    hold_for(
        "sessions outlive their hold time",
        Duration::from_secs(12),
        || {
            for (s, n) in [(&long, 1), (&short, 3)] {
                let st = s.status();
                if st.state != State::Established || st.stats.established_count != 1 {
                    return Err(format!("{}: {:?}", s.name, st.state));
                }
                let peer = tor.d().session_state(v4(n)).map_err(|e| e.to_string())?;
                if !peer.established() {
                    return Err(format!("{} sees {peer:?}", tor.d().kind()));
                }
            }
            Ok(())
        },
    )
    .unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let (after_long, after_short) = (long.status().stats, short.status().stats);
    let sent = |a: u64, b: u64| (a - b) as f64;
    let ka_short = sent(after_short.sent.keepalive, before.1.sent.keepalive);
    let ka_long = sent(after_long.sent.keepalive, before.0.sent.keepalive);
    assert!(
        (secs - 2.0..=secs + 1.0).contains(&ka_short),
        "{ka_short} keepalives in {secs:.1} s at 1 s"
    );
    assert!(
        (secs / 3.0 - 1.0..=secs / 3.0 + 1.0).contains(&ka_long),
        "{ka_long} keepalives in {secs:.1} s at 3 s"
    );
    // And the daemon's keepalives reach us (ExaBGP's pace is its own third of 6 s).
    let rx_short = sent(after_short.received.keepalive, before.1.received.keepalive);
    assert!(
        rx_short >= secs / 3.0 - 1.0,
        "{rx_short} keepalives received in {secs:.1} s"
    );
}

/// The daemon restarts: the session drops, the speaker reconnects (its backoff) and
/// sends its routes again.
fn peer_restart(kind: Kind, dir: &Path) {
    let rt = runtime();
    let mut tor = start_tor(kind, dir, [tor_neighbor(kind, 1, 65001)]);
    let a = Attrs::new(65001, false).med(5);
    let prefixes = [net("10.244.1.0/24"), net("fd10:1::/64")];
    let s = Speaker::start(
        &rt,
        spec(1, &peer_config(v4(2), TOR_AS2, 65001, &[])),
        desired(&prefixes, &a),
    );
    s.wait_synced();
    tor.wait_exact(v4(1), Afi::Ipv4, &[a.expected(kind, prefixes[0], 1)]);
    tor.wait_exact(v4(1), Afi::Ipv6, &[a.expected(kind, prefixes[1], 1)]);

    tor.d_mut().restart().unwrap();
    let st = s.wait("a second session", WAIT, |st| {
        st.state == State::Established && st.stats.established_count == 2 && st.pending == 0
    });
    assert_eq!(st.stats.flaps, 1);
    assert!(st.stats.last_error.is_some(), "the drop is recorded");
    tor.wait_exact(v4(1), Afi::Ipv4, &[a.expected(kind, prefixes[0], 1)]);
    tor.wait_exact(v4(1), Afi::Ipv6, &[a.expected(kind, prefixes[1], 1)]);
    if kind == Kind::Exabgp {
        // The new ExaBGP got the whole table and both End-of-RIBs again.
        let eors = tor.exabgp().end_of_ribs_from(v4(1)).unwrap();
        assert_eq!(eors, vec![Afi::Ipv4, Afi::Ipv6]);
    }
}

/// A NOTIFICATION from the daemon (Cease/Administrative Shutdown) ends the session and
/// is recorded; once the daemon enables the neighbor again, the routes come back. Then
/// our own: an administrative shutdown with an RFC 9003 message the daemon shows.
fn notifications(kind: Kind, dir: &Path) {
    let rt = runtime();
    let mut tor = start_tor(kind, dir, [tor_neighbor(kind, 1, 65001)]);
    let a = Attrs::new(65001, false);
    let prefixes = [net("10.244.1.0/24"), net("fd10:1::/64")];
    let mut s = Speaker::start(
        &rt,
        spec(1, &peer_config(v4(2), TOR_AS2, 65001, &[])),
        desired(&prefixes, &a),
    );
    s.wait_synced();
    tor.wait_exact(v4(1), Afi::Ipv4, &[a.expected(kind, prefixes[0], 1)]);

    tor.d_mut().shutdown_neighbor(v4(1)).unwrap();
    let st = s.wait("the daemon's cease", WAIT, |st| {
        matches!(
            speaker::last_error(st),
            Some(SessionError::NotificationReceived(n)) if (n.code, n.subcode) == (6, 2)
        ) || st.stats.flaps > 0
    });
    match speaker::last_error(&st) {
        Some(SessionError::NotificationReceived(n)) => {
            assert_eq!((n.code, n.subcode), (6, 2), "{n}");
        }
        other => panic!("expected a received cease, got {other:?}"),
    }
    assert_eq!(st.stats.received.notification, 1);
    assert_eq!(
        st.advertised.values().sum::<u64>(),
        0,
        "adj-rib-out cleared"
    );

    tor.enable_neighbor(v4(1));
    s.wait("a second session", WAIT, |st| {
        st.state == State::Established && st.stats.established_count == 2 && st.pending == 0
    });
    tor.wait_exact(v4(1), Afi::Ipv4, &[a.expected(kind, prefixes[0], 1)]);
    tor.wait_exact(v4(1), Afi::Ipv6, &[a.expected(kind, prefixes[1], 1)]);

    // ExaBGP 4.2.21 cannot decode a shutdown communication (see
    // `Tor::saw_admin_shutdown`): it gets an empty one.
    let message = if kind == Kind::Exabgp {
        ""
    } else {
        "node drained for maintenance"
    };
    let st = s.stop(Shutdown::Admin(message.into()));
    assert_eq!(st.stats.sent.notification, 1);
    assert_ne!(st.state, State::Established);
    wait_for("the daemon to show our cease", WAIT, || {
        tor.saw_admin_shutdown(v4(1), message)
    })
    .unwrap();
    // The session is gone, and our routes with it.
    tor.wait_nothing_from(v4(1));
}

/// Graceful shutdown (RFC 8326): stopped for good without graceful restart (SIGTERM's
/// `Shutdown::Restart`), the speaker first sends its routes again with GRACEFUL_SHUTDOWN
/// (65535:0) beside their own community, keeps them for the grace period, then
/// withdraws them and sends Cease/Administrative Shutdown with its message. ExaBGP shows
/// the messages in order on the wire.
fn graceful_shutdown(kind: Kind, dir: &Path) {
    const GRACE: Duration = Duration::from_secs(4);
    let rt = runtime();
    let tor = start_tor(kind, dir, [tor_neighbor(kind, 1, 65001)]);
    let a = Attrs::new(65001, false);
    let prefixes = [net("10.244.1.0/24"), net("fd10:1::/64")];
    let mut sp = spec(1, &peer_config(v4(2), TOR_AS2, 65001, &[]));
    sp.graceful_shutdown = GRACE;
    let mut s = Speaker::start(&rt, sp, desired(&prefixes, &a));
    s.wait_synced();
    tor.wait_exact(v4(1), Afi::Ipv4, &[a.expected(kind, prefixes[0], 1)]);
    tor.wait_exact(v4(1), Afi::Ipv6, &[a.expected(kind, prefixes[1], 1)]);

    // ExaBGP 4.2.21 cannot decode a shutdown communication (see
    // `Tor::saw_admin_shutdown`): it gets an empty one.
    let message = if kind == Kind::Exabgp {
        ""
    } else {
        "podcidr-speaker shutting down"
    };
    let asked = Instant::now();
    s.request_stop(Shutdown::Restart(message.into()));
    let mut marked = a.clone();
    marked.communities = vec![(65535, 0), (65535, 100)];
    let mut want = [
        marked.expected(kind, prefixes[0], 1),
        marked.expected(kind, prefixes[1], 1),
    ];
    if kind == Kind::Frr {
        // FRR acts on the community as RFC 8326 section 4 asks of a receiver: its
        // LOCAL_PREF drops to 0.
        for r in &mut want {
            r.local_pref = Some(0);
        }
    }
    tor.wait_exact(v4(1), Afi::Ipv4, &want[..1]);
    tor.wait_exact(v4(1), Afi::Ipv6, &want[1..]);
    let marked_after = asked.elapsed();
    assert!(
        marked_after < GRACE / 2,
        "marked only after {marked_after:?}"
    );
    // Held, marked, until the grace period is nearly over.
    let until = GRACE - marked_after - Duration::from_millis(500);
    harness::hold_for("the marked routes through the grace period", until, || {
        let got = tor
            .d()
            .routes(v4(1), Afi::Ipv4)
            .map_err(|e| e.to_string())?;
        if got == want[..1] {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .unwrap();
    tor.wait_nothing_from(v4(1));
    let gone_after = asked.elapsed();
    assert!(
        gone_after >= GRACE,
        "withdrawn after {gone_after:?}, before the grace period of {GRACE:?}"
    );
    let st = s.join();
    assert_eq!(st.stats.sent.notification, 1);
    assert!(st.advertised.is_empty(), "{:?}", st.advertised);
    wait_for("the daemon to show our cease", WAIT, || {
        tor.saw_admin_shutdown(v4(1), message)
    })
    .unwrap();

    if kind == Kind::Exabgp {
        use harness::exabgp::ExaEventKind;
        let events = tor.exabgp().events_from(v4(1)).unwrap();
        // After the table and its End-of-RIBs: the marked routes, the withdrawals,
        // the Cease; nothing else, in this order.
        let eor = events
            .iter()
            .rposition(|e| matches!(e.kind, ExaEventKind::EndOfRib { .. }))
            .expect("End-of-RIB");
        let tail: Vec<String> = events[eor + 1..]
            .iter()
            .filter_map(|e| match &e.kind {
                ExaEventKind::Update(u) if !u.announce.is_empty() => Some(format!(
                    "announce {:?} {:?}",
                    u.announce.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
                    u.attrs.communities
                )),
                ExaEventKind::Update(u) => Some(format!("withdraw {:?}", u.withdraw)),
                ExaEventKind::Notification { code, subcode, .. } => {
                    Some(format!("notification {code}/{subcode}"))
                }
                _ => None,
            })
            .collect();
        let marked = format!("{:?}", vec![(65535u16, 0u16), (65535, 100)]);
        assert_eq!(
            tail,
            vec![
                format!("announce [{}] {marked}", prefixes[0]),
                format!("announce [{}] {marked}", prefixes[1]),
                format!("withdraw [{}]", prefixes[0]),
                format!("withdraw [{}]", prefixes[1]),
                "notification 6/2".to_owned(),
            ]
        );
        let stamps: Vec<f64> = events[eor + 1..].iter().map(|e| e.time).collect();
        let spread = stamps.last().unwrap() - stamps.first().unwrap();
        assert!(
            spread >= GRACE.as_secs_f64() - 1.0,
            "ExaBGP saw the withdrawals {spread}s after the marked routes"
        );
    }
}

/// With graceful restart in force, SIGTERM stays a restart: no GRACEFUL_SHUTDOWN, no
/// withdrawal; the peer keeps the routes as stale.
fn graceful_restart_skips_graceful_shutdown(kind: Kind, dir: &Path) {
    let rt = runtime();
    let tor = start_tor(
        kind,
        dir,
        [tor_neighbor(kind, 1, 65001).graceful_restart(30)],
    );
    let a = Attrs::new(65001, false);
    let prefixes = [net("10.244.1.0/24")];
    let mut sp = spec(
        1,
        &peer_config(
            v4(2),
            TOR_AS2,
            65001,
            &["graceful-restart: true", "graceful-restart-time: 30s"],
        ),
    );
    sp.graceful_shutdown = Duration::from_secs(30);
    let mut s = Speaker::start(&rt, sp, desired(&prefixes, &a));
    s.wait_synced();
    tor.wait_exact(v4(1), Afi::Ipv4, &[a.expected(kind, prefixes[0], 1)]);
    let asked = Instant::now();
    let st = s.stop(Shutdown::Restart("test restart".into()));
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "no grace period with GR"
    );
    assert_eq!(st.stats.sent.notification, 0);
    let mut stale = a.expected(kind, prefixes[0], 1);
    stale.stale = true;
    tor.wait_exact(v4(1), Afi::Ipv4, &[stale]);
}

/// TCP MD5 (RFC 2385): the speaker with the right password establishes and announces;
/// the one with a wrong password never gets a session, on either side.
fn md5(kind: Kind, dir: &Path) {
    let rt = runtime();
    let tor = start_tor(
        kind,
        dir,
        [
            tor_neighbor(kind, 1, 65001).password("right-secret"),
            tor_neighbor(kind, 3, 65003).password("right-secret"),
        ],
    );
    let a1 = Attrs::new(65001, false);
    let right = Speaker::start(
        &rt,
        spec(
            1,
            &peer_config(v4(2), TOR_AS2, 65001, &["password: right-secret"]),
        ),
        desired(&[net("10.244.1.0/24")], &a1),
    );
    let wrong = Speaker::start(
        &rt,
        spec(
            3,
            &peer_config(v4(2), TOR_AS2, 65003, &["password: wrong-secret"]),
        ),
        desired(&[net("10.244.3.0/24")], &Attrs::new(65003, false)),
    );
    right.wait_synced();
    tor.wait_exact(
        v4(1),
        Afi::Ipv4,
        &[a1.expected(kind, net("10.244.1.0/24"), 1)],
    );
    // The speaker retries every 1-2 s: several attempts, none may get through.
    hold_for(
        "a wrong md5 password never establishes",
        Duration::from_secs(6),
        || {
            let st = wrong.status();
            if st.state == State::Established || st.stats.established_count > 0 {
                return Err(format!("speaker: {:?}", st.state));
            }
            let peer = tor.d().session_state(v4(3)).map_err(|e| e.to_string())?;
            if peer.established() {
                return Err(format!("{} sees {peer:?}", tor.d().kind()));
            }
            Ok(())
        },
    )
    .unwrap();
    let st = wrong.status();
    assert!(
        st.stats.sent.open == 0 || st.stats.received.open == 0,
        "no OPEN exchange without the right signature: {:?}",
        st.stats
    );
    assert!(right.status().state == State::Established);
}

/// Graceful restart (RFC 4724) of the speaker: it stops without a NOTIFICATION, the
/// daemon keeps its routes as stale, a new speaker process (a fresh task) takes over and
/// refreshes them; at no time during the restart do the routes leave the daemon's RIB.
/// After End-of-RIB the daemon's own counters and route times show that the new session
/// re-sent the table and nothing else, and stay still for a few seconds.
fn graceful_restart(kind: Kind, dir: &Path) {
    let rt = runtime();
    let tor = start_tor(
        kind,
        dir,
        [tor_neighbor(kind, 1, 65001).graceful_restart(30)],
    );
    let cfg = peer_config(
        v4(2),
        TOR_AS2,
        65001,
        &["graceful-restart: true", "graceful-restart-time: 30s"],
    );
    let a = Attrs::new(65001, false).med(7);
    let prefixes = [
        net("10.244.1.0/24"),
        net("10.245.1.0/24"),
        net("fd10:1::/64"),
    ];
    let fresh = |stale: bool| {
        let all: Vec<_> = prefixes
            .iter()
            .map(|p| harness::Route {
                stale,
                ..a.expected(kind, *p, 1)
            })
            .collect();
        (all[..2].to_vec(), all[2..].to_vec())
    };
    let mut first = Speaker::start(&rt, spec(1, &cfg), desired(&prefixes, &a));
    let st = first.wait_synced();
    assert!(st.negotiated.expect("negotiated").graceful_restart);
    let (v4_fresh, v6_fresh) = fresh(false);
    tor.wait_exact(v4(1), Afi::Ipv4, &v4_fresh);
    tor.wait_exact(v4(1), Afi::Ipv6, &v6_fresh);
    // The daemon's own record of our routes: when each last changed, and how many
    // UPDATEs (BIRD: routes, by outcome) it took from us.
    let times_before = tor.route_times(v4(1));
    let mut sorted_prefixes = prefixes.to_vec();
    sorted_prefixes.sort();
    assert_eq!(
        times_before.keys().copied().collect::<Vec<_>>(),
        sorted_prefixes
    );
    let counters_before = tor.update_counters(v4(1));

    let st = first.stop(Shutdown::Restart("test restart".into()));
    assert_eq!(
        st.stats.sent.notification, 0,
        "a restart sends no NOTIFICATION"
    );
    let (v4_stale, v6_stale) = fresh(true);
    // From now until the new speaker's routes are fresh, every poll must find all of
    // them: stale while we are away, then refreshed.
    let all_present = |what: &str| -> Result<(Vec<harness::Route>, Vec<harness::Route>), String> {
        let r4 = tor
            .d()
            .routes(v4(1), Afi::Ipv4)
            .map_err(|e| e.to_string())?;
        let r6 = tor
            .d()
            .routes(v4(1), Afi::Ipv6)
            .map_err(|e| e.to_string())?;
        for p in &prefixes {
            if !r4.has(p) && !r6.has(p) {
                panic!("{} dropped {p} {what}: {r4:?} {r6:?}", tor.d().kind());
            }
        }
        Ok((sorted(r4), sorted(r6)))
    };
    wait_for("our routes kept as stale", WAIT, || {
        let (r4, r6) = all_present("while we restarted")?;
        let down = !tor
            .d()
            .session_state(v4(1))
            .map_err(|e| e.to_string())?
            .established();
        if down && r4 == v4_stale && r6 == v6_stale {
            Ok(())
        } else {
            Err(format!("down {down}: {r4:?} {r6:?}"))
        }
    })
    .unwrap();
    // A moment of absence, as a real restart has.
    hold_for("stale routes stay", Duration::from_secs(2), || {
        all_present("while we were away").map(|_| ())
    })
    .unwrap();

    let second = Speaker::start(&rt, spec(1, &cfg), desired(&prefixes, &a));
    wait_for("our routes refreshed", WAIT, || {
        let (r4, r6) = all_present("after we came back")?;
        if r4 == v4_fresh && r6 == v6_fresh {
            Ok(())
        } else {
            Err(format!("{r4:?} {r6:?}"))
        }
    })
    .unwrap();
    let st = second.wait_synced();
    assert_eq!(st.stats.established_count, 1);
    tor.established(v4(1));
    // The daemon has taken the whole table back (its stale marks are gone, so it has
    // seen End-of-RIB). Check with the daemon's own counters that the second session
    // re-sent the table and nothing else, then that nothing moves for a few seconds: no
    // UPDATE at all, no route with a new time. A withdraw and re-announce, even one
    // between two polls, would show in the counters and in the route's time.
    let counters = tor.update_counters(v4(1));
    let times = tor.route_times(v4(1));
    let jitter = time_jitter(kind);
    let same_times = |a: &BTreeMap<IpNet, f64>, b: &BTreeMap<IpNet, f64>| {
        a.len() == b.len()
            && a.iter().zip(b).all(|((pa, ta), (pb, tb))| {
                // BIRD's times are of the day: a restart may span midnight.
                let d = (ta - tb).abs() % 86_400.0;
                pa == pb && d.min(86_400.0 - d) <= jitter
            })
    };
    let delta = |k: &str| counters[k] - counters_before[k];
    match kind {
        Kind::Bird => {
            // BIRD counts a refresh equal to the stale route as an ignored import, a
            // changed or new one as accepted, and every withdraw it receives: the three
            // routes came again, unchanged, and nothing was withdrawn.
            for (channel, n) in [("ipv4", 2), ("ipv6", 1)] {
                let d = |k: &str| delta(&format!("{channel} {k}"));
                assert_eq!(
                    (
                        d("Import updates: received"),
                        d("Import updates: ignored"),
                        d("Import updates: accepted"),
                        d("Import withdraws: received"),
                    ),
                    (n, n, 0, 0),
                    "{channel}: {counters_before:?} -> {counters:?}"
                );
            }
            // And it kept the routes themselves: the time each last changed is the
            // one from before the restart (a re-announce would be 2 s later or more).
            assert!(
                same_times(&times, &times_before),
                "route times changed through the restart: {times_before:?} -> {times:?}"
            );
        }
        _ => {
            // FRR and GoBGP count UPDATE messages. The second session must have sent exactly as
            // many as the first (the same table, packed the same, and the End-of-RIB
            // markers): a withdraw would add at least one.
            assert_eq!(
                delta("updatesRecv"),
                counters_before["updatesRecv"],
                "{counters_before:?} -> {counters:?}"
            );
            assert_eq!(delta("updatesRecv"), st.stats.sent.update);
            // FRR 8.4 (and GoBGP, whose `age` is the refresh's) stamps a path refreshed
            // after a graceful restart with the time of the refresh (see route_times),
            // so only "not older" holds here.
            assert!(
                times
                    .iter()
                    .zip(&times_before)
                    .all(|((_, t), (_, t0))| t >= t0),
                "{times_before:?} -> {times:?}"
            );
        }
    }
    hold_for(
        "nothing flaps after End-of-RIB",
        Duration::from_secs(4),
        || {
            let (r4, r6) = all_present("after End-of-RIB")?;
            if (r4.as_slice(), r6.as_slice()) != (v4_fresh.as_slice(), v6_fresh.as_slice()) {
                return Err(format!("routes changed: {r4:?} {r6:?}"));
            }
            let now = tor.update_counters(v4(1));
            if now != counters {
                return Err(format!("update counters moved: {counters:?} -> {now:?}"));
            }
            let t = tor.route_times(v4(1));
            if !same_times(&t, &times) {
                return Err(format!("route times changed: {times:?} -> {t:?}"));
            }
            Ok(())
        },
    )
    .unwrap();
}

fn sorted(mut r: Vec<harness::Route>) -> Vec<harness::Route> {
    r.sort_by_key(|r| r.prefix);
    r
}

/// The daemon dials a passive speaker: the listener takes the connection (with its MD5
/// key set on the listening socket) and hands it to the peer's task; a connection from
/// an address that is not a peer is closed unread.
fn inbound(kind: Kind, dir: &Path) {
    let rt = runtime();
    let tor = start_tor(
        kind,
        dir,
        [Neighbor::new(v4(1), 65001).ipv6().password("in-secret")],
    );
    let listener = speaker::listener(&rt, v4(1));
    let cfg = peer_config(
        v4(2),
        TOR_AS2,
        65001,
        &["passive: true", "password: in-secret"],
    );
    let spec = spec(1, &cfg);
    let inbound = listener.register(&spec).unwrap();
    let a = Attrs::new(65001, false);
    let prefixes = [net("10.244.1.0/24"), net("fd10:1::/64")];
    let s = Speaker::start_with(
        &rt,
        spec,
        desired(&prefixes, &a),
        std::sync::Arc::new(podcidr_speaker::peer::NoopObserver),
        Some(inbound),
    );
    let st = s.wait_synced();
    assert_eq!(st.stats.sent.open, 1);
    assert!(
        st.local.is_some_and(|l| l.port() == 179),
        "the daemon dialed us: {st:?}"
    );
    tor.wait_exact(v4(1), Afi::Ipv4, &[a.expected(kind, prefixes[0], 1)]);
    tor.wait_exact(v4(1), Afi::Ipv6, &[a.expected(kind, prefixes[1], 1)]);

    // A stranger (100.64.0.3) is closed before it can send anything.
    use std::io::Read;
    let stranger = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::new(v4(1), 179),
        Duration::from_secs(5),
    );
    if let Ok(mut c) = stranger {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 64];
        let n = c.read(&mut buf).unwrap_or(0);
        assert_eq!(n, 0, "a stranger must get nothing but a close");
    }
    assert_eq!(s.status().stats.established_count, 1);
}

/// The daemon asks for our routes again (ROUTE-REFRESH, RFC 2918): we re-send the table
/// of each family asked for, bracketed by BoRR/EoRR when enhanced route refresh was
/// negotiated (RFC 7313), and the daemon's RIB stays exactly as it was. FRR asks for
/// IPv4 alone; BIRD 2.0.12 can only reload every channel. (GoBGP keeps its Adj-RIB-In and
/// never sends ROUTE-REFRESH for a soft reset; ExaBGP sends it only with a capability the
/// harness does not configure: sessions_scripted covers the exact bytes.)
fn route_refresh(kind: Kind, dir: &Path) {
    let rt = runtime();
    let mut tor = start_tor(kind, dir, [tor_neighbor(kind, 1, 65001)]);
    let a = Attrs::new(65001, false).med(3);
    let prefixes = [
        net("10.244.1.0/24"),
        net("10.245.1.0/24"),
        net("fd10:1::/64"),
    ];
    let s = Speaker::start(
        &rt,
        spec(1, &peer_config(v4(2), TOR_AS2, 65001, &[])),
        desired(&prefixes, &a),
    );
    let before = s.wait_synced();
    let v4_routes = [
        a.expected(kind, prefixes[0], 1),
        a.expected(kind, prefixes[1], 1),
    ];
    tor.wait_exact(v4(1), Afi::Ipv4, &v4_routes);
    let neg = before.negotiated.clone().expect("negotiated");
    assert!(
        neg.route_refresh && neg.enhanced_route_refresh,
        "{kind:?} does RFC 7313"
    );

    tor.request_refresh(v4(1));
    let families = if kind == Kind::Bird { 2 } else { 1 };
    let st = s.wait("the refresh answered", WAIT, |st| {
        st.stats.received.route_refresh >= families && st.pending == 0 && st.write_buffer == 0
    });
    assert_eq!(st.stats.received.route_refresh, families);
    assert_eq!(
        st.stats.sent.route_refresh,
        2 * families,
        "BoRR and EoRR per family"
    );
    assert_eq!(
        st.stats.sent.update - before.stats.sent.update,
        families,
        "each family's routes again, in one UPDATE"
    );
    assert_eq!(st.stats.established_count, 1);
    tor.wait_exact(v4(1), Afi::Ipv4, &v4_routes);
    tor.wait_exact(v4(1), Afi::Ipv6, &[a.expected(kind, prefixes[2], 1)]);
}

/// The planner's plan for the one node `node-under-test` with these InternalIPs and pod
/// CIDRs under `config` (local mode, no `--source-address`): the routes `run` would hand
/// the peer tasks.
fn planned(
    config: &str,
    v4: Option<IpAddr>,
    v6: Option<IpAddr>,
    cidrs: &[&str],
) -> podcidr_speaker::routes::Plan {
    use podcidr_speaker::routes::{plan, AnnounceMode, LocalNode, Overrides};
    use podcidr_speaker::sources::model::{
        node_view, CiliumConfig, ClusterState, IpamOverride, NodeFacts,
    };
    let config = podcidr_speaker::config::parse(config).unwrap_or_else(|e| panic!("{e}"));
    let mut state = ClusterState {
        cilium_config: Some(CiliumConfig {
            ipam: Some("kubernetes".into()),
            ..CiliumConfig::default()
        }),
        ..ClusterState::default()
    };
    state.nodes.insert(
        "node-under-test".into(),
        NodeFacts {
            internal_ipv4: v4.and_then(|a| match a {
                IpAddr::V4(a) => Some(a),
                IpAddr::V6(_) => None,
            }),
            internal_ipv6: v6.and_then(|a| match a {
                IpAddr::V6(a) => Some(a),
                IpAddr::V4(_) => None,
            }),
            node_cidrs: cidrs.iter().map(|c| net(c)).collect(),
            ..NodeFacts::default()
        },
    );
    let view = node_view(&state, IpamOverride::Auto).unwrap();
    plan(
        &view,
        &config,
        &LocalNode::new("node-under-test"),
        AnnounceMode::Local,
        &Overrides::default(),
    )
}

/// A pod CIDR route of the speaker with AS `asn`, as `kind` shows it (no MED, no
/// community: the planner's defaults).
fn pod_route(kind: Kind, prefix: &str, next_hop: IpAddr, asn: u32) -> harness::Route {
    harness::Route {
        prefix: net(prefix),
        next_hop,
        as_path: vec![asn],
        // BIRD fills in its default on eBGP routes.
        local_pref: (kind == Kind::Bird).then_some(100),
        med: None,
        communities: vec![],
        large_communities: vec![],
        origin: harness::Origin::Incomplete,
        stale: false,
    }
}

/// Issue #21: a node without an IPv4 address peering over IPv6 only. `plan` marks its
/// IPv4 pod CIDR as RFC 8950; FRR with `capability extended-nexthop` receives it with our
/// IPv6 address as next hop. FRR's other neighbor, without the capability, gets the IPv6
/// route only and the speaker reports the IPv4 one as not announced, and why.
fn ipv4_over_ipv6_with_extended_next_hop(kind: Kind, dir: &Path) {
    use podcidr_speaker::routes::next_hop::needs_extended_next_hop;
    use podcidr_speaker::sources::model::Family;
    let rt = runtime();
    let tor = start_tor(
        kind,
        dir,
        [
            Neighbor::new(v6(1), 65001).ipv6().extended_next_hop(),
            Neighbor::new(v6(3), 65003).ipv6(),
        ],
    );
    let mut speakers = Vec::new();
    for (n, asn) in [(1u8, 65001u32), (3, 65003)] {
        let text = format!(
            "peers: [{{peer-address: '{}', peer-asn: {TOR_AS2}, my-asn: {asn}, \
             source-address: '{}', hold-time: 9s, connect-retry-time: 1s}}]",
            v6(2),
            v6(n)
        );
        let plan = planned(&text, None, Some(v6(n)), &["10.244.1.0/24", "fd10:1::/64"]);
        assert!(plan.unannounceable.is_empty(), "{:?}", plan.unannounceable);
        let p = plan.peers.values().next().expect("one peer");
        let r4 = &p.routes[&net("10.244.1.0/24")];
        assert!(needs_extended_next_hop(
            Family::Ipv4,
            &r4.attrs.next_hop,
            &p.peer
        ));
        speakers.push(Speaker::start(&rt, spec(n, &p.peer), Arc::clone(&p.routes)));
    }
    let with = speakers[0].wait_synced();
    assert!(
        with.negotiated.expect("established").extended_next_hop_ipv4,
        "FRR offered extended next hop"
    );
    tor.established(v6(1));
    tor.wait_exact(
        v6(1),
        Afi::Ipv4,
        &[pod_route(kind, "10.244.1.0/24", v6(1), 65001)],
    );
    tor.wait_exact(
        v6(1),
        Afi::Ipv6,
        &[pod_route(kind, "fd10:1::/64", v6(1), 65001)],
    );

    let without = speakers[1].wait_synced();
    assert!(
        !without
            .negotiated
            .expect("established")
            .extended_next_hop_ipv4
    );
    tor.established(v6(3));
    tor.wait_exact(
        v6(3),
        Afi::Ipv6,
        &[pod_route(kind, "fd10:1::/64", v6(3), 65003)],
    );
    tor.wait_exact(v6(3), Afi::Ipv4, &[]);
    let st = speakers[1].status();
    assert_eq!(
        st.advertised
            .get(&podcidr_speaker::bgp::wire::AfiSafi::IPV4_UNICAST)
            .copied()
            .unwrap_or(0),
        0
    );
    assert_eq!(
        st.last_io_error.as_deref(),
        Some(
            "1 routes of afi 1 not announced: ipv4 routes need an ipv6 next hop here and the \
             peer did not offer extended next hop (RFC 8950)"
        )
    );
}

/// Issue #21: a node without an IPv6 address peering over IPv4. Without `next-hop-v6`
/// its IPv6 pod CIDR is not planned and is reported (plan warning, status entry); with
/// `next-hop-v6` BIRD (its ipv6 channel on the IPv4 session) receives it with that next
/// hop.
fn ipv6_over_ipv4_with_next_hop_v6(kind: Kind, dir: &Path) {
    let rt = runtime();
    let tor = start_tor(
        kind,
        dir,
        [tor_neighbor(kind, 1, 65001), tor_neighbor(kind, 3, 65003)],
    );
    let mut speakers = Vec::new();
    let mut plans = Vec::new();
    for (n, asn, next_hop) in [(1u8, 65001u32, Some(v6(1))), (3, 65003, None)] {
        let extra = next_hop
            .map(|a| format!(", next-hop-v6: '{a}'"))
            .unwrap_or_default();
        let text = format!(
            "peers: [{{peer-address: {}, peer-asn: {TOR_AS2}, my-asn: {asn}, \
             source-address: {}, hold-time: 9s, connect-retry-time: 1s{extra}}}]",
            v4(2),
            v4(n)
        );
        let plan = planned(&text, Some(v4(n)), None, &["10.244.1.0/24", "fd10:1::/64"]);
        let p = plan.peers.values().next().expect("one peer");
        speakers.push(Speaker::start(&rt, spec(n, &p.peer), Arc::clone(&p.routes)));
        plans.push(plan);
    }
    // Without next-hop-v6: not planned, and said so where an operator looks.
    let missing = &plans[1];
    assert_eq!(missing.unannounceable.len(), 1);
    assert_eq!(missing.unannounceable[0].prefix, net("fd10:1::/64"));
    let m = podcidr_speaker::metrics::Metrics::new();
    m.record_unannounceable(missing);
    let status = m.status(std::time::SystemTime::now(), Instant::now());
    let text = podcidr_speaker::commands::status::Summary(&status).to_string();
    assert!(
        text.contains(&format!(
            "  fd10:1::/64 of node node-under-test is not announced to {}:179: an IPv6 route \
             on an IPv4 session needs an IPv6 next hop",
            v4(2)
        )),
        "{text}"
    );
    assert!(plans[0].unannounceable.is_empty());

    for (n, asn) in [(1u8, 65001u32), (3, 65003)] {
        speakers[usize::from(n / 2)].wait_synced();
        tor.established(v4(n));
        tor.wait_exact(
            v4(n),
            Afi::Ipv4,
            &[pod_route(kind, "10.244.1.0/24", v4(n), asn)],
        );
    }
    tor.wait_exact(
        v4(1),
        Afi::Ipv6,
        &[pod_route(kind, "fd10:1::/64", v6(1), 65001)],
    );
    tor.wait_exact(v4(3), Afi::Ipv6, &[]);
    // Nothing refused on the wire: run sent exactly what the plan listed.
    assert_eq!(speakers[1].status().last_io_error, None);
}

/// One `#[test]` per implementation and scenario, each in its own namespace.
macro_rules! scenario_tests {
    ($($name:ident => $scenario:ident($kind:ident);)*) => {
        $(
            #[test]
            fn $name() {
                let Some(ns) = isolated!(&ADDRS) else { return };
                $scenario(Kind::$kind, ns.dir());
            }
        )*
    };
}

scenario_tests! {
    bird_ebgp_and_ibgp_with_2_and_4_octet_as => ebgp_and_ibgp_routes(Bird);
    frr_ebgp_and_ibgp_with_2_and_4_octet_as => ebgp_and_ibgp_routes(Frr);
    gobgp_ebgp_and_ibgp_with_2_and_4_octet_as => ebgp_and_ibgp_routes(Gobgp);
    exabgp_ebgp_and_ibgp_with_2_and_4_octet_as => ebgp_and_ibgp_routes(Exabgp);

    bird_hold_time_and_keepalive => hold_time_and_keepalive(Bird);
    frr_hold_time_and_keepalive => hold_time_and_keepalive(Frr);
    gobgp_hold_time_and_keepalive => hold_time_and_keepalive(Gobgp);
    exabgp_hold_time_and_keepalive => hold_time_and_keepalive(Exabgp);

    bird_restarts_and_our_routes_come_back => peer_restart(Bird);
    frr_restarts_and_our_routes_come_back => peer_restart(Frr);
    gobgp_restarts_and_our_routes_come_back => peer_restart(Gobgp);
    exabgp_restarts_and_our_routes_come_back => peer_restart(Exabgp);

    bird_notifications_both_ways => notifications(Bird);
    frr_notifications_both_ways => notifications(Frr);
    gobgp_notifications_both_ways => notifications(Gobgp);
    exabgp_notifications_both_ways => notifications(Exabgp);

    bird_graceful_shutdown_marks_then_withdraws => graceful_shutdown(Bird);
    frr_graceful_shutdown_marks_then_withdraws => graceful_shutdown(Frr);
    exabgp_graceful_shutdown_marks_then_withdraws => graceful_shutdown(Exabgp);
    bird_graceful_restart_skips_graceful_shutdown => graceful_restart_skips_graceful_shutdown(Bird);

    bird_md5_right_and_wrong_password => md5(Bird);
    frr_md5_right_and_wrong_password => md5(Frr);
    gobgp_md5_right_and_wrong_password => md5(Gobgp);
    exabgp_md5_right_and_wrong_password => md5(Exabgp);

    bird_keeps_our_routes_through_our_graceful_restart => graceful_restart(Bird);
    frr_keeps_our_routes_through_our_graceful_restart => graceful_restart(Frr);
    gobgp_keeps_our_routes_through_our_graceful_restart => graceful_restart(Gobgp);

    bird_refresh_gets_our_table_again => route_refresh(Bird);
    frr_refresh_gets_our_table_again => route_refresh(Frr);

    frr_gets_ipv4_over_ipv6_with_extended_next_hop => ipv4_over_ipv6_with_extended_next_hop(Frr);
    bird_gets_ipv6_over_ipv4_with_next_hop_v6 => ipv6_over_ipv4_with_next_hop_v6(Bird);
    frr_gets_ipv6_over_ipv4_with_next_hop_v6 => ipv6_over_ipv4_with_next_hop_v6(Frr);

    bird_dials_a_passive_speaker => inbound(Bird);
    frr_dials_a_passive_speaker => inbound(Frr);
    gobgp_dials_a_passive_speaker => inbound(Gobgp);
}
