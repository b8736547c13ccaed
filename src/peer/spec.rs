//! [`PeerSpec`]: everything one peer task needs, built from a validated `config::Peer`
//! and what the daemon knows at run time ([`RunOverrides`]): the session configuration
//! (src/bgp/session) and the transport options. Next hops are not here: the planner
//! writes them into the routes (`routes::next_hop`). Pure: reads no file, no socket, no
//! clock.

use super::bfd::{BfdSpec, SINGLE_HOP_TTL};
use super::transport::{Transport, TtlPolicy};
use super::PeerError;
use crate::bgp::session::{GrConfig, MaxPrefix, MaxPrefixAction, SessionConfig};
use crate::bgp::wire::AfiSafi;
use crate::config::{self, PeerKey, Secret};
use crate::routes;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// How long a dial may take before it is abandoned; the session's ConnectRetry timer
/// then paces the next attempt.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the daemon knows at run time, as it knows it: the flags and the local node's
/// addresses. [`PeerSpec::from_config`] is the one place that turns them into the
/// fallbacks of fields the peer's configuration leaves unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOverrides {
    /// `--source-address`: the source address of sessions whose `source-address` is
    /// unset; ignored for peers of the other family.
    pub source_address: Option<IpAddr>,
    /// `--router-id`: the BGP Identifier of peers whose `router-id` is unset.
    pub router_id: Option<Ipv4Addr>,
    /// The local node's IPv4 InternalIP.
    pub node_ipv4: Option<Ipv4Addr>,
    /// The local node's name, from which a router id is derived when nothing else gives
    /// one; `None`: no derivation (a peer without an identifier is refused).
    pub node_name: Option<Arc<str>>,
    /// Speaker-wide: how long routes carry GRACEFUL_SHUTDOWN before they are withdrawn
    /// when the session stops for good (`--graceful-shutdown-time`; zero: at once).
    pub graceful_shutdown: Duration,
}

impl RunOverrides {
    /// The BGP Identifier of a peer without `router-id`: the one rule of
    /// [`routes::router_id`] (`--router-id`, else the node's IPv4 InternalIP, else an
    /// IPv4 `--source-address`, else derived from the node name).
    fn router_id(&self) -> Option<Ipv4Addr> {
        let source_v4 = match self.source_address {
            Some(IpAddr::V4(a)) => Some(a),
            _ => None,
        };
        match &self.node_name {
            Some(node) => Some(
                routes::router_id::router_id(self.router_id, self.node_ipv4, source_v4, node).0,
            ),
            None => routes::router_id::given(self.router_id, self.node_ipv4, source_v4)
                .map(|(id, _)| id),
        }
    }
}

/// Everything one peer task needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSpec {
    pub key: PeerKey,
    pub session: SessionConfig,
    pub transport: Transport,
    /// Next hops of `NextHop::SessionLocal` routes in the family the session's local
    /// The BFD session run beside the BGP session (its `bfd-profile`), whose failure
    /// tears the BGP session down (RFC 5882).
    pub bfd: Option<BfdSpec>,
    /// How long a session that stops for good (no graceful restart in force) keeps our
    /// routes, re-advertised with GRACEFUL_SHUTDOWN (RFC 8326), before it withdraws them
    /// and sends its Cease. Zero: the Cease at once.
    pub graceful_shutdown: Duration,
}

/// What the daemon resolved for one peer before its spec is built: the TCP MD5 key its
/// `password` or `password-secret` gives, and the address its session binds (the
/// planner's `PeerPlan::source_address`, `routes::source_address`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub md5_key: Option<Secret>,
    pub source: Option<IpAddr>,
}

impl Resolved {
    /// From the config alone: the peer's `password`, and the source address by the
    /// planner's rule (what a peer without `password-secret` resolves to).
    pub fn of(peer: &config::Peer, run: &RunOverrides) -> Resolved {
        Resolved {
            md5_key: peer.password.clone(),
            source: routes::source_address(
                peer,
                &routes::Overrides {
                    source_address: run.source_address,
                },
            ),
        }
    }
}

impl PeerSpec {
    /// The spec of one configured peer whose key and source address come from the
    /// config alone ([`Resolved::of`]); see [`PeerSpec::from_resolved`].
    pub fn from_config(peer: &config::Peer, run: &RunOverrides) -> Result<PeerSpec, PeerError> {
        PeerSpec::from_resolved(peer, run, Resolved::of(peer, run))
    }

