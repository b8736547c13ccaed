//! UPDATE messages (RFC 4271 section 4.3): locating the three fields, the checks that
//! look across attributes (duplicates, missing well-known attributes: RFC 7606
//! section 3), the RFC 6793 section 4.2.3 reconstruction of 4-octet AS paths on a
//! 2-octet session (and its reverse when encoding), and End-of-RIB (RFC 4724 section 2).
//! Must not interpret routes (next hop reachability, policy): the session and the
//! planner do.

use super::attribute;
use super::error::{attr_type as t, DecodeError, EncodeError, NonFatal, UpdateError, UpdateFault};
use super::input::Src;
use super::nlri;
use super::output::Room;
use super::types::{
    AfiSafi, AsPath, AsSegment, MpReach, MpUnreach, Nlri, PathAttribute, SegmentType, Update,
    AS_TRANS,
};
use super::Context;

impl Update {
    /// True when some error requires every NLRI of this UPDATE to be withdrawn
    /// (RFC 7606 section 2, "treat-as-withdraw").
    pub fn treat_as_withdraw(&self) -> bool {
        self.errors
            .iter()
            .any(|e| e.reaction_kind == NonFatal::TreatAsWithdraw)
    }

    /// The MP_REACH_NLRI attribute, if any.
    pub fn mp_reach(&self) -> Option<&MpReach> {
        self.attributes.iter().find_map(|a| match a {
            PathAttribute::MpReach(r) => Some(&**r),
            _ => None,
        })
    }

    /// The MP_UNREACH_NLRI attribute, if any.
    pub fn mp_unreach(&self) -> Option<&MpUnreach> {
        self.attributes.iter().find_map(|a| match a {
            PathAttribute::MpUnreach(u) => Some(&**u),
            _ => None,
        })
    }

    /// The family this UPDATE is the End-of-RIB marker of (RFC 4724 section 2): an empty
    /// UPDATE for IPv4 unicast, or one holding only an empty MP_UNREACH_NLRI.
    pub fn end_of_rib_family(&self) -> Option<AfiSafi> {
        if !self.withdrawn.is_empty() || !self.nlri.is_empty() {
            return None;
        }
        match self.attributes.as_slice() {
            [] => Some(AfiSafi::IPV4_UNICAST),
            [PathAttribute::MpUnreach(u)]
                if u.withdrawn.is_empty()
                    && u.raw_withdrawn.as_ref().is_none_or(|r| r.is_empty()) =>
            {
                Some(u.afi_safi)
            }
            _ => None,
        }
    }
}

/// The End-of-RIB marker for a family (RFC 4724 section 2).
pub fn end_of_rib(afi_safi: AfiSafi) -> Update {
    if afi_safi == AfiSafi::IPV4_UNICAST {
        return Update::default();
    }
    let raw_withdrawn = (!attribute::parsed_family(afi_safi)).then(bytes::Bytes::new);
    Update {
        attributes: vec![PathAttribute::MpUnreach(Box::new(MpUnreach {
            afi_safi,
            withdrawn: Vec::new(),
            raw_withdrawn,
        }))],
        ..Update::default()
    }
}

/// Where the UPDATE's three variable fields are (RFC 4271 section 4.3): (withdrawn
/// routes, path attributes, NLRI). `None` when a length runs past the body.
fn fields(body: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let (wlen, b) = be_u16_len(body)?;
    let (withdrawn, b) = b.split_at_checked(wlen)?;
    let (alen, b) = be_u16_len(b)?;
    let (attrs, nlri) = b.split_at_checked(alen)?;
    Some((withdrawn, attrs, nlri))
}

/// A two-octet length and what follows it.
fn be_u16_len(b: &[u8]) -> Option<(usize, &[u8])> {
    match *b {
        [hi, lo, ref rest @ ..] => Some((usize::from(u16::from_be_bytes([hi, lo])), rest)),
        _ => None,
    }
}

/// A set of 256 attribute type codes.
#[derive(Default)]
struct TypeSet([u64; 4]);

