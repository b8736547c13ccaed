//! The `decode` command's readers: everything between a file (or stdin, or a hex string)
//! and the BGP message bytes inside it — decompression, MRT records (RFC 6396), pcap and
//! pcapng captures with link, IP and TCP headers, TCP reassembly and BGP framing with
//! marker resynchronisation — and the JSON rendering of decoded messages.
//!
//! BGP messages themselves are decoded only by `bgp::wire`; nothing here interprets
//! their content beyond the header, except OPENs to learn a session's context.
//! This module does I/O only through the `Read`/`Write` values it is given and the
//! files named on the command line.

pub mod cursor;
mod error;
pub mod input;
pub mod mrt;
pub mod packet;
pub mod pcap;
pub mod reassembly;

pub use error::Error;
