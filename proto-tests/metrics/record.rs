//! Every `record_*` / `set_*` path of `Metrics`, checked through the text exposition
//! (parsed strictly) and the `/status` document, which must tell the same story.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use podcidr_speaker::bgp::session::{Finding, SessionError, State, Stats};
use podcidr_speaker::bgp::wire::{Afi, AfiSafi, MessageType};
use podcidr_speaker::config::state::ConfigState;
use podcidr_speaker::config::PeerKey;
use podcidr_speaker::metrics::{Direction, Metrics, PeerMetrics};
use podcidr_speaker::peer::{PeerError, PeerObserver, PeerStatus, RouteRefusal};
use podcidr_speaker::sources::file;
use podcidr_speaker::sources::model::{node_view, IpamOverride};
use podcidr_speaker::sources::{Resource, ResourceStatus, SourceStatus};

use crate::exposition::{parse, Scrape};
use crate::{dual_stack_plan, outage_dir, peer, t};

fn scrape(m: &Metrics) -> Scrape {
    let text = m.encode();
    parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn v(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    s.value(name, labels)
        .unwrap_or_else(|| panic!("no series {name}{labels:?}"))
}

const STATES: [&str; 6] = [
    "idle",
    "connect",
    "active",
    "opensent",
    "openconfirm",
    "established",
];

fn assert_one_hot(s: &Scrape, p: &str, state: &str) {
    for st in STATES {
        assert_eq!(
            v(
                s,
                "podcidr_speaker_session_state",
                &[("peer", p), ("state", st)]
            ),
            f64::from(u8::from(st == state)),
            "{p} state {st} while in {state}"
        );
    }
}

#[test]
fn a_fresh_registry_exposes_build_info_and_zeroed_globals() {
    let m = Metrics::new();
    let s = scrape(&m);
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    for name in [
        "podcidr_speaker_config_loaded",
        "podcidr_speaker_config_last_reload_successful",
        "podcidr_speaker_view_nodes",
        "podcidr_speaker_podcidr_drift_nodes",
        "podcidr_speaker_podcidr_conflicts",
        "podcidr_speaker_refused_prefixes",
        "podcidr_speaker_event_to_update_seconds_count",
    ] {
        assert_eq!(v(&s, name, &[]), 0.0, "{name}");
    }
    assert!(s.with_label("peer", "192.0.2.1:179").is_empty());
    assert!(!m.ready());
}

#[test]
fn a_declared_peer_is_down_and_idle_until_it_moves() {
    let m = Metrics::new();
    let a = peer("192.0.2.1", 179);
    m.add_peer(a, 65001, t(100));
    let s = scrape(&m);
    let p = "192.0.2.1:179";
    assert_eq!(v(&s, "podcidr_speaker_session_up", &[("peer", p)]), 0.0);
    assert_one_hot(&s, p, "idle");
    assert_eq!(
        v(&s, "podcidr_speaker_session_flaps_total", &[("peer", p)]),
        0.0
    );
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_session_established_timestamp_seconds",
            &[("peer", p)]
        ),
        0.0
    );
    assert_eq!(
        v(&s, "podcidr_speaker_pending_prefixes", &[("peer", p)]),
        0.0
    );
    let status = m.status(t(130), Instant::now());
    assert_eq!(status.peers.len(), 1);
    let r = &status.peers[0];
    assert_eq!(
        (r.asn, r.state.as_str(), r.up),
        (Some(65001), "idle", false)
    );
    assert_eq!((r.state_seconds, r.uptime_seconds), (30, None));
}

#[test]
fn a_session_life_moves_state_timestamps_flaps_and_clears_prefixes() {
    let m = Metrics::new();
    let a = peer("192.0.2.1", 179);
    let p = "192.0.2.1:179";
    m.add_peer(a, 65001, t(0));
    let path = [
        (State::Idle, State::Connect),
        (State::Connect, State::OpenSent),
        (State::OpenSent, State::OpenConfirm),
    ];
    for (i, (from, to)) in path.into_iter().enumerate() {
        m.record_session_state(a, from, to, t(i as u64 + 1));
        assert_one_hot(&scrape(&m), p, to.as_str());
    }
    m.record_session_state(a, State::OpenConfirm, State::Established, t(10));
    m.set_announced(a, Afi::IPV4, 3);
    m.set_announced(a, Afi::IPV6, 1);
    m.set_received(a, Afi::IPV4, 7);
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_session_up", &[("peer", p)]), 1.0);
    assert_one_hot(&s, p, "established");
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_session_established_timestamp_seconds",
            &[("peer", p)]
        ),
        10.0
    );
    let status = m.status(t(70), Instant::now());
    assert_eq!(status.peers[0].uptime_seconds, Some(60));
    assert_eq!(status.peers[0].announced_total(), 4);
    assert_eq!(status.peers[0].received_total(), 7);

    // The peer drops: one flap, our routes and its routes are gone with the session.
    m.record_session_state(a, State::Established, State::Idle, t(100));
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_session_up", &[("peer", p)]), 0.0);
    assert_one_hot(&s, p, "idle");
    assert_eq!(
        v(&s, "podcidr_speaker_session_flaps_total", &[("peer", p)]),
        1.0
    );
    for afi in ["ipv4", "ipv6"] {
        assert_eq!(
            v(
                &s,
                "podcidr_speaker_announced_prefixes",
                &[("peer", p), ("afi", afi)]
            ),
            0.0
        );
    }
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_received_prefixes",
            &[("peer", p), ("afi", "ipv4")]
        ),
        0.0
    );
    // The last establishment stays visible while down.
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_session_established_timestamp_seconds",
            &[("peer", p)]
        ),
        10.0
    );
    let status = m.status(t(105), Instant::now());
    assert_eq!(
        (
            status.peers[0].uptime_seconds,
            status.peers[0].state_seconds
        ),
        (None, 5)
    );

    // Back up: a new timestamp, still one flap; a transition that never left
    // Established is not a flap.
    m.record_session_state(a, State::OpenConfirm, State::Established, t(200));
    m.record_session_state(a, State::Established, State::Established, t(201));
    let s = scrape(&m);
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_session_established_timestamp_seconds",
            &[("peer", p)]
        ),
        200.0
    );
    assert_eq!(
        v(&s, "podcidr_speaker_session_flaps_total", &[("peer", p)]),
        1.0
    );
    assert_eq!(m.status(t(201), Instant::now()).peers[0].flaps, 1);
}

