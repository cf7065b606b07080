//! The CPU path tracer: furnace tests (energy conservation), an analytic direct-lighting
//! check of next-event estimation with MIS, and bit-for-bit determinism under any thread
//! count, tile order and pass split.
//!
//! Statistical bound used throughout: with `n` samples of mean `m` and sample standard
//! deviation `s`, the standard error is `se = s / sqrt(n)`; a test asserts, per channel,
//! `|m - expected| < 4 se + 1e-4 expected`. The 4-sigma band fails a correct renderer with
//! probability about 6e-5 per channel (normal approximation; the samples are deterministic, so
//! a test that passes once always passes), and the `1e-4` relative allowance covers float
//! rounding and the (negligible, stated per test) truncation bias of `max_depth`.

mod cpu_common;

use cpu_common::*;
use gasworks::cpu::integrator::{LightSampler, PathTracer};
use gasworks::cpu::{CpuBackend, SceneBvh};
use gasworks::render::{RenderSettings, Sampler, Tile, TileRenderer};
use gasworks::scene::{Environment, Material, PixelFilter, Scene};
use glam::{DVec3, Vec3};

fn assert_converges(what: &str, values: impl IntoIterator<Item = Vec3>, expected: Vec3) {
    let (mean, se, n) = mean_and_se(values);
    let e = expected.as_dvec3();
    for c in 0..3 {
        let bound = 4.0 * se[c] + 1e-4 * e[c].abs();
        assert!(
            (mean[c] - e[c]).abs() < bound,
            "{what}: channel {c}: mean {} +- {} (n = {n}), expected {}",
            mean[c],
            se[c],
            e[c]
        );
    }
    eprintln!("{what}: mean {mean:?} se {se:?} expected {e:?} (n = {n})");
}

/// Every sample of every pixel of a `w` x `h` frame.
fn all_samples(backend: &CpuBackend, w: u32, h: u32, spp: u32) -> Vec<Vec3> {
    let mut v = Vec::with_capacity((w * h * spp) as usize);
    for y in 0..h {
        for x in 0..w {
            for s in 0..spp {
                v.push(backend.sample(x, y, s));
            }
        }
    }
    v
}

/// [`look`] with the seed these tests use.
fn settings_looking_at(
    eye: Vec3,
    at: Vec3,
    w: u32,
    h: u32,
    spp: u32,
    max_depth: u32,
) -> RenderSettings {
    look(eye, at, w, h, spp, max_depth, 11)
}

/// Sets a uniform environment (the scenes here have no emitter).
fn with_environment(mut scene: Scene, radiance: Vec3) -> Scene {
    scene.environment = Some(Environment { radiance });
    scene
}

const ENV: Vec3 = FURNACE_ENV;

/// White furnace: two white (Kd = 1) diffuse spheres and a white floor square, lit by a
/// uniform environment `L`, converge to `L` in every pixel: a lossless scene in a uniform
/// field is invisible. Paths bounce between the objects, so Russian roulette and the
/// diffuse sampling weights are exercised. Truncation at 64 segments: a path must reflect 63
/// times without escaping, which the open geometry makes negligible (< 1e-6).
#[test]
fn white_furnace_diffuse_objects_vanish_in_a_uniform_environment() {
    let scene = diffuse_furnace();
    let s = settings_looking_at(
        Vec3::new(0.0, 1.5, -3.0),
        Vec3::new(0.0, 0.4, 0.0),
        16,
        16,
        64,
        64,
    );
    let backend = CpuBackend::new(&scene, &s).unwrap();
    assert_converges("diffuse furnace", all_samples(&backend, 16, 16, 64), ENV);
    assert_eq!(backend.dropped_samples(), 0);
}

/// The same with a perfect mirror sphere (Ks = 1): every path returns `L`.
#[test]
fn white_furnace_mirror_sphere() {
    let scene = mirror_furnace();
    let s = settings_looking_at(Vec3::new(0.0, 0.5, -3.0), Vec3::ZERO, 16, 16, 32, 64);
    let backend = CpuBackend::new(&scene, &s).unwrap();
    assert_converges("mirror furnace", all_samples(&backend, 16, 16, 32), ENV);
}

