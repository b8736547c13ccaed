//! The standalone file source on real files: the outage samples under
//! config/cluster-state, reloads within a second, node deletion by removal from the
//! file, bad files keeping the last good state, and the bgp-config text file; the
//! Services and EndpointSlices of the files as LoadBalancer facts and their deltas.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

#[path = "../common/sources.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{bounded, nets, secret_key, Source};
use ipnet::IpNet;
use podcidr_speaker::sources::file::{self, FileSourceConfig, DEFAULT_POLL};
use podcidr_speaker::sources::model::{node_view, IpamMode, IpamOverride, NodeView};
use podcidr_speaker::sources::services::{
    LbFacts, LbUpdate, ObjectKey, ServiceFacts, SliceFacts, TrafficPolicy,
};
use podcidr_speaker::sources::{channel, Resource, SourceUpdate};

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/cluster-state")
}

/// A fresh directory under Cargo's per-test scratch space.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("file_sources")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes like an editor: a temporary file renamed over the target.
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_file_name(format!(
        ".{}.tmp",
        path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn node_doc(name: &str, cidr: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\nspec:\n  podCIDRs: [{cidr}]\n"
    )
}

const KUBE_CONFIG: &str =
    "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cilium-config}\ndata: {ipam: kubernetes}\n";

fn start(path: PathBuf) -> Source {
    start_with(path, false)
}

fn start_with(path: PathBuf, load_balancers: bool) -> Source {
    let (tx, rx) = channel(8);
    let config = FileSourceConfig {
        path,
        ipam: IpamOverride::Auto,
        poll: DEFAULT_POLL,
        load_balancers,
        own_node: None,
    };
    let task = tokio::spawn(async move {
        let _ = file::run(config, tx).await;
    });
    Source::new(rx, task)
}

fn prefixes(view: &NodeView) -> Vec<(String, Vec<IpNet>)> {
    view.nodes
        .iter()
        .map(|(k, v)| (k.to_string(), v.prefixes.clone()))
        .collect()
}

fn outage(ipam: IpamMode) -> Vec<(String, Vec<IpNet>)> {
    let cidrs = match ipam {
        IpamMode::ClusterPool => [
            "10.5.113.0/24",
            "10.5.114.0/24",
            "10.5.115.0/24",
            "10.5.112.0/24",
        ],
        IpamMode::Kubernetes => [
            "10.5.112.0/24",
            "10.5.113.0/24",
            "10.5.114.0/24",
            "10.5.115.0/24",
        ],
        // The outage's CiliumNodes hold no pool allocations.
        IpamMode::MultiPool => {
            return ["master1", "master2", "master3", "worker1"]
                .into_iter()
                .map(|n| (n.to_owned(), Vec::new()))
                .collect()
        }
    };
    ["master1", "master2", "master3", "worker1"]
        .into_iter()
        .zip(cidrs)
        .map(|(n, c)| (n.to_owned(), nets(&[c])))
        .collect()
}

/// The outage sample as `kubectl get nodes,ciliumnodes -o yaml` printed it, with
/// cilium-config `ipam: cluster-pool`: the CiliumNode CIDRs, drift on all four.
#[test]
fn outage_sample_in_cluster_pool_holds_cilium_node_cidrs() {
    let state = file::load(&samples().join("outage")).unwrap();
    assert_eq!(state.nodes.len(), 4);
    assert_eq!(state.cilium_nodes.len(), 4);
    let view = node_view(&state, IpamOverride::Auto).unwrap();
    assert_eq!(view.ipam, IpamMode::ClusterPool);
    assert_eq!(prefixes(&view), outage(IpamMode::ClusterPool));
    assert_eq!(view.drift_count(), 4);
    let master1 = &view.nodes["master1"];
    let drift = master1.drift.as_ref().unwrap();
    assert_eq!(drift.node_cidrs, nets(&["10.5.112.0/24"]));
    assert_eq!(drift.cilium_cidrs, nets(&["10.5.113.0/24"]));
    assert_eq!(
        master1.internal_ipv4,
        Some("192.168.10.11".parse().unwrap())
    );
    assert_eq!(
        master1
            .labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("rack-a")
    );
    assert!(view.warnings.is_empty(), "{:?}", view.warnings);
}

/// The same cluster with cilium-config switched to `ipam: kubernetes`, live through the
/// file source: the Node CIDRs, drift still reported on all four.
#[tokio::test]
async fn outage_sample_switched_to_kubernetes_holds_node_cidrs() {
    bounded(async {
        let dir = scratch("outage-switch");
        for name in ["nodes.yaml", "cilium-config.yaml"] {
            std::fs::copy(samples().join("outage").join(name), dir.join(name)).unwrap();
        }
        let mut s = start(dir.clone());
        let view = s.view().await;
        assert_eq!(prefixes(&view), outage(IpamMode::ClusterPool));

        let config = std::fs::read_to_string(dir.join("cilium-config.yaml")).unwrap();
        write_atomic(
            &dir.join("cilium-config.yaml"),
            &config.replace("ipam: cluster-pool", "ipam: kubernetes"),
        );
        let view = s.view().await;
        assert_eq!(view.ipam, IpamMode::Kubernetes);
        assert_eq!(prefixes(&view), outage(IpamMode::Kubernetes));
        assert_eq!(view.drift_count(), 4);
    })
    .await;
}

/// Removing cilium-config from the cluster state (on a `kubernetes` IPAM cluster) must
/// not switch auto mode to Cilium's default, cluster-pool: that would announce the
/// CiliumNode CIDRs, the outage. The last one stays in force and the status says so.
#[tokio::test]
async fn a_removed_cilium_config_stays_in_force() {
    use podcidr_speaker::sources::model::CILIUM_CONFIG_KEPT;
    bounded(async {
        let dir = scratch("outage-config-removed");
        std::fs::copy(samples().join("outage/nodes.yaml"), dir.join("nodes.yaml")).unwrap();
        let config = std::fs::read_to_string(samples().join("outage/cilium-config.yaml")).unwrap();
        write_atomic(
            &dir.join("cilium-config.yaml"),
            &config.replace("ipam: cluster-pool", "ipam: kubernetes"),
        );
        let mut s = start(dir.clone());
        let view = s.view().await;
        assert_eq!(prefixes(&view), outage(IpamMode::Kubernetes));

        std::fs::remove_file(dir.join("cilium-config.yaml")).unwrap();
        let st = s
            .status(Resource::ClusterStateFile, |st| st.relists == 2)
            .await;
        assert_eq!(st.last_error.as_deref(), Some(CILIUM_CONFIG_KEPT));
        s.no_update();

        // Back with another mode: that one is applied, the warning is gone.
        std::fs::copy(
            samples().join("outage/cilium-config.yaml"),
            dir.join("cilium-config.yaml"),
        )
        .unwrap();
        let view = s.view().await;
        assert_eq!(prefixes(&view), outage(IpamMode::ClusterPool));
        let st = s
            .status(Resource::ClusterStateFile, |st| st.relists == 3)
            .await;
        assert_eq!(st.last_error, None);
    })
    .await;
}

/// The daemon's source (`own_node`) keeps that node's labels only, and its snapshots
/// only that node's facts beside the view of every node: a change to another node's
/// labels alone sends nothing, nor does one to its other facts that the view does not
/// read (a taint); a change to its pod CIDRs and one to the own node's labels are sent.
#[tokio::test]
async fn own_node_keeps_only_the_own_nodes_labels_and_facts() {
    bounded(async {
        let dir = scratch("labels-of");
        let path = dir.join("cluster.yaml");
        let labelled = |a: &str, b: &str| {
            format!(
                "{KUBE_CONFIG}{}  labels: {{role: {a}}}\n{}  labels: {{role: {b}}}\n",
                node_doc("a", "10.1.0.0/24").replace("spec:\n  podCIDRs: [10.1.0.0/24]\n", ""),
                node_doc("b", "10.2.0.0/24").replace("spec:\n  podCIDRs: [10.2.0.0/24]\n", "")
            )
        };
        write_atomic(&path, &labelled("x", "y"));
        let (tx, rx) = channel(8);
        let config = FileSourceConfig {
            path: path.clone(),
            ipam: IpamOverride::Auto,
            poll: DEFAULT_POLL,
            load_balancers: false,
            own_node: Some("b".into()),
        };
        let task = tokio::spawn(async move {
            let _ = file::run(config, tx).await;
        });
        let mut s = Source::new(rx, task);
        let first = s.cluster().await;
        assert_eq!(
            first.state.nodes.keys().collect::<Vec<_>>(),
            ["b"],
            "another node's facts kept"
        );
        let view = first.view.as_ref().expect("view");
        assert_eq!(
            view.nodes.keys().map(|k| &**k).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(
            view.nodes["a"].labels.is_empty(),
            "another node's labels kept"
        );
        assert_eq!(
            first.state.nodes["b"]
                .labels
                .get("role")
                .map(String::as_str),
            Some("y")
        );
        assert_eq!(
            file::load(&path).unwrap().nodes["a"]
                .labels
                .get("role")
                .map(String::as_str),
            Some("x"),
            "the one-shot load keeps every node's"
        );

        // Another node's labels alone: loaded, nothing sent.
        s.status(Resource::ClusterStateFile, |st| st.relists == 1)
            .await;
        write_atomic(&path, &labelled("z", "y"));
        s.status(Resource::ClusterStateFile, |st| st.relists == 2)
            .await;
        s.no_update();

        // Another node's taint (a fact the view does not read): nothing sent.
        let tainted = labelled("z", "y").replacen(
            "  labels: {role: z}\n",
            "  labels: {role: z}\nspec:\n  taints: [{key: example.com/t, effect: NoSchedule}]\n",
            1,
        );
        assert_ne!(tainted, labelled("z", "y"));
        write_atomic(&path, &tainted);
        s.status(Resource::ClusterStateFile, |st| st.relists == 3)
            .await;
        s.no_update();

        // Another node's pod CIDRs: sent, in the view.
        write_atomic(
            &path,
            &labelled("z", "y").replacen(
                "  labels: {role: z}\n",
                "  labels: {role: z}\nspec:\n  podCIDRs: [10.9.0.0/24]\n",
                1,
            ),
        );
        let next = s.cluster().await;
        assert_eq!(next.state.nodes.keys().collect::<Vec<_>>(), ["b"]);
        let a = &next.view.as_ref().expect("view").nodes["a"];
        assert_eq!(
            a.node_cidrs,
            ["10.9.0.0/24".parse::<ipnet::IpNet>().unwrap()]
        );

        // Its own labels: sent.
        write_atomic(&path, &labelled("z", "w"));
        let next = s.cluster().await;
        assert_eq!(
            next.state.nodes["b"].labels.get("role").map(String::as_str),
            Some("w")
        );
        assert_eq!(next.state.nodes.keys().collect::<Vec<_>>(), ["b"]);
    })
    .await;
}

/// An edit is applied within a second; removing a node from the file deletes it; an
/// unchanged rewrite sends nothing.
#[tokio::test]
async fn edits_apply_within_a_second_and_removal_is_deletion() {
    bounded(async {
        let dir = scratch("edits");
        let path = dir.join("cluster.yaml");
        let two = format!(
            "{KUBE_CONFIG}{}{}",
            node_doc("a", "10.1.0.0/24"),
            node_doc("b", "10.2.0.0/24")
        );
        write_atomic(&path, &two);
        let mut s = start(path.clone());
        let view = s.view().await;
        assert_eq!(
            prefixes(&view),
            [
                ("a".to_owned(), nets(&["10.1.0.0/24"])),
                ("b".to_owned(), nets(&["10.2.0.0/24"]))
            ]
        );

        let edited = two.replace("10.2.0.0/24", "10.2.9.0/24");
        let written = Instant::now();
        write_atomic(&path, &edited);
        let view = s.view().await;
        let took = written.elapsed();
        assert!(took < Duration::from_secs(1), "edit applied after {took:?}");
        assert_eq!(view.nodes["b"].prefixes, nets(&["10.2.9.0/24"]));

        // Rewritten with the same content: loaded again, nothing sent.
        s.status(Resource::ClusterStateFile, |st| st.relists == 2)
            .await;
        write_atomic(&path, &edited);
        s.status(Resource::ClusterStateFile, |st| st.relists == 3)
            .await;
        s.no_update();

        // In-place rewrite (same inode) without b: b is deleted.
        std::fs::write(
            &path,
            format!("{KUBE_CONFIG}{}", node_doc("a", "10.1.0.0/24")),
        )
        .unwrap();
        let view = s.view().await;
        assert_eq!(view.nodes.keys().map(|k| &**k).collect::<Vec<_>>(), ["a"]);
    })
    .await;
}

/// A file that fails to parse (or map, or vanishes) keeps the last good state, and the
/// status says why; fixing it applies the fix.
#[tokio::test]
async fn bad_file_keeps_the_last_good_state_and_says_why() {
    bounded(async {
        let dir = scratch("bad");
        let path = dir.join("cluster.yaml");
        write_atomic(
            &path,
            &format!("{KUBE_CONFIG}{}", node_doc("a", "10.1.0.0/24")),
        );
        let mut s = start(path.clone());
        let good = s.view().await;

        write_atomic(
            &path,
            &format!("{KUBE_CONFIG}---\nkind: Node\nmetadata: {{name: [a\n"),
        );
        let st = s
            .status(Resource::ClusterStateFile, |st| st.errors >= 1)
            .await;
        assert!(!st.up);
        let why = st.last_error.unwrap();
        assert!(why.contains("cluster.yaml: document 2"), "{why}");

        write_atomic(
            &path,
            &format!("{KUBE_CONFIG}{}", node_doc("a", "10.1.0.0/33")),
        );
        let st = s
            .status(Resource::ClusterStateFile, |st| st.errors >= 2)
            .await;
        let why = st.last_error.unwrap();
        assert!(
            why.contains("Node a: spec.podCIDRs[0]: \"10.1.0.0/33\""),
            "{why}"
        );

        std::fs::remove_file(&path).unwrap();
        let st = s
            .status(Resource::ClusterStateFile, |st| st.errors >= 3)
            .await;
        assert!(st.last_error.unwrap().contains("cluster.yaml"));
        s.no_update();
        assert!(s.rx.status.borrow().ready(), "a bad file does not unsync");

        write_atomic(
            &path,
            &format!("{KUBE_CONFIG}{}", node_doc("a", "10.1.7.0/24")),
        );
        let view = s.view().await;
        assert_ne!(view, good);
        assert_eq!(view.nodes["a"].prefixes, nets(&["10.1.7.0/24"]));
        let st = s.status(Resource::ClusterStateFile, |st| st.up).await;
        assert_eq!(st.last_error, None);
    })
    .await;
}

/// A directory of files in any mix; adding and removing files adds and removes nodes.
#[tokio::test]
async fn directory_mix_follows_added_and_removed_files() {
    bounded(async {
        let dir = scratch("dir");
        write_atomic(&dir.join("cilium-config.yaml"), KUBE_CONFIG);
        write_atomic(&dir.join("a.yaml"), &node_doc("a", "10.1.0.0/24"));
        write_atomic(
            &dir.join("b.json"),
            r#"{"kind": "List", "apiVersion": "v1", "items": [
                {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "b"},
                 "spec": {"podCIDRs": ["10.2.0.0/24"]}}]}"#,
        );
        std::fs::write(dir.join("README.txt"), "not a cluster-state file").unwrap();
        let mut s = start(dir.clone());
        let view = s.view().await;
        assert_eq!(view.nodes.len(), 2);

        write_atomic(&dir.join("c.yml"), &node_doc("c", "10.3.0.0/24"));
        let view = s.view().await;
        assert_eq!(view.nodes["c"].prefixes, nets(&["10.3.0.0/24"]));

        std::fs::remove_file(dir.join("a.yaml")).unwrap();
        let view = s.view().await;
        assert_eq!(
            view.nodes.keys().map(|k| &**k).collect::<Vec<_>>(),
            ["b", "c"]
        );

        // The same node in two files is refused as a whole.
        write_atomic(&dir.join("d.yaml"), &node_doc("b", "10.4.0.0/24"));
        let st = s
            .status(Resource::ClusterStateFile, |st| st.errors >= 1)
            .await;
        assert!(st.last_error.unwrap().contains("Node b is defined twice"));
        s.no_update();
    })
    .await;
}

