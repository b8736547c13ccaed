//! What the decode sources report, in input order — decoded messages, malformed ones,
//! MRT state changes and RIB entries, stream damage — and the JSON object of each. Both
//! the `decode` command and the data sweep consume these; neither re-parses anything.

use super::json::{self, hex, Json, Object};
use super::mrt::{IndexedPeer, PeerIndexTable, Peering, RibPrefix, StateChange};
use super::Error;
use crate::bgp::wire::{AfiSafi, Context, DecodeError, Message};
use bytes::Bytes;
use std::net::{IpAddr, SocketAddr};

/// Where an event was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Raw messages (standard input, `--hex`): octet offset in the input.
    Stream { offset: u64 },
    /// An MRT record, with the session it names when it names one.
    Mrt {
        offset: u64,
        timestamp: u32,
        microseconds: Option<u32>,
        peering: Option<Peering>,
        /// For messages: whether the collector sent it (MESSAGE_LOCAL subtypes).
        sent: Option<bool>,
    },
    /// A TCP stream in a capture: the frame that completed the event and the offset of
    /// the event in its stream.
    Packet {
        frame: u64,
        seconds: u64,
        nanos: u32,
        src: SocketAddr,
        dst: SocketAddr,
        offset: u64,
    },
}

/// A message and the outcome of decoding it.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub bytes: Bytes,
    /// The context the message was decoded with.
    pub ctx: Context,
    /// The session's context was unknown and `ctx` is the first of the candidate
    /// contexts that decoded the message cleanly, not the default one.
    pub guessed: bool,
    pub result: Result<Message, DecodeError>,
}

impl Decoded {
    /// A fatal decode error, or an UPDATE with RFC 7606 errors (treat-as-withdraw,
    /// attribute-discard): both are malformed messages.
    pub fn is_malformed(&self) -> bool {
        match &self.result {
            Err(_) => true,
            Ok(Message::Update(u)) => !u.errors.is_empty(),
            Ok(_) => false,
        }
    }
}

/// A route of a RIB dump (TABLE_DUMP or TABLE_DUMP_V2), with its peer resolved.
#[derive(Debug, Clone)]
pub struct RibRoute {
    pub prefix: RibPrefix,
    pub afi_safi: AfiSafi,
    pub sequence: u32,
    /// TABLE_DUMP_V2: index into the PEER_INDEX_TABLE.
    pub peer_index: Option<u16>,
    /// The peer, when known (TABLE_DUMP names it; TABLE_DUMP_V2 indexes the table).
    pub peer_ip: Option<IpAddr>,
    pub peer_as: Option<u32>,
    pub originated: u32,
    pub path_id: Option<u32>,
    /// TABLE_DUMP only: view number and status octet.
    pub view: Option<u16>,
    pub status: Option<u8>,
}

impl RibRoute {
    pub fn with_peer(mut self, peer: Option<&IndexedPeer>) -> Self {
        self.peer_ip = peer.map(|p| p.ip);
        self.peer_as = peer.map(|p| p.asn);
        self
    }
}

#[derive(Debug)]
pub enum Event {
    Message {
        origin: Origin,
        decoded: Decoded,
    },
    /// A header the codec rejects (bad marker, length or type).
    BadHeader {
        origin: Origin,
        bytes: Bytes,
        error: DecodeError,
    },
    /// A message cut short by the end of a record, a stream or a capture gap.
    Truncated {
        origin: Origin,
        bytes: Bytes,
    },
    /// Octets that belong to no message.
    Skipped {
        origin: Origin,
        len: u64,
    },
    /// Stream octets missing from a capture.
    Gap {
        origin: Origin,
        missing: u64,
    },
    /// A captured stream started over: a segment reused the sequence number of the
    /// previous one with different data (see `reassembly::Chunk::Restart`).
    Restart {
        origin: Origin,
    },
    StateChange {
        origin: Origin,
        change: StateChange,
    },
    PeerIndexTable {
        origin: Origin,
        table: PeerIndexTable,
    },
    /// A RIB entry; its attributes decoded as an UPDATE without NLRI, or why they could
    /// not be put in one.
    Rib {
        origin: Origin,
        route: RibRoute,
        attributes: Result<Decoded, String>,
    },
    /// An MRT record of a type or subtype that carries no BGP message.
    Unsupported {
        origin: Origin,
        mrt_type: u16,
        subtype: u16,
        length: u32,
    },
    /// A captured frame that could not be followed to TCP: malformed headers, an IP
    /// fragment, or a link type this reader does not know (reported once per type).
    FrameSkipped {
        frame: u64,
        reason: String,
    },
    /// The container (MRT, pcap) is damaged.
    InputError {
        error: Error,
    },
}

