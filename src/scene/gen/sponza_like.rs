//! A stand-in for Crytek Sponza where it matters to acceleration-structure builds: the sizes
//! of its groups. Sponza's ~390 groups are heavy-tailed: dozens of 2-triangle quads, most
//! groups under a few hundred triangles, and a handful over 10k holding much of the total.
//!
//! The sizes here are the quantiles of a log-logistic distribution (a power-law tail) with
//! 10% of the groups set to 2 triangles, jittered by the seed, with the median solved for so
//! that the total matches the request. Each size is then made into a real mesh in an
//! atrium-like layout open at -Z (toward a camera placed like the Cornell box's, looking
//! along +Z): a tessellated floor and three walls (the largest groups),
//! wavy drapes on the back wall, columns, arches, urns and rings along two colonnades, cones,
//! crates, balls and vases in the side aisles, quads as banners on the side walls, and an
//! emissive skylight (also a 2-triangle group) over the court.
//!
//! Textured where Sponza is ([`super::textures`]): flagstones on the floor (a colour map and a
//! height map, bump mapped), ashlar on the walls, and banners cut out by an opacity mask; those
//! groups carry texture coordinates. The textures come from their own random stream, so the
//! geometry is the same as without them.

use std::f32::consts::{FRAC_PI_2, PI, TAU};

use glam::{Quat, Vec2, Vec3};

use super::mesh::{self, MeshBuilder, Placement};
use super::rng::Rng;
use super::{textures, GenError};
use crate::scene::{BumpMap, Camera, Group, Material, MaterialKind, Scene, Texture};

/// Defaults: Crytek Sponza's group count and triangle count, rounded.
pub const SPONZA_LIKE_GROUPS: usize = 390;
pub const SPONZA_LIKE_TRIANGLES: u64 = 260_000;
/// The largest scene the generator builds in memory.
pub const SPONZA_LIKE_MAX_TRIANGLES: u64 = 50_000_000;

/// Share of the groups that are single quads (2 triangles).
const QUAD_SHARE: f64 = 0.1;
/// Exponent of the log-logistic quantile function: 1 gives a tail like Sponza's (a few groups
/// over 10k at the default size, about half the groups under 100).
const TAIL_EXPONENT: f64 = 1.0;
/// Spread of the seed's jitter of each size, in natural-log units.
const JITTER: f64 = 0.3;
/// At most this many drapes; further large groups become colonnade pieces.
const MAX_DRAPES: usize = 12;
/// Groups at least this large (after the floor and walls) are drapes, up to [`MAX_DRAPES`].
const DRAPE_MIN: u64 = 1500;
/// Groups at least this large are colonnade pieces; smaller ones stand in the aisles.
const MEDIUM_MIN: u64 = 150;

// The atrium as laid out (before the final half turn, which puts the open side at +Z):
// x in [-HALF_X, HALF_X], z in [-HALF_Z, HALF_Z] (open at -Z), y in [0, HEIGHT].
const HALF_X: f32 = 20.0;
const HALF_Z: f32 = 10.0;
const HEIGHT: f32 = 14.0;

const STONE: u32 = 0;
const FLOOR: u32 = 1;
const FABRICS: [u32; 3] = [2, 3, 4];
const BRONZE: u32 = 5;
const SKYLIGHT: u32 = 6;
const WALL_STONE: u32 = 7;
/// The banners' materials, one per fabric colour (the same draw picks both).
const BANNERS: [u32; 3] = [8, 9, 10];

// Indices into the scene's textures, in the order the loader numbers them when it reads the
// written files back (material by material, each one's maps in the order the MTL lists them).
const FLAGSTONE_COLOURS: u32 = 0;
const FLAGSTONE_HEIGHTS: u32 = 1;
const ASHLAR_COLOURS: u32 = 2;
const BANNER_PATTERN: u32 = 3;
const BANNER_MASK: u32 = 4;
/// Height of the flagstones' bevels: `-bm` of the floor's height map.
const FLAGSTONE_BUMP: f32 = 1.5;
/// Size of one tile of the floor's and walls' maps, in scene units (4x4 flagstones of one
/// unit, 8 courses of ashlar blocks one unit long).
const TILE: f32 = 4.0;

