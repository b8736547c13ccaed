//! The inputs of the `decode` command turned into [`Event`]s, in input order: MRT files
//! (messages, state changes, RIB entries), raw message streams (standard input, hex),
//! and — through `flows` — packet captures. Also the one place a message is decoded,
//! with a known context or, when the session's OPENs were not seen, by trying the
//! candidate contexts in order.

use super::event::{Decoded, Event, Origin, RibRoute};
use super::framer::{Frame, Framer};
use super::mrt::{self, Entry, IndexedPeer, RibPrefix};
use super::Error;
use crate::bgp::wire::{
    check_header, decode_message, validate_open, AfiSafi, Context, DecodeError, Message, Safi,
};
use bytes::Bytes;
use std::io::{self, Read};

/// Where events go. `full` lets a consumer that can take no more (a closed pipe) stop
/// a source early; sources check it between records and frames.
pub trait Sink {
    fn event(&mut self, event: Event);

    fn full(&self) -> bool {
        false
    }
}

impl<F: FnMut(Event)> Sink for F {
    fn event(&mut self, event: Event) {
        self(event)
    }
}

/// What to assume about a session whose context is not in the input (hex, standard
/// input, a capture without the OPENs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    /// `Some(true)`: 4-octet AS numbers; `Some(false)`: 2-octet; `None`: try 4, then 2.
    pub four_octet_as: Option<bool>,
    pub extended_message: bool,
    /// ADD-PATH for IPv4 and IPv6 unicast. When the AS width is tried both ways, both
    /// ADD-PATH encodings are tried too.
    pub add_path: bool,
}

impl Options {
    /// The contexts to try, in order; the first is also the one framing uses.
    pub fn candidates(&self) -> Vec<Context> {
        let ctx = |four_octet_as: bool, add_path: bool| Context {
            four_octet_as,
            extended_message: self.extended_message,
            add_path_ipv4_unicast: add_path,
            add_path_ipv6_unicast: add_path,
        };
        match self.four_octet_as {
            Some(four) => vec![ctx(four, self.add_path)],
            None if self.add_path => vec![ctx(true, true), ctx(false, true)],
            None => vec![
                ctx(true, false),
                ctx(false, false),
                ctx(true, true),
                ctx(false, true),
            ],
        }
    }
}

/// An OPEN also gets the checks of RFC 4271 section 6.2 that need no configuration
/// (hold time 1 or 2 is 2/6, ...): a speaker would answer it with that NOTIFICATION,
/// so `decode` reports it as malformed like any other message error.
fn checked(result: Result<Message, DecodeError>) -> Result<Message, DecodeError> {
    match result {
        Ok(Message::Open(open)) => validate_open(&open).map(|()| Message::Open(open)),
        other => other,
    }
}

fn is_clean(result: &Result<Message, DecodeError>) -> bool {
    match result {
        Ok(Message::Update(u)) => u.errors.is_empty(),
        Ok(_) => true,
        Err(_) => false,
    }
}

/// Decodes one whole message with the first candidate context; an UPDATE that is not
/// clean with it is tried with the others, and the first clean result wins. Only
/// UPDATEs depend on the AS width and ADD-PATH, so only they are retried.
pub fn decode(bytes: Bytes, candidates: &[Context]) -> Decoded {
    let first = candidates.first().copied().unwrap_or_default();
    let result = checked(decode_message(&bytes, &first));
    if !is_clean(&result) && bytes.get(18) == Some(&2) {
        for ctx in candidates.iter().skip(1) {
            let retry = decode_message(&bytes, ctx);
            if is_clean(&retry) {
                return Decoded {
                    bytes,
                    ctx: *ctx,
                    guessed: true,
                    result: retry,
                };
            }
        }
    }
    Decoded {
        bytes,
        ctx: first,
        guessed: false,
        result,
    }
}

/// Turns a framed piece of a stream into its event.
pub fn frame_event(frame: Frame, origin: impl Fn(u64) -> Origin, candidates: &[Context]) -> Event {
    match frame {
        Frame::Message { offset, bytes } => Event::Message {
            origin: origin(offset),
            decoded: decode(bytes, candidates),
        },
        Frame::BadHeader {
            offset,
            bytes,
            error,
        } => Event::BadHeader {
            origin: origin(offset),
            bytes,
            error,
        },
        Frame::Skipped { offset, len } => Event::Skipped {
            origin: origin(offset),
            len,
        },
        Frame::Truncated { offset, bytes } => Event::Truncated {
            origin: origin(offset),
            bytes,
        },
    }
}

