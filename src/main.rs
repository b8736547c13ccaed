//! podcidr-speaker command line entry point: parses arguments and runs a subcommand.

mod cli;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => {
            let report = podcidr_speaker::config::check::check_files(&args.files);
            print!("{report}");
            Ok(if report.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