impl TypeSet {
    /// Adds `t`; false if it was already there.
    fn insert(&mut self, t: u8) -> bool {
        let (w, b) = (usize::from(t >> 6), 1u64 << (t & 63));
        let fresh = self.0[w] & b == 0;
        self.0[w] |= b;
        fresh
    }

    fn contains(&self, t: u8) -> bool {
        self.0[usize::from(t >> 6)] & (1u64 << (t & 63)) != 0
    }
}

/// Records a fault: fatal ones end decoding, the others are kept on the UPDATE.
fn note(errors: &mut Vec<UpdateError>, fault: UpdateFault) -> Result<(), DecodeError> {
    match UpdateError::from_fault(fault.clone()) {
        Some(e) => {
            errors.push(e);
            Ok(())
        }
        None => Err(DecodeError::Update(fault)),
    }
}

/// Decodes an UPDATE body (after the header).
pub(crate) fn decode(body: &[u8], ctx: &Context, src: Src<'_>) -> Result<Update, DecodeError> {
    let (withdrawn_field, mut attrs, nlri_field) =
        fields(body).ok_or(DecodeError::Update(UpdateFault::FieldLengths))?;
    let invalid = |_| DecodeError::Update(UpdateFault::InvalidNetworkField);
    let mut update = Update {
        withdrawn: nlri::parse_v4(withdrawn_field, ctx.add_path_ipv4_unicast).map_err(invalid)?,
        nlri: nlri::parse_v4(nlri_field, ctx.add_path_ipv4_unicast).map_err(invalid)?,
        ..Update::default()
    };

    let mut seen = TypeSet::default();
    if !attrs.is_empty() {
        update.attributes.reserve(8);
    }
    while !attrs.is_empty() {
        let Ok((rest, raw)) = attribute::split(attrs) else {
            // RFC 7606 section 4: stop here; the NLRI field was located by the Total
            // Attribute Length, and any MP_* attribute already parsed stays listed.
            note(&mut update.errors, UpdateFault::AttributeOverrun)?;
            break;
        };
        attrs = rest;
        if !seen.insert(raw.type_code) {
            let fault = if matches!(raw.type_code, t::MP_REACH_NLRI | t::MP_UNREACH_NLRI) {
                UpdateFault::DuplicateMpAttribute {
                    type_code: raw.type_code,
                }
            } else {
                UpdateFault::DuplicateAttribute {
                    type_code: raw.type_code,
                }
            };
            note(&mut update.errors, fault)?;
            continue;
        }
        match attribute::decode(&raw, ctx, src) {
            Ok(a) => update.attributes.push(a),
            Err(fault) => note(&mut update.errors, fault)?,
        }
    }

    // RFC 4271 section 6.3 with RFC 4760 section 3: ORIGIN and AS_PATH whenever there is
    // reachability, NEXT_HOP only for the IPv4 NLRI field. A malformed attribute counts
    // as present here: it already has its own error.
    let reach = !update.nlri.is_empty() || seen.contains(t::MP_REACH_NLRI);
    if reach {
        for required in [t::ORIGIN, t::AS_PATH] {
            if !seen.contains(required) {
                note(
                    &mut update.errors,
                    UpdateFault::MissingWellKnown {
                        type_code: required,
                    },
                )?;
            }
        }
        if !update.nlri.is_empty() && !seen.contains(t::NEXT_HOP) {
            note(
                &mut update.errors,
                UpdateFault::MissingWellKnown {
                    type_code: t::NEXT_HOP,
                },
            )?;
        }
    }
    if !ctx.four_octet_as && (seen.contains(t::AS4_PATH) || seen.contains(t::AS4_AGGREGATOR)) {
        reconcile_as4(&mut update)?;
    }
    Ok(update)
}

