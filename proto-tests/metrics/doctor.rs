//! `doctor` on the outage (four nodes whose Node and CiliumNode CIDRs are permuted: all
//! four must be flagged), on a healthy cluster, from files through the library and the
//! built binary, and in-cluster against kube-rs's mocked API service.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use ipnet::IpNet;
use podcidr_speaker::allocate::lease::LeaseRef;
use podcidr_speaker::commands::doctor::{self, diagnose, Diagnosis, ModeOrigin};
use podcidr_speaker::sources::file;
use podcidr_speaker::sources::kube::ConfigMapRef;
use podcidr_speaker::sources::model::{CidrSource, IpamMode, IpamOverride};
use serde_json::{json, Value};

use crate::{crate_root, outage_dir};

#[path = "../kube/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::{cilium_node, config_map, node, service, MockApi, Route};

/// The outage's pairs: (node, Node CIDR, CiliumNode CIDR).
const OUTAGE: [(&str, &str, &str); 4] = [
    ("master1", "10.5.112.0/24", "10.5.113.0/24"),
    ("master2", "10.5.113.0/24", "10.5.114.0/24"),
    ("master3", "10.5.114.0/24", "10.5.115.0/24"),
    ("worker1", "10.5.115.0/24", "10.5.112.0/24"),
];

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn outage(ipam: IpamOverride) -> Diagnosis {
    diagnose(&file::load(&outage_dir()).unwrap(), ipam)
}

#[test]
fn the_outage_flags_all_four_nodes_with_the_ciliumnode_in_force() {
    let d = outage(IpamOverride::Auto);
    assert_eq!(d.ipam, Ok(IpamMode::ClusterPool));
    assert_eq!(d.origin, ModeOrigin::CiliumConfig);
    assert_eq!(d.pool_v4, vec![net("10.5.112.0/20")]);
    assert_eq!(d.nodes.len(), 4);
    for (n, (name, node_cidr, cilium_cidr)) in d.nodes.iter().zip(OUTAGE) {
        assert_eq!(&*n.node.name, name);
        assert_eq!(n.node.node_cidrs, vec![net(node_cidr)], "{name}");
        assert_eq!(n.node.node_source, Some(CidrSource::NodeSpec), "{name}");
        assert_eq!(n.node.cilium_cidrs, Some(vec![net(cilium_cidr)]), "{name}");
        assert_eq!(n.in_force, Some(CidrSource::CiliumNode), "{name}");
        assert_eq!(n.announced, vec![net(cilium_cidr)], "{name}");
        assert!(n.node.drift.is_some(), "{name} must be flagged");
        assert!(!n.ok(), "{name}");
        assert!(n.overlaps.is_empty() && n.outside_pool.is_empty(), "{name}");
    }
    assert!(!d.ok());
    assert_eq!(d.exit_code(), 1);
    let problems = d.problems();
    assert_eq!(problems.len(), 4, "{problems:?}");
    assert_eq!(
        problems[0],
        "master1: drift: Node [10.5.112.0/24] vs CiliumNode [10.5.113.0/24]; \
         the CiliumNode's are announced"
    );
}

#[test]
fn the_outage_under_kubernetes_ipam_puts_the_node_in_force_and_still_flags_all_four() {
    let d = outage(IpamOverride::Kubernetes);
    assert_eq!(d.ipam, Ok(IpamMode::Kubernetes));
    assert_eq!(d.origin, ModeOrigin::Override);
    for (n, (name, node_cidr, _)) in d.nodes.iter().zip(OUTAGE) {
        assert_eq!(n.in_force, Some(CidrSource::NodeSpec), "{name}");
        assert_eq!(n.announced, vec![net(node_cidr)], "{name}");
        assert!(n.node.drift.is_some(), "{name}");
    }
    assert_eq!(d.exit_code(), 1);
}

#[test]
fn the_outage_table_has_one_row_per_node_with_both_sides_and_the_verdict() {
    let text = outage(IpamOverride::Auto).to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "ipam mode: cluster-pool (from cilium-config)");
    assert_eq!(lines[1], "cluster pool: ipv4 [10.5.112.0/20], ipv6 none");
    let header = lines
        .iter()
        .position(|l| l.starts_with("NODE "))
        .expect("a table header");
    let columns: Vec<&str> = lines[header]
        .split("  ")
        .filter(|c| !c.is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        columns,
        [
            "NODE",
            "NODE CIDRS",
            "CILIUMNODE CIDRS",
            "IN FORCE",
            "DRIFT",
            "OVERLAPS",
            "OUTSIDE POOL"
        ]
    );
    for (i, (name, node_cidr, cilium_cidr)) in OUTAGE.iter().enumerate() {
        let words: Vec<&str> = lines[header + 1 + i].split_whitespace().collect();
        assert_eq!(
            words,
            [
                *name,
                *node_cidr,
                *cilium_cidr,
                "CiliumNode",
                *cilium_cidr,
                "yes",
                "-",
                "-"
            ],
            "{text}"
        );
    }
    assert!(text.contains("\nproblems:\n  master1: drift:"), "{text}");
    assert!(
        text.ends_with("4 nodes: 4 with drift, 0 overlapping, 0 outside the pool: NOT OK\n"),
        "{text}"
    );
}

