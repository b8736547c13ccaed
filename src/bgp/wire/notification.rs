//! NOTIFICATION messages (RFC 4271 section 4.5): constructors for what the session
//! sends, the shutdown communication of RFC 8203 / RFC 9003, the maximum-prefix data of
//! RFC 4486, and the body codec. The single source of NOTIFICATION values: the session
//! builds every one it sends here. Must not decide when to send one: that is the
//! session's job.

use bytes::{BufMut, Bytes, BytesMut};

use super::error::{CeaseSubcode, ErrorCode, ErrorKind, FsmError};
use super::types::{AfiSafi, Notification};

/// RFC 9003 section 2: the shutdown communication is at most 255 octets of UTF-8.
pub const MAX_SHUTDOWN_MESSAGE_LEN: usize = 255;

impl Notification {
    pub fn new(code: u8, subcode: u8, data: Bytes) -> Notification {
        Notification {
            code,
            subcode,
            data,
        }
    }

    /// Hold Timer Expired (RFC 4271 section 6.5).
    pub fn hold_timer_expired() -> Notification {
        Notification::new(ErrorCode::HoldTimerExpired.code(), 0, Bytes::new())
    }

    /// Finite State Machine Error (RFC 4271 section 6.6, subcodes of RFC 6608).
    pub fn fsm_error(subcode: FsmError) -> Notification {
        Notification::new(
            ErrorCode::FiniteStateMachine.code(),
            subcode.code(),
            Bytes::new(),
        )
    }

    /// A Cease with no data (RFC 4486).
    pub fn cease(subcode: CeaseSubcode) -> Notification {
        Notification::new(ErrorCode::Cease.code(), subcode.code(), Bytes::new())
    }

    /// Cease / Administrative Shutdown with a shutdown communication (RFC 9003).
    pub fn admin_shutdown(message: &str) -> Notification {
        Notification::with_communication(CeaseSubcode::AdministrativeShutdown, message)
    }

    /// Cease / Administrative Reset with a shutdown communication (RFC 9003).
    pub fn admin_reset(message: &str) -> Notification {
        Notification::with_communication(CeaseSubcode::AdministrativeReset, message)
    }

    /// Cease / Maximum Number of Prefixes Reached with the data RFC 4486 section 4 allows:
    /// AFI (2 octets), SAFI (1 octet) and the configured upper bound (4 octets).
    pub fn max_prefixes_reached(afi_safi: AfiSafi, limit: u32) -> Notification {
        let mut data = BytesMut::with_capacity(7);
        data.put_u16(afi_safi.afi.0);
        data.put_u8(afi_safi.safi.0);
        data.put_u32(limit);
        Notification::new(
            ErrorCode::Cease.code(),
            CeaseSubcode::MaximumPrefixesReached.code(),
            data.freeze(),
        )
    }

    /// Cease / Hard Reset (RFC 8538 section 3) wrapping the NOTIFICATION that caused it:
    /// the data is the inner code, subcode and data.
    pub fn hard_reset(inner: &Notification) -> Notification {
        let mut data = BytesMut::with_capacity(2 + inner.data.len());
        data.put_u8(inner.code);
        data.put_u8(inner.subcode);
        data.put_slice(&inner.data);
        Notification::new(
            ErrorCode::Cease.code(),
            CeaseSubcode::HardReset.code(),
            data.freeze(),
        )
    }

    /// What the (code, subcode) mean.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::from_codes(self.code, self.subcode)
    }

    /// The shutdown communication of a Cease / Administrative Shutdown or Reset
    /// (RFC 9003 section 2): `None` for other NOTIFICATIONs, for an empty message, and
    /// for one whose length octet overruns the data or whose text is not UTF-8 (the
    /// receiver then only logs the NOTIFICATION, RFC 9003 section 3).
    pub fn shutdown_message(&self) -> Option<String> {
        match self.kind() {
            ErrorKind::Cease(
                CeaseSubcode::AdministrativeShutdown | CeaseSubcode::AdministrativeReset,
            ) => {}
            _ => return None,
        }
        let (&len, rest) = self.data.split_first()?;
        let text = rest.get(..usize::from(len))?;
        if text.is_empty() {
            return None;
        }
        std::str::from_utf8(text).ok().map(str::to_owned)
    }

    fn with_communication(subcode: CeaseSubcode, message: &str) -> Notification {
        let text = truncate_utf8(message, MAX_SHUTDOWN_MESSAGE_LEN);
        let mut data = BytesMut::with_capacity(1 + text.len());
        // truncate_utf8 guarantees the length fits in one octet.
        data.put_u8(text.len() as u8);
        data.put_slice(text.as_bytes());
        Notification::new(ErrorCode::Cease.code(), subcode.code(), data.freeze())
    }
}

