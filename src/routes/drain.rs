//! The graceful shutdown of one session (RFC 8326), as a state machine on the virtual
//! clock: the drained route classes go out again with GRACEFUL_SHUTDOWN (65535:0) so
//! the peer and those behind it move traffic to other paths while these still work;
//! after the grace period they are withdrawn; once the withdrawals are written (or a
//! bound later, should the peer not read them) the session stops for the reason
//! [`crate::routes::stop::session_stop`] chose: a Cease when nothing is left at the peer,
//! a close under graceful restart when a kept class stays.
//!
//! Sans-IO like `bgp::session`: `handle(now, input)`, then `poll_action()` until `None`,
//! and `poll_timeout()` for the next deadline. The peer task carries the actions out on
//! its Adj-RIB-Out and session; it decides nothing of this itself.

use super::lb::{LbAttrs, LbDelta, LbRoutes};
use super::stop::{ClassStop, ClassStops};
use super::DesiredRoutes;
use crate::bgp::session::StopReason;
use ipnet::IpNet;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the withdrawals may take to be written before the session stops anyway
/// (a peer that does not read).
pub const WITHDRAW_TIMEOUT: Duration = Duration::from_secs(2);

/// A route class, as the Adj-RIB-Out holds them in two layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteClass {
    PodCidrs,
    LoadBalancer,
}

/// How a route of a class goes to the peer while the drain runs (a route that changes
/// during the drain, or the layer as it is when the drain starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// As planned: the class is kept.
    AsPlanned,
    /// With GRACEFUL_SHUTDOWN added.
    Marked,
    /// Not at all: the class is being withdrawn.
    Withheld,
}

/// What the drain asks of the peer task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainAction {
    /// Stop a collision candidate now: a connection the peer opened meanwhile holds no
    /// route of ours.
    StopCandidate(StopReason),
    /// Send these classes' routes again, marked.
    Mark(ClassStops),
    /// Withdraw these classes' routes.
    Withdraw(ClassStops),
    /// Stop the session for this reason; the drain is over.
    Stop(StopReason),
}

/// What the peer task tells the drain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainInput {
    /// A deadline from [`Drain::poll_timeout`] passed (or any turn of the task's loop).
    Tick,
    /// Nothing is pending in the Adj-RIB-Out and the write buffer is empty.
    Written,
    /// The session left Established: the peer dropped our routes with it.
    SessionDown,
    /// Another stop was asked for: it ends the drain at once.
    StopNow(StopReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The drained classes are out marked; withdrawn at `until`.
    Marked,
    /// Withdrawing since `until`; stops once written, or at `until + WITHDRAW_TIMEOUT`.
    Withdrawing,
    Done,
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct Drain {
    classes: ClassStops,
    until: Instant,
    then: StopReason,
    phase: Phase,
    actions: VecDeque<DrainAction>,
}

impl Drain {
    /// Starts a drain at `now`: the marked routes go out (with a zero grace period the
    /// withdrawals do, at once).
    pub fn start(now: Instant, classes: ClassStops, grace: Duration, then: StopReason) -> Drain {
        let mut actions = VecDeque::from([DrainAction::StopCandidate(then.clone())]);
        let phase = if grace.is_zero() {
            actions.push_back(DrainAction::Withdraw(classes));
            Phase::Withdrawing
        } else {
            actions.push_back(DrainAction::Mark(classes));
            Phase::Marked
        };
        Drain {
            classes,
            until: now + grace,
            then,
            phase,
            actions,
        }
    }

    pub fn handle(&mut self, now: Instant, input: DrainInput) {
        if self.phase == Phase::Done {
            return;
        }
        match input {
            DrainInput::StopNow(reason) => self.finish(reason),
            DrainInput::SessionDown => self.finish(self.then.clone()),
            DrainInput::Tick | DrainInput::Written => {
                if self.phase == Phase::Marked && now >= self.until {
                    self.phase = Phase::Withdrawing;
                    self.actions.push_back(DrainAction::Withdraw(self.classes));
                    // The withdrawals are not written yet: a `Written` now is about the
                    // marked routes.
                    return;
                }
                if self.phase == Phase::Withdrawing
                    && (input == DrainInput::Written || now >= self.until + WITHDRAW_TIMEOUT)
                {
                    self.finish(self.then.clone());
                }
            }
        }
    }

    fn finish(&mut self, reason: StopReason) {
        self.phase = Phase::Done;
        self.actions.push_back(DrainAction::Stop(reason));
    }

    pub fn poll_action(&mut self) -> Option<DrainAction> {
        self.actions.pop_front()
    }

    /// The next moment the drain must act: the end of the grace period, then the bound
    /// on writing the withdrawals.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Marked => Some(self.until),
            Phase::Withdrawing => Some(self.until + WITHDRAW_TIMEOUT),
            Phase::Done => None,
        }
    }

    /// How a route of `class` goes to the peer now.
    pub fn treatment(&self, class: RouteClass) -> Treatment {
        let stop = match class {
            RouteClass::PodCidrs => self.classes.pod_cidrs,
            RouteClass::LoadBalancer => self.classes.load_balancer,
        };
        match (stop, self.phase) {
            (ClassStop::Keep, _) => Treatment::AsPlanned,
            (ClassStop::Drain, Phase::Marked) => Treatment::Marked,
            (ClassStop::Drain, _) => Treatment::Withheld,
        }
    }

    /// The drain is over (its `Stop` was given).
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }
}

