//! What the fuzzers found (docs/guide/fuzzing.md), each as the file a user could hand to
//! `gasworks`: every one is refused with an error naming the file and what is wrong, a
//! non-zero exit, no panic, and nothing written.

mod cli_support;

use cli_support::{gasworks_in, stderr};
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz")
        .join(name)
}

/// Runs `args` in a fresh folder holding `input` (copied under its own name) and checks the
/// refusal: exit status 1, the input named, `expected` said, and no file left but the input.
fn refused(input: &str, args: &[&str], expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(data(input), dir.path().join(input)).unwrap();
    let out = gasworks_in(dir.path(), args);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{args:?} should fail: {e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(e.contains(input), "the error names the file: {e}");
    assert!(e.contains(expected), "expected {expected:?}: {e}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|f| f.unwrap().file_name())
        .collect();
    assert_eq!(left, [input], "only the input is left");
}

/// An EXR of 1812 bytes whose data window (5636082x12 pixels, 811 MB as f32 RGB) was
/// allocated before anything checked it.
#[test]
fn an_exr_window_wider_than_any_render_is_refused_before_allocating() {
    let input = "exr-window-claims-811mb.exr";
    refused(
        input,
        &["merge", input, "-o", "m.exr"],
        "gasworks renders at most 32768 a side",
    );
}

/// A rendered EXR whose windows are made to claim 4000x4000 pixels: 192 MB from a file of a
/// few kilobytes.
#[test]
fn an_exr_whose_windows_outgrow_its_bytes_is_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cornell = cli_support::cornell();
    let args = [
        "render",
        cornell.to_str().unwrap(),
        "--width",
        "24",
        "--height",
        "16",
    ];
    let out = gasworks_in(
        d,
        &[&args[..], &["--spp", "1", "-o", "small.exr", "-q"]].concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let mut bytes = std::fs::read(d.join("small.exr")).unwrap();
    let size = bytes.len();
    for name in [&b"dataWindow\0box2i\0"[..], b"displayWindow\0box2i\0"] {
        let at = bytes.windows(name.len()).position(|w| w == name).unwrap() + name.len() + 4;
        for (k, v) in [0i32, 0, 3999, 3999].into_iter().enumerate() {
            bytes[at + 4 * k..at + 4 * k + 4].copy_from_slice(&v.to_le_bytes());
        }
    }
    let input = "exr-window-outgrows-its-bytes.exr";
    std::fs::write(d.join(input), &bytes).unwrap();
    let out = gasworks_in(d, &["merge", input, "-o", "m.exr"]);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{e}");
    let expected = format!("data window: its 4000x4000 pixels would take 192000000 bytes, more than a file of {size} bytes");
    assert!(e.contains(input) && e.contains(&expected), "{e}");
    assert!(!d.join("m.exr").exists());
}

/// A PNG of 68 bytes whose header claims 8000x8000 texels (1 GB as the texture is held).
fn png_claiming_8000_squared() -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        out.extend_from_slice(&crc.sum().to_be_bytes());
    }
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = [8000u32.to_be_bytes(), 8000u32.to_be_bytes()].concat();
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(
        &mut png,
        b"IDAT",
        &[0x78, 0x9c, 0x63, 0x60, 0, 0, 0, 2, 0, 1],
    );
    chunk(&mut png, b"IEND", &[]);
    png
}

/// A texture whose header claims more texels than its bytes hold (found with a bump map of
/// the sponza-like scene: 528 MB for a PNG of a few hundred bytes) is refused before it is
/// decoded, with a warning naming it, and its material falls back to its colour.
#[test]
fn a_texture_claiming_more_than_its_bytes_hold_is_refused_before_decoding() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let png = png_claiming_8000_squared();
    std::fs::write(d.join("huge.png"), &png).unwrap();
    std::fs::write(
        d.join("s.obj"),
        "mtllib s.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nvt 0 0\nvt 1 0\nvt 0 1\nusemtl m\n\
         f 1/1 2/2 3/3\n",
    )
    .unwrap();
    std::fs::write(d.join("s.mtl"), "newmtl m\nKd 1 1 1\nmap_Kd huge.png\n").unwrap();
    let out = gasworks_in(
        d,
        &[
            "render", "s.obj", "--width", "8", "--height", "8", "-o", "o.png",
        ],
    );
    let e = stderr(&out);
    assert!(out.status.success(), "{e}");
    let expected = format!(
        "texture huge.png cannot be used (its 8000x8000 pixels would take 1024000000 bytes, \
         more than a file of {} bytes can hold",
        png.len()
    );
    assert!(e.contains(&expected), "{e}");
}

/// The same rule for an environment map, which is an error: the render needs it.
#[test]
fn an_environment_map_claiming_more_than_its_bytes_hold_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hdr = b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 20000 +X 30000\n\x02\x02\x75\x30";
    std::fs::write(d.join("sky.hdr"), hdr).unwrap();
    let cornell = cli_support::cornell();
    let args = [
        "render",
        cornell.to_str().unwrap(),
        "--env-map",
        "sky.hdr",
        "-o",
        "o.exr",
    ];
    let out = gasworks_in(d, &args);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("environment map sky.hdr: reading it: its 30000x20000 pixels would take"),
        "{e}"
    );
    assert!(!d.join("o.exr").exists());
}

/// An OBJ of overlapping triangles (a mangled Cornell box, 3.5 KB) whose binary BVH obvhs's
/// reinsertion pass made deeper than obvhs's own stack size, which its debug-build validation
/// refused with a panic. gasworks traverses with its own stack, which grows: the scene renders
/// in every build.
#[test]
fn a_bvh_deeper_than_obvhs_stack_renders() {
    let dir = tempfile::tempdir().unwrap();
    let scene = data("bvh-deeper-than-obvhs-stack.obj");
    let scene = scene.to_str().unwrap();
    let args = [
        "render", scene, "--width", "8", "--height", "8", "--spp", "1", "-o", "o.png",
    ];
    let out = gasworks_in(dir.path(), &args);
    let e = stderr(&out);
    assert!(out.status.success(), "{e}");
    assert!(dir.path().join("o.png").exists());
}

/// A cost-map CSV of 150 bytes with one cell at x = 2136839377076028300, y = 8: the width
/// times the height overflowed.
#[test]
fn a_cost_map_whose_cell_indices_overflow_is_refused() {
    let path = data("costmap-cell-index-overflows.csv");
    let e = gasworks::sched::report::read_costmap(&path).unwrap_err();
    let message = e.to_string();
    assert!(
        message.contains("costmap-cell-index-overflows.csv"),
        "{message}"
    );
    assert!(
        message.ends_with("the cells do not form a full rectangle"),
        "{message}"
    );
}
