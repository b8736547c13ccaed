//! The migration guides' procedures (docs/migrate-from-metallb.md,
//! docs/migrate-from-cilium-bgp.md) run step by step against BIRD (eBGP) and FRR (iBGP,
//! multipath), the switches polled without pause through each step: which node's path
//! each switch holds for each prefix, and for how long a prefix or a node's path was
//! missing. Each step prints what it measured (`migration step: ...`): the numbers the
//! guides quote.
//!
//! The old speakers are stand-ins that behave on the wire as MetalLB 0.12's and Cilium
//! 1.10-1.16's did ([`crate::legacy`]). A node "moved" in a cluster is a label that
//! takes the old speaker's pod off the node and puts ours on; here that is the old
//! speaker's process exiting and ours starting at the same instant. Our speakers follow
//! the standalone cluster state, which stands in for the API.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use ipnet::IpNet;

use crate::fixture::{frr_maximum_paths, start_tors, BIRD_AS, NODE_AS};
use crate::harness::bird::Bird;
use crate::harness::frr::Frr;
use crate::harness::process::{run_ok, COMMAND_TIMEOUT};
use crate::harness::{v4, Afi, BgpDaemon};
use crate::isolated;
use crate::lb::{frr_multipath, ServiceSpec};
use crate::legacy::{Advertisement, Legacy, LegacyPeer};
use crate::scrape::value;
use crate::speaker::{net, node_ip, Inputs, NodeSpec, Speaker, BINARY};
use crate::tor::{bird_route_times, frr_route_times};

/// The Service with `externalTrafficPolicy: Cluster` (endpoints on both nodes): every
/// node announces it.
const CLUSTER_IP: &str = "198.51.100.10/32";
/// The Service with `externalTrafficPolicy: Local` and its one endpoint on n1: only n1
/// announces it, so moving n1 is a gap for it.
const LOCAL_IP: &str = "198.51.100.20/32";
/// The nodes' pod CIDRs: Node `spec.podCIDRs` in the MetalLB tests (`ipam: kubernetes`),
/// the CiliumNode's in the Cilium ones (`cluster-pool`).
const POD_N1: &str = "10.244.1.0/24";
const POD_N2: &str = "10.244.2.0/24";

/// The longest a step may take to converge; a gap must end well within it.
const STEP_DEADLINE: Duration = Duration::from_secs(60);
/// The longest gap a step may show for a prefix only one node announces. A bound for
/// the test, not the figure: the guides quote what each run printed.
const GAP_BOUND: Duration = Duration::from_secs(10);

/// The MetalLB ConfigMap's `config` as a MetalLB 0.12 user has it: no hold time (90 s),
/// no speaker extensions; with `local_pref`, the pool's one bgp-advertisement sets
/// `localpref`. Our speaker reads it unchanged.
fn metallb_config(local_pref: Option<u32>) -> String {
    let advertisement = local_pref.map_or(String::new(), |lp| {
        format!("  bgp-advertisements:\n  - localpref: {lp}\n")
    });
    format!(
        "peers:
- peer-address: {bird}
  peer-asn: {BIRD_AS}
  my-asn: {NODE_AS}
- peer-address: {frr}
  peer-asn: {NODE_AS}
  my-asn: {NODE_AS}
address-pools:
- name: default
  protocol: bgp
  addresses:
  - 198.51.100.0/24
{advertisement}",
        bird = v4(2),
        frr = v4(3),
    )
}

fn legacy_peers() -> [LegacyPeer; 2] {
    [
        LegacyPeer {
            address: v4(2),
            peer_asn: BIRD_AS,
            my_asn: NODE_AS,
        },
        LegacyPeer {
            address: v4(3),
            peer_asn: NODE_AS,
            my_asn: NODE_AS,
        },
    ]
}

/// Every path the two switches hold, as (switch, prefix, node); stale paths count (a
/// switch forwards on them).
type View = BTreeSet<(&'static str, IpNet, u8)>;

fn view(bird: &Bird, frr: &Frr, nodes: &[u8]) -> View {
    let mut v = View::new();
    for tor in [bird as &dyn BgpDaemon, frr] {
        for &n in nodes {
            // A switch that cannot answer once (busy) is asked again at the next poll;
            // a missing answer is not taken for a missing route.
            let Ok(routes) = tor.routes(node_ip(n), Afi::Ipv4) else {
                continue;
            };
            for r in routes {
                v.insert((tor.kind(), r.prefix, n));
            }
        }
    }
    v
}

/// The views polled through one step, from the step's action on.
struct Timeline {
    samples: Vec<(Duration, View)>,
    /// When the view became what the step expects, for good.
    settled: Option<Duration>,
}

/// One interval in which something was missing: `seen` from the first poll without it
/// to the first poll with it again, `at_most` from the last poll with it before (the
/// true gap lies between the two).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Gap {
    seen: Duration,
    at_most: Duration,
}

