//! The `decode` command and its readers: everything between a file (or stdin, or a hex
//! string) and the BGP messages inside it — decompression, MRT records (RFC 6396), pcap
//! and pcapng captures with their link, IP and TCP headers, TCP reassembly, BGP framing
//! with marker resynchronisation, learning a captured session's context from its OPENs
//! — and the JSON rendering of what was found.
//!
//! BGP messages are decoded only by `bgp::wire`; nothing here interprets their content
//! beyond the header, except OPENs (to learn a session's context). This module reads
//! only the files it is given and writes only to the writer it is given.

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

pub use command::{run, Outcome};
pub use error::Error;
