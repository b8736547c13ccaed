//! From a captured link-layer frame to a TCP segment: the link types BGP captures come
//! in (Ethernet with VLAN/QinQ/MPLS, Linux cooked SLL and SLL2, raw IP, BSD loopback,
//! PPP, Cisco HDLC, Frame Relay, Juniper Ethernet), IPv4 and IPv6 (extension headers,
//! IP-in-IP), then TCP. Owns no state: reassembly is `reassembly`'s job.

use super::cursor::Cursor;
use std::net::{IpAddr, SocketAddr};

/// Link-layer header types (tcpdump.org "LINKTYPE_" values).
pub mod linktype {
    pub const NULL: u16 = 0;
    pub const ETHERNET: u16 = 1;
    pub const PPP: u16 = 9;
    /// DLT_RAW as some BSDs number it in pcap files.
    pub const RAW_BSD_12: u16 = 12;
    pub const RAW_BSD_14: u16 = 14;
    pub const PPP_HDLC: u16 = 50;
    pub const RAW: u16 = 101;
    pub const C_HDLC: u16 = 104;
    pub const FRELAY: u16 = 107;
    pub const LOOP: u16 = 108;
    pub const LINUX_SLL: u16 = 113;
    pub const JUNIPER_ETHER: u16 = 178;
    pub const IPV4: u16 = 228;
    pub const IPV6: u16 = 229;
    pub const LINUX_SLL2: u16 = 276;
}

/// EtherType values (IEEE registry) met on the way to IP.
mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const IPV6: u16 = 0x86dd;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const QINQ_OLD: u16 = 0x9100;
    pub const MPLS: u16 = 0x8847;
    pub const MPLS_MULTICAST: u16 = 0x8848;
    pub const PPPOE_SESSION: u16 = 0x8864;
}

/// A TCP segment as captured. `payload` may be shorter than `payload_len` when the
/// capture cut the frame (snap length): the difference is data that existed on the
/// wire but is missing from the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment<'a> {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    pub payload: &'a [u8],
    pub payload_len: usize,
}

/// Why a frame yields no TCP segment. Only [`Skip::Malformed`] and
/// [`Skip::UnsupportedLinkType`] are worth reporting; the rest is ordinary traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    NotIp,
    NotTcp,
    /// IP fragments are not reassembled (BGP speakers set DF and TCP segments to the MSS).
    Fragment,
    UnsupportedLinkType(u16),
    Malformed(&'static str),
}

/// Parses a frame of link type `linktype` down to its TCP segment.
pub fn tcp_segment(link: u16, frame: &[u8]) -> Result<Segment<'_>, Skip> {
    use linktype as lt;
    let mut c = Cursor::new(frame);
    let short = Skip::Malformed("frame shorter than its link-layer header");
    match link {
        lt::ETHERNET => ethernet(c),
        lt::RAW | lt::RAW_BSD_12 | lt::RAW_BSD_14 | lt::IPV4 | lt::IPV6 => ip(c.rest()),
        lt::NULL | lt::LOOP => {
            // A 4-octet address family in the capturing host's byte order; the IP
            // version nibble says the same more portably.
            c.skip(4).ok_or(short)?;
            ip(c.rest())
        }
        lt::LINUX_SLL => {
            c.skip(14).ok_or(short.clone())?;
            let proto = c.u16().ok_or(short)?;
            by_ethertype(proto, c)
        }
        lt::LINUX_SLL2 => {
            let proto = c.u16().ok_or(short.clone())?;
            c.skip(18).ok_or(short)?;
            by_ethertype(proto, c)
        }
        lt::C_HDLC => {
            c.skip(2).ok_or(short.clone())?;
            let proto = c.u16().ok_or(short)?;
            by_ethertype(proto, c)
        }
        lt::PPP | lt::PPP_HDLC => ppp(c),
        lt::FRELAY => frame_relay(c),
        lt::JUNIPER_ETHER => juniper_ether(c),
        other => Err(Skip::UnsupportedLinkType(other)),
    }
}

