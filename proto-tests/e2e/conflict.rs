//! Issue 29: cilium-config turning Cilium's embedded BGP speaker on
//! (`bgp-announce-lb-ip` / `bgp-announce-pod-cidr` true) under the default
//! `--cilium-bgp-conflict hold`, with BIRD (eBGP) and FRR (iBGP) as the switches.
//!
//! Phases: the keys on at start, no session opens at either switch; the keys off, both
//! sessions come up and the pod CIDR is announced; the keys on again, the Established
//! sessions stay and their routes are not re-learned, a bgp-config change that would
//! reset one waits, and one reset by its switch is not opened again; the keys off
//! again, it starts at once.

use std::time::Duration;

use crate::fixture::{start_tors, BgpConfig, Peer};
use crate::harness::{v4, BgpDaemon};
use crate::isolated;
use crate::local::{bird_route, expect, frr_route};
use crate::scrape::get;
use crate::speaker::{node_ip, Inputs, NodeSpec, Speaker};
use crate::tor::{bird_route_times, frr_route_times};
use crate::{settle, wait_exact, WAIT};

/// How long a session that would open is given to open: the speaker dials within a
/// second of its plan (`connect-retry-time: 1s`), sessions come up in 1-5 s here.
const WOULD_OPEN: Duration = Duration::from_secs(6);

/// Why a held peer does not start, as `/status` gives it.
const HELD: &str = "podcidr-speaker: held, cilium's embedded bgp speaker is on";

fn cilium_config(pod: &str, lb: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cilium-config\n  namespace: kube-system\ndata:\n  ipam: cluster-pool\n  cluster-pool-ipv4-cidr: 10.244.0.0/16\n  bgp-announce-pod-cidr: {pod:?}\n  bgp-announce-lb-ip: {lb:?}\n"
    )
}

/// Waits until the speaker's log has `needle` (it has read what the test wrote).
fn wait_log(speaker: &Speaker, needle: &str) {
    wait_log_times(speaker, needle, 1);
}

