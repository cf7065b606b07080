//! The `--costmap` pictures: written, at image size, showing what they should.

mod sched_support;

use gasworks::scene::MaterialKind;
use gasworks::sched::pictures::write_all;
use gasworks::sched::{render_frame, DeviceSpec, SchedConfig, Strategy};
use sched_support::{room, room_settings, MockFactory, MockRenderer};

#[test]
fn pictures_are_written_at_image_size() {
    let (w, h) = (96, 64);
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    let settings = room_settings(w, h, 1, 2);
    let factory = MockFactory::new(MockRenderer::new(w, 2));
    let config = SchedConfig {
        strategy: Strategy::Adaptive,
        tiles: Some(16),
        devices: vec![DeviceSpec::Cpu { workers: Some(3) }],
        ..SchedConfig::default()
    };
    let frame = render_frame(&scene, &settings, &config, &factory, true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("maps");
    let files = write_all(&frame.report, &frame.film, &out).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "estimated.png",
            "measured.png",
            "difference.png",
            "tiles.png"
        ]
    );
    for f in &files {
        let img = image::open(f).unwrap().to_rgb8();
        assert_eq!(img.dimensions(), (w, h), "{}", f.display());
    }
    // The estimate's picture is the cost map scaled to its 99th percentile: its most
    // expensive cell saturates to the gradient's brightest colour, its cheapest is dark.
    let est = image::open(&files[0]).unwrap().to_rgb8();
    let map = &frame.report.costmap;
    let argmax = (0..map.values.len())
        .max_by(|&a, &b| map.values[a].total_cmp(&map.values[b]))
        .unwrap();
    let argmin = (0..map.values.len())
        .min_by(|&a, &b| map.values[a].total_cmp(&map.values[b]))
        .unwrap();
    let at = |cell: usize| {
        let (cx, cy) = ((cell % map.width) as u32, (cell / map.width) as u32);
        // The first image pixel inside that cell.
        let px = (cx * w).div_ceil(map.width as u32);
        let py = (cy * h).div_ceil(map.height as u32);
        est.get_pixel(px, py).0
    };
    assert_eq!(at(argmax), [252, 255, 163]);
    let dark = at(argmin);
    assert!(
        dark.iter().map(|&c| c as u32).sum::<u32>() < 200,
        "{dark:?}"
    );
    // Every tile's top-left corner is framed in its worker's colour (not the dimmed image,
    // whose channels are at most 3/4 of 255).
    let tiles = image::open(&files[3]).unwrap().to_rgb8();
    for t in &frame.report.passes[0].tiles {
        let p = tiles.get_pixel(t.x, t.y).0;
        assert!(p.iter().any(|&c| c > 191), "{t:?}: {p:?}");
    }
}
