//! The OPEN exchange: the OPEN we send, the checks on the peer's OPEN (RFC 4271 section
//! 6.2 as updated by RFC 6286, RFC 6793 and RFC 5492) and the capability negotiation whose
//! result, [`Negotiated`], drives the rest of the session and the codec's [`Context`].
//!
//! Pure functions of the configuration and the received message: no timers, no state.

use super::SessionConfig;
use crate::bgp::wire::{
    unsupported_capabilities, AfiSafi, Capability, Context, DecodeError, ExtendedNextHopFamily,
    GracefulRestart, GracefulRestartFamily, Notification, Open, AS_TRANS, BGP_VERSION,
};
use bytes::Bytes;
use std::net::Ipv4Addr;

/// What both sides agreed on, from our configuration and the peer's accepted OPEN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// min(ours, peer's) (RFC 4271 section 4.2); 0 means no KEEPALIVEs and no hold timer.
    pub hold_time: u16,
    /// Seconds between our KEEPALIVEs: the configured interval or a third of the hold time,
    /// never more than a third of it; 0 when `hold_time` is 0.
    pub keepalive: u16,
    /// Both sides advertised the 4-octet AS capability (RFC 6793).
    pub four_octet_as: bool,
    pub local_asn: u32,
    pub peer_asn: u32,
    pub peer_id: Ipv4Addr,
    pub ibgp: bool,
    /// The families both sides offered, in our configured order. A peer that sends no
    /// Multiprotocol capability at all speaks IPv4 unicast only (RFC 4760 section 8).
    pub families: Vec<AfiSafi>,
    /// Both advertised route refresh (RFC 2918).
    pub route_refresh: bool,
    /// Both advertised enhanced route refresh (RFC 7313): we bracket a re-advertisement
    /// with BoRR/EoRR.
    pub enhanced_route_refresh: bool,
    /// Both advertised extended messages (RFC 8654).
    pub extended_message: bool,
    /// Both advertised IPv4 unicast with an IPv6 next hop (RFC 8950 section 4): our IPv4
    /// routes may go in MP_REACH_NLRI with an IPv6 next hop.
    pub extended_next_hop_ipv4: bool,
    /// Both advertised graceful restart (RFC 4724): a restart of this speaker may close
    /// the connection without a NOTIFICATION and the peer keeps our routes as stale.
    pub graceful_restart: bool,
    /// The peer's graceful restart capability (the last one it sent, RFC 4724 section 3).
    pub peer_graceful_restart: Option<GracefulRestart>,
    /// The peer's hold time offer, for `status` output.
    pub peer_hold_time: u16,
}

impl Negotiated {
    /// How the codec must read and write this session's messages. ADD-PATH is never in
    /// force: we do not advertise it, so the peer must not send path identifiers and we
    /// never send them.
    pub fn context(&self) -> Context {
        Context {
            four_octet_as: self.four_octet_as,
            extended_message: self.extended_message,
            add_path_ipv4_unicast: false,
            add_path_ipv6_unicast: false,
        }
    }

    pub fn has_family(&self, afi_safi: AfiSafi) -> bool {
        self.families.contains(&afi_safi)
    }
}

