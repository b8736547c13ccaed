//! Connection collisions (RFC 4271 section 6.8, RFC 4724 section 4.2), with each speaker
//! running one session per connection and `detect_collision` deciding, as the peer driver
//! does.

use crate::harness::*;
use podcidr_speaker::bgp::session::{
    detect_collision, Action, Collision, Input, Session, SessionConfig, SessionError, Side, State,
    StopReason,
};
use podcidr_speaker::bgp::wire::Message;

fn passive(cfg: SessionConfig) -> SessionConfig {
    SessionConfig {
        passive: true,
        ..cfg
    }
}

fn sent_cease_7(actions: &[Action]) -> bool {
    notifications(actions).contains(&(6, 7, vec![]))
}

#[test]
fn both_speakers_dial_and_both_keep_the_connection_of_the_higher_identifier() {
    // 0: our long-lived session (dials), 1: ours for the peer's connection,
    // 2: the peer's long-lived session (dials), 3: the peer's for our connection.
    let ours = config();
    let theirs = SessionConfig {
        passive: false,
        ..peer_config()
    };
    let mut net = Net::new(vec![
        ours.clone(),
        passive(ours),
        theirs.clone(),
        passive(theirs),
    ]);
    net.dials[0] = Some(3); // connection X: ours -> theirs
    net.dials[2] = Some(1); // connection Y: theirs -> ours
    net.collision_pairs = vec![(0, 1), (2, 3)];
    net.start_all();

    // The peer's identifier is higher: both speakers keep Y, the one the peer opened.
    assert_eq!(net.state(1), State::Established, "ours on Y");
    assert_eq!(net.state(2), State::Established, "theirs on Y");
    assert_eq!(net.state(0), State::Idle, "ours on X closed");
    assert_eq!(net.state(3), State::Idle, "theirs on X closed");
    assert!(
        sent_cease_7(&net.actions(0)) || sent_cease_7(&net.actions(3)),
        "X is closed with Cease/Connection Collision Resolution"
    );
    assert!(!sent_cease_7(&net.actions(1)) && !sent_cease_7(&net.actions(2)));
    assert_eq!(
        net.sessions[0].stats().last_error,
        Some(SessionError::Stopped(StopReason::CollisionResolution))
    );
    // The loser does not come back on its own: the winner carries the peering.
    net.run_until(secs(600));
    assert_eq!(net.state(0), State::Idle);
    assert_eq!(net.state(1), State::Established);
}

#[test]
fn when_ours_is_higher_both_keep_our_connection() {
    let ours = SessionConfig {
        router_id: std::net::Ipv4Addr::new(203, 0, 113, 9),
        ..config()
    };
    let theirs = SessionConfig {
        passive: false,
        ..peer_config()
    };
    let mut net = Net::new(vec![
        ours.clone(),
        passive(ours),
        theirs.clone(),
        passive(theirs),
    ]);
    net.dials[0] = Some(3);
    net.dials[2] = Some(1);
    net.collision_pairs = vec![(0, 1), (2, 3)];
    net.start_all();
    assert_eq!(net.state(0), State::Established);
    assert_eq!(net.state(3), State::Established);
    assert_eq!(net.state(1), State::Idle);
    assert_eq!(net.state(2), State::Idle);
}

/// Our established session (0) with the peer (1); then the peer dials again from another
/// session (2) to our collision candidate (3).
fn established_then_new_connection(ours: SessionConfig, theirs: SessionConfig) -> Net {
    let mut net = Net::new(vec![
        ours.clone(),
        theirs.clone(),
        SessionConfig {
            passive: false,
            ..theirs
        },
        passive(ours),
    ]);
    net.dials[0] = Some(1);
    net.collision_pairs = vec![(0, 3)];
    net.input(1, Input::Start);
    net.input(3, Input::Start);
    net.input(0, Input::Start);
    assert_eq!(net.state(0), State::Established);
    net.dials[2] = Some(3);
    net.input(2, Input::Start);
    net
}

#[test]
fn established_session_wins_against_a_new_connection() {
    let net = established_then_new_connection(config(), peer_config());
    assert_eq!(net.state(0), State::Established);
    assert_eq!(net.state(3), State::Idle);
    assert!(sent_cease_7(&net.actions(3)));
    assert!(!net
        .actions(0)
        .iter()
        .any(|a| matches!(a, Action::Down { .. })));
}

