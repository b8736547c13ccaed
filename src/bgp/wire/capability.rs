//! Capabilities advertisement (RFC 5492) and the capability values this speaker
//! understands (IANA "Capability Codes"). Must not decide which capabilities are
//! negotiated: the session intersects what both sides sent.

use bytes::{BufMut, Bytes, BytesMut};
use nom::bytes::complete::take;
use nom::number::complete::{be_u16, be_u8};
use nom::Parser;

use super::error::{DecodeError, EncodeError};
use super::input::{PResult, Src};
use super::types::{
    AddPathFamily, AddPathMode, Afi, AfiSafi, Capability, ExtendedNextHopFamily, GracefulRestart,
    GracefulRestartFamily, Safi,
};

/// Capability codes (IANA "Capability Codes").
pub mod code {
    pub const MULTIPROTOCOL: u8 = 1;
    pub const ROUTE_REFRESH: u8 = 2;
    pub const EXTENDED_NEXT_HOP: u8 = 5;
    pub const EXTENDED_MESSAGE: u8 = 6;
    pub const GRACEFUL_RESTART: u8 = 64;
    pub const FOUR_OCTET_AS: u8 = 65;
    pub const ADD_PATH: u8 = 69;
    pub const ENHANCED_ROUTE_REFRESH: u8 = 70;
    pub const FQDN: u8 = 73;
}

/// RFC 4724 section 3: Restart State bit, Notification bit (RFC 8538), 12-bit time.
const GR_RESTART_STATE: u16 = 0x8000;
const GR_NOTIFICATION: u16 = 0x4000;
const GR_TIME_MASK: u16 = 0x0fff;
/// RFC 4724 section 3: Forwarding State bit of the per-family flags.
const GR_FORWARDING: u8 = 0x80;

impl Capability {
    /// The capability code (IANA "Capability Codes").
    pub fn code(&self) -> u8 {
        match self {
            Capability::Multiprotocol(_) => code::MULTIPROTOCOL,
            Capability::RouteRefresh => code::ROUTE_REFRESH,
            Capability::ExtendedNextHop(_) => code::EXTENDED_NEXT_HOP,
            Capability::GracefulRestart(_) => code::GRACEFUL_RESTART,
            Capability::FourOctetAs(_) => code::FOUR_OCTET_AS,
            Capability::AddPath(_) => code::ADD_PATH,
            Capability::EnhancedRouteRefresh => code::ENHANCED_ROUTE_REFRESH,
            Capability::ExtendedMessage => code::EXTENDED_MESSAGE,
            Capability::Fqdn { .. } => code::FQDN,
            Capability::Unknown { code, .. } => *code,
        }
    }
}

/// The data of an OPEN / Unsupported Capability NOTIFICATION (RFC 5492 section 3): the
/// refused capabilities, encoded.
pub fn unsupported_capabilities(caps: &[Capability]) -> Result<DecodeError, EncodeError> {
    let mut out = BytesMut::new();
    for c in caps {
        encode(c, &mut out)?;
    }
    Ok(DecodeError::UnsupportedCapability {
        capabilities: out.freeze(),
    })
}

/// Decodes the value of one Capabilities optional parameter (a sequence of
/// code/length/value triples) into `out`.
pub(crate) fn decode_list(
    mut buf: &[u8],
    src: Src<'_>,
    out: &mut Vec<Capability>,
) -> Result<(), DecodeError> {
    while !buf.is_empty() {
        let (rest, (code, value)) = tlv(buf).map_err(|_| DecodeError::MalformedOpen {
            reason: "capability overruns its optional parameter",
        })?;
        buf = rest;
        out.push(decode_one(code, value, src)?);
    }
    Ok(())
}

fn tlv(buf: &[u8]) -> PResult<'_, (u8, &[u8])> {
    let (buf, code) = be_u8(buf)?;
    let (buf, len) = be_u8(buf)?;
    let (buf, value) = take(len).parse(buf)?;
    Ok((buf, (code, value)))
}

fn malformed(reason: &'static str) -> DecodeError {
    DecodeError::MalformedOpen { reason }
}

