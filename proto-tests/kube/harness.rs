//! A scripted Kubernetes API server on kube-rs's mocked service (tower-test): each
//! request the watchers make is routed to a per-resource queue, where the test asserts
//! its URI and answers it with real JSON: a List, a held-open watch stream the test
//! feeds event by event, or an HTTP error.

use std::collections::HashMap;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use hyper::body::{Body, Frame};
use kube::client::Body as KubeBody;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tower_test::mock;

/// How long a test waits for something that must happen.
pub const WAIT: Duration = Duration::from_secs(5);

/// A response body: all at once, or a stream the test writes to.
pub enum TestBody {
    Full(Option<Bytes>),
    Stream(mpsc::UnboundedReceiver<Result<Bytes, std::io::Error>>),
}

impl Body for TestBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            TestBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            TestBody::Stream(rx) => rx
                .poll_recv(cx)
                .map(|item| item.map(|r| r.map(Frame::data))),
        }
    }
}

type Handle = mock::Handle<Request<KubeBody>, Response<TestBody>>;
type Responder = mock::SendResponse<Response<TestBody>>;

/// Which watcher (or publisher) a request comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    Nodes,
    CiliumNodes,
    PodIpPools,
    CiliumConfig,
    BgpConfig,
    Events,
    Secrets,
    Services,
    EndpointSlices,
    /// A Service's status subresource (the allocator's writes).
    ServiceStatus,
    /// One Service read by name (the allocator's look at one that left its watch).
    ServiceObject,
    /// coordination.k8s.io Leases (the allocator's election, doctor's look at it).
    Leases,
}

fn route(request: &Request<KubeBody>) -> Route {
    let path = request.uri().path();
    let query = request.uri().query().unwrap_or_default();
    match path {
        "/api/v1/nodes" => Route::Nodes,
        "/apis/cilium.io/v2/ciliumnodes" => Route::CiliumNodes,
        "/apis/cilium.io/v2alpha1/ciliumpodippools" => Route::PodIpPools,
        "/api/v1/services" => Route::Services,
        "/apis/discovery.k8s.io/v1/endpointslices" => Route::EndpointSlices,
        p if p.starts_with("/api/v1/namespaces/") && p.ends_with("/status") => Route::ServiceStatus,
        p if p.starts_with("/api/v1/namespaces/") && p.contains("/services/") => {
            Route::ServiceObject
        }
        p if p.starts_with("/apis/coordination.k8s.io/") => Route::Leases,
        p if p.starts_with("/apis/events.k8s.io/") => Route::Events,
        p if p.contains("/secrets") => Route::Secrets,
        p if p.ends_with("/configmaps") && query.contains("metadata.name%3Dcilium-config") => {
            Route::CiliumConfig
        }
        p if p.ends_with("/configmaps") => Route::BgpConfig,
        other => panic!("unexpected request {other}?{query}"),
    }
}

/// The test's side of the mocked API server.
pub struct MockApi {
    queues: HashMap<Route, mpsc::UnboundedReceiver<(Request<KubeBody>, Responder)>>,
    router: tokio::task::JoinHandle<()>,
}

impl Drop for MockApi {
    fn drop(&mut self) {
        self.router.abort();
    }
}

impl MockApi {
    /// A client whose every request lands in this server's queues, except those for
    /// CiliumPodIPPools, answered 404 (a cluster without multi-pool's CRD).
    pub fn start() -> (kube::Client, MockApi) {
        Self::start_with(false)
    }

    /// As [`MockApi::start`], with CiliumPodIPPool requests queued for the test too.
    pub fn start_with_pools() -> (kube::Client, MockApi) {
        Self::start_with(true)
    }

