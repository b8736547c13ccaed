//! Where prefixes come from: the Kubernetes watchers ([`kube`]) and the standalone
//! cluster-state files ([`file`]), and what they hand the daemon.
//!
//! Layout:
//! - [`model`]: the raw facts ([`ClusterState`]) and the pure rule that decides each
//!   node's announced pod CIDRs ([`node_view`]). The only place that knows the IPAM rules.
//! - [`objects`]: the Kubernetes object types read and the pure object -> facts mapping.
//! - [`report`]: which drift / refusal / IPAM findings are new since the last view.
//! - [`services`]: the LoadBalancer facts (per Service, per EndpointSlice), their
//!   pure mapping from the objects, and the deltas ([`SourceUpdate::Lb`]) that carry
//!   them.
//! - [`kube`], [`file`]: the drivers. They fill a `ClusterState`, and after each change
//!   that alters it send a [`SourceUpdate::Cluster`] snapshot; they log findings and
//!   (kube only) publish them as Kubernetes Events through an [`EventSink`]. When asked,
//!   they also send each Service's and EndpointSlice's change as a
//!   [`SourceUpdate::Lb`] delta.
//!
//! Sources know nothing about BGP. API trouble never clears state: the daemon only ever
//! sees a complete, consistent snapshot, and an unchanged relist or reload sends nothing.
//!
//! Wiring (the daemon's side):
//!
//! ```no_run
//! # async fn wire() -> Result<(), String> {
//! use std::sync::Arc;
//! use podcidr_speaker::sources::{self, kube::*, IpamOverride, SourceUpdate};
//!
//! let client = client(API_READ_TIMEOUT).await?; // no request waits for ever
//! let (tx, mut rx) = sources::channel(16);
//! let (events, _publisher) =
//!     events::KubeEvents::spawn(client.clone(), Some("node-a".into()), Arc::new(events::Unobserved));
//! let config = KubeSourceConfig {
//!     scope: WatchScope::Local { node: "node-a".into() },
//!     cilium_config: ConfigMapRef::cilium_config(),
//!     bgp_config: Some(BgpConfigMapRef::default()),
//!     ipam: IpamOverride::Auto,
//!     retry: Retry::KubeDefault,
//!     load_balancers: true, // also watch Services and EndpointSlices
//!     slices: SliceScope::load_balancers(&[]), // only those of LoadBalancer Services
//!     own_node: Some("node-a".into()), // only its own node's labels and facts are kept
//! };
//! tokio::spawn(run(client, config, tx, Arc::new(events)));
//! while let Some(update) = rx.updates.recv().await {
//!     match update {
//!         SourceUpdate::Cluster(snapshot) => { /* plan from snapshot.view */ }
//!         SourceUpdate::BgpConfigText(text) => { /* parse and validate */ }
//!         SourceUpdate::Secrets(view) => { /* the TCP MD5 keys of password-secret */ }
//!         SourceUpdate::Lb(delta) => { /* one Service or EndpointSlice, or Synced */ }
//!     }
//!     let _ready = rx.status.borrow().ready(); // for /readyz
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Standalone: `file::run` for `--cluster-state PATH` and `file::watch_text_file` for
//! `--bgp-config FILE` share one [`channel`] (clone the sender); `plan` calls
//! `file::load` once.

pub mod error;
pub mod file;
pub mod kube;
pub mod model;
pub mod objects;
pub mod report;
pub mod secrets;
pub mod service_objects;
pub mod services;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

pub use error::SourceError;
pub use model::{
    node_view, CiliumConfig, ClusterState, IpamError, IpamMode, IpamOverride, NodeEntry, NodeFacts,
    NodeView,
};
pub use report::{Report, ReportTracker};

use model::CidrList;

/// What a source sends the daemon. Snapshots (the daemon may drop all but the latest
/// and still be right), except [`SourceUpdate::Lb`], which is a delta: every one must
/// be applied, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceUpdate {
    /// The cluster facts after a change, with the view decided from them. Sent once
    /// every watched resource has been listed, then only when the facts change.
    Cluster(Arc<ClusterSnapshot>),
    /// The raw bgp-config text (the config module parses it); `None` when the
    /// ConfigMap or its key does not exist. Sent after the first sync, then on change.
    BgpConfigText(Option<String>),
    /// Every Secret the bgp-config names (`password-secret`), after each change. Sent
    /// once each named Secret has been read, then on change.
    Secrets(Arc<secrets::SecretsView>),
    /// One Service or EndpointSlice whose LoadBalancer facts changed (a delta).
    Lb(services::LbUpdate),
}

