//! Restarts of the built `run` binary (SIGTERM, then a new process, as a DaemonSet
//! rollout does) against BIRD, FRR and GoBGP at once, each with the short timers of the
//! interop harness (connect retry 1-2 s, hold 9 s; GoBGP turns every connection away
//! for about 5 s after a session ends). The speaker's peers are written as in
//! config/cilium-bgp-config.yaml: no `connect-retry-time`, no `hold-time`, so the
//! defaults are what is measured.
//!
//! - Without graceful restart on either side (ours turned off, `speaker:
//!   graceful-restart: false`): every peer drops the route when the speaker stops and
//!   holds it again within [`BACK_WITHIN`] of the new process's start, every time.
//! - With graceful restart on both sides (ours by default: the peers exactly as the
//!   samples write them, no `graceful-restart` key at all; theirs configured, restart
//!   time 120 s): the route never leaves any of the three (polled every ~50 ms
//!   throughout; BIRD's and GoBGP's own withdraw counters stay at 0) and is refreshed (no
//!   longer stale) within [`BACK_WITHIN`] of the new process's start. So a rolling
//!   restart with the sample configs loses no route at a peer that helps with graceful
//!   restart. (`graceful-restart: true` written out gives the same peer model:
//!   proto-tests/config, `reload_table`'s "explicit default graceful restart".)
//!
//! `PODCIDR_RESTARTS` sets the number of restarts per test (default 10); each test prints
//! the median and maximum per peer, the figures in RELIABILITY.md.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ipnet::IpNet;

use crate::e2e_speaker::{node_ip, Inputs, NodeSpec, Speaker};
use crate::harness::bird::Bird;
use crate::harness::frr::Frr;
use crate::harness::gobgp::{parse_rib, Gobgp};
use crate::harness::{v4, wait_for, Afi, BgpDaemon, Neighbor, PeerOpts, RoutesExt};
use crate::isolated;

/// The acceptance bound: from the new process's start to the route held (refreshed,
/// with graceful restart) at the peer.
const BACK_WITHIN: Duration = Duration::from_secs(10);

/// Between two samples of one peer.
const POLL: Duration = Duration::from_millis(50);

const MY_AS: u32 = 65001;

fn restarts() -> usize {
    std::env::var("PODCIDR_RESTARTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

/// How the speaker's side of a run says graceful restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ours {
    /// `speaker: graceful-restart: false`.
    Off,
    /// No key: the default, on.
    Default,
}

/// The three top-of-rack daemons, each with its own address and AS.
struct Tors {
    bird: Bird,
    gobgp: Gobgp,
    frr: Frr,
}

/// What one peer showed of our route at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Absent,
    Stale,
    Fresh,
}

impl Tors {
    fn start(dir: &std::path::Path, node: IpAddr, gr: Option<u16>) -> Tors {
        let neighbor = || {
            let n = Neighbor::new(node, MY_AS);
            match gr {
                Some(t) => n.graceful_restart(t),
                None => n,
            }
        };
        let bird =
            Bird::start(dir, PeerOpts::new(v4(2), 65002).neighbor(neighbor())).expect("start BIRD");
        let gobgp = Gobgp::start(dir, PeerOpts::new(v4(3), 65003).neighbor(neighbor()))
            .expect("start GoBGP");
        let frr =
            Frr::start(dir, PeerOpts::new(v4(4), 65004).neighbor(neighbor())).expect("start FRR");
        Tors { bird, gobgp, frr }
    }