fn ethernet(mut c: Cursor<'_>) -> Result<Segment<'_>, Skip> {
    c.skip(12).ok_or(Skip::Malformed("short Ethernet header"))?;
    let proto = c.u16().ok_or(Skip::Malformed("short Ethernet header"))?;
    by_ethertype(proto, c)
}

fn by_ethertype(mut proto: u16, mut c: Cursor<'_>) -> Result<Segment<'_>, Skip> {
    // VLAN tags may be stacked (802.1ad QinQ); bound the loop by the frame anyway.
    loop {
        match proto {
            ethertype::IPV4 | ethertype::IPV6 => return ip(c.rest()),
            ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD => {
                c.skip(2).ok_or(Skip::Malformed("short VLAN tag"))?;
                proto = c.u16().ok_or(Skip::Malformed("short VLAN tag"))?;
            }
            ethertype::MPLS | ethertype::MPLS_MULTICAST => {
                // RFC 3032: pop labels until the bottom-of-stack bit; IP follows.
                loop {
                    let label = c.u32().ok_or(Skip::Malformed("short MPLS label stack"))?;
                    if label & 0x100 != 0 {
                        break;
                    }
                }
                return ip(c.rest());
            }
            ethertype::PPPOE_SESSION => {
                // RFC 2516 section 4: 6-octet PPPoE header, then the PPP protocol.
                c.skip(6).ok_or(Skip::Malformed("short PPPoE header"))?;
                return ppp(c);
            }
            _ => return Err(Skip::NotIp),
        }
    }
}

/// PPP (RFC 1661), with or without the HDLC-like address and control octets (RFC 1662)
/// and with protocol field compression.
fn ppp(mut c: Cursor<'_>) -> Result<Segment<'_>, Skip> {
    if c.rest().starts_with(&[0xff, 0x03]) {
        c.skip(2);
    }
    let first = c.u8().ok_or(Skip::Malformed("short PPP header"))?;
    let proto = if first & 0x01 != 0 {
        u16::from(first)
    } else {
        (u16::from(first) << 8) | u16::from(c.u8().ok_or(Skip::Malformed("short PPP header"))?)
    };
    match proto {
        0x0021 | 0x0057 => ip(c.rest()),
        _ => Err(Skip::NotIp),
    }
}

/// Frame Relay: a 2-octet Q.922 address, then either the RFC 2427 control octet and
/// NLPID, or (Cisco encapsulation) an EtherType.
fn frame_relay(mut c: Cursor<'_>) -> Result<Segment<'_>, Skip> {
    c.skip(2)
        .ok_or(Skip::Malformed("short Frame Relay header"))?;
    if c.rest().first() == Some(&0x03) {
        c.skip(1);
        let mut nlpid = c.u8().ok_or(Skip::Malformed("short Frame Relay header"))?;
        if nlpid == 0x00 {
            // Padding octet before the NLPID (RFC 2427 section 4).
            nlpid = c.u8().ok_or(Skip::Malformed("short Frame Relay header"))?;
        }
        match nlpid {
            0xcc | 0x8e => ip(c.rest()),
            0x80 => {
                // SNAP: OUI (3) then an EtherType.
                c.skip(3).ok_or(Skip::Malformed("short SNAP header"))?;
                let proto = c.u16().ok_or(Skip::Malformed("short SNAP header"))?;
                by_ethertype(proto, c)
            }
            _ => Err(Skip::NotIp),
        }
    } else {
        let proto = c.u16().ok_or(Skip::Malformed("short Frame Relay header"))?;
        by_ethertype(proto, c)
    }
}

/// Juniper's DLT_JUNIPER_ETHER: "MGC" magic, a flags octet, optional TLV extensions,
/// then Ethernet unless the L2 header was stripped (tcpdump print-juniper.c conventions).
fn juniper_ether(mut c: Cursor<'_>) -> Result<Segment<'_>, Skip> {
    const EXTENSIONS: u8 = 0x80;
    const NO_L2: u8 = 0x02;
    let magic = c.take(3).ok_or(Skip::Malformed("short Juniper header"))?;
    if magic != b"MGC" {
        return Err(Skip::Malformed("Juniper header without MGC magic"));
    }
    let flags = c.u8().ok_or(Skip::Malformed("short Juniper header"))?;
    if flags & EXTENSIONS != 0 {
        let len = c.u16().ok_or(Skip::Malformed("short Juniper extension"))?;
        c.skip(usize::from(len))
            .ok_or(Skip::Malformed("short Juniper extension"))?;
    }
    if flags & NO_L2 != 0 {
        ip(c.rest())
    } else {
        ethernet(c)
    }
}

/// IPv4 (RFC 791) or IPv6 (RFC 8200), by the version nibble.
fn ip(packet: &[u8]) -> Result<Segment<'_>, Skip> {
    ip_nested(packet, 0)
}

fn ip_nested(packet: &[u8], depth: u8) -> Result<Segment<'_>, Skip> {
    let first = *packet.first().ok_or(Skip::Malformed("empty IP packet"))?;
    let (src, dst, protocol, payload, claimed) = match first >> 4 {
        4 => {
            let ihl = usize::from(first & 0x0f) * 4;
            if ihl < 20 || packet.len() < ihl {
                return Err(Skip::Malformed("bad IPv4 header length"));
            }
            let total = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
            // Fragments are not reassembled; a first fragment still holds the TCP header and
            // the start of the data, and what the others held shows up as a stream gap.
            let frag = u16::from_be_bytes([packet[6], packet[7]]);
            if frag & 0x1fff != 0 {
                return Err(Skip::Fragment);
            }
            let src = IpAddr::from([packet[12], packet[13], packet[14], packet[15]]);
            let dst = IpAddr::from([packet[16], packet[17], packet[18], packet[19]]);
            // A total length of 0 is what TCP segmentation offload leaves in captures
            // taken on the sending host: the frame is all there is.
            let end = if total == 0 { packet.len() } else { total };
            if end < ihl {
                return Err(Skip::Malformed("IPv4 total length below header length"));
            }
            let payload = &packet[ihl..end.min(packet.len())];
            (src, dst, packet[9], payload, end - ihl)
        }
        6 => {
            let mut c = Cursor::new(packet);
            let header = c.take(40).ok_or(Skip::Malformed("short IPv6 header"))?;
            let payload_len = usize::from(u16::from_be_bytes([header[4], header[5]]));
            let mut next = header[6];
            let mut src = [0u8; 16];
            src.copy_from_slice(&header[8..24]);
            let mut dst = [0u8; 16];
            dst.copy_from_slice(&header[24..40]);
            // A payload length of 0 means a jumbogram (RFC 2675) or offload: use the frame.
            let claimed_total = if payload_len == 0 {
                c.remaining()
            } else {
                payload_len
            };
            let mut consumed = 0usize;
            loop {
                match next {
                    // Hop-by-hop, routing, destination options: (length + 1) * 8 octets.
                    0 | 43 | 60 => {
                        let h = c
                            .array::<2>()
                            .ok_or(Skip::Malformed("short IPv6 extension header"))?;
                        let len = (usize::from(h[1]) + 1) * 8;
                        c.skip(len - 2)
                            .ok_or(Skip::Malformed("short IPv6 extension header"))?;
                        consumed += len;
                        next = h[0];
                    }
                    44 => {
                        let h = c
                            .take(8)
                            .ok_or(Skip::Malformed("short IPv6 fragment header"))?;
                        if u16::from_be_bytes([h[2], h[3]]) & 0xfff8 != 0 {
                            return Err(Skip::Fragment);
                        }
                        consumed += 8;
                        next = h[0];
                    }
                    // Authentication header (RFC 4302): (length + 2) * 4 octets.
                    51 => {
                        let h = c.array::<2>().ok_or(Skip::Malformed("short IPv6 AH"))?;
                        let len = (usize::from(h[1]) + 2) * 4;
                        c.skip(len - 2).ok_or(Skip::Malformed("short IPv6 AH"))?;
                        consumed += len;
                        next = h[0];
                    }
                    _ => break,
                }
            }
            let claimed = claimed_total.checked_sub(consumed).ok_or(Skip::Malformed(
                "IPv6 extension headers past payload length",
            ))?;
            let rest = c.rest();
            let payload = &rest[..rest.len().min(claimed)];
            (IpAddr::from(src), IpAddr::from(dst), next, payload, claimed)
        }
        _ => return Err(Skip::NotIp),
    };
    match protocol {
        6 => tcp(src, dst, payload, claimed),
        // IP in IP (RFC 2003, RFC 2473): one or two levels are plenty.
        4 | 41 if depth < 2 => ip_nested(payload, depth + 1),
        _ => Err(Skip::NotTcp),
    }
}

/// TCP (RFC 9293 section 3.1).
fn tcp(src: IpAddr, dst: IpAddr, segment: &[u8], claimed: usize) -> Result<Segment<'_>, Skip> {
    if segment.len() < 20 {
        return Err(Skip::Malformed("short TCP header"));
    }
    let src_port = u16::from_be_bytes([segment[0], segment[1]]);
    let dst_port = u16::from_be_bytes([segment[2], segment[3]]);
    let seq = u32::from_be_bytes([segment[4], segment[5], segment[6], segment[7]]);
    let data_offset = usize::from(segment[12] >> 4) * 4;
    let flags = segment[13];
    if data_offset < 20 || data_offset > segment.len() {
        return Err(Skip::Malformed("bad TCP data offset"));
    }
    Ok(Segment {
        src: SocketAddr::new(src, src_port),
        dst: SocketAddr::new(dst, dst_port),
        seq,
        syn: flags & 0x02 != 0,
        fin: flags & 0x01 != 0,
        rst: flags & 0x04 != 0,
        payload: &segment[data_offset..],
        payload_len: claimed
            .saturating_sub(data_offset)
            .max(segment.len() - data_offset),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 header (no options) for a TCP segment of `tcp_len` octets.
    fn ipv4(tcp_len: usize) -> Vec<u8> {
        let total = (20 + tcp_len) as u16;
        let mut h = vec![0x45, 0x00];
        h.extend(total.to_be_bytes());
        h.extend([0x00, 0x01, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00]);
        h.extend([192, 0, 2, 1, 192, 0, 2, 2]);
        h
    }

    fn tcp_header(flags: u8) -> Vec<u8> {
        let mut h = vec![0xc0, 0x01, 0x00, 0xb3]; // 49153 -> 179
        h.extend(0x0102_0304u32.to_be_bytes());
        h.extend([0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        h
    }

    fn tcp_ipv4(payload: &[u8]) -> Vec<u8> {
        let mut p = ipv4(20 + payload.len());
        p.extend(tcp_header(0x18));
        p.extend(payload);
        p
    }

    fn check(seg: &Segment, payload: &[u8]) {
        assert_eq!(seg.src, "192.0.2.1:49153".parse().unwrap());
        assert_eq!(seg.dst, "192.0.2.2:179".parse().unwrap());
        assert_eq!(seg.seq, 0x0102_0304);
        assert_eq!(seg.payload, payload);
        assert_eq!(seg.payload_len, payload.len());
        assert!(!seg.syn && !seg.fin && !seg.rst);
    }

    #[test]
    fn ethernet_with_stacked_vlan_tags() {
        let mut f = vec![0x02; 12];
        f.extend([0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0x00, 0xc8, 0x08, 0x00]);
        f.extend(tcp_ipv4(b"abc"));
        // Ethernet pads short frames: the IPv4 total length must trim it.
        f.extend([0u8; 6]);
        check(&tcp_segment(linktype::ETHERNET, &f).unwrap(), b"abc");
    }

    #[test]
    fn linux_cooked_v1_and_v2_raw_and_loopback() {
        let mut sll = vec![
            0x00, 0x00, 0x00, 0x01, 0x00, 0x06, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00,
        ];
        sll.extend(tcp_ipv4(b"x"));
        check(&tcp_segment(linktype::LINUX_SLL, &sll).unwrap(), b"x");

        let mut sll2 = vec![
            0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0,
        ];
        sll2.extend(tcp_ipv4(b"y"));
        check(&tcp_segment(linktype::LINUX_SLL2, &sll2).unwrap(), b"y");

        check(&tcp_segment(linktype::RAW, &tcp_ipv4(b"z")).unwrap(), b"z");
        check(&tcp_segment(linktype::IPV4, &tcp_ipv4(b"z")).unwrap(), b"z");

        let mut null = vec![0x02, 0x00, 0x00, 0x00];
        null.extend(tcp_ipv4(b"w"));
        check(&tcp_segment(linktype::NULL, &null).unwrap(), b"w");
    }

    #[test]
    fn ppp_hdlc_frame_relay_and_mpls() {
        let mut ppp = vec![0xff, 0x03, 0x00, 0x21];
        ppp.extend(tcp_ipv4(b"p"));
        check(&tcp_segment(linktype::PPP, &ppp).unwrap(), b"p");

        let mut hdlc = vec![0x0f, 0x00, 0x08, 0x00];
        hdlc.extend(tcp_ipv4(b"h"));
        check(&tcp_segment(linktype::C_HDLC, &hdlc).unwrap(), b"h");

        // Cisco Frame Relay encapsulation (as in PacketLife's bgp_med capture) and the
        // RFC 2427 NLPID form.
        let mut fr = vec![0x18, 0x61, 0x08, 0x00];
        fr.extend(tcp_ipv4(b"f"));
        check(&tcp_segment(linktype::FRELAY, &fr).unwrap(), b"f");
        let mut fr = vec![0x18, 0x61, 0x03, 0xcc];
        fr.extend(tcp_ipv4(b"g"));
        check(&tcp_segment(linktype::FRELAY, &fr).unwrap(), b"g");

        let mut mpls = vec![0x02; 12];
        mpls.extend([0x88, 0x47, 0x00, 0x01, 0x00, 0x40, 0x00, 0x02, 0x01, 0x40]);
        mpls.extend(tcp_ipv4(b"m"));
        check(&tcp_segment(linktype::ETHERNET, &mpls).unwrap(), b"m");
    }

    #[test]
    fn juniper_ether_with_extensions() {
        // Header layout from tcpdump's bgp-aigp.pcap: MGC, flags 0x80, 16 octets of TLVs.
        let mut f = b"MGC\x80\x00\x10".to_vec();
        f.extend([
            0x03, 0x01, 0x01, 0x06, 0x01, 0x0e, 0x01, 0x02, 0x8c, 0x00, 0x04, 0x04, 0x4c, 0x01,
            0x00, 0x00,
        ]);
        f.extend([0x02; 12]);
        f.extend([0x08, 0x00]);
        f.extend(tcp_ipv4(b"j"));
        check(&tcp_segment(linktype::JUNIPER_ETHER, &f).unwrap(), b"j");
    }

    #[test]
    fn ipv6_with_hop_by_hop_header() {
        let payload = b"six";
        let mut p = vec![0x60, 0, 0, 0];
        p.extend(((8 + 20 + payload.len()) as u16).to_be_bytes());
        p.extend([0x00, 64]); // next header: hop-by-hop
        p.extend([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        p.extend([6, 0, 1, 4, 0, 0, 0, 0]); // -> TCP, padding option
        p.extend(tcp_header(0x02));
        p.extend(payload);
        let seg = tcp_segment(linktype::IPV6, &p).unwrap();
        assert_eq!(seg.src, "[2001:db8::1]:49153".parse().unwrap());
        assert_eq!(seg.payload, payload);
        assert!(seg.syn);
    }

    #[test]
    fn snapped_frame_reports_the_missing_tail() {
        let full = tcp_ipv4(&[0xaa; 100]);
        let seg = tcp_segment(linktype::RAW, &full[..60]).unwrap();
        assert_eq!(seg.payload.len(), 20);
        assert_eq!(seg.payload_len, 100);
    }

    #[test]
    fn skips_what_is_not_tcp_and_never_panics_on_short_frames() {
        let mut udp = tcp_ipv4(b"");
        udp[9] = 17;
        assert_eq!(tcp_segment(linktype::RAW, &udp), Err(Skip::NotTcp));
        let mut frag = tcp_ipv4(b"abc");
        frag[6] = 0x20; // more fragments, offset 0: the first fragment is used
        assert_eq!(tcp_segment(linktype::RAW, &frag).unwrap().payload, b"abc");
        frag[7] = 0x10; // offset 128 octets: no TCP header in it
        assert_eq!(tcp_segment(linktype::RAW, &frag), Err(Skip::Fragment));
        let mut arp = vec![0x02; 12];
        arp.extend([0x08, 0x06, 0, 1]);
        assert_eq!(tcp_segment(linktype::ETHERNET, &arp), Err(Skip::NotIp));
        assert_eq!(
            tcp_segment(147, &[1, 2, 3]),
            Err(Skip::UnsupportedLinkType(147))
        );

        let mut frame = vec![0x02; 12];
        frame.extend([0x81, 0x00, 0x00, 0x01, 0x86, 0xdd]);
        frame.extend([0x60, 0, 0, 0, 0, 0x20, 0x00, 64]);
        for lt in [0, 1, 9, 101, 104, 107, 113, 178, 228, 229, 276] {
            for cut in 0..frame.len() {
                let _ = tcp_segment(lt, &frame[..cut]);
            }
        }
    }
}
