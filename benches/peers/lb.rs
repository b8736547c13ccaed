//! Item 7, LoadBalancer Services at scale (issue 17): `lb SERVICES ENDPOINTS EVENTS`.
//!
//! One speaker of a 100-node cluster (node n000000, `--announce local`, the DaemonSet's
//! mode, `--announce-lb-ips on`) holds SERVICES `type: LoadBalancer` Services with
//! `externalTrafficPolicy: Local` and ENDPOINTS ready endpoints in all (ENDPOINTS /
//! SERVICES per Service, each on another node, so the speaker announces the IPs of the
//! Services it hosts an endpoint of: 1,000 of them for both 1,000 x 100 and 10,000 x 10).
//! The Services and their EndpointSlices are in the standalone cluster state, 100
//! Services per JSON file. ExaBGP (eBGP) receives and stamps every UPDATE.
//!
//! Each event edits one Service's EndpointSlice (write + rename of its file): an endpoint
//! on this node appears (its IP is announced) or goes (withdrawn), one route at ExaBGP.
//! Timed: end to end (the rename -> ExaBGP's stamp), and the speaker's part from its
//! own `event_to_update_seconds` over the events (from the update reaching the daemon
//! to the UPDATE written). Item 3's split at `source_last_event_timestamp_seconds` does
//! not apply: the file source stamps that after it has handed on every LoadBalancer
//! update of a reload, so the UPDATE is often out before it. Also: RSS once every
//! Service is in view, half-way through the churn and after it (VmRSS, VmHWM), and CPU
//! time (utime + stime) over the churn per 1,000 changes, which includes the file
//! source's polling and its re-reading of the changed file (100 Services).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ipnet::{IpNet, Ipv4Net};
use serde_json::json;

use crate::common::*;
use crate::event::{buckets_json, histogram, histogram_since, Rx};
use crate::harness::exabgp::Exabgp;
use crate::harness::process::{write_file, Process};
use crate::harness::{BgpDaemon, Neighbor, PeerOpts};

const SPEAKER_AS: u32 = 65001;
const NODES: usize = 100;
const PER_FILE: usize = 100;

/// The generated Services: per Service, the nodes of its ready endpoints.
struct Services {
    endpoints: Vec<BTreeSet<usize>>,
}

/// Service `i`'s IP, from the pool 10.96.0.0/16.
fn service_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 96, (i >> 8) as u8, i as u8)
}

fn host(ip: Ipv4Addr) -> IpNet {
    IpNet::V4(Ipv4Net::new(ip, 32).expect("/32"))
}

impl Services {
    /// `per` endpoints per Service, on nodes i, i + step, ... (mod 100), all distinct.
    fn new(services: usize, per: usize) -> Services {
        assert!(per <= NODES, "at most one endpoint per node and Service");
        let step = NODES / per;
        let endpoints = (0..services)
            .map(|i| (0..per).map(|j| (i + j * step) % NODES).collect())
            .collect();
        Services { endpoints }
    }

    /// The IPs this speaker (node 0) announces.
    fn announced(&self) -> BTreeSet<IpNet> {
        (0..self.endpoints.len())
            .filter(|i| self.endpoints[*i].contains(&0))
            .map(|i| host(service_ip(i)))
            .collect()
    }

    /// Writes the file of Service `i` (and of the 99 others it shares) atomically.
    fn write_file_of(&self, cluster: &Path, i: usize) {
        let file = i / PER_FILE;
        let mut j = String::with_capacity(PER_FILE * (600 + 120 * NODES));
        j.push_str("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\n");
        let last = self.endpoints.len().min((file + 1) * PER_FILE);
        for s in file * PER_FILE..last {
            if s > file * PER_FILE {
                j.push_str(",\n");
            }
            let name = format!("s{s:05}");
            let _ = writeln!(
                j,
                "{{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{{\"name\":\"{name}\",\"namespace\":\"bench\"}},\"spec\":{{\"type\":\"LoadBalancer\",\"externalTrafficPolicy\":\"Local\",\"ports\":[{{\"port\":80,\"protocol\":\"TCP\",\"targetPort\":8080}}]}},\"status\":{{\"loadBalancer\":{{\"ingress\":[{{\"ip\":\"{}\"}}]}}}}}},",
                service_ip(s)
            );
            let _ = write!(
                j,
                "{{\"apiVersion\":\"discovery.k8s.io/v1\",\"kind\":\"EndpointSlice\",\"metadata\":{{\"name\":\"{name}-x7k2p\",\"namespace\":\"bench\",\"labels\":{{\"kubernetes.io/service-name\":\"{name}\"}}}},\"addressType\":\"IPv4\",\"ports\":[{{\"port\":8080,\"protocol\":\"TCP\"}}],\"endpoints\":["
            );
            for (k, node) in self.endpoints[s].iter().enumerate() {
                if k > 0 {
                    j.push(',');
                }
                let _ = write!(
                    j,
                    "{{\"addresses\":[\"10.{}.{}.{}\"],\"conditions\":{{\"ready\":true,\"serving\":true,\"terminating\":false}},\"nodeName\":\"n{node:06}\"}}",
                    100 + (s >> 8) % 100,
                    s % 256,
                    node + 1
                );
            }
            j.push_str("]}");
        }
        j.push_str("\n]}\n");
        let tmp = cluster.join(format!(".svc-{file:04}.json.tmp"));
        write_file(&tmp, &j).expect("write services");
        std::fs::rename(&tmp, cluster.join(format!("svc-{file:04}.json"))).expect("rename");
    }
}

