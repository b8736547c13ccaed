//! podcidr-speaker command line entry point: parses arguments and runs a subcommand.

fn main() {
    println!("podcidr-speaker {}", env!("CARGO_PKG_VERSION"));
}
