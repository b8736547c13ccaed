//! The TCP side of a session, as data: the remote and source addresses, the MD5 key,
//! the TTL policy and the dial's bound. [`super::spec`] decides these values for a peer
//! (`PeerSpec::from_config`); [`super::socket`] applies them to a socket. Kept apart
//! from both so that the socket layer does not import the spec (which imports the BFD
//! task, which imports the socket layer: a cycle).
//!
//! Pure data: no socket, no clock, no decision.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::config::Secret;

/// The TTL a directly connected eBGP session sends with (RFC 4271 leaves it to the
/// implementation; 1 keeps the session on the link, as every router does by default).
pub const DIRECT_TTL: u32 = 1;
/// The TTL of multihop, iBGP and GTSM sessions (RFC 5082 section 3: GTSM sends 255).
pub const MAX_TTL: u32 = 255;

/// The TTL policy of a session's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlPolicy {
    /// Directly connected eBGP: send with TTL 1.
    Direct,
    /// Multihop eBGP or iBGP: send with TTL 255, accept anything.
    Multihop,
    /// GTSM (RFC 5082) for a directly connected peer: send with TTL 255 and accept only
    /// packets that arrive with 255 (IP_MINTTL / IPV6_MINHOPCOUNT).
    Gtsm,
}

impl TtlPolicy {
    /// The TTL (hop limit) to send with.
    pub fn ttl(self) -> u32 {
        match self {
            TtlPolicy::Direct => DIRECT_TTL,
            TtlPolicy::Multihop | TtlPolicy::Gtsm => MAX_TTL,
        }
    }

    /// The lowest TTL accepted, when the kernel must filter.
    pub fn min_ttl(self) -> Option<u32> {
        match self {
            TtlPolicy::Gtsm => Some(MAX_TTL),
            TtlPolicy::Direct | TtlPolicy::Multihop => None,
        }
    }
}

/// The TCP side of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transport {
    pub remote: SocketAddr,
    /// Bound (port 0) before connecting; `None` lets the kernel choose.
    pub source: Option<IpAddr>,
    /// TCP MD5 signature key (RFC 2385), at most 80 octets.
    pub md5_key: Option<Secret>,
    pub ttl: TtlPolicy,
    pub connect_timeout: Duration,
}
