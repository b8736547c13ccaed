//! Malformed input on the wire: the raw peer sends each class of malformed message of
//! RFC 4271 section 6 and RFC 7606 to a running speaker and checks the exact reaction.
//!
//! - Session reset: the NOTIFICATION is compared octet for octet (header, code, subcode,
//!   data) with one written out here from the RFCs, the speaker closes, records what it
//!   sent, dials again within its retry time, and re-announces exactly its routes (the
//!   raw peer decodes them and compares every attribute).
//! - Treat-as-withdraw (RFC 7606 section 2): the session stays up (KEEPALIVEs keep
//!   coming, no NOTIFICATION), the UPDATE's prefixes count as withdrawn (a prefix
//!   announced just before is no longer counted) and the speaker's counter of such
//!   UPDATEs moves by one.
//! - Attribute discard: the session stays up and the UPDATE's prefixes are counted.
//!
//! Each case gets a fresh speaker (the retry backoff of one case must not slow the
//! next); the cases of one `#[test]` run in sequence in one namespace, the tests in
//! parallel.

use std::time::Duration;

use podcidr_speaker::bgp::session::State;
use podcidr_speaker::bgp::wire::AfiSafi;

use crate::fixture::{addrs, Fixture, RAW_AS, RAW_ID};
use crate::isolated;
use crate::raw_peer::{
    as_path4, attr, cap_as4, cap_params, keepalive, message, next_hop, notification, open, origin,
    prefix4, prefix6, update, RawConn, CAP_MP_IPV4, CAP_MP_IPV6, CAP_ROUTE_REFRESH,
};

const V4: AfiSafi = AfiSafi::IPV4_UNICAST;

/// A message that resets the session, sent once the session is Established.
struct ResetCase {
    name: &'static str,
    send: Vec<u8>,
    /// The whole NOTIFICATION expected back.
    want: Vec<u8>,
}

/// Sends `case.send` on an Established session and checks the NOTIFICATION, the close,
/// the speaker's record of it, and the reconnection with the full table.
fn reset_after_established(case: &ResetCase) {
    let f = Fixture::start(&[]);
    let conn = f.established();
    conn.send(&case.send);
    expect_reset(&f, conn, case.name, &case.want);
}

fn expect_reset(f: &Fixture, conn: RawConn, name: &str, want: &[u8]) {
    let got = conn.expect_notification();
    assert_eq!(
        got, want,
        "{name}: NOTIFICATION\n got {got:02x?}\nwant {want:02x?}"
    );
    conn.expect_closed();
    // Our close lets the speaker finish its own at once (it waits for it, bounded).
    drop(conn);
    let before = f.wait_sent(want[19], want[20]).stats.established_count;
    // RFC 4271 section 8: after the error the speaker is Idle, then dials again; the
    // raw peer must get the whole table once more.
    let again = f.established();
    assert_eq!(f.status().stats.established_count, before + 1, "{name}");
    drop(again);
    println!(
        "{name}: {:02x?} then reconnected and re-announced",
        &want[19..]
    );
}

/// The three mandatory attributes of a valid IPv4 announcement from the raw peer.
fn good_attrs() -> Vec<u8> {
    [
        origin(0x00),
        as_path4(&[u32::from(RAW_AS)]),
        next_hop(RAW_ID),
    ]
    .concat()
}

/// MP_REACH_NLRI (RFC 4760 section 3) for IPv6 unicast with an explicit next hop field.
fn mp_reach6(next_hop: &[u8], nlri: &[u8]) -> Vec<u8> {
    let mut v = vec![0x00, 0x02, 0x01, u8::try_from(next_hop.len()).unwrap()];
    v.extend_from_slice(next_hop);
    v.push(0x00);
    v.extend_from_slice(nlri);
    attr(0x80, 0x0e, &v)
}

const FD00_2: [u8; 16] = [
    0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
];