impl Timeline {
    /// Polls from `t0` until the view equals `want` and has stayed so for 2 s (so that
    /// a route that would flap has flapped), or [`STEP_DEADLINE`].
    fn watch(bird: &Bird, frr: &Frr, nodes: &[u8], t0: Instant, want: &View) -> Timeline {
        let mut samples = Vec::new();
        let mut settled = None;
        while t0.elapsed() < STEP_DEADLINE {
            let v = view(bird, frr, nodes);
            let at = t0.elapsed();
            if &v == want {
                let since = *settled.get_or_insert(at);
                samples.push((at, v));
                if at - since >= Duration::from_secs(2) {
                    break;
                }
            } else {
                settled = None;
                samples.push((at, v));
            }
        }
        Timeline { samples, settled }
    }

    fn last(&self) -> &View {
        &self.samples.last().expect("at least one sample").1
    }

    /// The largest interval between two polls: the gaps' resolution.
    fn resolution(&self) -> Duration {
        self.samples
            .windows(2)
            .map(|w| w[1].0 - w[0].0)
            .max()
            .unwrap_or_default()
    }

    /// The time `present` was false, summed over the step; a step that starts without
    /// it counts from the step's action.
    fn gap(&self, present: impl Fn(&View) -> bool) -> Gap {
        let mut total = Gap::default();
        let mut before = Duration::ZERO;
        let mut from: Option<(Duration, Duration)> = None;
        for (at, v) in &self.samples {
            match (present(v), from) {
                (false, None) => from = Some((before, *at)),
                (true, Some((last_with, first_without))) => {
                    total.seen += *at - first_without;
                    total.at_most += *at - last_with;
                    from = None;
                }
                _ => {}
            }
            before = *at;
        }
        if let (Some((last_with, first_without)), Some((end, _))) = (from, self.samples.last()) {
            total.seen += *end - first_without;
            total.at_most += *end - last_with;
        }
        total
    }

    fn prefix_gap(&self, tor: &'static str, prefix: IpNet) -> Gap {
        self.gap(|v| v.iter().any(|(t, p, _)| *t == tor && *p == prefix))
    }

