//! The raw test peer: our own harness that speaks BGP as bytes, so that it can send what
//! no real implementation would (a bad marker, an OPEN with hold time 1, an UPDATE with
//! two MP_REACH_NLRI...) and see exactly what the speaker answers, octet by octet.
//!
//! - Message builders ([`message`], [`open`], [`update`], [`attr`]...) write the wire
//!   format by hand from RFC 4271 section 4 and never call the codec under test: a bug
//!   in the codec cannot hide itself by building the test input.
//! - [`RawConn`] is one TCP connection: a reader thread frames what the speaker sends
//!   (keeping every message's exact octets), a writer behind a lock, and optional
//!   KEEPALIVEs on a timer so that a session can stay up while the test watches it.
//! - What the speaker sends is decoded with the codec only where meaning is compared
//!   (its OPEN and the routes it announces), never where the exact reaction is: a
//!   NOTIFICATION is compared as bytes.
//!
//! Must not dial or bind anything but the test namespace's addresses.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use podcidr_speaker::bgp::wire::{
    self, AfiSafi, Context, Message, MpNextHop, Open, PathAttribute, SegmentType,
};

/// BGP message types (RFC 4271 section 4.1, RFC 2918).
pub const OPEN: u8 = 0x01;
pub const UPDATE: u8 = 0x02;
pub const NOTIFICATION: u8 = 0x03;
pub const KEEPALIVE: u8 = 0x04;
pub const ROUTE_REFRESH: u8 = 0x05;

/// How long any single expected message may take to arrive.
pub const STEP: Duration = Duration::from_secs(10);

/// A whole message: marker, length, type, body (RFC 4271 section 4.1).
pub fn message(msg_type: u8, body: &[u8]) -> Vec<u8> {
    let len = u16::try_from(19 + body.len()).expect("test message fits 16 bits");
    let mut m = vec![0xff; 16];
    m.extend_from_slice(&len.to_be_bytes());
    m.push(msg_type);
    m.extend_from_slice(body);
    m
}

pub fn keepalive() -> Vec<u8> {
    message(KEEPALIVE, &[])
}

/// Capabilities (RFC 5492), each `code, length, value`.
pub const CAP_MP_IPV4: [u8; 6] = [0x01, 0x04, 0x00, 0x01, 0x00, 0x01];
pub const CAP_MP_IPV6: [u8; 6] = [0x01, 0x04, 0x00, 0x02, 0x00, 0x01];
pub const CAP_ROUTE_REFRESH: [u8; 2] = [0x02, 0x00];

/// The 4-octet AS capability (RFC 6793 section 3).
pub fn cap_as4(asn: u32) -> Vec<u8> {
    let mut c = vec![0x41, 0x04];
    c.extend_from_slice(&asn.to_be_bytes());
    c
}

/// An Optional Parameters field holding one Capabilities parameter (type 2) per
/// capability, as most implementations send them.
pub fn cap_params(caps: &[&[u8]]) -> Vec<u8> {
    let mut p = Vec::new();
    for c in caps {
        p.push(0x02);
        p.push(u8::try_from(c.len()).expect("capability fits"));
        p.extend_from_slice(c);
    }
    p
}

/// An OPEN body (RFC 4271 section 4.2) with the given optional parameters.
pub fn open_body(version: u8, my_as: u16, hold: u16, id: Ipv4Addr, params: &[u8]) -> Vec<u8> {
    let mut b = vec![version];
    b.extend_from_slice(&my_as.to_be_bytes());
    b.extend_from_slice(&hold.to_be_bytes());
    b.extend_from_slice(&id.octets());
    b.push(u8::try_from(params.len()).expect("parameters fit"));
    b.extend_from_slice(params);
    b
}

pub fn open(version: u8, my_as: u16, hold: u16, id: Ipv4Addr, params: &[u8]) -> Vec<u8> {
    message(OPEN, &open_body(version, my_as, hold, id, params))
}

