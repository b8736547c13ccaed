//! deploy/monitoring against the metrics the speaker really exposes: the dashboard JSON
//! and the alerting rules parse, cover what issue #7 asks for, and every metric and
//! label they query exists in a scrape.
//!
//! "A scrape" here is the exposition of a registry after recording one of every event
//! ([`full_scrape`]); a test below proves it holds a sample of every registered family,
//! so a name missing from it is missing from the speaker. `live.rs` runs the same checks
//! against the scrapes of a running speaker with real peers.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use std::sync::Arc;

use podcidr_speaker::alloc::PoolUsage;
use podcidr_speaker::allocate::metrics::{AllocMetrics, ReloadResult, WriteResult};
use podcidr_speaker::bgp::session::State;
use podcidr_speaker::bgp::wire::{Afi, MessageType};
use podcidr_speaker::config::state::ConfigState;
use podcidr_speaker::metrics::labels::DIRECTIONS;
use podcidr_speaker::metrics::Metrics;
use podcidr_speaker::peer::{PeerStatus, RouteRefusal};
use podcidr_speaker::sources::file;
use podcidr_speaker::sources::kube::events::{EventLoss, EventObserver};
use podcidr_speaker::sources::model::{node_view, IpamOverride};
use podcidr_speaker::sources::{Resource, ResourceStatus, SourceStatus};
use serde_json::Value;
use serde_yaml::Value as Yaml;

use crate::exposition::{parse, Scrape};
use crate::{crate_root, outage_dir, peer, t};

/// Labels a scrape target carries besides the speaker's own (the PodMonitor's
/// relabeling adds `node`; Prometheus adds `job` and `instance`).
const TARGET_LABELS: [&str; 5] = ["node", "job", "instance", "pod", "namespace"];

/// A registry after one of every event the daemon records.
pub fn full_scrape() -> Scrape {
    let m = Metrics::new();
    m.set_node(Some("master1"));
    let a = peer("192.0.2.1", 179);
    m.add_peer(a, 65001, t(0));
    m.record_session_state(a, State::Idle, State::Connect, t(1));
    m.record_session_state(a, State::OpenConfirm, State::Established, t(2));
    for dir in DIRECTIONS {
        for ty in [
            MessageType::Open,
            MessageType::Update,
            MessageType::Notification,
            MessageType::Keepalive,
            MessageType::RouteRefresh,
        ] {
            m.record_message(a, dir, ty);
        }
        m.record_notification(a, dir, 6, 2, None, t(3));
    }
    m.set_announced(a, Afi::IPV4, 1);
    m.record_peer_status(&PeerStatus::new(a), t(3));
    m.set_received(a, Afi::IPV4, 0);
    m.record_not_announced(a, Afi::IPV6, RouteRefusal::FamilyNotNegotiated, 1);
    m.record_unannounceable(&crate::dual_stack_plan(None));
    m.record_bfd_state(
        a,
        podcidr_speaker::bfd::State::Up,
        podcidr_speaker::bfd::Diag::None,
        false,
    );
    m.record_bfd_packet(a, podcidr_speaker::peer::Direction::Sent);
    m.record_bfd_packet(a, podcidr_speaker::peer::Direction::Received);
    m.record_bfd_dropped(Some(a), "ttl");
    m.record_bfd_detection(a, Duration::from_millis(300));
    m.record_session_state(a, State::Established, State::Idle, t(4));
    let mut config = ConfigState::new();
    let u =
        config.update_text("peers:\n- {peer-address: 192.0.2.1, peer-asn: 65001, my-asn: 65000}\n");
    m.record_config_reload(&u, &config.status(), t(5));
    let mut sources = SourceStatus::default();
    sources.resources.insert(
        Resource::Nodes,
        ResourceStatus {
            up: true,
            synced: true,
            last_event: Some(t(6)),
            events: 1,
            relists: 1,
            errors: 1,
            last_error: None,
        },
    );
    m.record_source_status(&sources);
    let state = file::load(&outage_dir()).unwrap();
    m.set_view(&node_view(&state, IpamOverride::Auto).unwrap());
    m.observe_event_to_update(Duration::from_millis(4));
    m.heartbeat();
    assert!(m.status(t(7), Instant::now()).ready);
    // The last event of a speaker's life (it makes /readyz fail, so after the check).
    m.record_stop(podcidr_speaker::routes::stop::StopKind::Restart);
    parse(&m.encode()).unwrap()
}

