//! Item 7d, second part: the real daemon with each EndpointSlice watch, side by side in
//! one run: `lbscope-daemon SERVICES LOADBALANCERS ENDPOINTS CHANGES`. Where `lbscope`
//! drives the kube source in this process (its octets and requests), this one runs
//! `podcidr-speaker run` as a child (node n000000, `--announce local`,
//! `--announce-lb-ips on`, ExaBGP receiving), so that its RSS and its event to wire are
//! the daemon's own: `--lb-slice-watch all` (every EndpointSlice, what each speaker
//! watched before issue 28) and the default (the slices of the LoadBalancer Services).
//!
//! The API server is this process, over HTTP/1.1 on 127.0.0.1 (KUBECONFIG points the
//! daemon at it): the same cluster as `lbscope` (SERVICES Services of which
//! LOADBALANCERS are `type: LoadBalancer`, `externalTrafficPolicy: Local`, one
//! EndpointSlice each, ENDPOINTS endpoints in all, 100 Nodes), lists paginated and
//! filtered by their label and `metadata.name` field selectors, watches held open
//! (chunked) and fed only the slices their selector matches.
//!
//! Per watch, in this order: RSS once ExaBGP holds every route (the LoadBalancer IPs,
//! every one has an endpoint on n000000, and the node's pod CIDR); CHANGES endpoint
//! changes of other Services (RSS and CPU after them); CHANGES changes of LoadBalancer
//! Services' endpoints on n000000 (unready: the IP is withdrawn; ready again: announced),
//! one at a time, each timed from the watch event written to the socket until ExaBGP
//! stamps the UPDATE, and the daemon's own `event_to_update_seconds` over them; RSS and
//! VmHWM after. Then the scoped watches again against an API server that refuses the
//! Services' `spec.type` field selector (400, as before Kubernetes 1.31), which the
//! daemon answers by watching every Service. First, as the memory's baseline, the daemon without LoadBalancer
//! watches (`--announce-lb-ips off`) once its pod CIDR is at ExaBGP.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ipnet::{IpNet, Ipv4Net};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::common::*;
use crate::event::{buckets_json, histogram, histogram_since, Rx};
use crate::harness::exabgp::Exabgp;
use crate::harness::process::{write_file, Process};
use crate::harness::{BgpDaemon, Neighbor, PeerOpts};
use crate::kube::objects;
use crate::kube_harness::config_map;
use crate::lbkube;
use crate::lbscope::{decoded, fields_match, matches, selected_in, Cluster, Selected};

const SPEAKER_AS: u32 = 65001;

type Watch = mpsc::UnboundedSender<Bytes>;

/// What the API server served since the last reset.
#[derive(Default)]
pub(crate) struct Served {
    pub(crate) requests: u64,
    pub(crate) octets: u64,
    slice_watches: u64,
    /// The open EndpointSlice watches with what they select.
    watches: Vec<(Selected, Watch)>,
    /// The other watches, held open, never written to.
    idle: Vec<Watch>,
    /// Answer the Services' `spec.type` field selector as an API server before
    /// Kubernetes 1.31 does: 400, field label not supported.
    refuse_type_selector: bool,
}

/// The objects served, by list path.
pub(crate) struct Objects {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) nodes: Vec<Value>,
    pub(crate) cilium_nodes: Vec<Value>,
    pub(crate) cilium_config: Vec<Value>,
}

/// A query parameter, decoded.
fn param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| decoded(v))
    })
}

