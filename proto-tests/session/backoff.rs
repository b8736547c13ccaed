//! Retries (RFC 4271 sections 8.1.1 and 10): the ConnectRetry timer abandons a hanging
//! dial, failures back off exponentially with 75-100% jitter up to two minutes, a stable
//! session resets the backoff, and a passive session listens again at once.

use crate::harness::*;
use podcidr_speaker::bgp::session::{Action, Input, SessionConfig, SessionError, State, Timer};
use podcidr_speaker::bgp::wire::Message;
use std::time::Duration;

fn within(d: Duration, nominal: Duration) -> bool {
    d >= nominal * 3 / 4 && d <= nominal
}

#[test]
fn refused_dials_back_off_exponentially_up_to_two_minutes() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    let mut waits = Vec::new();
    for _ in 0..8 {
        let a = s.input(Input::TcpFailed);
        assert!(a.contains(&Action::StateChange {
            from: State::Connect,
            to: State::Idle
        }));
        let restart = s.session.deadline(Timer::IdleHold).expect("restart armed");
        waits.push(restart - s.now);
        let fired = s.run_until(restart - s.t0);
        assert_eq!(fired.last().map(|(_, a)| a.clone()), Some(Action::Connect));
    }
    let nominal = [5, 10, 20, 40, 80, 120, 120, 120];
    for (wait, n) in waits.iter().zip(nominal) {
        assert!(within(*wait, secs(n)), "waits {waits:?}");
    }
    assert_eq!(s.session.consecutive_failures(), 8);
    assert_eq!(
        s.session.stats().last_error,
        Some(SessionError::ConnectionFailed)
    );
}

#[test]
fn hanging_dial_is_abandoned_and_retried_with_growing_timeouts() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    let fired = s.run_until(secs(60));
    let dials: Vec<Duration> = fired
        .iter()
        .filter(|(_, a)| *a == Action::Connect)
        .map(|(t, _)| *t)
        .collect();
    // The first dial was at 0; each abandoned one counts as a failure: nominal gaps 5, 5,
    // 10, 20 (each jittered down to no less than 75%).
    assert!(dials.len() >= 4, "{dials:?}");
    let mut last = Duration::ZERO;
    for (dial, nominal) in dials.iter().zip([5u64, 5, 10, 20]) {
        assert!(within(*dial - last, secs(nominal)), "{dials:?}");
        last = *dial;
    }
    assert_eq!(s.session.state(), State::Connect, "still trying");
}

#[test]
fn a_stable_session_resets_the_backoff_a_flapping_one_does_not() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    for _ in 0..3 {
        s.input(Input::TcpFailed);
        let restart = s.session.deadline(Timer::IdleHold).unwrap();
        s.run_until(restart - s.t0);
    }
    assert_eq!(s.session.consecutive_failures(), 3);

    // Up for a second only: the failures keep counting.
    s.input(Input::TcpConnected { inbound: false });
    s.message(Message::Open(peer_open()));
    s.message(Message::Keepalive);
    let up = s.elapsed();
    s.at(up + secs(1));
    s.input(Input::TcpClosed);
    assert_eq!(s.session.consecutive_failures(), 4);

    // Up for ten minutes: the next attempt is quick again.
    let restart = s.session.deadline(Timer::IdleHold).unwrap();
    s.run_until(restart - s.t0);
    s.input(Input::TcpConnected { inbound: false });
    s.message(Message::Open(peer_open()));
    s.message(Message::Keepalive);
    let up = s.elapsed();
    for k in 1..=20 {
        s.at(up + secs(30 * k));
        s.message(Message::Keepalive);
    }
    s.input(Input::TcpClosed);
    assert_eq!(s.session.consecutive_failures(), 1);
    let wait = s.session.deadline(Timer::IdleHold).unwrap() - s.now;
    assert!(within(wait, secs(5)), "{wait:?}");
}

#[test]
fn passive_session_listens_again_at_once() {
    let mut s = Script::new(SessionConfig {
        passive: true,
        ..config()
    });
    s.input(Input::Start);
    s.input(Input::TcpConnected { inbound: true });
    let a = s.input(Input::TcpClosed);
    assert_eq!(
        state_changes(&a),
        vec![(State::OpenSent, State::Idle), (State::Idle, State::Active)]
    );
    assert_eq!(s.session.poll_timeout(), None);
    let a = s.input(Input::TcpConnected { inbound: true });
    assert!(matches!(a[0], Action::Send(Message::Open(_))));
}

#[test]
fn jitter_seed_decides_the_delays() {
    let run = |seed| {
        let mut s = Script::new(SessionConfig {
            jitter_seed: seed,
            ..config()
        });
        s.input(Input::Start);
        s.input(Input::TcpFailed);
        s.session.deadline(Timer::IdleHold).unwrap() - s.now
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}
