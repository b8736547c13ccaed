//! How a [`Diagnosis`] is shown: the per-node table, the problems and warnings, as
//! `doctor` prints them. Must not: find anything (the diagnosis has it all).

use std::fmt;

use ipnet::IpNet;

use super::super::table::Table;
use super::diagnose::{AllocationCheck, BgpConfigCheck, Diagnosis, NodeDiagnosis};
use crate::sources::model::{CidrList, CidrSource, IpamMode};

impl fmt::Display for Diagnosis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.ipam {
            Ok(mode) => writeln!(f, "ipam mode: {mode} ({})", self.origin)?,
            Err(e) => writeln!(f, "ipam mode: undecided: {e}")?,
        }
        let pool = |p: &[IpNet]| {
            if p.is_empty() {
                "none".to_owned()
            } else {
                CidrList(p).to_string()
            }
        };
        writeln!(
            f,
            "cluster pool: ipv4 {}, ipv6 {}",
            pool(&self.pool_v4),
            pool(&self.pool_v6)
        )?;
        if self.ipam == Ok(IpamMode::MultiPool) {
            match &self.pod_ip_pools {
                None => writeln!(f, "CiliumPodIPPools: not read (CIDRs are not checked)")?,
                Some(pools) => {
                    for (name, ranges) in pools {
                        writeln!(
                            f,
                            "CiliumPodIPPool {name}: ipv4 {}, ipv6 {}",
                            pool(&ranges.ipv4),
                            pool(&ranges.ipv6)
                        )?;
                    }
                }
            }
        }
        writeln!(f)?;

        let mut table = Table::new([
            "NODE",
            "NODE CIDRS",
            "CILIUMNODE CIDRS",
            "IN FORCE",
            "DRIFT",
            "OVERLAPS",
            "OUTSIDE POOL",
        ]);
        for n in &self.nodes {
            let node_cidrs = match n.node.node_source {
                Some(CidrSource::NodeAnnotations) => {
                    format!("{} (annotations)", cidrs(&n.node.node_cidrs))
                }
                _ => cidrs(&n.node.node_cidrs),
            };
            let cilium = match &n.node.cilium_cidrs {
                None => "no CiliumNode".to_owned(),
                Some(c) => cidrs(c),
            };
            let in_force = match (&self.ipam, n.in_force) {
                (Err(_), _) => "? (ipam undecided)".to_owned(),
                (Ok(_), None) => "nothing".to_owned(),
                (Ok(_), Some(CidrSource::CiliumNode)) => {
                    format!("CiliumNode {}", cidrs(&n.in_force_cidrs))
                }
                (Ok(_), Some(CidrSource::CiliumNodePools)) => {
                    let pools: Vec<String> = n
                        .node
                        .pools
                        .iter()
                        .map(|p| format!("{} {}", p.pool, CidrList(&p.cidrs)))
                        .collect();
                    format!("CiliumNode pools {}", pools.join(", "))
                }
                (Ok(_), Some(_)) => format!("Node {}", cidrs(&n.in_force_cidrs)),
            };
            let overlaps = if n.overlaps.is_empty() {
                "-".to_owned()
            } else {
                n.overlaps
                    .iter()
                    .map(|(p, other, _)| format!("{p} with {other}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            table.row([
                n.node.name.to_string(),
                node_cidrs,
                cilium,
                in_force,
                if n.node.drift.is_some() { "yes" } else { "no" }.to_owned(),
                overlaps,
                cidrs(&n.outside_pool),
            ]);
        }
        write!(f, "{table}")?;

        if !self.orphan_cilium_nodes.is_empty() {
            writeln!(
                f,
                "\nCiliumNodes without a Node (not announced): {}",
                self.orphan_cilium_nodes.join(", ")
            )?;
        }
        writeln!(f, "\nset-up for the speaker:")?;
        match &self.cilium_bgp {
            None => writeln!(f, "  cilium's embedded BGP: off")?,
            Some(_) => writeln!(f, "  cilium's embedded BGP: ON (see problems)")?,
        }
        writeln!(f, "  bgp-config: {}", self.bgp_config)?;
        let allocation_warnings = self.allocation.as_ref().map(allocation_warnings);
        match (&self.bgp_config, &self.allocator) {
            _ if self.allocation.is_some() => {
                if let Some(a) = &self.allocation {
                    let pools: Vec<String> = a
                        .pools
                        .iter()
                        .map(|p| format!("{} {}/{}", p.name, p.in_use, p.total))
                        .collect();
                    let pending = if a.pending.is_empty() {
                        "no LoadBalancer Service pending an IP".to_owned()
                    } else {
                        format!(
                            "{} Service(s) pending an IP (see warnings)",
                            a.pending.len()
                        )
                    };
                    writeln!(
                        f,
                        "  loadbalancer ip allocation: {pending}; addresses in use from \
                         scratch: {}",
                        pools.join(", ")
                    )?;
                    writeln!(f, "  allocator: {}", a.lease)?;
                }
            }
            (_, Some(a)) => writeln!(
                f,
                "  loadbalancer ip allocation: {} Service(s) pending an IP (see warnings)",
                a.pending.len()
            )?,
            (BgpConfigCheck::Valid { bgp_pools: 0, .. }, None) => writeln!(
                f,
                "  loadbalancer ip allocation: no bgp address-pool, no LoadBalancer IP wanted"
            )?,
            (BgpConfigCheck::Valid { .. }, None) => writeln!(
                f,
                "  loadbalancer ip allocation: no LoadBalancer Service pending an IP"
            )?,
            _ => {}
        }
        let allocation_warnings = allocation_warnings.unwrap_or_default();
        let allocator = self
            .allocator
            .as_ref()
            .filter(|_| self.allocation.is_none());
        if !self.warnings.is_empty() || allocator.is_some() || !allocation_warnings.is_empty() {
            writeln!(f, "\nwarnings:")?;
            for w in &self.warnings {
                writeln!(f, "  {w}")?;
            }
            if let Some(a) = allocator {
                writeln!(f, "  {a}")?;
            }
            for w in &allocation_warnings {
                writeln!(f, "  {w}")?;
            }
        }
        let problems = self.problems();
        if !problems.is_empty() {
            writeln!(f, "\nproblems:")?;
            for p in &problems {
                writeln!(f, "  {p}")?;
            }
        }
        let count =
            |pred: fn(&NodeDiagnosis) -> bool| self.nodes.iter().filter(|n| pred(n)).count();
        writeln!(
            f,
            "\n{} nodes: {} with drift, {} overlapping, {} outside the pool: {}",
            self.nodes.len(),
            count(|n| n.node.drift.is_some()),
            count(|n| !n.overlaps.is_empty()),
            count(|n| !n.outside_pool.is_empty()),
            if self.ok() { "ok" } else { "NOT OK" }
        )
    }
}

