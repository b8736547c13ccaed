//! The next hop of a peer's pod CIDR routes, per address family (issue #21): the one
//! rule that both the `plan` output and `run` follow, so that `plan` never shows a route
//! that `run` would not send.
//!
//! Two halves, side by side so that they cannot drift apart:
//! - [`rule`]: what the planner knows (the config peer, the address the session binds,
//!   the node's own addresses) decides each family's next hop in local mode. The planner
//!   writes it into every route ([`NextHop`]) and leaves out, and reports, the routes of
//!   a family without one.
//! - [`resolve`]: what the session knows once it is up (its local address, whether the
//!   peer offered RFC 8950 extended next hop) turns a route's [`NextHop`] into what goes
//!   on the wire. The peer's Adj-RIB-Out calls it for every route group.
//!
//! Pure: no socket, no clock. Must not decide anything else about a route.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::NextHop;
use crate::config::Peer;
use crate::sources::model::{Family, NodeEntry};

/// The node's own addresses a next hop of the other family than the session's can be:
/// its InternalIP of each family, else `--source-address` when it is of that family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct NodeAddresses {
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
}

impl NodeAddresses {
    /// The addresses of `node` (the local node's view entry), with `source_address`
    /// (`--source-address`) filling in a family the node has no InternalIP of.
    pub fn of(node: Option<&NodeEntry>, source_address: Option<IpAddr>) -> NodeAddresses {
        NodeAddresses {
            ipv4: node.and_then(|n| n.internal_ipv4).or(match source_address {
                Some(IpAddr::V4(a)) => Some(a),
                _ => None,
            }),
            ipv6: node.and_then(|n| n.internal_ipv6).or(match source_address {
                Some(IpAddr::V6(a)) => Some(a),
                _ => None,
            }),
        }
    }
}

/// How a peer's routes of one family get their next hop (local mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NextHopRule {
    /// An explicit address of the family: the peer's `next-hop-v4`/`next-hop-v6`, else
    /// the address the session binds (same family), else the node's own address (the
    /// other family).
    Address(IpAddr),
    /// The session's local address, of the route's family (RFC 4271 section 5.1.3).
    SessionLocal,
    /// IPv4 routes on an IPv6 session when the node has no IPv4 address: the session's
    /// IPv6 address as an extended next hop (RFC 8950), sent only when the peer offers
    /// the capability for IPv4 unicast.
    ExtendedSessionLocal,
    /// IPv6 routes on an IPv4 session when the node has no IPv6 address and the peer no
    /// `next-hop-v6`: nothing can be sent (an IPv4 address is no IPv6 next hop).
    Unavailable,
}

impl NextHopRule {
    /// The route's next hop under this rule; `None` when it is not sent.
    pub fn next_hop(self) -> Option<NextHop> {
        match self {
            NextHopRule::Address(a) => Some(NextHop::Address(a)),
            NextHopRule::SessionLocal | NextHopRule::ExtendedSessionLocal => {
                Some(NextHop::SessionLocal)
            }
            NextHopRule::Unavailable => None,
        }
    }
}

/// The next hop rule of `peer`'s routes of `family`. `source` is the address the
/// session binds (`routes::source_address`, always of the session's family).
pub fn rule(
    peer: &Peer,
    family: Family,
    source: Option<IpAddr>,
    node: &NodeAddresses,
) -> NextHopRule {
    let configured = match family {
        Family::Ipv4 => peer.next_hop_v4.map(IpAddr::V4),
        Family::Ipv6 => peer.next_hop_v6.map(IpAddr::V6),
    };
    if let Some(a) = configured {
        return NextHopRule::Address(a);
    }
    if family == family_of_addr(peer.address) {
        return match source {
            Some(a) => NextHopRule::Address(a),
            None => NextHopRule::SessionLocal,
        };
    }
    match family {
        Family::Ipv4 => node.ipv4.map_or(NextHopRule::ExtendedSessionLocal, |a| {
            NextHopRule::Address(IpAddr::V4(a))
        }),
        Family::Ipv6 => node.ipv6.map_or(NextHopRule::Unavailable, |a| {
            NextHopRule::Address(IpAddr::V6(a))
        }),
    }
}

/// What a session that is up knows about next hops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionNextHops {
    /// The local address of the session's connection.
    pub local: IpAddr,
    /// The peer offered, and we offered, IPv4 unicast with an IPv6 next hop (RFC 8950).
    pub extended_next_hop_ipv4: bool,
}

