//! What happens to this node's routes when a peer session ends: the stop decision (is
//! the speaker restarting, or is the node leaving?), what each route class gets from it,
//! and what one session does with that (stop now, or drain first and with which end).
//!
//! Pure: the facts come in (what the cluster says about the node at the moment of the
//! stop, whether graceful restart is in force on the session, the grace period) and the
//! decision goes out as a value. The peer task carries it out through
//! [`crate::routes::drain::Drain`]; the daemon logs, counts and shows it.
//!
//! Why the classes differ (deploy/README.md, "Node lifecycle", says the same for
//! operators):
//! - a pod CIDR has no other path: withdrawing it while the node's pods still run cuts
//!   them off, keeping it while the node is gone blackholes nothing that works anyway.
//!   It is withdrawn only when the node is certainly leaving.
//! - a LoadBalancer /32 is announced by several nodes and the switch spreads flows over
//!   them: a path kept through a node that goes away blackholes its share of new
//!   connections for the whole graceful-restart time, while draining it early only moves
//!   flows to the other paths. It is drained whenever the node may be leaving, which
//!   includes a cordon (drain + reboot looks the same as cordon + upgrade at the moment
//!   of the stop).

use super::mode::AnnounceMode;
use crate::bgp::session::StopReason;
use crate::sources::model::NodeLifecycle;
use std::fmt;
use std::time::Duration;

/// How a peer task ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shutdown {
    /// NOTIFICATION Cease/Administrative Shutdown with this RFC 9003 message: the peer
    /// drops our routes.
    Admin(String),
    /// This speaker is restarting: with graceful restart in force on the session at that
    /// moment the connection is closed without a NOTIFICATION, so the peer keeps our
    /// routes as stale until we are back (RFC 4724 section 4); otherwise a graceful
    /// shutdown (RFC 8326) and Cease/Administrative Shutdown with this RFC 9003 message.
    /// The session decides, so a caller never acts on a status that lags behind the
    /// session (a SIGTERM just after Established, while the initial table is being
    /// written).
    Restart(String),
    /// The speaker stops and the node may be leaving: each route class as `classes`
    /// says (a drained class gets the graceful shutdown whatever graceful restart says).
    Leave {
        message: String,
        classes: ClassStops,
    },
    /// The peer was removed from the configuration: Cease/Peer De-configured.
    Deconfigured,
}

impl Shutdown {
    /// The reason to stop with at once, without a drain (a second request while one
    /// runs): a restart or a partial leave closes under graceful restart where it is in
    /// force, a full leave ends with the Cease.
    pub fn reason_now(&self) -> StopReason {
        match self {
            Shutdown::Admin(m) => StopReason::AdminShutdown(m.clone()),
            Shutdown::Restart(m) => StopReason::Restart(m.clone()),
            Shutdown::Leave { message, classes } if classes.all_drained() => {
                StopReason::AdminShutdown(message.clone())
            }
            Shutdown::Leave { message, .. } => StopReason::Restart(message.clone()),
            Shutdown::Deconfigured => StopReason::PeerDeconfigured,
        }
    }
}

/// What to do at the stop: the `--on-stop` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StopPolicy {
    /// Decide from what the cluster says about the node at that moment.
    #[default]
    Auto,
    /// Always a restart (graceful restart keeps every route).
    Restart,
    /// Always leaving (every route drained and withdrawn).
    Leave,
}

impl StopPolicy {
    pub const NAMES: [&'static str; 3] = ["auto", "restart", "leave"];

    pub fn as_str(self) -> &'static str {
        match self {
            StopPolicy::Auto => "auto",
            StopPolicy::Restart => "restart",
            StopPolicy::Leave => "leave",
        }
    }
}

impl std::str::FromStr for StopPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<StopPolicy, String> {
        match s {
            "auto" => Ok(StopPolicy::Auto),
            "restart" => Ok(StopPolicy::Restart),
            "leave" => Ok(StopPolicy::Leave),
            other => Err(format!(
                "\"{other}\" is not one of {}",
                StopPolicy::NAMES.join(", ")
            )),
        }
    }
}

