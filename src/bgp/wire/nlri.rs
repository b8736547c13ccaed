//! Prefix lists: the Withdrawn Routes and NLRI fields of RFC 4271 section 4.3 and the
//! NLRI of MP_REACH/MP_UNREACH for IPv4/IPv6 (RFC 4760 section 5), with the path
//! identifier of ADD-PATH (RFC 7911 section 3). Tight loops, no allocation besides the
//! output vector. Must not decide what a malformed list costs: callers map `Err(())`.

use bytes::{BufMut, BytesMut};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::net::{Ipv4Addr, Ipv6Addr};

use super::error::EncodeError;
use super::output::Room;
use super::types::{Afi, AfiSafi, Nlri};

impl std::fmt::Display for AfiSafi {
    /// "ipv4 unicast", "ipv6 multicast", or the numbers for other families.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let afi = match self.afi {
            Afi::IPV4 => "ipv4",
            Afi::IPV6 => "ipv6",
            Afi(n) => return write!(f, "afi {n} safi {}", self.safi.0),
        };
        match self.safi.0 {
            1 => write!(f, "{afi} unicast"),
            2 => write!(f, "{afi} multicast"),
            n => write!(f, "{afi} safi {n}"),
        }
    }
}

/// How many prefixes `buf` holds, reading only the length octets: the output vector is
/// then allocated once at its exact size. A malformed list is counted as far as it
/// goes; the parse that follows rejects it.
fn count(buf: &[u8], add_path: bool) -> usize {
    let id = if add_path { 4 } else { 0 };
    let (mut i, mut n) = (0, 0);
    while let Some(&len) = buf.get(i + id) {
        i += id + 1 + usize::from(len).div_ceil(8);
        n += 1;
    }
    n
}

/// The path identifier at `buf[*i..]` when ADD-PATH is in force (RFC 7911 section 3).
#[inline]
fn path_id(buf: &[u8], i: &mut usize, add_path: bool) -> Result<Option<u32>, ()> {
    if !add_path {
        return Ok(None);
    }
    let id = buf.get(*i..*i + 4).ok_or(())?;
    *i += 4;
    Ok(Some(u32::from_be_bytes([id[0], id[1], id[2], id[3]])))
}

/// Parses a list of IPv4 prefixes. Host bits beyond the prefix length are cleared: RFC
/// 4271 section 4.3 says their value is irrelevant.
pub(crate) fn parse_v4(buf: &[u8], add_path: bool) -> Result<Vec<Nlri>, ()> {
    let mut out = Vec::with_capacity(count(buf, add_path));
    let mut i = 0;
    while i < buf.len() {
        let path_id = path_id(buf, &mut i, add_path)?;
        let len = *buf.get(i).ok_or(())?;
        i += 1;
        if len > 32 {
            return Err(());
        }
        let end = i + usize::from(len).div_ceil(8);
        let octets = buf.get(i..end).ok_or(())?;
        // Four octets read at once when the buffer has them (the mask below clears
        // whatever follows the prefix); octet by octet at the end of the field.
        let word = match buf.get(i..i + 4) {
            Some(w) => u32::from_be_bytes([w[0], w[1], w[2], w[3]]),
            None => octets
                .iter()
                .zip([24, 16, 8, 0])
                .fold(0, |w, (o, shift)| w | u32::from(*o) << shift),
        };
        i = end;
        let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        let net = Ipv4Net::new(Ipv4Addr::from(word & mask), len).map_err(|_| ())?;
        out.push(Nlri {
            path_id,
            prefix: IpNet::V4(net),
        });
    }
    Ok(out)
}

/// Parses a list of IPv6 prefixes (RFC 2545 section 2 / RFC 4760 section 5).
pub(crate) fn parse_v6(buf: &[u8], add_path: bool) -> Result<Vec<Nlri>, ()> {
    let mut out = Vec::with_capacity(count(buf, add_path));
    let mut i = 0;
    while i < buf.len() {
        let path_id = path_id(buf, &mut i, add_path)?;
        let len = *buf.get(i).ok_or(())?;
        i += 1;
        if len > 128 {
            return Err(());
        }
        let end = i + usize::from(len).div_ceil(8);
        let octets = buf.get(i..end).ok_or(())?;
        let word = match buf.get(i..i + 16) {
            Some(w) => {
                let mut a = [0u8; 16];
                a.copy_from_slice(w);
                u128::from_be_bytes(a)
            }
            None => octets
                .iter()
                .zip((0..16).rev())
                .fold(0, |w, (o, k)| w | u128::from(*o) << (8 * k)),
        };
        i = end;
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        let net = Ipv6Net::new(Ipv6Addr::from(word & mask), len).map_err(|_| ())?;
        out.push(Nlri {
            path_id,
            prefix: IpNet::V6(net),
        });
    }
    Ok(out)
}

