//! A toy store after FlexRender's "Toy Store": rows of shelf units full of toys, every toy a
//! mesh of its own (its own vertices, its own shape parameters: nothing is instanced), in
//! mixed diffuse and mirror materials, lit by ceiling panels over the aisles. The units open
//! toward +Z, where the default camera (looking along -Z) sees them, and the rows go away from
//! it toward -Z (laid out the other way round, then turned half a turn about the Y axis). The
//! file carries a camera hint ([`toystore_camera`]): a view from above the front aisle down
//! the rows, which shows far more of the store than a view of the front row.
//!
//! One shelf unit is one group of exactly [`TRIANGLES_PER_SHELF`] triangles: a frame of 8
//! boxes and 4 boards of 6 toys (each board one of each kind: ball, ring, can, rocket, vase,
//! block, in a seeded order). The scene adds a floor quad and one light panel (2 triangles)
//! per row of units, so `--shelves N` gives `N * 9936 + 2 + 2 * rows` triangles: one shelf is
//! ten thousand, 1007 shelves ten million, 10,000 shelves a hundred million.
//!
//! [`toystore_groups`] makes the groups one at a time for a streaming writer, so memory stays
//! at one shelf whatever the size; [`toystore`] collects them into a [`Scene`].

use std::f32::consts::{PI, TAU};

use glam::{Quat, Vec2, Vec3};

use super::mesh::{self, MeshBuilder, Placement};
use super::rng::Rng;
use super::GenError;
use crate::scene::camera_path::{CameraPath, PathFrame};
use crate::scene::{Camera, Group, Material, MaterialKind, Scene};

/// Triangles in one shelf unit (frame and toys).
pub const TRIANGLES_PER_SHELF: u64 = FRAME_TRIANGLES + BOARDS as u64 * TOYS_PER_BOARD_TRIANGLES;
/// The largest store: 1e9 triangles is far beyond any GPU's memory already.
pub const MAX_SHELVES: u64 = 100_000;

const BOARDS: usize = 4;
const FRAME_TRIANGLES: u64 = 8 * mesh::CUBOID_TRIANGLES;
// The resolutions of the six toy kinds (fixed, so that every shelf has the same count).
const BALL: (u32, u32) = (24, 13);
const RING: (u32, u32) = (28, 11);
const CAN: (u32, u32) = (24, 7);
const ROCKET: (u32, u32) = (20, 11);
const VASE: (u32, u32) = (24, 10);
const TOYS_PER_BOARD_TRIANGLES: u64 = mesh::sphere_triangles(BALL.0, BALL.1)
    + mesh::torus_triangles(RING.0, RING.1)
    + mesh::lathe_triangles(CAN.0, CAN.1)
    + mesh::lathe_triangles(ROCKET.0, ROCKET.1)
    + mesh::lathe_triangles(VASE.0, VASE.1)
    + mesh::CUBOID_TRIANGLES;
const KINDS: usize = 6;

// Shelf unit dimensions (metres) and the store's layout.
const UNIT_WIDTH: f32 = 2.0;
const UNIT_HEIGHT: f32 = 2.0;
const UNIT_DEPTH: f32 = 0.5;
const BOARD_GAP: f32 = 0.48;
const UNIT_PITCH: f32 = 2.2;
const ROW_PITCH: f32 = 3.2;
const LIGHT_HEIGHT: f32 = 2.9;

const FLOOR: u32 = 0;
const WOOD: u32 = 1;
const LIGHT: u32 = 2;
const FIRST_TOY: u32 = 3;
const DIFFUSE_TOYS: u32 = 8;
const MIRROR_TOYS: u32 = 3;

/// The store's materials: floor, wood, light, 8 diffuse toy colours, 3 mirrors.
pub fn toystore_materials() -> Vec<Material> {
    let mut light = Material::diffuse("ceiling_light", Vec3::splat(0.8));
    light.emission = Vec3::new(5.0, 4.8, 4.4);
    let mut out = vec![
        Material::diffuse("floor", Vec3::splat(0.35)),
        Material::diffuse("wood", Vec3::new(0.45, 0.3, 0.18)),
        light,
    ];
    let colours = [
        ("toy_red", Vec3::new(0.75, 0.08, 0.06)),
        ("toy_orange", Vec3::new(0.85, 0.4, 0.05)),
        ("toy_yellow", Vec3::new(0.85, 0.75, 0.1)),
        ("toy_green", Vec3::new(0.15, 0.6, 0.15)),
        ("toy_blue", Vec3::new(0.08, 0.2, 0.7)),
        ("toy_purple", Vec3::new(0.45, 0.12, 0.6)),
        ("toy_pink", Vec3::new(0.9, 0.45, 0.6)),
        ("toy_white", Vec3::splat(0.85)),
    ];
    out.extend(colours.iter().map(|(n, c)| Material::diffuse(n, *c)));
    let mirrors = [
        ("mirror_chrome", Vec3::splat(0.9)),
        ("mirror_gold", Vec3::new(1.0, 0.78, 0.34)),
        ("mirror_copper", Vec3::new(0.95, 0.64, 0.54)),
    ];
    out.extend(mirrors.iter().map(|(n, c)| Material {
        kind: MaterialKind::Mirror,
        specular: *c,
        ..Material::diffuse(n, Vec3::ZERO)
    }));
    out
}

