//! MRT (RFC 6396) records: the framing reader and the parsing of the record types that
//! carry BGP — BGP4MP and BGP4MP_ET messages and state changes (with the RFC 8050
//! ADD-PATH subtypes), TABLE_DUMP and TABLE_DUMP_V2 RIBs, and the deprecated type-5
//! `BGP` records of 1999-2001 collectors.
//!
//! This module turns records into BGP message bytes, path attribute bytes and the
//! [`Context`] those bytes were written in; it never decodes a BGP message itself (that
//! is `bgp::wire`, called by the `decode` command) and does no output.

use super::cursor::Cursor;
use super::Error;
use crate::bgp::wire::{
    AfiSafi, Context, Safi, HEADER_LEN as BGP_HEADER_LEN, MAX_EXTENDED_MESSAGE_LEN,
};
use bytes::{BufMut, Bytes, BytesMut};
use ipnet::IpNet;
use std::io::{self, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The common header (RFC 6396 section 2): timestamp, type, subtype, length.
pub const HEADER_LEN: usize = 12;

/// MRT types (IANA "MRT Types"; RFC 6396 section 4 and, for the deprecated ones,
/// appendix B).
pub mod mrt_type {
    /// Deprecated: BGP messages without their 19-octet header, IPv4 peers.
    pub const BGP: u16 = 5;
    /// Deprecated: as [`BGP`] with IPv6 peers.
    pub const BGP4PLUS: u16 = 9;
    pub const BGP4PLUS_01: u16 = 10;
    pub const TABLE_DUMP: u16 = 12;
    pub const TABLE_DUMP_V2: u16 = 13;
    pub const BGP4MP: u16 = 16;
    /// BGP4MP with a microsecond field after the common header (RFC 6396 section 3).
    pub const BGP4MP_ET: u16 = 17;
    pub const ISIS_ET: u16 = 33;
    pub const OSPFV3_ET: u16 = 49;

    /// Whether records of this type have the 4-octet microsecond timestamp field.
    pub fn is_extended_timestamp(t: u16) -> bool {
        matches!(t, BGP4MP_ET | ISIS_ET | OSPFV3_ET)
    }
}

/// BGP4MP subtypes (RFC 6396 section 4.4, RFC 8050 section 3).
pub mod bgp4mp {
    pub const STATE_CHANGE: u16 = 0;
    pub const MESSAGE: u16 = 1;
    /// Deprecated RIB entry format (draft-ietf-grow-mrt); not a BGP message.
    pub const ENTRY: u16 = 2;
    pub const SNAPSHOT: u16 = 3;
    pub const MESSAGE_AS4: u16 = 4;
    pub const STATE_CHANGE_AS4: u16 = 5;
    pub const MESSAGE_LOCAL: u16 = 6;
    pub const MESSAGE_AS4_LOCAL: u16 = 7;
    pub const MESSAGE_ADDPATH: u16 = 8;
    pub const MESSAGE_AS4_ADDPATH: u16 = 9;
    pub const MESSAGE_LOCAL_ADDPATH: u16 = 10;
    pub const MESSAGE_AS4_LOCAL_ADDPATH: u16 = 11;
}

/// TABLE_DUMP_V2 subtypes (RFC 6396 section 4.3, RFC 8050 section 4).
pub mod table_dump_v2 {
    pub const PEER_INDEX_TABLE: u16 = 1;
    pub const RIB_IPV4_UNICAST: u16 = 2;
    pub const RIB_IPV4_MULTICAST: u16 = 3;
    pub const RIB_IPV6_UNICAST: u16 = 4;
    pub const RIB_IPV6_MULTICAST: u16 = 5;
    pub const RIB_GENERIC: u16 = 6;
    pub const GEO_PEER_TABLE: u16 = 7;
    pub const RIB_IPV4_UNICAST_ADDPATH: u16 = 8;
    pub const RIB_IPV4_MULTICAST_ADDPATH: u16 = 9;
    pub const RIB_IPV6_UNICAST_ADDPATH: u16 = 10;
    pub const RIB_IPV6_MULTICAST_ADDPATH: u16 = 11;
    pub const RIB_GENERIC_ADDPATH: u16 = 12;
}

/// Subtypes of the deprecated type-5 `BGP` records (RFC 6396 appendix B.2.3).
pub mod legacy_bgp {
    pub const UPDATE: u16 = 1;
    pub const STATE_CHANGE: u16 = 3;
    pub const OPEN: u16 = 5;
    pub const NOTIFY: u16 = 6;
    pub const KEEPALIVE: u16 = 7;
}

/// The MRT common header, plus the microsecond field of the `_ET` types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub timestamp: u32,
    pub mrt_type: u16,
    pub subtype: u16,
    /// Length of the message field, which for `_ET` types includes the microseconds.
    pub length: u32,
    pub microseconds: Option<u32>,
}

/// One framed record: its header and the message field (after the microseconds).
#[derive(Debug, Clone)]
pub struct Record {
    /// Offset of the record's header in the (decompressed) input.
    pub offset: u64,
    pub header: Header,
    pub body: Bytes,
}

/// Reads records one after another. A short header or a record that runs past the end
/// of the input ends the iteration after one error: without a trustworthy length
/// nothing after it can be framed (RFC 6396 has no resynchronisation marker).
pub struct Reader<R> {
    inner: R,
    offset: u64,
    finished: bool,
}

impl<R: Read> Reader<R> {
    pub fn new(inner: R) -> Self {
        Reader {
            inner,
            offset: 0,
            finished: false,
        }
    }

    /// Reads until `buf` is full or the input ends; returns how much was read.
    fn read_full(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(filled)
    }

