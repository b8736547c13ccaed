//! The `run` command's settings as the library sees them (the CLI maps its flags onto
//! [`Settings`]), the checks clap cannot express, and `--dry-run`: everything parsed
//! and validated, the effective settings rendered, nothing started.
//!
//! Must not: connect anywhere, talk to the API server or start a task. A dry run reads
//! the standalone files it is given and nothing else.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::config::duration::Compact;
use crate::config::{self, Config};
use crate::routes::cilium::ConflictPolicy;
use crate::routes::lb::LbSwitch;
use crate::routes::stop::StopPolicy;
use crate::routes::{self, AnnounceMode, LocalNode, Overrides, Plan};
use crate::sources::kube::BgpConfigMapRef;
use crate::sources::{self, IpamOverride, NodeView};

use super::DaemonError;

/// Where the bgp-config text comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// `--bgp-config FILE`, followed for changes (inotify, else a poll).
    File(PathBuf),
    /// `--bgp-config-map NS/NAME[:KEY]`, watched through the API server.
    ConfigMap(BgpConfigMapRef),
}

/// Where Nodes, CiliumNodes and cilium-config come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterSource {
    /// `--cluster-state PATH`, followed for changes (inotify, else a poll).
    File(PathBuf),
    /// The API server: in-cluster, or KUBECONFIG.
    Kubernetes,
}

/// Where the Secrets of `password-secret` come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretsSource {
    /// `--secrets-dir DIR`: `DIR/NAME/KEY`, followed for changes (inotify, else a poll).
    Dir(PathBuf),
    /// The API server: each named Secret of this namespace (the bgp-config's).
    Kubernetes { namespace: String },
    /// Standalone without `--secrets-dir`: a peer with `password-secret` cannot run.
    None,
}

/// Everything `run` needs to know before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub node: Option<String>,
    pub config: ConfigSource,
    pub cluster: ClusterSource,
    pub ipam: IpamOverride,
    pub announce: AnnounceMode,
    /// `--announce-lb-ips`: whether LoadBalancer IPs are announced (`routes::lb`).
    pub announce_lb_ips: LbSwitch,
    /// `--lb-class`: the `spec.loadBalancerClass` values handled; empty: only Services
    /// without a class.
    pub lb_classes: Vec<String>,
    /// `--lb-slice-watch all` (hidden, benches/): every EndpointSlice of the cluster is
    /// watched, not only those of the Services this speaker could announce.
    pub lb_slices_all: bool,
    /// `--source-address`: the local address of sessions of its family whose peer sets no
    /// `source-address` (`routes::source_address`).
    pub source_address: Option<IpAddr>,
    /// `--router-id`: the BGP Identifier of sessions whose peer sets no `router-id` (a
    /// peer's own wins; see `routes::router_id`).
    pub router_id: Option<Ipv4Addr>,
    pub metrics_addr: SocketAddr,
    pub listen_addr: Option<SocketAddr>,
    pub secrets: SecretsSource,
    /// `--graceful-shutdown-time`: how long routes carry GRACEFUL_SHUTDOWN (RFC 8326)
    /// before a session that stops for good withdraws them; zero: at once.
    pub graceful_shutdown: Duration,
    /// `--on-stop`: restart, leave, or decided from the Node at the stop
    /// (`routes::stop::decide`).
    pub on_stop: StopPolicy,
    /// `--ready-timeout`: how long `/readyz` waits for this node's sessions.
    pub ready_timeout: Duration,
    /// `--cilium-health-addr`: announce nothing until the Cilium agent's `/healthz` there
    /// answers 200 (the startup gate); `None`: no gate.
    pub cilium_health_addr: Option<SocketAddr>,
    /// `--cilium-bgp-conflict`: what a conflict with Cilium's embedded speaker does to
    /// new sessions (`routes::cilium::decide`).
    pub cilium_bgp_conflict: ConflictPolicy,
}

/// The default of `--graceful-shutdown-time`.
pub const DEFAULT_GRACEFUL_SHUTDOWN: Duration = Duration::from_secs(15);
/// The default of `--ready-timeout`.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest `--graceful-shutdown-time` and `--ready-timeout` taken: both hold up a
/// rollout (or a pod's termination), and an hour is already far past any use.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);