/// The same with a glass sphere (ior 1.5, white transmittance): Fresnel reflection plus
/// refraction conserve energy, and the radiance scaling by `eta^2` on entering cancels on
/// leaving. Internal reflections make paths long and Russian roulette acts on the
/// `1 / 1.5^2` throughput inside, so the samples vary. Truncation at 64 segments: light
/// trapped by 60 internal reflections in a row (probability < 0.2^30) is negligible.
#[test]
fn white_furnace_glass_sphere() {
    let scene = glass_furnace();
    let s = settings_looking_at(Vec3::new(0.0, 0.5, -3.0), Vec3::ZERO, 16, 16, 64, 64);
    let backend = CpuBackend::new(&scene, &s).unwrap();
    let samples = all_samples(&backend, 16, 16, 64);
    let (_, se, _) = mean_and_se(samples.iter().copied());
    assert!(se.x > 0.0, "glass paths should vary");
    assert_converges("glass furnace", samples, ENV);
}

/// Shading normals never create energy, and lose exactly what the geometry says: a white
/// diffuse sphere with smooth per-vertex normals in the furnace. A camera ray that hits the
/// (convex) sphere is reflected once and escapes, so each sample is `L` or 0: 0 when the
/// direction sampled around the shading normal falls below the triangle's plane. For cosine
/// sampling around a normal tilted by `delta` from the plane's normal that happens with
/// probability `(1 - cos delta) / 2` (Malley's method maps the refused directions to the
/// region between the unit disk and the ellipse of semi-axes `cos delta` and 1, half of it).
/// The expected image mean is therefore `L (1 - E[(1 - cos delta) / 2])`, the expectation over
/// where the camera rays land: computed here by tracing 4 x 4 rays per pixel through the
/// camera model against every triangle in f64 (Moller-Trumbore), with the shading normal
/// interpolated and oriented as `ShadingFrame` documents it (flipped to the geometric normal's
/// side, replaced by it when it faces away from the camera). Bound: 4 se + 1e-4 L (the
/// quadrature error of 16 rays per pixel on this smooth loss is far smaller than se).
#[test]
fn smooth_shading_normals_lose_exactly_what_their_tilt_refuses() {
    let white = Material::diffuse("white", Vec3::ONE);
    let scene = with_environment(
        Scene::new(
            "smooth",
            vec![sphere("s", Vec3::ZERO, 1.0, 8, 16, 0, true)],
            vec![white],
        ),
        ENV,
    );
    let s = settings_looking_at(Vec3::new(0.0, 0.5, -3.0), Vec3::ZERO, 16, 16, 32, 64);
    let g = &scene.groups[0];
    let cam = &s.camera;
    let eye = cam.eye.as_dvec3();
    let sub = 4;
    let (mut loss, mut rays, mut hits) = (0.0f64, 0usize, 0usize);
    for py in 0..s.height {
        for px in 0..s.width {
            for j in 0..sub {
                for i in 0..sub {
                    let sx =
                        2.0 * (px as f64 + (i as f64 + 0.5) / sub as f64) / s.width as f64 - 1.0;
                    let sy =
                        1.0 - 2.0 * (py as f64 + (j as f64 + 0.5) / sub as f64) / s.height as f64;
                    let d = (cam.w.as_dvec3() + sx * cam.u.as_dvec3() + sy * cam.v.as_dvec3())
                        .normalize();
                    rays += 1;
                    // Closest hit by brute force (Moller-Trumbore in f64).
                    let mut best: Option<(f64, usize, f64, f64)> = None;
                    for (k, tri) in g.indices.iter().enumerate() {
                        let [a, b, c] = tri.map(|v| g.positions[v as usize].as_dvec3());
                        let (e1, e2) = (b - a, c - a);
                        let p = d.cross(e2);
                        let det = e1.dot(p);
                        if det.abs() < 1e-14 {
                            continue;
                        }
                        let tv = eye - a;
                        let u = tv.dot(p) / det;
                        let q = tv.cross(e1);
                        let v = d.dot(q) / det;
                        let t = e2.dot(q) / det;
                        if u >= 0.0
                            && v >= 0.0
                            && u + v <= 1.0
                            && t > 1e-9
                            && best.is_none_or(|(bt, ..)| t < bt)
                        {
                            best = Some((t, k, u, v));
                        }
                    }
                    let Some((_, k, u, v)) = best else {
                        continue;
                    };
                    hits += 1;
                    let tri = g.indices[k];
                    let [a, b, c] = tri.map(|v| g.positions[v as usize].as_dvec3());
                    let [n0, n1, n2] = tri.map(|v| g.normals[v as usize].as_dvec3());
                    let wo = -d;
                    let mut n_geo = (b - a).cross(c - a).normalize();
                    if wo.dot(n_geo) < 0.0 {
                        n_geo = -n_geo;
                    }
                    let mut n = ((1.0 - u - v) * n0 + u * n1 + v * n2).normalize();
                    if n.dot(n_geo) < 0.0 {
                        n = -n;
                    }
                    if wo.dot(n) <= 0.0 {
                        n = n_geo;
                    }
                    loss += (1.0 - n.dot(n_geo)) / 2.0;
                }
            }
        }
    }
    assert!(
        hits > rays / 4,
        "the sphere fills much of the view: {hits} of {rays}"
    );
    let kept = 1.0 - loss / rays as f64;
    assert!(kept < 0.9999, "the tilt refuses something: {kept}");
    let backend = CpuBackend::new(&scene, &s).unwrap();
    let (mean, se, _) = mean_and_se(all_samples(&backend, 16, 16, 32));
    eprintln!("smooth sphere: mean {mean:?} se {se:?}; expected {kept} of L");
    for c in 0..3 {
        let expected = ENV[c] as f64 * kept;
        assert!(
            (mean[c] - expected).abs() < 4.0 * se[c] + 1e-4 * ENV[c] as f64,
            "channel {c}: {} +- {}, expected {expected}",
            mean[c],
            se[c]
        );
    }
}

