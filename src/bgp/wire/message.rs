//! The message header and framing (RFC 4271 section 4.1, RFC 8654), dispatch to the
//! per-type codecs, KEEPALIVE and ROUTE-REFRESH (RFC 2918, RFC 7313). Must not buffer
//! or read sockets: the peer task hands in whole messages found with [`check_header`].

use bytes::{BufMut, Bytes, BytesMut};

use super::error::{DecodeError, EncodeError};
use super::input::Src;
use super::output;
use super::types::{
    Afi, AfiSafi, Message, MessageType, RouteRefresh, RouteRefreshSubtype, Safi, Update,
};
use super::{notification, open, update, Context, HEADER_LEN, MAX_MESSAGE_LEN};

/// The all-ones marker (RFC 4271 section 4.1).
pub const MARKER: [u8; 16] = [0xff; 16];

/// Minimum lengths per type (RFC 4271 section 4, RFC 2918 section 3).
const MIN_OPEN: usize = 29;
const MIN_UPDATE: usize = 23;
const MIN_NOTIFICATION: usize = 21;
const ROUTE_REFRESH_LEN: usize = 23;

impl MessageType {
    pub fn from_code(code: u8) -> Option<MessageType> {
        Some(match code {
            1 => MessageType::Open,
            2 => MessageType::Update,
            3 => MessageType::Notification,
            4 => MessageType::Keepalive,
            5 => MessageType::RouteRefresh,
            _ => return None,
        })
    }
}

impl Message {
    pub fn message_type(&self) -> MessageType {
        match self {
            Message::Open(_) => MessageType::Open,
            Message::Update(_) => MessageType::Update,
            Message::Notification(_) => MessageType::Notification,
            Message::Keepalive => MessageType::Keepalive,
            Message::RouteRefresh(_) => MessageType::RouteRefresh,
        }
    }
}

/// Framing: `Ok(None)` while fewer than 19 octets are buffered; `Ok(Some(len))` when
/// the header is valid and the message is `len` octets long (the caller waits for that
/// many); an error for a bad marker (1/1), a length out of range for the context or
/// below the type's minimum (1/2), or an unknown type (1/3) — RFC 4271 section 6.1.
/// OPEN and KEEPALIVE never exceed 4096 octets (RFC 8654 section 4).
pub fn check_header(buf: &[u8], ctx: &Context) -> Result<Option<usize>, DecodeError> {
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    if header[..16] != MARKER {
        return Err(DecodeError::ConnectionNotSynchronized);
    }
    let length = u16::from_be_bytes([header[16], header[17]]);
    let len = usize::from(length);
    let bad_length = DecodeError::BadMessageLength { length };
    if len < HEADER_LEN || len > ctx.max_message_len() {
        return Err(bad_length);
    }
    let msg_type = header[18];
    let Some(kind) = MessageType::from_code(msg_type) else {
        return Err(DecodeError::BadMessageType { msg_type });
    };
    let ok = match kind {
        MessageType::Open => (MIN_OPEN..=MAX_MESSAGE_LEN).contains(&len),
        MessageType::Update => len >= MIN_UPDATE,
        MessageType::Notification => len >= MIN_NOTIFICATION,
        MessageType::Keepalive => len == HEADER_LEN,
        // RFC 7313 section 5 handles a wrong length of BoRR/EoRR with its own error in
        // decode; below the fixed size nothing can be read at all.
        MessageType::RouteRefresh => len >= ROUTE_REFRESH_LEN,
    };
    if !ok {
        return Err(bad_length);
    }
    Ok(Some(len))
}

/// Decodes one whole message (header included) from a borrowed buffer; values kept as
/// bytes are copied out.
pub fn decode_message(msg: &[u8], ctx: &Context) -> Result<Message, DecodeError> {
    decode_from(msg, ctx, Src::copying())
}

/// Decodes one whole message held in `Bytes`; values kept as bytes are slices of it,
/// with no copy.
pub fn decode_message_bytes(msg: Bytes, ctx: &Context) -> Result<Message, DecodeError> {
    decode_from(&msg, ctx, Src::shared(&msg))
}

