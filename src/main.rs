//! podcidr-speaker command line entry point: parses arguments, initialises logging and
//! runs the subcommand. No logic of its own.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use podcidr_speaker::cli::{Cli, Command, LogFormat};
use podcidr_speaker::decode;

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Run(args) => init_tracing(args.log_format, "info"),
        // The one-shot commands print their results; the log is for trouble only.
        _ => init_tracing(LogFormat::Text, "warn"),
    }
    match cli.command {
        Command::Run(args) => {
            let settings = args.settings();
            if args.dry_run {
                let report = podcidr_speaker::daemon::dry_run(&settings)?;
                print!("{report}");
                println!("log-format:     {}", args.log_format);
                return Ok(ExitCode::SUCCESS);
            }
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("podcidr-speaker")
                .build()?;
            match runtime.block_on(podcidr_speaker::daemon::run(settings)) {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    // Logging is up: the error goes where every other line went.
                    tracing::error!(error = %e, "podcidr-speaker stopped");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
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
        Command::Status(args) => Ok(ExitCode::from(podcidr_speaker::status::command(
            &args.addr,
            args.json,
            args.routes.then_some(args.limit),
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

/// Logs go to stderr, filtered by RUST_LOG (else `default`); an unreadable RUST_LOG
/// falls back to `default` rather than silencing the speaker.
fn init_tracing(format: LogFormat, default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never into a log collector.
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
