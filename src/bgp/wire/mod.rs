//! BGP-4 message codec: bytes <-> [`Message`], driven by a [`Context`] of what the
//! session negotiated. The only place nom appears. Never panics on input; every
//! malformation is a typed error that maps, in one place (`error.rs`), to the protocol
//! reaction RFC 4271 section 6 and RFC 7606 require.

mod error;
mod types;

pub use error::*;
pub use types::*;

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
