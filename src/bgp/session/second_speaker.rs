//! The finding "another BGP speaker peers with this switch from our address" (Cilium's
//! embedded speaker, MetalLB's, a leftover bird), as the wire shows it: a state machine
//! over the NOTIFICATIONs our sessions receive, on the virtual clock.
//!
//! What the switch does with two connections from one address (RFC 4271 section 6.8),
//! as run here (proto-tests/interop/second_speaker.rs; GoBGP by hand, two birds on one
//! address): FRR 8.4 and BIRD 2.0 keep the session that is Established, whichever
//! router ID is higher, and answer every later connection from the same address with
//! Cease/Connection Collision Resolution (6/7; BIRD after its OPEN, and only when it
//! opened the held session itself: when it accepted it, BIRD closes later connections
//! without a NOTIFICATION, as GoBGP 3.10 always does). The speaker that came second is
//! refused on every retry, and the one that holds the session sees nothing. So:
//!
//! - a sign is a Cease 7 or 5 (Connection Rejected, RFC 4486) received, or a Cease 6
//!   (Other Configuration Change) received before Established (on an Established
//!   session it is what a switch sends when its operator changes the neighbour);
//! - a sign is ours, not a second speaker's, when we had a second connection of our own
//!   to the peer at the time: the ordinary collision when both sides dial (one per
//!   reconnect), which the caller says with `own_connections`;
//! - [`THRESHOLD`] signs within the window raise the finding; it clears after a quiet
//!   period without one. After a sign the session retries within a few seconds
//!   ([`super::REFUSED_RETRY`]), so a refused session raises it within seconds; while
//!   refused it retries at least every ConnectRetryTime (the cap of every wait): window
//!   and quiet period are at least three of those.
//!
//! Not seen: a silent close (GoBGP, BIRD as above: the same as a switch that does not
//! know the peer) and a second speaker while ours holds the session (it is refused).
//! Pure, like the session: no clock, no I/O; the peer task feeds it and reports.

use super::State;
use crate::bgp::wire::{CeaseSubcode, ErrorKind};
use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

/// Signs within the window that raise the finding: one is the ordinary collision of a
/// reconnect, two a reconnect that collided twice.
pub const THRESHOLD: usize = 3;

/// The shortest window the signs are counted over.
pub const WINDOW: Duration = Duration::from_secs(300);

/// The shortest time without a sign after which the finding clears.
pub const QUIET: Duration = Duration::from_secs(600);

/// What the peer task tells the watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchInput {
    /// A NOTIFICATION received from the peer on a connection in `state`, while we had
    /// `own_connections` connections to the peer open (this one included).
    Notification {
        code: u8,
        subcode: u8,
        state: State,
        own_connections: usize,
    },
    /// A deadline from [`SecondSpeakerWatch::poll_timeout`] passed (or any turn).
    Tick,
}

impl WatchInput {
    /// Whether this is a sign (see the module documentation): a collision Cease not
    /// explained by a second connection of our own. The one rule, for the watch and for
    /// the session's retry after such a refusal ([`super::Input::Refusal`]).
    pub fn is_sign(&self) -> bool {
        match *self {
            WatchInput::Notification {
                code,
                subcode,
                state,
                own_connections,
            } => own_connections <= 1 && is_sign(code, subcode, state),
            WatchInput::Tick => false,
        }
    }
}

/// What the watch reports, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEvent {
    /// A sign was counted (the counter of collision Ceases).
    Sign { subcode: u8 },
    /// The finding is raised (or, with more signs, updated).
    Suspected(Finding),
    /// The quiet period passed: the finding is gone.
    Cleared,
}

