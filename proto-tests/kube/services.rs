//! The LoadBalancer watchers with the full slice watch (`SliceScope::All`: every Service
//! and EndpointSlice of the cluster; the scoped watches are `lb_slices.rs`') against
//! the mocked API service: the real list and watch requests answered with the JSON the
//! API server sends (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR 410), and the
//! `SourceUpdate::Lb` deltas after each.

use crate::common::bounded;
use crate::harness::{endpoint_slice, service, Call, MockApi, Route, WatchStream};
use crate::{assert_list, assert_watch, outage_objects, start_with, sync_cluster, Running};
use podcidr_speaker::sources::kube::{SliceScope, WatchScope};
use podcidr_speaker::sources::model::IpamOverride;
use podcidr_speaker::sources::services::{LbUpdate, TrafficPolicy};
use podcidr_speaker::sources::{Resource, SourceUpdate};
use serde_json::{json, Value};

pub(crate) const SERVICES: &str = "/api/v1/services";
pub(crate) const SLICES: &str = "/apis/discovery.k8s.io/v1/endpointslices";

/// One update in a line: what it is about and the facts the planner will use.
pub(crate) fn describe(update: &LbUpdate) -> String {
    match update {
        LbUpdate::Service {
            key,
            facts: Some(f),
        } => {
            let policy = match f.policy {
                TrafficPolicy::Cluster => "cluster",
                TrafficPolicy::Local => "local",
            };
            let ips: Vec<String> = f.ingress_ips.iter().map(ToString::to_string).collect();
            format!(
                "service {key} lb={} {policy} [{}]",
                f.load_balancer,
                ips.join(" ")
            )
        }
        LbUpdate::Service { key, facts: None } => format!("service {key} deleted"),
        LbUpdate::Slice {
            key,
            facts: Some(f),
        } => {
            let nodes: Vec<String> = f
                .ready_by_node
                .iter()
                .map(|(n, c)| format!("{n}:{c}"))
                .collect();
            let service = f.service.as_ref().map(ToString::to_string);
            format!(
                "slice {key} of {} [{}]",
                service.unwrap_or_default(),
                nodes.join(" ")
            )
        }
        LbUpdate::Slice { key, facts: None } => format!("slice {key} deleted"),
        LbUpdate::Synced => "synced".into(),
    }
}

impl Running {
    pub(crate) async fn lb(&mut self, count: usize) -> Vec<String> {
        let mut out = Vec::new();
        for _ in 0..count {
            match self.update().await {
                SourceUpdate::Lb(update) => out.push(describe(&update)),
                other => panic!("expected a loadbalancer update, got {other:?} after {out:?}"),
            }
        }
        out
    }
}

/// Answers a list request of the Services' watcher (cluster-wide, no selector).
pub(crate) fn list_services(call: Call, items: Vec<Value>, resource_version: &str) {
    assert_list(&call, SERVICES, None);
    call.list("Service", "v1", items, resource_version);
}

/// Answers a list request of the EndpointSlices' watcher (cluster-wide, no selector).
fn list_slices(call: Call, items: Vec<Value>, resource_version: &str) {
    assert_list(&call, SLICES, None);
    call.list(
        "EndpointSlice",
        "discovery.k8s.io/v1",
        items,
        resource_version,
    );
}

/// A `type: LoadBalancer` Service.
pub(crate) fn lb(namespace: &str, name: &str, rv: &str, policy: &str, ips: &[&str]) -> Value {
    service(namespace, name, rv, "LoadBalancer", policy, ips)
}

/// A cluster-scope source whose Node, CiliumNode and cilium-config lists are answered
/// and whose first view has been received; its three watches are returned. Every
/// EndpointSlice is watched ([`SliceScope::All`]).
async fn started(load_balancers: bool) -> (Running, [WatchStream; 3]) {
    started_with(load_balancers, SliceScope::All).await
}

/// As [`started`], with the EndpointSlices of `slices`.
pub(crate) async fn started_with(
    load_balancers: bool,
    slices: SliceScope,
) -> (Running, [WatchStream; 3]) {
    let mut s = start_with(
        MockApi::start(),
        WatchScope::Cluster,
        false,
        IpamOverride::Kubernetes,
        load_balancers,
        slices,
    );
    let (nodes, cilium) = outage_objects();
    let watches = sync_cluster(&mut s, nodes, cilium, "kubernetes").await;
    s.view().await;
    (s, watches)
}

