//! The built `podcidr-speaker run` binary, for what only the whole process shows: its
//! logs (text and JSON, down to trace), its `/metrics` and `/status`, the `status` and
//! `run --dry-run` output, never carrying a password; and SIGTERM in the middle of the
//! initial table with graceful restart, BIRD losing no route.
//!
//! The speaker is a child process (proto-tests/e2e/speaker.rs) following a standalone
//! bgp-config and cluster state; the node's address is 100.64.1.1.

use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::e2e_speaker::{node_ip, Inputs, NodeSpec, Speaker, BINARY};
use crate::fixture::RAW_AS;
use crate::harness::bird::{proto_name, Bird};
use crate::harness::process::run;
use crate::harness::{v4, Neighbor, PeerOpts};
use crate::isolated;
use crate::raw_peer::{self, RawListener, SockOpts};
use crate::scrape::get;

const KEY: &str = "Bn4-run-md5-k3y-Qw";

fn config(hold: &str) -> String {
    format!(
        "peers:\n  - peer-address: {}\n    peer-asn: {RAW_AS}\n    my-asn: 65001\n    \
         hold-time: {hold}\n    password: {KEY}\nspeaker:\n  connect-retry-time: 1s\n",
        v4(2)
    )
}

fn assert_no_key(what: &str, text: &str) {
    assert!(!text.contains(KEY), "{what} shows the password:\n{text}");
}