#[test]
fn messages_are_counted_per_type_and_direction() {
    let m = Metrics::new();
    let a = peer("2001:db8::1", 1179);
    let p = "[2001:db8::1]:1179";
    m.record_message(a, Direction::Sent, MessageType::Open);
    m.record_message(a, Direction::Received, MessageType::Open);
    m.record_messages(a, Direction::Sent, MessageType::Keepalive, 5);
    m.record_message(a, Direction::Sent, MessageType::Update);
    m.record_message(a, Direction::Received, MessageType::RouteRefresh);
    let s = scrape(&m);
    let sent = |t: &str| {
        v(
            &s,
            "podcidr_speaker_messages_sent_total",
            &[("peer", p), ("type", t)],
        )
    };
    let recv = |t: &str| {
        v(
            &s,
            "podcidr_speaker_messages_received_total",
            &[("peer", p), ("type", t)],
        )
    };
    assert_eq!(
        (sent("open"), sent("keepalive"), sent("update")),
        (1.0, 5.0, 1.0)
    );
    assert_eq!((recv("open"), recv("route_refresh")), (1.0, 1.0));
    assert_eq!(
        s.value(
            "podcidr_speaker_messages_received_total",
            &[("peer", p), ("type", "keepalive")]
        ),
        None,
        "a type never seen has no series"
    );
    let status = m.status(SystemTime::now(), Instant::now());
    assert_eq!(
        (
            status.peers[0].messages_sent,
            status.peers[0].messages_received
        ),
        (7, 2)
    );
}

#[test]
fn notifications_are_counted_by_bounded_code_labels_and_text_stays_out_of_labels() {
    let m = Metrics::new();
    let a = peer("192.0.2.1", 179);
    let p = "192.0.2.1:179";
    m.record_notification(
        a,
        Direction::Received,
        6,
        2,
        Some("maintenance until 18:00"),
        t(5),
    );
    m.record_notification(a, Direction::Sent, 4, 0, None, t(6));
    m.record_notification(a, Direction::Received, 0x2a, 0x99, None, t(7));
    m.record_notification(a, Direction::Received, 0x63, 0x01, None, t(8));
    let s = scrape(&m);
    let n = |dir: &str, code: &str, sub: &str| {
        s.value(
            "podcidr_speaker_notifications_total",
            &[
                ("peer", p),
                ("direction", dir),
                ("code", code),
                ("subcode", sub),
            ],
        )
    };
    assert_eq!(n("received", "6", "2"), Some(1.0));
    assert_eq!(n("sent", "4", "0"), Some(1.0));
    assert_eq!(n("received", "other", "other"), Some(2.0));
    assert_eq!(s.series("podcidr_speaker_notifications_total").len(), 3);
    assert!(!m.encode().contains("maintenance"));
    let last_error = |at: u64| {
        m.status(t(at), Instant::now()).peers[0]
            .last_error
            .clone()
            .unwrap()
    };
    // Without a text, the registry's name of the codes.
    assert_eq!(
        last_error(9),
        "received notification 99/1: unknown error code"
    );
    // With one (the driver's: the name and any shutdown communication), that text.
    m.record_notification(
        a,
        Direction::Received,
        6,
        2,
        Some("cease: administrative shutdown: \"maintenance\""),
        t(10),
    );
    assert_eq!(
        last_error(11),
        "received notification 6/2: cease: administrative shutdown: \"maintenance\""
    );
    m.record_notification(a, Direction::Sent, 4, 0, Some(""), t(11));
    assert_eq!(last_error(11), "sent notification 4/0: hold timer expired");
    m.record_error(a, "tcp connection failed", t(12));
    assert_eq!(
        m.status(t(12), Instant::now()).peers[0]
            .last_error
            .as_deref(),
        Some("tcp connection failed")
    );
}

#[test]
fn a_peer_cannot_grow_the_notification_series_without_bound() {
    let m = Metrics::new();
    let a = peer("192.0.2.1", 179);
    for code in 0..=u8::MAX {
        for subcode in (0..=u8::MAX).step_by(3) {
            m.record_notification(a, Direction::Received, code, subcode, None, t(1));
        }
    }
    let s = scrape(&m);
    let series = s.series("podcidr_speaker_notifications_total");
    assert!(series.len() <= 56, "{} series", series.len());
    let total: f64 = series.iter().map(|x| x.value).sum();
    assert_eq!(total, 256.0 * 86.0, "every notification is still counted");
}

#[test]
fn prefix_gauges_follow_the_latest_counts_per_family() {
    let m = Metrics::new();
    let a = peer("192.0.2.1", 179);
    let p = "192.0.2.1:179";
    m.set_announced(a, Afi::IPV4, 10);
    m.set_announced(a, Afi::IPV4, 12);
    m.set_announced(a, Afi::IPV6, 2);
    m.record_peer_status(&peer_status(a, 5, None), SystemTime::now());
    m.set_received(a, Afi::IPV6, 1);
    m.set_received(a, Afi(25), 3);
    let s = scrape(&m);
    let g = |name: &str, afi: &str| v(&s, name, &[("peer", p), ("afi", afi)]);
    assert_eq!(g("podcidr_speaker_announced_prefixes", "ipv4"), 12.0);
    assert_eq!(g("podcidr_speaker_announced_prefixes", "ipv6"), 2.0);
    assert_eq!(g("podcidr_speaker_received_prefixes", "ipv6"), 1.0);
    assert_eq!(g("podcidr_speaker_received_prefixes", "other"), 3.0);
    assert_eq!(
        v(&s, "podcidr_speaker_pending_prefixes", &[("peer", p)]),
        5.0
    );
    m.record_peer_status(&peer_status(a, 0, None), SystemTime::now());
    assert_eq!(
        v(
            &scrape(&m),
            "podcidr_speaker_pending_prefixes",
            &[("peer", p)]
        ),
        0.0
    );
    let status = m.status(SystemTime::now(), Instant::now());
    assert_eq!(status.peers[0].announced["ipv4"], 12);
    assert_eq!(status.peers[0].received["other"], 3);
}

