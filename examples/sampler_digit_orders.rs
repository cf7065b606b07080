//! A prototype for the sampler's next step, measured: a simplified Z-order padded Sobol'
//! sampler whose index shuffle is the binary nested scramble gasworks uses
//! (`nested_uniform_scramble`, which keeps every aligned pair of indices together), pbrt-v4's
//! kind (a random order of each base-4 digit chosen by a hash of the digits above it), or a
//! hybrid: random orders of the pixel's Morton digits only, then the binary scramble, which
//! keeps a pixel's own samples in aligned pairs.
//!
//!     cargo run --release --example sampler_digit_orders
//!
//! Two integrals per pixel of a 256x256 frame: a smooth one within one 2D slot, and the sign
//! of `(c - 1/2)(e - 1/2)` across two slots, whose errors the binary shuffle pairs up (see
//! docs/guide/sampling.md, "Random numbers"). Not the renderer's sampler: its figures compare
//! the shuffles with each other only. Also printed: the share of pixels whose first two samples fall in
//! different halves of a slot's first coordinate (a pass of 2 samples stratified: the
//! binary scramble and the hybrid keep it at 1, the base-4 orders do not), and each
//! shuffle's cost in nanoseconds per point on this machine (one thread, the median of 5).

use gasworks::render::sampler::{
    morton2, nested_uniform_scramble, sample_bits, sobol_second_dimension,
};
use gasworks::splitmix::mix64;
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

#[derive(Clone, Copy, PartialEq)]
enum Shuffle {
    /// gasworks' nested binary scramble of the whole index.
    Binary,
    /// pbrt-v4's: a random order of every base-4 digit, from the index's lowest bit.
    Base4,
    /// Random orders of the Morton digits (above the sample bits), then the binary scramble.
    Hybrid,
}

/// The digits of `local` from bit `from` up (base 4, 2 bits each) put in random orders, each
/// chosen by a hash of the digits above it: a nested shuffle that keeps every aligned block
/// of 4^k indices (above `from`) together but splits the aligned pairs.
fn base4_orders(local: u64, from: u32, key: u64) -> u64 {
    let mut out = local & ((1 << from) - 1);
    let mut shift = from;
    while shift < 24 {
        let digit = (local >> shift) & 3;
        let higher = local >> (shift + 2);
        let p = (mix64(higher ^ key ^ (u64::from(shift) << 56)) >> 32) % 24;
        out |= PERMS[p as usize][digit as usize] << shift;
        shift += 2;
    }
    out
}

/// Slot `slot`'s point for sample `s` of pixel `(x, y)`: the 24-bit index shuffled, then
/// Sobol' dimensions 0 and 1, Owen-scrambled.
fn point(x: u32, y: u32, s: u32, spp: u32, seed: u64, slot: u64, shuffle: Shuffle) -> (f64, f64) {
    let bits = sample_bits(spp);
    let idx = (morton2(x, y) << bits) + s as u64;
    let local = idx & 0xFF_FFFF;
    let key = mix64(seed ^ slot.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let shuffled = match shuffle {
        Shuffle::Binary => nested_uniform_scramble(local as u32, key as u32),
        Shuffle::Base4 => base4_orders(local, 0, key) as u32,
        Shuffle::Hybrid => {
            nested_uniform_scramble(base4_orders(local, bits, key) as u32, key as u32)
        }
    };
    let h = mix64(key ^ 0x1234);
    let a = nested_uniform_scramble(shuffled.reverse_bits(), h as u32);
    let b = nested_uniform_scramble(sobol_second_dimension(shuffled), (h >> 32) as u32);
    (unit(a), unit(b))
}

const SHUFFLES: [(&str, Shuffle); 3] = [
    ("binary", Shuffle::Binary),
    ("base4", Shuffle::Base4),
    ("hybrid", Shuffle::Hybrid),
];

fn main() {
    let n = 256u32;
    for spp in [1u32, 4, 16] {
        for (name, shuffle) in SHUFFLES {
            let mut err = vec![[0.0f64; 2]; (n * n) as usize];
            let mut split = 0u32;
            for y in 0..n {
                for x in 0..n {
                    let mut sum = [0.0f64; 2];
                    for s in 0..spp {
                        let (a, b) = point(x, y, s, spp, 7, 1, shuffle);
                        let (c, _) = point(x, y, s, spp, 7, 2, shuffle);
                        let (_, e) = point(x, y, s, spp, 7, 3, shuffle);
                        sum[0] += (std::f64::consts::PI * a).sin() * b * b;
                        sum[1] += f64::from(u8::from((c - 0.5) * (e - 0.5) > 0.0));
                    }
                    if spp >= 2 {
                        let first = |s| point(x, y, s, spp, 7, 1, shuffle).0 < 0.5;
                        split += u32::from(first(0) != first(1));
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
            let pairs = if spp >= 2 {
                format!("{:.3}", f64::from(split) / f64::from(n * n))
            } else {
                "-".into()
            };
            println!(
                "spp {spp:2} {name:6} smooth px {:.5} 4x4 {:.5} | xor px {:.5} 4x4 {:.5} | first pair split {pairs}",
                r(px[0], n * n),
                r(bl[0], n * n / 16),
                r(px[1], n * n),
                r(bl[1], n * n / 16)
            );
        }
    }
    // The cost: one slot's point for every sample of a 512x512 frame at 4 spp.
    for (name, shuffle) in SHUFFLES {
        let mut times = Vec::new();
        for _ in 0..5 {
            let t0 = std::time::Instant::now();
            let mut acc = 0.0;
            for y in 0..512u32 {
                for x in 0..512u32 {
                    for s in 0..4 {
                        acc += point(x, y, s, 4, 7, 1, shuffle).0;
                    }
                }
            }
            std::hint::black_box(acc);
            times.push(t0.elapsed().as_secs_f64() * 1e9 / (512.0 * 512.0 * 4.0));
        }
        times.sort_by(f64::total_cmp);
        println!(
            "cost {name:6} {:.1} ns per point (min {:.1}, max {:.1})",
            times[2], times[0], times[4]
        );
    }
}
