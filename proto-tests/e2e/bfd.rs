//! BFD (RFC 5880/5881/5883) against BIRD's `bfd` protocol and FRR's bfdd, and what it
//! is for: a dead link drops the BGP session in under a second (RFC 5882, Cease/BFD
//! Down of RFC 9384), where without BFD it takes the hold time.
//!
//! The rig ([`Rig`]): the test's own namespace (from `isolated!`) is the node, running
//! the speaker; two more network namespaces, each held by an `unshare -n sleep` child,
//! are the wire (a Linux bridge) and the switch (BIRD, or FRR's zebra + bfdd + bgpd).
//! veth pairs join node - wire - switch, so both ends are directly connected
//! (single-hop BFD, TTL 255 across the bridge). The cut is `ip link set w0 down` of the
//! wire's port towards the node: packets stop, and neither daemon sees its own link go
//! down (a switch would drop a session at once on its own link's carrier loss, BFD or
//! not), so only BFD or the hold timer can notice.
//!
//! FRR's bgpd reaches bfdd through zebra, so all three run in the switch's namespace.
//! zebra and bfdd have no `-S` (skip the user switch) and refuse to run as root unless
//! root is in the `frrvty` group: each runs in a mount namespace of its own where a
//! copy of /etc/group adding root to `frrvty` is bind-mounted (nothing outside changes).
//!
//! `bfd_detection_bench` (ignored; `scripts/bench-bfd` runs it) repeats the cut
//! [`BENCH_CUTS`] times against each switch and prints the median and maximum times.

use std::thread;
use std::time::{Duration, Instant};

use crate::bfd_rig::*;
use crate::harness::netns::Netns;
use crate::harness::Afi;
use crate::isolated;

