//! Test scaffolding: a virtual clock, a [`Script`] that drives one session against a
//! scripted peer, and a [`Net`] of sessions talking to each other through in-memory
//! connections (after quinn-proto's test `Pair`). No sockets, no runtime, no sleeping:
//! time only moves when a test moves it.

use podcidr_speaker::bgp::session::{
    detect_collision, Action, Input, Session, SessionConfig, Side, State,
};
use podcidr_speaker::bgp::wire::{
    AfiSafi, AsPath, AsSegment, Capability, GracefulRestart, GracefulRestartFamily, Message,
    MpNextHop, MpReach, Nlri, Open, Origin, PathAttribute, SegmentType, Update,
};
use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

pub const LOCAL_ASN: u32 = 65001;
pub const PEER_ASN: u32 = 65000;
pub const LOCAL_ID: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
pub const PEER_ID: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 254);

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Our side's configuration: eBGP, IPv4 + IPv6 unicast, hold 90, connect retry 5s.
pub fn config() -> SessionConfig {
    SessionConfig {
        local_asn: LOCAL_ASN,
        peer_asn: PEER_ASN,
        router_id: LOCAL_ID,
        hold_time: 90,
        keepalive: None,
        connect_retry: secs(5),
        passive: false,
        delay_open: None,
        graceful_restart: None,
        families: vec![AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST],
        extended_message: false,
        extended_next_hop: false,
        route_refresh: true,
        max_prefix: None,
        jitter_seed: 0x5eed,
    }
}

/// The mirror image of `config()`: the peer as another of our sessions would be.
pub fn peer_config() -> SessionConfig {
    SessionConfig {
        local_asn: PEER_ASN,
        peer_asn: LOCAL_ASN,
        router_id: PEER_ID,
        passive: true,
        jitter_seed: 0xfeed,
        ..config()
    }
}

/// A valid OPEN from the peer of `config()`.
pub fn peer_open() -> Open {
    Open {
        version: 4,
        my_as: PEER_ASN as u16,
        hold_time: 90,
        bgp_id: PEER_ID,
        capabilities: vec![
            Capability::Multiprotocol(AfiSafi::IPV4_UNICAST),
            Capability::Multiprotocol(AfiSafi::IPV6_UNICAST),
            Capability::RouteRefresh,
            Capability::EnhancedRouteRefresh,
            Capability::FourOctetAs(PEER_ASN),
        ],
        other_params: vec![],
    }
}

pub fn gr_capability(restart_time: u16) -> Capability {
    Capability::GracefulRestart(GracefulRestart {
        restart_state: false,
        notification: false,
        restart_time,
        families: vec![GracefulRestartFamily {
            afi_safi: AfiSafi::IPV4_UNICAST,
            forwarding_preserved: true,
        }],
    })
}

pub fn nlri(prefix: &str) -> Nlri {
    Nlri::from(prefix.parse::<ipnet::IpNet>().expect("test prefix"))
}

/// An IPv4 unicast announcement as a switch would send it.
pub fn announce_v4(prefixes: &[&str]) -> Update {
    Update {
        attributes: vec![
            PathAttribute::Origin(Origin::Igp),
            PathAttribute::AsPath(AsPath {
                segments: vec![AsSegment {
                    kind: SegmentType::AsSequence,
                    asns: vec![PEER_ASN],
                }],
            }),
            PathAttribute::NextHop(Ipv4Addr::new(192, 0, 2, 254)),
        ],
        nlri: prefixes.iter().map(|p| nlri(p)).collect(),
        ..Update::default()
    }
}

pub fn withdraw_v4(prefixes: &[&str]) -> Update {
    Update {
        withdrawn: prefixes.iter().map(|p| nlri(p)).collect(),
        ..Update::default()
    }
}

pub fn announce_v6(prefixes: &[&str]) -> Update {
    Update {
        attributes: vec![
            PathAttribute::Origin(Origin::Igp),
            PathAttribute::AsPath(AsPath::default()),
            PathAttribute::MpReach(Box::new(MpReach {
                afi_safi: AfiSafi::IPV6_UNICAST,
                next_hop: MpNextHop::V6 {
                    global: "2001:db8::1".parse().expect("test address"),
                    link_local: None,
                },
                nlri: prefixes.iter().map(|p| nlri(p)).collect(),
                raw_nlri: None,
            })),
        ],
        ..Update::default()
    }
}

/// The NOTIFICATIONs among `actions`, as (code, subcode, data).
pub fn notifications(actions: &[Action]) -> Vec<(u8, u8, Vec<u8>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(Message::Notification(n)) => Some((n.code, n.subcode, n.data.to_vec())),
            _ => None,
        })
        .collect()
}

pub fn sent(actions: &[Action]) -> Vec<Message> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(m) => Some(m.clone()),
            _ => None,
        })
        .collect()
}

