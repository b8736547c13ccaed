//! The command line: clap structs for each subcommand, and each one's request for the
//! library (`commands::*` for the one-shot commands, [`Settings`] for `run`). Parsing
//! only; `main.rs` dispatches and the library does the work.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

use crate::allocate::lease::{BadTimings, LeaseRef, Timings};
use crate::allocate::run::{ConfigInput, Settings as AllocateSettings};
use crate::commands::check::CheckRequest;
use crate::commands::doctor::DoctorRequest;
use crate::commands::plan::{Format, PlanRequest};
use crate::commands::status::StatusRequest;
use crate::daemon::{ClusterSource, ConfigSource, SecretsSource, Settings};
use crate::decode;
use crate::routes::cilium::ConflictPolicy;
use crate::routes::lb::LbSwitch;
use crate::routes::stop::StopPolicy;
use crate::routes::AnnounceMode;
use crate::sources::kube::BgpConfigMapRef;
use crate::sources::IpamOverride;

/// `CARGO_PKG_VERSION`, plus the commit when the build set `GIT_SHA`.
static VERSION: LazyLock<String> = LazyLock::new(|| match option_env!("GIT_SHA") {
    Some(sha) if !sha.is_empty() => format!("{} ({sha})", env!("CARGO_PKG_VERSION")),
    _ => env!("CARGO_PKG_VERSION").to_string(),
});

