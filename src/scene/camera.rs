//! A pinhole or thin-lens camera and its pixel filter. Both backends generate primary rays
//! from the same [`CameraFrame`], so one pixel and one jitter give the same ray on the CPU and
//! on the GPU.

use glam::{DVec3, Vec3};

use super::Bounds;

/// A pinhole camera as the user gives it: eye, target, up vector, vertical field of view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    pub eye: Vec3,
    pub look_at: Vec3,
    pub up: Vec3,
    /// Vertical field of view in degrees.
    pub fov_y_deg: f32,
}

/// How a pixel's samples spread over the image plane (`--filter`): the pixel filter, applied
/// by filter importance sampling (each sample's point drawn with the filter's density, every
/// sample weighing the same), so the image stays a plain mean of samples and bit-identical
/// under any schedule. Both filters are separable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PixelFilter {
    /// Uniform over the pixel's own square: each pixel averages what it covers, and nothing
    /// of its neighbours (sharpest, but edges alias most).
    #[default]
    Box,
    /// A tent of radius 1 pixel along each axis (pbrt's triangle filter): weights fall
    /// linearly from the pixel's centre to its neighbours' centres, so pixels overlap and
    /// edges come out smoother for slightly softer detail.
    Tent,
}

impl PixelFilter {
    /// The name `--filter` takes and a render's key records.
    pub fn name(self) -> &'static str {
        match self {
            PixelFilter::Box => "box",
            PixelFilter::Tent => "tent",
        }
    }

    /// The point of the image plane (continuous pixel coordinates, origin top-left) of the
    /// sample of pixel `(x, y)` whose two numbers (its first 2D slot) are `(u1, u2)`.
    /// `ptx/gasworks_common.h` computes the same bits (only exact operations and `sqrt`).
    #[inline]
    pub fn place(self, x: u32, y: u32, u1: f32, u2: f32) -> (f32, f32) {
        match self {
            PixelFilter::Box => (x as f32 + u1, y as f32 + u2),
            PixelFilter::Tent => (
                x as f32 + 0.5 + tent_offset(u1),
                y as f32 + 0.5 + tent_offset(u2),
            ),
        }
    }
}

/// The inverse of the tent's distribution function on [-1, 1] (`(1 + t)^2 / 2` left of 0,
/// `1 - (1 - t)^2 / 2` right of it): a number uniform in [0, 1) to an offset with the tent's
/// density. Monotone, so the sampler's stratification carries over to the offsets.
#[inline]
pub fn tent_offset(u: f32) -> f32 {
    if u < 0.5 {
        (2.0 * u).sqrt() - 1.0
    } else {
        1.0 - (2.0 * (1.0 - u)).sqrt()
    }
}

/// A thin lens (`--lens-radius`, `--focus-distance`): depth of field. Rays leave from a
/// disk of radius `radius` around the eye, across the view direction, and every ray of one
/// image-plane point meets the others on the plane of focus, `focus_distance` along the view
/// direction: what lies on that plane is sharp, and a point at depth `z` blurs into a disk of
/// radius `radius * |1/focus_distance - 1/z|` on the image plane at distance 1 (pbrt's
/// `PerspectiveCamera`). The default, radius 0, is the pinhole: everything sharp, and no
/// random numbers drawn for the lens.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ThinLens {
    /// The lens's radius in scene units (0: a pinhole).
    pub radius: f32,
    /// The distance from the eye, along the view direction, of the plane in focus.
    pub focus_distance: f32,
    /// The frame's `u` normalized, times `radius`: the lens disk's point `(a, b)` (in the unit
    /// disk) is `eye + a * axis_u + b * axis_v`.
    pub axis_u: Vec3,
    /// The frame's `v` normalized, times `radius`.
    pub axis_v: Vec3,
}

impl ThinLens {
    /// Whether this is a pinhole (radius 0): no lens sample, the eye is every ray's origin.
    #[inline]
    pub fn is_pinhole(&self) -> bool {
        self.radius == 0.0
    }
}

/// A point of the unit disk from two numbers in [0, 1), by Shirley and Chiu's concentric map
/// (as pbrt's `SampleUniformDiskConcentric`): squares go to rings, so the sampler's strata of
/// the square stay compact on the lens. `ptx/gasworks_common.h` computes the same operations.
#[inline]
pub fn concentric_disk(u1: f32, u2: f32) -> (f32, f32) {
    let ox = 2.0 * u1 - 1.0;
    let oy = 2.0 * u2 - 1.0;
    if ox == 0.0 && oy == 0.0 {
        return (0.0, 0.0);
    }
    let (r, theta) = if ox.abs() > oy.abs() {
        (ox, std::f32::consts::FRAC_PI_4 * (oy / ox))
    } else {
        (
            oy,
            std::f32::consts::FRAC_PI_2 - std::f32::consts::FRAC_PI_4 * (ox / oy),
        )
    };
    (r * theta.cos(), r * theta.sin())
}

/// The camera resolved for one image: origin plus the three vectors that span the image plane
/// at distance 1, the pixel filter and the lens. A pinhole's ray through pixel coordinates
/// `(px, py)` (continuous, origin top-left) is `normalize(w + (2 px / width - 1) u + (1 - 2 py
/// / height) v)` from the eye; a pixel's samples go through the points [`PixelFilter::place`]
/// gives, and a thin lens's from points of its disk ([`CameraFrame::thin_lens_ray`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CameraFrame {
    pub eye: Vec3,
    /// Points right; its length is `tan(fov/2) * aspect`.
    pub u: Vec3,
    /// Points up; its length is `tan(fov/2)`.
    pub v: Vec3,
    /// Unit vector along the view direction.
    pub w: Vec3,
    pub width: u32,
    pub height: u32,
    /// The pixel filter (box unless set: [`Camera::frame`] makes box frames).
    pub filter: PixelFilter,
    /// The lens (a pinhole unless set: [`CameraFrame::set_thin_lens`]).
    pub lens: ThinLens,
}

