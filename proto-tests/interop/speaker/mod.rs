//! The speaker under test, in process: a Tokio runtime of the test's own running
//! `peer::spawn` tasks, each fed a `watch` of desired routes the test changes, built from
//! a bgp-config text exactly as the daemon builds it (`config::parse` ->
//! `PeerSpec::from_config`). Also the top-of-rack daemons as one enum, so that each
//! scenario is written once and run against BIRD, FRR, GoBGP and ExaBGP.
//!
//! Shared by the `sessions*.rs` interop tests; must not dial anything but the test
//! namespace's addresses.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use ipnet::IpNet;
use tokio::runtime::Runtime;
use tokio::sync::watch;

use podcidr_speaker::bgp::session::{SessionError, State};
use podcidr_speaker::bgp::wire::Origin as WireOrigin;
use podcidr_speaker::config;
use podcidr_speaker::peer::{
    self, Inbound, Listener, NoopObserver, PeerHandle, PeerObserver, PeerSpec, PeerStatus,
    RunOverrides, Shutdown,
};
use podcidr_speaker::routes::{DesiredRoutes, NextHop, PlannedRoute, RouteAttrs};

use crate::harness::bird::Bird;
use crate::harness::exabgp::Exabgp;
use crate::harness::frr::Frr;
use crate::harness::gobgp::Gobgp;
use crate::harness::{
    v4, v6, wait_for, Afi, BgpDaemon, HarnessError, Neighbor, Origin, PeerOpts, Route,
};

/// How long any single convergence may take (sessions come up in 1-5 s here).
pub const WAIT: Duration = Duration::from_secs(30);

/// How far apart two reads of an unchanged route's time may be ([`Tor::route_times`]):
/// BIRD shows milliseconds, FRR whole seconds, each converted from a monotonic clock.
pub fn time_jitter(kind: Kind) -> f64 {
    match kind {
        Kind::Bird => 0.002,
        _ => 1.0,
    }
}

pub fn net(s: &str) -> IpNet {
    s.parse().expect("test prefix literal")
}

pub fn v4_of(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(100, 64, 0, n)
}

/// Logs of the driver on the test's output (shown for a failing test), once per process.
pub fn init_tracing() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("podcidr_speaker=info"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .with_ansi(false)
            .try_init();
    });
}

/// The runtime the speaker tasks run on, in the background, while the test thread
/// polls the daemons.
pub fn runtime() -> Arc<Runtime> {
    init_tracing();
    Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime"),
    )
}

/// One `peers` entry of a bgp-config, with fast timers (hold time 9 s, connect retry
/// 1 s) and without graceful restart (the speaker's default is on; a test of it says
/// `graceful-restart: true`) unless `extra` sets them; `extra` adds keys, one
/// `key: value` each.
pub fn peer_config(peer: IpAddr, peer_asn: u32, my_asn: u32, extra: &[&str]) -> config::Peer {
    let mut text = format!(
        "peers:\n  - peer-address: {peer}\n    peer-asn: {peer_asn}\n    my-asn: {my_asn}\n"
    );
    for (key, default) in [
        ("hold-time:", "9s"),
        ("connect-retry-time:", "1s"),
        ("graceful-restart:", "false"),
    ] {
        if !extra.iter().any(|l| l.starts_with(key)) {
            text.push_str(&format!("    {key} {default}\n"));
        }
    }
    for line in extra {
        text.push_str("    ");
        text.push_str(line);
        text.push('\n');
    }
    let cfg = config::parse(&text).unwrap_or_else(|e| panic!("test config: {e}\n{text}"));
    cfg.peers.into_iter().next().expect("one peer")
}

/// The spec of a speaker on `100.64.0.n`.
pub fn spec(n: u8, peer: &config::Peer) -> PeerSpec {
    let run = RunOverrides {
        source_address: Some(v4(n)),
        router_id: Some(v4_of(n)),
        node_ipv4: None,
        node_name: None,
        graceful_shutdown: Duration::ZERO,
    };
    PeerSpec::from_config(peer, &run).unwrap_or_else(|e| panic!("peer spec: {e}"))
}