    fn all(&self) -> [(&'static str, &dyn BgpDaemon); 3] {
        [
            ("BIRD", &self.bird),
            ("FRR", &self.frr),
            ("GoBGP", &self.gobgp),
        ]
    }

    /// Our route at peer `i` of [`Tors::all`]. GoBGP answers no Adj-RIB-In query for a
    /// neighbor that is down, so its global RIB is read (only the speaker sends it this
    /// prefix).
    fn seen(&self, i: usize, node: IpAddr, prefix: &IpNet) -> Result<Seen, String> {
        let routes = if i == 2 {
            let text = self
                .gobgp
                .cli(&["-j", "global", "rib", "-a", "ipv4"])
                .map_err(|e| e.to_string())?;
            parse_rib(&text).map_err(|e| e.to_string())?
        } else {
            self.all()[i]
                .1
                .routes(node, Afi::Ipv4)
                .map_err(|e| e.to_string())?
        };
        Ok(match routes.find(prefix) {
            None => Seen::Absent,
            Some(r) if r.stale => Seen::Stale,
            Some(_) => Seen::Fresh,
        })
    }

    fn established(&self, i: usize, node: IpAddr) -> bool {
        self.all()[i]
            .1
            .session_state(node)
            .is_ok_and(|s| s.established())
    }

    /// BIRD's count of withdraws received from the speaker (IPv4 channel), and GoBGP's
    /// (withdrawing UPDATEs plus prefixes withdrawn).
    fn withdraws(&self, node: IpAddr) -> (u64, u64) {
        let text = self
            .bird
            .control(&format!(
                "show protocols all {}",
                crate::harness::bird::proto_name(node)
            ))
            .expect("birdc");
        let bird = text
            .lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix("Import withdraws:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no withdraw count in {text}"));
        let json = self
            .gobgp
            .cli(&["-j", "neighbor", &node.to_string()])
            .expect("gobgp neighbor");
        let v: serde_json::Value = serde_json::from_str(&json).expect("gobgp json");
        // gobgp -j writes the API's message counters and leaves out those at zero
        // (`{"keepalive":1,"open":1,"total":4,"update":2}` for a fresh session).
        let received = &v["state"]["messages"]["received"];
        assert!(
            received.get("update").is_some(),
            "gobgp counters: {received}"
        );
        let gobgp = ["withdraw_update", "withdraw_prefix"]
            .iter()
            .map(|k| received.get(*k).and_then(|n| n.as_u64()).unwrap_or(0))
            .sum();
        (bird, gobgp)
    }
}

/// One restart as one peer lived it.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    /// A sample after SIGTERM found the route gone.
    left: bool,
    /// A sample found it stale (kept by graceful restart). A peer whose session is
    /// back within a sampling interval may never show it.
    was_stale: bool,
    /// From the new process's start to the first sample with the route fresh and the
    /// session Established again.
    back: Option<Duration>,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// The addresses of a test: BIRD, GoBGP and FRR, and the node.
fn addrs() -> [IpAddr; 4] {
    [v4(2), v4(3), v4(4), node_ip(1)]
}

/// The per-test kill timeout: a restart takes up to ~15 s.
fn timeout() -> Duration {
    Duration::from_secs(60 + 20 * restarts() as u64)
}

