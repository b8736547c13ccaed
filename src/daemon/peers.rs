//! The running peer tasks, keyed by [`PeerKey`], and how a new [`Plan`] changes them:
//! what [`crate::peer::session_changes`] decides, carried out and logged as it is: spawn
//! the opened, stop the closed (Cease / Peer De-configured, RFC 4486 subcode 3), restart
//! the reset, and hand every other one its new desired routes through its `watch`
//! channel (an `Arc`: nothing is copied).
//!
//! A peer stopped for good (de-configured, or every peer at SIGTERM without graceful
//! restart in force) first drains for the graceful shutdown time (RFC 8326, in the peer
//! task): its routes carry GRACEFUL_SHUTDOWN, then are withdrawn, then the Cease.
//!
//! LoadBalancer routes (`routes::lb`) go to each task through its [`LbFeed`]: the whole
//! set when the task starts or the peer's LoadBalancer attributes change
//! ([`LbProfile`]), then only the prefixes each planner delta names ([`Peers::push_lb`]),
//! built for the peer by its [`LbRouteMap`]. The cost of an event is the number of
//! peers times the prefixes it changed, whatever the number of routes.
//!
//! Must not: decide routes (the planner did), decide what a change does to a session
//! (`peer::change` does) or speak BGP (the tasks do). Stopping is bounded: a task gets
//! its NOTIFICATION out within `peer::CLOSE_TIMEOUT` twice after its grace period, and
//! is aborted if it is still running after [`STOP_TIMEOUT`] plus that period.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{watch, Notify};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{error, info, warn};

use crate::bgp::session::State;
use crate::config::PeerKey;
use crate::metrics::{Latency, Metrics, PeerMetrics};
use crate::peer::LbFeed;
use crate::peer::{
    self, session_changes, Listener, PeerHandle, PeerSpec, Resolved, RunOverrides, SessionChange,
    Shutdown,
};
use crate::routes::lb::{LbAttrs, LbDelta, LbRouteMap};
use crate::routes::{DesiredRoutes, Plan};
use crate::sources::secrets::{peer_md5_key, SecretError, SecretsView};
use ipnet::IpNet;

/// How long a stopping task may take before it is aborted: twice the driver's own
/// bound on the goodbye, plus scheduling slack.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The RFC 9003 message of the NOTIFICATION sent when this speaker stops.
pub const SHUTDOWN_MESSAGE: &str = "podcidr-speaker shutting down";

/// The RFC 9003 message of the NOTIFICATION sent before a session is opened again with
/// new parameters.
pub const RESET_MESSAGE: &str = "podcidr-speaker: session parameters changed";

/// The RFC 9003 message of the NOTIFICATION sent when a session's TCP MD5 key (its
/// `password-secret`) is gone: the session stays down rather than run without it.
pub const KEY_GONE_MESSAGE: &str = "podcidr-speaker: tcp md5 key unavailable";

/// One running peer task and what it was started with.
struct Running {
    spec: PeerSpec,
    routes: Arc<DesiredRoutes>,
    desired: watch::Sender<Arc<DesiredRoutes>>,
    shutdown: watch::Sender<Option<Shutdown>>,
    handle: PeerHandle,
    latency: Arc<Latency>,
    /// Where its LoadBalancer routes go, and how they are built for it.
    lb_feed: Arc<LbFeed>,
    lb_map: LbRouteMap,
}

impl Running {
    /// Asks the task to end; it keeps running until its NOTIFICATION is out.
    fn stop(&self, mode: Shutdown) {
        // Err: the task already ended and dropped its receiver.
        let _ = self.shutdown.send(Some(mode));
    }
}