#[test]
fn the_full_scrape_has_a_sample_of_every_registered_family() {
    let s = full_scrape();
    assert!(s.types.len() >= 30, "{} families", s.types.len());
    for family in s.types.keys() {
        assert!(
            s.samples
                .iter()
                .any(|x| s.family_of(&x.name) == Some(family.as_str())),
            "family {family} has no sample: record it in full_scrape"
        );
        assert!(
            family.starts_with("podcidr_speaker_"),
            "{family} is outside the namespace"
        );
        assert!(
            s.help.get(family).is_some_and(|h| !h.is_empty()),
            "{family} has no HELP"
        );
    }
}

/// The `podcidr_speaker_*` names a PromQL expression uses, and the label names each is
/// matched on (`name{label="..."}`), skipping string literals.
pub fn promql_metrics(expr: &str) -> Vec<(String, Vec<String>)> {
    promql_metrics_named(expr, "podcidr_speaker_")
}

/// As [`promql_metrics`], for the names that start with `prefix`.
fn promql_metrics_named(expr: &str, prefix: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if !word.starts_with(prefix) {
                continue;
            }
            let mut labels = Vec::new();
            if chars.get(i) == Some(&'{') {
                let close = chars[i..]
                    .iter()
                    .position(|&c| c == '}')
                    .expect("closing brace")
                    + i;
                let inner: String = chars[i + 1..close].iter().collect();
                // Matchers are `name op "value"`, separated by commas outside quotes.
                let mut quoted = false;
                let mut escaped = false;
                let mut at_name = true;
                let mut name = String::new();
                for ch in inner.chars() {
                    if quoted {
                        match (escaped, ch) {
                            (true, _) => escaped = false,
                            (false, '\\') => escaped = true,
                            (false, '"') => quoted = false,
                            _ => {}
                        }
                    } else if ch == '"' {
                        quoted = true;
                    } else if ch == ',' {
                        at_name = true;
                    } else if at_name && (ch.is_ascii_alphanumeric() || ch == '_') {
                        name.push(ch);
                    } else if at_name && !name.is_empty() {
                        labels.push(std::mem::take(&mut name));
                        at_name = false;
                    }
                }
                i = close + 1;
            }
            out.push((word, labels));
            continue;
        }
        i += 1;
    }
    out
}

/// Label names in `by (...)` / `without (...)` / `on (...)` clauses.
fn promql_grouping_labels(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    for keyword in ["by", "without", "on", "ignoring"] {
        let mut rest = expr;
        let pattern = format!("{keyword} (");
        while let Some(at) = rest.find(&pattern) {
            let before = rest[..at].chars().last();
            let after = &rest[at + pattern.len()..];
            let close = after.find(')').expect("closing parenthesis");
            if before.is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_') {
                out.extend(after[..close].split(',').map(|l| l.trim().to_owned()));
            }
            rest = &after[close..];
        }
    }
    out
}

/// Labels the samples of `name` carry in the scrape.
fn labels_of(s: &Scrape, name: &str) -> BTreeSet<String> {
    s.series(name)
        .iter()
        .flat_map(|x| x.labels.keys().cloned())
        .collect()
}

/// Every metric of `expr` exists in the scrape and every label it is matched or
/// grouped on exists on one of the expression's metrics (or on every target).
pub fn check_expr(s: &Scrape, expr: &str, context: &str) -> Vec<String> {
    let names = s.names();
    let mut problems = Vec::new();
    let metrics = promql_metrics(expr);
    if metrics.is_empty() {
        problems.push(format!(
            "{context}: {expr:?} queries no podcidr_speaker_ metric"
        ));
    }
    let mut available: BTreeSet<String> = TARGET_LABELS.iter().map(|l| (*l).to_owned()).collect();
    available.insert("le".to_owned());
    for (metric, matchers) in &metrics {
        if !names.contains(metric) {
            problems.push(format!("{context}: {metric} is not in the scrape"));
            continue;
        }
        let labels = labels_of(s, metric);
        for m in matchers {
            if !labels.contains(m) && !TARGET_LABELS.contains(&m.as_str()) {
                problems.push(format!("{context}: {metric} has no label {m}"));
            }
        }
        available.extend(labels);
    }
    for l in promql_grouping_labels(expr) {
        if !available.contains(&l) {
            problems.push(format!(
                "{context}: grouping label {l} is on none of its metrics"
            ));
        }
    }
    problems
}

