//! The LoadBalancer facts the planner needs, per Service and per EndpointSlice, and the
//! incremental updates that carry them from a source to the daemon.
//!
//! Unlike the node facts (sent as a whole [`super::ClusterState`] after each change),
//! Services and EndpointSlices travel as one [`LbUpdate`] per object that changed: a
//! cluster can hold tens of thousands of them, and the cost of one event must not grow
//! with their number. A source keeps only these facts (never whole objects), sends an
//! update only when an object's facts change (a status-only or annotation-only edit
//! sends nothing), and after a relist (410 Gone, reconnect) sends exactly the
//! differences against what it sent before: the deletions of objects that are gone
//! and the changes of those that differ.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

/// A namespaced object's identity: `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl ObjectKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: Arc::from(namespace),
            name: Arc::from(name),
        }
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// `spec.externalTrafficPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum TrafficPolicy {
    /// `Cluster` (also the meaning of an absent field).
    #[default]
    Cluster,
    /// `Local`: announced only from nodes that host a ready endpoint.
    Local,
}

/// What one Service says that the LoadBalancer planner needs. Sent for every Service,
/// whatever its type, so that a type change away from LoadBalancer withdraws.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceFacts {
    /// `spec.type == LoadBalancer`.
    pub load_balancer: bool,
    /// `spec.loadBalancerClass`, `None` when unset.
    pub class: Option<Arc<str>>,
    pub policy: TrafficPolicy,
    /// Every `status.loadBalancer.ingress[].ip` that parses as an IP address, in the
    /// object's order, without duplicates.
    pub ingress_ips: Vec<IpAddr>,
    /// Ingress entries that carry no usable IP (a `hostname` only, or an `ip` that does
    /// not parse), as written, for `plan`/`doctor` and a log line.
    pub ingress_refused: Vec<String>,
}

/// What one EndpointSlice (discovery.k8s.io/v1) says that the planner needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SliceFacts {
    /// The Service it belongs to: its namespace and its `kubernetes.io/service-name`
    /// label. `None` when the label is missing (such a slice counts for no Service).
    pub service: Option<ObjectKey>,
    /// Ready endpoints per node (`nodeName`): `conditions.ready` true or unset, and
    /// `conditions.terminating` not true. Nodes with no ready endpoint are absent.
    pub ready_by_node: BTreeMap<Arc<str>, u32>,
    /// Ready endpoints without a `nodeName`: they count for `Cluster` Services, and for
    /// no node under `Local`.
    pub ready_without_node: u32,
}

impl SliceFacts {
    /// Ready endpoints anywhere.
    pub fn ready(&self) -> u64 {
        self.ready_by_node
            .values()
            .map(|n| u64::from(*n))
            .sum::<u64>()
            + u64::from(self.ready_without_node)
    }
}

/// One change to the LoadBalancer facts. `None` means the object is gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LbUpdate {
    Service {
        key: ObjectKey,
        facts: Option<ServiceFacts>,
    },
    Slice {
        key: ObjectKey,
        facts: Option<SliceFacts>,
    },
    /// Every Service and EndpointSlice has been listed once (after the updates of that
    /// first list). Sent once per source run; until then the planner announces no LB
    /// route, so a restart never withdraws routes of Services not yet seen.
    Synced,
}
