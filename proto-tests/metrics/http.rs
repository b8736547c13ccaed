//! The HTTP endpoint on 127.0.0.1:0 and the `status` command against it: every path,
//! the limits (head size, connection count), shutdown, and the command's table and exit
//! statuses through the library and the built binary.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use podcidr_speaker::bgp::session::State;
use podcidr_speaker::commands::status;
use podcidr_speaker::config::state::ConfigState;
use podcidr_speaker::metrics::{server, Metrics, Status};
use podcidr_speaker::sources::file;
use podcidr_speaker::sources::model::{node_view, IpamOverride};
use podcidr_speaker::sources::{Resource, ResourceStatus, SourceStatus};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::exposition::parse;
use crate::{outage_dir, peer};

/// Every wait in this file is bounded by this.
const WAIT: Duration = Duration::from_secs(10);

struct Endpoint {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Endpoint {
    async fn start(metrics: Arc<Metrics>) -> Endpoint {
        let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server::serve(listener, metrics, async {
            let _ = stopped.await;
        }));
        Endpoint {
            addr,
            stop: Some(stop),
            task,
        }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(WAIT, &mut self.task)
            .await
            .expect("the server stops when told")
            .unwrap();
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A raw request; the whole answer as (status code, headers, body).
async fn request(addr: SocketAddr, raw: Vec<u8>) -> (u16, String, Vec<u8>) {
    tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect_timeout(&addr, WAIT).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        s.write_all(&raw).unwrap();
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).unwrap();
        let end = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a head");
        let head = String::from_utf8(answer[..end].to_vec()).unwrap();
        let code = head[9..12].parse().unwrap();
        (code, head, answer[end + 4..].to_vec())
    })
    .await
    .unwrap()
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String, Vec<u8>) {
    request(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").into_bytes(),
    )
    .await
}

const GOOD: &str = "peers:\n- {peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001}\n";

/// A speaker's metrics as the daemon would leave them: config in force, sources
/// synced, the outage view, two peers (one up).
fn populated() -> Arc<Metrics> {
    let m = Metrics::new();
    m.set_node(Some("master1"));
    let mut config = ConfigState::new();
    let u = config.update_text(GOOD);
    m.record_config_reload(&u, &config.status(), SystemTime::now());
    let mut sources = SourceStatus::default();
    sources.resources.insert(
        Resource::ClusterStateFile,
        ResourceStatus {
            up: true,
            synced: true,
            last_event: Some(SystemTime::now()),
            events: 1,
            relists: 1,
            ..ResourceStatus::default()
        },
    );
    m.record_source_status(&sources);
    let state = file::load(&outage_dir()).unwrap();
    m.set_view(&node_view(&state, IpamOverride::Auto).unwrap());
    let now = SystemTime::now();
    let up = peer("192.0.2.1", 179);
    let down = peer("192.0.2.2", 179);
    m.add_peer(up, 65000, now);
    m.add_peer(down, 65010, now);
    m.record_session_state(up, State::OpenConfirm, State::Established, now);
    m.set_announced(up, podcidr_speaker::bgp::wire::Afi::IPV4, 1);
    m.record_session_state(down, State::Idle, State::Active, now);
    m.record_error(down, "tcp connection failed", now);
    m.heartbeat();
    m
}

