//! `podcidr-speaker check FILE...`: validates config files (raw or ConfigMap) and
//! reports, per file, "ok" with a one-line summary per peer, or every error with its
//! `file:line:column`; exit status 0 when [`CheckReport::ok`], 1 otherwise.
//!
//! Must not: validate anything itself (`config::parse` does), or show a password.

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::config::duration::Compact;
use crate::config::{AddressPool, Config, ConfigErrors, Origin, Peer, PrefixLimitAction, Protocol};

/// The files to check; `-` reads standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRequest {
    pub files: Vec<PathBuf>,
}

/// Checks the files and writes the report to `out`; the exit status.
pub fn run(request: &CheckRequest, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let report = check_files(&request.files);
    if let Err(e) = write!(out, "{report}") {
        let _ = writeln!(err, "podcidr-speaker check: writing the output: {e}");
        return 1;
    }
    u8::from(!report.ok())
}

/// The outcome for every file checked, in order.
#[derive(Debug)]
pub struct CheckReport {
    pub files: Vec<FileReport>,
}

#[derive(Debug)]
pub struct FileReport {
    /// As given on the command line (`-` for standard input).
    pub name: String,
    pub outcome: Outcome,
}

#[derive(Debug)]
pub enum Outcome {
    Ok(Box<Config>),
    /// The file could not be read.
    Unreadable(String),
    Invalid(ConfigErrors),
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.files
            .iter()
            .all(|f| matches!(f.outcome, Outcome::Ok(_)))
    }
}

/// Checks each file; `-` reads standard input.
pub fn check_files<P: AsRef<Path>>(paths: &[P]) -> CheckReport {
    let files = paths
        .iter()
        .map(|p| {
            let p = p.as_ref();
            let name = p.display().to_string();
            let text = if name == "-" {
                let mut s = String::new();
                std::io::stdin().read_to_string(&mut s).map(|_| s)
            } else {
                std::fs::read_to_string(p)
            };
            match text {
                Ok(text) => check_text(&name, &text),
                Err(e) => FileReport {
                    name,
                    outcome: Outcome::Unreadable(e.to_string()),
                },
            }
        })
        .collect();
    CheckReport { files }
}

/// Checks one file's content.
pub fn check_text(name: &str, text: &str) -> FileReport {
    let outcome = match crate::config::parse(text) {
        Ok(config) => Outcome::Ok(Box::new(config)),
        Err(errors) => Outcome::Invalid(errors),
    };
    FileReport {
        name: name.to_string(),
        outcome,
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for file in &self.files {
            write!(f, "{file}")?;
        }
        Ok(())
    }
}

impl fmt::Display for FileReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Outcome::Unreadable(e) => writeln!(f, "{}: cannot read: {e}", self.name),
            Outcome::Invalid(errors) => {
                let n = errors.len();
                writeln!(
                    f,
                    "{}: {n} error{}",
                    self.name,
                    if n == 1 { "" } else { "s" }
                )?;
                for e in errors {
                    match e.location {
                        Some(l) => writeln!(f, "  {}:{l}: {e}", self.name)?,
                        None => writeln!(f, "  {}: {e}", self.name)?,
                    }
                }
                Ok(())
            }
            Outcome::Ok(config) => {
                writeln!(
                    f,
                    "{}: ok: {}, {}",
                    self.name,
                    plural(config.peers.len(), "peer"),
                    plural(config.pools.len(), "address pool")
                )?;
                for p in &config.peers {
                    writeln!(f, "  {}", PeerSummary(p))?;
                }
                for p in &config.pools {
                    writeln!(f, "  {}", PoolSummary(p))?;
                }
                for w in &config.warnings {
                    match w.location {
                        Some(l) => writeln!(f, "  warning: {}:{l}: {w}", self.name)?,
                        None => writeln!(f, "  warning: {}: {w}", self.name)?,
                    }
                }
                Ok(())
            }
        }
    }
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// One line per peer; the password shows only as "md5" (or which Secret holds it).
pub struct PeerSummary<'a>(pub &'a Peer);

impl fmt::Display for PeerSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.0;
        let kind = if p.is_ibgp() { "iBGP" } else { "eBGP" };
        write!(
            f,
            "peers[{}] {} {kind} peer-asn {} my-asn {}, hold {}, keepalive {}",
            p.index,
            p.key(),
            p.peer_asn,
            p.my_asn,
            Compact(p.hold_time),
            Compact(p.keepalive_time)
        )?;
        if let Some(id) = p.router_id {
            write!(f, ", router-id {id}")?;
        }
        if let Some(src) = p.source_address {
            write!(f, ", source {src}")?;
        }
        if p.password.is_some() {
            f.write_str(", md5")?;
        }
        if let Some(r) = &p.password_secret {
            write!(f, ", md5 from {r}")?;
        }
        if p.ebgp_multihop {
            f.write_str(", multihop")?;
        }
        if p.ttl_security {
            f.write_str(", ttl-security")?;
        }
        if let Some(a) = p.next_hop_v4 {
            write!(f, ", next-hop-v4 {a}")?;
        }
        if let Some(a) = p.next_hop_v6 {
            write!(f, ", next-hop-v6 {a}")?;
        }
        if p.passive {
            f.write_str(", passive")?;
        }
        if let Some(b) = &p.bfd_profile {
            write!(f, ", bfd {b}")?;
        }
        if p.graceful_restart {
            write!(f, ", graceful-restart {}", Compact(p.graceful_restart_time))?;
        }
        if p.origin == Origin::Igp {
            f.write_str(", origin igp")?;
        }
        let communities: Vec<String> = p
            .pod_cidr_communities
            .iter()
            .map(ToString::to_string)
            .chain(p.pod_cidr_large_communities.iter().map(|l| {
                format!(
                    "large:{}:{}:{}",
                    l.global_admin, l.local_data1, l.local_data2
                )
            }))
            .collect();
        if !communities.is_empty() {
            write!(f, ", communities {}", communities.join(","))?;
        }
        if let Some(lp) = p.pod_cidr_local_pref {
            write!(f, ", local-pref {lp}")?;
        }
        if let Some(m) = p.max_prefix {
            let action = match m.action {
                PrefixLimitAction::Warn => "warn",
                PrefixLimitAction::Cease => "cease",
            };
            write!(f, ", max-prefix {} {action}", m.limit)?;
        }
        if p.node_selectors.is_empty() {
            f.write_str(", nodes: all")
        } else {
            let sels: Vec<String> = p.node_selectors.iter().map(ToString::to_string).collect();
            write!(f, ", nodes: {}", sels.join(" | "))
        }
    }
}

/// One line per address pool.
pub struct PoolSummary<'a>(pub &'a AddressPool);

impl fmt::Display for PoolSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.0;
        let protocol = match p.protocol {
            Protocol::Bgp => "bgp",
            Protocol::Layer2 => "layer2",
        };
        let cidrs: Vec<String> = p.cidrs.iter().map(ToString::to_string).collect();
        write!(f, "pool {:?} {protocol} {}", p.name, cidrs.join(","))
    }
}
