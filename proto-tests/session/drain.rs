//! What a session does when asked to stop (`routes::stop::session_stop`) and the RFC 8326
//! drain (`routes::drain::Drain`), on the virtual clock: our session Established with a
//! scripted peer, its Adj-RIB-Out holding a pod CIDR and a LoadBalancer /32, the stop
//! carried out as the peer task does (the drain's actions applied to the Adj-RIB-Out
//! through `drain::layers_after`, its batches handed to the session). Every path the
//! interop and e2e tests drive against real daemons is here, with exact times:
//! - no graceful restart: both routes again with 65535:0 at once, nothing until the end
//!   of the grace period, then both withdrawn, then Cease/Administrative Shutdown with the
//!   message (interop `graceful_shutdown`);
//! - graceful restart in force: a restart closes without NOTIFICATION and sends nothing
//!   (interop `graceful_restart_skips_graceful_shutdown`, e2e rolling upgrade);
//! - leaving under graceful restart: drained all the same, then the Cease (e2e drain +
//!   reboot, scale-down);
//! - cordoned under graceful restart: only the LoadBalancer route drained, then a close
//!   without NOTIFICATION that keeps the pod CIDR (e2e cordon + upgrade);
//! - an operator's stop: the Cease at once; a de-configured peer: drained, then Cease 6/3;
//! - the session lost during the drain, a second stop, a peer that does not read.

use crate::harness::*;
use ipnet::IpNet;
use podcidr_speaker::bgp::session::{Action, GrConfig, Input, SessionConfig, State, StopReason};
use podcidr_speaker::bgp::wire::{Message, Open, PathAttribute, Update};
use podcidr_speaker::peer::{AdjRibOut, RibSession};
use podcidr_speaker::routes::drain::{self, Drain, DrainAction, DrainInput, WITHDRAW_TIMEOUT};
use podcidr_speaker::routes::lb::LbRoutes;
use podcidr_speaker::routes::next_hop::SessionNextHops;
use podcidr_speaker::routes::stop::{
    session_stop, LeaveReason, SessionFacts, SessionStop, Shutdown, StopKind,
};
use podcidr_speaker::routes::{DesiredRoutes, NextHop, PlannedRoute, RouteAttrs};
use std::sync::Arc;
use std::time::Duration;

const GRACE: Duration = Duration::from_secs(15);
const GSHUT: u32 = 0xffff_0000;
const POD: &str = "10.244.1.0/24";
const LB: &str = "198.51.100.20/32";

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn attrs(communities: &[u32]) -> Arc<RouteAttrs> {
    Arc::new(RouteAttrs {
        origin: podcidr_speaker::bgp::wire::Origin::Incomplete,
        as_path: vec![LOCAL_ASN],
        next_hop: NextHop::SessionLocal,
        med: None,
        local_pref: None,
        communities: communities.to_vec(),
        large_communities: vec![],
    })
}

/// One session, its Adj-RIB-Out and a drain, driven as the peer task drives them.
struct Rig {
    s: Script,
    rib: AdjRibOut,
    drain: Option<Drain>,
    /// What the session sent since the stop was asked for, with the time since then.
    sent: Vec<(Duration, Message)>,
    asked: Duration,
    stopped: Option<(Duration, StopReason)>,
    /// The peer reads what we write (else the write buffer stays full: no batch leaves).
    reading: bool,
}

