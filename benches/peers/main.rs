//! The speaker against real peers, side by side (issue #10): the scenarios behind
//! BENCHMARKS.md. Run through `scripts/bench`, which builds this with the release (bench)
//! profile, runs each scenario under `unshare -rn` in a network namespace of its own
//! (every address is a 100.64.0.x on that namespace's lo) and hands the `RESULT` lines
//! to `report`.
//!
//! ```text
//! peers --bench send  speaker|gobgpd|bird N RUNS        item 2
//! peers --bench event NODES EVENTS                      item 3
//! peers --bench receive speaker|bird|frr|gobgpd N RUNS  item 4
//! peers --bench footprint speaker|gobgpd N RUNS         item 5
//! peers --bench kubeidle LOADBALANCERS[,L...] RUNS      item 5b (issue 31)
//! peers --bench kube N[,N...]                         item 6 (no namespace needed)
//! peers --bench lb SERVICES ENDPOINTS EVENTS             item 7
//! peers --bench lbplan SERVICES[,S...] ENDPOINTS EVENTS  item 7b (no namespace needed)
//! peers --bench lbkube SERVICES[,S...] ENDPOINTS CHANGES item 7c (no namespace needed)
//! peers --bench lbscope SERVICES LBS ENDPOINTS CHANGES item 7d (no namespace needed)
//! peers --bench lbscope-daemon SERVICES LBS ENDPOINTS CHANGES  item 7d, the daemon
//! peers --bench report RESULTS.jsonl OUT_DIR            tables (stdout) and chart data
//! ```
//!
//! Without `--bench` (as `cargo test --all-targets` runs it) it does nothing: the
//! scenarios need the real daemons, a namespace and minutes.
//!
//! Reuses the interop harness (BIRD, FRR, GoBGP, ExaBGP), the reliability tests' raw
//! peer and the kube tests' mocked API server's JSON objects through `#[path]`.

// A bench crate: a failed unwrap aborts the measurement, not a speaker; its harness
// may call libc. The rules of Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

// Mounted as they are; a bench target compiles their `mod tests` without running them.
#[allow(unused_imports)]
#[path = "../../proto-tests/interop/harness/mod.rs"]
mod harness;
#[allow(dead_code, unused_imports)]
#[path = "../../proto-tests/kube/harness.rs"]
mod kube_harness;
#[allow(unused_imports)]
#[path = "../../proto-tests/reliability/raw_peer.rs"]
mod raw_peer;

mod common;
mod event;
mod footprint;
mod kube;
mod kubeidle;
mod lb;
mod lbdaemon;
mod lbkube;
mod lbplan;
mod lbscope;
mod receive;
mod report;
mod send;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("peers: not run outside `--bench` (scripts/bench runs it)");
        return;
    }
    let args: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--bench")
        .collect();
    let num = |s: &str| -> usize {
        s.replace('_', "")
            .parse()
            .unwrap_or_else(|e| panic!("{s}: {e}"))
    };
    match args.as_slice() {
        ["send", who, n, runs] => send::run(who, num(n), num(runs)),
        ["event", nodes, events] => event::run(num(nodes), num(events)),
        ["receive", who, n, runs] => receive::run(who, num(n), num(runs)),
        ["footprint", who, n, runs] => footprint::run(who, num(n), num(runs)),
        ["kubeidle", lbs, runs] => {
            kubeidle::run(&lbs.split(',').map(num).collect::<Vec<_>>(), num(runs))
        }
        ["lb", services, endpoints, events] => lb::run(num(services), num(endpoints), num(events)),
        ["lbplan", sizes, endpoints, events] => lbplan::run(
            &sizes.split(',').map(num).collect::<Vec<_>>(),
            num(endpoints),
            num(events),
        ),
        ["lbkube", sizes, endpoints, changes] => lbkube::run(
            &sizes.split(',').map(num).collect::<Vec<_>>(),
            num(endpoints),
            num(changes),
        ),
        ["lbscope", services, lbs, endpoints, changes] => {
            lbscope::run(num(services), num(lbs), num(endpoints), num(changes))
        }
        ["lbscope-daemon", services, lbs, endpoints, changes] => {
            lbdaemon::run(num(services), num(lbs), num(endpoints), num(changes))
        }
        ["kube", sizes] => kube::run(&sizes.split(',').map(num).collect::<Vec<_>>()),
        ["report", results, out] => report::run(results.as_ref(), out.as_ref()),
        other => {
            eprintln!("unknown scenario {other:?}; see benches/peers/main.rs");
            std::process::exit(2);
        }
    }
}