    fn start_with(pools: bool) -> (kube::Client, MockApi) {
        let (service, handle) = mock::pair::<Request<KubeBody>, Response<TestBody>>();
        let mut senders = HashMap::new();
        let mut queues = HashMap::new();
        for r in [
            Route::Nodes,
            Route::CiliumNodes,
            Route::PodIpPools,
            Route::CiliumConfig,
            Route::BgpConfig,
            Route::Events,
            Route::Secrets,
            Route::Services,
            Route::EndpointSlices,
            Route::ServiceStatus,
            Route::ServiceObject,
            Route::Leases,
        ] {
            let (tx, rx) = mpsc::unbounded_channel();
            senders.insert(r, tx);
            queues.insert(r, rx);
        }
        let router = tokio::spawn(serve(handle, senders, pools));
        (
            kube::Client::new(service, "default"),
            MockApi { queues, router },
        )
    }

    /// The next request of `route`; fails the test if none comes in time.
    pub async fn next(&mut self, route: Route) -> Call {
        let queue = self.queues.get_mut(&route).expect("route queue");
        let (request, responder) = tokio::time::timeout(WAIT, queue.recv())
            .await
            .unwrap_or_else(|_| panic!("no {route:?} request within {WAIT:?}"))
            .expect("router stopped");
        Call { request, responder }
    }

    /// The next request of `route` if one is waiting.
    #[allow(dead_code)] // the allocate tests' (this file is shared through #[path])
    pub fn try_next(&mut self, route: Route) -> Option<Call> {
        let queue = self.queues.get_mut(&route).expect("route queue");
        queue
            .try_recv()
            .ok()
            .map(|(request, responder)| Call { request, responder })
    }

    /// No request of `route` is waiting.
    pub fn idle(&mut self, route: Route) -> bool {
        self.queues
            .get_mut(&route)
            .expect("route queue")
            .try_recv()
            .is_err()
    }
}

async fn serve(
    mut handle: Handle,
    senders: HashMap<Route, mpsc::UnboundedSender<(Request<KubeBody>, Responder)>>,
    pools: bool,
) {
    while let Some((request, responder)) = handle.next_request().await {
        let r = route(&request);
        if r == Route::PodIpPools && !pools {
            Call { request, responder }.status_error(404, "NotFound");
            continue;
        }
        if senders[&r].send((request, responder)).is_err() {
            return;
        }
    }
}

/// One request to answer.
pub struct Call {
    pub request: Request<KubeBody>,
    responder: Responder,
}

impl Call {
    pub fn uri(&self) -> String {
        self.request.uri().to_string()
    }

    #[allow(dead_code)] // the allocate tests'
    pub fn method(&self) -> String {
        self.request.method().to_string()
    }

    #[allow(dead_code)] // the allocate tests'
    pub fn header(&self, name: &str) -> Option<String> {
        self.request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    /// The query parameters, decoded, as (key, value) pairs.
    pub fn query(&self) -> Vec<(String, String)> {
        let query = self.request.uri().query().unwrap_or_default();
        query
            .split('&')
            .filter(|kv| !kv.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (k.to_owned(), percent_decoded(v))
            })
            .collect()
    }

    pub fn param(&self, key: &str) -> Option<String> {
        self.query()
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    pub fn is_watch(&self) -> bool {
        self.param("watch").as_deref() == Some("true")
    }

    /// Answers a list request with `items` at `resource_version`.
    pub fn list(self, kind: &str, api_version: &str, items: Vec<Value>, resource_version: &str) {
        assert!(!self.is_watch(), "expected a list, got {}", self.uri());
        let body = json!({
            "kind": format!("{kind}List"),
            "apiVersion": api_version,
            "metadata": {"resourceVersion": resource_version},
            "items": items,
        });
        self.json(StatusCode::OK, &body);
    }

    /// Answers a watch request with a stream the test feeds.
    pub fn watch(self) -> WatchStream {
        assert!(self.is_watch(), "expected a watch, got {}", self.uri());
        self.stream()
    }

    /// Answers 200 with a body that breaks before its first byte (a connection reset).
    pub fn broken(self) {
        self.stream().fail();
    }

    /// Answers 200 with a body the returned stream feeds.
    fn stream(self) -> WatchStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let response = Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(TestBody::Stream(rx))
            .expect("response");
        self.responder.send_response(response);
        WatchStream { tx }
    }