impl Settings {
    /// The checks that need more than one flag; every message names the flag.
    pub fn validate(&self) -> Result<(), DaemonError> {
        let bad = |flag: &'static str, reason: String| Err(DaemonError::Settings { flag, reason });
        match self.node.as_deref() {
            None if self.announce == AnnounceMode::Local => {
                return bad(
                    "--node",
                    "is required with --announce local (set it or NODE_NAME)".into(),
                )
            }
            Some(n) if n.trim().is_empty() => {
                return bad("--node", "must not be empty (is NODE_NAME set?)".into())
            }
            _ => {}
        }
        if let Some(id) = self.router_id {
            if id.is_unspecified() {
                // RFC 6286 section 2.1: the BGP Identifier is a non-zero 32-bit value.
                return bad("--router-id", "0.0.0.0 is not a BGP Identifier".into());
            }
        }
        if let Some(a) = self.source_address {
            if a.is_unspecified() || a.is_multicast() {
                return bad("--source-address", format!("{a} is not a unicast address"));
            }
        }
        for (flag, value) in [
            ("--graceful-shutdown-time", self.graceful_shutdown),
            ("--ready-timeout", self.ready_timeout),
        ] {
            if value > MAX_WAIT {
                return bad(
                    flag,
                    format!("{} is longer than {}", Compact(value), Compact(MAX_WAIT)),
                );
            }
        }
        if self.announce == AnnounceMode::Cluster && self.announce_lb_ips == LbSwitch::On {
            return bad(
                "--announce-lb-ips",
                "on needs --announce local: a LoadBalancer IP is announced by the nodes that \
                 serve it, each from its own speaker"
                    .into(),
            );
        }
        if self.lb_slices_all && !self.follows_kube_slices() {
            return bad(
                "--lb-slice-watch",
                "all needs the Kubernetes source following LoadBalancer Services \
                 (no --cluster-state, --announce local, --announce-lb-ips not off)"
                    .into(),
            );
        }
        if let Some(c) = self.lb_classes.iter().find(|c| c.trim().is_empty()) {
            return bad("--lb-class", format!("{c:?} is not a class name"));
        }
        if let Some(a) = self.cilium_health_addr {
            if a.ip().is_unspecified() || a.ip().is_multicast() || a.port() == 0 {
                return bad(
                    "--cilium-health-addr",
                    format!("{a} is not an address to connect to (e.g. 127.0.0.1:9879)"),
                );
            }
        }
        Ok(())
    }

    /// Whether EndpointSlices are watched in the API server (which
    /// `--lb-slice-watch` scopes).
    fn follows_kube_slices(&self) -> bool {
        self.cluster == ClusterSource::Kubernetes && self.follows_load_balancers()
    }

    /// Whether the Services and EndpointSlices are followed at all: not when
    /// LoadBalancer IPs are forced off, nor with `--announce cluster`.
    pub fn follows_load_balancers(&self) -> bool {
        self.announce == AnnounceMode::Local && self.announce_lb_ips != LbSwitch::Off
    }

    /// The node name, or `""` for a cluster speaker that was not given one.
    pub fn node_name(&self) -> &str {
        self.node.as_deref().unwrap_or("")
    }
}

/// What a dry run found: the settings, and what the standalone files hold.
#[derive(Debug)]
pub struct DryRun {
    pub settings: Settings,
    /// The validated bgp-config, when it is a file.
    pub config: Option<Config>,
    /// The node view, when the cluster state is a file.
    pub view: Option<NodeView>,
    /// What `run` would start with, when both are files.
    pub plan: Option<Plan>,
}

