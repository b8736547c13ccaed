//! What `podcidr-speaker allocate` would decide, for `plan` and `doctor`: the
//! allocator (`crate::alloc`) run from scratch over a set of Services, exactly as a
//! leader starting does (every Service applied, then `synced()`: status addresses are
//! claimed before anything new is handed out), and its answer gathered per Service and
//! per pool ([`AllocationView`]).
//!
//! Must not: decide (the allocator does, and this only reads its states and
//! decisions), read a file or the API server (the callers hand the Service objects in),
//! or word anything (each command renders the view its own way).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;

use crate::alloc::{Allocator, Holding, PoolUsage, Reason, State};
use crate::allocate::objects::alloc_facts;
use crate::config::AddressPool;
use crate::sources::services::ObjectKey;

/// The allocator's answer over a set of Services, from scratch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocationView {
    /// The LoadBalancer Services of the classes served, in key order.
    pub services: Vec<ServiceAllocation>,
    /// Per pool, in config order: its size and the addresses in use.
    pub pools: Vec<PoolUsage>,
    /// Status addresses the config leaves outside every pool (or on an address
    /// `avoid-buggy-ips` skips), with the Services whose status shows them: what a
    /// running allocator would refuse this config for (`Allocator::status_outside`).
    pub outside: BTreeMap<IpAddr, Vec<ObjectKey>>,
    /// Services the allocator cannot read (a value the API server would refuse), with
    /// why: the allocator leaves them alone.
    pub unreadable: Vec<String>,
}

/// One LoadBalancer Service: what its status shows, and what the allocator gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAllocation {
    pub service: ObjectKey,
    /// `status.loadBalancer.ingress`'s addresses as the input has them.
    pub status: Vec<IpAddr>,
    pub outcome: Outcome,
    /// A request that cannot be read while the Service keeps what it holds.
    pub warning: Option<Reason>,
}

/// What the allocator gives one Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Exactly the addresses its status shows: nothing would be written.
    Kept(Holding),
    /// Addresses that differ from its status: written to it.
    New(Holding),
    /// No address, for this reason (its status would be emptied).
    Pending(Reason),
}

impl Outcome {
    pub fn holding(&self) -> Option<&Holding> {
        match self {
            Outcome::Kept(h) | Outcome::New(h) => Some(h),
            Outcome::Pending(_) => None,
        }
    }
}

impl AllocationView {
    /// Runs the allocator from scratch over `services` with `pools`, serving the
    /// Services of `classes` (empty: those without a `loadBalancerClass`, `--lb-class`'s
    /// convention).
    pub fn from_scratch<'a>(
        pools: &[AddressPool],
        classes: &[String],
        services: impl IntoIterator<Item = &'a Service>,
    ) -> AllocationView {
        let classes: BTreeSet<Arc<str>> = classes.iter().map(|c| Arc::from(c.as_str())).collect();
        let mut allocator = Allocator::new(pools, classes);
        let mut unreadable = Vec::new();
        let mut warnings: BTreeMap<ObjectKey, Option<Reason>> = BTreeMap::new();
        let mut decisions = Vec::new();
        for service in services {
            match alloc_facts(service) {
                Ok((key, facts)) => decisions.extend(allocator.apply(&key, Some(facts))),
                Err(e) => unreadable.push(e.to_string()),
            }
        }
        decisions.extend(allocator.synced());
        // The last decision about a Service carries its current warning.
        for d in decisions {
            warnings.insert(d.service, d.warning);
        }
        let services = allocator
            .services()
            .filter_map(|(key, facts, state)| {
                let outcome = match state {
                    State::Holds(h) if same_addresses(&h.ips, &facts.status_ips) => {
                        Outcome::Kept(h.clone())
                    }
                    State::Holds(h) => Outcome::New(h.clone()),
                    State::Pending(r) => Outcome::Pending(r.clone()),
                    // `synced` decided every waiting Service; the rest are not ours.
                    State::NotOurs | State::Waiting => return None,
                };
                Some(ServiceAllocation {
                    service: key.clone(),
                    status: facts.status_ips.clone(),
                    outcome,
                    warning: warnings.get(key).cloned().flatten(),
                })
            })
            .collect();
        AllocationView {
            services,
            pools: allocator.usage(),
            outside: allocator.status_outside(),
            unreadable,
        }
    }

    /// The pending Services, in key order, with their reasons.
    pub fn pending(&self) -> impl Iterator<Item = (&ObjectKey, &Reason)> {
        self.services.iter().filter_map(|s| match &s.outcome {
            Outcome::Pending(r) => Some((&s.service, r)),
            _ => None,
        })
    }
}