/// The camera `gasworks gen` writes into the file as its hint: from inside the open (+Z) side,
/// right of centre at about a third of the height, looking across the court toward the far
/// left corner, so the back wall's drapes, a colonnade and the side aisles are all in view
/// (the default camera would show the whole atrium as a strip).
pub fn sponza_like_camera() -> Camera {
    Camera {
        eye: Vec3::new(0.7 * HALF_X, 5.0, 0.9 * HALF_Z),
        look_at: Vec3::new(-0.3 * HALF_X, 5.0, -0.6 * HALF_Z),
        up: Vec3::Y,
        fov_y_deg: 60.0,
    }
}

/// The textures of [`materials`], indexed by the constants above; from their own random
/// stream of `seed`.
fn textures(seed: u64) -> Vec<Texture> {
    let mut rng = Rng::new(seed, 3);
    let floor = textures::flagstone_colours(&mut rng);
    let walls = textures::ashlar_colours(&mut rng);
    vec![
        floor,
        textures::flagstone_heights(),
        walls,
        textures::banner_pattern(),
        textures::banner_mask(),
    ]
}

fn materials() -> Vec<Material> {
    let mut bronze = Material::diffuse("bronze", Vec3::new(0.25, 0.15, 0.08));
    bronze.kind = MaterialKind::Glossy;
    bronze.specular = Vec3::new(0.5, 0.35, 0.2);
    bronze.shininess = 80.0;
    let mut sky = Material::diffuse("skylight", Vec3::ZERO);
    sky.emission = Vec3::new(4.0, 4.0, 3.7);
    // The maps' texels average about 0.6 (sRGB-decoded): the colours are brighter than the
    // plain ones' to make up for it.
    let mut floor = Material::diffuse("floor_stone", Vec3::new(0.75, 0.72, 0.67));
    floor.diffuse_texture = Some(FLAGSTONE_COLOURS);
    floor.bump = Some(BumpMap::Height {
        texture: FLAGSTONE_HEIGHTS,
        scale: FLAGSTONE_BUMP,
    });
    let mut wall = Material::diffuse("wall_stone", Vec3::new(0.95, 0.9, 0.8));
    wall.diffuse_texture = Some(ASHLAR_COLOURS);
    let fabrics = [
        ("red", Vec3::new(0.6, 0.08, 0.06)),
        ("green", Vec3::new(0.1, 0.4, 0.12)),
        ("blue", Vec3::new(0.08, 0.15, 0.5)),
    ];
    let banners = fabrics.map(|(colour, kd)| {
        let mut m = Material::diffuse(&format!("banner_{colour}"), kd);
        m.diffuse_texture = Some(BANNER_PATTERN);
        m.opacity_texture = Some(BANNER_MASK);
        m
    });
    let mut all = vec![
        Material::diffuse("stone", Vec3::new(0.72, 0.68, 0.6)),
        floor,
    ];
    all.extend(fabrics.map(|(colour, kd)| Material::diffuse(&format!("fabric_{colour}"), kd)));
    all.extend([bronze, sky, wall]);
    all.extend(banners);
    all
}

/// The group sizes (before they are made into meshes): `quads` 2s, the rest even and >= 4,
/// summing to about `triangles`.
pub fn group_sizes(groups: usize, triangles: u64, seed: u64) -> Vec<u64> {
    let quads = ((groups as f64 * QUAD_SHARE).round() as usize).max(1);
    let others = groups - quads;
    let mut rng = Rng::new(seed, 1);
    let jitter: Vec<f64> = (0..others)
        .map(|_| (JITTER * (rng.f32() as f64 - 0.5)).exp())
        .collect();
    let sizes_for = |median: f64| -> Vec<u64> {
        (0..others)
            .map(|i| {
                let p = (i as f64 + 0.5) / others as f64;
                let s = median * (p / (1.0 - p)).powf(TAIL_EXPONENT) * jitter[i];
                (2 * (s / 2.0).round() as u64).max(4)
            })
            .collect()
    };
    let target = triangles.saturating_sub(2 * quads as u64);
    // The total grows with the median: bisect on its logarithm.
    let (mut lo, mut hi) = (1e-3f64.ln(), 1e9f64.ln());
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        let total: u64 = sizes_for(mid.exp()).iter().sum();
        if total < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let mut sizes = sizes_for(hi.exp());
    sizes.extend(std::iter::repeat_n(2, quads));
    sizes
}

