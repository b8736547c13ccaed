//! Path attributes (RFC 4271 sections 4.3 and 5, RFC 4760, RFC 6793, RFC 1997, RFC 4360,
//! RFC 4456, RFC 8092): splitting the attribute field into attributes, decoding one
//! attribute value, and writing one attribute. Detects malformations and names them as
//! [`UpdateFault`]s; must not decide what they cost (that is `UpdateFault::reaction`)
//! nor look across attributes (that is `update.rs`).

use bytes::BytesMut;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::error::{attr_type as t, AttrProblem, EncodeError, UpdateFault};
use super::input::Src;
use super::nlri;
use super::output::{self, Room};
use super::types::{
    attr_flags, Afi, AfiSafi, Aggregator, AsPath, AsSegment, LargeCommunity, MpNextHop, MpReach,
    MpUnreach, Nlri, Origin, PathAttribute, Safi, SegmentType, UnknownAttribute, AS_TRANS,
};
use super::Context;

/// One attribute as it sits in the path attributes field.
pub(crate) struct RawAttr<'a> {
    pub flags: u8,
    pub type_code: u8,
    pub value: &'a [u8],
    /// Flags, type, length and value: the NOTIFICATION data RFC 4271 section 6.3 wants.
    pub whole: &'a [u8],
}

/// Splits the next attribute off `buf`. `Err` is the overrun/underrun of RFC 7606
/// section 4: fewer octets than a header, or a length past the end of the field.
/// Written by hand rather than with nom: it runs once per attribute of every UPDATE.
#[inline]
pub(crate) fn split(buf: &[u8]) -> Result<(&[u8], RawAttr<'_>), ()> {
    let (flags, type_code, header, len) = match *buf {
        [flags, type_code, hi, lo, ..] if flags & attr_flags::EXTENDED_LENGTH != 0 => (
            flags,
            type_code,
            4,
            usize::from(u16::from_be_bytes([hi, lo])),
        ),
        [flags, type_code, len, ..] if flags & attr_flags::EXTENDED_LENGTH == 0 => {
            (flags, type_code, 3, usize::from(len))
        }
        _ => return Err(()),
    };
    if buf.len() - header < len {
        return Err(());
    }
    let (whole, rest) = buf.split_at(header + len);
    Ok((
        rest,
        RawAttr {
            flags,
            type_code,
            value: &whole[header..],
            whole,
        },
    ))
}

/// The Optional and Transitive bits a recognized attribute must carry, `None` for types
/// this codec does not interpret.
fn expected_flags(type_code: u8) -> Option<u8> {
    const WELL_KNOWN: u8 = attr_flags::TRANSITIVE;
    const OPT_NON_TRANS: u8 = attr_flags::OPTIONAL;
    const OPT_TRANS: u8 = attr_flags::OPTIONAL | attr_flags::TRANSITIVE;
    Some(match type_code {
        t::ORIGIN | t::AS_PATH | t::NEXT_HOP | t::LOCAL_PREF | t::ATOMIC_AGGREGATE => WELL_KNOWN,
        t::MULTI_EXIT_DISC
        | t::ORIGINATOR_ID
        | t::CLUSTER_LIST
        | t::MP_REACH_NLRI
        | t::MP_UNREACH_NLRI => OPT_NON_TRANS,
        t::AGGREGATOR
        | t::COMMUNITIES
        | t::EXTENDED_COMMUNITIES
        | t::AS4_PATH
        | t::AS4_AGGREGATOR
        | t::LARGE_COMMUNITIES => OPT_TRANS,
        _ => return None,
    })
}

/// ADD-PATH applies to the IPv4 and IPv6 unicast families the context tracks.
pub(crate) fn add_path_for(ctx: &Context, family: AfiSafi) -> bool {
    if family == AfiSafi::IPV4_UNICAST {
        ctx.add_path_ipv4_unicast
    } else if family == AfiSafi::IPV6_UNICAST {
        ctx.add_path_ipv6_unicast
    } else {
        false
    }
}

/// IPv4/IPv6 unicast and multicast: the families whose NLRI this codec parses.
pub(crate) fn parsed_family(family: AfiSafi) -> bool {
    matches!(family.afi, Afi::IPV4 | Afi::IPV6)
        && matches!(family.safi, Safi::UNICAST | Safi::MULTICAST)
}

