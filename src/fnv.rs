//! FNV-1a, 64 bits: the project's stable hash. Its value depends on nothing but the bytes
//! (not on the Rust release, the process or the machine, as `std`'s hasher may), so it can be
//! written into files and compared across runs and machines: the scene content hash in
//! images and resume files ([`crate::scene::content_hash`]), the cluster fingerprint, the
//! integrity check of resume files. It catches edits and damage, not an adversary.

/// An FNV-1a state: copied, it hashes on from where it stands.
#[derive(Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    pub fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= x as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// A length-prefixed field, so that ("ab", "c") and ("a", "bc") differ.
    pub fn field(&mut self, b: &[u8]) {
        self.bytes(&(b.len() as u64).to_le_bytes());
        self.bytes(b);
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// The FNV-1a hash of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = Fnv::default();
    h.bytes(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_test_vectors() {
        // FNV-1a 64 of "", "a" and "foobar" (the reference values of the FNV authors).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
