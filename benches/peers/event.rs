//! Item 3, event to wire: `event NODES EVENTS`. The speaker (`--announce cluster`, NODES
//! nodes in its cluster-state file) peers with ExaBGP (eBGP), which stamps every UPDATE
//! it receives with its own clock. Each event rewrites the cluster-state (write, rename),
//! alternately moving one node to a new /24 and deleting one node, and waits for the
//! matching withdraw/announce at ExaBGP. Three intervals per event, on the one clock of
//! this machine:
//!
//! - end to end: the rename -> ExaBGP's stamp on the last UPDATE of the change;
//! - file watch: the rename -> the file source handing the loaded change on (its
//!   `source_last_event_timestamp_seconds`; the source polls every 250 ms, loads a file
//!   once it has been stable for one poll, and parses the whole file);
//! - after the watch: that moment -> ExaBGP's stamp (planning 5,000 nodes, the
//!   Adj-RIB-Out diff, the UPDATE, and ExaBGP's own parsing before it stamps).
//!
//! Plus the speaker's own `event_to_update_seconds` histogram, counted over the events
//! only (buckets before and after subtracted).

use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom};
use std::net::Ipv4Addr;
use std::time::Duration;

use ipnet::IpNet;
use serde_json::json;

use crate::common::*;
use crate::harness::exabgp::{self, ExaEventKind, Exabgp};
use crate::harness::{BgpDaemon, Neighbor, PeerOpts};

const SPEAKER_AS: u32 = 65001;

/// Reads rx.jsonl from where it left off: (prefix, announced?) with ExaBGP's time.
pub(crate) struct Rx {
    path: std::path::PathBuf,
    offset: u64,
    partial: String,
}

impl Rx {
    pub(crate) fn new(path: std::path::PathBuf) -> Rx {
        Rx {
            path,
            offset: 0,
            partial: String::new(),
        }
    }

    pub(crate) fn read(&mut self) -> Vec<(f64, IpNet, bool)> {
        let mut out = Vec::new();
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return out;
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return out;
        }
        let mut buf = String::new();
        let Ok(n) = f.read_to_string(&mut buf) else {
            return out;
        };
        self.offset += n as u64;
        self.partial.push_str(&buf);
        while let Some(i) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=i).collect();
            let Ok(e) = exabgp::parse_event(line.trim()) else {
                continue;
            };
            if let ExaEventKind::Update(u) = e.kind {
                out.extend(u.announce.iter().map(|(p, _)| (e.time, *p, true)));
                out.extend(u.withdraw.iter().map(|p| (e.time, *p, false)));
            }
        }
        out
    }
}

fn net(p: Ipv4Addr) -> IpNet {
    IpNet::V4(ipnet::Ipv4Net::new(p, 24).expect("/24"))
}

/// When the file source last loaded a change and handed it on (unix seconds): the
/// speaker's `source_last_event_timestamp_seconds`, latest over its sources.
fn last_loaded() -> Option<f64> {
    let body = metrics()?;
    body.lines()
        .filter(|l| l.starts_with("podcidr_speaker_source_last_event_timestamp_seconds"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .reduce(f64::max)
}

/// Cumulative bucket counts of `event_to_update_seconds` by upper bound.
pub(crate) fn histogram() -> Vec<(f64, f64)> {
    let Some(body) = metrics() else {
        return Vec::new();
    };
    body.lines()
        .filter(|l| l.starts_with("podcidr_speaker_event_to_update_seconds_bucket"))
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, l.rsplit_once(' ')?.1.parse().ok()?))
        })
        .collect()
}

/// The histogram's cumulative buckets now, less those of `before`.
pub(crate) fn histogram_since(before: &[(f64, f64)]) -> Vec<(f64, f64)> {
    histogram()
        .iter()
        .map(|(le, c)| {
            let b = before
                .iter()
                .find(|(l, _)| l == le)
                .map(|x| x.1)
                .unwrap_or(0.0);
            (*le, c - b)
        })
        .collect()
}

