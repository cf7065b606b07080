//! Colour helpers every layer shares: the scene's lights and environment maps weigh their
//! radiance by luminance, as the film, the denoiser and adaptive sampling weigh pixels. It sits
//! below every layer so that each can use it without importing another.

use glam::Vec3;

/// Luminance of linear Rec.709 RGB.
#[inline]
pub fn luminance(c: Vec3) -> f32 {
    0.2126 * c.x + 0.7152 * c.y + 0.0722 * c.z
}
