//! The Kubernetes source: kube-rs watchers for Nodes, CiliumNodes, the cilium-config
//! ConfigMap and the bgp-config ConfigMap, folded into one [`ClusterState`]; and, when
//! asked ([`KubeSourceConfig::load_balancers`]), for every Service and the
//! EndpointSlices of [`SliceScope`], sent as LoadBalancer deltas ([`services`]).
//!
//! - `WatchScope::Local` (the DaemonSet, `--announce local`) watches only its own Node
//!   and CiliumNode with a `metadata.name` field selector: a 5,000-node cluster costs
//!   each speaker two objects. `WatchScope::Cluster` watches all of them.
//! - ConfigMaps are watched by name in their namespace (field selector as well).
//! - Relists replace a resource's facts atomically at `InitDone` ([`store`]); an
//!   unchanged relist sends nothing.
//! - API trouble (errors, 410 Gone, disconnects) never clears anything: the last known
//!   facts stay, the resource is marked down in the status, kube-rs's backoff retries.
//! - An object whose facts cannot be read is logged and skipped; it keeps its last good
//!   facts; the watch goes on.
//! - The daemon's source keeps only its own node's labels
//!   ([`KubeSourceConfig::own_node`], as the file source): in cluster scope no other
//!   node's are kept, and a change to another node's labels alone is no change. Its
//!   snapshots keep only that node's facts beside the view ([`super::ClusterSnapshot::new`]).
//! - Nothing is sent before every resource completed its first list. A CiliumNode CRD
//!   that is not installed (404 on the first list) counts as an empty, synced resource.
//! - CiliumPodIPPools (multi-pool IPAM's ranges) are watched whole in both scopes: a
//!   cluster has a handful. When their first list is refused (404: CRD not served, 403:
//!   no RBAC grant) the resource counts as synced and the ranges as unknown
//!   ([`ClusterState::pod_ip_pools`] `None`): multi-pool CIDRs are then announced
//!   unchecked, and the view says so. kube-rs keeps retrying; a later list makes them
//!   known.
//!
//! - No request waits for ever: a watch is ended by the server after [`WATCH_TIMEOUT`]
//!   (and by kube-runtime 5 s later if that close never comes), and every response,
//!   a list included, must show a byte within [`API_READ_TIMEOUT`] ([`client`]). A hung
//!   API server then costs a retry, never a stuck source.
//!
//! The mapping object -> facts lives in [`super::objects`]; the rules in [`super::model`].

pub mod events;
pub mod lb_slices;
pub mod secrets;
pub mod services;
pub mod store;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::stream::{self, BoxStream};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, DefaultBackoff, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tracing::{debug, info, warn};

use super::error::SourceError;
use super::model::{
    CiliumConfig, CiliumConfigMemory, CiliumNodeFacts, ClusterState, IpamOverride, KeptChange,
    Labels, NodeFacts, PoolRanges, CILIUM_CONFIG_KEPT,
};
use super::objects::{self, CiliumNode, CiliumPodIpPool};
use super::{
    snapshot_and_report, Closed, EventSink, ReportTracker, Resource, ResourceStatus, SourceSender,
    SourceUpdate,
};
use store::{Store, StoreKey};

/// How long the API server keeps a watch open before ending it (kube's own default,
/// stated here because [`API_READ_TIMEOUT`] must stay above it).
pub const WATCH_TIMEOUT: Duration = Duration::from_secs(290);

/// The longest the daemon's client waits for a byte of a response. Without it (kube 5's
/// default) a list that the server accepts and never answers waits for ever. Above
/// [`WATCH_TIMEOUT`] plus kube-runtime's 5 s margin, so a quiet watch is ended by its
/// own idle timeout, never by this one.
pub const API_READ_TIMEOUT: Duration = Duration::from_secs(WATCH_TIMEOUT.as_secs() + 15);

/// A client for the cluster this process runs in (or KUBECONFIG's), whose responses
/// must show a byte within `read_timeout`.
pub async fn client(read_timeout: Duration) -> Result<Client, String> {
    let mut config = kube::Config::infer().await.map_err(|e| e.to_string())?;
    bound_reads(&mut config, read_timeout);
    no_roots_without_tls(&mut config);
    Client::try_from(config).map_err(|e| e.to_string())
}

