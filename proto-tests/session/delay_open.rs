//! DelayOpen (RFC 4271 section 8.1.1 and 8.2.2): the OPEN waits for the timer, or goes out
//! at once, followed by a KEEPALIVE, when the peer's OPEN comes first.

use crate::harness::*;
use podcidr_speaker::bgp::session::{Action, Input, SessionConfig, State, Timer};
use podcidr_speaker::bgp::wire::Message;
use std::time::Duration;

fn delayed() -> SessionConfig {
    SessionConfig {
        delay_open: Some(Duration::from_secs(3)),
        ..config()
    }
}

#[test]
fn open_waits_for_the_delay_open_timer() {
    let mut s = Script::new(delayed());
    s.input(Input::Start);
    s.at(secs(1));
    let a = s.input(Input::TcpConnected { inbound: false });
    assert_eq!(a, vec![]);
    assert_eq!(s.session.state(), State::Connect);
    assert_eq!(s.session.deadline(Timer::DelayOpen), Some(s.t0 + secs(4)));
    assert_eq!(s.session.deadline(Timer::ConnectRetry), None);
    let fired = s.run_until(secs(4));
    let open = s.session.local_open().clone();
    assert_eq!(
        fired,
        vec![
            (secs(4), Action::Send(Message::Open(open))),
            (
                secs(4),
                Action::StateChange {
                    from: State::Connect,
                    to: State::OpenSent
                }
            ),
        ]
    );
    assert_eq!(s.session.deadline(Timer::Hold), Some(s.t0 + secs(244)));
}

#[test]
fn peer_open_during_delay_open_is_answered_at_once() {
    let mut s = Script::new(delayed());
    s.input(Input::Start);
    s.input(Input::TcpConnected { inbound: false });
    s.at(secs(1));
    let a = s.message(Message::Open(peer_open()));
    let open = s.session.local_open().clone();
    assert_eq!(
        a,
        vec![
            Action::Send(Message::Open(open)),
            Action::StateChange {
                from: State::Connect,
                to: State::OpenConfirm
            },
            Action::Send(Message::Keepalive),
        ]
    );
    assert_eq!(s.session.deadline(Timer::DelayOpen), None);
    assert_eq!(s.session.deadline(Timer::Hold), Some(s.t0 + secs(91)));
    s.message(Message::Keepalive);
    assert_eq!(s.session.state(), State::Established);
}

#[test]
fn passive_session_with_delay_open_waits_in_active() {
    let mut s = Script::new(SessionConfig {
        passive: true,
        ..delayed()
    });
    s.input(Input::Start);
    let a = s.input(Input::TcpConnected { inbound: true });
    assert_eq!(a, vec![]);
    assert_eq!(s.session.state(), State::Active);
    let fired = s.run_until(secs(3));
    assert!(matches!(fired[0].1, Action::Send(Message::Open(_))));
    assert_eq!(s.session.state(), State::OpenSent);
}