fn decode_one(code: u8, value: &[u8], src: Src<'_>) -> Result<Capability, DecodeError> {
    let unknown = || Capability::Unknown {
        code,
        value: src.bytes(value),
    };
    Ok(match code {
        code::MULTIPROTOCOL => {
            // RFC 4760 section 8: AFI, Reserved, SAFI.
            let [a0, a1, _reserved, safi] = value else {
                return Err(malformed("multiprotocol capability length is not 4"));
            };
            Capability::Multiprotocol(AfiSafi {
                afi: Afi(u16::from_be_bytes([*a0, *a1])),
                safi: Safi(*safi),
            })
        }
        code::ROUTE_REFRESH if value.is_empty() => Capability::RouteRefresh,
        code::ROUTE_REFRESH => return Err(malformed("route refresh capability has a value")),
        code::ENHANCED_ROUTE_REFRESH if value.is_empty() => Capability::EnhancedRouteRefresh,
        code::ENHANCED_ROUTE_REFRESH => {
            return Err(malformed("enhanced route refresh capability has a value"))
        }
        code::EXTENDED_MESSAGE if value.is_empty() => Capability::ExtendedMessage,
        code::EXTENDED_MESSAGE => return Err(malformed("extended message capability has a value")),
        code::EXTENDED_NEXT_HOP => {
            // RFC 8950 section 4: triples of NLRI AFI (2 octets), NLRI SAFI (2 octets),
            // Nexthop AFI (2 octets).
            if value.is_empty() || value.len() % 6 != 0 {
                return Err(malformed(
                    "extended next hop capability length is not a multiple of 6",
                ));
            }
            let mut families = Vec::with_capacity(value.len() / 6);
            for e in value.chunks_exact(6) {
                // SAFIs are one octet (IANA "SAFI Values"); a wider one is a value we
                // cannot have offered anything for: keep the capability as bytes.
                let [a0, a1, 0, safi, n0, n1] = *e else {
                    return Ok(unknown());
                };
                families.push(ExtendedNextHopFamily {
                    afi_safi: AfiSafi {
                        afi: Afi(u16::from_be_bytes([a0, a1])),
                        safi: Safi(safi),
                    },
                    next_hop_afi: Afi(u16::from_be_bytes([n0, n1])),
                });
            }
            Capability::ExtendedNextHop(families)
        }
        code::FOUR_OCTET_AS => {
            let [a, b, c, d] = value else {
                return Err(malformed("4-octet as capability length is not 4"));
            };
            Capability::FourOctetAs(u32::from_be_bytes([*a, *b, *c, *d]))
        }
        code::GRACEFUL_RESTART => graceful_restart(value)
            .map(|(_, gr)| Capability::GracefulRestart(gr))
            .map_err(|_| malformed("graceful restart capability length"))?,
        code::ADD_PATH => {
            if value.is_empty() || value.len() % 4 != 0 {
                return Err(malformed(
                    "add-path capability length is not a multiple of 4",
                ));
            }
            let mut families = Vec::with_capacity(value.len() / 4);
            for e in value.chunks_exact(4) {
                let send_receive = match e[3] {
                    1 => AddPathMode::Receive,
                    2 => AddPathMode::Send,
                    3 => AddPathMode::Both,
                    // RFC 7911 section 4: any other value makes the capability "not
                    // understood": keep it as bytes, do not fail the OPEN.
                    _ => return Ok(unknown()),
                };
                families.push(AddPathFamily {
                    afi_safi: AfiSafi {
                        afi: Afi(u16::from_be_bytes([e[0], e[1]])),
                        safi: Safi(e[2]),
                    },
                    send_receive,
                });
            }
            Capability::AddPath(families)
        }
        // draft-walton-bgp-hostname-capability: purely informational, so anything that
        // does not parse as two length-prefixed UTF-8 strings is kept as bytes.
        code::FQDN => fqdn(value).unwrap_or_else(unknown),
        _ => unknown(),
    })
}

