//! The BFD session state machine in asynchronous mode (RFC 5880 section 6), sans-IO:
//! it consumes decoded [`Packet`]s and timeouts stamped with `now`, and produces packets
//! to send, [`Event`]s and deadlines. It never touches a socket, a clock or the bytes on
//! the wire, and it does not know what it protects (BGP is coupled by the driver).
//!
//! # The driver's side of the contract
//!
//! ```text
//! loop {
//!     session.handle_packet(now, &packet)   // a decoded packet for this session
//!     or session.handle_timeout(now)        // once poll_timeout() has passed
//!     while let Some(p) = session.poll_transmit(now) { send p.encode() }
//!     while let Some(e) = session.poll_event() { act on e }
//!     sleep until session.poll_timeout() or the next packet
//! }
//! ```
//!
//! # What the session does, and its choices within the RFC
//!
//! * States (section 6.8.6): Down -> Init on a remote Down, Down/Init -> Up on a remote
//!   Init (and Init -> Up on a remote Up), Up -> Down on a remote Down (diag 3), any
//!   state but AdminDown -> Down on a remote AdminDown (diag 3), Init/Up -> Down when
//!   the Detection Time passes without a packet (diag 1). A state change sends nothing
//!   at once: the next periodic packet carries it (section 6.8.7 forbids sending faster
//!   than the transmit interval; only a Final is exempt).
//! * Timers. Detection Time = the remote's Detect Mult x max(our Required Min RX, the
//!   remote's Desired Min TX) (section 6.8.4); transmit interval = max(our Desired Min
//!   TX, the remote's Required Min RX), each packet's interval jittered to 75-100% of
//!   it (75-90% with a Detect Mult of 1; section 6.8.7). While not Up we advertise and
//!   use a Desired Min TX of at least one second (section 6.8.3).
//! * Poll/Final (sections 6.5 and 6.8.3). Any change of what we advertise (a new
//!   config, or the one second floor coming or going with Up) starts a Poll Sequence:
//!   our periodic packets carry P until a packet with F arrives. While Up, a larger
//!   Desired Min TX is used only once the sequence ends, and a smaller Required Min RX
//!   counts in the Detection Time only once it ends; the other directions take effect at
//!   once. A change during a sequence runs a second one after it, so the values in
//!   force are always ones the remote has acknowledged. A received P is answered by a
//!   packet with F at once, outside the periodic schedule.
//! * Passive mode (section 6.1): nothing is sent while the remote's discriminator is
//!   unknown (before its first packet, and again after a Detection Time without one,
//!   section 6.8.1 bfd.RemoteDiscr).
//! * AdminDown (section 6.8.16): packets keep going out with state AdminDown (diag 7)
//!   for as long as the session stays there; received packets are discarded.
//! * A remote in Demand mode (its D bit, both sides Up, no Poll Sequence of ours) gets
//!   no periodic packets (section 6.8.7); we never ask for Demand mode ourselves.
//! * Authentication is not implemented: a packet with the A bit is discarded
//!   ([`Discard::AuthNotSupported`]) and ours never carry it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::packet::{Diag, Packet, State};

/// The least Desired Min TX Interval while the session is not Up (RFC 5880 section
/// 6.8.3).
pub const SLOW_TX: Duration = Duration::from_secs(1);

/// A session's timers and role: a `bfd-profiles` entry, as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConfig {
    /// bfd.DesiredMinTxInterval while Up (`transmit-interval`). Sent in microseconds:
    /// values are taken as 1 us .. 4294.967295 s.
    pub desired_min_tx: Duration,
    /// bfd.RequiredMinRxInterval (`receive-interval`), same range.
    pub required_min_rx: Duration,
    /// bfd.DetectMult (`detect-multiplier`); 0 is taken as 1.
    pub detect_mult: u8,
    /// `passive-mode`: send nothing until a packet from the remote arrives (section 6.1).
    pub passive: bool,
}

