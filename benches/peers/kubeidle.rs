//! Issue 31, idle in kube mode: `kubeidle LOADBALANCERS[,L...] RUNS`. The real daemon
//! (`podcidr-speaker run --announce local`, node n000000, one session to ExaBGP) against
//! the API server of `lbscope-daemon` (this process, HTTP on 127.0.0.1: lists served,
//! watches held open and never written to), measured at idle as `footprint` measures
//! it ([`crate::footprint::idle`]: RSS, CPU, threads and wake-ups over 30 s, 3 s after
//! ExaBGP holds every route), with the API requests made during those 30 s.
//!
//! Rows, each in the same run and against the same peer:
//! - `file`: the standalone file source, 3 nodes (`--cluster-state`, no LoadBalancer
//!   IPs; its own pod CIDR announced): what the kube rows cost beyond it;
//! - `kube`, 0 LoadBalancers: 3 Nodes and CiliumNodes, no Service (the Services and
//!   slices still watched, `--announce-lb-ips on`);
//! - `kube`, L LoadBalancers: L LoadBalancer Services (`externalTrafficPolicy: Local`)
//!   with one EndpointSlice each, 10 endpoints per slice over 100 Nodes; the IPs with an
//!   endpoint on n000000 (a tenth) are announced.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ipnet::{IpNet, Ipv4Net};
use serde_json::json;

use crate::common::*;
use crate::event::Rx;
use crate::footprint::{idle, Idle};
use crate::harness::exabgp::Exabgp;
use crate::harness::process::{write_file, Process};
use crate::harness::{BgpDaemon, Neighbor, PeerOpts};
use crate::kube::objects;
use crate::kube_harness::config_map;
use crate::lbdaemon::{host, serve, service_ip, start, Objects, Served, Watches};
use crate::lbkube;
use crate::lbscope::Cluster;

const SPEAKER_AS: u32 = 65001;
/// Endpoints per EndpointSlice in the LoadBalancer rows.
const PER: usize = 10;
/// Nodes in the rows without LoadBalancers.
const FEW: usize = 3;

fn pod(i: usize) -> IpNet {
    IpNet::V4(Ipv4Net::new(prefix(i), 24).expect("/24"))
}

/// The file source's daemon: `--cluster-state` of [`FEW`] nodes, `--announce local`.
fn start_file(dir: &Path) -> Process {
    let state = crate::common::Cluster::new(FEW, 1).write(dir);
    let cfg = dir.join("bgp-config.yaml");
    write_file(
        &cfg,
        &format!(
            "peers:\n  - peer-address: {EXA}\n    peer-asn: {AS}\n    my-asn: {SPEAKER_AS}\n    hold-time: 90s\nspeaker:\n  connect-retry-time: 1s\n"
        ),
    )
    .expect("write bgp-config");
    let mut cmd = Command::new(speaker_bin());
    // No bench measures the stop: without graceful restart (ExaBGP, BIRD here) a
    // SIGTERM would drain for 15 s (RFC 8326) past the harness's 5 s and be killed.
    cmd.arg("run")
        .arg("--graceful-shutdown-time=0")
        .arg("--node=n000000")
        .arg(format!("--bgp-config={}", cfg.display()))
        .arg(format!("--cluster-state={}", state.display()))
        .arg("--announce=local")
        .arg("--announce-lb-ips=off")
        .arg(format!("--source-address={SPEAKER}"))
        .arg(format!("--metrics-addr={SPEAKER}:9477"))
        .arg("--log-format=json")
        .env("RUST_LOG", "warn");
    Process::spawn("speaker", cmd, &dir.join("speaker.log")).expect("start the speaker")
}

