//! The one error type of the `decode` readers: what can be wrong with a file or a stream
//! around the BGP messages (compression, MRT framing, pcap framing, link and transport
//! headers, TCP reassembly). Errors inside a BGP message are the codec's
//! ([`crate::bgp::wire::DecodeError`]) and are not wrapped here.

use std::io;
use std::path::PathBuf;

/// An input problem found by a reader. Whether it ends the input or only the current
/// record is decided by the reader that returns it (see [`Error::is_fatal`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open {path}: {source}")]
    Open { path: PathBuf, source: io::Error },

    #[error("read error at offset {offset}: {source}")]
    Read { offset: u64, source: io::Error },

    #[error("cannot write output: {0}")]
    Write(io::Error),

    #[error("invalid hex input at character {position}: {reason}")]
    Hex {
        position: usize,
        reason: &'static str,
    },

    /// RFC 6396 section 2: fewer than 12 octets where a record header should start.
    #[error("MRT header truncated at offset {offset}: {available} of 12 octets present")]
    MrtHeaderTruncated { offset: u64, available: usize },

    /// The record's length field points past the end of the input.
    #[error(
        "MRT record at offset {offset} truncated: length field says {length} octets, {available} present"
    )]
    MrtRecordTruncated {
        offset: u64,
        length: u32,
        available: usize,
    },

    /// A record whose framing is intact but whose content does not parse; the reader
    /// goes on with the next record.
    #[error("MRT record {mrt_type}/{subtype} at offset {offset}: {reason}")]
    MrtRecord {
        offset: u64,
        mrt_type: u16,
        subtype: u16,
        reason: String,
    },

    #[error("not a pcap or pcapng file (first octets {magic})")]
    PcapMagic { magic: String },

    #[error("pcap file truncated at offset {offset}: {reason}")]
    PcapTruncated { offset: u64, reason: String },

    #[error("malformed pcap block at offset {offset}: {reason}")]
    PcapBlock { offset: u64, reason: String },
}

impl Error {
    /// Whether the reader stops after this error (the framing of what follows is lost).
    pub fn is_fatal(&self) -> bool {
        !matches!(self, Error::MrtRecord { .. })
    }

    /// A short stable name for counting errors by kind (decode output, data sweep).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Open { .. } => "open",
            Error::Read { .. } => "read",
            Error::Write(_) => "write",
            Error::Hex { .. } => "hex",
            Error::MrtHeaderTruncated { .. } => "mrt_header_truncated",
            Error::MrtRecordTruncated { .. } => "mrt_record_truncated",
            Error::MrtRecord { .. } => "mrt_record",
            Error::PcapMagic { .. } => "pcap_magic",
            Error::PcapTruncated { .. } => "pcap_truncated",
            Error::PcapBlock { .. } => "pcap_block",
        }
    }
}
