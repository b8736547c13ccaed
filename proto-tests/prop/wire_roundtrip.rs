//! Property tests of the wire codec: decode(encode(m)) == m for generated messages of
//! every type under every context; decoding never panics on arbitrary or mutated bytes;
//! the UPDATE builder's output decodes to exactly its input, within the size limit, in
//! the fewest messages greedy packing allows.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use bytes::{Bytes, BytesMut};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use podcidr_speaker::bgp::wire::*;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

// --- generators ----------------------------------------------------------------

fn context() -> impl Strategy<Value = Context> {
    (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(a, b, c, d)| Context {
        four_octet_as: a,
        extended_message: b,
        add_path_ipv4_unicast: c,
        add_path_ipv6_unicast: d,
    })
}

fn v4net() -> impl Strategy<Value = IpNet> {
    (any::<u32>(), 0u8..=32)
        .prop_map(|(a, l)| IpNet::V4(Ipv4Net::new(Ipv4Addr::from(a), l).unwrap().trunc()))
}

fn v6net() -> impl Strategy<Value = IpNet> {
    (any::<u128>(), 0u8..=128)
        .prop_map(|(a, l)| IpNet::V6(Ipv6Net::new(Ipv6Addr::from(a), l).unwrap().trunc()))
}

fn nlri_list(v6: bool, add_path: bool, max: usize) -> BoxedStrategy<Vec<Nlri>> {
    let net = if v6 { v6net().boxed() } else { v4net().boxed() };
    let path_id = if add_path {
        any::<u32>().prop_map(Some).boxed()
    } else {
        Just(None).boxed()
    };
    vec(
        (path_id, net).prop_map(|(path_id, prefix)| Nlri { path_id, prefix }),
        0..max,
    )
    .boxed()
}

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

const KNOWN_CAPABILITIES: [u8; 9] = [1, 2, 5, 6, 64, 65, 69, 70, 73];

fn family() -> impl Strategy<Value = AfiSafi> {
    (any::<u16>(), any::<u8>()).prop_map(|(a, s)| AfiSafi {
        afi: Afi(a),
        safi: Safi(s),
    })
}

fn capability() -> impl Strategy<Value = Capability> {
    let ascii = "[a-z0-9.-]{0,24}";
    prop_oneof![
        family().prop_map(Capability::Multiprotocol),
        Just(Capability::RouteRefresh),
        Just(Capability::EnhancedRouteRefresh),
        Just(Capability::ExtendedMessage),
        any::<u32>().prop_map(Capability::FourOctetAs),
        (
            any::<bool>(),
            any::<bool>(),
            0u16..4096,
            vec((family(), any::<bool>()), 0..4)
        )
            .prop_map(|(r, n, t, f)| {
                Capability::GracefulRestart(GracefulRestart {
                    restart_state: r,
                    notification: n,
                    restart_time: t,
                    families: f
                        .into_iter()
                        .map(|(afi_safi, forwarding_preserved)| GracefulRestartFamily {
                            afi_safi,
                            forwarding_preserved,
                        })
                        .collect(),
                })
            }),
        vec(
            (
                family(),
                prop_oneof![
                    Just(AddPathMode::Receive),
                    Just(AddPathMode::Send),
                    Just(AddPathMode::Both)
                ]
            ),
            1..4
        )
        .prop_map(|f| Capability::AddPath(
            f.into_iter()
                .map(|(afi_safi, send_receive)| AddPathFamily {
                    afi_safi,
                    send_receive
                })
                .collect()
        )),
        vec((family(), any::<u16>()), 1..4).prop_map(|f| Capability::ExtendedNextHop(
            f.into_iter()
                .map(|(afi_safi, nh)| ExtendedNextHopFamily {
                    afi_safi,
                    next_hop_afi: Afi(nh),
                })
                .collect()
        )),
        (ascii, ascii).prop_map(|(hostname, domain)| Capability::Fqdn { hostname, domain }),
        (
            any::<u8>().prop_filter("unknown code", |c| !KNOWN_CAPABILITIES.contains(c)),
            bytes(16)
        )
            .prop_map(|(code, value)| Capability::Unknown { code, value }),
    ]
}

