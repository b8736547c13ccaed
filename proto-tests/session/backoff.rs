//! Retries (RFC 4271 sections 8.1.1 and 10): after a failure the session waits about a
//! second, then twice as long after each further failure, up to the ConnectRetryTime
//! (the cap, never the first step), each wait jittered to 75-100%; a session that stayed
//! Established for a while starts from the first step again, one that flaps keeps
//! climbing; a dial that hangs fails after the ConnectRetryTime; a connection the peer
//! opens while the session waits to retry is adopted, never reset; a passive session
//! listens again at once.

use crate::harness::*;
use podcidr_speaker::bgp::session::{
    Action, Input, SessionConfig, SessionError, State, StopReason, Timer, FIRST_RETRY,
    STABLE_ESTABLISHED,
};
use podcidr_speaker::bgp::wire::{CeaseSubcode, Message, Notification};
use std::time::Duration;

fn within(d: Duration, nominal: Duration) -> bool {
    d >= nominal * 3 / 4 && d <= nominal
}

/// The harness's session with a ConnectRetryTime of 30 s, so that several doublings
/// fit below the cap.
fn cap30() -> SessionConfig {
    SessionConfig {
        connect_retry: secs(30),
        ..config()
    }
}

/// Feeds `failure` (which must end the attempt), then runs to the end of the wait in
/// Idle and checks that the session dials again there; returns the wait.
fn fail_and_wait(s: &mut Script, failure: Input) -> Duration {
    let a = s.input(failure);
    assert_eq!(s.session.state(), State::Idle, "{a:?}");
    let restart = s.session.deadline(Timer::IdleHold).expect("restart armed");
    assert_eq!(
        s.session.next_retry(),
        Some(restart),
        "status shows the retry"
    );
    let wait = restart - s.now;
    let fired = s.run_until(restart - s.t0);
    assert_eq!(fired.last().map(|(_, a)| a.clone()), Some(Action::Connect));
    assert_eq!(s.session.next_retry(), None, "dialing, not waiting");
    wait
}

#[test]
fn refused_dials_retry_after_a_second_then_back_off_to_the_connect_retry_time() {
    let mut s = Script::new(cap30());
    s.input(Input::Start);
    let waits: Vec<Duration> = (0..9)
        .map(|_| fail_and_wait(&mut s, Input::TcpFailed))
        .collect();
    let nominal = [1, 2, 4, 8, 16, 30, 30, 30, 30];
    for (wait, n) in waits.iter().zip(nominal) {
        assert!(within(*wait, secs(n)), "waits {waits:?}");
    }
    // The jitter is drawn afresh for every wait: steps at the cap differ.
    assert!(waits[5..].windows(2).any(|w| w[0] != w[1]), "{waits:?}");
    assert_eq!(s.session.consecutive_failures(), 9);
    assert_eq!(
        s.session.stats().last_error,
        Some(SessionError::ConnectionFailed)
    );
}

/// The default ConnectRetryTime (120 s) is the cap only: the first retries are as quick
/// as with a short one.
#[test]
fn the_connect_retry_time_caps_the_wait_and_never_lengthens_the_first() {
    for cap in [1u64, 5, 120, 65535] {
        let mut s = Script::new(SessionConfig {
            connect_retry: secs(cap),
            ..config()
        });
        s.input(Input::Start);
        let first = fail_and_wait(&mut s, Input::TcpFailed);
        assert!(
            within(first, FIRST_RETRY.min(secs(cap))),
            "cap {cap}: {first:?}"
        );
        let mut last = first;
        for _ in 0..20 {
            last = fail_and_wait(&mut s, Input::TcpFailed);
            assert!(last <= secs(cap), "cap {cap}: {last:?}");
        }
        assert!(within(last, secs(cap)), "cap {cap}: reached {last:?}");
    }
}

