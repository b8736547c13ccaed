//! The session layer's one error type: why a session configuration is refused, and why a
//! session left a state (the reason carried by `Action::Down` and kept as the last
//! error). Nothing here is fatal to the process; every variant is an outcome the driver
//! logs and reports.

use super::stop::StopReason;
use crate::bgp::wire::Notification;
use bytes::Bytes;
use std::fmt;

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

/// What the session keeps of a NOTIFICATION for its last error and logs: the numbers, the
/// registry's name for them, and the RFC 9003 Shutdown Communication when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationInfo {
    pub code: u8,
    pub subcode: u8,
    /// The RFC 9003 Shutdown Communication of Cease subcodes 2 and 4, when well-formed
    /// and not empty.
    pub message: Option<String>,
    pub data: Bytes,
}

impl From<&Notification> for NotificationInfo {
    fn from(n: &Notification) -> Self {
        NotificationInfo {
            code: n.code,
            subcode: n.subcode,
            message: n.shutdown_message(),
            data: n.data.clone(),
        }
    }
}

impl NotificationInfo {
    /// The registry's name for the code and subcode.
    pub fn description(&self) -> &'static str {
        crate::bgp::wire::ErrorKind::from_codes(self.code, self.subcode).description()
    }
}

impl fmt::Display for NotificationInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} ({})", self.code, self.subcode, self.description())?;
        if let Some(message) = &self.message {
            write!(f, " {message:?}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notification_info_shows_codes_name_and_message() {
        let n = Notification::admin_shutdown("bye");
        let info = NotificationInfo::from(&n);
        assert_eq!(info.message.as_deref(), Some("bye"));
        assert_eq!(
            info.to_string(),
            "6/2 (cease: administrative shutdown) \"bye\""
        );
        let hold = NotificationInfo::from(&Notification::hold_timer_expired());
        assert_eq!(hold.to_string(), "4/0 (hold timer expired)");
        assert_eq!(hold.message, None);
    }
}
