//! Each peer's BFD session: its series (created on first sight, removed with the
//! session or the peer) and what `/status` shows of it, merged from the BFD task's
//! observer and the peer task's status.
//!
//! Must not: decide what a BFD failure does to BGP (the peer task does); it counts.

use std::time::{Duration, SystemTime};

use super::{BfdEntry, Metrics, PeerEntry};
use crate::bfd::{Diag, State as BfdState};
use crate::config::PeerKey;
use crate::metrics::families::{Families, BFD_STATES};
use crate::metrics::labels::{self, Direction};
use crate::peer::BfdStatus;

impl Metrics {
    pub(super) fn remove_bfd_series(&self, p: &str) {
        let f = &self.families;
        // Errors: no such series, nothing to delete.
        let _ = f.bfd_up.remove_label_values(&[p]);
        for state in BFD_STATES {
            let _ = f.bfd_state.remove_label_values(&[p, state.name()]);
            let _ = f.bfd_transitions.remove_label_values(&[p, state.name()]);
        }
        let _ = f.bfd_packets_sent.remove_label_values(&[p]);
        let _ = f.bfd_packets_received.remove_label_values(&[p]);
        let _ = f.bfd_last_detection.remove_label_values(&[p]);
    }

    // --- bfd --------------------------------------------------------------------------

    /// The entry of a peer's BFD session, its series created (Down, no packets) on
    /// first sight.
    fn bfd_entry<'a>(&self, entry: &'a mut PeerEntry) -> &'a mut BfdEntry {
        let f = &self.families;
        let p = entry.label.as_str();
        entry.bfd.get_or_insert_with(|| {
            f.bfd_up.with_label_values(&[p]).set(0);
            for state in BFD_STATES {
                f.bfd_state
                    .with_label_values(&[p, state.name()])
                    .set(i64::from(state == BfdState::Down));
                f.bfd_transitions
                    .with_label_values(&[p, state.name()])
                    .inc_by(0);
            }
            f.bfd_packets_sent.with_label_values(&[p]).inc_by(0);
            f.bfd_packets_received.with_label_values(&[p]).inc_by(0);
            BfdEntry::default()
        })
    }

    /// A BFD session changed state (RFC 5880 section 6.2); `failure`: a failure of the
    /// path (RFC 5882 section 3.2), counted.
    pub fn record_bfd_state(&self, peer: PeerKey, to: BfdState, diag: Diag, failure: bool) {
        self.with_bfd(peer, |f, p, bfd| {
            bfd.state = Some(to);
            bfd.diag = Some(diag);
            if failure {
                bfd.failures = bfd.failures.saturating_add(1);
            }
            f.bfd_up
                .with_label_values(&[p])
                .set(i64::from(to == BfdState::Up));
            for state in BFD_STATES {
                f.bfd_state
                    .with_label_values(&[p, state.name()])
                    .set(i64::from(state == to));
            }
            f.bfd_transitions.with_label_values(&[p, to.name()]).inc();
        });
    }

    /// Runs `update` on the peer's BFD entry (created with its series on first sight)
    /// with the families and the peer's label; nothing for a removed peer.
    fn with_bfd(&self, peer: PeerKey, update: impl FnOnce(&Families, &str, &mut BfdEntry)) {
        let mut inner = self.lock();
        let Some(entry) = self.peer_entry(&mut inner, peer, SystemTime::now()) else {
            return;
        };
        let label = entry.label.clone();
        let bfd = self.bfd_entry(entry);
        update(&self.families, &label, bfd);
    }

    /// One BFD control packet sent to, or accepted from, the peer.
    pub fn record_bfd_packet(&self, peer: PeerKey, dir: Direction) {
        self.with_bfd(peer, |f, p, bfd| {
            let (family, count) = match dir {
                Direction::Sent => (&f.bfd_packets_sent, &mut bfd.packets_sent),
                Direction::Received => (&f.bfd_packets_received, &mut bfd.packets_received),
            };
            *count = count.saturating_add(1);
            family.with_label_values(&[p]).inc();
        });
    }

    /// A received BFD packet dropped, for `reason` (a bounded name from the BFD task,
    /// the decoder or the session; anything else is folded into `other`); counted for
    /// the peer in `/status` when it is known.
    pub fn record_bfd_dropped(&self, peer: Option<PeerKey>, reason: &str) {
        let reason = labels::bfd_drop_reason(reason);
        self.families.bfd_dropped.with_label_values(&[reason]).inc();
        if let Some(peer) = peer {
            let mut inner = self.lock();
            if let Some(entry) = inner.peers.get_mut(&peer) {
                if let Some(bfd) = entry.bfd.as_mut() {
                    bfd.packets_dropped = bfd.packets_dropped.saturating_add(1);
                }
            }
        }
    }

    /// A BFD failure detected `after` the last packet received from the peer.
    pub fn record_bfd_detection(&self, peer: PeerKey, after: Duration) {
        self.with_bfd(peer, |f, p, bfd| {
            bfd.last_detection = Some(after);
            f.bfd_last_detection
                .with_label_values(&[p])
                .set(after.as_secs_f64());
        });
    }

    /// The peer no longer has a BFD session: its BFD series go.
    pub fn record_bfd_removed(&self, peer: PeerKey) {
        let mut inner = self.lock();
        if let Some(entry) = inner.peers.get_mut(&peer) {
            entry.bfd = None;
            let p = entry.label.clone();
            drop(inner);
            self.remove_bfd_series(&p);
        }
    }

    /// A BFD session's published status: the detection time in force, the remote's
    /// state and discriminator, the failures counted. The peer task's status carries
    /// the same (read when the endpoint asks the main loop, `Peers::report`, so it may lag: it never goes back).
    pub fn record_bfd_status(&self, peer: PeerKey, status: &BfdStatus) {
        let mut inner = self.lock();
        let Some(entry) = self.peer_entry(&mut inner, peer, SystemTime::now()) else {
            return;
        };
        self.merge_bfd_status(entry, Some(status));
    }

    pub(super) fn merge_bfd_status(&self, entry: &mut PeerEntry, status: Option<&BfdStatus>) {
        let Some(status) = status else {
            return;
        };
        let bfd = self.bfd_entry(entry);
        // State and diagnostic come from the observer, at once; these only from here.
        bfd.remote_state = Some(status.remote_state);
        bfd.multihop = status.multihop;
        bfd.local_discr = status.local_discr;
        bfd.remote_discr = status.remote_discr;
        bfd.detection_time = status.detection_time;
        // The task's count lags behind the observer's (it is read when the endpoint
        // asks the main loop): never go back.
        bfd.failures = bfd.failures.max(status.failures);
        if status.last_detection.is_some() {
            bfd.last_detection = status.last_detection;
        }
    }
}
