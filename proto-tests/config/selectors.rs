//! `node-selectors`: which nodes a peer is for (absent, empty list and empty selector
//! select every node; the list is ORed; inside a selector everything is ANDed), and
//! Kubernetes' validation messages.

use crate::{errors, labels, ok, peer};

/// Whether a one-peer config with these node-selectors selects a node with `labels`.
fn selects(selectors: &str, node: &[(&str, &str)]) -> bool {
    let c = ok(&peer(&[("node-selectors", selectors)]));
    c.peers[0].selects(&labels(node))
}

#[test]
fn selection_table() {
    let route83 = [("kubernetes/route", "bgp-peer-83"), ("zone", "a")];
    let route84 = [("kubernetes/route", "bgp-peer-84"), ("zone", "b")];
    let bare: [(&str, &str); 0] = [];
    let match83 = "[{match-labels: {kubernetes/route: bgp-peer-83}}]";
    type Labels<'a> = &'a [(&'a str, &'a str)];
    let cases: &[(&str, Labels, bool)] = &[
        // Absent / empty list / empty selector: every node, even one without labels.
        ("~", &bare, true),
        ("[]", &bare, true),
        ("[{}]", &bare, true),
        ("[{match-labels: {}, match-expressions: []}]", &route84, true),
        (match83, &route83, true),
        (match83, &route84, false),
        (match83, &bare, false),
        // ORed list.
        ("[{match-labels: {kubernetes/route: bgp-peer-83}}, {match-labels: {zone: b}}]", &route84, true),
        ("[{match-labels: {kubernetes/route: bgp-peer-83}}, {match-labels: {zone: c}}]", &route84, false),
        // An empty selector in the list selects everything.
        ("[{match-labels: {zone: c}}, {}]", &route84, true),
        // ANDed inside one selector: labels and expressions.
        ("[{match-labels: {kubernetes/route: bgp-peer-83, zone: a}}]", &route83, true),
        ("[{match-labels: {kubernetes/route: bgp-peer-83, zone: b}}]", &route83, false),
        ("[{match-labels: {zone: a}, match-expressions: [{key: kubernetes/route, operator: In, values: [bgp-peer-84]}]}]", &route83, false),
        ("[{match-labels: {zone: a}, match-expressions: [{key: kubernetes/route, operator: In, values: [bgp-peer-83, x]}]}]", &route83, true),
        // Each operator, on a node with and without the label.
        ("[{match-expressions: [{key: zone, operator: In, values: [a, b]}]}]", &route84, true),
        ("[{match-expressions: [{key: zone, operator: In, values: [a, b]}]}]", &bare, false),
        ("[{match-expressions: [{key: zone, operator: NotIn, values: [a]}]}]", &route83, false),
        ("[{match-expressions: [{key: zone, operator: NotIn, values: [a]}]}]", &route84, true),
        ("[{match-expressions: [{key: zone, operator: NotIn, values: [a]}]}]", &bare, true),
        ("[{match-expressions: [{key: zone, operator: Exists}]}]", &route83, true),
        ("[{match-expressions: [{key: zone, operator: Exists}]}]", &bare, false),
        ("[{match-expressions: [{key: zone, operator: DoesNotExist}]}]", &route83, false),
        ("[{match-expressions: [{key: zone, operator: DoesNotExist, values: []}]}]", &bare, true),
        // Label values are compared exactly; an empty value is a value.
        ("[{match-labels: {zone: A}}]", &route83, false),
        ("[{match-labels: {gpu: \"\"}}]", &[("gpu", "")], true),
        ("[{match-labels: {gpu: \"\"}}]", &bare, false),
    ];
    for (selectors, node, want) in cases {
        assert_eq!(selects(selectors, node), *want, "{selectors} on {node:?}");
    }
}

#[test]
fn node_peers_of_the_cilium_layout() {
    let c = ok(&std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/cilium-bgp-config.yaml"
    ))
    .unwrap());
    let plain = c.peers_for_node(&labels(&[("kubernetes.io/hostname", "n1")]));
    let keys: Vec<String> = plain.peers.keys().map(ToString::to_string).collect();
    assert_eq!(keys, ["10.5.0.1:179", "10.5.0.2:179"]);
    let rack83 = c.peers_for_node(&labels(&[("kubernetes/route", "bgp-peer-83")]));
    let keys: Vec<String> = rack83.peers.keys().map(ToString::to_string).collect();
    assert_eq!(
        keys,
        [
            "10.5.0.1:179",
            "10.5.0.2:179",
            "10.5.83.251:179",
            "10.5.83.252:179"
        ]
    );
    assert!(rack83.conflicts.is_empty());
}

