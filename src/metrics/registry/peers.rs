//! Each session's series and `/status` entry: declared peers, FSM states and flaps,
//! messages, NOTIFICATIONs, prefixes announced, pending and received, routes not
//! announced or unannounceable, and the removal of a peer with every series it had.
//!
//! Must not: put a prefix or an error text in a label (they go to `/status` only).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Instant, SystemTime};

use super::{saturating_i64, unix_seconds, Inner, Metrics, PeerEntry};
use crate::bgp::session::{Finding, State};
use crate::bgp::wire::{Afi, ErrorKind, MessageType};
use crate::config::PeerKey;
use crate::metrics::board::UnannounceableReport;
use crate::metrics::families::STATES;
use crate::metrics::labels::{self, Direction, AFIS, MESSAGE_TYPES};
use crate::peer::{PeerStatus, RouteRefusal, RoutesQuery};
use crate::routes::{Plan, Unannounceable, UnannounceableReason};
use tokio::sync::mpsc;

impl Metrics {
    // --- sessions ---------------------------------------------------------------------

    /// Declares a configured peer: its series appear at once (down, Idle, no flaps), so
    /// a session that never comes up is visible and alertable. Keeps what an existing
    /// entry already counted; updates the AS number.
    pub fn add_peer(&self, peer: PeerKey, asn: u32, now: SystemTime) {
        let mut inner = self.lock();
        inner.removed.remove(&peer);
        if let Some(entry) = self.peer_entry(&mut inner, peer, now) {
            entry.asn = Some(asn);
        }
    }

    /// Where the running task of `peer` answers `status --routes` (replaced when the
    /// task is started again; dropped with the peer).
    pub fn set_routes_queries(&self, peer: PeerKey, queries: mpsc::Sender<RoutesQuery>) {
        if let Some(entry) = self.lock().peers.get_mut(&peer) {
            entry.queries = Some(queries);
        }
    }

    /// Every peer task that answers `status --routes`, by peer.
    pub fn routes_queries(&self) -> Vec<(PeerKey, mpsc::Sender<RoutesQuery>)> {
        self.lock()
            .peers
            .iter()
            .filter_map(|(k, e)| e.queries.clone().map(|q| (*k, q)))
            .collect()
    }

    /// Deletes every series with this peer's label and its `/status` entry: a peer
    /// removed from the config leaves nothing behind.
    pub fn remove_peer(&self, peer: PeerKey) {
        let mut inner = self.lock();
        inner.removed.insert(peer);
        let Some(entry) = inner.peers.remove(&peer) else {
            return;
        };
        let f = &self.families;
        let p = entry.label.as_str();
        // Errors below mean "no such series": nothing to delete.
        let _ = f.session_up.remove_label_values(&[p]);
        for state in STATES {
            let _ = f.session_state.remove_label_values(&[p, state.as_str()]);
        }
        let _ = f.session_established.remove_label_values(&[p]);
        let _ = f.session_flaps.remove_label_values(&[p]);
        for t in MESSAGE_TYPES {
            let _ = f
                .messages_sent
                .remove_label_values(&[p, labels::message_type(t)]);
            let _ = f
                .messages_received
                .remove_label_values(&[p, labels::message_type(t)]);
        }
        for (dir, code, subcode) in &entry.notifications {
            let _ = f
                .notifications
                .remove_label_values(&[p, dir, code, subcode]);
        }
        for afi in AFIS {
            let _ = f.announced.remove_label_values(&[p, afi]);
            let _ = f.received.remove_label_values(&[p, afi]);
        }
        let _ = f.pending.remove_label_values(&[p]);
        let _ = f.collision_ceases.remove_label_values(&[p]);
        let _ = f.second_speaker.remove_label_values(&[p]);
        for (afi, reason) in &entry.not_announced {
            let _ = f.not_announced.remove_label_values(&[p, afi, reason]);
        }
        for (afi, reason) in &entry.unannounceable {
            let _ = f.unannounceable.remove_label_values(&[p, afi, reason]);
        }
        self.remove_bfd_series(p);
    }

