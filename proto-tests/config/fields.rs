//! Every peer field, the speaker extensions, BFD profiles, communities and the top
//! level: valid values and what they mean, invalid values and their exact messages.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use podcidr_speaker::config::{
    Community, LargeCommunity, Origin, Peer, PrefixLimit, PrefixLimitAction, BGP_PORT,
};

use crate::{errors, ok, peer};

fn the_peer(fields: &[(&str, &str)]) -> Peer {
    let mut c = ok(&peer(fields));
    assert_eq!(c.peers.len(), 1);
    c.peers.remove(0)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn base_peer_defaults() {
    let p = the_peer(&[]);
    assert_eq!(p.index, 0);
    assert_eq!(p.address, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(p.port, BGP_PORT);
    assert_eq!((p.peer_asn, p.my_asn), (65000, 65001));
    assert!(!p.is_ibgp());
    assert_eq!(p.hold_time, secs(90));
    assert_eq!(p.keepalive_time, secs(30));
    assert_eq!(p.router_id, None);
    assert_eq!(p.source_address, None);
    assert!(p.password.is_none());
    assert!(!p.ebgp_multihop);
    assert_eq!(p.bfd_profile, None);
    assert!(p.node_selectors.is_empty());
    // On by default (not a MetalLB field): a restart of the DaemonSet loses no route.
    assert!(p.graceful_restart);
    assert_eq!(p.graceful_restart_time, secs(120));
    assert_eq!(p.connect_retry_time, secs(120));
    assert_eq!(p.origin, Origin::Incomplete);
    assert!(p.pod_cidr_communities.is_empty());
    assert!(p.pod_cidr_large_communities.is_empty());
    assert_eq!(p.pod_cidr_local_pref, None);
    assert_eq!(p.max_prefix, None);
    assert!(!p.passive);
    assert!(!p.ttl_security);
    assert_eq!((p.next_hop_v4, p.next_hop_v6), (None, None));
}

type Check = fn(&Peer) -> bool;

#[test]
fn valid_peer_values() {
    let cases: &[(&[(&str, &str)], Check)] = &[
        (&[("peer-address", "2001:db8::1")], |p| {
            p.address == "2001:db8::1".parse::<IpAddr>().unwrap()
        }),
        (&[("peer-address", "::ffff:10.0.0.9")], |p| {
            p.address == IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9))
        }),
        (&[("peer-address", "\"10.0.0.7\"")], |p| {
            p.address == IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7))
        }),
        (&[("peer-port", "0")], |p| p.port == 179),
        (&[("peer-port", "1179")], |p| p.port == 1179),
        (&[("peer-port", "65535")], |p| p.port == 65535),
        (&[("peer-asn", "4200000000")], |p| {
            p.peer_asn == 4_200_000_000
        }),
        (&[("peer-asn", "4294967295")], |p| p.peer_asn == u32::MAX),
        (&[("peer-asn", "1")], |p| p.peer_asn == 1),
        (&[("peer-asn", "0xFDE8")], |p| p.peer_asn == 65000),
        (&[("my-asn", "65000")], |p| p.is_ibgp()),
        (&[("hold-time", "0")], |p| {
            p.hold_time.is_zero() && p.keepalive_time.is_zero()
        }),
        (&[("hold-time", "\"0\"")], |p| p.hold_time.is_zero()),
        (&[("hold-time", "0s")], |p| p.hold_time.is_zero()),
        (&[("hold-time", "3s")], |p| {
            p.hold_time == secs(3) && p.keepalive_time == secs(1)
        }),
        (&[("hold-time", "1m30s")], |p| p.hold_time == secs(90)),
        (&[("hold-time", "10s")], |p| p.keepalive_time == secs(3)),
        // MetalLB truncated to whole seconds, so sub-second hold times meant 0.
        (&[("hold-time", "3.9s")], |p| p.hold_time == secs(3)),
        (&[("hold-time", "500ms")], |p| p.hold_time.is_zero()),
        (&[("hold-time", "1h")], |p| p.hold_time == secs(3600)),
        (&[("hold-time", "65535s")], |p| p.hold_time == secs(65535)),
        (&[("keepalive-time", "10s")], |p| {
            p.keepalive_time == secs(10)
        }),
        (&[("keepalive-time", "90s")], |p| {
            p.keepalive_time == secs(90)
        }),
        (&[("keepalive-time", "90.5s")], |p| {
            p.keepalive_time == secs(90)
        }),
        (&[("keepalive-time", "1.5s")], |p| {
            p.keepalive_time == secs(1)
        }),
        (&[("hold-time", "0"), ("keepalive-time", "0")], |p| {
            p.keepalive_time.is_zero()
        }),
        (&[("router-id", "192.0.2.1")], |p| {
            p.router_id == Some(Ipv4Addr::new(192, 0, 2, 1))
        }),
        (&[("source-address", "10.0.0.2")], |p| {
            p.source_address == Some("10.0.0.2".parse().unwrap())
        }),
        (
            &[
                ("peer-address", "2001:db8::1"),
                ("source-address", "2001:db8::2"),
            ],
            |p| p.source_address == Some("2001:db8::2".parse().unwrap()),
        ),
        (&[("password", "secret")], |p| {
            p.password.as_ref().map(|s| s.expose()) == Some("secret")
        }),
        (&[("password", "\"\"")], |p| p.password.is_none()),
        // yaml.v2 read any scalar into a string field as written.
        (&[("password", "0123")], |p| {
            p.password.as_ref().map(|s| s.expose()) == Some("0123")
        }),
        (&[("password", "yes")], |p| {
            p.password.as_ref().map(|s| s.expose()) == Some("yes")
        }),
        (&[("password", "~")], |p| p.password.is_none()),
        (&[("ebgp-multihop", "true")], |p| p.ebgp_multihop),
        (&[("ebgp-multihop", "yes")], |p| p.ebgp_multihop),
        (&[("ebgp-multihop", "false"), ("my-asn", "65000")], |p| {
            !p.ebgp_multihop
        }),
        (&[("node-selectors", "[]")], |p| p.node_selectors.is_empty()),
        (&[("node-selectors", "[{}]")], |p| {
            p.node_selectors.is_empty()
        }),
        (&[("graceful-restart", "true")], |p| p.graceful_restart),
        (&[("graceful-restart", "false")], |p| !p.graceful_restart),
        (&[("graceful-restart-time", "300s")], |p| {
            p.graceful_restart_time == secs(300)
        }),
        (&[("graceful-restart-time", "4095s")], |p| {
            p.graceful_restart_time == secs(4095)
        }),
        (&[("connect-retry-time", "5s")], |p| {
            p.connect_retry_time == secs(5)
        }),
        (&[("origin", "igp")], |p| p.origin == Origin::Igp),
        (&[("origin", "incomplete")], |p| {
            p.origin == Origin::Incomplete
        }),
        (
            &[("pod-cidr-communities", "[65000:1, no-export, 65000:1]")],
            |p| p.pod_cidr_communities == [Community::new(65000, 1), Community::NO_EXPORT],
        ),
        (&[("pod-cidr-communities", "[\"large:1:2:3\"]")], |p| {
            p.pod_cidr_large_communities
                == [LargeCommunity {
                    global_admin: 1,
                    local_data1: 2,
                    local_data2: 3,
                }]
                && p.pod_cidr_communities.is_empty()
        }),
        (
            &[("my-asn", "65000"), ("pod-cidr-local-pref", "200")],
            |p| p.pod_cidr_local_pref == Some(200),
        ),
        (&[("max-prefix", "{limit: 100}")], |p| {
            p.max_prefix
                == Some(PrefixLimit {
                    limit: 100,
                    action: PrefixLimitAction::Cease,
                })
        }),
        (&[("max-prefix", "{limit: 5, action: warn}")], |p| {
            p.max_prefix
                == Some(PrefixLimit {
                    limit: 5,
                    action: PrefixLimitAction::Warn,
                })
        }),
        (&[("passive", "true")], |p| p.passive),
        (&[("ttl-security", "true")], |p| p.ttl_security),
        (&[("next-hop-v6", "\"2001:db8::7\"")], |p| {
            p.next_hop_v6 == Some("2001:db8::7".parse().unwrap()) && p.next_hop_v4.is_none()
        }),
        (&[("next-hop-v4", "192.0.2.7")], |p| {
            p.next_hop_v4 == Some(Ipv4Addr::new(192, 0, 2, 7))
        }),
        (&[("next-hop-v4", "\"\""), ("next-hop-v6", "\"\"")], |p| {
            p.next_hop_v4.is_none() && p.next_hop_v6.is_none()
        }),
        (
            &[
                ("peer-address", "2001:db8::1"),
                ("next-hop-v4", "192.0.2.7"),
            ],
            |p| p.next_hop_v4 == Some(Ipv4Addr::new(192, 0, 2, 7)),
        ),
    ];
    for (fields, check) in cases {
        let p = the_peer(fields);
        assert!(check(&p), "{fields:?} gave {p:?}");
    }
}

