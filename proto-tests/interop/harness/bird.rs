//! BIRD 2 (tested with 2.0.12): config generation, the process, and its control socket.
//!
//! BIRD has no JSON output: state and routes are parsed from the text of `show protocols
//! all` and `show route all`, read straight from the control socket (line protocol:
//! `DDDD-text` continues a reply, `DDDD text` ends it, ` text` continues a line; codes
//! 8xxx and 9xxx are errors), which avoids a `birdc` process per poll and gives exact
//! error codes.
//!
//! Graceful restart: BIRD 2.0.x marks a route stale in `show route` (the `s` after the
//! preference, "(100s)") only for long-lived GR (the LLGR_STALE community). During a
//! regular restart it shows "Neighbor GR: Regular" on each channel it holds routes for
//! until the peer's End-of-RIB; [`Bird::routes`] reports every route of such a channel
//! as stale. That is exactly RFC 4724's stale set while the peer is down; after it
//! reconnects and before its End-of-RIB, routes it re-sent are reported stale too.
//!
//! Peers on lo need `multihop` and an IGP table resolving next hops via lo (PEERS.md):
//! every session gets `multihop` (1 unless the neighbor says) and the tables
//! `hx_igp4`/`hx_igp6`. A route whose next hop is BIRD's own address shows as
//! unreachable but keeps its attributes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use ipnet::IpNet;

use super::process::{
    fresh_subdir, is_listening, run_ok, write_file, Process, COMMAND_TIMEOUT, STARTUP_TIMEOUT,
};
use super::{
    Afi, Announce, BgpDaemon, BirdOpts, HarnessError, Neighbor, Origin, PeerState, Result, Route,
    SessionState,
};

const KIND: &str = "bird";

/// A running BIRD.
#[derive(Debug)]
pub struct Bird {
    dir: PathBuf,
    opts: BirdOpts,
    /// Originated routes by prefix: rendered into the config at every (re)start and
    /// `configure`.
    routes: BTreeMap<IpNet, Announce>,
    process: Option<Process>,
}

impl Bird {
    /// Writes `bird.conf` into a new `bird-<local_addr>` dir under `dir` and starts
    /// `bird -f`; returns once the control socket answers.
    pub fn start(dir: &Path, opts: BirdOpts) -> Result<Bird> {
        opts.validate()?;
        opts.refuse_extended_next_hop("bird")?;
        let dir = fresh_subdir(dir, &format!("bird-{}", opts.local_addr))?;
        let routes = opts.routes.iter().map(|r| (r.prefix, r.clone())).collect();
        let mut bird = Bird {
            dir,
            opts,
            routes,
            process: None,
        };
        bird.spawn()?;
        Ok(bird)
    }

    pub fn opts(&self) -> &BirdOpts {
        &self.opts
    }

    /// Pauses (SIGSTOP) or resumes (SIGCONT) BIRD: while paused it reads nothing from
    /// its sessions, so what a speaker sends waits in the kernel's socket buffers.
    pub fn pause(&mut self, paused: bool) {
        if let Some(p) = self.process.as_mut() {
            p.pause(paused);
        }
    }

    fn conf_path(&self) -> PathBuf {
        self.dir.join("bird.conf")
    }

    fn ctl_path(&self) -> PathBuf {
        self.dir.join("bird.ctl")
    }

    fn spawn(&mut self) -> Result<()> {
        let conf = render_config(&self.opts, self.routes.values())?;
        write_file(&self.conf_path(), &conf)?;
        // A SIGKILLed BIRD leaves its socket file; BIRD would fail to bind it.
        let _ = std::fs::remove_file(self.ctl_path());
        let mut cmd = Command::new("bird");
        cmd.arg("-f")
            .arg("-c")
            .arg(self.conf_path())
            .arg("-s")
            .arg(self.ctl_path());
        let mut p = Process::spawn(KIND, cmd, &self.dir.join("bird.log"))?;
        let ctl = self.ctl_path();
        let addrs = self.listen_addrs();
        p.wait_ready("control socket and BGP listeners", STARTUP_TIMEOUT, || {
            control(&ctl, "show status").map_err(|e| e.to_string())?;
            match addrs.iter().find(|a| !is_listening(**a, 179)) {
                Some(a) => Err(format!("not listening on {a}:179 yet")),
                None => Ok(()),
            }
        })?;
        self.process = Some(p);
        Ok(())
    }