#[test]
fn removing_a_peer_deletes_every_series_it_had_and_only_those() {
    let m = Metrics::new();
    let a = peer("192.0.2.1", 179);
    let b = peer("192.0.2.2", 179);
    for k in [a, b] {
        m.add_peer(k, 65001, t(0));
        m.record_session_state(k, State::OpenConfirm, State::Established, t(1));
        m.record_message(k, Direction::Sent, MessageType::Update);
        m.record_message(k, Direction::Received, MessageType::Keepalive);
        m.record_notification(k, Direction::Received, 6, 2, None, t(2));
        m.record_notification(k, Direction::Sent, 1, 200, None, t(2));
        m.set_announced(k, Afi::IPV4, 1);
        m.set_announced(k, Afi::IPV6, 1);
        m.set_received(k, Afi::IPV4, 1);
        m.record_peer_status(&peer_status(k, 2, None), SystemTime::now());
        m.record_session_state(k, State::Established, State::Idle, t(3));
        m.record_collision_cease(k);
    }
    let before = scrape(&m);
    let a_series = before.with_label("peer", "192.0.2.1:179").len();
    let b_series = before.with_label("peer", "192.0.2.2:179").len();
    // up, six states, established, flaps, 2 message types, 2 notifications, 2
    // announced families, 1 received, pending, collision Ceases, second speaker.
    assert_eq!(a_series, 19);
    assert_eq!(a_series, b_series);

    m.remove_peer(a);
    let after = scrape(&m);
    assert_eq!(after.with_label("peer", "192.0.2.1:179"), Vec::<&_>::new());
    assert_eq!(after.with_label("peer", "192.0.2.2:179").len(), b_series);
    assert_eq!(after.samples.len(), before.samples.len() - a_series);
    assert!(m
        .status(t(4), Instant::now())
        .peers
        .iter()
        .all(|p| p.peer == "192.0.2.2:179"));

    // The stopping task's last reports do not bring the peer back...
    m.record_session_state(a, State::Established, State::Idle, t(5));
    m.record_notification(a, Direction::Sent, 6, 3, None, t(5));
    m.record_message(a, Direction::Sent, MessageType::Notification);
    m.record_peer_status(&peer_status(a, 0, None), SystemTime::now());
    assert!(scrape(&m).with_label("peer", "192.0.2.1:179").is_empty());
    // ...but adding it again does, from zero.
    m.add_peer(a, 65002, t(6));
    let again = scrape(&m);
    assert_eq!(
        v(
            &again,
            "podcidr_speaker_session_flaps_total",
            &[("peer", "192.0.2.1:179")]
        ),
        0.0
    );
    assert_eq!(m.status(t(6), Instant::now()).peers[0].asn, Some(65002));
}

const GOOD: &str = "peers:\n- {peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001}\n";
const GOOD2: &str = "peers:\n- {peer-address: 10.0.0.2, peer-asn: 65000, my-asn: 65001}\n";
const BAD: &str =
    "peers:\n- {peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001, hold-time: 2s}\n";

#[test]
fn config_reloads_set_loaded_success_time_and_one_fingerprint_series() {
    let m = Metrics::new();
    let mut state = ConfigState::new();

    let u = state.update_text(BAD);
    m.record_config_reload(&u, &state.status(), t(10));
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_config_loaded", &[]), 0.0);
    assert_eq!(
        v(&s, "podcidr_speaker_config_last_reload_successful", &[]),
        0.0
    );
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_config_last_reload_timestamp_seconds",
            &[]
        ),
        10.0
    );
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_config_reloads_total",
            &[("result", "failure")]
        ),
        1.0
    );
    assert!(s.series("podcidr_speaker_config_info").is_empty());
    let report = m.status(t(10), Instant::now()).config;
    assert_eq!(
        report.rejected,
        vec![r#"peers[0].hold-time: "2s" must be 0 or at least 3s"#.to_owned()]
    );
    assert!(
        !m.encode().contains("hold-time"),
        "error text is never a label"
    );

    let u = state.update_text(GOOD);
    m.record_config_reload(&u, &state.status(), t(20));
    let first = state.status().in_force.unwrap().to_string();
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_config_loaded", &[]), 1.0);
    assert_eq!(
        v(&s, "podcidr_speaker_config_last_reload_successful", &[]),
        1.0
    );
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_config_info",
            &[("fingerprint", &first)]
        ),
        1.0
    );

    // A bad edit: the good config stays in force (and its fingerprint), the reload failed.
    let u = state.update_text(BAD);
    m.record_config_reload(&u, &state.status(), t(30));
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_config_loaded", &[]), 1.0);
    assert_eq!(
        v(&s, "podcidr_speaker_config_last_reload_successful", &[]),
        0.0
    );
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_config_info",
            &[("fingerprint", &first)]
        ),
        1.0
    );
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_config_reloads_total",
            &[("result", "failure")]
        ),
        2.0
    );

    // A new good config replaces the fingerprint series.
    let u = state.update_text(GOOD2);
    m.record_config_reload(&u, &state.status(), t(40));
    let second = state.status().in_force.unwrap().to_string();
    assert_ne!(first, second);
    let s = scrape(&m);
    assert_eq!(s.series("podcidr_speaker_config_info").len(), 1);
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_config_info",
            &[("fingerprint", &second)]
        ),
        1.0
    );
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_config_reloads_total",
            &[("result", "success")]
        ),
        2.0
    );
    let report = m.status(t(40), Instant::now()).config;
    assert_eq!(report.fingerprint.as_deref(), Some(second.as_str()));
    assert_eq!(
        (report.last_reload_successful, report.last_reload_unix),
        (Some(true), Some(40))
    );
    assert!(report.rejected.is_empty());

    // The source deleted: the config stays in force, but the source is not what runs.
    let u = state.deleted();
    m.record_config_reload(&u, &state.status(), t(50));
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_config_loaded", &[]), 1.0);
    assert_eq!(
        v(&s, "podcidr_speaker_config_last_reload_successful", &[]),
        0.0
    );
    assert!(m.status(t(50), Instant::now()).config.source_deleted);
}