/// A path attribute (RFC 4271 section 4.3); the extended-length form when `flags` has
/// 0x10.
pub fn attr(flags: u8, type_code: u8, value: &[u8]) -> Vec<u8> {
    let mut a = vec![flags, type_code];
    if flags & 0x10 != 0 {
        a.extend_from_slice(&u16::try_from(value.len()).expect("fits").to_be_bytes());
    } else {
        a.push(u8::try_from(value.len()).expect("attribute fits one octet"));
    }
    a.extend_from_slice(value);
    a
}

/// ORIGIN (well-known mandatory, type 1).
pub fn origin(value: u8) -> Vec<u8> {
    attr(0x40, 0x01, &[value])
}

/// AS_PATH (type 2) of one AS_SEQUENCE of 4-octet AS numbers.
pub fn as_path4(asns: &[u32]) -> Vec<u8> {
    let mut v = vec![0x02, u8::try_from(asns.len()).expect("segment fits")];
    for a in asns {
        v.extend_from_slice(&a.to_be_bytes());
    }
    attr(0x40, 0x02, &v)
}

/// NEXT_HOP (type 3).
pub fn next_hop(a: Ipv4Addr) -> Vec<u8> {
    attr(0x40, 0x03, &a.octets())
}

/// An IPv4 NLRI field entry: length in bits, then the significant octets.
pub fn prefix4(net: &str) -> Vec<u8> {
    let n: ipnet::Ipv4Net = net.parse().expect("test prefix");
    let octets = usize::from(n.prefix_len()).div_ceil(8);
    let mut v = vec![n.prefix_len()];
    v.extend_from_slice(&n.network().octets()[..octets]);
    v
}

/// An IPv6 NLRI entry.
pub fn prefix6(net: &str) -> Vec<u8> {
    let n: ipnet::Ipv6Net = net.parse().expect("test prefix");
    let octets = usize::from(n.prefix_len()).div_ceil(8);
    let mut v = vec![n.prefix_len()];
    v.extend_from_slice(&n.network().octets()[..octets]);
    v
}

/// An UPDATE body (RFC 4271 section 4.3) with the two length fields filled in.
pub fn update_body(withdrawn: &[u8], attrs: &[u8], nlri: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&u16::try_from(withdrawn.len()).expect("fits").to_be_bytes());
    b.extend_from_slice(withdrawn);
    b.extend_from_slice(&u16::try_from(attrs.len()).expect("fits").to_be_bytes());
    b.extend_from_slice(attrs);
    b.extend_from_slice(nlri);
    b
}

pub fn update(withdrawn: &[u8], attrs: &[u8], nlri: &[u8]) -> Vec<u8> {
    message(UPDATE, &update_body(withdrawn, attrs, nlri))
}

/// A NOTIFICATION message (RFC 4271 section 4.5), for comparing with what arrives.
pub fn notification(code: u8, subcode: u8, data: &[u8]) -> Vec<u8> {
    let mut b = vec![code, subcode];
    b.extend_from_slice(data);
    message(NOTIFICATION, &b)
}

/// What the reader thread hands over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// One whole message as it arrived.
    Message(Vec<u8>),
    /// The speaker closed the connection (or reset it).
    Closed(String),
}

/// One connection to the speaker. See the module documentation.
pub struct RawConn {
    stream: TcpStream,
    writer: Arc<Mutex<TcpStream>>,
    frames: Receiver<Frame>,
    reader: Option<JoinHandle<()>>,
    keepalives: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
    /// While set, the reader thread does not read: the speaker's writes back up.
    paused: Arc<AtomicBool>,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// Octets received so far (shared with the reader thread).
    received: Arc<std::sync::atomic::AtomicU64>,
}

