//! The hold timer (RFC 4271 sections 4.4, 6.5, 8.2.2): expiry sends NOTIFICATION 4/0 and
//! closes; KEEPALIVE and UPDATE restart it; a zero hold time turns it off.

use crate::harness::*;
use podcidr_speaker::bgp::session::{Action, Input, SessionError, State, Timer};
use podcidr_speaker::bgp::wire::{Message, Notification};

#[test]
fn silent_peer_expires_the_hold_timer_at_90s() {
    let mut s = Script::new(config());
    s.establish();
    let established_at = s.elapsed();
    // Our keepalives go out at 30s and 60s; at 90s without a word from the peer, 4/0.
    let fired = s.run_until(established_at + secs(90));
    let keepalives: Vec<_> = fired
        .iter()
        .filter(|(_, a)| *a == Action::Send(Message::Keepalive))
        .map(|(t, _)| *t - established_at)
        .collect();
    assert_eq!(keepalives, vec![secs(30), secs(60)]);
    let tail: Vec<Action> = fired
        .iter()
        .filter(|(t, _)| *t == established_at + secs(90))
        .map(|(_, a)| a.clone())
        .collect();
    assert_eq!(
        tail,
        vec![
            Action::Send(Message::Notification(Notification {
                code: 4,
                subcode: 0,
                data: bytes::Bytes::new(),
            })),
            Action::CloseConnection { notify: true },
            Action::StateChange {
                from: State::Established,
                to: State::Idle
            },
            Action::Down {
                reason: SessionError::HoldTimerExpired
            },
        ]
    );
    assert_eq!(
        s.session.stats().last_error,
        Some(SessionError::HoldTimerExpired)
    );
}

#[test]
fn keepalive_and_update_from_the_peer_restart_the_hold_timer() {
    let mut s = Script::new(config());
    s.establish();
    s.at(secs(80));
    s.message(Message::Keepalive);
    assert_eq!(s.session.deadline(Timer::Hold), Some(s.t0 + secs(170)));
    s.at(secs(160));
    s.message(Message::Update(announce_v4(&["10.0.0.0/24"])));
    assert_eq!(s.session.deadline(Timer::Hold), Some(s.t0 + secs(250)));
    // Up to 249s nothing expires; at 250s it does.
    let fired = s.run_until(secs(249));
    assert!(notifications(&fired.iter().map(|(_, a)| a.clone()).collect::<Vec<_>>()).is_empty());
    assert_eq!(s.session.state(), State::Established);
    let fired = s.run_until(secs(250));
    let actions: Vec<_> = fired.into_iter().map(|(_, a)| a).collect();
    assert_eq!(notifications(&actions), vec![(4, 0, vec![])]);
    assert_eq!(s.session.state(), State::Idle);
}

#[test]
fn opensent_waits_four_minutes_for_the_peers_open() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    s.input(Input::TcpConnected { inbound: false });
    let fired = s.run_until(secs(239));
    assert!(fired.is_empty(), "{fired:?}");
    let fired = s.run_until(secs(240));
    let actions: Vec<_> = fired.into_iter().map(|(_, a)| a).collect();
    assert_eq!(notifications(&actions), vec![(4, 0, vec![])]);
    assert!(actions.contains(&Action::StateChange {
        from: State::OpenSent,
        to: State::Idle
    }));
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Down { .. })),
        "never established, so never down"
    );
}

#[test]
fn openconfirm_expires_on_the_negotiated_hold_time() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    s.input(Input::TcpConnected { inbound: false });
    let mut open = peer_open();
    open.hold_time = 9;
    s.message(Message::Open(open));
    assert_eq!(s.session.state(), State::OpenConfirm);
    let fired = s.run_until(secs(9));
    let actions: Vec<_> = fired.into_iter().map(|(_, a)| a).collect();
    // Keepalives at 3s and 6s, then the hold timer at 9s (keepalive at 9s comes second and
    // never happens).
    assert_eq!(
        actions
            .iter()
            .filter(|a| **a == Action::Send(Message::Keepalive))
            .count(),
        2
    );
    assert_eq!(notifications(&actions), vec![(4, 0, vec![])]);
    assert_eq!(s.session.state(), State::Idle);
}

#[test]
fn zero_hold_time_means_no_hold_timer_and_no_keepalives() {
    let mut s = Script::new(config());
    let mut open = peer_open();
    open.hold_time = 0;
    s.establish_with(open);
    let n = s.session.negotiated().unwrap();
    assert_eq!((n.hold_time, n.keepalive), (0, 0));
    assert_eq!(s.session.deadline(Timer::Hold), None);
    assert_eq!(s.session.deadline(Timer::Keepalive), None);
    assert_eq!(s.session.poll_timeout(), None);
    let fired = s.run_until(secs(24 * 3600));
    assert!(fired.is_empty());
    assert_eq!(s.session.state(), State::Established);
}
