//! Monitoring proven with the real thing: Debian's `prometheus` and `promtool`
//! (installed by scripts/install-peers).
//!
//! - The alerting rules pass `promtool check rules`, and `promtool test rules` runs the
//!   unit tests beside them, which must hold, for every alert of the rules file, a case
//!   where it fires and one where it stays silent.
//! - A real Prometheus, in the test's own network namespace, scrapes a live speaker
//!   (the built binary, BIRD as its peer) every second; through Prometheus's HTTP API
//!   (`/api/v1/query`, `/api/v1/metadata`) the session, prefix and event-latency series
//!   have their types and follow the peer going down and coming back. `promtool check
//!   metrics` finds nothing to say about the live `/metrics`.
//!
//! Without promtool or prometheus these tests fail, unless `PODCIDR_SKIP_INTEROP=1`.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::deploy::{monitoring, rules};
use crate::harness::bird::Bird;
use crate::harness::process::{write_file, Process};
use crate::harness::{v4, wait_for, BgpDaemon, Neighbor, PeerOpts};
use crate::isolated;
use crate::speaker::{node_ip, Inputs, NodeSpec, Speaker};

const BIRD_AS: u32 = 65000;
const NODE_AS: u32 = 65001;
const WAIT: Duration = Duration::from_secs(20);
const IO_TIMEOUT: Duration = Duration::from_secs(5);
const RULES: &str = "rules/podcidr-speaker.rules.yaml";
const RULE_TESTS: &str = "rules/podcidr-speaker.rules.test.yaml";

/// Whether `tool` runs; `false` (the test returns) only when skipping was asked for.
fn tool_present(tool: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return true;
    }
    if std::env::var_os("PODCIDR_SKIP_INTEROP").is_some_and(|v| v == "1") {
        println!("skipping: no {tool} and PODCIDR_SKIP_INTEROP=1");
        return false;
    }
    panic!("{tool} is not installed: run scripts/install-peers (Debian's prometheus package)");
}