fn open() -> impl Strategy<Value = Open> {
    (
        any::<u16>(),
        any::<u16>(),
        any::<u32>(),
        vec(capability(), 0..10),
        // type 2 is Capabilities; 255 announces the RFC 9072 format
        vec((3u8..255, bytes(32)), 0..3),
    )
        .prop_map(|(my_as, hold_time, id, capabilities, other_params)| Open {
            version: 4,
            my_as,
            hold_time,
            bgp_id: Ipv4Addr::from(id),
            capabilities,
            other_params,
        })
}

fn segment(kind: SegmentType, asn: BoxedStrategy<u32>) -> impl Strategy<Value = AsSegment> {
    vec(asn, 1..8).prop_map(move |asns| AsSegment { kind, asns })
}

/// Confederation segments lead the path (where RFC 5065 puts them) and hold 2-octet
/// members, which is all a 2-octet session can carry (RFC 6793 section 3).
fn as_path() -> impl Strategy<Value = AsPath> {
    let confed = prop_oneof![
        Just(SegmentType::ConfedSequence),
        Just(SegmentType::ConfedSet)
    ]
    .prop_flat_map(|k| segment(k, (0u32..=0xffff).boxed()));
    let plain = prop_oneof![Just(SegmentType::AsSequence), Just(SegmentType::AsSet)]
        .prop_flat_map(|k| segment(k, prop_oneof![0u32..=0xffff, any::<u32>()].boxed()));
    (vec(confed, 0..2), vec(plain, 0..4)).prop_map(|(mut c, p)| {
        c.extend(p);
        AsPath { segments: c }
    })
}

fn next_hop(afi: Afi) -> BoxedStrategy<MpNextHop> {
    let v6 = (any::<u128>(), option::of(any::<u128>())).prop_map(|(g, l)| MpNextHop::V6 {
        global: Ipv6Addr::from(g),
        link_local: l.map(Ipv6Addr::from),
    });
    if afi == Afi::IPV4 {
        prop_oneof![
            any::<u32>().prop_map(|a| MpNextHop::V4(Ipv4Addr::from(a))),
            v6
        ]
        .boxed()
    } else {
        v6.boxed()
    }
}

/// A family the codec parses, or one it keeps as bytes.
fn mp_family() -> impl Strategy<Value = AfiSafi> {
    prop_oneof![
        Just(AfiSafi::IPV4_UNICAST),
        Just(AfiSafi::IPV6_UNICAST),
        Just(AfiSafi {
            afi: Afi::IPV4,
            safi: Safi::MULTICAST
        }),
        Just(AfiSafi {
            afi: Afi::IPV6,
            safi: Safi::MULTICAST
        }),
        Just(AfiSafi {
            afi: Afi(25),
            safi: Safi(70)
        }),
        Just(AfiSafi {
            afi: Afi::IPV4,
            safi: Safi(128)
        }),
    ]
}

fn parsed(f: AfiSafi) -> bool {
    matches!(f.afi, Afi::IPV4 | Afi::IPV6) && matches!(f.safi, Safi::UNICAST | Safi::MULTICAST)
}

fn add_path(ctx: &Context, f: AfiSafi) -> bool {
    (f == AfiSafi::IPV4_UNICAST && ctx.add_path_ipv4_unicast)
        || (f == AfiSafi::IPV6_UNICAST && ctx.add_path_ipv6_unicast)
}

fn mp_reach(ctx: Context) -> impl Strategy<Value = MpReach> {
    mp_family().prop_flat_map(move |f| {
        if parsed(f) {
            (
                next_hop(f.afi),
                nlri_list(f.afi == Afi::IPV6, add_path(&ctx, f), 12),
            )
                .prop_map(move |(next_hop, nlri)| MpReach {
                    afi_safi: f,
                    next_hop,
                    nlri,
                    raw_nlri: None,
                })
                .boxed()
        } else {
            (bytes(24), bytes(40))
                .prop_map(move |(nh, raw)| MpReach {
                    afi_safi: f,
                    next_hop: MpNextHop::Other(nh),
                    nlri: vec![],
                    raw_nlri: Some(raw),
                })
                .boxed()
        }
    })
}

