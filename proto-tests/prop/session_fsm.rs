//! Property tests of the session state machine: no sequence of inputs (messages of every
//! type, well-formed or not, TCP events, stops and starts, timeouts at any time, even
//! timestamps out of order) makes it panic, and everything it asks for is valid in the
//! state it asks from, checked against an independent model of the RFC 4271 rules:
//!
//! * OPEN once per connection, from Connect or Active; KEEPALIVE only after our OPEN and
//!   from OpenConfirm or Established; UPDATE only while Established; ROUTE-REFRESH only
//!   BoRR/EoRR, while Established with enhanced route refresh negotiated;
//! * a NOTIFICATION is immediately followed by a close that flushes it, and nothing is
//!   sent on a closed connection;
//! * every state change starts from the current state and is an RFC 4271 transition;
//!   `Established`/`Down` accompany entering/leaving Established; Idle has no connection;
//! * with a monotonic clock: after `Timeout` the next deadline is in the future, a dialing
//!   session always has its ConnectRetry timer, an OpenSent/OpenConfirm/Established session
//!   always has a hold timer (unless the negotiated hold time is 0), and the message
//!   counters equal the messages actually asked for.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use bytes::Bytes;
use podcidr_speaker::bgp::session::{
    Action, GrConfig, Input, MaxPrefix, MaxPrefixAction, Session, SessionConfig, State, StopReason,
    Timer,
};
use podcidr_speaker::bgp::wire::{
    AddPathFamily, AddPathMode, Afi, AfiSafi, AsPath, AttrProblem, Capability, GracefulRestart,
    GracefulRestartFamily, Message, MpNextHop, MpReach, MpUnreach, Nlri, NonFatal, Notification,
    Open, Origin, PathAttribute, RouteRefresh, RouteRefreshSubtype, Safi, Update, UpdateError,
    UpdateFault,
};
use proptest::prelude::*;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

const LOCAL_ASN: u32 = 65001;
const PEER_ASN: u32 = 65000;
const LOCAL_ID: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const PEER_ID: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 254);

// ---------------------------------------------------------------------------------------
// Generators

fn family() -> impl Strategy<Value = AfiSafi> {
    prop_oneof![
        4 => Just(AfiSafi::IPV4_UNICAST),
        4 => Just(AfiSafi::IPV6_UNICAST),
        1 => (any::<u16>(), any::<u8>()).prop_map(|(a, s)| AfiSafi { afi: Afi(a), safi: Safi(s) }),
    ]
}

fn config() -> impl Strategy<Value = SessionConfig> {
    (
        prop_oneof![6 => Just(PEER_ASN), 1 => Just(LOCAL_ASN), 1 => Just(4_200_000_000u32)],
        prop_oneof![1 => Just(0u16), 1 => Just(3), 1 => Just(9), 3 => Just(90)],
        prop::option::of(prop_oneof![Just(1u16), Just(10), Just(60)]),
        any::<bool>(),
        prop::option::of((1u64..5000).prop_map(Duration::from_millis)),
        prop::option::of((0u16..=4095, any::<bool>())),
        prop_oneof![
            Just(vec![AfiSafi::IPV4_UNICAST]),
            Just(vec![AfiSafi::IPV6_UNICAST]),
            Just(vec![AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST]),
        ],
        (any::<bool>(), any::<bool>()),
        prop::option::of((0u32..4, any::<bool>())),
        any::<u64>(),
    )
        .prop_map(
            |(
                peer_asn,
                hold_time,
                keepalive,
                passive,
                delay_open,
                gr,
                families,
                (ext, rr),
                max,
                seed,
            )| {
                SessionConfig {
                    local_asn: LOCAL_ASN,
                    peer_asn,
                    router_id: LOCAL_ID,
                    hold_time,
                    keepalive,
                    connect_retry: Duration::from_secs(2),
                    passive,
                    delay_open,
                    graceful_restart: gr.map(|(restart_time, forwarding_preserved)| GrConfig {
                        restart_time,
                        forwarding_preserved,
                    }),
                    families,
                    extended_message: ext,
                    extended_next_hop: ext,
                    route_refresh: rr,
                    max_prefix: max.map(|(limit, cease)| MaxPrefix {
                        limit,
                        action: if cease {
                            MaxPrefixAction::Cease
                        } else {
                            MaxPrefixAction::Warn
                        },
                    }),
                    jitter_seed: seed,
                }
            },
        )
}

