//! Route refresh (RFC 2918) and enhanced route refresh (RFC 7313): the peer's request makes
//! the session ask for the table again and, when enhanced, bracket it with BoRR/EoRR; the
//! peer's own BoRR/EoRR purge the routes it did not re-announce from our counts.

use crate::harness::*;
use podcidr_speaker::bgp::session::{Action, Input, SessionConfig, State};
use podcidr_speaker::bgp::wire::{
    AfiSafi, Capability, Message, Open, RouteRefresh, RouteRefreshSubtype, Update,
};

fn rr(afi_safi: AfiSafi, subtype: RouteRefreshSubtype) -> Message {
    Message::RouteRefresh(RouteRefresh { afi_safi, subtype })
}

fn request_v4() -> Message {
    rr(AfiSafi::IPV4_UNICAST, RouteRefreshSubtype::Request)
}

/// Established with the initial IPv4 and IPv6 tables done.
fn settled(open: Open) -> Script {
    let mut s = Script::new(config());
    s.establish_with(open);
    s.input(Input::TableSent(AfiSafi::IPV4_UNICAST));
    s.input(Input::TableSent(AfiSafi::IPV6_UNICAST));
    s
}

#[test]
fn enhanced_refresh_is_bracketed_by_borr_and_eorr() {
    let mut s = settled(peer_open());
    let a = s.message(request_v4());
    assert_eq!(
        a,
        vec![
            Action::Send(rr(AfiSafi::IPV4_UNICAST, RouteRefreshSubtype::Borr)),
            Action::SendTable {
                afi_safi: AfiSafi::IPV4_UNICAST,
                refresh: true
            },
        ]
    );
    let table = announce_v4(&["10.1.0.0/24"]);
    let a = s.input(Input::Updates(vec![table.clone()]));
    assert_eq!(a, vec![Action::Send(Message::Update(table))]);
    let a = s.input(Input::TableSent(AfiSafi::IPV4_UNICAST));
    assert_eq!(
        a,
        vec![Action::Send(rr(
            AfiSafi::IPV4_UNICAST,
            RouteRefreshSubtype::Eorr
        ))]
    );
    assert_eq!(s.session.stats().sent.route_refresh, 2);
}

#[test]
fn plain_refresh_for_a_peer_without_enhanced_route_refresh() {
    let mut open = peer_open();
    open.capabilities
        .retain(|c| *c != Capability::EnhancedRouteRefresh);
    let mut s = settled(open);
    assert!(!s.session.negotiated().unwrap().enhanced_route_refresh);
    let a = s.message(request_v4());
    assert_eq!(
        a,
        vec![Action::SendTable {
            afi_safi: AfiSafi::IPV4_UNICAST,
            refresh: true
        }]
    );
    let a = s.input(Input::TableSent(AfiSafi::IPV4_UNICAST));
    assert_eq!(a, vec![], "no EoRR without the capability");
}

#[test]
fn request_during_the_initial_table_waits_for_end_of_rib() {
    let mut s = Script::new(config());
    s.establish();
    // The IPv4 initial table is still going out.
    let a = s.message(request_v4());
    assert_eq!(a, vec![]);
    let a = s.input(Input::TableSent(AfiSafi::IPV4_UNICAST));
    assert_eq!(
        a,
        vec![
            Action::Send(Message::Update(Update::default())),
            Action::Send(rr(AfiSafi::IPV4_UNICAST, RouteRefreshSubtype::Borr)),
            Action::SendTable {
                afi_safi: AfiSafi::IPV4_UNICAST,
                refresh: true
            },
        ],
        "End-of-RIB before BoRR (RFC 7313 section 4)"
    );
}

#[test]
fn request_during_a_refresh_walks_the_table_again() {
    let mut s = settled(peer_open());
    s.message(request_v4());
    let a = s.message(request_v4());
    assert_eq!(a, vec![], "the second request waits for the first walk");
    let a = s.input(Input::TableSent(AfiSafi::IPV4_UNICAST));
    assert_eq!(
        a,
        vec![
            Action::Send(rr(AfiSafi::IPV4_UNICAST, RouteRefreshSubtype::Eorr)),
            Action::Send(rr(AfiSafi::IPV4_UNICAST, RouteRefreshSubtype::Borr)),
            Action::SendTable {
                afi_safi: AfiSafi::IPV4_UNICAST,
                refresh: true
            },
        ]
    );
    let a = s.input(Input::TableSent(AfiSafi::IPV4_UNICAST));
    assert_eq!(
        a,
        vec![Action::Send(rr(
            AfiSafi::IPV4_UNICAST,
            RouteRefreshSubtype::Eorr
        ))]
    );
}

