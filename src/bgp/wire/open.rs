//! OPEN messages (RFC 4271 section 4.2) with optional parameters (RFC 5492) in the
//! classic and the extended length format (RFC 9072), plus the OPEN checks that need
//! no configuration. Must not compare against local settings (peer AS, hold time
//! floor, our identifier): the session does that with the errors of `error.rs`.

use bytes::{BufMut, BytesMut};
use nom::bytes::complete::take;
use nom::number::complete::{be_u16, be_u32, be_u8};
use nom::Parser;
use std::net::Ipv4Addr;

use super::capability;
use super::error::{DecodeError, EncodeError, BGP_VERSION};
use super::input::{PResult, Src};
use super::types::{Capability, Open, AS_TRANS};

/// Optional parameter type of Capabilities (RFC 5492 section 4).
pub const PARAM_CAPABILITIES: u8 = 2;
/// RFC 9072 section 2: Non-Ext OP Len and Non-Ext OP Type both 255 announce the
/// extended format.
const EXTENDED_PARAMS: u8 = 255;

impl Open {
    /// An OPEN for `asn`: `my_as` is AS_TRANS when the AS needs four octets, and the
    /// 4-octet AS capability is added when missing (RFC 6793 section 3).
    pub fn new(
        asn: u32,
        hold_time: u16,
        bgp_id: Ipv4Addr,
        mut capabilities: Vec<Capability>,
    ) -> Open {
        if !capabilities
            .iter()
            .any(|c| matches!(c, Capability::FourOctetAs(_)))
        {
            capabilities.push(Capability::FourOctetAs(asn));
        }
        Open {
            version: BGP_VERSION,
            my_as: u16::try_from(asn).unwrap_or(AS_TRANS),
            hold_time,
            bgp_id,
            capabilities,
            other_params: Vec::new(),
        }
    }
}

/// The OPEN checks of RFC 4271 section 6.2 that need no configuration: hold time 1 or
/// 2 (2/6), a zero BGP identifier (2/3, RFC 6286 section 2.2), AS 0 (2/2, RFC 7607
/// section 2), optional parameters other than capabilities (2/4, RFC 5492 section 4).
/// The version was checked while decoding.
pub fn validate_open(open: &Open) -> Result<(), DecodeError> {
    if open.hold_time == 1 || open.hold_time == 2 {
        return Err(DecodeError::UnacceptableHoldTime {
            hold_time: open.hold_time,
        });
    }
    if open.bgp_id.is_unspecified() {
        return Err(DecodeError::BadBgpId { id: open.bgp_id });
    }
    if open.asn() == 0 {
        return Err(DecodeError::BadPeerAs { asn: 0 });
    }
    if let Some((param_type, _)) = open.other_params.first() {
        return Err(DecodeError::UnsupportedOptionalParameter {
            param_type: *param_type,
        });
    }
    Ok(())
}