/// The finding while it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    /// When it was raised.
    pub since: Instant,
    /// Signs within the window, at the latest.
    pub signs: usize,
    /// The Cease subcode of the latest sign.
    pub last_subcode: u8,
    /// The window the signs are counted over.
    pub window: Duration,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the peer refused {} connections within {}s with Cease 6/{} while this speaker \
             had no other connection to it: another BGP speaker on this node (Cilium's \
             embedded BGP, MetalLB's speaker, a bird) probably peers with it from the same \
             address; look for another process with a connection to the peer's port 179 \
             (ss -tnp)",
            self.signs,
            self.window.as_secs(),
            self.last_subcode,
        )
    }
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct SecondSpeakerWatch {
    window: Duration,
    quiet: Duration,
    /// The times of the signs within the window, oldest first.
    signs: VecDeque<Instant>,
    finding: Option<Finding>,
    events: VecDeque<WatchEvent>,
}

impl SecondSpeakerWatch {
    /// A watch for a session that retries at least every `connect_retry` while refused.
    pub fn new(connect_retry: Duration) -> SecondSpeakerWatch {
        let three = connect_retry.saturating_mul(3);
        SecondSpeakerWatch {
            window: WINDOW.max(three),
            quiet: QUIET.max(three),
            signs: VecDeque::new(),
            finding: None,
            events: VecDeque::new(),
        }
    }

    pub fn handle(&mut self, now: Instant, input: WatchInput) {
        if let WatchInput::Notification { subcode, .. } = input {
            if input.is_sign() {
                self.signs.push_back(now);
                self.events.push_back(WatchEvent::Sign { subcode });
                self.expire(now);
                if self.signs.len() >= THRESHOLD {
                    let finding = Finding {
                        since: self.finding.map_or(now, |f| f.since),
                        signs: self.signs.len(),
                        last_subcode: subcode,
                        window: self.window,
                    };
                    self.finding = Some(finding);
                    self.events.push_back(WatchEvent::Suspected(finding));
                }
                return;
            }
        }
        self.expire(now);
        let quiet_since = self.signs.back().copied();
        if self.finding.is_some() && quiet_since.is_none_or(|t| now >= t + self.quiet) {
            self.finding = None;
            self.events.push_back(WatchEvent::Cleared);
        }
    }

    /// Forgets signs older than the window; the latest is kept while a finding stands,
    /// as the start of its quiet period.
    fn expire(&mut self, now: Instant) {
        let keep = usize::from(self.finding.is_some());
        while self.signs.len() > keep
            && self
                .signs
                .front()
                .is_some_and(|t| now.saturating_duration_since(*t) >= self.window)
        {
            self.signs.pop_front();
        }
    }

    pub fn poll_event(&mut self) -> Option<WatchEvent> {
        self.events.pop_front()
    }

    /// When the finding clears unless another sign comes; `None` without a finding
    /// (signs below the threshold need no timer: they expire on the next sign).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.finding?;
        self.signs.back().map(|t| *t + self.quiet)
    }

    /// The finding, while it stands.
    pub fn finding(&self) -> Option<&Finding> {
        self.finding.as_ref()
    }
}