/// Every peer task of this speaker.
pub struct Peers {
    running: BTreeMap<PeerKey, Running>,
    /// Tasks told to stop for good (de-configured) and still saying goodbye, each in a
    /// task of its own bounded by [`STOP_TIMEOUT`] plus the grace period, with the
    /// sender that can cut the grace short. A peer selected again waits for its old task
    /// (told to stop at once): the metrics entry and the listener registration are per
    /// peer.
    stopping: BTreeMap<PeerKey, Stopping>,
    metrics: Arc<Metrics>,
    listener: Option<Listener>,
    /// Peers whose spec cannot be built or spawned, with the error last logged, so each
    /// distinct error is logged once.
    refused: BTreeMap<PeerKey, String>,
    /// `--graceful-shutdown-time`: added to every bound on a task that stops for good.
    grace: Duration,
    /// The BFD task of every peer's BFD session, started with the first peer task (it
    /// binds no socket until a peer has a `bfd-profile`).
    bfd: Option<peer::Bfd>,
    /// The hold on new sessions every task follows (`peer::Feeds::hold`): `Some(why)`
    /// while it stands.
    hold: watch::Sender<Option<Arc<str>>>,
    /// Woken when a task ends (a running one on its own, or a stopping one done): the
    /// main loop then reaps them, instead of looking every second.
    ended: Arc<Notify>,
}

/// A task saying goodbye after it was de-configured.
struct Stopping {
    shutdown: watch::Sender<Option<Shutdown>>,
    join: JoinHandle<()>,
}

impl Peers {
    pub fn new(metrics: Arc<Metrics>, listener: Option<Listener>, grace: Duration) -> Self {
        Self {
            running: BTreeMap::new(),
            stopping: BTreeMap::new(),
            metrics,
            listener,
            refused: BTreeMap::new(),
            grace,
            bfd: None,
            hold: watch::Sender::new(None),
            ended: Arc::new(Notify::new()),
        }
    }

    /// Completes when a task ended since the last call (then [`Peers::reap_stopped`]
    /// and [`Peers::reap_dead`] have something to do).
    pub async fn ended(&self) {
        self.ended.notified().await;
    }

    /// Wakes [`Peers::ended`] when the task of `beat` ends.
    fn watch_end(&self, beat: Arc<peer::Beat>) {
        let ended = Arc::clone(&self.ended);
        tokio::spawn(async move {
            beat.finished().await;
            ended.notify_one();
        });
    }

    /// Asks every running task to turn its loop: the answer to `/healthz` and to a
    /// scrape, which [`Peers::wedged`] reads (`peer::Beat::ask`).
    pub fn ask(&self, now: Instant) {
        for r in self.running.values() {
            r.handle.beat.ask(now);
        }
    }

    /// Sets or lifts the hold on new sessions (`Some(why)`, the RFC 9003 message of the
    /// Cease that stops an attempt under way): each task stops dialing and adopting
    /// connections, an Established session carries on and is not opened again once it
    /// ends. Lifted, every session may start again.
    pub fn set_hold(&mut self, why: Option<Arc<str>>) {
        self.hold.send_if_modified(|h| {
            let changed = *h != why;
            *h = why;
            changed
        });
    }

    /// While the hold stands: the tasks whose session is not Established (held back).
    pub fn held_back(&self) -> usize {
        if self.hold.borrow().is_none() {
            return 0;
        }
        self.running
            .values()
            .filter(|r| r.handle.status.borrow().state != State::Established)
            .count()
    }

    /// The BFD task, started on first use (within the runtime).
    fn bfd(&mut self) -> &peer::Bfd {
        let metrics = Arc::clone(&self.metrics);
        self.bfd
            .get_or_insert_with(|| peer::Bfd::spawn(metrics as Arc<dyn peer::BfdObserver>))
    }

