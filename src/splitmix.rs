//! SplitMix64's mix and increment: the hash every random number in gasworks comes from (the
//! sampler's, the scene generators', the see-through test of a hit, the scheduler's victim
//! choice). It sits below every layer so that each can use it without importing another.
//!
//! The device code computes the same bits (`ptx/gasworks_common.h` carries the same
//! constants): changing either changes the sampler's numbers, and then its
//! [`SCHEME`](crate::render::sampler::SCHEME) must change too.

/// The SplitMix64 finalizer: a bijective 64-bit mix with good avalanche.
#[inline(always)]
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The golden-ratio increment of SplitMix64, used to space streams and dimensions.
pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
