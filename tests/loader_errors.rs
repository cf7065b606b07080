//! Every kind of bad input is an error that names the file (and the line where there is one),
//! never a panic.

use std::path::{Path, PathBuf};

use gasworks::scene::obj::{load_obj, LoadError, LoadOptions};

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn load_err(path: &Path) -> LoadError {
    match load_obj(path, &LoadOptions { quiet: true }) {
        Ok(s) => panic!(
            "{} loaded ({} triangles)",
            path.display(),
            s.triangle_count()
        ),
        Err(e) => e,
    }
}

const TRIANGLE: &str = "v 0 0 0\nv 1 0 0\nv 0 1 0\n";

/// Loads `text` as an OBJ and checks the error points at `line` of that file.
fn assert_obj_error_at(text: &str, line: usize, what: &str) -> LoadError {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "bad.obj", text);
    let e = load_err(&path);
    let message = e.to_string();
    assert!(
        message.starts_with(&format!("{}:{line}: ", path.display())),
        "{text:?}: {message}"
    );
    assert!(message.contains(what), "{text:?}: {message}");
    assert_eq!(e.line(), Some(line));
    assert_eq!(e.path(), path);
    e
}

#[test]
fn malformed_vertex_lines() {
    let e = assert_obj_error_at("v 0 0 0\nv 1 0 zero\n", 2, "\"zero\" is not a number");
    assert!(matches!(e, LoadError::Syntax { .. }));
    assert_obj_error_at("v 0 0\n", 1, "missing number");
    assert_obj_error_at("v 0 0 0\nvn 0 1\n", 2, "missing number");
    assert_obj_error_at("vt x 0\n", 1, "not a number");
    assert_obj_error_at("v 1 2 3 4 5\n", 1, "5 values");
    assert_obj_error_at("v 1 2 3 0\n", 1, "weight w is 0");
}

/// A file cut short mid-statement (a full disk, an interrupted copy) ends with no newline:
/// an error on that last line says the file looks truncated; the same line with its newline
/// is only malformed.
#[test]
fn an_error_on_an_unterminated_last_line_says_the_file_looks_truncated() {
    let note = "; the last line has no newline: the file looks truncated";
    let cut = assert_obj_error_at(&format!("{TRIANGLE}f 1 2 3\nv 1.0 2."), 5, "missing number");
    assert!(cut.to_string().contains(note), "{cut}");
    let index = assert_obj_error_at(&format!("{TRIANGLE}f 1 2 9"), 4, "out of range");
    assert!(index.to_string().contains(note), "{index}");
    let whole = assert_obj_error_at(&format!("{TRIANGLE}v 1.0 2.\n"), 4, "missing number");
    assert!(!whole.to_string().contains("newline"), "{whole}");
}

#[test]
fn bad_faces() {
    assert_obj_error_at(&format!("{TRIANGLE}f 1 2 x\n"), 4, "\"x\"");
    assert_obj_error_at(
        &format!("{TRIANGLE}\nf 1/1/1/1 2 3\n"),
        5,
        "not a vertex reference",
    );
    assert_obj_error_at(
        &format!("{TRIANGLE}f /1 2 3\n"),
        4,
        "not a vertex reference",
    );
    assert_obj_error_at(
        &format!("{TRIANGLE}f 1 2 3/x\n"),
        4,
        "where a texture coordinate index should be",
    );
    assert_obj_error_at(&format!("{TRIANGLE}mtllib\n"), 4, "mtllib without");
    // Faces of fewer than 3 vertices and `usemtl` without a name load with a warning
    // (tests/loader_tolerance.rs).
}

#[test]
fn indices_out_of_range_of_either_sign() {
    let e = assert_obj_error_at(
        &format!("{TRIANGLE}f 1 2 4\n"),
        4,
        "vertex index 4 is out of range",
    );
    assert!(matches!(e, LoadError::IndexOutOfRange { .. }));
    assert_obj_error_at(&format!("{TRIANGLE}f -1 -2 -4\n"), 4, "vertex index -4");
    assert_obj_error_at(&format!("{TRIANGLE}f 0 1 2\n"), 4, "start at 1");
    // A vertex defined after the face is out of range at the face's line.
    assert_obj_error_at("v 0 0 0\nv 1 0 0\nf 1 2 3\nv 0 1 0\n", 3, "only 2 defined");
    // The first bad line is the one named, in a file big enough to be parsed in parallel
    // chunks, wherever it falls.
    let mut big = String::new();
    for i in 0..60_000 {
        big += &format!("v {i} 0 0\nv {i} 1 0\nv {i} 0 1\nf -3 -2 -1\n");
    }
    let lines = big.lines().count();
    assert_obj_error_at(
        &format!("{big}f 1 2 {}\n", 3 * 60_000 + 1),
        lines + 1,
        "only 180000",
    );
    assert_obj_error_at(
        &format!("{big}v 1 1 one\n{big}f -1 -2 0\n"),
        lines + 1,
        "\"one\" is not a number",
    );
    // Texture and normal indices that point nowhere drop the attribute instead
    // (tests/loader_tolerance.rs).
}

