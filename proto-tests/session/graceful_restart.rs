//! Graceful restart as the restarting speaker (RFC 4724): the capability we advertise, its
//! negotiation, End-of-RIB after the initial table, and the restart path that closes
//! without a NOTIFICATION so that the switch keeps our routes.

use crate::harness::*;
use podcidr_speaker::bgp::session::{
    Action, GrConfig, Input, Session, SessionConfig, SessionError, State, StopReason, Timer,
};
use podcidr_speaker::bgp::wire::{
    AfiSafi, Capability, GracefulRestart, GracefulRestartFamily, Message, Update,
};

fn with_gr(cfg: SessionConfig) -> SessionConfig {
    SessionConfig {
        graceful_restart: Some(GrConfig {
            restart_time: 120,
            forwarding_preserved: true,
        }),
        ..cfg
    }
}

/// The capability in the OPEN: restart time and, per family, the Forwarding State bit
/// (the routes point at the node's pods, whose forwarding the speaker's restart does not
/// touch); the Restart State bit only while `restarting`.
fn expected_gr(restarting: bool) -> GracefulRestart {
    GracefulRestart {
        restart_state: restarting,
        notification: false,
        restart_time: 120,
        families: vec![
            GracefulRestartFamily {
                afi_safi: AfiSafi::IPV4_UNICAST,
                forwarding_preserved: true,
            },
            GracefulRestartFamily {
                afi_safi: AfiSafi::IPV6_UNICAST,
                forwarding_preserved: true,
            },
        ],
    }
}

fn gr_of(open: &podcidr_speaker::bgp::wire::Open) -> GracefulRestart {
    open.capabilities
        .iter()
        .find_map(|c| match c {
            Capability::GracefulRestart(gr) => Some(gr.clone()),
            _ => None,
        })
        .expect("graceful restart capability")
}

/// The OPENs actually sent among `actions`.
fn opens(actions: &[Action]) -> Vec<podcidr_speaker::bgp::wire::Open> {
    sent(actions)
        .into_iter()
        .filter_map(|m| match m {
            Message::Open(o) => Some(o),
            _ => None,
        })
        .collect()
}

/// RFC 4724 section 4.1: after a restart the OPEN carries the Restart State bit, and the
/// Forwarding State bit of every family whose forwarding was preserved. A new process
/// has restarted (it cannot tell a first start, where the bit costs nothing); once a
/// session with the peer is Established the restart is over, and the OPENs of later
/// sessions (the peer flapped, not we) carry R = 0. F stays 1 throughout.
#[test]
fn our_open_claims_a_restart_until_the_first_session_is_up() {
    let mut s = Script::new(with_gr(config()));
    assert!(s.session.restarting());
    assert_eq!(gr_of(s.session.local_open()), expected_gr(true));
    s.input(Input::Start);
    // A first attempt that fails still claims it on the next one.
    let a = s.input(Input::TcpConnected { inbound: false });
    assert_eq!(gr_of(&opens(&a)[0]), expected_gr(true));
    s.input(Input::TcpClosed);
    let retry = s.session.deadline(Timer::IdleHold).unwrap();
    s.run_until(retry - s.t0);
    let a = s.input(Input::TcpConnected { inbound: false });
    assert_eq!(gr_of(&opens(&a)[0]), expected_gr(true));
    let mut open = peer_open();
    open.capabilities.push(gr_capability(90));
    s.message(Message::Open(open.clone()));
    s.message(Message::Keepalive);
    assert_eq!(s.session.state(), State::Established);
    assert!(!s.session.restarting());
    // The peer drops the session: our next OPEN claims no restart of ours.
    s.input(Input::TcpClosed);
    let retry = s.session.deadline(Timer::IdleHold).unwrap();
    s.run_until(retry - s.t0);
    let a = s.input(Input::TcpConnected { inbound: false });
    assert_eq!(gr_of(&opens(&a)[0]), expected_gr(false));
    assert_eq!(gr_of(s.session.local_open()), expected_gr(false));
}

/// A collision candidate (a second connection from the peer) claims a restart exactly
/// when the long-lived session still does.
#[test]
fn a_collision_candidate_claims_a_restart_only_as_long_as_the_main_session() {
    let mut main = Script::new(with_gr(config()));
    main.input(Input::Start);
    main.input(Input::TcpConnected { inbound: false });
    let now = main.now;
    let mut cand = Session::inbound_beside(&main.session, now).unwrap();
    let a: Vec<Action> = std::iter::from_fn(|| cand.poll_action()).collect();
    assert_eq!(gr_of(&opens(&a)[0]), expected_gr(true));

    main.message(Message::Open(peer_open()));
    main.message(Message::Keepalive);
    assert_eq!(main.session.state(), State::Established);
    let mut cand = Session::inbound_beside(&main.session, now).unwrap();
    let a: Vec<Action> = std::iter::from_fn(|| cand.poll_action()).collect();
    assert_eq!(gr_of(&opens(&a)[0]), expected_gr(false));
}

