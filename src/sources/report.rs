//! What the sources must tell an operator about a node view, once per change: drift
//! between a Node and its CiliumNode, refused prefixes, an IPAM mode that cannot be
//! used, view warnings.
//!
//! Pure: [`ReportTracker::observe`] compares the new view with what was reported before
//! and returns only what changed. The drivers (kube, file) log the reports and turn
//! drift into Kubernetes Events; nothing here logs or does I/O.

use std::collections::BTreeMap;
use std::sync::Arc;

use ipnet::IpNet;

use super::model::{CidrRefusal, Drift, IpamError, IpamMode, NodeView, ViewWarning};

/// One thing worth reporting, produced once per change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// The Node and CiliumNode of `node` disagree (newly, or differently than before, or
    /// the IPAM mode deciding which is announced changed).
    Drift {
        node: Arc<str>,
        uid: Option<String>,
        drift: Drift,
        ipam: IpamMode,
    },
    /// The Node and CiliumNode of `node` agree again, or the node is gone.
    DriftResolved { node: Arc<str> },
    /// `prefix` of `node` is not announced.
    Refused {
        node: Arc<str>,
        prefix: IpNet,
        refusal: CidrRefusal,
    },
    /// The IPAM mode cannot be decided: nothing can be announced.
    Ipam(IpamError),
    /// The IPAM mode can be decided again.
    IpamResolved { ipam: IpamMode },
    /// A view-wide warning that was not in the previous view.
    Warning(ViewWarning),
    /// The speaker on `node` is stopping: `decision` (a bounded word: restart, cordoned,
    /// or why the node leaves) and what it does with the node's routes, in words.
    Stopping {
        node: Arc<str>,
        uid: Option<String>,
        decision: &'static str,
        note: String,
    },
    /// cilium-config turns Cilium's embedded BGP speaker on beside the speaker on
    /// `node` (`routes::cilium`): `note` names the keys, what the speaker does and what
    /// to do.
    CiliumBgpConflict {
        node: Arc<str>,
        uid: Option<String>,
        note: String,
    },
    /// It is off again: every session may run.
    CiliumBgpConflictResolved { node: Arc<str>, uid: Option<String> },
}

/// Remembers what was reported so each fact is reported once per change.
#[derive(Debug, Default)]
pub struct ReportTracker {
    drift: BTreeMap<Arc<str>, (Drift, IpamMode)>,
    refused: BTreeMap<Arc<str>, Vec<(IpNet, CidrRefusal)>>,
    ipam_error: Option<IpamError>,
    warnings: Vec<ViewWarning>,
}

