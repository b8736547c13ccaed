//! podcidr-speaker command line entry point: parses arguments, initialises logging and
//! runs the subcommand. No logic of its own.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use podcidr_speaker::cli::{Cli, Command, LogFormat};
use podcidr_speaker::commands::{self, check, doctor, plan, status};

/// The runtime's worker threads at most, whatever the node's core count.
const MAX_WORKERS: usize = 2;

/// The C library's `pow`, for the one caller this binary has: tokio's multi-thread
/// scheduler (`f64::powf`, its workers' average poll time). Defined here, in the
/// executable, the linker resolves that call to it and drops glibc's libm.so.6 from the
/// binary's needs (`--as-needed`): libm was mapped for `pow` alone and kept 0.56 MiB
/// resident at idle (the loader's and the IFUNC resolver's pages, in 64 KiB windows).
/// musl's algorithm (the `libm` crate): within 1 ulp, as glibc's. A dependency that
/// starts calling another libm function only brings libm.so.6 back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)] // `no_mangle`: this is the C symbol `pow`.
#[no_mangle]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

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
        Command::Allocate(args) => init_tracing(args.log_format, "info"),
        // The one-shot commands print their results; the log is for trouble only.
        _ => init_tracing(LogFormat::Text, "warn"),
    }
    let out = &mut std::io::stdout();
    let err = &mut std::io::stderr();
    match cli.command {
        Command::Run(args) => {
            let settings = args.settings();
            if args.dry_run {
                let report = podcidr_speaker::daemon::dry_run(&settings)?;
                print!("{report}");
                println!("log-format:     {}", args.log_format);
                return Ok(ExitCode::SUCCESS);
            }
            match runtime()?.block_on(podcidr_speaker::daemon::run(settings)) {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    // Logging is up: the error goes where every other line went.
                    tracing::error!(error = %e, "podcidr-speaker stopped");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        Command::Allocate(args) => {
            let settings = args.settings()?;
            match runtime()?.block_on(podcidr_speaker::allocate::run::run(settings)) {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    tracing::error!(error = %e, "allocator stopped");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        Command::Check(args) => Ok(exit(check::run(&args.request(), out, err))),
        Command::Decode(args) => Ok(exit(commands::decode::run(&args.request(), out, err))),
        Command::Plan(args) => Ok(exit(plan::run(&args.request(), out, err))),
        Command::Status(args) => Ok(exit(status::run(&args.request(), out, err))),
        Command::Doctor(args) => Ok(exit(doctor::run(&args.request(), out, err))),
    }
}

/// The runtime of `run` and `allocate`.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    // Before any worker exists: every arena is made under the fixed threshold.
    podcidr_speaker::memory::keep_large_apart();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // One worker per core by default: 64 threads (stacks, malloc arenas) on a 64-core
    // node for a few sessions. Two keep a busy replan from holding up the BGP and BFD
    // timers; TOKIO_WORKER_THREADS still overrides.
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        builder.worker_threads(cores.min(MAX_WORKERS));
    }
    builder.enable_all().thread_name("podcidr-speaker").build()
}

fn exit(code: u8) -> ExitCode {
    ExitCode::from(code)
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

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    #[test]
    fn pow_is_the_c_librarys_within_one_ulp() {
        let ulp = |a: f64, b: f64| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs();
        assert_eq!(super::pow(2.0, 10.0), 1024.0);
        assert!(ulp(super::pow(2.0, 0.5), std::f64::consts::SQRT_2) <= 1);
        assert!(ulp(super::pow(10.0, -3.0), 0.001) <= 1);
        // tokio's use: 1 - (1 - alpha)^polls, alpha 0.1; the value glibc gives.
        assert!(ulp(super::pow(0.9, 61.0), 0.001_617_309_269_922_990_6) <= 1);
        assert!(super::pow(-8.0, 1.0 / 3.0).is_nan());
        assert_eq!(super::pow(0.0, 0.0), 1.0);
        assert_eq!(super::pow(f64::INFINITY, -1.0), 0.0);
    }
}