fn resource(up: bool, synced: bool, events: u64, errors: u64, at: u64) -> ResourceStatus {
    ResourceStatus {
        up,
        synced,
        last_event: Some(t(at)),
        events,
        relists: 1,
        errors,
        last_error: (errors > 0).then(|| "watch failed: 410 Gone".to_owned()),
    }
}

#[test]
fn source_status_sets_watch_gauges_and_counters_that_follow_the_totals() {
    let m = Metrics::new();
    let mut status = SourceStatus::default();
    status
        .resources
        .insert(Resource::Nodes, resource(true, true, 4, 0, 100));
    status
        .resources
        .insert(Resource::CiliumNodes, resource(false, false, 0, 2, 90));
    m.record_source_status(&status);
    let s = scrape(&m);
    let r = |name: &str, res: &str| v(&s, name, &[("resource", res)]);
    assert_eq!(r("podcidr_speaker_source_watch_up", "nodes"), 1.0);
    assert_eq!(r("podcidr_speaker_source_watch_up", "ciliumnodes"), 0.0);
    assert_eq!(r("podcidr_speaker_source_synced", "ciliumnodes"), 0.0);
    assert_eq!(
        r(
            "podcidr_speaker_source_last_event_timestamp_seconds",
            "nodes"
        ),
        100.0
    );
    assert_eq!(r("podcidr_speaker_source_events_total", "nodes"), 4.0);
    assert_eq!(r("podcidr_speaker_source_errors_total", "ciliumnodes"), 2.0);
    assert!(!m.encode().contains("410 Gone"));

    status
        .resources
        .insert(Resource::Nodes, resource(true, true, 9, 1, 120));
    status.resources.remove(&Resource::CiliumNodes);
    m.record_source_status(&status);
    let s = scrape(&m);
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_source_events_total",
            &[("resource", "nodes")]
        ),
        9.0
    );
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_source_errors_total",
            &[("resource", "nodes")]
        ),
        1.0
    );
    assert!(s.with_label("resource", "ciliumnodes").is_empty());
    assert_eq!(m.resources(), vec![Resource::Nodes]);
    let report = &m.status(t(130), Instant::now()).sources[0];
    assert_eq!(
        (
            report.resource.as_str(),
            report.last_event_unix,
            report.last_error.as_deref()
        ),
        ("nodes", Some(120), Some("watch failed: 410 Gone"))
    );
}

#[test]
fn readiness_needs_a_config_in_force_and_every_source_synced() {
    let m = Metrics::new();
    assert!(!m.ready());
    let mut state = ConfigState::new();
    let u = state.update_text(GOOD);
    m.record_config_reload(&u, &state.status(), t(1));
    assert_eq!(
        m.not_ready_reason().as_deref(),
        Some("no source has reported")
    );
    let mut status = SourceStatus::default();
    status
        .resources
        .insert(Resource::ClusterStateFile, resource(true, false, 0, 0, 1));
    status
        .resources
        .insert(Resource::BgpConfigFile, resource(true, true, 1, 0, 1));
    m.record_source_status(&status);
    assert_eq!(
        m.not_ready_reason().as_deref(),
        Some("not synced yet: cluster-state-file")
    );
    status
        .resources
        .insert(Resource::ClusterStateFile, resource(true, true, 1, 0, 2));
    m.record_source_status(&status);
    assert!(m.ready());
    assert!(m.status(t(3), Instant::now()).ready);
    // A later watch failure does not unready the speaker: it synced once and keeps the
    // last known state.
    status
        .resources
        .insert(Resource::ClusterStateFile, resource(false, true, 1, 1, 2));
    m.record_source_status(&status);
    assert!(m.ready());
}

/// With `--ready-timeout`: after config and sources, `/readyz` waits for the plan, the
/// startup gate and every declared session; a session down for longer than the timeout
/// (and a gate closed that long) no longer holds it back, and is named.
#[test]
fn readiness_waits_for_sessions_and_the_gate_within_the_timeout() {
    let timeout = Duration::from_secs(60);
    let m = Metrics::new();
    m.set_ready_timeout(timeout);
    let mut state = ConfigState::new();
    let u = state.update_text(GOOD);
    m.record_config_reload(&u, &state.status(), t(1));
    let mut status = SourceStatus::default();
    status
        .resources
        .insert(Resource::ClusterStateFile, resource(true, true, 1, 0, 1));
    m.record_source_status(&status);
    let start = Instant::now();
    let at = |secs: u64| m.readiness_at(start + Duration::from_secs(secs));
    let (a, b) = (peer("192.0.2.1", 179), peer("192.0.2.2", 179));
    assert!(!at(0).ready);
    assert_eq!(at(0).reasons, vec!["no plan made yet"]);
    m.record_gate("127.0.0.1:9879", Some(false), false, Some("503"), t(2));
    assert_eq!(
        at(1).reasons,
        vec![
            "no plan made yet",
            "nothing announced until the cilium agent at 127.0.0.1:9879 reports healthy"
        ]
    );
    m.record_gate("127.0.0.1:9879", Some(true), true, None, t(3));
    m.record_planned();
    m.add_peer(a, 65000, t(3));
    m.add_peer(b, 65000, t(3));
    assert_eq!(
        at(2).reasons,
        vec![
            "session 192.0.2.1:179 not established",
            "session 192.0.2.2:179 not established"
        ]
    );
    m.record_session_state(a, State::OpenConfirm, State::Established, t(4));
    let r = at(3);
    assert!(!r.ready);
    assert_eq!(r.reasons, vec!["session 192.0.2.2:179 not established"]);
    // b has been down since it was declared: past the timeout it no longer counts.
    let r = at(61);
    assert!(r.ready);
    assert_eq!(
        r.reasons,
        vec!["not waited for beyond --ready-timeout 60s: session 192.0.2.2:179 not established"]
    );
    m.record_session_state(b, State::OpenConfirm, State::Established, t(5));
    assert_eq!(
        at(4),
        podcidr_speaker::metrics::Readiness {
            ready: true,
            reasons: vec![]
        }
    );
    // A session that drops holds readiness back again, for at most the timeout.
    m.record_session_state(a, State::Established, State::Idle, t(6));
    assert!(!at(5).ready);
    assert!(m.readiness_at(Instant::now() + timeout).ready);
    m.record_stop(podcidr_speaker::routes::stop::StopKind::Restart);
    assert_eq!(
        m.readiness_at(Instant::now() + timeout).reasons,
        vec!["shutting down"]
    );
}