/// The attributes the planner would give this speaker's routes: our AS on eBGP, none on
/// iBGP (RFC 4271 section 5.1.2), LOCAL_PREF on iBGP only.
#[derive(Debug, Clone)]
pub struct Attrs {
    pub my_asn: u32,
    pub ibgp: bool,
    pub origin: WireOrigin,
    pub med: Option<u32>,
    pub local_pref: Option<u32>,
    pub communities: Vec<(u16, u16)>,
    pub large: Vec<(u32, u32, u32)>,
    /// The speaker is on `100.64.0.node` / `fd00::node`: its IPv6 routes on the IPv4
    /// session carry `fd00::node`, the node address the planner would write.
    pub node: u8,
}

impl Attrs {
    pub fn new(my_asn: u32, ibgp: bool) -> Attrs {
        Attrs {
            my_asn,
            ibgp,
            origin: WireOrigin::Incomplete,
            med: None,
            local_pref: ibgp.then_some(150),
            communities: vec![(65535, 100)],
            large: vec![],
            node: 1,
        }
    }

    pub fn node(mut self, n: u8) -> Attrs {
        self.node = n;
        self
    }

    pub fn med(mut self, med: u32) -> Attrs {
        self.med = Some(med);
        self
    }

    pub fn large(mut self, large: &[(u32, u32, u32)]) -> Attrs {
        self.large = large.to_vec();
        self
    }

    pub fn route_attrs(&self) -> Arc<RouteAttrs> {
        let mut communities: Vec<u32> = self
            .communities
            .iter()
            .map(|(a, b)| (u32::from(*a) << 16) | u32::from(*b))
            .collect();
        communities.sort_unstable();
        let mut large: Vec<_> = self
            .large
            .iter()
            .map(|(a, b, c)| podcidr_speaker::bgp::wire::LargeCommunity {
                global_admin: *a,
                local_data1: *b,
                local_data2: *c,
            })
            .collect();
        large.sort();
        Arc::new(RouteAttrs {
            origin: self.origin,
            as_path: if self.ibgp { vec![] } else { vec![self.my_asn] },
            next_hop: NextHop::SessionLocal,
            med: self.med,
            local_pref: self.local_pref.filter(|_| self.ibgp),
            communities,
            large_communities: large,
        })
    }

    /// [`Attrs::route_attrs`] for IPv6 routes on the speaker's IPv4 session.
    pub fn route_attrs_v6(&self) -> Arc<RouteAttrs> {
        Arc::new(RouteAttrs {
            next_hop: NextHop::Address(v6(self.node)),
            ..(*self.route_attrs()).clone()
        })
    }

    /// The route as `daemon` shows it, received from the speaker on `100.64.0.n`.
    pub fn expected(&self, kind: Kind, prefix: IpNet, n: u8) -> Route {
        let local_pref = match (self.ibgp, kind) {
            (true, _) => self.local_pref,
            // BIRD fills in its default on eBGP routes.
            (false, Kind::Bird) => Some(100),
            (false, _) => None,
        };
        Route {
            prefix,
            next_hop: match prefix {
                IpNet::V4(_) => v4(n),
                IpNet::V6(_) => v6(n),
            },
            as_path: if self.ibgp { vec![] } else { vec![self.my_asn] },
            local_pref,
            med: self.med,
            communities: self.communities.clone(),
            large_communities: self.large.clone(),
            origin: match self.origin {
                WireOrigin::Igp => Origin::Igp,
                WireOrigin::Egp => Origin::Egp,
                WireOrigin::Incomplete => Origin::Incomplete,
            },
            stale: false,
        }
    }
}

/// Desired routes: every prefix with the same attributes.
pub fn desired(prefixes: &[IpNet], attrs: &Attrs) -> Arc<DesiredRoutes> {
    let a = attrs.route_attrs();
    let a6 = attrs.route_attrs_v6();
    Arc::new(
        prefixes
            .iter()
            .map(|p| {
                (
                    *p,
                    PlannedRoute {
                        attrs: if p.addr().is_ipv4() {
                            a.clone()
                        } else {
                            a6.clone()
                        },
                        node: Arc::from("node-under-test"),
                    },
                )
            })
            .collect(),
    )
}