/// Decodes an OPEN body (after the header; the header check guarantees 10 octets).
pub(crate) fn decode(body: &[u8], src: Src<'_>) -> Result<Open, DecodeError> {
    let fixed = |b| -> PResult<'_, (u8, u16, u16, u32, u8)> {
        (be_u8, be_u16, be_u16, be_u32, be_u8).parse(b)
    };
    let (rest, (version, my_as, hold_time, id, opt_len)) =
        fixed(body).map_err(|_| DecodeError::MalformedOpen {
            reason: "open shorter than its fixed fields",
        })?;
    if version != BGP_VERSION {
        return Err(DecodeError::UnsupportedVersion { version });
    }
    let extended = opt_len == EXTENDED_PARAMS && rest.first() == Some(&EXTENDED_PARAMS);
    let (params, trailing) = if extended {
        let ext = |b| -> PResult<'_, &[u8]> {
            let (b, _type) = be_u8(b)?;
            let (b, len) = be_u16(b)?;
            take(len).parse(b)
        };
        let (trailing, params) = ext(rest).map_err(|_| DecodeError::MalformedOpen {
            reason: "extended optional parameters length exceeds the message",
        })?;
        (params, trailing)
    } else {
        let (trailing, params) =
            take::<_, _, ()>(opt_len)
                .parse(rest)
                .map_err(|_| DecodeError::MalformedOpen {
                    reason: "optional parameters length exceeds the message",
                })?;
        (params, trailing)
    };
    if !trailing.is_empty() {
        return Err(DecodeError::MalformedOpen {
            reason: "octets after the optional parameters",
        });
    }
    let mut open = Open {
        version,
        my_as,
        hold_time,
        bgp_id: Ipv4Addr::from(id),
        capabilities: Vec::new(),
        other_params: Vec::new(),
    };
    let mut rest = params;
    while !rest.is_empty() {
        let param = |b| -> PResult<'_, (u8, &[u8])> {
            let (b, t) = be_u8(b)?;
            let (b, len) = if extended {
                be_u16(b)?
            } else {
                be_u8(b).map(|(b, l)| (b, u16::from(l)))?
            };
            let (b, v) = take(len).parse(b)?;
            Ok((b, (t, v)))
        };
        let (r, (param_type, value)) = param(rest).map_err(|_| DecodeError::MalformedOpen {
            reason: "optional parameter overruns the optional parameters",
        })?;
        rest = r;
        if param_type == PARAM_CAPABILITIES {
            capability::decode_list(value, src, &mut open.capabilities)?;
        } else {
            open.other_params.push((param_type, src.bytes(value)));
        }
    }
    Ok(open)
}