    /// Moves the tasks to `plan`: builds each planned peer's spec (with its key from
    /// `secrets` for `password-secret`; `None`: no secret source runs), asks
    /// [`session_changes`] what that does to each session, logs that answer and carries
    /// it out. A peer whose key cannot be had does not run, and only that peer. `event`
    /// is when the source change that led to this plan arrived, for the event-to-update
    /// latency.
    pub async fn reconcile(
        &mut self,
        plan: &Plan,
        overrides: &RunOverrides,
        secrets: Option<&SecretsView>,
        lb_routes: &BTreeMap<IpNet, Arc<LbAttrs>>,
        event: Instant,
    ) {
        // A peer that could not run (no key, a refused spec) and is no longer selected:
        // the series its refusal kept (session down, the reason) go with it.
        let unselected: Vec<PeerKey> = self
            .refused
            .keys()
            .filter(|k| !plan.peers.contains_key(k) && !self.running.contains_key(k))
            .copied()
            .collect();
        for key in unselected {
            self.metrics.remove_peer(key);
            self.refused.remove(&key);
        }

        let mut specs = BTreeMap::new();
        let mut blocked = Vec::new();
        for (key, peer_plan) in &plan.peers {
            let md5_key = match peer_md5_key(&peer_plan.peer, secrets) {
                Ok(k) => k,
                Err(e) => {
                    blocked.push((*key, peer_plan.peer.peer_asn, e));
                    continue;
                }
            };
            // The key read from a Secret goes to the socket: a new one makes the
            // transport differ, which resets this session alone. The source address is
            // the one the planner chose for this peer's next hops.
            let resolved = Resolved {
                md5_key,
                source: peer_plan.source_address,
            };
            match PeerSpec::from_resolved(&peer_plan.peer, overrides, resolved) {
                Ok(spec) => {
                    specs.insert(*key, spec);
                }
                Err(e) => self.refuse(*key, &e.to_string()),
            }
        }
        let running: BTreeMap<PeerKey, PeerSpec> = self
            .running
            .iter()
            .map(|(k, r)| (*k, r.spec.clone()))
            .collect();
        let changes = session_changes(&running, &specs);
        if !changes.is_noop() {
            info!(sessions = %changes, "bgp sessions of this node change");
        }

        let mut restart = Vec::new();
        let mut start = Vec::new();
        let holding = self.hold.borrow().is_some();
        for (key, change) in &changes.0 {
            let (Some(peer_plan), Some(spec)) = (plan.peers.get(key), specs.remove(key)) else {
                let is_blocked = blocked.iter().any(|(k, ..)| k == key);
                if *change == SessionChange::Close && !is_blocked {
                    let why = if plan.peers.contains_key(key) {
                        "its spec is refused"
                    } else {
                        "no longer selected for this node"
                    };
                    info!(peer = %key, why, "closing the session");
                    self.retire(*key, Shutdown::Deconfigured);
                }
                continue;
            };
            let established = || {
                self.running
                    .get(key)
                    .is_some_and(|r| r.handle.status.borrow().state == State::Established)
            };
            // A reset of a session the hold lets run would open a new one: it waits
            // until the hold is lifted (the running spec stays what the task runs, so the
            // next plan after that finds the difference again), whatever changed: the
            // config entry, the router id, the source address or the MD5 key.
            let waits = holding && *change == SessionChange::Reset && established();
            if waits {
                info!(peer = %key, "session change waits: new sessions are held back, this one stays Established");
            }
            match change {
                SessionChange::Open => start.push((*key, spec, peer_plan)),
                SessionChange::Reset if !waits => {
                    if let Some(r) = self.running.get(key) {
                        let mut same_but_key = spec.clone();
                        same_but_key.transport.md5_key = r.spec.transport.md5_key.clone();
                        if r.spec == same_but_key {
                            // Only the Secret's value changed: say so (never the key).
                            info!(peer = %key, "tcp md5 key changed (password-secret), opening the session again");
                        }
                    }
                    restart.push((*key, spec, peer_plan));
                }
                SessionChange::Keep
                | SessionChange::UpdateLive
                | SessionChange::Close
                | SessionChange::Reset => {
                    let Some(r) = self.running.get_mut(key) else {
                        continue;
                    };
                    // update-live: the running task keeps the values it started with
                    // (the driver cannot change them in place); the new spec is in
                    // force when the task next starts. The BFD session is the BFD
                    // task's: it takes the new one now (new timers through a Poll
                    // Sequence), and the peer task follows it whatever it is.
                    if r.spec.bfd != spec.bfd {
                        let bfd = spec.bfd.clone();
                        self.bfd().configure(*key, bfd);
                    }
                    let Some(r) = self.running.get_mut(key) else {
                        continue;
                    };
                    if !waits {
                        r.spec = spec;
                    }
                    if !Arc::ptr_eq(&r.routes, &peer_plan.routes) && *r.routes != *peer_plan.routes
                    {
                        r.latency.set(event.elapsed());
                        r.routes = Arc::clone(&peer_plan.routes);
                        // Err: the task ended; the next health check restarts it.
                        let _ = r.desired.send(Arc::clone(&r.routes));
                    } else {
                        r.routes = Arc::clone(&peer_plan.routes);
                    }
                    if *r.lb_map.profile() != peer_plan.lb {
                        // Its LoadBalancer attributes changed (next hop rule, AS): the
                        // whole set again, the task sends the difference.
                        r.lb_map = LbRouteMap::new(peer_plan.lb.clone());
                        r.lb_feed.replace(r.lb_map.full(lb_routes));
                    }
                }
            }
        }

        // Every reset first tells its peer, then they all wait together.
        let mut waiting = JoinSet::new();
        for (key, ..) in &restart {
            if let Some(r) = self.running.remove(key) {
                r.stop(Shutdown::Admin(RESET_MESSAGE.into()));
                waiting.spawn(join_bounded(
                    r.handle,
                    STOP_TIMEOUT,
                    Arc::clone(&self.ended),
                ));
            }
        }
        for (key, ..) in &blocked {
            if let Some(bfd) = &self.bfd {
                bfd.configure(*key, None);
            }
            if let Some(r) = self.running.remove(key) {
                r.stop(Shutdown::Admin(KEY_GONE_MESSAGE.into()));
                waiting.spawn(join_bounded(
                    r.handle,
                    STOP_TIMEOUT,
                    Arc::clone(&self.ended),
                ));
            }
        }
        while waiting.join_next().await.is_some() {}
        for (key, asn, error) in blocked {
            self.block(key, asn, &error);
        }
        for (key, spec, peer_plan) in restart.into_iter().chain(start) {
            if let Some(old) = self.stopping.remove(&key) {
                // Selected again during its graceful shutdown: a second request ends the
                // grace at once (the new session announces the routes again), and the
                // stopping task aborts its peer task after STOP_TIMEOUT.
                let _ = old.shutdown.send(Some(Shutdown::Deconfigured));
                let _ = old.join.await;
            }
            let mut lb_map = LbRouteMap::new(peer_plan.lb.clone());
            let lb = lb_map.full(lb_routes);
            self.start(
                key,
                spec,
                Arc::clone(&peer_plan.routes),
                (lb, lb_map),
                event,
            );
        }
    }

