//! What MetalLB and Cilium users already have keeps working: both ConfigMap keys, whole
//! manifests, YAML 1.1 scalars as yaml.v2 read them, anchors and merge keys, and
//! positions that point into the file the user edits.

use std::collections::BTreeMap;

use podcidr_speaker::config::{parse, parse_configmap_data};

use crate::{errors, ok};

const RAW: &str = "peers:\n- peer-address: 10.0.0.1\n  peer-asn: 65000\n  my-asn: 65001\n";

fn manifest(key: &str, body: &str) -> String {
    let indented: String = body.lines().map(|l| format!("    {l}\n")).collect();
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bgp-config\n  namespace: kube-system\ndata:\n  {key}: |\n{indented}")
}

#[test]
fn raw_and_manifest_forms_mean_the_same() {
    let raw = ok(RAW);
    assert_eq!(ok(&manifest("config.yaml", RAW)), raw);
    assert_eq!(ok(&manifest("config", RAW)), raw);
    // A manifest among others (a Namespace, then the ConfigMap).
    let multi = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: metallb-system\n---\n{}",
        manifest("config", RAW)
    );
    assert_eq!(ok(&multi), raw);
    // The watcher's data map.
    let data = BTreeMap::from([("config.yaml".to_string(), RAW.to_string())]);
    assert_eq!(parse_configmap_data(&data).unwrap(), raw);
    let data = BTreeMap::from([("config".to_string(), RAW.to_string())]);
    assert_eq!(parse_configmap_data(&data).unwrap(), raw);
    // An empty config is valid and has no peers, as in MetalLB.
    assert!(ok(&manifest("config", "")).peers.is_empty());
}

#[test]
fn manifest_errors() {
    let both = format!(
        "{}  config: |\n    peers: []\n",
        manifest("config.yaml", RAW)
    );
    assert_eq!(
        errors(&both),
        vec![r#"data: has both "config.yaml" (Cilium) and "config" (MetalLB) keys: keep only one"#]
    );
    assert_eq!(
        errors(&manifest("bgp.yaml", RAW)),
        vec![
            r#"data: has neither "config.yaml" (Cilium) nor "config" (MetalLB) key (keys: "bgp.yaml")"#
        ]
    );
    assert_eq!(
        errors("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"),
        vec!["data: is missing: the ConfigMap holds no config"]
    );
    assert_eq!(
        errors("apiVersion: v1\nkind: ConfigMap\ndata:\n  config: [a]\n"),
        vec!["data.config: must be a string (use `|` and indent the config)"]
    );
    assert_eq!(
        errors("apiVersion: v1\nkind: ConfigMap\ndata: [config]\n"),
        vec!["data: must be a mapping of keys to strings"]
    );
    // The embedded config is one document, as in a raw file.
    assert_eq!(
        errors(&manifest("config", "peers: []\n---\npeers: []\n")),
        vec!["more than one YAML document: the config is a single document"]
    );
    assert_eq!(
        errors("apiVersion: v1\nkind: Secret\ndata: {}\n"),
        vec![
            r#"kind: "Secret" is not a ConfigMap: expected the raw config or a ConfigMap manifest"#
        ]
    );
    let two = format!(
        "{}---\n{}",
        manifest("config", RAW),
        manifest("config", RAW)
    );
    assert_eq!(
        errors(&two),
        vec!["more than one ConfigMap in the file: check them one file each"]
    );
    assert_eq!(
        parse_configmap_data(&BTreeMap::new())
            .unwrap_err()
            .to_string(),
        r#"data: has neither "config.yaml" (Cilium) nor "config" (MetalLB) key (keys: none)"#
    );
    // The embedded config is a raw config: a manifest inside it is not unwrapped again.
    let nested = manifest("config", &manifest("config", RAW));
    assert_eq!(
        errors(&nested),
        vec![
            r#"unknown key "apiVersion" (expected one of: peers, bgp-communities, address-pools, bfd-profiles, speaker)"#,
            r#"unknown key "kind" (expected one of: peers, bgp-communities, address-pools, bfd-profiles, speaker)"#,
            r#"unknown key "metadata" (expected one of: peers, bgp-communities, address-pools, bfd-profiles, speaker)"#,
            r#"unknown key "data" (expected one of: peers, bgp-communities, address-pools, bfd-profiles, speaker)"#,
        ]
    );
}

#[test]
fn positions_inside_a_configmap_point_into_the_file() {
    let text = manifest(
        "config.yaml",
        "peers:\n- peer-address: 10.0.0.1\n  peer-asn: 65000\n  my-asn: 65001\n  hold-time: 2s\n",
    );
    let e = parse(&text).unwrap_err();
    let e = e.iter().next().unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("hold-time: 2s"))
        .unwrap()
        + 1;
    let column = text.lines().nth(line - 1).unwrap().find("2s").unwrap() + 1;
    assert_eq!(e.location.map(|l| (l.line, l.column)), Some((line, column)));
    // A quoted (folded) string has no line mapping: no position rather than a wrong one.
    let quoted = "apiVersion: v1\nkind: ConfigMap\ndata:\n  config: \"peers: [{peer-address: x, peer-asn: 1, my-asn: 2}]\"\n";
    let e = parse(quoted).unwrap_err();
    assert_eq!(e.iter().next().unwrap().location, None);
    assert_eq!(
        e.to_string(),
        r#"peers[0].peer-address: "x" is not an IP address"#
    );
}

#[test]
fn yaml_1_1_scalars_as_yaml_v2_read_them() {
    let c = ok("peers:\n- peer-address: 10.0.0.1\n  peer-asn: 65000\n  my-asn: 65001\n  ebgp-multihop: on\n  password: 0123\n");
    assert!(c.peers[0].ebgp_multihop);
    assert_eq!(c.peers[0].password.as_ref().unwrap().expose(), "0123");
    let c = ok("peers:\n- peer-address: 10.0.0.1\n  peer-asn: 0xFDE8\n  my-asn: 65_001\n  ebgp-multihop: No\n");
    assert_eq!((c.peers[0].peer_asn, c.peers[0].my_asn), (65000, 65001));
    assert!(!c.peers[0].ebgp_multihop);
    // A tagged string is a string.
    assert_eq!(
        errors("peers:\n- peer-address: 10.0.0.1\n  peer-asn: !!str 65000\n  my-asn: 65001\n"),
        vec![r#"peers[0].peer-asn: string "65000" must be an integer (remove the quotes)"#]
    );
}

#[test]
fn anchors_and_merge_keys() {
    let text = "\
tor: &tor
  peer-asn: 65000
  my-asn: 65083
  hold-time: 30s
";
    // A top-level anchor holder is an unknown key (MetalLB was strict too) ...
    assert_eq!(
        errors(&format!("{text}peers: []\n")),
        vec![
            r#"unknown key "tor" (expected one of: peers, bgp-communities, address-pools, bfd-profiles, speaker)"#
        ]
    );
    // ... but anchors on the first peer and merge keys in the others work.
    let c = ok("peers:
- &tor
  peer-address: 10.5.0.1
  peer-asn: 65000
  my-asn: 65083
  hold-time: 30s
- <<: *tor
  peer-address: 10.5.0.2
");
    assert_eq!(c.peers.len(), 2);
    assert_eq!(c.peers[1].address.to_string(), "10.5.0.2");
    assert_eq!(c.peers[1].hold_time, std::time::Duration::from_secs(30));
    assert_eq!(c.peers[1].peer_asn, 65000);
}
