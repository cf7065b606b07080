//! Random numbers keyed on (pixel, sample index, samples per pixel, seed).
//!
//! The numbers a sample uses depend on nothing else: not the thread, not the tile, not the
//! order in which tiles run, not the device. That is what makes a render bit-identical under
//! any schedule, and lets a tile render the same on the CPU and the GPU. A render draws them
//! from [`Sampler`]: Owen-scrambled Sobol' points, hashed rather than tabled, so that they
//! are simple to write again in CUDA (`ptx/gasworks_common.h` carries the same constants).
//! [`RandomStream`] is a plain hash per draw, for numbers that must be independent.

use crate::splitmix::{mix64, GOLDEN_GAMMA};

/// The name of the numbers [`Sampler`] draws: a cluster's ranks compare it (in their
/// fingerprint), so that ranks of builds that draw other numbers refuse to share a frame.
/// Change it whenever a change to this file, [`crate::splitmix`] or `ptx/gasworks_common.h`
/// changes a number.
pub const SCHEME: &str =
    "Z-order padded Owen-scrambled Sobol' (Burley 2020, Ahmed-Wonka 2020), slots 1D/2D, regions 2^24, v2";

/// The random numbers of one sample of one pixel: Owen-scrambled Sobol' points, padded, with
/// the pixels in Z order so that neighbours share out one sequence (blue-noise error).
///
/// Each draw ([`Sampler::next_1d`], [`Sampler::next_2d`]) is a *slot*. Within a slot, every
/// sample of the frame has an index into one Sobol' sequence (the first dimension, van der
/// Corput, for a 1D slot; the first two for a 2D slot): the pixel's Z-order (Morton) index,
/// times the render's samples per pixel rounded up to a power of two, plus the sample's. The
/// index goes through a slot-specific nested uniform shuffle, and the point through a
/// slot-specific Owen scramble (Burley, "Practical Hash-based Owen Scrambling", JCGT 2020).
///
/// Both keep aligned blocks of indices together, so:
/// - the first 2^k samples of a pixel (or any aligned block of them, as a later pass renders
///   it) cover every slot's square in 2^k strata of every elementary shape (a (0, k, 2)-net),
///   where independent numbers clump: less noise for the same samples;
/// - the pixels of an aligned 2x2, 4x4, ... square, whose Morton indices are one aligned
///   block, draw their samples from one bigger net together, so their errors offset one
///   another: what is left of the noise is at high spatial frequencies (blue noise), which
///   the eye and any reconstruction or denoising filter average away. This is Ahmed and
///   Wonka's "screen-space blue-noise diffusion" (SIGGRAPH Asia 2020), pbrt-v4's
///   `ZSobolSampler`, with hashed nested scrambles in place of its tabled digit permutations.
///
/// Slots are decorrelated by their own shuffles and scrambles (pbrt-v4's samplers do the
/// same), and every number is still uniform on [0, 1): the estimator is as unbiased as with
/// independent numbers.
///
/// A float keeps 24 bits of a fraction, so the sequence is cut into regions of 2^24 indices
/// ([`REGION_BITS`]), each with its own shuffles and scrambles: pixels in far regions of a
/// large frame (2^18 pixels apart at 64 spp) are independent rather than sharing numbers.
///
/// The numbers depend only on (pixel, sample, samples per pixel, seed) and the slot, never
/// on the schedule, and `ptx/gasworks_common.h` computes the same bits on the GPU.
#[derive(Clone, Copy, Debug)]
pub struct Sampler {
    /// The region's and seed's hash: the shuffles and scrambles derive from it and the slot.
    region_key: u64,
    /// The sample's index in its region, bit-reversed: the form the index shuffle takes it in.
    index_reversed: u32,
    slot: u64,
}

/// Index bits per scramble region (see [`Sampler`]): the first dimension's float takes 24
/// bits, so a region holds exactly the indices that can all draw different numbers.
pub const REGION_BITS: u32 = 24;

