//! The allocator's rules, one test per rule, each derived from MetalLB v0.12.1's
//! behaviour (its allocator_test.go and controller_test.go cases, rewritten as our own
//! scenarios); where our rule differs the test says so.

use super::*;
use crate::config::Protocol as PoolProtocol;

fn pool(name: &str, cidrs: &[&str]) -> AddressPool {
    AddressPool {
        name: name.into(),
        protocol: PoolProtocol::Bgp,
        cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
        avoid_buggy_ips: false,
        auto_assign: true,
        bgp_advertisements: Vec::new(),
    }
}

fn avoiding(mut p: AddressPool) -> AddressPool {
    p.avoid_buggy_ips = true;
    p
}

fn manual(mut p: AddressPool) -> AddressPool {
    p.auto_assign = false;
    p
}

fn layer2(mut p: AddressPool) -> AddressPool {
    p.protocol = PoolProtocol::Layer2;
    p
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new("default", name)
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| ip(s)).collect()
}

fn tcp(port: u16) -> Port {
    Port {
        protocol: Protocol::Tcp,
        port,
    }
}

/// An IPv4 LoadBalancer Service on TCP/80, no sharing.
fn svc() -> AllocFacts {
    AllocFacts {
        load_balancer: true,
        families: vec![Family::Ipv4],
        sharing: Sharing {
            ports: BTreeSet::from([tcp(80)]),
            ..Sharing::default()
        },
        ..AllocFacts::default()
    }
}

fn v6() -> AllocFacts {
    AllocFacts {
        families: vec![Family::Ipv6],
        ..svc()
    }
}

fn dual(policy: FamilyPolicy) -> AllocFacts {
    AllocFacts {
        families: vec![Family::Ipv4, Family::Ipv6],
        family_policy: policy,
        ..svc()
    }
}

fn shared(k: &str, ports: &[u16]) -> AllocFacts {
    AllocFacts {
        sharing: Sharing {
            key: Some(k.into()),
            backend: Backend::Cluster,
            ports: ports.iter().map(|p| tcp(*p)).collect(),
        },
        ..svc()
    }
}

fn requesting(s: &str) -> AllocFacts {
    AllocFacts {
        load_balancer_ip: Some(s.into()),
        ..svc()
    }
}

fn in_pool(name: &str) -> AllocFacts {
    AllocFacts {
        pool: Some(name.into()),
        ..svc()
    }
}

/// A synced allocator over these pools for Services without a class.
fn allocator(pools: &[AddressPool]) -> Allocator {
    let mut a = Allocator::new(pools, BTreeSet::new());
    assert!(a.synced().is_empty());
    a
}

fn held(a: &Allocator, name: &str) -> Option<Vec<IpAddr>> {
    match a.state(&key(name)) {
        Some(State::Holds(h)) => Some(h.ips.clone()),
        _ => None,
    }
}

fn pending(a: &Allocator, name: &str) -> Option<Reason> {
    match a.state(&key(name)) {
        Some(State::Pending(r)) => Some(r.clone()),
        _ => None,
    }
}

fn add(a: &mut Allocator, name: &str, facts: AllocFacts) -> Vec<Decision> {
    a.apply(&key(name), Some(facts))
}

/// The decision about `name` in `ds`.
fn about<'a>(ds: &'a [Decision], name: &str) -> &'a Decision {
    ds.iter()
        .find(|d| d.service == key(name))
        .unwrap_or_else(|| panic!("no decision about {name} in {ds:?}"))
}

// Rule: addresses ascending inside a CIDR, .0 and .255 included without avoid-buggy-ips;
// CIDRs in the order the config writes them (MetalLB: the pool's CIDR list in order).
#[test]
fn ascending_in_config_order_including_network_address() {
    let mut a = allocator(&[pool("p", &["10.0.1.0/31", "10.0.0.0/31"])]);
    for name in ["s1", "s2", "s3", "s4"] {
        add(&mut a, name, svc());
    }
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.1.0"])));
    assert_eq!(held(&a, "s2"), Some(ips(&["10.0.1.1"])));
    assert_eq!(held(&a, "s3"), Some(ips(&["10.0.0.0"])));
    assert_eq!(held(&a, "s4"), Some(ips(&["10.0.0.1"])));
    let d = add(&mut a, "s5", svc());
    assert_eq!(
        about(&d, "s5").state,
        State::Pending(Reason::AutoPoolsFull {
            families: vec![Family::Ipv4]
        })
    );
}

