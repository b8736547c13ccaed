//! The readiness rule: what makes the speaker ready (`/readyz` 200) or not, and the
//! reasons it gives. One pure rule ([`ReadinessRule::judge`]) over the facts the
//! registry recorded ([`ReadinessFacts`]), with time given as `now`; the registry only
//! gathers those facts under its lock and calls it.
//!
//! Must not: read the clock, lock anything or record a series; the registry
//! (`registry/mod.rs`) owns the facts, this file owns what they mean.

use std::time::{Duration, Instant};

use super::board::{CiliumBgpReport, GateReport};
use crate::sources::SourceStatus;

/// Why `/readyz` answers as it does: `ready`, and the reasons (why not, or what it no
/// longer waits for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    pub reasons: Vec<String>,
}

/// What the rule looks at, as last recorded.
#[derive(Debug, Clone, Copy)]
pub struct ReadinessFacts<'a> {
    /// SIGTERM arrived.
    pub shutting_down: bool,
    /// A bgp-config is in force.
    pub config_loaded: bool,
    /// Every followed resource and whether it completed its first sync.
    pub sources: &'a SourceStatus,
    /// The daemon made a plan (its sessions are declared).
    pub planned: bool,
    /// The startup gate, when one is configured.
    pub gate: Option<&'a GateReport>,
    /// Each declared session, in peer order.
    pub sessions: &'a [SessionFact<'a>],
    /// cilium-config turns Cilium's embedded BGP speaker on, while it does.
    pub cilium_bgp: Option<&'a CiliumBgpReport>,
}

/// One declared session as the rule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionFact<'a> {
    /// The peer's label (`address:port`), named in the reasons.
    pub label: &'a str,
    /// Since when the session has not been Established; `None` while it is.
    pub down_since: Option<Instant>,
}

/// The readiness rule, with the one thing it remembers: when the unbounded conditions
/// (1, below) first held, from which the `--ready-timeout` bound is counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadinessRule {
    /// `--ready-timeout`; zero waits for neither sessions nor the gate.
    pub timeout: Duration,
    /// When a config was first in force with every source synced (stamped only while a
    /// timeout is set).
    base_ready_at: Option<Instant>,
}