/// Decodes one attribute.
pub(crate) fn decode(
    raw: &RawAttr<'_>,
    ctx: &Context,
    src: Src<'_>,
) -> Result<PathAttribute, UpdateFault> {
    let Some(expected) = expected_flags(raw.type_code) else {
        if raw.flags & attr_flags::OPTIONAL == 0 {
            return Err(UpdateFault::UnrecognizedWellKnown {
                type_code: raw.type_code,
                attribute: src.bytes(raw.whole),
            });
        }
        return Ok(PathAttribute::Unknown(Box::new(UnknownAttribute {
            flags: raw.flags,
            type_code: raw.type_code,
            value: src.bytes(raw.value),
        })));
    };
    let fault = |problem| UpdateFault::Malformed {
        type_code: raw.type_code,
        problem,
        attribute: src.bytes(raw.whole),
    };
    if raw.flags & (attr_flags::OPTIONAL | attr_flags::TRANSITIVE) != expected {
        return Err(fault(AttrProblem::Flags));
    }
    // RFC 6793 section 3: between NEW speakers these attributes are discarded.
    if ctx.four_octet_as && matches!(raw.type_code, t::AS4_PATH | t::AS4_AGGREGATOR) {
        return Err(UpdateFault::UnexpectedAs4 {
            type_code: raw.type_code,
        });
    }
    let v = raw.value;
    let len_err = || fault(AttrProblem::Length);
    Ok(match raw.type_code {
        t::ORIGIN => match v {
            [0] => PathAttribute::Origin(Origin::Igp),
            [1] => PathAttribute::Origin(Origin::Egp),
            [2] => PathAttribute::Origin(Origin::Incomplete),
            [_] => return Err(fault(AttrProblem::Value)),
            _ => return Err(len_err()),
        },
        t::AS_PATH => PathAttribute::AsPath(
            as_path(v, ctx.four_octet_as).map_err(|_| fault(AttrProblem::Value))?,
        ),
        t::AS4_PATH => {
            PathAttribute::As4Path(as_path(v, true).map_err(|_| fault(AttrProblem::Value))?)
        }
        t::NEXT_HOP => PathAttribute::NextHop(ipv4(v).ok_or_else(len_err)?),
        t::MULTI_EXIT_DISC => PathAttribute::MultiExitDisc(u32_of(v).ok_or_else(len_err)?),
        t::LOCAL_PREF => PathAttribute::LocalPref(u32_of(v).ok_or_else(len_err)?),
        t::ATOMIC_AGGREGATE if v.is_empty() => PathAttribute::AtomicAggregate,
        t::ATOMIC_AGGREGATE => return Err(len_err()),
        // RFC 7606 section 7.7: 6 octets on a 2-octet session, 8 on a 4-octet one.
        t::AGGREGATOR => {
            PathAttribute::Aggregator(aggregator(v, ctx.four_octet_as).ok_or_else(len_err)?)
        }
        t::AS4_AGGREGATOR => PathAttribute::As4Aggregator(aggregator(v, true).ok_or_else(len_err)?),
        t::COMMUNITIES => PathAttribute::Communities(
            list(v, 4, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])).ok_or_else(len_err)?,
        ),
        t::ORIGINATOR_ID => PathAttribute::OriginatorId(ipv4(v).ok_or_else(len_err)?),
        t::CLUSTER_LIST => PathAttribute::ClusterList(
            list(v, 4, |c| Ipv4Addr::new(c[0], c[1], c[2], c[3])).ok_or_else(len_err)?,
        ),
        t::EXTENDED_COMMUNITIES => PathAttribute::ExtendedCommunities(
            list(v, 8, |c| {
                let mut e = [0u8; 8];
                e.copy_from_slice(c);
                e
            })
            .ok_or_else(len_err)?,
        ),
        t::LARGE_COMMUNITIES => PathAttribute::LargeCommunities(
            list(v, 12, |c| LargeCommunity {
                global_admin: u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                local_data1: u32::from_be_bytes([c[4], c[5], c[6], c[7]]),
                local_data2: u32::from_be_bytes([c[8], c[9], c[10], c[11]]),
            })
            .ok_or_else(len_err)?,
        ),
        t::MP_REACH_NLRI => PathAttribute::MpReach(Box::new(mp_reach(v, ctx, src).map_err(fault)?)),
        t::MP_UNREACH_NLRI => {
            PathAttribute::MpUnreach(Box::new(mp_unreach(v, ctx, src).map_err(fault)?))
        }
        // expected_flags() returned Some only for the types above.
        _ => {
            return Ok(PathAttribute::Unknown(Box::new(UnknownAttribute {
                flags: raw.flags,
                type_code: raw.type_code,
                value: src.bytes(raw.value),
            })))
        }
    })
}

fn ipv4(v: &[u8]) -> Option<Ipv4Addr> {
    let [a, b, c, d] = v else { return None };
    Some(Ipv4Addr::new(*a, *b, *c, *d))
}

fn u32_of(v: &[u8]) -> Option<u32> {
    let [a, b, c, d] = v else { return None };
    Some(u32::from_be_bytes([*a, *b, *c, *d]))
}

