//! Raw config -> [`Config`]: ranges, references (communities, BFD profiles), address
//! pools (CIDRs, ranges, overlaps, aggregation lengths), label selectors, and the
//! speaker defaults folded into each peer.
//!
//! MetalLB 0.12 (`internal/config/config.go`) is the reference for what is accepted;
//! where this file rejects something MetalLB let through, the reason is that the
//! session could never work (a 17-bit hold time, an IPv6 router-id, a source address
//! of the other family...). What MetalLB 0.12 refused but Cilium's fork accepted (an
//! advertisement or a community written twice) is taken with a warning in
//! [`Config::warnings`]. `config/README.md` has the table of those differences.
//!
//! Owns: every semantic check and its message. Must not: look at YAML nodes (that is
//! `raw`) or at anything outside the document.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;
use std::time::Duration;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::duration::{self, Compact};
use super::error::{
    edit_distance, quote, suggest, ConfigError, ConfigErrorKind, ConfigErrors, Location,
};
use super::model::*;
use super::raw::*;
use super::selector::{is_object_name, LabelSelector, Operator, Requirement, RequirementField};

/// Restart Time is 12 bits (RFC 4724 section 3).
const MAX_RESTART_TIME: u64 = 4095;
/// Hold Time is 16 bits (RFC 4271 section 4.2).
const MAX_HOLD_TIME: u64 = 65535;

/// Well-known community names accepted wherever a community is (IANA "BGP Well-known
/// Communities"); a `bgp-communities` entry of the same name wins.
const WELL_KNOWN: &[(&str, Community)] = &[
    ("no-export", Community::NO_EXPORT),
    ("no-advertise", Community::NO_ADVERTISE),
    ("no-export-subconfed", Community::NO_EXPORT_SUBCONFED),
    ("no-peer", Community::NO_PEER),
    ("blackhole", Community::BLACKHOLE),
];

pub(crate) fn validate(
    raw: RawConfig,
    errors: Vec<ConfigError>,
    failed: BTreeSet<String>,
) -> Result<Config, ConfigErrors> {
    let mut v = Validator {
        errors,
        failed,
        warnings: Vec::new(),
        bad_community_names: BTreeSet::new(),
    };
    let mut config = v.config(raw);
    if v.errors.is_empty() {
        config.warnings = v.warnings;
        config
            .warnings
            .sort_by_key(|w| w.location.map(|l| (l.line, l.column)));
        Ok(config)
    } else {
        Err(ConfigErrors::new(v.errors))
    }
}

struct Validator {
    errors: Vec<ConfigError>,
    failed: BTreeSet<String>,
    /// What MetalLB 0.12 refused and Cilium's fork accepted: kept, and said.
    warnings: Vec<ConfigError>,
    /// `bgp-communities` names whose value is invalid: reported once, at the
    /// definition, not again at each use.
    bad_community_names: BTreeSet<String>,
}

/// The speaker extensions of one peer or of the `speaker` block, each validated, None
/// where not written.
#[derive(Default)]
struct Ext {
    graceful_restart: Option<bool>,
    graceful_restart_time: Option<Duration>,
    connect_retry_time: Option<Duration>,
    origin: Option<Origin>,
    communities: Option<(Vec<Community>, Vec<LargeCommunity>)>,
    local_pref: Option<(u32, Text)>,
    max_prefix: Option<PrefixLimit>,
    passive: Option<bool>,
    ttl_security: Option<(bool, Location, String)>,
    pod_cidr_pools: Option<PodCidrPools>,
}

impl Validator {
    fn invalid<T>(&mut self, field: &Spanned<T>, value: String, reason: impl Into<String>) {
        self.errors.push(ConfigError::invalid(
            field.path.clone(),
            Some(field.at),
            value,
            reason,
        ));
    }

    fn other(&mut self, path: &str, at: Location, message: String) {
        self.errors.push(ConfigError::new(
            path,
            Some(at),
            ConfigErrorKind::Other(message),
        ));
    }