impl ReadinessRule {
    /// The rule, at `now`:
    ///
    /// 1. Not ready while shutting down, without a bgp-config in force, before every
    ///    followed resource completed its first sync (no bound: nothing can be announced
    ///    without them), or while Cilium's embedded BGP speaker is on and new sessions
    ///    are held back (no bound either: the node is set up wrong until someone acts;
    ///    under `--cilium-bgp-conflict ignore` the conflict is only a reason).
    /// 2. Then, with a `--ready-timeout` (the daemon sets one), not ready until a plan
    ///    is made, the startup gate (if any) opened, and every session the plan has
    ///    is Established, so that a rolling update does not move on while this node's
    ///    routes are missing. The bound: the plan and the gate are waited for at most
    ///    the timeout from the moment (1) first held, and a session that has not been
    ///    Established for longer than the timeout no longer counts; then `/readyz`
    ///    answers ready and says what it did not wait for (a peer that is down must not
    ///    stop a rollout for ever).
    pub fn judge(&mut self, now: Instant, facts: &ReadinessFacts<'_>) -> Readiness {
        let mut reasons = Vec::new();
        if facts.shutting_down {
            reasons.push("shutting down".to_owned());
        }
        if !facts.config_loaded {
            reasons.push("no bgp-config in force".to_owned());
        }
        if facts.sources.resources.is_empty() {
            reasons.push("no source has reported".to_owned());
        }
        let unsynced: Vec<&str> = facts
            .sources
            .resources
            .iter()
            .filter(|(_, s)| !s.synced)
            .map(|(r, _)| r.as_str())
            .collect();
        if !unsynced.is_empty() {
            reasons.push(format!("not synced yet: {}", unsynced.join(", ")));
        }
        let mut noted = Vec::new();
        if let Some(c) = facts.cilium_bgp {
            if c.holding {
                reasons.push(format!(
                    "{}: no new session (--cilium-bgp-conflict hold), {} held back",
                    c.conflict, c.held_sessions
                ));
            } else {
                noted.push(format!(
                    "{}: sessions run anyway (--cilium-bgp-conflict {})",
                    c.conflict, c.policy
                ));
            }
        }
        if !reasons.is_empty() {
            return Readiness {
                ready: false,
                reasons,
            };
        }
        reasons.extend(noted);
        let timeout = self.timeout;
        if timeout.is_zero() {
            return Readiness {
                ready: true,
                reasons,
            };
        }
        let base = *self.base_ready_at.get_or_insert(now);
        let waited_out = now.saturating_duration_since(base) >= timeout;
        let mut waiting = Vec::new();
        let mut given_up = Vec::new();
        let mut note = |waited_out: bool, what: String| {
            if waited_out {
                given_up.push(what);
            } else {
                waiting.push(what);
            }
        };
        if !facts.planned {
            note(waited_out, "no plan made yet".to_owned());
        }
        if let Some(gate) = facts.gate.filter(|g| !g.open) {
            note(
                waited_out,
                format!(
                    "nothing announced until the cilium agent at {} reports healthy",
                    gate.address
                ),
            );
        }
        for session in facts.sessions {
            if let Some(since) = session.down_since {
                let down_for = now.saturating_duration_since(since);
                note(
                    down_for >= timeout,
                    format!("session {} not established", session.label),
                );
            }
        }
        if waiting.is_empty() {
            if !given_up.is_empty() {
                reasons.push(format!(
                    "not waited for beyond --ready-timeout {}s: {}",
                    timeout.as_secs(),
                    given_up.join(", ")
                ));
            }
            Readiness {
                ready: true,
                reasons,
            }
        } else {
            Readiness {
                ready: false,
                reasons: waiting.into_iter().chain(reasons).collect(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::{Resource, ResourceStatus};

    const TIMEOUT: Duration = Duration::from_secs(60);

    fn sources(synced: &[(Resource, bool)]) -> SourceStatus {
        let mut s = SourceStatus::default();
        for (r, synced) in synced {
            s.resources.insert(
                *r,
                ResourceStatus {
                    synced: *synced,
                    ..ResourceStatus::default()
                },
            );
        }
        s
    }

    fn facts<'a>(
        sources: &'a SourceStatus,
        gate: Option<&'a GateReport>,
        sessions: &'a [SessionFact<'a>],
    ) -> ReadinessFacts<'a> {
        ReadinessFacts {
            shutting_down: false,
            config_loaded: true,
            sources,
            planned: true,
            gate,
            sessions,
            cilium_bgp: None,
        }
    }

    fn secs(t0: Instant, s: u64) -> Instant {
        t0 + Duration::from_secs(s)
    }

    /// The unbounded conditions: each missing one is a reason, in a fixed order, and no
    /// timeout makes them go away.
    #[test]
    fn config_and_every_source_are_waited_for_without_bound() {
        let t0 = Instant::now();
        let mut rule = ReadinessRule {
            timeout: TIMEOUT,
            ..ReadinessRule::default()
        };
        let none = sources(&[]);
        let r = rule.judge(
            t0,
            &ReadinessFacts {
                shutting_down: true,
                config_loaded: false,
                ..facts(&none, None, &[])
            },
        );
        assert_eq!(
            r,
            Readiness {
                ready: false,
                reasons: vec![
                    "shutting down".to_owned(),
                    "no bgp-config in force".to_owned(),
                    "no source has reported".to_owned(),
                ],
            }
        );
        let half = sources(&[
            (Resource::ClusterStateFile, false),
            (Resource::BgpConfigFile, true),
        ]);
        let r = rule.judge(secs(t0, 3600), &facts(&half, None, &[]));
        assert_eq!(r.reasons, vec!["not synced yet: cluster-state-file"]);
        assert!(!r.ready);
    }

    /// Without a timeout the rule stops at the unbounded conditions: sessions, the plan
    /// and the gate do not count.
    #[test]
    fn without_a_timeout_sessions_plan_and_gate_do_not_count() {
        let t0 = Instant::now();
        let mut rule = ReadinessRule::default();
        let synced = sources(&[(Resource::ClusterStateFile, true)]);
        let gate = GateReport {
            address: "127.0.0.1:9879".to_owned(),
            open: false,
            ..GateReport::default()
        };
        let down = [SessionFact {
            label: "192.0.2.1:179",
            down_since: Some(t0),
        }];
        let r = rule.judge(
            t0,
            &ReadinessFacts {
                planned: false,
                ..facts(&synced, Some(&gate), &down)
            },
        );
        assert_eq!(
            r,
            Readiness {
                ready: true,
                reasons: vec![],
            }
        );
    }

    /// With a timeout: the plan, a closed gate and a down session each hold readiness
    /// back, named; the plan and the gate for at most the timeout from the moment the
    /// unbounded conditions first held, a session for at most the timeout from when it
    /// went down. Then ready, naming what it no longer waits for.
    #[test]
    fn the_timeout_bounds_the_wait_for_plan_gate_and_sessions() {
        let t0 = Instant::now();
        let mut rule = ReadinessRule {
            timeout: TIMEOUT,
            ..ReadinessRule::default()
        };
        let synced = sources(&[(Resource::ClusterStateFile, true)]);
        let gate = GateReport {
            address: "127.0.0.1:9879".to_owned(),
            open: false,
            ..GateReport::default()
        };
        // t0 + 10 s: the first judgement with (1) holding starts the bound.
        let unplanned = ReadinessFacts {
            planned: false,
            ..facts(&synced, Some(&gate), &[])
        };
        let r = rule.judge(secs(t0, 10), &unplanned);
        assert_eq!(
            r.reasons,
            vec![
                "no plan made yet",
                "nothing announced until the cilium agent at 127.0.0.1:9879 reports healthy"
            ]
        );
        assert!(!r.ready);
        assert!(!rule.judge(secs(t0, 69), &unplanned).ready);
        let r = rule.judge(secs(t0, 70), &unplanned);
        assert_eq!(
            r,
            Readiness {
                ready: true,
                reasons: vec![
                    "not waited for beyond --ready-timeout 60s: no plan made yet, nothing \
                     announced until the cilium agent at 127.0.0.1:9879 reports healthy"
                        .to_owned()
                ],
            }
        );

        // A session that went down at t0 + 50 s is waited for until t0 + 110 s, past
        // the bound of the plan and the gate; an Established one never counts.
        let open = GateReport {
            open: true,
            ..gate.clone()
        };
        let sessions = [
            SessionFact {
                label: "192.0.2.1:179",
                down_since: None,
            },
            SessionFact {
                label: "192.0.2.2:179",
                down_since: Some(secs(t0, 50)),
            },
        ];
        let with = facts(&synced, Some(&open), &sessions);
        let r = rule.judge(secs(t0, 109), &with);
        assert_eq!(
            r,
            Readiness {
                ready: false,
                reasons: vec!["session 192.0.2.2:179 not established".to_owned()],
            }
        );
        let r = rule.judge(secs(t0, 110), &with);
        assert_eq!(
            r,
            Readiness {
                ready: true,
                reasons: vec![
                    "not waited for beyond --ready-timeout 60s: session 192.0.2.2:179 not \
                     established"
                        .to_owned()
                ],
            }
        );
        // Everything in: ready with no reason.
        let up = [SessionFact {
            label: "192.0.2.2:179",
            down_since: None,
        }];
        assert_eq!(
            rule.judge(secs(t0, 111), &facts(&synced, Some(&open), &up)),
            Readiness {
                ready: true,
                reasons: vec![],
            }
        );
    }

    /// The bound is counted from the first judgement at which (1) held, not from an
    /// earlier one that found a source unsynced.
    #[test]
    fn the_bound_starts_when_config_and_sources_are_in() {
        let t0 = Instant::now();
        let mut rule = ReadinessRule {
            timeout: TIMEOUT,
            ..ReadinessRule::default()
        };
        let unsynced = sources(&[(Resource::ClusterStateFile, false)]);
        let synced = sources(&[(Resource::ClusterStateFile, true)]);
        let unplanned = |s| ReadinessFacts {
            planned: false,
            ..facts(s, None, &[])
        };
        assert!(!rule.judge(t0, &unplanned(&unsynced)).ready);
        assert!(!rule.judge(secs(t0, 100), &unplanned(&synced)).ready);
        assert!(!rule.judge(secs(t0, 159), &unplanned(&synced)).ready);
        assert!(rule.judge(secs(t0, 160), &unplanned(&synced)).ready);
    }

    /// Issue 29: Cilium's embedded speaker on with new sessions held back is not ready,
    /// without bound, naming the keys; under `ignore` it is a reason only.
    #[test]
    fn cilium_bgp_on_and_holding_is_not_ready_and_ignored_is_a_reason() {
        let t0 = Instant::now();
        let mut rule = ReadinessRule {
            timeout: TIMEOUT,
            ..ReadinessRule::default()
        };
        let synced = sources(&[(Resource::ClusterStateFile, true)]);
        let held = CiliumBgpReport {
            conflict: "cilium-config has bgp-announce-lb-ip: true".into(),
            policy: "hold".into(),
            holding: true,
            held_sessions: 2,
        };
        let holding = ReadinessFacts {
            cilium_bgp: Some(&held),
            ..facts(&synced, None, &[])
        };
        for at in [0, 3600] {
            let r = rule.judge(secs(t0, at), &holding);
            assert_eq!(
                r,
                Readiness {
                    ready: false,
                    reasons: vec![
                        "cilium-config has bgp-announce-lb-ip: true: no new session \
                         (--cilium-bgp-conflict hold), 2 held back"
                            .into()
                    ],
                },
                "at {at}s"
            );
        }
        let ignored = CiliumBgpReport {
            policy: "ignore".into(),
            holding: false,
            held_sessions: 0,
            ..held
        };
        let r = rule.judge(
            secs(t0, 10),
            &ReadinessFacts {
                cilium_bgp: Some(&ignored),
                ..facts(&synced, None, &[])
            },
        );
        assert!(r.ready);
        assert_eq!(
            r.reasons,
            vec![
                "cilium-config has bgp-announce-lb-ip: true: sessions run anyway \
                 (--cilium-bgp-conflict ignore)"
            ]
        );
    }
}
