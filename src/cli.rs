//! The command line: clap structs for each subcommand. Parsing only; `main.rs`
//! dispatches and the library does the work.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use podcidr_speaker::routes::report::Format;
use podcidr_speaker::routes::AnnounceMode;
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
    /// Show, offline, which peers a node would open and the exact routes with
    /// attributes for each, from a bgp-config file and a cluster-state file or
    /// directory; drift, refused prefixes and conflicts are shown as warnings.
    /// Passwords are never printed.
    Plan(PlanArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Files to check; `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
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
        value_name = "auto|kubernetes|cluster-pool",
        default_value = "auto"
    )]
    pub ipam: IpamOverride,
    /// The address sessions bind when their peer sets no source-address, as `run`
    /// takes it; shown as the next hop of routes of its family.
    #[arg(long, value_name = "IP")]
    pub source_address: Option<IpAddr>,
    /// Output format.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "table|json",
        default_value = "table"
    )]
    pub output: Format,
}