/// The OPEN we send (RFC 4271 section 4.2). The 4-octet AS capability is always present
/// (RFC 6793 section 3); "My Autonomous System" is AS_TRANS when our AS needs four octets.
/// `restarting`: the Restart State bit of the graceful restart capability.
pub(crate) fn local_open(cfg: &SessionConfig, restarting: bool) -> Open {
    let mut capabilities: Vec<Capability> = cfg
        .families
        .iter()
        .map(|f| Capability::Multiprotocol(*f))
        .collect();
    if cfg.extended_next_hop && cfg.families.contains(&AfiSafi::IPV4_UNICAST) {
        capabilities.push(Capability::ExtendedNextHop(vec![
            ExtendedNextHopFamily::IPV4_UNICAST_OVER_IPV6,
        ]));
    }
    if cfg.route_refresh {
        capabilities.push(Capability::RouteRefresh);
        capabilities.push(Capability::EnhancedRouteRefresh);
    }
    if cfg.extended_message {
        capabilities.push(Capability::ExtendedMessage);
    }
    if let Some(gr) = cfg.graceful_restart {
        capabilities.push(Capability::GracefulRestart(GracefulRestart {
            // RFC 4724 section 4.1: set in the OPENs of a speaker that has restarted, so
            // that the peer does not wait for our End-of-RIB before sending its routes
            // (we never wait for the peer's: we select no route from them). A process
            // cannot tell a restart from a first start, and claiming one costs nothing
            // on a first start: the peer holds no stale routes of ours to keep.
            restart_state: restarting,
            notification: false,
            restart_time: gr.restart_time,
            families: cfg
                .families
                .iter()
                .map(|f| GracefulRestartFamily {
                    afi_safi: *f,
                    forwarding_preserved: gr.forwarding_preserved,
                })
                .collect(),
        }));
    }
    capabilities.push(Capability::FourOctetAs(cfg.local_asn));
    Open {
        version: BGP_VERSION,
        my_as: u16::try_from(cfg.local_asn).unwrap_or(AS_TRANS),
        hold_time: cfg.hold_time,
        bgp_id: cfg.router_id,
        capabilities,
        other_params: Vec::new(),
    }
}

