//! Malformed input: every RFC 4271 section 6 and RFC 7606 case, hand-built, with the
//! exact reaction expected; then the real malformed captures (GoBGP's bad-len fuzz
//! crashers, the FRR bgpd and BIRD fuzzing corpora) swept through the decoder, which
//! must answer each input with a message or a typed error, never a panic.
//!
//! Hand-built vectors are written inline; captures are read at test time from
//! `PODCIDR_BGP_DATA` (default `../shared/data/bgp`); without them the sweep fails, unless
//! `PODCIDR_SKIP_DATA=1` (then it prints why and skips).

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

#[path = "../common/data.rs"]
mod data;
use bytes::{Bytes, BytesMut};
use data::data_dir;
use podcidr_speaker::bgp::wire::*;
use std::collections::BTreeMap;
use std::io::Read;
use std::net::Ipv4Addr;

fn message(msg_type: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![0xff; 16];
    m.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
    m.push(msg_type);
    m.extend_from_slice(body);
    m
}

/// An UPDATE with the given raw fields and consistent length fields.
fn update(withdrawn: &[u8], attrs: &[u8], nlri: &[u8]) -> Vec<u8> {
    let mut body = (withdrawn.len() as u16).to_be_bytes().to_vec();
    body.extend_from_slice(withdrawn);
    body.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
    body.extend_from_slice(attrs);
    body.extend_from_slice(nlri);
    message(2, &body)
}

const ORIGIN: &[u8] = &[0x40, 0x01, 0x01, 0x00];
const AS_PATH: &[u8] = &[0x40, 0x02, 0x06, 0x02, 0x01, 0x00, 0x00, 0xfd, 0xe9];
const NEXT_HOP: &[u8] = &[0x40, 0x03, 0x04, 0xc0, 0x00, 0x02, 0x01];
const NLRI: &[u8] = &[0x18, 0x0a, 0x00, 0x01];

fn four() -> Context {
    Context {
        four_octet_as: true,
        ..Context::default()
    }
}

