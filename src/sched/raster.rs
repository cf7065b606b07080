//! A CPU z-buffer rasterizer that draws the scene into a G-buffer for the cost map.
//!
//! The cost map (the paper's Algorithm 1) needs, for every pixel of a reduced-resolution image,
//! the first surface the camera sees: its depth, world position, shading normal, material and
//! group. A rasterizer gets this far faster than tracing rays, because each triangle is set up
//! once and then only visits the pixels its bounding box covers.
//!
//! How it works:
//! - vertices go to camera space `(a, b, z)`, where `z` is the depth along the view direction
//!   and `a / z`, `b / z` are the screen coordinates of [`CameraFrame::direction`]: the exact
//!   inverse of the primary rays, so raster depth agrees with ray casting;
//! - each triangle is clipped against the near plane `z = near` (Sutherland-Hodgman, up to
//!   four vertices, drawn as a fan of two triangles), so geometry around and behind the camera
//!   neither disappears nor wraps around;
//! - triangles are binned by the rows their screen bounding box covers into bands of
//!   [`BAND_ROWS`] rows, and the bands are drawn in parallel with rayon, each into its own
//!   slice of the G-buffer (no locks); within a band triangles are drawn in scene order and the
//!   depth test is strict, so the result does not depend on the thread count;
//! - attributes are interpolated perspective-correctly (barycentrics over `1/z`) at pixel
//!   centres; nothing is culled (OBJ surfaces are two-sided), normals are turned to face the
//!   camera.

use std::time::Instant;

use glam::{DVec2, Vec3};
use rayon::prelude::*;

use crate::render::Tile;
use crate::scene::camera::CameraFrame;
use crate::scene::Scene;

/// `material` and `group` of a pixel where no surface was hit.
pub const NO_HIT: u32 = u32::MAX;

/// Rows per band: the unit of parallel work and of triangle binning. Small enough that a
/// 128-row cost map still gives 16 bands for the thread pool, large enough that a triangle
/// rarely lands in many bins.
pub const BAND_ROWS: usize = 8;

/// The first surface seen through each pixel of a reduced-resolution image.
#[derive(Clone, Debug)]
pub struct GBuffer {
    pub width: usize,
    pub height: usize,
    /// The camera at this buffer's resolution (same field of view as the image's).
    pub frame: CameraFrame,
    /// Depth along the view direction; `f32::INFINITY` where nothing was hit.
    pub depth: Vec<f32>,
    /// World position of the visible point.
    pub position: Vec<Vec3>,
    /// Unit shading normal, turned towards the camera.
    pub normal: Vec<Vec3>,
    /// Index into [`Scene::materials`], or [`NO_HIT`].
    pub material: Vec<u32>,
    /// Index into [`Scene::groups`], or [`NO_HIT`].
    pub group: Vec<u32>,
}

impl GBuffer {
    fn empty(width: usize, height: usize, frame: CameraFrame) -> GBuffer {
        let n = width * height;
        GBuffer {
            width,
            height,
            frame,
            depth: vec![f32::INFINITY; n],
            position: vec![Vec3::ZERO; n],
            normal: vec![Vec3::ZERO; n],
            material: vec![NO_HIT; n],
            group: vec![NO_HIT; n],
        }
    }

    #[inline]
    pub fn is_hit(&self, i: usize) -> bool {
        self.material[i] != NO_HIT
    }
}

/// What a rasterization did, for the render summary.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RasterStats {
    pub seconds: f64,
    /// Triangles in the scene.
    pub triangles: usize,
    /// Triangle references over all bands (a triangle spanning three bands counts three).
    pub binned: usize,
    /// Pixels where a surface was hit.
    pub covered_pixels: usize,
}

/// One vertex after clipping: camera-space coordinates plus the attributes to interpolate.
#[derive(Clone, Copy, Debug)]
struct ClipVertex {
    /// `d.u / |u|^2`: the screen x times the depth.
    a: f64,
    /// `d.v / |v|^2`: the screen y times the depth.
    b: f64,
    /// Depth along the view direction.
    z: f64,
    position: Vec3,
    normal: Vec3,
}

