//! The `address-pools` as the allocator walks them: each pool's CIDRs in the order the
//! config writes them (a range arrives from `config` already summarised into ascending
//! CIDRs), the `avoid-buggy-ips` rule, and per CIDR the addresses in use as runs, so
//! that the first free address is found in logarithmic time whatever the pool's size.
//!
//! Pure. Must not: know about Services or sharing (that is `super::Allocator`'s); it
//! only hears "this address is in use" and "free again".

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use ipnet::IpNet;

use super::service::Family;
use crate::config::AddressPool;

/// Every pool of the config, in config order.
#[derive(Debug, Clone, Default)]
pub struct Pools {
    pub(crate) pools: Vec<Pool>,
}

/// One `address-pools` entry.
#[derive(Debug, Clone)]
pub struct Pool {
    pub name: Arc<str>,
    pub auto_assign: bool,
    pub avoid_buggy_ips: bool,
    pub(crate) ranges: Vec<Range>,
}

/// One CIDR of a pool, with its addresses in use.
#[derive(Debug, Clone)]
pub(crate) struct Range {
    pub(crate) family: Family,
    first: u128,
    last: u128,
    avoid_buggy: bool,
    /// Runs of addresses in use, first -> last, each as long as it can be: the address
    /// after a run's last (skipping the addresses `avoid-buggy-ips` leaves out) is free.
    used: BTreeMap<u128, u128>,
    in_use: u128,
}

/// Where an address is: its pool and CIDR, by position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Place {
    pub pool: usize,
    pub range: usize,
}

/// Whether `avoid-buggy-ips` leaves this address out: an IPv4 address ending in .0 or
/// .255, whatever the prefix length (some CPE firmware takes them for broadcasts); never
/// an IPv6 address.
pub fn buggy(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => matches!(v4.octets()[3], 0 | 255),
        IpAddr::V6(_) => false,
    }
}

impl Pools {
    pub fn new(pools: &[AddressPool]) -> Pools {
        Pools {
            pools: pools
                .iter()
                .map(|p| Pool {
                    name: Arc::from(p.name.as_str()),
                    auto_assign: p.auto_assign,
                    avoid_buggy_ips: p.avoid_buggy_ips,
                    ranges: p
                        .cidrs
                        .iter()
                        .map(|net| Range::new(*net, p.avoid_buggy_ips))
                        .collect(),
                })
                .collect(),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (usize, &Pool)> {
        self.pools.iter().enumerate()
    }

    pub fn pool(&self, index: usize) -> Option<&Pool> {
        self.pools.get(index)
    }

    pub fn by_name(&self, name: &str) -> Option<usize> {
        self.pools.iter().position(|p| &*p.name == name)
    }

    /// The pool and CIDR that contain `ip`, whether or not it may be allocated.
    pub fn locate(&self, ip: IpAddr) -> Option<Place> {
        let (fam, n) = number(ip);
        self.pools.iter().enumerate().find_map(|(pool, p)| {
            p.ranges
                .iter()
                .position(|r| r.family == fam && r.first <= n && n <= r.last)
                .map(|range| Place { pool, range })
        })
    }

    /// Whether `ip` may be handed out at `place` (`avoid-buggy-ips`).
    pub fn allocatable(&self, place: Place, ip: IpAddr) -> bool {
        self.pools
            .get(place.pool)
            .is_some_and(|p| !(p.avoid_buggy_ips && buggy(ip)))
    }

    pub(crate) fn range_mut(&mut self, place: Place) -> Option<&mut Range> {
        self.pools
            .get_mut(place.pool)
            .and_then(|p| p.ranges.get_mut(place.range))
    }
}

impl Pool {
    /// The addresses this pool may hand out, saturating (an IPv6 /64 is "more than
    /// enough").
    pub fn total(&self) -> u128 {
        self.ranges
            .iter()
            .fold(0u128, |t, r| t.saturating_add(r.total()))
    }

    /// Distinct addresses in use.
    pub fn in_use(&self) -> u128 {
        self.ranges.iter().map(|r| r.in_use).sum()
    }

    /// The CIDRs of `family`, with their positions, in config order.
    pub(crate) fn ranges_of(&self, family: Family) -> impl Iterator<Item = (usize, &Range)> {
        self.ranges
            .iter()
            .enumerate()
            .filter(move |(_, r)| r.family == family)
    }

    pub fn families(&self) -> impl Iterator<Item = Family> + '_ {
        self.ranges.iter().map(|r| r.family)
    }
}

impl Range {
    fn new(net: IpNet, avoid_buggy: bool) -> Range {
        let (family, first, last) = match net {
            IpNet::V4(n) => (
                Family::Ipv4,
                u128::from(u32::from(n.network())),
                u128::from(u32::from(n.broadcast())),
            ),
            IpNet::V6(n) => (
                Family::Ipv6,
                u128::from(n.network()),
                u128::from(n.broadcast()),
            ),
        };
        Range {
            family,
            first,
            last,
            avoid_buggy: avoid_buggy && family == Family::Ipv4,
            used: BTreeMap::new(),
            in_use: 0,
        }
    }