#[test]
fn the_running_binary_never_shows_a_password() {
    let n1 = node_ip(1);
    let Some(ns) = isolated!(&[v4(2), n1], Duration::from_secs(120)) else {
        return;
    };
    let listener = RawListener::bind_with(
        SocketAddr::new(v4(2), 179),
        &SockOpts {
            md5: Some((n1, KEY.to_owned())),
            ..SockOpts::default()
        },
    );
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_config(&config("9s"));
    inputs.write_node(&NodeSpec::new("n1", n1).node_cidrs(&["10.244.1.0/24"]));
    let mut args = Speaker::standalone_args(&inputs, "n1", n1);
    let dry = {
        let out = run(
            Command::new(BINARY).arg("run").args(&args).arg("--dry-run"),
            Duration::from_secs(30),
        )
        .expect("run --dry-run");
        assert!(out.status.success(), "{out:?}");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    assert!(dry.contains("100.64.0.2"), "{dry}");

    let mut outputs = vec![("run --dry-run".to_string(), dry)];
    for format in ["text", "json"] {
        // The child reads RUST_LOG from here: everything the crate logs.
        std::env::set_var("RUST_LOG", "podcidr_speaker=trace");
        args.push(format!("--log-format={format}"));
        let mut speaker = Speaker::start(ns.dir(), &format!("n1-{format}"), &args);
        args.pop();
        let mut conn = listener.accept();
        let open = raw_peer::open(
            4,
            RAW_AS,
            9,
            "100.64.0.2".parse().unwrap(),
            &raw_peer::cap_params(&[
                &raw_peer::CAP_MP_IPV4,
                &raw_peer::cap_as4(u32::from(RAW_AS)),
            ]),
        );
        conn.handshake(&open);
        let table = conn.read_table(
            &crate::fixture::ctx(),
            &[podcidr_speaker::bgp::wire::AfiSafi::IPV4_UNICAST],
        );
        assert_eq!(
            table
                .routes
                .keys()
                .map(|p| p.to_string())
                .collect::<Vec<_>>(),
            ["10.244.1.0/24"]
        );
        conn.start_keepalives(Duration::from_secs(3));
        let endpoint = SocketAddr::new(n1, 9477);
        let (code, metrics) = get(endpoint, "/metrics");
        assert_eq!(code, 200);
        assert!(metrics.contains("podcidr_speaker_session_up"), "{metrics}");
        // A refused edit (hold time 2 s) with the password in it: logged and shown.
        inputs.write_config(&config("2s"));
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            let (code, status) = get(endpoint, "/status");
            assert_eq!(code, 200);
            if status.contains("hold-time") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the refusal never showed: {status}"
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        let (_, metrics_after) = get(endpoint, "/metrics");
        let cmd = run(
            Command::new(BINARY).args(["status", "--addr", &endpoint.to_string()]),
            Duration::from_secs(10),
        )
        .expect("status command");
        let status_cmd = format!(
            "{}{}",
            String::from_utf8_lossy(&cmd.stdout),
            String::from_utf8_lossy(&cmd.stderr)
        );
        let exit = speaker.terminate();
        assert!(exit.success(), "{exit}");
        drop(conn);
        inputs.write_config(&config("9s"));
        let log = std::fs::read_to_string(ns.dir().join(format!("speaker-n1-{format}.log")))
            .expect("speaker log");
        assert!(log.contains("established"), "{format} log: {log}");
        assert!(log.contains("hold-time"), "the refusal is logged: {log}");
        outputs.push((format!("{format} logs"), log));
        outputs.push(("/metrics".into(), metrics));
        outputs.push(("/metrics after the refusal".into(), metrics_after));
        outputs.push(("/status".into(), status));
        outputs.push(("podcidr-speaker status".into(), status_cmd));
    }
    let total: usize = outputs.iter().map(|(_, t)| t.len()).sum();
    for (what, text) in &outputs {
        assert_no_key(what, text);
    }
    println!(
        "run binary: password absent from {total} octets of dry-run, text and JSON trace \
         logs, /metrics, /status and status output"
    );
}

/// A node YAML with `n` /32 pod CIDRs: a table that takes the speaker a while to send.
fn big_node(n: u32) -> String {
    let mut y =
        String::from("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nspec:\n  podCIDRs:\n");
    for i in 0..n {
        let [a, b, c, d] = (0x0a00_0000u32 + i).to_be_bytes();
        y.push_str(&format!("  - {a}.{b}.{c}.{d}/32\n"));
    }
    y.push_str("status:\n  addresses:\n  - type: InternalIP\n    address: 100.64.1.1\n");
    y
}

fn bird_count(bird: &Bird, from: IpAddr) -> u64 {
    // BIRD answers its control socket between batches of a 300,000-route import; on a
    // loaded machine one command can miss the harness's timeout. Three tries, and every
    // error is shown if all fail: the count itself is never guessed.
    let command = format!("show route count protocol {}", proto_name(from));
    let mut errors = Vec::new();
    let text = loop {
        match bird.control(&command) {
            Ok(text) => break text,
            Err(e) if errors.len() < 2 => errors.push(e.to_string()),
            Err(e) => panic!("birdc: {e}; earlier tries: {errors:?}"),
        }
    };
    text.lines()
        .find(|l| l.contains("routes for"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no route count in {text:?}"))
}

/// SIGTERM while the initial table is still going out, graceful restart negotiated: the
/// process exits 0 without a NOTIFICATION, BIRD keeps every route it had while the
/// speaker is away, and the next process leaves BIRD with exactly the table.
///
/// This found a daemon bug (fixed): the daemon chose between the graceful close and a
/// Cease from the peer task's *published* status, which in the first moments after
/// Established did not show the negotiated graceful restart yet, so a SIGTERM there sent
/// Cease 6/2 and BIRD dropped every route (2 of 4 runs). The session now decides
/// (`Shutdown::Restart`).
///
/// The SIGTERM must land while the table is on its way. A 1,000,000-route table is about
/// 5 MB of UPDATEs, which fits whole in loopback's socket buffers (tcp_rmem allows 32 MB
/// here), so a fast BIRD can hold it all before any SIGTERM lands. So the namespace's
/// buffers are capped at 256 KiB and BIRD is paused (SIGSTOP) once the session is up: the
/// table stops part-way, the speaker is terminated, and BIRD resumes to find a partial
/// table followed by the end of the connection.
#[test]
fn sigterm_during_the_initial_table_loses_no_route_at_bird() {
    let n1 = node_ip(1);
    let Some(ns) = isolated!(&[v4(2), n1], Duration::from_secs(150)) else {
        return;
    };
    let n = 1_000_000u32;
    // Small socket buffers in this namespace: at most a few hundred KiB of the table can
    // wait in the kernel while BIRD is paused.
    for (knob, value) in [
        ("tcp_rmem", "4096 131072 262144"),
        ("tcp_wmem", "4096 16384 262144"),
    ] {
        std::fs::write(format!("/proc/sys/net/ipv4/{knob}"), value)
            .unwrap_or_else(|e| panic!("cap {knob} in the test's namespace: {e}"));
    }
    let mut bird = Bird::start(
        ns.dir(),
        PeerOpts::new(v4(2), 65000).neighbor(Neighbor::new(n1, 65001).graceful_restart(60)),
    )
    .expect("start BIRD");
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.0.0.0/8");
    inputs.write_config(&format!(
        "peers:\n  - peer-address: {}\n    peer-asn: 65000\n    my-asn: 65001\n    \
         hold-time: 9s\nspeaker:\n  connect-retry-time: 1s\n  graceful-restart: true\n  \
         graceful-restart-time: 60s\n",
        v4(2)
    ));
    std::fs::write(inputs.cluster_path().join("n1.yaml"), big_node(n)).unwrap();
    let args = Speaker::standalone_args(&inputs, "n1", n1);
    let mut first = Speaker::start(ns.dir(), "first", &args);
    // SIGTERM the moment the session is up: the table is then on its way.
    let log_path = ns.dir().join("speaker-first.log");
    let deadline = Instant::now() + Duration::from_secs(90);
    while !std::fs::read_to_string(&log_path)
        .unwrap_or_default()
        .contains("session established")
    {
        assert!(
            Instant::now() < deadline,
            "no session:\n{}",
            first.log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    bird.pause(true);
    // Let the speaker fill the buffers and stall on a full window.
    std::thread::sleep(Duration::from_millis(500));
    let exit = first.terminate();
    bird.pause(false);
    assert!(exit.success(), "exit {exit}:\n{}", first.log_tail(30));
    let at_term = bird_count(&bird, n1);
    let log = first.log_tail(200);
    assert!(
        !log.contains("notification sent"),
        "graceful restart: no NOTIFICATION:\n{log}"
    );
    let mut held = bird_count(&bird, n1);
    assert!(
        held < u64::from(n),
        "the whole table was out before SIGTERM ({held}); nothing was tested"
    );
    let away = Instant::now();
    while away.elapsed() < Duration::from_secs(2) {
        let c = bird_count(&bird, n1);
        assert!(
            c >= held,
            "BIRD dropped routes while the speaker was away: {held} -> {c}"
        );
        held = c;
        std::thread::sleep(Duration::from_millis(100));
    }
    let second = Speaker::start(ns.dir(), "second", &args);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let c = bird_count(&bird, n1);
        assert!(
            c >= held,
            "BIRD dropped routes during the refresh: {held} -> {c}"
        );
        if c == u64::from(n) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "BIRD holds {c} of {n}:\n{}",
            second.log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // After End-of-RIB no stale route is left over, and nothing more arrives.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(bird_count(&bird, n1), u64::from(n));
    println!(
        "SIGTERM during the initial table: BIRD had {at_term} of {n} routes when the \
         speaker had exited, kept {held} while it was away, and ended with exactly {n}"
    );
}
