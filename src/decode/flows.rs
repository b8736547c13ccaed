//! BGP sessions in a packet capture: TCP connections told apart by their address pairs,
//! each direction reassembled and framed, and each connection's decoding context
//! learned from the two OPENs it carries (RFC 6793 4-octet AS, RFC 8654 extended
//! messages and RFC 7911 ADD-PATH apply only when both ends advertised them).
//!
//! A stream is BGP when it has a BGP port (179) at either end, or when its first
//! octets are a BGP header; streams joined mid-way on other ports are searched for
//! markers, leniently. Owns no output: events go to the caller.

use super::event::{Event, Origin};
use super::framer::{Frame, Framer};
use super::packet::{self, Segment, Skip};
use super::pcap;
use super::reassembly::{Chunk, Direction};
use super::source::{frame_event, Options, Sink};
use super::Error;
use crate::bgp::wire::{AddPathMode, AfiSafi, Capability, Context, Message, Open};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::net::SocketAddr;

/// The well-known BGP port (RFC 4271 section 8.2.1).
const BGP_PORT: u16 = 179;

/// Reads a capture and reports every BGP event in it, in capture order (then, at the
/// end, what was left in each stream). Fails only when the file is not a capture.
pub fn pcap(reader: impl Read, options: &Options, sink: &mut dyn Sink) -> Result<(), Error> {
    let frames = pcap::Reader::new(reader)?;
    let mut tracker = Tracker::new(*options);
    for frame in frames {
        if sink.full() {
            return Ok(());
        }
        match frame {
            Ok(frame) => tracker.frame(&frame, sink),
            Err(error) => sink.event(Event::InputError { error }),
        }
    }
    tracker.finish(sink);
    Ok(())
}

/// What an OPEN advertised that changes how the other end's messages are encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Advertised {
    four_octet_as: bool,
    extended_message: bool,
    add_path: Vec<(AfiSafi, AddPathMode)>,
}

impl Advertised {
    fn from_open(open: &Open) -> Self {
        let mut adv = Advertised {
            four_octet_as: false,
            extended_message: false,
            add_path: Vec::new(),
        };
        for cap in &open.capabilities {
            match cap {
                Capability::FourOctetAs(_) => adv.four_octet_as = true,
                Capability::ExtendedMessage => adv.extended_message = true,
                Capability::AddPath(families) => adv
                    .add_path
                    .extend(families.iter().map(|f| (f.afi_safi, f.send_receive))),
                _ => {}
            }
        }
        adv
    }

    fn add_path(&self, family: AfiSafi) -> Option<AddPathMode> {
        self.add_path
            .iter()
            .rev()
            .find(|(f, _)| *f == family)
            .map(|(_, m)| *m)
    }
}

