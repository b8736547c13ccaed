//! The Kubernetes source against kube-rs's mocked API service: the real list and watch
//! requests (paths, field selectors, resource versions) answered with real JSON, and
//! the node view after each event.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

#[path = "../common/sources.rs"]
mod common;
mod harness;
mod lb_slices;
mod services;

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{bounded, nets, secret_key, Source};
use harness::{
    cilium_node, config_map, multi_pool_node, node, pod_ip_pool, secret, Call, MockApi, Route,
    WatchStream, WAIT,
};
use ipnet::IpNet;
use podcidr_speaker::sources::kube::{
    self as kube_source, BgpConfigMapRef, ConfigMapRef, KubeSourceConfig, Retry, SliceScope,
    WatchScope,
};
use podcidr_speaker::sources::model::{
    CidrRefusal, Drift, IpamMode, IpamOverride, NodeView, PoolAllocation, PoolRanges, ViewWarning,
};
use podcidr_speaker::sources::{channel, EventSink, Report, Resource, SourceUpdate};
use serde_json::json;

#[derive(Default)]
struct RecordingSink(Mutex<Vec<Report>>);

impl EventSink for RecordingSink {
    fn publish(&self, report: &Report) {
        self.0.lock().unwrap().push(report.clone());
    }
}

impl RecordingSink {
    fn take(&self) -> Vec<Report> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// The kube source under test, with the mocked API it talks to and the Kubernetes
/// Events it posted; the receiving end is the shared [`Source`].
struct Running {
    source: Source,
    api: MockApi,
    events: Arc<RecordingSink>,
}

impl Deref for Running {
    type Target = Source;

    fn deref(&self) -> &Source {
        &self.source
    }
}

impl DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Source {
        &mut self.source
    }
}

fn start(scope: WatchScope, bgp_config: bool, ipam: IpamOverride) -> Running {
    start_on(MockApi::start(), scope, bgp_config, ipam)
}

fn start_on(
    api: (kube::Client, MockApi),
    scope: WatchScope,
    bgp_config: bool,
    ipam: IpamOverride,
) -> Running {
    start_with(api, scope, bgp_config, ipam, false, SliceScope::All)
}

fn start_with(
    (client, api): (kube::Client, MockApi),
    scope: WatchScope,
    bgp_config: bool,
    ipam: IpamOverride,
    load_balancers: bool,
    slices: SliceScope,
) -> Running {
    let config = source_config(scope, bgp_config, ipam, load_balancers, slices);
    start_config((client, api), config)
}

/// The source's config as the tests start it: retries every 20 ms, every node's labels.
fn source_config(
    scope: WatchScope,
    bgp_config: bool,
    ipam: IpamOverride,
    load_balancers: bool,
    slices: SliceScope,
) -> KubeSourceConfig {
    KubeSourceConfig {
        scope,
        cilium_config: ConfigMapRef::cilium_config(),
        bgp_config: bgp_config.then(BgpConfigMapRef::default),
        ipam,
        retry: Retry::Fixed(Duration::from_millis(20)),
        load_balancers,
        slices,
        own_node: None,
    }
}

fn start_config((client, api): (kube::Client, MockApi), config: KubeSourceConfig) -> Running {
    let (tx, rx) = channel(16);
    let events = Arc::new(RecordingSink::default());
    let sink: Arc<dyn EventSink> = events.clone();
    let task = tokio::spawn(async move {
        let _ = kube_source::run(client, config, tx, sink).await;
    });
    Running {
        source: Source::new(rx, task),
        api,
        events,
    }
}

fn prefixes(view: &NodeView, node: &str) -> Vec<IpNet> {
    view.nodes
        .get(node)
        .unwrap_or_else(|| panic!("{node} not in view"))
        .prefixes
        .clone()
}

fn cilium_config(rv: &str, ipam: &str) -> serde_json::Value {
    config_map(
        "kube-system",
        "cilium-config",
        rv,
        json!({"ipam": ipam, "cluster-pool-ipv4-cidr": "10.5.0.0/16"}),
    )
}

/// Asserts a list request of the speaker's watchers, exactly as kube-rs sends it.
fn assert_list(call: &Call, path: &str, selector: Option<&str>) {
    let mut want = format!("{path}?");
    if let Some(selector) = selector {
        want.push_str(&format!("&fieldSelector={}", selector.replace('=', "%3D")));
    }
    want.push_str("&limit=500");
    assert_eq!(call.uri(), want);
}

/// Asserts a watch request: selector, resume point, bookmarks.
fn assert_watch(call: &Call, path: &str, selector: Option<&str>, resource_version: &str) {
    assert_eq!(call.request.uri().path(), path);
    assert!(call.is_watch(), "{}", call.uri());
    assert_eq!(
        call.param("fieldSelector").as_deref(),
        selector,
        "{}",
        call.uri()
    );
    assert_eq!(
        call.param("resourceVersion").as_deref(),
        Some(resource_version),
        "{}",
        call.uri()
    );
    assert_eq!(call.param("allowWatchBookmarks").as_deref(), Some("true"));
    // Explicit, because the client's read timeout is derived from it.
    assert_eq!(
        call.param("timeoutSeconds"),
        Some(kube_source::WATCH_TIMEOUT.as_secs().to_string()),
        "{}",
        call.uri()
    );
}

const NODES: &str = "/api/v1/nodes";
const CILIUM_NODES: &str = "/apis/cilium.io/v2/ciliumnodes";
const CONFIG_MAPS: &str = "/api/v1/namespaces/kube-system/configmaps";
const POD_IP_POOLS: &str = "/apis/cilium.io/v2alpha1/ciliumpodippools";

