//! The LoadBalancer watchers: every Service (core/v1) of the cluster and the
//! EndpointSlices (discovery.k8s.io/v1) of the Services this speaker could announce
//! ([`super::lb_slices`]; every EndpointSlice with [`SliceScope::All`]), folded into
//! their facts and sent as [`LbUpdate`] deltas.
//!
//! - Cluster-wide in both scopes: a `Local` Service's endpoints may be on any node, and
//!   a `Cluster` Service is announced from every node while any endpoint is ready.
//! - Scoped, only the `type: LoadBalancer` Services are listed and watched (a field
//!   selector, [`LB_SERVICES`]; every Service if the API server refuses it, the others
//!   then skipped as if filtered): a type change away from LoadBalancer reaches the
//!   planner as the Service's deletion. Their facts say which ones count (class). With
//!   [`SliceScope::All`] every Service is.
//! - Only the facts are kept ([`ServiceFacts`], [`SliceFacts`]), never the objects: an
//!   edit that changes no fact (status conditions, annotations, ports) sends nothing.
//! - A relist (the first list, a 410 Gone, a reconnect) is applied at its end and sends
//!   exactly the differences against what was sent before: additions, changes, then
//!   deletions of the objects the new list no longer holds.
//! - [`LbUpdate::Synced`] is sent once, after the first complete list of both kinds
//!   (and the updates of those lists); scoped, after the Services' list and the lists
//!   of the slice watches it started.
//! - An object whose facts cannot be read (no name; a Service with an
//!   `externalTrafficPolicy` Kubernetes does not know) is logged, counted in the
//!   resource's errors and skipped; its last good facts stay in force.
//! - API trouble is handled as for every other watcher ([`super::step`]): the facts
//!   stay, the resource is marked down, kube-rs retries.
//!
//! Started by [`super::run`] when [`super::KubeSourceConfig::load_balancers`] is set.

use std::time::SystemTime;

use futures::stream::{self, AbortHandle, Abortable, BoxStream};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tracing::warn;

use super::lb_slices::{ScopedSlices, WatchId, WatchOrder};
use super::store::Store;
use super::{step, Input, RetryBackoff, SliceScope};
use crate::sources::service_objects::{self, Names};
use crate::sources::services::{LbUpdate, ObjectKey, ServiceFacts, SliceFacts};
use crate::sources::{RefusedIngress, Resource, ResourceStatus};

/// The resources these watchers follow, for readiness and metrics.
pub const RESOURCES: [Resource; 2] = [Resource::Services, Resource::EndpointSlices];

/// The watch id of the one cluster-wide EndpointSlice watch of [`SliceScope::All`];
/// the scoped watches get ids above it.
const ALL_SLICES: WatchId = 0;

/// The field selector of the scoped Services' watch: only `type: LoadBalancer`. The
/// API server registers `spec.type` (with `spec.clusterIP` and the metadata fields) as
/// a field label of Services since Kubernetes 1.31 (`AddFieldLabelConversionsForService`);
/// an older one answers 400 "field label not supported", and the watch falls back to
/// every Service ([`service_watcher`]).
pub const LB_SERVICES: &str = "spec.type=LoadBalancer";

/// The watchers started with the source: the Services (scoped: the LoadBalancer ones,
/// [`LB_SERVICES`]; with [`SliceScope::All`] every one, as before) and with
/// [`SliceScope::All`] every EndpointSlice (scoped, the slice watches are started by
/// [`LbWatch`]'s orders).
pub(super) fn watchers(
    client: &Client,
    config: watcher::Config,
    retry: super::Retry,
    scope: &SliceScope,
) -> Vec<BoxStream<'static, Input>> {
    let all = *scope == SliceScope::All;
    let mut out = vec![service_watcher(client.clone(), config.clone(), retry, !all)
        .map(|item| Input::Service(Box::new(item)))
        .boxed()];
    if all {
        out.push(slice_watcher(client, config, retry, ALL_SLICES));
    }
    out
}

pub type ServiceEvents = BoxStream<'static, watcher::Result<Event<Service>>>;

