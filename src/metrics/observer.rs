//! The peer tasks' [`PeerObserver`]: [`PeerMetrics`] turns each report into the
//! matching `record_*` call on [`Metrics`], stamped with the wall clock (metrics may read
//! it; the drivers pass no time for these reports).
//!
//! Event-to-update latency: a peer task measures from the moment a new desired route
//! set reached it to the moment every UPDATE for it was written. The daemon adds the
//! part before that, from the source event to the hand-over ([`Latency`]), so the
//! histogram shows the speaker's whole reaction time. Must not block or do I/O: the
//! peer task calls it inline.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::Metrics;
use crate::bfd::{Diag, State as BfdState};
use crate::bgp::session::{Finding, State};
use crate::bgp::wire::{AfiSafi, MessageType};
use crate::config::PeerKey;
use crate::peer::{BfdObserver, BfdStatus, Direction, PeerError, PeerObserver, RouteRefusal};

/// The time from the source event to the hand-over of the latest desired route set to
/// one peer task, in nanoseconds (shared by the daemon, which writes it, and the task's
/// observer, which reads it).
#[derive(Debug, Default)]
pub struct Latency(AtomicU64);

impl Latency {
    pub fn set(&self, before_handover: Duration) {
        let nanos = u64::try_from(before_handover.as_nanos()).unwrap_or(u64::MAX);
        self.0.store(nanos, Ordering::Relaxed);
    }

    fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

/// One peer task's observer: the metrics' own, plus the time before the hand-over in
/// the event-to-update latency.
pub struct PeerMetrics {
    pub metrics: Arc<Metrics>,
    pub latency: Arc<Latency>,
}

impl PeerMetrics {
    /// An observer with nothing before the hand-over (tests, tools).
    pub fn new(metrics: Arc<Metrics>) -> PeerMetrics {
        PeerMetrics {
            metrics,
            latency: Arc::new(Latency::default()),
        }
    }
}

impl PeerObserver for PeerMetrics {
    fn state_changed(&self, peer: &PeerKey, from: State, to: State) {
        self.metrics
            .record_session_state(*peer, from, to, SystemTime::now());
    }

    fn message(&self, peer: &PeerKey, dir: Direction, kind: MessageType) {
        self.metrics.record_message(*peer, dir, kind);
    }

    fn notification(&self, peer: &PeerKey, dir: Direction, code: u8, subcode: u8, text: &str) {
        self.metrics
            .record_notification(*peer, dir, code, subcode, Some(text), SystemTime::now());
    }

    fn announced(&self, peer: &PeerKey, afi: AfiSafi, count: u64) {
        self.metrics.set_announced(*peer, afi.afi, count);
    }

    fn received(&self, peer: &PeerKey, afi: AfiSafi, count: u64) {
        self.metrics.set_received(*peer, afi.afi, count);
    }

    fn update_written(&self, _peer: &PeerKey, since_event: Duration) {
        self.metrics
            .observe_event_to_update(self.latency.get().saturating_add(since_event));
    }

    fn not_announced(&self, peer: &PeerKey, afi: AfiSafi, reason: RouteRefusal, count: u64) {
        self.metrics
            .record_not_announced(*peer, afi.afi, reason, count);
    }

    fn collision_cease(&self, peer: &PeerKey, _subcode: u8) {
        self.metrics.record_collision_cease(*peer);
    }

    fn second_speaker(&self, peer: &PeerKey, finding: Option<&Finding>) {
        // The finding's time on the wall clock: `since` is on the task's monotonic one.
        let finding = finding.map(|f| {
            let ago = Instant::now().saturating_duration_since(f.since);
            (SystemTime::now().checked_sub(ago).unwrap_or(UNIX_EPOCH), *f)
        });
        self.metrics.record_second_speaker(*peer, finding);
    }

    fn error(&self, peer: &PeerKey, error: &PeerError) {
        self.metrics
            .record_error(*peer, &error.to_string(), SystemTime::now());
    }
}

/// Kubernetes Events not written are counted by reason.
impl crate::sources::kube::events::EventObserver for Metrics {
    fn not_written(&self, loss: crate::sources::kube::events::EventLoss) {
        self.record_kube_event_lost(loss);
    }
}

/// The BFD task's observer: the metrics themselves (one task for every peer, each
/// report naming its peer).
impl BfdObserver for Metrics {
    fn bfd_state_changed(
        &self,
        peer: &PeerKey,
        _from: BfdState,
        to: BfdState,
        diag: Diag,
        failure: bool,
    ) {
        self.record_bfd_state(*peer, to, diag, failure);
    }

    fn bfd_status(&self, peer: &PeerKey, status: &BfdStatus) {
        self.record_bfd_status(*peer, status);
    }

    fn bfd_packet(&self, peer: &PeerKey, dir: Direction) {
        self.record_bfd_packet(*peer, dir);
    }

    fn bfd_dropped(&self, peer: Option<&PeerKey>, reason: &'static str) {
        self.record_bfd_dropped(peer.copied(), reason);
    }

    fn bfd_detected(&self, peer: &PeerKey, after: Duration) {
        self.record_bfd_detection(*peer, after);
    }

    fn bfd_removed(&self, peer: &PeerKey) {
        self.record_bfd_removed(*peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PeerKey {
        PeerKey {
            address: "192.0.2.1".parse().unwrap(),
            port: 179,
        }
    }

    fn series(metrics: &Metrics, name: &str) -> Vec<String> {
        metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with(name))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn latency_before_the_handover_is_added_to_the_tasks_own() {
        let metrics = Metrics::new();
        let latency = Arc::new(Latency::default());
        let observer = PeerMetrics {
            metrics: Arc::clone(&metrics),
            latency: Arc::clone(&latency),
        };
        latency.set(Duration::from_millis(300));
        observer.update_written(&key(), Duration::from_millis(450));
        let sum = series(&metrics, "podcidr_speaker_event_to_update_seconds_sum");
        assert_eq!(sum.len(), 1, "{sum:?}");
        let value: f64 = sum[0].rsplit(' ').next().unwrap().parse().unwrap();
        assert!((value - 0.75).abs() < 1e-9, "{value}");
    }

    #[test]
    fn session_states_and_messages_reach_the_peers_series() {
        let metrics = Metrics::new();
        let observer = PeerMetrics {
            metrics: Arc::clone(&metrics),
            latency: Arc::new(Latency::default()),
        };
        observer.state_changed(&key(), State::OpenConfirm, State::Established);
        observer.message(&key(), Direction::Sent, MessageType::Update);
        observer.announced(&key(), AfiSafi::IPV4_UNICAST, 3);
        let text = metrics.encode();
        assert!(
            text.contains("podcidr_speaker_session_up{peer=\"192.0.2.1:179\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "podcidr_speaker_announced_prefixes{afi=\"ipv4\",peer=\"192.0.2.1:179\"} 3"
            ),
            "{text}"
        );
        assert!(
            series(&metrics, "podcidr_speaker_messages_sent_total")
                .iter()
                .any(|l| l.contains("type=\"update\"") && l.ends_with(" 1")),
            "{text}"
        );
    }
}
