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

#[test]
fn bad_faces() {
    assert_obj_error_at(&format!("{TRIANGLE}f 1 2 x\n"), 4, "\"x\"");
    assert_obj_error_at(&format!("{TRIANGLE}f 1 2\n"), 4, "face (f) with 2 vertices");
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
    assert_obj_error_at(&format!("{TRIANGLE}usemtl\n"), 4, "usemtl without");
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
    assert_obj_error_at(
        &format!("{TRIANGLE}vt 0 0\nf 1/1 2/2 3/1\n"),
        5,
        "texture coordinate index 2",
    );
    assert_obj_error_at(
        &format!("{TRIANGLE}vn 0 0 1\nf 1//1 2//1 3//-2\n"),
        5,
        "normal index -2",
    );
    // A vertex defined after the face is out of range at the face's line.
    assert_obj_error_at("v 0 0 0\nv 1 0 0\nf 1 2 3\nv 0 1 0\n", 3, "only 2 defined");
}

#[test]
fn nan_and_infinite_values() {
    for (text, line) in [
        ("v 0 0 0\nv nan 0 0\n", 2),
        ("v 0 0 0\nv 0 NaN 0\n", 2),
        ("v 0 0 inf\n", 1),
        ("v 0 0 -infinity\n", 1),
        ("v 0 0 1e39\n", 1),
        ("vn 0 0 nan\n", 1),
        ("vt inf 0\n", 1),
        ("v 1 1 1 1e-45\n", 1),
    ] {
        let e = assert_obj_error_at(text, line, "not a finite number");
        assert!(matches!(e, LoadError::NotFinite { .. }), "{text:?}: {e}");
    }
}

#[test]
fn empty_scenes() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, detail) in [
        ("nothing.obj", "", ""),
        ("vertices.obj", TRIANGLE, ""),
        ("groups.obj", "g a\no b\n# comment\n", ""),
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
        ("# lib\nnewmtl\n", 2, "newmtl without"),
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
