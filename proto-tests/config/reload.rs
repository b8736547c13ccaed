//! Reloads: for an old and a new (config, node labels), which sessions are kept,
//! retuned (live settings), re-advertised (new routes on the running session), reset,
//! opened or closed. The session part is `peer::session_changes` on the specs the
//! daemon builds; the routes part is the planner's, as the daemon runs them.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;

use podcidr_speaker::config::{Config, PeerKey, Secret};
use podcidr_speaker::peer::{session_changes, PeerSpec, RunOverrides, SessionChange};
use podcidr_speaker::routes::{self, AnnounceMode, DesiredRoutes, LocalNode, Overrides, Plan};
use podcidr_speaker::sources::model::{CidrSource, IpamMode, NodeEntry, NodeView};
use podcidr_speaker::sources::secrets::{peer_md5_key, SecretOrigin, SecretState, SecretsView};

use crate::{labels, ok};

/// What a reload does to one session, as an operator sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum SessionAction {
    Keep,
    Retune,
    Readvertise,
    Reset,
    Open,
    Close,
}

/// The plan of node `n1` (a dual-stack pod CIDR pair) labelled `labels` under `config`.
fn plan(config: &Config, labels: &BTreeMap<String, String>) -> Plan {
    let name: Arc<str> = Arc::from("n1");
    let prefixes = vec![
        "10.5.112.0/24".parse().unwrap(),
        "fd00:5:112::/64".parse().unwrap(),
    ];
    let entry = NodeEntry {
        labels: Arc::new(labels.clone()),
        internal_ipv4: Some(Ipv4Addr::new(10, 5, 1, 10)),
        internal_ipv6: Some("fd00:5::10".parse().unwrap()),
        node_cidrs: prefixes.clone(),
        node_source: Some(CidrSource::NodeSpec),
        source: Some(CidrSource::NodeSpec),
        prefixes,
        ..NodeEntry::new(Arc::clone(&name))
    };
    let view = NodeView::new(
        IpamMode::Kubernetes,
        BTreeMap::from([(name, entry)]),
        Vec::new(),
    );
    routes::plan(
        &view,
        config,
        &LocalNode::new("n1"),
        AnnounceMode::Local,
        &Overrides::default(),
    )
}

/// The specs and routes of every session of `plan`, as the daemon builds them; the
/// Secret `s` holds keys `a` ("one") and `b` ("two") for `password-secret`.
fn sessions(
    plan: &Plan,
) -> (
    BTreeMap<PeerKey, PeerSpec>,
    BTreeMap<PeerKey, Arc<DesiredRoutes>>,
) {
    let run = RunOverrides {
        node_ipv4: Some(Ipv4Addr::new(10, 5, 1, 10)),
        ..RunOverrides::default()
    };
    let mut secrets = SecretsView::new(SecretOrigin::Namespace("kube-system".into()));
    secrets.secrets.insert(
        "s".into(),
        SecretState::Present(BTreeMap::from([
            ("a".to_owned(), Ok(Secret::new("one"))),
            ("b".to_owned(), Ok(Secret::new("two"))),
        ])),
    );
    plan.peers
        .iter()
        .map(|(k, p)| {
            let mut spec = PeerSpec::from_config(&p.peer, &run).unwrap();
            spec.transport.md5_key = peer_md5_key(&p.peer, Some(&secrets)).unwrap();
            ((*k, spec), (*k, Arc::clone(&p.routes)))
        })
        .unzip()
}

/// Every session's action from (old config, old labels) to (new config, new labels).
fn actions(
    old: &Config,
    old_labels: &BTreeMap<String, String>,
    new: &Config,
    new_labels: &BTreeMap<String, String>,
) -> Vec<(PeerKey, SessionAction)> {
    let (old_specs, old_routes) = sessions(&plan(old, old_labels));
    let (new_specs, new_routes) = sessions(&plan(new, new_labels));
    session_changes(&old_specs, &new_specs)
        .0
        .into_iter()
        .map(|(k, change)| {
            let readvertised = old_routes.get(&k) != new_routes.get(&k);
            let action = match change {
                SessionChange::Keep | SessionChange::UpdateLive if readvertised => {
                    SessionAction::Readvertise
                }
                SessionChange::Keep => SessionAction::Keep,
                SessionChange::UpdateLive => SessionAction::Retune,
                SessionChange::Reset => SessionAction::Reset,
                SessionChange::Open => SessionAction::Open,
                SessionChange::Close => SessionAction::Close,
            };
            (k, action)
        })
        .collect()
}

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
        // The Secret's content is not in the config: a reference to another value (key b
        // holds another one) resets, the same one keeps.
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
        // Address pools are LoadBalancer addresses: pod CIDR routes do not carry their
        // advertisements, so nothing is re-sent.
        case("pool advertisement", base(), BASE.replace("  addresses: [10.5.112.0/21]\n", "  addresses: [10.5.112.0/21]\n  bgp-advertisements: [{communities: [65083:9]}]\n"), vec![(A, Keep), (B, Keep), (IBGP, Keep)]),
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
        let got: Vec<(String, SessionAction)> = actions(&old, &c.old_labels, &new, &c.new_labels)
            .into_iter()
            .map(|(k, a)| (k.to_string(), a))
            .collect();
        let mut got_sorted = got.clone();
        got_sorted.sort();
        let mut want: Vec<(String, SessionAction)> =
            c.want.iter().map(|(k, a)| (k.to_string(), *a)).collect();
        want.sort();
        assert_eq!(got_sorted, want, "case {:?}", c.name);
        for (k, a) in &c.want {
            let found = got.iter().find(|(g, _)| g == &key(k).to_string());
            assert_eq!(
                found.map(|(_, a)| *a),
                Some(*a),
                "case {:?} action({k})",
                c.name
            );
        }
    }
}

#[test]
fn initial_plan_opens_the_selected_sessions() {
    let c = ok(BASE);
    let (specs, _) = sessions(&plan(&c, &plain()));
    let changes = session_changes(&BTreeMap::new(), &specs);
    assert_eq!(changes.with(SessionChange::Open), vec![key(A), key(B)]);
    assert!(changes.with(SessionChange::Keep).is_empty());
    assert!(changes.with(SessionChange::Close).is_empty());
    assert!(changes.with(SessionChange::Reset).is_empty());
    assert_eq!(changes.to_string(), "open 10.5.0.1:179, 10.5.0.2:179");
    let changes = session_changes(&specs, &specs);
    assert_eq!(changes.to_string(), "keep 10.5.0.1:179, 10.5.0.2:179");
    assert!(changes.is_noop());
    let (none, _) = sessions(&plan(&ok(""), &plain()));
    assert_eq!(
        session_changes(&BTreeMap::new(), &none).to_string(),
        "no sessions"
    );
}

#[test]
fn plan_reports_conflicts_of_the_new_config() {
    let text = "peers:\n\
        - {peer-address: 10.0.0.1, peer-asn: 65001, my-asn: 65101, node-selectors: [{match-labels: {rack: r1}}]}\n\
        - {peer-address: 10.0.0.1, peer-asn: 65002, my-asn: 65102}\n";
    let c = ok(text);
    let plan = plan(&c, &labels(&[("rack", "r1")]));
    let (specs, _) = sessions(&plan);
    let changes = session_changes(&BTreeMap::new(), &specs);
    assert_eq!(changes.with(SessionChange::Open), vec![key("10.0.0.1:179")]);
    assert_eq!(plan.peer_conflicts.len(), 1);
    assert_eq!(plan.peer_conflicts[0].indexes, [0, 1]);
}
