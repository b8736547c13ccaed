//! The values every implementation's driver speaks in: what to configure ([`PeerOpts`],
//! [`Neighbor`], [`Announce`]), what comes back ([`Route`], [`PeerState`]), the
//! [`BgpDaemon`] trait they share, the harness error and the polling helper. No process
//! or parsing code here.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ipnet::IpNet;

/// Everything that can go wrong while driving a real daemon. Carries enough context
/// (command, daemon, last observation, log tail) to tell a harness problem from a
/// speaker problem.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot run {program}: {source} (is it installed? scripts/install-peers installs \
         BIRD, FRR, GoBGP, ExaBGP and iproute2)"
    )]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {output}")]
    Command {
        command: String,
        status: String,
        output: String,
    },
    #[error("timed out after {waited:?} waiting for {what}; last seen: {last}")]
    Timeout {
        what: String,
        waited: Duration,
        last: String,
    },
    #[error("cannot parse {what}: {detail}")]
    Parse { what: String, detail: String },
    #[error("invalid harness configuration: {0}")]
    Config(String),
    #[error("{daemon} has no neighbor {neighbor}")]
    UnknownNeighbor {
        daemon: &'static str,
        neighbor: IpAddr,
    },
    #[error("{daemon} is not running")]
    NotRunning { daemon: &'static str },
    #[error("{what} stopped holding: {seen}")]
    NotHeld { what: String, seen: String },
}

pub type Result<T, E = HarnessError> = std::result::Result<T, E>;

impl HarnessError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        HarnessError::Io {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn parse(what: impl Into<String>, detail: impl fmt::Display) -> Self {
        HarnessError::Parse {
            what: what.into(),
            detail: detail.to_string(),
        }
    }
}

/// Address family identifier (IANA "Address Family Numbers": 1 IPv4, 2 IPv6); the SAFI is
/// always unicast (1) in this harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Afi {
    Ipv4,
    Ipv6,
}

impl Afi {
    pub fn of(prefix: &IpNet) -> Afi {
        match prefix {
            IpNet::V4(_) => Afi::Ipv4,
            IpNet::V6(_) => Afi::Ipv6,
        }
    }

    pub fn of_addr(addr: &IpAddr) -> Afi {
        match addr {
            IpAddr::V4(_) => Afi::Ipv4,
            IpAddr::V6(_) => Afi::Ipv6,
        }
    }
}

impl fmt::Display for Afi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Afi::Ipv4 => "ipv4",
            Afi::Ipv6 => "ipv6",
        })
    }
}

/// The ORIGIN path attribute (RFC 4271 section 5.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Origin {
    #[default]
    Igp,
    Egp,
    Incomplete,
}

impl Origin {
    /// The lowercase keyword GoBGP, FRR and ExaBGP all accept.
    pub fn keyword(self) -> &'static str {
        match self {
            Origin::Igp => "igp",
            Origin::Egp => "egp",
            Origin::Incomplete => "incomplete",
        }
    }
}

/// A route as one implementation holds it after receiving it from one neighbor: the
/// attributes of RFC 4271 section 5.1 the speaker controls, plus communities (RFC 1997)
/// and large communities (RFC 8092).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub prefix: IpNet,
    pub next_hop: IpAddr,
    /// AS_SEQUENCE members in order; an AS_SET's members are appended in the order shown.
    pub as_path: Vec<u32>,
    /// As the implementation shows it: BIRD fills in its default (100) for eBGP routes,
    /// FRR, GoBGP and ExaBGP show only a received LOCAL_PREF.
    pub local_pref: Option<u32>,
    pub med: Option<u32>,
    pub communities: Vec<(u16, u16)>,
    pub large_communities: Vec<(u32, u32, u32)>,
    pub origin: Origin,
    /// Kept as stale by a graceful-restart helper (RFC 4724 section 4.2). See each
    /// implementation's `routes` for how it is told.
    pub stale: bool,
}

/// Finding one route in a `routes()` answer.
pub trait RoutesExt {
    fn find(&self, prefix: &IpNet) -> Option<&Route>;
    fn has(&self, prefix: &IpNet) -> bool {
        self.find(prefix).is_some()
    }
    fn prefixes(&self) -> Vec<IpNet>;
}

impl RoutesExt for [Route] {
    fn find(&self, prefix: &IpNet) -> Option<&Route> {
        self.iter().find(|r| r.prefix == *prefix)
    }

    fn prefixes(&self) -> Vec<IpNet> {
        let mut v: Vec<IpNet> = self.iter().map(|r| r.prefix).collect();
        v.sort();
        v
    }
}