impl ReportTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// The reports that `view` adds to what was reported before.
    pub fn observe(&mut self, view: &Result<NodeView, IpamError>) -> Vec<Report> {
        let mut reports = Vec::new();
        let view = match view {
            Err(e) => {
                if self.ipam_error.as_ref() != Some(e) {
                    self.ipam_error = Some(e.clone());
                    reports.push(Report::Ipam(e.clone()));
                }
                return reports;
            }
            Ok(view) => view,
        };
        if self.ipam_error.take().is_some() {
            reports.push(Report::IpamResolved { ipam: view.ipam });
        }

        let mut drift = BTreeMap::new();
        let mut refused = BTreeMap::new();
        for (name, entry) in &view.nodes {
            if let Some(d) = entry.drift.as_deref() {
                let now = (d.clone(), view.ipam);
                if self.drift.get(name) != Some(&now) {
                    reports.push(Report::Drift {
                        node: Arc::clone(name),
                        uid: entry.uid.clone(),
                        drift: d.clone(),
                        ipam: view.ipam,
                    });
                }
                drift.insert(Arc::clone(name), now);
            }
            if !entry.refused.is_empty() {
                let before = self.refused.get(name);
                for (prefix, refusal) in &entry.refused {
                    let known =
                        before.is_some_and(|b| b.iter().any(|(p, r)| p == prefix && r == refusal));
                    if !known {
                        reports.push(Report::Refused {
                            node: Arc::clone(name),
                            prefix: *prefix,
                            refusal: refusal.clone(),
                        });
                    }
                }
                refused.insert(Arc::clone(name), entry.refused.clone());
            }
        }
        for name in self.drift.keys() {
            if !drift.contains_key(name) {
                reports.push(Report::DriftResolved {
                    node: Arc::clone(name),
                });
            }
        }
        for warning in &view.warnings {
            if !self.warnings.contains(warning) {
                reports.push(Report::Warning(warning.clone()));
            }
        }
        self.drift = drift;
        self.refused = refused;
        self.warnings = view.warnings.clone();
        reports
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::model::{node_view, CiliumConfig, ClusterState, IpamOverride, NodeFacts};

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn state(node: &str, cilium: &str, ipam: &str) -> ClusterState {
        let mut state = ClusterState {
            cilium_config: Some(CiliumConfig {
                ipam: Some(ipam.into()),
                cluster_pool_v4: vec![net("10.0.0.0/16")],
                ..CiliumConfig::default()
            }),
            ..ClusterState::default()
        };
        state.nodes.insert(
            "a".into(),
            NodeFacts {
                node_cidrs: vec![net(node)],
                ..NodeFacts::default()
            },
        );
        state.cilium_nodes.insert("a".into(), vec![net(cilium)]);
        state
    }

    fn observe(tracker: &mut ReportTracker, state: &ClusterState) -> Vec<Report> {
        tracker.observe(&node_view(state, IpamOverride::Auto))
    }

    #[test]
    fn drift_is_reported_once_per_change_and_when_resolved() {
        let mut tracker = ReportTracker::new();
        let drifted = state("10.0.1.0/24", "10.0.2.0/24", "cluster-pool");
        let reports = observe(&mut tracker, &drifted);
        assert_eq!(
            reports,
            vec![Report::Drift {
                node: "a".into(),
                uid: None,
                drift: Drift {
                    node_cidrs: vec![net("10.0.1.0/24")],
                    cilium_cidrs: vec![net("10.0.2.0/24")],
                },
                ipam: IpamMode::ClusterPool,
            }]
        );
        assert_eq!(observe(&mut tracker, &drifted), vec![]);
        // A different disagreement is a new report.
        let other = state("10.0.1.0/24", "10.0.3.0/24", "cluster-pool");
        assert_eq!(observe(&mut tracker, &other).len(), 1);
        // So is a mode change: the other object is now announced.
        let kube = state("10.0.1.0/24", "10.0.3.0/24", "kubernetes");
        assert!(matches!(
            observe(&mut tracker, &kube).as_slice(),
            [Report::Drift {
                ipam: IpamMode::Kubernetes,
                ..
            }]
        ));
        let agreed = state("10.0.3.0/24", "10.0.3.0/24", "kubernetes");
        assert_eq!(
            observe(&mut tracker, &agreed),
            vec![Report::DriftResolved { node: "a".into() }]
        );
        assert_eq!(observe(&mut tracker, &agreed), vec![]);
    }

    #[test]
    fn refusals_are_reported_once() {
        let mut tracker = ReportTracker::new();
        let outside = state("10.9.1.0/24", "10.9.1.0/24", "cluster-pool");
        let reports = observe(&mut tracker, &outside);
        assert!(
            matches!(reports.as_slice(), [Report::Refused { prefix, refusal: CidrRefusal::OutsideClusterPool { .. }, .. }] if *prefix == net("10.9.1.0/24")),
            "{reports:?}"
        );
        assert_eq!(observe(&mut tracker, &outside), vec![]);
        let inside = state("10.0.1.0/24", "10.0.1.0/24", "cluster-pool");
        assert_eq!(observe(&mut tracker, &inside), vec![]);
        assert_eq!(observe(&mut tracker, &outside).len(), 1);
    }

    #[test]
    fn ipam_error_is_reported_once_and_its_resolution_too() {
        let mut tracker = ReportTracker::new();
        let bad = state("10.0.1.0/24", "10.0.1.0/24", "eni");
        assert!(matches!(
            observe(&mut tracker, &bad).as_slice(),
            [Report::Ipam(IpamError::Unsupported { mode })] if mode == "eni"
        ));
        assert_eq!(observe(&mut tracker, &bad), vec![]);
        let good = state("10.0.1.0/24", "10.0.1.0/24", "kubernetes");
        assert_eq!(
            observe(&mut tracker, &good),
            vec![Report::IpamResolved {
                ipam: IpamMode::Kubernetes
            }]
        );
    }

    #[test]
    fn warnings_are_reported_when_they_appear() {
        let mut tracker = ReportTracker::new();
        let mut no_config = state("10.0.1.0/24", "10.0.1.0/24", "kubernetes");
        no_config.cilium_config = None;
        let reports = observe(&mut tracker, &no_config);
        assert!(reports.contains(&Report::Warning(ViewWarning::CiliumConfigAbsent)));
        assert_eq!(observe(&mut tracker, &no_config), vec![]);
    }
}
