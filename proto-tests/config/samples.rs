//! The sample files in config/ and the `podcidr-speaker check` command run as a
//! process: output and exit status.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ipnet::IpNet;
use podcidr_speaker::config::{parse, Protocol};

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(sample(name)).unwrap()
}

/// Runs the binary with a time limit; returns (exit code, stdout).
fn run_check(args: &[&Path], stdin: Option<&str>) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_podcidr-speaker"))
        .arg("check")
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn podcidr-speaker");
    if let Some(text) = stdin {
        use std::io::Write;
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).unwrap();
    }
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("check did not finish in 30s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    stdout.read_to_string(&mut out).unwrap();
    (status.code().unwrap_or(-1), out)
}

#[test]
fn cilium_sample_is_the_deployment_layout() {
    let c = parse(&read("cilium-bgp-config.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.peers.len(), 4);
    let (ebgp, ibgp): (Vec<_>, Vec<_>) = c.peers.iter().partition(|p| !p.is_ibgp());
    assert_eq!(ebgp.len(), 2);
    assert_eq!(ibgp.len(), 2);
    for p in &ebgp {
        assert!(p.node_selectors.is_empty(), "eBGP peers are for all nodes");
        assert_eq!((p.peer_asn, p.my_asn), (65000, 65083));
    }
    for p in &ibgp {
        assert_eq!(p.node_selectors.len(), 1);
        assert_eq!(
            p.node_selectors[0].to_string(),
            "kubernetes/route=bgp-peer-83"
        );
    }
    assert_eq!(c.pools.len(), 1);
    assert_eq!(c.pools[0].protocol, Protocol::Bgp);
    assert_eq!(
        c.pools[0].cidrs,
        vec!["10.5.112.0/21".parse::<IpNet>().unwrap()]
    );
}

#[test]
fn metallb_sample_uses_every_metallb_key() {
    let text = read("metallb-full.yaml");
    let c = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    for key in [
        "peer-address",
        "peer-asn",
        "my-asn",
        "peer-port",
        "hold-time",
        "keepalive-time",
        "router-id",
        "source-address",
        "password",
        "ebgp-multihop",
        "bfd-profile",
        "node-selectors",
        "match-labels",
        "match-expressions",
        "bgp-communities",
        "bfd-profiles",
        "receive-interval",
        "transmit-interval",
        "detect-multiplier",
        "echo-interval",
        "echo-mode",
        "passive-mode",
        "minimum-ttl",
        "address-pools",
        "protocol",
        "addresses",
        "avoid-buggy-ips",
        "auto-assign",
        "bgp-advertisements",
        "aggregation-length",
        "aggregation-length-v6",
        "localpref",
        "communities",
    ] {
        assert!(
            text.contains(&format!("{key}:")),
            "metallb-full.yaml lacks {key}"
        );
    }
    for op in ["In", "NotIn", "Exists", "DoesNotExist"] {
        assert!(
            text.contains(&format!("operator: {op}\n")),
            "metallb-full.yaml lacks {op}"
        );
    }
    assert_eq!(c.peers.len(), 2);
    assert_eq!(c.bfd_profiles.len(), 2);
    assert_eq!(c.pools.len(), 3);
    // Nothing of the speaker's own is needed for a MetalLB file.
    assert!(!text.contains("speaker:") && !text.contains("pod-cidr"));
}

#[test]
fn extensions_sample_uses_every_extension_key() {
    let text = read("speaker-extensions.yaml");
    parse(&text).unwrap_or_else(|e| panic!("{e}"));
    for key in [
        "graceful-restart",
        "graceful-restart-time",
        "connect-retry-time",
        "origin",
        "pod-cidr-communities",
        "pod-cidr-local-pref",
        "max-prefix",
        "passive",
        "ttl-security",
        "password-secret",
        "next-hop-v4",
        "next-hop-v6",
        "pod-cidr-pools",
    ] {
        assert!(
            text.contains(&format!("{key}:")),
            "speaker-extensions.yaml lacks {key}"
        );
    }
}

#[test]
fn check_accepts_the_samples() {
    let files = [
        "cilium-bgp-config.yaml",
        "metallb-full.yaml",
        "speaker-extensions.yaml",
    ]
    .map(sample);
    let args: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let (code, out) = run_check(&args, None);
    assert_eq!(code, 0, "{out}");
    let first = format!("{}: ok: 4 peers, 1 address pool\n", files[0].display());
    assert!(out.starts_with(&first), "{out}");
    assert!(out.contains("  peers[0] 10.5.0.1:179 eBGP peer-asn 65000 my-asn 65083, hold 90s, keepalive 30s, graceful-restart 120s, nodes: all\n"), "{out}");
    assert!(out.contains("  peers[2] 10.5.83.251:179 iBGP peer-asn 65083 my-asn 65083, hold 90s, keepalive 30s, graceful-restart 120s, nodes: kubernetes/route=bgp-peer-83\n"), "{out}");
    assert!(
        out.contains(&format!(
            "{}: ok: 2 peers, 3 address pools\n",
            files[1].display()
        )),
        "{out}"
    );
    // One summary line per peer, and the password shows only as "md5".
    assert_eq!(
        out.lines().filter(|l| l.starts_with("  peers[")).count(),
        9,
        "{out}"
    );
    assert!(
        out.contains(", next-hop-v4 10.5.112.1, next-hop-v6 2001:db8:5::11,"),
        "{out}"
    );
    assert!(out.contains(", md5,"), "{out}");
    assert!(!out.contains("yourPassword"), "{out}");
    // A password-secret shows which Secret key holds the key, never a value.
    assert!(
        out.contains(", md5 from secret bgp-peer-passwords key tor-a,"),
        "{out}"
    );
}

#[test]
fn check_reports_every_error_and_fails() {
    let dir = std::env::temp_dir().join(format!("podcidr-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "peers:\n- peer-address: 10.0.0.1\n  peer-asn: 65000\n  my-asn: 65001\n  hold-time: 2s\n  password: hunter2\n  colour: red\n",
    )
    .unwrap();
    let good = sample("cilium-bgp-config.yaml");
    let missing = dir.join("missing.yaml");
    let (code, out) = run_check(&[good.as_path(), bad.as_path(), missing.as_path()], None);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 1, "{out}");
    let b = bad.display();
    let expected = format!(
        "{b}: 2 errors\n  {b}:5:14: peers[0].hold-time: \"2s\" must be 0 or at least 3s\n  {b}:7:3: peers[0]: unknown key \"colour\" (expected one of: peer-address, peer-asn, my-asn, peer-port, hold-time, keepalive-time, router-id, source-address, password, password-secret, ebgp-multihop, bfd-profile, node-selectors, graceful-restart, graceful-restart-time, connect-retry-time, origin, pod-cidr-communities, pod-cidr-local-pref, max-prefix, passive, ttl-security, pod-cidr-pools, next-hop-v4, next-hop-v6)\n"
    );
    assert!(out.contains(&expected), "{out}");
    assert!(
        out.contains(&format!("{}: ok: 4 peers", good.display())),
        "{out}"
    );
    assert!(
        out.contains(&format!("{}: cannot read: ", missing.display())),
        "{out}"
    );
    assert!(!out.contains("hunter2"), "{out}");
}

#[test]
fn check_reads_standard_input() {
    let (code, out) = run_check(&[Path::new("-")], Some(&read("cilium-bgp-config.yaml")));
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("-: ok: 4 peers, 1 address pool\n"), "{out}");
    let (code, out) = run_check(&[Path::new("-")], Some("peers: 1\n"));
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        out,
        "-: 1 error\n  -:1:8: peers: integer 1 must be a list\n"
    );
}
