//! Accounting of the routes the peer sends us. This speaker installs nothing it receives;
//! it counts, per family, the prefixes the peer currently holds out to us, for `status`,
//! metrics and the max-prefix limit.
//!
//! The count is exact: a set of the received prefixes per family, so that a re-announced
//! prefix (an attribute change) is not counted twice and a withdrawal of something never
//! announced does not go below zero. Memory is bounded: each family's set stops growing at
//! a ceiling ([`RECEIVED_CEILING`], or the max-prefix limit + 1 if larger), after which
//! the count is a lower bound and is flagged `saturated`. A peer that floods us cannot
//! make the set grow past the ceiling.
//!
//! RFC 7606 handling at this level: treat-as-withdraw (from the codec's `Update::errors`,
//! or a missing well-known mandatory attribute, RFC 7606 section 3 (d)) turns every
//! announcement of the UPDATE into a withdrawal. Enhanced route refresh from the peer
//! (RFC 7313 section 4): a BoRR marks the family's prefixes stale, re-announcements
//! refresh them, an EoRR purges what is still stale.

use crate::bgp::wire::{AfiSafi, Nlri, NonFatal, PathAttribute, Update};
use std::collections::{BTreeMap, HashSet};

/// The default per-family ceiling of tracked prefixes: about 10 MiB per family at worst,
/// far above what a top-of-rack switch sends a node.
pub const RECEIVED_CEILING: usize = 1 << 18;

/// The prefixes the peer holds out to us in one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PrefixCount {
    pub count: u64,
    /// The ceiling was reached: `count` is a lower bound.
    pub saturated: bool,
}

/// What one received UPDATE changed, per family.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// The families whose count may have changed.
    pub touched: Vec<AfiSafi>,
    /// The UPDATE was an End-of-RIB marker for this family (RFC 4724 section 2).
    pub end_of_rib: Option<AfiSafi>,
    /// Announcements turned into withdrawals (RFC 7606 treat-as-withdraw).
    pub treated_as_withdraw: bool,
    /// Prefixes of families not negotiated, not counted.
    pub ignored: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct Received {
    families: BTreeMap<AfiSafi, FamilyRoutes>,
    ceiling: usize,
}

#[derive(Debug, Clone, Default)]
struct FamilyRoutes {
    current: HashSet<Nlri>,
    /// Marked stale by a BoRR and not yet re-announced.
    stale: HashSet<Nlri>,
    refreshing: bool,
    saturated: bool,
    end_of_rib: bool,
}

impl FamilyRoutes {
    fn len(&self) -> usize {
        self.current.len() + self.stale.len()
    }

    fn announce(&mut self, n: Nlri, ceiling: usize) {
        if self.stale.remove(&n) || self.current.contains(&n) || self.len() < ceiling {
            self.current.insert(n);
        } else {
            self.saturated = true;
        }
    }

    fn withdraw(&mut self, n: &Nlri) {
        self.current.remove(n);
        self.stale.remove(n);
    }
}

impl Received {
    pub(crate) fn new(families: &[AfiSafi], ceiling: usize) -> Self {
        Received {
            families: families
                .iter()
                .map(|f| (*f, FamilyRoutes::default()))
                .collect(),
            ceiling,
        }
    }

    pub(crate) fn count(&self, f: AfiSafi) -> PrefixCount {
        self.families
            .get(&f)
            .map(|r| PrefixCount {
                count: r.len() as u64,
                saturated: r.saturated,
            })
            .unwrap_or_default()
    }

    pub(crate) fn counts(&self) -> BTreeMap<AfiSafi, PrefixCount> {
        self.families.keys().map(|f| (*f, self.count(*f))).collect()
    }

    pub(crate) fn end_of_rib_received(&self, f: AfiSafi) -> bool {
        self.families.get(&f).is_some_and(|r| r.end_of_rib)
    }

