//! The `plan` command's output: a [`Plan`] with the view and config it came from, and
//! the LoadBalancer side ([`LbPlanned`]: each Service's decision and the routes each
//! peer gets), as a table for people or JSON for tools, with the same facts in both.
//!
//! Owns the wording of plan output and of its warnings. Must not: read files, print,
//! or show a password (only the fact that a peer uses TCP MD5).

use std::fmt::Write as _;
use std::str::FromStr;

use serde_json::{json, Map, Value};

use crate::config::duration::Compact;
use crate::config::{Community, Config, Peer};
use crate::metrics::board::{large_text, origin_name};
use crate::routes::cilium::{self, ConflictDecision};
use crate::routes::layers::LbOverPod;
use crate::routes::lb::{IpPlacement, LbDecision, LbReason, LbRouteMap, LbRoutes};
use crate::routes::lb_findings::{self, NoNextHop, PoolFinding as LbPoolFinding};
use crate::routes::next_hop::{family_of, needs_extended_next_hop};
use crate::routes::plan::unused_next_hop_fields;
use crate::routes::pools::PoolFinding;
use crate::routes::{Conflict, NextHop, Plan, PlannedRoute, RouteAttrs, UnannounceableReason};
use crate::sources::model::{NodeView, ViewWarning};

use super::super::allocation::{AllocationView, Outcome};
use super::LbPlanned;

/// `-o`: how to render a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Table,
    Json,
}

/// `-o` / `--output` is not one of the known formats.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--output: {value:?} must be table or json")]
pub struct UnknownFormat {
    pub value: String,
}

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "table" => Ok(Format::Table),
            "json" => Ok(Format::Json),
            other => Err(UnknownFormat {
                value: other.to_owned(),
            }),
        }
    }
}

/// Renders `plan` (made from `view` and `config`) in `format`, ending with a newline.
pub fn render_plan(
    plan: &Plan,
    view: &NodeView,
    config: &Config,
    lb: &LbPlanned,
    cilium: &ConflictDecision,
    format: Format,
) -> String {
    match format {
        Format::Table => table(plan, view, config, lb, cilium),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&json_value(plan, view, config, lb, cilium))
                // Serialising a Value built here cannot fail: every map key is a string.
                .unwrap_or_default();
            s.push('\n');
            s
        }
    }
}

/// Something in the plan, view or config an operator should look at before applying.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// A stable identifier (`drift`, `same-prefix`, ...) for tools.
    pub kind: &'static str,
    /// One line, for people.
    pub message: String,
    /// The facts of the message, for tools.
    pub fields: Map<String, Value>,
}

impl Warning {
    fn new(kind: &'static str, message: String, fields: Value) -> Warning {
        let fields = match fields {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Warning {
            kind,
            message,
            fields,
        }
    }
}

/// What an operator should know of the address pools and the LoadBalancer Services:
/// pools not announced (LoadBalancer IPs off, layer2), pools overlapping a pod CIDR,
/// Services with IPs outside every pool or ingress entries without an IP, and
/// LoadBalancer prefixes equal to this node's pod CIDR.
fn lb_warnings(
    out: &mut Vec<Warning>,
    plan: &Plan,
    view: &NodeView,
    config: &Config,
    lb: &LbPlanned,
) {
    for f in lb_findings::pool_findings(config, lb.enabled, view) {
        out.push(match f {
            LbPoolFinding::Layer2 { pool, cidrs } => {
                let cidrs = strings(&cidrs);
                Warning::new(
                    "pool-layer2",
                    format!(
                        "address pool {pool:?} ({}) is layer2: BGP never announces it",
                        cidrs.join(", ")
                    ),
                    json!({ "pool": pool, "cidrs": cidrs }),
                )
            }
            LbPoolFinding::NotAnnounced { pool, cidrs, why } => {
                let cidrs = strings(&cidrs);
                Warning::new(
                    "address-pool-not-announced",
                    format!(
                        "address pool {pool:?} ({}) is not announced: {why}",
                        cidrs.join(", ")
                    ),
                    json!({ "pool": pool, "cidrs": cidrs }),
                )
            }
            LbPoolFinding::OverlapsPodCidr {
                pool,
                cidr,
                node,
                pod_cidr,
            } => Warning::new(
                "pool-overlaps-pod-cidr",
                format!(
                    "address pool {pool:?} ({cidr}) overlaps the pod CIDR {pod_cidr} of node \
                     {node}: a LoadBalancer IP there is announced as its own, more specific \
                     route"
                ),
                json!({ "pool": pool, "cidr": cidr.to_string(), "node": &*node, "pod_cidr": pod_cidr.to_string() }),
            ),
        });
    }
    for (key, d) in lb.planner.decisions() {
        if d.reason == Some(LbReason::NotLoadBalancer) {
            continue;
        }
        for ip in d
            .ips
            .iter()
            .filter(|p| matches!(p, IpPlacement::Outside { .. }))
        {
            out.push(Warning::new(
                "lb-ip-outside-pools",
                format!(
                    "service {key}: {} lies outside every address pool: not announced",
                    ip.ip()
                ),
                json!({ "service": key.to_string(), "ip": ip.ip().to_string() }),
            ));
        }
        if !d.refused.is_empty() {
            out.push(Warning::new(
                "lb-ingress-without-ip",
                format!(
                    "service {key}: ingress without a usable IP ({}): not announced",
                    d.refused.join(", ")
                ),
                json!({ "service": key.to_string(), "ingress": d.refused }),
            ));
        }
    }
    for (key, p) in &plan.peers {
        for NoNextHop { family, routes: n } in
            lb_findings::no_next_hop(&p.lb, lb.planner.routes(), lb.enabled)
        {
            out.push(Warning::new(
                "lb-no-next-hop",
                format!(
                    "{n} LoadBalancer route{} of family {family} not announced to {key}: no \
                     next hop of that family for this peer (next-hop-v4/next-hop-v6, or an \
                     address of that family on the node)",
                    if n == 1 { " is" } else { "s are" }
                ),
                json!({ "peer": key.to_string(), "family": family.to_string(), "routes": n }),
            ));
        }
    }
    if let Some(entry) = view.nodes.get(&*plan.node) {
        for pod in LbOverPod::of(&entry.prefixes, lb.planner.routes()).shadowed {
            out.push(Warning::new(
                "lb-prefix-is-pod-cidr",
                format!(
                    "LoadBalancer prefix {pod} equals this node's pod CIDR: the pod CIDR route \
                     is announced, not the LoadBalancer one"
                ),
                json!({ "prefix": pod.to_string() }),
            ));
        }
    }
}

/// A peer's LoadBalancer routes, as the plan has them for it.
fn lb_routes_of(p: &crate::routes::PeerPlan, lb: &LbPlanned) -> LbRoutes {
    LbRouteMap::new(p.lb.clone()).full(lb.planner.routes())
}

/// One Service's decision in words: `announced`, or `not announced: why`.
fn decision_text(d: &LbDecision) -> String {
    match d.reason {
        None => "announced".to_owned(),
        Some(r) => format!("not announced: {}", r.describe()),
    }
}

fn placement_text(p: &IpPlacement) -> String {
    match p {
        IpPlacement::Bgp { ip, pool } => format!("{ip} (pool {pool})"),
        IpPlacement::Layer2 { ip, pool } => format!("{ip} (layer2 pool {pool})"),
        IpPlacement::Outside { ip } => format!("{ip} (outside every pool)"),
    }
}

fn policy_text(d: &LbDecision) -> &'static str {
    match d.policy {
        crate::sources::services::TrafficPolicy::Cluster => "Cluster",
        crate::sources::services::TrafficPolicy::Local => "Local",
    }
}

