//! Property tests of the LoadBalancer IP allocator (`alloc`, issue 30): random sequences
//! of Service adds, updates and deletes, config reloads and restarts (a new leader
//! starting from the Services' statuses), with every status write fed back as the API
//! server would. After every step:
//!
//! - no address is held by two Services that may not share it, every held address is
//!   in a pool of the config in force, allocatable there, of the Service's families, in
//!   the pool its annotation names and equal to its request, when it has them;
//! - a pending Service's reason is true of the world (a full pool is full for it, an
//!   address in use is held by a Service it cannot share with, and so on): no Service
//!   waits while it could have an address;
//! - the pool figures count the distinct addresses held;
//! - a from-scratch allocator fed the same Services (their statuses as written) comes to
//!   the same holdings and the same pending Services;
//! - a refused reload had an address to orphan and changed nothing; after a restart no
//!   Service's address has moved.
//!
//! The checks are written from the rules over a brute-force walk of the small
//! pools below, not from the allocator's code.

// A test crate: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use podcidr_speaker::alloc::{
    AllocFacts, Allocator, Backend, Decision, Family, FamilyPolicy, Port, Protocol, Reason,
    Sharing, State,
};
use podcidr_speaker::config::{AddressPool, Protocol as PoolProtocol};
use podcidr_speaker::sources::services::ObjectKey;
use proptest::prelude::*;

const NAMES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];
const POOLS: [&str; 4] = ["p0", "p1", "p2", "m"];

// ---------------------------------------------------------------------------------------
// Inputs

/// The CIDRs pool `i` may have; a config keeps some of them (a shrink or a growth).
fn pool_cidrs(i: usize) -> Vec<IpNet> {
    let list: &[&str] = match i {
        0 => &["10.0.0.0/30", "fd00::/127"],
        1 => &["10.0.1.0/31", "10.0.0.255/32"],
        2 => &["10.0.2.254/31", "fd00::10/127"],
        _ => &["10.0.4.0/31"],
    };
    list.iter().map(|c| c.parse().unwrap()).collect()
}

/// Per pool: present, `avoid-buggy-ips`, `auto-assign`, which of its CIDRs (bit mask).
type PoolSpec = (bool, bool, bool, u8);

fn config(specs: &[PoolSpec; 4]) -> Vec<AddressPool> {
    specs
        .iter()
        .enumerate()
        .filter(|(_, s)| s.0)
        .filter_map(|(i, (_, avoid, auto, mask))| {
            let cidrs: Vec<IpNet> = pool_cidrs(i)
                .into_iter()
                .enumerate()
                .filter(|(j, _)| mask & (1 << j) != 0)
                .map(|(_, c)| c)
                .collect();
            (!cidrs.is_empty()).then(|| AddressPool {
                name: POOLS[i].into(),
                protocol: if i == 1 {
                    PoolProtocol::Layer2
                } else {
                    PoolProtocol::Bgp
                },
                cidrs,
                avoid_buggy_ips: *avoid,
                // The last pool is reserved unless the spec says otherwise.
                auto_assign: *auto && i != 3,
                bgp_advertisements: Vec::new(),
            })
        })
        .collect()
}

fn pool_spec() -> impl Strategy<Value = PoolSpec> {
    (
        prop::bool::weighted(0.85),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.85),
        1u8..4,
    )
}

fn configs() -> impl Strategy<Value = [PoolSpec; 4]> {
    [pool_spec(), pool_spec(), pool_spec(), pool_spec()]
}

const REQUESTS: [&str; 9] = [
    "10.0.0.1",
    "10.0.1.0",
    "10.0.1.1",
    "10.0.0.255",
    "10.0.4.1",
    "10.9.9.9",
    "fd00::1",
    "10.0.0.2,fd00::",
    "not-an-ip",
];

