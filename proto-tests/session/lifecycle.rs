//! A whole life: Idle, Connect, OpenSent, OpenConfirm, Established, back to Idle on the
//! peer's NOTIFICATION, and the automatic restart; Active for a passive session; two of
//! our sessions establishing against each other.

use crate::harness::*;
use podcidr_speaker::bgp::session::{Action, Input, SessionError, State, Timer};
use podcidr_speaker::bgp::wire::{
    AfiSafi, Message, MpUnreach, Notification, PathAttribute, Update,
};
use std::time::Duration;

#[test]
fn full_life_cycle_through_every_active_state() {
    let mut s = Script::new(config());
    assert_eq!(s.session.state(), State::Idle);
    assert_eq!(
        s.session.poll_timeout(),
        None,
        "idle and not started: nothing to wait for"
    );

    // t=0 Start: dial, ConnectRetry armed at 5s jittered to [3.75s, 5s].
    let a = s.input(Input::Start);
    assert_eq!(
        a,
        vec![
            Action::StateChange {
                from: State::Idle,
                to: State::Connect
            },
            Action::Connect,
        ]
    );
    let retry = s
        .session
        .deadline(Timer::ConnectRetry)
        .expect("connect retry armed")
        - s.t0;
    assert!(
        retry >= Duration::from_millis(3750) && retry <= secs(5),
        "{retry:?}"
    );

    // t=1 connected: OPEN goes out, OpenSent with the 4-minute hold timer.
    s.at(secs(1));
    let a = s.input(Input::TcpConnected { inbound: false });
    let open = s.session.local_open().clone();
    assert_eq!(
        a,
        vec![
            Action::Send(Message::Open(open)),
            Action::StateChange {
                from: State::Connect,
                to: State::OpenSent
            },
        ]
    );
    assert_eq!(s.session.deadline(Timer::ConnectRetry), None);
    assert_eq!(s.session.deadline(Timer::Hold), Some(s.t0 + secs(241)));
    assert_eq!(s.session.connection_inbound(), Some(false));

    // t=2 the peer's OPEN offers hold 30: KEEPALIVE, OpenConfirm, hold 30 and keepalive 10.
    s.at(secs(2));
    let a = s.message(Message::Open(peer_open_with_hold(30)));
    assert_eq!(
        a,
        vec![
            Action::StateChange {
                from: State::OpenSent,
                to: State::OpenConfirm
            },
            Action::Send(Message::Keepalive),
        ]
    );
    let n = s
        .session
        .negotiated()
        .expect("negotiated in OpenConfirm")
        .clone();
    assert_eq!((n.hold_time, n.keepalive), (30, 10));
    assert_eq!(
        n.families,
        vec![AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST]
    );
    assert!(n.route_refresh && n.enhanced_route_refresh && n.four_octet_as && !n.ibgp);
    assert_eq!(s.session.deadline(Timer::Hold), Some(s.t0 + secs(32)));
    assert_eq!(s.session.deadline(Timer::Keepalive), Some(s.t0 + secs(12)));

    // t=3 the peer's KEEPALIVE: Established, and one table asked for per family.
    s.at(secs(3));
    let a = s.message(Message::Keepalive);
    assert_eq!(
        a,
        vec![
            Action::StateChange {
                from: State::OpenConfirm,
                to: State::Established
            },
            Action::Established(n.clone()),
            Action::SendTable {
                afi_safi: AfiSafi::IPV4_UNICAST,
                refresh: false
            },
            Action::SendTable {
                afi_safi: AfiSafi::IPV6_UNICAST,
                refresh: false
            },
        ]
    );
    assert_eq!(s.session.stats().established_since, Some(s.t0 + secs(3)));
    assert_eq!(s.session.stats().established_count, 1);

    // The driver sends its table; End-of-RIB follows each family's table, even an empty one.
    let ours = announce_v4(&["10.1.0.0/24"]);
    let a = s.input(Input::Updates(vec![ours.clone()]));
    assert_eq!(a, vec![Action::Send(Message::Update(ours))]);
    let a = s.input(Input::TableSent(AfiSafi::IPV4_UNICAST));
    assert_eq!(a, vec![Action::Send(Message::Update(Update::default()))]);
    let a = s.input(Input::TableSent(AfiSafi::IPV6_UNICAST));
    let v6_eor = Update {
        attributes: vec![PathAttribute::MpUnreach(Box::new(MpUnreach {
            afi_safi: AfiSafi::IPV6_UNICAST,
            withdrawn: vec![],
            raw_withdrawn: None,
        }))],
        ..Update::default()
    };
    assert_eq!(a, vec![Action::Send(Message::Update(v6_eor))]);

    // t=4 the peer's routes are counted, not stored; the hold timer restarts.
    s.at(secs(4));
    let a = s.message(Message::Update(announce_v4(&[
        "10.0.0.0/24",
        "10.0.1.0/24",
    ])));
    assert_eq!(a, vec![]);
    assert_eq!(
        s.session.stats().received_prefixes[&AfiSafi::IPV4_UNICAST].count,
        2
    );
    assert_eq!(s.session.deadline(Timer::Hold), Some(s.t0 + secs(34)));

    // t=5 the peer shuts down with a message: close, Idle, Down with the peer's words.
    s.at(secs(5));
    let bye = Notification {
        code: 6,
        subcode: 2,
        data: bytes::Bytes::from_static(b"\x0bmaintenance"),
    };
    let a = s.message(Message::Notification(bye));
    assert_eq!(a.len(), 3, "{a:?}");
    assert_eq!(a[0], Action::CloseConnection { notify: false });
    assert_eq!(
        a[1],
        Action::StateChange {
            from: State::Established,
            to: State::Idle
        }
    );
    let Action::Down {
        reason: SessionError::NotificationReceived(info),
    } = &a[2]
    else {
        panic!(
            "expected Down with the received notification, got {:?}",
            a[2]
        );
    };
    assert_eq!((info.code, info.subcode), (6, 2));
    assert_eq!(info.message.as_deref(), Some("maintenance"));
    let stats = s.session.stats();
    assert_eq!(stats.flaps, 1);
    assert_eq!(stats.established_since, None);
    assert!(
        stats.received_prefixes.is_empty(),
        "counts go with the session"
    );
    assert!(matches!(
        stats.last_error,
        Some(SessionError::NotificationReceived(_))
    ));
    assert_eq!(s.session.negotiated(), None);

    // The automatic restart comes after the backoff (1 failure: a second, jittered).
    let restart = s
        .session
        .deadline(Timer::IdleHold)
        .expect("automatic restart armed");
    let wait = restart - s.now;
    assert!(
        wait >= Duration::from_millis(750) && wait <= secs(1),
        "{wait:?}"
    );
    let fired = s.run_until(restart - s.t0);
    let actions: Vec<Action> = fired.iter().map(|(_, a)| a.clone()).collect();
    assert_eq!(
        actions,
        vec![
            Action::StateChange {
                from: State::Idle,
                to: State::Connect
            },
            Action::Connect,
        ]
    );
    assert_eq!(fired[0].0, restart - s.t0);
}