fn decode_from(msg: &[u8], ctx: &Context, src: Src<'_>) -> Result<Message, DecodeError> {
    let len = match check_header(msg, ctx)? {
        Some(len) => len,
        // Shorter than a header: report what there is as the length.
        None => {
            return Err(DecodeError::BadMessageLength {
                length: u16::try_from(msg.len()).unwrap_or(u16::MAX),
            })
        }
    };
    if len != msg.len() {
        // The header disagrees with the message handed in.
        return Err(DecodeError::BadMessageLength {
            length: u16::from_be_bytes([msg[16], msg[17]]),
        });
    }
    let body = &msg[HEADER_LEN..];
    // check_header accepted the type.
    Ok(match msg[18] {
        1 => Message::Open(open::decode(body, src)?),
        2 => Message::Update(update::decode(body, ctx, src)?),
        3 => {
            // check_header guaranteed the code and subcode octets
            let bad_length = DecodeError::BadMessageLength { length: len as u16 };
            let data = src.bytes(body.get(2..).ok_or(bad_length.clone())?);
            Message::Notification(notification::decode_body(body, data).ok_or(bad_length)?)
        }
        4 => Message::Keepalive,
        5 => Message::RouteRefresh(route_refresh(body, msg, src)?),
        t => return Err(DecodeError::BadMessageType { msg_type: t }),
    })
}

/// ROUTE-REFRESH body: AFI, subtype, SAFI (RFC 2918 section 3, RFC 7313 section 3.2).
fn route_refresh(body: &[u8], whole: &[u8], src: Src<'_>) -> Result<RouteRefresh, DecodeError> {
    let [a0, a1, subtype, safi, rest @ ..] = body else {
        return Err(DecodeError::RouteRefreshLength {
            message: src.bytes(whole),
        });
    };
    let subtype = match subtype {
        0 => RouteRefreshSubtype::Request,
        1 => RouteRefreshSubtype::Borr,
        2 => RouteRefreshSubtype::Eorr,
        r => RouteRefreshSubtype::Reserved(*r),
    };
    // RFC 7313 section 5: BoRR and EoRR are exactly 4 octets after the header. A plain
    // request may carry ORF entries (RFC 5291), which this speaker never negotiates and
    // ignores.
    if !rest.is_empty()
        && matches!(
            subtype,
            RouteRefreshSubtype::Borr | RouteRefreshSubtype::Eorr
        )
    {
        return Err(DecodeError::RouteRefreshLength {
            message: src.bytes(whole),
        });
    }
    Ok(RouteRefresh {
        afi_safi: AfiSafi {
            afi: Afi(u16::from_be_bytes([*a0, *a1])),
            safi: Safi(*safi),
        },
        subtype,
    })
}

/// Encodes one message, header included, appending to `out`. On error `out` is left as
/// it was.
pub fn encode_message(msg: &Message, ctx: &Context, out: &mut BytesMut) -> Result<(), EncodeError> {
    let start = out.len();
    let res = encode_inner(msg, ctx, out, start);
    if res.is_err() {
        out.truncate(start);
    }
    res
}

/// UPDATE, the message sent by the thousand: checked and sized whole, then written into
/// room made once (`output.rs` says why).
fn encode_update(u: &Update, ctx: &Context, out: &mut BytesMut) -> Result<(), EncodeError> {
    let planned = update::plan(u, ctx)?;
    let len = HEADER_LEN + planned.len();
    let max = ctx.max_message_len();
    if len > max {
        return Err(EncodeError::MessageTooLong { len, max });
    }
    output::append(out, len, |room| {
        room.array(MARKER);
        // len <= 65535 after the check above.
        room.u16(len as u16);
        room.u8(MessageType::Update as u8);
        update::write(u, ctx, &planned, room)
    })
}

