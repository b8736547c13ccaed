//! What one session needs to know about its peer and itself. The peer driver builds a
//! [`SessionConfig`] from the validated configuration; [`SessionConfig::validate`] refuses
//! the values the state machine cannot run with, so that no later arithmetic or protocol
//! rule can trip over them. Reads no files and no environment.

use super::SessionError;
use crate::bgp::wire::{AfiSafi, AS_TRANS};
use std::net::Ipv4Addr;
use std::time::Duration;

/// The largest ConnectRetryTime and DelayOpenTime accepted: both are 2-octet second counts
/// in RFC 4271 section 8 terms, and bounding them keeps every deadline computation far
/// from `Instant` overflow.
pub const MAX_TIMER: Duration = Duration::from_secs(u16::MAX as u64);

/// RFC 4724 section 3: the restart time is a 12-bit field.
pub const MAX_RESTART_TIME: u16 = 0x0fff;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    pub local_asn: u32,
    pub peer_asn: u32,
    /// Our BGP Identifier (RFC 6286: any non-zero 32-bit value).
    pub router_id: Ipv4Addr,
    /// The hold time we offer: 0 (no keepalives) or at least 3 seconds (RFC 4271 section
    /// 4.2); the session uses the smaller of ours and the peer's.
    pub hold_time: u16,
    /// The keepalive interval; `None` means a third of the negotiated hold time. Never
    /// more than a third of the negotiated hold time whatever is configured.
    pub keepalive: Option<u16>,
    /// The ConnectRetryTime (RFC 4271 section 10): the longest wait between two attempts
    /// (the retry delay starts at [`super::FIRST_RETRY`] and doubles on each consecutive
    /// failure up to it, jittered), and how long a dial may take.
    pub connect_retry: Duration,
    /// Never dial: only accept the peer's connections (RFC 4271
    /// PassiveTcpEstablishment, without the later active attempt).
    pub passive: bool,
    /// DelayOpen (RFC 4271 section 8.1.1): wait this long after the connection is up
    /// before sending OPEN, and answer a peer OPEN received meanwhile at once.
    pub delay_open: Option<Duration>,
    /// Advertise graceful restart (RFC 4724) as a restarting speaker.
    pub graceful_restart: Option<GrConfig>,
    /// The families we offer (Multiprotocol capabilities, RFC 4760); IPv4 and IPv6
    /// unicast.
    pub families: Vec<AfiSafi>,
    /// Offer extended messages (RFC 8654).
    pub extended_message: bool,
    /// Offer to receive IPv4 unicast with an IPv6 next hop (RFC 8950 Extended Next Hop
    /// Encoding); we send such routes only when the peer offers it too.
    pub extended_next_hop: bool,
    /// Offer route refresh (RFC 2918) and enhanced route refresh (RFC 7313).
    pub route_refresh: bool,
    /// A per-family limit on prefixes received from the peer.
    pub max_prefix: Option<MaxPrefix>,
    /// Seed of the jitter applied to retry delays, so that speakers started together do
    /// not retry in step (RFC 4271 section 10) while tests stay reproducible.
    pub jitter_seed: u64,
}

/// Graceful restart as the restarting speaker (RFC 4724 section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrConfig {
    /// Seconds the peer should keep our routes after the connection drops (12 bits).
    pub restart_time: u16,
    /// The F bit for every family: forwarding is kept across a speaker restart. For this
    /// speaker it is: the routes it announces point at pods, not at the speaker.
    pub forwarding_preserved: bool,
}

/// A limit on the prefixes one peer may send per family (RFC 4486 section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxPrefix {
    pub limit: u32,
    pub action: MaxPrefixAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxPrefixAction {
    /// Report `Action::MaxPrefixExceeded` once each time the count goes above the limit.
    Warn,
    /// Close the session with Cease subcode 1 and the RFC 4486 data.
    Cease,
}

impl SessionConfig {
    pub fn validate(&self) -> Result<(), SessionError> {
        check_asn("local_asn", self.local_asn)?;
        check_asn("peer_asn", self.peer_asn)?;
        if self.router_id.is_unspecified() {
            return Err(invalid(
                "router_id",
                "0.0.0.0 is not a valid BGP identifier (RFC 6286)".into(),
            ));
        }
        if matches!(self.hold_time, 1 | 2) {
            return Err(invalid(
                "hold_time",
                format!("{}s must be 0 or at least 3s", self.hold_time),
            ));
        }
        if self.keepalive == Some(0) && self.hold_time != 0 {
            return Err(invalid(
                "keepalive",
                "0s with a non-zero hold time would let the peer's hold timer expire".into(),
            ));
        }
        if self.connect_retry < Duration::from_secs(1) || self.connect_retry > MAX_TIMER {
            return Err(invalid(
                "connect_retry",
                format!(
                    "{:?} must be between 1s and {}s",
                    self.connect_retry,
                    MAX_TIMER.as_secs()
                ),
            ));
        }
        if let Some(d) = self.delay_open {
            if d.is_zero() || d > MAX_TIMER {
                return Err(invalid(
                    "delay_open",
                    format!("{d:?} must be between 1ns and {}s", MAX_TIMER.as_secs()),
                ));
            }
        }
        if let Some(gr) = self.graceful_restart {
            if gr.restart_time > MAX_RESTART_TIME {
                return Err(invalid(
                    "graceful_restart.restart_time",
                    format!(
                        "{}s does not fit the 12-bit field (at most {MAX_RESTART_TIME}s)",
                        gr.restart_time
                    ),
                ));
            }
        }
        if self.families.is_empty() {
            return Err(invalid("families", "at least one family is needed".into()));
        }
        for (i, f) in self.families.iter().enumerate() {
            if *f != AfiSafi::IPV4_UNICAST && *f != AfiSafi::IPV6_UNICAST {
                return Err(invalid(
                    "families",
                    format!(
                        "afi {} safi {} is not supported (IPv4 or IPv6 unicast)",
                        f.afi.0, f.safi.0
                    ),
                ));
            }
            if self.families[..i].contains(f) {
                return Err(invalid(
                    "families",
                    format!("afi {} safi {} listed twice", f.afi.0, f.safi.0),
                ));
            }
        }
        Ok(())
    }