/// RFC 6793 section 4.2.3: on a session with an OLD (2-octet) speaker, rebuild the real
/// AGGREGATOR and AS_PATH from AS4_AGGREGATOR and AS4_PATH, and drop the AS4_*
/// attributes, so that the rest of the speaker only ever sees 4-octet AS numbers.
fn reconcile_as4(update: &mut Update) -> Result<(), DecodeError> {
    let mut as4_path = None;
    let mut as4_aggregator = None;
    update.attributes.retain(|a| match a {
        PathAttribute::As4Path(p) => {
            as4_path = Some(p.clone());
            false
        }
        PathAttribute::As4Aggregator(g) => {
            as4_aggregator = Some(*g);
            false
        }
        _ => true,
    });
    let mut ignore_as4 = false;
    for a in update.attributes.iter_mut() {
        if let PathAttribute::Aggregator(agg) = a {
            if agg.asn != u32::from(AS_TRANS) {
                // The aggregation was done by an OLD speaker after the AS4_* attributes
                // were attached: they are stale and SHALL be ignored.
                ignore_as4 = true;
            } else if let Some(real) = as4_aggregator {
                *agg = real;
            }
        }
    }
    if ignore_as4 {
        return Ok(());
    }
    let Some(mut as4) = as4_path else {
        return Ok(());
    };
    let before = as4.segments.len();
    as4.segments
        .retain(|s| matches!(s.kind, SegmentType::AsSequence | SegmentType::AsSet));
    if as4.segments.len() != before {
        note(&mut update.errors, UpdateFault::As4PathConfed)?;
    }
    for a in update.attributes.iter_mut() {
        if let PathAttribute::AsPath(path) = a {
            *path = merge_as4_path(path, as4);
            break;
        }
    }
    Ok(())
}

/// Path length for RFC 4271 section 9.1.2.2 (d): an AS_SET counts once, confederation
/// segments not at all (RFC 5065 section 5.3).
fn path_count(p: &AsPath) -> usize {
    p.segments
        .iter()
        .map(|s| match s.kind {
            SegmentType::AsSequence => s.asns.len(),
            SegmentType::AsSet => 1,
            SegmentType::ConfedSequence | SegmentType::ConfedSet => 0,
        })
        .sum()
}

/// RFC 6793 section 4.2.3: keep the leading ASes of AS_PATH that AS4_PATH does not
/// cover (those added by OLD speakers), then append AS4_PATH. An AS4_PATH longer than
/// AS_PATH is ignored.
fn merge_as4_path(as_path: &AsPath, as4: AsPath) -> AsPath {
    let (n, n4) = (path_count(as_path), path_count(&as4));
    if n < n4 {
        return as_path.clone();
    }
    let mut need = n - n4;
    let mut segments: Vec<AsSegment> =
        Vec::with_capacity(as_path.segments.len() + as4.segments.len());
    for seg in &as_path.segments {
        match seg.kind {
            SegmentType::ConfedSequence | SegmentType::ConfedSet => segments.push(seg.clone()),
            SegmentType::AsSet if need > 0 => {
                segments.push(seg.clone());
                need -= 1;
            }
            SegmentType::AsSequence if need > 0 => {
                let k = need.min(seg.asns.len());
                segments.push(AsSegment {
                    kind: SegmentType::AsSequence,
                    asns: seg.asns[..k].to_vec(),
                });
                need -= k;
            }
            SegmentType::AsSet | SegmentType::AsSequence => {}
        }
    }
    let mut rest = as4.segments.into_iter();
    if let (Some(last), Some(first)) = (segments.last_mut(), rest.as_slice().first()) {
        let both_seq =
            last.kind == SegmentType::AsSequence && first.kind == SegmentType::AsSequence;
        if both_seq && last.asns.len() + first.asns.len() <= 255 {
            last.asns.extend_from_slice(&first.asns);
            rest.next();
        }
    }
    segments.extend(rest);
    AsPath { segments }
}

/// Attributes whose value lengths [`plan`] keeps for [`write`]; any further ones (no
/// real UPDATE has them) are sized again when written.
const KEPT_LENGTHS: usize = 16;

/// An UPDATE body checked and sized by [`plan`], ready for [`write`]: the message is
/// sized first so that it is written into room made once.
pub(crate) struct Planned {
    /// AS4_PATH / AS4_AGGREGATOR a 2-octet AS session needs (RFC 6793 section 4.2.2);
    /// empty on 4-octet sessions, where nothing is allocated.
    extras: Vec<PathAttribute>,
    withdrawn: u16,
    attributes: u16,
    nlri: usize,
    /// The first attributes' value lengths (the extras after the caller's), so that
    /// writing does not size them twice.
    value_lens: [u16; KEPT_LENGTHS],
}