fn capability() -> impl Strategy<Value = Capability> {
    prop_oneof![
        3 => family().prop_map(Capability::Multiprotocol),
        1 => Just(Capability::RouteRefresh),
        1 => Just(Capability::EnhancedRouteRefresh),
        1 => Just(Capability::ExtendedMessage),
        2 => prop_oneof![Just(PEER_ASN), Just(LOCAL_ASN), Just(4_200_000_000u32), Just(0), any::<u32>()]
            .prop_map(Capability::FourOctetAs),
        1 => (any::<bool>(), 0u16..=4095, prop::collection::vec((family(), any::<bool>()), 0..3))
            .prop_map(|(restart_state, restart_time, fams)| {
                Capability::GracefulRestart(GracefulRestart {
                    restart_state,
                    notification: false,
                    restart_time,
                    families: fams
                        .into_iter()
                        .map(|(afi_safi, forwarding_preserved)| GracefulRestartFamily {
                            afi_safi,
                            forwarding_preserved,
                        })
                        .collect(),
                })
            }),
        1 => family().prop_map(|f| Capability::AddPath(vec![AddPathFamily {
            afi_safi: f,
            send_receive: AddPathMode::Both,
        }])),
        1 => (any::<u8>(), prop::collection::vec(any::<u8>(), 0..4))
            .prop_map(|(code, v)| Capability::Unknown { code, value: Bytes::from(v) }),
    ]
}

/// Mostly acceptable OPENs, with every field sometimes wrong.
fn open() -> impl Strategy<Value = Open> {
    (
        prop_oneof![8 => Just(4u8), 1 => any::<u8>()],
        prop_oneof![8 => Just(PEER_ASN as u16), 1 => Just(23456u16), 1 => any::<u16>()],
        prop_oneof![
            Just(0u16),
            Just(1),
            Just(2),
            Just(3),
            Just(30),
            Just(90),
            Just(65535)
        ],
        prop_oneof![
            8 => Just(PEER_ID),
            1 => Just(Ipv4Addr::UNSPECIFIED),
            1 => Just(LOCAL_ID),
            1 => any::<u32>().prop_map(Ipv4Addr::from),
        ],
        prop::collection::vec(capability(), 0..8),
        prop_oneof![9 => Just(vec![]), 1 => Just(vec![(1u8, Bytes::from_static(&[0x00]))])],
        any::<bool>(),
    )
        .prop_map(
            |(version, my_as, hold_time, bgp_id, mut capabilities, other_params, base)| {
                if base {
                    // A sound core the random capabilities add to, so that sessions establish.
                    capabilities.insert(0, Capability::FourOctetAs(PEER_ASN));
                    capabilities.insert(0, Capability::Multiprotocol(AfiSafi::IPV4_UNICAST));
                    capabilities.insert(0, Capability::Multiprotocol(AfiSafi::IPV6_UNICAST));
                }
                Open {
                    version,
                    my_as,
                    hold_time,
                    bgp_id,
                    capabilities,
                    other_params,
                }
            },
        )
}

fn prefix_v4() -> impl Strategy<Value = Nlri> {
    (0u8..4, prop_oneof![Just(8u8), Just(24), Just(32)]).prop_map(|(n, len)| {
        let net = ipnet::Ipv4Net::new(Ipv4Addr::new(10, n, 0, 0), len).expect("valid length");
        Nlri::from(ipnet::IpNet::V4(net.trunc()))
    })
}

