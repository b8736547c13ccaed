//! The validated configuration: what the route planner and the peer drivers use.
//!
//! Every value here has been checked (ranges, references, overlaps), defaults are
//! filled in and the speaker-wide defaults of the `speaker` block are folded into each
//! [`Peer`], so a consumer never looks at the file's shape again.
//!
//! Owns: the types and the node-selection and identity rules of peers. Must not:
//! parse text (that is `raw`/`validate`) or do I/O.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use ipnet::IpNet;

use super::selector::{any_matches, LabelSelector};
pub use crate::bgp::wire::{LargeCommunity, Origin};

/// The well-known port of BGP (RFC 4271 section 8.2.1).
pub const BGP_PORT: u16 = 179;
/// MetalLB's default hold time.
pub const DEFAULT_HOLD_TIME: Duration = Duration::from_secs(90);
/// Graceful Restart (RFC 4724) is on unless `graceful-restart: false` says otherwise: a
/// DaemonSet restarts on every upgrade and rollout, and without it every peer withdraws
/// the node's pod CIDRs at every restart (RELIABILITY.md). The cost is that a dead
/// node's routes stay at a GR-capable peer for `graceful-restart-time`; a pod CIDR has no
/// other path anyway. Not a MetalLB field, so no MetalLB file changes meaning.
pub const DEFAULT_GRACEFUL_RESTART: bool = true;
/// RFC 4724 section 4.2 leaves the value to the operator; 120s is the common default
/// (FRR, BIRD, GoBGP).
pub const DEFAULT_GRACEFUL_RESTART_TIME: Duration = Duration::from_secs(120);
/// RFC 4271 section 10 suggests 120s for the ConnectRetryTimer.
pub const DEFAULT_CONNECT_RETRY_TIME: Duration = Duration::from_secs(120);

/// A whole validated config file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// In file order; `Peer::index` is the position.
    pub peers: Vec<Peer>,
    /// In file order.
    pub pools: Vec<AddressPool>,
    /// `bgp-communities`: name -> value. Already resolved wherever a name was used.
    pub communities: BTreeMap<String, CommunityValue>,
    /// `bfd-profiles` by name.
    pub bfd_profiles: BTreeMap<String, BfdProfile>,
    /// The speaker-wide defaults as written (already applied to every peer).
    pub speaker: SpeakerOptions,
    /// What the file has that MetalLB 0.12 refused but Cilium's fork of it accepted
    /// (equal `bgp-advertisements`, a community repeated in one advertisement): taken,
    /// with the same meaning, and said here so that `check` and the logs show it.
    pub warnings: Vec<super::ConfigError>,
}

/// Identity of a BGP session as seen from one node: the remote transport endpoint.
///
/// A node can hold only one session to a given address and port (the router would
/// resolve two as a collision, RFC 4271 section 6.8), so this is what a session is
/// keyed by across reloads. What a change of anything else does to the session is
/// decided by `peer::session_change` on the session's specs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerKey {
    pub address: IpAddr,
    pub port: u16,
}

impl fmt::Display for PeerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", SocketAddr::new(self.address, self.port))
    }
}

