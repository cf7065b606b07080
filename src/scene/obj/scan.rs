//! The validating pass over the OBJ text, run line by line in front of tobj.
//!
//! tobj's errors carry no line numbers, it panics or silently goes wrong on some out-of-range
//! indices, it accepts `nan`, and it splits one `o`/`g` section into several models whenever
//! `usemtl` changes. So every line goes through [`ObjScan::check_line`] first: a bad line stops
//! the load with the file and line named, and what tobj is given is a cleaned-up copy of the
//! line (canonical keyword spacing, no vertex colours, no `l` polylines). On the way the scan
//! records the `o`/`g` sections that hold faces and how many triangles tobj's fan
//! triangulation will make of each, which is what lets the loader merge tobj's models back
//! into exactly one group per section.
//!
//! [`ScanReader`] wraps the file as a [`BufRead`] that hands tobj one checked line at a time,
//! so the file is read once and tobj never sees a line that has not been checked.

use std::collections::HashMap;
use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};

use indicatif::ProgressBar;

use super::LoadError;

/// Name given to faces that come before any `o`/`g` line.
pub const UNNAMED_GROUP: &str = "unnamed";

/// One `o`/`g` section of the file that holds at least one face: a group of the scene.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    /// Line of the `o`/`g` statement (or of the first face when there is none).
    pub line: usize,
    /// Triangles tobj makes of the section's faces (an n-gon is a fan of n - 2).
    pub triangles: u64,
}

/// Where a material name was first used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MaterialUse {
    pub line: usize,
    /// Whether an `mtllib` statement came before this first use (tobj resolves `usemtl`
    /// against the libraries loaded so far).
    pub after_mtllib: bool,
}

/// What a line becomes for tobj.
enum Emit {
    /// The line as it is.
    Same,
    /// A rewritten line.
    Rewritten(String),
    /// Nothing: tobj must not see it.
    Drop,
}

/// State of the validating scan: element counts so far, sections, material uses.
#[derive(Debug)]
pub struct ObjScan {
    path: PathBuf,
    line: usize,
    positions: u64,
    texcoords: u64,
    normals: u64,
    /// Name and line of the `o`/`g` statement in effect.
    current_name: String,
    current_line: usize,
    /// Whether the section in effect already holds a face (and so has an entry in `sections`).
    current_has_faces: bool,
    mtllib_seen: bool,
    pub sections: Vec<Section>,
    pub material_uses: HashMap<String, MaterialUse>,
    /// `l` (polyline) statements dropped: lines are not surfaces.
    pub polylines_dropped: usize,
    /// Vertices whose colour values were dropped (gasworks does not use vertex colours).
    pub vertex_colours_dropped: usize,
}

impl ObjScan {
    pub fn new(path: &Path) -> ObjScan {
        ObjScan {
            path: path.to_path_buf(),
            line: 0,
            positions: 0,
            texcoords: 0,
            normals: 0,
            current_name: UNNAMED_GROUP.to_string(),
            current_line: 0,
            current_has_faces: false,
            mtllib_seen: false,
            sections: Vec::new(),
            material_uses: HashMap::new(),
            polylines_dropped: 0,
            vertex_colours_dropped: 0,
        }
    }

    fn syntax(&self, message: String) -> LoadError {
        LoadError::Syntax {
            path: self.path.clone(),
            line: self.line,
            message,
        }
    }

    /// Parses one number of a `what` statement, refusing NaN and infinities.
    fn number(&self, token: Option<&str>, what: &str) -> Result<f32, LoadError> {
        let token = token.ok_or_else(|| self.syntax(format!("{what}: missing number")))?;
        let value: f32 = token
            .parse()
            .map_err(|_| self.syntax(format!("{what}: {token:?} is not a number")))?;
        if !value.is_finite() {
            return Err(LoadError::NotFinite {
                path: self.path.clone(),
                line: self.line,
                what: what.to_string(),
                value: token.to_string(),
            });
        }
        Ok(value)
    }

