//! The peer driver: the only owner of sockets. One tokio task per configured peer
//! ([`spawn`]) dials the peer (or takes its connections from the optional [`Listener`]),
//! sets the TCP options (MD5 signatures, TTL or GTSM, source address, TCP_NODELAY),
//! frames and decodes messages, drives the sans-IO session (src/bgp/session) with real
//! time, and keeps the peer's Adj-RIB-Out: it receives the desired route set for the peer
//! and sends only the difference, packed into the fewest UPDATEs, never more than a
//! bounded write buffer ahead of what the peer has read.
//!
//! Layout: `spec` (config -> [`PeerSpec`], the one place run-time fallbacks such as the
//! router-id and the next hops are decided), `change` (old and new spec -> keep, reset,
//! open, close or update-live: the one decision about a running session), `adj_rib_out` (sans-IO diff draining,
//! [`AdjRibOut`]), `transport` (a session's TCP side as data: what `spec` decides and
//! `socket` applies), `socket` (socket options and the dial), `listener` (inbound
//! connections), `driver` (the task loop), `observer` ([`PeerObserver`], what metrics
//! implement).
//!
//! Must not decide which routes a peer gets (the planner in `routes` does), interpret
//! received routes beyond validating and counting them (the session does), or touch
//! configuration files, the API server or metrics registries.
//!
//! How the daemon drives one peer:
//!
//! ```text
//! let spec = PeerSpec::from_config(&peer_plan.peer, &RunOverrides { .. })?;
//! let (routes_tx, routes_rx) = watch::channel(peer_plan.routes.clone());
//! let (stop_tx, stop_rx) = watch::channel(None);
//! let inbound = listener.map(|l| l.register(&spec)).transpose()?;  // optional
//! let handle = peer::spawn(spec, routes_rx, observer, stop_rx, inbound)?;
//! routes_tx.send_replace(new_routes);          // each new plan: only the difference goes out
//! stop_tx.send_replace(Some(Shutdown::Restart(msg))); // SIGTERM: GR peers keep our routes
//! handle.join.await;                           // bounded by 2 x CLOSE_TIMEOUT
//! ```

mod adj_rib_out;
pub mod bfd;
pub mod change;
mod driver;
mod error;
pub mod lb_feed;
mod listener;
mod observer;
mod socket;
mod spec;
mod transport;

pub use self::bfd::{Bfd, BfdObserver, BfdSpec, BfdStatus, NoopBfdObserver};
pub use adj_rib_out::{
    AdjRibOut, AttrsAsSent, Held, PendingChange, RibSession, RibSnapshot, RouteRefusal,
    RouteRefusals, SentRoute,
};
pub use change::{session_change, session_changes, SessionChange, SessionChanges};
pub use driver::{CLOSE_TIMEOUT, WRITE_THRESHOLD};
pub use error::PeerError;
pub use lb_feed::{LbFeed, LbTake};
pub use listener::{Inbound, Listener};
pub use observer::{Direction, NoopObserver, PeerObserver};
pub use spec::{PeerSpec, Resolved, RunOverrides, CONNECT_TIMEOUT};
pub use transport::{Transport, TtlPolicy, DIRECT_TTL, MAX_TTL};

use crate::bgp::session::{Finding, Negotiated, State, Stats};
use crate::bgp::wire::AfiSafi;
use crate::config::PeerKey;
use crate::routes::DesiredRoutes;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio::task::JoinHandle;
use tracing::Instrument;

/// How a peer task ends: the one definition is beside the stop decision.
pub use crate::routes::stop::Shutdown;

/// The RFC 9003 message of the Cease a peer task sends when its daemon is gone (the
/// shutdown sender dropped) and graceful restart is not in force.
pub const DAEMON_GONE_MESSAGE: &str = "podcidr-speaker stopped";

/// What a peer task shows of itself, updated after every event it handles.
#[derive(Debug, Clone)]
pub struct PeerStatus {
    pub key: PeerKey,
    pub state: State,
    /// The session's connection, when there is one.
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    /// From the peer's accepted OPEN until the session leaves Established.
    pub negotiated: Option<Negotiated>,
    pub stats: Stats,
    /// Prefixes the peer has been sent, per family (the Adj-RIB-Out).
    pub advertised: BTreeMap<AfiSafi, u64>,
    /// Prefixes still to announce or withdraw.
    pub pending: usize,
    /// Octets encoded and not yet taken by the socket.
    pub write_buffer: usize,
    /// The last socket error or refusal to announce; the session's own last error is in
    /// `stats.last_error`.
    pub last_io_error: Option<String>,
    /// When the session dials again after a failure, while it waits in Idle.
    pub next_retry: Option<Instant>,
    /// The task has ended.
    pub finished: bool,
    /// The peer's BFD session, when it has one.
    pub bfd: Option<BfdStatus>,
    /// Another speaker on this node seems to peer with the switch from our address
    /// (`bgp::session::second_speaker`).
    pub second_speaker: Option<Finding>,
    /// The daemon holds new sessions back, and why ([`Feeds::hold`]).
    pub held: Option<Arc<str>>,
}