fn restart_loop(dir: &std::path::Path, ours: Ours) {
    let graceful = ours == Ours::Default;
    let node = node_ip(1);
    let n = restarts();
    let tors = Tors::start(dir, node, graceful.then_some(120));
    let inputs = Inputs::new(dir, "kubernetes", "10.244.0.0/16");
    // Peers as config/cilium-bgp-config.yaml writes them: no timers of ours, so the
    // defaults (connect-retry-time 120s, hold-time 90s) are what is measured.
    let mut config = String::from("peers:\n");
    for (addr, asn) in [(v4(2), 65002), (v4(3), 65003), (v4(4), 65004)] {
        config.push_str(&format!(
            "  - peer-address: {addr}\n    peer-asn: {asn}\n    my-asn: {MY_AS}\n"
        ));
    }
    if ours == Ours::Off {
        config.push_str("speaker:\n  graceful-restart: false\n");
    }
    inputs.write_config(&config);
    inputs.write_node(&NodeSpec::new("n1", node).node_cidrs(&["10.244.1.0/24"]));
    let prefix: IpNet = "10.244.1.0/24".parse().unwrap();
    let args = Speaker::standalone_args(&inputs, "n1", node);

    let mut speaker = Speaker::start(dir, "0", &args);
    for (i, (name, _)) in tors.all().iter().enumerate() {
        wait_for(
            &format!("{name} to hold the route"),
            Duration::from_secs(30),
            || match tors.seen(i, node, &prefix)? {
                Seen::Fresh if tors.established(i, node) => Ok(()),
                s => Err(format!("{s:?}")),
            },
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", speaker.log_tail(30)));
    }
    let withdraws_before = tors.withdraws(node);
    assert_eq!(
        withdraws_before,
        (0, 0),
        "(BIRD, GoBGP) withdraws at the start"
    );

    let mut outcomes: Vec<[Outcome; 3]> = Vec::new();
    for round in 1..=n {
        let stop = AtomicBool::new(false);
        let started: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let result = std::thread::scope(|scope| {
            let watchers: Vec<_> = (0..3)
                .map(|i| {
                    let (tors, stop, started, prefix) = (&tors, &stop, &started, &prefix);
                    scope.spawn(move || {
                        let mut out = Outcome {
                            left: false,
                            was_stale: false,
                            back: None,
                        };
                        let deadline = Instant::now() + Duration::from_secs(60);
                        while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                            let seen = tors.seen(i, node, prefix);
                            let at = Instant::now();
                            match seen {
                                Ok(Seen::Absent) => out.left = true,
                                Ok(Seen::Stale) => out.was_stale = true,
                                Ok(Seen::Fresh) => {
                                    // Fresh on the new session: the old one was seen
                                    // to end before the new process started (below),
                                    // and a peer still clearing it accepts no new one.
                                    if let Some(t0) = started.get() {
                                        if tors.established(i, node) {
                                            out.back = Some(at.saturating_duration_since(*t0));
                                            return out;
                                        }
                                    }
                                }
                                // A daemon busy for a moment: no sample.
                                Err(_) => {}
                            }
                            std::thread::sleep(POLL);
                        }
                        out
                    })
                })
                .collect();
            let exit = speaker.terminate();
            assert!(exit.success(), "round {round}: exit {exit}");
            // Every peer has seen the old session end before the new process starts,
            // so a fresh route afterwards is the new session's.
            for (i, (name, _)) in tors.all().iter().enumerate() {
                wait_for(
                    &format!("{name} to see the session end"),
                    Duration::from_secs(15),
                    || {
                        if tors.established(i, node) {
                            Err("established".into())
                        } else {
                            Ok(())
                        }
                    },
                )
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
            }
            let t0 = Instant::now();
            speaker = Speaker::start(dir, &round.to_string(), &args);
            let _ = started.set(t0);
            let deadline = t0 + Duration::from_secs(40);
            while watchers.iter().any(|w| !w.is_finished()) && Instant::now() < deadline {
                std::thread::sleep(POLL);
            }
            stop.store(true, Ordering::Relaxed);
            watchers
                .into_iter()
                .map(|w| w.join().expect("watcher"))
                .collect::<Vec<_>>()
        });
        let outcome: [Outcome; 3] = [result[0], result[1], result[2]];
        for ((name, _), o) in tors.all().iter().zip(&outcome) {
            let back = o.back.unwrap_or_else(|| {
                panic!(
                    "round {round}: {name} never held the route again: {o:?}\n{}",
                    speaker.log_tail(40)
                )
            });
            assert!(
                back <= BACK_WITHIN,
                "round {round}: {name} held the route again after {back:?}: {o:?}\n{}",
                speaker.log_tail(40)
            );
            if graceful {
                assert!(!o.left, "round {round}: {name} dropped the route: {o:?}");
            }
        }
        outcomes.push(outcome);
    }
    if graceful {
        assert_eq!(
            tors.withdraws(node),
            withdraws_before,
            "(BIRD, GoBGP) withdraws received from the speaker"
        );
    }
    drop(speaker);

    let mode = match ours {
        Ours::Default => {
            "graceful restart on both sides (ours by default, no key): route never left, \
             refreshed after"
        }
        Ours::Off => "no graceful restart: route held again after",
    };
    let mut report = BTreeMap::new();
    for (i, (name, _)) in tors.all().iter().enumerate() {
        let backs: Vec<Duration> = outcomes.iter().filter_map(|o| o[i].back).collect();
        let max = backs.iter().max().copied().unwrap_or_default();
        let left = outcomes.iter().filter(|o| o[i].left).count();
        let stale = outcomes.iter().filter(|o| o[i].was_stale).count();
        if graceful {
            // Graceful restart really was in force: the peer showed the route stale
            // (sampled every 50 ms, so not necessarily in every round).
            assert!(stale > 0, "{name} never showed the route stale");
        } else {
            // Without it the peer really dropped the route (FRR may clear and relearn
            // it between two samples).
            assert!(left > 0, "{name} never dropped the route without GR");
        }
        report.insert(*name, (median(backs.clone()), max, backs, left, stale));
    }
    println!("{n} restarts, {mode} (from the new process's start):");
    for (name, (median, max, all, left, stale)) in &report {
        let all: Vec<String> = all
            .iter()
            .map(|d| format!("{:.2}", d.as_secs_f64()))
            .collect();
        println!(
            "  {name:6} median {}  max {}  [{}]  (seen gone in {left}, stale in {stale} rounds)",
            secs(*median),
            secs(*max),
            all.join(" ")
        );
    }
}