/// What the driver hears from the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// bfd.SessionState changed. `diag` is our bfd.LocalDiag after the change (why);
    /// `remote` is the remote's state as last received (Down after a Detection Time
    /// without packets).
    StateChanged {
        from: State,
        to: State,
        diag: Diag,
        remote: State,
    },
}

impl Event {
    /// Whether this change reports a failure to the session's clients (RFC 5882 section
    /// 3.2): Up -> Down, except when the remote took its side AdminDown, which is not a
    /// failure of the path.
    pub fn is_failure(&self) -> bool {
        match *self {
            Event::StateChanged {
                from, to, remote, ..
            } => from == State::Up && to == State::Down && remote != State::AdminDown,
        }
    }
}

/// Why a decoded packet was not accepted by this session (RFC 5880 section 6.8.6, the
/// checks that need one). A discarded packet changes nothing, except that one
/// received while we are AdminDown still updates what we know of the remote, as the
/// RFC orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Discard {
    /// The A bit is set: authentication is not implemented by this speaker.
    #[error("authentication (A bit): set, but authentication is not implemented")]
    AuthNotSupported,
    /// Your Discriminator is not ours (the driver demultiplexed it here anyway).
    #[error("your discriminator: {got}, expected {expected}")]
    WrongDiscriminator { expected: u32, got: u32 },
    /// We are AdminDown.
    #[error("session is admin down: packet discarded")]
    AdminDown,
}

impl Discard {
    /// A lowercase name, bounded, fit for a metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Discard::AuthNotSupported => "auth_not_supported",
            Discard::WrongDiscriminator { .. } => "wrong_discriminator",
            Discard::AdminDown => "admin_down",
        }
    }

    /// Every reason [`Discard::reason`] can return.
    pub const REASONS: &'static [&'static str] =
        &["auth_not_supported", "wrong_discriminator", "admin_down"];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Poll {
    Idle,
    /// P goes out until an F comes back.
    Active,
    /// Another change came during the sequence: run one more after it.
    Again,
}

/// One BFD session (RFC 5880 section 6.8.1's state variables and the timers around
/// them). Intervals are kept in microseconds, as on the wire.
#[derive(Debug, Clone)]
pub struct Session {
    config: SessionConfig,
    local_discr: u32,
    state: State,
    diag: Diag,
    remote_discr: u32,
    remote_state: State,
    remote_demand: bool,
    /// bfd.RemoteMinRxInterval; 1 until a packet says otherwise (section 6.8.1).
    remote_min_rx: u32,
    remote_min_tx: u32,
    /// 0 until the first packet.
    remote_detect_mult: u8,
    last_rx: Option<Instant>,
    /// The Desired Min TX the transmit interval uses (section 6.8.3: lags an increase
    /// until the Poll Sequence ends).
    tx_in_use: u32,
    /// The Required Min RX the Detection Time uses (lags a decrease likewise).
    rx_in_use: u32,
    poll: Poll,
    final_pending: bool,
    last_tx: Option<Instant>,
    next_tx: Option<Instant>,
    /// This packet interval's share of the transmit interval, in millionths.
    jitter_ppm: u64,
    rng: u64,
    events: VecDeque<Event>,
}

impl Session {
    /// A session in state Down. `local_discr` is bfd.LocalDiscr: non-zero and unique
    /// among the speaker's sessions ([`allocate_discriminator`]); with 0 the remote
    /// discards every packet (section 6.8.6). `seed` drives the jitter. An active
    /// session's first packet is due at `now`.
    pub fn new(config: SessionConfig, local_discr: u32, now: Instant, seed: u64) -> Self {
        let config = normalized(config);
        let mut s = Session {
            config,
            local_discr,
            state: State::Down,
            diag: Diag::None,
            remote_discr: 0,
            remote_state: State::Down,
            remote_demand: false,
            remote_min_rx: 1,
            remote_min_tx: 0,
            remote_detect_mult: 0,
            last_rx: None,
            tx_in_use: 0,
            rx_in_use: 0,
            poll: Poll::Idle,
            final_pending: false,
            last_tx: None,
            next_tx: None,
            jitter_ppm: 1_000_000,
            rng: seed,
            events: VecDeque::new(),
        };
        s.tx_in_use = s.advertised_tx();
        s.rx_in_use = s.advertised_rx();
        s.schedule(now);
        s
    }

