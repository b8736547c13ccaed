//! What every scenario shares: the namespace's addresses, the generated cluster and its
//! table, the speaker as a child process, BIRD as a sender and as a receiver that is
//! timed, gobgpd loaded from a generated MRT file, and per-process RSS/CPU from /proc.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use crate::harness::bird::{self, Bird};
use crate::harness::gobgp::Gobgp;
use crate::harness::process::{run_ok, write_file, Process, TempDir};
use crate::harness::{netns, BgpDaemon, Neighbor, PeerOpts};

pub const SPEAKER: IpAddr = a(1);
pub const BIRD_RX: IpAddr = a(2);
pub const GOBGP: IpAddr = a(3);
pub const BIRD_TX: IpAddr = a(4);
pub const FRR: IpAddr = a(5);
pub const EXA: IpAddr = a(6);
pub const BIRD_RX2: IpAddr = a(7);
pub const INJECTOR: IpAddr = a(9);
pub const ALL: [IpAddr; 8] = [
    SPEAKER, BIRD_RX, GOBGP, BIRD_TX, FRR, EXA, BIRD_RX2, INJECTOR,
];

/// The receivers' AS; the senders of the table use it too (iBGP), so that every sender's
/// next hops (one per node) reach the receiver unchanged and all three send one table.
pub const AS: u32 = 65000;
/// The speaker this bench was built with.
const BUILT_SPEAKER: &str = env!("CARGO_BIN_EXE_podcidr-speaker");

/// The speaker binary to run: `PODCIDR_BENCH_SPEAKER` when set (an earlier build, so a
/// before and an after are measured in one sitting with the same peers), else the one
/// built with this bench.
pub fn speaker_bin() -> String {
    std::env::var("PODCIDR_BENCH_SPEAKER").unwrap_or_else(|_| BUILT_SPEAKER.to_owned())
}

const fn a(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(100, 64, 0, n))
}

/// Brings lo up with every address above and returns a temp dir for the daemons. The
/// caller runs under `unshare -rn` (scripts/bench does that), so nothing leaves the
/// namespace.
pub fn setup() -> TempDir {
    // A fresh `unshare -n` namespace has lo and nothing else: refuse to bind test
    // addresses anywhere else.
    let dev = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(str::trim))
        .collect();
    assert!(
        ifaces == ["lo"],
        "run through scripts/bench (inside `unshare -rn`), not here (interfaces {ifaces:?})"
    );
    netns::setup_loopback(&ALL).expect("set up lo");
    TempDir::new("pcb").expect("temp dir")
}

/// One node of the generated cluster: its InternalIP (the next hop of its prefixes) and
/// its pod CIDRs, `/24`s carved from 16.0.0.0/4 (room for 1,048,576).
pub struct Cluster {
    pub nodes: Vec<(String, Ipv4Addr, Vec<Ipv4Addr>)>,
}

/// Node 0 is the speaker's own (100.64.0.1); node i > 0 is 100.65.(i/256).(i%256) for
/// i < 65,536 (next hops only: never assigned, never dialled).
pub fn node_ip(i: usize) -> Ipv4Addr {
    if i == 0 {
        Ipv4Addr::new(100, 64, 0, 1)
    } else {
        Ipv4Addr::new(100, 65, (i >> 8) as u8, i as u8)
    }
}

pub fn prefix(j: usize) -> Ipv4Addr {
    Ipv4Addr::from(0x1000_0000u32 + ((j as u32) << 8))
}

impl Cluster {
    /// `nodes` nodes with `per_node` CIDRs each, numbered in order.
    pub fn new(nodes: usize, per_node: usize) -> Cluster {
        let nodes = (0..nodes)
            .map(|i| {
                let cidrs = (0..per_node).map(|c| prefix(i * per_node + c)).collect();
                (format!("n{i:06}"), node_ip(i), cidrs)
            })
            .collect();
        Cluster { nodes }
    }

    /// The whole cluster for `total` prefixes: one per node up to 50,000 nodes, then 100
    /// per node (CiliumNode cluster-pool allocates more CIDRs as a node fills up).
    pub fn with_prefixes(total: usize) -> Cluster {
        if total <= 50_000 {
            Cluster::new(total, 1)
        } else {
            Cluster::new(total / 100, 100)
        }
    }