    /// Answers with an API error Status.
    pub fn status_error(self, code: u16, reason: &str) {
        let body = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": format!("mock {reason}"),
            "reason": reason, "code": code,
        });
        self.json(StatusCode::from_u16(code).expect("status code"), &body);
    }

    pub fn json(self, status: StatusCode, body: &Value) {
        let response = Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(TestBody::Full(Some(Bytes::from(body.to_string()))))
            .expect("response");
        self.responder.send_response(response);
    }

    /// The request body as JSON (POST/PATCH).
    pub async fn body_json(&mut self) -> Value {
        let body = std::mem::replace(self.request.body_mut(), KubeBody::empty());
        let bytes = body.collect_bytes().await.expect("request body");
        serde_json::from_slice(&bytes).expect("request body is json")
    }
}

/// A query value as sent (`application/x-www-form-urlencoded`), decoded.
fn percent_decoded(value: &str) -> String {
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
    String::from_utf8(out).expect("utf-8 query")
}

/// A held-open watch response.
pub struct WatchStream {
    tx: mpsc::UnboundedSender<Result<Bytes, std::io::Error>>,
}

impl WatchStream {
    pub fn event(&self, kind: &str, object: Value) {
        let line = format!("{}\n", json!({"type": kind, "object": object}));
        // The watcher may have gone away (the test is checking that it does not matter).
        let _ = self.tx.send(Ok(Bytes::from(line)));
    }

    pub fn added(&self, object: Value) {
        self.event("ADDED", object);
    }

    pub fn modified(&self, object: Value) {
        self.event("MODIFIED", object);
    }

    pub fn deleted(&self, object: Value) {
        self.event("DELETED", object);
    }

    pub fn bookmark(&self, kind: &str, api_version: &str, resource_version: &str) {
        self.event(
            "BOOKMARK",
            json!({"kind": kind, "apiVersion": api_version,
                   "metadata": {"resourceVersion": resource_version}}),
        );
    }

    /// The apiserver's "resource version too old" watch error.
    pub fn gone(&self) {
        self.event(
            "ERROR",
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                   "status": "Failure", "message": "too old resource version: 1 (2)",
                   "reason": "Expired", "code": 410}),
        );
    }

    /// A raw line (for undecodable events).
    pub fn raw(&self, line: &str) {
        let _ = self.tx.send(Ok(Bytes::from(format!("{line}\n"))));
    }

    /// The connection breaks mid-stream.
    pub fn fail(self) {
        let _ = self.tx.send(Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "mock connection reset",
        )));
    }

    /// The server ends the watch (timeout).
    pub fn close(self) {}

    /// The watcher dropped this response (its stream was stopped).
    pub async fn dropped(&self) -> bool {
        tokio::time::timeout(WAIT, self.tx.closed()).await.is_ok()
    }
}

/// A Node as the API returns it.
pub fn node(name: &str, rv: &str, pod_cidrs: &[&str], labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": rv,
                     "labels": labels},
        "spec": {"podCIDR": pod_cidrs.first(), "podCIDRs": pod_cidrs},
        "status": {"addresses": [
            {"type": "InternalIP", "address": format!("192.168.10.{}", 10 + name.len())},
            {"type": "Hostname", "address": name}
        ]}
    })
}

/// A CiliumNode as the API returns it (with fields we ignore).
pub fn cilium_node(name: &str, rv: &str, pod_cidrs: &[&str]) -> Value {
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {"name": name, "resourceVersion": rv},
        "spec": {
            "addresses": [{"type": "InternalIP", "ip": "192.168.10.1"}],
            "ipam": {"podCIDRs": pod_cidrs},
            "health": {}
        },
        "status": {"ipam": {}}
    })
}

/// A CiliumPodIPPool as the API returns it.
pub fn pod_ip_pool(name: &str, rv: &str, ipv4: &[&str], ipv6: &[&str]) -> Value {
    let mut spec = serde_json::Map::new();
    if !ipv4.is_empty() {
        spec.insert("ipv4".into(), json!({"cidrs": ipv4, "maskSize": 27}));
    }
    if !ipv6.is_empty() {
        spec.insert("ipv6".into(), json!({"cidrs": ipv6, "maskSize": 120}));
    }
    json!({
        "apiVersion": "cilium.io/v2alpha1", "kind": "CiliumPodIPPool",
        "metadata": {"name": name, "resourceVersion": rv, "uid": format!("uid-pool-{name}")},
        "spec": spec
    })
}

