//! Abuse: what a hostile or broken neighbour can do to a speaker that sits on every node.
//!
//! - A connection from an address that is not a configured peer is closed before a
//!   single octet is sent (no OPEN reveals our AS or identifier), however many come.
//! - A wrong TCP MD5 key (RFC 2385), or none, never gets a session, in either direction.
//! - GTSM (RFC 5082) on the accepting side: a peer sending with TTL 64 gets no session.
//! - A peer announcing millions of prefixes: counted, not stored (memory stays bounded,
//!   the count saturates at the ceiling), and with max-prefix the session closes with
//!   Cease 6/1 and the RFC 4486 data.
//! - Passwords never appear in logs (at trace level), in status values, or in what
//!   `check` and `plan` print.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use podcidr_speaker::bgp::session::{State, RECEIVED_CEILING};
use podcidr_speaker::bgp::wire::AfiSafi;

use crate::fixture::{addrs, raw_open, Fixture, Passive, RAW_AS, RAW_ID};
use crate::harness::v4;
use crate::isolated;
use crate::raw_peer::{
    as_path4, next_hop, notification, origin, prefix4, rss_kb, update, Frame, SockOpts,
};

const V4: AfiSafi = AfiSafi::IPV4_UNICAST;

#[test]
fn connections_from_unconfigured_addresses_are_closed_before_any_open() {
    let Some(_ns) = isolated!(&addrs()) else {
        return;
    };
    let p = Passive::start(&[]);
    let mut slowest = Duration::ZERO;
    let attempts = 60;
    for i in 0..attempts {
        let from = 3 + (i % 7) as u8;
        let t0 = Instant::now();
        let conn = p
            .dial(from, &SockOpts::default(), Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("the kernel completes the TCP handshake: {e}"));
        match conn.recv(Duration::from_secs(5)) {
            Some(Frame::Closed(_)) => {}
            Some(Frame::Message(m)) => panic!("100.64.0.{from} was sent {m:02x?}"),
            None => panic!("a connection from 100.64.0.{from} was left open"),
        }
        slowest = slowest.max(t0.elapsed());
        assert_eq!(conn.received_octets(), 0, "100.64.0.{from} got octets");
    }
    let s = p.speaker.status();
    assert_eq!(
        s.state,
        State::Active,
        "the configured session was not disturbed"
    );
    assert_eq!(
        (s.stats.sent.open, s.stats.received.total()),
        (0, 0),
        "no BGP message was exchanged"
    );
    // The configured peer still gets its session, at once.
    let conn = p.established(&SockOpts::default());
    assert_eq!(p.speaker.status().stats.established_count, 1);
    drop(conn);
    println!(
        "{attempts} connections from unconfigured addresses: all closed with 0 octets sent, \
         slowest close {slowest:?}"
    );
}

const KEY: &str = "Zq7-md5-s3cret-Vx";

#[test]
fn a_wrong_md5_key_never_reaches_established() {
    let Some(_ns) = isolated!(&addrs()) else {
        return;
    };
    let password = format!("password: {KEY}");
    let md5 = |key: &str| SockOpts {
        md5: Some((v4(1), key.to_owned())),
        ttl: None,
        rcvbuf: None,
    };
    // The speaker dials: a raw peer with a wrong key, or with none, never sees the
    // connection (the kernel drops the unsigned or wrongly signed segments).
    for (what, opts) in [
        ("a wrong key", md5("not-the-key")),
        ("no key", SockOpts::default()),
    ] {
        let f = Fixture::start_with(&[&password], &opts);
        assert!(
            f.listener.accept_within(Duration::from_secs(4)).is_none(),
            "a connection with {what} was accepted"
        );
        let s = f.status();
        assert_eq!(
            (s.stats.established_count, s.stats.sent.open),
            (0, 0),
            "{what}"
        );
        assert_ne!(s.state, State::Established);
    }
    // The right key: a session.
    let f = Fixture::start_with(&[&password], &md5(KEY));
    drop(f.established());

    // The speaker listens: the kernel drops our SYNs unless they carry the right key.
    let p = Passive::start(&[&password]);
    for (what, opts) in [
        ("a wrong key", md5("not-the-key")),
        ("no key", SockOpts::default()),
    ] {
        let r = p.dial(2, &opts, Duration::from_secs(3));
        assert!(r.is_err(), "dialing with {what} connected");
        let s = p.speaker.status();
        assert_eq!(
            (s.stats.established_count, s.stats.sent.open),
            (0, 0),
            "{what}"
        );
    }
    drop(p.established(&md5(KEY)));
    println!("md5: wrong key and no key refused both ways; the right key establishes");
}