#[tokio::test]
async fn every_path_answers_over_tcp() {
    let m = populated();
    let ep = Endpoint::start(Arc::clone(&m)).await;

    let (code, head, body) = get(ep.addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(head.contains("Connection: close"), "{head}");
    let scrape = parse(std::str::from_utf8(&body).unwrap()).unwrap();
    assert_eq!(
        scrape.value("podcidr_speaker_session_up", &[("peer", "192.0.2.1:179")]),
        Some(1.0)
    );
    assert_eq!(
        scrape.value("podcidr_speaker_podcidr_drift_nodes", &[]),
        Some(4.0)
    );

    let (code, _, body) = get(ep.addr, "/healthz").await;
    assert_eq!((code, body.as_slice()), (200, &b"ok\n"[..]));
    let (code, _, body) = get(ep.addr, "/readyz").await;
    assert_eq!((code, body.as_slice()), (200, &b"ready\n"[..]));

    let (code, head, body) = get(ep.addr, "/status").await;
    assert_eq!(code, 200);
    assert!(head.contains("Content-Type: application/json"), "{head}");
    let status: Status = serde_json::from_slice(&body).unwrap();
    assert_eq!(status.node.as_deref(), Some("master1"));
    assert_eq!(status.peers.len(), 2);
    assert_eq!(status.view.as_ref().unwrap().drift.len(), 4);

    let (code, _, _) = get(ep.addr, "/nope").await;
    assert_eq!(code, 404);
    let (code, head, body) = request(
        ep.addr,
        b"HEAD /metrics HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(),
    )
    .await;
    assert_eq!(code, 200);
    assert!(body.is_empty());
    assert!(!head.contains("Content-Length: 0\r"), "{head}");
    let (code, head, _) = request(
        ep.addr,
        b"DELETE /metrics HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(),
    )
    .await;
    assert_eq!(code, 405);
    assert!(head.contains("Allow: GET, HEAD"), "{head}");
    ep.stop().await;
}

#[tokio::test]
async fn readyz_is_503_with_the_reason_until_config_and_sources_are_in() {
    let m = Metrics::new();
    let ep = Endpoint::start(Arc::clone(&m)).await;
    let (code, _, body) = get(ep.addr, "/readyz").await;
    assert_eq!(code, 503);
    assert_eq!(
        String::from_utf8(body).unwrap(),
        "not ready: no bgp-config in force; no source has reported\n"
    );
    let mut config = ConfigState::new();
    let u = config.update_text(GOOD);
    m.record_config_reload(&u, &config.status(), SystemTime::now());
    let mut sources = SourceStatus::default();
    sources
        .resources
        .insert(Resource::Nodes, ResourceStatus::default());
    m.record_source_status(&sources);
    let (code, _, body) = get(ep.addr, "/readyz").await;
    assert_eq!(code, 503);
    assert_eq!(
        String::from_utf8(body).unwrap(),
        "not ready: not synced yet: nodes\n"
    );
    sources.resources.get_mut(&Resource::Nodes).unwrap().synced = true;
    m.record_source_status(&sources);
    assert_eq!(get(ep.addr, "/readyz").await.0, 200);
    ep.stop().await;
}

#[tokio::test]
async fn healthz_turns_503_when_the_main_loop_stops_beating() {
    let m = Metrics::with_liveness(Duration::from_millis(300));
    let ep = Endpoint::start(Arc::clone(&m)).await;
    m.heartbeat();
    assert_eq!(get(ep.addr, "/healthz").await.0, 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(get(ep.addr, "/healthz").await.0, 503);
    m.heartbeat();
    assert_eq!(get(ep.addr, "/healthz").await.0, 200);
    ep.stop().await;
}

/// An idle daemon has no tick: a request asks its main loop, which beats when it
/// answers; a loop that no longer answers is judged by its last beat, after a bounded
/// wait.
#[tokio::test]
async fn healthz_asks_the_main_loop_and_a_silent_one_fails_after_the_window() {
    let m = Metrics::with_liveness(Duration::from_millis(300));
    let ep = Endpoint::start(Arc::clone(&m)).await;
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let main_loop = {
        let m = Arc::clone(&m);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = m.asked() => {
                        if *stopped.borrow() {
                            // Wedged: asked, never answers again.
                            std::future::pending::<()>().await;
                        }
                        m.heartbeat();
                        m.answered();
                    }
                    _ = stopped.changed() => {}
                }
            }
        })
    };
    // Idle well past the window: the request's ask brings the beat.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(get(ep.addr, "/healthz").await.0, 200);
    assert_eq!(get(ep.addr, "/healthz").await.0, 200);
    stop.send_replace(true);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let asked = Instant::now();
    assert_eq!(get(ep.addr, "/healthz").await.0, 503);
    let waited = asked.elapsed();
    assert!(
        waited >= server::REFRESH_WAIT && waited < server::REFRESH_WAIT * 3,
        "waited {waited:?} for a silent loop"
    );
    main_loop.abort();
    ep.stop().await;
}