fn facts() -> impl Strategy<Value = AllocFacts> {
    let families = prop_oneof![
        4 => Just((vec![Family::Ipv4], FamilyPolicy::SingleStack)),
        1 => Just((vec![Family::Ipv6], FamilyPolicy::SingleStack)),
        1 => Just((vec![Family::Ipv4, Family::Ipv6], FamilyPolicy::RequireDualStack)),
        1 => Just((vec![Family::Ipv4, Family::Ipv6], FamilyPolicy::PreferDualStack)),
        1 => Just((vec![Family::Ipv6, Family::Ipv4], FamilyPolicy::PreferDualStack)),
    ];
    let request = prop_oneof![
        6 => Just((None, None)),
        1 => prop::sample::select(&REQUESTS[..]).prop_map(|r| (Some(r.to_owned()), None)),
        1 => prop::sample::select(&REQUESTS[..]).prop_map(|r| (None, Some(r.to_owned()))),
        1 => Just((Some("10.0.0.1".to_owned()), Some("10.0.0.1".to_owned()))),
    ];
    let pool = prop_oneof![
        6 => Just(None),
        2 => prop::sample::select(&POOLS[..]).prop_map(|p| Some(Arc::from(p))),
        1 => Just(Some(Arc::from("gone"))),
    ];
    let key = prop_oneof![
        2 => Just(None),
        2 => Just(Some(Arc::from("k"))),
        1 => Just(Some(Arc::from("j"))),
        1 => Just(Some(Arc::from(""))),
    ];
    let backend = prop_oneof![
        3 => Just(Backend::Cluster),
        1 => Just(Backend::Local("app=x".into())),
        1 => Just(Backend::Local("app=y".into())),
    ];
    let ports = prop::collection::btree_set(
        (prop::bool::ANY, prop::sample::select(&[53u16, 80, 443][..])).prop_map(|(udp, port)| {
            Port {
                protocol: if udp { Protocol::Udp } else { Protocol::Tcp },
                port,
            }
        }),
        1..3,
    );
    let class = prop_oneof![8 => Just(None), 1 => Just(Some(Arc::from("other")))];
    (
        prop::bool::weighted(0.9),
        class,
        families,
        request,
        pool,
        key,
        backend,
        ports,
    )
        .prop_map(
            |(
                lb,
                class,
                (families, family_policy),
                (spec, annotation),
                pool,
                key,
                backend,
                ports,
            )| {
                AllocFacts {
                    load_balancer: lb,
                    class,
                    families,
                    family_policy,
                    load_balancer_ip: spec,
                    ips_annotation: annotation,
                    pool,
                    sharing: Sharing {
                        key,
                        backend,
                        ports,
                    },
                    status_ips: Vec::new(),
                }
            },
        )
}

#[derive(Debug, Clone)]
enum Op {
    Upsert(usize, AllocFacts),
    Delete(usize),
    Reload([PoolSpec; 4]),
    /// A new leader: a fresh allocator fed every Service in this rotation, then synced.
    Restart(usize),
    /// Somebody writes a status by hand.
    Scribble(usize, &'static str),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..NAMES.len(), facts()).prop_map(|(i, f)| Op::Upsert(i, f)),
        2 => (0..NAMES.len()).prop_map(Op::Delete),
        2 => configs().prop_map(Op::Reload),
        1 => (0..NAMES.len()).prop_map(Op::Restart),
        1 => (0..NAMES.len(), prop::sample::select(&["10.0.0.3", "10.0.2.255", "fd00::1"][..]))
            .prop_map(|(i, s)| Op::Scribble(i, s)),
    ]
}

// ---------------------------------------------------------------------------------------
// The world as the API server holds it

struct World {
    pools: Vec<AddressPool>,
    services: BTreeMap<ObjectKey, AllocFacts>,
    alloc: Allocator,
}

fn key(i: usize) -> ObjectKey {
    ObjectKey::new("default", NAMES[i])
}

impl World {
    /// Carries out the writes of `ds` as the API server would and feeds the updated
    /// Services back, until nothing is left to write.
    fn settle(&mut self, mut ds: Vec<Decision>) {
        for _ in 0..64 {
            // Writes land in order: the last one of a Service is its status.
            let writes: BTreeMap<ObjectKey, Vec<IpAddr>> = ds
                .iter()
                .filter_map(|d| d.write.clone().map(|w| (d.service.clone(), w)))
                .collect();
            if writes.is_empty() {
                return;
            }
            ds = Vec::new();
            for (k, ips) in writes {
                if let Some(f) = self.services.get_mut(&k) {
                    f.status_ips = ips;
                    ds.extend(self.alloc.apply(&k, Some(f.clone())));
                }
            }
        }
        panic!("status writes never settle: {ds:?}");
    }