#[test]
fn the_stop_decision_is_a_metric_a_status_entry_and_a_readiness_reason() {
    use podcidr_speaker::routes::stop::{LeaveReason, StopKind};
    let m = Metrics::new();
    assert!(m
        .status(SystemTime::now(), Instant::now())
        .stopping
        .is_none());
    assert!(!scrape(&m)
        .samples
        .iter()
        .any(|x| x.name == "podcidr_speaker_stop_decision"));
    m.record_stop(StopKind::Cordoned);
    let s = scrape(&m);
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_stop_decision",
            &[("decision", "cordoned")]
        ),
        1.0
    );
    let st = m
        .status(SystemTime::now(), Instant::now())
        .stopping
        .unwrap();
    assert_eq!(
        (
            st.decision.as_str(),
            st.pod_cidrs.as_str(),
            st.load_balancer.as_str()
        ),
        ("cordoned", "keep", "drain")
    );
    assert!(m
        .readiness_at(Instant::now())
        .reasons
        .contains(&"shutting down".to_owned()));
    let m = Metrics::new();
    m.record_stop(StopKind::Leaving(LeaveReason::ShuttingDown));
    let st = m
        .status(SystemTime::now(), Instant::now())
        .stopping
        .unwrap();
    assert_eq!(
        (
            st.decision.as_str(),
            st.pod_cidrs.as_str(),
            st.load_balancer.as_str()
        ),
        ("shutting-down", "drain", "drain")
    );
}

#[test]
fn the_view_sets_nodes_mode_and_one_drift_series_per_drifting_node() {
    let m = Metrics::new();
    let mut state = file::load(&outage_dir()).unwrap();
    let view = node_view(&state, IpamOverride::Auto).unwrap();
    m.set_view(&view);
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_view_nodes", &[]), 4.0);
    assert_eq!(v(&s, "podcidr_speaker_view_prefixes", &[]), 4.0);
    assert_eq!(
        v(&s, "podcidr_speaker_ipam_mode", &[("mode", "cluster-pool")]),
        1.0
    );
    assert_eq!(
        v(&s, "podcidr_speaker_ipam_mode", &[("mode", "kubernetes")]),
        0.0
    );
    assert_eq!(v(&s, "podcidr_speaker_podcidr_drift_nodes", &[]), 4.0);
    for node in ["master1", "master2", "master3", "worker1"] {
        assert_eq!(
            v(&s, "podcidr_speaker_podcidr_drift", &[("node", node)]),
            1.0
        );
    }
    // The permutation makes no two nodes share a CIDR in force: no conflict.
    assert_eq!(v(&s, "podcidr_speaker_podcidr_conflicts", &[]), 0.0);
    let report = m.status(t(1), Instant::now()).view.unwrap();
    assert_eq!(report.drift.len(), 4);
    assert_eq!(report.drift[0].node, "master1");
    assert_eq!(report.drift[0].node_cidrs, vec!["10.5.112.0/24"]);
    assert_eq!(report.drift[0].cilium_node_cidrs, vec!["10.5.113.0/24"]);
    assert_eq!(report.drift[0].announced, "CiliumNode");

    // master1's Node fixed, worker1 deleted: their series go, the others stay.
    state.nodes.get_mut("master1").unwrap().node_cidrs = vec!["10.5.113.0/24".parse().unwrap()];
    state.nodes.remove("worker1");
    let view = node_view(&state, IpamOverride::Auto).unwrap();
    m.set_view(&view);
    let s = scrape(&m);
    let drifting: Vec<&str> = s
        .series("podcidr_speaker_podcidr_drift")
        .iter()
        .map(|x| x.labels["node"].as_str())
        .collect();
    assert_eq!(drifting, vec!["master2", "master3"]);
    assert_eq!(v(&s, "podcidr_speaker_podcidr_drift_nodes", &[]), 2.0);
    assert_eq!(v(&s, "podcidr_speaker_view_nodes", &[]), 3.0);
}

#[test]
fn overlapping_and_refused_prefixes_are_counted() {
    let m = Metrics::new();
    let mut state = file::load(&outage_dir()).unwrap();
    // master2's CiliumNode also claims master1's range, and one range outside the pool.
    state.cilium_nodes.insert(
        "master2".into(),
        vec![
            "10.5.114.0/24".parse().unwrap(),
            "10.5.113.128/25".parse().unwrap(),
            "192.168.0.0/24".parse().unwrap(),
        ],
    );
    let view = node_view(&state, IpamOverride::Auto).unwrap();
    m.set_view(&view);
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_podcidr_conflicts", &[]), 2.0);
    assert_eq!(v(&s, "podcidr_speaker_refused_prefixes", &[]), 1.0);
    let report = m.status(t(1), Instant::now()).view.unwrap();
    assert_eq!(report.overlaps.len(), 1);
    assert_eq!(
        (
            report.overlaps[0].node.as_str(),
            report.overlaps[0].prefix.as_str(),
            report.overlaps[0].other_node.as_str()
        ),
        ("master1", "10.5.113.0/24", "master2")
    );
    assert_eq!(report.refused[0].prefix, "192.168.0.0/24");
    assert!(report.refused[0]
        .reason
        .contains("outside the cluster pool"));
    assert!(
        !m.encode().contains("192.168.0.0"),
        "prefixes are never labels"
    );
}

