//! The command line: clap structs for each subcommand. Parsing only; `main.rs`
//! dispatches and the library does the work.

use std::net::IpAddr;
use std::path::PathBuf;

use crate::routes::report::Format;
use crate::routes::AnnounceMode;
use crate::sources::IpamOverride;
use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

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
    /// Decode BGP messages from a hex string, an MRT file, a packet capture or stdin,
    /// printing one JSON object per message (like bgpdump).
    ///
    /// Exit status: 0 when every message decoded cleanly, 1 when at least one was
    /// malformed or the input was damaged (each such problem is printed as an object
    /// with an "error" field), 2 on a usage error or when the input cannot be read.
    Decode(DecodeArgs),
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
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
