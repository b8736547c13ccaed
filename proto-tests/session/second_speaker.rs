//! The second-speaker watch (`bgp::session::second_speaker`) fed as the peer driver feeds
//! it, from sessions talking to each other on the virtual clock: a switch that already
//! has a session with another speaker from our address refuses ours on every retry
//! (FRR's and BIRD's Cease 6/7), and the watch raises the finding; the ordinary
//! collision when both sides dial, and ordinary reconnects, raise nothing. The same rule
//! decides the retry: a refused session tries again within [`REFUSED_RETRY`] however
//! long it has been refused, and every other failure still backs off.

use crate::harness::*;
use podcidr_speaker::bgp::session::{
    Action, Input, SecondSpeakerWatch, SessionConfig, State, StopReason, Timer, WatchEvent,
    WatchInput, FIRST_RETRY, REFUSED_RETRY,
};
use podcidr_speaker::bgp::wire::{CeaseSubcode, Message, Notification};
use std::time::Duration;

/// Feeds `watch` the NOTIFICATIONs our sessions (`ours`) received since index `from`,
/// as the driver does: with the receiving session's state and how many connections of
/// ours were open (the receiving one, and any other of ours past Active). Returns the
/// index to go on from and the watch's events.
fn feed(
    net: &Net,
    ours: &[usize],
    watch: &mut SecondSpeakerWatch,
    from: usize,
) -> (usize, Vec<(Duration, WatchEvent)>) {
    let mut events = Vec::new();
    for r in &net.received_notifications[from..] {
        if !ours.contains(&r.to) {
            continue;
        }
        let own_connections = ours
            .iter()
            .filter(|&&i| {
                i == r.to
                    || matches!(
                        r.states[i],
                        State::OpenSent | State::OpenConfirm | State::Established
                    )
            })
            .count();
        watch.handle(
            net.t0 + r.at,
            WatchInput::Notification {
                code: r.code,
                subcode: r.subcode,
                state: r.states[r.to],
                own_connections,
            },
        );
        events.extend(std::iter::from_fn(|| watch.poll_event()).map(|e| (r.at, e)));
    }
    (net.received_notifications.len(), events)
}

fn tick(net: &Net, watch: &mut SecondSpeakerWatch) -> Vec<(Duration, WatchEvent)> {
    watch.handle(net.now, WatchInput::Tick);
    std::iter::from_fn(|| watch.poll_event())
        .map(|e| (net.elapsed(), e))
        .collect()
}

/// Runs `net` to `until` in steps of 100 ms, feeding and ticking the watch, and
/// starting the passive sessions `relisten` again whenever they are Idle (a switch
/// accepts every new connection). Returns the watch's events.
fn run(
    net: &mut Net,
    ours: &[usize],
    relisten: &[usize],
    watch: &mut SecondSpeakerWatch,
    from: &mut usize,
    until: Duration,
) -> Vec<(Duration, WatchEvent)> {
    let mut events = Vec::new();
    while net.elapsed() < until {
        for &i in relisten {
            if net.state(i) == State::Idle {
                net.input(i, Input::Start);
            }
        }
        let (next, e) = feed(net, ours, watch, *from);
        *from = next;
        events.extend(e);
        events.extend(tick(net, watch));
        let step = net.elapsed() + Duration::from_millis(100);
        net.run_until(step);
    }
    let (next, e) = feed(net, ours, watch, *from);
    *from = next;
    events.extend(e);
    events
}

fn signs(events: &[(Duration, WatchEvent)]) -> Vec<Duration> {
    events
        .iter()
        .filter(|(_, e)| matches!(e, WatchEvent::Sign { .. }))
        .map(|(t, _)| *t)
        .collect()
}

