//! Property tests of the BFD session (RFC 5880 section 6): no sequence of received
//! packets (any state, diag, flags, discriminators and intervals that pass the codec's
//! checks), time steps, timeouts, profile changes and AdminDown makes it panic, and what
//! it does is checked against the RFC's rules by a driver that behaves like the real one
//! (wakes at every deadline, in order):
//!
//! * every state change starts from the current state and is a transition of section
//!   6.8.6 / 6.8.16, with its cause: Init/Up -> Down with diag 1 only on a timeout, with
//!   diag 3 only on a packet, AdminDown only when asked;
//! * every packet sent decodes to itself, carries the current state, our discriminator
//!   and the remote's, never both P and F;
//! * periodic packets are never closer than 75% of the transmit interval in force
//!   (section 6.8.7), a Poll accepted is answered by exactly one Final at once, and a
//!   passive session sends nothing before a packet is accepted (section 6.1);
//! * a packet discarded for authentication or a wrong discriminator changes nothing;
//! * after each step the next deadline is in the future (no busy loop).

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use podcidr_speaker::bfd::{Diag, Discard, Event, Packet, Session, SessionConfig, State};
use proptest::prelude::*;
use std::time::{Duration, Instant};

const LOCAL: u32 = 0x1111_0001;
const REMOTE: u32 = 0x2222_0002;

#[derive(Debug, Clone)]
enum Step {
    /// Let this much time pass, waking at every deadline on the way.
    Advance(Duration),
    Receive(Packet),
    Config(SessionConfig),
    AdminDown(bool),
}

fn interval_ms() -> impl Strategy<Value = Duration> {
    prop_oneof![Just(10u64), Just(50), Just(300), Just(1000), Just(2500)]
        .prop_map(Duration::from_millis)
}

fn config() -> impl Strategy<Value = SessionConfig> {
    (
        interval_ms(),
        interval_ms(),
        1u8..6,
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(desired_min_tx, required_min_rx, detect_mult, passive)| SessionConfig {
                desired_min_tx,
                required_min_rx,
                detect_mult,
                passive,
            },
        )
}

fn wire_interval() -> impl Strategy<Value = u32> {
    prop_oneof![
        1 => Just(0u32),
        1 => Just(1),
        3 => Just(10_000),
        4 => Just(300_000),
        3 => Just(1_000_000),
        1 => Just(u32::MAX),
    ]
}

fn state() -> impl Strategy<Value = State> {
    prop_oneof![
        1 => Just(State::AdminDown),
        3 => Just(State::Down),
        3 => Just(State::Init),
        3 => Just(State::Up),
    ]
}

fn packet() -> impl Strategy<Value = Packet> {
    (
        state(),
        (0u8..10).prop_map(Diag::from_code),
        // Flags: poll, final, demand, auth (rare).
        (
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.05),
        ),
        1u8..6,
        prop_oneof![8 => Just(REMOTE), 1 => Just(REMOTE + 1)],
        prop_oneof![4 => Just(LOCAL), 4 => Just(0u32), 1 => Just(LOCAL + 1)],
        wire_interval(),
        wire_interval(),
    )
        .prop_map(
            |(state, diag, (poll, final_, demand, auth), mult, my, your, tx, rx)| Packet {
                poll,
                final_,
                demand,
                auth_present: auth,
                ..Packet::new(state, diag, mult, my, your, tx, rx)
            },
        )
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => (0u64..3_000_000).prop_map(|us| Step::Advance(Duration::from_micros(us))),
        10 => packet().prop_map(Step::Receive),
        1 => config().prop_map(Step::Config),
        1 => any::<bool>().prop_map(Step::AdminDown),
    ]
}

