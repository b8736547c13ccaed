//! The values that cross the boundary between the state machine and its driver: the
//! states (RFC 4271 section 8.2.2), what the driver feeds in ([`Input`]) and what it must
//! do in return ([`Action`]).

use super::stop::StopReason;
use super::{Negotiated, SessionError};
use crate::bgp::wire::{AfiSafi, Message, Notification, Update};
use std::fmt;

/// The session states of RFC 4271 section 8.2.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    Idle,
    Connect,
    Active,
    OpenSent,
    OpenConfirm,
    Established,
}

impl State {
    /// A lowercase name, bounded, fit for a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Connect => "connect",
            State::Active => "active",
            State::OpenSent => "opensent",
            State::OpenConfirm => "openconfirm",
            State::Established => "established",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happened, as the driver tells the session. Every input carries the time it
/// happened at, given to [`super::Session::handle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// ManualStart/AutomaticStart (RFC 4271 section 8.1.2): leave Idle now, dialing unless
    /// passive. Outside Idle it only allows the automatic restart again (after a
    /// [`Input::Hold`]).
    Start,
    /// No new session until the next [`Input::Start`] (AutomaticStart disallowed): an
    /// Established session carries on, and stays down once it ends; any other attempt
    /// stops at once ([`StopReason::Held`]), and no connection is dialed or adopted
    /// meanwhile. What the daemon does while another BGP speaker may run on this node.
    Hold { message: String },
    /// Stop the session for `reason`: what is sent to the peer depends on it.
    Stop { reason: StopReason },
    /// A TCP connection to the peer is up: ours (`inbound: false`) or the peer's
    /// (`inbound: true`). The session either adopts it or answers
    /// [`Action::RejectConnection`].
    TcpConnected { inbound: bool },
    /// Our outgoing connection attempt failed.
    TcpFailed,
    /// The session's connection was closed or reset.
    TcpClosed,
    /// A message decoded from the session's connection.
    Message(Message),
    /// A NOTIFICATION received on the session's connection that refuses it because the
    /// peer holds a session from our address with another speaker: a collision Cease
    /// the second-speaker rule counts ([`super::WatchInput::is_sign`]). Handled as
    /// `Message(Notification)`, except that the retry comes after at most
    /// [`super::REFUSED_RETRY`] instead of the growing backoff.
    Refusal(Notification),
    /// Bytes from the connection failed to decode fatally (RFC 4271 section 6, RFC 7606
    /// session reset): the session sends this NOTIFICATION and closes.
    DecodeError(Notification),
    /// The deadline of [`super::Session::poll_timeout`] has passed.
    Timeout,
    /// UPDATEs to send, from the driver's Adj-RIB-Out: the table asked for by
    /// [`Action::SendTable`] and, at any time while Established, incremental changes.
    /// Dropped (and counted) outside Established or for a family not negotiated.
    Updates(Vec<Update>),
    /// Every UPDATE of the table [`Action::SendTable`] asked for this family has been
    /// given through [`Input::Updates`].
    TableSent(AfiSafi),
}

/// What the driver must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Dial the peer, dropping any attempt still pending.
    Connect,
    /// Encode this message with [`Negotiated::context`] (the default context before
    /// Established) and write it to the connection.
    Send(Message),
    /// Close the session's connection, or abandon the pending dial. `notify` is true right
    /// after a NOTIFICATION: flush it (for a bounded time) before closing.
    CloseConnection { notify: bool },
    /// Close the connection just offered with [`Input::TcpConnected`]; the session's own
    /// connection, if any, is untouched.
    RejectConnection,
    /// The state changed; the driver logs transitions in this one place.
    StateChange { from: State, to: State },
    /// The session reached Established with these parameters.
    Established(Negotiated),
    /// The session left Established: the peer has dropped our routes (or, after
    /// [`StopReason::Restart`] with graceful restart, keeps them as stale). The driver
    /// clears its Adj-RIB-Out for this peer.
    Down { reason: SessionError },
    /// Send the whole table of this family through [`Input::Updates`], then
    /// [`Input::TableSent`]. `refresh` is false for the initial table after Established
    /// (the session follows it with End-of-RIB) and true for a re-advertisement the peer
    /// asked for with ROUTE-REFRESH (bracketed by BoRR/EoRR when enhanced route refresh is
    /// negotiated).
    SendTable { afi_safi: AfiSafi, refresh: bool },
    /// The peer sent more prefixes of this family than the configured limit; with the Warn
    /// action, reported once each time the count crosses the limit.
    MaxPrefixExceeded {
        afi_safi: AfiSafi,
        count: u64,
        limit: u32,
    },
}