/// Checks the peer's OPEN in the order of RFC 4271 section 6.2 and negotiates. On error,
/// the NOTIFICATION to send.
///
/// We require no capability but one: a family in common. A session that can carry none of
/// our routes is refused with Unsupported Capability listing the Multiprotocol
/// capabilities we need (RFC 5492 section 5). Everything else degrades: no 4-octet AS
/// means 2-octet AS_PATHs, no route refresh means we never re-advertise on request, and so
/// on.
pub(crate) fn negotiate(cfg: &SessionConfig, peer: &Open) -> Result<Negotiated, Notification> {
    if peer.version != BGP_VERSION {
        // RFC 4271 section 6.2: the data is the largest locally supported version, 2 octets.
        return Err(DecodeError::UnsupportedVersion {
            version: peer.version,
        }
        .notification());
    }
    let peer_asn = peer.asn();
    if peer_asn != cfg.peer_asn {
        return Err(DecodeError::BadPeerAs { asn: peer_asn }.notification());
    }
    if matches!(peer.hold_time, 1 | 2) {
        return Err(DecodeError::UnacceptableHoldTime {
            hold_time: peer.hold_time,
        }
        .notification());
    }
    let ibgp = cfg.is_ibgp();
    // RFC 6286 section 2.2: zero is never valid; equal identifiers only inside one AS.
    if peer.bgp_id.is_unspecified() || (ibgp && peer.bgp_id == cfg.router_id) {
        return Err(DecodeError::BadBgpId { id: peer.bgp_id }.notification());
    }
    if !peer.other_params.is_empty() {
        let param_type = peer.other_params.first().map_or(0, |(t, _)| *t);
        return Err(DecodeError::UnsupportedOptionalParameter { param_type }.notification());
    }

    let peer_families: Vec<AfiSafi> = peer
        .capabilities
        .iter()
        .filter_map(|c| match c {
            Capability::Multiprotocol(f) => Some(*f),
            _ => None,
        })
        .collect();
    let families: Vec<AfiSafi> = cfg
        .families
        .iter()
        .copied()
        .filter(|f| {
            if peer_families.is_empty() {
                *f == AfiSafi::IPV4_UNICAST
            } else {
                peer_families.contains(f)
            }
        })
        .collect();
    if families.is_empty() {
        let ours: Vec<Capability> = cfg
            .families
            .iter()
            .map(|f| Capability::Multiprotocol(*f))
            .collect();
        // Multiprotocol TLVs are 6 octets each: encoding them cannot fail, and an empty
        // data field would still be a valid NOTIFICATION (RFC 5492 section 5).
        let error = unsupported_capabilities(&ours).unwrap_or(DecodeError::UnsupportedCapability {
            capabilities: Bytes::new(),
        });
        return Err(error.notification());
    }

    let has = |want: fn(&Capability) -> bool| peer.capabilities.iter().any(want);
    let peer_gr = peer.capabilities.iter().rev().find_map(|c| match c {
        Capability::GracefulRestart(gr) => Some(gr.clone()),
        _ => None,
    });
    let extended_next_hop_ipv4 = cfg.extended_next_hop
        && families.contains(&AfiSafi::IPV4_UNICAST)
        && has(|c| {
            matches!(c, Capability::ExtendedNextHop(list)
                if list.contains(&ExtendedNextHopFamily::IPV4_UNICAST_OVER_IPV6))
        });
    let hold_time = cfg.hold_time.min(peer.hold_time);
    let keepalive = if hold_time == 0 {
        0
    } else {
        cfg.keepalive.unwrap_or(hold_time / 3).min(hold_time / 3)
    };
    Ok(Negotiated {
        hold_time,
        keepalive,
        four_octet_as: has(|c| matches!(c, Capability::FourOctetAs(_))),
        local_asn: cfg.local_asn,
        peer_asn,
        peer_id: peer.bgp_id,
        ibgp,
        families,
        route_refresh: cfg.route_refresh && has(|c| matches!(c, Capability::RouteRefresh)),
        enhanced_route_refresh: cfg.route_refresh
            && has(|c| matches!(c, Capability::EnhancedRouteRefresh)),
        extended_message: cfg.extended_message && has(|c| matches!(c, Capability::ExtendedMessage)),
        extended_next_hop_ipv4,
        graceful_restart: cfg.graceful_restart.is_some() && peer_gr.is_some(),
        peer_graceful_restart: peer_gr,
        peer_hold_time: peer.hold_time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cfg() -> SessionConfig {
        SessionConfig {
            local_asn: 4_200_000_001,
            peer_asn: 65000,
            router_id: Ipv4Addr::new(192, 0, 2, 1),
            hold_time: 90,
            keepalive: None,
            connect_retry: Duration::from_secs(5),
            passive: false,
            delay_open: None,
            graceful_restart: Some(super::super::GrConfig {
                restart_time: 120,
                forwarding_preserved: true,
            }),
            families: vec![AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST],
            extended_message: true,
            extended_next_hop: true,
            route_refresh: true,
            max_prefix: None,
            jitter_seed: 1,
        }
    }

    fn peer_open() -> Open {
        Open {
            version: 4,
            my_as: 65000,
            hold_time: 30,
            bgp_id: Ipv4Addr::new(192, 0, 2, 254),
            capabilities: vec![
                Capability::Multiprotocol(AfiSafi::IPV4_UNICAST),
                Capability::RouteRefresh,
                Capability::FourOctetAs(65000),
            ],
            other_params: vec![],
        }
    }

    #[test]
    fn local_open_uses_as_trans_and_lists_every_capability() {
        let open = local_open(&cfg(), false);
        assert_eq!(open.my_as, AS_TRANS);
        assert_eq!(open.asn(), 4_200_000_001);
        assert_eq!(open.version, 4);
        assert_eq!(open.hold_time, 90);
        assert!(open
            .capabilities
            .contains(&Capability::Multiprotocol(AfiSafi::IPV6_UNICAST)));
        assert!(open
            .capabilities
            .contains(&Capability::EnhancedRouteRefresh));
        assert!(open.capabilities.contains(&Capability::ExtendedMessage));
        let gr = open
            .capabilities
            .iter()
            .find_map(|c| match c {
                Capability::GracefulRestart(gr) => Some(gr),
                _ => None,
            })
            .expect("graceful restart advertised");
        assert_eq!(gr.restart_time, 120);
        assert!(!gr.restart_state);
        assert_eq!(gr.families.len(), 2);
        assert!(gr.families.iter().all(|f| f.forwarding_preserved));
        let restarting = local_open(&cfg(), true);
        assert_eq!(
            restarting.capabilities.iter().find_map(|c| match c {
                Capability::GracefulRestart(gr) => Some(gr.restart_state),
                _ => None,
            }),
            Some(true)
        );
    }

    #[test]
    fn local_open_with_two_octet_as_puts_it_in_my_as() {
        let open = local_open(
            &SessionConfig {
                local_asn: 64512,
                route_refresh: false,
                graceful_restart: None,
                extended_message: false,
                extended_next_hop: false,
                ..cfg()
            },
            true,
        );
        assert_eq!(open.my_as, 64512);
        assert_eq!(
            open.capabilities,
            vec![
                Capability::Multiprotocol(AfiSafi::IPV4_UNICAST),
                Capability::Multiprotocol(AfiSafi::IPV6_UNICAST),
                Capability::FourOctetAs(64512),
            ]
        );
    }

    #[test]
    fn negotiates_the_intersection() {
        let n = negotiate(&cfg(), &peer_open()).unwrap();
        assert_eq!(n.hold_time, 30);
        assert_eq!(n.keepalive, 10);
        assert!(n.four_octet_as);
        assert!(!n.ibgp);
        assert_eq!(n.families, vec![AfiSafi::IPV4_UNICAST]);
        assert!(n.route_refresh);
        assert!(!n.enhanced_route_refresh);
        assert!(!n.extended_message);
        assert!(!n.graceful_restart);
        assert_eq!(n.peer_graceful_restart, None);
        assert_eq!(
            n.context(),
            Context {
                four_octet_as: true,
                ..Context::default()
            }
        );
    }

    #[test]
    fn extended_next_hop_is_offered_and_in_force_only_when_both_sides_offer_it() {
        let cap = Capability::ExtendedNextHop(vec![ExtendedNextHopFamily::IPV4_UNICAST_OVER_IPV6]);
        assert!(local_open(&cfg(), false).capabilities.contains(&cap));
        let off = SessionConfig {
            extended_next_hop: false,
            ..cfg()
        };
        assert!(!local_open(&off, false).capabilities.contains(&cap));
        let mut open = peer_open();
        assert!(!negotiate(&cfg(), &open).unwrap().extended_next_hop_ipv4);
        open.capabilities.push(cap);
        assert!(negotiate(&cfg(), &open).unwrap().extended_next_hop_ipv4);
        assert!(!negotiate(&off, &open).unwrap().extended_next_hop_ipv4);
        // Another family, or IPv4 with another next hop family, is not ours.
        let mut other = peer_open();
        other
            .capabilities
            .push(Capability::ExtendedNextHop(vec![ExtendedNextHopFamily {
                afi_safi: AfiSafi::IPV4_UNICAST,
                next_hop_afi: crate::bgp::wire::Afi(25),
            }]));
        assert!(!negotiate(&cfg(), &other).unwrap().extended_next_hop_ipv4);
    }

    #[test]
    fn keepalive_is_the_configured_value_capped_at_a_third() {
        let n = negotiate(
            &SessionConfig {
                keepalive: Some(5),
                ..cfg()
            },
            &peer_open(),
        )
        .unwrap();
        assert_eq!(n.keepalive, 5);
        let n = negotiate(
            &SessionConfig {
                keepalive: Some(60),
                ..cfg()
            },
            &peer_open(),
        )
        .unwrap();
        assert_eq!(n.keepalive, 10);
        let zero = Open {
            hold_time: 0,
            ..peer_open()
        };
        let n = negotiate(&cfg(), &zero).unwrap();
        assert_eq!((n.hold_time, n.keepalive), (0, 0));
    }

    #[test]
    fn peer_without_multiprotocol_speaks_ipv4_unicast() {
        let open = Open {
            capabilities: vec![Capability::FourOctetAs(65000)],
            ..peer_open()
        };
        assert_eq!(
            negotiate(&cfg(), &open).unwrap().families,
            vec![AfiSafi::IPV4_UNICAST]
        );
        let v6_only = SessionConfig {
            families: vec![AfiSafi::IPV6_UNICAST],
            ..cfg()
        };
        let err = negotiate(&v6_only, &open).unwrap_err();
        assert_eq!((err.code, err.subcode), (0x02, 0x07));
        assert_eq!(&err.data[..], &[0x01, 0x04, 0x00, 0x02, 0x00, 0x01]);
    }

    #[test]
    fn last_graceful_restart_capability_wins() {
        let gr = |t| {
            Capability::GracefulRestart(GracefulRestart {
                restart_state: false,
                notification: false,
                restart_time: t,
                families: vec![],
            })
        };
        let mut open = peer_open();
        open.capabilities.push(gr(10));
        open.capabilities.push(gr(20));
        let n = negotiate(&cfg(), &open).unwrap();
        assert!(n.graceful_restart);
        assert_eq!(n.peer_graceful_restart.unwrap().restart_time, 20);
    }

    #[test]
    fn open_errors_in_rfc_order() {
        let code = |cfg: &SessionConfig, open: &Open| {
            let e = negotiate(cfg, open).unwrap_err();
            (e.code, e.subcode, e.data.to_vec())
        };
        let c = cfg();
        assert_eq!(
            code(
                &c,
                &Open {
                    version: 3,
                    ..peer_open()
                }
            ),
            (2, 1, vec![0x00, 0x04])
        );
        // A version error wins over a bad AS in the same message.
        assert_eq!(
            code(
                &c,
                &Open {
                    version: 5,
                    my_as: 1,
                    ..peer_open()
                }
            )
            .1,
            1
        );
        let wrong_as = Open {
            capabilities: vec![Capability::FourOctetAs(65001)],
            ..peer_open()
        };
        assert_eq!(code(&c, &wrong_as), (2, 2, vec![]));
        assert_eq!(
            code(
                &c,
                &Open {
                    hold_time: 2,
                    ..peer_open()
                }
            ),
            (2, 6, vec![])
        );
        assert_eq!(
            code(
                &c,
                &Open {
                    bgp_id: Ipv4Addr::UNSPECIFIED,
                    ..peer_open()
                }
            ),
            (2, 3, vec![])
        );
        let with_param = Open {
            other_params: vec![(1, Bytes::from_static(&[0x00]))],
            ..peer_open()
        };
        assert_eq!(code(&c, &with_param), (2, 4, vec![]));
    }

    #[test]
    fn as_trans_without_capability_is_a_bad_peer_as() {
        let c = SessionConfig {
            peer_asn: 4_200_000_000,
            ..cfg()
        };
        let open = Open {
            my_as: AS_TRANS,
            capabilities: vec![],
            ..peer_open()
        };
        assert_eq!(negotiate(&c, &open).unwrap_err().subcode, 2);
        let with_cap = Open {
            my_as: AS_TRANS,
            capabilities: vec![Capability::FourOctetAs(4_200_000_000)],
            ..peer_open()
        };
        assert_eq!(negotiate(&c, &with_cap).unwrap().peer_asn, 4_200_000_000);
    }

    #[test]
    fn equal_identifiers_only_refused_for_ibgp() {
        let same_id = Open {
            bgp_id: cfg().router_id,
            ..peer_open()
        };
        assert!(
            negotiate(&cfg(), &same_id).is_ok(),
            "ebgp may share the identifier"
        );
        let ibgp = SessionConfig {
            local_asn: 65000,
            ..cfg()
        };
        let err = negotiate(&ibgp, &same_id).unwrap_err();
        assert_eq!((err.code, err.subcode), (2, 3));
        assert!(negotiate(&ibgp, &peer_open()).unwrap().ibgp);
    }
}