impl Event {
    /// Whether the event reports a malformed message or damaged input (the `decode`
    /// command's exit status 1). Skipped octets and capture gaps alone are not: a
    /// capture may start mid-session or lose packets, the messages around that are
    /// reported on their own.
    pub fn is_malformed(&self) -> bool {
        match self {
            Event::Message { decoded, .. } => decoded.is_malformed(),
            Event::Rib { attributes, .. } => {
                attributes.as_ref().map_or(true, Decoded::is_malformed)
            }
            Event::BadHeader { .. } | Event::Truncated { .. } | Event::InputError { .. } => true,
            Event::Skipped { .. }
            | Event::Gap { .. }
            | Event::Restart { .. }
            | Event::StateChange { .. }
            | Event::PeerIndexTable { .. }
            | Event::Unsupported { .. }
            | Event::FrameSkipped { .. } => false,
        }
    }

    /// The event as one JSON object: `type` first, then where it was found, then its
    /// content.
    pub fn to_json(&self) -> Object {
        match self {
            Event::Message { origin, decoded } => message_json(origin, decoded),
            Event::BadHeader {
                origin,
                bytes,
                error,
            } => malformed_json(origin, bytes, error),
            Event::Truncated { origin, bytes } => {
                let mut o = typed("TRUNCATED", origin);
                o.push("length", bytes.len());
                if bytes.len() >= 18 {
                    o.push(
                        "expected_length",
                        u16::from_be_bytes([bytes[16], bytes[17]]),
                    );
                }
                o.push(
                    "error",
                    format!("message truncated after {} octets", bytes.len()),
                );
                o.push("raw", hex(bytes));
                o
            }
            Event::Skipped { origin, len } => typed("SKIPPED", origin).with("length", *len),
            Event::Gap { origin, missing } => typed("GAP", origin).with("missing", *missing),
            Event::Restart { origin } => typed("STREAM_RESTART", origin).with(
                "reason",
                "a segment reused the previous sequence number with different data",
            ),
            Event::StateChange { origin, change } => typed("STATE_CHANGE", origin)
                .with("old_state", change.old_state)
                .with("old_state_name", state_name(change.old_state))
                .with("new_state", change.new_state)
                .with("new_state_name", state_name(change.new_state)),
            Event::PeerIndexTable { origin, table } => typed("PEER_INDEX_TABLE", origin)
                .with("collector_id", table.collector_id.to_string())
                .with("view_name", table.view_name.as_str())
                .with(
                    "peers",
                    table
                        .peers
                        .iter()
                        .map(|p| {
                            Object::new()
                                .with("bgp_id", p.bgp_id.to_string())
                                .with("ip", p.ip.to_string())
                                .with("asn", p.asn)
                        })
                        .collect::<Vec<_>>(),
                ),
            Event::Rib {
                origin,
                route,
                attributes,
            } => rib_json(origin, route, attributes),
            Event::Unsupported {
                origin,
                mrt_type,
                subtype,
                length,
            } => typed("MRT_UNSUPPORTED", origin)
                .with("mrt_type", *mrt_type)
                .with("mrt_subtype", *subtype)
                .with("length", *length),
            Event::FrameSkipped { frame, reason } => Object::new()
                .with("type", "FRAME_SKIPPED")
                .with("frame", *frame)
                .with("reason", reason.as_str()),
            Event::InputError { error } => Object::new()
                .with("type", "INPUT_ERROR")
                .with("kind", error.kind())
                .with("error", error.to_string()),
        }
    }
}

/// RFC 4271 section 8.2.2 states; 7 and 8 are Quagga's Clearing and Deleted, which
/// RIPE RIS files contain.
fn state_name(state: u16) -> Json {
    match state {
        1 => "Idle".into(),
        2 => "Connect".into(),
        3 => "Active".into(),
        4 => "OpenSent".into(),
        5 => "OpenConfirm".into(),
        6 => "Established".into(),
        7 => "Clearing".into(),
        8 => "Deleted".into(),
        _ => Json::Null,
    }
}

fn typed(kind: &'static str, origin: &Origin) -> Object {
    let mut o = Object::new().with("type", kind);
    o.extend(origin_fields(origin));
    o
}

