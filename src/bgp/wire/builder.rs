//! The UPDATE builder: packs prefixes that share one attribute set into the fewest
//! UPDATE messages that fit the negotiated maximum size (4096 octets, or 65535 with
//! RFC 8654), IPv4 unicast in the NLRI / Withdrawn Routes fields and IPv6 unicast in
//! MP_REACH_NLRI / MP_UNREACH_NLRI (RFC 4760). Each message carries only one of those
//! four, MP_* first (RFC 7606 section 5.1). With an extended next hop (RFC 8950) IPv4
//! announcements go in MP_REACH_NLRI (AFI 1, SAFI 1) with an IPv6 next hop instead. It encodes attributes once and writes
//! prefixes straight into the caller's `BytesMut`. Must not decide which prefixes to
//! send: the planner does.

use bytes::{BufMut, Bytes, BytesMut};

use super::attribute;
use super::error::{attr_type as t, EncodeError};
use super::message::MARKER;
use super::nlri;
use super::types::{
    AfiSafi, MessageType, MpNextHop, MpReach, MpUnreach, Nlri, PathAttribute, Update,
};
use super::update::as4_attributes;
use super::{Context, HEADER_LEN};

/// Header, Withdrawn Routes Length and Total Path Attribute Length.
const UPDATE_FIXED: usize = HEADER_LEN + 2 + 2;
/// The longest attribute header (flags, type, 2-octet length).
const LONG_ATTR_HEADER: usize = 4;

/// Encodes the attribute set once and packs prefixes into UPDATEs with it.
#[derive(Debug, Clone)]
pub struct UpdateBuilder {
    ctx: Context,
    /// The attribute values, as given.
    attrs: Vec<PathAttribute>,
    /// Encoded attributes for IPv4 NLRI-field messages (with NEXT_HOP).
    v4_attrs: Vec<u8>,
    has_next_hop: bool,
    /// Encoded attributes that follow MP_REACH_NLRI (without NEXT_HOP: RFC 4760
    /// section 3 says an UPDATE with only MP_REACH SHOULD NOT carry it).
    mp_attrs: Vec<u8>,
    ipv6_next_hop: Option<MpNextHop>,
    /// RFC 8950: the MP_REACH_NLRI next hop of IPv4 announcements, which then leave the
    /// NLRI field.
    ipv4_mp_next_hop: Option<MpNextHop>,
}

impl UpdateBuilder {
    /// `attrs` is the shared attribute set (no MP_REACH_NLRI / MP_UNREACH_NLRI; a
    /// NEXT_HOP for IPv4 prefixes); `ipv6_next_hop` is the MP_REACH_NLRI next hop for
    /// IPv6 prefixes. A builder with no attributes can still withdraw.
    pub fn new(
        ctx: &Context,
        attrs: &[PathAttribute],
        ipv6_next_hop: Option<MpNextHop>,
    ) -> Result<UpdateBuilder, EncodeError> {
        if attrs
            .iter()
            .any(|a| matches!(a, PathAttribute::MpReach(_) | PathAttribute::MpUnreach(_)))
        {
            return Err(EncodeError::Builder(
                "the attribute set must not hold MP_REACH_NLRI or MP_UNREACH_NLRI",
            ));
        }
        let extras = if ctx.four_octet_as {
            Vec::new()
        } else {
            as4_attributes(attrs)
        };
        let mut v4 = BytesMut::new();
        let mut mp = BytesMut::new();
        for a in attrs.iter().chain(extras.iter()) {
            attribute::encode(a, ctx, &mut v4)?;
            if a.type_code() != t::NEXT_HOP {
                attribute::encode(a, ctx, &mut mp)?;
            }
        }
        Ok(UpdateBuilder {
            ctx: *ctx,
            attrs: attrs.to_vec(),
            v4_attrs: v4.to_vec(),
            has_next_hop: attrs.iter().any(|a| a.type_code() == t::NEXT_HOP),
            mp_attrs: mp.to_vec(),
            ipv6_next_hop,
            ipv4_mp_next_hop: None,
        })
    }