/// An API server reached over plain HTTP (`kubectl proxy`, a test's server) with no
/// HTTPS proxy in between never has a certificate checked, yet kube builds the TLS
/// config regardless, and without a CA in the config it loads every root of the
/// system's store for it (about 80 KiB kept for the process's life, and the code that
/// parses them). An empty CA list instead: nothing is loaded, and were TLS ever used
/// it would trust nothing (fails closed). A config with a CA, an HTTPS URL or an HTTPS
/// proxy is left as it is.
pub fn no_roots_without_tls(config: &mut kube::Config) {
    let plain = config.cluster_url.scheme_str() == Some("http");
    let tls_proxy = config
        .proxy_url
        .as_ref()
        .is_some_and(|p| p.scheme_str() == Some("https"));
    if !plain || tls_proxy {
        return;
    }
    config.root_cert.get_or_insert_with(Vec::new);
}

/// Sets the read timeout, counted from each request written (not from when a pooled
/// connection went idle, which would fail a request on a connection idle for a while).
pub fn bound_reads(config: &mut kube::Config, read_timeout: Duration) {
    config.read_timeout = Some(read_timeout);
    config.reset_reader_on_write = true;
}

/// Which Nodes and CiliumNodes to watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchScope {
    /// Only the named node (the DaemonSet: `--announce local`, `--node NAME`).
    Local { node: String },
    /// Every node (`--announce cluster`).
    Cluster,
}

/// A ConfigMap by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigMapRef {
    pub namespace: String,
    pub name: String,
}

impl ConfigMapRef {
    /// Cilium's own configuration: `kube-system/cilium-config`.
    pub fn cilium_config() -> Self {
        Self {
            namespace: "kube-system".into(),
            name: "cilium-config".into(),
        }
    }
}

/// The bgp-config ConfigMap and the key holding the text: `--bgp-config-map
/// NS/NAME[:KEY]` (default key `config.yaml`; MetalLB's legacy one is
/// `metallb-system/config:config`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BgpConfigMapRef {
    pub namespace: String,
    pub name: String,
    pub key: String,
}

impl Default for BgpConfigMapRef {
    fn default() -> Self {
        Self {
            namespace: "kube-system".into(),
            name: "bgp-config".into(),
            key: Self::DEFAULT_KEY.into(),
        }
    }
}

impl BgpConfigMapRef {
    pub const DEFAULT_KEY: &'static str = "config.yaml";
}

/// `--bgp-config-map` is not `NS/NAME[:KEY]`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("--bgp-config-map: {value:?} must be NAMESPACE/NAME or NAMESPACE/NAME:KEY")]
pub struct BadConfigMapRef {
    pub value: String,
}

impl FromStr for BgpConfigMapRef {
    type Err = BadConfigMapRef;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadConfigMapRef {
            value: s.to_owned(),
        };
        let (namespace, rest) = s.split_once('/').ok_or_else(bad)?;
        let (name, key) = match rest.split_once(':') {
            Some((name, key)) => (name, key),
            None => (rest, Self::DEFAULT_KEY),
        };
        let valid = |part: &str| !part.is_empty() && !part.contains(['/', ':']);
        if !valid(namespace) || !valid(name) || !valid(key) {
            return Err(bad());
        }
        Ok(Self {
            namespace: namespace.into(),
            name: name.into(),
            key: key.into(),
        })
    }
}

impl fmt::Display for BgpConfigMapRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}:{}", self.namespace, self.name, self.key)
    }
}

/// How long to wait before retrying after an API error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Retry {
    /// kube-rs's default (client-go's): 800 ms doubling to 30 s, with jitter.
    #[default]
    KubeDefault,
    /// A fixed delay (tests).
    Fixed(Duration),
}

/// What the Kubernetes source watches and how it decides the view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeSourceConfig {
    pub scope: WatchScope,
    pub cilium_config: ConfigMapRef,
    /// `None` when the bgp-config comes from a file (`--bgp-config FILE`).
    pub bgp_config: Option<BgpConfigMapRef>,
    pub ipam: IpamOverride,
    pub retry: Retry,
    /// Also watch every Service and the EndpointSlices of `slices` and send their
    /// LoadBalancer facts ([`SourceUpdate::Lb`]). Off, neither is listed nor watched
    /// (nor needs RBAC).
    pub load_balancers: bool,
    /// Which EndpointSlices are watched when `load_balancers` is on.
    pub slices: SliceScope,
    /// The daemon's own node (as the file source's `own_node`): only its labels are
    /// kept (the planner reads no other node's, and in cluster scope they are most of a
    /// Node's facts; a change to another node's labels alone is then no change), and
    /// only its facts in the snapshots sent ([`super::ClusterSnapshot::new`]). `None` keeps
    /// every node's (the one-shot commands, tests).
    pub own_node: Option<Arc<str>>,
}