// Rule: avoid-buggy-ips skips IPv4 addresses ending in .0 or .255 (MetalLB's
// TestBuggyIPs: a range across a /24 boundary), never an IPv6 one.
#[test]
fn avoid_buggy_ips_skips_dot_zero_and_dot_255() {
    let mut a = allocator(&[
        avoiding(pool("p", &["10.0.0.255/32", "10.0.1.0/31"])),
        avoiding(pool("q", &["fd00::/127"])),
    ]);
    add(&mut a, "s1", svc());
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.1.1"])));
    add(&mut a, "s2", svc());
    assert!(matches!(
        pending(&a, "s2"),
        Some(Reason::AutoPoolsFull { .. })
    ));
    add(&mut a, "s3", v6());
    assert_eq!(held(&a, "s3"), Some(ips(&["fd00::"])));
    // Asked for, a skipped address is refused with the reason.
    add(&mut a, "s4", requesting("10.0.1.0"));
    assert_eq!(
        pending(&a, "s4"),
        Some(Reason::Skipped {
            ip: ip("10.0.1.0"),
            pool: "p".into()
        })
    );
}

// Rule: a requested IP (spec.loadBalancerIP) is given when it lies in a pool, whatever
// that pool's auto-assign (MetalLB: "request specific IP"), layer2 pools included.
#[test]
fn requested_ip_from_any_pool() {
    let mut a = allocator(&[
        pool("auto", &["10.0.0.0/30"]),
        manual(pool("manual", &["10.0.9.0/30"])),
        layer2(pool("l2", &["10.0.8.0/30"])),
    ]);
    let d = add(&mut a, "s1", requesting("10.0.9.2"));
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.9.2"])));
    assert_eq!(about(&d, "s1").write, Some(ips(&["10.0.9.2"])));
    add(&mut a, "s2", requesting("10.0.8.3"));
    assert_eq!(held(&a, "s2"), Some(ips(&["10.0.8.3"])));
    // The annotation form, with spaces as people write them.
    let facts = AllocFacts {
        ips_annotation: Some(" 10.0.0.3 ".into()),
        ..svc()
    };
    add(&mut a, "s3", facts);
    assert_eq!(held(&a, "s3"), Some(ips(&["10.0.0.3"])));
}

// Rule: a requested IP must lie in some pool, not be skipped, match the Service's
// family, and be free or compatibly shared; both fields set is an error. No fallback
// to another address (MetalLB: "request infeasible IP", "request IP from wrong
// ip-family", "request IP from both ...").
#[test]
fn requested_ip_refusals_name_the_reason() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/30", "fd00::/126"])]);
    add(&mut a, "s1", requesting("10.9.9.9"));
    assert_eq!(
        pending(&a, "s1"),
        Some(Reason::NotInPool { ip: ip("10.9.9.9") })
    );
    add(&mut a, "s2", requesting("fd00::1"));
    assert!(matches!(
        pending(&a, "s2"),
        Some(Reason::RequestedFamilies { .. })
    ));
    add(&mut a, "s3", requesting("10.0.0.1"));
    add(&mut a, "s4", requesting("10.0.0.1"));
    assert_eq!(
        pending(&a, "s4"),
        Some(Reason::InUse {
            ip: ip("10.0.0.1"),
            by: key("s3"),
            conflict: Conflict::NotShared
        })
    );
    let both = AllocFacts {
        ips_annotation: Some("10.0.0.2".into()),
        ..requesting("10.0.0.2")
    };
    add(&mut a, "s5", both);
    assert_eq!(pending(&a, "s5"), Some(Reason::Request(RequestError::Both)));
    add(&mut a, "s6", requesting("10.0.0.300"));
    assert!(matches!(
        pending(&a, "s6"),
        Some(Reason::Request(RequestError::NotAnAddress { .. }))
    ));
    // None of the refused requests fell back to a free address.
    assert_eq!(a.usage()[0].in_use, 1);
}