    /// Announces IPv4 prefixes in MP_REACH_NLRI (AFI 1, SAFI 1) with `next_hop`, an IPv6
    /// address (RFC 8950 section 3: 16 octets global, or 32 global and link-local),
    /// instead of in the NLRI field with NEXT_HOP. Only for a peer that advertised the
    /// Extended Next Hop Encoding capability for IPv4 unicast. Withdrawals stay in the
    /// Withdrawn Routes field, which RFC 4760 section 4 allows for IPv4 unicast.
    pub fn with_ipv4_extended_next_hop(
        mut self,
        next_hop: MpNextHop,
    ) -> Result<UpdateBuilder, EncodeError> {
        if !matches!(next_hop, MpNextHop::V6 { .. }) {
            return Err(EncodeError::Builder(
                "an extended next hop for ipv4 prefixes must be an ipv6 address",
            ));
        }
        self.ipv4_mp_next_hop = Some(next_hop);
        Ok(self)
    }

    /// Appends the UPDATEs announcing `prefixes` (IPv4 first, then IPv6, each in input
    /// order) to `out`; returns how many messages were written. On error `out` is left
    /// as it was.
    pub fn announce<P: Copy + Into<Nlri>>(
        &self,
        prefixes: &[P],
        out: &mut BytesMut,
    ) -> Result<usize, EncodeError> {
        let start = out.len();
        let res = self.announce_inner(prefixes, out);
        if res.is_err() {
            out.truncate(start);
        }
        res
    }

    /// Appends the UPDATEs withdrawing `prefixes` to `out`; returns how many messages
    /// were written. On error `out` is left as it was.
    pub fn withdraw<P: Copy + Into<Nlri>>(
        &self,
        prefixes: &[P],
        out: &mut BytesMut,
    ) -> Result<usize, EncodeError> {
        let start = out.len();
        let res = self.withdraw_inner(prefixes, out);
        if res.is_err() {
            out.truncate(start);
        }
        res
    }

    /// The same messages as [`UpdateBuilder::announce`], as values.
    pub fn announce_updates<P: Copy + Into<Nlri>>(
        &self,
        prefixes: &[P],
    ) -> Result<Vec<Update>, EncodeError> {
        let mut updates = Vec::new();
        let v4 = family_iter(prefixes, true);
        if v4.clone().next().is_some() {
            if let Some(nh) = &self.ipv4_mp_next_hop {
                self.mp_announce_updates(v4, AfiSafi::IPV4_UNICAST, nh, &mut updates)?;
            } else {
                let budget = self.v4_budget()?;
                for chunk in Chunks::new(v4, self.ctx.add_path_ipv4_unicast, budget) {
                    let chunk = chunk?;
                    updates.push(Update {
                        attributes: self.attrs.clone(),
                        nlri: chunk,
                        ..Update::default()
                    });
                }
            }
        }
        let v6 = family_iter(prefixes, false);
        if v6.clone().next().is_some() {
            let nh = self.ipv6_next_hop()?;
            self.mp_announce_updates(v6, AfiSafi::IPV6_UNICAST, nh, &mut updates)?;
        }
        Ok(updates)
    }

    /// Announcements of one family in MP_REACH_NLRI, as values.
    fn mp_announce_updates(
        &self,
        prefixes: impl Iterator<Item = Nlri> + Clone,
        family: AfiSafi,
        next_hop: &MpNextHop,
        updates: &mut Vec<Update>,
    ) -> Result<(), EncodeError> {
        let budget = self.mp_budget(next_hop);
        for chunk in Chunks::new(prefixes, self.add_path(family), budget) {
            let mut attributes = Vec::with_capacity(self.attrs.len());
            attributes.push(PathAttribute::MpReach(Box::new(MpReach {
                afi_safi: family,
                next_hop: next_hop.clone(),
                nlri: chunk?,
                raw_nlri: None,
            })));
            attributes.extend(
                self.attrs
                    .iter()
                    .filter(|a| a.type_code() != t::NEXT_HOP)
                    .cloned(),
            );
            updates.push(Update {
                attributes,
                ..Update::default()
            });
        }
        Ok(())
    }

    fn add_path(&self, family: AfiSafi) -> bool {
        if family == AfiSafi::IPV4_UNICAST {
            self.ctx.add_path_ipv4_unicast
        } else {
            self.ctx.add_path_ipv6_unicast
        }
    }