/// Which EndpointSlices the LoadBalancer watchers follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SliceScope {
    /// Only those of the Services this speaker could announce (`type: LoadBalancer`
    /// of a class in `classes`, the `--lb-class` values; empty: only Services without
    /// a class), with label selectors of at most `selector_bytes` bytes each
    /// ([`lb_slices`]). The daemon's.
    LoadBalancers {
        classes: BTreeSet<Arc<str>>,
        selector_bytes: usize,
    },
    /// Every EndpointSlice of the cluster, one watch: what each speaker paid before the
    /// scoped watches; kept to measure one against the other (benches/).
    All,
}

impl SliceScope {
    /// Scoped to the Services of these classes, with the default selector bound.
    pub fn load_balancers(classes: &[String]) -> Self {
        Self::LoadBalancers {
            classes: classes.iter().map(|c| Arc::from(c.as_str())).collect(),
            selector_bytes: lb_slices::SELECTOR_BYTES,
        }
    }
}

/// Watches the cluster until the receiver is dropped. Never returns an error for API
/// trouble: it retries forever and keeps the last known state meanwhile.
#[tracing::instrument(name = "kube_source", skip_all, fields(scope = ?config.scope, ipam = %config.ipam))]
pub async fn run(
    client: Client,
    config: KubeSourceConfig,
    out: SourceSender,
    events: Arc<dyn EventSink>,
) -> Result<(), Closed> {
    let mut fold = WatchState::new(&config);
    for resource in fold.resources() {
        out.register(resource);
    }
    let mut inputs = stream::select_all(inputs(&client, &config));
    let mut slice_watches = BTreeMap::new();
    loop {
        let input = tokio::select! {
            input = inputs.next() => input,
            () = out.closed() => return Err(Closed),
        };
        // The watchers never end; if they did there would be nothing left to follow.
        let Some(input) = input else { return Ok(()) };
        let resource = fold.handle(input, SystemTime::now());
        for order in fold.slice_watch_orders() {
            let started = services::carry_out(
                order,
                &client,
                &watch_config(),
                config.retry,
                &mut slice_watches,
            );
            inputs.extend(started);
        }
        if let Some(update) = fold.cluster_update(events.as_ref()) {
            out.send(update).await?;
        }
        if let Some(update) = fold.bgp_config_update() {
            out.send(update).await?;
        }
        for update in fold.lb_updates() {
            out.send(SourceUpdate::Lb(update)).await?;
        }
        // After the update is queued, so whoever sees the status also sees the update.
        // A Service event may complete the EndpointSlices' sync (no slice to watch).
        for resource in fold.touched(resource) {
            let status = fold.status(resource);
            out.status(resource, |s| *s = status);
        }
    }
}

/// One watcher event, tagged with the resource it is for.
enum Input {
    /// Boxed: a Node is three times the size of the other objects.
    Node(Box<watcher::Result<Event<Node>>>),
    CiliumNode(watcher::Result<Event<CiliumNode>>),
    PodIpPool(watcher::Result<Event<CiliumPodIpPool>>),
    CiliumConfig(watcher::Result<Event<ConfigMap>>),
    BgpConfig(watcher::Result<Event<ConfigMap>>),
    /// Boxed: a Service is the largest object watched.
    Service(Box<watcher::Result<Event<Service>>>),
    /// An event of the EndpointSlice watch with this id ([`lb_slices::WatchId`]).
    Slice(
        lb_slices::WatchId,
        Box<watcher::Result<Event<EndpointSlice>>>,
    ),
}

/// Every watch's request options. The timeout is the API server's default, explicit
/// because API_READ_TIMEOUT is derived from it. The u32 conversion cannot fail for 290.
pub fn watch_config() -> watcher::Config {
    watcher::Config::default().timeout(WATCH_TIMEOUT.as_secs() as u32)
}

