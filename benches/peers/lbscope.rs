//! Item 7d, the EndpointSlice watches scoped to the LoadBalancer Services against the
//! full watch, side by side in one run: `lbscope SERVICES LOADBALANCERS ENDPOINTS
//! CHANGES`. The speaker's Kubernetes source (the real kube-rs watchers) against
//! kube-rs's mocked API service answering like an API server would: SERVICES Services
//! of which LOADBALANCERS are `type: LoadBalancer` (spread evenly), one EndpointSlice
//! each, ENDPOINTS endpoints in all, 100 Nodes; lists paginated by `limit`/`continue`
//! and filtered by their `labelSelector` (`kubernetes.io/service-name in (...)`) and
//! `fieldSelector` (`metadata.name`, the Services' `spec.type`), each watch event sent
//! only to the watches whose selector matches the slice.
//!
//! For each of `SliceScope::All` (every Service and EndpointSlice, what every speaker
//! paid before) and `SliceScope::LoadBalancers` (the default: the LoadBalancer Services
//! and their slices): requests, watches and response octets
//! until `Synced`; the octets the watches receive and the updates the source hands on
//! for CHANGES endpoint changes of other Services (one MODIFIED each), then for CHANGES
//! of LoadBalancer Services, each sent alone and timed from the event written to the
//! update handed on (the source's share of event to wire).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use kube::client::Body as KubeBody;
use podcidr_speaker::sources::kube::{
    self as kube_source, ConfigMapRef, KubeSourceConfig, Retry, SliceScope, WatchScope,
};
use podcidr_speaker::sources::model::IpamOverride;
use podcidr_speaker::sources::services::LbUpdate;
use podcidr_speaker::sources::{channel, SourceUpdate};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tower_test::mock;

use crate::common::emit;
use crate::kube::{objects, param, send_json, NoSink};
use crate::kube_harness::{config_map, TestBody};
use crate::lbkube;

type Watch = mpsc::UnboundedSender<Result<Bytes, std::io::Error>>;

/// The Service names a slice watch selects; `None`: every slice.
pub(crate) type Selected = Option<BTreeSet<String>>;

/// The cluster: which Services are LoadBalancers and each one's object and slice.
pub(crate) struct Cluster {
    pub(crate) services: Vec<Value>,
    pub(crate) slices: Vec<Value>,
    pub(crate) per: usize,
}

impl Cluster {
    pub(crate) fn new(services: usize, load_balancers: usize, endpoints: usize) -> Self {
        let every = services / load_balancers;
        let per = endpoints / services;
        let services_json = (0..services)
            .map(|i| {
                let mut s = lbkube::service(i);
                if i % every != 0 {
                    s["spec"]["type"] = json!("ClusterIP");
                    s["status"] = json!({"loadBalancer": {}});
                    if let Some(spec) = s["spec"].as_object_mut() {
                        for lb_only in [
                            "externalTrafficPolicy",
                            "healthCheckNodePort",
                            "allocateLoadBalancerNodePorts",
                        ] {
                            spec.remove(lb_only);
                        }
                    }
                }
                s
            })
            .collect();
        let slices = (0..services)
            .map(|i| lbkube::slice(i, per, 1, None))
            .collect();
        Self {
            services: services_json,
            slices,
            per,
        }
    }
}

/// The names of a `kubernetes.io/service-name in (a,b,...)` selector.
fn selected(req: &Request<KubeBody>) -> Selected {
    selected_in(req.uri().query().unwrap_or_default())
}

/// [`selected`] of a request's query string.
pub(crate) fn selected_in(query: &str) -> Selected {
    let raw = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("labelSelector="))?;
    let text = decoded(raw);
    let names = text
        .strip_prefix("kubernetes.io/service-name in (")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("unexpected selector {text}"));
    Some(names.split(',').map(str::to_owned).collect())
}

/// A form-urlencoded query value, decoded.
pub(crate) fn decoded(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("ascii");
                out.push(u8::from_str_radix(hex, 16).expect("percent escape"));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).expect("utf-8")
}

/// Whether an object passes a `fieldSelector` of one `field=value` as the API server
/// registers them: `metadata.name` (every kind), `spec.type` (Services).
pub(crate) fn fields_match(selector: Option<&str>, object: &Value) -> bool {
    let Some((field, value)) = selector.and_then(|s| s.split_once('=')) else {
        return true;
    };
    let at = match field {
        "metadata.name" => &object["metadata"]["name"],
        "spec.type" => &object["spec"]["type"],
        other => panic!("field selector {other} is not served here"),
    };
    at == value
}

pub(crate) fn matches(selected: &Selected, slice: &Value) -> bool {
    let name = slice["metadata"]["labels"]["kubernetes.io/service-name"]
        .as_str()
        .unwrap_or_default();
    selected.as_ref().is_none_or(|names| names.contains(name))
}

