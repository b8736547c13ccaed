//! The peer driver against a scripted peer, for what no real daemon can be made to do
//! on demand: stop reading while we have a large table to send, go silent, send
//! garbage, dial us while we dial it, ask for a route refresh at a chosen moment, send
//! with a chosen TTL (GTSM). The
//! scripted peer speaks through this crate's own codec (bgp::wire), so what it checks is
//! the driver's behaviour, not the codec; interop_sessions checks the bytes against real
//! implementations.
//!
//! Everything runs on loopback (127.0.0.2 for the speaker, 127.0.0.3 for the peer,
//! ephemeral ports), bounded in time; no namespace and no daemon is needed.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ipnet::{IpNet, Ipv6Net};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio::time::timeout;

use podcidr_speaker::bgp::session::State;
use podcidr_speaker::bgp::wire::{
    check_header, decode_message, encode_message, AfiSafi, Capability, Context, Message,
    MessageType, Notification, Open, RouteRefresh, RouteRefreshSubtype, Update,
};
use podcidr_speaker::config::{self, PeerKey};
use podcidr_speaker::peer::{
    self, Direction, Listener, PeerHandle, PeerObserver, PeerSpec, PeerStatus, RouteRefusal,
    RunOverrides, Shutdown, WRITE_THRESHOLD,
};
use podcidr_speaker::routes::{DesiredRoutes, NextHop, PlannedRoute, RouteAttrs};

const SPEAKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const PEER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
const SPEAKER_AS: u32 = 65001;
const PEER_AS: u32 = 65002;
const STEP: Duration = Duration::from_secs(20);

/// The peer's side of one connection: framing and decoding with the negotiated context.
/// The write half is shared, so that a task can keep sending KEEPALIVEs while the test
/// decides when to read.
struct Wire {
    reader: OwnedReadHalf,
    writer: Arc<tokio::sync::Mutex<OwnedWriteHalf>>,
    rbuf: BytesMut,
    ctx: Context,
}

impl Wire {
    fn new(stream: TcpStream) -> Wire {
        let (reader, writer) = stream.into_split();
        Wire {
            reader,
            writer: Arc::new(tokio::sync::Mutex::new(writer)),
            rbuf: BytesMut::new(),
            ctx: Context::default(),
        }
    }

    /// The next message, `None` at EOF.
    async fn recv(&mut self) -> Option<Message> {
        use tokio::io::AsyncReadExt;
        loop {
            if let Some(len) = check_header(&self.rbuf, &self.ctx).expect("speaker framing") {
                if self.rbuf.len() >= len {
                    let m = self.rbuf.split_to(len);
                    return Some(decode_message(&m, &self.ctx).expect("speaker message"));
                }
            }
            let n = self.reader.read_buf(&mut self.rbuf).await.ok()?;
            if n == 0 {
                return None;
            }
        }
    }

    async fn recv_step(&mut self) -> Option<Message> {
        timeout(STEP, self.recv()).await.expect("a message in time")
    }

    async fn send(&self, m: &Message) {
        send(&self.writer, m, &self.ctx).await.expect("write");
    }

    /// OPEN both ways and KEEPALIVE both ways; returns the speaker's OPEN.
    async fn handshake(&mut self, id: Ipv4Addr, extended: bool) -> Open {
        let Some(Message::Open(theirs)) = self.recv_step().await else {
            panic!("expected the speaker's OPEN")
        };
        self.send(&Message::Open(peer_open(id, extended))).await;
        self.send(&Message::Keepalive).await;
        let Some(Message::Keepalive) = self.recv_step().await else {
            panic!("expected the speaker's KEEPALIVE")
        };
        self.ctx = Context {
            four_octet_as: true,
            extended_message: extended,
            ..Context::default()
        };
        theirs
    }

