//! Writing the film: PNG (tone-mapped, sRGB, 8 bit) or OpenEXR (linear, 32-bit float), chosen
//! by the output path's extension, with the metadata that lets `gasworks merge` put crops of
//! a frame back together ([`ImageMeta`]).
//!
//! Where a crop (`render --pixelbounds x0,x1,y0,y1`) lies in its frame:
//! - OpenEXR: the standard windows, as pbrt writes them. The data window holds exactly the
//!   crop's pixels and starts at `(x0, y0)`; the display window is the whole frame,
//!   `(0, 0)` to `(width - 1, height - 1)`. Compositors (Nuke, OpenImageIO, exrdisplay) place
//!   the crop in the frame by themselves.
//! - PNG, which has no windows: `tEXt` chunks `gasworks.pixelbounds` (`x0,x1,y0,y1`) and
//!   `gasworks.full-size` (`WIDTHxHEIGHT`); the PNG itself is the crop's size.
//!
//! Both carry the settings that decide the pixels ([`render_key`]: scene file, size, samples,
//! depth, seed, camera, environment) in `gasworks.render` (an EXR string attribute, a PNG
//! `tEXt` chunk), so that merge refuses crops of different renders, and `Software`.
//! A whole render carries the same metadata with the whole frame as its window.

use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

use super::{Film, RenderSettings, Tile};
use crate::scene::{image_file, Scene};

/// The EXR attribute and PNG text keyword of the render settings ([`render_key`]).
pub const RENDER_KEY: &str = "gasworks.render";
/// The PNG text keyword of a crop's window, `x0,x1,y0,y1` (pbrt's `--pixelbounds` notation).
pub const PNG_PIXELBOUNDS_KEY: &str = "gasworks.pixelbounds";
/// The PNG text keyword of the whole frame's size, `WIDTHxHEIGHT`.
pub const PNG_FULL_SIZE_KEY: &str = "gasworks.full-size";

/// Where an image's pixels lie in their frame, and which render made them.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageMeta {
    /// The whole frame's size.
    pub full_width: u32,
    pub full_height: u32,
    /// The pixels the file holds, in pixels of the frame: the whole frame, or a crop.
    pub window: Tile,
    /// The settings that decide the pixels ([`render_key`]); empty when unknown.
    pub render: String,
    /// Exposure in stops (`--exposure`), applied when linear radiance is written as a PNG:
    /// radiance x 2^exposure, then the clamp and sRGB ([`to_srgb8_scaled`]). The PNG's render
    /// key then has an `exposure` item, so that crops of other exposures do not merge with
    /// it. An EXR holds radiance as rendered whatever this says.
    pub exposure: f32,
    /// The curve from exposed radiance to a PNG's [0, 1] (`--tonemap`): a PNG's render key
    /// has a `tonemap` item unless it is the default clamp. Ignored by an EXR, as `exposure`.
    pub tonemap: ToneCurve,
}

impl ImageMeta {
    /// A whole frame of `width` x `height`.
    pub fn whole(width: u32, height: u32, render: String) -> ImageMeta {
        ImageMeta {
            full_width: width,
            full_height: height,
            window: Tile {
                x: 0,
                y: 0,
                w: width,
                h: height,
            },
            render,
            exposure: 0.0,
            tonemap: ToneCurve::Clamp,
        }
    }
}

/// The settings that decide a render's pixels, as `name value` items joined by `"; "`: crops
/// of one frame have the same key. The scene is named by its file name (farm machines mount
/// it at different places), its triangle count `triangles` and its content hash `content`
/// (so that an edited scene is another render: [`crate::scene::content_hash`], computed once
/// by the caller, since it reads every byte of the scene; both the whole scene's where
/// `scene` holds only a rank's part of it). Backends, threads, schedules and tiles
/// are left out: they do not change a pixel. Floats are written shortest-exact, so equal keys
/// mean equal values.
pub fn render_key(
    scene_file: &Path,
    scene: &Scene,
    (content, triangles): (u64, usize),
    settings: &RenderSettings,
) -> String {
    let name = scene_file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let v = |v: glam::Vec3| format!("{:?},{:?},{:?}", v.x, v.y, v.z);
    let c = &settings.camera;
    let env = scene.environment_radiance();
    // The pixel filter is named only when it is not the box, so that box renders (all of
    // them before `--filter`) keep their keys, and their resume files and crops still match.
    let filter = match c.filter {
        crate::scene::PixelFilter::Box => String::new(),
        f => format!("; filter {}", f.name()),
    };
    // Likewise the lens: named only when it is not the pinhole.
    let lens = if c.lens.is_pinhole() {
        String::new()
    } else {
        format!(
            "; lens radius {:?} focus {:?}",
            c.lens.radius, c.lens.focus_distance
        )
    };
    // Likewise an environment map: its content hash and rotation (not its file name: the
    // same map under another name renders the same pixels).
    let env_map = match &scene.environment_map {
        None => String::new(),
        Some(m) => format!(
            "; environment map {}x{} content {:016x} rotate {:?}",
            m.width, m.height, m.content, m.rotation_deg
        ),
    };
    // And the map's share of the light samples, where the scene has area lights too (the
    // only case where it is chosen: `--env-share`).
    let env_share = match crate::scene::light_power::fixed_environment_share(scene) {
        Some(_) => String::new(),
        None => format!(
            "; environment-share {:?}",
            crate::scene::light_power::environment_share(scene)
        ),
    };
    ascii(&format!(
        "scene {name}; triangles {}; content {:016x}; size {}x{}; spp {}; max-depth {}; seed {}; camera eye {} u {} v {} w {}; environment {}; lights {}{filter}{lens}{env_map}{env_share}",
        triangles,
        content,
        settings.width,
        settings.height,
        settings.spp,
        settings.max_depth,
        settings.seed,
        v(c.eye),
        v(c.u),
        v(c.v),
        v(c.w),
        v(env),
        if scene.two_sided_lights {
            "two-sided"
        } else {
            "one-sided"
        },
    ))
}

/// The value an image's `spp` item starts with when a stop cut a pass: its tiles hold
/// different samples, so it is no crop of any render ([`crate::render::merge`] refuses it).
pub const SPP_STOPPED: &str = "stopped:";