    /// bfd.LocalDiscr.
    pub fn local_discr(&self) -> u32 {
        self.local_discr
    }

    /// bfd.SessionState.
    pub fn state(&self) -> State {
        self.state
    }

    /// bfd.LocalDiag: why the state last changed.
    pub fn diag(&self) -> Diag {
        self.diag
    }

    /// bfd.RemoteDiscr: 0 until the first packet and after a Detection Time without one.
    pub fn remote_discr(&self) -> u32 {
        self.remote_discr
    }

    /// bfd.RemoteSessionState.
    pub fn remote_state(&self) -> State {
        self.remote_state
    }

    /// The config in force (normalized as [`SessionConfig`] says).
    pub fn config(&self) -> SessionConfig {
        self.config
    }

    /// Whether a Poll Sequence of ours is running.
    pub fn polling(&self) -> bool {
        self.poll != Poll::Idle
    }

    /// A decoded packet addressed to this session (the transport demultiplexes by
    /// your_discr, or by source address when your_discr is 0). RFC 5880 section 6.8.6
    /// from the authentication check on.
    pub fn handle_packet(&mut self, now: Instant, packet: &Packet) -> Result<(), Discard> {
        if packet.auth_present {
            return Err(Discard::AuthNotSupported);
        }
        if packet.your_discr != 0 && packet.your_discr != self.local_discr {
            return Err(Discard::WrongDiscriminator {
                expected: self.local_discr,
                got: packet.your_discr,
            });
        }
        self.remote_discr = packet.my_discr;
        self.remote_state = packet.state;
        self.remote_demand = packet.demand;
        self.remote_min_rx = packet.required_min_rx_us;
        self.remote_min_tx = packet.desired_min_tx_us;
        self.remote_detect_mult = packet.detect_mult;
        self.last_rx = Some(now);
        if packet.final_ {
            self.end_poll();
        }
        if self.state == State::AdminDown {
            self.schedule(now);
            return Err(Discard::AdminDown);
        }
        let next = match (self.state, packet.state) {
            (State::Down, State::AdminDown) => None,
            (_, State::AdminDown) => Some((State::Down, Diag::NeighborSignaledDown)),
            (State::Down, State::Down) => Some((State::Init, Diag::None)),
            (State::Down, State::Init) => Some((State::Up, Diag::None)),
            (State::Init, State::Init | State::Up) => Some((State::Up, Diag::None)),
            (State::Up, State::Down) => Some((State::Down, Diag::NeighborSignaledDown)),
            _ => None,
        };
        if let Some((to, diag)) = next {
            self.change_state(to, diag);
        }
        if packet.poll {
            self.final_pending = true;
        }
        self.schedule(now);
        Ok(())
    }