pub fn state_changes(actions: &[Action]) -> Vec<(State, State)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::StateChange { from, to } => Some((*from, *to)),
            _ => None,
        })
        .collect()
}

/// One session driven by a test playing the peer, on a virtual clock.
pub struct Script {
    pub session: Session,
    pub t0: Instant,
    pub now: Instant,
}

impl Script {
    pub fn new(cfg: SessionConfig) -> Self {
        let t0 = Instant::now();
        Script {
            session: Session::new(cfg).expect("valid test config"),
            t0,
            now: t0,
        }
    }

    /// The time since the start of the script.
    pub fn elapsed(&self) -> Duration {
        self.now - self.t0
    }

    /// Moves the clock to `t0 + at` (never backwards).
    pub fn at(&mut self, at: Duration) -> &mut Self {
        let t = self.t0 + at;
        assert!(t >= self.now, "a script's clock never goes backwards");
        self.now = t;
        self
    }

    /// Feeds one input at the current time and returns what the session asked for.
    pub fn input(&mut self, input: Input) -> Vec<Action> {
        self.session.handle(self.now, input);
        std::iter::from_fn(|| self.session.poll_action()).collect()
    }

    pub fn message(&mut self, m: Message) -> Vec<Action> {
        self.input(Input::Message(m))
    }

    /// Fires every deadline up to `t0 + until` in order, as a driver would, and returns the
    /// actions with the time (since t0) each was produced at.
    pub fn run_until(&mut self, until: Duration) -> Vec<(Duration, Action)> {
        let end = self.t0 + until;
        let mut out = Vec::new();
        while let Some(deadline) = self.session.poll_timeout() {
            if deadline > end {
                break;
            }
            self.now = self.now.max(deadline);
            let at = self.elapsed();
            out.extend(self.input(Input::Timeout).into_iter().map(|a| (at, a)));
        }
        self.now = self.now.max(end);
        out
    }

    /// Start, connect and exchange OPEN and KEEPALIVE with `open` as the peer's OPEN.
    pub fn establish_with(&mut self, open: Open) -> Vec<Action> {
        self.input(Input::Start);
        self.input(Input::TcpConnected { inbound: false });
        self.message(Message::Open(open));
        let actions = self.message(Message::Keepalive);
        assert_eq!(self.session.state(), State::Established, "{actions:?}");
        actions
    }

    pub fn establish(&mut self) -> Vec<Action> {
        self.establish_with(peer_open())
    }
}

/// A NOTIFICATION delivered to session `to`, with every session's state just before.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Duration,
    pub to: usize,
    pub code: u8,
    pub subcode: u8,
    pub states: Vec<State>,
}

/// Sessions connected by in-memory TCP connections. Messages are delivered in order with
/// no delay; time moves only in [`Net::run_until`]. After every input, the collision pairs
/// are checked as the peer driver would, and the loser is stopped at once.
pub struct Net {
    pub sessions: Vec<Session>,
    /// The session at the other end of each session's connection.
    pub link: Vec<Option<usize>>,
    /// Who each session dials on `Action::Connect` (None: the dial goes nowhere).
    pub dials: Vec<Option<usize>>,
    /// Each session's Adj-RIB-Out, per family, given back on `Action::SendTable`.
    pub tables: Vec<BTreeMap<AfiSafi, Vec<Update>>>,
    /// Messages from this session are lost (a peer that went silent).
    pub mute: Vec<bool>,
    /// (existing, new) sessions of one speaker towards the same peer.
    pub collision_pairs: Vec<(usize, usize)>,
    /// Everything each session asked for, with the time since t0.
    pub log: Vec<Vec<(Duration, Action)>>,
    /// Every NOTIFICATION delivered, in order, as the receiving driver saw it.
    pub received_notifications: Vec<Received>,
    pub t0: Instant,
    pub now: Instant,
    queue: VecDeque<(usize, Input)>,
    pending_dials: Vec<(usize, usize)>,
}

impl Net {
    pub fn new(cfgs: Vec<SessionConfig>) -> Self {
        let n = cfgs.len();
        let t0 = Instant::now();
        Net {
            sessions: cfgs
                .into_iter()
                .map(|c| Session::new(c).expect("valid test config"))
                .collect(),
            link: vec![None; n],
            dials: vec![None; n],
            tables: vec![BTreeMap::new(); n],
            mute: vec![false; n],
            collision_pairs: Vec::new(),
            log: vec![Vec::new(); n],
            received_notifications: Vec::new(),
            t0,
            now: t0,
            queue: VecDeque::new(),
            pending_dials: Vec::new(),
        }
    }