impl RawConn {
    /// Takes over an accepted or dialled stream.
    pub fn new(stream: TcpStream) -> RawConn {
        stream.set_nodelay(true).expect("TCP_NODELAY");
        let local = stream.local_addr().expect("local addr");
        let remote = stream.peer_addr().expect("peer addr");
        let (tx, frames) = mpsc::channel();
        let mut rd = stream.try_clone().expect("clone stream");
        let received = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = received.clone();
        let paused = Arc::new(AtomicBool::new(false));
        let pause = paused.clone();
        let reader = std::thread::spawn(move || {
            let mut buf: Vec<u8> = Vec::new();
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                while pause.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                match rd.read(&mut chunk) {
                    Ok(0) => {
                        let _ = tx.send(Frame::Closed("eof".into()));
                        return;
                    }
                    Ok(n) => {
                        counter.fetch_add(n as u64, Ordering::Relaxed);
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => {
                        let _ = tx.send(Frame::Closed(e.to_string()));
                        return;
                    }
                }
                while buf.len() >= 19 {
                    let len = usize::from(u16::from_be_bytes([buf[16], buf[17]]));
                    if len < 19 {
                        let _ = tx.send(Frame::Closed(format!(
                            "the speaker sent an unframeable header {:02x?}",
                            &buf[..19]
                        )));
                        return;
                    }
                    if buf.len() < len {
                        break;
                    }
                    let msg: Vec<u8> = buf.drain(..len).collect();
                    if tx.send(Frame::Message(msg)).is_err() {
                        return;
                    }
                }
            }
        });
        RawConn {
            writer: Arc::new(Mutex::new(stream.try_clone().expect("clone stream"))),
            stream,
            frames,
            reader: Some(reader),
            keepalives: None,
            paused,
            local,
            remote,
            received,
        }
    }

    /// Dials `to` from `from` (port chosen by the kernel).
    pub fn dial(from: IpAddr, to: SocketAddr) -> std::io::Result<RawConn> {
        RawConn::dial_with(from, to, &SockOpts::default(), STEP)
    }