#[test]
fn header_errors_reset_the_session_with_rfc4271_data() {
    let Some(_ns) = isolated!(&addrs()) else {
        return;
    };
    let mut bad_marker = keepalive();
    bad_marker[0] = 0x00;
    let mut long_update = message(0x02, &[0x00; 4097 - 19]);
    long_update[16..18].copy_from_slice(&[0x10, 0x01]);
    let cases = [
        ResetCase {
            name: "marker not all ones (6.1)",
            send: bad_marker,
            want: notification(0x01, 0x01, &[]),
        },
        ResetCase {
            name: "length below 19 (6.1)",
            send: [&[0xff; 16][..], &[0x00, 0x12, 0x04]].concat(),
            want: notification(0x01, 0x02, &[0x00, 0x12]),
        },
        ResetCase {
            name: "length above 4096 without extended messages (6.1)",
            send: long_update,
            want: notification(0x01, 0x02, &[0x10, 0x01]),
        },
        ResetCase {
            name: "KEEPALIVE longer than 19 (6.1)",
            send: message(0x04, &[0x00]),
            want: notification(0x01, 0x02, &[0x00, 0x14]),
        },
        ResetCase {
            name: "UPDATE shorter than 23 (6.1)",
            send: message(0x02, &[0x00, 0x00, 0x00]),
            want: notification(0x01, 0x02, &[0x00, 0x16]),
        },
        ResetCase {
            name: "unknown message type 9 (6.1)",
            send: message(0x09, &[]),
            want: notification(0x01, 0x03, &[0x09]),
        },
        ResetCase {
            name: "BoRR of length 24 (RFC 7313 section 5)",
            send: message(0x05, &[0x00, 0x01, 0x01, 0x01, 0x00]),
            want: notification(0x07, 0x01, &message(0x05, &[0x00, 0x01, 0x01, 0x01, 0x00])),
        },
        ResetCase {
            name: "OPEN while Established (RFC 6608)",
            send: crate::fixture::raw_open(),
            want: notification(0x05, 0x03, &[]),
        },
    ];
    for case in &cases {
        reset_after_established(case);
    }
}

/// An OPEN case: sent instead of the raw peer's good OPEN.
fn reset_in_open_sent(name: &str, bad_open: &[u8], want: &[u8]) {
    let f = Fixture::start(&[]);
    let (conn, _) = f.accept();
    conn.send(bad_open);
    expect_reset(&f, conn, name, want);
}

