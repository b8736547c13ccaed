//! Reliability and security of the speaker (issue #11): what it does with bad input on
//! the wire, faults and abuse, each checked against a running speaker.
//!
//! The speaker runs in process (`peer::spawn` on a Tokio runtime, through
//! proto-tests/interop/speaker), the other side is the raw test peer (`raw_peer.rs`),
//! which speaks bytes. Each test runs in a network namespace of its own (`isolated!`
//! from the interop harness): the speaker on 100.64.0.1, the raw peer on 100.64.0.2,
//! other addresses for the abuse cases. `PODCIDR_SKIP_INTEROP=1` skips them all.
//!
//! - `malformed`: every class of malformed message of RFC 4271 section 6 and RFC 7606,
//!   with the exact reaction on the wire and the reconnection that follows.
//! - `abuse`: connections from unconfigured addresses, a wrong TCP MD5 key, a flood of
//!   prefixes with and without max-prefix, GTSM, passwords in logs and output.
//! - `faults`: a peer that flaps 1,000 times, a peer that stops reading, a config
//!   replaced by garbage or by a dangerous one, a graceful restart in the middle of the
//!   initial table (BIRD).
//! - `binary`: the built `run` binary: no password in its logs, metrics or status;
//!   SIGTERM in the middle of the initial table with graceful restart (BIRD).
//! - `bfd_wire`: malformed and spoofed BFD packets at the speaker's BFD socket during
//!   an Up session (BIRD): counted by reason, nothing changes.
//! - `load`: 50,000 nodes, 16 peers, a soak under steady churn in cluster mode.
//! - `restart`: the binary restarted ten times against BIRD, FRR and GoBGP at once, with
//!   and without graceful restart; a peer dialing while the speaker waits to retry.
//!
//! RELIABILITY.md at the repository root records the figures these tests print.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

#[path = "../interop/harness/mod.rs"]
mod harness;
// Shared with the interop tests; this crate uses part of it.
#[allow(dead_code)]
#[path = "../interop/speaker/mod.rs"]
mod speaker;

// The built binary as a child process, shared with the e2e tests.
#[allow(dead_code)]
#[path = "../e2e/speaker.rs"]
mod e2e_speaker;
#[allow(dead_code)]
#[path = "../e2e/scrape.rs"]
mod scrape;
// The BFD rig of the e2e tests (node, wire and switch namespaces).
#[path = "../e2e/bfd_rig.rs"]
mod bfd_rig;

/// What proto-tests/e2e/scrape.rs waits at most (the e2e crate's own constant).
pub const WAIT: std::time::Duration = std::time::Duration::from_secs(30);

mod abuse;
mod bfd_wire;
mod binary;
mod faults;
mod fixture;
mod load;
mod malformed;
mod raw_peer;
mod restart;