// Rule: two requested addresses (dual-stack) must come from one pool (MetalLB's
// poolFor: every address in the same pool).
#[test]
fn requested_pair_from_one_pool() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/30"]), pool("q", &["fd00::/126"])]);
    let facts = AllocFacts {
        ips_annotation: Some("10.0.0.1,fd00::1".into()),
        ..dual(FamilyPolicy::RequireDualStack)
    };
    add(&mut a, "s1", facts);
    assert!(matches!(pending(&a, "s1"), Some(Reason::SplitPools { .. })));
}

// Rule: a requested IP and a pool annotation together must agree. Differs from MetalLB
// 0.12, which took the IP and cleared it again at the next pass, for ever.
#[test]
fn requested_ip_outside_named_pool_is_refused() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/30"]), pool("q", &["10.0.1.0/30"])]);
    let facts = AllocFacts {
        pool: Some("q".into()),
        ..requesting("10.0.0.1")
    };
    add(&mut a, "s1", facts.clone());
    assert_eq!(
        pending(&a, "s1"),
        Some(Reason::OutsideNamedPool {
            ip: ip("10.0.0.1"),
            pool: "q".into()
        })
    );
    let agreeing = AllocFacts {
        load_balancer_ip: Some("10.0.1.2".into()),
        ..facts
    };
    add(&mut a, "s1", agreeing);
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.1.2"])));
}

// Rule: the pool named by metallb.universe.tf/address-pool, whatever its auto-assign;
// no fallback when it is full or unknown (MetalLB: "request IP from specific pool",
// "unknown pool requested").
#[test]
fn named_pool_without_fallback() {
    let mut a = allocator(&[
        pool("big", &["10.0.0.0/24"]),
        manual(pool("one", &["10.0.9.9/32"])),
    ]);
    add(&mut a, "s1", in_pool("one"));
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.9.9"])));
    add(&mut a, "s2", in_pool("one"));
    assert_eq!(
        pending(&a, "s2"),
        Some(Reason::PoolFull {
            pool: "one".into(),
            families: vec![Family::Ipv4]
        })
    );
    add(&mut a, "s3", in_pool("nope"));
    assert_eq!(
        pending(&a, "s3"),
        Some(Reason::UnknownPool {
            pool: "nope".into()
        })
    );
    assert_eq!(a.usage()[0].in_use, 0);
}

// Rule: without a request or a name, the auto-assign pools in config order, skipping
// auto-assign: false. Differs from MetalLB 0.12, whose order was a Go map's (random).
#[test]
fn auto_assign_pools_in_config_order() {
    let mut a = allocator(&[
        manual(pool("reserved", &["10.0.0.0/30"])),
        pool("first", &["10.0.1.0/31"]),
        pool("second", &["10.0.2.0/31"]),
    ]);
    for name in ["s1", "s2", "s3"] {
        add(&mut a, name, svc());
    }
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.1.0"])));
    assert_eq!(held(&a, "s2"), Some(ips(&["10.0.1.1"])));
    assert_eq!(held(&a, "s3"), Some(ips(&["10.0.2.0"])));
    let only_manual = &mut allocator(&[manual(pool("reserved", &["10.0.0.0/30"]))]);
    add(only_manual, "s1", svc());
    assert_eq!(
        pending(only_manual, "s1"),
        Some(Reason::NoAutoPool {
            families: vec![Family::Ipv4]
        })
    );
}

// Rule (sharing): same key, same backend, no port in common: one address; automatic
// allocation packs a sharer onto the first compatible address, even before a free one
// (MetalLB: "s3 takes the same IP as s4", "s3 can't share with s4 (port conflict)").
#[test]
fn sharing_packs_onto_first_compatible_address() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/29"])]);
    add(&mut a, "s1", shared("k", &[80]));
    add(&mut a, "s2", svc());
    add(&mut a, "s3", shared("k", &[443]));
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.0"])));
    assert_eq!(held(&a, "s2"), Some(ips(&["10.0.0.1"])));
    assert_eq!(held(&a, "s3"), Some(ips(&["10.0.0.0"])));
    // A port in common: the next free address.
    add(&mut a, "s4", shared("k", &[80]));
    assert_eq!(held(&a, "s4"), Some(ips(&["10.0.0.2"])));
    // Another key: never on a shared address.
    add(&mut a, "s5", shared("j", &[22]));
    assert_eq!(held(&a, "s5"), Some(ips(&["10.0.0.3"])));
    // Asked for by address, the refusal says why.
    let facts = AllocFacts {
        load_balancer_ip: Some("10.0.0.0".into()),
        ..shared("k", &[80])
    };
    add(&mut a, "s6", facts);
    assert_eq!(
        pending(&a, "s6"),
        Some(Reason::InUse {
            ip: ip("10.0.0.0"),
            by: key("s1"),
            conflict: Conflict::Port(tcp(80))
        })
    );
    assert_eq!(a.holders(ip("10.0.0.0")), vec![key("s1"), key("s3")]);
    assert_eq!(a.usage()[0].in_use, 4);
}