/// The two layers (pod CIDRs, LoadBalancer routes) a peer must hold after a drain's
/// [`DrainAction::Mark`] or [`DrainAction::Withdraw`] of `classes`: a drained class
/// marked with GRACEFUL_SHUTDOWN, or emptied; a kept class as it is. `None` for the
/// other actions, which change no route.
pub fn layers_after(
    action: &DrainAction,
    pod: &Arc<DesiredRoutes>,
    lb: &LbRoutes,
) -> Option<(Arc<DesiredRoutes>, LbRoutes)> {
    let (classes, withdraw) = match action {
        DrainAction::Mark(c) => (c, false),
        DrainAction::Withdraw(c) => (c, true),
        DrainAction::StopCandidate(_) | DrainAction::Stop(_) => return None,
    };
    let pod = match (classes.pod_cidrs, withdraw) {
        (ClassStop::Keep, _) => Arc::clone(pod),
        (ClassStop::Drain, false) => Arc::new(super::graceful_shutdown(pod)),
        (ClassStop::Drain, true) => Arc::new(DesiredRoutes::new()),
    };
    let lb = match (classes.load_balancer, withdraw) {
        (ClassStop::Keep, _) => lb.clone(),
        (ClassStop::Drain, false) => {
            let mut mark = super::GracefulShutdownMark::default();
            lb.iter().map(|(p, a)| (*p, mark.mark(a))).collect()
        }
        (ClassStop::Drain, true) => LbRoutes::new(),
    };
    Some((pod, lb))
}

/// The maintenance label's graceful withdrawal: when this node gains
/// `node.kubernetes.io/exclude-from-external-load-balancers` (an operator taking its
/// LoadBalancer paths away before working on it, its pods still running), the routes
/// the LoadBalancer planner drops go out again with GRACEFUL_SHUTDOWN for the grace
/// period and are withdrawn after it (RFC 8326 for a route, not a session). The label
/// removed before that: the planner's routes go out as they are, and a held route it no
/// longer gives is withdrawn at once. The pod CIDRs are not touched.
///
/// Sans-IO: the daemon hands it every LoadBalancer context change with the planner's
/// routes from before it, and calls [`ExclusionDrain::handle_timeout`] at
/// [`ExclusionDrain::poll_timeout`].
#[derive(Debug, Default)]
pub struct ExclusionDrain {
    held: BTreeMap<IpNet, Arc<LbAttrs>>,
    until: Option<Instant>,
}

impl ExclusionDrain {
    /// The planner's `delta` for a context change from `was_excluded` to `excluded`,
    /// `before` its routes until then: what goes to the peers now.
    pub fn context_changed(
        &mut self,
        now: Instant,
        grace: Duration,
        (was_excluded, excluded): (bool, bool),
        before: &BTreeMap<IpNet, Arc<LbAttrs>>,
        mut delta: LbDelta,
    ) -> LbDelta {
        if !was_excluded && excluded && !grace.is_zero() {
            for (prefix, to) in delta.changes.iter_mut() {
                if to.is_some() {
                    continue;
                }
                if let Some(attrs) = before.get(prefix) {
                    *to = Some(Arc::new(mark(attrs)));
                    self.held.insert(*prefix, Arc::clone(attrs));
                }
            }
            if !self.held.is_empty() {
                self.until = Some(now + grace);
            }
        } else if was_excluded && !excluded {
            for prefix in std::mem::take(&mut self.held).into_keys() {
                delta.changes.entry(prefix).or_insert(None);
            }
            self.until = None;
        }
        delta
    }

