//! The BGP Identifier (RFC 4271 section 4.2, RFC 6286) a node's sessions use when the
//! peer's config sets no `router-id`: the one rule, used by the daemon for its own node
//! and by `doctor` for every node of the cluster.
//!
//! In order: `--router-id`; the node's IPv4 InternalIP; the IPv4 `--source-address`;
//! and for a node with none of those (IPv6-only), an identifier derived from the node's
//! name ([`derived`]). The name, not an IPv6 address, because Kubernetes keeps it unique
//! in the cluster and it survives re-addressing: a node keeps its identifier for its
//! whole life, and a restart never changes what its peers see.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// First octets a derived identifier may start with: a unicast host address in the old
/// RFC 4271 sense (some peers still check it), so neither 0/8 ("this network"), 127/8
/// (loopback), nor 224/3 (multicast and reserved class E). 222 values.
const FIRST_OCTETS: u32 = 222;

/// Where a node's BGP Identifier comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RouterIdOrigin {
    /// `--router-id`.
    Flag,
    /// The node's IPv4 InternalIP.
    InternalIp,
    /// The IPv4 `--source-address`.
    SourceAddress,
    /// Derived from the node name ([`derived`]).
    NodeName,
}

impl fmt::Display for RouterIdOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RouterIdOrigin::Flag => "--router-id",
            RouterIdOrigin::InternalIp => "the IPv4 InternalIP",
            RouterIdOrigin::SourceAddress => "the IPv4 --source-address",
            RouterIdOrigin::NodeName => "derived from the node name",
        })
    }
}

/// The BGP Identifier of `node`'s sessions whose peer sets no `router-id`, and where it
/// comes from. Never 0.0.0.0 (RFC 6286 section 2.1): the flag refuses it, and an
/// InternalIP or source address of 0.0.0.0 is skipped.
pub fn router_id(
    flag: Option<Ipv4Addr>,
    internal_ipv4: Option<Ipv4Addr>,
    source_v4: Option<Ipv4Addr>,
    node: &str,
) -> (Ipv4Addr, RouterIdOrigin) {
    given(flag, internal_ipv4, source_v4)
        .unwrap_or_else(|| (derived(node), RouterIdOrigin::NodeName))
}

/// The identifier the flag, the InternalIP or the source address gives, in that order;
/// `None` when none does (then only a node name can give one, see [`router_id`]).
pub fn given(
    flag: Option<Ipv4Addr>,
    internal_ipv4: Option<Ipv4Addr>,
    source_v4: Option<Ipv4Addr>,
) -> Option<(Ipv4Addr, RouterIdOrigin)> {
    let usable = |a: Option<Ipv4Addr>| a.filter(|a| !a.is_unspecified());
    usable(flag)
        .map(|id| (id, RouterIdOrigin::Flag))
        .or_else(|| usable(internal_ipv4).map(|id| (id, RouterIdOrigin::InternalIp)))
        .or_else(|| usable(source_v4).map(|id| (id, RouterIdOrigin::SourceAddress)))
}

/// The identifier derived from a node name: FNV-1a 32 of the name's octets, mapped
/// evenly (multiply-shift) onto the 222 x 2^24 addresses whose first octet is 1-126 or
/// 128-223. Stable across processes, versions and machines (no randomness, no std
/// hasher).
///
/// Collision odds: with n nodes drawn from about 3.7e9 values, the chance that any two
/// share one is about n^2 / 7.4e9: 1.3e-6 for 100 nodes, 1.3e-4 for 1,000, 0.3% for
/// 5,000. `doctor` names every pair that does, and `router-id` in the peer's config (or
/// an IPv4 InternalIP) settles it.
pub fn derived(node: &str) -> Ipv4Addr {
    let hash = fnv1a32(node.as_bytes());
    let span = u64::from(FIRST_OCTETS) << 24;
    // < span < 2^32: the product is below 2^64 and the result below span.
    let index = ((u64::from(hash) * span) >> 32) as u32;
    let first = index >> 24; // 0..222
    let first = if first < 126 { first + 1 } else { first + 2 };
    Ipv4Addr::from((first << 24) | (index & 0x00ff_ffff))
}