impl Rig {
    fn new(graceful_restart: bool) -> Rig {
        let cfg = if graceful_restart {
            SessionConfig {
                graceful_restart: Some(GrConfig {
                    restart_time: 120,
                    forwarding_preserved: true,
                }),
                ..config()
            }
        } else {
            config()
        };
        let mut s = Script::new(cfg);
        let mut open: Open = peer_open();
        if graceful_restart {
            open.capabilities.push(gr_capability(120));
        }
        let actions = s.establish_with(open);
        let n = s.session.negotiated().expect("negotiated").clone();
        let mut rib = AdjRibOut::new();
        rib.established(RibSession {
            ctx: n.context(),
            families: n.families.clone(),
            ibgp: n.ibgp,
            next_hops: SessionNextHops {
                local: "192.0.2.1".parse().unwrap(),
                extended_next_hop_ipv4: false,
            },
        });
        let pod: DesiredRoutes = [(
            net(POD),
            PlannedRoute {
                attrs: attrs(&[0xfde9_0064]),
                node: "n1".into(),
            },
        )]
        .into();
        let lb: LbRoutes = [(net(LB), attrs(&[0xfde9_0050]))].into();
        rib.set_layers(Arc::new(pod), lb);
        let mut rig = Rig {
            s,
            rib,
            drain: None,
            sent: Vec::new(),
            asked: Duration::ZERO,
            stopped: None,
            reading: true,
        };
        rig.act(actions);
        rig.pump();
        assert_eq!(rig.rib.held().len(), 2, "the table is out");
        rig.sent.clear();
        rig
    }

    fn act(&mut self, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::SendTable { afi_safi, refresh } => self.rib.send_table(afi_safi, refresh),
                Action::Send(m) => self.sent.push((self.s.elapsed() - self.asked, m)),
                Action::Down { .. } => self.rib.down(),
                _ => {}
            }
        }
    }

    /// Batches into the session while the peer reads, then the finished tables.
    fn pump(&mut self) {
        if !self.reading || self.s.session.state() != State::Established {
            return;
        }
        let now = self.s.now;
        while let Some(batch) = self.rib.next_batch(1 << 20, now) {
            let a = self.s.input(Input::Updates(batch));
            self.act(a);
        }
        while let Some(f) = self.rib.poll_table_sent() {
            let a = self.s.input(Input::TableSent(f));
            self.act(a);
        }
    }

    fn stop_session(&mut self, reason: StopReason) {
        let a = self.s.input(Input::Stop {
            reason: reason.clone(),
        });
        self.act(a);
        self.stopped = Some((self.s.elapsed() - self.asked, reason));
    }

    /// The stop asked for now, as `begin_stop` carries it out.
    fn ask(&mut self, mode: &Shutdown) {
        self.asked = self.s.elapsed();
        let facts = SessionFacts {
            established: self.s.session.state() == State::Established,
            graceful_restart: self.s.session.graceful_restart_in_force(),
            grace: GRACE,
        };
        match session_stop(mode, facts) {
            SessionStop::Now(reason) => self.stop_session(reason),
            SessionStop::Drain {
                classes,
                grace,
                then,
            } => {
                self.drain = Some(Drain::start(self.s.now, classes, grace, then));
                self.carry_out();
            }
        }
    }

    fn carry_out(&mut self) {
        while let Some(action) = self.drain.as_mut().and_then(Drain::poll_action) {
            match &action {
                DrainAction::Stop(reason) => {
                    self.stop_session(reason.clone());
                    return;
                }
                _ => {
                    if let Some((pod, lb)) =
                        drain::layers_after(&action, self.rib.desired(), self.rib.lb())
                    {
                        self.rib.set_layers(pod, lb);
                        self.pump();
                    }
                }
            }
        }
    }

    /// One turn of the task's loop at `t` after the stop was asked for.
    fn turn(&mut self, t: Duration) {
        let at = self.asked + t;
        self.s.at(at);
        let Some(d) = self.drain.as_mut() else {
            return;
        };
        let input = if self.s.session.state() == State::Established {
            DrainInput::Tick
        } else {
            DrainInput::SessionDown
        };
        d.handle(self.s.now, input);
        self.carry_out();
        if self.stopped.is_none() && !self.rib.has_work() {
            let now = self.s.now;
            if let Some(d) = self.drain.as_mut() {
                d.handle(now, DrainInput::Written);
            }
            self.carry_out();
        }
    }

    /// Runs the loop at the drain's deadlines until the session stops (bounded).
    fn run(&mut self) {
        for _ in 0..16 {
            if self.stopped.is_some() {
                return;
            }
            let Some(deadline) = self.drain.as_ref().and_then(Drain::poll_timeout) else {
                return;
            };
            let t = deadline - (self.s.t0 + self.asked);
            self.turn(t);
        }
        panic!("the drain never ended");
    }

    fn updates(&self) -> Vec<(Duration, &Update)> {
        self.sent
            .iter()
            .filter_map(|(t, m)| match m {
                Message::Update(u) => Some((*t, u)),
                _ => None,
            })
            .collect()
    }

    fn notifications(&self) -> Vec<(Duration, u8, u8)> {
        self.sent
            .iter()
            .filter_map(|(t, m)| match m {
                Message::Notification(n) => Some((*t, n.code, n.subcode)),
                _ => None,
            })
            .collect()
    }
}