#[test]
fn request_for_a_family_not_negotiated_is_ignored() {
    let mut open = peer_open();
    open.capabilities
        .retain(|c| *c != Capability::Multiprotocol(AfiSafi::IPV6_UNICAST));
    let mut s = Script::new(config());
    s.establish_with(open);
    s.input(Input::TableSent(AfiSafi::IPV4_UNICAST));
    let a = s.message(rr(AfiSafi::IPV6_UNICAST, RouteRefreshSubtype::Request));
    assert_eq!(a, vec![]);
    assert_eq!(s.session.state(), State::Established);
}

#[test]
fn route_refresh_we_did_not_advertise_is_a_bad_message_type() {
    let mut s = Script::new(SessionConfig {
        route_refresh: false,
        ..config()
    });
    s.establish();
    let a = s.message(request_v4());
    assert_eq!(notifications(&a), vec![(1, 3, vec![0x05])]);
    assert_eq!(s.session.state(), State::Idle);
}

#[test]
fn peer_borr_eorr_purges_routes_not_re_announced() {
    let mut s = settled(peer_open());
    s.message(Message::Update(announce_v4(&[
        "10.0.0.0/24",
        "10.0.1.0/24",
        "10.0.2.0/24",
    ])));
    let count = |s: &Script| s.session.stats().received_prefixes[&AfiSafi::IPV4_UNICAST].count;
    assert_eq!(count(&s), 3);
    s.message(rr(AfiSafi::IPV4_UNICAST, RouteRefreshSubtype::Borr));
    s.message(Message::Update(announce_v4(&["10.0.0.0/24"])));
    assert_eq!(count(&s), 3, "stale routes count until the EoRR");
    let a = s.message(rr(AfiSafi::IPV4_UNICAST, RouteRefreshSubtype::Eorr));
    assert_eq!(a, vec![]);
    assert_eq!(count(&s), 1);
}

#[test]
fn borr_before_the_peers_end_of_rib_is_ignored_with_graceful_restart() {
    let mut open = peer_open();
    open.capabilities.push(gr_capability(120));
    let mut s = settled(open);
    s.message(Message::Update(announce_v4(&[
        "10.0.0.0/24",
        "10.0.1.0/24",
    ])));
    s.message(rr(AfiSafi::IPV4_UNICAST, RouteRefreshSubtype::Borr));
    s.message(rr(AfiSafi::IPV4_UNICAST, RouteRefreshSubtype::Eorr));
    let count = |s: &Script| s.session.stats().received_prefixes[&AfiSafi::IPV4_UNICAST].count;
    assert_eq!(count(&s), 2, "the BoRR came before the End-of-RIB: ignored");
    // After the peer's End-of-RIB, the same sequence purges.
    s.message(Message::Update(Update::default()));
    s.message(rr(AfiSafi::IPV4_UNICAST, RouteRefreshSubtype::Borr));
    s.message(rr(AfiSafi::IPV4_UNICAST, RouteRefreshSubtype::Eorr));
    assert_eq!(count(&s), 0);
}

#[test]
fn reserved_subtype_is_ignored() {
    let mut s = settled(peer_open());
    let a = s.message(rr(
        AfiSafi::IPV4_UNICAST,
        RouteRefreshSubtype::Reserved(255),
    ));
    assert_eq!(a, vec![]);
    assert_eq!(s.session.state(), State::Established);
}

#[test]
fn updates_outside_established_or_for_other_families_are_dropped() {
    let mut s = Script::new(config());
    s.input(Input::Start);
    let a = s.input(Input::Updates(vec![announce_v4(&["10.0.0.0/24"])]));
    assert_eq!(a, vec![]);
    assert_eq!(s.session.stats().updates_dropped, 1);

    let mut open = peer_open();
    open.capabilities
        .retain(|c| *c != Capability::Multiprotocol(AfiSafi::IPV6_UNICAST));
    let mut s = Script::new(config());
    s.establish_with(open);
    let a = s.input(Input::Updates(vec![
        announce_v6(&["2001:db8::/48"]),
        announce_v4(&["10.0.0.0/24"]),
    ]));
    assert_eq!(
        a,
        vec![Action::Send(Message::Update(announce_v4(&["10.0.0.0/24"])))]
    );
    assert_eq!(s.session.stats().updates_dropped, 1);
}
