//! `report RESULTS.jsonl OUT_DIR`: the tables of BENCHMARKS.md (markdown on stdout) and
//! the data files the charts are drawn from (`OUT_DIR/*.dat`, gnuplot's format). Every
//! ratio is between figures of the same results file, i.e. the same run of
//! scripts/bench on the same machine.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

fn fmt_s(v: Option<f64>) -> String {
    match v {
        Some(s) if s < 1.0 => format!("{:.0} ms", s * 1000.0),
        Some(s) => format!("{s:.2} s"),
        None => "-".into(),
    }
}

fn mib(kb: f64) -> String {
    format!("{:.1} MiB", kb / 1024.0)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a / b < 0.1 => format!("{:.3}x", a / b),
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    }
}

fn n_label(n: u64) -> String {
    match n {
        0 => "idle".into(),
        n if n >= 1_000_000 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

pub fn run(results: &Path, out: &Path) {
    let text = std::fs::read_to_string(results).unwrap_or_default();
    let rows: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    std::fs::create_dir_all(out).expect("out dir");
    let mut md = String::new();
    send(&rows, out, &mut md);
    event(&rows, &mut md);
    receive(&rows, out, &mut md);
    footprint(&rows, out, &mut md);
    kubeidle(&rows, &mut md);
    kube(&rows, &mut md);
    lb(&rows, &mut md);
    lbplan(&rows, &mut md);
    lbkube(&rows, &mut md);
    lbscope(&rows, &mut md);
    lbscope_daemon(&rows, &mut md);
    print!("{md}");
}

/// Median seconds or, when every run hit the bound, `> bound` (as `None` + the bound).
fn time_of(r: &Value) -> (Option<f64>, String) {
    let m = r["median_s"].as_f64();
    let runs = r["runs"].as_array().map(Vec::len).unwrap_or(0);
    let t = r["timed_out"].as_u64().unwrap_or(0);
    let cell = match m {
        Some(_) if t > 0 => format!("{} ({runs} runs, {t} > {} s)", fmt_s(m), r["bound_s"]),
        Some(_) => format!("{} ({runs})", fmt_s(m)),
        None => format!("> {} s", r["bound_s"]),
    };
    (m, cell)
}

fn send(rows: &[Value], out: &Path, md: &mut String) {
    let mut by_n: BTreeMap<u64, BTreeMap<String, &Value>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r["item"] == "send") {
        by_n.entry(r["n"].as_u64().unwrap_or(0))
            .or_default()
            .insert(r["sender"].as_str().unwrap_or("").to_string(), r);
    }
    if by_n.is_empty() {
        return;
    }
    md.push_str("### 2. Sending a table to BIRD (Established -> BIRD holds all N)\n\n");
    md.push_str("| N | speaker, median (runs) | gobgpd | BIRD | gobgpd / speaker | speaker / BIRD | to 99 % of N: speaker, gobgpd, BIRD | sender peak RSS: speaker, gobgpd, BIRD |\n|---|---|---|---|---|---|---|---|\n");
    let mut dat =
        String::from("# n speaker_s gobgpd_s bird_s speaker_rss_mib gobgpd_rss_mib bird_rss_mib\n");
    for (n, s) in &by_n {
        let get = |k: &str| s.get(k).map(|r| time_of(r));
        let rss = |k: &str| s.get(k).and_then(|r| r["sender_peak_rss_kb"].as_f64());
        let (sp, gb, bd) = (get("speaker"), get("gobgpd"), get("bird"));
        let v = |x: &Option<(Option<f64>, String)>| x.as_ref().and_then(|x| x.0);
        let c = |x: &Option<(Option<f64>, String)>| {
            x.as_ref().map(|x| x.1.clone()).unwrap_or("-".into())
        };
        let t99 = |k: &str| fmt_s(s.get(k).and_then(|r| r["median99_s"].as_f64()));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {}, {}, {} | {}, {}, {} |",
            n_label(*n),
            c(&sp),
            c(&gb),
            c(&bd),
            ratio(v(&gb), v(&sp)),
            ratio(v(&sp), v(&bd)),
            t99("speaker"),
            t99("gobgpd"),
            t99("bird"),
            rss("speaker").map(mib).unwrap_or("-".into()),
            rss("gobgpd").map(mib).unwrap_or("-".into()),
            rss("bird").map(mib).unwrap_or("-".into()),
        );
        let d = |x: Option<f64>| x.map(|x| format!("{x}")).unwrap_or("NaN".into());
        let _ = writeln!(
            dat,
            "{n} {} {} {} {} {} {}",
            d(v(&sp)),
            d(v(&gb)),
            d(v(&bd)),
            d(rss("speaker").map(|k| k / 1024.0)),
            d(rss("gobgpd").map(|k| k / 1024.0)),
            d(rss("bird").map(|k| k / 1024.0))
        );
    }
    md.push('\n');
    std::fs::write(out.join("send.dat"), dat).expect("send.dat");
}

