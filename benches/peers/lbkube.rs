//! Item 7c, what one speaker pulls from the API server for the LoadBalancer facts:
//! `lbkube SERVICES[,SERVICES...] ENDPOINTS CHANGES`. The speaker's Kubernetes source
//! (`sources::kube::run` with `load_balancers`, the real kube-rs watchers) against
//! kube-rs's mocked API service, answering like an API server with 100 Nodes and
//! CiliumNodes, SERVICES LoadBalancer Services and their EndpointSlices holding
//! ENDPOINTS endpoints in all (objects as the API server serves them, with uid,
//! resourceVersion, cluster IPs, node ports, targetRefs and zones; no managedFields,
//! which kube-rs's watchers do not ask to drop): lists paginated by `limit`/`continue`,
//! watches held open. Counted: requests and response octets until the source has sent
//! `Synced`, then the octets of the watch events for CHANGES endpoint changes (one
//! EndpointSlice MODIFIED each, an endpoint turning unready or ready), and that the
//! source handed on one update per change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
use crate::kube::{list_page, objects, param, send_json, Count, NoSink};
use crate::kube_harness::{config_map, TestBody};

pub(crate) const NODES: usize = 100;

type Watch = mpsc::UnboundedSender<Result<Bytes, std::io::Error>>;

pub(crate) fn service(i: usize) -> Value {
    let name = format!("s{i:05}");
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": name, "namespace": "bench", "uid": format!("6f1c2a0e-0000-4000-8000-{i:012}"),
            "resourceVersion": "1", "creationTimestamp": "2026-11-20T08:00:00Z",
            "labels": {"app": name},
        },
        "spec": {
            "type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "clusterIP": format!("10.100.{}.{}", i >> 8 & 255, i & 255),
            "clusterIPs": [format!("10.100.{}.{}", i >> 8 & 255, i & 255)],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster", "sessionAffinity": "None",
            "allocateLoadBalancerNodePorts": true, "healthCheckNodePort": 30000 + i % 2000,
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080, "nodePort": 31000 + i % 2000}],
        },
        "status": {"loadBalancer": {"ingress": [{"ip": format!("10.96.{}.{}", i >> 8 & 255, i & 255), "ipMode": "VIP"}]}},
    })
}