/// One `peers` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Position in the file's `peers` list, for messages (`peers[2]`).
    pub index: usize,
    /// `peer-address`. IPv4-mapped IPv6 addresses are stored as IPv4.
    pub address: IpAddr,
    /// `peer-port`, 179 when absent or 0 (as MetalLB).
    pub port: u16,
    /// `peer-asn` (RFC 6793 4-octet AS number; 0 is refused).
    pub peer_asn: u32,
    /// `my-asn`.
    pub my_asn: u32,
    /// `hold-time` in whole seconds (MetalLB truncated): 0, or 3s..65535s
    /// (RFC 4271 section 4.2). Default 90s.
    pub hold_time: Duration,
    /// `keepalive-time` in whole seconds; default one third of the hold time. The
    /// session uses the smaller of this and a third of the negotiated hold time.
    pub keepalive_time: Duration,
    /// `router-id`: the BGP Identifier to send (RFC 4271 section 4.2, RFC 6286). None:
    /// the driver uses the node's IPv4 address.
    pub router_id: Option<Ipv4Addr>,
    /// `source-address` to bind before connecting; same family as `address`.
    pub source_address: Option<IpAddr>,
    /// `password`: the TCP MD5 signature key (RFC 2385).
    pub password: Option<Secret>,
    /// `password-secret`: the TCP MD5 key is a key of a Kubernetes Secret (standalone:
    /// a file of `--secrets-dir`), resolved at run time. Never set with `password`.
    pub password_secret: Option<SecretKeyRef>,
    /// `ebgp-multihop`: the peer is not directly connected (TTL 255 instead of 1).
    pub ebgp_multihop: bool,
    /// `bfd-profile`: the name of a profile in `Config::bfd_profiles`.
    pub bfd_profile: Option<String>,
    /// That profile, resolved: the BFD session (RFC 5880) run beside this peer's BGP
    /// session, whose Down tears the BGP session down (RFC 5882).
    pub bfd: Option<BfdProfile>,
    /// `node-selectors`, ORed; empty selects every node.
    pub node_selectors: Vec<LabelSelector>,
    /// `graceful-restart`: advertise the Graceful Restart capability (RFC 4724).
    pub graceful_restart: bool,
    /// `graceful-restart-time`: the Restart Time advertised, 1s..4095s.
    pub graceful_restart_time: Duration,
    /// `connect-retry-time`: ConnectRetryTimer (RFC 4271 section 10), the cap of the
    /// retry backoff (which starts at about a second) and the longest a dial may take;
    /// a refusal because another speaker holds the session from our address waits at
    /// most `bgp::session::REFUSED_RETRY`, or this if shorter.
    pub connect_retry_time: Duration,
    /// `origin` of the pod CIDR routes (RFC 4271 section 5.1.1): IGP or INCOMPLETE.
    pub origin: Origin,
    /// `pod-cidr-communities`: standard communities (RFC 1997) on pod CIDR routes.
    pub pod_cidr_communities: Vec<Community>,
    /// The `large:` entries of `pod-cidr-communities` (RFC 8092).
    pub pod_cidr_large_communities: Vec<LargeCommunity>,
    /// `pod-cidr-local-pref`: LOCAL_PREF on pod CIDR routes; iBGP only (RFC 4271
    /// section 5.1.5).
    pub pod_cidr_local_pref: Option<u32>,
    /// `max-prefix`: what to do when the peer sends more prefixes than this.
    pub max_prefix: Option<PrefixLimit>,
    /// `passive`: never connect, only accept the peer's connection.
    pub passive: bool,
    /// `ttl-security`: GTSM (RFC 5082): send with TTL 255, accept only TTL 255.
    pub ttl_security: bool,
    /// `next-hop-v4` / `next-hop-v6`: the next hop of this peer's pod CIDR routes of that
    /// family, instead of the one `routes::next_hop` derives (for a fabric where the
    /// node's address of that family is not the one to route to, or where the node has
    /// none, e.g. IPv6 routes over an IPv4 session).
    pub next_hop_v4: Option<Ipv4Addr>,
    pub next_hop_v6: Option<Ipv6Addr>,
    /// `pod-cidr-pools` (multi-pool IPAM): `None` announces every pool; `Some` only the
    /// pools listed, each with its own extra communities.
    pub pod_cidr_pools: Option<PodCidrPools>,
}

/// `pod-cidr-pools`: by CiliumPodIPPool name, what that pool's routes carry besides
/// the peer's `pod-cidr-communities`.
pub type PodCidrPools = BTreeMap<String, PoolRouteOptions>;

/// One `pod-cidr-pools` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PoolRouteOptions {
    /// `communities`: standard communities (RFC 1997), sorted, deduplicated.
    pub communities: Vec<Community>,
    /// The `large:` entries of `communities` (RFC 8092), sorted, deduplicated.
    pub large_communities: Vec<LargeCommunity>,
}

impl Peer {
    pub fn key(&self) -> PeerKey {
        PeerKey {
            address: self.address,
            port: self.port,
        }
    }

    /// iBGP when both ends are in the same AS (RFC 4271 section 1.1).
    pub fn is_ibgp(&self) -> bool {
        self.peer_asn == self.my_asn
    }

    /// Whether the node with these labels peers with this router.
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        any_matches(&self.node_selectors, labels)
    }
}