    /// The same messages as [`UpdateBuilder::withdraw`], as values.
    pub fn withdraw_updates<P: Copy + Into<Nlri>>(
        &self,
        prefixes: &[P],
    ) -> Result<Vec<Update>, EncodeError> {
        let mut updates = Vec::new();
        for chunk in Chunks::new(
            family_iter(prefixes, true),
            self.ctx.add_path_ipv4_unicast,
            self.v4_withdraw_budget(),
        ) {
            updates.push(Update {
                withdrawn: chunk?,
                ..Update::default()
            });
        }
        for chunk in Chunks::new(
            family_iter(prefixes, false),
            self.ctx.add_path_ipv6_unicast,
            self.v6_withdraw_budget(),
        ) {
            updates.push(Update {
                attributes: vec![PathAttribute::MpUnreach(Box::new(MpUnreach {
                    afi_safi: AfiSafi::IPV6_UNICAST,
                    withdrawn: chunk?,
                    raw_withdrawn: None,
                }))],
                ..Update::default()
            });
        }
        Ok(updates)
    }

    fn v4_budget(&self) -> Result<usize, EncodeError> {
        if !self.has_next_hop {
            return Err(EncodeError::Builder(
                "ipv4 prefixes need a NEXT_HOP in the attribute set",
            ));
        }
        Ok(self
            .ctx
            .max_message_len()
            .saturating_sub(UPDATE_FIXED + self.v4_attrs.len()))
    }

    fn ipv6_next_hop(&self) -> Result<&MpNextHop, EncodeError> {
        self.ipv6_next_hop
            .as_ref()
            .ok_or(EncodeError::Builder("ipv6 prefixes need an ipv6 next hop"))
    }

    /// NLRI octets left in an MP_REACH_NLRI message with this next hop.
    fn mp_budget(&self, nh: &MpNextHop) -> usize {
        let fixed = UPDATE_FIXED + mp_reach_fixed(nh) + self.mp_attrs.len();
        self.ctx.max_message_len().saturating_sub(fixed)
    }

    fn v4_withdraw_budget(&self) -> usize {
        self.ctx.max_message_len() - UPDATE_FIXED
    }

    fn v6_withdraw_budget(&self) -> usize {
        self.ctx.max_message_len() - UPDATE_FIXED - LONG_ATTR_HEADER - 3
    }

    fn announce_inner<P: Copy + Into<Nlri>>(
        &self,
        prefixes: &[P],
        out: &mut BytesMut,
    ) -> Result<usize, EncodeError> {
        let mut messages = 0;
        let v4 = family_iter(prefixes, true);
        if let (true, Some(nh)) = (v4.clone().next().is_some(), &self.ipv4_mp_next_hop) {
            messages += self.mp_announce(v4, AfiSafi::IPV4_UNICAST, nh, out)?;
        } else if v4.clone().next().is_some() {
            let add_path = self.ctx.add_path_ipv4_unicast;
            let budget = self.v4_budget()?;
            let mut rest = v4;
            while let Some((n, bytes)) = plan(&rest, add_path, budget)? {
                let msg = start_message(out, UPDATE_FIXED + self.v4_attrs.len() + bytes);
                out.put_u16(0);
                out.put_u16(self.v4_attrs.len() as u16);
                out.put_slice(&self.v4_attrs);
                write_prefixes(&mut rest, n, AfiSafi::IPV4_UNICAST, add_path, out)?;
                finish_message(out, msg);
                messages += 1;
            }
        }
        let v6 = family_iter(prefixes, false);
        if v6.clone().next().is_some() {
            let nh = self.ipv6_next_hop()?;
            messages += self.mp_announce(v6, AfiSafi::IPV6_UNICAST, nh, out)?;
        }
        Ok(messages)
    }

    /// Writes the MP_REACH_NLRI announcements of one family; returns the message count.
    fn mp_announce(
        &self,
        mut rest: impl Iterator<Item = Nlri> + Clone,
        family: AfiSafi,
        nh: &MpNextHop,
        out: &mut BytesMut,
    ) -> Result<usize, EncodeError> {
        let add_path = self.add_path(family);
        let budget = self.mp_budget(nh);
        let mut messages = 0;
        while let Some((n, bytes)) = plan(&rest, add_path, budget)? {
            let content = 2 + 1 + attribute::next_hop_len(nh) + 1 + bytes;
            let attrs_len = LONG_ATTR_HEADER + content + self.mp_attrs.len();
            let msg = start_message(out, UPDATE_FIXED + attrs_len);
            out.put_u16(0);
            // bounded by the message budget, below 65535
            out.put_u16(attrs_len as u16);
            put_mp_header(out, t::MP_REACH_NLRI, content);
            out.put_u16(family.afi.0);
            out.put_u8(family.safi.0);
            attribute::put_next_hop(nh, out)?;
            out.put_u8(0);
            write_prefixes(&mut rest, n, family, add_path, out)?;
            out.put_slice(&self.mp_attrs);
            finish_message(out, msg);
            messages += 1;
        }
        Ok(messages)
    }

