//! A prototype for the sampler's next step, measured: a simplified Z-order padded Sobol'
//! sampler whose index shuffle is either the binary nested scramble gasworks uses
//! (`nested_uniform_scramble`, which keeps every aligned pair of indices together) or pbrt-v4's
//! kind, a random order of each base-4 digit chosen by a hash of the digits above it.
//!
//!     cargo run --release --example sampler_digit_orders
//!
//! Two integrals per pixel of a 256x256 frame: a smooth one within one 2D slot, and the sign
//! of `(c - 1/2)(e - 1/2)` across two slots, whose errors the binary shuffle pairs up (see the
//! README's "Random numbers"). Not the renderer's sampler: its figures compare the two
//! shuffles with each other only. The base-4 orders break the pairs but do not keep aligned
//! pairs of a pixel's samples together (a pass of an odd power of two samples would lose its
//! stratification), and cost a hash per digit per slot.

use gasworks::render::sampler::{
    mix64, morton2, nested_uniform_scramble, sample_bits, sobol_second_dimension,
};
/// The 24 orders of four digits.
const PERMS: [[u64; 4]; 24] = [
    [0, 1, 2, 3],
    [0, 1, 3, 2],
    [0, 2, 1, 3],
    [0, 2, 3, 1],
    [0, 3, 2, 1],
    [0, 3, 1, 2],
    [1, 0, 2, 3],
    [1, 0, 3, 2],
    [1, 2, 0, 3],
    [1, 2, 3, 0],
    [1, 3, 2, 0],
    [1, 3, 0, 2],
    [2, 1, 0, 3],
    [2, 1, 3, 0],
    [2, 0, 1, 3],
    [2, 0, 3, 1],
    [2, 3, 0, 1],
    [2, 3, 1, 0],
    [3, 1, 2, 0],
    [3, 1, 0, 2],
    [3, 2, 1, 0],
    [3, 2, 0, 1],
    [3, 0, 2, 1],
    [3, 0, 1, 2],
];
/// The top 24 bits of a 32-bit fraction.
fn unit(b: u32) -> f64 {
    (b >> 8) as f64 / 16_777_216.0
}
/// Slot `slot`'s point for sample `s` of pixel `(x, y)`: the 24-bit index shuffled (by base-4
/// digit orders or the binary nested scramble), then Sobol' dimensions 0 and 1, Owen-scrambled.
fn point(x: u32, y: u32, s: u32, spp: u32, seed: u64, slot: u64, base4: bool) -> (f64, f64) {
    let idx = (morton2(x, y) << sample_bits(spp)) + s as u64;
    let local = idx & 0xFF_FFFF;
    let key = mix64(seed ^ slot.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let shuffled = if base4 {
        let mut out = 0u64;
        for i in (0..12).rev() {
            let shift = 2 * i;
            let digit = (local >> shift) & 3;
            let higher = local >> (shift + 2);
            let p = (mix64(higher ^ key ^ ((i as u64) << 56)) >> 32) % 24;
            out |= PERMS[p as usize][digit as usize] << shift;
        }
        out as u32
    } else {
        nested_uniform_scramble(local as u32, key as u32)
    };
    let h = mix64(key ^ 0x1234);
    let a = nested_uniform_scramble(shuffled.reverse_bits(), h as u32);
    let b = nested_uniform_scramble(sobol_second_dimension(shuffled), (h >> 32) as u32);
    (unit(a), unit(b))
}
fn main() {
    let n = 256u32;
    for spp in [1u32, 4, 16] {
        for (name, base4) in [("binary", false), ("base4", true)] {
            let mut err = vec![[0.0f64; 2]; (n * n) as usize];
            for y in 0..n {
                for x in 0..n {
                    let mut sum = [0.0f64; 2];
                    for s in 0..spp {
                        let (a, b) = point(x, y, s, spp, 7, 1, base4);
                        let (c, _) = point(x, y, s, spp, 7, 2, base4);
                        let (_, e) = point(x, y, s, spp, 7, 3, base4);
                        sum[0] += (std::f64::consts::PI * a).sin() * b * b;
                        sum[1] += f64::from(u8::from((c - 0.5) * (e - 0.5) > 0.0));
                    }
                    let exact = [2.0 / (3.0 * std::f64::consts::PI), 0.5];
                    for k in 0..2 {
                        err[(y * n + x) as usize][k] = sum[k] / spp as f64 - exact[k];
                    }
                }
            }
            let mut px = [0.0; 2];
            let mut bl = [0.0; 2];
            for e in &err {
                for k in 0..2 {
                    px[k] += e[k] * e[k];
                }
            }
            for by in 0..n / 4 {
                for bx in 0..n / 4 {
                    let mut m = [0.0; 2];
                    for y in by * 4..by * 4 + 4 {
                        for x in bx * 4..bx * 4 + 4 {
                            for k in 0..2 {
                                m[k] += err[(y * n + x) as usize][k] / 16.0;
                            }
                        }
                    }
                    for k in 0..2 {
                        bl[k] += m[k] * m[k];
                    }
                }
            }
            let r = |v: f64, c: u32| (v / c as f64).sqrt();
            println!(
                "spp {spp:2} {name:6} smooth px {:.5} 4x4 {:.5} | xor px {:.5} 4x4 {:.5}",
                r(px[0], n * n),
                r(bl[0], n * n / 16),
                r(px[1], n * n),
                r(bl[1], n * n / 16)
            );
        }
    }
}