impl ClipVertex {
    fn lerp(&self, o: &ClipVertex, t: f64) -> ClipVertex {
        let tf = t as f32;
        ClipVertex {
            a: self.a + (o.a - self.a) * t,
            b: self.b + (o.b - self.b) * t,
            z: self.z + (o.z - self.z) * t,
            position: self.position.lerp(o.position, tf),
            normal: self.normal.lerp(o.normal, tf),
        }
    }
}

/// A triangle ready to draw: screen positions, `1/z` and attributes over `z`.
#[derive(Clone, Copy, Debug)]
struct ScreenTriangle {
    screen: [DVec2; 3],
    inv_z: [f64; 3],
    position: [Vec3; 3],
    normal: [Vec3; 3],
    /// World geometric normal of the original triangle, to turn normals towards the camera.
    geometric: Vec3,
    material: u32,
    group: u32,
    /// Pixel bounding box, clamped to the buffer: `[x0, x1) x [y0, y1)`.
    x0: usize,
    x1: usize,
    y0: usize,
    y1: usize,
}

/// The camera-space transform and the near plane, shared by every triangle.
struct Projector {
    frame: CameraFrame,
    inv_u2: f64,
    inv_v2: f64,
    near: f64,
    /// The whole image's size in buffer pixels (the buffer's own size unless it holds a window).
    span_x: f64,
    span_y: f64,
    /// Where the buffer starts in the whole image, in buffer pixels.
    origin_x: f64,
    origin_y: f64,
    width: usize,
    height: usize,
}

impl Projector {
    fn vertex(&self, p: Vec3, n: Vec3) -> ClipVertex {
        let d = p - self.frame.eye;
        ClipVertex {
            a: d.dot(self.frame.u) as f64 * self.inv_u2,
            b: d.dot(self.frame.v) as f64 * self.inv_v2,
            z: d.dot(self.frame.w) as f64,
            position: p,
            normal: n,
        }
    }

    fn to_screen(&self, v: &ClipVertex) -> DVec2 {
        DVec2::new(
            (v.a / v.z + 1.0) * 0.5 * self.span_x - self.origin_x,
            (1.0 - v.b / v.z) * 0.5 * self.span_y - self.origin_y,
        )
    }

    /// Clips one scene triangle against the near plane and sets up the (at most two) screen
    /// triangles that remain on the buffer. Returns how many of `out` were filled.
    fn setup(&self, scene: &Scene, group: u32, prim: u32, out: &mut [ScreenTriangle; 2]) -> usize {
        let g = &scene.groups[group as usize];
        let idx = g.indices[prim as usize];
        let p = idx.map(|i| g.positions[i as usize]);
        let geometric = (p[1] - p[0]).cross(p[2] - p[0]).normalize_or_zero();
        let n = if g.normals.is_empty() {
            [geometric; 3]
        } else {
            idx.map(|i| g.normals[i as usize])
        };
        let verts = [0, 1, 2].map(|k| self.vertex(p[k], n[k]));
        if verts.iter().all(|v| v.z < self.near) {
            return 0;
        }
        // Sutherland-Hodgman against z >= near: a triangle becomes at most a quad.
        let mut poly = [verts[0]; 4];
        let mut count = 0;
        for k in 0..3 {
            let (cur, next) = (&verts[k], &verts[(k + 1) % 3]);
            let (cin, nin) = (cur.z >= self.near, next.z >= self.near);
            if cin {
                poly[count] = *cur;
                count += 1;
            }
            if cin != nin {
                let t = (self.near - cur.z) / (next.z - cur.z);
                poly[count] = cur.lerp(next, t);
                count += 1;
            }
        }
        let material = g.face_materials[prim as usize];
        let mut filled = 0;
        for fan in 1..count.saturating_sub(1) {
            let tri = [poly[0], poly[fan], poly[fan + 1]];
            let screen = tri.map(|v| self.to_screen(&v));
            let (min, max) = (
                screen[0].min(screen[1]).min(screen[2]),
                screen[0].max(screen[1]).max(screen[2]),
            );
            // Pixel centres (x + 0.5) inside [min, max].
            let x0 = (min.x - 0.5).ceil().max(0.0);
            let y0 = (min.y - 0.5).ceil().max(0.0);
            let x1 = ((max.x - 0.5).floor() + 1.0).min(self.width as f64);
            let y1 = ((max.y - 0.5).floor() + 1.0).min(self.height as f64);
            if !(x0 < x1 && y0 < y1) {
                continue;
            }
            out[filled] = ScreenTriangle {
                screen,
                inv_z: tri.map(|v| 1.0 / v.z),
                position: tri.map(|v| v.position),
                normal: tri.map(|v| v.normal),
                geometric,
                material,
                group,
                x0: x0 as usize,
                x1: x1 as usize,
                y0: y0 as usize,
                y1: y1 as usize,
            };
            filled += 1;
        }
        filled
    }
}

