//! Decode errors and their one exhaustive mapping to the protocol reaction
//! (RFC 4271 section 6, RFC 7606 section 7). To be completed by the codec work.

use super::types::Notification;

/// What the receiver of a malformed UPDATE must do (RFC 7606 section 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reaction {
    /// Reset the session with this NOTIFICATION.
    SessionReset(Notification),
    /// Keep the session; treat every NLRI of the UPDATE as withdrawn.
    TreatAsWithdraw,
    /// Keep the session; drop the attribute and process the rest.
    AttributeDiscard,
}

/// A non-fatal UPDATE error kept on the decoded message (see `Update::errors`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateError {
    /// The attribute type code the error concerns, if any.
    pub attr_type: Option<u8>,
    pub reaction_kind: NonFatal,
    /// A human-readable description for logs and `decode` output.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonFatal {
    TreatAsWithdraw,
    AttributeDiscard,
}