fn detection_is_fast(ns: &Netns, kind: Tor, multihop: bool) {
    let rig = Rig::new(ns.dir());
    let switch = Switch::start(&rig, kind, true);
    let (_inputs, mut speaker) = start_speaker(ns.dir(), true, multihop);
    let mut neighbors = single_hop();
    if multihop {
        neighbors.push((NODE_LO, TOR_LO, Afi::Ipv4, POD_V4));
    }
    for cut in 0..2 {
        wait_all_up(&switch, &speaker, &neighbors, true);
        let times = cut_with_bfd(&rig, &switch, &neighbors);
        for ((_, tor_addr, ..), (ours, theirs)) in neighbors.iter().zip(&times) {
            println!("{kind:?} cut {cut} {tor_addr}: speaker down after {ours:?}, switch lost the route after {theirs:?}");
            assert!(
                *ours <= SPEAKER_BOUND,
                "{kind:?} {tor_addr}: the speaker took {ours:?} (bound {SPEAKER_BOUND:?})\n{}",
                speaker.log_tail(40)
            );
            assert!(
                *theirs <= TOR_BOUND,
                "{kind:?} {tor_addr}: the switch kept the routes {theirs:?}\n{}",
                switch.logs()
            );
            let p = peer_report(tor_addr).expect("status");
            let b = p.bfd.expect("bfd in /status");
            assert_eq!(b.diag, "control_detection_time_expired", "{tor_addr}");
            assert!(b.failures > cut, "{tor_addr}: {b:?}");
            let detected = b.last_detection_ms.expect("a detection time");
            assert!(
                (DETECTION.as_millis() as u64 - INTERVAL_MS..=SPEAKER_BOUND.as_millis() as u64)
                    .contains(&detected),
                "{tor_addr}: detected {detected} ms after the last packet"
            );
        }
        let log = speaker.log_tail(400);
        assert!(
            log.contains("cease: bfd down"),
            "no Cease/BFD Down sent:\n{log}"
        );
    }
    // Back after the last cut: the sessions come back by themselves.
    wait_all_up(&switch, &speaker, &neighbors, true);
    let status = speaker.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn bird_bfd_single_hop_and_multihop_drop_a_dead_link_in_under_a_second() {
    let Some(ns) = isolated!(&[NODE_LO.parse().unwrap()], Duration::from_secs(150)) else {
        return;
    };
    detection_is_fast(&ns, Tor::Bird, true);
}

#[test]
fn frr_bfdd_single_hop_drops_a_dead_link_in_under_a_second() {
    let Some(ns) = isolated!(&[NODE_LO.parse().unwrap()], Duration::from_secs(150)) else {
        return;
    };
    detection_is_fast(&ns, Tor::Frr, false);
}

/// A profile's new receive-interval on a config reload reaches the running BFD session
/// through a Poll Sequence (RFC 5880 section 6.8.3): BIRD slows its transmission to it,
/// our detection time follows, and neither the BFD nor the BGP session goes down.
#[test]
fn new_bfd_timers_on_reload_are_polled_without_a_reset() {
    let Some(ns) = isolated!(&[NODE_LO.parse().unwrap()], Duration::from_secs(120)) else {
        return;
    };
    let rig = Rig::new(ns.dir());
    let switch = Switch::start(&rig, Tor::Bird, true);
    let (inputs, mut speaker) = start_speaker(ns.dir(), true, false);
    let neighbors = &single_hop()[..1];
    wait_all_up(&switch, &speaker, neighbors, true);
    let logs = || format!("{}\n--- speaker\n{}", switch.logs(), speaker.log_tail(40));
    wait_for(WAIT, "BIRD sends every 100 ms", &logs, &|| {
        bird_bfd_interval(&switch, NODE_V4) == Some(0.1)
    });
    let before = peer_report(TOR_V4).expect("status");
    inputs.write_config(&speaker_config(true, false, 300));
    wait_for(WAIT, "BIRD sends every 300 ms", &logs, &|| {
        bird_bfd_interval(&switch, NODE_V4) == Some(0.3)
    });
    wait_for(WAIT, "our detection time is 3 x 300 ms", &logs, &|| {
        peer_report(TOR_V4)
            .and_then(|p| p.bfd)
            .is_some_and(|b| b.detection_time_ms == 900)
    });
    let after = peer_report(TOR_V4).expect("status");
    let (b0, b1) = (before.bfd.expect("bfd"), after.bfd.clone().expect("bfd"));
    assert!(after.up && b1.up, "{after:?}");
    assert_eq!(after.flaps, before.flaps, "the BGP session was not reset");
    assert_eq!(b1.failures, b0.failures, "the BFD session did not fail");
    assert_eq!(b1.local_discr, b0.local_discr, "the same BFD session");
    let log = speaker.log_tail(200);
    assert!(log.contains("bfd timers changed: poll sequence"), "{log}");
    assert!(log.contains("update-live"), "{log}");
    assert!(switch.bfd_up(NODE_V4), "{}", switch.logs());
    let status = speaker.terminate();
    assert!(status.success(), "{status:?}");
}

/// The same cut without BFD: the routes stay at the switch until its hold timer fires.
#[test]
fn without_bfd_a_dead_link_takes_the_hold_time() {
    let Some(ns) = isolated!(&[NODE_LO.parse().unwrap()], Duration::from_secs(120)) else {
        return;
    };
    let rig = Rig::new(ns.dir());
    let switch = Switch::start(&rig, Tor::Bird, false);
    let (_inputs, speaker) = start_speaker(ns.dir(), false, false);
    let neighbors = single_hop();
    wait_all_up(&switch, &speaker, &neighbors, false);
    let cut_at = Instant::now();
    rig.cut();
    thread::sleep(TOR_BOUND + Duration::from_millis(500));
    for (node_addr, tor_addr, afi, prefix) in &neighbors {
        assert!(
            switch.holds(node_addr, *afi, prefix),
            "{node_addr}: dropped early"
        );
        let p = peer_report(tor_addr).expect("status");
        assert!(p.up && p.bfd.is_none(), "{tor_addr}: {p:?}");
    }
    let hold = Duration::from_secs(HOLD_SECS);
    let logs = || switch.logs();
    for (node_addr, _, afi, prefix) in &neighbors {
        wait_for(
            hold + Duration::from_secs(3),
            "the hold timer drops the routes",
            &logs,
            &|| !switch.holds(node_addr, *afi, prefix),
        );
    }
    let took = cut_at.elapsed();
    println!(
        "without bfd: the switch dropped the routes {took:?} after the cut (hold time {hold:?})"
    );
    assert!(took >= hold - Duration::from_millis(1000), "{took:?}");
    rig.restore();
}

/// `scripts/bench-bfd`: [`BENCH_CUTS`] cuts against each switch, single-hop IPv4 and
/// IPv6; prints the median and maximum of the speaker's detection (cut to BFD Down and
/// the BGP session dropped) and of the switch's (cut to the node's route gone).
#[test]
#[ignore = "a measurement: scripts/bench-bfd runs it"]
fn bfd_detection_bench_bird() {
    let Some(ns) = isolated!(&[NODE_LO.parse().unwrap()], Duration::from_secs(900)) else {
        return;
    };
    bench(&ns, Tor::Bird);
}

/// As [`bfd_detection_bench_bird`], against FRR's bfdd.
#[test]
#[ignore = "a measurement: scripts/bench-bfd runs it"]
fn bfd_detection_bench_frr() {
    let Some(ns) = isolated!(&[NODE_LO.parse().unwrap()], Duration::from_secs(900)) else {
        return;
    };
    bench(&ns, Tor::Frr);
}

fn bench(ns: &Netns, kind: Tor) {
    let rig = Rig::new(ns.dir());
    let switch = Switch::start(&rig, kind, true);
    let (_inputs, mut speaker) = start_speaker(ns.dir(), true, false);
    let neighbors = single_hop();
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..BENCH_CUTS {
        wait_all_up(&switch, &speaker, &neighbors, true);
        for (o, t) in cut_with_bfd(&rig, &switch, &neighbors) {
            ours.push(o);
            theirs.push(t);
        }
    }
    let stats = |v: &mut Vec<Duration>| {
        v.sort();
        (v[v.len() / 2], v[v.len() - 1], v.len())
    };
    let (om, ox, n) = stats(&mut ours);
    let (tm, tx, _) = stats(&mut theirs);
    println!(
        "BENCH bfd {kind:?}: {n} detections ({BENCH_CUTS} cuts x IPv4+IPv6), profile {INTERVAL_MS} ms x {MULTIPLIER}: speaker down median {om:?} max {ox:?}; switch lost the route median {tm:?} max {tx:?}"
    );
    let _ = speaker.terminate();
}