/// The DaemonSet's watchers: only its own Node and CiliumNode, the two ConfigMaps by
/// name; then every kind of watch event and the view after each.
#[tokio::test]
async fn local_scope_watches_own_objects_and_follows_every_event() {
    bounded(async {
        let mut s = start(
            WatchScope::Local {
                node: "master1".into(),
            },
            true,
            IpamOverride::Auto,
        );
        let by_name = |n: &str| format!("metadata.name={n}");

        // Initial lists, answered in an order that leaves cilium-config last: nothing
        // about the cluster may be sent before every resource is listed.
        let call = s.api.next(Route::Nodes).await;
        assert_list(&call, NODES, Some(&by_name("master1")));
        call.list(
            "Node",
            "v1",
            vec![node(
                "master1",
                "100",
                &["10.5.112.0/24"],
                json!({"rack": "r1"}),
            )],
            "100",
        );
        let call = s.api.next(Route::CiliumNodes).await;
        assert_list(&call, CILIUM_NODES, Some(&by_name("master1")));
        call.list(
            "CiliumNode",
            "cilium.io/v2",
            vec![cilium_node("master1", "110", &["10.5.113.0/24"])],
            "110",
        );
        let call = s.api.next(Route::BgpConfig).await;
        assert_list(&call, CONFIG_MAPS, Some(&by_name("bgp-config")));
        call.list(
            "ConfigMap",
            "v1",
            vec![config_map(
                "kube-system",
                "bgp-config",
                "120",
                json!({"config.yaml": "peers: []\n"}),
            )],
            "120",
        );
        assert_eq!(
            s.update().await,
            SourceUpdate::BgpConfigText(Some("peers: []\n".into()))
        );
        s.status(Resource::CiliumNodes, |st| st.synced).await;
        s.status(Resource::Nodes, |st| st.synced).await;
        s.no_update();
        assert!(!s.rx.status.borrow().ready());

        let call = s.api.next(Route::CiliumConfig).await;
        assert_list(&call, CONFIG_MAPS, Some(&by_name("cilium-config")));
        call.list(
            "ConfigMap",
            "v1",
            vec![cilium_config("130", "cluster-pool")],
            "130",
        );
        let view = s.view().await;
        assert_eq!(view.ipam, IpamMode::ClusterPool);
        assert_eq!(prefixes(&view, "master1"), nets(&["10.5.113.0/24"]));
        assert_eq!(
            view.nodes["master1"].drift.as_deref(),
            Some(&Drift {
                node_cidrs: nets(&["10.5.112.0/24"]),
                cilium_cidrs: nets(&["10.5.113.0/24"]),
            })
        );
        assert_eq!(
            view.nodes["master1"].internal_ipv4,
            Some("192.168.10.17".parse().unwrap())
        );
        assert!(matches!(
            s.events.take().as_slice(),
            [Report::Drift { node, ipam: IpamMode::ClusterPool, .. }] if &**node == "master1"
        ));
        s.status(Resource::CiliumConfig, |st| st.synced).await;
        assert!(s.rx.status.borrow().ready());

        // Each watcher resumes from its list's resource version.
        let call = s.api.next(Route::Nodes).await;
        assert_watch(&call, NODES, Some(&by_name("master1")), "100");
        let nodes = call.watch();
        let call = s.api.next(Route::CiliumNodes).await;
        assert_watch(&call, CILIUM_NODES, Some(&by_name("master1")), "110");
        let cilium = call.watch();
        let call = s.api.next(Route::CiliumConfig).await;
        assert_watch(&call, CONFIG_MAPS, Some(&by_name("cilium-config")), "130");
        let ccfg = call.watch();
        let call = s.api.next(Route::BgpConfig).await;
        assert_watch(&call, CONFIG_MAPS, Some(&by_name("bgp-config")), "120");
        let bgp = call.watch();

        // MODIFIED CiliumNode with a new CIDR: announced.
        cilium.modified(cilium_node("master1", "111", &["10.5.114.0/24"]));
        let view = s.view().await;
        assert_eq!(prefixes(&view, "master1"), nets(&["10.5.114.0/24"]));
        assert!(matches!(
            s.events.take().as_slice(),
            [Report::Drift { drift, .. }] if drift.cilium_cidrs == nets(&["10.5.114.0/24"])
        ));

        // MODIFIED with nothing we read changed: nothing sent.
        let before = s.status_now(Resource::CiliumNodes).events;
        let mut same = cilium_node("master1", "112", &["10.5.114.0/24"]);
        same["spec"]["health"] = json!({"ipv4": "10.5.114.9"});
        cilium.modified(same);
        s.status(Resource::CiliumNodes, |st| st.events > before)
            .await;
        s.no_update();

        // MODIFIED Node labels: the planner's selectors see them.
        nodes.modified(node(
            "master1",
            "101",
            &["10.5.112.0/24"],
            json!({"rack": "r2"}),
        ));
        let view = s.view().await;
        assert_eq!(view.nodes["master1"].labels["rack"], "r2");

        // BOOKMARK moves the resume point: after the server ends the watch, the next
        // watch starts from the bookmark.
        nodes.bookmark("Node", "v1", "150");
        nodes.close();
        let call = s.api.next(Route::Nodes).await;
        assert_watch(&call, NODES, Some(&by_name("master1")), "150");
        let nodes = call.watch();
        s.no_update();

        // ERROR 410: relist. The same objects: nothing sent.
        let relists = s.status_now(Resource::CiliumNodes).relists;
        cilium.gone();
        let call = s.api.next(Route::CiliumNodes).await;
        assert_list(&call, CILIUM_NODES, Some(&by_name("master1")));
        call.list(
            "CiliumNode",
            "cilium.io/v2",
            vec![cilium_node("master1", "160", &["10.5.114.0/24"])],
            "160",
        );
        s.status(Resource::CiliumNodes, |st| st.relists > relists)
            .await;
        s.no_update();
        let call = s.api.next(Route::CiliumNodes).await;
        assert_watch(&call, CILIUM_NODES, Some(&by_name("master1")), "160");
        let cilium = call.watch();

        // cilium-config switches the IPAM mode live: the Node's CIDRs now.
        ccfg.modified(cilium_config("131", "kubernetes"));
        let view = s.view().await;
        assert_eq!(view.ipam, IpamMode::Kubernetes);
        assert_eq!(prefixes(&view, "master1"), nets(&["10.5.112.0/24"]));
        assert!(matches!(
            s.events.take().as_slice(),
            [Report::Drift {
                ipam: IpamMode::Kubernetes,
                ..
            }]
        ));
        ccfg.modified(cilium_config("132", "cluster-pool"));
        assert_eq!(
            prefixes(&s.view().await, "master1"),
            nets(&["10.5.114.0/24"])
        );

        // DELETED CiliumNode (cluster-pool): the node has no prefixes left.
        cilium.deleted(cilium_node("master1", "161", &["10.5.114.0/24"]));
        let view = s.view().await;
        assert!(prefixes(&view, "master1").is_empty());
        assert_eq!(view.nodes["master1"].drift, None);

        // bgp-config edits and deletion.
        bgp.modified(config_map(
            "kube-system",
            "bgp-config",
            "121",
            json!({"config.yaml": "peers: [x]\n"}),
        ));
        assert_eq!(
            s.update().await,
            SourceUpdate::BgpConfigText(Some("peers: [x]\n".into()))
        );
        bgp.deleted(config_map("kube-system", "bgp-config", "122", json!({})));
        assert_eq!(s.update().await, SourceUpdate::BgpConfigText(None));

        // DELETED Node: gone from the view.
        nodes.deleted(node("master1", "170", &["10.5.112.0/24"], json!({})));
        let view = s.view().await;
        assert!(view.nodes.is_empty());

        // ADDED: the node and its CiliumNode come back.
        nodes.added(node("master1", "171", &["10.5.112.0/24"], json!({})));
        assert!(prefixes(&s.view().await, "master1").is_empty());
        cilium.added(cilium_node("master1", "172", &["10.5.115.0/24"]));
        assert_eq!(
            prefixes(&s.view().await, "master1"),
            nets(&["10.5.115.0/24"])
        );
    })
    .await;
}

/// Answers the first list of every resource of a cluster-scope source.
async fn sync_cluster(
    s: &mut Running,
    nodes: Vec<serde_json::Value>,
    cilium: Vec<serde_json::Value>,
    ipam: &str,
) -> [WatchStream; 3] {
    let call = s.api.next(Route::Nodes).await;
    assert_list(&call, NODES, None);
    call.list("Node", "v1", nodes, "100");
    let call = s.api.next(Route::CiliumNodes).await;
    assert_list(&call, CILIUM_NODES, None);
    call.list("CiliumNode", "cilium.io/v2", cilium, "200");
    let call = s.api.next(Route::CiliumConfig).await;
    call.list("ConfigMap", "v1", vec![cilium_config("300", ipam)], "300");
    let call = s.api.next(Route::Nodes).await;
    assert_watch(&call, NODES, None, "100");
    let n = call.watch();
    let call = s.api.next(Route::CiliumNodes).await;
    assert_watch(&call, CILIUM_NODES, None, "200");
    let c = call.watch();
    let call = s.api.next(Route::CiliumConfig).await;
    let cc = call.watch();
    [n, c, cc]
}

fn outage_objects() -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    let pairs = [
        ("master1", "10.5.112.0/24", "10.5.113.0/24"),
        ("master2", "10.5.113.0/24", "10.5.114.0/24"),
        ("master3", "10.5.114.0/24", "10.5.115.0/24"),
        ("worker1", "10.5.115.0/24", "10.5.112.0/24"),
    ];
    let nodes = pairs
        .iter()
        .map(|(n, cidr, _)| node(n, "100", &[cidr], json!({})))
        .collect();
    let cilium = pairs
        .iter()
        .map(|(n, _, cidr)| cilium_node(n, "200", &[cidr]))
        .collect();
    (nodes, cilium)
}

