//! What an operator should know about the LoadBalancer side, as values: the address
//! pools that are not announced or overlap a pod CIDR ([`pool_findings`]), the
//! LoadBalancer routes a peer gets none of for want of a next hop ([`no_next_hop`]), and
//! the Services' IPs audited against the pools and the pod CIDRs ([`audit`], for
//! `doctor`, which has no planner running). Each is worked out with the planner's own
//! rules (`LbContext::place`, `routes::layers`); `plan`, `doctor` and the daemon only
//! render them.
//!
//! Must not: format for people beyond `Display`, read files, or decide anything the
//! planner (`lb.rs`) does not.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use super::layers;
use super::lb::{IpPlacement, LbAttrs, LbContext, LbEnabled, LbProfile};
use super::next_hop::family_of;
use super::Family;
use crate::config::{Config, Protocol};
use crate::sources::model::NodeView;
use crate::sources::services::{LbFacts, ObjectKey};

/// Something about one address pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolFinding {
    /// A `protocol: layer2` pool: BGP never announces it.
    Layer2 { pool: String, cidrs: Vec<IpNet> },
    /// A bgp pool while LoadBalancer IPs are off (`why`: the on/off decision's reason).
    NotAnnounced {
        pool: String,
        cidrs: Vec<IpNet>,
        why: &'static str,
    },
    /// A pool's CIDR shares addresses with a node's pod CIDR: a LoadBalancer IP there is
    /// announced as its own, more specific route (`routes::layers`).
    OverlapsPodCidr {
        pool: String,
        cidr: IpNet,
        node: Arc<str>,
        pod_cidr: IpNet,
    },
}

/// The pool findings, pool by pool in config order: its state, then its overlaps with
/// the pod CIDRs of `view`.
pub fn pool_findings(config: &Config, enabled: LbEnabled, view: &NodeView) -> Vec<PoolFinding> {
    let mut out = Vec::new();
    for pool in &config.pools {
        if pool.protocol == Protocol::Layer2 {
            out.push(PoolFinding::Layer2 {
                pool: pool.name.clone(),
                cidrs: pool.cidrs.clone(),
            });
        } else if !enabled.on {
            out.push(PoolFinding::NotAnnounced {
                pool: pool.name.clone(),
                cidrs: pool.cidrs.clone(),
                why: enabled.why,
            });
        }
        for cidr in &pool.cidrs {
            for (node, entry) in &view.nodes {
                for pod in entry
                    .prefixes
                    .iter()
                    .filter(|p| layers::ranges_overlap(cidr, p))
                {
                    out.push(PoolFinding::OverlapsPodCidr {
                        pool: pool.name.clone(),
                        cidr: *cidr,
                        node: Arc::clone(node),
                        pod_cidr: *pod,
                    });
                }
            }
        }
    }
    out
}

/// LoadBalancer routes of one family that a peer gets none of: its profile has no next
/// hop of that family (`routes::next_hop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoNextHop {
    pub family: Family,
    /// How many routes of the family the planner holds.
    pub routes: usize,
}

/// The families of `routes` that `profile` cannot announce, with their route counts;
/// nothing while LoadBalancer IPs are off.
pub fn no_next_hop(
    profile: &LbProfile,
    routes: &BTreeMap<IpNet, Arc<LbAttrs>>,
    enabled: LbEnabled,
) -> Vec<NoNextHop> {
    [Family::Ipv4, Family::Ipv6]
        .into_iter()
        .filter(|f| enabled.on && profile.next_hops[*f as usize].is_none())
        .map(|family| NoNextHop {
            family,
            routes: routes.keys().filter(|r| family_of(r) == family).count(),
        })
        .filter(|n| n.routes > 0)
        .collect()
}

/// Something about one LoadBalancer Service's IPs, as `doctor` audits them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceFinding {
    /// No ingress IP: nothing to announce (`refused`: ingress entries without an IP).
    PendingIp {
        service: ObjectKey,
        refused: Vec<String>,
    },
    /// The IP lies outside every address pool of the bgp-config: not announced.
    OutsidePools { service: ObjectKey, ip: IpAddr },
    /// The IP lies in a layer2 pool: not announced by BGP.
    Layer2Pool {
        service: ObjectKey,
        ip: IpAddr,
        pool: Arc<str>,
    },
    /// The IP lies inside a node's pod CIDR: announced as its own, more specific route.
    InsidePodCidr {
        service: ObjectKey,
        ip: IpAddr,
        node: Arc<str>,
        pod_cidr: IpNet,
    },
}

impl fmt::Display for ServiceFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceFinding::PendingIp { service, refused } => {
                let refused = if refused.is_empty() {
                    String::new()
                } else {
                    format!(" (ingress without an IP: {})", refused.join(", "))
                };
                write!(
                    f,
                    "service {service}: LoadBalancer pending an IP{refused}: nothing to announce"
                )
            }
            ServiceFinding::OutsidePools { service, ip } => write!(
                f,
                "service {service}: LoadBalancer IP {ip} lies outside every address-pool of the \
                 bgp-config: not announced"
            ),
            ServiceFinding::Layer2Pool { service, ip, pool } => write!(
                f,
                "service {service}: LoadBalancer IP {ip} is in the layer2 address-pool {pool}: \
                 not announced by BGP"
            ),
            ServiceFinding::InsidePodCidr {
                service,
                ip,
                node,
                pod_cidr,
            } => write!(
                f,
                "service {service}: LoadBalancer IP {ip} lies inside the pod CIDR {pod_cidr} of \
                 node {node}: announced as its own, more specific route"
            ),
        }
    }
}

