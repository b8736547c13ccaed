//! BFD control packets as real implementations send them (RFC 5880 section 4.1), both
//! directions: decode to the fields the capture shows, encode back to the same octets,
//! and the captured exchanges replayed against our session in the other side's place.
//!
//! Captured on 2026-11-26 with BIRD 2.0.12 (`protocol bfd`, static `neighbor`s, 300 ms
//! both ways, multiplier 3) and FRR bfdd 8.4.4 (`bfd` / `peer ... local-address ...`, run
//! without zebra, the same timers), each in a network namespace of its own joined by a
//! veth pair (100.64.1.1/30 and fd00:bfd::1/64 BIRD, 100.64.1.2/30 and fd00:bfd::2/64
//! FRR), UDP port 3784, TTL/hop limit 255: the payloads as an AF_PACKET socket on the
//! veth saw them. During the capture BIRD's `min tx interval` went to 600 ms
//! (`birdc configure`: a Poll Sequence) and FRR's peer was shut down (AdminDown).

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use podcidr_speaker::bfd::{Diag, Event, Packet, Session, SessionConfig, State};

/// BIRD's discriminator of the IPv4 session, and FRR's.
const BIRD: u32 = 0x932e_9400;
const FRR: u32 = 0x0e75_2582;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// One captured packet: the payload and what it must decode to.
struct Captured {
    what: &'static str,
    bytes: &'static str,
    diag: Diag,
    state: State,
    poll: bool,
    final_: bool,
    my: u32,
    your: u32,
    tx: u32,
    rx: u32,
    echo: u32,
}

#[rustfmt::skip]
const CAPTURED: &[Captured] = &[
    Captured { what: "BIRD, Down, first packet (1 s while not Up)", bytes: "20400318932e940000000000000f4240000493e000000000",
        diag: Diag::None, state: State::Down, poll: false, final_: false, my: BIRD, your: 0, tx: 1_000_000, rx: 300_000, echo: 0 },
    Captured { what: "FRR, Init (FRR also asks for 1 s while not Up, and 50 ms echo)", bytes: "208003180e752582932e9400000f4240000f42400000c350",
        diag: Diag::None, state: State::Init, poll: false, final_: false, my: FRR, your: BIRD, tx: 1_000_000, rx: 1_000_000, echo: 50_000 },
    Captured { what: "BIRD, Up with Poll (to 300 ms)", bytes: "20e00318932e94000e752582000493e0000493e000000000",
        diag: Diag::None, state: State::Up, poll: true, final_: false, my: BIRD, your: FRR, tx: 300_000, rx: 300_000, echo: 0 },
    Captured { what: "FRR, Up with Poll", bytes: "20e003180e752582932e9400000493e0000493e00000c350",
        diag: Diag::None, state: State::Up, poll: true, final_: false, my: FRR, your: BIRD, tx: 300_000, rx: 300_000, echo: 50_000 },
    Captured { what: "FRR, Up with Final", bytes: "20d003180e752582932e9400000493e0000493e00000c350",
        diag: Diag::None, state: State::Up, poll: false, final_: true, my: FRR, your: BIRD, tx: 300_000, rx: 300_000, echo: 50_000 },
    Captured { what: "BIRD, Up with Final", bytes: "20d00318932e94000e752582000493e0000493e000000000",
        diag: Diag::None, state: State::Up, poll: false, final_: true, my: BIRD, your: FRR, tx: 300_000, rx: 300_000, echo: 0 },
    Captured { what: "FRR, Up, periodic", bytes: "20c003180e752582932e9400000493e0000493e00000c350",
        diag: Diag::None, state: State::Up, poll: false, final_: false, my: FRR, your: BIRD, tx: 300_000, rx: 300_000, echo: 50_000 },
    Captured { what: "BIRD, Up with Poll (min tx interval 600 ms)", bytes: "20e00318932e94000e752582000927c0000493e000000000",
        diag: Diag::None, state: State::Up, poll: true, final_: false, my: BIRD, your: FRR, tx: 600_000, rx: 300_000, echo: 0 },
    Captured { what: "FRR, AdminDown (peer shut down; FRR sends diag 0)", bytes: "200003180e752582932e9400000493e0000493e00000c350",
        diag: Diag::None, state: State::AdminDown, poll: false, final_: false, my: FRR, your: BIRD, tx: 300_000, rx: 300_000, echo: 50_000 },
    Captured { what: "BIRD, Down, Neighbor Signaled Session Down, with Poll (back to 1 s)", bytes: "23600318932e94000e752582000f4240000493e000000000",
        diag: Diag::NeighborSignaledDown, state: State::Down, poll: true, final_: false, my: BIRD, your: FRR, tx: 1_000_000, rx: 300_000, echo: 0 },
    Captured { what: "FRR, AdminDown with Final", bytes: "201003180e752582932e9400000493e0000493e00000c350",
        diag: Diag::None, state: State::AdminDown, poll: false, final_: true, my: FRR, your: BIRD, tx: 300_000, rx: 300_000, echo: 50_000 },
    Captured { what: "BIRD, Down after a detection time without FRR: your discriminator forgotten", bytes: "23400318932e940000000000000f4240000493e000000000",
        diag: Diag::NeighborSignaledDown, state: State::Down, poll: false, final_: false, my: BIRD, your: 0, tx: 1_000_000, rx: 300_000, echo: 0 },
    Captured { what: "BIRD to BIRD, Down, Control Detection Time Expired", bytes: "21400318f71b6f3800000000000f4240000493e000000000",
        diag: Diag::ControlDetectionTimeExpired, state: State::Down, poll: false, final_: false, my: 0xf71b_6f38, your: 0, tx: 1_000_000, rx: 300_000, echo: 0 },
    Captured { what: "FRR over IPv6, Down", bytes: "20400318d4353e7300000000000f4240000f42400000c350",
        diag: Diag::None, state: State::Down, poll: false, final_: false, my: 0xd435_3e73, your: 0, tx: 1_000_000, rx: 1_000_000, echo: 50_000 },
];