/// The facts and the view derived from them with the source's `--ipam` setting.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSnapshot {
    /// The facts the view was made from; in a daemon's snapshot (`own` given to
    /// [`ClusterSnapshot::new`]) only its own node's facts of the per-node ones.
    pub state: ClusterState,
    pub view: Result<NodeView, IpamError>,
}

impl ClusterSnapshot {
    /// The view of `state`. With `own` (the daemon's node), every other node's facts
    /// are dropped once the view is made: the view holds what the planner reads of
    /// every node, and the daemon reads no other node's facts (its own node's
    /// lifecycle and uid, and cilium-config, are kept). At 50,000 nodes the dropped
    /// facts are about 12 MB that would stay for as long as the snapshot is in force.
    pub fn new(mut state: ClusterState, ipam: IpamOverride, own: Option<&str>) -> Self {
        let view = node_view(&state, ipam);
        if let Some(own) = own {
            state.keep_only_node(own);
        }
        Self { state, view }
    }
}

/// One input a source follows, for readiness and metrics (bounded label values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    Nodes,
    CiliumNodes,
    PodIpPools,
    CiliumConfig,
    BgpConfigMap,
    ClusterStateFile,
    BgpConfigFile,
    /// The Secrets named by `password-secret`, through the API.
    Secrets,
    /// The same, from `--secrets-dir`.
    SecretsDir,
    /// Services (core/v1), for their LoadBalancer facts.
    Services,
    /// EndpointSlices (discovery.k8s.io/v1), for the Services' ready endpoints.
    EndpointSlices,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Nodes => "nodes",
            Self::CiliumNodes => "ciliumnodes",
            Self::PodIpPools => "ciliumpodippools",
            Self::CiliumConfig => "cilium-config",
            Self::BgpConfigMap => "bgp-config-map",
            Self::ClusterStateFile => "cluster-state-file",
            Self::BgpConfigFile => "bgp-config-file",
            Self::Secrets => "secrets",
            Self::SecretsDir => "secrets-dir",
            Self::Services => "services",
            Self::EndpointSlices => "endpointslices",
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one followed resource is doing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceStatus {
    /// The watch (or the last file load) works.
    pub up: bool,
    /// The first complete list (or load) has been applied.
    pub synced: bool,
    /// When the last event (or successful load) arrived.
    pub last_event: Option<SystemTime>,
    /// Events applied (watch events, list items, file loads).
    pub events: u64,
    /// Complete lists applied (initial sync and each relist), or successful file loads.
    pub relists: u64,
    /// Errors (watch errors, malformed objects, bad files).
    pub errors: u64,
    /// The last error, for /status; never a metric label.
    pub last_error: Option<String>,
}

/// The status of every followed resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceStatus {
    pub resources: BTreeMap<Resource, ResourceStatus>,
}

impl SourceStatus {
    /// Every followed resource has completed its first sync.
    pub fn ready(&self) -> bool {
        !self.resources.is_empty() && self.resources.values().all(|r| r.synced)
    }
}

/// The sending half handed to each source task. Cloned when several sources feed one
/// daemon (a kube cluster source with a `--bgp-config FILE`).
#[derive(Clone, Debug)]
pub struct SourceSender {
    updates: mpsc::Sender<SourceUpdate>,
    status: Arc<watch::Sender<SourceStatus>>,
}

/// The daemon's half: updates in order, and the latest status.
#[derive(Debug)]
pub struct SourceReceiver {
    pub updates: mpsc::Receiver<SourceUpdate>,
    pub status: watch::Receiver<SourceStatus>,
}

/// The daemon stopped listening; the source task ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the source receiver was dropped")]
pub struct Closed;

/// A bounded channel for source updates plus a watch of their status.
pub fn channel(capacity: usize) -> (SourceSender, SourceReceiver) {
    let (updates_tx, updates) = mpsc::channel(capacity.max(1));
    let (status_tx, status) = watch::channel(SourceStatus::default());
    (
        SourceSender {
            updates: updates_tx,
            status: Arc::new(status_tx),
        },
        SourceReceiver { updates, status },
    )
}

