//! The session layer's one error type: why a session configuration is refused, and why a
//! session left a state (the reason carried by `Action::Down` and kept as the last
//! error). Nothing here is fatal to the process; every variant is an outcome the driver
//! logs and reports.

use super::notification::NotificationInfo;
use super::StopReason;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// A [`super::SessionConfig`] field the state machine cannot run with.
    #[error("{field}: {reason}")]
    InvalidConfig { field: &'static str, reason: String },
    /// The outgoing TCP connection could not be established.
    #[error("tcp connection failed")]
    ConnectionFailed,
    /// The TCP connection ended without a NOTIFICATION.
    #[error("tcp connection closed")]
    ConnectionClosed,
    /// The peer went silent for the negotiated hold time (RFC 4271 section 6.5); we sent
    /// NOTIFICATION 4/0.
    #[error("hold timer expired")]
    HoldTimerExpired,
    /// We detected an error and sent this NOTIFICATION.
    #[error("sent notification {0}")]
    NotificationSent(NotificationInfo),
    /// The peer sent this NOTIFICATION.
    #[error("received notification {0}")]
    NotificationReceived(NotificationInfo),
    /// The driver stopped the session.
    #[error("stopped: {0}")]
    Stopped(StopReason),
}
