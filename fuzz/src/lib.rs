//! The bodies of the fuzz targets (docs/guide/fuzzing.md). Each writes the input where its
//! reader expects a file, calls the entry point `gasworks` itself calls, and goes on through
//! what the command does next with what was read. A panic is a crash, and so is an
//! allocation past the input's [`Budget`]; a refusal is the expected answer to most inputs.

mod budget;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use budget::{within, Budget};
use gasworks::render::{checkpoint, merge, output};
use gasworks::sched::report;

#[global_allocator]
static ALLOC: budget::Budgeted = budget::Budgeted;

/// OBJ: the loaded groups, materials and textures. Beyond the floor (the loader's buffers and
/// threads), a scene holds some hundreds of bytes a triangle, and a triangle takes at least 6
/// bytes of OBJ (`f 1 2 3` after its vertices are read); a texture may take
/// `scene::image_file::allowance` of its file's size, decoded and then converted.
pub const OBJ_BUDGET: Budget = Budget {
    floor: 64 << 20,
    per_byte: 4200,
};

/// A resume file's film is its pixel bytes; the header, a few hundred bytes of JSON.
pub const RESUME_BUDGET: Budget = Budget {
    floor: 4 << 20,
    per_byte: 8,
};

/// EXR and PNG decompress: deflate expands 1032-fold at most, and the f32 RGB (or 8-bit RGB
/// and its PNG rows) held for a pixel is at most twice what the file's samples decode to.
pub const IMAGE_BUDGET: Budget = Budget {
    floor: 16 << 20,
    per_byte: 4200,
};

/// CSV rows are held as structs a few times their text's size; a gzipped file expands
/// 1032-fold at most.
pub const CSV_BUDGET: Budget = Budget {
    floor: 4 << 20,
    per_byte: 32,
};
pub const CSV_GZ_BUDGET: Budget = Budget {
    floor: 4 << 20,
    per_byte: 32 * 1032,
};

/// A folder of this process's own for the files an input is written to: in memory where
/// there is `/dev/shm`.
fn work_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        base.join(format!("gasworks-fuzz-{}", std::process::id()))
    })
}

/// The folder for one input's files, with the files the last input left removed (fewer
/// system calls than a new folder for each input).
fn fresh_dir() -> &'static Path {
    static MADE: OnceLock<()> = OnceLock::new();
    let dir = work_dir();
    MADE.get_or_init(|| {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).expect("the fuzz work folder can be made");
    });
    for name in WRITTEN.lock().expect("one input at a time").drain(..) {
        let _ = std::fs::remove_file(dir.join(name));
    }
    dir
}

/// The files written for the current input, by name.
static WRITTEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// A refusal must name the file it refuses (docs/guide/fuzzing.md): one that does not is a
/// crash.
fn names_the_file<T, E: std::fmt::Display>(result: &Result<T, E>, dir: &Path) {
    if let Err(e) = result {
        let message = e.to_string();
        let dir = dir.to_string_lossy();
        assert!(
            message.contains(&*dir),
            "a refusal that names no file: {message}"
        );
    }
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).expect("the fuzz work folder can be written");
    if let Some(name) = path.file_name() {
        let name = name.to_string_lossy().into_owned();
        WRITTEN.lock().expect("one input at a time").push(name);
    }
}

/// Splits an `obj` input into files: the OBJ first, then each file after a line
/// `@@@ NAME` (a plain file name: an MTL library, a texture).
pub fn split_files(data: &[u8]) -> (&[u8], Vec<(&str, &[u8])>) {
    const MARK: &[u8] = b"\n@@@ ";
    let mut parts = Vec::new();
    let mut rest = data;
    let obj_end = memchr_all(rest, MARK).next().unwrap_or(rest.len());
    let obj = &rest[..obj_end];
    rest = &rest[obj_end..];
    while rest.len() > MARK.len() {
        let body = &rest[MARK.len()..];
        let name_end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
        let content_start = (name_end + 1).min(body.len());
        let next = memchr_all(&body[content_start..], MARK)
            .next()
            .map_or(body.len(), |i| content_start + i);
        if let Some(name) = plain_name(&body[..name_end]) {
            parts.push((name, &body[content_start..next]));
        }
        rest = &body[next..];
    }
    (obj, parts)
}

fn memchr_all<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    hay.windows(needle.len())
        .enumerate()
        .filter(move |(_, w)| *w == needle)
        .map(|(i, _)| i)
}

