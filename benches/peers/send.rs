//! Item 2, sending a table: `send SENDER N RUNS`. A fresh BIRD receiver per run, its
//! session disabled while the sender loads the table (the speaker its cluster-state,
//! gobgpd an MRT file, BIRD its static routes); then the session is enabled and the time
//! from Established to BIRD holding all N is measured by polling BIRD's control socket
//! (1 ms apart, 5 ms above 100,000 prefixes). Every sender sends the same table over
//! iBGP: N /24s, each with its node's address as next hop.

use std::time::Duration;

use serde_json::json;

use crate::common::*;
use crate::harness::BgpDaemon;

pub fn run(sender: &str, n: usize, runs: usize) {
    let bound = Duration::from_secs(if n > 100_000 { 120 } else { 60 });
    let cluster = Cluster::with_prefixes(n);
    let mut times = Vec::new();
    let mut times99 = Vec::new();
    let mut timed_out = 0;
    let mut sender_rss = Vec::new();
    for run in 0..runs {
        let dir = setup_once();
        let from = match sender {
            "speaker" => SPEAKER,
            "gobgpd" => GOBGP,
            "bird" => BIRD_TX,
            other => panic!("unknown sender {other}"),
        };
        let mut rx = bird_receiver(dir.path(), BIRD_RX, &[(from, AS)], sender != "bird");
        let t = match sender {
            "speaker" => {
                let state = cluster.write(dir.path());
                let mut p = start_speaker(dir.path(), &state, AS, &[(BIRD_RX, AS)], "warn");
                let loaded = poll(bound, Duration::from_millis(50), || {
                    metric_sum("podcidr_speaker_view_prefixes") >= n as f64
                });
                assert!(loaded, "speaker never loaded {n} prefixes");
                // The plan follows the view at once; leave it time to reach the peer task.
                std::thread::sleep(Duration::from_secs(1));
                let t = enable_and_time(&mut rx, from, n as u64, bound);
                sender_rss.push(proc_stat(p.pid()).hwm_kb as f64);
                if t.secs.is_none() {
                    eprintln!(
                        "speaker log tail:\n{}\nspeaker metrics:\n{}",
                        p.log_tail(15),
                        metrics()
                            .unwrap_or_default()
                            .lines()
                            .filter(|l| l.contains("prefixes") || l.contains("messages_sent"))
                            .collect::<Vec<_>>()
                            .join("\n")
                    );
                }
                let _ = p.stop();
                t
            }
            "gobgpd" => {
                let mut g = gobgp_sender(dir.path(), &cluster, &[BIRD_RX]);
                let t = enable_and_time(&mut rx, from, n as u64, bound);
                if let Some(pid) = child_pid("gobgpd", &g.dir().display().to_string()) {
                    sender_rss.push(proc_stat(pid).hwm_kb as f64);
                }
                let _ = g.stop();
                t
            }
            _ => {
                let (mut p, _) = bird_sender(dir.path(), &cluster, BIRD_RX);
                let t = enable_and_time(&mut rx, from, n as u64, bound);
                sender_rss.push(proc_stat(p.pid()).hwm_kb as f64);
                let _ = p.stop();
                t
            }
        };
        let _ = rx.stop();
        times99.extend(t.secs99);
        match t.secs {
            Some(s) => {
                eprintln!("send {sender} n={n} run {run}: {s:.3} s");
                times.push(s);
            }
            None => {
                eprintln!(
                    "send {sender} n={n} run {run}: > {} s ({} received)",
                    bound.as_secs(),
                    t.got
                );
                timed_out += 1;
            }
        }
    }
    emit(json!({
        "item": "send",
        "sender": sender,
        "n": n,
        "runs": times,
        "median_s": (!times.is_empty()).then(|| median(&times)),
        "median99_s": (!times99.is_empty()).then(|| median(&times99)),
        "timed_out": timed_out,
        "bound_s": bound.as_secs(),
        "sender_peak_rss_kb": (!sender_rss.is_empty()).then(|| median(&sender_rss)),
    }));
}

/// The namespace's lo is set up once per process; each run gets a fresh temp dir.
pub fn setup_once() -> crate::harness::process::TempDir {
    use std::sync::Once;
    static LO: Once = Once::new();
    let mut dir = None;
    LO.call_once(|| dir = Some(setup()));
    dir.unwrap_or_else(|| crate::harness::process::TempDir::new("pcb").expect("temp dir"))
}