fn inputs(client: &Client, config: &KubeSourceConfig) -> Vec<BoxStream<'static, Input>> {
    let base = watch_config;
    let by_name = |name: &str| base().fields(&format!("metadata.name={name}"));
    let nodes = match &config.scope {
        WatchScope::Local { node } => by_name(node),
        WatchScope::Cluster => base(),
    };
    let retry = config.retry;
    let mut inputs = vec![
        watcher::watcher(Api::<Node>::all(client.clone()), nodes.clone())
            .backoff(RetryBackoff::new(retry))
            .map(|item| Input::Node(Box::new(item)))
            .boxed(),
        watcher::watcher(Api::<CiliumNode>::all(client.clone()), nodes)
            .backoff(RetryBackoff::new(retry))
            .map(Input::CiliumNode)
            .boxed(),
        watcher::watcher(Api::<CiliumPodIpPool>::all(client.clone()), base())
            .backoff(RetryBackoff::new(retry))
            .map(Input::PodIpPool)
            .boxed(),
        watcher::watcher(
            Api::<ConfigMap>::namespaced(client.clone(), &config.cilium_config.namespace),
            by_name(&config.cilium_config.name),
        )
        .backoff(RetryBackoff::new(retry))
        .map(Input::CiliumConfig)
        .boxed(),
    ];
    if let Some(bgp) = &config.bgp_config {
        inputs.push(
            bgp_config_watcher(client, bgp, retry)
                .map(Input::BgpConfig)
                .boxed(),
        );
    }
    if config.load_balancers {
        inputs.extend(services::watchers(client, base(), retry, &config.slices));
    }
    inputs
}

/// The bgp-config ConfigMap's watch: by name in its namespace.
fn bgp_config_watcher(
    client: &Client,
    bgp: &BgpConfigMapRef,
    retry: Retry,
) -> BoxStream<'static, watcher::Result<Event<ConfigMap>>> {
    watcher::watcher(
        Api::<ConfigMap>::namespaced(client.clone(), &bgp.namespace),
        watch_config().fields(&format!("metadata.name={}", bgp.name)),
    )
    .backoff(RetryBackoff::new(retry))
    .boxed()
}

/// Follows the bgp-config ConfigMap alone, for a role that needs nothing else of the
/// cluster (`allocate`): the same watch, the same reading of the key and the same
/// `BgpConfigText` updates (after the first list, then on change) as [`run`] sends.
/// Returns when the receiver is dropped.
#[tracing::instrument(name = "bgp_config_map", skip_all, fields(config_map = %config_map))]
pub async fn follow_bgp_config(
    client: Client,
    config_map: BgpConfigMapRef,
    retry: Retry,
    out: SourceSender,
) -> Result<(), Closed> {
    let resource = Resource::BgpConfigMap;
    out.register(resource);
    let mut text: Store<Option<String>> = Store::new();
    let mut status = ResourceStatus::default();
    let mut last: Option<Option<String>> = None;
    let mut events = bgp_config_watcher(&client, &config_map, retry);
    loop {
        let item = tokio::select! {
            item = events.next() => item,
            () = out.closed() => return Err(Closed),
        };
        let Some(item) = item else { return Ok(()) };
        step(
            resource,
            &mut text,
            &mut status,
            item,
            SystemTime::now(),
            |cm| Ok(objects::config_map_text(cm, &config_map.key)),
        );
        if let Some(update) = bgp_text_update(&text, &config_map, &mut last) {
            out.send(update).await?;
        }
        let now = status.clone();
        out.status(resource, |s| *s = now);
    }
}

/// The bgp-config text to send, after the ConfigMap's first list and on change.
fn bgp_text_update(
    store: &Store<Option<String>>,
    config_map: &BgpConfigMapRef,
    last: &mut Option<Option<String>>,
) -> Option<SourceUpdate> {
    if !store.synced() {
        return None;
    }
    let text = store.live().get(&config_map.name).cloned().flatten();
    if last.as_ref() == Some(&text) {
        return None;
    }
    if text.is_none() {
        warn!(config_map = %config_map, "bgp-config configmap or key not found");
    }
    *last = Some(text.clone());
    Some(SourceUpdate::BgpConfigText(text))
}

