//! GoBGP (tested with gobgpd 3.10): TOML config generation, the process, and the `gobgp`
//! CLI with `-j` JSON output over a UNIX API socket (the default TCP API and pprof ports
//! would collide between instances).
//!
//! GoBGP's config file has no originated routes: they are injected with `gobgp global
//! rib add` after every start. GoBGP can be the restarting side of graceful restart
//! (RFC 4724): [`Gobgp::crash`] kills it without a NOTIFICATION (the kernel closes the
//! TCP connections) and [`Gobgp::start_graceful`] starts it with `-r`, which sets the
//! Restart State bit in its GR capability; the helpers keep its routes meanwhile.
//!
//! Timing: gobgpd waits a random 5-10 s between its own connection attempts whatever
//! `connect-retry` says (it enforces a 5 s minimum), so sessions come up fastest when
//! the other side connects (every other driver is active unless the neighbor is
//! `passive`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use ipnet::IpNet;
use serde_json::Value;

use super::process::{
    fresh_subdir, is_listening, run_ok, write_file, Process, COMMAND_TIMEOUT, STARTUP_TIMEOUT,
};
use super::{
    Afi, Announce, BgpDaemon, GobgpOpts, HarnessError, Origin, PeerState, Result, Route,
    SessionState,
};

const KIND: &str = "gobgp";

/// A running gobgpd.
#[derive(Debug)]
pub struct Gobgp {
    dir: PathBuf,
    opts: GobgpOpts,
    routes: BTreeMap<IpNet, Announce>,
    process: Option<Process>,
}

/// BGP message counts GoBGP keeps per neighbor (reset when gobgpd restarts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MessageCounts {
    pub open: u64,
    pub update: u64,
    pub notification: u64,
    pub keepalive: u64,
    pub total: u64,
}

impl Gobgp {
    /// Writes `gobgpd.toml` into a new `gobgp-<local_addr>` dir under `dir`, starts
    /// gobgpd and injects `opts.routes`; returns once the API answers and gobgpd listens.
    pub fn start(dir: &Path, opts: GobgpOpts) -> Result<Gobgp> {
        opts.validate()?;
        opts.refuse_extended_next_hop("gobgp")?;
        let dir = fresh_subdir(dir, &format!("gobgp-{}", opts.local_addr))?;
        let routes = opts.routes.iter().map(|r| (r.prefix, r.clone())).collect();
        let mut g = Gobgp {
            dir,
            opts,
            routes,
            process: None,
        };
        g.spawn(false)?;
        Ok(g)
    }

    pub fn opts(&self) -> &GobgpOpts {
        &self.opts
    }

    fn conf_path(&self) -> PathBuf {
        self.dir.join("gobgpd.toml")
    }

    fn sock_path(&self) -> PathBuf {
        self.dir.join("api.sock")
    }

    fn local_addrs(&self) -> Vec<IpAddr> {
        let mut v = vec![IpAddr::V4(self.opts.local_addr)];
        if let Some(a) = self.opts.local_addr6 {
            v.push(IpAddr::V6(a));
        }
        v
    }

    fn spawn(&mut self, graceful: bool) -> Result<()> {
        write_file(&self.conf_path(), &render_config(&self.opts)?)?;
        // gobgpd refuses to start if a killed predecessor left its API socket.
        let _ = std::fs::remove_file(self.sock_path());
        let mut cmd = Command::new("gobgpd");
        cmd.arg("-f")
            .arg(self.conf_path())
            .arg(format!("--api-hosts=unix://{}", self.sock_path().display()))
            .args(["--pprof-disable", "-p", "-l", "info"]);
        if graceful {
            cmd.arg("-r");
        }
        let mut p = Process::spawn(KIND, cmd, &self.dir.join("gobgpd.log"))?;
        let addrs = self.local_addrs();
        let sock = self.sock_path();
        p.wait_ready("API socket and BGP listeners", STARTUP_TIMEOUT, || {
            cli(&sock, &["global".to_string()]).map_err(|e| e.to_string())?;
            match addrs.iter().find(|a| !is_listening(**a, 179)) {
                Some(a) => Err(format!("not listening on {a}:179 yet")),
                None => Ok(()),
            }
        })?;
        self.process = Some(p);
        for r in self.routes.values() {
            cli(&self.sock_path(), &rib_add_args(r, &self.opts)?)?;
        }
        Ok(())
    }