#[tokio::test]
async fn an_oversized_head_gets_431_and_a_silent_client_blocks_nobody() {
    let m = Metrics::new();
    let ep = Endpoint::start(Arc::clone(&m)).await;
    let mut big = b"GET /metrics HTTP/1.1\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'a', server::MAX_HEAD + 10));
    big.extend_from_slice(b"\r\n\r\n");
    assert_eq!(request(ep.addr, big).await.0, 431);

    let silent = TcpStream::connect(ep.addr).unwrap();
    let started = Instant::now();
    assert_eq!(get(ep.addr, "/healthz").await.0, 200);
    assert!(started.elapsed() < Duration::from_secs(2));
    drop(silent);
    ep.stop().await;
}

#[tokio::test]
async fn connections_beyond_the_limit_are_closed_and_service_resumes() {
    let m = Metrics::new();
    let ep = Endpoint::start(Arc::clone(&m)).await;
    let addr = ep.addr;
    let held: Vec<TcpStream> = (0..server::MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // Let the server accept all of them and take their slots.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let refused = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        let _ = s.write_all(b"GET /healthz HTTP/1.1\r\n\r\n");
        let mut answer = Vec::new();
        // Closed unanswered: EOF (or a reset) with nothing read.
        let _ = s.read_to_end(&mut answer);
        answer
    })
    .await
    .unwrap();
    assert!(
        refused.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&refused)
    );
    drop(held);
    let deadline = Instant::now() + WAIT;
    loop {
        // The held connections' tasks end when they see EOF; then slots are free.
        let addr = ep.addr;
        let answer = tokio::task::spawn_blocking(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(WAIT)).unwrap();
            let _ = s.write_all(b"GET /healthz HTTP/1.1\r\n\r\n");
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer);
            answer
        })
        .await
        .unwrap();
        if answer.starts_with(b"HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "service did not resume");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ep.stop().await;
}

#[tokio::test]
async fn shutdown_stops_accepting() {
    let m = Metrics::new();
    let ep = Endpoint::start(m).await;
    let addr = ep.addr;
    assert_eq!(get(addr, "/healthz").await.0, 200);
    ep.stop().await;
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
}