    fn skipped(&self, n: u128) -> bool {
        self.avoid_buggy && matches!(n & 0xff, 0 | 0xff)
    }

    /// The first address at or after `n` that may be handed out.
    fn allocatable_from(&self, mut n: u128) -> Option<u128> {
        while self.skipped(n) {
            n = n.checked_add(1)?;
        }
        (n >= self.first && n <= self.last).then_some(n)
    }

    fn next(&self, n: u128) -> Option<u128> {
        self.allocatable_from(n.checked_add(1)?)
    }

    fn prev(&self, n: u128) -> Option<u128> {
        let mut p = n.checked_sub(1)?;
        while self.skipped(p) {
            p = p.checked_sub(1)?;
        }
        (p >= self.first && p <= self.last).then_some(p)
    }

    /// The run that holds `n`.
    fn run_of(&self, n: u128) -> Option<(u128, u128)> {
        self.used
            .range(..=n)
            .next_back()
            .filter(|(_, last)| **last >= n)
            .map(|(f, l)| (*f, *l))
    }

    /// The first address of this CIDR that may be handed out and is not in use.
    pub(crate) fn first_free(&self) -> Option<IpAddr> {
        let start = self.allocatable_from(self.first)?;
        let n = match self.run_of(start) {
            // Runs are maximal: what follows one is free.
            Some((_, last)) => self.next(last)?,
            None => start,
        };
        Some(self.address(n))
    }

    /// Whether `ip` is in use here.
    #[cfg(test)]
    fn is_used(&self, ip: IpAddr) -> bool {
        self.run_of(number(ip).1).is_some()
    }

    /// Marks `ip` in use; the caller checked it is in this CIDR and allocatable.
    pub(crate) fn take(&mut self, ip: IpAddr) {
        let n = number(ip).1;
        if self.run_of(n).is_some() {
            return;
        }
        let mut first = n;
        let mut last = n;
        if let Some(p) = self.prev(n) {
            if let Some((f, _)) = self.run_of(p) {
                self.used.remove(&f);
                first = f;
            }
        }
        if let Some(q) = self.next(n) {
            if let Some(l) = self.used.remove(&q) {
                last = l;
            }
        }
        self.used.insert(first, last);
        self.in_use += 1;
    }

    /// Marks `ip` free again.
    pub(crate) fn free(&mut self, ip: IpAddr) {
        let n = number(ip).1;
        let Some((first, last)) = self.run_of(n) else {
            return;
        };
        self.used.remove(&first);
        if first < n {
            if let Some(p) = self.prev(n) {
                self.used.insert(first, p);
            }
        }
        if n < last {
            if let Some(q) = self.next(n) {
                self.used.insert(q, last);
            }
        }
        self.in_use -= 1;
    }

    /// Whether `ip` lies in this CIDR.
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        let (fam, n) = number(ip);
        fam == self.family && self.first <= n && n <= self.last
    }

    fn total(&self) -> u128 {
        let size = (self.last - self.first).saturating_add(1);
        if !self.avoid_buggy {
            return size;
        }
        // Addresses ending in .0 or .255 in 0..=n: two per whole /24 below n's, and
        // those of n's own /24 up to n.
        let upto = |n: u128| 2 * (n >> 8) + 1 + u128::from(n & 0xff == 0xff);
        let below = if self.first == 0 {
            0
        } else {
            upto(self.first - 1)
        };
        size - (upto(self.last) - below)
    }

    fn address(&self, n: u128) -> IpAddr {
        match self.family {
            // A v4 range's numbers fit in 32 bits (they come from an Ipv4Net).
            Family::Ipv4 => IpAddr::V4(Ipv4Addr::from(n as u32)),
            Family::Ipv6 => IpAddr::V6(Ipv6Addr::from(n)),
        }
    }
}