/// A next hop as it goes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireNextHop {
    /// NEXT_HOP (RFC 4271 section 5.1.3) of an IPv4 route.
    V4(Ipv4Addr),
    /// The MP_REACH_NLRI next hop of an IPv6 route (RFC 2545 section 3).
    V6(Ipv6Addr),
    /// The MP_REACH_NLRI next hop of an IPv4 route (RFC 8950 section 3).
    ExtendedV6(Ipv6Addr),
}

/// Why a route cannot be sent on this session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsendable {
    /// `SessionLocal` of the other family: the session has no address of it.
    NoNextHop,
    /// An explicit IPv4 next hop for an IPv6 route.
    NextHopFamily,
    /// An IPv6 next hop for an IPv4 route, and the peer did not offer RFC 8950.
    ExtendedNextHopNotNegotiated,
}

/// The wire next hop of a route of `family` with `next_hop` on `session`.
pub fn resolve(
    family: Family,
    next_hop: &NextHop,
    session: &SessionNextHops,
) -> Result<WireNextHop, Unsendable> {
    let address = match next_hop {
        NextHop::SessionLocal => session.local.to_canonical(),
        NextHop::Address(a) => *a,
    };
    match (family, address) {
        (Family::Ipv4, IpAddr::V4(a)) => Ok(WireNextHop::V4(a)),
        (Family::Ipv6, IpAddr::V6(a)) => Ok(WireNextHop::V6(a)),
        (Family::Ipv4, IpAddr::V6(a)) if session.extended_next_hop_ipv4 => {
            Ok(WireNextHop::ExtendedV6(a))
        }
        (Family::Ipv4, IpAddr::V6(_)) => Err(Unsendable::ExtendedNextHopNotNegotiated),
        (Family::Ipv6, IpAddr::V4(_)) => Err(match next_hop {
            NextHop::SessionLocal => Unsendable::NoNextHop,
            NextHop::Address(_) => Unsendable::NextHopFamily,
        }),
    }
}

/// The family of a prefix.
pub fn family_of(prefix: &IpNet) -> Family {
    match prefix {
        IpNet::V4(_) => Family::Ipv4,
        IpNet::V6(_) => Family::Ipv6,
    }
}

fn family_of_addr(a: IpAddr) -> Family {
    match a {
        IpAddr::V4(_) => Family::Ipv4,
        IpAddr::V6(_) => Family::Ipv6,
    }
}

/// Whether a route of `family` with `next_hop` to `peer` goes out only with RFC 8950
/// extended next hop: an IPv4 route whose next hop is (or may be) an IPv6 address.
pub fn needs_extended_next_hop(family: Family, next_hop: &NextHop, peer: &Peer) -> bool {
    family == Family::Ipv4
        && match next_hop {
            NextHop::SessionLocal => peer.address.is_ipv6(),
            NextHop::Address(a) => a.is_ipv6(),
        }
}

/// Why a peer gets no route of a family (the [`NextHopRule::Unavailable`] case), for
/// `plan`, `status` and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NoNextHop {
    pub family: Family,
    /// The peer's index in the config's `peers`, to name the field to set.
    pub index: usize,
}

