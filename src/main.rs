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
        Command::Plan(args) => {
            let request = podcidr_speaker::plan::PlanRequest {
                bgp_config: args.bgp_config,
                cluster_state: args.cluster_state,
                node: args.node,
                announce: args.announce,
                ipam: args.ipam,
                source_address: args.source_address,
                format: args.output,
            };
            match podcidr_speaker::plan::run(&request) {
                Ok(output) => {
                    print!("{output}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}