fn attrs(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn decode_update(msg: &[u8], ctx: &Context) -> Update {
    match decode_message(msg, ctx) {
        Ok(Message::Update(u)) => u,
        other => panic!("{other:?}"),
    }
}

/// Expects a session reset with exactly this NOTIFICATION.
fn assert_reset(msg: &[u8], ctx: &Context, code: u8, subcode: u8, data: &[u8]) {
    let e = decode_message(msg, ctx).expect_err("must be refused");
    let n = e.notification();
    assert_eq!(
        (n.code, n.subcode, &n.data[..]),
        (code, subcode, data),
        "{e}"
    );
    if let DecodeError::Update(fault) = &e {
        assert!(matches!(fault.reaction(), Reaction::SessionReset(_)));
    }
}

/// Expects treat-as-withdraw, with the prefixes still listed and the NOTIFICATION that
/// RFC 4271 would have sent recorded on the error.
fn assert_withdraw(msg: &[u8], ctx: &Context, subcode: u8, data: &[u8]) -> Update {
    let u = decode_update(msg, ctx);
    assert!(u.treat_as_withdraw(), "{:?}", u.errors);
    let e = u
        .errors
        .iter()
        .find(|e| e.reaction_kind == NonFatal::TreatAsWithdraw)
        .unwrap();
    let n = e.fault.notification();
    assert_eq!(
        (n.code, n.subcode, &n.data[..]),
        (3, subcode, data),
        "{}",
        e.detail
    );
    assert_eq!(e.fault.reaction(), Reaction::TreatAsWithdraw);
    u
}

fn assert_discard(msg: &[u8], ctx: &Context, type_code: u8) -> Update {
    let u = decode_update(msg, ctx);
    assert!(!u.treat_as_withdraw(), "{:?}", u.errors);
    assert_eq!(u.errors.len(), 1, "{:?}", u.errors);
    assert_eq!(u.errors[0].reaction_kind, NonFatal::AttributeDiscard);
    assert_eq!(u.errors[0].attr_type, Some(type_code));
    u
}

// --- RFC 4271 section 6.1: message header errors ----------------------------------

#[test]
fn header_connection_not_synchronized() {
    let mut m = message(4, &[]);
    m[0] = 0x00;
    assert_eq!(
        check_header(&m, &Context::default()),
        Err(DecodeError::ConnectionNotSynchronized)
    );
    assert_reset(&m, &Context::default(), 1, 1, &[]);
}

#[test]
fn header_bad_message_length_cases() {
    let ctx = Context::default();
    let with_len = |len: u16, t: u8| {
        let mut m = message(t, &[]);
        m[16..18].copy_from_slice(&len.to_be_bytes());
        m
    };
    // below 19, above 4096, and below each type's minimum (or not 19 for KEEPALIVE)
    for (len, t) in [
        (18, 4),
        (4097, 2),
        (20, 4),
        (28, 1),
        (22, 2),
        (20, 3),
        (22, 5),
    ] {
        let m = with_len(len, t);
        let e = check_header(&m, &ctx).unwrap_err();
        let n = e.notification();
        assert_eq!(
            (n.code, n.subcode, &n.data[..]),
            (1, 2, &len.to_be_bytes()[..]),
            "len {len} type {t}"
        );
    }
    // RFC 8654 section 4: OPEN stays within 4096 even with extended messages.
    let ext = Context {
        extended_message: true,
        ..ctx
    };
    assert!(check_header(&with_len(4097, 1), &ext).is_err());
    assert_eq!(check_header(&with_len(4097, 2), &ext), Ok(Some(4097)));
}

#[test]
fn header_bad_message_type() {
    assert_reset(&message(7, &[]), &Context::default(), 1, 3, &[0x07]);
}

// --- RFC 4271 section 6.2: OPEN message errors ------------------------------------

fn open_body(version: u8, params: &[u8]) -> Vec<u8> {
    let mut b = vec![
        version,
        0xfd,
        0xe9,
        0x00,
        0x5a,
        0xc0,
        0x00,
        0x02,
        0x01,
        params.len() as u8,
    ];
    b.extend_from_slice(params);
    b
}

#[test]
fn open_unsupported_version() {
    assert_reset(
        &message(1, &open_body(3, &[])),
        &Context::default(),
        2,
        1,
        &[0x00, 0x04],
    );
}

#[test]
fn open_malformed_parameters_are_unspecific() {
    let ctx = Context::default();
    // capability length runs past its parameter
    assert_reset(
        &message(1, &open_body(4, &[0x02, 0x03, 0x41, 0x04, 0x00])),
        &ctx,
        2,
        0,
        &[],
    );
    // a recognized capability with the wrong length (4-octet AS of 2 octets)
    assert_reset(
        &message(1, &open_body(4, &[0x02, 0x04, 0x41, 0x02, 0x00, 0x01])),
        &ctx,
        2,
        0,
        &[],
    );
    // RFC 9072 extended length pointing past the message
    let mut body = open_body(4, &[]);
    body[9] = 0xff;
    body.extend_from_slice(&[0xff, 0x00, 0x10, 0x02, 0x00]);
    assert_reset(&message(1, &body), &ctx, 2, 0, &[]);
}

#[test]
fn open_checks_without_configuration() {
    let ctx = Context::default();
    let open = |body: Vec<u8>| match decode_message(&message(1, &body), &ctx) {
        Ok(Message::Open(o)) => o,
        other => panic!("{other:?}"),
    };
    let mut body = open_body(4, &[]);
    body[3..5].copy_from_slice(&[0x00, 0x02]);
    let e = validate_open(&open(body)).unwrap_err();
    assert_eq!((e.notification().code, e.notification().subcode), (2, 6));
    let mut body = open_body(4, &[]);
    body[5..9].copy_from_slice(&[0, 0, 0, 0]);
    let e = validate_open(&open(body)).unwrap_err();
    assert_eq!((e.notification().code, e.notification().subcode), (2, 3));
    let mut body = open_body(4, &[]);
    body[1..3].copy_from_slice(&[0, 0]);
    let e = validate_open(&open(body)).unwrap_err();
    assert_eq!((e.notification().code, e.notification().subcode), (2, 2));
    // deprecated authentication parameter (type 1)
    let e = validate_open(&open(open_body(4, &[0x01, 0x01, 0x00]))).unwrap_err();
    assert_eq!((e.notification().code, e.notification().subcode), (2, 4));
    // unsupported capability: the session refuses it with 2/7 and the capability as data
    let e = unsupported_capabilities(&[Capability::FourOctetAs(65001)]).unwrap();
    let n = e.notification();
    assert_eq!(
        (n.code, n.subcode, &n.data[..]),
        (2, 7, &[0x41, 0x04, 0x00, 0x00, 0xfd, 0xe9][..])
    );
}

// --- RFC 4271 section 6.3 as revised by RFC 7606: UPDATE errors -------------------

#[test]
fn update_field_lengths_exceeding_the_message_reset_the_session() {
    let ctx = four();
    let mut m = update(&[], &[], &[]);
    m[19..21].copy_from_slice(&[0x00, 0x05]);
    assert_reset(&m, &ctx, 3, 1, &[]);
    let mut m = update(&[], ORIGIN, &[]);
    m[21..23].copy_from_slice(&[0x00, 0x05]);
    assert_reset(&m, &ctx, 3, 1, &[]);
}

#[test]
fn update_invalid_network_field_resets_the_session() {
    let ctx = four();
    // prefix length 33 in Withdrawn Routes, a truncated prefix in NLRI
    assert_reset(&update(&[0x21, 0, 0, 0, 0, 0], &[], &[]), &ctx, 3, 10, &[]);
    let a = attrs(&[ORIGIN, AS_PATH, NEXT_HOP]);
    assert_reset(&update(&[], &a, &[0x18, 0x0a, 0x00]), &ctx, 3, 10, &[]);
}

#[test]
fn update_attribute_overrun_and_underrun_treat_as_withdraw() {
    let ctx = four();
    // the last attribute claims 9 octets, 4 remain (RFC 7606 section 4, first case)
    let a = attrs(&[
        ORIGIN,
        NEXT_HOP,
        &[0x40, 0x02, 0x09, 0x02, 0x01, 0x00, 0x00],
    ]);
    let u = assert_withdraw(&update(&[], &a, NLRI), &ctx, 1, &[]);
    assert_eq!(u.nlri.len(), 1, "prefixes stay listed for the withdrawal");
    assert_eq!(u.errors[0].fault, UpdateFault::AttributeOverrun);
    // two octets left: not even an attribute header (second case)
    let a = attrs(&[ORIGIN, AS_PATH, NEXT_HOP, &[0x40, 0x05]]);
    let u = assert_withdraw(&update(&[], &a, NLRI), &ctx, 1, &[]);
    assert_eq!(u.attributes.len(), 3);
}

#[test]
fn update_overrun_keeps_an_mp_reach_parsed_before_it() {
    let ctx = four();
    let mp = [
        &[0x90, 0x0e, 0x00, 0x1a, 0x00, 0x02, 0x01, 0x10][..],
        &[
            0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
        ],
        &[0x00, 0x20, 0x20, 0x01, 0x0d, 0xb8],
    ]
    .concat();
    let a = attrs(&[&mp, ORIGIN, &[0x40, 0x02, 0x09, 0x02]]);
    let u = assert_withdraw(&update(&[], &a, &[]), &ctx, 1, &[]);
    let prefixes: Vec<_> = withdrawn(&u)
        .map(|(f, n)| (f, n.prefix.to_string()))
        .collect();
    assert_eq!(
        prefixes,
        vec![(AfiSafi::IPV6_UNICAST, "2001:db8::/32".to_string())]
    );
}

#[test]
fn update_duplicate_attributes() {
    let ctx = four();
    // a second COMMUNITIES: discarded, the first kept (RFC 7606 section 3 g)
    let c1 = [0xc0, 0x08, 0x04, 0x00, 0x00, 0x00, 0x01];
    let c2 = [0xc0, 0x08, 0x04, 0x00, 0x00, 0x00, 0x02];
    let u = assert_discard(
        &update(&[], &attrs(&[ORIGIN, AS_PATH, NEXT_HOP, &c1, &c2]), NLRI),
        &ctx,
        8,
    );
    assert_eq!(u.attributes[3], PathAttribute::Communities(vec![1]));
    assert_eq!(u.attributes.len(), 4);
    // a second MP_UNREACH_NLRI: Malformed Attribute List
    let unreach = [0x80, 0x0f, 0x03, 0x00, 0x02, 0x01];
    assert_reset(
        &update(&[], &attrs(&[&unreach, &unreach]), &[]),
        &ctx,
        3,
        1,
        &[],
    );
}

#[test]
fn update_unrecognized_well_known_attribute() {
    let unknown = [0x40, 0x1e, 0x01, 0x00];
    let a = attrs(&[ORIGIN, AS_PATH, NEXT_HOP, &unknown]);
    assert_reset(&update(&[], &a, NLRI), &four(), 3, 2, &unknown);
}

#[test]
fn update_missing_well_known_attributes() {
    let ctx = four();
    for (missing, present) in [
        (1u8, [AS_PATH, NEXT_HOP]),
        (2, [ORIGIN, NEXT_HOP]),
        (3, [ORIGIN, AS_PATH]),
    ] {
        let u = assert_withdraw(&update(&[], &attrs(&present), NLRI), &ctx, 3, &[missing]);
        assert_eq!(
            u.errors[0].fault,
            UpdateFault::MissingWellKnown { type_code: missing }
        );
    }
    // no NLRI, nothing is missing
    let u = decode_update(&update(&[], &attrs(&[ORIGIN]), &[]), &ctx);
    assert!(u.errors.is_empty());
    // NEXT_HOP is not needed when MP_REACH_NLRI is the only reachability (RFC 4760)
    let mp = [
        &[
            0x90, 0x0e, 0x00, 0x0c, 0x00, 0x01, 0x01, 0x04, 0xc0, 0x00, 0x02, 0x01, 0x00,
        ][..],
        &[0x10, 0xac, 0x10],
    ]
    .concat();
    let u = decode_update(&update(&[], &attrs(&[&mp, ORIGIN, AS_PATH]), &[]), &ctx);
    assert!(u.errors.is_empty(), "{:?}", u.errors);
}

#[test]
fn update_well_known_attribute_malformations_treat_as_withdraw() {
    let ctx = four();
    let cases: Vec<(&[u8], &[u8], u8)> = vec![
        // (attribute replacing one of the mandatory ones, which one, expected subcode)
        (&[0xc0, 0x01, 0x01, 0x00], ORIGIN, 4), // flags: ORIGIN sent optional
        (&[0x40, 0x01, 0x01, 0x03], ORIGIN, 6), // undefined ORIGIN value
        (&[0x40, 0x01, 0x02, 0x00, 0x00], ORIGIN, 5), // ORIGIN of two octets
        (&[0x40, 0x02, 0x02, 0x02, 0x00], AS_PATH, 11), // zero-length segment
        (&[0x40, 0x02, 0x04, 0x05, 0x01, 0x00, 0x01], AS_PATH, 11), // segment type 5
        (
            &[0x40, 0x03, 0x05, 0xc0, 0x00, 0x02, 0x01, 0x00],
            NEXT_HOP,
            5,
        ),
    ];
    for (bad, replaces, subcode) in cases {
        let a: Vec<u8> = [ORIGIN, AS_PATH, NEXT_HOP]
            .iter()
            .flat_map(|x| {
                if *x == replaces {
                    bad.to_vec()
                } else {
                    x.to_vec()
                }
            })
            .collect();
        let u = assert_withdraw(&update(&[], &a, NLRI), &ctx, subcode, bad);
        assert_eq!(u.attributes.len(), 2, "the malformed attribute is left out");
    }
}

#[test]
fn update_optional_attribute_malformations() {
    let ctx = four();
    let base = attrs(&[ORIGIN, AS_PATH, NEXT_HOP]);
    let with = |extra: &[u8]| update(&[], &[&base[..], extra].concat(), NLRI);
    // treat-as-withdraw: RFC 7606 sections 7.4, 7.5, 7.8, 7.9, 7.10, 7.14; RFC 8092
    for bad in [
        &[0x80, 0x04, 0x03, 0, 0, 0][..],               // MED of 3 octets
        &[0x40, 0x05, 0x05, 0, 0, 0, 0, 0],             // LOCAL_PREF of 5
        &[0xc0, 0x08, 0x05, 0, 0, 0, 0, 0],             // COMMUNITIES of 5
        &[0xc0, 0x08, 0x00],                            // COMMUNITIES empty
        &[0x80, 0x09, 0x03, 1, 1, 1],                   // ORIGINATOR_ID of 3
        &[0x80, 0x0a, 0x06, 1, 1, 1, 1, 2, 2],          // CLUSTER_LIST of 6
        &[0xc0, 0x10, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0], // EXTENDED_COMMUNITIES of 9
        &[0xc0, 0x20, 0x0d, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], // LARGE_COMMUNITIES of 13
    ] {
        let u = assert_withdraw(&with(bad), &ctx, 5, bad);
        assert_eq!(u.nlri.len(), 1);
    }
    // attribute discard: RFC 7606 sections 7.6, 7.7
    let u = assert_discard(&with(&[0x40, 0x06, 0x01, 0x00]), &ctx, 6);
    assert_eq!(u.attributes.len(), 3);
    let six_octet_aggregator = [0xc0, 0x07, 0x06, 0xfd, 0xe9, 0x0a, 0x00, 0x00, 0x01];
    assert_discard(&with(&six_octet_aggregator), &ctx, 7);
}

#[test]
fn update_mp_attribute_errors_reset_the_session() {
    let ctx = four();
    // IPv6 NLRI with a 4-octet next hop (RFC 7606 section 7.11)
    let bad_nh = [
        0x90, 0x0e, 0x00, 0x0b, 0x00, 0x02, 0x01, 0x04, 0x0a, 0x00, 0x00, 0x01, 0x00, 0x08, 0x20,
    ];
    assert_reset(
        &update(&[], &attrs(&[&bad_nh, ORIGIN, AS_PATH]), &[]),
        &ctx,
        3,
        9,
        &bad_nh,
    );
    // prefix length 129
    let mut long = vec![0x90, 0x0e, 0x00, 0x16, 0x00, 0x02, 0x01, 0x10];
    long.extend_from_slice(&[
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
    ]);
    long.extend_from_slice(&[0x00, 0x81]);
    assert_reset(
        &update(&[], &attrs(&[&long, ORIGIN, AS_PATH]), &[]),
        &ctx,
        3,
        9,
        &long,
    );
    // MP_UNREACH_NLRI shorter than AFI + SAFI
    let short = [0x80, 0x0f, 0x02, 0x00, 0x02];
    assert_reset(&update(&[], &short, &[]), &ctx, 3, 9, &short);
    // MP_UNREACH_NLRI sent transitive: flags error
    let flags = [0xc0, 0x0f, 0x03, 0x00, 0x02, 0x01];
    assert_reset(&update(&[], &flags, &[]), &ctx, 3, 4, &flags);
}

#[test]
fn update_as4_attributes() {
    // RFC 6793 section 3: on a 4-octet session, AS4_PATH is discarded
    let as4_path = [0xc0, 0x11, 0x06, 0x02, 0x01, 0x00, 0x01, 0x00, 0x00];
    let base = attrs(&[ORIGIN, AS_PATH, NEXT_HOP]);
    let u = assert_discard(
        &update(&[], &[&base[..], &as4_path].concat(), NLRI),
        &four(),
        17,
    );
    assert_eq!(u.attributes.len(), 3);
    // RFC 6793 section 6: a malformed AS4_AGGREGATOR on a 2-octet session is discarded
    let two = Context::default();
    let as_path2 = [0x40, 0x02, 0x04, 0x02, 0x01, 0x5b, 0xa0];
    let bad_as4_agg = [0xc0, 0x12, 0x06, 0, 0, 0, 0, 0, 0];
    let a = attrs(&[ORIGIN, &as_path2, NEXT_HOP, &bad_as4_agg]);
    assert_discard(&update(&[], &a, NLRI), &two, 18);
    // a well-formed AS4_PATH on a 2-octet session replaces AS_TRANS
    let a = attrs(&[
        ORIGIN,
        &as_path2,
        NEXT_HOP,
        &[0xc0, 0x11, 0x06, 0x02, 0x01, 0xfa, 0x56, 0xea, 0x00],
    ]);
    let u = decode_update(&update(&[], &a, NLRI), &two);
    assert!(u.errors.is_empty());
    assert_eq!(
        u.attributes[1],
        PathAttribute::AsPath(AsPath {
            segments: vec![AsSegment {
                kind: SegmentType::AsSequence,
                asns: vec![4_200_000_000]
            }]
        })
    );
    // confederation segments in AS4_PATH are dropped and reported (RFC 6793 section 6)
    let a = attrs(&[
        ORIGIN,
        &as_path2,
        NEXT_HOP,
        &[
            0xc0, 0x11, 0x0c, 0x03, 0x01, 0x00, 0x00, 0xfd, 0xe8, 0x02, 0x01, 0xfa, 0x56, 0xea,
            0x00,
        ],
    ]);
    let u = assert_discard(&update(&[], &a, NLRI), &two, 17);
    assert_eq!(u.errors[0].fault, UpdateFault::As4PathConfed);
}

// --- RFC 7313 section 5: ROUTE-REFRESH -------------------------------------------

#[test]
fn route_refresh_borr_with_trailing_octets() {
    let m = message(5, &[0x00, 0x01, 0x01, 0x01, 0x00]);
    assert_reset(&m, &Context::default(), 7, 1, &m);
}

// --- Real malformed captures ------------------------------------------------------

/// Regular files of a gzip'd tar, in archive order (ustar names only; these archives
/// need nothing more).
fn untar_gz(raw: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(raw)
        .read_to_end(&mut tar)
        .expect("gunzip");
    let mut files = Vec::new();
    let mut at = 0;
    while at + 512 <= tar.len() {
        let h = &tar[at..at + 512];
        if h.iter().all(|b| *b == 0) {
            break;
        }
        let name_end = h[..100].iter().position(|b| *b == 0).unwrap_or(100);
        let name = String::from_utf8_lossy(&h[..name_end]).into_owned();
        let size_field = std::str::from_utf8(&h[124..136]).unwrap();
        let size =
            usize::from_str_radix(size_field.trim_matches(|c: char| c == '\0' || c == ' '), 8)
                .unwrap();
        let data_at = at + 512;
        if matches!(h[156], b'0' | 0) {
            files.push((name, tar[data_at..data_at + size].to_vec()));
        }
        at = data_at + size.div_ceil(512) * 512;
    }
    files
}

#[derive(Default)]
struct Stats {
    inputs: usize,
    messages: BTreeMap<String, usize>,
    errors: BTreeMap<String, usize>,
    update_errors: BTreeMap<String, usize>,
    truncated: usize,
    round_trips: usize,
    reencode_too_long: usize,
}

fn kind_name(m: &Message) -> &'static str {
    match m {
        Message::Open(_) => "open",
        Message::Update(_) => "update",
        Message::Notification(_) => "notification",
        Message::Keepalive => "keepalive",
        Message::RouteRefresh(_) => "route-refresh",
    }
}