    fn withdraw_inner<P: Copy + Into<Nlri>>(
        &self,
        prefixes: &[P],
        out: &mut BytesMut,
    ) -> Result<usize, EncodeError> {
        let mut messages = 0;
        let add_path = self.ctx.add_path_ipv4_unicast;
        let mut rest = family_iter(prefixes, true);
        while let Some((n, bytes)) = plan(&rest, add_path, self.v4_withdraw_budget())? {
            let msg = start_message(out, UPDATE_FIXED + bytes);
            out.put_u16(bytes as u16);
            write_prefixes(&mut rest, n, AfiSafi::IPV4_UNICAST, add_path, out)?;
            out.put_u16(0);
            finish_message(out, msg);
            messages += 1;
        }
        let add_path = self.ctx.add_path_ipv6_unicast;
        let mut rest = family_iter(prefixes, false);
        while let Some((n, bytes)) = plan(&rest, add_path, self.v6_withdraw_budget())? {
            let content = 3 + bytes;
            let msg = start_message(out, UPDATE_FIXED + LONG_ATTR_HEADER + content);
            out.put_u16(0);
            out.put_u16((LONG_ATTR_HEADER + content) as u16);
            put_mp_header(out, t::MP_UNREACH_NLRI, content);
            out.put_u16(AfiSafi::IPV6_UNICAST.afi.0);
            out.put_u8(AfiSafi::IPV6_UNICAST.safi.0);
            write_prefixes(&mut rest, n, AfiSafi::IPV6_UNICAST, add_path, out)?;
            finish_message(out, msg);
            messages += 1;
        }
        Ok(messages)
    }
}

/// Builds the UPDATE values announcing `announce` and withdrawing `withdraw` with one
/// attribute set (withdrawals first). Use [`UpdateBuilder`] directly on the hot path.
pub fn build_updates(
    ctx: &Context,
    attrs: &[PathAttribute],
    ipv6_next_hop: Option<MpNextHop>,
    announce: &[Nlri],
    withdraw: &[Nlri],
) -> Result<Vec<Update>, EncodeError> {
    let b = UpdateBuilder::new(ctx, attrs, ipv6_next_hop)?;
    let mut all = b.withdraw_updates(withdraw)?;
    all.extend(b.announce_updates(announce)?);
    Ok(all)
}

/// Like [`build_updates`], but encoded: one `Bytes` per message, all slices of a single
/// buffer.
pub fn build_update_messages(
    ctx: &Context,
    attrs: &[PathAttribute],
    ipv6_next_hop: Option<MpNextHop>,
    announce: &[Nlri],
    withdraw: &[Nlri],
) -> Result<Vec<Bytes>, EncodeError> {
    let b = UpdateBuilder::new(ctx, attrs, ipv6_next_hop)?;
    let mut out = BytesMut::new();
    b.withdraw(withdraw, &mut out)?;
    b.announce(announce, &mut out)?;
    Ok(split_messages(out.freeze()))
}

/// Splits a buffer of whole, well-formed messages (as the builder writes them).
fn split_messages(mut all: Bytes) -> Vec<Bytes> {
    let mut msgs = Vec::new();
    while all.len() >= HEADER_LEN {
        let len = usize::from(u16::from_be_bytes([all[16], all[17]])).clamp(HEADER_LEN, all.len());
        msgs.push(all.split_to(len));
    }
    msgs
}

/// Octets of MP_REACH_NLRI before its NLRI, with the long attribute header.
fn mp_reach_fixed(nh: &MpNextHop) -> usize {
    LONG_ATTR_HEADER + 2 + 1 + attribute::next_hop_len(nh) + 1
}

