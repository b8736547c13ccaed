//! BGP message framing over a byte stream that may be damaged: a capture joined
//! mid-session, data lost by the capture, or a peer that sent garbage. The header check
//! is the codec's ([`check_header`]); this module adds what a live session does not
//! need — finding the next 16-octet marker again (RFC 4271 section 4.1) after a gap or a
//! framing error, and saying how many octets were skipped doing so.

use crate::bgp::wire::{check_header, Context, DecodeError, HEADER_LEN};
use bytes::{Buf, Bytes, BytesMut};

const MARKER: [u8; 16] = [0xff; 16];

/// What the framer finds in the stream, in order. Offsets count stream octets from the
/// start of the stream (gaps included).
#[derive(Debug)]
pub enum Frame {
    /// A whole message whose header passed [`check_header`].
    Message { offset: u64, bytes: Bytes },
    /// A header [`check_header`] rejects; `bytes` are the octets of the header that were
    /// there. The framer then looks for the next marker.
    BadHeader {
        offset: u64,
        bytes: Bytes,
        error: DecodeError,
    },
    /// Octets that were not part of any message: before the first marker of a stream
    /// joined mid-way, after a gap, or after a bad header.
    Skipped { offset: u64, len: u64 },
    /// The stream ended (or lost data) inside a message.
    Truncated { offset: u64, bytes: Bytes },
}

#[derive(Debug)]
pub struct Framer {
    buf: BytesMut,
    /// Stream offset of `buf[0]`.
    offset: u64,
    /// Whether `buf[0]` is believed to start a message. When not, the framer searches
    /// for a marker followed by a plausible length and type.
    synced: bool,
    /// Skipped octets not yet reported: (offset, length).
    skipped: Option<(u64, u64)>,
    /// Report a rejected header as skipped octets rather than as a bad header: for
    /// streams only guessed to be BGP (joined mid-way on a port other than 179).
    lenient: bool,
}

impl Framer {
    /// `at_message_start`: the stream is known to begin with a message (the capture saw
    /// the SYN, or the input is a file of messages). Otherwise the first marker is
    /// searched for and what precedes it reported as skipped.
    pub fn new(at_message_start: bool) -> Self {
        Framer {
            buf: BytesMut::new(),
            offset: 0,
            synced: at_message_start,
            skipped: None,
            lenient: false,
        }
    }

    /// Rejected headers become skipped octets (see the `lenient` field).
    pub fn lenient(mut self) -> Self {
        self.lenient = true;
        self
    }

    /// The stream offset just past the octets pushed so far.
    pub fn position(&self) -> u64 {
        self.offset + self.buf.len() as u64
    }

    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// `missing` stream octets were lost: a message in progress is truncated and the
    /// stream is searched for the next marker.
    pub fn gap(&mut self, missing: u64, out: &mut Vec<Frame>) {
        self.take_rest(out);
        self.offset += missing;
        self.synced = false;
    }

    /// Frames what is complete in the buffer, up to and including the next message, and
    /// returns whether it framed a message. A caller whose context changes with the
    /// messages (an OPEN negotiating extended messages) calls it again after decoding
    /// each one; others loop until it returns `false`.
    pub fn drain(&mut self, ctx: &Context, out: &mut Vec<Frame>) -> bool {
        loop {
            if !self.synced && !self.resync(ctx) {
                return false;
            }
            self.flush_skipped(out);
            match check_header(&self.buf, ctx) {
                Ok(None) => return false,
                Ok(Some(len)) if len > self.buf.len() => return false,
                Ok(Some(len)) => {
                    let bytes = self.buf.split_to(len).freeze();
                    out.push(Frame::Message {
                        offset: self.offset,
                        bytes,
                    });
                    self.offset += len as u64;
                    return true;
                }
                Err(error) => {
                    if !self.lenient {
                        let bytes =
                            Bytes::copy_from_slice(&self.buf[..self.buf.len().min(HEADER_LEN)]);
                        out.push(Frame::BadHeader {
                            offset: self.offset,
                            bytes,
                            error,
                        });
                    }
                    // Search again from the next octet: the marker may have been real
                    // and the length garbage, or the other way round.
                    self.skip(1);
                    self.synced = false;
                }
            }
        }
    }

    /// Frames everything complete in the buffer.
    pub fn drain_all(&mut self, ctx: &Context, out: &mut Vec<Frame>) {
        while self.drain(ctx, out) {}
    }

