//! Item 4, receiving a table: `receive RECEIVER N RUNS`. The raw peer of the reliability
//! tests (`raw_peer.rs`, which writes BGP by hand, never with the codec under test)
//! listens on 100.64.0.9 as AS 65009; the receiver (the speaker, BIRD, FRR bgpd or
//! gobgpd) dials it. Once Established the injector writes N /24s packed 1,000 to an
//! UPDATE (one attribute set) as fast as TCP takes them, and the time from the first
//! octet to the receiver counting all N is measured, with the receiver's peak RSS.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;
use crate::harness::bird::Bird;
use crate::harness::frr::Frr;
use crate::harness::gobgp::Gobgp;
use crate::harness::{BgpDaemon, Neighbor, PeerOpts};
use crate::raw_peer::{self, RawListener};

const INJECTOR_AS: u32 = 65009;

/// The whole table as UPDATEs, 1,000 prefixes each.
fn updates(n: usize) -> Vec<u8> {
    let nh = match INJECTOR {
        std::net::IpAddr::V4(a) => a,
        std::net::IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
    };
    let attrs = [
        raw_peer::origin(0),
        raw_peer::as_path4(&[INJECTOR_AS]),
        raw_peer::next_hop(nh),
    ]
    .concat();
    let mut out = Vec::with_capacity(n * 4 + n / 1000 * 60);
    let mut nlri = Vec::with_capacity(4000);
    for j in 0..n {
        nlri.push(24);
        nlri.extend_from_slice(&prefix(j).octets()[..3]);
        if (j + 1) % 1000 == 0 || j + 1 == n {
            out.extend_from_slice(&raw_peer::update(&[], &attrs, &nlri));
            nlri.clear();
        }
    }
    out
}

enum Receiver {
    Speaker(crate::harness::process::Process),
    Bird(Bird),
    Frr(Frr),
    Gobgp(Gobgp),
}

impl Receiver {
    fn start(kind: &str, dir: &std::path::Path) -> Receiver {
        let nb = || Neighbor::new(INJECTOR, INJECTOR_AS).hold_time(90);
        match kind {
            "speaker" => {
                let state = Cluster::new(1, 1).write(dir);
                // The speaker tracks at most 2^18 received prefixes per family (a memory
                // bound; the count saturates there) unless max-prefix is set higher, as
                // an operator expecting a full table would.
                Receiver::Speaker(start_speaker_with(
                    dir,
                    &state,
                    AS,
                    &[(INJECTOR, INJECTOR_AS)],
                    "warn",
                    "    max-prefix:\n      limit: 2000000\n      action: warn\n",
                ))
            }
            "bird" => Receiver::Bird(
                Bird::start(dir, PeerOpts::new(BIRD_RX, AS).neighbor(nb())).expect("BIRD"),
            ),
            "frr" => {
                Receiver::Frr(Frr::start(dir, PeerOpts::new(FRR, AS).neighbor(nb())).expect("FRR"))
            }
            "gobgpd" => Receiver::Gobgp(
                Gobgp::start(dir, PeerOpts::new(GOBGP, AS).neighbor(nb())).expect("gobgpd"),
            ),
            other => panic!("unknown receiver {other}"),
        }
    }

    fn count(&self) -> u64 {
        match self {
            Receiver::Speaker(_) => metric_sum("podcidr_speaker_received_prefixes") as u64,
            Receiver::Bird(b) => bird_session(b, INJECTOR).1,
            Receiver::Frr(f) => f
                .vtysh(&["show bgp ipv4 unicast summary json"])
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v["peers"][INJECTOR.to_string()]["pfxRcd"].as_u64())
                .unwrap_or(0),
            Receiver::Gobgp(g) => gobgp_rib_count(g),
        }
    }

    fn pid(&self) -> Option<u32> {
        match self {
            Receiver::Speaker(p) => Some(p.pid()),
            Receiver::Bird(b) => child_pid("bird", &b.dir().display().to_string()),
            Receiver::Frr(f) => child_pid("bgpd", &f.dir().display().to_string()),
            Receiver::Gobgp(g) => child_pid("gobgpd", &g.dir().display().to_string()),
        }
    }

    fn stop(self) {
        match self {
            Receiver::Speaker(mut p) => {
                let _ = p.stop();
            }
            Receiver::Bird(mut b) => {
                let _ = b.stop();
            }
            Receiver::Frr(mut f) => {
                let _ = f.stop();
            }
            Receiver::Gobgp(mut g) => {
                let _ = g.stop();
            }
        }
    }
}

pub fn run(kind: &str, n: usize, runs: usize) {
    let bound = Duration::from_secs(if kind == "gobgpd" { 150 } else { 60 });
    let table = updates(n);
    let open = raw_peer::open(
        4,
        23456,
        90,
        Ipv4Addr::new(100, 64, 0, 9),
        &raw_peer::cap_params(&[&raw_peer::CAP_MP_IPV4, &raw_peer::cap_as4(INJECTOR_AS)]),
    );
    let (mut times, mut rss, mut timed_out) = (Vec::new(), Vec::new(), 0);
    for run in 0..runs {
        let dir = crate::send::setup_once();
        let listener = RawListener::bind(SocketAddr::new(INJECTOR, 179));
        let rx = Receiver::start(kind, dir.path());
        let mut conn = listener
            .accept_within(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("{kind} never connected to the injector"));
        conn.handshake(&open);
        conn.start_keepalives(Duration::from_secs(20));
        let pid = rx.pid();
        let base = pid.map(proc_stat).unwrap_or_default();
        let t0 = Instant::now();
        for chunk in table.chunks(64 * 1024) {
            conn.send(chunk);
        }
        let sent = t0.elapsed();
        let every = Duration::from_millis(10);
        let done = poll(bound, every, || rx.count() >= n as u64);
        let secs = t0.elapsed().as_secs_f64();
        let st = pid.map(proc_stat).unwrap_or_default();
        if done {
            eprintln!(
                "receive {kind} n={n} run {run}: {secs:.3} s (written in {:.3} s), peak RSS {} kB (before {} kB)",
                sent.as_secs_f64(),
                st.hwm_kb,
                base.rss_kb
            );
            times.push(secs);
        } else {
            eprintln!(
                "receive {kind} n={n} run {run}: > {} s ({} counted)",
                bound.as_secs(),
                rx.count()
            );
            timed_out += 1;
        }
        rss.push(st.hwm_kb as f64);
        drop(conn);
        rx.stop();
    }
    emit(json!({
        "item": "receive",
        "receiver": kind,
        "n": n,
        "runs": times,
        "median_s": (!times.is_empty()).then(|| median(&times)),
        "timed_out": timed_out,
        "bound_s": bound.as_secs(),
        "peak_rss_kb": median(&rss),
    }));
}