    pub fn is_ibgp(&self) -> bool {
        self.local_asn == self.peer_asn
    }
}

fn check_asn(field: &'static str, asn: u32) -> Result<(), SessionError> {
    // RFC 7607: AS 0 is reserved; RFC 6793: AS_TRANS only stands in for another AS.
    if asn == 0 || asn == AS_TRANS as u32 {
        return Err(invalid(
            field,
            format!("{asn} is reserved and cannot identify a speaker"),
        ));
    }
    Ok(())
}

fn invalid(field: &'static str, reason: String) -> SessionError {
    SessionError::InvalidConfig { field, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> SessionConfig {
        SessionConfig {
            local_asn: 65001,
            peer_asn: 65000,
            router_id: Ipv4Addr::new(192, 0, 2, 1),
            hold_time: 90,
            keepalive: None,
            connect_retry: Duration::from_secs(5),
            passive: false,
            delay_open: None,
            graceful_restart: None,
            families: vec![AfiSafi::IPV4_UNICAST],
            extended_message: false,
            extended_next_hop: false,
            route_refresh: true,
            max_prefix: None,
            jitter_seed: 1,
        }
    }

    fn field_of(cfg: SessionConfig) -> &'static str {
        match cfg.validate() {
            Err(SessionError::InvalidConfig { field, .. }) => field,
            other => panic!("expected an invalid config, got {other:?}"),
        }
    }

    #[test]
    fn accepts_a_plain_config() {
        assert_eq!(base().validate(), Ok(()));
        let zero_hold = SessionConfig {
            hold_time: 0,
            keepalive: Some(0),
            ..base()
        };
        assert_eq!(zero_hold.validate(), Ok(()));
    }

    #[test]
    fn refuses_each_bad_field_by_name() {
        assert_eq!(
            field_of(SessionConfig {
                local_asn: 0,
                ..base()
            }),
            "local_asn"
        );
        assert_eq!(
            field_of(SessionConfig {
                peer_asn: 23456,
                ..base()
            }),
            "peer_asn"
        );
        assert_eq!(
            field_of(SessionConfig {
                router_id: Ipv4Addr::UNSPECIFIED,
                ..base()
            }),
            "router_id"
        );
        assert_eq!(
            field_of(SessionConfig {
                hold_time: 2,
                ..base()
            }),
            "hold_time"
        );
        assert_eq!(
            field_of(SessionConfig {
                keepalive: Some(0),
                ..base()
            }),
            "keepalive"
        );
        assert_eq!(
            field_of(SessionConfig {
                connect_retry: Duration::from_millis(10),
                ..base()
            }),
            "connect_retry"
        );
        assert_eq!(
            field_of(SessionConfig {
                delay_open: Some(Duration::ZERO),
                ..base()
            }),
            "delay_open"
        );
        assert_eq!(
            field_of(SessionConfig {
                graceful_restart: Some(GrConfig {
                    restart_time: 4096,
                    forwarding_preserved: true
                }),
                ..base()
            }),
            "graceful_restart.restart_time"
        );
        assert_eq!(
            field_of(SessionConfig {
                families: vec![],
                ..base()
            }),
            "families"
        );
        assert_eq!(
            field_of(SessionConfig {
                families: vec![AfiSafi::IPV4_UNICAST, AfiSafi::IPV4_UNICAST],
                ..base()
            }),
            "families"
        );
        assert_eq!(
            field_of(SessionConfig {
                families: vec![AfiSafi {
                    afi: crate::bgp::wire::Afi::IPV4,
                    safi: crate::bgp::wire::Safi::MULTICAST
                }],
                ..base()
            }),
            "families"
        );
    }

    #[test]
    fn error_names_field_and_value() {
        let err = SessionConfig {
            hold_time: 2,
            ..base()
        }
        .validate()
        .unwrap_err();
        assert_eq!(err.to_string(), "hold_time: 2s must be 0 or at least 3s");
    }
}