    /// Checks the next line of the file and says what tobj gets of it.
    fn check_line(&mut self, text: &str) -> Result<Emit, LoadError> {
        self.line += 1;
        let mut words = text.split_whitespace();
        let Some(keyword) = words.next() else {
            return Ok(Emit::Same);
        };
        match keyword {
            "v" => self.check_position(words),
            "vt" => self.check_texcoord(words),
            "vn" => {
                for _ in 0..3 {
                    self.number(words.next(), "vertex normal (vn)")?;
                }
                self.normals += 1;
                Ok(Emit::Same)
            }
            "f" => self.check_face(words),
            "l" => {
                self.polylines_dropped += 1;
                Ok(Emit::Drop)
            }
            "o" | "g" => {
                let name = rest_after_keyword(text, keyword);
                self.current_name = if name.is_empty() {
                    UNNAMED_GROUP.to_string()
                } else {
                    name.to_string()
                };
                self.current_line = self.line;
                self.current_has_faces = false;
                Ok(Emit::Rewritten(format!(
                    "{keyword} {}\n",
                    self.current_name
                )))
            }
            "usemtl" => {
                let name = rest_after_keyword(text, keyword);
                if name.is_empty() {
                    return Err(self.syntax("usemtl without a material name".into()));
                }
                let after_mtllib = self.mtllib_seen;
                self.material_uses
                    .entry(name.to_string())
                    .or_insert(MaterialUse {
                        line: self.line,
                        after_mtllib,
                    });
                Ok(Emit::Rewritten(format!("usemtl {name}\n")))
            }
            "mtllib" => {
                let name = rest_after_keyword(text, keyword);
                if name.is_empty() {
                    return Err(self.syntax("mtllib without a file name".into()));
                }
                self.mtllib_seen = true;
                Ok(Emit::Rewritten(format!("mtllib {name}\n")))
            }
            // Comments and statements tobj ignores (s, vp, p, curves...) pass as they are.
            _ => Ok(Emit::Same),
        }
    }

    /// `v x y z [w]` or `v x y z r g b` (colours are dropped).
    fn check_position<'a>(
        &mut self,
        mut words: impl Iterator<Item = &'a str>,
    ) -> Result<Emit, LoadError> {
        let what = "vertex position (v)";
        let xyz: Vec<&str> = words.by_ref().take(3).collect();
        for i in 0..3 {
            self.number(xyz.get(i).copied(), what)?;
        }
        let extra: Vec<&str> = words.collect();
        self.positions += 1;
        match extra.len() {
            0 => Ok(Emit::Same),
            1 => {
                let w = self.number(Some(extra[0]), "vertex weight (v ... w)")?;
                if w == 0.0 {
                    return Err(self.syntax("vertex weight w is 0".into()));
                }
                for c in &xyz {
                    let scaled = c.parse::<f32>().unwrap_or(f32::NAN) / w;
                    if !scaled.is_finite() {
                        return Err(LoadError::NotFinite {
                            path: self.path.clone(),
                            line: self.line,
                            what: "vertex position divided by its weight".into(),
                            value: format!("{c} / {}", extra[0]),
                        });
                    }
                }
                Ok(Emit::Same)
            }
            3 => {
                for c in &extra {
                    self.number(Some(c), "vertex colour (v x y z r g b)")?;
                }
                self.vertex_colours_dropped += 1;
                Ok(Emit::Rewritten(format!(
                    "v {} {} {}\n",
                    xyz[0], xyz[1], xyz[2]
                )))
            }
            n => Err(self.syntax(format!(
                "vertex position (v) has {} values; expected 3, 4 (x y z w) or 6 (x y z r g b)",
                n + 3
            ))),
        }
    }

    /// `vt u [v [w]]`; a missing v is 0, as the OBJ format says.
    fn check_texcoord<'a>(
        &mut self,
        mut words: impl Iterator<Item = &'a str>,
    ) -> Result<Emit, LoadError> {
        let what = "texture coordinate (vt)";
        let u = words.next();
        self.number(u, what)?;
        let v = words.next();
        self.texcoords += 1;
        match v {
            Some(v) => {
                self.number(Some(v), what)?;
                Ok(Emit::Same)
            }
            None => Ok(Emit::Rewritten(format!("vt {} 0\n", u.unwrap_or("0")))),
        }
    }

    /// `f v1[/vt1[/vn1]] v2... v3...`, each index checked against what is defined so far.
    fn check_face<'a>(&mut self, words: impl Iterator<Item = &'a str>) -> Result<Emit, LoadError> {
        let mut corners = 0u64;
        for token in words {
            corners += 1;
            let parts: Vec<&str> = token.split('/').collect();
            if parts.len() > 3 || parts[0].is_empty() {
                return Err(self.syntax(format!(
                    "face (f): {token:?} is not a vertex reference like 3, 3/1, 3//2 or 3/1/2"
                )));
            }
            let kinds = [
                ("vertex", self.positions),
                ("texture coordinate", self.texcoords),
                ("normal", self.normals),
            ];
            for (part, (kind, defined)) in parts.iter().zip(kinds) {
                if part.is_empty() {
                    continue;
                }
                let index: i64 = part.parse().map_err(|_| {
                    self.syntax(format!(
                        "face (f): {token:?} has {part:?} where a {kind} index should be"
                    ))
                })?;
                self.check_index(index, kind, defined)?;
            }
        }
        if corners < 3 {
            return Err(self.syntax(format!(
                "face (f) with {corners} vertices; a face needs at least 3"
            )));
        }
        if !self.current_has_faces {
            self.current_has_faces = true;
            let line = if self.current_line == 0 {
                self.line
            } else {
                self.current_line
            };
            self.sections.push(Section {
                name: self.current_name.clone(),
                line,
                triangles: 0,
            });
        }
        if let Some(section) = self.sections.last_mut() {
            section.triangles += corners - 2;
        }
        Ok(Emit::Same)
    }

    /// OBJ indices start at 1; negative ones count back from the last element defined so far.
    fn check_index(&self, index: i64, kind: &str, defined: u64) -> Result<(), LoadError> {
        let in_range = match index {
            0 => false,
            i if i > 0 => (i as u64) <= defined,
            i => i.unsigned_abs() <= defined,
        };
        if in_range {
            return Ok(());
        }
        let why = if index == 0 {
            "OBJ indices start at 1".to_string()
        } else {
            format!("only {defined} defined before this line")
        };
        Err(LoadError::IndexOutOfRange {
            path: self.path.clone(),
            line: self.line,
            message: format!("face (f): {kind} index {index} is out of range ({why})"),
        })
    }
}

