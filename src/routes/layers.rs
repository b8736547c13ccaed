//! The layering of a peer's two route sets: the pod CIDR routes (`plan.rs`) and the
//! LoadBalancer routes (`lb.rs`). The rule: a pod CIDR wins over an equal LoadBalancer
//! prefix (BGP without ADD-PATH sends one path per prefix, and the pod CIDR is the
//! node's own range); a LoadBalancer prefix inside a pod CIDR is announced as its own,
//! more specific route (longest-prefix match sends its traffic to it).
//!
//! The Adj-RIB-Out calls [`walk`], [`diff`] and [`lb_sent`] to carry the rule out, one
//! prefix at a time for LoadBalancer deltas; the daemon, `plan` and `doctor` render the
//! findings [`LbOverPod::of`] and [`pod_cidrs_holding`] return. Nobody else compares
//! the two layers.
//!
//! Must not: decide which routes each layer holds (the planners do), or read the clock.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use super::{DesiredRoutes, RouteAttrs, RouteDiff};

/// Both layers as one walk in ascending prefix order, each prefix once: a prefix in
/// both is the pod CIDR's.
pub fn walk<'a>(
    pod: &'a DesiredRoutes,
    lb: &'a BTreeMap<IpNet, Arc<RouteAttrs>>,
) -> impl Iterator<Item = (&'a IpNet, &'a Arc<RouteAttrs>)> + 'a {
    let mut pod = pod.iter().map(|(p, r)| (p, &r.attrs)).peekable();
    let mut lb = lb.iter().peekable();
    std::iter::from_fn(move || match (pod.peek(), lb.peek()) {
        (Some((a, _)), Some((b, _))) => match a.cmp(b) {
            Ordering::Less => pod.next(),
            Ordering::Greater => lb.next(),
            Ordering::Equal => {
                lb.next();
                pod.next()
            }
        },
        (Some(_), None) => pod.next(),
        (None, _) => lb.next(),
    })
}

/// What to send to move a peer from `held` to both layers ([`super::diff`] over
/// [`walk`]).
pub fn diff<H: AsRef<RouteAttrs>>(
    held: &BTreeMap<IpNet, H>,
    pod: &DesiredRoutes,
    lb: &BTreeMap<IpNet, Arc<RouteAttrs>>,
) -> RouteDiff {
    super::diff_sorted(held, walk(pod, lb))
}

/// Whether the LoadBalancer route of `prefix` goes out: not while the pod CIDR layer
/// holds the same prefix. O(log pod), so a LoadBalancer delta costs its own prefixes.
pub fn lb_sent(pod: &DesiredRoutes, prefix: &IpNet) -> bool {
    !pod.contains_key(prefix)
}

/// What the layering does to a node's LoadBalancer routes, as a finding: the prefixes
/// a pod CIDR shadows, and the routes inside a pod CIDR (announced on their own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LbOverPod {
    /// LoadBalancer prefixes equal to a pod CIDR: the pod CIDR route is announced, the
    /// LoadBalancer one is not. Sorted.
    pub shadowed: Vec<IpNet>,
    /// LoadBalancer prefixes strictly inside a pod CIDR, with that pod CIDR: each is
    /// announced as its own, more specific route. Sorted by pod CIDR, then prefix.
    pub inside: Vec<(IpNet, IpNet)>,
}

impl LbOverPod {
    /// The finding for the pod CIDRs `pod` of a node and its LoadBalancer routes `lb`.
    /// O(pod x log lb + the routes inside), so a caller may run it per delta.
    pub fn of<V>(pod: &[IpNet], lb: &BTreeMap<IpNet, V>) -> LbOverPod {
        let mut pods: Vec<IpNet> = pod.iter().map(IpNet::trunc).collect();
        pods.sort_unstable();
        pods.dedup();
        let mut out = LbOverPod::default();
        for pod in &pods {
            for (p, _) in lb.range(*pod..).take_while(|(p, _)| pod.contains(*p)) {
                if p == pod {
                    out.shadowed.push(*p);
                } else {
                    out.inside.push((*p, *pod));
                }
            }
        }
        out.shadowed.sort_unstable();
        out
    }