#[derive(Debug, Parser)]
#[command(name = "podcidr-speaker", version = VERSION.as_str(), about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the speaker: follow the cluster and the bgp-config, keep one BGP session per
    /// selected peer and announce this node's pod CIDRs (or every node's, with
    /// `--announce cluster`). In-cluster (or with KUBECONFIG) unless `--bgp-config` and
    /// `--cluster-state` are given.
    #[command(after_help = "Examples:
  # the DaemonSet (in-cluster; NODE_NAME from the downward API)
  podcidr-speaker run --node \"$NODE_NAME\" --source-address \"$HOST_IP\"
  # standalone, from files (reloaded on change)
  podcidr-speaker run --node worker1 --bgp-config config/demo/bgp-config.yaml \\
      --cluster-state config/demo/cluster-state --source-address 100.64.1.1
  # check everything and print the effective settings, connect nowhere
  podcidr-speaker run --node worker1 --bgp-config config/demo/bgp-config.yaml \\
      --cluster-state config/demo/cluster-state --dry-run")]
    Run(Box<RunArgs>),
    /// Validate bgp-config files (the raw config.yaml or a whole ConfigMap manifest):
    /// print "ok" and one line per peer, or every error; exit 1 if any file is invalid.
    #[command(after_help = "Examples:
  podcidr-speaker check config/cilium-bgp-config.yaml
  kubectl -n kube-system get configmap bgp-config -o yaml | podcidr-speaker check -")]
    Check(CheckArgs),
    /// Decode BGP messages from a hex string, an MRT file, a packet capture or stdin,
    /// printing one JSON object per message (like bgpdump).
    ///
    /// Exit status: 0 when every message decoded cleanly, 1 when at least one was
    /// malformed or the input was damaged (each such problem is printed as an object
    /// with an "error" field), 2 on a usage error or when the input cannot be read.
    #[command(after_help = "Examples:
  podcidr-speaker decode --hex ffffffffffffffffffffffffffffffff001304
  podcidr-speaker decode --mrt updates.20190101.0000.gz
  podcidr-speaker decode --pcap bgp.pcap | jq -c 'select(.type == \"NOTIFICATION\")'")]
    Decode(DecodeArgs),
    /// Show, offline, which peers a node would open and the exact routes with
    /// attributes for each, from a bgp-config file and a cluster-state file or
    /// directory; drift, refused prefixes and conflicts are shown as warnings. With
    /// address-pools and Services, also what `podcidr-speaker allocate` would give each
    /// Service, or why it would be pending. Passwords are never printed.
    #[command(after_help = "Examples:
  podcidr-speaker plan --bgp-config config/demo/bgp-config.yaml \\
      --cluster-state config/demo/cluster-state --node worker3
  podcidr-speaker plan --bgp-config config/cilium-bgp-config.yaml \\
      --cluster-state config/cluster-state/outage --node master1 --announce cluster -o json")]
    Plan(PlanArgs),
    /// Show a running speaker's sessions like `show bgp summary`, with its node, IPAM
    /// mode, sources and drift warnings (its /status endpoint); with --routes, what each
    /// peer holds from it and what is pending, like `show bgp neighbor X
    /// advertised-routes`. Exit 0 when a config is in force and every peer is
    /// Established, 1 otherwise, 2 when it cannot be reached.
    #[command(after_help = "Examples:
  podcidr-speaker status --addr 10.5.0.11:9477
  podcidr-speaker status --addr 127.0.0.1:9477 --json
  podcidr-speaker status --routes --limit 20")]
    Status(StatusArgs),
    /// Diagnose the cluster's pod CIDRs: per node the Node and CiliumNode CIDRs, which is
    /// in force for the IPAM mode, drift, overlaps between nodes and CIDRs outside the
    /// cluster pool. In a cluster, also the set-up for the speaker: the bgp-config, and
    /// with address-pools why each pending LoadBalancer Service is pending, addresses
    /// the bgp-config leaves outside every pool, whether an allocator of ours runs.
    /// Exit 0 when nothing is wrong, 1 when something is, 2 when the cluster cannot be
    /// read.
    #[command(after_help = "Examples:
  # in-cluster, with your kubeconfig
  podcidr-speaker doctor
  # offline, on a dump: kubectl get nodes,ciliumnodes -o yaml > state.yaml
  podcidr-speaker doctor --cluster-state config/cluster-state/outage")]
    Doctor(DoctorArgs),
    /// Allocate LoadBalancer IPs from the bgp-config's `address-pools` (MetalLB 0.12's
    /// rules) and write them to each Service's `status.loadBalancer.ingress`. Run as a
    /// Deployment of two replicas: they elect a leader on a Lease, and only the leader
    /// writes. Services come from the API server (in-cluster or KUBECONFIG).
    #[command(after_help = "Examples:
  # the Deployment (in-cluster; POD_NAME from the downward API)
  podcidr-speaker allocate --identity \"$POD_NAME\"
  # the bgp-config from a file, followed live
  podcidr-speaker allocate --bgp-config config/demo/bgp-config.yaml --metrics-addr 127.0.0.1:9478")]
    Allocate(Box<AllocateArgs>),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Files to check; `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// This node's name (the DaemonSet passes spec.nodeName). Required with
    /// `--announce local`; with `--announce cluster` it selects the peers by this node's
    /// labels.
    #[arg(long, env = "NODE_NAME", value_name = "NAME")]
    pub node: Option<String>,

    /// Standalone: read the bgp-config from this file (raw config.yaml or a ConfigMap
    /// manifest), reloaded on change. Without `--cluster-state` the cluster is still
    /// watched through the API server.
    #[arg(
        long,
        env = "PODCIDR_BGP_CONFIG",
        value_name = "FILE",
        conflicts_with = "bgp_config_map"
    )]
    pub bgp_config: Option<PathBuf>,

    /// Standalone: read Nodes, CiliumNodes and cilium-config (and, for LoadBalancer IPs,
    /// Services and EndpointSlices) from this YAML/JSON file or directory instead of the
    /// API server, reloaded on change. Needs `--bgp-config`.
    #[arg(
        long,
        env = "PODCIDR_CLUSTER_STATE",
        value_name = "PATH",
        requires = "bgp_config"
    )]
    pub cluster_state: Option<PathBuf>,

    /// The ConfigMap holding the bgp-config, and its data key.
    #[arg(
        long,
        env = "PODCIDR_BGP_CONFIG_MAP",
        value_name = "NS/NAME[:KEY]",
        default_value = "kube-system/bgp-config"
    )]
    pub bgp_config_map: BgpConfigMapRef,

    /// Which object's pod CIDRs are in force: `auto` follows the `ipam` key of
    /// cilium-config.
    #[arg(
        long,
        env = "PODCIDR_IPAM",
        value_name = "auto|kubernetes|cluster-pool|multi-pool",
        default_value = "auto"
    )]
    pub ipam: IpamOverride,

    /// `local`: this node's pod CIDRs (the DaemonSet); `cluster`: every node's, each
    /// with that node's InternalIP as next hop.
    #[arg(long, env = "PODCIDR_ANNOUNCE", value_enum, default_value_t = AnnounceArg::Local)]
    pub announce: AnnounceArg,

    /// Whether LoadBalancer Service IPs of the bgp address-pools are announced: `auto`
    /// follows the bgp-config's `speaker.announce-lb-ips` (absent: announced);
    /// `on`/`off` force it, whatever the bgp-config says. Cilium's `bgp-announce-lb-ip`
    /// is not followed (it starts Cilium's own speaker). `--announce local` only.
    #[arg(
        long,
        env = "PODCIDR_ANNOUNCE_LB_IPS",
        value_name = "auto|on|off",
        default_value = "auto"
    )]
    pub announce_lb_ips: LbSwitch,

    /// A `spec.loadBalancerClass` whose Services this speaker announces (repeatable).
    /// Without it only Services without a class are announced, as MetalLB.
    #[arg(long = "lb-class", value_name = "CLASS")]
    pub lb_classes: Vec<String>,

    /// The EndpointSlices followed for LoadBalancer facts: `load-balancers`, those of
    /// the Services this speaker could announce; `all`, every slice of the cluster (what
    /// each speaker watched before; kept so benches/ can measure one against the other
    /// in the real daemon). Hidden: nobody should run `all`. Kubernetes source only.
    #[arg(long, value_enum, default_value_t = SliceWatchArg::LoadBalancers, hide = true)]
    pub lb_slice_watch: SliceWatchArg,

    /// The local address of sessions whose peer sets no source-address (and the next
    /// hop of their routes), instead of the kernel's choice; e.g. the host IP from the
    /// downward API.
    #[arg(long, env = "PODCIDR_SOURCE_ADDRESS", value_name = "IP")]
    pub source_address: Option<IpAddr>,

    /// The BGP Identifier of sessions whose peer sets no router-id (default: the node's
    /// IPv4 InternalIP, else an IPv4 --source-address, else one derived from the node
    /// name).
    #[arg(long, env = "PODCIDR_ROUTER_ID", value_name = "IPV4")]
    pub router_id: Option<Ipv4Addr>,

    /// Where /metrics, /healthz, /readyz and /status are served.
    #[arg(
        long,
        env = "PODCIDR_METRICS_ADDR",
        value_name = "ADDR:PORT",
        default_value = "0.0.0.0:9477"
    )]
    pub metrics_addr: SocketAddr,

    /// Also accept BGP connections from configured peers on this address.
    #[arg(long, env = "PODCIDR_LISTEN_ADDR", value_name = "ADDR:PORT")]
    pub listen_addr: Option<SocketAddr>,

    /// Read the Secrets of `password-secret` from this directory (`DIR/NAME/KEY`, as
    /// Secret volumes mounted at `DIR/NAME`) instead of the API server, reloaded on
    /// change. Default: the API server, in the namespace of `--bgp-config-map`.
    #[arg(long, env = "PODCIDR_SECRETS_DIR", value_name = "DIR")]
    pub secrets_dir: Option<PathBuf>,

    /// When routes go for good (SIGTERM with the node leaving or without graceful restart
    /// in force, a peer no longer selected, the maintenance label
    /// `node.kubernetes.io/exclude-from-external-load-balancers`), how long they stay
    /// announced with the GRACEFUL_SHUTDOWN community 65535:0 (RFC 8326) before they are
    /// withdrawn; `0` withdraws at once. A Go duration.
    #[arg(
        long,
        env = "PODCIDR_GRACEFUL_SHUTDOWN_TIME",
        value_name = "DURATION",
        default_value = "15s",
        value_parser = duration_arg
    )]
    pub graceful_shutdown_time: Duration,

    /// What a stop (SIGTERM) means for this node's routes. `auto`: decided from the Node
    /// at that moment: deleted, being deleted, tainted out-of-service or by a node
    /// autoscaler, or shutting down (the kubelet's graceful node shutdown) is leaving,
    /// and every route gets the graceful shutdown, then is withdrawn, whatever graceful
    /// restart says; cordoned (`spec.unschedulable`) drains the LoadBalancer routes and
    /// keeps the pod CIDRs under graceful restart; anything else is a restart (and, with
    /// `--announce cluster`, every stop). `restart` or `leave` force either.
    #[arg(
        long,
        env = "PODCIDR_ON_STOP",
        value_name = "MODE",
        default_value = "auto",
        value_parser = on_stop_arg
    )]
    pub on_stop: StopPolicy,

    /// How long /readyz waits, once a config is in force and the sources have synced,
    /// for every session this node should have to be Established (and, with
    /// `--cilium-health-addr`, for the first announcement); after that it answers ready
    /// anyway, saying why. `0` does not wait for sessions.
    #[arg(
        long,
        env = "PODCIDR_READY_TIMEOUT",
        value_name = "DURATION",
        default_value = "60s",
        value_parser = duration_arg
    )]
    pub ready_timeout: Duration,

    /// Startup gate: announce nothing (start no session) until the Cilium agent's health
    /// endpoint at this address (GET /healthz; the agent serves 127.0.0.1:9879) answers
    /// 200. After the first announcement its health is only reported. Off by default.
    #[arg(long, env = "PODCIDR_CILIUM_HEALTH_ADDR", value_name = "ADDR:PORT")]
    pub cilium_health_addr: Option<SocketAddr>,

    /// While cilium-config turns Cilium's embedded BGP speaker on (`bgp-announce-lb-ip`
    /// or `bgp-announce-pod-cidr` true, Cilium 1.10-1.16): `hold` opens and accepts no
    /// new session (Established ones stay) until it is off; `ignore` only reports it,
    /// for clusters known not to run that speaker.
    #[arg(
        long,
        env = "PODCIDR_CILIUM_BGP_CONFLICT",
        value_name = "hold|ignore",
        default_value = "hold"
    )]
    pub cilium_bgp_conflict: ConflictPolicy,

    /// Log lines as text or as one JSON object each. The filter is RUST_LOG's
    /// (default `info`).
    #[arg(long, env = "PODCIDR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Parse and validate everything, print the effective settings and exit 0 without
    /// connecting anywhere or talking to the API server.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct AllocateArgs {
    /// Read the bgp-config from this file (raw config.yaml or a ConfigMap manifest),
    /// followed live.
    #[arg(
        long,
        env = "PODCIDR_BGP_CONFIG",
        value_name = "FILE",
        conflicts_with = "bgp_config_map"
    )]
    pub bgp_config: Option<PathBuf>,

    /// The ConfigMap holding the bgp-config, and its data key (as `run`).
    #[arg(
        long,
        env = "PODCIDR_BGP_CONFIG_MAP",
        value_name = "NS/NAME[:KEY]",
        default_value = "kube-system/bgp-config"
    )]
    pub bgp_config_map: BgpConfigMapRef,

    /// A `spec.loadBalancerClass` whose Services this allocator serves (repeatable).
    /// Without it only Services without a class, as `run` announces them.
    #[arg(long = "lb-class", value_name = "CLASS")]
    pub lb_classes: Vec<String>,

    /// The Lease the replicas elect their leader on.
    #[arg(
        long,
        env = "PODCIDR_ALLOCATOR_LEASE",
        value_name = "NS/NAME",
        default_value = "kube-system/podcidr-speaker-allocator"
    )]
    pub lease: LeaseRef,

    /// This replica's name in the Lease (default: the host name).
    #[arg(long, env = "POD_NAME", value_name = "NAME")]
    pub identity: Option<String>,

    /// How long a renewed Lease keeps the other replicas out (a Go duration).
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = duration_arg)]
    pub lease_duration: Duration,

    /// How long the leader leads without a successful renewal; past it, it stops
    /// writing. Shorter than --lease-duration.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration_arg)]
    pub renew_deadline: Duration,

    /// How often a renewal or an acquisition is tried. Shorter than --renew-deadline.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = duration_arg)]
    pub retry_period: Duration,

    /// Where /metrics, /healthz, /readyz and /status are served.
    #[arg(
        long,
        env = "PODCIDR_METRICS_ADDR",
        value_name = "ADDR:PORT",
        default_value = "0.0.0.0:9478"
    )]
    pub metrics_addr: SocketAddr,

    /// Log lines as text or as one JSON object each. The filter is RUST_LOG's
    /// (default `info`).
    #[arg(long, env = "PODCIDR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl AllocateArgs {
    /// The runner's settings; refuses timings that would let two replicas lead at once.
    pub fn settings(&self) -> Result<AllocateSettings, BadTimings> {
        let timings = Timings {
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        };
        timings.validate()?;
        Ok(AllocateSettings {
            config: match &self.bgp_config {
                Some(path) => ConfigInput::File(path.clone()),
                None => ConfigInput::ConfigMap(self.bgp_config_map.clone()),
            },
            classes: self.lb_classes.clone(),
            lease: self.lease.clone(),
            identity: self.identity.clone().unwrap_or_else(host_name),
            timings,
            metrics_addr: self.metrics_addr,
        })
    }
}

/// The kernel's host name (a pod's is its name), for `--identity`'s default.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "podcidr-speaker-allocator".to_owned())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AnnounceArg {
    Local,
    Cluster,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SliceWatchArg {
    LoadBalancers,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl std::fmt::Display for LogFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Text => "text",
            Self::Json => "json",
        })
    }
}

impl RunArgs {
    /// The library's view of these flags. Combinations clap cannot express are checked
    /// by [`Settings::validate`].
    pub fn settings(&self) -> Settings {
        let config = match &self.bgp_config {
            Some(path) => ConfigSource::File(path.clone()),
            None => ConfigSource::ConfigMap(self.bgp_config_map.clone()),
        };
        let cluster = match &self.cluster_state {
            Some(path) => ClusterSource::File(path.clone()),
            None => ClusterSource::Kubernetes,
        };
        Settings {
            node: self.node.clone(),
            config,
            cluster,
            ipam: self.ipam,
            announce: match self.announce {
                AnnounceArg::Local => AnnounceMode::Local,
                AnnounceArg::Cluster => AnnounceMode::Cluster,
            },
            announce_lb_ips: self.announce_lb_ips,
            lb_classes: self.lb_classes.clone(),
            lb_slices_all: self.lb_slice_watch == SliceWatchArg::All,
            source_address: self.source_address,
            router_id: self.router_id,
            metrics_addr: self.metrics_addr,
            listen_addr: self.listen_addr,
            secrets: match (&self.secrets_dir, &self.cluster_state) {
                (Some(dir), _) => SecretsSource::Dir(dir.clone()),
                (None, None) => SecretsSource::Kubernetes {
                    namespace: self.bgp_config_map.namespace.clone(),
                },
                (None, Some(_)) => SecretsSource::None,
            },
            graceful_shutdown: self.graceful_shutdown_time,
            on_stop: self.on_stop,
            ready_timeout: self.ready_timeout,
            cilium_health_addr: self.cilium_health_addr,
            cilium_bgp_conflict: self.cilium_bgp_conflict,
        }
    }
}

/// `--on-stop`: auto, restart or leave.
fn on_stop_arg(text: &str) -> Result<StopPolicy, String> {
    text.parse()
}

/// A non-negative Go duration ("15s", "1m30s", "0"), as the bgp-config writes them.
fn duration_arg(text: &str) -> Result<Duration, String> {
    let d = crate::config::duration::parse(text).map_err(|e| format!("{text:?} {e}"))?;
    d.to_std()
        .ok_or_else(|| format!("{text:?} is negative; expected e.g. \"15s\" or \"0\""))
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The bgp-config: the raw config YAML or a whole ConfigMap manifest.
    #[arg(long, value_name = "FILE")]
    pub bgp_config: PathBuf,
    /// Nodes, CiliumNodes and cilium-config as YAML or JSON: a file, or a directory of
    /// *.yaml, *.yml, *.json files.
    #[arg(long, value_name = "PATH")]
    pub cluster_state: PathBuf,
    /// The node to plan for.
    #[arg(long, value_name = "NAME")]
    pub node: String,
    /// `local`: this node's pod CIDRs (the DaemonSet); `cluster`: every node's, each
    /// with its InternalIP as next hop.
    #[arg(long, value_name = "local|cluster", default_value = "local")]
    pub announce: AnnounceMode,
    /// Which object's pod CIDRs are in force: `auto` follows cilium-config's `ipam`.
    #[arg(
        long,
        value_name = "auto|kubernetes|cluster-pool|multi-pool",
        default_value = "auto"
    )]
    pub ipam: IpamOverride,
    /// The address sessions bind when their peer sets no source-address, as `run`
    /// takes it; shown as the next hop of routes of its family.
    #[arg(long, value_name = "IP")]
    pub source_address: Option<IpAddr>,
    /// Whether LoadBalancer IPs are announced, as `run` takes it.
    #[arg(long, value_name = "auto|on|off", default_value = "auto")]
    pub announce_lb_ips: LbSwitch,
    /// A `spec.loadBalancerClass` handled (repeatable), as `run` takes it.
    #[arg(long = "lb-class", value_name = "CLASS")]
    pub lb_classes: Vec<String>,
    /// What `run` does while cilium-config turns Cilium's embedded BGP speaker on, as
    /// `run` takes it (the plan says whether its sessions would be held back).
    #[arg(long, value_name = "hold|ignore", default_value = "hold")]
    pub cilium_bgp_conflict: ConflictPolicy,
    /// Output format.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "table|json",
        default_value = "table"
    )]
    pub output: Format,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The speaker's endpoint (its `run --metrics-addr`).
    #[arg(long, value_name = "HOST:PORT", default_value = crate::commands::status::DEFAULT_ADDR)]
    pub addr: String,
    /// Print the /status JSON document instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Also show each peer's Adj-RIB-Out: the routes it holds from this speaker (next
    /// hop, attributes, since when) and what is pending, counted whole.
    #[arg(long)]
    pub routes: bool,
    /// With --routes: list at most this many routes per peer (held, and pending; the
    /// speaker caps it at 10000).
    #[arg(long, value_name = "N", default_value_t = crate::metrics::server::DEFAULT_ROUTES_LIMIT, requires = "routes")]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// A cluster-state file or directory (`kubectl get nodes,ciliumnodes -o yaml` and
    /// optionally the cilium-config ConfigMap). Without it the cluster is read once
    /// through KUBECONFIG or the in-cluster service account.
    #[arg(long, value_name = "PATH")]
    pub cluster_state: Option<PathBuf>,
    /// Which object is in force: follow cilium-config's `ipam` key, or force one mode.
    #[arg(
        long,
        value_name = "auto|kubernetes|cluster-pool|multi-pool",
        default_value = "auto"
    )]
    pub ipam: IpamOverride,
    /// Cilium's ConfigMap, read in-cluster.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        default_value = "kube-system/cilium-config"
    )]
    pub cilium_config: String,
    /// The bgp-config (raw YAML or a ConfigMap manifest): with it, LoadBalancer IPs
    /// outside every bgp address-pool, or in a layer2 one, are listed too.
    #[arg(long, value_name = "FILE", conflicts_with = "bgp_config_map")]
    pub bgp_config: Option<PathBuf>,
    /// In-cluster without `--bgp-config`: the ConfigMap holding the bgp-config (as
    /// `run` reads it), checked to be there and valid, and used as `--bgp-config` is.
    #[arg(
        long,
        value_name = "NS/NAME[:KEY]",
        default_value = "kube-system/bgp-config"
    )]
    pub bgp_config_map: BgpConfigMapRef,
    /// A `spec.loadBalancerClass` the allocator serves (repeatable), as `allocate
    /// --lb-class` takes it: the Services the in-cluster allocation check decides for.
    /// Without it, Services without a class. Not with --cluster-state (no allocation
    /// check is made from files).
    #[arg(
        long = "lb-class",
        value_name = "CLASS",
        conflicts_with = "cluster_state"
    )]
    pub lb_classes: Vec<String>,
    /// In-cluster: the Lease `podcidr-speaker allocate` elects its leader on (its
    /// `--lease`), read to say whether an allocator of ours runs. The chart puts it in
    /// the release's namespace. No environment variable: `allocate`'s
    /// PODCIDR_ALLOCATOR_LEASE, set where it runs, would make `--cluster-state` a conflict.
    #[arg(
        long,
        value_name = "NS/NAME",
        default_value = "kube-system/podcidr-speaker-allocator",
        conflicts_with = "cluster_state"
    )]
    pub allocator_lease: LeaseRef,
}

