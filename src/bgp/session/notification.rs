//! The NOTIFICATIONs the session sends and reads: typed error codes and subcodes (IANA
//! "BGP Error (Notification) Codes" and its subcode registries), their constructors, the
//! RFC 9003 Shutdown Communication carried by Cease subcodes 2 and 4, and the RFC 4486
//! data of Cease subcode 1.
//!
//! Owns no state and never reads bytes off a socket; the codec turns the resulting
//! [`Notification`] values into bytes.

use crate::bgp::wire::{AfiSafi, Notification};
use bytes::{BufMut, Bytes, BytesMut};
use std::fmt;

/// NOTIFICATION error codes (RFC 4271 section 4.5, RFC 6608, RFC 7313, RFC 9687).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    MessageHeader = 1,
    Open = 2,
    Update = 3,
    HoldTimerExpired = 4,
    Fsm = 5,
    Cease = 6,
    RouteRefresh = 7,
    SendHoldTimerExpired = 8,
}

/// Message Header Error subcodes (RFC 4271 section 6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderSubcode {
    ConnectionNotSynchronized = 1,
    BadMessageLength = 2,
    BadMessageType = 3,
}

/// OPEN Message Error subcodes (RFC 4271 section 6.2, RFC 5492 section 5). 5, 8, 9 and 10
/// are deprecated and never sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpenSubcode {
    UnsupportedVersionNumber = 1,
    BadPeerAs = 2,
    BadBgpIdentifier = 3,
    UnsupportedOptionalParameter = 4,
    UnacceptableHoldTime = 6,
    UnsupportedCapability = 7,
}

/// Finite State Machine Error subcodes (RFC 6608 section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FsmSubcode {
    Unspecified = 0,
    UnexpectedInOpenSent = 1,
    UnexpectedInOpenConfirm = 2,
    UnexpectedInEstablished = 3,
}

/// Cease subcodes (RFC 4486 section 4, RFC 8538 section 3 for Hard Reset, RFC 9384 for BFD
/// Down).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CeaseSubcode {
    MaxPrefixesReached = 1,
    AdministrativeShutdown = 2,
    PeerDeconfigured = 3,
    AdministrativeReset = 4,
    ConnectionRejected = 5,
    OtherConfigurationChange = 6,
    ConnectionCollisionResolution = 7,
    OutOfResources = 8,
    HardReset = 9,
    BfdDown = 10,
}

/// The highest BGP version this speaker supports, as the 2-octet data of OPEN error
/// subcode 1 (RFC 4271 section 6.2).
pub const BGP_VERSION: u8 = 4;

/// RFC 9003 section 2: the Shutdown Communication holds at most 255 octets of UTF-8.
pub const SHUTDOWN_COMMUNICATION_MAX: usize = 255;

pub(crate) fn notification(code: ErrorCode, subcode: u8, data: Bytes) -> Notification {
    Notification {
        code: code as u8,
        subcode,
        data,
    }
}

pub(crate) fn open_error(subcode: OpenSubcode, data: Bytes) -> Notification {
    notification(ErrorCode::Open, subcode as u8, data)
}

pub(crate) fn fsm_error(subcode: FsmSubcode) -> Notification {
    notification(ErrorCode::Fsm, subcode as u8, Bytes::new())
}

pub(crate) fn cease(subcode: CeaseSubcode, data: Bytes) -> Notification {
    notification(ErrorCode::Cease, subcode as u8, data)
}

/// RFC 4271 section 6.5: Hold Timer Expired carries no subcode and no data.
pub(crate) fn hold_timer_expired() -> Notification {
    notification(ErrorCode::HoldTimerExpired, 0, Bytes::new())
}

/// RFC 4271 section 6.1: Bad Message Type carries the offending type octet.
pub(crate) fn bad_message_type(message_type: u8) -> Notification {
    notification(
        ErrorCode::MessageHeader,
        HeaderSubcode::BadMessageType as u8,
        Bytes::copy_from_slice(&[message_type]),
    )
}

/// RFC 4486 section 4: Cease subcode 1 "MAY" carry AFI (2 octets), SAFI (1 octet) and the
/// upper bound of the prefix count (4 octets).
pub(crate) fn max_prefix_data(afi_safi: AfiSafi, limit: u32) -> Bytes {
    let mut data = BytesMut::with_capacity(7);
    data.put_u16(afi_safi.afi.0);
    data.put_u8(afi_safi.safi.0);
    data.put_u32(limit);
    data.freeze()
}

/// RFC 9003 section 2: a length octet and the message in UTF-8, truncated to 255 octets on
/// a character boundary so that the receiver never sees a broken sequence.
pub fn shutdown_communication(message: &str) -> Bytes {
    let mut end = message.len().min(SHUTDOWN_COMMUNICATION_MAX);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let text = &message.as_bytes()[..end];
    let mut data = BytesMut::with_capacity(1 + text.len());
    // `end` is at most 255 by the min() above.
    data.put_u8(end as u8);
    data.put_slice(text);
    data.freeze()
}

/// The RFC 9003 Shutdown Communication of a received Cease/Administrative Shutdown or
/// Cease/Administrative Reset, if the data holds a well-formed one. A length beyond the
/// data or invalid UTF-8 gives `None` (RFC 9003 section 3: log it, do not act on it).
pub fn read_shutdown_communication(n: &Notification) -> Option<String> {
    let shutdown_like = n.code == ErrorCode::Cease as u8
        && (n.subcode == CeaseSubcode::AdministrativeShutdown as u8
            || n.subcode == CeaseSubcode::AdministrativeReset as u8);
    if !shutdown_like {
        return None;
    }
    let (&len, rest) = n.data.split_first()?;
    let text = rest.get(..len as usize)?;
    std::str::from_utf8(text).ok().map(str::to_owned)
}