// Rule (sharing): under externalTrafficPolicy Local the selectors must be identical,
// and Local never shares with Cluster (MetalLB's backend key: the selector under Local,
// empty under Cluster).
#[test]
fn sharing_under_local_needs_the_same_selector() {
    let local = |sel: &str, port: u16| AllocFacts {
        sharing: Sharing {
            backend: Backend::Local(sel.into()),
            ..shared("k", &[port]).sharing
        },
        ..svc()
    };
    let mut a = allocator(&[pool("p", &["10.0.0.0/29"])]);
    add(&mut a, "s1", local("app=a", 80));
    add(&mut a, "s2", local("app=a", 443));
    add(&mut a, "s3", local("app=b", 8080));
    add(&mut a, "s4", shared("k", &[9000]));
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.0"])));
    assert_eq!(held(&a, "s2"), Some(ips(&["10.0.0.0"])));
    assert_eq!(held(&a, "s3"), Some(ips(&["10.0.0.1"])));
    assert_eq!(held(&a, "s4"), Some(ips(&["10.0.0.2"])));
}

// Rule: an address stays in use until its last holder lets go (MetalLB's
// TestPoolMetrics: the in-use count drops only with the last sharer).
#[test]
fn shared_address_stays_until_last_holder_leaves() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/31"])]);
    add(&mut a, "s1", shared("k", &[80]));
    add(&mut a, "s2", shared("k", &[443]));
    a.apply(&key("s1"), None);
    assert_eq!(a.usage()[0].in_use, 1);
    add(&mut a, "s3", svc());
    assert_eq!(held(&a, "s3"), Some(ips(&["10.0.0.1"])));
    a.apply(&key("s2"), None);
    assert_eq!(a.usage()[0].in_use, 1);
    add(&mut a, "s4", svc());
    assert_eq!(held(&a, "s4"), Some(ips(&["10.0.0.0"])));
}

// Rule: the sole holder of an address may change its sharing key in place; with other
// holders it moves (MetalLB: "s4 changes its sharing key in place", "s3 can't change
// its sharing key while keeping the same IP").
#[test]
fn changing_the_sharing_key_alone_keeps_together_moves() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/30"])]);
    add(&mut a, "s1", shared("k", &[80]));
    add(&mut a, "s1", shared("other", &[80]));
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.0"])));
    add(&mut a, "s2", shared("other", &[443]));
    assert_eq!(held(&a, "s2"), Some(ips(&["10.0.0.0"])));
    let d = add(&mut a, "s2", shared("third", &[443]));
    assert_eq!(held(&a, "s2"), Some(ips(&["10.0.0.1"])));
    assert_eq!(about(&d, "s2").write, Some(ips(&["10.0.0.1"])));
    // Changing its ports while keeping the key keeps the address.
    add(&mut a, "s1", shared("other", &[8080]));
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.0"])));
}

// Rule (dual-stack): RequireDualStack gets one address per family from one pool, or
// none (MetalLB: "s5 can't get dual-stack IPs", "ip dual-stack assign s1 from different
// pools" refused).
#[test]
fn require_dual_stack_from_one_pool() {
    let mut a = allocator(&[
        pool("v4only", &["10.0.0.0/30"]),
        pool("both", &["10.0.1.0/31", "fd00::/127"]),
    ]);
    add(&mut a, "s1", dual(FamilyPolicy::RequireDualStack));
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.1.0", "fd00::"])));
    add(&mut a, "s2", dual(FamilyPolicy::RequireDualStack));
    assert_eq!(held(&a, "s2"), Some(ips(&["10.0.1.1", "fd00::1"])));
    add(&mut a, "s3", dual(FamilyPolicy::RequireDualStack));
    assert!(matches!(
        pending(&a, "s3"),
        Some(Reason::AutoPoolsFull { .. })
    ));
    // The v4-only pool's addresses stayed untouched.
    assert_eq!(a.usage()[0].in_use, 0);
    // Single-stack by the Service's family.
    add(&mut a, "s4", v6());
    assert!(matches!(
        pending(&a, "s4"),
        Some(Reason::AutoPoolsFull { .. })
    ));
    add(&mut a, "s5", svc());
    assert_eq!(held(&a, "s5"), Some(ips(&["10.0.0.0"])));
}