/// The peers one node uses, by key. When two `peers` entries with the same address and
/// port both select the node, the first in the file is used and the clash is reported.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodePeers<'a> {
    pub peers: BTreeMap<PeerKey, &'a Peer>,
    pub conflicts: Vec<PeerConflict>,
}

/// Two or more `peers` entries that would open the same session from one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConflict {
    pub key: PeerKey,
    /// `peers` indexes, the one in use first.
    pub indexes: Vec<usize>,
}

impl fmt::Display for PeerConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self.indexes.iter().map(|i| format!("peers[{i}]")).collect();
        write!(
            f,
            "{} all select this node for {}; using {}",
            list.join(", "),
            self.key,
            list[0]
        )
    }
}

impl Config {
    /// Whether two configs mean the same: everything but the warnings, whose positions
    /// move when, say, a comment is added above them.
    pub fn same_meaning(&self, other: &Config) -> bool {
        let Config {
            peers,
            pools,
            communities,
            bfd_profiles,
            speaker,
            warnings: _,
        } = self;
        *peers == other.peers
            && *pools == other.pools
            && *communities == other.communities
            && *bfd_profiles == other.bfd_profiles
            && *speaker == other.speaker
    }

    /// The peers selected for a node with these labels.
    pub fn peers_for_node(&self, labels: &BTreeMap<String, String>) -> NodePeers<'_> {
        let mut out = NodePeers::default();
        let mut clashes: BTreeMap<PeerKey, Vec<usize>> = BTreeMap::new();
        for p in self.peers.iter().filter(|p| p.selects(labels)) {
            match out.peers.get(&p.key()) {
                Some(first) => clashes
                    .entry(p.key())
                    .or_insert_with(|| vec![first.index])
                    .push(p.index),
                None => {
                    out.peers.insert(p.key(), p);
                }
            }
        }
        out.conflicts = clashes
            .into_iter()
            .map(|(key, indexes)| PeerConflict { key, indexes })
            .collect();
        out
    }
}

/// A password that never prints: Debug and Display show `<redacted>`, so it cannot
/// leak into logs, status or plan output.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The key itself, for the socket option only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl Secret {
    /// The TCP MD5 key (RFC 2385) held in a Secret or a file: one trailing line break
    /// (what `echo` and editors leave) is not part of it; the rest must be 1 to
    /// [`MD5_KEY_MAX`] bytes without a line break. The error never shows the value.
    pub fn md5_key(text: &str) -> Result<Secret, Md5KeyProblem> {
        let key = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
            .unwrap_or(text);
        Md5KeyProblem::of(key).map_or_else(|| Ok(Secret::new(key)), Err)
    }
}

/// Linux's TCP_MD5SIG_MAXKEYLEN; RFC 2385 sets no bound.
pub const MD5_KEY_MAX: usize = 80;

/// Why a text is not a usable TCP MD5 key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Md5KeyProblem {
    #[error("is empty")]
    Empty,
    #[error("must not contain a line break")]
    LineBreak,
    #[error("is longer than {MD5_KEY_MAX} bytes, the TCP MD5 key limit")]
    TooLong,
}

impl Md5KeyProblem {
    /// The problem of `key` as it stands (no line break is stripped).
    pub fn of(key: &str) -> Option<Md5KeyProblem> {
        if key.is_empty() {
            Some(Md5KeyProblem::Empty)
        } else if key.contains(['\n', '\r']) {
            Some(Md5KeyProblem::LineBreak)
        } else if key.len() > MD5_KEY_MAX {
            Some(Md5KeyProblem::TooLong)
        } else {
            None
        }
    }
}

/// `password-secret`: a key of a Secret in the bgp-config's namespace. Shown (in
/// `plan`, `check`, errors) by name and key, never with the value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecretKeyRef {
    /// The Secret's `metadata.name`.
    pub name: String,
    /// The key in its `data`.
    pub key: String,
}

impl fmt::Display for SecretKeyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "secret {} key {}", self.name, self.key)
    }
}

