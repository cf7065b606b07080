//! Writing the film: PNG (tone-mapped, sRGB, 8 bit) or OpenEXR (linear, 32-bit float), chosen
//! by the output path's extension.

use std::path::{Path, PathBuf};

use super::Film;

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{path}: unknown image format (use .png for a tone-mapped image or .exr for linear radiance)")]
    UnknownFormat { path: PathBuf },
    #[error("{path}: cannot write the image: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: image::ImageError,
    },
    #[error("{path}: cannot write the image: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The two formats gasworks writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    Png,
    Exr,
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
            _ => Err(OutputError::UnknownFormat {
                path: path.to_path_buf(),
            }),
        }
    }
}

/// Checks, before a long render, that the output path has a known format and that its folder
/// exists and can be written, so that a render is never lost at the very end.
pub fn check_writable(path: &Path) -> Result<ImageFormat, OutputError> {
    let format = ImageFormat::from_path(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let probe = dir.join(format!(".gasworks-write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|source| OutputError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if path.is_dir() {
        return Err(OutputError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory"),
        });
    }
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

/// Tone mapping for PNG: exposure 1, then a clamp to [0, 1] (radiance above 1 saturates, so a
/// furnace-white object is exactly white), then sRGB encoding.
pub fn to_srgb8(rgb: [f32; 3]) -> [u8; 3] {
    rgb.map(|c| {
        let c = if c.is_finite() {
            c.clamp(0.0, 1.0)
        } else {
            0.0
        };
        (linear_to_srgb(c) * 255.0 + 0.5) as u8
    })
}

/// Writes the film's mean radiance to `path`, in the format its extension names.
pub fn write_image(film: &Film, path: &Path) -> Result<(), OutputError> {
    let format = ImageFormat::from_path(path)?;
    let mean = film.mean();
    let err = |source| OutputError::Write {
        path: path.to_path_buf(),
        source,
    };
    match format {
        ImageFormat::Png => {
            let bytes: Vec<u8> = mean.iter().flat_map(|&p| to_srgb8(p)).collect();
            let img = image::RgbImage::from_raw(film.width, film.height, bytes)
                .expect("film size matches its pixel count");
            img.save_with_format(path, image::ImageFormat::Png)
                .map_err(err)
        }
        ImageFormat::Exr => {
            let floats: Vec<f32> = mean.iter().flatten().copied().collect();
            let img = image::Rgb32FImage::from_raw(film.width, film.height, floats)
                .expect("film size matches its pixel count");
            img.save_with_format(path, image::ImageFormat::OpenExr)
                .map_err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(ImageFormat::from_path(Path::new("a.jpg")).is_err());
        assert!(ImageFormat::from_path(Path::new("a")).is_err());
    }

    #[test]
    fn png_and_exr_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut film = Film::new(3, 2);
        for (i, p) in film.pixels.iter_mut().enumerate() {
            *p = [i as f32 * 0.5, 0.25, 4.0, 2.0];
        }
        let exr = dir.path().join("x.exr");
        write_image(&film, &exr).unwrap();
        let back = image::open(&exr).unwrap().to_rgb32f();
        assert_eq!(back.get_pixel(2, 1).0, [1.25, 0.125, 2.0]);
        let png = dir.path().join("x.png");
        write_image(&film, &png).unwrap();
        let back = image::open(&png).unwrap().to_rgb8();
        assert_eq!(back.get_pixel(0, 0).0, [0, 99, 255]);
    }

    #[test]
    fn unwritable_paths_are_refused_up_front() {
        assert!(check_writable(Path::new("/nonexistent-dir/x.png")).is_err());
        let dir = tempfile::tempdir().unwrap();
        assert!(check_writable(&dir.path().join("x.png")).is_ok());
        assert!(check_writable(&dir.path().join("x.tiff")).is_err());
    }
}
