//! `run --dry-run` and `--version` of the built binary: what the deploy manifests and an
//! operator rely on before anything connects. No network: a dry run must not need one.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::harness::process::{run, write_file, TempDir};

const BINARY: &str = env!("CARGO_BIN_EXE_podcidr-speaker");
const TIMEOUT: Duration = Duration::from_secs(20);

/// The binary with an empty environment plus `env`: no KUBECONFIG, no in-cluster
/// variables, so a dry run that tried the API server would fail.
fn speaker(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BINARY);
    cmd.args(args).env_clear().envs(env.iter().copied());
    run(&mut cmd, TIMEOUT).unwrap_or_else(|e| panic!("podcidr-speaker {args:?}: {e}"))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const BGP_CONFIG: &str = "\
peers:
  - peer-address: 100.64.0.2
    peer-asn: 65000
    my-asn: 65001
  - peer-address: 100.64.0.3
    peer-asn: 65001
    my-asn: 65001
    node-selectors:
      - match-labels:
          rack: r2
";

fn node_yaml(name: &str, rack: &str, cidr: &str, ip: &str) -> String {
    format!(
        "apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    rack: {rack}
spec:
  podCIDRs: [{cidr}]
status:
  addresses:
    - type: InternalIP
      address: {ip}
"
    )
}

const CILIUM_CONFIG: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: cilium-config
  namespace: kube-system
data:
  ipam: kubernetes
";

/// A standalone setup: bgp-config.yaml and cluster/ with two nodes.
fn standalone(dir: &Path) {
    write_file(&dir.join("bgp-config.yaml"), BGP_CONFIG).unwrap();
    let cluster = dir.join("cluster");
    std::fs::create_dir(&cluster).unwrap();
    write_file(&cluster.join("cilium-config.yaml"), CILIUM_CONFIG).unwrap();
    write_file(
        &cluster.join("n1.yaml"),
        &node_yaml("n1", "r1", "10.244.1.0/24", "100.64.1.1"),
    )
    .unwrap();
    write_file(
        &cluster.join("n2.yaml"),
        &node_yaml("n2", "r2", "10.244.2.0/24", "100.64.1.2"),
    )
    .unwrap();
}

