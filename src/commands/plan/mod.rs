//! `podcidr-speaker plan`: which sessions one node would open and the exact routes with
//! attributes for each, computed offline from a bgp-config file and a cluster-state
//! path, for reviewing a change before it is applied.
//!
//! Owns the command's I/O: reading the two inputs once, and the wording ([`report`]).
//! The decisions are [`sources::node_view`], [`routes::plan()`] and, for the
//! LoadBalancer Services of the cluster-state files, [`routes::lb`] (each Service's
//! decision, the routes per peer) and the allocator from scratch
//! ([`AllocationView`]: what `podcidr-speaker allocate` would write). Must not: decide
//! anything, connect anywhere or show a password.

pub mod report;

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;

use super::allocation::AllocationView;
use super::check::{check_text, FileReport, Outcome};
use crate::routes::cilium::ConflictPolicy;
use crate::routes::lb::{LbContext, LbEnabled, LbPlanner, LbSwitch};
use crate::routes::{self, AnnounceMode, LocalNode, Overrides};
use crate::sources::services::{LbFacts, LbUpdate};
use crate::sources::{self, file, IpamError, IpamOverride, SourceError};
pub use report::{render_plan, Format};

/// The LoadBalancer side of a plan: the on/off decision and the planner fed with every
/// Service and EndpointSlice of the cluster-state files; and the allocator's answer
/// over those Services when the config has address pools and the files have Services.
#[derive(Debug)]
pub struct LbPlanned {
    pub enabled: LbEnabled,
    pub planner: LbPlanner,
    pub allocation: Option<AllocationView>,
}

impl LbPlanned {
    /// No Service at all, LoadBalancer IPs decided by `--announce-lb-ips auto` and
    /// `config` (a plan made without the cluster's Services).
    pub fn without_services(plan: &routes::Plan, config: &crate::config::Config) -> LbPlanned {
        LbPlanned {
            enabled: LbSwitch::Auto.decide_for(plan.mode, config),
            planner: LbPlanner::new(plan.node.clone()),
            allocation: None,
        }
    }

    /// Plans the LoadBalancer routes of `node` from `facts`, as `run` would once synced
    /// (`--announce`, `--announce-lb-ips` and `--lb-class` from `request`).
    pub fn new(
        config: &crate::config::Config,
        view: &sources::NodeView,
        request: &PlanRequest,
        facts: &LbFacts,
    ) -> LbPlanned {
        let node = request.node.as_str();
        let enabled = request.announce_lb_ips.decide_for(request.announce, config);
        let mut planner = LbPlanner::new(node);
        planner.set_context(LbContext::new(
            config,
            view.nodes.get(node).map(|e| &e.labels),
            &request.lb_classes,
            enabled.on,
        ));
        for update in LbFacts::default().changes_to(facts) {
            planner.apply(update);
        }
        planner.apply(LbUpdate::Synced);
        LbPlanned {
            enabled,
            planner,
            allocation: None,
        }
    }
}

/// What to plan, as the command line gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRequest {
    /// `--bgp-config FILE`: the raw config or a ConfigMap manifest.
    pub bgp_config: PathBuf,
    /// `--cluster-state PATH`: a file or a directory of Nodes, CiliumNodes, cilium-config.
    pub cluster_state: PathBuf,
    /// `--node NAME`.
    pub node: String,
    pub announce: AnnounceMode,
    pub ipam: IpamOverride,
    /// `--source-address`, as `run` takes it.
    pub source_address: Option<IpAddr>,
    /// `--announce-lb-ips`, as `run` takes it.
    pub announce_lb_ips: LbSwitch,
    /// `--lb-class`, as `run` takes it.
    pub lb_classes: Vec<String>,
    /// `--cilium-bgp-conflict`, as `run` takes it: whether the plan's sessions would be
    /// held back while cilium-config turns Cilium's embedded speaker on.
    pub cilium_bgp_conflict: ConflictPolicy,
    pub format: Format,
}

/// Why no plan could be made. Warnings (drift, refused prefixes, conflicts) are not
/// errors: they are part of the output.
#[derive(Debug, thiserror::Error)]
pub enum PlanCommandError {
    #[error("--bgp-config {}: cannot read: {reason}", path.display())]
    ReadConfig { path: PathBuf, reason: String },
    /// The config is invalid; the report is the `check` command's, every error with its
    /// position.
    #[error("--bgp-config {}", report.to_string().trim_end())]
    InvalidConfig { report: Box<FileReport> },
    #[error("--cluster-state: {0}")]
    ClusterState(#[from] SourceError),
    #[error("{0}")]
    Ipam(#[from] IpamError),
    /// The node is not in the cluster state: most likely a typo, and its plan would be
    /// empty (its labels, hence its peers, are unknown).
    #[error("--node: {node:?} is not a Node in --cluster-state {} (nodes: {known})", path.display())]
    UnknownNode {
        node: String,
        path: PathBuf,
        /// Some of the nodes that are there, for the message.
        known: String,
    },
}

/// How many node names an unknown-node error lists.
const KNOWN_NODES_SHOWN: usize = 10;

/// Plans, writes the plan to `out` or the error to `err`; the exit status (0 planned,
/// 1 not).
pub fn run(request: &PlanRequest, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let written = match render(request) {
        Ok(text) => write!(out, "{text}"),
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return 1;
        }
    };
    match written {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(err, "error: writing the output: {e}");
            1
        }
    }
}

/// Loads both inputs, plans for `request.node` and renders the plan.
pub fn render(request: &PlanRequest) -> Result<String, PlanCommandError> {
    let text =
        std::fs::read_to_string(&request.bgp_config).map_err(|e| PlanCommandError::ReadConfig {
            path: request.bgp_config.clone(),
            reason: e.to_string(),
        })?;
    let report = check_text(&request.bgp_config.display().to_string(), &text);
    let config = match report.outcome {
        Outcome::Ok(config) => config,
        _ => {
            return Err(PlanCommandError::InvalidConfig {
                report: Box::new(report),
            })
        }
    };
    let files = file::load_files(&request.cluster_state)?;
    let state = files.state;
    let view = sources::node_view(&state, request.ipam)?;
    if !view.nodes.contains_key(request.node.as_str()) {
        let mut known: Vec<&str> = view
            .nodes
            .keys()
            .take(KNOWN_NODES_SHOWN)
            .map(|n| &**n)
            .collect();
        let more = view.nodes.len().saturating_sub(KNOWN_NODES_SHOWN);
        let more = (more > 0).then(|| format!("and {more} more"));
        known.extend(more.as_deref());
        if known.is_empty() {
            known.push("none");
        }
        return Err(PlanCommandError::UnknownNode {
            node: request.node.clone(),
            path: request.cluster_state.clone(),
            known: known.join(", "),
        });
    }
    let plan = routes::plan(
        &view,
        &config,
        &LocalNode::new(request.node.as_str()),
        request.announce,
        &Overrides {
            source_address: request.source_address,
        },
    );
    let mut lb = LbPlanned::new(&config, &view, request, &files.lb);
    if !config.pools.is_empty() && !files.lb.services.is_empty() {
        let services = file::load_services(&request.cluster_state)?;
        lb.allocation = Some(AllocationView::from_scratch(
            &config.pools,
            &request.lb_classes,
            &services,
        ));
    }
    let cilium = routes::cilium::decide(request.cilium_bgp_conflict, state.cilium_config.as_ref());
    Ok(render_plan(
        &plan,
        &view,
        &config,
        &lb,
        &cilium,
        request.format,
    ))
}
