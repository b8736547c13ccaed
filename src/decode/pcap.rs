//! Capture file containers: classic pcap (both byte orders, microsecond and nanosecond
//! timestamps) and pcapng (section header, interface description, enhanced, simple and
//! obsolete packet blocks; per-interface link type and timestamp resolution).
//!
//! Yields link-layer frames with their link type and timestamp; what is inside a frame
//! is `packet`'s business. Never trusts a length field for an allocation.

use super::cursor::Cursor;
use super::Error;
use std::io::{self, Read};

/// The largest frame or block this reader accepts. libpcap's own maximum snapshot
/// length is 262144; pcapng blocks carry a few options more.
const MAX_FRAME: u32 = 1 << 20;

/// pcapng block types (draft-ietf-opsawg-pcapng section 4 and 10.1).
mod block {
    pub const SECTION_HEADER: u32 = 0x0a0d_0d0a;
    pub const INTERFACE_DESCRIPTION: u32 = 0x0000_0001;
    pub const OBSOLETE_PACKET: u32 = 0x0000_0002;
    pub const SIMPLE_PACKET: u32 = 0x0000_0003;
    pub const ENHANCED_PACKET: u32 = 0x0000_0006;
    pub const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
}

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// 1-based position in the file, counting packets only (as Wireshark numbers them).
    pub number: u64,
    /// LINKTYPE_ value (tcpdump.org link-layer header types).
    pub linktype: u16,
    pub seconds: u64,
    pub nanos: u32,
    /// Length on the wire; more than `data.len()` when the capture was cut short.
    pub original_len: u32,
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, Copy)]
struct Interface {
    linktype: u16,
    /// Timestamp units per second.
    units_per_second: u64,
    offset_seconds: i64,
}

#[derive(Debug)]
enum Format {
    Classic {
        big_endian: bool,
        nanos: bool,
        linktype: u16,
    },
    Ng {
        big_endian: bool,
        interfaces: Vec<Interface>,
    },
}

/// Reads frames from a pcap or pcapng stream. A truncated or malformed container ends
/// the iteration after one error.
pub struct Reader<R> {
    inner: R,
    format: Format,
    offset: u64,
    frames: u64,
    finished: bool,
    /// The type octets of the first pcapng block, read by [`Reader::new`] to tell the
    /// format.
    first_block_type: Option<[u8; 4]>,
}

impl<R: Read> Reader<R> {
    /// Reads the file header and tells the format from its magic number.
    pub fn new(mut inner: R) -> Result<Self, Error> {
        let mut magic = [0u8; 4];
        let got = read_full(&mut inner, &mut magic)
            .map_err(|source| Error::Read { offset: 0, source })?;
        let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let format = match magic {
            [0xd4, 0xc3, 0xb2, 0xa1] => Some((false, false)),
            [0xa1, 0xb2, 0xc3, 0xd4] => Some((true, false)),
            [0x4d, 0x3c, 0xb2, 0xa1] => Some((false, true)),
            [0xa1, 0xb2, 0x3c, 0x4d] => Some((true, true)),
            _ => None,
        };
        let mut reader = Reader {
            inner,
            format: Format::Ng {
                big_endian: false,
                interfaces: Vec::new(),
            },
            offset: 0,
            frames: 0,
            finished: false,
            first_block_type: None,
        };
        if got < 4 {
            return Err(Error::PcapMagic {
                magic: hex(&magic[..got]),
            });
        }
        if let Some((big_endian, nanos)) = format {
            let mut rest = [0u8; 20];
            let got = read_full(&mut reader.inner, &mut rest)
                .map_err(|source| Error::Read { offset: 4, source })?;
            if got < rest.len() {
                return Err(Error::PcapTruncated {
                    offset: 4 + got as u64,
                    reason: "file header".into(),
                });
            }
            let raw = [rest[16], rest[17], rest[18], rest[19]];
            let network = if big_endian {
                u32::from_be_bytes(raw)
            } else {
                u32::from_le_bytes(raw)
            };
            // The upper 16 bits hold FCS information (pcap spec section 4.1 "LinkType").
            reader.format = Format::Classic {
                big_endian,
                nanos,
                linktype: (network & 0xffff) as u16,
            };
            reader.offset = 24;
            Ok(reader)
        } else if u32::from_be_bytes(magic) == block::SECTION_HEADER {
            // The section header block itself is parsed by the first `next()`.
            reader.offset = 4;
            reader.first_block_type = Some(magic);
            Ok(reader)
        } else {
            Err(Error::PcapMagic { magic: hex(&magic) })
        }
    }

