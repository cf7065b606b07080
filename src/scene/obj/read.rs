//! Reading the OBJ file in line-aligned blocks, and the checks on its bytes that come before
//! any parsing: the text encoding, and cutting a block into chunks for the parallel parser.
//!
//! The file is streamed rather than read whole, so that its text is never all in memory at
//! once: only two blocks are (the one being parsed and the next, read meanwhile).

use std::io::{self, Read};

use super::parse::ends_in_backslash;

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

/// The longest line read: a face of millions of corners is shorter. Past this, the file is
/// not OBJ text (`/dev/zero`, one huge blob without line ends), and reading on for a line end
/// would only fill the memory.
pub const MAX_LINE_BYTES: usize = 256 << 20;

/// Formats that get mistaken for OBJ or MTL text, by their first bytes: what the file is, and
/// what to do about it.
const OTHER_FORMATS: &[(&[u8], &str, &str)] = &[
    (b"\x89PNG\r\n\x1a\n", "a PNG image", ""),
    (b"\xff\xd8\xff", "a JPEG image", ""),
    (b"\x76\x2f\x31\x01", "an OpenEXR image", ""),
    (b"#?RADIANCE", "a Radiance HDR image", ""),
    (b"glTF", "a binary glTF (.glb) model", ": export it as OBJ"),
    (b"Kaydara FBX Binary", "an FBX model", ": export it as OBJ"),
    (b"ply\n", "a PLY model", ": export it as OBJ"),
    (b"ply\r\n", "a PLY model", ": export it as OBJ"),
    (b"solid ", "an STL model", ": export it as OBJ"),
    (
        b"\x1f\x8b",
        "gzip-compressed",
        ": decompress it first (gunzip)",
    ),
    (
        b"\xfd7zXZ\x00",
        "xz-compressed",
        ": decompress it first (unxz)",
    ),
    (
        b"\x28\xb5\x2f\xfd",
        "zstd-compressed",
        ": decompress it first (unzstd)",
    ),
    (
        b"BZh",
        "bzip2-compressed",
        ": decompress it first (bunzip2)",
    ),
    (b"PK\x03\x04", "a zip archive", ": extract it first (unzip)"),
    (
        b"7z\xbc\xaf\x27\x1c",
        "a 7-Zip archive",
        ": extract it first",
    ),
    (b"\x7fELF", "a program (ELF)", ""),
];

/// Why the start of a file shows it is not OBJ or MTL text (`expected`: "OBJ" or "MTL"), as
/// the end of a sentence that begins "the file is": a known format by its first bytes, or
/// binary data by a NUL byte (which no text file holds; UTF-16 is told apart before).
pub fn not_text(bytes: &[u8], expected: &str) -> Option<String> {
    if let Some((_, what, advice)) = OTHER_FORMATS
        .iter()
        .find(|(magic, ..)| bytes.starts_with(magic))
    {
        return Some(format!("{what}, not Wavefront {expected} text{advice}"));
    }
    memchr::memchr(0, bytes)
        .map(|at| format!("binary data (a NUL byte at byte {at}), not Wavefront {expected} text"))
}

/// Hands out the file in blocks of about `block` bytes that end at a line end (the last block
/// ends where the file does). Blocks are owned buffers, so that the next one can be read while
/// the last one is parsed; spent buffers are handed back for reuse.
pub struct BlockReader<R: Read> {
    inner: R,
    /// The bytes after the last line end of the previous block: the start of the next.
    carry: Vec<u8>,
    block: usize,
    eof: bool,
    /// [`MAX_LINE_BYTES`] (smaller in tests).
    max_line: usize,
}

impl<R: Read> BlockReader<R> {
    pub fn new(inner: R, block: usize) -> BlockReader<R> {
        BlockReader {
            inner,
            carry: Vec::new(),
            block: block.max(1),
            eof: false,
            max_line: MAX_LINE_BYTES,
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
            if let Some(last) = last_cut(&buf) {
                self.carry.extend_from_slice(&buf[last + 1..]);
                buf.truncate(last + 1);
                return Ok(Some(buf));
            }
            // No line end: binary data, which the caller refuses by its NUL bytes, so there is
            // no point reading on for a line end that may never come.
            if memchr::memchr(0, &buf).is_some() {
                return Ok(Some(buf));
            }
            if buf.len() >= self.max_line {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "a line longer than {} MiB; OBJ lines are short: is it an OBJ file?",
                        self.max_line >> 20
                    ),
                ));
            }
            // A single line longer than a block: read on.
            self.block *= 2;
        }
    }
}

