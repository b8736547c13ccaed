//! A bounds-checked reader over a byte slice for the container formats (MRT, pcap, link
//! and transport headers). Every read returns `None` instead of panicking when the
//! input is short; callers turn that into their own error with context. BGP messages
//! themselves are never parsed here (that is `bgp::wire`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The unread rest, without consuming it.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    pub fn skip(&mut self, n: usize) -> Option<()> {
        self.take(n).map(|_| ())
    }

    pub fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.array::<1>().map(|[b]| b)
    }

    pub fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_be_bytes)
    }

    pub fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_be_bytes)
    }

    pub fn u16_le(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }

    pub fn u32_le(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    pub fn ipv4(&mut self) -> Option<Ipv4Addr> {
        self.array::<4>().map(Ipv4Addr::from)
    }

    pub fn ipv6(&mut self) -> Option<Ipv6Addr> {
        self.array::<16>().map(Ipv6Addr::from)
    }

    /// An IPv4 or IPv6 address, as `v6` says.
    pub fn ip(&mut self, v6: bool) -> Option<IpAddr> {
        if v6 {
            self.ipv6().map(IpAddr::V6)
        } else {
            self.ipv4().map(IpAddr::V4)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_and_little_endian_and_stops_at_the_end() {
        let mut c = Cursor::new(&[0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07]);
        assert_eq!(c.u16(), Some(0x0102));
        assert_eq!(c.u16_le(), Some(0x0403));
        assert_eq!(c.remaining(), 3);
        assert_eq!(c.u32(), None, "a short read consumes nothing");
        assert_eq!(c.position(), 4);
        assert_eq!(c.take(3), Some(&[0x05, 0x06, 0x07][..]));
        assert!(c.is_empty());
        assert_eq!(c.u8(), None);
    }

    #[test]
    fn take_never_overflows() {
        let mut c = Cursor::new(&[0xff; 4]);
        c.skip(2).unwrap();
        assert_eq!(c.take(usize::MAX), None);
        assert_eq!(c.remaining(), 2);
    }

    #[test]
    fn addresses() {
        let mut c = Cursor::new(&[
            0xc0, 0x00, 0x02, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
        ]);
        assert_eq!(c.ip(false), Some("192.0.2.1".parse().unwrap()));
        assert_eq!(c.ip(true), Some("2001:db8::1".parse().unwrap()));
    }
}
