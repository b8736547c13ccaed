//! What the speaker is told about its inputs, speaker-wide: the bgp-config reloads and
//! the config in force, the followed resources, the node view (nodes, IPAM mode,
//! drift, overlaps, refusals), the LoadBalancer planner's counts and the startup gate.
//!
//! Must not: work out again what the node view or the planners decided: it counts and
//! copies their findings.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use prometheus::IntCounterVec;

use super::{saturating_i64, unix_seconds, whole_seconds, Metrics};
use crate::config::state::{ConfigStatus, ConfigUpdate};
use crate::metrics::board::{
    ConfigReport, DriftReport, GateReport, LbReport, OverlapReport, RefusedReport, ViewReport,
};
use crate::metrics::families::IPAM_MODES;
use crate::routes::lb::LbReason;
use crate::sources::model::{IpamError, NodeView};
use crate::sources::SourceStatus;

impl Metrics {
    // --- startup gate -----------------------------------------------------------------

    /// The startup gate's state: the Cilium agent's health at `address` (`None` before
    /// the first answer), whether the first announcement was allowed, and the last
    /// error or unhealthy answer.
    pub fn record_gate(
        &self,
        address: &str,
        healthy: Option<bool>,
        open: bool,
        error: Option<&str>,
        now: SystemTime,
    ) {
        let mut inner = self.lock();
        let f = &self.families;
        f.cilium_healthy.set(match healthy {
            Some(true) => 1,
            Some(false) => 0,
            None => -1,
        });
        f.gate_open.set(i64::from(open));
        let changed = inner
            .gate
            .as_ref()
            .is_none_or(|g| g.healthy != healthy || g.open != open);
        let report = inner.gate.get_or_insert_with(|| GateReport {
            address: address.to_owned(),
            ..GateReport::default()
        });
        if changed {
            report.since_unix = Some(whole_seconds(now));
        }
        if report.healthy == Some(true) && healthy == Some(false) {
            report.flaps += 1;
            f.cilium_flaps.inc();
        }
        report.healthy = healthy;
        report.open = open;
        report.last_error = error.map(str::to_owned);
    }

    // --- config -----------------------------------------------------------------------

    /// The outcome of feeding the config state a source event. Applied and Unchanged
    /// are successful reloads; Rejected and Deleted are not (the source's current
    /// content is not what runs). `status` is the state's status after the update.
    pub fn record_config_reload(
        &self,
        update: &ConfigUpdate,
        status: &ConfigStatus,
        now: SystemTime,
    ) {
        let ok = matches!(
            update,
            ConfigUpdate::Applied { .. } | ConfigUpdate::Unchanged { .. }
        );
        let mut inner = self.lock();
        let f = &self.families;
        f.config_reload_ok.set(i64::from(ok));
        f.config_reload_time.set(unix_seconds(now));
        f.config_reloads
            .with_label_values(&[if ok { "success" } else { "failure" }])
            .inc();
        f.config_loaded.set(i64::from(status.in_force.is_some()));
        let fingerprint = status.in_force.map(|fp| fp.to_string());
        if inner.config_fingerprint != fingerprint {
            if let Some(old) = &inner.config_fingerprint {
                let _ = f.config_info.remove_label_values(&[old]);
            }
            if let Some(new) = &fingerprint {
                f.config_info.with_label_values(&[new]).set(1);
            }
            inner.config_fingerprint = fingerprint.clone();
        }
        inner.config = ConfigReport {
            loaded: status.in_force.is_some(),
            fingerprint,
            last_reload_successful: Some(ok),
            last_reload_unix: Some(whole_seconds(now)),
            source_deleted: status.source_deleted,
            rejected: status
                .rejected
                .as_ref()
                .map(|r| r.errors.iter().map(ToString::to_string).collect())
                .unwrap_or_default(),
        };
    }

    // --- sources ----------------------------------------------------------------------

    /// The latest status of every followed resource. Counters follow the status's own
    /// totals (which only grow); a resource no longer followed loses its series.
    pub fn record_source_status(&self, status: &SourceStatus) {
        let mut inner = self.lock();
        let f = &self.families;
        for resource in inner.sources.resources.keys() {
            if !status.resources.contains_key(resource) {
                let r = [resource.as_str()];
                let _ = f.source_up.remove_label_values(&r);
                let _ = f.source_synced.remove_label_values(&r);
                let _ = f.source_last_event.remove_label_values(&r);
                let _ = f.source_events.remove_label_values(&r);
                let _ = f.source_errors.remove_label_values(&r);
            }
        }
        for (resource, s) in &status.resources {
            let r = [resource.as_str()];
            f.source_up.with_label_values(&r).set(i64::from(s.up));
            f.source_synced
                .with_label_values(&r)
                .set(i64::from(s.synced));
            f.source_last_event
                .with_label_values(&r)
                .set(s.last_event.map_or(0.0, unix_seconds));
            advance(&f.source_events, &r, s.events);
            advance(&f.source_errors, &r, s.errors);
        }
        inner.sources = status.clone();
    }

    // --- node view --------------------------------------------------------------------

