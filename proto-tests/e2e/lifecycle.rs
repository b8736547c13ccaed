//! Node lifecycle end to end (issue 27): what BIRD and FRR hold of a node's pod CIDR and
//! LoadBalancer path when its speaker stops, in each way a node comes and goes.
//!
//! Two per-node speakers (n1, n2) with graceful restart on, both switches with their
//! defaults (graceful restart on), one `externalTrafficPolicy: Cluster` Service whose IP
//! both announce. n1's Node is put in the state of the row (cordoned, tainted, shutting
//! down, deleted, labelled), then n1's speaker stops (SIGTERM, or SIGKILL), and both
//! switches are polled every 100 ms: when n1's paths get 65535:0, turn stale, or go.
//! Each row prints what it measured (`lifecycle row: ...`), the numbers in
//! RELIABILITY.md's lifecycle table, and asserts what the row must do:
//!
//! - a restart (rolling upgrade) withdraws nothing: both paths stale until the new
//!   speaker refreshes them;
//! - a leaving node (drain + reboot, autoscaler scale-down, Node deleted) marks every
//!   path 65535:0 and has none left at either switch within the grace period plus one
//!   second;
//! - a cordoned node (cordon + upgrade) drains its LoadBalancer path only: the pod CIDR
//!   stays (stale) until the new speaker refreshes it;
//! - kill -9: no stop decision is possible; graceful restart keeps both paths stale for
//!   the restart time the speaker advertised, then the switches drop them;
//! - the maintenance label (`node.kubernetes.io/exclude-from-external-load-balancers`)
//!   takes the LoadBalancer path away while the speaker runs, with 65535:0 for the grace
//!   period first; the pod CIDR stays; the label removed, the path is back.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::bfd_rig::{
    single_hop, speaker_config, wait_all_up, Rig as BfdRig, Switch, Tor, INTERVAL_MS, METRICS,
    NODE_LO, NODE_V4, POD_V4, POD_V6, TOR_BOUND,
};
use crate::fixture::{frr_maximum_paths, start_tors, BgpConfig, Peer};
use crate::harness::bird::Bird;
use crate::harness::frr::Frr;
use crate::harness::{v4, wait_for, Afi, BgpDaemon, Route};
use crate::isolated;
use crate::lb::ServiceSpec;
use crate::speaker::{net, node_ip, Inputs, NodeSpec, Speaker};
use crate::WAIT;

/// `--graceful-shutdown-time` of the e2e speakers (`speaker::GRACEFUL_SHUTDOWN`).
const GRACE: Duration = Duration::from_secs(2);
/// The graceful-restart time the speakers advertise: long enough that a restart row
/// never sees it run out, short enough for the kill -9 row to watch it end.
const RESTART_TIME: Duration = Duration::from_secs(8);
const LB_IP: &str = "198.51.100.20/32";
const GSHUT: (u16, u16) = (65535, 0);
const EXCLUDE: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

fn bgp_config() -> String {
    BgpConfig::new([Peer::bird(), Peer::frr()])
        .section(
            "address-pools:\n  - name: web\n    protocol: bgp\n    addresses: [198.51.100.0/24]",
        )
        .speaker("graceful-restart", true)
        .speaker(
            "graceful-restart-time",
            format!("{}s", RESTART_TIME.as_secs()),
        )
        .yaml()
}

fn pod_cidr(n: u8) -> String {
    format!("10.244.{n}.0/24")
}

fn node(n: u8) -> NodeSpec {
    NodeSpec::new(&format!("n{n}"), node_ip(n)).node_cidrs(&[&pod_cidr(n)])
}

/// One prefix of n1 at one switch, as polled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Seen {
    /// When it first carried 65535:0.
    marked: Option<Duration>,
    /// When it first turned stale.
    stale: Option<Duration>,
    /// When it was first gone.
    gone: Option<Duration>,
}

impl Seen {
    fn observe(&mut self, route: Option<&Route>, at: Duration) {
        match route {
            None => {
                self.gone.get_or_insert(at);
            }
            Some(r) => {
                if r.communities.contains(&GSHUT) {
                    self.marked.get_or_insert(at);
                }
                if r.stale {
                    self.stale.get_or_insert(at);
                }
            }
        }
    }

    fn describe(&self) -> String {
        let t =
            |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{:.1}s", d.as_secs_f64()));
        format!(
            "65535:0 at {}, stale at {}, gone at {}",
            t(self.marked),
            t(self.stale),
            t(self.gone)
        )
    }
}

