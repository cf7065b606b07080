//! Tile scheduling: spreads a frame's tiles over workers.

use crate::cli::ScheduleArgs;
use crate::render::{Film, RenderSettings, Tile, TileRenderer};
use rayon::prelude::*;

/// Renders a whole frame. (Simple version: equal tiles over rayon; the cost-map scheduler
/// replaces it.)
pub fn render_frame(
    renderer: &dyn TileRenderer,
    settings: &RenderSettings,
    _args: &ScheduleArgs,
    _quiet: bool,
) -> anyhow::Result<Film> {
    let tiles = Tile::grid(settings.width, settings.height, 32);
    let results: Vec<anyhow::Result<(Tile, Vec<[f32; 4]>)>> = tiles
        .par_iter()
        .map(|&t| {
            let mut acc = vec![[0.0f32; 4]; t.pixel_count()];
            renderer.render_tile(t, 0..settings.spp, &mut acc)?;
            Ok((t, acc))
        })
        .collect();
    let mut film = Film::new(settings.width, settings.height);
    for r in results {
        let (t, acc) = r?;
        film.write_tile(t, &acc);
    }
    Ok(film)
}