/// A route a daemon originates: given in [`PeerOpts::routes`] at start, or added with
/// [`BgpDaemon::announce`] at run time. Either way it is kept across `restart()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announce {
    pub prefix: IpNet,
    /// `None`: the daemon's own address of the prefix's family (`local_addr` or
    /// `local_addr6`).
    pub next_hop: Option<IpAddr>,
    /// ASes after the daemon's own (which it prepends on eBGP export).
    pub as_path: Vec<u32>,
    pub origin: Origin,
    pub med: Option<u32>,
    pub local_pref: Option<u32>,
    pub communities: Vec<(u16, u16)>,
    pub large_communities: Vec<(u32, u32, u32)>,
}

impl Announce {
    pub fn new(prefix: IpNet) -> Self {
        Announce {
            prefix,
            next_hop: None,
            as_path: Vec::new(),
            origin: Origin::Igp,
            med: None,
            local_pref: None,
            communities: Vec::new(),
            large_communities: Vec::new(),
        }
    }

    pub fn next_hop(mut self, next_hop: IpAddr) -> Self {
        self.next_hop = Some(next_hop);
        self
    }

    pub fn aspath(mut self, path: &[u32]) -> Self {
        self.as_path = path.to_vec();
        self
    }

    pub fn origin(mut self, origin: Origin) -> Self {
        self.origin = origin;
        self
    }

    pub fn med(mut self, med: u32) -> Self {
        self.med = Some(med);
        self
    }

    pub fn local_pref(mut self, local_pref: u32) -> Self {
        self.local_pref = Some(local_pref);
        self
    }

    pub fn communities(mut self, communities: &[(u16, u16)]) -> Self {
        self.communities = communities.to_vec();
        self
    }

    pub fn large_communities(mut self, large: &[(u32, u32, u32)]) -> Self {
        self.large_communities = large.to_vec();
        self
    }

    /// The next hop to put on the wire: the explicit one, or the daemon's own address.
    pub(crate) fn resolved_next_hop(&self, opts: &PeerOpts) -> Result<IpAddr> {
        if let Some(nh) = self.next_hop {
            return Ok(nh);
        }
        match self.prefix {
            IpNet::V4(_) => Ok(IpAddr::V4(opts.local_addr)),
            IpNet::V6(_) => opts.local_addr6.map(IpAddr::V6).ok_or_else(|| {
                HarnessError::Config(format!(
                    "route {} needs a next hop: set it or set local_addr6",
                    self.prefix
                ))
            }),
        }
    }
}

/// One BGP neighbor of a daemon under test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbor {
    /// The session's transport address; its family picks the daemon's local address.
    pub addr: IpAddr,
    pub asn: u32,
    /// TCP MD5 signature (RFC 2385).
    pub password: Option<String>,
    /// Graceful restart (RFC 4724) with this restart time, in seconds, for every
    /// family of the session. `None`: the implementation's default, which for BIRD
    /// ("aware") and FRR ("helper") is to keep a restarting peer's routes but not to
    /// preserve its own, and for GoBGP and ExaBGP is no GR capability at all.
    pub graceful_restart: Option<u16>,
    /// eBGP multihop TTL. BIRD needs multihop for peers on lo and uses 1 when unset.
    pub multihop: Option<u8>,
    /// Never open the connection, only accept it.
    pub passive: bool,
    /// Hold time in seconds; keepalive is a third of it.
    pub hold_time: u16,
    /// Negotiate IPv4 unicast (RFC 4760 multiprotocol capability).
    pub ipv4: bool,
    /// Negotiate IPv6 unicast (RFC 4760 / RFC 2545).
    pub ipv6: bool,
    /// Offer IPv4 unicast with an IPv6 next hop (RFC 8950, FRR's `capability
    /// extended-nexthop`). Only the FRR config renders it; `validate` refuses it for the
    /// others.
    pub extended_next_hop: bool,
}

impl Neighbor {
    /// Fast defaults for tests: hold time 9 s, IPv4 unicast only, active, no MD5, no GR.
    pub fn new(addr: IpAddr, asn: u32) -> Self {
        Neighbor {
            addr,
            asn,
            password: None,
            graceful_restart: None,
            multihop: None,
            passive: false,
            hold_time: 9,
            ipv4: true,
            ipv6: false,
            extended_next_hop: false,
        }
    }

    pub fn password(mut self, password: &str) -> Self {
        self.password = Some(password.to_string());
        self
    }

    pub fn graceful_restart(mut self, restart_time: u16) -> Self {
        self.graceful_restart = Some(restart_time);
        self
    }

