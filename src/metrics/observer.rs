//! [`Metrics`] as the peer drivers' [`PeerObserver`]: each report becomes the matching
//! `record_*` call, stamped with the wall clock (metrics may read it; the drivers pass
//! no time for these reports).

use std::time::{Duration, SystemTime};

use super::Metrics;
use crate::bgp::session::State;
use crate::bgp::wire::{AfiSafi, MessageType};
use crate::config::PeerKey;
use crate::peer::{Direction, PeerError, PeerObserver, Refusal};

impl PeerObserver for Metrics {
    fn state_changed(&self, peer: &PeerKey, from: State, to: State) {
        self.record_session_state(*peer, from, to, SystemTime::now());
    }

    fn message(&self, peer: &PeerKey, dir: Direction, kind: MessageType) {
        self.record_message(*peer, dir, kind);
    }

    fn notification(&self, peer: &PeerKey, dir: Direction, code: u8, subcode: u8, text: &str) {
        self.record_notification(*peer, dir, code, subcode, Some(text), SystemTime::now());
    }

    fn announced(&self, peer: &PeerKey, afi: AfiSafi, count: u64) {
        self.set_announced(*peer, afi.afi, count);
    }

    fn received(&self, peer: &PeerKey, afi: AfiSafi, count: u64) {
        self.set_received(*peer, afi.afi, count);
    }

    fn update_written(&self, _peer: &PeerKey, since_event: Duration) {
        self.observe_event_to_update(since_event);
    }

    fn not_announced(&self, peer: &PeerKey, afi: AfiSafi, reason: Refusal, count: u64) {
        self.record_not_announced(*peer, afi.afi, reason, count);
    }

    fn error(&self, peer: &PeerKey, error: &PeerError) {
        self.record_error(*peer, &error.to_string(), SystemTime::now());
    }
}