#[test]
fn graceful_restart_peer_reconnecting_replaces_the_established_session() {
    let gr = Some(podcidr_speaker::bgp::session::GrConfig {
        restart_time: 120,
        forwarding_preserved: true,
    });
    let ours = SessionConfig {
        graceful_restart: gr,
        ..config()
    };
    let theirs = SessionConfig {
        graceful_restart: gr,
        ..peer_config()
    };
    let mut net = established_then_new_connection(ours, theirs);
    // RFC 4724 section 4.2: the new connection means the peer restarted; the old one is
    // closed without a NOTIFICATION.
    assert_eq!(net.state(0), State::Idle);
    assert_eq!(net.state(3), State::Established);
    let old = net.actions(0);
    assert!(notifications(&old).is_empty(), "{old:?}");
    assert!(old.contains(&Action::CloseConnection { notify: false }));
    assert!(old.contains(&Action::Down {
        reason: SessionError::Stopped(StopReason::PeerRestarted)
    }));
    // The driver promotes the winner and keeps the history.
    let old = net.sessions[0].clone();
    net.sessions[3].inherit_history(&old);
    let stats = net.sessions[3].stats();
    assert_eq!(stats.flaps, 1);
    assert_eq!(stats.established_count, 2);
}

fn in_openconfirm(cfg: SessionConfig, inbound: bool) -> Session {
    let mut s = Session::new(cfg).unwrap();
    let now = std::time::Instant::now();
    s.handle(now, Input::Start);
    s.handle(now, Input::TcpConnected { inbound });
    s.handle(now, Input::Message(Message::Open(peer_open())));
    assert_eq!(s.state(), State::OpenConfirm);
    s
}

#[test]
fn two_connections_opened_by_the_same_side_close_the_newer() {
    let a = in_openconfirm(passive(config()), true);
    let b = in_openconfirm(passive(config()), true);
    assert_eq!(
        detect_collision(&a, &b),
        Some(Collision {
            close: Side::New,
            reason: StopReason::CollisionResolution
        })
    );
}

#[test]
fn no_decision_before_an_open_is_seen() {
    let now = std::time::Instant::now();
    let mut a = Session::new(config()).unwrap();
    a.handle(now, Input::Start);
    a.handle(now, Input::TcpConnected { inbound: false });
    let mut b = Session::new(passive(config())).unwrap();
    b.handle(now, Input::Start);
    b.handle(now, Input::TcpConnected { inbound: true });
    assert_eq!(a.state(), State::OpenSent);
    assert_eq!(detect_collision(&a, &b), None);
    // One OPEN is enough: the identifier is the peer's on both connections. Ours is lower,
    // so the peer's connection (b, inbound) stays.
    b.handle(now, Input::Message(Message::Open(peer_open())));
    assert_eq!(
        detect_collision(&a, &b).map(|c| c.close),
        Some(Side::Existing)
    );
    let idle = Session::new(config()).unwrap();
    assert_eq!(
        detect_collision(&idle, &b),
        None,
        "no connection, no collision"
    );
}

#[test]
fn inbound_session_holds_the_connection_and_later_dials_like_any_session() {
    let mut s = Session::inbound(config(), std::time::Instant::now()).unwrap();
    assert_eq!(s.state(), State::OpenSent);
    assert_eq!(s.connection_inbound(), Some(true));
    let a: Vec<Action> = std::iter::from_fn(|| s.poll_action()).collect();
    assert_eq!(
        a,
        vec![
            Action::StateChange {
                from: State::Idle,
                to: State::Active
            },
            Action::Send(Message::Open(s.local_open().clone())),
            Action::StateChange {
                from: State::Active,
                to: State::OpenSent
            },
        ],
        "no dial for a connection that is already there"
    );
    // Promoted to the long-lived session, it reconnects on its own after a failure.
    let now = std::time::Instant::now();
    s.handle(now, Input::TcpClosed);
    let restart = s.deadline(podcidr_speaker::bgp::session::Timer::IdleHold);
    assert!(restart.is_some());
    s.handle(restart.unwrap(), Input::Timeout);
    let a: Vec<Action> = std::iter::from_fn(|| s.poll_action()).collect();
    assert!(a.contains(&Action::Connect), "{a:?}");
}

#[test]
fn collision_loser_sends_cease_7_and_stays_down() {
    let mut s = in_openconfirm(config(), false);
    let now = std::time::Instant::now();
    s.handle(
        now,
        Input::Stop {
            reason: StopReason::CollisionResolution,
        },
    );
    let a: Vec<Action> = std::iter::from_fn(|| s.poll_action()).collect();
    assert_eq!(notifications(&a), vec![(6, 7, vec![])]);
    assert!(a.contains(&Action::CloseConnection { notify: true }));
    assert_eq!(s.state(), State::Idle);
    assert_eq!(s.poll_timeout(), None, "no automatic restart");
}