#[test]
fn non_finite_vertex_weights_and_mtl_values() {
    // A weight of 0 makes every coordinate infinite: refused, as tobj and assimp do. (Other
    // non-finite values load with a warning: tests/loader_tolerance.rs.)
    assert_obj_error_at("v 1 2 3 0\n", 1, "weight w is 0");
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "m.mtl", "newmtl a\nKd 1 nan 1\n");
    let obj = write(
        dir.path(),
        "s.obj",
        format!("mtllib m.mtl\n{TRIANGLE}usemtl a\nf 1 2 3\n"),
    );
    let e = load_err(&obj);
    assert!(matches!(e, LoadError::NotFinite { line: 2, .. }), "{e}");
}

#[test]
fn empty_scenes() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, detail) in [
        ("nothing.obj", "", ""),
        ("vertices.obj", TRIANGLE, "it holds 3 vertices (v) but no faces (f)"),
        ("groups.obj", "g a\no b\n# comment\n", ""),
        (
            "points.obj",
            "v 0 0 0\nv 1 0 0\np 1\np 2\n",
            "only points (2 p statements), which are not surfaces",
        ),
        (
            "lines.obj",
            "v 0 0 0\nv 1 0 0\nl 1 2\n",
            "only lines (1 l statement), which are not surfaces",
        ),
        (
            "wire.obj",
            "v 0 0 0\nv 1 0 0\np 1\nl 1 2\nf 1 2\n",
            "only points and lines (1 p statement and 1 l statement), which are not surfaces; 1 face with fewer than 3 vertices was skipped",
        ),
        (
            "nan.obj",
            "v nan 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n",
            "all 1 touched a vertex with non-finite coordinates",
        ),
        (
            "flat.obj",
            "v 0 0 0\nv 1 0 0\nv 2 0 0\nf 1 2 3\nf 3 2 1\n",
            "all 2 were degenerate",
        ),
    ] {
        let path = write(dir.path(), name, text);
        let e = load_err(&path);
        assert!(matches!(e, LoadError::Empty { .. }), "{name}: {e}");
        let message = e.to_string();
        assert!(
            message.starts_with(&path.display().to_string()),
            "{message}"
        );
        assert!(
            message.contains("no triangles") && message.contains(detail),
            "{message}"
        );
    }
}

#[test]
fn utf16_files_are_refused_naming_the_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{TRIANGLE}f 1 2 3\n");
    let le: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let be: Vec<u8> = text.encode_utf16().flat_map(u16::to_be_bytes).collect();
    for (name, bytes, encoding) in [
        (
            "bom_le.obj",
            [&[0xFF, 0xFE][..], &le].concat(),
            "UTF-16 (little-endian)",
        ),
        (
            "bom_be.obj",
            [&[0xFE, 0xFF][..], &be].concat(),
            "UTF-16 (big-endian)",
        ),
        ("le.obj", le.clone(), "UTF-16 (little-endian)"),
        ("be.obj", be.clone(), "UTF-16 (big-endian)"),
    ] {
        let path = write(dir.path(), name, bytes);
        let e = load_err(&path);
        assert!(matches!(e, LoadError::Encoding { .. }), "{name}: {e}");
        let message = e.to_string();
        assert!(
            message.starts_with(&path.display().to_string()) && message.contains(encoding),
            "{message}"
        );
        assert!(!message.contains("no triangles"), "{message}");
    }
    // A UTF-16 material library too.
    let mtl: Vec<u8> = "newmtl a\n"
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    let mtl_path = write(dir.path(), "m.mtl", [&[0xFF, 0xFE][..], &mtl].concat());
    let obj = write(dir.path(), "s.obj", format!("mtllib m.mtl\n{text}"));
    let e = load_err(&obj);
    assert_eq!(e.path(), mtl_path);
    assert!(e.to_string().contains("UTF-16"), "{e}");
}

#[test]
fn missing_and_unreadable_files() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.obj");
    let e = load_err(&missing);
    assert!(matches!(e, LoadError::Open { .. }));
    assert!(
        e.to_string().contains(&missing.display().to_string()),
        "{e}"
    );
    // A folder opens but cannot be read.
    let e = load_err(dir.path());
    assert!(
        e.to_string().contains(&dir.path().display().to_string()),
        "{e}"
    );
}