#[test]
fn a_switch_holding_another_speakers_session_refuses_ours_and_the_watch_raises_it() {
    // 0: ours, dialing the switch. 2: another speaker from our address (same AS and
    // identifier, as Cilium's embedded speaker on the node would have), Established
    // with the switch's session 1 first. 3: the switch's session for each new
    // connection from our address; the switch resolves 1 against 3 (RFC 4271 6.8).
    let other = SessionConfig {
        jitter_seed: 0x0de1,
        ..config()
    };
    let mut net = Net::new(vec![config(), peer_config(), other, peer_config()]);
    net.dials[2] = Some(1);
    net.dials[0] = Some(3);
    net.collision_pairs = vec![(1, 3)];
    net.input(1, Input::Start);
    net.input(2, Input::Start);
    assert_eq!(net.state(1), State::Established);

    let mut watch = SecondSpeakerWatch::new(config().connect_retry);
    let mut from = 0;
    net.input(3, Input::Start);
    net.input(0, Input::Start);
    let events = run(&mut net, &[0], &[3], &mut watch, &mut from, secs(30));

    // Refused on every retry with Cease 6/7, the other speaker's session untouched.
    let refused = signs(&events);
    assert!(refused.len() >= 5, "{events:?}");
    assert!(net
        .received_notifications
        .iter()
        .filter(|r| r.to == 0)
        .all(|r| (r.code, r.subcode) == (6, 7)));
    assert_eq!(net.state(1), State::Established);
    assert_eq!(net.sessions[1].stats().flaps, 0);
    // Raised at the third refusal, within seconds (the backoff's 1 s, 2 s...).
    let raised: Vec<_> = events
        .iter()
        .filter_map(|(t, e)| match e {
            WatchEvent::Suspected(f) => Some((*t, *f)),
            _ => None,
        })
        .collect();
    let (at, first) = raised[0];
    assert_eq!(at, refused[2]);
    assert!(at < secs(10), "raised at {at:?}");
    assert_eq!((first.signs, first.last_subcode), (3, 7));
    assert_eq!(first.since, net.t0 + at);
    assert!(watch.finding().is_some());

    // The other speaker goes away: ours comes up, no more refusals, and the finding
    // clears once the quiet period has passed since the last one.
    let last = *refused.last().unwrap();
    net.input(
        2,
        Input::Stop {
            reason: StopReason::AdminShutdown(String::new()),
        },
    );
    let events = run(&mut net, &[0], &[3], &mut watch, &mut from, secs(60));
    assert_eq!(net.state(0), State::Established);
    assert!(signs(&events).is_empty(), "{events:?}");
    assert!(watch.finding().is_some(), "not quiet long enough yet");
    let quiet = watch.poll_timeout().expect("a clearing deadline");
    assert_eq!(quiet, net.t0 + last + Duration::from_secs(600));
    let events = run(
        &mut net,
        &[0],
        &[3],
        &mut watch,
        &mut from,
        last + Duration::from_secs(601),
    );
    assert_eq!(
        events.iter().map(|(_, e)| *e).collect::<Vec<_>>(),
        [WatchEvent::Cleared]
    );
    assert_eq!(net.state(0), State::Established);
}

#[test]
fn the_collision_of_both_sides_dialing_is_ours_and_raises_nothing() {
    // Our identifier is the higher: both keep our connection, and the switch closes
    // the one it opened to us with Cease 6/7 while ours is up.
    let ours = SessionConfig {
        router_id: std::net::Ipv4Addr::new(203, 0, 113, 9),
        ..config()
    };
    // The switch's long-lived session (0) dials, its session for our connection (1)
    // answers; ours does the same (2 dials, 3 answers): the start-up collision of an
    // active switch and a speaker that listens, again after each of several resets.
    let theirs = SessionConfig {
        passive: false,
        ..peer_config()
    };
    let passive = |c: SessionConfig| SessionConfig { passive: true, ..c };
    let mut net = Net::new(vec![
        theirs.clone(),
        passive(theirs),
        ours.clone(),
        passive(ours),
    ]);
    net.dials[0] = Some(3);
    net.dials[2] = Some(1);
    // The switch resolves first (its pair is checked first): it closes the connection
    // it opened with Cease 6/7, on our side while our own connection is up.
    net.collision_pairs = vec![(0, 1), (2, 3)];
    let mut watch = SecondSpeakerWatch::new(config().connect_retry);
    let mut from = 0;
    let mut events = Vec::new();
    for round in 0..5u64 {
        // All at once, so that both dials are up before either side sees an OPEN
        // (Start is ignored outside Idle).
        net.start_all();
        let until = secs(10 * (round + 1));
        events.extend(run(&mut net, &[2, 3], &[], &mut watch, &mut from, until));
        assert_eq!(net.state(2), State::Established, "round {round}");
        // The switch resets the session (an operator's clear).
        net.input(
            1,
            Input::Stop {
                reason: StopReason::AdminShutdown(String::new()),
            },
        );
    }
    // Ceases 6/7 did arrive on our connections: each while our other one was open.
    let cease_7 = net
        .received_notifications
        .iter()
        .filter(|r| r.to >= 2 && (r.code, r.subcode) == (6, 7))
        .count();
    assert!(cease_7 >= 5, "{:?}", net.received_notifications);
    assert!(signs(&events).is_empty(), "{events:?}");
    assert_eq!(watch.finding(), None);
}