    /// When the held routes are to be withdrawn.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.until
    }

    /// The withdrawal of the held routes, once their grace period is over.
    pub fn handle_timeout(&mut self, now: Instant) -> LbDelta {
        match self.until {
            Some(until) if now >= until => {
                self.until = None;
                LbDelta {
                    changes: std::mem::take(&mut self.held)
                        .into_keys()
                        .map(|p| (p, None))
                        .collect(),
                }
            }
            _ => LbDelta::default(),
        }
    }

    /// Routes out with GRACEFUL_SHUTDOWN, waiting for their withdrawal.
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

/// `attrs` with GRACEFUL_SHUTDOWN (65535:0) among its communities.
fn mark(attrs: &LbAttrs) -> LbAttrs {
    let mut marked = attrs.clone();
    super::add_graceful_shutdown(&mut marked.communities);
    marked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::stop::StopKind;

    fn all(drain: &mut Drain) -> Vec<DrainAction> {
        std::iter::from_fn(|| drain.poll_action()).collect()
    }

    const GRACE: Duration = Duration::from_secs(15);

    fn cease() -> StopReason {
        StopReason::AdminShutdown("bye".into())
    }

    #[test]
    fn marked_for_the_grace_period_then_withdrawn_then_the_cease_once_written() {
        let t0 = Instant::now();
        let mut d = Drain::start(t0, ClassStops::ALL_DRAINED, GRACE, cease());
        assert_eq!(
            all(&mut d),
            vec![
                DrainAction::StopCandidate(cease()),
                DrainAction::Mark(ClassStops::ALL_DRAINED)
            ]
        );
        assert_eq!(d.treatment(RouteClass::PodCidrs), Treatment::Marked);
        assert_eq!(d.poll_timeout(), Some(t0 + GRACE));
        // The marked routes written, and a tick before the end: nothing.
        d.handle(t0 + Duration::from_secs(1), DrainInput::Written);
        d.handle(t0 + GRACE - Duration::from_millis(1), DrainInput::Tick);
        assert_eq!(all(&mut d), vec![]);
        d.handle(t0 + GRACE, DrainInput::Tick);
        assert_eq!(
            all(&mut d),
            vec![DrainAction::Withdraw(ClassStops::ALL_DRAINED)]
        );
        assert_eq!(d.treatment(RouteClass::LoadBalancer), Treatment::Withheld);
        assert_eq!(d.poll_timeout(), Some(t0 + GRACE + WITHDRAW_TIMEOUT));
        d.handle(t0 + GRACE + Duration::from_millis(5), DrainInput::Written);
        assert_eq!(all(&mut d), vec![DrainAction::Stop(cease())]);
        assert!(d.is_done());
        assert_eq!(d.poll_timeout(), None);
        // Nothing after the end.
        d.handle(t0 + GRACE * 2, DrainInput::Tick);
        assert_eq!(all(&mut d), vec![]);
    }

    #[test]
    fn a_peer_that_does_not_read_the_withdrawals_is_left_after_the_bound() {
        let t0 = Instant::now();
        let mut d = Drain::start(t0, ClassStops::ALL_DRAINED, GRACE, cease());
        all(&mut d);
        d.handle(t0 + GRACE, DrainInput::Tick);
        all(&mut d);
        d.handle(t0 + GRACE + WITHDRAW_TIMEOUT / 2, DrainInput::Tick);
        assert_eq!(all(&mut d), vec![]);
        d.handle(t0 + GRACE + WITHDRAW_TIMEOUT, DrainInput::Tick);
        assert_eq!(all(&mut d), vec![DrainAction::Stop(cease())]);
    }

    #[test]
    fn the_session_going_down_or_a_second_stop_ends_it_at_once() {
        let t0 = Instant::now();
        let mut d = Drain::start(t0, ClassStops::ALL_DRAINED, GRACE, cease());
        all(&mut d);
        d.handle(t0 + Duration::from_secs(3), DrainInput::SessionDown);
        assert_eq!(all(&mut d), vec![DrainAction::Stop(cease())]);

        let mut d = Drain::start(t0, ClassStops::ALL_DRAINED, GRACE, cease());
        all(&mut d);
        let now = StopReason::AdminShutdown("now".into());
        d.handle(
            t0 + Duration::from_secs(3),
            DrainInput::StopNow(now.clone()),
        );
        assert_eq!(all(&mut d), vec![DrainAction::Stop(now)]);
    }

    #[test]
    fn no_grace_period_withdraws_at_once() {
        let t0 = Instant::now();
        let classes = StopKind::Cordoned.classes();
        let keep = StopReason::Restart("bye".into());
        let mut d = Drain::start(t0, classes, Duration::ZERO, keep.clone());
        assert_eq!(
            all(&mut d),
            vec![
                DrainAction::StopCandidate(keep.clone()),
                DrainAction::Withdraw(classes)
            ]
        );
        d.handle(t0, DrainInput::Written);
        assert_eq!(all(&mut d), vec![DrainAction::Stop(keep)]);
    }

    fn lb(communities: &[u32]) -> Arc<LbAttrs> {
        Arc::new(LbAttrs {
            communities: communities.to_vec(),
            ..LbAttrs::default()
        })
    }

    fn p(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn the_maintenance_label_marks_then_withdraws_the_lb_routes() {
        let t0 = Instant::now();
        let gshut = crate::config::Community::GRACEFUL_SHUTDOWN.0;
        let before: BTreeMap<IpNet, Arc<LbAttrs>> = [
            (p("198.51.100.20/32"), lb(&[7])),
            (p("198.51.100.21/32"), lb(&[])),
        ]
        .into();
        // The planner drops both once the node is excluded.
        let removal = LbDelta {
            changes: before.keys().map(|p| (*p, None)).collect(),
        };
        let mut d = ExclusionDrain::default();
        let out = d.context_changed(t0, GRACE, (false, true), &before, removal.clone());
        assert_eq!(out.changes.len(), 2);
        for (prefix, to) in &out.changes {
            let to = to.as_ref().unwrap();
            assert!(to.communities.contains(&gshut), "{prefix}: {to:?}");
            assert!(before[prefix]
                .communities
                .iter()
                .all(|c| to.communities.contains(c)));
        }
        assert_eq!(d.poll_timeout(), Some(t0 + GRACE));
        assert!(d.handle_timeout(t0 + GRACE / 2).is_empty());
        assert_eq!(d.handle_timeout(t0 + GRACE), removal);
        assert_eq!(d.poll_timeout(), None);
        assert_eq!(d.held(), 0);
    }

    #[test]
    fn the_label_removed_early_restores_and_withdraws_what_the_planner_dropped() {
        let t0 = Instant::now();
        let before: BTreeMap<IpNet, Arc<LbAttrs>> = [
            (p("198.51.100.20/32"), lb(&[])),
            (p("198.51.100.21/32"), lb(&[])),
        ]
        .into();
        let mut d = ExclusionDrain::default();
        d.context_changed(
            t0,
            GRACE,
            (false, true),
            &before,
            LbDelta {
                changes: before.keys().map(|p| (*p, None)).collect(),
            },
        );
        // Back before the grace period is over; meanwhile .21's Service went away.
        let back = LbDelta {
            changes: [(p("198.51.100.20/32"), Some(lb(&[])))].into(),
        };
        let out = d.context_changed(t0 + GRACE / 2, GRACE, (true, false), &BTreeMap::new(), back);
        assert_eq!(
            out.changes,
            [
                (p("198.51.100.20/32"), Some(lb(&[]))),
                (p("198.51.100.21/32"), None)
            ]
            .into()
        );
        assert_eq!(d.poll_timeout(), None);
        assert!(d.handle_timeout(t0 + GRACE).is_empty());
        // Other context changes, or no grace period: the planner's delta as it is.
        let removal = LbDelta {
            changes: before.keys().map(|p| (*p, None)).collect(),
        };
        let mut d = ExclusionDrain::default();
        assert_eq!(
            d.context_changed(t0, Duration::ZERO, (false, true), &before, removal.clone()),
            removal
        );
        assert_eq!(
            d.context_changed(t0, GRACE, (false, false), &before, removal.clone()),
            removal
        );
        assert_eq!(d.poll_timeout(), None);
    }

    #[test]
    fn a_kept_class_goes_out_as_planned_throughout() {
        let t0 = Instant::now();
        let classes = StopKind::Cordoned.classes();
        let mut d = Drain::start(t0, classes, GRACE, StopReason::Restart("bye".into()));
        assert_eq!(d.treatment(RouteClass::PodCidrs), Treatment::AsPlanned);
        assert_eq!(d.treatment(RouteClass::LoadBalancer), Treatment::Marked);
        d.handle(t0 + GRACE, DrainInput::Tick);
        assert_eq!(d.treatment(RouteClass::PodCidrs), Treatment::AsPlanned);
        assert_eq!(d.treatment(RouteClass::LoadBalancer), Treatment::Withheld);
    }
}
