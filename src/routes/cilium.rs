//! Cilium's embedded BGP speaker beside this one (issue 29): whether cilium-config says
//! it runs, and what this speaker does about it.
//!
//! Cilium 1.10-1.16 start their MetalLB-based speaker in the agent when
//! `bgp-announce-lb-ip` or `bgp-announce-pod-cidr` is true (both default to false; the
//! agent reads them once, at its start, and then needs the `bgp-config` ConfigMap
//! mounted as a file, or it does not start). That speaker dials the same routers from
//! the same node address as this one: the switch sees two speakers from one address,
//! connection collisions and flapping sessions.
//!
//! The rule ([`decide`]):
//! - A conflict: either key is true in cilium-config. Absent, empty or false: none; no
//!   cilium-config: none.
//! - `--cilium-bgp-conflict hold` (the default): while the conflict stands the speaker
//!   opens and accepts no new session ([`ConflictDecision::holding`]; the peer tasks
//!   carry it out as the session's `Input::Hold`): a planned session that is not
//!   Established does not start. A session already Established stays up with
//!   its routes: the key turning on does not start Cilium's speaker before its agent
//!   restarts, and a config change never takes routes down. Such a session that goes
//!   down is not opened again while the conflict stands, and it keeps the parameters
//!   it runs with (a config change that would reset it waits). When the conflict
//!   clears, every planned session starts at once.
//! - `ignore`: for clusters where the operator knows Cilium's speaker is not running
//!   (e.g. Cilium 1.17+, which removed that speaker and its keys; 1.14-1.16 still start
//!   it, deprecated, cilium/cilium#36191): reported, sessions run.
//!
//! Must not: read the clock, log above debug, or touch sockets or metrics; the daemon
//! carries the decision out, metrics and `doctor` show it.

use std::fmt;
use std::str::FromStr;

use super::error::RoutesError;
use crate::sources::model::CiliumConfig;

/// The cilium-config keys that start Cilium's embedded speaker, as Cilium names them.
pub const KEY_POD_CIDR: &str = "bgp-announce-pod-cidr";
pub const KEY_LB_IP: &str = "bgp-announce-lb-ip";

/// What to do to turn the embedded speaker off, for the log, the Event and `doctor`.
pub const ADVICE: &str = "set bgp-announce-pod-cidr and bgp-announce-lb-ip to \"false\" (or \
     remove them) in cilium-config and restart the Cilium agents; this speaker announces \
     both route classes itself (the bgp-config's speaker block decides)";

/// `--cilium-bgp-conflict`: what the speaker does while cilium-config says Cilium's
/// embedded speaker is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ConflictPolicy {
    /// No new session while the conflict stands; Established ones stay.
    #[default]
    Hold,
    /// Report it and run every session.
    Ignore,
}

impl ConflictPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictPolicy::Hold => "hold",
            ConflictPolicy::Ignore => "ignore",
        }
    }
}

impl FromStr for ConflictPolicy {
    type Err = RoutesError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "hold" => Ok(ConflictPolicy::Hold),
            "ignore" => Ok(ConflictPolicy::Ignore),
            other => Err(RoutesError::UnknownConflictPolicy {
                value: other.to_owned(),
            }),
        }
    }
}

impl fmt::Display for ConflictPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The finding: cilium-config turns Cilium's embedded speaker on, with the keys that do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiliumBgpConflict {
    /// The keys set to true, in [`KEY_POD_CIDR`], [`KEY_LB_IP`] order (never empty).
    pub keys: Vec<&'static str>,
}

impl CiliumBgpConflict {
    /// The conflict `cilium_config` (`None`: it does not exist) states, if any.
    pub fn of(cilium_config: Option<&CiliumConfig>) -> Option<CiliumBgpConflict> {
        let c = cilium_config?;
        let keys: Vec<&'static str> = [
            (KEY_POD_CIDR, c.announce_pod_cidr),
            (KEY_LB_IP, c.announce_lb_ip),
        ]
        .into_iter()
        .filter(|(_, v)| *v == Some(true))
        .map(|(k, _)| k)
        .collect();
        (!keys.is_empty()).then_some(CiliumBgpConflict { keys })
    }
}