/// Both first lists, then `Synced` once; then each watch event sends exactly the
/// object whose facts changed (a status-only edit sends nothing); a BOOKMARK moves the
/// resume point; after a 410 Gone the relist sends exactly the differences, the
/// deletion of a Service that disappeared during the gap included.
#[tokio::test]
async fn services_and_slices_are_sent_as_exact_deltas_across_a_410_relist() {
    bounded(async {
        let (mut s, _watches) = started(true).await;
        assert!(!s.rx.status.borrow().ready(), "services not listed yet");

        // The Services' first list (cluster-wide, no selector): one update each.
        let call = s.api.next(Route::Services).await;
        list_services(
            call,
            vec![
                lb("shop", "web", "500", "Local", &["198.51.100.10"]),
                lb("shop", "api", "501", "Cluster", &["198.51.100.11"]),
                service("default", "kubernetes", "10", "ClusterIP", "Cluster", &[]),
            ],
            "510",
        );
        assert_eq!(
            s.lb(3).await,
            [
                "service default/kubernetes lb=false cluster []",
                "service shop/api lb=true cluster [198.51.100.11]",
                "service shop/web lb=true local [198.51.100.10]",
            ]
        );
        s.status(Resource::Services, |st| st.synced).await;
        s.no_update();
        assert!(
            !s.rx.status.borrow().ready(),
            "endpointslices not listed yet"
        );

        // The EndpointSlices' first list: one update each, then Synced.
        let call = s.api.next(Route::EndpointSlices).await;
        list_slices(
            call,
            vec![
                endpoint_slice(
                    "shop",
                    "web-7xk2p",
                    "600",
                    "web",
                    &[
                        ("n1", true, false),
                        ("n2", true, false),
                        ("n3", false, true),
                    ],
                ),
                endpoint_slice("shop", "api-q9s4d", "601", "api", &[("n2", true, false)]),
            ],
            "610",
        );
        assert_eq!(
            s.lb(3).await,
            [
                "slice shop/api-q9s4d of shop/api [n2:1]",
                "slice shop/web-7xk2p of shop/web [n1:1 n2:1]",
                "synced",
            ]
        );
        s.status(Resource::EndpointSlices, |st| st.synced).await;
        assert!(s.rx.status.borrow().ready());

        let call = s.api.next(Route::Services).await;
        assert_watch(&call, SERVICES, None, "510");
        let services = call.watch();
        let call = s.api.next(Route::EndpointSlices).await;
        assert_watch(&call, SLICES, None, "610");
        let slices = call.watch();

        // A status-only edit (a condition added, a new resourceVersion) and an
        // annotation: nothing is sent.
        let before = s.status_now(Resource::Services).events;
        let mut web = lb("shop", "web", "520", "Local", &["198.51.100.10"]);
        web["status"]["conditions"] = json!([{"type": "LoadBalancerReady", "status": "True",
            "reason": "Allocated", "message": "", "lastTransitionTime": "2026-11-20T08:00:02Z"}]);
        web["metadata"]["annotations"] = json!({"example.com/owner": "team-a"});
        services.modified(web);
        s.status(Resource::Services, |st| st.events > before).await;
        s.no_update();

        // MODIFIED: the allocator moved web to another IP.
        services.modified(lb("shop", "web", "521", "Local", &["198.51.100.20"]));
        assert_eq!(
            s.lb(1).await,
            ["service shop/web lb=true local [198.51.100.20]"]
        );

        // MODIFIED slice: n2's endpoint of web starts terminating.
        slices.modified(endpoint_slice(
            "shop",
            "web-7xk2p",
            "620",
            "web",
            &[
                ("n1", true, false),
                ("n2", false, true),
                ("n3", false, true),
            ],
        ));
        assert_eq!(s.lb(1).await, ["slice shop/web-7xk2p of shop/web [n1:1]"]);

        // A Service whose facts cannot be read: skipped, counted, its facts kept.
        let errors = s.status_now(Resource::Services).errors;
        services.modified(lb("shop", "api", "522", "Everywhere", &[]));
        let st = s.status(Resource::Services, |st| st.errors > errors).await;
        assert!(
            st.last_error
                .as_deref()
                .is_some_and(|e| e.contains("shop/api") && e.contains("Everywhere")),
            "{st:?}"
        );
        assert!(st.up);
        s.no_update();

        // ADDED slice and DELETED Service.
        slices.added(endpoint_slice(
            "shop",
            "web-b2v8c",
            "621",
            "web",
            &[("n4", true, false)],
        ));
        assert_eq!(s.lb(1).await, ["slice shop/web-b2v8c of shop/web [n4:1]"]);
        services.deleted(lb("shop", "api", "523", "Cluster", &["198.51.100.11"]));
        assert_eq!(s.lb(1).await, ["service shop/api deleted"]);

        // BOOKMARK, then the server ends the watch: the next one resumes there.
        services.bookmark("Service", "v1", "700");
        services.close();
        let call = s.api.next(Route::Services).await;
        assert_watch(&call, SERVICES, None, "700");
        let services = call.watch();
        s.no_update();

        // 410 Gone. During the gap web moved again, kubernetes was deleted and late
        // was created; the relist sends exactly that, additions first, and no Synced.
        let relists = s.status_now(Resource::Services).relists;
        services.gone();
        let call = s.api.next(Route::Services).await;
        list_services(
            call,
            vec![
                lb("shop", "web", "810", "Local", &["198.51.100.30"]),
                lb("shop", "late", "811", "Cluster", &["198.51.100.40"]),
            ],
            "820",
        );
        assert_eq!(
            s.lb(3).await,
            [
                "service shop/late lb=true cluster [198.51.100.40]",
                "service shop/web lb=true local [198.51.100.30]",
                "service default/kubernetes deleted",
            ]
        );
        s.status(Resource::Services, |st| st.relists > relists)
            .await;
        s.no_update();
        let call = s.api.next(Route::Services).await;
        assert_watch(&call, SERVICES, None, "820");
        let _services = call.watch();

        // 410 on the slices with the same facts under new resource versions: nothing.
        let relists = s.status_now(Resource::EndpointSlices).relists;
        slices.gone();
        let call = s.api.next(Route::EndpointSlices).await;
        list_slices(
            call,
            vec![
                endpoint_slice("shop", "api-q9s4d", "899", "api", &[("n2", true, false)]),
                endpoint_slice("shop", "web-b2v8c", "900", "web", &[("n4", true, false)]),
                endpoint_slice(
                    "shop",
                    "web-7xk2p",
                    "901",
                    "web",
                    &[("n1", true, false), ("n2", false, true)],
                ),
            ],
            "910",
        );
        s.status(Resource::EndpointSlices, |st| st.relists > relists)
            .await;
        s.no_update();
        let call = s.api.next(Route::EndpointSlices).await;
        assert_watch(&call, SLICES, None, "910");
        let slices = call.watch();

        // DELETED slice.
        slices.deleted(endpoint_slice("shop", "web-b2v8c", "920", "web", &[]));
        assert_eq!(s.lb(1).await, ["slice shop/web-b2v8c deleted"]);
    })
    .await;
}