/// `decode`: exactly one input source.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["hex", "mrt", "pcap", "stdin"])))]
pub struct DecodeArgs {
    /// One or more whole BGP messages (header included) as hex; spaces, colons and a
    /// leading 0x are ignored.
    #[arg(long, value_name = "HEX")]
    pub hex: Option<String>,

    /// An MRT file (RFC 6396: BGP4MP, BGP4MP_ET, TABLE_DUMP, TABLE_DUMP_V2), plain,
    /// gzip or bzip2.
    #[arg(long, value_name = "FILE")]
    pub mrt: Option<PathBuf>,

    /// A pcap or pcapng capture (plain, gzip or bzip2); every TCP stream carrying BGP
    /// is reassembled, on any port.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,

    /// `-`: raw BGP messages on standard input.
    #[arg(value_name = "-", value_parser = clap::builder::PossibleValuesParser::new(["-"]))]
    pub stdin: Option<String>,

    /// AS number width in AS_PATH and AGGREGATOR for --hex, stdin, and captured
    /// sessions whose OPENs are not in the capture. `auto` tries 4 octets, then 2.
    /// MRT records say it themselves (their subtype).
    #[arg(long, value_enum, default_value_t = AsWidth::Auto)]
    pub as_width: AsWidth,

    /// Accept messages up to 65535 octets (RFC 8654) for --hex, stdin, and captured
    /// sessions whose OPENs are not in the capture.
    #[arg(long)]
    pub extended_message: bool,

