//! End-to-end tests of the built `podcidr-speaker` binary.
//!
//! - [`cli`]: `run --dry-run` and `--version`, no network at all.
//!
//! The tests with real peers run each test in a network namespace of its own through
//! the interop harness (`isolated!`: the test re-executes itself under `unshare -rn`),
//! BIRD and FRR as the top-of-rack switches, and every speaker as a child process of
//! the test with its own `--source-address` on lo. `PODCIDR_SKIP_INTEROP=1` skips them.

#[path = "../interop/harness/mod.rs"]
mod harness;

mod cli;
