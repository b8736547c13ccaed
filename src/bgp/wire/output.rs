//! [`Room`]: the encoder's output space for one message (or one field), made once at
//! the size the encoder computed beforehand, then written front to back with
//! fixed-width stores. Must not know any message format.
//!
//! Why not `BytesMut`'s `put_*`: each one is a call with its own growth check, and a
//! value whose length is only known once it is written has to be moved down after its
//! header; the profile of the encoder was those calls and `memmove`s, not the values.

use bytes::BytesMut;

use super::error::EncodeError;

/// Octets past the computed size that a [`Room`] is given, so that a prefix's whole
/// address can be stored in one write (an IPv6 prefix: its length octet, then 16).
pub(crate) const SLACK: usize = 16;

/// Appends `len` octets to `out`, written by `fill` into room made once. If `fill`
/// fails, or writes other than the `len` octets the caller's sizing pass computed (the
/// two passes disagree: a bug), `out` is left as it was and the error returned: never
/// corrupt octets on the wire.
pub(crate) fn append(
    out: &mut BytesMut,
    len: usize,
    fill: impl FnOnce(&mut Room<'_>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = out.len();
    out.resize(start + len + SLACK, 0);
    let mut room = Room::new(&mut out[start..]);
    let res = fill(&mut room).and_then(|()| match room.written() {
        Some(n) if n == len => Ok(()),
        written => Err(EncodeError::Sizing {
            computed: len,
            written,
        }),
    });
    out.truncate(if res.is_ok() { start + len } else { start });
    res
}

/// A cursor over room made for a message. A write past the end is dropped rather than
/// panicking and makes [`Room::written`] `None`: the caller, which computed the size,
/// turns that (or a count other than the size) into an error.
pub(crate) struct Room<'a> {
    buf: &'a mut [u8],
    at: usize,
    dropped: bool,
}

impl<'a> Room<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Room {
            buf,
            at: 0,
            dropped: false,
        }
    }

    /// Octets written, or `None` if the room was too small for some write.
    pub(crate) fn written(&self) -> Option<usize> {
        (!self.dropped).then_some(self.at)
    }

    #[inline]
    pub(crate) fn array<const N: usize>(&mut self, v: [u8; N]) {
        self.wide(v, N);
    }

    /// Stores all of `v` but advances by `used` only: the next write overwrites the
    /// rest. One store of a whole address instead of a copy of its first 1 to 16
    /// octets, whose length is only known at run time.
    #[inline]
    pub(crate) fn wide<const N: usize>(&mut self, v: [u8; N], used: usize) {
        if let Some(slot) = self
            .buf
            .get_mut(self.at..)
            .and_then(|rest| rest.first_chunk_mut::<N>())
        {
            *slot = v;
        } else {
            self.dropped = true;
        }
        self.at = self.at.saturating_add(used);
    }

    #[inline]
    pub(crate) fn u8(&mut self, v: u8) {
        self.array([v]);
    }

    #[inline]
    pub(crate) fn u16(&mut self, v: u16) {
        self.array(v.to_be_bytes());
    }

    #[inline]
    pub(crate) fn u32(&mut self, v: u32) {
        self.array(v.to_be_bytes());
    }

    #[inline]
    pub(crate) fn slice(&mut self, v: &[u8]) {
        let end = self.at.saturating_add(v.len());
        if let Some(slot) = self.buf.get_mut(self.at..end) {
            slot.copy_from_slice(v);
        } else {
            self.dropped = true;
        }
        self.at = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_front_to_back_and_wide_stores_are_overwritten() {
        let mut buf = [0u8; 12];
        let mut room = Room::new(&mut buf);
        room.u8(0x01);
        room.wide([0x0a, 0x0b, 0x0c, 0x0d], 2);
        room.u16(0x0203);
        room.u32(0x0405_0607);
        room.slice(&[0x08, 0x09]);
        assert_eq!(room.written(), Some(11));
        assert_eq!(
            buf,
            [0x01, 0x0a, 0x0b, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x00]
        );
    }

    #[test]
    fn a_write_past_the_end_is_dropped_and_reported() {
        let mut buf = [0u8; 3];
        let mut room = Room::new(&mut buf);
        room.u16(0x0102);
        assert_eq!(room.written(), Some(2));
        room.u32(0x0304_0506);
        assert_eq!(room.written(), None);
        assert_eq!(buf, [0x01, 0x02, 0x00]);

        // A wide store needs its whole width, even when it advances by less.
        let mut buf = [0u8; 3];
        let mut room = Room::new(&mut buf);
        room.wide([0x01, 0x02, 0x03, 0x04], 2);
        assert_eq!(room.written(), None);

        let mut buf = [0u8; 3];
        let mut room = Room::new(&mut buf);
        room.u8(0x01);
        room.slice(&[0x07; 3]);
        assert_eq!(room.written(), None);
        assert_eq!(buf, [0x01, 0x00, 0x00]);
    }

    #[test]
    fn append_keeps_exactly_the_sized_octets_or_nothing() {
        let mut out = BytesMut::from(&[0xee][..]);
        append(&mut out, 3, |room| {
            room.u8(1);
            room.u16(0x0203);
            Ok(())
        })
        .unwrap();
        assert_eq!(&out[..], &[0xee, 1, 2, 3]);

        // Fewer or more octets than sized: a Sizing error, `out` as it was.
        for (wrote, written) in [(2, Some(2)), (4, Some(4)), (3 + SLACK + 1, None)] {
            let err = append(&mut out, 3, |room| {
                room.slice(&vec![9; wrote]);
                Ok(())
            })
            .unwrap_err();
            assert_eq!(
                err,
                EncodeError::Sizing {
                    computed: 3,
                    written
                }
            );
            assert_eq!(&out[..], &[0xee, 1, 2, 3]);
        }

        // The fill's own error also leaves `out` as it was.
        let err = append(&mut out, 2, |room| {
            room.u16(7);
            Err(EncodeError::MessageTooLong { len: 1, max: 0 })
        })
        .unwrap_err();
        assert_eq!(err, EncodeError::MessageTooLong { len: 1, max: 0 });
        assert_eq!(&out[..], &[0xee, 1, 2, 3]);
    }
}