/// A Cease that refuses a connection (RFC 4486): Connection Rejected or Collision
/// Resolution in any state, Other Configuration Change only before Established.
fn is_sign(code: u8, subcode: u8, state: State) -> bool {
    match ErrorKind::from_codes(code, subcode) {
        ErrorKind::Cease(
            CeaseSubcode::ConnectionCollisionResolution | CeaseSubcode::ConnectionRejected,
        ) => true,
        ErrorKind::Cease(CeaseSubcode::OtherConfigurationChange) => state != State::Established,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cease(subcode: u8, state: State, own_connections: usize) -> WatchInput {
        WatchInput::Notification {
            code: 6,
            subcode,
            state,
            own_connections,
        }
    }

    fn events(w: &mut SecondSpeakerWatch) -> Vec<WatchEvent> {
        std::iter::from_fn(|| w.poll_event()).collect()
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn three_unexplained_collision_ceases_in_the_window_raise_it_and_quiet_clears_it() {
        let t0 = Instant::now();
        let mut w = SecondSpeakerWatch::new(s(5));
        // The session's backoff after each refusal: 1 s, 2 s.
        w.handle(t0, cease(7, State::OpenConfirm, 1));
        w.handle(t0 + s(1), cease(7, State::OpenConfirm, 1));
        assert_eq!(
            events(&mut w),
            [
                WatchEvent::Sign { subcode: 7 },
                WatchEvent::Sign { subcode: 7 }
            ]
        );
        assert_eq!(w.finding(), None);
        assert_eq!(w.poll_timeout(), None);
        w.handle(t0 + s(3), cease(7, State::OpenSent, 1));
        let raised = Finding {
            since: t0 + s(3),
            signs: 3,
            last_subcode: 7,
            window: WINDOW,
        };
        assert_eq!(
            events(&mut w),
            [
                WatchEvent::Sign { subcode: 7 },
                WatchEvent::Suspected(raised)
            ]
        );
        // A later sign keeps it and moves the quiet period; `since` stays.
        w.handle(t0 + s(100), cease(5, State::OpenSent, 1));
        let more = Finding {
            signs: 4,
            last_subcode: 5,
            ..raised
        };
        assert_eq!(
            events(&mut w),
            [WatchEvent::Sign { subcode: 5 }, WatchEvent::Suspected(more)]
        );
        assert_eq!(w.poll_timeout(), Some(t0 + s(100) + QUIET));
        w.handle(t0 + s(100) + QUIET - s(1), WatchInput::Tick);
        assert_eq!(events(&mut w), []);
        assert_eq!(w.finding(), Some(&more));
        w.handle(t0 + s(100) + QUIET, WatchInput::Tick);
        assert_eq!(events(&mut w), [WatchEvent::Cleared]);
        assert_eq!(w.finding(), None);
        assert_eq!(w.poll_timeout(), None);
        // Cleared means counted from nothing again.
        w.handle(t0 + s(2000), cease(7, State::OpenConfirm, 1));
        w.handle(t0 + s(2001), cease(7, State::OpenConfirm, 1));
        assert_eq!(w.finding(), None);
    }

    #[test]
    fn signs_further_apart_than_the_window_never_raise_it() {
        let t0 = Instant::now();
        let mut w = SecondSpeakerWatch::new(s(5));
        for i in 0..10 {
            w.handle(t0 + WINDOW / 2 * i, cease(7, State::OpenConfirm, 1));
        }
        assert_eq!(w.finding(), None);
        // Three within it do.
        let t1 = t0 + WINDOW * 10;
        for i in 0..3 {
            w.handle(t1 + WINDOW / 3 * i, cease(7, State::OpenConfirm, 1));
        }
        assert!(w.finding().is_some());
    }

    #[test]
    fn collisions_of_our_own_two_connections_and_other_notifications_are_no_sign() {
        let t0 = Instant::now();
        let mut w = SecondSpeakerWatch::new(s(5));
        for i in 0..10 {
            let t = t0 + s(i);
            // Both sides dialed: the switch closes one of our two connections.
            w.handle(t, cease(7, State::OpenConfirm, 2));
            // A hold timer, an administrative reset, an operator's change of the
            // neighbour on an Established session.
            w.handle(
                t,
                WatchInput::Notification {
                    code: 4,
                    subcode: 0,
                    state: State::Established,
                    own_connections: 1,
                },
            );
            w.handle(t, cease(4, State::Established, 1));
            w.handle(t, cease(6, State::Established, 1));
        }
        assert_eq!(events(&mut w), []);
        assert_eq!(w.finding(), None);
        // Cease 6 refusing a connection before Established is one.
        w.handle(t0 + s(20), cease(6, State::OpenSent, 1));
        assert_eq!(events(&mut w), [WatchEvent::Sign { subcode: 6 }]);
    }

    #[test]
    fn a_long_connect_retry_widens_the_window_and_the_quiet_period() {
        // Refused every 300 s (the session's retry cap): still three in the window,
        // and the finding stands between two refusals.
        let t0 = Instant::now();
        let mut w = SecondSpeakerWatch::new(s(300));
        for i in 0..3 {
            w.handle(t0 + s(300) * i, cease(7, State::OpenConfirm, 1));
        }
        assert!(w.finding().is_some());
        w.handle(t0 + s(899), WatchInput::Tick);
        assert!(w.finding().is_some());
        assert_eq!(w.poll_timeout(), Some(t0 + s(600) + s(900)));
    }
}
