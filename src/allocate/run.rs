//! The `allocate` runner: one loop that follows the bgp-config, the Services and this
//! replica's leadership, hands them to `alloc::Allocator` while it leads, and carries
//! out its decisions (status writes, Events, metrics).
//!
//! - Every replica keeps the Services' facts from its watch (a warm standby), and the
//!   config in force. Only the leader has an `Allocator`: at each new term it builds a
//!   fresh one from the store (every Service applied, then `synced`: status addresses
//!   are claimed before anything new is handed out, so a leader change never moves an
//!   address) and writes every decision that has a write. On `Follower` the allocator
//!   is dropped, and every write checks the leadership right before it is sent.
//! - The config: parsed by `config::parse`, as `run` does. An invalid one is logged and
//!   counted, and the last good one stays. A valid one that would orphan addresses in
//!   use (`Allocator::reload`'s refusal; without an allocator, the same question asked
//!   of the statuses, once the Services are listed) is refused whole, the Services named (log,
//!   metric, `ConfigRefused` Events from the leader), and tried again whenever one of
//!   those Services changes. A deleted ConfigMap keeps the last good config.
//! - Services: those of `type: LoadBalancer` (a field selector; every Service if the
//!   API server refuses it), folded by `sources::kube`'s store, whose relists send
//!   only their differences. A Service that stops being a LoadBalancer is decided once
//!   more (its status cleared, as MetalLB does) and then forgotten. One whose facts
//!   cannot be read keeps its last good facts (a bad edit never takes an address
//!   away, as the allocator's own rule for a bad request); a new one is skipped.
//!
//! Must not: decide (`alloc` does), or write without leading.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Service;
use kube::runtime::watcher::{self, Event};
use kube::Client;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use super::lease::{Elector, Leadership, LeaseClock, LeaseRef, Timings};
use super::metrics::{AllocMetrics, ReloadResult, ServiceLine, WriteResult};
use super::objects::alloc_facts;
use super::writer::{Target, Writer};
use crate::alloc::{AllocFacts, Allocator, Decision, Refusal, State};
use crate::config::{AddressPool, Protocol};
use crate::sources::kube::services::service_watcher;
use crate::sources::kube::store::Store;
use crate::sources::kube::{self as kube_source, BgpConfigMapRef, Retry};
use crate::sources::service_objects::is_load_balancer;
use crate::sources::services::ObjectKey;
use crate::sources::{self, Resource, ResourceStatus, SourceUpdate};

/// The most often the per-Service figures (`/status`, pending, pool usage) are worked
/// out again: each time walks every Service, and a burst of watch events (a leader
/// writing 10,000 statuses hears 10,000 back) must not walk them 10,000 times.
const PUBLISH: Duration = Duration::from_millis(250);

/// How long after a status write that got no answer, or an error other than a 409,
/// it is tried again (a 409 is not: the Service's watch event decides it again). A
/// round of retries that writes nothing doubles the wait, up to [`REWRITE_BACKOFF`]
/// times this; one write that lands brings it back.
pub const REWRITE: Duration = Duration::from_secs(10);

/// The longest wait between rounds of retries, as a multiple of [`REWRITE`]: an API
/// server refusing every write (a webhook, a quota) is asked every 160 s, not every 10.
const REWRITE_BACKOFF: u32 = 16;

/// Where the bgp-config comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigInput {
    /// `--bgp-config FILE`, followed live.
    File(PathBuf),
    /// `--bgp-config-map NS/NAME[:KEY]`.
    ConfigMap(BgpConfigMapRef),
}

/// The `allocate` command's settings (`cli::AllocateArgs::settings`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub config: ConfigInput,
    /// `--lb-class`: empty, only Services without a class.
    pub classes: Vec<String>,
    pub lease: LeaseRef,
    pub identity: String,
    pub timings: Timings,
    pub metrics_addr: SocketAddr,
}