    /// A required field: reports it missing unless the walk already reported it.
    fn required<'a, T>(
        &mut self,
        field: &'a Option<Spanned<T>>,
        parent: &str,
        key: &str,
        at: Location,
    ) -> Option<&'a Spanned<T>> {
        if field.is_none() {
            let path = format!("{parent}.{key}");
            if !self.failed.contains(&path) {
                self.errors
                    .push(ConfigError::new(path, Some(at), ConfigErrorKind::Missing));
            }
        }
        field.as_ref()
    }

    fn range_u32(&mut self, field: &Int, min: u32, max: u32) -> Option<u32> {
        match u32::try_from(field.value) {
            Ok(v) if (min..=max).contains(&v) => Some(v),
            _ => {
                self.invalid(
                    field,
                    field.value.to_string(),
                    format!("must be between {min} and {max}"),
                );
                None
            }
        }
    }

    fn asn(&mut self, field: &Int) -> Option<u32> {
        match u32::try_from(field.value) {
            Ok(v) if v != 0 => Some(v),
            _ => {
                self.invalid(
                    field,
                    field.value.to_string(),
                    "is not a valid AS number (1 to 4294967295)",
                );
                None
            }
        }
    }

    /// As Go's `net.ParseIP`, which MetalLB used: the address alone, no whitespace.
    fn ip(&mut self, field: &Text) -> Option<IpAddr> {
        match IpAddr::from_str(&field.value) {
            Ok(ip) => Some(ip.to_canonical()),
            Err(_) => {
                let reason = format!(
                    "is not an IP address{}",
                    address_hint::<IpAddr>(&field.value)
                );
                self.invalid(field, shown(field), reason);
                None
            }
        }
    }

    /// An address a BGP session can use at one end: a unicast host address. The
    /// unspecified address would make a dial reach this node itself (Linux connects
    /// 0.0.0.0 to a local address) and a multicast or the broadcast address is no host
    /// at all; MetalLB took them and its sessions never came up.
    fn host_ip(&mut self, field: &Text) -> Option<IpAddr> {
        let ip = self.ip(field)?;
        let why = match ip {
            _ if ip.is_unspecified() => Some("is the unspecified address, not a host"),
            _ if ip.is_multicast() => Some("is a multicast address, not a host"),
            IpAddr::V4(v4) if v4.is_broadcast() => Some("is the broadcast address, not a host"),
            _ => None,
        };
        match why {
            Some(why) => {
                self.invalid(
                    field,
                    shown(field),
                    format!("{why}; a BGP session needs a unicast address"),
                );
                None
            }
            None => Some(ip),
        }
    }

    fn go_duration(&mut self, field: &Text) -> Option<duration::GoDuration> {
        match duration::parse(&field.value) {
            Ok(d) => Some(d),
            Err(e) => {
                self.invalid(field, shown(field), e.to_string());
                None
            }
        }
    }

    /// A duration of whole seconds within `min..=max` (the extensions are strict:
    /// no fraction, no sign).
    fn seconds(&mut self, field: &Text, min: u64, max: u64, why: &str) -> Option<Duration> {
        let d = self.go_duration(field)?;
        let Some(std) = d.to_std() else {
            self.invalid(field, shown(field), "must not be negative");
            return None;
        };
        if std.subsec_nanos() != 0 {
            self.invalid(field, shown(field), "must be a whole number of seconds");
            return None;
        }
        if !(min..=max).contains(&std.as_secs()) {
            self.invalid(
                field,
                shown(field),
                format!("must be between {min}s and {max}s{why}"),
            );
            return None;
        }
        Some(std)
    }

    fn config(&mut self, raw: RawConfig) -> Config {
        let bfd_profiles = self.bfd_profiles(&raw.bfd_profiles);
        let communities = self.communities(&raw.communities);
        let defaults = self.extensions(&raw.speaker, &communities);
        let speaker = SpeakerOptions {
            graceful_restart: defaults
                .graceful_restart
                .unwrap_or(DEFAULT_GRACEFUL_RESTART),
            graceful_restart_time: defaults
                .graceful_restart_time
                .unwrap_or(DEFAULT_GRACEFUL_RESTART_TIME),
            connect_retry_time: defaults
                .connect_retry_time
                .unwrap_or(DEFAULT_CONNECT_RETRY_TIME),
            origin: defaults.origin.unwrap_or(Origin::Incomplete),
            pod_cidr_communities: defaults
                .communities
                .as_ref()
                .map(|c| c.0.clone())
                .unwrap_or_default(),
            pod_cidr_large_communities: defaults
                .communities
                .as_ref()
                .map(|c| c.1.clone())
                .unwrap_or_default(),
            pod_cidr_local_pref: defaults.local_pref.as_ref().map(|l| l.0),
            max_prefix: defaults.max_prefix,
            passive: defaults.passive.unwrap_or(false),
            ttl_security: defaults.ttl_security.as_ref().is_some_and(|t| t.0),
            pod_cidr_pools: defaults.pod_cidr_pools.clone(),
            announce_pod_cidrs: raw.announce_pod_cidrs.as_ref().is_none_or(|b| b.value),
            announce_lb_ips: raw.announce_lb_ips.as_ref().is_none_or(|b| b.value),
        };
        let mut peers = Vec::new();
        let mut routers = Vec::new();
        for rp in &raw.peers {
            if let Some(p) = self.peer(rp, &speaker, &communities, &bfd_profiles, &mut routers) {
                peers.push(p);
            }
        }
        let pools = self.pools(&raw.pools, &communities);
        Config {
            peers,
            pools,
            communities,
            bfd_profiles,
            speaker,
            warnings: Vec::new(),
        }
    }

    fn bfd_profiles(&mut self, raw: &[RawBfdProfile]) -> BTreeMap<String, BfdProfile> {
        let mut out: BTreeMap<String, BfdProfile> = BTreeMap::new();
        let mut first: BTreeMap<String, String> = BTreeMap::new();
        for r in raw {
            let name = self.required(&r.name, &r.path, "name", r.at);
            let mut ranged =
                |f: &Option<Int>, min, max| f.as_ref().and_then(|f| self.range_u32(f, min, max));
            let profile = BfdProfile {
                name: String::new(),
                receive_interval: ranged(&r.receive_interval, 10, 60000),
                transmit_interval: ranged(&r.transmit_interval, 10, 60000),
                detect_multiplier: ranged(&r.detect_multiplier, 2, 255),
                echo_interval: ranged(&r.echo_interval, 10, 60000),
                echo_mode: r.echo_mode.as_ref().is_some_and(|b| b.value),
                passive_mode: r.passive_mode.as_ref().is_some_and(|b| b.value),
                minimum_ttl: ranged(&r.minimum_ttl, 1, 254),
            };
            // The Echo function (RFC 5880 section 6.4) is not implemented: say so rather
            // than let the profile look as if it ran.
            if let Some(e) = r.echo_mode.as_ref().filter(|e| e.value) {
                self.warnings.push(ConfigError::invalid(
                    e.path.clone(),
                    Some(e.at),
                    String::from("true"),
                    "is not run: this speaker does not implement BFD echo mode, so a \
                     failure is found by control packets alone (the remote's \
                     transmit-interval x detect-multiplier)",
                ));
            }
            if let (Some(e), Some(_)) = (&r.echo_interval, profile.echo_interval) {
                self.warnings.push(ConfigError::invalid(
                    e.path.clone(),
                    Some(e.at),
                    e.value.to_string(),
                    "has no effect: this speaker does not implement BFD echo mode, so it \
                     sends no echo packet and asks for none",
                ));
            }
            let Some(name) = name else { continue };
            if name.value.is_empty() {
                self.invalid(name, shown(name), "must not be empty");
                continue;
            }
            if let Some(prev) = first.get(&name.value) {
                let prev = prev.clone();
                self.invalid(name, shown(name), format!("is already the name of {prev}"));
                continue;
            }
            first.insert(name.value.clone(), r.path.clone());
            out.insert(
                name.value.clone(),
                BfdProfile {
                    name: name.value.clone(),
                    ..profile
                },
            );
        }
        out
    }

    fn communities(&mut self, raw: &[(Text, Text)]) -> BTreeMap<String, CommunityValue> {
        let mut out = BTreeMap::new();
        for (name, value) in raw {
            match parse_community(&value.value) {
                Ok(c) => {
                    out.insert(name.value.clone(), c);
                }
                Err(reason) => {
                    self.bad_community_names.insert(name.value.clone());
                    self.invalid(value, shown(value), reason);
                }
            }
        }
        out
    }

    /// Resolves a communities list: names from `bgp-communities`, well-known names,
    /// `a:b` and `large:a:b:c`. Duplicates are dropped (a set on the wire); with
    /// `warn_repeats` (an advertisement's list, where MetalLB 0.12 refused a repeat and
    /// Cilium's fork took it) each repeat is also a warning.
    fn community_list(
        &mut self,
        list: &TextList,
        defined: &BTreeMap<String, CommunityValue>,
        warn_repeats: bool,
    ) -> (Vec<Community>, Vec<LargeCommunity>) {
        let (mut std, mut large) = (Vec::new(), Vec::new());
        let mut seen: Vec<(CommunityValue, &Text)> = Vec::new();
        for item in &list.value {
            if self.bad_community_names.contains(&item.value) {
                // Already reported where the name is defined.
                continue;
            }
            let value = match resolve_community(&item.value, defined) {
                Ok(v) => v,
                Err(reason) => {
                    self.invalid(item, shown(item), reason);
                    continue;
                }
            };
            if let Some((_, first)) = seen.iter().find(|(v, _)| *v == value) {
                if warn_repeats {
                    let index = first.path.rsplit('[').next().unwrap_or("");
                    // MetalLB compared the text: only a repeat written the same way
                    // was refused.
                    let reason = if first.value == item.value {
                        format!("repeats communities[{index}: sent once (MetalLB 0.12 refused a repeated community, Cilium's MetalLB accepted it)")
                    } else {
                        format!(
                            "is the same community as communities[{index} ({}): sent once",
                            shown(first)
                        )
                    };
                    self.warnings.push(ConfigError::invalid(
                        item.path.clone(),
                        Some(item.at),
                        shown(item),
                        reason,
                    ));
                }
                continue;
            }
            seen.push((value, item));
            match value {
                CommunityValue::Standard(c) => std.push(c),
                CommunityValue::Large(l) => large.push(l),
            }
        }
        std.sort();
        std.dedup();
        large.sort();
        large.dedup();
        (std, large)
    }

    fn extensions(
        &mut self,
        raw: &RawExtensions,
        communities: &BTreeMap<String, CommunityValue>,
    ) -> Ext {
        let origin = raw.origin.as_ref().and_then(|o| match o.value.as_str() {
            "igp" => Some(Origin::Igp),
            "incomplete" => Some(Origin::Incomplete),
            _ => {
                let mut reason =
                    "is not an origin (expected \"igp\" or \"incomplete\")".to_string();
                // Only a case slip gets a hint: "egp" is a real origin, not a typo of "igp".
                if let Some(s) = ["igp", "incomplete"]
                    .iter()
                    .find(|s| s.eq_ignore_ascii_case(&o.value))
                {
                    reason.push_str(&format!(", did you mean {}?", quote(s)));
                }
                self.invalid(o, shown(o), reason);
                None
            }
        });
        let max_prefix = raw.max_prefix.as_ref().and_then(|m| {
            let limit = self.required(&m.limit, &m.path, "limit", m.at);
            let limit = limit.and_then(|l| self.range_u32(l, 1, u32::MAX));
            let action = match &m.action {
                None => Some(PrefixLimitAction::Cease),
                Some(a) => match a.value.as_str() {
                    "warn" => Some(PrefixLimitAction::Warn),
                    "cease" => Some(PrefixLimitAction::Cease),
                    _ => {
                        self.invalid(
                            a,
                            shown(a),
                            "is not a max-prefix action (expected \"warn\" or \"cease\")",
                        );
                        None
                    }
                },
            };
            Some(PrefixLimit {
                limit: limit?,
                action: action?,
            })
        });
        Ext {
            graceful_restart: raw.graceful_restart.as_ref().map(|b| b.value),
            graceful_restart_time: raw.graceful_restart_time.as_ref().and_then(|t| {
                self.seconds(
                    t,
                    1,
                    MAX_RESTART_TIME,
                    " (the Restart Time is 12 bits, RFC 4724 section 3)",
                )
            }),
            connect_retry_time: raw
                .connect_retry_time
                .as_ref()
                .and_then(|t| self.seconds(t, 1, MAX_HOLD_TIME, "")),
            origin,
            communities: raw
                .pod_cidr_communities
                .as_ref()
                .map(|l| self.community_list(l, communities, false)),
            local_pref: raw.pod_cidr_local_pref.as_ref().and_then(|l| {
                let v = self.range_u32(l, 0, u32::MAX)?;
                Some((
                    v,
                    Spanned {
                        value: l.value.to_string(),
                        path: l.path.clone(),
                        at: l.at,
                    },
                ))
            }),
            max_prefix,
            passive: raw.passive.as_ref().map(|b| b.value),
            ttl_security: raw
                .ttl_security
                .as_ref()
                .map(|b| (b.value, b.at, b.path.clone())),
            pod_cidr_pools: raw
                .pod_cidr_pools
                .as_ref()
                .and_then(|p| self.pod_cidr_pools(p, communities)),
        }
    }

    /// `pod-cidr-pools`: pool names are Kubernetes object names (RFC 1123 subdomains,
    /// as CiliumPodIPPool names are); an empty mapping would announce nothing and is
    /// refused.
    fn pod_cidr_pools(
        &mut self,
        raw: &Spanned<Vec<RawPodCidrPool>>,
        communities: &BTreeMap<String, CommunityValue>,
    ) -> Option<PodCidrPools> {
        if raw.value.is_empty() {
            self.other(
                &raw.path,
                raw.at,
                "must list at least one CiliumPodIPPool by name (remove the key to announce \
                 every pool)"
                    .into(),
            );
            return None;
        }
        let mut pools = PodCidrPools::new();
        let mut ok = true;
        for entry in &raw.value {
            if !is_object_name(&entry.name.value) {
                self.invalid(
                    &entry.name,
                    shown(&entry.name),
                    "is not a CiliumPodIPPool name (lowercase letters, digits, '-' and '.', \
                     at most 253 characters, starting and ending with a letter or digit)",
                );
                ok = false;
                continue;
            }
            let (communities, large_communities) = entry
                .communities
                .as_ref()
                .map(|l| self.community_list(l, communities, false))
                .unwrap_or_default();
            pools.insert(
                entry.name.value.clone(),
                PoolRouteOptions {
                    communities,
                    large_communities,
                },
            );
        }
        ok.then_some(pools)
    }

    fn peer(
        &mut self,
        r: &RawPeer,
        speaker: &SpeakerOptions,
        communities: &BTreeMap<String, CommunityValue>,
        bfd_profiles: &BTreeMap<String, BfdProfile>,
        routers: &mut Vec<Router>,
    ) -> Option<Peer> {
        let my_asn = self
            .required(&r.my_asn, &r.path, "my-asn", r.at)
            .and_then(|f| self.asn(f));
        let peer_asn = self
            .required(&r.peer_asn, &r.path, "peer-asn", r.at)
            .and_then(|f| self.asn(f));
        let address = self
            .required(&r.peer_address, &r.path, "peer-address", r.at)
            .and_then(|f| self.host_ip(f));
        let port = match &r.peer_port {
            None => Some(BGP_PORT),
            Some(p) if p.value == 0 => Some(BGP_PORT),
            Some(p) => match u16::try_from(p.value) {
                Ok(v) => Some(v),
                Err(_) => {
                    self.invalid(
                        p,
                        p.value.to_string(),
                        "must be between 1 and 65535 (0 means 179)",
                    );
                    None
                }
            },
        };
        let hold_time = match &r.hold_time {
            None => Some(DEFAULT_HOLD_TIME),
            Some(t) => self.hold_time(t),
        };
        let keepalive_time = self.keepalive_time(r.keepalive_time.as_ref(), hold_time);
        // Some(None): not set; None: set but invalid (already reported).
        let router_id = match &r.router_id {
            None => Some(None),
            Some(f) => self.router_id(f).map(Some),
        };
        let source_address = match &r.source_address {
            None => Some(None),
            Some(f) => match (self.host_ip(f), address) {
                (Some(src), Some(dst)) if src.is_ipv4() != dst.is_ipv4() => {
                    self.invalid(
                        f,
                        shown(f),
                        format!("is not of the same address family as peer-address {dst}"),
                    );
                    None
                }
                (Some(src), _) => Some(Some(src)),
                (None, _) => None,
            },
        };
        let password = match &r.password {
            // An empty password is absent already (raw's one rule for optional strings).
            None => Some(None),
            Some(p) => match Md5KeyProblem::of(&p.value) {
                None => Some(Some(Secret::new(p.value.clone()))),
                Some(problem) => {
                    self.invalid(p, "<redacted>".into(), problem.to_string());
                    None
                }
            },
        };
        let password_secret = match &r.password_secret {
            None => Some(None),
            Some(s) => {
                let given = r.password.as_ref().filter(|p| !p.value.is_empty());
                if let Some(p) = given {
                    self.other(
                        &s.path,
                        s.at,
                        format!(
                            "cannot be combined with {} (the TCP MD5 key comes from one place)",
                            p.path
                        ),
                    );
                }
                self.secret_ref(s).map(Some)
            }
        };
        let ibgp = matches!((my_asn, peer_asn), (Some(a), Some(b)) if a == b);
        let ebgp_multihop = r.ebgp_multihop.as_ref().is_some_and(|b| b.value);
        if let Some(m) = r.ebgp_multihop.as_ref().filter(|m| m.value && ibgp) {
            self.invalid(
                m,
                "true".into(),
                "is not allowed on an iBGP peer (peer-asn equals my-asn)",
            );
        }
        let bfd_profile = match &r.bfd_profile {
            None => Some(None),
            Some(b) if bfd_profiles.contains_key(&b.value) => Some(Some(b.value.clone())),
            Some(b) => {
                let known: Vec<&str> = bfd_profiles.keys().map(String::as_str).collect();
                let hint = closest(&b.value, &known)
                    .map(|s| format!(", did you mean {}?", quote(s)))
                    .unwrap_or_default();
                self.invalid(b, shown(b), format!("is not defined in bfd-profiles{hint}"));
                None
            }
        };
        let bfd = bfd_profile
            .as_ref()
            .and_then(|b| b.as_ref())
            .and_then(|name| bfd_profiles.get(name))
            .cloned();
        let next_hop_v4 = self.next_hop(r.next_hop_v4.as_ref(), true);
        let next_hop_v6 = self.next_hop(r.next_hop_v6.as_ref(), false);
        let mut node_selectors = Vec::new();
        let mut selectors_ok = true;
        for s in &r.node_selectors {
            match self.selector(s) {
                Some(sel) => node_selectors.push(sel),
                None => selectors_ok = false,
            }
        }
        // One empty selector selects every node, whatever the others say.
        if node_selectors.iter().any(LabelSelector::is_everything) {
            node_selectors.clear();
        }
        node_selectors.sort();
        node_selectors.dedup();
        if let (Some(address), Some(port), true) = (address, port, selectors_ok) {
            self.duplicate_peer(
                r,
                Router {
                    index: r.index,
                    key: PeerKey { address, port },
                    node_selectors: node_selectors.clone(),
                },
                routers,
            );
        }

        let ext = self.extensions(&r.ext, communities);
        if let Some((true, at, path)) = &ext.ttl_security {
            if ebgp_multihop {
                self.other(path, *at, "true cannot be combined with ebgp-multihop (GTSM is for directly connected peers, RFC 5082)".into());
            }
        }
        if let (Some((_, l)), Some(false)) =
            (&ext.local_pref, my_asn.zip(peer_asn).map(|(a, b)| a == b))
        {
            self.invalid(
                l,
                l.value.clone(),
                "is only sent to iBGP peers, and this peer is eBGP (peer-asn differs from my-asn)",
            );
        }
        let (communities_std, communities_large) = ext.communities.clone().unwrap_or_else(|| {
            (
                speaker.pod_cidr_communities.clone(),
                speaker.pod_cidr_large_communities.clone(),
            )
        });
        Some(Peer {
            index: r.index,
            address: address?,
            port: port?,
            peer_asn: peer_asn?,
            my_asn: my_asn?,
            hold_time: hold_time?,
            keepalive_time: keepalive_time?,
            router_id: router_id?,
            source_address: source_address?,
            password: password?,
            password_secret: password_secret?,
            ebgp_multihop,
            bfd_profile: bfd_profile?,
            bfd,
            node_selectors: if selectors_ok {
                node_selectors
            } else {
                return None;
            },
            graceful_restart: ext.graceful_restart.unwrap_or(speaker.graceful_restart),
            graceful_restart_time: ext
                .graceful_restart_time
                .unwrap_or(speaker.graceful_restart_time),
            connect_retry_time: ext.connect_retry_time.unwrap_or(speaker.connect_retry_time),
            origin: ext.origin.unwrap_or(speaker.origin),
            pod_cidr_communities: communities_std,
            pod_cidr_large_communities: communities_large,
            pod_cidr_local_pref: match &ext.local_pref {
                Some((v, _)) => Some(*v),
                None if ibgp => speaker.pod_cidr_local_pref,
                None => None,
            },
            max_prefix: ext.max_prefix.or(speaker.max_prefix),
            passive: ext.passive.unwrap_or(speaker.passive),
            ttl_security: match &ext.ttl_security {
                Some((v, _, _)) => *v,
                None => speaker.ttl_security && !ebgp_multihop,
            },
            next_hop_v4: next_hop_v4?.and_then(|a| match a {
                IpAddr::V4(a) => Some(a),
                IpAddr::V6(_) => None,
            }),
            next_hop_v6: next_hop_v6?.and_then(|a| match a {
                IpAddr::V6(a) => Some(a),
                IpAddr::V4(_) => None,
            }),
            pod_cidr_pools: ext
                .pod_cidr_pools
                .or_else(|| speaker.pod_cidr_pools.clone()),
        })
    }

    /// `password-secret`: a Secret name (a DNS subdomain, RFC 1123, as Kubernetes
    /// names objects) and a data key (Kubernetes' rule for Secret keys).
    fn secret_ref(&mut self, r: &RawSecretRef) -> Option<SecretKeyRef> {
        const NAME: &str = "must be a Secret name: lowercase letters, digits, '-' and '.', \
                            starting and ending with a letter or digit, at most 253 characters";
        const KEY: &str = "must be a Secret data key: letters, digits, '-', '_' and '.', \
                           at most 253 characters, not starting with \"..\"";
        let name = self.required(&r.name, &r.path, "name", r.at);
        let key = self.required(&r.key, &r.path, "key", r.at);
        let (name, key) = (name?, key?);
        let name_ok = self.secret_ref_part(name, is_dns_subdomain, NAME);
        let key_ok = self.secret_ref_part(key, is_secret_key, KEY);
        (name_ok && key_ok).then(|| SecretKeyRef {
            name: name.value.clone(),
            key: key.value.clone(),
        })
    }

    /// One part of `password-secret`: "" is missing (an empty string means "not set").
    fn secret_ref_part(&mut self, part: &Text, valid: fn(&str) -> bool, reason: &str) -> bool {
        if part.value.is_empty() {
            let missing =
                ConfigError::new(part.path.clone(), Some(part.at), ConfigErrorKind::Missing);
            self.errors.push(missing);
            false
        } else if !valid(&part.value) {
            self.invalid(part, shown(part), reason);
            false
        } else {
            true
        }
    }

    /// `next-hop-v4` / `next-hop-v6`: an address of that family that a router can forward
    /// to. `Some(None)`: not set (absent or "", as MetalLB's empty strings); `None`:
    /// invalid (reported).
    fn next_hop(&mut self, field: Option<&Text>, v4: bool) -> Option<Option<IpAddr>> {
        let Some(f) = field.filter(|f| !f.value.trim().is_empty()) else {
            return Some(None);
        };
        let ip = self.ip(f)?;
        let why = match ip {
            _ if ip.is_ipv4() != v4 => {
                if v4 {
                    "is not an IPv4 address"
                } else {
                    "is not an IPv6 address"
                }
            }
            _ if ip.is_unspecified() || ip.is_multicast() => {
                "is not a unicast address; a next hop must be one"
            }
            _ if ip.is_loopback() => "is a loopback address, which routers refuse as a next hop",
            IpAddr::V4(a) if a.is_broadcast() => "is the broadcast address, not a next hop",
            // RFC 2545 section 3: the next hop field holds a global address first.
            IpAddr::V6(a) if a.is_unicast_link_local() => {
                "is link-local; the IPv6 next hop must be a global address (RFC 2545 section 3)"
            }
            _ => return Some(Some(ip)),
        };
        self.invalid(f, shown(f), why);
        None
    }

    /// A BGP Identifier: 4 octets (RFC 4271 section 4.2), non-zero (RFC 6286).
    fn router_id(&mut self, f: &Text) -> Option<Ipv4Addr> {
        match IpAddr::from_str(&f.value).map(|ip| ip.to_canonical()) {
            Ok(IpAddr::V4(id)) if id == Ipv4Addr::UNSPECIFIED => {
                let reason = "must not be 0.0.0.0 (the BGP Identifier is non-zero, RFC 6286)";
                self.invalid(f, shown(f), reason);
                None
            }
            Ok(IpAddr::V4(id)) => Some(id),
            Ok(IpAddr::V6(_)) => {
                let reason = "must be an IPv4 address (the BGP Identifier is 4 octets, RFC 4271 section 4.2)";
                self.invalid(f, shown(f), reason);
                None
            }
            Err(_) => {
                let reason = format!("is not an IPv4 address{}", address_hint::<IpAddr>(&f.value));
                self.invalid(f, shown(f), reason);
                None
            }
        }
    }

    /// MetalLB: whole seconds (truncated), 0 or at least 3s. Also at most 65535s, the
    /// field's width in OPEN.
    fn hold_time(&mut self, t: &Text) -> Option<Duration> {
        let d = self.go_duration(t)?;
        match d.whole_seconds() {
            Some(s) if s.is_zero() || (3..=MAX_HOLD_TIME).contains(&s.as_secs()) => Some(s),
            Some(s) if s.as_secs() > MAX_HOLD_TIME => {
                self.invalid(
                    t,
                    shown(t),
                    "must be at most 65535s (the Hold Time is 16 bits, RFC 4271 section 4.2)",
                );
                None
            }
            _ => {
                self.invalid(t, shown(t), "must be 0 or at least 3s");
                None
            }
        }
    }

    /// MetalLB: default hold/3; truncated to whole seconds, then not above the hold
    /// time. Also: not zero while the hold time is not (the session would expire).
    /// Checked on its own when the hold time is invalid, so both errors show.
    fn keepalive_time(&mut self, t: Option<&Text>, hold: Option<Duration>) -> Option<Duration> {
        let Some(t) = t else {
            return hold.map(|h| Duration::from_secs(h.as_secs() / 3));
        };
        let d = self.go_duration(t)?;
        let Some(exact) = d.to_std() else {
            self.invalid(t, shown(t), "must not be negative");
            return None;
        };
        let hold = hold?;
        // MetalLB truncated to whole seconds first, then compared: 30.9s with a 30s
        // hold time is 30s and fine.
        let whole = Duration::from_secs(exact.as_secs());
        if whole > hold {
            self.invalid(
                t,
                shown(t),
                format!("must not be above hold-time ({})", Compact(hold)),
            );
            return None;
        }
        if whole.is_zero() && !hold.is_zero() {
            self.invalid(t, shown(t), "must be at least 1s when hold-time is not 0");
            return None;
        }
        Some(whole)
    }

    fn selector(&mut self, raw: &RawSelector) -> Option<LabelSelector> {
        let mut reqs = Vec::new();
        let mut ok = true;
        let labels_path = format!("{}.match-labels", raw.path);
        for (k, v) in &raw.match_labels {
            match Requirement::new(&k.value, Operator::Equals, std::slice::from_ref(&v.value)) {
                Ok(r) => reqs.push(r),
                Err(errs) => {
                    ok = false;
                    for e in errs {
                        match e.field {
                            RequirementField::Key => self.errors.push(ConfigError::invalid(
                                labels_path.clone(),
                                Some(k.at),
                                e.value,
                                e.reason,
                            )),
                            _ => self.invalid(v, e.value, e.reason),
                        }
                    }
                }
            }
        }
        for ex in &raw.match_expressions {
            let key = self.required(&ex.key, &ex.path, "key", ex.at);
            let op = self.required(&ex.operator, &ex.path, "operator", ex.at);
            let op = op.and_then(|o| match Operator::parse(&o.value) {
                Ok(op) => Some(op),
                Err(reason) => {
                    self.invalid(o, shown(o), reason);
                    None
                }
            });
            let (Some(key), Some(op)) = (key, op) else {
                ok = false;
                continue;
            };
            let values_path = format!("{}.values", ex.path);
            if self.failed.contains(&values_path) {
                // Not a list: raw said so; "values set can't be empty" would be a second
                // error about the same mistake.
                ok = false;
                continue;
            }
            let values: Vec<String> = ex
                .values
                .iter()
                .flat_map(|l| l.value.iter().map(|t| t.value.clone()))
                .collect();
            match Requirement::new(&key.value, op, &values) {
                Ok(r) => reqs.push(r),
                Err(errs) => {
                    ok = false;
                    for e in errs {
                        match e.field {
                            RequirementField::Key => self.invalid(key, e.value, e.reason),
                            RequirementField::Values => {
                                let at = ex.values.as_ref().map_or(ex.at, |l| l.at);
                                self.errors.push(ConfigError::invalid(
                                    values_path.clone(),
                                    Some(at),
                                    e.value,
                                    e.reason,
                                ));
                            }
                            RequirementField::Value(i) => {
                                if let Some(item) = ex.values.as_ref().and_then(|l| l.value.get(i))
                                {
                                    self.invalid(item, e.value, e.reason);
                                }
                            }
                        }
                    }
                }
            }
        }
        ok.then(|| LabelSelector::new(reqs))
    }

    /// MetalLB refused two identical peers; a node can also not hold two sessions to one
    /// address and port, so two entries for the same router that select the same nodes
    /// are refused too. (Entries whose selectors differ are fine: per-rack routers
    /// often share an address; a node they both select is reported at run time.)
    /// Checked on what identifies the router alone, so that a duplicate is reported
    /// together with any other error of either entry.
    fn duplicate_peer(&mut self, r: &RawPeer, router: Router, seen: &mut Vec<Router>) {
        if let Some(first) = seen
            .iter()
            .find(|s| s.key == router.key && s.node_selectors == router.node_selectors)
        {
            let scope = if router.node_selectors.is_empty() {
                "every node"
            } else {
                "the same nodes"
            };
            let message = format!(
                "same router {} as peers[{}], for {scope}: a node can hold only one session per peer-address and peer-port",
                router.key, first.index
            );
            self.other(&r.path, r.at, message);
            return;
        }
        seen.push(router);
    }

    fn pools(
        &mut self,
        raw: &[RawPool],
        communities: &BTreeMap<String, CommunityValue>,
    ) -> Vec<AddressPool> {
        let mut out = Vec::new();
        let mut names: BTreeMap<String, String> = BTreeMap::new();
        // Every CIDR so far, with where it came from, for the overlap check.
        let mut all: Vec<(IpNet, String, String)> = Vec::new();
        for r in raw {
            let name = self.required(&r.name, &r.path, "name", r.at).and_then(|n| {
                if n.value.is_empty() {
                    self.invalid(n, shown(n), "must not be empty");
                    return None;
                }
                if let Some(prev) = names.get(&n.value) {
                    let prev = prev.clone();
                    self.invalid(n, shown(n), format!("is already the name of {prev}"));
                    return None;
                }
                names.insert(n.value.clone(), r.path.clone());
                Some(n.value.clone())
            });
            let protocol = self
                .required(&r.protocol, &r.path, "protocol", r.at)
                .and_then(|p| match p.value.as_str() {
                    "bgp" => Some(Protocol::Bgp),
                    "layer2" => Some(Protocol::Layer2),
                    _ => {
                        let hint = suggest(&p.value, &["bgp", "layer2"])
                            .map(|s| format!(", did you mean {}?", quote(&s)))
                            .unwrap_or_default();
                        self.invalid(
                            p,
                            shown(p),
                            format!("is not a protocol (expected \"bgp\" or \"layer2\"){hint}"),
                        );
                        None
                    }
                });
            // Per `addresses` entry: its CIDRs (for the aggregation check).
            let mut per_entry: Vec<(Text, Vec<IpNet>)> = Vec::new();
            let addresses = self.required(&r.addresses, &r.path, "addresses", r.at);
            if let Some(list) = addresses {
                if list.value.is_empty() {
                    self.other(
                        &list.path,
                        list.at,
                        "must list at least one CIDR or address range".into(),
                    );
                }
                for item in &list.value {
                    match parse_addresses(&item.value) {
                        Ok(nets) => {
                            for net in &nets {
                                if let Some((other, from, pool)) =
                                    all.iter().find(|(o, _, _)| overlaps(o, net))
                                {
                                    let msg = format!(
                                        "overlaps {} ({from}, pool {})",
                                        quote(&other.to_string()),
                                        quote(pool)
                                    );
                                    self.invalid(item, shown(item), msg);
                                    break;
                                }
                            }
                            let pool_name = name.clone().unwrap_or_default();
                            all.extend(
                                nets.iter()
                                    .map(|n| (*n, item.path.clone(), pool_name.clone())),
                            );
                            per_entry.push((item.clone(), nets));
                        }
                        Err(reason) => self.invalid(item, shown(item), reason),
                    }
                }
            }
            let mut advertisements = Vec::new();
            match (protocol, &r.bgp_advertisements) {
                // MetalLB refused a non-empty list only.
                (Some(Protocol::Layer2), Some(ads)) if !ads.value.is_empty() => {
                    self.other(&ads.path, ads.at, "is not allowed in a layer2 pool".into());
                }
                (Some(Protocol::Layer2), _) => {}
                (Some(Protocol::Bgp), None) => advertisements.push(BgpAdvertisement::default()),
                (Some(Protocol::Bgp), Some(ads)) if ads.value.is_empty() => {
                    advertisements.push(BgpAdvertisement::default())
                }
                (_, Some(ads)) => {
                    let mut first: Vec<&RawAdvertisement> = Vec::new();
                    for a in &ads.value {
                        let Some(ad) = self.advertisement(a, &per_entry, communities) else {
                            continue;
                        };
                        match advertisements.iter().position(|b| *b == ad) {
                            // MetalLB 0.12 refused two equal advertisements, Cilium's
                            // fork took them; both announce the same, so keep one.
                            Some(i) => self.warnings.push(ConfigError::new(
                                a.path.clone(),
                                Some(a.at),
                                ConfigErrorKind::Other(format!(
                                    "means the same as {}: announced once (MetalLB 0.12 refused an advertisement written twice, Cilium's MetalLB accepted it)",
                                    first[i].path.rsplit('.').next().unwrap_or(""),
                                )),
                            )),
                            None => {
                                advertisements.push(ad);
                                first.push(a);
                            }
                        }
                    }
                }
                (_, None) => {}
            }
            if let (Some(name), Some(protocol), Some(_)) = (name, protocol, addresses) {
                out.push(AddressPool {
                    name,
                    protocol,
                    cidrs: per_entry.into_iter().flat_map(|(_, n)| n).collect(),
                    avoid_buggy_ips: r.avoid_buggy_ips.as_ref().is_some_and(|b| b.value),
                    auto_assign: r.auto_assign.as_ref().is_none_or(|b| b.value),
                    bgp_advertisements: advertisements,
                });
            }
        }
        out
    }

    fn advertisement(
        &mut self,
        r: &RawAdvertisement,
        entries: &[(Text, Vec<IpNet>)],
        communities: &BTreeMap<String, CommunityValue>,
    ) -> Option<BgpAdvertisement> {
        let mut ok = true;
        let mut length = |f: &Option<Int>, max: u8, v6: bool, this: &mut Self| -> u8 {
            let Some(f) = f else { return max };
            let Some(len) = u8::try_from(f.value).ok().filter(|l| *l <= max) else {
                this.invalid(
                    f,
                    f.value.to_string(),
                    format!("must be between 0 and {max}"),
                );
                ok = false;
                return max;
            };
            // MetalLB: the aggregate must not reach outside an `addresses` entry.
            for (item, nets) in entries {
                let Some(widest) = nets
                    .iter()
                    .filter(|n| matches!(n, IpNet::V6(_)) == v6)
                    .map(IpNet::prefix_len)
                    .min()
                else {
                    continue;
                };
                if len < widest {
                    this.invalid(
                        f,
                        len.to_string(),
                        format!("is shorter than the /{widest} of {} in this pool: the aggregate would announce addresses outside the pool", shown(item)),
                    );
                    ok = false;
                    break;
                }
            }
            len
        };
        let aggregation_length = length(&r.aggregation_length, 32, false, self);
        let aggregation_length_v6 = length(&r.aggregation_length_v6, 128, true, self);
        let local_pref = r.localpref.as_ref().and_then(|l| {
            let v = self.range_u32(l, 0, u32::MAX);
            ok &= v.is_some();
            v
        });
        let (communities, large_communities) = match &r.communities {
            Some(list) => {
                let before = self.errors.len();
                let c = self.community_list(list, communities, true);
                ok &= self.errors.len() == before;
                c
            }
            None => (Vec::new(), Vec::new()),
        };
        ok.then_some(BgpAdvertisement {
            aggregation_length,
            aggregation_length_v6,
            local_pref,
            communities,
            large_communities,
        })
    }
}