impl Objects {
    /// A List page for `path?query`: filtered by the field selectors used
    /// (`metadata.name=`, the Services' `spec.type=`) and the slices' label selector,
    /// from `continue`, at most `limit`.
    fn list(&self, path: &str, query: &str) -> String {
        let (kind, all): (&str, &[Value]) = match path {
            "/api/v1/nodes" => ("NodeList", &self.nodes),
            "/apis/cilium.io/v2/ciliumnodes" => ("CiliumNodeList", &self.cilium_nodes),
            "/api/v1/services" => ("ServiceList", &self.cluster.services),
            "/apis/discovery.k8s.io/v1/endpointslices" => {
                ("EndpointSliceList", &self.cluster.slices)
            }
            "/api/v1/namespaces/kube-system/configmaps" => ("ConfigMapList", &self.cilium_config),
            _ => ("List", &[]),
        };
        let selected = if kind == "EndpointSliceList" {
            selected_in(query)
        } else {
            None
        };
        let fields = param(query, "fieldSelector");
        let matching: Vec<&Value> = all
            .iter()
            .filter(|o| matches(&selected, o))
            .filter(|o| fields_match(fields.as_deref(), o))
            .collect();
        let limit: usize = param(query, "limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(usize::MAX);
        let from: usize = param(query, "continue")
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let page: Vec<&Value> = matching.iter().skip(from).take(limit).copied().collect();
        let next = from + page.len();
        let mut meta = json!({"resourceVersion": "1"});
        if next < matching.len() {
            meta["continue"] = json!(next.to_string());
        }
        json!({"kind": kind, "apiVersion": "v1", "metadata": meta, "items": page}).to_string()
    }
}

/// The request head: method, target (path and query), body length. `None` when the peer closed.
async fn read_head(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, String, usize)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let mut lines = head.lines();
            let mut first = lines.next()?.split(' ');
            let method = first.next()?.to_owned();
            let target = first.next()?.to_owned();
            let length = lines
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or(0);
            return Some((method, target, length));
        }
        let mut chunk = [0u8; 8192];
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// One connection of the daemon's client: requests in turn; a watch keeps it.
async fn connection(
    mut sock: TcpStream,
    objects: Arc<Objects>,
    served: Arc<Mutex<Served>>,
) -> std::io::Result<()> {
    let _ = sock.set_nodelay(true);
    let mut buf = Vec::new();
    while let Some((method, target, length)) = read_head(&mut sock, &mut buf).await {
        while buf.len() < length {
            let mut chunk = [0u8; 8192];
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        buf.drain(..length);
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        if method != "GET" {
            // Events the daemon publishes: accepted, not kept.
            sock.write_all(b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
                .await?;
            continue;
        }
        if param(query, "watch").as_deref() == Some("true") {
            let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
            {
                let mut s = served.lock().expect("served");
                s.requests += 1;
                if path == "/apis/discovery.k8s.io/v1/endpointslices" {
                    s.slice_watches += 1;
                    s.watches.push((selected_in(query), tx));
                } else {
                    s.idle.push(tx);
                }
            }
            sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
                .await?;
            let mut scratch = [0u8; 1024];
            loop {
                tokio::select! {
                    line = rx.recv() => {
                        // Dropped by a reset: this watch is over.
                        let Some(line) = line else { return Ok(()) };
                        let mut out = format!("{:x}\r\n", line.len()).into_bytes();
                        out.extend_from_slice(&line);
                        out.extend_from_slice(b"\r\n");
                        sock.write_all(&out).await?;
                    }
                    n = sock.read(&mut scratch) => {
                        if matches!(n, Ok(0) | Err(_)) {
                            return Ok(());
                        }
                    }
                }
            }
        }
        let refused = path == "/api/v1/services"
            && param(query, "fieldSelector").is_some_and(|f| f.starts_with("spec.type"))
            && served.lock().expect("served").refuse_type_selector;
        if refused {
            served.lock().expect("served").requests += 1;
            let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "field label not supported: spec.type",
                "reason": "BadRequest", "code": 400})
            .to_string();
            let head = format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            sock.write_all(head.as_bytes()).await?;
            sock.write_all(body.as_bytes()).await?;
            continue;
        }
        let body = objects.list(path, query);
        {
            let mut s = served.lock().expect("served");
            s.requests += 1;
            s.octets += body.len() as u64;
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        sock.write_all(head.as_bytes()).await?;
        sock.write_all(body.as_bytes()).await?;
    }
    Ok(())
}

/// Serves the API on 127.0.0.1; returns its address.
pub(crate) async fn serve(objects: Arc<Objects>, served: Arc<Mutex<Served>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind api");
    let addr = listener.local_addr().expect("api address");
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(connection(sock, objects.clone(), served.clone()));
        }
    });
    addr
}

/// Sends a MODIFIED of slice `i` to every open watch that selects it; the octets sent.
fn modify(served: &Mutex<Served>, cluster: &Cluster, i: usize, rv: u64, unready: bool) -> u64 {
    let obj = lbkube::slice(i, cluster.per, rv, unready.then_some(0));
    let line = Bytes::from(format!("{}\n", json!({"type": "MODIFIED", "object": obj})));
    let mut s = served.lock().expect("served");
    s.watches.retain(|(_, w)| !w.is_closed());
    let mut octets = 0;
    for (selected, w) in &s.watches {
        if matches(selected, &obj) {
            octets += line.len() as u64;
            let _ = w.send(line.clone());
        }
    }
    octets
}