/// What the loop follows (the command builds them; tests build them on a mocked API).
pub struct Inputs {
    pub client: Client,
    pub identity: String,
    pub classes: BTreeSet<Arc<str>>,
    pub config: ConfigInput,
    pub retry: Retry,
    pub leadership: watch::Receiver<Leadership>,
    /// The elector's renew deadline, checked with the leadership before each write
    /// (`None`: leadership alone, as tests drive it).
    pub clock: Option<LeaseClock>,
    /// [`REWRITE`] (tests shorten it).
    pub rewrite: Duration,
}

/// Runs the loop until `shutdown` completes. From then on nothing more is written, even
/// in the middle of a batch of writes.
pub async fn drive(
    inputs: Inputs,
    metrics: Arc<AllocMetrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let Inputs {
        client,
        identity,
        classes,
        config,
        retry,
        mut leadership,
        clock,
        rewrite,
    } = inputs;
    let (tx, mut config_rx) = sources::channel(4);
    let mut tasks = JoinSet::new();
    match config {
        ConfigInput::File(path) => {
            tasks.spawn(async move {
                // Err only when this loop is gone: nothing left to do.
                let _ = sources::file::watch_text_file(path, sources::file::DEFAULT_POLL, tx).await;
            });
        }
        ConfigInput::ConfigMap(config_map) => {
            let client = client.clone();
            tasks.spawn(async move {
                let _ = kube_source::follow_bgp_config(client, config_map, retry, tx).await;
            });
        }
    }
    let mut services = service_watcher(client.clone(), kube_source::watch_config(), retry, true);
    let observer: Arc<dyn kube_source::events::EventObserver> = metrics.clone();
    let (writer, events_task) = Writer::spawn(client, identity, observer);
    // Seen by each write as well as by the loop (a batch of writes can be long).
    let (stop_tx, mut stopping) = watch::channel(false);
    let stopper = tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let mut runner = Runner::new(
        classes,
        (leadership.clone(), clock),
        stopping.clone(),
        writer,
        Arc::clone(&metrics),
    );
    runner.rewrite_base = rewrite;
    runner.rewrite_wait = rewrite;
    let first = *leadership.borrow_and_update();
    runner.leadership(first).await;
    let mut leadership_open = true;
    let mut config_open = true;
    loop {
        runner.arm_rewrite();
        tokio::select! {
            // A change of leadership goes before anything else waiting.
            biased;
            _ = stopping.changed() => break,
            changed = leadership.changed(), if leadership_open => {
                let now = if changed.is_ok() {
                    *leadership.borrow_and_update()
                } else {
                    // The elector is gone: nobody renews the Lease any more.
                    warn!("leader election ended: writing nothing more");
                    leadership_open = false;
                    Leadership::Follower
                };
                runner.leadership(now).await;
            }
            update = config_rx.updates.recv(), if config_open => match update {
                Some(SourceUpdate::BgpConfigText(text)) => runner.config(text).await,
                Some(_) => {}
                None => {
                    warn!("bgp-config source ended: the config in force stays");
                    config_open = false;
                }
            },
            item = services.next() => match item {
                Some(item) => runner.service(item).await,
                // The watcher never ends (kube-rs retries); if it did, nothing is left.
                None => break,
            },
            // A probe asks the loop to turn (`/healthz`): no tick of its own at idle.
            () = metrics.asked() => {
                metrics.beat();
                metrics.answered();
            }
            // Armed only while figures wait: no wake-up when idle.
            () = tokio::time::sleep_until(runner.next_publish), if runner.dirty => runner.publish(),
            // Armed only while a write waits to be tried again.
            () = sleep_until_some(runner.next_rewrite) => runner.rewrite().await,
        }
    }
    runner.leadership(Leadership::Follower).await;
    stopper.abort();
    tasks.shutdown().await;
    drop(runner);
    // The Events queued are sent if the API answers soon; none is worth a hung stop.
    let _ = tokio::time::timeout(Duration::from_secs(2), events_task).await;
}

