//! The BFD rig shared by the e2e BFD tests (proto-tests/e2e/bfd.rs) and the BFD wire
//! tests of the reliability suite: the node, wire and switch namespaces (see
//! proto-tests/e2e/bfd.rs), BIRD or FRR (zebra + bfdd + bgpd) as the switch, the
//! speaker binary with a BFD profile, and the cut with its timings. The including crate
//! provides `harness` and `e2e_speaker` (proto-tests/e2e/speaker.rs).

#![allow(dead_code)]

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use podcidr_speaker::commands::status::fetch;
use podcidr_speaker::metrics::board::PeerReport;

use crate::e2e_speaker::{net, Inputs, NodeSpec, Speaker, GRACEFUL_SHUTDOWN};
use crate::harness::bird;
use crate::harness::frr;
use crate::harness::process::{run_ok, write_file, Process, COMMAND_TIMEOUT};
use crate::harness::Afi;

pub const TOR_AS: u32 = 65000;
pub const NODE_AS: u32 = 65001;
pub const NODE_V4: &str = "100.64.9.1";
pub const TOR_V4: &str = "100.64.9.2";
pub const NODE_V6: &str = "fd00:9::1";
pub const TOR_V6: &str = "fd00:9::2";
/// Loopback addresses for the multihop sessions (routed over the veth).
pub const NODE_LO: &str = "100.64.8.1";
pub const TOR_LO: &str = "100.64.8.2";
pub const METRICS: &str = "127.0.0.1:9477";
/// The profile of every BFD session here, on both sides.
pub const INTERVAL_MS: u64 = 100;
pub const MULTIPLIER: u64 = 3;
/// RFC 5880 section 6.8.4 with equal timers on both sides.
pub const DETECTION: Duration = Duration::from_millis(INTERVAL_MS * MULTIPLIER);
/// The acceptance bound of the speaker's detection: the detection time plus 100 ms.
pub const SPEAKER_BOUND: Duration = Duration::from_millis(INTERVAL_MS * MULTIPLIER + 100);
/// The acceptance bound of the switch dropping the node's routes.
pub const TOR_BOUND: Duration = Duration::from_secs(1);
/// The hold time of the sessions without BFD.
pub const HOLD_SECS: u64 = 3;
pub const WAIT: Duration = Duration::from_secs(40);
pub const BENCH_CUTS: usize = 20;
/// The TTL BIRD 2.0.12's multihop BFD packets arrive with here (no router between).
pub const BIRD_MULTIHOP_TTL: u8 = 64;

pub const POD_V4: &str = "10.244.1.0/24";
pub const POD_V6: &str = "fd00:244:1::/64";

/// Which switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tor {
    Bird,
    Frr,
}

/// The node, wire and switch namespaces and the veths between them.
pub struct Rig {
    dir: PathBuf,
    wire: Process,
    tor: Process,
}