    /// Our session (0) dialing a passive peer session (1).
    pub fn pair(ours: SessionConfig, theirs: SessionConfig) -> Self {
        let mut net = Net::new(vec![ours, theirs]);
        net.dials[0] = Some(1);
        net
    }

    pub fn elapsed(&self) -> Duration {
        self.now - self.t0
    }

    pub fn state(&self, i: usize) -> State {
        self.sessions[i].state()
    }

    /// Starts every session at the current time.
    pub fn start_all(&mut self) {
        for i in 0..self.sessions.len() {
            self.queue.push_back((i, Input::Start));
        }
        self.settle();
    }

    pub fn input(&mut self, i: usize, input: Input) {
        self.queue.push_back((i, input));
        self.settle();
    }

    /// Actions of session `i` logged since index `from` of its log.
    pub fn actions_since(&self, i: usize, from: usize) -> Vec<Action> {
        self.log[i][from..].iter().map(|(_, a)| a.clone()).collect()
    }

    pub fn actions(&self, i: usize) -> Vec<Action> {
        self.actions_since(i, 0)
    }

    /// Delivers queued inputs and routes the resulting actions until nothing moves. Dials
    /// asked for while delivering are made together once the queue is empty, so that two
    /// speakers dialing each other at the same moment both get their connection up before
    /// either sees an OPEN.
    pub fn settle(&mut self) {
        loop {
            while let Some((i, input)) = self.queue.pop_front() {
                if let Input::Message(Message::Notification(n)) = &input {
                    self.received_notifications.push(Received {
                        at: self.elapsed(),
                        to: i,
                        code: n.code,
                        subcode: n.subcode,
                        states: self.sessions.iter().map(Session::state).collect(),
                    });
                }
                self.sessions[i].handle(self.now, input);
                self.drain(i);
                self.check_collisions(i);
            }
            if self.pending_dials.is_empty() {
                return;
            }
            for (from, to) in std::mem::take(&mut self.pending_dials) {
                self.dial(from, to);
            }
        }
    }

    fn drain(&mut self, i: usize) {
        while let Some(a) = self.sessions[i].poll_action() {
            let at = self.elapsed();
            self.log[i].push((at, a.clone()));
            self.route(i, a);
        }
    }

    fn dial(&mut self, from: usize, to: usize) {
        let free = self.link[to].is_none();
        if free {
            self.link[to] = Some(from);
        }
        self.sessions[to].handle(self.now, Input::TcpConnected { inbound: true });
        let adopted = free && self.sessions[to].connection_inbound() == Some(true);
        if adopted {
            self.link[from] = Some(to);
            self.queue
                .push_back((from, Input::TcpConnected { inbound: false }));
        } else {
            if free {
                self.link[to] = None;
            }
            self.queue.push_back((from, Input::TcpFailed));
        }
        self.drain(to);
    }

    fn check_collisions(&mut self, i: usize) {
        for (existing, new) in self.collision_pairs.clone() {
            if i != existing && i != new {
                continue;
            }
            if let Some(c) = detect_collision(&self.sessions[existing], &self.sessions[new]) {
                let loser = match c.close {
                    Side::Existing => existing,
                    Side::New => new,
                };
                self.queue
                    .push_front((loser, Input::Stop { reason: c.reason }));
            }
        }
    }

    fn route(&mut self, i: usize, a: Action) {
        match a {
            Action::Connect => {
                if let Some(to) = self.dials[i] {
                    self.pending_dials.push((i, to));
                }
            }
            Action::Send(m) => {
                if let (Some(peer), false) = (self.link[i], self.mute[i]) {
                    self.queue.push_back((peer, Input::Message(m)));
                }
            }
            Action::CloseConnection { .. } => {
                if let Some(peer) = self.link[i].take() {
                    if self.link[peer] == Some(i) {
                        self.link[peer] = None;
                        self.queue.push_back((peer, Input::TcpClosed));
                    }
                }
            }
            Action::SendTable { afi_safi, .. } => {
                let table = self.tables[i].get(&afi_safi).cloned().unwrap_or_default();
                self.queue.push_back((i, Input::Updates(table)));
                self.queue.push_back((i, Input::TableSent(afi_safi)));
            }
            Action::RejectConnection
            | Action::StateChange { .. }
            | Action::Established(_)
            | Action::Down { .. }
            | Action::MaxPrefixExceeded { .. } => {}
        }
    }

    /// Fires every deadline of every session up to `t0 + until`, in time order.
    pub fn run_until(&mut self, until: Duration) {
        let end = self.t0 + until;
        loop {
            let next = self
                .sessions
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.poll_timeout().map(|t| (t, i)))
                .min();
            match next {
                Some((t, i)) if t <= end => {
                    self.now = self.now.max(t);
                    self.input(i, Input::Timeout);
                }
                _ => break,
            }
        }
        self.now = self.now.max(end);
    }
}
