//! Leader election of the `allocate` role on a `coordination.k8s.io/v1` Lease: only the
//! leader writes, a new leader takes over within a bounded time, a deposed one stops
//! writing at once.
//!
//! This file holds what the runner and the elector share: [`Leadership`] (what this
//! replica may do, published on a `tokio::sync::watch`), [`LeaseRef`] (`--lease`) and
//! [`Timings`] (client-go's three durations and their rules).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// What this replica may do, as the elector last decided it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Leadership {
    /// Another replica leads, or nobody is known to: write nothing.
    #[default]
    Follower,
    /// This replica holds the Lease. `term` counts this replica's terms (1 for the first),
    /// so a runner can tell a new term from the same one seen twice.
    Leader { term: u64 },
}

impl Leadership {
    pub fn is_leader(self) -> bool {
        matches!(self, Leadership::Leader { .. })
    }
}

/// The Lease the replicas compete for: `--lease NAMESPACE/NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRef {
    pub namespace: String,
    pub name: String,
}

impl Default for LeaseRef {
    fn default() -> Self {
        Self {
            namespace: "kube-system".into(),
            name: "podcidr-speaker-allocator".into(),
        }
    }
}

/// `--lease` is not `NAMESPACE/NAME`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("--lease: {value:?} must be NAMESPACE/NAME")]
pub struct BadLeaseRef {
    pub value: String,
}

impl FromStr for LeaseRef {
    type Err = BadLeaseRef;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadLeaseRef {
            value: s.to_owned(),
        };
        let (namespace, name) = s.split_once('/').ok_or_else(bad)?;
        // Object names: no separator, not empty (the API server checks the rest).
        let valid = |part: &str| !part.is_empty() && !part.contains(['/', ':']);
        if !valid(namespace) || !valid(name) {
            return Err(bad());
        }
        Ok(Self {
            namespace: namespace.into(),
            name: name.into(),
        })
    }
}

impl fmt::Display for LeaseRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// client-go's leader-election durations (same defaults: 15 s, 10 s, 2 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// How long a Lease, once renewed, keeps others from taking it.
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal: past it, it
    /// stops writing, before the Lease can expire for the others.
    pub renew_deadline: Duration,
    /// How often a renewal or an acquisition is tried.
    pub retry_period: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Timings that would let two replicas lead at once, or a leader lose its Lease between
/// two renewals.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadTimings {
    #[error("--renew-deadline ({renew:?}) must be shorter than --lease-duration ({lease:?}): a leader must stop writing before the others may take over")]
    RenewNotBeforeExpiry { renew: Duration, lease: Duration },
    #[error("--retry-period ({retry:?}) must be shorter than --renew-deadline ({renew:?}): a leader must get more than one try to renew")]
    RetryNotBeforeRenew { retry: Duration, renew: Duration },
    #[error("--retry-period must not be zero")]
    ZeroRetry,
}

impl Timings {
    pub fn validate(&self) -> Result<(), BadTimings> {
        if self.retry_period.is_zero() {
            return Err(BadTimings::ZeroRetry);
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(BadTimings::RenewNotBeforeExpiry {
                renew: self.renew_deadline,
                lease: self.lease_duration,
            });
        }
        if self.retry_period >= self.renew_deadline {
            return Err(BadTimings::RetryNotBeforeRenew {
                retry: self.retry_period,
                renew: self.renew_deadline,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_ref_parses_namespace_and_name_only() {
        assert_eq!(
            "ns/lock".parse::<LeaseRef>().unwrap(),
            LeaseRef {
                namespace: "ns".into(),
                name: "lock".into()
            }
        );
        for bad in ["lock", "/lock", "ns/", "ns/a/b", "ns/a:b", ""] {
            assert!(bad.parse::<LeaseRef>().is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            LeaseRef::default().to_string(),
            "kube-system/podcidr-speaker-allocator"
        );
    }

    #[test]
    fn timings_must_stop_the_leader_before_the_lease_expires() {
        assert_eq!(Timings::default().validate(), Ok(()));
        let s = Duration::from_secs;
        let t = |l, r, p| Timings {
            lease_duration: s(l),
            renew_deadline: s(r),
            retry_period: s(p),
        };
        assert!(matches!(
            t(10, 10, 2).validate(),
            Err(BadTimings::RenewNotBeforeExpiry { .. })
        ));
        assert!(matches!(
            t(15, 10, 10).validate(),
            Err(BadTimings::RetryNotBeforeRenew { .. })
        ));
        assert_eq!(t(15, 10, 0).validate(), Err(BadTimings::ZeroRetry));
    }
}