#[test]
fn open_errors_reset_the_session_with_rfc4271_data() {
    let Some(_ns) = isolated!(&addrs()) else {
        return;
    };
    let caps = |asn: u32| {
        cap_params(&[
            &CAP_MP_IPV4,
            &CAP_MP_IPV6,
            &CAP_ROUTE_REFRESH,
            &cap_as4(asn),
        ])
    };
    let ok_as = u32::from(RAW_AS);
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        (
            "version 3: 2/1, data the version we support (6.2)",
            open(3, RAW_AS, 3, RAW_ID, &caps(ok_as)),
            notification(0x02, 0x01, &[0x00, 0x04]),
        ),
        (
            "wrong peer AS in the 4-octet capability: 2/2 (6.2)",
            open(4, RAW_AS, 3, RAW_ID, &caps(65099)),
            notification(0x02, 0x02, &[]),
        ),
        (
            "wrong peer AS, 2-octet only: 2/2 (6.2)",
            open(4, 65099, 3, RAW_ID, &cap_params(&[&CAP_MP_IPV4])),
            notification(0x02, 0x02, &[]),
        ),
        (
            "AS 0: 2/2 (RFC 7607)",
            open(4, RAW_AS, 3, RAW_ID, &caps(0)),
            notification(0x02, 0x02, &[]),
        ),
        (
            "BGP identifier 0.0.0.0: 2/3 (6.2, RFC 6286)",
            open(4, RAW_AS, 3, "0.0.0.0".parse().unwrap(), &caps(ok_as)),
            notification(0x02, 0x03, &[]),
        ),
        (
            "optional parameter 1 (authentication): 2/4 (6.2)",
            open(4, RAW_AS, 3, RAW_ID, &[0x01, 0x01, 0x00]),
            notification(0x02, 0x04, &[]),
        ),
        (
            "hold time 1: 2/6 (6.2)",
            open(4, RAW_AS, 1, RAW_ID, &caps(ok_as)),
            notification(0x02, 0x06, &[]),
        ),
        (
            "hold time 2: 2/6 (6.2)",
            open(4, RAW_AS, 2, RAW_ID, &caps(ok_as)),
            notification(0x02, 0x06, &[]),
        ),
        (
            "no family in common: 2/7 with our Multiprotocol capabilities (RFC 5492 section 5)",
            open(
                4,
                RAW_AS,
                3,
                RAW_ID,
                // L2VPN EVPN only (AFI 25, SAFI 70).
                &cap_params(&[&[0x01, 0x04, 0x00, 0x19, 0x00, 0x46], &cap_as4(ok_as)]),
            ),
            notification(
                0x02,
                0x07,
                &[
                    0x01, 0x04, 0x00, 0x01, 0x00, 0x01, 0x01, 0x04, 0x00, 0x02, 0x00, 0x01,
                ],
            ),
        ),
        (
            "optional parameters overrun the message: 2/0",
            {
                let mut m = open(4, RAW_AS, 3, RAW_ID, &caps(ok_as));
                m[28] += 4;
                m
            },
            notification(0x02, 0x00, &[]),
        ),
        (
            "4-octet AS capability of length 2: 2/0 (recognized, malformed)",
            open(
                4,
                RAW_AS,
                3,
                RAW_ID,
                &cap_params(&[&CAP_MP_IPV4, &[0x41, 0x02, 0xfd, 0xea]]),
            ),
            notification(0x02, 0x00, &[]),
        ),
        (
            "OPEN shorter than 29: 1/2 with the length (6.1)",
            message(
                0x01,
                &[0x04, 0xfd, 0xea, 0x00, 0x03, 0x64, 0x40, 0x00, 0x02],
            ),
            notification(0x01, 0x02, &[0x00, 0x1c]),
        ),
        (
            "KEEPALIVE in OpenSent: 5/1 (RFC 6608)",
            keepalive(),
            notification(0x05, 0x01, &[]),
        ),
    ];
    for (name, bad, want) in &cases {
        reset_in_open_sent(name, bad, want);
    }
}

#[test]
fn an_update_in_open_confirm_is_an_fsm_error() {
    let Some(_ns) = isolated!(&addrs()) else {
        return;
    };
    let f = Fixture::start(&[]);
    let (conn, _) = f.accept();
    conn.send(&crate::fixture::raw_open());
    // The speaker answers our OPEN with its KEEPALIVE (OpenConfirm); we never send ours.
    assert_eq!(conn.next_message("KEEPALIVE in OpenConfirm"), keepalive());
    conn.send(&update(&[], &good_attrs(), &prefix4("198.51.100.0/24")));
    expect_reset(
        &f,
        conn,
        "UPDATE in OpenConfirm: 5/2 (RFC 6608)",
        &notification(0x05, 0x02, &[]),
    );
}