/// The outage, through the API: cluster-pool announces the CiliumNodes' CIDRs and
/// reports drift (log and Event) on all four; kubernetes announces the Nodes'.
#[tokio::test]
async fn cluster_scope_outage_permutation_follows_the_ipam_mode() {
    bounded(async {
        let mut s = start(WatchScope::Cluster, false, IpamOverride::Auto);
        let (nodes, cilium) = outage_objects();
        let [_n, _c, ccfg] = sync_cluster(&mut s, nodes, cilium, "cluster-pool").await;
        let view = s.view().await;
        let expect = |view: &NodeView, want: [&str; 4]| {
            let got: BTreeMap<&str, Vec<IpNet>> = view
                .nodes
                .iter()
                .map(|(k, v)| (&**k, v.prefixes.clone()))
                .collect();
            let want: BTreeMap<&str, Vec<IpNet>> = ["master1", "master2", "master3", "worker1"]
                .into_iter()
                .zip(want.map(|c| nets(&[c])))
                .collect();
            assert_eq!(got, want);
        };
        expect(
            &view,
            [
                "10.5.113.0/24",
                "10.5.114.0/24",
                "10.5.115.0/24",
                "10.5.112.0/24",
            ],
        );
        assert_eq!(view.drift_count(), 4);
        let drifted: Vec<String> = s
            .events
            .take()
            .into_iter()
            .filter_map(|r| match r {
                Report::Drift { node, uid, .. } => {
                    assert_eq!(uid.as_deref(), Some(&*format!("uid-{node}")));
                    Some(node.to_string())
                }
                _ => None,
            })
            .collect();
        assert_eq!(drifted, ["master1", "master2", "master3", "worker1"]);

        ccfg.modified(cilium_config("301", "kubernetes"));
        let view = s.view().await;
        assert_eq!(view.ipam, IpamMode::Kubernetes);
        expect(
            &view,
            [
                "10.5.112.0/24",
                "10.5.113.0/24",
                "10.5.114.0/24",
                "10.5.115.0/24",
            ],
        );
        assert_eq!(view.drift_count(), 4);
        assert_eq!(s.events.take().len(), 4, "mode change re-reports drift");

        // An unsupported mode is an error in the snapshot, not a withdrawal decided here.
        ccfg.modified(cilium_config("302", "eni"));
        let snapshot = s.cluster().await;
        assert!(
            matches!(&snapshot.view, Err(e) if e.to_string().contains("\"eni\"")),
            "{:?}",
            snapshot.view
        );
        assert_eq!(snapshot.state.nodes.len(), 4);
    })
    .await;
}

/// API trouble never withdraws: broken streams, failing watches and lists leave the
/// last state in force with the resource marked down; recovery with the same objects
/// sends nothing; recovery with changed objects sends the change.
#[tokio::test]
async fn api_outage_keeps_the_last_state_and_recovers() {
    bounded(async {
        let mut s = start(WatchScope::Cluster, false, IpamOverride::Auto);
        let (nodes, cilium) = outage_objects();
        let [n, _c, _cc] =
            sync_cluster(&mut s, nodes.clone(), cilium.clone(), "cluster-pool").await;
        let before = s.view().await;

        // The connection breaks; the re-watch is refused; the relist fails too.
        n.fail();
        let call = s.api.next(Route::Nodes).await;
        assert_watch(&call, NODES, None, "100");
        call.status_error(500, "InternalError");
        s.status(Resource::Nodes, |st| !st.up && st.errors >= 1)
            .await;
        let call = s.api.next(Route::Nodes).await;
        assert!(call.is_watch());
        call.watch().gone();
        let call = s.api.next(Route::Nodes).await;
        assert_list(&call, NODES, None);
        call.status_error(503, "ServiceUnavailable");
        let down = s
            .status(Resource::Nodes, |st| !st.up && st.errors >= 2)
            .await;
        assert!(down.last_error.is_some());
        s.no_update();
        assert!(s.rx.status.borrow().ready(), "an outage does not unsync");

        // Recovery: the same objects; nothing to send.
        let call = s.api.next(Route::Nodes).await;
        assert_list(&call, NODES, None);
        call.list("Node", "v1", nodes.clone(), "400");
        s.status(Resource::Nodes, |st| st.up && st.relists >= 2)
            .await;
        s.no_update();

        // The watch resumes and a change goes through.
        let call = s.api.next(Route::Nodes).await;
        assert_watch(&call, NODES, None, "400");
        let n = call.watch();
        n.modified(node(
            "master1",
            "401",
            &["10.5.112.0/24"],
            json!({"new": "label"}),
        ));
        let after = s.view().await;
        assert_eq!(after.nodes["master1"].labels["new"], "label");
        assert_eq!(
            prefixes(&after, "master1"),
            prefixes(&before, "master1"),
            "the prefixes never moved"
        );

        // A relist missing a node after the watch window expired is a real deletion.
        n.gone();
        let call = s.api.next(Route::Nodes).await;
        call.list("Node", "v1", nodes[..3].to_vec(), "500");
        let view = s.view().await;
        assert!(!view.nodes.contains_key("worker1"));
        assert_eq!(view.nodes.len(), 3);
    })
    .await;
}

/// The daemon's cluster-scope source keeps only its own node's labels (the planner reads
/// no other node's), and its snapshots only its own node's facts (what the Node says)
/// beside the view of every node; another node's label change alone sends nothing, its
/// other changes and the own node's label changes go through.
#[tokio::test]
async fn cluster_scope_keeps_only_its_own_nodes_labels() {
    bounded(async {
        let config = KubeSourceConfig {
            own_node: Some("master1".into()),
            ..source_config(
                WatchScope::Cluster,
                false,
                IpamOverride::Auto,
                false,
                SliceScope::All,
            )
        };
        let mut s = start_config(MockApi::start(), config);
        let labelled = |name: &str, rv: &str, cidr: &str| {
            node(name, rv, &[cidr], json!({"rack": format!("rack-{name}")}))
        };
        let (_, cilium) = outage_objects();
        let nodes = vec![
            labelled("master1", "100", "10.5.112.0/24"),
            labelled("master2", "100", "10.5.113.0/24"),
            labelled("master3", "100", "10.5.114.0/24"),
            labelled("worker1", "100", "10.5.115.0/24"),
        ];
        let [n, _c, _cc] = sync_cluster(&mut s, nodes.clone(), cilium, "kubernetes").await;
        let snapshot = s.cluster().await;
        let own: k8s_openapi::api::core::v1::Node =
            serde_json::from_value(nodes[0].clone()).unwrap();
        let (name, want) = podcidr_speaker::sources::objects::node_facts(&own).unwrap();
        assert_eq!(name, "master1");
        assert_eq!(
            snapshot.state.nodes.iter().collect::<Vec<_>>(),
            [(&name, &want)],
            "only the own node's facts are kept"
        );
        assert_eq!(
            snapshot.state.cilium_nodes.keys().collect::<Vec<_>>(),
            ["master1"]
        );
        assert!(snapshot.state.cilium_config.is_some());
        let view = snapshot.view.clone().expect("view");
        assert_eq!(
            view.nodes.keys().map(|k| &**k).collect::<Vec<_>>(),
            ["master1", "master2", "master3", "worker1"]
        );
        assert_eq!(view.nodes["master1"].labels["rack"], "rack-master1");
        assert!(
            view.nodes["master2"].labels.is_empty(),
            "another node's labels kept"
        );
        assert_eq!(prefixes(&view, "worker1"), nets(&["10.5.115.0/24"]));

        // Another node's labels alone: no change, nothing sent.
        let events = s.status(Resource::Nodes, |st| st.events >= 4).await.events;
        n.modified(node(
            "master2",
            "101",
            &["10.5.113.0/24"],
            json!({"rack": "r9"}),
        ));
        s.status(Resource::Nodes, |st| st.events > events).await;
        s.no_update();

        // Another node's pod CIDR: sent, its labels still not kept.
        n.modified(node(
            "worker1",
            "102",
            &["10.5.116.0/24"],
            json!({"rack": "r9"}),
        ));
        let view = s.view().await;
        assert_eq!(prefixes(&view, "worker1"), nets(&["10.5.116.0/24"]));
        assert!(view.nodes["worker1"].labels.is_empty());

        // The own node's labels: sent.
        n.modified(node(
            "master1",
            "103",
            &["10.5.112.0/24"],
            json!({"rack": "r7"}),
        ));
        let view = s.view().await;
        assert_eq!(view.nodes["master1"].labels["rack"], "r7");
    })
    .await;
}

