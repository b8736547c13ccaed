//! Shared by the data-driven tests: where the real BGP data is (the one helper of
//! `proto-tests/common/data.rs`), and a tally of the events a decode source reports.

#![allow(dead_code)]

use podcidr_speaker::bgp::wire::{Message, PathAttribute};
use podcidr_speaker::decode::event::{Event, Origin};
use podcidr_speaker::decode::mrt::RibPrefix;
use std::collections::{BTreeMap, BTreeSet};

#[path = "../common/data.rs"]
mod data;
pub use data::data_dir;

/// What a source reported for one file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Decoded messages by type, malformed ones under "<TYPE>!" (e.g. "UPDATE!").
    pub messages: BTreeMap<String, u64>,
    /// Errors by kind: the NOTIFICATION a fatal error would cause ("3/11 ..."), the
    /// RFC 7606 reaction of non-fatal ones, and reader/framing problems.
    pub errors: BTreeMap<String, u64>,
    /// Other events by type (STATE_CHANGE, RIB, SKIPPED, GAP...).
    pub events: BTreeMap<String, u64>,
    /// Prefixes in the NLRI field / MP_REACH_NLRI, and in Withdrawn Routes /
    /// MP_UNREACH_NLRI, of every UPDATE that decoded.
    pub announced_ipv4: u64,
    pub announced_mp: u64,
    pub withdrawn_ipv4: u64,
    pub withdrawn_mp: u64,
    pub rib_entries: u64,
    pub rib_prefixes: BTreeSet<String>,
    /// Distinct MRT record offsets seen (records that produced at least one event).
    pub mrt_records: BTreeSet<u64>,
}

impl Tally {
    pub fn announced(&self) -> u64 {
        self.announced_ipv4 + self.announced_mp
    }

    pub fn withdrawn(&self) -> u64 {
        self.withdrawn_ipv4 + self.withdrawn_mp
    }

    pub fn message_count(&self, kind: &str) -> u64 {
        self.messages.get(kind).copied().unwrap_or(0)
            + self.messages.get(&format!("{kind}!")).copied().unwrap_or(0)
    }

    pub fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }

    pub fn add(&mut self, event: &Event) {
        if let Event::Message {
            origin: Origin::Mrt { offset, .. },
            ..
        }
        | Event::Rib {
            origin: Origin::Mrt { offset, .. },
            ..
        }
        | Event::StateChange {
            origin: Origin::Mrt { offset, .. },
            ..
        } = event
        {
            self.mrt_records.insert(*offset);
        }
        match event {
            Event::Message { decoded, .. } => {
                let name = decoded
                    .bytes
                    .get(18)
                    .and_then(|t| podcidr_speaker::decode::json::message_type_name(*t))
                    .unwrap_or("?");
                match &decoded.result {
                    Ok(msg) => {
                        let malformed = if decoded.is_malformed() { "!" } else { "" };
                        *self
                            .messages
                            .entry(format!("{name}{malformed}"))
                            .or_default() += 1;
                        if let Message::Update(u) = msg {
                            self.count_update(u);
                            for e in &u.errors {
                                *self
                                    .errors
                                    .entry(format!("{:?}: {}", e.reaction_kind, e.detail))
                                    .or_default() += 1;
                            }
                        }
                    }
                    Err(e) => {
                        *self.messages.entry(format!("{name}!")).or_default() += 1;
                        let n = e.notification();
                        *self
                            .errors
                            .entry(format!("{}/{} {}", n.code, n.subcode, n.kind()))
                            .or_default() += 1;
                    }
                }
            }
            Event::BadHeader { error, .. } => {
                let n = error.notification();
                *self
                    .errors
                    .entry(format!("header {}/{} {}", n.code, n.subcode, n.kind()))
                    .or_default() += 1;
            }
            Event::Truncated { .. } => {
                *self.errors.entry("truncated message".into()).or_default() += 1
            }
            Event::InputError { error } => {
                *self
                    .errors
                    .entry(format!("input {}", error.kind()))
                    .or_default() += 1
            }
            Event::Rib {
                route, attributes, ..
            } => {
                self.rib_entries += 1;
                self.rib_prefixes.insert(match &route.prefix {
                    RibPrefix::Ip(net) => net.to_string(),
                    RibPrefix::Other(raw) => format!("{raw:?}"),
                });
                *self.events.entry("RIB".into()).or_default() += 1;
                match attributes {
                    Ok(d) => match &d.result {
                        Ok(Message::Update(u)) => {
                            for e in &u.errors {
                                *self
                                    .errors
                                    .entry(format!("rib {:?}: {}", e.reaction_kind, e.detail))
                                    .or_default() += 1;
                            }
                        }
                        Ok(_) => {
                            *self
                                .errors
                                .entry("rib attributes not an update".into())
                                .or_default() += 1
                        }
                        Err(e) => {
                            let n = e.notification();
                            *self
                                .errors
                                .entry(format!("rib {}/{} {}", n.code, n.subcode, n.kind()))
                                .or_default() += 1;
                        }
                    },
                    Err(_) => {
                        *self
                            .errors
                            .entry("rib attributes too long".into())
                            .or_default() += 1
                    }
                }
            }
            other => {
                let kind = other
                    .to_json()
                    .get("type")
                    .map(|t| format!("{t:?}"))
                    .unwrap_or_default();
                *self.events.entry(kind).or_default() += 1;
            }
        }
    }

    fn count_update(&mut self, u: &podcidr_speaker::bgp::wire::Update) {
        self.announced_ipv4 += u.nlri.len() as u64;
        self.withdrawn_ipv4 += u.withdrawn.len() as u64;
        for a in &u.attributes {
            match a {
                PathAttribute::MpReach(mp) => self.announced_mp += mp.nlri.len() as u64,
                PathAttribute::MpUnreach(mp) => self.withdrawn_mp += mp.withdrawn.len() as u64,
                _ => {}
            }
        }
    }
}
