//! Planner cost at the scale issue #6 asks for: 50,000 nodes, 16 peers, each node with
//! an IPv4 and an IPv6 pod CIDR (100,000 prefixes), planned from scratch as the daemon
//! does after every change.
//!
//! - `cluster/16-peers-2-profiles`: 8 eBGP and 8 iBGP peers; peers with equal
//!   attributes share one route set, so two sets of 100,000 routes are built.
//! - `cluster/16-peers-16-profiles`: every peer with its own communities, the worst
//!   case: 16 sets, 1.6 million routes.
//! - `local/16-peers`: the DaemonSet's plan on one node of the same cluster (ownership
//!   is still decided over the whole view).
//!
//! ```text
//! cargo bench --bench planner
//! ```

// A bench crate: a failed unwrap aborts the measurement, not a speaker; its harness
// may call libc. The rules of Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use podcidr_speaker::config::{self, Config};
use podcidr_speaker::routes::{plan, AnnounceMode, LocalNode, Overrides};
use podcidr_speaker::sources::model::{CidrSource, IpamMode, NodeEntry, NodeView};

const NODES: u32 = 50_000;
const PEERS: u32 = 16;

fn view() -> NodeView {
    let nodes = (0..NODES)
        .map(|i| {
            let name: Arc<str> = Arc::from(format!("node-{i:05}"));
            let [_, _, hi, lo] = i.to_be_bytes();
            let v4 = Ipv4Net::new(Ipv4Addr::new(10, hi, lo, 0), 24).unwrap();
            let v6 = Ipv6Net::new(Ipv6Addr::new(0xfd00, 0, 0, i as u16, 0, 0, 0, 0), 64).unwrap();
            let entry = NodeEntry {
                labels: BTreeMap::from([("rack".to_string(), format!("r{}", i % 100))]).into(),
                internal_ipv4: Some(Ipv4Addr::new(172, 16 + (i >> 16) as u8, hi, lo)),
                internal_ipv6: Some(Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, i as u16)),
                node_cidrs: vec![IpNet::V4(v4), IpNet::V6(v6)],
                node_source: Some(CidrSource::NodeSpec),
                source: Some(CidrSource::NodeSpec),
                prefixes: vec![IpNet::V4(v4), IpNet::V6(v6)],
                ..NodeEntry::new(Arc::clone(&name))
            };
            (name, entry)
        })
        .collect();
    NodeView::new(IpamMode::Kubernetes, nodes, Vec::new())
}

/// 16 peers; with `distinct`, each carries its own community so no two share routes.
fn config(distinct: bool) -> Config {
    let mut y = String::from("peers:\n");
    for i in 0..PEERS {
        let peer_asn = if i < PEERS / 2 { 65000 } else { 65083 };
        y += &format!(
            "  - {{peer-address: 10.255.0.{}, peer-asn: {peer_asn}, my-asn: 65083",
            i + 1
        );
        if distinct {
            y += &format!(", pod-cidr-communities: ['65083:{i}']");
        }
        y += "}\n";
    }
    config::parse(&y).expect("bench config")
}

fn bench(c: &mut Criterion) {
    let view = view();
    let local = LocalNode::new("node-12345");
    let over = Overrides::default();
    let mut group = c.benchmark_group("plan");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(u64::from(NODES * PEERS)));
    for (name, distinct) in [
        ("16-peers-2-profiles", false),
        ("16-peers-16-profiles", true),
    ] {
        let config = config(distinct);
        let p = plan(&view, &config, &local, AnnounceMode::Cluster, &over);
        assert_eq!(p.peers.len(), PEERS as usize);
        assert_eq!(p.route_count(), (2 * NODES * PEERS) as usize);
        group.bench_function(format!("cluster/{name}"), |b| {
            b.iter(|| {
                black_box(plan(
                    black_box(&view),
                    &config,
                    &local,
                    AnnounceMode::Cluster,
                    &over,
                ))
            })
        });
    }
    let config = config(true);
    group.bench_function("local/16-peers", |b| {
        b.iter(|| {
            black_box(plan(
                black_box(&view),
                &config,
                &local,
                AnnounceMode::Local,
                &over,
            ))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
