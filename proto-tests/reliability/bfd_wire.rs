//! Malformed and spoofed BFD packets on the wire (RFC 5880 section 6.8.6, RFC 5881
//! section 5): while the speaker's BFD session with BIRD is Up, UDP packets are sent at
//! its BFD socket (100.64.9.1:3784) from the node's namespace: garbage, a wrong version,
//! a Length beyond the payload, a TTL below 255, an unknown Your Discriminator, a Down
//! carrying the session's own discriminator from an address that is not its peer (a
//! spoofed teardown), and an unsolicited Down with no discriminator. Each must be
//! counted under its reason in `bfd_packets_dropped_total` and change nothing: the BFD
//! session stays Up with no failure, the BGP session Established, the switch keeps the
//! route. The rig is the e2e BFD tests' (proto-tests/e2e/bfd_rig.rs).

use std::net::{SocketAddr, UdpSocket};
use std::thread;
use std::time::Duration;

use podcidr_speaker::bfd::{Diag, Packet, State};

use crate::bfd_rig::*;
use crate::harness::Afi;
use crate::isolated;
use crate::scrape::{get, value};

/// Each case is sent this many times.
const REPEAT: usize = 5;

fn packet(state: State, my: u32, your: u32) -> Packet {
    Packet::new(state, Diag::None, 3, my, your, 100_000, 100_000)
}

fn dropped(metrics: &str, reason: &str) -> f64 {
    value(
        metrics,
        "podcidr_speaker_bfd_packets_dropped_total",
        &[("reason", reason)],
    )
    .unwrap_or_else(|| panic!("no drop series for {reason}"))
}

#[test]
fn malformed_and_spoofed_bfd_packets_are_counted_and_change_nothing() {
    let Some(ns) = isolated!(&[NODE_LO.parse().unwrap()], Duration::from_secs(120)) else {
        return;
    };
    let rig = Rig::new(ns.dir());
    let switch = Switch::start(&rig, Tor::Bird, true);
    let (_inputs, mut speaker) = start_speaker(ns.dir(), true, false);
    let neighbors = &single_hop()[..1];
    wait_all_up(&switch, &speaker, neighbors, true);
    let before = peer_report(TOR_V4).expect("status");
    let bfd = before.bfd.clone().expect("bfd");
    assert!(bfd.up && bfd.local_discr != 0, "{bfd:?}");
    let ours = bfd.local_discr;
    let metrics_addr: SocketAddr = METRICS.parse().unwrap();
    let (_, metrics) = get(metrics_addr, "/metrics");

    let to: SocketAddr = format!("{NODE_V4}:3784").parse().unwrap();
    let sock = UdpSocket::bind(format!("{NODE_V4}:0")).unwrap();
    let send = |bytes: &[u8], ttl: u32| {
        sock.set_ttl(ttl).unwrap();
        for _ in 0..REPEAT {
            sock.send_to(bytes, to).unwrap();
        }
    };
    let mut bad_version = packet(State::Up, 7, ours).encode();
    bad_version[0] = (bad_version[0] & 0x1f) | (2 << 5);
    let mut long = packet(State::Up, 7, ours).encode();
    long[3] = 48;
    let cases: Vec<(&str, Vec<u8>, u32)> = vec![
        ("short", b"\x20garbage".to_vec(), 255),
        ("bad_version", bad_version.to_vec(), 255),
        ("length_exceeds_payload", long.to_vec(), 255),
        ("ttl", packet(State::Up, 7, ours).encode().to_vec(), 64),
        (
            "unknown_discriminator",
            packet(State::Up, 7, ours ^ 0x5a5a_5a5a).encode().to_vec(),
            255,
        ),
        (
            "wrong_source",
            packet(State::Down, 7, ours).encode().to_vec(),
            255,
        ),
        (
            "no_session",
            packet(State::Down, 7, 0).encode().to_vec(),
            255,
        ),
    ];
    for (_, bytes, ttl) in &cases {
        send(bytes, *ttl);
    }
    // Well past the detection time: a packet that had reached the session would have
    // shown by now.
    thread::sleep(DETECTION * 3);
    let (_, after) = get(metrics_addr, "/metrics");
    for (reason, ..) in &cases {
        let moved = dropped(&after, reason) - dropped(&metrics, reason);
        assert_eq!(moved, REPEAT as f64, "{reason}: {moved} drops counted");
    }
    let now = peer_report(TOR_V4).expect("status");
    let b = now.bfd.clone().expect("bfd");
    assert!(b.up && now.up, "{now:?}");
    assert_eq!(b.failures, bfd.failures, "no failure: {b:?}");
    assert_eq!(b.local_discr, ours);
    assert_eq!(
        value(
            &after,
            "podcidr_speaker_bfd_session_transitions_total",
            &[("peer", "100.64.9.2:179"), ("state", "down")]
        ),
        value(
            &metrics,
            "podcidr_speaker_bfd_session_transitions_total",
            &[("peer", "100.64.9.2:179"), ("state", "down")]
        ),
        "no state change"
    );
    assert!(switch.holds(NODE_V4, Afi::Ipv4, POD_V4));
    assert!(switch.bfd_up(NODE_V4), "{}", switch.logs());
    let log = speaker.log_tail(200);
    assert!(!log.contains("panicked"), "{log}");
    let status = speaker.terminate();
    assert!(status.success(), "{status:?}");
}