/// Parses a prefix list of the given address family.
pub(crate) fn parse(afi: Afi, buf: &[u8], add_path: bool) -> Result<Vec<Nlri>, ()> {
    if afi == Afi::IPV6 {
        parse_v6(buf, add_path)
    } else {
        parse_v4(buf, add_path)
    }
}

/// Octets `nlri` takes on the wire.
#[inline]
pub(crate) fn encoded_len(nlri: &Nlri, add_path: bool) -> usize {
    let id = if add_path { 4 } else { 0 };
    id + 1 + usize::from(nlri.prefix.prefix_len()).div_ceil(8)
}

/// Checks that the prefix may be written in a field of `family` under `add_path`.
#[inline]
pub(crate) fn check(nlri: &Nlri, family: AfiSafi, add_path: bool) -> Result<(), EncodeError> {
    let ok_family = match nlri.prefix {
        IpNet::V4(_) => family.afi == Afi::IPV4,
        IpNet::V6(_) => family.afi == Afi::IPV6,
    };
    if !ok_family {
        return Err(EncodeError::WrongFamily {
            prefix: nlri.prefix,
            afi_safi: family,
        });
    }
    if nlri.path_id.is_some() != add_path {
        return Err(EncodeError::PathId {
            prefix: nlri.prefix,
            missing: add_path,
        });
    }
    Ok(())
}

/// Writes one prefix; trailing bits of the last octet are written as zero. The caller
/// has run [`check`].
#[inline]
pub(crate) fn put(out: &mut BytesMut, nlri: &Nlri) {
    if let Some(id) = nlri.path_id {
        out.put_u32(id);
    }
    let len = nlri.prefix.prefix_len();
    out.put_u8(len);
    let n = usize::from(len).div_ceil(8);
    match nlri.prefix {
        IpNet::V4(net) => {
            let octets = u32::from(net.network()).to_be_bytes();
            out.put_slice(&octets[..n]);
        }
        IpNet::V6(net) => {
            let octets = u128::from(net.network()).to_be_bytes();
            out.put_slice(&octets[..n]);
        }
    }
}

/// Checks a whole list for a field of `family` under `add_path`; returns the octets it
/// takes. The sizing half of [`write_list`].
pub(crate) fn list_len(
    list: &[Nlri],
    family: AfiSafi,
    add_path: bool,
) -> Result<usize, EncodeError> {
    let mut len = 0;
    for nlri in list {
        check(nlri, family, add_path)?;
        len += encoded_len(nlri, add_path);
    }
    Ok(len)
}