/// Why a camera cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CameraError {
    #[error("the camera's eye and look-at point are the same point")]
    ZeroViewDirection,
    #[error("the camera's up vector is parallel to its view direction (or zero)")]
    UpParallelToView,
    #[error("the field of view must be between 0 and 180 degrees, got {0}")]
    BadFov(f32),
    #[error("camera values must be finite numbers")]
    NotFinite,
    #[error("the lens radius must be a finite number, 0 or more, got {0}")]
    BadLensRadius(f32),
    #[error("the focus distance must be a finite number above 0, got {0}")]
    BadFocusDistance(f32),
    #[error("a lens of radius {radius} focused at {focus_distance} is too large for single-precision rays (their directions would overflow, or their rounding blur the plane of focus by more than a pixel)")]
    LensTooLarge { radius: f32, focus_distance: f32 },
}

/// How much of the narrower side of the image the default camera's bounding sphere fills: a
/// hair under all of it, so that rounding never pushes the silhouette past the border.
pub const FRAMING_FILL: f32 = 0.98;

impl Camera {
    /// The default camera of a scene without its own: it looks along -Z (as Blender's front
    /// view and three.js viewers do, so a model faces it the way it faces them) at the centre
    /// of `bounds`, from just far enough away that the bounding sphere fills
    /// [`FRAMING_FILL`] of the narrower side of a `width` x `height` image.
    pub fn framing(bounds: &Bounds, fov_y_deg: f32, width: u32, height: u32) -> Camera {
        let (center, radius) = if bounds.is_empty() {
            (Vec3::ZERO, 1.0)
        } else {
            let r = bounds.diagonal().length() * 0.5;
            let r = if r > 0.0 && r.is_finite() {
                r
            } else {
                // A single point (or a degenerate box): any distance shows it.
                bounds.center().abs().max_element().max(1.0)
            };
            (bounds.center(), r)
        };
        // The half-angle of the narrower side: the vertical one unless the image is portrait.
        let tan_y = (fov_y_deg.to_radians() * 0.5).tan();
        let aspect = width.max(1) as f32 / height.max(1) as f32;
        let tan_narrow = tan_y * aspect.min(1.0);
        // The sphere's silhouette is the cone of half-angle asin(radius / distance) around the
        // view axis; it covers FRAMING_FILL of the narrow half-extent when that cone's tangent
        // is FRAMING_FILL times the image's.
        let half_angle = (FRAMING_FILL * tan_narrow).atan();
        let distance = radius / half_angle.sin().max(1e-6);
        Camera {
            eye: center + Vec3::Z * distance,
            look_at: center,
            up: Vec3::Y,
            fov_y_deg,
        }
    }

    pub fn frame(&self, width: u32, height: u32) -> Result<CameraFrame, CameraError> {
        let values = [self.eye, self.look_at, self.up];
        if values.iter().any(|v| !v.is_finite()) || !self.fov_y_deg.is_finite() {
            return Err(CameraError::NotFinite);
        }
        if !(self.fov_y_deg > 0.0 && self.fov_y_deg < 180.0) {
            return Err(CameraError::BadFov(self.fov_y_deg));
        }
        // The checks in f64: the squared lengths of f32 vectors overflow past about 1.8e19 (an
        // eye 1e30 away, an up vector of 1e30) and underflow below about 1e-19 (an up vector
        // of 1e-30), where the directions are still well defined.
        let dir64 = self.look_at.as_dvec3() - self.eye.as_dvec3();
        if dir64 == DVec3::ZERO {
            return Err(CameraError::ZeroViewDirection);
        }
        let up64 = self.up.as_dvec3();
        if up64 == DVec3::ZERO {
            return Err(CameraError::UpParallelToView);
        }
        let w64 = dir64.normalize();
        // The sine of the angle between up and the view direction.
        let right64 = w64.cross(up64.normalize());
        if right64.length_squared() < 1e-12 {
            return Err(CameraError::UpParallelToView);
        }
        // The vectors themselves in f32 as before wherever f32 holds them, so that a camera
        // renders the same image bit for bit as in earlier versions; from the f64 ones where
        // f32 squares overflow or underflow.
        let dir = self.look_at - self.eye;
        let right = dir.normalize().cross(self.up);
        let (w, right) = if dir.length_squared().is_normal() && right.length_squared().is_normal() {
            (dir.normalize(), right.normalize())
        } else {
            (w64.as_vec3(), right64.normalize().as_vec3())
        };
        let up = right.cross(w);
        let half = (self.fov_y_deg.to_radians() * 0.5).tan();
        let aspect = width as f32 / height.max(1) as f32;
        Ok(CameraFrame {
            eye: self.eye,
            u: right * half * aspect,
            v: up * half,
            w,
            width,
            height,
            filter: PixelFilter::Box,
            lens: ThinLens::default(),
        })
    }
}