fn error_name(e: &DecodeError) -> String {
    let n = e.notification();
    let variant = format!("{e:?}");
    let variant = variant
        .split([' ', '(', '{'])
        .next()
        .unwrap_or_default()
        .to_string();
    match e {
        DecodeError::Update(f) => {
            let f = format!("{f:?}");
            format!(
                "{}/{} {}",
                n.code,
                n.subcode,
                f.split([' ', '(', '{']).next().unwrap_or_default()
            )
        }
        _ => format!("{}/{} {variant}", n.code, n.subcode),
    }
}

/// Decodes every message in `input` as a stream, the way the peer task frames them.
fn sweep(input: &[u8], ctx: &Context, stats: &mut Stats) {
    stats.inputs += 1;
    let mut buf = input;
    loop {
        let len = match check_header(buf, ctx) {
            Ok(None) => {
                if !buf.is_empty() {
                    stats.truncated += 1;
                }
                return;
            }
            Ok(Some(len)) if len > buf.len() => {
                stats.truncated += 1;
                return;
            }
            Ok(Some(len)) => len,
            Err(e) => {
                *stats.errors.entry(error_name(&e)).or_default() += 1;
                return;
            }
        };
        let one = &buf[..len];
        let shared = decode_message_bytes(Bytes::copy_from_slice(one), ctx);
        let borrowed = decode_message(one, ctx);
        assert_eq!(shared, borrowed, "both decode paths agree");
        match shared {
            Ok(msg) => {
                *stats.messages.entry(kind_name(&msg).into()).or_default() += 1;
                let clean = match &msg {
                    Message::Update(u) => {
                        for e in &u.errors {
                            let name = format!("{:?} {}", e.reaction_kind, e.detail);
                            *stats.update_errors.entry(name).or_default() += 1;
                        }
                        u.errors.is_empty()
                    }
                    _ => true,
                };
                if clean {
                    // a clean decode re-encodes to something that decodes the same
                    let mut out = BytesMut::new();
                    match encode_message(&msg, ctx, &mut out) {
                        Ok(()) => {
                            assert_eq!(decode_message(&out, ctx).as_ref(), Ok(&msg), "{one:02x?}");
                            stats.round_trips += 1;
                        }
                        // MP_* gain a length octet each when re-encoded
                        Err(EncodeError::MessageTooLong { len, max }) if len <= max + 2 => {
                            stats.reencode_too_long += 1
                        }
                        Err(e) => panic!("re-encode of a clean decode failed: {e}: {one:02x?}"),
                    }
                }
            }
            Err(e) => *stats.errors.entry(error_name(&e)).or_default() += 1,
        }
        buf = &buf[len..];
    }
}