#[test]
fn restarts_without_graceful_restart_are_back_within_ten_seconds_at_every_peer() {
    let Some(ns) = isolated!(&addrs(), timeout()) else {
        return;
    };
    restart_loop(ns.dir(), Ours::Off);
}

/// The peers as config/cilium-bgp-config.yaml writes them, no `graceful-restart` key,
/// and the switches helping: the default keeps the route at every peer, every time.
#[test]
fn restarts_with_graceful_restart_by_default_never_lose_the_route_at_any_peer() {
    let Some(ns) = isolated!(&addrs(), timeout()) else {
        return;
    };
    restart_loop(ns.dir(), Ours::Default);
}

/// The speaker dials a peer that refuses it (no listener yet, as a peer still tearing
/// the last session down) and waits to retry; meanwhile the peer dials the speaker's
/// listener. The waiting session takes that connection: our OPEN comes back on it (no
/// reset), the session is established on it and the whole table follows, and no dial of
/// ours replaces it. `status` showed when the retry was due while it waited.
#[test]
fn a_peer_dialing_while_the_speaker_waits_to_retry_is_accepted() {
    use crate::fixture::{self, SPEAKER_AS};
    use crate::raw_peer::SockOpts;
    use crate::speaker::{desired, listener, runtime, spec, Attrs, Speaker as InProcess};
    use podcidr_speaker::bgp::session::{SessionError, State};

    let Some(_ns) = isolated!(&fixture::addrs()) else {
        return;
    };
    let rt = runtime();
    let listener = listener(&rt, v4(1));
    // A long cap: after a few refusals the wait is long enough to dial into.
    let spec = spec(1, &fixture::peer(&["connect-retry-time: 60s"]));
    let inbound = {
        let _guard = rt.enter();
        listener.register(&spec).expect("register")
    };
    let speaker = InProcess::start_with(
        &rt,
        spec,
        desired(&fixture::prefixes(), &Attrs::new(SPEAKER_AS, false)),
        std::sync::Arc::new(podcidr_speaker::peer::NoopObserver),
        Some(inbound),
    );
    // Refused dials (nothing listens on 100.64.0.2:179) until a wait of 4 s or more.
    let waiting = speaker.wait("a long wait to retry", Duration::from_secs(20), |s| {
        s.state == State::Idle
            && s.stats.last_error == Some(SessionError::ConnectionFailed)
            && s.next_retry
                .is_some_and(|at| at > Instant::now() + Duration::from_secs(2))
    });
    let retry_at = waiting.next_retry.expect("next retry shown");
    let conn = crate::raw_peer::RawConn::dial_with(
        v4(2),
        std::net::SocketAddr::new(v4(1), 179),
        &SockOpts::default(),
        Duration::from_secs(2),
    )
    .expect("dial the speaker's listener");
    assert!(Instant::now() < retry_at, "dialed before the retry was due");
    let mut conn = conn;
    let open = conn.handshake(&fixture::raw_open());
    assert_eq!(open.asn(), SPEAKER_AS);
    let table = conn.read_table(&fixture::ctx(), &fixture::FAMILIES);
    assert_eq!(table, fixture::expected_table(), "the speaker's routes");
    conn.start_keepalives(Duration::from_secs(1));
    let up = speaker.wait("Established", Duration::from_secs(5), |s| {
        s.state == State::Established
    });
    assert_eq!(
        up.local.map(|a| a.port()),
        Some(179),
        "on the peer's connection: {up:?}"
    );
    assert_eq!(up.next_retry, None);
    // Past the retry that was due, still the same session: no dial of ours replaced it.
    let wait_past = retry_at.saturating_duration_since(Instant::now()) + Duration::from_secs(1);
    assert!(conn.expect_up_for(wait_past) > 0, "keepalives kept flowing");
    let st = speaker.status();
    assert_eq!(st.state, State::Established);
    assert_eq!(st.stats.established_count, 1);
    assert_eq!(st.local.map(|a| a.port()), Some(179));
}
