//! End-to-end tests of the built `podcidr-speaker` binary.
//!
//! - [`cli`]: `run --dry-run` and `--version`, no network at all.
//! - [`local`]: `--announce local`, one speaker process per node.
//! - [`listen`]: `--listen-addr` with a passive peer, and JSON logs.
//! - [`cluster`]: `--announce cluster`, one speaker for every node.
//! - [`observe`]: the speaker's endpoint and the `status` command through a session's life.
//! - [`reload`]: bgp-config edits under a running speaker.
//! - [`restart`]: SIGTERM with graceful restart, and a new process taking over.
//! - [`multipool`]: multi-pool IPAM, a node gaining and releasing pool CIDRs.
//! - [`lb`]: LoadBalancer Service IPs from three speakers, ECMP path sets at the switches.
//! - [`secrets`]: TCP MD5 keys from `--secrets-dir`, rotated under FRR and BIRD.
//! - [`migrate`]: the migration guides' steps, from MetalLB's and Cilium's old speakers
//!   (stood in for by [`legacy`]), with the gap at each switch measured.
//! - [`conflict`]: cilium-config turning Cilium's embedded BGP speaker on: new sessions
//!   held, Established ones kept.
//! - [`bfd`]: BFD with BIRD and FRR's bfdd over a veth that is cut: detection times.
//! - [`alloc`]: `podcidr-speaker allocate` against the API emulation writes a new
//!   Service's address, two speakers announce it to BIRD; deleted: released, withdrawn.
//!
//! The tests with real peers run each in a network namespace of its own through the
//! interop harness (`isolated!`: the test re-executes itself under `unshare -rn`), BIRD
//! and FRR as the top-of-rack switches, every speaker a child process of the test with
//! its own `--source-address` on lo, all following one standalone cluster state that
//! the test edits. `PODCIDR_SKIP_INTEROP=1` skips them.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

#[path = "../interop/harness/mod.rs"]
mod harness;

#[path = "../common/apiserver.rs"]
mod apiserver;

mod alloc;
mod bfd;
mod bfd_rig;
mod cli;
mod cluster;
mod conflict;
mod fixture;
mod lb;
mod legacy;
mod lifecycle;
mod listen;
mod local;
mod migrate;
mod multipool;
mod observe;
mod reload;
mod restart;
mod scrape;
mod secrets;
mod speaker;
mod tor;

// The name the shared BFD rig (bfd_rig.rs, also in the reliability crate) uses.
use speaker as e2e_speaker;

use std::net::IpAddr;
use std::time::Duration;

use harness::{Afi, BgpDaemon, Route};

/// How long any one convergence may take: sessions come up in 1-5 s here, a file edit
/// is seen within about half a second.
pub const WAIT: Duration = Duration::from_secs(30);

/// After a change has converged: long enough for every speaker to have seen the edit
/// (the file source polls every 250 ms and loads a file once it is stable), so that a
/// route that would flap has flapped by the time the counters are read.
pub fn settle() {
    std::thread::sleep(Duration::from_secs(2));
}

/// Waits until `tor` holds exactly `want[n]` (any order) from each neighbor `n`.
pub fn wait_exact(
    tor: &dyn BgpDaemon,
    want: &std::collections::BTreeMap<IpAddr, Vec<Route>>,
    what: &str,
) {
    for (neighbor, routes) in want {
        let mut want = routes.clone();
        want.sort_by_key(|r| r.prefix);
        tor.wait_routes(*neighbor, Afi::Ipv4, WAIT, &|got| {
            let mut got = got.to_vec();
            got.sort_by_key(|r| r.prefix);
            got == want
        })
        .unwrap_or_else(|e| {
            panic!(
                "{what}: {} never held exactly {want:?} from {neighbor}: {e}",
                tor.kind()
            )
        });
    }
}
