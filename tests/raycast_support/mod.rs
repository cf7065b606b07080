//! What the GPU ray-cast tests share: seeded scenes (heavy-tailed groups, the bunny cut into
//! groups), rays, the f64 brute-force oracle and the comparison of GPU hits with it. Not a
//! test binary: `mod raycast_support;` in tests/gpu_accel_raycast.rs and
//! tests/gpu_enqueue_threads.rs.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use glam::{DVec3, Vec3};

use gasworks::optix::accel::{Accel, AccelOptions, DeviceGeometry, GasBatch, StreamSet};
use gasworks::optix::plan::group_gases;
use gasworks::optix::raycast::{Ray, RayHit, RaycastPipeline};
use gasworks::optix::{ContextOptions, DeviceContext, Gpu};
use gasworks::scene::gen::{sponza_like, SPONZA_LIKE_GROUPS, SPONZA_LIKE_TRIANGLES};
use gasworks::scene::{Group, Material, Scene};

/// splitmix64: a tiny seeded generator, so the scenes and rays are the same on every run.
pub struct Rng(u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.f32()
    }
    pub fn vec(&mut self, lo: f32, hi: f32) -> Vec3 {
        Vec3::new(self.range(lo, hi), self.range(lo, hi), self.range(lo, hi))
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Group sizes like an OBJ of many parts: half tiny, a long tail of large ones.
pub fn heavy_tailed_size(rng: &mut Rng) -> usize {
    match rng.below(20) {
        0..=9 => 2,
        10..=14 => 2 + rng.below(100),
        15..=18 => 100 + rng.below(900),
        _ => 1000 + rng.below(4000),
    }
}

pub fn synthetic_scene(seed: u64, groups: usize) -> Scene {
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(groups);
    for g in 0..groups {
        let n = heavy_tailed_size(&mut rng);
        let centre = rng.vec(-20.0, 20.0);
        let radius = 0.5 + (n as f32).sqrt() * 0.2;
        let mut group = Group {
            name: format!("g{g}"),
            ..Default::default()
        };
        for _ in 0..n {
            let a = centre + rng.vec(-radius, radius);
            let b = a + rng.vec(-1.0, 1.0);
            let c = a + rng.vec(-1.0, 1.0);
            let base = group.positions.len() as u32;
            group.positions.extend([a, b, c]);
            group.indices.push([base, base + 1, base + 2]);
            group.face_materials.push(0);
        }
        out.push(group);
    }
    Scene::new(
        "synthetic heavy-tailed",
        out,
        vec![Material::default_diffuse()],
    )
}

/// The bunny (positions and faces only), cut into heavy-tailed groups of consecutive faces.
pub fn bunny_scene() -> Option<Scene> {
    let candidates = [
        PathBuf::from("tests/data/bunny.obj"),
        PathBuf::from("shared/assets/bunny.obj"),
        PathBuf::from("../shared/assets/bunny.obj"),
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/bunny.obj"),
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/assets/bunny.obj"),
    ];
    let text = candidates
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())?;
    let mut positions = Vec::new();
    let mut faces = Vec::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        match it.next() {
            Some("v") => {
                let v: Vec<f32> = it.take(3).filter_map(|x| x.parse().ok()).collect();
                positions.push(Vec3::new(v[0], v[1], v[2]));
            }
            Some("f") => {
                let idx: Vec<u32> = it
                    .filter_map(|c| c.split('/').next()?.parse::<i64>().ok())
                    .map(|i| if i < 0 { positions.len() as i64 + i } else { i - 1 } as u32)
                    .collect();
                for k in 1..idx.len().saturating_sub(1) {
                    faces.push([idx[0], idx[k], idx[k + 1]]);
                }
            }
            _ => {}
        }
    }
    let mut rng = Rng(7);
    let mut groups = Vec::new();
    let mut start = 0;
    while start < faces.len() {
        let n = heavy_tailed_size(&mut rng).min(faces.len() - start);
        groups.push(Group {
            name: format!("bunny{}", groups.len()),
            positions: positions.clone(),
            indices: faces[start..start + n].to_vec(),
            face_materials: vec![0; n],
            ..Default::default()
        });
        start += n;
    }
    Some(Scene::new(
        "bunny",
        groups,
        vec![Material::default_diffuse()],
    ))
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuHit {
    pub group: u32,
    pub prim: u32,
    pub t: f64,
    pub u: f64,
    pub v: f64,
}

