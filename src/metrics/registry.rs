//! [`Metrics`]: the explicit registry, the typed `record_*` methods the daemon and the
//! peer drivers call, and the state behind `/status`, `/healthz` and `/readyz`.
//!
//! Every method updates the series and the status document under one lock, so a scrape
//! and a `/status` read taken together never disagree. The lock is held for a few
//! atomic stores; nothing under it blocks or allocates more than a label string.
//!
//! Label arity is fixed per family (the `with_label_values` calls below can only fail on
//! a wrong number of values, which the unit tests exercise for every family).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

use super::board::{
    BfdReport, ConfigReport, DriftReport, GateReport, LbReport, OverlapReport, PeerReport,
    RefusedReport, SourceReport, Status, StopReport, UnannounceableReport, ViewReport,
};
use super::labels::{self, Direction, AFIS, MESSAGE_TYPES};
use crate::bfd::{Diag, State as BfdState};
use crate::bgp::session::State;
use crate::bgp::wire::{Afi, ErrorKind, MessageType};
use crate::config::state::{ConfigStatus, ConfigUpdate};
use crate::config::PeerKey;
use crate::peer::{Beat, BfdStatus, PeerStatus, RouteRefusal, RoutesQuery};
use crate::routes::lb::LbReason;
use crate::routes::stop::{ClassStop, StopKind};
use crate::routes::{Plan, Unannounceable, UnannounceableReason};
use crate::sources::kube::events::EventLoss;
use crate::sources::model::{IpamError, IpamMode, NodeView};
use crate::sources::{Resource, SourceStatus};
use tokio::sync::mpsc;

/// The prefix of every metric name.
pub const NAMESPACE: &str = "podcidr_speaker";

/// How long the main loop may go without a heartbeat before `/healthz` fails, unless
/// [`Metrics::with_liveness`] says otherwise. The daemon beats every few seconds even
/// when idle; a minute without one is a wedged loop, not a busy one.
pub const DEFAULT_LIVENESS: Duration = Duration::from_secs(60);

/// Buckets of the event-to-update histogram, in seconds: the speaker's own latency from
/// a source change to the UPDATE on the wire, from a millisecond (one node, idle) to
/// half a minute (a full table to a slow peer).
pub const EVENT_TO_UPDATE_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Every FSM state (RFC 4271 section 8.2.2), for the one-hot state series.
const STATES: [State; 6] = [
    State::Idle,
    State::Connect,
    State::Active,
    State::OpenSent,
    State::OpenConfirm,
    State::Established,
];

/// Every BFD session state (RFC 5880 section 4.1), for the one-hot BFD state series.
const BFD_STATES: [BfdState; 4] = [
    BfdState::AdminDown,
    BfdState::Down,
    BfdState::Init,
    BfdState::Up,
];

/// The IPAM modes, for the one-hot mode series.
const IPAM_MODES: [IpamMode; 3] = IpamMode::ALL;

/// The series and the status behind the HTTP endpoint. Create one with [`Metrics::new`]
/// and share the `Arc`.
pub struct Metrics {
    registry: Registry,
    families: Families,
    inner: Mutex<Inner>,
    liveness: Duration,
    /// The main loop's last heartbeat.
    beat: Beat,
}

/// The metric families, registered once in [`Metrics::new`].
struct Families {
    session_up: IntGaugeVec,
    session_state: IntGaugeVec,
    session_established: GaugeVec,
    session_flaps: IntCounterVec,
    messages_sent: IntCounterVec,
    messages_received: IntCounterVec,
    notifications: IntCounterVec,
    announced: IntGaugeVec,
    pending: IntGaugeVec,
    received: IntGaugeVec,
    not_announced: IntCounterVec,
    unannounceable: IntGaugeVec,
    config_loaded: IntGauge,
    config_reload_ok: IntGauge,
    config_reload_time: prometheus::Gauge,
    config_reloads: IntCounterVec,
    config_info: IntGaugeVec,
    source_up: IntGaugeVec,
    source_synced: IntGaugeVec,
    source_last_event: GaugeVec,
    source_events: IntCounterVec,
    source_errors: IntCounterVec,
    view_nodes: IntGauge,
    view_prefixes: IntGauge,
    ipam_mode: IntGaugeVec,
    ipam_error: IntGauge,
    drift: IntGaugeVec,
    drift_nodes: IntGauge,
    conflicts: IntGauge,
    refused: IntGauge,
    lb_announced: IntGauge,
    lb_not_announced: IntGaugeVec,
    lb_routes: IntGauge,
    event_to_update: Histogram,
    kube_events_lost: IntCounterVec,
    cilium_healthy: IntGauge,
    cilium_flaps: prometheus::IntCounter,
    gate_open: IntGauge,
    stop_decision: IntGaugeVec,
    bfd_up: IntGaugeVec,
    bfd_state: IntGaugeVec,
    bfd_transitions: IntCounterVec,
    bfd_packets_sent: IntCounterVec,
    bfd_packets_received: IntCounterVec,
    bfd_dropped: IntCounterVec,
    bfd_last_detection: GaugeVec,
}

