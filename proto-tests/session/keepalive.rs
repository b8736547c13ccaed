//! KEEPALIVE timing (RFC 4271 sections 4.4, 8.2.2, 10): every third of the negotiated
//! hold time or the configured interval if shorter, restarted by every KEEPALIVE or UPDATE
//! we send, and sustained for as long as the peer answers.

use crate::harness::*;
use podcidr_speaker::bgp::session::{Input, SessionConfig, State, Timer};
use podcidr_speaker::bgp::wire::Message;
use std::time::Duration;

fn keepalive_times(net: &Net, i: usize) -> Vec<Duration> {
    net.log[i]
        .iter()
        .filter(|(_, a)| *a == podcidr_speaker::bgp::session::Action::Send(Message::Keepalive))
        .map(|(t, _)| *t)
        .collect()
}

#[test]
fn two_sessions_keep_each_other_alive_every_30s_for_an_hour() {
    let mut net = Net::pair(config(), peer_config());
    net.start_all();
    net.run_until(secs(3600));
    assert_eq!(net.state(0), State::Established);
    assert_eq!(net.state(1), State::Established);
    let times = keepalive_times(&net, 0);
    // One in answer to the OPEN at t=0, then every 30s.
    let want: Vec<Duration> = (0..=120).map(|k| secs(30 * k)).collect();
    assert_eq!(times, want);
    assert_eq!(net.sessions[0].stats().flaps, 0);
}

#[test]
fn configured_keepalive_shorter_than_a_third_is_used() {
    let cfg = SessionConfig {
        keepalive: Some(10),
        ..config()
    };
    let mut s = Script::new(cfg);
    s.establish();
    assert_eq!(s.session.negotiated().unwrap().keepalive, 10);
    let fired = s.run_until(secs(35));
    let times: Vec<_> = fired
        .iter()
        .filter(|(_, a)| *a == podcidr_speaker::bgp::session::Action::Send(Message::Keepalive))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(times, vec![secs(10), secs(20), secs(30)]);
}

#[test]
fn configured_keepalive_is_capped_at_a_third_of_the_negotiated_hold() {
    let cfg = SessionConfig {
        keepalive: Some(60),
        ..config()
    };
    let mut s = Script::new(cfg);
    let mut open = peer_open();
    open.hold_time = 15;
    s.establish_with(open);
    assert_eq!(s.session.negotiated().unwrap().keepalive, 5);
    assert_eq!(s.session.deadline(Timer::Keepalive), Some(s.t0 + secs(5)));
}

#[test]
fn sending_an_update_restarts_the_keepalive_timer() {
    let mut s = Script::new(config());
    s.establish();
    assert_eq!(s.session.deadline(Timer::Keepalive), Some(s.t0 + secs(30)));
    s.at(secs(20));
    s.input(Input::Updates(vec![announce_v4(&["10.1.0.0/24"])]));
    assert_eq!(s.session.deadline(Timer::Keepalive), Some(s.t0 + secs(50)));
    let fired = s.run_until(secs(49));
    assert!(fired.is_empty(), "no keepalive before 50s: {fired:?}");
}