/// Closed furnace: the camera inside a closed sphere whose every triangle emits `Le` and
/// reflects diffusely with albedo `a` sees `Le / (1 - a)` everywhere (the sum of `a^k Le`).
/// Every surface is an area light here, so this exercises next-event estimation (hundreds of
/// lights picked by power), MIS against BSDF hits on emitters, and Russian roulette on a
/// decaying throughput. Truncation at 40 segments leaves out `a^40 Le / (1 - a)`, about 1e-12.
/// The sphere is wound inwards: lights emit from their front face only.
#[test]
fn closed_furnace_emissive_sphere_converges_to_le_over_one_minus_albedo() {
    let a = 0.5;
    let le = Vec3::new(1.0, 0.5, 0.25);
    let mut m = Material::diffuse("glow", Vec3::splat(a));
    m.emission = le;
    let mut inside_out = sphere("s", Vec3::ZERO, 1.0, 12, 24, 0, false);
    for t in &mut inside_out.indices {
        t.swap(1, 2);
    }
    let scene = Scene::new("closed", vec![inside_out], vec![m]);
    assert!(scene.environment.is_none() && scene.lights.len() > 200);
    let s = settings_looking_at(
        Vec3::new(0.1, -0.2, 0.3),
        Vec3::new(0.0, 0.0, 1.0),
        12,
        12,
        48,
        40,
    );
    let backend = CpuBackend::new(&scene, &s).unwrap();
    assert_converges(
        "closed furnace",
        all_samples(&backend, 12, 12, 48),
        le / (1.0 - a),
    );
    // With max_depth 1 only the emitters seen directly count: exactly Le.
    let s1 = RenderSettings { max_depth: 1, ..s };
    let b1 = CpuBackend::new(&scene, &s1).unwrap();
    assert_converges("closed furnace, depth 1", all_samples(&b1, 12, 12, 2), le);
    // With max_depth 2, one bounce: Le + a Le.
    let s2 = RenderSettings { max_depth: 2, ..s };
    let b2 = CpuBackend::new(&scene, &s2).unwrap();
    assert_converges(
        "closed furnace, depth 2",
        all_samples(&b2, 12, 12, 48),
        le * (1.0 + a),
    );
}