    fn next_record(&mut self) -> Result<Option<Record>, Error> {
        let offset = self.offset;
        let read_err = |source| Error::Read { offset, source };
        let mut raw = [0u8; HEADER_LEN];
        let got = self.read_full(&mut raw).map_err(read_err)?;
        if got == 0 {
            return Ok(None);
        }
        if got < HEADER_LEN {
            return Err(Error::MrtHeaderTruncated {
                offset,
                available: got,
            });
        }
        let timestamp = u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]);
        let mrt_type = u16::from_be_bytes([raw[4], raw[5]]);
        let subtype = u16::from_be_bytes([raw[6], raw[7]]);
        let length = u32::from_be_bytes([raw[8], raw[9], raw[10], raw[11]]);
        // Grow with the data rather than trusting the length field for the allocation:
        // a corrupt length must not reserve gigabytes.
        let mut body = Vec::with_capacity((length as usize).min(1 << 20));
        (&mut self.inner)
            .take(u64::from(length))
            .read_to_end(&mut body)
            .map_err(read_err)?;
        self.offset += (HEADER_LEN + body.len()) as u64;
        if body.len() < length as usize {
            return Err(Error::MrtRecordTruncated {
                offset,
                length,
                available: body.len(),
            });
        }
        let mut body = Bytes::from(body);
        let mut microseconds = None;
        if mrt_type::is_extended_timestamp(mrt_type) {
            if body.len() < 4 {
                // Framing is intact (the length covered what is there); only this
                // record is unusable.
                return Err(Error::MrtRecord {
                    offset,
                    mrt_type,
                    subtype,
                    reason: format!(
                        "extended-timestamp record of {} octets has no microsecond field",
                        body.len()
                    ),
                });
            }
            microseconds = Some(u32::from_be_bytes([body[0], body[1], body[2], body[3]]));
            body = body.slice(4..);
        }
        Ok(Some(Record {
            offset,
            header: Header {
                timestamp,
                mrt_type,
                subtype,
                length,
                microseconds,
            },
            body,
        }))
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = Result<Record, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        match self.next_record() {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => {
                self.finished = true;
                None
            }
            Err(e) => {
                self.finished = e.is_fatal();
                Some(Err(e))
            }
        }
    }
}

/// The two ends of a BGP session as a BGP4MP record names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peering {
    pub peer_as: u32,
    pub local_as: u32,
    /// Interface index (absent in the deprecated type-5 records).
    pub interface: Option<u16>,
    /// Absent from records that do not carry them (Zebra records of around 2000,
    /// deprecated type-5 state changes).
    pub peer_ip: Option<IpAddr>,
    pub local_ip: Option<IpAddr>,
}

/// A BGP message recorded on a session.
#[derive(Debug, Clone)]
pub struct PeerMessage {
    pub peering: Peering,
    /// `MESSAGE_LOCAL` subtypes: sent by the collector rather than received.
    pub local: bool,
    /// How the message was encoded: the subtype gives the AS width (RFC 6396 section
    /// 4.4.3) and ADD-PATH (RFC 8050 section 3). Extended messages are allowed because
    /// the collector already accepted whatever length it recorded.
    pub ctx: Context,
    /// The whole message, 19-octet header included (rebuilt for type-5 records, which
    /// store only the body). May be short or carry trailing octets: that is for the
    /// BGP framing to report.
    pub message: Bytes,
}

/// A BGP finite state machine transition (RFC 6396 section 4.4.1; states per RFC 4271
/// section 8.2.2, 1 = Idle ... 6 = Established; collectors also write others).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateChange {
    pub peering: Peering,
    pub old_state: u16,
    pub new_state: u16,
}

/// TABLE_DUMP_V2 PEER_INDEX_TABLE (RFC 6396 section 4.3.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerIndexTable {
    pub collector_id: Ipv4Addr,
    pub view_name: String,
    pub peers: Vec<IndexedPeer>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexedPeer {
    pub bgp_id: Ipv4Addr,
    pub ip: IpAddr,
    pub asn: u32,
}

/// The NLRI a RIB record is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RibPrefix {
    Ip(IpNet),
    /// RIB_GENERIC NLRI of a family other than IP unicast/multicast, as encoded.
    Other(Bytes),
}

/// A TABLE_DUMP_V2 RIB record (RFC 6396 sections 4.3.2 and 4.3.3, RFC 8050 section 4).
#[derive(Debug, Clone)]
pub struct Rib {
    pub sequence: u32,
    pub afi_safi: AfiSafi,
    pub prefix: RibPrefix,
    pub entries: Vec<RibEntry>,
}

/// One path of a RIB record (RFC 6396 section 4.3.4).
#[derive(Debug, Clone)]
pub struct RibEntry {
    /// Index into the latest PEER_INDEX_TABLE.
    pub peer_index: u16,
    pub originated: u32,
    /// ADD-PATH subtypes carry the path identifier here, not in an NLRI.
    pub path_id: Option<u32>,
    /// Path attributes as recorded (4-octet AS numbers; MP_REACH_NLRI possibly in the
    /// abbreviated next-hop-only form, see [`attributes_as_update`]).
    pub attributes: Bytes,
}

/// A legacy TABLE_DUMP entry (RFC 6396 section 4.2).
#[derive(Debug, Clone)]
pub struct TableDumpEntry {
    pub view: u16,
    pub sequence: u16,
    pub prefix: IpNet,
    pub status: u8,
    pub originated: u32,
    pub peer_ip: IpAddr,
    pub peer_as: u32,
    /// Path attributes as recorded (2-octet AS numbers).
    pub attributes: Bytes,
}

/// What a record holds.
#[derive(Debug, Clone)]
pub enum Entry {
    Message(PeerMessage),
    StateChange(StateChange),
    PeerIndexTable(PeerIndexTable),
    Rib(Rib),
    /// TABLE_DUMP records normally hold one entry; some early collectors batched
    /// several into one record.
    TableDump {
        entries: Vec<TableDumpEntry>,
        /// Why the rest of the record could not be read, if it could not.
        error: Option<String>,
    },
    /// A type or subtype that carries no BGP message or RIB entry (OSPF, IS-IS,
    /// BGP4MP_ENTRY, GEO_PEER_TABLE...).
    Unsupported,
}

