//! A small, stateful Kubernetes API emulation for tests of the `allocate` role: an
//! HTTP/1.1 server on 127.0.0.1 in the test process that a real `podcidr-speaker`
//! process (or a kube-rs client) reaches through a kubeconfig file.
//!
//! It keeps Services, Leases, ConfigMaps and Events as JSON, one resourceVersion counter
//! for all of them (as etcd's), and serves: lists (with the `metadata.name` and
//! `spec.type` field selectors; any other selector is refused with 400, so a test can
//! never pass on a filter silently ignored), watches from a resourceVersion with
//! ADDED/MODIFIED/DELETED fanned out to every matching watch (an object that starts
//! matching a field selector is ADDED to that watch; one that stops is DELETED from it
//! with its previous content at the new resourceVersion, as the API server's watch
//! cache sends it), get, create (409 AlreadyExists), replace (409 Conflict on a stale
//! `metadata.resourceVersion`), JSON merge patch of an object or of its `/status`
//! (the same precondition when the patch carries `metadata.resourceVersion`; the status
//! subresource changes only `status`, the object itself everything but `status`), and
//! delete. Every write is recorded with who made it: the bearer token of the client's
//! kubeconfig (one per process: [`ApiServer::kubeconfig`]).
//!
//! Watches without a resourceVersion start with every selected object as ADDED (with
//! `sendInitialEvents=true`, ended by the bookmark kube-rs' streaming lists wait for).
//! Not emulated: authorization, admission, pagination (a list is one page), label
//! selectors (refused), other bookmarks, server-side apply.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The kinds served, by their resource path segment.
pub const RESOURCES: [&str; 4] = ["services", "leases", "configmaps", "events"];

/// An API error: the status code and the `reason` of its Status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
        }
    }

    fn not_found(key: &Key) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", key.resource, key.name),
        )
    }

    pub fn status(&self) -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": self.message, "reason": self.reason, "code": self.code})
    }
}

/// An object's identity.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