#[test]
fn fatal_update_errors_reset_the_session_with_rfc4271_data() {
    let Some(_ns) = isolated!(&addrs()) else {
        return;
    };
    let unknown_well_known = attr(0x40, 0x63, &[0x00]);
    let bad_mp_next_hop = mp_reach6(&FD00_2[..5], &prefix6("fd20::/64"));
    let mp_bad_flags = {
        let mut a = mp_reach6(&FD00_2, &prefix6("fd20::/64"));
        a[0] = 0x40;
        a
    };
    let mp_bad_nlri = mp_reach6(&FD00_2, &[0x81, 0xfd, 0x20]);
    let mp_unreach_bad = attr(0x80, 0x0f, &[0x00, 0x02, 0x01, 0xc8, 0xfd]);
    let cases = [
        ResetCase {
            name: "withdrawn routes length past the message: 3/1 (6.3)",
            send: message(0x02, &[0x01, 0x00, 0x00, 0x00]),
            want: notification(0x03, 0x01, &[]),
        },
        ResetCase {
            name: "total attribute length past the message: 3/1 (6.3)",
            send: message(0x02, &[0x00, 0x00, 0x00, 0x40, 0x40, 0x01, 0x01, 0x00]),
            want: notification(0x03, 0x01, &[]),
        },
        ResetCase {
            name: "two MP_REACH_NLRI: 3/1 (RFC 7606 section 3 g)",
            send: update(
                &[],
                &[
                    mp_reach6(&FD00_2, &prefix6("fd20::/64")),
                    origin(0x00),
                    as_path4(&[u32::from(RAW_AS)]),
                    mp_reach6(&FD00_2, &prefix6("fd21::/64")),
                ]
                .concat(),
                &[],
            ),
            want: notification(0x03, 0x01, &[]),
        },
        ResetCase {
            name: "unrecognized well-known attribute 99: 3/2 with the attribute (6.3)",
            send: update(
                &[],
                &[good_attrs(), unknown_well_known.clone()].concat(),
                &prefix4("198.51.100.0/24"),
            ),
            want: notification(0x03, 0x02, &unknown_well_known),
        },
        ResetCase {
            name: "NLRI prefix length 33: 3/10 (RFC 7606 section 5.3)",
            send: update(
                &[],
                &good_attrs(),
                &[0x21, 0xc6, 0x33, 0x64, 0x00, 0x00],
            ),
            want: notification(0x03, 0x0a, &[]),
        },
        ResetCase {
            name: "NLRI truncated: 3/10 (RFC 7606 section 5.3)",
            send: update(&[], &good_attrs(), &[0x18, 0xc6, 0x33]),
            want: notification(0x03, 0x0a, &[]),
        },
        ResetCase {
            name: "withdrawn prefix length 40: 3/10 (RFC 7606 section 5.3)",
            send: update(&[0x28, 0x0a, 0x00, 0x00, 0x00, 0x00], &[], &[]),
            want: notification(0x03, 0x0a, &[]),
        },
        ResetCase {
            name: "MP_REACH_NLRI next hop of 5 octets: 3/9 with the attribute (RFC 4760, RFC 7606 section 7.11)",
            send: update(
                &[],
                &[origin(0x00), as_path4(&[u32::from(RAW_AS)]), bad_mp_next_hop.clone()].concat(),
                &[],
            ),
            want: notification(0x03, 0x09, &bad_mp_next_hop),
        },
        ResetCase {
            name: "MP_REACH_NLRI flagged well-known: 3/4 with the attribute (6.3, RFC 7606 section 3 c)",
            send: update(
                &[],
                &[origin(0x00), as_path4(&[u32::from(RAW_AS)]), mp_bad_flags.clone()].concat(),
                &[],
            ),
            want: notification(0x03, 0x04, &mp_bad_flags),
        },
        ResetCase {
            name: "MP_REACH_NLRI prefix length 129: 3/9 with the attribute (RFC 7606 section 7.11)",
            send: update(
                &[],
                &[origin(0x00), as_path4(&[u32::from(RAW_AS)]), mp_bad_nlri.clone()].concat(),
                &[],
            ),
            want: notification(0x03, 0x09, &mp_bad_nlri),
        },
        ResetCase {
            name: "MP_UNREACH_NLRI prefix length 200: 3/9 with the attribute (RFC 7606 section 7.12)",
            send: update(&[], &mp_unreach_bad, &[]),
            want: notification(0x03, 0x09, &mp_unreach_bad),
        },
    ];
    for case in &cases {
        reset_after_established(case);
    }
}