    /// Runs `gobgp --target unix://<sock> -j <args>`; returns its stdout.
    pub fn cli(&self, args: &[&str]) -> Result<String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        cli(&self.sock_path(), &args)
    }

    /// Kills gobgpd with SIGKILL: no NOTIFICATION, the kernel closes its connections, as
    /// when a router crashes or restarts its control plane.
    pub fn crash(&mut self) -> Result<()> {
        if let Some(mut p) = self.process.take() {
            p.kill()?;
        }
        Ok(())
    }

    /// Starts gobgpd after [`Gobgp::crash`] as a graceful restart (`-r`: Restart State
    /// set in its GR capability), and injects its routes again.
    pub fn start_graceful(&mut self) -> Result<()> {
        self.ensure_stopped()?;
        self.spawn(true)
    }

    fn ensure_stopped(&self) -> Result<()> {
        if self.process.is_some() {
            return Err(HarnessError::Config("gobgp is already running".into()));
        }
        Ok(())
    }

    /// `neighbor X enable`: undoes [`BgpDaemon::shutdown_neighbor`].
    pub fn enable_neighbor(&mut self, neighbor: IpAddr) -> Result<()> {
        self.opts.neighbor_for(KIND, neighbor)?;
        self.cli(&["neighbor", &neighbor.to_string(), "enable"])?;
        Ok(())
    }

    /// Messages received from and sent to `neighbor` since gobgpd started.
    pub fn message_counts(&self, neighbor: IpAddr) -> Result<(MessageCounts, MessageCounts)> {
        let v = self.neighbor_json(neighbor)?;
        let counts = |dir: &str| {
            let get = |k: &str| {
                v.pointer(&format!("/state/messages/{dir}/{k}"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
            };
            MessageCounts {
                open: get("open"),
                update: get("update"),
                notification: get("notification"),
                keepalive: get("keepalive"),
                total: get("total"),
            }
        };
        Ok((counts("received"), counts("sent")))
    }

    fn neighbor_json(&self, neighbor: IpAddr) -> Result<Value> {
        self.opts.neighbor_for(KIND, neighbor)?;
        let text = self.cli(&["-j", "neighbor", &neighbor.to_string()])?;
        serde_json::from_str(&text).map_err(|e| HarnessError::parse("gobgp neighbor json", e))
    }
}

impl BgpDaemon for Gobgp {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn dir(&self) -> PathBuf {
        self.dir.clone()
    }

    fn session_state(&self, neighbor: IpAddr) -> Result<PeerState> {
        parse_neighbor(&self.neighbor_json(neighbor)?)
    }

    /// `gobgp -j neighbor X adj-in -a <afi>`: what the neighbor sent, before policy;
    /// `stale` is GoBGP's own mark.
    fn routes(&self, neighbor: IpAddr, afi: Afi) -> Result<Vec<Route>> {
        self.opts.neighbor_for(KIND, neighbor)?;
        let text = self.cli(&[
            "-j",
            "neighbor",
            &neighbor.to_string(),
            "adj-in",
            "-a",
            &afi.to_string(),
        ])?;
        parse_rib(&text)
    }

    fn announce(&mut self, route: Announce) -> Result<()> {
        let args = rib_add_args(&route, &self.opts)?;
        cli(&self.sock_path(), &args)?;
        self.routes.insert(route.prefix, route);
        Ok(())
    }

    fn withdraw(&mut self, prefix: IpNet) -> Result<()> {
        if self.routes.remove(&prefix).is_none() {
            return Err(HarnessError::Config(format!(
                "gobgp does not originate {prefix}"
            )));
        }
        let afi = Afi::of(&prefix).to_string();
        self.cli(&["global", "rib", "del", &prefix.to_string(), "-a", &afi])?;
        Ok(())
    }

    fn stop(&mut self) -> Result<()> {
        if let Some(mut p) = self.process.take() {
            p.stop()?;
        }
        Ok(())
    }

    /// After [`BgpDaemon::stop`] or [`Gobgp::crash`], as a fresh start.
    fn start_again(&mut self) -> Result<()> {
        self.ensure_stopped()?;
        self.spawn(false)
    }

    /// `neighbor X disable`: gobgpd sends Cease / Administrative Shutdown (RFC 4486).
    fn shutdown_neighbor(&mut self, neighbor: IpAddr) -> Result<()> {
        self.opts.neighbor_for(KIND, neighbor)?;
        self.cli(&["neighbor", &neighbor.to_string(), "disable"])?;
        Ok(())
    }

    fn log_tail(&self, lines: usize) -> String {
        super::process::tail_file(&self.dir.join("gobgpd.log"), lines)
    }
}

/// `gobgpd -d`: GoBGP's own check of a config text (written into `dir`); it rejects
/// unknown keys.
pub fn check_config(dir: &Path, text: &str) -> Result<()> {
    let path = dir.join("check-gobgpd.toml");
    write_file(&path, text)?;
    run_ok(
        Command::new("gobgpd").arg("-d").arg("-f").arg(&path),
        COMMAND_TIMEOUT,
    )?;
    Ok(())
}

fn cli(sock: &Path, args: &[String]) -> Result<String> {
    let mut cmd = Command::new("gobgp");
    cmd.arg(format!("--target=unix://{}", sock.display()));
    cmd.args(args);
    run_ok(&mut cmd, COMMAND_TIMEOUT)
}

/// `global rib add <prefix> origin .. [aspath ..] nexthop .. [med ..] [local-pref ..]
/// [community ..] [large-community ..] -a <afi>`; replaces an earlier path of the prefix.
fn rib_add_args(r: &Announce, opts: &GobgpOpts) -> Result<Vec<String>> {
    let mut a: Vec<String> = ["global", "rib", "add"].map(String::from).to_vec();
    a.push(r.prefix.to_string());
    a.extend(["origin".into(), r.origin.keyword().into()]);
    if !r.as_path.is_empty() {
        let path: Vec<String> = r.as_path.iter().map(u32::to_string).collect();
        a.extend(["aspath".into(), path.join(",")]);
    }
    a.extend(["nexthop".into(), r.resolved_next_hop(opts)?.to_string()]);
    if let Some(m) = r.med {
        a.extend(["med".into(), m.to_string()]);
    }
    if let Some(lp) = r.local_pref {
        a.extend(["local-pref".into(), lp.to_string()]);
    }
    if !r.communities.is_empty() {
        let c: Vec<String> = r
            .communities
            .iter()
            .map(|(x, y)| format!("{x}:{y}"))
            .collect();
        a.extend(["community".into(), c.join(",")]);
    }
    if !r.large_communities.is_empty() {
        let c: Vec<String> = r
            .large_communities
            .iter()
            .map(|(x, y, z)| format!("{x}:{y}:{z}"))
            .collect();
        a.extend(["large-community".into(), c.join(",")]);
    }
    a.extend(["-a".into(), Afi::of(&r.prefix).to_string()]);
    Ok(a)
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The whole `gobgpd.toml` for `opts` (routes are injected separately).
pub fn render_config(opts: &GobgpOpts) -> Result<String> {
    let mut c = String::new();
    let mut locals = vec![toml_str(&opts.local_addr.to_string())];
    if let Some(a) = opts.local_addr6 {
        locals.push(toml_str(&a.to_string()));
    }
    let _ = writeln!(
        c,
        "[global.config]\n  as = {}\n  router-id = \"{}\"\n  local-address-list = [{}]",
        opts.local_as,
        opts.router_id,
        locals.join(", ")
    );
    for n in &opts.neighbors {
        let _ = writeln!(
            c,
            "[[neighbors]]\n  [neighbors.config]\n    neighbor-address = \"{}\"\n    peer-as = {}",
            n.addr, n.asn
        );
        if let Some(pw) = &n.password {
            let _ = writeln!(c, "    auth-password = {}", toml_str(pw));
        }
        let _ = writeln!(
            c,
            "  [neighbors.transport.config]\n    local-address = \"{}\"",
            opts.source_for(n)?
        );
        if n.passive {
            c.push_str("    passive-mode = true\n");
        }
        let _ = writeln!(
            c,
            "  [neighbors.timers.config]\n    connect-retry = 1\n    hold-time = {}\n    \
             keepalive-interval = {}\n    idle-hold-time-after-reset = 1",
            n.hold_time,
            n.keepalive().max(1)
        );
        if let Some(ttl) = n.multihop {
            let _ = writeln!(
                c,
                "  [neighbors.ebgp-multihop.config]\n    enabled = true\n    multihop-ttl = {ttl}"
            );
        }
        if let Some(t) = n.graceful_restart {
            let _ = writeln!(
                c,
                "  [neighbors.graceful-restart.config]\n    enabled = true\n    restart-time = {t}"
            );
        }
        for afi in n.families() {
            let _ = writeln!(
                c,
                "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      \
                 afi-safi-name = \"{afi}-unicast\""
            );
            if n.graceful_restart.is_some() {
                c.push_str(
                    "    [neighbors.afi-safis.mp-graceful-restart.config]\n      enabled = true\n",
                );
            }
        }
    }
    Ok(c)
}

/// `gobgp -j neighbor X`: `state.session_state` (a number in 3.x, 6 = established; a
/// name in some versions), `timers.state.uptime.seconds` (epoch of establishment).
pub fn parse_neighbor(v: &Value) -> Result<PeerState> {
    let raw_state = v
        .pointer("/state/session_state")
        .ok_or_else(|| HarnessError::parse("gobgp neighbor json", "no state.session_state"))?;
    let (state, raw) = match raw_state {
        Value::Number(n) => {
            let s = match n.as_u64() {
                Some(2) => SessionState::Connect,
                Some(3) => SessionState::Active,
                Some(4) => SessionState::OpenSent,
                Some(5) => SessionState::OpenConfirm,
                Some(6) => SessionState::Established,
                _ => SessionState::Idle,
            };
            (s, n.to_string())
        }
        Value::String(s) => {
            let st = match s.to_ascii_lowercase().as_str() {
                "connect" => SessionState::Connect,
                "active" => SessionState::Active,
                "opensent" => SessionState::OpenSent,
                "openconfirm" => SessionState::OpenConfirm,
                "established" => SessionState::Established,
                _ => SessionState::Idle,
            };
            (st, s.clone())
        }
        other => return Err(HarnessError::parse("gobgp session_state", other)),
    };
    let uptime = match state {
        SessionState::Established => v
            .pointer("/timers/state/uptime/seconds")
            .and_then(Value::as_f64)
            .map(super::uptime_since),
        _ => None,
    };
    Ok(PeerState {
        state,
        raw,
        uptime,
        last_error: None,
    })
}

/// `gobgp -j ... adj-in` / `global rib`: `{prefix: [path, ...]}`, each path with
/// `attrs` as GoBGP's typed attribute list (type codes from IANA "BGP Path Attributes").
pub fn parse_rib(text: &str) -> Result<Vec<Route>> {
    let text = text.trim();
    if text.is_empty() || text == "null" {
        return Ok(Vec::new());
    }
    let v: Value =
        serde_json::from_str(text).map_err(|e| HarnessError::parse("gobgp rib json", e))?;
    let Some(table) = v.as_object() else {
        return Err(HarnessError::parse("gobgp rib json", text));
    };
    let mut out = Vec::new();
    for (prefix, paths) in table {
        let prefix: IpNet = prefix
            .parse()
            .map_err(|e| HarnessError::parse(format!("gobgp prefix {prefix:?}"), e))?;
        for p in paths.as_array().into_iter().flatten() {
            out.push(parse_path(prefix, p)?);
        }
    }
    Ok(out)
}

fn parse_path(prefix: IpNet, p: &Value) -> Result<Route> {
    let bad = |what: &str| HarnessError::parse(format!("gobgp {what} of {prefix}"), p);
    let mut r = Route {
        prefix,
        next_hop: match prefix {
            IpNet::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            IpNet::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        },
        as_path: Vec::new(),
        local_pref: None,
        med: None,
        communities: Vec::new(),
        large_communities: Vec::new(),
        origin: Origin::Incomplete,
        stale: p.get("stale").and_then(Value::as_bool).unwrap_or(false),
    };
    let as_u32 = |v: Option<&Value>| {
        v.and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
    };
    for a in p
        .get("attrs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match a.get("type").and_then(Value::as_u64) {
            // ORIGIN (RFC 4271 section 5.1.1)
            Some(1) => {
                r.origin = match a.get("value").and_then(Value::as_u64) {
                    Some(0) => Origin::Igp,
                    Some(1) => Origin::Egp,
                    Some(2) => Origin::Incomplete,
                    _ => return Err(bad("origin")),
                }
            }
            // AS_PATH
            Some(2) => {
                for seg in a
                    .get("as_paths")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    for asn in seg
                        .get("asns")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        r.as_path
                            .push(as_u32(Some(asn)).ok_or_else(|| bad("as path"))?);
                    }
                }
            }
            // NEXT_HOP, and MP_REACH_NLRI's next hop (RFC 4760)
            Some(3) | Some(14) => {
                let nh = a
                    .get("nexthop")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("next hop"))?;
                r.next_hop = nh.parse().map_err(|_| bad("next hop"))?;
            }
            // MULTI_EXIT_DISC
            Some(4) => r.med = Some(as_u32(a.get("metric")).ok_or_else(|| bad("med"))?),
            // LOCAL_PREF
            Some(5) => {
                r.local_pref = Some(as_u32(a.get("value")).ok_or_else(|| bad("local pref"))?)
            }
            // COMMUNITIES (RFC 1997), each as one 32-bit number
            Some(8) => {
                for c in a
                    .get("communities")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let c = as_u32(Some(c)).ok_or_else(|| bad("community"))?;
                    r.communities.push(((c >> 16) as u16, (c & 0xffff) as u16));
                }
            }
            // LARGE_COMMUNITY (RFC 8092)
            Some(32) => {
                for c in a
                    .get("value")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let f = |k: &str| as_u32(c.get(k)).ok_or_else(|| bad("large community"));
                    r.large_communities
                        .push((f("ASN")?, f("LocalData1")?, f("LocalData2")?));
                }
            }
            _ => {}
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn adj_in_json_is_parsed() {
        // Real gobgp 3.10 output: FRR 100.64.0.4 as the neighbor.
        let text = r#"{"192.0.2.0/24":[{"nlri":{"prefix":"192.0.2.0/24"},"age":1795307790,"best":false,"attrs":[{"type":1,"value":0},{"type":2,"as_paths":[{"segment_type":2,"num":1,"asns":[65004]}]},{"type":3,"nexthop":"100.64.0.4"},{"type":4,"metric":0},{"type":5,"value":120},{"type":8,"communities":[4259905636,4259905736]},{"type":32,"value":[{"ASN":65001,"LocalData1":1,"LocalData2":2}]}],"stale":true,"source-id":"100.64.0.4","neighbor-ip":"100.64.0.4"}],"2001:db8:4::/48":[{"nlri":{"prefix":"2001:db8:4::/48"},"attrs":[{"type":1,"value":2},{"type":2,"as_paths":[{"segment_type":2,"num":1,"asns":[65004]}]},{"type":14,"nexthop":"fd00::4","afi":2,"safi":1,"value":[{"prefix":"2001:db8:4::/48"}]}],"stale":false}]}"#;
        let mut routes = parse_rib(text).unwrap();
        routes.sort_by_key(|r| r.prefix);
        assert_eq!(
            routes[0],
            Route {
                prefix: "192.0.2.0/24".parse().unwrap(),
                next_hop: "100.64.0.4".parse().unwrap(),
                as_path: vec![65004],
                local_pref: Some(120),
                med: Some(0),
                communities: vec![(65001, 100), (65001, 200)],
                large_communities: vec![(65001, 1, 2)],
                origin: Origin::Igp,
                stale: true,
            }
        );
        assert_eq!(routes[1].next_hop, "fd00::4".parse::<IpAddr>().unwrap());
        assert_eq!(routes[1].origin, Origin::Incomplete);
        assert!(parse_rib("{}").unwrap().is_empty());
        assert!(parse_rib("").unwrap().is_empty());
    }

    #[test]
    fn neighbor_json_state_and_uptime() {
        let v: Value = serde_json::from_str(
            r#"{"state":{"session_state":6},"timers":{"state":{"uptime":{"seconds":1}}}}"#,
        )
        .unwrap();
        let s = parse_neighbor(&v).unwrap();
        assert!(s.established());
        assert!(s.uptime.unwrap() > Duration::from_secs(1_000_000));
        let v: Value = serde_json::from_str(r#"{"state":{"session_state":3}}"#).unwrap();
        assert_eq!(parse_neighbor(&v).unwrap().state, SessionState::Active);
    }
}