impl PeerStatus {
    /// The status of a task that has not run yet: Idle, nothing sent, nothing pending.
    pub fn new(key: PeerKey) -> PeerStatus {
        PeerStatus {
            key,
            state: State::Idle,
            local: None,
            remote: None,
            negotiated: None,
            stats: Stats::default(),
            advertised: BTreeMap::new(),
            pending: 0,
            write_buffer: 0,
            last_io_error: None,
            next_retry: None,
            finished: false,
            bfd: None,
            second_speaker: None,
            held: None,
        }
    }
}

/// A request for a [`RibSnapshot`] (in a [`RoutesAnswer`]) of a peer task's Adj-RIB-Out
/// (`status --routes`): the task answers between two events, so the send path never
/// waits on a reader and nothing is copied until someone asks.
#[derive(Debug)]
pub struct RoutesQuery {
    /// Routes listed at most, held and pending each (both are counted whole).
    pub limit: usize,
    pub reply: oneshot::Sender<RoutesAnswer>,
}

/// A peer task's answer to a [`RoutesQuery`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutesAnswer {
    pub rib: RibSnapshot,
    /// UPDATEs (and KEEPALIVEs) encoded and not yet taken by the socket, in octets: what
    /// the held routes' last changes may still be waiting in.
    pub write_buffer: usize,
}

/// Queries waiting for one task: a few readers at once, more are refused at once.
pub const ROUTES_QUERY_QUEUE: usize = 4;

/// Asks a peer task for its Adj-RIB-Out; `None` when the task is gone, busy with
/// [`ROUTES_QUERY_QUEUE`] queries already, or does not answer within `timeout`.
pub async fn query_routes(
    queries: &mpsc::Sender<RoutesQuery>,
    limit: usize,
    timeout: Duration,
) -> Option<RoutesAnswer> {
    let (reply, answer) = oneshot::channel();
    queries.try_send(RoutesQuery { limit, reply }).ok()?;
    tokio::time::timeout(timeout, answer).await.ok()?.ok()
}

/// A running peer task.
#[derive(Debug)]
pub struct PeerHandle {
    pub key: PeerKey,
    /// Ends after a [`Shutdown`], once the connection is closed (bounded by
    /// [`CLOSE_TIMEOUT`] twice).
    pub join: JoinHandle<()>,
    pub status: watch::Receiver<PeerStatus>,
    /// When the task last turned its loop, and whether it answers: a task asked
    /// ([`Beat::ask`]) turns at once, so one that leaves an ask unanswered for long is
    /// wedged (the daemon's `/healthz` says so).
    pub beat: Arc<Beat>,
    /// Where [`RoutesQuery`]s go ([`query_routes`]).
    pub queries: mpsc::Sender<RoutesQuery>,
}

/// The last turn of a peer task's loop, readable from other tasks without a lock; the
/// asks that make an idle task turn, and its end.
///
/// An idle task has nothing to wake it (an Idle session has no timer). Rather than
/// turning every few seconds to show it is alive, it answers when asked: whoever wants
/// to know (the daemon, when `/healthz` or a scrape asks it) calls [`Beat::ask`], and
/// [`Beat::unanswered_for`] says how long the oldest ask has waited.
#[derive(Debug)]
pub struct Beat {
    origin: Instant,
    /// Milliseconds from `origin` to the last turn.
    last: AtomicU64,
    /// One more than the milliseconds from `origin` to the oldest ask not answered by a
    /// turn yet; 0: none pending.
    asked: AtomicU64,
    /// Wakes the task's loop for an ask.
    wake: Notify,
    /// The task ended (returned, panicked or was aborted): its future is gone.
    ended: AtomicBool,
    /// Wakes [`Beat::finished`].
    end: Notify,
}

impl Beat {
    pub fn new(now: Instant) -> Self {
        Self {
            origin: now,
            last: AtomicU64::new(0),
            asked: AtomicU64::new(0),
            wake: Notify::new(),
            ended: AtomicBool::new(false),
            end: Notify::new(),
        }
    }

