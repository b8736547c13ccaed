//! The command line: clap structs for each subcommand. Parsing only; `main.rs`
//! dispatches and the library does the work.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use podcidr_speaker::sources::IpamOverride;

#[derive(Debug, Parser)]
#[command(name = "podcidr-speaker", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate bgp-config files (the raw config.yaml or a whole ConfigMap manifest):
    /// print "ok" and one line per peer, or every error; exit 1 if any file is invalid.
    Check(CheckArgs),
    /// Show a running speaker's sessions like `show bgp summary`, with its node, IPAM
    /// mode, sources and drift warnings (its /status endpoint). Exit 0 when a config is
    /// in force and every peer is Established, 1 otherwise, 2 when it cannot be reached.
    Status(StatusArgs),
    /// Diagnose the cluster's pod CIDRs: per node the Node and CiliumNode CIDRs, which is
    /// in force for the IPAM mode, drift, overlaps between nodes and CIDRs outside the
    /// cluster pool. Exit 0 when nothing is wrong, 1 when something is, 2 when the
    /// cluster cannot be read.
    Doctor(DoctorArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Files to check; `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The speaker's endpoint (its `run --metrics-addr`).
    #[arg(long, value_name = "HOST:PORT", default_value = podcidr_speaker::status::DEFAULT_ADDR)]
    pub addr: String,
    /// Print the /status JSON document instead of the tables.
    #[arg(long)]
    pub json: bool,
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
        value_name = "auto|kubernetes|cluster-pool",
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
}
