//! The API emulation (`proto-tests/common/apiserver.rs`) as kube-rs sees it over HTTP
//! through a kubeconfig: its unit tests (the conflict rules), then lists and watches
//! with the field selector the allocator uses, the status patch's precondition, and two
//! `Elector`s competing for one Lease through it, each write recorded under its writer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/apiserver.rs"]
mod apiserver;

use std::time::Duration;

use apiserver::{load_balancer, ApiServer, Key};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use podcidr_speaker::allocate::lease::{Elector, Leadership, Timings};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

async fn client(api: &ApiServer, dir: &std::path::Path, who: &str) -> kube::Client {
    let path = api.kubeconfig(dir, who);
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&path).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("podcidr-apiserver-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// List, watch from the list's version with `spec.type=LoadBalancer`, and a status patch
/// carrying a stale resourceVersion refused with 409, the fresh one accepted.
#[tokio::test]
async fn kube_rs_lists_watches_and_patches_status_with_its_precondition() {
    tokio::time::timeout(WAIT * 3, async {
        let api = ApiServer::start().await;
        let dir = tempdir("watch");
        let client = client(&api, &dir, "alloc").await;
        api.create("services", "default", load_balancer("default", "a", 80))
            .unwrap();
        let mut cluster_ip = load_balancer("default", "c", 80);
        cluster_ip["spec"]["type"] = json!("ClusterIP");
        api.create("services", "default", cluster_ip).unwrap();

        let services: Api<Service> = Api::all(client.clone());
        let lb = ListParams::default().fields("spec.type=LoadBalancer");
        let list = services.list(&lb).await.unwrap();
        let names: Vec<_> = list
            .items
            .iter()
            .map(|s| s.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a"]);
        let rv = list.metadata.resource_version.unwrap();

        let wp = WatchParams::default().fields("spec.type=LoadBalancer");
        let mut events = services.watch(&wp, &rv).await.unwrap().boxed();
        api.create("services", "default", load_balancer("default", "b", 81))
            .unwrap();
        // c becomes a LoadBalancer: ADDED to this watch; a stops being one: DELETED.
        api.patch(
            &Key::new("services", "default", "c"),
            &json!({"spec": {"type": "LoadBalancer"}}),
        )
        .unwrap();
        api.patch(
            &Key::new("services", "default", "a"),
            &json!({"spec": {"type": "NodePort"}}),
        )
        .unwrap();
        let mut seen = Vec::new();
        for _ in 0..3 {
            match events.try_next().await.unwrap().unwrap() {
                WatchEvent::Added(s) => seen.push(format!("ADDED {}", s.metadata.name.unwrap())),
                // As the API server sends it: the content it last had in this watch.
                WatchEvent::Deleted(s) => {
                    let kind = s.spec.as_ref().and_then(|s| s.type_.clone());
                    seen.push(format!("DELETED {} {kind:?}", s.metadata.name.unwrap()))
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            seen,
            ["ADDED b", "ADDED c", "DELETED a Some(\"LoadBalancer\")"]
        );

        let ns: Api<Service> = Api::namespaced(client.clone(), "default");
        let b = ns.get("b").await.unwrap();
        let status = |rv: &str, ip: &str| {
            json!({"metadata": {"resourceVersion": rv},
                   "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}})
        };
        let fresh = b.metadata.resource_version.clone().unwrap();
        let patched = ns
            .patch_status(
                "b",
                &PatchParams::default(),
                &Patch::Merge(status(&fresh, "10.0.0.1")),
            )
            .await
            .unwrap();
        let ingress = patched
            .status
            .unwrap()
            .load_balancer
            .unwrap()
            .ingress
            .unwrap();
        assert_eq!(ingress[0].ip.as_deref(), Some("10.0.0.1"));
        match ns
            .patch_status(
                "b",
                &PatchParams::default(),
                &Patch::Merge(status(&fresh, "10.0.0.2")),
            )
            .await
        {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 409),
            other => panic!("a stale version must conflict: {other:?}"),
        }
        match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Modified(s) => assert_eq!(s.metadata.name.as_deref(), Some("b")),
            other => panic!("{other:?}"),
        }
        let writes = api.writes();
        let codes: Vec<(String, u16)> = writes.iter().map(|w| (w.who.clone(), w.code)).collect();
        assert_eq!(
            codes,
            [("alloc".to_owned(), 200), ("alloc".to_owned(), 409)]
        );
        assert_eq!(
            writes[0].path,
            "/api/v1/namespaces/default/services/b/status"
        );
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await
    .expect("bounded");
}

/// Two electors (short timings) through the emulation: exactly one leads; the leader
/// dropped without release (as a SIGKILL leaves it), the other takes over only after
/// the lease duration; released, at once. Every Lease write is recorded under its
/// writer, and no write of a deposed replica follows its successor's takeover.
#[tokio::test]
async fn two_electors_hand_over_through_the_emulation() {
    tokio::time::timeout(Duration::from_secs(40), async {
        let api = ApiServer::start().await;
        let dir = tempdir("electors");
        let timings = Timings {
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(300),
        };
        let lease = "kube-system/alloc".parse().unwrap();
        let a = Elector::spawn(client(&api, &dir, "a").await, lease, "a".into(), timings);
        let mut a_rx = a.leadership();
        tokio::time::timeout(WAIT, a_rx.wait_for(|l| l.is_leader()))
            .await
            .unwrap()
            .unwrap();
        let lease = "kube-system/alloc".parse().unwrap();
        let b = Elector::spawn(client(&api, &dir, "b").await, lease, "b".into(), timings);
        let mut b_rx = b.leadership();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(a_rx.borrow().is_leader() && !b_rx.borrow().is_leader());
        let key = Key::new("leases", "kube-system", "alloc");
        assert_eq!(api.get(&key).unwrap()["spec"]["holderIdentity"], "a");

        // a dies without a word: b waits out the lease duration, then takes over.
        let killed = std::time::Instant::now();
        drop(a);
        tokio::time::timeout(WAIT, b_rx.wait_for(|l| l.is_leader()))
            .await
            .unwrap()
            .unwrap();
        let waited = killed.elapsed();
        assert!(
            waited >= Duration::from_millis(2700),
            "took over after {waited:?}"
        );
        let record = api.get(&key).unwrap();
        assert_eq!(record["spec"]["holderIdentity"], "b");
        assert_eq!(record["spec"]["leaseTransitions"], 1);
        let b_took = api
            .writes()
            .into_iter()
            .find(|w| w.who == "b" && w.code == 200)
            .unwrap()
            .at;
        assert!(
            api.writes().iter().all(|w| w.who != "a" || w.at < b_took),
            "a wrote after b took over"
        );

        // c joins, b releases: c leads at once (no lease duration to wait).
        let lease = "kube-system/alloc".parse().unwrap();
        let c = Elector::spawn(client(&api, &dir, "c").await, lease, "c".into(), timings);
        let mut c_rx = c.leadership();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!c_rx.borrow().is_leader());
        let released = std::time::Instant::now();
        b.release().await;
        assert_eq!(*b_rx.borrow(), Leadership::Follower);
        tokio::time::timeout(WAIT, c_rx.wait_for(|l| l.is_leader()))
            .await
            .unwrap()
            .unwrap();
        assert!(
            released.elapsed() < Duration::from_secs(1),
            "{:?}",
            released.elapsed()
        );
        assert_eq!(api.get(&key).unwrap()["spec"]["leaseTransitions"], 2);
        c.release().await;
        assert_eq!(api.get(&key).unwrap()["spec"]["holderIdentity"], "");
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await
    .expect("bounded");
}

/// kube-rs' watcher, both ways it starts (a list then a watch; a streaming list ended by
/// its bookmark), sees the existing LoadBalancer Service, then a new one.
#[tokio::test]
async fn kube_rs_watcher_starts_by_list_and_by_streaming_list() {
    use kube::runtime::watcher::{watcher, Config, Event};
    tokio::time::timeout(WAIT * 2, async {
        let api = ApiServer::start().await;
        let dir = tempdir("watcher");
        let client = client(&api, &dir, "w").await;
        api.create("services", "default", load_balancer("default", "a", 80))
            .unwrap();
        for config in [Config::default(), Config::default().streaming_lists()] {
            let services: Api<Service> = Api::all(client.clone());
            let mut events = watcher(services, config.fields("spec.type=LoadBalancer")).boxed();
            let mut names = Vec::new();
            loop {
                match events.try_next().await.unwrap().unwrap() {
                    Event::Init => {}
                    Event::InitApply(s) => names.push(s.metadata.name.unwrap()),
                    Event::InitDone => break,
                    other => panic!("{other:?}"),
                }
            }
            assert!(names.contains(&"a".to_owned()), "{names:?}");
            let new = format!("n{}", names.len());
            api.create("services", "default", load_balancer("default", &new, 80))
                .unwrap();
            match events.try_next().await.unwrap().unwrap() {
                Event::Apply(s) => assert_eq!(s.metadata.name, Some(new)),
                other => panic!("{other:?}"),
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await
    .expect("bounded");
}