/// MP_* attributes always carry the two-octet length, as `attribute::encode` writes them.
fn put_mp_header(out: &mut BytesMut, type_code: u8, content: usize) {
    use super::types::attr_flags::{EXTENDED_LENGTH, OPTIONAL};
    out.put_u8(OPTIONAL | EXTENDED_LENGTH);
    out.put_u8(type_code);
    // bounded by the message budget
    out.put_u16(content as u16);
}

/// The prefixes of one family, in input order.
fn family_iter<P: Copy + Into<Nlri>>(
    prefixes: &[P],
    v4: bool,
) -> impl Iterator<Item = Nlri> + Clone + '_ {
    prefixes
        .iter()
        .map(|p| (*p).into())
        .filter(move |n: &Nlri| n.prefix.addr().is_ipv4() == v4)
}

/// How many of the remaining prefixes fit in `budget` octets, and their size; `None`
/// when there are none left.
fn plan<I: Iterator<Item = Nlri> + Clone>(
    rest: &I,
    add_path: bool,
    budget: usize,
) -> Result<Option<(usize, usize)>, EncodeError> {
    let (mut n, mut bytes) = (0, 0);
    for p in rest.clone() {
        let l = nlri::encoded_len(&p, add_path);
        if bytes + l > budget {
            break;
        }
        bytes += l;
        n += 1;
    }
    if n == 0 {
        return match rest.clone().next() {
            None => Ok(None),
            Some(_) => Err(EncodeError::Builder(
                "the attribute set leaves no room for a prefix",
            )),
        };
    }
    Ok(Some((n, bytes)))
}

fn write_prefixes<I: Iterator<Item = Nlri>>(
    rest: &mut I,
    n: usize,
    family: AfiSafi,
    add_path: bool,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    for p in rest.take(n) {
        nlri::check(&p, family, add_path)?;
        nlri::put(out, &p);
    }
    Ok(())
}

fn start_message(out: &mut BytesMut, len: usize) -> usize {
    out.reserve(len);
    let start = out.len();
    out.put_slice(&MARKER);
    out.put_u16(0);
    out.put_u8(MessageType::Update as u8);
    start
}

fn finish_message(out: &mut BytesMut, start: usize) {
    // Every message is planned within the maximum length, at most 65535.
    let len = (out.len() - start) as u16;
    out[start + 16..start + 18].copy_from_slice(&len.to_be_bytes());
}

/// Chunks of prefixes as the byte path packs them, for the value path.
struct Chunks<I> {
    rest: I,
    add_path: bool,
    budget: usize,
}

impl<I: Iterator<Item = Nlri> + Clone> Chunks<I> {
    fn new(rest: I, add_path: bool, budget: usize) -> Chunks<I> {
        Chunks {
            rest,
            add_path,
            budget,
        }
    }
}

impl<I: Iterator<Item = Nlri> + Clone> Iterator for Chunks<I> {
    type Item = Result<Vec<Nlri>, EncodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        match plan(&self.rest, self.add_path, self.budget) {
            Ok(None) => None,
            Ok(Some((n, _))) => Some(Ok(self.rest.by_ref().take(n).collect())),
            Err(e) => {
                // Stop after reporting: the same input would fail again.
                self.budget = usize::MAX;
                self.rest.by_ref().for_each(drop);
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bgp::wire::{decode_message, encode_message, types::*};
    use ipnet::IpNet;
    use std::net::Ipv4Addr;

    fn attrs() -> Vec<PathAttribute> {
        vec![
            PathAttribute::Origin(Origin::Igp),
            PathAttribute::AsPath(AsPath {
                segments: vec![AsSegment {
                    kind: SegmentType::AsSequence,
                    asns: vec![65001],
                }],
            }),
            PathAttribute::NextHop(Ipv4Addr::new(192, 0, 2, 1)),
        ]
    }

    fn v4_prefixes(n: u32) -> Vec<IpNet> {
        (0..n)
            .map(|i| {
                IpNet::V4(ipnet::Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 + (i << 8)), 24).unwrap())
            })
            .collect()
    }

    fn v6_prefixes(n: u32) -> Vec<IpNet> {
        (0..n)
            .map(|i| {
                IpNet::V6(
                    ipnet::Ipv6Net::new(
                        std::net::Ipv6Addr::from((0x2001_0db8u128 << 96) | (u128::from(i) << 64)),
                        64,
                    )
                    .unwrap(),
                )
            })
            .collect()
    }

