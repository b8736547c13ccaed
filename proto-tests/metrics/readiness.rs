//! Readiness that means something, on a running speaker (the built binary) with BIRD as
//! the switch: `/readyz` waits for the node's sessions, with `--ready-timeout` as its
//! bound (a peer that stays down must not block a rollout for ever); and the startup
//! gate (`--cilium-health-addr`) against a local HTTP endpoint standing in for the
//! Cilium agent: nothing is announced while it answers 503, the route goes out once it
//! answers 200, and a later 503 is only reported, never a withdrawal.
//!
//! Each test runs in its own network namespace; the stand-in agent listens on that
//! namespace's loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::bird::Bird;
use crate::harness::{hold_for, v4, wait_for, Afi, BgpDaemon, Neighbor, PeerOpts};
use crate::isolated;
use crate::live::{get, is, status, status_command, wait_scrape};
use crate::speaker::{net, node_ip, Inputs, NodeSpec, Speaker};

const BIRD_AS: u32 = 65000;
const NODE_AS: u32 = 65001;
const WAIT: Duration = Duration::from_secs(30);

fn config(peers: &[SocketAddr]) -> String {
    let mut text = "peers:\n".to_owned();
    for p in peers {
        text.push_str(&format!(
            "  - peer-address: {}\n    peer-port: {}\n    peer-asn: {BIRD_AS}\n    my-asn: {NODE_AS}\n    hold-time: 9s\n",
            p.ip(),
            p.port()
        ));
    }
    text.push_str("speaker:\n  connect-retry-time: 1s\n");
    text
}

/// `/readyz` waits while BIRD's session is the only one missing... but the second peer
/// (nobody listens at its address) never comes up: once it has been down for
/// `--ready-timeout`, `/readyz` answers 200 and names it.
#[test]
fn readyz_waits_for_the_sessions_and_gives_up_on_a_dead_peer_after_the_timeout() {
    const TIMEOUT: Duration = Duration::from_secs(10);
    let speaker_addr = node_ip(1);
    let Some(ns) = isolated!(&[v4(2), v4(3), speaker_addr], Duration::from_secs(120)) else {
        return;
    };
    let bird = Bird::start(
        ns.dir(),
        PeerOpts::new(v4(2), BIRD_AS).neighbor(Neighbor::new(speaker_addr, NODE_AS)),
    )
    .expect("start BIRD");
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    let (up, dead) = (SocketAddr::new(v4(2), 179), SocketAddr::new(v4(3), 179));
    inputs.write_config(&config(&[up, dead]));
    inputs.write_node(&NodeSpec::new("n1", speaker_addr).node_cidrs(&["10.244.1.0/24"]));
    let mut args = Speaker::standalone_args(&inputs, "n1", speaker_addr);
    args.push(format!("--ready-timeout={}s", TIMEOUT.as_secs()));
    let started = Instant::now();
    let mut speaker = Speaker::start(ns.dir(), "n1", &args);
    let endpoint = SocketAddr::new(speaker_addr, 9477);

    wait_for("the endpoint", WAIT, || get(endpoint, "/healthz")).unwrap();
    wait_scrape(endpoint, &speaker, "BIRD's session up", |s| {
        is(
            s,
            "podcidr_speaker_session_up",
            &[("peer", &up.to_string())],
            1.0,
        )
    });
    let (code, body) = get(endpoint, "/readyz").unwrap();
    assert!(
        started.elapsed() < TIMEOUT,
        "BIRD took the whole timeout; nothing tested"
    );
    assert_eq!(
        (code, body.as_str()),
        (
            503,
            format!("not ready: session {dead} not established\n").as_str()
        ),
        "{}",
        speaker.log_tail(20)
    );
    let st = status(endpoint);
    assert!(!st.ready);
    assert_eq!(
        st.ready_reasons,
        vec![format!("session {dead} not established")]
    );

    let (code, body) = wait_for("ready after the timeout", WAIT, || {
        let (code, body) = get(endpoint, "/readyz")?;
        if code == 200 {
            Ok((code, body))
        } else {
            Err(body)
        }
    })
    .unwrap();
    assert!(started.elapsed() >= TIMEOUT, "ready too early");
    assert_eq!(
        body,
        format!(
            "ready; not waited for beyond --ready-timeout {}s: session {dead} not established\n",
            TIMEOUT.as_secs()
        )
    );
    assert_eq!(code, 200);
    assert!(status(endpoint).ready);
    drop(bird);
    assert!(speaker.terminate().success());
}

/// A stand-in for the Cilium agent's `/healthz`: answers every request with the status
/// code held in `code`, and counts the requests.
struct Agent {
    addr: SocketAddr,
    code: Arc<AtomicU16>,
    requests: Arc<AtomicU64>,
}

