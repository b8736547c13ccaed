//! BFD session scripts (RFC 5880, asynchronous mode) on a virtual clock: two of our
//! sessions talking through an in-memory link that carries encoded bytes and can be cut
//! per direction ([`Pair`]), or one session against a scripted remote. Time moves only
//! when a test moves it, event by event, so a deadline is hit exactly.

use podcidr_speaker::bfd::{Diag, Discard, Event, Packet, Session, SessionConfig, State};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const A_DISCR: u32 = 0x0a0a_0001;
const B_DISCR: u32 = 0x0b0b_0002;
/// One-way latency of the link.
const LATENCY: Duration = Duration::from_millis(1);

fn config(tx: u64, rx: u64, mult: u8) -> SessionConfig {
    SessionConfig {
        desired_min_tx: ms(tx),
        required_min_rx: ms(rx),
        detect_mult: mult,
        passive: false,
    }
}

/// FRR's and MetalLB's defaults: 300 ms both ways, multiplier 3.
fn default_config() -> SessionConfig {
    config(300, 300, 3)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    A,
    B,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// Two sessions and the link between them (after quinn-proto's test `Pair`).
struct Pair {
    start: Instant,
    now: Instant,
    a: Session,
    b: Session,
    /// Whether packets from this side reach the other.
    a_to_b: bool,
    b_to_a: bool,
    in_flight: VecDeque<(Instant, Side, [u8; 24])>,
    /// Every packet sent: (time since start, sender, packet).
    sent: Vec<(Duration, Side, Packet)>,
    /// Every packet delivered and accepted: (time, receiver).
    received: Vec<(Duration, Side)>,
    discarded: Vec<(Duration, Side, Discard)>,
    events: Vec<(Duration, Side, Event)>,
}

impl Pair {
    fn new(a: SessionConfig, b: SessionConfig) -> Pair {
        let start = Instant::now();
        Pair {
            start,
            now: start,
            a: Session::new(a, A_DISCR, start, 0x5eed),
            b: Session::new(b, B_DISCR, start, 0xfeed),
            a_to_b: true,
            b_to_a: true,
            in_flight: VecDeque::new(),
            sent: Vec::new(),
            received: Vec::new(),
            discarded: Vec::new(),
            events: Vec::new(),
        }
    }

    fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    fn session(&mut self, side: Side) -> &mut Session {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    /// Everything due at `now`: deliveries, timeouts, then each side's packets and
    /// events.
    fn settle(&mut self) {
        let now = self.now;
        while let Some(&(at, from, bytes)) = self.in_flight.front() {
            if at > now {
                break;
            }
            self.in_flight.pop_front();
            let to = from.other();
            let packet = Packet::decode(&bytes).expect("our packets decode");
            let elapsed = self.elapsed();
            match self.session(to).handle_packet(now, &packet) {
                Ok(()) => self.received.push((elapsed, to)),
                Err(d) => self.discarded.push((elapsed, to, d)),
            }
            self.drain(to);
        }
        for side in [Side::A, Side::B] {
            self.session(side).handle_timeout(now);
            self.drain(side);
        }
    }

    fn drain(&mut self, side: Side) {
        let now = self.now;
        let elapsed = self.elapsed();
        while let Some(p) = self.session(side).poll_transmit(now) {
            self.sent.push((elapsed, side, p));
            let open = match side {
                Side::A => self.a_to_b,
                Side::B => self.b_to_a,
            };
            if open {
                self.in_flight.push_back((now + LATENCY, side, p.encode()));
            }
        }
        while let Some(e) = self.session(side).poll_event() {
            self.events.push((elapsed, side, e));
        }
    }

    /// Runs event by event up to `until` (since start), inclusive.
    fn run_until(&mut self, until: Duration) {
        let until = self.start + until;
        for _ in 0..1_000_000 {
            self.settle();
            let next = [
                self.a.poll_timeout(),
                self.b.poll_timeout(),
                self.in_flight.front().map(|f| f.0),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if t <= until => {
                    assert!(t > self.now, "no progress at {:?}", self.elapsed());
                    self.now = t;
                }
                _ => {
                    self.now = until;
                    self.settle();
                    return;
                }
            }
        }
        panic!("run_until did not reach its end");
    }

    fn run_for(&mut self, d: Duration) {
        let until = self.elapsed() + d;
        self.run_until(until);
    }

    fn events_of(&self, side: Side) -> Vec<(State, State, Diag)> {
        self.events
            .iter()
            .filter(|(_, s, _)| *s == side)
            .map(|(_, _, Event::StateChanged { from, to, diag, .. })| (*from, *to, *diag))
            .collect()
    }

    /// Brings both sides Up and lets the Poll Sequences that follow end.
    fn up(&mut self) {
        self.run_for(Duration::from_secs(5));
        assert_eq!((self.a.state(), self.b.state()), (State::Up, State::Up));
        assert!(!self.a.polling() && !self.b.polling());
    }

    /// Periodic (not Final) packets of `side` sent in [from, to).
    fn periodic(&self, side: Side, from: Duration, to: Duration) -> Vec<(Duration, Packet)> {
        self.sent
            .iter()
            .filter(|(t, s, p)| *s == side && !p.final_ && *t >= from && *t < to)
            .map(|(t, _, p)| (*t, *p))
            .collect()
    }
}

fn gaps(times: &[(Duration, Packet)]) -> Vec<Duration> {
    times.windows(2).map(|w| w[1].0 - w[0].0).collect()
}

#[test]
fn three_way_bring_up_goes_down_init_up_on_both_sides() {
    let mut p = Pair::new(default_config(), default_config());
    p.run_until(ms(2100));
    let expected = vec![
        (State::Down, State::Init, Diag::None),
        (State::Init, State::Up, Diag::None),
    ];
    assert_eq!(p.events_of(Side::A), expected);
    assert_eq!(p.events_of(Side::B), expected);
    // At t=0 both say Down with no your_discr; each learns the other's discriminator
    // from that packet and uses it from then on.
    let first: Vec<_> = p.sent.iter().filter(|(t, _, _)| *t == ms(0)).collect();
    assert_eq!(first.len(), 2);
    for (_, _, packet) in &first {
        assert_eq!((packet.state, packet.your_discr), (State::Down, 0));
    }
    for (t, side, packet) in &p.sent {
        if *t > ms(1) {
            let peer = if *side == Side::A { B_DISCR } else { A_DISCR };
            assert_eq!(packet.your_discr, peer, "{side:?} at {t:?}");
        }
    }
    // Init went out with the second packet (a second later, jittered), and Up came
    // from it.
    let (init_at, _, _) = p
        .events
        .iter()
        .find(|(_, s, e)| *s == Side::A && matches!(e, Event::StateChanged { to: State::Up, .. }))
        .unwrap();
    assert!(*init_at >= ms(750) && *init_at <= ms(1002), "{init_at:?}");
    assert_eq!(p.a.remote_discr(), B_DISCR);
    assert_eq!(p.b.remote_discr(), A_DISCR);
}

#[test]
fn not_up_runs_at_one_second_and_up_polls_down_to_the_profile() {
    let mut p = Pair::new(default_config(), default_config());
    // A hears nothing for 5 s: it stays Down (B goes Init), both at the slow rate.
    p.b_to_a = false;
    p.run_until(ms(5000));
    assert_eq!((p.a.state(), p.b.state()), (State::Down, State::Init));
    // Not Up: 1 s advertised and 750-1000 ms between packets (6.8.3, 6.8.7), whatever
    // the profile says.
    for side in [Side::A, Side::B] {
        let before = p.periodic(side, ms(0), ms(5000));
        assert!(before.len() >= 5, "{side:?}: {}", before.len());
        for (_, packet) in &before {
            assert_eq!(packet.desired_min_tx_us, 1_000_000);
            assert_eq!(packet.required_min_rx_us, 300_000);
        }
        for g in gaps(&before) {
            assert!(g >= ms(750) && g <= ms(1000), "{g:?}");
        }
    }
    p.b_to_a = true;
    p.run_until(ms(20_000));
    // Going Up changes what we advertise: a Poll Sequence, answered by a Final, after
    // which no P goes out.
    let polls: Vec<_> = p
        .sent
        .iter()
        .filter(|(_, s, pk)| *s == Side::A && pk.poll)
        .collect();
    assert!(!polls.is_empty());
    assert!(polls
        .iter()
        .all(|(_, _, pk)| pk.desired_min_tx_us == 300_000));
    let finals_from_b: Vec<_> = p
        .sent
        .iter()
        .filter(|(_, s, pk)| *s == Side::B && pk.final_)
        .map(|(t, _, _)| *t)
        .collect();
    // Each P is answered at the instant it arrives (one LATENCY later), not at B's
    // next periodic packet.
    for (t, _, _) in &polls {
        assert!(finals_from_b.contains(&(*t + LATENCY)), "P at {t:?}");
    }
    assert!(!p.a.polling());
    // Up: 300 ms jittered, detection 3 x 300 ms.
    let after = p.periodic(Side::A, ms(10_000), ms(20_000));
    for g in gaps(&after) {
        assert!(g >= ms(225) && g <= ms(300), "{g:?}");
    }
    assert_eq!(p.a.detection_time(), ms(900));
    assert_eq!(p.a.transmit_interval(), ms(300));
}

#[test]
fn detection_fires_at_exactly_multiplier_times_interval_after_the_last_packet() {
    let mut p = Pair::new(default_config(), config(300, 500, 5));
    p.up();
    // A's detection: B's multiplier 5 x max(A's rx 300, B's tx 300) = 1.5 s.
    // B's detection: A's multiplier 3 x max(B's rx 500, A's tx 300) = 1.5 s too, but
    // A sends at 500 ms (B's rx), B at 300 ms.
    assert_eq!(p.a.detection_time(), ms(1500));
    assert_eq!(p.b.detection_time(), ms(1500));
    assert_eq!(p.b.transmit_interval(), ms(300));
    assert_eq!(p.a.transmit_interval(), ms(500));
    p.b_to_a = false;
    let cut = p.elapsed();
    p.run_for(ms(3000));
    let last = p
        .received
        .iter()
        .filter(|(_, s)| *s == Side::A)
        .map(|(t, _)| *t)
        .max()
        .unwrap();
    assert!(last <= cut + LATENCY);
    let down: Vec<_> = p
        .events
        .iter()
        .filter(|(_, s, _)| *s == Side::A)
        .filter(|(_, _, e)| {
            matches!(
                e,
                Event::StateChanged {
                    to: State::Down,
                    ..
                }
            )
        })
        .collect();
    assert_eq!(down.len(), 1);
    let (at, _, e) = down[0];
    assert_eq!(*at, last + ms(1500));
    assert!(e.is_failure());
    assert_eq!(
        *e,
        Event::StateChanged {
            from: State::Up,
            to: State::Down,
            diag: Diag::ControlDetectionTimeExpired,
            remote: State::Down,
        }
    );
    // The remote's discriminator is forgotten (6.8.1) and our packets say why we went
    // Down; B, still hearing us, goes Down with diag 3.
    assert_eq!(p.a.remote_discr(), 0);
    let said: Vec<_> = p.periodic(Side::A, *at, p.elapsed());
    assert!(said
        .iter()
        .all(|(_, pk)| pk.diag == Diag::ControlDetectionTimeExpired && pk.your_discr == 0));
    assert!(p.events.iter().any(|(_, s, e)| *s == Side::B
        && *e
            == Event::StateChanged {
                from: State::Up,
                to: State::Down,
                diag: Diag::NeighborSignaledDown,
                remote: State::Down,
            }));
}

#[test]
fn detection_does_not_fire_a_nanosecond_early() {
    let t0 = Instant::now();
    let mut s = Session::new(default_config(), A_DISCR, t0, 1);
    let mut remote = remote_packet(State::Down, 0);
    s.handle_packet(t0, &remote).unwrap();
    remote.state = State::Up;
    remote.your_discr = A_DISCR;
    remote.detect_mult = 4;
    remote.desired_min_tx_us = 250_000;
    let last = t0 + ms(100);
    s.handle_packet(last, &remote).unwrap();
    assert_eq!(s.state(), State::Up);
    // 4 x max(our rx 300 ms, their tx 250 ms).
    assert_eq!(s.detection_time(), ms(1200));
    let deadline = last + ms(1200);
    assert!(s.poll_timeout().unwrap() <= deadline);
    s.handle_timeout(deadline - Duration::from_nanos(1));
    assert_eq!(s.state(), State::Up);
    s.handle_timeout(deadline);
    assert_eq!(s.state(), State::Down);
    assert_eq!(s.diag(), Diag::ControlDetectionTimeExpired);
}

#[test]
fn a_remote_that_stops_sending_takes_a_passive_session_back_to_silence() {
    let mut passive = default_config();
    passive.passive = true;
    let mut p = Pair::new(passive, default_config());
    p.up();
    p.b_to_a = false;
    p.a_to_b = false;
    p.run_for(ms(5000));
    assert_eq!(p.a.state(), State::Down);
    assert_eq!(p.a.remote_discr(), 0);
    // Once the Detection Time has passed, a passive session stops talking (6.1, 6.8.1).
    let cut = p.elapsed() - ms(5000);
    let last_a = p
        .sent
        .iter()
        .filter(|(_, s, _)| *s == Side::A)
        .map(|(t, _, _)| *t)
        .max()
        .unwrap();
    assert!(last_a <= cut + ms(900) + ms(300), "{last_a:?}");
    assert_eq!(p.a.poll_timeout(), None);
}

#[test]
fn passive_sends_nothing_until_the_remote_speaks() {
    let mut passive = default_config();
    passive.passive = true;
    // Both passive: silence, both Down, for ever.
    let mut p = Pair::new(passive, passive);
    p.run_until(ms(10_000));
    assert!(p.sent.is_empty());
    assert!(p.events.is_empty());
    assert_eq!(p.a.poll_timeout(), None);

    // B active from 3 s (its first packet is due at its creation): A answers after.
    let mut p = Pair::new(passive, default_config());
    p.b_to_a = false;
    p.run_until(ms(3000));
    assert!(p.sent.iter().all(|(_, s, _)| *s == Side::B));
    p.b_to_a = true;
    p.run_until(ms(8000));
    let first_a = p.sent.iter().find(|(_, s, _)| *s == Side::A).unwrap().0;
    let first_rx = p.received.iter().find(|(_, s)| *s == Side::A).unwrap().0;
    assert!(first_rx >= ms(3000));
    assert_eq!(first_a, first_rx);
    assert_eq!((p.a.state(), p.b.state()), (State::Up, State::Up));
}

#[test]
fn a_larger_transmit_interval_takes_effect_only_after_the_final() {
    let mut p = Pair::new(default_config(), default_config());
    p.up();
    let changed = p.elapsed();
    p.a.set_config(p.now, config(1000, 300, 3));
    assert!(p.a.polling());
    // Still 300 ms until the Final is in.
    assert_eq!(p.a.transmit_interval(), ms(300));
    p.run_for(ms(5000));
    let polls: Vec<_> = p
        .periodic(Side::A, changed, p.elapsed())
        .into_iter()
        .filter(|(_, pk)| pk.poll)
        .collect();
    assert_eq!(polls.len(), 1, "B answers the first P");
    assert_eq!(polls[0].1.desired_min_tx_us, 1_000_000);
    let final_at = polls[0].0 + LATENCY;
    assert!(p
        .sent
        .iter()
        .any(|(t, s, pk)| *s == Side::B && pk.final_ && *t == final_at));
    // B's detection time follows the advertised value at once (the P packet), A's
    // interval only after the Final arrived.
    assert_eq!(p.b.detection_time(), ms(3000));
    let before_final = p.periodic(Side::A, changed, final_at + LATENCY);
    for g in gaps(&before_final) {
        assert!(g <= ms(300), "{g:?}");
    }
    let after = p.periodic(Side::A, final_at + LATENCY, p.elapsed());
    assert!(after.len() >= 3);
    for g in gaps(&after) {
        assert!(g >= ms(750) && g <= ms(1000), "{g:?}");
    }
    assert_eq!(p.a.transmit_interval(), ms(1000));
    assert!(!p.a.polling());
    assert_eq!((p.a.state(), p.b.state()), (State::Up, State::Up));
}

#[test]
fn a_smaller_receive_interval_shortens_detection_only_after_the_final() {
    // A wants packets every second; B could send every 100 ms.
    let mut p = Pair::new(config(300, 1000, 3), config(100, 300, 3));
    p.up();
    assert_eq!(p.b.transmit_interval(), ms(1000));
    assert_eq!(p.a.detection_time(), ms(3000));
    p.a.set_config(p.now, config(300, 200, 3));
    // Before any Final, A still times B out on the old 1 s.
    assert_eq!(p.a.detection_time(), ms(3000));
    // Deliver A's P and nothing else: B speeds up at once (6.8.3's other direction).
    let poll_at = p.a.poll_timeout().unwrap();
    p.run_until(poll_at - p.start + LATENCY);
    assert_eq!(p.b.transmit_interval(), ms(200));
    // B's Final arrives one latency later: now A uses 3 x 200 ms.
    p.run_for(LATENCY);
    assert!(!p.a.polling());
    assert_eq!(p.a.detection_time(), ms(600));
    p.run_for(ms(5000));
    assert_eq!((p.a.state(), p.b.state()), (State::Up, State::Up));
}

#[test]
fn a_change_during_a_poll_sequence_polls_again() {
    let t0 = Instant::now();
    let mut s = up_session(t0);
    s.set_config(t0, config(500, 300, 3));
    s.set_config(t0, config(800, 300, 3));
    let p = s.poll_transmit(t0 + ms(300)).unwrap();
    assert!(p.poll);
    assert_eq!(p.desired_min_tx_us, 800_000);
    let mut fin = remote_packet(State::Up, A_DISCR);
    fin.final_ = true;
    s.handle_packet(t0 + ms(301), &fin).unwrap();
    // The Final may answer a P sent before the second change: poll once more.
    assert!(s.polling());
    assert_eq!(s.transmit_interval(), ms(300));
    s.handle_packet(t0 + ms(302), &fin).unwrap();
    assert!(!s.polling());
    assert_eq!(s.transmit_interval(), ms(800));
}

#[test]
fn a_poll_is_answered_with_a_final_at_once_in_any_state() {
    let t0 = Instant::now();
    let mut s = Session::new(default_config(), A_DISCR, t0, 7);
    assert!(s.poll_transmit(t0).is_some());
    let mut poll = remote_packet(State::Down, 0);
    poll.poll = true;
    let at = t0 + ms(10);
    s.handle_packet(at, &poll).unwrap();
    assert!(s.poll_timeout().unwrap() <= at);
    let f = s.poll_transmit(at).unwrap();
    assert!(f.final_ && !f.poll);
    assert_eq!((f.state, f.your_discr), (State::Init, B_DISCR));
    // The Final is outside the periodic schedule: nothing else is due yet.
    assert_eq!(s.poll_transmit(at), None);
}

#[test]
fn admin_down_takes_the_remote_down_with_diag_3_and_is_not_a_failure() {
    let mut p = Pair::new(default_config(), default_config());
    p.up();
    let at = p.elapsed();
    p.a.set_admin_down(p.now, true);
    p.run_for(ms(5000));
    assert_eq!(p.a.state(), State::AdminDown);
    assert_eq!(p.b.state(), State::Down);
    let a_events: Vec<_> = p
        .events
        .iter()
        .filter(|(t, s, _)| *s == Side::A && *t >= at)
        .collect();
    assert_eq!(a_events.len(), 1);
    assert_eq!(
        a_events[0].2,
        Event::StateChanged {
            from: State::Up,
            to: State::AdminDown,
            diag: Diag::AdministrativelyDown,
            remote: State::Up,
        }
    );
    assert!(!a_events[0].2.is_failure());
    let b_events: Vec<_> = p
        .events
        .iter()
        .filter(|(t, s, _)| *s == Side::B && *t >= at)
        .collect();
    assert_eq!(b_events.len(), 1, "B stays Down while A is AdminDown");
    let e = b_events[0].2;
    assert_eq!(
        e,
        Event::StateChanged {
            from: State::Up,
            to: State::Down,
            diag: Diag::NeighborSignaledDown,
            remote: State::AdminDown,
        }
    );
    // RFC 5882 section 3.2: the remote going AdminDown is not a path failure.
    assert!(!e.is_failure());
    // A keeps telling B, and discards what B sends.
    let said = p.periodic(Side::A, at + ms(1000), p.elapsed());
    assert!(!said.is_empty());
    assert!(said
        .iter()
        .all(|(_, pk)| pk.state == State::AdminDown && pk.diag == Diag::AdministrativelyDown));
    assert!(p
        .discarded
        .iter()
        .any(|(_, s, d)| *s == Side::A && *d == Discard::AdminDown));

    // Back: Down, then the three-way again.
    let back = p.elapsed();
    p.a.set_admin_down(p.now, false);
    p.run_for(ms(5000));
    assert_eq!((p.a.state(), p.b.state()), (State::Up, State::Up));
    let a_back: Vec<_> = p
        .events
        .iter()
        .filter(|(t, s, _)| *s == Side::A && *t >= back)
        .map(|(_, _, Event::StateChanged { from, to, .. })| (*from, *to))
        .collect();
    // Down -> Init -> Up, or Down -> Up when B's Init comes first (6.8.6).
    assert_eq!(a_back.first(), Some(&(State::AdminDown, State::Down)));
    assert_eq!(a_back.last().map(|c| c.1), Some(State::Up));
    assert!(a_back.len() <= 3, "{a_back:?}");
}

#[test]
fn a_remote_that_says_down_while_up_takes_us_down_with_diag_3() {
    let t0 = Instant::now();
    let mut s = up_session(t0);
    let down = remote_packet(State::Down, 0);
    s.handle_packet(t0 + ms(100), &down).unwrap();
    assert_eq!(s.state(), State::Down);
    let e = s.poll_event().unwrap();
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
    // And straight to Init with the same packet's successor: the remote restarted.
    s.handle_packet(t0 + ms(200), &down).unwrap();
    assert_eq!(s.state(), State::Init);
}

#[test]
fn a_remote_that_says_up_while_we_are_down_changes_nothing() {
    let t0 = Instant::now();
    let mut s = Session::new(default_config(), A_DISCR, t0, 3);
    s.handle_packet(t0, &remote_packet(State::Up, A_DISCR))
        .unwrap();
    assert_eq!(s.state(), State::Down);
    assert_eq!(s.poll_event(), None);
}

#[test]
fn authenticated_and_misaddressed_packets_are_discarded_without_a_state_change() {
    let t0 = Instant::now();
    let mut s = up_session(t0);
    let mut auth = remote_packet(State::Down, A_DISCR);
    auth.auth_present = true;
    assert_eq!(s.handle_packet(t0, &auth), Err(Discard::AuthNotSupported));
    let other = remote_packet(State::Down, A_DISCR + 1);
    assert_eq!(
        s.handle_packet(t0, &other),
        Err(Discard::WrongDiscriminator {
            expected: A_DISCR,
            got: A_DISCR + 1
        })
    );
    assert_eq!(s.state(), State::Up);
    assert_eq!(s.poll_event(), None);
    assert_eq!(Discard::AuthNotSupported.reason(), "auth_not_supported");
}

#[test]
fn jitter_stays_within_75_to_100_percent_and_75_to_90_with_multiplier_1() {
    for (mult, top) in [(3u8, 300u64), (1, 270)] {
        let mut p = Pair::new(config(300, 300, mult), config(300, 300, 3));
        p.up();
        let from = p.elapsed();
        p.run_for(Duration::from_secs(600));
        let g = gaps(&p.periodic(Side::A, from, p.elapsed()));
        assert!(g.len() > 1500, "{}", g.len());
        let (min, max) = (*g.iter().min().unwrap(), *g.iter().max().unwrap());
        assert!(
            min >= ms(225) && max <= ms(top),
            "mult {mult}: {min:?}..{max:?}"
        );
        // Random, and spread over the whole range.
        assert!(
            min < ms(230) && max > ms(top - 5),
            "mult {mult}: {min:?}..{max:?}"
        );
        assert_eq!(p.a.state(), State::Up);
    }
}

#[test]
fn a_remote_in_demand_mode_gets_no_periodic_packets_but_polls_are_answered() {
    let t0 = Instant::now();
    let mut s = up_session(t0);
    let mut demand = remote_packet(State::Up, A_DISCR);
    demand.demand = true;
    s.handle_packet(t0 + ms(10), &demand).unwrap();
    for t in (0..20).map(|i| t0 + ms(10 + i * 100)) {
        assert_eq!(s.poll_transmit(t), None);
    }
    demand.poll = true;
    s.handle_packet(t0 + ms(500), &demand).unwrap();
    assert!(s.poll_transmit(t0 + ms(500)).unwrap().final_);
    // Our own Poll Sequence goes out regardless (6.8.7).
    s.set_config(t0 + ms(600), config(200, 300, 3));
    let p = s.poll_transmit(t0 + ms(900)).unwrap();
    assert!(p.poll);
}

/// A packet from the scripted remote (discriminator B_DISCR, 300 ms, multiplier 3).
fn remote_packet(state: State, your_discr: u32) -> Packet {
    Packet::new(state, Diag::None, 3, B_DISCR, your_discr, 300_000, 300_000)
}

/// A session brought Up by a scripted remote at `t0`, its Poll Sequence done and its
/// first packets drained.
fn up_session(t0: Instant) -> Session {
    let mut s = Session::new(default_config(), A_DISCR, t0, 11);
    while s.poll_transmit(t0).is_some() {}
    s.handle_packet(t0, &remote_packet(State::Init, A_DISCR))
        .unwrap();
    assert_eq!(s.state(), State::Up);
    let mut fin = remote_packet(State::Up, A_DISCR);
    fin.final_ = true;
    s.handle_packet(t0, &fin).unwrap();
    assert!(!s.polling());
    while s.poll_event().is_some() {}
    s
}

/// The coupling to BGP (RFC 5882 section 3.2, `bfd::coupling`) on the virtual clock, as
/// the peer task drives it: the BFD pair Up, our BGP session Established with its peer;
/// the path dies (no packet either way); at the detection time our BFD session fails,
/// the coupling's verdict is a tear-down, and our BGP session sends Cease/BFD Down
/// (RFC 9384) and comes back under the normal retry once the path is back.
#[test]
fn a_bfd_failure_tears_an_established_bgp_session_down_with_cease_10() {
    use crate::harness::{config, notifications, peer_config, Net};
    use podcidr_speaker::bfd::coupling::{Coupling, Verdict};
    use podcidr_speaker::bgp::session::{Input, State as BgpState, StopReason};

    let mut bfd = Pair::new(default_config(), default_config());
    bfd.up();
    let mut bgp = Net::pair(config(), peer_config());
    bgp.start_all();
    assert_eq!(bgp.state(0), BgpState::Established);
    let failures = |p: &Pair| {
        p.events
            .iter()
            .filter(|(_, s, e)| *s == Side::A && e.is_failure())
            .count() as u64
    };
    // The task began with the BFD session already Up: nothing counted yet.
    let mut coupling = Coupling::new(failures(&bfd));
    assert_eq!(
        coupling.status(failures(&bfd), true),
        Verdict::Nothing,
        "an Up session is no failure"
    );

    let cut = bfd.elapsed();
    bfd.a_to_b = false;
    bfd.b_to_a = false;
    // Just before the detection time (3 x 300 ms after the last packet): still Up.
    bfd.run_until(cut + ms(600));
    assert_eq!(coupling.status(failures(&bfd), true), Verdict::Nothing);
    bfd.run_until(cut + ms(1000));
    assert_eq!(bfd.a.state(), State::Down);
    let (at, ..) = *bfd
        .events
        .iter()
        .rfind(|(_, s, e)| *s == Side::A && e.is_failure())
        .expect("a failure event");
    assert!(
        at > cut + ms(600) && at <= cut + ms(900),
        "detected {:?} after the cut",
        at - cut
    );

    let established = bgp.state(0) == BgpState::Established;
    assert_eq!(
        coupling.status(failures(&bfd), established),
        Verdict::TearDown
    );
    let mark = bgp.log[0].len();
    bgp.input(
        0,
        Input::Stop {
            reason: StopReason::BfdDown,
        },
    );
    assert_eq!(
        notifications(&bgp.actions_since(0, mark)),
        vec![(6, 10, vec![])]
    );
    assert_eq!(bgp.state(0), BgpState::Idle);
    // The same failure seen again (the status is published on every change): once.
    assert_eq!(coupling.status(failures(&bfd), false), Verdict::Nothing);
    // The BGP session comes back under the normal retry.
    let back = bgp.elapsed() + crate::harness::secs(10);
    bgp.run_until(back);
    assert_eq!(bgp.state(0), BgpState::Established);
}

/// A BFD failure while the BGP session is not Established tears nothing down (BGP may
/// come up before BFD, RFC 5882 section 4.2), and is not acted on later; failures
/// counted before a BGP session began (a reset under a BFD session that goes on) are
/// not its own.
#[test]
fn a_bfd_failure_outside_established_or_before_the_session_is_not_acted_on() {
    use crate::harness::{config, peer_config, Net};
    use podcidr_speaker::bfd::coupling::{Coupling, Verdict};
    use podcidr_speaker::bgp::session::State as BgpState;

    let mut bfd = Pair::new(default_config(), default_config());
    bfd.up();
    let failures = |p: &Pair| {
        p.events
            .iter()
            .filter(|(_, s, e)| *s == Side::A && e.is_failure())
            .count() as u64
    };
    let mut coupling = Coupling::new(0);
    // BGP still connecting when the path fails.
    let bgp = Net::pair(config(), peer_config());
    assert_ne!(bgp.state(0), BgpState::Established);
    bfd.a_to_b = false;
    bfd.b_to_a = false;
    bfd.run_for(ms(1000));
    assert_eq!(failures(&bfd), 1);
    assert_eq!(
        coupling.status(failures(&bfd), bgp.state(0) == BgpState::Established),
        Verdict::NotEstablished
    );
    // Established later: that old failure is not acted on.
    assert_eq!(coupling.status(failures(&bfd), true), Verdict::Nothing);
    // A new BGP session (a reset) begins with the failures so far as seen.
    let mut after_reset = Coupling::new(failures(&bfd));
    assert_eq!(after_reset.status(failures(&bfd), true), Verdict::Nothing);
    // The path back, then down again: a new failure, torn down.
    bfd.a_to_b = true;
    bfd.b_to_a = true;
    bfd.run_for(Duration::from_secs(5));
    assert_eq!(bfd.a.state(), State::Up);
    bfd.a_to_b = false;
    bfd.b_to_a = false;
    bfd.run_for(ms(1000));
    assert_eq!(failures(&bfd), 2);
    assert_eq!(after_reset.status(failures(&bfd), true), Verdict::TearDown);
}

/// The remote taking its side AdminDown (a graceful stop of its BFD, as our speaker does
/// at its own stop) is no failure: the BGP session is left alone (RFC 5882 section 3.2).
/// Here B is the side whose coupling is watched, A the remote going AdminDown.
#[test]
fn the_remotes_admin_down_is_not_a_failure_for_the_coupling() {
    use podcidr_speaker::bfd::coupling::{Coupling, Verdict};

    let mut bfd = Pair::new(default_config(), default_config());
    bfd.up();
    let mut coupling = Coupling::new(0);
    let now = bfd.now;
    bfd.a.set_admin_down(now, true);
    bfd.run_for(ms(5000));
    assert_eq!(bfd.b.state(), State::Down);
    let failures = bfd
        .events
        .iter()
        .filter(|(_, s, e)| *s == Side::B && e.is_failure())
        .count() as u64;
    assert_eq!(failures, 0, "{:?}", bfd.events_of(Side::B));
    assert_eq!(coupling.status(failures, true), Verdict::Nothing);
}
