//! `Input::Hold`: no new session while another BGP speaker may run on this node
//! (`routes::cilium`, `--cilium-bgp-conflict hold`). An Established session carries on
//! and stays down once it ends; an attempt under way stops; nothing is dialed or adopted
//! until the next Start, which restarts a session that is down and only re-allows the
//! restart of one that is up.

use crate::harness::*;
use podcidr_speaker::bgp::session::{Action, Input, SessionError, State, StopReason};
use podcidr_speaker::bgp::wire::{Message, Notification};

fn hold() -> Input {
    Input::Hold {
        message: "held".into(),
    }
}

#[test]
fn an_established_session_carries_on_under_a_hold_and_stays_down_once_it_ends() {
    let mut s = Script::new(config());
    s.establish();
    s.at(secs(1));
    assert_eq!(s.input(hold()), vec![], "nothing sent, nothing closed");
    assert_eq!(s.session.state(), State::Established);
    // Keepalives go on as before.
    let ka = s.run_until(secs(40));
    assert!(ka
        .iter()
        .any(|(_, a)| *a == Action::Send(Message::Keepalive)));
    assert_eq!(s.session.state(), State::Established);

    // The peer resets it: down, and no retry is armed.
    let a = s.message(Message::Notification(Notification::admin_reset("bye")));
    assert_eq!(s.session.state(), State::Idle, "{a:?}");
    assert_eq!(s.session.next_retry(), None);
    assert_eq!(s.session.poll_timeout(), None, "no timer at all");
    assert!(
        !s.session.accepts(true) && !s.session.accepts(false),
        "the peer's new connection is not adopted while held"
    );
    let later = s.run_until(secs(600));
    assert!(
        !later.iter().any(|(_, a)| *a == Action::Connect),
        "no dial while held: {later:?}"
    );

    // Released: it dials at once.
    let a = s.input(Input::Start);
    assert!(a.contains(&Action::Connect), "{a:?}");
    assert_eq!(s.session.state(), State::Connect);
}

#[test]
fn the_release_of_a_hold_lets_an_established_session_restart_after_it_ends() {
    let mut s = Script::new(config());
    s.establish();
    s.input(hold());
    // Released while still Established: nothing happens now...
    assert_eq!(s.input(Input::Start), vec![]);
    assert_eq!(s.session.state(), State::Established);
    // ...but its end is followed by the usual retry.
    s.at(secs(1));
    s.message(Message::Notification(Notification::admin_reset("bye")));
    assert_eq!(s.session.state(), State::Idle);
    assert!(
        s.session.next_retry().is_some(),
        "the automatic restart is back"
    );
    assert!(s.session.accepts(true));
}

#[test]
fn a_hold_stops_an_attempt_under_way_with_a_cease_once_our_open_is_out() {
    // Connect, not yet connected: the dial is abandoned, nothing sent.
    let mut s = Script::new(config());
    s.input(Input::Start);
    let a = s.input(hold());
    assert_eq!(s.session.state(), State::Idle);
    assert!(
        a.contains(&Action::CloseConnection { notify: false }),
        "{a:?}"
    );
    assert!(notifications(&a).is_empty());
    assert!(matches!(
        s.session.stats().last_error,
        Some(SessionError::Stopped(StopReason::Held(_)))
    ));
    assert!(s.run_until(secs(600)).is_empty(), "nothing more while held");

    // OpenSent: Cease/Administrative Shutdown (6/2) with the message, then Idle.
    let mut s = Script::new(config());
    s.input(Input::Start);
    s.input(Input::TcpConnected { inbound: false });
    assert_eq!(s.session.state(), State::OpenSent);
    let a = s.input(hold());
    let n = notifications(&a);
    assert_eq!(n.len(), 1, "{a:?}");
    assert_eq!((n[0].0, n[0].1), (6, 2));
    assert_eq!(&n[0].2[1..], b"held", "RFC 9003: length, then the message");
    assert!(a.contains(&Action::CloseConnection { notify: true }));
    assert_eq!(s.session.state(), State::Idle);
    assert_eq!(s.session.next_retry(), None);

    // OpenConfirm likewise.
    let mut s = Script::new(config());
    s.input(Input::Start);
    s.input(Input::TcpConnected { inbound: false });
    s.message(Message::Open(peer_open()));
    assert_eq!(s.session.state(), State::OpenConfirm);
    let n = notifications(&s.input(hold()));
    assert_eq!((n[0].0, n[0].1), (6, 2));
    assert_eq!(s.session.state(), State::Idle);
}

#[test]
fn a_hold_in_idle_cancels_the_pending_retry_and_a_passive_session_stops_listening() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    s.input(Input::TcpFailed);
    assert!(s.session.next_retry().is_some());
    s.input(hold());
    assert_eq!(s.session.next_retry(), None);
    assert_eq!(s.session.poll_timeout(), None);

    let mut cfg = config();
    cfg.passive = true;
    let mut s = Script::new(cfg);
    s.input(Input::Start);
    assert_eq!(s.session.state(), State::Active);
    s.input(hold());
    assert_eq!(s.session.state(), State::Idle);
    assert!(!s.session.accepts(true), "no inbound connection adopted");
    s.input(Input::Start);
    assert_eq!(
        s.session.state(),
        State::Active,
        "released: waits for the peer again"
    );
}

#[test]
fn a_session_never_started_stays_idle_under_a_hold_until_released() {
    let mut s = Script::new(config());
    assert_eq!(s.input(hold()), vec![]);
    assert_eq!(s.session.state(), State::Idle);
    assert!(!s.session.accepts(true));
    let a = s.input(Input::Start);
    assert!(a.contains(&Action::Connect));
}
