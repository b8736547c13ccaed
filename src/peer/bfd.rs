//! The BFD task: every BFD session of this speaker (RFC 5880 asynchronous mode), one
//! per peer with a `bfd-profile`, on UDP sockets it owns: RFC 5881 single-hop (port
//! 3784, TTL 255 sent and required on receipt) and RFC 5883 multihop (port 4784, for
//! `ebgp-multihop` peers, the received TTL at least the profile's `minimum-ttl`). The
//! state machine is `crate::bfd::Session` (sans-IO); this task gives it packets and
//! time, sends what it asks, and publishes each session's [`BfdStatus`] on a `watch`
//! that the peer's BGP task follows (the coupling of RFC 5882 is there, in `driver`).
//!
//! One task for all sessions, because packets to port 3784 (4784) of an address arrive
//! on one socket whoever they are for: it demultiplexes them by Your Discriminator, or,
//! when that is zero, by the source address (RFC 5881 section 3, RFC 5883 section 3).
//! Each session sends from a socket of its own, bound to its source address and a port
//! of 49152-65535. A packet that is malformed or cannot be ours (a TTL below what the
//! session requires, an unknown discriminator, a source that is not the session's
//! peer) is counted by reason and dropped: it never reaches a session, and nothing
//! panics on it.
//!
//! Config changes arrive as [`Bfd::configure`]: new timers go to the running session
//! (`Session::set_config`, a Poll Sequence, RFC 5880 section 6.8.3), a new address
//! replaces the session, `None` removes it (after one AdminDown packet, RFC 5880
//! section 6.8.16, so the peer does not take it for a failure).
//!
//! Must not: decide what a BFD Down does to BGP (the peer task does), import metrics
//! (it reports through [`BfdObserver`]).

use super::observer::Direction;
use super::socket::{self, Datagram, BFD_SOURCE_PORTS};
use crate::bfd::{self, allocate_discriminator, Diag, Event, Packet, State};
use crate::config::PeerKey;
use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, HashMap};
use std::future::pending;
use std::hash::BuildHasher;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

/// RFC 5881 section 4: the destination port of single-hop control packets.
pub const SINGLE_HOP_PORT: u16 = 3784;
/// RFC 5883 section 5: the destination port of multihop control packets.
pub const MULTIHOP_PORT: u16 = 4784;
/// RFC 5881 section 5: the TTL / hop limit a single-hop packet is sent with and must
/// arrive with (anything less crossed a router, or was forged off the link).
pub const SINGLE_HOP_TTL: u8 = 255;
/// Received datagrams waiting for the BFD task; more are dropped (reason `queue_full`).
const RECEIVE_QUEUE: usize = 1024;
/// A control packet is 24 octets, 26 to 52 with authentication (RFC 5880 section 4);
/// anything that does not fit this is not one.
const DATAGRAM_MAX: usize = 256;

/// Why the transport dropped a received packet before any session saw it (the
/// decoder's reasons are `bfd::PacketError::REASONS`, a session's
/// `bfd::Discard::REASONS`): bounded, for a metric label.
pub const DROP_REASONS: &[&str] = &[
    "ttl",
    "truncated",
    "unknown_discriminator",
    "no_session",
    "wrong_source",
    "wrong_port",
    "queue_full",
];

/// The BFD session of one peer, as [`super::PeerSpec`] carries it (built from the
/// peer's resolved `bfd-profile`). Pure data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfdSpec {
    /// The profile's name, for logs.
    pub profile: String,
    pub session: bfd::SessionConfig,
    /// RFC 5883 (port 4784) for an `ebgp-multihop` peer; RFC 5881 (3784) otherwise.
    pub multihop: bool,
    /// The least TTL / hop limit accepted: 255 single-hop, the profile's
    /// `minimum-ttl` multihop.
    pub min_ttl: u8,
    pub remote: IpAddr,
    /// The source address; `None`: the kernel chooses (by route) and received packets
    /// are matched on the peer's address alone.
    pub source: Option<IpAddr>,
}

impl BfdSpec {
    fn port(&self) -> u16 {
        if self.multihop {
            MULTIHOP_PORT
        } else {
            SINGLE_HOP_PORT
        }
    }

    /// The address sessions are told apart by: (peer, source address, encapsulation).
    fn addressing(&self) -> (IpAddr, Option<IpAddr>, bool) {
        (self.remote, self.source, self.multihop)
    }

