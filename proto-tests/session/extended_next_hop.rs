//! RFC 8950 extended next hop: the capability we offer, and the negotiation that lets our
//! IPv4 routes carry an IPv6 next hop only when both sides offered it for IPv4 unicast.

use crate::harness::*;
use podcidr_speaker::bgp::session::{Action, Negotiated, SessionConfig, State};
use podcidr_speaker::bgp::wire::{
    Afi, AfiSafi, Capability, ExtendedNextHopFamily, Message, Open, Safi,
};

fn ours() -> SessionConfig {
    SessionConfig {
        extended_next_hop: true,
        ..config()
    }
}

fn negotiated(actions: &[Action]) -> Negotiated {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Established(n) => Some(n.clone()),
            _ => None,
        })
        .expect("established")
}

fn with_caps(extra: Vec<Capability>) -> Open {
    let mut open = peer_open();
    open.capabilities.extend(extra);
    open
}

const CAP: fn() -> Capability =
    || Capability::ExtendedNextHop(vec![ExtendedNextHopFamily::IPV4_UNICAST_OVER_IPV6]);

#[test]
fn our_open_offers_ipv4_unicast_with_an_ipv6_next_hop_when_configured() {
    let mut s = Script::new(ours());
    s.input(podcidr_speaker::bgp::session::Input::Start);
    let a = s.input(podcidr_speaker::bgp::session::Input::TcpConnected { inbound: false });
    let Some(Message::Open(open)) = sent(&a).into_iter().next() else {
        panic!("{a:?}")
    };
    assert!(
        open.capabilities.contains(&CAP()),
        "{:?}",
        open.capabilities
    );
    let plain = Script::new(config());
    assert!(!plain.session.local_open().capabilities.contains(&CAP()));
}

#[test]
fn in_force_only_when_the_peer_offers_it_for_ipv4_unicast_with_ipv6() {
    let mut s = Script::new(ours());
    assert!(negotiated(&s.establish_with(with_caps(vec![CAP()]))).extended_next_hop_ipv4);

    let mut s = Script::new(ours());
    assert!(!negotiated(&s.establish()).extended_next_hop_ipv4);

    // The peer offers it for another family only.
    let vpn = Capability::ExtendedNextHop(vec![ExtendedNextHopFamily {
        afi_safi: AfiSafi {
            afi: Afi::IPV4,
            safi: Safi(128),
        },
        next_hop_afi: Afi::IPV6,
    }]);
    let mut s = Script::new(ours());
    assert!(!negotiated(&s.establish_with(with_caps(vec![vpn]))).extended_next_hop_ipv4);

    // We did not offer it: the peer's offer alone is not enough.
    let mut s = Script::new(config());
    assert!(!negotiated(&s.establish_with(with_caps(vec![CAP()]))).extended_next_hop_ipv4);

    // IPv4 unicast not negotiated at all (the peer speaks IPv6 only).
    let mut v6_only = with_caps(vec![CAP()]);
    v6_only
        .capabilities
        .retain(|c| *c != Capability::Multiprotocol(AfiSafi::IPV4_UNICAST));
    let mut s = Script::new(ours());
    let n = negotiated(&s.establish_with(v6_only));
    assert_eq!(n.families, vec![AfiSafi::IPV6_UNICAST]);
    assert!(!n.extended_next_hop_ipv4);
}

#[test]
fn a_malformed_capability_closes_with_an_open_message_error() {
    let mut s = Script::new(ours());
    s.input(podcidr_speaker::bgp::session::Input::Start);
    s.input(podcidr_speaker::bgp::session::Input::TcpConnected { inbound: false });
    // Length 4: not a whole triple (RFC 8950 section 4). The codec refuses it before the
    // session sees an OPEN; the session gets the decode error's NOTIFICATION.
    let bytes = bytes::Bytes::from_static(&[0x05, 0x04, 0x00, 0x01, 0x00, 0x01]);
    let e = podcidr_speaker::bgp::wire::decode_capabilities(&bytes).unwrap_err();
    let n = e.notification();
    assert_eq!((n.code, n.subcode), (2, 0));
    assert!(n.data.is_empty());
    let a = s.input(podcidr_speaker::bgp::session::Input::DecodeError(n));
    assert_eq!(notifications(&a), vec![(2, 0, vec![])]);
    assert_eq!(s.session.state(), State::Idle);
}

#[test]
fn two_of_our_sessions_agree_both_ways() {
    for (a, b, want) in [
        (true, true, true),
        (true, false, false),
        (false, true, false),
    ] {
        let mut net = Net::pair(
            SessionConfig {
                extended_next_hop: a,
                ..config()
            },
            SessionConfig {
                extended_next_hop: b,
                ..peer_config()
            },
        );
        net.start_all();
        for i in 0..2 {
            assert_eq!(net.state(i), State::Established, "{a} {b}");
            assert_eq!(
                negotiated(&net.actions(i)).extended_next_hop_ipv4,
                want,
                "session {i} of ({a}, {b})"
            );
        }
    }
}