/// The allocation check's warnings: the pending Services with the allocator's answer,
/// what to do when it would serve some of them, the Services whose status it would
/// change, the Services it cannot read.
fn allocation_warnings(a: &AllocationCheck) -> Vec<String> {
    let mut out = Vec::new();
    if !a.pending.is_empty() {
        out.push(a.pending_text());
    }
    let n = a.allocatable_pending();
    if n > 0 {
        out.push(if a.lease.is_held() {
            format!(
                "the allocator would give {n} of them an address, and podcidr-speaker \
                 allocate runs: a Service created a moment ago waits for its write; else \
                 its log, its /status and its podcidr_allocator_status_writes_total say why"
            )
        } else {
            format!(
                "the allocator would give {n} of them an address, but no allocator has \
                 written their status.loadBalancer.ingress. Run one on the same ranges: \
                 podcidr-speaker allocate, MetalLB's controller alone on this same \
                 bgp-config (its speaker not deployed), or Cilium LB-IPAM (a \
                 CiliumLoadBalancerIPPool with the pools' addresses, Cilium 1.13 and later)"
            )
        });
    }
    if !a.changed.is_empty() {
        out.push(a.changed_text());
    }
    for u in &a.unreadable {
        out.push(format!(
            "not read by the allocator (it leaves it alone): {u}"
        ));
    }
    out
}

fn cidrs(list: &[IpNet]) -> String {
    if list.is_empty() {
        return "-".to_owned();
    }
    list.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