#[derive(Default)]
struct Served {
    requests: u64,
    octets: u64,
    /// Of `octets`: the Services' lists, the EndpointSlices' lists.
    service_octets: u64,
    slice_octets: u64,
    slice_watch_requests: u64,
    /// The slice watches, with what they select.
    slice_watches: Vec<(Selected, Watch)>,
}

/// One page of a List, as `kube::list_page` but filtered by `selected` and the field
/// selector ([`fields_match`]).
fn list_page(req: &Request<KubeBody>, kind: &str, all: &[Value], selected: &Selected) -> String {
    let fields = param(req, "fieldSelector");
    let matching: Vec<&Value> = all
        .iter()
        .filter(|o| matches(selected, o))
        .filter(|o| fields_match(fields.as_deref(), o))
        .collect();
    let limit: usize = param(req, "limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(usize::MAX);
    let from: usize = param(req, "continue")
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

async fn serve(
    mut handle: mock::Handle<Request<KubeBody>, Response<TestBody>>,
    cluster: Arc<Cluster>,
    served: Arc<Mutex<Served>>,
) {
    let nodes = objects(lbkube::NODES, false);
    let cnodes = objects(lbkube::NODES, true);
    let cilium_config = [config_map(
        "kube-system",
        "cilium-config",
        "1",
        json!({"ipam": "cluster-pool", "cluster-pool-ipv4-cidr": "16.0.0.0/4"}),
    )];
    // Watches the bench does not feed: held open, never written to.
    let mut idle: Vec<Watch> = Vec::new();
    while let Some((req, resp)) = handle.next_request().await {
        let path = req.uri().path().to_string();
        let (kind, all): (&str, &[Value]) = match path.as_str() {
            "/api/v1/nodes" => ("NodeList", &nodes),
            "/apis/cilium.io/v2/ciliumnodes" => ("CiliumNodeList", &cnodes),
            "/api/v1/services" => ("ServiceList", &cluster.services),
            "/apis/discovery.k8s.io/v1/endpointslices" => ("EndpointSliceList", &cluster.slices),
            p if p.ends_with("/configmaps") => ("ConfigMapList", &cilium_config),
            _ => ("List", &[]),
        };
        let is_slices = kind == "EndpointSliceList";
        let selected = if is_slices { selected(&req) } else { None };
        let mut s = served.lock().expect("served");
        s.requests += 1;
        if param(&req, "watch").as_deref() == Some("true") {
            let (tx, rx) = mpsc::unbounded_channel();
            if is_slices {
                s.slice_watch_requests += 1;
                s.slice_watches.push((selected, tx));
            } else {
                idle.push(tx);
            }
            send_json(resp, TestBody::Stream(rx));
            continue;
        }
        let body = list_page(&req, kind, all, &selected);
        s.octets += body.len() as u64;
        match kind {
            "ServiceList" => s.service_octets += body.len() as u64,
            "EndpointSliceList" => s.slice_octets += body.len() as u64,
            _ => {}
        }
        drop(s);
        send_json(resp, TestBody::Full(Some(Bytes::from(body))));
    }
}

/// Sends a MODIFIED of slice `i` to every open watch that selects it, as the API
/// server does; the octets sent.
fn modify(served: &Mutex<Served>, cluster: &Cluster, i: usize, rv: u64, unready: bool) -> u64 {
    let obj = lbkube::slice(i, cluster.per, rv, unready.then_some(0));
    let mut s = served.lock().expect("served");
    // A watch the source dropped (re-established) is closed: the API server sends it
    // nothing.
    s.slice_watches.retain(|(_, w)| !w.is_closed());
    let line = Bytes::from(format!("{}\n", json!({"type": "MODIFIED", "object": obj})));
    let mut octets = 0;
    for (selected, w) in &s.slice_watches {
        if matches(selected, &obj) {
            octets += line.len() as u64;
            let _ = w.send(Ok(line.clone()));
        }
    }
    octets
}

struct Measured {
    requests: u64,
    slice_watches: u64,
    octets: u64,
    service_octets: u64,
    slice_octets: u64,
    other_octets: u64,
    other_handed_on: usize,
    lb_octets: u64,
    lb_handed_on: usize,
    lb_latency_us: Vec<u64>,
}

async fn measure(cluster: Arc<Cluster>, scope: SliceScope, changes: usize) -> Measured {
    let (svc, handle) = mock::pair::<Request<KubeBody>, Response<TestBody>>();
    let served = Arc::new(Mutex::new(Served::default()));
    let server = tokio::spawn(serve(handle, cluster.clone(), served.clone()));
    let (tx, mut rx) = channel(1024);
    let config = KubeSourceConfig {
        scope: WatchScope::Local {
            node: "n000000".into(),
        },
        cilium_config: ConfigMapRef::cilium_config(),
        bgp_config: None,
        ipam: IpamOverride::Auto,
        retry: Retry::Fixed(Duration::from_millis(20)),
        load_balancers: true,
        slices: scope,
        own_node: Some("n000000".into()),
    };
    let client = kube::Client::new(svc, "default");
    let task = tokio::spawn(async move {
        let _ = kube_source::run(client, config, tx, Arc::new(NoSink)).await;
    });
    let synced = tokio::time::timeout(Duration::from_secs(300), async {
        while let Some(u) = rx.updates.recv().await {
            if matches!(u, SourceUpdate::Lb(LbUpdate::Synced)) {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(synced, "the kube source never sent Synced");
    // The watch requests that follow the lists.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (requests, octets, service_octets, slice_octets, slice_watches) = {
        let s = served.lock().expect("served");
        (
            s.requests,
            s.octets,
            s.service_octets,
            s.slice_octets,
            s.slice_watch_requests,
        )
    };
    let services = cluster.services.len();
    let lb_every = services
        / cluster
            .services
            .iter()
            .filter(|s| s["spec"]["type"] == "LoadBalancer")
            .count();
    let mut rv = 1u64;
    let count_slices = |rx: &mut mpsc::Receiver<SourceUpdate>| {
        let mut n = 0;
        while let Ok(u) = rx.try_recv() {
            if matches!(u, SourceUpdate::Lb(LbUpdate::Slice { .. })) {
                n += 1;
            }
        }
        n
    };
    // Endpoint changes of the other Services: each a different Service's slice (7919
    // is prime, so the first 1,000 steps hit distinct Services), one endpoint turning
    // unready: every one changes that slice's facts.
    let mut other_octets = 0;
    let mut other_handed_on = 0;
    let others: Vec<usize> = (0..services).filter(|i| i % lb_every != 0).collect();
    for c in 0..changes {
        let i = others[(c * 7919 + 13) % others.len()];
        rv += 1;
        other_octets += modify(&served, &cluster, i, rv, true);
        other_handed_on += count_slices(&mut rx.updates);
        if c % 100 == 99 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    other_handed_on += count_slices(&mut rx.updates);
    // Endpoint changes of LoadBalancer Services, one at a time, timed.
    let mut lb_octets = 0;
    let mut lb_handed_on = 0;
    let mut lb_latency_us = Vec::with_capacity(changes);
    let lbs: Vec<usize> = (0..services).filter(|i| i % lb_every == 0).collect();
    for c in 0..changes {
        let i = lbs[(c * 7919 + 13) % lbs.len()];
        rv += 1;
        // Unready then ready again per Service round, so each change changes facts.
        let unready = (c / lbs.len()) % 2 == 0;
        let t0 = Instant::now();
        lb_octets += modify(&served, &cluster, i, rv, unready);
        let got = tokio::time::timeout(Duration::from_secs(5), async {
            while let Some(u) = rx.updates.recv().await {
                if matches!(u, SourceUpdate::Lb(LbUpdate::Slice { .. })) {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or(false);
        if got {
            lb_handed_on += 1;
            lb_latency_us.push(t0.elapsed().as_micros() as u64);
        }
    }
    task.abort();
    server.abort();
    Measured {
        requests,
        slice_watches,
        octets,
        service_octets,
        slice_octets,
        other_octets,
        other_handed_on,
        lb_octets,
        lb_handed_on,
        lb_latency_us,
    }
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let at = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[at.min(sorted.len() - 1)]
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let cluster = Arc::new(Cluster::new(services, load_balancers, endpoints));
    for (watch, scope) in [
        ("all", SliceScope::All),
        ("loadbalancers", SliceScope::load_balancers(&[])),
    ] {
        let mut m = rt.block_on(measure(cluster.clone(), scope, changes));
        m.lb_latency_us.sort_unstable();
        let (p50, p99, max) = (
            quantile(&m.lb_latency_us, 0.5),
            quantile(&m.lb_latency_us, 0.99),
            m.lb_latency_us.last().copied().unwrap_or(0),
        );
        eprintln!(
            "lbscope {watch}: {} requests, {} slice watches, {} octets at start ({} of Services, {} of slices); other Services' changes: {} octets, {} handed on; LoadBalancer changes: {} octets, {} of {changes} handed on, p50 {p50} us p99 {p99} us max {max} us",
            m.requests, m.slice_watches, m.octets, m.service_octets, m.slice_octets, m.other_octets, m.other_handed_on, m.lb_octets, m.lb_handed_on
        );
        assert_eq!(
            m.lb_handed_on, changes,
            "every LoadBalancer endpoint change is handed on"
        );
        emit(json!({
            "item": "lbscope",
            "watch": watch,
            "services": services,
            "load_balancers": load_balancers,
            "endpoints": endpoints,
            "lb_endpoints": endpoints / services * load_balancers,
            "changes": changes,
            "requests": m.requests,
            "slice_watches": m.slice_watches,
            "octets": m.octets,
            "service_octets": m.service_octets,
            "slice_octets": m.slice_octets,
            "other_octets": m.other_octets,
            "other_handed_on": m.other_handed_on,
            "lb_octets": m.lb_octets,
            "lb_handed_on": m.lb_handed_on,
            "lb_p50_us": p50,
            "lb_p99_us": p99,
            "lb_max_us": max,
        }));
    }
}