#[test]
fn captured_packets_decode_to_their_fields_and_encode_back_to_their_octets() {
    for c in CAPTURED {
        let bytes = hex(c.bytes);
        let p = Packet::decode(&bytes).unwrap_or_else(|e| panic!("{}: {e}", c.what));
        let expected = Packet {
            poll: c.poll,
            final_: c.final_,
            required_min_echo_rx_us: c.echo,
            ..Packet::new(c.state, c.diag, 3, c.my, c.your, c.tx, c.rx)
        };
        assert_eq!(p, expected, "{}", c.what);
        assert_eq!(p.encode().to_vec(), bytes, "{}", c.what);
    }
}

fn captured(what: &str) -> Packet {
    let c = CAPTURED.iter().find(|c| c.what.starts_with(what)).unwrap();
    Packet::decode(&hex(c.bytes)).unwrap()
}

fn profile() -> SessionConfig {
    SessionConfig {
        desired_min_tx: Duration::from_millis(300),
        required_min_rx: Duration::from_millis(300),
        detect_mult: 3,
        passive: false,
    }
}

/// Drains what the session sends at `now`.
fn sent(s: &mut Session, now: Instant) -> Vec<Packet> {
    std::iter::from_fn(|| s.poll_transmit(now)).collect()
}

/// Our session in BIRD's place, fed FRR's packets: Up on FRR's Init, FRR's Poll
/// answered at once, our own Poll ended by FRR's Final, and FRR's AdminDown taking us
/// Down with diag 3, which RFC 5882 section 3.2 does not count as a failure.
#[test]
fn frr_bfdd_packets_bring_our_session_up_and_its_admin_down_takes_it_down() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut s = Session::new(profile(), BIRD, t0, 1);
    assert_eq!(sent(&mut s, t0)[0].state, State::Down);

    s.handle_packet(ms(800), &captured("FRR, Init")).unwrap();
    assert_eq!(s.state(), State::Up);
    assert_eq!(s.remote_discr(), FRR);
    // Up: the 300 ms profile is polled in, and 300 ms since our last packet have passed.
    let out = sent(&mut s, ms(800));
    assert_eq!(out.len(), 1);
    assert!(out[0].poll && out[0].state == State::Up && out[0].your_discr == FRR);
    assert_eq!(out[0].desired_min_tx_us, 300_000);

    s.handle_packet(ms(801), &captured("FRR, Up with Poll"))
        .unwrap();
    let out = sent(&mut s, ms(801));
    assert_eq!(out.len(), 1);
    assert!(out[0].final_ && !out[0].poll);
    s.handle_packet(ms(802), &captured("FRR, Up with Final"))
        .unwrap();
    assert!(!s.polling());
    // FRR asks for 300 ms and sends every 300 ms: 3 x 300 ms.
    assert_eq!(s.detection_time(), Duration::from_millis(900));
    s.handle_packet(ms(1000), &captured("FRR, Up, periodic"))
        .unwrap();
    assert_eq!(s.state(), State::Up);

    s.handle_packet(ms(1200), &captured("FRR, AdminDown (peer"))
        .unwrap();
    let events: Vec<Event> = std::iter::from_fn(|| s.poll_event()).collect();
    let last = *events.last().unwrap();
    assert_eq!(
        last,
        Event::StateChanged {
            from: State::Up,
            to: State::Down,
            diag: Diag::NeighborSignaledDown,
            remote: State::AdminDown,
        }
    );
    assert!(!last.is_failure());
    // FRR's AdminDown with Final ends the Poll our fall back to 1 s started, and we
    // stay Down while FRR is AdminDown.
    assert!(s.polling());
    s.handle_packet(ms(1201), &captured("FRR, AdminDown with Final"))
        .unwrap();
    assert!(!s.polling());
    assert_eq!(s.state(), State::Down);
}

