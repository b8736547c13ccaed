//! The speaker under test as a child process, and the standalone inputs it follows: a
//! bgp-config file and a cluster-state directory with one file per node (Node and
//! CiliumNode, as `kubectl get node,ciliumnode NAME -o yaml` prints them), so deleting
//! a node is deleting its file.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::thread;
use std::time::{Duration, Instant};

use ipnet::IpNet;

use crate::harness::process::{write_file, Process};

pub const BINARY: &str = env!("CARGO_BIN_EXE_podcidr-speaker");

/// How long a speaker may take to exit after SIGTERM: its own bound on the goodbye to
/// the peers is 10 s after the graceful shutdown time ([`GRACEFUL_SHUTDOWN`] here).
pub const EXIT_GRACE: Duration = Duration::from_secs(15);

/// The speakers' `--graceful-shutdown-time` (RFC 8326): short, so that a SIGTERM without
/// graceful restart ends within [`EXIT_GRACE`]; the interop tests cover the drain.
pub const GRACEFUL_SHUTDOWN: &str = "2s";

/// `100.64.1.n`: a node's address (InternalIP and the speaker's source address).
pub fn node_ip(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(100, 64, 1, n))
}

/// One node of the cluster-state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub name: String,
    pub ip: IpAddr,
    pub labels: BTreeMap<String, String>,
    /// Node spec.podCIDRs.
    pub node_cidrs: Vec<IpNet>,
    /// CiliumNode spec.ipam.podCIDRs (`None`: no CiliumNode object unless `pools`).
    pub cilium_cidrs: Option<Vec<IpNet>>,
    /// CiliumNode spec.ipam.pools.allocated (multi-pool IPAM): (pool, CIDRs).
    pub pools: Vec<(String, Vec<IpNet>)>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// `spec.taints[].key` (effect NoSchedule).
    pub taints: Vec<String>,
    /// The kubelet's graceful node shutdown under way: Ready False, "node is shutting
    /// down".
    pub shutting_down: bool,
}

impl NodeSpec {
    pub fn new(name: &str, ip: IpAddr) -> Self {
        Self {
            name: name.into(),
            ip,
            labels: BTreeMap::new(),
            node_cidrs: Vec::new(),
            cilium_cidrs: None,
            pools: Vec::new(),
            unschedulable: false,
            taints: Vec::new(),
            shutting_down: false,
        }
    }

    /// Sets the CIDRs allocated to the node from `pool` (none: the pool is released).
    pub fn pool(mut self, pool: &str, cidrs: &[&str]) -> Self {
        self.pools.retain(|(p, _)| p != pool);
        if !cidrs.is_empty() {
            self.pools.push((pool.into(), nets(cidrs)));
        }
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    pub fn node_cidrs(mut self, cidrs: &[&str]) -> Self {
        self.node_cidrs = nets(cidrs);
        self
    }

    pub fn cilium_cidrs(mut self, cidrs: &[&str]) -> Self {
        self.cilium_cidrs = Some(nets(cidrs));
        self
    }

    fn yaml(&self) -> String {
        let mut y = String::from("apiVersion: v1\nkind: List\nitems:\n");
        let _ = writeln!(
            y,
            "- apiVersion: v1\n  kind: Node\n  metadata:\n    name: {}\n    labels:",
            self.name
        );
        let _ = writeln!(y, "      kubernetes.io/hostname: {}", self.name);
        for (k, v) in &self.labels {
            let _ = writeln!(y, "      {k}: {v:?}");
        }
        y.push_str("  spec:\n    podCIDRs:\n");
        for c in &self.node_cidrs {
            let _ = writeln!(y, "    - {c}");
        }
        if self.unschedulable {
            y.push_str("    unschedulable: true\n");
        }
        if !self.taints.is_empty() {
            y.push_str("    taints:\n");
            for t in &self.taints {
                let _ = writeln!(y, "    - key: {t}\n      effect: NoSchedule");
            }
        }
        let _ = writeln!(
            y,
            "  status:\n    addresses:\n    - type: InternalIP\n      address: {}",
            self.ip
        );
        if self.shutting_down {
            // As the kubelet writes it once its graceful node shutdown starts.
            y.push_str(
                "    conditions:\n    - type: Ready\n      status: \"False\"\n      reason: KubeletNotReady\n      message: node is shutting down\n",
            );
        }
        if self.cilium_cidrs.is_some() || !self.pools.is_empty() {
            let _ = writeln!(
                y,
                "- apiVersion: cilium.io/v2\n  kind: CiliumNode\n  metadata:\n    name: {}\n  spec:\n    ipam:",
                self.name
            );
        }
        if let Some(cidrs) = &self.cilium_cidrs {
            y.push_str("      podCIDRs:\n");
            for c in cidrs {
                let _ = writeln!(y, "      - {c}");
            }
        }
        if !self.pools.is_empty() {
            y.push_str("      pools:\n        allocated:\n");
            for (pool, cidrs) in &self.pools {
                let _ = writeln!(y, "        - pool: {pool}\n          cidrs:");
                for c in cidrs {
                    let _ = writeln!(y, "          - {c}");
                }
            }
        }
        y
    }
}

pub fn nets(cidrs: &[&str]) -> Vec<IpNet> {
    cidrs
        .iter()
        .map(|c| c.parse().unwrap_or_else(|e| panic!("{c}: {e}")))
        .collect()
}

pub fn net(cidr: &str) -> IpNet {
    cidr.parse().unwrap_or_else(|e| panic!("{cidr}: {e}"))
}

/// The standalone inputs: `bgp-config.yaml` and `cluster/` (cilium-config.yaml plus one
/// `<node>.yaml` per node). Writes replace whole files, as `kubectl get -o yaml >` does.
pub struct Inputs {
    dir: PathBuf,
}

impl Inputs {
    pub fn new(dir: &Path, ipam: &str, cluster_pool: &str) -> Self {
        let cluster = dir.join("cluster");
        std::fs::create_dir_all(&cluster).expect("create the cluster-state dir");
        write_file(
            &cluster.join("cilium-config.yaml"),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cilium-config\n  namespace: kube-system\ndata:\n  ipam: {ipam}\n  cluster-pool-ipv4-cidr: {cluster_pool}\n"
            ),
        )
        .expect("write cilium-config");
        Self {
            dir: dir.to_path_buf(),
        }
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.join("bgp-config.yaml")
    }

