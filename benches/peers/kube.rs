//! Item 6, the local mode's scale: `kube N[,N...]`. The speaker's Kubernetes source
//! (`sources::kube::run`, the real watchers) against kube-rs's mocked API service, which
//! here answers like an API server holding N Nodes and N CiliumNodes: lists paginated by
//! `limit`/`continue`, field selectors honoured, watches held open. Counted per speaker:
//! requests and response octets until its first snapshot, then the octets its watches
//! receive while 100 other nodes change. Local mode (`--announce local`: field selector
//! on its own Node and CiliumNode) against cluster mode (every node).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use kube::client::Body as KubeBody;
use podcidr_speaker::sources::kube::{
    self as kube_source, ConfigMapRef, KubeSourceConfig, Retry, SliceScope, WatchScope,
};
use podcidr_speaker::sources::model::IpamOverride;
use podcidr_speaker::sources::{channel, EventSink, Report, SourceUpdate};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tower_test::mock;

use crate::common::{emit, node_ip};
use crate::kube_harness::{cilium_node, config_map, node, TestBody};

pub(crate) struct NoSink;
impl EventSink for NoSink {
    fn publish(&self, _: &Report) {}
}

#[derive(Default, Debug, Clone, Copy)]
pub(crate) struct Count {
    pub(crate) requests: u64,
    pub(crate) octets: u64,
}

type Watches = Vec<(
    bool,
    Option<String>,
    mpsc::UnboundedSender<Result<Bytes, std::io::Error>>,
)>;

pub(crate) fn param(req: &Request<KubeBody>, key: &str) -> Option<String> {
    req.uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            (k == key).then(|| v.replace("%3D", "=").replace("%2C", ","))
        })
}

/// Answers a mocked request with 200 and a JSON body (a List page or a watch stream).
pub(crate) fn send_json(resp: mock::SendResponse<Response<TestBody>>, body: TestBody) {
    resp.send_response(
        Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(body)
            .expect("response"),
    );
}

/// One page of a List answer to `req`, as the API server gives it: the objects its
/// `metadata.name=` field selector lets through, from its `continue` offset, at most its
/// `limit`, with a `continue` token while more are left.
pub(crate) fn list_page(req: &Request<KubeBody>, kind: &str, all: &[Value]) -> String {
    let matching: Vec<&Value> = all
        .iter()
        .filter(|o| {
            match param(req, "fieldSelector")
                .as_deref()
                .and_then(|s| s.strip_prefix("metadata.name="))
            {
                Some(name) => o["metadata"]["name"] == name,
                None => true,
            }
        })
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

pub(crate) fn objects(n: usize, cilium: bool) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let name = format!("n{i:06}");
            let cidr = format!("{}/24", crate::common::prefix(i));
            if cilium {
                cilium_node(&name, "1", &[&cidr])
            } else {
                let mut v = node(
                    &name,
                    "1",
                    &[&cidr],
                    json!({"kubernetes.io/hostname": name}),
                );
                v["status"]["addresses"][0]["address"] = json!(node_ip(i).to_string());
                v
            }
        })
        .collect()
}

/// Serves every request like an API server with `n` nodes; returns the counts by path
/// through `counts` and keeps every watch open in `watches`.
async fn serve(
    mut handle: mock::Handle<Request<KubeBody>, Response<TestBody>>,
    n: usize,
    counts: Arc<std::sync::Mutex<HashMap<String, Count>>>,
    watches: Arc<std::sync::Mutex<Watches>>,
) {
    let nodes = objects(n, false);
    let cnodes = objects(n, true);
    while let Some((req, resp)) = handle.next_request().await {
        let path = req.uri().path().to_string();
        let selector = param(&req, "fieldSelector");
        let key = match path.as_str() {
            "/api/v1/nodes" => "nodes",
            "/apis/cilium.io/v2/ciliumnodes" => "ciliumnodes",
            p if p.ends_with("/configmaps") => "configmaps",
            _ => "other",
        };
        let watch = param(&req, "watch").as_deref() == Some("true");
        if watch {
            let (tx, rx) = mpsc::unbounded_channel();
            watches
                .lock()
                .expect("watches")
                .push((key == "nodes", selector, tx));
            let mut c = counts.lock().expect("counts");
            c.entry(key.into()).or_default().requests += 1;
            send_json(resp, TestBody::Stream(rx));
            continue;
        }
        let all: Vec<Value> = match key {
            "nodes" => nodes.clone(),
            "ciliumnodes" => cnodes.clone(),
            "configmaps" => vec![config_map(
                "kube-system",
                "cilium-config",
                "1",
                json!({"ipam": "cluster-pool", "cluster-pool-ipv4-cidr": "16.0.0.0/4"}),
            )],
            _ => Vec::new(),
        };
        let kind = match key {
            "nodes" => "NodeList",
            "ciliumnodes" => "CiliumNodeList",
            _ => "ConfigMapList",
        };
        let body = list_page(&req, kind, &all);
        let mut c = counts.lock().expect("counts");
        let e = c.entry(key.into()).or_default();
        e.requests += 1;
        e.octets += body.len() as u64;
        send_json(resp, TestBody::Full(Some(Bytes::from(body))));
    }
}