/// The context TABLE_DUMP_V2 attributes are written in: AS_PATH always with 4-octet AS
/// numbers (RFC 6396 section 4.3.4).
pub const TABLE_DUMP_V2_CTX: Context = Context {
    four_octet_as: true,
    extended_message: true,
    add_path_ipv4_unicast: false,
    add_path_ipv6_unicast: false,
};

/// The context legacy TABLE_DUMP attributes are written in (2-octet AS numbers).
pub const TABLE_DUMP_CTX: Context = Context {
    four_octet_as: false,
    extended_message: true,
    add_path_ipv4_unicast: false,
    add_path_ipv6_unicast: false,
};

impl Record {
    /// Parses the record's message field.
    pub fn entry(&self) -> Result<Entry, Error> {
        let h = &self.header;
        let result = match h.mrt_type {
            mrt_type::BGP4MP | mrt_type::BGP4MP_ET => parse_bgp4mp(h.subtype, &self.body),
            mrt_type::TABLE_DUMP => parse_table_dump(h.subtype, &self.body),
            mrt_type::TABLE_DUMP_V2 => parse_table_dump_v2(h.subtype, &self.body),
            mrt_type::BGP => parse_legacy_bgp(h.subtype, &self.body, false),
            mrt_type::BGP4PLUS | mrt_type::BGP4PLUS_01 => {
                parse_legacy_bgp(h.subtype, &self.body, true)
            }
            _ => Ok(Entry::Unsupported),
        };
        result.map_err(|reason| Error::MrtRecord {
            offset: self.offset,
            mrt_type: h.mrt_type,
            subtype: h.subtype,
            reason,
        })
    }
}

fn short(what: &str) -> String {
    format!("record ends inside {what}")
}

fn ip_len_for_afi(afi: u16) -> Result<bool, String> {
    match afi {
        1 => Ok(false),
        2 => Ok(true),
        other => Err(format!(
            "address family {other} is neither IPv4 (1) nor IPv6 (2)"
        )),
    }
}

/// BGP4MP and BGP4MP_ET (RFC 6396 sections 4.4.1 to 4.4.6, RFC 8050 section 3).
fn parse_bgp4mp(subtype: u16, body: &Bytes) -> Result<Entry, String> {
    use bgp4mp::*;
    let as4 = matches!(
        subtype,
        MESSAGE_AS4
            | STATE_CHANGE_AS4
            | MESSAGE_AS4_LOCAL
            | MESSAGE_AS4_ADDPATH
            | MESSAGE_AS4_LOCAL_ADDPATH
    );
    let add_path = matches!(subtype, MESSAGE_ADDPATH..=MESSAGE_AS4_LOCAL_ADDPATH);
    let local = matches!(
        subtype,
        MESSAGE_LOCAL | MESSAGE_AS4_LOCAL | MESSAGE_LOCAL_ADDPATH | MESSAGE_AS4_LOCAL_ADDPATH
    );
    let is_state = matches!(subtype, STATE_CHANGE | STATE_CHANGE_AS4);
    let is_message = matches!(
        subtype,
        MESSAGE | MESSAGE_AS4 | MESSAGE_LOCAL..=MESSAGE_AS4_LOCAL_ADDPATH
    );
    if !is_state && !is_message {
        return Ok(Entry::Unsupported);
    }
    let mut c = Cursor::new(body);
    let asn = |c: &mut Cursor| if as4 { c.u32() } else { c.u16().map(u32::from) };
    let peer_as = asn(&mut c).ok_or_else(|| short("the peer AS"))?;
    let local_as = asn(&mut c).ok_or_else(|| short("the local AS"))?;
    // Zebra of around 2000 wrote 2-octet-AS records without interface, family and
    // addresses (RIPE RIS rrc01 archives; bgpkit-parser's fixtures document it): a
    // STATE_CHANGE of 8 octets, or a MESSAGE whose BGP marker follows the AS numbers.
    // Neither is ambiguous: a complete record is longer, and no address family is
    // 0xffff.
    if !as4 {
        let bare = Peering {
            peer_as,
            local_as,
            interface: None,
            peer_ip: None,
            local_ip: None,
        };
        if is_state && body.len() == 8 {
            let (Some(old_state), Some(new_state)) = (c.u16(), c.u16()) else {
                return Err(short("the state"));
            };
            return Ok(Entry::StateChange(StateChange {
                peering: bare,
                old_state,
                new_state,
            }));
        }
        if is_message && c.rest().starts_with(&[0xff; 16]) {
            let ctx = Context {
                four_octet_as: false,
                extended_message: true,
                ..Context::default()
            };
            let message = body.slice(c.position()..);
            return Ok(Entry::Message(PeerMessage {
                peering: bare,
                local,
                ctx,
                message,
            }));
        }
    }
    let interface = c.u16().ok_or_else(|| short("the interface index"))?;
    let v6 = ip_len_for_afi(c.u16().ok_or_else(|| short("the address family"))?)?;
    let peer_ip = c.ip(v6).ok_or_else(|| short("the peer address"))?;
    let local_ip = c.ip(v6).ok_or_else(|| short("the local address"))?;
    let peering = Peering {
        peer_as,
        local_as,
        interface: Some(interface),
        peer_ip: Some(peer_ip),
        local_ip: Some(local_ip),
    };
    if is_state {
        let old_state = c.u16().ok_or_else(|| short("the old state"))?;
        let new_state = c.u16().ok_or_else(|| short("the new state"))?;
        return Ok(Entry::StateChange(StateChange {
            peering,
            old_state,
            new_state,
        }));
    }
    let ctx = Context {
        four_octet_as: as4,
        extended_message: true,
        add_path_ipv4_unicast: add_path,
        add_path_ipv6_unicast: add_path,
    };
    let message = body.slice(c.position()..);
    Ok(Entry::Message(PeerMessage {
        peering,
        local,
        ctx,
        message,
    }))
}