#[test]
fn ordinary_resets_and_reconnects_raise_nothing() {
    // The switch resets the session five times in a minute (Cease 6/4 each time).
    let mut net = Net::pair(config(), peer_config());
    net.input(1, Input::Start);
    net.input(0, Input::Start);
    let mut watch = SecondSpeakerWatch::new(config().connect_retry);
    let mut from = 0;
    let mut events = Vec::new();
    for round in 0..5u64 {
        events.extend(run(
            &mut net,
            &[0],
            &[1],
            &mut watch,
            &mut from,
            secs(12 * (round + 1)),
        ));
        assert_eq!(net.state(0), State::Established, "round {round}");
        net.input(
            1,
            Input::Stop {
                reason: StopReason::AdminReset(String::new()),
            },
        );
    }
    let resets = net
        .received_notifications
        .iter()
        .filter(|r| r.to == 0 && (r.code, r.subcode) == (6, 4))
        .count();
    assert_eq!(resets, 5);
    assert!(events.is_empty(), "{events:?}");
}

/// A NOTIFICATION received by `s` in its current state, handed in as the peer driver
/// does: as [`Input::Refusal`] when the second-speaker rule counts it, else as a message.
fn deliver(s: &mut Script, n: Notification, own_connections: usize) -> Input {
    let seen = WatchInput::Notification {
        code: n.code,
        subcode: n.subcode,
        state: s.session.state(),
        own_connections,
    };
    if seen.is_sign() {
        Input::Refusal(n)
    } else {
        Input::Message(Message::Notification(n))
    }
}

/// Dials (at the retry, if one is due), has `end` end the attempt; returns
/// the wait the session then armed before its next dial.
fn attempt(s: &mut Script, end: impl FnOnce(&mut Script) -> Input) -> Duration {
    if let Some(due) = s.session.next_retry() {
        let fired = s.run_until(due - s.t0);
        assert_eq!(fired.last().map(|(_, a)| a.clone()), Some(Action::Connect));
    }
    assert_eq!(s.session.state(), State::Connect);
    let input = end(s);
    let a = s.input(input);
    assert_eq!(s.session.state(), State::Idle, "{a:?}");
    let retry = s.session.next_retry().expect("waiting to retry");
    assert_eq!(s.session.deadline(Timer::IdleHold), Some(retry));
    retry - s.now
}

/// Connected, our OPEN out; the switch answers with this Cease.
fn refused_with(
    subcode: CeaseSubcode,
    own_connections: usize,
) -> impl FnOnce(&mut Script) -> Input {
    move |s: &mut Script| {
        s.input(Input::TcpConnected { inbound: false });
        assert_eq!(s.session.state(), State::OpenSent);
        deliver(s, Notification::cease(subcode), own_connections)
    }
}

fn dial_failed(_: &mut Script) -> Input {
    Input::TcpFailed
}

fn between(d: Duration, lo: Duration, hi: Duration) -> bool {
    d >= lo && d <= hi
}