impl Rig {
    pub fn new(dir: &Path) -> Rig {
        let holder = |name: &str| {
            let mut cmd = Command::new("unshare");
            cmd.args(["-n", "sleep", "600"]);
            Process::spawn(name, cmd, &dir.join(format!("{name}.log"))).expect("holder")
        };
        let rig = Rig {
            dir: dir.to_path_buf(),
            wire: holder("wire"),
            tor: holder("tor"),
        };
        // The holder must be in its namespace before links move there.
        let deadline = Instant::now() + Duration::from_secs(5);
        for p in [&rig.wire, &rig.tor] {
            let ours = std::fs::read_link("/proc/self/ns/net").expect("own netns");
            loop {
                let theirs = std::fs::read_link(format!("/proc/{}/ns/net", p.pid()));
                if theirs.is_ok_and(|t| t != ours) {
                    break;
                }
                assert!(Instant::now() < deadline, "holder never entered its netns");
                thread::sleep(Duration::from_millis(10));
            }
        }
        let (w, t) = (rig.wire.pid().to_string(), rig.tor.pid().to_string());
        for args in [
            vec!["link", "add", "v0", "type", "veth", "peer", "name", "w0"],
            vec!["link", "add", "v1", "type", "veth", "peer", "name", "w1"],
            vec!["link", "set", "w0", "netns", &w],
            vec!["link", "set", "w1", "netns", &w],
            vec!["link", "set", "v1", "netns", &t],
            vec!["addr", "add", &format!("{NODE_V4}/24"), "dev", "v0"],
            vec![
                "-6",
                "addr",
                "add",
                &format!("{NODE_V6}/64"),
                "dev",
                "v0",
                "nodad",
            ],
            vec!["link", "set", "v0", "up"],
            vec!["route", "add", &format!("{TOR_LO}/32"), "via", TOR_V4],
        ] {
            ip(None, &args);
        }
        for args in [
            vec!["link", "set", "lo", "up"],
            vec!["link", "add", "br0", "type", "bridge", "forward_delay", "0"],
            vec!["link", "set", "w0", "master", "br0"],
            vec!["link", "set", "w1", "master", "br0"],
            vec!["link", "set", "br0", "up"],
            vec!["link", "set", "w0", "up"],
            vec!["link", "set", "w1", "up"],
        ] {
            ip(Some(&w), &args);
        }
        for args in [
            vec!["link", "set", "lo", "up"],
            vec!["addr", "add", &format!("{TOR_LO}/32"), "dev", "lo"],
            vec!["addr", "add", &format!("{TOR_V4}/24"), "dev", "v1"],
            vec![
                "-6",
                "addr",
                "add",
                &format!("{TOR_V6}/64"),
                "dev",
                "v1",
                "nodad",
            ],
            vec!["link", "set", "v1", "up"],
            vec!["route", "add", &format!("{NODE_LO}/32"), "via", NODE_V4],
        ] {
            ip(Some(&t), &args);
        }
        rig
    }

    /// The pid of the process holding the switch's namespace.
    pub fn tor_pid(&self) -> u32 {
        self.tor.pid()
    }

    /// A command run in the switch's namespace.
    pub fn in_tor(&self, program: &str) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &self.tor.pid().to_string(), "-n", program]);
        cmd
    }

    /// Packets between node and switch stop (both daemons' links stay up).
    pub fn cut(&self) {
        ip(
            Some(&self.wire.pid().to_string()),
            &["link", "set", "w0", "down"],
        );
    }

    pub fn restore(&self) {
        ip(
            Some(&self.wire.pid().to_string()),
            &["link", "set", "w0", "up"],
        );
    }
}

pub fn ip(netns_of: Option<&str>, args: &[&str]) {
    let mut cmd = match netns_of {
        Some(pid) => {
            let mut c = Command::new("nsenter");
            c.args(["-t", pid, "-n", "ip"]);
            c
        }
        None => Command::new("ip"),
    };
    cmd.args(args);
    run_ok(&mut cmd, COMMAND_TIMEOUT).unwrap_or_else(|e| panic!("ip {args:?}: {e}"));
}

/// A switch running in the rig, and how to read its RIB and BFD sessions.
pub struct Switch {
    kind: Tor,
    dir: PathBuf,
    processes: Vec<Process>,
}

impl Switch {
    /// BIRD or FRR with a BGP session to the node over IPv4 and IPv6 (single-hop) and,
    /// with `multihop`, one between the loopbacks; `bfd`: each session with BFD on.
    pub fn start(rig: &Rig, kind: Tor, bfd: bool) -> Switch {
        let dir = rig.dir.join(format!("{kind:?}").to_lowercase());
        std::fs::create_dir_all(&dir).expect("switch dir");
        let mut s = Switch {
            kind,
            dir,
            processes: Vec::new(),
        };
        match kind {
            Tor::Bird => s.start_bird(rig, bfd),
            Tor::Frr => s.start_frr(rig, bfd),
        }
        s
    }