/// The deprecated type-5 `BGP` (and type-9/10 `BGP4PLUS`) records: peer and local AS
/// and address, then the message body without its 19-octet header (RFC 6396 appendix
/// B.2.3). The header is rebuilt so the message goes through the same codec.
fn parse_legacy_bgp(subtype: u16, body: &Bytes, v6: bool) -> Result<Entry, String> {
    use legacy_bgp::*;
    let mut c = Cursor::new(body);
    let message_type = match subtype {
        UPDATE => 2,
        OPEN => 1,
        NOTIFY => 3,
        KEEPALIVE => 4,
        STATE_CHANGE => {
            let peer_as = c.u16().ok_or_else(|| short("the peer AS"))?;
            let peer_ip = c.ip(v6).ok_or_else(|| short("the peer address"))?;
            let old_state = c.u16().ok_or_else(|| short("the old state"))?;
            let new_state = c.u16().ok_or_else(|| short("the new state"))?;
            let peering = Peering {
                peer_as: u32::from(peer_as),
                local_as: 0,
                interface: None,
                peer_ip: Some(peer_ip),
                local_ip: None,
            };
            return Ok(Entry::StateChange(StateChange {
                peering,
                old_state,
                new_state,
            }));
        }
        _ => return Ok(Entry::Unsupported),
    };
    let peer_as = c.u16().ok_or_else(|| short("the peer AS"))?;
    let peer_ip = c.ip(v6).ok_or_else(|| short("the peer address"))?;
    let local_as = c.u16().ok_or_else(|| short("the local AS"))?;
    let local_ip = c.ip(v6).ok_or_else(|| short("the local address"))?;
    let rest = c.rest();
    let total = BGP_HEADER_LEN + rest.len();
    let length = u16::try_from(total).map_err(|_| {
        format!(
            "message body of {} octets does not fit a BGP message",
            rest.len()
        )
    })?;
    let mut message = BytesMut::with_capacity(total);
    message.put_bytes(0xff, 16);
    message.put_u16(length);
    message.put_u8(message_type);
    message.put_slice(rest);
    let peering = Peering {
        peer_as: u32::from(peer_as),
        local_as: u32::from(local_as),
        interface: None,
        peer_ip: Some(peer_ip),
        local_ip: Some(local_ip),
    };
    let ctx = Context {
        four_octet_as: false,
        extended_message: true,
        ..Context::default()
    };
    Ok(Entry::Message(PeerMessage {
        peering,
        local: false,
        ctx,
        message: message.freeze(),
    }))
}

/// A prefix as RIB records encode it: length in bits, then only the octets that length
/// needs. Host bits past the length are cleared, as a BGP speaker would.
fn rib_prefix(c: &mut Cursor, v6: bool) -> Result<IpNet, String> {
    let bits = c.u8().ok_or_else(|| short("the prefix length"))?;
    let max = if v6 { 128 } else { 32 };
    if bits > max {
        return Err(format!("prefix length {bits} exceeds {max}"));
    }
    let octets = c
        .take(usize::from(bits).div_ceil(8))
        .ok_or_else(|| short("the prefix"))?;
    let mut addr = [0u8; 16];
    addr[..octets.len()].copy_from_slice(octets);
    let ip = if v6 {
        IpAddr::V6(Ipv6Addr::from(addr))
    } else {
        IpAddr::V4(Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3]))
    };
    IpNet::new(ip, bits)
        .map(|net| net.trunc())
        .map_err(|e| e.to_string())
}

/// TABLE_DUMP (RFC 6396 section 4.2): the subtype is the AFI.
fn parse_table_dump(subtype: u16, body: &Bytes) -> Result<Entry, String> {
    let v6 = ip_len_for_afi(subtype)?;
    let mut c = Cursor::new(body);
    let mut entries = Vec::with_capacity(1);
    while !c.is_empty() {
        match table_dump_entry(&mut c, body, v6, entries.len()) {
            Ok(entry) => entries.push(entry),
            // Keep the entries before the damage: they were framed correctly.
            Err(reason) => {
                return Ok(Entry::TableDump {
                    entries,
                    error: Some(reason),
                })
            }
        }
    }
    Ok(Entry::TableDump {
        entries,
        error: None,
    })
}

fn table_dump_entry(
    c: &mut Cursor,
    body: &Bytes,
    v6: bool,
    index: usize,
) -> Result<TableDumpEntry, String> {
    let view = c.u16().ok_or_else(|| short("the view number"))?;
    let sequence = c.u16().ok_or_else(|| short("the sequence number"))?;
    let addr = c.ip(v6).ok_or_else(|| short("the prefix"))?;
    let len = c.u8().ok_or_else(|| short("the prefix length"))?;
    let prefix = IpNet::new(addr, len)
        .map_err(|e| format!("prefix {addr}/{len}: {e}"))?
        .trunc();
    let status = c.u8().ok_or_else(|| short("the status"))?;
    let originated = c.u32().ok_or_else(|| short("the originated time"))?;
    let peer_ip = c.ip(v6).ok_or_else(|| short("the peer address"))?;
    let peer_as = u32::from(c.u16().ok_or_else(|| short("the peer AS"))?);
    let attr_len = c.u16().ok_or_else(|| short("the attribute length"))?;
    let at = c.position();
    c.skip(usize::from(attr_len)).ok_or_else(|| {
        format!(
            "attribute length {attr_len} of entry {index} runs past the record ({} octets left)",
            body.len() - at
        )
    })?;
    let attributes = body.slice(at..c.position());
    Ok(TableDumpEntry {
        view,
        sequence,
        prefix,
        status,
        originated,
        peer_ip,
        peer_as,
        attributes,
    })
}