/// How the speaker must take an UPDATE that does not reset the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// RFC 7606 treat-as-withdraw: the UPDATE's prefixes are withdrawn.
    Withdrawn,
    /// RFC 7606 attribute discard: the UPDATE's prefixes are announced.
    Announced,
}

/// Announces 198.51.100.0/24 validly, then sends `attrs` with the same prefix and
/// 203.0.113.0/24; checks the count, the treat-as-withdraw counter, and that the
/// session stayed up.
fn kept_case(f: &Fixture, conn: &RawConn, name: &str, attrs: &[u8], kept: Kept) {
    let before = f.status().stats.treated_as_withdraw;
    conn.send(&update(&[], &good_attrs(), &prefix4("198.51.100.0/24")));
    f.wait_received(V4, 1);
    let nlri = [prefix4("198.51.100.0/24"), prefix4("203.0.113.0/24")].concat();
    conn.send(&update(&[], attrs, &nlri));
    let (count, moved) = match kept {
        Kept::Withdrawn => (0, 1),
        Kept::Announced => (2, 0),
    };
    let s = f
        .speaker
        .wait(&format!("{name}: {kept:?}"), Duration::from_secs(10), |s| {
            s.stats.treated_as_withdraw == before + moved
                && s.stats.received_prefixes.get(&V4).map(|c| c.count) == Some(count)
        });
    assert_eq!(s.state, State::Established, "{name}");
    // A valid UPDATE after it is still taken, on the same session.
    conn.send(&update(&[], &good_attrs(), &prefix4("192.0.2.0/24")));
    f.wait_received(V4, count + 1);
    let keepalives = conn.expect_up_for(Duration::from_millis(1500));
    let s = f.status();
    assert_eq!(
        (
            s.state,
            s.stats.established_count,
            s.stats.treated_as_withdraw
        ),
        (State::Established, 1, before + moved),
        "{name}"
    );
    // Leave the raw peer's routes as the next case expects them: none.
    conn.send(&update(
        &[
            prefix4("198.51.100.0/24"),
            prefix4("203.0.113.0/24"),
            prefix4("192.0.2.0/24"),
        ]
        .concat(),
        &[],
        &[],
    ));
    f.wait_received(V4, 0);
    println!("{name}: {kept:?}, session up ({keepalives} KEEPALIVEs in 1.5 s)");
}

