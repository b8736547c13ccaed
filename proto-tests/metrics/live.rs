//! The endpoint of a running speaker (`podcidr-speaker run`, the built binary) with real
//! peers, through a session's whole life: BIRD (eBGP, originating one route) and FRR
//! (iBGP) as the switches, one speaker for node n1 in its own network namespace.
//!
//! Phases, each checked on `/metrics` (parsed strictly), `/status` and the `status`
//! command: both sessions establish and the node's pod CIDR is announced; BIRD drops
//! the session with a Cease (down, one flap, the NOTIFICATION counted, prefixes
//! cleared, `status` exits 1) and takes it back (a new establishment time, still one
//! flap); n1's drift is resolved (its series goes); FRR is removed from the config
//! (every series with its label goes, BIRD's stay); an invalid config edit is rejected
//! (reload failed, the last good config still in force). Finally every metric the
//! dashboard and the alerting rules use must exist in this live scrape, and SIGTERM
//! exits 0.
//!
//! A second scenario fills the families only a troubled cluster sets, in a live scrape:
//! drift, refused prefixes, a conflict between nodes (`--announce cluster`), routes a
//! session cannot carry, the file source's events and errors, an undecidable IPAM mode
//! and a NOTIFICATION the speaker sends.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ipnet::IpNet;
use podcidr_speaker::metrics::Status;
use serde_json::Value;

use crate::deploy::{check_expr, dashboard_exprs, group, monitoring, rules, SPEAKER_GROUP};
use crate::exposition::{parse, Scrape};
use crate::harness::bird::Bird;
use crate::harness::frr::Frr;
use crate::harness::{v4, v6, wait_for, Afi, Announce, BgpDaemon, Neighbor, PeerOpts};
use crate::isolated;
use crate::speaker::{net, node_ip, Inputs, NodeSpec, Speaker};

const BIRD_AS: u32 = 65000;
const NODE_AS: u32 = 65001;
/// Any one convergence: sessions come up in 1-5 s here, a file edit is seen in about
/// half a second, a dropped session is retried every second.
const WAIT: Duration = Duration::from_secs(30);
const IO_TIMEOUT: Duration = Duration::from_secs(5);

fn bgp_config(with_frr: bool) -> String {
    // A BFD profile BIRD does not answer (no `protocol bfd` there): the BFD series
    // exist, the session stays Down beside an Established BGP session, as the BFD alert
    // describes.
    let mut text = format!(
        "bfd-profiles:
  - name: unanswered
peers:
  - peer-address: {bird}
    peer-asn: {BIRD_AS}
    my-asn: {NODE_AS}
    hold-time: 9s
    bfd-profile: unanswered
",
        bird = v4(2)
    );
    if with_frr {
        text.push_str(&format!(
            "  - peer-address: {frr}
    peer-asn: {NODE_AS}
    my-asn: {NODE_AS}
    hold-time: 9s
",
            frr = v4(3)
        ));
    }
    text.push_str("speaker:\n  connect-retry-time: 1s\n");
    text
}

/// `GET path` on the endpoint: status code and body.
pub(crate) fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| e.to_string())?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no head in {answer:?}"))?;
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("status line of {head:?}"))?;
    Ok((code, body.to_owned()))
}

/// Polls `/metrics` until `check` passes on the parsed scrape; returns that scrape.
pub(crate) fn wait_scrape(
    endpoint: SocketAddr,
    speaker: &Speaker,
    what: &str,
    check: impl Fn(&Scrape) -> Result<(), String>,
) -> Scrape {
    wait_for(what, WAIT, || {
        let (code, body) = get(endpoint, "/metrics")?;
        if code != 200 {
            return Err(format!("HTTP {code}"));
        }
        let scrape = parse(&body).map_err(|e| format!("unparsable exposition: {e}"))?;
        check(&scrape)?;
        Ok(scrape)
    })
    .unwrap_or_else(|e| panic!("{e}\n--- speaker log ---\n{}", speaker.log_tail(30)))
}

pub(crate) fn status(endpoint: SocketAddr) -> Status {
    status_at(endpoint, "/status")
}

