//! What a peer task reports as it runs: the [`PeerObserver`] trait (metrics implement
//! it; every method has a no-op default) and [`NoopObserver`]. The task calls it inline,
//! so an implementation must be cheap and must not block: update counters, never do I/O.
//!
//! Every argument is bounded: a peer key, a state, a family, a message type, a code
//! pair. The one free text, a NOTIFICATION's, is for logs and must not become a label.

use super::PeerError;
use crate::bgp::session::{Finding, State};
use crate::bgp::wire::{AfiSafi, MessageType};
use crate::config::PeerKey;
use std::fmt;
use std::time::Duration;

use super::adj_rib_out::RouteRefusal;

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Sent,
    Received,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Sent => "sent",
            Direction::Received => "received",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Receives a peer task's state changes, counters and errors.
pub trait PeerObserver: Send + Sync {
    /// The session moved from one RFC 4271 section 8.2.2 state to another.
    fn state_changed(&self, _peer: &PeerKey, _from: State, _to: State) {}

    /// One message was written to, or decoded from, the connection.
    fn message(&self, _peer: &PeerKey, _dir: Direction, _kind: MessageType) {}

    /// A NOTIFICATION was sent or received; `text` is the registry's name for the codes
    /// and, for Cease subcodes 2 and 4, the RFC 9003 shutdown communication.
    fn notification(&self, _peer: &PeerKey, _dir: Direction, _code: u8, _subcode: u8, _text: &str) {
    }

    /// A Cease refusing a connection (`subcode` 5, 6 or 7) arrived while we had no
    /// other connection to the peer: a sign of another speaker from our address.
    fn collision_cease(&self, _peer: &PeerKey, _subcode: u8) {}

    /// The second-speaker finding was raised or updated (`Some`), or cleared (`None`).
    fn second_speaker(&self, _peer: &PeerKey, _finding: Option<&Finding>) {}

    /// The peer now holds `count` prefixes of `afi` from us (the Adj-RIB-Out size).
    fn announced(&self, _peer: &PeerKey, _afi: AfiSafi, _count: u64) {}

    /// The peer currently sends us `count` prefixes of `afi`.
    fn received(&self, _peer: &PeerKey, _afi: AfiSafi, _count: u64) {}

    /// Every UPDATE for a change of the desired routes has been written to the socket,
    /// `since_event` after the change reached the task.
    fn update_written(&self, _peer: &PeerKey, _since_event: Duration) {}

    /// `count` desired routes of `afi` were not sent to the peer, for `reason`.
    fn not_announced(&self, _peer: &PeerKey, _afi: AfiSafi, _reason: RouteRefusal, _count: u64) {}

    /// Something failed that the task recovers from by itself (a dial, a socket option,
    /// a read): the session retries with its backoff.
    fn error(&self, _peer: &PeerKey, _error: &PeerError) {}
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopObserver;

impl PeerObserver for NoopObserver {}
