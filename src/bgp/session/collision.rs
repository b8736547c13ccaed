//! Connection collision detection (RFC 4271 section 6.8, RFC 6286 section 2.3, RFC 4724
//! section 4.2). The driver runs one [`Session`] per TCP connection: its long-lived
//! session, and a second one for a connection that arrives while the first is past
//! Active. After every `handle` on either, it asks [`detect_collision`] which one must go
//! and stops that one with the returned reason.
//!
//! Pure: decides from the two sessions' states and what their OPENs said.

use super::{Session, State, StopReason};
use std::net::Ipv4Addr;

/// Who opened a TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Initiator {
    Local,
    Remote,
}

/// Which of the two sessions given to [`detect_collision`] must close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Existing,
    New,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collision {
    pub close: Side,
    /// Give this to the losing session as `Input::Stop { reason }`.
    pub reason: StopReason,
}

/// The connection to keep when both sides opened one: the one initiated by the speaker
/// with the higher BGP Identifier (RFC 4271 section 6.8, identifiers compared as 4-octet
/// unsigned integers), or with equal identifiers the higher AS number (RFC 6286 section
/// 2.3). Equal identifiers in one AS are refused at OPEN (Bad BGP Identifier), so the last
/// tie cannot arise; it keeps ours.
pub fn resolve_collision(
    local_id: Ipv4Addr,
    local_asn: u32,
    remote_id: Ipv4Addr,
    remote_asn: u32,
) -> Initiator {
    let (local, remote) = (u32::from(local_id), u32::from(remote_id));
    if local != remote {
        return if local > remote {
            Initiator::Local
        } else {
            Initiator::Remote
        };
    }
    if local_asn < remote_asn {
        Initiator::Remote
    } else {
        Initiator::Local
    }
}

/// Whether two sessions with the same peer collide, and which must close.
///
/// Decided once the peer's BGP Identifier is known from an OPEN on either connection
/// (the other may still be in OpenSent: the identifier is the peer's, whichever
/// connection it came on; FRR does the same). An Established session is kept against a
/// newer connection (RFC 4271 section 6.8), unless the peer advertised graceful restart:
/// then the new connection means the peer restarted and the old one is closed without a
/// NOTIFICATION (RFC 4724 section 4.2). Two connections opened by the same side cannot be
/// told apart by identifiers: the newer one closes.
pub fn detect_collision(existing: &Session, new: &Session) -> Option<Collision> {
    let (existing_in, new_in) = (existing.connection_inbound()?, new.connection_inbound()?);
    let peer = existing.negotiated().or(new.negotiated())?;
    let close = |side| {
        Some(Collision {
            close: side,
            reason: StopReason::CollisionResolution,
        })
    };
    match (existing.state(), new.state()) {
        (State::Established, State::Established) => close(Side::New),
        (State::Established, State::OpenConfirm) => {
            let peer_gr = existing
                .negotiated()
                .is_some_and(|n| n.peer_graceful_restart.is_some());
            if peer_gr {
                Some(Collision {
                    close: Side::Existing,
                    reason: StopReason::PeerRestarted,
                })
            } else {
                close(Side::New)
            }
        }
        (State::OpenConfirm, State::Established) => close(Side::Existing),
        // Wait for the other connection's OPEN before touching an Established session.
        (State::Established, _) | (_, State::Established) => None,
        _ if existing_in == new_in => close(Side::New),
        _ => {
            let cfg = existing.config();
            let keep = resolve_collision(cfg.router_id, cfg.local_asn, peer.peer_id, peer.peer_asn);
            let existing_initiator = if existing_in {
                Initiator::Remote
            } else {
                Initiator::Local
            };
            if existing_initiator == keep {
                close(Side::New)
            } else {
                close(Side::Existing)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(192, 0, 2, last)
    }

    #[test]
    fn higher_identifier_keeps_its_connection() {
        assert_eq!(
            resolve_collision(id(1), 65001, id(2), 65002),
            Initiator::Remote
        );
        assert_eq!(
            resolve_collision(id(2), 65001, id(1), 65002),
            Initiator::Local
        );
        // Compared as unsigned integers, not as signed or as text.
        assert_eq!(
            resolve_collision(Ipv4Addr::new(200, 0, 0, 1), 1, Ipv4Addr::new(9, 0, 0, 1), 2),
            Initiator::Local
        );
    }

    #[test]
    fn equal_identifiers_fall_back_to_the_higher_as() {
        assert_eq!(
            resolve_collision(id(1), 65001, id(1), 65002),
            Initiator::Remote
        );
        assert_eq!(
            resolve_collision(id(1), 65003, id(1), 65002),
            Initiator::Local
        );
    }

    #[test]
    fn both_sides_agree() {
        for (a, b) in [(1, 2), (2, 1), (7, 7)] {
            let ours = resolve_collision(id(a), 65001, id(b), 65002);
            let theirs = resolve_collision(id(b), 65002, id(a), 65001);
            // What we call Local the peer calls Remote.
            assert_ne!(ours, theirs, "ids {a} {b}");
        }
    }
}