/// Möller-Trumbore in f64; `slack` widens the triangle by that much in barycentric terms
/// (used only to recognise hits on a shared edge).
pub fn intersect(
    o: DVec3,
    d: DVec3,
    tri: [Vec3; 3],
    tmin: f64,
    tmax: f64,
    slack: f64,
) -> Option<(f64, f64, f64)> {
    let [a, b, c] = tri.map(|p| p.as_dvec3());
    let (e1, e2) = (b - a, c - a);
    let p = d.cross(e2);
    let det = e1.dot(p);
    if det.abs() < 1e-300 {
        return None;
    }
    let inv = 1.0 / det;
    let s = o - a;
    let u = s.dot(p) * inv;
    let q = s.cross(e1);
    let v = d.dot(q) * inv;
    let t = e2.dot(q) * inv;
    (u >= -slack && v >= -slack && u + v <= 1.0 + slack && t >= tmin && t <= tmax)
        .then_some((t, u, v))
}

pub fn brute_force(scene: &Scene, ray: &Ray) -> Option<CpuHit> {
    let o = Vec3::from(ray.origin).as_dvec3();
    let d = Vec3::from(ray.dir).as_dvec3();
    let mut best: Option<CpuHit> = None;
    for (g, group) in scene.groups.iter().enumerate() {
        for p in 0..group.triangle_count() {
            let tmax = best.map_or(ray.tmax as f64, |b| b.t);
            if let Some((t, u, v)) = intersect(o, d, group.triangle(p), ray.tmin as f64, tmax, 0.0)
            {
                best = Some(CpuHit {
                    group: g as u32,
                    prim: p as u32,
                    t,
                    u,
                    v,
                });
            }
        }
    }
    best
}

pub fn make_rays(scene: &Scene, count: usize, seed: u64) -> Vec<Ray> {
    let mut rng = Rng(seed);
    let b = scene.bounds();
    let (lo, hi) = (b.min_v() - 1.0, b.max_v() + 1.0);
    let nonempty: Vec<usize> = (0..scene.groups.len())
        .filter(|&g| scene.groups[g].triangle_count() > 0)
        .collect();
    (0..count)
        .map(|i| {
            let origin = Vec3::new(
                rng.range(lo.x, hi.x),
                rng.range(lo.y, hi.y),
                rng.range(lo.z, hi.z),
            );
            let dir = if i % 2 == 0 {
                // Aimed at a random point inside a random triangle: mostly hits.
                let g = &scene.groups[nonempty[rng.below(nonempty.len())]];
                let [a, b, c] = g.triangle(rng.below(g.triangle_count()));
                let (mut u, mut v) = (rng.f32(), rng.f32());
                if u + v > 1.0 {
                    (u, v) = (1.0 - u, 1.0 - v);
                }
                a + (b - a) * u + (c - a) * v - origin
            } else {
                rng.vec(-1.0, 1.0)
            };
            Ray {
                origin: origin.into(),
                tmin: 0.0,
                dir: dir.into(),
                tmax: 1e16,
            }
        })
        .collect()
}

/// Whether a hit whose barycentrics differ from the oracle's by more than 1e-3 is still a right
/// answer in f32: the ray runs within 1/100 of the triangle's plane (on the H200, ray 700 of the
/// threaded test met its triangle at 0.046 degrees), where the hit point along the ray, and so
/// the barycentrics, are ill-conditioned, and the GPU's point (its barycentrics on the
/// triangle) lies on the ray to f32 precision (within 1e-6 of the coordinates' magnitude) and
/// at the oracle's distance (within 1e-4). A wrong triangle, or wrong vertices, misses these
/// bounds by orders of magnitude.
pub fn grazing_hit_on_the_ray(ray: &Ray, tri: [Vec3; 3], (u, v): (f64, f64), t: f64) -> bool {
    let o = Vec3::from(ray.origin).as_dvec3();
    let d = Vec3::from(ray.dir).as_dvec3();
    let [a, b, c] = tri.map(|p| p.as_dvec3());
    let normal = (b - a).cross(c - a);
    if normal.length() == 0.0 || d.length() == 0.0 {
        return false;
    }
    let cos = normal.normalize().dot(d.normalize()).abs();
    let p = a + (b - a) * u + (c - a) * v;
    let along = (p - o).dot(d) / d.length_squared();
    let off_ray = (p - (o + d * along)).length();
    let magnitude = o.abs().max_element() + (d * t).abs().max_element();
    cos < 0.01
        && u >= -1e-3
        && v >= -1e-3
        && u + v <= 1.0 + 1e-3
        && off_ray <= 1e-6 * magnitude.max(1.0)
        && (along - t).abs() <= 1e-4 * t.max(1e-6)
}