    /// A new node view: nodes, prefixes, the IPAM mode, drift per node (series of nodes
    /// that no longer drift, or no longer exist, are deleted), overlaps and refusals.
    pub fn set_view(&self, view: &NodeView) {
        let mut inner = self.lock();
        let f = &self.families;
        f.view_nodes.set(saturating_i64(view.nodes.len() as u64));
        let prefixes: usize = view.nodes.values().map(|n| n.prefixes.len()).sum();
        f.view_prefixes.set(saturating_i64(prefixes as u64));
        for mode in IPAM_MODES {
            f.ipam_mode
                .with_label_values(&[mode.as_str()])
                .set(i64::from(mode == view.ipam));
        }
        f.ipam_error.set(0);

        let drifting: BTreeSet<String> = view
            .nodes
            .values()
            .filter(|n| n.drift.is_some())
            .map(|n| n.name.to_string())
            .collect();
        for gone in inner.drift_nodes.difference(&drifting) {
            let _ = f.drift.remove_label_values(&[gone]);
        }
        for node in &drifting {
            f.drift.with_label_values(&[node]).set(1);
        }
        f.drift_nodes.set(saturating_i64(drifting.len() as u64));
        inner.drift_nodes = drifting;

        let found: Vec<_> = view.announced_overlaps().collect();
        let conflicting: BTreeSet<&str> = found
            .iter()
            .flat_map(|o| [o.node.as_ref(), o.other_node.as_ref()])
            .collect();
        f.conflicts.set(saturating_i64(conflicting.len() as u64));
        f.refused.set(saturating_i64(view.refused_count() as u64));

        let announced = view.ipam.object();
        inner.view = Some(ViewReport {
            ipam: Some(view.ipam.as_str().to_owned()),
            ipam_error: None,
            announce_pod_cidr: !inner.pod_cidrs_off,
            nodes: view.nodes.len(),
            prefixes,
            drift: view
                .nodes
                .values()
                .filter_map(|n| {
                    n.drift.as_ref().map(|d| DriftReport {
                        node: n.name.to_string(),
                        node_cidrs: d.node_cidrs.iter().map(ToString::to_string).collect(),
                        cilium_node_cidrs: d.cilium_cidrs.iter().map(ToString::to_string).collect(),
                        announced: announced.to_owned(),
                    })
                })
                .collect(),
            refused: view
                .nodes
                .values()
                .flat_map(|n| {
                    n.refused.iter().map(|(p, r)| RefusedReport {
                        node: n.name.to_string(),
                        prefix: p.to_string(),
                        reason: r.to_string(),
                    })
                })
                .collect(),
            overlaps: found
                .iter()
                .map(|o| OverlapReport {
                    node: o.node.to_string(),
                    prefix: o.prefix.to_string(),
                    other_node: o.other_node.to_string(),
                    other_prefix: o.other_prefix.to_string(),
                })
                .collect(),
            warnings: view.warnings.iter().map(ToString::to_string).collect(),
        });
    }

    /// The sources' facts give no view: the IPAM mode cannot be decided, so nothing is
    /// announced. Node and drift series keep their last values (the facts did not go
    /// away); the mode series all read 0 and the error gauge 1.
    pub fn set_view_error(&self, error: &IpamError) {
        let mut inner = self.lock();
        let f = &self.families;
        for mode in IPAM_MODES {
            f.ipam_mode.with_label_values(&[mode.as_str()]).set(0);
        }
        f.ipam_error.set(1);
        f.view_prefixes.set(0);
        let mut report = inner.view.take().unwrap_or_default();
        report.ipam = None;
        report.ipam_error = Some(error.to_string());
        report.prefixes = 0;
        inner.view = Some(report);
    }

    /// Either of the above, for a source snapshot's `view`.
    pub fn set_view_result(&self, view: &Result<NodeView, IpamError>) {
        match view {
            Ok(v) => self.set_view(v),
            Err(e) => self.set_view_error(e),
        }
    }

    // --- loadbalancer -----------------------------------------------------------------

    /// The LoadBalancer planner's counts: Services per decision (`None`: announced) and
    /// routes. Services that are not of type LoadBalancer are not counted.
    pub fn record_lb(&self, by_reason: &BTreeMap<Option<LbReason>, usize>, routes: usize) {
        let f = &self.families;
        let count = |r: Option<LbReason>| by_reason.get(&r).copied().unwrap_or(0) as u64;
        f.lb_announced.set(saturating_i64(count(None)));
        for reason in LbReason::ALL {
            if reason == LbReason::NotLoadBalancer {
                continue;
            }
            f.lb_not_announced
                .with_label_values(&[reason.as_str()])
                .set(saturating_i64(count(Some(reason))));
        }
        f.lb_routes.set(saturating_i64(routes as u64));
        let report = LbReport {
            announced: count(None),
            not_announced: by_reason
                .iter()
                .filter_map(|(r, n)| match r {
                    Some(r) if *r != LbReason::NotLoadBalancer && *n > 0 => {
                        Some((r.as_str().to_owned(), *n as u64))
                    }
                    _ => None,
                })
                .collect(),
            routes: routes as u64,
        };
        self.lock().lb = Some(report);
    }
}

/// Brings a counter up to a total kept elsewhere (a status that counts by itself).
/// Only the registry writes these counters, so the counter's value is the last total
/// seen; a total that went down (a restarted source) adds nothing.
fn advance(family: &IntCounterVec, labels: &[&str], total: u64) {
    let counter = family.with_label_values(labels);
    let delta = total.saturating_sub(counter.get());
    counter.inc_by(delta);
}