    /// Tasks that ended without being asked to: removed, so the next plan starts them
    /// again. Returns whether there were any.
    pub fn reap_dead(&mut self) -> bool {
        let dead: Vec<PeerKey> = self
            .running
            .iter()
            .filter(|(_, r)| r.handle.beat.has_ended() || r.handle.join.is_finished())
            .map(|(k, _)| *k)
            .collect();
        for key in &dead {
            error!(peer = %key, "peer task ended on its own, starting it again");
            self.running.remove(key);
        }
        !dead.is_empty()
    }

    /// Forgets the de-configured tasks that finished saying goodbye.
    pub fn reap_stopped(&mut self) {
        self.stopping.retain(|_, task| !task.join.is_finished());
    }

    /// Copies what the metrics do not get from the observer: prefixes still pending,
    /// the session's last error.
    pub fn report(&self) {
        let now = SystemTime::now();
        for r in self.running.values() {
            self.metrics
                .record_peer_status(&r.handle.status.borrow(), now);
        }
    }

    /// Running tasks that left an ask ([`Peers::ask`]) unanswered for `limit` (a live
    /// one answers at once); a task that ended is not wedged, it is gone.
    pub fn wedged(&self, now: std::time::Instant, limit: Duration) -> Vec<PeerKey> {
        self.running
            .iter()
            .filter(|(_, r)| {
                !r.handle.join.is_finished() && r.handle.beat.unanswered_for(now) > limit
            })
            .map(|(key, _)| *key)
            .collect()
    }