    pub fn multihop(mut self, ttl: u8) -> Self {
        self.multihop = Some(ttl);
        self
    }

    pub fn passive(mut self) -> Self {
        self.passive = true;
        self
    }

    pub fn hold_time(mut self, secs: u16) -> Self {
        self.hold_time = secs;
        self
    }

    /// Negotiate IPv6 unicast as well.
    pub fn ipv6(mut self) -> Self {
        self.ipv6 = true;
        self
    }

    pub fn extended_next_hop(mut self) -> Self {
        self.extended_next_hop = true;
        self
    }

    /// Negotiate only IPv6 unicast.
    pub fn ipv6_only(mut self) -> Self {
        self.ipv4 = false;
        self.ipv6 = true;
        self
    }

    pub(crate) fn families(&self) -> Vec<Afi> {
        let mut v = Vec::new();
        if self.ipv4 {
            v.push(Afi::Ipv4);
        }
        if self.ipv6 {
            v.push(Afi::Ipv6);
        }
        v
    }

    pub(crate) fn keepalive(&self) -> u16 {
        self.hold_time / 3
    }
}

/// How to start any of the four implementations (`BirdOpts`, `FrrOpts`, `GobgpOpts` and
/// `ExabgpOpts` are this type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerOpts {
    pub router_id: Ipv4Addr,
    /// Source of IPv4 sessions, IPv4 listen address, default IPv4 next hop.
    pub local_addr: Ipv4Addr,
    /// Source of IPv6 sessions, IPv6 listen address, default IPv6 next hop.
    pub local_addr6: Option<Ipv6Addr>,
    pub local_as: u32,
    pub neighbors: Vec<Neighbor>,
    /// Routes to originate from the start.
    pub routes: Vec<Announce>,
}

impl PeerOpts {
    /// Router id and IPv4 address are the same `100.64.0.x` address.
    pub fn new(local_addr: IpAddr, local_as: u32) -> Self {
        let v4 = match local_addr {
            IpAddr::V4(a) => a,
            // A v6-only call site still needs a router id; tests always pass v4 here.
            IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
        };
        PeerOpts {
            router_id: v4,
            local_addr: v4,
            local_addr6: None,
            local_as,
            neighbors: Vec::new(),
            routes: Vec::new(),
        }
    }

    pub fn local_addr6(mut self, addr: IpAddr) -> Self {
        if let IpAddr::V6(a) = addr {
            self.local_addr6 = Some(a);
        }
        self
    }

    pub fn neighbor(mut self, neighbor: Neighbor) -> Self {
        self.neighbors.push(neighbor);
        self
    }

    pub fn route(mut self, route: Announce) -> Self {
        self.routes.push(route);
        self
    }

    pub(crate) fn neighbor_for(&self, daemon: &'static str, addr: IpAddr) -> Result<&Neighbor> {
        self.neighbors
            .iter()
            .find(|n| n.addr == addr)
            .ok_or(HarnessError::UnknownNeighbor {
                daemon,
                neighbor: addr,
            })
    }

    /// The local address a session to `neighbor` is sourced from.
    pub(crate) fn source_for(&self, neighbor: &Neighbor) -> Result<IpAddr> {
        match neighbor.addr {
            IpAddr::V4(_) => Ok(IpAddr::V4(self.local_addr)),
            IpAddr::V6(_) => self.local_addr6.map(IpAddr::V6).ok_or_else(|| {
                HarnessError::Config(format!(
                    "neighbor {} is IPv6 but local_addr6 is not set",
                    neighbor.addr
                ))
            }),
        }
    }

    /// Refuses options the config of `daemon` does not render (rather than ignoring them).
    pub(crate) fn refuse_extended_next_hop(&self, daemon: &str) -> Result<()> {
        match self.neighbors.iter().find(|n| n.extended_next_hop) {
            Some(n) => Err(HarnessError::Config(format!(
                "neighbor {}: extended next hop is only rendered for FRR, not {daemon}",
                n.addr
            ))),
            None => Ok(()),
        }
    }