    /// BIRD opens a listening socket per session source address once its protocols
    /// start (`strict bind`).
    fn listen_addrs(&self) -> Vec<IpAddr> {
        let mut v: Vec<IpAddr> = self
            .opts
            .neighbors
            .iter()
            .filter_map(|n| self.opts.source_for(n).ok())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Sends one command to the control socket; returns the reply's text lines.
    pub fn control(&self, command: &str) -> Result<String> {
        control(&self.ctl_path(), command)
    }

    /// `enable <protocol>`: undoes [`BgpDaemon::shutdown_neighbor`].
    pub fn enable_neighbor(&mut self, neighbor: IpAddr) -> Result<()> {
        self.opts.neighbor_for(KIND, neighbor)?;
        self.control(&format!("enable {}", proto_name(neighbor)))?;
        Ok(())
    }

    fn reconfigure(&mut self) -> Result<()> {
        let conf = render_config(&self.opts, self.routes.values())?;
        write_file(&self.conf_path(), &conf)?;
        self.control("configure")?;
        Ok(())
    }

    fn protocol(&self, neighbor: IpAddr) -> Result<BirdProtocol> {
        self.opts.neighbor_for(KIND, neighbor)?;
        let text = self.control(&format!("show protocols all {}", proto_name(neighbor)))?;
        parse_protocol(&text)
    }
}

impl BgpDaemon for Bird {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn dir(&self) -> PathBuf {
        self.dir.clone()
    }

    fn session_state(&self, neighbor: IpAddr) -> Result<PeerState> {
        let p = self.protocol(neighbor)?;
        let state = match p.bgp_state.as_str() {
            "Connect" => SessionState::Connect,
            "Active" => SessionState::Active,
            "OpenSent" => SessionState::OpenSent,
            "OpenConfirm" => SessionState::OpenConfirm,
            "Established" => SessionState::Established,
            // Idle, Close, Down and a disabled protocol's missing line.
            _ => SessionState::Idle,
        };
        let uptime = match (state, p.since) {
            (SessionState::Established, Some(since)) => Some(super::uptime_since(since)),
            _ => None,
        };
        Ok(PeerState {
            state,
            raw: p.bgp_state,
            uptime,
            last_error: p.last_error,
        })
    }

    /// `show route all protocol <neighbor's protocol>`, the routes of `afi`; `stale`
    /// per the module doc.
    fn routes(&self, neighbor: IpAddr, afi: Afi) -> Result<Vec<Route>> {
        let proto = self.protocol(neighbor)?;
        let text = self.control(&format!("show route all protocol {}", proto_name(neighbor)))?;
        let channel_in_gr = proto
            .channel_gr
            .iter()
            .any(|(a, gr)| *a == afi && gr != "None");
        let mut routes = parse_routes(&text)?;
        routes.retain(|r| Afi::of(&r.prefix) == afi);
        if channel_in_gr {
            for r in &mut routes {
                r.stale = true;
            }
        }
        Ok(routes)
    }

    fn announce(&mut self, route: Announce) -> Result<()> {
        route.resolved_next_hop(&self.opts)?;
        self.routes.insert(route.prefix, route);
        self.reconfigure()
    }

    fn withdraw(&mut self, prefix: IpNet) -> Result<()> {
        if self.routes.remove(&prefix).is_none() {
            return Err(HarnessError::Config(format!(
                "bird does not originate {prefix}"
            )));
        }
        self.reconfigure()
    }

    fn stop(&mut self) -> Result<()> {
        if let Some(mut p) = self.process.take() {
            p.stop()?;
        }
        Ok(())
    }

    fn start_again(&mut self) -> Result<()> {
        if self.process.is_some() {
            return Err(HarnessError::Config("bird is already running".into()));
        }
        self.spawn()
    }

    /// `disable <protocol>`: BIRD sends Cease / Administrative Shutdown (RFC 4486).
    fn shutdown_neighbor(&mut self, neighbor: IpAddr) -> Result<()> {
        self.opts.neighbor_for(KIND, neighbor)?;
        self.control(&format!("disable {}", proto_name(neighbor)))?;
        Ok(())
    }