// Rule (dual-stack): PreferDualStack takes what the pool has of its families, at least
// one, and the missing family once the pool has one (later MetalLB:
// AllocateFromPoolForAdditionalFamily).
#[test]
fn prefer_dual_stack_takes_what_there_is_then_completes() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/30"])]);
    add(&mut a, "s1", dual(FamilyPolicy::PreferDualStack));
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.0"])));
    let d = a
        .reload(&[pool("p", &["10.0.0.0/30", "fd00::/127"])])
        .unwrap();
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.0", "fd00::"])));
    assert_eq!(about(&d, "s1").write, Some(ips(&["10.0.0.0", "fd00::"])));
}

// Rule: existing status addresses are claimed as Services arrive, before anything new
// is handed out at start, so a restart or a leader change never moves an address
// (MetalLB: nothing is allocated until the controller has synced).
#[test]
fn status_addresses_are_claimed_before_new_allocations() {
    let mut a = Allocator::new(&[pool("p", &["10.0.0.0/30"])], BTreeSet::new());
    // s1 comes first in key order and has no address; s2 holds the first one.
    let d = add(&mut a, "s1", svc());
    assert_eq!(about(&d, "s1").state, State::Waiting);
    assert_eq!(about(&d, "s1").write, None);
    let s2 = AllocFacts {
        status_ips: ips(&["10.0.0.0"]),
        ..svc()
    };
    let d = add(&mut a, "s2", s2);
    assert_eq!(held(&a, "s2"), Some(ips(&["10.0.0.0"])));
    // Kept as it is: nothing to write, no Event.
    assert_eq!(about(&d, "s2").write, None);
    assert_eq!(about(&d, "s2").event(), None);
    let d = a.synced();
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.1"])));
    assert_eq!(
        about(&d, "s1").event(),
        Some(AllocEvent::Allocated(Holding {
            ips: ips(&["10.0.0.1"]),
            pool: "p".into()
        }))
    );
}

// Rule: a status address that is not valid any more (outside every pool, or taken by
// a Service that claimed it first without sharing) is replaced at sync (MetalLB:
// "invalid IP assigned", "invalid ingress state").
#[test]
fn invalid_status_addresses_are_replaced_at_sync() {
    let mut a = Allocator::new(&[pool("p", &["10.0.0.0/30"])], BTreeSet::new());
    let with = |status: &str| AllocFacts {
        status_ips: ips(&[status]),
        ..svc()
    };
    add(&mut a, "outside", with("192.0.2.1"));
    add(&mut a, "first", with("10.0.0.2"));
    add(&mut a, "second", with("10.0.0.2"));
    assert_eq!(a.state(&key("second")), Some(&State::Waiting));
    let d = a.synced();
    assert_eq!(held(&a, "first"), Some(ips(&["10.0.0.2"])));
    // Decided in key order once all have claimed theirs.
    assert_eq!(held(&a, "outside"), Some(ips(&["10.0.0.0"])));
    assert_eq!(held(&a, "second"), Some(ips(&["10.0.0.1"])));
    assert_eq!(about(&d, "second").write, Some(ips(&["10.0.0.1"])));
}

// Rule: a changed pool annotation or requested IP moves the Service; the same request
// keeps it (MetalLB: "switch to a different specific pool", differentIPRequested).
#[test]
fn changed_pool_or_request_moves() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/30"]), pool("q", &["10.0.1.0/30"])]);
    add(&mut a, "s1", svc());
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.0"])));
    add(&mut a, "s1", in_pool("p"));
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.0"])));
    add(&mut a, "s1", in_pool("q"));
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.1.0"])));
    add(&mut a, "s1", requesting("10.0.0.3"));
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.3"])));
    assert_eq!(a.usage()[1].in_use, 0);
    // A move that cannot be made leaves the Service pending, its status cleared.
    add(&mut a, "s2", requesting("10.0.0.2"));
    let d = add(&mut a, "s1", requesting("10.0.0.2"));
    assert_eq!(about(&d, "s1").write, Some(Vec::new()));
    assert!(matches!(pending(&a, "s1"), Some(Reason::InUse { .. })));
}