/// Raw BGP messages, back to back, as a peer sends them.
pub fn stream(mut reader: impl Read, options: &Options, sink: &mut dyn Sink) -> Result<(), Error> {
    let candidates = options.candidates();
    let framing = candidates[0];
    let mut framer = Framer::new(true);
    let mut frames = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut offset = 0u64;
    let origin = |offset| Origin::Stream { offset };
    while !sink.full() {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(Error::Read { offset, source }),
        };
        offset += n as u64;
        framer.push(&buf[..n]);
        framer.drain_all(&framing, &mut frames);
        for frame in frames.drain(..) {
            sink.event(frame_event(frame, origin, &candidates));
        }
    }
    framer.finish(&mut frames);
    for frame in frames.drain(..) {
        sink.event(frame_event(frame, origin, &candidates));
    }
    Ok(())
}

/// Parses `--hex` input: hex digits, with spaces, newlines, colons and a leading `0x`
/// ignored.
pub fn parse_hex(text: &str) -> Result<Vec<u8>, Error> {
    let text = text.trim();
    let text = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    let mut out = Vec::with_capacity(text.len() / 2);
    let mut high: Option<u8> = None;
    for (position, c) in text.char_indices() {
        if c.is_ascii_whitespace() || c == ':' {
            continue;
        }
        let Some(digit) = c.to_digit(16) else {
            return Err(Error::Hex {
                position,
                reason: "not a hex digit",
            });
        };
        match high.take() {
            None => high = Some(digit as u8),
            Some(h) => out.push((h << 4) | digit as u8),
        }
    }
    if high.is_some() {
        return Err(Error::Hex {
            position: text.len(),
            reason: "odd number of hex digits",
        });
    }
    Ok(out)
}

/// An MRT file: every record becomes one event, or one per RIB entry.
pub fn mrt(reader: impl Read, sink: &mut dyn Sink) {
    let mut peers: Vec<IndexedPeer> = Vec::new();
    for item in mrt::Reader::new(reader) {
        if sink.full() {
            return;
        }
        let record = match item {
            Ok(record) => record,
            Err(error) => {
                sink.event(Event::InputError { error });
                continue;
            }
        };
        let h = record.header;
        let origin = |peering, sent| Origin::Mrt {
            offset: record.offset,
            timestamp: h.timestamp,
            microseconds: h.microseconds,
            peering,
            sent,
        };
        let entry = match record.entry() {
            Ok(entry) => entry,
            Err(error) => {
                sink.event(Event::InputError { error });
                continue;
            }
        };
        match entry {
            Entry::Message(m) => recorded_message(
                m.message,
                m.ctx,
                origin(Some(m.peering), Some(m.local)),
                sink,
            ),
            Entry::StateChange(change) => sink.event(Event::StateChange {
                origin: origin(Some(change.peering), None),
                change,
            }),
            Entry::PeerIndexTable(table) => {
                peers.clone_from(&table.peers);
                sink.event(Event::PeerIndexTable {
                    origin: origin(None, None),
                    table,
                });
            }
            Entry::Rib(rib) => {
                for entry in rib.entries {
                    let route = RibRoute {
                        prefix: rib.prefix.clone(),
                        afi_safi: rib.afi_safi,
                        sequence: rib.sequence,
                        peer_index: Some(entry.peer_index),
                        peer_ip: None,
                        peer_as: None,
                        originated: entry.originated,
                        path_id: entry.path_id,
                        view: None,
                        status: None,
                    }
                    .with_peer(peers.get(usize::from(entry.peer_index)));
                    let attributes = mrt::attributes_as_update(&entry.attributes, rib.afi_safi)
                        .map(|m| decode(m, &[mrt::TABLE_DUMP_V2_CTX]));
                    sink.event(Event::Rib {
                        origin: origin(None, None),
                        route,
                        attributes,
                    });
                }
            }
            Entry::TableDump { entries, error } => {
                for entry in entries {
                    let afi_safi = if entry.prefix.addr().is_ipv6() {
                        AfiSafi::IPV6_UNICAST
                    } else {
                        AfiSafi {
                            safi: Safi::UNICAST,
                            ..AfiSafi::IPV4_UNICAST
                        }
                    };
                    let route = RibRoute {
                        prefix: RibPrefix::Ip(entry.prefix),
                        afi_safi,
                        sequence: u32::from(entry.sequence),
                        peer_index: None,
                        peer_ip: Some(entry.peer_ip),
                        peer_as: Some(entry.peer_as),
                        originated: entry.originated,
                        path_id: None,
                        view: Some(entry.view),
                        status: Some(entry.status),
                    };
                    let attributes = mrt::attributes_as_update(&entry.attributes, afi_safi)
                        .map(|m| decode(m, &[mrt::TABLE_DUMP_CTX]));
                    sink.event(Event::Rib {
                        origin: origin(None, None),
                        route,
                        attributes,
                    });
                }
                if let Some(reason) = error {
                    sink.event(Event::InputError {
                        error: Error::MrtRecord {
                            offset: record.offset,
                            mrt_type: h.mrt_type,
                            subtype: h.subtype,
                            reason,
                        },
                    });
                }
            }
            Entry::Unsupported => sink.event(Event::Unsupported {
                origin: origin(None, None),
                mrt_type: h.mrt_type,
                subtype: h.subtype,
                length: h.length,
            }),
        }
    }
}

