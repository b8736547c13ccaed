//! How the peer task stops: it carries out `routes::stop::session_stop` (a stop now or
//! a graceful shutdown) and the `routes::drain::Drain` that runs the graceful shutdown,
//! and the BFD coupling's verdict (`bfd::coupling`). The decisions are theirs; this file
//! applies them to the session, the candidate and the Adj-RIB-Out.

use super::{LinkRole, Task};
use crate::bfd::coupling::Verdict;
use crate::bgp::session::{Input, State, StopReason};
use crate::routes::drain::{self, Drain, DrainAction, DrainInput, RouteClass, Treatment};
use crate::routes::stop::{self as stop_rule, SessionFacts, SessionStop, Shutdown};
use std::time::Instant;
use tracing::{info, warn};

impl Task {
    /// The BFD session's new status, through `bfd::coupling` (RFC 5882): a new failure
    /// of an Established session tears it down at once with Cease/BFD Down (RFC 9384),
    /// and it reconnects under the normal retry; the candidate of a collision goes too,
    /// and the Cease leaves without waiting for a peer that cannot answer.
    pub(super) async fn bfd_changed(&mut self, now: Instant) {
        let Some(status) = self
            .bfd
            .as_mut()
            .and_then(|b| b.borrow_and_update().clone())
        else {
            return;
        };
        let state = self.main.session.state();
        match self
            .bfd_coupling
            .status(status.failures, state == State::Established)
        {
            Verdict::Nothing => return,
            Verdict::NotEstablished => {
                info!(state = %state, diag = %status.diag, "bfd down: the bgp session is not established, nothing to tear down");
                return;
            }
            Verdict::TearDown => {}
        }
        warn!(
            diag = %status.diag,
            detection_ms = status.detection_time.as_millis(),
            "bfd down: tearing the bgp session down (cease/bfd down)"
        );
        self.path_down = true;
        if self.candidate.is_some() {
            self.input(
                LinkRole::Candidate,
                now,
                Input::Stop {
                    reason: StopReason::BfdDown,
                },
            )
            .await;
        }
        self.input(
            LinkRole::Main,
            now,
            Input::Stop {
                reason: StopReason::BfdDown,
            },
        )
        .await;
        self.path_down = false;
    }

    /// How a route of `class` goes to the peer now: as planned unless a drain says
    /// otherwise.
    pub(super) fn treatment(&self, class: RouteClass) -> Treatment {
        self.graceful
            .as_ref()
            .map_or(Treatment::AsPlanned, |d| d.treatment(class))
    }

    /// Carries out what `routes::stop::session_stop` makes of `mode` for this session:
    /// a stop now (returns true: the task ends), or a graceful shutdown (RFC 8326) of
    /// the classes it names, which [`Task::drain_step`] moves on.
    pub(super) async fn begin_stop(&mut self, now: Instant, mode: &Shutdown) -> bool {
        let facts = SessionFacts {
            established: self.main.session.state() == State::Established,
            graceful_restart: self.main.session.graceful_restart_in_force(),
            grace: self.spec.graceful_shutdown,
        };
        match stop_rule::session_stop(mode, facts) {
            SessionStop::Now(reason) => {
                info!(mode = ?mode, "shutting down");
                self.stop(now, reason).await;
                true
            }
            SessionStop::Drain {
                classes,
                grace,
                then,
            } => {
                info!(
                    grace_secs = grace.as_secs_f64(),
                    pod_cidrs = ?classes.pod_cidrs,
                    load_balancer = ?classes.load_balancer,
                    then = %then,
                    "graceful shutdown: routes re-advertised with GRACEFUL_SHUTDOWN, withdrawn after the grace period"
                );
                self.graceful = Some(Drain::start(now, classes, grace, then));
                match self.carry_out_drain(now).await {
                    Some(reason) => {
                        self.stop(now, reason).await;
                        true
                    }
                    None => false,
                }
            }
        }
    }

    /// Carries out the drain's actions; returns the reason to stop with once it is over.
    pub(super) async fn carry_out_drain(&mut self, now: Instant) -> Option<StopReason> {
        while let Some(action) = self.graceful.as_mut().and_then(Drain::poll_action) {
            match action {
                DrainAction::StopCandidate(reason) => {
                    // Its NOTIFICATION goes out at the next drain step, then it is gone.
                    if let Some(c) = self.candidate.as_mut() {
                        c.session.handle(now, Input::Stop { reason });
                    }
                }
                DrainAction::Mark(_) | DrainAction::Withdraw(_) => {
                    let withdraw = matches!(action, DrainAction::Withdraw(_));
                    if let Some((pod, lb)) =
                        drain::layers_after(&action, self.rib.desired(), self.rib.lb())
                    {
                        self.rib.set_layers(pod, lb);
                    }
                    if withdraw {
                        info!("grace period over: withdrawing the drained routes");
                        self.after_event(now).await;
                    } else {
                        self.changed_at.get_or_insert(now);
                    }
                }
                DrainAction::Stop(reason) => return Some(reason),
            }
        }
        None
    }

    /// Moves a graceful shutdown on: tells the drain what happened (time, the session
    /// gone, the withdrawals written) and carries out what it asks. Returns the reason
    /// to stop with once it is over.
    pub(super) async fn drain_step(&mut self, now: Instant) -> Option<StopReason> {
        self.graceful.as_ref()?;
        if self.candidate.is_some() {
            // Stopped when the drain began: its NOTIFICATION goes out, then it is gone.
            self.drain(LinkRole::Candidate, now).await;
            self.candidate = None;
        }
        let input = if self.main.session.state() == State::Established {
            DrainInput::Tick
        } else {
            DrainInput::SessionDown
        };
        self.graceful.as_mut()?.handle(now, input);
        if let Some(reason) = self.carry_out_drain(now).await {
            return Some(reason);
        }
        let written =
            !self.rib.has_work() && self.main.conn.as_ref().is_none_or(|c| c.wbuf.is_empty());
        if written {
            self.graceful.as_mut()?.handle(now, DrainInput::Written);
            return self.carry_out_drain(now).await;
        }
        None
    }

    /// Stops both sessions for `reason`.
    pub(super) async fn stop(&mut self, now: Instant, reason: StopReason) {
        if self.candidate.is_some() {
            self.input(
                LinkRole::Candidate,
                now,
                Input::Stop {
                    reason: reason.clone(),
                },
            )
            .await;
        }
        self.input(LinkRole::Main, now, Input::Stop { reason })
            .await;
        self.dial = None;
        self.report(now);
    }
}