/// `--bgp-config FILE`: the text on start and on change; a vanished file keeps the last
/// text (no `None`), and its return with new text is sent.
#[tokio::test]
async fn bgp_config_file_is_followed() {
    bounded(async {
        let dir = scratch("bgp");
        let path = dir.join("bgp-config.yaml");
        write_atomic(&path, "peers: []\n");
        let (tx, rx) = channel(8);
        let mut source = Source::new(
            rx,
            tokio::spawn(file::watch_text_file(path.clone(), DEFAULT_POLL, tx)),
        );
        assert_eq!(
            source.update().await,
            SourceUpdate::BgpConfigText(Some("peers: []\n".into()))
        );
        write_atomic(&path, "peers: [a]\n");
        assert_eq!(
            source.update().await,
            SourceUpdate::BgpConfigText(Some("peers: [a]\n".into()))
        );
        std::fs::remove_file(&path).unwrap();
        write_atomic(&path, "peers: [b]\n");
        assert_eq!(
            source.update().await,
            SourceUpdate::BgpConfigText(Some("peers: [b]\n".into()))
        );
        std::fs::remove_file(&path).unwrap();
        let st = source.status(Resource::BgpConfigFile, |r| !r.up).await;
        assert!(st.last_error.unwrap().contains("bgp-config.yaml"));
        source.no_update();
    })
    .await;
}