async fn status_command(addr: String, json: bool) -> (u8, String, String) {
    tokio::task::spawn_blocking(move || {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let request = status::StatusRequest {
            addr,
            json,
            routes: None,
        };
        let code = status::run(&request, &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn status_prints_the_summary_and_exits_1_while_a_peer_is_down() {
    let m = populated();
    let ep = Endpoint::start(Arc::clone(&m)).await;
    let (code, out, err) = status_command(ep.addr.to_string(), false).await;
    assert_eq!(code, status::EXIT_NOT_ESTABLISHED, "{out}{err}");
    assert!(err.is_empty(), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("podcidr-speaker ")
            && lines[0].contains("on node master1: ready, alive"),
        "{out}"
    );
    assert!(
        out.contains("ipam cluster-pool, 4 nodes in view, 4 pod CIDRs announced"),
        "{out}"
    );
    let header = lines
        .iter()
        .position(|l| l.starts_with("Neighbor"))
        .expect("a neighbor table");
    let words = |l: &str| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        words(lines[header]),
        [
            "Neighbor", "AS", "State", "Up/Down", "Sent", "Pending", "Rcvd", "Flaps", "Last",
            "error"
        ]
    );
    let up = words(lines[header + 1]);
    assert_eq!(
        (
            up[0].as_str(),
            up[1].as_str(),
            up[2].as_str(),
            up[4].as_str(),
            up[8].as_str()
        ),
        ("192.0.2.1:179", "65000", "Established", "1", "-")
    );
    assert!(up[3].starts_with("00:00:0"), "{up:?}");
    let down = lines[header + 2];
    assert!(down.starts_with("192.0.2.2:179"), "{out}");
    assert!(
        down.contains("Active") && down.ends_with("tcp connection failed"),
        "{out}"
    );
    assert!(out.contains("  master1: Node [10.5.112.0/24] vs CiliumNode [10.5.113.0/24]; the CiliumNode's are announced"), "{out}");
    assert!(out.contains("cluster-state-file  yes"), "{out}");

    // All up: exit 0.
    let down = peer("192.0.2.2", 179);
    m.record_session_state(
        down,
        State::OpenConfirm,
        State::Established,
        SystemTime::now(),
    );
    let (code, _, _) = status_command(ep.addr.to_string(), false).await;
    assert_eq!(code, status::EXIT_OK);

    let (code, out, _) = status_command(ep.addr.to_string(), true).await;
    assert_eq!(code, status::EXIT_OK);
    let doc: Status = serde_json::from_str(&out).unwrap();
    assert!(doc.peers.iter().all(|p| p.up));
    ep.stop().await;
}

#[tokio::test]
async fn status_exits_1_without_a_config_even_with_no_peers() {
    let m = Metrics::new();
    let ep = Endpoint::start(Arc::clone(&m)).await;
    let (code, out, _) = status_command(ep.addr.to_string(), false).await;
    assert_eq!(code, status::EXIT_NOT_ESTABLISHED);
    assert!(out.contains("no config in force, no reload yet"), "{out}");
    assert!(out.contains("no peers configured"), "{out}");
    ep.stop().await;
}

#[tokio::test]
async fn status_exits_2_when_nothing_listens_or_something_else_answers() {
    // A port that was just free: nothing listens there.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (code, out, err) = status_command(closed.to_string(), false).await;
    assert_eq!(code, status::EXIT_UNREACHABLE);
    assert!(out.is_empty());
    assert!(err.contains("cannot connect to"), "{err}");
    // What to do next, not only what failed.
    assert!(err.contains("is the speaker running there?"), "{err}");
    assert!(err.contains("--addr NODE_IP:9477"), "{err}");

    // No port: refused before any name lookup (nothing leaves the machine).
    let (code, _, err) = status_command("127.0.0.1".into(), false).await;
    assert_eq!(code, status::EXIT_UNREACHABLE);
    assert!(err.contains("--addr"), "{err}");

    // Something that is not a speaker.
    let impostor = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = impostor.local_addr().unwrap();
    let serve = std::thread::spawn(move || {
        for answer in [
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\nboom\n",
        ] {
            let (mut s, _) = impostor.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            s.write_all(answer.as_bytes()).unwrap();
        }
    });
    let (code, _, err) = status_command(addr.to_string(), false).await;
    assert_eq!(code, status::EXIT_UNREACHABLE);
    assert!(
        err.contains("not a podcidr-speaker status document"),
        "{err}"
    );
    let (code, _, err) = status_command(addr.to_string(), false).await;
    assert_eq!(code, status::EXIT_UNREACHABLE);
    assert!(err.contains("/status answered 500: boom"), "{err}");
    serve.join().unwrap();
}

#[tokio::test]
async fn status_gives_up_on_a_server_that_never_answers() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let started = Instant::now();
    let result = tokio::task::spawn_blocking(move || {
        status::fetch(&addr.to_string(), Duration::from_millis(500))
    })
    .await
    .unwrap();
    assert!(
        matches!(result, Err(status::StatusError::Timeout { .. })),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    drop(silent);
}

#[tokio::test]
async fn the_built_binary_status_command_uses_the_same_exit_statuses() {
    let m = populated();
    let ep = Endpoint::start(Arc::clone(&m)).await;
    let addr = ep.addr.to_string();
    let run = |addr: String| {
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_podcidr-speaker"))
                .args(["status", "--addr", &addr])
                .output()
                .unwrap()
        })
    };
    let out = run(addr.clone()).await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("192.0.2.2:179"));
    m.record_session_state(
        peer("192.0.2.2", 179),
        State::OpenConfirm,
        State::Established,
        SystemTime::now(),
    );
    let out = run(addr).await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    ep.stop().await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let out = run(closed).await.unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
