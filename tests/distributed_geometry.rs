//! Geometry spread over ranks (issue 67), run as threads of one process over channels: the
//! image is the one-process image bit for bit, for every number of ranks and every split.

mod cpu_common;

use gasworks::cluster::geometry::gpu::answer_by_casting;
use gasworks::cluster::geometry::{emitting_groups, render_in_process, render_in_process_with};
use gasworks::cluster::geometry::{render_in_process_on, Answer, Intersector, Test};
use gasworks::cluster::geometry::{Limits, RankScene, RankStats};
use gasworks::cpu::CpuBackend;
use gasworks::optix::raycast::{Ray, RayHit};
use gasworks::render::{RenderSettings, Tile, TileRenderer};
use gasworks::scene::domains::Domains;
use gasworks::scene::gen::{cornell, cornell_camera, sponza_like, sponza_like_camera};
use gasworks::scene::Scene;
use gasworks::session::NoControls;

/// The film sums one process renders: every pixel's samples in order.
fn one_process(scene: &Scene, settings: &RenderSettings) -> Vec<[f32; 4]> {
    let backend = CpuBackend::new(scene, settings).unwrap();
    let mut film = vec![[0.0; 4]; (settings.width * settings.height) as usize];
    let tile = Tile::whole(settings.width, settings.height);
    backend
        .render_tile(tile, 0..settings.spp, &mut film)
        .unwrap();
    film
}

fn settings(camera: gasworks::scene::camera::Camera, w: u32, h: u32, spp: u32) -> RenderSettings {
    RenderSettings {
        width: w,
        height: h,
        spp,
        max_depth: 6,
        seed: 7,
        camera: camera.frame(w, h).unwrap(),
    }
}

fn assert_same(got: &[[f32; 4]], expected: &[[f32; 4]], what: &str) {
    assert_eq!(got.len(), expected.len(), "{what}");
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_eq!(
            g.map(f32::to_bits),
            e.map(f32::to_bits),
            "{what}: pixel {i}"
        );
    }
}

/// The Cornell box (its light replicated) and a sponza-like atrium (textures, cut-outs, an
/// environment map) on 1 to 4 ranks: the image equals one process's, bit for bit, and rays
/// do travel between ranks.
#[test]
fn ranks_render_the_one_process_image() {
    let mut atrium = sponza_like(24, 6000, 3).unwrap();
    atrium.set_environment_map(cpu_common::sun_map(0.3));
    let scenes = [
        (cornell(), settings(cornell_camera(), 40, 36, 4)),
        (atrium, settings(sponza_like_camera(), 48, 32, 2)),
    ];
    for (scene, settings) in &scenes {
        let expected = one_process(scene, settings);
        for ranks in 1..=4 {
            let limits = Limits {
                in_flight: 64,
                ..Limits::default()
            };
            let (image, stats) = render_in_process(scene, settings, ranks, &limits).unwrap();
            let what = format!("{} on {ranks} ranks", scene.source);
            assert_same(&image, &expected, &what);
            let samples: u64 = stats.iter().map(|s| s.samples).sum();
            assert_eq!(
                samples,
                u64::from(settings.width * settings.height * settings.spp)
            );
            let hops: u64 = stats.iter().map(|s| s.segment_hops + s.shade_hops).sum();
            assert_eq!(hops == 0, ranks == 1, "{what}: {stats:?}");
            assert!(stats.iter().all(|s| s.peak_in_flight <= 64), "{what}");
        }
    }
}

/// Groups dealt to the ranks round-robin, so that neighbours lie on different ranks and most
/// rays cross several domains: still the same image.
#[test]
fn a_scattered_split_renders_the_same_image() {
    let scene = sponza_like(30, 5000, 5).unwrap();
    let settings = settings(sponza_like_camera(), 32, 24, 2);
    let expected = one_process(&scene, &settings);
    let extents = Domains::extents_of(&scene);
    let ranks = 3;
    let emitting = emitting_groups(&scene);
    let replicated: Vec<bool> = (0..extents.len())
        .map(|g| g % 7 == 0 || emitting[g])
        .collect();
    let dealt = (0..extents.len()).map(|g| (g % ranks) as u32).collect();
    let domains = Domains::assigned(&extents, dealt, replicated, ranks);
    let (image, stats) = render_split(&scene, &domains, &settings);
    assert_same(&image, &expected, "round-robin split");
    let shadow_hops: u64 = stats.iter().map(|s| s.shadow_hops).sum();
    assert!(shadow_hops > 0, "{stats:?}");
}