    fn read_exact_at(&mut self, buf: &mut [u8], what: &str) -> Result<bool, Error> {
        let offset = self.offset;
        let got =
            read_full(&mut self.inner, buf).map_err(|source| Error::Read { offset, source })?;
        self.offset += got as u64;
        if got == 0 {
            return Ok(false);
        }
        if got < buf.len() {
            return Err(Error::PcapTruncated {
                offset,
                reason: format!("{what}: {got} of {} octets", buf.len()),
            });
        }
        Ok(true)
    }

    fn read_vec(&mut self, len: u32, what: &str) -> Result<Vec<u8>, Error> {
        let offset = self.offset;
        let mut data = Vec::with_capacity(len as usize);
        (&mut self.inner)
            .take(u64::from(len))
            .read_to_end(&mut data)
            .map_err(|source| Error::Read { offset, source })?;
        self.offset += data.len() as u64;
        if data.len() < len as usize {
            return Err(Error::PcapTruncated {
                offset,
                reason: format!("{what}: {} of {len} octets", data.len()),
            });
        }
        Ok(data)
    }

    fn next_classic(
        &mut self,
        big_endian: bool,
        nanos: bool,
        linktype: u16,
    ) -> Result<Option<Frame>, Error> {
        let at = self.offset;
        let mut header = [0u8; 16];
        if !self.read_exact_at(&mut header, "packet record header")? {
            return Ok(None);
        }
        let word = |i: usize| {
            let raw = [header[i], header[i + 1], header[i + 2], header[i + 3]];
            if big_endian {
                u32::from_be_bytes(raw)
            } else {
                u32::from_le_bytes(raw)
            }
        };
        let (seconds, fraction, captured, original_len) = (word(0), word(4), word(8), word(12));
        if captured > MAX_FRAME {
            return Err(Error::PcapBlock {
                offset: at,
                reason: format!("captured length {captured} is implausible"),
            });
        }
        let data = self.read_vec(captured, "packet data")?;
        self.frames += 1;
        let nanos = if nanos {
            fraction
        } else {
            fraction.saturating_mul(1000)
        };
        Ok(Some(Frame {
            number: self.frames,
            linktype,
            seconds: u64::from(seconds),
            nanos,
            original_len,
            data,
        }))
    }