/// Lays `files` out as a kubelet lays out a ConfigMap volume at `dir`: a timestamped
/// directory, `..data` linking to it and each file a link into `..data`; later calls
/// swap `..data` by rename, as a ConfigMap update does.
fn configmap_volume(dir: &Path, version: &str, files: &[(&str, &str)]) {
    let stamped = dir.join(format!("..{version}"));
    std::fs::create_dir_all(&stamped).unwrap();
    for (name, text) in files {
        std::fs::write(stamped.join(name), text).unwrap();
        let link = dir.join(name);
        if link.symlink_metadata().is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), link).unwrap();
        }
    }
    std::os::unix::fs::symlink(format!("..{version}"), dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
}

/// A cluster-state directory and a bgp-config file mounted from ConfigMaps: the
/// volume's symlink swap is seen (inotify on the directory, or the poll), within a
/// second, for both.
#[tokio::test]
async fn configmap_volume_swaps_are_seen() {
    bounded(async {
        let dir = scratch("configmap-state");
        configmap_volume(
            &dir,
            "2026_v1",
            &[("nodes.yaml", &node_doc("a", "10.1.0.0/24"))],
        );
        std::fs::write(dir.join("kube.yaml"), KUBE_CONFIG).unwrap();
        let mut s = start(dir.clone());
        assert_eq!(s.view().await.nodes["a"].prefixes, nets(&["10.1.0.0/24"]));
        let swapped = Instant::now();
        configmap_volume(
            &dir,
            "2026_v2",
            &[("nodes.yaml", &node_doc("a", "10.1.7.0/24"))],
        );
        let view = s.view().await;
        let took = swapped.elapsed();
        assert!(took < Duration::from_secs(1), "swap applied after {took:?}");
        assert_eq!(view.nodes["a"].prefixes, nets(&["10.1.7.0/24"]));

        let conf = scratch("configmap-bgp");
        configmap_volume(
            &conf,
            "2026_v1",
            &[(
                "bgp-config.yaml",
                "peers: []
",
            )],
        );
        let (tx, rx) = channel(8);
        let mut source = Source::new(
            rx,
            tokio::spawn(file::watch_text_file(
                conf.join("bgp-config.yaml"),
                DEFAULT_POLL,
                tx,
            )),
        );
        assert_eq!(
            source.update().await,
            SourceUpdate::BgpConfigText(Some("peers: []\n".into()))
        );
        let swapped = Instant::now();
        configmap_volume(&conf, "2026_v2", &[("bgp-config.yaml", "peers: [a]\n")]);
        assert_eq!(
            source.update().await,
            SourceUpdate::BgpConfigText(Some("peers: [a]\n".into()))
        );
        let took = swapped.elapsed();
        assert!(took < Duration::from_secs(1), "swap applied after {took:?}");
    })
    .await;
}