/// One malformed object is skipped (keeping its last good facts); the rest of the list
/// and the watch go on.
#[tokio::test]
async fn malformed_objects_are_skipped_without_stopping_the_watch() {
    bounded(async {
        let mut s = start(WatchScope::Cluster, false, IpamOverride::Kubernetes);
        let nodes = vec![
            node("good1", "100", &["10.5.1.0/24"], json!({})),
            node("bad1", "100", &["10.5.300.0/24"], json!({})),
            node("good2", "100", &["10.5.2.0/24"], json!({})),
        ];
        let mut bad_shape = cilium_node("good2", "200", &[]);
        bad_shape["spec"]["ipam"]["podCIDRs"] = json!("10.5.2.0/24");
        let cilium = vec![cilium_node("good1", "200", &["10.5.1.0/24"]), bad_shape];
        let [n, c, _cc] = sync_cluster(&mut s, nodes, cilium, "kubernetes").await;
        let view = s.view().await;
        assert_eq!(
            view.nodes.keys().map(|k| &**k).collect::<Vec<_>>(),
            ["good1", "good2"]
        );
        let st = s.status_now(Resource::Nodes);
        assert_eq!(st.errors, 1);
        assert!(
            st.last_error.as_deref().is_some_and(|e| e.contains("bad1") && e.contains("10.5.300.0/24")),
            "{st:?}"
        );
        assert_eq!(s.status_now(Resource::CiliumNodes).errors, 1);

        // A good node turns bad: its last good facts stay.
        n.modified(node("good1", "101", &["10.5.1.0/24", "garbage"], json!({})));
        s.status(Resource::Nodes, |st| st.errors == 2).await;
        s.no_update();

        // An undecodable event line: skipped, the stream goes on.
        n.raw(r#"{"type":"MODIFIED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":7}}}"#);
        n.modified(node("good1", "102", &["10.5.9.0/24"], json!({})));
        let view = s.view().await;
        assert_eq!(prefixes(&view, "good1"), nets(&["10.5.9.0/24"]));
        let st = s.status_now(Resource::Nodes);
        assert!(st.up, "an undecodable event is not an outage: {st:?}");
        assert_eq!(st.errors, 3);

        // A relist in which good2 is malformed keeps good2's facts.
        n.gone();
        let call = s.api.next(Route::Nodes).await;
        call.list(
            "Node",
            "v1",
            vec![
                node("good1", "600", &["10.5.9.0/24"], json!({})),
                node("good2", "600", &["not-a-cidr"], json!({})),
            ],
            "600",
        );
        s.status(Resource::Nodes, |st| st.relists >= 2).await;
        s.no_update();

        // The CiliumNode watch was unaffected by all this.
        c.modified(cilium_node("good1", "201", &["10.5.9.0/24"]));
        let snapshot = s.cluster().await;
        assert_eq!(snapshot.state.cilium_nodes["good1"], nets(&["10.5.9.0/24"]));
        assert_eq!(snapshot.state.nodes["good2"].node_cidrs, nets(&["10.5.2.0/24"]));
    })
    .await;
}

/// A cluster-wide source in kubernetes mode whose lists answer one Node `n1`
/// (10.7.0.0/24), no CiliumNode CRD (404) and no cilium-config: started, and its first
/// snapshot.
async fn one_node_without_cilium_nodes() -> (Running, Arc<podcidr_speaker::sources::ClusterSnapshot>)
{
    let mut s = start(WatchScope::Cluster, false, IpamOverride::Kubernetes);
    let call = s.api.next(Route::Nodes).await;
    call.list(
        "Node",
        "v1",
        vec![node("n1", "100", &["10.7.0.0/24"], json!({}))],
        "100",
    );
    let call = s.api.next(Route::CiliumNodes).await;
    call.status_error(404, "NotFound");
    let call = s.api.next(Route::CiliumConfig).await;
    call.list("ConfigMap", "v1", vec![], "300");
    let snapshot = s.cluster().await;
    (s, snapshot)
}

/// Without the CiliumNode CRD (404 on the first list) the source still syncs: in
/// kubernetes mode the Nodes' CIDRs are announced.
#[tokio::test]
async fn missing_cilium_node_crd_counts_as_no_cilium_nodes() {
    bounded(async {
        let (mut s, snapshot) = one_node_without_cilium_nodes().await;
        assert_eq!(snapshot.state.cilium_config, None);
        let view = snapshot.view.clone().unwrap();
        assert_eq!(prefixes(&view, "n1"), nets(&["10.7.0.0/24"]));
        // The watcher keeps retrying the list.
        let call = s.api.next(Route::CiliumNodes).await;
        assert!(!call.is_watch());
    })
    .await;
}

/// Drift reaches the events.k8s.io API as a Warning Event on the Node.
#[tokio::test]
async fn kube_events_posts_a_drift_event_on_the_node() {
    use podcidr_speaker::sources::kube::events::KubeEvents;
    bounded(async {
        let (client, mut api) = MockApi::start();
        let (events, task) = KubeEvents::spawn(
            client,
            Some("speaker-master1".into()),
            Arc::new(podcidr_speaker::sources::kube::events::Unobserved),
        );
        events.publish(&Report::Drift {
            node: "master1".into(),
            uid: Some("uid-master1".into()),
            drift: Drift {
                node_cidrs: nets(&["10.5.112.0/24"]),
                cilium_cidrs: nets(&["10.5.113.0/24"]),
            },
            ipam: IpamMode::ClusterPool,
        });
        let mut call = api.next(Route::Events).await;
        assert_eq!(call.request.method(), http::Method::POST);
        assert_eq!(
            call.request.uri().path(),
            "/apis/events.k8s.io/v1/namespaces/default/events"
        );
        let body = call.body_json().await;
        assert_eq!(body["type"], "Warning");
        assert_eq!(body["reason"], "PodCIDRDrift");
        assert_eq!(body["reportingController"], "podcidr-speaker");
        assert_eq!(body["reportingInstance"], "speaker-master1");
        assert_eq!(
            body["regarding"],
            json!({"apiVersion": "v1", "kind": "Node", "name": "master1", "uid": "uid-master1"})
        );
        let note = body["note"].as_str().unwrap();
        assert!(
            note.contains("[10.5.112.0/24]") && note.contains("[10.5.113.0/24]"),
            "{note}"
        );
        call.json(http::StatusCode::CREATED, &body);
        drop(events);
        tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
        assert!(api.idle(Route::Events));
    })
    .await;
}

/// What the stop decision reads (issue 27) arrives through the Node watch: a drain
/// cordons and taints the node, the kubelet's graceful node shutdown turns Ready False
/// with "node is shutting down", each as a MODIFIED event as the API server sends it;
/// the node's facts follow and `routes::stop::decide` reads them. A Node that goes away
/// (DELETED) leaves no facts: the daemon, which saw it, decides node-deleted.
#[tokio::test]
async fn the_node_watch_carries_what_the_stop_decision_reads() {
    use podcidr_speaker::routes::stop::{decide, LeaveReason, NodeAtStop, StopKind, StopPolicy};
    bounded(async {
        let (mut s, snapshot) = one_node_without_cilium_nodes().await;
        let at_stop = |snapshot: &podcidr_speaker::sources::ClusterSnapshot| match snapshot
            .state
            .nodes
            .get("n1")
        {
            Some(f) => NodeAtStop::Present(f.lifecycle.clone()),
            None => NodeAtStop::Gone,
        };
        assert_eq!(
            decide(StopPolicy::Auto, &at_stop(&snapshot)),
            StopKind::Restart
        );
        let mut call = s.api.next(Route::Nodes).await;
        while !call.is_watch() {
            call = s.api.next(Route::Nodes).await;
        }
        let nodes = call.watch();

        // kubectl drain: cordoned, with the unschedulable taint.
        let mut drained = node("n1", "101", &["10.7.0.0/24"], json!({}));
        drained["spec"]["unschedulable"] = json!(true);
        drained["spec"]["taints"] = json!([
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
             "timeAdded": "2026-11-27T10:00:00Z"}
        ]);
        nodes.modified(drained.clone());
        let snapshot = s.cluster().await;
        assert!(snapshot.state.nodes["n1"].lifecycle.unschedulable);
        assert_eq!(
            decide(StopPolicy::Auto, &at_stop(&snapshot)),
            StopKind::Cordoned
        );

        // The kubelet's graceful node shutdown begins.
        let mut shutting = drained;
        shutting["metadata"]["resourceVersion"] = json!("102");
        shutting["status"]["conditions"] = json!([
            {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
             "message": "node is shutting down",
             "lastHeartbeatTime": "2026-11-27T10:01:00Z",
             "lastTransitionTime": "2026-11-27T10:01:00Z"}
        ]);
        nodes.modified(shutting);
        let snapshot = s.cluster().await;
        assert!(snapshot.state.nodes["n1"].lifecycle.shutting_down);
        assert_eq!(
            decide(StopPolicy::Auto, &at_stop(&snapshot)),
            StopKind::Leaving(LeaveReason::ShuttingDown)
        );

        // The Node deleted.
        nodes.deleted(node("n1", "103", &["10.7.0.0/24"], json!({})));
        let snapshot = s.cluster().await;
        assert_eq!(
            decide(StopPolicy::Auto, &at_stop(&snapshot)),
            StopKind::Leaving(LeaveReason::NodeDeleted)
        );
    })
    .await;
}