impl Config {
    /// The names of the Secrets `password-secret` refers to, each once.
    pub fn secret_names(&self) -> std::collections::BTreeSet<String> {
        self.peers
            .iter()
            .filter_map(|p| p.password_secret.as_ref().map(|r| r.name.clone()))
            .collect()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A standard community (RFC 1997): two 16-bit halves, written `a:b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Community(pub u32);

impl Community {
    /// IANA "BGP Well-known Communities".
    pub const NO_EXPORT: Community = Community(0xFFFF_FF01);
    pub const NO_ADVERTISE: Community = Community(0xFFFF_FF02);
    pub const NO_EXPORT_SUBCONFED: Community = Community(0xFFFF_FF03);
    pub const NO_PEER: Community = Community(0xFFFF_FF04);
    pub const BLACKHOLE: Community = Community(0xFFFF_029A);
    /// RFC 8326 section 5: the route is about to be withdrawn; receivers lower its
    /// preference (LOCAL_PREF 0) so that traffic moves to other paths first.
    pub const GRACEFUL_SHUTDOWN: Community = Community(0xFFFF_0000);

    pub fn new(high: u16, low: u16) -> Community {
        Community((u32::from(high) << 16) | u32::from(low))
    }
}

impl fmt::Display for Community {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.0 >> 16, self.0 & 0xFFFF)
    }
}

/// A community as `bgp-communities` and the communities lists accept it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CommunityValue {
    Standard(Community),
    Large(LargeCommunity),
}

impl fmt::Display for CommunityValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommunityValue::Standard(c) => write!(f, "{c}"),
            CommunityValue::Large(l) => {
                write!(
                    f,
                    "large:{}:{}:{}",
                    l.global_admin, l.local_data1, l.local_data2
                )
            }
        }
    }
}

/// `max-prefix`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixLimit {
    /// More than this many prefixes received triggers the action.
    pub limit: u32,
    pub action: PrefixLimitAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixLimitAction {
    /// Log and count, keep the session.
    Warn,
    /// Close the session with a NOTIFICATION Cease / Maximum Number of Prefixes
    /// Reached (RFC 4486 subcode 1).
    Cease,
}

/// `bfd-profiles` entry, with MetalLB's ranges. Unset values take MetalLB's and FRR's
/// defaults ([`BfdProfile::DEFAULT_INTERVAL_MS`] and the others below), filled in by
/// [`BfdProfile::session_config`] and [`BfdProfile::minimum_ttl_in_force`], the one
/// place a profile becomes what a BFD session runs with. `echo-mode` and `echo-interval`
/// are not run (the Echo function is not implemented; validation warns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfdProfile {
    pub name: String,
    /// Milliseconds, 10..60000.
    pub receive_interval: Option<u32>,
    /// Milliseconds, 10..60000.
    pub transmit_interval: Option<u32>,
    /// 2..255.
    pub detect_multiplier: Option<u32>,
    /// Milliseconds, 10..60000.
    pub echo_interval: Option<u32>,
    pub echo_mode: bool,
    pub passive_mode: bool,
    /// 1..254.
    pub minimum_ttl: Option<u32>,
}

impl BfdProfile {
    /// `receive-interval` and `transmit-interval` when unset (MetalLB, FRR bfdd).
    pub const DEFAULT_INTERVAL_MS: u32 = 300;
    /// `detect-multiplier` when unset.
    pub const DEFAULT_DETECT_MULTIPLIER: u32 = 3;
    /// `minimum-ttl` when unset: one hop between the two systems (MetalLB, FRR).
    pub const DEFAULT_MINIMUM_TTL: u32 = 254;

    /// What a BFD session runs with: `transmit-interval` as the Desired Min TX Interval,
    /// `receive-interval` as the Required Min RX Interval, `detect-multiplier` and
    /// `passive-mode` (RFC 5880 section 6.8.1), unset ones at their defaults.
    pub fn session_config(&self) -> crate::bfd::SessionConfig {
        let ms = |v: Option<u32>| {
            Duration::from_millis(u64::from(v.unwrap_or(Self::DEFAULT_INTERVAL_MS)))
        };
        let mult = self
            .detect_multiplier
            .unwrap_or(Self::DEFAULT_DETECT_MULTIPLIER);
        crate::bfd::SessionConfig {
            desired_min_tx: ms(self.transmit_interval),
            required_min_rx: ms(self.receive_interval),
            // Validation keeps it within 2..=255.
            detect_mult: u8::try_from(mult).unwrap_or(u8::MAX),
            passive: self.passive_mode,
        }
    }

    /// `minimum-ttl` or its default: the least TTL (hop limit) a packet of a multihop
    /// session (RFC 5883, `ebgp-multihop` peers) may arrive with. Single-hop sessions
    /// require 255 whatever this says (RFC 5881 section 5).
    pub fn minimum_ttl_in_force(&self) -> u8 {
        let ttl = self.minimum_ttl.unwrap_or(Self::DEFAULT_MINIMUM_TTL);
        // Validation keeps it within 1..=254.
        u8::try_from(ttl).unwrap_or(u8::MAX)
    }
}

/// `address-pools` `protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Bgp,
    Layer2,
}

/// An `address-pools` entry (LoadBalancer addresses in MetalLB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressPool {
    pub name: String,
    pub protocol: Protocol,
    /// The `addresses` as CIDRs: ranges summarised into the fewest prefixes, host bits
    /// cleared. Non-overlapping within and across pools.
    pub cidrs: Vec<IpNet>,
    pub avoid_buggy_ips: bool,
    /// Default true.
    pub auto_assign: bool,
    /// For a bgp pool without `bgp-advertisements`, MetalLB's single default
    /// advertisement (/32, /128, no attributes); empty for a layer2 pool.
    pub bgp_advertisements: Vec<BgpAdvertisement>,
}