pub fn monitoring(file: &str) -> String {
    std::fs::read_to_string(crate_root().join("deploy/monitoring").join(file)).unwrap()
}

pub fn dashboard_exprs(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dashboard];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                if let (Some(Value::String(expr)), true) =
                    (map.get("expr"), map.contains_key("refId"))
                {
                    out.push((expr.clone(), map["refId"].as_str().unwrap_or("").to_owned()));
                }
                stack.extend(map.values());
            }
            Value::Array(list) => stack.extend(list),
            _ => {}
        }
    }
    out
}

#[test]
fn the_promql_readers_find_names_matchers_and_groupings() {
    assert_eq!(
        promql_metrics(
            r#"sum by (node, peer) (rate(podcidr_speaker_x_total{node=~"a,b", peer!="podcidr_speaker_fake"}[5m])) / podcidr_speaker_y"#
        ),
        vec![
            (
                "podcidr_speaker_x_total".to_owned(),
                vec!["node".to_owned(), "peer".to_owned()]
            ),
            ("podcidr_speaker_y".to_owned(), vec![]),
        ]
    );
    assert_eq!(
        promql_grouping_labels("max by (node) (x) and on (peer) y"),
        vec!["node".to_owned(), "peer".to_owned()]
    );
    let s = full_scrape();
    assert!(check_expr(&s, "podcidr_speaker_session_up == 0", "t").is_empty());
    assert_eq!(check_expr(&s, "podcidr_speaker_nope", "t").len(), 1);
    assert_eq!(
        check_expr(&s, "podcidr_speaker_session_up{afi=\"ipv4\"}", "t").len(),
        1
    );
    assert_eq!(
        check_expr(&s, "sum by (afi) (podcidr_speaker_session_up)", "t").len(),
        1
    );
    assert_eq!(check_expr(&s, "up == 0", "t").len(), 1);
}

#[test]
fn the_dashboard_parses_and_every_query_exists_in_a_scrape() {
    let dashboard: Value = serde_json::from_str(&monitoring("grafana-dashboard.json")).unwrap();
    assert_eq!(dashboard["uid"], "podcidr-speaker");
    let s = full_scrape();
    let exprs = dashboard_exprs(&dashboard);
    assert!(exprs.len() >= 20, "{} queries", exprs.len());
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for (expr, _) in &exprs {
        problems.extend(check_expr(&s, expr, "dashboard"));
        used.extend(promql_metrics(expr).into_iter().map(|(m, _)| m));
    }
    assert!(problems.is_empty(), "{problems:#?}");
    // What the issue asks the dashboard to show: sessions, prefixes per peer, flaps,
    // drift, reload failures.
    for needed in [
        "podcidr_speaker_session_up",
        "podcidr_speaker_announced_prefixes",
        "podcidr_speaker_pending_prefixes",
        "podcidr_speaker_received_prefixes",
        "podcidr_speaker_session_flaps_total",
        "podcidr_speaker_podcidr_drift",
        "podcidr_speaker_podcidr_drift_nodes",
        "podcidr_speaker_config_last_reload_successful",
        "podcidr_speaker_config_reloads_total",
    ] {
        assert!(
            used.contains(needed),
            "the dashboard does not show {needed}"
        );
    }
    // The node variable reads a label every speaker series gets from its target.
    let vars = dashboard["templating"]["list"].as_array().unwrap();
    let node = vars.iter().find(|v| v["name"] == "node").unwrap();
    let definition = node["definition"].as_str().unwrap();
    assert!(check_expr(
        &s,
        definition
            .trim_start_matches("label_values(")
            .trim_end_matches(", node)"),
        "variable"
    )
    .is_empty());

    // Panels: unique ids, a title each, no overlapping grid cells.
    let panels = dashboard["panels"].as_array().unwrap();
    let ids: BTreeSet<u64> = panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), panels.len());
    let mut cells = BTreeMap::new();
    for p in panels {
        let title = p["title"].as_str().unwrap();
        assert!(!title.is_empty());
        if p["type"] != "row" {
            assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
            assert!(!p["targets"].as_array().unwrap().is_empty(), "{title}");
        }
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_u64().unwrap(),
            g["y"].as_u64().unwrap(),
            g["w"].as_u64().unwrap(),
            g["h"].as_u64().unwrap(),
        );
        assert!(x + w <= 24, "{title} is wider than the grid");
        for cx in x..x + w {
            for cy in y..y + h {
                if let Some(other) = cells.insert((cx, cy), title) {
                    panic!("{title} overlaps {other} at ({cx}, {cy})");
                }
            }
        }
    }
}

