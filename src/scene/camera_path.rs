//! A camera path (`gasworks render --camera-path PATH.csv`): one camera per frame, read from a
//! CSV file, one row per frame and in order. Rows are not interpolated: a smooth fly-through
//! gives a row for every frame (`gasworks gen` writes such paths).
//!
//! Each row holds ten numbers: the eye, the look-at point and the up vector (x, y, z each),
//! then the vertical field of view in degrees; the optional first line is [`HEADER`]. Blank
//! lines and lines starting with `#` are skipped. A row that is malformed, or whose camera
//! could not render (the eye at the look-at point, up along the view, a field of view
//! outside 0 to 180 degrees), is an error naming its line.

use std::path::{Path, PathBuf};

use glam::Vec3;

use super::camera::{Camera, CameraChoice};

/// The header line of a camera path.
pub const HEADER: &str = "eye_x,eye_y,eye_z,look_x,look_y,look_z,up_x,up_y,up_z,fov_deg";

/// One frame's camera, and the line of the file it came from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathFrame {
    pub line: usize,
    pub camera: Camera,
}

impl PathFrame {
    /// The camera as a render's choice: every value given.
    pub fn choice(&self) -> CameraChoice {
        CameraChoice {
            eye: Some(self.camera.eye),
            look_at: Some(self.camera.look_at),
            up: Some(self.camera.up),
            fov: Some(self.camera.fov_y_deg),
        }
    }
}

/// The frames of a camera path, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct CameraPath {
    pub frames: Vec<PathFrame>,
}

#[derive(Debug, thiserror::Error)]
pub enum CameraPathError {
    #[error("camera path {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("camera path {}: line {line}: {reason}", path.display())]
    Row {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("camera path {}: no frames (one row per frame: {HEADER})", path.display())]
    Empty { path: PathBuf },
}

impl CameraPath {
    /// Reads and checks the camera path at `path`.
    pub fn read(path: &Path) -> Result<CameraPath, CameraPathError> {
        let text = std::fs::read_to_string(path).map_err(|source| CameraPathError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        CameraPath::parse(&text, path)
    }

    /// Parses and checks a camera path's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<CameraPath, CameraPathError> {
        let mut frames = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let row = raw.trim();
            if row.is_empty() || row.starts_with('#') || (frames.is_empty() && is_header(row)) {
                continue;
            }
            let camera = parse_row(row).map_err(|reason| CameraPathError::Row {
                path: path.to_path_buf(),
                line: i + 1,
                reason,
            })?;
            frames.push(PathFrame {
                line: i + 1,
                camera,
            });
        }
        if frames.is_empty() {
            return Err(CameraPathError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(CameraPath { frames })
    }

    /// The path as its file holds it: the header, then a row per frame (each number written
    /// so that it reads back to the same float).
    pub fn to_csv(&self) -> String {
        let mut text = format!("{HEADER}\n");
        for f in &self.frames {
            let c = &f.camera;
            let numbers: Vec<String> = [c.eye, c.look_at, c.up]
                .iter()
                .flat_map(|v| v.to_array())
                .chain([c.fov_y_deg])
                .map(|x| format!("{x:?}"))
                .collect();
            text.push_str(&numbers.join(","));
            text.push('\n');
        }
        text
    }
}

fn is_header(row: &str) -> bool {
    row.split(',')
        .next()
        .is_some_and(|f| f.trim().parse::<f32>().is_err())
}

/// A row's camera, or why it cannot be one.
fn parse_row(row: &str) -> Result<Camera, String> {
    let fields: Vec<&str> = row.split(',').map(str::trim).collect();
    if fields.len() != 10 {
        return Err(format!(
            "{} values where a row has 10 ({HEADER})",
            fields.len()
        ));
    }
    let mut x = [0.0f32; 10];
    for (k, f) in fields.iter().enumerate() {
        x[k] = f
            .parse::<f32>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("value {} ({f:?}) is not a finite number", k + 1))?;
    }
    let camera = Camera {
        eye: Vec3::new(x[0], x[1], x[2]),
        look_at: Vec3::new(x[3], x[4], x[5]),
        up: Vec3::new(x[6], x[7], x[8]),
        fov_y_deg: x[9],
    };
    camera.frame(1, 1).map_err(|e| e.to_string())?;
    Ok(camera)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CameraPath, CameraPathError> {
        CameraPath::parse(text, Path::new("walk.csv"))
    }

    #[test]
    fn rows_read_back_from_the_file_they_write() {
        let text =
            format!("{HEADER}\n# a comment\n0,1,5, 0,1,0, 0,1,0, 40\n\n1.5,1,5,0,1,0,0,1,0,39.3\n");
        let path = parse(&text).unwrap();
        assert_eq!(path.frames.len(), 2);
        assert_eq!(path.frames[0].line, 3);
        assert_eq!(path.frames[1].line, 5);
        assert_eq!(path.frames[1].camera.eye, Vec3::new(1.5, 1.0, 5.0));
        assert_eq!(parse(&path.to_csv()).unwrap().frames.len(), 2);
        let again = parse(&path.to_csv()).unwrap();
        let cameras = |p: &CameraPath| p.frames.iter().map(|f| f.camera).collect::<Vec<_>>();
        assert_eq!(cameras(&again), cameras(&path));
    }

    #[test]
    fn a_bad_row_is_named_by_its_line() {
        for (text, line, what) in [
            ("0,1,5,0,1,0,0,1,0,40\n0,1,5,0,1,0,0,1,0\n", 2, "9 values"),
            (
                "0,1,5,0,1,0,0,1,0,40\n0,1,x,0,1,0,0,1,0,40\n",
                2,
                "value 3 (\"x\")",
            ),
            ("0,1,5,0,1,0,0,1,0,inf\n", 1, "value 10"),
            ("0,1,5,0,1,5,0,1,0,40\n", 1, "the same point"),
            ("0,1,5,0,1,0,0,0,1,40\n", 1, "parallel"),
            ("0,1,5,0,1,0,0,1,0,180\n", 1, "between 0 and 180"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("camera path walk.csv: line {line}: ")) && e.contains(what),
                "{text:?}: {e}"
            );
        }
        let e = parse(&format!("{HEADER}\n# nothing\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no frames"), "{e}");
    }
}