/// The key of an image that holds fewer samples than its render asked for (a stop or a time
/// limit): `render_key` with its `spp` item's value replaced by `spp` ("16", or "stopped:
/// 16 everywhere, 16..32 in 1920 of 4096 pixels": [`SamplesHeld`]). The image then merges
/// only with crops of the same samples; the resume file keeps the render's own key.
pub fn key_with_spp(render_key: &str, spp: &str) -> String {
    render_key
        .split("; ")
        .map(|item| match item.split_once(' ') {
            Some(("spp", _)) => format!("spp {spp}"),
            _ => item.to_string(),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The key of an image that holds the first `held` samples per pixel of its render, every
/// pixel alike (the time limit, or a stop between passes): `spp 16 of 64`. Not `spp 16`: a
/// sample's random numbers depend on the render's samples per pixel (the sampler puts a
/// pixel's samples in one block of the sequence, [`crate::render::sampler::Sampler`]), so
/// these 16 samples are not those a render of 16 draws, and the image joins only crops that
/// stopped at 16 of 64 too.
pub fn key_with_spp_held(render_key: &str, held: u32) -> String {
    let planned = render_key
        .split("; ")
        .find_map(|item| item.strip_prefix("spp "))
        .unwrap_or("?")
        .to_string();
    key_with_spp(render_key, &format!("{held} of {planned}"))
}

/// Whether a key is that of an image a stop cut in the middle of a pass ([`SPP_STOPPED`]).
pub fn stopped_mid_pass(render_key: &str) -> bool {
    render_key
        .split("; ")
        .any(|item| item.starts_with(&format!("spp {SPP_STOPPED}")))
}

/// How many samples a film's pixels hold, against the render's: what the render key of an
/// image written from it says. `render` (an image a stop or the time limit cut short) and
/// `preview` (a resume file's film) both take the key from here, so a preview is the
/// stopped image to the byte, key included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplesHeld {
    /// What every pixel holds (the complete passes).
    pub everywhere: u32,
    /// The most any pixel holds (the end of the pass that was cut, in its finished tiles).
    pub most: u32,
    /// How many pixels hold more than `everywhere`, of how many.
    pub ahead: usize,
    pub pixels: usize,
    /// The render's samples per pixel, from its key (`None` where the key has none).
    pub planned: Option<u32>,
    /// Adaptive sampling (the key has a `noise-threshold` item): `everywhere` is the pass
    /// boundary, which the pixels of the blocks that had stopped below the threshold do not
    /// reach.
    pub adaptive: bool,
}

impl SamplesHeld {
    /// The counts of `film`'s pixels, against the `spp` item of `render_key`. Counts are
    /// whole numbers of samples, exact in the film's f32 (at most 2^24); counted from the
    /// pixels rather than the tiles a stopped pass finished, since tiles depend on the layout
    /// (and a resumed pass's layout is another) while the pixels' samples do not.
    ///
    /// `spp_done` is the pass boundary the film was stopped at; it counts only with adaptive
    /// sampling, where some pixels hold fewer (without, the fewest any pixel holds is the
    /// boundary, or the next one where every tile of a cut pass had arrived).
    pub fn of(film: &Film, render_key: &str, spp_done: u32) -> SamplesHeld {
        let adaptive = render_key
            .split("; ")
            .any(|item| item.starts_with("noise-threshold "));
        let counts = film.pixels.iter().map(|p| p[3] as u32);
        let everywhere = if adaptive {
            spp_done
        } else {
            counts.clone().min().unwrap_or(0)
        };
        SamplesHeld {
            everywhere,
            most: counts.clone().max().unwrap_or(everywhere).max(everywhere),
            ahead: counts.filter(|&n| n > everywhere).count(),
            pixels: film.pixels.len(),
            planned: render_key
                .split("; ")
                .find_map(|item| item.strip_prefix("spp ")?.parse().ok()),
            adaptive,
        }
    }

    /// The image's render key: the render's own when every pixel has every sample; `spp 16
    /// of 64` when every pixel has the same ([`key_with_spp_held`]); `spp stopped: 16
    /// everywhere, 16..32 in 1920 of 4096 pixels` otherwise ([`SPP_STOPPED`]), which merges
    /// with nothing. So `merge` joins an image only with crops that hold the same samples.
    pub fn image_key(&self, render_key: &str) -> String {
        if self.ahead > 0 {
            key_with_spp(
                render_key,
                &format!(
                    "{SPP_STOPPED} {} everywhere, {}..{} in {} of {} pixels",
                    self.everywhere, self.everywhere, self.most, self.ahead, self.pixels
                ),
            )
        } else if Some(self.everywhere) == self.planned {
            render_key.to_string()
        } else {
            key_with_spp_held(render_key, self.everywhere)
        }
    }

    /// For a summary line: "16 of 64 samples per pixel everywhere, and 32 in 1920 of 4096
    /// pixels".
    pub fn describe(&self) -> String {
        let planned = self
            .planned
            .map_or_else(|| "?".to_string(), |n| n.to_string());
        let mut s = format!(
            "{} of {planned} samples per pixel {}",
            self.everywhere,
            if self.adaptive {
                "where blocks went on sampling, at most that where they had met the noise threshold"
            } else {
                "everywhere"
            }
        );
        if self.ahead > 0 {
            s.push_str(&format!(
                ", and {} in {} of {} pixels",
                self.most, self.ahead, self.pixels
            ));
        }
        s
    }
}

/// The `name value` items on which two render keys differ, as (item of `a`, item of `b`):
/// matched by name, so that a key with an item the other lacks (written by another gasworks
/// version) names that item, "(not set)" on the side without it. Empty when the keys are equal.
pub fn render_key_differences(a: &str, b: &str) -> Vec<(String, String)> {
    if a == b {
        return Vec::new();
    }
    let items = |key: &str| -> Vec<(String, String)> {
        key.split("; ")
            .filter(|item| !item.is_empty())
            .map(|item| (key_item_name(item).to_string(), item.to_string()))
            .collect()
    };
    let (ia, ib) = (items(a), items(b));
    let find = |items: &[(String, String)], name: &str| -> Option<String> {
        items
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, i)| i.clone())
    };
    let nothing = || "(not set)".to_string();
    let mut differ = Vec::new();
    for (name, item) in &ia {
        match find(&ib, name) {
            Some(other) if other == *item => {}
            other => differ.push((item.clone(), other.unwrap_or_else(nothing))),
        }
    }
    for (name, item) in &ib {
        if find(&ia, name).is_none() {
            differ.push((nothing(), item.clone()));
        }
    }
    if differ.is_empty() {
        // The same items in another order, or repeated: show the keys whole.
        differ.push((a.to_string(), b.to_string()));
    }
    differ
}

/// The name of a render key's item: its first word, but the first two of `environment map
/// ...`, whose first word is also the name of the uniform `environment R,G,B` (every key has
/// that item; a key under a map has both, and matched by the first word alone the map's
/// item was compared with the other key's uniform environment and reported as differing).
fn key_item_name(item: &str) -> &str {
    const TWO_WORDS: [&str; 1] = ["environment map"];
    TWO_WORDS
        .into_iter()
        .find(|name| item == *name || item.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| item.split(' ').next().unwrap_or(""))
}

/// EXR text and PNG `tEXt` hold Latin-1: other characters are written as `\u{..}`.
fn ascii(s: &str) -> String {
    s.chars()
        .map(|c| {
            if (' '..='~').contains(&c) {
                c.to_string()
            } else {
                format!("\\u{{{:x}}}", c as u32)
            }
        })
        .collect()
}

/// What wrote the file.
pub fn software() -> String {
    format!(
        "gasworks {} ({})",
        env!("CARGO_PKG_VERSION"),
        crate::GIT_COMMIT
    )
}

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{path}: unknown image format (use .png for a tone-mapped image, .webp for the same pixels lossless in about a third fewer bytes, or .exr for linear radiance)")]
    UnknownFormat { path: PathBuf },
    /// WebP carries no crop window (gasworks writes it for viewing and for committing), so a
    /// crop written as WebP could never be merged.
    #[error("{path}: a crop ({w}x{h} at {x},{y} of a {full_width}x{full_height} frame) cannot be written as WebP, which carries no crop window for `gasworks merge`: write it as .png or .exr, and make the WebP from the merged frame")]
    WebpCrop {
        path: PathBuf,
        x: u32,
        y: u32,
        w: u32,
        h: u32,
        full_width: u32,
        full_height: u32,
    },
    #[error("{path}: cannot write the image: {reason}")]
    Write { path: PathBuf, reason: String },
    #[error("{path}: cannot write the image: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The image could not be written where asked, but the render was kept elsewhere.
    #[error("{failed}; the render is saved as {} instead (linear EXR: convert it, or rename it if you asked for .exr)", rescued.display())]
    Rescued {
        failed: Box<OutputError>,
        rescued: PathBuf,
    },
}

/// The formats gasworks writes: PNG and EXR, which it also reads back (their metadata says
/// where a crop lies and what rendered it), and WebP, written only: PNG's pixels, lossless, in
/// about a third fewer bytes on path-traced images, for viewing and for committing renders (the
/// GPU protocol's images travel with every later device call, whose carry is capped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    Png,
    Exr,
    Webp,
}

impl std::fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ImageFormat::Png => "PNG",
            ImageFormat::Exr => "EXR",
            ImageFormat::Webp => "WebP",
        })
    }
}

impl ImageFormat {
    pub fn from_path(path: &Path) -> Result<ImageFormat, OutputError> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase())
            .as_deref()
        {
            Some("png") => Ok(ImageFormat::Png),
            Some("exr") => Ok(ImageFormat::Exr),
            Some("webp") => Ok(ImageFormat::Webp),
            _ => Err(OutputError::UnknownFormat {
                path: path.to_path_buf(),
            }),
        }
    }
}

/// Checks, before a long render, that the output path has a known format and that its folder
/// exists and can be written, so that a render is never lost at the very end.
pub fn check_writable(path: &Path) -> Result<ImageFormat, OutputError> {
    let is_dir = |why: &str| OutputError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::IsADirectory, why.to_string()),
    };
    // Before the extension: "x.png/" has one, and a folder named "renders" has none.
    if path.is_dir() {
        return Err(is_dir("is a folder; give a file name"));
    }
    if path
        .as_os_str()
        .to_string_lossy()
        .ends_with(std::path::MAIN_SEPARATOR)
    {
        return Err(is_dir(
            "names a folder (it ends in a separator); give a file name",
        ));
    }
    let format = ImageFormat::from_path(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(OutputError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("the folder {} does not exist", dir.display()),
            ),
        });
    }
    let probe = dir.join(format!(".gasworks-write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|source| OutputError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(format)
}

/// The sRGB transfer function of a linear value in [0, 1].
#[inline]
pub fn linear_to_srgb(x: f32) -> f32 {
    if x <= 0.003_130_8 {
        12.92 * x
    } else {
        1.055 * x.powf(1.0 / 2.4) - 0.055
    }
}

/// The curve that takes exposed linear radiance to the [0, 1] that a PNG (or WebP) encodes in
/// sRGB (`--tonemap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToneCurve {
    /// The radiance as it is, clamped to [0, 1]: exact up to 1 (a furnace-white object is
    /// exactly white); everything brighter is white, so highlights clip flat.
    #[default]
    Clamp,
    /// The ACES filmic look: the reference rendering and sRGB output transforms of the
    /// Academy Color Encoding System, as Stephen Hill's fit of them (a 3x3 matrix into the
    /// transforms' working space with their saturation step, a rational curve per channel,
    /// a 3x3 matrix back). A toe (radiance below 0.0032 is black) and a shoulder:
    /// highlights roll off towards white (reached at 25.7) and keep their gradients, and
    /// bright saturated colours desaturate as on film instead of clipping to a hue; mid grey
    /// 0.18 shows at 0.106 (about a stop darker than the clamp), so such images often want
    /// `--exposure 1`.
    Aces,
}