    /// The spec of one configured peer with what the daemon resolved for it: the one
    /// place a spec is built. Fails when no router id is known, when the source address
    /// is of the other family, when the key breaks the config's rule
    /// (`Md5KeyProblem`), or when the session configuration is refused.
    pub fn from_resolved(
        peer: &config::Peer,
        run: &RunOverrides,
        resolved: Resolved,
    ) -> Result<PeerSpec, PeerError> {
        let router_id = peer
            .router_id
            .or(run.router_id())
            .ok_or(PeerError::InvalidSpec {
                field: "router-id",
                reason: "not configured and the node has no IPv4 address to use".into(),
            })?;
        if let Some(a) = peer.source_address {
            // Validated configs never have this; a hand-built one must not reach bind().
            if a.is_ipv4() != peer.address.is_ipv4() {
                return Err(PeerError::InvalidSpec {
                    field: "source-address",
                    reason: format!("{a} is not of the family of peer-address {}", peer.address),
                });
            }
        }
        let Resolved { md5_key, source } = resolved;
        // Validated configs and Secrets never break it (config owns the rule); a
        // hand-built peer must not reach the socket option.
        if let Some(problem) = md5_key
            .as_ref()
            .and_then(|k| config::Md5KeyProblem::of(k.expose()))
        {
            return Err(PeerError::InvalidSpec {
                field: "password",
                reason: problem.to_string(),
            });
        }
        let ttl = if peer.ttl_security {
            TtlPolicy::Gtsm
        } else if peer.is_ibgp() || peer.ebgp_multihop {
            TtlPolicy::Multihop
        } else {
            TtlPolicy::Direct
        };
        let session = SessionConfig {
            local_asn: peer.my_asn,
            peer_asn: peer.peer_asn,
            router_id,
            hold_time: secs_u16("hold-time", peer.hold_time)?,
            keepalive: Some(secs_u16("keepalive-time", peer.keepalive_time)?),
            connect_retry: peer.connect_retry_time,
            passive: peer.passive,
            delay_open: None,
            graceful_restart: if peer.graceful_restart {
                Some(GrConfig {
                    restart_time: secs_u16("graceful-restart-time", peer.graceful_restart_time)?,
                    // The routes point at pods, not at this speaker: forwarding goes on
                    // while it restarts (RFC 4724 section 3, F bit).
                    forwarding_preserved: true,
                })
            } else {
                None
            },
            // Both families on every session: IPv6 pod CIDRs travel over IPv4 sessions
            // (and the reverse) with MP-BGP (RFC 4760) when the peer agrees.
            families: vec![AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST],
            extended_message: true,
            // IPv4 pod CIDRs over an IPv6 session without an IPv4 address to point at
            // travel with the session's IPv6 address (RFC 8950) when the peer agrees.
            extended_next_hop: peer.address.is_ipv6(),
            route_refresh: true,
            max_prefix: peer.max_prefix.map(|m| MaxPrefix {
                limit: m.limit,
                action: match m.action {
                    config::PrefixLimitAction::Warn => MaxPrefixAction::Warn,
                    config::PrefixLimitAction::Cease => MaxPrefixAction::Cease,
                },
            }),
            jitter_seed: jitter_seed(peer.key(), router_id),
        };
        session.validate()?;
        Ok(PeerSpec {
            key: peer.key(),
            session,
            transport: Transport {
                remote: SocketAddr::new(peer.address, peer.port),
                source,
                md5_key,
                ttl,
                connect_timeout: CONNECT_TIMEOUT,
            },
            bfd: peer.bfd.as_ref().map(|p| bfd_spec(p, peer, source)),
            graceful_shutdown: run.graceful_shutdown,
        })
    }
}