/// `run --dry-run`: validates the settings, and parses and validates the standalone
/// files (the bgp-config, the cluster state and the node view decided from it).
pub fn dry_run(settings: &Settings) -> Result<DryRun, DaemonError> {
    settings.validate()?;
    let config = match &settings.config {
        ConfigSource::File(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| DaemonError::Read {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            let config = config::parse(&text).map_err(|errors| DaemonError::Config {
                path: path.clone(),
                errors,
            })?;
            Some(config)
        }
        ConfigSource::ConfigMap(_) => None,
    };
    let view = match &settings.cluster {
        ClusterSource::File(path) => {
            let state = sources::file::load(path)?;
            Some(sources::node_view(&state, settings.ipam)?)
        }
        ClusterSource::Kubernetes => None,
    };
    let plan = match (&config, &view) {
        (Some(config), Some(view)) => Some(routes::plan(
            view,
            config,
            &LocalNode::new(settings.node_name()),
            settings.announce,
            &Overrides {
                source_address: settings.source_address,
            },
        )),
        _ => None,
    };
    Ok(DryRun {
        settings: settings.clone(),
        config,
        view,
        plan,
    })
}

impl fmt::Display for DryRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.settings;
        writeln!(f, "dry run: settings are valid, nothing was started")?;
        writeln!(
            f,
            "node:           {}",
            s.node.as_deref().unwrap_or("(none)")
        )?;
        writeln!(f, "announce:       {}", s.announce)?;
        writeln!(f, "ipam:           {}", s.ipam)?;
        match (s.announce, s.announce_lb_ips) {
            (AnnounceMode::Cluster, _) => writeln!(
                f,
                "lb ips:         not announced (--announce cluster: each node's speaker announces its own)"
            )?,
            (_, LbSwitch::Auto) => match &self.config {
                Some(config) => {
                    let decided = s.announce_lb_ips.decide_for(s.announce, config);
                    let word = if decided.on { "announced" } else { "not announced" };
                    writeln!(f, "lb ips:         {word} ({})", decided.why)?
                }
                None => writeln!(
                    f,
                    "lb ips:         auto (the bgp-config's speaker.announce-lb-ips; absent: announced)"
                )?,
            },
            (_, switch) => writeln!(f, "lb ips:         {switch} (--announce-lb-ips)")?,
        }
        match &self.config {
            Some(c) if c.speaker.announce_pod_cidrs => writeln!(f, "pod cidrs:      announced")?,
            Some(_) => writeln!(
                f,
                "pod cidrs:      not announced (the bgp-config's speaker.announce-pod-cidrs: false)"
            )?,
            None => writeln!(
                f,
                "pod cidrs:      the bgp-config's speaker.announce-pod-cidrs (absent: announced)"
            )?,
        }
        if !s.lb_classes.is_empty() {
            writeln!(f, "lb classes:     {}", s.lb_classes.join(", "))?;
        }
        match &s.cluster {
            ClusterSource::File(p) => writeln!(f, "cluster state:  file {}", p.display())?,
            ClusterSource::Kubernetes => writeln!(
                f,
                "cluster state:  kubernetes API (in-cluster, or KUBECONFIG), {}",
                match s.announce {
                    AnnounceMode::Local => "watching this node only",
                    AnnounceMode::Cluster => "watching every node",
                }
            )?,
        }
        match &s.config {
            ConfigSource::File(p) => writeln!(f, "bgp-config:     file {}", p.display())?,
            ConfigSource::ConfigMap(r) => writeln!(f, "bgp-config:     configmap {r}")?,
        }
        match s.source_address {
            Some(a) => writeln!(f, "source-address: {a}")?,
            None => writeln!(
                f,
                "source-address: (the config's, else the kernel's choice)"
            )?,
        }
        match s.router_id {
            Some(id) => writeln!(f, "router-id:      {id} (where the config sets none)")?,
            None => writeln!(
                f,
                "router-id:      (the config's, else the node's IPv4 address, else the IPv4 source address, else derived from the node name)"
            )?,
        }
        writeln!(f, "metrics-addr:   {}", s.metrics_addr)?;
        match s.listen_addr {
            Some(a) => writeln!(f, "listen-addr:    {a}")?,
            None => writeln!(f, "listen-addr:    (none: outbound sessions only)")?,
        }
        match &s.secrets {
            SecretsSource::Dir(d) => writeln!(f, "secrets:        directory {}", d.display())?,
            SecretsSource::Kubernetes { namespace } => {
                writeln!(f, "secrets:        kubernetes API, namespace {namespace}")?
            }
            SecretsSource::None => writeln!(
                f,
                "secrets:        (none: a peer with password-secret needs --secrets-dir)"
            )?,
        }
        match s.graceful_shutdown {
            d if d.is_zero() => writeln!(f, "graceful-shutdown-time: 0 (Cease at once)")?,
            d => writeln!(f, "graceful-shutdown-time: {}", Compact(d))?,
        }
        let on_stop = match (s.on_stop, s.announce) {
            (StopPolicy::Auto, AnnounceMode::Cluster) => {
                "auto (cluster mode: every stop is a restart)"
            }
            (StopPolicy::Auto, AnnounceMode::Local) => {
                "auto (decided from this node's Node at each stop)"
            }
            (StopPolicy::Restart, _) => "restart (graceful restart keeps every route)",
            (StopPolicy::Leave, _) => "leave (every route drained, then withdrawn)",
        };
        writeln!(f, "on-stop:        {on_stop}")?;
        writeln!(f, "ready-timeout:  {}", Compact(s.ready_timeout))?;
        let conflict = match s.cilium_bgp_conflict {
            ConflictPolicy::Hold => {
                "hold (no new session while cilium-config turns Cilium's embedded BGP on)"
            }
            ConflictPolicy::Ignore => "ignore (Cilium's embedded BGP is only reported)",
        };
        writeln!(f, "cilium-bgp-conflict: {conflict}")?;
        match s.cilium_health_addr {
            Some(a) => writeln!(
                f,
                "cilium-health:  http://{a}/healthz (nothing announced until it answers 200)"
            )?,
            None => writeln!(f, "cilium-health:  (no startup gate)")?,
        }
        if let Some(view) = &self.view {
            writeln!(
                f,
                "cluster:        {} nodes, ipam {}",
                view.nodes.len(),
                view.ipam,
            )?;
            for w in &view.warnings {
                writeln!(f, "warning:        {w}")?;
            }
            if let Some(name) = &s.node {
                match view.nodes.get(name.as_str()) {
                    Some(entry) => {
                        let prefixes: Vec<String> =
                            entry.prefixes.iter().map(ToString::to_string).collect();
                        writeln!(f, "node prefixes:  {}", prefixes.join(", "))?;
                    }
                    None => writeln!(
                        f,
                        "warning:        node {name} is not in the cluster state: it announces nothing"
                    )?,
                }
            }
        }
        if let Some(config) = &self.config {
            writeln!(f, "peers:          {} configured", config.peers.len())?;
            match &self.plan {
                Some(plan) => {
                    for (key, peer) in &plan.peers {
                        writeln!(
                            f,
                            "  peers[{}] {key} AS {} (my AS {}): selected, {} routes",
                            peer.peer.index,
                            peer.peer.peer_asn,
                            peer.peer.my_asn,
                            peer.routes.len()
                        )?;
                    }
                    for index in &plan.unselected {
                        if let Some(peer) = config.peers.get(*index) {
                            writeln!(
                                f,
                                "  peers[{index}] {} AS {} (my AS {}): not selected for this node",
                                peer.key(),
                                peer.peer_asn,
                                peer.my_asn
                            )?;
                        }
                    }
                    if !plan.node_present {
                        writeln!(f, "  (no peer is selected: the node's labels are unknown)")?;
                    }
                }
                None => {
                    for peer in &config.peers {
                        writeln!(
                            f,
                            "  peers[{}] {} AS {} (my AS {}): selection decided by the node's labels at run time",
                            peer.index,
                            peer.key(),
                            peer.peer_asn,
                            peer.my_asn
                        )?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            node: Some("worker1".into()),
            config: ConfigSource::ConfigMap(BgpConfigMapRef::default()),
            cluster: ClusterSource::Kubernetes,
            ipam: IpamOverride::Auto,
            announce: AnnounceMode::Local,
            announce_lb_ips: LbSwitch::Auto,
            lb_classes: Vec::new(),
            lb_slices_all: false,
            source_address: None,
            router_id: None,
            metrics_addr: "0.0.0.0:9477".parse().unwrap(),
            listen_addr: None,
            secrets: SecretsSource::Kubernetes {
                namespace: "kube-system".into(),
            },
            graceful_shutdown: DEFAULT_GRACEFUL_SHUTDOWN,
            on_stop: StopPolicy::Auto,
            ready_timeout: DEFAULT_READY_TIMEOUT,
            cilium_health_addr: None,
            cilium_bgp_conflict: ConflictPolicy::Hold,
        }
    }

    fn flag_of(result: Result<(), DaemonError>) -> &'static str {
        match result {
            Err(DaemonError::Settings { flag, .. }) => flag,
            other => panic!("expected a settings error, got {other:?}"),
        }
    }

    #[test]
    fn local_announce_needs_a_node_and_cluster_announce_does_not() {
        let mut s = settings();
        assert!(s.validate().is_ok());
        s.node = None;
        assert_eq!(flag_of(s.validate()), "--node");
        s.announce = AnnounceMode::Cluster;
        assert!(s.validate().is_ok());
        s.node = Some("  ".into());
        assert_eq!(flag_of(s.validate()), "--node");
    }

    #[test]
    fn zero_router_id_and_unspecified_source_address_are_refused() {
        let mut s = settings();
        s.router_id = Some(Ipv4Addr::UNSPECIFIED);
        assert_eq!(flag_of(s.validate()), "--router-id");
        let mut s = settings();
        s.source_address = Some("0.0.0.0".parse().unwrap());
        assert_eq!(flag_of(s.validate()), "--source-address");
        s.source_address = Some("ff02::1".parse().unwrap());
        assert_eq!(flag_of(s.validate()), "--source-address");
        s.source_address = Some("100.64.1.1".parse().unwrap());
        assert!(s.validate().is_ok());
    }

    #[test]
    fn waits_are_bounded_and_the_gate_needs_a_real_address() {
        let mut s = settings();
        s.graceful_shutdown = Duration::from_secs(3601);
        assert_eq!(flag_of(s.validate()), "--graceful-shutdown-time");
        s.graceful_shutdown = Duration::ZERO;
        s.ready_timeout = Duration::from_secs(7200);
        assert_eq!(flag_of(s.validate()), "--ready-timeout");
        s.ready_timeout = Duration::ZERO;
        s.cilium_health_addr = Some("0.0.0.0:9879".parse().unwrap());
        assert_eq!(flag_of(s.validate()), "--cilium-health-addr");
        s.cilium_health_addr = Some("127.0.0.1:0".parse().unwrap());
        assert_eq!(flag_of(s.validate()), "--cilium-health-addr");
        s.cilium_health_addr = Some("127.0.0.1:9879".parse().unwrap());
        assert!(s.validate().is_ok());
    }

    #[test]
    fn lb_ips_forced_on_need_local_mode_and_classes_need_a_name() {
        let mut s = settings();
        s.announce_lb_ips = LbSwitch::On;
        assert!(s.validate().is_ok());
        assert!(s.follows_load_balancers());
        s.announce = AnnounceMode::Cluster;
        assert_eq!(flag_of(s.validate()), "--announce-lb-ips");
        s.announce_lb_ips = LbSwitch::Auto;
        assert!(s.validate().is_ok());
        assert!(!s.follows_load_balancers());
        let mut s = settings();
        s.announce_lb_ips = LbSwitch::Off;
        assert!(!s.follows_load_balancers());
        s.lb_classes = vec![" ".into()];
        assert_eq!(flag_of(s.validate()), "--lb-class");
    }

    #[test]
    fn the_full_slice_watch_needs_the_kube_source_following_load_balancers() {
        let mut s = settings();
        s.lb_slices_all = true;
        assert!(s.validate().is_ok());
        s.announce_lb_ips = LbSwitch::Off;
        assert_eq!(flag_of(s.validate()), "--lb-slice-watch");
        s.announce_lb_ips = LbSwitch::On;
        s.cluster = ClusterSource::File("/cluster".into());
        assert_eq!(flag_of(s.validate()), "--lb-slice-watch");
    }

    #[test]
    fn in_cluster_dry_run_reads_nothing_and_shows_the_node() {
        let dry = dry_run(&settings()).unwrap();
        assert!(dry.config.is_none() && dry.view.is_none() && dry.plan.is_none());
        let text = dry.to_string();
        assert!(text.contains("node:           worker1"), "{text}");
        assert!(
            text.contains("bgp-config:     configmap kube-system/bgp-config:config.yaml"),
            "{text}"
        );
    }
}