/// One in-process speaker session: a `peer::spawn` task and the two channels the daemon
/// would hold.
pub struct Speaker {
    pub name: String,
    rt: Arc<Runtime>,
    handle: Option<PeerHandle>,
    desired: watch::Sender<Arc<DesiredRoutes>>,
    shutdown: watch::Sender<Option<Shutdown>>,
}

impl Speaker {
    pub fn start(rt: &Arc<Runtime>, spec: PeerSpec, routes: Arc<DesiredRoutes>) -> Speaker {
        Speaker::start_with(rt, spec, routes, Arc::new(NoopObserver), None)
    }

    pub fn start_with(
        rt: &Arc<Runtime>,
        spec: PeerSpec,
        routes: Arc<DesiredRoutes>,
        observer: Arc<dyn PeerObserver>,
        inbound: Option<Inbound>,
    ) -> Speaker {
        let name = format!(
            "speaker {} -> {}",
            spec.transport.source.map_or("?".into(), |a| a.to_string()),
            spec.key
        );
        let (desired, desired_rx) = watch::channel(routes);
        let (shutdown, shutdown_rx) = watch::channel(None);
        let _guard = rt.enter();
        let handle = peer::spawn(spec, desired_rx, observer, shutdown_rx, inbound)
            .unwrap_or_else(|e| panic!("peer::spawn: {e}"));
        Speaker {
            name,
            rt: rt.clone(),
            handle: Some(handle),
            desired,
            shutdown,
        }
    }

    pub fn set_routes(&self, routes: Arc<DesiredRoutes>) {
        self.desired.send_replace(routes);
    }

    pub fn status(&self) -> PeerStatus {
        match &self.handle {
            Some(h) => h.status(),
            None => panic!("{} already stopped", self.name),
        }
    }

    /// Polls the status until `pred` holds.
    pub fn wait(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&PeerStatus) -> bool,
    ) -> PeerStatus {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.status();
            if pred(&s) {
                return s;
            }
            if Instant::now() >= deadline {
                panic!(
                    "{}: timed out after {timeout:?} waiting for {what}; status: {s:#?}",
                    self.name
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Established, and every desired route written.
    pub fn wait_synced(&self) -> PeerStatus {
        self.wait("Established with nothing pending", WAIT, |s| {
            s.state == State::Established && s.pending == 0 && s.write_buffer == 0
        })
    }

    /// Ends the task the way the daemon would and waits for it (bounded).
    pub fn stop(&mut self, mode: Shutdown) -> PeerStatus {
        self.request_stop(mode);
        self.join()
    }

    /// Asks the task to end without waiting (a graceful shutdown takes its grace period).
    pub fn request_stop(&self, mode: Shutdown) {
        self.shutdown.send_replace(Some(mode));
    }

    /// Waits (bounded) for a task asked to end.
    pub fn join(&mut self) -> PeerStatus {
        let Some(h) = self.handle.take() else {
            panic!("{} already stopped", self.name);
        };
        let status = h.status.clone();
        let joined = self
            .rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), h.join).await });
        assert!(
            matches!(joined, Ok(Ok(()))),
            "{}: task did not end cleanly: {joined:?}",
            self.name
        );
        let s = status.borrow().clone();
        assert!(s.finished, "{}: status not final", self.name);
        s
    }
}

impl Drop for Speaker {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.shutdown
                .send_replace(Some(Shutdown::Admin("test over".into())));
            let _ = self
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(10), h.join).await });
        }
    }
}

/// Binds a listener for speakers that accept connections.
pub fn listener(rt: &Arc<Runtime>, addr: IpAddr) -> Listener {
    let _guard = rt.enter();
    Listener::bind((addr, 179).into()).unwrap_or_else(|e| panic!("listener: {e}"))
}

/// The four implementations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bird,
    Frr,
    Gobgp,
    Exabgp,
}

