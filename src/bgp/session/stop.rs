//! Why the driver stops a session ([`StopReason`]): an [`super::Input`] the driver feeds
//! in, and the reason a stopped session's [`super::SessionError::Stopped`] carries. Its
//! own file because both the events and the error name it (in either, the two would
//! import each other).
//!
//! Must not: decide what a stop sends (the state machine does, in `fsm.rs`).

use std::fmt;

/// Why the driver stops a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// An operator shut the session down: NOTIFICATION Cease/Administrative Shutdown
    /// with this RFC 9003 message. No automatic restart.
    AdminShutdown(String),
    /// An operator asked for a reset: Cease/Administrative Reset with this RFC 9003
    /// message, then an automatic restart.
    AdminReset(String),
    /// The peer was removed from the configuration: Cease/Peer De-configured. No
    /// automatic restart.
    PeerDeconfigured,
    /// This speaker is restarting or going away. With graceful restart in force (the
    /// session Established and the capability negotiated) the connection is closed
    /// without a NOTIFICATION so that the peer keeps our routes as stale for the restart
    /// time (RFC 4724 section 4); otherwise Cease/Administrative Shutdown with this RFC
    /// 9003 message. No automatic restart. The session decides, not its caller: only the
    /// session knows, at the moment it stops, whether graceful restart is in force.
    Restart(String),
    /// This connection lost a collision (RFC 4271 section 6.8): Cease/Connection
    /// Collision Resolution. No automatic restart: the other connection carries on.
    CollisionResolution,
    /// The peer restarted (a new connection arrived while this one was Established and the
    /// peer had advertised graceful restart, RFC 4724 section 4.2): close this connection
    /// without a NOTIFICATION. No automatic restart.
    PeerRestarted,
    /// This speaker holds new sessions back ([`super::Input::Hold`]) and this one was not
    /// Established yet: Cease/Administrative Shutdown with this RFC 9003 message on a
    /// connection that has sent its OPEN (none before). No automatic restart until the
    /// next Start.
    Held(String),
    /// The BFD session protecting this one failed (RFC 5882 section 3.2): Cease/BFD
    /// Down (RFC 9384), then an automatic restart under the normal retry.
    BfdDown,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::AdminShutdown(m) => write!(f, "administrative shutdown {m:?}"),
            StopReason::AdminReset(m) => write!(f, "administrative reset {m:?}"),
            StopReason::PeerDeconfigured => f.write_str("peer de-configured"),
            StopReason::Restart(_) => f.write_str("speaker restart"),
            StopReason::CollisionResolution => f.write_str("connection collision resolution"),
            StopReason::PeerRestarted => f.write_str("peer restarted"),
            StopReason::Held(m) => write!(f, "held back {m:?}"),
            StopReason::BfdDown => f.write_str("bfd down"),
        }
    }
}