fn event(rows: &[Value], md: &mut String) {
    for r in rows.iter().filter(|r| r["item"] == "event") {
        let _ = writeln!(
            md,
            "### 3. Event to wire ({} events, {} nodes in view, ExaBGP receiving)\n",
            r["events"], r["nodes"]
        );
        md.push_str("| interval | median | p99 | max |\n|---|---|---|---|\n");
        for (k, label) in [
            (
                "after_watch",
                "speaker: change loaded -> UPDATE stamped by ExaBGP",
            ),
            ("file_watch", "file watch: file renamed -> change loaded"),
            (
                "end_to_end",
                "end to end incl. file watch: renamed -> at ExaBGP",
            ),
        ] {
            let s = &r[k];
            let f = |x: &str| {
                s[x].as_f64()
                    .map(|v| format!("{v:.2} ms"))
                    .unwrap_or("-".into())
            };
            let _ = writeln!(
                md,
                "| {label} | {} | {} | {} |",
                f("median_ms"),
                f("p99_ms"),
                f("max_ms")
            );
        }
        md.push_str("\nThe speaker's own `podcidr_speaker_event_to_update_seconds` over the same events (cumulative buckets, le -> count): ");
        let buckets: Vec<String> = r["histogram"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|b| b[1].as_f64().unwrap_or(0.0) > 0.0)
                    .map(|b| format!("{} -> {}", b[0], b[1]))
                    .collect()
            })
            .unwrap_or_default();
        let _ = writeln!(md, "{}\n", buckets.join(", "));
    }
}