/// The text after a statement's keyword, trimmed: names may contain spaces.
fn rest_after_keyword<'a>(text: &'a str, keyword: &str) -> &'a str {
    let trimmed = text.trim_start();
    trimmed[keyword.len()..].trim()
}

/// The OBJ file as tobj reads it: one checked (and possibly rewritten) line at a time.
///
/// A line that fails the check ends the stream with an I/O error for tobj, and the real
/// error (with file and line) is kept in [`ScanReader::error`].
pub struct ScanReader<R: BufRead> {
    inner: R,
    raw: Vec<u8>,
    out: Vec<u8>,
    pos: usize,
    pub scan: ObjScan,
    pub error: Option<LoadError>,
    progress: ProgressBar,
    bytes_since_tick: u64,
}

impl<R: BufRead> ScanReader<R> {
    pub fn new(inner: R, path: &Path, progress: ProgressBar) -> ScanReader<R> {
        ScanReader {
            inner,
            raw: Vec::new(),
            out: Vec::new(),
            pos: 0,
            scan: ObjScan::new(path),
            error: None,
            progress,
            bytes_since_tick: 0,
        }
    }

    fn stop(&mut self, error: LoadError) -> io::Error {
        let message = error.to_string();
        self.error = Some(error);
        io::Error::other(message)
    }

    /// Reads lines until one yields something for tobj (or the file ends).
    fn next_line(&mut self) -> io::Result<()> {
        while self.pos >= self.out.len() {
            if self.error.is_some() {
                return Err(io::Error::other("the OBJ scan already failed"));
            }
            self.raw.clear();
            self.out.clear();
            self.pos = 0;
            let n = match self.inner.read_until(b'\n', &mut self.raw) {
                Ok(n) => n,
                Err(source) => {
                    let error = LoadError::Read {
                        path: self.scan.path.clone(),
                        line: self.scan.line + 1,
                        source,
                    };
                    return Err(self.stop(error));
                }
            };
            if n == 0 {
                return Ok(());
            }
            self.bytes_since_tick += n as u64;
            if self.bytes_since_tick >= 1 << 20 {
                self.progress.inc(self.bytes_since_tick);
                self.bytes_since_tick = 0;
            }
            // Invalid UTF-8 (a Latin-1 comment, say) is replaced rather than refused: tobj
            // would fail the whole file on it.
            let text = String::from_utf8_lossy(&self.raw);
            match self.scan.check_line(&text) {
                Ok(Emit::Same) => {
                    self.out.extend_from_slice(text.as_bytes());
                    if !self.out.ends_with(b"\n") {
                        self.out.push(b'\n');
                    }
                }
                Ok(Emit::Rewritten(line)) => self.out.extend_from_slice(line.as_bytes()),
                Ok(Emit::Drop) => {}
                Err(error) => return Err(self.stop(error)),
            }
        }
        Ok(())
    }
}

