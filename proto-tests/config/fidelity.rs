//! Fidelity to MetalLB 0.12.1's own parser (`internal/config/config.go` at v0.12.1),
//! class by class (issue 16): for each, our verdict and the exact message. A case
//! marked DIFFERENCE is a deliberate one, listed in config/README.md's table "Where
//! podcidr-speaker differs from MetalLB"; every other case gives MetalLB's verdict.
//! Also the Equinix Metal CCM-style generated ConfigMaps under `equinix/`, through the
//! built binary's `check` and `plan`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use podcidr_speaker::commands::check::check_text;
use podcidr_speaker::config::{parse, Config};

use crate::{errors, ok, peer};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The warnings of a valid file, as displayed.
fn warnings(config: &Config) -> Vec<String> {
    config.warnings.iter().map(ToString::to_string).collect()
}

// ---- "" is "not set" for every optional string ------------------------------------

#[test]
fn an_empty_string_is_unset_for_every_optional_string_field() {
    let base = ok(&peer(&[]));
    // MetalLB's optional strings, then the speaker extensions: one rule.
    for key in [
        "hold-time",
        "keepalive-time",
        "router-id",
        "source-address",
        "password",
        "bfd-profile",
        "graceful-restart-time",
        "connect-retry-time",
        "origin",
    ] {
        for empty in ["\"\"", "''"] {
            assert_eq!(ok(&peer(&[(key, empty)])), base, "{key}: {empty}");
        }
    }
    // MetalLB's values for the unset fields.
    let p = &base.peers[0];
    assert_eq!((p.hold_time, p.keepalive_time), (secs(90), secs(30)));
    assert_eq!((p.router_id, p.source_address), (None, None));
    assert!(p.password.is_none() && p.bfd_profile.is_none());
    // Nested and speaker-wide optional strings too.
    assert_eq!(
        ok(&peer(&[("max-prefix", "{limit: 10, action: \"\"}")])),
        ok(&peer(&[("max-prefix", "{limit: 10}")]))
    );
    let speaker =
        "speaker: {origin: \"\", connect-retry-time: \"\", graceful-restart-time: \"\"}\n";
    assert_eq!(ok(&format!("{speaker}{}", peer(&[]))), base);
}