#[test]
fn an_undecidable_ipam_mode_zeroes_the_mode_and_raises_the_error_gauge() {
    let m = Metrics::new();
    let mut state = file::load(&outage_dir()).unwrap();
    m.set_view_result(&node_view(&state, IpamOverride::Auto));
    state.cilium_config.as_mut().unwrap().ipam = Some("eni".into());
    m.set_view_result(&node_view(&state, IpamOverride::Auto));
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_ipam_error", &[]), 1.0);
    assert_eq!(v(&s, "podcidr_speaker_view_prefixes", &[]), 0.0);
    for mode in ["kubernetes", "cluster-pool", "multi-pool"] {
        assert_eq!(v(&s, "podcidr_speaker_ipam_mode", &[("mode", mode)]), 0.0);
    }
    let report = m.status(t(1), Instant::now()).view.unwrap();
    assert_eq!(report.ipam, None);
    assert!(report.ipam_error.unwrap().contains("\"eni\""));
    // Recovery clears it.
    state.cilium_config.as_mut().unwrap().ipam = Some("kubernetes".into());
    m.set_view_result(&node_view(&state, IpamOverride::Auto));
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_ipam_error", &[]), 0.0);
    assert_eq!(
        v(&s, "podcidr_speaker_ipam_mode", &[("mode", "kubernetes")]),
        1.0
    );
}

#[test]
fn event_to_update_latency_lands_in_its_buckets() {
    let m = Metrics::new();
    m.observe_event_to_update(Duration::from_millis(3));
    m.observe_event_to_update(Duration::from_secs(2));
    m.observe_event_to_update(Duration::from_secs(45));
    let s = scrape(&m);
    let bucket = |le: &str| {
        v(
            &s,
            "podcidr_speaker_event_to_update_seconds_bucket",
            &[("le", le)],
        )
    };
    assert_eq!(bucket("0.0025"), 0.0);
    assert_eq!(bucket("0.005"), 1.0);
    assert_eq!(bucket("1"), 1.0);
    assert_eq!(bucket("2.5"), 2.0);
    assert_eq!(bucket("30"), 2.0);
    assert_eq!(bucket("+Inf"), 3.0);
    assert_eq!(
        v(&s, "podcidr_speaker_event_to_update_seconds_count", &[]),
        3.0
    );
    let sum = v(&s, "podcidr_speaker_event_to_update_seconds_sum", &[]);
    assert!((sum - 47.003).abs() < 1e-9, "{sum}");
}

#[test]
fn the_status_document_names_the_node_and_round_trips_as_json() {
    let m: Arc<Metrics> = Metrics::new();
    m.set_node(Some("master1"));
    m.add_peer(peer("192.0.2.1", 179), 65001, t(0));
    m.heartbeat();
    let status = m.status(t(42), Instant::now());
    assert_eq!(status.node.as_deref(), Some("master1"));
    assert_eq!(status.now_unix, 42);
    assert!(status.alive);
    let json = serde_json::to_string(&status).unwrap();
    let back: podcidr_speaker::metrics::Status = serde_json::from_str(&json).unwrap();
    assert_eq!(back, status);
}

#[test]
fn times_before_the_epoch_or_in_the_future_do_not_panic() {
    let m = Metrics::new();
    let a = peer("192.0.2.1", 179);
    let past = UNIX_EPOCH - Duration::from_secs(5);
    m.record_session_state(a, State::OpenConfirm, State::Established, past);
    let status = m.status(t(1), Instant::now());
    assert_eq!(status.peers[0].established_unix, Some(0));
    // `now` before the transition: ages read 0, not an underflow.
    m.record_session_state(a, State::Established, State::Idle, t(100));
    assert_eq!(m.status(t(50), Instant::now()).peers[0].state_seconds, 0);
}

fn peer_status(key: PeerKey, pending: usize, last_error: Option<SessionError>) -> PeerStatus {
    PeerStatus {
        key,
        state: State::Established,
        local: None,
        remote: None,
        negotiated: None,
        stats: Stats {
            last_error,
            ..Stats::default()
        },
        advertised: Default::default(),
        pending,
        write_buffer: 0,
        last_io_error: None,
        next_retry: None,
        finished: false,
        bfd: None,
        second_speaker: None,
        held: None,
    }
}

/// The daemon holds new sessions back (the Cilium conflict): the peer's row says so,
/// and the document carries the reason, until the peer task's status drops the hold.
#[test]
fn a_held_peer_is_marked_in_the_status_until_released() {
    let m = Metrics::new();
    let a = peer("192.0.2.1", 179);
    m.add_peer(a, 65001, t(0));
    let reason: Arc<str> = "cilium-config has bgp-announce-pod-cidr: true".into();
    let held = PeerStatus {
        state: State::Idle,
        held: Some(reason.clone()),
        ..peer_status(a, 0, None)
    };
    m.record_peer_status(&held, t(1));
    let status = m.status(t(2), Instant::now());
    assert_eq!(status.peers[0].held_back.as_deref(), Some(&*reason));
    let json = serde_json::to_string(&status).unwrap();
    assert!(
        json.contains("\"held_back\":\"cilium-config has bgp-announce-pod-cidr: true\""),
        "{json}"
    );
    let shown = podcidr_speaker::commands::status::Summary(&status).to_string();
    assert!(shown.contains("Idle, held back"), "{shown}");

    m.record_peer_status(
        &PeerStatus {
            state: State::Idle,
            ..peer_status(a, 0, None)
        },
        t(3),
    );
    let status = m.status(t(4), Instant::now());
    assert_eq!(status.peers[0].held_back, None);
    let shown = podcidr_speaker::commands::status::Summary(&status).to_string();
    assert!(!shown.contains("held back"), "{shown}");
}