impl ToneCurve {
    /// The name `--tonemap` takes and a PNG's render key records.
    pub fn name(self) -> &'static str {
        match self {
            ToneCurve::Clamp => "clamp",
            ToneCurve::Aces => "aces",
        }
    }

    /// Exposed linear radiance to display-linear values in [0, 1] (before the sRGB
    /// encoding). A channel that is not a finite non-negative number counts as 0 (as the
    /// clamp always showed NaN and infinities: black).
    pub fn apply(self, rgb: [f32; 3]) -> [f32; 3] {
        let rgb = rgb.map(|c| if c.is_finite() { c.max(0.0) } else { 0.0 });
        match self {
            ToneCurve::Clamp => rgb.map(|c| c.min(1.0)),
            ToneCurve::Aces => aces_fitted(rgb),
        }
    }
}

/// sRGB-primaries radiance into the ACES transforms' working space (AP1), with the
/// reference rendering transform's saturation step folded in. Rows sum to 1: greys stay grey.
const ACES_INPUT: [[f64; 3]; 3] = [
    [0.597_19, 0.354_58, 0.048_23],
    [0.076_00, 0.908_34, 0.015_66],
    [0.028_40, 0.133_83, 0.837_77],
];

/// Back to sRGB primaries, with the output transform's saturation step. Rows sum to 1.
const ACES_OUTPUT: [[f64; 3]; 3] = [
    [1.604_75, -0.531_08, -0.073_67],
    [-0.102_08, 1.108_13, -0.006_05],
    [-0.003_27, -0.072_76, 1.076_02],
];

/// [`ToneCurve::Aces`] of finite non-negative radiance, in f64 so that no radiance a float
/// holds overflows the curve's squares.
fn aces_fitted(rgb: [f32; 3]) -> [f32; 3] {
    let times =
        |m: &[[f64; 3]; 3], v: [f64; 3]| m.map(|row| row[0] * v[0] + row[1] * v[1] + row[2] * v[2]);
    // The transforms' tone curve, fitted (Hill): rational, 0 at 0 (to 4e-4), 1 at 25.7,
    // tending to 1.0165.
    let curve = |v: f64| {
        (v * (v + 0.024_578_6) - 0.000_090_537) / (v * (0.983_729 * v + 0.432_951) + 0.238_081)
    };
    let v = times(&ACES_INPUT, rgb.map(f64::from)).map(curve);
    times(&ACES_OUTPUT, v).map(|c| c.clamp(0.0, 1.0) as f32)
}

/// Checks `--tonemap` for an output at `path`: the clamp, unless the output is a PNG or WebP
/// (an EXR holds linear radiance as rendered).
pub fn check_tonemap(tonemap: ToneCurve, path: &Path) -> Result<(), String> {
    if tonemap != ToneCurve::Clamp && ImageFormat::from_path(path).ok() == Some(ImageFormat::Exr) {
        return Err(format!(
            "--tonemap {} sets a PNG's tone mapping, and {} holds linear radiance as rendered: tone-map it in its viewer, or write a .png",
            tonemap.name(),
            path.display()
        ));
    }
    Ok(())
}

/// Checks `--exposure EV` for an output at `path`: a finite number of stops within +-64, and
/// 0 unless the output is a PNG (an EXR holds linear radiance as rendered).
pub fn check_exposure(exposure: f32, path: &Path) -> Result<(), String> {
    if !exposure.is_finite() || exposure.abs() > 64.0 {
        return Err(format!(
            "--exposure {exposure}: give a number of stops between -64 and 64"
        ));
    }
    if exposure != 0.0 && ImageFormat::from_path(path).ok() == Some(ImageFormat::Exr) {
        return Err(format!(
            "--exposure sets a PNG's tone mapping, and {} holds linear radiance as rendered: apply the exposure in its viewer, or write a .png",
            path.display()
        ));
    }
    Ok(())
}

/// Tone mapping for PNG: exposure 1, then a clamp to [0, 1] (radiance above 1 saturates, so a
/// furnace-white object is exactly white), then sRGB encoding.
pub fn to_srgb8(rgb: [f32; 3]) -> [u8; 3] {
    to_srgb8_scaled(rgb, 1.0)
}

/// [`to_srgb8`] of radiance times `scale` (`2^exposure`; 1 leaves every value as it is).
pub fn to_srgb8_scaled(rgb: [f32; 3], scale: f32) -> [u8; 3] {
    to_srgb8_toned(rgb, scale, ToneCurve::Clamp)
}

/// A PNG's pixel: radiance times `scale` (`2^exposure`), through `curve`, sRGB-encoded.
pub fn to_srgb8_toned(rgb: [f32; 3], scale: f32, curve: ToneCurve) -> [u8; 3] {
    curve
        .apply(rgb.map(|c| c * scale))
        .map(|c| (linear_to_srgb(c) * 255.0 + 0.5) as u8)
}

/// Writes the film's mean radiance to `path`, in the format its extension names, with `meta`
/// (whose window must be the film's size).
pub fn write_image(film: &Film, path: &Path, meta: &ImageMeta) -> Result<(), OutputError> {
    assert_eq!(
        (meta.window.w, meta.window.h),
        (film.width, film.height),
        "the metadata's window is the film's size"
    );
    write_pixels(&film.mean(), path, meta)
}

/// Writes linear radiance (`meta.window.w * meta.window.h` pixels, row-major), tone-mapped for
/// PNG, as-is for EXR. The image is written to a temporary file beside `path` and renamed over
/// it once complete, so a process killed while writing never leaves a partial image under the
/// real name.
pub fn write_pixels(rgb: &[[f32; 3]], path: &Path, meta: &ImageMeta) -> Result<(), OutputError> {
    assert_eq!(rgb.len(), meta.window.pixel_count(), "pixel count");
    let format = ImageFormat::from_path(path)?;
    remove_stale_partials(path);
    let tmp = partial_path(path);
    let written = match format {
        ImageFormat::Png | ImageFormat::Webp
            if meta.exposure != 0.0 || meta.tonemap != ToneCurve::Clamp =>
        {
            let scale = meta.exposure.exp2();
            let bytes: Vec<[u8; 3]> = rgb
                .iter()
                .map(|&p| to_srgb8_toned(p, scale, meta.tonemap))
                .collect();
            let mut toned = meta.clone();
            let mut items: Vec<String> = Vec::new();
            if !meta.render.is_empty() {
                items.push(meta.render.clone());
            }
            if meta.exposure != 0.0 {
                items.push(format!("exposure {}", meta.exposure));
            }
            if meta.tonemap != ToneCurve::Clamp {
                items.push(format!("tonemap {}", meta.tonemap.name()));
            }
            toned.render = items.join("; ");
            write_srgb8(format, &bytes, &tmp, &toned)
        }
        ImageFormat::Png | ImageFormat::Webp => {
            let bytes: Vec<[u8; 3]> = rgb.iter().map(|&p| to_srgb8(p)).collect();
            write_srgb8(format, &bytes, &tmp, meta)
        }
        ImageFormat::Exr => write_exr(rgb, &tmp, meta),
    }
    .and_then(|()| {
        std::fs::rename(&tmp, path).map_err(|source| OutputError::Io {
            path: path.to_path_buf(),
            source,
        })
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    // Name the file the user asked for, not the temporary one.
    written.map_err(|e| match e {
        OutputError::Write { reason, .. } => OutputError::Write {
            path: path.to_path_buf(),
            reason,
        },
        OutputError::Io { source, .. } => OutputError::Io {
            path: path.to_path_buf(),
            source,
        },
        OutputError::WebpCrop {
            x,
            y,
            w,
            h,
            full_width,
            full_height,
            ..
        } => OutputError::WebpCrop {
            path: path.to_path_buf(),
            x,
            y,
            w,
            h,
            full_width,
            full_height,
        },
        e => e,
    })
}

/// [`write_image`], and when that fails (the folder removed or the disk full during a long
/// render), the same pixels as a linear EXR in `rescue_dir`, so that the render is not lost:
/// the error is then [`OutputError::Rescued`], naming both files. When the rescue fails too, the
/// first error is returned.
pub fn write_image_or_rescue(
    film: &Film,
    path: &Path,
    meta: &ImageMeta,
    rescue_dir: &Path,
) -> Result<(), OutputError> {
    let failed = match write_image(film, path, meta) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let stem = path
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "image".into());
    let rescued = rescue_dir.join(format!(
        "gasworks-rescued-{stem}-{}.exr",
        std::process::id()
    ));
    match write_image(film, &rescued, meta) {
        Ok(()) => Err(OutputError::Rescued {
            failed: Box::new(failed),
            rescued,
        }),
        Err(_) => Err(failed),
    }
}

/// `DIR/.NAME.partial-PID` for `DIR/NAME`: in the same folder, so the rename is atomic. Images
/// and resume files are both written there first, then renamed over their real names.
pub(crate) fn partial_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "image".into());
    path.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