    fn next_ng(&mut self) -> Result<Option<Frame>, Error> {
        loop {
            let mut head = [0u8; 8];
            let (at, block_type_raw, total_raw) = if let Some(first) = self.first_block_type.take()
            {
                // The section header's type reads the same in both byte orders.
                let mut len = [0u8; 4];
                if !self.read_exact_at(&mut len, "block header")? {
                    return Err(Error::PcapTruncated {
                        offset: 4,
                        reason: "section header block".into(),
                    });
                }
                (0, first, len)
            } else {
                let at = self.offset;
                if !self.read_exact_at(&mut head, "block header")? {
                    return Ok(None);
                }
                (
                    at,
                    [head[0], head[1], head[2], head[3]],
                    [head[4], head[5], head[6], head[7]],
                )
            };
            let Format::Ng { big_endian, .. } = &self.format else {
                return Ok(None);
            };
            let mut big_endian = *big_endian;
            let block_type = if big_endian {
                u32::from_be_bytes(block_type_raw)
            } else {
                u32::from_le_bytes(block_type_raw)
            };
            if u32::from_be_bytes(block_type_raw) == block::SECTION_HEADER {
                // A new section may switch byte order: read the byte-order magic first.
                let mut bom = [0u8; 4];
                if !self.read_exact_at(&mut bom, "section byte-order magic")? {
                    return Err(Error::PcapTruncated {
                        offset: self.offset,
                        reason: "section header block".into(),
                    });
                }
                big_endian = match (u32::from_be_bytes(bom), u32::from_le_bytes(bom)) {
                    (block::BYTE_ORDER_MAGIC, _) => true,
                    (_, block::BYTE_ORDER_MAGIC) => false,
                    _ => {
                        return Err(Error::PcapBlock {
                            offset: at,
                            reason: "section header without byte-order magic".into(),
                        })
                    }
                };
                let total = if big_endian {
                    u32::from_be_bytes(total_raw)
                } else {
                    u32::from_le_bytes(total_raw)
                };
                if !(28..=MAX_FRAME).contains(&total) || total % 4 != 0 {
                    return Err(Error::PcapBlock {
                        offset: at,
                        reason: format!("section header length {total}"),
                    });
                }
                // Version, section length and options are not needed.
                self.read_vec(total - 12, "section header block")?;
                self.format = Format::Ng {
                    big_endian,
                    interfaces: Vec::new(),
                };
                continue;
            }
            let total = if big_endian {
                u32::from_be_bytes(total_raw)
            } else {
                u32::from_le_bytes(total_raw)
            };
            if !(12..=MAX_FRAME).contains(&total) || total % 4 != 0 {
                return Err(Error::PcapBlock {
                    offset: at,
                    reason: format!("block type {block_type:#x} length {total}"),
                });
            }
            let body = self.read_vec(total - 8, "block")?;
            // The trailing copy of the length is part of `body`; the content is before it.
            let content = &body[..body.len() - 4];
            let mut c = Cursor::new(content);
            let u32r = |c: &mut Cursor| if big_endian { c.u32() } else { c.u32_le() };
            let u16r = |c: &mut Cursor| if big_endian { c.u16() } else { c.u16_le() };
            let bad = |what: &str| Error::PcapBlock {
                offset: at,
                reason: format!("block type {block_type:#x}: {what}"),
            };
            match block_type {
                block::INTERFACE_DESCRIPTION => {
                    let linktype =
                        u16r(&mut c).ok_or_else(|| bad("short interface description"))?;
                    c.skip(6)
                        .ok_or_else(|| bad("short interface description"))?;
                    let iface = interface_options(&mut c, big_endian, linktype);
                    if let Format::Ng { interfaces, .. } = &mut self.format {
                        interfaces.push(iface);
                    }
                }
                block::ENHANCED_PACKET | block::OBSOLETE_PACKET => {
                    let iface_id = if block_type == block::ENHANCED_PACKET {
                        u32r(&mut c)
                    } else {
                        let id = u16r(&mut c).map(u32::from);
                        c.skip(2);
                        id
                    }
                    .ok_or_else(|| bad("short packet block"))?;
                    let high = u32r(&mut c).ok_or_else(|| bad("short packet block"))?;
                    let low = u32r(&mut c).ok_or_else(|| bad("short packet block"))?;
                    let captured = u32r(&mut c).ok_or_else(|| bad("short packet block"))?;
                    let original_len = u32r(&mut c).ok_or_else(|| bad("short packet block"))?;
                    let data = c
                        .take(captured as usize)
                        .ok_or_else(|| bad("captured length past the block"))?;
                    let iface = self
                        .interface(iface_id)
                        .ok_or_else(|| bad("unknown interface id"))?;
                    let (seconds, nanos) =
                        iface.timestamp((u64::from(high) << 32) | u64::from(low));
                    self.frames += 1;
                    return Ok(Some(Frame {
                        number: self.frames,
                        linktype: iface.linktype,
                        seconds,
                        nanos,
                        original_len,
                        data: data.to_vec(),
                    }));
                }
                block::SIMPLE_PACKET => {
                    let original_len =
                        u32r(&mut c).ok_or_else(|| bad("short simple packet block"))?;
                    let data = &c.rest()[..c.remaining().min(original_len as usize)];
                    let iface = self.interface(0).ok_or_else(|| bad("no interface"))?;
                    self.frames += 1;
                    return Ok(Some(Frame {
                        number: self.frames,
                        linktype: iface.linktype,
                        seconds: 0,
                        nanos: 0,
                        original_len,
                        data: data.to_vec(),
                    }));
                }
                _ => {}
            }
        }
    }