/// What a group is in the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Floor,
    Wall(usize),
    Skylight,
    Banner,
    Drape,
    Medium,
    Small,
}

/// A sponza-like scene of `groups` groups and about `triangles` triangles (within a few
/// percent: curved meshes round their tessellation), a pure function of its arguments.
pub fn sponza_like(groups: usize, triangles: u64, seed: u64) -> Result<Scene, GenError> {
    if groups < 6 {
        return Err(GenError::BadParameter(format!(
            "sponza-like needs at least 6 groups (floor, 3 walls, skylight and more), got {groups}"
        )));
    }
    // Every group has at least 8 triangles, within the triangle cap: this bounds the groups
    // before anything is sized by them.
    let max_groups = SPONZA_LIKE_MAX_TRIANGLES / 8;
    if groups as u64 > max_groups {
        return Err(GenError::BadParameter(format!(
            "sponza-like makes at most {max_groups} groups (8 triangles each, {SPONZA_LIKE_MAX_TRIANGLES} in all), got {groups}"
        )));
    }
    if triangles < 8 * groups as u64 {
        return Err(GenError::BadParameter(format!(
            "sponza-like needs at least 8 triangles per group ({} for {groups} groups), got {triangles}",
            8 * groups as u64
        )));
    }
    if triangles > SPONZA_LIKE_MAX_TRIANGLES {
        return Err(GenError::BadParameter(format!(
            "sponza-like is built in memory and stops at {SPONZA_LIKE_MAX_TRIANGLES} triangles, got {triangles} (use toystore for bigger scenes)"
        )));
    }
    let sizes = group_sizes(groups, triangles, seed);
    let roles = assign_roles(&sizes);
    let mut rng = Rng::new(seed, 2);
    let count = |role: Role| roles.iter().filter(|&&r| r == role).count();
    let mut layout = Layout {
        banners: Slots::new(count(Role::Banner)),
        drapes: Slots::new(count(Role::Drape)),
        medium: Slots::new(count(Role::Medium)),
        small: Slots::new(count(Role::Small)),
    };
    let mut out: Vec<Group> = sizes
        .iter()
        .zip(&roles)
        .enumerate()
        .map(|(i, (&size, &role))| build_group(i, role, size, &mut layout, &mut rng))
        .collect();
    // Files list their groups in no particular order of size.
    rng.shuffle(&mut out);
    // Laid out open toward -Z; turned to open toward +Z, facing the default camera.
    out.iter_mut().for_each(mesh::turn_half);
    let mut scene = Scene::new(
        &format!(
            "gasworks gen sponza-like --groups {groups} --triangles {triangles} --seed {seed}"
        ),
        out,
        materials(),
    );
    scene.textures = textures(seed);
    Ok(scene)
}

/// The largest groups are the floor and walls, the next large ones drapes, then colonnade
/// pieces and aisle objects by size; one quad is the skylight and the others banners.
fn assign_roles(sizes: &[u64]) -> Vec<Role> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by(|&a, &b| sizes[b].cmp(&sizes[a]).then(a.cmp(&b)));
    let mut roles = vec![Role::Small; sizes.len()];
    let mut drapes = 0;
    let mut skylight_given = false;
    for (rank, &i) in order.iter().enumerate() {
        roles[i] = match (rank, sizes[i]) {
            (_, 2) if !skylight_given => {
                skylight_given = true;
                Role::Skylight
            }
            (_, 2) => Role::Banner,
            (0, _) => Role::Floor,
            (1..=3, _) => Role::Wall(rank - 1),
            (_, s) if s >= DRAPE_MIN && drapes < MAX_DRAPES => {
                drapes += 1;
                Role::Drape
            }
            (_, s) if s >= MEDIUM_MIN => Role::Medium,
            _ => Role::Small,
        };
    }
    roles
}

/// Hands out the next place in a row-by-row arrangement of `total` items.
struct Slots {
    total: usize,
    next: usize,
}

impl Slots {
    fn new(total: usize) -> Slots {
        Slots { total, next: 0 }
    }

