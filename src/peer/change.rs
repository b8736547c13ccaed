//! What a new config, new node labels or a new node address do to each BGP session of
//! this node: the one decision, a pure function of the old and new [`PeerSpec`]s.
//!
//! For a session wanted before and after, compare what it runs with:
//! - a change in anything that goes into the TCP connection or the OPEN message (ASNs,
//!   hold and keepalive time, router-id, source address, MD5 password, TTL policy,
//!   passive, graceful restart, families; the key a `password-secret` names) or in the
//!   graceful shutdown time: [`SessionChange::Reset`], the session is closed and opened
//!   again;
//! - otherwise a change of a live setting (`connect-retry-time`, `max-prefix`, the BFD
//!   session of `bfd-profile`): [`SessionChange::UpdateLive`], the session keeps
//!   running; the daemon keeps the new spec, in force when the peer task next starts,
//!   and hands a new BFD session to the BFD task at once (new timers: a Poll Sequence,
//!   RFC 5880 section 6.8.3; a profile added or removed: a BFD session started or
//!   stopped, the BGP session untouched);
//! - otherwise [`SessionChange::Keep`].
//!
//! Sessions wanted only before are closed, only after are opened. What a session
//! announces is not a session change: new routes reach the running task through its
//! `watch` whatever this function says.
//!
//! Must not: act or log. The daemon executes the changes and logs the same value.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::PeerSpec;
use crate::config::PeerKey;

/// What happens to one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SessionChange {
    /// Nothing the session runs with changed.
    Keep,
    /// Only live settings changed: the session keeps running.
    UpdateLive,
    /// Close the session and open it again with the new parameters.
    Reset,
    /// A new session.
    Open,
    /// A session no longer wanted on this node.
    Close,
}

impl SessionChange {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionChange::Keep => "keep",
            SessionChange::UpdateLive => "update-live",
            SessionChange::Reset => "reset",
            SessionChange::Open => "open",
            SessionChange::Close => "close",
        }
    }
}

impl fmt::Display for SessionChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The change for one session, from the spec it ran with (`None`: not running) to the
/// spec it should run with (`None`: no longer wanted). `None` when neither exists.
pub fn session_change(old: Option<&PeerSpec>, new: Option<&PeerSpec>) -> Option<SessionChange> {
    match (old, new) {
        (None, None) => None,
        (None, Some(_)) => Some(SessionChange::Open),
        (Some(_), None) => Some(SessionChange::Close),
        (Some(old), Some(new)) => Some(if without_live(old) != without_live(new) {
            SessionChange::Reset
        } else if old != new {
            SessionChange::UpdateLive
        } else {
            SessionChange::Keep
        }),
    }
}

/// The spec with its live settings blanked, so that what remains is what a session
/// cannot change while it runs.
fn without_live(spec: &PeerSpec) -> PeerSpec {
    let mut spec = spec.clone();
    spec.session.connect_retry = std::time::Duration::ZERO;
    spec.session.max_prefix = None;
    spec.bfd = None;
    spec
}

/// The change for every session of this node, by key. Built by [`session_changes`];
/// displayed as `open 10.0.0.1:179; reset 10.0.0.2:179` for the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionChanges(pub BTreeMap<PeerKey, SessionChange>);

impl SessionChanges {
    /// The change of one session, if the node had or has it.
    pub fn of(&self, key: &PeerKey) -> Option<SessionChange> {
        self.0.get(key).copied()
    }

    /// The sessions with this change, in key order.
    pub fn with(&self, change: SessionChange) -> Vec<PeerKey> {
        self.0
            .iter()
            .filter(|(_, c)| **c == change)
            .map(|(k, _)| *k)
            .collect()
    }

    /// True when every session is kept as it is.
    pub fn is_noop(&self) -> bool {
        self.0.values().all(|c| *c == SessionChange::Keep)
    }
}

/// [`session_change`] for every key of `old` or `new`.
pub fn session_changes(
    old: &BTreeMap<PeerKey, PeerSpec>,
    new: &BTreeMap<PeerKey, PeerSpec>,
) -> SessionChanges {
    let keys: BTreeSet<&PeerKey> = old.keys().chain(new.keys()).collect();
    SessionChanges(
        keys.into_iter()
            .filter_map(|k| Some((*k, session_change(old.get(k), new.get(k))?)))
            .collect(),
    )
}