    fn path_gap(&self, tor: &'static str, prefix: IpNet, node: u8) -> Gap {
        self.gap(|v| v.contains(&(tor, prefix, node)))
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

/// "none seen" or "0.10s to 0.21s": what the polls can tell of a gap.
fn describe(g: Gap) -> String {
    if g.at_most == Duration::ZERO {
        "none seen".into()
    } else {
        format!("{} to {}", secs(g.seen), secs(g.at_most))
    }
}

/// The expected view: `paths[prefix]` = the nodes each switch holds it from.
fn want(paths: &[(&str, &[u8])]) -> View {
    let mut v = View::new();
    for tor in ["bird", "frr"] {
        for (prefix, nodes) in paths {
            for n in *nodes {
                v.insert((tor, net(prefix), *n));
            }
        }
    }
    v
}

/// Prints one step's figures (`migration step: GUIDE STEP: ...`): for each prefix at
/// each switch, how long it was missing altogether and how long each node's path was.
fn report(guide: &str, step: &str, tl: &Timeline, prefixes: &[(&str, &[u8])]) {
    let mut line = format!(
        "migration step: {guide} {step}: settled at {}, polls at most {} apart",
        tl.settled.map_or("never".into(), secs),
        secs(tl.resolution())
    );
    for tor in ["bird", "frr"] {
        for (prefix, nodes) in prefixes {
            let p = net(prefix);
            line.push_str(&format!(
                "\n  {tor} {prefix}: prefix missing {}",
                describe(tl.prefix_gap(tor, p))
            ));
            for n in *nodes {
                line.push_str(&format!(
                    "; n{n}'s path missing {}",
                    describe(tl.path_gap(tor, p, *n))
                ));
            }
        }
    }
    println!("{line}");
}

/// `podcidr-speaker status` against a speaker's endpoint: what the guides show a user.
fn status(node: u8) -> String {
    run_ok(
        Command::new(BINARY).args(["status", "--addr", &format!("{}:9477", node_ip(node))]),
        COMMAND_TIMEOUT,
    )
    .unwrap_or_else(|e| panic!("podcidr-speaker status of n{node}: {e}"))
}

/// What the guides tell a user to check on a moved node's `/metrics`: both sessions up,
/// `routes` prefixes written to each switch, `services` LoadBalancer Services announced.
fn assert_metrics(node: u8, routes: f64, services: f64) {
    crate::scrape::wait_metrics(
        std::net::SocketAddr::new(node_ip(node), 9477),
        "the moved node's sessions and routes",
        |m| {
            [v4(2), v4(3)].iter().all(|p| {
                let peer = format!("{p}:179");
                value(m, "podcidr_speaker_session_up", &[("peer", &peer)]) == Some(1.0)
                    && value(
                        m,
                        "podcidr_speaker_announced_prefixes",
                        &[("peer", &peer), ("afi", "ipv4")],
                    ) == Some(routes)
            }) && value(m, "podcidr_speaker_lb_services_announced", &[]) == Some(services)
        },
    );
}

/// `podcidr-speaker status` whatever its exit status (1 while a session is down).
fn status_any(node: u8) -> String {
    let out = Command::new(BINARY)
        .args(["status", "--addr", &format!("{}:9477", node_ip(node))])
        .output()
        .unwrap_or_else(|e| panic!("podcidr-speaker status of n{node}: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `podcidr-speaker doctor` on the lab's cluster state and bgp-config: exit code and
/// output.
fn doctor(inputs: &Inputs) -> (i32, String) {
    let out = Command::new(BINARY)
        .arg("doctor")
        .arg("--cluster-state")
        .arg(inputs.cluster_path())
        .arg("--bgp-config")
        .arg(inputs.config_path())
        .output()
        .expect("podcidr-speaker doctor");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn metallb_services(inputs: &Inputs) {
    let web = ServiceSpec::new("web", "Cluster", &["198.51.100.10"]).endpoints(&["n1", "n2"], true);
    let db = ServiceSpec::new("db", "Local", &["198.51.100.20"]).endpoints(&["n1"], true);
    for svc in [web, db] {
        inputs.write_cluster_file(&svc.file(), &svc.yaml());
    }
}

/// What MetalLB 0.12's speaker on node `n` announced: every Service with a ready
/// endpoint under `Cluster`, the `Local` one only where its endpoint is.
fn metallb_routes(n: u8, local_pref: Option<u32>) -> Vec<Advertisement> {
    let adv = |p: &str| {
        let a = Advertisement::new(net(p));
        match local_pref {
            Some(lp) => a.local_pref(lp),
            None => a,
        }
    };
    let mut v = vec![adv(CLUSTER_IP)];
    if n == 1 {
        v.push(adv(LOCAL_IP));
    }
    v
}

/// The MetalLB guide's starting point: both switches, n1 and n2 in the cluster state
/// with the two Services, MetalLB's speakers on both nodes and every LoadBalancer path
/// at both switches.
struct MetallbLab {
    ns: crate::harness::netns::Netns,
    bird: Bird,
    frr: Frr,
    inputs: Inputs,
    local_pref: Option<u32>,
    old: [Option<Legacy>; 2],
}

/// The LoadBalancer paths: the Cluster Service from both nodes, the Local one from n1.
const METALLB_PATHS: [(&str, &[u8]); 2] = [(CLUSTER_IP, &[1, 2]), (LOCAL_IP, &[1])];

impl MetallbLab {
    fn start(ns: crate::harness::netns::Netns, local_pref: Option<u32>) -> MetallbLab {
        let (bird, frr) = start_tors(ns.dir(), &[node_ip(1), node_ip(2)]);
        frr_maximum_paths(&frr);
        let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
        inputs.write_config(&metallb_config(local_pref));
        for n in [1, 2] {
            inputs.write_node(
                &NodeSpec::new(&format!("n{n}"), node_ip(n))
                    .node_cidrs(&[&format!("10.244.{n}.0/24")]),
            );
        }
        metallb_services(&inputs);
        let old = [1, 2].map(|n| {
            Some(Legacy::start(
                ns.dir(),
                &format!("n{n}"),
                node_ip(n),
                &legacy_peers(),
                &metallb_routes(n, local_pref),
            ))
        });
        let lab = MetallbLab {
            ns,
            bird,
            frr,
            inputs,
            local_pref,
            old,
        };
        let tl = lab.watch(Instant::now(), &METALLB_PATHS);
        assert_eq!(
            tl.last(),
            &want(&METALLB_PATHS),
            "before: the old speakers' routes"
        );
        lab
    }

    fn watch(&self, t0: Instant, paths: &[(&str, &[u8])]) -> Timeline {
        Timeline::watch(&self.bird, &self.frr, &[1, 2], t0, &want(paths))
    }

    /// The node labelled: MetalLB's pod leaves node `n` (its process exits), ours starts.
    fn move_node(&mut self, n: u8) -> (Instant, Speaker) {
        let t0 = Instant::now();
        if let Some(mut old) = self.old[usize::from(n - 1)].take() {
            old.stop();
        }
        (t0, our_speaker(&self.ns, &self.inputs, n, "ours"))
    }

    /// The label removed again: our pod leaves node `n` (SIGTERM), MetalLB's is back.
    fn roll_back(&mut self, n: u8, ours: &mut Speaker) -> Instant {
        let t0 = Instant::now();
        ours.send_sigterm();
        self.old[usize::from(n - 1)] = Some(Legacy::start(
            self.ns.dir(),
            &format!("n{n}-back"),
            node_ip(n),
            &legacy_peers(),
            &metallb_routes(n, self.local_pref),
        ));
        t0
    }
}

fn our_speaker(ns: &crate::harness::netns::Netns, inputs: &Inputs, n: u8, tag: &str) -> Speaker {
    // The chart's defaults: both route classes announced (the bgp-config's `speaker`
    // block decides, and it has none), whatever cilium-config's BGP keys say.
    let args = Speaker::standalone_args(inputs, &format!("n{n}"), node_ip(n));
    Speaker::start(ns.dir(), &format!("n{n}-{tag}"), &args)
}

/// docs/migrate-from-metallb.md, each step as the guide has it: MetalLB 0.12's speaker
/// on n1 and n2, the LoadBalancer IPs of a `Cluster` and a `Local` Service; n1 moved,
/// then n2, then n2 rolled back. A `Cluster` Service never leaves either switch; the
/// moved node's path is missing for the time the guide quotes; the `Local` Service's
/// only path is missing for as long, and within [`GAP_BOUND`].
#[test]
fn metallb_speaker_replaced_node_by_node() {
    let (n1, n2) = (node_ip(1), node_ip(2));
    let Some(ns) = isolated!(&[v4(2), v4(3), n1, n2], Duration::from_secs(300)) else {
        return;
    };
    let guide = "metallb";
    let mut lab = MetallbLab::start(ns, None);
    let all = METALLB_PATHS;
    // MetalLB sends LOCAL_PREF 0 over iBGP: FRR spreads the Cluster IP over both.
    assert_eq!(
        frr_multipath(&lab.frr, CLUSTER_IP),
        BTreeSet::from([n1, n2]),
        "before: FRR's ECMP set"
    );

    // Step: n1 labelled. MetalLB's pod leaves n1, ours starts there. Ours adds the
    // node's pod CIDR, which MetalLB never announced (the guide says so).
    let (t0, ours1) = lab.move_node(1);
    let n1_moved: [(&str, &[u8]); 3] = [(CLUSTER_IP, &[1, 2]), (LOCAL_IP, &[1]), (POD_N1, &[1])];
    let tl = lab.watch(t0, &n1_moved);
    report(guide, "n1 moved", &tl, &all);
    assert_eq!(
        tl.last(),
        &want(&n1_moved),
        "n1 moved\n{}",
        ours1.log_tail(30)
    );
    for tor in ["bird", "frr"] {
        assert_eq!(
            tl.prefix_gap(tor, net(CLUSTER_IP)),
            Gap::default(),
            "{tor}: the Cluster Service stays reachable through n2"
        );
        // Missing from the old speaker's exit until ours has sent it: here well under
        // a second, often between two polls.
        let local = tl.prefix_gap(tor, net(LOCAL_IP)).at_most;
        assert!(
            local < GAP_BOUND,
            "{tor}: the Local Service's only path: missing {local:?}"
        );
    }
    // Our LOCAL_PREF 100 (no `localpref` in the pool) beats MetalLB's 0: while the
    // nodes are mixed, FRR sends the Cluster Service's traffic to the moved node only.
    let mixed = frr_multipath(&lab.frr, CLUSTER_IP);
    println!("migration step: {guide} n1 moved: FRR forwards {CLUSTER_IP} via {mixed:?}");
    assert_eq!(mixed, BTreeSet::from([n1]), "FRR's selection while mixed");
    let shown = status(1);
    println!("migration step: {guide} n1 moved: podcidr-speaker status\n{shown}");
    assert!(shown.contains("Established"), "{shown}");
    // Two LoadBalancer IPs and the pod CIDR to each switch, from two Services.
    assert_metrics(1, 3.0, 2.0);

    // Step: n2 labelled.
    let (t0, mut ours2) = lab.move_node(2);
    let both_moved: [(&str, &[u8]); 4] = [
        (CLUSTER_IP, &[1, 2]),
        (LOCAL_IP, &[1]),
        (POD_N1, &[1]),
        (POD_N2, &[2]),
    ];
    let tl = lab.watch(t0, &both_moved);
    report(guide, "n2 moved", &tl, &all);
    assert_eq!(
        tl.last(),
        &want(&both_moved),
        "n2 moved\n{}",
        ours2.log_tail(30)
    );
    for tor in ["bird", "frr"] {
        assert_eq!(
            tl.prefix_gap(tor, net(CLUSTER_IP)),
            Gap::default(),
            "{tor}: the Cluster Service stays reachable through n1"
        );
        assert_eq!(
            tl.prefix_gap(tor, net(LOCAL_IP)),
            Gap::default(),
            "{tor}: the Local Service is n1's only"
        );
    }
    assert_eq!(
        frr_multipath(&lab.frr, CLUSTER_IP),
        BTreeSet::from([n1, n2]),
        "after: FRR's ECMP set"
    );

    // Rollback of n2: its label removed, our pod leaves (SIGTERM, graceful restart:
    // the switches keep n2's paths as stale), MetalLB's comes back and replaces them;
    // without graceful restart in its OPEN, the switches drop n2's stale pod CIDR.
    let t0 = lab.roll_back(2, &mut ours2);
    let tl = lab.watch(t0, &n1_moved);
    report(guide, "n2 rolled back", &tl, &all);
    assert!(ours2.terminate().success(), "{}", ours2.log_tail(30));
    assert_eq!(tl.last(), &want(&n1_moved), "rollback");
    for tor in ["bird", "frr"] {
        assert_eq!(
            tl.prefix_gap(tor, net(CLUSTER_IP)),
            Gap::default(),
            "{tor}: rollback"
        );
        let n2_path = tl.path_gap(tor, net(CLUSTER_IP), 2).at_most;
        assert!(n2_path < GAP_BOUND, "{tor}: n2's path missing {n2_path:?}");
    }
    drop(ours1);
}

/// The guide's remedy for the mixed state: with `localpref: 100` on the pool's
/// bgp-advertisement (which MetalLB 0.12 sends too), FRR keeps spreading the `Cluster`
/// Service over both nodes while n1 runs ours and n2 still runs MetalLB's.
#[test]
fn metallb_with_localpref_keeps_ecmp_while_nodes_are_mixed() {
    let (n1, n2) = (node_ip(1), node_ip(2));
    let Some(ns) = isolated!(&[v4(2), v4(3), n1, n2], Duration::from_secs(180)) else {
        return;
    };
    let mut lab = MetallbLab::start(ns, Some(100));
    let (t0, ours1) = lab.move_node(1);
    let n1_moved: [(&str, &[u8]); 3] = [(CLUSTER_IP, &[1, 2]), (LOCAL_IP, &[1]), (POD_N1, &[1])];
    let tl = lab.watch(t0, &n1_moved);
    assert_eq!(
        tl.last(),
        &want(&n1_moved),
        "n1 moved\n{}",
        ours1.log_tail(30)
    );
    let mixed = frr_multipath(&lab.frr, CLUSTER_IP);
    println!(
        "migration step: metallb localpref 100, n1 moved: FRR forwards {CLUSTER_IP} via {mixed:?}"
    );
    assert_eq!(
        mixed,
        BTreeSet::from([n1, n2]),
        "FRR's ECMP set while mixed"
    );
}

/// cilium-config as Cilium 1.10-1.16 has it with its embedded speaker on or off (the two
/// keys `"true"` or `"false"`, as Cilium's Helm chart writes them), cluster-pool IPAM.
fn cilium_config(embedded_bgp: bool) -> String {
    let keys = format!(
        "  bgp-announce-pod-cidr: \"{embedded_bgp}\"\n  bgp-announce-lb-ip: \"{embedded_bgp}\"\n"
    );
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cilium-config\n  namespace: kube-system\ndata:\n  ipam: cluster-pool\n  cluster-pool-ipv4-cidr: 10.244.0.0/16\n{keys}"
    )
}

/// What Cilium's embedded speaker on node `n` announced: its pod CIDR (CiliumNode
/// `spec.ipam.podCIDRs`) and, from the same MetalLB code, the LoadBalancer IPs.
fn cilium_routes(n: u8) -> Vec<Advertisement> {
    let mut v = metallb_routes(n, None);
    v.push(Advertisement::new(net(&format!("10.244.{n}.0/24"))));
    v
}

/// docs/migrate-from-cilium-bgp.md: Cilium's embedded speaker on n1 and n2 announcing
/// each node's pod CIDR and the LoadBalancer IPs; cilium-config's two keys set to
/// "false" (Cilium's speakers run on until their agent restarts; ours announce both
/// classes all the same); then, node by node, the agent
/// restarted (its speaker gone) and ours started. A node's pod CIDR, which only that
/// node announces, is missing for the time the guide quotes, within [`GAP_BOUND`]; a
/// `Cluster` Service never leaves a switch. Rolling n2 back is Cilium's speaker back on
/// n2 replacing ours.
#[test]
fn cilium_embedded_speaker_replaced_node_by_node() {
    let (n1, n2) = (node_ip(1), node_ip(2));
    let Some(ns) = isolated!(&[v4(2), v4(3), n1, n2], Duration::from_secs(300)) else {
        return;
    };
    let guide = "cilium";
    let (bird, frr) = start_tors(ns.dir(), &[n1, n2]);
    frr_maximum_paths(&frr);
    let inputs = Inputs::new(ns.dir(), "cluster-pool", "10.244.0.0/16");
    inputs.write_cluster_file("cilium-config.yaml", &cilium_config(true));
    // Cilium's convention (kube-system/bgp-config, key config.yaml): the same MetalLB
    // format, read unchanged.
    inputs.write_config(&metallb_config(None));
    for n in [1, 2] {
        let pod = format!("10.244.{n}.0/24");
        inputs.write_node(&NodeSpec::new(&format!("n{n}"), node_ip(n)).cilium_cidrs(&[&pod]));
    }
    metallb_services(&inputs);
    let watch = |t0: Instant, paths: &[(&str, &[u8])]| {
        Timeline::watch(&bird, &frr, &[1, 2], t0, &want(paths))
    };
    let all: [(&str, &[u8]); 4] = [
        (CLUSTER_IP, &[1, 2]),
        (LOCAL_IP, &[1]),
        (POD_N1, &[1]),
        (POD_N2, &[2]),
    ];

    // Before: Cilium's embedded speakers on both nodes.
    let mut old = [1, 2].map(|n| {
        Some(Legacy::start(
            ns.dir(),
            &format!("n{n}"),
            node_ip(n),
            &legacy_peers(),
            &cilium_routes(n),
        ))
    });
    let tl = watch(Instant::now(), &all);
    assert_eq!(tl.last(), &want(&all), "before: Cilium's routes");

    // Step: the keys set to "false" in cilium-config. Cilium's agents read it at their start
    // only, so their speakers run on (the stand-ins read no file: nothing to measure
    // here); our speakers, started from now on, find Cilium's BGP off.
    let (code, shown) = doctor(&inputs);
    assert_eq!(code, 1, "doctor flags Cilium's embedded BGP: {shown}");
    inputs.write_cluster_file("cilium-config.yaml", &cilium_config(false));
    let (code, shown) = doctor(&inputs);
    assert_eq!(code, 0, "step 3 done, doctor finds nothing wrong: {shown}");

    // Step: n1's agent restarted and n1 labelled: Cilium's speaker exits with the old
    // agent, ours starts.
    let t0 = Instant::now();
    if let Some(mut o) = old[0].take() {
        o.stop();
    }
    let ours1 = our_speaker(&ns, &inputs, 1, "ours");
    let tl = watch(t0, &all);
    report(guide, "n1 moved", &tl, &all);
    assert_eq!(tl.last(), &want(&all), "n1 moved\n{}", ours1.log_tail(30));
    for tor in ["bird", "frr"] {
        assert_eq!(
            tl.prefix_gap(tor, net(CLUSTER_IP)),
            Gap::default(),
            "{tor}: the Cluster Service stays reachable through n2"
        );
        for prefix in [POD_N1, LOCAL_IP] {
            let gap = tl.prefix_gap(tor, net(prefix)).at_most;
            assert!(gap < GAP_BOUND, "{tor}: {prefix} missing {gap:?}");
        }
        assert_eq!(
            tl.prefix_gap(tor, net(POD_N2)),
            Gap::default(),
            "{tor}: n2's pod CIDR is not touched"
        );
    }
    let shown = status(1);
    println!("migration step: {guide} n1 moved: podcidr-speaker status\n{shown}");
    assert!(shown.contains("Established"), "{shown}");
    assert_metrics(1, 3.0, 2.0);

    // Step: n2.
    let t0 = Instant::now();
    if let Some(mut o) = old[1].take() {
        o.stop();
    }
    let mut ours2 = our_speaker(&ns, &inputs, 2, "ours");
    let tl = watch(t0, &all);
    report(guide, "n2 moved", &tl, &all);
    assert_eq!(tl.last(), &want(&all), "n2 moved\n{}", ours2.log_tail(30));
    for tor in ["bird", "frr"] {
        assert_eq!(tl.prefix_gap(tor, net(CLUSTER_IP)), Gap::default(), "{tor}");
        assert_eq!(tl.prefix_gap(tor, net(POD_N1)), Gap::default(), "{tor}");
        let gap = tl.prefix_gap(tor, net(POD_N2)).at_most;
        assert!(gap < GAP_BOUND, "{tor}: n2's pod CIDR missing {gap:?}");
    }

    // Rollback of n2: our pod leaves (SIGTERM, graceful restart: n2's paths stay as
    // stale), Cilium's speaker is back with the agent restarted under the keys.
    let t0 = Instant::now();
    ours2.send_sigterm();
    old[1] = Some(Legacy::start(
        ns.dir(),
        "n2-back",
        n2,
        &legacy_peers(),
        &cilium_routes(2),
    ));
    let tl = watch(t0, &all);
    report(guide, "n2 rolled back", &tl, &all);
    assert!(ours2.terminate().success(), "{}", ours2.log_tail(30));
    assert_eq!(tl.last(), &want(&all), "rollback");
    for tor in ["bird", "frr"] {
        let gap = tl.prefix_gap(tor, net(POD_N2)).at_most;
        assert!(gap < GAP_BOUND, "{tor}: n2's pod CIDR missing {gap:?}");
    }
    drop(ours1);
}

/// What the guides warn about: our speaker started on a node while the old one there
/// still runs (its pod not yet gone, or its agent not yet restarted). Its sessions are
/// refused while the old one's stay Established and keep every route. FRR answers each
/// attempt with Cease 6/7, which ours retries within 3 s however long it has been
/// refused; BIRD closes the connection without a NOTIFICATION, an ordinary failure
/// that backs off 1, 2, 4 ... s up to `connect-retry-time` (120 s by default). Ours
/// waits beside the old speaker for [`BESIDE`], then the old speaker exits: FRR has the
/// node's routes back within seconds, BIRD at ours's next backed-off retry.
#[test]
fn ours_started_before_the_old_speaker_exits_gets_in_at_its_next_retry() {
    /// Long enough for the backoff to have grown past 8 s.
    const BESIDE: Duration = Duration::from_secs(25);
    /// FRR's gap: a retry within 3 s after the old speaker's exit, plus the stop, the
    /// handshake and the polls, on a loaded machine.
    const REFUSED_GAP_BOUND: Duration = Duration::from_secs(8);
    let (n1, n2) = (node_ip(1), node_ip(2));
    let Some(ns) = isolated!(&[v4(2), v4(3), n1, n2], Duration::from_secs(180)) else {
        return;
    };
    let guide = "metallb";
    let mut lab = MetallbLab::start(ns, None);
    let t0 = Instant::now();
    let ours1 = our_speaker(&lab.ns, &lab.inputs, 1, "early");
    // Both speakers on n1: the switches keep the old one's session and routes all along.
    let frr_peer = format!("{}:179", v4(3));
    let mut frr_waits: Vec<u64> = Vec::new();
    let mut refused = String::new();
    while t0.elapsed() < BESIDE {
        let v = view(&lab.bird, &lab.frr, &[1, 2]);
        assert_eq!(
            v,
            want(&METALLB_PATHS),
            "the old speaker's routes while ours is refused\n{}",
            ours1.log_tail(30)
        );
        refused = status_any(1);
        frr_waits.extend(
            refused
                .lines()
                .filter(|l| l.split_whitespace().next() == Some(frr_peer.as_str()))
                .filter_map(|l| {
                    l.split_once("retry in ")?
                        .1
                        .split('s')
                        .next()?
                        .parse::<u64>()
                        .ok()
                }),
        );
    }
    println!(
        "migration step: {guide} ours refused on n1 for {}: podcidr-speaker status\n{refused}\n\
         waits before the next attempt at FRR seen: {frr_waits:?}",
        secs(t0.elapsed())
    );
    assert!(
        refused.contains("6/7"),
        "FRR's collision Cease is shown: {refused}"
    );
    // Whole seconds rounded down: at most REFUSED_RETRY, 3 s, however long refused.
    assert!(
        !frr_waits.is_empty() && frr_waits.iter().all(|w| *w <= 3),
        "FRR's refusals retried within 3 s: {frr_waits:?}"
    );
    let t0 = Instant::now();
    if let Some(mut old) = lab.old[0].take() {
        old.stop();
    }
    let n1_moved: [(&str, &[u8]); 3] = [(CLUSTER_IP, &[1, 2]), (LOCAL_IP, &[1]), (POD_N1, &[1])];
    let tl = lab.watch(t0, &n1_moved);
    report(
        guide,
        &format!(
            "n1's old speaker gone after ours was refused for {}",
            secs(BESIDE)
        ),
        &tl,
        &METALLB_PATHS,
    );
    assert_eq!(tl.last(), &want(&n1_moved), "{}", ours1.log_tail(30));
    let gap = tl.prefix_gap("frr", net(LOCAL_IP));
    assert!(
        gap.at_most < REFUSED_GAP_BOUND,
        "frr: {LOCAL_IP} missing {gap:?}"
    );
    // BIRD's refusals are silent closes: the backoff's wait, within the step's deadline.
    let gap = tl.prefix_gap("bird", net(LOCAL_IP));
    assert!(
        gap.at_most < STEP_DEADLINE,
        "bird: {LOCAL_IP} missing {gap:?}"
    );
}

/// The safety net of docs/migrate-from-cilium-bgp.md: our speaker running on a node
/// while cilium-config still turns Cilium's embedded speaker on (installed everywhere
/// before step 3, or a label set too early). Under the default `--cilium-bgp-conflict
/// hold` it opens no session: the switches keep Cilium's session and routes, untouched.
/// With the keys `"false"` it dials at once and is refused while Cilium's speaker still
/// runs (the agent not yet restarted), Cilium's routes still untouched; the agent
/// restarted, ours gets in at its next attempt.
#[test]
fn cilium_keys_on_hold_ours_back_until_they_are_off_and_the_agent_restarts() {
    const HELD: Duration = Duration::from_secs(5);
    let (n1, n2) = (node_ip(1), node_ip(2));
    let Some(ns) = isolated!(&[v4(2), v4(3), n1, n2], Duration::from_secs(180)) else {
        return;
    };
    let guide = "cilium";
    let (bird, frr) = start_tors(ns.dir(), &[n1, n2]);
    frr_maximum_paths(&frr);
    let inputs = Inputs::new(ns.dir(), "cluster-pool", "10.244.0.0/16");
    inputs.write_cluster_file("cilium-config.yaml", &cilium_config(true));
    inputs.write_config(&metallb_config(None));
    for n in [1, 2] {
        let pod = format!("10.244.{n}.0/24");
        inputs.write_node(&NodeSpec::new(&format!("n{n}"), node_ip(n)).cilium_cidrs(&[&pod]));
    }
    metallb_services(&inputs);
    let all: [(&str, &[u8]); 4] = [
        (CLUSTER_IP, &[1, 2]),
        (LOCAL_IP, &[1]),
        (POD_N1, &[1]),
        (POD_N2, &[2]),
    ];
    let mut old = [1, 2].map(|n| {
        Some(Legacy::start(
            ns.dir(),
            &format!("n{n}"),
            node_ip(n),
            &legacy_peers(),
            &cilium_routes(n),
        ))
    });
    let tl = Timeline::watch(&bird, &frr, &[1, 2], Instant::now(), &want(&all));
    assert_eq!(tl.last(), &want(&all), "before: Cilium's routes");
    let bird_seen = bird_route_times(&bird, n1);
    let frr_seen = frr_route_times(&frr, n1);

    // Ours on n1 with the keys "true": held, nothing reaches the switches.
    let ours1 = our_speaker(&ns, &inputs, 1, "early");
    let t0 = Instant::now();
    while t0.elapsed() < HELD {
        assert_eq!(view(&bird, &frr, &[1, 2]), want(&all), "while held");
    }
    assert!(
        ours1
            .log_tail(200)
            .contains("cilium's embedded bgp speaker is on: no new session"),
        "{}",
        ours1.log_tail(30)
    );
    let held = status_any(1);
    println!("migration step: {guide} ours held on n1: podcidr-speaker status\n{held}");
    let (code, shown) = doctor(&inputs);
    println!("migration step: {guide} keys true: podcidr-speaker doctor (exit {code})\n{shown}");
    assert!(!held.contains("Established"), "{held}");
    assert!(!held.contains("6/7"), "held: no connection at all: {held}");
    assert!(
        held.contains("NOT READY") && held.contains("CILIUM BGP CONFLICT"),
        "status says why: {held}"
    );
    let m = crate::scrape::get(std::net::SocketAddr::new(n1, 9477), "/metrics").1;
    assert_eq!(
        value(&m, "podcidr_speaker_cilium_bgp_conflict", &[]),
        Some(1.0)
    );
    assert_eq!(value(&m, "podcidr_speaker_sessions_held", &[]), Some(2.0));
    assert_eq!(code, 1, "doctor flags the conflict: {shown}");
    assert!(shown.contains("bgp-announce-pod-cidr: true"), "{shown}");

    // The keys "false": ours dials at once and is refused while Cilium's speaker runs.
    inputs.write_cluster_file("cilium-config.yaml", &cilium_config(false));
    let t0 = Instant::now();
    let refused = loop {
        assert_eq!(view(&bird, &frr, &[1, 2]), want(&all), "while refused");
        let shown = status_any(1);
        if shown.contains("6/7") {
            break shown;
        }
        assert!(t0.elapsed() < STEP_DEADLINE, "never refused:\n{shown}");
    };
    println!(
        "migration step: {guide} keys false, ours refused on n1 after {}: podcidr-speaker status\n{refused}",
        secs(t0.elapsed())
    );
    let (code, shown) = doctor(&inputs);
    println!("migration step: {guide} keys false: podcidr-speaker doctor (exit {code})\n{shown}");
    assert_eq!(code, 0, "doctor: nothing wrong any more: {shown}");
    let m = crate::scrape::get(std::net::SocketAddr::new(n1, 9477), "/metrics").1;
    assert_eq!(
        value(&m, "podcidr_speaker_cilium_bgp_conflict", &[]),
        Some(0.0)
    );
    assert_eq!(value(&m, "podcidr_speaker_sessions_held", &[]), Some(0.0));
    // Cilium's session and routes were never touched: not even re-learned.
    assert_eq!(
        bird_route_times(&bird, n1),
        bird_seen,
        "BIRD re-learned n1's routes"
    );
    assert_eq!(
        frr_route_times(&frr, n1),
        frr_seen,
        "FRR re-learned n1's routes"
    );

    // n1's agent restarted: Cilium's speaker gone, ours in at its next attempt.
    let t0 = Instant::now();
    if let Some(mut o) = old[0].take() {
        o.stop();
    }
    let tl = Timeline::watch(&bird, &frr, &[1, 2], t0, &want(&all));
    report(
        guide,
        "n1's agent restarted after ours was held and refused",
        &tl,
        &all,
    );
    assert_eq!(tl.last(), &want(&all), "{}", ours1.log_tail(30));
    for tor in ["bird", "frr"] {
        let gap = tl.prefix_gap(tor, net(POD_N1)).at_most;
        assert!(gap < GAP_BOUND, "{tor}: n1's pod CIDR missing {gap:?}");
    }
}