/// A running top-of-rack daemon of any kind.
pub enum Tor {
    Bird(Bird),
    Frr(Frr),
    Gobgp(Gobgp),
    Exabgp(Exabgp),
}

impl Tor {
    pub fn start(kind: Kind, dir: &Path, opts: PeerOpts) -> Tor {
        let r: Result<Tor, HarnessError> = match kind {
            Kind::Bird => Bird::start(dir, opts).map(Tor::Bird),
            Kind::Frr => Frr::start(dir, opts).map(Tor::Frr),
            Kind::Gobgp => Gobgp::start(dir, opts).map(Tor::Gobgp),
            Kind::Exabgp => Exabgp::start(dir, opts).map(Tor::Exabgp),
        };
        r.unwrap_or_else(|e| panic!("start {kind:?}: {e}"))
    }

    pub fn d(&self) -> &dyn BgpDaemon {
        match self {
            Tor::Bird(d) => d,
            Tor::Frr(d) => d,
            Tor::Gobgp(d) => d,
            Tor::Exabgp(d) => d,
        }
    }

    pub fn d_mut(&mut self) -> &mut dyn BgpDaemon {
        match self {
            Tor::Bird(d) => d,
            Tor::Frr(d) => d,
            Tor::Gobgp(d) => d,
            Tor::Exabgp(d) => d,
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Tor::Bird(_) => Kind::Bird,
            Tor::Frr(_) => Kind::Frr,
            Tor::Gobgp(_) => Kind::Gobgp,
            Tor::Exabgp(_) => Kind::Exabgp,
        }
    }

    pub fn exabgp(&self) -> &Exabgp {
        match self {
            Tor::Exabgp(e) => e,
            _ => panic!("not exabgp"),
        }
    }

    /// Undoes `shutdown_neighbor`. ExaBGP has no such command: after its teardown it
    /// accepts the speaker's next connection by itself.
    pub fn enable_neighbor(&mut self, neighbor: IpAddr) {
        let r = match self {
            Tor::Bird(d) => d.enable_neighbor(neighbor),
            Tor::Frr(d) => d.enable_neighbor(neighbor),
            Tor::Gobgp(d) => d.enable_neighbor(neighbor),
            Tor::Exabgp(_) => Ok(()),
        };
        r.unwrap_or_else(|e| panic!("enable {neighbor}: {e}"));
    }