    /// The local address the session's sockets bind to.
    fn bind_addr(&self) -> IpAddr {
        self.source.unwrap_or(if self.remote.is_ipv6() {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        })
    }
}

/// What a peer task sees of its BFD session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfdStatus {
    pub state: State,
    /// Our last diagnostic (why the session last left Up).
    pub diag: Diag,
    /// The remote's state as last received.
    pub remote_state: State,
    pub local_discr: u32,
    pub remote_discr: u32,
    pub multihop: bool,
    /// The Detection Time in force (RFC 5880 section 6.8.4).
    pub detection_time: Duration,
    /// How many times the session failed (Up -> Down, not by the remote's AdminDown:
    /// RFC 5882 section 3.2): a peer task acts when this grows.
    pub failures: u64,
    /// The session has been Up at least once.
    pub was_up: bool,
    /// At the last failure by detection timeout: how long after the last packet received
    /// the session declared the path down.
    pub last_detection: Option<Duration>,
    pub since: Instant,
}

/// What the BFD task reports (metrics implement it; every method has a no-op default).
/// Called inline: cheap, never blocking. Every argument is bounded.
pub trait BfdObserver: Send + Sync {
    /// A session changed state; `diag` is why; `failure`: the change is a failure of
    /// the path (Up -> Down, not by the remote's AdminDown; RFC 5882 section 3.2).
    fn bfd_state_changed(
        &self,
        _peer: &PeerKey,
        _from: State,
        _to: State,
        _diag: Diag,
        _failure: bool,
    ) {
    }
    /// A session's status, each time it is published (a state change, a new config).
    fn bfd_status(&self, _peer: &PeerKey, _status: &BfdStatus) {}
    /// A control packet was sent to, or accepted from, a peer.
    fn bfd_packet(&self, _peer: &PeerKey, _dir: Direction) {}
    /// A received packet was dropped, for `reason` (one of [`DROP_REASONS`],
    /// `bfd::PacketError::REASONS` or `bfd::Discard::REASONS`); `peer` when known.
    fn bfd_dropped(&self, _peer: Option<&PeerKey>, _reason: &'static str) {}
    /// A failure was detected `after` the last packet received (the detection time as
    /// it happened).
    fn bfd_detected(&self, _peer: &PeerKey, _after: Duration) {}
    /// The peer's session is gone (its profile was removed, or the peer).
    fn bfd_removed(&self, _peer: &PeerKey) {}
    /// A socket failed (bind, send): the session goes on, and fails by detection if the
    /// socket stays unusable.
    fn bfd_error(&self, _peer: Option<&PeerKey>, _op: &'static str, _error: &std::io::Error) {}
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopBfdObserver;

impl BfdObserver for NoopBfdObserver {}

type Statuses = Arc<Mutex<BTreeMap<PeerKey, watch::Sender<Option<BfdStatus>>>>>;

/// The handle of the BFD task. Dropping it ends the task (every session stops
/// sending; peers then see a failure, as after a crash).
#[derive(Debug)]
pub struct Bfd {
    commands: mpsc::UnboundedSender<Command>,
    statuses: Statuses,
    join: JoinHandle<()>,
}

#[derive(Debug)]
enum Command {
    Configure { key: PeerKey, spec: Option<BfdSpec> },
    Shutdown,
}

impl Bfd {
    /// Starts the BFD task, with no session. Must be called within a Tokio runtime.
    pub fn spawn(observer: Arc<dyn BfdObserver>) -> Bfd {
        let (commands, rx) = mpsc::unbounded_channel();
        let statuses: Statuses = Arc::default();
        let (datagrams_tx, datagrams) = mpsc::channel(RECEIVE_QUEUE);
        let task = Task {
            observer,
            statuses: Arc::clone(&statuses),
            sessions: BTreeMap::new(),
            by_discr: HashMap::new(),
            receivers: BTreeMap::new(),
            datagrams_tx,
            entropy: RandomState::new(),
        };
        let join = tokio::spawn(task.run(rx, datagrams));
        Bfd {
            commands,
            statuses,
            join,
        }
    }

    /// The peer's session from now on: `Some` starts it, or changes it in place (new
    /// timers: a Poll Sequence; a new address: a new session), `None` ends it.
    pub fn configure(&self, key: PeerKey, spec: Option<BfdSpec>) {
        // Err: the task is gone (runtime shutting down); nothing left to configure.
        let _ = self.commands.send(Command::Configure { key, spec });
    }

    /// The peer's BFD status, `None` while it has no session. The same channel for
    /// every subscriber of a peer, across sessions and peer-task restarts.
    pub fn subscribe(&self, key: PeerKey) -> watch::Receiver<Option<BfdStatus>> {
        let mut map = self.statuses.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(key)
            .or_insert_with(|| watch::channel(None).0)
            .subscribe()
    }

    /// Ends every session with an AdminDown packet and the task with them, waiting at
    /// most `bound`.
    pub async fn shutdown(mut self, bound: Duration) {
        let _ = self.commands.send(Command::Shutdown);
        let _ = tokio::time::timeout(bound, &mut self.join).await;
    }

    /// Whether the task has ended (it ends only when every handle is dropped, or on a
    /// panic).
    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }
}

impl Drop for Bfd {
    fn drop(&mut self) {
        self.join.abort();
    }
}

/// One session and its sending socket.
struct Entry {
    spec: BfdSpec,
    session: bfd::Session,
    tx: Option<UdpSocket>,
    dst: SocketAddr,
    last_rx: Option<Instant>,
    failures: u64,
    was_up: bool,
    last_detection: Option<Duration>,
    since: Instant,
}

/// A datagram from one of the receiving sockets.
struct Received {
    local: SocketAddr,
    datagram: Datagram,
    bytes: [u8; DATAGRAM_MAX],
}

struct Task {
    observer: Arc<dyn BfdObserver>,
    statuses: Statuses,
    sessions: BTreeMap<PeerKey, Entry>,
    by_discr: HashMap<u32, PeerKey>,
    /// Receiving sockets by local address and port, each read by a task of its own
    /// into `datagrams`; kept while the task runs (a few: addresses x 2 ports).
    receivers: BTreeMap<SocketAddr, JoinHandle<()>>,
    datagrams_tx: mpsc::Sender<Received>,
    entropy: RandomState,
}

impl Drop for Task {
    fn drop(&mut self) {
        for r in self.receivers.values() {
            r.abort();
        }
    }
}

impl Task {
    async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        mut datagrams: mpsc::Receiver<Received>,
    ) {
        loop {
            let deadline = self
                .sessions
                .values()
                .filter_map(|e| e.session.poll_timeout())
                .min();
            tokio::select! {
                biased;
                c = commands.recv() => match c {
                    Some(Command::Configure { key, spec }) => {
                        self.configure(key, spec, Instant::now());
                    }
                    Some(Command::Shutdown) | None => break,
                },
                Some(r) = datagrams.recv() => self.received(&r, Instant::now()),
                () = sleep_until(deadline) => {}
            }
            let now = Instant::now();
            for entry in self.sessions.values_mut() {
                if entry.session.poll_timeout().is_some_and(|t| t <= now) {
                    entry.session.handle_timeout(now);
                }
            }
            self.flush(now);
        }
        // The speaker stops: AdminDown on the way out (RFC 5880 section 6.8.16), so that
        // peers do not take it for a failure of the path (RFC 5882 section 3.2) and a
        // graceful restart keeps its routes.
        let now = Instant::now();
        let keys: Vec<PeerKey> = self.sessions.keys().copied().collect();
        for key in keys {
            self.remove(key, now);
        }
    }

    fn configure(&mut self, key: PeerKey, spec: Option<BfdSpec>, now: Instant) {
        let Some(spec) = spec else {
            if self.sessions.contains_key(&key) {
                info!(peer = %key, "bfd session removed");
            }
            self.remove(key, now);
            return;
        };
        if let Some(entry) = self.sessions.get_mut(&key) {
            if entry.spec.addressing() == spec.addressing() {
                if entry.spec.session != spec.session {
                    info!(
                        peer = %key,
                        profile = %spec.profile,
                        tx_ms = spec.session.desired_min_tx.as_millis(),
                        rx_ms = spec.session.required_min_rx.as_millis(),
                        multiplier = spec.session.detect_mult,
                        passive = spec.session.passive,
                        "bfd timers changed: poll sequence"
                    );
                    entry.session.set_config(now, spec.session);
                }
                entry.spec = spec;
                self.publish(key);
                return;
            }
            self.remove(key, now);
        }
        self.add(key, spec, now);
    }

    fn add(&mut self, key: PeerKey, spec: BfdSpec, now: Instant) {
        let seed = self.entropy.hash_one((key, now));
        let Some(discr) = allocate_discriminator(seed, |d| self.by_discr.contains_key(&d)) else {
            // Four billion sessions: cannot happen with a config's peers.
            warn!(peer = %key, "bfd: no free discriminator");
            return;
        };
        let local = SocketAddr::new(spec.bind_addr(), spec.port());
        self.ensure_receiver(local, &key);
        let first = *BFD_SOURCE_PORTS.start() + (discr % 16384) as u16;
        let tx = match socket::bfd_sender(spec.bind_addr(), first) {
            Ok(s) => Some(s),
            Err(e) => {
                warn!(peer = %key, error = %e, source = %spec.bind_addr(), "bfd: cannot bind the sending socket");
                self.observer.bfd_error(Some(&key), "bind sender", &e);
                None
            }
        };
        info!(
            peer = %key,
            profile = %spec.profile,
            multihop = spec.multihop,
            local_discr = discr,
            tx_ms = spec.session.desired_min_tx.as_millis(),
            rx_ms = spec.session.required_min_rx.as_millis(),
            multiplier = spec.session.detect_mult,
            passive = spec.session.passive,
            "bfd session started"
        );
        let session = bfd::Session::new(spec.session, discr, now, seed);
        self.by_discr.insert(discr, key);
        self.sessions.insert(
            key,
            Entry {
                dst: SocketAddr::new(spec.remote, spec.port()),
                spec,
                session,
                tx,
                last_rx: None,
                failures: 0,
                was_up: false,
                last_detection: None,
                since: now,
            },
        );
        self.publish(key);
    }

    /// Ends a session: one AdminDown packet, so that the peer does not count it as a
    /// failure, then nothing.
    fn remove(&mut self, key: PeerKey, now: Instant) {
        if let Some(mut entry) = self.sessions.remove(&key) {
            self.by_discr.remove(&entry.session.local_discr());
            entry.session.set_admin_down(now, true);
            while let Some(p) = entry.session.poll_transmit(now) {
                send(&*self.observer, &key, &entry, &p);
            }
            self.observer.bfd_removed(&key);
        }
        let map = self.statuses.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tx) = map.get(&key) {
            tx.send_replace(None);
        }
    }