fn promtool(args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(args)
        .current_dir(crate::crate_root().join("deploy/monitoring"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn promtool_checks_the_rules_and_their_unit_tests_cover_every_alert() {
    if !tool_present("promtool") {
        return;
    }
    let (ok, out) = promtool(&["check", "rules", RULES], None);
    assert!(ok, "promtool check rules:\n{out}");
    let (ok, out) = promtool(&["test", "rules", RULE_TESTS], None);
    assert!(ok, "promtool test rules:\n{out}");
    assert!(out.contains("SUCCESS"), "{out}");

    // One firing and one silent case per alert of the rules file.
    let plain: serde_yaml::Value = serde_yaml::from_str(&monitoring(RULES)).unwrap();
    let tests: serde_yaml::Value = serde_yaml::from_str(&monitoring(RULE_TESTS)).unwrap();
    let cases: Vec<(String, bool)> = tests["tests"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|t| {
            t["alert_rule_test"]
                .as_sequence()
                .cloned()
                .unwrap_or_default()
        })
        .map(|c| {
            let name = c["alertname"].as_str().unwrap().to_owned();
            let fires = c["exp_alerts"].as_sequence().is_some_and(|a| !a.is_empty());
            (name, fires)
        })
        .collect();
    let alerts = rules(&plain["groups"]);
    assert!(alerts.len() >= 9, "{} alerts", alerts.len());
    for (name, ..) in &alerts {
        for fires in [true, false] {
            assert!(
                cases.contains(&(name.clone(), fires)),
                "{RULE_TESTS}: no case where {name} {}",
                if fires { "fires" } else { "stays silent" }
            );
        }
    }
}

/// `GET path` on `addr`: status code and body.
fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| e.to_string())?;
    let (code, body) = podcidr_speaker::http::parse_response(&answer)?;
    Ok((code, String::from_utf8_lossy(&body).into_owned()))
}

/// RFC 3986 percent-encoding of a query parameter value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A running Prometheus and its HTTP API.
struct Prometheus {
    _process: Process,
    api: SocketAddr,
}

impl Prometheus {
    fn start(dir: &Path, listen: IpAddr, target: SocketAddr) -> Prometheus {
        let config = dir.join("prometheus.yml");
        write_file(
            &config,
            &format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: podcidr-speaker\n    static_configs:\n\
                 \x20     - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let api = SocketAddr::new(listen, 9090);
        let mut cmd = Command::new("prometheus");
        cmd.arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={api}"))
            .arg("--log.level=warn");
        let process =
            Process::spawn("prometheus", cmd, &dir.join("prometheus.log")).expect("start it");
        let p = Prometheus {
            _process: process,
            api,
        };
        wait_for("prometheus to be ready", WAIT, || {
            match get(api, "/-/ready")? {
                (200, _) => Ok(()),
                (code, body) => Err(format!("HTTP {code}: {body}")),
            }
        })
        .unwrap();
        p
    }

    /// `/api/v1/query`: the instant vector's samples as (labels, value).
    fn query(&self, expr: &str) -> Result<Vec<(Value, f64)>, String> {
        let (code, body) = get(self.api, &format!("/api/v1/query?query={}", encode(expr)))?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        if code != 200 || v["status"] != "success" {
            return Err(format!("{expr}: HTTP {code}: {body}"));
        }
        Ok(v["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|s| {
                let value = s["value"][1].as_str()?.parse().ok()?;
                Some((s["metric"].clone(), value))
            })
            .collect())
    }

    /// The single value of `expr`, which must match exactly one series.
    fn value(&self, expr: &str) -> Result<f64, String> {
        match self.query(expr)?.as_slice() {
            [(_, v)] => Ok(*v),
            other => Err(format!("{expr}: {} series: {other:?}", other.len())),
        }
    }

    /// Waits until `expr` has exactly one series, of value `want`.
    fn wait_value(&self, expr: &str, want: f64) {
        wait_for(&format!("{expr} == {want}"), WAIT, || {
            match self.value(expr)? {
                v if v == want => Ok(()),
                v => Err(format!("{expr} is {v}")),
            }
        })
        .unwrap();
    }

    /// The type `/api/v1/metadata` gives a metric family.
    fn metric_type(&self, family: &str) -> Result<String, String> {
        let (_, body) = get(
            self.api,
            &format!("/api/v1/metadata?metric={}", encode(family)),
        )?;
        let v: Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        v["data"][family][0]["type"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("no metadata for {family}: {body}"))
    }
}

#[test]
fn a_real_prometheus_follows_a_live_speaker_through_a_peer_outage() {
    if !tool_present("prometheus") || !tool_present("promtool") {
        return;
    }
    let speaker_addr = node_ip(1);
    let Some(ns) = isolated!(&[v4(2), speaker_addr], Duration::from_secs(120)) else {
        return;
    };
    let mut bird = Bird::start(
        ns.dir(),
        PeerOpts::new(v4(2), BIRD_AS).neighbor(Neighbor::new(speaker_addr, NODE_AS)),
    )
    .expect("start BIRD");
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_config(&format!(
        "peers:\n  - peer-address: {}\n    peer-asn: {BIRD_AS}\n    my-asn: {NODE_AS}\n    hold-time: 9s\nspeaker:\n  connect-retry-time: 1s\n",
        v4(2)
    ));
    inputs.write_node(
        &NodeSpec::new("n1", speaker_addr)
            .node_cidrs(&["10.244.1.0/24"])
            .cilium_cidrs(&["10.244.1.0/24"]),
    );
    let mut speaker = Speaker::start(
        ns.dir(),
        "n1",
        &Speaker::standalone_args(&inputs, "n1", speaker_addr),
    );
    let endpoint = SocketAddr::new(speaker_addr, 9477);
    let prom = Prometheus::start(ns.dir(), speaker_addr, endpoint);
    let peer = format!("{}:179", v4(2));
    let sel = format!("peer=\"{peer}\"");

    // Up: the series are in Prometheus, with the types the registry declares.
    prom.wait_value("up{job=\"podcidr-speaker\"}", 1.0);
    prom.wait_value(&format!("podcidr_speaker_session_up{{{sel}}}"), 1.0);
    prom.wait_value(
        &format!("podcidr_speaker_session_state{{{sel},state=\"established\"}}"),
        1.0,
    );
    prom.wait_value(
        &format!("podcidr_speaker_announced_prefixes{{{sel},afi=\"ipv4\"}}"),
        1.0,
    );
    prom.wait_value(&format!("podcidr_speaker_pending_prefixes{{{sel}}}"), 0.0);
    wait_for("the event latency observed", WAIT, || {
        match prom.value("podcidr_speaker_event_to_update_seconds_count")? {
            n if n >= 1.0 => Ok(()),
            n => Err(format!("{n} observations")),
        }
    })
    .unwrap();
    let quantile = prom
        .value("histogram_quantile(0.5, podcidr_speaker_event_to_update_seconds_bucket)")
        .unwrap();
    assert!(
        quantile.is_finite() && quantile > 0.0 && quantile < 30.0,
        "median event-to-update latency {quantile}"
    );
    for (family, kind) in [
        ("podcidr_speaker_session_up", "gauge"),
        ("podcidr_speaker_session_state", "gauge"),
        ("podcidr_speaker_session_flaps_total", "counter"),
        ("podcidr_speaker_announced_prefixes", "gauge"),
        ("podcidr_speaker_pending_prefixes", "gauge"),
        ("podcidr_speaker_messages_sent_total", "counter"),
        ("podcidr_speaker_event_to_update_seconds", "histogram"),
    ] {
        let got = wait_for(&format!("metadata of {family}"), WAIT, || {
            prom.metric_type(family)
        })
        .unwrap();
        assert_eq!(got, kind, "{family}");
    }
    prom.wait_value(
        &format!("podcidr_speaker_session_flaps_total{{{sel}}}"),
        0.0,
    );

    // Down: BIRD shuts the session; Prometheus sees it drop, the prefixes go, one flap.
    bird.shutdown_neighbor(speaker_addr)
        .expect("disable the session");
    prom.wait_value(&format!("podcidr_speaker_session_up{{{sel}}}"), 0.0);
    prom.wait_value(
        &format!("podcidr_speaker_announced_prefixes{{{sel},afi=\"ipv4\"}}"),
        0.0,
    );
    prom.wait_value(
        &format!("podcidr_speaker_session_flaps_total{{{sel}}}"),
        1.0,
    );
    prom.wait_value(
        &format!("podcidr_speaker_session_state{{{sel},state=\"established\"}}"),
        0.0,
    );

    // Back: up again, the prefix announced again, and the stored history holds both
    // changes.
    bird.enable_neighbor(speaker_addr)
        .expect("enable the session");
    prom.wait_value(&format!("podcidr_speaker_session_up{{{sel}}}"), 1.0);
    prom.wait_value(
        &format!("podcidr_speaker_announced_prefixes{{{sel},afi=\"ipv4\"}}"),
        1.0,
    );
    let changes = prom
        .value(&format!("changes(podcidr_speaker_session_up{{{sel}}}[5m])"))
        .unwrap();
    assert!(changes >= 2.0, "{changes} changes of session_up");
    assert_eq!(
        prom.value(&format!(
            "min_over_time(podcidr_speaker_session_up{{{sel}}}[5m])"
        ))
        .unwrap(),
        0.0
    );
    assert_eq!(
        prom.value(&format!("podcidr_speaker_session_flaps_total{{{sel}}}"))
            .unwrap(),
        1.0
    );
    let observations = prom
        .value("podcidr_speaker_event_to_update_seconds_count")
        .unwrap();
    assert!(
        observations >= 2.0,
        "{observations}: the re-announcement counts"
    );

    // promtool's linter has nothing to say about the live exposition.
    let (code, body) = get(endpoint, "/metrics").unwrap();
    assert_eq!(code, 200);
    let (ok, out) = promtool(&["check", "metrics"], Some(&body));
    assert!(
        ok && out.trim().is_empty(),
        "promtool check metrics:\n{out}"
    );

    let exit = speaker.terminate();
    assert!(exit.success(), "exit {exit}:\n{}", speaker.log_tail(30));
}