    /// The Detection Time (section 6.8.4). Call it once `poll_timeout()` has passed;
    /// earlier calls change nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(deadline) = self.detection_deadline() else {
            return;
        };
        if now < deadline {
            return;
        }
        self.remote_discr = 0;
        self.remote_state = State::Down;
        self.remote_demand = false;
        self.remote_min_rx = 1;
        self.last_rx = None;
        if matches!(self.state, State::Init | State::Up) {
            self.change_state(State::Down, Diag::ControlDetectionTimeExpired);
        }
        self.schedule(now);
    }

    /// The next instant `handle_timeout`/`poll_transmit` must be called: the earliest of
    /// the detection deadline, the next periodic packet and a pending Final (due at
    /// once: the instant of the packet that asked for it). None when nothing is
    /// scheduled (a passive session before any packet).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let final_due = if self.final_pending {
            self.last_rx
        } else {
            None
        };
        [self.detection_deadline(), self.next_tx, final_due]
            .into_iter()
            .flatten()
            .min()
    }

    /// The next packet to send at `now`: a pending Final first, then the periodic packet
    /// once it is due. Call until None.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Packet> {
        if self.final_pending {
            self.final_pending = false;
            return Some(Packet {
                poll: false,
                final_: true,
                ..self.packet()
            });
        }
        let due = self.next_tx?;
        if now < due {
            return None;
        }
        let packet = Packet {
            poll: self.poll != Poll::Idle,
            ..self.packet()
        };
        self.last_tx = Some(now);
        self.jitter_ppm = self.draw_jitter();
        self.next_tx = None;
        self.schedule(now);
        Some(packet)
    }

    /// State changes since the last call, in order.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// New timers or role: a Poll Sequence when what we advertise changes (section
    /// 6.8.3). The Detect Mult goes out in the next packet.
    pub fn set_config(&mut self, now: Instant, config: SessionConfig) {
        let before = (self.advertised_tx(), self.advertised_rx());
        self.config = normalized(config);
        self.advertised_changed(before);
        self.schedule(now);
    }

    /// AdminDown (section 6.8.16) when `down`, diag Administratively Down; back to Down
    /// (keeping that diag) when not. Packets keep going out in either.
    pub fn set_admin_down(&mut self, now: Instant, down: bool) {
        match (down, self.state) {
            (true, State::AdminDown) | (false, State::Down | State::Init | State::Up) => {}
            (true, _) => self.change_state(State::AdminDown, Diag::AdministrativelyDown),
            (false, State::AdminDown) => self.change_state(State::Down, self.diag),
        }
        self.schedule(now);
    }

    /// The Detection Time in force (section 6.8.4); zero before the first packet.
    pub fn detection_time(&self) -> Duration {
        let interval = self.rx_in_use.max(self.remote_min_tx);
        Duration::from_micros(u64::from(self.remote_detect_mult) * u64::from(interval))
    }

    /// The transmit interval in force before jitter (section 6.8.7).
    pub fn transmit_interval(&self) -> Duration {
        Duration::from_micros(u64::from(self.tx_in_use.max(self.remote_min_rx)))
    }

    /// bfd.DesiredMinTxInterval as advertised: the config's, at least one second while
    /// not Up (section 6.8.3).
    fn advertised_tx(&self) -> u32 {
        let configured = micros(self.config.desired_min_tx);
        if self.state == State::Up {
            configured
        } else {
            configured.max(micros(SLOW_TX))
        }
    }

    fn advertised_rx(&self) -> u32 {
        micros(self.config.required_min_rx)
    }

    /// Our packet with P and F clear. The Echo function is not implemented, so it asks
    /// for no echo packets (a Required Min Echo RX Interval of 0, section 6.8.9).
    fn packet(&self) -> Packet {
        Packet::new(
            self.state,
            self.diag,
            self.config.detect_mult,
            self.local_discr,
            self.remote_discr,
            self.advertised_tx(),
            self.advertised_rx(),
        )
    }

    fn change_state(&mut self, to: State, diag: Diag) {
        let before = (self.advertised_tx(), self.advertised_rx());
        let from = self.state;
        self.state = to;
        self.diag = diag;
        self.events.push_back(Event::StateChanged {
            from,
            to,
            diag,
            remote: self.remote_state,
        });
        self.advertised_changed(before);
    }

    /// Section 6.8.3: a change of bfd.DesiredMinTxInterval or bfd.RequiredMinRxInterval
    /// starts a Poll Sequence; while Up an increase of the one and a decrease of the
    /// other wait for its end.
    fn advertised_changed(&mut self, (tx, rx): (u32, u32)) {
        let (new_tx, new_rx) = (self.advertised_tx(), self.advertised_rx());
        if (new_tx, new_rx) == (tx, rx) {
            return;
        }
        if self.state == State::Up {
            self.tx_in_use = self.tx_in_use.min(new_tx);
            self.rx_in_use = self.rx_in_use.max(new_rx);
        } else {
            self.tx_in_use = new_tx;
            self.rx_in_use = new_rx;
        }
        self.poll = match self.poll {
            Poll::Idle => Poll::Active,
            Poll::Active | Poll::Again => Poll::Again,
        };
    }

    fn end_poll(&mut self) {
        match self.poll {
            Poll::Idle => {}
            Poll::Again => self.poll = Poll::Active,
            Poll::Active => {
                self.poll = Poll::Idle;
                self.tx_in_use = self.advertised_tx();
                self.rx_in_use = self.advertised_rx();
            }
        }
    }

    fn detection_deadline(&self) -> Option<Instant> {
        self.last_rx?.checked_add(self.detection_time())
    }

    /// Section 6.8.7: whether periodic packets go out, and when the next one is due.
    fn schedule(&mut self, now: Instant) {
        let silent = (self.config.passive && self.remote_discr == 0)
            || self.remote_min_rx == 0
            || (self.remote_demand
                && self.state == State::Up
                && self.remote_state == State::Up
                && self.poll == Poll::Idle);
        self.next_tx = if silent {
            None
        } else {
            match self.last_tx {
                None => Some(self.next_tx.unwrap_or(now)),
                Some(last) => {
                    let interval = self.transmit_interval().as_nanos()
                        * u128::from(self.jitter_ppm)
                        / 1_000_000;
                    // The interval is below 2^32 us, so its nanoseconds fit a u64.
                    last.checked_add(Duration::from_nanos(interval as u64))
                }
            }
        };
    }

    /// Section 6.8.7: 75-100% of the interval, 75-90% with a Detect Mult of 1.
    fn draw_jitter(&mut self) -> u64 {
        let top = if self.config.detect_mult == 1 {
            900_000
        } else {
            1_000_000
        };
        750_000 + splitmix64(&mut self.rng) % (top - 750_000 + 1)
    }
}

