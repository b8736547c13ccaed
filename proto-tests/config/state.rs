//! The config in force across updates: a bad edit or a deletion keeps the last good
//! config; a rejected content is reported as new only once.

use podcidr_speaker::config::state::{ConfigState, ConfigUpdate, Fingerprint};

const GOOD: &str = "peers:\n- {peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001}\n";
const GOOD2: &str = "peers:\n- {peer-address: 10.0.0.2, peer-asn: 65000, my-asn: 65001}\n";
const BAD1: &str =
    "peers:\n- {peer-address: 10.0.0.1, peer-asn: 65000, my-asn: 65001, hold-time: 2s}\n";
const BAD2: &str = "peers:\n- {peer-address: nowhere, peer-asn: 65000, my-asn: 65001}\n";

fn address_in_force(s: &ConfigState) -> Option<String> {
    s.config().map(|c| c.peers[0].address.to_string())
}

#[test]
fn last_good_config_stays_in_force() {
    let mut s = ConfigState::new();
    assert!(s.config().is_none());

    // Nothing good yet: rejected, nothing kept.
    match s.update_text(BAD1) {
        ConfigUpdate::Rejected {
            first_seen: true,
            kept: None,
            rejection,
        } => {
            assert_eq!(
                rejection.errors.to_string(),
                r#"peers[0].hold-time: "2s" must be 0 or at least 3s"#
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(s.config().is_none());

    let good = match s.update_text(GOOD) {
        ConfigUpdate::Applied {
            previous: None,
            current,
            fingerprint,
        } => {
            assert_eq!(fingerprint, Fingerprint::of(&[GOOD.as_bytes()]));
            current
        }
        other => panic!("{other:?}"),
    };
    assert!(s.status().rejected.is_none());

    // A bad edit: rejected, the good config stays, the error is visible in status.
    assert!(matches!(
        s.update_text(BAD2),
        ConfigUpdate::Rejected {
            first_seen: true,
            kept: Some(_),
            ..
        }
    ));
    assert_eq!(address_in_force(&s).as_deref(), Some("10.0.0.1"));
    let status = s.status();
    assert_eq!(status.in_force, Some(Fingerprint::of(&[GOOD.as_bytes()])));
    assert_eq!(status.rejected.as_ref().map(|r| r.errors.len()), Some(1));
    assert_eq!(
        status.rejected.as_ref().map(|r| r.fingerprint),
        Some(Fingerprint::of(&[BAD2.as_bytes()]))
    );
    // Same bad content again (a resync): not new. BAD1 was already reported before
    // there was a good config: not new either.
    assert!(matches!(
        s.update_text(BAD2),
        ConfigUpdate::Rejected {
            first_seen: false,
            ..
        }
    ));
    assert!(matches!(
        s.update_text(BAD1),
        ConfigUpdate::Rejected {
            first_seen: false,
            kept: Some(_),
            ..
        }
    ));
    assert_eq!(
        s.status().rejected.map(|r| r.fingerprint),
        Some(Fingerprint::of(&[BAD1.as_bytes()]))
    );
    assert_eq!(address_in_force(&s).as_deref(), Some("10.0.0.1"));

    // Back to the good text: unchanged, and the rejection is cleared.
    assert!(matches!(
        s.update_text(GOOD),
        ConfigUpdate::Unchanged { .. }
    ));
    assert!(s.status().rejected.is_none());
    // Same meaning, other text: unchanged too.
    let reformatted =
        "# comment\npeers:\n- peer-asn: 65000\n  peer-address: 10.0.0.1\n  my-asn: 65001\n";
    assert!(matches!(
        s.update_text(reformatted),
        ConfigUpdate::Unchanged { .. }
    ));

    // Deleted: kept, and said so.
    assert!(matches!(
        s.deleted(),
        ConfigUpdate::Deleted { kept: Some(_) }
    ));
    assert!(s.status().source_deleted);
    assert_eq!(address_in_force(&s).as_deref(), Some("10.0.0.1"));

    // A new good config after the deletion replaces it and reports the previous one.
    match s.update_text(GOOD2) {
        ConfigUpdate::Applied {
            previous: Some(prev),
            current,
            ..
        } => {
            assert_eq!(prev, good);
            assert_eq!(current.peers[0].address.to_string(), "10.0.0.2");
        }
        other => panic!("{other:?}"),
    }
    assert!(!s.status().source_deleted);
}

/// A ConfigMap manifest holding `raw` under data key `key` (how `--bgp-config FILE`
/// gives one; a watched ConfigMap arrives as the text of its key, as in `text_updates`).
fn manifest(key: &str, raw: &str) -> String {
    let indented: String = raw.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bgp-config\n  namespace: kube-system\ndata:\n  {key}: |\n{indented}"
    )
}

#[test]
fn configmap_updates() {
    let mut s = ConfigState::new();
    assert!(matches!(
        s.update_text(&manifest("config.yaml", GOOD)),
        ConfigUpdate::Applied { .. }
    ));
    // The same config moved to MetalLB's key: another source content, same meaning.
    assert!(matches!(
        s.update_text(&manifest("config", GOOD)),
        ConfigUpdate::Unchanged { .. }
    ));
    match s.update_text(&manifest("other", GOOD2)) {
        ConfigUpdate::Rejected {
            rejection,
            first_seen: true,
            kept: Some(_),
        } => assert_eq!(
            rejection.errors.to_string(),
            r#"data: has neither "config.yaml" (Cilium) nor "config" (MetalLB) key (keys: "other")"#
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(address_in_force(&s).as_deref(), Some("10.0.0.1"));
    assert!(matches!(
        s.deleted(),
        ConfigUpdate::Deleted { kept: Some(_) }
    ));
    let mut fresh = ConfigState::new();
    assert!(matches!(
        fresh.deleted(),
        ConfigUpdate::Deleted { kept: None }
    ));
}

#[test]
fn fingerprints() {
    assert_eq!(Fingerprint::of(&[b"a"]), Fingerprint::of(&[b"a"]));
    assert_ne!(
        Fingerprint::of(&[b"ab", b"c"]),
        Fingerprint::of(&[b"a", b"bc"])
    );
    assert_eq!(Fingerprint(0xab).to_string(), "00000000000000ab");
}

#[test]
fn a_warning_that_only_moved_leaves_the_config_unchanged() {
    // A repeated community is taken with a warning (issue 16); a comment above it moves
    // the warning's position but not the meaning.
    let text = "address-pools:\n- {name: p, protocol: bgp, addresses: [10.0.0.0/24], bgp-advertisements: [{communities: ['1:1', '1:1']}]}\n";
    let mut s = ConfigState::new();
    match s.update_text(text) {
        ConfigUpdate::Applied { current, .. } => assert_eq!(current.warnings.len(), 1),
        other => panic!("{other:?}"),
    }
    let moved = format!("# edited\n{text}");
    assert!(matches!(
        s.update_text(&moved),
        ConfigUpdate::Unchanged { .. }
    ));
    // A change of meaning is applied.
    assert!(matches!(
        s.update_text(&text.replace("'1:1', '1:1'", "'1:2'")),
        ConfigUpdate::Applied { .. }
    ));
}