/// The index bits a pixel's samples take: `spp` rounded up to a power of two, as a power
/// (so the samples of a pixel are one aligned block of the sequence).
#[inline]
pub const fn sample_bits(spp: u32) -> u32 {
    if spp <= 1 {
        0
    } else {
        32 - (spp - 1).leading_zeros()
    }
}

/// The Z-order (Morton) index of pixel (x, y): x's bits at the even positions, y's at the
/// odd ones, so every aligned 2^k x 2^k square of pixels is one aligned block of 4^k indices.
#[inline(always)]
pub const fn morton2(x: u32, y: u32) -> u64 {
    spread_bits(x) | spread_bits(y) << 1
}

/// The bits of `v`, one every other bit (bit i to bit 2i).
#[inline(always)]
const fn spread_bits(v: u32) -> u64 {
    let mut v = v as u64;
    v = (v | v << 16) & 0x0000_FFFF_0000_FFFF;
    v = (v | v << 8) & 0x00FF_00FF_00FF_00FF;
    v = (v | v << 4) & 0x0F0F_0F0F_0F0F_0F0F;
    v = (v | v << 2) & 0x3333_3333_3333_3333;
    (v | v << 1) & 0x5555_5555_5555_5555
}

impl Sampler {
    /// Sample `sample` of pixel `(x, y)` (in the whole image, not in a tile) of a render of
    /// `spp` samples per pixel with seed `seed`. `sample` is below `spp`: a larger one draws
    /// the numbers of another pixel's samples (still uniform, but not independent).
    #[inline]
    pub fn new(x: u32, y: u32, sample: u32, spp: u32, seed: u64) -> Sampler {
        let index = (morton2(x, y) << sample_bits(spp)).wrapping_add(sample as u64);
        Sampler {
            region_key: mix64((index >> REGION_BITS) ^ mix64(seed ^ GOLDEN_GAMMA)),
            index_reversed: ((index as u32) & ((1 << REGION_BITS) - 1)).reverse_bits(),
            slot: 0,
        }
    }

    /// How many slots this sample has drawn: with its pixel, sample index, spp and seed, all
    /// that [`Sampler::resumed`] needs to go on drawing where it stopped.
    pub fn position(&self) -> u64 {
        self.slot
    }

    /// [`Sampler::new`], having drawn `position` slots ([`Sampler::position`]).
    pub fn resumed(x: u32, y: u32, sample: u32, spp: u32, seed: u64, position: u64) -> Sampler {
        Sampler {
            slot: position,
            ..Sampler::new(x, y, sample, spp, seed)
        }
    }

    /// The next slot's seeds: its index shuffle's and its first coordinate's scramble's.
    #[inline(always)]
    fn next_slot(&mut self) -> (u32, u32, u64) {
        self.slot += 1;
        let h = mix64(
            self.region_key
                .wrapping_add(self.slot.wrapping_mul(GOLDEN_GAMMA)),
        );
        (h as u32, (h >> 32) as u32, h)
    }

    /// A number in [0, 1): the next 1D slot, the first Sobol' dimension (van der Corput).
    #[inline]
    pub fn next_1d(&mut self) -> f32 {
        let (shuffle, scramble, _) = self.next_slot();
        // By the definitions: shuffled = reverse(hash(reverse(index))); the van der Corput
        // point is reverse(shuffled); its Owen scramble is reverse(hash(reverse(point))) =
        // reverse(hash(shuffled)). So two reversals a slot (the index's is done in `new`),
        // where the definitions spelt out take five.
        let shuffled = laine_karras_permutation(self.index_reversed, shuffle).reverse_bits();
        unit_f32(laine_karras_permutation(shuffled, scramble).reverse_bits())
    }

