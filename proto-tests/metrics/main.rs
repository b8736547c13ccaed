//! The observability suite (issue #7): the metrics registry through its text
//! exposition, the HTTP endpoint on 127.0.0.1:0, the `status` and `doctor` commands
//! (library and built binary), and the monitoring files under deploy/monitoring checked
//! against a scrape.
//!
//! Until the daemon exists, "a live scrape" is a scrape of a registry after recording
//! one of every event (`deploy::full_scrape`); proto-tests/metrics/live.rs will scrape a
//! running speaker once `run` lands.

mod deploy;
mod doctor;
mod exposition;
mod http;
mod record;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use podcidr_speaker::config::PeerKey;

/// A peer key from an address and a port.
pub fn peer(address: &str, port: u16) -> PeerKey {
    PeerKey {
        address: address.parse().expect("test address"),
        port,
    }
}

/// `secs` seconds after the Unix epoch: fixed times make the timestamps exact.
pub fn t(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

pub fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The four-node cluster of the outage: Node and CiliumNode CIDRs permuted.
pub fn outage_dir() -> PathBuf {
    crate_root().join("config/cluster-state/outage")
}