impl CameraFrame {
    /// Gives the frame a thin lens of radius `radius` (scene units; 0 is the pinhole) focused
    /// at `focus_distance` along the view direction.
    pub fn set_thin_lens(&mut self, radius: f32, focus_distance: f32) -> Result<(), CameraError> {
        if !(radius.is_finite() && radius >= 0.0) {
            return Err(CameraError::BadLensRadius(radius));
        }
        if !(focus_distance.is_finite() && focus_distance > 0.0) {
            return Err(CameraError::BadFocusDistance(focus_distance));
        }
        // The longest vector a lens ray's direction is normalized from: the corner ray out to
        // the plane of focus, plus the radius. Its squared length (three squares summed) must
        // be a finite f32, or the direction comes out zero and every sample black.
        let corner =
            (1.0 + self.u.as_dvec3().length_squared() + self.v.as_dvec3().length_squared()).sqrt();
        let longest = f64::from(focus_distance) * corner + f64::from(radius);
        // And a ray's rounding (a few units in the last place of the lens offset, about
        // radius * 2^-23 each) must stay below a pixel's footprint on the plane of focus, or
        // that plane is no longer sharp: a lens of 1e18 on a box of 500 units came out black.
        let pixel = f64::from(focus_distance) * 2.0 * self.v.as_dvec3().length()
            / f64::from(self.height.max(1));
        let rounding = f64::from(radius) * (2.0f64).powi(-20);
        if radius > 0.0 && (3.0 * longest * longest >= f64::from(f32::MAX) || rounding > pixel) {
            return Err(CameraError::LensTooLarge {
                radius,
                focus_distance,
            });
        }
        self.lens = if radius == 0.0 {
            ThinLens::default()
        } else {
            ThinLens {
                radius,
                focus_distance,
                axis_u: self.u.normalize() * radius,
                axis_v: self.v.normalize() * radius,
            }
        };
        Ok(())
    }

    /// The ray (origin, unit direction) of a thin lens through continuous pixel coordinates
    /// `(px, py)` from the lens point of the numbers `(l1, l2)`: it leaves the disk at that
    /// point and passes through the point of the plane of focus that the pinhole's ray through
    /// `(px, py)` passes through. With radius 0 it is the pinhole's ray (up to rounding: the
    /// renderers take [`CameraFrame::direction`] then, and draw no lens numbers).
    #[inline]
    pub fn thin_lens_ray(&self, px: f32, py: f32, l1: f32, l2: f32) -> (Vec3, Vec3) {
        let (a, b) = concentric_disk(l1, l2);
        let offset = a * self.lens.axis_u + b * self.lens.axis_v;
        // The image-plane point has length 1 along w, so this is the point at focus_distance
        // along the view direction (relative to the eye).
        let focus = self.image_plane_point(px, py) * self.lens.focus_distance;
        (self.eye + offset, (focus - offset).normalize())
    }

    /// The direction (unit length) through continuous pixel coordinates `(px, py)`.
    #[inline]
    pub fn direction(&self, px: f32, py: f32) -> Vec3 {
        self.image_plane_point(px, py).normalize()
    }

    /// The point of the image plane at distance 1 (relative to the eye) at continuous pixel
    /// coordinates `(px, py)`: the pinhole's direction before normalizing.
    #[inline]
    fn image_plane_point(&self, px: f32, py: f32) -> Vec3 {
        let sx = 2.0 * px / self.width as f32 - 1.0;
        let sy = 1.0 - 2.0 * py / self.height as f32;
        self.w + sx * self.u + sy * self.v
    }

    /// Projects a world point to continuous pixel coordinates and its depth along `w`;
    /// `None` behind the camera. The inverse of [`CameraFrame::direction`] (used by the
    /// cost-map rasterizer).
    pub fn project(&self, p: Vec3) -> Option<(f32, f32, f32)> {
        let d = p - self.eye;
        let z = d.dot(self.w);
        if z <= 1e-6 {
            return None;
        }
        let sx = d.dot(self.u) / (z * self.u.length_squared());
        let sy = d.dot(self.v) / (z * self.v.length_squared());
        let px = (sx + 1.0) * 0.5 * self.width as f32;
        let py = (1.0 - sy) * 0.5 * self.height as f32;
        Some((px, py, z))
    }
}

/// The comment that carries a scene's own camera in an OBJ file. OBJ has no camera, so the
/// generators write one (the Cornell box's published camera, say) as a comment that other
/// tools ignore:
///
/// `# gasworks camera: eye 278 273 -800 look_at 278 273 0 up 0 1 0 fov 39.3`
///
/// It may carry a thin lens too, `lens_radius R` and optionally `focus_distance D` (without
/// it the lens focuses at the look-at point's distance), as `--lens-radius` and
/// `--focus-distance` give one: see [`CameraHint`].
pub const CAMERA_HINT_PREFIX: &str = "# gasworks camera:";

/// A scene's own camera as its `# gasworks camera:` comment gives it: the camera, and the
/// thin lens when the comment names one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CameraHint {
    pub camera: Camera,
    pub lens: Option<LensHint>,
}

/// The thin lens of a camera hint (`lens_radius R [focus_distance D]`), checked as far as a
/// comment can be: a radius of 0 or more, a focus distance above 0. Whether it suits single
/// precision is [`CameraFrame::set_thin_lens`]'s to say, with the frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LensHint {
    pub radius: f32,
    /// `None`: focused at the look-at point's distance along the view direction.
    pub focus_distance: Option<f32>,
}

impl CameraHint {
    /// Parses a camera hint comment: `None` when the line is not one, an error saying what is
    /// wrong when it is one but malformed.
    pub fn from_line(line: &str) -> Option<Result<CameraHint, String>> {
        let rest = line.trim().strip_prefix(CAMERA_HINT_PREFIX)?;
        Some(Camera::parse_hint(rest))
    }