/// The stop decision reaches the events.k8s.io API as a Normal Event on the Node.
#[tokio::test]
async fn kube_events_posts_the_stop_decision_on_the_node() {
    use podcidr_speaker::sources::kube::events::KubeEvents;
    bounded(async {
        let (client, mut api) = MockApi::start();
        let (events, task) = KubeEvents::spawn(
            client,
            Some("n1".into()),
            Arc::new(podcidr_speaker::sources::kube::events::Unobserved),
        );
        events.publish(&Report::Stopping {
            node: "n1".into(),
            uid: Some("uid-n1".into()),
            decision: "cordoned",
            note: "node cordoned: pod CIDRs kept under graceful restart, LoadBalancer routes \
                   drained (65535:0, then withdrawn)"
                .into(),
        });
        let mut call = api.next(Route::Events).await;
        assert_eq!(call.request.method(), http::Method::POST);
        let body = call.body_json().await;
        assert_eq!(body["type"], "Normal");
        assert_eq!(body["reason"], "SpeakerStopping");
        assert_eq!(
            body["regarding"],
            json!({"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-n1"})
        );
        let note = body["note"].as_str().unwrap();
        assert!(note.starts_with("cordoned: node cordoned"), "{note}");
        call.json(http::StatusCode::CREATED, &body);
        drop(events);
        tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    })
    .await;
}

/// The source task ends once the daemon drops its receiver, even with no API traffic.
#[tokio::test]
async fn source_ends_when_the_receiver_is_dropped() {
    bounded(async {
        let (client, mut api) = MockApi::start();
        let (tx, rx) = channel(1);
        let config = source_config(
            WatchScope::Cluster,
            false,
            IpamOverride::Auto,
            false,
            SliceScope::All,
        );
        let source = Source::new(
            rx,
            tokio::spawn(kube_source::run(
                client,
                config,
                tx,
                Arc::new(RecordingSink::default()),
            )),
        );
        // The watchers are waiting on their lists when the daemon goes away.
        let _pending = api.next(Route::Nodes).await;
        assert!(source.close().await.is_err(), "ends with Closed");
    })
    .await;
}

/// A hung API server (it accepts the connection, reads the request and never answers),
/// on a real loopback socket: with the read bound the daemon's client gets, a list fails
/// after that bound and the watcher's backoff retries; without it (kube 5's default),
/// the same list is still waiting long after.
#[tokio::test]
async fn a_hung_api_request_is_bounded_by_the_read_timeout() {
    use kube::api::{Api, ListParams};
    use tokio::io::AsyncReadExt;

    bounded(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                held.push(s);
            }
        });
        let client = |bound: Option<Duration>| {
            let mut config = kube::Config::new(url.parse().unwrap());
            if let Some(t) = bound {
                kube_source::bound_reads(&mut config, t);
            }
            kube::Client::try_from(config).unwrap()
        };
        let list = |c: kube::Client| async move {
            Api::<k8s_openapi::api::core::v1::Node>::all(c)
                .list(&ListParams::default())
                .await
        };

        let bound = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let bounded_list = tokio::time::timeout(Duration::from_secs(10), list(client(Some(bound))))
            .await
            .expect("the bounded list returned");
        let took = started.elapsed();
        assert!(
            bounded_list.is_err(),
            "the hung server answered: {bounded_list:?}"
        );
        assert!(
            took >= bound && took < Duration::from_secs(5),
            "failed after {took:?}, the bound is {bound:?}"
        );

        let unbounded = tokio::time::timeout(Duration::from_secs(2), list(client(None))).await;
        assert!(
            unbounded.is_err(),
            "without a read timeout the list must still be waiting"
        );
        server.abort();

        // The daemon's bound leaves room for a quiet watch to end on its own.
        assert!(
            kube_source::API_READ_TIMEOUT > kube_source::WATCH_TIMEOUT + Duration::from_secs(5)
        );
    })
    .await;
}

/// The outage again, through a deleted cilium-config: on a cluster whose IPAM is
/// `kubernetes`, the ConfigMap's deletion must not switch auto mode to Cilium's default
/// (cluster-pool), which would announce the CiliumNode CIDRs. The last one seen stays
/// in force, the source says so, and nothing is sent until it comes back. Along the way
/// the ConfigMap and CiliumNode watches see every kind of event: BOOKMARK, ERROR 410
/// (relist), DELETED and ADDED.
#[tokio::test]
async fn a_deleted_cilium_config_changes_nothing_and_every_event_kind_is_followed() {
    use podcidr_speaker::sources::model::CILIUM_CONFIG_KEPT;
    bounded(async {
        let mut s = start(WatchScope::Cluster, false, IpamOverride::Auto);
        let (nodes, cilium) = outage_objects();
        let [_n, c, ccfg] = sync_cluster(&mut s, nodes, cilium, "kubernetes").await;
        let want_node_cidrs = |view: &NodeView| {
            assert_eq!(view.ipam, IpamMode::Kubernetes);
            assert_eq!(prefixes(view, "master1"), nets(&["10.5.112.0/24"]));
            assert_eq!(prefixes(view, "worker1"), nets(&["10.5.115.0/24"]));
        };
        want_node_cidrs(&s.view().await);
        s.status(Resource::CiliumConfig, |st| st.synced).await;

        // BOOKMARK on the ConfigMap watch, then the server ends it: the next watch
        // resumes from the bookmark, nothing is sent.
        ccfg.bookmark("ConfigMap", "v1", "350");
        ccfg.close();
        let call = s.api.next(Route::CiliumConfig).await;
        assert_watch(
            &call,
            CONFIG_MAPS,
            Some("metadata.name=cilium-config"),
            "350",
        );
        let ccfg = call.watch();
        // BOOKMARK on the CiliumNode watch as well.
        c.bookmark("CiliumNode", "cilium.io/v2", "250");
        c.close();
        let call = s.api.next(Route::CiliumNodes).await;
        assert_watch(&call, CILIUM_NODES, None, "250");
        let _c = call.watch();
        s.no_update();

        // DELETED: the mode stays kubernetes; nothing is sent, the status says why.
        let before = s.status_now(Resource::CiliumConfig).events;
        ccfg.deleted(cilium_config("351", "kubernetes"));
        let st = s
            .status(Resource::CiliumConfig, |st| st.events > before)
            .await;
        assert_eq!(st.last_error.as_deref(), Some(CILIUM_CONFIG_KEPT));
        s.no_update();

        // ERROR 410 while it is gone: the relist finds no cilium-config; still nothing
        // changes.
        let relists = s.status_now(Resource::CiliumConfig).relists;
        ccfg.gone();
        let call = s.api.next(Route::CiliumConfig).await;
        assert_list(&call, CONFIG_MAPS, Some("metadata.name=cilium-config"));
        call.list("ConfigMap", "v1", vec![], "360");
        s.status(Resource::CiliumConfig, |st| st.relists > relists)
            .await;
        s.no_update();
        let call = s.api.next(Route::CiliumConfig).await;
        assert_watch(
            &call,
            CONFIG_MAPS,
            Some("metadata.name=cilium-config"),
            "360",
        );
        let ccfg = call.watch();

        // ADDED back, same content: nothing to send, the warning is gone.
        let before = s.status_now(Resource::CiliumConfig).events;
        ccfg.added(cilium_config("361", "kubernetes"));
        let st = s
            .status(Resource::CiliumConfig, |st| st.events > before)
            .await;
        assert_eq!(st.last_error, None);
        s.no_update();

        // ADDED is followed like any other change: a new mode is applied.
        ccfg.modified(cilium_config("362", "cluster-pool"));
        let view = s.view().await;
        assert_eq!(view.ipam, IpamMode::ClusterPool);
        assert_eq!(prefixes(&view, "master1"), nets(&["10.5.113.0/24"]));
    })
    .await;
}