/// Writes an OPEN body. All capabilities go in one Capabilities parameter; the extended
/// parameter format of RFC 9072 is used only when the parameters exceed 255 octets.
pub(crate) fn encode(open: &Open, out: &mut BytesMut) -> Result<(), EncodeError> {
    out.put_u8(open.version);
    out.put_u16(open.my_as);
    out.put_u16(open.hold_time);
    out.put_u32(u32::from(open.bgp_id));
    let mut caps = BytesMut::new();
    for c in &open.capabilities {
        capability::encode(c, &mut caps)?;
    }
    let params: Vec<(u8, &[u8])> = (!caps.is_empty())
        .then_some((PARAM_CAPABILITIES, &caps[..]))
        .into_iter()
        .chain(open.other_params.iter().map(|(t, v)| (*t, &v[..])))
        .collect();
    let classic: usize = params.iter().map(|(_, v)| 2 + v.len()).sum();
    let fits_classic =
        classic < usize::from(EXTENDED_PARAMS) && params.iter().all(|(_, v)| v.len() <= 255);
    if fits_classic {
        // `classic < 255` was just checked.
        out.put_u8(classic as u8);
        for (t, v) in params {
            out.put_u8(t);
            out.put_u8(v.len() as u8);
            out.put_slice(v);
        }
    } else {
        let extended: usize = params.iter().map(|(_, v)| 3 + v.len()).sum();
        let total = u16::try_from(extended).map_err(|_| EncodeError::FieldTooLong {
            field: "optional parameters",
            len: extended,
        })?;
        out.put_u8(EXTENDED_PARAMS);
        out.put_u8(EXTENDED_PARAMS);
        out.put_u16(total);
        for (t, v) in params {
            out.put_u8(t);
            // each value is shorter than the u16 total just checked
            out.put_u16(v.len() as u16);
            out.put_slice(v);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bgp::wire::types::AfiSafi;
    use bytes::Bytes;

    fn open_with(caps: Vec<Capability>) -> Open {
        Open {
            version: 4,
            my_as: 65001,
            hold_time: 90,
            bgp_id: Ipv4Addr::new(192, 0, 2, 1),
            capabilities: caps,
            other_params: Vec::new(),
        }
    }

    #[test]
    fn classic_open_round_trips() {
        let open = open_with(vec![
            Capability::Multiprotocol(AfiSafi::IPV4_UNICAST),
            Capability::FourOctetAs(65001),
        ]);
        let mut out = BytesMut::new();
        encode(&open, &mut out).unwrap();
        assert_eq!(
            &out[..],
            &[
                0x04, 0xfd, 0xe9, 0x00, 0x5a, 0xc0, 0x00, 0x02, 0x01, 0x0e, 0x02, 0x0c, 0x01, 0x04,
                0x00, 0x01, 0x00, 0x01, 0x41, 0x04, 0x00, 0x00, 0xfd, 0xe9
            ]
        );
        assert_eq!(decode(&out, Src::copying()).unwrap(), open);
    }

    #[test]
    fn long_parameters_use_rfc9072_format() {
        let caps: Vec<Capability> = (0..70)
            .map(|i| Capability::Unknown {
                code: 200,
                value: Bytes::from(vec![i as u8; 2]),
            })
            .collect();
        let open = open_with(caps);
        let mut out = BytesMut::new();
        encode(&open, &mut out).unwrap();
        assert_eq!(&out[9..13], &[0xff, 0xff, 0x01, 0x1b]); // 3 + 70 * 4 = 283
        assert_eq!(decode(&out, Src::copying()).unwrap(), open);
    }

    #[test]
    fn version_three_is_refused_with_version_four_data() {
        let body = [0x03, 0x00, 0x01, 0x00, 0x5a, 0x01, 0x01, 0x01, 0x01, 0x00];
        let e = decode(&body, Src::copying()).unwrap_err();
        assert_eq!(e, DecodeError::UnsupportedVersion { version: 3 });
        assert_eq!(&e.notification().data[..], &[0x00, 0x04]);
    }

    #[test]
    fn inconsistent_parameter_lengths_are_open_errors() {
        // opt len 4 but only 2 octets follow
        let body = [
            0x04, 0x00, 0x01, 0x00, 0x5a, 0x01, 0x01, 0x01, 0x01, 0x04, 0x02, 0x00,
        ];
        assert!(matches!(
            decode(&body, Src::copying()),
            Err(DecodeError::MalformedOpen { .. })
        ));
        // param says 3 octets, region has 2
        let body = [
            0x04, 0x00, 0x01, 0x00, 0x5a, 0x01, 0x01, 0x01, 0x01, 0x02, 0x02, 0x03,
        ];
        assert!(matches!(
            decode(&body, Src::copying()),
            Err(DecodeError::MalformedOpen { .. })
        ));
        // trailing octet after parameters
        let body = [
            0x04, 0x00, 0x01, 0x00, 0x5a, 0x01, 0x01, 0x01, 0x01, 0x00, 0x00,
        ];
        assert!(matches!(
            decode(&body, Src::copying()),
            Err(DecodeError::MalformedOpen { .. })
        ));
    }

    #[test]
    fn validation_without_configuration() {
        let mut open = open_with(vec![]);
        assert_eq!(validate_open(&open), Ok(()));
        open.hold_time = 2;
        assert_eq!(
            validate_open(&open),
            Err(DecodeError::UnacceptableHoldTime { hold_time: 2 })
        );
        open.hold_time = 0;
        open.bgp_id = Ipv4Addr::UNSPECIFIED;
        assert!(matches!(
            validate_open(&open),
            Err(DecodeError::BadBgpId { .. })
        ));
        open.bgp_id = Ipv4Addr::new(1, 1, 1, 1);
        open.other_params.push((1, Bytes::from_static(&[0x00])));
        let e = validate_open(&open).unwrap_err();
        assert_eq!((e.notification().code, e.notification().subcode), (2, 4));
        let zero = Open::new(0, 90, Ipv4Addr::new(1, 1, 1, 1), vec![]);
        assert_eq!(validate_open(&zero), Err(DecodeError::BadPeerAs { asn: 0 }));
    }

    #[test]
    fn new_uses_as_trans_for_four_octet_as() {
        let open = Open::new(4_200_000_001, 90, Ipv4Addr::new(1, 1, 1, 1), vec![]);
        assert_eq!(open.my_as, AS_TRANS);
        assert_eq!(open.asn(), 4_200_000_001);
        let open = Open::new(65001, 90, Ipv4Addr::new(1, 1, 1, 1), vec![]);
        assert_eq!(open.my_as, 65001);
    }
}
