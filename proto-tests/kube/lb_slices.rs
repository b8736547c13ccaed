//! The EndpointSlice watches scoped to the LoadBalancer Services the speaker could
//! announce (`SliceScope::LoadBalancers`), against the mocked API service: the label
//! selectors they send, their re-establishment (make-before-break) when the set of
//! Services changes, a 410 relist, a Service that becomes or stops being a
//! LoadBalancer, equal Service names in two namespaces, a slice that moves between
//! Services of two watches; the `SourceUpdate::Lb` deltas after each. The Services are
//! listed and watched with the `spec.type=LoadBalancer` field selector, answered as the
//! API server does (only LoadBalancers listed; a type change into or out of it comes as
//! ADDED or DELETED), or refused by an API server that does not know that field.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::common::bounded;
use crate::harness::{endpoint_slice, service, Call, Route, WatchStream};
use crate::services::{lb, list_services, started_with, SERVICES, SLICES};
use crate::{assert_watch, Running};
use podcidr_speaker::sources::kube::lb_slices::SELECTOR_BYTES;
use podcidr_speaker::sources::kube::services::LB_SERVICES;
use podcidr_speaker::sources::kube::SliceScope;
use podcidr_speaker::sources::Resource;
use serde_json::{json, Value};

/// Scoped to Services without a class, with the default selector bound.
fn scoped() -> SliceScope {
    SliceScope::load_balancers(&[])
}

/// Asserts a list request of a scoped slice watch: cluster-wide, with this label
/// selector.
fn assert_slice_list(call: &Call, selector: &str) {
    assert_eq!(call.request.uri().path(), SLICES, "{}", call.uri());
    assert!(!call.is_watch(), "expected a list, got {}", call.uri());
    assert_eq!(
        call.param("labelSelector").as_deref(),
        Some(selector),
        "{}",
        call.uri()
    );
}

/// Answers a list request of the scoped Services' watch as the API server does: the
/// `spec.type=LoadBalancer` field selector asked, only the LoadBalancers of `items`.
fn list_lb_services(call: Call, items: Vec<Value>, resource_version: &str) {
    assert_eq!(call.request.uri().path(), SERVICES, "{}", call.uri());
    assert!(!call.is_watch(), "expected a list, got {}", call.uri());
    assert_eq!(
        call.param("fieldSelector").as_deref(),
        Some(LB_SERVICES),
        "{}",
        call.uri()
    );
    let items = items
        .into_iter()
        .filter(|s| s["spec"]["type"] == "LoadBalancer")
        .collect();
    call.list("Service", "v1", items, resource_version);
}

/// Answers a list request of a scoped slice watch with `selector`.
fn list_slices(call: Call, selector: &str, items: Vec<Value>, resource_version: &str) {
    assert_slice_list(&call, selector);
    call.list(
        "EndpointSlice",
        "discovery.k8s.io/v1",
        items,
        resource_version,
    );
}

/// Answers a watch request of a scoped slice watch with `selector`, resuming at
/// `resource_version`.
fn watch_slices(call: Call, selector: &str, resource_version: &str) -> WatchStream {
    assert_watch(&call, SLICES, None, resource_version);
    assert_eq!(
        call.param("labelSelector").as_deref(),
        Some(selector),
        "{}",
        call.uri()
    );
    call.watch()
}

impl Running {
    /// Waits until `count` more EndpointSlice events have been applied.
    async fn slice_events(&mut self, count: u64) {
        let before = self.status_now(Resource::EndpointSlices).events;
        self.status(Resource::EndpointSlices, |st| st.events >= before + count)
            .await;
    }

    /// No EndpointSlice request comes (none is waiting after a while).
    async fn no_slice_request(&mut self) {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(self.api.idle(Route::EndpointSlices), "no new slice watch");
    }
}

