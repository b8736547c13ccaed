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
        Command::Status(args) => Ok(ExitCode::from(podcidr_speaker::status::command(
            &args.addr,
            args.json,
            &mut std::io::stdout(),
            &mut std::io::stderr(),
        ))),
        Command::Doctor(args) => {
            let code = match &args.cluster_state {
                Some(path) => podcidr_speaker::doctor::command_file(
                    path,
                    args.ipam,
                    &mut std::io::stdout(),
                    &mut std::io::stderr(),
                ),
                None => tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(podcidr_speaker::doctor::command_in_cluster(
                        &args.cilium_config,
                        args.ipam,
                        &mut std::io::stdout(),
                        &mut std::io::stderr(),
                    )),
            };
            Ok(ExitCode::from(code))
        }
    }
}
