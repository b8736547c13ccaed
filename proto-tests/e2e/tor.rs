//! What the top-of-rack switches say beyond the harness's routes: per-session counters
//! of UPDATEs received and per-route "last changed" times. Together they show that a
//! route stayed untouched (same path, no flap): no UPDATE reached the switch for it, and
//! the switch did not re-learn it.
//!
//! - BIRD: `show protocols all <neighbor>` "Route change stats" (import updates and
//!   withdraws received, per prefix), and the time in each `show route all` header line
//!   (millisecond resolution, changed whenever the route is replaced).
//! - FRR: `show bgp neighbors <n> json` messageStats.updatesRecv (UPDATE messages), and
//!   each path's lastUpdate.epoch.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::Value;

use crate::harness::bird::{proto_name, Bird};
use crate::harness::frr::Frr;
use crate::harness::BgpDaemon;

/// BIRD's per-protocol import counters: prefixes announced and withdrawn by the
/// neighbor (the "received" column) since the session came up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BirdImports {
    pub updates: u64,
    pub withdraws: u64,
}

/// `None` while the session is down: BIRD shows the counters of an open channel only.
pub fn bird_imports(bird: &Bird, neighbor: IpAddr) -> Option<BirdImports> {
    let text = bird
        .control(&format!("show protocols all {}", proto_name(neighbor)))
        .unwrap_or_else(|e| panic!("bird show protocols {neighbor}: {e}"));
    let received = |label: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .and_then(|rest| rest.split_whitespace().next())
            .map(|n| {
                n.parse()
                    .unwrap_or_else(|e| panic!("bird: {label} {n:?}: {e}\n{text}"))
            })
    };
    Some(BirdImports {
        updates: received("Import updates:")?,
        withdraws: received("Import withdraws:")?,
    })
}

/// The time BIRD shows for each route learned from `neighbor`.
pub fn bird_route_times(bird: &Bird, neighbor: IpAddr) -> BTreeMap<IpNet, BirdTime> {
    let proto = proto_name(neighbor);
    let text = bird
        .control(&format!("show route all protocol {proto}"))
        .unwrap_or_else(|e| panic!("bird show route {neighbor}: {e}"));
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('\t')) {
        // `10.244.1.0/24  unreachable [n_100_64_1_1 01:17:38.718 from 100.64.1.1] * ...`
        let Some(prefix) = line
            .split_whitespace()
            .next()
            .and_then(|p| p.parse::<IpNet>().ok())
        else {
            continue;
        };
        let time = line
            .split_once(&format!("[{proto} "))
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("bird route line without a time: {line:?}"));
        let parsed = BirdTime::parse(time)
            .unwrap_or_else(|| panic!("bird route time {time:?} is not HH:MM:SS.mmm: {line:?}"));
        out.insert(prefix, parsed);
    }
    out
}

/// A route's time as `show route` prints it (`HH:MM:SS.mmm`). BIRD keeps the time on
/// its monotonic clock and converts it to the wall clock at each `show route`, so the
/// same import can read 1 ms apart from one query to the next: two times are equal when
/// at most 1 ms apart. A route sent again is far later than that in every test (they
/// wait before they compare), so equality still means "not re-sent".
#[derive(Clone, Copy, Eq)]
pub struct BirdTime {
    ms: i64,
}

impl BirdTime {
    fn parse(text: &str) -> Option<BirdTime> {
        let (hms, frac) = text.split_once('.')?;
        let mut parts = hms.split(':').map(|p| p.parse::<i64>().ok());
        let (h, m, s) = (parts.next()??, parts.next()??, parts.next()??);
        let ms = frac.parse::<i64>().ok()?;
        Some(BirdTime {
            ms: ((h * 60 + m) * 60 + s) * 1000 + ms,
        })
    }
}

impl PartialEq for BirdTime {
    fn eq(&self, other: &Self) -> bool {
        // Across midnight the clock wraps: compare on the 24 h circle.
        let d = (self.ms - other.ms).rem_euclid(86_400_000);
        d <= 1 || d >= 86_400_000 - 1
    }
}