    fn fresh(&self, rotation: usize) -> (Allocator, Vec<Decision>) {
        let mut a = Allocator::new(&self.pools, BTreeSet::new());
        let mut ds = Vec::new();
        let entries: Vec<_> = self.services.iter().collect();
        let n = entries.len().max(1);
        for i in 0..entries.len() {
            let (k, f) = entries[(i + rotation) % n];
            ds.extend(a.apply(k, Some(f.clone())));
        }
        ds.extend(a.synced());
        (a, ds)
    }
}

// ---------------------------------------------------------------------------------------
// The rules, written out by hand

fn fam(ip: IpAddr) -> Family {
    if ip.is_ipv4() {
        Family::Ipv4
    } else {
        Family::Ipv6
    }
}

fn buggy(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V4(v4) if matches!(v4.octets()[3], 0 | 255))
}

/// The pool of `ip`, when it lies in one.
fn pool_of(pools: &[AddressPool], ip: IpAddr) -> Option<&AddressPool> {
    pools
        .iter()
        .find(|p| p.cidrs.iter().any(|c| c.contains(&ip)))
}

fn allocatable(pool: &AddressPool, ip: IpAddr) -> bool {
    !(pool.avoid_buggy_ips && buggy(ip))
}

/// Every address of the pool of `family` that may be handed out, in walk order.
fn addresses(pool: &AddressPool, family: Family) -> Vec<IpAddr> {
    pool.cidrs
        .iter()
        .filter(|c| fam(c.network()) == family)
        .flat_map(|c| c.hosts_all())
        .filter(|ip| allocatable(pool, *ip))
        .collect()
}

trait AllHosts {
    fn hosts_all(&self) -> Vec<IpAddr>;
}

impl AllHosts for IpNet {
    /// Every address, network and broadcast included (the pools here are tiny).
    fn hosts_all(&self) -> Vec<IpAddr> {
        match self {
            IpNet::V4(n) => {
                let a = u32::from(n.network());
                let b = u32::from(n.broadcast());
                (a..=b).map(|x| IpAddr::from(x.to_be_bytes())).collect()
            }
            IpNet::V6(n) => {
                let a = u128::from(n.network());
                let b = u128::from(n.broadcast());
                (a..=b).map(|x| IpAddr::from(x.to_be_bytes())).collect()
            }
        }
    }
}

/// The sharing rule.
fn may_share(a: &AllocFacts, b: &AllocFacts) -> bool {
    let key = |f: &AllocFacts| f.sharing.key.clone().filter(|k| !k.is_empty());
    key(a).is_some()
        && key(a) == key(b)
        && a.sharing.backend == b.sharing.backend
        && a.sharing.ports.is_disjoint(&b.sharing.ports)
}

fn served(f: &AllocFacts) -> bool {
    f.load_balancer && f.class.is_none()
}

fn fits(f: &AllocFacts, ips: &[IpAddr]) -> bool {
    let got: BTreeSet<Family> = ips.iter().map(|ip| fam(*ip)).collect();
    let want: BTreeSet<Family> = f.families.iter().copied().collect();
    got.len() == ips.len()
        && !got.is_empty()
        && match f.family_policy {
            FamilyPolicy::PreferDualStack => got.is_subset(&want),
            _ => got == want,
        }
}

/// The addresses requested, when readable.
fn requested(f: &AllocFacts) -> Option<Result<Vec<IpAddr>, ()>> {
    let spec = f
        .load_balancer_ip
        .as_deref()
        .filter(|s| !s.trim().is_empty());
    let ann = f.ips_annotation.as_deref().filter(|s| !s.trim().is_empty());
    match (spec, ann) {
        (None, None) => None,
        (Some(_), Some(_)) => Some(Err(())),
        // spec.loadBalancerIP is one address.
        (Some(s), None) => Some(
            s.trim()
                .parse::<IpAddr>()
                .map(|ip| vec![ip])
                .map_err(|_| ()),
        ),
        (None, Some(s)) => Some(
            s.split(',')
                .map(|t| t.trim().parse::<IpAddr>().map_err(|_| ()))
                .collect::<Result<Vec<_>, _>>()
                .and_then(|ips| {
                    let fams: BTreeSet<Family> = ips.iter().map(|ip| fam(*ip)).collect();
                    if ips.len() > 2 || fams.len() != ips.len() {
                        Err(())
                    } else {
                        Ok(ips)
                    }
                }),
        ),
    }
}

