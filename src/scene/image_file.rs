//! Decoding an image file (a texture, an environment map, a crop for `merge`) with its memory
//! bounded by the file's size: a header that claims a huge image in a small file is refused
//! before its pixels are allocated.

use std::path::Path;

/// The most bytes an image file's pixels may take, as gasworks holds them, for each byte of
/// the file, past [`FREE_BYTES`]. Deflate, the strongest codec of PNG and EXR, expands
/// 1032-fold at most, and a texel is held in at most twice what it decodes to, so a real file
/// lies within it.
pub const EXPANSION_LIMIT: u64 = 2048;

/// What an image file's pixels may take whatever its size.
pub const FREE_BYTES: u64 = 8 << 20;

/// The bytes of pixels a file of `file_bytes` may hold.
pub fn allowance(file_bytes: u64) -> u64 {
    FREE_BYTES.saturating_add(EXPANSION_LIMIT.saturating_mul(file_bytes))
}

/// Why a `width` x `height` image of `bytes_per_pixel` does not fit a file of `file_bytes`,
/// if it does not.
pub fn outgrows(width: u64, height: u64, bytes_per_pixel: u64, file_bytes: u64) -> Option<String> {
    let bytes = width.saturating_mul(height).saturating_mul(bytes_per_pixel);
    (bytes > allowance(file_bytes)).then(|| {
        format!(
            "its {width}x{height} pixels would take {bytes} bytes, more than a file of \
             {file_bytes} bytes can hold (it looks cut short or damaged)"
        )
    })
}

/// Opens and decodes an image of at least one pixel, refusing one whose header claims more
/// than its bytes can hold (16 bytes a pixel: RGBA in `f32`, the most a decoded image holds).
pub fn decode(path: &Path) -> Result<image::DynamicImage, String> {
    let file_bytes = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    let reader = || -> Result<_, String> {
        image::ImageReader::open(path)
            .map_err(|e| e.to_string())?
            .with_guessed_format()
            .map_err(|e| e.to_string())
    };
    let (width, height) = reader()?.into_dimensions().map_err(|e| e.to_string())?;
    if let Some(why) = outgrows(width.into(), height.into(), 16, file_bytes) {
        return Err(why);
    }
    let mut reader = reader()?;
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(allowance(file_bytes));
    reader.limits(limits);
    let image = reader.decode().map_err(|e| e.to_string())?;
    if image.width() == 0 || image.height() == 0 {
        return Err("the image is empty".into());
    }
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_fits_its_file_up_to_the_allowance_and_not_a_byte_more() {
        let file = 1000;
        let allowed = FREE_BYTES + EXPANSION_LIMIT * file;
        assert_eq!(allowance(file), allowed);
        // 16 bytes a pixel: a row of allowed / 16 pixels fits exactly, one more does not.
        assert_eq!(outgrows(allowed / 16, 1, 16, file), None);
        let why = outgrows(allowed / 16 + 1, 1, 16, file).expect("a pixel too many");
        assert!(
            why.contains("more than a file of 1000 bytes can hold"),
            "{why}"
        );
        // A header's sizes never wrap around.
        assert!(outgrows(u64::MAX, u64::MAX, 16, 0).is_some());
    }
}
