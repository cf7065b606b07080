//! The sampler's noise on integrands with known values, away from any scene: what the Z order
//! of the pixels (one Sobol' sequence shared by neighbours) does against a sequence per pixel.
//!
//!     cargo run --release --example sampler_noise
//!
//! Every pixel of a 256x256 frame estimates four integrals over the unit square or two slots
//! with its `spp` samples, and the error is reported as the RMS over pixels and the RMS of
//! 4x4 block means (the noise left at a coarser scale, as `image-stats --block 4` measures a
//! render's). "per-pixel" is the same sampler with a region of its own for every pixel (at
//! 2^24 spp the index of a pixel's first samples is that region's first block), which is the
//! sampler before the Z order, statistically.

use gasworks::render::Sampler;

/// The integrands, with their exact values: two within one 2D slot, two across slots.
const NAMES: [&str; 4] = [
    "sin(pi a) b^2 (one slot)",
    "a + b < 1 (one slot, an edge)",
    "c d (two slots)",
    "(c - 1/2)(e - 1/2) > 0 (two slots)",
];

/// The four integrands' values at one sample, drawn from its slots in the order a render
/// draws them (2D, 1D, 2D).
fn integrands(s: &mut Sampler) -> [f64; 4] {
    let (a, b) = s.next_2d();
    let c = s.next_1d();
    let (d, e) = s.next_2d();
    let (a, b, c, d, e) = (a as f64, b as f64, c as f64, d as f64, e as f64);
    [
        (std::f64::consts::PI * a).sin() * b * b,
        f64::from(u8::from(a + b < 1.0)),
        c * d,
        f64::from(u8::from((c - 0.5) * (e - 0.5) > 0.0)),
    ]
}

fn main() {
    let exact = [2.0 / (3.0 * std::f64::consts::PI), 0.5, 0.25, 0.5];
    let n = 256u32;
    println!("{n}x{n} pixels, seed 7; RMS error over pixels, and of 4x4 block means");
    for spp in [1u32, 4, 16] {
        for (name, key_spp) in [("Z order", spp), ("per-pixel", 1u32 << 24)] {
            let mut errors = vec![[0.0f64; 4]; (n * n) as usize];
            for y in 0..n {
                for x in 0..n {
                    let mut sum = [0.0f64; 4];
                    for i in 0..spp {
                        let v = integrands(&mut Sampler::new(x, y, i, key_spp, 7));
                        for k in 0..4 {
                            sum[k] += v[k];
                        }
                    }
                    for k in 0..4 {
                        errors[(y * n + x) as usize][k] = sum[k] / spp as f64 - exact[k];
                    }
                }
            }
            let rms = |squares: f64, count: u32| (squares / count as f64).sqrt();
            let mut pixel = [0.0f64; 4];
            let mut block = [0.0f64; 4];
            for e in &errors {
                for k in 0..4 {
                    pixel[k] += e[k] * e[k];
                }
            }
            for by in 0..n / 4 {
                for bx in 0..n / 4 {
                    let mut mean = [0.0f64; 4];
                    for y in by * 4..by * 4 + 4 {
                        for x in bx * 4..bx * 4 + 4 {
                            for k in 0..4 {
                                mean[k] += errors[(y * n + x) as usize][k] / 16.0;
                            }
                        }
                    }
                    for k in 0..4 {
                        block[k] += mean[k] * mean[k];
                    }
                }
            }
            for k in 0..4 {
                println!(
                    "spp {spp:2}  {name:9}  {:36}  pixels {:.5}  4x4 means {:.5}",
                    NAMES[k],
                    rms(pixel[k], n * n),
                    rms(block[k], n * n / 16)
                );
            }
        }
    }
}
