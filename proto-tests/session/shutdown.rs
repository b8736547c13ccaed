//! Administrative stops: Cease subcodes 2, 3 and 4 with their RFC 9003 Shutdown
//! Communication, and BFD Down (subcode 10, RFC 9384); what restarts afterwards and what
//! does not.

use crate::harness::*;
use podcidr_speaker::bgp::session::{Action, Input, SessionError, State, StopReason, Timer};
use std::time::Duration;

#[test]
fn admin_shutdown_sends_cease_2_with_the_message() {
    let mut net = Net::pair(config(), peer_config());
    net.start_all();
    let mark = net.log[0].len();
    net.input(
        0,
        Input::Stop {
            reason: StopReason::AdminShutdown("node drained for kernel upgrade".into()),
        },
    );
    let a = net.actions_since(0, mark);
    let mut data = vec![31u8];
    data.extend_from_slice(b"node drained for kernel upgrade");
    assert_eq!(notifications(&a), vec![(6, 2, data)]);
    assert_eq!(a[1], Action::CloseConnection { notify: true });
    assert!(matches!(a.last(), Some(Action::Down { .. })));
    // The peer read the message back.
    let Some(SessionError::NotificationReceived(info)) = &net.sessions[1].stats().last_error else {
        panic!("peer should have received the notification");
    };
    assert_eq!(
        info.message.as_deref(),
        Some("node drained for kernel upgrade")
    );
    // No automatic restart after a shutdown, ever.
    net.run_until(secs(3600));
    assert_eq!(net.state(0), State::Idle);
    assert_eq!(net.sessions[0].poll_timeout(), None);
    // Until the driver starts it again.
    net.input(0, Input::Start);
    assert_eq!(net.state(0), State::Established);
}

#[test]
fn long_shutdown_message_is_cut_at_255_octets_on_a_character_boundary() {
    let mut s = Script::new(config());
    s.establish();
    let long = "ü".repeat(200); // 400 octets
    let a = s.input(Input::Stop {
        reason: StopReason::AdminShutdown(long),
    });
    let (code, subcode, data) = notifications(&a).remove(0);
    assert_eq!((code, subcode), (6, 2));
    assert_eq!(data[0], 254);
    assert_eq!(data.len(), 255);
    assert_eq!(std::str::from_utf8(&data[1..]).unwrap(), "ü".repeat(127));
}

#[test]
fn admin_reset_sends_cease_4_and_comes_back() {
    let mut net = Net::pair(config(), peer_config());
    net.start_all();
    net.input(
        0,
        Input::Stop {
            reason: StopReason::AdminReset("config reload".into()),
        },
    );
    let codes: Vec<_> = notifications(&net.actions(0))
        .into_iter()
        .map(|(c, s, _)| (c, s))
        .collect();
    assert_eq!(codes, vec![(6, 4)]);
    assert_eq!(net.state(0), State::Idle);
    let restart = net.sessions[0]
        .deadline(Timer::IdleHold)
        .expect("reset restarts");
    assert!(restart - net.now <= secs(5));
    net.run_until(secs(5));
    assert_eq!(net.state(0), State::Established);
    assert_eq!(net.sessions[0].stats().established_count, 2);
}

/// RFC 5882 section 3.2 / RFC 9384: the driver stops an Established session whose BFD
/// session failed; the peer reads Cease/BFD Down, and the session comes back under the
/// normal retry, as after any failure.
#[test]
fn bfd_down_sends_cease_10_and_comes_back() {
    let mut net = Net::pair(config(), peer_config());
    net.start_all();
    let mark = net.log[0].len();
    net.input(
        0,
        Input::Stop {
            reason: StopReason::BfdDown,
        },
    );
    let a = net.actions_since(0, mark);
    assert_eq!(notifications(&a), vec![(6, 10, vec![])]);
    assert_eq!(a[1], Action::CloseConnection { notify: true });
    assert_eq!(net.state(0), State::Idle);
    let Some(SessionError::NotificationReceived(info)) = &net.sessions[1].stats().last_error else {
        panic!("peer should have received the notification");
    };
    assert_eq!((info.code, info.subcode), (6, 10));
    assert_eq!(info.description(), "cease: bfd down");
    let restart = net.sessions[0]
        .deadline(Timer::IdleHold)
        .expect("a bfd down restarts");
    assert!(restart - net.now <= secs(5));
    net.run_until(secs(5));
    assert_eq!(net.state(0), State::Established);
    assert_eq!(net.sessions[0].stats().established_count, 2);
}

#[test]
fn peer_deconfigured_is_cease_3() {
    let mut s = Script::new(config());
    s.establish();
    let a = s.input(Input::Stop {
        reason: StopReason::PeerDeconfigured,
    });
    assert_eq!(notifications(&a), vec![(6, 3, vec![])]);
    assert_eq!(s.session.poll_timeout(), None);
}

#[test]
fn stop_while_dialing_abandons_the_dial_without_a_message() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    let a = s.input(Input::Stop {
        reason: StopReason::AdminShutdown("bye".into()),
    });
    assert_eq!(
        a,
        vec![
            Action::CloseConnection { notify: false },
            Action::StateChange {
                from: State::Connect,
                to: State::Idle
            },
        ]
    );
    assert!(sent(&a).is_empty());
    assert_eq!(s.session.poll_timeout(), None);
}

#[test]
fn stop_in_idle_cancels_the_pending_restart() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    s.input(Input::TcpFailed);
    assert!(s.session.deadline(Timer::IdleHold).is_some());
    let a = s.input(Input::Stop {
        reason: StopReason::AdminShutdown(String::new()),
    });
    assert_eq!(a, vec![]);
    assert_eq!(s.session.poll_timeout(), None);
    assert_eq!(s.run_until(Duration::from_secs(600)), vec![]);
    assert_eq!(s.session.state(), State::Idle);
}

#[test]
fn admin_reset_does_not_start_a_stopped_session() {
    let mut s = Script::new(config());
    let a = s.input(Input::Stop {
        reason: StopReason::AdminReset("reload".into()),
    });
    assert_eq!(a, vec![]);
    assert_eq!(s.session.poll_timeout(), None);
    assert_eq!(s.session.state(), State::Idle);
}
