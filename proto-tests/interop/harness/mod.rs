//! The real-peer test harness: runs BIRD, FRR bgpd, GoBGP and ExaBGP as child processes
//! inside a network namespace of the test's own, writes their configurations, drives
//! them at run time and reads back, as Rust values, what they received.
//!
//! Owns: per-test namespaces ([`netns`]), temp dirs and daemon processes ([`process`]),
//! config generation and output parsing for each implementation ([`bird`], [`frr`],
//! [`gobgp`], [`exabgp`]). It must not dial any address outside the test's namespace,
//! leave a process or a file behind (every daemon and dir has a Drop guard), or depend
//! on the crate under test: a failure seen through the harness must be the speaker's,
//! so the harness is checked against the real daemons talking to each other
//! (`harness_selftest.rs`).
//!
//! Mount it at the root of a test crate as `mod harness;` (from proto-tests/interop/) or
//! `#[path = "../interop/harness/mod.rs"] mod harness;`: the [`isolated!`] macro refers to
//! `$crate::harness`.
//!
//! Environment: `PODCIDR_SKIP_INTEROP=1` skips every isolated test with a printed reason;
//! `PODCIDR_INTEROP_TIMEOUT=<seconds>` overrides the per-test kill timeout;
//! `PODCIDR_KEEP_TMP=1` keeps the temp dirs (configs, logs, rx.jsonl) for inspection.

// Each test crate mounting the harness uses a different part of it.
#![allow(dead_code)]

pub mod bird;
pub mod exabgp;
pub mod frr;
pub mod gobgp;
pub mod netns;
pub mod process;
mod types;

pub use types::*;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `100.64.0.n`: a test address from the shared address space (RFC 6598), assigned to lo
/// inside the test's namespace.
pub fn v4(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(100, 64, 0, n))
}

/// `fd00::n`: a unique local IPv6 test address (RFC 4193), assigned to lo inside the
/// test's namespace.
pub fn v6(n: u8) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, u16::from(n)))
}