/// A path whose directory is not there at the start cannot be watched: it is polled,
/// so its later arrival is loaded (and then followed as usual).
#[tokio::test]
async fn a_path_not_there_yet_is_polled_until_it_is() {
    bounded(async {
        let dir = scratch("later").join("not-yet");
        let path = dir.join("cluster.yaml");
        let mut s = start(path.clone());
        s.status(Resource::ClusterStateFile, |st| !st.up && st.errors > 0)
            .await;
        std::fs::create_dir_all(&dir).unwrap();
        write_atomic(
            &path,
            &format!("{KUBE_CONFIG}{}", node_doc("a", "10.1.0.0/24")),
        );
        assert_eq!(s.view().await.nodes["a"].prefixes, nets(&["10.1.0.0/24"]));
        let written = Instant::now();
        write_atomic(
            &path,
            &format!("{KUBE_CONFIG}{}", node_doc("a", "10.1.5.0/24")),
        );
        assert_eq!(s.view().await.nodes["a"].prefixes, nets(&["10.1.5.0/24"]));
        let took = written.elapsed();
        assert!(took < Duration::from_secs(1), "edit applied after {took:?}");
    })
    .await;
}

/// The hand-written sample for `plan` loads: dual-stack, kubernetes IPAM.
#[test]
fn single_node_sample_loads() {
    let state = file::load(&samples().join("single-node.yaml")).unwrap();
    let view = node_view(&state, IpamOverride::Auto).unwrap();
    assert_eq!(view.ipam, IpamMode::Kubernetes);
    let a = &view.nodes["node-a"];
    assert_eq!(a.prefixes, nets(&["10.244.3.0/24", "fd00:10:244:3::/64"]));
    assert_eq!(
        a.internal_ipv6,
        Some("fd00:192:168:20::31".parse().unwrap())
    );
}

/// `--secrets-dir`: `DIR/NAME/KEY` as a Secret volume mounts it (keys as symlinks into
/// `..data`, swapped at once on a rotation); only the named directories are read; a
/// rotation, a key removed, a Secret deleted; a name added later.
#[tokio::test]
async fn secrets_dir_follows_the_named_secrets() {
    use podcidr_speaker::sources::secrets::SecretError;
    bounded(async {
        let dir = scratch("secrets-dir");
        // tor-md5 laid out like a kubelet Secret volume.
        let vol = dir.join("tor-md5");
        std::fs::create_dir_all(vol.join("..2026_v1")).unwrap();
        std::fs::write(vol.join("..2026_v1/tor-a"), "old-key\n").unwrap();
        std::fs::write(vol.join("..2026_v1/tor-b"), "b-key").unwrap();
        std::os::unix::fs::symlink("..2026_v1", vol.join("..data")).unwrap();
        for k in ["tor-a", "tor-b"] {
            std::os::unix::fs::symlink(format!("..data/{k}"), vol.join(k)).unwrap();
        }
        // A Secret the config does not name: never read.
        std::fs::create_dir_all(dir.join("unnamed")).unwrap();
        std::fs::write(dir.join("unnamed/k"), "x").unwrap();

        let (tx, rx) = channel(16);
        let (names, names_rx) =
            tokio::sync::watch::channel(std::collections::BTreeSet::from(["tor-md5".to_owned()]));
        let mut source = Source::new(
            rx,
            tokio::spawn(file::secrets::run(
                dir.clone(),
                names_rx,
                Duration::from_millis(50),
                tx,
            )),
        );
        let v = source.secrets().await;
        assert_eq!(secret_key(&v, "tor-md5", "tor-a"), Ok("old-key".into()));
        assert_eq!(secret_key(&v, "tor-md5", "tor-b"), Ok("b-key".into()));
        assert_eq!(v.secrets.keys().collect::<Vec<_>>(), ["tor-md5"]);
        assert!(
            secret_key(&v, "tor-md5", "..data").is_err(),
            "dot entries are not keys"
        );

        // The kubelet's rotation: a new timestamped dir, then ..data swapped by rename.
        std::fs::create_dir_all(vol.join("..2026_v2")).unwrap();
        std::fs::write(vol.join("..2026_v2/tor-a"), "new-key").unwrap();
        std::fs::write(vol.join("..2026_v2/tor-b"), "b-key").unwrap();
        std::os::unix::fs::symlink("..2026_v2", vol.join("..data_tmp")).unwrap();
        std::fs::rename(vol.join("..data_tmp"), vol.join("..data")).unwrap();
        let v = source.secrets().await;
        assert_eq!(secret_key(&v, "tor-md5", "tor-a"), Ok("new-key".into()));
        assert_eq!(secret_key(&v, "tor-md5", "tor-b"), Ok("b-key".into()));

        // A name added: read at once; its directory does not exist.
        names.send_replace(["tor-md5", "later"].map(String::from).into_iter().collect());
        let v = source.secrets().await;
        assert!(matches!(
            secret_key(&v, "later", "k"),
            Err(SecretError::SecretMissing { .. })
        ));
        assert_eq!(
            secret_key(&v, "later", "k").unwrap_err().to_string(),
            format!(
                "password-secret: secret later not found in --secrets-dir {}",
                dir.display()
            )
        );
        std::fs::create_dir_all(dir.join("later")).unwrap();
        std::fs::write(dir.join("later/k"), "later-key\n").unwrap();
        let v = source.secrets().await;
        assert_eq!(secret_key(&v, "later", "k"), Ok("later-key".into()));
        assert_eq!(secret_key(&v, "tor-md5", "tor-a"), Ok("new-key".into()));

        // tor-md5 deleted: missing, the other unaffected.
        std::fs::remove_dir_all(&vol).unwrap();
        let v = source.secrets().await;
        assert!(matches!(
            secret_key(&v, "tor-md5", "tor-a"),
            Err(SecretError::SecretMissing { .. })
        ));
        assert_eq!(secret_key(&v, "later", "k"), Ok("later-key".into()));
        let status = source.status_now(Resource::SecretsDir);
        assert!(status.up && status.synced, "{status:?}");
        assert!(source.close().await.is_err());
    })
    .await;
}

