//! Item 5, footprint: `footprint WHO N`. The speaker (`--announce cluster`, N nodes in
//! view, one /24 each; N = 0 is idle: only its own node) or gobgpd (holding the same N
//! routes) with two sessions, to two BIRD receivers. Once both hold the table and three
//! seconds have passed, RSS is read and CPU, threads and wake-ups (context switches of
//! all its threads: each is a wake-up from a sleep or a preemption) are counted over 30
//! seconds ([`idle`], which `kubeidle` shares).

use std::time::Duration;

use serde_json::json;

use crate::common::*;
use crate::harness::{BgpDaemon, Neighbor, PeerOpts};

const IDLE: Duration = Duration::from_secs(30);

pub fn run(who: &str, n: usize, runs: usize) {
    let (mut rss, mut cpu, mut hwm) = (Vec::new(), Vec::new(), Vec::new());
    let (mut wakes, mut threads) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let dir = crate::send::setup_once();
        let from = if who == "speaker" { SPEAKER } else { GOBGP };
        let rx: Vec<_> = [BIRD_RX, BIRD_RX2]
            .iter()
            .map(|addr| {
                crate::harness::bird::Bird::start(
                    dir.path(),
                    PeerOpts::new(*addr, AS).neighbor(Neighbor::new(from, AS).hold_time(90)),
                )
                .expect("BIRD receiver")
            })
            .collect();
        // The speaker announces its own node too: N + 1 routes; gobgpd the same N + 1.
        let cluster = Cluster::new(n + 1, 1);
        let want = cluster.prefix_count() as u64;
        let (mut speaker, mut gobgp) = (None, None);
        let pid = if who == "speaker" {
            let state = cluster.write(dir.path());
            let p = start_speaker(
                dir.path(),
                &state,
                AS,
                &[(BIRD_RX, AS), (BIRD_RX2, AS)],
                "warn",
            );
            let pid = p.pid();
            speaker = Some(p);
            pid
        } else {
            let g = gobgp_sender(dir.path(), &cluster, &[BIRD_RX, BIRD_RX2]);
            let pid = child_pid("gobgpd", &g.dir().display().to_string()).expect("gobgpd pid");
            gobgp = Some(g);
            pid
        };
        let ok = poll(Duration::from_secs(120), Duration::from_millis(50), || {
            rx.iter().all(|b| bird_session(b, from).1 >= want)
        });
        assert!(ok, "{who}: receivers never held {want} routes");
        let m = idle(pid);
        eprintln!(
            "footprint {who} n={n}: RSS {} kB, peak {} kB, CPU {:.2} %, {} threads, {:.2} wake-ups/s ({})",
            m.rss_kb, m.hwm_kb, m.cpu_pct, m.threads, m.wakeups_per_s, m.by_thread()
        );
        wakes.push(m.wakeups_per_s);
        threads.push(m.threads as f64);
        rss.push(m.rss_kb as f64);
        hwm.push(m.hwm_kb as f64);
        cpu.push(m.cpu_pct);
        if let Some(mut p) = speaker {
            let _ = p.stop();
        }
        if let Some(mut g) = gobgp {
            let _ = g.stop();
        }
        for mut b in rx {
            let _ = b.stop();
        }
    }
    emit(json!({
        "item": "footprint",
        "who": who,
        "n": n,
        "rss_kb": median(&rss),
        "peak_rss_kb": median(&hwm),
        "cpu_pct": median(&cpu),
        "wakeups_per_s": median(&wakes),
        "threads": median(&threads),
        "runs": rss.len(),
    }));
}

/// What a process costs at idle: RSS, CPU, threads and wake-ups over [`IDLE`].
pub(crate) struct Idle {
    pub(crate) rss_kb: u64,
    pub(crate) hwm_kb: u64,
    pub(crate) cpu_pct: f64,
    pub(crate) threads: usize,
    pub(crate) wakeups_per_s: f64,
    /// Wake-ups a second per thread name (`comm`), most first: where they go.
    pub(crate) per_thread: Vec<(String, f64)>,
}

impl Idle {
    pub(crate) fn by_thread(&self) -> String {
        self.per_thread
            .iter()
            .map(|(name, w)| format!("{name} {w:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Lets `pid` settle for 3 s, then measures it over [`IDLE`].
pub(crate) fn idle(pid: u32) -> Idle {
    std::thread::sleep(Duration::from_secs(3));
    let a = proc_stat(pid);
    let before = context_switches(pid);
    std::thread::sleep(IDLE);
    let b = proc_stat(pid);
    let after = context_switches(pid);
    let secs = IDLE.as_secs_f64();
    let mut names: std::collections::BTreeMap<String, f64> = Default::default();
    for (tid, (name, n)) in &after {
        let was = before.get(tid).map_or(0, |(_, n)| *n);
        *names.entry(name.clone()).or_default() += n.saturating_sub(was) as f64 / secs;
    }
    let mut per_thread: Vec<(String, f64)> = names.into_iter().collect();
    per_thread.sort_by(|x, y| y.1.total_cmp(&x.1));
    Idle {
        rss_kb: b.rss_kb,
        hwm_kb: b.hwm_kb,
        cpu_pct: (b.cpu_ticks - a.cpu_ticks) as f64 / clock_ticks() / secs * 100.0,
        threads: after.len(),
        wakeups_per_s: per_thread.iter().map(|(_, w)| w).sum(),
        per_thread,
    }
}

/// Context switches of every thread of `pid` so far, by thread id, with the thread's
/// name (a thread that exits takes its count along: the idle window has none that do,
/// or its count is low, never high).
fn context_switches(pid: u32) -> std::collections::BTreeMap<u64, (String, u64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Default::default();
    };
    tasks
        .flatten()
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.parse().ok()?;
            let name = std::fs::read_to_string(t.path().join("comm"))
                .unwrap_or_default()
                .trim()
                .to_string();
            let n = std::fs::read_to_string(t.path().join("status"))
                .unwrap_or_default()
                .lines()
                .filter(|l| {
                    l.starts_with("voluntary_ctxt_switches:")
                        || l.starts_with("nonvoluntary_ctxt_switches:")
                })
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
            Some((tid, (name, n)))
        })
        .collect()
}