#[test]
fn gtsm_on_the_accepting_side_ignores_a_peer_sending_below_ttl_255() {
    let Some(_ns) = isolated!(&addrs()) else {
        return;
    };
    let p = Passive::start(&["ttl-security: true"]);
    let conn = p
        .dial(
            2,
            &SockOpts {
                ttl: Some(64),
                ..SockOpts::default()
            },
            Duration::from_secs(5),
        )
        .expect("the handshake itself completes");
    // The speaker speaks first (its OPEN leaves with TTL 255)...
    let _ = conn.expect_open();
    conn.send(&raw_open());
    conn.send(&crate::raw_peer::keepalive());
    // ...but our OPEN, at TTL 64, never reaches it: no KEEPALIVE comes back.
    match conn.recv(Duration::from_secs(3)) {
        None => {}
        Some(f) => panic!("the speaker answered a TTL-64 peer: {f:?}"),
    }
    let s = p.speaker.status();
    assert_eq!(s.state, State::OpenSent, "{s:?}");
    assert_eq!(s.stats.received.total(), 0);
    drop(conn);
    drop(p);
    // A fresh speaker, and a peer sending with 255: a session.
    let p = Passive::start(&["ttl-security: true"]);
    drop(p.established(&SockOpts {
        ttl: Some(255),
        ..SockOpts::default()
    }));
    println!("gtsm: a peer at TTL 64 never got past OpenSent; TTL 255 established");
}