/// A CiliumNode of a multi-pool cluster as the API returns it: what the agent
/// requested and the operator allocated, per pool.
pub fn multi_pool_node(name: &str, rv: &str, allocated: &[(&str, &[&str])]) -> Value {
    let allocated: Vec<Value> = allocated
        .iter()
        .map(|(pool, cidrs)| json!({"pool": pool, "cidrs": cidrs}))
        .collect();
    let requested: Vec<Value> = allocated
        .iter()
        .map(|a| json!({"pool": a["pool"], "needed": {"ipv4-addrs": 16, "ipv6-addrs": 16}}))
        .collect();
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {"name": name, "resourceVersion": rv,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                          "uid": format!("uid-{name}")}]},
        "spec": {
            "addresses": [{"type": "InternalIP", "ip": "192.168.10.1"},
                          {"type": "CiliumInternalIP", "ip": "10.10.0.1"}],
            "alibaba-cloud": {}, "azure": {}, "encryption": {}, "eni": {},
            "health": {"ipv4": "10.10.0.2"},
            "ipam": {"pools": {"allocated": allocated, "requested": requested}}
        },
        "status": {"alibaba-cloud": {}, "azure": {}, "eni": {}, "ipam": {"operator-status": {}}}
    })
}

pub fn config_map(namespace: &str, name: &str, rv: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv},
        "data": data
    })
}

/// A Secret as the API returns it: `data` base64-encoded, as on the wire.
pub fn secret(namespace: &str, name: &str, rv: &str, data_base64: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv},
        "data": data_base64
    })
}

/// A Service as the API server returns it: server-set metadata, cluster IPs, node
/// ports, and `status.loadBalancer.ingress` as an allocator writes it.
pub fn service(
    namespace: &str,
    name: &str,
    rv: &str,
    type_: &str,
    policy: &str,
    ingress_ips: &[&str],
) -> Value {
    let ingress: Vec<Value> = ingress_ips
        .iter()
        .map(|ip| json!({"ip": ip, "ipMode": "VIP"}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": name, "namespace": namespace, "resourceVersion": rv,
            "uid": format!("uid-svc-{name}"), "creationTimestamp": "2026-11-20T08:00:00Z",
            "labels": {"app": name},
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                "apiVersion": "v1", "time": "2026-11-20T08:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:type": {}}}}]
        },
        "spec": {
            "type": type_, "externalTrafficPolicy": policy,
            "clusterIP": "10.96.40.7", "clusterIPs": ["10.96.40.7"],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster", "sessionAffinity": "None",
            "allocateLoadBalancerNodePorts": true,
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080,
                "nodePort": 30080}],
            "selector": {"app": name}
        },
        "status": {"loadBalancer": {"ingress": ingress}}
    })
}

/// An EndpointSlice as the EndpointSlice controller writes it: one endpoint per
/// `(node, ready, terminating)`.
pub fn endpoint_slice(
    namespace: &str,
    name: &str,
    rv: &str,
    service: &str,
    endpoints: &[(&str, bool, bool)],
) -> Value {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .enumerate()
        .map(|(i, (node, ready, terminating))| {
            json!({
                "addresses": [format!("10.244.7.{}", i + 1)],
                "conditions": {"ready": ready, "serving": *ready || *terminating,
                    "terminating": terminating},
                "nodeName": node, "zone": "rack-a",
                "targetRef": {"kind": "Pod", "namespace": namespace,
                    "name": format!("{service}-{i}"), "uid": format!("uid-pod-{i}")}
            })
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "name": name, "namespace": namespace, "resourceVersion": rv,
            "generateName": format!("{service}-"), "uid": format!("uid-eps-{name}"),
            "labels": {"kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
            "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2026-11-20T08:00:01Z"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": service,
                "uid": format!("uid-svc-{service}"), "controller": true,
                "blockOwnerDeletion": true}]
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints
    })
}