/// What each Service holds.
fn holdings(alloc: &Allocator) -> BTreeMap<ObjectKey, (Vec<IpAddr>, Arc<str>)> {
    alloc
        .services()
        .filter_map(|(k, _, s)| match s {
            State::Holds(h) => Some((k.clone(), (h.ips.clone(), h.pool.clone()))),
            _ => None,
        })
        .collect()
}

fn pending(alloc: &Allocator) -> BTreeMap<ObjectKey, Reason> {
    alloc
        .services()
        .filter_map(|(k, _, s)| match s {
            State::Pending(r) => Some((k.clone(), r.clone())),
            _ => None,
        })
        .collect()
}

/// Whether `f` (not holding anything) could get an address of each needed family in
/// `pool`: free, or held only by Services it may share with.
fn placeable(
    world: &World,
    holders: &BTreeMap<IpAddr, Vec<ObjectKey>>,
    me: &ObjectKey,
    f: &AllocFacts,
    pool: &AddressPool,
) -> bool {
    let found: Vec<bool> = f
        .families
        .iter()
        .map(|family| {
            addresses(pool, *family).into_iter().any(|ip| {
                holders.get(&ip).is_none_or(|by| {
                    by.iter()
                        .filter(|k| *k != me)
                        .all(|k| may_share(f, &world.services[k]))
                })
            })
        })
        .collect();
    match f.family_policy {
        FamilyPolicy::PreferDualStack => found.iter().any(|x| *x),
        _ => found.iter().all(|x| *x),
    }
}