impl fmt::Display for NoNextHop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (other, field) = match self.family {
            Family::Ipv4 => ("IPv4", "next-hop-v4"),
            Family::Ipv6 => ("IPv6", "next-hop-v6"),
        };
        let session = match self.family {
            Family::Ipv4 => "IPv6",
            Family::Ipv6 => "IPv4",
        };
        write!(
            f,
            "an {other} route on an {session} session needs an {other} next hop: the node has \
             no {other} address (InternalIP or --source-address) and peers[{}] sets no {field}",
            self.index
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(yaml: &str) -> Peer {
        crate::config::parse(&format!("peers:\n  - {yaml}"))
            .unwrap()
            .peers
            .remove(0)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    const V4_PEER: &str = "{peer-address: 192.0.2.1, peer-asn: 65000, my-asn: 65001}";
    const V6_PEER: &str = "{peer-address: '2001:db8::1', peer-asn: 65000, my-asn: 65001}";

    #[test]
    fn the_rule_prefers_the_configured_then_the_bound_then_the_node_address() {
        let none = NodeAddresses::default();
        let both = NodeAddresses {
            ipv4: Some("192.0.2.10".parse().unwrap()),
            ipv6: Some("2001:db8::10".parse().unwrap()),
        };
        let v4 = peer(V4_PEER);
        assert_eq!(
            rule(&v4, Family::Ipv4, None, &both),
            NextHopRule::SessionLocal
        );
        assert_eq!(
            rule(&v4, Family::Ipv4, Some(ip("192.0.2.9")), &both),
            NextHopRule::Address(ip("192.0.2.9"))
        );
        assert_eq!(
            rule(&v4, Family::Ipv6, None, &both),
            NextHopRule::Address(ip("2001:db8::10"))
        );
        assert_eq!(
            rule(&v4, Family::Ipv6, None, &none),
            NextHopRule::Unavailable
        );
        let configured = peer(
            "{peer-address: 192.0.2.1, peer-asn: 65000, my-asn: 65001, \
             next-hop-v6: '2001:db8::99', next-hop-v4: 192.0.2.99}",
        );
        assert_eq!(
            rule(&configured, Family::Ipv6, None, &none),
            NextHopRule::Address(ip("2001:db8::99"))
        );
        assert_eq!(
            rule(&configured, Family::Ipv4, Some(ip("192.0.2.9")), &both),
            NextHopRule::Address(ip("192.0.2.99"))
        );
        let v6 = peer(V6_PEER);
        assert_eq!(
            rule(&v6, Family::Ipv4, None, &none),
            NextHopRule::ExtendedSessionLocal
        );
        assert_eq!(
            rule(&v6, Family::Ipv4, None, &both),
            NextHopRule::Address(ip("192.0.2.10"))
        );
        assert_eq!(
            rule(&v6, Family::Ipv6, None, &none),
            NextHopRule::SessionLocal
        );
    }

    /// `plan` and the wire agree: for every peer family, rule and session, a route the
    /// rule gives a next hop is sent exactly when `resolve` accepts it, and the rule
    /// says in advance which ones depend on RFC 8950.
    #[test]
    fn every_rule_resolves_as_the_plan_says() {
        let addrs = [
            NodeAddresses::default(),
            NodeAddresses {
                ipv4: Some("192.0.2.10".parse().unwrap()),
                ipv6: None,
            },
            NodeAddresses {
                ipv4: None,
                ipv6: Some("2001:db8::10".parse().unwrap()),
            },
        ];
        for (p, local) in [(V4_PEER, "192.0.2.20"), (V6_PEER, "2001:db8::20")] {
            let p = peer(p);
            for node in &addrs {
                for family in [Family::Ipv4, Family::Ipv6] {
                    for extended in [false, true] {
                        let r = rule(&p, family, None, node);
                        let session = SessionNextHops {
                            local: ip(local),
                            extended_next_hop_ipv4: extended,
                        };
                        let Some(nh) = r.next_hop() else {
                            assert_eq!(r, NextHopRule::Unavailable);
                            continue;
                        };
                        let sent = resolve(family, &nh, &session);
                        let conditional = needs_extended_next_hop(family, &nh, &p);
                        assert_eq!(
                            conditional,
                            r == NextHopRule::ExtendedSessionLocal,
                            "{r:?} {family}"
                        );
                        assert_eq!(sent.is_ok(), !conditional || extended, "{r:?} {family}");
                    }
                }
            }
        }
    }

    #[test]
    fn resolve_maps_each_family_to_its_field() {
        let s = SessionNextHops {
            local: ip("::ffff:192.0.2.20"),
            extended_next_hop_ipv4: false,
        };
        assert_eq!(
            resolve(Family::Ipv4, &NextHop::SessionLocal, &s),
            Ok(WireNextHop::V4("192.0.2.20".parse().unwrap()))
        );
        assert_eq!(
            resolve(Family::Ipv6, &NextHop::SessionLocal, &s),
            Err(Unsendable::NoNextHop)
        );
        assert_eq!(
            resolve(Family::Ipv6, &NextHop::Address(ip("192.0.2.1")), &s),
            Err(Unsendable::NextHopFamily)
        );
        let v6 = NextHop::Address(ip("2001:db8::1"));
        assert_eq!(
            resolve(Family::Ipv4, &v6, &s),
            Err(Unsendable::ExtendedNextHopNotNegotiated)
        );
        let ext = SessionNextHops {
            extended_next_hop_ipv4: true,
            ..s
        };
        assert_eq!(
            resolve(Family::Ipv4, &v6, &ext),
            Ok(WireNextHop::ExtendedV6("2001:db8::1".parse().unwrap()))
        );
    }

    #[test]
    fn no_next_hop_names_the_field_to_set() {
        let text = NoNextHop {
            family: Family::Ipv6,
            index: 2,
        }
        .to_string();
        assert_eq!(
            text,
            "an IPv6 route on an IPv4 session needs an IPv6 next hop: the node has no IPv6 \
             address (InternalIP or --source-address) and peers[2] sets no next-hop-v6"
        );
    }
}
