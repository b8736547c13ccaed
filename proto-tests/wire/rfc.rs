//! Golden wire vectors written here from the message layouts of the RFCs (not copied
//! from any capture), so that the codec is checked in both directions even where the
//! shared BGP data is absent: these need no data directory and always run.
//!
//! Each vector is spelled out field by field with the section it follows; the test
//! decodes the bytes to the expected value and encodes the value back to the bytes.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use bytes::{Bytes, BytesMut};
use podcidr_speaker::bgp::wire::*;
use std::net::{Ipv4Addr, Ipv6Addr};

const MARKER: [u8; 16] = [0xff; 16];

/// A message: the marker, the length (header included) and the type, then `body`
/// (RFC 4271 section 4.1).
fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let len = u16::try_from(19 + body.len()).unwrap();
    let mut out = MARKER.to_vec();
    out.extend(len.to_be_bytes());
    out.push(kind);
    out.extend(body);
    out
}

fn four() -> Context {
    Context {
        four_octet_as: true,
        ..Context::default()
    }
}

fn both_ways(raw: &[u8], ctx: &Context, expected: &Message) {
    assert_eq!(check_header(raw, ctx), Ok(Some(raw.len())), "{expected:?}");
    let decoded = decode_message_bytes(Bytes::copy_from_slice(raw), ctx).unwrap();
    assert_eq!(&decoded, expected);
    let mut out = BytesMut::new();
    encode_message(expected, ctx, &mut out).unwrap();
    assert_eq!(out.to_vec(), raw, "{expected:?}");
}

fn net(s: &str) -> Nlri {
    Nlri::from(s.parse::<ipnet::IpNet>().unwrap())
}

/// RFC 4271 section 4.4: a KEEPALIVE is the header alone, 19 octets.
#[test]
fn keepalive() {
    let raw = message(4, &[]);
    assert_eq!(raw.len(), 19);
    both_ways(&raw, &Context::default(), &Message::Keepalive);
}

/// RFC 4271 section 4.2, with one Capabilities optional parameter (RFC 5492 section 4)
/// holding Multiprotocol IPv4 unicast (RFC 4760 section 8), Route Refresh (RFC 2918
/// section 2) and 4-octet AS (RFC 6793 section 3).
#[test]
fn open_with_capabilities() {
    let caps = [
        0x01, 0x04, 0x00, 0x01, 0x00, 0x01, // MP: AFI 1, reserved, SAFI 1
        0x02, 0x00, // route refresh
        0x41, 0x04, 0x00, 0x00, 0xfd, 0xe9, // 4-octet AS 65001
    ];
    let mut body = vec![
        0x04, // version
        0xfd, 0xe9, // my AS 65001
        0x00, 0x5a, // hold time 90
        0xc0, 0x00, 0x02, 0x01, // BGP identifier 192.0.2.1
        0x10, // optional parameters length: 2 + 14
        0x02, 0x0e, // parameter type 2 (capabilities), length 14
    ];
    body.extend(caps);
    let raw = message(1, &body);
    assert_eq!(raw.len(), 45);
    let expected = Message::Open(Open {
        version: 4,
        my_as: 65001,
        hold_time: 90,
        bgp_id: Ipv4Addr::new(192, 0, 2, 1),
        capabilities: vec![
            Capability::Multiprotocol(AfiSafi::IPV4_UNICAST),
            Capability::RouteRefresh,
            Capability::FourOctetAs(65001),
        ],
        other_params: vec![],
    });
    both_ways(&raw, &Context::default(), &expected);
}

/// RFC 4271 section 4.3: an UPDATE announcing two IPv4 prefixes with the well-known
/// mandatory attributes (section 5.1), AS_PATH with 4-octet ASNs (RFC 6793 section 4.1).
#[test]
fn update_announcing_ipv4_prefixes() {
    let body = [
        0x00, 0x00, // withdrawn routes length
        0x00, 0x14, // total path attribute length 20
        0x40, 0x01, 0x01, 0x00, // ORIGIN IGP
        0x40, 0x02, 0x06, 0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9, // AS_SEQUENCE [65001]
        0x40, 0x03, 0x04, 0xc0, 0x00, 0x02, 0x01, // NEXT_HOP 192.0.2.1
        0x10, 0x0a, 0x01, // 10.1.0.0/16
        0x18, 0x0a, 0x02, 0x03, // 10.2.3.0/24
    ];
    let raw = message(2, &body);
    assert_eq!(raw.len(), 50);
    let expected = Message::Update(Update {
        withdrawn: vec![],
        attributes: vec![
            PathAttribute::Origin(Origin::Igp),
            PathAttribute::AsPath(AsPath {
                segments: vec![AsSegment {
                    kind: SegmentType::AsSequence,
                    asns: vec![65001],
                }],
            }),
            PathAttribute::NextHop(Ipv4Addr::new(192, 0, 2, 1)),
        ],
        nlri: vec![net("10.1.0.0/16"), net("10.2.3.0/24")],
        errors: vec![],
    });
    both_ways(&raw, &four(), &expected);
}