    /// The hold time and keepalive interval the daemon negotiated with `neighbor`, in
    /// seconds; `None` for ExaBGP, which logs its negotiated hold time (an
    /// `ExaEventKind::Negotiated` event, checked by the hold time scenario) but not its
    /// keepalive interval.
    pub fn negotiated_timers(&self, neighbor: IpAddr) -> Option<(u16, u16)> {
        match self {
            Tor::Bird(b) => {
                let text = b
                    .control(&format!(
                        "show protocols all {}",
                        crate::harness::bird::proto_name(neighbor)
                    ))
                    .unwrap_or_else(|e| panic!("bird: {e}"));
                // "Hold timer:       5.320/6": time left / negotiated.
                let of = |label: &str| -> u16 {
                    let line = text
                        .lines()
                        .find(|l| l.trim_start().starts_with(label))
                        .unwrap_or_else(|| panic!("no {label:?} in {text}"));
                    let (_, total) = line.rsplit_once('/').expect("time/total");
                    total.trim().parse().expect("seconds")
                };
                Some((of("Hold timer:"), of("Keepalive timer:")))
            }
            Tor::Frr(f) => {
                let text = f
                    .vtysh(&[&format!("show bgp neighbors {neighbor} json")])
                    .unwrap_or_else(|e| panic!("frr: {e}"));
                let v: serde_json::Value = serde_json::from_str(&text).expect("frr json");
                let n = &v[neighbor.to_string()];
                let ms = |k: &str| n[k].as_u64().unwrap_or_else(|| panic!("no {k}: {text}"));
                Some((
                    (ms("bgpTimerHoldTimeMsecs") / 1000) as u16,
                    (ms("bgpTimerKeepAliveIntervalMsecs") / 1000) as u16,
                ))
            }
            Tor::Gobgp(g) => {
                let text = g
                    .cli(&["neighbor", &neighbor.to_string()])
                    .unwrap_or_else(|e| panic!("gobgp: {e}"));
                // "Hold time is 6, keepalive interval is 2 seconds"
                let line = text
                    .lines()
                    .find(|l| l.trim_start().starts_with("Hold time is"))
                    .unwrap_or_else(|| panic!("no hold time in {text}"));
                let nums: Vec<u16> = line
                    .split(|c: char| !c.is_ascii_digit())
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse().expect("number"))
                    .collect();
                Some((nums[0], nums[1]))
            }
            Tor::Exabgp(_) => None,
        }
    }

    /// When the daemon last changed each route it holds from `neighbor` (both families),
    /// in seconds, as the daemon itself shows it: BIRD's route time (its default
    /// `hh:mm:ss.mmm`, as seconds of the day), FRR's per-path `lastUpdate` (epoch, whole
    /// seconds). Both are kept on a monotonic clock and converted when shown, so two
    /// reads of an unchanged route may differ by a millisecond (BIRD) or a second (FRR):
    /// see [`time_jitter`]. A route withdrawn and announced again gets a new time.
    /// Refreshed with the same attributes after a graceful restart, BIRD keeps the time
    /// (`rte_same`: an ignored import) while FRR 8.4 sets it to the refresh.
    pub fn route_times(&self, neighbor: IpAddr) -> BTreeMap<IpNet, f64> {
        match self {
            Tor::Bird(b) => {
                let text = b
                    .control(&format!(
                        "show route all protocol {}",
                        crate::harness::bird::proto_name(neighbor)
                    ))
                    .unwrap_or_else(|e| panic!("bird: {e}"));
                // `<prefix>  unicast [<protocol> 01:17:38.718] * (100) [AS65001i]`
                let seconds = |t: &str| -> Option<f64> {
                    let mut f = t.split(':').map(|x| x.parse::<f64>().ok());
                    Some(f.next()?? * 3600.0 + f.next()?? * 60.0 + f.next()??)
                };
                let mut out = BTreeMap::new();
                for l in text.lines() {
                    let Ok(prefix) = l.split_whitespace().next().unwrap_or("").parse() else {
                        continue;
                    };
                    let time = l
                        .split_once('[')
                        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                        .and_then(|t| seconds(t.trim_end_matches(']')))
                        .unwrap_or_else(|| panic!("no route time in {l:?}"));
                    out.insert(prefix, time);
                }
                out
            }
            Tor::Frr(f) => {
                let mut out = BTreeMap::new();
                for afi in ["ipv4", "ipv6"] {
                    let text = f
                        .vtysh(&[&format!("show bgp {afi} unicast json detail")])
                        .unwrap_or_else(|e| panic!("frr: {e}"));
                    let v: serde_json::Value = serde_json::from_str(&text).expect("frr json");
                    let Some(routes) = v["routes"].as_object() else {
                        continue;
                    };
                    for (prefix, entry) in routes {
                        let paths = entry
                            .as_array()
                            .or_else(|| entry["paths"].as_array())
                            .cloned()
                            .unwrap_or_default();
                        for p in paths {
                            if p.pointer("/peer/peerId").and_then(|v| v.as_str())
                                != Some(&neighbor.to_string())
                            {
                                continue;
                            }
                            let epoch = p
                                .pointer("/lastUpdate/epoch")
                                .and_then(|v| v.as_u64())
                                .unwrap_or_else(|| panic!("no lastUpdate for {prefix}: {p}"));
                            out.insert(prefix.parse().expect("prefix"), epoch as f64);
                        }
                    }
                }
                out
            }
            Tor::Gobgp(g) => {
                // `age` of each path in the Adj-RIB-In: when GoBGP last took it (Unix
                // seconds).
                let mut out = BTreeMap::new();
                for afi in ["ipv4", "ipv6"] {
                    let text = g
                        .cli(&["-j", "neighbor", &neighbor.to_string(), "adj-in", "-a", afi])
                        .unwrap_or_else(|e| panic!("gobgp: {e}"));
                    let text = text.trim();
                    if text.is_empty() || text == "null" {
                        continue;
                    }
                    let v: serde_json::Value = serde_json::from_str(text).expect("gobgp json");
                    for (prefix, paths) in v.as_object().into_iter().flatten() {
                        for p in paths.as_array().into_iter().flatten() {
                            let age = p["age"]
                                .as_u64()
                                .unwrap_or_else(|| panic!("no age for {prefix}: {p}"));
                            out.insert(prefix.parse().expect("prefix"), age as f64);
                        }
                    }
                }
                out
            }
            Tor::Exabgp(_) => panic!("route times: bird, frr and gobgp only"),
        }
    }

    /// The daemon's own counters of what `neighbor` sent it since the daemon started: BIRD's per-channel import
    /// update and withdraw statistics (received, rejected, filtered, ignored, accepted),
    /// FRR's count of UPDATE messages received. Any UPDATE changes them.
    pub fn update_counters(&self, neighbor: IpAddr) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        match self {
            Tor::Bird(b) => {
                let text = b
                    .control(&format!(
                        "show protocols all {}",
                        crate::harness::bird::proto_name(neighbor)
                    ))
                    .unwrap_or_else(|e| panic!("bird: {e}"));
                let columns = ["received", "rejected", "filtered", "ignored", "accepted"];
                let mut channel = String::new();
                for l in text.lines().map(str::trim) {
                    if let Some(c) = l.strip_prefix("Channel ") {
                        channel = c.to_string();
                    }
                    for row in ["Import updates:", "Import withdraws:"] {
                        let Some(values) = l.strip_prefix(row) else {
                            continue;
                        };
                        for (col, v) in columns.iter().zip(values.split_whitespace()) {
                            if let Ok(n) = v.parse() {
                                out.insert(format!("{channel} {row} {col}"), n);
                            }
                        }
                    }
                }
                assert!(out.len() >= 2 * 9, "no route change stats in {text}");
            }
            Tor::Frr(f) => {
                let text = f
                    .vtysh(&[&format!("show bgp neighbors {neighbor} json")])
                    .unwrap_or_else(|e| panic!("frr: {e}"));
                let v: serde_json::Value = serde_json::from_str(&text).expect("frr json");
                let n = &v[neighbor.to_string()]["messageStats"]["updatesRecv"];
                out.insert(
                    "updatesRecv".into(),
                    n.as_u64()
                        .unwrap_or_else(|| panic!("no updatesRecv: {text}")),
                );
            }
            Tor::Gobgp(g) => {
                let (received, _) = g
                    .message_counts(neighbor)
                    .unwrap_or_else(|e| panic!("gobgp: {e}"));
                out.insert("updatesRecv".into(), received.update);
            }
            Tor::Exabgp(_) => panic!("update counters: bird, frr and gobgp only"),
        }
        out
    }

    /// Whether the daemon shows a Cease/Administrative Shutdown (RFC 8203/9003) from
    /// `neighbor` carrying `message`; `Err` with what it shows instead.
    pub fn saw_admin_shutdown(&self, neighbor: IpAddr, message: &str) -> Result<(), String> {
        let seen = match self {
            Tor::Bird(b) => b.log_tail(100),
            Tor::Frr(f) => {
                let text = f
                    .vtysh(&[&format!("show bgp neighbors {neighbor} json")])
                    .map_err(|e| e.to_string())?;
                let v: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| e.to_string())?;
                let n = &v[neighbor.to_string()];
                format!(
                    "{} / {}",
                    n["lastNotificationReason"].as_str().unwrap_or(""),
                    n["lastShutdownDescription"].as_str().unwrap_or("")
                )
            }
            Tor::Gobgp(g) => g.log_tail(100),
            Tor::Exabgp(e) => {
                // ExaBGP 4.2.21 logs its own rendering of the data, and fails on any
                // non-empty communication (a bytes/str mix-up in notification.py): only
                // the empty one can be checked there.
                assert!(message.is_empty(), "exabgp cannot show a shutdown message");
                let got = e.notifications_from(neighbor).map_err(|e| e.to_string())?;
                let data = b"empty Shutdown Communication.".to_vec();
                return if got == vec![(6, 2, data)] {
                    Ok(())
                } else {
                    Err(format!("notifications: {got:?}"))
                };
            }
        };
        let found = match self {
            Tor::Bird(_) => {
                seen.contains(&format!("Received: Administrative shutdown: \"{message}\""))
            }
            Tor::Frr(_) => seen == format!("Cease/Administrative Shutdown / {message}"),
            Tor::Gobgp(_) => seen.lines().any(|l| {
                l.contains("received notification")
                    && l.contains("Code=6")
                    && l.contains("Subcode=2")
                    && l.contains(&format!("Communicated-Reason=\"{message}\""))
            }),
            Tor::Exabgp(_) => false,
        };
        if found {
            Ok(())
        } else {
            Err(seen)
        }
    }

    /// Makes the daemon send ROUTE-REFRESH to `neighbor`: BIRD for every channel, FRR
    /// for IPv4 unicast.
    pub fn request_refresh(&mut self, neighbor: IpAddr) {
        let r = match self {
            Tor::Bird(b) => b
                .control(&format!(
                    "reload in {}",
                    crate::harness::bird::proto_name(neighbor)
                ))
                .map(drop),
            Tor::Frr(f) => f
                .vtysh(&[&format!("clear bgp ipv4 unicast {neighbor} soft in")])
                .map(drop),
            Tor::Gobgp(_) | Tor::Exabgp(_) => panic!("{:?} sends no route refresh", self.kind()),
        };
        r.unwrap_or_else(|e| panic!("route refresh: {e}"));
    }

    pub fn established(&self, neighbor: IpAddr) {
        self.d()
            .wait_established(neighbor, WAIT)
            .unwrap_or_else(|e| panic!("{}: {e}", self.d().kind()));
    }

    /// Waits until the daemon holds exactly `want` (prefix, attributes and stale flag)
    /// from `neighbor`, and nothing else of that family.
    pub fn wait_exact(&self, neighbor: IpAddr, afi: Afi, want: &[Route]) -> Vec<Route> {
        let mut want = want.to_vec();
        want.sort_by_key(|r| r.prefix);
        self.d()
            .wait_routes(neighbor, afi, WAIT, &|got| {
                let mut got = got.to_vec();
                got.sort_by_key(|r| r.prefix);
                got == want
            })
            .unwrap_or_else(|e| panic!("{} never held exactly {want:#?}: {e}", self.d().kind()))
    }

    /// Waits until the daemon holds nothing from `neighbor`: no routes of either family,
    /// or no session at all (GoBGP answers no RIB query for a neighbor that is down).
    pub fn wait_nothing_from(&self, neighbor: IpAddr) {
        wait_for(
            &format!("{} to drop every route", self.d().kind()),
            WAIT,
            || {
                let up = self
                    .d()
                    .session_state(neighbor)
                    .map_err(|e| e.to_string())?
                    .established();
                let mut held = Vec::new();
                for afi in [Afi::Ipv4, Afi::Ipv6] {
                    match self.d().routes(neighbor, afi) {
                        Ok(r) => held.extend(r),
                        Err(e) if up => return Err(e.to_string()),
                        Err(_) => {}
                    }
                }
                if held.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{held:?}"))
                }
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// `Neighbor` as every scenario configures the speaker on the daemon: both families on
/// the IPv4 session, fast timers. ExaBGP stays passive: it would dial as well, and its
/// own retry is slow.
pub fn tor_neighbor(kind: Kind, n: u8, asn: u32) -> Neighbor {
    let nb = Neighbor::new(v4(n), asn).ipv6();
    if kind == Kind::Exabgp {
        nb.passive()
    } else {
        nb
    }
}

/// A speaker's session error, as the status shows it.
pub fn last_error(s: &PeerStatus) -> Option<&SessionError> {
    s.stats.last_error.as_ref()
}