fn graceful_restart(value: &[u8]) -> PResult<'_, GracefulRestart> {
    let (mut rest, flags_time) = be_u16(value)?;
    if rest.len() % 4 != 0 {
        return Err(nom::Err::Error(()));
    }
    let mut families = Vec::with_capacity(rest.len() / 4);
    while !rest.is_empty() {
        let (r, (afi, safi, flags)) = (be_u16, be_u8, be_u8).parse(rest)?;
        rest = r;
        families.push(GracefulRestartFamily {
            afi_safi: AfiSafi {
                afi: Afi(afi),
                safi: Safi(safi),
            },
            forwarding_preserved: flags & GR_FORWARDING != 0,
        });
    }
    Ok((
        rest,
        GracefulRestart {
            restart_state: flags_time & GR_RESTART_STATE != 0,
            notification: flags_time & GR_NOTIFICATION != 0,
            restart_time: flags_time & GR_TIME_MASK,
            families,
        },
    ))
}

fn fqdn(value: &[u8]) -> Option<Capability> {
    fn text(buf: &[u8]) -> PResult<'_, &[u8]> {
        let (buf, len) = be_u8(buf)?;
        take(len).parse(buf)
    }
    let (rest, (host, domain)) = (text, text).parse(value).ok()?;
    if !rest.is_empty() {
        return None;
    }
    Some(Capability::Fqdn {
        hostname: std::str::from_utf8(host).ok()?.to_owned(),
        domain: std::str::from_utf8(domain).ok()?.to_owned(),
    })
}

/// Writes one capability TLV.
pub(crate) fn encode(cap: &Capability, out: &mut BytesMut) -> Result<(), EncodeError> {
    let start = out.len();
    out.put_u8(cap.code());
    out.put_u8(0);
    match cap {
        Capability::Multiprotocol(f) => {
            out.put_u16(f.afi.0);
            out.put_u8(0);
            out.put_u8(f.safi.0);
        }
        Capability::RouteRefresh
        | Capability::EnhancedRouteRefresh
        | Capability::ExtendedMessage => {}
        Capability::FourOctetAs(asn) => out.put_u32(*asn),
        Capability::ExtendedNextHop(families) => {
            for f in families {
                out.put_u16(f.afi_safi.afi.0);
                out.put_u16(u16::from(f.afi_safi.safi.0));
                out.put_u16(f.next_hop_afi.0);
            }
        }
        Capability::GracefulRestart(gr) => {
            if gr.restart_time > GR_TIME_MASK {
                return Err(EncodeError::OutOfRange {
                    field: "graceful restart time",
                    value: u64::from(gr.restart_time),
                });
            }
            let mut ft = gr.restart_time;
            if gr.restart_state {
                ft |= GR_RESTART_STATE;
            }
            if gr.notification {
                ft |= GR_NOTIFICATION;
            }
            out.put_u16(ft);
            for f in &gr.families {
                out.put_u16(f.afi_safi.afi.0);
                out.put_u8(f.afi_safi.safi.0);
                out.put_u8(if f.forwarding_preserved {
                    GR_FORWARDING
                } else {
                    0
                });
            }
        }
        Capability::AddPath(families) => {
            for f in families {
                out.put_u16(f.afi_safi.afi.0);
                out.put_u8(f.afi_safi.safi.0);
                out.put_u8(f.send_receive as u8);
            }
        }
        Capability::Fqdn { hostname, domain } => {
            for s in [hostname, domain] {
                let len = u8::try_from(s.len()).map_err(|_| EncodeError::FieldTooLong {
                    field: "fqdn capability name",
                    len: s.len(),
                })?;
                out.put_u8(len);
                out.put_slice(s.as_bytes());
            }
        }
        Capability::Unknown { value, .. } => out.put_slice(value),
    }
    let len = out.len() - start - 2;
    let len8 = u8::try_from(len).map_err(|_| EncodeError::FieldTooLong {
        field: "capability",
        len,
    })?;
    out[start + 1] = len8;
    Ok(())
}