/// A temporary file of [`partial_path`] untouched this long, whose process is gone, was left by
/// a process killed while writing (a batch system's `SIGKILL` at a time limit, during a
/// checkpoint): nothing writes one for nearly this long.
const STALE_PARTIAL_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// Removes the temporary files of [`partial_path`] for `path` that processes killed while
/// writing left behind, so that renders stopped that way again and again (each resumed, each
/// killed at a checkpoint) do not pile up hidden copies of a film beside their image. A file
/// goes only when its process id is not running here and it has not been written to for
/// [`STALE_PARTIAL_AGE`]: on a shared file system the id may be another machine's process,
/// which would be writing to it. Linux only (it reads `/proc`); best effort, errors ignored.
pub(crate) fn remove_stale_partials(path: &Path) {
    #[cfg(target_os = "linux")]
    {
        let Some(name) = path.file_name() else {
            return;
        };
        let prefix = format!(".{}.partial-", name.to_string_lossy());
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            let Some(pid) = file_name
                .to_str()
                .and_then(|f| f.strip_prefix(&prefix))
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            let running = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
            let untouched = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= STALE_PARTIAL_AGE);
            if !running && untouched {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = path;
}

fn write_failed(path: &Path) -> impl Fn(&dyn std::fmt::Display) -> OutputError + '_ {
    move |e| OutputError::Write {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// Writes 8-bit sRGB pixels as a PNG or a WebP (`format`; an EXR holds linear radiance and is
/// not written from these).
pub fn write_srgb8(
    format: ImageFormat,
    srgb: &[[u8; 3]],
    path: &Path,
    meta: &ImageMeta,
) -> Result<(), OutputError> {
    match format {
        ImageFormat::Png => write_png(srgb, path, meta),
        ImageFormat::Webp => write_webp(srgb, path, meta),
        ImageFormat::Exr => Err(OutputError::Write {
            path: path.to_path_buf(),
            reason: "8-bit sRGB pixels are not written as EXR (linear radiance)".into(),
        }),
    }
}

/// The most pixels a side a WebP holds (its header's 14-bit sizes).
pub const WEBP_MAX_SIDE: u32 = 16383;

/// Refuses, before a render spends its time, what a WebP output cannot hold: a crop (`window`
/// short of the whole `full_width` x `full_height` frame: WebP cannot say where it lies), or
/// a frame past [`WEBP_MAX_SIDE`]. Any other format: nothing to refuse here.
pub fn check_window_fits_format(
    path: &Path,
    window: Tile,
    full_width: u32,
    full_height: u32,
) -> Result<(), OutputError> {
    if ImageFormat::from_path(path)? != ImageFormat::Webp {
        return Ok(());
    }
    check_webp_window(path, window, full_width, full_height)
}

/// [`check_window_fits_format`] for a file known to be a WebP (whatever its name: the writer
/// writes a temporary file beside it).
fn check_webp_window(
    path: &Path,
    window: Tile,
    full_width: u32,
    full_height: u32,
) -> Result<(), OutputError> {
    if full_width > WEBP_MAX_SIDE || full_height > WEBP_MAX_SIDE {
        return Err(OutputError::Write {
            path: path.to_path_buf(),
            reason: format!(
                "a {full_width}x{full_height} frame is past WebP's {WEBP_MAX_SIDE} pixels a side: write .png or .exr"
            ),
        });
    }
    let whole = (window.x, window.y, window.w, window.h) == (0, 0, full_width, full_height);
    if whole {
        return Ok(());
    }
    Err(OutputError::WebpCrop {
        path: path.to_path_buf(),
        x: window.x,
        y: window.y,
        w: window.w,
        h: window.h,
        full_width,
        full_height,
    })
}

/// Writes 8-bit sRGB pixels of a whole frame as a lossless WebP, through libwebp (the `webp`
/// crate): its lossless mode takes about a third fewer bytes than PNG on renders (measured in
/// docs/guide/output-and-layers.md), where the `image` crate's own WebP encoder saves far less.
/// It carries none of gasworks' metadata, so a crop is refused
/// ([`OutputError::WebpCrop`]): it could never be merged.
pub fn write_webp(srgb: &[[u8; 3]], path: &Path, meta: &ImageMeta) -> Result<(), OutputError> {
    assert_eq!(srgb.len(), meta.window.pixel_count(), "pixel count");
    check_webp_window(path, meta.window, meta.full_width, meta.full_height)?;
    let fail = write_failed(path);
    let mut config = webp::WebPConfig::new().map_err(|()| fail(&"libwebp refused its defaults"))?;
    config.lossless = 1;
    // libwebp's default effort (quality 75, method 4): nearly as small as its slowest (100, 6),
    // in a small fraction of the time (figures: docs/guide/output-and-layers.md).
    let w = meta.window;
    let encoded = webp::Encoder::from_rgb(bytemuck::cast_slice(srgb), w.w, w.h)
        .encode_advanced(&config)
        .map_err(|e| fail(&format!("libwebp: {e:?}")))?;
    std::fs::write(path, &*encoded).map_err(|source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes 8-bit sRGB pixels as a PNG with gasworks' text chunks.
pub fn write_png(srgb: &[[u8; 3]], path: &Path, meta: &ImageMeta) -> Result<(), OutputError> {
    assert_eq!(srgb.len(), meta.window.pixel_count(), "pixel count");
    let fail = write_failed(path);
    let file = std::fs::File::create(path).map_err(|source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut encoder = png::Encoder::new(BufWriter::new(file), meta.window.w, meta.window.h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let w = meta.window;
    let texts = [
        ("Software", software()),
        (
            PNG_PIXELBOUNDS_KEY,
            format!("{},{},{},{}", w.x, w.x + w.w, w.y, w.y + w.h),
        ),
        (
            PNG_FULL_SIZE_KEY,
            format!("{}x{}", meta.full_width, meta.full_height),
        ),
        (RENDER_KEY, ascii(&meta.render)),
    ];
    for (key, text) in texts {
        encoder
            .add_text_chunk(key.to_string(), text)
            .map_err(|e| fail(&e))?;
    }
    let mut writer = encoder.write_header().map_err(|e| fail(&e))?;
    writer
        .write_image_data(bytemuck::cast_slice(srgb))
        .map_err(|e| fail(&e))?;
    writer.finish().map_err(|e| fail(&e))
}

/// Writes linear RGB as a 32-bit float OpenEXR (ZIP, scanlines) whose data window is
/// `meta.window` inside the display window of the whole frame.
pub fn write_exr(rgb: &[[f32; 3]], path: &Path, meta: &ImageMeta) -> Result<(), OutputError> {
    use exr::prelude::*;
    assert_eq!(rgb.len(), meta.window.pixel_count(), "pixel count");
    let fail = write_failed(path);
    let w = meta.window;
    let to_i32 = |v: u32| {
        i32::try_from(v).map_err(|_| OutputError::Write {
            path: path.to_path_buf(),
            reason: format!("{v} is beyond OpenEXR's coordinates"),
        })
    };
    let mut layer_attributes = LayerAttributes {
        layer_position: Vec2(to_i32(w.x)?, to_i32(w.y)?),
        software_name: Text::new_or_none(ascii(&software())),
        ..LayerAttributes::default()
    };
    // A header attribute of the (only) layer: the exr crate reads unknown attributes back as
    // layer attributes.
    if let Some(text) = Text::new_or_none(ascii(&meta.render)) {
        layer_attributes
            .other
            .insert(Text::from(RENDER_KEY), AttributeValue::Text(text));
    }
    let width = w.w as usize;
    // Blocks in increasing order: the same film always gives the same file, however the
    // blocks' parallel compression finishes.
    let encoding = Encoding {
        line_order: LineOrder::Increasing,
        ..Encoding::SMALL_LOSSLESS
    };
    let layer = Layer::new(
        (width, w.h as usize),
        layer_attributes,
        encoding,
        SpecificChannels::rgb(|p: Vec2<usize>| {
            let [r, g, b] = rgb[p.y() * width + p.x()];
            (r, g, b)
        }),
    );
    let display =
        IntegerBounds::from_dimensions((meta.full_width as usize, meta.full_height as usize));
    let image = Image::new(ImageAttributes::new(display), layer);
    image.write().to_file(path).map_err(|e| fail(&e))
}

/// An image read back with its metadata ([`read_image`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ReadImage {
    pub format: ImageFormat,
    pub meta: ImageMeta,
    pub pixels: Pixels,
}

/// The pixels of an image file, row-major, `meta.window`'s size.
#[derive(Clone, Debug, PartialEq)]
pub enum Pixels {
    /// Linear radiance (EXR).
    Linear(Vec<[f32; 3]>),
    /// Tone-mapped sRGB (PNG).
    Srgb8(Vec<[u8; 3]>),
}

/// Why an image cannot be read back as gasworks wrote it.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Format(#[from] OutputError),
    #[error("{path}: cannot read the image: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("{path}: no {what} (a PNG written by `gasworks render` carries it in a tEXt chunk)")]
    MissingPngText { path: PathBuf, what: &'static str },
    #[error("{path}: {reason}")]
    BadMetadata { path: PathBuf, reason: String },
}

/// Reads an image gasworks wrote (or any RGB OpenEXR: its data and display windows say where
/// it lies; any 8-bit RGB PNG with gasworks' text chunks).
pub fn read_image(path: &Path) -> Result<ReadImage, ReadError> {
    let image = match ImageFormat::from_path(path)? {
        ImageFormat::Exr => read_exr(path)?,
        ImageFormat::Png => read_png(path)?,
        ImageFormat::Webp => {
            return Err(ReadError::Read {
                path: path.to_path_buf(),
                reason: "gasworks writes WebP for viewing and reads back only PNG and EXR \
                         (a WebP carries no crop window or render settings)"
                    .into(),
            })
        }
    };
    check_frame(path, &image.meta)?;
    Ok(image)
}

/// The frame a file says it belongs to must be one gasworks can render (at most
/// [`crate::render::MAX_IMAGE_SIDE`] a side), and the file's window must lie inside it:
/// `merge` places pixels by these numbers, which come from the file.
fn check_frame(path: &Path, meta: &ImageMeta) -> Result<(), ReadError> {
    let max = crate::render::MAX_IMAGE_SIDE;
    let (fw, fh) = (meta.full_width, meta.full_height);
    if fw == 0 || fh == 0 || fw > max || fh > max {
        return Err(bad_meta(
            path,
            format!("the frame is {fw}x{fh} pixels; gasworks renders 1 to {max} a side"),
        ));
    }
    let t = meta.window;
    let inside = |o: u32, len: u32, full: u32| u64::from(o) + u64::from(len) <= u64::from(full);
    if !inside(t.x, t.w, fw) || !inside(t.y, t.h, fh) {
        return Err(bad_meta(
            path,
            format!(
                "the crop ({}x{} at {},{}) is not inside its frame ({fw}x{fh})",
                t.w, t.h, t.x, t.y
            ),
        ));
    }
    Ok(())
}

fn read_failed(path: &Path) -> impl Fn(&dyn std::fmt::Display) -> ReadError + '_ {
    move |e| ReadError::Read {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

fn bad_meta(path: &Path, reason: String) -> ReadError {
    ReadError::BadMetadata {
        path: path.to_path_buf(),
        reason,
    }
}

/// Refuses an EXR whose headers claim more pixels than gasworks renders, or than its bytes
/// can hold ([`image_file::EXPANSION_LIMIT`]): the reader allocates by these numbers.
fn check_exr_size(path: &Path) -> Result<(), ReadError> {
    let file_bytes = std::fs::metadata(path)
        .map_err(|e| read_failed(path)(&e))?
        .len();
    let meta =
        exr::meta::MetaData::read_from_file(path, false).map_err(|e| read_failed(path)(&e))?;
    let max = crate::render::MAX_IMAGE_SIDE as usize;
    for header in meta.headers.iter().filter(|h| !h.deep) {
        let (w, h) = (header.layer_size.width(), header.layer_size.height());
        if w > max || h > max {
            return Err(bad_meta(
                path,
                format!("the data window is {w}x{h} pixels; gasworks renders at most {max} a side"),
            ));
        }
        // As gasworks holds them (f32 RGB), or as the file's channels decode (the largest
        // level, the one read).
        let pixel_bytes = (header.channels.bytes_per_pixel as u64).max(12);
        if let Some(why) = image_file::outgrows(w as u64, h as u64, pixel_bytes, file_bytes) {
            return Err(bad_meta(path, format!("data window: {why}")));
        }
    }
    Ok(())
}

fn read_exr(path: &Path) -> Result<ReadImage, ReadError> {
    use exr::prelude::{read, AttributeValue, ReadChannels, ReadLayers, Text, Vec2};
    check_exr_size(path)?;
    let image = read()
        .no_deep_data()
        .largest_resolution_level()
        .rgb_channels(
            |size: Vec2<usize>, _| (size.width(), vec![[0f32; 3]; size.area()]),
            |(width, pixels): &mut (usize, Vec<[f32; 3]>),
             p: Vec2<usize>,
             (r, g, b): (f32, f32, f32)| {
                pixels[p.y() * *width + p.x()] = [r, g, b];
            },
        )
        .first_valid_layer()
        .all_attributes()
        .from_file(path)
        .map_err(|e| read_failed(path)(&e))?;
    let display = image.attributes.display_window;
    let layer = image.layer_data;
    let offset = layer.attributes.layer_position - display.position;
    let (w, h) = (layer.size.width(), layer.size.height());
    let (fw, fh) = (display.size.width(), display.size.height());
    let fits = |o: i32, len: usize, full: usize| o >= 0 && o as usize + len <= full;
    if !fits(offset.x(), w, fw) || !fits(offset.y(), h, fh) {
        return Err(bad_meta(
            path,
            format!(
                "the data window ({w}x{h} at {},{}) is not inside the display window ({fw}x{fh})",
                offset.x(),
                offset.y()
            ),
        ));
    }
    let u = |v: usize| u32::try_from(v).map_err(|_| bad_meta(path, "image too large".into()));
    let render = match layer.attributes.other.get(&Text::from(RENDER_KEY)) {
        Some(AttributeValue::Text(t)) => t.to_string(),
        _ => String::new(),
    };
    Ok(ReadImage {
        format: ImageFormat::Exr,
        meta: ImageMeta {
            full_width: u(fw)?,
            full_height: u(fh)?,
            window: Tile {
                x: offset.x() as u32,
                y: offset.y() as u32,
                w: u(w)?,
                h: u(h)?,
            },
            render,
            exposure: 0.0,
            tonemap: ToneCurve::Clamp,
        },
        pixels: Pixels::Linear(layer.channel_data.pixels.1),
    })
}

/// A PNG decoder past the file's header. The decoder's own limit (64 MiB by default) would
/// refuse a big crop; this one grows with the file ([`image_file::allowance`]).
fn open_png(path: &Path) -> Result<png::Reader<BufReader<std::fs::File>>, ReadError> {
    let fail = read_failed(path);
    let file = std::fs::File::open(path).map_err(|e| fail(&e))?;
    let file_bytes = file.metadata().map_err(|e| fail(&e))?.len();
    let limits = png::Limits {
        bytes: usize::try_from(image_file::allowance(file_bytes)).unwrap_or(usize::MAX),
    };
    png::Decoder::new_with_limits(BufReader::new(file), limits)
        .read_info()
        .map_err(|e| fail(&e))
}

fn read_png(path: &Path) -> Result<ReadImage, ReadError> {
    let fail = read_failed(path);
    let mut reader = open_png(path)?;
    let (color, depth) = reader.output_color_type();
    if color != png::ColorType::Rgb || depth != png::BitDepth::Eight {
        return Err(bad_meta(
            path,
            format!("expected 8-bit RGB as gasworks writes, found {color:?} {depth:?}"),
        ));
    }
    let text = |key: &str| {
        reader
            .info()
            .uncompressed_latin1_text
            .iter()
            .find(|c| c.keyword == key)
            .map(|c| c.text.clone())
    };
    let (bounds, full, render) = (
        text(PNG_PIXELBOUNDS_KEY),
        text(PNG_FULL_SIZE_KEY),
        text(RENDER_KEY).unwrap_or_default(),
    );
    let bounds = bounds.ok_or_else(|| ReadError::MissingPngText {
        path: path.to_path_buf(),
        what: "crop window (gasworks.pixelbounds)",
    })?;
    let full = full.ok_or_else(|| ReadError::MissingPngText {
        path: path.to_path_buf(),
        what: "frame size (gasworks.full-size)",
    })?;
    let window = parse_pixelbounds(&bounds)
        .map_err(|e| bad_meta(path, format!("gasworks.pixelbounds {bounds:?}: {e}")))?;
    let (full_width, full_height) = full
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .ok_or_else(|| {
            bad_meta(
                path,
                format!("gasworks.full-size {full:?} is not WIDTHxHEIGHT"),
            )
        })?;
    let info = reader.info();
    if (info.width, info.height) != (window.w, window.h) {
        return Err(bad_meta(
            path,
            format!(
                "the image is {}x{} but gasworks.pixelbounds {bounds} says {}x{}",
                info.width, info.height, window.w, window.h
            ),
        ));
    }
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| bad_meta(path, "image too large".into()))?;
    let mut buf = vec![0u8; size];
    reader.next_frame(&mut buf).map_err(|e| fail(&e))?;
    let pixels = buf
        .chunks_exact(3)
        .take(window.pixel_count())
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    Ok(ReadImage {
        format: ImageFormat::Png,
        meta: ImageMeta {
            full_width,
            full_height,
            window,
            render,
            exposure: 0.0,
            tonemap: ToneCurve::Clamp,
        },
        pixels: Pixels::Srgb8(pixels),
    })
}

/// Parses pbrt's `x0,x1,y0,y1` (half-open pixel ranges `[x0, x1) x [y0, y1)`) into a tile.
pub fn parse_pixelbounds(s: &str) -> Result<Tile, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let [x0, x1, y0, y1] = parts.as_slice() else {
        return Err(format!(
            "expected four comma-separated pixel coordinates x0,x1,y0,y1 (as pbrt's --pixelbounds), got {s:?}"
        ));
    };
    let num = |p: &str| {
        p.parse::<u32>()
            .map_err(|_| format!("{p:?} is not a whole number of pixels"))
    };
    let (x0, x1, y0, y1) = (num(x0)?, num(x1)?, num(y0)?, num(y1)?);
    if x0 >= x1 || y0 >= y1 {
        return Err(format!(
            "{s:?} is empty: x0 < x1 and y0 < y1 are needed (the ranges are half-open, [x0, x1) x [y0, y1))"
        ));
    }
    Ok(Tile {
        x: x0,
        y: y0,
        w: x1 - x0,
        h: y1 - y0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4x2 film whose pixels hold `counts` samples.
    fn film_of_counts(counts: [f32; 8]) -> Film {
        let mut f = Film::new(4, 2);
        for (p, n) in f.pixels.iter_mut().zip(counts) {
            p[3] = n;
        }
        f
    }

    #[test]
    fn keys_say_what_the_pixels_hold() {
        let key = "scene x; size 4x2; spp 64; seed 0";
        let all = SamplesHeld::of(&film_of_counts([64.0; 8]), key, 64);
        assert_eq!(all.image_key(key), key);
        let passes = SamplesHeld::of(&film_of_counts([16.0; 8]), key, 16);
        assert_eq!(
            passes.image_key(key),
            "scene x; size 4x2; spp 16 of 64; seed 0"
        );
        assert_eq!(passes.describe(), "16 of 64 samples per pixel everywhere");
        let cut = SamplesHeld::of(
            &film_of_counts([16.0, 32.0, 32.0, 16.0, 16.0, 16.0, 32.0, 16.0]),
            key,
            16,
        );
        assert_eq!(
            cut.image_key(key),
            "scene x; size 4x2; spp stopped: 16 everywhere, 16..32 in 3 of 8 pixels; seed 0"
        );
        assert!(stopped_mid_pass(&cut.image_key(key)));
        assert_eq!(
            cut.describe(),
            "16 of 64 samples per pixel everywhere, and 32 in 3 of 8 pixels"
        );
        // Every pixel has the pass that was cut: the boundary after it.
        let next = SamplesHeld::of(&film_of_counts([32.0; 8]), key, 16);
        assert_eq!(
            next.image_key(key),
            "scene x; size 4x2; spp 32 of 64; seed 0"
        );
        // A first pass cut short: the pixels it did not reach hold nothing.
        let first = SamplesHeld::of(
            &film_of_counts([0.0, 16.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
            key,
            0,
        );
        assert_eq!(
            first.describe(),
            "0 of 64 samples per pixel everywhere, and 16 in 1 of 8 pixels"
        );
        // Adaptive sampling: the boundary is the film's, not its fewest samples (the blocks
        // that had stopped hold 8).
        let key = "scene x; size 4x2; spp 64; seed 0; noise-threshold 0.01 min-spp 0 pass-spp 8";
        let at_16 = SamplesHeld::of(
            &film_of_counts([8.0, 16.0, 16.0, 8.0, 16.0, 16.0, 16.0, 16.0]),
            key,
            16,
        );
        assert_eq!(
            at_16.image_key(key),
            "scene x; size 4x2; spp 16 of 64; seed 0; noise-threshold 0.01 min-spp 0 pass-spp 8"
        );
        assert_eq!(
            at_16.describe(),
            "16 of 64 samples per pixel where blocks went on sampling, at most that where they had met the noise threshold"
        );
        let cut = SamplesHeld::of(
            &film_of_counts([8.0, 24.0, 16.0, 8.0, 16.0, 16.0, 16.0, 16.0]),
            key,
            16,
        );
        assert!(stopped_mid_pass(&cut.image_key(key)));
        assert_eq!((cut.ahead, cut.most), (1, 24));
    }

    /// Under a map a key has both `environment R,G,B` and `environment map ...`: each is
    /// matched with its own kind, so only the item that differs is named.
    #[test]
    fn the_uniform_environment_and_the_map_are_two_items() {
        let key = |share: &str| {
            format!(
                "spp 4; environment 0.0,0.0,0.0; lights one-sided; environment map 16x8 \
                 content 01 rotate 0.0{share}"
            )
        };
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        let (a, b) = (
            key("; environment-share 0.5"),
            key("; environment-share 0.25"),
        );
        assert_eq!(
            render_key_differences(&a, &b),
            [pair("environment-share 0.5", "environment-share 0.25")]
        );
        let other_map = a.replace("content 01", "content 02");
        assert_eq!(
            render_key_differences(&a, &other_map),
            [pair(
                "environment map 16x8 content 01 rotate 0.0",
                "environment map 16x8 content 02 rotate 0.0"
            )]
        );
        let no_map = "spp 4; environment 0.0,0.0,0.0; lights one-sided";
        assert_eq!(
            render_key_differences(no_map, &key("")),
            [pair(
                "(not set)",
                "environment map 16x8 content 01 rotate 0.0"
            )]
        );
        assert_eq!(key_item_name("environment map"), "environment map");
        assert_eq!(key_item_name("environment mapping 2"), "environment");
    }

    #[test]
    fn render_keys_differ_item_by_item_matched_by_name() {
        let key = "scene a.obj; triangles 32; content 01; spp 16; seed 0";
        assert!(render_key_differences(key, key).is_empty());
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            render_key_differences(key, "scene a.obj; triangles 32; content 02; spp 64; seed 0"),
            [pair("content 01", "content 02"), pair("spp 16", "spp 64")]
        );
        // A key without an item (an older gasworks): that item is named, not every later one.
        assert_eq!(
            render_key_differences("scene a.obj; triangles 32; spp 16; seed 0", key),
            [pair("(not set)", "content 01")]
        );
        assert_eq!(
            render_key_differences(key, "scene a.obj; triangles 32; spp 16; seed 0"),
            [pair("content 01", "(not set)")]
        );
        // The same items in another order: the keys whole.
        let swapped = "triangles 32; scene a.obj; content 01; spp 16; seed 0";
        assert_eq!(render_key_differences(key, swapped), [pair(key, swapped)]);
    }

    #[test]
    fn formats_follow_the_extension() {
        assert_eq!(
            ImageFormat::from_path(Path::new("a.PNG")).unwrap(),
            ImageFormat::Png
        );
        assert_eq!(
            ImageFormat::from_path(Path::new("a.exr")).unwrap(),
            ImageFormat::Exr
        );
        assert_eq!(
            ImageFormat::from_path(Path::new("a.WebP")).unwrap(),
            ImageFormat::Webp
        );
        assert!(ImageFormat::from_path(Path::new("a.jpg")).is_err());
        assert!(ImageFormat::from_path(Path::new("a")).is_err());
    }

    /// WebP holds exactly the PNG's pixels (lossless), with the same exposure, and fewer bytes
    /// on noise; it is written only (a clear error when read back) and only as a whole frame.
    #[test]
    fn webp_holds_the_pngs_pixels_losslessly_and_only_whole_frames() {
        let dir = tempfile::tempdir().unwrap();
        let (w, h) = (64u32, 48u32);
        // Path-traced-like noise: every channel of every pixel its own value.
        let mut state = 0x2545_f491_u32;
        let rgb: Vec<[f32; 3]> = (0..w * h)
            .map(|_| {
                [0; 3].map(|_: u8| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    (state % 1000) as f32 / 700.0
                })
            })
            .collect();
        for exposure in [0.0, 1.5] {
            let meta = ImageMeta {
                exposure,
                ..ImageMeta::whole(w, h, "spp 4".into())
            };
            let png = dir.path().join("n.png");
            let webp = dir.path().join("n.webp");
            write_pixels(&rgb, &png, &meta).unwrap();
            write_pixels(&rgb, &webp, &meta).unwrap();
            let from_png = image::open(&png).unwrap().to_rgb8();
            let from_webp = image::open(&webp).unwrap().to_rgb8();
            assert_eq!(from_webp.dimensions(), (w, h));
            assert!(
                from_png.as_raw() == from_webp.as_raw(),
                "exposure {exposure}"
            );
            let (png_bytes, webp_bytes) = (
                std::fs::metadata(&png).unwrap().len(),
                std::fs::metadata(&webp).unwrap().len(),
            );
            assert!(webp_bytes < png_bytes, "{webp_bytes} >= {png_bytes}");
        }
        let webp = dir.path().join("n.webp");
        let e = read_image(&webp).unwrap_err().to_string();
        assert!(
            e.contains("n.webp") && e.contains("reads back only PNG and EXR"),
            "{e}"
        );

        // A crop cannot say where it lies in WebP: refused up front and when written, and
        // nothing is left behind.
        let crop = Tile {
            x: 16,
            y: 8,
            w: 8,
            h: 4,
        };
        let cropped = dir.path().join("crop.webp");
        let e = check_window_fits_format(&cropped, crop, w, h)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "crop.webp: a crop (8x4 at 16,8 of a 64x48 frame) cannot be written as WebP"
            ),
            "{e}"
        );
        assert!(check_window_fits_format(&cropped, Tile { x: 0, y: 0, w, h }, w, h).is_ok());
        assert!(check_window_fits_format(&dir.path().join("crop.png"), crop, w, h).is_ok());
        let huge = Tile {
            x: 0,
            y: 0,
            w: 20000,
            h: 10,
        };
        let e = check_window_fits_format(&cropped, huge, 20000, 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("past WebP's 16383 pixels a side"), "{e}");
        let meta = ImageMeta {
            window: crop,
            ..ImageMeta::whole(w, h, String::new())
        };
        let e = write_pixels(&rgb[..32], &cropped, &meta)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("{}: a crop", cropped.display())),
            "{e}"
        );
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["n.png", "n.webp"]);
    }

    #[test]
    fn png_and_exr_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut film = Film::new(3, 2);
        for (i, p) in film.pixels.iter_mut().enumerate() {
            *p = [i as f32 * 0.5, 0.25, 4.0, 2.0];
        }
        let meta = ImageMeta::whole(3, 2, String::new());
        let exr = dir.path().join("x.exr");
        write_image(&film, &exr, &meta).unwrap();
        let back = image::open(&exr).unwrap().to_rgb32f();
        assert_eq!(back.get_pixel(2, 1).0, [1.25, 0.125, 2.0]);
        let png = dir.path().join("x.png");
        write_image(&film, &png, &meta).unwrap();
        let back = image::open(&png).unwrap().to_rgb8();
        assert_eq!(back.get_pixel(0, 0).0, [0, 99, 255]);
        // Only the two images are left: no temporary file.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec!["x.exr", "x.png"]);
    }

    #[test]
    fn the_same_film_gives_the_same_exr_file() {
        // Large enough for many blocks, compressed in parallel.
        let dir = tempfile::tempdir().unwrap();
        let mut film = Film::new(256, 192);
        for (i, p) in film.pixels.iter_mut().enumerate() {
            let v = (i as f32 * 0.618).fract();
            *p = [v, v * v, 1.0 - v, 1.0];
        }
        let files: Vec<Vec<u8>> = (0..4)
            .map(|k| {
                let path = dir.path().join(format!("{k}.exr"));
                write_image(&film, &path, &ImageMeta::whole(256, 192, String::new())).unwrap();
                std::fs::read(path).unwrap()
            })
            .collect();
        assert!(files.iter().all(|f| f == &files[0]));
    }

    /// Writing an image clears the temporary copies of it that killed processes left: only
    /// those whose process is gone and that have not been written to for a while; another
    /// file's, a running process's (on a shared file system, perhaps another machine's) and a
    /// fresh one stay.
    #[cfg(target_os = "linux")]
    #[test]
    fn stale_partial_files_of_killed_writers_are_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.png");
        // 4000000000 is above any Linux pid_max (at most 2^22): no such process runs.
        let dead = 4_000_000_000u32;
        let old = std::time::SystemTime::now() - 2 * STALE_PARTIAL_AGE;
        let make = |name: &str, modified: std::time::SystemTime| {
            let path = dir.path().join(name);
            let f = std::fs::File::create(&path).unwrap();
            f.set_modified(modified).unwrap();
            path
        };
        let now = std::time::SystemTime::now();
        let stale = make(&format!(".out.png.partial-{dead}"), old);
        let kept = [
            make(&format!(".out.png.partial-{}", dead + 1), now),
            make(".out.png.partial-1", old),
            // A running process other than this one (whose own name the write takes).
            make(
                &format!(".out.png.partial-{}", std::os::unix::process::parent_id()),
                old,
            ),
            make(&format!(".other.png.partial-{dead}"), old),
            make(".out.png.partial-abc", old),
        ];
        let meta = ImageMeta::whole(2, 1, String::new());
        write_pixels(&[[0.5; 3]; 2], &out, &meta).unwrap();
        assert!(out.exists());
        assert!(!stale.exists(), "the stale partial file was left");
        for path in kept {
            assert!(path.exists(), "{} was removed", path.display());
        }
    }

    /// The folder vanishes between the up-front check and the write (a long render): the
    /// pixels land in the rescue folder as EXR, bit for bit, and the error names both files.
    #[test]
    fn a_failed_write_keeps_the_render_in_the_rescue_folder() {
        let dir = tempfile::tempdir().unwrap();
        let rescue = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        std::fs::create_dir(&gone).unwrap();
        let path = gone.join("frame.png");
        check_writable(&path).unwrap();
        std::fs::remove_dir(&gone).unwrap();
        let mut film = Film::new(5, 3);
        for (i, p) in film.pixels.iter_mut().enumerate() {
            *p = [i as f32 * 0.25, 1.0, 2.5, 2.0];
        }
        let meta = ImageMeta::whole(5, 3, String::new());
        let err = write_image_or_rescue(&film, &path, &meta, rescue.path()).unwrap_err();
        let OutputError::Rescued { failed, rescued } = &err else {
            panic!("not rescued: {err}");
        };
        assert!(matches!(**failed, OutputError::Io { .. }), "{failed}");
        assert_eq!(rescued.parent(), Some(rescue.path()));
        let text = err.to_string();
        assert!(text.contains("frame.png: cannot write the image"), "{text}");
        assert!(text.contains(&rescued.display().to_string()), "{text}");
        let back = read_image(rescued).unwrap();
        assert_eq!(back.format, ImageFormat::Exr);
        assert_eq!(back.pixels, Pixels::Linear(film.mean()));
        // Where both fail, the first error comes back, not a rescue claim.
        let err = write_image_or_rescue(&film, &path, &meta, &gone).unwrap_err();
        assert!(matches!(err, OutputError::Io { .. }), "{err}");
        // A write that works needs no rescue.
        let fine = dir.path().join("fine.exr");
        write_image_or_rescue(&film, &fine, &meta, rescue.path()).unwrap();
        assert_eq!(std::fs::read_dir(rescue.path()).unwrap().count(), 1);
    }

    #[test]
    fn unwritable_paths_are_refused_up_front() {
        assert!(check_writable(Path::new("/nonexistent-dir/x.png")).is_err());
        let dir = tempfile::tempdir().unwrap();
        assert!(check_writable(&dir.path().join("x.png")).is_ok());
        assert!(check_writable(&dir.path().join("x.tiff")).is_err());
    }

    #[test]
    fn crops_carry_their_window_frame_and_render_in_both_formats() {
        let dir = tempfile::tempdir().unwrap();
        let window = Tile {
            x: 3,
            y: 1,
            w: 4,
            h: 2,
        };
        let meta = ImageMeta {
            full_width: 10,
            full_height: 5,
            window,
            render: "scene caf\u{e9}.obj; spp 4".into(),
            exposure: 0.0,
            tonemap: ToneCurve::Clamp,
        };
        let rgb: Vec<[f32; 3]> = (0..8).map(|i| [i as f32 * 0.1, 0.5, 7.25]).collect();
        for name in ["c.exr", "c.png"] {
            let path = dir.path().join(name);
            write_pixels(&rgb, &path, &meta).unwrap();
            let back = read_image(&path).unwrap();
            assert_eq!(back.meta.window, window, "{name}");
            assert_eq!((back.meta.full_width, back.meta.full_height), (10, 5));
            assert_eq!(back.meta.render, "scene caf\\u{e9}.obj; spp 4");
            match back.pixels {
                Pixels::Linear(p) => assert_eq!(p, rgb),
                Pixels::Srgb8(p) => {
                    assert_eq!(p, rgb.iter().map(|&c| to_srgb8(c)).collect::<Vec<_>>())
                }
            }
        }
        // Other readers see the EXR crop in place in its frame (the display window).
        let full = image::open(dir.path().join("c.exr")).unwrap().to_rgb32f();
        assert_eq!(full.dimensions(), (10, 5));
        assert_eq!(full.get_pixel(3, 1).0, rgb[0]);
        assert_eq!(full.get_pixel(0, 0).0, [0.0; 3]);
    }

    /// A PNG with an exposure holds 2^EV times the radiance, tone-mapped, and says so in its
    /// render key; an EXR ignores it; exposure 0 is the plain tone mapping exactly.
    #[test]
    fn exposure_scales_a_png_and_is_recorded_in_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let rgb: Vec<[f32; 3]> = vec![[0.05, 0.2, 0.45], [0.3, 0.6, 2.0]];
        let meta = |exposure| ImageMeta {
            exposure,
            ..ImageMeta::whole(2, 1, "spp 4".into())
        };
        let png = dir.path().join("e.png");
        write_pixels(&rgb, &png, &meta(1.0)).unwrap();
        let back = read_image(&png).unwrap();
        assert_eq!(back.meta.render, "spp 4; exposure 1");
        let doubled: Vec<[u8; 3]> = rgb.iter().map(|c| to_srgb8(c.map(|v| v * 2.0))).collect();
        assert_eq!(back.pixels, Pixels::Srgb8(doubled));
        write_pixels(&rgb, &png, &meta(-0.5)).unwrap();
        assert_eq!(
            read_image(&png).unwrap().meta.render,
            "spp 4; exposure -0.5"
        );
        write_pixels(&rgb, &png, &meta(0.0)).unwrap();
        let plain = read_image(&png).unwrap();
        assert_eq!(plain.meta.render, "spp 4");
        assert_eq!(
            plain.pixels,
            Pixels::Srgb8(rgb.iter().map(|&c| to_srgb8(c)).collect())
        );
        let exr = dir.path().join("e.exr");
        write_pixels(&rgb, &exr, &meta(1.0)).unwrap();
        let back = read_image(&exr).unwrap();
        assert_eq!(back.meta.render, "spp 4");
        assert_eq!(back.pixels, Pixels::Linear(rgb.clone()));

        assert!(check_exposure(1.5, &png).is_ok());
        assert!(check_exposure(0.0, &exr).is_ok());
        let e = check_exposure(1.0, &exr).unwrap_err();
        assert!(e.contains("e.exr holds linear radiance as rendered"), "{e}");
        assert!(check_exposure(f32::NAN, &png).is_err());
        assert!(check_exposure(65.0, &png).is_err());
    }

    /// The clamp is the former tone mapping exactly (the formula as it was), for every byte.
    #[test]
    fn the_clamp_is_the_former_tone_mapping() {
        let former = |c: f32| {
            let c = if c.is_finite() {
                c.clamp(0.0, 1.0)
            } else {
                0.0
            };
            (linear_to_srgb(c) * 255.0 + 0.5) as u8
        };
        let values = (0..=2000).map(|i| i as f32 / 1000.0).chain([
            -1.0,
            1e30,
            f32::MAX,
            f32::INFINITY,
            f32::NAN,
            f32::NEG_INFINITY,
            1e-9,
        ]);
        for v in values {
            for scale in [1.0f32, 2.0, 0.25] {
                let want = former(v * scale);
                assert_eq!(
                    to_srgb8_scaled([v, 0.5, v], scale),
                    [want, former(0.5 * scale), want],
                    "{v} x {scale}"
                );
            }
        }
    }

    #[test]
    fn the_aces_curve_rolls_off_and_keeps_greys_grey() {
        let aces = |v: f32| ToneCurve::Aces.apply([v, v, v]);
        // Greys stay grey (to rounding: both matrices' rows sum to 1, to 1e-5).
        for v in [0.0f32, 0.01, 0.18, 1.0, 4.0, 20.0] {
            let [r, g, b] = aces(v);
            assert!(
                (r - g).abs() < 1e-4 && (g - b).abs() < 1e-4,
                "{v}: {r} {g} {b}"
            );
        }
        // Pinned points of the curve: black, mid grey a stop darker than the clamp's, 1
        // well below white, white from 25.7.
        assert_eq!(aces(0.0), [0.0; 3]);
        assert!((aces(0.18)[1] - 0.1056).abs() < 5e-4, "{:?}", aces(0.18));
        assert!((aces(1.0)[1] - 0.619).abs() < 2e-3, "{:?}", aces(1.0));
        assert!(aces(25.0)[1] < 1.0 && aces(26.0)[1] == 1.0);
        // Rising: every step of a ramp over 12 stops brightens, but in the toe, black below
        // 0.0032 (the fit's crushed blacks), and at white.
        let mut last = -1.0f32;
        for i in 0..=120 {
            let v = 0.001f32 * 2f32.powf(i as f32 / 10.0);
            let y = aces(v)[1];
            assert!(
                y > last || y == 1.0 || (y == 0.0 && v < 0.0033),
                "{v}: {y} after {last}"
            );
            last = y;
        }
        // A bright saturated red desaturates towards white instead of clipping to pure red,
        // and any radiance a float holds, or none, maps into [0, 1].
        let [r, g, b] = ToneCurve::Aces.apply([50.0, 0.0, 0.0]);
        assert!(r == 1.0 && g > 0.05 && b > 0.0, "{r} {g} {b}");
        for rgb in [
            [f32::MAX; 3],
            [f32::NAN, 1.0, f32::INFINITY],
            [-5.0, 0.0, 1e-30],
        ] {
            let out = ToneCurve::Aces.apply(rgb);
            assert!(
                out.iter().all(|c| (0.0..=1.0).contains(c)),
                "{rgb:?}: {out:?}"
            );
        }
        assert_eq!(ToneCurve::Aces.apply([f32::MAX; 3]), [1.0; 3]);
    }

    /// A PNG with a tone curve other than the clamp says so in its render key (after an
    /// exposure), holds the curve's pixels, and an EXR refuses the curve.
    #[test]
    fn a_tone_curve_is_applied_to_a_png_and_recorded_in_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let rgb: Vec<[f32; 3]> = vec![[0.05, 0.2, 0.45], [0.3, 6.0, 2.0]];
        let png = dir.path().join("t.png");
        for (exposure, key) in [
            (0.0, "spp 4; tonemap aces"),
            (1.0, "spp 4; exposure 1; tonemap aces"),
        ] {
            let meta = ImageMeta {
                exposure,
                tonemap: ToneCurve::Aces,
                ..ImageMeta::whole(2, 1, "spp 4".into())
            };
            write_pixels(&rgb, &png, &meta).unwrap();
            let back = read_image(&png).unwrap();
            assert_eq!(back.meta.render, key);
            let scale = 2f32.powf(exposure);
            let want = rgb
                .iter()
                .map(|&c| to_srgb8_toned(c, scale, ToneCurve::Aces))
                .collect();
            assert_eq!(back.pixels, Pixels::Srgb8(want));
            assert_ne!(
                back.pixels,
                Pixels::Srgb8(rgb.iter().map(|&c| to_srgb8_scaled(c, scale)).collect())
            );
        }
        assert!(check_tonemap(ToneCurve::Aces, &png).is_ok());
        let exr = dir.path().join("t.exr");
        assert!(check_tonemap(ToneCurve::Clamp, &exr).is_ok());
        let e = check_tonemap(ToneCurve::Aces, &exr).unwrap_err();
        assert!(
            e.contains("--tonemap aces") && e.contains("t.exr holds linear radiance"),
            "{e}"
        );
    }

    #[test]
    fn pixelbounds_parse_as_pbrt_writes_them() {
        assert_eq!(
            parse_pixelbounds("0,10, 4,6").unwrap(),
            Tile {
                x: 0,
                y: 4,
                w: 10,
                h: 2
            }
        );
        assert!(parse_pixelbounds("0,10,4").is_err());
        assert!(parse_pixelbounds("5,5,0,1").unwrap_err().contains("empty"));
        assert!(parse_pixelbounds("-1,5,0,1").is_err());
        assert!(parse_pixelbounds("0,5,0,x").is_err());
    }

    #[test]
    fn a_crop_outside_its_frame_or_of_a_frame_too_large_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, (fw, fh): (u32, u32), window: Tile| {
            let path = dir.path().join(name);
            let meta = ImageMeta {
                full_width: fw,
                full_height: fh,
                window,
                render: String::new(),
                exposure: 0.0,
                tonemap: ToneCurve::Clamp,
            };
            let pixels = vec![[9u8; 3]; window.pixel_count()];
            write_png(&pixels, &path, &meta).unwrap();
            let exr = path.with_extension("exr");
            let linear = vec![[0.5f32; 3]; window.pixel_count()];
            (path, write_exr(&linear, &exr, &meta).map(|()| exr))
        };
        // A 4x1 crop at (2, 1) of a 4x2 frame: its row would run into the next one.
        let (png, exr) = write(
            "spills.png",
            (4, 2),
            Tile {
                x: 2,
                y: 1,
                w: 4,
                h: 1,
            },
        );
        let e = read_image(&png).unwrap_err().to_string();
        assert!(
            e.contains("spills.png")
                && e.contains("the crop (4x1 at 2,1) is not inside its frame (4x2)"),
            "{e}"
        );
        // The EXR writer cannot express it, or the reader refuses it.
        if let Ok(exr) = exr {
            assert!(read_image(&exr).is_err());
        }
        let (png, _) = write(
            "huge.png",
            (100_000, 2),
            Tile {
                x: 0,
                y: 0,
                w: 2,
                h: 1,
            },
        );
        let e = read_image(&png).unwrap_err().to_string();
        assert!(
            e.contains("huge.png") && e.contains("the frame is 100000x2 pixels"),
            "{e}"
        );
    }

    #[test]
    fn a_png_without_gasworks_text_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain.png");
        image::RgbImage::new(2, 2).save(&path).unwrap();
        let e = read_image(&path).unwrap_err().to_string();
        assert!(
            e.contains("plain.png") && e.contains("gasworks.pixelbounds"),
            "{e}"
        );
    }
}