    pub fn prefix_count(&self) -> usize {
        self.nodes.iter().map(|n| n.2.len()).sum()
    }

    /// (prefix, next hop) for every route, in node order.
    pub fn table(&self) -> impl Iterator<Item = (Ipv4Addr, Ipv4Addr)> + '_ {
        self.nodes
            .iter()
            .flat_map(|(_, ip, cidrs)| cidrs.iter().map(move |p| (*p, *ip)))
    }

    /// Writes `dir/cluster/{cilium-config.yaml,nodes.json}` (cluster-pool IPAM, pool
    /// 16.0.0.0/4): one `kind: List` with a Node and a CiliumNode per node, replaced
    /// atomically (write, then rename) as `kubectl get -o json > tmp && mv` would.
    pub fn write(&self, dir: &Path) -> PathBuf {
        let cluster = dir.join("cluster");
        std::fs::create_dir_all(&cluster).expect("cluster dir");
        let cfg = cluster.join("cilium-config.yaml");
        if !cfg.exists() {
            write_file(
                &cfg,
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cilium-config\n  namespace: kube-system\ndata:\n  ipam: cluster-pool\n  cluster-pool-ipv4-cidr: 16.0.0.0/4\n",
            )
            .expect("write cilium-config");
        }
        let mut j = String::with_capacity(self.prefix_count() * 20 + self.nodes.len() * 300);
        j.push_str("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\n");
        for (k, (name, ip, cidrs)) in self.nodes.iter().enumerate() {
            if k > 0 {
                j.push_str(",\n");
            }
            let _ = write!(
                j,
                "{{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{{\"name\":\"{name}\",\"labels\":{{\"kubernetes.io/hostname\":\"{name}\"}}}},\"status\":{{\"addresses\":[{{\"type\":\"InternalIP\",\"address\":\"{ip}\"}}]}}}},\n{{\"apiVersion\":\"cilium.io/v2\",\"kind\":\"CiliumNode\",\"metadata\":{{\"name\":\"{name}\"}},\"spec\":{{\"ipam\":{{\"podCIDRs\":["
            );
            for (c, p) in cidrs.iter().enumerate() {
                if c > 0 {
                    j.push(',');
                }
                let _ = write!(j, "\"{p}/24\"");
            }
            j.push_str("]}}}");
        }
        j.push_str("\n]}\n");
        let tmp = dir.join(".nodes.json.tmp");
        write_file(&tmp, &j).expect("write nodes");
        std::fs::rename(&tmp, cluster.join("nodes.json")).expect("rename nodes");
        cluster
    }
}

/// `podcidr-speaker run --announce cluster` on node n000000 with one session per
/// `(address, asn)`; RUST_LOG from `log` (the daemon logs in JSON to `dir/speaker.log`).
pub fn start_speaker(
    dir: &Path,
    cluster: &Path,
    my_as: u32,
    peers: &[(IpAddr, u32)],
    log: &str,
) -> Process {
    start_speaker_with(dir, cluster, my_as, peers, log, "")
}

/// [`start_speaker`] with `extra` YAML lines added to every peer (indented already).
pub fn start_speaker_with(
    dir: &Path,
    cluster: &Path,
    my_as: u32,
    peers: &[(IpAddr, u32)],
    log: &str,
    extra: &str,
) -> Process {
    let mut y = String::from("peers:\n");
    for (addr, asn) in peers {
        let _ = write!(
            y,
            "  - peer-address: {addr}\n    peer-asn: {asn}\n    my-asn: {my_as}\n    hold-time: 90s\n{extra}"
        );
    }
    y.push_str("speaker:\n  connect-retry-time: 1s\n");
    let cfg = dir.join("bgp-config.yaml");
    write_file(&cfg, &y).expect("write bgp-config");
    let mut cmd = Command::new(speaker_bin());
    // No bench measures the stop: without graceful restart (ExaBGP, BIRD here) a
    // SIGTERM would drain for 15 s (RFC 8326) past the harness's 5 s and be killed.
    cmd.arg("run")
        .arg("--graceful-shutdown-time=0")
        .arg("--node=n000000")
        .arg(format!("--bgp-config={}", cfg.display()))
        .arg(format!("--cluster-state={}", cluster.display()))
        .arg("--announce=cluster")
        .arg(format!("--source-address={SPEAKER}"))
        .arg(format!("--metrics-addr={SPEAKER}:9477"))
        .arg("--log-format=json")
        .env("RUST_LOG", log);
    Process::spawn("speaker", cmd, &dir.join("speaker.log")).expect("start the speaker")
}