fn mp_unreach(ctx: Context) -> impl Strategy<Value = MpUnreach> {
    mp_family().prop_flat_map(move |f| {
        if parsed(f) {
            nlri_list(f.afi == Afi::IPV6, add_path(&ctx, f), 12)
                .prop_map(move |withdrawn| MpUnreach {
                    afi_safi: f,
                    withdrawn,
                    raw_withdrawn: None,
                })
                .boxed()
        } else {
            bytes(40)
                .prop_map(move |raw| MpUnreach {
                    afi_safi: f,
                    withdrawn: vec![],
                    raw_withdrawn: Some(raw),
                })
                .boxed()
        }
    })
}

const KNOWN_ATTRIBUTES: [u8; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 14, 15, 16, 17, 18, 32];

fn unknown_attribute() -> impl Strategy<Value = UnknownAttribute> {
    (
        any::<u8>().prop_filter("unknown type", |t| !KNOWN_ATTRIBUTES.contains(t)),
        any::<u8>(),
        bytes(40),
    )
        .prop_map(|(type_code, f, value)| UnknownAttribute {
            // optional (an unknown well-known attribute is an error), any other bits
            flags: attr_flags::OPTIONAL | (f & 0x70),
            type_code,
            value,
        })
}

/// A set of attributes, each type at most once, in random order; never AS4_PATH or
/// AS4_AGGREGATOR, which the encoder derives from AS_PATH and AGGREGATOR.
fn attributes(ctx: Context) -> impl Strategy<Value = Vec<PathAttribute>> {
    let ip = || any::<u32>().prop_map(Ipv4Addr::from);
    let well_known = (
        option::of(prop_oneof![
            Just(Origin::Igp),
            Just(Origin::Egp),
            Just(Origin::Incomplete)
        ]),
        option::of(as_path()),
        option::of(ip()),
        option::of(any::<u32>()),
        option::of(any::<u32>()),
        any::<bool>(),
    );
    let optional = (
        option::of((any::<u32>(), ip()).prop_map(|(asn, address)| Aggregator { asn, address })),
        option::of(vec(any::<u32>(), 1..8)),
        option::of(ip()),
        option::of(vec(ip(), 1..4)),
        option::of(vec(any::<[u8; 8]>(), 1..4)),
        option::of(vec((any::<u32>(), any::<u32>(), any::<u32>()), 1..4)),
    );
    let other = (
        option::of(mp_reach(ctx)),
        option::of(mp_unreach(ctx)),
        vec(unknown_attribute(), 0..3),
    );
    (well_known, optional, other)
        .prop_map(
            |(
                (origin, path, nh, med, lp, atomic),
                (agg, comm, orig, cluster, ext, large),
                (reach, unreach, unknown),
            )| {
                let mut a = Vec::new();
                a.extend(origin.map(PathAttribute::Origin));
                a.extend(path.map(PathAttribute::AsPath));
                a.extend(nh.map(PathAttribute::NextHop));
                a.extend(med.map(PathAttribute::MultiExitDisc));
                a.extend(lp.map(PathAttribute::LocalPref));
                if atomic {
                    a.push(PathAttribute::AtomicAggregate);
                }
                a.extend(agg.map(PathAttribute::Aggregator));
                a.extend(comm.map(PathAttribute::Communities));
                a.extend(orig.map(PathAttribute::OriginatorId));
                a.extend(cluster.map(PathAttribute::ClusterList));
                a.extend(ext.map(PathAttribute::ExtendedCommunities));
                a.extend(large.map(|l| {
                    PathAttribute::LargeCommunities(
                        l.into_iter()
                            .map(|(global_admin, local_data1, local_data2)| LargeCommunity {
                                global_admin,
                                local_data1,
                                local_data2,
                            })
                            .collect(),
                    )
                }));
                a.extend(reach.map(PathAttribute::from));
                a.extend(unreach.map(PathAttribute::from));
                let mut seen = Vec::new();
                for u in unknown {
                    if !seen.contains(&u.type_code) {
                        seen.push(u.type_code);
                        a.push(PathAttribute::from(u));
                    }
                }
                a
            },
        )
        .prop_shuffle()
}