fn prefix_v6() -> impl Strategy<Value = Nlri> {
    (0u16..4, prop_oneof![Just(48u8), Just(64)]).prop_map(|(n, len)| {
        let addr = std::net::Ipv6Addr::new(0x2001, 0xdb8, n, 0, 0, 0, 0, 0);
        Nlri::from(ipnet::IpNet::V6(
            ipnet::Ipv6Net::new(addr, len).expect("valid length"),
        ))
    })
}

fn update() -> impl Strategy<Value = Update> {
    (
        prop::collection::vec(prefix_v4(), 0..4),
        prop::collection::vec(prefix_v4(), 0..4),
        prop::option::of(prop::collection::vec(prefix_v6(), 0..3)),
        prop::option::of((family(), prop::collection::vec(prefix_v6(), 0..3))),
        any::<bool>(),
        prop_oneof![8 => Just(None), 1 => Just(Some(NonFatal::TreatAsWithdraw)), 1 => Just(Some(NonFatal::AttributeDiscard))],
    )
        .prop_map(|(withdrawn, nlri, reach, unreach, full_attrs, error)| {
            let mut attributes = Vec::new();
            if full_attrs {
                attributes.push(PathAttribute::Origin(Origin::Igp));
                attributes.push(PathAttribute::AsPath(AsPath::default()));
                attributes.push(PathAttribute::NextHop(Ipv4Addr::new(192, 0, 2, 254)));
            }
            if let Some(nlri) = reach {
                attributes.push(PathAttribute::MpReach(Box::new(MpReach {
                    afi_safi: AfiSafi::IPV6_UNICAST,
                    next_hop: MpNextHop::V6 {
                        global: "2001:db8::1".parse().expect("literal"),
                        link_local: None,
                    },
                    nlri,
                    raw_nlri: None,
                })));
            }
            if let Some((afi_safi, withdrawn)) = unreach {
                attributes.push(PathAttribute::MpUnreach(Box::new(MpUnreach {
                    afi_safi,
                    withdrawn,
                    raw_withdrawn: None,
                })));
            }
            Update {
                withdrawn,
                attributes,
                nlri,
                errors: error
                    .map(|reaction_kind| {
                        // A real fault with the wanted reaction (RFC 7606): a malformed
                        // AS_PATH is treat-as-withdraw, a malformed AGGREGATOR discarded.
                        let type_code = match reaction_kind {
                            NonFatal::TreatAsWithdraw => 2,
                            NonFatal::AttributeDiscard => 7,
                        };
                        let e = UpdateError::from_fault(UpdateFault::Malformed {
                            type_code,
                            problem: AttrProblem::Value,
                            attribute: Bytes::new(),
                        })
                        .expect("non-fatal fault");
                        assert_eq!(e.reaction_kind, reaction_kind);
                        vec![e]
                    })
                    .unwrap_or_default(),
            }
        })
}

fn notification() -> impl Strategy<Value = Notification> {
    (
        0u8..10,
        any::<u8>(),
        prop::collection::vec(any::<u8>(), 0..8),
    )
        .prop_map(|(code, subcode, data)| Notification {
            code,
            subcode,
            data: Bytes::from(data),
        })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        3 => open().prop_map(Message::Open),
        4 => Just(Message::Keepalive),
        3 => update().prop_map(Message::Update),
        1 => notification().prop_map(Message::Notification),
        2 => (family(), prop_oneof![
                Just(RouteRefreshSubtype::Request),
                Just(RouteRefreshSubtype::Borr),
                Just(RouteRefreshSubtype::Eorr),
                any::<u8>().prop_map(RouteRefreshSubtype::Reserved),
            ])
            .prop_map(|(afi_safi, subtype)| Message::RouteRefresh(RouteRefresh { afi_safi, subtype })),
    ]
}