/// The Services' watch. `only_load_balancers`: with the [`LB_SERVICES`] field selector,
/// which the API server applies to the watch too: a Service that stops being a
/// LoadBalancer comes as DELETED, one that becomes one as ADDED, so the facts, the
/// planner and the slice watches see exactly what they would with every Service (a
/// non-LoadBalancer Service is never announced nor watched for slices), without the
/// list and events of the others. If the API server refuses the selector (400), that
/// refusal is not passed on (nothing is down) and every Service is watched from then
/// on. Also the `allocate` role's Service watch.
pub fn service_watcher(
    client: Client,
    config: watcher::Config,
    retry: super::Retry,
    only_load_balancers: bool,
) -> ServiceEvents {
    let plain = move |config: watcher::Config| -> ServiceEvents {
        watcher::watcher(Api::<Service>::all(client.clone()), config)
            .backoff(RetryBackoff::new(retry))
            .boxed()
    };
    if !only_load_balancers {
        return plain(config);
    }
    let filtered = plain(config.clone().fields(LB_SERVICES));
    stream::unfold(
        (filtered, Some((plain, config))),
        |(mut events, mut fallback)| async move {
            loop {
                let item = events.next().await?;
                if selector_refused(&item) {
                    if let Some((plain, config)) = fallback.take() {
                        warn!(selector = LB_SERVICES, error = ?item.err(),
                            "the api server refuses the services field selector: watching every service");
                        events = plain(config);
                        continue;
                    }
                }
                return Some((item, (events, fallback)));
            }
        },
    )
    .boxed()
}

/// Scoped, a Service that is not `type: LoadBalancer` counts as absent: what the
/// [`LB_SERVICES`] field selector gives, so that without it (the fallback) the facts
/// and updates are the same, and the other Services' facts are neither kept here nor
/// sent to the planner (9,900 of them: 27.6 -> 20.6 MiB of RSS, BENCHMARKS.md 7d).
/// One listed is skipped; one that stops being a LoadBalancer is deleted.
fn only_load_balancers(
    item: watcher::Result<Event<Service>>,
) -> Option<watcher::Result<Event<Service>>> {
    match item {
        Ok(Event::InitApply(s)) if !service_objects::is_load_balancer(&s) => None,
        Ok(Event::Apply(s)) if !service_objects::is_load_balancer(&s) => Some(Ok(Event::Delete(s))),
        other => Some(other),
    }
}

/// The API server refused a list as a bad request: with our parameters, the field
/// selector (an API server that does not know `spec.type` as a Service field label).
fn selector_refused(item: &watcher::Result<Event<Service>>) -> bool {
    matches!(item, Err(watcher::Error::InitialListFailed(kube::Error::Api(s))) if s.code == 400)
}

/// One cluster-wide EndpointSlice watcher (with `config`'s selector), its events
/// tagged with `id`.
fn slice_watcher(
    client: &Client,
    config: watcher::Config,
    retry: super::Retry,
    id: WatchId,
) -> BoxStream<'static, Input> {
    watcher::watcher(Api::<EndpointSlice>::all(client.clone()), config)
        .backoff(RetryBackoff::new(retry))
        .map(move |item| Input::Slice(id, Box::new(item)))
        .boxed()
}

/// Carries out one [`WatchOrder`]: a started watch is returned, to be polled with the
/// other inputs, and its abort handle kept in `running`; a stopped one is aborted (its
/// stream ends, its connection is dropped).
pub(super) fn carry_out(
    order: WatchOrder,
    client: &Client,
    config: &watcher::Config,
    retry: super::Retry,
    running: &mut std::collections::BTreeMap<WatchId, AbortHandle>,
) -> Option<BoxStream<'static, Input>> {
    match order {
        WatchOrder::Start { id, selector } => {
            let (handle, registration) = AbortHandle::new_pair();
            running.insert(id, handle);
            let watch = slice_watcher(client, config.clone().labels(&selector), retry, id);
            Some(Abortable::new(watch, registration).boxed())
        }
        WatchOrder::Stop { id } => {
            if let Some(handle) = running.remove(&id) {
                handle.abort();
            }
            None
        }
    }
}

/// The Services' and EndpointSlices' facts as sent, and what is still to send.
pub(super) struct LbWatch {
    services: Store<ServiceFacts, ObjectKey>,
    slices: Slices,
    synced_sent: bool,
    refused: RefusedIngress,
}