/// Compares GPU hits with the CPU's. Exact agreement is required except at shared edges, where
/// the GPU's watertight test may pick the neighbour: such a hit counts as a tie only if the
/// CPU also finds the GPU's triangle at the same distance with a hair of slack. Barycentrics
/// agree within 1e-3, except on grazing hits ([`grazing_hit_on_the_ray`]), which must be rare.
pub fn compare(
    scene: &Scene,
    rays: &[Ray],
    cpu: &[Option<CpuHit>],
    gpu: &[RayHit],
    mode: &str,
    merged: bool,
) {
    assert_eq!(gpu.len(), rays.len(), "{mode}");
    let mut ties = 0;
    let mut grazings = 0;
    let mut hits = 0;
    for (i, ((ray, c), g)) in rays.iter().zip(cpu).zip(gpu).enumerate() {
        if !merged && !g.is_miss() {
            assert_eq!(
                g.instance, g.group,
                "{mode}: ray {i}: unmerged GAS instance id is not its group"
            );
        }
        match c {
            Some(c) if !g.is_miss() && c.group == g.group && c.prim == g.prim => {
                hits += 1;
                let rel = (g.t as f64 - c.t).abs() / c.t.max(1e-6);
                assert!(
                    rel <= 1e-4,
                    "{mode}: ray {i}: t gpu {} cpu {} (rel {rel:e})",
                    g.t,
                    c.t
                );
                let close = (g.u as f64 - c.u).abs() <= 1e-3 && (g.v as f64 - c.v).abs() <= 1e-3;
                let grazing = !close
                    && grazing_hit_on_the_ray(
                        ray,
                        scene.groups[c.group as usize].triangle(c.prim as usize),
                        (g.u as f64, g.v as f64),
                        c.t,
                    );
                assert!(
                    close || grazing,
                    "{mode}: ray {i}: barycentrics gpu ({}, {}) cpu ({}, {})",
                    g.u,
                    g.v,
                    c.u,
                    c.v
                );
                if grazing {
                    grazings += 1;
                }
            }
            None if g.is_miss() => {}
            _ => {
                let o = Vec3::from(ray.origin).as_dvec3();
                let d = Vec3::from(ray.dir).as_dvec3();
                let tie = !g.is_miss()
                    && (g.group as usize) < scene.groups.len()
                    && (g.prim as usize) < scene.groups[g.group as usize].triangle_count()
                    && intersect(
                        o,
                        d,
                        scene.groups[g.group as usize].triangle(g.prim as usize),
                        0.0,
                        1e300,
                        1e-5,
                    )
                    .is_some_and(|(t, _, _)| {
                        c.is_none_or(|c| (t - c.t).abs() <= 1e-4 * c.t.max(1e-6))
                    });
                let grazing_miss =
                    g.is_miss() && c.is_some_and(|c| c.u.min(c.v).min(1.0 - c.u - c.v) < 1e-5);
                assert!(tie || grazing_miss, "{mode}: ray {i}: gpu {g:?} cpu {c:?}");
                ties += 1;
            }
        }
    }
    assert!(
        ties <= 2 + rays.len() / 200,
        "{mode}: {ties} edge ties of {} rays",
        rays.len()
    );
    assert!(
        grazings <= 2 + rays.len() / 200,
        "{mode}: {grazings} grazing hits whose barycentrics differ of {} rays",
        rays.len()
    );
    assert!(
        hits > rays.len() / 3,
        "{mode}: only {hits} of {} rays hit: the test rays are wrong",
        rays.len()
    );
}