/// The remote's side of a bring-up, so that sequences also start from Up.
fn bring_up() -> Vec<Step> {
    let p = |state, your| {
        Step::Receive(Packet::new(
            state,
            Diag::None,
            3,
            REMOTE,
            your,
            300_000,
            300_000,
        ))
    };
    vec![
        p(State::Down, 0),
        Step::Advance(Duration::from_millis(100)),
        p(State::Init, LOCAL),
        Step::Advance(Duration::from_millis(100)),
        p(State::Up, LOCAL),
    ]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cause {
    Timeout,
    Packet,
    Admin,
}

struct Driver {
    s: Session,
    now: Instant,
    state: State,
    last_periodic: Option<Instant>,
}

impl Driver {
    /// What the session sends at `now`, checked; returns the packets.
    fn drain(&mut self) -> Result<Vec<Packet>, TestCaseError> {
        let mut out = Vec::new();
        loop {
            let interval = self.s.transmit_interval();
            let Some(p) = self.s.poll_transmit(self.now) else {
                break;
            };
            prop_assert_eq!(Packet::decode(&p.encode()), Ok(p));
            prop_assert!(!(p.poll && p.final_), "P and F: {:?}", p);
            prop_assert_eq!(p.state, self.s.state());
            prop_assert_eq!(p.my_discr, LOCAL);
            prop_assert_eq!(p.your_discr, self.s.remote_discr());
            prop_assert!(
                !self.s.config().passive || self.s.remote_discr() != 0,
                "a passive session spoke to no one: {:?}",
                p
            );
            if !p.final_ {
                if let Some(last) = self.last_periodic {
                    let gap = (self.now - last).as_nanos();
                    prop_assert!(
                        gap >= interval.as_nanos() * 3 / 4,
                        "periodic packets {gap} ns apart, interval {interval:?}"
                    );
                }
                self.last_periodic = Some(self.now);
            }
            out.push(p);
        }
        Ok(out)
    }

    fn events(&mut self, cause: Cause) -> Result<usize, TestCaseError> {
        let mut n = 0;
        while let Some(Event::StateChanged { from, to, diag, .. }) = self.s.poll_event() {
            n += 1;
            prop_assert_eq!(from, self.state, "a change from a state we were not in");
            let legal = matches!(
                (from, to),
                (State::Down, State::Init | State::Up)
                    | (State::Init, State::Up | State::Down)
                    | (State::Up, State::Down)
                    | (State::Down | State::Init | State::Up, State::AdminDown)
                    | (State::AdminDown, State::Down)
            );
            prop_assert!(legal, "{:?} -> {:?}", from, to);
            if from == State::AdminDown || to == State::AdminDown {
                prop_assert!(
                    cause == Cause::Admin,
                    "{:?} -> {:?} not asked for",
                    from,
                    to
                );
            } else if to == State::Down {
                match cause {
                    Cause::Timeout => prop_assert_eq!(diag, Diag::ControlDetectionTimeExpired),
                    Cause::Packet => prop_assert_eq!(diag, Diag::NeighborSignaledDown),
                    Cause::Admin => prop_assert!(false, "{:?} -> Down on a config change", from),
                }
            } else {
                prop_assert!(
                    cause == Cause::Packet,
                    "{:?} -> {:?} without a packet",
                    from,
                    to
                );
            }
            self.state = to;
        }
        prop_assert_eq!(self.state, self.s.state());
        Ok(n)
    }

    fn step(&mut self, step: &Step) -> Result<(), TestCaseError> {
        match step {
            Step::Advance(d) => {
                let target = self.now + *d;
                for _ in 0..100_000 {
                    match self.s.poll_timeout() {
                        Some(t) if t <= target => {
                            self.now = self.now.max(t);
                            self.s.handle_timeout(self.now);
                            self.events(Cause::Timeout)?;
                            self.drain()?;
                        }
                        _ => break,
                    }
                }
                self.now = target;
            }
            Step::Receive(p) => {
                // The transport hands over only what the codec accepted.
                let Ok(p) = Packet::decode(&p.encode()) else {
                    return Ok(());
                };
                let before = (
                    self.s.state(),
                    self.s.remote_discr(),
                    self.s.detection_time(),
                );
                let result = self.s.handle_packet(self.now, &p);
                let events = self.events(Cause::Packet)?;
                let sent = self.drain()?;
                match result {
                    Ok(()) => {
                        let finals = sent.iter().filter(|o| o.final_).count();
                        prop_assert_eq!(finals, usize::from(p.poll));
                        if p.poll {
                            prop_assert!(sent[0].final_, "the Final is not first");
                        }
                    }
                    Err(Discard::AdminDown) => {
                        prop_assert_eq!(self.s.state(), State::AdminDown);
                        prop_assert_eq!(events, 0);
                        prop_assert!(sent.iter().all(|o| !o.final_));
                    }
                    Err(d) => {
                        let after = (
                            self.s.state(),
                            self.s.remote_discr(),
                            self.s.detection_time(),
                        );
                        prop_assert_eq!(before, after, "{:?} changed the session", d);
                        prop_assert_eq!(events, 0);
                        prop_assert!(sent.is_empty(), "{:?} made us send {:?}", d, sent);
                    }
                }
            }
            // A shorter receive interval while not Up shortens the detection time at
            // once, so its deadline may have passed: the driver wakes at once for it.
            Step::Config(c) => {
                self.s.set_config(self.now, *c);
                self.events(Cause::Admin)?;
                self.drain()?;
                self.step(&Step::Advance(Duration::ZERO))?;
            }
            Step::AdminDown(down) => {
                self.s.set_admin_down(self.now, *down);
                self.events(Cause::Admin)?;
                self.drain()?;
                self.step(&Step::Advance(Duration::ZERO))?;
            }
        }
        if let Some(t) = self.s.poll_timeout() {
            prop_assert!(t > self.now, "deadline {:?} not after now", t - self.now);
        }
        Ok(())
    }
}

fn run(cfg: SessionConfig, seed: u64, steps: &[Step]) -> Result<(), TestCaseError> {
    let now = Instant::now();
    let mut d = Driver {
        s: Session::new(cfg, LOCAL, now, seed),
        now,
        state: State::Down,
        last_periodic: None,
    };
    d.drain()?;
    for step in steps {
        d.step(step)?;
    }
    Ok(())
}

proptest! {
    // No regression files: the suite lives outside src/, and a failure prints its case.
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_packets_and_timers_never_break_the_rules(
        cfg in config(),
        seed in any::<u64>(),
        steps in prop::collection::vec(step(), 0..80),
    ) {
        run(cfg, seed, &steps)?;
    }

    #[test]
    fn random_packets_and_timers_after_bring_up_never_break_the_rules(
        cfg in config(),
        seed in any::<u64>(),
        steps in prop::collection::vec(step(), 0..80),
    ) {
        let mut all = bring_up();
        all.extend(steps);
        run(cfg, seed, &all)?;
    }
}