    pub fn cluster_path(&self) -> PathBuf {
        self.dir.join("cluster")
    }

    pub fn write_config(&self, yaml: &str) {
        write_file(&self.config_path(), yaml).expect("write bgp-config");
    }

    pub fn write_node(&self, node: &NodeSpec) {
        // Write then rename: the source must never read a half-written file, and a
        // rename is what `kubectl ... > tmp && mv` does.
        let tmp = self.dir.join(format!(".{}.yaml.tmp", node.name));
        write_file(&tmp, &node.yaml()).expect("write node");
        std::fs::rename(
            &tmp,
            self.cluster_path().join(format!("{}.yaml", node.name)),
        )
        .expect("rename node file");
    }

    /// Writes the CiliumPodIPPools (name, IPv4 ranges) of a multi-pool cluster.
    pub fn write_pools(&self, pools: &[(&str, &[&str])]) {
        let mut y = String::from("apiVersion: v1\nkind: List\nitems:\n");
        for (name, cidrs) in pools {
            let _ = writeln!(
                y,
                "- apiVersion: cilium.io/v2alpha1\n  kind: CiliumPodIPPool\n  metadata:\n    name: {name}\n  spec:\n    ipv4:\n      maskSize: 27\n      cidrs:"
            );
            for c in *cidrs {
                let _ = writeln!(y, "      - {c}");
            }
        }
        write_file(&self.cluster_path().join("pools.yaml"), &y).expect("write pools");
    }

    /// Writes (write, then rename) `file` of the cluster-state directory: a List of any
    /// kinds, as `kubectl get svc,endpointslice -o yaml > file` leaves it.
    pub fn write_cluster_file(&self, file: &str, yaml: &str) {
        let tmp = self.dir.join(format!(".{file}.tmp"));
        write_file(&tmp, yaml).expect("write cluster-state file");
        std::fs::rename(&tmp, self.cluster_path().join(file)).expect("rename cluster-state file");
    }

    pub fn delete_cluster_file(&self, file: &str) {
        std::fs::remove_file(self.cluster_path().join(file))
            .unwrap_or_else(|e| panic!("delete {file}: {e}"));
    }

    pub fn delete_node(&self, name: &str) {
        std::fs::remove_file(self.cluster_path().join(format!("{name}.yaml")))
            .unwrap_or_else(|e| panic!("delete node {name}: {e}"));
    }
}

/// A running `podcidr-speaker run` with its log in `dir/speaker-<name>.log`.
pub struct Speaker {
    pub name: String,
    process: Process,
}

impl Speaker {
    /// Starts `podcidr-speaker run ARGS` (RUST_LOG=info unless the test runs with one).
    pub fn start(dir: &Path, name: &str, args: &[String]) -> Self {
        let mut cmd = Command::new(BINARY);
        cmd.arg("run").args(args);
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        let log = dir.join(format!("speaker-{name}.log"));
        let process = Process::spawn(&format!("speaker-{name}"), cmd, &log)
            .unwrap_or_else(|e| panic!("start speaker {name}: {e}"));
        Self {
            name: name.into(),
            process,
        }
    }

    /// The standalone arguments for a speaker of node `node` sourcing from `source`.
    pub fn standalone_args(inputs: &Inputs, node: &str, source: IpAddr) -> Vec<String> {
        vec![
            format!("--node={node}"),
            format!("--graceful-shutdown-time={GRACEFUL_SHUTDOWN}"),
            format!("--bgp-config={}", inputs.config_path().display()),
            format!("--cluster-state={}", inputs.cluster_path().display()),
            format!("--source-address={source}"),
            format!("--metrics-addr={source}:9477"),
        ]
    }

    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// SIGKILL (a node that dies without a stop), and the exit status.
    pub fn kill(&mut self) -> ExitStatus {
        self.process
            .kill()
            .unwrap_or_else(|e| panic!("kill speaker {}: {e}", self.name))
    }

    /// SIGTERM without waiting: what happens meanwhile can be watched; [`terminate`]
    /// then waits for the exit.
    pub fn send_sigterm(&mut self) {
        if self.process.is_running() {
            // SAFETY: as in `terminate`.
            unsafe {
                libc::kill(self.process.pid() as libc::pid_t, libc::SIGTERM);
            }
        }
    }

    /// SIGTERM, then waits up to [`EXIT_GRACE`] for the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        if self.process.is_running() {
            // SAFETY: kill(2) has no memory-safety preconditions; the child is not
            // reaped (is_running() just said so), so the pid is still ours.
            unsafe {
                libc::kill(self.process.pid() as libc::pid_t, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + EXIT_GRACE;
        while self.process.is_running() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !self.process.is_running(),
            "speaker {} still running {EXIT_GRACE:?} after SIGTERM:\n{}",
            self.name,
            self.log_tail(30)
        );
        self.process
            .stop()
            .unwrap_or_else(|e| panic!("reap speaker {}: {e}", self.name))
    }
}