impl fmt::Display for SessionChanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let changes = [
            SessionChange::Keep,
            SessionChange::UpdateLive,
            SessionChange::Reset,
            SessionChange::Open,
            SessionChange::Close,
        ];
        let mut first = true;
        for change in changes {
            let keys = self.with(change);
            if keys.is_empty() {
                continue;
            }
            if !first {
                f.write_str("; ")?;
            }
            first = false;
            let keys: Vec<String> = keys.iter().map(PeerKey::to_string).collect();
            write!(f, "{change} {}", keys.join(", "))?;
        }
        if first {
            f.write_str("no sessions")?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::Peer;
    use crate::peer::RunOverrides;
    use std::net::{IpAddr, Ipv4Addr};

    /// A peer 192.0.2.1 (AS 65000, ours 65001) with `extra` YAML lines; also used by
    /// the daemon's tests.
    pub(crate) fn peer(extra: &str) -> Peer {
        let text = format!(
            "peers:\n  - peer-address: 192.0.2.1\n    peer-asn: 65000\n    my-asn: 65001\n{extra}"
        );
        let config = crate::config::parse(&text).unwrap();
        config.peers[0].clone()
    }

    fn run(router_id: [u8; 4], node_v4: Option<[u8; 4]>) -> RunOverrides {
        RunOverrides {
            router_id: Some(Ipv4Addr::from(router_id)),
            node_ipv4: node_v4.map(Ipv4Addr::from),
            ..RunOverrides::default()
        }
    }

    fn change(old: &Peer, new: &Peer) -> SessionChange {
        let r = run([192, 0, 2, 10], None);
        let (o, n) = (
            PeerSpec::from_config(old, &r).unwrap(),
            PeerSpec::from_config(new, &r).unwrap(),
        );
        session_change(Some(&o), Some(&n)).unwrap()
    }

    /// A bfd-profile added, removed, or with new timers is update-live: the BGP session
    /// keeps running, the BFD task takes the new BFD session.
    #[test]
    fn a_bfd_profile_change_is_update_live() {
        let with = |extra: &str, profile: &str| {
            let text = format!(
                "bfd-profiles:\n  - name: p\n{profile}peers:\n  - peer-address: 192.0.2.1\n    peer-asn: 65000\n    my-asn: 65001\n{extra}"
            );
            crate::config::parse(&text).unwrap().peers[0].clone()
        };
        let none = with("", "");
        let fast = with("    bfd-profile: p\n", "    transmit-interval: 100\n");
        let slow = with("    bfd-profile: p\n", "    transmit-interval: 900\n");
        assert_eq!(change(&none, &fast), SessionChange::UpdateLive);
        assert_eq!(change(&fast, &slow), SessionChange::UpdateLive);
        assert_eq!(change(&fast, &none), SessionChange::UpdateLive);
        assert_eq!(change(&fast, &fast), SessionChange::Keep);
        let r = run([192, 0, 2, 10], None);
        let spec = PeerSpec::from_config(&fast, &r).unwrap();
        let bfd = spec.bfd.expect("a bfd session");
        assert_eq!(
            bfd.session.desired_min_tx,
            std::time::Duration::from_millis(100)
        );
        assert_eq!(
            bfd.session.required_min_rx,
            std::time::Duration::from_millis(300)
        );
        assert_eq!(
            (bfd.session.detect_mult, bfd.multihop, bfd.min_ttl),
            (3, false, 255)
        );
        let mh = with(
            "    bfd-profile: p\n    ebgp-multihop: true\n",
            "    minimum-ttl: 200\n",
        );
        let bfd = PeerSpec::from_config(&mh, &r).unwrap().bfd.unwrap();
        assert_eq!((bfd.multihop, bfd.min_ttl), (true, 200));
    }

    #[test]
    fn session_parameters_reset_live_settings_update_and_attributes_keep() {
        use SessionChange::*;
        let base = peer("");
        assert_eq!(change(&base, &base), Keep);
        assert_eq!(change(&base, &peer("    hold-time: 30s\n")), Reset);
        assert_eq!(change(&base, &peer("    password: secret\n")), Reset);
        // Graceful restart is on by default: turning it off, or another restart time,
        // changes the OPEN.
        assert_eq!(change(&base, &peer("    graceful-restart: false\n")), Reset);
        assert_eq!(
            change(&base, &peer("    graceful-restart-time: 60s\n")),
            Reset
        );
        assert_eq!(change(&base, &peer("    passive: true\n")), Reset);
        assert_eq!(change(&base, &peer("    ttl-security: true\n")), Reset);
        assert_eq!(change(&base, &peer("    router-id: 10.9.9.9\n")), Reset);
        // Attributes are re-sent on the running session, through its routes.
        assert_eq!(
            change(&base, &peer("    pod-cidr-communities: [\"65001:7\"]\n")),
            Keep
        );
        assert_eq!(change(&base, &peer("    origin: igp\n")), Keep);
        assert_eq!(
            change(&base, &peer("    connect-retry-time: 5s\n")),
            UpdateLive
        );
        assert_eq!(
            change(&base, &peer("    max-prefix: {limit: 10, action: warn}\n")),
            UpdateLive
        );
        assert_eq!(
            change(
                &base,
                &peer("    max-prefix: {limit: 10}\n    hold-time: 30s\n")
            ),
            Reset,
            "a reset wins over a live update"
        );
    }

    #[test]
    fn run_time_facts_reset_through_the_spec() {
        let p = peer("");
        let spec = |r: &RunOverrides| PeerSpec::from_config(&p, r).unwrap();
        let a = spec(&run([192, 0, 2, 10], Some([192, 0, 2, 10])));
        // Another router id from the flag; without the flag, another node address (the
        // router id it gives); with the flag, the node address changes nothing here.
        let b = spec(&run([192, 0, 2, 11], Some([192, 0, 2, 10])));
        let c = spec(&run([192, 0, 2, 10], Some([192, 0, 2, 12])));
        assert_eq!(
            session_change(Some(&a), Some(&b)),
            Some(SessionChange::Reset)
        );
        assert_eq!(
            session_change(Some(&a), Some(&c)),
            Some(SessionChange::Keep)
        );
        let unflagged = |node: [u8; 4]| {
            spec(&RunOverrides {
                node_ipv4: Some(Ipv4Addr::from(node)),
                ..RunOverrides::default()
            })
        };
        assert_eq!(
            session_change(
                Some(&unflagged([192, 0, 2, 10])),
                Some(&unflagged([192, 0, 2, 12]))
            ),
            Some(SessionChange::Reset)
        );
        // Another source address for the session's own family.
        let mut r = run([192, 0, 2, 10], Some([192, 0, 2, 10]));
        r.source_address = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 12)));
        assert_eq!(
            session_change(Some(&a), Some(&spec(&r))),
            Some(SessionChange::Reset)
        );
        assert_eq!(
            session_change(Some(&a), Some(&a.clone())),
            Some(SessionChange::Keep)
        );
        // A source address of the other family does not touch an IPv4 session.
        let mut r = run([192, 0, 2, 10], Some([192, 0, 2, 10]));
        r.source_address = Some(IpAddr::V6("fd00::1".parse().unwrap()));
        let d = spec(&r);
        assert_eq!(d.transport.source, None);
    }

    #[test]
    fn opened_closed_and_displayed_in_key_order() {
        let r = run([192, 0, 2, 10], None);
        let spec = |addr: &str| {
            let text =
                format!("peers:\n  - {{peer-address: {addr}, peer-asn: 65000, my-asn: 65001}}\n");
            let c = crate::config::parse(&text).unwrap();
            let s = PeerSpec::from_config(&c.peers[0], &r).unwrap();
            (s.key, s)
        };
        let (a, b, c) = (spec("192.0.2.1"), spec("192.0.2.2"), spec("192.0.2.3"));
        let old = BTreeMap::from([a.clone(), b.clone()]);
        let new = BTreeMap::from([b.clone(), c.clone()]);
        let changes = session_changes(&old, &new);
        assert_eq!(changes.of(&a.0), Some(SessionChange::Close));
        assert_eq!(changes.of(&b.0), Some(SessionChange::Keep));
        assert_eq!(changes.of(&c.0), Some(SessionChange::Open));
        assert!(!changes.is_noop());
        assert_eq!(
            changes.to_string(),
            "keep 192.0.2.2:179; open 192.0.2.3:179; close 192.0.2.1:179"
        );
        assert!(session_changes(&new, &new).is_noop());
        assert_eq!(
            session_changes(&BTreeMap::new(), &BTreeMap::new()).to_string(),
            "no sessions"
        );
    }
}