    /// The receiving socket of `local` (address and port), started once.
    fn ensure_receiver(&mut self, local: SocketAddr, key: &PeerKey) {
        if self.receivers.get(&local).is_some_and(|r| !r.is_finished()) {
            return;
        }
        match socket::bfd_receiver(local) {
            Ok(sock) => {
                debug!(local = %local, "bfd: listening");
                let out = self.datagrams_tx.clone();
                let observer = Arc::clone(&self.observer);
                self.receivers
                    .insert(local, tokio::spawn(read_loop(sock, local, out, observer)));
            }
            Err(e) => {
                warn!(local = %local, error = %e, "bfd: cannot bind the receiving socket");
                self.observer.bfd_error(Some(key), "bind receiver", &e);
            }
        }
    }

    /// Demultiplexes one received datagram to its session (RFC 5881 section 3).
    fn received(&mut self, r: &Received, now: Instant) {
        let d = r.datagram;
        let multihop = r.local.port() == MULTIHOP_PORT;
        if d.truncated {
            return self.drop_packet(None, "truncated");
        }
        // Single-hop: before anything else (RFC 5881 section 5; no session is needed to
        // know every packet to this port must have crossed no router).
        if !multihop && d.ttl != Some(SINGLE_HOP_TTL) {
            return self.drop_packet(None, "ttl");
        }
        let packet = match Packet::decode(&r.bytes[..d.len.min(DATAGRAM_MAX)]) {
            Ok(p) => p,
            Err(e) => {
                debug!(from = %d.from, error = %e, "bfd: malformed packet");
                return self.drop_packet(None, e.reason());
            }
        };
        let from = d.from.ip().to_canonical();
        let key = if packet.your_discr != 0 {
            match self.by_discr.get(&packet.your_discr) {
                Some(k) => *k,
                None => return self.drop_packet(None, "unknown_discriminator"),
            }
        } else {
            let found = self.sessions.iter().find(|(_, e)| {
                e.spec.remote == from
                    && e.spec.multihop == multihop
                    && (r.local.ip().is_unspecified() || e.spec.source == Some(r.local.ip()))
            });
            match found {
                Some((k, _)) => *k,
                None => return self.drop_packet(None, "no_session"),
            }
        };
        let Some(entry) = self.sessions.get_mut(&key) else {
            return self.drop_packet(None, "unknown_discriminator");
        };
        let refused = if entry.spec.multihop != multihop {
            Some("wrong_port")
        } else if entry.spec.remote != from {
            Some("wrong_source")
        } else if d.ttl.is_none_or(|t| t < entry.spec.min_ttl) {
            Some("ttl")
        } else {
            None
        };
        if let Some(reason) = refused {
            debug!(peer = %key, from = %d.from, ttl = ?d.ttl, reason, "bfd: packet dropped");
            return self.observer.bfd_dropped(Some(&key), reason);
        }
        match entry.session.handle_packet(now, &packet) {
            Ok(()) => {
                entry.last_rx = Some(now);
                self.observer.bfd_packet(&key, Direction::Received);
            }
            Err(discard) => {
                debug!(peer = %key, error = %discard, "bfd: packet discarded");
                self.observer.bfd_dropped(Some(&key), discard.reason());
            }
        }
    }