/// Why the command could not run.
#[derive(Debug, thiserror::Error)]
pub enum AllocateError {
    #[error("kubernetes client: {0}")]
    Kube(String),
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("--metrics-addr {addr}: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
}

/// The `allocate` command: the elector, the endpoint and the loop, until SIGTERM or
/// SIGINT; then the Lease is released, so a successor takes over without waiting for
/// it to expire.
pub async fn run(settings: Settings) -> Result<(), AllocateError> {
    let client = kube_source::client(kube_source::API_READ_TIMEOUT)
        .await
        .map_err(AllocateError::Kube)?;
    let metrics = AllocMetrics::new(&settings.identity)?;
    let listener = crate::metrics::server::bind(settings.metrics_addr)
        .await
        .map_err(|error| AllocateError::Bind {
            addr: settings.metrics_addr,
            error,
        })?;
    info!(identity = %settings.identity, lease = %settings.lease,
        metrics_addr = %settings.metrics_addr, "allocator starting");
    let elector = Elector::spawn(
        client.clone(),
        settings.lease.clone(),
        settings.identity.clone(),
        settings.timings,
    );
    let (endpoint_stop, endpoint_stopped) = tokio::sync::oneshot::channel::<()>();
    let endpoint = tokio::spawn(crate::metrics::server::serve_answers(
        listener,
        metrics.answer(),
        async {
            let _ = endpoint_stopped.await;
        },
    ));
    let inputs = Inputs {
        client,
        identity: settings.identity.clone(),
        classes: settings
            .classes
            .iter()
            .map(|c| Arc::from(c.as_str()))
            .collect(),
        config: settings.config.clone(),
        retry: Retry::KubeDefault,
        leadership: elector.leadership(),
        clock: Some(elector.clock()),
        rewrite: REWRITE,
    };
    drive(inputs, metrics, signal()).await;
    // The loop wrote its last; the successor may start at once.
    elector.release().await;
    let _ = endpoint_stop.send(());
    let _ = endpoint.await;
    info!("allocator stopped");
    Ok(())
}

/// SIGTERM or SIGINT.
async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                warn!(error = %e, "sigterm cannot be caught: only sigint stops the allocator");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// What the Services' store keeps of one: the allocator's facts and what a write needs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    facts: AllocFacts,
    target: Target,
}

fn record(service: &Service) -> Result<Record, crate::sources::error::SourceError> {
    let (key, facts) = alloc_facts(service)?;
    Ok(Record {
        facts,
        target: Target {
            key,
            uid: service.metadata.uid.clone(),
            resource_version: service.metadata.resource_version.clone(),
        },
    })
}

/// A valid config not in force: it would orphan these Services' addresses.
#[derive(Debug)]
struct Refused {
    pools: Vec<AddressPool>,
    refusal: Refusal,
    services: BTreeSet<ObjectKey>,
}

/// The loop's state. See the module doc.
struct Runner {
    classes: BTreeSet<Arc<str>>,
    services: Store<Record, ObjectKey>,
    services_status: ResourceStatus,
    /// The pools of the config in force.
    pools: Option<Vec<AddressPool>>,
    refused: Option<Refused>,
    /// A valid config seen before the Services were listed.
    unjudged: Option<Vec<AddressPool>>,
    invalid: Option<String>,
    last_text: Option<String>,
    /// The leader's allocator, and the term it was built for.
    alloc: Option<Allocator>,
    term: Option<u64>,
    leading: bool,
    /// What was written to a Service at the version it still has here: its watch
    /// event is on its way, and the same write again would only meet a 409.
    written: BTreeMap<ObjectKey, (Option<String>, Vec<IpAddr>)>,
    /// Services whose last write failed other than by a 409: tried again every
    /// [`REWRITE`] with what the allocator holds for them then.
    unwritten: BTreeSet<ObjectKey>,
    leadership: watch::Receiver<Leadership>,
    /// The elector's renew deadline (`Inputs::clock`).
    clock: Option<LeaseClock>,
    /// True once the command stops.
    stopping: watch::Receiver<bool>,
    writer: Writer,
    metrics: Arc<AllocMetrics>,
    /// Figures changed since they were last published.
    dirty: bool,
    /// Not before then (see [`PUBLISH`]).
    next_publish: tokio::time::Instant,
    /// [`REWRITE`] (tests shorten it), and the wait before the next round of retries.
    rewrite_base: Duration,
    rewrite_wait: Duration,
    /// When the writes in `unwritten` are tried again; `None` while there are none.
    next_rewrite: Option<tokio::time::Instant>,
}