#[test]
fn non_fatal_update_errors_keep_the_session_up() {
    let Some(_ns) = isolated!(&addrs()) else {
        return;
    };
    let asn = u32::from(RAW_AS);
    let (o, p, n) = (origin(0x00), as_path4(&[asn]), next_hop(RAW_ID));
    let cases: Vec<(&str, Vec<u8>, Kept)> = vec![
        (
            "attribute overruns the attribute field (RFC 7606 section 4)",
            [
                o.clone(),
                p.clone(),
                n.clone(),
                vec![0x80, 0x04, 0x04, 0x00, 0x00],
            ]
            .concat(),
            Kept::Withdrawn,
        ),
        (
            "ORIGIN missing (RFC 7606 section 3 d)",
            [p.clone(), n.clone()].concat(),
            Kept::Withdrawn,
        ),
        (
            "AS_PATH missing (RFC 7606 section 3 d)",
            [o.clone(), n.clone()].concat(),
            Kept::Withdrawn,
        ),
        (
            "NEXT_HOP missing with IPv4 NLRI (RFC 7606 section 3 d)",
            [o.clone(), p.clone()].concat(),
            Kept::Withdrawn,
        ),
        (
            "ORIGIN flagged optional (RFC 7606 section 3 c)",
            [attr(0xc0, 0x01, &[0x00]), p.clone(), n.clone()].concat(),
            Kept::Withdrawn,
        ),
        (
            "ORIGIN of length 2 (RFC 7606 section 7.1)",
            [attr(0x40, 0x01, &[0x00, 0x00]), p.clone(), n.clone()].concat(),
            Kept::Withdrawn,
        ),
        (
            "ORIGIN value 3 (RFC 7606 section 7.1)",
            [origin(0x03), p.clone(), n.clone()].concat(),
            Kept::Withdrawn,
        ),
        (
            "AS_PATH segment type 5 (RFC 7606 section 7.2)",
            [
                o.clone(),
                attr(0x40, 0x02, &[0x05, 0x01, 0x00, 0x00, 0xfd, 0xea]),
                n.clone(),
            ]
            .concat(),
            Kept::Withdrawn,
        ),
        (
            "AS_PATH segment of length 0 (RFC 7606 section 7.2)",
            [o.clone(), attr(0x40, 0x02, &[0x02, 0x00]), n.clone()].concat(),
            Kept::Withdrawn,
        ),
        (
            "AS_PATH segment overruns the attribute (RFC 7606 section 7.2)",
            [
                o.clone(),
                attr(0x40, 0x02, &[0x02, 0x02, 0x00, 0x00, 0xfd, 0xea]),
                n.clone(),
            ]
            .concat(),
            Kept::Withdrawn,
        ),
        (
            "NEXT_HOP of length 5 (RFC 7606 section 7.3)",
            [
                o.clone(),
                p.clone(),
                attr(0x40, 0x03, &[0x64, 0x40, 0x00, 0x02, 0x00]),
            ]
            .concat(),
            Kept::Withdrawn,
        ),
        (
            "MULTI_EXIT_DISC of length 3 (RFC 7606 section 7.4)",
            [
                o.clone(),
                p.clone(),
                n.clone(),
                attr(0x80, 0x04, &[0x00, 0x00, 0x01]),
            ]
            .concat(),
            Kept::Withdrawn,
        ),
        (
            "COMMUNITIES of length 3 (RFC 7606 section 7.8)",
            [
                o.clone(),
                p.clone(),
                n.clone(),
                attr(0xc0, 0x08, &[0xff, 0xff, 0x00]),
            ]
            .concat(),
            Kept::Withdrawn,
        ),
        (
            "LARGE_COMMUNITIES of length 11 (RFC 8092 section 6)",
            [
                o.clone(),
                p.clone(),
                n.clone(),
                attr(0xc0, 0x20, &[0x00; 11]),
            ]
            .concat(),
            Kept::Withdrawn,
        ),
        (
            "ORIGIN twice: the first is kept (RFC 7606 section 3 g)",
            [o.clone(), p.clone(), n.clone(), origin(0x02)].concat(),
            Kept::Announced,
        ),
        (
            "AGGREGATOR of 6 octets on a 4-octet session (RFC 7606 section 7.7)",
            [
                o.clone(),
                p.clone(),
                n.clone(),
                attr(0xc0, 0x07, &[0x00, 0x00, 0xfd, 0xea, 0x64, 0x40]),
            ]
            .concat(),
            Kept::Announced,
        ),
        (
            "ATOMIC_AGGREGATE of length 1 (RFC 7606 section 7.6)",
            [o.clone(), p.clone(), n.clone(), attr(0x40, 0x06, &[0x00])].concat(),
            Kept::Announced,
        ),
        (
            "AS4_PATH on a 4-octet session (RFC 6793 section 3)",
            [
                o.clone(),
                p.clone(),
                n.clone(),
                attr(0xc0, 0x11, &[0x02, 0x01, 0x00, 0x00, 0xfd, 0xea]),
            ]
            .concat(),
            Kept::Announced,
        ),
    ];
    // One session for every case: none of them may end it.
    let f = Fixture::start(&[]);
    let conn = f.established();
    for (name, attrs, kept) in &cases {
        kept_case(&f, &conn, name, attrs, *kept);
    }
    assert_eq!(
        f.status().stats.treated_as_withdraw,
        cases.iter().filter(|c| c.2 == Kept::Withdrawn).count() as u64
    );
}