/// A peer still tearing the last session down turns us away in several ways (FRR closes
/// the connection before its OPEN, others reset it, or answer with Cease Connection
/// Rejected or Collision Resolution): each is retried after about a second the first
/// time, and backs off like any failure after that. (The driver hands such a Cease in
/// as `Input::Refusal` when no second connection of ours explains it: then 1 s, 2 s and
/// at most 3 s after that, see second_speaker.rs.)
#[test]
fn a_peer_still_tearing_down_is_retried_within_a_second_or_two() {
    let cease = |sub: CeaseSubcode| Input::Message(Message::Notification(Notification::cease(sub)));
    let refusals: [(&str, Vec<Input>); 4] = [
        ("closed before its OPEN", vec![Input::TcpClosed]),
        ("reset before its OPEN", vec![Input::TcpFailed]),
        ("Cease 6/5", vec![cease(CeaseSubcode::ConnectionRejected)]),
        (
            "Cease 6/7",
            vec![cease(CeaseSubcode::ConnectionCollisionResolution)],
        ),
    ];
    for (what, inputs) in refusals {
        let mut s = Script::new(config());
        s.input(Input::Start);
        let mut waits = Vec::new();
        for input in inputs.iter().cycle().take(3) {
            s.input(Input::TcpConnected { inbound: false });
            assert_eq!(s.session.state(), State::OpenSent);
            waits.push(fail_and_wait(&mut s, input.clone()));
        }
        assert!(within(waits[0], secs(1)), "{what}: {waits:?}");
        assert!(within(waits[1], secs(2)), "{what}: {waits:?}");
        assert!(within(waits[2], secs(4)), "{what}: {waits:?}");
        // Three refusals cost at most 7 s: a peer that refuses for 5 s after a session
        // ends (GoBGP) has us back within its next second or two.
        assert!(
            waits.iter().sum::<Duration>() <= secs(7),
            "{what}: {waits:?}"
        );
    }
}

#[test]
fn hanging_dial_fails_after_the_connect_retry_time_and_is_retried_with_the_backoff() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    let fired = s.run_until(secs(80));
    let dials: Vec<Duration> = fired
        .iter()
        .filter(|(_, a)| *a == Action::Connect)
        .map(|(t, _)| *t)
        .collect();
    // The first dial was at 0; each is abandoned after the ConnectRetryTime (5 s,
    // jittered) and counts as a failure: the next one follows after 1, 2, 4, 5 s.
    assert!(dials.len() >= 4, "{dials:?}");
    let mut last = Duration::ZERO;
    for (dial, backoff) in dials.iter().zip([1u64, 2, 4, 5]) {
        let gap = *dial - last;
        assert!(
            gap >= secs(5 + backoff) * 3 / 4 && gap <= secs(5 + backoff),
            "{dials:?}"
        );
        last = *dial;
    }
    let closes = fired
        .iter()
        .filter(|(_, a)| *a == Action::CloseConnection { notify: false })
        .count();
    let pending = usize::from(s.session.state() == State::Connect);
    // The dial at 0 came from Start, before `fired`.
    assert_eq!(
        closes + pending,
        dials.len() + 1,
        "every abandoned dial is dropped"
    );
    assert_eq!(
        s.session.stats().last_error,
        Some(SessionError::ConnectionFailed)
    );
}