/// One table per table size received (the full run receives 100,000 /24s, the issue's
/// size, and 1,000,000); the chart's data is the largest's.
fn receive(rows: &[Value], out: &Path, md: &mut String) {
    let all: Vec<&Value> = rows.iter().filter(|r| r["item"] == "receive").collect();
    let mut sizes: Vec<u64> = all.iter().filter_map(|r| r["n"].as_u64()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut largest = None;
    for n in &sizes {
        let rs: Vec<&Value> = all
            .iter()
            .copied()
            .filter(|r| r["n"].as_u64() == Some(*n))
            .collect();
        let speaker = rs.iter().find(|r| r["receiver"] == "speaker").copied();
        let sp_t = speaker.and_then(|r| r["median_s"].as_f64());
        let sp_m = speaker.and_then(|r| r["peak_rss_kb"].as_f64());
        let _ = writeln!(
            md,
            "### 4. Receiving a table ({n} /24s from the packed-UPDATE injector, 1,000 per UPDATE)\n"
        );
        md.push_str("| receiver | median time (runs) | peak RSS | time / speaker's | RSS / speaker's |\n|---|---|---|---|---|\n");
        let mut dat = String::from("# receiver seconds peak_rss_mib\n");
        for r in &rs {
            let (m, cell) = time_of(r);
            let rss = r["peak_rss_kb"].as_f64();
            let _ = writeln!(
                md,
                "| {} | {cell} | {} | {} | {} |",
                r["receiver"].as_str().unwrap_or(""),
                rss.map(mib).unwrap_or("-".into()),
                ratio(m, sp_t),
                ratio(rss, sp_m)
            );
            let _ = writeln!(
                dat,
                "{} {} {}",
                r["receiver"].as_str().unwrap_or(""),
                m.map(|x| x.to_string()).unwrap_or("NaN".into()),
                rss.map(|x| (x / 1024.0).to_string())
                    .unwrap_or("NaN".into())
            );
        }
        md.push('\n');
        largest = Some(dat);
    }
    if let Some(dat) = largest {
        std::fs::write(out.join("receive.dat"), dat).expect("receive.dat");
    }
}

fn footprint(rows: &[Value], out: &Path, md: &mut String) {
    let mut by_n: BTreeMap<u64, BTreeMap<String, &Value>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r["item"] == "footprint") {
        by_n.entry(r["n"].as_u64().unwrap_or(0))
            .or_default()
            .insert(r["who"].as_str().unwrap_or("").to_string(), r);
    }
    if by_n.is_empty() {
        return;
    }
    md.push_str("### 5. Footprint with 2 sessions (median of runs; CPU and wake-ups (context switches of all threads) over 30 s once the table is sent)\n\n");
    md.push_str("| nodes in view | speaker RSS | speaker CPU | speaker wake-ups/s, threads | gobgpd RSS | gobgpd CPU | gobgpd wake-ups/s, threads | gobgpd RSS / speaker's |\n|---|---|---|---|---|---|---|---|\n");
    let mut dat =
        String::from("# n speaker_rss_mib gobgpd_rss_mib speaker_cpu_pct gobgpd_cpu_pct\n");
    for (n, s) in &by_n {
        let f = |k: &str, f: &str| s.get(k).and_then(|r| r[f].as_f64());
        let wakes = |who: &str| match (f(who, "wakeups_per_s"), f(who, "threads")) {
            (Some(w), Some(t)) => format!("{w:.1}, {t}"),
            _ => "-".into(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            n_label(*n),
            f("speaker", "rss_kb").map(mib).unwrap_or("-".into()),
            f("speaker", "cpu_pct")
                .map(|c| format!("{c:.2} %"))
                .unwrap_or("-".into()),
            wakes("speaker"),
            f("gobgpd", "rss_kb").map(mib).unwrap_or("-".into()),
            f("gobgpd", "cpu_pct")
                .map(|c| format!("{c:.2} %"))
                .unwrap_or("-".into()),
            wakes("gobgpd"),
            ratio(f("gobgpd", "rss_kb"), f("speaker", "rss_kb")),
        );
        let d = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or("NaN".into());
        let _ = writeln!(
            dat,
            "{} {} {} {} {}",
            (*n).max(1),
            d(f("speaker", "rss_kb").map(|k| k / 1024.0)),
            d(f("gobgpd", "rss_kb").map(|k| k / 1024.0)),
            d(f("speaker", "cpu_pct")),
            d(f("gobgpd", "cpu_pct"))
        );
    }
    md.push('\n');
    std::fs::write(out.join("footprint.dat"), dat).expect("footprint.dat");
}

fn kubeidle(rows: &[Value], md: &mut String) {
    let rows: Vec<&Value> = rows.iter().filter(|r| r["item"] == "kubeidle").collect();
    if rows.is_empty() {
        return;
    }
    md.push_str("### 5b. Idle in kube mode (issue 31): the daemon against an API server in the bench, one session to ExaBGP (median of runs; CPU, wake-ups and API requests over 30 s once the routes are held)\n\n");
    md.push_str("| source | LoadBalancer Services | routes | RSS | CPU | wake-ups/s | threads | API requests, octets at idle | RSS / file source's |\n|---|---|---|---|---|---|---|---|---|\n");
    let file_rss = rows
        .iter()
        .find(|r| r["source"] == "file")
        .and_then(|r| r["rss_kb"].as_f64());
    for r in &rows {
        let f = |k: &str| r[k].as_f64();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r["source"].as_str().unwrap_or("-"),
            r["load_balancers"],
            r["routes"],
            f("rss_kb").map(mib).unwrap_or("-".into()),
            f("cpu_pct")
                .map(|c| format!("{c:.2} %"))
                .unwrap_or("-".into()),
            f("wakeups_per_s")
                .map(|w| format!("{w:.2}"))
                .unwrap_or("-".into()),
            r["threads"],
            match (f("idle_requests"), f("idle_octets")) {
                (Some(q), Some(o)) => format!("{q}, {o}"),
                _ => "-".into(),
            },
            ratio(f("rss_kb"), file_rss),
        );
    }
    md.push('\n');
}

