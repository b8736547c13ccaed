//! [`Metrics`]: the explicit registry and the state behind `/status`, `/healthz` and
//! `/readyz`. One job per file below it, each an `impl Metrics` block over the state
//! defined here: `peers.rs` (each session's series and entry), `bfd.rs` (each peer's
//! BFD session), `inputs.rs` (the config, the sources, the node view, the LoadBalancer
//! counts, the startup gate), `document.rs` (the `/status` document). The families
//! themselves are `super::families`; the readiness rule is `super::readiness`.
//!
//! Every method updates the series and the status document under one lock, so a scrape
//! and a `/status` read taken together never disagree. The lock is held for a few
//! atomic stores; nothing under it blocks or allocates more than a label string.
//!
//! Must not: make decisions (it records them; the readiness rule is
//! `super::readiness`'s), or hold anything the daemon needs to run.

mod bfd;
mod document;
mod inputs;
mod peers;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prometheus::{Encoder, Registry, TextEncoder};

use super::board::{
    CiliumBgpReport, ConfigReport, GateReport, LbReport, StopReport, UnannounceableReport,
    ViewReport,
};
use super::families::Families;
use super::liveness::Liveness;
use super::readiness::{Readiness, ReadinessFacts, ReadinessRule, SessionFact};
use crate::bfd::{Diag, State as BfdState};
use crate::bgp::session::{Finding, State};
use crate::config::PeerKey;
use crate::peer::RoutesQuery;
use crate::routes::cilium::ConflictDecision;
use crate::routes::stop::StopKind;
use crate::sources::kube::events::EventLoss;
use crate::sources::{Resource, SourceStatus};
use tokio::sync::mpsc;

/// How long the main loop may go without a heartbeat before `/healthz` fails, unless
/// [`Metrics::with_liveness`] says otherwise. An idle daemon beats when asked (every
/// `/healthz`, scrape or `/status` asks it, [`Metrics::refresh`]); a minute without a
/// beat is a wedged loop, not a busy one.
pub const DEFAULT_LIVENESS: Duration = Duration::from_secs(60);

/// The series and the status behind the HTTP endpoint. Create one with [`Metrics::new`]
/// and share the `Arc`.
pub struct Metrics {
    registry: Registry,
    families: Families,
    inner: Mutex<Inner>,
    /// The main loop's last heartbeat, and the endpoint's asks to it.
    liveness: Liveness,
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
    /// The readiness rule and what it remembers (`--ready-timeout`, and when it started
    /// counting).
    readiness: ReadinessRule,
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
    /// The bgp-config's `speaker.announce-pod-cidrs` was false in the last plan (shown
    /// with the view in `/status`; off only once a plan says so).
    pod_cidrs_off: bool,
    /// The conflict with Cilium's embedded speaker, while it stands.
    cilium_bgp: Option<CiliumBgpReport>,
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
    /// Collision Ceases no connection of ours explained (`collision_ceases_total`).
    collision_ceases: u64,
    /// The second-speaker finding while it stands, with when it was raised.
    second_speaker: Option<(SystemTime, Finding)>,
    /// Why the peer task holds new sessions back, as its last status said.
    held_back: Option<String>,
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
            liveness: Liveness::new(liveness),
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

    /// Asks the main loop to bring what it copies into the metrics up to date (the
    /// per-peer figures) and to show that it, and every peer task, still turns; waits
    /// for its answer at most `wait`. `false`: no answer in time (a busy or wedged
    /// loop, or none). What is then read is as last recorded, and `/healthz` judges the
    /// last heartbeat against the liveness window, as ever.
    ///
    /// This is what wakes an idle daemon: it keeps no periodic tick for the endpoint.
    pub async fn refresh(&self, wait: Duration) -> bool {
        self.liveness.refresh(wait).await
    }

    /// Completes when the endpoint asks ([`Metrics::refresh`]): the main loop's wait.
    pub async fn asked(&self) {
        self.liveness.asked().await;
    }

    /// The main loop answered an ask (after its heartbeat, when it gave one).
    pub fn answered(&self) {
        self.liveness.answered();
    }

    /// The daemon's main loop calls this on every turn.
    pub fn heartbeat(&self) {
        self.beat_at(Instant::now());
    }