fn drift_report(node: &str) -> Report {
    Report::Drift {
        node: node.into(),
        uid: None,
        drift: Drift {
            node_cidrs: nets(&["10.5.112.0/24"]),
            cilium_cidrs: nets(&["10.5.113.0/24"]),
        },
        ipam: IpamMode::ClusterPool,
    }
}

/// The value of `podcidr_speaker_kube_events_lost_total{reason}` in the exposition.
fn events_lost(metrics: &podcidr_speaker::metrics::Metrics, reason: &str) -> f64 {
    let series = format!("podcidr_speaker_kube_events_lost_total{{reason=\"{reason}\"}} ");
    let text = metrics.encode();
    let line = text
        .lines()
        .find(|l| l.starts_with(&series))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"));
    line[series.len()..].trim().parse().expect("a number")
}

/// Events that cannot be written are counted by reason: one dropped on a full queue
/// (no request made for it), one the API server refuses (403), one whose request
/// breaks; the one accepted counts nothing.
#[tokio::test]
async fn kube_events_not_written_are_counted_by_reason() {
    use podcidr_speaker::sources::kube::events::KubeEvents;
    bounded(async {
        let (client, mut api) = MockApi::start();
        let metrics = podcidr_speaker::metrics::Metrics::new();
        for reason in ["queue_full", "refused", "failed"] {
            assert_eq!(
                events_lost(&metrics, reason),
                0.0,
                "{reason} from the start"
            );
        }
        let (events, task) = KubeEvents::with_queue(client, Some("s1".into()), metrics.clone(), 1);
        events.publish(&drift_report("n1"));
        // The task holds n1's request open: the queue of one takes n2, n3 is dropped.
        let first = api.next(Route::Events).await;
        events.publish(&drift_report("n2"));
        events.publish(&drift_report("n3"));
        assert_eq!(events_lost(&metrics, "queue_full"), 1.0);
        assert_eq!(events_lost(&metrics, "refused"), 0.0);
        first.status_error(403, "Forbidden");
        let mut second = api.next(Route::Events).await;
        let body = second.body_json().await;
        assert_eq!(body["regarding"]["name"], "n2");
        second.json(http::StatusCode::CREATED, &body);
        events.publish(&drift_report("n4"));
        let third = api.next(Route::Events).await;
        third.broken();
        drop(events);
        tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
        assert!(api.idle(Route::Events), "n3 was never sent");
        assert_eq!(events_lost(&metrics, "queue_full"), 1.0);
        assert_eq!(events_lost(&metrics, "refused"), 1.0);
        assert_eq!(events_lost(&metrics, "failed"), 1.0);
    })
    .await;
}

const SECRETS: &str = "/api/v1/namespaces/kube-system/secrets";

/// A request of the secret follower: a GET of the one Secret, or a watch of it alone;
/// never a list, never a watch of every Secret (RBAC grants only get and watch on the
/// named Secrets).
fn assert_secret_get(call: &Call, name: &str) {
    assert_eq!(call.request.method(), http::Method::GET);
    assert_eq!(call.request.uri().path(), format!("{SECRETS}/{name}"));
    assert!(!call.is_watch(), "{}", call.uri());
}

fn assert_secret_watch(call: &Call, name: &str, resource_version: &str) {
    assert_eq!(call.request.uri().path(), SECRETS);
    assert!(call.is_watch(), "a list of secrets: {}", call.uri());
    assert_eq!(
        call.param("fieldSelector"),
        Some(format!("metadata.name={name}")),
        "{}",
        call.uri()
    );
    assert_eq!(
        call.param("resourceVersion").as_deref(),
        Some(resource_version)
    );
    assert_eq!(call.param("limit"), None, "{}", call.uri());
}

/// The `password-secret` follower: the named Secret's data (base64 on the wire)
/// through GET and watch, a rotation, a deletion, a name added that does not exist, and
/// one the API refuses; each failure is that Secret's alone and never shows a value.
#[tokio::test]
async fn secret_follower_gets_and_watches_only_the_named_secrets() {
    use podcidr_speaker::sources::kube::secrets;
    use podcidr_speaker::sources::secrets::SecretError;
    bounded(async {
        let (client, mut api) = MockApi::start();
        let (tx, rx) = channel(16);
        let (names, names_rx) =
            tokio::sync::watch::channel(std::collections::BTreeSet::from(["tor-md5".to_owned()]));
        let mut source = Source::new(
            rx,
            tokio::spawn(secrets::run(
                client,
                "kube-system".into(),
                names_rx,
                Retry::Fixed(Duration::from_millis(20)),
                tx,
            )),
        );
        // Nothing read yet: pending, not missing.
        let v = source.secrets().await;
        assert!(secret_key(&v, "tor-md5", "tor-a").unwrap_err().is_pending());

        let get = api.next(Route::Secrets).await;
        assert_secret_get(&get, "tor-md5");
        // "old-key\n" and "b-key": a trailing line break is not part of the key.
        get.json(
            http::StatusCode::OK,
            &secret(
                "kube-system",
                "tor-md5",
                "5",
                json!({"tor-a": "b2xkLWtleQo=", "tor-b": "Yi1rZXk="}),
            ),
        );
        let v = source.secrets().await;
        assert_eq!(secret_key(&v, "tor-md5", "tor-a"), Ok("old-key".into()));
        assert_eq!(secret_key(&v, "tor-md5", "tor-b"), Ok("b-key".into()));

        let watch = api.next(Route::Secrets).await;
        assert_secret_watch(&watch, "tor-md5", "5");
        let stream = watch.watch();
        // Rotation of tor-a; tor-b unchanged.
        stream.modified(secret(
            "kube-system",
            "tor-md5",
            "6",
            json!({"tor-a": "bmV3LWtleQ==", "tor-b": "Yi1rZXk="}),
        ));
        let v = source.secrets().await;
        assert_eq!(secret_key(&v, "tor-md5", "tor-a"), Ok("new-key".into()));
        assert_eq!(secret_key(&v, "tor-md5", "tor-b"), Ok("b-key".into()));
        match secret_key(&v, "tor-md5", "tor-c") {
            Err(e @ SecretError::KeyMissing { .. }) => assert_eq!(
                e.to_string(),
                "password-secret: secret tor-md5 in namespace kube-system has no key tor-c"
            ),
            other => panic!("{other:?}"),
        }

        // Two more names: one that does not exist, one the API refuses.
        names.send_replace(
            ["tor-md5", "absent", "forbidden"]
                .map(String::from)
                .into_iter()
                .collect(),
        );
        let mut pending = vec!["absent", "forbidden"];
        while !pending.is_empty() {
            let call = api.next(Route::Secrets).await;
            let name = call.request.uri().path().rsplit('/').next().unwrap().to_owned();
            assert_secret_get(&call, &name);
            pending.retain(|n| *n != name);
            if name == "absent" {
                call.status_error(404, "NotFound");
            } else {
                call.status_error(403, "Forbidden");
            }
        }
        let v = loop {
            let v = source.secrets().await;
            let settled = ["absent", "forbidden"]
                .iter()
                .all(|n| !secret_key(&v, n, "k").is_err_and(|e| e.is_pending()));
            if settled {
                break v;
            }
        };
        assert!(matches!(
            secret_key(&v, "absent", "k"),
            Err(SecretError::SecretMissing { .. })
        ));
        let forbidden = secret_key(&v, "forbidden", "k").unwrap_err().to_string();
        assert!(
            forbidden.starts_with(
                "password-secret: secret forbidden in namespace kube-system cannot be read: api error 403"
            ),
            "{forbidden}"
        );
        // The others are unaffected.
        assert_eq!(secret_key(&v, "tor-md5", "tor-a"), Ok("new-key".into()));
        let status = source.status_now(Resource::Secrets);
        assert!(status.synced, "every name answered once: {status:?}");
        assert!(!status.up, "one name cannot be read");
        let absent_watch = loop {
            let call = api.next(Route::Secrets).await;
            if call.request.uri().path() == SECRETS {
                break call;
            }
            // The refused one is asked again after the backoff: still refused.
            assert_secret_get(&call, "forbidden");
            call.status_error(403, "Forbidden");
        };
        // A Secret that did not exist is watched from any version: its creation
        // arrives as ADDED.
        assert_secret_watch(&absent_watch, "absent", "0");
        let absent = absent_watch.watch();
        absent.added(secret("kube-system", "absent", "9", json!({"k": "Yi1rZXk="})));
        let v = loop {
            let v = source.secrets().await;
            if secret_key(&v, "absent", "k").is_ok() {
                break v;
            }
        };
        assert_eq!(secret_key(&v, "absent", "k"), Ok("b-key".into()));

        // The first Secret is deleted: missing; no fallback to no key.
        stream.deleted(secret("kube-system", "tor-md5", "10", json!({})));
        let v = loop {
            let v = source.secrets().await;
            if secret_key(&v, "tor-md5", "tor-a").is_err() {
                break v;
            }
        };
        assert_eq!(
            secret_key(&v, "tor-md5", "tor-a").unwrap_err().to_string(),
            "password-secret: secret tor-md5 not found in namespace kube-system"
        );
        let debug = format!("{v:?}");
        assert!(!debug.contains("new-key") && !debug.contains("b-key"), "{debug}");

        assert!(source.close().await.is_err(), "ends with Closed");
    })
    .await;
}