    /// NLRI carry ADD-PATH path identifiers (RFC 7911) for --hex, stdin, and captured
    /// sessions whose OPENs are not in the capture (in `auto` AS width mode both
    /// encodings are tried).
    #[arg(long)]
    pub add_path: bool,
}

/// How wide AS numbers are when the session context is not known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AsWidth {
    Auto,
    #[value(name = "2")]
    Two,
    #[value(name = "4")]
    Four,
}

impl CheckArgs {
    pub fn request(&self) -> CheckRequest {
        CheckRequest {
            files: self.files.clone(),
        }
    }
}

impl PlanArgs {
    pub fn request(&self) -> PlanRequest {
        PlanRequest {
            bgp_config: self.bgp_config.clone(),
            cluster_state: self.cluster_state.clone(),
            node: self.node.clone(),
            announce: self.announce,
            ipam: self.ipam,
            source_address: self.source_address,
            announce_lb_ips: self.announce_lb_ips,
            lb_classes: self.lb_classes.clone(),
            cilium_bgp_conflict: self.cilium_bgp_conflict,
            format: self.output,
        }
    }
}

impl StatusArgs {
    pub fn request(&self) -> StatusRequest {
        StatusRequest {
            addr: self.addr.clone(),
            json: self.json,
            routes: self.routes.then_some(self.limit),
        }
    }
}

