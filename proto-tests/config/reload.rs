//! Reload plans: for an old and a new (config, node labels), which sessions are kept,
//! retuned, re-advertised, reset, opened or closed.

use std::collections::BTreeMap;

use podcidr_speaker::config::reload::{ReloadPlan, SessionAction};
use podcidr_speaker::config::PeerKey;

use crate::{labels, ok};

/// Two eBGP routers for every node and one iBGP router for rack 83.
const BASE: &str = "peers:
- peer-address: 10.5.0.1
  peer-asn: 65000
  my-asn: 65083
- peer-address: 10.5.0.2
  peer-asn: 65000
  my-asn: 65083
- peer-address: 10.5.83.251
  peer-asn: 65083
  my-asn: 65083
  node-selectors:
  - match-labels:
      kubernetes/route: bgp-peer-83
address-pools:
- name: default
  protocol: bgp
  addresses: [10.5.112.0/21]
";

const A: &str = "10.5.0.1:179";
const B: &str = "10.5.0.2:179";
const IBGP: &str = "10.5.83.251:179";

fn key(s: &str) -> PeerKey {
    let sa: std::net::SocketAddr = s.parse().unwrap();
    PeerKey {
        address: sa.ip(),
        port: sa.port(),
    }
}

/// BASE with the `n`th occurrence of `from` (0-based) replaced by `to`.
fn edit(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from}");
    BASE.replacen(from, to, 1)
}

/// BASE with extra lines added to peer 0 (after its my-asn line).
fn peer0(extra: &str) -> String {
    BASE.replacen("  my-asn: 65083\n", &format!("  my-asn: 65083\n{extra}"), 1)
}