    fn log_tail(&self, lines: usize) -> String {
        super::process::tail_file(&self.dir.join("bird.log"), lines)
    }
}

/// `bird -p -c`: BIRD's own parse check of a config text (written into `dir`).
pub fn check_config(dir: &Path, text: &str) -> Result<()> {
    let path = dir.join("check-bird.conf");
    write_file(&path, text)?;
    run_ok(
        Command::new("bird").arg("-p").arg("-c").arg(&path),
        COMMAND_TIMEOUT,
    )?;
    Ok(())
}

/// The BGP protocol BIRD runs for a neighbor: `n_100_64_0_1`, `n_fd00__1`.
pub fn proto_name(neighbor: IpAddr) -> String {
    let s: String = neighbor
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("n_{s}")
}

/// The whole `bird.conf` for `opts` originating `routes`.
pub fn render_config<'a>(
    opts: &BirdOpts,
    routes: impl IntoIterator<Item = &'a Announce>,
) -> Result<String> {
    let routes: Vec<&Announce> = routes.into_iter().collect();
    let mut c = String::new();
    let _ = writeln!(c, "router id {};", opts.router_id);
    c.push_str("log stderr all;\n");
    // Epoch seconds in `show protocols`, so session uptime can be computed.
    c.push_str("timeformat protocol \"%s\";\n");
    c.push_str("ipv4 table hx_igp4;\nipv6 table hx_igp6;\n");
    c.push_str("protocol device {}\n");
    c.push_str("protocol static hx_nh4 { ipv4 { table hx_igp4; }; route 0.0.0.0/0 via \"lo\"; }\n");
    c.push_str("protocol static hx_nh6 { ipv6 { table hx_igp6; }; route ::/0 via \"lo\"; }\n");
    for (afi, name) in [(Afi::Ipv4, "4"), (Afi::Ipv6, "6")] {
        let _ = writeln!(c, "protocol static hx_o{name} {{\n  {afi};");
        for r in routes.iter().filter(|r| Afi::of(&r.prefix) == afi) {
            let _ = writeln!(c, "  route {} blackhole;", r.prefix);
        }
        c.push_str("}\n");
        // Attributes are set in the export filter, not on the static route: BIRD keeps a
        // MED on eBGP export only if the export filter set it.
        let _ = writeln!(
            c,
            "filter hx_out{name} {{\n  if proto != \"hx_o{name}\" then reject;"
        );
        for r in routes.iter().filter(|r| Afi::of(&r.prefix) == afi) {
            let _ = writeln!(c, "  if net = {} then {{", r.prefix);
            for asn in r.as_path.iter().rev() {
                let _ = writeln!(c, "    bgp_path.prepend({asn});");
            }
            let _ = writeln!(c, "    bgp_next_hop = {};", r.resolved_next_hop(opts)?);
            let origin = match r.origin {
                Origin::Igp => "ORIGIN_IGP",
                Origin::Egp => "ORIGIN_EGP",
                Origin::Incomplete => "ORIGIN_INCOMPLETE",
            };
            let _ = writeln!(c, "    bgp_origin = {origin};");
            if let Some(med) = r.med {
                let _ = writeln!(c, "    bgp_med = {med};");
            }
            if let Some(lp) = r.local_pref {
                let _ = writeln!(c, "    bgp_local_pref = {lp};");
            }
            for (a, b) in &r.communities {
                let _ = writeln!(c, "    bgp_community.add(({a},{b}));");
            }
            for (a, b, d) in &r.large_communities {
                let _ = writeln!(c, "    bgp_large_community.add(({a},{b},{d}));");
            }
            c.push_str("  }\n");
        }
        c.push_str("  accept;\n}\n");
    }
    for n in &opts.neighbors {
        render_neighbor(&mut c, opts, n)?;
    }
    Ok(c)
}

