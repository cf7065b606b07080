//! Bytes on the wire between ranks: a writer and a reader of little-endian numbers, flags,
//! lengths and strings, which each protocol extends with its own messages' payloads
//! ([`super::protocol`], `crate::cluster::geometry::message`).

/// Why bytes could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("message ends early (wanted {wanted} more bytes at offset {at})")]
    Truncated { at: usize, wanted: usize },
    #[error("unknown message tag {0}")]
    UnknownTag(u8),
    #[error("{0} trailing bytes after the message")]
    Trailing(usize),
    #[error("a string is not UTF-8")]
    Utf8,
    #[error("bad flag byte {0}")]
    Flag(u8),
}

/// Appends values to a message.
#[derive(Debug, Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn f32(&mut self, v: f32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn flag(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    pub fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).expect("a message list longer than u32"));
    }
    pub fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }
}

/// Reads values from a message, each an error where the bytes run out or are not one.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.bytes.len() - self.at < n {
            return Err(DecodeError::Truncated {
                at: self.at,
                wanted: n,
            });
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    pub fn f32(&mut self) -> Result<f32, DecodeError> {
        Ok(f32::from_bits(self.u32()?))
    }
    pub fn f64(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_bits(self.u64()?))
    }
    pub fn flag(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(DecodeError::Flag(b)),
        }
    }
    /// A list length, checked against the bytes left (each item takes at least `min_item`
    /// bytes), so that a corrupt length cannot ask for a huge allocation.
    pub fn len(&mut self, min_item: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        let need = n.saturating_mul(min_item.max(1));
        if need > self.bytes.len() - self.at {
            return Err(DecodeError::Truncated {
                at: self.at,
                wanted: need,
            });
        }
        Ok(n)
    }
    pub fn str(&mut self) -> Result<String, DecodeError> {
        let n = self.len(1)?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| DecodeError::Utf8)
    }
    /// The end of the message: an error where bytes are left over.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            left => Err(DecodeError::Trailing(left)),
        }
    }
}