struct Case {
    name: &'static str,
    old: String,
    new: String,
    old_labels: BTreeMap<String, String>,
    new_labels: BTreeMap<String, String>,
    /// (key, action) for every session of the node, before or after.
    want: Vec<(&'static str, SessionAction)>,
}

fn rack83() -> BTreeMap<String, String> {
    labels(&[("kubernetes/route", "bgp-peer-83")])
}

fn plain() -> BTreeMap<String, String> {
    labels(&[("kubernetes.io/hostname", "n1")])
}

fn case(
    name: &'static str,
    old: String,
    new: String,
    want: Vec<(&'static str, SessionAction)>,
) -> Case {
    Case {
        name,
        old,
        new,
        old_labels: rack83(),
        new_labels: rack83(),
        want,
    }
}

#[test]
fn reload_table() {
    use SessionAction::*;
    let base = || BASE.to_string();
    let cases = vec![
        case("identical", base(), base(), vec![(A, Keep), (B, Keep), (IBGP, Keep)]),
        case("comments and key order only", base(), BASE.replace("  peer-asn: 65000\n  my-asn: 65083\n", "  # the ToR\n  my-asn: 65083\n  peer-asn: 65000\n"), vec![(A, Keep), (B, Keep), (IBGP, Keep)]),
        case("peers reordered in the file", base(), BASE.replacen("- peer-address: 10.5.0.1\n  peer-asn: 65000\n  my-asn: 65083\n- peer-address: 10.5.0.2\n", "- peer-address: 10.5.0.2\n  peer-asn: 65000\n  my-asn: 65083\n- peer-address: 10.5.0.1\n", 1), vec![(A, Keep), (B, Keep), (IBGP, Keep)]),
        case("hold time of one peer", base(), peer0("  hold-time: 30s\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("keepalive of one peer", base(), peer0("  keepalive-time: 10s\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("explicit default hold time", base(), peer0("  hold-time: 90s\n  keepalive-time: 30s\n  peer-port: 179\n"), vec![(A, Keep), (B, Keep), (IBGP, Keep)]),
        case("password added", base(), peer0("  password: s3cret\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("password changed", peer0("  password: one\n"), peer0("  password: two\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        // The Secret's content is not in the config: a new reference resets, the same one keeps.
        case("password-secret added", base(), peer0("  password-secret: {name: s, key: a}\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("password-secret key changed", peer0("  password-secret: {name: s, key: a}\n"), peer0("  password-secret: {name: s, key: b}\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("password-secret rewritten alike", peer0("  password-secret: {name: s, key: a}\n"), peer0("  password-secret:\n    key: a\n    name: s\n"), vec![(A, Keep), (B, Keep), (IBGP, Keep)]),
        case("my-asn changed", base(), edit("  my-asn: 65083\n", "  my-asn: 65084\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("peer-asn changed", base(), edit("  peer-asn: 65000\n", "  peer-asn: 65001\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("router-id set", base(), peer0("  router-id: 10.5.1.1\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("source address set", base(), peer0("  source-address: 10.5.1.1\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("multihop", base(), peer0("  ebgp-multihop: true\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("gtsm", base(), peer0("  ttl-security: true\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("passive", base(), peer0("  passive: true\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("graceful restart off for all", base(), format!("speaker:\n  graceful-restart: false\n{BASE}"), vec![(A, Reset), (B, Reset), (IBGP, Reset)]),
        case("explicit default graceful restart", base(), format!("speaker:\n  graceful-restart: true\n  graceful-restart-time: 120s\n{BASE}"), vec![(A, Keep), (B, Keep), (IBGP, Keep)]),
        case("graceful restart time of one peer", base(), peer0("  graceful-restart-time: 60s\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("pod cidr communities", base(), peer0("  pod-cidr-communities: [65083:1]\n"), vec![(A, Readvertise), (B, Keep), (IBGP, Keep)]),
        case("next-hop-v6 set", base(), peer0("  next-hop-v6: 2001:db8::5\n"), vec![(A, Readvertise), (B, Keep), (IBGP, Keep)]),
        case("origin default", base(), format!("speaker:\n  origin: igp\n{BASE}"), vec![(A, Readvertise), (B, Readvertise), (IBGP, Readvertise)]),
        // A speaker-wide local-pref reaches the iBGP session only.
        case("local-pref default", base(), format!("speaker:\n  pod-cidr-local-pref: 200\n{BASE}"), vec![(A, Keep), (B, Keep), (IBGP, Readvertise)]),
        case("pool advertisement", base(), BASE.replace("  addresses: [10.5.112.0/21]\n", "  addresses: [10.5.112.0/21]\n  bgp-advertisements: [{communities: [65083:9]}]\n"), vec![(A, Readvertise), (B, Readvertise), (IBGP, Readvertise)]),
        case("max-prefix", base(), peer0("  max-prefix: {limit: 100}\n"), vec![(A, Retune), (B, Keep), (IBGP, Keep)]),
        case("connect retry", base(), peer0("  connect-retry-time: 5s\n"), vec![(A, Retune), (B, Keep), (IBGP, Keep)]),
        case("reset wins over readvertise", base(), peer0("  hold-time: 30s\n  origin: igp\n"), vec![(A, Reset), (B, Keep), (IBGP, Keep)]),
        case("readvertise wins over retune", base(), peer0("  max-prefix: {limit: 9}\n  origin: igp\n"), vec![(A, Readvertise), (B, Keep), (IBGP, Keep)]),
        case("peer removed", base(), BASE.replacen("- peer-address: 10.5.0.2\n  peer-asn: 65000\n  my-asn: 65083\n", "", 1), vec![(A, Keep), (B, Close), (IBGP, Keep)]),
        case("peer added", BASE.replacen("- peer-address: 10.5.0.2\n  peer-asn: 65000\n  my-asn: 65083\n", "", 1), base(), vec![(A, Keep), (B, Open), (IBGP, Keep)]),
        case("port changed is another session", base(), peer0("  peer-port: 1179\n"), vec![("10.5.0.1:1179", Open), (A, Close), (B, Keep), (IBGP, Keep)]),
        case("selector no longer matches this node", base(), edit("bgp-peer-83", "bgp-peer-84"), vec![(A, Keep), (B, Keep), (IBGP, Close)]),
        case("selector rewritten, same selection", base(), edit("  - match-labels:\n      kubernetes/route: bgp-peer-83\n", "  - match-expressions:\n    - {key: kubernetes/route, operator: In, values: [bgp-peer-83, bgp-peer-84]}\n"), vec![(A, Keep), (B, Keep), (IBGP, Keep)]),
        case("selector added to an eBGP peer, node still selected", base(), peer0("  node-selectors: [{match-expressions: [{key: kubernetes/route, operator: Exists}]}]\n"), vec![(A, Keep), (B, Keep), (IBGP, Keep)]),
        case("everything removed", base(), String::new(), vec![(A, Close), (B, Close), (IBGP, Close)]),
    ];
    let mut label_cases = vec![
        Case {
            name: "node gains the label",
            old: base(),
            new: base(),
            old_labels: plain(),
            new_labels: rack83(),
            want: vec![(A, Keep), (B, Keep), (IBGP, Open)],
        },
        Case {
            name: "node loses the label",
            old: base(),
            new: base(),
            old_labels: rack83(),
            new_labels: plain(),
            want: vec![(A, Keep), (B, Keep), (IBGP, Close)],
        },
        Case {
            name: "unrelated label change",
            old: base(),
            new: base(),
            old_labels: plain(),
            new_labels: labels(&[("kubernetes.io/hostname", "n1"), ("zone", "a")]),
            want: vec![(A, Keep), (B, Keep)],
        },
        Case {
            name: "label and config change together",
            old: base(),
            new: peer0("  hold-time: 30s\n"),
            old_labels: plain(),
            new_labels: rack83(),
            want: vec![(A, Reset), (B, Keep), (IBGP, Open)],
        },
    ];
    let mut all = cases;
    all.append(&mut label_cases);
    for c in &all {
        let (old, new) = (ok(&c.old), ok(&c.new));
        let plan = ReloadPlan::between(&old, &c.old_labels, &new, &c.new_labels);
        let mut got: Vec<(String, SessionAction)> = Vec::new();
        for (list, action) in [
            (&plan.keep, SessionAction::Keep),
            (&plan.retune, SessionAction::Retune),
            (&plan.readvertise, SessionAction::Readvertise),
            (&plan.reset, SessionAction::Reset),
            (&plan.open, SessionAction::Open),
            (&plan.close, SessionAction::Close),
        ] {
            got.extend(list.iter().map(|k| (k.to_string(), action)));
        }
        got.sort();
        let mut want: Vec<(String, SessionAction)> =
            c.want.iter().map(|(k, a)| (k.to_string(), *a)).collect();
        want.sort();
        assert_eq!(got, want, "case {:?}", c.name);
        for (k, a) in &c.want {
            assert_eq!(
                plan.action(&key(k)),
                Some(*a),
                "case {:?} action({k})",
                c.name
            );
        }
        let only_keep = c.want.iter().all(|(_, a)| *a == SessionAction::Keep);
        assert_eq!(plan.is_noop(), only_keep, "case {:?}", c.name);
    }
}

#[test]
fn initial_plan_opens_the_selected_sessions() {
    let c = ok(BASE);
    let plan = ReloadPlan::initial(&c, &plain());
    assert_eq!(plan.open, vec![key(A), key(B)]);
    assert!(plan.keep.is_empty() && plan.close.is_empty() && plan.reset.is_empty());
    assert_eq!(plan.to_string(), "open 10.5.0.1:179, 10.5.0.2:179");
    let plan = ReloadPlan::between(&c, &plain(), &c, &plain());
    assert_eq!(plan.to_string(), "keep 10.5.0.1:179, 10.5.0.2:179");
    let empty = ok("");
    assert_eq!(
        ReloadPlan::initial(&empty, &plain()).to_string(),
        "no sessions"
    );
}

#[test]
fn plan_reports_conflicts_of_the_new_config() {
    let text = "peers:\n\
        - {peer-address: 10.0.0.1, peer-asn: 65001, my-asn: 65101, node-selectors: [{match-labels: {rack: r1}}]}\n\
        - {peer-address: 10.0.0.1, peer-asn: 65002, my-asn: 65102}\n";
    let c = ok(text);
    let plan = ReloadPlan::initial(&c, &labels(&[("rack", "r1")]));
    assert_eq!(plan.open, vec![key("10.0.0.1:179")]);
    assert_eq!(plan.conflicts.len(), 1);
    assert_eq!(plan.conflicts[0].indexes, [0, 1]);
}