/// One alerting rule: (name, expr, for, severity, annotation texts).
pub type Rule = (String, String, Option<String>, String, Vec<String>);

/// The speaker's rule group: its alerts query the speaker's own metrics.
pub const SPEAKER_GROUP: &str = "podcidr-speaker";
/// The allocator's rule group (`podcidr-speaker allocate`, issue 30).
const ALLOCATOR_GROUP: &str = "podcidr-allocator";

/// The groups named `name` of a `groups:` list, as a `groups:` list.
pub fn group(groups: &Yaml, name: &str) -> Yaml {
    Yaml::Sequence(
        groups
            .as_sequence()
            .unwrap()
            .iter()
            .filter(|g| g["name"] == name)
            .cloned()
            .collect(),
    )
}

pub fn rules(groups: &Yaml) -> Vec<Rule> {
    let mut out = Vec::new();
    for group in groups.as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            let name = rule["alert"]
                .as_str()
                .expect("alerting rules only")
                .to_owned();
            let annotations = rule["annotations"]
                .as_mapping()
                .unwrap_or_else(|| panic!("{name}: annotations"));
            out.push((
                name.clone(),
                rule["expr"].as_str().unwrap().to_owned(),
                rule.get("for").map(|f| f.as_str().unwrap().to_owned()),
                rule["labels"]["severity"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name}: severity"))
                    .to_owned(),
                annotations
                    .values()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect(),
            ));
        }
    }
    out
}

#[test]
fn the_rules_file_and_the_prometheusrule_hold_the_same_groups() {
    let plain: Yaml =
        serde_yaml::from_str(&monitoring("rules/podcidr-speaker.rules.yaml")).unwrap();
    let operator: Yaml = serde_yaml::from_str(&monitoring("prometheusrule.yaml")).unwrap();
    assert_eq!(operator["kind"], "PrometheusRule");
    assert_eq!(operator["metadata"]["namespace"], "kube-system");
    assert_eq!(operator["spec"]["groups"], plain["groups"]);
}