#[inline]
fn edge(a: DVec2, b: DVec2, p: DVec2) -> f64 {
    (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x)
}

/// One band's rows of the G-buffer, borrowed mutably for drawing.
struct BandTarget<'a> {
    row0: usize,
    width: usize,
    depth: &'a mut [f32],
    position: &'a mut [Vec3],
    normal: &'a mut [Vec3],
    material: &'a mut [u32],
    group: &'a mut [u32],
}

impl BandTarget<'_> {
    fn rows(&self) -> usize {
        self.depth.len() / self.width
    }

    fn draw(&mut self, t: &ScreenTriangle, eye: Vec3) {
        let area = edge(t.screen[0], t.screen[1], t.screen[2]);
        if area == 0.0 || !area.is_finite() {
            return;
        }
        let inv_area = 1.0 / area;
        let (ry0, ry1) = (t.y0.max(self.row0), t.y1.min(self.row0 + self.rows()));
        for y in ry0..ry1 {
            for x in t.x0..t.x1 {
                let p = DVec2::new(x as f64 + 0.5, y as f64 + 0.5);
                let l0 = edge(t.screen[1], t.screen[2], p) * inv_area;
                let l1 = edge(t.screen[2], t.screen[0], p) * inv_area;
                let l2 = edge(t.screen[0], t.screen[1], p) * inv_area;
                // Inclusive on the edges: a pixel centre on a shared edge is drawn by both
                // triangles (the depth test picks one), so closed meshes have no cracks.
                if l0 < 0.0 || l1 < 0.0 || l2 < 0.0 {
                    continue;
                }
                let inv_z = l0 * t.inv_z[0] + l1 * t.inv_z[1] + l2 * t.inv_z[2];
                if inv_z <= 0.0 {
                    continue;
                }
                let z = 1.0 / inv_z;
                let i = (y - self.row0) * self.width + x;
                if (z as f32) >= self.depth[i] {
                    continue;
                }
                // Perspective-correct weights: barycentrics over z, renormalized.
                let w = [
                    (l0 * t.inv_z[0] * z) as f32,
                    (l1 * t.inv_z[1] * z) as f32,
                    (l2 * t.inv_z[2] * z) as f32,
                ];
                let position = t.position[0] * w[0] + t.position[1] * w[1] + t.position[2] * w[2];
                let mut normal = (t.normal[0] * w[0] + t.normal[1] * w[1] + t.normal[2] * w[2])
                    .normalize_or_zero();
                if normal == Vec3::ZERO {
                    normal = t.geometric;
                }
                // Two-sided surfaces: turn the normal to the side the camera sees.
                if t.geometric.dot(eye - position) < 0.0 {
                    normal = -normal;
                }
                self.depth[i] = z as f32;
                self.position[i] = position;
                self.normal[i] = normal;
                self.material[i] = t.material;
                self.group[i] = t.group;
            }
        }
    }
}

