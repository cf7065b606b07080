//! Resume files: a stopped render's film at a pass boundary, so that `gasworks render
//! --resume FILE` finishes it later with the image an uninterrupted render gives, bit for bit.
//!
//! The image a stopped render writes holds mean radiance, rounded to the output's format; a
//! render goes on from the film's exact sums and sample counts instead. The file is:
//!
//! - the 16 bytes `gasworks-resume\n`;
//! - a little-endian `u32` length, then that many bytes of JSON: the render key
//!   (`output::render_key`: scene, size, spp, depth, seed, camera...), the window, the pass
//!   size and the samples per pixel done;
//! - the film's `[f32; 4]` per pixel (sums of R, G, B and the sample count), little-endian,
//!   row-major over the window;
//! - a little-endian `u64` FNV-1a hash of everything before it, so that a truncated or damaged
//!   file is refused rather than resumed into a wrong image.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Film, Tile};

const MAGIC: &[u8; 16] = b"gasworks-resume\n";

/// What a resume file says about the render it belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// 64-bit FNV-1a: enough to catch truncation and damage (not an adversary).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Writes `film` (at `header.spp_done` samples per pixel) to `path`, through a temporary
/// file renamed into place, so that a file under that name is always whole.
pub fn write(path: &Path, header: &CheckpointHeader, film: &Film) -> Result<(), CheckpointError> {
    let io = |what: &'static str| {
        move |source| CheckpointError::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    };
    let json = serde_json::to_vec(header).expect("the header serializes");
    let mut bytes = Vec::with_capacity(24 + json.len() + film.pixels.len() * 16);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(json.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&json);
    for p in &film.pixels {
        for v in p {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    let hash = fnv1a(&bytes);
    bytes.extend_from_slice(&hash.to_le_bytes());
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "resume".into());
    let tmp = path.with_file_name(format!(".{name}.partial-{}", std::process::id()));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| {
            f.write_all(&bytes)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(io("cannot write the resume file"))
}

/// Reads a resume file: its header and film, checked whole (magic, sizes, hash).
pub fn read(path: &Path) -> Result<(CheckpointHeader, Film), CheckpointError> {
    let bytes = std::fs::read(path).map_err(|source| CheckpointError::Io {
        path: path.to_path_buf(),
        what: "cannot read the resume file",
        source,
    })?;
    let damaged = |why: String| CheckpointError::Damaged {
        path: path.to_path_buf(),
        why,
    };
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
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
    let pixels = w as usize * h as usize;
    let data = &body[at + 4 + json_len..];
    if data.len() != pixels * 16 {
        return Err(damaged(format!(
            "{} bytes of pixels for a {w}x{h} window (expected {})",
            data.len(),
            pixels * 16
        )));
    }
    let mut film = Film::new(w, h);
    for (p, chunk) in film.pixels.iter_mut().zip(data.chunks_exact(16)) {
        for (k, v) in p.iter_mut().enumerate() {
            *v = f32::from_le_bytes(chunk[4 * k..4 * k + 4].try_into().expect("4 bytes"));
        }
    }
    Ok((header, film))
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
        };
        (header, film)
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
    }
}