impl Key {
    pub fn new(resource: &str, namespace: &str, name: &str) -> Self {
        Self {
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// Which objects a list or watch selects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    pub resource: String,
    /// `None`: every namespace.
    pub namespace: Option<String>,
    /// `metadata.name=`.
    pub name: Option<String>,
    /// `spec.type=`.
    pub service_type: Option<String>,
}

impl Selector {
    /// The selector of a list or watch URL; unknown selectors are refused.
    pub fn parse(
        resource: &str,
        namespace: Option<&str>,
        query: &str,
    ) -> Result<Selector, ApiError> {
        let mut selector = Selector {
            resource: resource.into(),
            namespace: namespace.map(str::to_owned),
            ..Selector::default()
        };
        if param(query, "labelSelector").is_some_and(|l| !l.is_empty()) {
            return Err(ApiError::new(
                400,
                "BadRequest",
                "label selectors are not emulated",
            ));
        }
        let Some(fields) = param(query, "fieldSelector") else {
            return Ok(selector);
        };
        for term in fields.split(',').filter(|t| !t.is_empty()) {
            match term.split_once('=') {
                Some(("metadata.name", v)) => selector.name = Some(v.into()),
                Some(("spec.type", v)) if resource == "services" => {
                    selector.service_type = Some(v.into())
                }
                _ => {
                    return Err(ApiError::new(
                        400,
                        "BadRequest",
                        format!("field label not supported: {term}"),
                    ))
                }
            }
        }
        Ok(selector)
    }

    pub fn matches(&self, key: &Key, object: &Value) -> bool {
        key.resource == self.resource
            && self.namespace.as_ref().is_none_or(|n| *n == key.namespace)
            && self.name.as_ref().is_none_or(|n| *n == key.name)
            && self
                .service_type
                .as_ref()
                .is_none_or(|t| object["spec"]["type"].as_str().unwrap_or("ClusterIP") == t)
    }
}

/// One change, as a watch sends it.
#[derive(Clone, Debug)]
pub struct Change {
    pub resource_version: u64,
    pub kind: &'static str,
    pub key: Key,
    /// The object before (`None` when created).
    pub before: Option<Value>,
    /// The object after (`None` when deleted).
    pub after: Option<Value>,
}

impl Change {
    /// The watch event `selector`'s watch gets for this change, if any.
    pub fn event_for(&self, selector: &Selector) -> Option<Value> {
        let was = self
            .before
            .as_ref()
            .is_some_and(|o| selector.matches(&self.key, o));
        let is = self
            .after
            .as_ref()
            .is_some_and(|o| selector.matches(&self.key, o));
        let (kind, object) = match (was, is) {
            (false, true) => ("ADDED", self.after.clone()?),
            (true, true) => ("MODIFIED", self.after.clone()?),
            // Deleted, or no longer selected: as the API server's watch cache sends it,
            // the last content the watch selected, at the change's resourceVersion.
            (true, false) => {
                let mut last = self.before.clone()?;
                last["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
                ("DELETED", last)
            }
            (false, false) => return None,
        };
        Some(json!({"type": kind, "object": object}))
    }
}

/// A write request, as recorded.
#[derive(Clone, Debug)]
pub struct WriteRecord {
    /// The bearer token of the writer's kubeconfig (empty: none).
    pub who: String,
    pub method: String,
    pub path: String,
    /// The answer's status code.
    pub code: u16,
    pub at: Instant,
}

/// A request of any kind, as recorded (what RBAC would be asked to allow).
#[derive(Clone, Debug)]
pub struct RequestRecord {
    /// The bearer token of the client's kubeconfig (empty: none).
    pub who: String,
    pub method: String,
    pub path: String,
    pub query: String,
}

/// The objects and their history: the pure part, whose rules the unit tests check.
#[derive(Default)]
pub struct Store {
    resource_version: u64,
    objects: BTreeMap<Key, Value>,
    history: Vec<Change>,
    names: u64,
}

impl Store {
    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub fn get(&self, key: &Key) -> Result<Value, ApiError> {
        self.objects
            .get(key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(key))
    }

    pub fn list(&self, selector: &Selector) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|(k, o)| selector.matches(k, o))
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// Changes after `resource_version` (a watch's start).
    pub fn since(&self, resource_version: u64) -> impl Iterator<Item = &Change> {
        self.history
            .iter()
            .filter(move |c| c.resource_version > resource_version)
    }

    /// POST: the name from `metadata.name` (or `generateName` plus a suffix).
    pub fn create(
        &mut self,
        resource: &str,
        namespace: &str,
        mut object: Value,
    ) -> Result<Value, ApiError> {
        if !object.is_object() {
            return Err(ApiError::new(
                400,
                "BadRequest",
                "the body is not an object",
            ));
        }
        let name = match object["metadata"]["name"].as_str() {
            Some(n) if !n.is_empty() => n.to_owned(),
            _ => match object["metadata"]["generateName"].as_str() {
                Some(prefix) => {
                    self.names += 1;
                    format!("{prefix}{:05x}", self.names)
                }
                None => {
                    return Err(ApiError::new(
                        422,
                        "Invalid",
                        "metadata.name: Required value",
                    ))
                }
            },
        };
        let key = Key::new(resource, namespace, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::new(
                409,
                "AlreadyExists",
                format!("{resource} \"{name}\" already exists"),
            ));
        }
        object["metadata"]["name"] = json!(name);
        object["metadata"]["namespace"] = json!(namespace);
        object["metadata"]["uid"] = json!(format!("uid-{resource}-{namespace}-{name}"));
        Ok(self.commit(key, "ADDED", object))
    }

    /// PUT: the whole object, on condition of `metadata.resourceVersion` when it is set.
    pub fn replace(&mut self, key: &Key, mut object: Value) -> Result<Value, ApiError> {
        let current = self.get(key)?;
        precondition(key, &current, &object)?;
        object["metadata"]["name"] = json!(key.name);
        object["metadata"]["namespace"] = json!(key.namespace);
        object["metadata"]["uid"] = current["metadata"]["uid"].clone();
        // The status subresource is not written through the object, and vice versa.
        if key.resource == "services" {
            object["status"] = current["status"].clone();
        }
        Ok(self.commit(key.clone(), "MODIFIED", object))
    }

    /// PATCH with a JSON merge patch (RFC 7396), of the object or its `/status`.
    pub fn merge_patch(
        &mut self,
        key: &Key,
        patch: &Value,
        status: bool,
    ) -> Result<Value, ApiError> {
        let current = self.get(key)?;
        precondition(key, &current, patch)?;
        let mut object = current.clone();
        if status {
            let mut s = object["status"].take();
            if let Some(p) = patch.get("status") {
                merge(&mut s, p);
            }
            object["status"] = s;
        } else {
            let kept = object["status"].take();
            merge(&mut object, patch);
            if key.resource == "services" {
                object["status"] = kept;
            }
        }
        if object == current {
            // The API server writes nothing for a no-op patch: no new version, no event.
            return Ok(current);
        }
        Ok(self.commit(key.clone(), "MODIFIED", object))
    }

    pub fn delete(&mut self, key: &Key) -> Result<Value, ApiError> {
        let before = self
            .objects
            .remove(key)
            .ok_or_else(|| ApiError::not_found(key))?;
        self.resource_version += 1;
        self.history.push(Change {
            resource_version: self.resource_version,
            kind: "DELETED",
            key: key.clone(),
            before: Some(before.clone()),
            after: None,
        });
        Ok(before)
    }

    fn commit(&mut self, key: Key, kind: &'static str, mut object: Value) -> Value {
        self.resource_version += 1;
        object["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
        let before = self.objects.insert(key.clone(), object.clone());
        self.history.push(Change {
            resource_version: self.resource_version,
            kind,
            key,
            before,
            after: Some(object.clone()),
        });
        object
    }
}

/// The optimistic concurrency rule: a write naming a resourceVersion other than the
/// current one is refused.
fn precondition(key: &Key, current: &Value, body: &Value) -> Result<(), ApiError> {
    match body["metadata"]["resourceVersion"].as_str() {
        Some(rv) if !rv.is_empty() && Some(rv) != current["metadata"]["resourceVersion"].as_str() => {
            Err(ApiError::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your changes to the latest version and try again",
                    key.resource, key.name
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// RFC 7396: objects merge member by member, `null` removes, anything else replaces.
fn merge(target: &mut Value, patch: &Value) {
    let Some(members) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let Some(object) = target.as_object_mut() else {
        return;
    };
    for (k, v) in members {
        if v.is_null() {
            object.remove(k);
        } else {
            merge(object.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// A query parameter, percent-decoded.
pub fn param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then(|| decoded(v))
    })
}

fn decoded(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => out.push(b),
                    Err(_) => out.extend_from_slice(&bytes[i..i + 3]),
                }
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
    String::from_utf8_lossy(&out).into_owned()
}

/// A request's target: the resource, its namespace, the object's name, `/status`.
#[derive(Debug, PartialEq, Eq)]
pub struct Target {
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub status: bool,
}

impl Target {
    /// `/api/v1/...` and `/apis/GROUP/VERSION/...` paths of the resources served.
    pub fn parse(path: &str) -> Option<Target> {
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let rest = match parts.as_slice() {
            ["api", "v1", rest @ ..] => rest,
            ["apis", "coordination.k8s.io", "v1", rest @ ..] => rest,
            ["apis", "events.k8s.io", "v1", rest @ ..] => rest,
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
            rest => (None, rest),
        };
        let (resource, name, status) = match rest {
            [r] => (r, None, false),
            [r, n] => (r, Some(n.to_string()), false),
            [r, n, "status"] => (r, Some(n.to_string()), true),
            _ => return None,
        };
        if !RESOURCES.contains(resource) || (name.is_some() && namespace.is_none()) {
            return None;
        }
        if status && *resource != "services" {
            return None;
        }
        Some(Target {
            resource: resource.to_string(),
            namespace,
            name,
            status,
        })
    }
}

struct Shared {
    store: Store,
    watches: Vec<(Selector, mpsc::UnboundedSender<String>)>,
    writes: Vec<WriteRecord>,
    requests: Vec<RequestRecord>,
}

impl Shared {
    /// Sends the changes since `from` to every open watch that selects them.
    fn fan_out(&mut self, from: u64) {
        self.watches.retain(|(_, tx)| !tx.is_closed());
        for change in self.store.since(from) {
            for (selector, tx) in &self.watches {
                if let Some(event) = change.event_for(selector) {
                    let _ = tx.send(format!("{event}\n"));
                }
            }
        }
    }
}

/// The emulation served from a runtime of its own, for tests whose own code blocks
/// (they start the speaker's processes and wait on them). Dropped: the server stops,
/// then its runtime (fields drop in this order).
pub struct ServedApi {
    api: ApiServer,
    _runtime: tokio::runtime::Runtime,
}

impl ServedApi {
    pub fn start() -> ServedApi {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("the emulation's runtime");
        let api = runtime.block_on(ApiServer::start());
        ServedApi {
            api,
            _runtime: runtime,
        }
    }
}

impl std::ops::Deref for ServedApi {
    type Target = ApiServer;

    fn deref(&self) -> &ApiServer {
        &self.api
    }
}

/// The running emulation. Dropped: it stops serving (its open watches end).
pub struct ApiServer {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ApiServer {
    pub async fn start() -> ApiServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let shared = Arc::new(Mutex::new(Shared {
            store: Store::default(),
            watches: Vec::new(),
            writes: Vec::new(),
            requests: Vec::new(),
        }));
        let served = shared.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((sock, _)) = listener.accept().await {
                connections.spawn(connection(sock, served.clone()));
            }
        });
        ApiServer { addr, shared, task }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Writes a kubeconfig for a client named `who` (its bearer token, which the writes
    /// are recorded under) into `dir`; returns its path.
    pub fn kubeconfig(&self, dir: &Path, who: &str) -> PathBuf {
        let path = dir.join(format!("kubeconfig-{who}"));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: emulation\n  cluster:\n    server: http://{}\ncontexts:\n- name: emulation\n  context:\n    cluster: emulation\n    user: {who}\n    namespace: default\ncurrent-context: emulation\nusers:\n- name: {who}\n  user:\n    token: {who}\n",
            self.addr
        );
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }

    fn with<T>(&self, f: impl FnOnce(&mut Shared) -> T) -> T {
        let mut shared = self.shared.lock().expect("emulation state");
        let from = shared.store.resource_version();
        let out = f(&mut shared);
        shared.fan_out(from);
        out
    }

    /// The test's own writes (not recorded as anyone's).
    pub fn create(
        &self,
        resource: &str,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        self.with(|s| s.store.create(resource, namespace, object))
    }

    pub fn replace(&self, key: &Key, object: Value) -> Result<Value, ApiError> {
        self.with(|s| s.store.replace(key, object))
    }

    pub fn patch(&self, key: &Key, patch: &Value) -> Result<Value, ApiError> {
        self.with(|s| s.store.merge_patch(key, patch, false))
    }

    pub fn delete(&self, key: &Key) -> Result<Value, ApiError> {
        self.with(|s| s.store.delete(key))
    }

    pub fn get(&self, key: &Key) -> Option<Value> {
        self.with(|s| s.store.get(key).ok())
    }

    pub fn list(&self, resource: &str) -> Vec<Value> {
        self.with(|s| {
            s.store.list(&Selector {
                resource: resource.into(),
                ..Selector::default()
            })
        })
    }

    /// Every write request so far, in order.
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.with(|s| s.writes.clone())
    }

    /// Every request so far (reads, watches and writes), in order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.with(|s| s.requests.clone())
    }

    /// The open watches (for a test waiting until a client watches).
    pub fn watching(&self, resource: &str) -> usize {
        self.with(|s| {
            s.watches
                .iter()
                .filter(|(sel, tx)| sel.resource == resource && !tx.is_closed())
                .count()
        })
    }
}

/// What one request gets: a full answer, or a watch.
enum Answer {
    Full(u16, Value),
    Watch(
        Vec<String>,
        mpsc::UnboundedReceiver<String>,
        Option<Duration>,
    ),
}

fn handle(
    shared: &Mutex<Shared>,
    method: &str,
    path: &str,
    query: &str,
    who: &str,
    body: &[u8],
) -> Answer {
    let mut s = shared.lock().expect("emulation state");
    s.requests.push(RequestRecord {
        who: who.into(),
        method: method.into(),
        path: path.into(),
        query: query.into(),
    });
    let from = s.store.resource_version();
    let answer = route(&mut s, method, path, query, body);
    if method != "GET" {
        let code = match &answer {
            Ok(Answer::Full(code, _)) => *code,
            Ok(Answer::Watch(..)) => 200,
            Err(e) => e.code,
        };
        s.writes.push(WriteRecord {
            who: who.into(),
            method: method.into(),
            path: path.into(),
            code,
            at: Instant::now(),
        });
    }
    s.fan_out(from);
    answer.unwrap_or_else(|e| Answer::Full(e.code, e.status()))
}

fn route(
    s: &mut Shared,
    method: &str,
    path: &str,
    query: &str,
    body: &[u8],
) -> Result<Answer, ApiError> {
    let target = Target::parse(path)
        .ok_or_else(|| ApiError::new(404, "NotFound", format!("{path}: not served")))?;
    let parsed = || -> Result<Value, ApiError> {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::new(400, "BadRequest", format!("body: {e}")))
    };
    let key = |name: &String| {
        Key::new(
            &target.resource,
            target.namespace.as_deref().unwrap_or_default(),
            name,
        )
    };
    let ok = |v: Value| Answer::Full(200, v);
    match (method, &target.name) {
        ("GET", None) => {
            let selector = Selector::parse(&target.resource, target.namespace.as_deref(), query)?;
            if param(query, "watch").as_deref() == Some("true") {
                let from = match param(query, "resourceVersion").as_deref() {
                    None | Some("") | Some("0") => None,
                    Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                        ApiError::new(400, "BadRequest", format!("resourceVersion {rv:?}"))
                    })?),
                };
                // From a version: what happened since; without one: the objects as ADDED.
                let backlog: Vec<String> = match from {
                    Some(rv) => s
                        .store
                        .since(rv)
                        .filter_map(|c| c.event_for(&selector))
                        .map(|e| format!("{e}\n"))
                        .collect(),
                    None => {
                        let mut added: Vec<String> = s
                            .store
                            .list(&selector)
                            .into_iter()
                            .map(|o| format!("{}\n", json!({"type": "ADDED", "object": o})))
                            .collect();
                        // A streaming list (kube-rs `streaming_lists()`): the end of the
                        // initial events is a bookmark saying so.
                        if param(query, "sendInitialEvents").as_deref() == Some("true") {
                            let end = json!({"type": "BOOKMARK", "object": {
                                "kind": kind(&target.resource), "apiVersion": "v1",
                                "metadata": {
                                    "resourceVersion": s.store.resource_version().to_string(),
                                    "annotations": {"k8s.io/initial-events-end": "true"}}}});
                            added.push(format!("{end}\n"));
                        }
                        added
                    }
                };
                let (tx, rx) = mpsc::unbounded_channel();
                s.watches.push((selector, tx));
                let timeout = param(query, "timeoutSeconds")
                    .and_then(|t| t.parse().ok())
                    .map(Duration::from_secs);
                return Ok(Answer::Watch(backlog, rx, timeout));
            }
            let items = s.store.list(&selector);
            Ok(ok(json!({
                "kind": format!("{}List", kind(&target.resource)), "apiVersion": "v1",
                "metadata": {"resourceVersion": s.store.resource_version().to_string()},
                "items": items,
            })))
        }
        ("GET", Some(name)) if !target.status => s.store.get(&key(name)).map(ok),
        ("POST", None) => {
            let ns = target.namespace.clone().ok_or_else(|| {
                ApiError::new(405, "MethodNotAllowed", "create needs a namespace")
            })?;
            s.store
                .create(&target.resource, &ns, parsed()?)
                .map(|v| Answer::Full(201, v))
        }
        ("PUT", Some(name)) if !target.status => s.store.replace(&key(name), parsed()?).map(ok),
        ("PATCH", Some(name)) => s
            .store
            .merge_patch(&key(name), &parsed()?, target.status)
            .map(ok),
        ("DELETE", Some(name)) if !target.status => s.store.delete(&key(name)).map(ok),
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{method} {path}: not emulated"),
        )),
    }
}