    /// The stream ended: report what is left.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        self.take_rest(out);
    }

    /// Reports the buffered octets as a truncated message (when they start one) or as
    /// skipped, and empties the buffer.
    fn take_rest(&mut self, out: &mut Vec<Frame>) {
        let len = self.buf.len();
        if len > 0 && self.synced {
            self.flush_skipped(out);
            out.push(Frame::Truncated {
                offset: self.offset,
                bytes: self.buf.split().freeze(),
            });
            self.offset += len as u64;
        } else {
            self.skip(len);
        }
        self.flush_skipped(out);
    }

    /// Drops octets up to the next plausible header. Returns whether one starts the
    /// buffer now; if not, more data is needed to decide.
    fn resync(&mut self, ctx: &Context) -> bool {
        let max_len = ctx.max_message_len();
        let mut i = 0;
        while i + MARKER.len() <= self.buf.len() {
            let Some(rel) = self.buf[i..].iter().position(|&b| b == 0xff) else {
                i = self.buf.len();
                break;
            };
            i += rel;
            if i + MARKER.len() > self.buf.len() {
                break;
            }
            if self.buf[i..i + MARKER.len()] != MARKER {
                i += 1;
                continue;
            }
            if i + HEADER_LEN > self.buf.len() {
                break;
            }
            let len = usize::from(u16::from_be_bytes([self.buf[i + 16], self.buf[i + 17]]));
            let kind = self.buf[i + 18];
            if (HEADER_LEN..=max_len).contains(&len) && (1..=5).contains(&kind) {
                self.skip(i);
                self.synced = true;
                return true;
            }
            i += 1;
        }
        self.skip(i);
        false
    }

    fn skip(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.buf.advance(n);
        match &mut self.skipped {
            Some((start, len)) if *start + *len == self.offset => *len += n as u64,
            _ => self.skipped = Some((self.offset, n as u64)),
        }
        self.offset += n as u64;
    }

    fn flush_skipped(&mut self, out: &mut Vec<Frame>) {
        if let Some((offset, len)) = self.skipped.take() {
            out.push(Frame::Skipped { offset, len });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keepalive() -> Vec<u8> {
        let mut m = vec![0xff; 16];
        m.extend([0x00, 0x13, 0x04]);
        m
    }

    fn kinds(frames: &[Frame]) -> Vec<String> {
        frames
            .iter()
            .map(|f| match f {
                Frame::Message { offset, bytes } => format!("msg@{offset}+{}", bytes.len()),
                Frame::BadHeader { offset, .. } => format!("bad@{offset}"),
                Frame::Skipped { offset, len } => format!("skip@{offset}+{len}"),
                Frame::Truncated { offset, bytes } => format!("trunc@{offset}+{}", bytes.len()),
            })
            .collect()
    }

    #[test]
    fn frames_messages_split_across_pushes() {
        let ctx = Context::default();
        let mut f = Framer::new(true);
        let mut out = Vec::new();
        let two: Vec<u8> = [keepalive(), keepalive()].concat();
        f.push(&two[..10]);
        f.drain_all(&ctx, &mut out);
        assert!(out.is_empty());
        f.push(&two[10..25]);
        f.drain_all(&ctx, &mut out);
        f.push(&two[25..]);
        f.drain_all(&ctx, &mut out);
        f.finish(&mut out);
        assert_eq!(kinds(&out), ["msg@0+19", "msg@19+19"]);
    }

    #[test]
    fn joins_mid_stream_at_the_first_plausible_marker() {
        let ctx = Context::default();
        let mut f = Framer::new(false);
        let mut out = Vec::new();
        // Tail of an earlier message, including a run of 0xff that is not a header
        // (length 0xffff is implausible), then two keepalives.
        let mut stream = vec![0x01, 0x02];
        stream.extend([0xff; 20]);
        stream.extend([0x00, 0x07]);
        stream.extend(keepalive());
        stream.extend(keepalive());
        f.push(&stream);
        f.drain_all(&ctx, &mut out);
        f.finish(&mut out);
        assert_eq!(kinds(&out), ["skip@0+24", "msg@24+19", "msg@43+19"]);
    }

    #[test]
    fn bad_header_is_reported_then_resynced() {
        let ctx = Context::default();
        let mut f = Framer::new(true);
        let mut out = Vec::new();
        let mut stream = keepalive();
        stream[18] = 0x09; // no such message type
        stream.extend(keepalive());
        f.push(&stream);
        f.drain_all(&ctx, &mut out);
        f.finish(&mut out);
        assert_eq!(kinds(&out), ["bad@0", "skip@0+19", "msg@19+19"]);
        let Frame::BadHeader { error, bytes, .. } = &out[0] else {
            panic!()
        };
        assert_eq!(bytes.len(), 19);
        let n = error.notification();
        assert_eq!((n.code, n.subcode), (1, 3));
    }

    #[test]
    fn a_gap_truncates_the_message_in_progress() {
        let ctx = Context::default();
        let mut f = Framer::new(true);
        let mut out = Vec::new();
        f.push(&keepalive()[..12]);
        f.drain_all(&ctx, &mut out);
        f.gap(30, &mut out);
        f.push(&[0xab; 5]);
        f.push(&keepalive());
        f.drain_all(&ctx, &mut out);
        f.push(&keepalive()[..4]);
        f.finish(&mut out);
        assert_eq!(
            kinds(&out),
            ["trunc@0+12", "skip@42+5", "msg@47+19", "trunc@66+4"]
        );
    }

    #[test]
    fn extended_length_only_with_the_capability() {
        let mut big = vec![0xff; 16];
        big.extend([0x13, 0x88, 0x02]); // 5000 octets
        big.extend([0x00, 0x00, 0x00, 0x00]);
        big.resize(5000, 0x00);
        let mut out = Vec::new();
        let mut f = Framer::new(true);
        f.push(&big);
        f.drain_all(
            &Context {
                extended_message: true,
                ..Context::default()
            },
            &mut out,
        );
        assert_eq!(kinds(&out), ["msg@0+5000"]);

        let mut out = Vec::new();
        let mut f = Framer::new(true);
        f.push(&big);
        f.drain_all(&Context::default(), &mut out);
        let Frame::BadHeader { error, .. } = &out[0] else {
            panic!("{:?}", kinds(&out))
        };
        let n = error.notification();
        assert_eq!((n.code, n.subcode, &n.data[..]), (1, 2, &[0x13, 0x88][..]));
    }
}