    fn interface(&self, id: u32) -> Option<Interface> {
        match &self.format {
            Format::Ng { interfaces, .. } => interfaces.get(id as usize).copied(),
            Format::Classic { .. } => None,
        }
    }
}

/// The options of an interface description block that matter for timestamps:
/// `if_tsresol` (code 9) and `if_tsoffset` (code 14).
fn interface_options(c: &mut Cursor, big_endian: bool, linktype: u16) -> Interface {
    let mut iface = Interface {
        linktype,
        units_per_second: 1_000_000,
        offset_seconds: 0,
    };
    loop {
        let code = if big_endian { c.u16() } else { c.u16_le() };
        let len = if big_endian { c.u16() } else { c.u16_le() };
        let (Some(code), Some(len)) = (code, len) else {
            break;
        };
        let Some(value) = c.take(usize::from(len)) else {
            break;
        };
        c.skip(usize::from(len).next_multiple_of(4) - usize::from(len));
        match (code, value) {
            (0, _) => break,
            (9, &[resolution]) => {
                let exp = u32::from(resolution & 0x7f);
                let units = if resolution & 0x80 != 0 {
                    2u64.checked_pow(exp)
                } else {
                    10u64.checked_pow(exp)
                };
                if let Some(units) = units.filter(|u| *u > 0) {
                    iface.units_per_second = units;
                }
            }
            (14, v) if v.len() == 8 => {
                let raw: [u8; 8] = [v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]];
                iface.offset_seconds = if big_endian {
                    i64::from_be_bytes(raw)
                } else {
                    i64::from_le_bytes(raw)
                };
            }
            _ => {}
        }
    }
    iface
}

impl Interface {
    fn timestamp(&self, units: u64) -> (u64, u32) {
        let seconds = units / self.units_per_second;
        let fraction = units % self.units_per_second;
        let nanos =
            (u128::from(fraction) * 1_000_000_000 / u128::from(self.units_per_second)) as u32;
        (seconds.saturating_add_signed(self.offset_seconds), nanos)
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = Result<Frame, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let result = match self.format {
            Format::Classic {
                big_endian,
                nanos,
                linktype,
            } => self.next_classic(big_endian, nanos, linktype),
            Format::Ng { .. } => self.next_ng(),
        };
        match result {
            Ok(Some(frame)) => Some(Ok(frame)),
            Ok(None) => {
                self.finished = true;
                None
            }
            Err(e) => {
                self.finished = true;
                Some(Err(e))
            }
        }
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classic(
        big_endian: bool,
        nanos: bool,
        linktype: u32,
        frames: &[(u32, u32, &[u8])],
    ) -> Vec<u8> {
        let w32 = |v: u32| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut out = w32(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }).to_vec();
        out.extend(w16(2));
        out.extend(w16(4));
        out.extend(w32(0));
        out.extend(w32(0));
        out.extend(w32(65535));
        out.extend(w32(linktype));
        for (sec, frac, data) in frames {
            out.extend(w32(*sec));
            out.extend(w32(*frac));
            out.extend(w32(data.len() as u32));
            out.extend(w32(data.len() as u32 + 10));
            out.extend(*data);
        }
        out
    }

    #[test]
    fn classic_in_both_byte_orders_and_resolutions() {
        for (big_endian, nanos) in [(false, false), (true, false), (false, true), (true, true)] {
            let file = classic(
                big_endian,
                nanos,
                0x1000_0071,
                &[(7, 5, b"abc"), (8, 6, b"")],
            );
            let frames: Vec<_> = Reader::new(&file[..])
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(frames.len(), 2);
            let f = &frames[0];
            assert_eq!(
                (f.number, f.linktype, f.seconds, f.original_len),
                (1, 113, 7, 13)
            );
            assert_eq!(f.nanos, if nanos { 5 } else { 5000 });
            assert_eq!(f.data, b"abc");
            assert_eq!(frames[1].number, 2);
        }
    }