/// What the status document holds, plus which labelled series exist (so that removing
/// a peer or a node deletes exactly its series).
#[derive(Default)]
struct Inner {
    node: Option<String>,
    peers: BTreeMap<PeerKey, PeerEntry>,
    config: ConfigReport,
    config_fingerprint: Option<String>,
    sources: SourceStatus,
    view: Option<ViewReport>,
    drift_nodes: BTreeSet<String>,
    /// Peers removed since they were last added: a stopping peer task's last reports
    /// (its Cease, its drop to Idle) must not bring their series back.
    removed: BTreeSet<PeerKey>,
    /// `--ready-timeout`: how long `/readyz` waits for sessions (and the gate) once a
    /// config is in force and the sources synced; zero waits for neither.
    ready_timeout: Duration,
    /// When a config was first in force with every source synced.
    base_ready_at: Option<Instant>,
    /// The daemon made a plan (its sessions are declared with `add_peer`).
    planned: bool,
    /// The startup gate on the Cilium agent's health, when configured.
    gate: Option<GateReport>,
    /// SIGTERM arrived: the sessions are ending.
    shutting_down: bool,
    /// The stop decision, once made.
    stopping: Option<StopReport>,
    /// The LoadBalancer counts, once recorded.
    lb: Option<LbReport>,
}

/// Why `/readyz` answers as it does: `ready`, and the reasons (why not, or what it no
/// longer waits for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    pub reasons: Vec<String>,
}

struct PeerEntry {
    label: String,
    asn: Option<u32>,
    state: State,
    since: SystemTime,
    established_at: Option<SystemTime>,
    flaps: u64,
    announced: BTreeMap<&'static str, u64>,
    pending: u64,
    received: BTreeMap<&'static str, u64>,
    messages_sent: u64,
    messages_received: u64,
    last_error: Option<String>,
    /// When the session dials again, while it waits in Idle after a failure.
    next_retry: Option<SystemTime>,
    /// (afi, reason) label sets of this peer's not-announced series.
    not_announced: BTreeSet<(&'static str, &'static str)>,
    /// (afi, reason) label sets of this peer's unannounceable series, and the routes.
    unannounceable: BTreeSet<(&'static str, &'static str)>,
    unannounceable_routes: Vec<UnannounceableReport>,
    /// The session's last error as last read from the driver's status, so that only a
    /// new one replaces a later NOTIFICATION or socket error as `last_error`.
    session_error: Option<String>,
    /// Where the peer task takes `status --routes` queries.
    queries: Option<mpsc::Sender<RoutesQuery>>,
    /// (direction, code, subcode) label sets of this peer's NOTIFICATION series.
    notifications: BTreeSet<(&'static str, &'static str, &'static str)>,
    /// Since when the session has not been Established (declared, or left it).
    down_since: Option<Instant>,
    /// The peer's BFD session, while it has one (its series exist only then).
    bfd: Option<BfdEntry>,
}

/// What `/status` shows of a peer's BFD session besides its series.
#[derive(Debug, Clone, Default)]
struct BfdEntry {
    state: Option<BfdState>,
    diag: Option<Diag>,
    remote_state: Option<BfdState>,
    multihop: bool,
    local_discr: u32,
    remote_discr: u32,
    detection_time: Duration,
    failures: u64,
    last_detection: Option<Duration>,
    packets_sent: u64,
    packets_received: u64,
    packets_dropped: u64,
}

impl Metrics {
    /// A fresh registry with every family registered and the build info set.
    pub fn new() -> Arc<Metrics> {
        Self::with_liveness(DEFAULT_LIVENESS)
    }

    /// As [`Metrics::new`], with `/healthz` failing after `liveness` without a beat.
    pub fn with_liveness(liveness: Duration) -> Arc<Metrics> {
        let registry = Registry::new();
        let families = Families::register(&registry);
        Arc::new(Metrics {
            registry,
            families,
            inner: Mutex::new(Inner::default()),
            liveness,
            beat: Beat::new(Instant::now()),
        })
    }

    /// The registry, for tests and for adding process-level collectors.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves plain data behind, still
        // consistent enough to report; never take the endpoint down with it.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    // --- liveness and readiness -------------------------------------------------------

    /// The daemon's main loop calls this on every turn (and on an idle tick).
    pub fn heartbeat(&self) {
        self.beat_at(Instant::now());
    }

    /// [`Metrics::heartbeat`] at a given instant (tests).
    pub fn beat_at(&self, now: Instant) {
        self.beat.beat(now);
    }

    /// The main loop beat within the liveness window before `now`. A fresh process
    /// counts as having beaten at creation.
    pub fn alive_at(&self, now: Instant) -> bool {
        self.beat.silent_for(now) <= self.liveness
    }

