//! Opening an input file for the readers: plain, gzip or bzip2, told apart by the first
//! octets rather than by the file name (collectors and archives rename freely).
//! Owns no parsing of what is inside.

use super::Error;
use bzip2::read::MultiBzDecoder;
use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The compression of an input, from its magic octets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// RFC 1952 magic 1f 8b.
    Gzip,
    /// "BZh" followed by the block size digit.
    Bzip2,
    None,
}

impl Compression {
    pub fn sniff(head: &[u8]) -> Compression {
        match head {
            [0x1f, 0x8b, ..] => Compression::Gzip,
            [b'B', b'Z', b'h', b'1'..=b'9', ..] => Compression::Bzip2,
            _ => Compression::None,
        }
    }
}

/// Opens `path` and returns a reader of its decompressed content.
pub fn open(path: &Path) -> Result<Box<dyn Read>, Error> {
    let file = File::open(path).map_err(|source| Error::Open {
        path: path.to_owned(),
        source,
    })?;
    decompress(BufReader::with_capacity(1 << 16, file)).map_err(|source| Error::Open {
        path: path.to_owned(),
        source,
    })
}

/// Wraps a buffered reader in the decompressor its first octets call for. Multi-member
/// gzip and multi-stream bzip2 (concatenated archives) are read to the end.
pub fn decompress<R: BufRead + 'static>(mut reader: R) -> std::io::Result<Box<dyn Read>> {
    let head = reader.fill_buf()?;
    Ok(match Compression::sniff(head) {
        Compression::Gzip => Box::new(BufReader::with_capacity(
            1 << 16,
            MultiGzDecoder::new(reader),
        )),
        Compression::Bzip2 => Box::new(BufReader::with_capacity(
            1 << 16,
            MultiBzDecoder::new(reader),
        )),
        Compression::None => Box::new(reader),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    #[test]
    fn sniffs_by_magic_not_name() {
        assert_eq!(Compression::sniff(&[0x1f, 0x8b, 0x08]), Compression::Gzip);
        assert_eq!(Compression::sniff(b"BZh91AY&SY"), Compression::Bzip2);
        assert_eq!(Compression::sniff(b"BZh0"), Compression::None);
        assert_eq!(
            Compression::sniff(&[0xd4, 0xc3, 0xb2, 0xa1]),
            Compression::None
        );
        assert_eq!(Compression::sniff(&[]), Compression::None);
    }

    #[test]
    fn reads_gzip_bzip2_and_plain_to_the_same_bytes() {
        let payload: Vec<u8> = (0..5000u32).flat_map(|i| i.to_be_bytes()).collect();

        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&payload).unwrap();
        let gz = gz.finish().unwrap();
        let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        bz.write_all(&payload).unwrap();
        let bz = bz.finish().unwrap();

        for input in [gz, bz, payload.clone()] {
            let mut out = Vec::new();
            decompress(Cursor::new(input))
                .unwrap()
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, payload);
        }
    }

    #[test]
    fn concatenated_gzip_members_are_all_read() {
        let mut both = Vec::new();
        for part in [&b"first "[..], &b"second"[..]] {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(part).unwrap();
            both.extend(gz.finish().unwrap());
        }
        let mut out = String::new();
        decompress(Cursor::new(both))
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "first second");
    }

    #[test]
    fn missing_file_is_an_open_error_naming_the_path() {
        let err = open(Path::new("/nonexistent/podcidr/x.mrt")).err().unwrap();
        assert!(matches!(err, Error::Open { .. }));
        assert!(err.to_string().contains("/nonexistent/podcidr/x.mrt"));
    }
}