fn stop_reason() -> impl Strategy<Value = StopReason> {
    prop_oneof![
        ".{0,300}".prop_map(StopReason::AdminShutdown),
        ".{0,20}".prop_map(StopReason::AdminReset),
        Just(StopReason::PeerDeconfigured),
        Just(StopReason::Restart("restarting".into())),
        Just(StopReason::CollisionResolution),
        Just(StopReason::PeerRestarted),
    ]
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        2 => Just(Input::Start),
        1 => stop_reason().prop_map(|reason| Input::Stop { reason }),
        3 => any::<bool>().prop_map(|inbound| Input::TcpConnected { inbound }),
        1 => Just(Input::TcpFailed),
        1 => Just(Input::TcpClosed),
        12 => message().prop_map(Input::Message),
        1 => notification().prop_map(Input::DecodeError),
        1 => notification().prop_map(Input::Refusal),
        1 => Just(Input::Timeout),
        2 => prop::collection::vec(update(), 0..3).prop_map(Input::Updates),
        2 => family().prop_map(Input::TableSent),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    /// Time passes; the driver delivers `Timeout` at each deadline on the way.
    Advance(Duration),
    Input(Input),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => prop_oneof![
            (0u64..2000).prop_map(Duration::from_millis),
            (0u64..300).prop_map(Duration::from_secs),
        ].prop_map(Step::Advance),
        4 => input().prop_map(Step::Input),
    ]
}

/// Steps that mostly keep an Established session busy rather than killing it: traffic in
/// both directions, route refresh, table walks, time passing, and now and then anything.
fn established_step() -> impl Strategy<Value = Step> {
    let v4_or_v6 = prop_oneof![Just(AfiSafi::IPV4_UNICAST), Just(AfiSafi::IPV6_UNICAST)];
    let subtype = prop_oneof![
        3 => Just(RouteRefreshSubtype::Request),
        1 => Just(RouteRefreshSubtype::Borr),
        1 => Just(RouteRefreshSubtype::Eorr),
    ];
    prop_oneof![
        3 => (0u64..40).prop_map(|s| Step::Advance(Duration::from_secs(s))),
        3 => Just(Step::Input(Input::Message(Message::Keepalive))),
        4 => update().prop_map(|u| Step::Input(Input::Message(Message::Update(u)))),
        2 => (v4_or_v6.clone(), subtype).prop_map(|(afi_safi, subtype)| {
            Step::Input(Input::Message(Message::RouteRefresh(RouteRefresh { afi_safi, subtype })))
        }),
        3 => prop::collection::vec(update(), 0..3).prop_map(|u| Step::Input(Input::Updates(u))),
        2 => v4_or_v6.prop_map(|f| Step::Input(Input::TableSent(f))),
        1 => step(),
    ]
}

// ---------------------------------------------------------------------------------------
// The model the actions are checked against

#[derive(Debug, Default)]
struct Conn {
    open_sent: bool,
}

struct Model {
    state: State,
    /// The session waits in Idle to dial again (its `next_retry`), read before each
    /// input: only then may it adopt a connection the peer opens while Idle.
    waiting: bool,
    conn: Option<Conn>,
    established: bool,
    enhanced: bool,
    families: Vec<AfiSafi>,
    sends: [u64; 5],
}

impl Model {
    fn new() -> Self {
        Model {
            state: State::Idle,
            waiting: false,
            conn: None,
            established: false,
            enhanced: false,
            families: Vec::new(),
            sends: [0; 5],
        }
    }