pub fn metrics_addr() -> SocketAddr {
    SocketAddr::new(SPEAKER, 9477)
}

/// Sum of every sample of `name` in the speaker's /metrics (0 when absent or down).
pub fn metric_sum(name: &str) -> f64 {
    metrics().map(|body| sum_of(&body, name)).unwrap_or(0.0)
}

/// The speaker's /metrics body; `None` while it does not answer (not up yet). The e2e
/// scraper panics on a refused connection, which is what a poll must tolerate.
pub fn metrics() -> Option<String> {
    use std::io::{Read, Write};
    let mut s =
        std::net::TcpStream::connect_timeout(&metrics_addr(), Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        metrics_addr()
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

pub fn sum_of(exposition: &str, name: &str) -> f64 {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, v) = l.rsplit_once(' ')?;
            let n = series.split('{').next()?;
            (n == name).then(|| v.parse::<f64>().ok())?
        })
        .sum()
}

/// Polls `probe` every `every` until it is true or `bound` passes; false on timeout.
pub fn poll(bound: Duration, every: Duration, mut probe: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if probe() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(every);
    }
}

/// A BIRD receiver (import all) with one session per neighbor, every session disabled
/// until [`enable_and_time`] turns one on. One side dials, never both (a collision costs
/// a reconnection): the receiver is passive for the speaker and gobgpd, which dial it,
/// and dials a BIRD sender, which is passive.
pub fn bird_receiver(
    dir: &Path,
    local: IpAddr,
    neighbors: &[(IpAddr, u32)],
    passive: bool,
) -> Bird {
    let mut opts = PeerOpts::new(local, AS);
    for (n, asn) in neighbors {
        let nb = Neighbor::new(*n, *asn).hold_time(90);
        opts = opts.neighbor(if passive { nb.passive() } else { nb });
    }
    let mut b = Bird::start(dir, opts).expect("start the BIRD receiver");
    for (n, _) in neighbors {
        b.shutdown_neighbor(*n).expect("disable");
    }
    b
}

/// `Routes: N imported` and whether the session is Established, from `show protocols all`.
pub fn bird_session(b: &Bird, neighbor: IpAddr) -> (bool, u64) {
    let Ok(text) = b.control(&format!(
        "show protocols all {}",
        bird::proto_name(neighbor)
    )) else {
        return (false, 0);
    };
    let up = text
        .lines()
        .any(|l| l.trim().starts_with("BGP state:") && l.contains("Established"));
    let imported = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Routes:"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    (up, imported)
}

/// What one timed transfer saw.
pub struct Transfer {
    /// Established to the receiver holding all `n`; `None` when `bound` passed first.
    pub secs: Option<f64>,
    /// Established to 99 % of `n` (a sender's bulk, without a straggling last batch).
    pub secs99: Option<f64>,
    pub got: u64,
}

/// Enables the receiver's session to `neighbor` and times Established -> `n` imported.
pub fn enable_and_time(b: &mut Bird, neighbor: IpAddr, n: u64, bound: Duration) -> Transfer {
    b.enable_neighbor(neighbor).expect("enable");
    let start = Instant::now();
    let mut est: Option<Instant> = None;
    let mut at99: Option<Instant> = None;
    let mut got = 0;
    let every = Duration::from_millis(if n > 100_000 { 5 } else { 1 });
    loop {
        let (up, imported) = bird_session(b, neighbor);
        let now = Instant::now();
        if up && est.is_none() {
            est = Some(now);
        }
        got = got.max(imported);
        if imported * 100 >= n * 99 && at99.is_none() {
            at99 = Some(now);
        }
        let since =
            |t: Option<Instant>| t.map(|t| t.duration_since(est.unwrap_or(t)).as_secs_f64());
        if imported >= n {
            return Transfer {
                secs: since(Some(now)),
                secs99: since(at99),
                got,
            };
        }
        if now.duration_since(est.unwrap_or(start)) > bound {
            return Transfer {
                secs: None,
                secs99: since(at99),
                got,
            };
        }
        std::thread::sleep(every);
    }
}