    fn drop_packet(&self, key: Option<PeerKey>, reason: &'static str) {
        self.observer.bfd_dropped(key.as_ref(), reason);
    }

    /// Sends what each session asks and publishes its state changes.
    fn flush(&mut self, now: Instant) {
        let mut changed = Vec::new();
        for (key, entry) in &mut self.sessions {
            while let Some(p) = entry.session.poll_transmit(now) {
                send(&*self.observer, key, entry, &p);
            }
            while let Some(event) = entry.session.poll_event() {
                let Event::StateChanged {
                    from,
                    to,
                    diag,
                    remote,
                } = event;
                if to == State::Up {
                    entry.was_up = true;
                }
                if event.is_failure() {
                    entry.failures += 1;
                    if diag == Diag::ControlDetectionTimeExpired {
                        let after = entry.last_rx.map(|t| now.saturating_duration_since(t));
                        entry.last_detection = after;
                        if let Some(after) = after {
                            self.observer.bfd_detected(key, after);
                        }
                    }
                    warn!(peer = %key, from = %from, to = %to, diag = %diag, remote = %remote, "bfd session down");
                } else {
                    info!(peer = %key, from = %from, to = %to, diag = %diag, remote = %remote, "bfd state changed");
                }
                entry.since = now;
                self.observer
                    .bfd_state_changed(key, from, to, diag, event.is_failure());
                changed.push(*key);
            }
        }
        for key in changed {
            self.publish(key);
        }
    }