impl<R: BufRead> Read for ScanReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for ScanReader<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.next_line()?;
        Ok(&self.out[self.pos..])
    }

    fn consume(&mut self, amount: usize) {
        self.pos = (self.pos + amount).min(self.out.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str) -> Result<ObjScan, LoadError> {
        let mut s = ObjScan::new(Path::new("t.obj"));
        for line in text.lines() {
            s.check_line(line)?;
        }
        Ok(s)
    }

    #[test]
    fn sections_count_fan_triangles_and_skip_faceless_groups() {
        let s = scan(
            "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0 2 0\n\
             g empty\n\
             g a\nf 1 2 3 4\nusemtl m\nf 1 2 3 4 5\n\
             o b\nf 1 2 3\n",
        )
        .unwrap();
        let got: Vec<(&str, u64)> = s
            .sections
            .iter()
            .map(|x| (x.name.as_str(), x.triangles))
            .collect();
        assert_eq!(got, vec![("a", 5), ("b", 1)]);
        assert_eq!(s.sections[0].line, 7);
    }

    #[test]
    fn faces_before_any_group_form_the_unnamed_section() {
        let s = scan("v 0 0 0\nv 1 0 0\nv 1 1 0\nf 1 2 3\n").unwrap();
        assert_eq!(s.sections.len(), 1);
        assert_eq!(s.sections[0].name, UNNAMED_GROUP);
        assert_eq!(s.sections[0].line, 4);
    }

    #[test]
    fn relative_and_absolute_indices_are_checked_against_defined_counts() {
        let base = "v 0 0 0\nv 1 0 0\nv 1 1 0\n";
        assert!(scan(&format!("{base}f -1 -2 -3\n")).is_ok());
        let e = scan(&format!("{base}f -1 -2 -4\n")).unwrap_err();
        assert!(
            matches!(e, LoadError::IndexOutOfRange { line: 4, .. }),
            "{e}"
        );
        let e = scan(&format!("{base}f 1 2 4\n")).unwrap_err();
        assert!(
            matches!(e, LoadError::IndexOutOfRange { line: 4, .. }),
            "{e}"
        );
        let e = scan(&format!("{base}f 0 1 2\n")).unwrap_err();
        assert!(e.to_string().contains("start at 1"), "{e}");
        let e = scan(&format!("{base}f 1/1 2/1 3/1\n")).unwrap_err();
        assert!(e.to_string().contains("texture coordinate index 1"), "{e}");
        let e = scan(&format!("{base}vn 0 0 1\nf 1//1 2//1 3//-2\n")).unwrap_err();
        assert!(e.to_string().contains("normal index -2"), "{e}");
    }

    #[test]
    fn numbers_must_parse_and_be_finite() {
        let e = scan("v 0 0 x\n").unwrap_err();
        assert!(matches!(e, LoadError::Syntax { line: 1, .. }), "{e}");
        let e = scan("v 0 0 0\nv nan 0 0\n").unwrap_err();
        assert!(matches!(e, LoadError::NotFinite { line: 2, .. }), "{e}");
        let e = scan("vn 0 inf 0\n").unwrap_err();
        assert!(matches!(e, LoadError::NotFinite { line: 1, .. }), "{e}");
        let e = scan("v 1 1 1 0\n").unwrap_err();
        assert!(e.to_string().contains("weight"), "{e}");
        let e = scan("v 1 1\n").unwrap_err();
        assert!(e.to_string().contains("missing number"), "{e}");
        let e = scan("v 1 1 1 1 1\n").unwrap_err();
        assert!(e.to_string().contains("5 values"), "{e}");
    }

    #[test]
    fn faces_need_three_corners_and_well_formed_references() {
        let base = "v 0 0 0\nv 1 0 0\nv 1 1 0\n";
        let e = scan(&format!("{base}f 1 2\n")).unwrap_err();
        assert!(e.to_string().contains("2 vertices"), "{e}");
        let e = scan(&format!("{base}f 1 2 a\n")).unwrap_err();
        assert!(matches!(e, LoadError::Syntax { line: 4, .. }), "{e}");
        let e = scan(&format!("{base}f 1/1/1/1 2 3\n")).unwrap_err();
        assert!(matches!(e, LoadError::Syntax { line: 4, .. }), "{e}");
    }

    #[test]
    fn reader_rewrites_and_drops_lines_for_tobj() {
        let text = "v 0 0 0 1 0 0\n\tg   spaced name \nl 1 2\nvt 0.5\n";
        let mut r = ScanReader::new(text.as_bytes(), Path::new("t.obj"), ProgressBar::hidden());
        let mut out = String::new();
        r.read_to_string(&mut out).unwrap();
        assert_eq!(out, "v 0 0 0\ng spaced name\nvt 0.5 0\n");
        assert_eq!(r.scan.polylines_dropped, 1);
        assert_eq!(r.scan.vertex_colours_dropped, 1);
    }
}