    /// SIGTERM: every session ends as `mode` (the stop decision's `Shutdown`) says; each
    /// task's `routes::stop::session_stop` makes it a close under graceful restart, a
    /// graceful shutdown of some or every route class, or the Cease. Waits at most the
    /// grace period plus `timeout`.
    pub async fn shutdown(&mut self, timeout: Duration, mode: Shutdown) {
        let deadline = tokio::time::Instant::now() + self.grace + timeout;
        let mut waiting = JoinSet::new();
        for (key, r) in std::mem::take(&mut self.running) {
            // The task's session decides between the graceful close and the Cease: the
            // published status can lag behind it (just after Established, while the
            // initial table is being written, it does not show the negotiated graceful
            // restart yet), and acting on it there made the peer drop every route.
            info!(peer = %key, "closing the session");
            r.stop(mode.clone());
            let handle = r.handle;
            waiting.spawn(async move {
                let mut join = handle.join;
                if tokio::time::timeout_at(deadline, &mut join).await.is_err() {
                    warn!(peer = %key, "peer task did not end in time, aborting it");
                    join.abort();
                }
            });
        }
        for (_, task) in std::mem::take(&mut self.stopping) {
            waiting.spawn(async move {
                let _ = tokio::time::timeout_at(deadline, task.join).await;
            });
        }
        while waiting.join_next().await.is_some() {}
        // After the BGP sessions: AdminDown tells each BFD peer this is no failure of
        // the path, so a session closed for a graceful restart keeps its routes there.
        if let Some(bfd) = self.bfd.take() {
            bfd.shutdown(Duration::from_secs(1)).await;
        }
    }

    /// A LoadBalancer delta of the planner, to every running task (built for each).
    pub fn push_lb(&mut self, delta: &LbDelta, event: Instant) {
        if delta.is_empty() {
            return;
        }
        for r in self.running.values_mut() {
            r.latency.set(event.elapsed());
            r.lb_feed.push(r.lb_map.delta(delta));
        }
    }

    fn start(
        &mut self,
        key: PeerKey,
        spec: PeerSpec,
        routes: Arc<DesiredRoutes>,
        (lb, lb_map): (crate::routes::lb::LbRoutes, LbRouteMap),
        event: Instant,
    ) {
        // With a listener every configured peer may also connect to us; without one a
        // passive peer cannot run, and peer::spawn says so.
        let inbound = match &self.listener {
            Some(listener) => match listener.register(&spec) {
                Ok(inbound) => Some(inbound),
                Err(e) => {
                    self.refuse(key, &e.to_string());
                    return;
                }
            },
            None => None,
        };
        let (desired, desired_rx) = watch::channel(Arc::clone(&routes));
        let (shutdown, shutdown_rx) = watch::channel(None);
        let latency = Arc::new(Latency::default());
        latency.set(event.elapsed());
        let observer = Arc::new(PeerMetrics {
            metrics: Arc::clone(&self.metrics),
            latency: Arc::clone(&latency),
        });
        let asn = spec.session.peer_asn;
        // Every task follows its peer's BFD status, so that a bfd-profile added later
        // acts without a BGP reset; a reset with the same BFD addressing keeps the BFD
        // session running.
        let bfd = self.bfd();
        bfd.configure(key, spec.bfd.clone());
        let bfd_status = bfd.subscribe(key);
        // Before the task exists: it may reach Established before `spawn` returns, and
        // the metrics drop what a peer they do not know (or just removed) reports.
        self.metrics.add_peer(key, asn, SystemTime::now());
        let lb_routes = lb.len();
        let lb_feed = LbFeed::new(lb);
        let feeds = peer::Feeds {
            lb: Arc::clone(&lb_feed),
            bfd: Some(bfd_status),
            hold: Some(self.hold.subscribe()),
        };
        match peer::spawn_with(
            spec.clone(),
            desired_rx,
            feeds,
            observer,
            shutdown_rx,
            inbound,
        ) {
            Ok(handle) => {
                // A task that ends on its own is started again by the main loop.
                self.watch_end(Arc::clone(&handle.beat));
                self.metrics.set_routes_queries(key, handle.queries.clone());
                self.refused.remove(&key);
                info!(peer = %key, asn, routes = routes.len(), lb_routes, "peer task started");
                self.running.insert(
                    key,
                    Running {
                        spec,
                        routes,
                        desired,
                        shutdown,
                        handle,
                        latency,
                        lb_feed,
                        lb_map,
                    },
                );
            }
            Err(e) => {
                self.metrics.remove_peer(key);
                self.refuse(key, &e.to_string());
            }
        }
    }