/// The camera `gasworks gen` writes into the file as its hint: standing in the front aisle
/// past the right end of the first row, at eye height, looking diagonally along the row of
/// shelf units (the same view whatever the store's size: the first units fill the frame and
/// the row recedes).
pub fn toystore_camera() -> Camera {
    Camera {
        eye: Vec3::new(1.5, 1.6, 3.0),
        look_at: Vec3::new(-2.1, 0.9, -0.3),
        up: Vec3::Y,
        fov_y_deg: 50.0,
    }
}

/// Metres between a walk's frames.
const WALK_STEP: f32 = 0.25;

/// A walk through the store ([`crate::scene::camera_path`]): at eye height down the aisle in
/// front of the first row, looking ahead and toward its shelves, then, where there is a second
/// row, round its end and back down the aisle in front of it. A frame every [`WALK_STEP`]
/// metres, so that consecutive frames see much the same (a fly-through's coherence).
pub fn toystore_walk(shelves: u64) -> CameraPath {
    let (rows, columns) = rows_and_columns(shelves);
    let row_length = columns as f32 * UNIT_PITCH;
    // The store is turned half a turn: rows at z = -r * ROW_PITCH, open toward +Z, the units
    // spanning x from -row_length to 0. An aisle's middle lies 1.4 m in front of its row.
    let aisle_z = |r: u64| -(r as f32) * ROW_PITCH + 1.4;
    let (x0, x1) = (1.5, -row_length - 1.5);
    let mut points: Vec<(Vec3, f32)> = Vec::new();
    let mut walk = |from: Vec3, to: Vec3, ahead: f32| {
        let steps = ((to - from).length() / WALK_STEP).ceil().max(1.0) as usize;
        for i in 0..steps {
            points.push((from.lerp(to, i as f32 / steps as f32), ahead));
        }
    };
    walk(
        Vec3::new(x0, 1.6, aisle_z(0)),
        Vec3::new(x1, 1.6, aisle_z(0)),
        -1.0,
    );
    if rows > 1 {
        walk(
            Vec3::new(x1, 1.6, aisle_z(0)),
            Vec3::new(x1, 1.6, aisle_z(1)),
            -1.0,
        );
        walk(
            Vec3::new(x1, 1.6, aisle_z(1)),
            Vec3::new(x0, 1.6, aisle_z(1)),
            1.0,
        );
    }
    let frames = points
        .into_iter()
        .enumerate()
        .map(|(i, (eye, ahead))| PathFrame {
            line: i + 2,
            camera: Camera {
                eye,
                // Two metres ahead along the aisle, a metre toward the shelves, a little down.
                look_at: eye + Vec3::new(2.0 * ahead, -0.5, -1.0),
                up: Vec3::Y,
                fov_y_deg: 60.0,
            },
        })
        .collect();
    CameraPath { frames }
}

/// Shelf units per row and rows for `shelves` units: about square.
fn rows_and_columns(shelves: u64) -> (u64, u64) {
    let columns = (shelves as f64).sqrt().ceil().max(1.0) as u64;
    (shelves.div_ceil(columns), columns)
}

/// Checks `--shelves`.
pub fn check_shelves(shelves: u64) -> Result<(), GenError> {
    if shelves == 0 || shelves > MAX_SHELVES {
        return Err(GenError::BadParameter(format!(
            "toystore needs between 1 and {MAX_SHELVES} shelves, got {shelves}"
        )));
    }
    Ok(())
}

/// Total triangles of a store of `shelves` units.
pub fn toystore_triangles(shelves: u64) -> u64 {
    let (rows, _) = rows_and_columns(shelves);
    shelves * TRIANGLES_PER_SHELF + 2 + 2 * rows
}