/// The watchers' state: one store per resource, what was last sent, the status.
struct WatchState {
    ipam: IpamOverride,
    cilium_config_name: String,
    bgp_config: Option<BgpConfigMapRef>,
    nodes: Store<NodeFacts>,
    /// See [`KubeSourceConfig::own_node`].
    own_node: Option<Arc<str>>,
    /// The one empty label map every other node's facts share.
    no_labels: Labels,
    cilium_nodes: Store<CiliumNodeFacts>,
    pod_ip_pools: Store<PoolRanges>,
    /// The first list of CiliumPodIPPools was refused: their ranges are unknown.
    pod_ip_pools_unreadable: bool,
    cilium_config: Store<CiliumConfig>,
    /// The last cilium-config seen: its deletion changes nothing.
    cilium_config_memory: CiliumConfigMemory,
    bgp_text: Store<Option<String>>,
    /// `Some` when Services and EndpointSlices are watched.
    lb: Option<services::LbWatch>,
    status: BTreeMap<Resource, ResourceStatus>,
    cluster_dirty: bool,
    last_cluster: Option<ClusterState>,
    /// `None` until the first bgp-config text was sent.
    last_bgp_text: Option<Option<String>>,
    tracker: ReportTracker,
}

impl WatchState {
    fn new(config: &KubeSourceConfig) -> Self {
        Self {
            ipam: config.ipam,
            cilium_config_name: config.cilium_config.name.clone(),
            bgp_config: config.bgp_config.clone(),
            nodes: Store::new(),
            own_node: config.own_node.clone(),
            no_labels: Labels::default(),
            cilium_nodes: Store::new(),
            pod_ip_pools: Store::new(),
            pod_ip_pools_unreadable: false,
            cilium_config: Store::new(),
            cilium_config_memory: CiliumConfigMemory::default(),
            bgp_text: Store::new(),
            lb: config
                .load_balancers
                .then(|| services::LbWatch::new(&config.slices)),
            status: BTreeMap::new(),
            cluster_dirty: false,
            last_cluster: None,
            last_bgp_text: None,
            tracker: ReportTracker::new(),
        }
    }

    fn resources(&self) -> Vec<Resource> {
        let mut resources = vec![
            Resource::Nodes,
            Resource::CiliumNodes,
            Resource::PodIpPools,
            Resource::CiliumConfig,
        ];
        if self.bgp_config.is_some() {
            resources.push(Resource::BgpConfigMap);
        }
        if self.lb.is_some() {
            resources.extend(services::RESOURCES);
        }
        resources
    }

    fn status(&self, resource: Resource) -> ResourceStatus {
        self.status.get(&resource).cloned().unwrap_or_default()
    }

    /// Applies one watcher event; returns the resource it was for.
    fn handle(&mut self, input: Input, now: SystemTime) -> Resource {
        match input {
            Input::Node(item) => {
                let (own, no_labels) = (self.own_node.as_deref(), &self.no_labels);
                let changed = step(
                    Resource::Nodes,
                    &mut self.nodes,
                    self.status.entry(Resource::Nodes).or_default(),
                    *item,
                    now,
                    |n| {
                        objects::node_facts(n).map(|(name, mut facts)| {
                            if own.is_some_and(|own| own != name) {
                                facts.labels = Arc::clone(no_labels);
                            }
                            facts
                        })
                    },
                );
                self.cluster_dirty |= changed;
                Resource::Nodes
            }
            Input::CiliumNode(item) => {
                let changed = step(
                    Resource::CiliumNodes,
                    &mut self.cilium_nodes,
                    self.status.entry(Resource::CiliumNodes).or_default(),
                    item,
                    now,
                    |n| objects::cilium_node_facts(n).map(|(_, facts)| facts),
                );
                self.cluster_dirty |= changed;
                Resource::CiliumNodes
            }
            Input::PodIpPool(item) => {
                let listed = matches!(item, Ok(Event::InitDone));
                // Refused before any list: the ranges are unknown. Refused on a later
                // relist: API trouble, the last ranges stay.
                let unknown = is_refused_first_list(&item) && !self.pod_ip_pools.synced();
                let changed = step(
                    Resource::PodIpPools,
                    &mut self.pod_ip_pools,
                    self.status.entry(Resource::PodIpPools).or_default(),
                    item,
                    now,
                    |p| objects::pod_ip_pool_ranges(p).map(|(_, ranges)| ranges),
                );
                let unreadable = !listed && (unknown || self.pod_ip_pools_unreadable);
                self.cluster_dirty |= changed || unreadable != self.pod_ip_pools_unreadable;
                self.pod_ip_pools_unreadable = unreadable;
                Resource::PodIpPools
            }
            Input::CiliumConfig(item) => {
                let changed = step(
                    Resource::CiliumConfig,
                    &mut self.cilium_config,
                    self.status.entry(Resource::CiliumConfig).or_default(),
                    item,
                    now,
                    objects::cilium_config,
                );
                self.cluster_dirty |= changed;
                Resource::CiliumConfig
            }
            Input::BgpConfig(item) => {
                let key = self
                    .bgp_config
                    .as_ref()
                    .map(|b| b.key.clone())
                    .unwrap_or_default();
                step(
                    Resource::BgpConfigMap,
                    &mut self.bgp_text,
                    self.status.entry(Resource::BgpConfigMap).or_default(),
                    item,
                    now,
                    |cm| Ok(objects::config_map_text(cm, &key)),
                );
                Resource::BgpConfigMap
            }
            Input::Service(item) => {
                let status = self.status.entry(Resource::Services).or_default();
                if let Some(lb) = &mut self.lb {
                    lb.service(*item, status, now);
                    let slices = self.status.entry(Resource::EndpointSlices).or_default();
                    slices.synced |= lb.slices_listed();
                    // Without a slice watch (no Service to announce) nothing is down:
                    // the source_up metric must not say otherwise.
                    if lb.nothing_to_watch() {
                        slices.up = true;
                    }
                }
                Resource::Services
            }
            Input::Slice(id, item) => {
                let status = self.status.entry(Resource::EndpointSlices).or_default();
                if let Some(lb) = &mut self.lb {
                    lb.slice(id, *item, status, now);
                }
                Resource::EndpointSlices
            }
        }
    }

