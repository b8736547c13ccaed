//! The `/status` document ([`Status`]) at a given time, read from the registry's state
//! under its lock, with the liveness and readiness of that moment. Must not: compute
//! anything the state does not hold (it only copies and formats).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use super::{whole_seconds, Metrics};
use crate::bfd::{Diag, State as BfdState};
use crate::bgp::session::State;
use crate::metrics::board::{BfdReport, PeerReport, SecondSpeakerReport, SourceReport, Status};

impl Metrics {
    /// The `/status` document at `now`.
    pub fn status(&self, now: SystemTime, instant: Instant) -> Status {
        let alive = self.alive_at(instant);
        let readiness = self.readiness_at(instant);
        let inner = self.lock();
        let age = |t: SystemTime| now.duration_since(t).map_or(0, |d| d.as_secs());
        Status {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            now_unix: whole_seconds(now),
            node: inner.node.clone(),
            alive,
            ready: readiness.ready,
            ready_reasons: readiness.reasons,
            gate: inner.gate.clone(),
            lb: inner.lb.clone(),
            stopping: inner.stopping.clone(),
            cilium_bgp: inner.cilium_bgp.clone(),
            config: inner.config.clone(),
            sources: inner
                .sources
                .resources
                .iter()
                .map(|(resource, s)| SourceReport {
                    resource: resource.as_str().to_owned(),
                    up: s.up,
                    synced: s.synced,
                    last_event_unix: s.last_event.map(whole_seconds),
                    events: s.events,
                    errors: s.errors,
                    last_error: s.last_error.clone(),
                })
                .collect(),
            view: inner.view.clone(),
            peers: inner
                .peers
                .iter()
                .map(|(key, e)| PeerReport {
                    peer: e.label.clone(),
                    address: key.address,
                    port: key.port,
                    asn: e.asn,
                    state: e.state.as_str().to_owned(),
                    up: e.state == State::Established,
                    state_seconds: age(e.since),
                    established_unix: e.established_at.map(whole_seconds),
                    uptime_seconds: e
                        .established_at
                        .filter(|_| e.state == State::Established)
                        .map(age),
                    flaps: e.flaps,
                    announced: counts(&e.announced),
                    pending: e.pending,
                    received: counts(&e.received),
                    messages_sent: e.messages_sent,
                    messages_received: e.messages_received,
                    last_error: e.last_error.clone(),
                    routes: None,
                    next_retry_unix: e
                        .next_retry
                        .filter(|_| e.state == State::Idle)
                        .map(whole_seconds),
                    unannounceable: e.unannounceable_routes.clone(),
                    bfd: e.bfd.as_ref().map(|b| BfdReport {
                        state: b.state.map_or("down", BfdState::name).to_owned(),
                        up: b.state == Some(BfdState::Up),
                        diag: b.diag.map_or("none", Diag::name).to_owned(),
                        remote_state: b.remote_state.map(|s| s.name().to_owned()),
                        multihop: b.multihop,
                        local_discr: b.local_discr,
                        remote_discr: b.remote_discr,
                        detection_time_ms: millis(b.detection_time),
                        failures: b.failures,
                        last_detection_ms: b.last_detection.map(millis),
                        packets_sent: b.packets_sent,
                        packets_received: b.packets_received,
                        packets_dropped: b.packets_dropped,
                    }),
                    collision_ceases: e.collision_ceases,
                    second_speaker: e.second_speaker.map(|(since, f)| SecondSpeakerReport {
                        since_unix: whole_seconds(since),
                        ceases: u64::try_from(f.signs).unwrap_or(u64::MAX),
                        window_seconds: f.window.as_secs(),
                        last_subcode: f.last_subcode,
                        message: f.to_string(),
                    }),
                    held_back: e.held_back.clone(),
                })
                .collect(),
        }
    }
}

fn counts(map: &BTreeMap<&'static str, u64>) -> BTreeMap<String, u64> {
    map.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