/// The session waits in Idle to dial again: `/status` says when (wall clock), and only
/// while it is Idle.
#[test]
fn the_next_retry_of_a_waiting_session_is_in_the_status() {
    let m = Metrics::new();
    let a = peer("192.0.2.1", 179);
    m.add_peer(a, 65001, t(0));
    m.record_session_state(a, State::Idle, State::Connect, t(1));
    m.record_session_state(a, State::Connect, State::Idle, t(2));
    let status = PeerStatus {
        state: State::Idle,
        next_retry: Some(Instant::now() + Duration::from_secs(7)),
        ..peer_status(a, 0, Some(SessionError::ConnectionFailed))
    };
    m.record_peer_status(&status, t(100));
    let report = m.status(t(101), Instant::now()).peers[0].clone();
    // 7 s from t(100), give or take the clock's move between the two readings.
    assert!(
        matches!(report.next_retry_unix, Some(106..=107)),
        "{report:?}"
    );
    let shown =
        podcidr_speaker::commands::status::Summary(&m.status(t(101), Instant::now())).to_string();
    assert!(
        shown.contains("Idle, retry in 5s") || shown.contains("Idle, retry in 6s"),
        "{shown}"
    );

    // Dialing again: no retry time.
    m.record_session_state(a, State::Idle, State::Connect, t(107));
    m.record_peer_status(
        &PeerStatus {
            state: State::Connect,
            ..peer_status(a, 0, None)
        },
        t(107),
    );
    assert_eq!(
        m.status(t(107), Instant::now()).peers[0].next_retry_unix,
        None
    );
}

#[test]
fn peer_status_snapshots_set_pending_and_a_new_session_error() {
    let m = Metrics::new();
    let a = peer("192.0.2.1", 179);
    let p = "192.0.2.1:179";
    m.add_peer(a, 65001, t(0));
    m.record_peer_status(&peer_status(a, 12, None), t(1));
    assert_eq!(
        v(
            &scrape(&m),
            "podcidr_speaker_pending_prefixes",
            &[("peer", p)]
        ),
        12.0
    );
    let last = |m: &Metrics| m.status(t(9), Instant::now()).peers[0].last_error.clone();
    assert_eq!(last(&m), None);

    m.record_peer_status(
        &peer_status(a, 0, Some(SessionError::HoldTimerExpired)),
        t(2),
    );
    assert_eq!(last(&m).as_deref(), Some("hold timer expired"));
    assert_eq!(
        v(
            &scrape(&m),
            "podcidr_speaker_pending_prefixes",
            &[("peer", p)]
        ),
        0.0
    );
    // A later socket error is newer than the session's (unchanged) last error...
    m.record_error(a, "connect (192.0.2.1:179): connection refused", t(3));
    m.record_peer_status(
        &peer_status(a, 0, Some(SessionError::HoldTimerExpired)),
        t(4),
    );
    assert_eq!(
        last(&m).as_deref(),
        Some("connect (192.0.2.1:179): connection refused")
    );
    // ...until the session records a new one.
    m.record_peer_status(
        &peer_status(a, 0, Some(SessionError::ConnectionClosed)),
        t(5),
    );
    assert_eq!(last(&m).as_deref(), Some("tcp connection closed"));
}

#[test]
fn routes_not_announced_are_counted_by_reason_and_removed_with_the_peer() {
    let m = Metrics::new();
    let a = peer("192.0.2.1", 179);
    let p = "192.0.2.1:179";
    m.record_not_announced(a, Afi::IPV6, RouteRefusal::FamilyNotNegotiated, 3);
    m.record_not_announced(a, Afi::IPV6, RouteRefusal::FamilyNotNegotiated, 2);
    m.record_not_announced(a, Afi::IPV4, RouteRefusal::NoNextHop, 1);
    let s = scrape(&m);
    let n = |afi: &str, reason: &str| {
        v(
            &s,
            "podcidr_speaker_routes_not_announced_total",
            &[("peer", p), ("afi", afi), ("reason", reason)],
        )
    };
    assert_eq!(n("ipv6", "family_not_negotiated"), 5.0);
    assert_eq!(n("ipv4", "no_next_hop"), 1.0);
    m.remove_peer(a);
    assert!(scrape(&m)
        .series("podcidr_speaker_routes_not_announced_total")
        .is_empty());
}

#[test]
fn the_peer_observer_reports_land_in_the_same_series() {
    let m = Metrics::new();
    let a = peer("192.0.2.1", 179);
    let p = "192.0.2.1:179";
    let observer = PeerMetrics::new(Arc::clone(&m));
    let observer: &dyn PeerObserver = &observer;
    observer.state_changed(&a, State::OpenConfirm, State::Established);
    observer.message(&a, Direction::Sent, MessageType::Update);
    observer.message(&a, Direction::Received, MessageType::Keepalive);
    observer.announced(&a, AfiSafi::IPV6_UNICAST, 4);
    observer.received(&a, AfiSafi::IPV4_UNICAST, 2);
    observer.update_written(&a, Duration::from_millis(7));
    observer.not_announced(&a, AfiSafi::IPV6_UNICAST, RouteRefusal::NoNextHop, 1);
    observer.notification(
        &a,
        Direction::Received,
        6,
        2,
        "cease: administrative shutdown: \"bye\"",
    );
    observer.state_changed(&a, State::Established, State::Idle);
    let s = scrape(&m);
    assert_eq!(
        v(&s, "podcidr_speaker_session_flaps_total", &[("peer", p)]),
        1.0
    );
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_messages_sent_total",
            &[("peer", p), ("type", "update")]
        ),
        1.0
    );
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_notifications_total",
            &[
                ("peer", p),
                ("direction", "received"),
                ("code", "6"),
                ("subcode", "2")
            ]
        ),
        1.0
    );
    assert_eq!(
        v(&s, "podcidr_speaker_event_to_update_seconds_count", &[]),
        1.0
    );
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_routes_not_announced_total",
            &[("peer", p), ("afi", "ipv6"), ("reason", "no_next_hop")]
        ),
        1.0
    );
    let status = m.status(SystemTime::now(), Instant::now());
    assert_eq!(
        status.peers[0].last_error.as_deref(),
        Some("received notification 6/2: cease: administrative shutdown: \"bye\"")
    );
    // While up it held 4 IPv6 prefixes; the drop cleared them.
    assert_eq!(status.peers[0].announced["ipv6"], 0);
    observer.error(
        &a,
        &PeerError::ConnectTimeout {
            addr: "192.0.2.1:179".parse().unwrap(),
            after: Duration::from_secs(5),
        },
    );
    assert_eq!(
        m.status(SystemTime::now(), Instant::now()).peers[0]
            .last_error
            .as_deref(),
        Some("connect to 192.0.2.1:179 timed out after 5s")
    );
}