/// Waits until the speaker's log has `needle` at least `times` times.
fn wait_log_times(speaker: &Speaker, needle: &str, times: usize) {
    let deadline = std::time::Instant::now() + WAIT;
    while speaker.log_tail(400).matches(needle).count() < times {
        assert!(
            std::time::Instant::now() < deadline,
            "no {needle:?} in the speaker's log:\n{}",
            speaker.log_tail(40)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn cilium_embedded_bgp_on_holds_new_sessions_and_never_an_established_one() {
    let addrs = vec![v4(2), v4(3), node_ip(1)];
    let Some(ns) = isolated!(&addrs, Duration::from_secs(180)) else {
        return;
    };
    let (bird, frr) = start_tors(ns.dir(), &[node_ip(1)]);
    let inputs = Inputs::new(ns.dir(), "cluster-pool", "10.244.0.0/16");
    inputs.write_cluster_file("cilium-config.yaml", &cilium_config("false", "true"));
    inputs.write_config(
        &BgpConfig::new([Peer::bird(), Peer::frr()])
            .stop_for_good()
            .pod_cidr_community("65001:100")
            .yaml(),
    );
    inputs.write_node(&NodeSpec::new("n1", node_ip(1)).cilium_cidrs(&["10.244.1.0/24"]));
    let args = Speaker::standalone_args(&inputs, "n1", node_ip(1));
    let mut speaker = Speaker::start(ns.dir(), "n1", &args);

    // Held: the conflict is logged, and no session opens at either switch.
    wait_log(
        &speaker,
        "cilium's embedded bgp speaker is on: no new session",
    );
    wait_log(&speaker, "sessions held back");
    std::thread::sleep(WOULD_OPEN);
    for (name, tor) in [("BIRD", &bird as &dyn BgpDaemon), ("FRR", &frr)] {
        let s = tor.session_state(node_ip(1)).expect("neighbor state");
        assert!(
            !s.established(),
            "{name}: a session opened while cilium-config had bgp-announce-lb-ip: true: {s:?}\n{}",
            speaker.log_tail(30)
        );
    }
    // Each peer's row in `/status` says why it does not start.
    assert_eq!(
        held_back(node_ip(1)),
        vec![Some(HELD.to_owned()), Some(HELD.to_owned())],
        "{}",
        speaker.log_tail(30)
    );

    // Cilium's speaker off: both sessions start at once and the pod CIDR is announced.
    inputs.write_cluster_file("cilium-config.yaml", &cilium_config("false", "false"));
    for (name, tor) in [("BIRD", &bird as &dyn BgpDaemon), ("FRR", &frr)] {
        tor.wait_established(node_ip(1), WAIT).unwrap_or_else(|e| {
            panic!(
                "{name} after the keys went off: {e}\n{}",
                speaker.log_tail(30)
            )
        });
    }
    let want = expect(&[(1, &["10.244.1.0/24"])], bird_route);
    wait_exact(&bird, &want, "keys off");
    assert_eq!(held_back(node_ip(1)), vec![None, None]);
    let frr_want = expect(&[(1, &["10.244.1.0/24"])], frr_route);
    wait_exact(&frr, &frr_want, "keys off");
    settle();
    let bird_times = bird_route_times(&bird, node_ip(1));
    let frr_times = frr_route_times(&frr, node_ip(1));

    // On again (both keys): reported, but the Established sessions stay with their
    // routes, not even re-announced.
    inputs.write_cluster_file("cilium-config.yaml", &cilium_config("true", "true"));
    wait_log(
        &speaker,
        "bgp-announce-pod-cidr: true and bgp-announce-lb-ip: true",
    );
    std::thread::sleep(WOULD_OPEN);
    for (name, tor) in [("BIRD", &bird as &dyn BgpDaemon), ("FRR", &frr)] {
        let s = tor.session_state(node_ip(1)).expect("neighbor state");
        assert!(
            s.established(),
            "{name}: the Established session went down when the keys turned on: {s:?}\n{}",
            speaker.log_tail(30)
        );
    }
    wait_exact(&bird, &want, "keys on again");
    wait_exact(&frr, &frr_want, "keys on again");
    assert_eq!(
        bird_route_times(&bird, node_ip(1)),
        bird_times,
        "BIRD re-learned"
    );
    assert_eq!(
        frr_route_times(&frr, node_ip(1)),
        frr_times,
        "FRR re-learned"
    );

    // A bgp-config change that would reset BIRD's session (its hold time) waits: the
    // session keeps running with what it has.
    inputs.write_config(
        &BgpConfig::new([Peer::bird().key("hold-time", "12s"), Peer::frr()])
            .stop_for_good()
            .pod_cidr_community("65001:100")
            .yaml(),
    );
    wait_log_times(&speaker, "bgp config applied", 2);
    wait_log(&speaker, "session change waits: new sessions are held back");
    std::thread::sleep(WOULD_OPEN);
    assert_eq!(
        bird_route_times(&bird, node_ip(1)),
        bird_times,
        "BIRD's session was reset by a config change while the conflict stands\n{}",
        speaker.log_tail(30)
    );

    // FRR resets its session while the conflict stands: that one is not opened again
    // (it would be a new session); BIRD's stays.
    frr.vtysh(&[&format!("clear bgp {}", node_ip(1))])
        .expect("FRR clear bgp");
    let deadline = std::time::Instant::now() + WAIT;
    while frr.session_state(node_ip(1)).is_ok_and(|s| s.established()) {
        assert!(std::time::Instant::now() < deadline, "FRR never reset");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(WOULD_OPEN);
    let s = frr.session_state(node_ip(1)).expect("neighbor state");
    assert!(
        !s.established(),
        "FRR: the reset session was opened again while the conflict stands: {s:?}\n{}",
        speaker.log_tail(30)
    );
    let s = bird.session_state(node_ip(1)).expect("neighbor state");
    assert!(s.established(), "BIRD: {s:?}");

    // Off: FRR's session starts at once.
    inputs.write_cluster_file("cilium-config.yaml", &cilium_config("false", "false"));
    frr.wait_established(node_ip(1), WAIT).unwrap_or_else(|e| {
        panic!(
            "FRR after the keys went off again: {e}\n{}",
            speaker.log_tail(30)
        )
    });
    wait_exact(&frr, &frr_want, "keys off again");
    // And the change that waited is carried out: BIRD's session is reset once, to
    // take the new hold time.
    let deadline = std::time::Instant::now() + WAIT;
    while bird_route_times(&bird, node_ip(1)) == bird_times {
        assert!(
            std::time::Instant::now() < deadline,
            "BIRD's session kept its old parameters after the hold was lifted\n{}",
            speaker.log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    bird.wait_established(node_ip(1), WAIT)
        .unwrap_or_else(|e| panic!("BIRD after the waiting reset: {e}"));
    wait_exact(&bird, &want, "the waiting reset done");

    assert!(speaker.terminate().success(), "{}", speaker.log_tail(30));
}

/// `--cilium-bgp-conflict ignore`: the conflict is still reported, and the sessions
/// open anyway (a cluster whose operator knows Cilium's speaker is not running).
#[test]
fn cilium_bgp_conflict_ignore_reports_and_opens_the_sessions() {
    let addrs = vec![v4(2), v4(3), node_ip(1)];
    let Some(ns) = isolated!(&addrs, Duration::from_secs(120)) else {
        return;
    };
    let (bird, _frr) = start_tors(ns.dir(), &[node_ip(1)]);
    let inputs = Inputs::new(ns.dir(), "cluster-pool", "10.244.0.0/16");
    inputs.write_cluster_file("cilium-config.yaml", &cilium_config("true", "false"));
    inputs.write_config(
        &BgpConfig::new([Peer::bird()])
            .stop_for_good()
            .pod_cidr_community("65001:100")
            .yaml(),
    );
    inputs.write_node(&NodeSpec::new("n1", node_ip(1)).cilium_cidrs(&["10.244.1.0/24"]));
    let mut args = Speaker::standalone_args(&inputs, "n1", node_ip(1));
    args.push("--cilium-bgp-conflict=ignore".into());
    let mut speaker = Speaker::start(ns.dir(), "n1", &args);
    wait_log(
        &speaker,
        "sessions run anyway (--cilium-bgp-conflict ignore)",
    );
    bird.wait_established(node_ip(1), WAIT)
        .unwrap_or_else(|e| panic!("BIRD under ignore: {e}\n{}", speaker.log_tail(30)));
    wait_exact(
        &bird,
        &expect(&[(1, &["10.244.1.0/24"])], bird_route),
        "ignore",
    );
    assert!(
        !speaker.log_tail(200).contains("sessions held back"),
        "{}",
        speaker.log_tail(30)
    );
    assert!(speaker.terminate().success(), "{}", speaker.log_tail(30));
}

/// Each peer's `held_back` in the speaker's `/status` (its endpoint on `node`), in the
/// document's order.
fn held_back(node: std::net::IpAddr) -> Vec<Option<String>> {
    let (code, body) = get(std::net::SocketAddr::new(node, 9477), "/status");
    assert_eq!(code, 200, "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).expect("/status is JSON");
    doc["peers"]
        .as_array()
        .expect("peers")
        .iter()
        .map(|p| p["held_back"].as_str().map(str::to_owned))
        .collect()
}
