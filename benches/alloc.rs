//! The LoadBalancer IP allocator (`alloc`, issue 30) at the issue's scale: 10,000
//! Services from one /16, in process.
//!
//! - `fill/N`: a synced allocator hands out N addresses, one Service at a time, as the
//!   `allocate` role would on N new Services (criterion's time per element is the time
//!   per allocation). 1,000, 10,000 and 60,000: the time per allocation must not grow
//!   with the addresses already in use (no walk of the pool).
//! - `fill-avoid-buggy/10000`: the same with `avoid-buggy-ips` (.0 and .255 skipped).
//! - `fill-shared/10000`: Services in groups of four with one `allow-shared-ip` key and
//!   distinct ports, packed four to an address.
//! - `churn/10000`: with 10,000 held, one Service deleted and one added (the freed
//!   address handed out again), per iteration.
//! - `restart/10000`: a new leader: 10,000 Services arrive with their status addresses,
//!   are claimed, then the first list ends.
//!
//! Before the timings, the heap the allocator holds with 10,000 Services (a counting
//! global allocator: bytes live with the allocator, less bytes live once it is
//! dropped), printed as `alloc-memory`.
//!
//! ```text
//! cargo bench --bench alloc
//! ```

// A bench crate: a failed unwrap aborts the measurement, not a speaker; the counting
// allocator forwards to the system's. The rules of Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;
use std::net::IpAddr;
use std::sync::atomic::{AtomicIsize, Ordering};

use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use podcidr_speaker::alloc::{
    AllocFacts, Allocator, Backend, Family, Port, Protocol, Sharing, State,
};
use podcidr_speaker::config::{AddressPool, Protocol as PoolProtocol};
use podcidr_speaker::sources::services::ObjectKey;

/// Counts the bytes live on the heap.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is
// kept beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn pool(avoid: bool) -> Vec<AddressPool> {
    vec![AddressPool {
        name: "services".into(),
        protocol: PoolProtocol::Bgp,
        cidrs: vec!["10.64.0.0/16".parse().unwrap()],
        avoid_buggy_ips: avoid,
        auto_assign: true,
        bgp_advertisements: Vec::new(),
    }]
}

fn key(i: usize) -> ObjectKey {
    ObjectKey::new(&format!("ns-{}", i % 100), &format!("svc-{i:06}"))
}

/// An IPv4 LoadBalancer Service on TCP/443 (with `shared`: one key per group of four,
/// each on its own port).
fn facts(i: usize, shared: bool) -> AllocFacts {
    let port = if shared { 8000 + (i % 4) as u16 } else { 443 };
    AllocFacts {
        load_balancer: true,
        families: vec![Family::Ipv4],
        sharing: Sharing {
            key: shared.then(|| format!("group-{}", i / 4).into()),
            backend: Backend::Cluster,
            ports: BTreeSet::from([Port {
                protocol: Protocol::Tcp,
                port,
            }]),
        },
        ..AllocFacts::default()
    }
}

fn inputs(n: usize, shared: bool) -> Vec<(ObjectKey, AllocFacts)> {
    (0..n).map(|i| (key(i), facts(i, shared))).collect()
}

fn synced(avoid: bool) -> Allocator {
    let mut a = Allocator::new(&pool(avoid), BTreeSet::new());
    a.synced();
    a
}

fn fill(mut a: Allocator, services: Vec<(ObjectKey, AllocFacts)>) -> Allocator {
    for (k, f) in services {
        black_box(a.apply(&k, Some(f)));
    }
    a
}

fn statuses(a: &Allocator) -> BTreeMap<ObjectKey, Vec<IpAddr>> {
    a.services()
        .filter_map(|(k, _, s)| match s {
            State::Holds(h) => Some((k.clone(), h.ips.clone())),
            _ => None,
        })
        .collect()
}

fn memory_report() {
    let services = inputs(10_000, false);
    let a = fill(synced(false), services);
    let held = statuses(&a).len();
    assert_eq!(held, 10_000);
    let with = LIVE.load(Ordering::Relaxed);
    drop(a);
    let without = LIVE.load(Ordering::Relaxed);
    let bytes = with - without;
    println!(
        "alloc-memory: {} Services held from a /16: {:.2} MiB on the heap, {} bytes per Service",
        held,
        bytes as f64 / (1024.0 * 1024.0),
        bytes / held as isize
    );
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("alloc");
    g.sample_size(10);
    for n in [1_000usize, 10_000, 60_000] {
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("fill/{n}"), |b| {
            b.iter_batched(
                || (synced(false), inputs(n, false)),
                |(a, s)| fill(a, s),
                BatchSize::LargeInput,
            )
        });
    }
    g.throughput(Throughput::Elements(10_000));
    g.bench_function("fill-avoid-buggy/10000", |b| {
        b.iter_batched(
            || (synced(true), inputs(10_000, false)),
            |(a, s)| {
                let a = fill(a, s);
                assert_eq!(statuses(&a).len(), 10_000);
                a
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("fill-shared/10000", |b| {
        b.iter_batched(
            || (synced(false), inputs(10_000, true)),
            |(a, s)| {
                let a = fill(a, s);
                assert_eq!(a.usage()[0].in_use, 2_500);
                a
            },
            BatchSize::LargeInput,
        )
    });
    // Restart: the Services arrive with what the previous leader wrote.
    let full = fill(synced(false), inputs(10_000, false));
    let written: Vec<(ObjectKey, AllocFacts)> = statuses(&full)
        .into_iter()
        .enumerate()
        .map(|(i, (k, ips))| {
            let mut f = facts(i, false);
            f.status_ips = ips;
            (k, f)
        })
        .collect();
    g.bench_function("restart/10000", |b| {
        b.iter_batched(
            || written.clone(),
            |services| {
                let mut a = Allocator::new(&pool(false), BTreeSet::new());
                for (k, f) in services {
                    a.apply(&k, Some(f));
                }
                let ds = a.synced();
                assert!(ds.is_empty());
                a
            },
            BatchSize::LargeInput,
        )
    });
    g.throughput(Throughput::Elements(1));
    let mut steady = full;
    let mut next = 10_000usize;
    g.bench_function("churn/10000", |b| {
        b.iter(|| {
            // Delete the oldest remaining Service, add a new one: it gets the address
            // just freed, the lowest free.
            let gone = key(next - 10_000);
            black_box(steady.apply(&gone, None));
            black_box(steady.apply(&key(next), Some(facts(next, false))));
            next += 1;
        })
    });
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    memory_report();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