/// Irradiance at `p` (normal `n`) from a uniformly emitting convex polygon of radiance `le`,
/// by Lambert's formula: `E = le / 2 * |sum_i angle(v_i, v_i+1) n . normalize(v_i x v_i+1)|`,
/// `v_i` the unit vectors from `p` to the vertices.
fn polygon_irradiance(p: Vec3, n: Vec3, vertices: &[Vec3], le: f64) -> f64 {
    let v: Vec<DVec3> = vertices
        .iter()
        .map(|&q| (q - p).as_dvec3().normalize())
        .collect();
    let n = n.as_dvec3();
    let mut sum = 0.0;
    for i in 0..v.len() {
        let (a, b) = (v[i], v[(i + 1) % v.len()]);
        sum += a.dot(b).clamp(-1.0, 1.0).acos() * n.dot(a.cross(b).normalize());
    }
    0.5 * le * sum.abs()
}

/// Next-event estimation and MIS against the closed form: a diffuse floor (albedo 0.5) under
/// a square emitter (radiance 3, black, 2 x 2 at height 1), `max_depth = 2` (direct light
/// only). The radiance leaving a floor point is `albedo / pi * E` with `E` from Lambert's
/// polygon formula, at the point under the centre and at two points off to the side where the
/// emitter is seen at grazing angles (where BSDF sampling carries more of the MIS weight).
#[test]
fn direct_lighting_matches_lamberts_polygon_formula() {
    let albedo = 0.5f32;
    let le = 3.0f32;
    let floor = Material::diffuse("floor", Vec3::splat(albedo));
    let mut lamp = Material::diffuse("lamp", Vec3::ZERO);
    lamp.emission = Vec3::splat(le);
    let corners = [
        Vec3::new(-1.0, 1.0, -1.0),
        Vec3::new(1.0, 1.0, -1.0),
        Vec3::new(1.0, 1.0, 1.0),
        Vec3::new(-1.0, 1.0, 1.0),
    ];
    let scene = Scene::new(
        "direct",
        vec![
            quad(
                "floor",
                Vec3::new(-10.0, 0.0, -10.0),
                Vec3::new(0.0, 0.0, 20.0),
                Vec3::new(20.0, 0.0, 0.0),
                0,
            ),
            quad(
                "lamp",
                corners[0],
                Vec3::new(2.0, 0.0, 0.0),
                Vec3::new(0.0, 0.0, 2.0),
                1,
            ),
        ],
        vec![floor, lamp],
    );
    let bvh = SceneBvh::build(&scene);
    let lights = LightSampler::new(&scene);
    let tracer = PathTracer {
        scene: &scene,
        bvh: &bvh,
        lights: &lights,
        max_depth: 2,
    };
    for (k, p) in [
        Vec3::ZERO,
        Vec3::new(1.6, 0.0, 0.4),
        Vec3::new(3.0, 0.0, -2.5),
    ]
    .into_iter()
    .enumerate()
    {
        let expected = albedo as f64 / std::f64::consts::PI
            * polygon_irradiance(p, Vec3::Y, &corners, le as f64);
        let origin = p + Vec3::new(0.0, 0.05, 0.0);
        let samples = (0..40_000u32).map(|s| {
            let mut rng = Sampler::new(k as u32, 0, s, 40_000, 5);
            tracer.radiance(origin, -Vec3::Y, &mut rng)
        });
        assert_converges(
            &format!("direct light at {p}"),
            samples,
            Vec3::splat(expected as f32),
        );
    }
}

/// The reference film: one thread, tiles in row-major order, all samples in one pass.
fn reference(backend: &CpuBackend, s: &RenderSettings) -> gasworks::render::Film {
    render_film(backend, s, &Tile::grid(s.width, s.height, 8), &[s.spp], 1)
}

