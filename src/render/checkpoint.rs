//! Resume files: a stopped render's film, at a pass boundary or with the finished tiles of the
//! pass a stop interrupted, so that `gasworks render --resume FILE` finishes it later with the
//! image an uninterrupted render gives, bit for bit.
//!
//! The image a stopped render writes holds mean radiance, rounded to the output's format; a
//! render goes on from the film's exact sums and sample counts instead. The file is:
//!
//! - the 16 bytes `gasworks-resume\n` (every pixel at the header's samples per pixel),
//!   `gasworks-resum2\n` (some pixels have the next pass's samples too; earlier builds
//!   refuse such a file rather than add that pass to them twice), or `gasworks-resum3\n`
//!   (adaptive sampling: the film carries its odd-pass plane, and pixels may hold fewer
//!   samples, where their block stopped);
//! - a little-endian `u32` length, then that many bytes of JSON: the render key
//!   (`output::render_key`: scene, size, spp, depth, seed, camera...), the window, the pass
//!   size and the samples per pixel done;
//! - the film's `[f32; 4]` per pixel (sums of R, G, B and the sample count), little-endian,
//!   row-major over the window;
//! - after `gasworks-resum3\n` only: the odd-pass plane, an `f32` per pixel
//!   ([`Film::odd_luma`]), likewise;
//! - a little-endian `u64` FNV-1a hash of everything before it, so that a truncated or damaged
//!   file is refused rather than resumed into a wrong image.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Film, Tile};
use crate::fnv::{fnv1a, Fnv};

const MAGIC: &[u8; 16] = b"gasworks-resume\n";

/// The magic of a film some of whose pixels are past `spp_done`: a stop inside a pass kept
/// that pass's finished tiles. Builds from before such files existed would take every pixel
/// to be at `spp_done` and add the pass to those pixels twice, a wrong image without a word;
/// with another magic they refuse the file instead.
const MAGIC_PARTIAL_PASS: &[u8; 16] = b"gasworks-resum2\n";

/// The magic of a film with an odd-pass plane (adaptive sampling), whose pixels may hold
/// fewer samples than `spp_done` (their block stopped) or more (a stop inside a pass). Builds
/// from before adaptive sampling would read neither the plane nor the counts: they refuse it.
const MAGIC_ODD_PLANE: &[u8; 16] = b"gasworks-resum3\n";

/// What a resume file says about the render it belongs to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointHeader {
    /// `output::render_key` of the render: a resume must be of the same render.
    pub render: String,
    /// The window of the frame the film covers (`--pixelbounds`, or the whole frame).
    pub window: [u32; 4],
    /// Samples per pixel of each pass (`--pass-spp`, or the whole spp): the order of the
    /// additions, which a resumed render must keep.
    pub pass_spp: u32,
    /// Samples per pixel every pixel of the film has.
    pub spp_done: u32,
    /// What rendered the film (`output::software()`: version and git commit). Another build
    /// may compute samples differently (in their last bits, or wholly where it draws other
    /// random numbers), so a render resumed by it is not bit for bit an uninterrupted one (it
    /// converges to the same image: every sample of either build is unbiased). Empty in files
    /// written before this was recorded.
    #[serde(default)]
    pub software: String,
    /// The tone mapping of the render's PNG (`--exposure`, `--tonemap`), which `gasworks
    /// preview` applies unless told otherwise, so that its PNG is the one the render writes.
    /// Left out for the default (no exposure, the clamp), and absent from earlier files.
    #[serde(default, skip_serializing_if = "PngTone::is_default")]
    pub png_tone: PngTone,
}

/// A PNG's tone mapping, as a resume file records it ([`CheckpointHeader::png_tone`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PngTone {
    /// Stops: radiance times 2^exposure before the curve.
    pub exposure: f32,
    /// The curve's name (`ToneCurve::name`): "clamp" or "aces".
    #[serde(with = "tone_curve_name")]
    pub tonemap: super::output::ToneCurve,
}

impl PngTone {
    fn is_default(&self) -> bool {
        *self == PngTone::default()
    }
}

