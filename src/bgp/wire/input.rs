//! Shared plumbing for the parsers: the nom result type they use and [`Src`], which turns
//! a sub-slice of the message being decoded into a `Bytes` without copying when the
//! message itself came in as `Bytes`. Must not know any message format.

use bytes::Bytes;

/// nom result with the zero-sized `()` error: parsers only need to know *that* input
/// ran out; *which* RFC error that is depends on the field, and the caller maps it.
pub(crate) type PResult<'a, T> = nom::IResult<&'a [u8], T, ()>;

/// Where the decoded message lives, for values kept as bytes (unknown attributes and
/// capabilities, NOTIFICATION data, raw NLRI).
#[derive(Clone, Copy)]
pub(crate) struct Src<'a> {
    whole: Option<&'a Bytes>,
}

impl<'a> Src<'a> {
    /// Values are copied out of a borrowed slice.
    pub(crate) fn copying() -> Src<'static> {
        Src { whole: None }
    }

    /// Values are reference-counted slices of `whole`.
    pub(crate) fn shared(whole: &'a Bytes) -> Src<'a> {
        Src { whole: Some(whole) }
    }

    /// `sub` as `Bytes`: a slice of the shared buffer when `sub` lies inside it (always
    /// the case for slices of the message being decoded), else a copy.
    pub(crate) fn bytes(&self, sub: &[u8]) -> Bytes {
        if let Some(whole) = self.whole {
            let base = whole.as_ptr() as usize;
            let start = sub.as_ptr() as usize;
            if let Some(off) = start.checked_sub(base) {
                if off <= whole.len() && sub.len() <= whole.len() - off {
                    return whole.slice(off..off + sub.len());
                }
            }
        }
        Bytes::copy_from_slice(sub)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_source_slices_without_copy() {
        let whole = Bytes::from_static(&[0x01, 0x02, 0x03, 0x04]);
        let src = Src::shared(&whole);
        let b = src.bytes(&whole[1..3]);
        assert_eq!(&b[..], &[0x02, 0x03]);
        assert_eq!(b.as_ptr(), whole[1..].as_ptr());
    }

    #[test]
    fn foreign_slice_is_copied() {
        let whole = Bytes::from_static(&[0x01, 0x02]);
        let other = [0x09, 0x08];
        let b = Src::shared(&whole).bytes(&other);
        assert_eq!(&b[..], &other);
        assert_eq!(&Src::copying().bytes(&other)[..], &other);
    }
}