/// The multi-pool sample: every allocated CIDR of each CiliumNode, grouped by pool,
/// checked against the CiliumPodIPPools of the same files.
#[test]
fn multi_pool_sample_announces_allocations_checked_against_pools() {
    let state = file::load(&samples().join("multi-pool.yaml")).unwrap();
    let pools = state.pod_ip_pools.as_ref().expect("pools read");
    assert_eq!(pools.keys().collect::<Vec<_>>(), ["blue", "default"]);
    let view = node_view(&state, IpamOverride::Auto).unwrap();
    assert_eq!(view.ipam, IpamMode::MultiPool);
    assert_eq!(
        prefixes(&view),
        [
            (
                "worker-a".to_owned(),
                nets(&[
                    "10.10.0.0/27",
                    "10.10.0.32/27",
                    "fd00:10::/120",
                    "10.20.0.0/27"
                ])
            ),
            ("worker-b".to_owned(), nets(&["10.10.0.64/27"])),
        ]
    );
    let a = &view.nodes["worker-a"];
    let held: Vec<&str> = a.pools.iter().map(|p| p.pool.as_str()).collect();
    assert_eq!(held, ["default", "blue"]);
    assert_eq!(
        view.nodes["worker-b"]
            .refused
            .iter()
            .map(|(p, r)| (p.to_string(), r.to_string()))
            .collect::<Vec<_>>(),
        [(
            "10.30.0.0/27".to_owned(),
            "outside its pool \"default\" [10.10.0.0/16]".to_owned()
        )]
    );
    assert_eq!(view.drift_count(), 0);
    assert!(view.warnings.is_empty(), "{:?}", view.warnings);
}

/// The file source follows the operator: an allocation added, then one released, each
/// reload sends a view with exactly the node's CIDRs; pools in another file of the
/// directory are read, and without them the CIDRs are announced unchecked.
#[tokio::test]
async fn multi_pool_allocations_follow_the_file_and_pools_may_be_elsewhere() {
    bounded(async {
        let dir = scratch("multi-pool");
        let node = |cidrs: &str| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cilium-config}}\n\
                 data: {{ipam: multi-pool}}\n{}---\napiVersion: cilium.io/v2\nkind: CiliumNode\n\
                 metadata: {{name: a}}\nspec:\n  ipam:\n    pools:\n      allocated:\n      \
                 - pool: default\n        cidrs: [{cidrs}]\n",
                node_doc("a", "10.244.0.0/24")
            )
        };
        write_atomic(&dir.join("cluster.yaml"), &node("10.10.0.0/27"));
        let mut s = start(dir.clone());
        let view = s.view().await;
        assert_eq!(view.nodes["a"].prefixes, nets(&["10.10.0.0/27"]));
        assert_eq!(
            view.warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["CiliumPodIPPools cannot be read: multi-pool CIDRs are not checked against their pools"]
        );

        write_atomic(
            &dir.join("pools.yaml"),
            "apiVersion: cilium.io/v2alpha1\nkind: CiliumPodIPPool\nmetadata: {name: default}\n\
             spec: {ipv4: {cidrs: [10.10.0.0/16], maskSize: 27}}\n",
        );
        let view = s.view().await;
        assert!(view.warnings.is_empty(), "{:?}", view.warnings);

        write_atomic(&dir.join("cluster.yaml"), &node("10.10.0.0/27, 10.10.0.32/27"));
        let view = s.view().await;
        assert_eq!(
            view.nodes["a"].prefixes,
            nets(&["10.10.0.0/27", "10.10.0.32/27"])
        );
        write_atomic(&dir.join("cluster.yaml"), &node("10.10.0.32/27"));
        let view = s.view().await;
        assert_eq!(view.nodes["a"].prefixes, nets(&["10.10.0.32/27"]));
    })
    .await;
}

fn key(namespace: &str, name: &str) -> ObjectKey {
    ObjectKey::new(namespace, name)
}

fn by_node(slice: &SliceFacts) -> Vec<(String, u32)> {
    slice
        .ready_by_node
        .iter()
        .map(|(n, c)| (n.to_string(), *c))
        .collect()
}