/// What identifies a `peers` entry's router for one node, for the duplicate check.
struct Router {
    index: usize,
    key: PeerKey,
    node_selectors: Vec<LabelSelector>,
}

/// The did-you-mean for names the file itself defines (profiles, communities).
fn closest<'a>(s: &str, known: &[&'a str]) -> Option<&'a str> {
    let limit = (s.chars().count() / 3).clamp(1, 3);
    known
        .iter()
        .find(|k| k.eq_ignore_ascii_case(s))
        .copied()
        .or_else(|| {
            known
                .iter()
                .map(|k| (edit_distance(s, k), *k))
                .filter(|(d, _)| *d <= limit)
                .min_by_key(|(d, _)| *d)
                .map(|(_, k)| k)
        })
}

const COMMUNITY_FORMS: &str =
    "\"a:b\" with a and b from 0 to 65535, or \"large:a:b:c\" with 32-bit numbers";

/// `a:b` (RFC 1997) or `large:a:b:c` (RFC 8092, MetalLB 0.13's notation), decimal.
pub(crate) fn parse_community(s: &str) -> Result<CommunityValue, String> {
    fn number<T: FromStr>(part: &str, max: &str) -> Result<T, String> {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "is not a community: {} is not a number",
                quote(part)
            ));
        }
        part.parse()
            .map_err(|_| format!("is not a community: {part} is above {max}"))
    }
    if let Some(rest) = s.strip_prefix("large:") {
        let parts: Vec<&str> = rest.split(':').collect();
        let [a, b, c] = parts.as_slice() else {
            return Err(format!("is not a community (expected {COMMUNITY_FORMS})"));
        };
        return Ok(CommunityValue::Large(LargeCommunity {
            global_admin: number(a, "4294967295")?,
            local_data1: number(b, "4294967295")?,
            local_data2: number(c, "4294967295")?,
        }));
    }
    let parts: Vec<&str> = s.split(':').collect();
    let [a, b] = parts.as_slice() else {
        return Err(format!("is not a community (expected {COMMUNITY_FORMS})"));
    };
    Ok(CommunityValue::Standard(Community::new(
        number(a, "65535")?,
        number(b, "65535")?,
    )))
}

