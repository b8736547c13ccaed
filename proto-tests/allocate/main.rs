//! The `allocate` runner against kube-rs's mocked API server: the Services listed (real
//! Service JSON), the bgp-config ConfigMap, the leadership on a `watch`, and what it
//! writes (the status merge patches, the Events). The mocked server behaves as the API
//! server does for what the runner uses: a PATCH whose resourceVersion is stale gets a
//! 409, an accepted one bumps the version and comes back on the Services' watch.
//!
//! Each rule is one table row: what is listed, the config, then steps, each with the
//! status patches (`name -> ips`) and the Events (`name reason`) it must cause, and
//! nothing more. The rules are MetalLB v0.12.1's (controller/service.go,
//! internal/allocator/), named in each row, with the fixes issue 30 asks for.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../kube/harness.rs"]
#[allow(dead_code)]
mod harness;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use harness::{config_map, Call, MockApi, Route, WatchStream, WAIT};
use http::StatusCode;
use podcidr_speaker::allocate::lease::Leadership;
use podcidr_speaker::allocate::metrics::AllocMetrics;
use podcidr_speaker::allocate::run::{drive, ConfigInput, Inputs};
use podcidr_speaker::sources::kube::{BgpConfigMapRef, Retry};
use serde_json::{json, Value};
use tokio::sync::{oneshot, watch};

/// How long "nothing more is written" is watched for.
const QUIET: Duration = Duration::from_millis(400);

// ---- Services as the API server returns them ----

/// An IPv4 LoadBalancer Service on TCP/80 (`harness::service`), no status.
fn svc(name: &str) -> Value {
    harness::service("default", name, "10", "LoadBalancer", "Cluster", &[])
}

fn with(mut s: Value, path: &[&str], value: Value) -> Value {
    let mut at = &mut s;
    for (i, key) in path.iter().enumerate() {
        if i + 1 == path.len() {
            at[*key] = value;
            break;
        }
        if at.get(*key).is_none() {
            at[*key] = json!({});
        }
        at = &mut at[*key];
    }
    s
}

fn annotated(s: Value, key: &str, value: &str) -> Value {
    with(s, &["metadata", "annotations", key], json!(value))
}

fn pool_of(s: Value, pool: &str) -> Value {
    annotated(s, "metallb.universe.tf/address-pool", pool)
}

fn shared(s: Value, key: &str) -> Value {
    annotated(s, "metallb.universe.tf/allow-shared-ip", key)
}

fn requested(s: Value, ip: &str) -> Value {
    with(s, &["spec", "loadBalancerIP"], json!(ip))
}

fn requested_ann(s: Value, ips: &str) -> Value {
    annotated(s, "metallb.universe.tf/loadBalancerIPs", ips)
}

fn status(s: Value, ips: &[&str]) -> Value {
    let ingress: Vec<Value> = ips.iter().map(|ip| json!({"ip": ip})).collect();
    with(s, &["status", "loadBalancer", "ingress"], json!(ingress))
}

fn port(s: Value, protocol: &str, port: u16) -> Value {
    with(
        s,
        &["spec", "ports"],
        json!([{"name": "p", "port": port, "protocol": protocol, "targetPort": port}]),
    )
}

fn local(s: Value, selector: Value) -> Value {
    let s = with(s, &["spec", "externalTrafficPolicy"], json!("Local"));
    with(s, &["spec", "selector"], selector)
}

fn class(s: Value, class: &str) -> Value {
    with(s, &["spec", "loadBalancerClass"], json!(class))
}

fn dual(s: Value, policy: &str) -> Value {
    let s = with(s, &["spec", "ipFamilies"], json!(["IPv4", "IPv6"]));
    let s = with(s, &["spec", "clusterIPs"], json!(["10.96.40.7", "fd00::7"]));
    with(s, &["spec", "ipFamilyPolicy"], json!(policy))
}

fn v6(s: Value) -> Value {
    let s = with(s, &["spec", "ipFamilies"], json!(["IPv6"]));
    let s = with(s, &["spec", "clusterIP"], json!("fd00::7"));
    with(s, &["spec", "clusterIPs"], json!(["fd00::7"]))
}

fn typed(s: Value, type_: &str) -> Value {
    with(s, &["spec", "type"], json!(type_))
}

fn name_of(s: &Value) -> String {
    s["metadata"]["name"].as_str().unwrap().to_owned()
}

// ---- bgp-configs ----

fn pools(pools: &[(&str, &[&str])]) -> String {
    pools_with(pools, "")
}

/// `extra` is added to each pool (e.g. `avoid-buggy-ips: true`).
fn pools_with(pools: &[(&str, &[&str])], extra: &str) -> String {
    let mut out = String::from("address-pools:\n");
    for (name, addresses) in pools {
        out.push_str(&format!("- name: {name}\n  protocol: bgp\n"));
        for line in extra.lines().filter(|l| !l.is_empty()) {
            out.push_str(&format!("  {line}\n"));
        }
        out.push_str("  addresses:\n");
        for a in *addresses {
            out.push_str(&format!("  - {a}\n"));
        }
    }
    out
}

/// `pool` of `config` with `auto-assign: false`.
fn manual(config: String, pool: &str) -> String {
    let head = format!("- name: {pool}\n  protocol: bgp\n");
    config.replacen(&head, &format!("{head}  auto-assign: false\n"), 1)
}

// ---- the mocked cluster ----