fn peer_open_with_hold(hold: u16) -> podcidr_speaker::bgp::wire::Open {
    let mut open = peer_open();
    open.hold_time = hold;
    open
}

#[test]
fn passive_session_waits_in_active_and_never_dials() {
    let mut s = Script::new(peer_config());
    let a = s.input(Input::Start);
    assert_eq!(
        a,
        vec![Action::StateChange {
            from: State::Idle,
            to: State::Active
        }]
    );
    assert_eq!(s.session.poll_timeout(), None, "passive: no connect retry");
    let a = s.input(Input::TcpConnected { inbound: true });
    assert!(matches!(a[0], Action::Send(Message::Open(_))));
    assert_eq!(
        a[1],
        Action::StateChange {
            from: State::Active,
            to: State::OpenSent
        }
    );
    assert_eq!(s.session.connection_inbound(), Some(true));
    assert!(!a.contains(&Action::Connect));
}

#[test]
fn idle_refuses_connections() {
    let mut s = Script::new(config());
    let a = s.input(Input::TcpConnected { inbound: true });
    assert_eq!(a, vec![Action::RejectConnection]);
    assert_eq!(s.session.state(), State::Idle);
    assert_eq!(s.session.connection_inbound(), None);
}

#[test]
fn a_second_connection_is_rejected_and_the_first_kept() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    s.input(Input::TcpConnected { inbound: false });
    assert_eq!(s.session.state(), State::OpenSent);
    let a = s.input(Input::TcpConnected { inbound: true });
    assert_eq!(a, vec![Action::RejectConnection]);
    assert_eq!(s.session.state(), State::OpenSent);
    assert_eq!(s.session.connection_inbound(), Some(false));
}

