//! The peer driver: the only owner of sockets. One tokio task per configured peer
//! ([`spawn`]) dials the peer (or takes its connections from the optional [`Listener`]),
//! sets the TCP options (MD5 signatures, TTL or GTSM, source address, TCP_NODELAY),
//! frames and decodes messages, drives the sans-IO session (src/bgp/session) with real
//! time, and keeps the peer's Adj-RIB-Out: it receives the desired route set for the peer
//! and sends only the difference, packed into the fewest UPDATEs, never more than a
//! bounded write buffer ahead of what the peer has read.
//!
//! Layout: `spec` (config -> [`PeerSpec`]), `adj_rib_out` (sans-IO diff draining,
//! [`AdjRibOut`]), `socket` (socket options and the dial), `listener` (inbound
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
mod driver;
mod error;
mod listener;
mod observer;
mod socket;
mod spec;

pub use adj_rib_out::{AdjRibOut, Refusal, Refusals, RibSession};
pub use driver::{CLOSE_TIMEOUT, WRITE_THRESHOLD};
pub use error::PeerError;
pub use listener::{Inbound, Listener};
pub use observer::{Direction, NoopObserver, PeerObserver};
pub use spec::{
    PeerSpec, RunOverrides, Transport, TtlPolicy, CONNECT_TIMEOUT, DIRECT_TTL, MAX_TTL,
    MD5_MAX_KEY_LEN,
};

use crate::bgp::session::{Negotiated, State, Stats};
use crate::bgp::wire::AfiSafi;
use crate::config::PeerKey;
use crate::routes::DesiredRoutes;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// How a peer task ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shutdown {
    /// NOTIFICATION Cease/Administrative Shutdown with this RFC 9003 message: the peer
    /// drops our routes.
    Admin(String),
    /// This speaker is restarting or going away: with graceful restart in force on the
    /// session at that moment the connection is closed without a NOTIFICATION, so the
    /// peer keeps our routes as stale until we are back (RFC 4724 section 4); otherwise
    /// Cease/Administrative Shutdown with this RFC 9003 message. The session decides, so
    /// a caller never acts on a status that lags behind the session (a SIGTERM just after
    /// Established, while the initial table is being written).
    Restart(String),
    /// The peer was removed from the configuration: Cease/Peer De-configured.
    Deconfigured,
}

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
    /// The task has ended.
    pub finished: bool,
}

impl PeerStatus {
    fn new(key: PeerKey) -> PeerStatus {
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
            finished: false,
        }
    }
}

/// A running peer task.
#[derive(Debug)]
pub struct PeerHandle {
    pub key: PeerKey,
    /// Ends after a [`Shutdown`], once the connection is closed (bounded by
    /// [`CLOSE_TIMEOUT`] twice).
    pub join: JoinHandle<()>,
    pub status: watch::Receiver<PeerStatus>,
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
    if spec.session.passive && inbound.is_none() {
        return Err(PeerError::InvalidSpec {
            field: "passive",
            reason: "a passive peer only accepts connections: it needs the listener".into(),
        });
    }
    let key = spec.key;
    let span = tracing::info_span!("peer", addr = %key.address, asn = spec.session.peer_asn);
    let (status_tx, status) = watch::channel(PeerStatus::new(key));
    let task = driver::Task::new(spec, observer, status_tx)?;
    let join = tokio::spawn(task.run(desired, shutdown, inbound).instrument(span));
    Ok(PeerHandle { key, join, status })
}
