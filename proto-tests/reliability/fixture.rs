//! One speaker session against the raw peer: the speaker on 100.64.0.1 (AS 65001) dials
//! the raw peer on 100.64.0.2 (AS 65002), which accepts, answers with a hand-built OPEN
//! and checks that the speaker's routes arrive exactly as configured. Every case starts
//! from a fresh fixture so that the retry backoff of one case cannot slow the next.

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use podcidr_speaker::bgp::session::{SessionError, State};
use podcidr_speaker::bgp::wire::{AfiSafi, Context, Open};
use podcidr_speaker::peer::{Listener, NoopObserver, PeerStatus};
use podcidr_speaker::routes::DesiredRoutes;
use tokio::runtime::Runtime;

use crate::harness::{v4, v6};
use crate::raw_peer::{self, RawConn, RawListener, Seen, SockOpts, Table};
use crate::speaker::{desired, listener, net, peer_config, runtime, spec, Attrs, Speaker};

pub const SPEAKER_AS: u32 = 65001;
pub const RAW_AS: u16 = 65002;
pub const RAW_ID: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 2);
/// The hold time the speaker is configured with and the raw peer offers: the shortest
/// RFC 4271 allows, so that a KEEPALIVE comes every second.
pub const HOLD: u16 = 3;

/// Every address a test may put on lo.
pub fn addrs() -> Vec<IpAddr> {
    let mut a: Vec<IpAddr> = (1..=9).map(v4).collect();
    a.extend((1..=2).map(v6));
    a
}

/// The prefixes the speaker announces.
pub fn prefixes() -> Vec<ipnet::IpNet> {
    vec![
        net("10.244.1.0/24"),
        net("10.244.2.0/24"),
        net("fd10:1::/64"),
    ]
}

/// What the raw peer must hold after the speaker's initial table, written out by hand:
/// ORIGIN INCOMPLETE, AS_PATH 65001, our session address as next hop (fd00::1 for the
/// IPv6 route over the IPv4 session), community 65535:100.
pub fn expected_table() -> Table {
    let seen = |next_hop: &str| Seen {
        origin: Some(2),
        as_path: vec![SPEAKER_AS],
        next_hop: Some(next_hop.parse().unwrap()),
        med: None,
        local_pref: None,
        communities: vec![0xffff_0064],
    };
    Table {
        routes: [
            (net("10.244.1.0/24"), seen("100.64.0.1")),
            (net("10.244.2.0/24"), seen("100.64.0.1")),
            (net("fd10:1::/64"), seen("fd00::1")),
        ]
        .into_iter()
        .collect(),
    }
}

/// The raw peer's OPEN: version 4, AS 65002, hold time [`HOLD`], both unicast families,
/// route refresh, 4-octet AS. No extended messages: the speaker's limit is 4096 octets.
pub fn raw_open() -> Vec<u8> {
    raw_peer::open(
        4,
        RAW_AS,
        HOLD,
        RAW_ID,
        &raw_peer::cap_params(&[
            &raw_peer::CAP_MP_IPV4,
            &raw_peer::CAP_MP_IPV6,
            &raw_peer::CAP_ROUTE_REFRESH,
            &raw_peer::cap_as4(u32::from(RAW_AS)),
        ]),
    )
}

/// The decode context the raw OPEN negotiates.
pub fn ctx() -> Context {
    Context {
        four_octet_as: true,
        ..Context::default()
    }
}

pub const FAMILIES: [AfiSafi; 2] = [AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST];

/// The speaker's peer entry for the raw peer: hold time [`HOLD`] plus `extra` keys.
pub fn peer(extra: &[&str]) -> podcidr_speaker::config::Peer {
    let hold = format!("hold-time: {HOLD}s");
    let mut keys = vec![hold.as_str()];
    keys.extend_from_slice(extra);
    peer_config(v4(2), u32::from(RAW_AS), SPEAKER_AS, &keys)
}

pub struct Fixture {
    pub rt: Arc<Runtime>,
    pub speaker: Speaker,
    pub listener: RawListener,
}

/// A passive speaker: it listens on 100.64.0.1:179 (the peer driver's listener) for the
/// raw peer on 100.64.0.2 and never dials.
pub struct Passive {
    pub rt: Arc<Runtime>,
    // Dropped before the listener it takes connections from.
    pub speaker: Speaker,
    pub listener: Listener,
}

impl Passive {
    pub fn start(extra: &[&str]) -> Passive {
        let rt = runtime();
        let listener = listener(&rt, v4(1));
        let mut keys = vec!["passive: true"];
        keys.extend_from_slice(extra);
        let spec = spec(1, &peer(&keys));
        let inbound = {
            let _guard = rt.enter();
            listener
                .register(&spec)
                .unwrap_or_else(|e| panic!("register: {e}"))
        };
        let speaker = Speaker::start_with(
            &rt,
            spec,
            desired(&prefixes(), &Attrs::new(SPEAKER_AS, false)),
            Arc::new(NoopObserver),
            Some(inbound),
        );
        Passive {
            rt,
            speaker,
            listener,
        }
    }

