//! `podcidr-speaker status [--addr HOST:PORT]`: reads a running speaker's `/status` and
//! prints it the way a router prints `show bgp summary`, plus the local node, the IPAM
//! mode, the sources and drift warnings.
//!
//! Exit status: 0 when a config is in force and every configured peer is Established,
//! 1 otherwise, 2 when the speaker cannot be reached or does not answer with a status
//! (so scripts and probes can tell "down" from "unreachable").
//!
//! One job per file: this one is the command (request -> output, exit status);
//! `client.rs` is the one GET of the document; `render.rs` the `show bgp summary`
//! wording (in a [`super::table::Table`], shared with `doctor`). Must not: talk to
//! anything but the address it is given.

mod client;
mod render;

use std::io::{self, Write};

use crate::metrics::board::Status;

pub use client::{fetch, fetch_path, StatusError, DEFAULT_TIMEOUT, MAX_RESPONSE};
pub use render::{duration, Advertised, Summary};

/// Where the daemon serves its endpoint by default (`run --metrics-addr`).
pub const DEFAULT_ADDR: &str = "127.0.0.1:9477";

/// Exit status when every peer is Established and a config is in force.
pub const EXIT_OK: u8 = 0;
/// Exit status when a peer is not Established or no config is in force.
pub const EXIT_NOT_ESTABLISHED: u8 = 1;
/// Exit status when the speaker cannot be reached or answers something else.
pub const EXIT_UNREACHABLE: u8 = 2;

/// Which speaker to ask, and how to show its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusRequest {
    /// `--addr HOST:PORT`.
    pub addr: String,
    /// `--json`: the document as it is, instead of the tables.
    pub json: bool,
    /// `--routes [--limit N]`: each peer's Adj-RIB-Out too, at most N routes per peer.
    pub routes: Option<usize>,
}

/// The `status` command: fetch, print (tables or JSON) and return the exit status.
/// With `routes`, each peer's Adj-RIB-Out too, that many routes listed per peer.
pub fn run(request: &StatusRequest, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let json = request.json;
    let path = match request.routes {
        Some(limit) => format!("/status?routes={limit}"),
        None => "/status".to_owned(),
    };
    let status = match fetch_path(&request.addr, &path, DEFAULT_TIMEOUT) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(err, "podcidr-speaker status: {e}");
            return EXIT_UNREACHABLE;
        }
    };
    let written = if json {
        serde_json::to_string_pretty(&status)
            .map_err(io::Error::other)
            .and_then(|text| writeln!(out, "{text}"))
    } else {
        write!(out, "{}", Summary(&status))
    };
    if let Err(e) = written {
        let _ = writeln!(err, "podcidr-speaker status: writing the output: {e}");
        return EXIT_UNREACHABLE;
    }
    exit_code(&status)
}

/// The exit status for a status document (see the module documentation).
pub fn exit_code(status: &Status) -> u8 {
    if status.config.loaded && status.peers.iter().all(|p| p.up) {
        EXIT_OK
    } else {
        EXIT_NOT_ESTABLISHED
    }
}