fn render_neighbor(c: &mut String, opts: &BirdOpts, n: &Neighbor) -> Result<()> {
    let _ = writeln!(c, "protocol bgp {} {{", proto_name(n.addr));
    let _ = writeln!(
        c,
        "  local {} port 179 as {};",
        opts.source_for(n)?,
        opts.local_as
    );
    let _ = writeln!(c, "  neighbor {} port 179 as {};", n.addr, n.asn);
    let _ = writeln!(
        c,
        "  strict bind yes;\n  multihop {};",
        n.multihop.unwrap_or(1)
    );
    c.push_str("  connect delay time 1;\n  connect retry time 2;\n  error wait time 1, 5;\n");
    let _ = writeln!(
        c,
        "  hold time {};\n  keepalive time {};",
        n.hold_time,
        n.keepalive().max(1)
    );
    if n.passive {
        c.push_str("  passive on;\n");
    }
    if let Some(pw) = &n.password {
        let _ = writeln!(c, "  password \"{}\";", escape(pw));
    }
    if let Some(t) = n.graceful_restart {
        let _ = writeln!(c, "  graceful restart on;\n  graceful restart time {t};");
    }
    for afi in n.families() {
        let name = match afi {
            Afi::Ipv4 => "4",
            Afi::Ipv6 => "6",
        };
        let _ = writeln!(
            c,
            "  {afi} {{ import all; export filter hx_out{name}; igp table hx_igp{name}; next hop keep; }};"
        );
    }
    c.push_str("}\n");
    Ok(())
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// One command over BIRD's control socket, bounded by [`COMMAND_TIMEOUT`] per read.
pub fn control(ctl: &Path, command: &str) -> Result<String> {
    let what = || format!("birdc -s {} {command}", ctl.display());
    let io = |e| HarnessError::io(what(), e);
    let stream = UnixStream::connect(ctl).map_err(io)?;
    stream.set_read_timeout(Some(COMMAND_TIMEOUT)).map_err(io)?;
    stream
        .set_write_timeout(Some(COMMAND_TIMEOUT))
        .map_err(io)?;
    let mut writer = stream.try_clone().map_err(io)?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).map_err(io)?;
    if !line.starts_with("0001 ") {
        return Err(HarnessError::parse(what(), format!("greeting {line:?}")));
    }
    writer
        .write_all(format!("{command}\n").as_bytes())
        .map_err(io)?;
    let mut body = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).map_err(io)? == 0 {
            return Err(HarnessError::parse(what(), "connection closed mid-reply"));
        }
        let l = line.trim_end_matches('\n');
        match reply_line(l) {
            ReplyLine::More(text) => {
                body.push_str(text);
                body.push('\n');
            }
            ReplyLine::End(code, text) => {
                if code >= 8000 {
                    return Err(HarnessError::Command {
                        command: what(),
                        status: format!("BIRD reply {code}"),
                        output: format!("{body}{text}"),
                    });
                }
                if !text.trim().is_empty() {
                    body.push_str(text);
                    body.push('\n');
                }
                return Ok(body);
            }
        }
    }
}

enum ReplyLine<'a> {
    More(&'a str),
    End(u32, &'a str),
}

fn reply_line(l: &str) -> ReplyLine<'_> {
    let code = l
        .get(..4)
        .filter(|c| c.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|c| c.parse::<u32>().ok());
    match (code, l.as_bytes().get(4)) {
        (Some(code), Some(b' ')) => ReplyLine::End(code, &l[5..]),
        (Some(_), Some(b'-')) => ReplyLine::More(&l[5..]),
        (Some(code), None) => ReplyLine::End(code, ""),
        // A continuation line: one space, then the text.
        _ => ReplyLine::More(l.strip_prefix(' ').unwrap_or(l)),
    }
}

/// What `show protocols all <bgp protocol>` says.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BirdProtocol {
    /// The protocol state column: up, start, down...
    pub proto_state: String,
    /// Epoch seconds of the last state change (`timeformat protocol "%s"`).
    pub since: Option<f64>,
    /// "BGP state:" (Idle when absent, e.g. disabled).
    pub bgp_state: String,
    pub last_error: Option<String>,
    /// "Neighbor graceful restart active".
    pub gr_active: bool,
    /// Per channel, its "Neighbor GR:" value (Regular, Long-lived, None).
    pub channel_gr: Vec<(Afi, String)>,
}

pub fn parse_protocol(text: &str) -> Result<BirdProtocol> {
    let mut p = BirdProtocol {
        bgp_state: "Idle".into(),
        ..Default::default()
    };
    let mut lines = text.lines();
    let header = lines
        .by_ref()
        .find(|l| l.starts_with("Name "))
        .ok_or_else(|| HarnessError::parse("bird show protocols", text))?;
    let _ = header;
    let row = lines
        .next()
        .ok_or_else(|| HarnessError::parse("bird show protocols", text))?;
    let cols: Vec<&str> = row.split_whitespace().collect();
    if cols.len() < 5 {
        return Err(HarnessError::parse("bird protocol row", row));
    }
    p.proto_state = cols[3].to_string();
    p.since = cols[4].parse().ok();
    let mut channel = None;
    for l in lines {
        let t = l.trim();
        if let Some(v) = t.strip_prefix("BGP state:") {
            p.bgp_state = v.trim().to_string();
        } else if let Some(v) = t.strip_prefix("Last error:") {
            p.last_error = Some(v.trim().to_string());
        } else if t == "Neighbor graceful restart active" {
            p.gr_active = true;
        } else if let Some(v) = t.strip_prefix("Channel ") {
            channel = match v.trim() {
                "ipv4" => Some(Afi::Ipv4),
                "ipv6" => Some(Afi::Ipv6),
                _ => None,
            };
        } else if let (Some(v), Some(afi)) = (t.strip_prefix("Neighbor GR:"), channel) {
            p.channel_gr.push((afi, v.trim().to_string()));
        }
    }
    Ok(p)
}