    /// Checks what every implementation needs before writing a config.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.router_id.is_unspecified() || self.local_addr.is_unspecified() {
            return Err(HarnessError::Config(
                "router_id and local_addr must be set: PeerOpts::new takes the daemon's IPv4 \
                 address"
                    .into(),
            ));
        }
        for n in &self.neighbors {
            self.source_for(n)?;
            if !n.ipv4 && !n.ipv6 {
                return Err(HarnessError::Config(format!(
                    "neighbor {} negotiates no family",
                    n.addr
                )));
            }
            if let Some(pw) = &n.password {
                // One printable word quotes and escapes the same in all four configs.
                if pw.is_empty()
                    || !pw
                        .chars()
                        .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\')
                {
                    return Err(HarnessError::Config(format!(
                        "neighbor {}: password {pw:?} must be printable ASCII without quotes, \
                         backslashes or spaces",
                        n.addr
                    )));
                }
            }
            if n.hold_time != 0 && n.hold_time < 3 {
                return Err(HarnessError::Config(format!(
                    "neighbor {}: hold time {} must be 0 or at least 3 (RFC 4271 section 4.2)",
                    n.addr, n.hold_time
                )));
            }
        }
        for r in &self.routes {
            r.resolved_next_hop(self)?;
        }
        Ok(())
    }
}

pub type BirdOpts = PeerOpts;
pub type FrrOpts = PeerOpts;
pub type GobgpOpts = PeerOpts;
pub type ExabgpOpts = PeerOpts;

/// BGP finite state machine states (RFC 4271 section 8.2.2), as far as each
/// implementation reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    Idle,
    Connect,
    Active,
    OpenSent,
    OpenConfirm,
    Established,
}

/// A session as one daemon sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerState {
    pub state: SessionState,
    /// The implementation's own words for it ("Established", "passiveNSF", "up"...).
    pub raw: String,
    /// Time since the session was established, if it is and the daemon says.
    pub uptime: Option<Duration>,
    /// The last error or reset reason the daemon shows, if it shows one.
    pub last_error: Option<String>,
}

impl PeerState {
    pub fn established(&self) -> bool {
        self.state == SessionState::Established
    }
}

/// What every implementation's driver offers. Queries are bounded in time; nothing here
/// blocks for long except the `wait_*` helpers, which poll up to their timeout.
pub trait BgpDaemon {
    /// "bird", "frr", "gobgp" or "exabgp".
    fn kind(&self) -> &'static str;
    /// The directory holding this instance's config, sockets and logs.
    fn dir(&self) -> PathBuf;
    fn session_state(&self, neighbor: IpAddr) -> Result<PeerState>;
    /// Routes of family `afi` received from `neighbor` (its Adj-RIB-In, or the main
    /// table restricted to that neighbor).
    fn routes(&self, neighbor: IpAddr, afi: Afi) -> Result<Vec<Route>>;
    /// Originates a route now (and after every restart), replacing any earlier
    /// announcement of the same prefix.
    fn announce(&mut self, route: Announce) -> Result<()>;
    fn withdraw(&mut self, prefix: IpNet) -> Result<()>;
    /// Stops the daemon cleanly (SIGTERM: it sends Cease to its peers); a no-op if it is
    /// not running.
    fn stop(&mut self) -> Result<()>;
    /// Starts a stopped daemon again with the same configuration and originated routes;
    /// an error if it is running.
    fn start_again(&mut self) -> Result<()>;
    /// [`BgpDaemon::stop`], then [`BgpDaemon::start_again`].
    fn restart(&mut self) -> Result<()> {
        self.stop()?;
        self.start_again()
    }
    /// Ends the session with a Cease NOTIFICATION (RFC 4486: Administrative Shutdown).
    fn shutdown_neighbor(&mut self, neighbor: IpAddr) -> Result<()>;
    /// The last `lines` lines of the daemon's log, for failure messages.
    fn log_tail(&self, lines: usize) -> String;

    fn wait_established(&self, neighbor: IpAddr, timeout: Duration) -> Result<PeerState> {
        let what = format!(
            "{} session with {} to be Established",
            self.kind(),
            neighbor
        );
        wait_for(&what, timeout, || match self.session_state(neighbor) {
            Ok(s) if s.established() => Ok(s),
            Ok(s) => Err(format!("{:?} ({})", s.state, s.raw)),
            Err(e) => Err(e.to_string()),
        })
        .map_err(|e| self.with_log(e))
    }

    /// Polls `routes(neighbor, afi)` until `pred` holds; returns the routes it held for.
    fn wait_routes(
        &self,
        neighbor: IpAddr,
        afi: Afi,
        timeout: Duration,
        pred: &dyn Fn(&[Route]) -> bool,
    ) -> Result<Vec<Route>> {
        let what = format!(
            "{} routes from {} ({}) to match",
            self.kind(),
            neighbor,
            afi
        );
        wait_for(&what, timeout, || match self.routes(neighbor, afi) {
            Ok(r) if pred(&r) => Ok(r),
            Ok(r) => Err(format!("{r:?}")),
            Err(e) => Err(e.to_string()),
        })
        .map_err(|e| self.with_log(e))
    }