/// Our session in FRR's place, fed BIRD's packets: Down -> Init on BIRD's Down, Up on
/// its Up, BIRD's Poll for a 600 ms transmit interval answered at once with the
/// detection time following it, and BIRD's Down taking us Down as a failure.
#[test]
fn bird_packets_bring_our_session_up_poll_its_timers_and_take_it_down() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut s = Session::new(profile(), FRR, t0, 2);
    sent(&mut s, t0);

    s.handle_packet(ms(10), &captured("BIRD, Down, first"))
        .unwrap();
    assert_eq!(s.state(), State::Init);
    s.handle_packet(ms(900), &captured("BIRD, Up with Poll (to"))
        .unwrap();
    assert_eq!(s.state(), State::Up);
    let out = sent(&mut s, ms(900));
    assert!(out[0].final_ && out[0].state == State::Up);
    assert_eq!(s.detection_time(), Duration::from_millis(900));

    s.handle_packet(ms(5000), &captured("BIRD, Up with Poll (min"))
        .unwrap();
    // 3 x max(our 300 ms, BIRD's new 600 ms), from the Poll on.
    assert_eq!(s.detection_time(), Duration::from_millis(1800));
    assert!(sent(&mut s, ms(5000))[0].final_);
    s.handle_timeout(ms(5000) + Duration::from_millis(1799));
    assert_eq!(s.state(), State::Up);

    s.handle_packet(ms(6000), &captured("BIRD, Down, Neighbor"))
        .unwrap();
    let e = std::iter::from_fn(|| s.poll_event()).last().unwrap();
    assert_eq!(
        e,
        Event::StateChanged {
            from: State::Up,
            to: State::Down,
            diag: Diag::NeighborSignaledDown,
            remote: State::Down,
        }
    );
    assert!(e.is_failure());
    assert!(sent(&mut s, ms(6000))[0].final_);
}
