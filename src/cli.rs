//! The command line: clap structs for each subcommand. Parsing only; `main.rs`
//! dispatches and the library does the work.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Files to check; `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}