/// The sample `kubectl get nodes,services,endpointslices -A -o yaml`: every Service's
/// facts (types, classes, policies, dual-stack IPs, a hostname-only ingress) and every
/// slice's ready endpoints per node, read through the same entry `plan` uses.
#[test]
fn load_balancer_sample_gives_every_services_and_slices_facts() {
    let files = file::load_files(&samples().join("load-balancers.yaml")).unwrap();
    assert_eq!(files.state.nodes.len(), 3);
    assert_eq!(
        files.state.cilium_config.as_ref().unwrap().announce_lb_ip,
        Some(false)
    );
    let lb = &files.lb;
    assert_eq!(
        lb.services
            .keys()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "default/kubernetes",
            "shop/api",
            "shop/legacy",
            "shop/other-class",
            "shop/pending",
            "shop/web"
        ]
    );
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    assert_eq!(
        lb.services[&key("shop", "web")],
        ServiceFacts {
            load_balancer: true,
            class: None,
            policy: TrafficPolicy::Local,
            ingress_ips: vec![ip("198.51.100.10")],
            ingress_refused: vec![],
        }
    );
    assert_eq!(
        lb.services[&key("shop", "api")].ingress_ips,
        [ip("198.51.100.11"), ip("2001:db8:100::11")]
    );
    assert_eq!(
        lb.services[&key("shop", "legacy")].ingress_refused,
        ["legacy.lb.example.net"]
    );
    assert_eq!(
        lb.services[&key("shop", "other-class")].class.as_deref(),
        Some("example.com/other-lb")
    );
    let pending = &lb.services[&key("shop", "pending")];
    assert!(pending.load_balancer && pending.ingress_ips.is_empty());
    assert!(!lb.services[&key("default", "kubernetes")].load_balancer);

    let web = &lb.slices[&key("shop", "web-8kq2x")];
    assert_eq!(web.service, Some(key("shop", "web")));
    // n3's endpoint is terminating: not ready.
    assert_eq!(by_node(web), [("n1".into(), 1), ("n2".into(), 1)]);
    for name in ["api-4hd8s", "api-x2v9q"] {
        let slice = &lb.slices[&key("shop", name)];
        assert_eq!(slice.service, Some(key("shop", "api")), "{name}");
        assert_eq!(by_node(slice), [("n2".into(), 1)], "{name}");
    }
    // The node facts are those `load` gives.
    assert_eq!(
        files.state,
        file::load(&samples().join("load-balancers.yaml")).unwrap()
    );
}

fn service_doc(namespace: &str, name: &str, ips: &[&str], annotation: &str) -> String {
    let ingress: String = ips.iter().map(|ip| format!("\n      - ip: {ip}")).collect();
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  annotations: {{note: {annotation}}}\nspec:\n  type: LoadBalancer\n  externalTrafficPolicy: Local\nstatus:\n  loadBalancer:\n    ingress:{ingress}\n"
    )
}

fn slice_doc(namespace: &str, name: &str, service: &str, nodes: &[&str]) -> String {
    let endpoints: String = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            format!("\n- addresses: [10.244.0.{i}]\n  nodeName: {n}\n  conditions: {{ready: true}}")
        })
        .collect();
    format!(
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  labels: {{kubernetes.io/service-name: {service}}}\naddressType: IPv4\nendpoints:{endpoints}\n"
    )
}

impl Source {
    /// The LoadBalancer updates that arrive until nothing more comes for a while,
    /// skipping cluster snapshots.
    async fn lb_updates(&mut self) -> Vec<LbUpdate> {
        let mut out = Vec::new();
        // Up to two polls plus the load: then the updates of one load are all queued.
        let quiet = DEFAULT_POLL * 4;
        loop {
            match tokio::time::timeout(quiet, self.rx.updates.recv()).await {
                Ok(Some(SourceUpdate::Lb(update))) => out.push(update),
                Ok(Some(SourceUpdate::Cluster(_))) => {}
                Ok(other) => panic!("unexpected {other:?}"),
                Err(_) if out.is_empty() => {}
                Err(_) => return out,
            }
        }
    }
}

fn summary(updates: &[LbUpdate]) -> Vec<String> {
    updates
        .iter()
        .map(|u| match u {
            LbUpdate::Service {
                key,
                facts: Some(f),
            } => format!("service {key} {:?}", f.ingress_ips),
            LbUpdate::Service { key, facts: None } => format!("service {key} deleted"),
            LbUpdate::Slice {
                key,
                facts: Some(f),
            } => format!("slice {key} {:?}", by_node(f)),
            LbUpdate::Slice { key, facts: None } => format!("slice {key} deleted"),
            LbUpdate::Synced => "synced".into(),
        })
        .collect()
}

/// On start every Service and EndpointSlice once, then `Synced`; then, per edit,
/// exactly the objects whose facts changed: an annotation-only edit sends nothing, a
/// removed file deletes its objects, a broken file sends nothing and its fix sends only
/// the differences against what was sent before it broke.
#[tokio::test]
async fn lb_facts_are_sent_once_then_exactly_the_differences() {
    bounded(async {
        let dir = scratch("lb-deltas");
        std::fs::write(dir.join("nodes.yaml"), node_doc("n1", "10.1.0.0/24")).unwrap();
        let services = |a_ips: &[&str], note: &str| {
            service_doc("shop", "a", a_ips, note) + &service_doc("shop", "b", &["192.0.2.2"], "x")
        };
        write_atomic(&dir.join("services.yaml"), &services(&["192.0.2.1"], "one"));
        write_atomic(
            &dir.join("slices.yaml"),
            &(slice_doc("shop", "a-1", "a", &["n1", "n2"])
                + &slice_doc("shop", "b-1", "b", &["n2"])),
        );
        let mut source = start_with(dir.clone(), true);
        let first = source.lb_updates().await;
        assert_eq!(
            summary(&first),
            [
                "service shop/a [192.0.2.1]",
                "service shop/b [192.0.2.2]",
                "slice shop/a-1 [(\"n1\", 1), (\"n2\", 1)]",
                "slice shop/b-1 [(\"n2\", 1)]",
                "synced"
            ]
        );
        let mut seen = LbFacts::default();
        for update in &first {
            seen.apply(update);
        }
        assert_eq!(seen, file::load_files(&dir).unwrap().lb);

        // An annotation-only edit: nothing.
        write_atomic(&dir.join("services.yaml"), &services(&["192.0.2.1"], "two"));
        source
            .status(Resource::ClusterStateFile, |s| s.relists >= 2)
            .await;
        tokio::time::sleep(DEFAULT_POLL * 3).await;
        source.no_update();

        // a's IP changes, a-1 loses n2, c is new.
        write_atomic(
            &dir.join("services.yaml"),
            &(services(&["192.0.2.9", "2001:db8::9"], "two")
                + &service_doc("other", "c", &["192.0.2.3"], "x")),
        );
        write_atomic(
            &dir.join("slices.yaml"),
            &(slice_doc("shop", "a-1", "a", &["n1"]) + &slice_doc("shop", "b-1", "b", &["n2"])),
        );
        let updates = source.lb_updates().await;
        for update in &updates {
            seen.apply(update);
        }
        assert_eq!(seen, file::load_files(&dir).unwrap().lb);
        // The two files may be loaded together or one after the other.
        let mut got = summary(&updates);
        got.sort();
        assert_eq!(
            got,
            [
                "service other/c [192.0.2.3]",
                "service shop/a [192.0.2.9, 2001:db8::9]",
                "slice shop/a-1 [(\"n1\", 1)]",
            ]
        );

        // A broken file: nothing, the last good facts stay.
        write_atomic(
            &dir.join("slices.yaml"),
            "kind: EndpointSlice\nmetadata: {name: [\n",
        );
        source.status(Resource::ClusterStateFile, |s| !s.up).await;
        tokio::time::sleep(DEFAULT_POLL * 3).await;
        source.no_update();

        // Fixed without b-1, and the services file removed: exactly those deletions.
        std::fs::remove_file(dir.join("services.yaml")).unwrap();
        write_atomic(
            &dir.join("slices.yaml"),
            &slice_doc("shop", "a-1", "a", &["n1"]),
        );
        let updates = source.lb_updates().await;
        assert_eq!(
            summary(&updates),
            [
                "service other/c deleted",
                "service shop/a deleted",
                "service shop/b deleted",
                "slice shop/b-1 deleted",
            ]
        );
        for update in &updates {
            seen.apply(update);
        }
        assert_eq!(seen, file::load_files(&dir).unwrap().lb);
        assert!(!updates.contains(&LbUpdate::Synced), "synced is sent once");
    })
    .await;
}