/// Cells moved between ranks as a camera path's frames move them (`--reassign`), into an
/// assignment no split gives: still the same image.
#[test]
fn cells_moved_between_ranks_render_the_same_image() {
    let scene = sponza_like(40, 5000, 5).unwrap();
    let settings = settings(sponza_like_camera(), 32, 24, 2);
    let expected = one_process(&scene, &settings);
    let ranks = 3;
    let split = RankScene::of(&scene, ranks, 0).domains;
    let cells = split.cells.len() as u32;
    let moved: Vec<u32> = (0..cells).map(|c| (c * 5 + c / 4) % ranks as u32).collect();
    let domains = split.with_cells_in(&Domains::extents_of(&scene), moved);
    assert_ne!(domains.of_group, split.of_group);
    let (image, _) = render_split(&scene, &domains, &settings);
    assert_same(&image, &expected, "cells moved");
}

/// `scene` rendered by ranks (threads) holding the parts `domains` gives them.
fn render_split(
    scene: &Scene,
    domains: &Domains,
    settings: &RenderSettings,
) -> (Vec<[f32; 4]>, Vec<RankStats>) {
    let scenes: Vec<RankScene> = (0..domains.count())
        .map(|r| RankScene::with_domains(scene, domains.clone(), r))
        .collect();
    let limits = Limits {
        in_flight: 16,
        ..Limits::default()
    };
    render_in_process_with(&scenes, settings, &limits).unwrap()
}