fn check(world: &World) -> Result<(), TestCaseError> {
    let held = holdings(&world.alloc);
    let mut holders: BTreeMap<IpAddr, Vec<ObjectKey>> = BTreeMap::new();
    for (k, (ips, pool)) in &held {
        let f = &world.services[k];
        prop_assert!(served(f), "{k} holds {ips:?} but is not ours");
        prop_assert!(fits(f, ips), "{k} holds {ips:?} against {:?}", f.families);
        for ip in ips {
            let p = pool_of(&world.pools, *ip);
            prop_assert!(p.is_some(), "{k} holds {ip} outside every pool");
            let p = p.unwrap();
            prop_assert!(
                allocatable(p, *ip),
                "{k} holds {ip}, which {} skips",
                p.name
            );
            prop_assert_eq!(p.name.as_str(), &**pool);
            holders.entry(*ip).or_default().push(k.clone());
        }
        if let Some(named) = &f.pool {
            prop_assert_eq!(
                &**named,
                &**pool,
                "{} holds from another pool than named",
                k
            );
        }
        if let Some(Ok(req)) = requested(f) {
            let a: BTreeSet<_> = req.iter().collect();
            let b: BTreeSet<_> = ips.iter().collect();
            prop_assert_eq!(a, b, "{} holds other addresses than it asks for", k);
        }
    }
    for (ip, by) in &holders {
        for (i, x) in by.iter().enumerate() {
            for y in &by[i + 1..] {
                prop_assert!(
                    may_share(&world.services[x], &world.services[y]),
                    "{ip} held by {x} and {y}, which may not share"
                );
            }
        }
    }
    for (k, reason) in pending(&world.alloc) {
        let f = &world.services[&k];
        prop_assert!(served(f), "{k} pending but not ours");
        let pool_named = f
            .pool
            .as_ref()
            .and_then(|n| world.pools.iter().find(|p| *p.name == **n));
        let ok = match &reason {
            Reason::NoFamily => f.families.is_empty(),
            Reason::Request(_) => requested(f) == Some(Err(())),
            Reason::RequestedFamilies { ips, .. } => {
                requested(f) == Some(Ok(ips.clone())) && !fits(f, ips)
            }
            Reason::NotInPool { ip } => pool_of(&world.pools, *ip).is_none(),
            Reason::Skipped { ip, .. } => {
                pool_of(&world.pools, *ip).is_some_and(|p| !allocatable(p, *ip))
            }
            Reason::SplitPools { ips } => {
                let names: BTreeSet<_> = ips
                    .iter()
                    .filter_map(|ip| pool_of(&world.pools, *ip).map(|p| &p.name))
                    .collect();
                names.len() > 1
            }
            Reason::OutsideNamedPool { ip, pool } => {
                f.pool.as_deref() == Some(&**pool)
                    && pool_of(&world.pools, *ip).is_some_and(|p| *p.name != **pool)
            }
            Reason::InUse { ip, by, .. } => {
                holders.get(ip).is_some_and(|h| h.contains(by))
                    && !may_share(f, &world.services[by])
            }
            Reason::UnknownPool { pool } => {
                f.pool.as_deref() == Some(&**pool) && pool_named.is_none()
            }
            Reason::PoolFull { pool, .. } => {
                requested(f).is_none()
                    && f.pool.as_deref() == Some(&**pool)
                    && pool_named.is_some_and(|p| !placeable(world, &holders, &k, f, p))
            }
            Reason::NoAutoPool { .. } | Reason::AutoPoolsFull { .. } => {
                requested(f).is_none()
                    && f.pool.is_none()
                    && world
                        .pools
                        .iter()
                        .filter(|p| p.auto_assign)
                        .all(|p| !placeable(world, &holders, &k, f, p))
            }
        };
        prop_assert!(
            ok,
            "{} pending for a reason that is not true: {}",
            k,
            reason
        );
    }
    for u in world.alloc.usage() {
        let n = holders
            .keys()
            .filter(|ip| pool_of(&world.pools, **ip).is_some_and(|p| *p.name == *u.name))
            .count();
        prop_assert_eq!(u.in_use, n as u128, "pool {}", u.name);
    }
    // From scratch, from the statuses as written: the same holdings, the same pending.
    let (fresh, _) = world.fresh(0);
    prop_assert_eq!(holdings(&fresh), held.clone());
    let fresh_pending: Vec<ObjectKey> = pending(&fresh).into_keys().collect();
    let our_pending: Vec<ObjectKey> = pending(&world.alloc).into_keys().collect();
    prop_assert_eq!(fresh_pending, our_pending);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn allocation_invariants_hold_after_every_step(
        start in configs(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let pools = config(&start);
        let mut alloc = Allocator::new(&pools, BTreeSet::new());
        alloc.synced();
        let mut world = World { pools, services: BTreeMap::new(), alloc };
        for op in ops {
            match op {
                Op::Upsert(i, mut f) => {
                    // The status is the API server's: what was written stays.
                    f.status_ips = world
                        .services
                        .get(&key(i))
                        .map(|old| old.status_ips.clone())
                        .unwrap_or_default();
                    world.services.insert(key(i), f.clone());
                    let ds = world.alloc.apply(&key(i), Some(f));
                    world.settle(ds);
                }
                Op::Delete(i) => {
                    world.services.remove(&key(i));
                    let ds = world.alloc.apply(&key(i), None);
                    prop_assert!(ds.iter().all(|d| d.service != key(i) || d.write.is_none()));
                    world.settle(ds);
                }
                Op::Reload(spec) => {
                    let pools = config(&spec);
                    let before = holdings(&world.alloc);
                    let orphaned = before.values().flat_map(|(ips, _)| ips).any(|ip| {
                        pool_of(&pools, *ip).is_none_or(|p| !allocatable(p, *ip))
                    });
                    match world.alloc.reload(&pools) {
                        Ok(ds) => {
                            prop_assert!(!orphaned, "a reload orphaning an address was taken");
                            world.pools = pools;
                            world.settle(ds);
                        }
                        Err(refusal) => {
                            prop_assert!(orphaned, "refused without an orphan: {}", refusal);
                            prop_assert_eq!(holdings(&world.alloc), before);
                        }
                    }
                }
                Op::Restart(rotation) => {
                    let before = holdings(&world.alloc);
                    let (fresh, ds) = world.fresh(rotation);
                    world.alloc = fresh;
                    world.settle(ds);
                    let after = holdings(&world.alloc);
                    for (k, (ips, _)) in &before {
                        prop_assert_eq!(
                            after.get(k).map(|h| &h.0),
                            Some(ips),
                            "{} moved at a restart",
                            k
                        );
                    }
                }
                Op::Scribble(i, s) => {
                    if let Some(f) = world.services.get_mut(&key(i)) {
                        f.status_ips = vec![s.parse().unwrap()];
                        let f = f.clone();
                        let ds = world.alloc.apply(&key(i), Some(f));
                        world.settle(ds);
                    }
                }
            }
            check(&world)?;
        }
    }
}