    fn take(&mut self) -> usize {
        self.next += 1;
        self.next - 1
    }
}

struct Layout {
    banners: Slots,
    drapes: Slots,
    medium: Slots,
    small: Slots,
}

/// Place `index` of `total` on rows along x in bands on both sides of the court
/// (|z| in [z_near, z_far]), `per_row` at most per row; returns the position and the cell
/// size (along x, along z).
fn band_slot(index: usize, total: usize, per_row: usize, z_near: f32, z_far: f32) -> (Vec3, Vec2) {
    let rows_per_side = total.div_ceil(2 * per_row).max(1);
    let rows = 2 * rows_per_side;
    let in_row = total.div_ceil(rows).max(1);
    let (row, column) = (index / in_row, index % in_row);
    let side = if row % 2 == 0 { 1.0 } else { -1.0 };
    let band = (row / 2) as f32;
    let depth = (z_far - z_near) / rows_per_side as f32;
    let z = side * (z_near + depth * (band + 0.5));
    let width = 2.0 * (HALF_X - 1.5) / in_row as f32;
    let x = -(HALF_X - 1.5) + width * (column as f32 + 0.5);
    (Vec3::new(x, 0.0, z), Vec2::new(width, depth))
}

/// The (nx, ny) grid of `size` triangles (even, >= 2) whose cells are closest to square
/// for a panel of aspect `width / height`.
fn grid_for(size: u64, width: f32, height: f32) -> (u32, u32) {
    let cells = (size / 2).max(1);
    let ideal = ((cells as f64) * (width / height) as f64).sqrt();
    let mut best = (1u64, cells);
    let mut best_err = f64::INFINITY;
    let mut d = 1u64;
    while d * d <= cells {
        if cells % d == 0 {
            for nx in [d, cells / d] {
                let err = ((nx as f64).ln() - ideal.ln()).abs();
                if err < best_err {
                    best_err = err;
                    best = (nx, cells / nx);
                }
            }
        }
        d += 1;
    }
    (best.0 as u32, best.1 as u32)
}

/// Segments and profile points of a lathe of about `size` triangles.
fn lathe_resolution(size: u64) -> (u32, u32) {
    let half = (size / 2).max(6) as f64;
    let segments = half.sqrt().round().max(3.0);
    let points = (half / segments).round().max(2.0);
    (segments as u32, points as u32)
}

fn build_group(index: usize, role: Role, size: u64, layout: &mut Layout, rng: &mut Rng) -> Group {
    let mut group = Group::default();
    let name = match role {
        Role::Floor => build_floor(&mut group, size),
        Role::Wall(k) => build_wall(&mut group, k, size),
        Role::Skylight => build_skylight(&mut group),
        Role::Banner => build_banner(&mut group, index, layout, rng),
        Role::Drape => build_drape(&mut group, index, size, layout, rng),
        Role::Medium => {
            let slot = layout.medium.take();
            let (at, cell) = band_slot(slot, layout.medium.total, 24, 3.0, 6.5);
            build_medium(&mut group, index, size, at, cell, rng)
        }
        Role::Small => {
            let slot = layout.small.take();
            let (at, cell) = band_slot(slot, layout.small.total, 40, 7.0, 9.6);
            build_small(&mut group, index, size, at, cell, rng)
        }
    };
    group.name = name;
    group
}

/// The flagstone floor, a grid of about `size` triangles; returns the group's name.
fn build_floor(group: &mut Group, size: u64) -> String {
    let (nx, ny) = grid_for(size, 2.0 * HALF_X, 2.0 * HALF_Z);
    let place = Placement::at(Vec3::ZERO).rotated(Quat::from_rotation_x(-FRAC_PI_2));
    let size = Vec2::new(2.0 * HALF_X, 2.0 * HALF_Z);
    let mut b = MeshBuilder::new(group, place, FLOOR);
    mesh::panel(&mut b, nx, ny, size, |_, _| 0.0);
    group.uvs = mesh::panel_uvs(nx, ny, size / TILE);
    "floor".to_string()
}

