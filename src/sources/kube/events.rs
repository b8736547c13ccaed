//! Kubernetes Events (events.k8s.io/v1) for findings about a node: drift between its
//! Node and CiliumNode, a refused pod CIDR. Attached to the Node, so they show in
//! `kubectl describe node`.
//!
//! Publishing never blocks the watchers: [`KubeEvents::publish`] queues the report for a
//! task that owns a kube-rs `Recorder`; a full queue drops the event (it is logged anyway).
//! Findings that concern no node (IPAM mode, view warnings) are only logged. Every
//! Event not written (dropped, refused by the API server, or its request failed) is
//! told to an [`EventObserver`] (the daemon counts them in a metric) with a
//! [`EventLoss`] reason.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Client;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use tracing::{debug, warn};

use crate::sources::model::CidrList;
use crate::sources::{EventSink, Report};

/// The `reportingController` of our Events.
pub const CONTROLLER: &str = "podcidr-speaker";

/// Queue length between the watchers and the publishing task.
const QUEUE: usize = 64;

/// Events API size limit for `note` (1 kB).
const NOTE_LIMIT: usize = 1024;

/// Why a Kubernetes Event was not written: a bounded label value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventLoss {
    /// The queue to the publishing task was full: dropped without a request.
    QueueFull,
    /// The API server answered with an error status (RBAC, validation, quota...).
    Refused,
    /// The request got no answer (connection, timeout, undecodable reply).
    Failed,
}

impl EventLoss {
    pub const ALL: [EventLoss; 3] = [EventLoss::QueueFull, EventLoss::Refused, EventLoss::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::QueueFull => "queue_full",
            Self::Refused => "refused",
            Self::Failed => "failed",
        }
    }

    /// The reason of a failed publish.
    pub fn of(error: &kube::Error) -> EventLoss {
        match error {
            kube::Error::Api(_) => EventLoss::Refused,
            _ => EventLoss::Failed,
        }
    }
}

/// Told of every Event not written. Must not block: `publish` calls it inline.
pub trait EventObserver: Send + Sync + 'static {
    fn not_written(&self, loss: EventLoss);
}

/// An observer that counts nothing (tests, tools).
#[derive(Clone, Copy, Debug, Default)]
pub struct Unobserved;

impl EventObserver for Unobserved {
    fn not_written(&self, _loss: EventLoss) {}
}

/// An [`EventSink`] that publishes through a kube-rs `Recorder` on its own task.
pub struct KubeEvents {
    queue: mpsc::Sender<Report>,
    observer: Arc<dyn EventObserver>,
}

impl std::fmt::Debug for KubeEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeEvents")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl KubeEvents {
    /// Starts the publishing task; it ends when the `KubeEvents` is dropped.
    /// `instance` is the reporting instance (the pod or node name); `observer` is told
    /// of every Event not written.
    pub fn spawn(
        client: Client,
        instance: Option<String>,
        observer: Arc<dyn EventObserver>,
    ) -> (Self, JoinHandle<()>) {
        Self::with_queue(client, instance, observer, QUEUE)
    }

    /// [`KubeEvents::spawn`] with a queue of `queue` reports (tests fill a short one).
    pub fn with_queue(
        client: Client,
        instance: Option<String>,
        observer: Arc<dyn EventObserver>,
        queue: usize,
    ) -> (Self, JoinHandle<()>) {
        let (queue, mut reports) = mpsc::channel::<Report>(queue.max(1));
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: CONTROLLER.into(),
                instance,
            },
        );
        let task_observer = Arc::clone(&observer);
        let task = tokio::spawn(async move {
            while let Some(report) = reports.recv().await {
                let Some((event, regarding)) = event_for(&report) else {
                    continue;
                };
                if let Err(e) = recorder.publish(&event, &regarding).await {
                    let loss = EventLoss::of(&e);
                    task_observer.not_written(loss);
                    warn!(error = %e, reason = %event.reason, loss = loss.as_str(),
                        "kubernetes event not published");
                }
            }
        });
        (Self { queue, observer }, task)
    }
}

impl EventSink for KubeEvents {
    fn publish(&self, report: &Report) {
        if event_for(report).is_none() {
            return;
        }
        if self.queue.try_send(report.clone()).is_err() {
            self.observer.not_written(EventLoss::QueueFull);
            debug!("event queue full, kubernetes event dropped");
        }
    }
}