/// Makes the store's groups one at a time (floor, lights, then the shelf units) and hands each
/// to `sink`, stopping at the first error the sink returns.
pub fn toystore_groups<E>(
    shelves: u64,
    seed: u64,
    mut sink: impl FnMut(Group) -> Result<(), E>,
) -> Result<(), E> {
    let (rows, columns) = rows_and_columns(shelves);
    let row_length = columns as f32 * UNIT_PITCH;

    // The floor reaches 2 m past the store on every side, and an aisle further at the front.
    let front = -ROW_PITCH - 2.0;
    let back = (rows - 1) as f32 * ROW_PITCH + UNIT_DEPTH + 2.0;
    let mut floor = Group {
        name: "floor".into(),
        ..Group::default()
    };
    let place = Placement::at(Vec3::new(row_length * 0.5, 0.0, 0.5 * (front + back)))
        .rotated(Quat::from_rotation_x(-std::f32::consts::FRAC_PI_2));
    let mut b = MeshBuilder::new(&mut floor, place, FLOOR);
    let size = Vec2::new(row_length + 4.0, back - front);
    mesh::panel(&mut b, 1, 1, size, |_, _| 0.0);
    mesh::turn_half(&mut floor);
    sink(floor)?;

    // One strip of light above the aisle in front of each row, facing down.
    let mut lights = Group {
        name: "ceiling_lights".into(),
        ..Group::default()
    };
    for row in 0..rows {
        let z = row as f32 * ROW_PITCH - 0.8;
        let place = Placement::at(Vec3::new(row_length * 0.5, LIGHT_HEIGHT, z))
            .rotated(Quat::from_rotation_x(std::f32::consts::FRAC_PI_2));
        let mut b = MeshBuilder::new(&mut lights, place, LIGHT);
        mesh::panel(&mut b, 1, 1, Vec2::new(row_length - 0.4, 0.6), |_, _| 0.0);
    }
    mesh::turn_half(&mut lights);
    sink(lights)?;

    for shelf in 0..shelves {
        let (row, column) = (shelf / columns, shelf % columns);
        let origin = Vec3::new(column as f32 * UNIT_PITCH, 0.0, row as f32 * ROW_PITCH);
        let mut unit = shelf_unit(shelf, origin, seed);
        mesh::turn_half(&mut unit);
        sink(unit)?;
    }
    Ok(())
}

/// The whole store in memory.
pub fn toystore(shelves: u64, seed: u64) -> Result<Scene, GenError> {
    check_shelves(shelves)?;
    let mut groups = Vec::new();
    toystore_groups(shelves, seed, |g| {
        groups.push(g);
        Ok::<(), GenError>(())
    })?;
    Ok(Scene::new(
        &format!("gasworks gen toystore --shelves {shelves} --seed {seed}"),
        groups,
        toystore_materials(),
    ))
}

/// One shelf unit from `origin` to `origin + (width, height, depth)`, open toward -Z.
fn shelf_unit(shelf: u64, origin: Vec3, seed: u64) -> Group {
    let mut group = Group {
        name: format!("shelf_{shelf:06}"),
        ..Group::default()
    };
    let mut rng = Rng::new(seed, 1000 + shelf);
    let t = 0.03;
    {
        let mut b = MeshBuilder::new(&mut group, Placement::at(origin), WOOD);
        let (w, h, d) = (UNIT_WIDTH, UNIT_HEIGHT, UNIT_DEPTH);
        // Sides, back (at +Z), top, and the 4 boards the toys stand on.
        mesh::cuboid(&mut b, Vec3::ZERO, Vec3::new(t, h, d));
        mesh::cuboid(&mut b, Vec3::new(w - t, 0.0, 0.0), Vec3::new(w, h, d));
        mesh::cuboid(&mut b, Vec3::new(t, 0.0, d - t), Vec3::new(w - t, h, d));
        mesh::cuboid(&mut b, Vec3::new(t, h - t, 0.0), Vec3::new(w - t, h, d - t));
        for board in 0..BOARDS {
            let y = board as f32 * BOARD_GAP;
            mesh::cuboid(&mut b, Vec3::new(t, y, 0.0), Vec3::new(w - t, y + t, d - t));
        }
    }
    let slot_width = (UNIT_WIDTH - 2.0 * t) / KINDS as f32;
    for board in 0..BOARDS {
        let mut kinds: [usize; KINDS] = std::array::from_fn(|k| k);
        rng.shuffle(&mut kinds);
        for (slot, &kind) in kinds.iter().enumerate() {
            let floor_y = board as f32 * BOARD_GAP + t;
            let centre = origin
                + Vec3::new(
                    t + slot_width * (slot as f32 + 0.5),
                    floor_y,
                    (UNIT_DEPTH - t) * 0.5,
                );
            // Each toy fits a slot_width cube, below the next board.
            let size = slot_width * rng.range(0.6, 0.85);
            let material = if rng.f32() < 0.3 {
                FIRST_TOY + DIFFUSE_TOYS + rng.below(MIRROR_TOYS as usize) as u32
            } else {
                FIRST_TOY + rng.below(DIFFUSE_TOYS as usize) as u32
            };
            toy(&mut group, kind, centre, size, material, &mut rng);
        }
    }
    group
}

