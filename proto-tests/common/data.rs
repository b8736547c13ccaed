//! Where the real BGP data is, for every test that reads it: `PODCIDR_BGP_DATA`, else
//! `../shared/data/bgp` beside the crate.
//!
//! Data that is missing FAILS the test: a sweep over no files proves nothing, and a
//! moved directory must not turn the data tests green. `PODCIDR_SKIP_DATA=1` skips
//! them instead, with the reason printed (as `PODCIDR_SKIP_INTEROP=1` does for the
//! tests that need real peers). The golden vectors of `proto-tests/wire/rfc.rs` need
//! no data and always run.

use std::path::PathBuf;

/// Set to `1` to skip the tests that need the BGP data when it is missing.
pub const SKIP_ENV: &str = "PODCIDR_SKIP_DATA";

/// The data directory, or `None` (the test returns early) when it is missing and
/// `PODCIDR_SKIP_DATA=1`; panics when it is missing otherwise.
pub fn data_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("PODCIDR_BGP_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/bgp"))
        });
    if dir.join("SOURCES.md").is_file() {
        return Some(dir);
    }
    if std::env::var(SKIP_ENV).is_ok_and(|v| v == "1") {
        println!(
            "skipped ({SKIP_ENV}=1): no BGP data at {} (set PODCIDR_BGP_DATA)",
            dir.display()
        );
        return None;
    }
    panic!(
        "no BGP data at {} (no SOURCES.md): set PODCIDR_BGP_DATA to the data directory, \
         or {SKIP_ENV}=1 to skip the tests that need it",
        dir.display()
    );
}