/// Parses `show route all` text: a header line per route, then tab-indented attribute
/// lines.
pub fn parse_routes(text: &str) -> Result<Vec<Route>> {
    let mut routes = Vec::new();
    let mut cur: Option<Route> = None;
    let mut last_prefix: Option<IpNet> = None;
    for l in text.lines() {
        if l.starts_with("Table ") || l.trim().is_empty() {
            continue;
        }
        if let Some(attr) = l.strip_prefix('\t') {
            if let Some(r) = cur.as_mut() {
                apply_attr(r, attr.trim())?;
            }
            continue;
        }
        // A route header: `<prefix> <how> [<proto> <time> from <addr>] * (<pref>[s]) ...`,
        // the prefix left blank for a further route to the same prefix.
        if let Some(r) = cur.take() {
            routes.push(r);
        }
        let prefix = if l.starts_with(' ') {
            last_prefix.ok_or_else(|| HarnessError::parse("bird route line", l))?
        } else {
            let p = l.split_whitespace().next().unwrap_or_default();
            p.parse::<IpNet>()
                .map_err(|e| HarnessError::parse(format!("bird route prefix {p:?}"), e))?
        };
        last_prefix = Some(prefix);
        let llgr_stale = l
            .split('(')
            .nth(1)
            .and_then(|s| s.split(')').next())
            .is_some_and(|pref| pref.contains('s'));
        cur = Some(Route {
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
            stale: llgr_stale,
        });
    }
    if let Some(r) = cur {
        routes.push(r);
    }
    Ok(routes)
}

fn apply_attr(r: &mut Route, attr: &str) -> Result<()> {
    let Some((name, value)) = attr.split_once(':') else {
        return Ok(());
    };
    let value = value.trim();
    let bad = |what: &str| HarnessError::parse(format!("bird {what} of {}", r.prefix), value);
    match name {
        "BGP.origin" => {
            r.origin = match value {
                "IGP" => Origin::Igp,
                "EGP" => Origin::Egp,
                "Incomplete" => Origin::Incomplete,
                _ => return Err(bad("origin")),
            }
        }
        "BGP.as_path" => {
            r.as_path = value
                .split(|c: char| c.is_whitespace() || "{}()".contains(c))
                .filter(|t| !t.is_empty())
                .map(|t| t.parse::<u32>())
                .collect::<std::result::Result<_, _>>()
                .map_err(|_| bad("as_path"))?;
        }
        "BGP.next_hop" => {
            // IPv6 may show "global link-local"; the global one is first.
            let first = value.split_whitespace().next().unwrap_or_default();
            r.next_hop = first.parse().map_err(|_| bad("next_hop"))?;
        }
        "BGP.med" => r.med = Some(value.parse().map_err(|_| bad("med"))?),
        "BGP.local_pref" => r.local_pref = Some(value.parse().map_err(|_| bad("local_pref"))?),
        "BGP.community" => {
            r.communities = tuples(value)
                .map(|t| super::parse_community(&t.replace(',', ":")))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("community"))?;
        }
        "BGP.large_community" => {
            r.large_communities = tuples(value)
                .map(|t| super::parse_large_community(&t.replace(',', ":")))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("large_community"))?;
        }
        _ => {}
    }
    Ok(())
}