    /// Dials with socket options, giving up after `timeout`.
    pub fn dial_with(
        from: IpAddr,
        to: SocketAddr,
        opts: &SockOpts,
        timeout: Duration,
    ) -> std::io::Result<RawConn> {
        let sock = socket2::Socket::new(
            socket2::Domain::for_address(to),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        opts.apply(&sock)?;
        sock.bind(&SocketAddr::new(from, 0).into())?;
        sock.connect_timeout(&to.into(), timeout)?;
        Ok(RawConn::new(sock.into()))
    }

    /// Writes octets as one write (a message, several, or a fragment).
    pub fn send(&self, bytes: &[u8]) {
        let mut w = self.writer.lock().expect("writer lock");
        w.write_all(bytes)
            .unwrap_or_else(|e| panic!("write to the speaker: {e}"));
    }

    /// Like [`RawConn::send`], but the speaker may already have closed.
    pub fn try_send(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut w = self.writer.lock().expect("writer lock");
        w.write_all(bytes)
    }

    /// Sends a KEEPALIVE every `every` from a thread of its own until dropped or
    /// [`RawConn::stop_keepalives`].
    pub fn start_keepalives(&mut self, every: Duration) {
        let stop = Arc::new(AtomicBool::new(false));
        let (w, s) = (self.writer.clone(), stop.clone());
        let t = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let deadline = Instant::now() + every;
                while Instant::now() < deadline {
                    if s.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let Ok(mut w) = w.lock() else { return };
                if w.write_all(&keepalive()).is_err() {
                    return;
                }
            }
        });
        self.keepalives = Some((stop, t));
    }

    pub fn stop_keepalives(&mut self) {
        if let Some((stop, t)) = self.keepalives.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
    }

    /// Stops reading from the socket (after the read under way, if any).
    pub fn pause_reading(&self) {
        self.paused.store(true, Ordering::Relaxed);
    }

    /// Octets the speaker has sent on this connection so far.
    pub fn received_octets(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// The next frame, or `None` after `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<Frame> {
        match self.frames.recv_timeout(timeout) {
            Ok(f) => Some(f),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Frame::Closed("reader ended".into())),
        }
    }

    /// The next message; panics on a close or a timeout.
    pub fn next_message(&self, what: &str) -> Vec<u8> {
        match self.recv(STEP) {
            Some(Frame::Message(m)) => m,
            Some(Frame::Closed(why)) => panic!("waiting for {what}: connection closed ({why})"),
            None => panic!("waiting for {what}: nothing within {STEP:?}"),
        }
    }

    /// The next message that is not a KEEPALIVE.
    pub fn next_non_keepalive(&self, what: &str) -> Vec<u8> {
        loop {
            let m = self.next_message(what);
            if m[18] != KEEPALIVE {
                return m;
            }
        }
    }

    /// The speaker's OPEN, decoded; panics if anything else comes first.
    pub fn expect_open(&self) -> Open {
        let m = self.next_message("the speaker's OPEN");
        assert_eq!(m[18], OPEN, "expected an OPEN, got {m:02x?}");
        match wire::decode_message(&m, &Context::default()) {
            Ok(Message::Open(o)) => o,
            other => panic!("the speaker's OPEN does not decode: {other:?}"),
        }
    }

    /// Reads the speaker's OPEN, answers with `our_open` and a KEEPALIVE, and waits for
    /// the speaker's KEEPALIVE: the session is Established on both sides.
    pub fn handshake(&self, our_open: &[u8]) -> Open {
        let theirs = self.expect_open();
        self.send(our_open);
        self.send(&keepalive());
        let m = self.next_message("the speaker's KEEPALIVE after our OPEN");
        assert_eq!(m, keepalive(), "expected KEEPALIVE, got {m:02x?}");
        theirs
    }

    /// Skips KEEPALIVEs until a NOTIFICATION, which is returned as bytes; anything else
    /// fails the test.
    pub fn expect_notification(&self) -> Vec<u8> {
        let m = self.next_non_keepalive("a NOTIFICATION");
        assert_eq!(
            m[18], NOTIFICATION,
            "expected a NOTIFICATION, got message type {}: {m:02x?}",
            m[18]
        );
        m
    }

    /// After a NOTIFICATION the speaker closes: nothing but the close may follow.
    pub fn expect_closed(&self) {
        match self.recv(STEP) {
            Some(Frame::Closed(_)) => {}
            Some(Frame::Message(m)) => panic!("expected the close, got {m:02x?}"),
            None => panic!("the speaker did not close within {STEP:?}"),
        }
    }

    /// Watches the connection for `period`: it must stay open, carry no NOTIFICATION,
    /// and carry at least one KEEPALIVE. Returns the KEEPALIVEs seen.
    pub fn expect_up_for(&self, period: Duration) -> usize {
        let deadline = Instant::now() + period;
        let mut keepalives = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.recv(left) {
                None => break,
                Some(Frame::Message(m)) if m[18] == KEEPALIVE => keepalives += 1,
                Some(Frame::Message(m)) if m[18] == NOTIFICATION => {
                    panic!("the speaker sent a NOTIFICATION: {m:02x?}")
                }
                Some(Frame::Message(m)) => panic!("unexpected message {m:02x?}"),
                Some(Frame::Closed(why)) => panic!("the speaker closed the session ({why})"),
            }
        }
        assert!(keepalives > 0, "no KEEPALIVE within {period:?}");
        keepalives
    }

    /// Reads UPDATEs until the End-of-RIB of every family in `families` (RFC 4724
    /// section 2), decoding them with the codec under `ctx`; returns the routes held.
    pub fn read_table(&self, ctx: &Context, families: &[AfiSafi]) -> Table {
        let mut table = Table::default();
        let mut pending: BTreeSet<AfiSafi> = families.iter().copied().collect();
        while !pending.is_empty() {
            let m = self.next_non_keepalive("UPDATEs up to End-of-RIB");
            let update = match wire::decode_message(&m, ctx) {
                Ok(Message::Update(u)) => u,
                other => panic!("expected an UPDATE, got {other:?} from {m:02x?}"),
            };
            assert!(
                update.errors.is_empty(),
                "the speaker sent a malformed UPDATE: {update:?}"
            );
            if let Some(f) = update.end_of_rib_family() {
                pending.remove(&f);
                continue;
            }
            table.apply(&update);
        }
        table
    }
}