/// A community as written in a list: a `bgp-communities` name first (as MetalLB), then
/// a well-known name, then the literal forms.
pub(crate) fn resolve_community(
    s: &str,
    defined: &BTreeMap<String, CommunityValue>,
) -> Result<CommunityValue, String> {
    if let Some(v) = defined.get(s) {
        return Ok(*v);
    }
    if let Some((_, c)) = WELL_KNOWN.iter().find(|(name, _)| *name == s) {
        return Ok(CommunityValue::Standard(*c));
    }
    match parse_community(s) {
        Ok(c) => Ok(c),
        Err(_) if !s.contains(':') => {
            let mut known: Vec<&str> = defined.keys().map(String::as_str).collect();
            known.extend(WELL_KNOWN.iter().map(|(n, _)| *n));
            let hint = closest(s, &known)
                .map(|k| format!(", did you mean {}?", quote(k)))
                .unwrap_or_default();
            Err(format!("is neither a name defined in bgp-communities nor a community (expected {COMMUNITY_FORMS}){hint}"))
        }
        Err(e) => Err(e),
    }
}

/// One `addresses` entry: a CIDR (host bits cleared, as Go's ParseCIDR) or a range
/// `first-last` summarised into CIDRs.
pub(crate) fn parse_addresses(s: &str) -> Result<Vec<IpNet>, String> {
    // A CIDR is read as Go's net.ParseCIDR reads it: no whitespace. The two ends of a
    // range may have spaces around them (MetalLB trimmed them: "10.0.0.1 - 10.0.0.6").
    let Some((start, end)) = s.split_once('-') else {
        return match cidr(s) {
            Some(net) => Ok(vec![net.trunc()]),
            None if IpAddr::from_str(s).is_ok() => {
                let len = if s.contains(':') { 128 } else { 32 };
                Err(format!(
                    "is not a CIDR or an address range (write \"{s}/{len}\" for one address)"
                ))
            }
            None => Err(format!(
                "is not a CIDR (\"10.0.0.0/24\") or an address range (\"10.0.0.10-10.0.0.20\"){}",
                address_hint::<IpNet>(s)
            )),
        };
    };
    let start_ip = IpAddr::from_str(start.trim()).map(|ip| ip.to_canonical());
    let end_ip = IpAddr::from_str(end.trim()).map(|ip| ip.to_canonical());
    match (start_ip, end_ip) {
        (Err(_), _) => Err(format!(
            "is not an address range: {} is not an IP address",
            quote(start.trim())
        )),
        (_, Err(_)) => Err(format!(
            "is not an address range: {} is not an IP address",
            quote(end.trim())
        )),
        (Ok(IpAddr::V4(a)), Ok(IpAddr::V4(b))) if a <= b => {
            Ok(
                summarize(u128::from(u32::from(a)), u128::from(u32::from(b)), 32)
                    .into_iter()
                    .map(|(n, l)| IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::from(n as u32), l)))
                    .collect(),
            )
        }
        (Ok(IpAddr::V6(a)), Ok(IpAddr::V6(b))) if a <= b => {
            Ok(summarize(u128::from(a), u128::from(b), 128)
                .into_iter()
                .map(|(n, l)| IpNet::V6(Ipv6Net::new_assert(n.into(), l)))
                .collect())
        }
        (Ok(a), Ok(b)) if a.is_ipv4() == b.is_ipv4() => Err(format!(
            "is not an address range: the start {a} is after the end {b}"
        )),
        (Ok(a), Ok(b)) => Err(format!(
            "is not an address range: {a} and {b} are of different address families"
        )),
    }
}