/// An address as its family and number.
fn number(ip: IpAddr) -> (Family, u128) {
    match ip {
        IpAddr::V4(v4) => (Family::Ipv4, u128::from(u32::from(v4))),
        IpAddr::V6(v6) => (Family::Ipv6, u128::from(v6)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Protocol;

    fn pool(name: &str, cidrs: &[&str], avoid: bool) -> AddressPool {
        AddressPool {
            name: name.into(),
            protocol: Protocol::Bgp,
            cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
            avoid_buggy_ips: avoid,
            auto_assign: true,
            bgp_advertisements: Vec::new(),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn range(cidr: &str, avoid: bool) -> Range {
        Range::new(cidr.parse().unwrap(), avoid)
    }

    // Rule: ascending inside a CIDR; .0 and .255 are handed out unless avoid-buggy-ips.
    #[test]
    fn first_free_is_ascending_and_includes_network_and_broadcast() {
        let mut r = range("10.0.0.0/30", false);
        let mut got = Vec::new();
        while let Some(a) = r.first_free() {
            r.take(a);
            got.push(a);
        }
        assert_eq!(
            got,
            ["10.0.0.0", "10.0.0.1", "10.0.0.2", "10.0.0.3"].map(ip)
        );
        assert_eq!(r.total(), 4);
        let mut v6 = range("fd00::/127", true);
        // avoid-buggy-ips never skips an IPv6 address, `::` included.
        assert_eq!(v6.first_free(), Some(ip("fd00::")));
        v6.take(ip("fd00::"));
        assert_eq!(v6.first_free(), Some(ip("fd00::1")));
        assert_eq!(v6.total(), 2);
    }

    // Rule: avoid-buggy-ips skips every IPv4 address ending in .0 or .255, at any prefix
    // length (MetalLB: a /24 boundary inside a /23 too, and a range's own ends).
    #[test]
    fn avoid_buggy_skips_dot_zero_and_dot_255_everywhere() {
        let mut r = range("10.0.0.254/31", true);
        assert_eq!(r.total(), 1);
        assert_eq!(r.first_free(), Some(ip("10.0.0.254")));
        r.take(ip("10.0.0.254"));
        assert_eq!(r.first_free(), None);

        let mut r = range("10.0.0.0/23", true);
        assert_eq!(r.total(), 512 - 4);
        assert_eq!(r.first_free(), Some(ip("10.0.0.1")));
        for i in 1..=254 {
            r.take(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)));
        }
        // The run ends at .254 and the next address handed out is 10.0.1.1.
        assert_eq!(r.first_free(), Some(ip("10.0.1.1")));
        assert_eq!(r.used.len(), 1);
        r.take(ip("10.0.1.1"));
        // .254 and 10.0.1.1 are adjacent once .255 and .0 are skipped: one run.
        assert_eq!(r.used.len(), 1);
        r.free(ip("10.0.0.7"));
        assert_eq!(r.first_free(), Some(ip("10.0.0.7")));
        assert_eq!(r.used.len(), 2);
        assert_eq!(r.in_use, 254);
    }

    // Freed addresses are handed out again, lowest first; runs split and merge.
    #[test]
    fn free_and_take_keep_runs_exact() {
        let mut r = range("10.0.0.0/24", false);
        for i in 0..10u8 {
            r.take(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)));
        }
        r.free(ip("10.0.0.3"));
        r.free(ip("10.0.0.0"));
        assert_eq!(r.first_free(), Some(ip("10.0.0.0")));
        r.take(ip("10.0.0.0"));
        assert_eq!(r.first_free(), Some(ip("10.0.0.3")));
        assert!(r.is_used(ip("10.0.0.9")));
        assert!(!r.is_used(ip("10.0.0.3")));
        r.take(ip("10.0.0.3"));
        assert_eq!(r.used.len(), 1);
        assert_eq!(r.first_free(), Some(ip("10.0.0.10")));
        assert_eq!(r.in_use, 10);
    }

    // The ends of the address space neither overflow nor wrap.
    #[test]
    fn address_space_ends() {
        let mut r = range("255.255.255.254/31", false);
        r.take(ip("255.255.255.255"));
        assert_eq!(r.first_free(), Some(ip("255.255.255.254")));
        r.take(ip("255.255.255.254"));
        assert_eq!(r.first_free(), None);
        let mut r = range("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127", false);
        r.take(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
        r.take(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"));
        assert_eq!(r.first_free(), None);
        r.free(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
        assert_eq!(
            r.first_free(),
            Some(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"))
        );
        let r = range("0.0.0.0/0", true);
        assert_eq!(r.total(), (1u128 << 32) - 2 * (1 << 24));
        assert_eq!(r.first_free(), Some(ip("0.0.0.1")));
        let r = range("::/0", false);
        assert_eq!(r.total(), u128::MAX);
    }

    #[test]
    fn locate_finds_pool_and_cidr_in_config_order() {
        let pools = Pools::new(&[
            pool("a", &["10.0.0.0/24", "fd00::/120"], false),
            pool("b", &["10.0.2.0/24", "10.0.1.0/24"], true),
        ]);
        assert_eq!(
            pools.locate(ip("10.0.1.9")),
            Some(Place { pool: 1, range: 1 })
        );
        assert_eq!(
            pools.locate(ip("fd00::9")),
            Some(Place { pool: 0, range: 1 })
        );
        assert_eq!(pools.locate(ip("10.0.3.1")), None);
        let at = pools.locate(ip("10.0.1.0")).unwrap();
        assert!(!pools.allocatable(at, ip("10.0.1.0")));
        assert!(pools.allocatable(at, ip("10.0.1.1")));
        assert_eq!(pools.pools[1].total(), 2 * 254);
    }
}