/// The longest prefix of `s` of at most `max` octets that ends on a char boundary.
fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Decodes a NOTIFICATION body (everything after the header). The header check has
/// already guaranteed at least the two code octets.
pub(crate) fn decode_body(body: &[u8], data: Bytes) -> Option<Notification> {
    match body {
        [code, subcode, ..] => Some(Notification::new(*code, *subcode, data)),
        _ => None,
    }
}

pub(crate) fn encode_body(n: &Notification, out: &mut BytesMut) {
    out.put_u8(n.code);
    out.put_u8(n.subcode);
    out.put_slice(&n.data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_shutdown_round_trips_its_message() {
        let n = Notification::admin_shutdown("maintenance window 42");
        assert_eq!((n.code, n.subcode), (6, 2));
        assert_eq!(n.data[0], 21);
        assert_eq!(
            n.shutdown_message().as_deref(),
            Some("maintenance window 42")
        );
        let r = Notification::admin_reset("policy change");
        assert_eq!((r.code, r.subcode), (6, 4));
        assert_eq!(r.shutdown_message().as_deref(), Some("policy change"));
    }

    #[test]
    fn shutdown_message_is_truncated_on_a_char_boundary() {
        let long = "é".repeat(200); // 400 octets
        let n = Notification::admin_shutdown(&long);
        assert_eq!(n.data[0], 254);
        assert_eq!(n.data.len(), 255);
        assert_eq!(n.shutdown_message().unwrap().chars().count(), 127);
    }

    #[test]
    fn shutdown_message_rejects_malformed_data() {
        // length octet overruns
        let n = Notification::new(6, 2, Bytes::from_static(&[0x05, b'a', b'b']));
        assert_eq!(n.shutdown_message(), None);
        // not UTF-8
        let n = Notification::new(6, 2, Bytes::from_static(&[0x02, 0xc3, 0x28]));
        assert_eq!(n.shutdown_message(), None);
        // empty
        let n = Notification::new(6, 4, Bytes::from_static(&[0x00]));
        assert_eq!(n.shutdown_message(), None);
        // not a shutdown
        let n = Notification::new(6, 3, Bytes::from_static(&[0x01, b'a']));
        assert_eq!(n.shutdown_message(), None);
    }

    #[test]
    fn max_prefixes_reached_carries_afi_safi_and_limit() {
        let n = Notification::max_prefixes_reached(AfiSafi::IPV6_UNICAST, 1000);
        assert_eq!((n.code, n.subcode), (0x06, 0x01));
        assert_eq!(&n.data[..], &[0x00, 0x02, 0x01, 0x00, 0x00, 0x03, 0xe8]);
        // Not a shutdown: the data is never read as a message.
        assert_eq!(n.shutdown_message(), None);
    }

    #[test]
    fn empty_shutdown_communication_is_one_zero_octet() {
        let n = Notification::admin_shutdown("");
        assert_eq!((n.code, n.subcode, &n.data[..]), (6, 2, &[0x00][..]));
    }

    #[test]
    fn constructors_use_the_registry_codes() {
        assert_eq!(
            Notification::hold_timer_expired().kind(),
            ErrorKind::HoldTimerExpired(0)
        );
        assert_eq!(
            Notification::fsm_error(FsmError::UnexpectedInOpenConfirm).kind(),
            ErrorKind::Fsm(FsmError::UnexpectedInOpenConfirm)
        );
        assert_eq!(
            Notification::cease(CeaseSubcode::ConnectionCollisionResolution).kind(),
            ErrorKind::Cease(CeaseSubcode::ConnectionCollisionResolution)
        );
        let hr = Notification::hard_reset(&Notification::hold_timer_expired());
        assert_eq!(
            (hr.code, hr.subcode, &hr.data[..]),
            (6, 9, &[0x04, 0x00][..])
        );
    }
}