    fn publish(&self, key: PeerKey) {
        let Some(e) = self.sessions.get(&key) else {
            return;
        };
        let status = BfdStatus {
            state: e.session.state(),
            diag: e.session.diag(),
            remote_state: e.session.remote_state(),
            local_discr: e.session.local_discr(),
            remote_discr: e.session.remote_discr(),
            multihop: e.spec.multihop,
            detection_time: e.session.detection_time(),
            failures: e.failures,
            was_up: e.was_up,
            last_detection: e.last_detection,
            since: e.since,
        };
        self.observer.bfd_status(&key, &status);
        let mut map = self.statuses.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(key)
            .or_insert_with(|| watch::channel(None).0)
            .send_replace(Some(status));
    }
}

/// Sends one packet of a session (UDP: a full socket buffer drops it, as the network
/// could; the session's timers cope).
fn send(observer: &dyn BfdObserver, key: &PeerKey, entry: &Entry, p: &Packet) {
    let Some(tx) = &entry.tx else {
        return;
    };
    match tx.try_send_to(&p.encode(), entry.dst) {
        Ok(_) => observer.bfd_packet(key, Direction::Sent),
        Err(e) => {
            debug!(peer = %key, error = %e, "bfd: send failed");
            observer.bfd_error(Some(key), "send", &e);
        }
    }
}

/// Reads one receiving socket into the task's queue for as long as the task runs.
async fn read_loop(
    sock: UdpSocket,
    local: SocketAddr,
    out: mpsc::Sender<Received>,
    observer: Arc<dyn BfdObserver>,
) {
    let mut bytes = [0u8; DATAGRAM_MAX];
    loop {
        if sock.readable().await.is_err() {
            return;
        }
        loop {
            match socket::recv_with_ttl(&sock, &mut bytes) {
                Ok(datagram) => {
                    let r = Received {
                        local,
                        datagram,
                        bytes,
                    };
                    match out.try_send(r) {
                        Ok(()) => {}
                        Err(mpsc::error::TrySendError::Full(_)) => {
                            observer.bfd_dropped(None, "queue_full");
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => return,
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    debug!(local = %local, error = %e, "bfd: receive failed");
                    break;
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
        None => pending().await,
    }
}