fn assert_same_bits(a: &gasworks::render::Film, b: &gasworks::render::Film, what: &str) {
    assert_eq!((a.width, a.height), (b.width, b.height));
    for (i, (p, q)) in a.pixels.iter().zip(&b.pixels).enumerate() {
        assert_eq!(
            p.map(f32::to_bits),
            q.map(f32::to_bits),
            "{what}: pixel {i}"
        );
    }
}

#[test]
fn films_are_bit_identical_across_thread_counts() {
    let scene = cornell_like();
    let s = cornell_settings(40, 30, 6, 6, 3);
    let backend = CpuBackend::new(&scene, &s).unwrap();
    let base = reference(&backend, &s);
    assert!(base.pixels.iter().all(|p| p[3] == 6.0));
    assert!(
        base.pixels.iter().filter(|p| p[0] > 0.0).count() > 600,
        "the image is mostly lit"
    );
    let tiles = Tile::grid(40, 30, 8);
    for threads in [2, 4] {
        let f = render_film(&backend, &s, &tiles, &[6], threads);
        assert_same_bits(&base, &f, &format!("{threads} threads"));
    }
}

#[test]
fn films_are_bit_identical_whatever_the_tile_order_and_size() {
    let scene = cornell_like();
    let s = cornell_settings(40, 30, 6, 6, 3);
    let backend = CpuBackend::new(&scene, &s).unwrap();
    let base = reference(&backend, &s);
    let mut tiles = Tile::grid(40, 30, 8);
    // A fixed shuffle (Fisher-Yates driven by the sampler).
    let mut rng = Rng::new(99);
    for i in (1..tiles.len()).rev() {
        let j = (rng.f() * (i + 1) as f32) as usize;
        tiles.swap(i, j.min(i));
    }
    assert_ne!(tiles, Tile::grid(40, 30, 8));
    assert_same_bits(
        &base,
        &render_film(&backend, &s, &tiles, &[6], 3),
        "shuffled tiles",
    );
    let other = Tile::grid(40, 30, 7);
    assert_same_bits(
        &base,
        &render_film(&backend, &s, &other, &[6], 2),
        "7-pixel tiles",
    );
}

#[test]
fn films_are_bit_identical_when_rendered_in_passes() {
    let scene = cornell_like();
    let s = cornell_settings(40, 30, 6, 6, 3);
    let backend = CpuBackend::new(&scene, &s).unwrap();
    let base = reference(&backend, &s);
    let tiles = Tile::grid(40, 30, 8);
    let f = render_film(&backend, &s, &tiles, &[2, 3, 6], 2);
    assert_same_bits(&base, &f, "passes 0..2, 2..3, 3..6");
    // And another seed gives another image.
    let s2 = RenderSettings { seed: 4, ..s };
    let other = reference(&CpuBackend::new(&scene, &s2).unwrap(), &s2);
    assert_ne!(base, other);
}

#[test]
fn bad_tiles_are_errors_not_panics() {
    use gasworks::render::TileRenderer;
    let scene = cornell_like();
    let s = cornell_settings(16, 16, 1, 2, 0);
    let backend = CpuBackend::new(&scene, &s).unwrap();
    let outside = Tile {
        x: 8,
        y: 8,
        w: 16,
        h: 4,
    };
    assert!(backend
        .render_tile(outside, 0..1, &mut vec![[0.0; 4]; 64])
        .is_err());
    let t = Tile {
        x: 0,
        y: 0,
        w: 4,
        h: 4,
    };
    assert!(backend
        .render_tile(t, 0..1, &mut vec![[0.0; 4]; 15])
        .is_err());
    assert!(backend
        .render_tile(t, 0..1, &mut vec![[0.0; 4]; 16])
        .is_ok());
}

/// A black square over the left half of the view from the origin along -Z, at depth 1 (its
/// edge on the view's centre line), in front of a uniform environment: the scene and the
/// environment's radiance.
fn edge_scene() -> (Scene, Vec3) {
    let l = Vec3::new(0.5, 0.8, 1.2);
    let square = quad(
        "left",
        Vec3::new(-50.0, -50.0, -1.0),
        Vec3::new(50.0, 0.0, 0.0),
        Vec3::new(0.0, 100.0, 0.0),
        0,
    );
    let scene = with_environment(
        Scene::new(
            "edge",
            vec![square],
            vec![Material::diffuse("black", Vec3::ZERO)],
        ),
        l,
    );
    (scene, l)
}

