//! Counters a session keeps about itself for `status` output and metrics. The driver
//! reads them through `Session::stats()`; the session never exports them itself.

use super::received::PrefixCount;
use super::SessionError;
use crate::bgp::wire::{AfiSafi, Message, MessageType};
use std::collections::BTreeMap;
use std::time::Instant;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub sent: MessageCounts,
    pub received: MessageCounts,
    /// Prefixes the peer currently holds out to us, per negotiated family (cleared when
    /// the session leaves Established).
    pub received_prefixes: BTreeMap<AfiSafi, PrefixCount>,
    /// Families whose End-of-RIB the peer has sent in the current session.
    pub peer_end_of_rib: Vec<AfiSafi>,
    /// Why the session last left a state it wanted to stay in.
    pub last_error: Option<SessionError>,
    /// When the current session reached Established.
    pub established_since: Option<Instant>,
    /// Times the session reached Established.
    pub established_count: u64,
    /// Times the session left Established.
    pub flaps: u64,
    /// UPDATEs given to the session that it could not send: not Established, or a family
    /// not negotiated.
    pub updates_dropped: u64,
    /// Received UPDATEs whose announcements were treated as withdrawals (RFC 7606): the
    /// codec flagged them, or a well-known mandatory attribute was missing. RFC 7606
    /// section 3 asks for the error to be logged: the driver logs the codec's
    /// `Update::errors` itself and watches this counter for the rest.
    pub treated_as_withdraw: u64,
}

/// Messages per type (RFC 4271 section 4.1, RFC 2918).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MessageCounts {
    pub open: u64,
    pub update: u64,
    pub notification: u64,
    pub keepalive: u64,
    pub route_refresh: u64,
}

impl MessageCounts {
    pub(crate) fn count(&mut self, m: &Message) {
        let slot = match message_type(m) {
            MessageType::Open => &mut self.open,
            MessageType::Update => &mut self.update,
            MessageType::Notification => &mut self.notification,
            MessageType::Keepalive => &mut self.keepalive,
            MessageType::RouteRefresh => &mut self.route_refresh,
        };
        *slot = slot.saturating_add(1);
    }

    pub fn total(&self) -> u64 {
        self.open
            .saturating_add(self.update)
            .saturating_add(self.notification)
            .saturating_add(self.keepalive)
            .saturating_add(self.route_refresh)
    }

    pub(crate) fn add(&mut self, other: &MessageCounts) {
        self.open = self.open.saturating_add(other.open);
        self.update = self.update.saturating_add(other.update);
        self.notification = self.notification.saturating_add(other.notification);
        self.keepalive = self.keepalive.saturating_add(other.keepalive);
        self.route_refresh = self.route_refresh.saturating_add(other.route_refresh);
    }
}

pub fn message_type(m: &Message) -> MessageType {
    match m {
        Message::Open(_) => MessageType::Open,
        Message::Update(_) => MessageType::Update,
        Message::Notification(_) => MessageType::Notification,
        Message::Keepalive => MessageType::Keepalive,
        Message::RouteRefresh(_) => MessageType::RouteRefresh,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_type() {
        let mut c = MessageCounts::default();
        c.count(&Message::Keepalive);
        c.count(&Message::Keepalive);
        c.count(&Message::Update(Default::default()));
        assert_eq!((c.keepalive, c.update, c.open), (2, 1, 0));
        assert_eq!(c.total(), 3);
        let mut d = MessageCounts::default();
        d.add(&c);
        d.add(&c);
        assert_eq!(d.keepalive, 4);
    }
}