// Rule: a request that becomes unreadable never takes the address away (a bad edit is
// reported, the address stays).
#[test]
fn unreadable_request_keeps_the_address_with_a_warning() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/30"])]);
    add(&mut a, "s1", requesting("10.0.0.1"));
    let both = AllocFacts {
        ips_annotation: Some("10.0.0.2".into()),
        status_ips: ips(&["10.0.0.1"]),
        ..requesting("10.0.0.1")
    };
    let d = add(&mut a, "s1", both);
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.1"])));
    assert_eq!(about(&d, "s1").write, None);
    assert_eq!(
        about(&d, "s1").warning,
        Some(Reason::Request(RequestError::Both))
    );
}

// Rule: type no longer LoadBalancer releases the address and clears the status, and
// the pending Services are retried at once. Differs from MetalLB 0.12, which retried
// only after a deletion (later MetalLB retries after a type change too).
#[test]
fn type_change_releases_and_retries_pending() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/32"])]);
    add(&mut a, "s1", svc());
    add(&mut a, "s2", svc());
    assert!(pending(&a, "s2").is_some());
    let cluster_ip = AllocFacts {
        load_balancer: false,
        status_ips: ips(&["10.0.0.0"]),
        ..svc()
    };
    let d = add(&mut a, "s1", cluster_ip);
    assert_eq!(about(&d, "s1").state, State::NotOurs);
    assert_eq!(about(&d, "s1").write, Some(Vec::new()));
    assert_eq!(about(&d, "s2").write, Some(ips(&["10.0.0.0"])));
    assert_eq!(held(&a, "s2"), Some(ips(&["10.0.0.0"])));
}

// Rule: a deleted Service releases its address and the pending are retried (MetalLB's
// TestDeleteRecyclesIP).
#[test]
fn deletion_recycles_the_address() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/32"])]);
    add(&mut a, "s1", svc());
    add(&mut a, "s2", svc());
    let d = a.apply(&key("s1"), None);
    assert_eq!(about(&d, "s1").write, None);
    assert_eq!(held(&a, "s2"), Some(ips(&["10.0.0.0"])));
    assert!(a.state(&key("s1")).is_none());
}

// Rule: AllocationFailed once per reason, not at every retry; IPAllocated for new
// addresses only.
#[test]
fn events_are_not_repeated() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/32"])]);
    add(&mut a, "s1", svc());
    let d = add(&mut a, "s2", svc());
    assert!(matches!(
        about(&d, "s2").event(),
        Some(AllocEvent::Failed(Reason::AutoPoolsFull { .. }))
    ));
    // s1's status write arrives; s2 is retried and still fails, silently.
    let s1 = AllocFacts {
        status_ips: ips(&["10.0.0.0"]),
        ..svc()
    };
    let d = add(&mut a, "s1", s1);
    assert!(d.iter().all(|d| d.event().is_none()), "{d:?}");
}

// Rule: only Services of the classes served (--lb-class: none given serves Services
// without a class only, as MetalLB).
#[test]
fn load_balancer_class() {
    let other = AllocFacts {
        class: Some("other".into()),
        status_ips: ips(&["10.0.0.0"]),
        ..svc()
    };
    let mut a = allocator(&[pool("p", &["10.0.0.0/30"])]);
    let d = add(&mut a, "s1", other.clone());
    assert_eq!(about(&d, "s1").state, State::NotOurs);
    assert_eq!(about(&d, "s1").write, None);
    assert_eq!(a.usage()[0].in_use, 0);
    let mut b = Allocator::new(
        &[pool("p", &["10.0.0.0/30"])],
        BTreeSet::from(["other".into()]),
    );
    b.synced();
    add(&mut b, "s1", other);
    add(&mut b, "s2", svc());
    assert_eq!(held(&b, "s1"), Some(ips(&["10.0.0.0"])));
    assert_eq!(b.state(&key("s2")), Some(&State::NotOurs));
}