    /// A point in [0, 1)^2: the next 2D slot, the first two Sobol' dimensions.
    #[inline]
    pub fn next_2d(&mut self) -> (f32, f32) {
        let (shuffle, scramble_x, h) = self.next_slot();
        let scramble_y = (h.wrapping_mul(GOLDEN_GAMMA) >> 32) as u32;
        let shuffled = laine_karras_permutation(self.index_reversed, shuffle).reverse_bits();
        // As in next_1d; the second dimension's point, reversed, is superset_parity of the
        // shuffled index (see sobol_second_dimension), which its scramble takes as it is.
        (
            unit_f32(laine_karras_permutation(shuffled, scramble_x).reverse_bits()),
            unit_f32(
                laine_karras_permutation(superset_parity(shuffled), scramble_y).reverse_bits(),
            ),
        )
    }
}

/// The top 24 bits of a 32-bit fixed-point fraction as a float in [0, 1) (exact in f32).
#[inline(always)]
fn unit_f32(bits: u32) -> f32 {
    (bits >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// The second dimension of the Sobol' sequence (primitive polynomial x + 1), as a 32-bit
/// fraction (the first is the van der Corput sequence, `index.reverse_bits()`): the sum over
/// the set bits b of `index` of direction number b, row b of Pascal's triangle mod 2, whose
/// entry k is odd exactly when the bits of k are a subset of those of b (Lucas). So digit
/// k of the fraction (weight 2^-(k+1)) is the parity of the bits b of `index` that contain k:
/// [`superset_parity`], bit-reversed.
#[inline(always)]
pub fn sobol_second_dimension(index: u32) -> u32 {
    superset_parity(index).reverse_bits()
}

/// Bit k of the result is the parity of the bits b of `x` whose position contains k's (as
/// 5-bit sets, `b & k == k`): the superset-sum transform over GF(2), one step per bit of the
/// position, 15 operations where a loop over the bits of `x` takes 32 unpredictable branches.
#[inline(always)]
pub fn superset_parity(mut x: u32) -> u32 {
    // Step d: every position without bit d takes in the one with it.
    x ^= (x >> 1) & 0x5555_5555;
    x ^= (x >> 2) & 0x3333_3333;
    x ^= (x >> 4) & 0x0F0F_0F0F;
    x ^= (x >> 8) & 0x00FF_00FF;
    x ^= (x >> 16) & 0x0000_FFFF;
    x
}

/// Burley's (2020) variant of the Laine-Karras hash: each step changes bit k only through
/// bits 0..=k (odd multiplies, an add, xors with even multiples), so on a bit-reversed
/// fraction it flips each binary digit by a function of the digits above it: an Owen
/// scramble.
#[inline(always)]
fn laine_karras_permutation(mut x: u32, seed: u32) -> u32 {
    x ^= x.wrapping_mul(0x3d20_adea);
    x = x.wrapping_add(seed);
    x = x.wrapping_mul((seed >> 16) | 1);
    x ^= x.wrapping_mul(0x0552_6c56);
    x ^= x.wrapping_mul(0x53a2_2864);
    x
}

/// A nested uniform (Owen) scramble of a 32-bit fraction: each bit flipped by a hash of the
/// more significant bits. On a sample index it is a shuffle that keeps every aligned block
/// of 2^k indices together, so the first 2^k samples stay one block of a Sobol' sequence
/// (a (0, k, 2)-net). [`Sampler`] computes it with the reversals folded away.
#[inline(always)]
pub fn nested_uniform_scramble(x: u32, seed: u32) -> u32 {
    laine_karras_permutation(x.reverse_bits(), seed).reverse_bits()
}

/// An independent random stream keyed on (stream, index, seed): a hash per draw, for what
/// wants numbers without structure (tests' random inputs, synthetic data). Renders draw
/// from [`Sampler`].
#[derive(Clone, Copy, Debug)]
pub struct RandomStream {
    key: u64,
    dim: u64,
}

impl RandomStream {
    #[inline]
    pub fn new(stream: u32, index: u32, seed: u64) -> RandomStream {
        let key = mix64(((stream as u64) << 32 | index as u64) ^ mix64(seed ^ GOLDEN_GAMMA));
        RandomStream { key, dim: 0 }
    }

    /// The next 32 random bits of this stream.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        self.dim += 1;
        (mix64(self.key.wrapping_add(self.dim.wrapping_mul(GOLDEN_GAMMA))) >> 32) as u32
    }

    /// A uniform float in [0, 1): the top 24 bits, so every value is exact in f32.
    #[inline]
    pub fn next_f32(&mut self) -> f32 {
        unit_f32(self.next_u32())
    }

    #[inline]
    pub fn next_2d(&mut self) -> (f32, f32) {
        let a = self.next_f32();
        (a, self.next_f32())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sampler resumed at its position draws what it would have drawn.
    #[test]
    fn a_resumed_sampler_goes_on_where_it_stopped() {
        let mut s = Sampler::new(7, 3, 5, 16, 9);
        s.next_2d();
        s.next_1d();
        let mut resumed = Sampler::resumed(7, 3, 5, 16, 9, s.position());
        for _ in 0..4 {
            assert_eq!(s.next_2d(), resumed.next_2d());
            assert_eq!(s.next_1d().to_bits(), resumed.next_1d().to_bits());
        }
    }

    /// Draws samples `first..first + n` of pixel `(x, y)` of a render of `spp` samples per
    /// pixel and returns, per slot of the draw pattern 1D, 2D, 1D, 2D, the points (1D slots
    /// with y = 0).
    fn slots(pixel: (u32, u32), first: u32, n: u32, spp: u32, seed: u64) -> Vec<Vec<(f32, f32)>> {
        let mut out = vec![Vec::new(); 4];
        for i in first..first + n {
            let mut s = Sampler::new(pixel.0, pixel.1, i, spp, seed);
            out[0].push((s.next_1d(), 0.0));
            out[1].push(s.next_2d());
            out[2].push((s.next_1d(), 0.0));
            out[3].push(s.next_2d());
        }
        out
    }

    /// Whether `points` (2^k of them, from slot `slot` of the pattern of [`slots`]) put one
    /// point in each of the 2^k intervals of a 1D slot and in each elementary box
    /// 2^-a x 2^-(k-a) of a 2D slot: the (0, k, 2)-net property, exactly. On failure, the
    /// shape of the box that held two points.
    fn net_failure(points: &[(f32, f32)], slot: usize) -> Option<(u32, u32)> {
        let k = points.len().trailing_zeros();
        assert_eq!(points.len(), 1 << k);
        let shapes: Vec<u32> = if slot % 2 == 0 {
            vec![k]
        } else {
            (0..=k).collect()
        };
        for a in shapes {
            let nx = 1u32 << a;
            let ny = if slot % 2 == 0 { 1 } else { 1u32 << (k - a) };
            let mut seen = vec![false; (nx * ny) as usize];
            for &(x, y) in points {
                assert!((0.0..1.0).contains(&x) && (0.0..1.0).contains(&y));
                let cell = (y * ny as f32) as u32 * nx + (x * nx as f32) as u32;
                if std::mem::replace(&mut seen[cell as usize], true) {
                    return Some((nx, ny));
                }
            }
        }
        None
    }

    #[test]
    fn numbers_depend_only_on_pixel_sample_spp_seed_and_slot() {
        let draw = |x, y, i, spp, seed| {
            let mut s = Sampler::new(x, y, i, spp, seed);
            (s.next_1d(), s.next_2d(), s.next_1d())
        };
        let base = draw(7, 2, 3, 16, 42);
        assert_eq!(base, draw(7, 2, 3, 16, 42));
        for other in [
            draw(7, 2, 4, 16, 42),
            draw(8, 2, 3, 16, 42),
            draw(7, 3, 3, 16, 42),
            draw(7, 2, 3, 64, 42),
            draw(7, 2, 3, 16, 43),
        ] {
            assert_ne!(base.0, other.0);
        }
        // The samples per pixel count as their power of two: 9 to 16 draw the same numbers.
        assert_eq!(base, draw(7, 2, 3, 9, 42));
    }

    #[test]
    fn every_power_of_two_block_of_samples_is_stratified_in_every_slot() {
        // The 2^k samples of an aligned block (the first 2^k, or a later block, as a later
        // pass renders it) of one pixel are a (0, k, 2)-net in every slot.
        for (pixel, spp, seed) in [
            ((0u32, 0u32), 4096u32, 0u64),
            ((1234, 567), 2000, 7),
            ((32_767, 32_767), 4096, u64::MAX),
        ] {
            for k in 0..=8u32 {
                let n = 1u32 << k;
                for first in [0, n, 5 * n] {
                    for (slot, points) in slots(pixel, first, n, spp, seed).iter().enumerate() {
                        if let Some((nx, ny)) = net_failure(points, slot) {
                            panic!(
                                "pixel {pixel:?} seed {seed}: samples {first}..{} of slot \
                                 {slot} put two points in one {nx}x{ny} box",
                                first + n
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_aligned_square_of_pixels_shares_one_net() {
        // The blue-noise property, exactly: all the samples of the pixels of an aligned
        // 2^j x 2^j square are one (0, 2j + log2 spp, 2)-net in every slot, so neighbours'
        // errors offset one another.
        for (spp, seed) in [(1u32, 3u64), (4, 0), (16, 99)] {
            for j in 0..=3u32 {
                let side = 1u32 << j;
                for (x0, y0) in [(0u32, 0u32), (side * 5, side * 2), (1000 / side * side, 0)] {
                    let mut per_slot = vec![Vec::new(); 4];
                    for y in y0..y0 + side {
                        for x in x0..x0 + side {
                            for (all, pts) in
                                per_slot.iter_mut().zip(slots((x, y), 0, spp, spp, seed))
                            {
                                all.extend(pts);
                            }
                        }
                    }
                    for (slot, points) in per_slot.iter().enumerate() {
                        assert_eq!(
                            net_failure(points, slot),
                            None,
                            "{side}x{side} pixels at ({x0}, {y0}), {spp} spp, seed {seed}, slot {slot}"
                        );
                    }
                }
            }
        }
        // An unaligned square is not one block: its points clump somewhere.
        let mut points = Vec::new();
        for (x, y) in [(1u32, 0u32), (2, 0), (1, 1), (2, 1)] {
            points.extend(slots((x, y), 0, 4, 4, 3)[1].iter().copied());
        }
        assert!(net_failure(&points, 1).is_some());
    }

    #[test]
    fn pixels_in_different_regions_draw_independent_numbers() {
        // At 2^24 samples per pixel every pixel is a region of its own: pixels side by side
        // no longer share a net, and their first samples differ as independent numbers do.
        let spp = 1 << REGION_BITS;
        let mut points = Vec::new();
        for (x, y) in [(0u32, 0u32), (1, 0), (0, 1), (1, 1)] {
            points.extend(slots((x, y), 0, 1, spp, 5)[1].iter().copied());
        }
        let mut again = Vec::new();
        for (x, y) in [(0u32, 0u32), (1, 0), (0, 1), (1, 1)] {
            again.extend(slots((x, y), 0, 1, 1, 5)[1].iter().copied());
        }
        assert_eq!(net_failure(&again, 1), None);
        assert_ne!(points, again);
        // Regions are keyed: two pixels one region apart at 64 spp (2^18 Morton indices)
        // do not repeat each other's numbers.
        let far = morton2(512, 0);
        assert_eq!(far, 1 << 18);
        assert_ne!(slots((0, 0), 0, 64, 64, 5), slots((512, 0), 0, 64, 64, 5));
    }

    #[test]
    fn morton_indices_interleave_the_bits() {
        let by_loop = |x: u32, y: u32| {
            (0..32).fold(0u64, |m, b| {
                m | (((x >> b) & 1) as u64) << (2 * b) | (((y >> b) & 1) as u64) << (2 * b + 1)
            })
        };
        for (x, y) in [
            (0, 0),
            (1, 0),
            (0, 1),
            (3, 5),
            (32_767, 1),
            (0x1234_5678, u32::MAX),
        ] {
            assert_eq!(morton2(x, y), by_loop(x, y), "({x}, {y})");
        }
        assert_eq!(sample_bits(1), 0);
        assert_eq!(sample_bits(2), 1);
        assert_eq!(sample_bits(3), 2);
        assert_eq!(sample_bits(64), 6);
        assert_eq!(sample_bits(65), 7);
        assert_eq!(sample_bits(1 << 24), 24);
    }

    #[test]
    fn the_index_shuffle_keeps_aligned_blocks_together() {
        for seed in [0u32, 1, 0xDEAD_BEEF] {
            for k in [1u32, 4, 7] {
                let n = 1u32 << k;
                for block in [0u32, 3] {
                    let mut out: Vec<u32> = (block * n..(block + 1) * n)
                        .map(|i| nested_uniform_scramble(i, seed))
                        .collect();
                    out.sort_unstable();
                    let base = out[0];
                    assert_eq!(
                        base % n,
                        0,
                        "seed {seed} k {k}: the block moved off alignment"
                    );
                    assert_eq!(
                        out,
                        (base..base + n).collect::<Vec<_>>(),
                        "seed {seed} k {k}"
                    );
                }
            }
        }
    }

    /// Chi-square of 16 equal bins, to compare with 37.7, the 0.1% critical value for 15
    /// degrees of freedom, which a sound generator stays far below.
    fn chi_square(bins: &[u32; 16]) -> f64 {
        let expected = bins.iter().sum::<u32>() as f64 / 16.0;
        bins.iter()
            .map(|&o| (o as f64 - expected).powi(2) / expected)
            .sum()
    }

    /// Pearson's correlation of pairs of numbers uniform on [0, 1) (centred on 1/2).
    fn correlation(pairs: impl Iterator<Item = (f32, f32)>) -> f64 {
        let (mut sab, mut saa, mut sbb) = (0.0f64, 0.0f64, 0.0f64);
        for (a, b) in pairs {
            let (a, b) = (a as f64 - 0.5, b as f64 - 0.5);
            sab += a * b;
            saa += a * a;
            sbb += b * b;
        }
        sab / (saa * sbb).sqrt()
    }

    #[test]
    fn slots_and_pixels_are_uniform_and_uncorrelated() {
        // One draw of each of 64k pixels in a row of a wide frame at 1 spp (pixels of one
        // row are not one net), per coordinate.
        let n = 65_536u32;
        let mut bins = [[0u32; 16]; 3];
        let mut pairs = Vec::new();
        for p in 0..n {
            let mut s = Sampler::new(p % 32_768, p / 32_768 * 1000, 0, 1, 1);
            let a = s.next_1d();
            let (b, c) = s.next_2d();
            for (bin, v) in bins.iter_mut().zip([a, b, c]) {
                bin[(v * 16.0) as usize] += 1;
            }
            pairs.push((a, b));
        }
        for bin in &bins {
            let chi2 = chi_square(bin);
            assert!(chi2 < 37.7, "chi2 = {chi2}");
        }
        // Slot 1 against slot 2 across pixels: a correlation of 0 has a standard error of
        // 1/sqrt(n) = 0.004.
        let r = correlation(pairs.into_iter());
        assert!(r.abs() < 0.02, "r = {r}");
        // And across one pixel's samples: 4096 samples, slot 1 against slot 3's x.
        let pts = slots((99, 3), 0, 4096, 4096, 5);
        let r = correlation(pts[0].iter().zip(&pts[2]).map(|(a, b)| (a.0, b.0)));
        assert!(r.abs() < 0.08, "r = {r}");
    }

    #[test]
    fn random_streams_depend_only_on_the_key() {
        let mut a = RandomStream::new(7, 3, 42);
        let mut b = RandomStream::new(7, 3, 42);
        for _ in 0..16 {
            assert_eq!(a.next_u32(), b.next_u32());
        }
        let first = RandomStream::new(7, 3, 42).next_u32();
        for mut other in [
            RandomStream::new(7, 4, 42),
            RandomStream::new(8, 3, 42),
            RandomStream::new(7, 3, 43),
        ] {
            assert_ne!(first, other.next_u32());
        }
    }

    #[test]
    fn random_stream_floats_are_uniform_enough() {
        let mut bins = [0u32; 16];
        let n = 160_000;
        for i in 0..n {
            let x = RandomStream::new(i / 4, i % 4, 1).next_f32();
            assert!((0.0..1.0).contains(&x));
            bins[(x * 16.0) as usize] += 1;
        }
        let chi2 = chi_square(&bins);
        assert!(chi2 < 37.7, "chi2 = {chi2}");
    }

    /// The textbook loop over the index's bits (direction number b, then b + 1 from it).
    fn second_dimension_by_direction_numbers(mut index: u32) -> u32 {
        let (mut v, mut r) = (1u32 << 31, 0u32);
        while index != 0 {
            if index & 1 != 0 {
                r ^= v;
            }
            index >>= 1;
            v ^= v >> 1;
        }
        r
    }

    #[test]
    fn the_second_dimension_is_the_direction_numbers_sum() {
        let mut x = 0x1234_5678u32;
        for i in (0..4096u32).chain([u32::MAX, 1 << 31, 0xAAAA_AAAA]) {
            assert_eq!(
                sobol_second_dimension(i),
                second_dimension_by_direction_numbers(i),
                "{i}"
            );
            x = x.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
            assert_eq!(
                sobol_second_dimension(x),
                second_dimension_by_direction_numbers(x),
                "{x}"
            );
        }
    }

    #[test]
    fn the_sampler_is_the_scrambled_sobol_points_it_says() {
        // The folded reversals of Sampler against the definition spelt out.
        for ((x, y), sample, spp, seed) in [
            ((0u32, 0u32), 0u32, 1u32, 0u64),
            ((5, 9), 3, 8, 11),
            ((20_000, 30_000), 1_000_003, 1 << 20, 9),
        ] {
            let mut s = Sampler::new(x, y, sample, spp, seed);
            let index = (morton2(x, y) << sample_bits(spp)) + sample as u64;
            let key = mix64((index >> 24) ^ mix64(seed ^ GOLDEN_GAMMA));
            let local = (index % (1 << 24)) as u32;
            for slot in 1..=6u64 {
                let h = mix64(key.wrapping_add(slot.wrapping_mul(GOLDEN_GAMMA)));
                let i = nested_uniform_scramble(local, h as u32);
                let x = unit_f32(nested_uniform_scramble(i.reverse_bits(), (h >> 32) as u32));
                if slot % 2 == 1 {
                    assert_eq!(s.next_1d(), x);
                } else {
                    let y_seed = (h.wrapping_mul(GOLDEN_GAMMA) >> 32) as u32;
                    let y = unit_f32(nested_uniform_scramble(sobol_second_dimension(i), y_seed));
                    assert_eq!(s.next_2d(), (x, y));
                }
            }
        }
    }

    #[test]
    fn known_values_pin_the_scheme() {
        // The GPU port (ptx/gasworks_common.h) must give the same bits: if these change,
        // change it too (tests/optix_pathtracer_host.rs runs it against this on the host).
        assert_eq!(sobol_second_dimension(0), 0);
        assert_eq!(sobol_second_dimension(1), 1 << 31);
        assert_eq!(sobol_second_dimension(2), 3 << 30);
        assert_eq!(sobol_second_dimension(3), 1 << 30);
        assert_eq!(sobol_second_dimension(4), 0xA << 28);
        let mut s = Sampler::new(5, 9, 3, 8, 11);
        let a = s.next_1d();
        let (b, c) = s.next_2d();
        let v = [a, b, c];
        let bits = v.map(f32::to_bits);
        assert_eq!(bits, KNOWN, "{v:?}");
    }

    const KNOWN: [u32; 3] = [1_060_786_152, 1_050_703_302, 1_057_118_192];
}
