//! The attribute template of every route this speaker sends (RFC 4271 section 5.1): the
//! parts a peer fixes (ORIGIN, AS_PATH: our AS on eBGP, empty on iBGP) and the
//! LOCAL_PREF rule (iBGP only, section 5.1.5), one rule for the pod CIDR routes
//! (`plan.rs`), the LoadBalancer routes (`lb.rs`) and what the Adj-RIB-Out puts on the
//! wire ([`local_pref_sent`]).
//!
//! Must not: decide which routes a peer gets or their next hop (`plan.rs`,
//! `next_hop.rs`); it only shapes the attributes of a route already decided.

use super::{NextHop, RouteAttrs};
use crate::bgp::wire::{LargeCommunity, Origin};
use crate::config::Peer;

/// LOCAL_PREF sent to iBGP peers when the config sets none (RFC 4271 section 5.1.5
/// leaves the value to the operator; 100 is the common default of FRR, BIRD, Junos,
/// so the routes compete evenly instead of losing as with MetalLB's 0).
pub const DEFAULT_LOCAL_PREF: u32 = 100;

/// What a peer fixes in every route sent to it, whatever the route's class.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PeerTemplate {
    pub origin: Origin,
    /// One AS_SEQUENCE: our AS on eBGP, empty on iBGP (RFC 4271 section 5.1.2).
    pub as_path: Vec<u32>,
    pub ibgp: bool,
}

impl PeerTemplate {
    pub fn of(peer: &Peer) -> PeerTemplate {
        let ibgp = peer.is_ibgp();
        PeerTemplate {
            origin: peer.origin,
            as_path: if ibgp { Vec::new() } else { vec![peer.my_asn] },
            ibgp,
        }
    }

    /// A route's attributes for this peer: `local_pref` is the route class's configured
    /// value (LOCAL_PREF on iBGP only, see [`local_pref`]); the communities are kept
    /// sorted and deduplicated (routes with equal sets then share one attribute set).
    pub fn attrs(
        &self,
        next_hop: NextHop,
        local_pref: Option<u32>,
        communities: Vec<u32>,
        large_communities: Vec<LargeCommunity>,
    ) -> RouteAttrs {
        RouteAttrs {
            origin: self.origin,
            as_path: self.as_path.clone(),
            next_hop,
            med: None,
            local_pref: self::local_pref(self.ibgp, local_pref),
            communities: sorted(communities),
            large_communities: sorted(large_communities),
        }
    }
}

/// The LOCAL_PREF a route carries: on iBGP only (RFC 4271 section 5.1.5), the configured
/// value or [`DEFAULT_LOCAL_PREF`] (not MetalLB's 0 when unset, which loses to every
/// other route).
pub fn local_pref(ibgp: bool, configured: Option<u32>) -> Option<u32> {
    ibgp.then(|| configured.unwrap_or(DEFAULT_LOCAL_PREF))
}

/// The LOCAL_PREF that goes on the wire for `attrs` on a session: none on eBGP whatever
/// the attributes say (the session's negotiated kind has the last word).
pub fn local_pref_sent(ibgp: bool, attrs: &RouteAttrs) -> Option<u32> {
    attrs.local_pref.filter(|_| ibgp)
}

/// A community list as routes carry it: sorted, each value once.
pub fn sorted<T: Ord>(mut list: Vec<T>) -> Vec<T> {
    list.sort_unstable();
    list.dedup();
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(my: u32, other: u32) -> Peer {
        let yaml = format!(
            "peers:\n  - peer-address: 10.5.0.1\n    peer-asn: {other}\n    my-asn: {my}\n    \
             origin: igp\n"
        );
        crate::config::parse(&yaml).unwrap().peers.remove(0)
    }

    #[test]
    fn ebgp_carries_our_as_and_no_local_pref_ibgp_an_empty_path_and_local_pref() {
        let ebgp = PeerTemplate::of(&peer(65001, 65000));
        let a = ebgp.attrs(NextHop::SessionLocal, Some(300), vec![3, 1, 3], vec![]);
        assert_eq!(a.as_path, [65001]);
        assert_eq!(a.local_pref, None);
        assert_eq!(a.communities, [1, 3]);
        assert_eq!(a.origin, Origin::Igp);

        let ibgp = PeerTemplate::of(&peer(65000, 65000));
        let a = ibgp.attrs(NextHop::SessionLocal, None, vec![], vec![]);
        assert!(a.as_path.is_empty());
        assert_eq!(a.local_pref, Some(DEFAULT_LOCAL_PREF));
        let a = ibgp.attrs(NextHop::SessionLocal, Some(300), vec![], vec![]);
        assert_eq!(a.local_pref, Some(300));
    }

    #[test]
    fn the_wire_sends_local_pref_on_ibgp_sessions_only() {
        let ibgp = PeerTemplate::of(&peer(65000, 65000));
        let a = ibgp.attrs(NextHop::SessionLocal, Some(300), vec![], vec![]);
        assert_eq!(local_pref_sent(true, &a), Some(300));
        assert_eq!(local_pref_sent(false, &a), None);
    }
}