fn kube(rows: &[Value], md: &mut String) {
    let mut by_n: BTreeMap<u64, BTreeMap<String, &Value>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r["item"] == "kube") {
        by_n.entry(r["n"].as_u64().unwrap_or(0))
            .or_default()
            .insert(r["mode"].as_str().unwrap_or("").to_string(), r);
    }
    if by_n.is_empty() {
        return;
    }
    md.push_str("### 6. What each speaker pulls from the API server (mocked API service)\n\n");
    md.push_str("Per speaker: requests and response octets until its first snapshot, and what its watches receive while 100 other nodes change. The whole cluster runs one speaker per node: multiply by N.\n\n");
    md.push_str("| nodes | local: requests | local: KiB at start | local: KiB per 100 changes | cluster mode: requests | cluster mode: KiB at start | cluster mode: KiB per 100 changes | whole cluster at start, local / cluster mode |\n|---|---|---|---|---|---|---|---|\n");
    for (n, m) in &by_n {
        let f = |mode: &str, k: &str| m.get(mode).and_then(|r| r[k].as_f64());
        let kib = |x: Option<f64>| {
            x.map(|x| format!("{:.1}", x / 1024.0))
                .unwrap_or("-".into())
        };
        let whole = |x: Option<f64>| {
            x.map(|x| match x * *n as f64 / 1048576.0 {
                m if m >= 1024.0 => format!("{:.1} GiB", m / 1024.0),
                m => format!("{m:.1} MiB"),
            })
            .unwrap_or("-".into())
        };
        let _ = writeln!(
            md,
            "| {n} | {} | {} | {} | {} | {} | {} | {} / {} |",
            f("local", "requests")
                .map(|x| x.to_string())
                .unwrap_or("-".into()),
            kib(f("local", "octets")),
            kib(f("local", "churn_octets")),
            f("cluster", "requests")
                .map(|x| x.to_string())
                .unwrap_or("-".into()),
            kib(f("cluster", "octets")),
            kib(f("cluster", "churn_octets")),
            whole(f("local", "octets")),
            whole(f("cluster", "octets")),
        );
    }
    md.push('\n');
}

fn ms(v: &Value, k: &str) -> String {
    v[k].as_f64()
        .map(|x| {
            if x < 0.1 {
                format!("{:.1} µs", x * 1000.0)
            } else {
                format!("{x:.2} ms")
            }
        })
        .unwrap_or("-".into())
}

/// How many of the histogram's events fell at or under `le` seconds, of how many.
fn under(r: &Value, le: f64) -> String {
    let buckets = r["histogram"].as_array().cloned().unwrap_or_default();
    let count = |want: &dyn Fn(&Value) -> bool| {
        buckets
            .iter()
            .find(|b| want(&b[0]))
            .and_then(|b| b[1].as_f64())
    };
    let at = count(&|l| l.as_f64() == Some(le));
    let all = count(&|l| l.as_str() == Some("+Inf"));
    match (at, all) {
        (Some(a), Some(n)) => format!("{a:.0} of {n:.0}"),
        _ => "-".into(),
    }
}

/// The smallest bucket bound holding at least `q` of the histogram's events.
fn bucket_bound(r: &Value, q: f64) -> String {
    let buckets = r["histogram"].as_array().cloned().unwrap_or_default();
    let total = buckets.last().and_then(|b| b[1].as_f64()).unwrap_or(0.0);
    buckets
        .iter()
        .find(|b| total > 0.0 && b[1].as_f64().unwrap_or(0.0) >= q * total)
        .map(|b| match b[0].as_f64() {
            Some(le) if le < 1.0 => format!("<= {:.1} ms", le * 1000.0),
            Some(le) => format!("<= {le} s"),
            None => "> 30 s".into(),
        })
        .unwrap_or("-".into())
}

