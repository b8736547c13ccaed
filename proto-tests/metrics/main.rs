//! The observability suite (issue #7): the metrics registry through its text
//! exposition, the HTTP endpoint on 127.0.0.1:0, the `status` and `doctor` commands
//! (library and built binary), the monitoring files under deploy/monitoring checked
//! against a scrape, and the README's metrics table against the registry.
//!
//! `live` runs the built speaker against BIRD and FRR in a network namespace of its
//! own (the interop harness; `PODCIDR_SKIP_INTEROP=1` skips it) and follows its endpoint
//! through a session's life; `deploy` checks the monitoring files against a registry
//! that recorded one of every event, and `live` against the running speaker.

#[path = "../interop/harness/mod.rs"]
mod harness;
/// The e2e suite's speaker process and standalone inputs.
#[path = "../e2e/speaker.rs"]
#[allow(dead_code)]
mod speaker;

mod deploy;
mod docs;
mod doctor;
mod exposition;
mod http;
mod live;
mod readiness;
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
