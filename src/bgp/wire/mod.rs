//! BGP-4 message codec: bytes <-> [`Message`], driven by a [`Context`] of what the
//! session negotiated. The only place nom appears. Never panics on input; every
//! malformation is a typed error that maps, in one place (`error.rs`), to the protocol
//! reaction RFC 4271 section 6 and RFC 7606 require.
//!
//! Layout: `message` (header, framing, dispatch, KEEPALIVE, ROUTE-REFRESH), `open` and
//! `capability`, `update` (cross-attribute checks, AS4 reconciliation, End-of-RIB),
//! `attribute` (one attribute), `nlri` (prefix lists), `notification`, `builder` (packing
//! prefixes into UPDATEs), `error` (errors and the reaction table), `types` (the
//! message values), `input` / `output` (the decoder's byte source, the room an encoded
//! UPDATE is written into once sized). Must not touch sockets, clocks or configuration.

mod attribute;
mod builder;
mod capability;
mod error;
mod input;
mod message;
mod nlri;
mod notification;
mod open;
mod output;
mod types;
mod update;

pub use builder::{build_update_messages, build_updates, UpdateBuilder};
pub use capability::{code as capability_code, decode_capabilities, unsupported_capabilities};
pub use error::*;
pub use message::{check_header, decode_message, decode_message_bytes, encode_message, MARKER};
pub use notification::MAX_SHUTDOWN_MESSAGE_LEN;
pub use open::{validate_open, PARAM_CAPABILITIES};
pub use types::*;
pub use update::{announced, end_of_rib, sniff_four_octet_as, withdrawn};

/// The minimum and maximum message sizes (RFC 4271 section 4.1, RFC 8654).
pub const HEADER_LEN: usize = 19;
pub const MAX_MESSAGE_LEN: usize = 4096;
pub const MAX_EXTENDED_MESSAGE_LEN: usize = 65535;

/// What the session negotiated that changes how bytes are read and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Context {
    /// Both sides advertised the 4-octet AS capability (RFC 6793): AS_PATH and
    /// AGGREGATOR carry 4-octet AS numbers.
    pub four_octet_as: bool,
    /// Extended messages (RFC 8654) negotiated: messages up to 65535 octets.
    pub extended_message: bool,
    /// ADD-PATH (RFC 7911) in force for receiving (decode) or sending (encode), per family.
    pub add_path_ipv4_unicast: bool,
    pub add_path_ipv6_unicast: bool,
}

impl Context {
    pub fn max_message_len(&self) -> usize {
        if self.extended_message {
            MAX_EXTENDED_MESSAGE_LEN
        } else {
            MAX_MESSAGE_LEN
        }
    }
}