/// Packed UPDATEs of IPv4 /32s from 10.0.0.0 up, at most 4096 octets each.
fn flood_updates(n: u32) -> (Vec<Vec<u8>>, usize) {
    let attrs = [
        origin(0x00),
        as_path4(&[u32::from(RAW_AS)]),
        next_hop(RAW_ID),
    ]
    .concat();
    let per = (4096 - 23 - attrs.len()) / 5;
    let mut chunks = Vec::new();
    let mut chunk = Vec::with_capacity(1 << 20);
    let mut updates = 0;
    let mut i = 0u32;
    while i < n {
        let take = (n - i).min(per as u32);
        let mut nlri = Vec::with_capacity(take as usize * 5);
        for k in i..i + take {
            nlri.push(32);
            nlri.extend_from_slice(&(0x0a00_0000u32 + k).to_be_bytes());
        }
        chunk.extend_from_slice(&update(&[], &attrs, &nlri));
        updates += 1;
        i += take;
        if chunk.len() >= 1 << 20 {
            chunks.push(std::mem::take(&mut chunk));
        }
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    (chunks, updates)
}

/// How many prefixes the flood sends: `PODCIDR_FLOOD_PREFIXES`, default two million.
fn flood_size() -> u32 {
    std::env::var("PODCIDR_FLOOD_PREFIXES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000)
}

#[test]
fn millions_of_prefixes_are_counted_not_stored() {
    let Some(_ns) = isolated!(&addrs(), Duration::from_secs(150)) else {
        return;
    };
    let n = flood_size();
    assert!(
        n as usize > 4 * RECEIVED_CEILING,
        "the flood must exceed the ceiling"
    );
    let f = Fixture::start(&[]);
    let conn = f.established();
    let (chunks, updates) = flood_updates(n);
    let octets: usize = chunks.iter().map(Vec::len).sum();
    let before_updates = f.status().stats.received.update;
    let rss_before = rss_kb();
    let t0 = Instant::now();
    for c in &chunks {
        conn.send(c);
    }
    let s = f
        .speaker
        .wait("the whole flood read", Duration::from_secs(120), |s| {
            s.stats.received.update >= before_updates + updates as u64
        });
    let took = t0.elapsed();
    let rss_after = rss_kb();
    drop(chunks);
    let count = s.stats.received_prefixes[&V4];
    assert_eq!(
        s.state,
        State::Established,
        "no limit configured: the session stays"
    );
    assert_eq!(
        (count.count, count.saturated),
        (RECEIVED_CEILING as u64, true),
        "counted up to the ceiling, then flagged"
    );
    let grown = rss_after.saturating_sub(rss_before);
    // A stored prefix costs a hash-set bucket of about 29 octets (a 28-octet Nlri and a
    // control octet) and the set doubles as it grows: two million would take over
    // 100 MiB, the ceiling's 262,144 about 15 MiB. The bound sits between the two.
    let bound_kb = 24 * 1024;
    println!(
        "flood: {n} prefixes in {updates} UPDATEs ({} MiB) read in {took:?} \
         ({:.0} prefixes/s); counted {} (saturated); RSS {rss_before} kB -> {rss_after} kB \
         (+{grown} kB, bound {bound_kb} kB)",
        octets >> 20,
        f64::from(n) / took.as_secs_f64(),
        count.count
    );
    assert!(
        grown < bound_kb,
        "RSS grew by {grown} kB while {n} prefixes arrived"
    );
    conn.expect_up_for(Duration::from_millis(1500));
}

#[test]
fn max_prefix_closes_with_cease_and_rfc4486_data() {
    let Some(_ns) = isolated!(&addrs()) else {
        return;
    };
    let f = Fixture::start(&["max-prefix: {limit: 1000, action: cease}"]);
    let conn = f.established();
    let (chunks, _) = flood_updates(1000);
    for c in &chunks {
        conn.send(c);
    }
    // Exactly at the limit: the session stays.
    f.wait_received(V4, 1000);
    assert_eq!(f.status().state, State::Established);
    let one_more = update(
        &[],
        &[
            origin(0x00),
            as_path4(&[u32::from(RAW_AS)]),
            next_hop(RAW_ID),
        ]
        .concat(),
        &prefix4("192.0.2.0/24"),
    );
    conn.send(&one_more);
    // Cease / Maximum Number of Prefixes Reached; data AFI 1, SAFI 1, limit 1000.
    let want = notification(0x06, 0x01, &[0x00, 0x01, 0x01, 0x00, 0x00, 0x03, 0xe8]);
    let got = conn.expect_notification();
    assert_eq!(got, want, "got {got:02x?}");
    conn.expect_closed();
    drop(conn);
    f.wait_sent(6, 1);
    // The speaker comes back (the limit is per session) and announces its routes.
    let again = f.established();
    assert_eq!(f.status().stats.established_count, 2);
    drop(again);
    println!("max-prefix 1000: 1000 kept the session, the 1001st closed it with {want:02x?}");
}

/// Collects everything the tracing subscriber writes.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;

    fn make_writer(&'a self) -> Capture {
        self.clone()
    }
}

fn assert_no_key(what: &str, text: &str) {
    assert!(!text.contains(KEY), "{what} shows the password:\n{text}");
}

#[test]
fn passwords_never_appear_in_logs_status_or_output() {
    let Some(ns) = isolated!(&addrs()) else {
        return;
    };
    // Every log line of the crate, down to trace, goes to the capture (installed before
    // the fixtures' own subscriber, which then stays out).
    let logs = Capture::default();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("podcidr_speaker=trace"))
        .with_writer(logs.clone())
        .with_ansi(false)
        .init();
    tracing::info!(target: "podcidr_speaker", "capture works");

    let password = format!("password: {KEY}");
    let md5 = |key: &str| SockOpts {
        md5: Some((v4(1), key.to_owned())),
        ttl: None,
        rcvbuf: None,
    };
    // A session with the key, and one that fails for a wrong key.
    let f = Fixture::start_with(&[&password], &md5(KEY));
    let conn = f.established();
    let status = format!("{:?} {:#?}", f.status(), f.status());
    drop(conn);
    drop(f);
    let f = Fixture::start_with(&[&password], &md5("not-the-key"));
    assert!(f.listener.accept_within(Duration::from_secs(3)).is_none());
    let status_failed = format!("{:#?}", f.status());
    drop(f);

    // The values that travel: config, spec, errors.
    let peer = crate::fixture::peer(&[&password]);
    let spec = crate::speaker::spec(1, &peer);
    let values = format!("{peer:?} {peer:#?} {spec:?} {spec:#?}");
    let config_text = format!(
        "peers:\n  - peer-address: 192.0.2.1\n    peer-asn: 65000\n    my-asn: 65001\n    \
         {password}\n    hold-time: 2s\n"
    );
    let errors = match podcidr_speaker::config::parse(&config_text) {
        Err(e) => format!("{e} {e:?}"),
        Ok(c) => panic!("hold-time 2s must be refused: {c:?}"),
    };
    let too_long = format!("{KEY}{}", "x".repeat(80));
    let long_text = config_text
        .replace(KEY, &too_long)
        .replace("hold-time: 2s", "hold-time: 9s");
    let long_errors = match podcidr_speaker::config::parse(&long_text) {
        Err(e) => format!("{e} {e:?}"),
        Ok(c) => panic!("an 97-octet password must be refused: {c:?}"),
    };
    assert!(long_errors.contains("password"), "{long_errors}");
    // The config state logs what it applies and what it refuses, as the daemon has it do.
    let mut state = podcidr_speaker::config::state::ConfigState::new();
    state
        .update_text(&config_text.replace("hold-time: 2s", "hold-time: 9s"))
        .log();
    state.update_text(&config_text).log();
    state.update_text(&long_text).log();

    // What the binary prints: check (valid and invalid) and plan.
    let dir = ns.dir();
    let good = dir.join("good.yaml");
    let bad = dir.join("bad.yaml");
    std::fs::write(&good, config_text.replace("hold-time: 2s", "hold-time: 9s")).unwrap();
    std::fs::write(&bad, &config_text).unwrap();
    let bin = env!("CARGO_BIN_EXE_podcidr-speaker");
    let run = |args: &[&str]| {
        let out = Command::new(bin)
            .args(args)
            .output()
            .expect("run the binary");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let check = run(&["check", good.to_str().unwrap(), bad.to_str().unwrap()]);
    assert!(check.contains("hold-time"), "{check}");
    let state = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/cluster-state/single-node.yaml");
    let plan = run(&[
        "plan",
        "--bgp-config",
        good.to_str().unwrap(),
        "--cluster-state",
        state.to_str().unwrap(),
        "--node",
        "node-a",
    ]);
    assert!(plan.contains("192.0.2.1"), "{plan}");

    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("capture works"), "the capture is wired");
    assert!(
        logs.contains("state changed"),
        "the sessions logged: {logs}"
    );
    for (what, text) in [
        ("the logs", &logs),
        ("the status", &status),
        ("the failed session's status", &status_failed),
        ("config and spec values", &values),
        ("config errors", &errors),
        ("errors about the password itself", &long_errors),
        ("podcidr-speaker check", &check),
        ("podcidr-speaker plan", &plan),
    ] {
        assert_no_key(what, text);
    }
    println!(
        "password absent from {} octets of trace logs, status, values, errors, check and plan",
        logs.len()
    );
}