/// Wall `k` (0 back, 1 left, else right), a grid of about `size` triangles; returns its name.
fn build_wall(group: &mut Group, k: usize, size: u64) -> String {
    // Back (z = +HALF_Z, facing -Z), left (x = -HALF_X, facing +X), right.
    let (width, place, name) = match k {
        0 => (
            2.0 * HALF_X,
            Placement::at(Vec3::new(0.0, HEIGHT / 2.0, HALF_Z)).turned(PI),
            "wall_back",
        ),
        1 => (
            2.0 * HALF_Z,
            Placement::at(Vec3::new(-HALF_X, HEIGHT / 2.0, 0.0)).turned(FRAC_PI_2),
            "wall_left",
        ),
        _ => (
            2.0 * HALF_Z,
            Placement::at(Vec3::new(HALF_X, HEIGHT / 2.0, 0.0)).turned(-FRAC_PI_2),
            "wall_right",
        ),
    };
    let (nx, ny) = grid_for(size, width, HEIGHT);
    let size = Vec2::new(width, HEIGHT);
    let mut b = MeshBuilder::new(group, place, WALL_STONE);
    mesh::panel(&mut b, nx, ny, size, |_, _| 0.0);
    group.uvs = mesh::panel_uvs(nx, ny, size / TILE);
    name.to_string()
}

/// The emissive skylight quad at the roof (y = HEIGHT); returns its name.
fn build_skylight(group: &mut Group) -> String {
    let place =
        Placement::at(Vec3::new(0.0, HEIGHT, 0.0)).rotated(Quat::from_rotation_x(FRAC_PI_2));
    let mut b = MeshBuilder::new(group, place, SKYLIGHT);
    let size = Vec2::new(2.0 * (HALF_X - 4.0), 2.0 * (HALF_Z - 4.0));
    mesh::panel(&mut b, 1, 1, size, |_, _| 0.0);
    "skylight".to_string()
}

/// The next banner slot's quad, of a random banner material; returns its name.
fn build_banner(group: &mut Group, index: usize, layout: &mut Layout, rng: &mut Rng) -> String {
    // On the side walls, a grid per wall, just in front of the wall.
    let slot = layout.banners.take();
    let total = layout.banners.total;
    let (left, per_wall, k) = if slot < total.div_ceil(2) {
        (true, total.div_ceil(2), slot)
    } else {
        (false, total / 2, slot - total.div_ceil(2))
    };
    let cols = ((per_wall as f32 * 1.5).sqrt().ceil() as usize).max(1);
    let rows = per_wall.div_ceil(cols).max(1);
    let (cell_w, cell_h) = (
        2.0 * (HALF_Z - 1.0) / cols as f32,
        (HEIGHT - 2.0) / rows as f32,
    );
    let along = -(HALF_Z - 1.0) + cell_w * ((k % cols) as f32 + 0.5);
    let y = 1.0 + cell_h * ((k / cols) as f32 + 0.5);
    let (x, turn) = if left {
        (-HALF_X + 0.02, FRAC_PI_2)
    } else {
        (HALF_X - 0.02, -FRAC_PI_2)
    };
    let place = Placement::at(Vec3::new(x, y, along)).turned(turn);
    let material = BANNERS[rng.below(BANNERS.len())];
    let mut b = MeshBuilder::new(group, place, material);
    let size = Vec2::new(cell_w * 0.6, cell_h * 0.7);
    mesh::panel(&mut b, 1, 1, size, |_, _| 0.0);
    group.uvs = mesh::panel_uvs(1, 1, Vec2::ONE);
    format!("banner_{index:03}")
}

/// The next drape slot's folded cloth of about `size` triangles; returns its name.
fn build_drape(
    group: &mut Group,
    index: usize,
    size: u64,
    layout: &mut Layout,
    rng: &mut Rng,
) -> String {
    let slot = layout.drapes.take();
    let total = layout.drapes.total.max(1);
    let pitch = 2.0 * (HALF_X - 1.0) / total as f32;
    let x = -(HALF_X - 1.0) + pitch * (slot as f32 + 0.5);
    let (width, height) = (pitch * 0.85, 9.0);
    let (nx, ny) = grid_for(size, width, height);
    let folds = (width / 0.4).round().max(1.0);
    // On the back wall, facing the open side.
    let place = Placement::at(Vec3::new(x, 8.0, HALF_Z - 0.4)).turned(PI);
    let material = FABRICS[rng.below(FABRICS.len())];
    let mut b = MeshBuilder::new(group, place, material);
    mesh::panel(&mut b, nx, ny, Vec2::new(width, height), |u, v| {
        0.15 * (TAU * folds * u).sin() * (0.4 + 0.6 * (1.0 - v))
    });
    format!("drape_{index:03}")
}