/// The contexts to try for a recorded message: the record's own first. Should it not
/// decode cleanly, the other AS width and ADD-PATH are tried (and the output says so):
/// BIRD before RFC 8050 wrote ADD-PATH NLRI into plain MESSAGE records (mrtparse's
/// bird_bgp samples), and a collector may record the AS width of the peer rather than
/// of the session.
fn recorded_candidates(ctx: Context) -> Vec<Context> {
    let mut out = vec![ctx];
    for add_path in [ctx.add_path_ipv4_unicast, true] {
        for four_octet_as in [ctx.four_octet_as, !ctx.four_octet_as] {
            let c = Context {
                four_octet_as,
                add_path_ipv4_unicast: add_path,
                add_path_ipv6_unicast: add_path,
                ..ctx
            };
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// The message of a BGP4MP record: exactly one message, whose header length should
/// match what the record holds.
fn recorded_message(bytes: Bytes, ctx: Context, origin: Origin, sink: &mut dyn Sink) {
    match check_header(&bytes, &ctx) {
        Ok(Some(len)) if len <= bytes.len() => {
            let rest = (bytes.len() - len) as u64;
            let decoded = decode(bytes.slice(..len), &recorded_candidates(ctx));
            if rest == 0 {
                sink.event(Event::Message { origin, decoded });
            } else {
                sink.event(Event::Message {
                    origin: origin.clone(),
                    decoded,
                });
                sink.event(Event::Skipped { origin, len: rest });
            }
        }
        // Shorter than its header, or than the length its header gives.
        Ok(_) => sink.event(Event::Truncated { origin, bytes }),
        Err(error) => {
            let header = bytes.slice(..bytes.len().min(crate::bgp::wire::HEADER_LEN));
            sink.event(Event::BadHeader {
                origin,
                bytes: header,
                error,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_input_tolerates_separators() {
        assert_eq!(parse_hex("0xff 00:0a\n").unwrap(), vec![0xff, 0x00, 0x0a]);
        assert!(matches!(
            parse_hex("abc"),
            Err(Error::Hex {
                reason: "odd number of hex digits",
                ..
            })
        ));
        assert!(matches!(
            parse_hex("zz"),
            Err(Error::Hex { position: 0, .. })
        ));
    }

    #[test]
    fn recorded_messages_try_their_own_context_first() {
        let as4 = Context {
            four_octet_as: true,
            extended_message: true,
            ..Context::default()
        };
        let c = recorded_candidates(as4);
        assert_eq!(c.len(), 4);
        assert_eq!(c[0], as4);
        assert!(!c[1].four_octet_as && !c[1].add_path_ipv4_unicast);
        assert!(c[2].four_octet_as && c[2].add_path_ipv4_unicast && c[2].add_path_ipv6_unicast);
        assert!(c.iter().all(|c| c.extended_message));
        let add_path = Context {
            add_path_ipv4_unicast: true,
            add_path_ipv6_unicast: true,
            ..as4
        };
        assert_eq!(recorded_candidates(add_path).len(), 2);
    }

    #[test]
    fn candidates_follow_the_options() {
        let auto = Options::default().candidates();
        assert_eq!(auto.len(), 4);
        assert!(auto[0].four_octet_as && !auto[0].add_path_ipv4_unicast);
        assert!(!auto[1].four_octet_as);
        let two = Options {
            four_octet_as: Some(false),
            add_path: true,
            ..Options::default()
        }
        .candidates();
        assert_eq!(two.len(), 1);
        assert!(!two[0].four_octet_as && two[0].add_path_ipv6_unicast);
    }
}