    #[test]
    fn truncated_record_is_one_error() {
        let mut file = classic(false, false, 1, &[(1, 0, b"abcdef")]);
        file.truncate(file.len() - 2);
        let out: Vec<_> = Reader::new(&file[..]).unwrap().collect();
        assert_eq!(out.len(), 1);
        assert!(
            matches!(&out[0], Err(Error::PcapTruncated { .. })),
            "{out:?}"
        );
    }

    #[test]
    fn unknown_magic_is_refused() {
        assert!(matches!(
            Reader::new(&b"MRT?....."[..]),
            Err(Error::PcapMagic { .. })
        ));
        assert!(matches!(
            Reader::new(&b"ab"[..]),
            Err(Error::PcapMagic { .. })
        ));
    }

    fn block(block_type: u32, body: &[u8]) -> Vec<u8> {
        let padded = body.len().next_multiple_of(4);
        let total = (12 + padded) as u32;
        let mut out = block_type.to_le_bytes().to_vec();
        out.extend(total.to_le_bytes());
        out.extend(body);
        out.resize(8 + padded, 0);
        out.extend(total.to_le_bytes());
        out
    }

    #[test]
    fn pcapng_with_two_interfaces_and_a_timestamp_resolution() {
        let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
        shb.extend([1, 0, 0, 0]); // version 1.0
        shb.extend(u64::MAX.to_le_bytes()); // section length unknown
        let mut file = block(block::SECTION_HEADER, &shb);
        // Interface 0: Ethernet, default microseconds.
        file.extend(block(
            block::INTERFACE_DESCRIPTION,
            &[1, 0, 0, 0, 0, 0, 0, 0],
        ));
        // Interface 1: SLL2, if_tsresol = 9 (nanoseconds), end of options.
        let mut idb = vec![0x14, 0x01, 0, 0, 0, 0, 0, 0];
        idb.extend([9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
        file.extend(block(block::INTERFACE_DESCRIPTION, &idb));
        // A name resolution block to be skipped.
        file.extend(block(4, &[0, 0, 0, 0]));
        let epb = |iface: u32, ts: u64, data: &[u8]| {
            let mut b = iface.to_le_bytes().to_vec();
            b.extend(((ts >> 32) as u32).to_le_bytes());
            b.extend((ts as u32).to_le_bytes());
            b.extend((data.len() as u32).to_le_bytes());
            b.extend((data.len() as u32).to_le_bytes());
            b.extend(data);
            block(block::ENHANCED_PACKET, &b)
        };
        file.extend(epb(1, 1_500_000_000_123_456_789, b"nano"));
        file.extend(epb(0, 1_500_000_000_654_321, b"micro"));
        let mut spb = 3u32.to_le_bytes().to_vec();
        spb.extend(b"spb");
        file.extend(block(block::SIMPLE_PACKET, &spb));
        let frames: Vec<_> = Reader::new(&file[..])
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(frames.len(), 3);
        assert_eq!(
            (frames[0].linktype, frames[0].seconds, frames[0].nanos),
            (276, 1_500_000_000, 123_456_789)
        );
        assert_eq!(frames[0].data, b"nano");
        assert_eq!(
            (frames[1].linktype, frames[1].seconds, frames[1].nanos),
            (1, 1_500_000_000, 654_321_000)
        );
        assert_eq!((frames[2].number, frames[2].linktype), (3, 1));
        assert_eq!(frames[2].data, b"spb");
    }

    #[test]
    fn pcapng_block_with_an_impossible_length() {
        let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
        shb.extend([1, 0, 0, 0]);
        shb.extend(u64::MAX.to_le_bytes());
        let mut file = block(block::SECTION_HEADER, &shb);
        file.extend(6u32.to_le_bytes());
        file.extend(10u32.to_le_bytes()); // not a multiple of 4, below 12
        let out: Vec<_> = Reader::new(&file[..]).unwrap().collect();
        assert!(matches!(out[..], [Err(Error::PcapBlock { .. })]), "{out:?}");
    }
}
