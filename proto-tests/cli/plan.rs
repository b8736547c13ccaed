//! `podcidr-speaker plan` end to end: the built binary on the samples under config/
//! (the outage cluster, the demo cluster, the single dual-stack node) and on small
//! files written here, checking the exact routes, next hops and attributes printed, the
//! warnings, the JSON form, that a password never appears, and the exit status.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn sample(rel: &str) -> String {
    root().join(rel).display().to_string()
}

/// A fresh directory under Cargo's per-test scratch space.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli_plan")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn plan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_podcidr-speaker"))
        .arg("plan")
        .args(args)
        .output()
        .expect("run podcidr-speaker")
}

/// Runs a plan that must succeed; returns its standard output.
fn ok(args: &[&str]) -> String {
    let out = plan(args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert_eq!(stderr, "", "{args:?}");
    stdout
}

/// Runs a plan that must fail with `code`; returns its standard error.
fn fails(args: &[&str], code: i32) -> String {
    let out = plan(args);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {out:?}");
    assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    String::from_utf8(out.stderr).unwrap()
}

fn outage(node: &str, extra: &[&str]) -> String {
    let config = sample("config/cilium-bgp-config.yaml");
    let state = sample("config/cluster-state/outage");
    let mut args = vec![
        "--bgp-config",
        &config,
        "--cluster-state",
        &state,
        "--node",
        node,
    ];
    args.extend_from_slice(extra);
    ok(&args)
}

const OUTAGE_DRIFT: &str = "\
loadbalancer ips: announced (the bgp-config's speaker.announce-lb-ips, true by default)
  (no LoadBalancer Services)
warnings:
  drift on node master1 (Node [10.5.112.0/24] vs CiliumNode [10.5.113.0/24]): ipam cluster-pool announces the CiliumNode CIDRs
  drift on node master2 (Node [10.5.113.0/24] vs CiliumNode [10.5.114.0/24]): ipam cluster-pool announces the CiliumNode CIDRs
  drift on node master3 (Node [10.5.114.0/24] vs CiliumNode [10.5.115.0/24]): ipam cluster-pool announces the CiliumNode CIDRs
  drift on node worker1 (Node [10.5.115.0/24] vs CiliumNode [10.5.112.0/24]): ipam cluster-pool announces the CiliumNode CIDRs
  address pool \"default\" (10.5.112.0/21) overlaps the pod CIDR 10.5.113.0/24 of node master1: a LoadBalancer IP there is announced as its own, more specific route
  address pool \"default\" (10.5.112.0/21) overlaps the pod CIDR 10.5.114.0/24 of node master2: a LoadBalancer IP there is announced as its own, more specific route
  address pool \"default\" (10.5.112.0/21) overlaps the pod CIDR 10.5.115.0/24 of node master3: a LoadBalancer IP there is announced as its own, more specific route
  address pool \"default\" (10.5.112.0/21) overlaps the pod CIDR 10.5.112.0/24 of node worker1: a LoadBalancer IP there is announced as its own, more specific route
";

#[test]
fn outage_local_plan_announces_the_cilium_node_cidr_to_both_tors_and_warns_of_all_drift() {
    let want = format!(
        "\
node master1 (labels: beta.kubernetes.io/arch=amd64, beta.kubernetes.io/os=linux, kubernetes.io/arch=amd64, kubernetes.io/hostname=master1, kubernetes.io/os=linux, node-role.kubernetes.io/control-plane=, topology.kubernetes.io/zone=rack-a) ipam cluster-pool, announce local
peer 10.5.0.1:179 AS 65000 (eBGP, my AS 65083) peers[0], hold-time 90s, keepalive 30s, graceful-restart 120s, 1 route
  10.5.113.0/24  next-hop <session local address>  origin incomplete  as-path 65083
peer 10.5.0.2:179 AS 65000 (eBGP, my AS 65083) peers[1], hold-time 90s, keepalive 30s, graceful-restart 120s, 1 route
  10.5.113.0/24  next-hop <session local address>  origin incomplete  as-path 65083
peer 10.5.83.251:179 AS 65083 (iBGP) peers[2] not selected for this node (selector kubernetes/route=bgp-peer-83)
peer 10.5.83.252:179 AS 65083 (iBGP) peers[3] not selected for this node (selector kubernetes/route=bgp-peer-83)
{OUTAGE_DRIFT}"
    );
    assert_eq!(outage("master1", &[]), want);
}

#[test]
fn ipam_override_kubernetes_announces_the_node_cidr_instead() {
    let out = outage("master1", &["--ipam", "kubernetes"]);
    assert!(
        out.contains("  10.5.112.0/24  next-hop <session local address>"),
        "{out}"
    );
    assert!(!out.contains("10.5.113.0/24  next-hop"), "{out}");
    assert!(
        out.contains("ipam kubernetes announces the Node CIDRs"),
        "{out}"
    );
}

#[test]
fn outage_cluster_plan_gives_each_cidr_its_nodes_internal_ip() {
    let out = outage("worker1", &["--announce", "cluster"]);
    let routes: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("peer 10.5.0.1:179"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(
        routes,
        [
            "  10.5.112.0/24  node worker1  next-hop 192.168.10.21  origin incomplete  as-path 65083",
            "  10.5.113.0/24  node master1  next-hop 192.168.10.11  origin incomplete  as-path 65083",
            "  10.5.114.0/24  node master2  next-hop 192.168.10.12  origin incomplete  as-path 65083",
            "  10.5.115.0/24  node master3  next-hop 192.168.10.13  origin incomplete  as-path 65083",
        ],
        "{out}"
    );
    assert!(
        out.contains("peers[1], hold-time 90s, keepalive 30s, graceful-restart 120s, 4 routes"),
        "{out}"
    );
}

#[test]
fn a_labelled_node_also_gets_the_ibgp_peers_with_local_pref_100_and_an_empty_path() {
    let dir = scratch("labelled");
    std::fs::write(
        dir.join("node.yaml"),
        "\
apiVersion: v1
kind: Node
metadata:
  name: worker83
  labels: {kubernetes/route: bgp-peer-83}
spec:
  podCIDRs: [10.5.118.0/24]
",
    )
    .unwrap();
    std::fs::write(
        dir.join("cilium-config.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cilium-config}\ndata: {ipam: kubernetes}\n",
    )
    .unwrap();
    let config = sample("config/cilium-bgp-config.yaml");
    let out = ok(&[
        "--bgp-config",
        &config,
        "--cluster-state",
        dir.to_str().unwrap(),
        "--node",
        "worker83",
        "--source-address",
        "10.5.83.10",
    ]);
    for peer in ["10.5.0.1", "10.5.0.2"] {
        assert!(
            out.contains(&format!(
                "peer {peer}:179 AS 65000 (eBGP, my AS 65083) peers[{}], hold-time 90s, \
                 keepalive 30s, source-address 10.5.83.10, graceful-restart 120s, 1 route\n  10.5.118.0/24  \
                 next-hop 10.5.83.10  origin incomplete  as-path 65083\n",
                if peer == "10.5.0.1" { 0 } else { 1 }
            )),
            "{out}"
        );
    }
    for (i, peer) in [(2, "10.5.83.251"), (3, "10.5.83.252")] {
        assert!(
            out.contains(&format!(
                "peer {peer}:179 AS 65083 (iBGP) peers[{i}], hold-time 90s, keepalive 30s, \
                 source-address 10.5.83.10, graceful-restart 120s, 1 route\n  10.5.118.0/24  \
                 next-hop 10.5.83.10  origin incomplete  as-path (empty)  local-pref 100\n"
            )),
            "{out}"
        );
    }
    assert!(!out.contains("not selected"), "{out}");
}

/// Issue 29: `plan` says what `run` would do while cilium-config turns Cilium's embedded
/// speaker on (the same `routes::cilium` decision), and the flag changes it.
#[test]
fn cilium_s_embedded_speaker_on_in_the_cluster_state_is_warned_with_what_run_would_do() {
    let dir = scratch("cilium-conflict");
    std::fs::write(
        dir.join("node.yaml"),
        "apiVersion: v1\nkind: Node\nmetadata: {name: worker83, labels: {kubernetes/route: bgp-peer-83}}\nspec: {podCIDRs: [10.5.118.0/24]}\n",
    )
    .unwrap();
    let cilium = |keys: &str| {
        std::fs::write(
            dir.join("cilium-config.yaml"),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cilium-config}}\ndata: {{ipam: kubernetes{keys}}}\n"
            ),
        )
        .unwrap();
    };
    let config = sample("config/cilium-bgp-config.yaml");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--bgp-config",
            &config,
            "--cluster-state",
            dir.to_str().unwrap(),
            "--node",
            "worker83",
            "--source-address",
            "10.5.83.10",
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    cilium(", bgp-announce-pod-cidr: \"true\"");
    let held = run(&[]);
    assert!(
        held.contains("cilium-config has bgp-announce-pod-cidr: true")
            && held.contains("would open and accept no new session"),
        "{held}"
    );
    let json = run(&["-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let w = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "cilium-bgp-conflict")
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!(w["holding"], true, "{json}");
    let ignored = run(&["--cilium-bgp-conflict", "ignore"]);
    assert!(
        ignored.contains("(--cilium-bgp-conflict ignore)"),
        "{ignored}"
    );
    cilium(", bgp-announce-pod-cidr: \"false\", bgp-announce-lb-ip: \"false\"");
    let off = run(&[]);
    assert!(!off.contains("Cilium's embedded BGP speaker"), "{off}");
}

#[test]
fn demo_control_plane_node_opens_no_session_and_worker3_announces_its_cilium_node_cidr() {
    let config = sample("config/demo/bgp-config.yaml");
    let state = sample("config/demo/cluster-state");
    let out = ok(&[
        "--bgp-config",
        &config,
        "--cluster-state",
        &state,
        "--node",
        "master1",
    ]);
    assert!(
        out.contains(
            "peer 100.64.0.254:179 AS 65000 (eBGP, my AS 65083) peers[0] not selected for \
             this node (selector !node-role.kubernetes.io/control-plane)\n"
        ),
        "{out}"
    );
    assert!(!out.contains("route"), "{out}");
    let out = ok(&[
        "--bgp-config",
        &config,
        "--cluster-state",
        &state,
        "--node",
        "worker3",
    ]);
    assert!(
        out.contains(
            "peer 100.64.0.254:179 AS 65000 (eBGP, my AS 65083) peers[0], hold-time 9s, \
             keepalive 3s, graceful-restart 60s, 1 route\n  10.244.13.0/24  next-hop \
             <session local address>  origin incomplete  as-path 65083  communities \
             65083:100\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("drift on node worker3 (Node [10.244.3.0/24] vs CiliumNode [10.244.13.0/24])"),
        "{out}"
    );
}

#[test]
fn json_output_has_the_same_routes_and_warnings() {
    let config = sample("config/speaker-extensions.yaml");
    let state = sample("config/cluster-state/single-node.yaml");
    let out = ok(&[
        "--bgp-config",
        &config,
        "--cluster-state",
        &state,
        "--node",
        "node-a",
        "--source-address",
        "192.168.20.31",
        "-o",
        "json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["node"]["name"], "node-a");
    assert_eq!(v["ipam"], "kubernetes");
    assert_eq!(v["announce"], "local");
    let peers = v["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 1, "{out}");
    let peer = &peers[0];
    assert_eq!(peer["peer"], "10.5.0.1:179");
    assert_eq!(peer["ttl_security"], true);
    assert_eq!(peer["md5"], true);
    assert_eq!(
        peer["md5_secret"],
        serde_json::json!({"name": "bgp-peer-passwords", "key": "tor-a"})
    );
    assert_eq!(peer["source_address"], "192.168.20.31");
    let routes: Vec<(&str, &str)> = peer["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["prefix"].as_str().unwrap(),
                r["next_hop"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        routes,
        [
            ("10.244.3.0/24", "192.168.20.31"),
            // The node's IPv6 InternalIP, as run sends it on this IPv4 session.
            ("fd00:10:244:3::/64", "fd00:192:168:20::31")
        ]
    );
    let route = &peer["routes"][0];
    assert_eq!(route["origin"], "igp");
    assert_eq!(route["as_path"], serde_json::json!([65083]));
    assert_eq!(route["communities"], serde_json::json!(["65083:83"]));
    assert_eq!(route["large_communities"], serde_json::json!(["65083:1:1"]));
    assert_eq!(route["local_pref"], Value::Null);
    assert_eq!(v["unselected_peers"][0]["peer"], "10.5.83.251:179");
    assert_eq!(v["warnings"], serde_json::json!([]));
}

#[test]
fn a_password_is_never_printed() {
    let dir = scratch("password");
    let config = dir.join("bgp-config.yaml");
    std::fs::write(
        &config,
        "peers:\n  - {peer-address: 10.5.0.1, peer-asn: 65000, my-asn: 65083, password: Tr0ub4dor-md5}\n",
    )
    .unwrap();
    let state = sample("config/cluster-state/single-node.yaml");
    for format in ["table", "json"] {
        let out = ok(&[
            "--bgp-config",
            config.to_str().unwrap(),
            "--cluster-state",
            &state,
            "--node",
            "node-a",
            "-o",
            format,
        ]);
        assert!(!out.contains("Tr0ub4dor"), "{format}: {out}");
        assert!(out.contains("md5"), "{format}: {out}");
    }
}

#[test]
fn unusable_inputs_fail_with_a_message_naming_them() {
    let config = sample("config/cilium-bgp-config.yaml");
    let state = sample("config/cluster-state/outage");
    let err = fails(
        &[
            "--bgp-config",
            &config,
            "--cluster-state",
            &state,
            "--node",
            "master9",
        ],
        1,
    );
    assert!(
        err.contains("\"master9\" is not a Node in --cluster-state",)
            && err.contains("(nodes: master1, master2, master3, worker1)"),
        "{err}"
    );

    let dir = scratch("invalid");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "peers:\n  - peer-address: 10.5.0.1\n    peer-asn: 65000\n    my-asn: 65083\n    hold-time: 2s\n    password: hunter2-key\n",
    )
    .unwrap();
    let err = fails(
        &[
            "--bgp-config",
            bad.to_str().unwrap(),
            "--cluster-state",
            &state,
            "--node",
            "master1",
        ],
        1,
    );
    assert!(
        err.contains(":5:16: peers[0].hold-time: \"2s\" must be 0 or at least 3s"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");

    let err = fails(
        &[
            "--bgp-config",
            &config,
            "--cluster-state",
            dir.join("missing").to_str().unwrap(),
            "--node",
            "master1",
        ],
        1,
    );
    assert!(err.starts_with("error: --cluster-state: "), "{err}");

    let err = fails(
        &[
            "--bgp-config",
            &config,
            "--cluster-state",
            &state,
            "--node",
            "master1",
            "--announce",
            "everything",
        ],
        2,
    );
    assert!(
        err.contains("\"everything\" must be local or cluster"),
        "{err}"
    );
}

/// A node with IPv4 and IPv6 pod CIDRs and an IPv4 InternalIP only.
const V4_ONLY_NODE: &str = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: cilium-config, namespace: kube-system}
data: {ipam: kubernetes}
---
apiVersion: v1
kind: Node
metadata:
  name: node-b
  labels: {kubernetes.io/hostname: node-b}
spec:
  podCIDRs: [10.244.4.0/24, 'fd00:10:244:4::/64']
status:
  addresses:
  - {type: InternalIP, address: 192.168.20.32}
";

#[test]
fn a_node_without_an_ipv6_address_gets_no_ipv6_route_on_an_ipv4_session_and_a_warning() {
    let dir = scratch("no-ipv6-address");
    let state = dir.join("state.yaml");
    std::fs::write(&state, V4_ONLY_NODE).unwrap();
    let config = dir.join("bgp.yaml");
    std::fs::write(
        &config,
        "peers:\n\
         - {peer-address: 100.64.0.2, peer-asn: 65002, my-asn: 65001}\n\
         - {peer-address: 100.64.0.4, peer-asn: 65002, my-asn: 65001, next-hop-v6: 'fd00::1'}\n",
    )
    .unwrap();
    let args = |o: &'static str| {
        vec![
            "--bgp-config".to_string(),
            config.display().to_string(),
            "--cluster-state".to_string(),
            state.display().to_string(),
            "--node".to_string(),
            "node-b".to_string(),
            "-o".to_string(),
            o.to_string(),
        ]
    };
    let table_args = args("table");
    let out = ok(&table_args.iter().map(String::as_str).collect::<Vec<_>>());
    let want = "\
node node-b (labels: kubernetes.io/hostname=node-b) ipam kubernetes, announce local
peer 100.64.0.2:179 AS 65002 (eBGP, my AS 65001) peers[0], hold-time 90s, keepalive 30s, graceful-restart 120s, 1 route
  10.244.4.0/24  next-hop <session local address>  origin incomplete  as-path 65001
peer 100.64.0.4:179 AS 65002 (eBGP, my AS 65001) peers[1], hold-time 90s, keepalive 30s, next-hop-v6 fd00::1, graceful-restart 120s, 2 routes
  10.244.4.0/24       next-hop <session local address>  origin incomplete  as-path 65001
  fd00:10:244:4::/64  next-hop fd00::1                  origin incomplete  as-path 65001
warnings:
  fd00:10:244:4::/64 of node node-b is not announced to 100.64.0.2:179: an IPv6 route on an IPv4 session needs an IPv6 next hop: the node has no IPv6 address (InternalIP or --source-address) and peers[0] sets no next-hop-v6
";
    assert_eq!(out, want);
    let json_args = args("json");
    let v: Value = serde_json::from_str(&ok(&json_args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()))
    .unwrap();
    let w = &v["warnings"][0];
    assert_eq!(w["kind"], "no-next-hop");
    assert_eq!(w["peer"], "100.64.0.2:179");
    assert_eq!(w["family"], "ipv6");
    assert_eq!(v["peers"][0]["routes"].as_array().unwrap().len(), 1);
    assert_eq!(v["peers"][0]["next_hop_v6"], Value::Null);
    assert_eq!(v["peers"][1]["next_hop_v6"], "fd00::1");
}

#[test]
fn ipv4_routes_on_an_ipv6_session_without_an_ipv4_address_are_marked_rfc8950() {
    let dir = scratch("rfc8950");
    let state = dir.join("state.yaml");
    std::fs::write(
        &state,
        V4_ONLY_NODE.replace("address: 192.168.20.32", "address: 'fd00:192:168:20::32'"),
    )
    .unwrap();
    let config = dir.join("bgp.yaml");
    std::fs::write(
        &config,
        "peers: [{peer-address: 'fd00::2', peer-asn: 65002, my-asn: 65001}]\n",
    )
    .unwrap();
    let c = config.display().to_string();
    let st = state.display().to_string();
    let out = ok(&[
        "--bgp-config",
        &c,
        "--cluster-state",
        &st,
        "--node",
        "node-b",
    ]);
    assert!(
        out.contains(
            "  10.244.4.0/24       next-hop <session local address> (RFC 8950 extended next \
             hop: sent only if the peer offers it)  origin incomplete  as-path 65001\n"
        ),
        "{out}"
    );
    assert!(out.contains("warnings: none\n"), "{out}");
    let json = ok(&[
        "--bgp-config",
        &c,
        "--cluster-state",
        &st,
        "--node",
        "node-b",
        "-o",
        "json",
    ]);
    let v: Value = serde_json::from_str(&json).unwrap();
    let routes = v["peers"][0]["routes"].as_array().unwrap();
    assert_eq!(routes[0]["needs_extended_next_hop"], true);
    assert_eq!(routes[1]["needs_extended_next_hop"], false);
}

/// The LoadBalancer sample: each Service's decision in the table and the JSON, the
/// routes each peer gets (aggregation and communities of the pool's advertisements),
/// the on/off rule from the bgp-config's `speaker` block and `--announce-lb-ips` (not
/// cilium-config's `bgp-announce-lb-ip` since issue 29), and `--lb-class`.
#[test]
fn load_balancer_services_show_their_decision_and_their_routes() {
    let dir = scratch("load-balancers");
    let config = dir.join("bgp-config.yaml");
    std::fs::write(
        &config,
        "peers: [{peer-address: 10.5.0.1, peer-asn: 65000, my-asn: 65083}]
bgp-communities: {edge: '65083:100'}
address-pools:
- name: lb
  protocol: bgp
  addresses: [198.51.100.0/24, '2001:db8:100::/64']
  bgp-advertisements:
  - {}
  - {aggregation-length: 24, aggregation-length-v6: 64, communities: [edge]}
",
    )
    .unwrap();
    let config = config.display().to_string();
    let state = sample("config/cluster-state/load-balancers.yaml");
    let args = [
        "--bgp-config",
        &config,
        "--cluster-state",
        &state,
        "--node",
        "n1",
    ];
    let out = ok(&args);
    assert!(
        out.contains(
            "loadbalancer ips: announced (the bgp-config's speaker.announce-lb-ips, true by default)"
        ),
        "{out}"
    );
    // The bgp-config's switch, whatever cilium-config says; the flag wins over it.
    let quiet = dir.join("bgp-config-no-lb.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &quiet,
        format!("{text}speaker: {{announce-lb-ips: false}}\n"),
    )
    .unwrap();
    let quiet = quiet.display().to_string();
    let quiet_args = [
        "--bgp-config",
        &quiet,
        "--cluster-state",
        &state,
        "--node",
        "n1",
    ];
    let no_lb = ok(&quiet_args);
    assert!(
        no_lb.contains(
            "loadbalancer ips: not announced (the bgp-config's speaker.announce-lb-ips is false)"
        ),
        "{no_lb}"
    );
    assert!(!no_lb.contains("loadbalancer routes"), "{no_lb}");
    let forced = ok(&[&quiet_args[..], &["--announce-lb-ips", "on"]].concat());
    assert!(forced.contains("loadbalancer routes: 3"), "{forced}");
    // shop/web is Local with a ready endpoint on n1; shop/api is Cluster.
    for line in [
        // IPv6 ones need a next hop n1 (IPv4 only, IPv4 session) does not have.
        "  loadbalancer routes: 3",
        "198.51.100.0/24   next-hop <session local address>  origin incomplete  as-path 65083  communities 65083:100",
        "198.51.100.10/32  next-hop <session local address>  origin incomplete  as-path 65083",
        "198.51.100.11/32  next-hop <session local address>",
    ] {
        assert!(out.contains(line), "{line:?} missing in\n{out}");
    }
    let v: Value = serde_json::from_str(&ok(&[&args[..], &["-o", "json"]].concat())).unwrap();
    let services = v["lb"]["services"].as_array().unwrap();
    let decision = |name: &str| {
        services
            .iter()
            .find(|s| s["service"] == name)
            .map(|s| s["reason"].clone())
            .unwrap()
    };
    assert_eq!(decision("shop/web"), Value::Null, "{v:#}");
    assert_eq!(decision("shop/pending"), "no_ip");
    assert_eq!(decision("shop/other-class"), "class");
    assert_eq!(v["peers"][0]["lb_routes"].as_array().unwrap().len(), 3);
    // n2 hosts a ready endpoint of the Local Service too (n3's is terminating).
    let n2 = ok(&[
        "--bgp-config",
        &config,
        "--cluster-state",
        &state,
        "--node",
        "n2",
    ]);
    assert!(n2.contains("198.51.100.10/32"), "{n2}");
    // n3 carries the exclusion label.
    let n3 = ok(&[
        "--bgp-config",
        &config,
        "--cluster-state",
        &state,
        "--node",
        "n3",
    ]);
    assert!(!n3.contains("loadbalancer routes"), "{n3}");
    assert!(n3.contains("exclude-from-external-load-balancers"), "{n3}");
    // Forced off; a class handled.
    let off = ok(&[&args[..], &["--announce-lb-ips", "off"]].concat());
    assert!(
        off.contains("loadbalancer ips: not announced (--announce-lb-ips off)"),
        "{off}"
    );
    assert!(!off.contains("loadbalancer routes"), "{off}");
    let classy = ok(&[
        &args[..],
        &["--lb-class", "example.com/other-lb", "-o", "json"],
    ]
    .concat());
    let v: Value = serde_json::from_str(&classy).unwrap();
    let other = v["lb"]["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["service"] == "shop/other-class")
        .unwrap()
        .clone();
    assert_ne!(other["reason"], "class", "{other:#}");
}

/// The allocation's cluster: one Node, and LoadBalancer Services covering each answer
/// of the allocator (every one IPv4 with a ClusterIP, as the API server fills them).
const ALLOCATION_STATE: &str = "\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
spec: {podCIDR: 10.244.1.0/24}
status: {addresses: [{type: InternalIP, address: 10.0.0.11}]}
";

/// One LoadBalancer Service in namespace shop: `extra` is YAML merged into its spec,
/// `annotations` its annotations, `status` its ingress IPs.
fn lb_service(name: &str, annotations: &str, extra: &str, status: &[&str]) -> String {
    let ingress: Vec<String> = status.iter().map(|ip| format!("{{ip: {ip}}}")).collect();
    format!(
        "---
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: shop, annotations: {{{annotations}}}}}
spec: {{type: LoadBalancer, clusterIP: 10.96.0.1, ipFamilies: [IPv4], ports: [{{port: 80}}]{extra}}}
status: {{loadBalancer: {{ingress: [{}]}}}}
",
        ingress.join(", ")
    )
}

/// Collapses the runs of spaces that pad the table's columns.
fn squeeze(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Issue 30: `plan` shows what `podcidr-speaker allocate` would write, from scratch as a
/// leader starting: status addresses claimed first (kept), then the waiting Services in
/// key order (new), each pending one with its reason in words, the pools' use, and the
/// status addresses outside every pool named as a reload refusal names them. Every
/// expected line is worked out from the rules (the comments say how), in the table and
/// in the JSON.
#[test]
fn plan_shows_the_allocation_from_scratch_with_reasons_and_orphans() {
    let dir = scratch("allocation");
    let mut state = ALLOCATION_STATE.to_owned();
    for s in [
        // Its status address is in pool public and free: kept, claimed before the rest.
        lb_service("kept", "", "", &["203.0.113.2"]),
        // Waiting ones, decided at the end of the list in key order: fresh takes
        // public's first free address, .0.
        lb_service("fresh", "", "", &[]),
        // The named pool (auto-assign off) gives its first address.
        lb_service(
            "named",
            "metallb.universe.tf/address-pool: reserved",
            "",
            &[],
        ),
        // A status address outside every pool: not kept; a new one, public's .1.
        lb_service("orphan", "", "", &["192.0.2.50"]),
        // A requested address in no pool.
        lb_service("outside-request", "", ", loadBalancerIP: 192.0.2.99", &[]),
        // A pool that does not exist.
        lb_service("typo", "metallb.universe.tf/address-pool: nope", "", &[]),
        // IPv6 only: no auto-assign pool has IPv6 addresses.
        lb_service("v6", "", ", clusterIP: 'fd00::1', ipFamilies: [IPv6]", &[]),
        // Public's last free address, .3.
        lb_service("waits", "", "", &[]),
        // kept's address, requested, without allow-shared-ip.
        lb_service("wants-taken", "", ", loadBalancerIP: 203.0.113.2", &[]),
        // Public is full now (reserved is not auto-assign).
        lb_service("zz-full", "", "", &[]),
        // Its status address is kept although its request cannot be read (a bad edit
        // never takes an address away): reserved's second address, kept with a warning.
        lb_service(
            "bad-edit",
            "",
            ", loadBalancerIP: not-an-ip",
            &["198.51.100.9"],
        ),
        // Of a class not served: not the allocator's.
        lb_service(
            "other-class",
            "",
            ", loadBalancerClass: example.com/other",
            &["203.0.113.3"],
        ),
    ] {
        state.push_str(&s);
    }
    let state_path = dir.join("state.yaml");
    std::fs::write(&state_path, state).unwrap();
    let config = dir.join("bgp.yaml");
    std::fs::write(
        &config,
        "peers: [{peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001}]
address-pools:
- {name: public, protocol: bgp, addresses: [203.0.113.0/30]}
- {name: reserved, protocol: bgp, auto-assign: false, addresses: [198.51.100.8/31]}
",
    )
    .unwrap();
    let (config, state_path) = (
        config.display().to_string(),
        state_path.display().to_string(),
    );
    let args = [
        "--bgp-config",
        &config,
        "--cluster-state",
        &state_path,
        "--node",
        "n1",
    ];
    let out = ok(&args);
    let section: Vec<String> = out
        .lines()
        .skip_while(|l| !l.starts_with("loadbalancer ip allocation"))
        .take_while(|l| *l != "warnings:")
        .map(squeeze)
        .collect();
    let want = [
        "loadbalancer ip allocation (what `podcidr-speaker allocate` would write, starting now \
         from these Services and this config; not what the cluster has):",
        // public: .0 fresh, .1 orphan, .2 kept, .3 waits; reserved: .8 named, .9 bad-edit.
        "pool public 4/4 in use",
        "pool reserved 2/2 in use",
        "service shop/bad-edit holds 198.51.100.9 (pool reserved) kept from its status; \
         request unreadable, ignored until fixed: spec.loadBalancerIP: \"not-an-ip\" is not \
         an IP address",
        "service shop/fresh holds 203.0.113.0 (pool public) newly allocated (status: none)",
        "service shop/kept holds 203.0.113.2 (pool public) kept from its status",
        "service shop/named holds 198.51.100.8 (pool reserved) newly allocated (status: none)",
        "service shop/orphan holds 203.0.113.1 (pool public) newly allocated (status: \
         192.0.2.50 (outside every pool))",
        "service shop/outside-request pending the requested 192.0.2.99 is in no address pool \
         (status: none)",
        "service shop/typo pending metallb.universe.tf/address-pool names pool nope, which the \
         config does not have (status: none)",
        "service shop/v6 pending no pool with auto-assign has IPv6 addresses (name one with \
         metallb.universe.tf/address-pool) (status: none)",
        "service shop/waits holds 203.0.113.3 (pool public) newly allocated (status: none)",
        "service shop/wants-taken pending 203.0.113.2 is in use by shop/kept and cannot be \
         shared: one of the two has no metallb.universe.tf/allow-shared-ip (status: none)",
        "service shop/zz-full pending every pool with auto-assign is out of IPv4 addresses \
         (status: none)",
        "status addresses outside every pool: 192.0.2.50 (held by shop/orphan): an allocator \
         running on an earlier config refuses this one until those Services change",
    ];
    assert_eq!(section, want, "in:\n{out}");

    let v: Value = serde_json::from_str(&ok(&[&args[..], &["-o", "json"]].concat())).unwrap();
    let a = &v["allocation"];
    assert!(
        a["what"]
            .as_str()
            .unwrap()
            .contains("not what the cluster has"),
        "{a:#}"
    );
    assert_eq!(
        a["pools"],
        serde_json::json!([
            {"name": "public", "in_use": 4, "total": 4},
            {"name": "reserved", "in_use": 2, "total": 2},
        ])
    );
    let services = a["services"].as_array().unwrap();
    let names: Vec<&str> = services
        .iter()
        .map(|s| s["service"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "shop/bad-edit",
            "shop/fresh",
            "shop/kept",
            "shop/named",
            "shop/orphan",
            "shop/outside-request",
            "shop/typo",
            "shop/v6",
            "shop/waits",
            "shop/wants-taken",
            "shop/zz-full"
        ]
    );
    let of = |name: &str| {
        services
            .iter()
            .find(|s| s["service"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        of("shop/kept"),
        serde_json::json!({
            "service": "shop/kept", "status": ["203.0.113.2"], "warning": null,
            "state": "holds", "ips": ["203.0.113.2"], "pool": "public", "origin": "kept",
        })
    );
    assert_eq!(
        of("shop/bad-edit")["warning"],
        "spec.loadBalancerIP: \"not-an-ip\" is not an IP address"
    );
    assert_eq!(of("shop/bad-edit")["origin"], "kept");
    assert_eq!(
        of("shop/orphan"),
        serde_json::json!({
            "service": "shop/orphan", "status": ["192.0.2.50"], "warning": null,
            "state": "holds", "ips": ["203.0.113.1"], "pool": "public", "origin": "new",
        })
    );
    let reasons: Vec<(&str, &str)> = services
        .iter()
        .filter(|s| s["state"] == "pending")
        .map(|s| {
            (
                s["service"].as_str().unwrap(),
                s["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        reasons,
        [
            ("shop/outside-request", "not_in_pool"),
            ("shop/typo", "unknown_pool"),
            ("shop/v6", "no_auto_pool"),
            ("shop/wants-taken", "in_use"),
            ("shop/zz-full", "pools_full"),
        ]
    );
    assert_eq!(
        of("shop/typo")["reason_text"],
        "metallb.universe.tf/address-pool names pool nope, which the config does not have"
    );
    assert_eq!(a["pending"], 5);
    assert_eq!(
        a["status_outside_pools"],
        serde_json::json!([{"ip": "192.0.2.50", "services": ["shop/orphan"]}])
    );
    assert_eq!(a["unreadable"], serde_json::json!([]));

    // `--lb-class` as `run` takes it: other-class is served and keeps its status.
    let classy: Value = serde_json::from_str(&ok(&[
        &args[..],
        &["--lb-class", "example.com/other", "-o", "json"],
    ]
    .concat()))
    .unwrap();
    let services = classy["allocation"]["services"].as_array().unwrap();
    let other = services
        .iter()
        .find(|s| s["service"] == "shop/other-class")
        .unwrap();
    assert_eq!(other["origin"], "kept", "{other:#}");
    // --lb-class replaces the default: Services without a class are not served then.
    assert_eq!(services.len(), 1, "{services:#?}");
}

/// Without address pools, or without Services, there is nothing to allocate: no section
/// and `null` in the JSON (the plan of a cluster without Services says nothing of it).
#[test]
fn plan_without_pools_or_services_shows_no_allocation() {
    let config = sample("config/cilium-bgp-config.yaml");
    let state = sample("config/cluster-state/outage");
    let args = [
        "--bgp-config",
        config.as_str(),
        "--cluster-state",
        state.as_str(),
        "--node",
        "master1",
    ];
    assert!(!ok(&args).contains("loadbalancer ip allocation"));
    let v: Value = serde_json::from_str(&ok(&[&args[..], &["-o", "json"]].concat())).unwrap();
    assert_eq!(v["allocation"], Value::Null);
}
