//! Route planning (pure): from the node view, the validated config, the local node and
//! the announce mode, the routes each peer must hold; and the diff of that desired set
//! against what a peer already holds (its Adj-RIB-Out).
//!
//! Nothing here is async, reads the clock, opens sockets or touches metrics. The peer
//! driver owns the Adj-RIB-Out and asks [`diff`] what to send.
//!
//! - [`plan`](mod@plan): the planner, its rules (peer selection, next hops, ownership of
//!   prefixes claimed by several nodes, attributes) and the tracker of its findings.
//! - [`next_hop`]: the one next hop rule per (peer, family), and its resolution on a
//!   session that is up.
//! - [`lb`]: the LoadBalancer planner (issue 17), incremental: one event about a
//!   Service or an EndpointSlice re-plans that Service only, and yields the routes it
//!   changed ([`lb::LbDelta`]); the per-peer attributes of those routes.
//! - [`attrs`]: the attribute template of every route (ORIGIN, AS_PATH, the LOCAL_PREF
//!   rule), for both planners and the wire.
//! - [`layers`]: a pod CIDR wins over an equal LoadBalancer prefix; the walk of both
//!   layers the Adj-RIB-Out diffs against, and the finding of what the rule shadowed.
//! - [`pools`]: `pod-cidr-pools`, which pools' CIDRs a peer gets, and what it left out.
//! - [`lb_findings`]: the LoadBalancer findings (pools, next hops, `doctor`'s audit of
//!   the Services' IPs) as values.
//! - [`router_id`](mod@router_id): the BGP Identifier of a node without a configured one.
//! - [`stop`]: the stop decision (restart or leaving, from what the cluster says about
//!   the node), what each route class gets, and what one session does at a stop;
//!   [`drain`]: the graceful shutdown (RFC 8326) of one session on the virtual clock.
//! - this file: the types the planner hands the peer driver, and [`diff`].

pub mod attrs;
pub mod cilium;
pub mod drain;
mod error;
pub mod layers;
pub mod lb;
pub mod lb_findings;
mod mode;
pub mod next_hop;
pub mod plan;
pub mod pools;
pub mod router_id;
pub mod stop;

/// The address family of a prefix, as the planner and the next hop rule name it (the
/// peer driver reads it here: it does not import `sources`).
pub use crate::sources::model::Family;
pub use attrs::DEFAULT_LOCAL_PREF;
pub use error::RoutesError;
pub use mode::AnnounceMode;
pub use plan::{
    plan, plan_reusing, source_address, Conflict, Finding, FindingTracker, LocalNode, Overrides,
    PeerPlan, Plan, Unannounceable, UnannounceableReason,
};

use crate::bgp::wire::{LargeCommunity, Origin};
use ipnet::IpNet;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

/// The next hop a route is announced with.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NextHop {
    /// The session's own local address of the prefix's family (RFC 4271 section 5.1.3 for
    /// eBGP: the address the peer reaches us on). Resolved by the peer driver, which
    /// knows the socket.
    SessionLocal,
    /// An explicit address: a configured source-address, or in cluster mode the owning
    /// node's InternalIP.
    Address(IpAddr),
}

/// The path attributes of a route, as the planner decides them for one peer. Routes that
/// share one `Arc<RouteAttrs>` are packed into the same UPDATEs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RouteAttrs {
    pub origin: Origin,
    /// The AS_PATH as one AS_SEQUENCE: our AS on eBGP, empty on iBGP (RFC 4271 section
    /// 5.1.2).
    pub as_path: Vec<u32>,
    pub next_hop: NextHop,
    pub med: Option<u32>,
    /// Sent on iBGP only (RFC 4271 section 5.1.5).
    pub local_pref: Option<u32>,
    /// RFC 1997 communities as 32-bit values, sorted and deduplicated.
    pub communities: Vec<u32>,
    /// RFC 8092 large communities, sorted and deduplicated.
    pub large_communities: Vec<LargeCommunity>,
}

/// One route a peer must hold, with the node it belongs to (for `plan` output, logs and
/// conflict reports; not sent on the wire).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRoute {
    pub attrs: Arc<RouteAttrs>,
    pub node: Arc<str>,
}