    fn ms(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.origin).as_millis()).unwrap_or(u64::MAX)
    }

    /// A turn of the loop: answers every ask made so far.
    pub fn beat(&self, now: Instant) {
        self.last.store(self.ms(now), Ordering::Relaxed);
        self.asked.store(0, Ordering::Relaxed);
    }

    /// How long ago the last turn was.
    pub fn silent_for(&self, now: Instant) -> Duration {
        let last = self.origin + Duration::from_millis(self.last.load(Ordering::Relaxed));
        now.saturating_duration_since(last)
    }

    /// Asks the task to turn its loop, which a live one does at once. An ask already
    /// pending keeps its time: the wait is measured from the oldest.
    pub fn ask(&self, now: Instant) {
        let at = self.ms(now).saturating_add(1);
        let _ = self
            .asked
            .compare_exchange(0, at, Ordering::Relaxed, Ordering::Relaxed);
        // Stores a permit when the task is busy elsewhere: its next wait ends at once.
        self.wake.notify_one();
    }

    /// How long the oldest ask has waited for a turn; zero with none pending.
    pub fn unanswered_for(&self, now: Instant) -> Duration {
        match self.asked.load(Ordering::Relaxed) {
            0 => Duration::ZERO,
            at => now.saturating_duration_since(self.origin + Duration::from_millis(at - 1)),
        }
    }

    /// Completes when the task is asked ([`Beat::ask`]): the loop's wait for an ask.
    pub async fn asked(&self) {
        self.wake.notified().await;
    }

    /// Whether the task ended.
    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// Completes once the task has ended.
    pub async fn finished(&self) {
        let end = self.end.notified();
        tokio::pin!(end);
        // Registered before the check: an end between the two still wakes it.
        end.as_mut().enable();
        if self.has_ended() {
            return;
        }
        end.await;
    }

    /// The task ended (its [`EndGuard`] dropped; also for the daemon's tests).
    pub(crate) fn mark_ended(&self) {
        self.ended.store(true, Ordering::SeqCst);
        self.end.notify_waiters();
    }
}

/// Marks the task's [`Beat`] ended when its future is dropped: on return, on a panic
/// (unwinding drops it) and on an abort alike.
struct EndGuard(Arc<Beat>);

impl Drop for EndGuard {
    fn drop(&mut self) {
        self.0.mark_ended();
    }
}

impl PeerHandle {
    /// A copy of the current status.
    pub fn status(&self) -> PeerStatus {
        self.status.borrow().clone()
    }
}

/// Starts the task of one peer. Must be called within a Tokio runtime.
///
/// `desired` carries the routes the peer must hold (the task sends the difference each
/// time it changes); `shutdown` ends the task when it holds `Some` (a dropped sender
/// counts as [`Shutdown::Restart`] with [`DAEMON_GONE_MESSAGE`]); `inbound`, from [`Listener::register`], brings the
/// peer's own connections (required for a passive peer).
pub fn spawn(
    spec: PeerSpec,
    desired: watch::Receiver<Arc<DesiredRoutes>>,
    observer: Arc<dyn PeerObserver>,
    shutdown: watch::Receiver<Option<Shutdown>>,
    inbound: Option<Inbound>,
) -> Result<PeerHandle, PeerError> {
    spawn_with(spec, desired, Feeds::default(), observer, shutdown, inbound)
}

/// What a peer task follows besides its pod CIDR routes; both optional.
#[derive(Default)]
pub struct Feeds {
    /// LoadBalancer routes: a full set, then per-prefix changes ([`LbFeed`]); the task
    /// marks only the prefixes they touch pending.
    pub lb: Arc<LbFeed>,
    /// The peer's BFD session (from [`Bfd::subscribe`]): when it fails, an Established
    /// session is torn down with Cease/BFD Down (RFC 5882, RFC 9384).
    pub bfd: Option<watch::Receiver<Option<BfdStatus>>>,
    /// The daemon's hold on new sessions: `Some(why)` while it stands. The session then
    /// dials and adopts no connection; an Established one carries on, and is not
    /// opened again once it ends until the hold is lifted (`Input::Hold`).
    pub hold: Option<watch::Receiver<Option<Arc<str>>>>,
}