impl Drop for RawConn {
    fn drop(&mut self) {
        self.stop_keepalives();
        self.paused.store(false, Ordering::Relaxed);
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// A route as the raw peer saw it announced.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Seen {
    pub origin: Option<u8>,
    pub as_path: Vec<u32>,
    pub next_hop: Option<IpAddr>,
    pub med: Option<u32>,
    pub local_pref: Option<u32>,
    pub communities: Vec<u32>,
}

/// The routes a peer holds from the speaker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub routes: BTreeMap<IpNet, Seen>,
}

impl Table {
    fn apply(&mut self, u: &wire::Update) {
        let (withdrawn, announced) = Table::changes(u);
        for p in withdrawn {
            self.routes.remove(&p);
        }
        self.routes.extend(announced);
    }

    /// What one UPDATE does to a peer's table: the prefixes it withdraws, then the
    /// routes it announces (RFC 4271 section 9: withdrawals first).
    pub fn changes(u: &wire::Update) -> (Vec<IpNet>, Vec<(IpNet, Seen)>) {
        let withdrawn = wire::withdrawn(u).map(|(_, n)| n.prefix).collect();
        let mut seen = Seen {
            origin: None,
            as_path: Vec::new(),
            next_hop: None,
            med: None,
            local_pref: None,
            communities: Vec::new(),
        };
        let mut mp_next_hop = None;
        for a in &u.attributes {
            match a {
                PathAttribute::Origin(o) => seen.origin = Some(*o as u8),
                PathAttribute::AsPath(p) => {
                    for s in &p.segments {
                        assert_eq!(s.kind, SegmentType::AsSequence, "{p:?}");
                        seen.as_path.extend(&s.asns);
                    }
                }
                PathAttribute::NextHop(a) => seen.next_hop = Some(IpAddr::V4(*a)),
                PathAttribute::MultiExitDisc(m) => seen.med = Some(*m),
                PathAttribute::LocalPref(l) => seen.local_pref = Some(*l),
                PathAttribute::Communities(c) => seen.communities = c.clone(),
                PathAttribute::MpReach(r) => {
                    mp_next_hop = Some(match &r.next_hop {
                        MpNextHop::V4(a) => IpAddr::V4(*a),
                        MpNextHop::V6 { global, .. } => IpAddr::V6(*global),
                        MpNextHop::Other(b) => panic!("unexpected next hop {b:02x?}"),
                    })
                }
                _ => {}
            }
        }
        let announced = wire::announced(u)
            .map(|(f, n)| {
                let mut s = seen.clone();
                if f != AfiSafi::IPV4_UNICAST || u.nlri.is_empty() {
                    s.next_hop = mp_next_hop;
                }
                (n.prefix, s)
            })
            .collect();
        (withdrawn, announced)
    }
}

/// A compact stand-in for a [`Seen`], for tables too large to keep whole.
pub fn fingerprint(s: &Seen) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// A connection handed to a thread of its own that applies every UPDATE to the peer's
/// table (a fingerprint per prefix) while the test does something else.
pub struct Follower {
    pub table: Arc<Mutex<std::collections::HashMap<IpNet, u64>>>,
    /// UPDATEs applied so far.
    pub updates: Arc<std::sync::atomic::AtomicU64>,
    /// Why the connection failed, if it did (a NOTIFICATION, a close, a bad UPDATE).
    pub failure: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<RawConn>>,
}