    /// The resources whose status an event of `resource` may have changed.
    fn touched(&self, resource: Resource) -> Vec<Resource> {
        match resource {
            Resource::Services if self.lb.is_some() => {
                vec![Resource::Services, Resource::EndpointSlices]
            }
            other => vec![other],
        }
    }

    /// The EndpointSlice watches to start and stop.
    fn slice_watch_orders(&mut self) -> Vec<lb_slices::WatchOrder> {
        self.lb
            .as_mut()
            .map(services::LbWatch::watch_orders)
            .unwrap_or_default()
    }

    /// The LoadBalancer deltas to send, in order (none unless watched).
    fn lb_updates(&mut self) -> Vec<crate::sources::services::LbUpdate> {
        self.lb
            .as_mut()
            .map(services::LbWatch::updates)
            .unwrap_or_default()
    }

    /// The snapshot to send, when every cluster resource is synced and the facts
    /// differ from the last snapshot sent.
    fn cluster_update(&mut self, events: &dyn EventSink) -> Option<SourceUpdate> {
        let synced = self.nodes.synced()
            && self.cilium_nodes.synced()
            && self.pod_ip_pools.synced()
            && self.cilium_config.synced();
        if !synced || !(self.cluster_dirty || self.last_cluster.is_none()) {
            return None;
        }
        self.cluster_dirty = false;
        let seen = self
            .cilium_config
            .live()
            .get(&self.cilium_config_name)
            .cloned();
        let (cilium_config, change) = self.cilium_config_memory.in_force(seen);
        let status = self.status.entry(Resource::CiliumConfig).or_default();
        match change {
            KeptChange::NowKept => {
                let ipam = cilium_config.as_ref().and_then(|c| c.ipam.clone());
                warn!(config_map = %self.cilium_config_name, ipam = ?ipam,
                    "cilium-config deleted: keeping the last one seen, nothing changes until it is back");
                status.last_error = Some(CILIUM_CONFIG_KEPT.into());
            }
            KeptChange::Back => {
                info!(config_map = %self.cilium_config_name, "cilium-config is back");
                status.last_error = None;
            }
            KeptChange::Unchanged => {}
        }
        let mut state = ClusterState {
            nodes: self.nodes.live().clone(),
            pod_ip_pools: (!self.pod_ip_pools_unreadable).then(|| self.pod_ip_pools.live().clone()),
            cilium_config,
            ..ClusterState::default()
        };
        for (name, facts) in self.cilium_nodes.live() {
            state.insert_cilium_node(name.clone(), facts.clone());
        }
        if self.last_cluster.as_ref() == Some(&state) {
            return None;
        }
        self.last_cluster = Some(state.clone());
        // The states were compared above (the store's copy is kept anyway): no second
        // comparison of the snapshots.
        let snapshot = snapshot_and_report(
            state,
            self.ipam,
            self.own_node.as_deref(),
            None,
            &mut self.tracker,
            events,
        )?;
        Some(SourceUpdate::Cluster(snapshot))
    }