fn lb(rows: &[Value], md: &mut String) {
    let runs: Vec<&Value> = rows.iter().filter(|r| r["item"] == "lb").collect();
    let Some(first) = runs.first() else {
        return;
    };
    let _ = writeln!(
        md,
        "### 7. LoadBalancer Services: event to wire, memory, CPU ({} endpoint changes, {} nodes, ExaBGP receiving)\n",
        first["events"], first["nodes"]
    );
    md.push_str("The speaker's part is its own `event_to_update_seconds` over the changes (update in -> UPDATE written), as histogram bounds.\n\n");
    md.push_str("| Services in view | ready endpoints | IPs announced by this node | speaker's part: p50 / p99 | changes <= 1 ms / <= 10 ms | end to end incl. file watch: median / p99 | RSS synced / half-way / after churn (peak) | CPU per 1,000 changes (incl. file re-reads) | start to every route at ExaBGP |\n|---|---|---|---|---|---|---|---|---|\n");
    for r in &runs {
        let e = &r["end_to_end"];
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} / {} | {} / {} | {} / {} | {:.1} / {:.1} / {:.1} MiB ({:.1}) | {:.0} s | {:.2} s |",
            r["services"],
            r["endpoints"],
            r["announced"],
            bucket_bound(r, 0.5),
            bucket_bound(r, 0.99),
            under(r, 0.001),
            under(r, 0.01),
            ms(e, "median_ms"),
            ms(e, "p99_ms"),
            f("rss_mib_synced"),
            f("rss_mib_half"),
            f("rss_mib_after"),
            f("hwm_mib"),
            f("cpu_s_per_1000"),
            f("synced_s"),
        );
    }
    md.push('\n');
}

fn lbplan(rows: &[Value], md: &mut String) {
    let runs: Vec<&Value> = rows.iter().filter(|r| r["item"] == "lbplan").collect();
    if runs.is_empty() {
        return;
    }
    md.push_str("### 7b. The LoadBalancer planner per event, against a full re-plan (in process, thread CPU time)\n\n");
    md.push_str("| Services in view | ready endpoints | events | incremental: median / p99 / max | CPU per 1,000 changes | full re-plan: median (events) | full / incremental, medians | planner's memory (RSS growth) |\n|---|---|---|---|---|---|---|---|\n");
    for r in &runs {
        let i = &r["incremental"];
        let f = &r["full_replan"];
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} / {} / {} | {:.1} ms | {} ({}) | {} | {:.1} MiB |",
            r["services"],
            r["endpoints"],
            r["events"],
            ms(i, "median_ms"),
            ms(i, "p99_ms"),
            ms(i, "max_ms"),
            r["cpu_ms_per_1000"].as_f64().unwrap_or(f64::NAN),
            ms(f, "median_ms"),
            f["n"],
            ratio(f["median_ms"].as_f64(), i["median_ms"].as_f64()),
            r["rss_growth_kib"].as_f64().unwrap_or(f64::NAN) / 1024.0,
        );
    }
    md.push('\n');
}

fn lbkube(rows: &[Value], md: &mut String) {
    let runs: Vec<&Value> = rows.iter().filter(|r| r["item"] == "lbkube").collect();
    if runs.is_empty() {
        return;
    }
    md.push_str(
        "### 7c. What each speaker pulls for the LoadBalancer facts (mocked API service)\n\n",
    );
    md.push_str("Per speaker, with the full watch (`SliceScope::All`: every Service and EndpointSlice; the daemon watches only the LoadBalancer Services' slices, item 7d): requests and response octets of the Service and EndpointSlice lists, then what the watches receive for the endpoint changes. The whole cluster runs one speaker per node.\n\n");
    md.push_str("| Services | ready endpoints | requests | MiB at start | endpoint changes | KiB per 1,000 changes | whole cluster of 100 nodes at start |\n|---|---|---|---|---|---|---|\n");
    for r in &runs {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let per = f("churn_octets") / f("changes") * 1000.0 / 1024.0;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.1} | {} | {:.1} | {:.1} MiB |",
            r["services"],
            r["endpoints"],
            r["requests"],
            f("octets") / 1048576.0,
            r["changes"],
            per,
            f("octets") * 100.0 / 1048576.0,
        );
    }
    md.push('\n');
}