// Rule: no spec.ipFamilies (no ClusterIP), no address (MetalLB: "No ClusterIP").
#[test]
fn no_family_no_address() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/30"])]);
    add(
        &mut a,
        "s1",
        AllocFacts {
            families: Vec::new(),
            ..svc()
        },
    );
    assert_eq!(pending(&a, "s1"), Some(Reason::NoFamily));
}

// Rule: a reload that would leave an allocated address outside every pool (shrunk,
// removed, avoid-buggy-ips turned on over it) is refused whole, naming the Services;
// the last good config stays (MetalLB's TestConfigReload: "can't shrink further",
// "delete used pool", "enable buggy IPs not allowed").
#[test]
fn reload_refuses_to_orphan_an_address() {
    let p = pool("p", &["10.0.0.0/30"]);
    let mut a = allocator(std::slice::from_ref(&p));
    add(&mut a, "s1", svc());
    add(&mut a, "s2", svc());
    for bad in [
        vec![pool("p", &["10.0.0.1/32"])],
        vec![pool("q", &["10.0.5.0/30"])],
        vec![avoiding(p.clone())],
    ] {
        let refused = a.reload(&bad).unwrap_err();
        assert!(
            refused.orphans.values().flatten().any(|k| *k == key("s1")),
            "{refused}"
        );
        assert!(refused.to_string().contains("default/s1"), "{refused}");
    }
    // The old config still allocates.
    add(&mut a, "s3", svc());
    assert_eq!(held(&a, "s3"), Some(ips(&["10.0.0.2"])));
    // A shrink that keeps every used address is taken (MetalLB: "shrink pool").
    assert!(a
        .reload(&[pool("p", &["10.0.0.0/31", "10.0.0.2/32"])])
        .is_ok());
    assert_eq!(a.usage()[0].total, 3);
}

// Rule: an accepted reload decides every Service again: pending ones may get an
// address (MetalLB: "expand pool"), one whose annotation names a pool that is gone
// loses its address (MetalLB: "rename the pool" keeps the address in MetalLB 0.12; the
// annotation makes the difference).
#[test]
fn accepted_reload_redecides_every_service() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/32"])]);
    add(&mut a, "named", in_pool("p"));
    add(&mut a, "waiting", svc());
    assert!(pending(&a, "waiting").is_some());
    let d = a.reload(&[pool("renamed", &["10.0.0.0/31"])]).unwrap();
    assert_eq!(
        pending(&a, "named"),
        Some(Reason::UnknownPool { pool: "p".into() })
    );
    assert_eq!(about(&d, "named").write, Some(Vec::new()));
    // The pending one gets the first address (freed by "named" in the same reload).
    assert_eq!(held(&a, "waiting"), Some(ips(&["10.0.0.0"])));
    assert_eq!(a.usage()[0].name.as_ref(), "renamed");
}

// Pool figures for the metrics: addresses it may hand out and distinct addresses held
// (MetalLB's TestPoolCount, TestPoolMetrics).
#[test]
fn usage_counts_per_pool() {
    let mut a = allocator(&[
        avoiding(pool("p", &["10.0.0.0/24", "10.0.1.0/25"])),
        pool("big", &["fd00::/64"]),
    ]);
    let usage = a.usage();
    assert_eq!(usage[0].total, 254 + 127);
    assert_eq!(usage[1].total, 1 << 64);
    add(&mut a, "s1", shared("k", &[80]));
    add(&mut a, "s2", shared("k", &[443]));
    assert_eq!(a.usage()[0].in_use, 1);
}

// Rule (dual-stack, with the claim at start): a PreferDualStack Service claimed with one
// family before the first list ended gets the other at sync, when its pool has one.
#[test]
fn prefer_dual_stack_claimed_at_start_is_completed_at_sync() {
    let mut a = Allocator::new(
        &[pool("p", &["10.0.0.0/30", "fd00::/127"])],
        BTreeSet::new(),
    );
    let facts = AllocFacts {
        status_ips: ips(&["10.0.0.2"]),
        ..dual(FamilyPolicy::PreferDualStack)
    };
    let d = add(&mut a, "s1", facts);
    assert_eq!(about(&d, "s1").write, None);
    let d = a.synced();
    assert_eq!(about(&d, "s1").write, Some(ips(&["10.0.0.2", "fd00::"])));
}