/// Column, arch, urn or ring of about `size` triangles standing at `at` within `cell`.
fn build_medium(
    group: &mut Group,
    index: usize,
    size: u64,
    at: Vec3,
    cell: Vec2,
    rng: &mut Rng,
) -> String {
    let footprint = (0.8 * cell.x.min(cell.y)).min(1.6);
    let turn = rng.range(0.0, TAU);
    let material = if rng.f32() < 0.3 { BRONZE } else { STONE };
    match rng.below(4) {
        0 => {
            // An arch along the row, as wide as its cell allows.
            let outer = (0.45 * cell.x).clamp(0.2, 3.0);
            let segments = (size.saturating_sub(4) / 8).max(2) as u32;
            let mut b = MeshBuilder::new(group, Placement::at(at), material);
            mesh::arch(
                &mut b,
                segments,
                outer * 0.75,
                outer,
                footprint.min(outer) * 0.5,
            );
            format!("arch_{index:03}")
        }
        1 => {
            // A ring standing on its rim.
            let half = (size / 2).max(9) as f64;
            let sides = (half / 3.0).sqrt().round().max(3.0) as u32;
            let rings = (half / sides as f64).round().max(3.0) as u32;
            let major = footprint * 0.4;
            let place = Placement::at(at + Vec3::Y * major * 1.25)
                .rotated(Quat::from_rotation_y(turn) * Quat::from_rotation_x(FRAC_PI_2));
            let mut b = MeshBuilder::new(group, place, material);
            mesh::torus(&mut b, rings, sides, major, major * 0.25);
            format!("ring_{index:03}")
        }
        kind => {
            let (segments, points) = lathe_resolution(size);
            let radius = footprint * 0.5;
            let (height, shape, name): (f32, fn(f32) -> f32, &str) = if kind == 2 {
                (4.5, column_profile, "column")
            } else {
                (radius * 3.0, urn_profile, "urn")
            };
            let mut b = MeshBuilder::new(group, Placement::at(at).turned(turn), material);
            mesh::lathe(&mut b, segments, &profile(points, radius, height, shape));
            format!("{name}_{index:03}")
        }
    }
}

/// `points` (radius, height) points of a surface of revolution of `height`, radius
/// `radius * shape(t)` at relative height t.
fn profile(points: u32, radius: f32, height: f32, shape: fn(f32) -> f32) -> Vec<(f32, f32)> {
    (0..points)
        .map(|i| {
            let t = i as f32 / (points - 1) as f32;
            (radius * shape(t), height * t)
        })
        .collect()
}

/// Radius (relative) of a column at relative height t: base, tapering shaft, capital.
fn column_profile(t: f32) -> f32 {
    if t < 0.06 {
        1.0
    } else if t > 0.93 {
        0.95
    } else {
        0.6 - 0.08 * t
    }
}

/// Radius (relative) of an urn at relative height t: foot, belly, neck, lip.
fn urn_profile(t: f32) -> f32 {
    0.35 + 0.6 * (PI * (0.1 + 0.8 * t)).sin().powi(2) * (1.0 - 0.5 * t)
}