/// Nodes that would share one identifier, per identifier (only those shared by two or
/// more), each list sorted.
pub fn shared<'a>(
    ids: impl IntoIterator<Item = (&'a Arc<str>, Ipv4Addr)>,
) -> BTreeMap<Ipv4Addr, Vec<Arc<str>>> {
    let mut by_id: BTreeMap<Ipv4Addr, Vec<Arc<str>>> = BTreeMap::new();
    for (node, id) in ids {
        by_id.entry(id).or_default().push(Arc::clone(node));
    }
    by_id.retain(|_, nodes| {
        nodes.sort();
        nodes.len() > 1
    });
    by_id
}

/// FNV-1a, 32 bits (the FNV specification's offset basis and prime).
fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
    const C: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 3);

    #[test]
    fn the_order_is_flag_internal_ip_source_address_then_the_name() {
        assert_eq!(
            router_id(Some(A), Some(B), Some(C), "n1"),
            (A, RouterIdOrigin::Flag)
        );
        assert_eq!(
            router_id(None, Some(B), Some(C), "n1"),
            (B, RouterIdOrigin::InternalIp)
        );
        assert_eq!(
            router_id(None, None, Some(C), "n1"),
            (C, RouterIdOrigin::SourceAddress)
        );
        assert_eq!(
            router_id(None, Some(Ipv4Addr::UNSPECIFIED), None, "n1"),
            (derived("n1"), RouterIdOrigin::NodeName)
        );
    }

    #[test]
    fn fnv1a32_matches_the_reference_vectors() {
        // From the FNV specification's test suite.
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
    }

    /// The derivation is part of the contract: a change would move every IPv6-only
    /// node's identifier on upgrade. These values are computed by hand from the rule.
    #[test]
    fn derived_identifiers_are_stable() {
        // fnv1a32("a") = 0xe40c292c; 0xe40c292c * 222 * 2^24 >> 32 = 0xc5_8a8d5e...
        let index = ((0xe40c_292cu64 * (222u64 << 24)) >> 32) as u32;
        assert_eq!(index >> 24, 197);
        assert_eq!(
            derived("a"),
            Ipv4Addr::from((199 << 24) | (index & 0xff_ffff))
        );
        assert_eq!(derived("worker-1"), derived("worker-1"));
        assert_ne!(derived("worker-1"), derived("worker-2"));
    }

    #[test]
    fn derived_identifiers_are_unicast_host_addresses_spread_evenly() {
        let mut first = [0u32; 256];
        for i in 0..200_000 {
            let id = derived(&format!("node-{i}"));
            let o = id.octets()[0];
            assert!(o != 0 && o != 127 && o < 224, "{id}");
            assert!(!id.is_unspecified() && !id.is_broadcast() && !id.is_multicast());
            first[usize::from(o)] += 1;
        }
        // 200,000 / 222 = 901 per first octet: every allowed one is used, none is
        // more than 20% off.
        for (o, n) in first.iter().enumerate() {
            if o == 0 || o == 127 || o >= 224 {
                assert_eq!(*n, 0);
            } else {
                assert!((720..=1080).contains(n), "first octet {o}: {n}");
            }
        }
    }

    #[test]
    fn a_few_thousand_names_rarely_collide() {
        // n^2 / 2S for 5,000 nodes is 0.34%: this set has none, and would fail loudly
        // if the mapping lost entropy.
        let names: Vec<Arc<str>> = (0..5_000)
            .map(|i| Arc::from(format!("ip-10-0-{}-{}.ec2.internal", i / 256, i % 256)))
            .collect();
        let found = shared(names.iter().map(|n| (n, derived(n))));
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn shared_lists_only_identifiers_of_two_nodes_or_more() {
        let (n1, n2, n3): (Arc<str>, Arc<str>, Arc<str>) = ("n1".into(), "n2".into(), "n3".into());
        let found = shared([(&n3, A), (&n1, A), (&n2, B)]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[&A], [n1, n3]);
    }
}