/// n1's pod CIDR and LB path at BIRD and at FRR.
#[derive(Debug, Default)]
struct Timeline {
    bird_pod: Seen,
    bird_lb: Seen,
    frr_pod: Seen,
    frr_lb: Seen,
}

impl Timeline {
    fn all(&self) -> [(&'static str, Seen); 4] {
        [
            ("BIRD pod CIDR", self.bird_pod),
            ("BIRD LB path", self.bird_lb),
            ("FRR pod CIDR", self.frr_pod),
            ("FRR LB path", self.frr_lb),
        ]
    }

    fn lb_paths(&self) -> [(&'static str, Seen); 2] {
        [("BIRD LB path", self.bird_lb), ("FRR LB path", self.frr_lb)]
    }

    fn pod_cidrs(&self) -> [(&'static str, Seen); 2] {
        [
            ("BIRD pod CIDR", self.bird_pod),
            ("FRR pod CIDR", self.frr_pod),
        ]
    }

    fn describe(&self, row: &str) -> String {
        format!(
            "lifecycle row: {row}\n  BIRD pod CIDR: {}\n  BIRD LB path:  {}\n  FRR pod CIDR:  {}\n  FRR LB path:   {}",
            self.bird_pod.describe(),
            self.bird_lb.describe(),
            self.frr_pod.describe(),
            self.frr_lb.describe()
        )
    }
}

/// Polls both switches every 100 ms from `t0` for `how_long` (or until both of n1's
/// prefixes are gone at both).
fn watch(bird: &Bird, frr: &Frr, t0: Instant, how_long: Duration) -> Timeline {
    let mut tl = Timeline::default();
    let (pod, lb) = (net(&pod_cidr(1)), net(LB_IP));
    while t0.elapsed() < how_long {
        let at = t0.elapsed();
        for (tor, pod_seen, lb_seen) in [
            (bird as &dyn BgpDaemon, &mut tl.bird_pod, &mut tl.bird_lb),
            (frr as &dyn BgpDaemon, &mut tl.frr_pod, &mut tl.frr_lb),
        ] {
            // A switch that cannot answer this once is asked again at the next poll.
            let Ok(routes) = tor.routes(node_ip(1), Afi::Ipv4) else {
                continue;
            };
            pod_seen.observe(routes.iter().find(|r| r.prefix == pod), at);
            lb_seen.observe(routes.iter().find(|r| r.prefix == lb), at);
        }
        let all_gone = [tl.bird_pod, tl.bird_lb, tl.frr_pod, tl.frr_lb]
            .iter()
            .all(|s| s.gone.is_some());
        if all_gone {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    tl
}

/// The rig: BIRD (eBGP) and FRR (iBGP, multipath) with their defaults, n1 and n2, the
/// Service announced by both.
struct Rig {
    bird: Bird,
    frr: Frr,
    inputs: Inputs,
    n1: Speaker,
    n2: Speaker,
    args1: Vec<String>,
}

impl Rig {
    fn start(ns: &crate::harness::netns::Netns) -> Rig {
        Rig::start_with(ns, &[])
    }

    /// With `n1_args` added to n1's command line.
    fn start_with(ns: &crate::harness::netns::Netns, n1_args: &[&str]) -> Rig {
        let (bird, frr) = start_tors(ns.dir(), &[node_ip(1), node_ip(2)]);
        frr_maximum_paths(&frr);
        let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
        inputs.write_config(&bgp_config());
        for n in [1, 2] {
            inputs.write_node(&node(n));
        }
        let svc = ServiceSpec::new("web", "Cluster", &["198.51.100.20"]).endpoints(&["n2"], true);
        inputs.write_cluster_file(&svc.file(), &svc.yaml());
        let args = |n: u8| {
            let mut a = Speaker::standalone_args(&inputs, &format!("n{n}"), node_ip(n));
            a.push("--announce-lb-ips=on".into());
            a
        };
        let mut args1 = args(1);
        args1.extend(n1_args.iter().map(|a| a.to_string()));
        let n1 = Speaker::start(ns.dir(), "n1", &args1);
        let n2 = Speaker::start(ns.dir(), "n2", &args(2));
        let rig = Rig {
            bird,
            frr,
            inputs,
            n1,
            n2,
            args1,
        };
        rig.wait_both_paths("start");
        rig
    }

    /// Both switches hold n1's pod CIDR and LB path, fresh, and n2's LB path.
    fn wait_both_paths(&self, what: &str) {
        for tor in [&self.bird as &dyn BgpDaemon, &self.frr] {
            for n in [1u8, 2] {
                let want: Vec<String> = if n == 1 {
                    vec![pod_cidr(1), LB_IP.to_owned()]
                } else {
                    vec![pod_cidr(2), LB_IP.to_owned()]
                };
                wait_for(
                    &format!("{what}: {} holds n{n}'s routes", tor.kind()),
                    WAIT,
                    || {
                        let routes = tor
                            .routes(node_ip(n), Afi::Ipv4)
                            .map_err(|e| e.to_string())?;
                        let fresh = want.iter().all(|p| {
                            routes.iter().any(|r| {
                                r.prefix == net(p) && !r.stale && !r.communities.contains(&GSHUT)
                            })
                        });
                        if fresh && routes.len() == want.len() {
                            Ok(())
                        } else {
                            Err(format!("{routes:?}"))
                        }
                    },
                )
                .unwrap_or_else(|e| {
                    panic!(
                        "{e}\n--- n1\n{}\n--- n2\n{}",
                        self.n1.log_tail(30),
                        self.n2.log_tail(20)
                    )
                });
            }
        }
    }

    /// n2's LB path is untouched at both switches (the other path of the Service).
    fn assert_n2_holds(&self, what: &str) {
        for tor in [&self.bird as &dyn BgpDaemon, &self.frr] {
            let routes = tor.routes(node_ip(2), Afi::Ipv4).unwrap();
            assert!(
                routes
                    .iter()
                    .any(|r| r.prefix == net(LB_IP) && !r.stale && !r.communities.contains(&GSHUT)),
                "{what}: {} lost n2's LB path: {routes:?}",
                tor.kind()
            );
        }
    }

    fn set_n1(&self, spec: NodeSpec) {
        self.inputs.write_node(&spec);
        // The file source sees a stable file within about half a second.
        std::thread::sleep(Duration::from_millis(1500));
    }

    /// SIGTERM to n1, the switches watched through the drain.
    fn stop_n1(&mut self, watch_for: Duration) -> Timeline {
        let t0 = Instant::now();
        self.n1.send_sigterm();
        let tl = watch(&self.bird, &self.frr, t0, watch_for);
        let status = self.n1.terminate();
        assert!(status.success(), "exit {status}:\n{}", self.n1.log_tail(30));
        tl
    }

    fn restart_n1(&mut self, ns: &crate::harness::netns::Netns) {
        self.n1 = Speaker::start(ns.dir(), "n1-new", &self.args1);
        self.wait_both_paths("after the new speaker");
    }

    fn log_has(&self, needle: &str) -> bool {
        self.n1.log_tail(200).contains(needle)
    }
}

fn assert_left(tl: &Timeline, row: &str) {
    let bound = GRACE + Duration::from_secs(1);
    for (what, s) in tl.all() {
        assert!(
            s.marked.is_some(),
            "{row}: {what} never carried 65535:0\n{}",
            tl.describe(row)
        );
        let gone = s
            .gone
            .unwrap_or_else(|| panic!("{row}: {what} never went\n{}", tl.describe(row)));
        assert!(
            gone <= bound,
            "{row}: {what} gone only after {gone:?}\n{}",
            tl.describe(row)
        );
        assert!(
            s.stale.is_none(),
            "{row}: {what} went stale\n{}",
            tl.describe(row)
        );
    }
}

fn assert_kept(s: Seen, what: &str, tl: &Timeline, row: &str) {
    assert!(
        s.gone.is_none(),
        "{row}: {what} withdrawn\n{}",
        tl.describe(row)
    );
    assert!(
        s.marked.is_none(),
        "{row}: {what} marked\n{}",
        tl.describe(row)
    );
    assert!(
        s.stale.is_some(),
        "{row}: {what} never stale\n{}",
        tl.describe(row)
    );
}

fn rig_addrs() -> Vec<IpAddr> {
    vec![v4(2), v4(3), node_ip(1), node_ip(2)]
}

#[test]
fn rolling_upgrade_keeps_every_path() {
    let Some(ns) = isolated!(&rig_addrs(), Duration::from_secs(180)) else {
        return;
    };
    let mut rig = Rig::start(&ns);
    let row = "rolling upgrade";
    let tl = rig.stop_n1(Duration::from_secs(4));
    eprintln!("{}", tl.describe(row));
    assert!(rig.log_has("decision=\"restart\"") || rig.log_has("decision=restart"));
    for (what, s) in tl.all() {
        assert_kept(s, what, &tl, row);
    }
    rig.restart_n1(&ns);
    rig.assert_n2_holds(row);
}

/// A leaving row: n1 (with `n1_args`) started, its Node through `states`, then SIGTERM: the decision logged,
/// every path of n1 drained at both switches, n2's untouched.
fn leaving_row(
    ns: &crate::harness::netns::Netns,
    n1_args: &[&str],
    row: &str,
    states: &[NodeSpec],
    decision: &str,
) {
    let mut rig = Rig::start_with(ns, n1_args);
    for state in states {
        rig.set_n1(state.clone());
    }
    let tl = rig.stop_n1(GRACE + Duration::from_secs(4));
    eprintln!("{}", tl.describe(row));
    assert!(rig.log_has(decision), "{}", rig.n1.log_tail(30));
    assert_left(&tl, row);
    rig.assert_n2_holds(row);
}

/// `--on-stop leave` on a node that says nothing of leaving: every path drained all the
/// same (the operator knows better than the Node object, e.g. a power-off by hand).
#[test]
fn on_stop_leave_forces_the_drain() {
    let Some(ns) = isolated!(&rig_addrs(), Duration::from_secs(180)) else {
        return;
    };
    leaving_row(&ns, &["--on-stop=leave"], "--on-stop leave", &[], "forced");
}

#[test]
fn drain_and_reboot_drains_every_path() {
    // `isolated!` re-runs the test it is written in, so it stays in each test.
    let Some(ns) = isolated!(&rig_addrs(), Duration::from_secs(180)) else {
        return;
    };
    let mut drained = node(1);
    drained.unschedulable = true;
    drained.taints = vec!["node.kubernetes.io/unschedulable".into()];
    // Then the kubelet's graceful node shutdown: Ready False, "node is shutting down".
    let mut shutting_down = drained.clone();
    shutting_down.shutting_down = true;
    leaving_row(
        &ns,
        &[],
        "drain + reboot",
        &[drained, shutting_down],
        "shutting-down",
    );
}

#[test]
fn cordon_and_upgrade_drains_the_lb_path_and_keeps_the_pod_cidr() {
    let Some(ns) = isolated!(&rig_addrs(), Duration::from_secs(180)) else {
        return;
    };
    let mut rig = Rig::start(&ns);
    let row = "cordon + upgrade";
    let mut n1 = node(1);
    n1.unschedulable = true;
    rig.set_n1(n1);
    let tl = rig.stop_n1(GRACE + Duration::from_secs(4));
    eprintln!("{}", tl.describe(row));
    assert!(rig.log_has("cordoned"), "{}", rig.n1.log_tail(30));
    let bound = GRACE + Duration::from_secs(1);
    for (what, s) in tl.lb_paths() {
        assert!(
            s.marked.is_some(),
            "{row}: {what} never marked\n{}",
            tl.describe(row)
        );
        assert!(
            s.gone.is_some_and(|g| g <= bound),
            "{row}: {what} not gone within {bound:?}\n{}",
            tl.describe(row)
        );
    }
    for (what, s) in tl.pod_cidrs() {
        assert_kept(s, what, &tl, row);
    }
    rig.assert_n2_holds(row);
    // The upgraded speaker on the still cordoned node: the pod CIDR refreshed, and
    // cordon is no exclusion, so the LB path is back too.
    rig.restart_n1(&ns);
}

#[test]
fn autoscaler_scale_down_drains_every_path() {
    let Some(ns) = isolated!(&rig_addrs(), Duration::from_secs(180)) else {
        return;
    };
    let mut n1 = node(1);
    n1.unschedulable = true;
    n1.taints = vec!["ToBeDeletedByClusterAutoscaler".into()];
    leaving_row(&ns, &[], "autoscaler scale-down", &[n1], "scale-down");
}

#[test]
fn node_deleted_withdraws_the_pod_cidr_then_drains_the_lb_path() {
    let Some(ns) = isolated!(&rig_addrs(), Duration::from_secs(180)) else {
        return;
    };
    let mut rig = Rig::start(&ns);
    let row = "Node deleted";
    // The Node object goes while the speaker still runs (its pod is deleted after it).
    let t0 = Instant::now();
    rig.inputs.delete_node("n1");
    let before = watch(&rig.bird, &rig.frr, t0, Duration::from_secs(3));
    eprintln!("{}", before.describe("Node deleted, speaker running"));
    for (what, s) in before.pod_cidrs() {
        assert!(
            s.gone.is_some(),
            "{row}: {what} still held after the Node is gone\n{}",
            before.describe(row)
        );
    }
    let tl = rig.stop_n1(GRACE + Duration::from_secs(4));
    eprintln!("{}", tl.describe(row));
    assert!(rig.log_has("node-deleted"), "{}", rig.n1.log_tail(30));
    let bound = GRACE + Duration::from_secs(1);
    for (what, s) in tl.lb_paths() {
        if before_gone(&before, what) {
            continue;
        }
        assert!(
            s.marked.is_some(),
            "{row}: {what} never marked\n{}",
            tl.describe(row)
        );
        assert!(
            s.gone.is_some_and(|g| g <= bound),
            "{row}: {what} not gone within {bound:?}\n{}",
            tl.describe(row)
        );
    }
    rig.assert_n2_holds(row);
}

/// Whether n1's LB path was already gone before the stop (the LB planner drops a node
/// it no longer knows).
fn before_gone(before: &Timeline, what: &str) -> bool {
    if what.starts_with("BIRD") {
        before.bird_lb.gone.is_some()
    } else {
        before.frr_lb.gone.is_some()
    }
}

#[test]
fn kill_9_leaves_stale_paths_for_the_restart_time() {
    let Some(ns) = isolated!(&rig_addrs(), Duration::from_secs(180)) else {
        return;
    };
    let mut rig = Rig::start(&ns);
    let row = "kill -9";
    let t0 = Instant::now();
    rig.n1.kill();
    let tl = watch(
        &rig.bird,
        &rig.frr,
        t0,
        RESTART_TIME + Duration::from_secs(12),
    );
    eprintln!("{}", tl.describe(row));
    for (what, s) in tl.all() {
        assert!(
            s.marked.is_none(),
            "{row}: {what} marked\n{}",
            tl.describe(row)
        );
        // Stale once the switch notices the connection is gone (the kernel resets it
        // at once), then dropped when the advertised restart time runs out.
        assert!(
            s.stale.is_some(),
            "{row}: {what} never stale\n{}",
            tl.describe(row)
        );
        let gone = s
            .gone
            .unwrap_or_else(|| panic!("{row}: {what} never went\n{}", tl.describe(row)));
        assert!(
            gone >= RESTART_TIME - Duration::from_secs(1),
            "{row}: {what} gone before the restart time\n{}",
            tl.describe(row)
        );
    }
    rig.assert_n2_holds(row);
}

#[test]
fn maintenance_label_takes_the_lb_path_away_and_keeps_the_pod_cidr() {
    let Some(ns) = isolated!(&rig_addrs(), Duration::from_secs(180)) else {
        return;
    };
    let rig = Rig::start(&ns);
    let row = "maintenance label";
    let t0 = Instant::now();
    rig.inputs.write_node(&node(1).label(EXCLUDE, "true"));
    let tl = watch(&rig.bird, &rig.frr, t0, GRACE + Duration::from_secs(5));
    eprintln!("{}", tl.describe(row));
    // The file source sees the edit within about half a second; then the grace period
    // with 65535:0, then the withdrawal.
    let bound = GRACE + Duration::from_secs(2);
    for (what, s) in tl.lb_paths() {
        let marked = s
            .marked
            .unwrap_or_else(|| panic!("{row}: {what} never marked\n{}", tl.describe(row)));
        let gone = s
            .gone
            .unwrap_or_else(|| panic!("{row}: {what} never went\n{}", tl.describe(row)));
        assert!(
            gone <= bound && gone >= marked + GRACE - Duration::from_millis(300),
            "{row}: {what} gone at {gone:?}, marked at {marked:?}\n{}",
            tl.describe(row)
        );
    }
    for (what, s) in tl.pod_cidrs() {
        assert!(
            s.gone.is_none() && s.stale.is_none(),
            "{row}: {what} touched\n{}",
            tl.describe(row)
        );
    }
    rig.assert_n2_holds(row);
    // The label removed: the path is back.
    rig.inputs.write_node(&node(1));
    rig.wait_both_paths("label removed");
}

/// A node that dies without a stop (kill -9) or whose link is cut, with graceful restart
/// on (as deployed) and BFD (the `fast` profile, 100 ms x 3), against one switch of
/// `kind`: how long the switch keeps the node's route. Our BFD shares fate with the
/// BGP process (the C bit clear, RFC 5880 section 4.1); the switches' defaults act on a
/// BFD Down as on a dead session, not as on a graceful restart.
fn dead_node_with_bfd(ns: &crate::harness::netns::Netns, kind: Tor, how: &str) -> Duration {
    let rig = BfdRig::new(ns.dir());
    let switch = Switch::start(&rig, kind, true);
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_node(&NodeSpec::new("n1", NODE_V4.parse().unwrap()).node_cidrs(&[POD_V4, POD_V6]));
    let config = speaker_config(true, false, INTERVAL_MS);
    let gr = config.replace(
        "graceful-restart: false",
        &format!(
            "graceful-restart: true\n  graceful-restart-time: {}s",
            RESTART_TIME.as_secs()
        ),
    );
    assert_ne!(gr, config, "the rig's config names graceful-restart");
    inputs.write_config(&gr);
    let args = vec![
        "--node=n1".to_owned(),
        format!("--bgp-config={}", inputs.config_path().display()),
        format!("--cluster-state={}", inputs.cluster_path().display()),
        format!("--metrics-addr={METRICS}"),
    ];
    let mut speaker = Speaker::start(ns.dir(), "n1", &args);
    let neighbors = single_hop();
    wait_all_up(&switch, &speaker, &neighbors, true);
    let t0 = Instant::now();
    match how {
        "kill -9" => {
            speaker.kill();
        }
        _ => rig.cut(),
    }
    let mut gone = None;
    while t0.elapsed() < RESTART_TIME + Duration::from_secs(6) {
        if !switch.holds(NODE_V4, Afi::Ipv4, POD_V4) {
            gone = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let gone =
        gone.unwrap_or_else(|| panic!("{kind:?} {how}: the route never went\n{}", switch.logs()));
    eprintln!("lifecycle row: {how} with BFD and graceful restart: {kind:?} dropped n1's route after {gone:?}");
    if how != "kill -9" {
        rig.restore();
        let _ = speaker.terminate();
    }
    gone
}

/// What a switch does with a dead node's route: dropped at BFD speed, or kept stale
/// for the advertised restart time.
#[derive(Debug, Clone, Copy)]
enum Expect {
    BfdSpeed,
    RestartTime,
}

macro_rules! dead_node_rows {
    ($($name:ident => ($kind:expr, $how:expr, $expect:expr);)*) => {$(
        #[test]
        fn $name() {
            let Some(ns) = isolated!(&[NODE_LO.parse().unwrap()], Duration::from_secs(150)) else {
                return;
            };
            let gone = dead_node_with_bfd(&ns, $kind, $how);
            match $expect {
                // BFD's detection (300 ms) and the switch's reaction.
                Expect::BfdSpeed => assert!(
                    gone <= TOR_BOUND + Duration::from_millis(500),
                    "{:?} {}: {gone:?}", $kind, $how
                ),
                Expect::RestartTime => assert!(
                    gone >= RESTART_TIME - Duration::from_secs(1)
                        && gone <= RESTART_TIME + Duration::from_secs(3),
                    "{:?} {}: {gone:?}", $kind, $how
                ),
            }
        }
    )*};
}

// A killed process: its kernel resets the TCP connection before BFD times out. FRR
// takes that for a graceful restart and keeps the stale route for the restart time even
// when BFD goes down after it; BIRD drops it at BFD Down. A cut link (a power loss, a
// dead NIC): no reset, BFD Down first, both drop at once.
dead_node_rows! {
    bird_drops_a_killed_nodes_paths_at_bfd_speed => (Tor::Bird, "kill -9", Expect::BfdSpeed);
    frr_keeps_a_killed_nodes_paths_for_the_restart_time => (Tor::Frr, "kill -9", Expect::RestartTime);
    bird_drops_a_cut_nodes_paths_at_bfd_speed => (Tor::Bird, "link cut", Expect::BfdSpeed);
    frr_drops_a_cut_nodes_paths_at_bfd_speed => (Tor::Frr, "link cut", Expect::BfdSpeed);
}
