//! The bgp-config: table-driven tests of every field's valid and invalid values and
//! messages, selector semantics, reload plans, the last-good-config policy, the
//! sample files and the `check` command, and fidelity to MetalLB 0.12.1's parser.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod compat;
mod fidelity;
mod fields;
mod pools;
mod reload;
mod robust;
mod samples;
mod selectors;
mod state;

use podcidr_speaker::config::{parse, Config};

/// Every error of `text`, as displayed (path: message), in document order; empty when
/// the file is valid.
pub fn errors(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(_) => Vec::new(),
        Err(e) => e.iter().map(ToString::to_string).collect(),
    }
}

/// The config of a file that must be valid.
pub fn ok(text: &str) -> Config {
    parse(text).unwrap_or_else(|e| panic!("expected a valid config:\n{text}\n--- errors:\n{e}"))
}

/// A one-peer config: the base peer (10.0.0.1, peer-asn 65000, my-asn 65001) with
/// `fields` replacing or adding keys; a value of `-` removes the key.
pub fn peer(fields: &[(&str, &str)]) -> String {
    let mut entries: Vec<(String, String)> = vec![
        ("peer-address".into(), "10.0.0.1".into()),
        ("peer-asn".into(), "65000".into()),
        ("my-asn".into(), "65001".into()),
    ];
    for (k, v) in fields {
        match entries.iter_mut().find(|(ek, _)| ek == k) {
            Some(e) => e.1 = v.to_string(),
            None => entries.push((k.to_string(), v.to_string())),
        }
    }
    let mut out = String::from("peers:\n");
    for (i, (k, v)) in entries.iter().filter(|(_, v)| v != "-").enumerate() {
        out.push_str(if i == 0 { "- " } else { "  " });
        out.push_str(&format!("{k}: {v}\n"));
    }
    out
}

/// Labels from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
