//! On an NVIDIA GPU: the path tracer's NVTX ranges as a profiler sees them: the builds first,
//! then one range per tile and, inside it, one per launch, naming the worker, the tile, the
//! sample range and the launch mode, and each
//! worker's stream named after it. As in `gpu_accel_nvtx.rs`, the NVTX recorder tool
//! (tests/support/nvtx_recorder.c) stands in for Nsight Systems: this test reruns itself in a
//! child process with `NVTX_INJECTION64_PATH` pointing at the tool, and checks the record.

mod support;

use glam::Vec3;

use gasworks::nvtx;
use gasworks::optix::accel::AccelOptions;
use gasworks::optix::pathtracer::{OptixBackend, OptixOptions};
use gasworks::optix::ContextOptions;
use gasworks::render::{RenderSettings, Tile, TileRenderer};
use gasworks::scene::{Camera, Group, Material, Scene};

const CHILD: &str = "GASWORKS_PATHTRACER_NVTX_CHILD";

fn scene() -> Scene {
    let g = Group {
        name: "quad".into(),
        positions: vec![
            Vec3::new(-1.0, -1.0, 0.0),
            Vec3::new(1.0, -1.0, 0.0),
            Vec3::new(1.0, 1.0, 0.0),
            Vec3::new(-1.0, 1.0, 0.0),
        ],
        indices: vec![[0, 1, 2], [0, 2, 3]],
        face_materials: vec![0, 0],
        ..Default::default()
    };
    Scene::new("nvtx", vec![g], vec![Material::default_diffuse()])
}

/// The child's work (a no-op in a plain run): two workers, one tile each, 3 samples.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn child_renders_with_nvtx() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    assert!(nvtx::is_attached(), "the recorder should have attached");
    let camera = Camera {
        eye: Vec3::new(0.0, 0.0, 3.0),
        look_at: Vec3::ZERO,
        up: Vec3::Y,
        fov_y_deg: 40.0,
    }
    .frame(16, 8)
    .unwrap();
    let settings = RenderSettings {
        width: 16,
        height: 8,
        spp: 3,
        max_depth: 3,
        seed: 0,
        camera,
    };
    let options = OptixOptions {
        device: 0,
        context: ContextOptions::default(),
        accel: AccelOptions::default(),
    };
    let backend = OptixBackend::new(&scene(), &settings, &options).expect("OptiX backend");
    let workers = [backend.worker().unwrap(), backend.worker().unwrap()];
    for (i, w) in workers.iter().enumerate() {
        let tile = Tile {
            x: 8 * i as u32,
            y: 0,
            w: 8,
            h: 8,
        };
        let mut acc = vec![[0.0f32; 4]; 64];
        w.render_tile(tile, 0..3, &mut acc).unwrap();
        assert!(acc.iter().all(|p| p[3] == 3.0));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn launch_ranges_follow_the_builds_and_name_worker_tile_and_samples() {
    let text = support::record_nvtx_in_child("child_renders_with_nvtx", CHILD);
    let lines: Vec<&str> = text.lines().collect();
    let first = |prefix: &str| lines.iter().position(|l| l.starts_with(prefix));
    let build = first("push 0 GAS batch").expect("the GAS batch range");
    let ias = first("push 0 IAS").expect("the IAS range");
    let tiles: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("push 0 tile optix:0/w"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(tiles.len(), 2, "one range per tile:\n{text}");
    assert!(
        build < ias && ias < tiles[0],
        "builds, then launches:\n{text}"
    );
    // 8 x 8 pixels x 3 samples is less than a launch's worth of work on any GPU: a SAMPLES
    // launch of a thread per pixel-sample, then a REDUCE of a thread per pixel, inside the
    // tile's range.
    for (w, x) in [(0, 0), (1, 8)] {
        for line in [
            format!("push 0 tile optix:0/w{w} 8x8+{x}+0 samples 0..3, 2 launches"),
            format!("push 1 launch optix:0/w{w} tile 8x8+{x}+0 samples 0..3 SAMPLES 192 threads"),
            format!("push 1 launch optix:0/w{w} tile 8x8+{x}+0 samples 0..3 REDUCE 64 threads"),
        ] {
            assert!(lines.contains(&line.as_str()), "{line} missing:\n{text}");
        }
    }
    for w in 0..2 {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("stream 0x") && l.ends_with(&format!("optix:0/w{w}"))),
            "{text}"
        );
    }
}
