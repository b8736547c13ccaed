//! Messages in the wrong state (RFC 6608 Finite State Machine Error subcodes), NOTIFICATIONs
//! received, and fatal decode errors reported by the driver.

use crate::harness::*;
use podcidr_speaker::bgp::session::{Action, Input, SessionConfig, SessionError, State};
use podcidr_speaker::bgp::wire::{
    AfiSafi, Message, Notification, RouteRefresh, RouteRefreshSubtype, Update,
};
use std::time::Duration;

fn in_opensent() -> Script {
    let mut s = Script::new(config());
    s.input(Input::Start);
    s.input(Input::TcpConnected { inbound: false });
    s
}

fn in_openconfirm() -> Script {
    let mut s = in_opensent();
    s.message(Message::Open(peer_open()));
    assert_eq!(s.session.state(), State::OpenConfirm);
    s
}

fn refresh() -> Message {
    Message::RouteRefresh(RouteRefresh {
        afi_safi: AfiSafi::IPV4_UNICAST,
        subtype: RouteRefreshSubtype::Request,
    })
}

fn expect_fsm_error(s: &mut Script, m: Message, from: State, subcode: u8) {
    let a = s.message(m);
    assert_eq!(notifications(&a), vec![(5, subcode, vec![])], "{a:?}");
    assert!(a.contains(&Action::CloseConnection { notify: true }));
    assert!(a.contains(&Action::StateChange {
        from,
        to: State::Idle
    }));
    assert_eq!(s.session.state(), State::Idle);
}

#[test]
fn unexpected_messages_in_opensent_are_5_1() {
    for m in [
        Message::Keepalive,
        Message::Update(Update::default()),
        refresh(),
    ] {
        let mut s = in_opensent();
        expect_fsm_error(&mut s, m, State::OpenSent, 1);
    }
}

#[test]
fn unexpected_messages_in_openconfirm_are_5_2() {
    for m in [
        Message::Open(peer_open()),
        Message::Update(Update::default()),
        refresh(),
    ] {
        let mut s = in_openconfirm();
        expect_fsm_error(&mut s, m, State::OpenConfirm, 2);
    }
}

#[test]
fn open_in_established_is_5_3_and_takes_the_session_down() {
    let mut s = Script::new(config());
    s.establish();
    let a = s.message(Message::Open(peer_open()));
    assert_eq!(notifications(&a), vec![(5, 3, vec![])]);
    assert!(matches!(
        a.last(),
        Some(Action::Down {
            reason: SessionError::NotificationSent(_)
        })
    ));
}

#[test]
fn messages_other_than_open_during_delay_open_are_5_0() {
    let cfg = SessionConfig {
        delay_open: Some(Duration::from_secs(5)),
        ..config()
    };
    let mut s = Script::new(cfg);
    s.input(Input::Start);
    let a = s.input(Input::TcpConnected { inbound: false });
    assert_eq!(a, vec![], "OPEN delayed");
    expect_fsm_error(&mut s, Message::Keepalive, State::Connect, 0);
}

#[test]
fn notification_received_in_opensent_goes_idle_without_answering() {
    let mut s = in_opensent();
    let n = Notification {
        code: 2,
        subcode: 2,
        data: bytes::Bytes::new(),
    };
    let a = s.message(Message::Notification(n));
    assert_eq!(
        a,
        vec![
            Action::CloseConnection { notify: false },
            Action::StateChange {
                from: State::OpenSent,
                to: State::Idle
            },
        ]
    );
    let Some(SessionError::NotificationReceived(info)) = &s.session.stats().last_error else {
        panic!("expected the received notification as last error");
    };
    assert_eq!((info.code, info.subcode), (2, 2));
    assert_eq!(info.to_string(), "2/2 (open message error: bad peer as)");
}

#[test]
fn decode_error_sends_the_drivers_notification_and_closes() {
    let mut s = Script::new(config());
    s.establish();
    let n = Notification {
        code: 3,
        subcode: 1,
        data: bytes::Bytes::new(),
    };
    let a = s.input(Input::DecodeError(n.clone()));
    assert_eq!(a[0], Action::Send(Message::Notification(n)));
    assert_eq!(a[1], Action::CloseConnection { notify: true });
    assert_eq!(
        a[2],
        Action::StateChange {
            from: State::Established,
            to: State::Idle
        }
    );
    assert!(matches!(a[3], Action::Down { .. }));
}

#[test]
fn tcp_close_in_established_is_a_down_without_notification() {
    let mut s = Script::new(config());
    s.establish();
    let a = s.input(Input::TcpClosed);
    assert!(notifications(&a).is_empty());
    assert_eq!(
        a.last(),
        Some(&Action::Down {
            reason: SessionError::ConnectionClosed
        })
    );
    assert_eq!(s.session.stats().flaps, 1);
}
