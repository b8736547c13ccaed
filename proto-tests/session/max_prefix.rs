//! Received-prefix accounting and the max-prefix limit (RFC 4486 Cease subcode 1).

use crate::harness::*;
use podcidr_speaker::bgp::session::{
    Action, MaxPrefix, MaxPrefixAction, PrefixCount, SessionConfig, SessionError, State,
};
use podcidr_speaker::bgp::wire::{AfiSafi, AttrProblem, Message, UpdateError, UpdateFault};

fn limited(action: MaxPrefixAction) -> SessionConfig {
    SessionConfig {
        max_prefix: Some(MaxPrefix { limit: 2, action }),
        ..config()
    }
}

#[test]
fn counts_are_per_family_and_exact() {
    let mut s = Script::new(config());
    s.establish();
    s.message(Message::Update(announce_v4(&[
        "10.0.0.0/24",
        "10.0.1.0/24",
    ])));
    s.message(Message::Update(announce_v4(&["10.0.0.0/24"])));
    s.message(Message::Update(announce_v6(&["2001:db8::/64"])));
    s.message(Message::Update(withdraw_v4(&[
        "10.0.1.0/24",
        "10.99.0.0/24",
    ])));
    let counts = &s.session.stats().received_prefixes;
    assert_eq!(
        counts[&AfiSafi::IPV4_UNICAST],
        PrefixCount {
            count: 1,
            saturated: false
        }
    );
    assert_eq!(counts[&AfiSafi::IPV6_UNICAST].count, 1);
}

#[test]
fn treat_as_withdraw_counts_as_a_withdrawal() {
    let mut s = Script::new(config());
    s.establish();
    s.message(Message::Update(announce_v4(&[
        "10.0.0.0/24",
        "10.0.1.0/24",
    ])));
    let mut broken = announce_v4(&["10.0.0.0/24"]);
    broken.errors.push(
        UpdateError::from_fault(UpdateFault::Malformed {
            type_code: 2,
            problem: AttrProblem::Value,
            attribute: bytes::Bytes::new(),
        })
        .expect("a malformed AS_PATH is treat-as-withdraw"),
    );
    let a = s.message(Message::Update(broken));
    assert_eq!(a, vec![], "the session stays up");
    assert_eq!(
        s.session.stats().received_prefixes[&AfiSafi::IPV4_UNICAST].count,
        1
    );
    assert_eq!(s.session.stats().treated_as_withdraw, 1);
    // A missing mandatory attribute (no NEXT_HOP with IPv4 NLRI) is the same reaction.
    let mut no_next_hop = announce_v4(&["10.0.1.0/24"]);
    no_next_hop
        .attributes
        .retain(|a| !matches!(a, podcidr_speaker::bgp::wire::PathAttribute::NextHop(_)));
    s.message(Message::Update(no_next_hop));
    assert_eq!(s.session.stats().treated_as_withdraw, 2);
    assert_eq!(
        s.session.stats().received_prefixes[&AfiSafi::IPV4_UNICAST].count,
        0
    );
}

#[test]
fn warn_reports_once_per_crossing() {
    let mut s = Script::new(limited(MaxPrefixAction::Warn));
    s.establish();
    let a = s.message(Message::Update(announce_v4(&[
        "10.0.0.0/24",
        "10.0.1.0/24",
    ])));
    assert_eq!(a, vec![], "at the limit is fine");
    let a = s.message(Message::Update(announce_v4(&["10.0.2.0/24"])));
    assert_eq!(
        a,
        vec![Action::MaxPrefixExceeded {
            afi_safi: AfiSafi::IPV4_UNICAST,
            count: 3,
            limit: 2
        }]
    );
    let a = s.message(Message::Update(announce_v4(&["10.0.3.0/24"])));
    assert_eq!(a, vec![], "already reported");
    s.message(Message::Update(withdraw_v4(&[
        "10.0.2.0/24",
        "10.0.3.0/24",
    ])));
    let a = s.message(Message::Update(announce_v4(&["10.0.4.0/24"])));
    assert_eq!(a.len(), 1, "crossed again: reported again");
    assert_eq!(s.session.state(), State::Established);
}

#[test]
fn cease_closes_with_the_rfc_4486_data() {
    let mut s = Script::new(limited(MaxPrefixAction::Cease));
    s.establish();
    s.message(Message::Update(announce_v6(&[
        "2001:db8::/64",
        "2001:db8:1::/64",
    ])));
    let a = s.message(Message::Update(announce_v6(&["2001:db8:2::/64"])));
    assert_eq!(
        notifications(&a),
        vec![(6, 1, vec![0x00, 0x02, 0x01, 0x00, 0x00, 0x00, 0x02])]
    );
    assert!(a.contains(&Action::CloseConnection { notify: true }));
    assert!(matches!(
        a.last(),
        Some(Action::Down {
            reason: SessionError::NotificationSent(_)
        })
    ));
    assert_eq!(s.session.state(), State::Idle);
}