    fn nh6() -> MpNextHop {
        MpNextHop::V6 {
            global: "2001:db8::1".parse().unwrap(),
            link_local: None,
        }
    }

    #[test]
    fn packs_ipv4_into_the_fewest_full_messages() {
        let ctx = Context {
            four_octet_as: true,
            ..Context::default()
        };
        let b = UpdateBuilder::new(&ctx, &attrs(), None).unwrap();
        let prefixes = v4_prefixes(3000);
        let mut out = BytesMut::new();
        let n = b.announce(&prefixes, &mut out).unwrap();
        // attrs: 4 + 9 + 7 = 20 octets; budget 4096 - 23 - 20 = 4053; /24 = 4 octets
        let per_msg = (4096 - 23 - 20) / 4;
        assert_eq!(n, 3000usize.div_ceil(per_msg));
        let msgs = split_messages(out.freeze());
        assert_eq!(msgs.len(), n);
        let mut seen = Vec::new();
        for m in &msgs {
            assert!(m.len() <= 4096);
            let Message::Update(u) = decode_message(m, &ctx).unwrap() else {
                panic!()
            };
            assert!(u.errors.is_empty());
            assert_eq!(u.attributes, attrs());
            seen.extend(u.nlri.iter().map(|n| n.prefix));
        }
        assert_eq!(seen, prefixes);
        assert_eq!(msgs[0].len(), 23 + 20 + per_msg * 4);
    }

    #[test]
    fn ipv6_goes_in_mp_reach_first_without_next_hop() {
        let ctx = Context {
            four_octet_as: true,
            ..Context::default()
        };
        let b = UpdateBuilder::new(&ctx, &attrs(), Some(nh6())).unwrap();
        let prefixes = v6_prefixes(1000);
        let values = b.announce_updates(&prefixes).unwrap();
        let mut out = BytesMut::new();
        let n = b.announce(&prefixes, &mut out).unwrap();
        assert_eq!(n, values.len());
        let mut expect = BytesMut::new();
        for u in &values {
            encode_message(&Message::Update(u.clone()), &ctx, &mut expect).unwrap();
            assert!(matches!(u.attributes[0], PathAttribute::MpReach(_)));
            assert!(!u
                .attributes
                .iter()
                .any(|a| matches!(a, PathAttribute::NextHop(_))));
        }
        assert_eq!(out, expect);
        let total: usize = values
            .iter()
            .map(|u| u.mp_reach().unwrap().nlri.len())
            .sum();
        assert_eq!(total, 1000);
    }

    #[test]
    fn extended_next_hop_puts_ipv4_in_mp_reach_with_the_ipv6_next_hop() {
        let ctx = Context {
            four_octet_as: true,
            ..Context::default()
        };
        let ll = MpNextHop::V6 {
            global: "2001:db8::1".parse().unwrap(),
            link_local: Some("fe80::1".parse().unwrap()),
        };
        for nh in [nh6(), ll] {
            let b = UpdateBuilder::new(&ctx, &attrs(), None)
                .unwrap()
                .with_ipv4_extended_next_hop(nh.clone())
                .unwrap();
            let prefixes = v4_prefixes(2000);
            let values = b.announce_updates(&prefixes).unwrap();
            let mut out = BytesMut::new();
            assert_eq!(b.announce(&prefixes, &mut out).unwrap(), values.len());
            let mut expect = BytesMut::new();
            let mut seen = Vec::new();
            for u in &values {
                encode_message(&Message::Update(u.clone()), &ctx, &mut expect).unwrap();
                assert!(u.nlri.is_empty());
                assert!(!u
                    .attributes
                    .iter()
                    .any(|a| matches!(a, PathAttribute::NextHop(_))));
                let r = u.mp_reach().unwrap();
                assert_eq!((r.afi_safi, &r.next_hop), (AfiSafi::IPV4_UNICAST, &nh));
                seen.extend(r.nlri.iter().map(|n| n.prefix));
            }
            assert_eq!(out, expect);
            assert_eq!(seen, prefixes);
            for m in split_messages(out.freeze()) {
                assert!(m.len() <= 4096);
                let Message::Update(u) = decode_message(&m, &ctx).unwrap() else {
                    panic!()
                };
                assert!(u.errors.is_empty(), "{:?}", u.errors);
            }
        }
        // An IPv4 next hop is not an extended one.
        let b = UpdateBuilder::new(&ctx, &attrs(), None).unwrap();
        assert!(b
            .with_ipv4_extended_next_hop(MpNextHop::V4(Ipv4Addr::new(192, 0, 2, 1)))
            .is_err());
    }

