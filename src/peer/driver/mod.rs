//! The peer task: one per configured peer, the only place a BGP session meets a socket.
//! It frames and decodes what the connection delivers, feeds the session
//! (src/bgp/session), carries out the session's actions (dial, write, close), runs its
//! timers, and pumps the Adj-RIB-Out into the session while the write buffer has room.
//!
//! One `select!` waits on everything: the connection readable, the connection writable
//! when output is pending, the session's next deadline, a dial completing, an inbound
//! connection, a new desired route set, LoadBalancer changes, a routes query, the BFD
//! status, the hold on new sessions, an ask to turn (`Beat`), and shutdown. State transitions are logged in
//! one place ([`Task::act`]), every NOTIFICATION sent or received with one warn!.
//!
//! Collisions (RFC 4271 section 6.8) follow the session's design: one `Session` per
//! connection, a second one for a connection the peer opens while ours is past Active,
//! and `detect_collision` after every input to either.
//!
//! Files: this one (the loop, the session's actions, reading, collisions, reporting),
//! `conn` (a link's connection, bounded writes, the graceful close, the futures the
//! loop waits on), `stop` (carrying out the stop decision, the drain and the BFD
//! coupling's verdict).

mod conn;
mod stop;

use self::conn::{
    accept, bfd_changed, dialing, hold_changed, notification_text, query, readable, sleep_until,
    writable, Conn, Link, LinkRole,
};
use super::adj_rib_out::{AdjRibOut, RibSession};
use super::bfd::BfdStatus;
use super::lb_feed::{LbFeed, LbTake};
use super::listener::Inbound;
use super::observer::{Direction, PeerObserver};
use super::socket;
use super::spec::PeerSpec;
use super::{
    Beat, PeerError, PeerStatus, RoutesAnswer, RoutesQuery, Shutdown, DAEMON_GONE_MESSAGE,
};
use crate::bfd::coupling::Coupling;
use crate::bgp::session::{
    detect_collision, Action, Input, NotificationInfo, SecondSpeakerWatch, Session, Side, State,
    WatchEvent, WatchInput,
};
use crate::bgp::wire::{check_header, decode_message_bytes, encode_message, AfiSafi, Message};
use crate::config::PeerKey;
use crate::routes::drain::{Drain, DrainInput, RouteClass, Treatment};
use crate::routes::next_hop::SessionNextHops;
use crate::routes::{self, DesiredRoutes};
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

/// The write buffer is refilled from the Adj-RIB-Out only while it holds less than this:
/// a peer that stops reading costs at most this much memory (plus one batch, which is
/// computed to fit in what is left, and a few KEEPALIVEs).
pub const WRITE_THRESHOLD: usize = 256 * 1024;

/// How long a NOTIFICATION may take to leave before the connection is closed anyway,
/// and how long the peer gets to close its side afterwards.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Read size: several full-size messages per syscall.
const READ_CHUNK: usize = 64 * 1024;

type Dial = Pin<Box<dyn Future<Output = Result<TcpStream, PeerError>> + Send>>;

/// What woke the task.
enum Event {
    Shutdown(Shutdown),
    /// The daemon dropped its end of the shutdown channel.
    ShutdownClosed,
    Timeout,
    Readable(LinkRole),
    Writable(LinkRole),
    Dialed(Result<TcpStream, PeerError>),
    Inbound(TcpStream),
    InboundClosed,
    Desired,
    DesiredClosed,
    /// The daemon gave LoadBalancer routes (a full set or changes) through the feed.
    Lb,
    Query(RoutesQuery),
    QueriesClosed,
    /// The peer's BFD session published a new status.
    Bfd,
    /// The hold on new sessions was set or lifted.
    Hold,
    HoldClosed,
    BfdClosed,
    Nothing,
}