/// The insides of `(a,b) (c, d, e)` groups.
fn tuples(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(')')
        .map(|t| t.trim().trim_start_matches('(').replace(' ', ""))
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real BIRD 2.0.12 output (through the control socket, prefixes stripped), with
    // GoBGP 100.64.0.1 as the neighbor.
    const ROUTES: &str = "Table master4:\n\
198.51.100.0/24      unreachable [n1 00:36:15.237 from 100.64.0.1] * (100) [AS65001i]\n\
\tType: BGP univ\n\
\tBGP.origin: IGP\n\
\tBGP.as_path: 65001 64999\n\
\tBGP.next_hop: 100.64.0.1\n\
\tBGP.med: 50\n\
\tBGP.local_pref: 100\n\
\tBGP.community: (65001,100) (65001,200)\n\
\tBGP.large_community: (65001, 1, 2)\n\
203.0.113.0/24       unreachable [n1 00:36:15.260 from 100.64.0.1] * (100s) [AS65001?]\n\
\tType: BGP univ\n\
\tBGP.origin: Incomplete\n\
\tBGP.as_path: 65001 {64512 64513}\n\
\tBGP.next_hop: 100.64.0.1\n\
\tBGP.local_pref: 100\n\
\n\
Table master6:\n\
2001:db8:1::/48      unreachable [n1 00:36:15.247 from 100.64.0.1] * (100) [AS65001?]\n\
\tType: BGP univ\n\
\tBGP.origin: Incomplete\n\
\tBGP.as_path: 65001\n\
\tBGP.next_hop: fd00::1 fe80::1\n\
\tBGP.local_pref: 100\n\
\tBGP.community: (65001,300)\n";

    #[test]
    fn show_route_all_parses_every_attribute() {
        let routes = parse_routes(ROUTES).unwrap();
        assert_eq!(routes.len(), 3);
        assert_eq!(
            routes[0],
            Route {
                prefix: "198.51.100.0/24".parse().unwrap(),
                next_hop: "100.64.0.1".parse().unwrap(),
                as_path: vec![65001, 64999],
                local_pref: Some(100),
                med: Some(50),
                communities: vec![(65001, 100), (65001, 200)],
                large_communities: vec![(65001, 1, 2)],
                origin: Origin::Igp,
                stale: false,
            }
        );
        assert_eq!(routes[1].as_path, vec![65001, 64512, 64513]);
        assert_eq!(routes[1].origin, Origin::Incomplete);
        assert!(routes[1].stale, "(100s) is BIRD's stale mark");
        assert_eq!(routes[2].next_hop, "fd00::1".parse::<IpAddr>().unwrap());
        assert_eq!(routes[2].communities, vec![(65001, 300)]);
    }

    #[test]
    fn show_route_rejects_garbage_attributes() {
        let text = "10.0.0.0/8 unreachable [n1 00:00 from 100.64.0.1] * (100) [AS1i]\n\
\tBGP.as_path: 65001 x\n";
        assert!(parse_routes(text).is_err());
    }

    #[test]
    fn show_protocols_all_parses_state_and_graceful_restart() {
        // BIRD 2.0.12 while GoBGP was restarting (after SIGKILL).
        let text = "Name       Proto      Table      State  Since         Info\n\
n1         BGP        ---        start  1795308037    Active        Socket: Connection refused\n\
  BGP state:          Active\n\
    Neighbor address: 100.64.0.1\n\
    Neighbor graceful restart active\n\
    Last error:       Socket: Connection refused\n\
  Channel ipv4\n\
    State:          START\n\
    Neighbor GR:    Regular\n\
  Channel ipv6\n\
    State:          START\n\
    Neighbor GR:    None\n";
        let p = parse_protocol(text).unwrap();
        assert_eq!(p.bgp_state, "Active");
        assert_eq!(p.since, Some(1795308037.0));
        assert!(p.gr_active);
        assert_eq!(p.last_error.as_deref(), Some("Socket: Connection refused"));
        assert_eq!(
            p.channel_gr,
            vec![(Afi::Ipv4, "Regular".into()), (Afi::Ipv6, "None".into())]
        );
    }

    #[test]
    fn control_reply_lines_are_classified() {
        assert!(matches!(
            reply_line("0001 BIRD 2.0.12 ready."),
            ReplyLine::End(1, _)
        ));
        assert!(matches!(
            reply_line("1007-Table master4:"),
            ReplyLine::More("Table master4:")
        ));
        assert!(matches!(
            reply_line(" \tBGP.med: 5"),
            ReplyLine::More("\tBGP.med: 5")
        ));
        assert!(matches!(
            reply_line("9001 syntax error"),
            ReplyLine::End(9001, "syntax error")
        ));
        assert!(matches!(reply_line("0000"), ReplyLine::End(0, "")));
    }

    #[test]
    fn proto_names_are_bird_symbols() {
        assert_eq!(proto_name("100.64.0.1".parse().unwrap()), "n_100_64_0_1");
        assert_eq!(proto_name("fd00::1".parse().unwrap()), "n_fd00__1");
    }
}