/// The Services' first list decides the one selector: only the LoadBalancer Services
/// of a served class (not a ClusterIP, not another loadBalancerClass). Those are held
/// back until their slices are listed, the others sent at once; then the slice watch
/// follows its events; a 410 relists with the same selector and sends exactly the
/// differences; a Services relist that changes nothing re-establishes nothing.
#[tokio::test]
async fn only_the_slices_of_announceable_services_are_watched_across_a_410() {
    bounded(async {
        let (mut s, _watches) = started_with(true, scoped()).await;
        let mut classy = lb("shop", "classy", "503", "Cluster", &["198.51.100.12"]);
        classy["spec"]["loadBalancerClass"] = json!("example.com/other");
        let call = s.api.next(Route::Services).await;
        list_lb_services(
            call,
            vec![
                lb("shop", "web", "500", "Local", &["198.51.100.10"]),
                lb("shop", "api", "501", "Cluster", &["198.51.100.11"]),
                service("default", "kubernetes", "10", "ClusterIP", "Cluster", &[]),
                service("shop", "internal", "502", "ClusterIP", "Cluster", &[]),
                classy,
            ],
            "510",
        );
        assert_eq!(
            s.lb(1).await,
            ["service shop/classy lb=true cluster [198.51.100.12]"]
        );
        s.no_update();
        assert!(!s.rx.status.borrow().ready(), "slices not listed yet");

        let selector = "kubernetes.io/service-name in (api,web)";
        let call = s.api.next(Route::EndpointSlices).await;
        list_slices(
            call,
            selector,
            vec![
                endpoint_slice(
                    "shop",
                    "web-7xk2p",
                    "600",
                    "web",
                    &[("n1", true, false), ("n2", true, false)],
                ),
                endpoint_slice("shop", "api-q9s4d", "601", "api", &[("n2", true, false)]),
            ],
            "610",
        );
        assert_eq!(
            s.lb(5).await,
            [
                "slice shop/api-q9s4d of shop/api [n2:1]",
                "slice shop/web-7xk2p of shop/web [n1:1 n2:1]",
                "service shop/api lb=true cluster [198.51.100.11]",
                "service shop/web lb=true local [198.51.100.10]",
                "synced",
            ]
        );
        s.status(Resource::EndpointSlices, |st| st.synced).await;
        assert!(s.rx.status.borrow().ready());
        let call = s.api.next(Route::Services).await;
        assert_watch(&call, SERVICES, Some(LB_SERVICES), "510");
        let services = call.watch();
        let call = s.api.next(Route::EndpointSlices).await;
        let slices = watch_slices(call, selector, "610");

        slices.added(endpoint_slice(
            "shop",
            "web-b2v8c",
            "621",
            "web",
            &[("n4", true, false)],
        ));
        assert_eq!(s.lb(1).await, ["slice shop/web-b2v8c of shop/web [n4:1]"]);

        // 410: the relist asks with the same selector; during the gap n2's endpoint of
        // web started terminating and web-b2v8c went away.
        slices.gone();
        let call = s.api.next(Route::EndpointSlices).await;
        list_slices(
            call,
            selector,
            vec![
                endpoint_slice("shop", "api-q9s4d", "899", "api", &[("n2", true, false)]),
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
        assert_eq!(
            s.lb(2).await,
            [
                "slice shop/web-7xk2p of shop/web [n1:1]",
                "slice shop/web-b2v8c deleted",
            ]
        );
        let call = s.api.next(Route::EndpointSlices).await;
        let _slices = watch_slices(call, selector, "910");

        // A Services relist with the same facts: no update, no new slice watch.
        services.gone();
        let call = s.api.next(Route::Services).await;
        let mut classy = lb("shop", "classy", "503", "Cluster", &["198.51.100.12"]);
        classy["spec"]["loadBalancerClass"] = json!("example.com/other");
        list_lb_services(
            call,
            vec![
                lb("shop", "web", "500", "Local", &["198.51.100.10"]),
                lb("shop", "api", "501", "Cluster", &["198.51.100.11"]),
                service("default", "kubernetes", "10", "ClusterIP", "Cluster", &[]),
                service("shop", "internal", "502", "ClusterIP", "Cluster", &[]),
                classy,
            ],
            "920",
        );
        let call = s.api.next(Route::Services).await;
        assert_watch(&call, SERVICES, Some(LB_SERVICES), "920");
        let _services = call.watch();
        s.no_slice_request().await;
        s.no_update();
    })
    .await;
}

/// A Service that becomes a LoadBalancer waits for its slices: a new watch (the old
/// names and the new one) lists while the old watch keeps delivering, then replaces
/// it; the slices come before the Service. One that stops being a LoadBalancer is sent
/// at once, then its slices' deletions, and the watch narrows again; the last one
/// deleted stops the watch.
#[tokio::test]
async fn a_service_that_becomes_or_stops_being_a_load_balancer_re_scopes_make_before_break() {
    bounded(async {
        let (mut s, _watches) = started_with(true, scoped()).await;
        let call = s.api.next(Route::Services).await;
        list_lb_services(
            call,
            vec![
                lb("shop", "web", "500", "Local", &["198.51.100.10"]),
                service("shop", "internal", "502", "ClusterIP", "Cluster", &[]),
            ],
            "510",
        );
        s.no_update();
        let web_only = "kubernetes.io/service-name in (web)";
        let call = s.api.next(Route::EndpointSlices).await;
        list_slices(
            call,
            web_only,
            vec![endpoint_slice(
                "shop",
                "web-7xk2p",
                "600",
                "web",
                &[("n1", true, false)],
            )],
            "610",
        );
        assert_eq!(
            s.lb(3).await,
            [
                "slice shop/web-7xk2p of shop/web [n1:1]",
                "service shop/web lb=true local [198.51.100.10]",
                "synced",
            ]
        );
        let call = s.api.next(Route::Services).await;
        assert_watch(&call, SERVICES, Some(LB_SERVICES), "510");
        let services = call.watch();
        let call = s.api.next(Route::EndpointSlices).await;
        let old = watch_slices(call, web_only, "610");

        // internal becomes a LoadBalancer, which the field selector's watch sends as
        // ADDED: held back, a second watch lists.
        services.added(lb("shop", "internal", "520", "Cluster", &["198.51.100.20"]));
        let both = "kubernetes.io/service-name in (internal,web)";
        let call = s.api.next(Route::EndpointSlices).await;
        assert_slice_list(&call, both);
        s.no_update();
        // Meanwhile the old watch is still in force.
        old.modified(endpoint_slice(
            "shop",
            "web-7xk2p",
            "621",
            "web",
            &[("n1", true, false), ("n3", true, false)],
        ));
        assert_eq!(
            s.lb(1).await,
            ["slice shop/web-7xk2p of shop/web [n1:1 n3:1]"]
        );
        list_slices(
            call,
            both,
            vec![
                endpoint_slice(
                    "shop",
                    "web-7xk2p",
                    "621",
                    "web",
                    &[("n1", true, false), ("n3", true, false)],
                ),
                endpoint_slice(
                    "shop",
                    "internal-4hq7w",
                    "622",
                    "internal",
                    &[("n2", true, false)],
                ),
            ],
            "630",
        );
        assert_eq!(
            s.lb(2).await,
            [
                "slice shop/internal-4hq7w of shop/internal [n2:1]",
                "service shop/internal lb=true cluster [198.51.100.20]",
            ]
        );
        assert!(
            old.dropped().await,
            "the old watch is stopped once replaced"
        );
        let call = s.api.next(Route::EndpointSlices).await;
        let new = watch_slices(call, both, "630");

        // internal stops being a LoadBalancer, which the field selector's watch sends
        // as DELETED (the object as it is now): sent at once, then its slice's deletion;
        // the watch narrows (make-before-break again) and sends nothing new.
        services.deleted(service(
            "shop",
            "internal",
            "640",
            "ClusterIP",
            "Cluster",
            &[],
        ));
        assert_eq!(
            s.lb(2).await,
            [
                "service shop/internal deleted",
                "slice shop/internal-4hq7w deleted",
            ]
        );
        let call = s.api.next(Route::EndpointSlices).await;
        list_slices(
            call,
            web_only,
            vec![endpoint_slice(
                "shop",
                "web-7xk2p",
                "621",
                "web",
                &[("n1", true, false), ("n3", true, false)],
            )],
            "650",
        );
        assert!(new.dropped().await);
        let call = s.api.next(Route::EndpointSlices).await;
        let narrow = watch_slices(call, web_only, "650");
        s.no_update();

        // The last LoadBalancer goes: its Service and slice are deleted, no watch is left.
        services.deleted(lb("shop", "web", "660", "Local", &["198.51.100.10"]));
        assert_eq!(
            s.lb(2).await,
            ["service shop/web deleted", "slice shop/web-7xk2p deleted"]
        );
        assert!(narrow.dropped().await, "nothing left to watch");
        s.no_slice_request().await;
    })
    .await;
}

/// With a selector bound that holds one name, `api` and `web` get a watch each. `web`
/// is a LoadBalancer in namespace `a` and a ClusterIP in `b`: b's slice, which the `web`
/// watch also returns, counts for nothing until b/web becomes a LoadBalancer (then at
/// once: its name is already watched). A slice relabeled from api to web is seen by
/// both watches in either order: the last writer is in force.
#[tokio::test]
async fn equal_names_in_two_namespaces_and_a_slice_moving_between_two_watches() {
    bounded(async {
        let head = "kubernetes.io/service-name in (".len();
        let budget = head + "web)".len() + 1;
        assert!(budget < SELECTOR_BYTES);
        let scope = SliceScope::LoadBalancers {
            classes: BTreeSet::<Arc<str>>::new(),
            selector_bytes: budget,
        };
        let (mut s, _watches) = started_with(true, scope).await;
        let call = s.api.next(Route::Services).await;
        list_lb_services(
            call,
            vec![
                lb("a", "web", "500", "Cluster", &["198.51.100.10"]),
                lb("a", "api", "501", "Cluster", &["198.51.100.11"]),
                service("b", "web", "502", "ClusterIP", "Cluster", &[]),
            ],
            "510",
        );
        s.no_update();
        let (api, web) = (
            "kubernetes.io/service-name in (api)",
            "kubernetes.io/service-name in (web)",
        );
        // Two watches, started together: take both requests, in whatever order.
        let first = s.api.next(Route::EndpointSlices).await;
        let second = s.api.next(Route::EndpointSlices).await;
        let (api_call, web_call) = if first.param("labelSelector").as_deref() == Some(api) {
            (first, second)
        } else {
            (second, first)
        };
        for call in [&api_call, &web_call] {
            let selector = call.param("labelSelector").unwrap_or_default();
            assert!(selector.len() <= budget, "{selector}");
        }
        list_slices(
            api_call,
            api,
            vec![endpoint_slice(
                "a",
                "api-1",
                "600",
                "api",
                &[("n1", true, false)],
            )],
            "610",
        );
        assert_eq!(
            s.lb(2).await,
            [
                "slice a/api-1 of a/api [n1:1]",
                "service a/api lb=true cluster [198.51.100.11]",
            ]
        );
        list_slices(
            web_call,
            web,
            vec![
                endpoint_slice("a", "web-1", "601", "web", &[("n2", true, false)]),
                endpoint_slice("b", "web-1", "602", "web", &[("n3", true, false)]),
            ],
            "620",
        );
        assert_eq!(
            s.lb(3).await,
            [
                "slice a/web-1 of a/web [n2:1]",
                "service a/web lb=true cluster [198.51.100.10]",
                "synced",
            ]
        );
        let call = s.api.next(Route::Services).await;
        let services = call.watch();
        let first = s.api.next(Route::EndpointSlices).await;
        let second = s.api.next(Route::EndpointSlices).await;
        let (api_call, web_call) = if first.param("labelSelector").as_deref() == Some(api) {
            (first, second)
        } else {
            (second, first)
        };
        let api_watch = watch_slices(api_call, api, "610");
        let web_watch = watch_slices(web_call, web, "620");

        // b/web becomes a LoadBalancer: its name is already watched, so its slice and
        // then the Service go out at once, and no watch is re-established.
        services.added(lb("b", "web", "630", "Cluster", &["198.51.100.30"]));
        assert_eq!(
            s.lb(2).await,
            [
                "slice b/web-1 of b/web [n3:1]",
                "service b/web lb=true cluster [198.51.100.30]",
            ]
        );
        s.no_slice_request().await;

        // a/api-1 is relabeled to web: the web watch's ADDED comes first, then the api
        // watch's DELETED, which changes nothing.
        web_watch.added(endpoint_slice(
            "a",
            "api-1",
            "640",
            "web",
            &[("n1", true, false)],
        ));
        assert_eq!(s.lb(1).await, ["slice a/api-1 of a/web [n1:1]"]);
        api_watch.deleted(endpoint_slice(
            "a",
            "api-1",
            "640",
            "web",
            &[("n1", true, false)],
        ));
        s.slice_events(1).await;
        s.no_update();

        // And back to api, the other way round: DELETED first (gone for a moment), then
        // ADDED.
        web_watch.deleted(endpoint_slice(
            "a",
            "api-1",
            "650",
            "api",
            &[("n1", true, false)],
        ));
        assert_eq!(s.lb(1).await, ["slice a/api-1 deleted"]);
        api_watch.added(endpoint_slice(
            "a",
            "api-1",
            "650",
            "api",
            &[("n1", true, false)],
        ));
        assert_eq!(s.lb(1).await, ["slice a/api-1 of a/api [n1:1]"]);

        // An endpoint change of b/web's namesake in a third namespace, where it is no
        // LoadBalancer: received (same name), sent nowhere.
        web_watch.added(endpoint_slice(
            "c",
            "web-1",
            "660",
            "web",
            &[("n4", true, false)],
        ));
        s.slice_events(1).await;
        s.no_update();
    })
    .await;
}

/// Without a LoadBalancer Service there is nothing to watch: the EndpointSlices count
/// as listed with the Services, the speaker is ready, and no slice request is made.
#[tokio::test]
async fn no_load_balancer_service_means_no_slice_watch_and_ready() {
    bounded(async {
        let (mut s, _watches) = started_with(true, scoped()).await;
        let call = s.api.next(Route::Services).await;
        list_lb_services(
            call,
            vec![service(
                "default",
                "kubernetes",
                "10",
                "ClusterIP",
                "Cluster",
                &[],
            )],
            "20",
        );
        assert_eq!(s.lb(1).await, ["synced"]);
        let st = s.status(Resource::EndpointSlices, |st| st.synced).await;
        assert!(st.up, "nothing to watch is not down: {st:?}");
        assert!(s.rx.status.borrow().ready());
        let call = s.api.next(Route::Services).await;
        let _services = call.watch();
        s.no_slice_request().await;
    })
    .await;
}

/// An API server that does not know `spec.type` as a Service field label (before
/// Kubernetes 1.31) refuses the filtered list (400): the refusal is not an outage
/// (Services stay up), every Service is listed and watched without a field selector
/// from then on, and the source gives what the filter would: the other Services are
/// skipped (not sent, not kept), a type change away from LoadBalancer, now a MODIFIED,
/// is the Service's deletion.
#[tokio::test]
async fn a_refused_service_field_selector_falls_back_to_every_service() {
    bounded(async {
        let (mut s, _watches) = started_with(true, scoped()).await;
        let call = s.api.next(Route::Services).await;
        assert_eq!(
            call.param("fieldSelector").as_deref(),
            Some(LB_SERVICES),
            "{}",
            call.uri()
        );
        call.status_error(400, "BadRequest");
        let call = s.api.next(Route::Services).await;
        list_services(
            call,
            vec![
                lb("shop", "web", "500", "Local", &["198.51.100.10"]),
                service("shop", "internal", "502", "ClusterIP", "Cluster", &[]),
            ],
            "510",
        );
        s.no_update();
        let services_status = s.status_now(Resource::Services);
        assert!(
            services_status.up && services_status.errors == 0,
            "the refused selector is no outage: {services_status:?}"
        );
        let web_only = "kubernetes.io/service-name in (web)";
        let call = s.api.next(Route::EndpointSlices).await;
        list_slices(
            call,
            web_only,
            vec![endpoint_slice(
                "shop",
                "web-7xk2p",
                "600",
                "web",
                &[("n1", true, false)],
            )],
            "610",
        );
        assert_eq!(
            s.lb(3).await,
            [
                "slice shop/web-7xk2p of shop/web [n1:1]",
                "service shop/web lb=true local [198.51.100.10]",
                "synced",
            ]
        );
        let call = s.api.next(Route::Services).await;
        assert_watch(&call, SERVICES, None, "510");
        let services = call.watch();
        let call = s.api.next(Route::EndpointSlices).await;
        let slices = watch_slices(call, web_only, "610");

        // An edit of a ClusterIP Service: nothing. web stops being a LoadBalancer:
        // unfiltered, a MODIFIED; deleted at once, its slice deleted, its watch stopped.
        services.modified(service(
            "shop",
            "internal",
            "615",
            "ClusterIP",
            "Cluster",
            &[],
        ));
        services.modified(service("shop", "web", "620", "ClusterIP", "Local", &[]));
        assert_eq!(
            s.lb(2).await,
            ["service shop/web deleted", "slice shop/web-7xk2p deleted"]
        );
        assert!(slices.dropped().await, "nothing left to watch");
    })
    .await;
}

/// The scoped watches take the API server's bookmarks: when it ends a watch (its
/// timeout, every 290 s), the Services' and the slices' watches resume from the last
/// bookmark with the same selectors, no list is made and nothing is sent. Without
/// bookmarks a resume point older than the API server's window would cost a relist.
#[tokio::test]
async fn ended_watches_resume_from_their_bookmarks_without_a_relist() {
    bounded(async {
        let (mut s, _watches) = started_with(true, scoped()).await;
        let call = s.api.next(Route::Services).await;
        list_lb_services(
            call,
            vec![lb("shop", "web", "500", "Local", &["198.51.100.10"])],
            "510",
        );
        let web_only = "kubernetes.io/service-name in (web)";
        let call = s.api.next(Route::EndpointSlices).await;
        list_slices(
            call,
            web_only,
            vec![endpoint_slice(
                "shop",
                "web-7xk2p",
                "600",
                "web",
                &[("n1", true, false)],
            )],
            "610",
        );
        assert_eq!(s.lb(3).await.last().map(String::as_str), Some("synced"));
        let call = s.api.next(Route::Services).await;
        assert_watch(&call, SERVICES, Some(LB_SERVICES), "510");
        let services = call.watch();
        let call = s.api.next(Route::EndpointSlices).await;
        let slices = watch_slices(call, web_only, "610");

        services.bookmark("Service", "v1", "700");
        services.close();
        let call = s.api.next(Route::Services).await;
        assert_watch(&call, SERVICES, Some(LB_SERVICES), "700");
        let _services = call.watch();

        slices.bookmark("EndpointSlice", "discovery.k8s.io/v1", "710");
        slices.close();
        let call = s.api.next(Route::EndpointSlices).await;
        let _slices = watch_slices(call, web_only, "710");
        s.no_slice_request().await;
        s.no_update();
    })
    .await;
}