fn lbscope(rows: &[Value], md: &mut String) {
    let runs: Vec<&Value> = rows.iter().filter(|r| r["item"] == "lbscope").collect();
    if runs.is_empty() {
        return;
    }
    md.push_str("### 7d. EndpointSlice watches: every slice against those of LoadBalancer Services (mocked API service)\n\n");
    md.push_str("Per speaker, side by side in one run: `all` watches every EndpointSlice (before), `loadbalancers` only those of the LoadBalancer Services (label selectors). At start: requests, slice watches and response octets (of which the Services' and the slices' lists); then 1,000 endpoint changes of other Services and 1,000 of LoadBalancer Services (octets the watches receive, updates handed on, event to update handed on). Multiplied out: a restart of every speaker of the DaemonSet.\n\n");
    md.push_str("| watch | Services (LoadBalancer) | endpoints (behind LoadBalancers) | requests | slice watches | MiB at start (Services + slices) | other Services: KiB per 1,000 changes, handed on | LoadBalancers: KiB per 1,000 changes, handed on | handed on p50 / p99 | restart of 1,000 / 5,000 nodes |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for r in &runs {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let per = |k: &str| f(k) / f("changes") * 1000.0 / 1024.0;
        let mib = |k: &str| f(k) / 1048576.0;
        let _ = writeln!(
            md,
            "| {} | {} ({}) | {} ({}) | {} | {} | {:.1} ({:.1} + {:.1}) | {:.1}, {} | {:.1}, {} | {} / {} µs | {:.1} / {:.1} GiB |",
            r["watch"].as_str().unwrap_or("?"),
            r["services"],
            r["load_balancers"],
            r["endpoints"],
            r["lb_endpoints"],
            r["requests"],
            r["slice_watches"],
            mib("octets"),
            mib("service_octets"),
            mib("slice_octets"),
            per("other_octets"),
            r["other_handed_on"],
            per("lb_octets"),
            r["lb_handed_on"],
            r["lb_p50_us"],
            r["lb_p99_us"],
            f("octets") * 1000.0 / 1073741824.0,
            f("octets") * 5000.0 / 1073741824.0,
        );
    }
    md.push('\n');
}

fn lbscope_daemon(rows: &[Value], md: &mut String) {
    let runs: Vec<&Value> = rows
        .iter()
        .filter(|r| r["item"] == "lbscope_daemon")
        .collect();
    let Some(first) = runs.first() else {
        return;
    };
    let _ = writeln!(
        md,
        "### 7d (daemon). The speaker with each watch: memory, CPU, event to wire ({} Services, {} LoadBalancer, {} endpoints, {} changes of each kind, ExaBGP receiving)\n",
        first["services"], first["load_balancers"], first["endpoints"], first["changes"]
    );
    md.push_str("`podcidr-speaker run` against an API server in the bench process (HTTP on 127.0.0.1), side by side in one run. End to end: the watch event written to the socket -> ExaBGP's stamp; the speaker's part: its `event_to_update_seconds` (update in -> UPDATE written).\n\n");
    md.push_str("| watch | requests | MiB at start | RSS synced / after other changes / after LoadBalancer changes (peak) | other Services' changes: KiB, CPU | LoadBalancer changes: KiB, CPU | end to end median / p99 | speaker's part p50 / p99 | start to every route |\n|---|---|---|---|---|---|---|---|---|\n");
    for r in &runs {
        let e = &r["end_to_end"];
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {:.1} / {:.1} / {:.1} MiB ({:.1}) | {:.1}, {:.2} s | {:.1}, {:.2} s | {} / {} | {} / {} | {:.1} s |",
            r["watch"].as_str().unwrap_or("?"),
            r["requests"],
            f("octets") / 1048576.0,
            f("rss_mib_synced"),
            f("rss_mib_after_other"),
            f("rss_mib_after"),
            f("hwm_mib"),
            f("other_octets") / 1024.0,
            f("other_cpu_s"),
            f("lb_octets") / 1024.0,
            f("lb_cpu_s"),
            ms(e, "median_ms"),
            ms(e, "p99_ms"),
            bucket_bound(r, 0.5),
            bucket_bound(r, 0.99),
            f("synced_s"),
        );
    }
    if let Some(b) = rows.iter().find(|r| r["item"] == "lbscope_daemon_baseline") {
        let _ = writeln!(
            md,
            "| none (`--announce-lb-ips off`) | {} | {:.3} | {:.1} MiB synced ({:.1}) | - | - | - | - | - |",
            b["requests"],
            b["octets"].as_f64().unwrap_or(f64::NAN) / 1048576.0,
            b["rss_mib_synced"].as_f64().unwrap_or(f64::NAN),
            b["hwm_mib"].as_f64().unwrap_or(f64::NAN),
        );
    }
    md.push('\n');
}