    /// The plan's routes that no peer task is given, per peer: a prefix without a next
    /// hop for that peer (local mode), or of a node without an InternalIP of its family
    /// (cluster mode, every peer). Replaces the previous plan's series and `/status`
    /// entries.
    pub fn record_unannounceable(&self, plan: &Plan) {
        let mut inner = self.lock();
        let now = SystemTime::now();
        for key in plan.peers.keys() {
            let mine: Vec<&Unannounceable> = plan
                .unannounceable
                .iter()
                .filter(|u| match u.reason {
                    UnannounceableReason::NoNextHop { peer, .. } => peer == *key,
                    UnannounceableReason::NoInternalIp { .. } => true,
                })
                .collect();
            // A peer with nothing to report gets no series of its own here: its task
            // (which may not run yet: startup gate, missing Secret) creates them.
            if mine.is_empty() && !inner.peers.contains_key(key) {
                continue;
            }
            let Some(entry) = self.peer_entry(&mut inner, *key, now) else {
                continue;
            };
            let mut counts: BTreeMap<(&'static str, &'static str), i64> = BTreeMap::new();
            for u in &mine {
                let afi = if u.prefix.addr().is_ipv4() {
                    labels::afi(Afi::IPV4)
                } else {
                    labels::afi(Afi::IPV6)
                };
                *counts.entry((afi, u.reason.as_str())).or_default() += 1;
            }
            let f = &self.families;
            let p = entry.label.as_str();
            for (afi, reason) in &entry.unannounceable {
                if !counts.contains_key(&(*afi, *reason)) {
                    let _ = f.unannounceable.remove_label_values(&[p, afi, reason]);
                }
            }
            for ((afi, reason), n) in &counts {
                f.unannounceable
                    .with_label_values(&[p, afi, reason])
                    .set(*n);
            }
            entry.unannounceable = counts.into_keys().collect();
            entry.unannounceable_routes = mine
                .iter()
                .map(|u| UnannounceableReport {
                    node: u.node.to_string(),
                    prefix: u.prefix.to_string(),
                    reason: u.reason.as_str().to_owned(),
                    message: u.to_string(),
                })
                .collect();
        }
    }

    /// A state transition of the session (the driver logs it in the same place).
    /// Leaving Established counts a flap; reaching it stamps the established time.
    pub fn record_session_state(&self, peer: PeerKey, from: State, to: State, now: SystemTime) {
        let mut inner = self.lock();
        let Some(entry) = self.peer_entry(&mut inner, peer, now) else {
            return;
        };
        entry.state = to;
        entry.since = now;
        let f = &self.families;
        let p = entry.label.as_str();
        f.session_up
            .with_label_values(&[p])
            .set(i64::from(to == State::Established));
        for state in STATES {
            f.session_state
                .with_label_values(&[p, state.as_str()])
                .set(i64::from(state == to));
        }
        if to == State::Established {
            entry.down_since = None;
        } else if entry.down_since.is_none() {
            entry.down_since = Some(Instant::now());
        }
        if to == State::Established && from != State::Established {
            entry.established_at = Some(now);
            f.session_established
                .with_label_values(&[p])
                .set(unix_seconds(now));
        }
        if from == State::Established && to != State::Established {
            entry.flaps += 1;
            f.session_flaps.with_label_values(&[p]).inc();
            // The peer dropped our routes with the session.
            for afi in AFIS {
                if let Some(n) = entry.announced.get_mut(afi) {
                    *n = 0;
                    f.announced.with_label_values(&[p, afi]).set(0);
                }
                if let Some(n) = entry.received.get_mut(afi) {
                    *n = 0;
                    f.received.with_label_values(&[p, afi]).set(0);
                }
            }
        }
    }