#[test]
fn clashing_entries_for_one_node() {
    // Per-rack routers share an address; a node carrying both labels clashes and the
    // first entry wins.
    let text = "peers:\n\
        - {peer-address: 10.0.0.1, peer-asn: 65001, my-asn: 65101, node-selectors: [{match-labels: {rack: r1}}]}\n\
        - {peer-address: 10.0.0.1, peer-asn: 65002, my-asn: 65102, node-selectors: [{match-labels: {row: x}}]}\n";
    let c = ok(text);
    let n = c.peers_for_node(&labels(&[("rack", "r2"), ("row", "x")]));
    assert_eq!(
        n.peers.values().map(|p| p.peer_asn).collect::<Vec<_>>(),
        [65002]
    );
    assert!(n.conflicts.is_empty());
    let n = c.peers_for_node(&labels(&[("rack", "r1"), ("row", "x")]));
    assert_eq!(
        n.peers.values().map(|p| p.peer_asn).collect::<Vec<_>>(),
        [65001]
    );
    assert_eq!(n.conflicts.len(), 1);
    assert_eq!(n.conflicts[0].indexes, [0, 1]);
    assert_eq!(
        n.conflicts[0].to_string(),
        "peers[0], peers[1] all select this node for 10.0.0.1:179; using peers[0]"
    );
}

#[test]
fn selector_errors_are_kubernetes_messages() {
    let p = "peers[0].node-selectors[0]";
    let name_regex = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let value_regex = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("[{match-expressions: [{key: zone, operator: In}]}]", vec![format!("{p}.match-expressions[0].values: [] for 'in', 'notin' operators, values set can't be empty")]),
        ("[{match-expressions: [{key: zone, operator: NotIn, values: []}]}]", vec![format!("{p}.match-expressions[0].values: [] for 'in', 'notin' operators, values set can't be empty")]),
        ("[{match-expressions: [{key: zone, operator: Exists, values: [a]}]}]", vec![format!(r#"{p}.match-expressions[0].values: ["a"] values set must be empty for exists and does not exist"#)]),
        ("[{match-expressions: [{key: zone, operator: DoesNotExist, values: [a, b]}]}]", vec![format!(r#"{p}.match-expressions[0].values: ["a", "b"] values set must be empty for exists and does not exist"#)]),
        ("[{match-expressions: [{key: zone, operator: Equals, values: [a]}]}]", vec![format!(r#"{p}.match-expressions[0].operator: "Equals" is not a valid label selector operator"#)]),
        ("[{match-expressions: [{key: zone, operator: notin, values: [a]}]}]", vec![format!(r#"{p}.match-expressions[0].operator: "notin" is not a valid label selector operator, did you mean "NotIn"?"#)]),
        ("[{match-expressions: [{key: zone, values: [a]}]}]", vec![format!("{p}.match-expressions[0].operator: is required")]),
        ("[{match-expressions: [{operator: Exists}]}]", vec![format!("{p}.match-expressions[0].key: is required")]),
        ("[{match-expressions: [{key: -zone, operator: Exists}]}]", vec![format!(r#"{p}.match-expressions[0].key: "-zone" name part {name_regex}"#)]),
        ("[{match-expressions: [{key: zone, operator: In, values: [ok, -bad]}]}]", vec![format!(r#"{p}.match-expressions[0].values[1]: "-bad" {value_regex}"#)]),
        ("[{match-labels: {a/b/c: x}}]", vec![format!(r#"{p}.match-labels: "a/b/c" a qualified name {name_regex} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"#)]),
        ("[{match-labels: {zone: \"a b\"}}]", vec![format!(r#"{p}.match-labels.zone: "a b" {value_regex}"#)]),
        ("[{match-labels: {zone: [a]}}]", vec![format!(r#"{p}.match-labels.zone: a list [a] must be a label value (a single string such as "rack-1")"#)]),
        ("[{matchLabels: {zone: a}}]", vec![format!(r#"{p}: unknown key "matchLabels", did you mean "match-labels"?"#)]),
        // Sorted by position: the missing values are reported where the expression starts.
        ("[{match-expressions: [{key: zone, operator: In, value: [a]}]}]", vec![
            format!("{p}.match-expressions[0].values: [] for 'in', 'notin' operators, values set can't be empty"),
            format!(r#"{p}.match-expressions[0]: unknown key "value", did you mean "values"?"#),
        ]),
    ];
    for (selectors, want) in &cases {
        let text = peer(&[("node-selectors", selectors)]);
        assert_eq!(errors(&text), *want, "{selectors}");
    }
}