/// Buckets as JSON for the report: `[[le, count], ...]`, `"+Inf"` for the last.
pub(crate) fn buckets_json(buckets: &[(f64, f64)]) -> serde_json::Value {
    buckets
        .iter()
        .map(|(le, c)| {
            json!([
                if le.is_finite() {
                    json!(le)
                } else {
                    json!("+Inf")
                },
                c
            ])
        })
        .collect()
}

pub fn run(nodes: usize, events: usize) {
    let dir = crate::send::setup_once();
    let mut cluster = Cluster::new(nodes, 1);
    let state = cluster.write(dir.path());
    let exa = Exabgp::start(
        dir.path(),
        PeerOpts::new(EXA, AS).neighbor(Neighbor::new(SPEAKER, SPEAKER_AS).hold_time(90)),
    )
    .expect("start ExaBGP");
    let mut speaker = start_speaker(dir.path(), &state, SPEAKER_AS, &[(EXA, AS)], "warn");
    let mut rx = Rx::new(exa.dir().join("rx.jsonl"));
    let mut held = BTreeSet::new();
    let ok = poll(Duration::from_secs(120), Duration::from_millis(50), || {
        for (_, p, ann) in rx.read() {
            if ann {
                held.insert(p);
            } else {
                held.remove(&p);
            }
        }
        held.len() >= nodes
    });
    assert!(ok, "ExaBGP never held {nodes} routes ({} held)", held.len());
    std::thread::sleep(Duration::from_secs(1));
    rx.read();
    let before = histogram();

    let (mut total, mut watch, mut after) = (Vec::new(), Vec::new(), Vec::new());
    let mut next_prefix = nodes;
    for e in 0..events {
        // Never node 0 (the speaker's own); a different node each time.
        let k = 1 + (e * 37) % (cluster.nodes.len() - 1);
        let old = cluster.nodes[k].2[0];
        let (expect_new, what) = if e % 2 == 0 {
            let p = prefix(next_prefix);
            next_prefix += 1;
            cluster.nodes[k].2 = vec![p];
            (Some(p), "edit")
        } else {
            cluster.nodes.remove(k);
            (None, "delete")
        };
        let loaded_before = last_loaded();
        cluster.write(dir.path());
        let t_write = unix_now();
        let (mut t_withdraw, mut t_announce) = (None, None);
        let ok = poll(Duration::from_secs(20), Duration::from_millis(1), || {
            for (t, p, ann) in rx.read() {
                if !ann && p == net(old) {
                    t_withdraw = Some(t);
                }
                if ann && Some(p) == expect_new.map(net) {
                    t_announce = Some(t);
                }
            }
            t_withdraw.is_some() && (expect_new.is_none() || t_announce.is_some())
        });
        assert!(ok, "event {e} ({what} node {k}) never reached ExaBGP");
        let t_arrive = t_withdraw.into_iter().chain(t_announce).fold(0.0, f64::max);
        let mut t_plan = None;
        poll(Duration::from_secs(5), Duration::from_millis(10), || {
            t_plan = last_loaded().filter(|t| Some(*t) != loaded_before);
            t_plan.is_some()
        });
        let t_plan = t_plan.unwrap_or(f64::NAN);
        total.push((t_arrive - t_write) * 1000.0);
        watch.push((t_plan - t_write) * 1000.0);
        after.push((t_arrive - t_plan) * 1000.0);
        eprintln!(
            "event {e} {what}: end to end {:.1} ms, watch {:.1} ms, after {:.2} ms",
            total[e], watch[e], after[e]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let buckets = histogram_since(&before);
    let _ = speaker.stop();
    let stats = |v: &[f64]| json!({"median_ms": median(v), "p99_ms": percentile(v, 0.99), "max_ms": percentile(v, 1.0)});
    emit(json!({
        "item": "event",
        "nodes": nodes,
        "events": events,
        "end_to_end": stats(&total),
        "file_watch": stats(&watch),
        "after_watch": stats(&after),
        "histogram": buckets_json(&buckets),
    }));
}