/// The BFD session of `peer` from its resolved profile (`BfdProfile::session_config`
/// and `minimum_ttl_in_force`, the one mapping of a profile and its defaults): multihop
/// (RFC 5883) exactly when the BGP session is `ebgp-multihop`, single-hop (RFC 5881, TTL
/// 255 required) otherwise, from the BGP session's source address.
fn bfd_spec(profile: &config::BfdProfile, peer: &config::Peer, source: Option<IpAddr>) -> BfdSpec {
    let multihop = peer.ebgp_multihop;
    BfdSpec {
        profile: profile.name.clone(),
        session: profile.session_config(),
        multihop,
        min_ttl: if multihop {
            profile.minimum_ttl_in_force()
        } else {
            SINGLE_HOP_TTL
        },
        remote: peer.address,
        source,
    }
}

fn secs_u16(field: &'static str, d: Duration) -> Result<u16, PeerError> {
    u16::try_from(d.as_secs()).map_err(|_| PeerError::InvalidSpec {
        field,
        reason: format!("{}s does not fit 16 bits", d.as_secs()),
    })
}

/// Speakers started together must not retry in step (RFC 4271 section 10), yet one
/// speaker's choice must be reproducible: derived from who talks to whom.
fn jitter_seed(key: PeerKey, router_id: Ipv4Addr) -> u64 {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    router_id.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn peer(yaml_peer: &str) -> config::Peer {
        let text = format!("peers:\n{yaml_peer}");
        let cfg = config::parse(&text).unwrap_or_else(|e| panic!("{e}"));
        cfg.peers.into_iter().next().unwrap()
    }

    fn run() -> RunOverrides {
        RunOverrides {
            source_address: Some("192.0.2.10".parse().unwrap()),
            router_id: Some(Ipv4Addr::new(192, 0, 2, 10)),
            node_ipv4: Some(Ipv4Addr::new(192, 0, 2, 10)),
            node_name: None,
            graceful_shutdown: Duration::ZERO,
        }
    }

    #[test]
    fn ebgp_peer_maps_to_session_and_transport() {
        let p = peer(
            "  - peer-address: 192.0.2.1\n    peer-asn: 65000\n    my-asn: 4200000001\n    \
             hold-time: 9s\n    password: s3cret\n    graceful-restart: true\n    \
             graceful-restart-time: 60s\n    connect-retry-time: 2s\n",
        );
        let spec = PeerSpec::from_config(&p, &run()).unwrap();
        assert_eq!(spec.key, p.key());
        let s = &spec.session;
        assert_eq!((s.local_asn, s.peer_asn), (4_200_000_001, 65000));
        assert_eq!(s.router_id, Ipv4Addr::new(192, 0, 2, 10));
        assert_eq!((s.hold_time, s.keepalive), (9, Some(3)));
        assert_eq!(s.connect_retry, Duration::from_secs(2));
        assert_eq!(
            s.graceful_restart,
            Some(GrConfig {
                restart_time: 60,
                forwarding_preserved: true
            })
        );
        assert_eq!(
            s.families,
            vec![AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST]
        );
        let t = &spec.transport;
        assert_eq!(t.remote, "192.0.2.1:179".parse().unwrap());
        assert_eq!(t.source, Some("192.0.2.10".parse().unwrap()));
        assert_eq!(t.md5_key.as_ref().map(Secret::expose), Some("s3cret"));
        assert_eq!(t.ttl, TtlPolicy::Direct);
        // RFC 8950 is offered on IPv6 sessions only.
        assert!(!s.extended_next_hop);
    }

    #[test]
    fn ttl_policy_follows_ibgp_multihop_and_gtsm() {
        let ibgp = peer("  - peer-address: 192.0.2.1\n    peer-asn: 65000\n    my-asn: 65000\n");
        assert_eq!(
            PeerSpec::from_config(&ibgp, &run()).unwrap().transport.ttl,
            TtlPolicy::Multihop
        );
        let multihop = peer(
            "  - peer-address: 192.0.2.1\n    peer-asn: 65000\n    my-asn: 65001\n    \
             ebgp-multihop: true\n",
        );
        assert_eq!(
            PeerSpec::from_config(&multihop, &run())
                .unwrap()
                .transport
                .ttl,
            TtlPolicy::Multihop
        );
        let gtsm = peer(
            "  - peer-address: 192.0.2.1\n    peer-asn: 65000\n    my-asn: 65001\n    \
             ttl-security: true\n",
        );
        let t = PeerSpec::from_config(&gtsm, &run()).unwrap().transport.ttl;
        assert_eq!((t, t.ttl(), t.min_ttl()), (TtlPolicy::Gtsm, 255, Some(255)));
        assert_eq!(
            (TtlPolicy::Direct.ttl(), TtlPolicy::Direct.min_ttl()),
            (1, None)
        );
    }

    #[test]
    fn configured_values_win_over_run_time_ones() {
        let p = peer(
            "  - peer-address: 192.0.2.1\n    peer-asn: 65000\n    my-asn: 65001\n    \
             router-id: 198.51.100.7\n    source-address: 192.0.2.99\n",
        );
        let spec = PeerSpec::from_config(&p, &run()).unwrap();
        assert_eq!(spec.session.router_id, Ipv4Addr::new(198, 51, 100, 7));
        assert_eq!(spec.transport.source, Some("192.0.2.99".parse().unwrap()));
    }

    #[test]
    fn a_run_time_source_of_the_other_family_is_not_used() {
        let p = peer("  - peer-address: 2001:db8::1\n    peer-asn: 65000\n    my-asn: 65001\n");
        let spec = PeerSpec::from_config(&p, &run()).unwrap();
        assert!(spec.session.extended_next_hop);
        assert_eq!(spec.transport.source, None);
        assert_eq!(spec.transport.remote, "[2001:db8::1]:179".parse().unwrap());
    }

    #[test]
    fn router_id_falls_back_from_the_flag_to_the_node_to_the_source_to_the_name() {
        let p = peer("  - peer-address: 192.0.2.1\n    peer-asn: 65000\n    my-asn: 65001\n");
        let id = |run: &RunOverrides| PeerSpec::from_config(&p, run).unwrap().session.router_id;
        let flag = Ipv4Addr::new(192, 0, 2, 99);
        let node = Ipv4Addr::new(192, 0, 2, 10);
        let source = Ipv4Addr::new(192, 0, 2, 20);
        let run = RunOverrides {
            source_address: Some(IpAddr::V4(source)),
            router_id: Some(flag),
            node_ipv4: Some(node),
            node_name: Some(Arc::from("n1")),
            graceful_shutdown: Duration::ZERO,
        };
        assert_eq!(id(&run), flag);
        let run = RunOverrides {
            router_id: None,
            ..run
        };
        assert_eq!(id(&run), node);
        let run = RunOverrides {
            node_ipv4: None,
            ..run
        };
        assert_eq!(id(&run), source);
        let run = RunOverrides {
            source_address: None,
            ..run
        };
        assert_eq!(id(&run), routes::router_id::derived("n1"));
    }

    #[test]
    fn refuses_what_it_cannot_run_naming_the_field() {
        let p = peer("  - peer-address: 192.0.2.1\n    peer-asn: 65000\n    my-asn: 65001\n");
        // No --router-id, no IPv4 InternalIP, no IPv4 --source-address.
        let no_id = RunOverrides {
            router_id: None,
            node_ipv4: None,
            source_address: Some("2001:db8::10".parse().unwrap()),
            ..run()
        };
        match PeerSpec::from_config(&p, &no_id) {
            Err(PeerError::InvalidSpec { field, .. }) => assert_eq!(field, "router-id"),
            other => panic!("{other:?}"),
        }
        let long_key = config::Peer {
            password: Some(Secret::new("k".repeat(81))),
            ..p.clone()
        };
        match PeerSpec::from_config(&long_key, &run()) {
            Err(PeerError::InvalidSpec { field, .. }) => assert_eq!(field, "password"),
            other => panic!("{other:?}"),
        }
        let mixed = config::Peer {
            source_address: Some("2001:db8::9".parse().unwrap()),
            ..p
        };
        match PeerSpec::from_config(&mixed, &run()) {
            Err(PeerError::InvalidSpec { field, .. }) => assert_eq!(field, "source-address"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn jitter_seed_differs_per_peer_and_is_stable() {
        let a = PeerKey {
            address: "192.0.2.1".parse().unwrap(),
            port: 179,
        };
        let b = PeerKey {
            address: "192.0.2.2".parse().unwrap(),
            port: 179,
        };
        let id = Ipv4Addr::new(192, 0, 2, 10);
        assert_eq!(jitter_seed(a, id), jitter_seed(a, id));
        assert_ne!(jitter_seed(a, id), jitter_seed(b, id));
    }
}