fn start(dir: &Path, cluster: &Path) -> Process {
    let cfg = dir.join("bgp-config.yaml");
    write_file(
        &cfg,
        &format!(
            "peers:\n  - peer-address: {EXA}\n    peer-asn: {AS}\n    my-asn: {SPEAKER_AS}\n    hold-time: 90s\nspeaker:\n  connect-retry-time: 1s\naddress-pools:\n  - name: lb\n    protocol: bgp\n    addresses: [10.96.0.0/16]\n"
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
        .arg(format!("--cluster-state={}", cluster.display()))
        .arg("--announce=local")
        .arg("--announce-lb-ips=on")
        .arg(format!("--source-address={SPEAKER}"))
        .arg(format!("--metrics-addr={SPEAKER}:9477"))
        .arg("--log-format=json")
        .env("RUST_LOG", "warn");
    Process::spawn("speaker", cmd, &dir.join("speaker.log")).expect("start the speaker")
}

pub fn run(services: usize, endpoints: usize, events: usize) {
    assert!(
        services > 0 && endpoints % services == 0,
        "ENDPOINTS must be a multiple of SERVICES"
    );
    let dir = crate::send::setup_once();
    // A fresh directory per run: the scenario may run for several sizes in one process.
    let dir = dir.path().join(format!("lb-{services}"));
    std::fs::create_dir_all(&dir).expect("run dir");
    let cluster = Cluster::new(NODES, 1).write(&dir);
    let mut svcs = Services::new(services, endpoints / services);
    for file in 0..services.div_ceil(PER_FILE) {
        svcs.write_file_of(&cluster, file * PER_FILE);
    }
    let exa = Exabgp::start(
        &dir,
        PeerOpts::new(EXA, AS).neighbor(Neighbor::new(SPEAKER, SPEAKER_AS).hold_time(90)),
    )
    .expect("start ExaBGP");
    let t_start = unix_now();
    let mut speaker = start(&dir, &cluster);
    let mut rx = Rx::new(exa.dir().join("rx.jsonl"));
    let mut held = BTreeSet::new();
    let mut want = svcs.announced();
    let pod = IpNet::V4(Ipv4Net::new(prefix(0), 24).expect("/24"));
    want.insert(pod);
    let ok = poll(Duration::from_secs(300), Duration::from_millis(50), || {
        for (_, p, ann) in rx.read() {
            if ann {
                held.insert(p);
            } else {
                held.remove(&p);
            }
        }
        held == want
    });
    assert!(
        ok,
        "ExaBGP never held the {} routes ({} held); speaker log:\n{}",
        want.len(),
        held.len(),
        speaker.log_tail(20)
    );
    let synced_s = unix_now() - t_start;
    std::thread::sleep(Duration::from_secs(1));
    rx.read();
    let pid = speaker.pid();
    let at_sync = proc_stat(pid);
    let before = histogram();

    let mut total = Vec::new();
    let mut half = at_sync;
    let cpu_before = proc_stat(pid).cpu_ticks;
    for e in 0..events {
        if e == events / 2 {
            half = proc_stat(pid);
        }
        let s = (e * 7919 + 13) % services;
        let ip = host(service_ip(s));
        let announce = !svcs.endpoints[s].contains(&0);
        if announce {
            svcs.endpoints[s].insert(0);
        } else {
            svcs.endpoints[s].remove(&0);
        }
        svcs.write_file_of(&cluster, s);
        let t_write = unix_now();
        let mut t_arrive = None;
        let ok = poll(Duration::from_secs(20), Duration::from_millis(1), || {
            for (t, p, ann) in rx.read() {
                if p == ip && ann == announce {
                    t_arrive = Some(t);
                }
            }
            t_arrive.is_some()
        });
        assert!(
            ok,
            "event {e} (service {s}, announce {announce}) never reached ExaBGP"
        );
        let t_arrive = t_arrive.unwrap_or(f64::NAN);
        total.push((t_arrive - t_write) * 1000.0);
        if e % 50 == 0 {
            eprintln!("lb {services}: event {e}: end to end {:.1} ms", total[e]);
        }
        // Let the file's mtime move on: a rewrite within one poll is one change.
        std::thread::sleep(Duration::from_millis(50));
    }
    let cpu_s = (proc_stat(pid).cpu_ticks - cpu_before) as f64 / clock_ticks();
    let buckets = histogram_since(&before);
    let end = proc_stat(pid);
    let _ = speaker.stop();
    let mib = |kb: u64| kb as f64 / 1024.0;
    let stats = |v: &[f64]| json!({"median_ms": median(v), "p99_ms": percentile(v, 0.99), "max_ms": percentile(v, 1.0)});
    emit(json!({
        "item": "lb",
        "services": services,
        "endpoints": endpoints,
        "nodes": NODES,
        "announced": want.len() - 1,
        "events": events,
        "synced_s": synced_s,
        "end_to_end": stats(&total),
        "histogram": buckets_json(&buckets),
        "rss_mib_synced": mib(at_sync.rss_kb),
        "rss_mib_half": mib(half.rss_kb),
        "rss_mib_after": mib(end.rss_kb),
        "hwm_mib": mib(end.hwm_kb),
        "cpu_s_per_1000": cpu_s * 1000.0 / events as f64,
    }));
}