    pub(crate) fn apply(&mut self, update: &Update) -> Applied {
        let mut applied = Applied::default();
        if let Some(f) = end_of_rib(update) {
            if let Some(r) = self.families.get_mut(&f) {
                r.end_of_rib = true;
                applied.end_of_rib = Some(f);
            }
            return applied;
        }
        let treat_as_withdraw = update
            .errors
            .iter()
            .any(|e| e.reaction_kind == NonFatal::TreatAsWithdraw)
            || missing_mandatory(update);
        applied.treated_as_withdraw = treat_as_withdraw;

        // RFC 4271 section 9: withdrawals of an UPDATE come before its announcements.
        let mut withdrawals: Vec<(AfiSafi, &[Nlri])> =
            vec![(AfiSafi::IPV4_UNICAST, &update.withdrawn[..])];
        let mut announcements: Vec<(AfiSafi, &[Nlri])> = Vec::new();
        for attr in &update.attributes {
            match attr {
                PathAttribute::MpUnreach(u) => withdrawals.push((u.afi_safi, &u.withdrawn[..])),
                PathAttribute::MpReach(r) => announcements.push((r.afi_safi, &r.nlri[..])),
                _ => {}
            }
        }
        announcements.push((AfiSafi::IPV4_UNICAST, &update.nlri[..]));
        if treat_as_withdraw {
            withdrawals.append(&mut announcements);
        }

        let ceiling = self.ceiling;
        for (announce, list) in [(false, withdrawals), (true, announcements)] {
            for (f, nlri) in list {
                if nlri.is_empty() {
                    continue;
                }
                let Some(routes) = self.families.get_mut(&f) else {
                    applied.ignored += nlri.len();
                    continue;
                };
                for n in nlri {
                    if announce {
                        routes.announce(*n, ceiling);
                    } else {
                        routes.withdraw(n);
                    }
                }
                if !applied.touched.contains(&f) {
                    applied.touched.push(f);
                }
            }
        }
        applied
    }

    /// RFC 7313 section 4: a BoRR marks every prefix of the family stale (again, if a
    /// refresh is already under way). Returns false when the family is unknown.
    pub(crate) fn begin_refresh(&mut self, f: AfiSafi) -> bool {
        let Some(r) = self.families.get_mut(&f) else {
            return false;
        };
        let current = std::mem::take(&mut r.current);
        r.stale.extend(current);
        r.refreshing = true;
        true
    }

    /// RFC 7313 section 4: an EoRR purges what is still stale. An EoRR without a BoRR is
    /// ignored (the RFC's MAY). Returns the number of prefixes purged.
    pub(crate) fn end_refresh(&mut self, f: AfiSafi) -> Option<usize> {
        let r = self.families.get_mut(&f)?;
        if !r.refreshing {
            return None;
        }
        r.refreshing = false;
        let purged = r.stale.len();
        r.stale.clear();
        Some(purged)
    }
}

/// RFC 4724 section 2: an UPDATE with nothing in it is the IPv4 unicast End-of-RIB; one
/// whose only content is an empty MP_UNREACH_NLRI is the End-of-RIB of that family.
pub(crate) fn end_of_rib(update: &Update) -> Option<AfiSafi> {
    if !update.withdrawn.is_empty() || !update.nlri.is_empty() {
        return None;
    }
    match update.attributes.as_slice() {
        [] => Some(AfiSafi::IPV4_UNICAST),
        [PathAttribute::MpUnreach(u)] if u.withdrawn.is_empty() && u.raw_withdrawn.is_none() => {
            Some(u.afi_safi)
        }
        _ => None,
    }
}

/// The End-of-RIB marker for a family, as we send it (RFC 4724 section 2).
pub(crate) fn end_of_rib_marker(f: AfiSafi) -> Update {
    if f == AfiSafi::IPV4_UNICAST {
        return Update::default();
    }
    Update {
        attributes: vec![PathAttribute::MpUnreach(Box::new(
            crate::bgp::wire::MpUnreach {
                afi_safi: f,
                withdrawn: Vec::new(),
                raw_withdrawn: None,
            },
        ))],
        ..Update::default()
    }
}

