//! The observability suite (issue #7): the metrics registry through its text
//! exposition, the HTTP endpoint on 127.0.0.1:0, the `status` and `doctor` commands
//! (library and built binary), the monitoring files under deploy/monitoring checked
//! against a scrape, and the README's metrics table against the registry.
//!
//! `live` runs the built speaker against BIRD and FRR in a network namespace of its
//! own (the interop harness; `PODCIDR_SKIP_INTEROP=1` skips it) and follows its endpoint
//! through a session's life; `deploy` checks the monitoring files against a registry
//! that recorded one of every event, and `live` against the running speaker.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

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
mod prometheus;
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

/// A plan for node `a` (IPv4 InternalIP only, an IPv4 and an IPv6 pod CIDR) with one
/// IPv4 peer; `next_hop_v6` sets that peer's `next-hop-v6`.
pub fn dual_stack_plan(next_hop_v6: Option<&str>) -> podcidr_speaker::routes::Plan {
    use podcidr_speaker::routes::{plan, AnnounceMode, LocalNode, Overrides};
    use podcidr_speaker::sources::model::{CiliumConfig, ClusterState, NodeFacts};
    let extra = next_hop_v6
        .map(|a| format!(", next-hop-v6: '{a}'"))
        .unwrap_or_default();
    let config = podcidr_speaker::config::parse(&format!(
        "peers: [{{peer-address: 192.0.2.1, peer-asn: 65000, my-asn: 65001{extra}}}]"
    ))
    .unwrap();
    let mut state = ClusterState {
        cilium_config: Some(CiliumConfig {
            ipam: Some("kubernetes".into()),
            ..CiliumConfig::default()
        }),
        ..ClusterState::default()
    };
    state.nodes.insert(
        "a".into(),
        NodeFacts {
            internal_ipv4: Some("198.51.100.7".parse().unwrap()),
            node_cidrs: vec![
                "10.0.1.0/24".parse().unwrap(),
                "fd00:1::/64".parse().unwrap(),
            ],
            ..NodeFacts::default()
        },
    );
    let view = podcidr_speaker::sources::model::node_view(
        &state,
        podcidr_speaker::sources::model::IpamOverride::Auto,
    )
    .unwrap();
    plan(
        &view,
        &config,
        &LocalNode::new("a"),
        AnnounceMode::Local,
        &Overrides::default(),
    )
}