/// The pixel filter decides which pixels see an edge: a black square over the left half of
/// the view in front of a uniform environment, at depth 1 (so a pixel is the environment's
/// radiance times the share of its samples that miss the square). The edge lies on a pixel
/// boundary. With the box filter the pixels on either side are exactly black and exactly
/// the environment; with the tent (radius 1) both take a share of the other side, the
/// pixels a whole pixel further away do not, and both sides' shares are as the tent's
/// area beyond the edge (1/8 of it) says, to the sampler's stratification.
#[test]
fn the_tent_filter_spreads_an_edge_over_the_pixels_beside_it_and_no_further() {
    let (scene, l) = edge_scene();
    // 8 columns: x = 0 (the view's centre) is the boundary between columns 3 and 4.
    let mut s = look(Vec3::ZERO, Vec3::new(0.0, 0.0, -1.0), 8, 4, 64, 1, 3);
    // The share of column x's samples (row 1) that see the environment: each sample sees
    // either it or the black square.
    let column = |s: &RenderSettings, x: u32| -> f64 {
        let backend = CpuBackend::new(&scene, s).unwrap();
        let seen = (0..s.spp)
            .map(|i| backend.sample(x, 1, i))
            .inspect(|&v| assert!(v == l || v == Vec3::ZERO, "{v}"))
            .filter(|&v| v == l)
            .count();
        seen as f64 / s.spp as f64
    };
    assert_eq!([2, 3, 4, 5].map(|x| column(&s, x)), [0.0, 0.0, 1.0, 1.0]);
    s.camera.filter = PixelFilter::Tent;
    assert_eq!(column(&s, 2), 0.0, "the tent reaches 1 pixel, not 1.5");
    assert_eq!(column(&s, 5), 1.0);
    // The tent centred half a pixel from the edge has 1/8 of its area beyond it.
    let (beyond, short) = (column(&s, 3), 1.0 - column(&s, 4));
    for share in [beyond, short] {
        assert!((share - 0.125).abs() < 0.02, "{beyond} {short}");
    }
}