    /// `/readyz` now: see [`Metrics::readiness_at`].
    pub fn ready(&self) -> bool {
        self.readiness_at(Instant::now()).ready
    }

    /// Why the speaker is not ready now, for `/readyz`; `None` when it is.
    pub fn not_ready_reason(&self) -> Option<String> {
        let r = self.readiness_at(Instant::now());
        (!r.ready).then(|| r.reasons.join("; "))
    }

    /// `--ready-timeout` (see [`Metrics::readiness_at`]); zero, the default, waits for
    /// neither sessions nor the gate.
    pub fn set_ready_timeout(&self, timeout: Duration) {
        self.lock().ready_timeout = timeout;
    }

    /// The daemon made a plan (and started its sessions, unless the startup gate holds
    /// them): the peers it declares are the sessions this node should have.
    pub fn record_planned(&self) {
        self.lock().planned = true;
    }

    /// SIGTERM: `/readyz` fails from now on.
    pub fn record_shutting_down(&self) {
        self.lock().shutting_down = true;
    }

    /// The stop decision (`routes::stop::decide`): shown in `/status` and as
    /// `stop_decision{decision}` while the sessions end (a drain lasts the grace period,
    /// so a scrape sees it).
    pub fn record_stop(&self, kind: StopKind) {
        let classes = kind.classes();
        let word = |c: ClassStop| match c {
            ClassStop::Keep => "keep",
            ClassStop::Drain => "drain",
        };
        let mut inner = self.lock();
        inner.shutting_down = true;
        inner.stopping = Some(StopReport {
            decision: kind.as_str().to_owned(),
            pod_cidrs: word(classes.pod_cidrs).to_owned(),
            load_balancer: word(classes.load_balancer).to_owned(),
        });
        drop(inner);
        self.families
            .stop_decision
            .with_label_values(&[kind.as_str()])
            .set(1);
    }

    /// The readiness rule, at `now`:
    ///
    /// 1. Not ready while shutting down, without a bgp-config in force, or before every
    ///    followed resource completed its first sync (no bound: nothing can be announced
    ///    without them).
    /// 2. Then, with a `--ready-timeout` (the daemon sets one), not ready until a plan
    ///    is made, the startup gate (if any) opened, and every session the plan has
    ///    is Established, so that a rolling update does not move on while this node's
    ///    routes are missing. The bound: the plan and the gate are waited for at most
    ///    the timeout from the moment (1) first held, and a session that has not been
    ///    Established for longer than the timeout no longer counts; then `/readyz`
    ///    answers ready and says what it did not wait for (a peer that is down must not
    ///    stop a rollout for ever).
    pub fn readiness_at(&self, now: Instant) -> Readiness {
        let mut inner = self.lock();
        let mut reasons = Vec::new();
        if inner.shutting_down {
            reasons.push("shutting down".to_owned());
        }
        if !inner.config.loaded {
            reasons.push("no bgp-config in force".to_owned());
        }
        if inner.sources.resources.is_empty() {
            reasons.push("no source has reported".to_owned());
        }
        let unsynced: Vec<&str> = inner
            .sources
            .resources
            .iter()
            .filter(|(_, s)| !s.synced)
            .map(|(r, _)| r.as_str())
            .collect();
        if !unsynced.is_empty() {
            reasons.push(format!("not synced yet: {}", unsynced.join(", ")));
        }
        if !reasons.is_empty() {
            return Readiness {
                ready: false,
                reasons,
            };
        }
        let timeout = inner.ready_timeout;
        if timeout.is_zero() {
            return Readiness {
                ready: true,
                reasons,
            };
        }
        let base = *inner.base_ready_at.get_or_insert(now);
        let waited_out = now.saturating_duration_since(base) >= timeout;
        let mut waiting = Vec::new();
        let mut given_up = Vec::new();
        let mut note = |waited_out: bool, what: String| {
            if waited_out {
                given_up.push(what);
            } else {
                waiting.push(what);
            }
        };
        if !inner.planned {
            note(waited_out, "no plan made yet".to_owned());
        }
        if let Some(gate) = inner.gate.as_ref().filter(|g| !g.open) {
            note(
                waited_out,
                format!(
                    "nothing announced until the cilium agent at {} reports healthy",
                    gate.address
                ),
            );
        }
        for entry in inner.peers.values() {
            if let Some(since) = entry.down_since {
                let down_for = now.saturating_duration_since(since);
                note(
                    down_for >= timeout,
                    format!("session {} not established", entry.label),
                );
            }
        }
        if waiting.is_empty() {
            if !given_up.is_empty() {
                reasons.push(format!(
                    "not waited for beyond --ready-timeout {}s: {}",
                    timeout.as_secs(),
                    given_up.join(", ")
                ));
            }
            Readiness {
                ready: true,
                reasons,
            }
        } else {
            Readiness {
                ready: false,
                reasons: waiting,
            }
        }
    }