/// A human name for a code/subcode pair, for logs and `status` output.
pub fn describe(code: u8, subcode: u8) -> &'static str {
    match (code, subcode) {
        (1, 1) => "message header error: connection not synchronized",
        (1, 2) => "message header error: bad message length",
        (1, 3) => "message header error: bad message type",
        (1, _) => "message header error",
        (2, 1) => "open message error: unsupported version number",
        (2, 2) => "open message error: bad peer as",
        (2, 3) => "open message error: bad bgp identifier",
        (2, 4) => "open message error: unsupported optional parameter",
        (2, 6) => "open message error: unacceptable hold time",
        (2, 7) => "open message error: unsupported capability",
        (2, 11) => "open message error: role mismatch",
        (2, _) => "open message error",
        (3, _) => "update message error",
        (4, _) => "hold timer expired",
        (5, 1) => "fsm error: unexpected message in opensent",
        (5, 2) => "fsm error: unexpected message in openconfirm",
        (5, 3) => "fsm error: unexpected message in established",
        (5, _) => "fsm error",
        (6, 1) => "cease: maximum number of prefixes reached",
        (6, 2) => "cease: administrative shutdown",
        (6, 3) => "cease: peer de-configured",
        (6, 4) => "cease: administrative reset",
        (6, 5) => "cease: connection rejected",
        (6, 6) => "cease: other configuration change",
        (6, 7) => "cease: connection collision resolution",
        (6, 8) => "cease: out of resources",
        (6, 9) => "cease: hard reset",
        (6, 10) => "cease: bfd down",
        (6, _) => "cease",
        (7, _) => "route-refresh message error",
        (8, _) => "send hold timer expired",
        _ => "unknown error code",
    }
}

/// What the session keeps of a NOTIFICATION for its last error and logs: the numbers, their
/// name, and the shutdown communication when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationInfo {
    pub code: u8,
    pub subcode: u8,
    /// The RFC 9003 Shutdown Communication, for Cease subcodes 2 and 4.
    pub message: Option<String>,
    pub data: Bytes,
}

impl From<&Notification> for NotificationInfo {
    fn from(n: &Notification) -> Self {
        NotificationInfo {
            code: n.code,
            subcode: n.subcode,
            message: read_shutdown_communication(n),
            data: n.data.clone(),
        }
    }
}

impl fmt::Display for NotificationInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} ({})",
            self.code,
            self.subcode,
            describe(self.code, self.subcode)
        )?;
        if let Some(message) = &self.message {
            write!(f, " {message:?}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_communication_is_length_prefixed_utf8() {
        let data = shutdown_communication("maintenance");
        assert_eq!(data[0], 0x0b);
        assert_eq!(&data[1..], b"maintenance");
    }

    #[test]
    fn shutdown_communication_truncates_on_a_char_boundary() {
        // 'é' is two octets: 128 of them are 256 octets, one too many; the cut must fall
        // before the last whole character, giving 254 octets.
        let long = "é".repeat(128);
        let data = shutdown_communication(&long);
        assert_eq!(data[0] as usize, 254);
        assert_eq!(data.len(), 255);
        assert!(std::str::from_utf8(&data[1..]).is_ok());
        let exact = "a".repeat(300);
        assert_eq!(shutdown_communication(&exact)[0], 0xff);
    }

    #[test]
    fn empty_shutdown_communication_is_one_zero_octet() {
        assert_eq!(&shutdown_communication("")[..], &[0x00]);
    }

    #[test]
    fn reads_back_a_shutdown_communication() {
        let n = cease(
            CeaseSubcode::AdministrativeShutdown,
            shutdown_communication("bye"),
        );
        assert_eq!(read_shutdown_communication(&n).as_deref(), Some("bye"));
        let info = NotificationInfo::from(&n);
        assert_eq!(
            info.to_string(),
            "6/2 (cease: administrative shutdown) \"bye\""
        );
    }

    #[test]
    fn rejects_malformed_shutdown_communications() {
        let too_long = notification(ErrorCode::Cease, 2, Bytes::from_static(&[0x05, b'a', b'b']));
        assert_eq!(read_shutdown_communication(&too_long), None);
        let bad_utf8 = notification(ErrorCode::Cease, 4, Bytes::from_static(&[0x02, 0xc3, 0x28]));
        assert_eq!(read_shutdown_communication(&bad_utf8), None);
        let empty = notification(ErrorCode::Cease, 2, Bytes::new());
        assert_eq!(read_shutdown_communication(&empty), None);
        // Other subcodes carry other data: never read as text.
        let max_prefix = cease(
            CeaseSubcode::MaxPrefixesReached,
            Bytes::from_static(&[0x01, b'x']),
        );
        assert_eq!(read_shutdown_communication(&max_prefix), None);
    }

    #[test]
    fn max_prefix_data_is_afi_safi_and_limit() {
        let data = max_prefix_data(AfiSafi::IPV6_UNICAST, 1000);
        assert_eq!(&data[..], &[0x00, 0x02, 0x01, 0x00, 0x00, 0x03, 0xe8]);
    }

    #[test]
    fn constructors_use_the_registry_numbers() {
        assert_eq!(
            hold_timer_expired(),
            notification(ErrorCode::HoldTimerExpired, 0, Bytes::new())
        );
        let n = open_error(OpenSubcode::UnacceptableHoldTime, Bytes::new());
        assert_eq!((n.code, n.subcode), (0x02, 0x06));
        let n = fsm_error(FsmSubcode::UnexpectedInOpenConfirm);
        assert_eq!((n.code, n.subcode), (0x05, 0x02));
        let n = bad_message_type(5);
        assert_eq!((n.code, n.subcode, &n.data[..]), (0x01, 0x03, &[0x05][..]));
    }
}