pub(crate) fn slice(i: usize, per: usize, rv: u64, unready: Option<usize>) -> Value {
    let name = format!("s{i:05}");
    let step = NODES / per;
    let endpoints: Vec<Value> = (0..per)
        .map(|j| {
            let node = (i + j * step) % NODES;
            let ready = unready != Some(j);
            json!({
                "addresses": [format!("10.{}.{}.{}", 100 + (i >> 8) % 100, i & 255, j + 1)],
                "conditions": {"ready": ready, "serving": ready, "terminating": false},
                "nodeName": format!("n{node:06}"),
                "zone": format!("zone-{}", node % 3),
                "targetRef": {"kind": "Pod", "namespace": "bench", "name": format!("{name}-7d9f8c6b5-{j:05}"), "uid": format!("9a0b1c2d-0000-4000-8000-{:012}", i * 100 + j)},
            })
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "name": format!("{name}-x7k2p"), "namespace": "bench",
            "uid": format!("3e4f5a6b-0000-4000-8000-{i:012}"), "resourceVersion": rv.to_string(),
            "generation": 1, "creationTimestamp": "2026-11-20T08:00:00Z",
            "labels": {"kubernetes.io/service-name": name, "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name, "uid": format!("6f1c2a0e-0000-4000-8000-{i:012}"), "controller": true, "blockOwnerDeletion": true}],
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    })
}

struct Served {
    counts: Mutex<HashMap<String, Count>>,
    slice_watches: Mutex<Vec<Watch>>,
}

async fn serve(
    mut handle: mock::Handle<Request<KubeBody>, Response<TestBody>>,
    services: usize,
    per: usize,
    served: Arc<Served>,
) {
    let nodes = objects(NODES, false);
    let cnodes = objects(NODES, true);
    let svcs: Vec<Value> = (0..services).map(service).collect();
    let slices: Vec<Value> = (0..services).map(|i| slice(i, per, 1, None)).collect();
    // Watches the bench does not feed: held open, never written to.
    let mut idle: Vec<Watch> = Vec::new();
    while let Some((req, resp)) = handle.next_request().await {
        let path = req.uri().path().to_string();
        let (key, kind, all): (&str, &str, &[Value]) = match path.as_str() {
            "/api/v1/nodes" => ("nodes", "NodeList", &nodes),
            "/apis/cilium.io/v2/ciliumnodes" => ("ciliumnodes", "CiliumNodeList", &cnodes),
            "/api/v1/services" => ("services", "ServiceList", &svcs),
            "/apis/discovery.k8s.io/v1/endpointslices" => {
                ("endpointslices", "EndpointSliceList", &slices)
            }
            p if p.ends_with("/configmaps") => ("configmaps", "ConfigMapList", &[]),
            _ => ("other", "List", &[]),
        };
        let mut c = served.counts.lock().expect("counts");
        let e = c.entry(key.into()).or_default();
        e.requests += 1;
        if param(&req, "watch").as_deref() == Some("true") {
            let (tx, rx) = mpsc::unbounded_channel();
            if key == "endpointslices" {
                served.slice_watches.lock().expect("watches").push(tx);
            } else {
                idle.push(tx);
            }
            send_json(resp, TestBody::Stream(rx));
            continue;
        }
        let cilium_config;
        let all = if key == "configmaps" {
            cilium_config = [config_map(
                "kube-system",
                "cilium-config",
                "1",
                json!({"ipam": "cluster-pool", "cluster-pool-ipv4-cidr": "16.0.0.0/4"}),
            )];
            &cilium_config[..]
        } else {
            all
        };
        let body = list_page(&req, kind, all);
        e.octets += body.len() as u64;
        drop(c);
        send_json(resp, TestBody::Full(Some(Bytes::from(body))));
    }
}

struct Measured {
    requests: u64,
    octets: u64,
    lb_octets: u64,
    churn_octets: u64,
    handed_on: usize,
}

async fn measure(services: usize, endpoints: usize, changes: usize) -> Measured {
    let per = endpoints / services;
    let (svc, handle) = mock::pair::<Request<KubeBody>, Response<TestBody>>();
    let served = Arc::new(Served {
        counts: Mutex::new(HashMap::new()),
        slice_watches: Mutex::new(Vec::new()),
    });
    let server = tokio::spawn(serve(handle, services, per, served.clone()));
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
        slices: SliceScope::All,
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
    assert!(
        synced,
        "the kube source never sent Synced for {services} Services"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (requests, octets, lb_octets) =
        served
            .counts
            .lock()
            .expect("counts")
            .iter()
            .fold((0, 0, 0), |(r, o, l), (k, c)| {
                let lb = if k == "services" || k == "endpointslices" {
                    c.octets
                } else {
                    0
                };
                (r + c.requests, o + c.octets, l + lb)
            });
    // The endpoint changes: each a MODIFIED EndpointSlice, one endpoint unready (odd
    // changes of a Service) or ready again (even).
    let mut churn = 0u64;
    let mut rv = 1u64;
    let drain = |rx: &mut mpsc::Receiver<SourceUpdate>, n: &mut usize| {
        while let Ok(u) = rx.try_recv() {
            if matches!(u, SourceUpdate::Lb(LbUpdate::Slice { .. })) {
                *n += 1;
            }
        }
    };
    let mut handed_on = 0usize;
    for c in 0..changes {
        let i = (c * 7919 + 13) % services;
        rv += 1;
        let unready = (c / services) % 2 == 0;
        let obj = slice(i, per, rv, unready.then_some(0));
        let line = format!("{}\n", json!({"type": "MODIFIED", "object": obj}));
        for w in served.slice_watches.lock().expect("watches").iter() {
            churn += line.len() as u64;
            let _ = w.send(Ok(Bytes::from(line.clone())));
        }
        drain(&mut rx.updates, &mut handed_on);
        if c % 100 == 99 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), async {
        while handed_on < changes {
            match rx.updates.recv().await {
                Some(SourceUpdate::Lb(LbUpdate::Slice { .. })) => handed_on += 1,
                Some(_) => {}
                None => break,
            }
        }
    })
    .await;
    task.abort();
    server.abort();
    Measured {
        requests,
        octets,
        lb_octets,
        churn_octets: churn,
        handed_on,
    }
}

pub fn run(sizes: &[usize], endpoints: usize, changes: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for &services in sizes {
        assert!(
            services > 0 && endpoints % services == 0 && endpoints / services <= NODES,
            "ENDPOINTS / SERVICES must be a whole number of at most {NODES}"
        );
        let m = rt.block_on(measure(services, endpoints, changes));
        eprintln!(
            "lbkube {services} services: {} requests, {} octets ({} of Services and slices), churn {} octets, {} of {changes} handed on",
            m.requests, m.octets, m.lb_octets, m.churn_octets, m.handed_on
        );
        assert_eq!(
            m.handed_on, changes,
            "the source must hand on one update per changed EndpointSlice"
        );
        emit(json!({
            "item": "lbkube",
            "services": services,
            "endpoints": endpoints,
            "changes": changes,
            "requests": m.requests,
            "octets": m.octets,
            "lb_octets": m.lb_octets,
            "churn_octets": m.churn_octets,
        }));
    }
}