fn path_arg(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

#[test]
fn dry_run_in_cluster_settings_print_the_node_from_the_environment_without_an_api_server() {
    let out = speaker(
        &[
            "run",
            "--dry-run",
            "--source-address=192.0.2.7",
            "--listen-addr=0.0.0.0:179",
            "--bgp-config-map=metallb-system/config:config",
            "--log-format=json",
        ],
        &[("NODE_NAME", "worker-from-downward-api")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "node:           worker-from-downward-api",
        "bgp-config:     configmap metallb-system/config:config",
        "source-address: 192.0.2.7",
        "listen-addr:    0.0.0.0:179",
        // password-secret's Secrets live beside the bgp-config.
        "secrets:        kubernetes API, namespace metallb-system",
        "metrics-addr:   0.0.0.0:9477",
        "announce:       local",
        "ipam:           auto",
        "log-format:     json",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

#[test]
fn dry_run_standalone_validates_the_files_and_shows_this_nodes_prefixes_and_peers() {
    let dir = TempDir::new("pcs-cli").unwrap();
    standalone(dir.path());
    let config = path_arg(dir.path(), "bgp-config.yaml");
    let cluster = path_arg(dir.path(), "cluster");
    let out = speaker(
        &[
            "run",
            "--dry-run",
            "--node=n2",
            "--bgp-config",
            &config,
            "--cluster-state",
            &cluster,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("cluster:        2 nodes, ipam kubernetes"),
        "{text}"
    );
    assert!(text.contains("node prefixes:  10.244.2.0/24"), "{text}");
    // Issue 29: the route classes as the bgp-config switches them, and the conflict
    // policy.
    for line in [
        "lb ips:         announced (the bgp-config's speaker.announce-lb-ips, true by default)",
        "pod cidrs:      announced",
        "cilium-bgp-conflict: hold (no new session while cilium-config turns Cilium's embedded BGP on)",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    assert!(
        text.contains("peers[0] 100.64.0.2:179 AS 65000 (my AS 65001): selected, 1 routes"),
        "{text}"
    );
    assert!(
        text.contains("peers[1] 100.64.0.3:179 AS 65001 (my AS 65001): selected, 1 routes"),
        "{text}"
    );

    // The rack-r2 selector does not pick n1.
    let out = speaker(
        &[
            "run",
            "--dry-run",
            "--node=n1",
            "--bgp-config",
            &config,
            "--cluster-state",
            &cluster,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("peers[1] 100.64.0.3:179 AS 65001 (my AS 65001): not selected"),
        "{}",
        stdout(&out)
    );

    // A node the cluster state does not have: valid, but it would open nothing.
    let out = speaker(
        &[
            "run",
            "--dry-run",
            "--node=ghost",
            "--bgp-config",
            &config,
            "--cluster-state",
            &cluster,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("node ghost is not in the cluster state: it announces nothing"),
        "{text}"
    );
    assert!(
        text.contains("no peer is selected: the node's labels are unknown"),
        "{text}"
    );
}

#[test]
fn dry_run_fails_on_an_invalid_config_naming_the_field() {
    let dir = TempDir::new("pcs-cli").unwrap();
    standalone(dir.path());
    write_file(
        &dir.path().join("bgp-config.yaml"),
        "peers:\n  - peer-address: 100.64.0.2\n    peer-asn: 65000\n    my-asn: 65001\n    hold-time: 2s\n",
    )
    .unwrap();
    let out = speaker(
        &[
            "run",
            "--dry-run",
            "--node=n1",
            "--bgp-config",
            &path_arg(dir.path(), "bgp-config.yaml"),
            "--cluster-state",
            &path_arg(dir.path(), "cluster"),
        ],
        &[],
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(stderr(&out).contains("hold-time"), "{}", stderr(&out));
}

#[test]
fn dry_run_fails_without_a_node_in_local_mode_and_on_a_missing_cluster_state() {
    let out = speaker(&["run", "--dry-run"], &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--node"), "{}", stderr(&out));

    let dir = TempDir::new("pcs-cli").unwrap();
    standalone(dir.path());
    let out = speaker(
        &[
            "run",
            "--dry-run",
            "--node=n1",
            "--bgp-config",
            &path_arg(dir.path(), "bgp-config.yaml"),
            "--cluster-state",
            &path_arg(dir.path(), "no-such-dir"),
        ],
        &[],
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(stderr(&out).contains("no-such-dir"), "{}", stderr(&out));

    // --cluster-state alone would leave the bgp-config to the API server: refused.
    let out = speaker(
        &[
            "run",
            "--dry-run",
            "--node=n1",
            "--cluster-state",
            &path_arg(dir.path(), "cluster"),
        ],
        &[],
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--bgp-config"), "{}", stderr(&out));
}

#[test]
fn flags_are_read_from_the_environment_too() {
    let out = speaker(
        &["run", "--dry-run"],
        &[
            ("NODE_NAME", "n9"),
            ("PODCIDR_ANNOUNCE", "cluster"),
            ("PODCIDR_IPAM", "cluster-pool"),
            ("PODCIDR_METRICS_ADDR", "127.0.0.1:9999"),
            ("PODCIDR_ROUTER_ID", "192.0.2.9"),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "node:           n9",
        "announce:       cluster",
        "ipam:           cluster-pool",
        "metrics-addr:   127.0.0.1:9999",
        "router-id:      192.0.2.9",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    let out = speaker(&["run", "--dry-run", "--ipam=crd"], &[("NODE_NAME", "n9")]);
    assert!(!out.status.success(), "--ipam crd accepted");
}

#[test]
fn version_is_the_package_version() {
    let out = speaker(&["--version"], &[]);
    assert!(out.status.success());
    let text = stdout(&out);
    let expected = match option_env!("GIT_SHA") {
        Some(sha) if !sha.is_empty() => {
            format!("podcidr-speaker {} ({sha})", env!("CARGO_PKG_VERSION"))
        }
        _ => format!("podcidr-speaker {}", env!("CARGO_PKG_VERSION")),
    };
    assert_eq!(text.trim(), expected);
}