/// Rasterizes every group of `scene`, seen by `camera`, into a `width` x `height` G-buffer.
/// `camera` may be the image's frame: only its field of view is used.
pub fn rasterize(
    scene: &Scene,
    camera: &CameraFrame,
    width: usize,
    height: usize,
) -> (GBuffer, RasterStats) {
    let whole = Tile {
        x: 0,
        y: 0,
        w: camera.width.max(1),
        h: camera.height.max(1),
    };
    rasterize_window(scene, camera, whole, width, height)
}

/// Rasterizes the part `window` (in pixels of `camera`'s image) of what `camera` sees into a
/// `width` x `height` G-buffer: the cost map of a `--pixelbounds` crop. Buffer pixel `(i, j)`
/// covers the image pixels `window.x + i * window.w / width ...`. With the whole image as the
/// window this is exactly [`rasterize`]. The buffer's `frame` is the camera at the whole
/// image's size in buffer pixels (rounded), which is what image-space directions need.
pub fn rasterize_window(
    scene: &Scene,
    camera: &CameraFrame,
    window: Tile,
    width: usize,
    height: usize,
) -> (GBuffer, RasterStats) {
    let start = Instant::now();
    let (width, height) = (width.max(1), height.max(1));
    let projector = Projector::for_window(scene, camera, window, width, height);

    let refs: Vec<(u32, u32)> = scene
        .groups
        .iter()
        .enumerate()
        .flat_map(|(g, grp)| (0..grp.indices.len() as u32).map(move |p| (g as u32, p)))
        .collect();
    let bins = bin_triangles(scene, &projector, &refs);
    let binned = bins.iter().map(Vec::len).sum();

    let gbuf = draw_bands(scene, &projector, &bins);
    let covered_pixels = gbuf.material.iter().filter(|&&m| m != NO_HIT).count();
    let stats = RasterStats {
        seconds: start.elapsed().as_secs_f64(),
        triangles: refs.len(),
        binned,
        covered_pixels,
    };
    (gbuf, stats)
}

impl Projector {
    /// The projector of [`rasterize_window`]: `camera` at the whole image's size in buffer
    /// pixels, shifted so that buffer pixel (0, 0) is `window`'s corner.
    fn for_window(
        scene: &Scene,
        camera: &CameraFrame,
        window: Tile,
        width: usize,
        height: usize,
    ) -> Projector {
        let (image_w, image_h) = (camera.width.max(1) as f64, camera.height.max(1) as f64);
        let (window_w, window_h) = (window.w.max(1) as f64, window.h.max(1) as f64);
        // Integer products first, then one division: exactly `width` for the whole image.
        let span_x = width as f64 * image_w / window_w;
        let span_y = height as f64 * image_h / window_h;
        let origin_x = width as f64 * window.x as f64 / window_w;
        let origin_y = height as f64 * window.y as f64 / window_h;
        let mut frame = *camera;
        frame.width = (span_x.round() as u32).max(1);
        frame.height = (span_y.round() as u32).max(1);
        // The near plane sits a tiny fraction of the scene's size in front of the eye: near
        // enough to keep everything the primary rays see, far enough that 1/z stays tame.
        let extent = scene.bounds();
        let scale = if extent.is_empty() {
            1.0
        } else {
            (extent.diagonal().length() as f64).max(1e-3)
        };
        Projector {
            frame,
            inv_u2: 1.0 / (frame.u.length_squared() as f64),
            inv_v2: 1.0 / (frame.v.length_squared() as f64),
            near: 1e-5 * scale,
            span_x,
            span_y,
            origin_x,
            origin_y,
            width,
            height,
        }
    }
}