/// TABLE_DUMP_V2 (RFC 6396 section 4.3, RFC 8050 section 4).
fn parse_table_dump_v2(subtype: u16, body: &Bytes) -> Result<Entry, String> {
    use table_dump_v2::*;
    let mut c = Cursor::new(body);
    if subtype == PEER_INDEX_TABLE {
        let collector_id = c.ipv4().ok_or_else(|| short("the collector BGP ID"))?;
        let name_len = c.u16().ok_or_else(|| short("the view name length"))?;
        let name = c
            .take(usize::from(name_len))
            .ok_or_else(|| short("the view name"))?;
        let count = c.u16().ok_or_else(|| short("the peer count"))?;
        let mut peers = Vec::with_capacity(usize::from(count));
        for i in 0..count {
            let peer_type = c.u8().ok_or_else(|| short(&format!("peer entry {i}")))?;
            let bgp_id = c.ipv4().ok_or_else(|| short(&format!("peer entry {i}")))?;
            let ip = c
                .ip(peer_type & 0x01 != 0)
                .ok_or_else(|| short(&format!("peer entry {i}")))?;
            let asn = if peer_type & 0x02 != 0 {
                c.u32()
            } else {
                c.u16().map(u32::from)
            }
            .ok_or_else(|| short(&format!("peer entry {i}")))?;
            peers.push(IndexedPeer { bgp_id, ip, asn });
        }
        let view_name = String::from_utf8_lossy(name).into_owned();
        return Ok(Entry::PeerIndexTable(PeerIndexTable {
            collector_id,
            view_name,
            peers,
        }));
    }
    let (afi_safi, generic, add_path) = match subtype {
        RIB_IPV4_UNICAST => (AfiSafi::IPV4_UNICAST, false, false),
        RIB_IPV4_MULTICAST => (
            AfiSafi {
                safi: Safi::MULTICAST,
                ..AfiSafi::IPV4_UNICAST
            },
            false,
            false,
        ),
        RIB_IPV6_UNICAST => (AfiSafi::IPV6_UNICAST, false, false),
        RIB_IPV6_MULTICAST => (
            AfiSafi {
                safi: Safi::MULTICAST,
                ..AfiSafi::IPV6_UNICAST
            },
            false,
            false,
        ),
        RIB_IPV4_UNICAST_ADDPATH => (AfiSafi::IPV4_UNICAST, false, true),
        RIB_IPV4_MULTICAST_ADDPATH => (
            AfiSafi {
                safi: Safi::MULTICAST,
                ..AfiSafi::IPV4_UNICAST
            },
            false,
            true,
        ),
        RIB_IPV6_UNICAST_ADDPATH => (AfiSafi::IPV6_UNICAST, false, true),
        RIB_IPV6_MULTICAST_ADDPATH => (
            AfiSafi {
                safi: Safi::MULTICAST,
                ..AfiSafi::IPV6_UNICAST
            },
            false,
            true,
        ),
        RIB_GENERIC => (AfiSafi::IPV4_UNICAST, true, false),
        RIB_GENERIC_ADDPATH => (AfiSafi::IPV4_UNICAST, true, true),
        _ => return Ok(Entry::Unsupported),
    };
    let sequence = c.u32().ok_or_else(|| short("the sequence number"))?;
    let (afi_safi, prefix) = if generic {
        let afi = c.u16().ok_or_else(|| short("the AFI"))?;
        let safi = c.u8().ok_or_else(|| short("the SAFI"))?;
        let afi_safi = AfiSafi {
            afi: crate::bgp::wire::Afi(afi),
            safi: Safi(safi),
        };
        (afi_safi, generic_nlri(&mut c, body, afi_safi)?)
    } else {
        (
            afi_safi,
            RibPrefix::Ip(rib_prefix(
                &mut c,
                afi_safi.afi == crate::bgp::wire::Afi::IPV6,
            )?),
        )
    };
    let count = c.u16().ok_or_else(|| short("the entry count"))?;
    let mut entries = Vec::with_capacity(usize::from(count));
    for i in 0..count {
        let what = || short(&format!("RIB entry {i} of {count}"));
        let peer_index = c.u16().ok_or_else(what)?;
        let originated = c.u32().ok_or_else(what)?;
        let path_id = if add_path {
            Some(c.u32().ok_or_else(what)?)
        } else {
            None
        };
        let attr_len = c.u16().ok_or_else(what)?;
        let at = c.position();
        c.skip(usize::from(attr_len)).ok_or_else(|| {
            format!("attribute length {attr_len} of RIB entry {i} runs past the record ({} octets left)", body.len() - at)
        })?;
        entries.push(RibEntry {
            peer_index,
            originated,
            path_id,
            attributes: body.slice(at..c.position()),
        });
    }
    Ok(Entry::Rib(Rib {
        sequence,
        afi_safi,
        prefix,
        entries,
    }))
}

/// The single NLRI of a RIB_GENERIC record (RFC 6396 section 4.3.3): IP unicast and
/// multicast become prefixes; labeled and VPN families (whose NLRI also starts with a
/// length in bits, RFC 8277 and RFC 4364) are kept as encoded. Other families have
/// encodings this reader cannot delimit.
fn generic_nlri(c: &mut Cursor, body: &Bytes, afi_safi: AfiSafi) -> Result<RibPrefix, String> {
    let ip = matches!(afi_safi.afi.0, 1 | 2);
    match afi_safi.safi.0 {
        1 | 2 if ip => Ok(RibPrefix::Ip(rib_prefix(c, afi_safi.afi.0 == 2)?)),
        4 | 128 | 129 => {
            let start = c.position();
            let bits = c.u8().ok_or_else(|| short("the NLRI length"))?;
            c.skip(usize::from(bits).div_ceil(8))
                .ok_or_else(|| short("the NLRI"))?;
            Ok(RibPrefix::Other(body.slice(start..c.position())))
        }
        _ => Err(format!(
            "RIB_GENERIC NLRI of AFI {} SAFI {} cannot be delimited",
            afi_safi.afi.0, afi_safi.safi.0
        )),
    }
}