/// What the cluster says about this node at the moment of the stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeAtStop {
    /// No answer: no node name, the API server unreachable, or the node was never seen.
    /// Nothing says the node leaves, so this is a restart.
    Unknown,
    /// The Node object does not exist (any more).
    Gone,
    Present(NodeLifecycle),
}

impl NodeAtStop {
    /// What the last cluster state says of the node this speaker's routes belong to.
    /// In local mode (the DaemonSet) that is its own node: its lifecycle facts when it is
    /// there; gone when it is not but was seen before (a Node that never showed up says
    /// nothing: the name may be wrong, or the source not synced). In cluster mode the
    /// speaker announces every node's routes, none of them its own node's: where it
    /// runs says nothing about them, so nothing is known (a restart).
    pub fn from_state(
        mode: AnnounceMode,
        lifecycle: Option<&NodeLifecycle>,
        seen_before: bool,
    ) -> NodeAtStop {
        match (mode, lifecycle) {
            (AnnounceMode::Cluster, _) => NodeAtStop::Unknown,
            (AnnounceMode::Local, Some(l)) => NodeAtStop::Present(l.clone()),
            (AnnounceMode::Local, None) if seen_before => NodeAtStop::Gone,
            (AnnounceMode::Local, None) => NodeAtStop::Unknown,
        }
    }
}

/// Why the node is taken to be leaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LeaveReason {
    /// `--on-stop leave`.
    Forced,
    /// The Node object is gone.
    NodeDeleted,
    /// The Node has a deletion timestamp.
    NodeDeleting,
    /// The `node.kubernetes.io/out-of-service` taint: the node is shut down for good
    /// (non-graceful node shutdown).
    OutOfService,
    /// The kubelet's graceful node shutdown is under way (its Ready condition says
    /// "node is shutting down").
    ShuttingDown,
    /// A node autoscaler chose the node for removal (cluster-autoscaler's
    /// `ToBeDeletedByClusterAutoscaler` taint, Karpenter's disruption taint).
    ScaleDown,
}

impl LeaveReason {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaveReason::Forced => "forced",
            LeaveReason::NodeDeleted => "node-deleted",
            LeaveReason::NodeDeleting => "node-deleting",
            LeaveReason::OutOfService => "out-of-service",
            LeaveReason::ShuttingDown => "shutting-down",
            LeaveReason::ScaleDown => "scale-down",
        }
    }
}

/// The stop decision: restart, leaving, or cordoned (maybe leaving).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopKind {
    /// The node stays: a new speaker is back in seconds (a rolling upgrade, a crash).
    Restart,
    /// The node is cordoned (`spec.unschedulable`) and nothing more: a drain before a
    /// reboot, or a cordon around an upgrade. Cordon alone is not a reboot signal.
    Cordoned,
    Leaving(LeaveReason),
}

impl StopKind {
    /// A bounded label value for metrics and `/status`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopKind::Restart => "restart",
            StopKind::Cordoned => "cordoned",
            StopKind::Leaving(r) => r.as_str(),
        }
    }

    /// What each route class gets.
    pub fn classes(self) -> ClassStops {
        match self {
            StopKind::Restart => ClassStops {
                pod_cidrs: ClassStop::Keep,
                load_balancer: ClassStop::Keep,
            },
            StopKind::Cordoned => ClassStops {
                pod_cidrs: ClassStop::Keep,
                load_balancer: ClassStop::Drain,
            },
            StopKind::Leaving(_) => ClassStops {
                pod_cidrs: ClassStop::Drain,
                load_balancer: ClassStop::Drain,
            },
        }
    }

    /// The RFC 9003 message of the Cease, and the log line's words.
    pub fn describe(self) -> &'static str {
        match self {
            StopKind::Restart => "restarting",
            StopKind::Cordoned => "node cordoned",
            StopKind::Leaving(LeaveReason::Forced) => "node leaving",
            StopKind::Leaving(LeaveReason::NodeDeleted) => "node deleted",
            StopKind::Leaving(LeaveReason::NodeDeleting) => "node being deleted",
            StopKind::Leaving(LeaveReason::OutOfService) => "node out of service",
            StopKind::Leaving(LeaveReason::ShuttingDown) => "node shutting down",
            StopKind::Leaving(LeaveReason::ScaleDown) => "node removed by the autoscaler",
        }
    }

    /// The [`Shutdown`] every peer task gets for this decision.
    pub fn shutdown(self, message: &str) -> Shutdown {
        match self {
            StopKind::Restart => Shutdown::Restart(message.to_owned()),
            kind => Shutdown::Leave {
                message: format!("{message}: {}", kind.describe()),
                classes: kind.classes(),
            },
        }
    }
}