impl RawConn {
    /// Follows the speaker's UPDATEs under `ctx` from now on.
    pub fn follow(self, ctx: Context) -> Follower {
        let table = Arc::new(Mutex::new(std::collections::HashMap::new()));
        let updates = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let failure = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, u, fail, st) = (
            table.clone(),
            updates.clone(),
            failure.clone(),
            stop.clone(),
        );
        let thread = std::thread::spawn(move || {
            let conn = self;
            let record = |why: String| {
                let mut f = fail.lock().expect("failure lock");
                f.get_or_insert(why);
            };
            while !st.load(Ordering::Relaxed) {
                match conn.recv(Duration::from_millis(50)) {
                    None => {}
                    Some(Frame::Closed(why)) => {
                        record(format!("closed: {why}"));
                        break;
                    }
                    Some(Frame::Message(m)) if m[18] == KEEPALIVE => {}
                    Some(Frame::Message(m)) => match wire::decode_message(&m, &ctx) {
                        Ok(Message::Update(update)) if update.errors.is_empty() => {
                            if update.end_of_rib_family().is_none() {
                                let (withdrawn, announced) = Table::changes(&update);
                                let mut t = t.lock().expect("table lock");
                                for p in withdrawn {
                                    t.remove(&p);
                                }
                                for (p, seen) in announced {
                                    t.insert(p, fingerprint(&seen));
                                }
                            }
                            u.fetch_add(1, Ordering::Relaxed);
                        }
                        other => {
                            record(format!("unexpected {other:?}"));
                            break;
                        }
                    },
                }
            }
            conn
        });
        Follower {
            table,
            updates,
            failure,
            stop,
            thread: Some(thread),
        }
    }
}

impl Follower {
    pub fn failed(&self) -> Option<String> {
        self.failure.lock().expect("failure lock").clone()
    }

    pub fn snapshot(&self) -> std::collections::HashMap<IpNet, u64> {
        self.table.lock().expect("table lock").clone()
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A listening socket on the raw peer's address, accepting with a deadline.
pub struct RawListener {
    inner: TcpListener,
}

impl RawListener {
    pub fn bind(addr: SocketAddr) -> RawListener {
        RawListener::bind_with(addr, &SockOpts::default())
    }

    /// Binds with socket options (an MD5 key for the speaker's address, a TTL).
    pub fn bind_with(addr: SocketAddr, opts: &SockOpts) -> RawListener {
        let sock = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .expect("socket");
        sock.set_reuse_address(true).expect("SO_REUSEADDR");
        opts.apply(&sock).expect("listener options");
        sock.bind(&addr.into())
            .unwrap_or_else(|e| panic!("bind {addr}: {e}"));
        sock.listen(16).expect("listen");
        let inner: TcpListener = sock.into();
        inner.set_nonblocking(true).expect("nonblocking listener");
        RawListener { inner }
    }

    /// The next connection within `timeout`, or `None`.
    pub fn accept_within(&self, timeout: Duration) -> Option<RawConn> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.inner.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).expect("blocking stream");
                    return Some(RawConn::new(s));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("accept: {e}"),
            }
        }
    }

    /// The next connection; panics after [`STEP`].
    pub fn accept(&self) -> RawConn {
        self.accept_within(STEP)
            .unwrap_or_else(|| panic!("the speaker did not connect within {STEP:?}"))
    }
}

/// Socket options of the raw peer's side.
#[derive(Debug, Clone, Default)]
pub struct SockOpts {
    /// A TCP MD5 key (RFC 2385) for the given peer address.
    pub md5: Option<(IpAddr, String)>,
    /// The TTL to send with (IPv4).
    pub ttl: Option<u32>,
    /// SO_RCVBUF, set before listen so that accepted sockets inherit it.
    pub rcvbuf: Option<usize>,
}

