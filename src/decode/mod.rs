//! The `decode` command and its readers: everything between a file (or stdin, or a hex
//! string) and the BGP messages inside it — decompression, MRT records (RFC 6396), pcap
//! and pcapng captures with their link, IP and TCP headers, TCP reassembly, BGP framing
//! with marker resynchronisation, learning a captured session's context from its OPENs
//! — and the JSON rendering of what was found.
//!
//! BGP messages are decoded only by `bgp::wire`; nothing here interprets their content
//! beyond the header, except OPENs (to learn a session's context). This module reads
//! only the files it is given and writes only to the writer it is given.
//!
//! # Output (one JSON object per line; field names are stable)
//!
//! Every object starts with `type`, then where it was found, then its content.
//!
//! - Where: `offset` (hex and stdin input); for MRT `timestamp` (seconds),
//!   `microseconds` (BGP4MP_ET only), and for records naming a session `peer_ip`,
//!   `peer_as`, `local_ip`, `local_as`, `interface`, `direction` ("received"/"sent");
//!   for captures `frame` (1-based), `timestamp`, `nanoseconds`, `src` and `dst`
//!   ("ip:port"), `stream_offset`.
//! - Messages: `type` OPEN, UPDATE, NOTIFICATION, KEEPALIVE or ROUTE_REFRESH, and
//!   `length`. OPEN: `version`, `my_as`, `asn`, `hold_time`, `bgp_id`, `capabilities`
//!   (`code`, `name`, values), `other_params`. UPDATE: `withdrawn`, `attributes` (each
//!   `type`, `code`, `value`), `nlri`, `errors` (RFC 7606: `attr_type`, `reaction`,
//!   `detail`). Prefixes are strings ("10.0.0.0/8"), or `{"prefix", "path_id"}` under
//!   ADD-PATH. NOTIFICATION: `code`, `subcode`, `name`, `data` (hex),
//!   `shutdown_message`. ROUTE_REFRESH: `afi`, `safi`, `subtype`. When the session's
//!   context had to be guessed, `context_guessed` says which one decoded the message.
//! - A malformed message: `type` from its header (or MALFORMED), `length`, `error`,
//!   `notification` (the `code`, `subcode`, `name`, `data` it would cause) and `raw`
//!   (hex). An UPDATE with RFC 7606 `errors` is decoded, and counts as malformed too.
//! - TRUNCATED (a message cut short: `length`, `expected_length`, `error`, `raw`),
//!   SKIPPED (`length` octets outside any message), GAP (`missing` octets lost by the
//!   capture), STREAM_RESTART, FRAME_SKIPPED (`frame`, `reason`), STATE_CHANGE
//!   (`old_state`, `new_state` and their names), PEER_INDEX_TABLE, RIB (`prefix`,
//!   `afi`, `safi`, `path_id`, `sequence`, `peer_index`, `peer_ip`, `peer_as`,
//!   `originated`, `attributes`, `errors`), MRT_UNSUPPORTED (`mrt_type`,
//!   `mrt_subtype`), INPUT_ERROR (`kind`, `error`: the container is damaged).
//!
//! An object with an `error` field, or an UPDATE or RIB entry with non-empty `errors`,
//! makes the exit status 1.

mod command;
pub mod cursor;
mod error;
pub mod event;
pub mod flows;
pub mod framer;
pub mod input;
pub mod json;
pub mod mrt;
pub mod packet;
pub mod pcap;
pub mod reassembly;
pub mod source;

pub use command::{run, Input, Outcome, Request};
pub use error::Error;