/// The peer task. See the module documentation.
pub(crate) struct Task {
    spec: PeerSpec,
    key: PeerKey,
    observer: Arc<dyn PeerObserver>,
    main: Link,
    candidate: Option<Link>,
    dial: Option<Dial>,
    rib: AdjRibOut,
    status: watch::Sender<PeerStatus>,
    /// When the desired set changed (or the session came up), until the UPDATEs that
    /// follow have all been written: what `PeerObserver::update_written` measures.
    changed_at: Option<Instant>,
    reported_announced: BTreeMap<AfiSafi, u64>,
    reported_received: BTreeMap<AfiSafi, u64>,
    /// Socket errors and refusals, for `status`; the session keeps its own last error.
    last_io_error: Option<String>,
    /// Stamped on every turn of the loop, for the daemon's liveness check.
    beat: Arc<Beat>,
    /// The socket took the whole write buffer and routes remain: refill on the next
    /// turn without waiting for an event (none would come).
    refill: bool,
    /// `status --routes` asking for the Adj-RIB-Out; `None` once every sender is gone.
    queries: Option<mpsc::Receiver<RoutesQuery>>,
    /// A graceful shutdown in progress.
    graceful: Option<Drain>,
    /// The peer's BFD session, as the BFD task publishes it (`None` on the channel: no
    /// session); `None` here: this task follows none.
    bfd: Option<watch::Receiver<Option<BfdStatus>>>,
    /// The coupling to the BFD session (RFC 5882): which failure tears the session down.
    bfd_coupling: Coupling,
    /// Set while a BFD failure stops the session: the path is down, so the Cease is
    /// handed to the socket and the connection closed without waiting for the peer
    /// (which cannot answer) to close its side.
    path_down: bool,
    /// Whether another speaker on this node peers with the switch from our address
    /// (`bgp::session::second_speaker`), from the NOTIFICATIONs received.
    second_speaker: SecondSpeakerWatch,
    /// The daemon's hold on new sessions (`Some(message)` while it stands); `None`
    /// here: this task follows none.
    hold: Option<watch::Receiver<Option<Arc<str>>>>,
    /// The hold in force: the session opens and adopts no connection (`Input::Hold`).
    held: Option<Arc<str>>,
}

impl Task {
    pub(crate) fn new(
        spec: PeerSpec,
        observer: Arc<dyn PeerObserver>,
        status: watch::Sender<PeerStatus>,
        beat: Arc<Beat>,
        queries: mpsc::Receiver<RoutesQuery>,
        mut bfd: Option<watch::Receiver<Option<BfdStatus>>>,
        hold: Option<watch::Receiver<Option<Arc<str>>>>,
    ) -> Result<Task, PeerError> {
        let session = Session::new(spec.session.clone())?;
        // Failures from before this task started (a BGP reset) are not this session's.
        let bfd_coupling = Coupling::new(
            bfd.as_mut()
                .and_then(|b| b.borrow_and_update().as_ref().map(|s| s.failures))
                .unwrap_or(0),
        );
        let second_speaker = SecondSpeakerWatch::new(spec.session.connect_retry);
        Ok(Task {
            key: spec.key,
            spec,
            observer,
            main: Link {
                session,
                conn: None,
                deferred: Vec::new(),
            },
            candidate: None,
            dial: None,
            rib: AdjRibOut::new(),
            status,
            changed_at: None,
            reported_announced: BTreeMap::new(),
            reported_received: BTreeMap::new(),
            last_io_error: None,
            beat,
            refill: false,
            queries: Some(queries),
            graceful: None,
            bfd,
            bfd_coupling,
            path_down: false,
            second_speaker,
            hold,
            held: None,
        })
    }