impl fmt::Display for StopKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The taint cluster-autoscaler puts on a node it is about to delete.
pub const AUTOSCALER_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
/// Karpenter's (v1) taint on a node it disrupts (consolidation, expiry, drift).
pub const KARPENTER_TAINT: &str = "karpenter.sh/disrupted";
/// The taint of a non-graceful node shutdown (Kubernetes 1.28 GA).
pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// The stop decision, from the flag and what the cluster says about the node now. The
/// strongest signal wins: a node being deleted that is also cordoned is leaving.
pub fn decide(policy: StopPolicy, node: &NodeAtStop) -> StopKind {
    match policy {
        StopPolicy::Restart => return StopKind::Restart,
        StopPolicy::Leave => return StopKind::Leaving(LeaveReason::Forced),
        StopPolicy::Auto => {}
    }
    let n = match node {
        NodeAtStop::Unknown => return StopKind::Restart,
        NodeAtStop::Gone => return StopKind::Leaving(LeaveReason::NodeDeleted),
        NodeAtStop::Present(n) => n,
    };
    let has = |key: &str| n.taints.iter().any(|t| t == key);
    if n.deleting {
        StopKind::Leaving(LeaveReason::NodeDeleting)
    } else if has(OUT_OF_SERVICE_TAINT) {
        StopKind::Leaving(LeaveReason::OutOfService)
    } else if n.shutting_down {
        StopKind::Leaving(LeaveReason::ShuttingDown)
    } else if has(AUTOSCALER_TAINT) || has(KARPENTER_TAINT) {
        StopKind::Leaving(LeaveReason::ScaleDown)
    } else if n.unschedulable {
        StopKind::Cordoned
    } else {
        StopKind::Restart
    }
}

/// What one route class gets at the stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClassStop {
    /// Kept through graceful restart where it is in force (the peer holds the routes as
    /// stale until the next speaker refreshes them).
    Keep,
    /// Graceful shutdown (RFC 8326): sent again with 65535:0 for the grace period, then
    /// withdrawn.
    Drain,
}

impl ClassStop {
    /// A bounded word for `/status` and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ClassStop::Keep => "keep",
            ClassStop::Drain => "drain",
        }
    }

    /// What it does, in words (the Kubernetes Event's note).
    pub fn describe(self) -> &'static str {
        match self {
            ClassStop::Keep => "kept under graceful restart",
            ClassStop::Drain => "drained (65535:0, then withdrawn)",
        }
    }
}

/// What each route class gets at the stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClassStops {
    pub pod_cidrs: ClassStop,
    pub load_balancer: ClassStop,
}

impl ClassStops {
    pub const ALL_DRAINED: ClassStops = ClassStops {
        pod_cidrs: ClassStop::Drain,
        load_balancer: ClassStop::Drain,
    };

    pub fn any_drained(self) -> bool {
        self.pod_cidrs == ClassStop::Drain || self.load_balancer == ClassStop::Drain
    }

    pub fn all_drained(self) -> bool {
        self == ClassStops::ALL_DRAINED
    }
}