/// A discriminator for a new session (RFC 5880 section 6.3: non-zero, unique among the
/// speaker's sessions): the first free value from a random start drawn from `seed`,
/// where `taken(d)` says whether d is in use. None only when every non-zero value is.
pub fn allocate_discriminator(seed: u64, taken: impl Fn(u32) -> bool) -> Option<u32> {
    let mut state = seed;
    // The low half of a splitmix64 output.
    let start = splitmix64(&mut state) as u32;
    (0..=u32::MAX)
        .map(|i| start.wrapping_add(i))
        .find(|&d| d != 0 && !taken(d))
}

fn normalized(config: SessionConfig) -> SessionConfig {
    let clamp = |d: Duration| Duration::from_micros(u64::from(micros(d)));
    SessionConfig {
        desired_min_tx: clamp(config.desired_min_tx),
        required_min_rx: clamp(config.required_min_rx),
        detect_mult: config.detect_mult.max(1),
        passive: config.passive,
    }
}

/// A duration as the wire's microseconds, 1 .. u32::MAX.
fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX).max(1)
}

/// splitmix64 (Steele, Lea, Flood 2014): a small, seedable generator, enough for jitter
/// and a discriminator's starting point; nothing here needs a cryptographic one.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(tx_ms: u64, rx_ms: u64, mult: u8) -> SessionConfig {
        SessionConfig {
            desired_min_tx: Duration::from_millis(tx_ms),
            required_min_rx: Duration::from_millis(rx_ms),
            detect_mult: mult,
            passive: false,
        }
    }

    #[test]
    fn discriminators_are_non_zero_and_free() {
        for seed in 0..64 {
            let d = allocate_discriminator(seed, |_| false).unwrap();
            assert_ne!(d, 0);
        }
        // A taken value is skipped for the next free one after it.
        let first = allocate_discriminator(9, |_| false).unwrap();
        let taken = [first, first.wrapping_add(1)];
        let next = allocate_discriminator(9, |d| taken.contains(&d)).unwrap();
        assert!(!taken.contains(&next) && next != 0);
        assert_eq!(next, first.wrapping_add(2));
        assert_ne!(
            allocate_discriminator(1, |_| false),
            allocate_discriminator(2, |_| false)
        );
    }

    #[test]
    fn config_values_are_kept_to_what_the_wire_can_say() {
        let s = Session::new(
            SessionConfig {
                desired_min_tx: Duration::ZERO,
                required_min_rx: Duration::from_secs(5000),
                detect_mult: 0,
                passive: true,
            },
            1,
            Instant::now(),
            0,
        );
        let c = s.config();
        assert_eq!(c.desired_min_tx, Duration::from_micros(1));
        assert_eq!(
            c.required_min_rx,
            Duration::from_micros(u64::from(u32::MAX))
        );
        assert_eq!(c.detect_mult, 1);
    }

    #[test]
    fn the_one_second_floor_holds_until_up_and_a_slower_profile_keeps_its_own() {
        let t0 = Instant::now();
        let mut s = Session::new(config(300, 300, 3), 1, t0, 0);
        let p = s.poll_transmit(t0).unwrap();
        assert_eq!(
            (p.desired_min_tx_us, p.required_min_rx_us),
            (1_000_000, 300_000)
        );
        assert_eq!(p.required_min_echo_rx_us, 0);
        let mut s = Session::new(config(2500, 300, 3), 1, t0, 0);
        assert_eq!(s.poll_transmit(t0).unwrap().desired_min_tx_us, 2_500_000);
    }

    #[test]
    fn jitter_draws_stay_in_the_rfc_ranges() {
        for (mult, top) in [(3u8, 1_000_000u64), (1, 900_000)] {
            let mut s = Session::new(config(300, 300, mult), 1, Instant::now(), 42);
            let draws: Vec<u64> = (0..10_000).map(|_| s.draw_jitter()).collect();
            assert!(draws.iter().all(|&d| (750_000..=top).contains(&d)));
            assert!(draws.iter().any(|&d| d < 760_000));
            assert!(draws.iter().any(|&d| d > top - 10_000));
        }
    }

    #[test]
    fn only_a_fall_from_up_not_caused_by_the_remote_admin_down_is_a_failure() {
        let e = |from, to, remote| Event::StateChanged {
            from,
            to,
            diag: Diag::None,
            remote,
        };
        assert!(e(State::Up, State::Down, State::Down).is_failure());
        assert!(e(State::Up, State::Down, State::Init).is_failure());
        assert!(!e(State::Up, State::Down, State::AdminDown).is_failure());
        assert!(!e(State::Init, State::Down, State::Down).is_failure());
        assert!(!e(State::Up, State::AdminDown, State::Up).is_failure());
        assert!(!e(State::Down, State::Init, State::Down).is_failure());
    }

    #[test]
    fn a_remote_asking_for_no_packets_gets_none_but_a_final() {
        let t0 = Instant::now();
        let mut s = Session::new(config(300, 300, 3), 1, t0, 0);
        assert!(s.poll_transmit(t0).is_some());
        let quiet = Packet {
            poll: true,
            ..Packet::new(State::Down, Diag::None, 3, 2, 0, 1_000_000, 0)
        };
        s.handle_packet(t0, &quiet).unwrap();
        assert!(s.poll_transmit(t0).unwrap().final_);
        assert_eq!(s.poll_transmit(t0 + Duration::from_secs(10)), None);
    }
}