    /// [`Metrics::heartbeat`] at a given instant (tests).
    pub fn beat_at(&self, now: Instant) {
        self.liveness.beat_at(now);
    }

    /// The main loop beat within the liveness window before `now`. A fresh process
    /// counts as having beaten at creation.
    pub fn alive_at(&self, now: Instant) -> bool {
        self.liveness.alive_at(now)
    }

    /// `/readyz` now: see [`ReadinessRule::judge`].
    pub fn ready(&self) -> bool {
        self.readiness_at(Instant::now()).ready
    }

    /// Why the speaker is not ready now, for `/readyz`; `None` when it is.
    pub fn not_ready_reason(&self) -> Option<String> {
        let r = self.readiness_at(Instant::now());
        (!r.ready).then(|| r.reasons.join("; "))
    }

    /// `--ready-timeout` (see [`ReadinessRule::judge`]); zero, the default, waits for
    /// neither sessions nor the gate.
    pub fn set_ready_timeout(&self, timeout: Duration) {
        self.lock().readiness.timeout = timeout;
    }

    /// The daemon made a plan (and started its sessions, unless the startup gate holds
    /// them): the peers it declares are the sessions this node should have.
    pub fn record_planned(&self) {
        self.lock().planned = true;
    }

    /// The decision about Cilium's embedded speaker (`routes::cilium::decide`) and how
    /// many planned sessions it keeps from running: the gauges, `/status` and `/readyz`.
    pub fn record_cilium_bgp(&self, decision: &ConflictDecision, held: usize) {
        let mut inner = self.lock();
        let f = &self.families;
        f.cilium_bgp_conflict
            .set(i64::from(decision.conflict.is_some()));
        f.sessions_held.set(saturating_i64(held as u64));
        inner.cilium_bgp = decision.conflict.as_ref().map(|c| CiliumBgpReport {
            conflict: c.to_string(),
            policy: decision.policy.as_str().to_owned(),
            holding: decision.holding(),
            held_sessions: held,
        });
    }

    /// Whether the plan announces pod CIDRs at all (`speaker.announce-pod-cidrs`).
    pub fn set_pod_cidrs_announced(&self, on: bool) {
        let mut inner = self.lock();
        inner.pod_cidrs_off = !on;
        if let Some(view) = inner.view.as_mut() {
            view.announce_pod_cidr = on;
        }
    }

    /// The stop decision (`routes::stop::decide`): `/readyz` fails from now on, and the
    /// decision shows in `/status` and as `stop_decision{decision}` while the sessions
    /// end (a drain lasts the grace period, so a scrape sees it).
    pub fn record_stop(&self, kind: StopKind) {
        let classes = kind.classes();
        let mut inner = self.lock();
        inner.shutting_down = true;
        inner.stopping = Some(StopReport {
            decision: kind.as_str().to_owned(),
            pod_cidrs: classes.pod_cidrs.as_str().to_owned(),
            load_balancer: classes.load_balancer.as_str().to_owned(),
        });
        drop(inner);
        self.families
            .stop_decision
            .with_label_values(&[kind.as_str()])
            .set(1);
    }

    /// `/readyz` at `now`: the rule ([`ReadinessRule::judge`]) over what was recorded.
    pub fn readiness_at(&self, now: Instant) -> Readiness {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let sessions: Vec<SessionFact<'_>> = inner
            .peers
            .values()
            .map(|e| SessionFact {
                label: &e.label,
                down_since: e.down_since,
            })
            .collect();
        let facts = ReadinessFacts {
            shutting_down: inner.shutting_down,
            config_loaded: inner.config.loaded,
            sources: &inner.sources,
            planned: inner.planned,
            gate: inner.gate.as_ref(),
            sessions: &sessions,
            cilium_bgp: inner.cilium_bgp.as_ref(),
        };
        inner.readiness.judge(now, &facts)
    }

    // --- local facts ------------------------------------------------------------------

    /// The node this speaker announces for, shown by `/status`.
    pub fn set_node(&self, node: Option<&str>) {
        self.lock().node = node.map(str::to_owned);
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

    /// The resources followed, for tests.
    pub fn resources(&self) -> Vec<Resource> {
        self.lock().sources.resources.keys().copied().collect()
    }
}

fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn whole_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