    /// A Cease refusing a connection while we had no other to the peer
    /// (`bgp::session::second_speaker`).
    pub fn record_collision_cease(&self, peer: PeerKey) {
        let mut inner = self.lock();
        let Some(entry) = self.peer_entry(&mut inner, peer, SystemTime::now()) else {
            return;
        };
        entry.collision_ceases = entry.collision_ceases.saturating_add(1);
        self.families
            .collision_ceases
            .with_label_values(&[entry.label.as_str()])
            .inc();
    }

    /// The second-speaker finding raised or updated (`Some`, `since` its raising as a
    /// wall-clock time), or cleared (`None`).
    pub fn record_second_speaker(&self, peer: PeerKey, finding: Option<(SystemTime, Finding)>) {
        let mut inner = self.lock();
        let Some(entry) = self.peer_entry(&mut inner, peer, SystemTime::now()) else {
            return;
        };
        self.families
            .second_speaker
            .with_label_values(&[entry.label.as_str()])
            .set(i64::from(finding.is_some()));
        entry.second_speaker = finding;
    }

    /// One message sent to or received from the peer.
    pub fn record_message(&self, peer: PeerKey, dir: Direction, t: MessageType) {
        self.record_messages(peer, dir, t, 1);
    }

    /// `n` messages of one type at once (a driver that counts in batches).
    pub fn record_messages(&self, peer: PeerKey, dir: Direction, t: MessageType, n: u64) {
        let mut inner = self.lock();
        let Some(entry) = self.peer_entry(&mut inner, peer, SystemTime::now()) else {
            return;
        };
        let (family, count) = match dir {
            Direction::Sent => (&self.families.messages_sent, &mut entry.messages_sent),
            Direction::Received => (
                &self.families.messages_received,
                &mut entry.messages_received,
            ),
        };
        *count = count.saturating_add(n);
        family
            .with_label_values(&[entry.label.as_str(), labels::message_type(t)])
            .inc_by(n);
    }