impl Planned {
    /// The body's octets: both length fields and the three lists.
    pub(crate) fn len(&self) -> usize {
        2 + usize::from(self.withdrawn) + 2 + usize::from(self.attributes) + self.nlri
    }
}

/// Checks an UPDATE body for everything writing it can refuse and sizes it. On a
/// 2-octet AS session, AS4_PATH / AS4_AGGREGATOR are appended when AS_PATH / AGGREGATOR
/// hold AS numbers above 65535, unless the caller supplied them.
pub(crate) fn plan(u: &Update, ctx: &Context) -> Result<Planned, EncodeError> {
    let wlen = nlri::list_len(
        &u.withdrawn,
        AfiSafi::IPV4_UNICAST,
        ctx.add_path_ipv4_unicast,
    )?;
    let withdrawn = u16::try_from(wlen).map_err(|_| EncodeError::FieldTooLong {
        field: "withdrawn routes",
        len: wlen,
    })?;
    let mut value_lens = [0; KEPT_LENGTHS];
    let mut alen = 0;
    let mut size = |i: usize, a: &PathAttribute| -> Result<(), EncodeError> {
        let value = attribute::checked_value_len(a, ctx)?;
        if let Some(slot) = value_lens.get_mut(i) {
            *slot = value;
        }
        alen += attribute::header_len(a, value) + usize::from(value);
        Ok(())
    };
    for (i, a) in u.attributes.iter().enumerate() {
        size(i, a)?;
    }
    let extras = if ctx.four_octet_as {
        Vec::new()
    } else {
        as4_attributes(&u.attributes)
    };
    for extra in &extras {
        if let PathAttribute::As4Path(_) = extra {
            check_confed_leading(&u.attributes)?;
        }
    }
    for (i, extra) in extras.iter().enumerate() {
        size(u.attributes.len() + i, extra)?;
    }
    let attributes = u16::try_from(alen).map_err(|_| EncodeError::FieldTooLong {
        field: "path attributes",
        len: alen,
    })?;
    let nlri = nlri::list_len(&u.nlri, AfiSafi::IPV4_UNICAST, ctx.add_path_ipv4_unicast)?;
    Ok(Planned {
        extras,
        withdrawn,
        attributes,
        nlri,
        value_lens,
    })
}

/// Writes the body [`plan`] checked and sized, with [`output::SLACK`] octets of room
/// past it.
///
/// [`output::SLACK`]: super::output::SLACK
pub(crate) fn write(
    u: &Update,
    ctx: &Context,
    planned: &Planned,
    room: &mut Room<'_>,
) -> Result<(), EncodeError> {
    room.u16(planned.withdrawn);
    nlri::write_list(room, &u.withdrawn);
    room.u16(planned.attributes);
    for (i, a) in u.attributes.iter().chain(&planned.extras).enumerate() {
        let value = match planned.value_lens.get(i) {
            Some(value) => *value,
            None => attribute::checked_value_len(a, ctx)?,
        };
        attribute::write(a, ctx, value, room);
    }
    nlri::write_list(room, &u.nlri);
    Ok(())
}

/// With AS4_PATH, a 2-octet session can only carry confederation segments in front of
/// the path (where RFC 5065 puts them): the receiver rebuilds the path as those segments
/// followed by AS4_PATH.
fn check_confed_leading(attrs: &[PathAttribute]) -> Result<(), EncodeError> {
    for a in attrs {
        if let PathAttribute::AsPath(p) = a {
            let confed = |s: &AsSegment| {
                matches!(s.kind, SegmentType::ConfedSequence | SegmentType::ConfedSet)
            };
            let first_plain = p
                .segments
                .iter()
                .position(|s| !confed(s))
                .unwrap_or(p.segments.len());
            if p.segments[first_plain..].iter().any(confed) {
                return Err(EncodeError::Unrepresentable(
                    "confederation segment after a plain segment in an AS_PATH that needs AS4_PATH",
                ));
            }
        }
    }
    Ok(())
}