/// One toy of `kind` of about `size` across standing at `base`.
fn toy(group: &mut Group, kind: usize, base: Vec3, size: f32, material: u32, rng: &mut Rng) {
    let turn = rng.range(0.0, TAU);
    let standing = Placement::at(base).turned(turn);
    let r = size * 0.5;
    match kind {
        0 => {
            let squash = rng.range(0.8, 1.0);
            let place = Placement::at(base + Vec3::Y * r * squash)
                .turned(turn)
                .scaled(Vec3::new(1.0, squash, 1.0));
            let mut b = MeshBuilder::new(group, place, material);
            mesh::sphere(&mut b, BALL.0, BALL.1, r);
        }
        1 => {
            let minor = r * rng.range(0.15, 0.3);
            let major = r - minor;
            let place = Placement::at(base + Vec3::Y * minor).turned(turn);
            let mut b = MeshBuilder::new(group, place, material);
            mesh::torus(&mut b, RING.0, RING.1, major, minor);
        }
        2 => {
            // A can with rounded rims.
            let height = size * rng.range(0.7, 1.2);
            let bevel = rng.range(0.05, 0.15);
            let profile = lathe_profile(CAN.1, |t| {
                let edge = (t.min(1.0 - t) / bevel).min(1.0);
                (r * (0.8 + 0.2 * (edge * PI * 0.5).sin()), height * t)
            });
            let mut b = MeshBuilder::new(group, standing, material);
            mesh::lathe(&mut b, CAN.0, &profile);
        }
        3 => {
            // A rocket: wide fins at the bottom, a body, a pointed (but not closed) nose.
            let height = size * rng.range(1.2, 1.6);
            let profile = lathe_profile(ROCKET.1, |t| {
                let body = 0.45 + 0.1 * (PI * t).sin();
                let fins = if t < 0.2 { 0.5 * (1.0 - t / 0.2) } else { 0.0 };
                let nose = if t > 0.7 {
                    1.0 - 0.9 * ((t - 0.7) / 0.3)
                } else {
                    1.0
                };
                (r * (body + fins) * nose, height * t)
            });
            let mut b = MeshBuilder::new(group, standing, material);
            mesh::lathe(&mut b, ROCKET.0, &profile);
        }
        4 => {
            let height = size * rng.range(1.0, 1.5);
            let belly = rng.range(0.4, 0.7);
            let profile = lathe_profile(VASE.1, |t| {
                let bulge = (PI * (t / belly).min(1.0)).sin() * (1.0 - t).max(0.3);
                (r * (0.35 + 0.6 * bulge), height * t)
            });
            let mut b = MeshBuilder::new(group, standing, material);
            mesh::lathe(&mut b, VASE.0, &profile);
        }
        _ => {
            let h = r * rng.range(0.6, 0.9);
            let mut b = MeshBuilder::new(group, standing, material);
            mesh::cuboid(&mut b, Vec3::new(-h, 0.0, -h), Vec3::new(h, 2.0 * h, h));
        }
    }
}