    /// Dials the speaker from 100.64.0.`from`.
    pub fn dial(&self, from: u8, opts: &SockOpts, timeout: Duration) -> std::io::Result<RawConn> {
        RawConn::dial_with(v4(from), SocketAddr::new(v4(1), 179), opts, timeout)
    }

    /// Dials from the raw peer's address and establishes the session.
    pub fn established(&self, opts: &SockOpts) -> RawConn {
        let conn = self
            .dial(2, opts, raw_peer::STEP)
            .unwrap_or_else(|e| panic!("dial the speaker: {e}"));
        let mut conn = conn;
        let open = conn.handshake(&raw_open());
        assert_eq!(open.asn(), SPEAKER_AS);
        let table = conn.read_table(&ctx(), &FAMILIES);
        assert_eq!(table, expected_table(), "the speaker's routes");
        conn.start_keepalives(Duration::from_secs(1));
        self.speaker
            .wait("Established", Duration::from_secs(10), |s| {
                s.state == State::Established
            });
        conn
    }
}

impl Fixture {
    /// A speaker dialing the raw peer; `extra` adds bgp-config keys to its peer entry.
    pub fn start(extra: &[&str]) -> Fixture {
        Fixture::start_with(extra, &SockOpts::default())
    }

    /// As [`Fixture::start`], with options on the raw peer's listening socket.
    pub fn start_with(extra: &[&str], raw: &SockOpts) -> Fixture {
        Fixture::start_routes(
            extra,
            raw,
            desired(&prefixes(), &Attrs::new(SPEAKER_AS, false)),
        )
    }

    /// As [`Fixture::start_with`], announcing `routes` instead of [`prefixes`].
    pub fn start_routes(extra: &[&str], raw: &SockOpts, routes: Arc<DesiredRoutes>) -> Fixture {
        let listener = RawListener::bind_with(SocketAddr::new(v4(2), 179), raw);
        let rt = runtime();
        let speaker = Speaker::start(&rt, spec(1, &peer(extra)), routes);
        Fixture {
            rt,
            speaker,
            listener,
        }
    }

    /// Completes the handshake on an accepted or dialled connection and checks that the
    /// whole table arrives exactly as configured; KEEPALIVEs then flow from the raw peer
    /// every second.
    fn establish(&self, mut conn: RawConn) -> RawConn {
        let open = conn.handshake(&raw_open());
        assert_eq!(open.asn(), SPEAKER_AS);
        assert_eq!(open.hold_time, HOLD);
        let table = conn.read_table(&ctx(), &FAMILIES);
        assert_eq!(table, expected_table(), "the speaker's routes");
        conn.start_keepalives(Duration::from_secs(1));
        self.speaker
            .wait("Established", Duration::from_secs(10), |s| {
                s.state == State::Established
            });
        conn
    }

    /// Accepts the speaker's next connection and reads its OPEN.
    pub fn accept(&self) -> (RawConn, Open) {
        let conn = self.listener.accept();
        assert_eq!(
            conn.remote.ip(),
            v4(1),
            "the speaker dials from its address"
        );
        let open = conn.expect_open();
        (conn, open)
    }

    /// Accepts the speaker's next connection and establishes the session on it.
    pub fn established(&self) -> RawConn {
        self.establish(self.listener.accept())
    }

    pub fn status(&self) -> PeerStatus {
        self.speaker.status()
    }

    /// Waits until the speaker's last error is the NOTIFICATION (code, subcode) it sent.
    pub fn wait_sent(&self, code: u8, subcode: u8) -> PeerStatus {
        self.speaker
            .wait(&format!("NOTIFICATION {code}/{subcode} sent"), Duration::from_secs(10), |s| {
                matches!(&s.stats.last_error,
                    Some(SessionError::NotificationSent(n)) if (n.code, n.subcode) == (code, subcode))
            })
    }

    /// Prefixes the speaker counts from the raw peer in `f`.
    pub fn received(&self, f: AfiSafi) -> u64 {
        self.status()
            .stats
            .received_prefixes
            .get(&f)
            .map_or(0, |c| c.count)
    }

    /// Waits until the speaker counts `n` prefixes in `f`.
    pub fn wait_received(&self, f: AfiSafi, n: u64) -> PeerStatus {
        self.speaker.wait(
            &format!("{n} prefixes received"),
            Duration::from_secs(10),
            |s| s.stats.received_prefixes.get(&f).map_or(0, |c| c.count) == n,
        )
    }
}