#[test]
fn malformed_mtl_names_the_mtl_file_and_line() {
    for (mtl, line, what) in [
        ("newmtl a\nKd 0.5 0.5\n", 2, "expected 1 or 3 numbers"),
        ("newmtl a\n\nKs 1 one 1\n", 3, "\"one\" is not a number"),
        ("newmtl a\nillum high\n", 2, "illum"),
        ("newmtl a\nNi nan\n", 2, "not a finite number"),
        ("newmtl a\nmap_Kd   \n", 2, "map_Kd without a file name"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mtl_path = write(dir.path(), "bad.mtl", mtl);
        let obj = write(
            dir.path(),
            "s.obj",
            format!("mtllib bad.mtl\n{TRIANGLE}usemtl a\nf 1 2 3\n"),
        );
        let e = load_err(&obj);
        let message = e.to_string();
        assert!(
            message.starts_with(&format!("{}:{line}: ", mtl_path.display())),
            "{mtl:?}: {message}"
        );
        assert!(message.contains(what), "{mtl:?}: {message}");
    }
}

/// Lines ended by a carriage return alone (classic Mac OS) read as one line: refused naming
/// the line ends, not as "vertex position (v) has 15 values".
#[test]
fn carriage_return_line_ends_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{TRIANGLE}f 1 2 3\n").replace('\n', "\r");
    let path = write(dir.path(), "mac.obj", text);
    let e = load_err(&path);
    assert!(matches!(e, LoadError::CarriageReturnLines { .. }), "{e}");
    let message = e.to_string();
    assert!(
        message.starts_with(&path.display().to_string())
            && message.contains("carriage return alone"),
        "{message}"
    );
    // CRLF is fine.
    let crlf = write(
        dir.path(),
        "dos.obj",
        format!("{TRIANGLE}f 1 2 3\n").replace('\n', "\r\n"),
    );
    assert!(load_obj(&crlf, &LoadOptions { quiet: true }).is_ok());
}

/// Files that are not OBJ text (an image, a compressed OBJ, another model format, binary
/// data) are refused by what they are, not at whichever line the parser first choked on.
#[test]
fn files_that_are_not_obj_text_are_refused_by_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes, what) in [
        (
            "render.png",
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec(),
            "the file is a PNG image, not Wavefront OBJ text",
        ),
        (
            "scene.obj.gz",
            b"\x1f\x8b\x08\x08\0\0\0\0".to_vec(),
            "the file is gzip-compressed, not Wavefront OBJ text: decompress it first (gunzip)",
        ),
        (
            "model.glb",
            b"glTF\x02\0\0\0".to_vec(),
            "the file is a binary glTF (.glb) model, not Wavefront OBJ text: export it as OBJ",
        ),
        (
            "cube.ply",
            b"ply\nformat ascii 1.0\nelement vertex 8\n".to_vec(),
            "the file is a PLY model",
        ),
        (
            "blob.bin",
            [b"v 0 0 0\n".as_slice(), &[0, 1, 2, 3]].concat(),
            "the file is binary data (a NUL byte at byte 8), not Wavefront OBJ text",
        ),
    ] {
        let path = write(dir.path(), name, &bytes);
        let e = load_err(&path);
        assert!(matches!(e, LoadError::NotText { .. }), "{name}: {e}");
        assert!(
            e.to_string()
                .starts_with(&format!("{}: {what}", path.display())),
            "{e}"
        );
    }
    // A device that never ends and never has a line end: refused at once, not read on.
    let e = load_err(Path::new("/dev/zero"));
    assert_eq!(
        e.to_string(),
        "/dev/zero: the file is binary data (a NUL byte at byte 0), not Wavefront OBJ text"
    );
}

/// Binary data past the first block (a file damaged by a crash, padded with zeros) is an
/// error at its line, not lines silently skipped.
#[test]
fn nul_bytes_after_the_start_are_an_error_at_their_line() {
    let mut text = String::new();
    for i in 0..300_000 {
        text += &format!("v {i} 0 0\n");
    }
    text += "f 1 2 3\n";
    let line = 300_002;
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(b"f 1 2\0\0\0 3\nf 1 2 3\n");
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "damaged.obj", &bytes);
    let e = load_err(&path);
    assert_eq!(
        e.to_string(),
        format!(
            "{}:{line}: a NUL byte: the file holds binary data here (is it damaged?)",
            path.display()
        )
    );
}

/// A material library that is not MTL text is refused naming it.
#[test]
fn a_material_library_that_is_not_mtl_text_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mtl = write(dir.path(), "m.mtl", b"\x89PNG\r\n\x1a\n\0\0");
    let obj = write(
        dir.path(),
        "s.obj",
        format!("mtllib m.mtl\n{TRIANGLE}f 1 2 3\n"),
    );
    let e = load_err(&obj);
    assert_eq!(
        e.to_string(),
        format!(
            "{}: the file is a PNG image, not Wavefront MTL text",
            mtl.display()
        )
    );
}