/// The last line end in `bytes` where a block may end: one whose line does not end in a
/// backslash, since a continued line is parsed with the next ([`super::parse::for_each_line`]).
fn last_cut(bytes: &[u8]) -> Option<usize> {
    let mut end = bytes.len();
    while let Some(at) = memchr::memrchr(b'\n', &bytes[..end]) {
        if !ends_in_backslash(&bytes[..at]) {
            return Some(at);
        }
        end = at;
    }
    None
}

/// The first line end in `bytes` at or after `from` where a chunk may end (as [`last_cut`]).
fn first_cut(bytes: &[u8], mut from: usize) -> Option<usize> {
    while let Some(i) = memchr::memchr(b'\n', &bytes[from..]) {
        let at = from + i;
        if !ends_in_backslash(&bytes[..at]) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Cuts a block into chunks of about `target` bytes, each ending at a line end.
pub fn split_chunks(block: &[u8], target: usize) -> Vec<&[u8]> {
    let mut chunks = Vec::with_capacity(block.len() / target.max(1) + 1);
    let mut rest = block;
    while rest.len() > target {
        match first_cut(rest, target) {
            Some(at) => {
                let (chunk, after) = rest.split_at(at + 1);
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
    fn endless_lines_stop_at_a_nul_byte_or_the_line_limit() {
        // Binary data without a line end comes back as a block, to be refused by its NUL.
        let zeros = std::io::repeat(0).take(1 << 30);
        let mut r = BlockReader::new(zeros, 1 << 10);
        assert_eq!(r.next_block(Vec::new()).unwrap().unwrap().len(), 1 << 10);
        // Text without a line end stops at the limit, not at the end of the memory.
        let letters = std::io::repeat(b'a').take(1 << 30);
        let mut r = BlockReader::new(letters, 1 << 10);
        r.max_line = 4 << 20;
        let e = r.next_block(Vec::new()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("a line longer than 4 MiB"), "{e}");
        // A long line under the limit is read whole.
        let mut text = vec![b'#'; 3 << 20];
        text.push(b'\n');
        let mut r = BlockReader::new(text.as_slice(), 1 << 10);
        r.max_line = 4 << 20;
        assert_eq!(r.next_block(Vec::new()).unwrap().unwrap(), text);
    }

    #[test]
    fn files_that_are_not_text_are_named() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        assert_eq!(
            not_text(png, "OBJ").as_deref(),
            Some("a PNG image, not Wavefront OBJ text")
        );
        assert_eq!(
            not_text(b"\x1f\x8b\x08\0", "MTL").as_deref(),
            Some("gzip-compressed, not Wavefront MTL text: decompress it first (gunzip)")
        );
        assert_eq!(
            not_text(b"v 0 0 0\n\0\0", "OBJ").as_deref(),
            Some("binary data (a NUL byte at byte 8), not Wavefront OBJ text")
        );
        assert_eq!(not_text(b"v 0 0 0\nf 1 1 1\n", "OBJ"), None);
        assert_eq!(not_text(b"# solid wall\nv 0 0 0\n", "OBJ"), None);
        assert_eq!(not_text(b"", "OBJ"), None);
    }

    /// A line that ends in a backslash goes on in the next, so no block or chunk ends there.
    #[test]
    fn blocks_and_chunks_never_end_inside_a_continued_line() {
        let text = b"v 1 \\\n2 3\nf 1 \\\r\n 1 \\\n1\n# c:\\\nv 0 0 0\n\\\n\\\nx\nlast \\";
        let continued = |piece: &[u8]| ends_in_backslash(&piece[..piece.len() - 1]);
        for size in 1..text.len() + 2 {
            let b = blocks(text, size);
            assert_eq!(b.concat(), text, "block {size}");
            for block in &b[..b.len() - 1] {
                assert!(
                    !continued(block),
                    "block {size}: {:?}",
                    String::from_utf8_lossy(block)
                );
            }
            let chunks = split_chunks(text, size);
            assert_eq!(chunks.concat(), text, "chunk {size}");
            for chunk in &chunks[..chunks.len() - 1] {
                assert_eq!(chunk.last(), Some(&b'\n'));
                assert!(
                    !continued(chunk),
                    "chunk {size}: {:?}",
                    String::from_utf8_lossy(chunk)
                );
            }
        }
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