/// What one session does at a [`Shutdown`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionStop {
    /// Stop the session now for this reason.
    Now(StopReason),
    /// Drain these classes for `grace` (zero: withdraw them at once), then stop for
    /// `then`: a Cease when nothing is left at the peer, or [`StopReason::Restart`] (a
    /// close without NOTIFICATION under graceful restart) when the kept classes stay.
    Drain {
        classes: ClassStops,
        grace: Duration,
        then: StopReason,
    },
}

/// What the session facts make of a [`Shutdown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionFacts {
    /// The session is Established (the peer holds our routes).
    pub established: bool,
    /// Graceful restart is in force on it (RFC 4724: negotiated, with a restart time).
    pub graceful_restart: bool,
    /// `--graceful-shutdown-time`.
    pub grace: Duration,
}

/// The one decision of what a session does when asked to stop.
/// - Admin: an operator's "now": the Cease at once.
/// - Restart: graceful restart keeps every route where it is in force; otherwise every
///   route is drained for the grace period (none: the Cease at once).
/// - Leave: the drained classes are drained whatever graceful restart says; a kept class
///   stays only under graceful restart (without it the Cease would drop it anyway, so it
///   is drained with the others). The end is a close without NOTIFICATION while a kept
///   class is held, else the Cease.
/// - Deconfigured: every route drained, then Cease/Peer De-configured.
/// - A session that is not Established holds nothing: it stops at once.
pub fn session_stop(mode: &Shutdown, s: SessionFacts) -> SessionStop {
    let (classes, then) = match mode {
        Shutdown::Admin(m) => return SessionStop::Now(StopReason::AdminShutdown(m.clone())),
        Shutdown::Restart(m) if !s.established || s.graceful_restart => {
            return SessionStop::Now(StopReason::Restart(m.clone()))
        }
        // Without a grace period the Cease (the session sends it: graceful restart is not
        // in force) withdraws everything: no UPDATE first.
        Shutdown::Restart(m) if s.grace.is_zero() => {
            return SessionStop::Now(StopReason::Restart(m.clone()))
        }
        Shutdown::Restart(m) => (
            ClassStops::ALL_DRAINED,
            StopReason::AdminShutdown(m.clone()),
        ),
        Shutdown::Leave { message, .. } if !s.established => {
            return SessionStop::Now(StopReason::Restart(message.clone()))
        }
        Shutdown::Leave { message, classes } => {
            // A kept class stays only under graceful restart: without it the close would
            // drop it anyway, so it is drained with the others.
            let classes = if s.graceful_restart {
                *classes
            } else {
                ClassStops::ALL_DRAINED
            };
            if !classes.any_drained() {
                return SessionStop::Now(StopReason::Restart(message.clone()));
            }
            if classes.all_drained() {
                let cease = StopReason::AdminShutdown(message.clone());
                if s.grace.is_zero() {
                    return SessionStop::Now(cease);
                }
                (classes, cease)
            } else {
                // The drained classes are withdrawn first (at once without a grace
                // period), then the close keeps the others.
                (classes, StopReason::Restart(message.clone()))
            }
        }
        Shutdown::Deconfigured if !s.established || s.grace.is_zero() => {
            return SessionStop::Now(StopReason::PeerDeconfigured)
        }
        Shutdown::Deconfigured => (ClassStops::ALL_DRAINED, StopReason::PeerDeconfigured),
    };
    SessionStop::Drain {
        classes,
        grace: s.grace,
        then,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeLifecycle {
        NodeLifecycle::default()
    }

    fn with_taint(key: &str) -> NodeAtStop {
        NodeAtStop::Present(NodeLifecycle {
            taints: vec![key.to_owned()],
            ..node()
        })
    }

    #[test]
    fn a_stop_with_no_signal_is_a_restart() {
        assert_eq!(
            decide(StopPolicy::Auto, &NodeAtStop::Unknown),
            StopKind::Restart
        );
        assert_eq!(
            decide(StopPolicy::Auto, &NodeAtStop::Present(node())),
            StopKind::Restart
        );
        // A taint of no lifecycle meaning changes nothing.
        assert_eq!(
            decide(StopPolicy::Auto, &with_taint("dedicated")),
            StopKind::Restart
        );
    }

    #[test]
    fn the_node_at_the_stop_from_the_last_state() {
        let local = AnnounceMode::Local;
        let l = NodeLifecycle {
            unschedulable: true,
            ..node()
        };
        assert_eq!(
            NodeAtStop::from_state(local, Some(&l), false),
            NodeAtStop::Present(l.clone())
        );
        assert_eq!(NodeAtStop::from_state(local, None, true), NodeAtStop::Gone);
        assert_eq!(
            NodeAtStop::from_state(local, None, false),
            NodeAtStop::Unknown
        );
        // Cluster mode: every node's routes, whatever the speaker's own node says.
        for (facts, seen) in [(Some(&l), true), (None, true)] {
            let n = NodeAtStop::from_state(AnnounceMode::Cluster, facts, seen);
            assert_eq!(n, NodeAtStop::Unknown);
            assert_eq!(decide(StopPolicy::Auto, &n), StopKind::Restart);
        }
    }

    #[test]
    fn each_signal_is_recognised() {
        let auto = |n: &NodeAtStop| decide(StopPolicy::Auto, n);
        assert_eq!(
            auto(&NodeAtStop::Gone),
            StopKind::Leaving(LeaveReason::NodeDeleted)
        );
        assert_eq!(
            auto(&NodeAtStop::Present(NodeLifecycle {
                deleting: true,
                ..node()
            })),
            StopKind::Leaving(LeaveReason::NodeDeleting)
        );
        assert_eq!(
            auto(&with_taint(OUT_OF_SERVICE_TAINT)),
            StopKind::Leaving(LeaveReason::OutOfService)
        );
        assert_eq!(
            auto(&NodeAtStop::Present(NodeLifecycle {
                shutting_down: true,
                ..node()
            })),
            StopKind::Leaving(LeaveReason::ShuttingDown)
        );
        assert_eq!(
            auto(&with_taint(AUTOSCALER_TAINT)),
            StopKind::Leaving(LeaveReason::ScaleDown)
        );
        assert_eq!(
            auto(&with_taint(KARPENTER_TAINT)),
            StopKind::Leaving(LeaveReason::ScaleDown)
        );
        assert_eq!(
            auto(&NodeAtStop::Present(NodeLifecycle {
                unschedulable: true,
                ..node()
            })),
            StopKind::Cordoned
        );
    }

    #[test]
    fn the_strongest_signal_wins_and_the_flag_forces_either() {
        // A drain by the autoscaler cordons the node too: it is leaving, not cordoned.
        let n = NodeAtStop::Present(NodeLifecycle {
            unschedulable: true,
            taints: vec![AUTOSCALER_TAINT.to_owned()],
            ..node()
        });
        assert_eq!(
            decide(StopPolicy::Auto, &n),
            StopKind::Leaving(LeaveReason::ScaleDown)
        );
        assert_eq!(decide(StopPolicy::Restart, &n), StopKind::Restart);
        assert_eq!(
            decide(StopPolicy::Leave, &NodeAtStop::Present(node())),
            StopKind::Leaving(LeaveReason::Forced)
        );
    }

    #[test]
    fn per_class_outcome() {
        use ClassStop::*;
        let c = |k: StopKind| (k.classes().pod_cidrs, k.classes().load_balancer);
        assert_eq!(c(StopKind::Restart), (Keep, Keep));
        // Cordon alone: the pods may keep running (an upgrade), the LB paths have others.
        assert_eq!(c(StopKind::Cordoned), (Keep, Drain));
        assert_eq!(
            c(StopKind::Leaving(LeaveReason::ShuttingDown)),
            (Drain, Drain)
        );
    }

    fn facts(established: bool, gr: bool, grace: u64) -> SessionFacts {
        SessionFacts {
            established,
            graceful_restart: gr,
            grace: Duration::from_secs(grace),
        }
    }

    #[test]
    fn restart_keeps_everything_under_graceful_restart_and_drains_without_it() {
        let restart = Shutdown::Restart("bye".into());
        assert_eq!(
            session_stop(&restart, facts(true, true, 15)),
            SessionStop::Now(StopReason::Restart("bye".into()))
        );
        assert_eq!(
            session_stop(&restart, facts(true, false, 15)),
            SessionStop::Drain {
                classes: ClassStops::ALL_DRAINED,
                grace: Duration::from_secs(15),
                then: StopReason::AdminShutdown("bye".into()),
            }
        );
        // No grace period: the Cease at once (the session sends it: GR is not in force).
        assert_eq!(
            session_stop(&restart, facts(true, false, 0)),
            SessionStop::Now(StopReason::Restart("bye".into()))
        );
        // Nothing held: nothing to drain.
        assert_eq!(
            session_stop(&restart, facts(false, false, 15)),
            SessionStop::Now(StopReason::Restart("bye".into()))
        );
    }

    #[test]
    fn leaving_drains_whatever_graceful_restart_says() {
        let leave = StopKind::Leaving(LeaveReason::ShuttingDown).shutdown("podcidr-speaker");
        let Shutdown::Leave { message, .. } = &leave else {
            panic!("{leave:?}")
        };
        assert_eq!(message, "podcidr-speaker: node shutting down");
        for gr in [true, false] {
            assert_eq!(
                session_stop(&leave, facts(true, gr, 15)),
                SessionStop::Drain {
                    classes: ClassStops::ALL_DRAINED,
                    grace: Duration::from_secs(15),
                    then: StopReason::AdminShutdown(message.clone()),
                }
            );
        }
        assert_eq!(
            session_stop(&leave, facts(true, true, 0)),
            SessionStop::Now(StopReason::AdminShutdown(message.clone()))
        );
    }

    #[test]
    fn cordoned_drains_the_lb_class_and_keeps_the_pod_cidrs_under_graceful_restart() {
        let stop = StopKind::Cordoned.shutdown("podcidr-speaker");
        let Shutdown::Leave { message, .. } = &stop else {
            panic!("{stop:?}")
        };
        assert_eq!(
            session_stop(&stop, facts(true, true, 15)),
            SessionStop::Drain {
                classes: StopKind::Cordoned.classes(),
                grace: Duration::from_secs(15),
                then: StopReason::Restart(message.clone()),
            }
        );
        // Zero grace: the LB routes are withdrawn, then the close keeps the pod CIDRs.
        assert!(matches!(
            session_stop(&stop, facts(true, true, 0)),
            SessionStop::Drain { grace, .. } if grace.is_zero()
        ));
        // Without graceful restart the close would drop the pod CIDRs anyway: drain all.
        assert_eq!(
            session_stop(&stop, facts(true, false, 15)),
            SessionStop::Drain {
                classes: ClassStops::ALL_DRAINED,
                grace: Duration::from_secs(15),
                then: StopReason::AdminShutdown(message.clone()),
            }
        );
    }

    #[test]
    fn admin_and_deconfigured() {
        assert_eq!(
            session_stop(&Shutdown::Admin("now".into()), facts(true, true, 15)),
            SessionStop::Now(StopReason::AdminShutdown("now".into()))
        );
        assert_eq!(
            session_stop(&Shutdown::Deconfigured, facts(true, true, 15)),
            SessionStop::Drain {
                classes: ClassStops::ALL_DRAINED,
                grace: Duration::from_secs(15),
                then: StopReason::PeerDeconfigured,
            }
        );
        assert_eq!(
            session_stop(&Shutdown::Deconfigured, facts(true, true, 0)),
            SessionStop::Now(StopReason::PeerDeconfigured)
        );
    }
}