/// The kind of a resource served.
fn kind(resource: &str) -> &'static str {
    match resource {
        "services" => "Service",
        "leases" => "Lease",
        "configmaps" => "ConfigMap",
        _ => "Event",
    }
}

struct Head {
    method: String,
    target: String,
    length: usize,
    who: String,
    content_type: String,
}

async fn read_head(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Head> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let mut lines = head.lines();
            let mut first = lines.next()?.split(' ');
            let method = first.next()?.to_owned();
            let target = first.next()?.to_owned();
            let mut h = Head {
                method,
                target,
                length: 0,
                who: String::new(),
                content_type: String::new(),
            };
            for (k, v) in lines.filter_map(|l| l.split_once(':')) {
                let v = v.trim();
                if k.eq_ignore_ascii_case("content-length") {
                    h.length = v.parse().ok()?;
                } else if k.eq_ignore_ascii_case("authorization") {
                    h.who = v.strip_prefix("Bearer ").unwrap_or(v).to_owned();
                } else if k.eq_ignore_ascii_case("content-type") {
                    h.content_type = v.to_owned();
                }
            }
            return Some(h);
        }
        let mut chunk = [0u8; 8192];
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn connection(mut sock: TcpStream, shared: Arc<Mutex<Shared>>) -> std::io::Result<()> {
    let _ = sock.set_nodelay(true);
    let mut buf = Vec::new();
    while let Some(head) = read_head(&mut sock, &mut buf).await {
        while buf.len() < head.length {
            let mut chunk = [0u8; 8192];
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body: Vec<u8> = buf.drain(..head.length).collect();
        let (path, query) = head.target.split_once('?').unwrap_or((&head.target, ""));
        let answer = if head.method == "PATCH"
            && !head
                .content_type
                .starts_with("application/merge-patch+json")
        {
            let e = ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "only JSON merge patches are emulated, not {}",
                    head.content_type
                ),
            );
            Answer::Full(415, e.status())
        } else {
            handle(&shared, &head.method, path, query, &head.who, &body)
        };
        match answer {
            Answer::Full(code, value) => {
                let body = value.to_string();
                let out = format!(
                    "HTTP/1.1 {code} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    reason(code),
                    body.len()
                );
                sock.write_all(out.as_bytes()).await?;
            }
            Answer::Watch(backlog, mut rx, timeout) => {
                sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
                    .await?;
                for line in backlog {
                    write_chunk(&mut sock, &line).await?;
                }
                let end = tokio::time::sleep(timeout.unwrap_or(Duration::from_secs(3600)));
                tokio::pin!(end);
                let mut scratch = [0u8; 1024];
                loop {
                    tokio::select! {
                        line = rx.recv() => match line {
                            Some(line) => write_chunk(&mut sock, &line).await?,
                            None => return Ok(()),
                        },
                        n = sock.read(&mut scratch) => {
                            if matches!(n, Ok(0) | Err(_)) {
                                return Ok(());
                            }
                        }
                        () = &mut end => break,
                    }
                }
                // The server ends the watch (timeoutSeconds): the last chunk.
                sock.write_all(b"0\r\n\r\n").await?;
            }
        }
    }
    Ok(())
}