/// Appends `what` to the file `$GASWORKS_TEST_PROGRESS` names (scripts/gpu-session.sh sets it),
/// so that when a batch hangs and the test binary is killed, the last line names the
/// configuration it hung in (libtest's captured output dies with the process).
pub fn progress(what: &str) {
    use std::io::Write;
    let Some(path) = std::env::var_os("GASWORKS_TEST_PROGRESS") else {
        return;
    };
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let test = std::thread::current().name().unwrap_or("?").to_string();
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{stamp:.3} {test}: {what}");
    }
}

pub fn context(abi: Option<u32>) -> Arc<DeviceContext> {
    let gpu = Gpu::open(0).expect("an NVIDIA GPU");
    DeviceContext::new(
        &gpu,
        &ContextOptions::from_cli(abi, false).expect("ABI option"),
    )
    .expect("OptiX context")
}

/// Builds the sponza-like scene `runs` times in each of `configs` (which should set
/// `guard_bytes`), and fails, naming the configuration, the run and the builds, if any build
/// wrote into a guard band, or got no handle.
pub fn assert_batches_stay_in_their_ranges(
    ctx: &Arc<DeviceContext>,
    configs: &[AccelOptions],
    runs: usize,
) {
    let scene = sponza_like(SPONZA_LIKE_GROUPS, SPONZA_LIKE_TRIANGLES, 1).expect("sponza-like");
    let gpu = ctx.gpu();
    let upload = gpu.new_stream().expect("stream");
    let geometry = DeviceGeometry::upload(gpu, &upload, &scene).expect("geometry");
    let triangles: Vec<u64> = scene
        .groups
        .iter()
        .map(|g| g.triangle_count() as u64)
        .collect();
    for o in configs {
        assert!(o.guard_bytes > 0, "{o:?}: no guard bands to check");
        let table = group_gases(&triangles, &o.merge);
        let mut batch = GasBatch::prepare(ctx, &geometry, table, o).expect("prepare");
        let set = StreamSet::new(gpu, o.streams).expect("streams");
        batch.arm_guards(set.main()).expect("arm guards");
        for run in 0..runs {
            progress(&format!("guards, run {run}: {o:?}"));
            let handles = batch.enqueue(&set).expect("enqueue");
            assert!(
                handles.iter().all(|&h| h != 0),
                "{o:?}: a build got no handle"
            );
            let written = batch.written_guards(&set).expect("read guards");
            assert!(
                written.is_empty(),
                "{o:?}, run {run}: {}",
                written
                    .iter()
                    .map(|(g, span)| batch.describe_guard(g, *span))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
    }
}

/// Builds `scene` in each of `modes` (name, options), casts `rays` seeded rays into it and
/// compares every hit with the oracle's; checks the build's statistics on the way.
pub fn check_scene(
    ctx: &Arc<DeviceContext>,
    scene: &Scene,
    rays: usize,
    modes: &[(String, AccelOptions)],
) {
    let rays = make_rays(scene, rays, 99);
    let cpu: Vec<Option<CpuHit>> = rays.iter().map(|r| brute_force(scene, r)).collect();
    let pipeline = RaycastPipeline::new(ctx).expect("raycast pipeline");
    for (name, o) in modes {
        progress(&format!("ray casts, {name}: {o:?}"));
        let accel = Accel::build(ctx, scene, o).unwrap_or_else(|e| panic!("{name}: build: {e}"));
        let s = accel.stats();
        assert_eq!(s.groups, scene.groups.len());
        if let Some(c) = s.compacted_bytes {
            assert!(
                c <= s.output_bytes,
                "{name}: compacted {c} > output {}",
                s.output_bytes
            );
        }
        if o.merge.merge_below == 0 {
            assert_eq!(
                s.gases,
                scene
                    .groups
                    .iter()
                    .filter(|g| g.triangle_count() > 0)
                    .count()
            );
        } else {
            assert!(
                s.gases < scene.groups.len(),
                "{name}: merging merged nothing"
            );
        }
        let gpu = pipeline
            .cast(&accel, &rays)
            .unwrap_or_else(|e| panic!("{name}: cast: {e}"));
        compare(scene, &rays, &cpu, &gpu, name, o.merge.merge_below > 0);
    }
}