/// RFC 4271 section 4.3: an UPDATE that only withdraws, with no path attributes.
#[test]
fn update_withdrawing_an_ipv4_prefix() {
    let body = [
        0x00, 0x04, // withdrawn routes length
        0x18, 0x0a, 0x02, 0x03, // 10.2.3.0/24
        0x00, 0x00, // total path attribute length
    ];
    let raw = message(2, &body);
    assert_eq!(raw.len(), 27);
    let expected = Message::Update(Update {
        withdrawn: vec![net("10.2.3.0/24")],
        attributes: vec![],
        nlri: vec![],
        errors: vec![],
    });
    both_ways(&raw, &four(), &expected);
}

/// RFC 4760 section 3: IPv6 unicast in MP_REACH_NLRI (optional, type 14) with a global
/// next hop of 16 octets, on an iBGP session (empty AS_PATH).
#[test]
fn update_announcing_an_ipv6_prefix_in_mp_reach() {
    let mut mp = vec![
        0x00, 0x02, // AFI 2
        0x01, // SAFI 1
        0x10, // next hop length 16
    ];
    mp.extend(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1).octets());
    mp.push(0x00); // reserved
    mp.extend([0x20, 0x20, 0x01, 0x0d, 0xb8]); // 2001:db8::/32
    assert_eq!(mp.len(), 26);
    // The attribute as written with a one-octet length (flags 0x80) and with the
    // Extended Length bit (flags 0x90, RFC 4271 section 4.3), which this encoder uses
    // for MP_REACH_NLRI; both decode to the same value.
    let with_header = |header: &[u8]| {
        let attrs = 4 + 3 + header.len() + mp.len();
        let mut body = vec![0x00, 0x00]; // withdrawn routes length
        body.extend(u16::try_from(attrs).unwrap().to_be_bytes());
        body.extend([0x40, 0x01, 0x01, 0x00]); // ORIGIN IGP
        body.extend([0x40, 0x02, 0x00]); // AS_PATH, empty
        body.extend(header);
        body.extend(&mp);
        message(2, &body)
    };
    let short = with_header(&[0x80, 0x0e, 0x1a]);
    let extended = with_header(&[0x90, 0x0e, 0x00, 0x1a]);
    assert_eq!((short.len(), extended.len()), (59, 60));
    let expected = Message::Update(Update {
        withdrawn: vec![],
        attributes: vec![
            PathAttribute::Origin(Origin::Igp),
            PathAttribute::AsPath(AsPath { segments: vec![] }),
            PathAttribute::MpReach(Box::new(MpReach {
                afi_safi: AfiSafi::IPV6_UNICAST,
                next_hop: MpNextHop::V6 {
                    global: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
                    link_local: None,
                },
                nlri: vec![net("2001:db8::/32")],
                raw_nlri: None,
            })),
        ],
        nlri: vec![],
        errors: vec![],
    });
    both_ways(&extended, &four(), &expected);
    assert_eq!(
        decode_message_bytes(Bytes::from(short), &four()).unwrap(),
        expected
    );
}

/// RFC 4271 section 4.5 with the Cease / Administrative Shutdown subcode (RFC 4486
/// section 3) and a Shutdown Communication (RFC 9003 section 2: length, UTF-8 text).
#[test]
fn notification_administrative_shutdown_with_a_message() {
    let body = [0x06, 0x02, 0x03, b'b', b'y', b'e'];
    let raw = message(3, &body);
    assert_eq!(raw.len(), 25);
    let expected = Message::Notification(Notification {
        code: 6,
        subcode: 2,
        data: Bytes::from_static(&[0x03, b'b', b'y', b'e']),
    });
    both_ways(&raw, &Context::default(), &expected);
    let Message::Notification(n) = expected else {
        unreachable!()
    };
    assert_eq!(
        n.kind(),
        ErrorKind::Cease(CeaseSubcode::AdministrativeShutdown)
    );
    assert_eq!(n.shutdown_message().as_deref(), Some("bye"));
}

/// RFC 2918 section 3: ROUTE-REFRESH for IPv4 unicast (AFI, reserved, SAFI).
#[test]
fn route_refresh_ipv4_unicast() {
    let raw = message(5, &[0x00, 0x01, 0x00, 0x01]);
    assert_eq!(raw.len(), 23);
    let expected = Message::RouteRefresh(RouteRefresh {
        afi_safi: AfiSafi::IPV4_UNICAST,
        subtype: RouteRefreshSubtype::Request,
    });
    both_ways(&raw, &Context::default(), &expected);
}
