//! Faces of four or more corners: convex ones are fans, concave ones are split by ear clipping
//! so that their triangles cover exactly the face's outline, with the face's winding and its
//! corners' attributes; faces that cross themselves load as fans with one warning.

use std::path::{Path, PathBuf};

use gasworks::scene::obj::{load_obj, LoadOptions};
use gasworks::scene::{Group, Scene};
use glam::{Vec2, Vec3};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn load(text: &str) -> (tempfile::TempDir, PathBuf, Scene) {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "scene.obj", text);
    let scene = match load_obj(&path, &LoadOptions { quiet: true }) {
        Ok(s) => s,
        Err(e) => panic!("refused: {e}"),
    };
    (dir, path, scene)
}

/// The warnings other than the default environment's.
fn warnings(s: &Scene) -> Vec<&String> {
    s.report
        .warnings
        .iter()
        .filter(|w| !w.contains("no emissive material"))
        .collect()
}

/// Even-odd point-in-polygon test in the z = 0 plane: the brute-force reference.
fn inside(p: Vec2, outline: &[Vec2]) -> bool {
    let mut inside = false;
    for (i, &a) in outline.iter().enumerate() {
        let b = outline[(i + 1) % outline.len()];
        if (a.y > p.y) != (b.y > p.y) && p.x < a.x + (p.y - a.y) / (b.y - a.y) * (b.x - a.x) {
            inside = !inside;
        }
    }
    inside
}

/// How many of the group's triangles hold `p`, or None when `p` is too close to an edge.
fn covering(p: Vec2, g: &Group) -> Option<usize> {
    let mut count = 0;
    for t in &g.indices {
        let [a, b, c] = t.map(|i| g.positions[i as usize].truncate());
        let sides = [
            (b - a).perp_dot(p - a),
            (c - b).perp_dot(p - b),
            (a - c).perp_dot(p - c),
        ];
        if sides.iter().any(|s| s.abs() < 1e-5) {
            return None;
        }
        if sides.iter().all(|&s| s > 0.0) || sides.iter().all(|&s| s < 0.0) {
            count += 1;
        }
    }
    Some(count)
}

/// Every sample point of the outline's bounds is covered once inside it and never outside.
fn assert_covers_exactly(g: &Group, outline: &[Vec2]) {
    let (lo, hi) = outline.iter().fold((Vec2::MAX, Vec2::MIN), |(lo, hi), p| {
        (lo.min(*p), hi.max(*p))
    });
    for i in 0..37 {
        for j in 0..37 {
            let p = lo + (hi - lo) * Vec2::new((i as f32 + 0.5) / 37.0, (j as f32 + 0.25) / 37.0);
            if let Some(count) = covering(p, g) {
                assert_eq!(count, usize::from(inside(p, outline)), "at {p}");
            }
        }
    }
}

const L: [(f32, f32); 6] = [
    (0.0, 0.0),
    (2.0, 0.0),
    (2.0, 1.0),
    (1.0, 1.0),
    (1.0, 2.0),
    (0.0, 2.0),
];

#[test]
fn a_concave_face_covers_its_outline_with_its_winding_and_attributes() {
    // The face starts at (2, 0), from where the fan would cover the L's notch.
    let mut text = String::new();
    for (x, y) in L {
        text += &format!("v {x} {y} 0\nvt {} {}\n", x / 2.0, y / 2.0);
    }
    text += "vn 0 0 1\ng wall\nf 2/2/1 3/3/1 4/4/1 5/5/1 6/6/1 1/1/1\n";
    let (_dir, _path, s) = load(&text);
    assert!(warnings(&s).is_empty(), "{:?}", s.report.warnings);
    let g = &s.groups[0];
    assert_eq!(g.triangle_count(), 4);
    let outline: Vec<Vec2> = L.iter().map(|&(x, y)| Vec2::new(x, y)).collect();
    assert_covers_exactly(g, &outline);
    for t in &g.indices {
        let [a, b, c] = t.map(|i| g.positions[i as usize]);
        assert!(
            (b - a).cross(c - a).z >= 0.0,
            "{t:?} turns against the face"
        );
    }
    // Each corner kept its own texture coordinate and normal.
    for (i, p) in g.positions.iter().enumerate() {
        assert_eq!(g.uvs[i], p.truncate() / 2.0);
        assert_eq!(g.normals[i], Vec3::Z);
    }
}

#[test]
fn concave_faces_split_the_same_whether_their_vertices_come_long_before() {
    // Thousands of lines between the vertices and the faces, so that a big file's parallel
    // parse reads them in different chunks; the same split either way.
    let mut near = String::new();
    for (x, y) in L {
        near += &format!("v {x} {y} 0\n");
    }
    let mut far = near.clone();
    // More than the parser's 256 KiB chunk.
    for i in 0..60_000 {
        far += &format!("vt {} 0\n", i % 7);
    }
    let face = "f -5 -4 -3 -2 -1 -6\n";
    let (_d1, _p1, a) = load(&(near + face));
    let (_d2, _p2, b) = load(&(far + face));
    assert_eq!(a.groups[0].positions, b.groups[0].positions);
    assert_eq!(a.groups[0].indices, b.groups[0].indices);
    let outline: Vec<Vec2> = L.iter().map(|&(x, y)| Vec2::new(x, y)).collect();
    assert_covers_exactly(&b.groups[0], &outline);
}

#[test]
fn a_face_that_crosses_itself_loads_as_a_fan_with_one_warning() {
    let mut text = String::new();
    for i in 0..5 {
        let a = (2 * i) as f32 * std::f32::consts::TAU / 5.0;
        text += &format!("v {} {} 0\n", a.cos(), a.sin());
    }
    text += "f 1 2 3\nf 1 2 3 4 5\nf 5 4 3 2 1\n";
    let (_dir, path, s) = load(&text);
    assert_eq!(s.triangle_count(), 7);
    let w = warnings(&s);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with(&format!(
            "{}:7: 2 faces cross or fold over themselves",
            path.display()
        )),
        "{}",
        w[0]
    );
}

#[test]
fn a_concave_face_with_too_many_corners_loads_as_a_fan_with_one_warning() {
    let n = 5000;
    let mut text = String::new();
    for i in 0..n {
        let a = i as f32 * std::f32::consts::TAU / n as f32;
        let r = if i % 2 == 0 { 1.0 } else { 0.95 };
        text += &format!("v {} {} 0\n", r * a.cos(), r * a.sin());
    }
    text += "f";
    for i in 1..=n {
        text += &format!(" {i}");
    }
    text += "\n";
    let (_dir, path, s) = load(&text);
    assert_eq!(s.triangle_count(), n - 2);
    let w = warnings(&s);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(
        *w[0],
        format!(
            "{}:{}: 1 concave face has more than 4096 corners, too many to split by ear clipping: it is split as fans from the first corner and may cover the wrong area",
            path.display(),
            n + 1
        )
    );
}