#[test]
fn a_refused_session_retries_within_a_few_seconds_however_long_it_is_refused() {
    // The default ConnectRetryTime: what the backoff would climb to.
    let mut s = Script::new(SessionConfig {
        connect_retry: secs(120),
        ..config()
    });
    s.input(Input::Start);
    let mut watch = SecondSpeakerWatch::new(secs(120));
    let collision = CeaseSubcode::ConnectionCollisionResolution;
    let mut waits = Vec::new();
    for i in 0..200 {
        // FRR's and BIRD's 6/7, a switch's 6/5, and 6/6 before Established.
        let subcode = match i % 3 {
            0 => collision,
            1 => CeaseSubcode::ConnectionRejected,
            _ => CeaseSubcode::OtherConfigurationChange,
        };
        waits.push(attempt(&mut s, refused_with(subcode, 1)));
        watch.handle(
            s.now,
            WatchInput::Notification {
                code: 6,
                subcode: subcode.code(),
                state: State::OpenSent,
                own_connections: 1,
            },
        );
    }
    // The first two as quick as the backoff's (a switch still tearing a session down
    // refuses for a moment), then never more than REFUSED_RETRY: about ten minutes of
    // refusals, and the next attempt is still at most 3 s away.
    assert!(
        between(waits[0], FIRST_RETRY * 3 / 4, FIRST_RETRY),
        "{waits:?}"
    );
    assert!(between(waits[1], secs(2) * 3 / 4, secs(2)), "{waits:?}");
    assert!(
        waits[2..]
            .iter()
            .all(|w| between(*w, REFUSED_RETRY * 3 / 4, REFUSED_RETRY)),
        "{waits:?}"
    );
    assert!(s.elapsed() > secs(450), "{:?}", s.elapsed());
    assert!(
        watch.finding().is_some(),
        "the same refusals raise the finding"
    );
    assert_eq!(s.session.consecutive_failures(), 3, "held at the 3 s step");
    assert_eq!(
        s.session.stats().received.notification,
        200,
        "each refusal is a NOTIFICATION received"
    );

    // The other speaker leaves: the next attempt, due within REFUSED_RETRY of the last
    // refusal, gets in.
    let last_refusal = s.now;
    let fired = s.run_until(s.session.poll_timeout().unwrap() - s.t0);
    assert_eq!(fired.last().map(|(_, a)| a.clone()), Some(Action::Connect));
    s.input(Input::TcpConnected { inbound: false });
    s.message(Message::Open(peer_open()));
    s.message(Message::Keepalive);
    assert_eq!(s.session.state(), State::Established);
    assert!(s.now - last_refusal <= REFUSED_RETRY);
}

#[test]
fn other_failures_still_back_off_before_during_and_after_refusals() {
    let mut s = Script::new(SessionConfig {
        connect_retry: secs(120),
        ..config()
    });
    s.input(Input::Start);
    let collision = CeaseSubcode::ConnectionCollisionResolution;
    // Dials refused by TCP, and the collision of both sides dialing (a second
    // connection of ours open): doubling, 1, 2, 4, 8, 16 s.
    let mut waits = Vec::new();
    for _ in 0..3 {
        waits.push(attempt(&mut s, dial_failed));
    }
    for _ in 0..2 {
        waits.push(attempt(&mut s, refused_with(collision, 2)));
    }
    for (w, n) in waits.iter().zip([1, 2, 4, 8, 16]) {
        assert!(between(*w, secs(n) * 3 / 4, secs(n)), "{waits:?}");
    }
    // Refused by a switch that holds another speaker's session, after a backoff at
    // 16 s: the retry comes within REFUSED_RETRY all the same.
    for _ in 0..20 {
        let w = attempt(&mut s, refused_with(collision, 1));
        assert!(between(w, REFUSED_RETRY * 3 / 4, REFUSED_RETRY), "{w:?}");
    }
    // Then dials refused by TCP (the switch gone, say): the doubling resumes from the
    // refusals' step, 8, 16, 32, 64 s, up to the ConnectRetryTime.
    let waits: Vec<Duration> = (0..6).map(|_| attempt(&mut s, dial_failed)).collect();
    for (w, n) in waits.iter().zip([8, 16, 32, 64, 120, 120]) {
        assert!(between(*w, secs(n) * 3 / 4, secs(n)), "{waits:?}");
    }
    // Cease 6/6 on an Established session is an operator's change, not a refusal:
    // the backoff (at its cap: the session was not up for a minute) applies.
    s.run_until(s.session.poll_timeout().unwrap() - s.t0);
    s.input(Input::TcpConnected { inbound: false });
    s.message(Message::Open(peer_open()));
    s.message(Message::Keepalive);
    assert_eq!(s.session.state(), State::Established);
    let input = deliver(
        &mut s,
        Notification::cease(CeaseSubcode::OtherConfigurationChange),
        1,
    );
    assert!(matches!(input, Input::Message(_)), "{input:?}");
    s.input(input);
    let w = s.session.next_retry().unwrap() - s.now;
    assert!(between(w, secs(90), secs(120)), "{w:?}");
}

#[test]
fn a_connect_retry_time_below_the_refusal_wait_caps_it() {
    let mut s = Script::new(SessionConfig {
        connect_retry: secs(1),
        ..config()
    });
    s.input(Input::Start);
    for _ in 0..10 {
        let w = attempt(
            &mut s,
            refused_with(CeaseSubcode::ConnectionCollisionResolution, 1),
        );
        assert!(between(w, secs(1) * 3 / 4, secs(1)), "{w:?}");
    }
}