#[test]
fn negotiated_only_when_both_sides_advertise() {
    let mut both = Net::pair(with_gr(config()), with_gr(peer_config()));
    both.start_all();
    let n = both.sessions[0].negotiated().unwrap();
    assert!(n.graceful_restart);
    assert_eq!(n.peer_graceful_restart.as_ref().unwrap().restart_time, 120);

    let mut ours_only = Net::pair(with_gr(config()), peer_config());
    ours_only.start_all();
    let n = ours_only.sessions[0].negotiated().unwrap();
    assert!(!n.graceful_restart);
    assert_eq!(n.peer_graceful_restart, None);
}

#[test]
fn end_of_rib_follows_the_initial_table_of_every_family() {
    let mut net = Net::pair(with_gr(config()), with_gr(peer_config()));
    net.tables[0].insert(
        AfiSafi::IPV4_UNICAST,
        vec![announce_v4(&["10.7.0.0/24"]), announce_v4(&["10.7.1.0/24"])],
    );
    net.start_all();
    let updates: Vec<Update> = sent(&net.actions(0))
        .into_iter()
        .filter_map(|m| match m {
            Message::Update(u) => Some(u),
            _ => None,
        })
        .collect();
    assert_eq!(updates.len(), 4, "{updates:?}");
    assert_eq!(updates[0], announce_v4(&["10.7.0.0/24"]));
    assert_eq!(updates[1], announce_v4(&["10.7.1.0/24"]));
    assert_eq!(
        updates[2],
        Update::default(),
        "IPv4 End-of-RIB after the IPv4 table"
    );
    assert!(
        matches!(&updates[3].attributes[..], [podcidr_speaker::bgp::wire::PathAttribute::MpUnreach(u)] if u.afi_safi == AfiSafi::IPV6_UNICAST && u.withdrawn.is_empty())
    );
    assert_eq!(
        net.sessions[1].stats().peer_end_of_rib,
        vec![AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST]
    );
}

#[test]
fn end_of_rib_is_sent_once_per_session() {
    let mut s = Script::new(with_gr(config()));
    s.establish();
    let a = s.input(Input::TableSent(AfiSafi::IPV4_UNICAST));
    assert_eq!(a, vec![Action::Send(Message::Update(Update::default()))]);
    let a = s.input(Input::TableSent(AfiSafi::IPV4_UNICAST));
    assert_eq!(a, vec![], "no second End-of-RIB");
}

#[test]
fn restart_with_graceful_restart_closes_without_notification() {
    let mut net = Net::pair(with_gr(config()), with_gr(peer_config()));
    net.start_all();
    let mark = net.log[0].len();
    net.input(
        0,
        Input::Stop {
            reason: StopReason::Restart("restarting".into()),
        },
    );
    let a = net.actions_since(0, mark);
    assert_eq!(
        a,
        vec![
            Action::CloseConnection { notify: false },
            Action::StateChange {
                from: State::Established,
                to: State::Idle
            },
            Action::Down {
                reason: SessionError::Stopped(StopReason::Restart("restarting".into()))
            },
        ]
    );
    // The peer saw a bare TCP close: the case where it keeps our routes as stale. (Being
    // passive, it listens again at once.)
    assert_eq!(net.state(1), State::Active);
    assert_eq!(
        net.sessions[1].stats().last_error,
        Some(SessionError::ConnectionClosed)
    );
    assert_eq!(net.sessions[1].stats().received.notification, 0);
    // The process is going away: no automatic restart.
    assert_eq!(net.sessions[0].deadline(Timer::IdleHold), None);
}

#[test]
fn restart_without_graceful_restart_sends_administrative_shutdown() {
    let mut s = Script::new(config());
    s.establish();
    let a = s.input(Input::Stop {
        reason: StopReason::Restart("speaker restarting".into()),
    });
    // Cease/Administrative Shutdown (RFC 4486) with the RFC 9003 message: the speaker
    // is going away, not resetting the session.
    let mut data = vec![18u8];
    data.extend_from_slice(b"speaker restarting");
    assert_eq!(notifications(&a), vec![(6, 2, data)]);
    assert!(a.contains(&Action::CloseConnection { notify: true }));
}

#[test]
fn restart_before_established_sends_a_notification_even_with_graceful_restart() {
    let mut s = Script::new(with_gr(config()));
    s.input(Input::Start);
    s.input(Input::TcpConnected { inbound: false });
    let mut open = peer_open();
    open.capabilities.push(gr_capability(90));
    s.message(Message::Open(open));
    assert!(s.session.negotiated().unwrap().graceful_restart);
    let a = s.input(Input::Stop {
        reason: StopReason::Restart("restarting".into()),
    });
    assert_eq!(
        notifications(&a).len(),
        1,
        "no routes exchanged, nothing to keep"
    );
}