#[test]
fn routes_without_a_next_hop_are_a_gauge_and_a_status_entry_per_peer() {
    let m = Metrics::new();
    let p = "192.0.2.1:179";
    m.record_unannounceable(&dual_stack_plan(None));
    let s = scrape(&m);
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_routes_unannounceable",
            &[("peer", p), ("afi", "ipv6"), ("reason", "no_next_hop")]
        ),
        1.0
    );
    assert_eq!(s.series("podcidr_speaker_routes_unannounceable").len(), 1);
    let status = m.status(SystemTime::now(), Instant::now());
    let entry = &status.peers[0].unannounceable;
    assert_eq!(entry.len(), 1);
    assert_eq!(
        (entry[0].prefix.as_str(), entry[0].reason.as_str()),
        ("fd00:1::/64", "no_next_hop")
    );
    assert!(entry[0].message.contains("peers[0] sets no next-hop-v6"));
    let text = podcidr_speaker::commands::status::Summary(&status).to_string();
    assert!(
        text.contains(
            "Not announced to peers (no route planned)\n  fd00:1::/64 of node a is not \
             announced to 192.0.2.1:179: an IPv6 route on an IPv4 session needs an IPv6 next hop"
        ),
        "{text}"
    );
    // With next-hop-v6 the route is planned: the series and the entry go.
    m.record_unannounceable(&dual_stack_plan(Some("2001:db8::7")));
    assert!(scrape(&m)
        .series("podcidr_speaker_routes_unannounceable")
        .is_empty());
    assert!(m.status(SystemTime::now(), Instant::now()).peers[0]
        .unannounceable
        .is_empty());
}

/// The LoadBalancer counts: announced Services, not announced per bounded reason (every
/// reason has a series from the start; Services not of type LoadBalancer are not
/// counted), routes; `/status` carries the same numbers.
#[test]
fn loadbalancer_counts_are_exposed_per_reason_and_in_the_status() {
    use podcidr_speaker::routes::lb::LbReason;
    use std::collections::BTreeMap;
    let m = Metrics::new();
    let s = scrape(&m);
    for reason in ["no_ip", "outside_pools", "no_local_endpoints", "lb_ips_off"] {
        assert_eq!(
            v(
                &s,
                "podcidr_speaker_lb_services_not_announced",
                &[("reason", reason)]
            ),
            0.0
        );
    }
    assert!(s
        .value(
            "podcidr_speaker_lb_services_not_announced",
            &[("reason", "not_load_balancer")]
        )
        .is_none());
    let counts: BTreeMap<Option<LbReason>, usize> = [
        (None, 3),
        (Some(LbReason::NoIp), 2),
        (Some(LbReason::NoLocalEndpoints), 1),
        (Some(LbReason::NotLoadBalancer), 40),
    ]
    .into();
    m.record_lb(&counts, 5);
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_lb_services_announced", &[]), 3.0);
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_lb_services_not_announced",
            &[("reason", "no_ip")]
        ),
        2.0
    );
    assert_eq!(
        v(
            &s,
            "podcidr_speaker_lb_services_not_announced",
            &[("reason", "no_local_endpoints")]
        ),
        1.0
    );
    assert_eq!(v(&s, "podcidr_speaker_lb_routes", &[]), 5.0);
    let lb = m.status(SystemTime::now(), Instant::now()).lb.unwrap();
    assert_eq!((lb.announced, lb.routes), (3, 5));
    assert_eq!(
        lb.not_announced,
        [
            ("no_ip".to_owned(), 2),
            ("no_local_endpoints".to_owned(), 1)
        ]
        .into()
    );
}

/// The second-speaker watch's reports through the observer: the counter per peer, the
/// gauge and the `/status` entry while the finding stands, both gone once it clears.
#[test]
fn a_suspected_second_speaker_is_a_gauge_a_counter_and_a_status_entry() {
    let m = Arc::new(Metrics::new());
    let o = PeerMetrics::new(Arc::clone(&m));
    let a = peer("192.0.2.1", 179);
    let p = [("peer", "192.0.2.1:179")];
    m.add_peer(a, 65001, SystemTime::now());
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_collision_ceases_total", &p), 0.0);
    assert_eq!(v(&s, "podcidr_speaker_second_speaker_suspected", &p), 0.0);
    for _ in 0..3 {
        o.collision_cease(&a, 7);
    }
    let finding = Finding {
        since: Instant::now() - Duration::from_secs(60),
        signs: 3,
        last_subcode: 7,
        window: Duration::from_secs(300),
    };
    o.second_speaker(&a, Some(&finding));
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_collision_ceases_total", &p), 3.0);
    assert_eq!(v(&s, "podcidr_speaker_second_speaker_suspected", &p), 1.0);
    let status = m.status(SystemTime::now(), Instant::now());
    assert_eq!(status.peers[0].collision_ceases, 3);
    let x = status.peers[0].second_speaker.clone().expect("suspected");
    let age = unix_now().saturating_sub(x.since_unix);
    assert!((59..=62).contains(&age), "raised {age} s ago");
    assert_eq!((x.ceases, x.window_seconds, x.last_subcode), (3, 300, 7));
    assert!(x.message.contains("ss -tnp"), "{}", x.message);

    o.second_speaker(&a, None);
    let s = scrape(&m);
    assert_eq!(v(&s, "podcidr_speaker_second_speaker_suspected", &p), 0.0);
    assert_eq!(v(&s, "podcidr_speaker_collision_ceases_total", &p), 3.0);
    let status = m.status(SystemTime::now(), Instant::now());
    assert_eq!(status.peers[0].second_speaker, None);
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