    pub fn start_bird(&mut self, rig: &Rig, bfd: bool) {
        let bfd_on = if bfd { "bfd on;" } else { "" };
        let timers = "connect delay time 1; connect retry time 1; error wait time 1, 2;";
        let bfd_proto = if bfd {
            format!(
                "protocol bfd {{\n  interface \"v1\" {{ min rx interval {INTERVAL_MS} ms; min tx interval {INTERVAL_MS} ms; multiplier {MULTIPLIER}; }};\n  multihop {{ min rx interval {INTERVAL_MS} ms; min tx interval {INTERVAL_MS} ms; multiplier {MULTIPLIER}; }};\n}}\n"
            )
        } else {
            String::new()
        };
        let conf = format!(
            "router id {TOR_V4};
log stderr all;
protocol device {{ scan time 1; }}
protocol kernel {{ ipv4 {{ import all; export none; }}; learn; }}
{bfd_proto}
protocol bgp n4 {{
  local {TOR_V4} as {TOR_AS}; neighbor {NODE_V4} as {NODE_AS};
  hold time {HOLD_SECS}; {timers} {bfd_on}
  ipv4 {{ import all; export none; }};
}}
protocol bgp n6 {{
  local {TOR_V6} as {TOR_AS}; neighbor {NODE_V6} as {NODE_AS};
  hold time {HOLD_SECS}; {timers} {bfd_on}
  ipv6 {{ import all; export none; }};
}}
protocol bgp mh {{
  local {TOR_LO} as {TOR_AS}; neighbor {NODE_LO} as {NODE_AS}; multihop 2;
  hold time {HOLD_SECS}; {timers} {bfd_on}
  ipv4 {{ import all; export none; }};
}}
"
        );
        let conf_path = self.dir.join("bird.conf");
        write_file(&conf_path, &conf).expect("bird.conf");
        let mut cmd = rig.in_tor("bird");
        cmd.arg("-f")
            .arg("-c")
            .arg(&conf_path)
            .arg("-s")
            .arg(self.dir.join("bird.ctl"));
        let p = Process::spawn("bird", cmd, &self.dir.join("bird.log")).expect("bird");
        self.processes.push(p);
        let deadline = Instant::now() + Duration::from_secs(20);
        while bird::control(&self.dir.join("bird.ctl"), "show status").is_err() {
            assert!(Instant::now() < deadline, "bird never answered");
            thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn start_frr(&mut self, rig: &Rig, bfd: bool) {
        // root in frrvty, for zebra's and bfdd's privilege check only.
        let group = std::fs::read_to_string("/etc/group").expect("/etc/group");
        let group: String = group
            .lines()
            .map(|l| {
                if l.starts_with("frrvty:") {
                    if l.ends_with(':') {
                        format!("{l}root\n")
                    } else {
                        format!("{l},root\n")
                    }
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let group_path = self.dir.join("group");
        write_file(&group_path, &group).expect("group");
        write_file(&self.dir.join("zebra.conf"), "hostname tor\n").expect("zebra.conf");
        write_file(
            &self.dir.join("bfdd.conf"),
            &format!(
                "hostname tor\nbfd\n profile fast\n  receive-interval {INTERVAL_MS}\n  transmit-interval {INTERVAL_MS}\n  detect-multiplier {MULTIPLIER}\n !\n!\n"
            ),
        )
        .expect("bfdd.conf");
        let bfd_line = |n: &str| {
            if bfd {
                format!(" neighbor {n} bfd profile fast\n")
            } else {
                String::new()
            }
        };
        let bgpd = format!(
            "hostname tor
log stdout informational
router bgp {TOR_AS}
 bgp router-id {TOR_V4}
 no bgp ebgp-requires-policy
 no bgp network import-check
 timers bgp 1 {HOLD_SECS}
 neighbor {NODE_V4} remote-as {NODE_AS}
 neighbor {NODE_V4} timers connect 1
{b4} neighbor {NODE_V6} remote-as {NODE_AS}
 neighbor {NODE_V6} timers connect 1
{b6} address-family ipv6 unicast
  neighbor {NODE_V6} activate
 exit-address-family
 address-family ipv4 unicast
  no neighbor {NODE_V6} activate
 exit-address-family
",
            b4 = bfd_line(NODE_V4),
            b6 = bfd_line(NODE_V6),
        );
        write_file(&self.dir.join("bgpd.conf"), &bgpd).expect("bgpd.conf");
        let d = self.dir.clone();
        let zapi = d.join("zserv.api");
        let wrapped = |program: &str| {
            let mut cmd = rig.in_tor("unshare");
            cmd.args([
                "-m",
                "sh",
                "-c",
                "mount --bind \"$0\" /etc/group && exec \"$@\"",
            ])
            .arg(&group_path)
            .arg(program);
            cmd
        };
        let mut zebra = wrapped("/usr/lib/frr/zebra");
        zebra
            .arg("-f")
            .arg(d.join("zebra.conf"))
            .args(["-u", "root", "-g", "root", "-P", "0", "-i"])
            .arg(d.join("zebra.pid"))
            .arg("--vty_socket")
            .arg(&d)
            .arg("-z")
            .arg(&zapi);
        self.processes
            .push(Process::spawn("zebra", zebra, &d.join("zebra.log")).expect("zebra"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while !zapi.exists() {
            assert!(Instant::now() < deadline, "zebra never opened its socket");
            thread::sleep(Duration::from_millis(50));
        }
        let mut bfdd = wrapped("/usr/lib/frr/bfdd");
        bfdd.arg("-f")
            .arg(d.join("bfdd.conf"))
            .args(["-u", "root", "-g", "root", "-P", "0", "-i"])
            .arg(d.join("bfdd.pid"))
            .arg("--bfdctl")
            .arg(d.join("bfdd.sock"))
            .arg("--vty_socket")
            .arg(&d)
            .arg("-z")
            .arg(&zapi);
        self.processes
            .push(Process::spawn("bfdd", bfdd, &d.join("bfdd.log")).expect("bfdd"));
        let mut bgpd = rig.in_tor(frr::BGPD);
        bgpd.arg("-f")
            .arg(d.join("bgpd.conf"))
            .args(["-S", "-P", "0", "-l", TOR_V4, "-l", TOR_V6, "-i"])
            .arg(d.join("bgpd.pid"))
            .arg("--vty_socket")
            .arg(&d)
            .arg("-z")
            .arg(&zapi);
        self.processes
            .push(Process::spawn("bgpd", bgpd, &d.join("bgpd.log")).expect("bgpd"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.vtysh("bgpd", "show bgp summary json").is_err()
            || self.vtysh("bfdd", "show bfd peers json").is_err()
        {
            assert!(Instant::now() < deadline, "frr never answered");
            thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn vtysh(&self, daemon: &str, command: &str) -> Result<String, String> {
        let mut cmd = Command::new("vtysh");
        cmd.arg("--vty_socket")
            .arg(&self.dir)
            .args(["-d", daemon, "-c", command]);
        run_ok(&mut cmd, COMMAND_TIMEOUT).map_err(|e| e.to_string())
    }

    /// Whether the switch holds `prefix` from `neighbor`.
    pub fn holds(&self, neighbor: &str, afi: Afi, prefix: &str) -> bool {
        let want = net(prefix);
        let routes = match self.kind {
            Tor::Bird => {
                let proto = match neighbor {
                    NODE_V4 => "n4",
                    NODE_V6 => "n6",
                    _ => "mh",
                };
                bird::control(
                    &self.dir.join("bird.ctl"),
                    &format!("show route all protocol {proto}"),
                )
                .ok()
                .and_then(|t| bird::parse_routes(&t).ok())
            }
            Tor::Frr => self
                .vtysh("bgpd", &format!("show bgp {afi} unicast json detail"))
                .ok()
                .and_then(|t| frr::parse_routes(&t, neighbor.parse().ok()?).ok()),
        };
        routes.is_some_and(|r| r.iter().any(|r| r.prefix == want))
    }

    /// The switch's BFD session with `neighbor` is up.
    pub fn bfd_up(&self, neighbor: &str) -> bool {
        match self.kind {
            Tor::Bird => {
                bird::control(&self.dir.join("bird.ctl"), "show bfd sessions").is_ok_and(|t| {
                    t.lines().any(|l| {
                        l.split_whitespace().next() == Some(neighbor) && l.contains(" Up ")
                    })
                })
            }
            Tor::Frr => self.vtysh("bfdd", "show bfd peers json").is_ok_and(|t| {
                serde_json::from_str::<serde_json::Value>(&t).is_ok_and(|v| {
                    v.as_array().is_some_and(|a| {
                        a.iter().any(|p| {
                            p["peer"].as_str() == Some(neighbor)
                                && p["status"].as_str() == Some("up")
                        })
                    })
                })
            }),
        }
    }

    pub fn logs(&self) -> String {
        let sessions = match self.kind {
            Tor::Bird => bird::control(&self.dir.join("bird.ctl"), "show bfd sessions")
                .map_err(|e| e.to_string()),
            Tor::Frr => self.vtysh("bfdd", "show bfd peers brief"),
        };
        let sessions = sessions.unwrap_or_else(|e| e);
        let logs: String = self
            .processes
            .iter()
            .map(|p| format!("--- {}\n{}", p.name(), p.log_tail(30)))
            .collect();
        format!("--- bfd sessions of the switch\n{sessions}\n{logs}")
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        for p in &mut self.processes {
            let pid = p.pid();
            let _ = p.stop();
            for d in ["bgpd", "zebra", "bfdd"] {
                let _ = std::fs::remove_dir_all(format!("/var/tmp/frr/{d}.{pid}"));
            }
        }
        // The wrapped daemons' own pids (unshare/sh exec'd into them, same pid).
    }
}

/// The speaker of node n1, its sessions to the switch's addresses.
pub fn start_speaker(dir: &Path, bfd: bool, multihop: bool) -> (Inputs, Speaker) {
    let inputs = Inputs::new(dir, "kubernetes", "10.244.0.0/16");
    inputs.write_node(&NodeSpec::new("n1", NODE_V4.parse().unwrap()).node_cidrs(&[POD_V4, POD_V6]));
    inputs.write_config(&speaker_config(bfd, multihop, INTERVAL_MS));
    let args = vec![
        "--node=n1".to_owned(),
        format!("--graceful-shutdown-time={GRACEFUL_SHUTDOWN}"),
        format!("--bgp-config={}", inputs.config_path().display()),
        format!("--cluster-state={}", inputs.cluster_path().display()),
        format!("--metrics-addr={METRICS}"),
    ];
    let speaker = Speaker::start(dir, "n1", &args);
    (inputs, speaker)
}

/// The node's bgp-config: sessions to the switch's IPv4 and IPv6 addresses (and with
/// `multihop`, its loopback), each with the BFD profile `fast` when `bfd`, whose
/// receive-interval is `rx_ms`.
pub fn speaker_config(bfd: bool, multihop: bool, rx_ms: u64) -> String {
    let profile = if bfd { "    bfd-profile: fast\n" } else { "" };
    let mut peers = format!(
        "  - peer-address: {TOR_V4}\n    peer-asn: {TOR_AS}\n    my-asn: {NODE_AS}\n    hold-time: {HOLD_SECS}s\n    source-address: {NODE_V4}\n{profile}  - peer-address: {TOR_V6}\n    peer-asn: {TOR_AS}\n    my-asn: {NODE_AS}\n    hold-time: {HOLD_SECS}s\n    source-address: {NODE_V6}\n{profile}"
    );
    if multihop {
        peers.push_str(&format!(
            "  - peer-address: {TOR_LO}\n    peer-asn: {TOR_AS}\n    my-asn: {NODE_AS}\n    hold-time: {HOLD_SECS}s\n    source-address: {NODE_LO}\n    ebgp-multihop: true\n{profile}"
        ));
    }
    // BIRD 2.0.12 sends multihop BFD with TTL 64, not 255: the default minimum-ttl
    // (254, FRR's) would drop every packet (and does: the drops are counted as `ttl`).
    format!(
        "bfd-profiles:\n  - name: fast\n    receive-interval: {rx_ms}\n    transmit-interval: {INTERVAL_MS}\n    detect-multiplier: {MULTIPLIER}\n    minimum-ttl: {BIRD_MULTIHOP_TTL}\npeers:\n{peers}speaker:\n  graceful-restart: false\n  connect-retry-time: 1s\n"
    )
}

/// BIRD's transmit interval towards `neighbor` (`show bfd sessions`), in seconds.
pub fn bird_bfd_interval(switch: &Switch, neighbor: &str) -> Option<f64> {
    let text = bird::control(&switch.dir().join("bird.ctl"), "show bfd sessions").ok()?;
    text.lines().find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols.first() == Some(&neighbor))
            .then(|| cols.get(4)?.parse().ok())
            .flatten()
    })
}

pub fn peer_report(addr: &str) -> Option<PeerReport> {
    let ip: IpAddr = addr.parse().ok()?;
    fetch(METRICS, Duration::from_secs(2))
        .ok()?
        .peers
        .into_iter()
        .find(|p| p.address == ip)
}

/// Until `ok`, within `within`; panics with `what` and the logs otherwise.
pub fn wait_for(within: Duration, what: &str, logs: &dyn Fn() -> String, ok: &dyn Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "{what} within {within:?}\n{}",
            logs()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// Everything up: the BGP sessions Established with the node's routes at the switch
/// and, with `bfd`, the BFD sessions Up on both sides.
pub fn wait_all_up(
    switch: &Switch,
    speaker: &Speaker,
    neighbors: &[(&str, &str, Afi, &str)],
    bfd: bool,
) {
    let logs = || format!("{}\n--- speaker\n{}", switch.logs(), speaker.log_tail(40));
    for (node_addr, tor_addr, afi, prefix) in neighbors {
        wait_for(WAIT, &format!("{tor_addr} established"), &logs, &|| {
            peer_report(tor_addr).is_some_and(|p| p.up)
        });
        wait_for(
            WAIT,
            &format!("{prefix} at the switch from {node_addr}"),
            &logs,
            &|| switch.holds(node_addr, *afi, prefix),
        );
        if bfd {
            wait_for(WAIT, &format!("our bfd with {tor_addr} up"), &logs, &|| {
                peer_report(tor_addr).is_some_and(|p| p.bfd.as_ref().is_some_and(|b| b.up))
            });
            wait_for(
                WAIT,
                &format!("the switch's bfd with {node_addr} up"),
                &logs,
                &|| switch.bfd_up(node_addr),
            );
        }
    }
}

/// One cut with BFD: how long until the speaker's BFD was Down and its BGP session
/// gone (Cease/BFD Down sent), and until the switch no longer held the node's route,
/// for each (node address, switch address, afi, prefix).
pub fn cut_with_bfd(
    rig: &Rig,
    switch: &Switch,
    neighbors: &[(&str, &str, Afi, &str)],
) -> Vec<(Duration, Duration)> {
    let cut_at = Instant::now();
    rig.cut();
    let deadline = cut_at + Duration::from_secs(5);
    // The speaker and the switch each polled by a thread of its own, so that a slow
    // query of one (vtysh is a process) never delays noticing the other.
    let (speaker_down, tor_lost) = thread::scope(|scope| {
        let ours = scope.spawn(|| {
            let mut down: Vec<Option<Duration>> = vec![None; neighbors.len()];
            while Instant::now() < deadline && down.iter().any(Option::is_none) {
                if let Ok(status) = fetch(METRICS, Duration::from_secs(1)) {
                    let at = cut_at.elapsed();
                    for (i, (_, tor_addr, ..)) in neighbors.iter().enumerate() {
                        let gone = status.peers.iter().any(|p| {
                            p.address.to_string() == *tor_addr
                                && !p.up
                                && p.bfd.as_ref().is_some_and(|b| !b.up)
                        });
                        if gone && down[i].is_none() {
                            down[i] = Some(at);
                        }
                    }
                }
                thread::sleep(Duration::from_millis(2));
            }
            down
        });
        let mut lost: Vec<Option<Duration>> = vec![None; neighbors.len()];
        while Instant::now() < deadline && lost.iter().any(Option::is_none) {
            for (i, (node_addr, _, afi, prefix)) in neighbors.iter().enumerate() {
                if lost[i].is_none() && !switch.holds(node_addr, *afi, prefix) {
                    lost[i] = Some(cut_at.elapsed());
                }
            }
            thread::sleep(Duration::from_millis(5));
        }
        (ours.join().expect("speaker poller"), lost)
    });
    rig.restore();
    neighbors
        .iter()
        .zip(speaker_down.iter().zip(&tor_lost))
        .map(|((_, tor_addr, ..), (s, t))| {
            let s =
                s.unwrap_or_else(|| panic!("the speaker never dropped {tor_addr} after the cut"));
            let t =
                t.unwrap_or_else(|| panic!("the switch kept the routes from {tor_addr}'s peer"));
            (s, t)
        })
        .collect()
}

pub fn single_hop() -> Vec<(&'static str, &'static str, Afi, &'static str)> {
    vec![
        (NODE_V4, TOR_V4, Afi::Ipv4, POD_V4),
        (NODE_V6, TOR_V6, Afi::Ipv6, POD_V6),
    ]
}