async fn write_chunk(sock: &mut TcpStream, line: &str) -> std::io::Result<()> {
    let out = format!("{:x}\r\n{line}\r\n", line.len());
    sock.write_all(out.as_bytes()).await
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        _ => "Error",
    }
}

/// A LoadBalancer Service as a user creates it.
pub fn load_balancer(namespace: &str, name: &str, port: u16) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"type": "LoadBalancer", "selector": {"app": name},
                 "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
                 "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"},
        "status": {"loadBalancer": {}}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str) -> Key {
        Key::new("services", "default", name)
    }

    fn store_with(names: &[&str]) -> Store {
        let mut s = Store::default();
        for n in names {
            s.create("services", "default", load_balancer("default", n, 80))
                .unwrap();
        }
        s
    }

    #[test]
    fn create_twice_is_already_exists_and_versions_grow() {
        let mut s = store_with(&["a"]);
        assert_eq!(
            s.get(&svc("a")).unwrap()["metadata"]["resourceVersion"],
            "1"
        );
        let e = s
            .create("services", "default", load_balancer("default", "a", 80))
            .unwrap_err();
        assert_eq!((e.code, e.reason), (409, "AlreadyExists"));
        let b = s
            .create("services", "default", load_balancer("default", "b", 80))
            .unwrap();
        assert_eq!(b["metadata"]["resourceVersion"], "2");
        let e = s
            .create("leases", "ns", json!({"metadata": {}}))
            .unwrap_err();
        assert_eq!(e.code, 422);
        let g = s
            .create("events", "ns", json!({"metadata": {"generateName": "x."}}))
            .unwrap();
        assert!(g["metadata"]["name"].as_str().unwrap().starts_with("x."));
    }

    #[test]
    fn replace_and_patch_with_a_stale_version_conflict() {
        let mut s = Store::default();
        let lease = s
            .create(
                "leases",
                "ns",
                json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}),
            )
            .unwrap();
        let key = Key::new("leases", "ns", "l");
        let mut mine = lease.clone();
        mine["spec"]["holderIdentity"] = json!("b");
        let written = s.replace(&key, mine.clone()).unwrap();
        assert_eq!(written["metadata"]["resourceVersion"], "2");
        // The same write again, with the version it read (1): somebody wrote since.
        let e = s.replace(&key, mine).unwrap_err();
        assert_eq!((e.code, e.reason), (409, "Conflict"));
        assert_eq!(s.get(&key).unwrap()["spec"]["holderIdentity"], "b");
        // No version: unconditional.
        let mut blind = written.clone();
        blind["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        assert!(s.replace(&key, blind).is_ok());
        assert_eq!(
            s.replace(&Key::new("leases", "ns", "x"), lease)
                .unwrap_err()
                .code,
            404
        );

        let mut s = store_with(&["a"]);
        let status = |ip: &str, rv: &str| {
            json!({"metadata": {"resourceVersion": rv},
                   "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}})
        };
        let patched = s
            .merge_patch(&svc("a"), &status("10.0.0.1", "1"), true)
            .unwrap();
        assert_eq!(
            patched["status"]["loadBalancer"]["ingress"][0]["ip"],
            "10.0.0.1"
        );
        assert_eq!(patched["metadata"]["resourceVersion"], "2");
        let e = s
            .merge_patch(&svc("a"), &status("10.0.0.2", "1"), true)
            .unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(
            s.get(&svc("a")).unwrap()["status"]["loadBalancer"]["ingress"][0]["ip"],
            "10.0.0.1",
            "a refused patch changes nothing"
        );
    }

    #[test]
    fn the_status_subresource_and_the_object_write_only_their_part() {
        let mut s = store_with(&["a"]);
        let both = json!({"spec": {"type": "ClusterIP"},
                          "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}});
        let after = s.merge_patch(&svc("a"), &both, true).unwrap();
        assert_eq!(after["spec"]["type"], "LoadBalancer");
        assert_eq!(
            after["status"]["loadBalancer"]["ingress"][0]["ip"],
            "10.0.0.1"
        );
        let after = s
            .merge_patch(
                &svc("a"),
                &json!({"spec": {"type": "ClusterIP"}, "status": {"loadBalancer": null}}),
                false,
            )
            .unwrap();
        assert_eq!(after["spec"]["type"], "ClusterIP");
        assert_eq!(
            after["status"]["loadBalancer"]["ingress"][0]["ip"],
            "10.0.0.1"
        );
        // Merge patch: null removes a member, arrays are replaced whole.
        let after = s
            .merge_patch(
                &svc("a"),
                &json!({"spec": {"selector": null, "ports": [{"port": 1}]}}),
                false,
            )
            .unwrap();
        assert!(after["spec"].get("selector").is_none());
        assert_eq!(after["spec"]["ports"], json!([{"port": 1}]));
        // A no-op patch writes nothing.
        let rv = s.resource_version();
        s.merge_patch(&svc("a"), &json!({"spec": {"type": "ClusterIP"}}), false)
            .unwrap();
        assert_eq!(s.resource_version(), rv);
    }

    #[test]
    fn watches_see_changes_by_selector_including_leaving_and_entering_it() {
        let mut s = store_with(&["a"]);
        let lb =
            Selector::parse("services", None, "fieldSelector=spec.type%3DLoadBalancer").unwrap();
        let all = Selector::parse("services", Some("default"), "").unwrap();
        let start = s.resource_version();
        s.merge_patch(&svc("a"), &json!({"spec": {"type": "ClusterIP"}}), false)
            .unwrap();
        s.merge_patch(&svc("a"), &json!({"spec": {"type": "LoadBalancer"}}), false)
            .unwrap();
        s.delete(&svc("a")).unwrap();
        let kinds = |sel: &Selector| -> Vec<String> {
            s.since(start)
                .filter_map(|c| c.event_for(sel))
                .map(|e| e["type"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(kinds(&lb), ["DELETED", "ADDED", "DELETED"]);
        // Leaving the selector: the content it last had there, at the new version.
        let left = s.since(start).next().unwrap().event_for(&lb).unwrap();
        assert_eq!(left["object"]["spec"]["type"], "LoadBalancer");
        assert_eq!(
            left["object"]["metadata"]["resourceVersion"],
            (start + 1).to_string()
        );
        assert_eq!(kinds(&all), ["MODIFIED", "MODIFIED", "DELETED"]);
        let other_ns = Selector::parse("services", Some("kube-system"), "").unwrap();
        assert!(kinds(&other_ns).is_empty());
        assert_eq!(
            Selector::parse("services", None, "labelSelector=app%3Dx")
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            Selector::parse("configmaps", None, "fieldSelector=spec.type%3DX")
                .unwrap_err()
                .code,
            400,
            "a selector not emulated is refused, not ignored"
        );
        let by_name = Selector::parse(
            "configmaps",
            Some("kube-system"),
            "fieldSelector=metadata.name%3Dbgp-config",
        )
        .unwrap();
        assert_eq!(by_name.name.as_deref(), Some("bgp-config"));
    }

    #[test]
    fn targets_parse_the_served_paths_only() {
        let t = Target::parse("/api/v1/namespaces/ns/services/a/status").unwrap();
        assert_eq!(
            (
                t.resource.as_str(),
                t.namespace.as_deref(),
                t.name.as_deref(),
                t.status
            ),
            ("services", Some("ns"), Some("a"), true)
        );
        assert_eq!(Target::parse("/api/v1/services").unwrap().namespace, None);
        assert!(Target::parse("/apis/coordination.k8s.io/v1/namespaces/ns/leases/l").is_some());
        assert!(Target::parse("/apis/events.k8s.io/v1/namespaces/ns/events").is_some());
        for bad in [
            "/api/v1/nodes",
            "/api/v1/services/a",
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l/status",
            "/apis/apps/v1/namespaces/ns/deployments",
        ] {
            assert_eq!(Target::parse(bad), None, "{bad}");
        }
    }
}