    /// Stops a task for good and forgets the peer's series.
    fn retire(&mut self, key: PeerKey, mode: Shutdown) {
        if let Some(bfd) = &self.bfd {
            bfd.configure(key, None);
        }
        if let Some(r) = self.running.remove(&key) {
            r.stop(mode);
            let join = tokio::spawn(join_bounded(
                r.handle,
                STOP_TIMEOUT + self.grace,
                Arc::clone(&self.ended),
            ));
            self.stopping.insert(
                key,
                Stopping {
                    shutdown: r.shutdown,
                    join,
                },
            );
        }
        self.metrics.remove_peer(key);
    }

    /// A peer whose TCP MD5 key cannot be had: no task, its series and `/status` entry
    /// say why (session down, the error as its last error).
    fn block(&mut self, key: PeerKey, asn: u32, error: &SecretError) {
        let now = SystemTime::now();
        let reason = error.to_string();
        self.metrics.add_peer(key, asn, now);
        self.metrics.record_error(key, &reason, now);
        if error.is_pending() {
            if self.refused.get(&key) != Some(&reason) {
                info!(peer = %key, reason = %reason, "waiting for the session's tcp md5 key");
                self.refused.insert(key, reason);
            }
        } else {
            self.refuse(key, &reason);
        }
    }

    fn refuse(&mut self, key: PeerKey, reason: &str) {
        if self.refused.get(&key).map(String::as_str) != Some(reason) {
            error!(peer = %key, error = %reason, "cannot run a session with this peer");
            self.refused.insert(key, reason.to_owned());
        }
    }
}