/// A non-empty list of fixed-size items (RFC 7606 sections 7.8, 7.10, 7.14; RFC 8092
/// section 6: a length of zero or not a multiple of the item size is malformed).
fn list<T>(v: &[u8], size: usize, item: impl Fn(&[u8]) -> T) -> Option<Vec<T>> {
    if v.is_empty() || v.len() % size != 0 {
        return None;
    }
    Some(v.chunks_exact(size).map(item).collect())
}

fn aggregator(v: &[u8], four: bool) -> Option<Aggregator> {
    match (four, v) {
        (false, [a, b, rest @ ..]) if rest.len() == 4 => Some(Aggregator {
            asn: u32::from(u16::from_be_bytes([*a, *b])),
            address: ipv4(rest)?,
        }),
        (true, [a, b, c, d, rest @ ..]) if rest.len() == 4 => Some(Aggregator {
            asn: u32::from_be_bytes([*a, *b, *c, *d]),
            address: ipv4(rest)?,
        }),
        _ => None,
    }
}

/// AS_PATH / AS4_PATH segments (RFC 4271 section 4.3). RFC 7606 section 7.2: an
/// unknown segment type, a zero segment length, a segment overrunning the attribute,
/// or a single trailing octet make the path malformed.
pub(crate) fn as_path(mut v: &[u8], four: bool) -> Result<AsPath, ()> {
    let width = if four { 4 } else { 2 };
    let mut segments = Vec::with_capacity(1);
    while !v.is_empty() {
        let [kind, count, rest @ ..] = v else {
            return Err(());
        };
        let kind = match kind {
            1 => SegmentType::AsSet,
            2 => SegmentType::AsSequence,
            3 => SegmentType::ConfedSequence,
            4 => SegmentType::ConfedSet,
            _ => return Err(()),
        };
        let n = usize::from(*count);
        if n == 0 {
            return Err(());
        }
        let body = rest.get(..n * width).ok_or(())?;
        let asns = if four {
            body.chunks_exact(4)
                .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        } else {
            body.chunks_exact(2)
                .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
                .collect()
        };
        segments.push(AsSegment { kind, asns });
        v = &rest[n * width..];
    }
    Ok(AsPath { segments })
}

/// MP_REACH_NLRI (RFC 4760 section 3).
fn mp_reach(v: &[u8], ctx: &Context, src: Src<'_>) -> Result<MpReach, AttrProblem> {
    let [a0, a1, safi, nh_len, rest @ ..] = v else {
        return Err(AttrProblem::Length);
    };
    let family = AfiSafi {
        afi: Afi(u16::from_be_bytes([*a0, *a1])),
        safi: Safi(*safi),
    };
    let nh = rest.get(..usize::from(*nh_len)).ok_or(AttrProblem::Value)?;
    // One reserved octet (formerly the SNPA count) follows the next hop.
    let nlri_field = rest
        .get(usize::from(*nh_len) + 1..)
        .ok_or(AttrProblem::Value)?;
    if !parsed_family(family) {
        return Ok(MpReach {
            afi_safi: family,
            next_hop: MpNextHop::Other(src.bytes(nh)),
            nlri: Vec::new(),
            raw_nlri: Some(src.bytes(nlri_field)),
        });
    }
    // RFC 7606 section 7.11: a next hop length other than expected is malformed. IPv4
    // NLRI may have an IPv6 next hop (RFC 8950); IPv6 has a global and optionally a
    // link-local address (RFC 2545 section 3).
    let next_hop = match (family.afi, nh.len()) {
        (Afi::IPV4, 4) => MpNextHop::V4(Ipv4Addr::new(nh[0], nh[1], nh[2], nh[3])),
        (_, 16) => MpNextHop::V6 {
            global: ipv6(&nh[..16]),
            link_local: None,
        },
        (_, 32) => MpNextHop::V6 {
            global: ipv6(&nh[..16]),
            link_local: Some(ipv6(&nh[16..])),
        },
        _ => return Err(AttrProblem::Value),
    };
    let list = nlri::parse(family.afi, nlri_field, add_path_for(ctx, family))
        .map_err(|_| AttrProblem::Value)?;
    Ok(MpReach {
        afi_safi: family,
        next_hop,
        nlri: list,
        raw_nlri: None,
    })
}

fn ipv6(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    Ipv6Addr::from(a)
}