    /// The camera hint of an OBJ file, looked for among its leading comment lines: `None`
    /// when it has none (or cannot be read: the loader reports that), an error naming the
    /// file and line when its hint is malformed or there are two.
    pub fn from_obj(path: &std::path::Path) -> Result<Option<CameraHint>, CameraHintError> {
        use std::io::BufRead;
        let Ok(file) = std::fs::File::open(path) else {
            return Ok(None);
        };
        let mut found: Option<(usize, CameraHint)> = None;
        // The hint is among the first lines: a bounded read, so that a file without line
        // ends (`/dev/zero`) is left for the loader to refuse.
        for (n, line) in std::io::BufReader::new(std::io::Read::take(file, 1 << 20))
            .lines()
            .take(64)
            .map_while(Result::ok)
            .enumerate()
        {
            let fail = |why: String| CameraHintError {
                path: path.to_path_buf(),
                line: n + 1,
                why,
            };
            match (CameraHint::from_line(&line), found) {
                (None, _) => continue,
                (Some(Err(why)), _) => return Err(fail(why)),
                // Which one was meant cannot be known: neither is used silently.
                (Some(Ok(_)), Some((first, _))) => {
                    return Err(fail(format!(
                        "a second camera comment (the first is on line {first}); keep one"
                    )))
                }
                (Some(Ok(hint)), None) => found = Some((n + 1, hint)),
            }
        }
        Ok(found.map(|(_, hint)| hint))
    }
}

impl Camera {
    /// The comment line that [`Camera::from_hint`] reads back.
    pub fn to_hint(&self) -> String {
        let v = |v: Vec3| format!("{} {} {}", v.x, v.y, v.z);
        format!(
            "{CAMERA_HINT_PREFIX} eye {} look_at {} up {} fov {}",
            v(self.eye),
            v(self.look_at),
            v(self.up),
            self.fov_y_deg
        )
    }

    /// Parses a camera hint comment: `None` when the line is not one, an error saying what is
    /// wrong when it is one but malformed (a typo there must not quietly give another camera).
    /// The lens the comment may name is left out: [`CameraHint::from_line`] keeps it.
    pub fn from_hint(line: &str) -> Option<Result<Camera, String>> {
        CameraHint::from_line(line).map(|r| r.map(|h| h.camera))
    }

    fn parse_hint(rest: &str) -> Result<CameraHint, String> {
        let words = HintWords(rest.split_whitespace().collect());
        let mut cam = Camera {
            eye: Vec3::ZERO,
            look_at: Vec3::NEG_Z,
            up: Vec3::Y,
            fov_y_deg: 39.3,
        };
        let mut seen_eye = false;
        let (mut lens_radius, mut focus_distance) = (None, None);
        let mut i = 0;
        while i < words.0.len() {
            match words.0[i] {
                "eye" => {
                    cam.eye = words.vec_at("eye", i + 1)?;
                    seen_eye = true;
                    i += 4;
                }
                "look_at" => {
                    cam.look_at = words.vec_at("look_at", i + 1)?;
                    i += 4;
                }
                "up" => {
                    cam.up = words.vec_at("up", i + 1)?;
                    i += 4;
                }
                "fov" => {
                    cam.fov_y_deg = words.num("fov", i + 1)?;
                    i += 2;
                }
                "lens_radius" => {
                    let r = words.num("lens_radius", i + 1)?;
                    if r < 0.0 {
                        return Err(format!("`lens_radius`: {r} is below 0"));
                    }
                    lens_radius = Some(r);
                    i += 2;
                }
                "focus_distance" => {
                    let d = words.num("focus_distance", i + 1)?;
                    if d <= 0.0 {
                        return Err(format!("`focus_distance`: {d} is not above 0"));
                    }
                    focus_distance = Some(d);
                    i += 2;
                }
                other => {
                    return Err(format!(
                    "unknown word {other:?} (expected eye X Y Z, look_at X Y Z, up X Y Z, fov DEG, \
                     lens_radius R, focus_distance D)"
                ))
                }
            }
        }
        if !seen_eye {
            return Err("no `eye X Y Z`".into());
        }
        let lens = lens_of_hint(lens_radius, focus_distance)?;
        Ok(CameraHint { camera: cam, lens })
    }

    /// The camera of an OBJ file's hint ([`CameraHint::from_obj`]; its lens left out).
    pub fn hint_from_obj(path: &std::path::Path) -> Result<Option<Camera>, CameraHintError> {
        Ok(CameraHint::from_obj(path)?.map(|h| h.camera))
    }
}

/// The words of a camera hint, read as numbers where a key wants them.
struct HintWords<'a>(Vec<&'a str>);

impl HintWords<'_> {
    /// Word `j` as the finite number that `key` wants.
    fn num(&self, key: &str, j: usize) -> Result<f32, String> {
        let word = self
            .0
            .get(j)
            .ok_or_else(|| format!("`{key}` lacks a number"))?;
        word.parse::<f32>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("`{key}`: {word:?} is not a finite number"))
    }

    /// Words `j..j + 3` as the vector that `key` wants.
    fn vec_at(&self, key: &str, j: usize) -> Result<Vec3, String> {
        Ok(Vec3::new(
            self.num(key, j)?,
            self.num(key, j + 1)?,
            self.num(key, j + 2)?,
        ))
    }
}

/// The lens a hint names: none without `lens_radius`, and `focus_distance` alone refused.
fn lens_of_hint(
    lens_radius: Option<f32>,
    focus_distance: Option<f32>,
) -> Result<Option<LensHint>, String> {
    match (lens_radius, focus_distance) {
        (None, Some(_)) => {
            Err("`focus_distance` without `lens_radius` (a pinhole has no focus)".into())
        }
        (None, None) => Ok(None),
        (Some(radius), focus_distance) => Ok(Some(LensHint {
            radius,
            focus_distance,
        })),
    }
}

/// A malformed `# gasworks camera:` comment.
#[derive(Debug, thiserror::Error)]
#[error("{}:{line}: bad camera comment ({CAMERA_HINT_PREFIX} ...): {why}; fix it, or delete the line to frame the scene automatically", path.display())]
pub struct CameraHintError {
    pub path: std::path::PathBuf,
    pub line: usize,
    pub why: String,
}