impl fmt::Display for CiliumBgpConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| format!("{k}: true")).collect();
        write!(
            f,
            "cilium-config has {}: Cilium's embedded BGP speaker (Cilium 1.10-1.16) peers \
             from this node too",
            keys.join(" and ")
        )
    }
}

/// What the speaker does about the conflict, decided by [`decide`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConflictDecision {
    pub policy: ConflictPolicy,
    /// The conflict, while cilium-config states one.
    pub conflict: Option<CiliumBgpConflict>,
}

impl ConflictDecision {
    /// New sessions are held back: a conflict under `hold`.
    pub fn holding(&self) -> bool {
        self.conflict.is_some() && self.policy == ConflictPolicy::Hold
    }
}

/// The decision for `cilium_config` (`None`: it does not exist) under `policy`.
pub fn decide(policy: ConflictPolicy, cilium_config: Option<&CiliumConfig>) -> ConflictDecision {
    ConflictDecision {
        policy,
        conflict: CiliumBgpConflict::of(cilium_config),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pod: Option<bool>, lb: Option<bool>) -> CiliumConfig {
        CiliumConfig {
            announce_pod_cidr: pod,
            announce_lb_ip: lb,
            ..CiliumConfig::default()
        }
    }

    #[test]
    fn either_key_true_is_a_conflict_and_absent_or_false_is_not() {
        assert_eq!(CiliumBgpConflict::of(None), None);
        for (pod, lb) in [
            (None, None),
            (Some(false), None),
            (None, Some(false)),
            (Some(false), Some(false)),
        ] {
            assert_eq!(
                CiliumBgpConflict::of(Some(&config(pod, lb))),
                None,
                "{pod:?} {lb:?}"
            );
        }
        let keys = |pod, lb| CiliumBgpConflict::of(Some(&config(pod, lb))).map(|c| c.keys);
        assert_eq!(keys(Some(true), None), Some(vec![KEY_POD_CIDR]));
        assert_eq!(keys(Some(false), Some(true)), Some(vec![KEY_LB_IP]));
        assert_eq!(
            keys(Some(true), Some(true)),
            Some(vec![KEY_POD_CIDR, KEY_LB_IP])
        );
    }

    #[test]
    fn hold_holds_while_the_conflict_stands_and_ignore_only_reports() {
        let on = config(None, Some(true));
        let held = decide(ConflictPolicy::Hold, Some(&on));
        assert!(held.holding());

        let ignored = decide(ConflictPolicy::Ignore, Some(&on));
        assert!(!ignored.holding());
        assert!(ignored.conflict.is_some(), "still reported");

        // Cleared: every session starts at once.
        let cleared = decide(
            ConflictPolicy::Hold,
            Some(&config(Some(false), Some(false))),
        );
        assert!(!cleared.holding() && cleared.conflict.is_none());
        assert!(!decide(ConflictPolicy::Hold, None).holding());
    }

    #[test]
    fn the_finding_names_the_keys() {
        let c = CiliumBgpConflict::of(Some(&config(Some(true), Some(true)))).unwrap();
        assert_eq!(
            c.to_string(),
            "cilium-config has bgp-announce-pod-cidr: true and bgp-announce-lb-ip: true: \
             Cilium's embedded BGP speaker (Cilium 1.10-1.16) peers from this node too"
        );
        assert!(ADVICE.contains("bgp-announce-lb-ip"));
    }

    #[test]
    fn the_policy_parses_and_prints_its_flag_values() {
        for p in [ConflictPolicy::Hold, ConflictPolicy::Ignore] {
            assert_eq!(p.as_str().parse::<ConflictPolicy>().unwrap(), p);
        }
        assert_eq!(
            "off".parse::<ConflictPolicy>().unwrap_err().to_string(),
            "--cilium-bgp-conflict: \"off\" must be hold or ignore"
        );
    }
}