/// MP_UNREACH_NLRI (RFC 4760 section 4).
fn mp_unreach(v: &[u8], ctx: &Context, src: Src<'_>) -> Result<MpUnreach, AttrProblem> {
    let [a0, a1, safi, rest @ ..] = v else {
        return Err(AttrProblem::Length);
    };
    let family = AfiSafi {
        afi: Afi(u16::from_be_bytes([*a0, *a1])),
        safi: Safi(*safi),
    };
    if !parsed_family(family) {
        return Ok(MpUnreach {
            afi_safi: family,
            withdrawn: Vec::new(),
            raw_withdrawn: Some(src.bytes(rest)),
        });
    }
    let list =
        nlri::parse(family.afi, rest, add_path_for(ctx, family)).map_err(|_| AttrProblem::Value)?;
    Ok(MpUnreach {
        afi_safi: family,
        withdrawn: list,
        raw_withdrawn: None,
    })
}

impl PathAttribute {
    /// The attribute type code (IANA "BGP Path Attributes").
    pub fn type_code(&self) -> u8 {
        match self {
            PathAttribute::Origin(_) => t::ORIGIN,
            PathAttribute::AsPath(_) => t::AS_PATH,
            PathAttribute::NextHop(_) => t::NEXT_HOP,
            PathAttribute::MultiExitDisc(_) => t::MULTI_EXIT_DISC,
            PathAttribute::LocalPref(_) => t::LOCAL_PREF,
            PathAttribute::AtomicAggregate => t::ATOMIC_AGGREGATE,
            PathAttribute::Aggregator(_) => t::AGGREGATOR,
            PathAttribute::Communities(_) => t::COMMUNITIES,
            PathAttribute::OriginatorId(_) => t::ORIGINATOR_ID,
            PathAttribute::ClusterList(_) => t::CLUSTER_LIST,
            PathAttribute::MpReach(_) => t::MP_REACH_NLRI,
            PathAttribute::MpUnreach(_) => t::MP_UNREACH_NLRI,
            PathAttribute::ExtendedCommunities(_) => t::EXTENDED_COMMUNITIES,
            PathAttribute::As4Path(_) => t::AS4_PATH,
            PathAttribute::As4Aggregator(_) => t::AS4_AGGREGATOR,
            PathAttribute::LargeCommunities(_) => t::LARGE_COMMUNITIES,
            PathAttribute::Unknown(u) => u.type_code,
        }
    }

    /// The flags this attribute is sent with (before the extended length bit).
    pub fn flags(&self) -> u8 {
        match self {
            PathAttribute::Unknown(u) => u.flags,
            other => expected_flags(other.type_code()).unwrap_or(attr_flags::OPTIONAL),
        }
    }
}

/// The boxed variants, built from their payloads.
impl From<MpReach> for PathAttribute {
    fn from(r: MpReach) -> Self {
        PathAttribute::MpReach(Box::new(r))
    }
}

impl From<MpUnreach> for PathAttribute {
    fn from(u: MpUnreach) -> Self {
        PathAttribute::MpUnreach(Box::new(u))
    }
}

impl From<UnknownAttribute> for PathAttribute {
    fn from(u: UnknownAttribute) -> Self {
        PathAttribute::Unknown(Box::new(u))
    }
}

impl UnknownAttribute {
    /// The attribute as it must be passed on to another peer (RFC 4271 section 5):
    /// optional transitive ones with the Partial bit set, optional non-transitive ones
    /// not at all.
    pub fn to_propagate(&self) -> Option<UnknownAttribute> {
        if self.flags & attr_flags::TRANSITIVE == 0 {
            return None;
        }
        Some(UnknownAttribute {
            flags: self.flags | attr_flags::PARTIAL,
            ..self.clone()
        })
    }
}

/// Writes one attribute (see [`write`]) on its own, for callers that encode attributes
/// once and copy the octets (the UPDATE builder).
pub(crate) fn encode(
    attr: &PathAttribute,
    ctx: &Context,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let value = checked_value_len(attr, ctx)?;
    let len = header_len(attr, value) + usize::from(value);
    output::append(out, len, |room| {
        write(attr, ctx, value, room);
        Ok(())
    })
}

/// The value's length in octets, after every check writing `attr` can fail: the
/// sizing half of [`write`], so that a whole UPDATE is sized, then written into room
/// made once.
#[inline]
pub(crate) fn checked_value_len(attr: &PathAttribute, ctx: &Context) -> Result<u16, EncodeError> {
    let len = value_len(attr, ctx)?;
    u16::try_from(len).map_err(|_| EncodeError::FieldTooLong {
        field: "path attribute",
        len,
    })
}

/// Octets of the header in front of a value of `len` octets.
#[inline]
pub(crate) fn header_len(attr: &PathAttribute, len: u16) -> usize {
    if long_length(attr, usize::from(len)) {
        4
    } else {
        3
    }
}