/// The triangles `refs` (group, primitive) that each band of [`BAND_ROWS`] rows must draw.
fn bin_triangles(scene: &Scene, projector: &Projector, refs: &[(u32, u32)]) -> Vec<Vec<u64>> {
    // Bin: every triangle goes to the bands its (clipped) screen box overlaps. Keys are
    // (group << 32 | prim); each bin is sorted afterwards so drawing order is scene order.
    let bands = projector.height.div_ceil(BAND_ROWS);
    let mut bins: Vec<Vec<u64>> = refs
        .par_chunks(4096)
        .fold(
            || vec![Vec::new(); bands],
            |mut bins, chunk| {
                let mut tris = [dummy_triangle(); 2];
                for &(g, p) in chunk {
                    let n = projector.setup(scene, g, p, &mut tris);
                    let key = (g as u64) << 32 | p as u64;
                    let (mut lo, mut hi) = (usize::MAX, 0);
                    for t in &tris[..n] {
                        lo = lo.min(t.y0 / BAND_ROWS);
                        hi = hi.max((t.y1 - 1) / BAND_ROWS);
                    }
                    if n > 0 {
                        for bin in &mut bins[lo..=hi] {
                            bin.push(key);
                        }
                    }
                }
                bins
            },
        )
        .reduce(
            || vec![Vec::new(); bands],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    x.extend(y);
                }
                a
            },
        );
    bins.par_iter_mut().for_each(|b| b.sort_unstable());
    bins
}

/// Draws each band's binned triangles into its own rows of a new G-buffer, bands in parallel.
fn draw_bands(scene: &Scene, projector: &Projector, bins: &[Vec<u64>]) -> GBuffer {
    let (width, height, frame) = (projector.width, projector.height, projector.frame);
    let mut gbuf = GBuffer::empty(width, height, frame);
    let band_len = BAND_ROWS * width;
    let targets: Vec<BandTarget> = gbuf
        .depth
        .chunks_mut(band_len)
        .zip(gbuf.position.chunks_mut(band_len))
        .zip(gbuf.normal.chunks_mut(band_len))
        .zip(gbuf.material.chunks_mut(band_len))
        .zip(gbuf.group.chunks_mut(band_len))
        .enumerate()
        .map(
            |(band, ((((depth, position), normal), material), group))| BandTarget {
                row0: band * BAND_ROWS,
                width,
                depth,
                position,
                normal,
                material,
                group,
            },
        )
        .collect();
    targets
        .into_par_iter()
        .zip(bins.par_iter())
        .for_each(|(mut target, bin)| {
            let mut tris = [dummy_triangle(); 2];
            for &key in bin {
                let n = projector.setup(scene, (key >> 32) as u32, key as u32, &mut tris);
                for t in &tris[..n] {
                    target.draw(t, frame.eye);
                }
            }
        });
    gbuf
}

