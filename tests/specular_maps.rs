//! Specular maps (`map_Ks`) through the loader and the CPU path tracer, exactly: a mirror
//! floor under a uniform white sky, seen from straight above, returns its reflectance, so the
//! radiance at each point is `Ks * map(uv)` there (within float rounding); and `gasworks info` and the
//! scene writer know the map.

mod cpu_common;

use cpu_common::{info_line_of_material, load_quiet as load, with_tracer, write_file as write};
use gasworks::render::Sampler;
use gasworks::scene::gen::write_obj;
use gasworks::scene::{Environment, MaterialKind, Scene};
use glam::{Vec2, Vec3};

/// A 4x4 mirror floor facing +Y (u along +x, v along -z) of library `m.mtl`'s `floor`.
const FLOOR: &str = "mtllib m.mtl\n\
    v -2 0 2\nv 2 0 2\nv 2 0 -2\nv -2 0 -2\n\
    vt 0 0\nvt 1 0\nvt 1 1\nvt 0 1\n\
    g floor\nusemtl floor\nf 1/1 2/2 3/3 4/4\n";

#[test]
fn a_specular_mapped_mirror_reflects_ks_times_its_map() {
    let dir = tempfile::tempdir().unwrap();
    image::RgbImage::from_fn(4, 4, |x, y| {
        image::Rgb([
            (x * 60 + 20) as u8,
            (y * 50 + 30) as u8,
            ((x + y) * 25 + 5) as u8,
        ])
    })
    .save(dir.path().join("spec.png"))
    .unwrap();
    write(
        dir.path(),
        "m.mtl",
        "newmtl floor\nKs 0.9 0.8 0.7\nillum 3\nmap_Ks -s 2 1 spec.png\n",
    );
    let obj = write(dir.path(), "floor.obj", FLOOR);
    let mut scene = load(&obj);
    scene.environment = Some(Environment {
        radiance: Vec3::ONE,
    });
    let floor = &scene.materials[0];
    assert_eq!(floor.kind, MaterialKind::Mirror);
    let map = &scene.textures[floor.specular_texture.unwrap() as usize];
    let ks = floor.specular;
    with_tracer(&scene, 2, |tracer| {
        for (i, (x, z)) in [(0.13, 0.71), (-1.37, 1.2), (1.9, -1.95), (-0.4, -0.3)]
            .into_iter()
            .enumerate()
        {
            let got = tracer.radiance(
                Vec3::new(x, 1.0, z),
                -Vec3::Y,
                &mut Sampler::new(i as u32, 0, 0, 1, 1),
            );
            // The floor's UVs at (x, z): u = (x + 2) / 4, v = (2 - z) / 4.
            let uv = Vec2::new((x + 2.0) / 4.0, (2.0 - z) / 4.0);
            let want = ks * map.sample(uv);
            assert!(
                (got - want).abs().max_element() < 1e-6,
                "({x}, {z}): {got} vs {want}"
            );
        }
    });
    // The colour varies over the floor: the map is applied, not averaged.
    let a = map.sample(Vec2::new(0.1, 0.1));
    let b = map.sample(Vec2::new(0.35, 0.6));
    assert!((a - b).abs().max_element() > 0.1);

    let floor = info_line_of_material(&obj, "floor");
    assert!(floor.ends_with("specular-mapped"), "{floor}");

    let out = tempfile::tempdir().unwrap();
    let written = write_obj(&scene, out.path(), "again").unwrap();
    let again = load(&written.obj);
    let texels = |s: &Scene| {
        let t = &s.textures[s.materials[0].specular_texture.unwrap() as usize];
        (t.mapping, t.texels.clone())
    };
    assert_eq!(texels(&again), texels(&scene));
}