/// The same addresses, whatever their order (the allocator compares sets when it
/// decides whether a Service keeps its status).
fn same_addresses(a: &[IpAddr], b: &[IpAddr]) -> bool {
    let a: BTreeSet<&IpAddr> = a.iter().collect();
    let b: BTreeSet<&IpAddr> = b.iter().collect();
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Protocol;
    use serde_json::json;

    fn pool(name: &str, cidrs: &[&str], auto_assign: bool) -> AddressPool {
        AddressPool {
            name: name.into(),
            protocol: Protocol::Bgp,
            cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
            avoid_buggy_ips: false,
            auto_assign,
            bgp_advertisements: Vec::new(),
        }
    }

    fn lb(name: &str, annotations: serde_json::Value, status: &[&str]) -> Service {
        let ingress: Vec<_> = status.iter().map(|ip| json!({ "ip": ip })).collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
            "spec": {"type": "LoadBalancer", "ipFamilies": ["IPv4"], "ports": [{"port": 80}]},
            "status": {"loadBalancer": {"ingress": ingress}}
        }))
        .unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    // A leader starting: "late" sorts before "web" yet may not take web's status
    // address, which is claimed first; the Service whose status lies outside every pool
    // is named, and waits for a new address like any other; a named pool out of room
    // leaves the next Service pending, and so does a pool that does not exist.
    #[test]
    fn status_first_then_new_then_pending_with_the_orphans_named() {
        let pools = [
            pool("a", &["10.0.0.0/31"], true),
            pool("b", &["10.1.0.0/32"], false),
        ];
        let services = [
            lb("late", json!({}), &[]),
            lb("web", json!({}), &["10.0.0.0"]),
            lb("moved", json!({}), &["192.0.2.7"]),
            lb(
                "full",
                json!({"metallb.universe.tf/address-pool": "b"}),
                &[],
            ),
            lb(
                "fuller",
                json!({"metallb.universe.tf/address-pool": "b"}),
                &[],
            ),
            lb(
                "typo",
                json!({"metallb.universe.tf/address-pool": "c"}),
                &[],
            ),
        ];
        let mut bad = lb("bad", json!({}), &[]);
        bad.spec.as_mut().unwrap().ip_families = Some(vec!["IPv5".into()]);
        let v = AllocationView::from_scratch(&pools, &[], services.iter().chain([&bad]));
        let of = |name: &str| {
            v.services
                .iter()
                .find(|s| s.service == ObjectKey::new("shop", name))
                .unwrap()
                .outcome
                .clone()
        };
        let holding = |ips: &[&str], pool: &str| Holding {
            ips: ips.iter().map(|s| ip(s)).collect(),
            pool: Arc::from(pool),
        };
        assert_eq!(of("web"), Outcome::Kept(holding(&["10.0.0.0"], "a")));
        // Key order after `synced`: "late" before "moved", both new.
        assert_eq!(of("late"), Outcome::New(holding(&["10.0.0.1"], "a")));
        assert_eq!(
            of("moved"),
            Outcome::Pending(Reason::AutoPoolsFull {
                families: vec![crate::alloc::Family::Ipv4]
            })
        );
        assert_eq!(of("full"), Outcome::New(holding(&["10.1.0.0"], "b")));
        assert!(matches!(
            of("fuller"),
            Outcome::Pending(Reason::PoolFull { .. })
        ));
        assert!(matches!(
            of("typo"),
            Outcome::Pending(Reason::UnknownPool { .. })
        ));
        assert_eq!(
            v.outside,
            BTreeMap::from([(ip("192.0.2.7"), vec![ObjectKey::new("shop", "moved")])])
        );
        assert_eq!(v.unreadable.len(), 1, "{:?}", v.unreadable);
        assert!(
            v.unreadable[0].contains("spec.ipFamilies[0]"),
            "{:?}",
            v.unreadable
        );
        let usage: Vec<(String, u128, u128)> = v
            .pools
            .iter()
            .map(|p| (p.name.to_string(), p.in_use, p.total))
            .collect();
        assert_eq!(usage, [("a".into(), 2, 2), ("b".into(), 1, 1)]);
        assert_eq!(v.pending().count(), 3);
    }
}