fn origin_fields(origin: &Origin) -> Object {
    let mut o = Object::new();
    match origin {
        Origin::Stream { offset } => o.push("offset", *offset),
        Origin::Mrt {
            offset: _,
            timestamp,
            microseconds,
            peering,
            sent,
        } => {
            o.push("timestamp", *timestamp);
            if let Some(us) = microseconds {
                o.push("microseconds", *us);
            }
            if let Some(p) = peering {
                o.push("peer_ip", p.peer_ip.map(|ip| ip.to_string()));
                o.push("peer_as", p.peer_as);
                o.push("local_ip", p.local_ip.map(|ip| ip.to_string()));
                o.push("local_as", p.local_as);
                if let Some(i) = p.interface {
                    o.push("interface", i);
                }
            }
            if let Some(sent) = sent {
                o.push("direction", if *sent { "sent" } else { "received" });
            }
        }
        Origin::Packet {
            frame,
            seconds,
            nanos,
            src,
            dst,
            offset,
        } => {
            o.push("frame", *frame);
            o.push("timestamp", *seconds);
            o.push("nanoseconds", *nanos);
            o.push("src", src.to_string());
            o.push("dst", dst.to_string());
            o.push("stream_offset", *offset);
        }
    }
    o
}

/// `type` of the message, then the origin, then the message's own fields.
fn message_json(origin: &Origin, decoded: &Decoded) -> Object {
    match &decoded.result {
        Ok(msg) => {
            let body = json::message(msg, decoded.bytes.len());
            let mut fields = body.into_fields().into_iter();
            let mut o = Object::new();
            if let Some((k, v)) = fields.next() {
                o.push(k, v);
            }
            o.extend(origin_fields(origin));
            if decoded.guessed {
                o.push(
                    "context_guessed",
                    Object::new()
                        .with("four_octet_as", decoded.ctx.four_octet_as)
                        .with(
                            "add_path",
                            decoded.ctx.add_path_ipv4_unicast || decoded.ctx.add_path_ipv6_unicast,
                        ),
                );
            }
            for (k, v) in fields {
                o.push(k, v);
            }
            o
        }
        Err(error) => malformed_json(origin, &decoded.bytes, error),
    }
}

fn malformed_json(origin: &Origin, bytes: &[u8], error: &DecodeError) -> Object {
    let kind = bytes
        .get(18)
        .and_then(|t| json::message_type_name(*t))
        .unwrap_or("MALFORMED");
    let mut o = typed(kind, origin);
    o.push("length", bytes.len());
    o.push("error", error.to_string());
    o.push("notification", json::notification(&error.notification()));
    o.push("raw", hex(bytes));
    o
}

fn rib_json(origin: &Origin, route: &RibRoute, attributes: &Result<Decoded, String>) -> Object {
    let mut o = typed("RIB", origin);
    match &route.prefix {
        RibPrefix::Ip(net) => o.push("prefix", net.to_string()),
        RibPrefix::Other(raw) => o.push("nlri_hex", hex(raw)),
    }
    o.push("afi", route.afi_safi.afi.0);
    o.push("safi", route.afi_safi.safi.0);
    if let Some(path_id) = route.path_id {
        o.push("path_id", path_id);
    }
    o.push("sequence", route.sequence);
    if let Some(view) = route.view {
        o.push("view", view);
    }
    if let Some(status) = route.status {
        o.push("status", status);
    }
    if let Some(i) = route.peer_index {
        o.push("peer_index", i);
    }
    o.push("peer_ip", route.peer_ip.map(|ip| ip.to_string()));
    o.push("peer_as", route.peer_as);
    o.push("originated", route.originated);
    match attributes {
        Ok(Decoded {
            result: Ok(Message::Update(update)),
            ..
        }) => {
            o.push(
                "attributes",
                update
                    .attributes
                    .iter()
                    .map(json::attribute)
                    .collect::<Vec<_>>(),
            );
            o.push(
                "errors",
                update
                    .errors
                    .iter()
                    .map(json::update_error)
                    .collect::<Vec<_>>(),
            );
        }
        Ok(Decoded { result: Ok(_), .. }) => {
            o.push("error", "attributes did not decode as an UPDATE")
        }
        Ok(Decoded {
            result: Err(error),
            bytes,
            ..
        }) => {
            o.push("error", error.to_string());
            o.push("notification", json::notification(&error.notification()));
            o.push("raw", hex(bytes));
        }
        Err(reason) => o.push("error", reason.as_str()),
    }
    o
}