/// Every route one peer must hold, keyed by prefix (one path per prefix: no ADD-PATH on
/// send).
pub type DesiredRoutes = BTreeMap<IpNet, PlannedRoute>;

/// What to send to move a peer from `held` (its Adj-RIB-Out) to `desired`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteDiff {
    /// Prefixes that are new or whose attributes changed, with the attributes to send.
    pub announce: Vec<(IpNet, Arc<RouteAttrs>)>,
    /// Prefixes the peer holds that are no longer desired.
    pub withdraw: Vec<IpNet>,
}

impl RouteDiff {
    pub fn is_empty(&self) -> bool {
        self.announce.is_empty() && self.withdraw.is_empty()
    }
}

/// The same routes marked for a graceful shutdown (RFC 8326 section 3): each carries the
/// GRACEFUL_SHUTDOWN community (65535:0) besides its own communities, kept sorted and
/// deduplicated. Routes that shared one attribute set still share one (they stay packed
/// together).
pub fn graceful_shutdown(desired: &DesiredRoutes) -> DesiredRoutes {
    let mut mark = GracefulShutdownMark::default();
    desired
        .iter()
        .map(|(prefix, route)| {
            (
                *prefix,
                PlannedRoute {
                    attrs: mark.mark(&route.attrs),
                    node: Arc::clone(&route.node),
                },
            )
        })
        .collect()
}

/// [`graceful_shutdown`] for one attribute set at a time (the LoadBalancer routes, which
/// arrive as deltas during a drain), one marked `Arc` per distinct set.
#[derive(Debug, Default)]
pub struct GracefulShutdownMark {
    marked: HashMap<Arc<RouteAttrs>, Arc<RouteAttrs>>,
}

/// Adds GRACEFUL_SHUTDOWN (65535:0, RFC 8326) to sorted, deduplicated communities.
pub fn add_graceful_shutdown(communities: &mut Vec<u32>) {
    let gshut = crate::config::Community::GRACEFUL_SHUTDOWN.0;
    if let Err(at) = communities.binary_search(&gshut) {
        communities.insert(at, gshut);
    }
}

impl GracefulShutdownMark {
    pub fn mark(&mut self, attrs: &Arc<RouteAttrs>) -> Arc<RouteAttrs> {
        self.marked
            .entry(Arc::clone(attrs))
            .or_insert_with(|| {
                let mut a = (**attrs).clone();
                add_graceful_shutdown(&mut a.communities);
                Arc::new(a)
            })
            .clone()
    }
}

/// The minimal announce/withdraw sets between what a peer holds and what it must hold:
/// unchanged routes (equal attributes, compared by value) produce nothing. Both inputs
/// are sorted maps, so this is one merge walk, O(held + desired).
pub fn diff<H: AsRef<RouteAttrs>>(held: &BTreeMap<IpNet, H>, desired: &DesiredRoutes) -> RouteDiff {
    diff_sorted(held, desired.iter().map(|(p, r)| (p, &r.attrs)))
}

