//! On an NVIDIA GPU: the batched GAS builds, in every build mode, give an IAS whose ray hits
//! agree with a brute-force CPU intersection: same group, same triangle, distances within a
//! tight relative tolerance. Scenes: random heavy-tailed groups built in memory (sponza-like
//! sizes: many 2-triangle groups, a few large ones) and the Stanford bunny cut into groups.

mod raycast_support;

use glam::Vec3;

use gasworks::optix::accel::{Accel, AccelOptions};
use gasworks::optix::plan::{Assign, MergeOptions, ScratchMode};
use gasworks::optix::raycast::{Ray, RaycastPipeline};
use gasworks::scene::{Group, Material, Scene};
use raycast_support::{
    assert_batches_stay_in_their_ranges, brute_force, bunny_scene, check_scene, compare, context,
    grazing_hit_on_the_ray, make_rays, synthetic_scene, CpuHit,
};

fn all_modes() -> Vec<(String, AccelOptions)> {
    let mut v = Vec::new();
    for streams in [1, 4, 16] {
        for assign in [Assign::RoundRobin, Assign::Lpt] {
            for scratch in [ScratchMode::Shared, ScratchMode::PerStream] {
                for fast_build in [false, true] {
                    for compact in [false, true] {
                        for merge_below in [0, 64] {
                            let o = AccelOptions {
                                streams,
                                fast_build,
                                assign,
                                scratch,
                                compact,
                                merge: MergeOptions::new(merge_below),
                                lpt_build_weight: 0,
                                ..AccelOptions::default()
                            };
                            v.push((format!("{o:?}"), o));
                        }
                    }
                }
            }
        }
    }
    v
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn synthetic_heavy_tailed_scene_agrees_with_cpu_in_every_build_mode() {
    let ctx = context(None);
    let scene = synthetic_scene(1, 300);
    assert!(scene.triangle_count() > 20_000);
    check_scene(&ctx, &scene, 1500, &all_modes());
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn bunny_in_groups_agrees_with_cpu_in_every_build_mode() {
    let Some(scene) = bunny_scene() else {
        eprintln!("bunny.obj not found; skipped");
        return;
    };
    let ctx = context(None);
    check_scene(&ctx, &scene, 1500, &all_modes());
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn abi_87_builds_and_traces_the_same() {
    // OptiX 8.0's function table on the same driver: the --optix-abi 87 switch.
    let ctx = context(Some(87));
    let scene = synthetic_scene(2, 120);
    let rays = make_rays(&scene, 800, 5);
    let cpu: Vec<Option<CpuHit>> = rays.iter().map(|r| brute_force(&scene, r)).collect();
    let pipeline = RaycastPipeline::new(&ctx).expect("raycast pipeline");
    for o in [
        AccelOptions::default(),
        AccelOptions {
            compact: true,
            merge: MergeOptions::new(64),
            ..AccelOptions::default()
        },
    ] {
        let accel = Accel::build(&ctx, &scene, &o).expect("build");
        let gpu = pipeline.cast(&accel, &rays).expect("cast");
        compare(
            &scene,
            &rays,
            &cpu,
            &gpu,
            &format!("ABI 87 {o:?}"),
            o.merge.merge_below > 0,
        );
    }
}

/// The oracle itself, on any machine: a ray straight down onto a known triangle.
/// Every build of the sponza-like scene (390 groups, one 80k-triangle floor among hundreds of
/// tiny groups) writes only inside its own scratch slice and output range: guard bands after
/// each, filled with a known byte, are read back after every batch. Round-robin and LPT (the
/// H100 run of 2026-11-24 crashed and hung in LPT batches), shared and per-stream scratch.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn sponza_like_builds_write_only_inside_their_ranges() {
    let mut configs = Vec::new();
    for streams in [4, 8, 16] {
        for assign in [Assign::RoundRobin, Assign::Lpt] {
            for scratch in [ScratchMode::Shared, ScratchMode::PerStream] {
                configs.push(AccelOptions {
                    streams,
                    assign,
                    scratch,
                    guard_bytes: 4096,
                    ..AccelOptions::default()
                });
            }
        }
    }
    assert_batches_stay_in_their_ranges(&context(None), &configs, 5);
}

#[test]
fn brute_force_oracle_finds_the_nearest_triangle() {
    let tri = |z: f32| Group {
        name: "t".into(),
        positions: vec![
            Vec3::new(-1.0, -1.0, z),
            Vec3::new(3.0, -1.0, z),
            Vec3::new(-1.0, 3.0, z),
        ],
        indices: vec![[0, 1, 2]],
        face_materials: vec![0],
        ..Default::default()
    };
    let scene = Scene::new(
        "t",
        vec![tri(-5.0), tri(-2.0)],
        vec![Material::default_diffuse()],
    );
    let ray = Ray {
        origin: [0.0, 0.0, 0.0],
        tmin: 0.0,
        dir: [0.0, 0.0, -1.0],
        tmax: 1e16,
    };
    let hit = brute_force(&scene, &ray).unwrap();
    assert_eq!((hit.group, hit.prim), (1, 0));
    assert!((hit.t - 2.0).abs() < 1e-12);
    assert!((hit.u - 0.25).abs() < 1e-12 && (hit.v - 0.25).abs() < 1e-12);
    let away = Ray {
        dir: [0.0, 0.0, 1.0],
        ..ray
    };
    assert_eq!(brute_force(&scene, &away), None);
    // The generated scenes are heavy-tailed as intended.
    let s = synthetic_scene(1, 300);
    let tiny = s.groups.iter().filter(|g| g.triangle_count() <= 2).count();
    assert!(tiny > 100 && s.groups.iter().any(|g| g.triangle_count() >= 1000));
}

/// The oracle's allowance for grazing hits, on the case that needed it: ray 700 of
/// tests/gpu_enqueue_threads.rs (scene seed 3, rays seed 99) meets its triangle at 0.046
/// degrees, and an H200 (twice, 2026-11-26) answered barycentrics 1.7e-3 from the f64 oracle's,
/// at a point 3.2e-7 from the ray. That answer passes; the same barycentrics on a ray that is
/// not grazing, or barycentrics that put the point off the ray, do not.
#[test]
fn grazing_hits_may_differ_in_barycentrics_only_along_the_ray() {
    let scene = synthetic_scene(3, 300);
    let rays = make_rays(&scene, 1500, 99);
    let ray = &rays[700];
    let c = brute_force(&scene, ray).expect("ray 700 hits");
    let tri = scene.groups[c.group as usize].triangle(c.prim as usize);
    let h200 = (0.05451447, 0.46517986);
    assert!(
        (h200.1 - c.v).abs() > 1e-3,
        "the case no longer needs the allowance"
    );
    assert!(grazing_hit_on_the_ray(ray, tri, h200, c.t));
    // Off the ray: the point moved across it, not along it.
    assert!(!grazing_hit_on_the_ray(
        ray,
        tri,
        (h200.0 + 0.01, h200.1 - 0.01),
        c.t
    ));
    assert!(!grazing_hit_on_the_ray(ray, tri, (c.u + 0.05, c.v), c.t));
    // Not grazing: straight down onto a triangle, barycentrics 2e-3 off.
    let flat = [
        Vec3::new(0.0, 0.0, 0.0),
        Vec3::new(1.0, 0.0, 0.0),
        Vec3::new(0.0, 1.0, 0.0),
    ];
    let down = Ray {
        origin: [0.25, 0.25, 1.0],
        tmin: 0.0,
        dir: [0.0, 0.0, -1.0],
        tmax: 1e16,
    };
    assert!(!grazing_hit_on_the_ray(&down, flat, (0.25, 0.25), 1.0));
    assert!(!grazing_hit_on_the_ray(&down, flat, (0.252, 0.25), 1.0));
}