    pub(crate) async fn run(
        mut self,
        mut desired: watch::Receiver<Arc<DesiredRoutes>>,
        lb: Arc<LbFeed>,
        mut shutdown: watch::Receiver<Option<Shutdown>>,
        mut inbound: Option<Inbound>,
    ) {
        // A finding of an earlier task of this peer (before a reset) is not this one's:
        // its watch starts afresh, and so does what the metrics show.
        self.observer.second_speaker(&self.key, None);
        let first = desired.borrow_and_update().clone();
        self.rib.set_desired(first);
        self.take_lb(&lb, Instant::now());
        let mut desired_open = true;
        let mut shutdown_open = true;
        let now = Instant::now();
        // Held from the start: the session stays in Idle, neither dialing nor adopting
        // the peer's connection, until the hold is lifted.
        self.held = self
            .hold
            .as_mut()
            .and_then(|h| h.borrow_and_update().clone());
        let first = match &self.held {
            Some(message) => Input::Hold {
                message: message.to_string(),
            },
            None => Input::Start,
        };
        self.input(LinkRole::Main, now, first).await;
        self.after_event(now).await;
        loop {
            // A shutdown requested before the task started, or while it was busy (once
            // draining, only a new request counts: `next_event` sees it change).
            let requested = match self.graceful {
                None if shutdown_open => shutdown.borrow_and_update().clone(),
                _ => None,
            };
            let event = match requested {
                Some(mode) => Event::Shutdown(mode),
                None => {
                    self.next_event(
                        &mut desired,
                        desired_open,
                        &lb,
                        &mut shutdown,
                        shutdown_open,
                        &mut inbound,
                    )
                    .await
                }
            };
            let now = Instant::now();
            self.beat.beat(now);
            match event {
                Event::Shutdown(mode) => match self.graceful.as_mut() {
                    // A second request during a drain ends it at once.
                    Some(drain) => drain.handle(now, DrainInput::StopNow(mode.reason_now())),
                    None => {
                        if self.begin_stop(now, &mode).await {
                            break;
                        }
                    }
                },
                Event::ShutdownClosed => {
                    shutdown_open = false;
                    // The daemon is gone: leave as a restart would, routes kept by a GR
                    // peer (or drained first).
                    let mode = Shutdown::Restart(DAEMON_GONE_MESSAGE.into());
                    if self.graceful.is_none() && self.begin_stop(now, &mode).await {
                        break;
                    }
                }
                Event::Timeout => self.timeout(now).await,
                Event::Readable(w) => self.read(w, now).await,
                Event::Writable(w) => self.flush(w, now).await,
                Event::Dialed(r) => self.dialed(r, now).await,
                Event::Inbound(_) if self.graceful.is_some() => {
                    debug!("connection refused: the session is shutting down");
                }
                Event::Inbound(stream) => self.offer(stream, true, now).await,
                Event::InboundClosed => inbound = None,
                Event::Desired => {
                    let d = desired.borrow_and_update().clone();
                    match self.treatment(RouteClass::PodCidrs) {
                        Treatment::AsPlanned => self.rib.set_desired(d),
                        Treatment::Marked => self
                            .rib
                            .set_desired(Arc::new(routes::graceful_shutdown(&d))),
                        // Withdrawing: nothing goes out again.
                        Treatment::Withheld => {}
                    }
                    if self.rib.has_work() {
                        // Changes that arrive before the last one is written are
                        // measured from the first.
                        self.changed_at.get_or_insert(now);
                    }
                }
                Event::DesiredClosed => desired_open = false,
                Event::Lb => self.take_lb(&lb, now),
                Event::Query(q) => {
                    // Err: the asker gave up waiting.
                    let _ = q.reply.send(RoutesAnswer {
                        rib: self.rib.snapshot(q.limit, now),
                        write_buffer: self.main.conn.as_ref().map_or(0, |c| c.wbuf.len()),
                    });
                }
                Event::QueriesClosed => self.queries = None,
                Event::Bfd => self.bfd_changed(now).await,
                Event::BfdClosed => self.bfd = None,
                Event::Hold => self.hold_changed(now).await,
                // The daemon is going: its shutdown request follows.
                Event::HoldClosed => self.hold = None,
                Event::Nothing => {}
            }
            self.after_event(now).await;
            if let Some(reason) = self.drain_step(Instant::now()).await {
                self.stop(Instant::now(), reason).await;
                break;
            }
        }
        self.status.send_modify(|s| {
            s.state = self.main.session.state();
            s.finished = true;
        });
    }