/// Without `load_balancers` the source sends no LoadBalancer update at all.
#[tokio::test]
async fn lb_facts_are_not_sent_when_not_asked_for() {
    bounded(async {
        let dir = scratch("lb-off");
        std::fs::write(dir.join("nodes.yaml"), node_doc("n1", "10.1.0.0/24")).unwrap();
        write_atomic(
            &dir.join("s.yaml"),
            &service_doc("shop", "a", &["192.0.2.1"], "x"),
        );
        let mut source = start(dir);
        source.cluster().await;
        source
            .status(Resource::ClusterStateFile, |s| s.synced)
            .await;
        tokio::time::sleep(DEFAULT_POLL * 3).await;
        source.no_update();
    })
    .await;
}

/// A Service defined twice, an EndpointSlice of the removed v1beta1 API, and a Service
/// whose policy is not one Kubernetes knows each fail the load, naming what is wrong.
#[test]
fn bad_services_and_slices_fail_the_load_with_a_clear_error() {
    let dir = scratch("lb-bad");
    let load = |files: &[(&str, String)]| {
        for entry in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        file::load_files(&dir).unwrap_err().to_string()
    };
    let svc = service_doc("shop", "a", &["192.0.2.1"], "x");
    let err = load(&[("one.yaml", svc.clone()), ("two.yaml", svc)]);
    assert!(err.starts_with("Service shop/a is defined twice"), "{err}");
    let err = load(&[(
        "s.yaml",
        slice_doc("shop", "a-1", "a", &["n1"])
            .replace("discovery.k8s.io/v1", "discovery.k8s.io/v1beta1"),
    )]);
    assert!(
        err.contains("apiVersion \"discovery.k8s.io/v1beta1\" is not read"),
        "{err}"
    );
    let err = load(&[(
        "s.yaml",
        service_doc("shop", "a", &[], "x").replace("Local", "Everywhere"),
    )]);
    assert!(
        err.ends_with(
            "Service shop/a: spec.externalTrafficPolicy: \"Everywhere\" is not Cluster or Local"
        ),
        "{err}"
    );
}