fn has(attrs: &[PathAttribute], f: impl Fn(&PathAttribute) -> bool) -> bool {
    attrs.iter().any(f)
}

/// Makes a generated UPDATE one a correct speaker could send, so that it decodes with
/// no error: mandatory attributes present when there is reachability (RFC 4271 section
/// 6.3, RFC 4760 section 3), and on a 2-octet session no 4-octet AS path together with
/// a 2-octet aggregator that is not AS_TRANS (RFC 6793 section 4.2.3 would then ignore
/// the AS4_PATH, as it must for an aggregation done by an OLD speaker).
fn well_formed(ctx: &Context, mut u: Update) -> Update {
    let reach =
        !u.nlri.is_empty() || has(&u.attributes, |a| matches!(a, PathAttribute::MpReach(_)));
    if reach && !has(&u.attributes, |a| matches!(a, PathAttribute::Origin(_))) {
        u.attributes.push(PathAttribute::Origin(Origin::Igp));
    }
    if reach && !has(&u.attributes, |a| matches!(a, PathAttribute::AsPath(_))) {
        u.attributes.push(PathAttribute::AsPath(AsPath::default()));
    }
    if !u.nlri.is_empty() && !has(&u.attributes, |a| matches!(a, PathAttribute::NextHop(_))) {
        u.attributes
            .push(PathAttribute::NextHop(Ipv4Addr::new(192, 0, 2, 1)));
    }
    if !ctx.four_octet_as {
        for a in &mut u.attributes {
            if let PathAttribute::Aggregator(g) = a {
                if g.asn <= 0xffff {
                    g.asn = u32::from(AS_TRANS);
                }
            }
        }
    }
    u
}

fn update(ctx: Context) -> impl Strategy<Value = Update> {
    (
        nlri_list(false, ctx.add_path_ipv4_unicast, 20),
        attributes(ctx),
        nlri_list(false, ctx.add_path_ipv4_unicast, 20),
    )
        .prop_map(move |(withdrawn, attributes, nlri)| {
            well_formed(
                &ctx,
                Update {
                    withdrawn,
                    attributes,
                    nlri,
                    errors: vec![],
                },
            )
        })
}

fn message(ctx: Context) -> impl Strategy<Value = Message> {
    prop_oneof![
        open().prop_map(Message::Open),
        update(ctx).prop_map(Message::Update),
        (any::<u8>(), any::<u8>(), bytes(64)).prop_map(|(code, subcode, data)| {
            Message::Notification(Notification {
                code,
                subcode,
                data,
            })
        }),
        Just(Message::Keepalive),
        (
            family(),
            prop_oneof![
                Just(RouteRefreshSubtype::Request),
                Just(RouteRefreshSubtype::Borr),
                Just(RouteRefreshSubtype::Eorr),
                (3u8..=255).prop_map(RouteRefreshSubtype::Reserved),
            ]
        )
            .prop_map(|(afi_safi, subtype)| Message::RouteRefresh(RouteRefresh {
                afi_safi,
                subtype
            })),
    ]
}

fn context_and_message() -> impl Strategy<Value = (Context, Message)> {
    context().prop_flat_map(|c| (Just(c), message(c)))
}

fn encode(msg: &Message, ctx: &Context) -> Result<BytesMut, EncodeError> {
    let mut out = BytesMut::new();
    encode_message(msg, ctx, &mut out).map(|_| out)
}