/// The LoadBalancer section of the table: the on/off decision, then each Service;
/// nothing when the config has no address pool and the cluster no LoadBalancer Service.
fn lb_table(s: &mut String, config: &Config, lb: &LbPlanned) {
    let any_service = lb
        .planner
        .decisions()
        .values()
        .any(|d| d.reason != Some(LbReason::NotLoadBalancer));
    if config.pools.is_empty() && !any_service {
        return;
    }
    let _ = writeln!(
        s,
        "loadbalancer ips: {} ({})",
        if lb.enabled.on {
            "announced"
        } else {
            "not announced"
        },
        lb.enabled.why
    );
    let rows: Vec<Vec<String>> = lb
        .planner
        .decisions()
        .iter()
        .filter(|(_, d)| d.reason != Some(LbReason::NotLoadBalancer))
        .map(|(key, d)| {
            let ips: Vec<String> = d.ips.iter().map(placement_text).collect();
            let mut cells = vec![
                format!("service {key}"),
                format!("policy {}", policy_text(d)),
                if ips.is_empty() {
                    "ips (none)".to_owned()
                } else {
                    format!("ips {}", ips.join(", "))
                },
                format!(
                    "endpoints {} ready, {} here",
                    d.endpoints.ready, d.endpoints.here
                ),
            ];
            if !d.routes.is_empty() {
                let mut prefixes: Vec<String> =
                    d.routes.iter().map(|(p, _)| p.to_string()).collect();
                prefixes.dedup();
                cells.push(format!("routes {}", prefixes.join(", ")));
            }
            cells.push(decision_text(d));
            cells
        })
        .collect();
    if rows.is_empty() {
        s.push_str("  (no LoadBalancer Services)\n");
    }
    write_rows(s, "  ", &rows);
}

/// Says what the section is: a fresh allocator's answer, which may differ from the
/// cluster's status (another allocator wrote it, or none did).
const ALLOCATION_WHAT: &str = "what `podcidr-speaker allocate` would write, starting now from \
     these Services and this config; not what the cluster has";

/// The allocation section of the table: each pool's use, then each LoadBalancer Service
/// with what it would hold (kept from its status or new) or why it would be pending,
/// status addresses outside every pool and Services the allocator cannot read.
fn allocation_table(s: &mut String, a: &AllocationView) {
    let _ = writeln!(s, "loadbalancer ip allocation ({ALLOCATION_WHAT}):");
    let rows: Vec<Vec<String>> = a
        .pools
        .iter()
        .map(|p| {
            vec![
                format!("pool {}", p.name),
                format!("{}/{} in use", p.in_use, p.total),
            ]
        })
        .collect();
    write_rows(s, "  ", &rows);
    let rows: Vec<Vec<String>> = a
        .services
        .iter()
        .map(|sa| {
            let status = if sa.status.is_empty() {
                "none".to_owned()
            } else {
                let ips: Vec<String> = sa
                    .status
                    .iter()
                    .map(|ip| {
                        if a.outside.contains_key(ip) {
                            format!("{ip} (outside every pool)")
                        } else {
                            ip.to_string()
                        }
                    })
                    .collect();
                ips.join(", ")
            };
            let mut cells = vec![format!("service {}", sa.service)];
            match &sa.outcome {
                Outcome::Kept(h) => {
                    cells.push(format!("holds {} (pool {})", ips_text(&h.ips), h.pool));
                    cells.push("kept from its status".to_owned());
                }
                Outcome::New(h) => {
                    cells.push(format!("holds {} (pool {})", ips_text(&h.ips), h.pool));
                    cells.push(format!("newly allocated (status: {status})"));
                }
                Outcome::Pending(r) => {
                    cells.push("pending".to_owned());
                    cells.push(format!("{r} (status: {status})"));
                }
            }
            if let Some(w) = &sa.warning {
                let last = cells.len() - 1;
                // The allocator keeps what a Service holds while its request cannot be
                // read (a bad edit never takes an address away): say so beside it.
                cells[last].push_str(&format!("; request unreadable, ignored until fixed: {w}"));
            }
            cells
        })
        .collect();
    if rows.is_empty() {
        s.push_str("  (no LoadBalancer Services of the classes served)\n");
    }
    write_rows(s, "  ", &rows);
    if !a.outside.is_empty() {
        let _ = writeln!(
            s,
            "  status addresses outside every pool: {}: an allocator running on an earlier \
             config refuses this one until those Services change",
            outside_text(a)
        );
    }
    for u in &a.unreadable {
        let _ = writeln!(s, "  not read by the allocator (left alone): {u}");
    }
}