fn status_at(endpoint: SocketAddr, path: &str) -> Status {
    let (code, body) = get(endpoint, path).unwrap();
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// `podcidr-speaker status --addr ENDPOINT`: exit code and stdout.
pub(crate) fn status_command(endpoint: SocketAddr) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_podcidr-speaker"))
        .args(["status", "--addr", &endpoint.to_string()])
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

/// `name{labels}` must equal `want`.
pub(crate) fn is(s: &Scrape, name: &str, labels: &[(&str, &str)], want: f64) -> Result<(), String> {
    match s.value(name, labels) {
        Some(v) if v == want => Ok(()),
        other => Err(format!("{name}{labels:?} is {other:?}, want {want}")),
    }
}

fn at_least(s: &Scrape, name: &str, labels: &[(&str, &str)], min: f64) -> Result<(), String> {
    match s.value(name, labels) {
        Some(v) if v >= min => Ok(()),
        other => Err(format!(
            "{name}{labels:?} is {other:?}, want at least {min}"
        )),
    }
}

fn one_hot(s: &Scrape, peer: &str, state: &str) -> Result<(), String> {
    for st in [
        "idle",
        "connect",
        "active",
        "opensent",
        "openconfirm",
        "established",
    ] {
        is(
            s,
            "podcidr_speaker_session_state",
            &[("peer", peer), ("state", st)],
            f64::from(u8::from(st == state)),
        )?;
    }
    Ok(())
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn a_running_speakers_metrics_follow_a_session_life_with_real_peers() {
    let speaker_addr = node_ip(1);
    let Some(ns) = isolated!(
        &[v4(2), v4(3), speaker_addr, node_ip(2)],
        Duration::from_secs(240)
    ) else {
        return;
    };
    let received_route = net("198.51.100.0/24");
    let mut bird = Bird::start(
        ns.dir(),
        PeerOpts::new(v4(2), BIRD_AS)
            .neighbor(Neighbor::new(speaker_addr, NODE_AS))
            .route(Announce::new(received_route)),
    )
    .expect("start BIRD");
    let frr = Frr::start(
        ns.dir(),
        PeerOpts::new(v4(3), NODE_AS).neighbor(Neighbor::new(speaker_addr, NODE_AS)),
    )
    .expect("start FRR");

    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_config(&bgp_config(true));
    // n1's Node and CiliumNode disagree; n2's agree.
    let mut n1 = NodeSpec::new("n1", speaker_addr)
        .node_cidrs(&["10.244.1.0/24"])
        .cilium_cidrs(&["10.244.9.0/24"]);
    let n2 = NodeSpec::new("n2", node_ip(2))
        .node_cidrs(&["10.244.2.0/24"])
        .cilium_cidrs(&["10.244.2.0/24"]);
    inputs.write_node(&n1);
    inputs.write_node(&n2);
    let mut speaker = Speaker::start(
        ns.dir(),
        "n1",
        &Speaker::standalone_args(&inputs, "n1", speaker_addr),
    );
    let endpoint = SocketAddr::new(speaker_addr, 9477);
    let (bird_peer, frr_peer) = (format!("{}:179", v4(2)), format!("{}:179", v4(3)));
    let (bp, fp) = (bird_peer.as_str(), frr_peer.as_str());
    let started = unix_now();

    // 1. Both sessions establish; the pod CIDR is announced to both, BIRD's route is
    //    received; config, sources and view are in.
    let drifting = wait_scrape(
        endpoint,
        &speaker,
        "both sessions up, one prefix each",
        |s| {
            for p in [bp, fp] {
                is(s, "podcidr_speaker_session_up", &[("peer", p)], 1.0)?;
                is(
                    s,
                    "podcidr_speaker_announced_prefixes",
                    &[("peer", p), ("afi", "ipv4")],
                    1.0,
                )?;
                is(s, "podcidr_speaker_pending_prefixes", &[("peer", p)], 0.0)?;
            }
            is(
                s,
                "podcidr_speaker_received_prefixes",
                &[("peer", bp), ("afi", "ipv4")],
                1.0,
            )
        },
    );
    let s = &drifting;
    for p in [bp, fp] {
        one_hot(s, p, "established").unwrap();
        let established = s
            .value(
                "podcidr_speaker_session_established_timestamp_seconds",
                &[("peer", p)],
            )
            .unwrap();
        assert!(
            established >= started - 1.0 && established <= unix_now() + 1.0,
            "{p} established at {established}, test started at {started}"
        );
        is(
            s,
            "podcidr_speaker_session_flaps_total",
            &[("peer", p)],
            0.0,
        )
        .unwrap();
        for (dir, family) in [
            ("sent", "podcidr_speaker_messages_sent_total"),
            ("received", "podcidr_speaker_messages_received_total"),
        ] {
            is(s, family, &[("peer", p), ("type", "open")], 1.0)
                .unwrap_or_else(|e| panic!("{dir}: {e}"));
            at_least(s, family, &[("peer", p), ("type", "keepalive")], 1.0).unwrap();
        }
        at_least(
            s,
            "podcidr_speaker_messages_sent_total",
            &[("peer", p), ("type", "update")],
            1.0,
        )
        .unwrap();
    }
    is(s, "podcidr_speaker_config_loaded", &[], 1.0).unwrap();
    is(s, "podcidr_speaker_config_last_reload_successful", &[], 1.0).unwrap();
    assert_eq!(s.series("podcidr_speaker_config_info").len(), 1);
    let first_fingerprint =
        s.series("podcidr_speaker_config_info")[0].labels["fingerprint"].clone();
    for r in ["cluster-state-file", "bgp-config-file"] {
        is(
            s,
            "podcidr_speaker_source_watch_up",
            &[("resource", r)],
            1.0,
        )
        .unwrap();
        is(s, "podcidr_speaker_source_synced", &[("resource", r)], 1.0).unwrap();
    }
    is(s, "podcidr_speaker_view_nodes", &[], 2.0).unwrap();
    is(
        s,
        "podcidr_speaker_ipam_mode",
        &[("mode", "kubernetes")],
        1.0,
    )
    .unwrap();
    is(s, "podcidr_speaker_podcidr_drift", &[("node", "n1")], 1.0).unwrap();
    assert_eq!(
        s.series("podcidr_speaker_podcidr_drift").len(),
        1,
        "only n1 drifts"
    );
    is(s, "podcidr_speaker_podcidr_drift_nodes", &[], 1.0).unwrap();
    at_least(s, "podcidr_speaker_event_to_update_seconds_count", &[], 2.0).unwrap();
    assert_eq!(get(endpoint, "/readyz").unwrap().0, 200);
    assert_eq!(get(endpoint, "/healthz").unwrap().0, 200);

    let st = status(endpoint);
    assert_eq!(st.node.as_deref(), Some("n1"));
    assert!(st.ready && st.alive);
    assert_eq!(st.peers.len(), 2);
    for p in &st.peers {
        assert!(p.up, "{p:?}");
        assert_eq!(p.announced_total(), 1, "{p:?}");
    }
    let bird_status = st.peers.iter().find(|p| p.peer == bird_peer).unwrap();
    assert_eq!(bird_status.asn, Some(BIRD_AS));
    assert_eq!(bird_status.received_total(), 1);
    let view = st.view.as_ref().unwrap();
    assert_eq!(view.drift.len(), 1);
    assert_eq!(view.drift[0].node_cidrs, ["10.244.1.0/24"]);
    assert_eq!(view.drift[0].announced, "Node");
    let (code, out) = status_command(endpoint);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("on node n1: ready, alive"), "{out}");
    assert!(
        out.contains("n1: Node [10.244.1.0/24] vs CiliumNode [10.244.9.0/24]"),
        "{out}"
    );

    // The Adj-RIB-Out, live: what `/status?routes` and `status --routes` show for each
    // peer is what that peer received (prefix, next hop, path, attributes).
    let with_routes = status_at(endpoint, "/status?routes=10");
    for (peer, daemon, ibgp) in [
        (&bird_peer, &bird as &dyn BgpDaemon, false),
        (&frr_peer, &frr as &dyn BgpDaemon, true),
    ] {
        let report = with_routes.peers.iter().find(|p| &p.peer == peer).unwrap();
        let r = report.routes.as_ref().expect("routes asked for");
        assert!(r.answered && r.established, "{peer}: {r:?}");
        assert_eq!((r.held, r.pending, r.limit), (1, 0, 10), "{peer}: {r:?}");
        assert!(r.pending_routes.is_empty(), "{peer}: {r:?}");
        let got = daemon
            .wait_routes(speaker_addr, Afi::Ipv4, WAIT, &|got| got.len() == 1)
            .unwrap_or_else(|e| panic!("{peer}: {e}"));
        let (sent, received) = (&r.routes[0], &got[0]);
        assert_eq!(sent.prefix, received.prefix.to_string(), "{peer}");
        assert_eq!(sent.next_hop, Some(received.next_hop.to_string()), "{peer}");
        assert_eq!(sent.as_path, received.as_path, "{peer}");
        assert_eq!(sent.med, received.med, "{peer}");
        let communities: Vec<String> = received
            .communities
            .iter()
            .map(|(a, b)| format!("{a}:{b}"))
            .collect();
        assert_eq!(sent.communities, communities, "{peer}");
        if ibgp {
            assert_eq!(sent.local_pref, received.local_pref, "{peer}");
            assert!(sent.as_path.is_empty(), "iBGP: {sent:?}");
        } else {
            // BIRD shows its own default on eBGP; none is sent.
            assert_eq!(sent.local_pref, None, "{peer}");
            assert_eq!(sent.as_path, [NODE_AS], "{peer}");
        }
        let since = sent.since_unix.expect("a held route has a time") as f64;
        assert!(
            since >= started.floor() - 1.0 && since <= unix_now() + 1.0,
            "{peer}: since {since}, test started at {started}"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_podcidr-speaker"))
        .args(["status", "--routes", "--limit", "5"])
        .args(["--addr", &endpoint.to_string()])
        .output()
        .unwrap();
    let out = String::from_utf8(out.stdout).unwrap();
    for peer in [&bird_peer, &frr_peer] {
        assert!(
            out.contains(&format!("Routes advertised to {peer}: 1 held, 0 pending\n")),
            "{out}"
        );
    }
    assert!(
        out.lines().any(|l| l.starts_with("10.244.1.0/24")
            && l.contains(&speaker_addr.to_string())
            && l.contains(&format!("{NODE_AS} ?"))),
        "{out}"
    );

    // 2. BIRD ends the session with Cease / Administrative Shutdown and refuses it.
    bird.shutdown_neighbor(speaker_addr)
        .expect("disable the BIRD session");
    let dropped = wait_scrape(endpoint, &speaker, "BIRD's session down, one flap", |s| {
        is(s, "podcidr_speaker_session_up", &[("peer", bp)], 0.0)?;
        is(
            s,
            "podcidr_speaker_session_flaps_total",
            &[("peer", bp)],
            1.0,
        )?;
        is(
            s,
            "podcidr_speaker_notifications_total",
            &[
                ("peer", bp),
                ("direction", "received"),
                ("code", "6"),
                ("subcode", "2"),
            ],
            1.0,
        )
    });
    let s = &dropped;
    for (name, afi) in [
        ("podcidr_speaker_announced_prefixes", "ipv4"),
        ("podcidr_speaker_received_prefixes", "ipv4"),
    ] {
        is(s, name, &[("peer", bp), ("afi", afi)], 0.0).unwrap();
    }
    // The other session did not notice.
    is(s, "podcidr_speaker_session_up", &[("peer", fp)], 1.0).unwrap();
    is(
        s,
        "podcidr_speaker_session_flaps_total",
        &[("peer", fp)],
        0.0,
    )
    .unwrap();
    let down = status(endpoint);
    let bird_down = down.peers.iter().find(|p| p.peer == bird_peer).unwrap();
    assert!(!bird_down.up);
    let last_error = bird_down.last_error.as_deref().unwrap_or_default();
    assert!(
        last_error.contains("notification 6/2") || last_error.contains("connect"),
        "{last_error}"
    );
    let (code, out) = status_command(endpoint);
    assert_eq!(code, Some(1), "a peer is down: {out}");
    let bird_row = out
        .lines()
        .find(|l| l.starts_with(&bird_peer))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(!bird_row.contains("Established"), "{bird_row}");

    // BIRD takes the session back: a new establishment, still one flap.
    bird.enable_neighbor(speaker_addr)
        .expect("enable the BIRD session");
    let established_before = s
        .value(
            "podcidr_speaker_session_established_timestamp_seconds",
            &[("peer", bp)],
        )
        .unwrap();
    let s = wait_scrape(endpoint, &speaker, "BIRD's session back", |s| {
        is(s, "podcidr_speaker_session_up", &[("peer", bp)], 1.0)?;
        is(
            s,
            "podcidr_speaker_announced_prefixes",
            &[("peer", bp), ("afi", "ipv4")],
            1.0,
        )?;
        is(
            s,
            "podcidr_speaker_received_prefixes",
            &[("peer", bp), ("afi", "ipv4")],
            1.0,
        )
    });
    one_hot(&s, bp, "established").unwrap();
    is(
        &s,
        "podcidr_speaker_session_flaps_total",
        &[("peer", bp)],
        1.0,
    )
    .unwrap();
    let established_after = s
        .value(
            "podcidr_speaker_session_established_timestamp_seconds",
            &[("peer", bp)],
        )
        .unwrap();
    assert!(established_after > established_before);
    at_least(
        &s,
        "podcidr_speaker_messages_received_total",
        &[("peer", bp), ("type", "open")],
        2.0,
    )
    .unwrap();
    assert_eq!(status_command(endpoint).0, Some(0));

    // 3. n1's CiliumNode fixed: its drift series goes.
    n1 = n1.cilium_cidrs(&["10.244.1.0/24"]);
    inputs.write_node(&n1);
    wait_scrape(endpoint, &speaker, "n1's drift resolved", |s| {
        is(s, "podcidr_speaker_podcidr_drift_nodes", &[], 0.0)?;
        match s.series("podcidr_speaker_podcidr_drift").len() {
            0 => Ok(()),
            n => Err(format!("{n} drift series left")),
        }
    });

    // 4. FRR removed from the config: every series with its label goes, BIRD's stay.
    inputs.write_config(&bgp_config(false));
    let s = wait_scrape(endpoint, &speaker, "FRR's series removed", |s| {
        match s.with_label("peer", fp).len() {
            0 => {}
            n => return Err(format!("{n} series of {fp} left")),
        }
        is(s, "podcidr_speaker_session_up", &[("peer", bp)], 1.0)
    });
    assert!(s.with_label("peer", bp).len() >= 10);
    assert_eq!(s.series("podcidr_speaker_config_info").len(), 1);
    assert_ne!(
        s.series("podcidr_speaker_config_info")[0].labels["fingerprint"],
        first_fingerprint
    );
    assert!(status(endpoint).peers.iter().all(|p| p.peer == bird_peer));
    wait_for("FRR to see the session closed", WAIT, || {
        match frr.session_state(speaker_addr) {
            Ok(s) if !s.established() => Ok(()),
            Ok(s) => Err(format!("{s:?}")),
            Err(e) => Err(e.to_string()),
        }
    })
    .unwrap();

    // 5. An invalid edit: rejected, the last good config stays in force.
    inputs.write_config("peers:\n- {peer-address: 100.64.0.2, peer-asn: 0, my-asn: 65001}\n");
    wait_scrape(endpoint, &speaker, "the reload failed", |s| {
        is(s, "podcidr_speaker_config_last_reload_successful", &[], 0.0)?;
        is(s, "podcidr_speaker_config_loaded", &[], 1.0)?;
        is(
            s,
            "podcidr_speaker_config_reloads_total",
            &[("result", "failure")],
            1.0,
        )?;
        is(s, "podcidr_speaker_session_up", &[("peer", bp)], 1.0)
    });
    let rejected = status(endpoint).config.rejected;
    assert!(
        rejected.iter().any(|e| e.contains("peer-asn")),
        "{rejected:?}"
    );

    // 6. Every metric and label the dashboard and the alerting rules query exists in
    //    a live scrape. Some series exist only while their fact holds (drift, a
    //    NOTIFICATION seen): check against the scrapes of every phase together.
    let (_, body) = get(endpoint, "/metrics").unwrap();
    let mut live = parse(&body).unwrap();
    for phase in [&drifting, &dropped] {
        for (name, kind) in &phase.types {
            live.types
                .entry(name.clone())
                .or_insert_with(|| kind.clone());
        }
        live.samples.extend(phase.samples.iter().cloned());
    }
    let dashboard: Value = serde_json::from_str(&monitoring("grafana-dashboard.json")).unwrap();
    let mut problems = Vec::new();
    for (expr, _) in dashboard_exprs(&dashboard) {
        problems.extend(check_expr(&live, &expr, "dashboard"));
    }
    let operator: serde_yaml::Value =
        serde_yaml::from_str(&monitoring("prometheusrule.yaml")).unwrap();
    for (name, expr, ..) in rules(&group(&operator["spec"]["groups"], SPEAKER_GROUP)) {
        problems.extend(check_expr(&live, &expr, &name));
    }
    assert!(
        problems.is_empty(),
        "against the live scrape: {problems:#?}"
    );

    let exit = speaker.terminate();
    assert!(
        exit.success(),
        "exit {exit} on SIGTERM:\n{}",
        speaker.log_tail(30)
    );
}

/// `node_ip(5)` and an IPv6 InternalIP, with a pod CIDR of each family: the IPv6 one
/// has a next hop but BIRD negotiates IPv4 only, so the session refuses it.
fn dual_stack_node(name: &str, v4_cidr: &str, v6_cidr: &str, v6_ip: &str) -> String {
    format!(
        "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: {name}
    labels:
      kubernetes.io/hostname: {name}
  spec:
    podCIDRs: [{v4_cidr}, {v6_cidr}]
  status:
    addresses:
    - type: InternalIP
      address: {ip}
    - type: InternalIP
      address: {v6_ip}
- apiVersion: cilium.io/v2
  kind: CiliumNode
  metadata:
    name: {name}
  spec:
    ipam:
      podCIDRs: [{v4_cidr}, {v6_cidr}]
",
        ip = node_ip(5)
    )
}

/// Writes `file` under the cluster-state directory the way `kubectl ... > tmp && mv`
/// does, so the source never reads half a file.
fn put_cluster_file(inputs: &Inputs, file: &str, text: &str) {
    let tmp = inputs.cluster_path().join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, inputs.cluster_path().join(file)).unwrap();
}

fn cilium_config(ipam: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cilium-config\n  namespace: kube-system\ndata:\n  ipam: {ipam}\n  cluster-pool-ipv4-cidr: 10.244.0.0/16\n"
    )
}

fn one_peer_config(hold_time: &str) -> String {
    format!(
        "peers:
  - peer-address: {bird}
    peer-asn: {BIRD_AS}
    my-asn: {NODE_AS}
    hold-time: {hold_time}
speaker:
  connect-retry-time: 1s
",
        bird = v4(2)
    )
}

/// The families that only a troubled cluster fills, from a live scrape of the built
/// speaker (`--announce cluster`, cluster-pool IPAM) with BIRD as the switch: drift
/// (n2's Node and CiliumNode disagree), refused prefixes (n3 lists one outside the
/// pool and a default route), a conflict (n4 claims n3's prefix: n3, whose name sorts
/// first, owns it), routes the session cannot carry (n5's IPv6 pod CIDR, BIRD
/// negotiates IPv4 only), the file source's events and errors (an unparsable file),
/// an undecidable IPAM mode, and a NOTIFICATION the speaker sends (a hold-time change
/// resets the session with Cease / Administrative Shutdown).
#[test]
fn a_live_scrape_shows_drift_refusals_conflicts_source_errors_and_a_sent_notification() {
    const FILE: &str = "cluster-state-file";
    let speaker_addr = node_ip(1);
    let mut addrs = vec![v4(2)];
    addrs.extend((1..=5).map(node_ip));
    let Some(ns) = isolated!(&addrs, Duration::from_secs(240)) else {
        return;
    };
    let bird = Bird::start(
        ns.dir(),
        PeerOpts::new(v4(2), BIRD_AS).neighbor(Neighbor::new(speaker_addr, NODE_AS)),
    )
    .expect("start BIRD");

    let inputs = Inputs::new(ns.dir(), "cluster-pool", "10.244.0.0/16");
    inputs.write_config(&one_peer_config("9s"));
    let same = |name: &str, n: u8, cidrs: &[&str]| {
        NodeSpec::new(name, node_ip(n))
            .node_cidrs(cidrs)
            .cilium_cidrs(cidrs)
    };
    inputs.write_node(&same("n1", 1, &["10.244.1.0/24"]));
    inputs.write_node(
        &NodeSpec::new("n2", node_ip(2))
            .node_cidrs(&["10.244.20.0/24"])
            .cilium_cidrs(&["10.244.2.0/24"]),
    );
    inputs.write_node(&same(
        "n3",
        3,
        &["10.244.3.0/24", "10.99.0.0/24", "0.0.0.0/0"],
    ));
    inputs.write_node(&same("n4", 4, &["10.244.3.0/24"]));
    put_cluster_file(
        &inputs,
        "n5.yaml",
        &dual_stack_node("n5", "10.244.5.0/24", "fd00:10:244:5::/64", "fd00::5"),
    );
    let started = unix_now();
    let mut args = Speaker::standalone_args(&inputs, "n1", speaker_addr);
    args.push("--announce=cluster".into());
    let mut speaker = Speaker::start(ns.dir(), "n1", &args);
    let endpoint = SocketAddr::new(speaker_addr, 9477);
    let bird_peer = format!("{}:179", v4(2));
    let bp = bird_peer.as_str();

    // 1. Four IPv4 routes at the switch, one per owning node; the rest is in the scrape.
    let s = wait_scrape(endpoint, &speaker, "the session up, four prefixes", |s| {
        is(s, "podcidr_speaker_session_up", &[("peer", bp)], 1.0)?;
        is(
            s,
            "podcidr_speaker_announced_prefixes",
            &[("peer", bp), ("afi", "ipv4")],
            4.0,
        )?;
        at_least(
            s,
            "podcidr_speaker_routes_not_announced_total",
            &[
                ("peer", bp),
                ("afi", "ipv6"),
                ("reason", "family_not_negotiated"),
            ],
            1.0,
        )
    });
    let want: Vec<(IpNet, IpAddr)> = [
        ("10.244.1.0/24", 1),
        ("10.244.2.0/24", 2),
        ("10.244.3.0/24", 3),
        ("10.244.5.0/24", 5),
    ]
    .into_iter()
    .map(|(p, n)| (net(p), node_ip(n)))
    .collect();
    bird.wait_routes(speaker_addr, Afi::Ipv4, WAIT, &|got| {
        let mut got: Vec<(IpNet, IpAddr)> = got.iter().map(|r| (r.prefix, r.next_hop)).collect();
        got.sort();
        got == want
    })
    .unwrap_or_else(|e| panic!("BIRD never held {want:?}: {e}"));
    is(&s, "podcidr_speaker_podcidr_drift", &[("node", "n2")], 1.0).unwrap();
    assert_eq!(s.series("podcidr_speaker_podcidr_drift").len(), 1);
    is(&s, "podcidr_speaker_podcidr_drift_nodes", &[], 1.0).unwrap();
    // n3 and n4 overlap (the same prefix); nobody else does.
    is(&s, "podcidr_speaker_podcidr_conflicts", &[], 2.0).unwrap();
    // n3's 10.99.0.0/24 (outside the pool) and 0.0.0.0/0 (a default route).
    is(&s, "podcidr_speaker_refused_prefixes", &[], 2.0).unwrap();
    is(&s, "podcidr_speaker_view_nodes", &[], 5.0).unwrap();
    // n1, n2 (its CiliumNode's), n3 (what is left), n4, n5 (both families).
    is(&s, "podcidr_speaker_view_prefixes", &[], 6.0).unwrap();
    is(
        &s,
        "podcidr_speaker_ipam_mode",
        &[("mode", "cluster-pool")],
        1.0,
    )
    .unwrap();
    is(&s, "podcidr_speaker_ipam_error", &[], 0.0).unwrap();
    let first_events = s
        .value("podcidr_speaker_source_events_total", &[("resource", FILE)])
        .unwrap();
    assert!(first_events >= 1.0, "{first_events}");
    is(
        &s,
        "podcidr_speaker_source_errors_total",
        &[("resource", FILE)],
        0.0,
    )
    .unwrap();
    let first_event_at = s
        .value(
            "podcidr_speaker_source_last_event_timestamp_seconds",
            &[("resource", FILE)],
        )
        .unwrap();
    assert!(
        first_event_at >= started - 1.0 && first_event_at <= unix_now() + 1.0,
        "last event at {first_event_at}, test started at {started}"
    );
    let sent: Vec<_> = s
        .series("podcidr_speaker_notifications_total")
        .into_iter()
        .filter(|x| x.labels.get("direction").map(String::as_str) == Some("sent"))
        .filter(|x| x.value > 0.0)
        .collect();
    assert!(
        sent.is_empty(),
        "NOTIFICATIONs sent before any reset: {sent:?}"
    );
    let view = status(endpoint).view.unwrap();
    assert_eq!(view.refused.len(), 2, "{:?}", view.refused);
    assert!(
        view.refused.iter().all(|r| r.node == "n3"),
        "{:?}",
        view.refused
    );
    assert!(
        view.overlaps
            .iter()
            .any(|o| o.prefix == "10.244.3.0/24" && o.other_prefix == "10.244.3.0/24"),
        "{:?}",
        view.overlaps
    );

    // 2. An unparsable file: an error counted, the source down, the routes kept; fixed:
    //    up again, with a later event.
    put_cluster_file(&inputs, "broken.yaml", "items: [\n  - {kind: Node\n");
    wait_scrape(endpoint, &speaker, "the broken file counted", |s| {
        at_least(
            s,
            "podcidr_speaker_source_errors_total",
            &[("resource", FILE)],
            1.0,
        )?;
        is(
            s,
            "podcidr_speaker_source_watch_up",
            &[("resource", FILE)],
            0.0,
        )?;
        is(
            s,
            "podcidr_speaker_announced_prefixes",
            &[("peer", bp), ("afi", "ipv4")],
            4.0,
        )
    });
    std::fs::remove_file(inputs.cluster_path().join("broken.yaml")).unwrap();
    let s = wait_scrape(endpoint, &speaker, "the source up again", |s| {
        is(
            s,
            "podcidr_speaker_source_watch_up",
            &[("resource", FILE)],
            1.0,
        )
    });
    let events = s
        .value("podcidr_speaker_source_events_total", &[("resource", FILE)])
        .unwrap();
    assert!(
        events > first_events,
        "{events} events, {first_events} before"
    );
    let event_at = s
        .value(
            "podcidr_speaker_source_last_event_timestamp_seconds",
            &[("resource", FILE)],
        )
        .unwrap();
    assert!(event_at > first_event_at, "{event_at} <= {first_event_at}");

    // 3. An IPAM mode the speaker cannot read: the error gauge, no mode, and the last
    //    plan stays announced; back to cluster-pool, the error clears.
    put_cluster_file(&inputs, "cilium-config.yaml", &cilium_config("eni"));
    wait_scrape(endpoint, &speaker, "the IPAM error", |s| {
        is(s, "podcidr_speaker_ipam_error", &[], 1.0)?;
        is(
            s,
            "podcidr_speaker_ipam_mode",
            &[("mode", "cluster-pool")],
            0.0,
        )?;
        is(
            s,
            "podcidr_speaker_announced_prefixes",
            &[("peer", bp), ("afi", "ipv4")],
            4.0,
        )
    });
    put_cluster_file(
        &inputs,
        "cilium-config.yaml",
        &cilium_config("cluster-pool"),
    );
    wait_scrape(endpoint, &speaker, "the IPAM error cleared", |s| {
        is(s, "podcidr_speaker_ipam_error", &[], 0.0)?;
        is(
            s,
            "podcidr_speaker_ipam_mode",
            &[("mode", "cluster-pool")],
            1.0,
        )
    });

    // 4. A new hold time resets the session: the speaker sends Cease / Administrative
    //    Shutdown (6/2), counted as sent, and the session comes back.
    inputs.write_config(&one_peer_config("12s"));
    wait_scrape(
        endpoint,
        &speaker,
        "one NOTIFICATION sent, the session back",
        |s| {
            is(
                s,
                "podcidr_speaker_notifications_total",
                &[
                    ("peer", bp),
                    ("direction", "sent"),
                    ("code", "6"),
                    ("subcode", "2"),
                ],
                1.0,
            )?;
            is(
                s,
                "podcidr_speaker_session_flaps_total",
                &[("peer", bp)],
                1.0,
            )?;
            is(s, "podcidr_speaker_session_up", &[("peer", bp)], 1.0)?;
            is(
                s,
                "podcidr_speaker_announced_prefixes",
                &[("peer", bp), ("afi", "ipv4")],
                4.0,
            )
        },
    );
    let bird_log = bird.log_tail(2000);
    assert!(
        bird_log.contains("Received: Administrative shutdown"),
        "BIRD did not log the NOTIFICATION:\n{bird_log}"
    );

    let exit = speaker.terminate();
    assert!(
        exit.success(),
        "exit {exit} on SIGTERM:\n{}",
        speaker.log_tail(30)
    );
}

/// An IPv6-only node (no IPv4 InternalIP, no `--router-id`, an IPv6 source address):
/// its session comes up with the BGP Identifier derived from its name, which is what
/// BIRD shows as the neighbor's ID, and its IPv6 pod CIDR is announced.
#[test]
fn an_ipv6_only_node_peers_with_the_identifier_derived_from_its_name() {
    let (speaker_addr, bird_addr) = (v6(1), v6(2));
    let Some(ns) = isolated!(&[speaker_addr, bird_addr], Duration::from_secs(120)) else {
        return;
    };
    let bird = Bird::start(
        ns.dir(),
        PeerOpts::new(v4(2), BIRD_AS)
            .local_addr6(bird_addr)
            .neighbor(Neighbor::new(speaker_addr, NODE_AS).ipv6_only()),
    )
    .expect("start BIRD");
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_config(&format!(
        "peers:\n  - peer-address: {bird_addr}\n    peer-asn: {BIRD_AS}\n    my-asn: {NODE_AS}\nspeaker:\n  connect-retry-time: 1s\n"
    ));
    let cidr = "fd00:10:244:6::/64";
    inputs.write_node(
        &NodeSpec::new("worker-v6", speaker_addr)
            .node_cidrs(&[cidr])
            .cilium_cidrs(&[cidr]),
    );
    let args: Vec<String> = vec![
        "--node=worker-v6".into(),
        format!(
            "--graceful-shutdown-time={}",
            crate::speaker::GRACEFUL_SHUTDOWN
        ),
        format!("--bgp-config={}", inputs.config_path().display()),
        format!("--cluster-state={}", inputs.cluster_path().display()),
        format!("--source-address={speaker_addr}"),
        format!("--metrics-addr={}", SocketAddr::new(speaker_addr, 9477)),
    ];
    let mut speaker = Speaker::start(ns.dir(), "worker-v6", &args);
    let want = podcidr_speaker::routes::router_id::derived("worker-v6");
    bird.wait_routes(speaker_addr, Afi::Ipv6, WAIT, &|got| {
        got.iter()
            .any(|r| r.prefix == net(cidr) && r.next_hop == speaker_addr)
    })
    .unwrap_or_else(|e| panic!("{e}\n--- speaker log ---\n{}", speaker.log_tail(30)));
    let shown = bird
        .control(&format!(
            "show protocols all {}",
            crate::harness::bird::proto_name(speaker_addr)
        ))
        .unwrap();
    let neighbor_id = shown
        .lines()
        .find_map(|l| l.trim().strip_prefix("Neighbor ID:"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no neighbor ID in:\n{shown}"));
    assert_eq!(neighbor_id, want.to_string(), "{shown}");

    let exit = speaker.terminate();
    assert!(exit.success(), "exit {exit}:\n{}", speaker.log_tail(30));
}