/// RFC 7606 section 3 (d): an UPDATE that announces reachability must carry ORIGIN and
/// AS_PATH, and NEXT_HOP when it uses the IPv4 NLRI field (RFC 4760 section 3 makes
/// NEXT_HOP unnecessary for MP_REACH_NLRI-only UPDATEs).
fn missing_mandatory(update: &Update) -> bool {
    let mut origin = false;
    let mut as_path = false;
    let mut next_hop = false;
    let mut mp_reach = false;
    for attr in &update.attributes {
        match attr {
            PathAttribute::Origin(_) => origin = true,
            PathAttribute::AsPath(_) => as_path = true,
            PathAttribute::NextHop(_) => next_hop = true,
            PathAttribute::MpReach(r) => mp_reach |= !r.nlri.is_empty() || r.raw_nlri.is_some(),
            _ => {}
        }
    }
    let ipv4_field = !update.nlri.is_empty();
    let announces = ipv4_field || mp_reach;
    (announces && (!origin || !as_path)) || (ipv4_field && !next_hop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bgp::wire::{
        AsPath, AttrProblem, MpNextHop, MpReach, MpUnreach, Origin, UpdateError, UpdateFault,
    };
    use bytes::Bytes;
    use std::net::Ipv4Addr;

    fn n(s: &str) -> Nlri {
        Nlri::from(s.parse::<ipnet::IpNet>().unwrap())
    }

    fn base_attrs() -> Vec<PathAttribute> {
        vec![
            PathAttribute::Origin(Origin::Igp),
            PathAttribute::AsPath(AsPath::default()),
            PathAttribute::NextHop(Ipv4Addr::new(192, 0, 2, 1)),
        ]
    }

    fn announce_v4(prefixes: &[&str]) -> Update {
        Update {
            attributes: base_attrs(),
            nlri: prefixes.iter().map(|p| n(p)).collect(),
            ..Update::default()
        }
    }

    fn withdraw_v4(prefixes: &[&str]) -> Update {
        Update {
            withdrawn: prefixes.iter().map(|p| n(p)).collect(),
            ..Update::default()
        }
    }

    fn announce_v6(prefixes: &[&str]) -> Update {
        Update {
            attributes: vec![
                PathAttribute::Origin(Origin::Igp),
                PathAttribute::AsPath(AsPath::default()),
                PathAttribute::MpReach(Box::new(MpReach {
                    afi_safi: AfiSafi::IPV6_UNICAST,
                    next_hop: MpNextHop::V6 {
                        global: "2001:db8::1".parse().unwrap(),
                        link_local: None,
                    },
                    nlri: prefixes.iter().map(|p| n(p)).collect(),
                    raw_nlri: None,
                })),
            ],
            ..Update::default()
        }
    }

    fn both() -> Received {
        Received::new(
            &[AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST],
            RECEIVED_CEILING,
        )
    }

    #[test]
    fn counts_distinct_prefixes_per_family() {
        let mut r = both();
        r.apply(&announce_v4(&["10.0.0.0/24", "10.0.1.0/24"]));
        // Re-announcing (an attribute change) does not count twice.
        r.apply(&announce_v4(&["10.0.0.0/24"]));
        r.apply(&announce_v6(&["2001:db8:1::/64"]));
        assert_eq!(r.count(AfiSafi::IPV4_UNICAST).count, 2);
        assert_eq!(r.count(AfiSafi::IPV6_UNICAST).count, 1);
        r.apply(&withdraw_v4(&["10.0.0.0/24", "10.9.9.0/24"]));
        assert_eq!(r.count(AfiSafi::IPV4_UNICAST).count, 1);
        let unreach = Update {
            attributes: vec![PathAttribute::MpUnreach(Box::new(MpUnreach {
                afi_safi: AfiSafi::IPV6_UNICAST,
                withdrawn: vec![n("2001:db8:1::/64")],
                raw_withdrawn: None,
            }))],
            ..Update::default()
        };
        let applied = r.apply(&unreach);
        assert_eq!(applied.touched, vec![AfiSafi::IPV6_UNICAST]);
        assert_eq!(r.count(AfiSafi::IPV6_UNICAST).count, 0);
    }

    #[test]
    fn withdrawals_come_before_announcements_in_one_update() {
        let mut r = both();
        let mut u = announce_v4(&["10.0.0.0/24"]);
        u.withdrawn = vec![n("10.0.0.0/24")];
        r.apply(&u);
        assert_eq!(r.count(AfiSafi::IPV4_UNICAST).count, 1);
    }

    #[test]
    fn treat_as_withdraw_removes_instead_of_adding() {
        let mut r = both();
        r.apply(&announce_v4(&["10.0.0.0/24", "10.0.1.0/24"]));
        let mut bad = announce_v4(&["10.0.0.0/24", "10.0.2.0/24"]);
        bad.errors.push(
            UpdateError::from_fault(UpdateFault::Malformed {
                type_code: 2,
                problem: AttrProblem::Value,
                attribute: Bytes::new(),
            })
            .expect("a malformed AS_PATH is treat-as-withdraw"),
        );
        assert_eq!(bad.errors[0].reaction_kind, NonFatal::TreatAsWithdraw);
        let applied = r.apply(&bad);
        assert!(applied.treated_as_withdraw);
        assert_eq!(r.count(AfiSafi::IPV4_UNICAST).count, 1);
        // Attribute-discard keeps the announcement.
        let mut discard = announce_v4(&["10.0.3.0/24"]);
        discard.errors.push(
            UpdateError::from_fault(UpdateFault::Malformed {
                type_code: 6,
                problem: AttrProblem::Length,
                attribute: Bytes::new(),
            })
            .expect("a malformed ATOMIC_AGGREGATE is attribute-discard"),
        );
        assert_eq!(discard.errors[0].reaction_kind, NonFatal::AttributeDiscard);
        assert!(!r.apply(&discard).treated_as_withdraw);
        assert_eq!(r.count(AfiSafi::IPV4_UNICAST).count, 2);
    }

    #[test]
    fn missing_mandatory_attribute_is_treat_as_withdraw() {
        let mut r = both();
        r.apply(&announce_v4(&["10.0.0.0/24"]));
        let mut no_next_hop = announce_v4(&["10.0.0.0/24"]);
        no_next_hop
            .attributes
            .retain(|a| !matches!(a, PathAttribute::NextHop(_)));
        assert!(r.apply(&no_next_hop).treated_as_withdraw);
        assert_eq!(r.count(AfiSafi::IPV4_UNICAST).count, 0);
        let mut v6_no_origin = announce_v6(&["2001:db8::/48"]);
        v6_no_origin
            .attributes
            .retain(|a| !matches!(a, PathAttribute::Origin(_)));
        assert!(r.apply(&v6_no_origin).treated_as_withdraw);
        assert_eq!(r.count(AfiSafi::IPV6_UNICAST).count, 0);
        // MP_REACH-only UPDATEs need no NEXT_HOP attribute.
        assert!(
            !r.apply(&announce_v6(&["2001:db8::/48"]))
                .treated_as_withdraw
        );
        assert_eq!(r.count(AfiSafi::IPV6_UNICAST).count, 1);
    }

    #[test]
    fn unnegotiated_families_are_ignored() {
        let mut r = Received::new(&[AfiSafi::IPV4_UNICAST], RECEIVED_CEILING);
        let applied = r.apply(&announce_v6(&["2001:db8::/48", "2001:db8:1::/48"]));
        assert_eq!(applied.ignored, 2);
        assert_eq!(r.count(AfiSafi::IPV6_UNICAST), PrefixCount::default());
    }

    #[test]
    fn recognises_end_of_rib_markers() {
        let mut r = both();
        assert!(!r.end_of_rib_received(AfiSafi::IPV4_UNICAST));
        let applied = r.apply(&Update::default());
        assert_eq!(applied.end_of_rib, Some(AfiSafi::IPV4_UNICAST));
        assert!(r.end_of_rib_received(AfiSafi::IPV4_UNICAST));
        let v6 = end_of_rib_marker(AfiSafi::IPV6_UNICAST);
        assert_eq!(end_of_rib(&v6), Some(AfiSafi::IPV6_UNICAST));
        r.apply(&v6);
        assert!(r.end_of_rib_received(AfiSafi::IPV6_UNICAST));
        assert_eq!(
            end_of_rib(&end_of_rib_marker(AfiSafi::IPV4_UNICAST)),
            Some(AfiSafi::IPV4_UNICAST)
        );
        assert_eq!(end_of_rib(&withdraw_v4(&["10.0.0.0/8"])), None);
        assert_eq!(end_of_rib(&announce_v4(&["10.0.0.0/8"])), None);
    }

    #[test]
    fn enhanced_refresh_purges_what_was_not_re_announced() {
        let mut r = both();
        r.apply(&announce_v4(&["10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24"]));
        assert_eq!(
            r.end_refresh(AfiSafi::IPV4_UNICAST),
            None,
            "EoRR without BoRR is ignored"
        );
        assert!(r.begin_refresh(AfiSafi::IPV4_UNICAST));
        assert_eq!(
            r.count(AfiSafi::IPV4_UNICAST).count,
            3,
            "stale routes still count"
        );
        r.apply(&announce_v4(&["10.0.1.0/24"]));
        r.apply(&withdraw_v4(&["10.0.2.0/24"]));
        assert_eq!(r.count(AfiSafi::IPV4_UNICAST).count, 2);
        assert_eq!(r.end_refresh(AfiSafi::IPV4_UNICAST), Some(1));
        assert_eq!(r.count(AfiSafi::IPV4_UNICAST).count, 1);
        assert!(!r.begin_refresh(AfiSafi {
            afi: crate::bgp::wire::Afi(25),
            safi: crate::bgp::wire::Safi(70)
        }));
    }

    #[test]
    fn ceiling_bounds_memory_and_flags_the_count() {
        let mut r = Received::new(&[AfiSafi::IPV4_UNICAST], 2);
        r.apply(&announce_v4(&["10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24"]));
        let c = r.count(AfiSafi::IPV4_UNICAST);
        assert_eq!(
            c,
            PrefixCount {
                count: 2,
                saturated: true
            }
        );
        // A known prefix is still refreshed at the ceiling.
        r.begin_refresh(AfiSafi::IPV4_UNICAST);
        r.apply(&announce_v4(&["10.0.0.0/24"]));
        assert_eq!(r.count(AfiSafi::IPV4_UNICAST).count, 2);
    }
}