impl Agent {
    fn start(code: u16) -> Agent {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in agent");
        let addr = listener.local_addr().unwrap();
        let code = Arc::new(AtomicU16::new(code));
        let requests = Arc::new(AtomicU64::new(0));
        let (c, r) = (Arc::clone(&code), Arc::clone(&requests));
        // Ends with the test's process (the namespace goes with it).
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head);
                let code = if text.starts_with("GET /healthz HTTP/1.1\r\n") {
                    c.load(Ordering::SeqCst)
                } else {
                    404
                };
                r.fetch_add(1, Ordering::SeqCst);
                let _ = write!(
                    stream,
                    "HTTP/1.1 {code} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        Agent {
            addr,
            code,
            requests,
        }
    }

    fn answer(&self, code: u16) {
        self.code.store(code, Ordering::SeqCst);
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

#[test]
fn the_startup_gate_holds_every_announcement_until_the_agent_is_healthy_then_only_reports() {
    let speaker_addr = node_ip(1);
    let Some(ns) = isolated!(&[v4(2), speaker_addr], Duration::from_secs(120)) else {
        return;
    };
    let agent = Agent::start(503);
    let bird = Bird::start(
        ns.dir(),
        PeerOpts::new(v4(2), BIRD_AS).neighbor(Neighbor::new(speaker_addr, NODE_AS)),
    )
    .expect("start BIRD");
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_config(&config(&[SocketAddr::new(v4(2), 179)]));
    inputs.write_node(&NodeSpec::new("n1", speaker_addr).node_cidrs(&["10.244.1.0/24"]));
    let mut args = Speaker::standalone_args(&inputs, "n1", speaker_addr);
    args.push(format!("--cilium-health-addr={}", agent.addr));
    let mut speaker = Speaker::start(ns.dir(), "n1", &args);
    let endpoint = SocketAddr::new(speaker_addr, 9477);
    let gate_reason = format!(
        "nothing announced until the cilium agent at {} reports healthy",
        agent.addr
    );

    // 1. The agent answers 503: config and sources are in, yet no session and no route.
    wait_for("the speaker asking the agent", WAIT, || {
        let (_, body) = get(endpoint, "/status")?;
        let st: podcidr_speaker::metrics::Status =
            serde_json::from_str(&body).map_err(|e| e.to_string())?;
        match (st.config.loaded, agent.requests()) {
            (true, n) if n >= 3 => Ok(()),
            seen => Err(format!("{seen:?}")),
        }
    })
    .unwrap();
    hold_for(
        "no session while the agent is unhealthy",
        Duration::from_secs(3),
        || {
            let state = bird
                .session_state(speaker_addr)
                .map_err(|e| e.to_string())?;
            if state.established() {
                return Err(format!("BIRD sees {state:?}"));
            }
            Ok(())
        },
    )
    .unwrap();
    let (code, body) = get(endpoint, "/readyz").unwrap();
    assert_eq!((code, body), (503, format!("not ready: {gate_reason}\n")));
    wait_scrape(
        endpoint,
        &speaker,
        "the gate closed, the agent unhealthy",
        |s| {
            is(s, "podcidr_speaker_announce_gate_open", &[], 0.0)?;
            is(s, "podcidr_speaker_cilium_agent_healthy", &[], 0.0)
        },
    );
    let gate = status(endpoint).gate.expect("gate in /status");
    assert_eq!(
        (gate.open, gate.healthy, gate.last_error.as_deref()),
        (false, Some(false), Some("GET /healthz answered 503"))
    );

    // 2. Healthy: the session comes up and the route goes out; ready.
    agent.answer(200);
    let route = net("10.244.1.0/24");
    let holds_route = || {
        let got = bird
            .routes(speaker_addr, Afi::Ipv4)
            .map_err(|e| e.to_string())?;
        if got.iter().any(|r| r.prefix == route) {
            Ok(())
        } else {
            Err(format!("not held: {got:?}"))
        }
    };
    wait_for("BIRD holding the pod CIDR", WAIT, holds_route)
        .unwrap_or_else(|e| panic!("{e}\n{}", speaker.log_tail(30)));
    wait_scrape(endpoint, &speaker, "the gate open", |s| {
        is(s, "podcidr_speaker_announce_gate_open", &[], 1.0)?;
        is(s, "podcidr_speaker_cilium_agent_healthy", &[], 1.0)
    });
    wait_for("ready", WAIT, || match get(endpoint, "/readyz")? {
        (200, body) if body == "ready\n" => Ok(()),
        other => Err(format!("{other:?}")),
    })
    .unwrap();

    // 3. The agent flaps: reported, and the route stays.
    agent.answer(503);
    wait_scrape(endpoint, &speaker, "the flap recorded", |s| {
        is(s, "podcidr_speaker_cilium_agent_healthy", &[], 0.0)?;
        is(s, "podcidr_speaker_cilium_agent_unhealthy_total", &[], 1.0)?;
        is(s, "podcidr_speaker_announce_gate_open", &[], 1.0)
    });
    hold_for(
        "the route through the flap",
        Duration::from_secs(4),
        holds_route,
    )
    .unwrap();
    let st = status(endpoint);
    let gate = st.gate.expect("gate in /status");
    assert_eq!(
        (gate.open, gate.healthy, gate.flaps),
        (true, Some(false), 1)
    );
    assert!(
        st.ready,
        "a flap after the first announcement does not unready"
    );
    let (_, out) = status_command(endpoint);
    let line = format!(
        "startup gate: open, cilium agent at {} NOT HEALTHY, 1 flaps since (reported only) \
         (GET /healthz answered 503)",
        agent.addr
    );
    assert!(out.lines().any(|l| l == line), "{out}");
    assert!(speaker.terminate().success());
}