// --- properties --------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn decode_inverts_encode((ctx, msg) in context_and_message()) {
        let out = match encode(&msg, &ctx) {
            Ok(out) => out,
            // generated lists can exceed 4096 octets; that refusal is tested below
            Err(EncodeError::MessageTooLong { .. }) => return Err(TestCaseError::reject("too long")),
            Err(e) => return Err(TestCaseError::fail(format!("encode: {e}"))),
        };
        let limit = if matches!(msg, Message::Open(_)) { MAX_MESSAGE_LEN } else { ctx.max_message_len() };
        prop_assert!(out.len() <= limit);
        prop_assert_eq!(check_header(&out, &ctx), Ok(Some(out.len())));
        prop_assert_eq!(decode_message(&out, &ctx), Ok(msg.clone()));
        prop_assert_eq!(decode_message_bytes(out.freeze(), &ctx), Ok(msg));
    }

    #[test]
    fn oversized_messages_are_refused_not_truncated((ctx, msg) in context_and_message()) {
        let mut out = BytesMut::from(&b"prefix"[..]);
        match encode_message(&msg, &ctx, &mut out) {
            Ok(()) => prop_assert!(out.len() - 6 <= ctx.max_message_len()),
            Err(EncodeError::MessageTooLong { len, max }) => {
                prop_assert!(len > max);
                prop_assert_eq!(&out[..], b"prefix");
            }
            Err(e) => return Err(TestCaseError::fail(format!("encode: {e}"))),
        }
    }

    #[test]
    fn decode_never_panics_on_arbitrary_bytes(ctx in context(), raw in vec(any::<u8>(), 0..300)) {
        let _ = check_header(&raw, &ctx);
        let _ = decode_message(&raw, &ctx);
    }

    #[test]
    fn decode_never_panics_behind_a_valid_header(ctx in context(), t in 1u8..=5, body in vec(any::<u8>(), 0..300)) {
        let mut raw = vec![0xff; 16];
        raw.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
        raw.push(t);
        raw.extend_from_slice(&body);
        let _ = decode_message(&raw, &ctx);
    }

    #[test]
    fn mutated_messages_decode_to_a_value_or_a_typed_error(
        (ctx, msg) in context_and_message(),
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let Ok(out) = encode(&msg, &ctx) else { return Err(TestCaseError::reject("too long")) };
        let mut raw = out.to_vec();
        // keep the marker, length and type so that the body parsers see the damage
        for (at, v) in flips {
            if raw.len() > 19 {
                let i = 19 + at.index(raw.len() - 19);
                raw[i] ^= v;
            }
        }
        if truncate && raw.len() > 19 {
            raw.truncate(19 + cut.index(raw.len() - 19));
            let len = raw.len() as u16;
            raw[16..18].copy_from_slice(&len.to_be_bytes());
        }
        match decode_message(&raw, &ctx) {
            Ok(m) => {
                let clean = !matches!(&m, Message::Update(u) if !u.errors.is_empty());
                if clean {
                    // whatever decodes cleanly re-encodes to the same value
                    if let Ok(again) = encode(&m, &ctx) {
                        prop_assert_eq!(decode_message(&again, &ctx), Ok(m));
                    }
                }
            }
            Err(e) => {
                // every refusal has a NOTIFICATION with a registered code
                let n = e.notification();
                prop_assert!((1..=7).contains(&n.code), "{:?}", n);
            }
        }
    }
}

// --- the UPDATE builder --------------------------------------------------------------

/// Octets a prefix takes in an NLRI field.
fn prefix_len(n: &Nlri) -> usize {
    usize::from(n.path_id.is_some()) * 4 + 1 + usize::from(n.prefix.prefix_len()).div_ceil(8)
}