pub(crate) fn host(ip: Ipv4Addr) -> IpNet {
    IpNet::V4(Ipv4Net::new(ip, 32).expect("/32"))
}

/// Service `i`'s LoadBalancer IP (as `lbkube::service` gives it).
pub(crate) fn service_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 96, (i >> 8) as u8, i as u8)
}

/// Which LoadBalancer watches the daemon runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watches {
    /// `--lb-slice-watch all`: every Service and EndpointSlice.
    All,
    /// The default: the LoadBalancer Services and their slices.
    LoadBalancers,
    /// `--announce-lb-ips off`: neither is watched (the baseline of the memory).
    Off,
}

pub(crate) fn start(dir: &Path, api: SocketAddr, watches: Watches) -> Process {
    let cfg = dir.join("bgp-config.yaml");
    write_file(
        &cfg,
        &format!(
            "peers:\n  - peer-address: {EXA}\n    peer-asn: {AS}\n    my-asn: {SPEAKER_AS}\n    hold-time: 90s\nspeaker:\n  connect-retry-time: 1s\naddress-pools:\n  - name: lb\n    protocol: bgp\n    addresses: [10.96.0.0/16]\n"
        ),
    )
    .expect("write bgp-config");
    let kubeconfig = dir.join("kubeconfig");
    write_file(
        &kubeconfig,
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: bench\n  cluster:\n    server: http://{api}\ncontexts:\n- name: bench\n  context:\n    cluster: bench\n    user: bench\n    namespace: default\ncurrent-context: bench\nusers:\n- name: bench\n  user: {{}}\n"
        ),
    )
    .expect("write kubeconfig");
    let mut cmd = Command::new(speaker_bin());
    // No bench measures the stop: without graceful restart (ExaBGP, BIRD here) a
    // SIGTERM would drain for 15 s (RFC 8326) past the harness's 5 s and be killed.
    cmd.arg("run")
        .arg("--graceful-shutdown-time=0")
        .arg("--node=n000000")
        .arg(format!("--bgp-config={}", cfg.display()))
        .arg("--announce=local")
        .arg(if watches == Watches::Off {
            "--announce-lb-ips=off"
        } else {
            "--announce-lb-ips=on"
        })
        .arg(format!("--source-address={SPEAKER}"))
        .arg(format!("--metrics-addr={SPEAKER}:9477"))
        .arg("--log-format=json")
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "warn");
    if watches == Watches::All {
        cmd.arg("--lb-slice-watch=all");
    }
    Process::spawn("speaker", cmd, &dir.join("speaker.log")).expect("start the speaker")
}

struct Measured {
    requests: u64,
    slice_watches: u64,
    octets: u64,
    synced_s: f64,
    synced: ProcStat,
    after_other: ProcStat,
    end: ProcStat,
    other_octets: u64,
    other_cpu_s: f64,
    lb_octets: u64,
    lb_cpu_s: f64,
    end_to_end_ms: Vec<f64>,
    buckets: Vec<(f64, f64)>,
}

