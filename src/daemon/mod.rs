//! `podcidr-speaker run`: the wiring between the sources, the config state, the route
//! planner, the peer tasks and the metrics. Bounded channels, spawns and shutdown; no
//! protocol or planning logic (that is in `bgp`, `routes` and `peer`).
//!
//! ```text
//!  file / kube sources ──SourceUpdate (mpsc, bounded)──▶ main loop ──▶ routes::plan
//!                                                          │               │ Plan
//!  SIGTERM / SIGINT ─────────────────────────────────────▶ │               ▼
//!                                                          │   peers: spawn / stop / restart,
//!  /metrics /healthz /readyz /status ◀── Metrics ◀─────────┴── watch<Arc<DesiredRoutes>> per task
//! ```
//!
//! - Source updates are snapshots: the loop drains what is queued, then plans once;
//!   except the LoadBalancer deltas (`SourceUpdate::Lb`): each is applied, in order, to
//!   the incremental LoadBalancer planner (`routes::lb`), and when only those came in
//!   the pod CIDR plan is not redone: the planner's delta goes to the peer tasks
//!   (`Peers::push_lb`), O(peers x changed prefixes). A config, cluster or gate change
//!   re-plans both, the LoadBalancer side with a new `LbContext` (pools, the node's
//!   labels, `--lb-class`, the on/off rule of `LbSwitch::decide`). No LoadBalancer
//!   route exists before the source's `Synced`.
//! - The config state keeps the last good config; a cluster view whose IPAM mode cannot
//!   be decided keeps the last plan in force (both are logged once).
//! - SIGTERM or SIGINT: `/readyz` fails and every session ends: the restart path where
//!   graceful restart is in force, else a graceful shutdown (RFC 8326: the routes carry
//!   GRACEFUL_SHUTDOWN for `--graceful-shutdown-time`, then are withdrawn) and Cease /
//!   Administrative Shutdown "podcidr-speaker shutting down"; bounded by that time plus
//!   [`SHUTDOWN_TIMEOUT`]; `run` then returns `Ok` and the process exits 0.
//! - With `--cilium-health-addr`, the startup gate: no peer task starts (nothing is
//!   announced) until the Cilium agent's `/healthz` answers 200 (`crate::gate`); once
//!   open it stays open, and later flaps are only logged and recorded.
//!
//! Files: [`settings`] (flags, checks, `--dry-run`), `peers` (the peer tasks, carrying
//! out what `peer::session_changes` decides for each new plan).

mod peers;
pub mod settings;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

pub use peers::{SHUTDOWN_MESSAGE, STOP_TIMEOUT};
pub use settings::{dry_run, ClusterSource, ConfigSource, DryRun, SecretsSource, Settings};

use crate::config::state::ConfigState;
use crate::config::{Config, ConfigErrors, PeerKey};
use crate::metrics::{server as metrics_server, Metrics};
use crate::peer::{Listener, PeerError, RunOverrides};
use crate::routes::cilium::{self, ConflictDecision};
use crate::routes::drain::ExclusionDrain;
use crate::routes::layers::LbOverPod;
use crate::routes::lb::{LbContext, LbDelta, LbEnabled, LbPlanner};
use crate::routes::stop::{self, NodeAtStop, StopKind};
use crate::routes::{self, AnnounceMode, Finding, FindingTracker, LocalNode, Overrides, Plan};
use crate::sources::kube::{self as kube_source, KubeSourceConfig, Retry, WatchScope};
use crate::sources::secrets::{SecretOrigin, SecretsView};
use crate::sources::{
    self, ClusterSnapshot, IpamError, SourceError, SourceSender, SourceStatus, SourceUpdate,
};
use peers::Peers;

/// Room for source updates between the watchers and the main loop.
const SOURCE_QUEUE: usize = 16;

/// How long the sessions get to say goodbye after SIGTERM.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// The RFC 9003 message of the Cease that stops a session attempt under way when the
/// Cilium conflict holds new sessions back (`--cilium-bgp-conflict hold`).
const HOLD_MESSAGE: &str = "podcidr-speaker: held, cilium's embedded bgp speaker is on";

/// A peer task that has not turned its loop this long after it was asked to is wedged:
/// a live one turns at once (`peer::Beat::ask`), and no step of it takes seconds. The
/// main loop asks every task whenever `/healthz` (or a scrape) asks it, and stops its
/// heartbeat while one is wedged, so `/healthz` fails after the liveness window and the
/// kubelet restarts the speaker (graceful restart keeps the routes meanwhile).
const PEER_WEDGED_AFTER: Duration = Duration::from_secs(30);

