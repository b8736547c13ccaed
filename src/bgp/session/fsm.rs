//! [`Session`]: the RFC 4271 section 8 state machine for one connection attempt at a
//! time. Inputs come in through [`Session::handle`] with the time they happened at; what
//! the driver must do comes out of [`Session::poll_action`]; the next deadline out of
//! [`Session::poll_timeout`]. No clock, no socket, no task: the module never blocks and
//! never panics on an input.

use super::open::{local_open, negotiate};
use super::received::{end_of_rib_marker, Received, RECEIVED_CEILING};
use super::timers::{
    jitter, Backoff, Timer, Timers, OPEN_HOLD_TIME, REFUSED_RETRY, STABLE_ESTABLISHED,
};
use super::{
    Action, Input, MaxPrefixAction, Negotiated, NotificationInfo, SessionConfig, SessionError,
    State, Stats, StopReason,
};
use crate::bgp::wire::{
    AfiSafi, CeaseSubcode, DecodeError, FsmError, Message, MessageType, Notification, Open,
    PathAttribute, RouteRefresh, RouteRefreshSubtype, Update,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};
use tracing::debug;

/// One BGP session with one peer. See the module documentation of
/// [`crate::bgp::session`] for the driver's side of the contract.
#[derive(Debug, Clone)]
pub struct Session {
    cfg: SessionConfig,
    local_open: Open,
    state: State,
    /// AutomaticStart is allowed: set by [`Input::Start`], cleared by a stop that must
    /// stick and by [`Input::Hold`].
    auto_restart: bool,
    /// This speaker has (re)started and no session of this peer has reached Established
    /// since: our OPEN carries the Restart State bit (RFC 4724 section 4.1).
    restarting: bool,
    conn: Option<Connection>,
    timers: Timers,
    backoff: Backoff,
    /// Set from the peer's accepted OPEN (OpenConfirm, Established).
    negotiated: Option<Negotiated>,
    received: Received,
    outbound: BTreeMap<AfiSafi, Outbound>,
    max_prefix_warned: BTreeSet<AfiSafi>,
    stats: Stats,
    actions: VecDeque<Action>,
}

/// How an end of the connection counts for the retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// Not a failure (a stop): the count stays.
    None,
    /// A failure: the wait doubles up to the ConnectRetryTime.
    Backoff,
    /// A refusal because another speaker holds the peer's session from our address: the
    /// wait stops growing at [`REFUSED_RETRY`] (see there).
    Refused,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Connection {
    inbound: bool,
}

/// Where the re-advertisement of one family's table stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outbound {
    /// The initial table is being sent. A ROUTE-REFRESH received meanwhile waits for the
    /// End-of-RIB (RFC 7313 section 4: no BoRR before the End-of-RIB).
    Initial {
        refresh_pending: bool,
    },
    Idle,
    /// A re-advertisement is under way; `again` when another request came during it (the
    /// table is walked once more after this one, since the request may concern routes
    /// already sent).
    Refreshing {
        again: bool,
    },
}

impl Session {
    /// A session in Idle; nothing happens until [`Input::Start`].
    pub fn new(cfg: SessionConfig) -> Result<Self, SessionError> {
        cfg.validate()?;
        Ok(Session {
            local_open: local_open(&cfg, true),
            backoff: Backoff::new(cfg.jitter_seed),
            state: State::Idle,
            auto_restart: false,
            restarting: true,
            conn: None,
            timers: Timers::default(),
            negotiated: None,
            received: Received::new(&[], RECEIVED_CEILING),
            outbound: BTreeMap::new(),
            max_prefix_warned: BTreeSet::new(),
            stats: Stats::default(),
            actions: VecDeque::new(),
            cfg,
        })
    }