/// The AS4_PATH / AS4_AGGREGATOR a 2-octet AS session needs for these attributes
/// (RFC 6793 section 4.2.2): only when some AS number does not fit two octets, never
/// with confederation segments, and not when the caller already supplied them.
pub(crate) fn as4_attributes(attrs: &[PathAttribute]) -> Vec<PathAttribute> {
    let mut extra = Vec::new();
    let has = |code| attrs.iter().any(|a| a.type_code() == code);
    for a in attrs {
        match a {
            PathAttribute::AsPath(p) if !has(t::AS4_PATH) => {
                let wide = p
                    .segments
                    .iter()
                    .filter(|s| matches!(s.kind, SegmentType::AsSequence | SegmentType::AsSet))
                    .any(|s| s.asns.iter().any(|a| *a > 0xffff));
                if wide {
                    let segments = p
                        .segments
                        .iter()
                        .filter(|s| matches!(s.kind, SegmentType::AsSequence | SegmentType::AsSet))
                        .cloned()
                        .collect();
                    extra.push(PathAttribute::As4Path(AsPath { segments }));
                }
            }
            PathAttribute::Aggregator(g) if g.asn > 0xffff && !has(t::AS4_AGGREGATOR) => {
                extra.push(PathAttribute::As4Aggregator(*g));
            }
            _ => {}
        }
    }
    extra
}

/// Which AS number width the AS_PATH of a whole UPDATE message (header included) was
/// written with: `Some(true)` for four octets, `Some(false)` for two, `None` when there
/// is no AS_PATH, it is empty, or both or neither width parse. For readers of captures
/// (MRT, pcap) that do not know what the session negotiated: the MRT subtype does not
/// tell (RFC 6396 section 4.4.2 records the peer AS width, not the AS_PATH's).
pub fn sniff_four_octet_as(msg: &[u8]) -> Option<bool> {
    let (_, mut attrs, _) = fields(msg.get(super::HEADER_LEN..)?)?;
    while !attrs.is_empty() {
        let (rest, raw) = attribute::split(attrs).ok()?;
        if raw.type_code == t::AS_PATH {
            if raw.value.is_empty() {
                return None;
            }
            let two = attribute::as_path(raw.value, false).is_ok();
            let four = attribute::as_path(raw.value, true).is_ok();
            return (two != four).then_some(four);
        }
        attrs = rest;
    }
    None
}

/// Every prefix this UPDATE announces, IPv4 field and MP_REACH_NLRI together, with the
/// family each belongs to.
pub fn announced(update: &Update) -> impl Iterator<Item = (AfiSafi, &Nlri)> {
    let v4 = update.nlri.iter().map(|n| (AfiSafi::IPV4_UNICAST, n));
    let mp = update
        .mp_reach()
        .into_iter()
        .flat_map(|r| r.nlri.iter().map(move |n| (r.afi_safi, n)));
    v4.chain(mp)
}