    /// The bgp-config text to send, after its first sync and on change.
    fn bgp_config_update(&mut self) -> Option<SourceUpdate> {
        let config_map = self.bgp_config.as_ref()?;
        bgp_text_update(&self.bgp_text, config_map, &mut self.last_bgp_text)
    }
}

/// Folds one watcher item into a store; true when the store's facts changed.
pub(crate) fn step<K, F, Key>(
    resource: Resource,
    store: &mut Store<F, Key>,
    status: &mut ResourceStatus,
    item: watcher::Result<Event<K>>,
    now: SystemTime,
    mut map: impl FnMut(&K) -> Result<F, SourceError>,
) -> bool
where
    K: kube::Resource,
    F: Clone + PartialEq,
    Key: StoreKey + fmt::Display,
{
    let event = match item {
        Ok(event) => event,
        Err(e) => return watch_error(resource, store, status, &e),
    };
    status.up = true;
    status.last_event = Some(now);
    let mut mapped = |object: &K, status: &mut ResourceStatus| -> Option<(Key, Option<F>)> {
        status.events += 1;
        let Some(name) = Key::of(object.meta()) else {
            status.errors += 1;
            let e = SourceError::MissingName {
                kind: resource_kind(resource),
            };
            warn!(resource = %resource, error = %e, "object skipped");
            status.last_error = Some(e.to_string());
            return None;
        };
        match map(object) {
            Ok(facts) => Some((name, Some(facts))),
            Err(e) => {
                status.errors += 1;
                warn!(resource = %resource, name = %name, error = %e,
                    "object skipped, its last good facts stay in force");
                status.last_error = Some(e.to_string());
                Some((name, None))
            }
        }
    };
    match event {
        Event::Init => {
            debug!(resource = %resource, "relist started");
            store.init();
            false
        }
        Event::InitApply(object) => {
            match mapped(&object, status) {
                Some((name, Some(facts))) => store.init_apply(name, facts),
                Some((name, None)) => store.init_keep(&name),
                None => {}
            }
            false
        }
        Event::InitDone => {
            status.relists += 1;
            status.synced = true;
            let changed = store.init_done();
            debug!(resource = %resource, changed, "relist complete");
            changed
        }
        Event::Apply(object) => match mapped(&object, status) {
            Some((name, Some(facts))) => store.apply(name, facts),
            _ => false,
        },
        Event::Delete(object) => {
            status.events += 1;
            Key::of(object.meta()).is_some_and(|key| store.delete(&key))
        }
    }
}

/// The first list of a resource was refused as not served (404) or not allowed (403).
fn is_refused_first_list<K>(item: &watcher::Result<Event<K>>) -> bool {
    matches!(item, Err(watcher::Error::InitialListFailed(kube::Error::Api(s))) if matches!(s.code, 403 | 404))
}

/// Keeps the state; marks the resource down unless the error is routine. True only
/// when a CRD that is not installed made the (never synced) resource empty.
fn watch_error<F: Clone + PartialEq, Key: StoreKey>(
    resource: Resource,
    store: &mut Store<F, Key>,
    status: &mut ResourceStatus,
    error: &watcher::Error,
) -> bool {
    match error {
        // The watch window expired; kube-rs relists. Not an outage.
        watcher::Error::WatchError(s) if s.code == 410 => {
            info!(resource = %resource, "watch expired (410 gone), relisting");
            return false;
        }
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            if s.code == 404 && resource == Resource::CiliumNodes && !store.synced() =>
        {
            warn!(resource = %resource, error = %error,
                "ciliumnodes not served (is the cilium crd installed?): treating as none");
            status.synced = true;
            status.last_error = Some(error.to_string());
            return store.mark_absent();
        }
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            if matches!(s.code, 403 | 404)
                && resource == Resource::PodIpPools
                && !store.synced() =>
        {
            warn!(resource = %resource, error = %error,
                "ciliumpodippools cannot be listed: multi-pool cidrs are not checked against their pools");
            status.synced = true;
            status.errors += 1;
            status.last_error = Some(error.to_string());
            return store.mark_absent();
        }
        // One event that does not decode; the watch goes on. kube-rs reports such a
        // line as a SerdeError, or, when the line is any JSON object, as an Api error
        // of a Status with code 0 (every Status field is optional).
        watcher::Error::WatchFailed(kube::Error::SerdeError(_)) => {
            return undecodable(resource, status, error)
        }
        watcher::Error::WatchFailed(kube::Error::Api(s)) if s.code == 0 => {
            return undecodable(resource, status, error)
        }
        _ => {}
    }
    status.up = false;
    status.errors += 1;
    status.last_error = Some(error.to_string());
    warn!(resource = %resource, error = %error, "watch error, keeping the last known state");
    false
}