/// Cone, crate, ball or vase of about `size` triangles on the floor at `at` within `cell`.
fn build_small(
    group: &mut Group,
    index: usize,
    size: u64,
    at: Vec3,
    cell: Vec2,
    rng: &mut Rng,
) -> String {
    let extent = (0.8 * cell.x.min(cell.y)).min(1.0);
    let turn = rng.range(0.0, TAU);
    let material = match rng.below(4) {
        0 => BRONZE,
        1 => FABRICS[rng.below(FABRICS.len())],
        _ => STONE,
    };
    let standing = Placement::at(at).turned(turn);
    if size == 12 {
        let h = extent * 0.5;
        let mut b = MeshBuilder::new(group, standing, material);
        mesh::cuboid(&mut b, Vec3::new(-h, 0.0, -h), Vec3::new(h, extent, h));
        return format!("crate_{index:03}");
    }
    // Cones hit any even size exactly; balls and vases round theirs.
    if size < 24 || rng.f32() < 0.5 {
        let sides = ((size + 2) / 2).max(3) as u32;
        let height = extent * rng.range(0.8, 1.6);
        let mut b = MeshBuilder::new(group, standing, material);
        mesh::cone(&mut b, sides, extent * 0.5, height);
        return format!("cone_{index:03}");
    }
    let radius = extent * 0.5;
    if rng.f32() < 0.5 {
        let half = (size / 2) as f64;
        let slices = (half * 2.0).sqrt().round().max(3.0) as u32;
        let stacks = (half / slices as f64).round().max(1.0) as u32 + 1;
        let place = Placement::at(at + Vec3::Y * radius).turned(turn);
        let mut b = MeshBuilder::new(group, place, material);
        mesh::sphere(&mut b, slices, stacks, radius);
        format!("ball_{index:03}")
    } else {
        let (segments, points) = lathe_resolution(size);
        let mut b = MeshBuilder::new(group, standing, material);
        mesh::lathe(
            &mut b,
            segments,
            &profile(points, radius, extent * 1.4, urn_profile),
        );
        format!("vase_{index:03}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_requested_shape() {
        let sizes = group_sizes(390, 260_000, 1);
        assert_eq!(sizes.len(), 390);
        assert_eq!(sizes.iter().filter(|&&s| s == 2).count(), 39);
        assert!(sizes.iter().all(|&s| s == 2 || (s >= 4 && s % 2 == 0)));
        let total: u64 = sizes.iter().sum();
        assert!(total.abs_diff(260_000) < 2_600, "{total}");
    }

    #[test]
    fn grids_hit_the_size_exactly() {
        for size in [2, 4, 6, 34, 1000, 76062, 2 * 7919] {
            let (nx, ny) = grid_for(size, 40.0, 20.0);
            assert_eq!(mesh::panel_triangles(nx, ny), size);
        }
        // 400 cells on a 2:1 panel: 25 x 16 is the divisor pair nearest to square cells.
        assert_eq!(grid_for(800, 2.0, 1.0), (25, 16));
    }

    #[test]
    fn roles_cover_structure_first() {
        let sizes = group_sizes(390, 260_000, 3);
        let roles = assign_roles(&sizes);
        assert_eq!(roles.iter().filter(|&&r| r == Role::Floor).count(), 1);
        assert_eq!(
            roles.iter().filter(|r| matches!(r, Role::Wall(_))).count(),
            3
        );
        assert_eq!(roles.iter().filter(|&&r| r == Role::Skylight).count(), 1);
        let floor = roles.iter().position(|&r| r == Role::Floor).unwrap();
        assert_eq!(sizes[floor], *sizes.iter().max().unwrap());
    }

    #[test]
    fn the_atrium_opens_toward_plus_z() {
        let s = sponza_like(40, 4_000, 2).unwrap();
        let back = s.groups.iter().find(|g| g.name == "wall_back").unwrap();
        let [a, b, c] = back.triangle(0);
        // The back wall sits at -Z and faces +Z, toward the open side and the camera.
        assert!((b - a).cross(c - a).normalize().z > 0.99);
        assert!(back.bounds().max[2] < -HALF_Z + 1e-3);
        if !back.normals.is_empty() {
            assert!(back.normals[back.indices[0][0] as usize].z > 0.99);
        }
        // Nothing closes the +Z side: no triangle of a wall reaches z = +HALF_Z.
        for g in s.groups.iter().filter(|g| g.name.starts_with("wall_")) {
            for i in 0..g.triangle_count() {
                let t = g.triangle(i);
                assert!(!t.iter().all(|p| (p.z - HALF_Z).abs() < 1e-3), "{}", g.name);
            }
        }
    }

    #[test]
    fn small_scenes_are_valid() {
        let s = sponza_like(6, 48, 0).unwrap();
        assert_eq!(s.groups.len(), 6);
        assert_eq!(s.report.degenerate_dropped, 0);
        assert!(!s.lights.is_empty());
        assert!(sponza_like(5, 1000, 0).is_err());
        assert!(sponza_like(10, 79, 0).is_err());
    }
}