/// One row: starts the daemon, waits until ExaBGP holds `want`, measures it at idle.
fn row(
    dir: &Path,
    api: Option<(SocketAddr, &Mutex<Served>)>,
    want: &BTreeSet<IpNet>,
) -> (Idle, u64, u64) {
    let exa = Exabgp::start(
        dir,
        PeerOpts::new(EXA, AS).neighbor(Neighbor::new(SPEAKER, SPEAKER_AS).hold_time(90)),
    )
    .expect("start ExaBGP");
    let mut speaker = match api {
        Some((addr, served)) => {
            *served.lock().expect("served") = Served::default();
            start(dir, addr, Watches::LoadBalancers)
        }
        None => start_file(dir),
    };
    let mut rx = Rx::new(exa.dir().join("rx.jsonl"));
    let mut held = BTreeSet::new();
    let ok = poll(Duration::from_secs(300), Duration::from_millis(50), || {
        for (_, p, ann) in rx.read() {
            if ann {
                held.insert(p);
            } else {
                held.remove(&p);
            }
        }
        held == *want
    });
    assert!(
        ok,
        "ExaBGP never held the {} routes ({} held); speaker log:\n{}",
        want.len(),
        held.len(),
        speaker.log_tail(20)
    );
    let counts = |api: Option<(SocketAddr, &Mutex<Served>)>| {
        api.map_or((0, 0), |(_, s)| {
            let s = s.lock().expect("served");
            (s.requests, s.octets)
        })
    };
    let (r0, o0) = counts(api);
    let m = idle(speaker.pid());
    let (r1, o1) = counts(api);
    assert!(
        rx.read().is_empty(),
        "a route moved at idle; speaker log:\n{}",
        speaker.log_tail(20)
    );
    let _ = speaker.stop();
    drop(exa);
    (m, r1 - r0, o1 - o0)
}

pub fn run(load_balancers: &[usize], runs: usize) {
    let dir = crate::send::setup_once();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let served = Arc::new(Mutex::new(Served::default()));
    let mut rows: Vec<(String, usize, Option<SocketAddr>, BTreeSet<IpNet>)> = Vec::new();
    // `--announce local`: only its own node's pod CIDR.
    rows.push(("file".into(), 0, None, BTreeSet::from([pod(0)])));
    for &lbs in load_balancers {
        let nodes = if lbs == 0 { FEW } else { lbkube::NODES };
        let cluster = if lbs == 0 {
            Cluster {
                services: Vec::new(),
                slices: Vec::new(),
                per: PER,
            }
        } else {
            Cluster::new(lbs, lbs, lbs * PER)
        };
        let objects = Arc::new(Objects {
            cluster: Arc::new(cluster),
            nodes: objects(nodes, false),
            cilium_nodes: objects(nodes, true),
            cilium_config: vec![config_map(
                "kube-system",
                "cilium-config",
                "1",
                json!({"ipam": "cluster-pool", "cluster-pool-ipv4-cidr": "16.0.0.0/4"}),
            )],
        });
        let api = rt.block_on(serve(objects, served.clone()));
        // `--announce local`: its own pod CIDR and the IPs of the Services with an
        // endpoint on n000000 (lbkube::slice puts endpoint j of Service i on node
        // (i + j * step) % NODES).
        let step = lbkube::NODES / PER;
        let mut want: BTreeSet<IpNet> = (0..lbs)
            .filter(|i| (0..PER).any(|j| (i + j * step) % lbkube::NODES == 0))
            .map(|i| host(service_ip(i)))
            .collect();
        want.insert(pod(0));
        rows.push(("kube".into(), lbs, Some(api), want));
    }
    for (source, lbs, api, want) in &rows {
        let mut figures: Vec<(Idle, u64, u64)> = Vec::new();
        for r in 0..runs {
            let run_dir = dir.path().join(format!("kubeidle-{source}-{lbs}-{r}"));
            std::fs::create_dir_all(&run_dir).expect("run dir");
            let m = row(&run_dir, api.map(|a| (a, &*served)), want);
            eprintln!(
                "kubeidle {source} lbs={lbs}: RSS {} kB, CPU {:.2} %, {} threads, {:.2} wake-ups/s ({}), {} API requests, {} octets at idle",
                m.0.rss_kb, m.0.cpu_pct, m.0.threads, m.0.wakeups_per_s, m.0.by_thread(), m.1, m.2
            );
            figures.push(m);
        }
        let of =
            |f: fn(&(Idle, u64, u64)) -> f64| median(&figures.iter().map(f).collect::<Vec<_>>());
        emit(json!({
            "item": "kubeidle",
            "source": source,
            "load_balancers": lbs,
            "routes": want.len(),
            "rss_kb": of(|m| m.0.rss_kb as f64),
            "peak_rss_kb": of(|m| m.0.hwm_kb as f64),
            "cpu_pct": of(|m| m.0.cpu_pct),
            "wakeups_per_s": of(|m| m.0.wakeups_per_s),
            "threads": of(|m| m.0.threads as f64),
            "idle_requests": of(|m| m.1 as f64),
            "idle_octets": of(|m| m.2 as f64),
            "runs": runs,
        }));
    }
}