#[test]
fn a_healthy_node_is_ok() {
    let d = diagnose(
        &file::load(&crate_root().join("config/cluster-state/single-node.yaml")).unwrap(),
        IpamOverride::Auto,
    );
    assert!(d.ok(), "{d}");
    assert_eq!(d.exit_code(), 0);
    let n = &d.nodes[0];
    assert_eq!(n.in_force, Some(CidrSource::NodeSpec));
    assert_eq!(
        n.announced,
        vec![net("10.244.3.0/24"), net("fd00:10:244:3::/64")]
    );
    assert_eq!(n.node.cilium_cidrs, None);
    let text = d.to_string();
    assert!(text.contains("no CiliumNode"), "{text}");
    assert!(text.ends_with(": ok\n"), "{text}");
}

fn doctor_binary(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_podcidr-speaker"))
        .arg("doctor")
        .args(args)
        // Never reach for a real cluster from a test.
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("doctor {args:?} did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn the_built_binary_exits_1_on_the_outage_0_when_healthy_2_when_unreadable() {
    let outage = outage_dir();
    let out = doctor_binary(&["--cluster-state", outage.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.split_whitespace().nth(5) == Some("yes"))
            .count(),
        4,
        "{stdout}"
    );

    let out = doctor_binary(&[
        "--cluster-state",
        outage.to_str().unwrap(),
        "--ipam",
        "kubernetes",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ipam mode: kubernetes (from --ipam)"));

    let single = crate_root().join("config/cluster-state/single-node.yaml");
    let out = doctor_binary(&["--cluster-state", single.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    let out = doctor_binary(&["--cluster-state", "/nonexistent/cluster-state"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/cluster-state"));

    // No path and no cluster: cannot read, 2, with a hint.
    let out = doctor_binary(&[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cluster-state"));

    let out = doctor_binary(&["--ipam", "eni"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "clap refuses the value: {out:?}"
    );

    // --lb-class acts on the in-cluster allocation check only: with files it would be
    // ignored, so it is refused.
    let out = doctor_binary(&[
        "--cluster-state",
        single.to_str().unwrap(),
        "--lb-class",
        "example.com/x",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--lb-class") && stderr.contains("--cluster-state"),
        "{stderr}"
    );
}

/// The outage's objects as the API server returns them, from the sample files.
fn outage_objects() -> (Vec<Value>, Vec<Value>, Value) {
    let read = |name: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(outage_dir().join(name)).unwrap();
        serde_yaml::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect()
    };
    let mut nodes = Vec::new();
    let mut cilium_nodes = Vec::new();
    for doc in read("nodes.yaml") {
        for item in doc["items"].as_array().unwrap() {
            match item["kind"].as_str() {
                Some("Node") => nodes.push(item.clone()),
                Some("CiliumNode") => cilium_nodes.push(item.clone()),
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    let config = read("cilium-config.yaml").remove(0);
    (nodes, cilium_nodes, config)
}

async fn in_cluster(client: kube::Client, ipam: IpamOverride) -> (u8, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = doctor::diagnose_in_cluster(
        client,
        &ConfigMapRef::cilium_config(),
        ipam,
        doctor::Allocator {
            lb_classes: &[],
            lease: &LeaseRef::default(),
        },
        None,
        &mut out,
        &mut err,
    )
    .await;
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[tokio::test]
async fn in_cluster_reads_nodes_in_pages_and_flags_the_outage() {
    let (client, mut api) = MockApi::start();
    let (nodes, cilium_nodes, config) = outage_objects();
    let run = tokio::spawn(in_cluster(client, IpamOverride::Auto));

    // Nodes in two pages: the continue token must be passed back.
    let call = api.next(Route::Nodes).await;
    assert_eq!(call.param("limit").as_deref(), Some("500"));
    assert_eq!(call.param("continue"), None);
    call.json(
        http::StatusCode::OK,
        &json!({"kind": "NodeList", "apiVersion": "v1",
                "metadata": {"resourceVersion": "10", "continue": "page-2"},
                "items": nodes[..2]}),
    );
    let call = api.next(Route::Nodes).await;
    assert_eq!(call.param("continue").as_deref(), Some("page-2"));
    call.list("Node", "v1", nodes[2..].to_vec(), "10");

    api.next(Route::CiliumNodes)
        .await
        .list("CiliumNode", "cilium.io/v2", cilium_nodes, "11");
    let call = api.next(Route::CiliumConfig).await;
    assert_eq!(
        call.param("fieldSelector").as_deref(),
        Some("metadata.name=cilium-config")
    );
    assert!(call
        .uri()
        .starts_with("/api/v1/namespaces/kube-system/configmaps?"));
    call.list("ConfigMap", "v1", vec![config], "12");
    api.next(Route::Services)
        .await
        .list("Service", "v1", vec![], "13");

    let (code, out, err) = tokio::time::timeout(harness::WAIT, run)
        .await
        .expect("doctor finishes")
        .unwrap();
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.starts_with("ipam mode: cluster-pool (from cilium-config)"),
        "{out}"
    );
    assert!(
        out.ends_with("4 nodes: 4 with drift, 0 overlapping, 0 outside the pool: NOT OK\n"),
        "{out}"
    );
}

#[tokio::test]
async fn in_cluster_without_the_ciliumnode_crd_or_cilium_config_still_diagnoses() {
    let (client, mut api) = MockApi::start();
    let run = tokio::spawn(in_cluster(client, IpamOverride::Auto));
    api.next(Route::Nodes).await.list(
        "Node",
        "v1",
        vec![node("a", "1", &["10.0.1.0/24"], json!({}))],
        "1",
    );
    api.next(Route::CiliumNodes)
        .await
        .status_error(404, "NotFound");
    api.next(Route::CiliumConfig)
        .await
        .list("ConfigMap", "v1", vec![], "1");
    api.next(Route::Services)
        .await
        .status_error(403, "Forbidden");
    let (code, out, err) = tokio::time::timeout(harness::WAIT, run)
        .await
        .unwrap()
        .unwrap();
    // No cilium-config: Cilium's default, cluster-pool, reads the (absent) CiliumNode:
    // nothing in force, nothing wrong.
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("the CiliumNode CRD (cilium.io/v2) is not installed"),
        "{out}"
    );
    assert!(out.contains("cilium-config not found"), "{out}");
    assert!(
        out.contains("Services cannot be listed")
            && out.contains("LoadBalancer IPs are not checked"),
        "{out}"
    );
}

#[tokio::test]
async fn in_cluster_reports_unreadable_objects_and_fails_on_api_errors() {
    let (client, mut api) = MockApi::start();
    let run = tokio::spawn(in_cluster(client, IpamOverride::Kubernetes));
    api.next(Route::Nodes).await.list(
        "Node",
        "v1",
        vec![
            node("a", "1", &["10.0.1.0/24"], json!({})),
            node("b", "1", &["not-a-cidr"], json!({})),
        ],
        "1",
    );
    api.next(Route::CiliumNodes).await.list(
        "CiliumNode",
        "cilium.io/v2",
        vec![cilium_node("a", "1", &["10.0.1.0/24"])],
        "1",
    );
    api.next(Route::CiliumConfig).await.list(
        "ConfigMap",
        "v1",
        vec![config_map(
            "kube-system",
            "cilium-config",
            "1",
            json!({"ipam": "kubernetes"}),
        )],
        "1",
    );
    api.next(Route::Services)
        .await
        .list("Service", "v1", vec![], "1");
    let (code, out, _) = tokio::time::timeout(harness::WAIT, run)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("unreadable object: Node b: spec.podCIDR: \"not-a-cidr\" is not a CIDR"),
        "{out}"
    );

    let (client, mut api) = MockApi::start();
    let run = tokio::spawn(in_cluster(client, IpamOverride::Auto));
    api.next(Route::Nodes).await.status_error(403, "Forbidden");
    let (code, out, err) = tokio::time::timeout(harness::WAIT, run)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code, doctor::EXIT_UNREADABLE);
    assert!(out.is_empty());
    assert!(
        err.starts_with("podcidr-speaker doctor: listing nodes:"),
        "{err}"
    );
}

#[test]
fn doctor_reads_the_path_it_is_given_only() {
    // A directory with the outage and an unrelated file: the same diagnosis.
    let dir = std::env::temp_dir().join(format!("podcidr-doctor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["nodes.yaml", "cilium-config.yaml"] {
        std::fs::copy(outage_dir().join(name), dir.join(name)).unwrap();
    }
    std::fs::write(dir.join("notes.txt"), "not yaml").unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = doctor::command_file(
        Path::new(&dir),
        IpamOverride::Auto,
        &[],
        None,
        &mut out,
        &mut err,
    );
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 1, "{}", String::from_utf8_lossy(&err));
    assert_eq!(
        String::from_utf8(out).unwrap(),
        outage(IpamOverride::Auto).to_string()
    );
}

/// The LoadBalancer findings in-cluster: Services listed once, with the bgp-config's
/// pools: pending an IP, outside every pool, in a layer2 pool, inside a pod CIDR.
#[tokio::test]
async fn in_cluster_lists_loadbalancer_services_against_the_bgp_config() {
    let config = podcidr_speaker::config::parse(
        "peers:\n- peer-address: 10.0.0.1\n  peer-asn: 64512\n  my-asn: 64513\n\
         address-pools:\n- name: public\n  protocol: bgp\n  addresses: [203.0.113.0/24]\n\
         - name: l2\n  protocol: layer2\n  addresses: [198.51.100.0/24]\n",
    )
    .expect("a valid bgp-config");
    let (client, mut api) = MockApi::start();
    let run = tokio::spawn(async move {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = doctor::diagnose_in_cluster(
            client,
            &ConfigMapRef::cilium_config(),
            IpamOverride::Kubernetes,
            doctor::Allocator {
                lb_classes: &[],
                lease: &LeaseRef::default(),
            },
            Some(&config),
            &mut out,
            &mut err,
        )
        .await;
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    });
    api.next(Route::Nodes).await.list(
        "Node",
        "v1",
        vec![node("a", "1", &["10.0.1.0/24"], json!({}))],
        "1",
    );
    api.next(Route::CiliumNodes)
        .await
        .list("CiliumNode", "cilium.io/v2", vec![], "1");
    api.next(Route::CiliumConfig)
        .await
        .list("ConfigMap", "v1", vec![], "1");
    api.next(Route::Services).await.list(
        "Service",
        "v1",
        vec![
            service(
                "shop",
                "web",
                "5",
                "LoadBalancer",
                "Local",
                &["203.0.113.10"],
            ),
            service("shop", "pending", "6", "LoadBalancer", "Cluster", &[]),
            service(
                "shop",
                "stray",
                "7",
                "LoadBalancer",
                "Cluster",
                &["192.0.2.1"],
            ),
            service(
                "shop",
                "l2",
                "8",
                "LoadBalancer",
                "Cluster",
                &["198.51.100.4"],
            ),
            service(
                "shop",
                "inside",
                "9",
                "LoadBalancer",
                "Cluster",
                &["10.0.1.7"],
            ),
            service("shop", "internal", "10", "ClusterIP", "Cluster", &[]),
        ],
        "2",
    );
    // The config has pools: the allocator's Lease is read too.
    api.next(Route::Leases).await.status_error(404, "NotFound");
    let (code, out, err) = tokio::time::timeout(harness::WAIT, run)
        .await
        .unwrap()
        .unwrap();
    assert!(err.is_empty(), "{err}");
    for line in [
        "service shop/pending: LoadBalancer pending an IP: nothing to announce",
        "service shop/stray: LoadBalancer IP 192.0.2.1 lies outside every address-pool of the bgp-config: not announced",
        "service shop/l2: LoadBalancer IP 198.51.100.4 is in the layer2 address-pool l2: not announced by BGP",
        "service shop/inside: LoadBalancer IP 10.0.1.7 lies outside every address-pool of the bgp-config: not announced",
        "service shop/inside: LoadBalancer IP 10.0.1.7 lies inside the pod CIDR 10.0.1.0/24 of node a",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    assert!(!out.contains("shop/web"), "{out}");
    assert!(!out.contains("shop/internal"), "{out}");
    // Issue 30: the status addresses outside every pool are also the allocator's
    // refusal of this config, a problem (the layer2 one is in a pool: allocatable).
    let refusal = "loadbalancer ip allocation: the bgp-config leaves addresses in use outside \
                   every address-pool (or on an address avoid-buggy-ips skips): 10.0.1.7 (held \
                   by shop/inside); 192.0.2.1 (held by shop/stray): a running \
                   podcidr-speaker allocate refuses this config";
    assert!(out.contains(refusal), "{out}");
    assert_eq!(code, 1, "{out}");
}

/// Issue 29: cilium-config turning Cilium's embedded BGP speaker on is a problem doctor
/// names, with the keys, what the speaker does and what to do; exit 1. Set to false,
/// it is gone.
#[tokio::test]
async fn in_cluster_flags_cilium_embedded_bgp_on() {
    for (value, flagged) in [("true", true), ("false", false)] {
        let (client, mut api) = MockApi::start();
        let run = tokio::spawn(in_cluster(client, IpamOverride::Auto));
        api.next(Route::Nodes).await.list(
            "Node",
            "v1",
            vec![node("a", "1", &["10.0.1.0/24"], json!({}))],
            "1",
        );
        api.next(Route::CiliumNodes)
            .await
            .list("CiliumNode", "cilium.io/v2", vec![], "1");
        api.next(Route::CiliumConfig).await.list(
            "ConfigMap",
            "v1",
            vec![config_map(
                "kube-system",
                "cilium-config",
                "3",
                json!({"ipam": "kubernetes", "bgp-announce-pod-cidr": value,
                       "bgp-announce-lb-ip": value}),
            )],
            "3",
        );
        api.next(Route::Services)
            .await
            .list("Service", "v1", vec![], "4");
        let (code, out, err) = tokio::time::timeout(harness::WAIT, run)
            .await
            .unwrap()
            .unwrap();
        let line = "cilium-config has bgp-announce-pod-cidr: true and bgp-announce-lb-ip: true: \
                    Cilium's embedded BGP speaker (Cilium 1.10-1.16) peers from this node too: \
                    the speaker opens no new session while it is on (--cilium-bgp-conflict hold, \
                    the default). To fix: set bgp-announce-pod-cidr and bgp-announce-lb-ip to \
                    \"false\"";
        assert_eq!(out.contains(line), flagged, "{value}: {out}{err}");
        assert_eq!(code, u8::from(flagged), "{value}: {out}{err}");
    }
}

/// What the cluster-setup doctor is answered with, besides the nodes.
struct SetupCase {
    /// The bgp-config ConfigMap's data; `None`: no such ConfigMap.
    bgp_config: Option<Value>,
    services: Vec<Value>,
    /// Whether doctor reads the allocator's Lease (a valid config with address pools),
    /// answered 404.
    lease_read: bool,
}

/// `doctor` in a cluster without `--bgp-config`: the bgp-config ConfigMap (read by name,
/// as `run` reads it) first, then the cluster with it.
async fn setup(case: SetupCase) -> (u8, String, String) {
    use podcidr_speaker::sources::kube::BgpConfigMapRef;
    let (client, mut api) = MockApi::start();
    let run = tokio::spawn(async move {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = doctor::diagnose_cluster_setup(
            client,
            &ConfigMapRef::cilium_config(),
            &BgpConfigMapRef::default(),
            IpamOverride::Kubernetes,
            doctor::Allocator {
                lb_classes: &[],
                lease: &LeaseRef::default(),
            },
            &mut out,
            &mut err,
        )
        .await;
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    });
    let call = api.next(Route::BgpConfig).await;
    assert!(
        call.uri()
            .starts_with("/api/v1/namespaces/kube-system/configmaps?"),
        "{}",
        call.uri()
    );
    assert_eq!(
        call.param("fieldSelector").as_deref(),
        Some("metadata.name=bgp-config")
    );
    let found = case
        .bgp_config
        .map(|data| config_map("kube-system", "bgp-config", "2", data));
    call.list("ConfigMap", "v1", found.into_iter().collect(), "2");
    api.next(Route::Nodes).await.list(
        "Node",
        "v1",
        vec![node("a", "1", &["10.0.1.0/24"], json!({}))],
        "1",
    );
    api.next(Route::CiliumNodes)
        .await
        .list("CiliumNode", "cilium.io/v2", vec![], "1");
    api.next(Route::CiliumConfig).await.list(
        "ConfigMap",
        "v1",
        vec![config_map(
            "kube-system",
            "cilium-config",
            "3",
            json!({"ipam": "kubernetes", "bgp-announce-lb-ip": "false"}),
        )],
        "3",
    );
    api.next(Route::Services)
        .await
        .list("Service", "v1", case.services, "4");
    if case.lease_read {
        api.next(Route::Leases).await.status_error(404, "NotFound");
    }
    let done = tokio::time::timeout(harness::WAIT, run)
        .await
        .expect("doctor finishes")
        .unwrap();
    assert!(api.idle(Route::Leases), "a Lease read not expected");
    done
}

const BGP_CONFIG: &str = "peers:\n- peer-address: 10.0.0.1\n  peer-asn: 64512\n  my-asn: 64513\n\
     address-pools:\n- name: public\n  protocol: bgp\n  addresses: [203.0.113.0/24]\n";

/// Issue 29: "is this cluster set up right for the speaker", against the mocked API
/// with real objects: Cilium's embedded BGP off, the bgp-config found and valid, and
/// LoadBalancer Services pending an IP with bgp pools configured: how many, a few
/// named, which allocator to run. Each wrong answer is named.
#[tokio::test]
async fn in_cluster_setup_checks_the_bgp_config_and_the_allocator() {
    let pending: Vec<Value> = (1..=7)
        .map(|i| {
            service(
                "shop",
                &format!("p{i}"),
                &format!("{}", 10 + i),
                "LoadBalancer",
                "Cluster",
                &[],
            )
        })
        .chain([service(
            "shop",
            "web",
            "9",
            "LoadBalancer",
            "Cluster",
            &["203.0.113.10"],
        )])
        .collect();

    // Valid config, Services pending: the allocator warning, named and counted.
    let (code, out, err) = setup(SetupCase {
        bgp_config: Some(json!({"config.yaml": BGP_CONFIG})),
        services: pending.clone(),
        lease_read: true,
    })
    .await;
    assert!(err.is_empty(), "{err}");
    // Issue 30: the allocator's answer replaces the guess. From scratch web keeps
    // 203.0.113.10 and p1..p7 get 203.0.113.0 to .6 in key order: 8 in use; no Lease,
    // so the advice to run an allocator stays.
    for line in [
        "  cilium's embedded BGP: off",
        "  bgp-config: kube-system/bgp-config:config.yaml: found and valid, 1 peer(s), 1 bgp address-pool(s)",
        "  loadbalancer ip allocation: 7 Service(s) pending an IP (see warnings); addresses in \
         use from scratch: public 8/256",
        "  allocator: none of ours is running (no Lease kube-system/podcidr-speaker-allocator; \
         one in another namespace is named with --allocator-lease); Cilium LB-IPAM or MetalLB's controller may be the allocator instead",
        "  7 LoadBalancer Service(s) pending an IP (shop/p1: the allocator would give it \
         203.0.113.0 from pool public; shop/p2: the allocator would give it 203.0.113.1 from \
         pool public; shop/p3: the allocator would give it 203.0.113.2 from pool public; \
         shop/p4: the allocator would give it 203.0.113.3 from pool public; shop/p5: the \
         allocator would give it 203.0.113.4 from pool public; and 2 more)",
        "  the allocator would give 7 of them an address, but no allocator has written their \
         status.loadBalancer.ingress. Run one on the same ranges: podcidr-speaker allocate, \
         MetalLB's controller alone on this same bgp-config (its speaker not deployed), or \
         Cilium LB-IPAM (a CiliumLoadBalancerIPPool with the pools' addresses, Cilium 1.13 and \
         later)",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    // Pending Services are a warning (one created a second ago is pending too).
    assert_eq!(code, 0, "{out}");

    // Every Service has its IP: nothing pending.
    let (code, out, _) = setup(SetupCase {
        bgp_config: Some(json!({"config.yaml": BGP_CONFIG})),
        services: pending[7..].to_vec(),
        lease_read: true,
    })
    .await;
    assert!(
        out.contains("  loadbalancer ip allocation: no LoadBalancer Service pending an IP"),
        "{out}"
    );
    assert!(!out.contains("pending an IP ("), "{out}");
    assert_eq!(code, 0, "{out}");

    // No bgp pool: no LoadBalancer IP is wanted, pending Services are not an allocator
    // problem of this speaker's.
    let (_, out, _) = setup(SetupCase {
        bgp_config: Some(json!({"config.yaml":
            "peers:\n- peer-address: 10.0.0.1\n  peer-asn: 64512\n  my-asn: 64513\n"})),
        services: pending.clone(),
        lease_read: false,
    })
    .await;
    assert!(
        out.contains(
            "  loadbalancer ip allocation: no bgp address-pool, no LoadBalancer IP wanted"
        ),
        "{out}"
    );
    assert!(!out.contains("no allocator has written"), "{out}");

    // No ConfigMap: a problem, exit 1.
    let (code, out, _) = setup(SetupCase {
        bgp_config: None,
        services: vec![],
        lease_read: false,
    })
    .await;
    assert!(
        out.contains("bgp-config kube-system/bgp-config:config.yaml: NOT FOUND"),
        "{out}"
    );
    assert_eq!(code, 1, "{out}");

    // The ConfigMap without its key: not found either.
    let (code, out, _) = setup(SetupCase {
        bgp_config: Some(json!({"other.yaml": BGP_CONFIG})),
        services: vec![],
        lease_read: false,
    })
    .await;
    assert!(out.contains("NOT FOUND"), "{out}");
    assert_eq!(code, 1, "{out}");

    // Invalid: a problem naming the field, exit 1.
    let (code, out, _) = setup(SetupCase {
        bgp_config: Some(json!({"config.yaml":
            "peers:\n- peer-address: 10.0.0.1\n  peer-asn: 64512\n  my-asn: 64513\n  hold-time: 2s\n"})),
        services: vec![],
        lease_read: false,
    })
    .await;
    assert!(
        out.contains("bgp-config kube-system/bgp-config:config.yaml: INVALID")
            && out.contains("hold-time"),
        "{out}"
    );
    assert_eq!(code, 1, "{out}");
}

/// How the mocked API answers doctor's read of the allocator's Lease.
enum LeaseAnswer {
    /// A Lease held by `allocator-0`, renewed this many seconds ago, for 15 s.
    Renewed(i64),
    Forbidden,
}

/// Doctor in a cluster with a bgp-config, the allocator's Lease answered as `lease`:
/// the live Services are real API objects; returns (exit code, stdout).
async fn allocation_case(lease: LeaseAnswer, lb_classes: &[&str]) -> (u8, String) {
    allocation_case_at(lease, lb_classes, LeaseRef::default()).await
}

/// [`allocation_case`] with doctor's `--allocator-lease` set to `at`.
async fn allocation_case_at(lease: LeaseAnswer, lb_classes: &[&str], at: LeaseRef) -> (u8, String) {
    let lb_classes: Vec<String> = lb_classes.iter().map(|c| (*c).to_owned()).collect();
    let path = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}",
        at.namespace, at.name
    );
    let config = podcidr_speaker::config::parse(
        "peers:\n- peer-address: 10.0.0.1\n  peer-asn: 64512\n  my-asn: 64513\n\
         address-pools:\n- name: public\n  protocol: bgp\n  addresses: [203.0.113.0/29]\n\
         - name: l2\n  protocol: layer2\n  auto-assign: false\n  addresses: [198.51.100.0/30]\n",
    )
    .expect("a valid bgp-config");
    let (client, mut api) = MockApi::start();
    let run = tokio::spawn(async move {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = doctor::diagnose_in_cluster(
            client,
            &ConfigMapRef::cilium_config(),
            IpamOverride::Kubernetes,
            doctor::Allocator {
                lb_classes: &lb_classes,
                lease: &at,
            },
            Some(&config),
            &mut out,
            &mut err,
        )
        .await;
        let err = String::from_utf8(err).unwrap();
        assert!(err.is_empty(), "{err}");
        (code, String::from_utf8(out).unwrap())
    });
    api.next(Route::Nodes).await.list(
        "Node",
        "v1",
        vec![node("a", "1", &["10.0.1.0/24"], json!({}))],
        "1",
    );
    api.next(Route::CiliumNodes)
        .await
        .list("CiliumNode", "cilium.io/v2", vec![], "1");
    api.next(Route::CiliumConfig)
        .await
        .list("ConfigMap", "v1", vec![], "1");
    let lb = |name: &str, rv: &str, ingress: &[&str]| {
        service("shop", name, rv, "LoadBalancer", "Cluster", ingress)
    };
    let mut typo = lb("typo", "13", &[]);
    typo["metadata"]["annotations"] = json!({"metallb.universe.tf/address-pool": "nope"});
    let mut clash = lb("clash", "14", &[]);
    clash["spec"]["loadBalancerIP"] = json!("203.0.113.5");
    api.next(Route::Services).await.list(
        "Service",
        "v1",
        vec![
            lb("web", "10", &["203.0.113.5"]),
            lb("moved", "11", &["192.0.2.9"]),
            lb("new", "12", &[]),
            typo,
            clash,
        ],
        "20",
    );
    let call = api.next(Route::Leases).await;
    assert_eq!(call.request.uri().path(), path);
    match lease {
        LeaseAnswer::Renewed(ago) => {
            let renewed = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64
                - ago;
            let renewed = k8s_openapi::jiff::Timestamp::from_second(renewed).unwrap();
            call.json(
                http::StatusCode::OK,
                &json!({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": "podcidr-speaker-allocator", "namespace": "kube-system",
                        "resourceVersion": "30", "uid": "uid-lease"},
                    "spec": {"holderIdentity": "allocator-0", "leaseDurationSeconds": 15,
                        "acquireTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.000000Z").to_string(),
                        "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.000000Z").to_string(),
                        "leaseTransitions": 2}
                }),
            );
        }
        LeaseAnswer::Forbidden => call.status_error(403, "Forbidden"),
    }
    tokio::time::timeout(harness::WAIT, run)
        .await
        .expect("doctor finishes")
        .unwrap()
}

/// Issue 30: doctor in a cluster runs the allocator over the live Services and the live
/// bgp-config. From scratch (worked out by hand): web keeps 203.0.113.5; the waiting
/// ones in key order: clash requests web's address without allow-shared-ip (pending),
/// moved's status 192.0.2.9 is in no pool (a new one, 203.0.113.0, and the config is
/// one the allocator refuses: a problem), new gets 203.0.113.1, typo names a pool that
/// does not exist (pending). The allocator's Lease: held and fresh, stale, unreadable.
#[tokio::test]
async fn in_cluster_runs_the_allocator_and_reads_its_lease() {
    let (code, out) = allocation_case(LeaseAnswer::Renewed(2), &[]).await;
    for line in [
        "  loadbalancer ip allocation: 3 Service(s) pending an IP (see warnings); addresses in \
         use from scratch: public 3/8, l2 0/4",
        "  allocator: podcidr-speaker allocate is running: allocator-0 holds Lease \
         kube-system/podcidr-speaker-allocator (renewed ",
        "  3 LoadBalancer Service(s) pending an IP (shop/clash: 203.0.113.5 is in use by \
         shop/web and cannot be shared: one of the two has no \
         metallb.universe.tf/allow-shared-ip; shop/new: the allocator would give it \
         203.0.113.1 from pool public; shop/typo: metallb.universe.tf/address-pool names pool \
         nope, which the config does not have)",
        "  the allocator would give 1 of them an address, and podcidr-speaker allocate runs: a \
         Service created a moment ago waits for its write",
        "  the allocator, starting now, would change the status of 1 LoadBalancer Service(s) \
         (shop/moved: 192.0.2.9 -> 203.0.113.0 from pool public)",
        "  loadbalancer ip allocation: the bgp-config leaves addresses in use outside every \
         address-pool (or on an address avoid-buggy-ips skips): 192.0.2.9 (held by \
         shop/moved): a running podcidr-speaker allocate refuses this config and keeps its \
         last good one until those Services change; one starting on it would move those \
         Services to new addresses",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    assert!(!out.contains("Run one on the same ranges"), "{out}");
    assert_eq!(code, 1, "the refused config is a problem:\n{out}");

    // Its holder stopped renewing an hour ago: none of ours runs.
    let (_, out) = allocation_case(LeaseAnswer::Renewed(3600), &[]).await;
    for line in [
        "  allocator: none of ours is running: Lease kube-system/podcidr-speaker-allocator is \
         not held (holder allocator-0, last renewed 36",
        "Cilium LB-IPAM or MetalLB's controller may be the allocator instead",
        "but no allocator has written their status.loadBalancer.ingress. Run one on the same \
         ranges: podcidr-speaker allocate,",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }

    // Not allowed to read Leases: said, not fatal; the rest is still diagnosed.
    let (code, out) = allocation_case(LeaseAnswer::Forbidden, &[]).await;
    assert!(
        out.contains("  allocator: Lease kube-system/podcidr-speaker-allocator cannot be read (")
            && out.contains("): not checked"),
        "{out}"
    );
    assert!(
        out.contains("3 LoadBalancer Service(s) pending an IP"),
        "{out}"
    );
    assert_eq!(code, 1, "{out}");

    // The chart runs the allocator in its release's namespace: --allocator-lease names
    // that Lease, and it is the one read (the path is checked by `allocation_case_at`)
    // and named.
    let at: LeaseRef = "podcidr/podcidr-speaker-allocator".parse().unwrap();
    let (_, out) = allocation_case_at(LeaseAnswer::Renewed(2), &[], at).await;
    assert!(
        out.contains(
            "  allocator: podcidr-speaker allocate is running: allocator-0 holds Lease \
             podcidr/podcidr-speaker-allocator (renewed "
        ),
        "{out}"
    );

    // --lb-class as the allocator takes it: serving another class, none of these
    // Services (all without a class) is the allocator's: nothing pending, nothing
    // refused, nothing in use.
    let (code, out) = allocation_case(LeaseAnswer::Renewed(2), &["example.com/other"]).await;
    assert!(
        out.contains(
            "  loadbalancer ip allocation: no LoadBalancer Service pending an IP; addresses in \
             use from scratch: public 0/8, l2 0/4"
        ),
        "{out}"
    );
    assert!(!out.contains("refuses this config"), "{out}");
    assert_eq!(code, 0, "{out}");
}

/// Services that cannot be listed give the allocator nothing to answer from: no
/// allocation check (an empty list would read as "nothing pending"), no Lease read.
#[tokio::test]
async fn in_cluster_without_the_services_makes_no_allocation_check() {
    let config =
        podcidr_speaker::config::parse(BGP_CONFIG).expect("a valid bgp-config with a pool");
    let (client, mut api) = MockApi::start();
    let run = tokio::spawn(async move {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        doctor::diagnose_in_cluster(
            client,
            &ConfigMapRef::cilium_config(),
            IpamOverride::Kubernetes,
            doctor::Allocator {
                lb_classes: &[],
                lease: &LeaseRef::default(),
            },
            Some(&config),
            &mut out,
            &mut err,
        )
        .await;
        String::from_utf8(out).unwrap()
    });
    api.next(Route::Nodes).await.list(
        "Node",
        "v1",
        vec![node("a", "1", &["10.0.1.0/24"], json!({}))],
        "1",
    );
    api.next(Route::CiliumNodes)
        .await
        .list("CiliumNode", "cilium.io/v2", vec![], "1");
    api.next(Route::CiliumConfig)
        .await
        .list("ConfigMap", "v1", vec![], "1");
    api.next(Route::Services)
        .await
        .status_error(403, "Forbidden");
    let out = tokio::time::timeout(harness::WAIT, run)
        .await
        .expect("doctor finishes without reading the Lease")
        .unwrap();
    assert!(api.idle(Route::Leases), "{out}");
    assert!(out.contains("Services cannot be listed"), "{out}");
    assert!(!out.contains("  allocator: "), "{out}");
    assert!(!out.contains("addresses in use from scratch"), "{out}");
}

/// `doctor --cluster-state` with a bgp-config that has pools gives the allocator's
/// answer over the files' Services, as in a cluster (the Lease is not checked: files
/// have none), instead of the guess from the status alone; `--lb-class` picks the
/// Services it decides for.
#[test]
fn files_get_the_allocators_answer_not_a_guess() {
    let dir = std::env::temp_dir().join(format!("podcidr-doctor-alloc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let service = |name: &str, ip: u8, extra: &str, status: &str| {
        format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: shop}}\n\
             spec: {{type: LoadBalancer, clusterIP: 10.96.0.{ip}, ipFamilies: [IPv4], \
             ports: [{{port: 80}}]{extra}}}\nstatus: {{loadBalancer: {{ingress: [{status}]}}}}\n"
        )
    };
    let state = [
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: {podCIDR: 10.244.1.0/24}\n\
         status: {addresses: [{type: InternalIP, address: 10.0.0.11}]}\n"
            .to_owned(),
        // Kept: in the pool, claimed first.
        service("kept", 1, "", "{ip: 203.0.113.2}"),
        // Waiting: the pool's first free address.
        service("fresh", 2, "", ""),
        // Outside every pool: the allocator refuses such a config (a problem).
        service("orphan", 3, "", "{ip: 192.0.2.50}"),
        // Another allocator's class: left alone unless asked for.
        service("classy", 4, ", loadBalancerClass: example.com/lb", ""),
    ]
    .concat();
    std::fs::write(dir.join("state.yaml"), state).unwrap();
    let config = podcidr_speaker::config::parse(
        "peers: [{peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001}]\n\
         address-pools:\n- {name: public, protocol: bgp, addresses: [203.0.113.0/30]}\n",
    )
    .unwrap();
    let run = |classes: &[String]| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = doctor::command_file(
            &dir,
            IpamOverride::Kubernetes,
            classes,
            Some(&config),
            &mut out,
            &mut err,
        );
        assert!(err.is_empty(), "{}", String::from_utf8_lossy(&err));
        (code, String::from_utf8(out).unwrap())
    };
    let (code, out) = run(&[]);
    for line in [
        "  loadbalancer ip allocation: 1 Service(s) pending an IP (see warnings); addresses in use from scratch: public 3/4",
        "  allocator: not checked: files (--cluster-state) have no Lease to say whether one runs",
        "  1 LoadBalancer Service(s) pending an IP (shop/fresh: the allocator would give it 203.0.113.0 from pool public)",
        "  the allocator, starting now, would change the status of 1 LoadBalancer Service(s) (shop/orphan: 192.0.2.50 -> 203.0.113.1 from pool public)",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in:\n{out}");
    }
    assert!(
        out.contains("192.0.2.50 (held by shop/orphan): a running podcidr-speaker allocate refuses this config"),
        "{out}"
    );
    // Its own line (the speaker's: nothing to announce) stays; the allocator's
    // answer has no word for it.
    assert!(!out.contains("shop/classy: the allocator"), "{out}");
    assert_eq!(code, 1, "{out}");

    // Deciding for the other class: only shop/classy is the allocator's, and pending.
    let (_, out) = run(&["example.com/lb".to_owned()]);
    assert!(
        out.contains("(shop/classy: the allocator would give it 203.0.113.0 from pool public)"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
