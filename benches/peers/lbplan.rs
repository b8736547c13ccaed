//! Item 7b, the LoadBalancer planner alone: `lbplan SERVICES[,SERVICES...] ENDPOINTS
//! EVENTS`. In this process, no namespace: the planner of the daemon
//! (`routes::lb::LbPlanner`) holds SERVICES Local Services and ENDPOINTS ready endpoints
//! (the cluster of item 7: 100 nodes, this node n000000), then takes EVENTS EndpointSlice
//! changes, each adding or removing this node's endpoint of one Service, timed one by
//! one (thread CPU time: the planner is single-threaded and this is the work each event
//! costs the daemon's main loop before the peers encode it).
//!
//! The comparison, in the same run: a naive planner that re-plans everything after each
//! event (a fresh planner fed every Service and slice, as a planner without incremental
//! state would), on the same events; it must reach the same routes.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use podcidr_speaker::config;
use podcidr_speaker::routes::lb::{LbContext, LbPlanner};
use podcidr_speaker::sources::services::{
    LbUpdate, ObjectKey, ServiceFacts, SliceFacts, TrafficPolicy,
};
use serde_json::json;

use crate::common::{emit, median, percentile};

const NODES: usize = 100;

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn node_name(n: usize) -> Arc<str> {
    Arc::from(format!("n{n:06}"))
}

fn service(i: usize) -> (ObjectKey, ServiceFacts) {
    let ip = IpAddr::V4(Ipv4Addr::new(10, 96, (i >> 8) as u8, i as u8));
    (
        ObjectKey::new("bench", &format!("s{i:05}")),
        ServiceFacts {
            load_balancer: true,
            class: None,
            policy: TrafficPolicy::Local,
            ingress_ips: vec![ip],
            ingress_refused: Vec::new(),
        },
    )
}

fn slice(i: usize, nodes: &BTreeSet<usize>) -> LbUpdate {
    LbUpdate::Slice {
        key: ObjectKey::new("bench", &format!("s{i:05}-x7k2p")),
        facts: Some(SliceFacts {
            service: Some(service(i).0),
            ready_by_node: nodes.iter().map(|n| (node_name(*n), 1)).collect(),
            ready_without_node: 0,
        }),
    }
}

fn context() -> LbContext {
    let config = config::parse(
        "peers:\n  - {peer-address: 100.64.0.6, peer-asn: 65000, my-asn: 65001}\naddress-pools:\n  - {name: lb, protocol: bgp, addresses: [10.96.0.0/16]}\n",
    )
    .expect("bench config");
    LbContext::new(&config, None, &[], true)
}

/// A planner fed every Service and slice, then `Synced`.
fn full(endpoints: &[BTreeSet<usize>]) -> LbPlanner {
    let mut p = LbPlanner::new(node_name(0));
    let _ = p.set_context(context());
    for (i, nodes) in endpoints.iter().enumerate() {
        let (key, facts) = service(i);
        let _ = p.apply(LbUpdate::Service {
            key,
            facts: Some(facts),
        });
        let _ = p.apply(slice(i, nodes));
    }
    let _ = p.apply(LbUpdate::Synced);
    p
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn measure(services: usize, endpoints: usize, events: usize) {
    let per = endpoints / services;
    let step = NODES / per;
    let mut eps: Vec<BTreeSet<usize>> = (0..services)
        .map(|i| (0..per).map(|j| (i + j * step) % NODES).collect())
        .collect();
    let rss_before = rss_kb();
    let t = thread_cpu();
    let mut planner = full(&eps);
    let load = thread_cpu() - t;
    let rss_planner = rss_kb().saturating_sub(rss_before);
    let announced = planner.routes().len();

    let mut incremental = Vec::with_capacity(events);
    let mut naive = Vec::new();
    // The naive planner costs O(everything) per event: time it on every 50th event only.
    let naive_every = 50;
    for e in 0..events {
        let s = (e * 7919 + 13) % services;
        if !eps[s].remove(&0) {
            eps[s].insert(0);
        }
        let update = slice(s, &eps[s]);
        let t = thread_cpu();
        let delta = planner.apply(update);
        incremental.push((thread_cpu() - t).as_secs_f64() * 1e3);
        assert_eq!(delta.changes.len(), 1, "event {e}: one route changes");
        if e % naive_every == 0 {
            let t = thread_cpu();
            let fresh = full(&eps);
            naive.push((thread_cpu() - t).as_secs_f64() * 1e3);
            assert_eq!(
                fresh.routes(),
                planner.routes(),
                "event {e}: the incremental planner and a full re-plan disagree"
            );
        }
    }
    let per_1000_ms = incremental.iter().sum::<f64>() * 1000.0 / events as f64;
    let stats = |v: &[f64]| json!({"median_ms": median(v), "p99_ms": percentile(v, 0.99), "max_ms": percentile(v, 1.0), "n": v.len()});
    eprintln!(
        "lbplan {services} services, {endpoints} endpoints: incremental median {:.4} ms p99 {:.4} ms; full re-plan median {:.1} ms; load {:.0} ms; ~{} KiB",
        median(&incremental),
        percentile(&incremental, 0.99),
        median(&naive),
        load.as_secs_f64() * 1e3,
        rss_planner
    );
    let by: BTreeMap<String, usize> = planner
        .by_reason()
        .iter()
        .map(|(r, n)| (r.map_or("announced", |r| r.as_str()).to_string(), *n))
        .collect();
    emit(json!({
        "item": "lbplan",
        "services": services,
        "endpoints": endpoints,
        "events": events,
        "announced": announced,
        "decisions": by,
        "incremental": stats(&incremental),
        "full_replan": stats(&naive),
        "cpu_ms_per_1000": per_1000_ms,
        "load_ms": load.as_secs_f64() * 1e3,
        "rss_growth_kib": rss_planner,
    }));
}

pub fn run(sizes: &[usize], endpoints: usize, events: usize) {
    for &s in sizes {
        assert!(
            s > 0 && endpoints % s == 0 && endpoints / s <= NODES,
            "ENDPOINTS / SERVICES must be a whole number of at most {NODES}"
        );
        measure(s, endpoints, events);
    }
}
