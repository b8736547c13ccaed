//! The LoadBalancer watchers: every Service (core/v1) and every EndpointSlice
//! (discovery.k8s.io/v1) of the cluster, folded into their facts and sent as
//! [`LbUpdate`] deltas.
//!
//! - Cluster-wide in both scopes: a `Local` Service's endpoints may be on any node, and
//!   a `Cluster` Service is announced from every node while any endpoint is ready.
//! - Only the facts are kept ([`ServiceFacts`], [`SliceFacts`]), never the objects: an
//!   edit that changes no fact (status conditions, annotations, ports) sends nothing.
//! - A relist (the first list, a 410 Gone, a reconnect) is applied at its end and sends
//!   exactly the differences against what was sent before: additions, changes, then
//!   deletions of the objects the new list no longer holds.
//! - [`LbUpdate::Synced`] is sent once, after the first complete list of both kinds
//!   (and the updates of those lists).
//! - An object whose facts cannot be read (no name; a Service with an
//!   `externalTrafficPolicy` Kubernetes does not know) is logged, counted in the
//!   resource's errors and skipped; its last good facts stay in force.
//! - API trouble is handled as for every other watcher ([`super::step`]): the facts
//!   stay, the resource is marked down, kube-rs retries.
//!
//! Started by [`super::run`] when [`super::KubeSourceConfig::load_balancers`] is set.

use std::time::SystemTime;

use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use super::store::Store;
use super::{step, Input, RetryBackoff};
use crate::sources::service_objects::{self, Names};
use crate::sources::services::{LbUpdate, ObjectKey, ServiceFacts, SliceFacts};
use crate::sources::{RefusedIngress, Resource, ResourceStatus};

/// The resources these watchers follow, for readiness and metrics.
pub const RESOURCES: [Resource; 2] = [Resource::Services, Resource::EndpointSlices];

/// The two cluster-wide watchers, as inputs of the kube source's loop.
pub(super) fn watchers(
    client: &Client,
    config: watcher::Config,
    retry: super::Retry,
) -> Vec<BoxStream<'static, Input>> {
    vec![
        watcher::watcher(Api::<Service>::all(client.clone()), config.clone())
            .backoff(RetryBackoff::new(retry))
            .map(|item| Input::Service(Box::new(item)))
            .boxed(),
        watcher::watcher(Api::<EndpointSlice>::all(client.clone()), config)
            .backoff(RetryBackoff::new(retry))
            .map(|item| Input::Slice(Box::new(item)))
            .boxed(),
    ]
}

/// The Services' and EndpointSlices' facts as sent, and what is still to send.
pub(super) struct LbWatch {
    services: Store<ServiceFacts, ObjectKey>,
    slices: Store<SliceFacts, ObjectKey>,
    synced_sent: bool,
    refused: RefusedIngress,
    /// The node names of every slice, shared.
    names: Names,
}

impl LbWatch {
    pub(super) fn new() -> Self {
        Self {
            services: Store::tracking(),
            slices: Store::tracking(),
            synced_sent: false,
            refused: RefusedIngress::default(),
            names: Names::default(),
        }
    }

    /// Applies one Service watcher event.
    pub(super) fn service(
        &mut self,
        item: watcher::Result<Event<Service>>,
        status: &mut ResourceStatus,
        now: SystemTime,
    ) {
        step(
            Resource::Services,
            &mut self.services,
            status,
            item,
            now,
            |s| service_objects::service_facts(s).map(|(_, facts)| facts),
        );
    }

    /// Applies one EndpointSlice watcher event.
    pub(super) fn slice(
        &mut self,
        item: watcher::Result<Event<EndpointSlice>>,
        status: &mut ResourceStatus,
        now: SystemTime,
    ) {
        let names = &mut self.names;
        step(
            Resource::EndpointSlices,
            &mut self.slices,
            status,
            item,
            now,
            |s| service_objects::slice_facts(s, names).map(|(_, facts)| facts),
        );
    }

    /// The updates to send, in order: the changes of the events applied since the last
    /// call, then [`LbUpdate::Synced`] once both kinds have been listed.
    pub(super) fn updates(&mut self) -> Vec<LbUpdate> {
        let mut out: Vec<LbUpdate> = self
            .services
            .take_changes()
            .into_iter()
            .map(|(key, facts)| LbUpdate::Service { key, facts })
            .collect();
        out.extend(
            self.slices
                .take_changes()
                .into_iter()
                .map(|(key, facts)| LbUpdate::Slice { key, facts }),
        );
        for update in &out {
            self.refused.observe(update);
        }
        if !self.synced_sent && self.services.synced() && self.slices.synced() {
            self.synced_sent = true;
            out.push(LbUpdate::Synced);
        }
        out
    }
}