fn plain_name(name: &[u8]) -> Option<&str> {
    let name = std::str::from_utf8(name).ok()?;
    let plain = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    (!name.is_empty() && name.len() <= 32 && !name.starts_with('.') && name.chars().all(plain))
        .then_some(name)
}

/// The OBJ loader with its MTL libraries and textures, then the CPU BVH and the camera
/// comment, as `gasworks render` reads a scene.
pub fn obj(data: &[u8]) {
    let dir = fresh_dir();
    let (obj, files) = split_files(data);
    for (name, bytes) in &files {
        write(&dir.join(name), bytes);
    }
    let path = dir.join("scene.obj");
    write(&path, obj);
    within(data.len(), OBJ_BUDGET, || {
        let opts = gasworks::scene::obj::LoadOptions { quiet: true };
        let loaded = gasworks::scene::obj::load_obj(&path, &opts);
        names_the_file(&loaded, dir);
        if let Ok(scene) = loaded {
            let _ = gasworks::scene::lights::facing_warnings(&scene);
            let _ = gasworks::cpu::SceneBvh::build(&scene);
            let _ = gasworks::scene::CameraHint::from_obj(&path);
        }
    });
}

/// A resume file: the input is the file before its checksum, which is appended, so that the
/// fuzzer reaches the header and the planes rather than the checksum's refusal.
pub fn resume(data: &[u8]) {
    let dir = fresh_dir();
    let path = dir.join("frame.exr.resume");
    let mut file = data.to_vec();
    file.extend_from_slice(&gasworks::fnv::fnv1a(data).to_le_bytes());
    write(&path, &file);
    within(file.len(), RESUME_BUDGET, || {
        let read = checkpoint::read(&path);
        names_the_file(&read, dir);
        if let Ok((header, film)) = read {
            let _ = header.window_tile();
            render_key(&header.render);
            let _ = film.pixels.len();
        }
    });
}

/// What `merge` and `preview` do with a render key read from a file.
fn render_key(key: &str) {
    let _ = output::stopped_mid_pass(key);
    let _ = output::key_with_spp_held(key, 3);
    let reference = "scene=cornell.obj size=64x64 spp=16 depth=8 seed=1";
    let _ = output::render_key_differences(key, reference);
}

/// An image `merge` reads: its window and frame, its render key, then the merge of it alone.
fn image(data: &[u8], name: &str) {
    let dir = fresh_dir();
    let path = dir.join(name);
    write(&path, data);
    within(data.len(), IMAGE_BUDGET, || {
        let read = output::read_image(&path);
        names_the_file(&read, dir);
        if let Ok(image) = read {
            render_key(&image.meta.render);
            let _ = merge::merge(&[(path.clone(), image)]);
        }
    });
}

/// `merge`'s EXR reader: data and display windows, the render key attribute.
pub fn exr_window(data: &[u8]) {
    image(data, "crop.exr")
}

/// `merge`'s PNG reader: the text chunks that carry the window, the frame and the render key.
/// Each chunk's CRC is recomputed, so that the fuzzer's changes reach the decoder and the
/// text rather than the CRC's refusal.
pub fn png_text(data: &[u8]) {
    image(&with_png_crcs(data), "crop.png")
}

fn with_png_crcs(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let mut at = 8;
    while at + 12 <= out.len() {
        let len = u32::from_be_bytes(out[at..at + 4].try_into().expect("4 bytes")) as usize;
        let Some(end) = (at + 8).checked_add(len).filter(|&e| e + 4 <= out.len()) else {
            break;
        };
        let mut crc = flate2::Crc::new();
        crc.update(&out[at + 4..end]);
        out[end..end + 4].copy_from_slice(&crc.sum().to_be_bytes());
        at = end + 4;
    }
    out
}

/// `schedule-sim`'s readers: a cost map (gzipped when the input is), tiles, workers, blocks.
pub fn costmap(data: &[u8]) {
    let dir = fresh_dir();
    let gz = data.starts_with(&[0x1f, 0x8b]);
    let name = if gz {
        "out.costmap.csv.gz"
    } else {
        "out.costmap.csv"
    };
    let path = dir.join(name);
    write(&path, data);
    let budget = if gz { CSV_GZ_BUDGET } else { CSV_BUDGET };
    within(data.len(), budget, || {
        names_the_file(&report::read_costmap(&path), dir);
        names_the_file(&report::read_tiles(&path), dir);
        names_the_file(&report::read_workers(&path), dir);
        names_the_file(&report::read_blocks(&path), dir);
    });
}