#[test]
fn an_empty_required_field_or_number_is_still_refused_as_metallb_did() {
    let text = "\
peers:
- peer-address: \"\"
  peer-asn: 65000
  my-asn: 65001
  peer-port: \"\"
  ebgp-multihop: \"\"
address-pools:
- name: \"\"
  protocol: \"\"
  addresses: [\"10.0.0.0/24\"]
";
    assert_eq!(
        errors(text),
        vec![
            r#"peers[0].peer-address: "" is not an IP address"#,
            r#"peers[0].peer-port: string "" must be an integer"#,
            r#"peers[0].ebgp-multihop: string "" must be true or false"#,
            r#"address-pools[0].name: "" must not be empty"#,
            r#"address-pools[0].protocol: "" is not a protocol (expected "bgp" or "layer2")"#,
        ]
    );
}

// ---- order of checks: truncate to whole seconds, then compare ------------------------

#[test]
fn durations_are_truncated_to_whole_seconds_before_they_are_compared() {
    // (hold-time, keepalive-time; "-" = not written) -> (hold, keepalive) or the error.
    type Case = (&'static str, &'static str, Result<(u64, u64), &'static str>);
    let cases: &[Case] = &[
        ("30s", "30.9s", Ok((30, 30))),
        ("-", "90.9s", Ok((90, 90))),
        ("3.9s", "3.5s", Ok((3, 3))),
        ("65535.9s", "-", Ok((65535, 21845))),
        ("0.5s", "-", Ok((0, 0))),
        ("0", "0.9s", Ok((0, 0))),
        (
            "2.9s",
            "-",
            Err(r#"peers[0].hold-time: "2.9s" must be 0 or at least 3s"#),
        ),
        (
            "30s",
            "31s",
            Err(r#"peers[0].keepalive-time: "31s" must not be above hold-time (30s)"#),
        ),
        (
            "0",
            "1s",
            Err(r#"peers[0].keepalive-time: "1s" must not be above hold-time (0s)"#),
        ),
        // DIFFERENCE: MetalLB took a keepalive of 0 under a non-zero hold time (the
        // session expires), a negative keepalive, a negative hold time above -1s (as 0)
        // and a hold time that does not fit the OPEN's 16 bits.
        (
            "-",
            "0.5s",
            Err(r#"peers[0].keepalive-time: "0.5s" must be at least 1s when hold-time is not 0"#),
        ),
        (
            "-",
            "-1s",
            Err(r#"peers[0].keepalive-time: "-1s" must not be negative"#),
        ),
        (
            "-0.5s",
            "-",
            Err(r#"peers[0].hold-time: "-0.5s" must be 0 or at least 3s"#),
        ),
        (
            "65536s",
            "-",
            Err(
                r#"peers[0].hold-time: "65536s" must be at most 65535s (the Hold Time is 16 bits, RFC 4271 section 4.2)"#,
            ),
        ),
    ];
    for (hold, keepalive, want) in cases {
        let text = peer(&[("hold-time", hold), ("keepalive-time", keepalive)]);
        match want {
            Ok((h, k)) => {
                let p = ok(&text).peers.remove(0);
                assert_eq!(
                    (p.hold_time, p.keepalive_time),
                    (secs(*h), secs(*k)),
                    "{text}"
                );
            }
            Err(e) => assert_eq!(errors(&text), vec![*e], "{text}"),
        }
    }
}

// ---- whitespace: Go's parsers take none around an address or CIDR ----------------------

#[test]
fn whitespace_around_an_address_or_cidr_is_refused_as_metallb_did() {
    let hint = ": remove the whitespace around it";
    let cases: &[(&str, &str, String)] = &[
        ("peer-address", r#""10.0.0.1 ""#, format!(r#"peers[0].peer-address: "10.0.0.1 " is not an IP address{hint}"#)),
        ("peer-address", r#""\t10.0.0.1""#, format!(r#"peers[0].peer-address: "\t10.0.0.1" is not an IP address{hint}"#)),
        ("source-address", r#"" 10.0.0.2""#, format!(r#"peers[0].source-address: " 10.0.0.2" is not an IP address{hint}"#)),
        ("router-id", r#""10.0.0.3\n""#, format!(r#"peers[0].router-id: "10.0.0.3\n" is not an IPv4 address{hint}"#)),
        // Already MetalLB's verdict before issue 16, and no hint where trimming does not help.
        ("hold-time", r#""90s ""#, r#"peers[0].hold-time: "90s " has an unknown unit "s " (units are ns, us, ms, s, m, h)"#.to_string()),
        ("peer-address", r#"" banana""#, r#"peers[0].peer-address: " banana" is not an IP address"#.to_string()),
    ];
    for (key, value, want) in cases {
        assert_eq!(
            errors(&peer(&[(key, value)])),
            vec![want.clone()],
            "{key}: {value}"
        );
    }
    let pool = |addresses: &str| {
        format!("address-pools:\n- name: p\n  protocol: bgp\n  addresses: [{addresses}]\n")
    };
    assert_eq!(
        errors(&pool(r#""10.10.0.0/24 ""#)),
        vec![format!(
            r#"address-pools[0].addresses[0]: "10.10.0.0/24 " is not a CIDR ("10.0.0.0/24") or an address range ("10.0.0.10-10.0.0.20"){hint}"#
        )]
    );
    // MetalLB trimmed the two ends of a range: so do we.
    let c = ok(&pool(r#"" 10.0.0.1 - 10.0.0.2 ""#));
    assert_eq!(
        c.pools[0].cidrs,
        vec![
            "10.0.0.1/32".parse().unwrap(),
            "10.0.0.2/32".parse().unwrap()
        ]
    );
}

#[test]
fn a_tab_after_a_list_dash_is_refused_as_metallb_did() {
    // libyaml (so yaml.v2, so MetalLB) refuses it; we say where and why.
    let text = "peers:\n-\tpeer-address: 10.0.0.1\n  peer-asn: 65000\n  my-asn: 65001\n";
    let e = parse(text).unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"invalid YAML: a tab after the list dash "-": write a space (YAML 1.1 parsers, MetalLB's among them, refuse a tab there)"#
    );
    let at = e.iter().next().unwrap().location.unwrap();
    assert_eq!((at.line, at.column), (2, 2));
    // Also a nested item, and a scalar item; a space then a tab too.
    for text in [
        "peers:\n- node-selectors:\n  -\t{}\n",
        "address-pools:\n- name: p\n  protocol: bgp\n  addresses:\n  - \t10.0.0.0/24\n",
    ] {
        assert_eq!(errors(text).len(), 1, "{text}");
        assert!(
            errors(text)[0].contains("a tab after the list dash"),
            "{text}"
        );
    }
    // Tabs elsewhere are not this rule's business: inside a quoted value, a comment.
    assert_eq!(ok("peers: [] #\tnothing\n").peers.len(), 0);
}

// ---- duplicates: MetalLB 0.12 refused, Cilium's fork accepted: taken with a warning ----

#[test]
fn equal_advertisements_and_repeated_communities_are_taken_with_a_warning() {
    let text = "\
bgp-communities:
  edge: 65535:65281
address-pools:
- name: p
  protocol: bgp
  addresses: [10.0.0.0/24]
  bgp-advertisements:
  - communities: [65000:1, 65000:1, edge, no-export]
  - communities: [65000:1, edge]
  - localpref: 100
";
    // MetalLB 0.12: `duplicate definition of community "65000:1"`, and the two first
    // advertisements DeepEqual would have been refused as well had they been written
    // the same way; Cilium's MetalLB took both. We take them, announce once, and say so.
    let c = ok(text);
    assert_eq!(
        warnings(&c),
        vec![
            r#"address-pools[0].bgp-advertisements[0].communities[1]: "65000:1" repeats communities[0]: sent once (MetalLB 0.12 refused a repeated community, Cilium's MetalLB accepted it)"#,
            r#"address-pools[0].bgp-advertisements[0].communities[3]: "no-export" is the same community as communities[2] ("edge"): sent once"#,
            r#"address-pools[0].bgp-advertisements[1]: means the same as bgp-advertisements[0]: announced once (MetalLB 0.12 refused an advertisement written twice, Cilium's MetalLB accepted it)"#,
        ]
    );
    let ads = &c.pools[0].bgp_advertisements;
    assert_eq!(ads.len(), 2, "{ads:?}");
    assert_eq!(ads[0].communities.len(), 2);
    assert_eq!(ads[1].local_pref, Some(100));
    // `check` prints them after the summary, with the position.
    let report = check_text("f.yaml", text).to_string();
    assert!(
        report.contains("  warning: f.yaml:9:5: address-pools[0].bgp-advertisements[1]: means the same as bgp-advertisements[0]"),
        "{report}"
    );
    // Inside a ConfigMap the position points into the manifest.
    let indented: String = text.lines().map(|l| format!("    {l}\n")).collect();
    let manifest = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: config}}\ndata:\n  config: |\n{indented}");
    let at = ok(&manifest).warnings[2].location.unwrap();
    assert_eq!((at.line, at.column), (14, 9));
    // Without repeats there is nothing to say.
    assert!(
        ok(&text.replace("65000:1, 65000:1, edge, no-export", "65000:2"))
            .warnings
            .is_empty()
    );
}

// ---- error reporting: every error at once, each once --------------------------------

#[test]
fn duplicate_peers_are_reported_with_every_field_error() {
    let text = "\
peers:
- peer-address: 10.0.0.1
  peer-asn: 65000
  my-asn: 65001
  hold-time: 2s
- peer-address: 10.0.0.1
  peer-asn: 65000
  my-asn: 65001
  hold-time: 2s
- peer-address: 10.0.0.2
  peer-asn: 65000
  my-asn: 65001
- peer-address: 10.0.0.2
  peer-asn: 65000
  my-asn: 65001
  keepalive-time: 100s
  router-id: 300.0.0.1
";
    assert_eq!(
        errors(text),
        vec![
            r#"peers[0].hold-time: "2s" must be 0 or at least 3s"#,
            "peers[1]: same router 10.0.0.1:179 as peers[0], for every node: a node can hold only one session per peer-address and peer-port",
            r#"peers[1].hold-time: "2s" must be 0 or at least 3s"#,
            "peers[3]: same router 10.0.0.2:179 as peers[2], for every node: a node can hold only one session per peer-address and peer-port",
            r#"peers[3].keepalive-time: "100s" must not be above hold-time (90s)"#,
            r#"peers[3].router-id: "300.0.0.1" is not an IPv4 address"#,
        ]
    );
}

#[test]
fn one_mistake_is_one_error_that_names_field_value_and_expectation() {
    let selectors = |sel: &str| {
        format!("peers:\n- peer-address: 10.0.0.1\n  peer-asn: 65000\n  my-asn: 65001\n  node-selectors: [{sel}]\n")
    };
    let p = "peers[0].node-selectors[0]";
    // `values: a` is a string, not a list: that error only (not also "values set can't
    // be empty").
    assert_eq!(
        errors(&selectors(
            "{match-expressions: [{key: zone, operator: In, values: a}]}"
        )),
        vec![format!(
            r#"{p}.match-expressions[0].values: string "a" must be a list"#
        )]
    );
    // A mapping as a label value (an unrendered `{{ .Values.rack }}` is one).
    assert_eq!(
        errors(&selectors("{match-labels: {rack: {b: c}}}")),
        vec![format!(
            r#"{p}.match-labels.rack: a mapping {{b: c}} must be a label value (a single string such as "rack-1")"#
        )]
    );
    assert_eq!(
        errors("bgp-communities:\n  edge: [1, 2]\n"),
        vec![
            r#"bgp-communities.edge: a list [1, 2] must be a community (a single value such as "65000:100")"#
        ]
    );
    // A name defined with a bad value: reported where it is defined, not also as
    // "undefined" at every use.
    let text = "\
bgp-communities:
  edge: 1:99999
address-pools:
- name: p
  protocol: bgp
  addresses: [10.0.0.0/24]
  bgp-advertisements:
  - communities: [edge, egde]
";
    assert_eq!(
        errors(text),
        vec![
            r#"bgp-communities.edge: "1:99999" is not a community: 99999 is above 65535"#,
            r#"address-pools[0].bgp-advertisements[0].communities[1]: "egde" is neither a name defined in bgp-communities nor a community (expected "a:b" with a and b from 0 to 65535, or "large:a:b:c" with 32-bit numbers)"#,
        ]
    );
}

// ---- numbers Go read differently ---------------------------------------------------------

#[test]
fn an_ipv4_octet_with_a_leading_zero_is_refused() {
    // DIFFERENCE: MetalLB 0.12.1 was built with Go 1.16, whose net.ParseIP read
    // "10.0.0.01" as 10.0.0.1; other tools read a leading zero as octal. Refused
    // everywhere an address is written.
    assert_eq!(
        errors(&peer(&[("peer-address", "10.0.0.01")])),
        vec![r#"peers[0].peer-address: "10.0.0.01" is not an IP address"#]
    );
    assert_eq!(
        errors(&peer(&[("router-id", "010.0.0.1")])),
        vec![r#"peers[0].router-id: "010.0.0.1" is not an IPv4 address"#]
    );
    assert_eq!(
        errors("address-pools:\n- name: p\n  protocol: bgp\n  addresses: [010.0.0.0/8]\n"),
        vec![
            r#"address-pools[0].addresses[0]: "010.0.0.0/8" is not a CIDR ("10.0.0.0/24") or an address range ("10.0.0.10-10.0.0.20")"#
        ]
    );
}

// ---- generated ConfigMaps (Equinix Metal CCM style) through the built binary -----------

fn equinix(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("proto-tests/config/equinix")
        .join(file)
        .display()
        .to_string()
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_podcidr-speaker"))
        .args(args)
        .output()
        .expect("run podcidr-speaker");
    (
        out.status.code().expect("exited by a signal"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn equinix_generated_configmaps_pass_check_with_metallbs_values() {
    let plain = equinix("metallb-config.yaml");
    let password = equinix("metallb-config-password.yaml");
    let (code, out, err) = run(&["check", &plain, &password]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    let metallb = "eBGP peer-asn 65530 my-asn 65000, hold 90s, keepalive 30s";
    // Graceful restart is not a MetalLB field: on by default, with its default time.
    let gr = "graceful-restart 120s";
    let want = format!(
        "\
{plain}: ok: 4 peers, 2 address pools
  peers[0] 169.254.255.1:179 {metallb}, {gr}, nodes: kubernetes.io/hostname=worker-1
  peers[1] 169.254.255.2:179 {metallb}, {gr}, nodes: kubernetes.io/hostname=worker-1
  peers[2] 169.254.255.1:179 {metallb}, {gr}, nodes: kubernetes.io/hostname=worker-2
  peers[3] 169.254.255.2:179 {metallb}, {gr}, nodes: kubernetes.io/hostname=worker-2
  pool \"default/ingress-nginx\" bgp 203.0.113.10/32
  pool \"kube-system/dns\" bgp 203.0.113.11/32
{password}: ok: 5 peers, 2 address pools
  peers[0] 169.254.255.1:179 {metallb}, md5, {gr}, nodes: kubernetes.io/hostname=worker-1
  peers[1] 169.254.255.2:179 {metallb}, md5, {gr}, nodes: kubernetes.io/hostname=worker-1
  peers[2] 169.254.255.1:179 {metallb}, md5, {gr}, nodes: kubernetes.io/hostname=worker-2
  peers[3] 169.254.255.2:179 {metallb}, md5, {gr}, nodes: kubernetes.io/hostname=worker-2
  peers[4] 169.254.255.1:179 {metallb}, router-id 10.70.14.3, source 10.70.14.3, md5, {gr}, nodes: kubernetes.io/hostname=worker-3
  pool \"default/web\" bgp 203.0.113.20/32
  pool \"eip\" bgp 198.51.100.0/29
"
    );
    assert_eq!(out, want);
    assert!(!out.contains("5x7Qm2bPz9"));
    // The model behind the summary: MetalLB's defaults everywhere a "" or 0 was written.
    let c = ok(&std::fs::read_to_string(&password).unwrap());
    for p in &c.peers {
        assert_eq!(
            (p.port, p.hold_time, p.keepalive_time),
            (179, secs(90), secs(30))
        );
        assert!(p.password.is_some() && p.bfd_profile.is_none() && !p.ebgp_multihop);
    }
    assert!(c.pools.iter().all(|p| !p.auto_assign || p.name == "eip"));
    assert!(c.warnings.is_empty());
}

#[test]
fn equinix_generated_configmaps_plan_with_metallbs_values() {
    let state = equinix("cluster-state.yaml");
    for (file, node, peers) in [
        (
            "metallb-config.yaml",
            "worker-1",
            ["peers[0]", "peers[1]"].as_slice(),
        ),
        ("metallb-config.yaml", "worker-2", &["peers[2]", "peers[3]"]),
        (
            "metallb-config-password.yaml",
            "worker-2",
            &["peers[2]", "peers[3]"],
        ),
        ("metallb-config-password.yaml", "worker-3", &["peers[4]"]),
    ] {
        let config = equinix(file);
        let args = [
            "plan",
            "--bgp-config",
            &config,
            "--cluster-state",
            &state,
            "--node",
            node,
        ];
        let (code, out, err) = run(&args);
        assert_eq!((code, err.as_str()), (0, ""), "{args:?}\n{out}");
        let selected: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("peer ") && l.ends_with(" route"))
            .collect();
        assert_eq!(selected.len(), peers.len(), "{out}");
        for (line, index) in selected.iter().zip(peers) {
            assert!(
                line.contains(&format!(
                    "AS 65530 (eBGP, my AS 65000) {index}, hold-time 90s, keepalive 30s"
                )),
                "{line}"
            );
            assert_eq!(line.contains("md5"), file.contains("password"), "{line}");
        }
        // Each selected session announces the node's pod CIDR (the next hop is the
        // planner's business, not the config's).
        let n = &node["worker-".len()..];
        let routes: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with(&format!("  10.244.{n}.0/24  next-hop ")))
            .collect();
        assert_eq!(routes.len(), peers.len(), "{out}");
        assert!(
            routes
                .iter()
                .all(|l| l.ends_with("  origin incomplete  as-path 65000")),
            "{out}"
        );
        assert!(!out.contains("5x7Qm2bPz9"));
    }
}

// ---- bfd-profile: accepted as MetalLB did, and run (issue 18) ------------------------

/// A peer naming a defined profile carries it, resolved, for its BFD session, without a
/// warning; an undefined one is still an error.
#[test]
fn a_bfd_profile_is_resolved_onto_its_peer_without_a_warning() {
    let text = "bfd-profiles:\n- name: fast\n  receive-interval: 300\npeers:\n- peer-address: 10.0.0.1\n  peer-asn: 65000\n  my-asn: 65001\n  bfd-profile: fast\n";
    let c = ok(text);
    assert_eq!(c.peers[0].bfd_profile.as_deref(), Some("fast"));
    assert_eq!(c.peers[0].bfd.as_ref(), Some(&c.bfd_profiles["fast"]));
    assert!(warnings(&c).is_empty(), "{:?}", warnings(&c));
    let c = ok("bfd-profiles:\n- name: fast\npeers:\n- {peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001}\n");
    assert!(c.warnings.is_empty() && c.peers[0].bfd.is_none());
}

/// The Echo function is not implemented (issue 18): `echo-mode: true` and an
/// `echo-interval` stay valid (MetalLB files keep working) and each gets a warning that
/// says so, at its own line; an out-of-range one is only an error.
#[test]
fn echo_mode_and_echo_interval_are_accepted_with_a_warning_that_echo_is_not_run() {
    let text = "bfd-profiles:\n- name: echo\n  echo-mode: true\n  echo-interval: 50\n- name: plain\n  echo-mode: false\n";
    let c = ok(text);
    assert_eq!(
        warnings(&c),
        [
            "bfd-profiles[0].echo-mode: true is not run: this speaker does not implement BFD echo mode, so a failure is found by control packets alone (the remote's transmit-interval x detect-multiplier)",
            "bfd-profiles[0].echo-interval: 50 has no effect: this speaker does not implement BFD echo mode, so it sends no echo packet and asks for none",
        ]
    );
    let lines: Vec<_> = c
        .warnings
        .iter()
        .map(|w| w.location.map(|l| l.line))
        .collect();
    assert_eq!(lines, [Some(3), Some(4)]);
    assert!(ok("bfd-profiles:\n- name: plain\n  echo-mode: false\n")
        .warnings
        .is_empty());
    assert_eq!(
        errors("bfd-profiles:\n- name: p\n  echo-interval: 5\n"),
        ["bfd-profiles[0].echo-interval: 5 must be between 10 and 60000"]
    );
    // `check` shows them.
    let report = check_text("f.yaml", text).to_string();
    assert!(
        report.contains("warning: f.yaml:3:14: bfd-profiles[0].echo-mode: true is not run"),
        "{report}"
    );
}

/// A profile becomes a BFD session's config in one place, unset fields at MetalLB's and
/// FRR's defaults: 300 ms both ways, multiplier 3, active, minimum TTL 254.
#[test]
fn a_bfd_profile_maps_to_the_session_config_with_metallb_defaults() {
    use podcidr_speaker::bfd::SessionConfig;
    let ms = Duration::from_millis;
    let c = ok("bfd-profiles:\n- name: d\n- name: s\n  receive-interval: 120\n  transmit-interval: 45\n  detect-multiplier: 255\n  passive-mode: true\n  minimum-ttl: 200\n");
    let d = &c.bfd_profiles["d"];
    assert_eq!(
        d.session_config(),
        SessionConfig {
            desired_min_tx: ms(300),
            required_min_rx: ms(300),
            detect_mult: 3,
            passive: false,
        }
    );
    assert_eq!(d.minimum_ttl_in_force(), 254);
    let s = &c.bfd_profiles["s"];
    assert_eq!(
        s.session_config(),
        SessionConfig {
            desired_min_tx: ms(45),
            required_min_rx: ms(120),
            detect_mult: 255,
            passive: true,
        }
    );
    assert_eq!(s.minimum_ttl_in_force(), 200);
}