fn pools(view: &NodeView, node: &str) -> Vec<PoolAllocation> {
    view.nodes[node].pools.clone()
}

fn allocation(pool: &str, cidrs: &[&str]) -> PoolAllocation {
    PoolAllocation {
        pool: pool.into(),
        cidrs: nets(cidrs),
    }
}

/// A multi-pool cluster, through the API: the DaemonSet reads its own CiliumNode's
/// `spec.ipam.pools.allocated` and every CiliumPodIPPool; as the operator allocates
/// and releases CIDRs (a pool grows, a second pool appears, a CIDR is released) each
/// snapshot lists exactly the node's CIDRs, grouped by pool; a CIDR outside its pool is
/// refused; the Node's own spec.podCIDRs is neither announced nor drift.
#[tokio::test]
async fn multi_pool_allocations_grow_and_shrink_and_are_checked_against_their_pools() {
    bounded(async {
        let mut s = start_on(
            MockApi::start_with_pools(),
            WatchScope::Local {
                node: "worker1".into(),
            },
            false,
            IpamOverride::Auto,
        );
        let by_name = "metadata.name=worker1";
        let call = s.api.next(Route::Nodes).await;
        call.list(
            "Node",
            "v1",
            vec![node("worker1", "100", &["10.244.1.0/24"], json!({}))],
            "100",
        );
        let call = s.api.next(Route::CiliumNodes).await;
        assert_list(&call, CILIUM_NODES, Some(by_name));
        call.list(
            "CiliumNode",
            "cilium.io/v2",
            vec![multi_pool_node(
                "worker1",
                "200",
                &[("default", &["10.10.0.0/27", "fd00:10::/120"])],
            )],
            "200",
        );
        // Pools are few and cluster-wide: listed whole in local scope too.
        let call = s.api.next(Route::PodIpPools).await;
        assert_list(&call, POD_IP_POOLS, None);
        call.list(
            "CiliumPodIPPool",
            "cilium.io/v2alpha1",
            vec![
                pod_ip_pool("default", "250", &["10.10.0.0/16"], &["fd00:10::/104"]),
                pod_ip_pool("blue", "251", &["10.20.0.0/16"], &[]),
            ],
            "251",
        );
        s.status(Resource::PodIpPools, |st| st.synced).await;
        s.no_update();
        let call = s.api.next(Route::CiliumConfig).await;
        call.list(
            "ConfigMap",
            "v1",
            vec![config_map(
                "kube-system",
                "cilium-config",
                "300",
                json!({"ipam": "multi-pool", "cluster-pool-ipv4-cidr": "10.5.0.0/16"}),
            )],
            "300",
        );
        let snapshot = s.cluster().await;
        assert_eq!(
            snapshot.state.pod_ip_pools.as_ref().map(|p| p["default"].clone()),
            Some(PoolRanges {
                ipv4: nets(&["10.10.0.0/16"]),
                ipv6: nets(&["fd00:10::/104"]),
            })
        );
        let view = snapshot.view.clone().unwrap();
        assert_eq!(view.ipam, IpamMode::MultiPool);
        assert_eq!(
            prefixes(&view, "worker1"),
            nets(&["10.10.0.0/27", "fd00:10::/120"])
        );
        assert_eq!(view.drift_count(), 0, "the Node's podCIDRs are not in force");
        assert!(view.warnings.is_empty(), "{:?}", view.warnings);

        let call = s.api.next(Route::CiliumNodes).await;
        assert_watch(&call, CILIUM_NODES, Some(by_name), "200");
        let cn = call.watch();

        // The operator allocates a second CIDR of the default pool and one of blue.
        cn.modified(multi_pool_node(
            "worker1",
            "201",
            &[
                ("default", &["10.10.0.0/27", "fd00:10::/120", "10.10.0.32/27"]),
                ("blue", &["10.20.3.0/27"]),
            ],
        ));
        let view = s.view().await;
        assert_eq!(
            prefixes(&view, "worker1"),
            nets(&[
                "10.10.0.0/27",
                "fd00:10::/120",
                "10.10.0.32/27",
                "10.20.3.0/27"
            ])
        );
        assert_eq!(
            pools(&view, "worker1"),
            vec![
                allocation("default", &["10.10.0.0/27", "fd00:10::/120", "10.10.0.32/27"]),
                allocation("blue", &["10.20.3.0/27"]),
            ]
        );
        assert_eq!(
            view.nodes["worker1"].pool_of(&"10.20.3.0/27".parse().unwrap()),
            Some("blue")
        );

        // It releases the first default CIDR; blue gets one outside blue's range.
        cn.modified(multi_pool_node(
            "worker1",
            "202",
            &[
                ("default", &["fd00:10::/120", "10.10.0.32/27"]),
                ("blue", &["10.20.3.0/27", "10.30.0.0/27"]),
            ],
        ));
        let view = s.view().await;
        assert_eq!(
            prefixes(&view, "worker1"),
            nets(&["fd00:10::/120", "10.10.0.32/27", "10.20.3.0/27"])
        );
        assert_eq!(
            view.nodes["worker1"].refused,
            vec![(
                "10.30.0.0/27".parse().unwrap(),
                CidrRefusal::OutsidePool {
                    pool: "blue".into(),
                    ranges: nets(&["10.20.0.0/16"]),
                }
            )]
        );

        // An unchanged object (a status update) sends nothing.
        cn.modified(multi_pool_node(
            "worker1",
            "203",
            &[
                ("default", &["fd00:10::/120", "10.10.0.32/27"]),
                ("blue", &["10.20.3.0/27", "10.30.0.0/27"]),
            ],
        ));
        s.status(Resource::CiliumNodes, |st| st.events >= 4).await;
        s.no_update();

        // Blue is released altogether.
        cn.modified(multi_pool_node(
            "worker1",
            "204",
            &[("default", &["fd00:10::/120", "10.10.0.32/27"])],
        ));
        let view = s.view().await;
        assert_eq!(
            prefixes(&view, "worker1"),
            nets(&["fd00:10::/120", "10.10.0.32/27"])
        );
        assert_eq!(
            pools(&view, "worker1"),
            vec![allocation("default", &["fd00:10::/120", "10.10.0.32/27"])]
        );
        assert!(view.nodes["worker1"].refused.is_empty());

        // The pool's ranges change: the view follows.
        let call = s.api.next(Route::PodIpPools).await;
        assert_watch(&call, POD_IP_POOLS, None, "251");
        let pw = call.watch();
        pw.modified(pod_ip_pool("default", "252", &["10.10.1.0/24"], &["fd00:10::/104"]));
        let view = s.view().await;
        assert_eq!(prefixes(&view, "worker1"), nets(&["fd00:10::/120"]));
        assert!(matches!(
            &view.nodes["worker1"].refused[..],
            [(p, CidrRefusal::OutsidePool { pool, .. })] if *p == "10.10.0.32/27".parse::<IpNet>().unwrap() && pool == "default"
        ));
        // A pool deleted while a node still holds its CIDRs: announced, unchecked, said.
        pw.deleted(pod_ip_pool("default", "253", &["10.10.1.0/24"], &[]));
        let view = s.view().await;
        assert_eq!(
            prefixes(&view, "worker1"),
            nets(&["fd00:10::/120", "10.10.0.32/27"])
        );
        assert_eq!(
            view.warnings,
            vec![ViewWarning::PoolRangesUnknown {
                pool: Some("default".into())
            }]
        );
    })
    .await;
}