/// [`spawn`], with the LoadBalancer routes and the BFD session of [`Feeds`].
pub fn spawn_with(
    spec: PeerSpec,
    desired: watch::Receiver<Arc<DesiredRoutes>>,
    feeds: Feeds,
    observer: Arc<dyn PeerObserver>,
    shutdown: watch::Receiver<Option<Shutdown>>,
    inbound: Option<Inbound>,
) -> Result<PeerHandle, PeerError> {
    if spec.session.passive && inbound.is_none() {
        return Err(PeerError::InvalidSpec {
            field: "passive",
            reason: "a passive peer only accepts connections: it needs the listener".into(),
        });
    }
    let key = spec.key;
    let span = tracing::info_span!("peer", addr = %key.address, asn = spec.session.peer_asn);
    let (status_tx, status) = watch::channel(PeerStatus::new(key));
    let beat = Arc::new(Beat::new(Instant::now()));
    let (queries, queries_rx) = mpsc::channel(ROUTES_QUERY_QUEUE);
    let task = driver::Task::new(
        spec,
        observer,
        status_tx,
        Arc::clone(&beat),
        queries_rx,
        feeds.bfd,
        feeds.hold,
    )?;
    let guard = EndGuard(Arc::clone(&beat));
    let join = tokio::spawn(
        async move {
            let _guard = guard;
            task.run(desired, feeds.lb, shutdown, inbound).await;
        }
        .instrument(span),
    );
    Ok(PeerHandle {
        key,
        join,
        status,
        beat,
        queries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn a_beat_is_measured_from_the_last_turn() {
        let start = Instant::now();
        let beat = Beat::new(start);
        let later = start + Duration::from_secs(40);
        assert_eq!(beat.silent_for(later), Duration::from_secs(40));
        beat.beat(start + Duration::from_secs(35));
        assert_eq!(beat.silent_for(later), Duration::from_secs(5));
        assert_eq!(beat.silent_for(start), Duration::ZERO, "never negative");
    }

    #[test]
    fn an_ask_waits_until_the_next_turn_and_the_oldest_counts() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let beat = Beat::new(start);
        assert_eq!(beat.unanswered_for(at(100)), Duration::ZERO, "never asked");
        beat.ask(at(10));
        beat.ask(at(20));
        assert_eq!(beat.unanswered_for(at(45)), Duration::from_secs(35));
        beat.beat(at(46));
        assert_eq!(beat.unanswered_for(at(100)), Duration::ZERO, "answered");
        beat.ask(at(50));
        assert_eq!(
            beat.unanswered_for(at(40)),
            Duration::ZERO,
            "never negative"
        );
    }

    /// A passive peer that nobody dials has no timer running: it sleeps without waking
    /// (no periodic turn) and answers an ask at once; its end is seen.
    #[tokio::test]
    async fn an_idle_task_sleeps_until_asked_and_answers() {
        let text = "peers:\n  - peer-address: 127.0.0.2\n    peer-asn: 65000\n    my-asn: 65001\n    passive: true\n";
        let peer = crate::config::parse(text).unwrap().peers[0].clone();
        let run = RunOverrides {
            router_id: Some(Ipv4Addr::new(192, 0, 2, 1)),
            ..RunOverrides::default()
        };
        let spec = PeerSpec::from_config(&peer, &run).unwrap();
        let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let inbound = listener.register(&spec).unwrap();
        let (_routes, desired) = watch::channel(Arc::new(DesiredRoutes::new()));
        let (stop, shutdown) = watch::channel(None);
        let handle = spawn(
            spec,
            desired,
            Arc::new(NoopObserver),
            shutdown,
            Some(inbound),
        )
        .unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let silent = handle.beat.silent_for(Instant::now());
        assert!(
            silent >= Duration::from_secs(1),
            "turned without a cause: {silent:?}"
        );
        handle.beat.ask(Instant::now());
        let answered = tokio::time::timeout(Duration::from_secs(2), async {
            while handle.beat.unanswered_for(Instant::now()) > Duration::ZERO {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(answered.is_ok(), "the ask was never answered");
        assert!(handle.beat.silent_for(Instant::now()) < Duration::from_secs(1));
        assert_eq!(handle.status().state, State::Active);
        assert!(!handle.beat.has_ended());
        let beat = Arc::clone(&handle.beat);
        stop.send_replace(Some(Shutdown::Deconfigured));
        tokio::time::timeout(Duration::from_secs(5), handle.join)
            .await
            .expect("the task ends")
            .unwrap();
        assert!(beat.has_ended());
        tokio::time::timeout(Duration::from_secs(1), beat.finished())
            .await
            .expect("an ended task's beat says so");
    }
}