struct Measured {
    requests: u64,
    octets: u64,
    churn_octets: u64,
}

async fn measure(n: usize, local: bool) -> Measured {
    let (service, handle) = mock::pair::<Request<KubeBody>, Response<TestBody>>();
    let counts = Arc::new(std::sync::Mutex::new(HashMap::new()));
    let watches = Arc::new(std::sync::Mutex::new(Vec::new()));
    let server = tokio::spawn(serve(handle, n, counts.clone(), watches.clone()));
    let (tx, mut rx) = channel(16);
    let config = KubeSourceConfig {
        scope: if local {
            WatchScope::Local {
                node: "n000000".into(),
            }
        } else {
            WatchScope::Cluster
        },
        cilium_config: ConfigMapRef::cilium_config(),
        bgp_config: None,
        ipam: IpamOverride::Auto,
        retry: Retry::Fixed(Duration::from_millis(20)),
        load_balancers: false,
        slices: SliceScope::All,
        // As the daemon: only its own node's labels kept.
        own_node: Some("n000000".into()),
    };
    let client = kube::Client::new(service, "default");
    let task = tokio::spawn(async move {
        let _ = kube_source::run(client, config, tx, Arc::new(NoSink)).await;
    });
    let synced = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(u) = rx.updates.recv().await {
            if let SourceUpdate::Cluster(s) = u {
                if s.view.as_ref().is_ok_and(|v| !v.nodes.is_empty()) {
                    return true;
                }
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(synced, "the kube source never synced with {n} nodes");
    // Let the watches open.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (requests, octets) = counts
        .lock()
        .expect("counts")
        .values()
        .fold((0, 0), |(r, o), c| (r + c.requests, o + c.octets));
    // 100 other nodes change: each watch gets what its selector lets through.
    let mut churn = 0u64;
    for i in 1..=100usize.min(n.saturating_sub(1)) {
        let name = format!("n{i:06}");
        let mut obj = node(&name, "2", &["16.255.0.0/24"], json!({}));
        obj["metadata"]["resourceVersion"] = json!(format!("{}", 1 + i));
        let line = format!("{}\n", json!({"type": "MODIFIED", "object": obj}));
        for (is_nodes, selector, tx) in watches.lock().expect("watches").iter() {
            let passes = match selector
                .as_deref()
                .and_then(|s| s.strip_prefix("metadata.name="))
            {
                Some(only) => only == name,
                None => true,
            };
            if *is_nodes && passes {
                churn += line.len() as u64;
                let _ = tx.send(Ok(Bytes::from(line.clone())));
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    task.abort();
    server.abort();
    Measured {
        requests,
        octets,
        churn_octets: churn,
    }
}

pub fn run(sizes: &[usize]) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for &n in sizes {
        for local in [true, false] {
            let m = rt.block_on(measure(n, local));
            eprintln!(
                "kube n={n} {}: {} requests, {} octets, churn {} octets",
                if local { "local" } else { "cluster" },
                m.requests,
                m.octets,
                m.churn_octets
            );
            emit(json!({
                "item": "kube",
                "n": n,
                "mode": if local { "local" } else { "cluster" },
                "requests": m.requests,
                "octets": m.octets,
                "churn_octets": m.churn_octets,
            }));
        }
    }
}
