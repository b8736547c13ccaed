//! Every OPEN Message Error subcode we send (RFC 4271 section 6.2, RFC 5492, RFC 6286,
//! RFC 6793): the NOTIFICATION with its data, then the close, Idle and the error kept.

use crate::harness::*;
use podcidr_speaker::bgp::session::{Action, Input, SessionConfig, SessionError, State};
use podcidr_speaker::bgp::wire::{AfiSafi, Capability, Message, Open, AS_TRANS};
use std::net::Ipv4Addr;

/// Drives a session to OpenSent, feeds `open` and checks the reaction; returns the
/// NOTIFICATION's (subcode, data).
fn reject(cfg: SessionConfig, open: Open) -> (u8, Vec<u8>) {
    let mut s = Script::new(cfg);
    s.input(Input::Start);
    s.input(Input::TcpConnected { inbound: false });
    let a = s.message(Message::Open(open));
    assert_eq!(a.len(), 3, "{a:?}");
    let Action::Send(Message::Notification(n)) = &a[0] else {
        panic!("expected a NOTIFICATION first, got {a:?}");
    };
    assert_eq!(n.code, 2, "OPEN Message Error");
    assert_eq!(a[1], Action::CloseConnection { notify: true });
    assert_eq!(
        a[2],
        Action::StateChange {
            from: State::OpenSent,
            to: State::Idle
        }
    );
    assert_eq!(s.session.negotiated(), None);
    let Some(SessionError::NotificationSent(info)) = &s.session.stats().last_error else {
        panic!("last error should be the sent notification");
    };
    assert_eq!((info.code, info.subcode), (n.code, n.subcode));
    assert_eq!(s.session.stats().sent.notification, 1);
    (n.subcode, n.data.to_vec())
}

#[test]
fn unsupported_version_names_version_4() {
    let open = Open {
        version: 3,
        ..peer_open()
    };
    assert_eq!(reject(config(), open), (1, vec![0x00, 0x04]));
}

#[test]
fn bad_peer_as_from_the_4_octet_capability() {
    let open = Open {
        capabilities: vec![
            Capability::Multiprotocol(AfiSafi::IPV4_UNICAST),
            Capability::FourOctetAs(65099),
        ],
        ..peer_open()
    };
    assert_eq!(reject(config(), open), (2, vec![]));
}

#[test]
fn bad_peer_as_for_as_trans_without_the_capability() {
    let cfg = SessionConfig {
        peer_asn: 4_200_000_000,
        ..config()
    };
    let open = Open {
        my_as: AS_TRANS,
        capabilities: vec![Capability::Multiprotocol(AfiSafi::IPV4_UNICAST)],
        ..peer_open()
    };
    assert_eq!(reject(cfg, open), (2, vec![]));
}

#[test]
fn bad_bgp_identifier_zero() {
    let open = Open {
        bgp_id: Ipv4Addr::UNSPECIFIED,
        ..peer_open()
    };
    assert_eq!(reject(config(), open), (3, vec![]));
}

#[test]
fn bad_bgp_identifier_equal_to_ours_on_ibgp() {
    let cfg = SessionConfig {
        peer_asn: LOCAL_ASN,
        ..config()
    };
    let open = Open {
        my_as: LOCAL_ASN as u16,
        bgp_id: LOCAL_ID,
        capabilities: vec![Capability::FourOctetAs(LOCAL_ASN)],
        ..peer_open()
    };
    assert_eq!(reject(cfg, open), (3, vec![]));
}

#[test]
fn unsupported_optional_parameter() {
    let open = Open {
        other_params: vec![(1, bytes::Bytes::from_static(&[0x00, 0x01]))],
        ..peer_open()
    };
    assert_eq!(reject(config(), open), (4, vec![]));
}

#[test]
fn unacceptable_hold_time_of_one_and_two_seconds() {
    for hold in [1, 2] {
        let open = Open {
            hold_time: hold,
            ..peer_open()
        };
        assert_eq!(reject(config(), open), (6, vec![]), "hold {hold}");
    }
}

#[test]
fn unsupported_capability_when_no_family_is_shared() {
    let cfg = SessionConfig {
        families: vec![AfiSafi::IPV6_UNICAST],
        ..config()
    };
    let open = Open {
        capabilities: vec![
            Capability::Multiprotocol(AfiSafi::IPV4_UNICAST),
            Capability::FourOctetAs(PEER_ASN),
        ],
        ..peer_open()
    };
    // The data lists what we need: Multiprotocol IPv6 unicast.
    assert_eq!(
        reject(cfg, open),
        (7, vec![0x01, 0x04, 0x00, 0x02, 0x00, 0x01])
    );
}

#[test]
fn an_open_error_backs_off_before_the_retry() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    s.input(Input::TcpConnected { inbound: false });
    s.message(Message::Open(Open {
        version: 5,
        ..peer_open()
    }));
    assert_eq!(s.session.consecutive_failures(), 1);
    assert!(
        s.session.poll_timeout().is_some(),
        "automatic restart armed"
    );
}