/// A thin lens blurs an edge off the plane of focus by exactly its circle of confusion, and
/// keeps it sharp on that plane: the black square over the left half of the view (as above)
/// at depth 1, in front of a uniform environment, at depth 1 of the path.
///
/// A ray from lens point `L` (a uniform point of the disk of radius `R`) through image-plane
/// point `s` crosses depth `z` at `s z + L (1 - z / F)` across the view, for focus distance
/// `F`: at the square (`z = 1`) an image point at `d` pixels right of the edge sees the
/// environment when `d + X > 0`, `X` the lens point's horizontal offset scaled by
/// `|1 - 1/F|` into pixels, a disk of radius `r`. So a column's share is the mean over its
/// pixel width of `P(X < d)` for a uniform disk, `1/2 + (t sqrt(1 - t^2) + asin t) / pi` at
/// `t = d / r`: each column within `r` pixels of the edge is checked against it (4 standard
/// errors, as the module's bound), and columns further than `r + 1` pixels away must be
/// exactly pure.
#[test]
fn a_thin_lens_blurs_an_edge_by_its_circle_of_confusion_and_keeps_the_focus_plane_sharp() {
    let (scene, l) = edge_scene();
    let (w, rows, spp) = (32u32, 8u32, 1024u32);
    let mut s = look(Vec3::ZERO, Vec3::new(0.0, 0.0, -1.0), w, rows, spp, 1, 5);
    // Pixels per unit of the image plane at distance 1.
    let pixels_per_unit = w as f64 / (2.0 * s.camera.u.length() as f64);
    // The share of column x's samples (over every row) that see the environment.
    let column = |s: &RenderSettings, x: u32| -> f64 {
        let backend = CpuBackend::new(&scene, s).unwrap();
        let mut seen = 0usize;
        for y in 0..rows {
            for i in 0..s.spp {
                let v = backend.sample(x, y, i);
                assert!(v == l || v == Vec3::ZERO, "{v}");
                seen += usize::from(v == l);
            }
        }
        seen as f64 / (rows * s.spp) as f64
    };
    // In focus (F = 1, the square's depth): the box's columns, pure on either side.
    s.camera.set_thin_lens(0.05, 1.0).unwrap();
    assert_eq!(
        [13, 14, 15, 16, 17, 18].map(|x| column(&s, x)),
        [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    );
    // Focused at 2: the circle of confusion at the square is R |1 - 1/F| = R / 2 on the plane
    // at distance 1; R is chosen to make it 4.5 pixels.
    let r = 4.5;
    let radius = (2.0 * r / pixels_per_unit) as f32;
    s.camera.set_thin_lens(radius, 2.0).unwrap();
    let disk_cdf = |d: f64| -> f64 {
        let t = (d / r).clamp(-1.0, 1.0);
        0.5 + (t * (1.0 - t * t).sqrt() + t.asin()) / std::f64::consts::PI
    };
    for x in 0..w {
        // Column x spans d in [x - 16, x - 15] pixels from the edge (x = 16 is its image).
        let d0 = x as f64 - 16.0;
        let got = column(&s, x);
        if d0 + 1.0 < -(r + 1.0) || d0 > r + 1.0 {
            assert_eq!(got, if d0 < 0.0 { 0.0 } else { 1.0 }, "column {x}");
            continue;
        }
        let steps = 1000;
        let want = (0..steps)
            .map(|k| disk_cdf(d0 + (k as f64 + 0.5) / steps as f64))
            .sum::<f64>()
            / steps as f64;
        let n = (rows * spp) as f64;
        let se = (want * (1.0 - want) / n).sqrt().max(0.5 / n);
        assert!(
            (got - want).abs() < 4.0 * se + 1e-4,
            "column {x}: {got} of its samples see the environment, the lens says {want} (se {se})"
        );
    }
}

/// The scene's BVH shared by the CPU backend and the `--aov` layers ([`SharedBvh`]): however
/// many ask for it at once, one is built and every one of them gets it; a backend on it counts
/// the build as before its setup only where the BVH was held before it asked (the probe's),
/// not where it built it or waited for another's build (that time is inside its setup).
#[test]
fn a_shared_bvh_is_built_once_and_its_build_counted_once() {
    use gasworks::cpu::SharedBvh;
    use std::sync::Arc;
    let scene = Arc::new(cornell_like());
    let s = cornell_settings(8, 8, 1, 2, 0);
    let shared = SharedBvh::default();
    let got: Vec<Arc<SceneBvh>> = std::thread::scope(|scope| {
        let askers: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| shared.get_or_build(&scene)))
            .collect();
        askers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        got.iter().all(|b| Arc::ptr_eq(b, &got[0])),
        "more than one BVH built"
    );
    let backend = CpuBackend::on_shared(scene.clone(), &s, &shared).unwrap();
    assert_eq!(
        backend.bvh_seconds_before_setup(),
        got[0].stats().seconds,
        "held before: its build counted"
    );
    assert!(Arc::ptr_eq(&shared.get().unwrap(), &got[0]));

    let fresh = SharedBvh::default();
    let building = CpuBackend::on_shared(scene.clone(), &s, &fresh).unwrap();
    assert_eq!(
        building.bvh_seconds_before_setup(),
        0.0,
        "built inside the setup"
    );
    let built = fresh.get().expect("the backend's build is shared");
    assert_eq!(
        Arc::strong_count(&built),
        3,
        "the cell, the backend, and `built`"
    );

    // Bad settings cost no build.
    let bad = RenderSettings { spp: 0, ..s };
    let untouched = SharedBvh::default();
    assert!(CpuBackend::on_shared(scene, &bad, &untouched).is_err());
    assert!(untouched.get().is_none());
}

