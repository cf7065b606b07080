//! `gasworks render --aov albedo,normal`: the denoiser's guide layers written beside the image,
//! as a user runs it; their crops merge like the image's; bad requests are refused before
//! the render.

mod cli_support;

use cli_support::{cornell, gasworks_in, linear, stderr};
use std::path::Path;
use std::process::Output;

/// Renders the Cornell box at 32x24, 8 spp, on the CPU, to `dir/out`, with `extra`.
fn render(dir: &Path, out: &str, extra: &[&str]) -> Output {
    let scene = cornell();
    let mut args = vec![
        "render",
        scene.to_str().unwrap(),
        "-o",
        out,
        "--width",
        "32",
        "--height",
        "24",
        "--spp",
        "8",
        "--backend",
        "cpu",
    ];
    args.extend_from_slice(extra);
    gasworks_in(dir, &args)
}

#[test]
fn the_layers_are_written_beside_the_image_with_their_own_keys() {
    let dir = tempfile::tempdir().unwrap();
    let o = render(dir.path(), "box.png", &["--aov", "albedo,normal"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (albedo, key) = linear(&dir.path().join("box.albedo.exr"));
    assert!(key.contains("; aov albedo; aov-spp 8"), "{key}");
    assert_eq!(albedo.len(), 32 * 24);
    assert!(albedo.iter().flatten().all(|c| (0.0..=1.0).contains(c)));
    // The walls' Kd are 0.725 white, 0.63 red and 0.14 green (cornell.mtl): the albedo is
    // not the image, and both coloured walls show.
    assert!(
        albedo.iter().any(|p| p[0] > 0.5 && p[1] < 0.1),
        "no red wall"
    );
    assert!(
        albedo.iter().any(|p| p[1] > 0.4 && p[0] < 0.2),
        "no green wall"
    );
    let (normal, key) = linear(&dir.path().join("box.normal.exr"));
    assert!(key.contains("; aov normal; aov-spp 8"), "{key}");
    for n in &normal {
        let len = (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt();
        assert!(len <= 1.0 + 1e-5, "{n:?}");
    }
    // The floor faces up, towards the camera's side: its pixels' normals point up.
    assert!(normal.iter().any(|n| n[1] > 0.99));
    let printed = stderr(&o);
    assert!(
        printed.contains("aov: box.albedo.exr (albedo, 8 spp"),
        "{printed}"
    );
    // --aov-spp above the render's samples takes the render's.
    let o = render(
        dir.path(),
        "again.exr",
        &["--aov", "normal", "--aov-spp", "64"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (again, key) = linear(&dir.path().join("again.normal.exr"));
    assert!(key.contains("aov-spp 8"), "{key}");
    assert_eq!(again, normal, "the layer depends on the settings alone");
    assert!(!dir.path().join("again.albedo.exr").exists());
}

#[test]
fn crops_of_a_layer_merge_into_the_whole_layer_and_not_with_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let aov = ["--aov", "albedo,normal", "--aov-spp", "4"];
    let ok = |o: Output| assert!(o.status.success(), "{}", stderr(&o));
    ok(render(dir.path(), "whole.exr", &aov));
    let top = [&aov[..], &["--pixelbounds", "0,32,0,10"]].concat();
    ok(render(dir.path(), "top.exr", &top));
    let bottom = [&aov[..], &["--pixelbounds", "0,32,10,24"]].concat();
    ok(render(dir.path(), "bottom.exr", &bottom));
    for layer in ["albedo", "normal"] {
        let merged = format!("merged.{layer}.exr");
        ok(gasworks_in(
            dir.path(),
            &[
                "merge",
                &format!("top.{layer}.exr"),
                &format!("bottom.{layer}.exr"),
                "-o",
                &merged,
            ],
        ));
        assert_eq!(
            linear(&dir.path().join(&merged)).0,
            linear(&dir.path().join(format!("whole.{layer}.exr"))).0,
            "{layer}"
        );
    }
    // A layer's crop is not a crop of the image, nor of the other layer.
    for other in ["bottom.exr", "bottom.normal.exr"] {
        let o = gasworks_in(
            dir.path(),
            &["merge", "top.albedo.exr", other, "-o", "mixed.exr"],
        );
        assert!(!o.status.success(), "{other}");
        assert!(stderr(&o).contains("aov"), "{other}: {}", stderr(&o));
    }
}

#[test]
fn bad_layer_requests_are_refused_before_the_render() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |out: &str, extra: &[&str], says: &str| {
        let o = render(dir.path(), out, extra);
        assert!(!o.status.success(), "{extra:?}");
        assert!(stderr(&o).contains(says), "{extra:?}: {}", stderr(&o));
        assert!(!dir.path().join(out).exists(), "{extra:?}");
    };
    refused(
        "a.png",
        &["--aov", "depth"],
        "possible values: albedo, normal",
    );
    refused("a.png", &["--aov-spp", "4"], "--aov");
    refused("a.png", &["--aov", "albedo", "--aov-spp", "0"], "--aov-spp");
    let o = render(dir.path(), "a.png", &["--aov", "normal"]);
    assert!(o.status.success(), "{}", stderr(&o));
    refused(
        "missing/a.png",
        &["--aov", "normal"],
        "the folder missing does not exist",
    );
}

/// The layers trace the BVH the CPU backend traces: one build a render.
#[test]
fn the_layers_and_the_cpu_backend_trace_one_bvh() {
    let dir = tempfile::tempdir().unwrap();
    let scene = cornell();
    let o = cli_support::gasworks_command()
        .current_dir(dir.path())
        .env("RUST_LOG", "gasworks::cpu::bvh=debug")
        .args(["render", scene.to_str().unwrap(), "-o", "box.png"])
        .args(["--width", "32", "--height", "24", "--spp", "2"])
        .args(["--backend", "cpu", "--aov", "albedo,normal"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).matches("CPU BVH built").count(),
        1,
        "{}",
        stderr(&o)
    );
}
