//! `address-pools`: names, protocols, addresses (CIDRs and ranges), overlaps, and
//! `bgp-advertisements` with MetalLB's aggregation-length rule.

use ipnet::IpNet;
use podcidr_speaker::config::{BgpAdvertisement, Community, Protocol};

use crate::{errors, ok};

fn nets(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

/// One pool from its body lines (already indented by two spaces).
fn pool(body: &str) -> String {
    format!("address-pools:\n- {}", body.trim_start())
}

#[test]
fn valid_pools() {
    let c = ok(&pool(
        "  name: default\n  protocol: bgp\n  addresses: [10.5.112.0/21]\n",
    ));
    let p = &c.pools[0];
    assert_eq!(p.name, "default");
    assert_eq!(p.protocol, Protocol::Bgp);
    assert_eq!(p.cidrs, nets(&["10.5.112.0/21"]));
    assert!(p.auto_assign && !p.avoid_buggy_ips);
    // MetalLB gave a bgp pool without advertisements one default advertisement.
    assert_eq!(p.bgp_advertisements, vec![BgpAdvertisement::default()]);
    assert_eq!(
        (
            p.bgp_advertisements[0].aggregation_length,
            p.bgp_advertisements[0].aggregation_length_v6
        ),
        (32, 128)
    );

    let c = ok(&pool(
        "  name: mixed\n  protocol: bgp\n  auto-assign: false\n  avoid-buggy-ips: true\n  addresses:\n  - 10.0.0.7/24\n  - 10.1.0.1-10.1.0.6\n  - 2001:db8::/64\n",
    ));
    let p = &c.pools[0];
    assert!(!p.auto_assign && p.avoid_buggy_ips);
    assert_eq!(
        p.cidrs,
        nets(&[
            "10.0.0.0/24",
            "10.1.0.1/32",
            "10.1.0.2/31",
            "10.1.0.4/31",
            "10.1.0.6/32",
            "2001:db8::/64"
        ])
    );

    // A layer2 pool may carry an empty bgp-advertisements list (MetalLB checked len > 0).
    let c = ok(&pool(
        "  name: l2\n  protocol: layer2\n  addresses: [10.9.0.0/24]\n  bgp-advertisements: []\n",
    ));
    assert_eq!(c.pools[0].protocol, Protocol::Layer2);
    assert!(c.pools[0].bgp_advertisements.is_empty());

    let c = ok(&format!(
        "bgp-communities:\n  vpn: 1234:1\n{}",
        pool("  name: p\n  protocol: bgp\n  addresses: [10.0.0.0/24, 2001:db8::/120]\n  bgp-advertisements:\n  - aggregation-length: 24\n    aggregation-length-v6: 120\n    localpref: 100\n    communities: [vpn, 65000:1, vpn]\n  - {}\n")
    ));
    let ads = &c.pools[0].bgp_advertisements;
    assert_eq!(ads.len(), 2);
    assert_eq!(ads[0].aggregation_length, 24);
    assert_eq!(ads[0].aggregation_length_v6, 120);
    assert_eq!(ads[0].local_pref, Some(100));
    assert_eq!(
        ads[0].communities,
        vec![Community::new(1234, 1), Community::new(65000, 1)]
    );
    assert_eq!(ads[1], BgpAdvertisement::default());
}

#[test]
fn invalid_pools() {
    let base = "  name: p\n  protocol: bgp\n  addresses: [10.0.0.0/24]\n";
    let cases: Vec<(String, Vec<&str>)> = vec![
        (pool("  protocol: bgp\n  addresses: [10.0.0.0/24]\n"), vec!["address-pools[0].name: is required"]),
        (pool("  name: \"\"\n  protocol: bgp\n  addresses: [10.0.0.0/24]\n"), vec![r#"address-pools[0].name: "" must not be empty"#]),
        (pool("  name: p\n  addresses: [10.0.0.0/24]\n"), vec!["address-pools[0].protocol: is required"]),
        (pool("  name: p\n  protocol: bgpp\n  addresses: [10.0.0.0/24]\n"), vec![r#"address-pools[0].protocol: "bgpp" is not a protocol (expected "bgp" or "layer2"), did you mean "bgp"?"#]),
        (pool("  name: p\n  protocol: arp\n  addresses: [10.0.0.0/24]\n"), vec![r#"address-pools[0].protocol: "arp" is not a protocol (expected "bgp" or "layer2")"#]),
        (pool("  name: p\n  protocol: bgp\n"), vec!["address-pools[0].addresses: is required"]),
        (pool("  name: p\n  protocol: bgp\n  addresses: []\n"), vec!["address-pools[0].addresses: must list at least one CIDR or address range"]),
        (pool("  name: p\n  protocol: bgp\n  addresses: 10.0.0.0/24\n"), vec![r#"address-pools[0].addresses: string "10.0.0.0/24" must be a list"#]),
        (pool("  name: p\n  protocol: bgp\n  addresses: [10.0.0.0/33]\n"), vec![r#"address-pools[0].addresses[0]: "10.0.0.0/33" is not a CIDR ("10.0.0.0/24") or an address range ("10.0.0.10-10.0.0.20")"#]),
        (pool("  name: p\n  protocol: bgp\n  addresses: [10.0.0.5]\n"), vec![r#"address-pools[0].addresses[0]: "10.0.0.5" is not a CIDR or an address range (write "10.0.0.5/32" for one address)"#]),
        (pool("  name: p\n  protocol: bgp\n  addresses: [10.0.0.9-10.0.0.1]\n"), vec![r#"address-pools[0].addresses[0]: "10.0.0.9-10.0.0.1" is not an address range: the start 10.0.0.9 is after the end 10.0.0.1"#]),
        (pool("  name: p\n  protocol: bgp\n  addresses: [10.0.0.0/24, 10.0.0.128/25]\n"), vec![r#"address-pools[0].addresses[1]: "10.0.0.128/25" overlaps "10.0.0.0/24" (address-pools[0].addresses[0], pool "p")"#]),
        (pool("  name: p\n  protocol: layer2\n  addresses: [10.0.0.0/24]\n  bgp-advertisements: [{}]\n"), vec!["address-pools[0].bgp-advertisements: is not allowed in a layer2 pool"]),
        (pool(&format!("{base}  bgp-advertisements: [{{aggregation-length: 33}}]\n")), vec!["address-pools[0].bgp-advertisements[0].aggregation-length: 33 must be between 0 and 32"]),
        (pool(&format!("{base}  bgp-advertisements: [{{aggregation-length: -1}}]\n")), vec!["address-pools[0].bgp-advertisements[0].aggregation-length: -1 must be between 0 and 32"]),
        (pool(&format!("{base}  bgp-advertisements: [{{aggregation-length: 16}}]\n")), vec![r#"address-pools[0].bgp-advertisements[0].aggregation-length: 16 is shorter than the /24 of "10.0.0.0/24" in this pool: the aggregate would announce addresses outside the pool"#]),
        (pool(&format!("{base}  bgp-advertisements: [{{aggregation-length-v6: 129}}]\n")), vec!["address-pools[0].bgp-advertisements[0].aggregation-length-v6: 129 must be between 0 and 128"]),
        (pool("  name: p\n  protocol: bgp\n  addresses: [2001:db8::/64]\n  bgp-advertisements: [{aggregation-length-v6: 48}]\n"), vec![r#"address-pools[0].bgp-advertisements[0].aggregation-length-v6: 48 is shorter than the /64 of "2001:db8::/64" in this pool: the aggregate would announce addresses outside the pool"#]),
        // A range's widest block bounds the aggregation too (MetalLB's lowestMask).
        (pool("  name: p\n  protocol: bgp\n  addresses: [10.0.0.0-10.0.0.3]\n  bgp-advertisements: [{aggregation-length: 29}]\n"), vec![r#"address-pools[0].bgp-advertisements[0].aggregation-length: 29 is shorter than the /30 of "10.0.0.0-10.0.0.3" in this pool: the aggregate would announce addresses outside the pool"#]),
        (pool(&format!("{base}  bgp-advertisements: [{{localpref: -5}}]\n")), vec!["address-pools[0].bgp-advertisements[0].localpref: -5 must be between 0 and 4294967295"]),
        (pool(&format!("{base}  bgp-advertisements: [{{communities: [65536:1, vnp]}}]\n")), vec![
            r#"address-pools[0].bgp-advertisements[0].communities[0]: "65536:1" is not a community: 65536 is above 65535"#,
            r#"address-pools[0].bgp-advertisements[0].communities[1]: "vnp" is neither a name defined in bgp-communities nor a community (expected "a:b" with a and b from 0 to 65535, or "large:a:b:c" with 32-bit numbers)"#,
        ]),
        (pool(&format!("{base}  bgp-advertisements: [{{aggregation-lenght: 24}}]\n")), vec![r#"address-pools[0].bgp-advertisements[0]: unknown key "aggregation-lenght", did you mean "aggregation-length"?"#]),
        (pool(&format!("{base}  cidr: [10.0.0.0/24]\n")), vec![r#"address-pools[0]: unknown key "cidr" (expected one of: name, protocol, addresses, avoid-buggy-ips, auto-assign, bgp-advertisements)"#]),
        (pool(&format!("{base}  auto-assign: maybe\n")), vec![r#"address-pools[0].auto-assign: string "maybe" must be true or false"#]),
    ];
    for (text, want) in &cases {
        assert_eq!(errors(text), *want, "\n{text}");
    }
}

#[test]
fn pools_across_the_file() {
    let two = |a: &str, b: &str| {
        format!("address-pools:\n- name: {a}\n  protocol: bgp\n  addresses: [10.5.112.0/21]\n- name: {b}\n  protocol: layer2\n  addresses: [10.5.113.0/24]\n")
    };
    assert_eq!(
        errors(&two("a", "b")),
        vec![
            r#"address-pools[1].addresses[0]: "10.5.113.0/24" overlaps "10.5.112.0/21" (address-pools[0].addresses[0], pool "a")"#
        ]
    );
    assert_eq!(
        errors(&two("a", "a")),
        vec![
            r#"address-pools[1].name: "a" is already the name of address-pools[0]"#,
            r#"address-pools[1].addresses[0]: "10.5.113.0/24" overlaps "10.5.112.0/21" (address-pools[0].addresses[0], pool "a")"#,
        ]
    );
    // Different families never overlap; adjacent ranges do not either.
    let c = ok("address-pools:\n- {name: a, protocol: bgp, addresses: [10.0.0.0/25, 2001:db8::/64]}\n- {name: b, protocol: bgp, addresses: [10.0.0.128/25, 2001:db8:0:1::/64]}\n");
    assert_eq!(c.pools.len(), 2);
}