    /// A session for a connection the peer opened while the long-lived session is past
    /// Active (a collision candidate, see [`super::detect_collision`]): started, in Active
    /// without dialing, and already holding the connection; its first actions (the OPEN)
    /// are queued. Should it win and outlive the other, it behaves as `cfg` says
    /// afterwards (dialing after a failure unless passive).
    pub fn inbound(cfg: SessionConfig, now: Instant) -> Result<Self, SessionError> {
        Session::inbound_with(cfg, true, now)
    }

    /// [`Session::inbound`] beside `main`, the driver's long-lived session of the same
    /// peer: its OPEN claims a restart (the R bit) only while `main` still does.
    pub fn inbound_beside(main: &Session, now: Instant) -> Result<Self, SessionError> {
        Session::inbound_with(main.cfg.clone(), main.restarting, now)
    }

    fn inbound_with(
        cfg: SessionConfig,
        restarting: bool,
        now: Instant,
    ) -> Result<Self, SessionError> {
        let mut session = Session::new(cfg)?;
        session.set_restarting(restarting);
        session.auto_restart = true;
        session.transition(State::Active);
        session.on_connected(now, true);
        Ok(session)
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// Whether stopping now with [`StopReason::Restart`] keeps our routes at the peer:
    /// Established with graceful restart negotiated (RFC 4724 section 4). The driver
    /// asks before it starts a graceful shutdown (RFC 8326), which such a restart skips.
    pub fn graceful_restart_in_force(&self) -> bool {
        self.state == State::Established
            && self.negotiated.as_ref().is_some_and(|n| n.graceful_restart)
    }

    /// The negotiated parameters, from the moment the peer's OPEN is accepted
    /// (OpenConfirm) until the session leaves Established.
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// The OPEN this session sends.
    pub fn local_open(&self) -> &Open {
        &self.local_open
    }

    /// Whether the session's connection was opened by the peer; `None` without one.
    pub fn connection_inbound(&self) -> Option<bool> {
        self.conn.map(|c| c.inbound)
    }

    /// Failed attempts since the last stable session: what the retry backoff is at.
    pub fn consecutive_failures(&self) -> u32 {
        self.backoff.failures()
    }

    /// When the session dials again on its own: the end of its wait in Idle after a
    /// failure. `None` while it is not waiting (connecting, connected, passive, or
    /// stopped for good).
    pub fn next_retry(&self) -> Option<Instant> {
        if self.state == State::Idle && self.auto_restart {
            self.timers.get(Timer::IdleHold)
        } else {
            None
        }
    }

    /// Whether [`Input::TcpConnected`] with this direction would be adopted rather than
    /// rejected: in Connect or Active without a connection, and, for a connection the
    /// peer opened, also in Idle while waiting to retry (an automatic start with passive
    /// TCP establishment, RFC 4271 section 8.1.1 Event 5: the peer's own retry is as good
    /// as ours, and refusing it would only lengthen the outage).
    pub fn accepts(&self, inbound: bool) -> bool {
        if self.conn.is_some() {
            return false;
        }
        match self.state {
            State::Connect | State::Active => true,
            State::Idle => inbound && self.next_retry().is_some(),
            State::OpenSent | State::OpenConfirm | State::Established => false,
        }
    }

    /// Whether our OPEN carries the Restart State bit: from the start of the session
    /// until it first reaches Established (RFC 4724 section 4.1: the speaker has
    /// restarted, so the peer must not wait for our End-of-RIB before sending its own
    /// routes; we never wait for the peer's either).
    pub fn restarting(&self) -> bool {
        self.restarting
    }

    fn set_restarting(&mut self, restarting: bool) {
        if self.restarting != restarting {
            self.restarting = restarting;
            self.local_open = local_open(&self.cfg, restarting);
        }
    }

    /// When timer `t` fires, if it runs.
    pub fn deadline(&self, t: Timer) -> Option<Instant> {
        self.timers.get(t)
    }

    /// The earliest deadline: call `handle(now, Input::Timeout)` once it has passed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// The next thing the driver must do; drain until `None` after every `handle`.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Adds the counters of the session this one replaces (the loser of a connection
    /// collision that was the driver's long-lived session), so that `status` and flap
    /// counts stay continuous.
    pub fn inherit_history(&mut self, previous: &Session) {
        let p = &previous.stats;
        self.stats.sent.add(&p.sent);
        self.stats.received.add(&p.received);
        self.stats.flaps = self.stats.flaps.saturating_add(p.flaps);
        self.stats.established_count = self
            .stats
            .established_count
            .saturating_add(p.established_count);
        self.stats.updates_dropped = self.stats.updates_dropped.saturating_add(p.updates_dropped);
        if self.stats.last_error.is_none() {
            self.stats.last_error = p.last_error.clone();
        }
    }

    pub fn handle(&mut self, now: Instant, input: Input) {
        match input {
            Input::Start => self.on_start(now),
            Input::Hold { message } => self.on_hold(now, message),
            Input::Stop { reason } => self.on_stop(now, reason),
            Input::TcpConnected { inbound } => self.on_connected(now, inbound),
            Input::TcpFailed => self.on_tcp_failed(now),
            Input::TcpClosed => self.on_tcp_closed(now),
            Input::Message(m) => self.on_message(now, m),
            Input::Refusal(n) => self.on_refusal(now, n),
            Input::DecodeError(n) => self.on_decode_error(now, n),
            Input::Timeout => self.on_timeout(now),
            Input::Updates(updates) => self.on_updates(now, updates),
            Input::TableSent(f) => self.on_table_sent(now, f),
        }
    }

    fn on_start(&mut self, now: Instant) {
        // Outside Idle the session is running (or held while Established): the start
        // only allows its automatic restart again.
        self.auto_restart = true;
        if self.state != State::Idle {
            return;
        }
        self.timers.stop(Timer::IdleHold);
        self.begin(now);
    }

    /// AutomaticStart disallowed until the next Start. Established: carries on (the
    /// routes stay), and the teardown that ends it starts no retry. Idle: the retry
    /// timer stops, and no connection of the peer is adopted (`accepts`). Any other
    /// state is a new session under way: stopped now.
    fn on_hold(&mut self, now: Instant, message: String) {
        match self.state {
            State::Established => self.auto_restart = false,
            State::Idle => {
                self.auto_restart = false;
                self.timers.stop(Timer::IdleHold);
            }
            State::Connect | State::Active | State::OpenSent | State::OpenConfirm => {
                self.auto_restart = false;
                let notification = matches!(self.state, State::OpenSent | State::OpenConfirm)
                    .then(|| Notification::admin_shutdown(&message));
                self.teardown(
                    now,
                    SessionError::Stopped(StopReason::Held(message)),
                    notification,
                    Failure::None,
                );
            }
        }
    }

    /// Leaves Idle: dial (Connect) or wait for the peer (Active). A dial still pending
    /// after the ConnectRetryTime (jittered) has failed.
    fn begin(&mut self, now: Instant) {
        if self.cfg.passive {
            self.transition(State::Active);
        } else {
            self.transition(State::Connect);
            self.push(Action::Connect);
            let after = jitter(self.cfg.connect_retry, self.backoff.draw());
            self.timers.start(Timer::ConnectRetry, now, after);
        }
    }

    fn on_stop(&mut self, now: Instant, reason: StopReason) {
        let established_gr = self.graceful_restart_in_force();
        let (notification, restart) = match &reason {
            StopReason::AdminShutdown(m) => (Some(Notification::admin_shutdown(m)), false),
            StopReason::AdminReset(m) => (Some(Notification::admin_reset(m)), true),
            StopReason::PeerDeconfigured => (
                Some(Notification::cease(CeaseSubcode::PeerDeconfigured)),
                false,
            ),
            StopReason::Restart(_) if established_gr => (None, false),
            StopReason::Restart(m) => (Some(Notification::admin_shutdown(m)), false),
            StopReason::CollisionResolution => (
                Some(Notification::cease(
                    CeaseSubcode::ConnectionCollisionResolution,
                )),
                false,
            ),
            StopReason::PeerRestarted => (None, false),
            StopReason::Held(m) => (Some(Notification::admin_shutdown(m)), false),
            StopReason::BfdDown => (Some(Notification::cease(CeaseSubcode::BfdDown)), true),
        };
        // A reset brings back a session that was running, never one that was stopped.
        self.auto_restart = restart && self.auto_restart;
        self.teardown(
            now,
            SessionError::Stopped(reason),
            notification,
            Failure::None,
        );
    }

    fn on_connected(&mut self, now: Instant, inbound: bool) {
        if !self.accepts(inbound) {
            // A stopped session refuses every connection (RFC 4271 section 8.2.2), and
            // so does one waiting to dial for its own; past Active the session has its
            // connection, and a second one is the driver's collision candidate, handled
            // by another Session.
            debug!(state = %self.state, inbound, "rejecting connection");
            self.push(Action::RejectConnection);
            return;
        }
        if self.state == State::Idle {
            // Waiting to retry: the peer came first. Its connection is the attempt.
            self.timers.stop(Timer::IdleHold);
            self.transition(State::Active);
        }
        self.conn = Some(Connection { inbound });
        self.timers.stop(Timer::ConnectRetry);
        match self.cfg.delay_open {
            Some(d) => self.timers.start(Timer::DelayOpen, now, d),
            None => self.open_connection(now),
        }
    }

    /// Sends our OPEN and waits for the peer's, with the large OpenSent hold time.
    fn open_connection(&mut self, now: Instant) {
        self.send(now, Message::Open(self.local_open.clone()));
        self.transition(State::OpenSent);
        self.timers.start(Timer::Hold, now, OPEN_HOLD_TIME);
    }

    fn on_tcp_failed(&mut self, now: Instant) {
        if self.conn.is_some() {
            self.teardown(now, SessionError::ConnectionClosed, None, Failure::Backoff);
        } else if self.state == State::Connect {
            self.teardown(now, SessionError::ConnectionFailed, None, Failure::Backoff);
        } else {
            debug!(state = %self.state, "ignoring connection failure without a dial");
        }
    }

    fn on_tcp_closed(&mut self, now: Instant) {
        if self.conn.is_some() {
            self.teardown(now, SessionError::ConnectionClosed, None, Failure::Backoff);
        } else {
            debug!(state = %self.state, "ignoring close without a connection");
        }
    }

    /// A NOTIFICATION like any other, retried after the short wait of a refusal.
    fn on_refusal(&mut self, now: Instant, n: Notification) {
        if self.conn.is_none() {
            debug!(state = %self.state, "ignoring refusal without a connection");
            return;
        }
        let reason = SessionError::NotificationReceived(NotificationInfo::from(&n));
        self.stats.received.count(&Message::Notification(n));
        self.teardown(now, reason, None, Failure::Refused);
    }

    fn on_decode_error(&mut self, now: Instant, n: Notification) {
        if self.conn.is_some() {
            self.send_error(now, n);
        } else {
            debug!(state = %self.state, "ignoring decode error without a connection");
        }
    }

    fn on_message(&mut self, now: Instant, m: Message) {
        if self.conn.is_none() {
            debug!(state = %self.state, "ignoring message without a connection");
            return;
        }
        self.stats.received.count(&m);
        match (self.state, m) {
            (_, Message::Notification(n)) => {
                let reason = SessionError::NotificationReceived(NotificationInfo::from(&n));
                self.teardown(now, reason, None, Failure::Backoff);
            }
            (State::Connect | State::Active, Message::Open(open)) => {
                // Only with DelayOpen running: answer at once (RFC 4271 section 8.2.2,
                // Event 20 in Connect and Active).
                self.on_open(now, &open, true);
            }
            (State::Connect | State::Active, _) => self.fsm_error(now, FsmError::Unspecified),
            (State::OpenSent, Message::Open(open)) => self.on_open(now, &open, false),
            (State::OpenSent, _) => self.fsm_error(now, FsmError::UnexpectedInOpenSent),
            (State::OpenConfirm, Message::Keepalive) => self.on_established(now),
            (State::OpenConfirm, _) => self.fsm_error(now, FsmError::UnexpectedInOpenConfirm),
            (State::Established, Message::Keepalive) => self.restart_hold(now),
            (State::Established, Message::Update(update)) => {
                self.restart_hold(now);
                self.on_update(now, &update);
            }
            (State::Established, Message::RouteRefresh(rr)) => self.on_route_refresh(now, rr),
            (State::Established, Message::Open(_)) => {
                self.fsm_error(now, FsmError::UnexpectedInEstablished)
            }
            (State::Idle, _) => {}
        }
    }

    fn on_open(&mut self, now: Instant, open: &Open, delayed: bool) {
        let negotiated = match negotiate(&self.cfg, open) {
            Ok(n) => n,
            Err(n) => return self.send_error(now, n),
        };
        if delayed {
            self.timers.stop(Timer::DelayOpen);
            self.send(now, Message::Open(self.local_open.clone()));
        }
        self.transition(State::OpenConfirm);
        let hold = negotiated.hold_time;
        self.negotiated = Some(negotiated);
        if hold == 0 {
            self.timers.stop(Timer::Hold);
        } else {
            self.timers
                .start(Timer::Hold, now, Duration::from_secs(hold.into()));
        }
        // Starts the keepalive timer unless the hold time is zero.
        self.send(now, Message::Keepalive);
    }

    fn on_established(&mut self, now: Instant) {
        let Some(negotiated) = self.negotiated.clone() else {
            // OpenConfirm always has the negotiated parameters; treat a broken invariant
            // as an FSM error rather than panic.
            return self.fsm_error(now, FsmError::UnexpectedInOpenConfirm);
        };
        self.transition(State::Established);
        // The restart is over for this peer: later OPENs (after a flap of this
        // session, not of the speaker) no longer claim one.
        self.set_restarting(false);
        self.restart_hold(now);
        self.stats.established_since = Some(now);
        self.stats.established_count = self.stats.established_count.saturating_add(1);
        let ceiling = self.cfg.max_prefix.map_or(RECEIVED_CEILING, |m| {
            RECEIVED_CEILING.max((m.limit as usize).saturating_add(1))
        });
        self.received = Received::new(&negotiated.families, ceiling);
        self.stats.received_prefixes = self.received.counts();
        self.stats.peer_end_of_rib.clear();
        self.outbound = negotiated
            .families
            .iter()
            .map(|f| {
                (
                    *f,
                    Outbound::Initial {
                        refresh_pending: false,
                    },
                )
            })
            .collect();
        let families = negotiated.families.clone();
        self.push(Action::Established(negotiated));
        for afi_safi in families {
            self.push(Action::SendTable {
                afi_safi,
                refresh: false,
            });
        }
    }

    fn on_update(&mut self, now: Instant, update: &Update) {
        let applied = self.received.apply(update);
        if let Some(f) = applied.end_of_rib {
            if !self.stats.peer_end_of_rib.contains(&f) {
                self.stats.peer_end_of_rib.push(f);
            }
        }
        if applied.treated_as_withdraw {
            debug!("update treated as withdraw (rfc 7606)");
            self.stats.treated_as_withdraw = self.stats.treated_as_withdraw.saturating_add(1);
        }
        if applied.ignored > 0 {
            debug!(
                prefixes = applied.ignored,
                "ignoring prefixes of a family not negotiated"
            );
        }
        for f in applied.touched {
            if !self.record_count(now, f) {
                return;
            }
        }
    }

    /// Updates the count of `f` in the stats and applies the max-prefix limit. False when
    /// the limit closed the session.
    fn record_count(&mut self, now: Instant, f: AfiSafi) -> bool {
        let count = self.received.count(f);
        self.stats.received_prefixes.insert(f, count);
        let Some(max) = self.cfg.max_prefix else {
            return true;
        };
        if count.count <= u64::from(max.limit) {
            self.max_prefix_warned.remove(&f);
            return true;
        }
        match max.action {
            MaxPrefixAction::Warn => {
                if self.max_prefix_warned.insert(f) {
                    self.push(Action::MaxPrefixExceeded {
                        afi_safi: f,
                        count: count.count,
                        limit: max.limit,
                    });
                }
                true
            }
            MaxPrefixAction::Cease => {
                let n = Notification::max_prefixes_reached(f, max.limit);
                self.send_error(now, n);
                false
            }
        }
    }

    fn on_route_refresh(&mut self, now: Instant, rr: RouteRefresh) {
        if !self.cfg.route_refresh {
            // We did not advertise the capability: to us this is an unknown message type
            // (RFC 2918 section 3, RFC 4271 section 6.1).
            return self.send_error(
                now,
                DecodeError::BadMessageType {
                    msg_type: MessageType::RouteRefresh as u8,
                }
                .notification(),
            );
        }
        let Some(negotiated) = &self.negotiated else {
            return;
        };
        let f = rr.afi_safi;
        if !negotiated.has_family(f) {
            // RFC 2918 section 4: a family we did not advertise is ignored.
            debug!(
                afi = f.afi.0,
                safi = f.safi.0,
                "ignoring route refresh for a family not negotiated"
            );
            return;
        }
        let peer_gr = negotiated.peer_graceful_restart.is_some();
        match rr.subtype {
            RouteRefreshSubtype::Request => match self.outbound.get(&f).copied() {
                Some(Outbound::Initial { .. }) => {
                    self.outbound.insert(
                        f,
                        Outbound::Initial {
                            refresh_pending: true,
                        },
                    );
                }
                Some(Outbound::Idle) => self.start_refresh(now, f),
                Some(Outbound::Refreshing { .. }) => {
                    self.outbound
                        .insert(f, Outbound::Refreshing { again: true });
                }
                None => {}
            },
            RouteRefreshSubtype::Borr => {
                // RFC 7313 section 4: a BoRR before the peer's End-of-RIB is ignored when
                // the peer does graceful restart.
                if peer_gr && !self.received.end_of_rib_received(f) {
                    debug!(
                        afi = f.afi.0,
                        safi = f.safi.0,
                        "ignoring borr before the peer's end-of-rib"
                    );
                    return;
                }
                self.received.begin_refresh(f);
            }
            RouteRefreshSubtype::Eorr => {
                if let Some(purged) = self.received.end_refresh(f) {
                    debug!(
                        afi = f.afi.0,
                        safi = f.safi.0,
                        purged,
                        "peer route refresh complete"
                    );
                    self.record_count(now, f);
                }
            }
            RouteRefreshSubtype::Reserved(subtype) => {
                // RFC 7313 section 5: ignored.
                debug!(subtype, "ignoring route refresh with a reserved subtype");
            }
        }
    }

    fn start_refresh(&mut self, now: Instant, f: AfiSafi) {
        if self.enhanced() {
            self.send(
                now,
                Message::RouteRefresh(RouteRefresh {
                    afi_safi: f,
                    subtype: RouteRefreshSubtype::Borr,
                }),
            );
        }
        self.outbound
            .insert(f, Outbound::Refreshing { again: false });
        self.push(Action::SendTable {
            afi_safi: f,
            refresh: true,
        });
    }

    fn enhanced(&self) -> bool {
        self.negotiated
            .as_ref()
            .is_some_and(|n| n.enhanced_route_refresh)
    }

    fn on_updates(&mut self, now: Instant, updates: Vec<Update>) {
        if self.state != State::Established {
            self.stats.updates_dropped = self
                .stats
                .updates_dropped
                .saturating_add(updates.len() as u64);
            return;
        }
        for update in updates {
            if self.sendable(&update) {
                self.send(now, Message::Update(update));
            } else {
                debug!("dropping an update for a family not negotiated");
                self.stats.updates_dropped = self.stats.updates_dropped.saturating_add(1);
            }
        }
    }

    /// Every family the UPDATE touches is negotiated (the plain NLRI and withdrawn fields,
    /// and an empty UPDATE, are IPv4 unicast).
    fn sendable(&self, update: &Update) -> bool {
        let Some(n) = &self.negotiated else {
            return false;
        };
        let mut mp = false;
        for attr in &update.attributes {
            let f = match attr {
                PathAttribute::MpReach(r) => r.afi_safi,
                PathAttribute::MpUnreach(u) => u.afi_safi,
                _ => continue,
            };
            mp = true;
            if !n.has_family(f) {
                return false;
            }
        }
        let ipv4_fields = !update.nlri.is_empty() || !update.withdrawn.is_empty() || !mp;
        !ipv4_fields || n.has_family(AfiSafi::IPV4_UNICAST)
    }

    fn on_table_sent(&mut self, now: Instant, f: AfiSafi) {
        if self.state != State::Established {
            return;
        }
        match self.outbound.get(&f).copied() {
            Some(Outbound::Initial { refresh_pending }) => {
                // RFC 4724 section 4: End-of-RIB once the initial update is complete,
                // even when it was empty.
                self.send(now, Message::Update(end_of_rib_marker(f)));
                if refresh_pending {
                    self.start_refresh(now, f);
                } else {
                    self.outbound.insert(f, Outbound::Idle);
                }
            }
            Some(Outbound::Refreshing { again }) => {
                if self.enhanced() {
                    self.send(
                        now,
                        Message::RouteRefresh(RouteRefresh {
                            afi_safi: f,
                            subtype: RouteRefreshSubtype::Eorr,
                        }),
                    );
                }
                if again {
                    self.start_refresh(now, f);
                } else {
                    self.outbound.insert(f, Outbound::Idle);
                }
            }
            Some(Outbound::Idle) | None => {
                debug!(
                    afi = f.afi.0,
                    safi = f.safi.0,
                    "ignoring table-sent without a table asked for"
                );
            }
        }
    }

    fn on_timeout(&mut self, now: Instant) {
        // Each firing stops its timer and only restarts timers into the future (every
        // duration is at least 1 ns), so this ends; the bound is a second guard.
        for _ in 0..2 * Timer::ALL.len() {
            let Some(t) = self.timers.expired(now) else {
                return;
            };
            self.timers.stop(t);
            self.fire(now, t);
        }
    }

    fn fire(&mut self, now: Instant, t: Timer) {
        match t {
            Timer::Hold if self.conn.is_some() => {
                self.teardown(
                    now,
                    SessionError::HoldTimerExpired,
                    Some(Notification::hold_timer_expired()),
                    Failure::Backoff,
                );
            }
            Timer::DelayOpen
                if self.conn.is_some() && matches!(self.state, State::Connect | State::Active) =>
            {
                self.open_connection(now)
            }
            Timer::Keepalive if matches!(self.state, State::OpenConfirm | State::Established) => {
                self.send(now, Message::Keepalive)
            }
            Timer::ConnectRetry if self.state == State::Connect && self.conn.is_none() => {
                // RFC 4271 section 8.2.2 Connect, Event 9: the attempt took too long.
                // It failed like a refused one: abandoned, and retried after the backoff.
                self.teardown(now, SessionError::ConnectionFailed, None, Failure::Backoff);
            }
            Timer::IdleHold if self.state == State::Idle && self.auto_restart => self.begin(now),
            _ => {}
        }
    }

    fn fsm_error(&mut self, now: Instant, subcode: FsmError) {
        self.send_error(now, Notification::fsm_error(subcode));
    }

    /// Sends a NOTIFICATION for an error we detected and closes.
    fn send_error(&mut self, now: Instant, n: Notification) {
        let reason = SessionError::NotificationSent(NotificationInfo::from(&n));
        self.teardown(now, reason, Some(n), Failure::Backoff);
    }

    /// Leaves whatever state for Idle: the NOTIFICATION (when there is a connection to
    /// send it on), the close, the state change, `Down` when leaving Established, and the
    /// automatic restart when allowed.
    fn teardown(
        &mut self,
        now: Instant,
        reason: SessionError,
        notification: Option<Notification>,
        failure: Failure,
    ) {
        let from = self.state;
        match notification {
            Some(n) if self.conn.is_some() => {
                self.send(now, Message::Notification(n));
                self.push(Action::CloseConnection { notify: true });
            }
            _ if self.conn.is_some() || from == State::Connect => {
                self.push(Action::CloseConnection { notify: false });
            }
            _ => {}
        }
        self.conn = None;
        self.timers.stop_all();
        self.negotiated = None;
        self.outbound.clear();
        self.received = Received::new(&[], RECEIVED_CEILING);
        self.stats.received_prefixes.clear();
        self.stats.peer_end_of_rib.clear();
        self.max_prefix_warned.clear();
        if from == State::Established {
            self.stats.flaps = self.stats.flaps.saturating_add(1);
            let lasted = self
                .stats
                .established_since
                .take()
                .map(|since| now.saturating_duration_since(since));
            if lasted.is_some_and(|d| d >= STABLE_ESTABLISHED) {
                self.backoff.reset();
            }
        }
        let cap = match failure {
            Failure::None => self.cfg.connect_retry,
            Failure::Backoff => {
                self.backoff.fail();
                self.cfg.connect_retry
            }
            Failure::Refused => {
                self.backoff.fail();
                self.backoff.hold_at(REFUSED_RETRY);
                REFUSED_RETRY.min(self.cfg.connect_retry)
            }
        };
        self.stats.last_error = Some(reason.clone());
        self.transition(State::Idle);
        if from == State::Established {
            self.push(Action::Down { reason });
        }
        if self.auto_restart {
            if self.cfg.passive {
                // The peer dials, and its own retry timer paces the attempts: waiting
                // here could only make us refuse its next one.
                self.begin(now);
            } else {
                let after = self.backoff.delay(cap);
                self.timers.start(Timer::IdleHold, now, after);
            }
        }
    }

    fn restart_hold(&mut self, now: Instant) {
        if let Some(n) = &self.negotiated {
            if n.hold_time > 0 {
                let hold = Duration::from_secs(n.hold_time.into());
                self.timers.start(Timer::Hold, now, hold);
            }
        }
    }

    /// Queues a message and keeps the books: counters, and the keepalive timer, which
    /// restarts whenever a KEEPALIVE or UPDATE goes out (RFC 4271 section 8.2.2,
    /// Established).
    fn send(&mut self, now: Instant, m: Message) {
        self.stats.sent.count(&m);
        if matches!(m, Message::Keepalive | Message::Update(_)) {
            if let Some(n) = &self.negotiated {
                if n.keepalive > 0 {
                    let every = Duration::from_secs(n.keepalive.into());
                    self.timers.start(Timer::Keepalive, now, every);
                }
            }
        }
        self.push(Action::Send(m));
    }

    fn transition(&mut self, to: State) {
        if self.state != to {
            self.push(Action::StateChange {
                from: self.state,
                to,
            });
            self.state = to;
        }
    }

    fn push(&mut self, action: Action) {
        self.actions.push_back(action);
    }
}