/// Writes one attribute whose value [`checked_value_len`] sized at `len` octets. On a
/// 2-octet session AS numbers above 65535 become AS_TRANS in AS_PATH and AGGREGATOR;
/// `update.rs` adds the AS4_* attributes that carry them.
#[inline]
pub(crate) fn write(attr: &PathAttribute, ctx: &Context, len: u16, room: &mut Room<'_>) {
    let flags = attr.flags() & !attr_flags::EXTENDED_LENGTH;
    if long_length(attr, usize::from(len)) {
        room.array([flags | attr_flags::EXTENDED_LENGTH, attr.type_code()]);
        room.u16(len);
    } else {
        // len <= 255 here.
        room.array([flags, attr.type_code(), len as u8]);
    }
    write_value(attr, ctx, room);
}

/// The two-octet length: for values above 255, and always for MP_*, as FRR and ExaBGP
/// write them (their size is rarely known before the NLRI are in); unknown attributes
/// keep the flag they came with.
fn long_length(attr: &PathAttribute, len: usize) -> bool {
    len > 255
        || match attr {
            PathAttribute::MpReach(_) | PathAttribute::MpUnreach(_) => true,
            PathAttribute::Unknown(u) => u.flags & attr_flags::EXTENDED_LENGTH != 0,
            _ => false,
        }
}

/// The value's length; refuses what has no encoding.
fn value_len(attr: &PathAttribute, ctx: &Context) -> Result<usize, EncodeError> {
    Ok(match attr {
        PathAttribute::Origin(_) => 1,
        PathAttribute::AsPath(p) => as_path_len(p, ctx.four_octet_as)?,
        PathAttribute::As4Path(p) => as_path_len(p, true)?,
        PathAttribute::NextHop(_)
        | PathAttribute::OriginatorId(_)
        | PathAttribute::MultiExitDisc(_)
        | PathAttribute::LocalPref(_) => 4,
        PathAttribute::AtomicAggregate => 0,
        PathAttribute::Aggregator(_) if !ctx.four_octet_as => 6,
        PathAttribute::Aggregator(_) | PathAttribute::As4Aggregator(_) => 8,
        PathAttribute::Communities(list) => 4 * list.len(),
        PathAttribute::ClusterList(list) => 4 * list.len(),
        PathAttribute::ExtendedCommunities(list) => 8 * list.len(),
        PathAttribute::LargeCommunities(list) => 12 * list.len(),
        PathAttribute::MpReach(r) => {
            2 + 1
                + next_hop_checked_len(&r.next_hop)?
                + 1
                + mp_nlri_len(&r.nlri, r.afi_safi, ctx)?
                + r.raw_nlri.as_ref().map_or(0, |raw| raw.len())
        }
        PathAttribute::MpUnreach(u) => {
            2 + 1
                + mp_nlri_len(&u.withdrawn, u.afi_safi, ctx)?
                + u.raw_withdrawn.as_ref().map_or(0, |raw| raw.len())
        }
        PathAttribute::Unknown(u) => u.value.len(),
    })
}

/// The prefixes of an MP_* attribute: only in the families this codec parses (others
/// travel as raw octets).
fn mp_nlri_len(list: &[Nlri], family: AfiSafi, ctx: &Context) -> Result<usize, EncodeError> {
    if parsed_family(family) {
        nlri::list_len(list, family, add_path_for(ctx, family))
    } else if let Some(first) = list.first() {
        Err(EncodeError::WrongFamily {
            prefix: first.prefix,
            afi_safi: family,
        })
    } else {
        Ok(0)
    }
}

fn write_value(attr: &PathAttribute, ctx: &Context, room: &mut Room<'_>) {
    match attr {
        PathAttribute::Origin(o) => room.u8(*o as u8),
        PathAttribute::AsPath(p) => write_as_path(p, ctx.four_octet_as, room),
        PathAttribute::As4Path(p) => write_as_path(p, true, room),
        PathAttribute::NextHop(a) | PathAttribute::OriginatorId(a) => room.array(a.octets()),
        PathAttribute::MultiExitDisc(v) | PathAttribute::LocalPref(v) => room.u32(*v),
        PathAttribute::AtomicAggregate => {}
        PathAttribute::Aggregator(a) => write_aggregator(a, ctx.four_octet_as, room),
        PathAttribute::As4Aggregator(a) => write_aggregator(a, true, room),
        PathAttribute::Communities(list) => list.iter().for_each(|c| room.u32(*c)),
        PathAttribute::ClusterList(list) => list.iter().for_each(|a| room.array(a.octets())),
        PathAttribute::ExtendedCommunities(list) => list.iter().for_each(|e| room.array(*e)),
        PathAttribute::LargeCommunities(list) => list.iter().for_each(|l| {
            room.u32(l.global_admin);
            room.u32(l.local_data1);
            room.u32(l.local_data2);
        }),
        PathAttribute::MpReach(r) => {
            room.u16(r.afi_safi.afi.0);
            room.u8(r.afi_safi.safi.0);
            write_next_hop(&r.next_hop, room);
            room.u8(0);
            nlri::write_list(room, &r.nlri);
            if let Some(raw) = &r.raw_nlri {
                room.slice(raw);
            }
        }
        PathAttribute::MpUnreach(u) => {
            room.u16(u.afi_safi.afi.0);
            room.u8(u.afi_safi.safi.0);
            nlri::write_list(room, &u.withdrawn);
            if let Some(raw) = &u.raw_withdrawn {
                room.slice(raw);
            }
        }
        PathAttribute::Unknown(u) => room.slice(&u.value),
    }
}

