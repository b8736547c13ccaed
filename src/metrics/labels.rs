//! Label values: every one comes from a closed set or from configuration, so the number
//! of series is bounded by the number of configured peers, watched resources and
//! drifting nodes. Nothing a peer sends becomes a label value without passing through a
//! mapping here that folds the unknown into `other`.

use crate::bgp::wire::{Afi, MessageType};
use crate::config::PeerKey;
pub use crate::peer::Direction;

/// The `peer` label: always `ADDRESS:PORT` (`[ADDRESS]:PORT` for IPv6), the form of
/// [`PeerKey`]'s Display, so a series matches the `peer` field of the logs and the
/// `/status` entry character for character, and two sessions to one router on
/// different ports never share a series.
pub fn peer(key: &PeerKey) -> String {
    key.to_string()
}

/// The `direction` label values, in a fixed order.
pub const DIRECTIONS: [Direction; 2] = [Direction::Sent, Direction::Received];

/// Every message type (RFC 4271 section 4.1, RFC 2918), in type-code order.
pub const MESSAGE_TYPES: [MessageType; 5] = [
    MessageType::Open,
    MessageType::Update,
    MessageType::Notification,
    MessageType::Keepalive,
    MessageType::RouteRefresh,
];

/// The `type` label of a message type.
pub fn message_type(t: MessageType) -> &'static str {
    match t {
        MessageType::Open => "open",
        MessageType::Update => "update",
        MessageType::Notification => "notification",
        MessageType::Keepalive => "keepalive",
        MessageType::RouteRefresh => "route_refresh",
    }
}

/// The `afi` label values a series can carry.
pub const AFIS: [&str; 3] = ["ipv4", "ipv6", "other"];

/// The `afi` label of an Address Family Identifier (IANA "Address Family Numbers"). The
/// speaker negotiates only IPv4 and IPv6; anything else is folded into `other`.
pub fn afi(afi: Afi) -> &'static str {
    match afi {
        Afi::IPV4 => AFIS[0],
        Afi::IPV6 => AFIS[1],
        _ => AFIS[2],
    }
}

/// The `code` and `subcode` labels of a NOTIFICATION. Codes and subcodes in the IANA
/// registries ("BGP Error (Notification) Codes" and the subcode registries, including 0,
/// "unspecific") are kept as numbers; anything else a peer may send becomes `other`, so
/// a peer cannot grow the number of series beyond about fifty per direction.
pub fn notification(code: u8, subcode: u8) -> (&'static str, &'static str) {
    let max_subcode = match code {
        // Message Header Error (RFC 4271 section 6.1).
        1 => 3,
        // OPEN Message Error (RFC 4271, RFC 5492, RFC 9234 role mismatch = 11).
        2 => 11,
        // UPDATE Message Error (RFC 4271 section 6.3; 7 is deprecated but registered).
        3 => 11,
        // Hold Timer Expired and Send Hold Timer Expired (RFC 9687): no subcodes.
        4 | 8 => 0,
        // Finite State Machine Error (RFC 6608).
        5 => 3,
        // Cease (RFC 4486, RFC 8538, RFC 9384).
        6 => 10,
        // ROUTE-REFRESH Message Error (RFC 7313).
        7 => 1,
        _ => return ("other", "other"),
    };
    let code = NUMBERS[usize::from(code)];
    if subcode > max_subcode {
        return (code, "other");
    }
    (code, NUMBERS[usize::from(subcode)])
}

/// Decimal strings of 0..=11, the numbers [`notification`] can return as labels.
const NUMBERS: [&str; 12] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"];

/// The `reason` label of a dropped BFD packet: the BFD task's, the decoder's and the
/// session's bounded names; anything else (none today) is folded into `other`.
pub fn bfd_drop_reason(reason: &str) -> &'static str {
    crate::peer::bfd::DROP_REASONS
        .iter()
        .chain(crate::bfd::PacketError::REASONS)
        .chain(crate::bfd::Discard::REASONS)
        .find(|r| **r == reason)
        .copied()
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn peer_label_is_the_socket_address_in_both_families() {
        let v4 = PeerKey {
            address: "192.0.2.1".parse().unwrap(),
            port: 179,
        };
        let v6 = PeerKey {
            address: "2001:db8::1".parse().unwrap(),
            port: 1179,
        };
        assert_eq!(peer(&v4), "192.0.2.1:179");
        assert_eq!(peer(&v6), "[2001:db8::1]:1179");
    }

    #[test]
    fn notification_labels_keep_registered_numbers_and_fold_the_rest() {
        assert_eq!(notification(0x06, 0x02), ("6", "2"));
        assert_eq!(notification(0x04, 0x00), ("4", "0"));
        assert_eq!(notification(0x02, 0x0b), ("2", "11"));
        assert_eq!(notification(0x01, 0x00), ("1", "0"));
        assert_eq!(notification(0x01, 0x04), ("1", "other"));
        assert_eq!(notification(0x04, 0x01), ("4", "other"));
        assert_eq!(notification(0x06, 0xff), ("6", "other"));
        assert_eq!(notification(0x00, 0x00), ("other", "other"));
        assert_eq!(notification(0x09, 0x01), ("other", "other"));
        assert_eq!(notification(0xff, 0xff), ("other", "other"));
    }

    #[test]
    fn notification_labels_are_a_small_closed_set() {
        let mut seen = BTreeSet::new();
        for code in 0..=u8::MAX {
            for subcode in 0..=u8::MAX {
                seen.insert(notification(code, subcode));
            }
        }
        // 4+12+12+1+4+11+2+1 registered pairs, one `other` subcode for each of the 8
        // codes, and other/other.
        assert_eq!(seen.len(), 47 + 8 + 1);
    }

    #[test]
    fn afi_label_folds_unknown_families() {
        assert_eq!(afi(Afi::IPV4), "ipv4");
        assert_eq!(afi(Afi::IPV6), "ipv6");
        assert_eq!(afi(Afi(25)), "other");
    }

    #[test]
    fn message_type_labels_are_distinct() {
        let labels: BTreeSet<_> = MESSAGE_TYPES.iter().map(|t| message_type(*t)).collect();
        assert_eq!(labels.len(), MESSAGE_TYPES.len());
    }
}
