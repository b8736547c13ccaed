//! The bodies of the fuzz targets, shared by the cargo-fuzz crate (`fuzz_targets/`) and
//! the stable-toolchain replay test (`smoke.rs`). Each one panics only on a bug: a
//! panic inside the code under test, or two decode paths that disagree.

#![allow(dead_code)]

use podcidr_speaker::bgp::wire::{self, Context};
use podcidr_speaker::decode::event::Event;
use podcidr_speaker::decode::{flows, source};

/// Every decode context: 4-octet AS, extended messages and ADD-PATH per family.
pub fn contexts() -> impl Iterator<Item = Context> {
    (0u8..16).map(|bits| Context {
        four_octet_as: bits & 1 != 0,
        extended_message: bits & 2 != 0,
        add_path_ipv4_unicast: bits & 4 != 0,
        add_path_ipv6_unicast: bits & 8 != 0,
    })
}

/// One input as one BGP message under every context: the framing check and both
/// decode entry points must not panic, and the copying and the zero-copy decoders must
/// agree.
pub fn decode_message(data: &[u8]) {
    let bytes = bytes::Bytes::copy_from_slice(data);
    for ctx in contexts() {
        let _ = wire::check_header(data, &ctx);
        let copied = wire::decode_message(data, &ctx);
        let shared = wire::decode_message_bytes(bytes.clone(), &ctx);
        assert_eq!(
            copied, shared,
            "decode_message and decode_message_bytes disagree under {ctx:?}"
        );
        if let Err(e) = &copied {
            // The NOTIFICATION mapping must be total as well.
            let _ = e.notification();
        }
    }
}

/// One input as an MRT file: every event is rendered to JSON, as `decode --mrt` does.
pub fn mrt(data: &[u8]) {
    source::mrt(data, &mut |e: Event| {
        let _ = e.to_json().to_line();
    });
}

/// One input as a capture file, with the context guessed both ways.
pub fn pcap(data: &[u8]) {
    for options in [
        source::Options::default(),
        source::Options {
            four_octet_as: Some(false),
            add_path: true,
            extended_message: true,
        },
    ] {
        let _ = flows::pcap(data, &options, &mut |e: Event| {
            let _ = e.to_json().to_line();
        });
    }
}

/// One input as raw messages on standard input.
pub fn stream(data: &[u8]) {
    let _ = source::stream(data, &source::Options::default(), &mut |e: Event| {
        let _ = e.to_json().to_line();
    });
}

/// The input as text, as a config or state file would be read: invalid UTF-8 is
/// replaced rather than skipped, so every input exercises the parser.
fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// A small valid bgp-config, in force before the fuzzed one arrives.
const GOOD_CONFIG: &str = "peers:\n- peer-address: 192.0.2.1\n  peer-asn: 64512\n  my-asn: 64513\n";

/// One input as a bgp-config file (`check`, `--bgp-config` and the ConfigMap watcher
/// all end in `config::parse`): parsing is deterministic, a refusal carries at least
/// one reason, the `check` report renders, an accepted config selects its peers, and
/// a refused config never displaces the last good one (`ConfigState`).
pub fn config_parse(data: &[u8]) {
    use podcidr_speaker::config::{self, state};
    use std::collections::BTreeMap;

    let text = text(data);
    let parsed = config::parse(&text);
    assert_eq!(
        parsed,
        config::parse(&text),
        "config::parse is not deterministic"
    );
    let _ = podcidr_speaker::commands::check::check_text("fuzz.yaml", &text).to_string();
    match &parsed {
        Ok(config) => {
            let labels: BTreeMap<String, String> = config
                .peers
                .iter()
                .flat_map(|p| p.node_selectors.iter())
                .flat_map(|s| s.requirements().iter())
                .filter_map(|r| Some((r.key().to_owned(), r.values().first()?.clone())))
                .collect();
            for labels in [BTreeMap::new(), labels] {
                let selected = config.peers_for_node(&labels);
                for (key, peer) in &selected.peers {
                    assert_eq!(*key, peer.key());
                    assert!(peer.selects(&labels), "{key} selected but not matching");
                }
            }
        }
        Err(errors) => {
            assert!(!errors.is_empty(), "a refused config without a reason");
            let _ = errors.to_string();
        }
    }

    let mut st = state::ConfigState::new();
    let good = st.update_text(GOOD_CONFIG);
    assert!(
        matches!(good, state::ConfigUpdate::Applied { .. }),
        "{good:?}"
    );
    let good = st.config().cloned();
    let update = st.update_text(&text);
    match (&parsed, &update) {
        (Ok(_), state::ConfigUpdate::Applied { .. } | state::ConfigUpdate::Unchanged { .. }) => {}
        (Err(_), state::ConfigUpdate::Rejected { kept, .. }) => {
            assert!(kept.is_some(), "the last good config was not kept");
            assert_eq!(
                st.config().cloned(),
                good,
                "a refused config replaced the good one"
            );
            assert!(
                st.status().rejected.is_some(),
                "the rejection is not in the status"
            );
        }
        (parsed, update) => panic!("parse gave {parsed:?} but ConfigState did {update:?}"),
    }
}