/// BIRD originating the cluster's table (static routes, each with its node's next hop)
/// to `neighbor` over iBGP.
pub fn bird_sender(dir: &Path, cluster: &Cluster, neighbor: IpAddr) -> (Process, PathBuf) {
    let d = dir.join("bird-tx");
    std::fs::create_dir_all(&d).expect("bird-tx dir");
    let mut c = String::with_capacity(cluster.prefix_count() * 80);
    let _ = writeln!(
        c,
        "router id {BIRD_TX};\nlog stderr {{ warning, error, fatal }};"
    );
    c.push_str("ipv4 table igp4;\nprotocol device {}\n");
    c.push_str("protocol static nh { ipv4 { table igp4; }; route 0.0.0.0/0 via \"lo\"; }\n");
    c.push_str("protocol static o4 {\n  ipv4;\n");
    for (p, nh) in cluster.table() {
        let _ = writeln!(
            c,
            "  route {p}/24 blackhole {{ bgp_next_hop = {nh}; bgp_origin = ORIGIN_IGP; }};"
        );
    }
    c.push_str("}\n");
    let _ = writeln!(
        c,
        "protocol bgp to_rx {{\n  local {BIRD_TX} port 179 as {AS};\n  neighbor {neighbor} port 179 as {AS};\n  strict bind yes;\n  multihop 1;\n  connect delay time 1;\n  connect retry time 1;\n  error wait time 1, 5;\n  hold time 90;\n  passive on;\n  ipv4 {{ import none; export where proto = \"o4\"; next hop keep; igp table igp4; }};\n}}"
    );
    let conf = d.join("bird.conf");
    write_file(&conf, &c).expect("write bird-tx conf");
    let ctl = d.join("bird.ctl");
    let mut cmd = Command::new("bird");
    cmd.arg("-f").arg("-c").arg(&conf).arg("-s").arg(&ctl);
    let mut p = Process::spawn("bird-tx", cmd, &d.join("bird.log")).expect("start BIRD sender");
    let want = cluster.prefix_count() as u64;
    let ctl2 = ctl.clone();
    p.wait_ready("BIRD sender loaded", Duration::from_secs(300), || {
        let t = bird::control(&ctl2, "show route count protocol o4").map_err(|e| e.to_string())?;
        let n: u64 = t
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if n >= want {
            Ok(())
        } else {
            Err(format!("{n} of {want}"))
        }
    })
    .expect("BIRD sender ready");
    (p, ctl)
}

/// gobgpd (iBGP to `neighbor`) holding the cluster's table, loaded with
/// `gobgp mrt inject global` from a generated TABLE_DUMP_V2 file.
pub fn gobgp_sender(dir: &Path, cluster: &Cluster, neighbors: &[IpAddr]) -> Gobgp {
    let mut opts = PeerOpts::new(GOBGP, AS);
    for n in neighbors {
        opts = opts.neighbor(Neighbor::new(*n, AS).hold_time(90));
    }
    let g = Gobgp::start(dir, opts).expect("start gobgpd");
    if cluster.prefix_count() > 0 {
        let mrt = dir.join("table.mrt");
        write_mrt(&mrt, cluster);
        let sock = g.dir().join("api.sock");
        let mut cmd = Command::new("gobgp");
        cmd.arg("--target")
            .arg(format!("unix://{}", sock.display()))
            .args(["mrt", "inject", "global"])
            .arg(&mrt);
        run_ok(&mut cmd, Duration::from_secs(600)).expect("gobgp mrt inject");
        let want = cluster.prefix_count() as u64;
        let ok = poll(Duration::from_secs(60), Duration::from_millis(200), || {
            gobgp_rib_count(&g) >= want
        });
        assert!(
            ok,
            "gobgpd holds {} of {want} after mrt inject",
            gobgp_rib_count(&g)
        );
    }
    g
}