/// The fewest prefixes covering exactly `start..=end` in a `bits`-wide space.
fn summarize(mut start: u128, end: u128, bits: u32) -> Vec<(u128, u8)> {
    let mut out = Vec::new();
    loop {
        // The largest aligned block at `start` that does not pass `end`.
        let mut size = if start == 0 {
            bits
        } else {
            start.trailing_zeros().min(bits)
        };
        let last = |size: u32| {
            if size >= 128 {
                u128::MAX
            } else {
                start + ((1u128 << size) - 1)
            }
        };
        while size > 0 && last(size) > end {
            size -= 1;
        }
        // `size <= bits <= 128`, so the prefix length fits a u8.
        out.push((start, (bits - size) as u8));
        let block_end = last(size);
        if block_end >= end {
            return out;
        }
        start = block_end + 1;
    }
}

/// `address/length`, the address read as everywhere else (std's strict parser: no
/// leading zeros in IPv4 octets, which `ipnet`'s own parser would take).
fn cidr(s: &str) -> Option<IpNet> {
    let (addr, len) = s.split_once('/')?;
    if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    IpNet::new(IpAddr::from_str(addr).ok()?, len.parse().ok()?).ok()
}

/// The hint for an address or CIDR that would be valid without its surrounding
/// whitespace: Go's parsers, and so MetalLB, refused it too, and a quoted `"10.0.0.1 "`
/// is easy to miss.
fn address_hint<T: FromStr>(s: &str) -> &'static str {
    if s.trim() != s && T::from_str(s.trim()).is_ok() {
        ": remove the whitespace around it"
    } else {
        ""
    }
}

fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// A Kubernetes object name (RFC 1123 DNS subdomain): what a Secret may be called.
fn is_dns_subdomain(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.starts_with(alnum)
                && label.ends_with(alnum)
                && label.chars().all(|c| alnum(c) || c == '-')
        })
}

/// A key of a Secret's `data` (Kubernetes' IsConfigMapKey): never a path element of
/// its own (`.`, `..`, `..x`), so `--secrets-dir` reads only NAME/KEY.
fn is_secret_key(s: &str) -> bool {
    s.len() <= 253
        && s != "."
        && !s.starts_with("..")
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn community_forms() {
        let defined: BTreeMap<String, CommunityValue> = [(
            "vpn-only".to_string(),
            CommunityValue::Standard(Community::new(1234, 1)),
        )]
        .into();
        let ok: &[(&str, CommunityValue)] = &[
            (
                "65000:100",
                CommunityValue::Standard(Community::new(65000, 100)),
            ),
            ("0:0", CommunityValue::Standard(Community(0))),
            ("65535:65535", CommunityValue::Standard(Community(u32::MAX))),
            (
                "vpn-only",
                CommunityValue::Standard(Community::new(1234, 1)),
            ),
            ("no-export", CommunityValue::Standard(Community::NO_EXPORT)),
            (
                "no-advertise",
                CommunityValue::Standard(Community(0xFFFF_FF02)),
            ),
            (
                "blackhole",
                CommunityValue::Standard(Community::new(65535, 666)),
            ),
            (
                "large:4200000000:1:2",
                CommunityValue::Large(LargeCommunity {
                    global_admin: 4_200_000_000,
                    local_data1: 1,
                    local_data2: 2,
                }),
            ),
        ];
        for (s, want) in ok {
            assert_eq!(resolve_community(s, &defined).as_ref(), Ok(want), "{s}");
        }
        let forms = "(expected \"a:b\" with a and b from 0 to 65535, or \"large:a:b:c\" with 32-bit numbers)";
        let bad: Vec<(&str, String)> = vec![
            ("65536:1", "is not a community: 65536 is above 65535".into()),
            ("1:65536", "is not a community: 65536 is above 65535".into()),
            ("-1:1", "is not a community: \"-1\" is not a number".into()),
            ("a:b", "is not a community: \"a\" is not a number".into()),
            ("1:2:3", format!("is not a community {forms}")),
            ("large:1:2", format!("is not a community {forms}")),
            ("large:1:2:4294967296", "is not a community: 4294967296 is above 4294967295".into()),
            ("vpn-onyl", format!("is neither a name defined in bgp-communities nor a community {forms}, did you mean \"vpn-only\"?")),
            ("nothing", format!("is neither a name defined in bgp-communities nor a community {forms}")),
            ("", format!("is neither a name defined in bgp-communities nor a community {forms}")),
        ];
        for (s, want) in bad {
            assert_eq!(resolve_community(s, &defined), Err(want), "{s}");
        }
        assert_eq!(Community::new(65000, 100).to_string(), "65000:100");
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn address_forms() {
        let ok: &[(&str, &[&str])] = &[
            ("10.5.112.0/21", &["10.5.112.0/21"]),
            ("10.5.112.7/21", &["10.5.112.0/21"]),
            ("2001:db8::/64", &["2001:db8::/64"]),
            ("10.0.0.0-10.0.0.255", &["10.0.0.0/24"]),
            (
                "10.0.0.1 - 10.0.0.6",
                &["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/31", "10.0.0.6/32"],
            ),
            ("10.0.0.5-10.0.0.5", &["10.0.0.5/32"]),
            ("0.0.0.0-255.255.255.255", &["0.0.0.0/0"]),
            ("::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", &["::/0"]),
            (
                "2001:db8::1-2001:db8::2",
                &["2001:db8::1/128", "2001:db8::2/128"],
            ),
        ];
        for (s, want) in ok {
            assert_eq!(parse_addresses(s), Ok(nets(want)), "{s}");
        }
        let bad: &[(&str, &str)] = &[
            ("10.0.0.1", "is not a CIDR or an address range (write \"10.0.0.1/32\" for one address)"),
            ("2001:db8::1", "is not a CIDR or an address range (write \"2001:db8::1/128\" for one address)"),
            ("10.0.0.0/33", "is not a CIDR (\"10.0.0.0/24\") or an address range (\"10.0.0.10-10.0.0.20\")"),
            ("banana", "is not a CIDR (\"10.0.0.0/24\") or an address range (\"10.0.0.10-10.0.0.20\")"),
            ("10.0.0.9-10.0.0.1", "is not an address range: the start 10.0.0.9 is after the end 10.0.0.1"),
            ("10.0.0.1-2001:db8::1", "is not an address range: 10.0.0.1 and 2001:db8::1 are of different address families"),
            ("10.0.0.1-x", "is not an address range: \"x\" is not an IP address"),
            ("-10.0.0.1", "is not an address range: \"\" is not an IP address"),
            // Go's net.ParseCIDR, as MetalLB, takes no whitespace around a CIDR.
            (" 10.0.0.0/8 ", "is not a CIDR (\"10.0.0.0/24\") or an address range (\"10.0.0.10-10.0.0.20\"): remove the whitespace around it"),
        ];
        for (s, want) in bad {
            assert_eq!(parse_addresses(s), Err(want.to_string()), "{s}");
        }
    }

    #[test]
    fn summarize_covers_exactly() {
        // Every range of a small space: the prefixes are disjoint, aligned, in order,
        // and cover exactly the range.
        for start in 0u128..64 {
            for end in start..64 {
                let prefixes = summarize(start, end, 6);
                let mut next = start;
                for (net, len) in &prefixes {
                    let size = 1u128 << (6 - u32::from(*len));
                    assert_eq!(*net, next, "{start}-{end}");
                    assert_eq!(net % size, 0, "aligned {start}-{end}");
                    next = net + size;
                }
                assert_eq!(next, end + 1, "{start}-{end}");
                assert!(prefixes.len() <= 2 * 6);
            }
        }
    }
}