impl SourceSender {
    /// Waits for room in the channel; fails only when the daemon is gone.
    pub async fn send(&self, update: SourceUpdate) -> Result<(), Closed> {
        self.updates.send(update).await.map_err(|_| Closed)
    }

    /// Declares a resource this source follows, so readiness waits for it.
    pub fn register(&self, resource: Resource) {
        self.status.send_modify(|s| {
            s.resources.entry(resource).or_default();
        });
    }

    /// Changes one resource's status and notifies watchers.
    pub fn status(&self, resource: Resource, change: impl FnOnce(&mut ResourceStatus)) {
        self.status
            .send_modify(|s| change(s.resources.entry(resource).or_default()));
    }

    /// The daemon dropped its receiver.
    pub fn is_closed(&self) -> bool {
        self.updates.is_closed()
    }

    /// Completes when the daemon drops its receiver.
    pub async fn closed(&self) {
        self.updates.closed().await
    }
}

/// Where findings go besides the log: Kubernetes Events when the API is available.
/// `publish` must not block: the watchers call it inline.
pub trait EventSink: Send + Sync + 'static {
    fn publish(&self, report: &Report);
}

/// No event API (standalone mode): findings are only logged.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoEvents;

impl EventSink for NoEvents {
    fn publish(&self, _report: &Report) {}
}

/// Logs one finding; each is produced once per change by [`ReportTracker`].
pub fn log_report(report: &Report) {
    match report {
        Report::Drift {
            node, drift, ipam, ..
        } => warn!(
            node = %node,
            node_cidrs = %CidrList(&drift.node_cidrs),
            cilium_node_cidrs = %CidrList(&drift.cilium_cidrs),
            ipam = %ipam,
            announced = ipam.object(),
            "pod cidrs of node and ciliumnode disagree"
        ),
        Report::DriftResolved { node } => {
            info!(node = %node, "pod cidrs of node and ciliumnode agree again")
        }
        Report::Refused {
            node,
            prefix,
            refusal,
        } => warn!(node = %node, prefix = %prefix, reason = %refusal, "pod cidr not announced"),
        Report::Ipam(e) => warn!(error = %e, "cannot decide the ipam mode, nothing is announced"),
        Report::IpamResolved { ipam } => info!(ipam = %ipam, "ipam mode decided"),
        Report::Warning(w) => warn!(warning = %w, "node view warning"),
        Report::Stopping {
            node,
            decision,
            note,
            ..
        } => info!(node = %node, decision, note = %note, "speaker stopping"),
        Report::CiliumBgpConflict { node, note, .. } => {
            warn!(node = %node, note = %note, "cilium's embedded bgp speaker is on")
        }
        Report::CiliumBgpConflictResolved { node, .. } => {
            info!(node = %node, "cilium's embedded bgp speaker is off")
        }
    }
}

/// Says once per change which Services have ingress entries without a usable IP (a
/// hostname, or not an IP address), so a Service rewritten every second with the same
/// entries does not log every second. Holds only the Services that have such entries.
#[derive(Debug, Default)]
struct RefusedIngress(BTreeMap<services::ObjectKey, Vec<String>>);

impl RefusedIngress {
    fn observe(&mut self, update: &services::LbUpdate) {
        let services::LbUpdate::Service { key, facts } = update else {
            return;
        };
        let refused = facts.as_ref().map(|f| &f.ingress_refused);
        match refused.filter(|r| !r.is_empty()) {
            None => {
                self.0.remove(key);
            }
            Some(refused) if self.0.get(key) != Some(refused) => {
                warn!(service = %key, refused = ?refused,
                    "loadbalancer ingress without a usable ip (a hostname, or not an ip address): not announced");
                self.0.insert(key.clone(), refused.clone());
            }
            Some(_) => {}
        }
    }
}

/// Computes the snapshot for `state` (see [`ClusterSnapshot::new`] for `own`); unless it
/// equals `last`, logs and publishes what is new and returns it.
fn snapshot_and_report(
    state: ClusterState,
    ipam: IpamOverride,
    own: Option<&str>,
    last: Option<&ClusterSnapshot>,
    tracker: &mut ReportTracker,
    events: &dyn EventSink,
) -> Option<Arc<ClusterSnapshot>> {
    let snapshot = ClusterSnapshot::new(state, ipam, own);
    if last == Some(&snapshot) {
        return None;
    }
    for report in tracker.observe(&snapshot.view) {
        log_report(&report);
        events.publish(&report);
    }
    Some(Arc::new(snapshot))
}