    #[test]
    fn withdrawals_of_both_families() {
        let ctx = Context::default();
        let b = UpdateBuilder::new(&ctx, &[], None).unwrap();
        let mut prefixes = v4_prefixes(1500);
        prefixes.extend(v6_prefixes(700));
        let msgs = {
            let mut out = BytesMut::new();
            b.withdraw(&prefixes, &mut out).unwrap();
            split_messages(out.freeze())
        };
        let values = b.withdraw_updates(&prefixes).unwrap();
        assert_eq!(msgs.len(), values.len());
        let mut v4 = 0;
        let mut v6 = 0;
        for (m, v) in msgs.iter().zip(&values) {
            let Message::Update(u) = decode_message(m, &ctx).unwrap() else {
                panic!()
            };
            assert_eq!(&u, v);
            v4 += u.withdrawn.len();
            v6 += u.mp_unreach().map_or(0, |x| x.withdrawn.len());
        }
        assert_eq!((v4, v6), (1500, 700));
        // 4073 octets of room, 4 per /24
        assert_eq!(
            values.iter().filter(|u| !u.withdrawn.is_empty()).count(),
            1500usize.div_ceil(4073 / 4)
        );
    }

    #[test]
    fn extended_messages_hold_more() {
        let ctx = Context {
            four_octet_as: true,
            extended_message: true,
            ..Context::default()
        };
        let b = UpdateBuilder::new(&ctx, &attrs(), None).unwrap();
        let mut out = BytesMut::new();
        assert_eq!(b.announce(&v4_prefixes(16000), &mut out).unwrap(), 1);
        assert_eq!(out.len(), 23 + 20 + 16000 * 4);
    }

    #[test]
    fn inconsistent_input_is_refused() {
        let ctx = Context::default();
        let no_nh = vec![PathAttribute::Origin(Origin::Igp)];
        let b = UpdateBuilder::new(&ctx, &no_nh, None).unwrap();
        let mut out = BytesMut::from(&b"keep"[..]);
        assert!(matches!(
            b.announce(&v4_prefixes(1), &mut out),
            Err(EncodeError::Builder(_))
        ));
        assert!(matches!(
            b.announce(&v6_prefixes(1), &mut out),
            Err(EncodeError::Builder(_))
        ));
        assert_eq!(&out[..], b"keep");
        let mp = vec![PathAttribute::MpUnreach(Box::new(MpUnreach {
            afi_safi: AfiSafi::IPV6_UNICAST,
            withdrawn: vec![],
            raw_withdrawn: None,
        }))];
        assert!(UpdateBuilder::new(&ctx, &mp, None).is_err());
        // add-path in force but no path identifiers
        let ap = Context {
            add_path_ipv4_unicast: true,
            ..ctx
        };
        let b = UpdateBuilder::new(&ap, &attrs(), None).unwrap();
        assert!(matches!(
            b.announce(&v4_prefixes(2), &mut out),
            Err(EncodeError::PathId { .. })
        ));
        assert_eq!(&out[..], b"keep");
    }

    #[test]
    fn build_updates_matches_build_update_messages() {
        let ctx = Context::default();
        let mut announce: Vec<Nlri> = v4_prefixes(2500).into_iter().map(Nlri::from).collect();
        announce.extend(v6_prefixes(300).into_iter().map(Nlri::from));
        let withdraw: Vec<Nlri> = v4_prefixes(10).into_iter().map(Nlri::from).collect();
        let values = build_updates(&ctx, &attrs(), Some(nh6()), &announce, &withdraw).unwrap();
        let bytes =
            build_update_messages(&ctx, &attrs(), Some(nh6()), &announce, &withdraw).unwrap();
        assert_eq!(values.len(), bytes.len());
        for (v, b) in values.iter().zip(&bytes) {
            let mut e = BytesMut::new();
            encode_message(&Message::Update(v.clone()), &ctx, &mut e).unwrap();
            assert_eq!(&e[..], &b[..]);
        }
    }
}