/// Writes the MP_REACH next hop with its length octet.
pub(crate) fn put_next_hop(nh: &MpNextHop, out: &mut BytesMut) -> Result<(), EncodeError> {
    let len = next_hop_checked_len(nh)?;
    output::append(out, len, |room| {
        write_next_hop(nh, room);
        Ok(())
    })
}

/// [`next_hop_len`], refusing a next hop of more octets than its length octet holds.
fn next_hop_checked_len(nh: &MpNextHop) -> Result<usize, EncodeError> {
    if let MpNextHop::Other(b) = nh {
        if b.len() > usize::from(u8::MAX) {
            return Err(EncodeError::FieldTooLong {
                field: "mp next hop",
                len: b.len(),
            });
        }
    }
    Ok(next_hop_len(nh))
}

fn write_next_hop(nh: &MpNextHop, room: &mut Room<'_>) {
    match nh {
        MpNextHop::V4(a) => {
            room.u8(4);
            room.array(a.octets());
        }
        MpNextHop::V6 {
            global,
            link_local: None,
        } => {
            room.u8(16);
            room.array(global.octets());
        }
        MpNextHop::V6 {
            global,
            link_local: Some(ll),
        } => {
            room.u8(32);
            room.array(global.octets());
            room.array(ll.octets());
        }
        MpNextHop::Other(b) => {
            // next_hop_checked_len refused more than 255 octets.
            room.u8(b.len() as u8);
            room.slice(b);
        }
    }
}

/// Octets of the MP_REACH next hop field including its length octet.
pub(crate) fn next_hop_len(nh: &MpNextHop) -> usize {
    1 + match nh {
        MpNextHop::V4(_) => 4,
        MpNextHop::V6 {
            link_local: None, ..
        } => 16,
        MpNextHop::V6 {
            link_local: Some(_),
            ..
        } => 32,
        MpNextHop::Other(b) => b.len(),
    }
}

fn write_aggregator(a: &Aggregator, four: bool, room: &mut Room<'_>) {
    if four {
        room.u32(a.asn);
    } else {
        room.u16(u16::try_from(a.asn).unwrap_or(AS_TRANS));
    }
    room.array(a.address.octets());
}

/// The AS_PATH value's length. Refuses a segment of no or more than 255 AS numbers,
/// and, with `four` false, a confederation member above 65535: AS4_PATH carries no
/// confederation segments (RFC 6793 section 3), so it cannot reach a 2-octet peer
/// intact.
fn as_path_len(p: &AsPath, four: bool) -> Result<usize, EncodeError> {
    let width = if four { 4 } else { 2 };
    let mut len = 0;
    for seg in &p.segments {
        let n = seg.asns.len();
        if n == 0 || n > 255 {
            return Err(EncodeError::AsPathSegment { len: n });
        }
        if !four
            && matches!(
                seg.kind,
                SegmentType::ConfedSequence | SegmentType::ConfedSet
            )
        {
            if let Some(a) = seg.asns.iter().find(|a| **a > 0xffff) {
                return Err(EncodeError::OutOfRange {
                    field: "confederation member as on a 2-octet as session",
                    value: u64::from(*a),
                });
            }
        }
        len += 2 + width * n;
    }
    Ok(len)
}

