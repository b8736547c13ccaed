//! The old speakers the migration guides move away from, on the wire: MetalLB <= 0.12's
//! speaker and the speaker embedded in Cilium 1.10-1.16's agent (a fork of the same
//! MetalLB code, `internal/bgp/native` in MetalLB v0.12.1). Neither can be installed
//! here, so ExaBGP stands in for them, configured to send what that code sends:
//!
//! - OPEN: hold time 90 s (MetalLB's default `hold-time`), router id the node's
//!   address, capabilities multiprotocol IPv4 and IPv6 unicast and 4-octet AS only: no
//!   graceful restart, no route refresh, no extended messages;
//! - one UPDATE per prefix (`group-updates false`), ORIGIN incomplete, AS_PATH empty
//!   over iBGP and the node's AS over eBGP, NEXT_HOP the session's local address (the
//!   node's), LOCAL_PREF over iBGP only and 0 when the advertisement sets none, the
//!   advertisement's communities; no End-of-RIB (`manual-eor`);
//! - it only dials, never listens (`exabgp.tcp.bind` empty);
//! - a stop (SIGTERM to the speaker, or the Cilium agent restarting) is the process
//!   exiting: the kernel closes the TCP connection, no NOTIFICATION is sent. Here that
//!   is [`Legacy::stop`], a SIGKILL, which closes the connection the same way.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;

use ipnet::IpNet;

use crate::harness::process::{fresh_subdir, run_ok, write_file, Process, COMMAND_TIMEOUT};

/// One route the old speaker announces, as MetalLB's `bgp.Advertisement`.
#[derive(Debug, Clone)]
pub struct Advertisement {
    pub prefix: IpNet,
    /// `localpref` of the pool's bgp-advertisement; `None` is sent as 0 over iBGP.
    pub local_pref: Option<u32>,
    pub communities: Vec<(u16, u16)>,
}

impl Advertisement {
    pub fn new(prefix: IpNet) -> Self {
        Self {
            prefix,
            local_pref: None,
            communities: Vec::new(),
        }
    }

    pub fn local_pref(mut self, local_pref: u32) -> Self {
        self.local_pref = Some(local_pref);
        self
    }
}

/// A switch the old speaker peers with.
#[derive(Debug, Clone, Copy)]
pub struct LegacyPeer {
    pub address: IpAddr,
    pub peer_asn: u32,
    pub my_asn: u32,
}

/// A running stand-in for one node's old speaker.
pub struct Legacy {
    name: String,
    process: Process,
}

impl Legacy {
    /// Starts the stand-in of `node`'s old speaker at `node_ip`, announcing `routes` to
    /// every peer in `peers`.
    pub fn start(
        dir: &Path,
        node: &str,
        node_ip: IpAddr,
        peers: &[LegacyPeer],
        routes: &[Advertisement],
    ) -> Legacy {
        let dir = fresh_subdir(dir, &format!("legacy-{node}")).expect("legacy dir");
        let conf = dir.join("exabgp.conf");
        write_file(&conf, &render(node_ip, peers, routes)).expect("write exabgp.conf");
        let user = run_ok(Command::new("id").arg("-un"), COMMAND_TIMEOUT).expect("id -un");
        let mut cmd = Command::new("exabgp");
        cmd.env("exabgp.tcp.bind", "")
            .env("exabgp.tcp.port", "179")
            .env("exabgp.api.cli", "false")
            .env("exabgp.daemon.user", user.trim())
            .env("exabgp.log.level", "WARNING")
            .arg(&conf);
        let process = Process::spawn(&format!("legacy-{node}"), cmd, &dir.join("exabgp.log"))
            .unwrap_or_else(|e| panic!("start the old speaker of {node}: {e}"));
        Legacy {
            name: node.into(),
            process,
        }
    }

    /// The old speaker goes away as MetalLB's and Cilium's did: the process exits and
    /// the kernel closes its connections, without a NOTIFICATION.
    pub fn stop(&mut self) {
        self.process
            .kill()
            .unwrap_or_else(|e| panic!("stop the old speaker of {}: {e}", self.name));
    }
}

/// The ExaBGP config: one neighbor block per peer.
fn render(node_ip: IpAddr, peers: &[LegacyPeer], routes: &[Advertisement]) -> String {
    let mut c = String::new();
    for p in peers {
        let ibgp = p.peer_asn == p.my_asn;
        let _ = writeln!(
            c,
            "neighbor {peer} {{
  router-id {node_ip};
  local-address {node_ip};
  local-as {my};
  peer-as {peer_as};
  hold-time 90;
  passive false;
  group-updates false;
  manual-eor true;
  capability {{ asn4 enable; route-refresh disable; extended-message disable; add-path disable; }}
  family {{ ipv4 unicast; ipv6 unicast; }}",
            peer = p.address,
            my = p.my_asn,
            peer_as = p.peer_asn,
        );
        if !routes.is_empty() {
            c.push_str("  static {\n");
            for r in routes {
                let _ = write!(c, "    route {} next-hop self origin incomplete", r.prefix);
                if ibgp {
                    let _ = write!(c, " local-preference {}", r.local_pref.unwrap_or(0));
                }
                if !r.communities.is_empty() {
                    let cs: Vec<String> = r
                        .communities
                        .iter()
                        .map(|(a, b)| format!("{a}:{b}"))
                        .collect();
                    let _ = write!(c, " community [ {} ]", cs.join(" "));
                }
                c.push_str(";\n");
            }
            c.push_str("  }\n");
        }
        c.push_str("}\n");
    }
    c
}