/// Writes a list [`list_len`] accepted. Each prefix is one store of its whole address
/// (the next write overwrites the octets past its length), which needs
/// [`SLACK`](super::output::SLACK) octets of room past the list: a copy of one to four
/// octets whose count is known only at run time was the per-prefix cost.
#[inline]
pub(crate) fn write_list(room: &mut Room<'_>, list: &[Nlri]) {
    for nlri in list {
        if let Some(id) = nlri.path_id {
            room.u32(id);
        }
        let bits = nlri.prefix.prefix_len();
        let n = usize::from(bits).div_ceil(8);
        // network(): the octets past the length are zero, as RFC 4271 section 4.3 wants
        // the trailing bits.
        match nlri.prefix {
            IpNet::V4(net) => {
                let [a, b, c, d] = u32::from(net.network()).to_be_bytes();
                room.wide([bits, a, b, c, d], 1 + n);
            }
            IpNet::V6(net) => {
                let mut v = [0; 17];
                v[0] = bits;
                v[1..].copy_from_slice(&u128::from(net.network()).to_be_bytes());
                room.wide(v, 1 + n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks and writes a whole list, as the UPDATE and MP_* encoders do; on an error
    /// nothing is written.
    fn put_all(
        out: &mut BytesMut,
        list: &[Nlri],
        family: AfiSafi,
        add_path: bool,
    ) -> Result<(), EncodeError> {
        let len = list_len(list, family, add_path)?;
        crate::bgp::wire::output::append(out, len, |room| {
            write_list(room, list);
            Ok(())
        })
    }

    fn v4(s: &str) -> Nlri {
        Nlri::from(s.parse::<IpNet>().unwrap())
    }

    #[test]
    fn parses_ipv4_prefixes_of_every_width() {
        let buf = [
            0x00, 0x08, 0x0a, 0x18, 0xc0, 0x00, 0x02, 0x20, 0x01, 0x02, 0x03, 0x04,
        ];
        assert_eq!(
            parse_v4(&buf, false).unwrap(),
            vec![
                v4("0.0.0.0/0"),
                v4("10.0.0.0/8"),
                v4("192.0.2.0/24"),
                v4("1.2.3.4/32")
            ]
        );
    }

    #[test]
    fn trailing_bits_are_cleared() {
        // 10.255/9 carries host bits in the second octet (bgpdump nlri_mask_trailing_bits)
        assert_eq!(
            parse_v4(&[0x09, 0x0a, 0xff], false).unwrap(),
            vec![v4("10.128.0.0/9")]
        );
        assert_eq!(
            parse_v6(&[0x0a, 0xfe, 0xbf], false).unwrap(),
            vec![Nlri::from("fe80::/10".parse::<IpNet>().unwrap())]
        );
    }

    #[test]
    fn reading_ahead_never_leaks_the_next_prefix() {
        // A /8 followed by a /24: the four octets read for the /8 include the next
        // prefix's length and first octets, which the mask must drop.
        let v4_list = [0x08, 0x0a, 0x18, 0xc0, 0x00, 0x02];
        assert_eq!(
            parse_v4(&v4_list, false).unwrap(),
            vec![v4("10.0.0.0/8"), v4("192.0.2.0/24")]
        );
        let mut v6_list = vec![0x10, 0x20, 0x01];
        v6_list.extend_from_slice(&[0x80, 0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0xff, 0xff]);
        v6_list.extend_from_slice(&[0xff; 8]);
        assert_eq!(
            parse_v6(&v6_list, false).unwrap(),
            ["2001::/16", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff/128"]
                .iter()
                .map(|s| Nlri::from(s.parse::<IpNet>().unwrap()))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn output_is_allocated_at_its_exact_size() {
        let buf = [
            0x00, 0x08, 0x0a, 0x18, 0xc0, 0x00, 0x02, 0x20, 0x01, 0x02, 0x03, 0x04,
        ];
        let out = parse_v4(&buf, false).unwrap();
        assert_eq!((out.len(), out.capacity()), (4, 4));
        assert_eq!(parse_v4(&[], false).unwrap().capacity(), 0);
    }

    #[test]
    fn rejects_long_prefix_and_truncation() {
        assert!(parse_v4(&[0x21, 0, 0, 0, 0, 0], false).is_err());
        assert!(parse_v4(&[0x18, 0x0a, 0x00], false).is_err());
        assert!(parse_v6(&[0x81], false).is_err());
        assert!(parse_v4(&[0x00, 0x00, 0x00], true).is_err());
    }

    #[test]
    fn add_path_identifiers_are_read() {
        assert_eq!(
            parse_v4(&[0x00, 0x00, 0x00, 0x07, 0x10, 0xac, 0x10], true).unwrap(),
            vec![Nlri {
                path_id: Some(7),
                prefix: "172.16.0.0/16".parse().unwrap()
            }]
        );
    }

    #[test]
    fn ipv6_round_trip() {
        let list: Vec<Nlri> = ["2001:db8::/32", "::/0", "2001:db8:1:2::1/128", "fe80::/10"]
            .iter()
            .map(|s| Nlri::from(s.parse::<IpNet>().unwrap()))
            .collect();
        let mut out = BytesMut::new();
        put_all(&mut out, &list, AfiSafi::IPV6_UNICAST, false).unwrap();
        assert_eq!(
            out.len(),
            list.iter().map(|n| encoded_len(n, false)).sum::<usize>()
        );
        assert_eq!(parse_v6(&out, false).unwrap(), list);
    }

    #[test]
    fn encode_checks_family_and_path_id() {
        let mut out = BytesMut::new();
        assert!(matches!(
            put_all(&mut out, &[v4("10.0.0.0/8")], AfiSafi::IPV6_UNICAST, false),
            Err(EncodeError::WrongFamily { .. })
        ));
        assert!(matches!(
            put_all(&mut out, &[v4("10.0.0.0/8")], AfiSafi::IPV4_UNICAST, true),
            Err(EncodeError::PathId { missing: true, .. })
        ));
        assert!(out.is_empty(), "nothing written on an error");
    }

    /// The list writer against the one-prefix writer, every width of both families,
    /// with and without path ids, after octets already in the buffer.
    #[test]
    fn a_list_is_written_as_its_prefixes_one_by_one() {
        for add_path in [false, true] {
            let mut list: Vec<Nlri> = (0..=32)
                .map(|l| v4(&format!("203.0.113.255/{l}")))
                .collect();
            let mut list6: Vec<Nlri> = (0..=128)
                .map(|l| Nlri::from(format!("2001:db8:ffff::ffff/{l}").parse::<IpNet>().unwrap()))
                .collect();
            for (i, n) in list.iter_mut().chain(list6.iter_mut()).enumerate() {
                n.path_id = add_path.then_some(0x0102_0300 + i as u32);
            }
            for (family, list) in [
                (AfiSafi::IPV4_UNICAST, &list),
                (AfiSafi::IPV6_UNICAST, &list6),
            ] {
                let mut one_by_one = BytesMut::from(&[0xaa, 0xbb][..]);
                for n in list.iter() {
                    put(&mut one_by_one, n);
                }
                let mut out = BytesMut::from(&[0xaa, 0xbb][..]);
                put_all(&mut out, list, family, add_path).unwrap();
                assert_eq!(out, one_by_one, "{family:?} add-path {add_path}");
                let written: usize = list.iter().map(|n| encoded_len(n, add_path)).sum();
                assert_eq!(out.len(), 2 + written);
            }
        }
    }
}
