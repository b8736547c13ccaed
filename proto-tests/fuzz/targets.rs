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