fn lathe_profile(points: u32, at: impl Fn(f32) -> (f32, f32)) -> Vec<(f32, f32)> {
    (0..points)
        .map(|i| at(i as f32 / (points - 1) as f32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shelf_has_the_documented_count_and_no_degenerates() {
        assert_eq!(TRIANGLES_PER_SHELF, 9936);
        let s = toystore(3, 7).unwrap();
        assert_eq!(s.triangle_count() as u64, toystore_triangles(3));
        assert_eq!(s.report.degenerate_dropped, 0);
        for g in s.groups.iter().filter(|g| g.name.starts_with("shelf_")) {
            assert_eq!(g.triangle_count() as u64, TRIANGLES_PER_SHELF);
            assert_eq!(g.normals.len(), g.positions.len());
        }
        assert_eq!(s.groups.len(), 3 + 2);
        assert!(!s.lights.is_empty());
    }

    #[test]
    fn toys_are_unique_meshes_in_mixed_materials() {
        let s = toystore(1, 1).unwrap();
        let shelf = &s.groups[2];
        let used: std::collections::HashSet<u32> = shelf.face_materials.iter().copied().collect();
        let kinds: Vec<MaterialKind> = used.iter().map(|&m| s.materials[m as usize].kind).collect();
        assert!(kinds.contains(&MaterialKind::Mirror) && kinds.contains(&MaterialKind::Diffuse));
        // No vertex is shared between two toys: vertex count is far above one toy's.
        assert!(shelf.positions.len() > 5000);
    }

    #[test]
    fn the_seed_changes_the_store_but_not_its_size() {
        let a = toystore(2, 1).unwrap();
        let b = toystore(2, 2).unwrap();
        assert_eq!(a.triangle_count(), b.triangle_count());
        assert_ne!(a.groups[2].positions, b.groups[2].positions);
        let again = toystore(2, 1).unwrap();
        assert_eq!(a.groups[3].positions, again.groups[3].positions);
    }

    /// Turned half a turn: the units open toward +Z (their backs are at their -Z side, facing
    /// +Z) and the rows go away toward -Z; the hint camera stands in front of the first row.
    #[test]
    fn the_walk_stays_in_the_aisles_and_sees_the_shelves() {
        for shelves in [1, 4, 12] {
            let store = toystore(shelves, 1).unwrap();
            let walk = toystore_walk(shelves);
            assert!(walk.frames.len() > 10, "{shelves}");
            let (lo, hi) = (store.bounds().min, store.bounds().max);
            let (rows, columns) = rows_and_columns(shelves);
            let row_length = columns as f32 * UNIT_PITCH;
            for f in &walk.frames {
                let e = f.camera.eye;
                assert!(e.y > 1.0 && e.y < LIGHT_HEIGHT, "{e}");
                assert!(
                    e.z > lo[2] && e.z < hi[2],
                    "{shelves}: {e} outside the floor"
                );
                // Never inside a row of units: in an aisle, or past the rows' ends.
                let in_aisle = (0..rows).any(|r| (e.z - (1.4 - r as f32 * ROW_PITCH)).abs() < 1e-3);
                assert!(in_aisle || e.x < -row_length || e.x > 0.0, "{shelves}: {e}");
                f.camera.frame(64, 48).unwrap();
            }
            let back = CameraPath::parse(&walk.to_csv(), std::path::Path::new("w.csv")).unwrap();
            assert_eq!(back.frames.len(), walk.frames.len());
        }
    }

    #[test]
    fn the_store_opens_toward_plus_z_and_the_hint_camera_faces_it() {
        let s = toystore(4, 1).unwrap();
        let b = s.bounds();
        let cam = toystore_camera();
        assert!(cam.eye.z > b.max[2] - 3.0 && cam.look_at.z < cam.eye.z);
        let shelf = s.groups.iter().find(|g| g.name == "shelf_000000").unwrap();
        let sb = shelf.bounds();
        assert!(
            sb.max[2] <= 1e-6 && sb.min[2] >= -UNIT_DEPTH - 1e-6,
            "{sb:?}"
        );
        // The back board is the unit's farthest (-Z) part; the toys stand in front of it.
        let back = s.groups.iter().find(|g| g.name == "shelf_000002").unwrap();
        assert!(
            back.bounds().max[2] < sb.min[2],
            "the second row lies toward -Z"
        );
        // The hint camera sees the first unit's open side: its centre is in front of the eye.
        let f = cam.frame(64, 36).unwrap();
        let centre = Vec3::from(sb.min).lerp(Vec3::from(sb.max), 0.5);
        let (px, py, _) = f.project(centre).expect("in front of the camera");
        assert!((0.0..64.0).contains(&px) && (0.0..36.0).contains(&py));
    }

    #[test]
    fn shelves_are_checked() {
        assert!(toystore(0, 0).is_err());
        assert!(check_shelves(MAX_SHELVES + 1).is_err());
    }

    #[test]
    fn ten_million_triangles_need_about_a_thousand_shelves() {
        assert!(toystore_triangles(1007) >= 10_000_000);
        assert!(toystore_triangles(1006) < 10_000_000);
    }
}