/// The EndpointSlices' side, by [`SliceScope`].
enum Slices {
    /// One watch of every slice.
    All {
        store: Store<SliceFacts, ObjectKey>,
        /// The node names of every slice, shared.
        names: Names,
    },
    Scoped(Box<ScopedSlices>),
}

impl LbWatch {
    pub(super) fn new(scope: &SliceScope) -> Self {
        let slices = match scope {
            SliceScope::All => Slices::All {
                store: Store::tracking(),
                names: Names::default(),
            },
            SliceScope::LoadBalancers {
                classes,
                selector_bytes,
            } => Slices::Scoped(Box::new(ScopedSlices::new(
                classes.clone(),
                *selector_bytes,
                ALL_SLICES + 1,
            ))),
        };
        Self {
            services: Store::tracking(),
            slices,
            synced_sent: false,
            refused: RefusedIngress::default(),
        }
    }

    /// Applies one Service watcher event.
    pub(super) fn service(
        &mut self,
        item: watcher::Result<Event<Service>>,
        status: &mut ResourceStatus,
        now: SystemTime,
    ) {
        let item = match &self.slices {
            Slices::Scoped(_) => match only_load_balancers(item) {
                Some(item) => item,
                None => return,
            },
            Slices::All { .. } => item,
        };
        step(
            Resource::Services,
            &mut self.services,
            status,
            item,
            now,
            |s| service_objects::service_facts(s).map(|(_, facts)| facts),
        );
        if let Slices::Scoped(scoped) = &mut self.slices {
            scoped.services_changed(self.services.take_changes());
        }
    }

    /// Applies one event of the EndpointSlice watch `id`.
    pub(super) fn slice(
        &mut self,
        id: WatchId,
        item: watcher::Result<Event<EndpointSlice>>,
        status: &mut ResourceStatus,
        now: SystemTime,
    ) {
        match &mut self.slices {
            Slices::All { store, names } => {
                step(Resource::EndpointSlices, store, status, item, now, |s| {
                    service_objects::slice_facts(s, names).map(|(_, facts)| facts)
                });
            }
            Slices::Scoped(scoped) => {
                scoped.slice(id, item, status, now);
                // One watch's list is not all of them: synced when every watch has
                // listed, and from then on.
                status.synced = self.synced_sent || self.services.synced() && scoped.listed();
            }
        }
    }

    /// The EndpointSlices count as listed: the cluster-wide watch listed, or (scoped)
    /// the Services listed and every slice watch they asked for.
    pub(super) fn slices_listed(&self) -> bool {
        match &self.slices {
            Slices::All { store, .. } => store.synced(),
            Slices::Scoped(scoped) => self.synced_sent || self.services.synced() && scoped.listed(),
        }
    }

    /// Scoped, and no slice watch is needed (no Service to announce): nothing can be
    /// down.
    pub(super) fn nothing_to_watch(&self) -> bool {
        match &self.slices {
            Slices::All { .. } => false,
            Slices::Scoped(scoped) => self.services.synced() && scoped.watch_count() == 0,
        }
    }

    /// The slice watches to start and stop (scoped only).
    pub(super) fn watch_orders(&mut self) -> Vec<WatchOrder> {
        match &mut self.slices {
            Slices::All { .. } => Vec::new(),
            Slices::Scoped(scoped) => scoped.take_orders(),
        }
    }

    /// The updates to send, in order: the changes of the events applied since the last
    /// call, then [`LbUpdate::Synced`] once both kinds have been listed.
    pub(super) fn updates(&mut self) -> Vec<LbUpdate> {
        let mut out: Vec<LbUpdate> = match &mut self.slices {
            Slices::All { store, .. } => {
                let mut out: Vec<LbUpdate> = self
                    .services
                    .take_changes()
                    .into_iter()
                    .map(|(key, facts)| LbUpdate::Service { key, facts })
                    .collect();
                out.extend(
                    store
                        .take_changes()
                        .into_iter()
                        .map(|(key, facts)| LbUpdate::Slice { key, facts }),
                );
                out
            }
            Slices::Scoped(scoped) => scoped.take_updates(),
        };
        for update in &out {
            self.refused.observe(update);
        }
        if !self.synced_sent && self.services.synced() && self.slices_listed() {
            self.synced_sent = true;
            out.push(LbUpdate::Synced);
        }
        out
    }
}