    /// Checks the actions of one `handle` call, in order.
    fn check(
        &mut self,
        input: &Input,
        actions: &[Action],
        cfg: &SessionConfig,
    ) -> Result<(), String> {
        let offered = matches!(input, Input::TcpConnected { .. });
        let rejected = actions.contains(&Action::RejectConnection);
        if rejected && !offered {
            return Err("RejectConnection without a connection offered".into());
        }
        if offered && !rejected {
            if self.conn.is_some() {
                return Err("a second connection adopted".into());
            }
            let inbound = matches!(input, Input::TcpConnected { inbound: true });
            let idle_ok = self.state == State::Idle && self.waiting && inbound;
            if !matches!(self.state, State::Connect | State::Active) && !idle_ok {
                return Err(format!(
                    "connection adopted in {} (waiting to retry: {}, inbound: {inbound})",
                    self.state, self.waiting
                ));
            }
            self.conn = Some(Conn::default());
        }
        let mut prev: Option<&Action> = None;
        for a in actions {
            if let Some(Action::Send(Message::Notification(_))) = prev {
                if *a != (Action::CloseConnection { notify: true }) {
                    return Err(format!(
                        "NOTIFICATION followed by {a:?}, not a flushing close"
                    ));
                }
            }
            match a {
                Action::Connect => {
                    if self.state != State::Connect || self.conn.is_some() || cfg.passive {
                        return Err(format!(
                            "dial in {} (connected: {})",
                            self.state,
                            self.conn.is_some()
                        ));
                    }
                }
                Action::Send(m) => {
                    let Some(conn) = self.conn.as_mut() else {
                        return Err(format!("send without a connection: {m:?}"));
                    };
                    let slot = match m {
                        Message::Open(_) => {
                            if conn.open_sent {
                                return Err("second OPEN on one connection".into());
                            }
                            if !matches!(self.state, State::Connect | State::Active) {
                                return Err(format!("OPEN sent in {}", self.state));
                            }
                            conn.open_sent = true;
                            0
                        }
                        Message::Update(_) => {
                            if self.state != State::Established || !self.established {
                                return Err(format!("UPDATE sent in {}", self.state));
                            }
                            1
                        }
                        Message::Notification(_) => 2,
                        Message::Keepalive => {
                            if !conn.open_sent
                                || !matches!(self.state, State::OpenConfirm | State::Established)
                            {
                                return Err(format!("KEEPALIVE sent in {}", self.state));
                            }
                            3
                        }
                        Message::RouteRefresh(rr) => {
                            let marker = matches!(
                                rr.subtype,
                                RouteRefreshSubtype::Borr | RouteRefreshSubtype::Eorr
                            );
                            if self.state != State::Established || !self.enhanced || !marker {
                                return Err(format!(
                                    "ROUTE-REFRESH {rr:?} sent in {} (enhanced {})",
                                    self.state, self.enhanced
                                ));
                            }
                            if !self.families.contains(&rr.afi_safi) {
                                return Err("BoRR/EoRR for a family not negotiated".into());
                            }
                            4
                        }
                    };
                    self.sends[slot] += 1;
                }
                Action::CloseConnection { notify } => {
                    let after_notification =
                        matches!(prev, Some(Action::Send(Message::Notification(_))));
                    if *notify != after_notification {
                        return Err(format!("close notify={notify} after {prev:?}"));
                    }
                    if self.conn.is_none() && self.state != State::Connect {
                        return Err(format!(
                            "close without connection or dial in {}",
                            self.state
                        ));
                    }
                    self.conn = None;
                }
                Action::RejectConnection => {}
                Action::StateChange { from, to } => {
                    if *from != self.state || from == to {
                        return Err(format!(
                            "state change {from} -> {to} while in {}",
                            self.state
                        ));
                    }
                    let allowed = matches!(
                        (from, to),
                        (State::Idle, State::Connect | State::Active)
                            | (
                                State::Connect | State::Active,
                                State::OpenSent | State::OpenConfirm | State::Idle
                            )
                            | (State::OpenSent, State::OpenConfirm | State::Idle)
                            | (State::OpenConfirm, State::Established | State::Idle)
                            | (State::Established, State::Idle)
                    );
                    if !allowed {
                        return Err(format!("transition {from} -> {to} is not in RFC 4271"));
                    }
                    if *to == State::Idle && self.conn.is_some() {
                        return Err("Idle with the connection still open".into());
                    }
                    if *from == State::Established {
                        self.established = false;
                    }
                    self.state = *to;
                }
                Action::Established(n) => {
                    if prev
                        != Some(&Action::StateChange {
                            from: State::OpenConfirm,
                            to: State::Established,
                        })
                    {
                        return Err(format!("Established after {prev:?}"));
                    }
                    if n.families.is_empty() || n.families.iter().any(|f| !cfg.families.contains(f))
                    {
                        return Err(format!(
                            "negotiated families {:?} outside {:?}",
                            n.families, cfg.families
                        ));
                    }
                    if n.hold_time > cfg.hold_time || matches!(n.hold_time, 1 | 2) {
                        return Err(format!(
                            "negotiated hold {} with ours {}",
                            n.hold_time, cfg.hold_time
                        ));
                    }
                    if n.hold_time != 0 && (n.keepalive == 0 || n.keepalive > n.hold_time / 3) {
                        return Err(format!(
                            "keepalive {} with hold {}",
                            n.keepalive, n.hold_time
                        ));
                    }
                    self.established = true;
                    self.enhanced = n.enhanced_route_refresh;
                    self.families = n.families.clone();
                }
                Action::Down { .. } => {
                    if prev
                        != Some(&Action::StateChange {
                            from: State::Established,
                            to: State::Idle,
                        })
                    {
                        return Err(format!("Down after {prev:?}"));
                    }
                }
                Action::SendTable { afi_safi, .. } => {
                    if !self.established || !self.families.contains(afi_safi) {
                        return Err(format!("SendTable {afi_safi:?} in {}", self.state));
                    }
                }
                Action::MaxPrefixExceeded { count, limit, .. } => {
                    let warn = matches!(cfg.max_prefix, Some(MaxPrefix { action: MaxPrefixAction::Warn, limit: l }) if l == *limit);
                    if !self.established || !warn || *count <= u64::from(*limit) {
                        return Err(format!("MaxPrefixExceeded {count}/{limit} unexpected"));
                    }
                }
            }
            prev = Some(a);
        }
        if let Some(Action::Send(Message::Notification(_))) = prev {
            return Err("NOTIFICATION not followed by a close".into());
        }
        Ok(())
    }