/// A refused first list (403: the ClusterRole lacks the grant) keeps the resource down
/// and the speaker unready, sends nothing, and is retried; the list that then succeeds
/// sends the facts and `Synced`.
#[tokio::test]
async fn a_forbidden_first_list_is_retried_and_nothing_is_sent_meanwhile() {
    bounded(async {
        let (mut s, _watches) = started(true).await;
        let call = s.api.next(Route::EndpointSlices).await;
        list_slices(call, vec![], "5");
        s.status(Resource::EndpointSlices, |st| st.synced).await;
        let call = s.api.next(Route::Services).await;
        call.status_error(403, "Forbidden");
        let st = s
            .status(Resource::Services, |st| !st.up && st.errors >= 1)
            .await;
        assert!(!st.synced);
        assert!(!s.rx.status.borrow().ready());
        s.no_update();
        let call = s.api.next(Route::Services).await;
        list_services(
            call,
            vec![lb("a", "b", "6", "Cluster", &["2001:db8::1"])],
            "7",
        );
        assert_eq!(
            s.lb(2).await,
            ["service a/b lb=true cluster [2001:db8::1]", "synced"]
        );
        assert!(s.rx.status.borrow().ready());
    })
    .await;
}

/// Off (`load_balancers: false`), neither Services nor EndpointSlices are listed or
/// watched, and readiness does not wait for them.
#[tokio::test]
async fn services_are_not_watched_when_off() {
    bounded(async {
        let (mut s, _watches) = started(false).await;
        s.status(Resource::CiliumConfig, |st| st.synced).await;
        assert!(s.rx.status.borrow().ready());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(s.api.idle(Route::Services));
        assert!(s.api.idle(Route::EndpointSlices));
        assert!(!s
            .rx
            .status
            .borrow()
            .resources
            .contains_key(&Resource::Services));
        s.no_update();
    })
    .await;
}