impl DoctorArgs {
    pub fn request(&self) -> DoctorRequest {
        DoctorRequest {
            cluster_state: self.cluster_state.clone(),
            cilium_config: self.cilium_config.clone(),
            ipam: self.ipam,
            bgp_config: self.bgp_config.clone(),
            bgp_config_map: self.bgp_config_map.clone(),
            lb_classes: self.lb_classes.clone(),
            allocator_lease: self.allocator_lease.clone(),
        }
    }
}

impl DecodeArgs {
    /// clap requires exactly one source; `-` (or nothing else) is standard input.
    pub fn request(&self) -> decode::Request {
        let input = if let Some(hex) = &self.hex {
            decode::Input::Hex(hex.clone())
        } else if let Some(path) = &self.mrt {
            decode::Input::Mrt(path.clone())
        } else if let Some(path) = &self.pcap {
            decode::Input::Pcap(path.clone())
        } else {
            decode::Input::Stdin
        };
        decode::Request {
            input,
            four_octet_as: match self.as_width {
                AsWidth::Auto => None,
                AsWidth::Two => Some(false),
                AsWidth::Four => Some(true),
            },
            extended_message: self.extended_message,
            add_path: self.add_path,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_subcommand_help_has_examples() {
        let cli = Cli::command();
        for sub in cli.get_subcommands() {
            let help = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(
                help.starts_with("Examples:") && help.contains("podcidr-speaker"),
                "`{}` has no examples in --help",
                sub.get_name()
            );
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_waits_default_to_the_documented_values() {
        let cli = Cli::try_parse_from(["podcidr-speaker", "run", "--node", "n1"]).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run");
        };
        let s = args.settings();
        assert_eq!(
            s.graceful_shutdown,
            crate::daemon::settings::DEFAULT_GRACEFUL_SHUTDOWN
        );
        assert_eq!(
            s.ready_timeout,
            crate::daemon::settings::DEFAULT_READY_TIMEOUT
        );
        assert_eq!(s.cilium_health_addr, None);
        assert_eq!(s.cilium_bgp_conflict, ConflictPolicy::Hold);
        let cli = Cli::try_parse_from([
            "podcidr-speaker",
            "run",
            "--graceful-shutdown-time=1m30s",
            "--ready-timeout=0",
            "--cilium-health-addr=127.0.0.1:9879",
            "--cilium-bgp-conflict=ignore",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run");
        };
        let s = args.settings();
        assert_eq!(s.graceful_shutdown, Duration::from_secs(90));
        assert_eq!(s.ready_timeout, Duration::ZERO);
        assert_eq!(
            s.cilium_health_addr,
            Some("127.0.0.1:9879".parse().unwrap())
        );
        assert_eq!(s.cilium_bgp_conflict, ConflictPolicy::Ignore);
        for bad in [
            "--ready-timeout=-1s",
            "--graceful-shutdown-time=15",
            "--cilium-bgp-conflict=off",
        ] {
            assert!(
                Cli::try_parse_from(["podcidr-speaker", "run", bad]).is_err(),
                "{bad} accepted"
            );
        }
    }

    /// `run --ipam` reads `IpamOverride` as `plan` and `doctor` do (its values are
    /// tested with it): multi-pool too, which a `run`-only copy of the list once lacked.
    #[test]
    fn run_ipam_is_the_ipam_override() {
        let cli = Cli::try_parse_from(["podcidr-speaker", "run", "--ipam", "multi-pool"]).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run");
        };
        assert_eq!(args.settings().ipam, IpamOverride::MultiPool);
        assert!(Cli::try_parse_from(["podcidr-speaker", "run", "--ipam", "crd"]).is_err());
    }

    fn decode_args(command: Command) -> DecodeArgs {
        match command {
            Command::Decode(args) => args,
            #[allow(unreachable_patterns)]
            other => panic!("not decode: {other:?}"),
        }
    }

    #[test]
    fn decode_needs_exactly_one_source() {
        let ok = Cli::try_parse_from(["podcidr-speaker", "decode", "--hex", "ff"]).unwrap();
        let args = decode_args(ok.command);
        assert_eq!(args.hex.as_deref(), Some("ff"));
        assert_eq!(args.as_width, AsWidth::Auto);

        let stdin =
            Cli::try_parse_from(["podcidr-speaker", "decode", "-", "--as-width", "2"]).unwrap();
        let args = decode_args(stdin.command);
        assert_eq!(args.stdin.as_deref(), Some("-"));
        assert_eq!(args.as_width, AsWidth::Two);

        assert!(Cli::try_parse_from(["podcidr-speaker", "decode"]).is_err());
        assert!(
            Cli::try_parse_from(["podcidr-speaker", "decode", "--hex", "ff", "--mrt", "x"])
                .is_err()
        );
        assert!(Cli::try_parse_from(["podcidr-speaker", "decode", "file.bin"]).is_err());
    }
}