    /// Invariants between the model and what the session reports about itself.
    fn agree(&self, s: &Session) -> Result<(), String> {
        if s.state() != self.state {
            return Err(format!("session in {}, model in {}", s.state(), self.state));
        }
        if s.connection_inbound().is_some() != self.conn.is_some() {
            return Err("connection ownership differs from the model".into());
        }
        let after_open = matches!(self.state, State::OpenConfirm | State::Established);
        if s.negotiated().is_some() != after_open {
            return Err(format!("negotiated present in {}", self.state));
        }
        if matches!(self.state, State::Idle) && self.conn.is_some() {
            return Err("connection in Idle".into());
        }
        if matches!(
            self.state,
            State::OpenSent | State::OpenConfirm | State::Established
        ) && self.conn.is_none()
        {
            return Err(format!("{} without a connection", self.state));
        }
        let sent = s.stats().sent;
        let counted = [
            sent.open,
            sent.update,
            sent.notification,
            sent.keepalive,
            sent.route_refresh,
        ];
        if counted != self.sends {
            return Err(format!(
                "sent counters {counted:?}, actions {:?}",
                self.sends
            ));
        }
        Ok(())
    }
}

/// Liveness of the timers under a monotonic clock.
fn timers_sound(s: &Session, now: Instant) -> Result<(), String> {
    if let Some(t) = s.poll_timeout() {
        if t <= now {
            return Err(format!("deadline {:?} not after now", now - t));
        }
    }
    let has = |t| s.deadline(t).is_some();
    match s.state() {
        State::Connect if s.connection_inbound().is_none() && !has(Timer::ConnectRetry) => {
            Err("dialing without a ConnectRetry timer".into())
        }
        State::Connect | State::Active
            if s.connection_inbound().is_some() && !has(Timer::DelayOpen) =>
        {
            Err("connected before OPEN without a DelayOpen timer".into())
        }
        State::OpenSent if !has(Timer::Hold) => Err("OpenSent without a hold timer".into()),
        State::OpenConfirm | State::Established => {
            let n = s.negotiated().ok_or("no negotiated parameters")?;
            if n.hold_time > 0 {
                let hold = s.deadline(Timer::Hold).ok_or("no hold timer")?;
                let keepalive = s.deadline(Timer::Keepalive).ok_or("no keepalive timer")?;
                if hold > now + Duration::from_secs(n.hold_time.into()) {
                    return Err("hold timer beyond the hold time".into());
                }
                if keepalive > now + Duration::from_secs(n.keepalive.into()) {
                    return Err("keepalive timer beyond the keepalive interval".into());
                }
            } else if has(Timer::Hold) || has(Timer::Keepalive) {
                return Err("hold time 0 with a hold or keepalive timer".into());
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn handle(s: &mut Session, m: &mut Model, now: Instant, input: Input) -> Result<(), String> {
    let shown = format!("{input:?}");
    m.waiting = s.next_retry().is_some();
    s.handle(now, input.clone());
    let actions: Vec<Action> = std::iter::from_fn(|| s.poll_action()).collect();
    let cfg = s.config().clone();
    m.check(&input, &actions, &cfg)
        .and_then(|()| m.agree(s))
        .map_err(|e| format!("{e}\n  input: {shown}\n  actions: {actions:?}"))
}

fn run(cfg: SessionConfig, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let mut s = Session::new(cfg).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut m = Model::new();
    let t0 = Instant::now();
    let mut now = t0;
    for step in steps {
        match step {
            Step::Advance(d) => {
                let target = now + d;
                while let Some(deadline) = s.poll_timeout().filter(|t| *t <= target) {
                    now = now.max(deadline);
                    handle(&mut s, &mut m, now, Input::Timeout).map_err(TestCaseError::fail)?;
                    timers_sound(&s, now).map_err(TestCaseError::fail)?;
                }
                now = target;
            }
            Step::Input(input) => {
                handle(&mut s, &mut m, now, input).map_err(TestCaseError::fail)?;
                timers_sound(&s, now).map_err(TestCaseError::fail)?;
            }
        }
    }
    Ok(())
}

/// A prefix that establishes, so that random steps start from every state often.
fn establishing_prefix(passive: bool, enhanced: bool) -> Vec<Step> {
    let mut base_open = Open {
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
    };
    if !enhanced {
        base_open
            .capabilities
            .retain(|c| *c != Capability::EnhancedRouteRefresh);
    }
    vec![
        Step::Input(Input::Start),
        Step::Input(Input::TcpConnected { inbound: passive }),
        Step::Advance(Duration::from_secs(6)),
        Step::Input(Input::Message(Message::Open(base_open))),
        Step::Input(Input::Message(Message::Keepalive)),
    ]
}

proptest! {
    // No regression files: the suite lives outside src/, and a failure prints its case.
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_inputs_never_break_the_rules(cfg in config(), steps in prop::collection::vec(step(), 0..80)) {
        run(cfg, steps)?;
    }

    #[test]
    fn random_inputs_after_establishing_never_break_the_rules(
        cfg in config(),
        enhanced in any::<bool>(),
        steps in prop::collection::vec(established_step(), 0..60),
    ) {
        let mut all = establishing_prefix(cfg.passive, enhanced);
        all.extend(steps);
        run(cfg, all)?;
    }

    #[test]
    fn timestamps_out_of_order_never_panic(
        cfg in config(),
        steps in prop::collection::vec((input(), 0u64..1_000_000_000), 0..80),
    ) {
        // The driver's clock is monotonic; this checks that even a broken one cannot make
        // the session panic or break the message rules (timer soundness is not checked).
        let mut s = Session::new(cfg).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut m = Model::new();
        let t0 = Instant::now();
        for (input, offset_ms) in steps {
            let now = t0 + Duration::from_millis(offset_ms);
            handle(&mut s, &mut m, now, input).map_err(TestCaseError::fail)?;
        }
    }
}

#[test]
fn the_model_rejects_a_keepalive_before_open() {
    // The checker itself must be able to fail: a KEEPALIVE on a fresh connection.
    let mut m = Model::new();
    m.state = State::Connect;
    let cfg = SessionConfig {
        local_asn: LOCAL_ASN,
        peer_asn: PEER_ASN,
        router_id: LOCAL_ID,
        hold_time: 90,
        keepalive: None,
        connect_retry: Duration::from_secs(2),
        passive: false,
        delay_open: None,
        graceful_restart: None,
        families: vec![AfiSafi::IPV4_UNICAST],
        extended_message: false,
        extended_next_hop: false,
        route_refresh: true,
        max_prefix: None,
        jitter_seed: 1,
    };
    let err = m.check(
        &Input::TcpConnected { inbound: false },
        &[Action::Send(Message::Keepalive)],
        &cfg,
    );
    assert!(err.is_err());
    let mut m = Model::new();
    m.state = State::Connect;
    let err = m.check(
        &Input::TcpConnected { inbound: false },
        &[Action::Send(Message::Notification(Notification {
            code: 6,
            subcode: 2,
            data: Bytes::new(),
        }))],
        &cfg,
    );
    assert_eq!(err, Err("NOTIFICATION not followed by a close".to_string()));
}

// ---------------------------------------------------------------------------------------
// Liveness: two of our sessions recover from any disturbance.

#[allow(dead_code)]
#[path = "../session/harness.rs"]
mod harness;

#[derive(Debug, Clone)]
enum Disturbance {
    /// The TCP connection is reset under both ends.
    Reset,
    /// Session `i`'s messages are lost for a while (a peer gone silent, a black hole).
    Silence(usize, Duration),
    /// An operator resets session `i` (Cease/Administrative Reset, then it comes back).
    AdminReset(usize),
    /// Session `i`'s driver hit a fatal decode error.
    DecodeError(usize),
    Wait(Duration),
}

fn disturbance() -> impl Strategy<Value = Disturbance> {
    prop_oneof![
        2 => Just(Disturbance::Reset),
        2 => (0usize..2, (1u64..400).prop_map(Duration::from_secs))
            .prop_map(|(i, d)| Disturbance::Silence(i, d)),
        1 => (0usize..2).prop_map(Disturbance::AdminReset),
        1 => (0usize..2).prop_map(Disturbance::DecodeError),
        3 => (0u64..200).prop_map(|s| Disturbance::Wait(Duration::from_secs(s))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn two_sessions_always_get_back_to_established(
        seeds in (any::<u64>(), any::<u64>()),
        gr in any::<bool>(),
        disturbances in prop::collection::vec(disturbance(), 0..12),
    ) {
        let gr = gr.then_some(GrConfig { restart_time: 120, forwarding_preserved: true });
        let ours = SessionConfig { jitter_seed: seeds.0, graceful_restart: gr, ..harness::config() };
        let theirs = SessionConfig { jitter_seed: seeds.1, graceful_restart: gr, ..harness::peer_config() };
        let mut net = harness::Net::pair(ours, theirs);
        net.start_all();
        prop_assert_eq!(net.state(0), State::Established);
        for d in disturbances {
            match d {
                Disturbance::Reset => {
                    if let Some(peer) = net.link[0] {
                        net.link[0] = None;
                        net.link[peer] = None;
                        net.input(0, Input::TcpClosed);
                        net.input(peer, Input::TcpClosed);
                    }
                }
                Disturbance::Silence(i, d) => {
                    net.mute[i] = true;
                    net.run_until(net.elapsed() + d);
                    net.mute[i] = false;
                }
                Disturbance::AdminReset(i) => net.input(
                    i,
                    Input::Stop { reason: StopReason::AdminReset("test".into()) },
                ),
                Disturbance::DecodeError(i) => net.input(
                    i,
                    Input::DecodeError(Notification { code: 1, subcode: 2, data: Bytes::new() }),
                ),
                Disturbance::Wait(d) => net.run_until(net.elapsed() + d),
            }
        }
        // Quiet from here on: within the longest backoff plus the OpenSent hold time of a
        // connection left half open, both are back.
        net.run_until(net.elapsed() + Duration::from_secs(20 * 60));
        prop_assert_eq!(net.state(0), State::Established, "ours: {:?}", net.sessions[0].stats().last_error);
        prop_assert_eq!(net.state(1), State::Established, "theirs: {:?}", net.sessions[1].stats().last_error);
        prop_assert_eq!(net.link[0], Some(1));
    }
}