fn contexts() -> [Context; 3] {
    [
        Context::default(),
        Context {
            four_octet_as: true,
            ..Context::default()
        },
        Context {
            four_octet_as: true,
            extended_message: true,
            add_path_ipv4_unicast: true,
            add_path_ipv6_unicast: true,
        },
    ]
}

fn report(name: &str, s: &Stats) {
    println!("== {name}: {} inputs, {} truncated", s.inputs, s.truncated);
    println!("   messages: {:?}", s.messages);
    println!("   errors: {:?}", s.errors);
    println!("   update errors (non-fatal): {:?}", s.update_errors);
    println!(
        "   clean decodes re-encoded and decoded again: {} ({} too long to re-encode)",
        s.round_trips, s.reencode_too_long
    );
}

#[test]
fn gobgp_bad_len_crashers() {
    let Some(dir) = data_dir() else { return };
    let mut files: Vec<_> = std::fs::read_dir(dir.join("messages/gobgp-bad-len"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 11);
    let (mut raw_stats, mut patched_stats) = (Stats::default(), Stats::default());
    for f in &files {
        let raw = std::fs::read(f).unwrap();
        for ctx in contexts() {
            sweep(&raw, &ctx, &mut raw_stats);
            // GoBGP's fuzzer does not check the marker; with a valid one the body
            // parsers get to see the malformed lengths.
            let mut patched = raw.clone();
            patched[..16].fill(0xff);
            sweep(&patched, &ctx, &mut patched_stats);
        }
    }
    report("gobgp bad-len", &raw_stats);
    report("gobgp bad-len, marker fixed", &patched_stats);
    // None of the crashers has an all-ones marker: as captured, each is refused with 1/1
    // (11 files, 3 contexts).
    assert_eq!(
        raw_stats.errors.get("1/1 ConnectionNotSynchronized"),
        Some(&33)
    );
    assert!(
        patched_stats.errors.keys().any(|k| k.starts_with("3/")),
        "{:?}",
        patched_stats.errors
    );
}

#[test]
fn fuzz_corpora_never_panic() {
    let Some(dir) = data_dir() else { return };
    for (archive, expected_files) in [
        ("corpi-frr-bgpd-corpus.tar.gz", 3234),
        ("corpi-bird-bgp-corpus.tar.gz", 327),
    ] {
        let raw = std::fs::read(dir.join("messages/fuzz-corpora").join(archive)).unwrap();
        let files: Vec<_> = untar_gz(&raw)
            .into_iter()
            .filter(|(n, _)| !n.ends_with("README.md"))
            .collect();
        assert_eq!(files.len(), expected_files, "{archive}");
        let mut stats = Stats::default();
        for (_, data) in &files {
            for ctx in contexts() {
                sweep(data, &ctx, &mut stats);
            }
        }
        report(archive, &stats);
        let total_messages: usize = stats.messages.values().sum();
        assert!(total_messages > 0 && stats.round_trips > 0, "{archive}");
        if archive.contains("frr") {
            // The FRR corpus has inputs of every message type and every header error.
            for t in [
                "open",
                "update",
                "notification",
                "keepalive",
                "route-refresh",
            ] {
                assert!(stats.messages.contains_key(t), "{archive}: no {t}");
            }
            for prefix in ["1/1 ", "1/2 ", "1/3 ", "2/", "3/"] {
                assert!(
                    stats.errors.keys().any(|k| k.starts_with(prefix)),
                    "{archive}: no {prefix} in {:?}",
                    stats.errors
                );
            }
        }
    }
}

#[test]
fn update_builder_output_is_never_malformed() {
    // The builder is the one sender we control: what it writes must decode cleanly.
    let ctx = four();
    let attrs = vec![
        PathAttribute::Origin(Origin::Igp),
        PathAttribute::AsPath(AsPath::default()),
        PathAttribute::NextHop(Ipv4Addr::new(192, 0, 2, 1)),
        PathAttribute::LocalPref(100),
    ];
    let prefixes: Vec<Nlri> = (0..5000u32)
        .map(|i| {
            Nlri::from(ipnet::IpNet::V4(
                ipnet::Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 | (i << 8)), 24).unwrap(),
            ))
        })
        .collect();
    for m in build_update_messages(&ctx, &attrs, None, &prefixes, &prefixes).unwrap() {
        let Message::Update(u) = decode_message_bytes(m, &ctx).unwrap() else {
            panic!()
        };
        assert!(u.errors.is_empty());
    }
}