/// The camera a render asks for: each value given (`--eye`, `--look-at`, `--up`, `--fov`),
/// falling back to the scene's own camera (its `# gasworks camera:` comment), else to the
/// default that frames the scene's bounds ([`Camera::framing`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CameraChoice {
    pub eye: Option<Vec3>,
    pub look_at: Option<Vec3>,
    pub up: Option<Vec3>,
    /// Vertical field of view in degrees.
    pub fov: Option<f32>,
}

/// The default vertical field of view: the Cornell box's published camera's.
pub const DEFAULT_FOV_DEG: f32 = 39.3;

impl CameraChoice {
    /// The camera to render a `width` x `height` image with: the command line's values, each
    /// falling back to the scene's own camera (a hint comment in the OBJ), else to the
    /// default camera that frames the bounds ([`Camera::framing`]).
    pub fn camera(
        &self,
        bounds: &Bounds,
        scene_camera: Option<Camera>,
        width: u32,
        height: u32,
    ) -> Camera {
        let base = scene_camera.unwrap_or_else(|| {
            Camera::framing(bounds, self.fov.unwrap_or(DEFAULT_FOV_DEG), width, height)
        });
        Camera {
            eye: self.eye.unwrap_or(base.eye),
            look_at: self.look_at.unwrap_or(base.look_at),
            up: self.up.unwrap_or(base.up),
            fov_y_deg: self.fov.unwrap_or(base.fov_y_deg),
        }
    }

    /// Whether the flags give every value of the camera (a scene's own is then not used).
    pub fn overrides_all(&self) -> bool {
        self.eye.is_some() && self.look_at.is_some() && self.up.is_some() && self.fov.is_some()
    }

    /// The scene's own camera (its `# gasworks camera:` comment), if any. A malformed one is
    /// an error, unless the flags give every camera value: it would not be used, so it goes
    /// to `warn` instead.
    pub fn scene_hint(
        &self,
        scene: &std::path::Path,
        warn: impl FnOnce(String),
    ) -> Result<Option<Camera>, CameraHintError> {
        Ok(self.scene_hint_with_lens(scene, warn)?.map(|h| h.camera))
    }