// Rule: a PreferDualStack Service that asks for one address gets that one only (the
// property test found it taking the other family and dropping it again, for ever).
#[test]
fn prefer_dual_stack_with_a_request_is_not_completed() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/30", "fd00::/127"])]);
    let facts = AllocFacts {
        load_balancer_ip: Some("10.0.0.1".into()),
        ..dual(FamilyPolicy::PreferDualStack)
    };
    add(&mut a, "s1", facts.clone());
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.1"])));
    let written = AllocFacts {
        status_ips: ips(&["10.0.0.1"]),
        ..facts
    };
    let d = add(&mut a, "s1", written);
    assert_eq!(about(&d, "s1").write, None);
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.1"])));
}

// A family listed twice (a malformed object) asks for one address of it, held stably.
#[test]
fn a_family_listed_twice_gets_one_address() {
    let mut a = allocator(&[pool("p", &["10.0.0.0/30"])]);
    let facts = AllocFacts {
        families: vec![Family::Ipv4, Family::Ipv4],
        ..svc()
    };
    add(&mut a, "s1", facts.clone());
    assert_eq!(held(&a, "s1"), Some(ips(&["10.0.0.0"])));
    let written = AllocFacts {
        status_ips: ips(&["10.0.0.0"]),
        ..facts
    };
    let d = add(&mut a, "s1", written);
    assert_eq!(about(&d, "s1").write, None);
    assert_eq!(a.usage()[0].in_use, 1);
}

// Rule (doctor's check against the live state): the status addresses a config leaves
// outside every pool or on a skipped address are named with their holders, by the same
// rule a reload is refused on; addresses it keeps, and Services not ours, are not.
#[test]
fn status_outside_is_the_refusal_rule_on_the_status() {
    let before = [pool("p", &["10.0.0.0/24"])];
    let after = [avoiding(pool("p", &["10.0.0.0/24"]))];
    let status = |ips_: &[&str], sharing: Option<&str>| AllocFacts {
        status_ips: ips(ips_),
        ..sharing.map_or_else(svc, |k| shared(k, &[]))
    };
    let services = [
        ("kept", status(&["10.0.0.5"], None)),
        ("edge", status(&["10.0.0.255"], None)),
        ("gone-a", status(&["192.0.2.1"], Some("k"))),
        ("gone-b", status(&["192.0.2.1"], Some("k"))),
        (
            "not-lb",
            AllocFacts {
                load_balancer: false,
                ..status(&["192.0.2.9"], None)
            },
        ),
    ];
    let fresh = |pools: &[AddressPool]| {
        let mut a = Allocator::new(pools, BTreeSet::new());
        for (name, facts) in &services {
            add(&mut a, name, facts.clone());
        }
        a.synced();
        a
    };
    let want = BTreeMap::from([
        (ip("10.0.0.255"), vec![key("edge")]),
        (ip("192.0.2.1"), vec![key("gone-a"), key("gone-b")]),
    ]);
    let a = fresh(&after);
    assert_eq!(a.status_outside(), want);
    // From scratch the skipped address is given up (a new one for "edge").
    assert_ne!(held(&a, "edge"), Some(ips(&["10.0.0.255"])));
    assert_eq!(held(&a, "kept"), Some(ips(&["10.0.0.5"])));
    // An allocator that kept 10.0.0.255 under the earlier config refuses this one and
    // names the same address and Service; 192.0.2.1 it never held (the two sharing
    // Services got 10.0.0.0 instead, the first free address, which the new config skips
    // too).
    let mut running = fresh(&before);
    assert_eq!(
        running.status_outside(),
        BTreeMap::from([(ip("192.0.2.1"), vec![key("gone-a"), key("gone-b")])])
    );
    assert_eq!(held(&running, "edge"), Some(ips(&["10.0.0.255"])));
    let refused = running.reload(&after).unwrap_err();
    assert_eq!(held(&running, "gone-a"), Some(ips(&["10.0.0.0"])));
    assert_eq!(
        refused.orphans,
        BTreeMap::from([
            (ip("10.0.0.0"), vec![key("gone-a"), key("gone-b")]),
            (ip("10.0.0.255"), vec![key("edge")])
        ])
    );
}