fn encode_inner(
    msg: &Message,
    ctx: &Context,
    out: &mut BytesMut,
    start: usize,
) -> Result<(), EncodeError> {
    if let Message::Update(u) = msg {
        return encode_update(u, ctx, out);
    }
    out.put_slice(&MARKER);
    out.put_u16(0);
    out.put_u8(msg.message_type() as u8);
    match msg {
        Message::Open(o) => open::encode(o, out)?,
        // Written whole by encode_update above.
        Message::Update(_) => {}
        Message::Notification(n) => notification::encode_body(n, out),
        Message::Keepalive => {}
        Message::RouteRefresh(r) => {
            out.put_u16(r.afi_safi.afi.0);
            out.put_u8(match r.subtype {
                RouteRefreshSubtype::Request => 0,
                RouteRefreshSubtype::Borr => 1,
                RouteRefreshSubtype::Eorr => 2,
                RouteRefreshSubtype::Reserved(v) => v,
            });
            out.put_u8(r.afi_safi.safi.0);
        }
    }
    let len = out.len() - start;
    // RFC 8654 section 4: OPEN is sent before extended messages can be negotiated.
    let max = if matches!(msg, Message::Open(_)) {
        MAX_MESSAGE_LEN
    } else {
        ctx.max_message_len()
    };
    if len > max {
        return Err(EncodeError::MessageTooLong { len, max });
    }
    // len <= 65535 after the check above.
    out[start + 16..start + 18].copy_from_slice(&(len as u16).to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bgp::wire::types::Notification;

    fn header(len: u16, t: u8) -> Vec<u8> {
        let mut v = MARKER.to_vec();
        v.extend_from_slice(&len.to_be_bytes());
        v.push(t);
        v
    }

    #[test]
    fn framing_needs_nineteen_octets() {
        let ctx = Context::default();
        assert_eq!(check_header(&[0xff; 18], &ctx), Ok(None));
        assert_eq!(check_header(&header(19, 4), &ctx), Ok(Some(19)));
        assert_eq!(check_header(&header(4096, 2), &ctx), Ok(Some(4096)));
    }

    #[test]
    fn header_errors() {
        let ctx = Context::default();
        let mut bad = header(19, 4);
        bad[3] = 0xfe;
        assert_eq!(
            check_header(&bad, &ctx),
            Err(DecodeError::ConnectionNotSynchronized)
        );
        assert_eq!(
            check_header(&header(18, 4), &ctx),
            Err(DecodeError::BadMessageLength { length: 18 })
        );
        assert_eq!(
            check_header(&header(4097, 2), &ctx),
            Err(DecodeError::BadMessageLength { length: 4097 })
        );
        assert_eq!(
            check_header(&header(20, 4), &ctx),
            Err(DecodeError::BadMessageLength { length: 20 })
        );
        assert_eq!(
            check_header(&header(22, 2), &ctx),
            Err(DecodeError::BadMessageLength { length: 22 })
        );
        assert_eq!(
            check_header(&header(28, 1), &ctx),
            Err(DecodeError::BadMessageLength { length: 28 })
        );
        assert_eq!(
            check_header(&header(20, 3), &ctx),
            Err(DecodeError::BadMessageLength { length: 20 })
        );
        assert_eq!(
            check_header(&header(22, 5), &ctx),
            Err(DecodeError::BadMessageLength { length: 22 })
        );
        assert_eq!(
            check_header(&header(19, 6), &ctx),
            Err(DecodeError::BadMessageType { msg_type: 6 })
        );
    }

    #[test]
    fn extended_messages_allow_65535_but_not_for_open() {
        let ext = Context {
            extended_message: true,
            ..Context::default()
        };
        assert_eq!(check_header(&header(65535, 2), &ext), Ok(Some(65535)));
        assert_eq!(
            check_header(&header(5000, 1), &ext),
            Err(DecodeError::BadMessageLength { length: 5000 })
        );
    }

    #[test]
    fn keepalive_and_notification_round_trip() {
        let ctx = Context::default();
        let mut out = BytesMut::new();
        encode_message(&Message::Keepalive, &ctx, &mut out).unwrap();
        assert_eq!(&out[..], &header(19, 4)[..]);
        assert_eq!(decode_message(&out, &ctx), Ok(Message::Keepalive));
        let n = Message::Notification(Notification::new(6, 7, Bytes::new()));
        out.clear();
        encode_message(&n, &ctx, &mut out).unwrap();
        assert_eq!(decode_message_bytes(out.clone().freeze(), &ctx), Ok(n));
    }

    #[test]
    fn route_refresh_subtypes_and_rfc7313_length_check() {
        let ctx = Context::default();
        for (st, octet) in [
            (RouteRefreshSubtype::Request, 0),
            (RouteRefreshSubtype::Borr, 1),
            (RouteRefreshSubtype::Eorr, 2),
            (RouteRefreshSubtype::Reserved(9), 9),
        ] {
            let m = Message::RouteRefresh(RouteRefresh {
                afi_safi: AfiSafi::IPV6_UNICAST,
                subtype: st,
            });
            let mut out = BytesMut::new();
            encode_message(&m, &ctx, &mut out).unwrap();
            assert_eq!(&out[19..], &[0x00, 0x02, octet, 0x01]);
            assert_eq!(decode_message(&out, &ctx), Ok(m));
        }
        let mut long = header(24, 5);
        long.extend_from_slice(&[0x00, 0x01, 0x01, 0x01, 0x00]);
        let e = decode_message(&long, &ctx).unwrap_err();
        let n = e.notification();
        assert_eq!((n.code, n.subcode, &n.data[..]), (7, 1, &long[..]));
    }

    #[test]
    fn length_mismatch_with_the_buffer_is_bad_length() {
        let ctx = Context::default();
        let mut m = header(19, 4);
        m.push(0x00);
        assert_eq!(
            decode_message(&m, &ctx),
            Err(DecodeError::BadMessageLength { length: 19 })
        );
    }

    #[test]
    fn encode_refuses_oversized_messages_and_restores_the_buffer() {
        let ctx = Context::default();
        let n = Message::Notification(Notification::new(6, 2, Bytes::from(vec![0u8; 5000])));
        let mut out = BytesMut::from(&b"xy"[..]);
        assert_eq!(
            encode_message(&n, &ctx, &mut out),
            Err(EncodeError::MessageTooLong {
                len: 5021,
                max: 4096
            })
        );
        assert_eq!(&out[..], b"xy");
        let ext = Context {
            extended_message: true,
            ..ctx
        };
        assert!(encode_message(&n, &ext, &mut out).is_ok());
    }

    #[test]
    fn an_update_is_sized_before_it_is_written() {
        use crate::bgp::wire::types::{AsPath, Nlri, Origin, PathAttribute};
        use std::net::Ipv4Addr;

        let ctx = Context::default();
        let attrs = vec![
            PathAttribute::Origin(Origin::Igp),
            PathAttribute::AsPath(AsPath::default()),
            PathAttribute::NextHop(Ipv4Addr::new(192, 0, 2, 1)),
        ];
        let v4 = |s: &str| Nlri::from(s.parse::<ipnet::IpNet>().unwrap());
        let mut out = BytesMut::from(&b"xy"[..]);

        // 1,200 /24s: 4,800 octets of NLRI, refused whole with the length it would
        // have had (19 + 2 + 2 + 14 of attributes + 4,800), nothing written.
        let nlri = (0..1200u32)
            .map(|i| {
                let net = ipnet::Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 + (i << 8)), 24);
                Nlri::from(ipnet::IpNet::V4(net.unwrap()))
            })
            .collect();
        let long = Update {
            attributes: attrs.clone(),
            nlri,
            ..Update::default()
        };
        assert_eq!(
            encode_message(&Message::Update(long), &ctx, &mut out),
            Err(EncodeError::MessageTooLong {
                len: 4837,
                max: 4096
            })
        );
        assert_eq!(&out[..], b"xy");

        let v6 = Update {
            attributes: attrs.clone(),
            nlri: vec![v4("2001:db8::/32")],
            ..Update::default()
        };
        assert!(matches!(
            encode_message(&Message::Update(v6), &ctx, &mut out),
            Err(EncodeError::WrongFamily { .. })
        ));
        assert_eq!(&out[..], b"xy");

        // A value above 255 octets gets the two-octet length (flags 0xd0, 280 octets),
        // written after what the buffer already held.
        let mut attributes = attrs;
        attributes.push(PathAttribute::Communities((0..70).collect()));
        let big = Update {
            attributes,
            nlri: vec![v4("10.0.0.0/8")],
            ..Update::default()
        };
        encode_message(&Message::Update(big.clone()), &ctx, &mut out).unwrap();
        assert_eq!(&out[..2], b"xy");
        let msg = &out[2..];
        assert!(msg.windows(4).any(|w| w == [0xd0, 0x08, 0x01, 0x18]));
        assert_eq!(decode_message(msg, &ctx), Ok(Message::Update(big)));
    }
}