    /// KEEPALIVEs every second until the returned guard is dropped.
    fn keep_alive(&self) -> tokio::task::JoinHandle<()> {
        let writer = self.writer.clone();
        let ctx = self.ctx;
        tokio::spawn(async move {
            while send(&writer, &Message::Keepalive, &ctx).await.is_ok() {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    }
}

async fn send(
    writer: &tokio::sync::Mutex<OwnedWriteHalf>,
    m: &Message,
    ctx: &Context,
) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut out = BytesMut::new();
    encode_message(m, ctx, &mut out).expect("encode");
    writer.lock().await.write_all(&out).await
}

fn peer_open(id: Ipv4Addr, extended: bool) -> Open {
    let mut capabilities = vec![
        Capability::Multiprotocol(AfiSafi::IPV4_UNICAST),
        Capability::Multiprotocol(AfiSafi::IPV6_UNICAST),
        Capability::RouteRefresh,
        Capability::EnhancedRouteRefresh,
        Capability::FourOctetAs(PEER_AS),
    ];
    if extended {
        capabilities.push(Capability::ExtendedMessage);
    }
    Open {
        version: 4,
        my_as: PEER_AS as u16,
        hold_time: 9,
        bgp_id: id,
        capabilities,
        other_params: vec![],
    }
}

/// Every prefix an UPDATE announces and withdraws, and whether it is an End-of-RIB.
fn prefixes(u: &Update) -> (Vec<IpNet>, Vec<IpNet>, Option<AfiSafi>) {
    let mut ann: Vec<IpNet> = u.nlri.iter().map(|n| n.prefix).collect();
    let mut wd: Vec<IpNet> = u.withdrawn.iter().map(|n| n.prefix).collect();
    if let Some(r) = u.mp_reach() {
        ann.extend(r.nlri.iter().map(|n| n.prefix));
    }
    if let Some(w) = u.mp_unreach() {
        wd.extend(w.withdrawn.iter().map(|n| n.prefix));
    }
    (ann, wd, u.end_of_rib_family())
}

/// Everything the observer was told, for the assertions on the observer contract.
#[derive(Default)]
struct Recorder {
    states: Mutex<Vec<(State, State)>>,
    notifications: Mutex<Vec<(Direction, u8, u8, String)>>,
    announced: Mutex<Vec<(AfiSafi, u64)>>,
    written: Mutex<Vec<Duration>>,
    sent_updates: Mutex<u64>,
    refused: Mutex<Vec<(AfiSafi, RouteRefusal, u64)>>,
}

impl PeerObserver for Recorder {
    fn state_changed(&self, _: &PeerKey, from: State, to: State) {
        self.states.lock().unwrap().push((from, to));
    }
    fn message(&self, _: &PeerKey, dir: Direction, kind: MessageType) {
        if dir == Direction::Sent && kind == MessageType::Update {
            *self.sent_updates.lock().unwrap() += 1;
        }
    }
    fn notification(&self, _: &PeerKey, dir: Direction, code: u8, subcode: u8, text: &str) {
        self.notifications
            .lock()
            .unwrap()
            .push((dir, code, subcode, text.to_string()));
    }
    fn announced(&self, _: &PeerKey, afi: AfiSafi, count: u64) {
        self.announced.lock().unwrap().push((afi, count));
    }
    fn update_written(&self, _: &PeerKey, since: Duration) {
        self.written.lock().unwrap().push(since);
    }
    fn not_announced(&self, _: &PeerKey, afi: AfiSafi, reason: RouteRefusal, count: u64) {
        self.refused.lock().unwrap().push((afi, reason, count));
    }
}

/// The speaker: a peer task built from a bgp-config text, as the daemon builds it.
struct Speaker {
    handle: Option<PeerHandle>,
    desired: watch::Sender<Arc<DesiredRoutes>>,
    shutdown: watch::Sender<Option<Shutdown>>,
}

impl Speaker {
    /// A peer on 127.0.0.3:`peer_port`; hold time 9 s and no graceful restart (the
    /// speaker's default is on) unless `extra` (lines of `    key: value`) sets them.
    fn spec(peer_port: u16, extra: &str) -> PeerSpec {
        let hold = if extra.contains("hold-time:") {
            ""
        } else {
            "    hold-time: 9s\n"
        };
        let gr = if extra.contains("graceful-restart:") {
            ""
        } else {
            "    graceful-restart: false\n"
        };
        let text = format!(
            "peers:\n  - peer-address: {PEER}\n    peer-port: {peer_port}\n    peer-asn: {PEER_AS}\n    \
             my-asn: {SPEAKER_AS}\n    connect-retry-time: 1s\n{hold}{gr}{extra}"
        );
        let cfg = config::parse(&text).unwrap_or_else(|e| panic!("{e}"));
        let run = RunOverrides {
            source_address: Some(IpAddr::V4(SPEAKER)),
            router_id: Some(Ipv4Addr::new(10, 0, 0, 5)),
            node_ipv4: None,
            node_name: None,
            graceful_shutdown: std::time::Duration::ZERO,
        };
        PeerSpec::from_config(&cfg.peers[0], &run).unwrap()
    }

    fn start(
        spec: PeerSpec,
        routes: Arc<DesiredRoutes>,
        observer: Arc<dyn PeerObserver>,
        inbound: Option<peer::Inbound>,
    ) -> Speaker {
        let (desired, desired_rx) = watch::channel(routes);
        let (shutdown, shutdown_rx) = watch::channel(None);
        let handle = peer::spawn(spec, desired_rx, observer, shutdown_rx, inbound).unwrap();
        Speaker {
            handle: Some(handle),
            desired,
            shutdown,
        }
    }

    fn status(&self) -> PeerStatus {
        self.handle.as_ref().expect("running").status()
    }

    fn set_routes(&self, routes: Arc<DesiredRoutes>) {
        self.desired.send_replace(routes);
    }

    async fn wait(&self, what: &str, pred: impl Fn(&PeerStatus) -> bool) -> PeerStatus {
        let deadline = Instant::now() + STEP;
        loop {
            let s = self.status();
            if pred(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {s:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Shuts down and returns how long the task took to end.
    async fn stop(&mut self, mode: Shutdown) -> Duration {
        let h = self.handle.take().expect("running");
        let t0 = Instant::now();
        self.shutdown.send_replace(Some(mode));
        timeout(Duration::from_secs(10), h.join)
            .await
            .expect("the task ends in time")
            .expect("the task does not panic");
        t0.elapsed()
    }
}

async fn peer_listener() -> TcpListener {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(SocketAddr::new(IpAddr::V4(PEER), 0)).unwrap();
    s.listen(4).unwrap()
}

/// The receive buffer of a peer that stops reading.
const PEER_RCVBUF: usize = 128 * 1024;

/// The largest send buffer the kernel grows a socket to (tcp(7) tcp_wmem).
fn tcp_wmem_max() -> usize {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(4 * 1024 * 1024)
}

/// A small receive buffer, so that a peer that stops reading stops the speaker's socket
/// soon (set before listen: it bounds the window the handshake advertises).
async fn peer_listener_small_window() -> TcpListener {
    let s = TcpSocket::new_v4().unwrap();
    s.set_recv_buffer_size(PEER_RCVBUF as u32).unwrap();
    s.bind(SocketAddr::new(IpAddr::V4(PEER), 0)).unwrap();
    s.listen(4).unwrap()
}

async fn accept(l: &TcpListener) -> Wire {
    let (s, from) = timeout(STEP, l.accept())
        .await
        .expect("a dial in time")
        .unwrap();
    assert_eq!(
        from.ip(),
        IpAddr::V4(SPEAKER),
        "dialed from the source address"
    );
    Wire::new(s)
}

fn attrs() -> Arc<RouteAttrs> {
    Arc::new(RouteAttrs {
        origin: podcidr_speaker::bgp::wire::Origin::Igp,
        as_path: vec![SPEAKER_AS],
        next_hop: NextHop::SessionLocal,
        med: None,
        local_pref: None,
        communities: vec![],
        large_communities: vec![],
    })
}

fn v6_hosts(n: u32) -> Vec<IpNet> {
    (0..n)
        .map(|i| {
            IpNet::V6(
                Ipv6Net::new(Ipv6Addr::from((0xfd10_u128 << 112) | u128::from(i)), 128).unwrap(),
            )
        })
        .collect()
}

/// The routes as the planner writes them for this IPv4 session: IPv4 with the session's
/// address, IPv6 with the node's IPv6 address (fd00::2) as next hop.
fn desired(prefixes: &[IpNet]) -> Arc<DesiredRoutes> {
    let a = attrs();
    let a6 = Arc::new(RouteAttrs {
        next_hop: NextHop::Address(IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2))),
        ..(*a).clone()
    });
    desired_with(prefixes.iter().map(|p| {
        (
            *p,
            if p.addr().is_ipv4() {
                a.clone()
            } else {
                a6.clone()
            },
        )
    }))
}

fn desired_with(routes: impl IntoIterator<Item = (IpNet, Arc<RouteAttrs>)>) -> Arc<DesiredRoutes> {
    Arc::new(
        routes
            .into_iter()
            .map(|(p, attrs)| {
                (
                    p,
                    PlannedRoute {
                        attrs,
                        node: Arc::from("n1"),
                    },
                )
            })
            .collect(),
    )
}

fn v4_net(i: u32) -> IpNet {
    IpNet::V4(ipnet::Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 + (i << 8)), 24).unwrap())
}

/// Reads UPDATEs until the End-of-RIB of `family`; returns every announced prefix.
async fn read_table(w: &mut Wire, family: AfiSafi) -> Vec<IpNet> {
    let mut got = Vec::new();
    loop {
        match w.recv_step().await {
            Some(Message::Update(u)) => {
                let (ann, wd, eor) = prefixes(&u);
                assert!(wd.is_empty(), "nothing to withdraw in a first table");
                got.extend(ann);
                if eor == Some(family) {
                    return got;
                }
            }
            Some(Message::Keepalive) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// A peer that stops reading: the speaker stops encoding once its write buffer is full
/// (memory bounded by WRITE_THRESHOLD, not by the table), keeps the session (the peer's
/// keepalives still arrive), and sends everything once the peer reads again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stops_reading_does_not_grow_our_memory() {
    // IPv6 host routes, 17 octets of NLRI each: more than the kernel's socket buffers
    // (the speaker's send buffer can grow to tcp_wmem's maximum, the peer's receive
    // buffer is held small) can take, so that the stall reaches the speaker's own buffer.
    let kernel = tcp_wmem_max() + 2 * PEER_RCVBUF;
    let n = u32::try_from(((kernel + WRITE_THRESHOLD) * 3 / 2 / 17).max(400_000))
        .expect("a table of a sane size");
    let table = v6_hosts(n);
    let l = peer_listener_small_window().await;
    let port = l.local_addr().unwrap().port();
    let rec = Arc::new(Recorder::default());
    let mut s = Speaker::start(Speaker::spec(port, ""), desired(&table), rec.clone(), None);
    let mut w = accept(&l).await;
    w.handshake(PEER, false).await;

    // Stop reading; keep sending KEEPALIVEs.
    let keepalives = w.keep_alive();

    // The speaker is Established once it has taken our KEEPALIVE; on a loaded machine
    // that can be later than a second, which the settling below would read as a stall.
    let deadline = Instant::now() + STEP;
    while s.status().state != State::Established {
        assert!(
            Instant::now() < deadline,
            "never established: {:#?}",
            s.status()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The socket fills, then the write buffer; encoding stops there.
    let mut last = s.status();
    let mut stable_since = Instant::now();
    let deadline = Instant::now() + STEP;
    while stable_since.elapsed() < Duration::from_secs(1) {
        assert!(Instant::now() < deadline, "never settled: {last:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = s.status();
        if now.pending != last.pending || now.write_buffer != last.write_buffer {
            stable_since = Instant::now();
        }
        let bound = WRITE_THRESHOLD + 65_535 + 4096;
        assert!(
            now.write_buffer <= bound,
            "write buffer {} > {bound}",
            now.write_buffer
        );
        last = now;
    }
    assert_eq!(
        last.state,
        State::Established,
        "the stalled session stays up"
    );
    assert!(last.write_buffer > 0, "the buffer is where the stall shows");
    assert!(
        last.pending > 0,
        "encoding stopped before the table ended: {last:#?}"
    );
    let advertised = last
        .advertised
        .get(&AfiSafi::IPV6_UNICAST)
        .copied()
        .unwrap_or(0);
    assert_eq!(advertised + last.pending as u64, u64::from(n));
    // What was encoded is what the kernel and the bounded buffer hold, not the table:
    // each /128 is at least 17 octets on the wire.
    let held_by_us_and_kernel = (kernel + WRITE_THRESHOLD + 65_535) as u64;
    assert!(
        advertised * 17 <= held_by_us_and_kernel,
        "{advertised} routes encoded while the peer read nothing"
    );
    assert!(rec.written.lock().unwrap().is_empty(), "not written yet");

    // Read again: every route arrives exactly once, then End-of-RIB.
    let t0 = Instant::now();
    let got = read_table(&mut w, AfiSafi::IPV6_UNICAST).await;
    eprintln!(
        "stalled with {advertised} routes encoded, {} pending, {} octets buffered; \
         the rest read in {:?}",
        last.pending,
        last.write_buffer,
        t0.elapsed()
    );
    assert_eq!(got.len(), n as usize);
    let unique: HashSet<IpNet> = got.iter().copied().collect();
    assert_eq!(unique.len(), n as usize);
    let st = s
        .wait("everything written", |st| {
            st.pending == 0 && st.write_buffer == 0
        })
        .await;
    assert_eq!(
        st.advertised.get(&AfiSafi::IPV6_UNICAST),
        Some(&u64::from(n))
    );
    assert_eq!(st.stats.established_count, 1);
    assert_eq!(
        rec.announced.lock().unwrap().last(),
        Some(&(AfiSafi::IPV6_UNICAST, u64::from(n)))
    );
    assert_eq!(
        rec.written.lock().unwrap().len(),
        1,
        "one table, one report"
    );
    keepalives.abort();
    s.stop(Shutdown::Restart("test restart".into())).await;
}

/// A peer that goes silent: after the hold time the speaker sends Hold Timer Expired
/// (RFC 4271 section 6.5), closes, and dials again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_peer_is_dropped_at_the_hold_time_and_redialed() {
    let l = peer_listener().await;
    let port = l.local_addr().unwrap().port();
    let rec = Arc::new(Recorder::default());
    let mut s = Speaker::start(
        Speaker::spec(port, "    hold-time: 3s\n"),
        desired(&[]),
        rec.clone(),
        None,
    );
    let mut w = accept(&l).await;
    let t0 = Instant::now();
    w.handshake(PEER, false).await;
    // Read (the speaker's End-of-RIBs and KEEPALIVEs) but never answer.
    let notification = loop {
        match w.recv_step().await {
            Some(Message::Notification(n)) => break n,
            Some(_) => {}
            None => panic!("closed without a NOTIFICATION"),
        }
    };
    let waited = t0.elapsed();
    assert_eq!((notification.code, notification.subcode), (4, 0));
    assert!(
        (Duration::from_millis(2900)..Duration::from_secs(5)).contains(&waited),
        "hold timer fired after {waited:?}"
    );
    assert!(
        w.recv_step().await.is_none(),
        "closed after the NOTIFICATION"
    );
    let st = s.wait("the drop recorded", |st| st.stats.flaps == 1).await;
    assert!(matches!(
        st.stats.last_error,
        Some(podcidr_speaker::bgp::session::SessionError::HoldTimerExpired)
    ));
    assert_eq!(
        rec.notifications.lock().unwrap().as_slice(),
        &[(Direction::Sent, 4, 0, "hold timer expired".to_string())]
    );
    // The backoff brings the speaker back.
    let mut again = accept(&l).await;
    again.handshake(PEER, false).await;
    s.wait("a second session", |st| st.stats.established_count == 2)
        .await;
    let states = rec.states.lock().unwrap().clone();
    assert_eq!(
        &states[..5],
        &[
            (State::Idle, State::Connect),
            (State::Connect, State::OpenSent),
            (State::OpenSent, State::OpenConfirm),
            (State::OpenConfirm, State::Established),
            (State::Established, State::Idle),
        ]
    );
    s.stop(Shutdown::Admin(String::new())).await;
}

/// Bytes that are not BGP: the speaker answers with the NOTIFICATION RFC 4271 section
/// 6.1 names and closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_message_is_answered_with_its_notification() {
    let l = peer_listener().await;
    let port = l.local_addr().unwrap().port();
    let rec = Arc::new(Recorder::default());
    let mut s = Speaker::start(Speaker::spec(port, ""), desired(&[]), rec.clone(), None);
    let mut w = accept(&l).await;
    w.handshake(PEER, false).await;
    // A KEEPALIVE whose length field says 18: below the header size.
    let mut bad = vec![0xff; 16];
    bad.extend_from_slice(&[0x00, 0x12, 0x04]);
    {
        use tokio::io::AsyncWriteExt;
        w.writer.lock().await.write_all(&bad).await.unwrap();
    }
    let n = loop {
        match w.recv_step().await {
            Some(Message::Notification(n)) => break n,
            Some(_) => {}
            None => panic!("closed without a NOTIFICATION"),
        }
    };
    assert_eq!(
        n,
        Notification::new(1, 2, bytes::Bytes::from_static(&[0x00, 0x12])),
        "bad message length, with the length as data"
    );
    assert!(w.recv_step().await.is_none());
    s.wait("the drop recorded", |st| st.stats.flaps == 1).await;
    s.stop(Shutdown::Admin(String::new())).await;
}

/// ROUTE-REFRESH (RFC 2918) with enhanced route refresh (RFC 7313): BoRR, the whole
/// table of the family again, EoRR; the other family untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_refresh_resends_the_family_between_borr_and_eorr() {
    let l = peer_listener().await;
    let port = l.local_addr().unwrap().port();
    let mut table: Vec<IpNet> = (0..3000u32).map(v4_net).collect();
    table.extend(v6_hosts(10));
    let mut s = Speaker::start(
        Speaker::spec(port, ""),
        desired(&table),
        Arc::new(peer::NoopObserver),
        None,
    );
    let mut w = accept(&l).await;
    w.handshake(PEER, false).await;
    let mut first = read_table(&mut w, AfiSafi::IPV4_UNICAST).await;
    first.extend(read_table(&mut w, AfiSafi::IPV6_UNICAST).await);
    assert_eq!(first.len(), 3010);
    s.wait("synced", |st| st.pending == 0 && st.write_buffer == 0)
        .await;

    w.send(&Message::RouteRefresh(RouteRefresh {
        afi_safi: AfiSafi::IPV4_UNICAST,
        subtype: RouteRefreshSubtype::Request,
    }))
    .await;
    let mut seen = Vec::new();
    let mut again = Vec::new();
    loop {
        match w.recv_step().await {
            Some(Message::Keepalive) => {}
            Some(Message::RouteRefresh(rr)) => {
                assert_eq!(rr.afi_safi, AfiSafi::IPV4_UNICAST);
                seen.push(rr.subtype);
                if rr.subtype == RouteRefreshSubtype::Eorr {
                    break;
                }
            }
            Some(Message::Update(u)) => {
                assert_eq!(
                    seen,
                    vec![RouteRefreshSubtype::Borr],
                    "updates inside the brackets"
                );
                let (ann, wd, eor) = prefixes(&u);
                assert!(wd.is_empty() && eor.is_none());
                again.extend(ann);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        seen,
        vec![RouteRefreshSubtype::Borr, RouteRefreshSubtype::Eorr]
    );
    let v4: Vec<IpNet> = first
        .iter()
        .filter(|p| p.addr().is_ipv4())
        .copied()
        .collect();
    assert_eq!(again, v4, "every IPv4 route once, in order, nothing else");
    // The task publishes its status after it has written the EoRR, so the peer can read
    // the EoRR before the counters move: wait for them, then check them exactly.
    let st = s
        .wait("the route refresh counters", |st| {
            st.stats.received.route_refresh >= 1 && st.stats.sent.route_refresh >= 2
        })
        .await;
    assert_eq!(st.stats.received.route_refresh, 1);
    assert_eq!(st.stats.sent.route_refresh, 2);
    s.stop(Shutdown::Admin(String::new())).await;
}

/// Both sides dial at once (RFC 4271 section 6.8): the connection opened by the side
/// with the higher BGP Identifier stays, the other gets Cease/Connection Collision
/// Resolution. Run once with the peer's identifier above ours, once below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_collision_keeps_the_higher_identifiers_connection() {
    // Our identifier is 10.0.0.5.
    for (peer_id, peer_wins) in [
        (Ipv4Addr::new(10, 0, 0, 9), true),
        (Ipv4Addr::new(10, 0, 0, 1), false),
    ] {
        let l = peer_listener().await;
        let port = l.local_addr().unwrap().port();
        let ours = Listener::bind(SocketAddr::new(IpAddr::V4(SPEAKER), 0)).unwrap();
        let spec = Speaker::spec(port, "");
        let inbound = ours.register(&spec).unwrap();
        let mut s = Speaker::start(
            spec,
            desired(&[]),
            Arc::new(peer::NoopObserver),
            Some(inbound),
        );

        // The speaker's connection: hold our OPEN back for now.
        let mut dialed = accept(&l).await;
        let Some(Message::Open(_)) = dialed.recv_step().await else {
            panic!("expected the speaker's OPEN")
        };
        // Ours, to the speaker's listener, from the peer's address.
        let sock = TcpSocket::new_v4().unwrap();
        sock.bind(SocketAddr::new(IpAddr::V4(PEER), 0)).unwrap();
        let mut mine = Wire::new(sock.connect(ours.local_addr()).await.unwrap());
        let Some(Message::Open(_)) = mine.recv_step().await else {
            panic!("expected the speaker's OPEN on the second connection")
        };
        // Our OPEN on the speaker's connection reveals our identifier: the collision is
        // decided there.
        dialed.send(&Message::Open(peer_open(peer_id, false))).await;
        mine.send(&Message::Open(peer_open(peer_id, false))).await;
        let (mut winner, mut loser) = if peer_wins {
            (mine, dialed)
        } else {
            (dialed, mine)
        };
        let cease = loop {
            match loser.recv_step().await {
                Some(Message::Notification(n)) => break n,
                Some(Message::Keepalive) => {}
                other => panic!("unexpected {other:?} on the losing connection"),
            }
        };
        assert_eq!((cease.code, cease.subcode), (6, 7), "collision resolution");
        winner.send(&Message::Keepalive).await;
        match winner.recv_step().await {
            Some(Message::Keepalive) => {}
            other => panic!("unexpected {other:?} on the winning connection"),
        }
        let st = s
            .wait("established on the winner", |st| {
                st.state == State::Established
            })
            .await;
        let local_port = st.local.expect("connected").port();
        assert_eq!(
            local_port == ours.local_addr().port(),
            peer_wins,
            "the inbound connection is the session's exactly when the peer wins: {st:?}"
        );
        s.stop(Shutdown::Admin(String::new())).await;
    }
}

/// Shutdown is bounded even when the NOTIFICATION cannot be written (the peer stopped
/// reading with our buffers full).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_is_bounded_when_the_peer_does_not_read() {
    let kernel = tcp_wmem_max() + 2 * PEER_RCVBUF;
    let n = u32::try_from(((kernel + WRITE_THRESHOLD) * 3 / 2 / 17).max(400_000)).unwrap();
    let l = peer_listener_small_window().await;
    let port = l.local_addr().unwrap().port();
    let mut s = Speaker::start(
        Speaker::spec(port, ""),
        desired(&v6_hosts(n)),
        Arc::new(peer::NoopObserver),
        None,
    );
    let mut w = accept(&l).await;
    w.handshake(PEER, false).await;
    let keepalives = w.keep_alive();
    s.wait("the write buffer full", |st| {
        st.write_buffer >= WRITE_THRESHOLD / 2
    })
    .await;
    let took = s.stop(Shutdown::Admin("going away".into())).await;
    assert!(
        took < 2 * peer::CLOSE_TIMEOUT + Duration::from_secs(1),
        "shutdown took {took:?}"
    );
    keepalives.abort();
}

/// A new desired set: exactly the difference goes out (withdrawals, a changed attribute,
/// an addition), IPv6 routes on this IPv4 session carry the configured IPv6 next hop, and
/// a route the session cannot carry is reported, not sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_route_set_sends_exactly_the_difference() {
    use podcidr_speaker::bgp::wire::{MpNextHop, PathAttribute};
    let l = peer_listener().await;
    let port = l.local_addr().unwrap().port();
    let rec = Arc::new(Recorder::default());
    let a = attrs();
    // As the planner writes them: IPv6 routes on this IPv4 session with the node's IPv6
    // address.
    let a6 = Arc::new(RouteAttrs {
        next_hop: NextHop::Address(IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2))),
        ..(*a).clone()
    });
    let first: Vec<(IpNet, Arc<RouteAttrs>)> = (0..10)
        .map(|i| (v4_net(i), a.clone()))
        .chain(v6_hosts(2).into_iter().map(|p| (p, a6.clone())))
        .collect();
    let mut s = Speaker::start(
        Speaker::spec(port, ""),
        desired_with(first),
        rec.clone(),
        None,
    );
    let mut w = accept(&l).await;
    w.handshake(PEER, false).await;
    // The table: IPv4 then IPv6, each family closed by its End-of-RIB.
    let mut v6_next_hops = Vec::new();
    let mut eors = Vec::new();
    let mut announced = 0;
    while eors.len() < 2 {
        match w.recv_step().await {
            Some(Message::Update(u)) => {
                let (ann, _, eor) = prefixes(&u);
                announced += ann.len();
                eors.extend(eor);
                if let Some(r) = u.mp_reach() {
                    v6_next_hops.push(r.next_hop.clone());
                }
                if !u.nlri.is_empty() {
                    assert!(u.attributes.contains(&PathAttribute::NextHop(SPEAKER)));
                }
            }
            Some(Message::Keepalive) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(announced, 12);
    assert_eq!(eors, vec![AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST]);
    assert_eq!(
        v6_next_hops,
        vec![MpNextHop::V6 {
            global: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
            link_local: None
        }]
    );
    s.wait("synced", |st| st.pending == 0 && st.write_buffer == 0)
        .await;
    assert_eq!(rec.written.lock().unwrap().len(), 1);

    // Drop 0-2, change the MED of 3, add 10, keep the rest; and one IPv4 route with an
    // IPv6 next hop, which cannot be sent: the peer offered no RFC 8950.
    let med = Arc::new(RouteAttrs {
        med: Some(5),
        ..(*a).clone()
    });
    let wrong_family = Arc::new(RouteAttrs {
        next_hop: NextHop::Address("fd00::9".parse().unwrap()),
        ..(*a).clone()
    });
    let second: Vec<(IpNet, Arc<RouteAttrs>)> = (4..11)
        .map(|i| (v4_net(i), a.clone()))
        .chain([(v4_net(3), med), (v4_net(99), wrong_family)])
        .chain(v6_hosts(2).into_iter().map(|p| (p, a6.clone())))
        .collect();
    s.set_routes(desired_with(second));
    let mut withdrawn = Vec::new();
    let mut changed = Vec::new();
    while withdrawn.len() < 3 || changed.len() < 2 {
        match w.recv_step().await {
            Some(Message::Update(u)) => {
                let (ann, wd, _) = prefixes(&u);
                withdrawn.extend(wd);
                for p in ann {
                    let med = u.attributes.iter().find_map(|a| match a {
                        PathAttribute::MultiExitDisc(m) => Some(*m),
                        _ => None,
                    });
                    changed.push((p, med));
                }
            }
            Some(Message::Keepalive) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    withdrawn.sort();
    changed.sort();
    assert_eq!(withdrawn, vec![v4_net(0), v4_net(1), v4_net(2)]);
    assert_eq!(changed, vec![(v4_net(3), Some(5)), (v4_net(10), None)]);
    // Nothing else follows.
    let quiet = timeout(Duration::from_millis(500), async {
        loop {
            match w.recv().await {
                Some(Message::Keepalive) => {}
                other => return other,
            }
        }
    })
    .await;
    assert!(quiet.is_err(), "unexpected {quiet:?}");
    let st = s
        .wait("synced", |st| st.pending == 0 && st.write_buffer == 0)
        .await;
    assert_eq!(st.advertised.get(&AfiSafi::IPV4_UNICAST), Some(&8));
    assert_eq!(
        rec.refused.lock().unwrap().as_slice(),
        &[(
            AfiSafi::IPV4_UNICAST,
            RouteRefusal::ExtendedNextHopNotNegotiated,
            1
        )]
    );
    assert_eq!(rec.written.lock().unwrap().len(), 2);
    s.stop(Shutdown::Admin(String::new())).await;
}

/// The peer restarts (RFC 4724 section 4.2): a new connection arrives from a graceful
/// restart capable peer while the old session is Established. The old connection is
/// closed without a NOTIFICATION and the new one carries the session and the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarting_gr_peer_replaces_its_old_connection() {
    use podcidr_speaker::bgp::wire::{GracefulRestart, GracefulRestartFamily};
    let gr_open = || {
        let mut o = peer_open(Ipv4Addr::new(10, 0, 0, 9), false);
        o.capabilities
            .push(Capability::GracefulRestart(GracefulRestart {
                restart_state: true,
                notification: false,
                restart_time: 30,
                families: vec![GracefulRestartFamily {
                    afi_safi: AfiSafi::IPV4_UNICAST,
                    forwarding_preserved: true,
                }],
            }));
        o
    };
    let l = peer_listener().await;
    let port = l.local_addr().unwrap().port();
    let ours = Listener::bind(SocketAddr::new(IpAddr::V4(SPEAKER), 0)).unwrap();
    let spec = Speaker::spec(port, "    graceful-restart: true\n");
    let inbound = ours.register(&spec).unwrap();
    let table: Vec<IpNet> = (0..5).map(v4_net).collect();
    let mut s = Speaker::start(
        spec,
        desired(&table),
        Arc::new(peer::NoopObserver),
        Some(inbound),
    );

    let mut old = accept(&l).await;
    let Some(Message::Open(_)) = old.recv_step().await else {
        panic!("expected the speaker's OPEN")
    };
    old.send(&Message::Open(gr_open())).await;
    old.send(&Message::Keepalive).await;
    old.ctx.four_octet_as = true;
    assert_eq!(read_table(&mut old, AfiSafi::IPV4_UNICAST).await, table);
    s.wait("established", |st| {
        st.state == State::Established && st.pending == 0
    })
    .await;

    // The "restarted" peer dials in and sends its OPEN.
    let sock = TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(IpAddr::V4(PEER), 0)).unwrap();
    let mut new = Wire::new(sock.connect(ours.local_addr()).await.unwrap());
    let Some(Message::Open(_)) = new.recv_step().await else {
        panic!("expected the speaker's OPEN on the new connection")
    };
    new.send(&Message::Open(gr_open())).await;
    // The old connection ends with no NOTIFICATION.
    loop {
        match old.recv_step().await {
            None => break,
            Some(Message::Keepalive) => {}
            other => panic!("unexpected {other:?} on the old connection"),
        }
    }
    new.send(&Message::Keepalive).await;
    new.ctx.four_octet_as = true;
    match new.recv_step().await {
        Some(Message::Keepalive) => {}
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(read_table(&mut new, AfiSafi::IPV4_UNICAST).await, table);
    let st = s
        .wait("established on the new connection", |st| {
            st.state == State::Established && st.stats.established_count == 2
        })
        .await;
    assert_eq!(st.local.map(|a| a.port()), Some(ours.local_addr().port()));
    assert_eq!(st.stats.sent.notification, 0);
    s.stop(Shutdown::Admin(String::new())).await;
}

/// GTSM (RFC 5082) with `ttl-security`: the speaker only accepts packets that arrive
/// with TTL 255, which on loopback means a peer that sends with 255. A peer sending
/// with the kernel's default TTL never completes the handshake; one sending with 255
/// does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gtsm_accepts_only_a_peer_that_sends_with_ttl_255() {
    let listener_with_ttl = |ttl: Option<u32>| {
        let s = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .unwrap();
        if let Some(ttl) = ttl {
            s.set_ttl_v4(ttl).unwrap();
        }
        s.set_nonblocking(true).unwrap();
        s.bind(&SocketAddr::new(IpAddr::V4(PEER), 0).into())
            .unwrap();
        s.listen(4).unwrap();
        TcpListener::from_std(s.into()).unwrap()
    };

    let far = listener_with_ttl(None);
    let port = far.local_addr().unwrap().port();
    let mut s = Speaker::start(
        Speaker::spec(port, "    ttl-security: true\n"),
        desired(&[]),
        Arc::new(peer::NoopObserver),
        None,
    );
    // Our SYN gets there; the answer, at TTL 64, is dropped by our socket.
    assert!(
        timeout(Duration::from_secs(3), far.accept()).await.is_err(),
        "a handshake completed with a peer that does not send with TTL 255"
    );
    let st = s.status();
    assert!(matches!(st.state, State::Connect | State::Idle), "{st:?}");
    assert_eq!(st.stats.sent.open, 0);
    s.stop(Shutdown::Admin(String::new())).await;

    let near = listener_with_ttl(Some(255));
    let port = near.local_addr().unwrap().port();
    let mut s = Speaker::start(
        Speaker::spec(port, "    ttl-security: true\n"),
        desired(&[]),
        Arc::new(peer::NoopObserver),
        None,
    );
    let mut w = accept(&near).await;
    w.handshake(PEER, false).await;
    s.wait("established", |st| st.state == State::Established)
        .await;
    s.stop(Shutdown::Admin(String::new())).await;
}