#[test]
fn invalid_peer_values() {
    let long_password = format!("\"{}\"", "x".repeat(81));
    type Fields<'a> = Vec<(&'a str, &'a str)>;
    let cases: Vec<(Fields, Vec<&str>)> = vec![
        (vec![("peer-address", "-")], vec!["peers[0].peer-address: is required"]),
        (vec![("peer-address", "~")], vec!["peers[0].peer-address: is required"]),
        (vec![("peer-address", "10.0.0.300")], vec![r#"peers[0].peer-address: "10.0.0.300" is not an IP address"#]),
        (vec![("peer-address", "fe80::1%eth0")], vec![r#"peers[0].peer-address: "fe80::1%eth0" is not an IP address"#]),
        (vec![("peer-address", "010.0.0.1")], vec![r#"peers[0].peer-address: "010.0.0.1" is not an IP address"#]),
        (vec![("peer-address", "[10.0.0.1]")], vec!["peers[0].peer-address: a list must be a single value"]),
        (vec![("peer-address", "0.0.0.0")], vec![r#"peers[0].peer-address: "0.0.0.0" is the unspecified address, not a host; a BGP session needs a unicast address"#]),
        (vec![("peer-address", "\"::\"")], vec![r#"peers[0].peer-address: "::" is the unspecified address, not a host; a BGP session needs a unicast address"#]),
        (vec![("peer-address", "224.0.0.5")], vec![r#"peers[0].peer-address: "224.0.0.5" is a multicast address, not a host; a BGP session needs a unicast address"#]),
        (vec![("peer-address", "ff02::5")], vec![r#"peers[0].peer-address: "ff02::5" is a multicast address, not a host; a BGP session needs a unicast address"#]),
        (vec![("peer-address", "255.255.255.255")], vec![r#"peers[0].peer-address: "255.255.255.255" is the broadcast address, not a host; a BGP session needs a unicast address"#]),
        (vec![("peer-asn", "-")], vec!["peers[0].peer-asn: is required"]),
        (vec![("my-asn", "-")], vec!["peers[0].my-asn: is required"]),
        (vec![("peer-asn", "0")], vec!["peers[0].peer-asn: 0 is not a valid AS number (1 to 4294967295)"]),
        (vec![("my-asn", "0")], vec!["peers[0].my-asn: 0 is not a valid AS number (1 to 4294967295)"]),
        (vec![("peer-asn", "4294967296")], vec!["peers[0].peer-asn: 4294967296 is not a valid AS number (1 to 4294967295)"]),
        (vec![("peer-asn", "-1")], vec!["peers[0].peer-asn: -1 is not a valid AS number (1 to 4294967295)"]),
        (vec![("peer-asn", "\"65000\"")], vec![r#"peers[0].peer-asn: string "65000" must be an integer (remove the quotes)"#]),
        (vec![("peer-asn", "65000.5")], vec!["peers[0].peer-asn: number 65000.5 must be an integer"]),
        (vec![("peer-asn", "as65000")], vec![r#"peers[0].peer-asn: string "as65000" must be an integer"#]),
        (vec![("peer-asn", "true")], vec!["peers[0].peer-asn: boolean true must be an integer"]),
        (vec![("peer-port", "70000")], vec!["peers[0].peer-port: 70000 must be between 1 and 65535 (0 means 179)"]),
        (vec![("peer-port", "-1")], vec!["peers[0].peer-port: -1 must be between 1 and 65535 (0 means 179)"]),
        (vec![("hold-time", "2s")], vec![r#"peers[0].hold-time: "2s" must be 0 or at least 3s"#]),
        (vec![("hold-time", "2.9s")], vec![r#"peers[0].hold-time: "2.9s" must be 0 or at least 3s"#]),
        (vec![("hold-time", "-5s")], vec![r#"peers[0].hold-time: "-5s" must be 0 or at least 3s"#]),
        (vec![("hold-time", "90")], vec![r#"peers[0].hold-time: "90" has no unit (e.g. "90s"; units are ns, us, ms, s, m, h)"#]),
        (vec![("hold-time", "1d")], vec![r#"peers[0].hold-time: "1d" has an unknown unit "d" (units are ns, us, ms, s, m, h)"#]),
        (vec![("hold-time", "abc")], vec![r#"peers[0].hold-time: "abc" is not a duration"#]),
        (vec![("hold-time", "65536s")], vec![r#"peers[0].hold-time: "65536s" must be at most 65535s (the Hold Time is 16 bits, RFC 4271 section 4.2)"#]),
        (vec![("keepalive-time", "100s")], vec![r#"peers[0].keepalive-time: "100s" must not be above hold-time (90s)"#]),
        // Truncated to whole seconds before the comparison, as MetalLB: 90.5s is 90s and
        // fine (see compat_metallb); a whole second more is not.
        (vec![("keepalive-time", "91s")], vec![r#"peers[0].keepalive-time: "91s" must not be above hold-time (90s)"#]),
        (vec![("hold-time", "0"), ("keepalive-time", "10s")], vec![r#"peers[0].keepalive-time: "10s" must not be above hold-time (0s)"#]),
        (vec![("keepalive-time", "0s")], vec![r#"peers[0].keepalive-time: "0s" must be at least 1s when hold-time is not 0"#]),
        (vec![("keepalive-time", "-1s")], vec![r#"peers[0].keepalive-time: "-1s" must not be negative"#]),
        (vec![("keepalive-time", "30")], vec![r#"peers[0].keepalive-time: "30" has no unit (e.g. "90s"; units are ns, us, ms, s, m, h)"#]),
        // Both timers are checked even when the hold time is wrong.
        (vec![("hold-time", "2s"), ("keepalive-time", "-1s")], vec![r#"peers[0].hold-time: "2s" must be 0 or at least 3s"#, r#"peers[0].keepalive-time: "-1s" must not be negative"#]),
        (vec![("router-id", "2001:db8::1")], vec![r#"peers[0].router-id: "2001:db8::1" must be an IPv4 address (the BGP Identifier is 4 octets, RFC 4271 section 4.2)"#]),
        (vec![("router-id", "0.0.0.0")], vec![r#"peers[0].router-id: "0.0.0.0" must not be 0.0.0.0 (the BGP Identifier is non-zero, RFC 6286)"#]),
        (vec![("router-id", "node1")], vec![r#"peers[0].router-id: "node1" is not an IPv4 address"#]),
        (vec![("next-hop-v6", "192.0.2.7")], vec![r#"peers[0].next-hop-v6: "192.0.2.7" is not an IPv6 address"#]),
        (vec![("next-hop-v4", "2001:db8::7")], vec![r#"peers[0].next-hop-v4: "2001:db8::7" is not an IPv4 address"#]),
        (vec![("next-hop-v6", "fe80::1")], vec![r#"peers[0].next-hop-v6: "fe80::1" is link-local; the IPv6 next hop must be a global address (RFC 2545 section 3)"#]),
        (vec![("next-hop-v6", "::1")], vec![r#"peers[0].next-hop-v6: "::1" is a loopback address, which routers refuse as a next hop"#]),
        (vec![("next-hop-v4", "0.0.0.0")], vec![r#"peers[0].next-hop-v4: "0.0.0.0" is not a unicast address; a next hop must be one"#]),
        (vec![("next-hop-v4", "255.255.255.255")], vec![r#"peers[0].next-hop-v4: "255.255.255.255" is the broadcast address, not a next hop"#]),
        (vec![("next-hop-v6", "tor")], vec![r#"peers[0].next-hop-v6: "tor" is not an IP address"#]),
        (vec![("source-address", "eth0")], vec![r#"peers[0].source-address: "eth0" is not an IP address"#]),
        (vec![("source-address", "0.0.0.0")], vec![r#"peers[0].source-address: "0.0.0.0" is the unspecified address, not a host; a BGP session needs a unicast address"#]),
        (vec![("source-address", "239.1.1.1")], vec![r#"peers[0].source-address: "239.1.1.1" is a multicast address, not a host; a BGP session needs a unicast address"#]),
        (vec![("source-address", "2001:db8::2")], vec![r#"peers[0].source-address: "2001:db8::2" is not of the same address family as peer-address 10.0.0.1"#]),
        (vec![("password", "\"a\\nb\"")], vec!["peers[0].password: <redacted> must not contain a line break"]),
        (vec![("password", long_password.as_str())], vec!["peers[0].password: <redacted> is longer than 80 bytes, the TCP MD5 key limit"]),
        (vec![("my-asn", "65000"), ("ebgp-multihop", "true")], vec!["peers[0].ebgp-multihop: true is not allowed on an iBGP peer (peer-asn equals my-asn)"]),
        (vec![("ebgp-multihop", "maybe")], vec![r#"peers[0].ebgp-multihop: string "maybe" must be true or false"#]),
        (vec![("ebgp-multihop", "\"true\"")], vec![r#"peers[0].ebgp-multihop: string "true" must be true or false"#]),
        (vec![("bfd-profile", "fast")], vec![r#"peers[0].bfd-profile: "fast" is not defined in bfd-profiles"#]),
        (vec![("node-selectors", "{match-labels: {a: b}}")], vec!["peers[0].node-selectors: a mapping must be a list"]),
        (vec![("hold-tme", "3s")], vec![r#"peers[0]: unknown key "hold-tme", did you mean "hold-time"?"#]),
        (vec![("holdTime", "3s")], vec![r#"peers[0]: unknown key "holdTime", did you mean "hold-time"?"#]),
        (vec![("peerASN", "1")], vec![r#"peers[0]: unknown key "peerASN", did you mean "peer-asn"?"#]),
        (vec![("graceful-restart-time", "5000s")], vec![r#"peers[0].graceful-restart-time: "5000s" must be between 1s and 4095s (the Restart Time is 12 bits, RFC 4724 section 3)"#]),
        (vec![("graceful-restart-time", "0s")], vec![r#"peers[0].graceful-restart-time: "0s" must be between 1s and 4095s (the Restart Time is 12 bits, RFC 4724 section 3)"#]),
        (vec![("graceful-restart-time", "1.5s")], vec![r#"peers[0].graceful-restart-time: "1.5s" must be a whole number of seconds"#]),
        (vec![("graceful-restart-time", "-1s")], vec![r#"peers[0].graceful-restart-time: "-1s" must not be negative"#]),
        (vec![("graceful-restart", "1")], vec!["peers[0].graceful-restart: integer 1 must be true or false"]),
        (vec![("connect-retry-time", "0s")], vec![r#"peers[0].connect-retry-time: "0s" must be between 1s and 65535s"#]),
        (vec![("origin", "egp")], vec![r#"peers[0].origin: "egp" is not an origin (expected "igp" or "incomplete")"#]),
        (vec![("origin", "IGP")], vec![r#"peers[0].origin: "IGP" is not an origin (expected "igp" or "incomplete"), did you mean "igp"?"#]),
        (vec![("pod-cidr-local-pref", "100")], vec!["peers[0].pod-cidr-local-pref: 100 is only sent to iBGP peers, and this peer is eBGP (peer-asn differs from my-asn)"]),
        (vec![("my-asn", "65000"), ("pod-cidr-local-pref", "-1")], vec!["peers[0].pod-cidr-local-pref: -1 must be between 0 and 4294967295"]),
        (vec![("pod-cidr-communities", "[65000:1, 65000:70000, nope]")], vec![
            r#"peers[0].pod-cidr-communities[1]: "65000:70000" is not a community: 70000 is above 65535"#,
            r#"peers[0].pod-cidr-communities[2]: "nope" is neither a name defined in bgp-communities nor a community (expected "a:b" with a and b from 0 to 65535, or "large:a:b:c" with 32-bit numbers)"#,
        ]),
        (vec![("pod-cidr-communities", "65000:1")], vec![r#"peers[0].pod-cidr-communities: string "65000:1" must be a list"#]),
        (vec![("max-prefix", "{limit: 0}")], vec!["peers[0].max-prefix.limit: 0 must be between 1 and 4294967295"]),
        (vec![("max-prefix", "{}")], vec!["peers[0].max-prefix.limit: is required"]),
        (vec![("max-prefix", "{limit: 5, action: drop}")], vec![r#"peers[0].max-prefix.action: "drop" is not a max-prefix action (expected "warn" or "cease")"#]),
        (vec![("max-prefix", "{limit: 5, actoin: warn}")], vec![r#"peers[0].max-prefix: unknown key "actoin", did you mean "action"?"#]),
        (vec![("max-prefix", "100")], vec!["peers[0].max-prefix: integer 100 must be a mapping"]),
        (vec![("ebgp-multihop", "true"), ("ttl-security", "true")], vec!["peers[0].ttl-security: true cannot be combined with ebgp-multihop (GTSM is for directly connected peers, RFC 5082)"]),
        (vec![("passive", "no way")], vec![r#"peers[0].passive: string "no way" must be true or false"#]),
    ];
    for (fields, want) in &cases {
        let text = peer(fields);
        assert_eq!(errors(&text), *want, "for {fields:?}\n{text}");
    }
}

#[test]
fn password_secret_names_a_secret_key_and_excludes_password() {
    use podcidr_speaker::config::SecretKeyRef;
    let p = the_peer(&[("password-secret", "{name: tor-md5, key: tor-a}")]);
    assert_eq!(
        p.password_secret,
        Some(SecretKeyRef {
            name: "tor-md5".into(),
            key: "tor-a".into()
        })
    );
    assert!(p.password.is_none());
    // An empty password next to it means no password, as everywhere.
    let p = the_peer(&[
        ("password", "\"\""),
        ("password-secret", "{name: a.b-c, key: K_1.x}"),
    ]);
    assert_eq!(
        p.password_secret.as_ref().map(|r| r.key.as_str()),
        Some("K_1.x")
    );
    // "" and null: not set.
    for absent in ["\"\"", "~"] {
        assert_eq!(
            the_peer(&[("password-secret", absent)]).password_secret,
            None
        );
    }
    // Distinct Secrets, each once, for the source to follow.
    let c = crate::ok("peers:\n- {peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001, password-secret: {name: s1, key: a}}\n- {peer-address: 10.0.0.2, peer-asn: 65000, my-asn: 65001, password-secret: {name: s1, key: b}}\n- {peer-address: 10.0.0.3, peer-asn: 65000, my-asn: 65001, password-secret: {name: s2, key: a}}\n");
    assert_eq!(
        c.secret_names().into_iter().collect::<Vec<_>>(),
        ["s1", "s2"]
    );

    type Fields<'a> = Vec<(&'a str, &'a str)>;
    #[rustfmt::skip]
    let cases: Vec<(Fields, Vec<&str>)> = vec![
        (vec![("password", "hunter2"), ("password-secret", "{name: s, key: k}")],
         vec!["peers[0].password-secret: cannot be combined with peers[0].password (the TCP MD5 key comes from one place)"]),
        (vec![("password-secret", "{name: s}")], vec!["peers[0].password-secret.key: is required"]),
        (vec![("password-secret", "{key: k}")], vec!["peers[0].password-secret.name: is required"]),
        (vec![("password-secret", "{name: \"\", key: k}")], vec!["peers[0].password-secret.name: is required"]),
        (vec![("password-secret", "{name: Tor_MD5, key: k}")], vec![r#"peers[0].password-secret.name: "Tor_MD5" must be a Secret name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"#]),
        (vec![("password-secret", "{name: ../etc, key: k}")], vec![r#"peers[0].password-secret.name: "../etc" must be a Secret name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"#]),
        (vec![("password-secret", "{name: s, key: ..data}")], vec![r#"peers[0].password-secret.key: "..data" must be a Secret data key: letters, digits, '-', '_' and '.', at most 253 characters, not starting with "..""#]),
        (vec![("password-secret", "{name: s, key: a/b}")], vec![r#"peers[0].password-secret.key: "a/b" must be a Secret data key: letters, digits, '-', '_' and '.', at most 253 characters, not starting with "..""#]),
        (vec![("password-secret", "{name: s, key: k, namespace: x}")], vec![r#"peers[0].password-secret: unknown key "namespace" (expected one of: name, key)"#]),
        (vec![("password-secret", "tor-md5")], vec![r#"peers[0].password-secret: string "tor-md5" must be a mapping"#]),
    ];
    for (fields, want) in &cases {
        let text = peer(fields);
        assert_eq!(errors(&text), *want, "for {fields:?}\n{text}");
    }
    // Not a speaker-wide default: each peer names its own key.
    let text = format!(
        "{}speaker:\n  password-secret: {{name: s, key: k}}\n",
        peer(&[])
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("speaker: unknown key \"password-secret\""),
        "{errs:?}"
    );
}

#[test]
fn passwords_never_appear_in_errors() {
    let secret = "hunter2-but-with-a\\nnewline";
    let text = peer(&[("password", &format!("\"{secret}\"")), ("hold-time", "1s")]);
    let errs = errors(&text);
    assert_eq!(errs.len(), 2, "{errs:?}");
    for e in &errs {
        assert!(!e.contains("hunter2"), "{e}");
    }
    let p = the_peer(&[("password", "hunter2")]);
    assert!(!format!("{p:?}").contains("hunter2"));
    assert_eq!(
        p.password.as_ref().map(ToString::to_string).as_deref(),
        Some("<redacted>")
    );
}

#[test]
fn duplicate_keys_and_all_errors_at_once() {
    let text =
        "peers:\n- peer-address: 10.0.0.1\n  peer-asn: 65000\n  my-asn: 65001\n  peer-asn: 65002\n\
                - peer-address: x\n  peer-asn: 0\n  my-asn: 1\n  hold-time: 1s\n  colour: red\n";
    assert_eq!(
        errors(text),
        vec![
            r#"peers[0].peer-asn: duplicate key "peer-asn" (first defined at line 3)"#,
            r#"peers[1].peer-address: "x" is not an IP address"#,
            "peers[1].peer-asn: 0 is not a valid AS number (1 to 4294967295)",
            r#"peers[1].hold-time: "1s" must be 0 or at least 3s"#,
            r#"peers[1]: unknown key "colour" (expected one of: peer-address, peer-asn, my-asn, peer-port, hold-time, keepalive-time, router-id, source-address, password, password-secret, ebgp-multihop, bfd-profile, node-selectors, graceful-restart, graceful-restart-time, connect-retry-time, origin, pod-cidr-communities, pod-cidr-local-pref, max-prefix, passive, ttl-security, pod-cidr-pools, next-hop-v4, next-hop-v6)"#,
        ]
    );
}

#[test]
fn errors_carry_positions() {
    let text =
        "peers:\n- peer-address: 10.0.0.1\n  peer-asn: 65000\n  my-asn: 65001\n  hold-time: 2s\n";
    let e = podcidr_speaker::config::parse(text).unwrap_err();
    let first = e.iter().next().unwrap();
    assert_eq!(first.path, "peers[0].hold-time");
    assert_eq!(first.location.map(|l| (l.line, l.column)), Some((5, 14)));
}

#[test]
fn duplicate_peers() {
    let two = |a: &str, b: &str| format!("peers:\n{a}{b}");
    let p = |addr: &str, extra: &str| {
        format!("- peer-address: {addr}\n  peer-asn: 65000\n  my-asn: 65001\n{extra}")
    };
    let sel = |v: &str| format!("  node-selectors:\n  - match-labels: {{rack: {v}}}\n");
    // Same router, both for every node: refused (MetalLB refused exact duplicates).
    assert_eq!(
        errors(&two(&p("10.0.0.1", ""), &p("10.0.0.1", "  hold-time: 30s\n"))),
        vec!["peers[1]: same router 10.0.0.1:179 as peers[0], for every node: a node can hold only one session per peer-address and peer-port"]
    );
    assert_eq!(
        errors(&two(&p("10.0.0.1", &sel("a")), &p("10.0.0.1", &sel("a")))),
        vec!["peers[1]: same router 10.0.0.1:179 as peers[0], for the same nodes: a node can hold only one session per peer-address and peer-port"]
    );
    // Indexes are file positions, even after an entry that is not a mapping.
    let text = format!("peers:\n- 1\n{}{}", p("10.0.0.1", ""), p("10.0.0.1", ""));
    assert_eq!(
        errors(&text),
        vec![
            "peers[0]: integer 1 must be a mapping",
            "peers[2]: same router 10.0.0.1:179 as peers[1], for every node: a node can hold only one session per peer-address and peer-port",
        ]
    );
    let text = format!("peers:\n- 1\n{}", p("10.0.0.1", ""));
    assert_eq!(podcidr_speaker::config::parse(&text).unwrap_err().len(), 1);
    let ok_text = format!("peers:\n{}{}", p("10.0.0.1", ""), p("10.0.0.2", ""));
    assert_eq!(
        ok(&ok_text)
            .peers
            .iter()
            .map(|p| p.index)
            .collect::<Vec<_>>(),
        [0, 1]
    );
    // Per-rack routers sharing an address, or another port: fine.
    ok(&two(&p("10.0.0.1", &sel("a")), &p("10.0.0.1", &sel("b"))));
    ok(&two(
        &p("10.0.0.1", ""),
        &p("10.0.0.1", "  peer-port: 1179\n"),
    ));
    ok(&two(&p("10.0.0.1", ""), &p("10.0.0.2", "")));
}

#[test]
fn bfd_profiles() {
    let with = |profile: &str| format!("bfd-profiles:\n- name: p\n  {profile}\n");
    let ranges: &[(&str, i64, i64)] = &[
        ("receive-interval", 10, 60000),
        ("transmit-interval", 10, 60000),
        ("detect-multiplier", 2, 255),
        ("echo-interval", 10, 60000),
        ("minimum-ttl", 1, 254),
    ];
    for (key, min, max) in ranges {
        for v in [min, max] {
            let c = ok(&with(&format!("{key}: {v}")));
            let p = &c.bfd_profiles["p"];
            let got = match *key {
                "receive-interval" => p.receive_interval,
                "transmit-interval" => p.transmit_interval,
                "detect-multiplier" => p.detect_multiplier,
                "echo-interval" => p.echo_interval,
                _ => p.minimum_ttl,
            };
            assert_eq!(got.map(i64::from), Some(*v), "{key}: {v}");
        }
        for v in [min - 1, max + 1] {
            assert_eq!(
                errors(&with(&format!("{key}: {v}"))),
                vec![format!(
                    "bfd-profiles[0].{key}: {v} must be between {min} and {max}"
                )]
            );
        }
    }
    let c = ok(&with("echo-mode: true\n  passive-mode: true"));
    assert!(c.bfd_profiles["p"].echo_mode && c.bfd_profiles["p"].passive_mode);
    assert_eq!(c.bfd_profiles["p"].receive_interval, None);
    assert_eq!(
        errors("bfd-profiles:\n- receive-interval: 100\n"),
        vec!["bfd-profiles[0].name: is required"]
    );
    assert_eq!(
        errors("bfd-profiles:\n- name: \"\"\n"),
        vec![r#"bfd-profiles[0].name: "" must not be empty"#]
    );
    assert_eq!(
        errors("bfd-profiles:\n- name: p\n- name: p\n"),
        vec![r#"bfd-profiles[1].name: "p" is already the name of bfd-profiles[0]"#]
    );
    assert_eq!(
        errors("bfd-profiles:\n- name: p\n  echo-mod: true\n"),
        vec![r#"bfd-profiles[0]: unknown key "echo-mod", did you mean "echo-mode"?"#]
    );
    // A peer may name a defined profile; a near miss gets a hint.
    let text = "bfd-profiles:\n- name: fast\npeers:\n- peer-address: 10.0.0.1\n  peer-asn: 1\n  my-asn: 2\n  bfd-profile: fast\n";
    assert_eq!(ok(text).peers[0].bfd_profile.as_deref(), Some("fast"));
    assert_eq!(
        errors(&text.replace("bfd-profile: fast", "bfd-profile: fsat")),
        vec![
            r#"peers[0].bfd-profile: "fsat" is not defined in bfd-profiles, did you mean "fast"?"#
        ]
    );
}

#[test]
fn bgp_communities() {
    let text = "bgp-communities:\n  pods: 65083:83\n  big: large:1:2:3\npeers:\n- peer-address: 10.0.0.1\n  peer-asn: 1\n  my-asn: 2\n  pod-cidr-communities: [pods, big, no-export]\n";
    let c = ok(text);
    assert_eq!(
        c.peers[0].pod_cidr_communities,
        vec![Community::new(65083, 83), Community::NO_EXPORT]
    );
    assert_eq!(
        c.peers[0].pod_cidr_large_communities,
        vec![LargeCommunity {
            global_admin: 1,
            local_data1: 2,
            local_data2: 3
        }]
    );
    // A defined name wins over a well-known one.
    let c = ok("bgp-communities:\n  no-export: 1:1\npeers:\n- peer-address: 10.0.0.1\n  peer-asn: 1\n  my-asn: 2\n  pod-cidr-communities: [no-export]\n");
    assert_eq!(c.peers[0].pod_cidr_communities, vec![Community::new(1, 1)]);
    assert_eq!(
        errors("bgp-communities:\n  a: 1:2:3\n  b: 70000:1\n  c: x\n"),
        vec![
            r#"bgp-communities.a: "1:2:3" is not a community (expected "a:b" with a and b from 0 to 65535, or "large:a:b:c" with 32-bit numbers)"#,
            r#"bgp-communities.b: "70000:1" is not a community: 70000 is above 65535"#,
            r#"bgp-communities.c: "x" is not a community (expected "a:b" with a and b from 0 to 65535, or "large:a:b:c" with 32-bit numbers)"#,
        ]
    );
    assert_eq!(
        errors("bgp-communities:\n  a: 1:2\n  a: 1:3\n"),
        vec![r#"bgp-communities.a: duplicate key "a" (first defined at line 2)"#]
    );
    assert_eq!(
        errors("bgp-communities: [1:2]\n"),
        vec!["bgp-communities: a list must be a mapping"]
    );
}

#[test]
fn speaker_defaults_fold_into_peers() {
    let text = "speaker:\n  graceful-restart: false\n  graceful-restart-time: 60s\n  origin: igp\n  pod-cidr-communities: [1:1]\n  pod-cidr-local-pref: 150\n  max-prefix: {limit: 10}\n  ttl-security: true\n  passive: true\n  connect-retry-time: 7s\n\
                peers:\n\
                - {peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001}\n\
                - {peer-address: 10.0.0.2, peer-asn: 65001, my-asn: 65001}\n\
                - {peer-address: 10.0.0.3, peer-asn: 65000, my-asn: 65001, ebgp-multihop: true, origin: incomplete, pod-cidr-communities: [], graceful-restart: true, passive: false}\n";
    let c = ok(text);
    let [ebgp, ibgp, multihop] = [&c.peers[0], &c.peers[1], &c.peers[2]];
    for p in [ebgp, ibgp] {
        assert!(!p.graceful_restart && p.passive, "{p:?}");
        assert_eq!(p.graceful_restart_time, secs(60));
        assert_eq!(p.connect_retry_time, secs(7));
        assert_eq!(p.origin, Origin::Igp);
        assert_eq!(p.pod_cidr_communities, vec![Community::new(1, 1)]);
        assert_eq!(
            p.max_prefix,
            Some(PrefixLimit {
                limit: 10,
                action: PrefixLimitAction::Cease
            })
        );
        assert!(p.ttl_security);
    }
    // Local-pref only reaches iBGP peers; GTSM only directly connected ones.
    assert_eq!(ebgp.pod_cidr_local_pref, None);
    assert_eq!(ibgp.pod_cidr_local_pref, Some(150));
    assert!(!multihop.ttl_security);
    // A peer's own keys replace the defaults, lists included.
    assert_eq!(multihop.origin, Origin::Incomplete);
    assert!(multihop.pod_cidr_communities.is_empty());
    assert!(multihop.graceful_restart && !multihop.passive);
    assert!(!c.speaker.graceful_restart);
    assert_eq!(c.speaker.origin, Origin::Igp);
    assert_eq!(
        errors("speaker:\n  orign: igp\n"),
        vec![r#"speaker: unknown key "orign", did you mean "origin"?"#]
    );
    assert_eq!(
        errors("speaker:\n  peer-asn: 1\n"),
        vec![
            r#"speaker: unknown key "peer-asn" (expected one of: graceful-restart, graceful-restart-time, connect-retry-time, origin, pod-cidr-communities, pod-cidr-local-pref, max-prefix, passive, ttl-security, pod-cidr-pools, announce-pod-cidrs, announce-lb-ips)"#
        ]
    );
    // A next hop is per peer: one address cannot be every node's default.
    assert_eq!(
        errors("speaker:\n  next-hop-v6: 2001:db8::1\n"),
        vec![
            r#"speaker: unknown key "next-hop-v6" (expected one of: graceful-restart, graceful-restart-time, connect-retry-time, origin, pod-cidr-communities, pod-cidr-local-pref, max-prefix, passive, ttl-security, pod-cidr-pools, announce-pod-cidrs, announce-lb-ips)"#
        ]
    );
}

/// Issue 29: the route classes are switched by the bgp-config, speaker-wide only; both
/// default to announced.
#[test]
fn speaker_switches_the_route_classes() {
    let c = ok("peers: [{peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001}]\n");
    assert!(c.speaker.announce_pod_cidrs && c.speaker.announce_lb_ips);
    let c = ok("speaker:\n  announce-pod-cidrs: false\n  announce-lb-ips: false\n");
    assert!(!c.speaker.announce_pod_cidrs && !c.speaker.announce_lb_ips);
    let c = ok("speaker: {announce-pod-cidrs: true, announce-lb-ips: null}\n");
    assert!(c.speaker.announce_pod_cidrs && c.speaker.announce_lb_ips);
    let errs = errors("speaker:\n  announce-lb-ips: \"no\"\n");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("speaker.announce-lb-ips") && errs[0].contains("true or false"),
        "{errs:?}"
    );
    // A peer cannot switch a route class for its session alone.
    let errs = errors(
        "peers: [{peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001, announce-pod-cidrs: false}]\n",
    );
    assert!(
        errs[0].contains("unknown key \"announce-pod-cidrs\""),
        "{errs:?}"
    );
}

#[test]
fn top_level_shapes() {
    assert_eq!(ok("").peers.len(), 0);
    assert_eq!(ok("# nothing yet\n").peers.len(), 0);
    assert_eq!(ok("peers: []\naddress-pools: ~\n").peers.len(), 0);
    assert_eq!(
        errors("peer:\n- peer-address: 10.0.0.1\n"),
        vec![r#"unknown key "peer", did you mean "peers"?"#]
    );
    assert_eq!(errors("- a\n- b\n"), vec!["a list must be a mapping"]);
    assert_eq!(
        errors("peers: {a: 1}\n"),
        vec!["peers: a mapping must be a list"]
    );
    assert_eq!(
        errors("peers: [1]\n"),
        vec!["peers[0]: integer 1 must be a mapping"]
    );
    let e = errors("peers: [\n");
    assert_eq!(e.len(), 1);
    assert!(e[0].starts_with("invalid YAML: "), "{e:?}");
    assert_eq!(
        errors("a: 1\n---\nb: 2\n"),
        vec!["more than one YAML document: a raw config is a single document"]
    );
}

#[test]
fn pod_cidr_pools_choose_pools_and_their_communities() {
    use podcidr_speaker::config::PoolRouteOptions;
    let text = "bgp-communities:\n  blue-tag: 65083:300\n\
                speaker:\n  pod-cidr-pools:\n    default: {}\n    blue:\n      communities: [blue-tag, \"large:1:2:3\", 65083:300]\n\
                peers:\n\
                - {peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001}\n\
                - {peer-address: 10.0.0.2, peer-asn: 65000, my-asn: 65001, pod-cidr-pools: {red.team-1: null}}\n";
    let c = ok(text);
    let pools = c.peers[0].pod_cidr_pools.as_ref().expect("speaker default");
    assert_eq!(pools.keys().collect::<Vec<_>>(), ["blue", "default"]);
    assert_eq!(pools["default"], PoolRouteOptions::default());
    assert_eq!(
        pools["blue"],
        PoolRouteOptions {
            communities: vec![Community::new(65083, 300)],
            large_communities: vec![LargeCommunity {
                global_admin: 1,
                local_data1: 2,
                local_data2: 3
            }],
        }
    );
    // A peer's own map replaces the default whole.
    let own = c.peers[1].pod_cidr_pools.as_ref().unwrap();
    assert_eq!(own.keys().collect::<Vec<_>>(), ["red.team-1"]);
    // Absent: every pool.
    assert_eq!(the_peer(&[]).pod_cidr_pools, None, "no key, no pool filter");

    assert_eq!(
        errors("speaker:\n  pod-cidr-pools: {}\n"),
        vec!["speaker.pod-cidr-pools: must list at least one CiliumPodIPPool by name (remove the key to announce every pool)"]
    );
    assert_eq!(
        errors(&peer(&[(
            "pod-cidr-pools",
            "{Blue: {}, default: {communitie: [1:1]}, red: {communities: [nope]}, green: [1:1]}"
        )])),
        vec![
            r#"peers[0].pod-cidr-pools.Blue: "Blue" is not a CiliumPodIPPool name (lowercase letters, digits, '-' and '.', at most 253 characters, starting and ending with a letter or digit)"#,
            r#"peers[0].pod-cidr-pools.default: unknown key "communitie", did you mean "communities"?"#,
            r#"peers[0].pod-cidr-pools.red.communities[0]: "nope" is neither a name defined in bgp-communities nor a community (expected "a:b" with a and b from 0 to 65535, or "large:a:b:c" with 32-bit numbers)"#,
            "peers[0].pod-cidr-pools.green: a list must be a mapping",
        ]
    );
    assert_eq!(
        errors("speaker:\n  pod-cidr-pools: [blue]\n"),
        vec!["speaker.pod-cidr-pools: a list must be a mapping of pool names"]
    );
}
