//! What the leader writes: `status.loadBalancer.ingress` (a JSON merge patch carrying
//! the `metadata.resourceVersion` the decision was made on) and the Events on the
//! Service (`IPAllocated`, `AllocationFailed`, `ConfigRefused`).
//!
//! - A 409 is not retried: the Service changed under us, and its next watch event
//!   (which is on its way) is decided again, from what it now says.
//! - Events are queued for one publishing task that owns a kube-rs `Recorder`, as the
//!   speaker's (`sources::kube::events`); a full queue drops the Event and counts it.
//!
//! Must not: decide anything, or write while this replica does not lead (the runner
//! checks right before each write; [`Writer::status`] is handed that check's result).

use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Service};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::metrics::WriteResult;
use crate::alloc::{AllocEvent, Refusal};
use crate::sources::kube::events::{truncate, EventLoss, EventObserver};
use crate::sources::services::ObjectKey;

/// The `reportingController` of the allocator's Events.
pub const CONTROLLER: &str = "podcidr-speaker-allocator";

/// Events queued for the publishing task at most.
const QUEUE: usize = 256;

/// The Service a write or an Event is about, as last seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub key: ObjectKey,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// The merge patch of a status write: only the ingress, guarded by the version.
pub fn status_patch(resource_version: Option<&str>, ips: &[IpAddr]) -> serde_json::Value {
    let ingress: Vec<serde_json::Value> =
        ips.iter().map(|ip| json!({"ip": ip.to_string()})).collect();
    json!({
        "metadata": {"resourceVersion": resource_version},
        "status": {"loadBalancer": {"ingress": ingress}},
    })
}

/// Writes statuses and queues Events.
pub struct Writer {
    client: Client,
    events: mpsc::Sender<(Event, ObjectReference)>,
    observer: Arc<dyn EventObserver>,
}

impl Writer {
    /// Starts the Events' publishing task; it ends when the `Writer` is dropped.
    pub fn spawn(
        client: Client,
        instance: String,
        observer: Arc<dyn EventObserver>,
    ) -> (Writer, JoinHandle<()>) {
        let (events, mut queue) = mpsc::channel::<(Event, ObjectReference)>(QUEUE);
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: CONTROLLER.into(),
                instance: Some(instance),
            },
        );
        let task_observer = Arc::clone(&observer);
        let task = tokio::spawn(async move {
            while let Some((event, regarding)) = queue.recv().await {
                if let Err(e) = recorder.publish(&event, &regarding).await {
                    let loss = EventLoss::of(&e);
                    task_observer.not_written(loss);
                    warn!(error = %e, reason = %event.reason, loss = loss.as_str(),
                        "kubernetes event not published");
                }
            }
        });
        (
            Writer {
                client,
                events,
                observer,
            },
            task,
        )
    }

    /// The Service as the API server has it now (`None`: deleted).
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<Service>, kube::Error> {
        Api::<Service>::namespaced(self.client.clone(), &key.namespace)
            .get_opt(&key.name)
            .await
    }

    /// Patches the Service's status to `ips`.
    pub async fn status(&self, target: &Target, ips: &[IpAddr]) -> WriteResult {
        let api = Api::<Service>::namespaced(self.client.clone(), &target.key.namespace);
        let patch = status_patch(target.resource_version.as_deref(), ips);
        match api
            .patch_status(
                &target.key.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => WriteResult::Ok,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                debug!(service = %target.key, "status changed under us, the watch decides it again");
                WriteResult::Conflict
            }
            Err(e) => {
                let result = match e {
                    kube::Error::Api(_) => WriteResult::Refused,
                    _ => WriteResult::Failed,
                };
                warn!(service = %target.key, error = %e, "status not written");
                result
            }
        }
    }

    /// Queues the Event a decision calls for.
    pub fn decision_event(&self, target: &Target, event: &AllocEvent) {
        let (type_, reason, note) = match event {
            AllocEvent::Allocated(h) => {
                let ips: Vec<String> = h.ips.iter().map(ToString::to_string).collect();
                (
                    EventType::Normal,
                    "IPAllocated",
                    format!("assigned {} from pool {}", ips.join(", "), h.pool),
                )
            }
            AllocEvent::Failed(r) => (
                EventType::Warning,
                "AllocationFailed",
                format!("no address assigned: {r}"),
            ),
        };
        self.queue(target, type_, reason, note);
    }

    /// Queues `ConfigRefused` on a Service a refused reload names.
    pub fn refused_event(&self, target: &Target, refusal: &Refusal) {
        self.queue(
            target,
            EventType::Warning,
            "ConfigRefused",
            format!("the new bgp-config is not in force: {refusal}"),
        );
    }

    fn queue(&self, target: &Target, type_: EventType, reason: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(truncate(note)),
            action: "AllocateIP".into(),
            secondary: None,
        };
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Service".into()),
            namespace: Some(target.key.namespace.to_string()),
            name: Some(target.key.name.to_string()),
            uid: target.uid.clone(),
            ..ObjectReference::default()
        };
        if self.events.try_send((event, regarding)).is_err() {
            self.observer.not_written(EventLoss::QueueFull);
            debug!("event queue full, kubernetes event dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_carries_the_version_and_only_the_ingress() {
        let ips: Vec<IpAddr> = vec!["192.0.2.1".parse().unwrap(), "2001:db8::1".parse().unwrap()];
        assert_eq!(
            status_patch(Some("42"), &ips),
            json!({"metadata": {"resourceVersion": "42"},
                   "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"ip": "2001:db8::1"}]}}})
        );
        assert_eq!(
            status_patch(Some("7"), &[])["status"]["loadBalancer"]["ingress"],
            json!([])
        );
    }
}