    pub fn is_empty(&self) -> bool {
        self.shadowed.is_empty() && self.inside.is_empty()
    }
}

/// The pod CIDRs among `pod` that hold the address `ip`: a LoadBalancer IP there is
/// announced as its own, more specific route.
pub fn pod_cidrs_holding(ip: IpAddr, pod: &[IpNet]) -> impl Iterator<Item = &IpNet> {
    pod.iter().filter(move |c| c.contains(&ip))
}

/// Whether an address range (an address pool's CIDR) and a pod CIDR share addresses:
/// a LoadBalancer IP in the shared part is announced inside the pod range.
pub fn ranges_overlap(range: &IpNet, pod: &IpNet) -> bool {
    range.contains(pod) || pod.contains(range)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bgp::wire::Origin;
    use crate::routes::{NextHop, PlannedRoute};

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn attrs(med: u32) -> Arc<RouteAttrs> {
        Arc::new(RouteAttrs {
            origin: Origin::Igp,
            as_path: vec![],
            next_hop: NextHop::SessionLocal,
            med: Some(med),
            local_pref: None,
            communities: vec![],
            large_communities: vec![],
        })
    }

    fn pod(prefixes: &[&str]) -> DesiredRoutes {
        prefixes
            .iter()
            .map(|p| {
                (
                    net(p),
                    PlannedRoute {
                        attrs: attrs(1),
                        node: Arc::from("n1"),
                    },
                )
            })
            .collect()
    }

    fn lb(prefixes: &[&str]) -> BTreeMap<IpNet, Arc<RouteAttrs>> {
        prefixes.iter().map(|p| (net(p), attrs(2))).collect()
    }

    #[test]
    fn the_pod_cidr_wins_an_equal_prefix_and_the_walk_is_sorted() {
        let pod = pod(&["10.0.1.0/24", "10.0.3.0/24"]);
        let lb = lb(&["10.0.1.0/24", "10.0.1.7/32", "10.0.2.0/24"]);
        let walked: Vec<(String, Option<u32>)> = walk(&pod, &lb)
            .map(|(p, a)| (p.to_string(), a.med))
            .collect();
        assert_eq!(
            walked,
            [
                ("10.0.1.0/24".to_owned(), Some(1)),
                ("10.0.1.7/32".to_owned(), Some(2)),
                ("10.0.2.0/24".to_owned(), Some(2)),
                ("10.0.3.0/24".to_owned(), Some(1)),
            ]
        );
        assert!(!lb_sent(&pod, &net("10.0.1.0/24")));
        assert!(lb_sent(&pod, &net("10.0.1.7/32")));
        let held: BTreeMap<IpNet, Arc<RouteAttrs>> = BTreeMap::new();
        assert_eq!(diff(&held, &pod, &lb).announce.len(), 4);
    }

    #[test]
    fn the_finding_names_shadowed_and_inside_prefixes() {
        let lb = lb(&["10.0.1.0/24", "10.0.1.7/32", "10.0.2.0/24", "10.0.9.1/32"]);
        let found = LbOverPod::of(&[net("10.0.9.0/24"), net("10.0.1.0/24")], &lb);
        assert_eq!(found.shadowed, [net("10.0.1.0/24")]);
        assert_eq!(
            found.inside,
            [
                (net("10.0.1.7/32"), net("10.0.1.0/24")),
                (net("10.0.9.1/32"), net("10.0.9.0/24"))
            ]
        );
        assert!(LbOverPod::of(&[net("10.1.0.0/24")], &lb).is_empty());
        let pods = [net("10.0.1.0/24"), net("10.0.0.0/16")];
        let holding: Vec<&IpNet> = pod_cidrs_holding("10.0.1.7".parse().unwrap(), &pods).collect();
        assert_eq!(holding, [&pods[0], &pods[1]]);
        assert!(ranges_overlap(&net("10.0.0.0/16"), &net("10.0.1.0/24")));
        assert!(ranges_overlap(&net("10.0.1.0/28"), &net("10.0.1.0/24")));
        assert!(!ranges_overlap(&net("10.0.2.0/24"), &net("10.0.1.0/24")));
    }
}