    /// Adds the daemon's log tail to a timeout, where it usually explains it.
    fn with_log(&self, e: HarnessError) -> HarnessError {
        match e {
            HarnessError::Timeout { what, waited, last } => HarnessError::Timeout {
                what,
                waited,
                last: format!(
                    "{last}\n--- {} log tail ---\n{}",
                    self.kind(),
                    self.log_tail(20)
                ),
            },
            other => other,
        }
    }
}

/// Interval between two polls of a daemon.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Polls `probe` until it returns `Ok`, or `timeout` passes; `Err` carries what was seen,
/// which the timeout error reports.
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        match probe() {
            Ok(v) => return Ok(v),
            Err(seen) => {
                if Instant::now() >= deadline {
                    return Err(HarnessError::Timeout {
                        what: what.to_string(),
                        waited: timeout,
                        last: seen,
                    });
                }
            }
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Holds `probe` true for the whole of `period` (polling), or fails with what broke it.
pub fn hold_for(
    what: &str,
    period: Duration,
    mut probe: impl FnMut() -> Result<(), String>,
) -> Result<()> {
    let deadline = Instant::now() + period;
    loop {
        if let Err(seen) = probe() {
            return Err(HarnessError::NotHeld {
                what: what.to_string(),
                seen,
            });
        }
        if Instant::now() >= deadline {
            return Ok(());
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Parses `a:b` (RFC 1997 community as two 16-bit halves).
pub(crate) fn parse_community(s: &str) -> Option<(u16, u16)> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

/// Parses `a:b:c` (RFC 8092 large community).
pub(crate) fn parse_large_community(s: &str) -> Option<(u32, u32, u32)> {
    let mut it = s.trim().split(':');
    let a = it.next()?.trim().parse().ok()?;
    let b = it.next()?.trim().parse().ok()?;
    let c = it.next()?.trim().parse().ok()?;
    if it.next().is_some() {
        return None;
    }
    Some((a, b, c))
}

/// Seconds since the Unix epoch, for daemons that report absolute times.
pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// `now - since_epoch`, clamped at zero (clocks of daemons and tests are the same clock,
/// but rounding can put `since` a fraction in the future).
pub(crate) fn uptime_since(since_epoch: f64) -> Duration {
    Duration::from_secs_f64((unix_now() - since_epoch).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(n: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(100, 64, 0, n))
    }

    #[test]
    fn validate_rejects_what_no_daemon_could_be_configured_with() {
        let ok = PeerOpts::new(v4(1), 65001).neighbor(Neighbor::new(v4(2), 65002));
        assert!(ok.validate().is_ok());

        let v6_without_source =
            PeerOpts::new(v4(1), 65001).neighbor(Neighbor::new("fd00::2".parse().unwrap(), 65002));
        assert!(v6_without_source.validate().is_err());

        let quote = ok
            .clone()
            .neighbor(Neighbor::new(v4(3), 65003).password("a\"b"));
        assert!(quote.validate().is_err());
        let space = ok
            .clone()
            .neighbor(Neighbor::new(v4(3), 65003).password("a b"));
        assert!(space.validate().is_err());

        let hold = ok
            .clone()
            .neighbor(Neighbor::new(v4(3), 65003).hold_time(2));
        assert!(hold.validate().is_err());

        let v6_route = ok
            .clone()
            .route(Announce::new("2001:db8::/32".parse().unwrap()));
        assert!(v6_route.validate().is_err(), "no IPv6 next hop");
        assert!(v6_route
            .local_addr6("fd00::1".parse().unwrap())
            .validate()
            .is_ok());
    }

    #[test]
    fn default_next_hop_is_the_own_address_of_the_family() {
        let opts = PeerOpts::new(v4(1), 65001).local_addr6("fd00::1".parse().unwrap());
        let r4 = Announce::new("192.0.2.0/24".parse().unwrap());
        let r6 = Announce::new("2001:db8::/32".parse().unwrap());
        assert_eq!(r4.resolved_next_hop(&opts).unwrap(), v4(1));
        assert_eq!(
            r6.resolved_next_hop(&opts).unwrap(),
            "fd00::1".parse::<IpAddr>().unwrap()
        );
        let explicit = r4.next_hop(v4(9));
        assert_eq!(explicit.resolved_next_hop(&opts).unwrap(), v4(9));
    }

    #[test]
    fn communities_parse_strictly() {
        assert_eq!(parse_community("65001:100"), Some((65001, 100)));
        assert_eq!(parse_community("65536:1"), None);
        assert_eq!(parse_large_community("1:2:3"), Some((1, 2, 3)));
        assert_eq!(parse_large_community("1:2:3:4"), None);
    }
}