/// The context of messages sent by `sender` to `receiver` (RFC 7911 section 5: path
/// identifiers are sent when the sender advertised Send and the receiver Receive).
fn negotiated(sender: &Advertised, receiver: &Advertised) -> Context {
    let add_path = |family| {
        matches!(
            sender.add_path(family),
            Some(AddPathMode::Send | AddPathMode::Both)
        ) && matches!(
            receiver.add_path(family),
            Some(AddPathMode::Receive | AddPathMode::Both)
        )
    };
    Context {
        four_octet_as: sender.four_octet_as && receiver.four_octet_as,
        extended_message: sender.extended_message && receiver.extended_message,
        add_path_ipv4_unicast: add_path(AfiSafi::IPV4_UNICAST),
        add_path_ipv6_unicast: add_path(AfiSafi::IPV6_UNICAST),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// No data yet, or fewer than a header's worth from a stream whose start was seen.
    Undecided,
    Bgp,
    NotBgp,
}

/// One direction of a connection.
#[derive(Debug)]
struct Side {
    addr: SocketAddr,
    stream: Direction,
    saw_syn: bool,
    kind: Kind,
    /// The first octets of a stream whose start was seen, kept until they show whether
    /// it is BGP.
    head: Vec<u8>,
    framer: Framer,
    advertised: Option<Advertised>,
    /// The last frame that carried data for this side: (number, seconds, nanoseconds).
    last_frame: (u64, u64, u32),
}

impl Side {
    fn new(addr: SocketAddr) -> Self {
        Side {
            addr,
            stream: Direction::default(),
            saw_syn: false,
            kind: Kind::Undecided,
            head: Vec::new(),
            framer: Framer::new(false),
            advertised: None,
            last_frame: (0, 0, 0),
        }
    }
}

#[derive(Debug)]
struct Connection {
    sides: [Side; 2],
}

impl Connection {
    /// The context for messages sent by side `i`, when both OPENs were seen.
    fn context(&self, i: usize) -> Option<Context> {
        match (&self.sides[i].advertised, &self.sides[1 - i].advertised) {
            (Some(sender), Some(receiver)) => Some(negotiated(sender, receiver)),
            _ => None,
        }
    }
}

struct Tracker {
    candidates: Vec<Context>,
    connections: BTreeMap<(SocketAddr, SocketAddr), Connection>,
    reported_linktypes: BTreeSet<u16>,
    chunks: Vec<Chunk>,
    frames: Vec<Frame>,
}

impl Tracker {
    fn new(options: Options) -> Self {
        Tracker {
            candidates: options.candidates(),
            connections: BTreeMap::new(),
            reported_linktypes: BTreeSet::new(),
            chunks: Vec::new(),
            frames: Vec::new(),
        }
    }

    fn frame(&mut self, frame: &pcap::Frame, sink: &mut dyn Sink) {
        let segment = match packet::tcp_segment(frame.linktype, &frame.data) {
            Ok(segment) => segment,
            Err(Skip::NotIp | Skip::NotTcp) => return,
            Err(Skip::UnsupportedLinkType(lt)) => {
                if self.reported_linktypes.insert(lt) {
                    let reason = format!("link type {lt} is not supported; its frames are skipped");
                    sink.event(Event::FrameSkipped {
                        frame: frame.number,
                        reason,
                    });
                }
                return;
            }
            Err(Skip::Fragment) => {
                sink.event(Event::FrameSkipped {
                    frame: frame.number,
                    reason: "IP fragment".into(),
                });
                return;
            }
            Err(Skip::Malformed(why)) => {
                sink.event(Event::FrameSkipped {
                    frame: frame.number,
                    reason: why.into(),
                });
                return;
            }
        };
        self.segment(frame, &segment, sink);
    }

    fn segment(&mut self, frame: &pcap::Frame, seg: &Segment, sink: &mut dyn Sink) {
        let key = if seg.src <= seg.dst {
            (seg.src, seg.dst)
        } else {
            (seg.dst, seg.src)
        };
        let i = usize::from(seg.src != key.0);
        let conn = self.connections.entry(key).or_insert_with(|| Connection {
            sides: [Side::new(key.0), Side::new(key.1)],
        });
        let side = &mut conn.sides[i];
        if seg.syn {
            // A new connection on the same address pair: report what the old stream
            // left, then start over, forgetting the old session's OPENs.
            if side.stream.started() {
                finish_side(
                    conn,
                    i,
                    &self.candidates,
                    &mut self.chunks,
                    &mut self.frames,
                    sink,
                );
            }
            let side = &mut conn.sides[i];
            *side = Side::new(side.addr);
            side.saw_syn = true;
        }
        let side = &mut conn.sides[i];
        side.last_frame = (frame.number, frame.seconds, frame.nanos);
        let missing = seg.payload_len.saturating_sub(seg.payload.len());
        if seg.syn {
            side.stream
                .syn_with_data(seg.seq, seg.payload, missing, &mut self.chunks);
        } else {
            side.stream
                .segment(seg.seq, seg.payload, missing, &mut self.chunks);
        }
        let chunks = std::mem::take(&mut self.chunks);
        feed(conn, i, &chunks, &self.candidates, &mut self.frames, sink);
        self.chunks = chunks;
        self.chunks.clear();
    }

    fn finish(&mut self, sink: &mut dyn Sink) {
        for conn in self.connections.values_mut() {
            for i in 0..2 {
                finish_side(
                    conn,
                    i,
                    &self.candidates,
                    &mut self.chunks,
                    &mut self.frames,
                    sink,
                );
            }
        }
    }
}

/// Ends side `i`'s stream: held segments are delivered around their gaps and the
/// framer reports what is left.
fn finish_side(
    conn: &mut Connection,
    i: usize,
    candidates: &[Context],
    chunks: &mut Vec<Chunk>,
    frames: &mut Vec<Frame>,
    sink: &mut dyn Sink,
) {
    chunks.clear();
    conn.sides[i].stream.finish(chunks);
    let taken = std::mem::take(chunks);
    feed(conn, i, &taken, candidates, frames, sink);
    let side = &mut conn.sides[i];
    if side.kind == Kind::Undecided && !side.head.is_empty() {
        // Too short to tell: treat it as the start of a BGP message if it looks like one.
        side.kind = Kind::Bgp;
        let head = std::mem::take(&mut side.head);
        side.framer.push(&head);
    }
    if side.kind == Kind::Bgp {
        side.framer.finish(frames);
        emit_frames(conn, i, candidates, frames, sink);
    }
    conn.sides[i].head.clear();
}

/// Passes reassembled chunks of side `i` to its framer, deciding first whether the
/// stream is BGP at all.
fn feed(
    conn: &mut Connection,
    i: usize,
    chunks: &[Chunk],
    candidates: &[Context],
    frames: &mut Vec<Frame>,
    sink: &mut dyn Sink,
) {
    for chunk in chunks {
        let side = &mut conn.sides[i];
        match chunk {
            Chunk::Restart => {
                if side.kind == Kind::Bgp {
                    side.framer.finish(frames);
                    emit_frames(conn, i, candidates, frames, sink);
                    let dst = conn.sides[1 - i].addr;
                    let side = &mut conn.sides[i];
                    let origin = packet_origin(side, dst, side.framer.position());
                    side.framer = Framer::new(true);
                    sink.event(Event::Restart { origin });
                }
            }
            Chunk::Gap(missing) => {
                if side.kind == Kind::Bgp {
                    let (number, seconds, nanos) = side.last_frame;
                    let (src, dst) = (side.addr, conn.sides[1 - i].addr);
                    let side = &mut conn.sides[i];
                    let offset = side.framer.position();
                    side.framer.gap(*missing, frames);
                    emit_frames(conn, i, candidates, frames, sink);
                    sink.event(Event::Gap {
                        origin: Origin::Packet {
                            frame: number,
                            seconds,
                            nanos,
                            src,
                            dst,
                            offset,
                        },
                        missing: *missing,
                    });
                } else if side.kind == Kind::Undecided {
                    // A stream whose start is lost cannot be judged by its first octets.
                    let kind = decide_without_start(side.addr, conn.sides[1 - i].addr);
                    let side = &mut conn.sides[i];
                    side.kind = kind;
                    let side = &mut conn.sides[i];
                    if side.kind == Kind::Bgp {
                        let head = std::mem::take(&mut side.head);
                        side.framer.push(&head);
                        side.framer.gap(*missing, frames);
                        emit_frames(conn, i, candidates, frames, sink);
                    }
                }
            }
            Chunk::Data(data) => {
                if side.kind == Kind::Undecided {
                    let peer = conn.sides[1 - i].addr;
                    let side = &mut conn.sides[i];
                    if side.addr.port() == BGP_PORT || peer.port() == BGP_PORT {
                        side.kind = Kind::Bgp;
                        side.framer = Framer::new(side.saw_syn);
                    } else if side.saw_syn {
                        side.head.extend_from_slice(data);
                        if side.head.len() < crate::bgp::wire::HEADER_LEN {
                            continue;
                        }
                        side.kind = if looks_like_header(&side.head) {
                            Kind::Bgp
                        } else {
                            Kind::NotBgp
                        };
                        side.framer = Framer::new(true);
                        let head = std::mem::take(&mut side.head);
                        if side.kind == Kind::Bgp {
                            side.framer.push(&head);
                            drain(conn, i, candidates, frames, sink);
                        }
                        continue;
                    } else {
                        side.kind = Kind::Bgp;
                        side.framer = Framer::new(false).lenient();
                    }
                }
                let side = &mut conn.sides[i];
                if side.kind == Kind::Bgp {
                    side.framer.push(data);
                    drain(conn, i, candidates, frames, sink);
                }
            }
        }
    }
}

fn packet_origin(side: &Side, dst: SocketAddr, offset: u64) -> Origin {
    let (frame, seconds, nanos) = side.last_frame;
    Origin::Packet {
        frame,
        seconds,
        nanos,
        src: side.addr,
        dst,
        offset,
    }
}

fn decide_without_start(a: SocketAddr, b: SocketAddr) -> Kind {
    if a.port() == BGP_PORT || b.port() == BGP_PORT {
        Kind::Bgp
    } else {
        Kind::NotBgp
    }
}

/// The first octets of a stream are a BGP header: the marker, a length no shorter
/// than a header and a known type.
fn looks_like_header(head: &[u8]) -> bool {
    head.len() >= 19
        && head[..16].iter().all(|&b| b == 0xff)
        && u16::from_be_bytes([head[16], head[17]]) >= 19
        && (1..=5).contains(&head[18])
}

/// Frames and decodes side `i`'s complete messages one at a time, learning the
/// connection's context from OPENs as they pass.
fn drain(
    conn: &mut Connection,
    i: usize,
    candidates: &[Context],
    frames: &mut Vec<Frame>,
    sink: &mut dyn Sink,
) {
    loop {
        let framing = conn.context(i).unwrap_or(candidates[0]);
        let more = conn.sides[i].framer.drain(&framing, frames);
        emit_frames(conn, i, candidates, frames, sink);
        if !more {
            break;
        }
    }
}

fn emit_frames(
    conn: &mut Connection,
    i: usize,
    candidates: &[Context],
    frames: &mut Vec<Frame>,
    sink: &mut dyn Sink,
) {
    for frame in frames.drain(..) {
        let known = conn.context(i);
        let side = &conn.sides[i];
        let (number, seconds, nanos) = side.last_frame;
        let (src, dst) = (side.addr, conn.sides[1 - i].addr);
        let origin = |offset| Origin::Packet {
            frame: number,
            seconds,
            nanos,
            src,
            dst,
            offset,
        };
        let event = match known {
            Some(ctx) => frame_event(frame, origin, &[ctx]),
            None => frame_event(frame, origin, candidates),
        };
        if let Event::Message { decoded, .. } = &event {
            if let Ok(Message::Open(open)) = &decoded.result {
                conn.sides[i].advertised = Some(Advertised::from_open(open));
            }
        }
        sink.event(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bgp::wire::{AddPathFamily, AS_TRANS};

    fn open(caps: Vec<Capability>) -> Open {
        Open {
            version: 4,
            my_as: AS_TRANS,
            hold_time: 90,
            bgp_id: "192.0.2.1".parse().unwrap(),
            capabilities: caps,
            other_params: vec![],
        }
    }

    #[test]
    fn both_ends_must_advertise() {
        let both = Advertised::from_open(&open(vec![
            Capability::FourOctetAs(65000),
            Capability::ExtendedMessage,
            Capability::AddPath(vec![AddPathFamily {
                afi_safi: AfiSafi::IPV4_UNICAST,
                send_receive: AddPathMode::Both,
            }]),
        ]));
        let plain = Advertised::from_open(&open(vec![]));
        let receiver = Advertised::from_open(&open(vec![
            Capability::FourOctetAs(65001),
            Capability::AddPath(vec![AddPathFamily {
                afi_safi: AfiSafi::IPV4_UNICAST,
                send_receive: AddPathMode::Receive,
            }]),
        ]));
        assert_eq!(negotiated(&both, &plain), Context::default());
        let ctx = negotiated(&both, &receiver);
        assert!(
            ctx.four_octet_as
                && ctx.add_path_ipv4_unicast
                && !ctx.add_path_ipv6_unicast
                && !ctx.extended_message
        );
        // The receive-only end sends no path identifiers.
        assert!(!negotiated(&receiver, &both).add_path_ipv4_unicast);
    }

    #[test]
    fn header_sniffing() {
        let mut h = vec![0xff; 16];
        h.extend([0x00, 0x1d, 0x01]);
        assert!(looks_like_header(&h));
        h[18] = 0x07;
        assert!(!looks_like_header(&h));
        assert!(!looks_like_header(&[0x03, 0x00, 0x00, 0x00, 0x20, 0x04]));
    }

    /// A classic little-endian pcap of raw IPv4 frames (link type 101).
    fn capture(frames: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![
            0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 101, 0,
            0, 0,
        ];
        for (i, f) in frames.iter().enumerate() {
            out.extend((i as u32).to_le_bytes());
            out.extend(0u32.to_le_bytes());
            out.extend((f.len() as u32).to_le_bytes());
            out.extend((f.len() as u32).to_le_bytes());
            out.extend(f);
        }
        out
    }

    /// An IPv4/TCP packet from `src` to `dst` (a.b.c.d:port as bytes and port).
    fn tcp(
        src: ([u8; 4], u16),
        dst: ([u8; 4], u16),
        seq: u32,
        syn: bool,
        payload: &[u8],
    ) -> Vec<u8> {
        let total = (40 + payload.len()) as u16;
        let mut p = vec![0x45, 0];
        p.extend(total.to_be_bytes());
        p.extend([0, 0, 0x40, 0, 64, 6, 0, 0]);
        p.extend(src.0);
        p.extend(dst.0);
        p.extend(src.1.to_be_bytes());
        p.extend(dst.1.to_be_bytes());
        p.extend(seq.to_be_bytes());
        p.extend([
            0,
            0,
            0,
            0,
            0x50,
            if syn { 0x02 } else { 0x18 },
            0xff,
            0xff,
            0,
            0,
            0,
            0,
        ]);
        p.extend(payload);
        p
    }

    fn encoded(msg: &Message, ctx: &Context) -> Vec<u8> {
        let mut out = bytes::BytesMut::new();
        crate::bgp::wire::encode_message(msg, ctx, &mut out).unwrap();
        out.to_vec()
    }

    fn update_with_as_path(asn: u32) -> Message {
        use crate::bgp::wire::{AsPath, AsSegment, Origin, PathAttribute, SegmentType, Update};
        Message::Update(Update {
            attributes: vec![
                PathAttribute::Origin(Origin::Igp),
                PathAttribute::AsPath(AsPath {
                    segments: vec![AsSegment {
                        kind: SegmentType::AsSequence,
                        asns: vec![asn, 65001],
                    }],
                }),
                PathAttribute::NextHop("192.0.2.1".parse().unwrap()),
            ],
            nlri: vec!["198.51.100.0/24".parse::<ipnet::IpNet>().unwrap().into()],
            ..Update::default()
        })
    }

    /// Decodes a synthetic session: the client's and server's OPENs (the server's with
    /// or without the 4-octet AS capability), then an UPDATE from the server split in two
    /// segments that arrive out of order, one of them retransmitted.
    fn session(server_four_octet: bool) -> Vec<Event> {
        let client = ([192, 0, 2, 1], 50000);
        let server = ([192, 0, 2, 2], 179);
        let four = Context {
            four_octet_as: true,
            ..Context::default()
        };
        let ctx = if server_four_octet {
            four
        } else {
            Context::default()
        };
        let mut server_caps = vec![Capability::Multiprotocol(AfiSafi::IPV4_UNICAST)];
        if server_four_octet {
            server_caps.push(Capability::FourOctetAs(65002));
        }
        let client_open = encoded(
            &Message::Open(open(vec![Capability::FourOctetAs(4_200_000_000)])),
            &four,
        );
        let server_open = encoded(&Message::Open(open(server_caps)), &ctx);
        let update = encoded(
            &update_with_as_path(if server_four_octet {
                4_200_000_000
            } else {
                65000
            }),
            &ctx,
        );
        let (a, b) = update.split_at(30);
        let s0 = 7_000u32;
        let s_open_end = s0 + 1 + server_open.len() as u32;
        let frames = vec![
            tcp(client, server, 100, true, &[]),
            tcp(server, client, s0, true, &[]),
            tcp(client, server, 101, false, &client_open),
            tcp(server, client, s0 + 1, false, &server_open),
            tcp(server, client, s_open_end + 30, false, b),
            tcp(server, client, s_open_end, false, a),
            tcp(server, client, s_open_end, false, a),
        ];
        let mut events = Vec::new();
        pcap(
            &capture(&frames)[..],
            &Options::default(),
            &mut |e: Event| events.push(e),
        )
        .unwrap();
        events
    }

    fn updates(events: &[Event]) -> Vec<&super::super::event::Decoded> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Message { decoded, .. } if decoded.bytes[18] == 2 => Some(decoded),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn context_comes_from_both_opens() {
        let events = session(true);
        assert_eq!(events.len(), 3, "{events:?}");
        let u = updates(&events);
        assert_eq!(u.len(), 1);
        assert!(
            u[0].ctx.four_octet_as && !u[0].guessed && !u[0].is_malformed(),
            "{:?}",
            u[0]
        );
        let Ok(Message::Update(update)) = &u[0].result else {
            panic!()
        };
        assert_eq!(
            update,
            match &update_with_as_path(4_200_000_000) {
                Message::Update(x) => x,
                _ => unreachable!(),
            }
        );
        let Event::Message {
            origin: Origin::Packet {
                frame, src, offset, ..
            },
            ..
        } = &events[2]
        else {
            panic!()
        };
        // Completed by the 6th frame; it follows the server's OPEN: 29 octets plus one
        // capabilities parameter of 2 + 2 * 6 octets.
        assert_eq!((*frame, src.port(), *offset), (6, 179, 29 + 14));
    }

    #[test]
    fn one_open_without_four_octet_as_means_two_octet_paths() {
        let events = session(false);
        let u = updates(&events);
        assert_eq!(u.len(), 1);
        assert!(
            !u[0].ctx.four_octet_as && !u[0].guessed && !u[0].is_malformed(),
            "{:?}",
            u[0]
        );
    }

    #[test]
    fn a_stream_on_another_port_must_start_with_a_bgp_header() {
        let a = ([192, 0, 2, 1], 40000);
        let b = ([192, 0, 2, 2], 1790);
        let frames = vec![
            tcp(a, b, 1, true, &[]),
            tcp(a, b, 2, false, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        ];
        let mut events = Vec::new();
        pcap(
            &capture(&frames)[..],
            &Options::default(),
            &mut |e: Event| events.push(e),
        )
        .unwrap();
        assert!(events.is_empty(), "{events:?}");

        let keepalive = encoded(&Message::Keepalive, &Context::default());
        let frames = vec![tcp(a, b, 1, true, &[]), tcp(a, b, 2, false, &keepalive)];
        let mut events = Vec::new();
        pcap(
            &capture(&frames)[..],
            &Options::default(),
            &mut |e: Event| events.push(e),
        )
        .unwrap();
        assert!(matches!(&events[..], [Event::Message { .. }]), "{events:?}");
    }
}