/// `IP (held by NS/NAME, ...)`, as the allocator's reload refusal names them.
fn outside_text(a: &AllocationView) -> String {
    a.outside
        .iter()
        .map(|(ip, by)| {
            let names: Vec<String> = by.iter().map(ToString::to_string).collect();
            format!("{ip} (held by {})", names.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn ips_text(ips: &[std::net::IpAddr]) -> String {
    ips.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A pool's size as a JSON number, or a string past `u64` (an IPv6 pool may hold more
/// addresses than a JSON number carries exactly).
fn count_json(n: u128) -> Value {
    u64::try_from(n).map_or_else(|_| json!(n.to_string()), |n| json!(n))
}

fn allocation_json(a: &AllocationView) -> Value {
    let strings =
        |ips: &[std::net::IpAddr]| -> Vec<String> { ips.iter().map(ToString::to_string).collect() };
    let pools: Vec<Value> = a
        .pools
        .iter()
        .map(|p| json!({ "name": &*p.name, "in_use": count_json(p.in_use), "total": count_json(p.total) }))
        .collect();
    let services: Vec<Value> = a
        .services
        .iter()
        .map(|sa| {
            let mut v = json!({
                "service": sa.service.to_string(),
                "status": strings(&sa.status),
                "warning": sa.warning.as_ref().map(ToString::to_string),
            });
            let fields = match &sa.outcome {
                Outcome::Kept(h) | Outcome::New(h) => json!({
                    "state": "holds",
                    "ips": strings(&h.ips),
                    "pool": &*h.pool,
                    "origin": if matches!(sa.outcome, Outcome::Kept(_)) { "kept" } else { "new" },
                }),
                Outcome::Pending(r) => json!({
                    "state": "pending",
                    "reason": r.label(),
                    "reason_text": r.to_string(),
                }),
            };
            if let (Value::Object(map), Value::Object(more)) = (&mut v, fields) {
                map.extend(more);
            }
            v
        })
        .collect();
    let outside: Vec<Value> = a
        .outside
        .iter()
        .map(|(ip, by)| {
            json!({
                "ip": ip.to_string(),
                "services": by.iter().map(ToString::to_string).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "what": ALLOCATION_WHAT,
        "pools": pools,
        "services": services,
        "pending": a.pending().count(),
        "status_outside_pools": outside,
        "unreadable": a.unreadable,
    })
}

fn lb_json(lb: &LbPlanned) -> Value {
    let services: Vec<Value> = lb
        .planner
        .decisions()
        .iter()
        .filter(|(_, d)| d.reason != Some(LbReason::NotLoadBalancer))
        .map(|(key, d)| {
            let ips: Vec<Value> = d
                .ips
                .iter()
                .map(|p| match p {
                    IpPlacement::Bgp { ip, pool } => {
                        json!({ "ip": ip.to_string(), "pool": &**pool, "protocol": "bgp" })
                    }
                    IpPlacement::Layer2 { ip, pool } => {
                        json!({ "ip": ip.to_string(), "pool": &**pool, "protocol": "layer2" })
                    }
                    IpPlacement::Outside { ip } => json!({ "ip": ip.to_string(), "pool": null }),
                })
                .collect();
            let mut prefixes: Vec<String> = d.routes.iter().map(|(p, _)| p.to_string()).collect();
            prefixes.dedup();
            json!({
                "service": key.to_string(),
                "announced": d.announced(),
                "reason": d.reason.map(LbReason::as_str),
                "reason_text": d.reason.map(LbReason::describe),
                "policy": policy_text(d),
                "class": d.class.as_deref(),
                "ips": ips,
                "ingress_without_ip": d.refused,
                "endpoints": { "ready": d.endpoints.ready, "here": d.endpoints.here },
                "routes": prefixes,
            })
        })
        .collect();
    json!({
        "announced": lb.enabled.on,
        "why": lb.enabled.why,
        "routes": lb.planner.routes().len(),
        "services": services,
    })
}

/// Every warning of a plan, in a fixed order: the local node, the view (IPAM, drift,
/// refused prefixes), the config (peer clashes, address pools), then the planner's own
/// findings (conflicts between nodes, prefixes without a next hop).
pub fn warnings(
    plan: &Plan,
    view: &NodeView,
    config: &Config,
    lb: &LbPlanned,
    cilium: &ConflictDecision,
) -> Vec<Warning> {
    let mut out = Vec::new();
    if let Some(conflict) = &cilium.conflict {
        // `run` makes the same decision (routes::cilium) from the same cilium-config:
        // under `hold` the sessions below would not be opened.
        let effect = if cilium.holding() {
            "`run` would open and accept no new session until it is off \
             (--cilium-bgp-conflict hold); sessions already Established stay"
        } else {
            "`run` would report it and open the sessions (--cilium-bgp-conflict ignore)"
        };
        out.push(Warning::new(
            "cilium-bgp-conflict",
            format!("{conflict}: {effect}; {}", cilium::ADVICE),
            json!({
                "keys": &conflict.keys,
                "policy": cilium.policy.as_str(),
                "holding": cilium.holding(),
            }),
        ));
    }
    if !plan.node_present {
        out.push(Warning::new(
            "node-missing",
            format!(
                "node {} is not in the cluster state: no peer is selected and nothing is \
                 announced",
                plan.node
            ),
            json!({ "node": &*plan.node }),
        ));
    }
    for w in &view.warnings {
        let kind = match w {
            ViewWarning::CiliumConfigAbsent => "cilium-config-absent",
            ViewWarning::ClusterPoolUnknown { .. } => "cluster-pool-unknown",
            ViewWarning::PoolRangesUnknown { .. } => "pod-ip-pool-unknown",
        };
        out.push(Warning::new(kind, w.to_string(), json!({})));
    }
    if !plan.announce_pod_cidrs {
        out.push(Warning::new(
            "announce-disabled",
            "the bgp-config's speaker.announce-pod-cidrs is false: no pod CIDR is announced".into(),
            json!({}),
        ));
    }
    for f in &plan.pools {
        let fields = match f {
            PoolFinding::Inactive { peers, ipam } => json!({
                "peers": peers.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "ipam": ipam.as_str(),
            }),
            PoolFinding::NotAnnounced {
                peer,
                node,
                pool,
                prefixes,
            } => json!({
                "peer": peer.to_string(),
                "node": &**node,
                "pool": pool,
                "prefixes": strings(prefixes),
            }),
        };
        out.push(Warning::new(f.kind(), f.to_string(), fields));
    }
    let announced_object = view.ipam.object();
    for (name, node) in &view.nodes {
        if let Some(drift) = &node.drift {
            out.push(Warning::new(
                "drift",
                format!(
                    "drift on node {name} ({drift}): ipam {} announces the {announced_object} \
                     CIDRs",
                    view.ipam
                ),
                json!({
                    "node": &**name,
                    "node_cidrs": strings(&drift.node_cidrs),
                    "cilium_node_cidrs": strings(&drift.cilium_cidrs),
                    "announced": announced_object,
                }),
            ));
        }
    }
    for (name, node) in &view.nodes {
        for (prefix, refusal) in &node.refused {
            out.push(Warning::new(
                "refused",
                format!("{prefix} of node {name} is not announced: {refusal}"),
                json!({
                    "node": &**name,
                    "prefix": prefix.to_string(),
                    "reason": refusal.to_string(),
                }),
            ));
        }
    }
    for c in &plan.peer_conflicts {
        out.push(Warning::new(
            "peer-conflict",
            c.to_string(),
            json!({ "peer": c.key.to_string(), "indexes": &c.indexes }),
        ));
    }
    lb_warnings(&mut out, plan, view, config, lb);
    for c in &plan.conflicts {
        let (kind, fields) = match c {
            Conflict::SamePrefix {
                prefix,
                owner,
                others,
            } => (
                "same-prefix",
                json!({
                    "prefix": prefix.to_string(),
                    "owner": &**owner,
                    "others": others.iter().map(|o| &**o).collect::<Vec<_>>(),
                }),
            ),
            Conflict::Overlap {
                covering,
                covering_node,
                covered,
                covered_node,
            } => (
                "overlap",
                json!({
                    "covering": covering.to_string(),
                    "covering_node": &**covering_node,
                    "covered": covered.to_string(),
                    "covered_node": &**covered_node,
                }),
            ),
        };
        out.push(Warning::new(kind, c.to_string(), fields));
    }
    for u in &plan.unannounceable {
        let fields = match u.reason {
            UnannounceableReason::NoInternalIp { family } => json!({
                "node": &*u.node,
                "prefix": u.prefix.to_string(),
                "family": family.to_string(),
            }),
            UnannounceableReason::NoNextHop { peer, why } => json!({
                "node": &*u.node,
                "prefix": u.prefix.to_string(),
                "family": why.family.to_string(),
                "peer": peer.to_string(),
            }),
        };
        out.push(Warning::new("no-next-hop", u.to_string(), fields));
    }
    for index in unused_next_hop_fields(plan) {
        out.push(Warning::new(
            "next-hop-unused",
            format!(
                "peers[{index}] next-hop-v4/next-hop-v6 is not used with announce cluster: \
                 each route's next hop is its own node's InternalIP"
            ),
            json!({ "index": index }),
        ));
    }
    out
}

/// The table: the node, each session with its routes, the peers not selected, warnings.
pub fn table(
    plan: &Plan,
    view: &NodeView,
    config: &Config,
    lb: &LbPlanned,
    cilium: &ConflictDecision,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", header(plan, view));
    for p in plan.peers.values() {
        let _ = writeln!(s, "peer {}{}", peer_identity(&p.peer), session_details(p));
        if p.routes.is_empty() {
            s.push_str("  (no routes)\n");
        }
        let rows: Vec<Vec<String>> = p
            .routes
            .iter()
            .map(|(prefix, route)| route_cells(*prefix, route, plan, &p.peer))
            .collect();
        write_rows(&mut s, "  ", &rows);
        let lb_routes = lb_routes_of(p, lb);
        if !lb_routes.is_empty() {
            let _ = writeln!(s, "  loadbalancer routes: {}", lb_routes.len());
            let rows: Vec<Vec<String>> = lb_routes
                .iter()
                .map(|(prefix, attrs)| {
                    let route = PlannedRoute {
                        attrs: attrs.clone(),
                        node: plan.node.clone(),
                    };
                    route_cells(*prefix, &route, plan, &p.peer)
                })
                .collect();
            write_rows(&mut s, "    ", &rows);
        }
    }
    for peer in plan.unselected.iter().filter_map(|i| config.peers.get(*i)) {
        let selectors: Vec<String> = peer.node_selectors.iter().map(|s| s.to_string()).collect();
        let _ = writeln!(
            s,
            "peer {} peers[{}] not selected for this node (selector{} {})",
            peer_identity(peer),
            peer.index,
            if selectors.len() == 1 { "" } else { "s" },
            selectors.join(" | ")
        );
    }
    lb_table(&mut s, config, lb);
    if let Some(a) = &lb.allocation {
        allocation_table(&mut s, a);
    }
    let warnings = warnings(plan, view, config, lb, cilium);
    if warnings.is_empty() {
        s.push_str("warnings: none\n");
    } else {
        s.push_str("warnings:\n");
        for w in &warnings {
            let _ = writeln!(s, "  {}", w.message);
        }
    }
    s
}

/// The JSON document: the same facts as [`table`].
pub fn json_value(
    plan: &Plan,
    view: &NodeView,
    config: &Config,
    lb: &LbPlanned,
    cilium: &ConflictDecision,
) -> Value {
    let labels = view.nodes.get(&*plan.node).map(|n| &*n.labels);
    let peers: Vec<Value> = plan
        .peers
        .values()
        .map(|p| {
            let mut v = peer_json(&p.peer);
            if let Value::Object(map) = &mut v {
                map.insert("source_address".into(), json!(p.source_address));
                map.insert(
                    "lb_routes".into(),
                    Value::Array(
                        lb_routes_of(p, lb)
                            .iter()
                            .map(|(prefix, attrs)| {
                                let mut r = attrs_json(attrs);
                                if let Value::Object(m) = &mut r {
                                    m.insert("prefix".into(), json!(prefix.to_string()));
                                }
                                r
                            })
                            .collect(),
                    ),
                );
                map.insert(
                    "routes".into(),
                    Value::Array(
                        p.routes
                            .iter()
                            .map(|(prefix, route)| {
                                let mut r = attrs_json(&route.attrs);
                                if let Value::Object(m) = &mut r {
                                    m.insert("prefix".into(), json!(prefix.to_string()));
                                    m.insert("node".into(), json!(&*route.node));
                                    m.insert(
                                        "needs_extended_next_hop".into(),
                                        json!(needs_extended_next_hop(
                                            family_of(prefix),
                                            &route.attrs.next_hop,
                                            &p.peer
                                        )),
                                    );
                                }
                                r
                            })
                            .collect(),
                    ),
                );
            }
            v
        })
        .collect();
    let unselected: Vec<Value> = plan
        .unselected
        .iter()
        .filter_map(|i| config.peers.get(*i))
        .map(|peer| {
            let mut v = peer_json(peer);
            if let Value::Object(map) = &mut v {
                map.insert(
                    "node_selectors".into(),
                    json!(peer
                        .node_selectors
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()),
                );
            }
            v
        })
        .collect();
    let warnings: Vec<Value> = warnings(plan, view, config, lb, cilium)
        .into_iter()
        .map(|w| {
            let mut map = w.fields;
            map.insert("kind".into(), json!(w.kind));
            map.insert("message".into(), json!(w.message));
            Value::Object(map)
        })
        .collect();
    json!({
        "node": {
            "name": &*plan.node,
            "present": plan.node_present,
            "labels": labels,
        },
        "ipam": view.ipam.as_str(),
        "announce": plan.mode.as_str(),
        "announce_pod_cidr": plan.announce_pod_cidrs,
        "peers": peers,
        "unselected_peers": unselected,
        "lb": lb_json(lb),
        "allocation": lb.allocation.as_ref().map(allocation_json),
        "warnings": warnings,
    })
}

fn header(plan: &Plan, view: &NodeView) -> String {
    let about = match view.nodes.get(&*plan.node) {
        None => "not in the cluster state".to_string(),
        Some(n) if n.labels.is_empty() => "no labels".to_string(),
        Some(n) => {
            let labels: Vec<String> = n.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("labels: {}", labels.join(", "))
        }
    };
    format!(
        "node {} ({about}) ipam {}, announce {}",
        plan.node, view.ipam, plan.mode
    )
}

/// `10.5.0.1:179 AS 65000 (eBGP, my AS 65083)`.
fn peer_identity(peer: &Peer) -> String {
    if peer.is_ibgp() {
        format!("{} AS {} (iBGP)", peer.key(), peer.peer_asn)
    } else {
        format!(
            "{} AS {} (eBGP, my AS {})",
            peer.key(),
            peer.peer_asn,
            peer.my_asn
        )
    }
}

/// ` peers[0], hold-time 90s, ...`: what the session is opened with.
fn session_details(p: &crate::routes::PeerPlan) -> String {
    let peer = &p.peer;
    let mut s = format!(
        " peers[{}], hold-time {}, keepalive {}",
        peer.index,
        Compact(peer.hold_time),
        Compact(peer.keepalive_time)
    );
    if let Some(id) = peer.router_id {
        let _ = write!(s, ", router-id {id}");
    }
    if let Some(a) = p.source_address {
        let _ = write!(s, ", source-address {a}");
    }
    if let Some(a) = peer.next_hop_v4 {
        let _ = write!(s, ", next-hop-v4 {a}");
    }
    if let Some(a) = peer.next_hop_v6 {
        let _ = write!(s, ", next-hop-v6 {a}");
    }
    if peer.password.is_some() {
        s.push_str(", md5");
    }
    if let Some(r) = &peer.password_secret {
        let _ = write!(s, ", md5 from {r}");
    }
    if peer.ebgp_multihop {
        s.push_str(", ebgp-multihop");
    }
    if peer.ttl_security {
        s.push_str(", ttl-security");
    }
    if peer.passive {
        s.push_str(", passive");
    }
    if let Some(b) = &peer.bfd_profile {
        let _ = write!(s, ", bfd-profile {b}");
    }
    if peer.graceful_restart {
        let _ = write!(
            s,
            ", graceful-restart {}",
            Compact(peer.graceful_restart_time)
        );
    }
    let n = p.routes.len();
    let _ = write!(s, ", {n} route{}", if n == 1 { "" } else { "s" });
    s
}

fn route_cells(
    prefix: ipnet::IpNet,
    route: &PlannedRoute,
    plan: &Plan,
    peer: &Peer,
) -> Vec<String> {
    let a = &route.attrs;
    let mut cells = vec![prefix.to_string()];
    if plan.mode == crate::routes::AnnounceMode::Cluster {
        cells.push(format!("node {}", route.node));
    }
    let mut next_hop = format!("next-hop {}", next_hop_text(&a.next_hop));
    if needs_extended_next_hop(family_of(&prefix), &a.next_hop, peer) {
        next_hop.push_str(" (RFC 8950 extended next hop: sent only if the peer offers it)");
    }
    cells.push(next_hop);
    cells.push(format!("origin {}", origin_name(a.origin)));
    cells.push(if a.as_path.is_empty() {
        "as-path (empty)".to_string()
    } else {
        let path: Vec<String> = a.as_path.iter().map(u32::to_string).collect();
        format!("as-path {}", path.join(" "))
    });
    if let Some(med) = a.med {
        cells.push(format!("med {med}"));
    }
    if let Some(lp) = a.local_pref {
        cells.push(format!("local-pref {lp}"));
    }
    let communities = community_strings(a);
    if !communities.is_empty() {
        cells.push(format!("communities {}", communities.join(",")));
    }
    cells
}

/// Writes rows with every column but the last padded to its widest cell.
fn write_rows(s: &mut String, indent: &str, rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            match widths.get_mut(i) {
                Some(w) => *w = (*w).max(cell.chars().count()),
                None => widths.push(cell.chars().count()),
            }
        }
    }
    for row in rows {
        let mut line = String::from(indent);
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i].saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
}

fn peer_json(peer: &Peer) -> Value {
    json!({
        "peer": peer.key().to_string(),
        "address": peer.address.to_string(),
        "port": peer.port,
        "index": peer.index,
        "peer_asn": peer.peer_asn,
        "my_asn": peer.my_asn,
        "session": if peer.is_ibgp() { "ibgp" } else { "ebgp" },
        "hold_time_seconds": peer.hold_time.as_secs(),
        "keepalive_time_seconds": peer.keepalive_time.as_secs(),
        "router_id": peer.router_id.map(|r| r.to_string()),
        "next_hop_v4": peer.next_hop_v4.map(|a| a.to_string()),
        "next_hop_v6": peer.next_hop_v6.map(|a| a.to_string()),
        "md5": peer.password.is_some() || peer.password_secret.is_some(),
        "md5_secret": peer.password_secret.as_ref().map(|r| json!({"name": r.name, "key": r.key})),
        "ebgp_multihop": peer.ebgp_multihop,
        "ttl_security": peer.ttl_security,
        "passive": peer.passive,
        "bfd_profile": peer.bfd_profile,
        "graceful_restart_seconds": peer
            .graceful_restart
            .then_some(peer.graceful_restart_time.as_secs()),
    })
}

fn attrs_json(a: &RouteAttrs) -> Value {
    json!({
        "next_hop": match a.next_hop {
            NextHop::SessionLocal => "session-local".to_string(),
            NextHop::Address(ip) => ip.to_string(),
        },
        "origin": origin_name(a.origin),
        "as_path": a.as_path,
        "med": a.med,
        "local_pref": a.local_pref,
        "communities": a.communities.iter().map(|c| Community(*c).to_string()).collect::<Vec<_>>(),
        "large_communities": a
            .large_communities
            .iter()
            .map(|l| format!("{}:{}:{}", l.global_admin, l.local_data1, l.local_data2))
            .collect::<Vec<_>>(),
    })
}

fn next_hop_text(next_hop: &NextHop) -> String {
    match next_hop {
        NextHop::SessionLocal => "<session local address>".to_string(),
        NextHop::Address(ip) => ip.to_string(),
    }
}

fn community_strings(a: &RouteAttrs) -> Vec<String> {
    a.communities
        .iter()
        .map(|c| Community(*c).to_string())
        .chain(a.large_communities.iter().map(large_text))
        .collect()
}

fn strings(nets: &[ipnet::IpNet]) -> Vec<String> {
    nets.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::{plan, AnnounceMode, LocalNode, Overrides};
    use crate::sources::model::{node_view, CiliumConfig, ClusterState, IpamOverride, NodeFacts};

    const CONFIG: &str = "
peers:
  - peer-address: 10.5.0.1
    peer-asn: 65000
    my-asn: 65083
    password: s3cret-md5-key
    pod-cidr-communities: [65083:100]
  - peer-address: 10.5.83.251
    peer-asn: 65083
    my-asn: 65083
    node-selectors: [{match-labels: {rack: a}}]
  - peer-address: 10.5.83.252
    peer-asn: 65083
    my-asn: 65083
    node-selectors: [{match-labels: {rack: b}}]
";

    /// Two nodes in cluster-pool mode: n1 drifts, n2 lists a CIDR outside the pool.
    fn view() -> NodeView {
        let mut state = ClusterState {
            cilium_config: Some(CiliumConfig {
                ipam: Some("cluster-pool".into()),
                cluster_pool_v4: vec!["10.5.112.0/20".parse().unwrap()],
                ..CiliumConfig::default()
            }),
            ..ClusterState::default()
        };
        state.nodes.insert(
            "n1".into(),
            NodeFacts {
                labels: std::sync::Arc::new([("rack".to_string(), "a".to_string())].into()),
                internal_ipv4: Some("192.168.10.11".parse().unwrap()),
                node_cidrs: vec!["10.5.112.0/24".parse().unwrap()],
                ..NodeFacts::default()
            },
        );
        state.nodes.insert("n2".into(), NodeFacts::default());
        state
            .cilium_nodes
            .insert("n1".into(), vec!["10.5.113.0/24".parse().unwrap()]);
        state
            .cilium_nodes
            .insert("n2".into(), vec!["10.9.0.0/24".parse().unwrap()]);
        node_view(&state, IpamOverride::Auto).unwrap()
    }

    fn lb_of(plan: &Plan, config: &Config) -> LbPlanned {
        LbPlanned::without_services(plan, config)
    }

    fn planned(mode: AnnounceMode) -> (Plan, NodeView, Config) {
        let view = view();
        let config = crate::config::parse(CONFIG).unwrap();
        let plan = plan(
            &view,
            &config,
            &LocalNode::new("n1"),
            mode,
            &Overrides::default(),
        );
        (plan, view, config)
    }

    #[test]
    fn table_shows_sessions_routes_unselected_peers_and_warnings() {
        let (plan, view, config) = planned(AnnounceMode::Local);
        let want = "\
node n1 (labels: rack=a) ipam cluster-pool, announce local
peer 10.5.0.1:179 AS 65000 (eBGP, my AS 65083) peers[0], hold-time 90s, keepalive 30s, md5, graceful-restart 120s, 1 route
  10.5.113.0/24  next-hop <session local address>  origin incomplete  as-path 65083  communities 65083:100
peer 10.5.83.251:179 AS 65083 (iBGP) peers[1], hold-time 90s, keepalive 30s, graceful-restart 120s, 1 route
  10.5.113.0/24  next-hop <session local address>  origin incomplete  as-path (empty)  local-pref 100
peer 10.5.83.252:179 AS 65083 (iBGP) peers[2] not selected for this node (selector rack=b)
warnings:
  drift on node n1 (Node [10.5.112.0/24] vs CiliumNode [10.5.113.0/24]): ipam cluster-pool announces the CiliumNode CIDRs
  10.9.0.0/24 of node n2 is not announced: outside the cluster pool [10.5.112.0/20]
";
        assert_eq!(
            table(
                &plan,
                &view,
                &config,
                &lb_of(&plan, &config),
                &ConflictDecision::default()
            ),
            want
        );
    }

    #[test]
    fn cluster_table_names_each_routes_node_and_its_next_hop() {
        let (plan, view, config) = planned(AnnounceMode::Cluster);
        let out = table(
            &plan,
            &view,
            &config,
            &lb_of(&plan, &config),
            &ConflictDecision::default(),
        );
        assert!(
            out.contains(
                "  10.5.113.0/24  node n1  next-hop 192.168.10.11  origin incomplete  \
                 as-path 65083  communities 65083:100\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn json_carries_the_same_facts_as_the_table() {
        let (plan, view, config) = planned(AnnounceMode::Local);
        let v = json_value(
            &plan,
            &view,
            &config,
            &lb_of(&plan, &config),
            &ConflictDecision::default(),
        );
        assert_eq!(v["node"]["name"], "n1");
        assert_eq!(v["node"]["labels"]["rack"], "a");
        assert_eq!(v["ipam"], "cluster-pool");
        assert_eq!(v["announce"], "local");
        let peers = v["peers"].as_array().unwrap();
        assert_eq!(peers.len(), 2);
        assert_eq!(peers[0]["peer"], "10.5.0.1:179");
        assert_eq!(peers[0]["md5"], true);
        assert_eq!(
            peers[0]["routes"],
            json!([{
                "prefix": "10.5.113.0/24",
                "node": "n1",
                "needs_extended_next_hop": false,
                "next_hop": "session-local",
                "origin": "incomplete",
                "as_path": [65083],
                "med": null,
                "local_pref": null,
                "communities": ["65083:100"],
                "large_communities": [],
            }])
        );
        assert_eq!(peers[1]["routes"][0]["local_pref"], 100);
        assert_eq!(v["unselected_peers"][0]["peer"], "10.5.83.252:179");
        assert_eq!(
            v["unselected_peers"][0]["node_selectors"],
            json!(["rack=b"])
        );
        let kinds: Vec<&str> = v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["drift", "refused"]);
        assert_eq!(
            v["warnings"][0]["cilium_node_cidrs"],
            json!(["10.5.113.0/24"])
        );
    }

    #[test]
    fn cilium_s_embedded_speaker_on_is_a_warning_that_says_what_run_would_do() {
        use crate::routes::cilium::{decide, ConflictPolicy};
        use crate::sources::model::CiliumConfig;
        let (plan, view, config) = planned(AnnounceMode::Local);
        let lb = lb_of(&plan, &config);
        let keys_on = CiliumConfig {
            announce_lb_ip: Some(true),
            ..CiliumConfig::default()
        };
        let kinds = |cilium: &ConflictDecision| -> Vec<Warning> {
            warnings(&plan, &view, &config, &lb, cilium)
                .into_iter()
                .filter(|w| w.kind == "cilium-bgp-conflict")
                .collect()
        };
        let held = kinds(&decide(ConflictPolicy::Hold, Some(&keys_on)));
        assert_eq!(held.len(), 1, "{held:?}");
        assert!(
            held[0].message.contains("bgp-announce-lb-ip: true"),
            "{held:?}"
        );
        assert!(held[0].message.contains("no new session"), "{held:?}");
        assert_eq!(held[0].fields["holding"], json!(true));
        assert_eq!(held[0].fields["keys"], json!(["bgp-announce-lb-ip"]));

        let ignored = kinds(&decide(ConflictPolicy::Ignore, Some(&keys_on)));
        assert_eq!(ignored[0].fields["holding"], json!(false), "{ignored:?}");
        assert!(ignored[0].message.contains("--cilium-bgp-conflict ignore"));

        let off = CiliumConfig {
            announce_lb_ip: Some(false),
            announce_pod_cidr: Some(false),
            ..CiliumConfig::default()
        };
        assert!(kinds(&decide(ConflictPolicy::Hold, Some(&off))).is_empty());
        assert!(kinds(&decide(ConflictPolicy::Hold, None)).is_empty());
        // The table shows it among the warnings.
        let text = table(
            &plan,
            &view,
            &config,
            &lb,
            &decide(ConflictPolicy::Hold, Some(&keys_on)),
        );
        assert!(text.contains("Cilium's embedded BGP speaker"), "{text}");
    }

    #[test]
    fn passwords_are_never_rendered() {
        for mode in [AnnounceMode::Local, AnnounceMode::Cluster] {
            let (plan, view, config) = planned(mode);
            for format in [Format::Table, Format::Json] {
                let out = render_plan(
                    &plan,
                    &view,
                    &config,
                    &lb_of(&plan, &config),
                    &ConflictDecision::default(),
                    format,
                );
                assert!(!out.contains("s3cret"), "{format:?}: {out}");
                assert!(out.contains("md5"), "{format:?}: {out}");
            }
        }
    }

    #[test]
    fn a_password_secret_shows_as_its_reference() {
        let text = CONFIG.replacen(
            "password: s3cret-md5-key",
            "password-secret: {name: bgp-peer-passwords, key: tor-a}",
            1,
        );
        let config = crate::config::parse(&text).unwrap();
        let view = view();
        let plan = plan(
            &view,
            &config,
            &LocalNode::new("n1"),
            AnnounceMode::Local,
            &Overrides::default(),
        );
        let out = table(
            &plan,
            &view,
            &config,
            &lb_of(&plan, &config),
            &ConflictDecision::default(),
        );
        assert!(
            out.contains(
                "keepalive 30s, md5 from secret bgp-peer-passwords key tor-a, graceful-restart 120s, 1 route"
            ),
            "{out}"
        );
        let json = render_plan(
            &plan,
            &view,
            &config,
            &lb_of(&plan, &config),
            &ConflictDecision::default(),
            Format::Json,
        );
        let v: Value = serde_json::from_str(&json).unwrap();
        let peer = &v["peers"][0];
        assert_eq!(peer["md5"], true, "{json}");
        assert_eq!(
            peer["md5_secret"],
            json!({"name": "bgp-peer-passwords", "key": "tor-a"})
        );
    }

    #[test]
    fn conflicts_pools_and_missing_next_hops_are_warnings() {
        let config = crate::config::parse(
            "
peers: [{peer-address: 10.5.0.1, peer-asn: 65000, my-asn: 65083}]
address-pools: [{name: lb, protocol: bgp, addresses: [10.96.0.0/24]}]
",
        )
        .unwrap();
        let mut state = ClusterState {
            cilium_config: Some(CiliumConfig {
                ipam: Some("kubernetes".into()),
                ..CiliumConfig::default()
            }),
            ..ClusterState::default()
        };
        for (name, cidrs) in [
            ("a", &["10.0.0.0/16"][..]),
            ("b", &["10.0.1.0/24", "fd00::/64"][..]),
            ("c", &["10.0.1.0/24"][..]),
        ] {
            state.nodes.insert(
                name.into(),
                NodeFacts {
                    internal_ipv4: Some("192.168.0.1".parse().unwrap()),
                    node_cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
                    ..NodeFacts::default()
                },
            );
        }
        let view = node_view(&state, IpamOverride::Auto).unwrap();
        let plan = plan(
            &view,
            &config,
            &LocalNode::new("a"),
            AnnounceMode::Cluster,
            &Overrides::default(),
        );
        let got: Vec<(&str, String)> = warnings(
            &plan,
            &view,
            &config,
            &lb_of(&plan, &config),
            &ConflictDecision::default(),
        )
        .into_iter()
        .map(|w| (w.kind, w.message))
        .collect();
        assert_eq!(
            got,
            vec![
                (
                    "address-pool-not-announced",
                    "address pool \"lb\" (10.96.0.0/24) is not announced: --announce cluster: \
                     each node's speaker announces its own LoadBalancer IPs"
                        .to_string()
                ),
                (
                    "same-prefix",
                    "10.0.1.0/24 is listed by nodes b, c: only b announces it (the name that \
                     sorts first)"
                        .to_string()
                ),
                (
                    "overlap",
                    "10.0.0.0/16 of node a covers 10.0.1.0/24 of node b: both are announced, \
                     the more specific prefix wins its own space"
                        .to_string()
                ),
                (
                    "no-next-hop",
                    "fd00::/64 of node b is not announced: the node has no ipv6 InternalIP \
                     for the next hop"
                        .to_string()
                ),
            ]
        );
    }

    #[test]
    fn format_parses_its_flag_values() {
        assert_eq!("table".parse::<Format>().unwrap(), Format::Table);
        assert_eq!("json".parse::<Format>().unwrap(), Format::Json);
        assert_eq!(
            "yaml".parse::<Format>().unwrap_err().to_string(),
            "--output: \"yaml\" must be table or json"
        );
    }
}
