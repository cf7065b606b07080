//! gasworks' closest-hit traversal alone, on a file of rays: the figure `scripts/peer-bench.sh`
//! sets beside Embree's own traversal of the same rays on the same triangles (issue 69's
//! "rays per second within 2x of Embree"). A render's rays/s include shading; these do not.
//!
//!     cargo run --release --example trace_rays SCENE.obj RAYS.f32 THREADS [REPEAT]
//!
//! RAYS.f32: little-endian f32, six a ray (origin x, y, z, then unit direction x, y, z), as
//! peer_bench.py writes them. Each ray is traced over `0 < t < inf` (its setup included,
//! as Embree's `rtcIntersect1` includes its own), a chunk of 4096 rays at a time with [`SceneBvh::intersect_rays`] as renders trace them (interleaved on
//! large BVHs), on a pool of THREADS threads. Loading and the BVH build are not timed.
//! Prints one line a repeat: `traced N rays, H hits, S s, X Mrays/s`.

use std::error::Error;
use std::path::Path;
use std::time::Instant;

use gasworks::cpu::bvh::RayData;
use gasworks::cpu::wavefront::{BatchKind, BatchTuner};
use gasworks::cpu::SceneBvh;
use gasworks::scene::obj::{load_obj, LoadOptions};
use gasworks::scene::Scene;
use glam::Vec3;
use rayon::prelude::*;

const CHUNK: usize = 4096;

fn read_rays(path: &Path) -> Result<Vec<(Vec3, Vec3)>, Box<dyn Error>> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() % 24 != 0 {
        return Err(format!(
            "{}: {} bytes, not six f32 a ray",
            path.display(),
            bytes.len()
        )
        .into());
    }
    let f: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Ok(f.chunks_exact(6)
        .map(|r| (Vec3::new(r[0], r[1], r[2]), Vec3::new(r[3], r[4], r[5])))
        .collect())
}

/// Hits among `rays`, traced on the current pool.
fn trace(scene: &Scene, bvh: &SceneBvh, tuner: &BatchTuner, rays: &[(Vec3, Vec3)]) -> usize {
    rays.par_chunks(CHUNK)
        .map_init(
            || (Vec::with_capacity(CHUNK), Vec::with_capacity(CHUNK)),
            |(prepared, hits), chunk| {
                prepared.clear();
                prepared.extend(chunk.iter().filter_map(|(o, d)| RayData::new(*o, *d)));
                hits.clear();
                hits.resize(prepared.len(), None);
                tuner.run(BatchKind::Bounce, prepared.len(), |how, r| {
                    let window = (0.0, f32::INFINITY);
                    bvh.intersect_rays(scene, &prepared[r.clone()], window, how, &mut hits[r])
                });
                hits.iter().filter(|h| h.is_some()).count()
            },
        )
        .sum()
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !(3..=4).contains(&args.len()) {
        return Err("usage: trace_rays SCENE.obj RAYS.f32 THREADS [REPEAT]".into());
    }
    let threads: usize = args[2].parse().map_err(|_| "THREADS: not a count")?;
    let repeat: usize = match args.get(3) {
        Some(r) => r.parse().map_err(|_| "REPEAT: not a count")?,
        None => 1,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let scene = load_obj(Path::new(&args[0]), &LoadOptions { quiet: true })?;
    let rays = read_rays(Path::new(&args[1]))?;
    let bvh = pool.install(|| SceneBvh::build(&scene));
    let tuner = BatchTuner::default();
    for _ in 0..repeat {
        let start = Instant::now();
        let hits = pool.install(|| trace(&scene, &bvh, &tuner, &rays));
        let s = start.elapsed().as_secs_f64();
        println!(
            "traced {} rays, {hits} hits, {s:.3} s, {:.3} Mrays/s",
            rays.len(),
            rays.len() as f64 / s / 1e6
        );
    }
    Ok(())
}