/// Why `run` could not start (once running, nothing a peer, the API server or a file
/// sends ends it: those are logged and the last good state stays in force).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{flag}: {reason}")]
    Settings { flag: &'static str, reason: String },
    #[error("{}: cannot read: {reason}", path.display())]
    Read { path: PathBuf, reason: String },
    #[error("{}: invalid bgp-config:\n{errors}", path.display())]
    Config { path: PathBuf, errors: ConfigErrors },
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Ipam(#[from] IpamError),
    #[error("no kubernetes API (neither in-cluster nor KUBECONFIG): {0}")]
    Kube(String),
    #[error("cannot install the signal handlers: {0}")]
    Signal(std::io::Error),
    #[error("--metrics-addr {addr}: {source}")]
    Metrics {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("--listen-addr {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: PeerError,
    },
}

/// How long the stop decision's Kubernetes Event may take to be written at the end.
const STOP_EVENT_TIMEOUT: Duration = Duration::from_secs(2);

/// What [`start_sources`] started that the main loop keeps.
struct Started {
    /// The Secret names to follow (`password-secret`).
    secret_names: tokio::sync::watch::Sender<BTreeSet<String>>,
    /// In-cluster: where the stop decision's Event goes, and the task writing it.
    stop_events: Option<(Arc<dyn sources::EventSink>, tokio::task::JoinHandle<()>)>,
}

/// Runs the speaker until SIGTERM or SIGINT, then closes every session and returns.
pub async fn run(settings: Settings) -> Result<(), DaemonError> {
    settings.validate()?;
    let mut terminate = signal(SignalKind::terminate()).map_err(DaemonError::Signal)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(DaemonError::Signal)?;

    let metrics = Metrics::new();
    metrics.set_node(settings.node.as_deref());
    metrics.set_ready_timeout(settings.ready_timeout);
    let endpoint = metrics_server::bind(settings.metrics_addr)
        .await
        .map_err(|source| DaemonError::Metrics {
            addr: settings.metrics_addr,
            source,
        })?;
    let listener = match settings.listen_addr {
        Some(addr) => {
            Some(Listener::bind(addr).map_err(|source| DaemonError::Listen { addr, source })?)
        }
        None => None,
    };
    let mut tasks = JoinSet::new();
    let (stop_endpoint, endpoint_stopped) = tokio::sync::oneshot::channel::<()>();
    if let Ok(addr) = endpoint.local_addr() {
        info!(addr = %addr, "metrics endpoint listening");
    }
    tasks.spawn(metrics_server::serve(
        endpoint,
        Arc::clone(&metrics),
        async move {
            let _ = endpoint_stopped.await;
        },
    ));

    // Gives freed heap back once large work is done (sleeps until then).
    tasks.spawn(crate::memory::run());
    let (tx, mut rx) = sources::channel(SOURCE_QUEUE);
    let started = start_sources(&settings, &metrics, tx, &mut tasks).await?;
    let grace = settings.graceful_shutdown;
    let mut gate = settings.cilium_health_addr.map(|addr| {
        let (health, task) = crate::gate::spawn(addr);
        tasks.spawn(async move {
            let _ = task.await;
        });
        metrics.record_gate(&addr.to_string(), None, false, None, SystemTime::now());
        info!(addr = %addr, "announcing nothing until the cilium agent reports healthy");
        Gate {
            addr,
            health,
            open: false,
        }
    });
    let mut daemon = Daemon::new(
        settings,
        Arc::clone(&metrics),
        Peers::new(metrics, listener, grace),
        started.secret_names,
    );
    daemon.gate_open = gate.is_none();
    let stop_publisher = started.stop_events.map(|(sink, task)| {
        daemon.stop_events = Some(sink);
        task
    });
    info!(
        node = %daemon.settings.node_name(),
        announce = %daemon.settings.announce,
        version = env!("CARGO_PKG_VERSION"),
        "podcidr-speaker started"
    );

    // No periodic tick: an idle daemon sleeps until an event, a protocol timer or a
    // request to its endpoint (which asks it for the heartbeat and the per-peer figures).
    let metrics = Arc::clone(&daemon.metrics);
    let mut status_open = true;
    let signal = loop {
        daemon.liveness();
        tokio::select! {
            _ = terminate.recv() => break "SIGTERM",
            _ = interrupt.recv() => break "SIGINT",
            update = rx.updates.recv() => {
                let Some(update) = update else {
                    // Every source task ended: nothing can change any more, but the
                    // sessions keep the last plan until a signal.
                    warn!("every source stopped; the last plan stays in force");
                    let signal = tokio::select! {
                        _ = terminate.recv() => "SIGTERM",
                        _ = interrupt.recv() => "SIGINT",
                    };
                    break signal;
                };
                let event = Instant::now();
                let mut full = daemon.apply(update);
                while let Ok(more) = rx.updates.try_recv() {
                    full |= daemon.apply(more);
                }
                if full {
                    daemon.replan(event).await;
                } else {
                    daemon.flush_lb(event);
                }
                daemon.retired.clear();
                // The replaced snapshot and plan are freed.
                crate::memory::after_work();
            }
            () = gate_changed(gate.as_mut()) => {
                if let Some(g) = gate.as_mut() {
                    if daemon.gate_changed(g) {
                        daemon.replan(Instant::now()).await;
                    }
                }
            }
            changed = rx.status.changed(), if status_open => {
                if changed.is_ok() {
                    let status: SourceStatus = rx.status.borrow_and_update().clone();
                    daemon.metrics.record_source_status(&status);
                } else {
                    status_open = false;
                }
            }
            () = sleep_until_std(daemon.exclusion.poll_timeout()) => {
                let now = Instant::now();
                let delta = daemon.exclusion.handle_timeout(now);
                info!(routes = delta.changes.len(), "grace period over: withdrawing this excluded node's loadbalancer routes");
                daemon.lb_pending.then(delta);
                daemon.flush_lb(now);
            }
            () = metrics.asked() => {
                // A probe, a scrape or /status: the figures it reads brought up to
                // date, every peer task asked to turn (answered by the next asks'
                // wedge check), this loop's heartbeat given.
                daemon.peers.report();
                if daemon.cilium_bgp.holding() {
                    daemon.record_held();
                }
                daemon.peers.ask(Instant::now());
                daemon.liveness();
                metrics.answered();
            }
            () = daemon.peers.ended() => {
                daemon.peers.reap_stopped();
                if daemon.peers.reap_dead() {
                    daemon.replan(Instant::now()).await;
                }
            }
        }
    };

    info!(signal, "shutting down");
    let stop = daemon.stop_decision();
    daemon
        .peers
        .shutdown(SHUTDOWN_TIMEOUT, stop.shutdown(SHUTDOWN_MESSAGE))
        .await;
    // The stop's Event: its queue closes with the sink, then the publisher writes what
    // it holds (bounded: a restart must not wait on the API server).
    if let Some(task) = stop_publisher {
        daemon.stop_events = None;
        let _ = tokio::time::timeout(STOP_EVENT_TIMEOUT, task).await;
    }
    let _ = stop_endpoint.send(());
    tasks.shutdown().await;
    info!("podcidr-speaker stopped");
    Ok(())
}

/// Starts the source tasks the settings ask for, all feeding one channel.
async fn start_sources(
    settings: &Settings,
    metrics: &Arc<Metrics>,
    tx: SourceSender,
    tasks: &mut JoinSet<()>,
) -> Result<Started, DaemonError> {
    let mut stop_events = None;
    let (names, names_rx) = tokio::sync::watch::channel(BTreeSet::new());
    let mut kube_client = None;
    match &settings.secrets {
        SecretsSource::Dir(dir) => {
            let (dir, tx) = (dir.clone(), tx.clone());
            let poll = sources::file::DEFAULT_POLL;
            tasks.spawn(async move {
                let _ = sources::file::secrets::run(dir, names_rx, poll, tx).await;
            });
        }
        SecretsSource::Kubernetes { namespace } => {
            let client = kube_source::client(kube_source::API_READ_TIMEOUT)
                .await
                .map_err(DaemonError::Kube)?;
            kube_client = Some(client.clone());
            let (namespace, tx) = (namespace.clone(), tx.clone());
            tasks.spawn(async move {
                let _ =
                    kube_source::secrets::run(client, namespace, names_rx, Retry::KubeDefault, tx)
                        .await;
            });
        }
        SecretsSource::None => {}
    }
    let poll = sources::file::DEFAULT_POLL;
    let bgp_config_map = match &settings.config {
        ConfigSource::File(path) => {
            let (path, tx) = (path.clone(), tx.clone());
            tasks.spawn(async move {
                // Err only when the main loop is gone: nothing left to do.
                let _ = sources::file::watch_text_file(path, poll, tx).await;
            });
            None
        }
        ConfigSource::ConfigMap(r) => Some(r.clone()),
    };
    match &settings.cluster {
        ClusterSource::File(path) => {
            let config = sources::file::FileSourceConfig {
                path: path.clone(),
                ipam: settings.ipam,
                poll,
                load_balancers: settings.follows_load_balancers(),
                own_node: settings.node.as_deref().map(Arc::from),
            };
            tasks.spawn(async move {
                let _ = sources::file::run(config, tx).await;
            });
        }
        ClusterSource::Kubernetes => {
            let client = match kube_client {
                Some(client) => client,
                None => kube_source::client(kube_source::API_READ_TIMEOUT)
                    .await
                    .map_err(DaemonError::Kube)?,
            };
            let scope = match (settings.announce, &settings.node) {
                (AnnounceMode::Local, Some(node)) => WatchScope::Local { node: node.clone() },
                _ => WatchScope::Cluster,
            };
            let (events, publisher) = kube_source::events::KubeEvents::spawn(
                client.clone(),
                settings.node.clone(),
                Arc::clone(metrics) as Arc<dyn kube_source::events::EventObserver>,
            );
            let config = KubeSourceConfig {
                scope,
                cilium_config: kube_source::ConfigMapRef::cilium_config(),
                bgp_config: bgp_config_map,
                ipam: settings.ipam,
                retry: Retry::KubeDefault,
                load_balancers: settings.follows_load_balancers(),
                slices: if settings.lb_slices_all {
                    kube_source::SliceScope::All
                } else {
                    kube_source::SliceScope::load_balancers(&settings.lb_classes)
                },
                own_node: settings.node.as_deref().map(Arc::from),
            };
            let stop_client = client.clone();
            tasks.spawn(async move {
                let _ = kube_source::run(client, config, tx, Arc::new(events)).await;
            });
            tasks.spawn(async move {
                let _ = publisher.await;
            });
            let (sink, publisher) = kube_source::events::KubeEvents::spawn(
                stop_client,
                settings.node.clone(),
                Arc::clone(metrics) as Arc<dyn kube_source::events::EventObserver>,
            );
            stop_events = Some((Arc::new(sink) as Arc<dyn sources::EventSink>, publisher));
        }
    }
    Ok(Started {
        secret_names: names,
        stop_events,
    })
}

/// Sleeps until `deadline`; never, without one.
async fn sleep_until_std(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
        None => std::future::pending().await,
    }
}

/// What a change of the Cilium conflict decision (`before` -> `now`) tells an operator
/// about `node` (its Node's `uid`), as the Event it becomes: the conflict with what the
/// speaker does and what to do, or that it is resolved; `None` when there is nothing
/// new to say.
pub fn cilium_bgp_report(
    before: &ConflictDecision,
    now: &ConflictDecision,
    node: &str,
    uid: Option<String>,
) -> Option<sources::Report> {
    if before == now {
        return None;
    }
    match &now.conflict {
        Some(c) => {
            let what = if now.holding() {
                "this speaker opens no new session meanwhile (--cilium-bgp-conflict hold; \
                 Established ones stay)"
            } else {
                "sessions run anyway (--cilium-bgp-conflict ignore)"
            };
            Some(sources::Report::CiliumBgpConflict {
                node: node.into(),
                uid,
                note: format!("{c}; {what}. To fix: {}", cilium::ADVICE),
            })
        }
        None if before.conflict.is_some() => Some(sources::Report::CiliumBgpConflictResolved {
            node: node.into(),
            uid,
        }),
        None => None,
    }
}

/// The startup gate as the main loop follows it.
struct Gate {
    addr: SocketAddr,
    health: tokio::sync::watch::Receiver<crate::gate::Health>,
    /// The first announcement was let through; stays true.
    open: bool,
}

/// The next change of the gate's health; never, without a gate (or once its probe is
/// gone).
async fn gate_changed(gate: Option<&mut Gate>) {
    match gate {
        Some(g) => {
            if g.health.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

/// What the main loop knows and decides from.
struct Daemon {
    settings: Settings,
    metrics: Arc<Metrics>,
    peers: Peers,
    cluster: Option<Arc<ClusterSnapshot>>,
    /// Snapshots replaced by a newer one, dropped once the plan is handed over: freeing
    /// a 5,000-node view is most of an event's time, and none of it has to come
    /// before the UPDATE.
    retired: Vec<Arc<ClusterSnapshot>>,
    /// This node's Node object was in a cluster snapshot: its absence later means it
    /// was deleted (before, it means nothing is known).
    node_seen: bool,
    /// Where the daemon's own findings (the stop decision, the conflict with Cilium's
    /// embedded speaker) are published as Kubernetes Events (in-cluster only).
    stop_events: Option<Arc<dyn sources::EventSink>>,
    config: ConfigState,
    findings: FindingTracker,
    /// The config and local labels the last plan was made with, for the reload log.
    planned: Option<(Arc<Config>, crate::sources::model::Labels)>,
    /// The last plan made, kept in force while the view cannot be decided.
    plan: Option<Plan>,
    /// Why the view cannot be decided, logged once per distinct reason.
    blocked: Option<String>,
    /// Peer tasks found wedged at the last check, logged once per change.
    wedged: Vec<PeerKey>,
    /// The Secrets the config in force names, for the secret source to follow.
    secret_names: tokio::sync::watch::Sender<BTreeSet<String>>,
    /// The keys of `password-secret` as last read; `None` when no secret source runs.
    secrets: Option<Arc<SecretsView>>,
    /// No startup gate, or it opened: peer tasks may run.
    gate_open: bool,
    /// The LoadBalancer planner, fed every `SourceUpdate::Lb` in order.
    lb: LbPlanner,
    /// The graceful withdrawal of the LoadBalancer routes when the node gets the
    /// maintenance label.
    exclusion: ExclusionDrain,
    /// Its changes not yet handed to the peer tasks.
    lb_pending: LbDelta,
    /// The on/off decision in force, logged when it changes.
    lb_enabled: Option<LbEnabled>,
    /// This node's pod CIDRs (local mode), for the layering finding (`LbOverPod`).
    pod_prefixes: Vec<ipnet::IpNet>,
    /// What was last logged of that finding: (shadowed, how many inside).
    lb_overlap: (Vec<ipnet::IpNet>, usize),
    /// The decision about Cilium's embedded speaker in force (`routes::cilium`).
    cilium_bgp: ConflictDecision,
    /// How many sessions the hold kept back when last logged.
    held_logged: usize,
}

impl Daemon {
    fn new(
        settings: Settings,
        metrics: Arc<Metrics>,
        peers: Peers,
        secret_names: tokio::sync::watch::Sender<BTreeSet<String>>,
    ) -> Self {
        // Until the source's first read every named Secret is pending, not missing.
        let secrets = match &settings.secrets {
            SecretsSource::Dir(dir) => Some(SecretOrigin::Directory(dir.clone())),
            SecretsSource::Kubernetes { namespace } => {
                Some(SecretOrigin::Namespace(namespace.clone()))
            }
            SecretsSource::None => None,
        }
        .map(|origin| Arc::new(SecretsView::new(origin)));
        let lb = LbPlanner::new(settings.node_name());
        Self {
            settings,
            metrics,
            peers,
            cluster: None,
            retired: Vec::new(),
            node_seen: false,
            stop_events: None,
            config: ConfigState::new(),
            findings: FindingTracker::new(),
            planned: None,
            plan: None,
            blocked: None,
            wedged: Vec::new(),
            secret_names,
            secrets,
            gate_open: true,
            lb,
            lb_pending: LbDelta::default(),
            exclusion: ExclusionDrain::default(),
            lb_enabled: None,
            pod_prefixes: Vec::new(),
            lb_overlap: (Vec::new(), 0),
            cilium_bgp: ConflictDecision::default(),
            held_logged: 0,
        }
    }

    /// A new answer from the Cilium agent: opens the gate on the first healthy one
    /// (returns true: time to plan), and afterwards only reports. The agent restarting
    /// does not stop the datapath, so a flap never withdraws a route.
    fn gate_changed(&mut self, gate: &mut Gate) -> bool {
        let health = gate.health.borrow_and_update().clone();
        let opens = !gate.open && health.is_healthy();
        let error = match &health {
            crate::gate::Health::Unhealthy(why) => Some(why.as_str()),
            _ => None,
        };
        if opens {
            gate.open = true;
            self.gate_open = true;
            info!(addr = %gate.addr, "cilium agent healthy: announcing");
        } else if !gate.open {
            debug!(addr = %gate.addr, error = ?error, "cilium agent not healthy yet: announcing nothing");
        } else if health.is_healthy() {
            info!(addr = %gate.addr, "cilium agent healthy again");
        } else {
            warn!(addr = %gate.addr, error = ?error,
                "cilium agent not healthy: routes stay announced (its datapath keeps forwarding)");
        }
        let healthy = match &health {
            crate::gate::Health::Unknown => None,
            h => Some(h.is_healthy()),
        };
        self.metrics.record_gate(
            &gate.addr.to_string(),
            healthy,
            gate.open,
            error,
            SystemTime::now(),
        );
        opens
    }

    /// The heartbeat behind `/healthz`: this loop turned, and so did every peer task.
    fn liveness(&mut self) {
        let wedged = self.peers.wedged(Instant::now(), PEER_WEDGED_AFTER);
        if wedged.is_empty() {
            self.metrics.heartbeat();
        }
        if wedged != self.wedged {
            if wedged.is_empty() {
                info!("every peer task is turning again");
            } else {
                let peers: Vec<String> = wedged.iter().map(ToString::to_string).collect();
                tracing::error!(peers = ?peers, silent_for_secs = PEER_WEDGED_AFTER.as_secs(),
                    "peer task wedged: /healthz will fail");
            }
            self.wedged = wedged;
        }
    }

    /// The stop decision (`routes::stop::decide`) from `--on-stop` and what the last
    /// cluster snapshot says about this node; logged, recorded (`/status`, a metric) and
    /// published as an Event on the Node.
    fn stop_decision(&self) -> StopKind {
        let node = match (self.settings.node.as_deref(), &self.cluster) {
            (Some(name), Some(c)) => NodeAtStop::from_state(
                self.settings.announce,
                c.state.nodes.get(name).map(|f| &f.lifecycle),
                self.node_seen,
            ),
            _ => NodeAtStop::Unknown,
        };
        let kind = stop::decide(self.settings.on_stop, &node);
        let classes = kind.classes();
        let note = format!(
            "{}: pod CIDRs {}, LoadBalancer routes {}",
            kind.describe(),
            classes.pod_cidrs.describe(),
            classes.load_balancer.describe()
        );
        info!(
            decision = kind.as_str(),
            on_stop = self.settings.on_stop.as_str(),
            pod_cidrs = ?classes.pod_cidrs,
            load_balancer = ?classes.load_balancer,
            note = %note,
            "stop decision"
        );
        self.metrics.record_stop(kind);
        if let (Some(events), Some(node)) = (&self.stop_events, self.settings.node.as_deref()) {
            let uid = self
                .cluster
                .as_ref()
                .and_then(|c| c.state.nodes.get(node))
                .and_then(|f| f.uid.clone());
            events.publish(&sources::Report::Stopping {
                node: node.into(),
                uid,
                decision: kind.as_str(),
                note,
            });
        }
        kind
    }

    /// Takes one source update in; planning waits until the queue is drained. Returns
    /// whether the whole plan must be made again (anything but a LoadBalancer delta).
    fn apply(&mut self, update: SourceUpdate) -> bool {
        let now = SystemTime::now();
        match update {
            SourceUpdate::Cluster(snapshot) => {
                self.metrics.set_view_result(&snapshot.view);
                if let Some(node) = self.settings.node.as_deref() {
                    self.node_seen |= snapshot.state.nodes.contains_key(node);
                }
                self.retired.extend(self.cluster.replace(snapshot));
            }
            SourceUpdate::BgpConfigText(text) => {
                let update = match text {
                    Some(text) => self.config.update_text(&text),
                    None => self.config.deleted(),
                };
                update.log();
                self.metrics
                    .record_config_reload(&update, &self.config.status(), now);
                let names = self
                    .config
                    .config()
                    .map(|c| c.secret_names())
                    .unwrap_or_default();
                self.secret_names.send_if_modified(|old| {
                    let changed = *old != names;
                    *old = names;
                    changed
                });
            }
            SourceUpdate::Secrets(view) => {
                if self.secrets.is_some() {
                    self.secrets = Some(view);
                }
            }
            SourceUpdate::Lb(update) => {
                let key = update.key().cloned();
                let delta = self.lb.apply(update);
                if !delta.is_empty() {
                    debug!(object = ?key.map(|k| k.to_string()), routes = delta.changes.len(),
                        "loadbalancer routes change");
                }
                self.lb_pending.then(delta);
                return false;
            }
        }
        true
    }

    /// The on/off rule of LoadBalancer IPs for the bgp-config in force (logged when the
    /// decision changes).
    fn lb_enabled(&mut self, config: &Config) -> LbEnabled {
        let decided = self
            .settings
            .announce_lb_ips
            .decide_for(self.settings.announce, config);
        if self.lb_enabled != Some(decided) {
            info!(announced = decided.on, why = decided.why, switch = %self.settings.announce_lb_ips,
                "loadbalancer ips");
            self.lb_enabled = Some(decided);
        }
        decided
    }

    /// Hands the LoadBalancer planner's pending changes to the peer tasks, and records
    /// its counts.
    fn flush_lb(&mut self, event: Instant) {
        let delta = std::mem::take(&mut self.lb_pending);
        self.peers.push_lb(&delta, event);
        self.metrics
            .record_lb(self.lb.by_reason(), self.lb.routes().len());
        if !delta.is_empty() {
            self.log_lb_overlap();
        }
    }

    /// What the layering rule (`routes::layers`) does to this node's LoadBalancer
    /// routes: prefixes a pod CIDR shadows, routes inside a pod CIDR; once per change.
    fn log_lb_overlap(&mut self) {
        let found = LbOverPod::of(&self.pod_prefixes, self.lb.routes());
        let now = (found.shadowed.clone(), found.inside.len());
        if now == self.lb_overlap {
            return;
        }
        if !found.shadowed.is_empty() {
            warn!(prefixes = ?found.shadowed.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "loadbalancer prefix equal to this node's pod cidr: the pod cidr route is announced, not the loadbalancer one");
        }
        if !found.inside.is_empty() {
            warn!(routes = found.inside.len(),
                "loadbalancer ips inside this node's pod cidr (a pool overlapping the pod range): announced as their own, more specific routes");
        }
        self.lb_overlap = now;
    }

    /// Plans from the current config and view and moves the peer tasks to the plan, then
    /// hands them the LoadBalancer changes.
    async fn replan(&mut self, event: Instant) {
        self.replan_all(event).await;
        self.flush_lb(event);
        self.log_lb_overlap();
    }

    async fn replan_all(&mut self, event: Instant) {
        // Until both a config and the cluster are in, there is nothing to open yet;
        // the sources and the config state log their own trouble.
        let Some(config) = self.config.config().cloned() else {
            debug!("waiting for a valid bgp-config");
            return;
        };
        let Some(snapshot) = self.cluster.clone() else {
            debug!("waiting for the cluster state");
            return;
        };
        let view = match &snapshot.view {
            Ok(view) => view,
            Err(e) => {
                let reason = e.to_string();
                if self.blocked.as_deref() != Some(reason.as_str()) {
                    warn!(error = %reason, "no node view: the last plan stays in force");
                    self.blocked = Some(reason);
                }
                return;
            }
        };
        self.blocked = None;
        let enabled = self.lb_enabled(&config);
        self.cilium_bgp_changed(&snapshot);
        let name = self.settings.node_name();
        let local = LocalNode::new(name);
        let overrides = Overrides {
            source_address: self.settings.source_address,
        };
        let plan = routes::plan_reusing(
            view,
            &config,
            &local,
            self.settings.announce,
            &overrides,
            self.plan.as_ref(),
        );
        let entry = view.nodes.get(name);
        let labels = entry.map(|e| e.labels.clone()).unwrap_or_default();
        let context = LbContext::new(
            &config,
            entry.map(|e| &e.labels),
            &self.settings.lb_classes,
            enabled.on,
        );
        let was = self.lb.context().excluded;
        let before = (!was && context.excluded).then(|| self.lb.routes().clone());
        let delta = self.lb.set_context(context);
        let delta = self.exclusion.context_changed(
            event,
            self.settings.graceful_shutdown,
            (was, self.lb.context().excluded),
            before.as_ref().unwrap_or(&BTreeMap::new()),
            delta,
        );
        if self.exclusion.held() > 0 && before.is_some() {
            info!(routes = self.exclusion.held(), grace_secs = self.settings.graceful_shutdown.as_secs_f64(),
                "this node is excluded from external load balancers: its loadbalancer routes go out with GRACEFUL_SHUTDOWN, withdrawn after the grace period");
        }
        self.lb_pending.then(delta);
        self.pod_prefixes = match self.settings.announce {
            AnnounceMode::Local => entry.map(|e| e.prefixes.clone()).unwrap_or_default(),
            AnnounceMode::Cluster => Vec::new(),
        };
        if !plan.node_present && self.plan.as_ref().is_none_or(|p| p.node_present) {
            warn!(node = %name, "this node is not in the cluster: no peer is selected");
        }
        self.log_findings(&plan);
        self.metrics.record_unannounceable(&plan);
        let unused = routes::plan::unused_next_hop_fields(&plan);
        if !unused.is_empty()
            && self.plan.as_ref().map(routes::plan::unused_next_hop_fields) != Some(unused.clone())
        {
            warn!(peers = ?unused, "next-hop-v4/next-hop-v6 is not used with --announce cluster: each route's next hop is its own node's InternalIP");
        }
        self.log_peer_conflicts(&config, &labels, &plan);

        let run = RunOverrides {
            source_address: self.settings.source_address,
            router_id: self.settings.router_id,
            node_ipv4: entry.and_then(|e| e.internal_ipv4),
            node_name: Some(Arc::from(self.settings.node_name())),
            graceful_shutdown: self.settings.graceful_shutdown,
        };
        self.metrics.record_planned();
        self.metrics
            .set_pod_cidrs_announced(plan.announce_pod_cidrs);
        if !self.gate_open {
            debug!("startup gate closed: no session yet");
            self.planned = Some((config, labels));
            self.plan = Some(plan);
            return;
        }
        // The hold is the peer tasks' to carry out: held, they dial and adopt nothing,
        // and an Established session carries on (a change that would reset it waits).
        self.peers.set_hold(
            self.cilium_bgp
                .holding()
                .then(|| Arc::<str>::from(HOLD_MESSAGE)),
        );
        self.peers
            .reconcile(
                &plan,
                &run,
                self.secrets.as_deref(),
                self.lb.routes(),
                event,
            )
            .await;
        self.record_held();
        debug!(
            peers = plan.peers.len(),
            routes = plan.route_count(),
            "plan applied"
        );
        self.planned = Some((config, labels));
        self.plan = Some(plan);
    }

    /// The conflict with Cilium's embedded speaker for the cilium-config in `snapshot`
    /// (`routes::cilium::decide`), logged when it changes.
    fn cilium_bgp_changed(&mut self, snapshot: &ClusterSnapshot) {
        let decision = cilium::decide(
            self.settings.cilium_bgp_conflict,
            snapshot.state.cilium_config.as_ref(),
        );
        if decision == self.cilium_bgp {
            return;
        }
        self.metrics.record_cilium_bgp(&decision, 0);
        self.publish_cilium_bgp(&decision, snapshot);
        match &decision.conflict {
            Some(c) if decision.holding() => {
                warn!(keys = ?c.keys, conflict = %c, advice = cilium::ADVICE,
                "cilium's embedded bgp speaker is on: no new session until it is off (Established sessions stay; --cilium-bgp-conflict ignore to run anyway)")
            }
            Some(c) => warn!(keys = ?c.keys, conflict = %c, advice = cilium::ADVICE,
                "cilium's embedded bgp speaker is on: sessions run anyway (--cilium-bgp-conflict ignore)"),
            None if self.cilium_bgp.conflict.is_some() => {
                info!("cilium's embedded bgp speaker is off in cilium-config: every session may start")
            }
            None => {}
        }
        self.cilium_bgp = decision;
    }

    /// The conflict's Event on this node's Node (in-cluster only), once per change.
    fn publish_cilium_bgp(&self, decision: &ConflictDecision, snapshot: &ClusterSnapshot) {
        let (Some(events), Some(node)) = (&self.stop_events, self.settings.node.as_deref()) else {
            return;
        };
        let uid = snapshot.state.nodes.get(node).and_then(|f| f.uid.clone());
        if let Some(report) = cilium_bgp_report(&self.cilium_bgp, decision, node, uid) {
            events.publish(&report);
        }
    }

    /// The conflict's gauges and report, with the planned sessions it holds back now
    /// (a session let run that went down counts from the endpoint's next ask or the next
    /// hold change).
    fn record_held(&mut self) {
        let held = self.peers.held_back();
        if held > 0 && held != self.held_logged {
            info!(
                held,
                "sessions held back while cilium's embedded bgp speaker is on"
            );
        }
        self.held_logged = held;
        self.metrics.record_cilium_bgp(&self.cilium_bgp, held);
    }

    /// Conflicts between nodes and unannounceable prefixes, once per change.
    fn log_findings(&mut self, plan: &Plan) {
        for finding in self.findings.observe(plan) {
            match finding {
                Finding::Conflict(c) => warn!(conflict = %c, "pod cidr conflict between nodes"),
                Finding::ConflictResolved(c) => info!(conflict = %c, "pod cidr conflict resolved"),
                Finding::Unannounceable(u) => warn!(route = %u, "pod cidr cannot be announced"),
                Finding::UnannounceableResolved(u) => {
                    info!(route = %u, "pod cidr no longer unannounceable")
                }
            }
        }
    }

    /// Clashes of `peers` entries for one router on this node, when the config or the
    /// node's labels changed (what each session does is logged by the peers).
    fn log_peer_conflicts(
        &self,
        config: &Arc<Config>,
        labels: &crate::sources::model::Labels,
        plan: &Plan,
    ) {
        if let Some((old, old_labels)) = &self.planned {
            if Arc::ptr_eq(old, config) && **old_labels == **labels {
                return;
            }
        }
        for conflict in &plan.peer_conflicts {
            warn!(conflict = %conflict, "several peers entries select this node for one router");
        }
    }
}
