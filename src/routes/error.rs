//! The routes layer's error type. Planning itself cannot fail: every input the planner
//! reads has been validated by the config and sources layers, and what cannot be
//! announced is part of the plan. What can fail is reading a setting from the user.

/// A routes setting given by the user that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoutesError {
    /// `--announce` is not one of the known modes.
    #[error("--announce: {value:?} must be local or cluster")]
    UnknownAnnounceMode { value: String },
    /// `--announce-lb-ips` is not one of the known values.
    #[error("--announce-lb-ips: {value:?} must be auto, on or off")]
    UnknownLbSwitch { value: String },
    /// `--cilium-bgp-conflict` is not one of the known values.
    #[error("--cilium-bgp-conflict: {value:?} must be hold or ignore")]
    UnknownConflictPolicy { value: String },
}
