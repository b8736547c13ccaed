//! podcidr-speaker command line entry point: parses arguments, initialises logging and
//! runs the subcommand. No logic of its own.

use std::process::ExitCode;

use clap::Parser;

use podcidr_speaker::cli::{Cli, Command};
use podcidr_speaker::decode;

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
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
        // Exit status: 0 clean, 1 something malformed, 2 usage or I/O error (clap
        // exits 2 on usage errors itself).
        Command::Decode(args) => Ok(match decode::run(&args, std::io::stdout().lock()) {
            Ok(outcome) => {
                if outcome.malformed > 0 {
                    eprintln!(
                        "podcidr-speaker decode: {} of {} objects report a malformed message or damaged input",
                        outcome.malformed, outcome.events
                    );
                }
                ExitCode::from(outcome.exit_code())
            }
            Err(e) => {
                eprintln!("podcidr-speaker decode: {e}");
                ExitCode::from(2)
            }
        }),
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