/// A rank that never answers: the others end the frame within the silence limit, with an
/// error naming it and how much of their own work was finished, and rank 0 keeps the pixels
/// that arrived: each rank's finished samples, the complete pixels one process's bit for bit.
#[test]
fn a_silent_rank_ends_the_frame_with_an_error_naming_it_and_the_pixels_kept() {
    use gasworks::cluster::geometry::{pixel_owner, render_rank, GeometryError, RankOutcome};
    use gasworks::sched::transport::ChannelTransport;
    let scene = cornell();
    let settings = settings(cornell_camera(), 40, 40, 2);
    let ranks = 3;
    let scenes: Vec<RankScene> = (0..ranks)
        .map(|r| RankScene::of(&scene, ranks, r))
        .collect();
    let limits = Limits {
        in_flight: 32,
        silence: std::time::Duration::from_millis(500),
        fault: None,
    };
    let mut transports = ChannelTransport::create(ranks);
    drop(transports.pop());
    let outcomes: Vec<RankOutcome> = std::thread::scope(|s| {
        let handles: Vec<_> = transports
            .into_iter()
            .zip(&scenes)
            .map(|(mut t, scene)| {
                s.spawn(move || {
                    render_rank(scene, &settings, &limits, &NoControls::default(), &mut t)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    });
    let mut finished = Vec::new();
    for (rank, outcome) in outcomes.iter().enumerate() {
        let e = outcome.cut_short.as_ref().expect("cut short");
        match e {
            GeometryError::Silent {
                waiting,
                finished: f,
                ..
            } => {
                let text = e.to_string();
                assert!(
                    text.starts_with(&format!("rank {rank} heard nothing for")),
                    "{text}"
                );
                assert!(
                    waiting.contains(&2) && text.contains("samples were finished"),
                    "{text}"
                );
                finished.push(*f);
            }
            // Rank 0's stop may reach rank 1 before its own silence ends.
            GeometryError::Stopped { finished: f, .. } if rank == 1 => finished.push(*f),
            other => panic!("rank {rank}: {other:?}"),
        }
    }
    let image = outcomes[0]
        .image
        .as_ref()
        .expect("rank 0 keeps what arrived");
    let expected = one_process(&scene, &settings);
    let mut held = [0u64; 2];
    for (i, (px, full)) in image.iter().zip(&expected).enumerate() {
        let (x, y) = (i as u32 % 40, i as u32 / 40);
        let owner = pixel_owner((x, y), 40, ranks);
        assert!(
            px[3] <= 2.0 && (owner < 2 || px[3] == 0.0),
            "pixel {i}: {px:?}"
        );
        if owner < 2 {
            held[owner] += px[3] as u64;
        }
        if px[3] == 2.0 {
            assert_eq!(px.map(f32::to_bits), full.map(f32::to_bits), "pixel {i}");
        }
    }
    assert_eq!(
        held.to_vec(),
        finished,
        "each live rank's finished samples arrived"
    );
    assert!(outcomes[1].image.is_none());
}

/// The forwarding figures of docs/distributed-geometry.md: per sample, the path messages of
/// each kind and the bytes sent, on 2 and 4 ranks (threads over channels). Run with
/// `--ignored --nocapture`; it checks only that every sample was counted.
#[test]
#[ignore = "prints figures for docs/distributed-geometry.md"]
fn forwarding_figures() {
    use gasworks::scene::gen::{toystore, toystore_camera};
    let cases = [
        ("cornell", cornell(), cornell_camera()),
        (
            "sponza-like",
            sponza_like(390, 260_000, 1).unwrap(),
            sponza_like_camera(),
        ),
        (
            "toystore, 2 shelves",
            toystore(2, 1).unwrap(),
            toystore_camera(),
        ),
    ];
    println!("scene,ranks,shadow hops,segment hops,shade hops,sample messages,bytes (per sample)");
    for (name, scene, camera) in cases {
        let mut settings = settings(camera, 64, 48, 4);
        settings.max_depth = 8;
        for ranks in [2, 4] {
            let (_, stats) =
                render_in_process(&scene, &settings, ranks, &Limits::default()).unwrap();
            let sum = |f: fn(&gasworks::cluster::geometry::RankStats) -> u64| {
                stats.iter().map(f).sum::<u64>() as f64
            };
            let samples = sum(|s| s.samples);
            assert_eq!(samples, f64::from(64 * 48 * 4));
            println!(
                "{name},{ranks},{:.2},{:.2},{:.2},{:.2},{:.0}",
                sum(|s| s.shadow_hops) / samples,
                sum(|s| s.segment_hops) / samples,
                sum(|s| s.shade_hops) / samples,
                sum(|s| s.sample_messages) / samples,
                sum(|s| s.bytes_sent) / samples,
            );
        }
    }
}

/// `gasworks render --distribute-geometry` in one process writes the plain render's file, and
/// refuses the options it does not take yet, naming them.
#[test]
fn the_flag_alone_renders_the_plain_image_and_refuses_what_it_cannot_do() {
    use std::process::Command;
    let bin = env!("CARGO_BIN_EXE_gasworks");
    let dir = tempfile::tempdir().unwrap();
    let scene = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj");
    let render = |out: &str, extra: &[&str]| {
        Command::new(bin)
            .args([
                "render",
                scene.to_str().unwrap(),
                "-o",
                out,
                "--width",
                "24",
            ])
            .args(["--height", "20", "--spp", "2", "-q"])
            .args(extra)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    assert!(render("plain.exr", &["--backend", "cpu"]).status.success());
    let out = render("spread.exr", &["--backend", "cpu", "--distribute-geometry"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    assert!(read("plain.exr") == read("spread.exr"), "the files differ");
    let out = render(
        "replicated.exr",
        &[
            "--backend",
            "cpu",
            "--distribute-geometry",
            "--replicate",
            "50%",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        read("plain.exr") == read("replicated.exr"),
        "replicated: the files differ"
    );
    for alone in [
        &["--replicate", "5%"][..],
        &["--distribute-geometry", "--replicate", "150%"],
        &["--distribute-geometry", "--reassign", "5%"],
    ] {
        let out = render("refused.exr", alone);
        let e = String::from_utf8_lossy(&out.stderr);
        let flag = alone[alone.len() - 2];
        assert!(!out.status.success() && e.contains(flag), "{alone:?}: {e}");
        assert!(!dir.path().join("refused.exr").exists());
    }
    let refused: [&[&str]; 2] = [&["--pass-spp", "1"], &["--time-limit", "1h"]];
    for extra in refused {
        let mut args = vec!["--distribute-geometry"];
        args.extend(extra);
        let out = render("refused.exr", &args);
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && e.contains(extra[0]),
            "{extra:?}: {e}"
        );
        assert!(!dir.path().join("refused.exr").exists());
    }
    // Without a GPU: --backend optix names the rank and why; auto renders on the CPU.
    if gasworks::optix::probe().is_err() {
        let out = render("gpu.exr", &["--distribute-geometry", "--backend", "optix"]);
        let e = String::from_utf8_lossy(&out.stderr);
        let named = "error: rank 0: building its domain's GASes and IAS (32 triangles) on GPU 0:";
        assert!(!out.status.success() && e.starts_with(named), "{e}");
        assert!(!dir.path().join("gpu.exr").exists());
        let out = render("auto.exr", &["--distribute-geometry", "--backend", "auto"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            read("plain.exr") == read("auto.exr"),
            "auto: the files differ"
        );
    }
}

/// A rank that sends what the protocol never sends (a sample of a pixel its receiver owns
/// twice over, bytes that are no message) ends the frame with an error naming it, never a
/// panic or a wrong image: rank 0 keeps only the samples it finished.
#[test]
fn a_rank_sending_nonsense_is_named() {
    use gasworks::cluster::geometry::message::Message;
    use gasworks::cluster::geometry::render_rank;
    use gasworks::sched::transport::{ChannelTransport, Transport};
    let scene = cornell();
    let settings = settings(cornell_camera(), 16, 16, 2);
    let ours = RankScene::of(&scene, 2, 0);
    let sample = Message::Sample {
        pixel: (0, 0),
        sample: 0,
        radiance: glam::Vec3::ONE,
    };
    for bytes in [sample.encode(), vec![1, 2, 3]] {
        let mut transports = ChannelTransport::create(2);
        let mut liar = transports.pop().unwrap();
        let mut honest = transports.pop().unwrap();
        for _ in 0..3 {
            liar.send(0, bytes.clone()).unwrap();
        }
        let limits = Limits {
            silence: std::time::Duration::from_millis(300),
            ..Limits::default()
        };
        let outcome = render_rank(
            &ours,
            &settings,
            &limits,
            &NoControls::default(),
            &mut honest,
        )
        .unwrap();
        let e = outcome.cut_short.expect("cut short").to_string();
        assert!(
            e.starts_with("rank 0: rank 1 sent a malformed message"),
            "{e}"
        );
        // What rank 0 finished of its own pixels is kept, nothing of the liar's.
        let image = outcome.image.expect("rank 0 keeps what arrived");
        let held: f32 = image.iter().map(|p| p[3]).sum();
        assert_eq!(held as u64, outcome.stats.samples);
    }
}

/// `gasworks forwarding-sim` prints a row per rank count, latency and bandwidth, and refuses
/// what it cannot model.
#[test]
fn forwarding_sim_prints_every_row_and_refuses_nonsense() {
    use std::process::Command;
    let bin = env!("CARGO_BIN_EXE_gasworks");
    let scene = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj");
    let sim = |extra: &[&str]| {
        Command::new(bin)
            .arg("forwarding-sim")
            .arg(&scene)
            .args([
                "--width",
                "64",
                "--height",
                "48",
                "--spp",
                "4",
                "--sample-us",
                "2",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = sim(&[
        "--ranks",
        "2,3",
        "--latency-us",
        "1,100",
        "--bandwidth-gbit",
        "10",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for ranks in ["2", "3"] {
        for latency in ["1", "100"] {
            let row = format!("\n{ranks},{latency},10,");
            assert!(text.contains(&row), "no row {row:?}: {text}");
        }
    }
    assert!(text.contains("a sample 2.000 us,"), "{text}");
    for bad in [
        &["--ranks", "0"][..],
        &["--latency-us", "0"],
        &["--measure", "12"],
    ] {
        let out = sim(bad);
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && e.contains(bad[0]), "{bad:?}: {e}");
    }
}

/// Hot groups replicated after the prepass: the image is still one process's bit for bit on
/// 1 to 4 ranks, every rank picked the same groups, and rays travel less than without.
#[test]
fn replicating_hot_groups_keeps_the_image_and_cuts_the_traffic() {
    use gasworks::cluster::geometry::replicate::render_in_process_replicating;
    let scene = sponza_like(40, 8000, 5).unwrap();
    let settings = settings(sponza_like_camera(), 48, 32, 2);
    let expected = one_process(&scene, &settings);
    let limits = Limits {
        in_flight: 64,
        ..Limits::default()
    };
    let hops = |stats: &[gasworks::cluster::geometry::RankStats]| -> u64 {
        stats
            .iter()
            .map(|s| s.shadow_hops + s.segment_hops + s.shade_hops)
            .sum()
    };
    for ranks in 1..=4 {
        let (plain, plain_stats) = render_in_process(&scene, &settings, ranks, &limits).unwrap();
        assert_same(&plain, &expected, &format!("{ranks} ranks"));
        for share in [0.05, 0.3, 1.0] {
            let (image, stats, prepass) =
                render_in_process_replicating(&scene, &settings, ranks, &limits, share).unwrap();
            let what = format!("{ranks} ranks, {share} replicated");
            assert_same(&image, &expected, &what);
            assert_eq!(prepass.samples, 48 * 32, "{what}: the prepass is 1 spp");
            if ranks > 1 {
                assert!(
                    prepass.hops > 0 && prepass.uses.iter().any(|&u| u > 0),
                    "{what}"
                );
                assert!(hops(&stats) <= hops(&plain_stats), "{what}: more traffic");
            }
            if share == 1.0 {
                // Everything used is everywhere: only rays that found nothing still travel.
                assert!(hops(&stats) < hops(&plain_stats) || ranks == 1, "{what}");
            }
        }
    }
}

/// A device's ray cast without any-hit programs (what `optix::raycast` launches), by brute
/// force: each ray's closest triangle in its interval, holes and see-through surfaces not
/// tested. The interval is taken as the CPU's queries take it, open at both ends.
fn cast_like_a_device(scene: &Scene, rays: &[Ray]) -> Vec<RayHit> {
    use gasworks::cpu::bvh::{intersect_triangle, Hit, RayData};
    rays.iter()
        .map(|r| {
            let Some(ray) = RayData::new(r.origin.into(), r.dir.into()) else {
                return RayHit::miss();
            };
            let mut best: Option<Hit> = None;
            for (gi, g) in scene.groups.iter().enumerate() {
                for pi in 0..g.triangle_count() {
                    let tri = g.triangle(pi);
                    if let Some((t, u, v)) = intersect_triangle(&ray, &tri, r.tmin, r.tmax) {
                        let (group, prim) = (gi as u32, pi as u32);
                        let hit = Hit {
                            group,
                            prim,
                            t,
                            u,
                            v,
                        };
                        if best.is_none_or(|b| hit.precedes(&b)) {
                            best = Some(hit);
                        }
                    }
                }
            }
            best.map_or(RayHit::miss(), |h| RayHit {
                group: h.group,
                prim: h.prim,
                t: h.t,
                u: h.u,
                v: h.v,
                instance: h.group,
            })
        })
        .collect()
}

/// A rank's tests answered as a GPU rank answers them ([`answer_by_casting`]), on the device
/// above.
struct CastLikeADevice<'a>(&'a Scene);

impl Intersector for CastLikeADevice<'_> {
    fn answer(&self, tests: &[Test]) -> Result<Vec<Answer>, String> {
        answer_by_casting(self.0, tests, |rays| Ok(cast_like_a_device(self.0, rays)))
    }
}

/// GPU ranks, their device replaced by the brute-force cast: the host side of a GPU rank
/// (its tests batched per step, the casts again past holes, the best hit kept across
/// domains) gives the one-process image bit for bit, cut-outs and all, alone or beside CPU
/// ranks. What only a GPU can show (its own intersection arithmetic) is docs/gpu-checks.md's.
#[test]
fn ranks_that_cast_as_a_device_casts_render_the_one_process_image() {
    let atrium = sponza_like(24, 2000, 3).unwrap();
    assert!(
        atrium.cutout_groups().iter().any(|&c| c),
        "the atrium has cut-outs"
    );
    let scenes = [
        (cornell(), settings(cornell_camera(), 20, 18, 2)),
        (atrium, settings(sponza_like_camera(), 24, 16, 2)),
    ];
    for (scene, settings) in &scenes {
        let expected = one_process(scene, settings);
        for ranks in [1, 3] {
            let parts: Vec<RankScene> =
                (0..ranks).map(|r| RankScene::of(scene, ranks, r)).collect();
            let devices: Vec<CastLikeADevice> = parts
                .iter()
                .map(|p| CastLikeADevice(&p.geometry.scene))
                .collect();
            // Rank 1 keeps its CPU BVH: GPU and CPU ranks side by side.
            let tests: Vec<(&RankScene, &dyn Intersector)> = parts
                .iter()
                .zip(&devices)
                .enumerate()
                .map(|(r, (p, d))| match r {
                    1 => (p, &p.geometry as &dyn Intersector),
                    _ => (p, d as &dyn Intersector),
                })
                .collect();
            let limits = Limits {
                in_flight: 32,
                ..Limits::default()
            };
            let (image, _) = render_in_process_on(&tests, settings, &limits).unwrap();
            assert_same(
                &image,
                &expected,
                &format!("{} on {ranks} ranks", scene.source),
            );
        }
    }
}

/// What a device answers that no triangle of the rank's can be is an error naming it, not a
/// wrong image or a loop that never ends.
#[test]
fn a_device_answering_nonsense_is_an_error() {
    use gasworks::cpu::bvh::RayData;
    let scene = cornell();
    let ray = RayData::new(glam::Vec3::new(0.0, 1.0, 3.0), -glam::Vec3::Z).unwrap();
    let tests = [Test::Closest { ray, best: None }];
    let nonsense = [
        RayHit {
            group: 9999,
            ..RayHit::default()
        },
        RayHit {
            group: 0,
            prim: u32::MAX,
            ..RayHit::default()
        },
        RayHit {
            group: 0,
            prim: 0,
            t: -1.0,
            ..RayHit::default()
        },
    ];
    for hit in nonsense {
        let e = answer_by_casting(&scene, &tests, |_| Ok(vec![hit])).unwrap_err();
        assert!(e.starts_with("the device found triangle"), "{e}");
    }
    let e = answer_by_casting(&scene, &tests, |_| Ok(Vec::new())).unwrap_err();
    assert_eq!(e, "0 hits for 1 rays");
    let missed = answer_by_casting(&scene, &tests, |r| Ok(vec![RayHit::miss(); r.len()]));
    assert_eq!(missed.unwrap(), [Answer::Closest(None)]);
}

/// GPU ranks on a lent GPU (docs/gpu-checks.md): each rank's domain built as GASes under an
/// IAS and its tests cast on the GPU, alone and beside a CPU rank. The GPU's intersection
/// arithmetic is not the CPU BVH's, so the image is held to one process's within 2 standard
/// errors of the pixels' paired differences (plus 0.5% of the mean), in
/// each channel, the Cornell box and the atrium with its cut-outs.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_ranks_render_the_one_process_image_within_noise() {
    use gasworks::cluster::geometry::gpu::{GpuDomain, RankTests};
    use gasworks::optix::pathtracer::OptixOptions;
    let options = OptixOptions {
        device: 0,
        context: Default::default(),
        accel: Default::default(),
    };
    let atrium = sponza_like(24, 6000, 3).unwrap();
    let scenes = [
        (cornell(), settings(cornell_camera(), 64, 48, 16)),
        (atrium, settings(sponza_like_camera(), 64, 40, 16)),
    ];
    for (scene, settings) in &scenes {
        let expected = one_process(scene, settings);
        for ranks in [1, 3] {
            let parts: Vec<RankScene> =
                (0..ranks).map(|r| RankScene::of(scene, ranks, r)).collect();
            let gpus: Vec<GpuDomain> = parts
                .iter()
                .map(|p| GpuDomain::build(&p.geometry.scene, &options).unwrap())
                .collect();
            let tests: Vec<RankTests> = parts
                .iter()
                .zip(&gpus)
                .enumerate()
                .map(|(r, (scene, gpu))| RankTests {
                    scene,
                    gpu: (r != 1).then_some(gpu),
                })
                .collect();
            let ranked: Vec<(&RankScene, &dyn Intersector)> =
                parts.iter().zip(&tests).map(|(p, t)| (p, t as _)).collect();
            let (image, _) = render_in_process_on(&ranked, settings, &Limits::default()).unwrap();
            let what = format!("{} on {ranks} GPU ranks", scene.source);
            assert_mean_within_paired_noise(&image, &expected, &what);
        }
    }
}

/// Per channel, the mean of the pixels' differences (`got` - `expected`, each pixel's mean
/// sample) within 2 standard errors of it, plus 0.5% of the expected mean.
fn assert_mean_within_paired_noise(got: &[[f32; 4]], expected: &[[f32; 4]], what: &str) {
    let n = got.len() as f64;
    for c in 0..3 {
        let d: Vec<f64> = got
            .iter()
            .zip(expected)
            .map(|(g, e)| f64::from(g[c] / g[3]) - f64::from(e[c] / e[3]))
            .collect();
        let mean = d.iter().sum::<f64>() / n;
        let var = d.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
        let se = (var / n).sqrt();
        let level = expected.iter().map(|e| f64::from(e[c] / e[3])).sum::<f64>() / n;
        assert!(
            mean.abs() <= 2.0 * se + 0.005 * level.abs(),
            "{what}: channel {c}: mean difference {mean:.6} against a standard error of {se:.6} (mean {level:.6})"
        );
    }
}

/// A faster rank's counts can reach a rank still walking its prepass (rank 1 had every Done
/// but this rank's has not arrived from a third): they are kept for the exchange, not taken
/// for a malformed message. Here rank 1, scripted, holds nothing and sends its counts before
/// its Done.
#[test]
fn counts_that_arrive_during_the_prepass_wait_for_the_exchange() {
    use gasworks::cluster::geometry::message::Message;
    use gasworks::cluster::geometry::replicate::prepass;
    use gasworks::sched::transport::{ChannelTransport, Transport};
    let scene = cornell();
    let settings = settings(cornell_camera(), 16, 16, 2);
    let extents = Domains::extents_of(&scene);
    let groups = extents.len();
    let emitting = emitting_groups(&scene);
    let domains = Domains::assigned(&extents, vec![0; groups], emitting, 2);
    let ours = RankScene::with_domains(&scene, domains, 0);
    let mut transports = ChannelTransport::create(2);
    let mut scripted = transports.pop().unwrap();
    let mut rank0 = transports.pop().unwrap();
    let theirs = Message::Uses {
        samples: 7,
        hops: 0,
        uses: vec![1; groups],
    };
    scripted.send(0, theirs.encode()).unwrap();
    scripted.send(0, Message::Done.encode()).unwrap();
    let limits = Limits::default();
    let (sum, _) = prepass(
        (&ours, &ours.geometry),
        &settings,
        &limits,
        &NoControls::default(),
        &mut rank0,
    )
    .unwrap();
    // The image is one 16x16 tile, rank 0's: its 256 samples, and the scripted rank's 7.
    assert_eq!(sum.samples, 16 * 16 + 7, "{sum:?}");
    assert!(sum.uses.iter().all(|&u| u >= 1), "{sum:?}");
}