/// The follower's reload reads only the files whose metadata changed: a Service edit
/// re-reads that file alone and does not rebuild the node state; a node edit re-reads
/// the files holding node-side objects only; objects moving between files are not
/// deletions; a second definition in another file, changed or not, fails the reload
/// and names both files; and after every reload the facts sent so far are exactly
/// what a one-shot load of the directory reads.
#[test]
fn reload_reads_only_what_changed_and_sends_exactly_the_differences() {
    use podcidr_speaker::sources::file::reload::Loader;
    let dir = scratch("lb-reload");
    let mut loader = Loader::new(true);
    let mut seen = LbFacts::default();
    let mut state = None;
    let mut step = |loader: &mut Loader, read: usize, node_state: bool| -> Vec<String> {
        let reload = loader.reload(&dir).unwrap();
        assert_eq!(reload.read, read, "files read");
        assert_eq!(reload.state.is_some(), node_state, "node state rebuilt");
        if let Some(new) = reload.state {
            state = Some(new);
        }
        assert_eq!(state.as_ref(), Some(&file::load(&dir).unwrap()));
        for update in &reload.lb {
            assert!(seen.apply(update), "{update:?} changes nothing");
        }
        assert_eq!(seen, file::load_files(&dir).unwrap().lb);
        summary(&reload.lb)
    };
    let nodes = node_doc("n1", "10.1.0.0/24") + KUBE_CONFIG;
    write_atomic(&dir.join("nodes.yaml"), &nodes);
    let a = |ip: &str| {
        service_doc("shop", "a1", &[ip], "x")
            + &service_doc("shop", "a2", &["192.0.2.2"], "x")
            + &slice_doc("shop", "a1-1", "a1", &["n1"])
    };
    write_atomic(&dir.join("a.yaml"), &a("192.0.2.1"));
    let b = service_doc("shop", "b1", &["192.0.2.3"], "x");
    write_atomic(&dir.join("b.yaml"), &b);
    assert_eq!(step(&mut loader, 3, true).len(), 4);
    assert!(step(&mut loader, 0, false).is_empty(), "nothing changed");

    // One Service's IP: that file only, that Service only.
    write_atomic(&dir.join("a.yaml"), &a("192.0.2.9"));
    assert_eq!(step(&mut loader, 1, false), ["service shop/a1 [192.0.2.9]"]);
    // b1 moves into a.yaml: both files read, nothing sent.
    write_atomic(&dir.join("a.yaml"), &(a("192.0.2.9") + &b));
    std::fs::remove_file(dir.join("b.yaml")).unwrap();
    assert!(
        step(&mut loader, 1, false).is_empty(),
        "a move is no change"
    );

    // A second definition in an unchanged file and in a changed one: refused, naming
    // both files, and nothing of the reload is kept.
    write_atomic(
        &dir.join("c.yaml"),
        &service_doc("shop", "a2", &["192.0.2.7"], "x"),
    );
    let err = loader.reload(&dir).unwrap_err().to_string();
    let (a_path, c_path) = (dir.join("a.yaml"), dir.join("c.yaml"));
    assert_eq!(
        err,
        format!(
            "Service shop/a2 is defined twice: in {} and in {}",
            a_path.display(),
            c_path.display()
        )
    );
    write_atomic(&dir.join("d.yaml"), &b);
    let err = loader.reload(&dir).unwrap_err().to_string();
    assert!(err.starts_with("Service shop/"), "{err}");
    // Fixed: a2 moves to c.yaml with a new IP, d.yaml goes; exactly a2's change.
    std::fs::remove_file(dir.join("d.yaml")).unwrap();
    write_atomic(
        &dir.join("a.yaml"),
        &(service_doc("shop", "a1", &["192.0.2.9"], "x")
            + &slice_doc("shop", "a1-1", "a1", &["n1"])
            + &b),
    );
    assert_eq!(step(&mut loader, 2, false), ["service shop/a2 [192.0.2.7]"]);

    // A node edit: the node file alone; the Service files are not read.
    write_atomic(
        &dir.join("nodes.yaml"),
        &(node_doc("n1", "10.1.0.0/24") + &node_doc("n2", "10.2.0.0/24") + KUBE_CONFIG),
    );
    assert!(step(&mut loader, 1, true).is_empty());
    // A file with both: a Service edit in it rebuilds the node state from it and the
    // node file; a Node moving between them is no deletion.
    write_atomic(
        &dir.join("mixed.yaml"),
        &(node_doc("n3", "10.3.0.0/24") + &slice_doc("shop", "a2-1", "a2", &["n3"])),
    );
    assert_eq!(
        step(&mut loader, 2, true),
        ["slice shop/a2-1 [(\"n3\", 1)]"]
    );
    write_atomic(
        &dir.join("mixed.yaml"),
        &(node_doc("n3", "10.3.0.0/24") + &slice_doc("shop", "a2-1", "a2", &["n3", "n1"])),
    );
    assert_eq!(
        step(&mut loader, 2, true),
        ["slice shop/a2-1 [(\"n1\", 1), (\"n3\", 1)]"]
    );
    // An object twice within one re-read file: refused, naming that file twice.
    let twice = dir.join("twice.yaml");
    let slice = slice_doc("shop", "t-1", "t", &["n1"]);
    write_atomic(&twice, &(slice.clone() + &slice));
    let err = loader.reload(&dir).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "EndpointSlice shop/t-1 is defined twice: in {} and in {}",
            twice.display(),
            twice.display()
        )
    );
    std::fs::remove_file(&twice).unwrap();
    // Removing a file deletes exactly its objects.
    std::fs::remove_file(dir.join("c.yaml")).unwrap();
    assert_eq!(step(&mut loader, 0, false), ["service shop/a2 deleted"]);
    std::fs::remove_file(dir.join("mixed.yaml")).unwrap();
    assert_eq!(step(&mut loader, 1, true), ["slice shop/a2-1 deleted"]);
}

/// Random edits over several files (objects added, changed, deleted and moved between
/// files, several files rewritten per step): after each reload the facts sent so far
/// are exactly a one-shot load's, every update changes something, and deletions come
/// after additions.
#[test]
fn reload_deltas_match_a_full_load_under_random_edits() {
    use podcidr_speaker::sources::file::reload::Loader;
    const FILES: usize = 4;
    const OBJECTS: usize = 12;
    let dir = scratch("lb-reload-random");
    for seed in 1..=4u64 {
        for entry in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut next = move |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n as u64) as usize
        };
        // Per object: its file and its version (None: absent). Even objects are
        // Services, odd ones EndpointSlices; object 0 of file 0 is a Node.
        let mut where_: Vec<Option<(usize, usize)>> = vec![None; OBJECTS];
        let mut loader = Loader::new(true);
        let mut seen = LbFacts::default();
        let render = |where_: &[Option<(usize, usize)>], file: usize| -> String {
            let mut text = if file == 0 {
                node_doc("n1", "10.1.0.0/24")
            } else {
                String::new()
            };
            for (i, at) in where_.iter().enumerate() {
                let Some((f, version)) = at else { continue };
                if *f != file {
                    continue;
                }
                text += &if i % 2 == 0 {
                    service_doc(
                        "ns",
                        &format!("o{i}"),
                        &[&format!("192.0.2.{version}")],
                        "x",
                    )
                } else {
                    let nodes = ["n1", "n2", "n3"];
                    slice_doc("ns", &format!("o{i}"), "svc", &nodes[..1 + version % 3])
                };
            }
            text
        };
        let mut on_disk: Vec<Option<String>> = vec![None; FILES];
        for round in 0..60 {
            for _ in 0..1 + next(3) {
                let i = next(OBJECTS);
                where_[i] = match next(4) {
                    0 => None,
                    1 => Some((next(FILES), where_[i].map_or(1, |w| w.1))),
                    _ => Some((where_[i].map_or(next(FILES), |w| w.0), 1 + next(200))),
                };
            }
            for (file, disk) in on_disk.iter_mut().enumerate() {
                let text = render(&where_, file);
                let path = dir.join(format!("f{file}.yaml"));
                if text.is_empty() {
                    if disk.take().is_some() {
                        std::fs::remove_file(&path).unwrap();
                    }
                } else if disk.as_ref() != Some(&text) {
                    write_atomic(&path, &text);
                    *disk = Some(text);
                }
            }
            let reload = loader.reload(&dir).unwrap();
            let mut added = 0;
            for (n, update) in reload.lb.iter().enumerate() {
                assert!(seen.apply(update), "seed {seed} round {round}: {update:?}");
                match update {
                    LbUpdate::Service { facts: None, .. } | LbUpdate::Slice { facts: None, .. } => {
                    }
                    _ => {
                        assert_eq!(added, n, "seed {seed} round {round}: a deletion came first");
                        added += 1;
                    }
                }
            }
            let full = file::load_files(&dir).unwrap();
            assert_eq!(seen, full.lb, "seed {seed} round {round}");
            if let Some(state) = reload.state {
                assert_eq!(state, full.state, "seed {seed} round {round}");
            }
        }
    }
}