    // --- startup gate -----------------------------------------------------------------

    /// The startup gate's state: the Cilium agent's health at `address` (`None` before
    /// the first answer), whether the first announcement was allowed, and the last
    /// error or unhealthy answer.
    pub fn record_gate(
        &self,
        address: &str,
        healthy: Option<bool>,
        open: bool,
        error: Option<&str>,
        now: SystemTime,
    ) {
        let mut inner = self.lock();
        let f = &self.families;
        f.cilium_healthy.set(match healthy {
            Some(true) => 1,
            Some(false) => 0,
            None => -1,
        });
        f.gate_open.set(i64::from(open));
        let changed = inner
            .gate
            .as_ref()
            .is_none_or(|g| g.healthy != healthy || g.open != open);
        let report = inner.gate.get_or_insert_with(|| GateReport {
            address: address.to_owned(),
            ..GateReport::default()
        });
        if changed {
            report.since_unix = Some(whole_seconds(now));
        }
        if report.healthy == Some(true) && healthy == Some(false) {
            report.flaps += 1;
            f.cilium_flaps.inc();
        }
        report.healthy = healthy;
        report.open = open;
        report.last_error = error.map(str::to_owned);
    }

    // --- local facts ------------------------------------------------------------------

    /// The node this speaker announces for, shown by `/status`.
    pub fn set_node(&self, node: Option<&str>) {
        self.lock().node = node.map(str::to_owned);
    }

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
        for (afi, reason) in &entry.not_announced {
            let _ = f.not_announced.remove_label_values(&[p, afi, reason]);
        }
        for (afi, reason) in &entry.unannounceable {
            let _ = f.unannounceable.remove_label_values(&[p, afi, reason]);
        }
        self.remove_bfd_series(p);
    }