/// The LoadBalancer Services of `facts` audited, by Service: pending an IP; each IP
/// placed in the pools of `config` (when given) by the planner's rule; each IP inside
/// one of the pod CIDRs `pods` lists per node.
pub fn audit(
    facts: &LbFacts,
    config: Option<&Config>,
    pods: &[(Arc<str>, &[IpNet])],
) -> Vec<ServiceFinding> {
    let context = config.map(|c| LbContext::new(c, None, &[], true));
    let mut out = Vec::new();
    for (key, svc) in facts.services.iter().filter(|(_, s)| s.load_balancer) {
        if svc.ingress_ips.is_empty() {
            out.push(ServiceFinding::PendingIp {
                service: key.clone(),
                refused: svc.ingress_refused.clone(),
            });
        }
        for ip in &svc.ingress_ips {
            match context.as_ref().map(|c| c.place(*ip)) {
                Some(IpPlacement::Outside { ip }) => out.push(ServiceFinding::OutsidePools {
                    service: key.clone(),
                    ip,
                }),
                Some(IpPlacement::Layer2 { ip, pool }) => out.push(ServiceFinding::Layer2Pool {
                    service: key.clone(),
                    ip,
                    pool,
                }),
                Some(IpPlacement::Bgp { .. }) | None => {}
            }
            for (node, cidrs) in pods {
                for pod in layers::pod_cidrs_holding(*ip, cidrs) {
                    out.push(ServiceFinding::InsidePodCidr {
                        service: key.clone(),
                        ip: *ip,
                        node: Arc::clone(node),
                        pod_cidr: *pod,
                    });
                }
            }
        }
    }
    out
}

/// How many pending Services [`AllocatorMissing`] names; the rest are counted.
pub const PENDING_NAMED: usize = 5;

/// LoadBalancer Services pending an IP while the bgp-config has bgp address-pools:
/// LoadBalancer IPs are wanted and nothing has allocated them. The usual cause after a
/// migration (issue 29): Cilium 1.10-1.12's operator allocates from the bgp-config only
/// while its `bgp-announce-lb-ip` is on, so turning Cilium's BGP off stops allocation too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatorMissing {
    /// The pending Services, in order.
    pub pending: Vec<ObjectKey>,
    /// The bgp pools' names, in file order.
    pub pools: Vec<String>,
}

/// The [`AllocatorMissing`] finding of an [`audit`]'s findings under `config`: `None`
/// when no Service is pending or the config has no bgp pool (no LoadBalancer IP is
/// wanted from this speaker then).
pub fn allocator_missing(config: &Config, audit: &[ServiceFinding]) -> Option<AllocatorMissing> {
    let pools: Vec<String> = config
        .pools
        .iter()
        .filter(|p| p.protocol == Protocol::Bgp)
        .map(|p| p.name.clone())
        .collect();
    let pending: Vec<ObjectKey> = audit
        .iter()
        .filter_map(|f| match f {
            ServiceFinding::PendingIp { service, .. } => Some(service.clone()),
            _ => None,
        })
        .collect();
    (!pools.is_empty() && !pending.is_empty()).then_some(AllocatorMissing { pending, pools })
}

impl fmt::Display for AllocatorMissing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let named: Vec<String> = self
            .pending
            .iter()
            .take(PENDING_NAMED)
            .map(ToString::to_string)
            .collect();
        let more = self.pending.len().saturating_sub(PENDING_NAMED);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        write!(
            f,
            "{} LoadBalancer Service(s) pending an IP ({}{more}) while the bgp-config has bgp \
             address-pools ({}): no allocator has written their status.loadBalancer.ingress. \
             Run one on the same ranges: MetalLB's controller alone on this same bgp-config \
             (its speaker not deployed), Cilium LB-IPAM (a CiliumLoadBalancerIPPool with the \
             pools' addresses, Cilium 1.13 and later), or `podcidr-speaker allocate` (the \
             chart's allocator.enabled)",
            self.pending.len(),
            named.join(", "),
            self.pools.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(n: usize) -> Vec<ServiceFinding> {
        (0..n)
            .map(|i| ServiceFinding::PendingIp {
                service: ObjectKey::new("shop", &format!("s{i}")),
                refused: Vec::new(),
            })
            .collect()
    }

    const BGP_POOL: &str =
        "address-pools:\n- {name: public, protocol: bgp, addresses: [203.0.113.0/24]}\n";

    #[test]
    fn pending_services_with_bgp_pools_want_an_allocator() {
        let config = crate::config::parse(BGP_POOL).unwrap();
        let found = allocator_missing(&config, &pending(7)).unwrap();
        assert_eq!(found.pending.len(), 7);
        assert_eq!(found.pools, ["public"]);
        let text = found.to_string();
        assert!(
            text.starts_with(
                "7 LoadBalancer Service(s) pending an IP (shop/s0, shop/s1, shop/s2, shop/s3, \
                 shop/s4 and 2 more) while the bgp-config has bgp address-pools (public)"
            ),
            "{text}"
        );
        assert!(text.contains("MetalLB's controller") && text.contains("Cilium LB-IPAM"));
        assert_eq!(
            allocator_missing(&config, &pending(0)),
            None,
            "none pending"
        );
    }

    #[test]
    fn without_a_bgp_pool_no_allocator_is_asked_for() {
        let l2 = crate::config::parse(
            "address-pools:\n- {name: l2, protocol: layer2, addresses: [198.51.100.0/24]}\n",
        )
        .unwrap();
        assert_eq!(allocator_missing(&l2, &pending(3)), None);
        assert_eq!(allocator_missing(&Config::default(), &pending(3)), None);
    }
}