fn measure(
    dir: &Path,
    api: SocketAddr,
    served: &Mutex<Served>,
    cluster: &Cluster,
    all: bool,
    refuse_type_selector: bool,
    changes: usize,
) -> Measured {
    *served.lock().expect("served") = Served {
        refuse_type_selector,
        ..Served::default()
    };
    let services = cluster.services.len();
    let lbs: Vec<usize> = (0..services)
        .filter(|i| cluster.services[*i]["spec"]["type"] == "LoadBalancer")
        .collect();
    let others: Vec<usize> = (0..services)
        .filter(|i| cluster.services[*i]["spec"]["type"] != "LoadBalancer")
        .collect();
    let exa = Exabgp::start(
        dir,
        PeerOpts::new(EXA, AS).neighbor(Neighbor::new(SPEAKER, SPEAKER_AS).hold_time(90)),
    )
    .expect("start ExaBGP");
    let t_start = unix_now();
    let mut speaker = start(
        dir,
        api,
        if all {
            Watches::All
        } else {
            Watches::LoadBalancers
        },
    );
    let mut rx = Rx::new(exa.dir().join("rx.jsonl"));
    let mut want: BTreeSet<IpNet> = lbs.iter().map(|i| host(service_ip(*i))).collect();
    want.insert(IpNet::V4(Ipv4Net::new(prefix(0), 24).expect("/24")));
    let mut held = BTreeSet::new();
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
    // The watch requests after the lists, the allocator settling.
    std::thread::sleep(Duration::from_secs(1));
    rx.read();
    let pid = speaker.pid();
    let synced = proc_stat(pid);
    let (requests, octets, slice_watches) = {
        let s = served.lock().expect("served");
        (s.requests, s.octets, s.slice_watches)
    };
    let mut rv = 1u64;

    // Other Services' endpoint changes: as lbscope, each a different Service.
    let mut other_octets = 0;
    let cpu0 = proc_stat(pid).cpu_ticks;
    for c in 0..changes {
        let i = others[(c * 7919 + 13) % others.len()];
        rv += 1;
        other_octets += modify(served, cluster, i, rv, true);
        if c % 100 == 99 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let after_other = proc_stat(pid);
    let other_cpu_s = (after_other.cpu_ticks - cpu0) as f64 / clock_ticks();
    assert!(
        rx.read().is_empty(),
        "other Services' endpoint changes moved a route"
    );

    // LoadBalancer endpoint changes on this node, one at a time.
    let before = histogram();
    let cpu0 = proc_stat(pid).cpu_ticks;
    let mut lb_octets = 0;
    let mut end_to_end_ms = Vec::with_capacity(changes);
    for c in 0..changes {
        let i = lbs[(c * 7919 + 13) % lbs.len()];
        rv += 1;
        // Endpoint 0 of every LoadBalancer Service is on n000000: unready in even rounds
        // over the Services (withdrawn), ready again in odd ones (announced).
        let unready = (c / lbs.len()) % 2 == 0;
        let ip = host(service_ip(i));
        let t_write = unix_now();
        lb_octets += modify(served, cluster, i, rv, unready);
        let mut t_arrive = None;
        let ok = poll(Duration::from_secs(20), Duration::from_millis(1), || {
            for (t, p, ann) in rx.read() {
                if p == ip && ann != unready {
                    t_arrive = Some(t);
                }
            }
            t_arrive.is_some()
        });
        assert!(
            ok,
            "change {c} (Service {i}, unready {unready}) never reached ExaBGP; speaker log:\n{}",
            speaker.log_tail(20)
        );
        end_to_end_ms.push((t_arrive.unwrap_or(f64::NAN) - t_write) * 1000.0);
    }
    let buckets = histogram_since(&before);
    let end = proc_stat(pid);
    let lb_cpu_s = (end.cpu_ticks - cpu0) as f64 / clock_ticks();
    let _ = speaker.stop();
    drop(exa);
    Measured {
        requests,
        slice_watches,
        octets,
        synced_s,
        synced,
        after_other,
        end,
        other_octets,
        other_cpu_s,
        lb_octets,
        lb_cpu_s,
        end_to_end_ms,
        buckets,
    }
}

/// The daemon without LoadBalancer watches (`--announce-lb-ips off`), same cluster:
/// requests, octets and RSS once ExaBGP holds its pod CIDR.
fn baseline(dir: &Path, api: SocketAddr, served: &Mutex<Served>) -> (u64, u64, ProcStat) {
    *served.lock().expect("served") = Served::default();
    let exa = Exabgp::start(
        dir,
        PeerOpts::new(EXA, AS).neighbor(Neighbor::new(SPEAKER, SPEAKER_AS).hold_time(90)),
    )
    .expect("start ExaBGP");
    let mut speaker = start(dir, api, Watches::Off);
    let mut rx = Rx::new(exa.dir().join("rx.jsonl"));
    let pod = IpNet::V4(Ipv4Net::new(prefix(0), 24).expect("/24"));
    let ok = poll(Duration::from_secs(120), Duration::from_millis(50), || {
        rx.read().iter().any(|(_, p, ann)| *p == pod && *ann)
    });
    assert!(
        ok,
        "ExaBGP never got the pod CIDR; speaker log:\n{}",
        speaker.log_tail(20)
    );
    std::thread::sleep(Duration::from_secs(1));
    let stat = proc_stat(speaker.pid());
    let (requests, octets) = {
        let s = served.lock().expect("served");
        (s.requests, s.octets)
    };
    let _ = speaker.stop();
    drop(exa);
    (requests, octets, stat)
}

pub fn run(services: usize, load_balancers: usize, endpoints: usize, changes: usize) {
    assert!(
        load_balancers > 0
            && services % load_balancers == 0
            && endpoints % services == 0
            && endpoints / services <= lbkube::NODES,
        "SERVICES must be a multiple of LOADBALANCERS, ENDPOINTS of SERVICES (at most {} per Service)",
        lbkube::NODES
    );
    let dir = crate::send::setup_once();
    let cluster = Arc::new(Cluster::new(services, load_balancers, endpoints));
    let objects = Arc::new(Objects {
        cluster: cluster.clone(),
        nodes: objects(lbkube::NODES, false),
        cilium_nodes: objects(lbkube::NODES, true),
        cilium_config: vec![config_map(
            "kube-system",
            "cilium-config",
            "1",
            json!({"ipam": "cluster-pool", "cluster-pool-ipv4-cidr": "16.0.0.0/4"}),
        )],
    });
    let served = Arc::new(Mutex::new(Served::default()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let api = rt.block_on(serve(objects, served.clone()));
    let base_dir = dir.path().join("lbscope-daemon-none");
    std::fs::create_dir_all(&base_dir).expect("run dir");
    let (requests, octets, stat) = baseline(&base_dir, api, &served);
    eprintln!(
        "lbscope-daemon none (--announce-lb-ips off): {requests} requests, {octets} octets; RSS synced {:.1} MiB",
        stat.rss_kb as f64 / 1024.0
    );
    emit(json!({
        "item": "lbscope_daemon_baseline",
        "requests": requests,
        "octets": octets,
        "rss_mib_synced": stat.rss_kb as f64 / 1024.0,
        "hwm_mib": stat.hwm_kb as f64 / 1024.0,
    }));
    // The last: the scoped watches against an API server that refuses the Services'
    // field selector (before Kubernetes 1.31): the fallback to every Service.
    for (watch, all, refuse) in [
        ("all", true, false),
        ("loadbalancers", false, false),
        ("loadbalancers-selector-refused", false, true),
    ] {
        let run_dir = dir.path().join(format!("lbscope-daemon-{watch}"));
        std::fs::create_dir_all(&run_dir).expect("run dir");
        let m = measure(&run_dir, api, &served, &cluster, all, refuse, changes);
        let mib = |kb: u64| kb as f64 / 1024.0;
        let e = &m.end_to_end_ms;
        eprintln!(
            "lbscope-daemon {watch}: synced in {:.1} s, {} requests, {} slice watches, {} octets; RSS synced {:.1} MiB, after other changes {:.1}, after LB changes {:.1}, peak {:.1}; other changes: {} octets, {:.2} s CPU; LB changes: {} octets, {:.2} s CPU, end to end p50 {:.2} ms p99 {:.2} ms",
            m.synced_s, m.requests, m.slice_watches, m.octets,
            mib(m.synced.rss_kb), mib(m.after_other.rss_kb), mib(m.end.rss_kb), mib(m.end.hwm_kb),
            m.other_octets, m.other_cpu_s, m.lb_octets, m.lb_cpu_s,
            median(e), percentile(e, 0.99)
        );
        emit(json!({
            "item": "lbscope_daemon",
            "watch": watch,
            "services": services,
            "load_balancers": load_balancers,
            "endpoints": endpoints,
            "changes": changes,
            "synced_s": m.synced_s,
            "requests": m.requests,
            "slice_watches": m.slice_watches,
            "octets": m.octets,
            "rss_mib_synced": mib(m.synced.rss_kb),
            "rss_mib_after_other": mib(m.after_other.rss_kb),
            "rss_mib_after": mib(m.end.rss_kb),
            "hwm_mib": mib(m.end.hwm_kb),
            "other_octets": m.other_octets,
            "other_cpu_s": m.other_cpu_s,
            "lb_octets": m.lb_octets,
            "lb_cpu_s": m.lb_cpu_s,
            "end_to_end": {"median_ms": median(e), "p99_ms": percentile(e, 0.99), "max_ms": percentile(e, 1.0)},
            "histogram": buckets_json(&m.buckets),
        }));
    }
}
