//! Reading the OBJ file in line-aligned blocks, and the checks on its bytes that come before
//! any parsing: the text encoding, and cutting a block into chunks for the parallel parser.
//!
//! The file is streamed rather than read whole, so that its text is never all in memory at
//! once: only two blocks are (the one being parsed and the next, read meanwhile).

use std::io::{self, Read};

/// The text encodings recognised (and refused) by their byte-order mark or their NUL bytes:
/// OBJ is ASCII/UTF-8, and without this check a UTF-16 file parses as "no triangles".
pub fn wide_encoding(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0xFF, 0xFE, 0, 0, ..] => return Some("UTF-32 (little-endian)"),
        [0, 0, 0xFE, 0xFF, ..] => return Some("UTF-32 (big-endian)"),
        [0xFF, 0xFE, ..] => return Some("UTF-16 (little-endian)"),
        [0xFE, 0xFF, ..] => return Some("UTF-16 (big-endian)"),
        _ => {}
    }
    // No byte-order mark: ASCII text in UTF-16 has a NUL in every other byte.
    let head = &bytes[..bytes.len().min(1024) & !1];
    if head.len() < 4 {
        return None;
    }
    let pairs = head.len() / 2;
    let even_nuls = head.iter().step_by(2).filter(|&&b| b == 0).count();
    let odd_nuls = head.iter().skip(1).step_by(2).filter(|&&b| b == 0).count();
    if odd_nuls * 2 > pairs && even_nuls * 8 < pairs {
        Some("UTF-16 (little-endian)")
    } else if even_nuls * 2 > pairs && odd_nuls * 8 < pairs {
        Some("UTF-16 (big-endian)")
    } else {
        None
    }
}

/// The UTF-8 byte-order mark, which some Windows tools write: skipped.
pub const UTF8_BOM: &[u8] = &[0xEF, 0xBB, 0xBF];

/// Hands out the file in blocks of about `block` bytes that end at a line end (the last block
/// ends where the file does). Blocks are owned buffers, so that the next one can be read while
/// the last one is parsed; spent buffers are handed back for reuse.
pub struct BlockReader<R: Read> {
    inner: R,
    /// The bytes after the last line end of the previous block: the start of the next.
    carry: Vec<u8>,
    block: usize,
    eof: bool,
}

impl<R: Read> BlockReader<R> {
    pub fn new(inner: R, block: usize) -> BlockReader<R> {
        BlockReader {
            inner,
            carry: Vec::new(),
            block: block.max(1),
            eof: false,
        }
    }

    /// The next block, in `buf` (whose contents are discarded), or `None` at the end.
    pub fn next_block(&mut self, mut buf: Vec<u8>) -> io::Result<Option<Vec<u8>>> {
        buf.clear();
        buf.append(&mut self.carry);
        loop {
            if !self.eof && buf.len() < self.block {
                let want = (self.block - buf.len()) as u64;
                let got = (&mut self.inner).take(want).read_to_end(&mut buf)?;
                if (got as u64) < want {
                    self.eof = true;
                }
            }
            if buf.is_empty() {
                return Ok(None);
            }
            if self.eof {
                return Ok(Some(buf));
            }
            if let Some(last) = memchr::memrchr(b'\n', &buf) {
                self.carry.extend_from_slice(&buf[last + 1..]);
                buf.truncate(last + 1);
                return Ok(Some(buf));
            }
            // A single line longer than a block: read on.
            self.block *= 2;
        }
    }
}

/// Cuts a block into chunks of about `target` bytes, each ending at a line end.
pub fn split_chunks(block: &[u8], target: usize) -> Vec<&[u8]> {
    let mut chunks = Vec::with_capacity(block.len() / target.max(1) + 1);
    let mut rest = block;
    while rest.len() > target {
        match memchr::memchr(b'\n', &rest[target..]) {
            Some(i) => {
                let (chunk, after) = rest.split_at(target + i + 1);
                chunks.push(chunk);
                rest = after;
            }
            None => break,
        }
    }
    if !rest.is_empty() {
        chunks.push(rest);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(text: &[u8], block: usize) -> Vec<Vec<u8>> {
        // A reader that hands out 3 bytes at a time, to exercise short reads.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = buf.len().min(3).min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut r = BlockReader::new(Trickle(text), block);
        let mut out = Vec::new();
        let mut spare = Vec::new();
        while let Some(b) = r.next_block(spare).unwrap() {
            out.push(b.clone());
            spare = b;
        }
        out
    }

    #[test]
    fn blocks_end_at_line_ends_and_cover_the_file() {
        let text = b"v 1 2 3\nf 1 2 3\na very long line indeed\nlast";
        for size in [1, 4, 8, 9, 16, 100] {
            let b = blocks(text, size);
            assert_eq!(b.concat(), text, "block {size}");
            for block in &b[..b.len() - 1] {
                assert_eq!(block.last(), Some(&b'\n'), "block {size}");
            }
        }
        assert!(blocks(b"", 8).is_empty());
    }

    #[test]
    fn chunks_end_at_line_ends_and_cover_the_block() {
        let block = b"aa\nbbbb\nc\n\nddddddd\ne";
        for target in [1, 2, 3, 5, 100] {
            let chunks = split_chunks(block, target);
            assert_eq!(chunks.concat(), block);
            for c in &chunks[..chunks.len() - 1] {
                assert_eq!(c.last(), Some(&b'\n'));
            }
        }
    }

    #[test]
    fn wide_encodings_are_recognised() {
        let utf16le: Vec<u8> = "v 0 0 0\n"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        let utf16be: Vec<u8> = "v 0 0 0\n"
            .encode_utf16()
            .flat_map(u16::to_be_bytes)
            .collect();
        assert_eq!(wide_encoding(&utf16le), Some("UTF-16 (little-endian)"));
        assert_eq!(wide_encoding(&utf16be), Some("UTF-16 (big-endian)"));
        assert_eq!(
            wide_encoding(&[0xFF, 0xFE, b'v', 0]),
            Some("UTF-16 (little-endian)")
        );
        assert_eq!(
            wide_encoding(&[0xFE, 0xFF, 0, b'v']),
            Some("UTF-16 (big-endian)")
        );
        assert_eq!(
            wide_encoding(&[0xFF, 0xFE, 0, 0, b'v', 0, 0, 0]),
            Some("UTF-32 (little-endian)")
        );
        assert_eq!(wide_encoding(b"v 0 0 0\nf 1 1 1\n"), None);
        assert_eq!(wide_encoding("# caf\u{e9}\n".as_bytes()), None);
        assert_eq!(wide_encoding(b""), None);
    }
}