impl SockOpts {
    fn apply(&self, sock: &socket2::Socket) -> std::io::Result<()> {
        if let Some(ttl) = self.ttl {
            sock.set_ttl_v4(ttl)?;
        }
        if let Some(size) = self.rcvbuf {
            sock.set_recv_buffer_size(size)?;
        }
        if let Some((addr, key)) = &self.md5 {
            set_md5(sock, *addr, key.as_bytes())?;
        }
        Ok(())
    }
}

/// Linux `struct tcp_md5sig` (include/uapi/linux/tcp.h), written out here rather than
/// borrowed from the crate: the raw peer must not share the code it checks.
#[repr(C)]
struct TcpMd5Sig {
    addr: libc::sockaddr_storage,
    flags: u8,
    prefixlen: u8,
    keylen: u16,
    ifindex: libc::c_int,
    key: [u8; libc::TCP_MD5SIG_MAXKEYLEN],
}

/// Sets the TCP MD5 key for an IPv4 `peer` on an IPv4 socket.
fn set_md5(sock: &socket2::Socket, peer: IpAddr, key: &[u8]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let IpAddr::V4(peer) = peer else {
        return Err(std::io::Error::other(
            "the raw peer sets MD5 keys for IPv4 only",
        ));
    };
    assert!(key.len() <= libc::TCP_MD5SIG_MAXKEYLEN, "test key too long");
    // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value.
    let mut sig: TcpMd5Sig = unsafe { std::mem::zeroed() };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(peer.octets()),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_storage is larger than and aligned at least as strictly as
    // sockaddr_in, and `sig.addr` is exclusively borrowed.
    unsafe {
        std::ptr::write(
            (&mut sig.addr as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>(),
            sin,
        )
    };
    sig.keylen = key.len() as u16;
    sig.key[..key.len()].copy_from_slice(key);
    // SAFETY: the pointer and length describe `sig`, a live, properly laid out
    // tcp_md5sig; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MD5SIG,
            (&sig as *const TcpMd5Sig).cast(),
            std::mem::size_of::<TcpMd5Sig>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The resident set size after handing freed heap back to the kernel (glibc's
/// `malloc_trim`): what is live, not what the allocator keeps cached in its arenas.
pub fn live_rss_kb() -> u64 {
    // SAFETY: malloc_trim only walks the allocator's own free lists; any argument is
    // valid and nothing the caller holds is touched.
    unsafe {
        libc::malloc_trim(0);
    }
    rss_kb()
}

/// The resident set size of this process, from /proc/self/status (kB).
pub fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_write_rfc4271_layouts() {
        assert_eq!(
            keepalive(),
            [&[0xff; 16][..], &[0x00, 0x13, 0x04]].concat(),
            "KEEPALIVE: 19 octets, type 4"
        );
        let o = open(
            4,
            65002,
            90,
            Ipv4Addr::new(192, 0, 2, 1),
            &cap_params(&[&CAP_MP_IPV4]),
        );
        assert_eq!(
            &o[16..],
            &[
                0x00, 0x25, 0x01, 0x04, 0xfd, 0xea, 0x00, 0x5a, 0xc0, 0x00, 0x02, 0x01, 0x08, 0x02,
                0x06, 0x01, 0x04, 0x00, 0x01, 0x00, 0x01
            ]
        );
        assert_eq!(prefix4("10.244.1.0/24"), [0x18, 0x0a, 0xf4, 0x01]);
        assert_eq!(prefix4("10.0.0.0/7"), [0x07, 0x0a]);
        assert_eq!(attr(0x50, 0x0e, &[0xaa]), [0x50, 0x0e, 0x00, 0x01, 0xaa]);
        let u = update(&[], &origin(0), &prefix4("10.0.0.0/8"));
        assert_eq!(
            &u[16..],
            &[0x00, 0x1d, 0x02, 0x00, 0x00, 0x00, 0x04, 0x40, 0x01, 0x01, 0x00, 0x08, 0x0a]
        );
    }
}