    fn remove_bfd_series(&self, p: &str) {
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
    /// the same (read on the daemon's tick, so it may lag: it never goes back).
    pub fn record_bfd_status(&self, peer: PeerKey, status: &BfdStatus) {
        let mut inner = self.lock();
        let Some(entry) = self.peer_entry(&mut inner, peer, SystemTime::now()) else {
            return;
        };
        self.merge_bfd_status(entry, Some(status));
    }

    fn merge_bfd_status(&self, entry: &mut PeerEntry, status: Option<&BfdStatus>) {
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
        // The task's count lags behind the observer's (it is read on the daemon's
        // tick): never go back.
        bfd.failures = bfd.failures.max(status.failures);
        if status.last_detection.is_some() {
            bfd.last_detection = status.last_detection;
        }
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
    /// timer, a closed connection) for `/status`. The daemon calls it when a peer's
    /// status changes, or on its heartbeat tick.
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
        self.merge_bfd_status(entry, status.bfd.as_ref());
    }

    /// The entry of `peer`, created (and its series initialised) on first sight; `None`
    /// for a peer removed and not added again.
    fn peer_entry<'a>(
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
            }
        }))
    }

    // --- config -----------------------------------------------------------------------

    /// The outcome of feeding the config state a source event. Applied and Unchanged
    /// are successful reloads; Rejected and Deleted are not (the source's current
    /// content is not what runs). `status` is the state's status after the update.
    pub fn record_config_reload(
        &self,
        update: &ConfigUpdate,
        status: &ConfigStatus,
        now: SystemTime,
    ) {
        let ok = matches!(
            update,
            ConfigUpdate::Applied { .. } | ConfigUpdate::Unchanged { .. }
        );
        let mut inner = self.lock();
        let f = &self.families;
        f.config_reload_ok.set(i64::from(ok));
        f.config_reload_time.set(unix_seconds(now));
        f.config_reloads
            .with_label_values(&[if ok { "success" } else { "failure" }])
            .inc();
        f.config_loaded.set(i64::from(status.in_force.is_some()));
        let fingerprint = status.in_force.map(|fp| fp.to_string());
        if inner.config_fingerprint != fingerprint {
            if let Some(old) = &inner.config_fingerprint {
                let _ = f.config_info.remove_label_values(&[old]);
            }
            if let Some(new) = &fingerprint {
                f.config_info.with_label_values(&[new]).set(1);
            }
            inner.config_fingerprint = fingerprint.clone();
        }
        inner.config = ConfigReport {
            loaded: status.in_force.is_some(),
            fingerprint,
            last_reload_successful: Some(ok),
            last_reload_unix: Some(whole_seconds(now)),
            source_deleted: status.source_deleted,
            rejected: status
                .rejected
                .as_ref()
                .map(|r| r.errors.iter().map(ToString::to_string).collect())
                .unwrap_or_default(),
        };
    }

    // --- sources ----------------------------------------------------------------------

    /// The latest status of every followed resource. Counters follow the status's own
    /// totals (which only grow); a resource no longer followed loses its series.
    pub fn record_source_status(&self, status: &SourceStatus) {
        let mut inner = self.lock();
        let f = &self.families;
        for resource in inner.sources.resources.keys() {
            if !status.resources.contains_key(resource) {
                let r = [resource.as_str()];
                let _ = f.source_up.remove_label_values(&r);
                let _ = f.source_synced.remove_label_values(&r);
                let _ = f.source_last_event.remove_label_values(&r);
                let _ = f.source_events.remove_label_values(&r);
                let _ = f.source_errors.remove_label_values(&r);
            }
        }
        for (resource, s) in &status.resources {
            let r = [resource.as_str()];
            f.source_up.with_label_values(&r).set(i64::from(s.up));
            f.source_synced
                .with_label_values(&r)
                .set(i64::from(s.synced));
            f.source_last_event
                .with_label_values(&r)
                .set(s.last_event.map_or(0.0, unix_seconds));
            advance(&f.source_events, &r, s.events);
            advance(&f.source_errors, &r, s.errors);
        }
        inner.sources = status.clone();
    }

    // --- node view --------------------------------------------------------------------

    /// A new node view: nodes, prefixes, the IPAM mode, drift per node (series of nodes
    /// that no longer drift, or no longer exist, are deleted), overlaps and refusals.
    pub fn set_view(&self, view: &NodeView) {
        let mut inner = self.lock();
        let f = &self.families;
        f.view_nodes.set(saturating_i64(view.nodes.len() as u64));
        let prefixes: usize = view.nodes.values().map(|n| n.prefixes.len()).sum();
        f.view_prefixes.set(saturating_i64(prefixes as u64));
        for mode in IPAM_MODES {
            f.ipam_mode
                .with_label_values(&[mode.as_str()])
                .set(i64::from(mode == view.ipam));
        }
        f.ipam_error.set(0);

        let drifting: BTreeSet<String> = view
            .nodes
            .values()
            .filter(|n| n.drift.is_some())
            .map(|n| n.name.to_string())
            .collect();
        for gone in inner.drift_nodes.difference(&drifting) {
            let _ = f.drift.remove_label_values(&[gone]);
        }
        for node in &drifting {
            f.drift.with_label_values(&[node]).set(1);
        }
        f.drift_nodes.set(saturating_i64(drifting.len() as u64));
        inner.drift_nodes = drifting;

        let found: Vec<_> = view.announced_overlaps().collect();
        let conflicting: BTreeSet<&str> = found
            .iter()
            .flat_map(|o| [o.node.as_ref(), o.other_node.as_ref()])
            .collect();
        f.conflicts.set(saturating_i64(conflicting.len() as u64));
        f.refused.set(saturating_i64(view.refused_count() as u64));

        let announced = view.ipam.object();
        inner.view = Some(ViewReport {
            ipam: Some(view.ipam.as_str().to_owned()),
            ipam_error: None,
            announce_pod_cidr: view.announce_pod_cidr,
            nodes: view.nodes.len(),
            prefixes,
            drift: view
                .nodes
                .values()
                .filter_map(|n| {
                    n.drift.as_ref().map(|d| DriftReport {
                        node: n.name.to_string(),
                        node_cidrs: d.node_cidrs.iter().map(ToString::to_string).collect(),
                        cilium_node_cidrs: d.cilium_cidrs.iter().map(ToString::to_string).collect(),
                        announced: announced.to_owned(),
                    })
                })
                .collect(),
            refused: view
                .nodes
                .values()
                .flat_map(|n| {
                    n.refused.iter().map(|(p, r)| RefusedReport {
                        node: n.name.to_string(),
                        prefix: p.to_string(),
                        reason: r.to_string(),
                    })
                })
                .collect(),
            overlaps: found
                .iter()
                .map(|o| OverlapReport {
                    node: o.node.to_string(),
                    prefix: o.prefix.to_string(),
                    other_node: o.other_node.to_string(),
                    other_prefix: o.other_prefix.to_string(),
                })
                .collect(),
            warnings: view.warnings.iter().map(ToString::to_string).collect(),
        });
    }

    /// The sources' facts give no view: the IPAM mode cannot be decided, so nothing is
    /// announced. Node and drift series keep their last values (the facts did not go
    /// away); the mode series all read 0 and the error gauge 1.
    pub fn set_view_error(&self, error: &IpamError) {
        let mut inner = self.lock();
        let f = &self.families;
        for mode in IPAM_MODES {
            f.ipam_mode.with_label_values(&[mode.as_str()]).set(0);
        }
        f.ipam_error.set(1);
        f.view_prefixes.set(0);
        let mut report = inner.view.take().unwrap_or_default();
        report.ipam = None;
        report.ipam_error = Some(error.to_string());
        report.prefixes = 0;
        inner.view = Some(report);
    }

    /// Either of the above, for a source snapshot's `view`.
    pub fn set_view_result(&self, view: &Result<NodeView, IpamError>) {
        match view {
            Ok(v) => self.set_view(v),
            Err(e) => self.set_view_error(e),
        }
    }

    // --- loadbalancer -----------------------------------------------------------------

    /// The LoadBalancer planner's counts: Services per decision (`None`: announced) and
    /// routes. Services that are not of type LoadBalancer are not counted.
    pub fn record_lb(&self, by_reason: &BTreeMap<Option<LbReason>, usize>, routes: usize) {
        let f = &self.families;
        let count = |r: Option<LbReason>| by_reason.get(&r).copied().unwrap_or(0) as u64;
        f.lb_announced.set(saturating_i64(count(None)));
        for reason in LbReason::ALL {
            if reason == LbReason::NotLoadBalancer {
                continue;
            }
            f.lb_not_announced
                .with_label_values(&[reason.as_str()])
                .set(saturating_i64(count(Some(reason))));
        }
        f.lb_routes.set(saturating_i64(routes as u64));
        let report = LbReport {
            announced: count(None),
            not_announced: by_reason
                .iter()
                .filter_map(|(r, n)| match r {
                    Some(r) if *r != LbReason::NotLoadBalancer && *n > 0 => {
                        Some((r.as_str().to_owned(), *n as u64))
                    }
                    _ => None,
                })
                .collect(),
            routes: routes as u64,
        };
        self.lock().lb = Some(report);
    }

    // --- latency ----------------------------------------------------------------------

    /// From a source change to the UPDATE it caused being written.
    pub fn observe_event_to_update(&self, elapsed: Duration) {
        self.families.event_to_update.observe(elapsed.as_secs_f64());
    }

    /// A Kubernetes Event that was not written, and why.
    pub fn record_kube_event_lost(&self, loss: EventLoss) {
        self.families
            .kube_events_lost
            .with_label_values(&[loss.as_str()])
            .inc();
    }

    // --- output -----------------------------------------------------------------------

    /// The Prometheus text exposition (format 0.0.4) of every series.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Encoding a registry's own families only fails on an invalid family, which the
        // registry refused at registration; an empty page is the safe fallback.
        if TextEncoder::new()
            .encode_utf8(&self.registry.gather(), &mut out)
            .is_err()
        {
            out.clear();
        }
        out
    }

    /// The content type of [`Metrics::encode`].
    pub fn content_type(&self) -> String {
        TextEncoder::new().format_type().to_owned()
    }

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
                })
                .collect(),
        }
    }

    /// The resources followed, for tests.
    pub fn resources(&self) -> Vec<Resource> {
        self.lock().sources.resources.keys().copied().collect()
    }
}