/// A `bgp-advertisements` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BgpAdvertisement {
    /// 0..32, default 32; not shorter than any IPv4 prefix of the pool.
    pub aggregation_length: u8,
    /// 0..128, default 128; not shorter than any IPv6 prefix of the pool.
    pub aggregation_length_v6: u8,
    /// LOCAL_PREF, sent to iBGP peers only.
    pub local_pref: Option<u32>,
    pub communities: Vec<Community>,
    pub large_communities: Vec<LargeCommunity>,
}

impl Default for BgpAdvertisement {
    fn default() -> Self {
        BgpAdvertisement {
            aggregation_length: 32,
            aggregation_length_v6: 128,
            local_pref: None,
            communities: Vec::new(),
            large_communities: Vec::new(),
        }
    }
}

/// The top-level `speaker` block: defaults for every peer's speaker extensions. A key
/// set on a peer replaces the default (lists are replaced, not merged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeakerOptions {
    pub graceful_restart: bool,
    pub graceful_restart_time: Duration,
    pub connect_retry_time: Duration,
    pub origin: Origin,
    pub pod_cidr_communities: Vec<Community>,
    pub pod_cidr_large_communities: Vec<LargeCommunity>,
    /// Applied to iBGP peers only.
    pub pod_cidr_local_pref: Option<u32>,
    pub max_prefix: Option<PrefixLimit>,
    pub passive: bool,
    /// Applied to peers without `ebgp-multihop` only.
    pub ttl_security: bool,
    pub pod_cidr_pools: Option<PodCidrPools>,
    /// `announce-pod-cidrs`: whether this node's pod CIDRs are announced at all. The
    /// speaker's own switch: Cilium's `bgp-announce-pod-cidr` starts Cilium's embedded
    /// speaker and no longer switches this one (issue 29).
    pub announce_pod_cidrs: bool,
    /// `announce-lb-ips`: whether LoadBalancer IPs of the bgp pools are announced, under
    /// `--announce-lb-ips auto` (`on` and `off` decide alone).
    pub announce_lb_ips: bool,
}

impl Default for SpeakerOptions {
    fn default() -> Self {
        SpeakerOptions {
            graceful_restart: DEFAULT_GRACEFUL_RESTART,
            graceful_restart_time: DEFAULT_GRACEFUL_RESTART_TIME,
            connect_retry_time: DEFAULT_CONNECT_RETRY_TIME,
            // What MetalLB's and Cilium's speakers sent for the routes they originated.
            origin: Origin::Incomplete,
            pod_cidr_communities: Vec::new(),
            pod_cidr_large_communities: Vec::new(),
            pod_cidr_local_pref: None,
            max_prefix: None,
            passive: false,
            ttl_security: false,
            pod_cidr_pools: None,
            // What a user who has just turned Cilium's embedded BGP off wants: both
            // route classes announced, by this speaker instead.
            announce_pod_cidrs: true,
            announce_lb_ips: true,
        }
    }
}