/// Waits for a stopping task, aborting it after `bound`; then wakes `ended`.
async fn join_bounded(handle: PeerHandle, bound: Duration, ended: Arc<Notify>) {
    let key = handle.key;
    let mut join = handle.join;
    if tokio::time::timeout(bound, &mut join).await.is_err() {
        warn!(peer = %key, "peer task did not end in time, aborting it");
        join.abort();
        let _ = join.await;
    }
    // The main loop reaps it once this task is finished: a turn later at most.
    ended.notify_one();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Peer;
    use crate::peer::change::tests::peer;
    use crate::peer::session_change;
    use std::net::Ipv4Addr;

    fn spec(peer: &Peer, router_id: [u8; 4], source: Option<&str>) -> PeerSpec {
        let run = RunOverrides {
            router_id: Some(Ipv4Addr::from(router_id)),
            source_address: source.map(|s| s.parse().unwrap()),
            ..RunOverrides::default()
        };
        PeerSpec::from_config(peer, &run).unwrap()
    }

    #[test]
    fn a_new_key_from_the_secret_resets_and_the_same_key_does_not() {
        let p = peer("    password-secret: {name: tor-md5, key: tor-a}\n");
        let mut old = spec(&p, [192, 0, 2, 10], None);
        old.transport.md5_key = Some(crate::config::Secret::new("one"));
        let mut new = old.clone();
        assert_eq!(
            session_change(Some(&old), Some(&new)),
            Some(SessionChange::Keep)
        );
        new.transport.md5_key = Some(crate::config::Secret::new("two"));
        assert_eq!(
            session_change(Some(&old), Some(&new)),
            Some(SessionChange::Reset)
        );
    }

    /// A plan for node n1 (kubernetes IPAM, one pod CIDR) under `config`.
    fn plan_for(config: &str) -> Plan {
        use crate::sources::model::{
            node_view, CiliumConfig, ClusterState, IpamOverride, NodeFacts,
        };
        let mut state = ClusterState {
            cilium_config: Some(CiliumConfig {
                ipam: Some("kubernetes".into()),
                ..CiliumConfig::default()
            }),
            ..ClusterState::default()
        };
        state.nodes.insert(
            "n1".into(),
            NodeFacts {
                internal_ipv4: Some("192.0.2.10".parse().unwrap()),
                node_cidrs: vec!["10.244.1.0/24".parse().unwrap()],
                ..NodeFacts::default()
            },
        );
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        let config = crate::config::parse(config).unwrap();
        crate::routes::plan(
            &view,
            &config,
            &crate::routes::LocalNode::new("n1"),
            crate::routes::AnnounceMode::Local,
            &crate::routes::Overrides::default(),
        )
    }

    #[tokio::test]
    async fn a_peer_without_its_key_runs_no_task_shows_why_and_goes_when_unselected() {
        use crate::sources::secrets::{SecretOrigin, SecretState};
        let metrics = Metrics::new();
        let mut peers = Peers::new(Arc::clone(&metrics), None, Duration::ZERO);
        let plan = plan_for(
            "peers:\n  - peer-address: 192.0.2.1\n    peer-asn: 65000\n    my-asn: 65001\n    password-secret: {name: s, key: k}\n",
        );
        let key = *plan.peers.keys().next().unwrap();
        let run = RunOverrides {
            router_id: Some(Ipv4Addr::new(192, 0, 2, 10)),
            ..RunOverrides::default()
        };
        let mut secrets = SecretsView::new(SecretOrigin::Namespace("kube-system".into()));
        secrets.secrets.insert("s".into(), SecretState::Missing);
        peers
            .reconcile(
                &plan,
                &run,
                Some(&secrets),
                &BTreeMap::new(),
                Instant::now(),
            )
            .await;
        assert!(peers.running.is_empty(), "no session without its key");
        let status = metrics.status(SystemTime::now(), Instant::now());
        let entry = status
            .peers
            .iter()
            .find(|p| p.peer == key.to_string())
            .unwrap();
        assert!(!entry.up);
        assert_eq!(
            entry.last_error.as_deref(),
            Some("password-secret: secret s not found in namespace kube-system")
        );
        // No secret source at all: refused as well, never run without the key.
        peers
            .reconcile(&plan, &run, None, &BTreeMap::new(), Instant::now())
            .await;
        assert!(peers.running.is_empty());
        // No longer selected: its series go.
        let empty = plan_for("peers: []\n");
        peers
            .reconcile(
                &empty,
                &run,
                Some(&secrets),
                &BTreeMap::new(),
                Instant::now(),
            )
            .await;
        let status = metrics.status(SystemTime::now(), Instant::now());
        assert!(status.peers.is_empty(), "{:?}", status.peers);
    }

    fn running(peer: Peer, beat: Arc<peer::Beat>, join: JoinHandle<()>) -> Running {
        let spec = spec(&peer, [192, 0, 2, 10], None);
        let routes = Arc::new(DesiredRoutes::new());
        let (desired, _) = watch::channel(Arc::clone(&routes));
        let (shutdown, _) = watch::channel(None);
        let (_, status) = watch::channel(peer::PeerStatus::new(spec.key));
        Running {
            handle: PeerHandle {
                key: spec.key,
                join,
                status,
                beat,
                queries: tokio::sync::mpsc::channel(1).0,
            },
            spec,
            routes,
            desired,
            shutdown,
            latency: Arc::new(Latency::default()),
            lb_feed: Arc::new(LbFeed::default()),
            lb_map: LbRouteMap::new(crate::routes::lb::LbProfile::new(&peer, None)),
        }
    }

    /// A planner delta reaches every running task through its feed, built with that
    /// peer's attributes: only the prefixes it names, and a family the peer has no next
    /// hop for goes as a withdrawal (a no-op for a peer that never had it).
    #[tokio::test]
    async fn an_lb_delta_goes_to_each_task_built_for_its_peer() {
        use crate::peer::LbTake;
        use crate::routes::lb::{LbAttrs, LbProfile};
        use crate::routes::NextHop;
        let mut peers = Peers::new(Metrics::new(), None, Duration::ZERO);
        let p = peer("");
        let mut r = running(
            p.clone(),
            Arc::new(peer::Beat::new(Instant::now())),
            tokio::spawn(std::future::pending::<()>()),
        );
        r.lb_map = LbRouteMap::new(LbProfile::new(
            &p,
            Some([Some(NextHop::SessionLocal), None]),
        ));
        let feed = Arc::clone(&r.lb_feed);
        peers.running.insert(p.key(), r);
        let attrs = Arc::new(LbAttrs {
            local_pref: Some(300),
            communities: vec![0x0001_0002],
            large_communities: vec![],
        });
        let v4: IpNet = "198.51.100.10/32".parse().unwrap();
        let v6: IpNet = "2001:db8::10/128".parse().unwrap();
        let gone: IpNet = "198.51.100.11/32".parse().unwrap();
        let delta = LbDelta {
            changes: [(v4, Some(attrs.clone())), (v6, Some(attrs)), (gone, None)].into(),
        };
        peers.push_lb(&delta, Instant::now());
        let Some(LbTake::Changes(changes)) = feed.take() else {
            panic!("changes expected");
        };
        assert_eq!(changes.len(), 3);
        let sent = changes[0].1.as_ref().unwrap();
        assert_eq!(changes[0].0, v4);
        assert_eq!(sent.communities, vec![0x0001_0002]);
        assert_eq!(sent.as_path, vec![p.my_asn], "eBGP: our AS");
        assert_eq!(sent.local_pref, None, "eBGP: no LOCAL_PREF");
        assert_eq!(changes[1], (gone, None));
        assert_eq!(changes[2], (v6, None), "no IPv6 next hop for this peer");
        peers.push_lb(&LbDelta::default(), Instant::now());
        assert_eq!(feed.take(), None, "an empty delta sends nothing");
    }

    /// With no tick to look every second, a task's end itself wakes the main loop,
    /// which reaps it as dead (to start it again) even before its join handle says so.
    #[tokio::test]
    async fn a_task_that_ends_wakes_the_main_loop_and_is_reaped() {
        let mut peers = Peers::new(Metrics::new(), None, Duration::ZERO);
        let p = peer("");
        let key = p.key();
        let beat = Arc::new(peer::Beat::new(Instant::now()));
        let stuck = tokio::spawn(std::future::pending::<()>());
        peers
            .running
            .insert(key, running(p, Arc::clone(&beat), stuck));
        peers.watch_end(Arc::clone(&beat));
        assert!(
            tokio::time::timeout(Duration::from_millis(200), peers.ended())
                .await
                .is_err(),
            "nothing ended yet"
        );
        assert!(!peers.reap_dead());
        beat.mark_ended();
        tokio::time::timeout(Duration::from_secs(2), peers.ended())
            .await
            .expect("the end wakes the loop");
        assert!(peers.reap_dead(), "reaped as dead");
        assert!(peers.running.is_empty());
    }

    #[tokio::test]
    async fn a_task_that_stopped_turning_is_wedged_and_an_ended_one_is_not() {
        let now = Instant::now();
        let limit = Duration::from_secs(30);
        let long_ago = now.checked_sub(Duration::from_secs(60)).unwrap();
        let mut peers = Peers::new(Metrics::new(), None, Duration::ZERO);
        let stuck = std::future::pending::<()>;
        // Each asked a minute ago (an idle task turns only when asked): one turned just
        // now; one silent since; one silent but ended.
        let live = peer("");
        let beat = Arc::new(peer::Beat::new(long_ago));
        beat.ask(long_ago);
        beat.beat(now);
        peers
            .running
            .insert(live.key(), running(live, beat, tokio::spawn(stuck())));
        let at = |addr: &str| {
            let text = format!(
                "peers:\n  - peer-address: {addr}\n    peer-asn: 65000\n    my-asn: 65001\n"
            );
            crate::config::parse(&text).unwrap().peers[0].clone()
        };
        let silent = at("192.0.2.2");
        let key = silent.key();
        let beat = Arc::new(peer::Beat::new(long_ago));
        beat.ask(long_ago);
        peers
            .running
            .insert(key, running(silent, beat, tokio::spawn(stuck())));
        let ended = at("192.0.2.3");
        let done = tokio::spawn(async {});
        while !done.is_finished() {
            tokio::task::yield_now().await;
        }
        let beat = Arc::new(peer::Beat::new(long_ago));
        beat.ask(long_ago);
        peers
            .running
            .insert(ended.key(), running(ended, beat, done));

        assert_eq!(peers.wedged(now, limit), vec![key]);
        assert!(
            peers.wedged(long_ago, limit).is_empty(),
            "nobody is silent yet"
        );
    }
}