/// [`diff`] against any desired routes given in ascending prefix order, each prefix
/// once (the peer driver's pod CIDR and LoadBalancer layers walked together).
pub fn diff_sorted<'a, H: AsRef<RouteAttrs>>(
    held: &BTreeMap<IpNet, H>,
    desired: impl Iterator<Item = (&'a IpNet, &'a Arc<RouteAttrs>)>,
) -> RouteDiff {
    let mut out = RouteDiff::default();
    let mut held_iter = held.iter().peekable();
    let mut want_iter = desired.peekable();
    loop {
        match (held_iter.peek(), want_iter.peek()) {
            (None, None) => break,
            (Some((h, _)), None) => {
                out.withdraw.push(**h);
                held_iter.next();
            }
            (None, Some((w, attrs))) => {
                out.announce.push((**w, Arc::clone(attrs)));
                want_iter.next();
            }
            (Some((h, held_attrs)), Some((w, attrs))) => match h.cmp(w) {
                std::cmp::Ordering::Less => {
                    out.withdraw.push(**h);
                    held_iter.next();
                }
                std::cmp::Ordering::Greater => {
                    out.announce.push((**w, Arc::clone(attrs)));
                    want_iter.next();
                }
                std::cmp::Ordering::Equal => {
                    // The daemon's planner keeps unchanged attributes in the `Arc` the
                    // peer task already holds (`plan_reusing`): the same one is equal
                    // without comparing its lists.
                    let held: &RouteAttrs = (*held_attrs).as_ref();
                    if !std::ptr::eq(held, &***attrs) && *held != ***attrs {
                        out.announce.push((**w, Arc::clone(attrs)));
                    }
                    held_iter.next();
                    want_iter.next();
                }
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(local_pref: u32) -> Arc<RouteAttrs> {
        Arc::new(RouteAttrs {
            origin: Origin::Incomplete,
            as_path: vec![],
            next_hop: NextHop::SessionLocal,
            med: None,
            local_pref: Some(local_pref),
            communities: vec![],
            large_communities: vec![],
        })
    }

    fn desired(routes: &[(&str, &Arc<RouteAttrs>)]) -> DesiredRoutes {
        routes
            .iter()
            .map(|(p, a)| {
                (
                    p.parse().unwrap(),
                    PlannedRoute {
                        attrs: Arc::clone(a),
                        node: Arc::from("n1"),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn graceful_shutdown_adds_65535_0_and_keeps_the_other_communities() {
        let mut with = (*attrs(100)).clone();
        with.communities = vec![0x0001_0002, 0xFFFF_FF01];
        let with = Arc::new(with);
        let plain = attrs(200);
        let want = desired(&[
            ("10.0.0.0/24", &with),
            ("10.0.1.0/24", &with),
            ("10.0.2.0/24", &plain),
        ]);
        let marked = graceful_shutdown(&want);
        assert_eq!(marked.len(), 3);
        let of = |p: &str| marked[&p.parse::<IpNet>().unwrap()].attrs.clone();
        assert_eq!(
            of("10.0.0.0/24").communities,
            vec![0x0001_0002, 0xFFFF_0000, 0xFFFF_FF01]
        );
        assert_eq!(of("10.0.2.0/24").communities, vec![0xFFFF_0000]);
        assert!(Arc::ptr_eq(&of("10.0.0.0/24"), &of("10.0.1.0/24")));
        assert_eq!(of("10.0.2.0/24").local_pref, Some(200));
        // Marking twice changes nothing more.
        assert_eq!(graceful_shutdown(&marked), marked);
    }

    #[test]
    fn nothing_changed_sends_nothing() {
        let a = attrs(100);
        let want = desired(&[("10.0.0.0/24", &a), ("10.0.1.0/24", &a)]);
        let held = want.iter().map(|(p, r)| (*p, r.attrs.clone())).collect();
        assert!(diff(&held, &want).is_empty());
    }

    #[test]
    fn equal_attributes_in_a_different_arc_are_unchanged() {
        let want = desired(&[("10.0.0.0/24", &attrs(100))]);
        let held = [("10.0.0.0/24".parse().unwrap(), attrs(100))]
            .into_iter()
            .collect();
        assert!(diff(&held, &want).is_empty());
    }

    #[test]
    fn announces_new_withdraws_gone_and_reannounces_changed() {
        let a = attrs(100);
        let b = attrs(200);
        let held = [
            ("10.0.0.0/24".parse().unwrap(), a.clone()),
            ("10.0.1.0/24".parse().unwrap(), a.clone()),
            ("10.0.3.0/24".parse().unwrap(), a.clone()),
        ]
        .into_iter()
        .collect();
        let want = desired(&[
            ("10.0.1.0/24", &b),
            ("10.0.2.0/24", &a),
            ("10.0.3.0/24", &a),
        ]);
        let d = diff(&held, &want);
        assert_eq!(d.withdraw, vec!["10.0.0.0/24".parse::<IpNet>().unwrap()]);
        let announced: Vec<(IpNet, u32)> = d
            .announce
            .iter()
            .map(|(p, at)| (*p, at.local_pref.unwrap()))
            .collect();
        assert_eq!(
            announced,
            vec![
                ("10.0.1.0/24".parse().unwrap(), 200),
                ("10.0.2.0/24".parse().unwrap(), 100)
            ]
        );
    }
}