/// Established for a minute or more: the next retry is a second again. Shorter: the
/// failures keep counting, so a peer that accepts and then drops us is damped up to the
/// ConnectRetryTime.
#[test]
fn a_stable_session_resets_the_backoff_a_flapping_one_does_not() {
    let mut s = Script::new(cap30());
    s.input(Input::Start);
    for _ in 0..3 {
        fail_and_wait(&mut s, Input::TcpFailed);
    }
    assert_eq!(s.session.consecutive_failures(), 3);

    // Up for a second at a time: every flap climbs one step further, to the cap.
    let mut flap_waits = Vec::new();
    for _ in 0..4 {
        s.input(Input::TcpConnected { inbound: false });
        s.message(Message::Open(peer_open()));
        s.message(Message::Keepalive);
        assert_eq!(s.session.state(), State::Established);
        let up = s.elapsed();
        s.at(up + secs(1));
        flap_waits.push(fail_and_wait(&mut s, Input::TcpClosed));
    }
    for (wait, n) in flap_waits.iter().zip([8u64, 16, 30, 30]) {
        assert!(within(*wait, secs(n)), "flaps {flap_waits:?}");
    }
    assert_eq!(s.session.consecutive_failures(), 7);

    // Up for exactly the stable time: the next attempt is quick again.
    s.input(Input::TcpConnected { inbound: false });
    s.message(Message::Open(peer_open()));
    s.message(Message::Keepalive);
    let up = s.elapsed();
    let mut k = 0;
    while secs(3 * k) < STABLE_ESTABLISHED {
        k += 1;
        s.at(up + secs(3 * k));
        s.message(Message::Keepalive);
    }
    assert_eq!(s.session.state(), State::Established);
    let wait = fail_and_wait(&mut s, Input::TcpClosed);
    assert_eq!(s.session.consecutive_failures(), 1);
    assert!(within(wait, secs(1)), "{wait:?}");
    // And the backoff climbs from there as from a first start.
    let wait = fail_and_wait(&mut s, Input::TcpFailed);
    assert!(within(wait, secs(2)), "{wait:?}");
}

/// While the session waits to retry, the peer dials us: the session takes that
/// connection (Idle -> Active -> OpenSent, our OPEN on it) instead of resetting it.
#[test]
fn a_connection_from_the_peer_while_waiting_to_retry_is_adopted() {
    let mut s = Script::new(cap30());
    s.input(Input::Start);
    s.input(Input::TcpFailed);
    let retry = s.session.next_retry().expect("waiting");
    s.at(secs(0) + (retry - s.t0) / 2);
    let a = s.input(Input::TcpConnected { inbound: true });
    assert!(!a.contains(&Action::RejectConnection), "{a:?}");
    assert_eq!(
        state_changes(&a),
        vec![
            (State::Idle, State::Active),
            (State::Active, State::OpenSent)
        ]
    );
    assert!(matches!(sent(&a)[..], [Message::Open(_)]), "{a:?}");
    assert_eq!(s.session.connection_inbound(), Some(true));
    assert_eq!(s.session.next_retry(), None);
    assert_eq!(s.session.deadline(Timer::IdleHold), None, "no dial later");
    s.message(Message::Open(peer_open()));
    s.message(Message::Keepalive);
    assert_eq!(s.session.state(), State::Established);
    // Past the wait it was in, no dial of ours follows (the peer's hold time is 90 s).
    let fired = s.run_until(retry - s.t0 + secs(10));
    assert!(
        !fired.iter().any(|(_, a)| *a == Action::Connect),
        "{fired:?}"
    );
    assert_eq!(s.session.state(), State::Established);
}

/// Only a session that will retry by itself takes a connection in Idle: one that was
/// stopped refuses it, and so does one never started; a late result of our own dial is
/// refused while waiting (the retry will dial again).
#[test]
fn a_stopped_session_still_refuses_connections_in_idle() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    s.input(Input::TcpConnected { inbound: false });
    s.message(Message::Open(peer_open()));
    s.message(Message::Keepalive);
    s.input(Input::Stop {
        reason: StopReason::AdminShutdown("bye".into()),
    });
    assert_eq!(s.session.state(), State::Idle);
    assert_eq!(s.session.next_retry(), None);
    assert!(!s.session.accepts(true));
    let a = s.input(Input::TcpConnected { inbound: true });
    assert_eq!(a, vec![Action::RejectConnection]);

    let mut waiting = Script::new(config());
    waiting.input(Input::Start);
    waiting.input(Input::TcpFailed);
    assert!(waiting.session.accepts(true));
    assert!(!waiting.session.accepts(false));
    let a = waiting.input(Input::TcpConnected { inbound: false });
    assert_eq!(a, vec![Action::RejectConnection]);
    assert_eq!(waiting.session.state(), State::Idle);
    assert!(waiting.session.next_retry().is_some(), "still waiting");
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
    assert_eq!(s.session.next_retry(), None);
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