fn communities(u: &Update) -> Vec<u32> {
    u.attributes
        .iter()
        .find_map(|a| match a {
            PathAttribute::Communities(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn announced(u: &Update) -> Vec<IpNet> {
    u.nlri.iter().map(|n| n.prefix).collect()
}

fn withdrawn(u: &Update) -> Vec<IpNet> {
    u.withdrawn.iter().map(|n| n.prefix).collect()
}

/// At 0: both routes again with 65535:0; at the grace period: both withdrawn; then the
/// Cease 6/2 with the message. Nothing else, nothing in between.
fn assert_full_drain(rig: &Rig, cease: (u8, u8)) {
    let u = rig.updates();
    let (marks, rest): (Vec<_>, Vec<_>) = u.iter().partition(|(t, _)| t.is_zero());
    let mut marked: Vec<IpNet> = Vec::new();
    for (_, up) in &marks {
        assert!(communities(up).contains(&GSHUT), "{up:?}");
        assert!(withdrawn(up).is_empty(), "{up:?}");
        marked.extend(announced(up));
    }
    marked.sort();
    assert_eq!(marked, vec![net(POD), net(LB)], "{u:#?}");
    let mut gone: Vec<IpNet> = Vec::new();
    for (t, up) in &rest {
        assert_eq!(*t, GRACE, "{u:#?}");
        assert!(announced(up).is_empty(), "{up:?}");
        gone.extend(withdrawn(up));
    }
    gone.sort();
    assert_eq!(gone, vec![net(POD), net(LB)], "{u:#?}");
    assert_eq!(rig.notifications(), vec![(GRACE, cease.0, cease.1)]);
    assert!(rig.rib.held().is_empty());
}

#[test]
fn without_graceful_restart_a_restart_marks_holds_withdraws_then_ceases() {
    let mut rig = Rig::new(false);
    rig.ask(&Shutdown::Restart("podcidr-speaker shutting down".into()));
    // Turns of the loop within the grace period change nothing.
    rig.turn(Duration::from_secs(1));
    rig.turn(GRACE - Duration::from_millis(1));
    assert!(rig.updates().iter().all(|(t, _)| t.is_zero()));
    rig.run();
    assert_full_drain(&rig, (6, 2));
    assert_eq!(
        rig.stopped,
        Some((
            GRACE,
            StopReason::AdminShutdown("podcidr-speaker shutting down".into())
        ))
    );
}

#[test]
fn under_graceful_restart_a_restart_sends_nothing_and_closes_without_notification() {
    let mut rig = Rig::new(true);
    rig.ask(&Shutdown::Restart("bye".into()));
    assert!(rig.updates().is_empty());
    assert!(rig.notifications().is_empty(), "{:?}", rig.sent);
    assert!(matches!(rig.stopped, Some((t, StopReason::Restart(_))) if t.is_zero()));
    assert_ne!(rig.s.session.state(), State::Established);
}

#[test]
fn leaving_under_graceful_restart_drains_everything_then_ceases() {
    let mut rig = Rig::new(true);
    let mode =
        StopKind::Leaving(LeaveReason::ShuttingDown).shutdown("podcidr-speaker shutting down");
    rig.ask(&mode);
    rig.run();
    assert_full_drain(&rig, (6, 2));
    assert_eq!(
        rig.stopped.map(|(_, r)| r),
        Some(StopReason::AdminShutdown(
            "podcidr-speaker shutting down: node shutting down".into()
        ))
    );
}

#[test]
fn cordoned_under_graceful_restart_drains_the_lb_route_and_keeps_the_pod_cidr() {
    let mut rig = Rig::new(true);
    rig.ask(&StopKind::Cordoned.shutdown("podcidr-speaker shutting down"));
    rig.run();
    let u = rig.updates();
    assert_eq!(u.len(), 2, "{u:#?}");
    assert_eq!((u[0].0, announced(u[0].1)), (Duration::ZERO, vec![net(LB)]));
    assert!(communities(u[0].1).contains(&GSHUT));
    assert_eq!((u[1].0, withdrawn(u[1].1)), (GRACE, vec![net(LB)]));
    // The close keeps the pod CIDR at the peer: no NOTIFICATION, and it was never sent
    // again nor withdrawn.
    assert!(rig.notifications().is_empty(), "{:?}", rig.sent);
    assert!(matches!(rig.stopped, Some((t, StopReason::Restart(_))) if t == GRACE));
}

#[test]
fn an_operators_stop_is_the_cease_at_once_and_a_deconfigured_peer_is_drained() {
    let mut rig = Rig::new(true);
    rig.ask(&Shutdown::Admin("maintenance".into()));
    assert!(rig.updates().is_empty());
    assert_eq!(rig.notifications(), vec![(Duration::ZERO, 6, 2)]);

    let mut rig = Rig::new(true);
    rig.ask(&Shutdown::Deconfigured);
    rig.run();
    assert_full_drain(&rig, (6, 3));
}

#[test]
fn a_session_lost_during_the_drain_or_a_second_stop_ends_it_at_once() {
    let mut rig = Rig::new(false);
    rig.ask(&Shutdown::Restart("bye".into()));
    rig.s.at(rig.asked + Duration::from_secs(3));
    let a = rig.s.input(Input::TcpClosed);
    rig.act(a);
    rig.turn(Duration::from_secs(3));
    assert_eq!(
        rig.updates().len(),
        2,
        "nothing withdrawn: the peer dropped it all"
    );
    assert!(matches!(rig.stopped, Some((t, _)) if t == Duration::from_secs(3)));

    let mut rig = Rig::new(false);
    rig.ask(&Shutdown::Restart("bye".into()));
    let now = rig.s.now + Duration::from_secs(4);
    rig.drain.as_mut().unwrap().handle(
        now,
        DrainInput::StopNow(StopReason::AdminShutdown("now".into())),
    );
    rig.turn(Duration::from_secs(4));
    assert_eq!(rig.notifications(), vec![(Duration::from_secs(4), 6, 2)]);
    assert_eq!(
        rig.stopped.map(|(_, r)| r),
        Some(StopReason::AdminShutdown("now".into()))
    );
}

#[test]
fn a_peer_that_does_not_read_the_withdrawals_is_left_after_the_bound() {
    let mut rig = Rig::new(false);
    rig.ask(&Shutdown::Restart("bye".into()));
    rig.reading = false;
    rig.run();
    // The withdrawals never left; the session stopped at the bound all the same.
    assert!(rig.updates().iter().all(|(_, u)| withdrawn(u).is_empty()));
    assert!(
        matches!(rig.stopped, Some((t, _)) if t == GRACE + WITHDRAW_TIMEOUT),
        "{:?}",
        rig.stopped
    );
}