#[test]
fn every_alert_queries_scraped_metrics_and_the_issue_alerts_exist() {
    let operator: Yaml = serde_yaml::from_str(&monitoring("prometheusrule.yaml")).unwrap();
    let s = full_scrape();
    let all = rules(&group(&operator["spec"]["groups"], SPEAKER_GROUP));
    let mut problems = Vec::new();
    for (name, expr, _, severity, annotations) in &all {
        problems.extend(check_expr(&s, expr, name));
        if !["critical", "warning"].contains(&severity.as_str()) {
            problems.push(format!("{name}: severity {severity}"));
        }
        // Templates may only name labels the alert's series carry.
        let mut labels: BTreeSet<String> = TARGET_LABELS.iter().map(|l| (*l).to_owned()).collect();
        for (metric, _) in promql_metrics(expr) {
            labels.extend(labels_of(&s, &metric));
        }
        for text in annotations {
            for part in text.split("$labels.").skip(1) {
                let label: String = part
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !labels.contains(&label) {
                    problems.push(format!("{name}: template uses $labels.{label}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");

    let find = |n: &str| {
        all.iter()
            .find(|r| r.0 == n)
            .unwrap_or_else(|| panic!("no alert {n}"))
    };
    // Issue #7: session down for 2m, drift present, config reload failing.
    let down = find("PodCIDRSpeakerSessionDown");
    assert_eq!(
        (down.1.as_str(), down.2.as_deref()),
        ("podcidr_speaker_session_up == 0", Some("2m"))
    );
    let drift = find("PodCIDRDrift");
    assert_eq!(drift.1, "podcidr_speaker_podcidr_drift == 1");
    let reload = find("PodCIDRSpeakerConfigReloadFailing");
    assert_eq!(
        reload.1,
        "podcidr_speaker_config_last_reload_successful == 0"
    );
}

/// A registry of `podcidr-speaker allocate` after one of every event it records (a
/// test below proves it holds a sample of every family), as [`full_scrape`] is the
/// speaker's.
pub fn allocator_scrape() -> Scrape {
    let m = AllocMetrics::new("allocator-0").unwrap();
    m.leader.set(1);
    m.leader_transitions.inc();
    m.pools(&[PoolUsage {
        name: Arc::from("default"),
        total: 256,
        in_use: 3,
    }]);
    m.allocations.with_label_values(&["default"]).inc();
    m.pending.set(1);
    m.config_refused.set(1);
    m.reload(ReloadResult::Refused);
    m.write(WriteResult::Ok);
    m.not_written(EventLoss::ALL[0]);
    parse(&m.encode()).unwrap()
}

#[test]
fn the_allocator_scrape_has_a_sample_of_every_family() {
    let s = allocator_scrape();
    assert!(s.types.len() >= 11, "{} families", s.types.len());
    for family in s.types.keys() {
        assert!(
            s.samples
                .iter()
                .any(|x| s.family_of(&x.name) == Some(family.as_str())),
            "family {family} has no sample: record it in allocator_scrape"
        );
        assert!(
            family.starts_with("podcidr_allocator_"),
            "{family} is outside the allocator's namespace"
        );
    }
}

/// Problems of one allocator alert: a metric not in the allocator's scrape (or one of the
/// speaker's), a label matched, grouped on or templated that none of its metrics carries.
fn allocator_alert_problems(s: &Scrape, rule: &Rule) -> Vec<String> {
    let (name, expr, _, severity, annotations) = rule;
    let mut problems = Vec::new();
    if !promql_metrics(expr).is_empty() {
        problems.push(format!("{name}: queries the speaker's metrics"));
    }
    let metrics = promql_metrics_named(expr, "podcidr_allocator_");
    if metrics.is_empty() {
        problems.push(format!("{name}: queries no podcidr_allocator_ metric"));
    }
    let names = s.names();
    let mut labels: BTreeSet<String> = TARGET_LABELS.iter().map(|l| (*l).to_owned()).collect();
    for (metric, matchers) in &metrics {
        if !names.contains(metric) {
            problems.push(format!("{name}: {metric} is not in the allocator's scrape"));
            continue;
        }
        let own = labels_of(s, metric);
        for m in matchers {
            if !own.contains(m) && !TARGET_LABELS.contains(&m.as_str()) {
                problems.push(format!("{name}: {metric} has no label {m}"));
            }
        }
        labels.extend(own);
    }
    for l in promql_grouping_labels(expr) {
        if !labels.contains(&l) {
            problems.push(format!(
                "{name}: grouping label {l} is on none of its metrics"
            ));
        }
    }
    for text in annotations {
        for part in text.split("$labels.").skip(1) {
            let label: String = part
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !labels.contains(&label) {
                problems.push(format!("{name}: template uses $labels.{label}"));
            }
        }
    }
    if !["critical", "warning"].contains(&severity.as_str()) {
        problems.push(format!("{name}: severity {severity}"));
    }
    problems
}

#[test]
fn the_allocator_alerts_query_the_allocator_metrics_and_the_issue_alerts_exist() {
    let operator: Yaml = serde_yaml::from_str(&monitoring("prometheusrule.yaml")).unwrap();
    let groups = &operator["spec"]["groups"];
    let names: Vec<&str> = groups
        .as_sequence()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [SPEAKER_GROUP, ALLOCATOR_GROUP],
        "every group is checked against its own metrics"
    );
    let s = allocator_scrape();
    let all = rules(&group(groups, ALLOCATOR_GROUP));
    let problems: Vec<String> = all
        .iter()
        .flat_map(|r| allocator_alert_problems(&s, r))
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");

    // The checker sees what it must refuse.
    let rule = |expr: &str, text: &str| -> Rule {
        (
            "T".into(),
            expr.into(),
            None,
            "warning".into(),
            vec![text.into()],
        )
    };
    for (expr, text) in [
        ("podcidr_allocator_nope == 1", ""),
        ("podcidr_allocator_leader{pool=\"x\"} == 1", ""),
        ("max by (pool) (podcidr_allocator_leader) == 0", ""),
        ("podcidr_allocator_leader == 0", "{{ $labels.pool }}"),
        (
            "podcidr_speaker_session_up == 0 and podcidr_allocator_leader == 1",
            "",
        ),
        ("up == 0", ""),
    ] {
        assert!(
            !allocator_alert_problems(&s, &rule(expr, text)).is_empty(),
            "accepted {expr:?} with {text:?}"
        );
    }
    assert_eq!(
        allocator_alert_problems(
            &s,
            &rule(
                "podcidr_allocator_pool_addresses_in_use{pool=\"a\"} > 0",
                "{{ $labels.pool }} {{ $labels.namespace }}"
            )
        ),
        Vec::<String>::new()
    );

    // Issue 30's alerts: no leader, a pool nearly full and full, Services pending, a
    // config refused; each on the metric that says it.
    let find = |n: &str| {
        all.iter()
            .find(|r| r.0 == n)
            .unwrap_or_else(|| panic!("no alert {n}"))
    };
    for (alert, metric) in [
        ("PodCIDRAllocatorNoLeader", "podcidr_allocator_leader"),
        (
            "PodCIDRAllocatorPoolNearlyFull",
            "podcidr_allocator_pool_addresses_in_use",
        ),
        (
            "PodCIDRAllocatorPoolFull",
            "podcidr_allocator_pool_addresses_in_use",
        ),
        (
            "PodCIDRAllocatorServicesPending",
            "podcidr_allocator_services_pending",
        ),
        (
            "PodCIDRAllocatorConfigRefused",
            "podcidr_allocator_config_refused",
        ),
    ] {
        let (_, expr, for_, ..) = find(alert);
        assert!(
            promql_metrics_named(expr, "podcidr_allocator_")
                .iter()
                .any(|(m, _)| m == metric),
            "{alert} must query {metric}: {expr}"
        );
        assert!(for_.is_some(), "{alert}: a `for:` so a blip does not page");
    }
}

#[test]
fn the_component_renders_the_rules_and_the_dashboard_and_the_pods_carry_scrape_annotations() {
    let kustomization: Yaml = serde_yaml::from_str(&monitoring("kustomization.yaml")).unwrap();
    let resources: Vec<&str> = kustomization["resources"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(resources, ["podmonitor.yaml", "prometheusrule.yaml"]);
    let generator = &kustomization["configMapGenerator"][0];
    assert_eq!(
        generator["files"][0],
        "podcidr-speaker.json=grafana-dashboard.json"
    );
    assert_eq!(generator["options"]["labels"]["grafana_dashboard"], "1");

    let podmonitor: Yaml = serde_yaml::from_str(&monitoring("podmonitor.yaml")).unwrap();
    let endpoint = &podmonitor["spec"]["podMetricsEndpoints"][0];
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(
        endpoint["honorLabels"], true,
        "drift's node label must survive the scrape"
    );

    let ds: Yaml = serde_yaml::from_str(
        &std::fs::read_to_string(crate_root().join("deploy/base/daemonset.yaml")).unwrap(),
    )
    .unwrap();
    let template = &ds["spec"]["template"];
    let annotations = &template["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/path"], "/metrics");
    let port = template["spec"]["containers"][0]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "metrics")
        .expect("a metrics port");
    assert_eq!(
        annotations["prometheus.io/port"].as_str().unwrap(),
        port["containerPort"].as_u64().unwrap().to_string()
    );
    assert_eq!(endpoint["port"], "metrics");
}