/// A tone curve in a resume file's JSON: its name. A name this build does not know is an
/// error naming it (a later build's curve), not a silently other image.
mod tone_curve_name {
    use super::super::output::ToneCurve;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(curve: &ToneCurve, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(curve.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ToneCurve, D::Error> {
        let name = String::deserialize(d)?;
        [ToneCurve::Clamp, ToneCurve::Aces]
            .into_iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "the tone curve {name:?} is unknown to this build (it knows clamp and aces)"
                ))
            })
    }
}

impl CheckpointHeader {
    pub fn window_tile(&self) -> Tile {
        let [x, y, w, h] = self.window;
        Tile { x, y, w, h }
    }
}

/// Why a resume file cannot be written or used. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{}: {what}: {source}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("{}: not a gasworks resume file", path.display())]
    NotACheckpoint { path: PathBuf },
    #[error("{}: damaged resume file: {why}", path.display())]
    Damaged { path: PathBuf, why: String },
}

/// Writes `film` (at `header.spp_done` samples per pixel, with the next pass's too in the
/// pixels a stop inside it reached) to `path`, through a temporary file renamed into place, so
/// that a file under that name is always whole.
pub fn write(path: &Path, header: &CheckpointHeader, film: &Film) -> Result<(), CheckpointError> {
    let io = |what: &'static str| {
        move |source| CheckpointError::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    };
    super::output::remove_stale_partials(path);
    let tmp = super::output::partial_path(path);
    let written = std::fs::File::create(&tmp)
        .and_then(|f| {
            let mut out = std::io::BufWriter::new(f);
            encode(&mut out, header, film)?;
            out.into_inner().map_err(|e| e.into_error())?.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(io("cannot write the resume file"))?;
    // The rename is durable once its folder is synced: a checkpoint is for a machine that may
    // lose power or be killed the next moment. Best effort (not every file system can).
    #[cfg(unix)]
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Pixels encoded at a time (64 KiB): the file is streamed out, so a checkpoint holds no
/// second copy of the film's bytes (130 MB more at 4K).
const ENCODE_CHUNK_PIXELS: usize = 4096;

/// The file's bytes (the layout in the module's documentation), hashed as they go out.
fn encode(out: &mut impl Write, header: &CheckpointHeader, film: &Film) -> std::io::Result<()> {
    let mut hash = Fnv::default();
    let mut put = |out: &mut dyn Write, bytes: &[u8]| {
        hash.bytes(bytes);
        out.write_all(bytes)
    };
    let json = serde_json::to_vec(header).expect("the header serializes");
    let at_boundary = film.pixels.iter().all(|p| p[3] == header.spp_done as f32);
    put(
        out,
        if film.has_odd_plane() {
            MAGIC_ODD_PLANE
        } else if at_boundary {
            MAGIC
        } else {
            MAGIC_PARTIAL_PASS
        },
    )?;
    put(out, &(json.len() as u32).to_le_bytes())?;
    put(out, &json)?;
    let mut chunk = Vec::with_capacity(ENCODE_CHUNK_PIXELS * 16);
    for pixels in film.pixels.chunks(ENCODE_CHUNK_PIXELS) {
        chunk.clear();
        for v in pixels.iter().flatten() {
            chunk.extend_from_slice(&v.to_le_bytes());
        }
        put(out, &chunk)?;
    }
    for values in film.odd_luma.chunks(ENCODE_CHUNK_PIXELS) {
        chunk.clear();
        for v in values {
            chunk.extend_from_slice(&v.to_le_bytes());
        }
        put(out, &chunk)?;
    }
    out.write_all(&hash.finish().to_le_bytes())
}

/// [`write()`], and when that fails (a full disk, the folder gone), the same file in
/// `rescue_dir` (the system's temporary folder), so that a stopped render keeps what it can
/// resume from. Returns where the file is and, when it was rescued, why the first place
/// failed; the error when both failed.
pub fn write_or_rescue(
    path: &Path,
    header: &CheckpointHeader,
    film: &Film,
    rescue_dir: &Path,
) -> Result<(PathBuf, Option<CheckpointError>), CheckpointError> {
    let failed = match write(path, header, film) {
        Ok(()) => return Ok((path.to_path_buf(), None)),
        Err(e) => e,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "render.gasworks-resume".into());
    let rescued = rescue_dir.join(format!("gasworks-rescued-{}-{name}", std::process::id()));
    match write(&rescued, header, film) {
        Ok(()) => Ok((rescued, Some(failed))),
        Err(_) => Err(failed),
    }
}

/// Writes a render's checkpoints, between passes and inside them: when `every` has passed since
/// the last one (or since the render started), or when asked (SIGUSR1), to one file that each
/// replaces.
pub struct Checkpointer {
    path: PathBuf,
    header: CheckpointHeader,
    every: Option<std::time::Duration>,
    last: std::time::Instant,
    /// Checkpoints written.
    pub written: u32,
    /// Samples per pixel of the latest one written.
    pub latest_spp: Option<u32>,
    /// Pixels of the latest one that have the next pass's samples too (written inside a pass).
    pub latest_ahead_pixels: usize,
    /// The longest a write took.
    pub slowest: std::time::Duration,
}

impl Checkpointer {
    /// A checkpointer of `header`'s render (its `spp_done` is set at each write) into `path`,
    /// every `every` (`None`: only when asked). The clock starts now.
    pub fn new(
        path: PathBuf,
        header: CheckpointHeader,
        every: Option<std::time::Duration>,
    ) -> Self {
        Checkpointer {
            path,
            header,
            every,
            last: std::time::Instant::now(),
            written: 0,
            latest_spp: None,
            latest_ahead_pixels: 0,
            slowest: std::time::Duration::ZERO,
        }
    }

    /// The file the checkpoints go to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the latest checkpoint holds: "16 samples per pixel", "16 samples per pixel, and
    /// the next pass in 1792 pixels"; `None` before any.
    pub fn latest(&self) -> Option<String> {
        let spp = self.latest_spp?;
        Some(match self.latest_ahead_pixels {
            0 => format!("{spp} samples per pixel"),
            n => format!("{spp} samples per pixel, and the next pass in {n} pixels"),
        })
    }

    /// Whether `every` has passed since the last checkpoint (or since the render started).
    pub fn due(&self) -> bool {
        self.every.is_some_and(|every| self.last.elapsed() >= every)
    }

    /// At a pass boundary (`film` after `spp_done` samples per pixel), or inside a pass (`film`
    /// with its finished tiles too): writes a checkpoint when one is due or `asked`. `None` when none was due; else the write's outcome (a
    /// failed write leaves the previous checkpoint, if any, whole, and the next boundary
    /// tries again).
    pub fn at_boundary(
        &mut self,
        film: &Film,
        spp_done: u32,
        asked: bool,
    ) -> Option<Result<(), CheckpointError>> {
        if !(self.due() || asked) {
            return None;
        }
        let t0 = std::time::Instant::now();
        self.header.spp_done = spp_done;
        let result = write(&self.path, &self.header, film);
        self.last = std::time::Instant::now();
        if result.is_ok() {
            self.written += 1;
            let done = spp_done as f32;
            let ahead = film.pixels.iter().filter(|p| p[3] > done).count();
            let at_done = film.pixels.iter().filter(|p| p[3] == done).count();
            // After a pass's last tile every pixel has that pass (but those whose blocks had
            // stopped, with adaptive sampling): the film is at its end.
            (self.latest_spp, self.latest_ahead_pixels) =
                match film.pixels.iter().find(|p| p[3] > done) {
                    Some(p) if at_done == 0 => (Some(p[3] as u32), 0),
                    _ => (Some(spp_done), ahead),
                };
            self.slowest = self.slowest.max(t0.elapsed());
        }
        Some(result)
    }
}

/// Reads a resume file: its header and film, checked whole (magic, sizes, hash).
pub fn read(path: &Path) -> Result<(CheckpointHeader, Film), CheckpointError> {
    let bytes = read_bytes(path).map_err(|source| CheckpointError::Io {
        path: path.to_path_buf(),
        what: "cannot read the resume file",
        source,
    })?;
    parse(path, &bytes)
}

/// The longest header read; a real one is a few hundred bytes.
const MAX_HEADER_BYTES: u64 = 1 << 20;

/// A resume file's bytes, read no further than its header says the file reaches (and one
/// byte more, to see a longer file): a wrong `--resume` path (`/dev/zero`, a video) must not
/// fill the memory. What is read is [`parse`]d as if it were the whole file.
fn read_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut bytes = Vec::new();
    let head = MAGIC.len() + 4;
    (&mut file).take(head as u64).read_to_end(&mut bytes)?;
    if bytes.len() < head || !is_magic(&bytes[..MAGIC.len()]) {
        return Ok(bytes);
    }
    let bytes_per_pixel = pixel_bytes(&bytes[..MAGIC.len()]);
    let json_len = u32::from_le_bytes(bytes[MAGIC.len()..head].try_into().expect("4 bytes"));
    (&mut file)
        .take(u64::from(json_len).min(MAX_HEADER_BYTES))
        .read_to_end(&mut bytes)?;
    // After an unreadable header, or one with a window out of bounds, at most as much again:
    // `parse` refuses the header, or the checksum of a file cut short.
    let pixels = serde_json::from_slice::<CheckpointHeader>(&bytes[head..])
        .ok()
        .map(|h| [h.window[2], h.window[3]])
        .filter(|wh| wh.iter().all(|&s| s <= crate::render::MAX_IMAGE_SIDE))
        .map_or(MAX_HEADER_BYTES, |[w, h]| {
            u64::from(w) * u64::from(h) * bytes_per_pixel as u64
        });
    (&mut file).take(pixels + 8 + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Checks and decodes the bytes of a resume file.
fn parse(path: &Path, bytes: &[u8]) -> Result<(CheckpointHeader, Film), CheckpointError> {
    let damaged = |why: String| CheckpointError::Damaged {
        path: path.to_path_buf(),
        why,
    };
    if bytes.len() < MAGIC.len() || !is_magic(&bytes[..MAGIC.len()]) {
        return Err(CheckpointError::NotACheckpoint {
            path: path.to_path_buf(),
        });
    }
    if bytes.len() < MAGIC.len() + 4 + 8 {
        return Err(damaged(format!("{} bytes is too short", bytes.len())));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 8);
    let stored = u64::from_le_bytes(tail.try_into().expect("8 bytes"));
    if fnv1a(body) != stored {
        return Err(damaged(
            "its checksum does not match (truncated or changed)".into(),
        ));
    }
    let at = MAGIC.len();
    let json_len = u32::from_le_bytes(body[at..at + 4].try_into().expect("4 bytes")) as usize;
    let json = body
        .get(at + 4..at + 4 + json_len)
        .ok_or_else(|| damaged(format!("a header of {json_len} bytes does not fit")))?;
    let header: CheckpointHeader =
        serde_json::from_slice(json).map_err(|e| damaged(format!("unreadable header: {e}")))?;
    let [_, _, w, h] = header.window;
    let max = crate::render::MAX_IMAGE_SIDE;
    if w == 0 || h == 0 || w > max || h > max {
        return Err(damaged(format!(
            "a {w}x{h} window (gasworks renders 1 to {max} pixels a side)"
        )));
    }
    // At most 2^30 pixels: no overflow below.
    let odd_plane = &bytes[..MAGIC.len()] == MAGIC_ODD_PLANE;
    let expected = w as usize * h as usize * pixel_bytes(&bytes[..MAGIC.len()]);
    let data = &body[at + 4 + json_len..];
    if data.len() != expected {
        return Err(damaged(format!(
            "{} bytes of pixels for a {w}x{h} window (expected {expected})",
            data.len(),
        )));
    }
    let mut film = if odd_plane {
        Film::with_odd_plane(w, h)
    } else {
        Film::new(w, h)
    };
    let (sums, odd) = data.split_at(film.pixels.len() * 16);
    for (p, chunk) in film.pixels.iter_mut().zip(sums.chunks_exact(16)) {
        for (k, v) in p.iter_mut().enumerate() {
            *v = f32::from_le_bytes(chunk[4 * k..4 * k + 4].try_into().expect("4 bytes"));
        }
    }
    for (v, chunk) in film.odd_luma.iter_mut().zip(odd.chunks_exact(4)) {
        *v = f32::from_le_bytes(chunk.try_into().expect("4 bytes"));
    }
    Ok((header, film))
}

fn is_magic(bytes: &[u8]) -> bool {
    bytes == MAGIC || bytes == MAGIC_PARTIAL_PASS || bytes == MAGIC_ODD_PLANE
}

/// The bytes of a pixel in the file its magic begins: the sums, and the odd-pass plane's
/// value in a film that has one.
fn pixel_bytes(magic: &[u8]) -> usize {
    if magic == MAGIC_ODD_PLANE {
        20
    } else {
        16
    }
}

/// Whether `path` begins as a resume file does (either magic): `gasworks info` describes such
/// a file rather than reading it as a scene. False when it cannot be read.
pub fn looks_like_resume_file(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| is_magic(&head))
}

/// Where `gasworks render -o OUT` keeps its resume file: `OUT.gasworks-resume`, beside it.
pub fn path_for(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".gasworks-resume");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (CheckpointHeader, Film) {
        let mut film = Film::new(5, 3);
        for (i, p) in film.pixels.iter_mut().enumerate() {
            *p = [i as f32 * 0.1, f32::MIN_POSITIVE, 1e30, 8.0];
        }
        let header = CheckpointHeader {
            render: "scene a.obj; spp 64".into(),
            window: [2, 1, 5, 3],
            pass_spp: 8,
            spp_done: 16,
            software: "gasworks 0.1.0 (test)".into(),
            png_tone: PngTone::default(),
        };
        (header, film)
    }

    #[test]
    fn a_pngs_tone_mapping_is_kept_and_left_out_when_it_is_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.gasworks-resume");
        let (header, film) = sample();
        write(&path, &header, &film).unwrap();
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        assert!(!text.contains("png_tone"), "the default is left out");
        assert_eq!(read(&path).unwrap().0, header);
        let toned = CheckpointHeader {
            png_tone: PngTone {
                exposure: -1.5,
                tonemap: super::super::output::ToneCurve::Aces,
            },
            ..header
        };
        write(&path, &toned, &film).unwrap();
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        assert!(
            text.contains(r#""png_tone":{"exposure":-1.5,"tonemap":"aces"}"#),
            "{text}"
        );
        assert_eq!(read(&path).unwrap().0, toned);
        let e = serde_json::from_str::<PngTone>(r#"{"exposure":0,"tonemap":"filmic"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"filmic\" is unknown to this build"), "{e}");
    }

    /// The file streamed out in chunks is byte for byte the layout the module documents,
    /// across chunk boundaries and with a short last chunk.
    #[test]
    fn the_streamed_file_is_the_documented_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.gasworks-resume");
        let (header, _) = sample();
        let mut film = Film::new(70, 70);
        assert!(film.pixels.len() > ENCODE_CHUNK_PIXELS);
        assert!(film.pixels.len() % ENCODE_CHUNK_PIXELS != 0);
        for (i, p) in film.pixels.iter_mut().enumerate() {
            *p = [i as f32, -(i as f32) * 0.5, 1.0 / (i as f32 + 1.0), 16.0];
        }
        write(&path, &header, &film).unwrap();
        let json = serde_json::to_vec(&header).unwrap();
        let mut expected = MAGIC.to_vec();
        expected.extend_from_slice(&(json.len() as u32).to_le_bytes());
        expected.extend_from_slice(&json);
        for p in &film.pixels {
            for v in p {
                expected.extend_from_slice(&v.to_le_bytes());
            }
        }
        let hash = fnv1a(&expected);
        expected.extend_from_slice(&hash.to_le_bytes());
        assert!(std::fs::read(&path).unwrap() == expected);
    }

    #[test]
    fn a_resume_file_round_trips_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(&dir.path().join("out.png"));
        assert!(path.ends_with("out.png.gasworks-resume"));
        let (header, film) = sample();
        write(&path, &header, &film).unwrap();
        let (h, f) = read(&path).unwrap();
        assert_eq!(h, header);
        assert_eq!(
            h.window_tile(),
            Tile {
                x: 2,
                y: 1,
                w: 5,
                h: 3
            }
        );
        let bits =
            |f: &Film| -> Vec<[u32; 4]> { f.pixels.iter().map(|p| p.map(f32::to_bits)).collect() };
        assert_eq!(bits(&f), bits(&film));
        // No temporary file is left beside it.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// A film at its pass boundary keeps the first magic, which every build reads; one with
    /// pixels past it (a stop inside a pass) gets the second, which earlier builds refuse.
    #[test]
    fn a_film_past_its_boundary_gets_the_magic_earlier_builds_refuse() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.exr.gasworks-resume");
        let (header, mut film) = sample();
        for p in &mut film.pixels {
            p[3] = header.spp_done as f32;
        }
        write(&path, &header, &film).unwrap();
        assert_eq!(&std::fs::read(&path).unwrap()[..16], MAGIC);
        film.pixels[4][3] = (header.spp_done + header.pass_spp) as f32;
        write(&path, &header, &film).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..16], b"gasworks-resum2\n");
        assert_ne!(&bytes[..16], MAGIC);
        let (h, f) = read(&path).unwrap();
        assert_eq!((h, f.pixels[4][3]), (header, 24.0));
    }

    /// An adaptive render's film: its odd-pass plane comes back bit for bit after the sums,
    /// under the third magic, and a file cut inside the plane is refused.
    #[test]
    fn a_film_with_an_odd_plane_round_trips_under_its_own_magic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.exr.gasworks-resume");
        let (header, plain) = sample();
        let mut film = Film::with_odd_plane(5, 3);
        film.pixels.clone_from(&plain.pixels);
        for (i, v) in film.odd_luma.iter_mut().enumerate() {
            *v = i as f32 * 0.37 + f32::MIN_POSITIVE;
        }
        // A block that stopped early: fewer samples than the boundary.
        film.pixels[0][3] = 8.0;
        write(&path, &header, &film).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..16], b"gasworks-resum3\n");
        let (h, f) = read(&path).unwrap();
        assert_eq!(h, header);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&f.odd_luma), bits(&film.odd_luma));
        assert_eq!(f.pixels, film.pixels);
        assert!(looks_like_resume_file(&path));
        // The plane's last value cut off (and the checksum made to match): a plane short of
        // its window is named.
        let mut body = bytes[..bytes.len() - 8 - 4].to_vec();
        let hash = fnv1a(&body);
        body.extend_from_slice(&hash.to_le_bytes());
        std::fs::write(&path, &body).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("for a 5x3 window (expected 300)"), "{e}");
    }

    #[test]
    fn checkpoints_are_written_when_due_or_asked_and_each_replaces_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.exr.gasworks-resume");
        let (header, mut film) = sample();
        let every = std::time::Duration::from_secs(3600);
        let mut hourly = Checkpointer::new(path.clone(), header.clone(), Some(every));
        assert!(hourly.at_boundary(&film, 8, false).is_none(), "not due");
        assert!(!path.exists());
        assert!(matches!(hourly.at_boundary(&film, 8, true), Some(Ok(()))));
        assert_eq!(hourly.latest().unwrap(), "8 samples per pixel");
        let mut always = Checkpointer::new(path.clone(), header.clone(), Some(Default::default()));
        film.pixels[0][0] = 42.0;
        // Inside the pass after 24 samples: 2 pixels have its 8 samples already.
        for (i, p) in film.pixels.iter_mut().enumerate() {
            p[3] = if i < 2 { 32.0 } else { 24.0 };
        }
        assert!(matches!(always.at_boundary(&film, 24, false), Some(Ok(()))));
        let (h, f) = read(&path).unwrap();
        assert_eq!(h.spp_done, 24);
        assert_eq!(h.render, header.render);
        assert_eq!(f.pixels[0][0], 42.0);
        assert_eq!((always.written, always.latest_spp), (1, Some(24)));
        assert_eq!(
            always.latest().unwrap(),
            "24 samples per pixel, and the next pass in 2 pixels"
        );
        // After the pass's last tile: every pixel has it, and that is what the file holds.
        for p in &mut film.pixels {
            p[3] = 32.0;
        }
        assert!(matches!(always.at_boundary(&film, 24, false), Some(Ok(()))));
        assert_eq!(always.latest().unwrap(), "32 samples per pixel");
        // Only when asked, without an interval.
        let mut asked_only = Checkpointer::new(path.clone(), header.clone(), None);
        assert!(asked_only.at_boundary(&film, 32, false).is_none());
        // A write that fails says so and counts nothing; the file before it stays whole.
        let mut lost = Checkpointer::new(dir.path().join("gone/x"), header, None);
        let e = lost.at_boundary(&film, 32, true).unwrap().unwrap_err();
        assert!(
            e.to_string()
                .contains("gone/x: cannot write the resume file"),
            "{e}"
        );
        assert_eq!(lost.written, 0);
        assert_eq!(read(&path).unwrap().0.spp_done, 24);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_resume_file_that_cannot_be_written_is_rescued_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let rescue = tempfile::tempdir().unwrap();
        let (header, film) = sample();
        let here = dir.path().join("r.gasworks-resume");
        let (at, failed) = write_or_rescue(&here, &header, &film, rescue.path()).unwrap();
        assert_eq!((at.as_path(), failed.is_none()), (here.as_path(), true));
        let gone = dir.path().join("gone/r.gasworks-resume");
        let (at, failed) = write_or_rescue(&gone, &header, &film, rescue.path()).unwrap();
        assert!(at.starts_with(rescue.path()), "{}", at.display());
        assert!(failed
            .unwrap()
            .to_string()
            .contains("gone/r.gasworks-resume"));
        assert_eq!(read(&at).unwrap(), (header.clone(), film.clone()));
        let nowhere = dir.path().join("nowhere");
        assert!(write_or_rescue(&gone, &header, &film, &nowhere).is_err());
    }

    #[test]
    fn damaged_truncated_and_foreign_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.gasworks-resume");
        let (header, film) = sample();
        write(&path, &header, &film).unwrap();
        let good = std::fs::read(&path).unwrap();

        let mut flipped = good.clone();
        flipped[good.len() / 2] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(
            e.contains("r.gasworks-resume") && e.contains("checksum"),
            "{e}"
        );

        std::fs::write(&path, &good[..good.len() - 20]).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("damaged resume file"), "{e}");

        std::fs::write(&path, b"v 0 0 0\nf 1 2 3\n").unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("not a gasworks resume file"), "{e}");

        let e = read(&dir.path().join("missing")).unwrap_err().to_string();
        assert!(e.contains("missing: cannot read the resume file"), "{e}");

        // A whole file (its checksum recomputed) whose header names an impossible window.
        let huge = CheckpointHeader {
            window: [0, 0, u32::MAX, u32::MAX],
            ..header
        };
        write(&path, &huge, &film).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(
            e.contains("r.gasworks-resume") && e.contains("a 4294967295x4294967295 window"),
            "{e}"
        );

        // A good file with more after it: read one byte past its end, and refused.
        let mut longer = good.clone();
        longer.extend_from_slice(&[7; 4096]);
        std::fs::write(&path, &longer).unwrap();
        assert_eq!(read_bytes(&path).unwrap().len(), good.len() + 1);
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("damaged resume file"), "{e}");
    }

    /// A wrong `--resume` path that never ends is read only as far as its start.
    #[test]
    fn an_endless_file_is_not_read_whole() {
        let e = read(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(e.contains("/dev/zero: not a gasworks resume file"), "{e}");
    }
}