    /// A NOTIFICATION sent or received. `text` is its description for people (the
    /// registry's name and any RFC 9003 Shutdown Communication, as the peer driver
    /// gives it); it goes to `/status` as the last error, never to a label. Without a
    /// text the registry's name is used.
    pub fn record_notification(
        &self,
        peer: PeerKey,
        dir: Direction,
        code: u8,
        subcode: u8,
        text: Option<&str>,
        now: SystemTime,
    ) {
        let mut inner = self.lock();
        let Some(entry) = self.peer_entry(&mut inner, peer, now) else {
            return;
        };
        let (code_label, subcode_label) = labels::notification(code, subcode);
        entry
            .notifications
            .insert((dir.as_str(), code_label, subcode_label));
        self.families
            .notifications
            .with_label_values(&[
                entry.label.as_str(),
                dir.as_str(),
                code_label,
                subcode_label,
            ])
            .inc();
        let text = text
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| ErrorKind::from_codes(code, subcode).description());
        entry.last_error = Some(format!("{dir} notification {code}/{subcode}: {text}"));
    }

    /// Why the session last went down or failed (a `SessionError` as text, a dial
    /// error...): `/status` only.
    pub fn record_error(&self, peer: PeerKey, error: &str, now: SystemTime) {
        let mut inner = self.lock();
        if let Some(entry) = self.peer_entry(&mut inner, peer, now) {
            entry.last_error = Some(error.to_owned());
        }
    }

    /// Prefixes of one address family announced to the peer and acknowledged by a sent
    /// UPDATE.
    pub fn set_announced(&self, peer: PeerKey, afi: Afi, n: u64) {
        let mut inner = self.lock();
        let Some(entry) = self.peer_entry(&mut inner, peer, SystemTime::now()) else {
            return;
        };
        let afi = labels::afi(afi);
        entry.announced.insert(afi, n);
        self.families
            .announced
            .with_label_values(&[entry.label.as_str(), afi])
            .set(saturating_i64(n));
    }

    /// Prefixes of one address family the peer currently announces to us.
    pub fn set_received(&self, peer: PeerKey, afi: Afi, n: u64) {
        let mut inner = self.lock();
        let Some(entry) = self.peer_entry(&mut inner, peer, SystemTime::now()) else {
            return;
        };
        let afi = labels::afi(afi);
        entry.received.insert(afi, n);
        self.families
            .received
            .with_label_values(&[entry.label.as_str(), afi])
            .set(saturating_i64(n));
    }

    /// `count` desired routes of one family that the peer driver could not send.
    pub fn record_not_announced(&self, peer: PeerKey, afi: Afi, reason: RouteRefusal, count: u64) {
        let mut inner = self.lock();
        let Some(entry) = self.peer_entry(&mut inner, peer, SystemTime::now()) else {
            return;
        };
        let (afi, reason) = (labels::afi(afi), reason.as_str());
        entry.not_announced.insert((afi, reason));
        self.families
            .not_announced
            .with_label_values(&[entry.label.as_str(), afi, reason])
            .inc_by(count);
    }

    /// What the peer driver's status snapshot adds to its observer reports: the
    /// prefixes still to send (`pending`) and the session's own last error (a hold
    /// timer, a closed connection) for `/status`. The daemon calls it for every peer
    /// when the endpoint asks it, before each scrape, probe or `/status`
    /// ([`Metrics::refresh`]).
    pub fn record_peer_status(&self, status: &PeerStatus, now: SystemTime) {
        let mut inner = self.lock();
        let Some(entry) = self.peer_entry(&mut inner, status.key, now) else {
            return;
        };
        let pending = u64::try_from(status.pending).unwrap_or(u64::MAX);
        entry.pending = pending;
        self.families
            .pending
            .with_label_values(&[entry.label.as_str()])
            .set(saturating_i64(pending));
        // The task's clock is monotonic; the document's is the wall clock.
        let mono = Instant::now();
        entry.next_retry = status
            .next_retry
            .map(|at| now + at.saturating_duration_since(mono));
        let session_error = status.stats.last_error.as_ref().map(ToString::to_string);
        if session_error.is_some() && session_error != entry.session_error {
            entry.last_error.clone_from(&session_error);
        }
        entry.session_error = session_error;
        entry.held_back = status.held.as_deref().map(str::to_owned);
        self.merge_bfd_status(entry, status.bfd.as_ref());
    }

    /// The entry of `peer`, created (and its series initialised) on first sight; `None`
    /// for a peer removed and not added again.
    pub(super) fn peer_entry<'a>(
        &self,
        inner: &'a mut Inner,
        peer: PeerKey,
        now: SystemTime,
    ) -> Option<&'a mut PeerEntry> {
        if inner.removed.contains(&peer) {
            return None;
        }
        Some(inner.peers.entry(peer).or_insert_with(|| {
            let label = labels::peer(&peer);
            let f = &self.families;
            let p = label.as_str();
            f.session_up.with_label_values(&[p]).set(0);
            for state in STATES {
                f.session_state
                    .with_label_values(&[p, state.as_str()])
                    .set(i64::from(state == State::Idle));
            }
            f.session_established.with_label_values(&[p]).set(0.0);
            f.session_flaps.with_label_values(&[p]).inc_by(0);
            f.pending.with_label_values(&[p]).set(0);
            f.collision_ceases.with_label_values(&[p]).inc_by(0);
            f.second_speaker.with_label_values(&[p]).set(0);
            PeerEntry {
                label,
                asn: None,
                state: State::Idle,
                since: now,
                established_at: None,
                flaps: 0,
                announced: BTreeMap::new(),
                pending: 0,
                received: BTreeMap::new(),
                messages_sent: 0,
                messages_received: 0,
                last_error: None,
                next_retry: None,
                not_announced: BTreeSet::new(),
                unannounceable: BTreeSet::new(),
                unannounceable_routes: Vec::new(),
                session_error: None,
                queries: None,
                notifications: BTreeSet::new(),
                down_since: Some(Instant::now()),
                bfd: None,
                collision_ceases: 0,
                second_speaker: None,
                held_back: None,
            }
        }))
    }
}