/// Writes AS_PATH segments [`as_path_len`] accepted. With `four` false, AS numbers above
/// 65535 become AS_TRANS (RFC 6793 section 4.2.2).
fn write_as_path(p: &AsPath, four: bool, room: &mut Room<'_>) {
    for seg in &p.segments {
        // as_path_len refused segments of more than 255.
        room.array([seg.kind as u8, seg.asns.len() as u8]);
        if four {
            seg.asns.iter().for_each(|a| room.u32(*a));
        } else {
            seg.asns
                .iter()
                .for_each(|a| room.u16(u16::try_from(*a).unwrap_or(AS_TRANS)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn ctx(four: bool) -> Context {
        Context {
            four_octet_as: four,
            ..Context::default()
        }
    }

    #[test]
    fn path_attribute_stays_four_words() {
        // The decoder pushes one per attribute of every UPDATE; the rare big payloads
        // are boxed to keep this small (see the enum's doc).
        assert!(std::mem::size_of::<PathAttribute>() <= 4 * std::mem::size_of::<usize>());
    }

    fn dec(wire: &[u8], four: bool) -> Result<PathAttribute, UpdateFault> {
        let (rest, raw) = split(wire).unwrap();
        assert!(rest.is_empty());
        decode(&raw, &ctx(four), Src::copying())
    }

    fn enc(attr: &PathAttribute, four: bool) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode(attr, &ctx(four), &mut out).unwrap();
        out.to_vec()
    }

    #[test]
    fn split_detects_overrun_and_underrun() {
        assert!(split(&[0x40, 0x01]).is_err());
        assert!(split(&[0x40, 0x01, 0x02, 0x00]).is_err());
        assert!(split(&[0x50, 0x02, 0x00]).is_err());
        let (rest, raw) = split(&[0x50, 0x02, 0x00, 0x00, 0xaa]).unwrap();
        assert_eq!((raw.type_code, raw.value.len(), rest), (2, 0, &[0xaa][..]));
    }

    #[test]
    fn well_known_attributes_round_trip() {
        let cases: Vec<(PathAttribute, Vec<u8>)> = vec![
            (
                PathAttribute::Origin(Origin::Incomplete),
                vec![0x40, 0x01, 0x01, 0x02],
            ),
            (
                PathAttribute::NextHop(Ipv4Addr::new(10, 0, 0, 1)),
                vec![0x40, 0x03, 0x04, 0x0a, 0x00, 0x00, 0x01],
            ),
            (
                PathAttribute::LocalPref(100),
                vec![0x40, 0x05, 0x04, 0x00, 0x00, 0x00, 0x64],
            ),
            (PathAttribute::AtomicAggregate, vec![0x40, 0x06, 0x00]),
            (
                PathAttribute::MultiExitDisc(7),
                vec![0x80, 0x04, 0x04, 0x00, 0x00, 0x00, 0x07],
            ),
            (
                PathAttribute::Communities(vec![0xfde8_0064]),
                vec![0xc0, 0x08, 0x04, 0xfd, 0xe8, 0x00, 0x64],
            ),
            (
                PathAttribute::LargeCommunities(vec![LargeCommunity {
                    global_admin: 1,
                    local_data1: 2,
                    local_data2: 3,
                }]),
                vec![0xc0, 0x20, 0x0c, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3],
            ),
        ];
        for (attr, wire) in cases {
            assert_eq!(enc(&attr, true), wire, "{attr:?}");
            assert_eq!(dec(&wire, true), Ok(attr));
        }
    }

    /// Around the one-octet length's limit: 63 communities (252 octets) keep the short
    /// header, 64 (256) take the extended one; so does a 2-octet session's AS_PATH
    /// that outgrows it only in four octets.
    #[test]
    fn the_header_follows_the_value_length_at_the_limit() {
        for (n, extended) in [(63usize, false), (64, true)] {
            let attr = PathAttribute::Communities((0..n as u32).collect());
            let wire = enc(&attr, true);
            let len = 4 * n;
            let head = if extended {
                vec![0xd0, 0x08, (len >> 8) as u8, len as u8]
            } else {
                vec![0xc0, 0x08, len as u8]
            };
            assert_eq!(wire[..head.len()], head[..], "{n} communities");
            assert_eq!(wire.len(), head.len() + len);
            assert_eq!(dec(&wire, true), Ok(attr));
        }
        let path = PathAttribute::AsPath(AsPath {
            segments: vec![AsSegment {
                kind: SegmentType::AsSequence,
                asns: (1..=100).collect(),
            }],
        });
        assert_eq!(enc(&path, false)[..3], [0x40, 0x02, 202]);
        assert_eq!(enc(&path, true)[..4], [0x50, 0x02, 0x01, 0x92]);
        assert_eq!(dec(&enc(&path, true), true), Ok(path));
    }

    #[test]
    fn as_path_width_follows_context() {
        let path = PathAttribute::AsPath(AsPath {
            segments: vec![AsSegment {
                kind: SegmentType::AsSequence,
                asns: vec![65001, 4_200_000_000],
            }],
        });
        assert_eq!(
            enc(&path, true),
            vec![0x40, 0x02, 0x0a, 0x02, 0x02, 0x00, 0x00, 0xfd, 0xe9, 0xfa, 0x56, 0xea, 0x00]
        );
        assert_eq!(
            enc(&path, false),
            vec![0x40, 0x02, 0x06, 0x02, 0x02, 0xfd, 0xe9, 0x5b, 0xa0]
        );
    }

    #[test]
    fn malformed_as_paths() {
        // zero-length segment, unknown type, overrun, one trailing octet
        for v in [
            &[0x02, 0x00][..],
            &[0x05, 0x01, 0x00, 0x01],
            &[0x02, 0x02, 0x00, 0x01],
            &[0x02, 0x01, 0x00, 0x01, 0x02],
        ] {
            assert!(as_path(v, false).is_err(), "{v:x?}");
        }
    }

    #[test]
    fn flag_conflicts_are_detected() {
        // ORIGIN sent as optional
        let e = dec(&[0xc0, 0x01, 0x01, 0x00], true).unwrap_err();
        assert!(matches!(
            e,
            UpdateFault::Malformed {
                type_code: 1,
                problem: AttrProblem::Flags,
                ..
            }
        ));
        // partial bit on a well-known attribute is not a conflict (RFC 7606 section 3 c)
        assert_eq!(
            dec(&[0x60, 0x01, 0x01, 0x00], true),
            Ok(PathAttribute::Origin(Origin::Igp))
        );
    }

    #[test]
    fn unknown_attributes_keep_flags_and_extended_length() {
        let wire = [0xd0, 0x63, 0x00, 0x02, 0xab, 0xcd];
        let attr = dec(&wire, true).unwrap();
        assert_eq!(
            attr,
            PathAttribute::Unknown(Box::new(UnknownAttribute {
                flags: 0xd0,
                type_code: 0x63,
                value: Bytes::from_static(&[0xab, 0xcd])
            }))
        );
        assert_eq!(enc(&attr, true), wire);
        let PathAttribute::Unknown(u) = attr else {
            unreachable!()
        };
        assert_eq!(u.to_propagate().unwrap().flags, 0xf0);
        let non_transitive = UnknownAttribute { flags: 0x80, ..*u };
        assert_eq!(non_transitive.to_propagate(), None);
    }

    #[test]
    fn unrecognized_well_known_is_reported_with_the_attribute() {
        let wire = [0x40, 0x63, 0x01, 0x00];
        assert_eq!(
            dec(&wire, true),
            Err(UpdateFault::UnrecognizedWellKnown {
                type_code: 0x63,
                attribute: Bytes::copy_from_slice(&wire)
            })
        );
    }

    #[test]
    fn mp_reach_ipv6_with_link_local() {
        let mut wire = vec![0x90, 0x0e, 0x00, 0x2c, 0x00, 0x02, 0x01, 0x20];
        wire.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        wire.extend_from_slice(&"fe80::1".parse::<Ipv6Addr>().unwrap().octets());
        wire.extend_from_slice(&[0x00, 0x30, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01]);
        let attr = dec(&wire, true).unwrap();
        let PathAttribute::MpReach(r) = &attr else {
            panic!("{attr:?}")
        };
        assert_eq!(
            r.next_hop,
            MpNextHop::V6 {
                global: "2001:db8::1".parse().unwrap(),
                link_local: Some("fe80::1".parse().unwrap())
            }
        );
        assert_eq!(r.nlri, vec![nlri_of("2001:db8:1::/48")]);
        assert_eq!(enc(&attr, true), wire);
    }

    fn nlri_of(s: &str) -> super::super::types::Nlri {
        super::super::types::Nlri::from(s.parse::<ipnet::IpNet>().unwrap())
    }

    #[test]
    fn mp_reach_with_bad_next_hop_length_is_malformed() {
        let wire = [
            0x80, 0x0e, 0x0a, 0x00, 0x02, 0x01, 0x04, 0x0a, 0x00, 0x00, 0x01, 0x00, 0x00,
        ];
        assert!(matches!(
            dec(&wire, true),
            Err(UpdateFault::Malformed {
                type_code: 14,
                problem: AttrProblem::Value,
                ..
            })
        ));
    }

    #[test]
    fn aggregator_length_depends_on_context() {
        let two = [0xc0, 0x07, 0x06, 0xfd, 0xe9, 0x0a, 0x00, 0x00, 0x01];
        let agg = PathAttribute::Aggregator(Aggregator {
            asn: 65001,
            address: Ipv4Addr::new(10, 0, 0, 1),
        });
        assert_eq!(dec(&two, false), Ok(agg.clone()));
        assert!(matches!(
            dec(&two, true),
            Err(UpdateFault::Malformed {
                type_code: 7,
                problem: AttrProblem::Length,
                ..
            })
        ));
        assert_eq!(enc(&agg, false), two);
    }

    #[test]
    fn as4_attributes_on_four_octet_session_are_unexpected() {
        let wire = [0xc0, 0x11, 0x06, 0x02, 0x01, 0x00, 0x01, 0x00, 0x00];
        assert_eq!(
            dec(&wire, true),
            Err(UpdateFault::UnexpectedAs4 { type_code: 17 })
        );
        assert!(matches!(dec(&wire, false), Ok(PathAttribute::As4Path(_))));
    }
}