/// Destinations in gobgpd's global IPv4 RIB.
pub fn gobgp_rib_count(g: &Gobgp) -> u64 {
    g.cli(&["global", "rib", "summary", "-a", "ipv4"])
        .ok()
        .and_then(|t| {
            t.split("Destination:")
                .nth(1)
                .and_then(|r| r.trim().split(',').next().map(str::to_owned))
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// TABLE_DUMP_V2 (RFC 6396 section 4.3): a PEER_INDEX_TABLE and one RIB_IPV4_UNICAST
/// entry per route (ORIGIN IGP, empty AS_PATH, NEXT_HOP the node). `gobgp mrt inject`
/// drops its last batch, so 2,000 entries of the table are repeated at the end (the same
/// routes again: nothing extra reaches the RIB).
fn write_mrt(path: &Path, cluster: &Cluster) {
    fn record(out: &mut Vec<u8>, subtype: u16, body: &[u8]) {
        out.extend_from_slice(&0u32.to_be_bytes());
        out.extend_from_slice(&13u16.to_be_bytes());
        out.extend_from_slice(&subtype.to_be_bytes());
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(body);
    }
    let mut out = Vec::with_capacity(cluster.prefix_count() * 40);
    let mut b = Vec::new();
    b.extend_from_slice(&[100, 64, 0, 3]);
    b.extend_from_slice(&0u16.to_be_bytes());
    b.extend_from_slice(&1u16.to_be_bytes());
    b.push(0x02);
    b.extend_from_slice(&[100, 64, 0, 3]);
    b.extend_from_slice(&[100, 64, 0, 3]);
    b.extend_from_slice(&AS.to_be_bytes());
    record(&mut out, 1, &b);
    let table: Vec<(Ipv4Addr, Ipv4Addr)> = cluster.table().collect();
    let pad = table.iter().cycle().take(2_000);
    for (seq, (p, nh)) in table.iter().chain(pad).enumerate() {
        b.clear();
        b.extend_from_slice(&(seq as u32).to_be_bytes());
        b.push(24);
        b.extend_from_slice(&p.octets()[..3]);
        b.extend_from_slice(&1u16.to_be_bytes());
        b.extend_from_slice(&0u16.to_be_bytes());
        b.extend_from_slice(&0u32.to_be_bytes());
        let attrs = [
            &[0x40, 0x01, 0x01, 0x00][..],
            &[0x40, 0x02, 0x00][..],
            &[0x40, 0x03, 0x04][..],
            &nh.octets()[..],
        ]
        .concat();
        b.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
        b.extend_from_slice(&attrs);
        record(&mut out, 2, &b);
    }
    std::fs::write(path, out).expect("write MRT");
}

/// The pid of a child of this process named `comm` whose command line mentions `arg`.
pub fn child_pid(comm: &str, arg: &str) -> Option<u32> {
    let me = std::process::id();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((name, rest)) = stat.split_once(") ") else {
            continue;
        };
        let ppid: u32 = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == me
            && name.ends_with(&format!("({comm}"))
            && String::from_utf8_lossy(&cmdline).contains(arg)
        {
            return Some(pid);
        }
    }
    None
}

/// VmRSS and VmHWM (kB) and utime+stime (clock ticks) of `pid`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcStat {
    pub rss_kb: u64,
    pub hwm_kb: u64,
    pub cpu_ticks: u64,
}

pub fn proc_stat(pid: u32) -> ProcStat {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    ProcStat {
        rss_kb: kb("VmRSS:"),
        hwm_kb: kb("VmHWM:"),
        // Fields 14 and 15 of stat(5), counted from the state (field 3) here.
        cpu_ticks: tick(11) + tick(12),
    }
}

pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// Nearest-rank percentile (`q` in 0..=1).
pub fn percentile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// One result line for scripts/bench: `RESULT {json}` on stdout.
pub fn emit(v: serde_json::Value) {
    println!("RESULT {v}");
}
