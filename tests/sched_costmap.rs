//! The cost map ranks surfaces as Algorithm 1 intends: a mirror region costs more than a
//! diffuse one seeing the same surroundings, and the map drives `sorted` to start there.

mod sched_support;

use gasworks::scene::MaterialKind;
use gasworks::sched::costmap::{estimate, CostModel};
use gasworks::sched::raster::rasterize;
use gasworks::sched::{render_frame, DeviceSpec, SchedConfig, Strategy};
use sched_support::{room, room_settings, MockFactory, MockRenderer};

/// Mean estimated cost over the pixels of each floor half (groups 0 and 1).
fn floor_costs(left: MaterialKind, right: MaterialKind) -> (f32, f32) {
    let scene = room(left, right);
    let settings = room_settings(128, 96, 1, 0);
    let (g, _) = rasterize(&scene, &settings.camera, 128, 96);
    let (map, _) = estimate(&g, &scene, &CostModel::default(), settings.max_depth);
    let mean = |group: u32| {
        let (mut sum, mut n) = (0.0, 0);
        for (i, &gi) in g.group.iter().enumerate() {
            if gi == group {
                sum += map.values[i];
                n += 1;
            }
        }
        assert!(n > 200, "group {group} covers only {n} pixels");
        sum / n as f32
    };
    (mean(0), mean(1))
}

#[test]
fn a_mirror_region_costs_more_than_a_diffuse_one() {
    let (mirror, diffuse) = floor_costs(MaterialKind::Mirror, MaterialKind::Diffuse);
    eprintln!("mirror floor {mirror:.3}, diffuse floor {diffuse:.3}");
    assert!(
        mirror > 1.1 * diffuse,
        "mirror {mirror} vs diffuse {diffuse}"
    );
    // Not an artefact of the left/right geometry: swapped, the order swaps.
    let (diffuse2, mirror2) = floor_costs(MaterialKind::Diffuse, MaterialKind::Mirror);
    assert!(
        mirror2 > 1.1 * diffuse2,
        "mirror {mirror2} vs diffuse {diffuse2}"
    );
    // Same materials: same cost on both halves (the room is symmetric).
    let (a, b) = floor_costs(MaterialKind::Diffuse, MaterialKind::Diffuse);
    eprintln!(
        "diffuse halves {a:.3} {b:.3}, mirror right {mirror2:.3} vs diffuse left {diffuse2:.3}"
    );
    assert!((a / b - 1.0).abs() < 0.02, "{a} vs {b}");
}

#[test]
fn glass_counts_reflection_and_refraction() {
    let (glass, diffuse) = floor_costs(MaterialKind::Glass, MaterialKind::Diffuse);
    let (mirror, _) = floor_costs(MaterialKind::Mirror, MaterialKind::Diffuse);
    assert!(glass > mirror, "glass {glass} vs mirror {mirror}");
    assert!(glass > diffuse);
}

#[test]
fn single_segment_paths_cost_only_their_base() {
    // With max depth 1 no secondary ray is traced: only base and edge terms remain.
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    let settings = room_settings(64, 48, 1, 0);
    let (g, _) = rasterize(&scene, &settings.camera, 64, 48);
    let model = CostModel::default();
    let (map, _) = estimate(&g, &scene, &model, 1);
    for (i, &c) in map.values.iter().enumerate() {
        let base = if g.is_hit(i) {
            model.base(&scene.materials[g.material[i] as usize])
        } else {
            model.miss
        };
        assert!(
            c == base || c == base + model.edge,
            "pixel {i}: {c} vs base {base}"
        );
    }
}

#[test]
fn sorted_schedules_the_mirror_tiles_first() {
    let (w, h) = (128, 96);
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    let settings = room_settings(w, h, 1, 0);
    let factory = MockFactory::new(MockRenderer::new(w, 0));
    let config = SchedConfig {
        strategy: Strategy::Sorted,
        tiles: Some(48),
        steal: false,
        devices: vec![DeviceSpec::Cpu { workers: Some(1) }],
        ..SchedConfig::default()
    };
    let frame = render_frame(&scene, &settings, &config, &factory, true).unwrap();
    let pass = &frame.report.passes[0];
    // The single worker's first tile is the most expensive one, and it lies on the left
    // (mirror) half of the floor: the lower left of the image.
    let first = pass.initial_deques[0][0];
    let max = pass.predicted.iter().copied().fold(0.0, f64::max);
    assert_eq!(pass.predicted[first], max);
    let t = pass.tiles[first];
    assert!(t.x + t.w <= w / 2 + 8 && t.y >= h / 3, "{t:?}");
}