/// Every prefix this UPDATE withdraws, IPv4 field and MP_UNREACH_NLRI together; with
/// treat-as-withdraw in force, the announced prefixes too (RFC 7606 section 2).
pub fn withdrawn(update: &Update) -> impl Iterator<Item = (AfiSafi, &Nlri)> {
    let v4 = update.withdrawn.iter().map(|n| (AfiSafi::IPV4_UNICAST, n));
    let mp = update
        .mp_unreach()
        .into_iter()
        .flat_map(|u| u.withdrawn.iter().map(move |n| (u.afi_safi, n)));
    let taw = update
        .treat_as_withdraw()
        .then(|| announced(update))
        .into_iter()
        .flatten();
    v4.chain(mp).chain(taw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bgp::wire::types::{attr_flags, Aggregator, Origin, UnknownAttribute};
    use bytes::BytesMut;
    use std::net::Ipv4Addr;

    fn seq(asns: &[u32]) -> AsSegment {
        AsSegment {
            kind: SegmentType::AsSequence,
            asns: asns.to_vec(),
        }
    }

    fn ctx2() -> Context {
        Context::default()
    }

    fn base_attrs(path: AsPath) -> Vec<PathAttribute> {
        vec![
            PathAttribute::Origin(Origin::Igp),
            PathAttribute::AsPath(path),
            PathAttribute::NextHop(Ipv4Addr::new(192, 0, 2, 1)),
        ]
    }

    /// The body alone, as `message::encode_update` writes it after the header.
    fn encode(u: &Update, ctx: &Context, out: &mut BytesMut) -> Result<(), EncodeError> {
        let planned = plan(u, ctx)?;
        crate::bgp::wire::output::append(out, planned.len(), |room| write(u, ctx, &planned, room))
    }

    fn round(u: &Update, ctx: &Context) -> Update {
        let mut out = BytesMut::new();
        encode(u, ctx, &mut out).unwrap();
        decode(&out, ctx, Src::copying()).unwrap()
    }

    #[test]
    fn four_octet_path_survives_a_two_octet_session() {
        let path = AsPath {
            segments: vec![seq(&[65001, 4_200_000_000, 65002])],
        };
        let mut attrs = base_attrs(path.clone());
        attrs.push(PathAttribute::Aggregator(Aggregator {
            asn: 4_200_000_001,
            address: Ipv4Addr::new(10, 0, 0, 1),
        }));
        let u = Update {
            attributes: attrs,
            nlri: vec![Nlri::from("10.0.0.0/8".parse::<ipnet::IpNet>().unwrap())],
            ..Update::default()
        };
        let mut out = BytesMut::new();
        encode(&u, &ctx2(), &mut out).unwrap();
        // AS_PATH carries AS_TRANS (0x5ba0), AS4_PATH (0xc0 0x11) follows.
        assert!(out.windows(2).any(|w| w == [0x5b, 0xa0]));
        assert!(out.windows(2).any(|w| w == [0xc0, 0x11]));
        assert!(out.windows(2).any(|w| w == [0xc0, 0x12]));
        assert_eq!(decode(&out, &ctx2(), Src::copying()).unwrap(), u);
    }

    #[test]
    fn attributes_past_the_kept_lengths_are_sized_again() {
        let mut attributes = base_attrs(AsPath::default());
        attributes.extend((0..2 * KEPT_LENGTHS as u8).map(|i| {
            PathAttribute::from(UnknownAttribute {
                flags: attr_flags::OPTIONAL | attr_flags::TRANSITIVE,
                type_code: 100 + i,
                value: bytes::Bytes::from(vec![i; usize::from(i) * 5]),
            })
        }));
        let u = Update {
            attributes,
            nlri: vec![Nlri::from("10.0.0.0/8".parse::<ipnet::IpNet>().unwrap())],
            ..Update::default()
        };
        assert_eq!(round(&u, &ctx2()), u);
    }

    #[test]
    fn trailing_confed_segment_cannot_travel_with_as4_path() {
        let path = AsPath {
            segments: vec![
                seq(&[4_200_000_000]),
                AsSegment {
                    kind: SegmentType::ConfedSequence,
                    asns: vec![65000],
                },
            ],
        };
        let u = Update {
            attributes: base_attrs(path.clone()),
            ..Update::default()
        };
        let mut out = BytesMut::new();
        assert!(matches!(
            encode(&u, &ctx2(), &mut out),
            Err(EncodeError::Unrepresentable(_))
        ));
        let four = Context {
            four_octet_as: true,
            ..ctx2()
        };
        assert_eq!(round(&u, &four).attributes[1], PathAttribute::AsPath(path));
    }

    #[test]
    fn merge_keeps_ases_prepended_by_old_speakers() {
        // AS_PATH from an OLD speaker: 100 prepended in front of AS_TRANS.
        let as_path = AsPath {
            segments: vec![seq(&[100, 200, 23456])],
        };
        let as4 = AsPath {
            segments: vec![seq(&[200, 4_200_000_000])],
        };
        assert_eq!(
            merge_as4_path(&as_path, as4).segments,
            vec![seq(&[100, 200, 4_200_000_000])]
        );
        // AS4_PATH longer than AS_PATH: ignored.
        let short = AsPath {
            segments: vec![seq(&[23456])],
        };
        assert_eq!(
            merge_as4_path(
                &short,
                AsPath {
                    segments: vec![seq(&[1, 2])]
                }
            ),
            short
        );
    }

    #[test]
    fn stale_as4_attributes_are_ignored_when_aggregator_is_not_as_trans() {
        let mut u = Update {
            attributes: vec![
                PathAttribute::AsPath(AsPath {
                    segments: vec![seq(&[1, 23456])],
                }),
                PathAttribute::Aggregator(Aggregator {
                    asn: 7,
                    address: Ipv4Addr::new(1, 1, 1, 1),
                }),
                PathAttribute::As4Path(AsPath {
                    segments: vec![seq(&[4_200_000_000])],
                }),
                PathAttribute::As4Aggregator(Aggregator {
                    asn: 4_200_000_000,
                    address: Ipv4Addr::new(2, 2, 2, 2),
                }),
            ],
            ..Update::default()
        };
        reconcile_as4(&mut u).unwrap();
        assert_eq!(u.attributes.len(), 2);
        assert_eq!(
            u.attributes[0],
            PathAttribute::AsPath(AsPath {
                segments: vec![seq(&[1, 23456])]
            })
        );
    }

    #[test]
    fn withdrawal_only_update_needs_no_attributes() {
        let u = Update {
            withdrawn: vec![Nlri::from("10.1.0.0/16".parse::<ipnet::IpNet>().unwrap())],
            ..Update::default()
        };
        let back = round(&u, &ctx2());
        assert_eq!(back, u);
        assert!(back.errors.is_empty());
    }

    #[test]
    fn sniffs_the_as_path_width() {
        let path = AsPath {
            segments: vec![seq(&[65001, 65002, 65003])],
        };
        let u = Update {
            attributes: base_attrs(path),
            ..Update::default()
        };
        for four in [false, true] {
            let ctx = Context {
                four_octet_as: four,
                ..ctx2()
            };
            let mut msg = BytesMut::from(&[0xff; 19][..]);
            encode(&u, &ctx, &mut msg).unwrap();
            assert_eq!(sniff_four_octet_as(&msg), Some(four));
        }
        let empty = Update {
            attributes: base_attrs(AsPath::default()),
            ..Update::default()
        };
        let mut msg = BytesMut::from(&[0xff; 19][..]);
        encode(&empty, &ctx2(), &mut msg).unwrap();
        assert_eq!(sniff_four_octet_as(&msg), None);
        assert_eq!(sniff_four_octet_as(&[0xff; 10]), None);
    }

    #[test]
    fn end_of_rib_markers() {
        let v4 = end_of_rib(AfiSafi::IPV4_UNICAST);
        let v6 = end_of_rib(AfiSafi::IPV6_UNICAST);
        let mut out = BytesMut::new();
        encode(&v4, &ctx2(), &mut out).unwrap();
        assert_eq!(&out[..], &[0x00, 0x00, 0x00, 0x00]);
        out.clear();
        encode(&v6, &ctx2(), &mut out).unwrap();
        assert_eq!(
            &out[..],
            &[0x00, 0x00, 0x00, 0x07, 0x90, 0x0f, 0x00, 0x03, 0x00, 0x02, 0x01]
        );
        let back = decode(&out, &ctx2(), Src::copying()).unwrap();
        assert_eq!(back.end_of_rib_family(), Some(AfiSafi::IPV6_UNICAST));
        assert_eq!(v4.end_of_rib_family(), Some(AfiSafi::IPV4_UNICAST));
    }

    #[test]
    fn treat_as_withdraw_lists_announced_prefixes_as_withdrawn() {
        // NLRI with ORIGIN missing.
        let u = Update {
            attributes: vec![
                PathAttribute::AsPath(AsPath::default()),
                PathAttribute::NextHop(Ipv4Addr::new(192, 0, 2, 1)),
            ],
            nlri: vec![Nlri::from("10.2.0.0/16".parse::<ipnet::IpNet>().unwrap())],
            ..Update::default()
        };
        let back = round(&u, &ctx2());
        assert!(back.treat_as_withdraw());
        assert_eq!(
            back.errors[0].fault,
            UpdateFault::MissingWellKnown { type_code: 1 }
        );
        assert_eq!(withdrawn(&back).count(), 1);
    }
}