fn undecodable(resource: Resource, status: &mut ResourceStatus, error: &watcher::Error) -> bool {
    status.errors += 1;
    status.last_error = Some(format!("undecodable watch event: {error}"));
    warn!(resource = %resource, error = %error, "undecodable watch event skipped");
    false
}

fn resource_kind(resource: Resource) -> &'static str {
    match resource {
        Resource::Nodes => "Node",
        Resource::CiliumNodes => "CiliumNode",
        Resource::PodIpPools => "CiliumPodIPPool",
        Resource::Services => "Service",
        Resource::EndpointSlices => "EndpointSlice",
        _ => "ConfigMap",
    }
}

/// kube-rs's default backoff or a fixed delay, behind one type for `StreamBackoff`.
enum RetryBackoff {
    Default(Box<DefaultBackoff>),
    Fixed(Duration),
}

impl RetryBackoff {
    fn new(retry: Retry) -> Self {
        match retry {
            Retry::KubeDefault => Self::Default(Box::default()),
            Retry::Fixed(delay) => Self::Fixed(delay),
        }
    }
}

impl Iterator for RetryBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        match self {
            Self::Default(b) => b.next(),
            Self::Fixed(delay) => Some(*delay),
        }
    }
}

impl Backoff for RetryBackoff {
    fn reset(&mut self) {
        if let Self::Default(b) = self {
            b.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bgp_config_map_ref_parses_ns_name_and_key() {
        assert_eq!(
            "kube-system/bgp-config".parse::<BgpConfigMapRef>().unwrap(),
            BgpConfigMapRef::default()
        );
        let legacy: BgpConfigMapRef = "metallb-system/config:config".parse().unwrap();
        assert_eq!(
            legacy,
            BgpConfigMapRef {
                namespace: "metallb-system".into(),
                name: "config".into(),
                key: "config".into()
            }
        );
        assert_eq!(legacy.to_string(), "metallb-system/config:config");
        for bad in ["bgp-config", "/x", "ns/", "ns/name:", "a/b/c", "ns/n:k:z"] {
            assert!(bad.parse::<BgpConfigMapRef>().is_err(), "{bad}");
        }
    }

    #[test]
    fn plain_http_loads_no_roots_and_tls_keeps_its_own() {
        let config = |url: &str, proxy: Option<&str>, ca: Option<Vec<Vec<u8>>>| {
            let mut c = kube::Config::new(url.parse().unwrap());
            c.proxy_url = proxy.map(|p| p.parse().unwrap());
            c.root_cert = ca;
            no_roots_without_tls(&mut c);
            c.root_cert
        };
        let ca = vec![vec![0x30, 0x82]];
        assert_eq!(config("http://127.0.0.1:8001", None, None), Some(vec![]));
        assert_eq!(
            config(
                "http://127.0.0.1:8001",
                Some("socks5://127.0.0.1:1080"),
                None
            ),
            Some(vec![])
        );
        assert_eq!(
            config("http://127.0.0.1:8001", None, Some(ca.clone())),
            Some(ca.clone())
        );
        // TLS to the API server or to the proxy: the system's roots as before.
        assert_eq!(config("https://kubernetes.default.svc", None, None), None);
        assert_eq!(
            config("https://kubernetes.default.svc", None, Some(ca.clone())),
            Some(ca)
        );
        assert_eq!(
            config("http://127.0.0.1:8001", Some("https://proxy:3128"), None),
            None
        );
    }

    #[test]
    fn fixed_retry_never_gives_up() {
        let mut b = RetryBackoff::new(Retry::Fixed(Duration::from_millis(5)));
        for _ in 0..100 {
            assert_eq!(b.next(), Some(Duration::from_millis(5)));
        }
        let mut d = RetryBackoff::new(Retry::KubeDefault);
        let first = d.next().unwrap();
        assert!(
            first >= Duration::from_millis(800) && first < Duration::from_secs(3),
            "{first:?}"
        );
    }
}