fn builder_input(
) -> impl Strategy<Value = (Context, Vec<PathAttribute>, MpNextHop, Vec<Nlri>, Vec<Nlri>)> {
    context().prop_flat_map(|ctx| {
        let announce = (
            nlri_list(false, ctx.add_path_ipv4_unicast, 1500),
            nlri_list(true, ctx.add_path_ipv6_unicast, 600),
        )
            .prop_map(|(mut a, b)| {
                a.extend(b);
                a
            })
            .prop_shuffle();
        let withdraw = (
            nlri_list(false, ctx.add_path_ipv4_unicast, 1500),
            nlri_list(true, ctx.add_path_ipv6_unicast, 600),
        )
            .prop_map(|(mut a, b)| {
                a.extend(b);
                a
            });
        let attrs = (attributes(ctx), vec(any::<u32>(), 0..300)).prop_map(move |(a, extra)| {
            let mut a: Vec<PathAttribute> = a
                .into_iter()
                .filter(|a| !matches!(a, PathAttribute::MpReach(_) | PathAttribute::MpUnreach(_)))
                .collect();
            let u = well_formed(
                &ctx,
                Update {
                    nlri: vec![Nlri::from("10.0.0.0/8".parse::<IpNet>().unwrap())],
                    attributes: a,
                    ..Update::default()
                },
            );
            a = u.attributes;
            // a long COMMUNITIES shrinks the room left for prefixes
            if !extra.is_empty() && !a.iter().any(|x| matches!(x, PathAttribute::Communities(_))) {
                a.push(PathAttribute::Communities(extra));
            }
            a
        });
        (Just(ctx), attrs, next_hop(Afi::IPV6), announce, withdraw)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn builder_output_decodes_to_exactly_the_input((ctx, attrs, nh, announce, withdraw) in builder_input()) {
        let b = UpdateBuilder::new(&ctx, &attrs, Some(nh.clone())).unwrap();
        let mut out = BytesMut::new();
        let n_withdraw = b.withdraw(&withdraw, &mut out).unwrap();
        let n_announce = b.announce(&announce, &mut out).unwrap();
        let all = out.freeze();
        let max = ctx.max_message_len();

        let (mut got_announce, mut got_withdraw) = (Vec::new(), Vec::new());
        let mut at = 0;
        let mut msgs = Vec::new();
        while at < all.len() {
            let len = check_header(&all[at..], &ctx).unwrap().unwrap();
            prop_assert!(len <= max);
            let Message::Update(u) = decode_message_bytes(all.slice(at..at + len), &ctx).unwrap() else {
                return Err(TestCaseError::fail("not an update"));
            };
            prop_assert!(u.errors.is_empty(), "{:?}", u.errors);
            // one kind of reachability per message (RFC 7606 section 5.1)
            let kinds = [!u.withdrawn.is_empty(), !u.nlri.is_empty(), u.mp_reach().is_some(), u.mp_unreach().is_some()];
            prop_assert_eq!(kinds.iter().filter(|k| **k).count(), 1);
            if !u.nlri.is_empty() {
                prop_assert_eq!(&u.attributes, &attrs);
            }
            if let Some(r) = u.mp_reach() {
                prop_assert_eq!(&r.next_hop, &nh);
                prop_assert!(matches!(u.attributes[0], PathAttribute::MpReach(_)));
                let rest: Vec<_> = attrs.iter().filter(|a| !matches!(a, PathAttribute::NextHop(_))).cloned().collect();
                prop_assert_eq!(&u.attributes[1..], &rest[..]);
            }
            got_announce.extend(announced(&u).map(|(_, n)| *n));
            got_withdraw.extend(withdrawn(&u).map(|(_, n)| *n));
            msgs.push((len, u));
            at += len;
        }
        prop_assert_eq!(msgs.len(), n_withdraw + n_announce);
        let v4_first = |l: &[Nlri]| -> Vec<Nlri> {
            l.iter().filter(|n| n.prefix.addr().is_ipv4()).chain(l.iter().filter(|n| n.prefix.addr().is_ipv6())).copied().collect()
        };
        prop_assert_eq!(got_announce, v4_first(&announce));
        prop_assert_eq!(got_withdraw, v4_first(&withdraw));

        // Greedy packing: a message is closed only when the next prefix of its kind
        // would not have fit.
        for w in msgs.windows(2) {
            let ((len, u), (_, next)) = (&w[0], &w[1]);
            let same_kind = (!u.withdrawn.is_empty() && !next.withdrawn.is_empty())
                || (!u.nlri.is_empty() && !next.nlri.is_empty())
                || (u.mp_reach().is_some() && next.mp_reach().is_some())
                || (u.mp_unreach().is_some() && next.mp_unreach().is_some());
            if same_kind {
                let first_next = announced(next).chain(withdrawn(next)).next().unwrap().1;
                prop_assert!(len + prefix_len(first_next) > max, "{} + {} fits in {}", len, prefix_len(first_next), max);
            }
        }

        // The value path packs the same way.
        let values = build_updates(&ctx, &attrs, Some(nh), &announce, &withdraw).unwrap();
        prop_assert_eq!(values.len(), msgs.len());
        for (v, (_, u)) in values.iter().zip(&msgs) {
            prop_assert_eq!(v, u);
        }
    }
}