/// CiliumPodIPPools that cannot be listed (CRD not served, or no RBAC grant) do not
/// stall the source: it syncs, announces the allocations unchecked and says so; a
/// later successful list makes the check work.
#[tokio::test]
async fn unreadable_pod_ip_pools_announce_unchecked_with_a_warning() {
    bounded(async {
        let mut s = start_on(
            MockApi::start_with_pools(),
            WatchScope::Cluster,
            false,
            IpamOverride::MultiPool,
        );
        let call = s.api.next(Route::Nodes).await;
        call.list("Node", "v1", vec![node("n1", "100", &[], json!({}))], "100");
        let call = s.api.next(Route::CiliumNodes).await;
        call.list(
            "CiliumNode",
            "cilium.io/v2",
            vec![multi_pool_node(
                "n1",
                "200",
                &[("default", &["10.99.0.0/27"])],
            )],
            "200",
        );
        let call = s.api.next(Route::PodIpPools).await;
        call.status_error(403, "Forbidden");
        let call = s.api.next(Route::CiliumConfig).await;
        call.list("ConfigMap", "v1", vec![], "300");
        let snapshot = s.cluster().await;
        assert_eq!(snapshot.state.pod_ip_pools, None);
        let view = snapshot.view.clone().unwrap();
        assert_eq!(prefixes(&view, "n1"), nets(&["10.99.0.0/27"]));
        assert_eq!(
            view.warnings,
            vec![ViewWarning::PoolRangesUnknown { pool: None }]
        );
        let status = s.status_now(Resource::PodIpPools);
        assert!(status.synced && status.last_error.is_some(), "{status:?}");

        // Allowed again: the retried list makes the ranges known and the check refuses.
        let call = s.api.next(Route::PodIpPools).await;
        assert!(!call.is_watch());
        call.list(
            "CiliumPodIPPool",
            "cilium.io/v2alpha1",
            vec![pod_ip_pool("default", "400", &["10.10.0.0/16"], &[])],
            "400",
        );
        let view = s.view().await;
        assert!(prefixes(&view, "n1").is_empty());
        assert_eq!(view.refused_count(), 1);
        assert!(view.warnings.is_empty(), "{:?}", view.warnings);
    })
    .await;
}

/// Issue 29: a cilium-config MODIFIED event turning Cilium's embedded BGP speaker on
/// reaches the conflict rule (`routes::cilium`) through the watch, and from it the
/// metric, the `/readyz` reason and the Warning Event on the Node; turned off again,
/// the gauge is 0, the reason gone and a Normal Event says so.
#[tokio::test]
async fn cilium_config_turning_embedded_bgp_on_gives_the_metric_readyz_and_event() {
    use podcidr_speaker::daemon::cilium_bgp_report;
    use podcidr_speaker::routes::cilium::{decide, ConflictPolicy};
    use podcidr_speaker::sources::kube::events::{KubeEvents, Unobserved};
    let gauge = |metrics: &podcidr_speaker::metrics::Metrics, name: &str| -> f64 {
        let series = format!("podcidr_speaker_{name} ");
        let text = metrics.encode();
        let line = text
            .lines()
            .find(|l| l.starts_with(&series))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"));
        line[series.len()..].trim().parse().expect("a number")
    };
    let cilium_bgp = |rv: &str, lb: &str| {
        config_map(
            "kube-system",
            "cilium-config",
            rv,
            json!({"ipam": "cluster-pool", "cluster-pool-ipv4-cidr": "10.5.0.0/16",
                   "bgp-announce-lb-ip": lb}),
        )
    };
    bounded(async {
        let mut s = start(WatchScope::Cluster, false, IpamOverride::Auto);
        let (nodes, cilium) = outage_objects();
        let [_n, _c, ccfg] = sync_cluster(&mut s, nodes, cilium, "cluster-pool").await;
        let snapshot = s.cluster().await;
        let metrics = podcidr_speaker::metrics::Metrics::new();
        let (client, mut api) = MockApi::start();
        let (events, task) =
            KubeEvents::spawn(client, Some("master1".into()), Arc::new(Unobserved));
        let before = decide(ConflictPolicy::Hold, snapshot.state.cilium_config.as_ref());
        assert_eq!(before.conflict, None);
        metrics.record_cilium_bgp(&before, 0);
        assert_eq!(gauge(&metrics, "cilium_bgp_conflict"), 0.0);

        // On: the watch event carries the key, the rule holds, each report says so.
        ccfg.modified(cilium_bgp("301", "true"));
        let snapshot = s.cluster().await;
        let on = decide(ConflictPolicy::Hold, snapshot.state.cilium_config.as_ref());
        assert!(on.holding(), "{on:?}");
        metrics.record_cilium_bgp(&on, 2);
        assert_eq!(gauge(&metrics, "cilium_bgp_conflict"), 1.0);
        assert_eq!(gauge(&metrics, "sessions_held"), 2.0);
        let ready = metrics.readiness_at(std::time::Instant::now());
        assert!(!ready.ready);
        assert!(
            ready
                .reasons
                .iter()
                .any(|r| r.contains("bgp-announce-lb-ip: true")
                    && r.contains("no new session (--cilium-bgp-conflict hold), 2 held back")),
            "{ready:?}"
        );
        let uid = snapshot.state.nodes["master1"].uid.clone();
        events.publish(&cilium_bgp_report(&before, &on, "master1", uid.clone()).unwrap());
        let mut call = api.next(Route::Events).await;
        assert_eq!(call.request.method(), http::Method::POST);
        let body = call.body_json().await;
        assert_eq!(body["type"], "Warning");
        assert_eq!(body["reason"], "CiliumBGPConflict");
        assert_eq!(body["regarding"]["kind"], "Node");
        assert_eq!(body["regarding"]["name"], "master1");
        let note = body["note"].as_str().unwrap();
        assert!(
            note.starts_with("cilium-config has bgp-announce-lb-ip: true")
                && note.contains("opens no new session")
                && note.contains("To fix: set bgp-announce-pod-cidr and bgp-announce-lb-ip"),
            "{note}"
        );
        call.json(http::StatusCode::CREATED, &body);
        assert_eq!(
            cilium_bgp_report(&on, &on, "master1", None),
            None,
            "once per change"
        );

        // Off again: resolved everywhere.
        ccfg.modified(cilium_bgp("302", "false"));
        let snapshot = s.cluster().await;
        let off = decide(ConflictPolicy::Hold, snapshot.state.cilium_config.as_ref());
        assert_eq!(off.conflict, None);
        metrics.record_cilium_bgp(&off, 0);
        assert_eq!(gauge(&metrics, "cilium_bgp_conflict"), 0.0);
        assert_eq!(gauge(&metrics, "sessions_held"), 0.0);
        let ready = metrics.readiness_at(std::time::Instant::now());
        assert!(
            !ready.reasons.iter().any(|r| r.contains("bgp-announce")),
            "{ready:?}"
        );
        events.publish(&cilium_bgp_report(&on, &off, "master1", uid).unwrap());
        let mut call = api.next(Route::Events).await;
        let body = call.body_json().await;
        assert_eq!(body["type"], "Normal");
        assert_eq!(body["reason"], "CiliumBGPConflictResolved");
        call.json(http::StatusCode::CREATED, &body);
        drop(events);
        tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    })
    .await;
}