/// The Event for a finding about one node, and the Node it is about.
pub fn event_for(report: &Report) -> Option<(Event, ObjectReference)> {
    let node_ref = |name: &str, uid: Option<&String>| ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.to_owned()),
        uid: uid.cloned(),
        ..ObjectReference::default()
    };
    match report {
        Report::Drift {
            node,
            uid,
            drift,
            ipam,
        } => {
            let announced = format!("the {}'s", ipam.object());
            let note = format!(
                "Node spec.podCIDRs {} differ from CiliumNode spec.ipam.podCIDRs {}; \
                 ipam {ipam}: {announced} are announced",
                CidrList(&drift.node_cidrs),
                CidrList(&drift.cilium_cidrs),
            );
            Some((
                Event {
                    type_: EventType::Warning,
                    reason: "PodCIDRDrift".into(),
                    note: Some(truncate(note)),
                    action: "ComparePodCIDRs".into(),
                    secondary: None,
                },
                node_ref(node, uid.as_ref()),
            ))
        }
        Report::DriftResolved { node } => Some((
            Event {
                type_: EventType::Normal,
                reason: "PodCIDRDriftResolved".into(),
                note: Some("Node and CiliumNode pod CIDRs agree".into()),
                action: "ComparePodCIDRs".into(),
                secondary: None,
            },
            node_ref(node, None),
        )),
        Report::Refused {
            node,
            prefix,
            refusal,
        } => Some((
            Event {
                type_: EventType::Warning,
                reason: "PodCIDRRefused".into(),
                note: Some(truncate(format!("{prefix} is not announced: {refusal}"))),
                action: "AnnouncePodCIDR".into(),
                secondary: None,
            },
            node_ref(node, None),
        )),
        Report::Stopping {
            node,
            uid,
            decision,
            note,
        } => Some((
            Event {
                type_: EventType::Normal,
                reason: "SpeakerStopping".into(),
                note: Some(truncate(format!("{decision}: {note}"))),
                action: "DecideStop".into(),
                secondary: None,
            },
            node_ref(node, uid.as_ref()),
        )),
        Report::CiliumBgpConflict { node, uid, note } => Some((
            Event {
                type_: EventType::Warning,
                reason: "CiliumBGPConflict".into(),
                note: Some(truncate(note.clone())),
                action: "CompareSpeakers".into(),
                secondary: None,
            },
            node_ref(node, uid.as_ref()),
        )),
        Report::CiliumBgpConflictResolved { node, uid } => Some((
            Event {
                type_: EventType::Normal,
                reason: "CiliumBGPConflictResolved".into(),
                note: Some(
                    "cilium-config no longer turns Cilium's embedded BGP speaker on: every \
                     session may start"
                        .into(),
                ),
                action: "CompareSpeakers".into(),
                secondary: None,
            },
            node_ref(node, uid.as_ref()),
        )),
        Report::Ipam(_) | Report::IpamResolved { .. } | Report::Warning(_) => None,
    }
}

/// A note cut to the Events API's limit (1 kB).
pub fn truncate(mut note: String) -> String {
    if note.len() > NOTE_LIMIT {
        let mut end = NOTE_LIMIT - 3;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str("...");
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::model::{Drift, IpamMode};

    #[test]
    fn drift_event_is_a_warning_on_the_node_with_both_values() {
        let report = Report::Drift {
            node: "master1".into(),
            uid: Some("uid-1".into()),
            drift: Drift {
                node_cidrs: vec!["10.5.112.0/24".parse().unwrap()],
                cilium_cidrs: vec!["10.5.113.0/24".parse().unwrap()],
            },
            ipam: IpamMode::ClusterPool,
        };
        let (event, regarding) = event_for(&report).unwrap();
        assert_eq!(event.type_, EventType::Warning);
        assert_eq!(event.reason, "PodCIDRDrift");
        assert_eq!(
            event.note.as_deref(),
            Some(
                "Node spec.podCIDRs [10.5.112.0/24] differ from CiliumNode spec.ipam.podCIDRs \
                 [10.5.113.0/24]; ipam cluster-pool: the CiliumNode's are announced"
            )
        );
        assert_eq!(regarding.kind.as_deref(), Some("Node"));
        assert_eq!(regarding.api_version.as_deref(), Some("v1"));
        assert_eq!(regarding.name.as_deref(), Some("master1"));
        assert_eq!(regarding.uid.as_deref(), Some("uid-1"));
        assert_eq!(regarding.namespace, None);
    }

    #[test]
    fn view_wide_findings_are_not_events() {
        let report = Report::Ipam(crate::sources::IpamError::Unsupported { mode: "eni".into() });
        assert!(event_for(&report).is_none());
    }

    #[test]
    fn long_notes_are_cut_to_the_api_limit() {
        let cut = truncate("é".repeat(NOTE_LIMIT));
        assert!(
            cut.len() <= NOTE_LIMIT && cut.ends_with("..."),
            "{}",
            cut.len()
        );
        assert_eq!(truncate("short".into()), "short");
    }
}