/// The mocked API server's Services and the runner's writes.
struct Cluster {
    api: MockApi,
    services: BTreeMap<String, Value>,
    /// Services that are no LoadBalancer any more (outside the watch, still readable).
    others: BTreeMap<String, Value>,
    rv: u64,
    /// `None` until the runner asks for it (it asks after the writes of its list).
    services_watch: Option<WatchStream>,
    /// Events of the Services' watch before it was asked for.
    backlog: Vec<(&'static str, Value)>,
    config_watch: WatchStream,
    leadership: watch::Sender<Leadership>,
    metrics: Arc<AllocMetrics>,
    stop: Option<oneshot::Sender<()>>,
    runner: tokio::task::JoinHandle<()>,
    events: Vec<(String, String)>,
    /// Each Event's whole body, in arrival order.
    bodies: Vec<Value>,
}

impl Cluster {
    /// Starts the runner with `config` in the bgp-config ConfigMap, these Services
    /// listed, and `leadership` as the elector's first word.
    async fn start(config: &str, listed: Vec<Value>, leadership: Leadership) -> Cluster {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let (client, mut api) = MockApi::start();
        let (leader_tx, leader_rx) = watch::channel(leadership);
        let metrics = AllocMetrics::new("allocator-0").unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let inputs = Inputs {
            client,
            identity: "allocator-0".into(),
            classes: BTreeSet::new(),
            config: ConfigInput::ConfigMap(BgpConfigMapRef::default()),
            retry: Retry::Fixed(Duration::from_millis(50)),
            leadership: leader_rx,
            clock: None,
            rewrite: Duration::from_millis(200),
        };
        let runner = tokio::spawn(drive(inputs, Arc::clone(&metrics), async {
            let _ = stopped.await;
        }));
        let list = api.next(Route::BgpConfig).await;
        assert_eq!(
            list.param("fieldSelector").as_deref(),
            Some("metadata.name=bgp-config")
        );
        list.list(
            "ConfigMap",
            "v1",
            vec![config_map(
                "kube-system",
                "bgp-config",
                "5",
                json!({"config.yaml": config}),
            )],
            "5",
        );
        let config_watch = api.next(Route::BgpConfig).await.watch();
        let list = api.next(Route::Services).await;
        assert_eq!(
            list.param("fieldSelector").as_deref(),
            Some("spec.type=LoadBalancer")
        );
        let mut services = BTreeMap::new();
        let mut items = Vec::new();
        let mut rv = 100;
        for s in listed {
            rv += 1;
            let s = with(s, &["metadata", "resourceVersion"], json!(rv.to_string()));
            items.push(s.clone());
            services.insert(name_of(&s), s);
        }
        list.list("Service", "v1", items, &rv.to_string());
        Cluster {
            api,
            services,
            others: BTreeMap::new(),
            rv,
            services_watch: None,
            backlog: Vec::new(),
            config_watch,
            leadership: leader_tx,
            metrics,
            stop: Some(stop),
            runner,
            events: Vec::new(),
            bodies: Vec::new(),
        }
    }

    /// Opens the Services' watch when the runner asks for it, and answers its reads of
    /// one Service by name (from what exists now: 404 once deleted).
    fn pump(&mut self) {
        while let Some(call) = self.api.try_next(Route::ServiceObject) {
            let name = call
                .request
                .uri()
                .path()
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            match self.services.get(&name).or_else(|| self.others.get(&name)) {
                Some(s) => call.json(StatusCode::OK, s),
                None => call.status_error(404, "NotFound"),
            }
        }
        if self.services_watch.is_none() {
            if let Some(call) = self.api.try_next(Route::Services) {
                let watch = call.watch();
                for (kind, object) in self.backlog.drain(..) {
                    watch.event(kind, object);
                }
                self.services_watch = Some(watch);
            }
        }
    }

    fn emit(&mut self, kind: &'static str, object: Value) {
        self.pump();
        match &self.services_watch {
            Some(watch) => watch.event(kind, object),
            None => self.backlog.push((kind, object)),
        }
    }

    fn bump(&mut self, s: Value) -> Value {
        self.rv += 1;
        with(
            s,
            &["metadata", "resourceVersion"],
            json!(self.rv.to_string()),
        )
    }

    /// A user's edit (or a new Service), seen on the watch.
    fn apply(&mut self, s: Value) {
        let s = self.bump(s);
        let name = name_of(&s);
        if self.services.insert(name, s.clone()).is_some() {
            self.emit("MODIFIED", s);
        } else {
            self.emit("ADDED", s);
        }
    }

    /// An edit the watch has not delivered yet (a write racing it gets a 409).
    fn apply_unseen(&mut self, s: Value) -> Value {
        let s = self.bump(s);
        self.services.insert(name_of(&s), s.clone());
        s
    }

    fn delete(&mut self, name: &str) {
        let s = self.services.remove(name).unwrap();
        self.emit("DELETED", s);
    }

    /// A type change away from LoadBalancer: the field selector's watch says DELETED
    /// with the object as it last matched, at the new version (what the API server's
    /// watch cache sends); the object itself, retyped, stays readable.
    fn retype(&mut self, name: &str, type_: &str) {
        let before = self.services.remove(name).unwrap();
        let after = self.bump(typed(before.clone(), type_));
        let version = after["metadata"]["resourceVersion"].clone();
        self.others.insert(name.to_owned(), after);
        self.emit(
            "DELETED",
            with(before, &["metadata", "resourceVersion"], version),
        );
    }

    fn config(&mut self, text: &str) {
        self.rv += 1;
        self.config_watch.modified(config_map(
            "kube-system",
            "bgp-config",
            &self.rv.to_string(),
            json!({"config.yaml": text}),
        ));
    }

    /// The next status PATCH, answered as the API server would: 409 on a stale version,
    /// else applied (the new status comes back on the watch). Returns the name and the
    /// ingress written.
    async fn patch(&mut self) -> (String, Vec<String>) {
        let call = self.next_patch().await;
        self.answer_patch(call).await
    }