#[test]
fn inbound_connection_is_adopted_while_dialing() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    assert_eq!(s.session.state(), State::Connect);
    let a = s.input(Input::TcpConnected { inbound: true });
    assert!(matches!(a[0], Action::Send(Message::Open(_))));
    assert_eq!(s.session.connection_inbound(), Some(true));
    assert_eq!(s.session.deadline(Timer::ConnectRetry), None);
}

#[test]
fn messages_without_a_connection_are_ignored() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    let a = s.message(Message::Keepalive);
    assert_eq!(a, vec![]);
    assert_eq!(s.session.state(), State::Connect);
    assert_eq!(s.session.stats().received.keepalive, 0);
}

#[test]
fn two_of_our_sessions_establish_and_exchange_routes() {
    let mut net = Net::pair(config(), peer_config());
    net.tables[0].insert(
        AfiSafi::IPV4_UNICAST,
        vec![announce_v4(&["10.42.0.0/24", "10.42.1.0/24"])],
    );
    net.tables[0].insert(
        AfiSafi::IPV6_UNICAST,
        vec![announce_v6(&["2001:db8:42::/64"])],
    );
    net.start_all();
    assert_eq!(net.state(0), State::Established);
    assert_eq!(net.state(1), State::Established);
    let ours = net.sessions[0].negotiated().unwrap();
    let theirs = net.sessions[1].negotiated().unwrap();
    assert_eq!((ours.hold_time, theirs.hold_time), (90, 90));
    assert_eq!((ours.keepalive, theirs.keepalive), (30, 30));
    assert_eq!(ours.peer_id, PEER_ID);
    assert_eq!(theirs.peer_id, LOCAL_ID);
    assert!(ours.enhanced_route_refresh && theirs.enhanced_route_refresh);

    let peer_stats = net.sessions[1].stats();
    assert_eq!(
        peer_stats.received_prefixes[&AfiSafi::IPV4_UNICAST].count,
        2
    );
    assert_eq!(
        peer_stats.received_prefixes[&AfiSafi::IPV6_UNICAST].count,
        1
    );
    assert_eq!(
        peer_stats.peer_end_of_rib,
        vec![AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST]
    );
    // Ours got the peer's (empty) tables' End-of-RIB markers, and no route.
    let our_stats = net.sessions[0].stats();
    assert_eq!(our_stats.peer_end_of_rib.len(), 2);
    assert_eq!(our_stats.received_prefixes[&AfiSafi::IPV4_UNICAST].count, 0);
    // OPEN, KEEPALIVE, 2 route UPDATEs + 2 End-of-RIB.
    assert_eq!(our_stats.sent.open, 1);
    assert_eq!(our_stats.sent.update, 4);
    assert_eq!(peer_stats.received.update, 4);
}
