//! `--announce`: which nodes' pod CIDRs this speaker announces. Its own file because
//! both planners read it (`plan.rs` for the pod CIDRs, `lb.rs` for the on/off rule of
//! the LoadBalancer IPs), and neither imports the other.

use std::fmt;
use std::str::FromStr;

use super::error::RoutesError;

/// `--announce`: which nodes' pod CIDRs this speaker announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AnnounceMode {
    /// The local node's only (one speaker per node, the DaemonSet).
    #[default]
    Local,
    /// Every node's, each with its own InternalIP as next hop.
    Cluster,
}

impl AnnounceMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AnnounceMode::Local => "local",
            AnnounceMode::Cluster => "cluster",
        }
    }
}

impl FromStr for AnnounceMode {
    type Err = RoutesError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "local" => Ok(AnnounceMode::Local),
            "cluster" => Ok(AnnounceMode::Cluster),
            other => Err(RoutesError::UnknownAnnounceMode {
                value: other.to_owned(),
            }),
        }
    }
}

impl fmt::Display for AnnounceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