/// Sleeps until `deadline`; never without one.
async fn sleep_until_some(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Runner {
    fn new(
        classes: BTreeSet<Arc<str>>,
        (leadership, clock): (watch::Receiver<Leadership>, Option<LeaseClock>),
        stopping: watch::Receiver<bool>,
        writer: Writer,
        metrics: Arc<AllocMetrics>,
    ) -> Runner {
        Runner {
            classes,
            services: Store::tracking(),
            services_status: ResourceStatus::default(),
            pools: None,
            refused: None,
            unjudged: None,
            invalid: None,
            last_text: None,
            alloc: None,
            term: None,
            leading: false,
            written: BTreeMap::new(),
            unwritten: BTreeSet::new(),
            leadership,
            clock,
            stopping,
            writer,
            metrics,
            dirty: false,
            next_publish: tokio::time::Instant::now(),
            rewrite_base: REWRITE,
            rewrite_wait: REWRITE,
            next_rewrite: None,
        }
    }

    /// The retry timer follows `unwritten`: armed when a write first waits, disarmed
    /// once none does (and the wait back to [`REWRITE`]).
    fn arm_rewrite(&mut self) {
        if self.unwritten.is_empty() {
            self.next_rewrite = None;
            self.rewrite_wait = self.rewrite_base;
        } else if self.next_rewrite.is_none() {
            self.next_rewrite = Some(tokio::time::Instant::now() + self.rewrite_wait);
        }
    }

    /// Whether a write may go out now: this replica leads, in the term its allocator
    /// was built for, within the term's renew deadline (a process frozen past it may
    /// see an event before the elector's `Follower`), and is not stopping. Asked right
    /// before each write.
    fn may_write(&self) -> bool {
        !*self.stopping.borrow()
            && matches!(*self.leadership.borrow(), Leadership::Leader { term } if Some(term) == self.term)
            && self.clock.as_ref().is_none_or(LeaseClock::within_deadline)
    }

    async fn leadership(&mut self, now: Leadership) {
        if now.is_leader() != self.leading {
            self.leading = now.is_leader();
            self.metrics.leader_transitions.inc();
            self.metrics.leader.set(i64::from(self.leading));
            info!(leader = self.leading, "leadership changed");
        }
        match now {
            Leadership::Follower => {
                self.alloc = None;
                self.term = None;
                self.written.clear();
                self.unwritten.clear();
            }
            Leadership::Leader { term } if self.term != Some(term) => {
                self.alloc = None;
                self.term = Some(term);
                self.start().await;
            }
            Leadership::Leader { .. } => {}
        }
        self.refresh();
    }

    /// Builds the term's allocator once it leads, the Services are listed and a config
    /// is in force; writes what differs.
    async fn start(&mut self) {
        if self.term.is_none() || self.alloc.is_some() || !self.services.synced() {
            return;
        }
        let Some(pools) = &self.pools else { return };
        let mut alloc = Allocator::new(pools, self.classes.clone());
        let mut decisions = Vec::new();
        for (key, record) in self.services.live() {
            decisions.extend(alloc.apply(key, Some(record.facts.clone())));
        }
        decisions.extend(alloc.synced());
        info!(
            term = self.term,
            services = self.services.live().len(),
            "leading: allocator rebuilt from the services listed"
        );
        self.alloc = Some(alloc);
        self.carry_out(decisions).await;
    }

    async fn service(&mut self, item: watcher::Result<Event<Service>>) {
        // A Service that leaves the field selector's watch comes as DELETED with its
        // previous content (the API server's watch cache sends the old object, at the new
        // version): still a LoadBalancer here, whether it was deleted or retyped. One
        // with addresses in its status is looked up after the event is handled.
        let left = match &item {
            Ok(Event::Delete(s)) if is_load_balancer(s) && has_ingress(s) => {
                let key = ObjectKey::new(
                    s.metadata.namespace.as_deref().unwrap_or("default"),
                    s.metadata.name.as_deref().unwrap_or_default(),
                );
                self.services.live().contains_key(&key).then_some(key)
            }
            _ => None,
        };
        let item = match item {
            // A LoadBalancer no more leaves the field selector's watch as DELETED with its
            // new spec: decided once more (its status cleared), then forgotten below.
            Ok(Event::Delete(s)) if !is_load_balancer(&s) => Ok(Event::Apply(s)),
            // The fallback lists every Service: the others are not kept.
            Ok(Event::InitApply(s)) if !is_load_balancer(&s) => return,
            other => other,
        };
        let was_synced = self.services.synced();
        kube_source::step(
            Resource::Services,
            &mut self.services,
            &mut self.services_status,
            item,
            SystemTime::now(),
            record,
        );
        let mut decisions = Vec::new();
        let mut named = false;
        for (key, record) in self.services.take_changes() {
            self.written.remove(&key);
            named |= self
                .refused
                .as_ref()
                .is_some_and(|r| r.services.contains(&key));
            let gone = record.as_ref().is_some_and(|r| !r.facts.load_balancer);
            if let Some(alloc) = &mut self.alloc {
                decisions.extend(alloc.apply(&key, record.map(|r| r.facts)));
            }
            if gone {
                // The write below needs its version: looked up before it goes.
                let target = self.services.live().get(&key).map(|r| r.target.clone());
                self.services.delete(&key);
                if let Some(alloc) = &mut self.alloc {
                    alloc.apply(&key, None);
                }
                if let Some(target) = target {
                    self.carry_out_for(decisions.drain(..), Some(target)).await;
                }
            }
        }
        // The deletions of those no longer LoadBalancers are not decisions.
        self.services.take_changes();
        self.carry_out(decisions).await;
        if !was_synced && self.services.synced() {
            info!(services = self.services.live().len(), "services listed");
            if let Some(pools) = self.unjudged.take() {
                self.take(pools).await;
            }
            self.start().await;
        }
        if named {
            self.retry_refused().await;
        }
        if let Some(key) = left {
            self.clear_if_retyped(&key).await;
        }
        self.refresh();
    }

    /// After a LoadBalancer left the watch: if it still exists and is no LoadBalancer
    /// any more (a type change), its status addresses are cleared, as MetalLB clears
    /// the state of a Service it no longer serves; deleted, nothing is left to do.
    /// Leader only; a 409 (changed again meanwhile) is looked at again, a few times.
    async fn clear_if_retyped(&mut self, key: &ObjectKey) {
        for _ in 0..3 {
            if !self.may_write() {
                return;
            }
            let now = match self.writer.get(key).await {
                Ok(Some(s)) => s,
                Ok(None) => return,
                Err(e) => {
                    warn!(service = %key, error = %e, "a service that left the watch could not be read: its status is left as it is");
                    return;
                }
            };
            // A LoadBalancer again (or still): the watch brings it back.
            if is_load_balancer(&now) || !has_ingress(&now) {
                return;
            }
            let target = Target {
                key: key.clone(),
                uid: now.metadata.uid.clone(),
                resource_version: now.metadata.resource_version.clone(),
            };
            info!(service = %key, "no longer a LoadBalancer: its status addresses are cleared");
            if self.write(&target, &[]).await != WriteResult::Conflict {
                return;
            }
        }
    }

    async fn config(&mut self, text: Option<String>) {
        let Some(text) = text else {
            warn!("bgp-config not found: the config in force stays");
            return;
        };
        if self.last_text.as_ref() == Some(&text) {
            return;
        }
        self.last_text = Some(text.clone());
        // A newer config supersedes a refused or unjudged one, valid or not.
        self.refused = None;
        self.unjudged = None;
        match crate::config::parse(&text) {
            Err(errors) => {
                warn!(error = %errors, "bgp-config invalid: the last good one stays");
                self.metrics.reload(ReloadResult::Invalid);
                self.invalid = Some(errors.to_string());
            }
            Ok(config) => {
                self.invalid = None;
                self.take(config.pools).await;
            }
        }
        self.refresh();
    }

    /// Puts `pools` in force unless it orphans an address in use.
    async fn take(&mut self, pools: Vec<AddressPool>) {
        if self.pools.as_ref() == Some(&pools) {
            self.refused = None;
            return;
        }
        let refusal = match &mut self.alloc {
            Some(alloc) => match alloc.reload(&pools) {
                Ok(decisions) => {
                    self.accept(pools);
                    self.carry_out(decisions).await;
                    return;
                }
                Err(refusal) => refusal,
            },
            // What the statuses hold is known once the Services are listed: judged then.
            None if !self.services.synced() => {
                self.unjudged = Some(pools);
                return;
            }
            None => {
                let orphans = self.status_orphans(&pools);
                if orphans.is_empty() {
                    self.accept(pools);
                    self.start().await;
                    return;
                }
                Refusal { orphans }
            }
        };
        self.refuse(pools, refusal);
    }

    fn accept(&mut self, pools: Vec<AddressPool>) {
        let names: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
        info!(pools = ?names, "bgp-config address-pools in force");
        self.metrics.reload(ReloadResult::Applied);
        self.pools = Some(pools);
        self.refused = None;
    }

    fn refuse(&mut self, pools: Vec<AddressPool>, refusal: Refusal) {
        let services: BTreeSet<ObjectKey> = refusal.orphans.values().flatten().cloned().collect();
        // Tried again after a named Service changed, and refused for the same reason:
        // said once already.
        let same = self
            .refused
            .as_ref()
            .is_some_and(|r| r.pools == pools && r.refusal == refusal);
        if !same {
            warn!(reason = %refusal, "bgp-config refused: the last good one stays");
            self.metrics.reload(ReloadResult::Refused);
            if self.may_write() {
                for key in &services {
                    if let Some(r) = self.services.live().get(key) {
                        self.writer.refused_event(&r.target, &refusal);
                    }
                }
            }
        }
        self.refused = Some(Refused {
            pools,
            refusal,
            services,
        });
    }

    async fn retry_refused(&mut self) {
        let Some(pools) = self.refused.as_ref().map(|r| r.pools.clone()) else {
            return;
        };
        debug!("a service the refused bgp-config named changed: trying it again");
        self.take(pools).await;
    }

    /// What `pools` would orphan of the addresses the Services' statuses show: the
    /// question `Allocator::reload` asks, for a replica without an allocator. The
    /// statuses become one pool of single addresses; an allocator over it claims each
    /// Service's own (nothing new is handed out before `synced`), and its `orphans` is
    /// then the one rule of what a config would leave outside every pool.
    fn status_orphans(&self, pools: &[AddressPool]) -> BTreeMap<IpAddr, Vec<ObjectKey>> {
        let held: BTreeSet<IpAddr> = self
            .services
            .live()
            .values()
            .flat_map(|r| r.facts.status_ips.iter().copied())
            .collect();
        if held.is_empty() {
            return BTreeMap::new();
        }
        let statuses = AddressPool {
            name: "statuses".into(),
            protocol: Protocol::Layer2,
            cidrs: held.into_iter().map(IpNet::from).collect(),
            avoid_buggy_ips: false,
            auto_assign: false,
            bgp_advertisements: Vec::new(),
        };
        let mut probe = Allocator::new(&[statuses], self.classes.clone());
        for (key, record) in self.services.live() {
            probe.apply(key, Some(record.facts.clone()));
        }
        probe.orphans(pools)
    }

    async fn carry_out(&mut self, decisions: Vec<Decision>) {
        self.carry_out_for(decisions.into_iter(), None).await;
    }

    /// Logs, counts and writes decisions; `target` stands for a Service no longer in
    /// the store.
    async fn carry_out_for(
        &mut self,
        decisions: impl Iterator<Item = Decision>,
        target: Option<Target>,
    ) {
        let decisions: Vec<Decision> = decisions.collect();
        // One change can decide a Service twice (decided, then retried with the pending
        // ones): only its last write goes out, as one write per version can succeed.
        let last_write: BTreeMap<&ObjectKey, usize> = decisions
            .iter()
            .enumerate()
            .filter(|(_, d)| d.write.is_some())
            .map(|(i, d)| (&d.service, i))
            .collect();
        let last_write: BTreeSet<usize> = last_write.into_values().collect();
        for (i, d) in decisions.iter().enumerate() {
            if d.changed() {
                info!(service = %d.service, state = %describe(&d.state), "allocation decided");
            }
            if let Some(w) = &d.warning {
                warn!(service = %d.service, warning = %w,
                    "the request cannot be read: the service keeps its addresses");
            }
            let target = match self.services.live().get(&d.service) {
                Some(r) => r.target.clone(),
                None => match target.as_ref().filter(|t| t.key == d.service) {
                    Some(t) => t.clone(),
                    None => continue,
                },
            };
            if !self.may_write() {
                debug!(service = %d.service, "not leading: nothing written");
                return;
            }
            // Whether the Service's status now says what was decided (an address is
            // announced as allocated only then; a 409's watch event decides it again).
            let mut in_status = true;
            if let Some(ips) = &d.write {
                let sent = (target.resource_version.clone(), ips.clone());
                if !last_write.contains(&i) {
                    // A later decision of this batch writes it.
                    in_status = false;
                } else if self.written.get(&d.service) == Some(&sent) {
                    debug!(service = %d.service, "written already, its watch event is on its way");
                } else {
                    in_status = self.write(&target, ips).await == WriteResult::Ok;
                }
            }
            match d.event() {
                Some(event @ crate::alloc::AllocEvent::Allocated(_)) if in_status => {
                    if let crate::alloc::AllocEvent::Allocated(h) = &event {
                        self.metrics
                            .allocations
                            .with_label_values(&[&*h.pool])
                            .inc();
                    }
                    if self.may_write() {
                        self.writer.decision_event(&target, &event);
                    }
                }
                Some(event @ crate::alloc::AllocEvent::Failed(_)) => {
                    if let crate::alloc::AllocEvent::Failed(r) = &event {
                        self.metrics.failures.with_label_values(&[r.label()]).inc();
                    }
                    if self.may_write() {
                        self.writer.decision_event(&target, &event);
                    }
                }
                _ => {}
            }
        }
    }

    /// Writes one status and notes how it went.
    async fn write(&mut self, target: &Target, ips: &[IpAddr]) -> WriteResult {
        // A long batch of writes is progress: `/healthz` must not fail during it.
        self.metrics.beat();
        let result = self.writer.status(target, ips).await;
        self.metrics.write(result);
        match result {
            WriteResult::Ok => {
                debug!(service = %target.key, ips = ?ips, "status written");
                self.unwritten.remove(&target.key);
                self.written.insert(
                    target.key.clone(),
                    (target.resource_version.clone(), ips.to_vec()),
                );
            }
            WriteResult::Conflict => {
                self.unwritten.remove(&target.key);
            }
            WriteResult::Refused | WriteResult::Failed => {
                self.unwritten.insert(target.key.clone());
            }
        }
        result
    }

    /// Tries the failed writes again, with what the allocator holds now. A round that
    /// writes nothing doubles the wait before the next one (up to [`REWRITE_BACKOFF`]
    /// times [`REWRITE`]); [`Runner::arm_rewrite`] sets the timer after it.
    async fn rewrite(&mut self) {
        self.next_rewrite = None;
        if self.unwritten.is_empty() || !self.may_write() {
            return;
        }
        let keys: Vec<ObjectKey> = self.unwritten.iter().cloned().collect();
        let mut landed = false;
        for key in keys {
            if !self.may_write() {
                break;
            }
            let want = match self.alloc.as_ref().and_then(|a| a.state(&key)) {
                Some(State::Holds(h)) => h.ips.clone(),
                Some(State::Pending(_)) => Vec::new(),
                _ => {
                    self.unwritten.remove(&key);
                    continue;
                }
            };
            let Some(record) = self.services.live().get(&key) else {
                self.unwritten.remove(&key);
                continue;
            };
            if record.facts.status_ips == want {
                self.unwritten.remove(&key);
                continue;
            }
            let target = record.target.clone();
            let held = match self.alloc.as_ref().and_then(|a| a.state(&key)) {
                Some(State::Holds(h)) => Some(h.clone()),
                _ => None,
            };
            if self.write(&target, &want).await == WriteResult::Ok {
                landed = true;
                // Its IPAllocated waited for the status to say so.
                if let Some(h) = held {
                    self.metrics
                        .allocations
                        .with_label_values(&[&*h.pool])
                        .inc();
                    self.writer
                        .decision_event(&target, &crate::alloc::AllocEvent::Allocated(h));
                }
            }
        }
        self.rewrite_wait = if landed {
            self.rewrite_base
        } else {
            (self.rewrite_wait * 2).min(self.rewrite_base * REWRITE_BACKOFF)
        };
    }

    /// After a change: published now, or within [`PUBLISH`] of the last time.
    fn refresh(&mut self) {
        self.dirty = true;
        if tokio::time::Instant::now() >= self.next_publish {
            self.publish();
        }
    }

    /// The gauges and `/status`.
    fn publish(&mut self) {
        self.dirty = false;
        self.next_publish = tokio::time::Instant::now() + PUBLISH;
        let refused = match (&self.invalid, &self.refused) {
            (Some(e), _) => Some(format!("invalid: {e}")),
            (None, Some(r)) => Some(format!("refused: {}", r.refusal)),
            (None, None) => None,
        };
        self.metrics
            .config_refused
            .set(i64::from(refused.is_some()));
        let mut lines = Vec::new();
        let mut pending = 0;
        match &self.alloc {
            Some(alloc) => {
                self.metrics.pools(&alloc.usage());
                for (key, _, state) in alloc.services() {
                    let line = |state, ips: &[IpAddr], pool: Option<String>, reason| ServiceLine {
                        service: key.to_string(),
                        state,
                        ips: ips.iter().map(ToString::to_string).collect(),
                        pool,
                        reason,
                    };
                    match state {
                        State::Holds(h) => {
                            lines.push(line("holds", &h.ips, Some(h.pool.to_string()), None))
                        }
                        State::Pending(r) => {
                            pending += 1;
                            lines.push(line("pending", &[], None, Some(r.to_string())));
                        }
                        State::Waiting => lines.push(line("waiting", &[], None, None)),
                        State::NotOurs => {}
                    }
                }
            }
            // A follower decides nothing: no figures of its own.
            None => self.metrics.pools(&[]),
        }
        self.metrics.pending.set(pending);
        let pools = self
            .pools
            .as_ref()
            .map(|p| p.iter().map(|p| p.name.clone()).collect());
        let (leader, term, listed) = (
            self.alloc.is_some() || self.leading,
            self.term,
            self.services.synced(),
        );
        self.metrics.board(|b| {
            b.leader = leader;
            b.term = term;
            b.pools = pools;
            b.config_refused = refused;
            b.services_listed = listed;
            b.services = lines;
        });
    }
}

fn describe(state: &State) -> String {
    match state {
        State::NotOurs => "not ours".into(),
        State::Waiting => "waiting for the first list".into(),
        State::Holds(h) => {
            let ips: Vec<String> = h.ips.iter().map(ToString::to_string).collect();
            format!("holds {} from pool {}", ips.join(", "), h.pool)
        }
        State::Pending(r) => format!("pending: {r}"),
    }
}

/// Whether the Service's status lists any address.
fn has_ingress(s: &Service) -> bool {
    s.status
        .as_ref()
        .and_then(|st| st.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|i| !i.is_empty())
}