    /// [`CameraChoice::scene_hint`] with the lens the comment may name.
    pub fn scene_hint_with_lens(
        &self,
        scene: &std::path::Path,
        warn: impl FnOnce(String),
    ) -> Result<Option<CameraHint>, CameraHintError> {
        match CameraHint::from_obj(scene) {
            Ok(hint) => Ok(hint),
            Err(e) if self.overrides_all() => {
                warn(format!(
                    "{e} (not used: --eye, --look-at, --up and --fov give the whole camera)"
                ));
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Where [`CameraChoice::camera`]'s values come from, for the user.
    pub fn origin(&self, has_scene_camera: bool) -> &'static str {
        let from_cli =
            self.eye.is_some() || self.look_at.is_some() || self.up.is_some() || self.fov.is_some();
        match (has_scene_camera, from_cli) {
            (true, false) => "the scene's camera hint",
            (true, true) => "the command line over the scene's camera hint",
            (false, false) => "default: framing the scene's bounding sphere, looking along -Z",
            (false, true) => "the command line over the default camera",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_box_filter_is_the_plain_jitter_and_the_tent_inverts_its_distribution() {
        // Box: x + u exactly, as every render before --filter.
        for (x, u) in [(0u32, 0.0f32), (7, 0.25), (4095, 0.999_999_9)] {
            assert_eq!(
                PixelFilter::Box.place(x, x + 1, u, 1.0 - u),
                (x as f32 + u, (x + 1) as f32 + (1.0 - u))
            );
        }
        // Tent: the tent's distribution function F(t) = (1 + t)^2 / 2 left of 0 and
        // 1 - (1 - t)^2 / 2 right of it, at the offset of u, gives u back; the offsets rise
        // with u over [-1, 1], with 0 in the middle.
        let cdf = |t: f64| {
            if t <= 0.0 {
                (1.0 + t).powi(2) / 2.0
            } else {
                1.0 - (1.0 - t).powi(2) / 2.0
            }
        };
        assert_eq!(tent_offset(0.0), -1.0);
        assert_eq!(tent_offset(0.5), 0.0);
        let mut last = -1.0f32;
        for i in 1..(1 << 16) {
            let u = i as f32 / 65_536.0;
            let t = tent_offset(u);
            assert!(t >= last && t < 1.0, "{u}: {t} after {last}");
            assert!(
                (cdf(t as f64) - u as f64).abs() < 1e-6,
                "{u}: F({t}) = {}",
                cdf(t as f64)
            );
            last = t;
        }
        assert_eq!(PixelFilter::Tent.place(3, 5, 0.5, 0.0), (3.5, 4.5));
    }

    /// The concentric map sends the square ring at Chebyshev distance `r` from the centre to
    /// the circle of radius `r` (so it keeps areas: the ring's share of the square is the
    /// circle's of the disk), and each eighth of a ring to an eighth of the circle, in order.
    #[test]
    fn the_concentric_map_sends_square_rings_to_circles_and_octants_to_octants() {
        assert_eq!(concentric_disk(0.5, 0.5), (0.0, 0.0));
        let n = 256;
        for i in 0..n {
            for j in 0..n {
                let (u1, u2) = ((i as f32 + 0.5) / n as f32, (j as f32 + 0.5) / n as f32);
                let (ox, oy) = (2.0 * u1 - 1.0, 2.0 * u2 - 1.0);
                let (a, b) = concentric_disk(u1, u2);
                let ring = ox.abs().max(oy.abs());
                assert!(((a * a + b * b).sqrt() - ring).abs() < 1e-6, "{u1} {u2}");
                // The octant: the signs, and which coordinate is the larger, are kept.
                let keep = |p: f32, q: f32| p == 0.0 || q == 0.0 || p.signum() == q.signum();
                assert!(keep(a, ox) && keep(b, oy), "{u1} {u2}: ({a}, {b})");
                if (ox.abs() - oy.abs()).abs() > 1e-3 {
                    assert_eq!(
                        a.abs() > b.abs(),
                        ox.abs() > oy.abs(),
                        "{u1} {u2}: ({a}, {b})"
                    );
                }
            }
        }
    }

    /// Every ray of one image-plane point meets the pinhole's ray on the plane of focus, and
    /// leaves from the lens disk across the view direction; a bad lens is an error, and radius
    /// 0 is the pinhole.
    #[test]
    fn thin_lens_rays_of_one_pixel_point_meet_on_the_plane_of_focus() {
        let cam = Camera {
            eye: Vec3::new(1.0, 2.0, 5.0),
            look_at: Vec3::new(0.0, 1.0, 0.0),
            up: Vec3::Y,
            fov_y_deg: 40.0,
        };
        let mut f = cam.frame(64, 32).unwrap();
        assert!(f.lens.is_pinhole());
        f.set_thin_lens(0.25, 4.0).unwrap();
        assert!(!f.lens.is_pinhole());
        for (px, py) in [(32.0, 16.0), (0.0, 0.0), (63.9, 31.9), (10.25, 20.5)] {
            let pinhole = f.direction(px, py);
            let on_focus_plane = f.eye + pinhole * (4.0 / pinhole.dot(f.w));
            for (l1, l2) in [(0.5, 0.5), (0.0, 0.0), (0.99, 0.2), (0.3, 0.8)] {
                let (o, d) = f.thin_lens_ray(px, py, l1, l2);
                assert!((d.length() - 1.0).abs() < 1e-6);
                let lens = o - f.eye;
                assert!(lens.dot(f.w).abs() < 1e-6 && lens.length() <= 0.25 + 1e-6);
                let t = (4.0 - lens.dot(f.w)) / d.dot(f.w);
                let hit = o + d * t;
                assert!(
                    (hit - on_focus_plane).length() < 1e-5,
                    "({px}, {py}) from lens ({l1}, {l2}): {hit} against {on_focus_plane}"
                );
            }
        }
        assert_eq!(
            f.set_thin_lens(-1.0, 4.0),
            Err(CameraError::BadLensRadius(-1.0))
        );
        assert_eq!(
            f.set_thin_lens(f32::NAN, 4.0).unwrap_err().to_string(),
            "the lens radius must be a finite number, 0 or more, got NaN"
        );
        assert_eq!(
            f.set_thin_lens(1.0, 0.0),
            Err(CameraError::BadFocusDistance(0.0))
        );
        assert_eq!(
            f.set_thin_lens(1.0, f32::INFINITY),
            Err(CameraError::BadFocusDistance(f32::INFINITY))
        );
        // Past single precision: three squares of 1.1e19 overflow f32 (a lens of 1e30 gave a
        // black image), and a radius past 2^20 pixels' footprints on the plane of focus
        // (4 * 0.0227 here, so past 95,300) rounds the rays by more than one; a pinhole
        // focused anywhere has no such rays.
        let footprint = 4.0 * 2.0 * f.v.length() / 32.0;
        let limit = footprint * (1u32 << 20) as f32;
        assert!((95_000.0..96_000.0).contains(&limit), "{limit}");
        for (radius, focus) in [
            (1.1e19, 4.0),
            (1.0, 1e19),
            (1e30, 1e30),
            (limit * 1.01, 4.0),
        ] {
            assert_eq!(
                f.set_thin_lens(radius, focus),
                Err(CameraError::LensTooLarge {
                    radius,
                    focus_distance: focus
                })
            );
        }
        f.set_thin_lens(limit * 0.99, 4.0).unwrap();
        f.set_thin_lens(1e17, 1e17).unwrap();
        let (o, d) = f.thin_lens_ray(63.9, 31.9, 0.99, 0.01);
        assert!(o.is_finite() && (d.length() - 1.0).abs() < 1e-6, "{o} {d}");
        f.set_thin_lens(0.0, 1e30).unwrap();
        f.set_thin_lens(0.0, 4.0).unwrap();
        assert_eq!(f.lens, ThinLens::default());
    }

    #[test]
    fn camera_hints_round_trip() {
        let cam = Camera {
            eye: Vec3::new(278.0, 273.0, -800.0),
            look_at: Vec3::new(278.0, 273.0, 0.0),
            up: Vec3::Y,
            fov_y_deg: 39.3,
        };
        assert_eq!(Camera::from_hint(&cam.to_hint()), Some(Ok(cam)));
        assert_eq!(Camera::from_hint("# a comment"), None);
        let err = |line: &str| Camera::from_hint(line).unwrap().unwrap_err();
        assert_eq!(err("# gasworks camera: eye 1 2"), "`eye` lacks a number");
        assert_eq!(
            err("# gasworks camera: eye 1 2 nan"),
            "`eye`: \"nan\" is not a finite number"
        );
        assert_eq!(
            err("# gasworks camera: eye 1 2 3 fov 39.3deg"),
            "`fov`: \"39.3deg\" is not a finite number"
        );
        assert!(
            err("# gasworks camera: eye 1 2 3 lookat 0 0 0").starts_with("unknown word \"lookat\"")
        );
        assert_eq!(err("# gasworks camera: fov 40"), "no `eye X Y Z`");
    }

    /// A camera comment may name a thin lens; the words are checked as the flags are.
    #[test]
    fn camera_hints_carry_a_thin_lens() {
        let base = "# gasworks camera: eye 278 273 -800 look_at 278 273 0 up 0 1 0 fov 39.3";
        let hint = |extra: &str| CameraHint::from_line(&format!("{base}{extra}")).unwrap();
        let plain = hint("").unwrap();
        assert_eq!(plain.lens, None);
        assert_eq!(Camera::from_hint(base), Some(Ok(plain.camera)));
        assert_eq!(
            hint(" lens_radius 20 focus_distance 1100").unwrap().lens,
            Some(LensHint {
                radius: 20.0,
                focus_distance: Some(1100.0)
            })
        );
        // Without a focus distance: the look-at point's, chosen with the frame.
        let lens = hint(" lens_radius 0.5").unwrap();
        assert_eq!(
            lens.lens,
            Some(LensHint {
                radius: 0.5,
                focus_distance: None
            })
        );
        // The lens does not change the camera, and `Camera::from_hint` leaves it out.
        assert_eq!(lens.camera, plain.camera);
        assert_eq!(
            Camera::from_hint(&format!("{base} lens_radius 0.5")),
            Some(Ok(plain.camera))
        );
        let err = |extra: &str| hint(extra).unwrap_err();
        assert_eq!(err(" lens_radius -1"), "`lens_radius`: -1 is below 0");
        assert_eq!(
            err(" lens_radius 1 focus_distance 0"),
            "`focus_distance`: 0 is not above 0"
        );
        assert_eq!(
            err(" lens_radius inf"),
            "`lens_radius`: \"inf\" is not a finite number"
        );
        assert_eq!(
            err(" focus_distance 10"),
            "`focus_distance` without `lens_radius` (a pinhole has no focus)"
        );
        assert_eq!(err(" lens_radius"), "`lens_radius` lacks a number");
    }

    #[test]
    fn a_file_with_two_camera_comments_is_refused_naming_both_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("two.obj");
        let hint = "# gasworks camera: eye 0 0 3 look_at 0 0 0 up 0 1 0 fov 40";
        std::fs::write(&path, format!("{hint}\nv 0 0 0\n{hint}\n")).unwrap();
        let e = Camera::hint_from_obj(&path).unwrap_err().to_string();
        assert!(
            e.contains("two.obj:3: bad camera comment")
                && e.contains("a second camera comment (the first is on line 1)"),
            "{e}"
        );
        std::fs::write(&path, format!("# a scene\n{hint}\nv 0 0 0\n")).unwrap();
        let cam = Camera::hint_from_obj(&path).unwrap().unwrap();
        assert_eq!(cam.fov_y_deg, 40.0);
    }

    #[test]
    fn centre_pixel_looks_at_target_and_project_inverts_direction() {
        let cam = Camera {
            eye: Vec3::new(1.0, 2.0, 5.0),
            look_at: Vec3::new(0.0, 1.0, 0.0),
            up: Vec3::Y,
            fov_y_deg: 40.0,
        };
        let f = cam.frame(64, 32).unwrap();
        let d = f.direction(32.0, 16.0);
        assert!((d - (cam.look_at - cam.eye).normalize()).length() < 1e-6);
        let p = f.eye + f.direction(10.5, 3.25) * 7.0;
        let (px, py, _) = f.project(p).unwrap();
        assert!((px - 10.5).abs() < 1e-3 && (py - 3.25).abs() < 1e-3);
    }

    #[test]
    fn bad_cameras_are_errors() {
        let mut cam = Camera {
            eye: Vec3::ZERO,
            look_at: Vec3::Z,
            up: Vec3::Z,
            fov_y_deg: 40.0,
        };
        assert_eq!(cam.frame(8, 8), Err(CameraError::UpParallelToView));
        cam.up = Vec3::Y;
        cam.look_at = Vec3::ZERO;
        assert_eq!(cam.frame(8, 8), Err(CameraError::ZeroViewDirection));
        cam.look_at = Vec3::Z;
        cam.fov_y_deg = 180.0;
        assert_eq!(cam.frame(8, 8), Err(CameraError::BadFov(180.0)));
        cam.fov_y_deg = 40.0;
        cam.up = Vec3::ZERO;
        assert_eq!(cam.frame(8, 8), Err(CameraError::UpParallelToView));
    }

    /// Directions are directions at any scale: vectors whose f32 squared length overflows or
    /// underflows give the frame they point to (they gave a zero or "parallel" frame).
    #[test]
    fn huge_and_tiny_vectors_give_the_frame_they_point_to() {
        let reference = Camera {
            eye: Vec3::ZERO,
            look_at: Vec3::Z,
            up: Vec3::Y,
            fov_y_deg: 40.0,
        }
        .frame(16, 8)
        .unwrap();
        let close = |a: &CameraFrame, b: &CameraFrame| {
            (a.u - b.u).length() < 1e-6
                && (a.v - b.v).length() < 1e-6
                && (a.w - b.w).length() < 1e-6
        };
        for (eye, look_at, up) in [
            (Vec3::ZERO, Vec3::Z, Vec3::new(0.0, 1e30, 0.0)),
            (Vec3::ZERO, Vec3::Z, Vec3::new(0.0, 1e-30, 0.0)),
            (Vec3::ZERO, Vec3::new(0.0, 0.0, 1e30), Vec3::Y),
            (Vec3::new(0.0, 0.0, -1e30), Vec3::ZERO, Vec3::Y),
            (
                Vec3::ZERO,
                Vec3::new(0.0, 0.0, 1e-30),
                Vec3::new(1e-3, 1e25, 0.0),
            ),
        ] {
            let f = Camera {
                eye,
                look_at,
                up,
                fov_y_deg: 40.0,
            }
            .frame(16, 8)
            .unwrap();
            assert!(close(&f, &reference), "{eye} {look_at} {up}: {f:?}");
        }
        // Rolled a quarter turn: an up vector mostly along x.
        let rolled = Camera {
            eye: Vec3::ZERO,
            look_at: Vec3::Z,
            up: Vec3::new(1e30, 1.0, 0.0),
            fov_y_deg: 40.0,
        }
        .frame(8, 8)
        .unwrap();
        assert!(
            (rolled.v.normalize() - Vec3::X).length() < 1e-6,
            "{rolled:?}"
        );
    }

    fn corners(b: &Bounds) -> impl Iterator<Item = Vec3> + '_ {
        (0..8).map(move |i| {
            Vec3::new(
                if i & 1 == 0 { b.min[0] } else { b.max[0] },
                if i & 2 == 0 { b.min[1] } else { b.max[1] },
                if i & 4 == 0 { b.min[2] } else { b.max[2] },
            )
        })
    }

    /// The default camera looks along -Z at the centre, every corner of the box projects into
    /// the image, and the bounding sphere fills between 95% and 100% of the narrower side
    /// (FRAMING_FILL = 98%: tight, with room for rounding), for landscape, square and
    /// portrait images, flat and deep boxes, and several fields of view.
    #[test]
    fn framing_fills_the_frame_with_the_bounding_sphere_looking_along_minus_z() {
        let boxes = [
            Bounds {
                min: [-1.0, 0.0, -3.0],
                max: [2.0, 5.0, 1.0],
            },
            // A flat, wide model (a spider's legs) far from the origin.
            Bounds {
                min: [100.0, -0.2, 40.0],
                max: [104.0, 0.3, 44.0],
            },
            // Long along the view axis.
            Bounds {
                min: [0.0, 0.0, -50.0],
                max: [1.0, 1.0, 50.0],
            },
        ];
        for b in &boxes {
            for (w, h) in [(640, 480), (100, 100), (300, 800), (1920, 200)] {
                for fov in [20.0, 39.3, 90.0] {
                    let cam = Camera::framing(b, fov, w, h);
                    let what = format!("{b:?} {w}x{h} fov {fov}");
                    assert_eq!(cam.look_at, b.center(), "{what}");
                    let dir = (cam.look_at - cam.eye).normalize();
                    assert!(
                        (dir - Vec3::NEG_Z).length() < 1e-6,
                        "{what}: looks along {dir}"
                    );
                    let f = cam.frame(w, h).unwrap();
                    for c in corners(b) {
                        let (px, py, _) = f.project(c).expect("corner in front of the camera");
                        assert!(
                            (0.0..=w as f32).contains(&px) && (0.0..=h as f32).contains(&py),
                            "{what}: corner {c} projects to ({px}, {py})"
                        );
                    }
                    // The sphere's silhouette: a cone of half-angle asin(r / d) about the view
                    // axis. Its half-extent on the image plane (distance 1) against the
                    // narrower side's.
                    let r = b.diagonal().length() * 0.5;
                    let d = (cam.eye - b.center()).length();
                    let silhouette = (r / d).asin().tan();
                    let narrow = f.u.length().min(f.v.length());
                    let fill = silhouette / narrow;
                    assert!((0.95..=1.0).contains(&fill), "{what}: fills {fill}");
                }
            }
        }
    }

    #[test]
    fn framing_a_point_or_nothing_still_gives_a_usable_camera() {
        let point = Bounds {
            min: [1.0, 2.0, 3.0],
            max: [1.0, 2.0, 3.0],
        };
        for b in [point, Bounds::EMPTY] {
            let cam = Camera::framing(&b, 40.0, 64, 64);
            assert!(cam.frame(64, 64).is_ok(), "{b:?}: {cam:?}");
        }
    }

    /// The scene's camera hint wins over the default camera; the command line wins over
    /// both, value by value; without a hint the default looks along -Z at the bounds' centre.
    #[test]
    fn the_hint_wins_and_the_command_line_wins_over_it() {
        let bounds = Bounds {
            min: [0.0, 0.0, 0.0],
            max: [2.0, 4.0, 6.0],
        };
        let hint = Camera {
            eye: Vec3::new(1.0, 2.0, -10.0),
            look_at: Vec3::new(1.0, 2.0, 0.0),
            up: Vec3::Y,
            fov_y_deg: 30.0,
        };
        let none = CameraChoice {
            eye: None,
            look_at: None,
            up: None,
            fov: None,
        };
        assert_eq!(none.camera(&bounds, Some(hint), 64, 48), hint);
        assert_eq!(none.origin(true), "the scene's camera hint");
        let default = none.camera(&bounds, None, 64, 48);
        assert_eq!(default, Camera::framing(&bounds, DEFAULT_FOV_DEG, 64, 48));
        assert_eq!(default.look_at, Vec3::new(1.0, 2.0, 3.0));
        assert!(default.eye.z > 6.0 && default.eye.x == 1.0 && default.eye.y == 2.0);
        let fov = CameraChoice {
            fov: Some(50.0),
            ..none
        };
        let c = fov.camera(&bounds, Some(hint), 64, 48);
        assert_eq!(
            (c.eye, c.look_at, c.fov_y_deg),
            (hint.eye, hint.look_at, 50.0)
        );
        assert_eq!(
            fov.origin(true),
            "the command line over the scene's camera hint"
        );
        // Without a hint, --fov also sets how far back the default camera stands.
        assert_eq!(
            fov.camera(&bounds, None, 64, 48),
            Camera::framing(&bounds, 50.0, 64, 48)
        );
    }
}