/// The CPU backend's `rays_traced` counts each closest-hit and shadow ray once: camera rays alone at
/// depth 1, and at depth 4 exactly the rays of the path steps replayed one by one.
#[test]
fn traced_rays_count_every_ray_once() {
    use gasworks::cpu::bvh::RayData;
    use gasworks::cpu::integrator::pixel_ray;
    use gasworks::render::TileRenderer;
    let scene = cornell_like();
    let (w, h, spp) = (12, 10, 3);
    for max_depth in [1, 4] {
        let s = cornell_settings(w, h, spp, max_depth, 5);
        let backend = CpuBackend::new(&scene, &s).unwrap();
        render_film(&backend, &s, &Tile::grid(w, h, 4), &[1, 3], 2);
        let replayed = with_tracer(&scene, max_depth, |tracer| {
            let mut rays = 0u64;
            for (x, y, i) in
                (0..h).flat_map(|y| (0..w).flat_map(move |x| (0..spp).map(move |i| (x, y, i))))
            {
                let mut rng = Sampler::new(x, y, i, spp, s.seed);
                let (o, d) = pixel_ray(&s.camera, (x, y), &mut rng);
                let mut path = tracer.start(o, d, rng);
                loop {
                    if let Some(shadow) = path.shadow {
                        rays += 1;
                        path.settle_shadow(tracer.blocks(&shadow.ray));
                    }
                    let Some(ray) = path.ray.and_then(|(o, d)| RayData::new(o, d)) else {
                        break;
                    };
                    rays += 1;
                    let hit = tracer.bvh.intersect_ray(&scene, &ray, 0.0, f32::INFINITY);
                    tracer.advance(&mut path, hit);
                }
            }
            rays
        });
        let samples = u64::from(w * h * spp);
        assert_eq!(
            backend.rays_traced(),
            Some(replayed),
            "max depth {max_depth}"
        );
        if max_depth == 1 {
            assert_eq!(replayed, samples);
        } else {
            assert!(
                replayed > 2 * samples,
                "{replayed} rays for {samples} samples"
            );
        }
    }
}

/// The tiles trace many samples' paths together (`cpu::wavefront`): each pixel must still get
/// exactly the samples one path at a time gives, added in sample order, and the same rays
/// counted. Frames of several batches, with pixels skipped, Dirac materials, a textured
/// environment map and a uniform one.
#[test]
fn tiles_add_the_samples_of_one_path_at_a_time_bit_for_bit() {
    let mut sky = spheres_under_a_sky();
    sky.environment_map = Some(sun_map(0.3));
    let scenes = [
        (cornell_like(), cornell_settings(24, 20, 5, 6, 7)),
        (sky, sky_settings(24, 5, 8)),
    ];
    for (scene, s) in scenes {
        let backend = CpuBackend::new(&scene, &s).unwrap();
        let tile = Tile {
            x: 0,
            y: 0,
            w: s.width,
            h: s.height,
        };
        let skip: Vec<bool> = (0..tile.w * tile.h).map(|k| k % 7 == 3).collect();
        let mut accum = vec![[0.5f32; 4]; skip.len()];
        backend
            .render_tile_skipping(tile, 1..s.spp, &mut accum, &skip)
            .unwrap();
        let mut rays = 0;
        with_tracer(&scene, s.max_depth, |tracer| {
            for (k, px) in accum.iter().enumerate() {
                let (x, y) = (k as u32 % tile.w, k as u32 / tile.w);
                let mut want = [0.5f32; 4];
                for i in (1..s.spp).filter(|_| !skip[k]) {
                    let l = tracer.sample(&s.camera, (x, y), i, s.spp, s.seed, &mut rays);
                    if l.is_finite() {
                        want[0] += l.x;
                        want[1] += l.y;
                        want[2] += l.z;
                    }
                    want[3] += 1.0;
                }
                assert_eq!(
                    px.map(f32::to_bits),
                    want.map(f32::to_bits),
                    "{}: pixel {k}",
                    scene.source
                );
            }
        });
        assert_eq!(backend.rays_traced(), Some(rays), "{}", scene.source);
    }
}