fn dummy_triangle() -> ScreenTriangle {
    ScreenTriangle {
        screen: [DVec2::ZERO; 3],
        inv_z: [0.0; 3],
        position: [Vec3::ZERO; 3],
        normal: [Vec3::ZERO; 3],
        geometric: Vec3::ZERO,
        material: NO_HIT,
        group: NO_HIT,
        x0: 0,
        x1: 0,
        y0: 0,
        y1: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::{Camera, Group, Material};

    fn quad(z: f32, half: f32, material: u32) -> Group {
        Group {
            name: format!("quad{z}"),
            positions: vec![
                Vec3::new(-half, -half, z),
                Vec3::new(half, -half, z),
                Vec3::new(half, half, z),
                Vec3::new(-half, half, z),
            ],
            normals: vec![],
            uvs: vec![],
            indices: vec![[0, 1, 2], [0, 2, 3]],
            face_materials: vec![material; 2],
        }
    }

    #[test]
    fn nearer_quad_hides_farther_one_and_depth_is_exact() {
        let scene = Scene::new(
            "t",
            vec![quad(-5.0, 10.0, 0), quad(-2.0, 0.5, 1)],
            vec![Material::default_diffuse(), Material::default_diffuse()],
        );
        let cam = Camera {
            eye: Vec3::ZERO,
            look_at: -Vec3::Z,
            up: Vec3::Y,
            fov_y_deg: 60.0,
        }
        .frame(64, 64)
        .unwrap();
        let (g, stats) = rasterize(&scene, &cam, 32, 32);
        assert_eq!(stats.covered_pixels, 32 * 32, "the big quad fills the view");
        let centre = 16 * 32 + 16;
        assert_eq!(g.group[centre], 1);
        assert!((g.depth[centre] - 2.0).abs() < 1e-5);
        assert_eq!(g.group[0], 0);
        assert!((g.depth[0] - 5.0).abs() < 1e-4);
        // The normal faces the camera whatever the winding.
        assert!(g.normal[centre].z > 0.99);
    }

    /// A window rasterized at full resolution is the same block of the whole image's buffer
    /// (up to rounding in the last bits of depth), and the whole image as a window is
    /// `rasterize` exactly.
    #[test]
    fn a_window_is_the_matching_block_of_the_whole_buffer() {
        let scene = Scene::new(
            "t",
            vec![quad(-5.0, 3.0, 0), quad(-2.0, 0.5, 1)],
            vec![Material::default_diffuse(), Material::default_diffuse()],
        );
        let cam = Camera {
            eye: Vec3::new(0.3, 0.2, 0.0),
            look_at: -Vec3::Z,
            up: Vec3::Y,
            fov_y_deg: 60.0,
        }
        .frame(80, 60)
        .unwrap();
        let (whole, _) = rasterize(&scene, &cam, 80, 60);
        let all = Tile {
            x: 0,
            y: 0,
            w: 80,
            h: 60,
        };
        let (same, _) = rasterize_window(&scene, &cam, all, 80, 60);
        assert_eq!(same.depth, whole.depth);
        assert_eq!(same.group, whole.group);
        let window = Tile {
            x: 13,
            y: 21,
            w: 40,
            h: 30,
        };
        let (part, _) = rasterize_window(&scene, &cam, window, 40, 30);
        let mut agree = 0;
        for j in 0..30 {
            for i in 0..40 {
                let p = j * 40 + i;
                let w = (j + 21) * 80 + i + 13;
                if part.group[p] == whole.group[w] {
                    agree += 1;
                    if part.is_hit(p) {
                        assert!((part.depth[p] - whole.depth[w]).abs() < 1e-4 * whole.depth[w]);
                    }
                }
            }
        }
        assert!(agree >= 40 * 30 - 4, "{agree} of 1200 pixels agree");
        assert!(part.group.contains(&1) && part.group.contains(&0));
    }

    #[test]
    fn triangles_crossing_the_eye_plane_are_clipped_not_lost() {
        // A floor running from behind the camera to far in front of it.
        let floor = Group {
            name: "floor".into(),
            positions: vec![
                Vec3::new(-50.0, -1.0, 50.0),
                Vec3::new(50.0, -1.0, 50.0),
                Vec3::new(50.0, -1.0, -50.0),
                Vec3::new(-50.0, -1.0, -50.0),
            ],
            normals: vec![],
            uvs: vec![],
            indices: vec![[0, 1, 2], [0, 2, 3]],
            face_materials: vec![0, 0],
        };
        let scene = Scene::new("t", vec![floor], vec![Material::default_diffuse()]);
        let cam = Camera {
            eye: Vec3::ZERO,
            look_at: -Vec3::Z,
            up: Vec3::Y,
            fov_y_deg: 60.0,
        }
        .frame(32, 32)
        .unwrap();
        let (g, _) = rasterize(&scene, &cam, 32, 32);
        // Bottom half of the view sees the floor, top half the sky.
        let bottom = 31 * 32 + 16;
        assert!(g.is_hit(bottom));
        assert!(!g.is_hit(16));
        // Depth of a floor point at pixel centre agrees with the ray.
        let dir = g.frame.direction(16.5, 31.5);
        let t = -1.0 / dir.y;
        let expect = t * dir.dot(g.frame.w);
        assert!((g.depth[bottom] - expect).abs() < 1e-3 * expect);
    }
}