    /// The next status PATCH, not answered yet (the Services' watch and reads by name
    /// are served meanwhile); fails after [`WAIT`].
    async fn next_patch(&mut self) -> Call {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            self.pump();
            if let Some(call) = self.api.try_next(Route::ServiceStatus) {
                return call;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no status patch within {WAIT:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn answer_patch(&mut self, mut call: Call) -> (String, Vec<String>) {
        assert_eq!(call.method(), "PATCH");
        assert_eq!(
            call.header("content-type").as_deref(),
            Some("application/merge-patch+json")
        );
        let path = call.request.uri().path().to_owned();
        let name = path
            .strip_prefix("/api/v1/namespaces/default/services/")
            .and_then(|p| p.strip_suffix("/status"))
            .unwrap_or_else(|| panic!("status patch of {path}"))
            .to_owned();
        let body = call.body_json().await;
        let keys: BTreeSet<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            BTreeSet::from([&"metadata".to_owned(), &"status".to_owned()]),
            "{body}"
        );
        assert_eq!(
            body["status"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            vec!["loadBalancer"],
            "only the ingress is written: {body}"
        );
        let ips: Vec<String> = body["status"]["loadBalancer"]["ingress"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["ip"].as_str().unwrap().to_owned())
            .collect();
        let current = self.services.get(&name).cloned();
        let sent_rv = body["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_owned);
        match current {
            Some(s) if s["metadata"]["resourceVersion"].as_str() == sent_rv.as_deref() => {
                let ip_refs: Vec<&str> = ips.iter().map(String::as_str).collect();
                let s = self.bump(status(s, &ip_refs));
                self.services.insert(name.clone(), s.clone());
                self.emit("MODIFIED", s.clone());
                call.json(StatusCode::OK, &s);
            }
            Some(_) => {
                call.status_error(409, "Conflict");
            }
            None => match self.others.get(&name).cloned() {
                // Written outside the watch (no longer a LoadBalancer): applied, and
                // nothing comes on the watch.
                Some(s) if s["metadata"]["resourceVersion"].as_str() == sent_rv.as_deref() => {
                    let ip_refs: Vec<&str> = ips.iter().map(String::as_str).collect();
                    let s = self.bump(status(s, &ip_refs));
                    self.others.insert(name.clone(), s.clone());
                    call.json(StatusCode::OK, &s);
                }
                Some(_) => call.status_error(409, "Conflict"),
                None => call.status_error(404, "NotFound"),
            },
        }
        (name, ips)
    }

    /// Exactly these patches (in any order), then nothing for [`QUIET`].
    async fn expect_patches(&mut self, rule: &str, want: &[(&str, &[&str])]) {
        let mut got = BTreeMap::new();
        for _ in want {
            let (name, ips) = self.patch().await;
            assert!(
                got.insert(name.clone(), ips).is_none(),
                "{rule}: {name} written twice"
            );
        }
        let want: BTreeMap<String, Vec<String>> = want
            .iter()
            .map(|(n, ips)| {
                (
                    (*n).to_owned(),
                    ips.iter().map(|s| (*s).to_owned()).collect(),
                )
            })
            .collect();
        assert_eq!(got, want, "{rule}");
        self.quiet(rule).await;
    }

    /// No status patch for [`QUIET`].
    async fn quiet(&mut self, rule: &str) {
        let until = tokio::time::Instant::now() + QUIET;
        while tokio::time::Instant::now() < until {
            self.pump();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if let Some(mut call) = self.api.try_next(Route::ServiceStatus) {
            let body = call.body_json().await;
            panic!("{rule}: an unexpected status patch {} {body}", call.uri());
        }
    }

    /// The Events posted so far, answered; at least `n` of them (waits for them).
    async fn events(&mut self, n: usize) -> Vec<(String, String)> {
        while self.events.len() < n {
            let mut call = self.api.next(Route::Events).await;
            let body = call.body_json().await;
            self.events.push((
                body["regarding"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                body["reason"].as_str().unwrap_or_default().to_owned(),
            ));
            call.json(StatusCode::CREATED, &body);
            self.bodies.push(body);
        }
        self.events.clone()
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(WAIT, &mut self.runner)
            .await
            .expect("the runner stops")
            .unwrap();
    }
}

// ---- the rules ----

/// A step of a rule: what happens, then the patches and Events it must cause.
enum Step {
    Apply(Value),
    Delete(&'static str),
    Retype(&'static str, &'static str),
    Config(String),
}

struct Rule {
    name: &'static str,
    config: String,
    listed: Vec<Value>,
    /// The patches and Events of the start.
    start: Expect,
    steps: Vec<(Step, Expect)>,
}

#[derive(Default)]
struct Expect {
    patches: Vec<(&'static str, &'static [&'static str])>,
    /// `(service, reason)` Events, in any order.
    events: Vec<(&'static str, &'static str)>,
}

fn expect(
    patches: &[(&'static str, &'static [&'static str])],
    events: &[(&'static str, &'static str)],
) -> Expect {
    Expect {
        patches: patches.to_vec(),
        events: events.to_vec(),
    }
}

/// Runs a rule; returns the metrics at its end.
async fn check(rule: Rule) -> String {
    let mut cluster =
        Cluster::start(&rule.config, rule.listed, Leadership::Leader { term: 1 }).await;
    let mut events = 0;
    let mut want_events: Vec<(String, String)> = Vec::new();
    let verify = |cluster_events: Vec<(String, String)>, want: &mut Vec<(String, String)>| {
        let mut got = cluster_events;
        got.sort();
        want.sort();
        assert_eq!(&got, want, "{}: events", rule.name);
    };
    cluster.expect_patches(rule.name, &rule.start.patches).await;
    events += rule.start.events.len();
    want_events.extend(
        rule.start
            .events
            .iter()
            .map(|(s, r)| ((*s).to_owned(), (*r).to_owned())),
    );
    let got = cluster.events(events).await;
    verify(got, &mut want_events);
    for (step, want) in rule.steps {
        match step {
            Step::Apply(s) => cluster.apply(s),
            Step::Delete(name) => cluster.delete(name),
            Step::Retype(name, t) => cluster.retype(name, t),
            Step::Config(text) => cluster.config(&text),
        }
        cluster.expect_patches(rule.name, &want.patches).await;
        events += want.events.len();
        want_events.extend(
            want.events
                .iter()
                .map(|(s, r)| ((*s).to_owned(), (*r).to_owned())),
        );
        let got = cluster.events(events).await;
        verify(got, &mut want_events);
    }
    assert!(
        cluster.api.idle(Route::Events),
        "{}: an unexpected event",
        rule.name
    );
    let metrics = cluster.metrics.encode();
    cluster.stop().await;
    metrics
}

fn has(metrics: &str, line: &str) {
    assert!(
        metrics.lines().any(|l| l == line),
        "{line} not in\n{metrics}"
    );
}

#[tokio::test]
async fn order_and_buggy_ips() {
    // MetalLB hands out a pool's addresses in ascending order, .0 and .255 included;
    // avoid-buggy-ips skips every IPv4 address ending in .0 or .255 (allocator.go's
    // ipConfusesBuggyFirmware), whatever the prefix length.
    check(Rule {
        name: "ascending from the first address, .0 included",
        config: pools(&[("default", &["192.0.2.0/24"])]),
        listed: vec![svc("a"), svc("b")],
        start: expect(
            &[("a", &["192.0.2.0"]), ("b", &["192.0.2.1"])],
            &[("a", "IPAllocated"), ("b", "IPAllocated")],
        ),
        steps: vec![],
    })
    .await;
    check(Rule {
        name: "avoid-buggy-ips skips .255 and .0 across a /23",
        config: pools_with(
            &[("default", &["198.51.100.254-198.51.101.1"])],
            "avoid-buggy-ips: true",
        ),
        listed: vec![svc("a"), svc("b")],
        start: expect(
            &[("a", &["198.51.100.254"]), ("b", &["198.51.101.1"])],
            &[("a", "IPAllocated"), ("b", "IPAllocated")],
        ),
        steps: vec![],
    })
    .await;
}

#[tokio::test]
async fn status_ips_are_claimed_first_at_start() {
    // controller.go: at start every Service's existing status is claimed before any new
    // allocation, so a restart never moves an address; a Service listed earlier that
    // wants that address (here: the pool's first) gets another.
    check(Rule {
        name: "status kept and claimed before the others",
        config: pools(&[("default", &["192.0.2.0/30"])]),
        listed: vec![svc("a"), status(svc("b"), &["192.0.2.0"])],
        start: expect(&[("a", &["192.0.2.1"])], &[("a", "IPAllocated")]),
        steps: vec![],
    })
    .await;
}

#[tokio::test]
async fn a_follower_writes_nothing_until_it_leads() {
    // Only the leader writes (MetalLB's controller is a single replica; ours are two,
    // elected): a follower keeps the Services warm and writes no status and no Event.
    let config = pools(&[("default", &["192.0.2.0/30"])]);
    let mut c = Cluster::start(&config, vec![svc("a")], Leadership::Follower).await;
    c.quiet("a follower writes nothing").await;
    c.apply(svc("b"));
    c.quiet("a follower writes nothing on a watch event").await;
    assert!(c.api.idle(Route::Events), "a follower posts no event");
    assert!(c.metrics.snapshot().services_listed);
    c.leadership.send(Leadership::Leader { term: 1 }).unwrap();
    c.expect_patches(
        "the new leader writes from the store",
        &[("a", &["192.0.2.0"]), ("b", &["192.0.2.1"])],
    )
    .await;
    c.stop().await;
}

#[tokio::test]
async fn a_deposed_leader_stops_writing_at_once() {
    let config = pools(&[("default", &["192.0.2.0/30"])]);
    let mut c = Cluster::start(&config, vec![svc("a")], Leadership::Leader { term: 1 }).await;
    c.expect_patches("the leader writes", &[("a", &["192.0.2.0"])])
        .await;
    c.leadership.send(Leadership::Follower).unwrap();
    c.apply(svc("b"));
    c.delete("a");
    c.quiet("deposed: no patch follows").await;
    c.stop().await;
}

#[tokio::test]
async fn a_new_term_rebuilds_from_the_store_without_moving_an_address() {
    // controller.go's start: statuses are claimed before anything new is handed out.
    // Here "a" holds .0 from term 1; "b" arrives while no one leads. Term 2 gives "b"
    // the next free address and does not touch "a".
    let config = pools(&[("default", &["192.0.2.0/30"])]);
    let mut c = Cluster::start(&config, vec![svc("a")], Leadership::Leader { term: 1 }).await;
    c.expect_patches("term 1", &[("a", &["192.0.2.0"])]).await;
    c.leadership.send(Leadership::Follower).unwrap();
    c.apply(svc("0-first"));
    c.quiet("no leader").await;
    c.leadership.send(Leadership::Leader { term: 2 }).unwrap();
    c.expect_patches("term 2", &[("0-first", &["192.0.2.1"])])
        .await;
    c.stop().await;
}

#[tokio::test]
async fn a_conflict_is_not_retried_blindly() {
    // The write carries the resourceVersion decided on; a 409 means the Service
    // changed: no second PATCH until its watch event arrives, which is decided anew.
    let config = pools(&[("default", &["192.0.2.0/30"])]);
    let mut c = Cluster::start(&config, vec![], Leadership::Leader { term: 1 }).await;
    c.quiet("nothing listed").await;
    c.apply(svc("a"));
    // The user edits "a" before the runner's write lands: the write gets a 409.
    let edited = c.apply_unseen(annotated(svc("a"), "owner", "team-a"));
    let (name, _) = c.patch().await;
    assert_eq!(name, "a");
    c.quiet("a 409 is not retried blindly").await;
    assert!(c
        .metrics
        .encode()
        .contains("podcidr_allocator_status_writes_total{result=\"conflict\"} 1"));
    // The edit reaches the watch: decided again, written with the new version.
    c.emit("MODIFIED", edited);
    c.expect_patches("after the watch event", &[("a", &["192.0.2.0"])])
        .await;
    // IPAllocated once, when the status says so: not for the write that met the 409.
    assert_eq!(
        c.events(1).await,
        vec![("a".to_owned(), "IPAllocated".to_owned())]
    );
    assert!(c.api.idle(Route::Events), "one IPAllocated only");
    c.stop().await;
}

#[tokio::test]
async fn requested_ips() {
    // MetalLB: spec.loadBalancerIP (or, from 0.13, the loadBalancerIPs annotation) is
    // taken if it lies in a pool, whatever its auto-assign; no fallback when it cannot
    // be had; both set is an error (our fix: MetalLB 0.12 took one and cleared it).
    let config = manual(
        pools(&[
            ("default", &["192.0.2.0/30"]),
            ("manual", &["198.51.100.0/30"]),
        ]),
        "manual",
    );
    check(Rule {
        name: "requested ip, annotation, both, outside every pool",
        config,
        listed: vec![
            requested(svc("a"), "198.51.100.2"),
            requested_ann(svc("b"), "192.0.2.3"),
            requested_ann(requested(svc("c"), "192.0.2.1"), "192.0.2.1"),
            requested(svc("d"), "203.0.113.9"),
        ],
        start: expect(
            &[("a", &["198.51.100.2"]), ("b", &["192.0.2.3"])],
            &[
                ("a", "IPAllocated"),
                ("b", "IPAllocated"),
                ("c", "AllocationFailed"),
                ("d", "AllocationFailed"),
            ],
        ),
        steps: vec![
            (
                // A requested address already held is in use: no fallback.
                Step::Apply(requested(svc("e"), "192.0.2.3")),
                expect(&[], &[("e", "AllocationFailed")]),
            ),
            (
                // A changed request moves the Service (controller.go: the status no
                // longer matches the request, released and taken anew).
                Step::Apply(requested(
                    status(svc("a"), &["198.51.100.2"]),
                    "198.51.100.3",
                )),
                expect(&[("a", &["198.51.100.3"])], &[("a", "IPAllocated")]),
            ),
        ],
    })
    .await;
}

#[tokio::test]
async fn named_pool_and_auto_assign_order() {
    // metallb.universe.tf/address-pool: only that pool, no fallback when it is full or
    // unknown. Without it: the auto-assign pools in config order (MetalLB 0.12 walked a
    // Go map: random; ours is documented), never an auto-assign: false one.
    let config = manual(
        pools(&[
            ("manual", &["203.0.113.0/32"]),
            ("first", &["192.0.2.0/32"]),
            ("second", &["198.51.100.0/32"]),
        ]),
        "manual",
    );
    check(Rule {
        name: "named pool, then auto-assign pools in order, no fallback",
        config,
        listed: vec![
            svc("a"),
            svc("b"),
            svc("c"),
            pool_of(svc("d"), "manual"),
            pool_of(svc("e"), "manual"),
            pool_of(svc("f"), "nowhere"),
        ],
        start: expect(
            &[
                ("a", &["192.0.2.0"]),
                ("b", &["198.51.100.0"]),
                ("d", &["203.0.113.0"]),
            ],
            &[
                ("a", "IPAllocated"),
                ("b", "IPAllocated"),
                ("c", "AllocationFailed"),
                ("d", "IPAllocated"),
                ("e", "AllocationFailed"),
                ("f", "AllocationFailed"),
            ],
        ),
        steps: vec![
            (
                // A changed annotation moves the Service (controller.go: the pool no
                // longer matches, the address is released): "manual" is full, so "a"
                // is pending (no fallback) and its old address goes to "c" at once.
                Step::Apply(pool_of(status(svc("a"), &["192.0.2.0"]), "manual")),
                expect(
                    &[("a", &[]), ("c", &["192.0.2.0"])],
                    &[("a", "AllocationFailed"), ("c", "IPAllocated")],
                ),
            ),
            (
                // "manual" frees: the first pending Service naming it (key order) gets it.
                Step::Delete("d"),
                expect(&[("a", &["203.0.113.0"])], &[("a", "IPAllocated")]),
            ),
        ],
    })
    .await;
}

#[tokio::test]
async fn sharing() {
    // allow-shared-ip: same non-empty key, no (protocol, port) in common, and for Local
    // the same selector; automatic allocation packs a sharer onto the first compatible
    // address (MetalLB's allocator.go sharing checks).
    let config = pools(&[("default", &["192.0.2.0/29"])]);
    check(Rule {
        name: "compatible, incompatible key, same port, Local selectors",
        config,
        listed: vec![
            shared(svc("a"), "k"),
            shared(port(svc("b"), "TCP", 443), "k"),
            shared(port(svc("c"), "TCP", 8443), "other"),
            shared(svc("d"), "k"),
            local(
                shared(port(svc("e"), "UDP", 53), "l"),
                json!({"app": "dns"}),
            ),
            local(
                shared(port(svc("f"), "TCP", 53), "l"),
                json!({"app": "dns"}),
            ),
            // Same key, no port in common, but another selector under Local: it may
            // not have the address it asks for.
            requested(
                local(
                    shared(port(svc("g"), "SCTP", 53), "l"),
                    json!({"app": "other"}),
                ),
                "192.0.2.3",
            ),
        ],
        start: expect(
            &[
                ("a", &["192.0.2.0"]),
                ("b", &["192.0.2.0"]),
                ("c", &["192.0.2.1"]),
                ("d", &["192.0.2.2"]),
                ("e", &["192.0.2.3"]),
                ("f", &["192.0.2.3"]),
            ],
            &[
                ("a", "IPAllocated"),
                ("b", "IPAllocated"),
                ("c", "IPAllocated"),
                ("d", "IPAllocated"),
                ("e", "IPAllocated"),
                ("f", "IPAllocated"),
                ("g", "AllocationFailed"),
            ],
        ),
        steps: vec![],
    })
    .await;
}

#[tokio::test]
async fn dual_stack_and_families() {
    // One address per family from one pool (MetalLB 0.13+'s dual-stack), single-stack
    // by the Service's family; RequireDualStack fails without both, PreferDualStack
    // takes what there is.
    let config = pools(&[
        ("v4only", &["192.0.2.0/32"]),
        ("both", &["198.51.100.0/32", "2001:db8::/128"]),
    ]);
    check(Rule {
        name: "dual-stack from one pool",
        config,
        listed: vec![
            dual(svc("a"), "RequireDualStack"),
            v6(svc("b")),
            svc("c"),
            dual(svc("d"), "PreferDualStack"),
        ],
        start: expect(
            &[
                ("a", &["198.51.100.0", "2001:db8::"]),
                ("c", &["192.0.2.0"]),
            ],
            &[
                ("a", "IPAllocated"),
                ("b", "AllocationFailed"),
                ("c", "IPAllocated"),
                ("d", "AllocationFailed"),
            ],
        ),
        steps: vec![],
    })
    .await;
}

#[tokio::test]
async fn release_and_retry_on_delete_and_type_change() {
    // Deleted, or no longer type LoadBalancer: the address is released (the status of
    // the latter cleared, as MetalLB does) and pending Services retried at once
    // (MetalLB 0.12 did not retry after a type change; later versions do).
    let config = pools(&[("default", &["192.0.2.0/32"])]);
    check(Rule {
        name: "release on delete and type change, pending retried",
        config,
        listed: vec![svc("a"), svc("b"), svc("c")],
        start: expect(
            &[("a", &["192.0.2.0"])],
            &[
                ("a", "IPAllocated"),
                ("b", "AllocationFailed"),
                ("c", "AllocationFailed"),
            ],
        ),
        steps: vec![
            (
                Step::Delete("a"),
                expect(&[("b", &["192.0.2.0"])], &[("b", "IPAllocated")]),
            ),
            (
                Step::Retype("b", "ClusterIP"),
                expect(
                    &[("b", &[]), ("c", &["192.0.2.0"])],
                    &[("c", "IPAllocated")],
                ),
            ),
        ],
    })
    .await;
}

#[tokio::test]
async fn classes() {
    // spec.loadBalancerClass: by default only Services without a class are served (the
    // speaker's --lb-class convention; MetalLB 0.13+ the same).
    let config = pools(&[("default", &["192.0.2.0/30"])]);
    check(Rule {
        name: "a Service of another class is left alone",
        config,
        listed: vec![class(svc("a"), "other.example/lb"), svc("b")],
        start: expect(&[("b", &["192.0.2.0"])], &[("b", "IPAllocated")]),
        steps: vec![],
    })
    .await;
}

#[tokio::test]
async fn reload_refused_keeps_the_last_good_config_until_the_named_services_change() {
    // MetalLB's controller refuses a config that would orphan an address in use
    // ("cannot remove pool ... in use"): the whole config, with the Services named; the
    // last good one stays and is what new Services get, and the refused one is tried
    // again when one of the Services it named changes.
    let old = pools(&[("default", &["192.0.2.0/30"])]);
    let new = pools(&[("default", &["198.51.100.0/30"])]);
    let metrics = check(Rule {
        name: "reload refused, last good kept, retried when the named Services change",
        config: old,
        listed: vec![svc("a")],
        start: expect(&[("a", &["192.0.2.0"])], &[("a", "IPAllocated")]),
        steps: vec![
            (Step::Config(new), expect(&[], &[("a", "ConfigRefused")])),
            (
                Step::Apply(svc("b")),
                expect(&[("b", &["192.0.2.1"])], &[("b", "IPAllocated")]),
            ),
            // "a" goes: tried again, and now refused for "b" alone.
            (Step::Delete("a"), expect(&[], &[("b", "ConfigRefused")])),
            // "b" goes: nothing is orphaned any more, the config is taken.
            (Step::Delete("b"), expect(&[], &[])),
            (
                Step::Apply(svc("c")),
                expect(&[("c", &["198.51.100.0"])], &[("c", "IPAllocated")]),
            ),
        ],
    })
    .await;
    has(
        &metrics,
        "podcidr_allocator_config_reloads_total{result=\"refused\"} 2",
    );
    has(
        &metrics,
        "podcidr_allocator_config_reloads_total{result=\"applied\"} 2",
    );
    has(&metrics, "podcidr_allocator_config_refused 0");
}

#[tokio::test]
async fn reload_invalid_keeps_the_last_good_config() {
    let metrics = check(Rule {
        name: "an invalid config is counted, the last good one allocates",
        config: pools(&[("default", &["192.0.2.0/30"])]),
        listed: vec![],
        start: expect(&[], &[]),
        steps: vec![
            (
                Step::Config("address-pools:\n- name: default\n  addresses: [nonsense]\n".into()),
                expect(&[], &[]),
            ),
            (
                Step::Apply(svc("a")),
                expect(&[("a", &["192.0.2.0"])], &[("a", "IPAllocated")]),
            ),
        ],
    })
    .await;
    has(
        &metrics,
        "podcidr_allocator_config_reloads_total{result=\"invalid\"} 1",
    );
    has(&metrics, "podcidr_allocator_config_refused 1");
}

#[tokio::test]
async fn reload_accepted_decides_every_service_again() {
    // An accepted reload re-decides everything: a pending Service may now get an
    // address; one whose annotation names a pool that no longer exists loses its own
    // (MetalLB 0.12's controller does the same at its next pass).
    let before = manual(
        pools(&[
            ("default", &["192.0.2.0/32"]),
            ("extra", &["203.0.113.0/32"]),
        ]),
        "extra",
    );
    let after = manual(
        pools(&[
            ("default", &["192.0.2.0/31"]),
            ("renamed", &["203.0.113.0/32"]),
        ]),
        "renamed",
    );
    check(Rule {
        name: "accepted reload: pending allocated, an unknown pool loses its address",
        config: before,
        listed: vec![svc("a"), svc("b"), pool_of(svc("c"), "extra")],
        start: expect(
            &[("a", &["192.0.2.0"]), ("c", &["203.0.113.0"])],
            &[
                ("a", "IPAllocated"),
                ("b", "AllocationFailed"),
                ("c", "IPAllocated"),
            ],
        ),
        steps: vec![(
            Step::Config(after),
            expect(
                &[("b", &["192.0.2.1"]), ("c", &[])],
                &[("b", "IPAllocated"), ("c", "AllocationFailed")],
            ),
        )],
    })
    .await;
}

#[tokio::test]
async fn a_status_claims_its_address_before_a_request_for_it() {
    // The status of "b" is claimed at start before "a", listed first, is decided:
    // "a" asks for that very address and is pending (in use), "b" is not touched.
    check(Rule {
        name: "a status is kept against an earlier request",
        config: pools(&[("default", &["192.0.2.0/30"])]),
        listed: vec![
            requested(svc("a"), "192.0.2.2"),
            status(svc("b"), &["192.0.2.2"]),
        ],
        start: expect(&[], &[("a", "AllocationFailed")]),
        steps: vec![(
            // "b" goes: the address is free, "a" is retried at once and gets it.
            Step::Delete("b"),
            expect(&[("a", &["192.0.2.2"])], &[("a", "IPAllocated")]),
        )],
    })
    .await;
}

#[tokio::test]
async fn an_unreadable_service_never_panics_nor_loses_its_address() {
    // A Service whose facts cannot be read (a policy Kubernetes does not know) is
    // logged and skipped when new; one holding an address keeps it (its last good facts
    // stay, as the allocator keeps an address over a bad request).
    let bad_policy = |s: Value| with(s, &["spec", "ipFamilyPolicy"], json!("Sometimes"));
    let metrics = check(Rule {
        name: "unreadable Services",
        config: pools(&[("default", &["192.0.2.0/30"])]),
        listed: vec![bad_policy(svc("a")), svc("b")],
        start: expect(&[("b", &["192.0.2.0"])], &[("b", "IPAllocated")]),
        steps: vec![
            (
                Step::Apply(bad_policy(status(svc("b"), &["192.0.2.0"]))),
                expect(&[], &[]),
            ),
            (
                // A bad request keeps the address too (the allocator warns).
                Step::Apply(requested_ann(status(svc("b"), &["192.0.2.0"]), "not-an-ip")),
                expect(&[], &[]),
            ),
            (
                Step::Apply(svc("c")),
                expect(&[("c", &["192.0.2.1"])], &[("c", "IPAllocated")]),
            ),
        ],
    })
    .await;
    has(&metrics, "podcidr_allocator_services_pending 0");
}

#[tokio::test]
async fn a_failed_write_is_tried_again() {
    // A 409 waits for the watch (a_conflict_is_not_retried_blindly); any other failure
    // leaves no event to wait for: tried again after REWRITE (200 ms here).
    let config = pools(&[("default", &["192.0.2.0/30"])]);
    let mut c = Cluster::start(&config, vec![svc("a")], Leadership::Leader { term: 1 }).await;
    let call = c.next_patch().await;
    call.status_error(500, "InternalError");
    c.expect_patches("written again after a 500", &[("a", &["192.0.2.0"])])
        .await;
    assert_eq!(
        c.events(1).await,
        vec![("a".to_owned(), "IPAllocated".to_owned())]
    );
    assert!(c.api.idle(Route::Events), "one IPAllocated only");
    let text = c.metrics.encode();
    has(
        &text,
        "podcidr_allocator_status_writes_total{result=\"refused\"} 1",
    );
    has(
        &text,
        "podcidr_allocator_status_writes_total{result=\"ok\"} 1",
    );
    c.stop().await;
}

#[tokio::test]
async fn failed_writes_back_off_and_one_that_lands_resets_the_wait() {
    // Every write refused: each round of retries that writes nothing doubles the wait
    // (200, 400, 800 ms here); the write that lands ends the retries, and the next
    // failure waits the first 200 ms again.
    let config = pools(&[("default", &["192.0.2.0/30"])]);
    let mut c = Cluster::start(&config, vec![svc("a")], Leadership::Leader { term: 1 }).await;
    let mut at = Vec::new();
    for _ in 0..4 {
        let call = c.next_patch().await;
        at.push(tokio::time::Instant::now());
        call.status_error(500, "InternalError");
    }
    let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
    for (gap, least) in gaps.iter().zip([200, 400, 800]) {
        assert!(
            *gap >= Duration::from_millis(least),
            "retried after {gap:?}, before its {least} ms: {gaps:?}"
        );
    }
    // Growing, not fixed: the third wait is longer than the first two together.
    assert!(gaps[2] > gaps[0] + gaps[1], "{gaps:?}");
    c.expect_patches("written at last", &[("a", &["192.0.2.0"])])
        .await;
    // Back to the first wait: had it stayed doubled, this retry would take 1.6 s.
    c.apply(svc("b"));
    let call = c.next_patch().await;
    let failed = tokio::time::Instant::now();
    call.status_error(500, "InternalError");
    let call = c.next_patch().await;
    let gap = tokio::time::Instant::now() - failed;
    assert!(
        gap >= Duration::from_millis(200) && gap < Duration::from_millis(1200),
        "after a write landed, the next retry came after {gap:?}"
    );
    c.answer_patch(call).await;
    c.stop().await;
}

#[tokio::test]
async fn the_config_file_is_followed_live() {
    // --bgp-config FILE: read at start, reloaded on change, as `run` follows it.
    let dir = std::env::temp_dir().join(format!("allocate-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bgp-config.yaml");
    std::fs::write(&path, pools(&[("default", &["192.0.2.0/32"])])).unwrap();
    let (client, mut api) = MockApi::start();
    let (_leader, leader_rx) = watch::channel(Leadership::Leader { term: 1 });
    let metrics = AllocMetrics::new("allocator-0").unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let runner = tokio::spawn(drive(
        Inputs {
            client,
            identity: "allocator-0".into(),
            classes: BTreeSet::new(),
            config: ConfigInput::File(path.clone()),
            retry: Retry::Fixed(Duration::from_millis(50)),
            leadership: leader_rx,
            clock: None,
            rewrite: Duration::from_millis(200),
        },
        Arc::clone(&metrics),
        async {
            let _ = stopped.await;
        },
    ));
    api.next(Route::Services)
        .await
        .list("Service", "v1", vec![svc("a"), svc("b")], "100");
    let mut call = api.next(Route::ServiceStatus).await;
    assert!(call.uri().contains("/services/a/status"), "{}", call.uri());
    assert_eq!(
        call.body_json().await["status"]["loadBalancer"]["ingress"],
        json!([{"ip": "192.0.2.0"}])
    );
    call.json(StatusCode::OK, &status(svc("a"), &["192.0.2.0"]));
    // The file grows the pool: "b", pending, gets the new address.
    std::fs::write(&path, pools(&[("default", &["192.0.2.0/31"])])).unwrap();
    let mut call = api.next(Route::ServiceStatus).await;
    assert!(call.uri().contains("/services/b/status"), "{}", call.uri());
    assert_eq!(
        call.body_json().await["status"]["loadBalancer"]["ingress"],
        json!([{"ip": "192.0.2.1"}])
    );
    call.json(StatusCode::OK, &status(svc("b"), &["192.0.2.1"]));
    assert!(metrics
        .encode()
        .contains("podcidr_allocator_config_reloads_total{result=\"applied\"} 2"));
    let _ = stop.send(());
    tokio::time::timeout(WAIT, runner).await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_leader_deposed_mid_batch_sends_not_one_write_more() {
    // The elector publishes Follower while a write is in flight (its renew deadline
    // passed): every write checks the leadership right before it goes, so the rest of
    // the batch is never sent.
    let config = pools(&[("default", &["192.0.2.0/30"])]);
    let mut c = Cluster::start(
        &config,
        vec![svc("a"), svc("b"), svc("c")],
        Leadership::Leader { term: 1 },
    )
    .await;
    let call = c.next_patch().await;
    c.leadership.send(Leadership::Follower).unwrap();
    c.answer_patch(call).await;
    c.quiet("deposed mid-batch: no further patch").await;
    c.stop().await;
}

#[tokio::test]
async fn events_say_what_and_why_in_words() {
    // MetalLB's controller records IPAllocated (Normal) and AllocationFailed (Warning,
    // its reason); ours are events.k8s.io/v1 Events on the Service, the reason in words.
    let config = pools(&[("default", &["192.0.2.0/32"])]);
    let mut c = Cluster::start(
        &config,
        vec![svc("a"), svc("b")],
        Leadership::Leader { term: 1 },
    )
    .await;
    c.expect_patches("one address", &[("a", &["192.0.2.0"])])
        .await;
    c.events(2).await;
    let by = |name: &str| {
        c.bodies
            .iter()
            .find(|b| b["regarding"]["name"] == name)
            .cloned()
            .unwrap()
    };
    let a = by("a");
    assert_eq!(a["type"], "Normal");
    assert_eq!(a["reason"], "IPAllocated");
    assert_eq!(a["note"], "assigned 192.0.2.0 from pool default");
    assert_eq!(a["regarding"]["kind"], "Service");
    assert_eq!(a["regarding"]["namespace"], "default");
    assert_eq!(a["regarding"]["uid"], "uid-svc-a");
    assert_eq!(a["reportingController"], "podcidr-speaker-allocator");
    let b = by("b");
    assert_eq!(b["type"], "Warning");
    assert_eq!(b["reason"], "AllocationFailed");
    assert_eq!(
        b["note"],
        "no address assigned: every pool with auto-assign is out of IPv4 addresses"
    );
    // The same in /status, and in the metrics.
    let board = c.metrics.snapshot();
    assert!(board.leader);
    let pending: Vec<_> = board
        .services
        .iter()
        .filter(|s| s.state == "pending")
        .collect();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].service, "default/b");
    assert_eq!(
        pending[0].reason.as_deref(),
        Some("every pool with auto-assign is out of IPv4 addresses")
    );
    let text = c.metrics.encode();
    has(&text, "podcidr_allocator_leader 1");
    has(&text, "podcidr_allocator_services_pending 1");
    has(
        &text,
        "podcidr_allocator_failures_total{reason=\"pools_full\"} 1",
    );
    has(
        &text,
        "podcidr_allocator_allocations_total{pool=\"default\"} 1",
    );
    has(
        &text,
        "podcidr_allocator_pool_addresses{pool=\"default\"} 1",
    );
    has(
        &text,
        "podcidr_allocator_pool_addresses_in_use{pool=\"default\"} 1",
    );
    c.stop().await;
}

#[tokio::test]
async fn at_start_a_config_orphaning_the_statuses_is_refused() {
    // No last good config yet: one that would move the addresses the statuses show
    // is refused all the same (a restart never moves an address), and nothing is
    // allocated until it or the Services it names change.
    let config = pools(&[("default", &["198.51.100.0/30"])]);
    let mut c = Cluster::start(
        &config,
        vec![status(svc("a"), &["192.0.2.7"]), svc("b")],
        Leadership::Leader { term: 1 },
    )
    .await;
    c.quiet("refused at start: nothing written").await;
    let events = c.events(1).await;
    assert_eq!(events, vec![("a".to_owned(), "ConfigRefused".to_owned())]);
    let board = c.metrics.snapshot();
    assert_eq!(board.pools, None);
    assert!(!board.not_ready().is_empty());
    assert!(board
        .config_refused
        .as_deref()
        .is_some_and(|r| r.contains("192.0.2.7 (held by default/a)")));
    c.delete("a");
    c.expect_patches("taken once a is gone", &[("b", &["198.51.100.0"])])
        .await;
    assert!(c.metrics.snapshot().not_ready().is_empty());
    c.stop().await;
}

#[tokio::test]
async fn a_stop_mid_batch_sends_not_one_write_more() {
    // SIGTERM while a long batch is being written: the rest is not sent, the loop
    // ends (and the command then releases the Lease for the successor).
    let config = pools(&[("default", &["192.0.2.0/30"])]);
    let mut c = Cluster::start(
        &config,
        vec![svc("a"), svc("b"), svc("c")],
        Leadership::Leader { term: 1 },
    )
    .await;
    let call = c.next_patch().await;
    c.stop.take().unwrap().send(()).unwrap();
    // Given time to see the stop before the answer comes.
    tokio::time::sleep(Duration::from_millis(50)).await;
    c.answer_patch(call).await;
    c.quiet("stopping: no further patch").await;
    tokio::time::timeout(WAIT, &mut c.runner)
        .await
        .expect("the runner stops")
        .unwrap();
}

#[tokio::test]
async fn a_follower_refuses_what_would_orphan_the_statuses_and_leads_on_the_last_good() {
    // The follower has no allocator: it asks the same question of the statuses it
    // sees, so when it becomes the leader the config in force is the last good one
    // (its Services' addresses stay), not the refused one.
    let old = pools(&[("default", &["192.0.2.0/30"])]);
    let new = pools(&[("default", &["198.51.100.0/30"])]);
    let mut c = Cluster::start(
        &old,
        vec![status(svc("a"), &["192.0.2.0"]), svc("b")],
        Leadership::Follower,
    )
    .await;
    c.quiet("a follower writes nothing").await;
    c.config(&new);
    c.quiet("refused by the follower").await;
    assert!(c.api.idle(Route::Events), "a follower posts no event");
    let text = c.metrics.encode();
    has(
        &text,
        "podcidr_allocator_config_reloads_total{result=\"refused\"} 1",
    );
    has(&text, "podcidr_allocator_config_refused 1");
    c.leadership.send(Leadership::Leader { term: 1 }).unwrap();
    c.expect_patches("leading on the last good config", &[("b", &["192.0.2.1"])])
        .await;
    c.stop().await;
}