impl Families {
    fn register(registry: &Registry) -> Families {
        let r = Registrar(registry);
        let build = r.gauge_vec(
            "build_info",
            "Always 1; the version as a label.",
            &["version"],
        );
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        let families = Families {
            session_up: r.gauge_vec(
                "session_up",
                "1 when the BGP session with the peer is Established, else 0.",
                &["peer"],
            ),
            session_state: r.gauge_vec(
                "session_state",
                "1 for the session's current RFC 4271 FSM state, 0 for the other five.",
                &["peer", "state"],
            ),
            session_established: r.float_gauge_vec(
                "session_established_timestamp_seconds",
                "Unix time the session last reached Established; 0 if it never did.",
                &["peer"],
            ),
            session_flaps: r.counter_vec(
                "session_flaps_total",
                "Times the session left Established.",
                &["peer"],
            ),
            messages_sent: r.counter_vec(
                "messages_sent_total",
                "BGP messages sent to the peer, by message type.",
                &["peer", "type"],
            ),
            messages_received: r.counter_vec(
                "messages_received_total",
                "BGP messages received from the peer, by message type.",
                &["peer", "type"],
            ),
            notifications: r.counter_vec(
                "notifications_total",
                "NOTIFICATION messages by direction, error code and subcode \
                 (unregistered values read \"other\").",
                &["peer", "direction", "code", "subcode"],
            ),
            announced: r.gauge_vec(
                "announced_prefixes",
                "Prefixes announced to the peer and acknowledged by a sent UPDATE.",
                &["peer", "afi"],
            ),
            pending: r.gauge_vec(
                "pending_prefixes",
                "Prefixes desired for the peer but not yet written in an UPDATE.",
                &["peer"],
            ),
            received: r.gauge_vec(
                "received_prefixes",
                "Prefixes the peer currently announces to the speaker.",
                &["peer", "afi"],
            ),
            not_announced: r.counter_vec(
                "routes_not_announced_total",
                "Desired routes the peer driver could not send to the peer, by reason \
                 (family not negotiated, no next hop of the family...).",
                &["peer", "afi", "reason"],
            ),
            unannounceable: r.gauge_vec(
                "routes_unannounceable",
                "Pod CIDRs the plan gives the peer no route for, by reason: no_next_hop (no \
                 address of the prefix's family for the peer's session: set next-hop-v4/v6), \
                 no_internal_ip (cluster mode: the node has no InternalIP of the family).",
                &["peer", "afi", "reason"],
            ),
            config_loaded: r.gauge("config_loaded", "1 when a valid bgp-config is in force."),
            config_reload_ok: r.gauge(
                "config_last_reload_successful",
                "1 when the last bgp-config change was applied (or was the same config).",
            ),
            config_reload_time: r.float_gauge(
                "config_last_reload_timestamp_seconds",
                "Unix time of the last bgp-config change seen.",
            ),
            config_reloads: r.counter_vec(
                "config_reloads_total",
                "bgp-config changes seen, by result.",
                &["result"],
            ),
            config_info: r.gauge_vec(
                "config_info",
                "Always 1; the fingerprint of the bgp-config in force as a label.",
                &["fingerprint"],
            ),
            source_up: r.gauge_vec(
                "source_watch_up",
                "1 when the watch (or the last file load) of the resource works.",
                &["resource"],
            ),
            source_synced: r.gauge_vec(
                "source_synced",
                "1 once the resource completed its first list (or load).",
                &["resource"],
            ),
            source_last_event: r.float_gauge_vec(
                "source_last_event_timestamp_seconds",
                "Unix time of the last event (or successful load) of the resource.",
                &["resource"],
            ),
            source_events: r.counter_vec(
                "source_events_total",
                "Events applied from the resource (watch events, list items, loads).",
                &["resource"],
            ),
            source_errors: r.counter_vec(
                "source_errors_total",
                "Errors following the resource (watch errors, unreadable objects, bad files).",
                &["resource"],
            ),
            view_nodes: r.gauge("view_nodes", "Nodes in the node view."),
            view_prefixes: r.gauge(
                "view_prefixes",
                "Pod CIDRs the node view announces, over all nodes.",
            ),
            ipam_mode: r.gauge_vec(
                "ipam_mode",
                "1 for the IPAM mode in force; all 0 when it cannot be decided.",
                &["mode"],
            ),
            ipam_error: r.gauge(
                "ipam_error",
                "1 when the IPAM mode cannot be decided (nothing is announced).",
            ),
            drift: r.gauge_vec(
                "podcidr_drift",
                "1 when the node's Node and CiliumNode list different pod CIDRs; \
                 no series for nodes without drift.",
                &["node"],
            ),
            drift_nodes: r.gauge(
                "podcidr_drift_nodes",
                "Nodes whose Node and CiliumNode list different pod CIDRs.",
            ),
            conflicts: r.gauge(
                "podcidr_conflicts",
                "Nodes whose announced pod CIDRs overlap another node's.",
            ),
            refused: r.gauge(
                "refused_prefixes",
                "Pod CIDRs not announced by the safety rules (default routes, \
                 outside the cluster pool).",
            ),
            lb_announced: r.gauge(
                "lb_services_announced",
                "LoadBalancer Services whose IPs this node announces.",
            ),
            lb_not_announced: {
                let g = r.gauge_vec(
                    "lb_services_not_announced",
                    "LoadBalancer Services whose IPs this node does not announce, by \
                     reason: class, lb_ips_off, not_synced, node_excluded, no_ip, \
                     outside_pools, layer2_pool, no_endpoints, no_local_endpoints.",
                    &["reason"],
                );
                for reason in LbReason::ALL {
                    if reason != LbReason::NotLoadBalancer {
                        g.with_label_values(&[reason.as_str()]);
                    }
                }
                g
            },
            lb_routes: r.gauge(
                "lb_routes",
                "LoadBalancer routes this node announces to each selected peer (one per \
                 prefix: IPs and Services in one aggregate give one).",
            ),
            event_to_update: r.histogram(
                "event_to_update_seconds",
                "From a source change to the UPDATE it caused being written.",
                &EVENT_TO_UPDATE_BUCKETS,
            ),
            kube_events_lost: {
                let c = r.counter_vec(
                    "kube_events_lost_total",
                    "Kubernetes Events not written, by reason: queue_full (dropped), \
                     refused (the API server answered with an error), failed (no answer).",
                    &["reason"],
                );
                // Every reason from the start, so that increase() sees the first loss.
                for loss in EventLoss::ALL {
                    c.with_label_values(&[loss.as_str()]);
                }
                c
            },
            cilium_healthy: r.gauge(
                "cilium_agent_healthy",
                "The last answer of the Cilium agent's /healthz to the startup gate: 1 \
                 healthy, 0 not (or unreachable), -1 no answer yet or no gate \
                 (--cilium-health-addr unset).",
            ),
            cilium_flaps: r.counter(
                "cilium_agent_unhealthy_total",
                "Times the Cilium agent's /healthz went from healthy to unhealthy or \
                 unreachable (reported only: routes stay announced).",
            ),
            stop_decision: r.gauge_vec(
                "stop_decision",
                "1 for the stop decision once the speaker is stopping: restart (graceful \
                 restart keeps the routes), cordoned (LoadBalancer routes drained), or \
                 why the node is leaving (every route drained).",
                &["decision"],
            ),
            gate_open: r.gauge(
                "announce_gate_open",
                "1 once the startup gate let the first announcement through (always 1 \
                 without --cilium-health-addr).",
            ),
            bfd_up: r.gauge_vec(
                "bfd_session_up",
                "1 when the peer's BFD session is Up, else 0; only for peers with a bfd-profile.",
                &["peer"],
            ),
            bfd_state: r.gauge_vec(
                "bfd_session_state",
                "1 for the BFD session's current RFC 5880 state, 0 for the other three.",
                &["peer", "state"],
            ),
            bfd_transitions: r.counter_vec(
                "bfd_session_transitions_total",
                "BFD state changes, by the state entered.",
                &["peer", "state"],
            ),
            bfd_packets_sent: r.counter_vec(
                "bfd_packets_sent_total",
                "BFD control packets sent to the peer.",
                &["peer"],
            ),
            bfd_packets_received: r.counter_vec(
                "bfd_packets_received_total",
                "BFD control packets received from the peer and accepted by its session.",
                &["peer"],
            ),
            bfd_dropped: r.counter_vec(
                "bfd_packets_dropped_total",
                "Received BFD packets dropped (malformed, wrong TTL, unknown \
                 discriminator...), by reason.",
                &["reason"],
            ),
            bfd_last_detection: r.float_gauge_vec(
                "bfd_last_detection_seconds",
                "At the BFD session's last failure by detection timeout: seconds from the \
                 last packet received to the session declaring the path down.",
                &["peer"],
            ),
        };
        // Every reason a BFD packet can be dropped for, at zero: a rate exists before
        // the first drop.
        for reason in crate::peer::bfd::DROP_REASONS
            .iter()
            .chain(crate::bfd::PacketError::REASONS)
            .chain(crate::bfd::Discard::REASONS)
        {
            families.bfd_dropped.with_label_values(&[reason]).inc_by(0);
        }
        // Until a gate reports: none configured.
        families.cilium_healthy.set(-1);
        families.gate_open.set(1);
        families
    }
}