/// Decodes a capability list given as bytes (a convenience for tests and tools).
pub fn decode_capabilities(buf: &Bytes) -> Result<Vec<Capability>, DecodeError> {
    let mut out = Vec::new();
    decode_list(buf, Src::shared(buf), &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(cap: Capability, wire: &[u8]) {
        let mut out = BytesMut::new();
        encode(&cap, &mut out).unwrap();
        assert_eq!(&out[..], wire, "{cap:?}");
        let back = decode_capabilities(&out.freeze()).unwrap();
        assert_eq!(back, vec![cap]);
    }

    #[test]
    fn known_capabilities_round_trip() {
        round_trip(
            Capability::Multiprotocol(AfiSafi::IPV6_UNICAST),
            &[0x01, 0x04, 0x00, 0x02, 0x00, 0x01],
        );
        round_trip(Capability::RouteRefresh, &[0x02, 0x00]);
        // RFC 8950 section 4: IPv4 unicast (AFI 1, SAFI 1 in two octets), next hop AFI 2.
        round_trip(
            Capability::ExtendedNextHop(vec![ExtendedNextHopFamily::IPV4_UNICAST_OVER_IPV6]),
            &[0x05, 0x06, 0x00, 0x01, 0x00, 0x01, 0x00, 0x02],
        );
        round_trip(Capability::EnhancedRouteRefresh, &[0x46, 0x00]);
        round_trip(Capability::ExtendedMessage, &[0x06, 0x00]);
        round_trip(
            Capability::FourOctetAs(4_200_000_000),
            &[0x41, 0x04, 0xfa, 0x56, 0xea, 0x00],
        );
        round_trip(
            Capability::GracefulRestart(GracefulRestart {
                restart_state: true,
                notification: true,
                restart_time: 120,
                families: vec![GracefulRestartFamily {
                    afi_safi: AfiSafi::IPV4_UNICAST,
                    forwarding_preserved: true,
                }],
            }),
            &[0x40, 0x06, 0xc0, 0x78, 0x00, 0x01, 0x01, 0x80],
        );
        round_trip(
            Capability::AddPath(vec![AddPathFamily {
                afi_safi: AfiSafi::IPV4_UNICAST,
                send_receive: AddPathMode::Both,
            }]),
            &[0x45, 0x04, 0x00, 0x01, 0x01, 0x03],
        );
        round_trip(
            Capability::Fqdn {
                hostname: "top0".into(),
                domain: String::new(),
            },
            &[0x49, 0x06, 0x04, b't', b'o', b'p', b'0', 0x00],
        );
        round_trip(
            Capability::Unknown {
                code: 0x80,
                value: Bytes::new(),
            },
            &[0x80, 0x00],
        );
    }

    #[test]
    fn malformed_known_capability_is_open_error_unspecific() {
        let buf = Bytes::from_static(&[0x41, 0x02, 0x00, 0x01]);
        let e = decode_capabilities(&buf).unwrap_err();
        assert!(matches!(e, DecodeError::MalformedOpen { .. }));
        assert_eq!(e.notification().subcode, 0);
        let buf = Bytes::from_static(&[0x01, 0x04, 0x00, 0x01]);
        assert!(decode_capabilities(&buf).is_err());
    }

    #[test]
    fn extended_next_hop_of_a_bad_length_is_malformed_and_a_wide_safi_is_kept_unknown() {
        for bad in [&[0x05, 0x00][..], &[0x05, 0x04, 0x00, 0x01, 0x00, 0x01]] {
            let e = decode_capabilities(&Bytes::copy_from_slice(bad)).unwrap_err();
            assert!(matches!(e, DecodeError::MalformedOpen { .. }), "{bad:x?}");
        }
        let buf = Bytes::from_static(&[0x05, 0x06, 0x00, 0x01, 0x01, 0x01, 0x00, 0x02]);
        assert_eq!(
            decode_capabilities(&buf).unwrap(),
            vec![Capability::Unknown {
                code: 5,
                value: buf.slice(2..)
            }]
        );
    }

    #[test]
    fn add_path_with_bad_mode_is_kept_unknown() {
        let buf = Bytes::from_static(&[0x45, 0x04, 0x00, 0x01, 0x01, 0x07]);
        let caps = decode_capabilities(&buf).unwrap();
        assert_eq!(
            caps,
            vec![Capability::Unknown {
                code: 69,
                value: buf.slice(2..)
            }]
        );
    }

    #[test]
    fn unsupported_capability_data_is_the_encoded_list() {
        let e = unsupported_capabilities(&[Capability::ExtendedMessage]).unwrap();
        assert_eq!(&e.notification().data[..], &[0x06, 0x00]);
    }
}