/// Path attributes of a RIB entry wrapped in an UPDATE message with no NLRI, so that
/// they go through the codec's own attribute parser with the same checks as a received
/// UPDATE. RFC 6396 section 4.3.4 lets MRT writers abbreviate MP_REACH_NLRI to its
/// next-hop length and next hop; such an attribute is expanded to the RFC 4760 form
/// (AFI, SAFI, next hop, reserved octet, no NLRI) using the record's family.
pub fn attributes_as_update(attributes: &[u8], afi_safi: AfiSafi) -> Result<Bytes, String> {
    let mut attrs = BytesMut::with_capacity(attributes.len() + 8);
    let mut c = Cursor::new(attributes);
    let mut copied = 0;
    // Walk the attribute list only to find an abbreviated MP_REACH_NLRI; anything that
    // does not parse is copied as it is for the codec to judge.
    while c.remaining() >= 3 {
        let start = c.position();
        let (Some(flags), Some(code)) = (c.u8(), c.u8()) else {
            break;
        };
        let extended = flags & crate::bgp::wire::attr_flags::EXTENDED_LENGTH != 0;
        let Some(len) = (if extended {
            c.u16()
        } else {
            c.u8().map(u16::from)
        }) else {
            break;
        };
        let value_at = c.position();
        let Some(value) = c.take(usize::from(len)) else {
            break;
        };
        if code == 14 && !value.is_empty() && value.len() == 1 + usize::from(value[0]) {
            attrs.put_slice(&attributes[copied..start]);
            let new_len = value.len() + 4;
            if new_len > 0xff {
                attrs.put_u8(flags | crate::bgp::wire::attr_flags::EXTENDED_LENGTH);
                attrs.put_u8(code);
                attrs.put_u16(new_len as u16);
            } else {
                attrs.put_u8(flags & !crate::bgp::wire::attr_flags::EXTENDED_LENGTH);
                attrs.put_u8(code);
                attrs.put_u8(new_len as u8);
            }
            attrs.put_u16(afi_safi.afi.0);
            attrs.put_u8(afi_safi.safi.0);
            attrs.put_slice(&attributes[value_at..value_at + value.len()]);
            attrs.put_u8(0);
            copied = c.position();
        }
    }
    attrs.put_slice(&attributes[copied..]);
    let total = BGP_HEADER_LEN + 4 + attrs.len();
    if total > MAX_EXTENDED_MESSAGE_LEN {
        return Err(format!(
            "{} octets of path attributes do not fit one UPDATE message",
            attrs.len()
        ));
    }
    let mut message = BytesMut::with_capacity(total);
    message.put_bytes(0xff, 16);
    message.put_u16(total as u16);
    message.put_u8(2);
    message.put_u16(0);
    message.put_u16(attrs.len() as u16);
    message.put_slice(&attrs);
    Ok(message.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(mrt_type: u16, subtype: u16, body: &[u8]) -> Vec<u8> {
        let mut out = vec![0x5a, 0x2b, 0x3c, 0x4d];
        out.extend(mrt_type.to_be_bytes());
        out.extend(subtype.to_be_bytes());
        out.extend((body.len() as u32).to_be_bytes());
        out.extend(body);
        out
    }

    fn keepalive() -> Vec<u8> {
        let mut m = vec![0xff; 16];
        m.extend([0x00, 0x13, 0x04]);
        m
    }

    #[test]
    fn frames_consecutive_records_and_ends_cleanly() {
        let mut input = record(16, 0, &[0; 20]);
        input.extend(record(99, 7, &[0xaa, 0xbb]));
        let records: Vec<_> = Reader::new(&input[..]).collect::<Result<_, _>>().unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].header.timestamp, 0x5a2b3c4d);
        assert_eq!(records[0].offset, 0);
        assert_eq!(records[1].offset, 32);
        assert_eq!(
            (records[1].header.mrt_type, records[1].header.subtype),
            (99, 7)
        );
        assert_eq!(&records[1].body[..], &[0xaa, 0xbb]);
        assert!(matches!(records[1].entry(), Ok(Entry::Unsupported)));
    }

    #[test]
    fn a_record_past_the_end_is_one_fatal_error() {
        let mut input = record(16, 4, &[0; 8]);
        input.truncate(15);
        let out: Vec<_> = Reader::new(&input[..]).collect();
        assert_eq!(out.len(), 1);
        assert!(matches!(
            out[0],
            Err(Error::MrtRecordTruncated {
                offset: 0,
                length: 8,
                available: 3
            })
        ));

        let out: Vec<_> = Reader::new(&[0u8; 5][..]).collect();
        assert!(matches!(
            out[..],
            [Err(Error::MrtHeaderTruncated { available: 5, .. })]
        ));
    }

    #[test]
    fn a_huge_length_does_not_allocate_it() {
        let mut input = vec![0, 0, 0, 0, 0x00, 0x10, 0x00, 0x04, 0xff, 0xff, 0xff, 0xf0];
        input.extend([0u8; 100]);
        let out: Vec<_> = Reader::new(&input[..]).collect();
        assert!(matches!(
            out[..],
            [Err(Error::MrtRecordTruncated {
                length: 0xffff_fff0,
                available: 100,
                ..
            })]
        ));
    }

    #[test]
    fn bgp4mp_et_microseconds_then_message_as4() {
        let mut body = vec![0x00, 0x01, 0xe2, 0x40]; // 123456 microseconds
        body.extend([0x00, 0x00, 0xfd, 0xe8, 0x00, 0x00, 0x0e, 0x10]); // peer AS 65000, local AS 3600
        body.extend([0x00, 0x07, 0x00, 0x01]); // ifindex 7, AFI IPv4
        body.extend([0xc0, 0x00, 0x02, 0x01, 0xc0, 0x00, 0x02, 0x02]);
        body.extend(keepalive());
        let input = record(17, 4, &body);
        let rec = Reader::new(&input[..]).next().unwrap().unwrap();
        assert_eq!(rec.header.microseconds, Some(123_456));
        let Entry::Message(m) = rec.entry().unwrap() else {
            panic!("not a message")
        };
        assert_eq!(m.peering.peer_as, 65000);
        assert_eq!(m.peering.local_as, 3600);
        assert_eq!(m.peering.interface, Some(7));
        assert_eq!(
            m.peering.peer_ip,
            Some("192.0.2.1".parse::<IpAddr>().unwrap())
        );
        assert_eq!(
            m.peering.local_ip,
            Some("192.0.2.2".parse::<IpAddr>().unwrap())
        );
        assert!(m.ctx.four_octet_as && !m.ctx.add_path_ipv4_unicast && !m.local);
        assert_eq!(&m.message[..], &keepalive()[..]);
    }

    #[test]
    fn subtype_gives_as_width_add_path_and_direction() {
        let body_as2 = |v6: bool| {
            let mut b = vec![
                0xfd,
                0xe8,
                0x0e,
                0x10,
                0x00,
                0x00,
                0x00,
                if v6 { 2 } else { 1 },
            ];
            b.extend(vec![0x20; if v6 { 32 } else { 8 }]);
            b.extend(keepalive());
            b
        };
        let Ok(Entry::Message(m)) = parse_bgp4mp(bgp4mp::MESSAGE, &Bytes::from(body_as2(true)))
        else {
            panic!()
        };
        assert!(!m.ctx.four_octet_as);
        assert!(m.peering.peer_ip.unwrap().is_ipv6());
        assert_eq!(m.peering.peer_as, 65000);

        let mut as4 = vec![
            0, 0, 0xfd, 0xe8, 0, 0, 0x0e, 0x10, 0, 0, 0, 1, 192, 0, 2, 1, 192, 0, 2, 2,
        ];
        as4.extend(keepalive());
        let Ok(Entry::Message(m)) =
            parse_bgp4mp(bgp4mp::MESSAGE_AS4_LOCAL_ADDPATH, &Bytes::from(as4))
        else {
            panic!()
        };
        assert!(
            m.ctx.four_octet_as
                && m.ctx.add_path_ipv4_unicast
                && m.ctx.add_path_ipv6_unicast
                && m.local
        );

        assert!(matches!(
            parse_bgp4mp(bgp4mp::ENTRY, &Bytes::from_static(&[1, 2, 3])),
            Ok(Entry::Unsupported)
        ));
        let err = parse_bgp4mp(
            bgp4mp::MESSAGE,
            &Bytes::from_static(&[0, 1, 0, 2, 0, 0, 0, 3]),
        )
        .unwrap_err();
        assert!(err.contains("address family 3"), "{err}");
    }

    #[test]
    fn state_change_as2_and_as4() {
        let b = Bytes::from_static(&[
            0xfd, 0xe8, 0x0e, 0x10, 0, 0, 0, 1, 10, 0, 0, 1, 10, 0, 0, 2, 0, 3, 0, 6,
        ]);
        let Ok(Entry::StateChange(s)) = parse_bgp4mp(bgp4mp::STATE_CHANGE, &b) else {
            panic!()
        };
        assert_eq!((s.peering.peer_as, s.old_state, s.new_state), (65000, 3, 6));
        let b = Bytes::from_static(&[
            0, 1, 0, 0, 0, 0, 0x0e, 0x10, 0, 0, 0, 1, 10, 0, 0, 1, 10, 0, 0, 2, 0, 6,
        ]);
        let err = parse_bgp4mp(bgp4mp::STATE_CHANGE_AS4, &b).unwrap_err();
        assert!(err.contains("new state"), "{err}");
    }

    #[test]
    fn zebra_records_without_addresses() {
        // From RIS rrc01 2000-11-04 (bgpkit-ris-rrc01-updates.20001104.0124): a STATE_CHANGE
        // of 8 octets and a MESSAGE whose marker follows the two AS numbers.
        let b = Bytes::from_static(&[0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x04]);
        let Ok(Entry::StateChange(s)) = parse_bgp4mp(bgp4mp::STATE_CHANGE, &b) else {
            panic!()
        };
        assert_eq!((s.old_state, s.new_state, s.peering.peer_ip), (3, 4, None));
        let mut body = vec![0x00, 0x00, 0x00, 0x00];
        body.extend(keepalive());
        let Ok(Entry::Message(m)) = parse_bgp4mp(bgp4mp::MESSAGE, &Bytes::from(body.clone()))
        else {
            panic!()
        };
        assert_eq!(&m.message[..], &keepalive()[..]);
        assert_eq!((m.peering.peer_ip, m.peering.interface), (None, None));
        // The same octets in an AS4 subtype are not this quirk.
        assert!(parse_bgp4mp(bgp4mp::MESSAGE_AS4, &Bytes::from(body)).is_err());
    }

    #[test]
    fn legacy_type5_update_gets_its_header_back() {
        // From RIS rrc00 1999 (bgpkit-ris-rrc00-updates.19991214.1621): peer AS 5409
        // 195.211.222.11, local AS 12654 193.0.0.1, then the UPDATE body.
        let body = [
            0x15, 0x21, 0xc3, 0xd3, 0xde, 0x0b, 0x31, 0x6e, 0xc1, 0x00, 0x00, 0x01, 0x00, 0x00,
            0x00, 0x00,
        ];
        let Ok(Entry::Message(m)) =
            parse_legacy_bgp(legacy_bgp::UPDATE, &Bytes::copy_from_slice(&body), false)
        else {
            panic!()
        };
        assert_eq!(m.peering.peer_as, 5409);
        assert_eq!(m.peering.local_as, 12654);
        assert_eq!(
            m.peering.peer_ip,
            Some("195.211.222.11".parse::<IpAddr>().unwrap())
        );
        let mut expected = vec![0xff; 16];
        expected.extend([0x00, 0x17, 0x02, 0x00, 0x00, 0x00, 0x00]);
        assert_eq!(&m.message[..], &expected[..]);
        assert!(!m.ctx.four_octet_as);

        let state = [0x15, 0x21, 0xc3, 0xd3, 0xde, 0xfe, 0x00, 0x03, 0x00, 0x02];
        let Ok(Entry::StateChange(s)) = parse_legacy_bgp(
            legacy_bgp::STATE_CHANGE,
            &Bytes::copy_from_slice(&state),
            false,
        ) else {
            panic!()
        };
        assert_eq!((s.peering.peer_as, s.old_state, s.new_state), (5409, 3, 2));
    }

    #[test]
    fn table_dump_entry_with_host_bits_masked() {
        // OpenBGPD TABLE_DUMP (mrtparse sample openbgpd_rib_table), prefix host bits set
        // here on purpose to check normalisation.
        let mut body = vec![0x00, 0x00, 0x00, 0x05, 0xc0, 0xa8, 0x01, 0x07, 0x10, 0x01];
        body.extend([
            0x56, 0x1e, 0x8f, 0xdc, 0xc0, 0xa8, 0x01, 0x0a, 0xfd, 0xe8, 0x00, 0x04,
        ]);
        body.extend([0x40, 0x01, 0x01, 0x00]);
        let Ok(Entry::TableDump {
            entries,
            error: None,
        }) = parse_table_dump(1, &Bytes::from(body.clone()))
        else {
            panic!()
        };
        assert_eq!(entries.len(), 1);
        let e = &entries[0];
        assert_eq!(e.prefix, "192.168.0.0/16".parse::<IpNet>().unwrap());
        assert_eq!((e.sequence, e.status, e.peer_as), (5, 1, 65000));
        assert_eq!(&e.attributes[..], &[0x40, 0x01, 0x01, 0x00]);

        // An attribute length that claims more than is there, after one good entry.
        let mut two = body.clone();
        two.extend(&body[..21]);
        two.push(0x09);
        two.extend([0x40, 0x01, 0x01, 0x00]);
        let Ok(Entry::TableDump {
            entries,
            error: Some(err),
        }) = parse_table_dump(1, &Bytes::from(two))
        else {
            panic!()
        };
        assert_eq!(entries.len(), 1);
        assert!(err.contains("attribute length 9 of entry 1"), "{err}");
    }

    #[test]
    fn peer_index_table_and_add_path_rib() {
        // BIRD PEER_INDEX_TABLE (mrtparse bird-mrtdump_rib): view "master", 2 peers.
        let pit = [
            0xc0, 0xa8, 0x00, 0x10, 0x00, 0x06, b'm', b'a', b's', b't', b'e', b'r', 0x00, 0x02,
            0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
            0xac, 0x10, 0x00, 0x0a, 0xc0, 0xa8, 0x00, 0x0a, 0x00, 0x00, 0xfd, 0xe8,
        ];
        let Ok(Entry::PeerIndexTable(t)) = parse_table_dump_v2(1, &Bytes::copy_from_slice(&pit))
        else {
            panic!()
        };
        assert_eq!(t.view_name, "master");
        assert_eq!(t.collector_id, Ipv4Addr::new(192, 168, 0, 16));
        assert_eq!(t.peers.len(), 2);
        assert_eq!(
            t.peers[1],
            IndexedPeer {
                bgp_id: Ipv4Addr::new(172, 16, 0, 10),
                ip: "192.168.0.10".parse().unwrap(),
                asn: 65000
            }
        );

        // RIB_IPV4_UNICAST_ADDPATH (same file): 192.168.0.0/24, one entry, path id 0.
        let rib = [
            0x00, 0x00, 0x00, 0x02, 0x18, 0xc0, 0xa8, 0x00, 0x00, 0x01, 0x00, 0x00, 0x58, 0x9e,
            0xcb, 0x0a, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00,
        ];
        let Ok(Entry::Rib(r)) = parse_table_dump_v2(8, &Bytes::copy_from_slice(&rib)) else {
            panic!()
        };
        assert_eq!(r.sequence, 2);
        assert_eq!(r.prefix, RibPrefix::Ip("192.168.0.0/24".parse().unwrap()));
        assert_eq!(r.entries.len(), 1);
        assert_eq!(r.entries[0].path_id, Some(7));
        assert!(r.entries[0].attributes.is_empty());
    }

    #[test]
    fn abbreviated_mp_reach_is_expanded_into_an_update() {
        // ORIGIN IGP, then MP_REACH_NLRI with only next-hop length 16 and 2001:db8::1
        // (OpenBGPD RIB_IPV6_UNICAST style).
        let mut attrs = vec![0x40, 0x01, 0x01, 0x00, 0x80, 0x0e, 0x11, 0x10];
        attrs.extend([
            0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
        ]);
        let msg = attributes_as_update(&attrs, AfiSafi::IPV6_UNICAST).unwrap();
        let mut expected = vec![0xff; 16];
        expected.extend([0x00, 0x33, 0x02, 0x00, 0x00, 0x00, 0x1c]);
        expected.extend([
            0x40, 0x01, 0x01, 0x00, 0x80, 0x0e, 0x15, 0x00, 0x02, 0x01, 0x10,
        ]);
        expected.extend([
            0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x00,
        ]);
        assert_eq!(&msg[..], &expected[..]);

        // A full MP_REACH (AFI first) is left alone.
        let full = [
            0x80, 0x0e, 0x09, 0x00, 0x01, 0x01, 0x04, 0x0a, 0x00, 0x00, 0x01, 0x00,
        ];
        let msg = attributes_as_update(&full, AfiSafi::IPV4_UNICAST).unwrap();
        assert_eq!(&msg[23..], &full[..]);
    }
}