/// Registers families under [`NAMESPACE`]. The names and label sets are constants,
/// distinct and valid (the unit tests build a registry), so registration cannot fail
/// at run time.
struct Registrar<'a>(&'a Registry);

// The expects below cannot fail: the names, help texts, label sets and buckets are
// constants, distinct and valid, and every unit test builds this registry.
#[allow(clippy::expect_used)]
impl Registrar<'_> {
    fn opts(name: &str, help: &str) -> Opts {
        Opts::new(name, help).namespace(NAMESPACE)
    }

    fn add<C: prometheus::core::Collector + Clone + 'static>(&self, c: C) -> C {
        self.0
            .register(Box::new(c.clone()))
            .expect("metric families are constant and distinct");
        c
    }

    fn gauge(&self, name: &str, help: &str) -> IntGauge {
        let g = IntGauge::with_opts(Self::opts(name, help)).expect("valid constant opts");
        self.add(g)
    }

    fn float_gauge(&self, name: &str, help: &str) -> prometheus::Gauge {
        let g = prometheus::Gauge::with_opts(Self::opts(name, help)).expect("valid constant opts");
        self.add(g)
    }

    fn gauge_vec(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        let g = IntGaugeVec::new(Self::opts(name, help), labels).expect("valid constant opts");
        self.add(g)
    }

    fn float_gauge_vec(&self, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
        let g = GaugeVec::new(Self::opts(name, help), labels).expect("valid constant opts");
        self.add(g)
    }

    fn counter(&self, name: &str, help: &str) -> prometheus::IntCounter {
        let c =
            prometheus::IntCounter::with_opts(Self::opts(name, help)).expect("valid constant opts");
        self.add(c)
    }

    fn counter_vec(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        let c = IntCounterVec::new(Self::opts(name, help), labels).expect("valid constant opts");
        self.add(c)
    }

    fn histogram(&self, name: &str, help: &str, buckets: &[f64]) -> Histogram {
        let opts = HistogramOpts::new(name, help)
            .namespace(NAMESPACE)
            .buckets(buckets.to_vec());
        let h = Histogram::with_opts(opts).expect("valid constant buckets");
        self.add(h)
    }
}

/// Brings a counter up to a total kept elsewhere (a status that counts by itself).
/// Only this module writes these counters, so the counter's value is the last total
/// seen; a total that went down (a restarted source) adds nothing.
fn advance(family: &IntCounterVec, labels: &[&str], total: u64) {
    let counter = family.with_label_values(labels);
    let delta = total.saturating_sub(counter.get());
    counter.inc_by(delta);
}

fn counts(map: &BTreeMap<&'static str, u64>) -> BTreeMap<String, u64> {
    map.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn whole_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