/// One input as a `--cluster-state` directory: split at NUL octets into files, loaded
/// all-or-nothing into a `ClusterState`, then turned into the node view under every
/// `--ipam` override. A default route is never announced, nothing is both announced
/// and refused, and the view is deterministic. The Services' and EndpointSlices' facts
/// of the same files, sent as deltas from nothing, rebuild exactly those facts.
pub fn cluster_state(data: &[u8]) {
    use podcidr_speaker::sources::file::parse;
    use podcidr_speaker::sources::{node_view, IpamOverride};
    use std::path::PathBuf;

    let text = text(data);
    let files: Vec<(PathBuf, String)> = text
        .split('\0')
        .enumerate()
        // A piece that looks like JSON goes through the JSON reader (a `.json` file),
        // which streams a list's items; the rest through the YAML reader.
        .map(|(i, t)| {
            let ext = if t.trim_start().starts_with('{') {
                "json"
            } else {
                "yaml"
            };
            (PathBuf::from(format!("state-{i}.{ext}")), t.to_owned())
        })
        .collect();
    let (state, lb) = match parse::cluster_files(&files) {
        Ok(loaded) => (loaded.state, loaded.lb),
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let mut rebuilt = podcidr_speaker::sources::services::LbFacts::default();
    for update in rebuilt.changes_to(&lb) {
        assert!(rebuilt.apply(&update), "{update:?} changes nothing");
    }
    assert_eq!(rebuilt, lb, "deltas from nothing do not rebuild the facts");
    for slice in lb.slices.values() {
        assert!(slice.ready_by_node.values().all(|n| *n > 0), "{slice:?}");
    }
    for ipam in [
        IpamOverride::Auto,
        IpamOverride::Kubernetes,
        IpamOverride::ClusterPool,
    ] {
        let view = node_view(&state, ipam);
        assert_eq!(
            view,
            node_view(&state, ipam),
            "node_view is not deterministic"
        );
        let Ok(view) = view else { continue };
        assert_eq!(
            view.nodes.len(),
            state.nodes.len(),
            "a Node is missing from the view"
        );
        for entry in view.nodes.values() {
            for p in &entry.prefixes {
                assert_ne!(p.prefix_len(), 0, "{}: default route announced", entry.name);
                assert!(
                    !entry.refused.iter().any(|(r, _)| r == p),
                    "{}: {p} both announced and refused",
                    entry.name
                );
            }
        }
    }
}

/// One input as the UDP payload of a BFD control packet (RFC 5880 section 4.1): decode
/// never panics; an accepted packet passed section 6.8.6's checks, encodes back to the
/// same 24 octets but the Length, and decodes from them to itself (unless it had the A
/// bit, whose 24 octets are too short); a session in each state takes it without
/// panicking and answers a Poll with a Final.
pub fn bfd_packet(data: &[u8]) {
    use podcidr_speaker::bfd::{Packet, PacketError, Session, SessionConfig, State};
    use std::time::{Duration, Instant};

    let packet = match Packet::decode(data) {
        Ok(p) => p,
        Err(e) => {
            assert!(PacketError::REASONS.contains(&e.reason()), "{e:?}");
            let _ = e.to_string();
            return;
        }
    };
    assert!(packet.version == 1 && !packet.multipoint);
    assert!(packet.detect_mult != 0 && packet.my_discr != 0);
    assert!(packet.your_discr != 0 || matches!(packet.state, State::Down | State::AdminDown));
    let bytes = packet.encode();
    for (i, (a, b)) in bytes.iter().zip(data).enumerate() {
        if i != 3 {
            assert_eq!(a, b, "octet {i} changed by decode + encode");
        }
    }
    match Packet::decode(&bytes) {
        Ok(again) => {
            assert!(!packet.auth_present);
            assert_eq!(again, packet, "decode(encode(p)) != p");
        }
        Err(e) => assert!(packet.auth_present, "{e}: {packet:?}"),
    }

    let config = SessionConfig {
        desired_min_tx: Duration::from_millis(300),
        required_min_rx: Duration::from_millis(300),
        detect_mult: 3,
        passive: false,
    };
    let t0 = Instant::now();
    let your = packet.your_discr.max(1);
    for admin_down in [false, true] {
        let mut s = Session::new(config, your, t0, u64::from(packet.my_discr));
        s.set_admin_down(t0, admin_down);
        for at in [0u64, 1, 2] {
            let now = t0 + Duration::from_millis(at);
            let accepted = s.handle_packet(now, &packet);
            let mut finals = 0;
            while let Some(out) = s.poll_transmit(now) {
                finals += usize::from(out.final_);
                assert_eq!(Packet::decode(&out.encode()), Ok(out), "we sent {out:?}");
            }
            assert_eq!(finals, usize::from(accepted.is_ok() && packet.poll));
            while s.poll_event().is_some() {}
        }
        if let Some(t) = s.poll_timeout() {
            s.handle_timeout(t);
            let _ = s.poll_transmit(t);
        }
        let _ = s.detection_time();
    }
}