    async fn next_event(
        &mut self,
        desired: &mut watch::Receiver<Arc<DesiredRoutes>>,
        desired_open: bool,
        lb: &LbFeed,
        shutdown: &mut watch::Receiver<Option<Shutdown>>,
        shutdown_open: bool,
        inbound: &mut Option<Inbound>,
    ) -> Event {
        let deadline = [
            self.main.session.poll_timeout(),
            self.candidate
                .as_ref()
                .and_then(|c| c.session.poll_timeout()),
            self.graceful.as_ref().and_then(Drain::poll_timeout),
            self.second_speaker.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        let main = self.main.conn.as_ref();
        let cand = self.candidate.as_ref().and_then(|c| c.conn.as_ref());
        let dial = self.dial.as_mut();
        let refill = self.refill;
        let queries = self.queries.as_mut();
        let bfd = self.bfd.as_mut();
        let hold = self.hold.as_mut();
        let beat = Arc::clone(&self.beat);
        tokio::select! {
            biased;
            r = shutdown.changed(), if shutdown_open => match r {
                Ok(()) => match shutdown.borrow_and_update().clone() {
                    Some(mode) => Event::Shutdown(mode),
                    // Set back to "running": nothing to do.
                    None => Event::Nothing,
                },
                Err(_) => Event::ShutdownClosed,
            },
            // Before the connection: a BFD failure ends the session before anything
            // else is read from or written to a path known to be down.
            r = bfd_changed(bfd) => match r {
                Ok(()) => Event::Bfd,
                Err(_) => Event::BfdClosed,
            },
            // Before the connections: a hold must stop an attempt before it adopts one.
            r = hold_changed(hold) => match r {
                Ok(()) => Event::Hold,
                Err(_) => Event::HoldClosed,
            },
            () = sleep_until(deadline) => Event::Timeout,
            () = writable(main) => Event::Writable(LinkRole::Main),
            () = writable(cand) => Event::Writable(LinkRole::Candidate),
            () = readable(main) => Event::Readable(LinkRole::Main),
            () = readable(cand) => Event::Readable(LinkRole::Candidate),
            r = dialing(dial) => Event::Dialed(r),
            s = accept(inbound.as_mut()) => match s {
                Some(s) => Event::Inbound(s),
                None => Event::InboundClosed,
            },
            r = desired.changed(), if desired_open => match r {
                Ok(()) => Event::Desired,
                Err(_) => Event::DesiredClosed,
            },
            () = lb.ready() => Event::Lb,
            q = query(queries) => match q {
                Some(q) => Event::Query(q),
                None => Event::QueriesClosed,
            },
            // Last of the ready ones: more of the table, once nothing else is pending.
            () = std::future::ready(()), if refill => Event::Nothing,
            // Asked whether the loop is alive (an Idle session has no timer, and nothing
            // else need wake it): the turn is the answer, no periodic wake-up.
            () = beat.asked() => Event::Nothing,
        }
    }

    /// Applies what the LoadBalancer feed holds: only the prefixes it names are looked at
    /// (a full set replaces the layer, one diff). During a graceful shutdown the routes
    /// carry GRACEFUL_SHUTDOWN too; once withdrawing, nothing goes out again.
    fn take_lb(&mut self, lb: &LbFeed, now: Instant) {
        let Some(taken) = lb.take() else {
            return;
        };
        let mut mark = match self.treatment(RouteClass::LoadBalancer) {
            Treatment::Withheld => return,
            Treatment::Marked => Some(routes::GracefulShutdownMark::default()),
            Treatment::AsPlanned => None,
        };
        match taken {
            LbTake::Full(mut full) => {
                if let Some(m) = mark.as_mut() {
                    for attrs in full.values_mut() {
                        *attrs = m.mark(attrs);
                    }
                }
                let pod = Arc::clone(self.rib.desired());
                self.rib.set_layers(pod, full);
            }
            LbTake::Changes(changes) => self.rib.apply_lb(changes.into_iter().map(|(p, a)| {
                let a = match (a, mark.as_mut()) {
                    (Some(a), Some(m)) => Some(m.mark(&a)),
                    (a, _) => a,
                };
                (p, a)
            })),
        }
        if self.rib.has_work() {
            self.changed_at.get_or_insert(now);
        }
    }

    /// Bookkeeping after every event: refill the write buffer, write, and report.
    async fn after_event(&mut self, now: Instant) {
        self.pump(now).await;
        let filled = self.main.conn.as_ref().map_or(0, |c| c.wbuf.len());
        for w in [LinkRole::Main, LinkRole::Candidate] {
            let broken = match self.link_mut(w).and_then(|l| l.conn.as_mut()) {
                Some(c) => c.try_flush().err(),
                None => None,
            };
            if let Some(e) = broken {
                debug!(error = %e, connection = w.as_str(), "write failed");
                self.input(w, now, Input::TcpClosed).await;
            }
        }
        // The socket took the whole buffer: no writable event will come to refill it.
        // The next turn refills it (`next_event`), after anything more urgent (a
        // shutdown, a timer, the peer's messages), one buffer per turn.
        let drained = self.main.conn.as_ref().is_some_and(|c| c.wbuf.is_empty());
        self.refill = filled > 0 && drained && self.rib.has_work();
        self.second_speaker.handle(now, WatchInput::Tick);
        self.second_speaker_events();
        self.report(now);
    }

    /// Reports what the second-speaker watch found: each sign counted, the finding
    /// raised (one warn!, when it first stands) and cleared.
    fn second_speaker_events(&mut self) {
        while let Some(event) = self.second_speaker.poll_event() {
            match event {
                WatchEvent::Sign { subcode } => {
                    self.observer.collision_cease(&self.key, subcode);
                }
                WatchEvent::Suspected(finding) => {
                    // The status still shows the finding as it was before this turn.
                    if self.status.borrow().second_speaker.is_none() {
                        warn!(
                            signs = finding.signs,
                            window_seconds = finding.window.as_secs(),
                            cease_subcode = finding.last_subcode,
                            check = %format_args!(
                                "ss -tnp dst {}",
                                self.spec.transport.remote
                            ),
                            finding = %finding,
                            "second bgp speaker suspected"
                        );
                    }
                    self.observer.second_speaker(&self.key, Some(&finding));
                }
                WatchEvent::Cleared => {
                    info!("second bgp speaker no longer suspected: no refused connection for the quiet period");
                    self.observer.second_speaker(&self.key, None);
                }
            }
        }
    }

    /// Moves the Adj-RIB-Out into the session while the write buffer has room, then
    /// answers the tables the session asked for that are complete.
    async fn pump(&mut self, now: Instant) {
        loop {
            if self.main.session.state() != State::Established {
                break;
            }
            let Some(conn) = &self.main.conn else { break };
            let used = conn.wbuf.len();
            if used >= WRITE_THRESHOLD {
                break;
            }
            let Some(batch) = self.rib.next_batch(WRITE_THRESHOLD - used, now) else {
                break;
            };
            self.input(LinkRole::Main, now, Input::Updates(batch)).await;
        }
        while let Some(f) = self.rib.poll_table_sent() {
            self.input(LinkRole::Main, now, Input::TableSent(f)).await;
        }
        for ((afi, reason), count) in self.rib.take_refusals() {
            warn!(
                afi = afi.afi.0,
                safi = afi.safi.0,
                reason = %reason,
                count,
                "routes not announced"
            );
            self.last_io_error = Some(format!(
                "{count} routes of afi {} not announced: {}",
                afi.afi.0,
                reason.describe()
            ));
            self.observer.not_announced(&self.key, afi, reason, count);
        }
    }

    /// Feeds one input to a link's session and carries out what it asks, then settles
    /// a collision if there is a candidate.
    async fn input(&mut self, w: LinkRole, now: Instant, input: Input) {
        let Some(link) = self.link_mut(w) else {
            return;
        };
        link.session.handle(now, input);
        self.drain(w, now).await;
        self.settle_collision(now).await;
    }

    fn link_mut(&mut self, w: LinkRole) -> Option<&mut Link> {
        match w {
            LinkRole::Main => Some(&mut self.main),
            LinkRole::Candidate => self.candidate.as_mut(),
        }
    }

    async fn drain(&mut self, w: LinkRole, now: Instant) {
        while let Some(action) = self.link_mut(w).and_then(|l| l.session.poll_action()) {
            self.act(w, now, action).await;
        }
    }

    /// Carries out one action of a link's session.
    async fn act(&mut self, w: LinkRole, now: Instant, action: Action) {
        if w == LinkRole::Candidate
            && matches!(
                action,
                Action::Established(_) | Action::SendTable { .. } | Action::Down { .. }
            )
        {
            if let Some(c) = self.candidate.as_mut() {
                c.deferred.push(action);
            }
            return;
        }
        match action {
            Action::Connect => {
                if w == LinkRole::Main {
                    debug!(remote = %self.spec.transport.remote, "dialing");
                    self.dial = Some(Box::pin(socket::connect(self.spec.transport.clone())));
                }
            }
            Action::Send(m) => self.send(w, m),
            Action::CloseConnection { notify } => {
                if w == LinkRole::Main {
                    self.dial = None;
                }
                let Some(conn) = self.link_mut(w).and_then(|l| l.conn.take()) else {
                    return;
                };
                if notify && self.path_down {
                    let mut conn = conn;
                    // What the socket takes now; the kernel sends it if the path
                    // comes back before the connection times out.
                    let _ = conn.try_flush();
                } else if notify {
                    let deadline = tokio::time::Instant::from_std(now + CLOSE_TIMEOUT);
                    conn.close_gracefully(deadline).await;
                }
            }
            Action::RejectConnection => {
                // Offers are only made to a session that can adopt them (see `offer`);
                // should one refuse anyway, its connection goes.
                if let Some(l) = self.link_mut(w) {
                    if l.session.connection_inbound().is_none() {
                        l.conn = None;
                    }
                }
            }
            Action::StateChange { from, to } => {
                info!(from = %from, to = %to, connection = w.as_str(), "state changed");
                if w == LinkRole::Main {
                    self.observer.state_changed(&self.key, from, to);
                }
            }
            Action::Established(n) => {
                let Some(local) = self
                    .link_mut(w)
                    .and_then(|l| l.conn.as_ref())
                    .map(|c| c.local)
                else {
                    return;
                };
                info!(
                    hold_time = n.hold_time,
                    keepalive = n.keepalive,
                    families = ?n.families,
                    four_octet_as = n.four_octet_as,
                    graceful_restart = n.graceful_restart,
                    extended_next_hop = n.extended_next_hop_ipv4,
                    local = %local,
                    "session established"
                );
                self.rib.established(RibSession {
                    ctx: n.context(),
                    families: n.families.clone(),
                    ibgp: n.ibgp,
                    next_hops: SessionNextHops {
                        local: local.ip().to_canonical(),
                        extended_next_hop_ipv4: n.extended_next_hop_ipv4,
                    },
                });
                self.changed_at = Some(now);
            }
            Action::Down { reason } => {
                warn!(reason = %reason, "session down");
                self.rib.down();
                self.changed_at = None;
            }
            Action::SendTable { afi_safi, refresh } => {
                if refresh {
                    info!(
                        afi = afi_safi.afi.0,
                        safi = afi_safi.safi.0,
                        "route refresh"
                    );
                }
                self.rib.send_table(afi_safi, refresh);
            }
            Action::MaxPrefixExceeded {
                afi_safi,
                count,
                limit,
            } => {
                warn!(
                    afi = afi_safi.afi.0,
                    safi = afi_safi.safi.0,
                    count,
                    limit,
                    "peer sent more prefixes than max-prefix"
                );
            }
        }
    }

    /// Encodes a message of the session into its connection's write buffer.
    fn send(&mut self, w: LinkRole, m: Message) {
        let key = self.key;
        let observer = self.observer.clone();
        let Some(link) = self.link_mut(w) else {
            return;
        };
        let ctx = link
            .session
            .negotiated()
            .map(|n| n.context())
            .unwrap_or_default();
        let Some(conn) = link.conn.as_mut() else {
            return;
        };
        if let Message::Notification(n) = &m {
            let info = NotificationInfo::from(n);
            warn!(
                code = info.code,
                subcode = info.subcode,
                text = %notification_text(&info),
                "notification sent"
            );
            observer.notification(
                &key,
                Direction::Sent,
                info.code,
                info.subcode,
                &notification_text(&info),
            );
        }
        match encode_message(&m, &ctx, &mut conn.wbuf) {
            Ok(()) => observer.message(&key, Direction::Sent, m.message_type()),
            Err(e) => {
                let e = PeerError::from(e);
                warn!(error = %e, "cannot encode a message");
                observer.error(&key, &e);
            }
        }
    }

    async fn flush(&mut self, w: LinkRole, now: Instant) {
        let broken = match self.link_mut(w).and_then(|l| l.conn.as_mut()) {
            Some(c) => c.try_flush().err(),
            None => None,
        };
        if let Some(e) = broken {
            debug!(error = %e, connection = w.as_str(), "write failed");
            self.input(w, now, Input::TcpClosed).await;
        }
    }

    async fn read(&mut self, w: LinkRole, now: Instant) {
        let result = {
            let Some(conn) = self.link_mut(w).and_then(|l| l.conn.as_mut()) else {
                return;
            };
            conn.rbuf.reserve(READ_CHUNK);
            conn.stream.try_read_buf(&mut conn.rbuf)
        };
        match result {
            Ok(0) => {
                if let Some(c) = self.link_mut(w).and_then(|l| l.conn.as_mut()) {
                    c.read_done = true;
                }
                self.input(w, now, Input::TcpClosed).await;
                return;
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => {
                debug!(error = %e, connection = w.as_str(), "read failed");
                self.input(w, now, Input::TcpClosed).await;
                return;
            }
        }
        // Every whole message in the buffer; the decode context may change after each
        // (the OPEN negotiates it).
        loop {
            let frame = {
                let Some(link) = self.link_mut(w) else { return };
                let ctx = link
                    .session
                    .negotiated()
                    .map(|n| n.context())
                    .unwrap_or_default();
                let Some(conn) = link.conn.as_mut() else {
                    return;
                };
                if conn.read_done {
                    return;
                }
                match check_header(&conn.rbuf, &ctx) {
                    Ok(Some(len)) if conn.rbuf.len() >= len => {
                        let msg = conn.rbuf.split_to(len).freeze();
                        decode_message_bytes(msg, &ctx)
                    }
                    Ok(_) => return,
                    Err(e) => Err(e),
                }
            };
            match frame {
                Ok(m) => self.received(w, now, m).await,
                Err(e) => {
                    warn!(error = %e, connection = w.as_str(), "malformed message");
                    if let Some(c) = self.link_mut(w).and_then(|l| l.conn.as_mut()) {
                        c.read_done = true;
                        c.rbuf.clear();
                    }
                    self.input(w, now, Input::DecodeError(e.notification()))
                        .await;
                    return;
                }
            }
        }
    }

    async fn received(&mut self, w: LinkRole, now: Instant, m: Message) {
        self.observer
            .message(&self.key, Direction::Received, m.message_type());
        match &m {
            Message::Notification(n) => {
                let info = NotificationInfo::from(n);
                let text = notification_text(&info);
                warn!(
                    code = info.code,
                    subcode = info.subcode,
                    text = %text,
                    "notification received"
                );
                self.observer.notification(
                    &self.key,
                    Direction::Received,
                    info.code,
                    info.subcode,
                    &text,
                );
                // Before the session handles it: the connection is still counted.
                let own_connections = usize::from(self.main.conn.is_some())
                    + usize::from(self.candidate.as_ref().is_some_and(|c| c.conn.is_some()));
                let state = self.link_mut(w).map_or(State::Idle, |l| l.session.state());
                let seen = WatchInput::Notification {
                    code: info.code,
                    subcode: info.subcode,
                    state,
                    own_connections,
                };
                self.second_speaker.handle(now, seen);
                if seen.is_sign() {
                    // Another speaker holds the switch's session from our address: retry
                    // soon, so that ours is in shortly after that one leaves.
                    self.input(w, now, Input::Refusal(n.clone())).await;
                    return;
                }
            }
            Message::Update(u) if !u.errors.is_empty() => {
                // RFC 7606 section 3: errors that do not reset the session are logged.
                warn!(
                    errors = u.errors.len(),
                    first = %u.errors[0].detail,
                    "update with errors"
                );
            }
            _ => {}
        }
        self.input(w, now, Input::Message(m)).await;
    }

    /// The daemon set or lifted its hold on new sessions: the session is told
    /// (`Input::Hold` stops an attempt under way and keeps an Established session
    /// without a restart after it; `Input::Start` lifts it), and so is a collision
    /// candidate still negotiating, which would be a new session too.
    async fn hold_changed(&mut self, now: Instant) {
        let Some(hold) = self.hold.as_mut() else {
            return;
        };
        let held = hold.borrow_and_update().clone();
        if held == self.held {
            return;
        }
        self.held = held.clone();
        match held {
            Some(message) => {
                info!(reason = %message, state = %self.main.session.state(), "new sessions held back");
                if self.candidate.is_some() {
                    self.input(
                        LinkRole::Candidate,
                        now,
                        Input::Hold {
                            message: message.to_string(),
                        },
                    )
                    .await;
                    self.candidate = None;
                }
                self.input(
                    LinkRole::Main,
                    now,
                    Input::Hold {
                        message: message.to_string(),
                    },
                )
                .await;
            }
            None => {
                info!("hold on new sessions lifted");
                self.input(LinkRole::Main, now, Input::Start).await;
            }
        }
    }

    async fn timeout(&mut self, now: Instant) {
        for w in [LinkRole::Main, LinkRole::Candidate] {
            let due = self
                .link_mut(w)
                .and_then(|l| l.session.poll_timeout())
                .is_some_and(|t| t <= now);
            if due {
                self.input(w, now, Input::Timeout).await;
            }
        }
    }

    async fn dialed(&mut self, r: Result<TcpStream, PeerError>, now: Instant) {
        self.dial = None;
        match r {
            Ok(stream) => self.offer(stream, false, now).await,
            Err(e) => {
                debug!(error = %e, "dial failed");
                self.observer.error(&self.key, &e);
                self.last_io_error = Some(e.to_string());
                if self.main.session.state() == State::Connect && self.main.conn.is_none() {
                    self.input(LinkRole::Main, now, Input::TcpFailed).await;
                }
            }
        }
    }

    /// A TCP connection, dialed or accepted: the main session adopts it if it can, else
    /// an inbound one becomes a collision candidate, else it is closed unread.
    async fn offer(&mut self, stream: TcpStream, inbound: bool, now: Instant) {
        if inbound {
            if let Err(e) = socket::prepare_accepted(&stream, self.spec.transport.ttl) {
                let e =
                    PeerError::socket("prepare accepted connection", self.spec.transport.remote, e);
                self.observer.error(&self.key, &e);
                return;
            }
        }
        let conn = match Conn::new(stream) {
            Ok(c) => c,
            Err(e) => {
                debug!(error = %e, "connection gone before it was used");
                if !inbound && self.main.session.state() == State::Connect {
                    self.input(LinkRole::Main, now, Input::TcpFailed).await;
                }
                return;
            }
        };
        let state = self.main.session.state();
        // In Connect or Active, and for the peer's connection also while waiting to
        // retry: a connection the peer opens then is never reset.
        if self.main.conn.is_none() && self.main.session.accepts(inbound) {
            debug!(local = %conn.local, remote = %conn.remote, inbound, "connection up");
            self.dial = None;
            self.main.conn = Some(conn);
            self.input(LinkRole::Main, now, Input::TcpConnected { inbound })
                .await;
            return;
        }
        let collision_possible = matches!(
            state,
            State::OpenSent | State::OpenConfirm | State::Established
        );
        if inbound && collision_possible && self.held.is_some() {
            // A second connection could replace the Established session (a collision
            // it loses, or the peer's restart): that would be a new session.
            debug!(remote = %conn.remote, "inbound connection closed: new sessions are held back");
            return;
        }
        if inbound && collision_possible && self.candidate.is_none() {
            match Session::inbound_beside(&self.main.session, now) {
                Ok(session) => {
                    debug!(remote = %conn.remote, "inbound connection while ours is up: collision candidate");
                    self.candidate = Some(Link {
                        session,
                        conn: Some(conn),
                        deferred: Vec::new(),
                    });
                    self.drain(LinkRole::Candidate, now).await;
                    self.settle_collision(now).await;
                }
                Err(e) => self.observer.error(&self.key, &PeerError::from(e)),
            }
            return;
        }
        debug!(state = %state, inbound, "closing a connection the session cannot take");
    }

    /// RFC 4271 section 6.8 through `detect_collision`: stops the losing session and,
    /// if it was ours, makes the candidate the long-lived one.
    async fn settle_collision(&mut self, now: Instant) {
        let Some(cand) = &self.candidate else {
            return;
        };
        if cand.conn.is_none() && cand.session.state() == State::Idle {
            // It failed on its own before winning anything.
            self.candidate = None;
            return;
        }
        let Some(collision) = detect_collision(&self.main.session, &cand.session) else {
            return;
        };
        let reason = collision.reason.clone();
        info!(close = ?collision.close, reason = %reason, "connection collision");
        match collision.close {
            Side::New => {
                if let Some(c) = self.candidate.as_mut() {
                    c.session.handle(now, Input::Stop { reason });
                }
                self.drain(LinkRole::Candidate, now).await;
                self.candidate = None;
            }
            Side::Existing => {
                self.main.session.handle(now, Input::Stop { reason });
                self.drain(LinkRole::Main, now).await;
                if let Some(mut new) = self.candidate.take() {
                    new.session.inherit_history(&self.main.session);
                    self.dial = None;
                    let deferred = std::mem::take(&mut new.deferred);
                    self.main = new;
                    for action in deferred {
                        self.act(LinkRole::Main, now, action).await;
                    }
                }
            }
        }
    }

    /// Status and observer counters.
    fn report(&mut self, now: Instant) {
        for f in [AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST] {
            let n = self.rib.held_count(f);
            if self.reported_announced.get(&f).copied().unwrap_or(0) != n {
                self.reported_announced.insert(f, n);
                self.observer.announced(&self.key, f, n);
            }
            let r = self
                .main
                .session
                .stats()
                .received_prefixes
                .get(&f)
                .map_or(0, |c| c.count);
            if self.reported_received.get(&f).copied().unwrap_or(0) != r {
                self.reported_received.insert(f, r);
                self.observer.received(&self.key, f, r);
            }
        }
        let flushed = self.main.conn.as_ref().is_none_or(|c| c.wbuf.is_empty());
        if let Some(since) = self.changed_at {
            if !self.rib.has_work() && flushed && self.main.session.state() == State::Established {
                self.observer
                    .update_written(&self.key, now.saturating_duration_since(since));
                self.changed_at = None;
                // What the change queued (groups, builders) is freed now.
                crate::memory::after_work();
            }
        }
        let session = &self.main.session;
        let conn = self.main.conn.as_ref();
        let rib = &self.rib;
        let last_io_error = &self.last_io_error;
        let bfd = self.bfd.as_ref().and_then(|b| b.borrow().clone());
        let second_speaker = self.second_speaker.finding().copied();
        let held = self.held.clone();
        self.status.send_modify(|s| {
            s.held = held;
            s.bfd = bfd;
            s.state = session.state();
            s.local = conn.map(|c| c.local);
            s.remote = conn.map(|c| c.remote);
            s.negotiated = session.negotiated().cloned();
            s.stats = session.stats().clone();
            s.advertised = [AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST]
                .into_iter()
                .map(|f| (f, rib.held_count(f)))
                .filter(|(_, n)| *n > 0)
                .collect();
            s.pending = rib.pending();
            s.write_buffer = conn.map_or(0, |c| c.wbuf.len());
            s.last_io_error = last_io_error.clone();
            s.next_retry = session.next_retry();
            s.second_speaker = second_speaker;
        });
    }
}