impl std::fmt::Debug for BirdTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (s, ms) = (self.ms / 1000, self.ms % 1000);
        write!(
            f,
            "{:02}:{:02}:{:02}.{ms:03}",
            s / 3600,
            s / 60 % 60,
            s % 60
        )
    }
}

/// FRR's count of UPDATE messages received from `neighbor`.
pub fn frr_updates_received(frr: &Frr, neighbor: IpAddr) -> u64 {
    let text = frr
        .vtysh(&[&format!("show bgp neighbors {neighbor} json")])
        .unwrap_or_else(|e| panic!("frr show bgp neighbors {neighbor}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("frr json: {e}: {text}"));
    v.pointer(&format!("/{neighbor}/messageStats/updatesRecv"))
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("frr: no updatesRecv for {neighbor}: {text}"))
}

/// When FRR learned a path, in epoch seconds. FRR derives the epoch from the path's
/// monotonic uptime at query time (`time(NULL) - (monotonic now - learned)`), so two
/// reads of one unchanged path can differ by a second: equal means within one second.
/// A re-learned route in these tests is at least the settle time (2 s) younger.
#[derive(Debug, Clone, Copy)]
pub struct Learned(pub u64);

impl PartialEq for Learned {
    fn eq(&self, other: &Self) -> bool {
        self.0.abs_diff(other.0) <= 1
    }
}

/// FRR's lastUpdate of each IPv4 path learned from `neighbor`.
pub fn frr_route_times(frr: &Frr, neighbor: IpAddr) -> BTreeMap<IpNet, Learned> {
    let text = frr
        .vtysh(&["show bgp ipv4 unicast json detail"])
        .unwrap_or_else(|e| panic!("frr show bgp ipv4 unicast: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("frr json: {e}: {text}"));
    let mut out = BTreeMap::new();
    let Some(routes) = v.get("routes").and_then(Value::as_object) else {
        return out;
    };
    for (prefix, entry) in routes {
        let Ok(prefix) = prefix.parse::<IpNet>() else {
            continue;
        };
        let paths: Vec<&Value> = match entry {
            Value::Array(a) => a.iter().collect(),
            Value::Object(o) => o
                .get("paths")
                .and_then(Value::as_array)
                .map(|a| a.iter().collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        for p in paths {
            let from = p.pointer("/peer/peerId").and_then(Value::as_str);
            if from.and_then(|f| f.parse::<IpAddr>().ok()) != Some(neighbor) {
                continue;
            }
            if let Some(epoch) = p.pointer("/lastUpdate/epoch").and_then(Value::as_u64) {
                out.insert(prefix, Learned(epoch));
            }
        }
    }
    out
}

/// The NOTIFICATIONs BIRD logged as received from `neighbor`, as BIRD words them
/// (`Peer de-configured`, `Administrative shutdown: "message"`), oldest first. The log
/// keeps them; `show protocols` shows only the latest error, which a failed reconnect
/// replaces.
pub fn bird_notifications_received(bird: &Bird, neighbor: IpAddr) -> Vec<String> {
    let marker = format!("{}: Received: ", proto_name(neighbor));
    bird.log_tail(5000)
        .lines()
        .filter_map(|l| l.split_once(&marker).map(|(_, text)| text.to_string()))
        .collect()
}

/// FRR's `lastNotificationReason` for `neighbor` ("Cease/Peer De-configured"), if any.
pub fn frr_last_notification(frr: &Frr, neighbor: IpAddr) -> Option<String> {
    let text = frr
        .vtysh(&[&format!("show bgp neighbors {neighbor} json")])
        .unwrap_or_else(|e| panic!("frr show bgp neighbors {neighbor}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("frr json: {e}: {text}"));
    v.pointer(&format!("/{neighbor}/lastNotificationReason"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}
